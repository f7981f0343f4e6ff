/* test_scaling_combos.c — `--plan scaling` with options that change what its points are or do.
 *
 * An ipu grid over --replicas-list with --devices names each point by its own replicas (the device count
 * named every point alike: one run id for two rows, and the second point's MLPerf log was not written);
 * a trained sweep (--epochs) refuses --no-eval (every trained point evaluates: its accuracy column) and
 * --steps (a trained point runs whole epochs), which it used to accept and ignore.
 */
#include "test_harness_util.h"

#include "json.h"
#include "progress.h"
#include "report.h"
#include "results.h"
#include "run.h"
#include "status.h"

#include <math.h>

static void expect_valid(const char *const *kv)
{
    struct bench_config c;
    th_scaling_config(&c, "cpu", kv);
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
}

struct ids {
    int n;
    char run_id[4][160];
    int replicas[4];
};

static int on_row(const struct json_value *row, long line, void *ctx)
{
    (void)line;
    struct ids *r = ctx;
    cr_assert(r->n < 4);
    snprintf(r->run_id[r->n], sizeof r->run_id[r->n], "%s", json_get_str(row, "run_id", ""));
    r->replicas[r->n++] = (int)json_get_number(row, "config.replicas", -1);
    return TB_OK;
}

Test(scaling_combos, ipu_grid_with_devices_names_points_by_their_replicas, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    char p[192];
    struct bench_config c;
    th_scaling_config(&c, "ipu",
                      (const char *const[]){"devices", "4", "stages", "2", "replicas-list", "1,2", "batches", "8",
                                            "steps", "2", "warmup", "1", "run-id", "g", NULL});
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_config_set(&c, "mllog", th_path(p, sizeof p, "ml")), TB_OK);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    struct ids r = {0};
    cr_assert_eq(results_read_rows(th_path(p, sizeof p, "rows.jsonl"), on_row, &r), TB_OK);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.replicas[0], 1);
    cr_assert_eq(r.replicas[1], 2);
    cr_assert_str_eq(r.run_id[0], "g-b8-r1", "the point's replicas, not --devices 4");
    cr_assert_str_eq(r.run_id[1], "g-b8-r2");
    cr_assert(th_size(th_path(p, sizeof p, "ml/g-b8-r1.log")) > 0, "each point writes its own MLPerf log");
    cr_assert(th_size(th_path(p, sizeof p, "ml/g-b8-r2.log")) > 0);
}

Test(scaling_combos, trained_sweep_refuses_no_eval)
{
    th_scaling_refused("cpu",
                       (const char *const[]){"batches", "8,16", "epochs", "1", "no-eval", "1", NULL}, "--no-eval");
    th_scaling_refused("cpu", (const char *const[]){"batches", "8,16", "no-eval", "1", NULL}, "never evaluates");
    expect_valid((const char *const[]){"batches", "8,16", "epochs", "1", NULL});
}

Test(scaling_combos, trained_sweep_refuses_steps)
{
    th_scaling_refused("cpu", (const char *const[]){"batches", "8,16", "epochs", "1", "steps", "5", NULL}, "--steps");
    expect_valid((const char *const[]){"batches", "8,16", "steps", "5", NULL});
    expect_valid((const char *const[]){"batches", "8,16", "epochs", "1", "steps-per-epoch", "4", NULL});
}

struct rates {
    int n;
    double timed[2], whole[2], speedup[2];
};

static int on_rates(const struct json_value *row, long line, void *ctx)
{
    (void)line;
    struct rates *r = ctx;
    cr_assert(r->n < 2);
    r->timed[r->n] = json_get_number(row, "figures.timed_images_per_s", NAN);
    r->whole[r->n] = json_get_number(row, "figures.images_per_s", NAN);
    r->speedup[r->n++] = json_get_number(row, "figures.speedup", NAN);
    return TB_OK;
}

/* A trained sweep's points are compared by their timed steps' rates, warm-up excluded, as an untrained sweep's:
 * the whole run's rate put the process's start-up in the first point's alone (probe G: 7.4x from batch 8 to 16
 * one way round, 0.70x the other). The row still has the whole run's images_per_s. */
Test(scaling_combos, trained_points_compare_their_timed_rates, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char p[192];
    struct bench_config c;
    th_scaling_config(&c, "cpu", (const char *const[]){"batches", "8,16", "epochs", "1", "steps-per-epoch", "6",
                                                       "warmup", "2", "mllog", "none", NULL});
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    struct rates r = {0};
    cr_assert_eq(results_read_rows(th_path(p, sizeof p, "rows.jsonl"), on_rates, &r), TB_OK);
    cr_assert_eq(r.n, 2);
    for (int k = 0; k < 2; k++) {
        cr_assert(r.timed[k] > 0.0 && r.whole[k] > 0.0, "point %d: timed %g, whole %g", k, r.timed[k], r.whole[k]);
        const double want = r.timed[k] / r.timed[0];
        cr_assert(fabs(r.speedup[k] - want) <= 1e-9 * want, "point %d: speed-up %.12g, timed rates give %.12g", k,
                  r.speedup[k], want);
    }
}

/* A trained point with no more steps than --warmup (batch 64 of 256 samples: 4 steps, warm-up 10) times every
 * step, the cold first ones too, beside points timed after their warm-up: the sweep's rows say which (its
 * warmup_steps 0), and the report marks its rate. */
Test(scaling_combos, a_trained_point_no_longer_than_its_warmup_is_marked, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    char p[192], out[192];
    struct bench_config c;
    th_scaling_config(&c, "cpu", (const char *const[]){"batches", "16,64", "epochs", "1", "mllog", "none", NULL});
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    struct report_opts o = {.in = th_path(p, sizeof p, "rows.jsonl"), .out_dir = th_path(out, sizeof out, "report"),
                            .plots_dir = TB_SOURCE_DIR "/plots", .gnuplot = "/nonexistent/gnuplot"};
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    free(th_stderr_end());
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    char *md = th_read(th_path(p, sizeof p, "report/REPORT.md"));
    const char *b16 = strstr(md, "\n| 16 |"), *b64 = strstr(md, "\n| 64 |");
    cr_assert(b16 && b64, "%s", md);
    const char *e16 = strchr(b16 + 1, '\n'), *e64 = strchr(b64 + 1, '\n');
    cr_assert(e16 && e64);
    cr_assert(memchr(b16, '*', (size_t)(e16 - b16)) == NULL, "batch 16 was timed after its warm-up: %.*s",
              (int)(e16 - b16), b16);
    cr_assert(memchr(b64, '*', (size_t)(e64 - b64)) != NULL, "batch 64's rate has its cold steps: %.*s",
              (int)(e64 - b64), b64);
    free(md);
}
