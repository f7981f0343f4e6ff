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
#include "results.h"
#include "run.h"
#include "status.h"

static void config(struct bench_config *c, const char *backend, const char *const *kv)
{
    bench_config_defaults(c);
    cr_assert_eq(bench_config_set(c, "backend", backend), TB_OK);
    cr_assert_eq(bench_config_set(c, "plan", "scaling"), TB_OK);
    for (int k = 0; kv && kv[k]; k += 2)
        cr_assert_eq(bench_config_set(c, kv[k], kv[k + 1]), TB_OK, "--%s %s: %s", kv[k], kv[k + 1], tb_error_get());
}

static void expect_invalid(const char *const *kv, const char *needle)
{
    struct bench_config c;
    config(&c, "cpu", kv);
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL, "accepted (%s)", needle);
    cr_assert(strstr(tb_error_get(), needle) != NULL, "message '%s' lacks '%s'", tb_error_get(), needle);
    cr_assert(strchr(tb_error_get(), '\n') == NULL, "one line");
}

static void expect_valid(const char *const *kv)
{
    struct bench_config c;
    config(&c, "cpu", kv);
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
    config(&c, "ipu", (const char *const[]){"devices", "4", "stages", "2", "replicas-list", "1,2", "batches", "8",
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
    expect_invalid((const char *const[]){"batches", "8,16", "epochs", "1", "no-eval", "1", NULL}, "--no-eval");
    expect_invalid((const char *const[]){"batches", "8,16", "no-eval", "1", NULL}, "never evaluates");
    expect_valid((const char *const[]){"batches", "8,16", "epochs", "1", NULL});
}

Test(scaling_combos, trained_sweep_refuses_steps)
{
    expect_invalid((const char *const[]){"batches", "8,16", "epochs", "1", "steps", "5", NULL}, "--steps");
    expect_valid((const char *const[]){"batches", "8,16", "steps", "5", NULL});
    expect_valid((const char *const[]){"batches", "8,16", "epochs", "1", "steps-per-epoch", "4", NULL});
}
