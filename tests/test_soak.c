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
