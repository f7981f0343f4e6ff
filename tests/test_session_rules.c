/* test_session_rules.c — rules the plans share through the session (session.c, row.c), checked through `bench`
 * (TB_BENCH_EXE) and the compare and report readers:
 * - fp16's "no update applied" is one rule for train and throughput, each with its own advice, and it counts
 *   the skipped steps of the run itself: a resumed run does not count its checkpoint's skips;
 * - a scaling point that fails before its backend is prepared splits its batch over the cores this process
 *   may use (its affinity), as the backends and the threads figures do, not over the machine's;
 * - the per-step split (mirrored, ipu) covers the steps the step-time figures time, not the warm-up, and so do
 *   the ipu's per-stage figures and bubble;
 * - budgeted throughput runs (--time-budget) with other explicit --warmup values are other configurations,
 *   and default ones stay one (config.warmup_given).
 * - a half-precision run's cpu baseline is the cpu's fp32 row (the cpu computes in fp32 only).
 * Every child runs in a fresh temp directory on the MLP (or a 16x16 EfficientNet) with a small synthetic set.
 */
#include "test_reliability_util.h"

#include "compare.h"
#include "report.h"
#include "session.h"

#include <sched.h>

TestSuite(session_rules, .timeout = 60);

#define FP16 "--backend", "ipu", "--stages", "2", "--split", "2", "--ga", "2", "--precision", "fp16", "--lr", "0.05"
#define SMALL "--data", "synthetic", "--synthetic-samples", "256,64", "--batch", "8", "--mllog", "none", \
              "--out", "results.jsonl", "--quiet"

/* A checkpoint of an fp16 run whose first steps overflowed (its dynamic scale halving from 32768) carries those
 * skips; resumed for fewer steps than that, every step of the resumed run applied its update. The rule compared
 * the whole run's skips with the resumed run's steps, and the run ended "diverged: no update applied". */
Test(session_rules, a_resumed_fp16_run_counts_only_its_own_skipped_steps)
{
    char *dir = tu_mkdtemp("rules");
    cr_assert_eq(rb_run(dir, "part1", RB_ARGS(SMALL, FP16), RB_ARGS("--steps", "10", "--no-eval", "--checkpoint-dir", "ck")),
                 0);
    struct json_value *r1 = rb_last_row(dir);
    const double skipped = json_get_number(r1, "figures.loss_scaling.skipped_steps", -1);
    cr_assert(skipped >= 3 && skipped < 10, "the first part skipped %g of its 10 steps: no case to check", skipped);
    json_value_free(r1);
    const int code = rb_run(dir, "part2", RB_ARGS(SMALL, FP16), RB_ARGS("--steps", "12", "--no-eval", "--resume", "ck"));
    char *err = rb_stderr(dir, "part2");
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    struct json_value *r2 = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r2, "status", ""), "ok");
    cr_assert_eq(json_get_number(r2, "figures.session_steps", -1), 2);
    cr_assert_eq(json_get_number(r2, "figures.loss_scaling.skipped_steps", -1), skipped, "the whole run's skips");
    json_value_free(r2);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* Every step skipped at a dynamic scale (the steps after a first update at this rate overflow): train's advice is
 * more steps, throughput's more --warmup steps (its timed steps are fixed), and throughput says it has no rate;
 * both rows are diverged. The resumed train run starts from a checkpoint without skips, so all of its own count. */
Test(session_rules, a_dynamic_scale_that_applied_no_update_gives_each_plan_its_advice)
{
    char *dir = tu_mkdtemp("rules");
    cr_assert_eq(rb_run(dir, "first", RB_ARGS(SMALL, FP16),
                        RB_ARGS("--steps", "1", "--no-eval", "--checkpoint-dir", "ck", "--save", "w.safetensors")),
                 0);
    cr_assert_eq(rb_run(dir, "train", RB_ARGS(SMALL, FP16), RB_ARGS("--steps", "3", "--no-eval", "--resume", "ck")), 1);
    char *err = rb_stderr(dir, "train");
    cr_assert(strstr(err, "bench: ipu/mnist-mlp: no update applied: fp16 gradients overflowed on all 2 steps (loss scale "
                          "now 8192; lower --lr, or run more steps so the dynamic scale can come down)\n"),
              "%s", err);
    free(err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "diverged");
    json_value_free(r);
    cr_assert_eq(rb_run(dir, "throughput", RB_ARGS(SMALL, FP16),
                        RB_ARGS("--plan", "throughput", "--load", "w.safetensors", "--steps", "1", "--warmup", "1")),
                 1);
    err = rb_stderr(dir, "throughput");
    cr_assert(strstr(err, "bench: ipu/mnist-mlp: no update applied: fp16 gradients overflowed on all 2 steps (loss scale "
                          "now 8192; lower --lr, or run more --warmup steps so the dynamic scale can come down): no "
                          "rate to report\n"),
              "%s", err);
    free(err);
    r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "diverged");
    cr_assert_null(json_get(r, "figures.images_per_s"));
    json_value_free(r);
    tu_rm_rf(dir);
    free(dir);
}

/* Under an affinity of one core on a machine of more, a mirrored scaling point that fails before its backend is
 * prepared (batch 1 with BatchNorm, refused after the model is known) is listed with the split the backend would
 * have used: one replica, its default being the cores this process may use. It was listed at the machine's
 * core count (replicas 2, local batch 0 on two cores). */
Test(session_rules, a_scaling_point_that_failed_early_splits_over_the_usable_cores)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) cr_skip_test("one core online: the affinity cannot be narrower");
    cpu_set_t one;
    CPU_ZERO(&one);
    cpu_set_t now;
    cr_assert_eq(sched_getaffinity(0, sizeof now, &now), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &now)) cpu++;
    cr_assert_lt(cpu, CPU_SETSIZE);
    CPU_SET(cpu, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0); /* this test's process; bench inherits it */
    char *dir = tu_mkdtemp("rules");
    const int code = rb_run(dir, "scaling",
                            RB_ARGS("--plan", "scaling", "--backend", "mirrored", "--workload", "effnet-b0", "--resolution",
                                    "16", "--batches", "1", "--steps", "2", "--warmup", "1", "--data", "synthetic",
                                    "--synthetic-samples", "16,8", "--mllog", "none", "--out", "results.jsonl"),
                            NULL);
    char *p = rb_path(dir, "scaling.out"), *out = tu_read_file(p, NULL);
    char *err = rb_stderr(dir, "scaling");
    cr_assert_neq(code, 0, "batch 1 with BatchNorm ran: %s", err);
    cr_assert(strstr(err, "scaling point batch 1 failed"), "%s", err);
    const char *line = out ? strstr(out, " failed") : NULL;
    cr_assert_not_null(line, "no failed point in the table: %s", out ? out : "");
    while (line > out && line[-1] != '\n') line--;
    int global = -1, local = -1, replicas = -1, accum = -1;
    cr_assert_eq(sscanf(line, "%d %d %d %d", &global, &local, &replicas, &accum), 4, "%s", line);
    cr_assert(global == 1 && local == 1 && replicas == 1 && accum == 1,
              "global %d local %d replicas %d accumulation %d under one usable core: %s", global, local, replicas, accum,
              out);
    free(p), free(out), free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* The last row's figures.step_split.steps and step_s, and the rate and batch its step-time figures come from. */
static void last_split(const char *dir, double *steps, double *step_s, double *step_of_rate)
{
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    *steps = json_get_number(r, "figures.step_split.steps", -1);
    *step_s = json_get_number(r, "figures.step_split.step_s", -1);
    /* The overall rate over the timed steps: batch × timed steps / their seconds. */
    const double ips = json_get_number(r, "figures.timed_images_per_s", json_get_number(r, "figures.images_per_s", NAN));
    *step_of_rate = json_get_number(r, "config.batch", NAN) / ips;
    json_value_free(r);
}

/* The last row's step split adds up within its step: compute, exchange, idle and all-reduce are parts of one
 * decomposition (mirrored took each one's maximum over the replicas apart: the slowest replica's compute plus the
 * fastest one's wait, parts of 1.62 ms in a 1.15 ms step). */
static void parts_within_step(const char *dir, const char *what)
{
    struct json_value *r = rb_last_row(dir);
    const double step = json_get_number(r, "figures.step_split.step_s", NAN);
    double parts = 0.0;
    static const char *const keys[] = {"compute_s", "exchange_s", "idle_s", "allreduce_s"};
    for (int k = 0; k < 4; k++) {
        char path[64];
        snprintf(path, sizeof path, "figures.step_split.%s", keys[k]);
        parts += json_get_number(r, path, 0.0);
    }
    cr_assert(step > 0 && parts <= step * (1 + 1e-9), "%s: parts %.9g s in a %.9g s step", what, parts, step);
    json_value_free(r);
}

/* The split a step is the mean over the steps the step-time line times (the printed "per step 39.0 ms" sat under
 * a "median 23.5 ms" step time: it averaged the cold warm-up step in). Throughput: the timed steps of every
 * repeat; train: those after the warm-up, or all of a run no longer than it (whose figures include them too). */
Test(session_rules, the_step_split_averages_the_timed_steps_not_the_warm_up)
{
    char *dir = tu_mkdtemp("rules");
    static const char *const ipu[] = {"--backend", "ipu", "--stages", "2", "--micro-batch", "2", "--ga", "2", NULL};
    static const char *const mir[] = {"--backend", "mirrored", "--devices", "2", NULL};
    const char *const *be[] = {ipu, mir};
    for (int k = 0; k < 2; k++) {
        const char *args[40];
        int n = 0;
        static const char *const base[] = {SMALL, NULL};
        for (int i = 0; base[i]; i++) args[n++] = base[i];
        for (int i = 0; be[k][i]; i++) args[n++] = be[k][i];
        args[n] = NULL;
        double steps, step_s, step_of_rate;
        cr_assert_eq(rb_run(dir, "tp", args, RB_ARGS("--plan", "throughput", "--steps", "3", "--warmup", "2", "--repeat", "2")),
                     0);
        last_split(dir, &steps, &step_s, &step_of_rate);
        /* The ipu's parts were seen past its step on a loaded machine (up to 1.39x, 4 runs in 12 beside two busy
         * processes): its idle ran to the compute's end, and the all-reduce's wait for the last device was counted
         * in both. On a quiet machine this passes either way; the parts now tile each device's time by construction. */
        parts_within_step(dir, be[k][1]);
        cr_assert_eq(steps, 6, "%s: 2 repeats of 3 timed steps, not %g", be[k][1], steps);
        cr_assert(fabs(step_s - step_of_rate) <= 1e-9 * step_of_rate, "%s: split step %.9g s, timed step %.9g s", be[k][1],
                  step_s, step_of_rate);
        cr_assert_eq(rb_run(dir, "train", args, RB_ARGS("--steps", "7", "--warmup", "3", "--no-eval")), 0);
        last_split(dir, &steps, &step_s, &step_of_rate);
        cr_assert_eq(steps, 4, "%s: 7 steps after 3 of warm-up, not %g", be[k][1], steps);
        cr_assert(fabs(step_s - step_of_rate) <= 1e-9 * step_of_rate, "%s: split step %.9g s, timed step %.9g s", be[k][1],
                  step_s, step_of_rate);
        cr_assert_eq(rb_run(dir, "short", args, RB_ARGS("--steps", "2", "--warmup", "3", "--no-eval")), 0);
        last_split(dir, &steps, &step_s, &step_of_rate);
        cr_assert_eq(steps, 2, "%s: a run no longer than its warm-up averages its steps, not %g", be[k][1], steps);
    }
    tu_rm_rf(dir);
    free(dir);
}

/* The last row's figures.pipeline.steps and step_split.steps, and whether the per-stage compute, averaged over the
 * stages (one replica), is the split's compute a step (the mean over the devices): the same steps' sums. */
static void last_pipeline(const char *dir, double *stage_steps, double *split_steps, int *compute_agrees)
{
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    *stage_steps = json_get_number(r, "figures.pipeline.steps", -1);
    *split_steps = json_get_number(r, "figures.step_split.steps", -1);
    const struct json_value *ps = json_get(r, "figures.pipeline.per_stage");
    cr_assert(ps && ps->type == JSON_ARRAY && ps->n == 2);
    const double split = json_get_number(r, "figures.step_split.compute_s", NAN);
    const double mean = 0.5 * (json_get_number(&ps->items[0], "compute_s", NAN) +
                               json_get_number(&ps->items[1], "compute_s", NAN));
    *compute_agrees = fabs(mean - split) <= 1e-9 * split;
    json_value_free(r);
}

/* The ipu's per-stage figures and bubble took warm-up steps 2 on while the split beside them took the timed steps
 * only: with --warmup 3 a train run of 7 steps had stages averaged over 6 steps and a split over 4. Both cover the
 * timed steps now (every repeat's; a run no longer than its warm-up: all its steps, as the split). */
Test(session_rules, the_per_stage_figures_count_the_steps_the_split_counts)
{
    char *dir = tu_mkdtemp("rules");
    static const char *const ipu[] = {SMALL, "--backend", "ipu", "--stages", "2", "--micro-batch", "2", "--ga", "2", NULL};
    static const struct {
        const char *name, *args[12];
        double steps;
    } runs[] = {
        {"tp", {"--plan", "throughput", "--steps", "3", "--warmup", "2", "--repeat", "2", NULL}, 6},
        {"train", {"--steps", "7", "--warmup", "3", "--no-eval", NULL}, 4},
        {"short", {"--steps", "2", "--warmup", "3", "--no-eval", NULL}, 2},
    };
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        cr_assert_eq(rb_run(dir, runs[k].name, ipu, runs[k].args), 0);
        double stage_steps, split_steps;
        int agrees;
        last_pipeline(dir, &stage_steps, &split_steps, &agrees);
        cr_assert_eq(split_steps, runs[k].steps, "%s: the split's steps %g", runs[k].name, split_steps);
        cr_assert_eq(stage_steps, runs[k].steps, "%s: per-stage figures over %g steps, the split over %g", runs[k].name,
                     stage_steps, split_steps);
        cr_assert(agrees, "%s: the stages' mean compute is not the split's", runs[k].name);
    }
    tu_rm_rf(dir);
    free(dir);
}

/* Budgeted throughput rows (--time-budget): explicit --warmup 2 and --warmup 3 are two configurations, and two runs
 * without --warmup stay one, whatever warm-up the budget cut theirs to. All four were one configuration: the
 * budget's key left the warm-up out, and a row did not say whether the user gave it. */
Test(session_rules, budgeted_runs_with_other_explicit_warmups_are_other_configurations)
{
    char *dir = tu_mkdtemp("rules");
    static const char *const budget[] = {"--plan", "throughput", "--time-budget", "0.001", "--data", "synthetic",
                                         "--synthetic-samples", "256,64", "--batch", "8", "--mllog", "none", "--quiet",
                                         NULL};
    cr_assert_eq(rb_run(dir, "w2", budget, RB_ARGS("--warmup", "2", "--out", "old.jsonl")), 0);
    cr_assert_eq(rb_run(dir, "d1", budget, RB_ARGS("--out", "old.jsonl")), 0);
    cr_assert_eq(rb_run(dir, "w3", budget, RB_ARGS("--warmup", "3", "--out", "new.jsonl")), 0);
    cr_assert_eq(rb_run(dir, "d2", budget, RB_ARGS("--out", "new.jsonl")), 0);
    char *a = rb_path(dir, "old.jsonl"), *b = rb_path(dir, "new.jsonl");
    char *text = tu_read_file(a, NULL);
    cr_assert(text && strstr(text, "\"warmup\":2,\"warmup_given\":true") && strstr(text, "\"warmup_given\":false"), "%s",
              text ? text : "");
    free(text);
    struct compare_line *l = NULL;
    int n = 0;
    cr_assert_eq(compare_results(a, b, NULL, &l, &n), TB_OK, "%s", tb_error_get());
    cr_assert_eq(n, 3, "--warmup 2, --warmup 3, and the default: %d configurations", n);
    int pairs = 0, one_sided = 0;
    for (int i = 0; i < n; i++) {
        pairs += l[i].rows_old == 1 && l[i].rows_new == 1;
        one_sided += (l[i].rows_old == 1) != (l[i].rows_new == 1);
    }
    cr_assert(pairs == 1 && one_sided == 2, "the default runs pair up (%d), the explicit warm-ups do not (%d)", pairs,
              one_sided);
    free(l);
    /* The report: the later default row supersedes the earlier; each explicit warm-up is shown, named by it. */
    char *all = rb_path(dir, "all.jsonl"), *ta = tu_read_file(a, NULL), *tb = tu_read_file(b, NULL);
    FILE *f = fopen(all, "w");
    cr_assert_not_null(f);
    fputs(ta, f), fputs(tb, f);
    cr_assert_eq(fclose(f), 0);
    char *out = rb_path(dir, "report"), plots[512];
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = all, .out_dir = out, .plots_dir = plots, .gnuplot = "/nonexistent/gnuplot"};
    int n_charts = 0;
    cr_assert_eq(report_generate(&o, &n_charts), TB_OK, "%s", tb_error_get());
    char *mdp = rb_path(dir, "report/REPORT.md"), *md = tu_read_file(mdp, NULL);
    cr_assert(md && strstr(md, "4 rows, 3 shown. Left out: 1 superseded"), "%.900s", md ? md : "");
    cr_assert(strstr(md, "warmup=2") && strstr(md, "warmup=3"), "%s", md);
    free(md), free(mdp), free(out), free(all), free(ta), free(tb), free(a), free(b);
    tu_rm_rf(dir);
    free(dir);
}

/* The cpu backend computes in fp32 only: a baseline had to match the run's precision, so no half-precision run ever
 * had a speed-up over the cpu, and the line sent the user to run the cpu first, which could not help. Now its ratio
 * is to the cpu's fp32 rate, the row naming that precision. */
Test(session_rules, a_half_precision_run_has_the_fp32_cpu_baseline)
{
    char *dir = tu_mkdtemp("rules");
#define TP SMALL, "--plan", "throughput", "--steps", "3", "--warmup", "1", "--tuning", "none"
    cr_assert_eq(rb_run(dir, "cpu", RB_ARGS(TP), RB_ARGS("--backend", "cpu")), 0);
    cr_assert_eq(rb_run(dir, "bf16", RB_ARGS(TP), RB_ARGS("--backend", "ipu", "--stages", "2", "--precision", "bf16")), 0);
#undef TP
    struct json_value *r = rb_last_row(dir);
    cr_assert(json_get_number(r, "figures.speedup_vs_cpu", -1) > 0.0, "no speed-up over the cpu's fp32 rate");
    cr_assert_str_eq(json_get_str(r, "figures.baseline_precision", ""), "fp32");
    cr_assert_str_eq(json_get_str(r, "config.precision", ""), "bf16");
    json_value_free(r);
    tu_rm_rf(dir);
    free(dir);
}

/* Two runs started at once with one --run-id both passed the up-front check (no log yet); the second's event log
 * then existed, and it ran on with a warning, its row sharing the id. open_log refuses that run before a step; a
 * generated id that met an existing log (no --run-id) keeps the warning. */
Test(session_rules, a_run_id_whose_log_appeared_meanwhile_is_refused)
{
    char *dir = tu_mkdtemp("rules_runid");
    struct session s;
    memset(&s, 0, sizeof s);
    snprintf(s.c.mllog_dir, sizeof s.c.mllog_dir, "%s", dir);
    snprintf(s.c.run_id, sizeof s.c.run_id, "X");
    char *log = NULL;
    cr_assert(asprintf(&log, "%s/X.log", dir) > 0);
    tu_write_file(log, "another run's\n", 14);
    struct mllog lg;
    cr_assert_eq(open_log(&lg, &s, "X"), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "--run-id X: --mllog: ") && strstr(tb_error_get(), "another run with this id started"),
              "%s", tb_error_get());
    s.c.run_id[0] = '\0';
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w");
    const int st = open_log(&lg, &s, "X");
    fclose(stderr);
    stderr = saved;
    cr_assert_eq(st, TB_OK, "no --run-id: a warning, the run goes on");
    char *text = tu_read_file(log, NULL);
    cr_assert_str_eq(text, "another run's\n", "the other run's log was overwritten");
    free(text), free(log);
    tu_rm_rf(dir);
    free(dir);
}
