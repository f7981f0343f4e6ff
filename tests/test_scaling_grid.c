/* test_scaling_grid.c — `--plan scaling` over a grid: ipu replicas × accumulation × micro-batch (global
 * batch B·G·R, or --batches with the rest derived) and mirrored replicas (= devices, local batch =
 * global / devices).
 *
 * The point list (bench_scaling_points) on good and bad combinations (wrong backend, a list and its
 * scalar, --batches where the product fixes it, batches that do not split), the suite parser keeping
 * the lists whole, and tiny in-process sweeps on mnist-mlp (ipu with 2 stages, mirrored, and the
 * unchanged --batches sweep on cpu) whose rows carry each point's replicas, accumulation and local batch
 * under one sweep id.
 */
#include "test_harness_util.h"

#include "json.h"
#include "progress.h"
#include "results.h"
#include "run.h"
#include "status.h"
#include "suite.h"

Test(scaling_grid, ipu_product_grid_points)
{
    struct bench_config c;
    th_scaling_config(&c, "ipu",
                      (const char *const[]){"stages", "2", "replicas-list", "1,2", "ga-list", "4,8", "micro-batch-list",
                                            "2", NULL});
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.n_batches, 0, "the global batch is B·G·R: no default --batches");
    struct bench_scaling_point p[BENCH_MAX_POINTS];
    cr_assert_eq(bench_scaling_points(&c, p, BENCH_MAX_POINTS), 4);
    /* The last list varies fastest: replicas, then ga (micro-batch is fixed). */
    const int want[4][4] = {{8, 1, 4, 2}, {16, 1, 8, 2}, {16, 2, 4, 2}, {32, 2, 8, 2}};
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(p[k].batch, want[k][0], "point %d", k);
        cr_assert_eq(p[k].replicas, want[k][1]);
        cr_assert_eq(p[k].ga, want[k][2]);
        cr_assert_eq(p[k].micro_batch, want[k][3]);
    }
}

Test(scaling_grid, ipu_batches_with_derived_micro_batch)
{
    struct bench_config c;
    th_scaling_config(&c, "ipu", (const char *const[]){"batches", "16,32", "replicas-list", "1,2", "ga", "4", NULL});
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    struct bench_scaling_point p[BENCH_MAX_POINTS];
    cr_assert_eq(bench_scaling_points(&c, p, BENCH_MAX_POINTS), 4);
    cr_assert_eq(p[1].batch, 16);
    cr_assert_eq(p[1].replicas, 2);
    cr_assert_eq(p[1].ga, 4);
    cr_assert_eq(p[1].micro_batch, 0, "derived by the backend: 16 / (4 x 2)");
    cr_assert_eq(p[3].batch, 32);
}

Test(scaling_grid, mirrored_replicas_are_devices_and_batches_still_apply)
{
    struct bench_config c;
    th_scaling_config(&c, "mirrored", (const char *const[]){"replicas-list", "1,2", NULL});
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    struct bench_scaling_point p[BENCH_MAX_POINTS];
    cr_assert_eq(bench_scaling_points(&c, p, BENCH_MAX_POINTS), 10, "the default batches x 2 replica counts");
    cr_assert_eq(p[0].batch, 16);
    cr_assert_eq(p[0].devices, 1);
    cr_assert_eq(p[1].devices, 2);
    cr_assert_eq(p[9].batch, 256);
    /* Without a grid option: the plain sweep, unchanged. */
    th_scaling_config(&c, "cpu", (const char *const[]){"batches", "8,16", NULL});
    cr_assert_eq(bench_config_finish(&c), TB_OK);
    cr_assert_eq(bench_scaling_points(&c, p, BENCH_MAX_POINTS), 2);
    cr_assert_eq(p[1].batch, 16);
    cr_assert_eq(p[1].replicas + p[1].ga + p[1].micro_batch + p[1].devices, 0);
}

Test(scaling_grid, bad_combinations_are_rejected)
{
    th_scaling_refused("cpu",
                       (const char *const[]){"ga-list", "2,4", NULL}, "backend cpu has no gradient accumulation");
    th_scaling_refused("threads", (const char *const[]){"replicas-list", "2", NULL}, "backend threads has no replicas");
    th_scaling_refused("mirrored", (const char *const[]){"micro-batch-list", "8", NULL}, "--micro-batch-list");
    th_scaling_refused("mirrored", (const char *const[]){"replicas-list", "2", "devices", "2", NULL}, "drop --devices");
    th_scaling_refused("mirrored", (const char *const[]){"replicas-list", "3", "batches", "16", NULL},
                   "does not split evenly over 3");
    th_scaling_refused("ipu", (const char *const[]){"ga-list", "4", "ga", "4", NULL}, "both given");
    th_scaling_refused("ipu", (const char *const[]){"ga-list", "4", "micro-batch", "2", "batches", "8", NULL},
                   "leave --batches out");
    th_scaling_refused("ipu", (const char *const[]){"ga-list", "4", "replicas-list", "2", "batches", "12", NULL},
                   "not a multiple of ga 4 x replicas 2");
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "replicas-list", "2,x"), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "ga-list", "0"), TB_EINVAL);
    cr_assert_eq(bench_config_set(&c, "backend", "ipu"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "ga-list", "4"), TB_OK);
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL, "a grid needs --plan scaling");
    cr_assert(strstr(tb_error_get(), "apply to --plan scaling") != NULL, "%s", tb_error_get());
}

Test(scaling_grid, suite_keeps_grid_lists_whole, .init = th_setup, .fini = th_teardown)
{
    char p[192];
    th_write(th_path(p, sizeof p, "g.suite"),
             "plan=scaling backend=ipu stages=2 replicas-list=1,2 ga-list=4,8 micro-batch-list=2 steps=2\n"
             "plan=scaling backend=mirrored replicas-list=1,2 batches=8,16 lr=0.1,0.2\n");
    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    cr_assert_eq(suite_load(p, &base, &s), TB_OK, "%s", tb_error_get());
    cr_assert_eq(s.n_runs, 3, "grid lists are one option each; lr expands");
    cr_assert_eq(s.runs[0].c.n_replicas_list, 2);
    cr_assert_eq(s.runs[0].c.n_ga_list, 2);
    cr_assert_eq(s.runs[0].c.micro_batch_list[0], 2);
    cr_assert_eq(s.runs[2].c.n_replicas_list, 2);
    suite_free(&s);
}

struct rows {
    int n;
    char sweep[8][160];
    int batch[8], local[8], replicas[8], accum[8], cfg_replicas[8], cfg_ga[8], cfg_mb[8], devices[8];
};

static int on_row(const struct json_value *row, long line, void *ctx)
{
    (void)line;
    struct rows *r = ctx;
    cr_assert(r->n < 8);
    const int k = r->n++;
    cr_assert_str_eq(json_get_str(row, "kind", ""), "scaling");
    snprintf(r->sweep[k], sizeof r->sweep[k], "%s", json_get_str(row, "sweep", ""));
    r->batch[k] = (int)json_get_number(row, "figures.global_batch", -1);
    r->local[k] = (int)json_get_number(row, "figures.local_batch", -1);
    r->replicas[k] = (int)json_get_number(row, "figures.replicas", -1);
    r->accum[k] = (int)json_get_number(row, "figures.accumulation", -1);
    cr_assert_eq(json_get_number(row, "config.batch", -1), r->batch[k]);
    cr_assert_eq(json_get_number(row, "config.local_batch", -1), r->local[k]);
    r->cfg_replicas[k] = (int)json_get_number(row, "config.replicas", -1);
    r->cfg_ga[k] = (int)json_get_number(row, "config.ga", -1);
    r->cfg_mb[k] = (int)json_get_number(row, "config.micro_batch", -1);
    r->devices[k] = (int)json_get_number(row, "config.devices", -1);
    cr_assert(json_get_number(row, "figures.images_per_s", 0) > 0);
    return TB_OK;
}

static void run_sweep(struct bench_config *c, struct rows *r)
{
    char p[192];
    cr_assert_eq(bench_config_set(c, "steps", "2"), TB_OK);
    cr_assert_eq(bench_config_set(c, "warmup", "1"), TB_OK);
    cr_assert_eq(bench_config_set(c, "mllog", "none"), TB_OK);
    th_bench_quiet(c, 256, 64);
    cr_assert_eq(bench_run(c), TB_OK, "%s", tb_error_get());
    memset(r, 0, sizeof *r);
    cr_assert_eq(results_read_rows(th_path(p, sizeof p, "rows.jsonl"), on_row, r), TB_OK);
    for (int k = 1; k < r->n; k++) cr_assert_str_eq(r->sweep[k], r->sweep[0], "one sweep id");
    cr_assert(r->sweep[0][0]);
}

Test(scaling_grid, ipu_grid_rows, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    th_scaling_config(&c, "ipu",
                      (const char *const[]){"stages", "2", "replicas-list", "1,2", "ga-list", "4", "micro-batch-list",
                                            "2,4", NULL});
    struct rows r;
    run_sweep(&c, &r);
    cr_assert_eq(r.n, 4);
    const int want[4][4] = {{8, 2, 1, 4}, {16, 4, 1, 4}, {16, 2, 2, 4}, {32, 4, 2, 4}}; /* global, local, R, G */
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(r.batch[k], want[k][0], "row %d", k);
        cr_assert_eq(r.local[k], want[k][1], "row %d: local batch = micro-batch", k);
        cr_assert_eq(r.replicas[k], want[k][2]);
        cr_assert_eq(r.accum[k], want[k][3]);
        cr_assert_eq(r.cfg_replicas[k], want[k][2], "the row's config says what ran");
        cr_assert_eq(r.cfg_ga[k], want[k][3]);
        cr_assert_eq(r.cfg_mb[k], want[k][1]);
    }
}

Test(scaling_grid, ipu_derived_replicas_reach_the_row, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    /* --batches with micro-batch and ga fixed (no grid): the backend derives R = N / (B·G). */
    struct bench_config c;
    th_scaling_config(&c, "ipu",
                      (const char *const[]){"stages", "2", "micro-batch", "2", "ga", "4", "batches", "8,16", NULL});
    struct rows r;
    run_sweep(&c, &r);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.replicas[1], 2, "16 = 2 x 4 x 2 replicas");
    cr_assert_eq(r.local[1], 2);
}

Test(scaling_grid, mirrored_grid_rows, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    th_scaling_config(&c, "mirrored", (const char *const[]){"replicas-list", "1,2", "batches", "8,16", NULL});
    struct rows r;
    run_sweep(&c, &r);
    cr_assert_eq(r.n, 4);
    const int want[4][3] = {{8, 8, 1}, {8, 4, 2}, {16, 16, 1}, {16, 8, 2}}; /* global, local, replicas */
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(r.batch[k], want[k][0], "row %d", k);
        cr_assert_eq(r.local[k], want[k][1], "row %d: local = global / devices", k);
        cr_assert_eq(r.replicas[k], want[k][2]);
        cr_assert_eq(r.devices[k], want[k][2]);
        cr_assert_eq(r.accum[k], 1);
    }
}

Test(scaling_grid, plain_batch_sweep_unchanged, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    th_scaling_config(&c, "cpu", (const char *const[]){"batches", "8,16", NULL});
    struct rows r;
    run_sweep(&c, &r);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.batch[0], 8);
    cr_assert_eq(r.local[1], 16);
    cr_assert_eq(r.replicas[1], 1);
    cr_assert_eq(r.accum[1], 1);
}

static int on_peak_row(const struct json_value *row, long line, void *ctx)
{
    (void)line;
    double *peak = ctx; /* the last row's: the sweep's small point */
    *peak = json_get_number(row, "figures.peak_rss_mib", -1.0);
    cr_assert_str_eq(json_get_str(row, "figures.peak_rss_scope", ""), "run");
    return TB_OK;
}

/* The peak memory of the last point of a quiet mnist-mlp cpu sweep over `batches` (a fixed data set, so
 * only the backends differ). */
static double last_point_peak(const char *batches)
{
    char p[192];
    struct bench_config c;
    th_scaling_config(&c, "cpu",
                      (const char *const[]){"batches", batches, "steps", "1", "warmup", "1", "mllog", "none", NULL});
    th_bench_quiet(&c, 256, 32);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    double peak = -1.0;
    cr_assert_eq(results_read_rows(th_path(p, sizeof p, "rows.jsonl"), on_peak_row, &peak), TB_OK);
    remove(p);
    cr_assert_gt(peak, 0.0);
    return peak;
}

Test(scaling_grid, a_points_peak_memory_is_its_own, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer keeps freed memory resident (its quarantine): the peaks are its, not bench's");
#endif
    /* Batch 2048's backend is ~60 MB of activations and gradients; batch 8 alone peaks near the process's
     * own size. The high-water mark was reset while the previous point's backend was still resident. */
    const double alone = last_point_peak("8"), after_large = last_point_peak("2048,8");
    cr_assert_lt(after_large, 1.5 * alone, "batch 8 after batch 2048 peaks at %.1f MiB, alone at %.1f MiB", after_large,
                 alone);
}
