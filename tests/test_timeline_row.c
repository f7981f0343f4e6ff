/* test_timeline_row.c — backend_timeline and figures.timeline: the ipu backend keeps its last training
 * step's intervals (per device, stage, replica, micro-batch, phase) through a later evaluation, the row
 * writer turns them into valid compact JSON with the step's span, and caps a long timeline at whole
 * devices with a truncation flag; a backend without a timeline writes nothing. */
#include "test_util.h"

#include "backend.h"
#include "json.h"
#include "status.h"
#include "timeline_row.h"
#include "workload.h"

/* Trains `steps` steps of mnist-mlp on backend name (ipu: 2 stages, ga micro-batches of mb samples),
 * evaluates once, then writes the timeline into {"figures":{...}} and returns the parsed row. */
static struct json_value *train_and_write(const char *name, int mb, int ga, int steps, int *n_events)
{
    struct model m;
    struct workload_opts o = {.classes = 10, .dropout = -1, .drop_connect = -1, .in_h = 28, .in_w = 28, .in_c = 1};
    const struct workload *w = &workload_mnist_mlp;
    cr_assert_eq(w->build(&m, &o), TB_OK, "%s", tb_error_get());
    const int batch = mb * ga;
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(batch * steps, 28, 28, 1, 10, 7, 1, &ds), TB_OK, "%s", tb_error_get());
    int32_t *labels = malloc((size_t)ds.n * sizeof *labels);
    cr_assert_not_null(labels);
    for (int i = 0; i < ds.n; i++) labels[i] = ds.labels[i];
    struct backend b;
    cr_assert_eq(backend_create(&b, name), TB_OK, "%s", tb_error_get());
    struct run_config cfg = {.batch = batch, .eval_batch = batch, .seed = 42,
                             .ipu = {.stages = 2, .ga = ga, .micro_batch = mb, .replicas = 1}};
    optim_config_defaults(&cfg.optim, w->optimizer);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers ? m.n_buffers : 1);
    w->init(&m, params, buffers, 42);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, params), TB_OK);
    cr_assert_eq(backend_timeline(&b, NULL, 0), 0, "no step yet, no timeline");
    const size_t per = 28 * 28;
    for (int s = 0; s < steps; s++) {
        struct batch bt = {batch, ds.images + (size_t)s * batch * per, labels + (size_t)s * batch};
        struct step_stats st;
        cr_assert_eq(backend_train_step(&b, &bt, s + 1, &st), TB_OK, "%s", tb_error_get());
    }
    struct batch all = {ds.n, ds.images, labels};
    struct eval_stats ev = {0};
    cr_assert_eq(backend_evaluate(&b, &all, &ev), TB_OK, "%s", tb_error_get());
    *n_events = backend_timeline(&b, NULL, 0);
    struct json_buf jb;
    json_buf_init(&jb);
    json_begin_object(&jb);
    json_key_object(&jb, "figures");
    timeline_row_write(&jb, &b);
    json_end_object(&jb);
    json_end_object(&jb);
    cr_assert_eq(json_buf_status(&jb), TB_OK, "%s", tb_error_get());
    struct json_value *row = NULL;
    cr_assert_eq(json_parse(json_buf_str(&jb), jb.len, &row), TB_OK, "%s", tb_error_get());
    json_buf_free(&jb);
    backend_destroy(&b);
    free(params), free(buffers), free(labels);
    dataset_free(&ds);
    model_free(&m);
    return row;
}

Test(timeline_row, ipu_last_step_survives_evaluation, .timeout = 60)
{
    int n = 0;
    struct json_value *row = train_and_write("ipu", 4, 4, 3, &n);
    /* Per device: G forwards, G backwards and one update (one replica: no all-reduce). */
    cr_assert_eq(n, 2 * (4 + 4 + 1), "events of the last step: %d", n);
    const struct json_value *tl = json_get(row, "figures.timeline");
    cr_assert_not_null(tl);
    cr_assert_str_eq(json_get_str(tl, "label", ""), "measured");
    cr_assert_eq(json_get_number(tl, "devices", 0), 2);
    cr_assert_eq(json_get_number(tl, "devices_shown", 0), 2);
    cr_assert_eq(json_get_number(tl, "events_total", 0), n);
    cr_assert_eq(json_get_bool(tl, "truncated", 1), 0);
    const double span = json_get_number(tl, "span_s", 0);
    cr_assert_gt(span, 0.0);
    const struct json_value *ev = json_get(tl, "events");
    cr_assert(ev && ev->type == JSON_ARRAY && ev->n == n);
    int count[2][5] = {{0}}, seen_mb[2][4] = {{0}};
    double max_end = 0;
    for (int k = 0; k < ev->n; k++) {
        const struct json_value *e = &ev->items[k];
        cr_assert(e->type == JSON_ARRAY && e->n == 7);
        const int d = (int)e->items[0].number, s = (int)e->items[1].number, r = (int)e->items[2].number;
        const int mb = (int)e->items[3].number;
        cr_assert(d == 0 || d == 1);
        cr_assert_eq(s, d, "device d is stage d of replica 0");
        cr_assert_eq(r, 0);
        cr_assert_eq(e->items[4].type, JSON_STRING);
        const char *ph = strchr("FBRAU", e->items[4].str[0]);
        cr_assert(ph && strlen(e->items[4].str) == 1, "phase %s", e->items[4].str);
        count[d][ph - "FBRAU"]++;
        const double t0 = e->items[5].number, t1 = e->items[6].number;
        cr_assert(0 <= t0 && t0 <= t1 && t1 <= span, "[%g, %g] in a %g s step", t0, t1, span);
        max_end = t1 > max_end ? t1 : max_end;
        if (*ph == 'F') {
            cr_assert(mb >= 0 && mb < 4);
            seen_mb[d][mb]++;
        } else if (*ph == 'U') {
            cr_assert_eq(mb, -1);
        }
        if (k > 0) cr_assert_geq(d, (int)ev->items[k - 1].items[0].number, "grouped by device");
    }
    cr_assert_eq(max_end, span);
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(count[d][0], 4);
        cr_assert_eq(count[d][1], 4);
        cr_assert_eq(count[d][4], 1);
        for (int mb = 0; mb < 4; mb++) cr_assert_eq(seen_mb[d][mb], 1);
    }
    json_value_free(row);
}

Test(timeline_row, long_timeline_keeps_whole_devices, .timeout = 60)
{
    int n = 0;
    /* 200 micro-batches: about 401 intervals a device, so only device 0 fits under the cap of 512. */
    struct json_value *row = train_and_write("ipu", 1, 200, 1, &n);
    cr_assert_gt(n, TIMELINE_ROW_MAX_EVENTS);
    const struct json_value *tl = json_get(row, "figures.timeline");
    cr_assert_not_null(tl);
    cr_assert_eq(json_get_bool(tl, "truncated", 0), 1);
    cr_assert_eq(json_get_number(tl, "devices", 0), 2);
    cr_assert_eq(json_get_number(tl, "devices_shown", 0), 1);
    cr_assert_eq(json_get_number(tl, "events_total", 0), n);
    const struct json_value *ev = json_get(tl, "events");
    cr_assert(ev && ev->type == JSON_ARRAY && ev->n > 0 && ev->n <= TIMELINE_ROW_MAX_EVENTS);
    for (int k = 0; k < ev->n; k++) cr_assert_eq(ev->items[k].items[0].number, 0, "only device 0's lane");
    json_value_free(row);
}

Test(timeline_row, cpu_has_no_timeline, .timeout = 60)
{
    int n = -1;
    struct json_value *row = train_and_write("cpu", 4, 4, 1, &n);
    cr_assert_eq(n, 0);
    cr_assert_null(json_get(row, "figures.timeline"));
    json_value_free(row);
}
