/* test_sweep_reset.c — a scaling sweep's points each count their own steps: a point that diverged (its row
 * takes no per-step split) or failed (no row) passed its steps into the next point's figures.step_split and
 * figures.step_executions (the split's steps were 6 for a point of 3 timed steps after a diverged one);
 * session_backend, which every plan calls before its steps, now starts them from zero. A sweep in runs of
 * steps (--steps-per-execution) to a larger batch staged the new batch's steps in the buffers sized for the
 * old one (a crash). And mirrored's description says one device, MPI rank or sample in the singular, as the
 * summary's step-time and scaling lines do.
 */
#include "test_util.h"

#include "run.h"
#include "status.h"
#include "test_harness_util.h"

#include <string.h>

/* One row's figures as the tests read them. */
struct pt {
    char status[16];
    int batch;
    double split_steps, executions;
};

struct pts {
    struct pt p[4];
    int n;
};

static int keep_point(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct pts *ps = ctx;
    if (ps->n == 4) return TB_OK;
    struct pt *p = &ps->p[ps->n++];
    snprintf(p->status, sizeof p->status, "%s", json_get_str(row, "status", "?"));
    p->batch = (int)json_get_number(row, "config.batch", -1);
    p->split_steps = json_get_number(row, "figures.step_split.steps", -1);
    p->executions = json_get_number(row, "figures.step_executions", -1);
    return TB_OK;
}

static struct pts read_points(void)
{
    char p[192];
    struct pts ps = {0};
    cr_assert_eq(results_read_rows(th_path(p, sizeof p, "rows.jsonl"), keep_point, &ps), TB_OK, "%s", tb_error_get());
    return ps;
}

/* ipu fp16 at a static loss scale of 6.5e5: batch 4's gradients overflow on every step (from about 3.5e5 on this
 * data), so its point ends diverged with no update applied; batch 256's pass (up to about 1.2e6): 1 warm-up + 3
 * timed steps. The scale sits midway, a factor of 2 from either edge. */
static void diverged_then_ok_sweep(struct bench_config *c, const char *steps_per_execution)
{
    bench_config_defaults(c);
    static const char *const opt[][2] = {
        {"plan", "scaling"}, {"backend", "ipu"}, {"precision", "fp16"}, {"loss-scale", "6.5e5"},
        {"batches", "4,256"}, {"steps", "3"},    {"warmup", "1"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    if (steps_per_execution)
        cr_assert_eq(bench_config_set(c, "steps-per-execution", steps_per_execution), TB_OK, "%s", tb_error_get());
    th_bench_quiet(c, 256, 64);
}

Test(sweep_reset, a_diverged_point_passes_no_steps_to_the_next_points_split, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    struct bench_config c;
    diverged_then_ok_sweep(&c, NULL);
    cr_assert_neq(bench_run(&c), TB_OK, "the sweep reports its failed point");
    const struct pts ps = read_points();
    cr_assert_eq(ps.n, 2);
    cr_assert(ps.p[0].batch == 4 && !strcmp(ps.p[0].status, "diverged"), "%d %s", ps.p[0].batch, ps.p[0].status);
    cr_assert(ps.p[1].batch == 256 && !strcmp(ps.p[1].status, "ok"), "%d %s", ps.p[1].batch, ps.p[1].status);
    cr_assert_eq(ps.p[1].split_steps, 3.0, "batch 256: its own 3 timed steps, got %g", ps.p[1].split_steps);
}

Test(sweep_reset, a_diverged_point_passes_no_calls_to_the_next_points_step_executions, .init = th_setup,
     .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    diverged_then_ok_sweep(&c, "2");
    cr_assert_neq(bench_run(&c), TB_OK, "the sweep reports its failed point");
    const struct pts ps = read_points();
    cr_assert_eq(ps.n, 2);
    cr_assert(!strcmp(ps.p[0].status, "diverged") && !strcmp(ps.p[1].status, "ok"), "%s %s", ps.p[0].status,
              ps.p[1].status);
    /* The warm-up step alone (a call never spans its end), then the 3 timed steps in calls of 2 and 1. */
    cr_assert_eq(ps.p[1].executions, 3.0, "got %g", ps.p[1].executions);
    cr_assert_eq(ps.p[1].split_steps, 3.0, "got %g", ps.p[1].split_steps);
}

/* Runs of steps, then a larger batch: its steps are staged in buffers of its own size. */
Test(sweep_reset, a_sweep_in_runs_of_steps_stages_a_larger_batch_afresh, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    struct bench_config c;
    bench_config_defaults(&c);
    static const char *const opt[][2] = {
        {"plan", "scaling"}, {"backend", "cpu"}, {"batches", "8,64"}, {"steps", "3"}, {"warmup", "1"},
        {"steps-per-execution", "2"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(&c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    const struct pts ps = read_points();
    cr_assert_eq(ps.n, 2);
    for (int k = 0; k < 2; k++) cr_assert_eq(ps.p[k].executions, 3.0, "point %d: got %g", k, ps.p[k].executions);
}

/* What bench_run(c) printed on stdout (the caller frees it); *st gets its status. */
static char *run_stdout(struct bench_config *c, int *st)
{
    char p[192];
    fflush(stdout);
    const int saved = dup(STDOUT_FILENO);
    const int fd = open(th_path(p, sizeof p, "stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    *st = bench_run(c);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    return th_read(p);
}

/* A throughput run of one timed step at batch `batch`, on the summary (not quiet) but with no progress line. */
static void one_step(struct bench_config *c, const char *backend, const char *devices, const char *batch)
{
    bench_config_defaults(c);
    cr_assert_eq(bench_config_set(c, "plan", "throughput"), TB_OK);
    cr_assert_eq(bench_config_set(c, "backend", backend), TB_OK);
    if (devices) cr_assert_eq(bench_config_set(c, "devices", devices), TB_OK, "%s", tb_error_get());
    cr_assert_eq(bench_config_set(c, "batch", batch), TB_OK);
    cr_assert_eq(bench_config_set(c, "steps", "1"), TB_OK);
    cr_assert_eq(bench_config_set(c, "warmup", "1"), TB_OK);
    th_bench_quiet(c, 64, 16);
    c->quiet = 0;
}

Test(sweep_reset, mirrored_says_one_device_and_one_sample_in_the_singular, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    struct bench_config c;
    int st;
    /* The cpu baseline first: the mirrored run's summary then says its speed-up "on 1 device". */
    one_step(&c, "cpu", NULL, "1");
    c.quiet = 1;
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    one_step(&c, "mirrored", "1", "1");
    char *out = run_stdout(&c, &st);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    struct json_value *row = th_last_row();
    const char *desc = json_get_str(row, "config.backend_desc", "");
    cr_assert(!strncmp(desc, "mirrored: 1 device, 1 sample each, ", 35), "%s", desc);
    cr_assert(strstr(out, "mirrored: 1 device, 1 sample each, "), "%s", out);
    cr_assert(strstr(out, " over 1 timed step (1 warm-up excluded)"), "%s", out);
    cr_assert(strstr(out, ") on 1 device: efficiency "), "%s", out);
    json_value_free(row);
    free(out);
    /* Two devices of one sample each: the devices plural, the sample not. */
    one_step(&c, "mirrored", "2", "2");
    c.quiet = 1;
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    row = th_last_row();
    desc = json_get_str(row, "config.backend_desc", "");
    cr_assert(!strncmp(desc, "mirrored: 2 devices, 1 sample each, ", 36), "%s", desc);
    json_value_free(row);
}
