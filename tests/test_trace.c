/* test_trace.c — `--trace FILE`: a Chrome trace-event JSON of one training step, one lane per device.
 *
 * Short in-process runs (mnist-mlp, synthetic data, a few steps) on cpu, threads, mirrored (2 devices)
 * and ipu (2 stages); each trace is parsed back with util/json.c and checked: "M" metadata naming
 * every lane, complete events on every lane, durations ≥ 0, every event inside the step, per-layer
 * event names matching the model's layers, the chosen step, and the result row's config.trace and
 * figures.trace. Also the writer on a hand-made capture (lane names, nesting spans) and the option checks.
 */
#include "test_harness_util.h"

#include "backend.h"
#include "json.h"
#include "progress.h"
#include "results.h"
#include "run.h"
#include "status.h"
#include "trace.h"
#include "workload.h"

#include <math.h>
#include <unistd.h>

static void small_run(struct bench_config *c, const char *backend, const char *plan, const char *trace)
{
    char p[192];
    bench_config_defaults(c);
    cr_assert_eq(bench_config_set(c, "backend", backend), TB_OK);
    cr_assert_eq(bench_config_set(c, "plan", plan), TB_OK);
    cr_assert_eq(bench_config_set(c, "batch", "16"), TB_OK);
    cr_assert_eq(bench_config_set(c, "steps", "3"), TB_OK);
    cr_assert_eq(bench_config_set(c, "warmup", "1"), TB_OK);
    cr_assert_eq(bench_config_set(c, "mllog", "none"), TB_OK);
    cr_assert_eq(bench_config_set(c, "trace", th_path(p, sizeof p, trace)), TB_OK);
    th_bench_quiet(c, 256, 64);
}

struct last_row {
    struct json_value *row;
};

static int keep_last(const struct json_value *row, long line, void *ctx)
{
    (void)line;
    struct last_row *r = ctx;
    json_value_free(r->row);
    cr_assert_eq(json_value_copy(row, &r->row), TB_OK);
    return TB_OK;
}

/* The model the runs train (mnist-mlp on the 28×28×1 synthetic set, 10 classes). */
static void build_model(struct model *m)
{
    struct workload_opts o = {.classes = 10, .in_h = 28, .in_w = 28, .in_c = 1, .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_mnist_mlp.build(m, &o), TB_OK, "%s", tb_error_get());
}

struct lanes {
    int n;                 /* lanes named by thread_name metadata */
    int named[16];
    int events[16];        /* complete events per lane */
    int fwd[16][64];       /* per lane, per layer: forward events */
    int bwd[16][64];
    int phases[16];        /* micro-batch phase events (ipu) */
    long step;
};

/* Parses a trace file and checks what every trace must satisfy; fills the per-lane tallies. */
static void check_trace(const char *path, const struct model *m, struct lanes *L)
{
    memset(L, 0, sizeof *L);
    char *text = th_read(path);
    struct json_value *doc = NULL;
    cr_assert_eq(json_parse(text, strlen(text), &doc), TB_OK, "%s: %s", path, tb_error_get());
    free(text);
    cr_assert_str_eq(json_get_str(doc, "displayTimeUnit", ""), "ms");
    const double step_us = json_get_number(doc, "otherData.step_us", NAN);
    cr_assert(step_us > 0.0, "otherData.step_us is the step's wall time");
    L->step = (long)json_get_number(doc, "otherData.step", -1);
    const struct json_value *ev = json_get(doc, "traceEvents");
    cr_assert(ev && ev->type == JSON_ARRAY && ev->n > 0);
    for (int k = 0; k < ev->n; k++) {
        const struct json_value *e = &ev->items[k];
        const char *ph = json_get_str(e, "ph", "");
        const int tid = (int)json_get_number(e, "tid", -1);
        cr_assert_eq(json_get_number(e, "pid", -1), 0);
        cr_assert(tid >= 0 && tid < 16, "tid %d", tid);
        if (!strcmp(ph, "M")) {
            if (!strcmp(json_get_str(e, "name", ""), "thread_name")) {
                cr_assert(strlen(json_get_str(e, "args.name", "")) > 0, "a lane needs a name");
                cr_assert(!L->named[tid], "lane %d named twice", tid);
                L->named[tid] = 1;
                L->n++;
            }
            continue;
        }
        cr_assert_str_eq(ph, "X", "only complete and metadata events");
        cr_assert(L->named[tid], "event on lane %d before its name", tid);
        const double ts = json_get_number(e, "ts", NAN), dur = json_get_number(e, "dur", NAN);
        cr_assert(ts >= 0.0 && dur >= 0.0, "ts %g dur %g", ts, dur);
        cr_assert(ts + dur <= step_us + 1e-3, "event %s ends at %g us, after the %g us step",
                  json_get_str(e, "name", ""), ts + dur, step_us);
        L->events[tid]++;
        const char *cat = json_get_str(e, "cat", "");
        const double layer = json_get_number(e, "args.layer", -1);
        if (layer >= 0) {
            const int i = (int)layer;
            cr_assert(i < m->n_layers && i < 64);
            char want[96];
            const int bw = !strcmp(cat, "backward");
            cr_assert(bw || !strcmp(cat, "forward"), "layer event of category %s", cat);
            snprintf(want, sizeof want, "%s %s", m->layers[i].name, bw ? "bwd" : "fwd");
            cr_assert_str_eq(json_get_str(e, "name", ""), want);
            cr_assert_str_eq(json_get_str(e, "args.op", ""), model_op_name(m->layers[i].op));
            (bw ? L->bwd : L->fwd)[tid][i]++;
        } else if (json_get_number(e, "args.micro_batch", -1) >= 0) {
            L->phases[tid]++;
        }
    }
    json_value_free(doc);
}

/* Runs c, then reads its trace (path into p) against the model the run trained, m (the caller frees it). */
static void run_and_read(const struct bench_config *c, const char *trace, struct model *m, struct lanes *L, char *p,
                         size_t np)
{
    cr_assert_eq(bench_run(c), TB_OK, "%s", tb_error_get());
    build_model(m);
    check_trace(th_path(p, np, trace), m, L);
}

/* Every lane carries one forward per layer and a backward for each layer that has one. */
static void check_layers_per_lane(const struct lanes *L, const struct model *m)
{
    for (int d = 0; d < L->n; d++) {
        cr_assert(L->named[d], "lanes are numbered from 0 without gaps");
        cr_assert(L->events[d] > 0, "lane %d has no events", d);
        int bwd = 0;
        for (int i = 0; i < m->n_layers; i++) {
            cr_assert_eq(L->fwd[d][i], 1, "lane %d layer %s: %d forward events", d, m->layers[i].name, L->fwd[d][i]);
            cr_assert(L->bwd[d][i] <= 1);
            bwd += L->bwd[d][i];
        }
        cr_assert(bwd >= 4, "mnist-mlp's dense and activation layers have a backward (lane %d: %d)", d, bwd);
    }
}

static struct json_value *last_row(void)
{
    char p[192];
    struct last_row r = {0};
    cr_assert_eq(results_read_rows(th_path(p, sizeof p, "rows.jsonl"), keep_last, &r), TB_OK);
    cr_assert_not_null(r.row);
    return r.row;
}

static void check_row(const char *trace, int lanes, long step)
{
    char p[192];
    struct json_value *row = last_row();
    cr_assert_str_eq(json_get_str(row, "config.trace", ""), th_path(p, sizeof p, trace));
    cr_assert_eq(json_get_bool(row, "config.profile", 0), 1, "--trace implies --profile");
    cr_assert_eq(json_get_number(row, "figures.trace.lanes", -1), lanes);
    cr_assert_eq(json_get_number(row, "figures.trace.step", -1), step);
    cr_assert(json_get_number(row, "figures.trace.events", 0) > 0);
    cr_assert_str_eq(json_get_str(row, "figures.trace.label", ""), "measured");
    json_value_free(row);
}

Test(trace, cpu_one_lane_with_every_layer, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    small_run(&c, "cpu", "throughput", "cpu.json");
    struct model m;
    struct lanes L;
    char p[192];
    run_and_read(&c, "cpu.json", &m, &L, p, sizeof p);
    cr_assert_eq(L.n, 1);
    check_layers_per_lane(&L, &m);
    cr_assert_eq(L.step, 4, "the last of 1 warm-up + 3 timed steps");
    check_row("cpu.json", 1, 4);
    model_free(&m);
}

Test(trace, threads_is_one_lane_for_the_pool, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    small_run(&c, "threads", "throughput", "thr.json");
    cr_assert_eq(bench_config_set(&c, "threads", "2"), TB_OK);
    struct model m;
    struct lanes L;
    char p[192];
    run_and_read(&c, "thr.json", &m, &L, p, sizeof p);
    cr_assert_eq(L.n, 1, "thread 0's view stands for the SPMD pool");
    check_layers_per_lane(&L, &m);
    char *text = th_read(p);
    cr_assert(strstr(text, "thread 0 of 2") != NULL, "the lane says whose clock it is");
    free(text);
    model_free(&m);
}

Test(trace, mirrored_one_lane_per_replica, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    small_run(&c, "mirrored", "throughput", "mir.json");
    cr_assert_eq(bench_config_set(&c, "devices", "2"), TB_OK);
    struct model m;
    struct lanes L;
    char p[192];
    run_and_read(&c, "mir.json", &m, &L, p, sizeof p);
    cr_assert_eq(L.n, 2);
    check_layers_per_lane(&L, &m);
    char *text = th_read(p);
    cr_assert(strstr(text, "\"all-reduce\"") != NULL, "each replica's all-reduce is on its lane");
    cr_assert(strstr(text, "\"update\"") != NULL);
    free(text);
    check_row("mir.json", 2, 4);
    model_free(&m);
}

Test(trace, ipu_one_lane_per_stage_device, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    small_run(&c, "ipu", "throughput", "ipu.json");
    cr_assert_eq(bench_config_set(&c, "stages", "2"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "micro-batch", "4"), TB_OK);
    struct model m;
    struct lanes L;
    char p[192];
    run_and_read(&c, "ipu.json", &m, &L, p, sizeof p);
    cr_assert_eq(L.n, 2, "2 stages x 1 replica");
    for (int d = 0; d < 2; d++)
        cr_assert_eq(L.phases[d], 8, "lane %d: a forward and a backward for each of the 4 micro-batches (%d)", d,
                     L.phases[d]);
    char *text = th_read(p);
    cr_assert(strstr(text, "device 1 (stage 1, replica 0)") != NULL);
    cr_assert(strstr(text, "\"forward mb 3\"") != NULL);
    free(text);
    check_row("ipu.json", 2, 4);
    model_free(&m);
}

Test(trace, train_plan_records_the_chosen_step, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    small_run(&c, "cpu", "train", "train.json");
    cr_assert_eq(bench_config_set(&c, "steps", "5"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "trace-step", "2"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "no-eval", NULL), TB_OK);
    struct model m;
    struct lanes L;
    char p[192];
    run_and_read(&c, "train.json", &m, &L, p, sizeof p);
    cr_assert_eq(L.step, 2);
    check_row("train.json", 1, 2);
    model_free(&m);
}

/* A trace file that cannot be written (a full device) leaves the row without figures.trace and the run failed,
 * naming the file: a requested output is missing (it once was a warning and exit 0). */
Test(trace, unwritable_file_fails_the_run_and_keeps_the_row, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    if (access("/dev/full", W_OK) != 0) cr_skip_test("no writable /dev/full here");
    struct bench_config c;
    small_run(&c, "cpu", "throughput", "unused.json");
    cr_assert_eq(bench_config_set(&c, "trace", "/dev/full"), TB_OK);
    cr_assert_eq(bench_run(&c), TB_EIO, "a trace that was not written is a failed run");
    cr_assert(strstr(tb_error_get(), "/dev/full") && strstr(tb_error_get(), "the result row was written"), "%s",
              tb_error_get());
    tb_error_clear();
    struct json_value *row = last_row();
    cr_assert_str_eq(json_get_str(row, "status", ""), "ok");
    cr_assert_null(json_get(row, "figures.trace"), "no trace, no figures.trace");
    json_value_free(row);
}

Test(trace, writer_names_lanes_and_nests_spans, .init = th_setup, .fini = th_teardown)
{
    struct model m;
    build_model(&m);
    struct trace_event ev[] = {
        {0, 1, -1, 'F', 1e-6, 3e-6}, {0, 2, -1, 'F', 3e-6, 7e-6}, {0, 2, -1, 'B', 8e-6, 9e-6},
        {0, -1, -1, 'U', 9e-6, 1e-5},
    };
    struct trace_capture t = {.step = 7, .step_s = 2e-5, .ev = ev, .n_ev = 4};
    struct trace_meta meta = {"threads", "mnist-mlp", "threads: 4 threads", "id", 4};
    struct json_buf b;
    json_buf_init(&b);
    trace_write_json(&b, &t, &m, &meta);
    cr_assert_eq(json_buf_status(&b), TB_OK);
    const char *s = json_buf_str(&b);
    struct json_value *doc = NULL;
    cr_assert_eq(json_parse(s, strlen(s), &doc), TB_OK, "%s", tb_error_get());
    cr_assert(strstr(s, "threads: thread 0 of 4") != NULL, "%s", s);
    /* The forward span encloses the layers' forward events exactly, so viewers nest them. */
    const struct json_value *te = json_get(doc, "traceEvents");
    int found = 0;
    for (int k = 0; k < te->n; k++)
        if (!strcmp(json_get_str(&te->items[k], "name", ""), "forward")) {
            cr_assert_float_eq(json_get_number(&te->items[k], "ts", -1), 1.0, 1e-9);
            cr_assert_float_eq(json_get_number(&te->items[k], "dur", -1), 6.0, 1e-9);
            found = 1;
        }
    cr_assert(found);
    char want[96];
    snprintf(want, sizeof want, "\"%s fwd\"", m.layers[2].name);
    cr_assert(strstr(s, want) != NULL);
    cr_assert_eq(trace_capture_lanes(&t), 1);
    json_value_free(doc);
    json_buf_free(&b);

    /* Pipelined: lanes named by stage and replica from the timeline. */
    struct timeline_event tl[] = {{0, 0, 0, 0, 'F', 0.0, 1e-6}, {1, 1, 0, 0, 'F', 1e-6, 2e-6},
                                  {1, 1, 0, -1, 'U', 2e-6, 3e-6}};
    struct trace_capture t2 = {.step = 1, .step_s = 1e-5, .tl = tl, .n_tl = 3};
    json_buf_init(&b);
    trace_write_json(&b, &t2, &m, &meta);
    cr_assert_eq(json_buf_status(&b), TB_OK);
    cr_assert(strstr(json_buf_str(&b), "device 1 (stage 1, replica 0)") != NULL);
    cr_assert(strstr(json_buf_str(&b), "\"forward mb 0\"") != NULL);
    cr_assert_eq(trace_capture_lanes(&t2), 2);
    json_buf_free(&b);
    model_free(&m);
}

Test(trace, options_are_checked)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "trace-step", "0"), TB_EINVAL, "steps are 1-based");
    cr_assert_eq(bench_config_set(&c, "trace-step", "3"), TB_OK);
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "--trace FILE") != NULL, "%s", tb_error_get());
    bench_config_defaults(&c);
    bench_config_set(&c, "plan", "scaling");
    bench_config_set(&c, "trace", "x.json");
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL, "a sweep is many runs");
    bench_config_defaults(&c);
    bench_config_set(&c, "plan", "inference");
    bench_config_set(&c, "trace", "x.json");
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL, "inference has no training step");
    bench_config_defaults(&c);
    bench_config_set(&c, "steps", "5");
    bench_config_set(&c, "warmup", "2");
    bench_config_set(&c, "plan", "throughput");
    bench_config_set(&c, "trace", "x.json");
    bench_config_set(&c, "trace-step", "8");
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "7 steps") != NULL, "%s", tb_error_get());
    bench_config_set(&c, "trace-step", "7");
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    cr_assert(c.run.trace && c.run.profile);
}
