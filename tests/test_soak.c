/* test_soak.c — what long runs do, checked on short ones that take the same paths: a measuring plan refuses more
 * steps than it keeps times for (the throughput plan read past its record after 2^24 steps); the step record keeps
 * the first and the last losses at any length, past its cap of times too; a warning in the middle of a run starts a
 * line of its own on a terminal; the progress line's rate is the training rate the summary gives, not one diluted by
 * evaluations; a report draws no seed-001 stage chart from a row whose micro-batch the ipu chose (it divided by the
 * recorded 0), and removes the chart an earlier report drew where the rows have no such run any more; the repeats
 * line stays a line at --repeat 1000.
 * Threading: none (in-process runs of one thread).
 */
#include "test_harness_util.h"

#include "report.h"
#include "session.h"

#include <math.h>
#include <signal.h>
#include <sys/resource.h>

/* A finished configuration of plan with the option pairs kv (NULL-ended); TB_OK or the refusal's status. */
static int finish(const char *plan, const char *const *kv)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "plan", plan), TB_OK);
    if (strcmp(plan, "scaling")) cr_assert_eq(bench_config_set(&c, "batch", "1"), TB_OK); /* scaling takes --batches */
    for (int k = 0; kv[k]; k += 2) cr_assert_eq(bench_config_set(&c, kv[k], kv[k + 1]), TB_OK, "--%s", kv[k]);
    return bench_config_finish(&c);
}

#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Soak probe: `--plan throughput --steps 3000000000` ran; its record keeps 2^24 step times, and after 2^24 steps
 * (12 minutes of batch-1 mnist-mlp here) the statistics read past it. A measurement needs every step's time, so
 * the plans that time steps refuse what they cannot keep, when the command line is read. */
Test(soak, measuring_plans_refuse_more_steps_than_they_keep_times_of)
{
    const long max = BENCH_MAX_TIMED_STEPS;
    char over[32], fits[32], half[32];
    snprintf(over, sizeof over, "%ld", max - 9); /* with the 10 warm-up steps, one more than the record */
    snprintf(fits, sizeof fits, "%ld", max - 10);
    snprintf(half, sizeof half, "%ld", max / 2 + 1);
    cr_assert_eq(finish("throughput", KV("steps", over)), TB_EINVAL, "accepted");
    cr_assert(strstr(tb_error_get(), "keeps every step's time") != NULL, "%s", tb_error_get());
    cr_assert(strchr(tb_error_get(), '\n') == NULL, "one line: %s", tb_error_get());
    cr_assert_eq(finish("throughput", KV("steps", fits)), TB_OK, "%s", tb_error_get());
    cr_assert_eq(finish("throughput", KV("steps", "3000000000")), TB_EINVAL);
    cr_assert_eq(finish("inference", KV("steps", "3000000000")), TB_EINVAL, "its latency count was an int");
    cr_assert_eq(finish("throughput", KV("steps", half, "warmup", "0", "repeat", "2")), TB_EINVAL,
                 "timed steps in all, over the repeats");
    cr_assert_eq(finish("scaling", KV("steps", over)), TB_EINVAL, "an untrained sweep times steps too");
    /* A training run keeps the times of its first steps and goes on. */
    cr_assert_eq(finish("train", KV("steps", "3000000000")), TB_OK, "%s", tb_error_get());
}

/* Soak probe: past the record's cap the losses were not kept either: a train run of more than 2^24 steps printed
 * "mean of the last 100 steps" for steps 2^24 − 99 .. 2^24 and its checkpoints dropped the loss history. The record
 * now keeps the first loss and a ring of the last LOSS_TAIL_MAX at any length (on a record of cap 10 here). */
Test(soak, step_record_keeps_the_last_losses_past_its_cap)
{
    struct step_record r;
    cr_assert_eq(step_record_init(&r, 10), TB_OK);
    cr_assert_eq(r.cap, 10);
    r.base = 5;
    for (long step = 5; step < 5 + 250; step++) step_record_book(&r, step, 1e-3 * (double)step, (double)step);
    cr_assert_eq(r.first_loss, 5.0);
    cr_assert_eq(r.times[9], 1e-3 * 14.0, "the times of the first cap steps");
    double tail[LOSS_TAIL_MAX];
    cr_assert_eq(step_record_tail(&r, LOSS_TAIL_MAX, tail), LOSS_TAIL_MAX);
    for (int k = 0; k < LOSS_TAIL_MAX; k++)
        cr_assert_eq(tail[k], (double)(5 + 250 - LOSS_TAIL_MAX + k), "loss %d of the tail: %g", k, tail[k]);
    cr_assert_eq(step_record_tail(&r, 3, tail), 3);
    cr_assert_eq(tail[2], 254.0);
    /* A repeat starting at base again: its own steps only. */
    for (long step = 5; step < 5 + 7; step++) step_record_book(&r, step, 0.0, -(double)step);
    cr_assert_eq(step_record_tail(&r, LOSS_TAIL_MAX, tail), 7);
    cr_assert_eq(tail[0], -5.0);
    cr_assert_eq(tail[6], -11.0);
    step_record_free(&r);
}

/* An in-process mnist-mlp run on synthetic data with a progress line forced to the terminal's redrawn form (or plain
 * lines, mode 2), the options kv (NULL-ended); returns its status, stderr in *err (free it). */
static int run_with_progress(int mode, const char *const *kv, char **err)
{
    struct bench_config c;
    bench_config_defaults(&c);
    th_bench_quiet(&c, 1024, 256);
    c.quiet = 0; /* progress on; the summary on stdout is not read */
    for (int k = 0; kv[k]; k += 2)
        cr_assert_eq(bench_config_set(&c, kv[k], kv[k + 1]), TB_OK, "--%s: %s", kv[k], tb_error_get());
    progress_force(mode);
    th_stderr_begin();
    const int st = bench_run(&c);
    *err = th_stderr_end();
    progress_force(-1);
    return st;
}

/* Soak probe: a periodic checkpoint that failed (its folder removed, a full disk) printed its warning at the end of
 * the terminal's progress line: "... ETA 0:04bench: warning: step 100000: checkpoint ...". The line is cleared
 * first. The checkpoint fails here on a file-size limit below its size. */
Test(soak, a_warning_mid_run_starts_its_own_line, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct rlimit lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &lim), 0);
    lim.rlim_cur = 64 * 1024; /* an mnist-mlp checkpoint is 2 MB; a row a few KB */
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char *err = NULL;
    const int st = run_with_progress(1, KV("steps", "40", "batch", "4", "checkpoint-dir", "ck", "checkpoint-every", "5",
                                           "mllog", "none", "no-eval", NULL), &err);
    cr_assert_neq(st, TB_OK, "the last checkpoint cannot be written either");
    const char *w = strstr(err, "bench: warning: step 5:");
    cr_assert_not_null(w, "no warning for the checkpoint of step 5:\n%s", err);
    cr_assert(strstr(err, " step 1/40 ") != NULL, "the progress line was drawn before it:\n%s", err);
    cr_assert(w > err && (w[-1] == '\r' || w[-1] == '\n'), "the warning went on at the end of the progress line: \"%.*s\"",
              (int)(w + 40 - (w - 60 > err ? w - 60 : err)), w - 60 > err ? w - 60 : err);
    free(err);
}

/* The rate on the last progress line of a tta run: the number before " img/s" in the last line drawn. */
static double last_line_rate(const char *err)
{
    const char *last = NULL;
    for (const char *p = err; (p = strstr(p, " img/s")) != NULL; p++) last = p;
    cr_assert_not_null(last, "no rate on any progress line:\n%s", err);
    const char *b = last;
    while (b > err && b[-1] != ' ') b--;
    char num[32];
    size_t n = 0;
    for (const char *p = b; p < last && n + 1 < sizeof num; p++)
        if (*p != ',') num[n++] = *p;
    num[n] = '\0';
    return strtod(num, NULL);
}

/* Soak probe: a tta run evaluating every 50 steps showed "5,950 img/s" on its progress line and "train 10.29 s at
 * 4.663e+04 img/s overall" in its summary: the line divided by the evaluations' time too (and a train run's by its
 * checkpoints'). The line's rate is now the training rate the summary and the row give; its ETA stays the wall
 * clock's. Evaluating 256 samples after every 4-sample step of a model that never reaches its target (lr 1e-12),
 * the evaluations take many times the steps' time, so
 * the diluted rate is far below the row's (a ratio, with a wide margin: no time is compared with a bound). */
Test(soak, progress_rate_is_the_training_rate, .init = th_setup, .fini = th_teardown, .timeout = 120)
{
    char *err = NULL;
    const int st = run_with_progress(1, KV("plan", "tta", "target", "0.99", "max-epochs", "1", "eval-every", "1", "batch",
                                           "4", "lr", "1e-12", "mllog", "none"), &err);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, " step 256/256 ") != NULL, "the last step's line is drawn:\n%s", err);
    const double line = last_line_rate(err);
    struct json_value *row = th_last_row();
    cr_assert_not_null(row);
    const double summary = json_get_number(row, "figures.runs.0.images_per_s", NAN);
    const double eval_s = json_get_number(row, "figures.runs.0.eval_time_s", NAN);
    const double train_s = json_get_number(row, "figures.runs.0.train_time_s", NAN);
    json_value_free(row);
    cr_assert(summary > 0.0 && line > 0.0, "line %g img/s, row %g", line, summary);
    /* Only where the evaluations outweigh the steps does a diluted rate show; they do by far on any machine. */
    cr_assert_gt(eval_s, 2.0 * train_s, "evaluations %g s, training %g s", eval_s, train_s);
    cr_assert_gt(line / summary, 0.5, "the line's %g img/s against the row's training rate %g", line, summary);
    free(err);
}

/* An ipu row as `bench --backend ipu --stages 2 --split 1` (no --micro-batch) writes it: the config's micro_batch 0
 * (the ipu chose it), the one that ran in figures.pipeline, and the machine's calibration. */
static const char ipu_chosen_row[] =
    "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"ipu-chosen\",\"status\":\"ok\",\"timestamp\":"
    "\"2024-05-01T12:00:00Z\",\"config\":{\"plan\":\"throughput\",\"backend\":\"ipu\",\"workload\":\"mnist-mlp\","
    "\"batch\":4,\"stages\":2,\"split\":\"1\",\"micro_batch\":0,\"ga\":0,\"input_h\":28,\"input_w\":28,\"input_c\":1,"
    "\"classes\":10,\"precision\":\"fp32\",\"recompute\":false,\"dataset\":\"synthetic\"},\"machine\":{\"cpu_model\":"
    "\"Fixture CPU\",\"n_cores\":2},\"calibration\":{\"sgemm_1t_gflops\":50,\"triad_1t_gbs\":10,\"timestamp\":"
    "\"2024-05-01T11:00:00Z\",\"cpu_model\":\"Fixture CPU\"},\"figures\":{\"images_per_s\":20000,\"pipeline\":{"
    "\"micro_batch\":1,\"stages\":2,\"ga\":4,\"replicas\":1,\"split\":\"1\",\"per_stage\":[{\"fwd_s_per_micro_batch\":"
    "1e-7,\"bwd_s_per_micro_batch\":4e-8},{\"fwd_s_per_micro_batch\":1.1e-5,\"bwd_s_per_micro_batch\":1.5e-5}]}}}\n";

static int report_of(const char *in, const char *out)
{
    char plots[512];
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    const struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    free(th_stderr_end());
    return st;
}

/* Soak probe: `bench report` of an ipu run whose micro-batch the ipu chose died of SIGFPE (exit 136), no REPORT.md,
 * its temporary left: the seed-001 section took the config's 0 as the micro-batch and divided by it. The micro-batch
 * that ran is in figures.pipeline. */
Test(soak, report_models_a_run_whose_micro_batch_the_ipu_chose, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], p[256];
    th_write(th_path(in, sizeof in, "rows.jsonl"), ipu_chosen_row);
    cr_assert_eq(report_of(in, th_path(out, sizeof out, "report")), TB_OK, "%s", tb_error_get());
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    cr_assert(strstr(md, "Run `ipu-chosen`") != NULL && strstr(md, "micro-batch 1,") != NULL,
              "the run modelled at the micro-batch it ran:\n%s", md);
    free(md);
}

/* Soak probe: after a report of rows with such an ipu run, a report of other rows into the same folder left its
 * seed001_cpu chart and data (the other charts an earlier report drew are removed): a chart of a run the rows no
 * longer hold, beside the new ones. */
Test(soak, report_removes_an_earlier_seed001_stage_chart, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], p[256];
    th_path(out, sizeof out, "report");
    snprintf(p, sizeof p, "%s/charts/data", out);
    cr_assert_eq(mkdir(out, 0755), 0);
    snprintf(p, sizeof p, "%s/charts", out);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/charts/data", out);
    cr_assert_eq(mkdir(p, 0755), 0);
    static const char *const left[] = {"charts/seed001_cpu.png", "charts/seed001_cpu.svg", "charts/data/seed001_cpu.dat"};
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s", out, left[k]);
        th_write(p, "an earlier report's\n");
    }
    th_write(th_path(in, sizeof in, "rows.jsonl"),
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"cpu-1\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\"},"
             "\"figures\":{\"images_per_s\":20000}}\n");
    cr_assert_eq(report_of(in, out), TB_OK, "%s", tb_error_get());
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s", out, left[k]);
        cr_assert_lt(th_size(p), 0, "%s is left from the earlier report", p);
    }
}

/* What print_repeats writes for n repeats of rates 1000, 1001, ... (malloc'd). */
static char *repeats_line(int n)
{
    double rep[1000];
    for (int r = 0; r < n; r++) rep[r] = 1000.0 + r;
    char tmpl[] = "/tmp/tb_soak_XXXXXX";
    const int fd = mkstemp(tmpl);
    cr_assert_geq(fd, 0);
    fflush(stdout);
    const int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    print_repeats(rep, n);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    char *out = th_read(tmpl);
    unlink(tmpl);
    return out;
}

/* Soak probe: `--repeat 1000` (the most it takes) printed every repeat's rate on one line of 7,000 characters. The
 * line shows the first 12 and the last, and counts the others (the row keeps them all). */
Test(soak, the_repeats_line_stays_readable_at_a_thousand_repeats)
{
    char *out = repeats_line(1000);
    cr_assert_lt(strlen(out), 300, "%zu characters: %s", strlen(out), out);
    cr_assert(strstr(out, " 1000 1001 ") != NULL && strstr(out, " 1011 ... (987 more") != NULL, "%s", out);
    cr_assert(strstr(out, " 1999 images/s: mean") != NULL, "the last repeat and the statistics: %s", out);
    free(out);
    out = repeats_line(13);
    cr_assert(strstr(out, "more") == NULL && strstr(out, " 1011 1012 images/s") != NULL, "13 fit whole: %s", out);
    free(out);
}
