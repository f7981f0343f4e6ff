/* test_soak.c — what long runs do, checked on short ones that take the same paths: a measuring plan refuses more
 * steps than it keeps times for (the throughput plan read past its record after 2^24 steps); the step record keeps
 * the first and the last losses at any length, past its cap of times too; a warning in the middle of a run starts a
 * line of its own on a terminal; the progress line's rate is the training rate the summary gives, not one diluted by
 * evaluations; a report draws no seed-001 stage chart from a row whose micro-batch the ipu chose (it divided by the
 * recorded 0), and removes the chart an earlier report drew where the rows have no such run any more.
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
