/* test_harness_report.c — `bench report` on a fixture results file: every chart is a valid PNG of
 * non-trivial size (and an SVG), REPORT.md names them and carries the tables, a malformed line is
 * skipped with a warning, and the latest row of a configuration wins; a row with figures.timeline gets
 * its pipeline Gantt chart and the measured bubble beside it; rows of runs that did not finish
 * (status not "ok") are listed, never drawn. Thousands of configurations take seconds; an input that is an
 * output is refused; impossible figures are empty cells; warnings come once; the data's CRC is part of a
 * configuration, and a --time-budget run's budget is, not the steps it chose; rows apart in any option get
 * layer charts of their own. Needs gnuplot (gnuplot-nox). */
#include "test_harness_util.h"

#include "calibrate.h"
#include "json.h"
#include "report.h"
#include "status.h"

#include <ctype.h>
#include <strings.h>
#include <sys/sysmacros.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/wait.h>

static const char *const machine =
    "\"timestamp\":\"2024-05-01T12:00:00Z\",\"machine\":{\"cpu_model\":\"Fixture CPU\",\"n_cores\":2,\"mem_gib\":8},"
    "\"build\":{\"compiler\":\"GNU 12.2.0\",\"blas\":\"OpenBLAS\",\"blas_core\":\"Zen\",\"commit\":\"abc123def456\"}";

static void throughput(const char *path, const char *backend, int batch, double median, double jitter)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"tp-%s-%d\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"dataset\":\"synthetic\"},%s,"
             "\"figures\":{\"images_per_s\":%g,\"images_per_s_median\":%g,\"images_per_s_mean\":%g,"
             "\"images_per_s_stderr\":%g,\"images_per_s_jitter\":%g,\"repeat_images_per_s\":[%g,%g,%g],"
             "\"gflops_per_s\":%g,\"est_intensity_flop_per_byte\":3.2,\"sgemm_peak_share\":0.4,\"peak_rss_mib\":20}}\n",
             backend, batch, backend, batch, machine, median * 0.9, median, median * 0.98, jitter / 5, jitter,
             median * 0.9, median * 0.91, median * 0.89, median * 8.0e-4);
    th_append(path, t);
}

static void tta(const char *path, const char *backend, double scale)
{
    char t[4096];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"tta\",\"run_id\":\"tta-%s\",\"config\":{\"plan\":\"tta\",\"backend\":\"%s\","
             "\"workload\":\"mnist-mlp\",\"batch\":32,\"target\":0.88},%s,\"figures\":{\"target\":0.88,\"runs_total\":2,"
             "\"runs_reached\":1,\"tta_olympic_mean_s\":%g,\"images_per_s\":%g,\"runs\":["
             "{\"seed\":42,\"reached\":true,\"tta_s\":%g,\"eval_time_s\":0.5,\"epochs\":3,\"step_time_p99_s\":%g,"
             "\"step_time_median_s\":%g,"
             "\"curve\":["
             "{\"time_s\":%g,\"accuracy\":0.84},{\"time_s\":%g,\"accuracy\":0.866},{\"time_s\":%g,\"accuracy\":0.881}]},"
             "{\"seed\":43,\"reached\":false,\"tta_s\":null,\"best_accuracy\":0.875,\"epochs\":4,"
             "\"step_time_median_s\":%g,\"curve\":["
             "{\"time_s\":%g,\"accuracy\":0.83},{\"time_s\":%g,\"accuracy\":0.85},{\"time_s\":%g,\"accuracy\":0.87},"
             "{\"time_s\":%g,\"accuracy\":0.875}]}]}}\n",
             backend, backend, machine, 6 * scale, 12000.0 / scale, 6 * scale, 0.004 * scale, 2.5e-4 * scale, 2 * scale, 4 * scale, 6 * scale,
             6.5e-4 * scale, 2.1 * scale, 4.2 * scale, 6.3 * scale, 8.4 * scale);
    th_append(path, t);
}

static void scaling(const char *path, const char *backend, const char *sweep, int batch, double ips, double eff)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"scaling\",\"run_id\":\"%s-b%d\",\"sweep\":\"%s\",\"config\":{\"plan\":"
             "\"scaling\",\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"epochs\":0},%s,\"figures\":{"
             "\"images_per_s\":%g,\"global_batch\":%d,\"local_batch\":%d,\"replicas\":1,\"accumulation\":1,"
             "\"speedup\":%g,\"efficiency\":%g,\"peak_rss_mib\":30}}\n",
             sweep, batch, sweep, backend, batch, machine, ips, batch, batch, eff, eff);
    th_append(path, t);
}

static void check_png(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/charts/%s.png", dir, name);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "missing chart %s", p);
    unsigned char sig[8];
    cr_assert_eq(fread(sig, 1, 8, f), 8);
    fclose(f);
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    cr_assert(memcmp(sig, png, 8) == 0, "%s is not a PNG", p);
    cr_assert(th_size(p) > 5 * 1024, "%s is only %ld bytes", p, th_size(p));
    snprintf(p, sizeof p, "%s/charts/%s.svg", dir, name);
    cr_assert(th_size(p) > 1024, "missing or tiny %s", p);
    char *svg = th_read(p);
    cr_assert(strstr(svg, "<svg") != NULL);
    free(svg);
}

/* The name of the chart REPORT.md links after `after` (an alt text, or "](charts/" and a name's start), into
 * out: a layer chart's name ends in a hash of its row's configuration, which a test need not spell. */
static void md_chart_after(const char *md, const char *after, char *out, size_t n)
{
    const char *a = strstr(md, after);
    cr_assert_not_null(a, "REPORT.md links no chart after \"%s\":\n%s", after, md);
    const char *c = strstr(a, "](charts/");
    cr_assert_not_null(c, "%s", a);
    c += strlen("](charts/");
    const char *e = strstr(c, ".png)");
    cr_assert(e != NULL && (size_t)(e - c) < n, "%s", c);
    snprintf(out, n, "%.*s", (int)(e - c), c);
}

/* bench report of the rows in `in` into out_dir: it succeeds and gnuplot draws every chart. */
static void report_every_chart_into(const char *in, const char *out_dir)
{
    char plots[512];
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = out_dir, .plots_dir = plots};
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "gnuplot failed") == NULL, "%s", err);
    free(err);
}

/* report_every_chart_into the test's report/ directory (its path left in out). */
static void report_every_chart(const char *in, char *out, size_t n)
{
    report_every_chart_into(in, th_path(out, n, "report"));
}

Test(harness_report, fixture_renders_every_chart, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], cal[192], out[192], plots[512];
    th_path(in, sizeof in, "results.jsonl");
    th_path(cal, sizeof cal, "calibration.json");
    th_path(out, sizeof out, "report");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    th_write(cal, "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"2024-05-01T11:00:00Z\",\"sgemm_n\":2048,"
                  "\"cpu_model\":\"Fixture CPU\",\"cores\":2,\"blas_core\":\"Zen\","
                  "\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,\"all_threads\":2,\"triad_1t_gbs\":12,"
                  "\"triad_all_gbs\":18}\n");
    throughput(in, "cpu", 32, 1000.0, 50.0); /* superseded by the row below */
    throughput(in, "cpu", 32, 25000.0, 400.0);
    throughput(in, "threads", 32, 18000.0, 900.0);
    throughput(in, "threads", 256, 40000.0, 1500.0);
    th_append(in, "{\"schema_version\":1,\"kind\":\"throughput\",\"config\":{\"backend\":\n"); /* malformed */
    tta(in, "cpu", 1.0);
    tta(in, "threads", 1.6);
    const int b[5] = {16, 32, 64, 128, 256};
    for (int k = 0; k < 5; k++) scaling(in, "cpu", "sw-cpu", b[k], 20000.0 * (1 + k * 0.2), 1 + k * 0.2);
    for (int k = 0; k < 5; k++) scaling(in, "threads", "sw-thr", b[k], 12000.0 * (1 + k * 0.5), 1 + k * 0.5);
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"inference\",\"run_id\":\"inf\",\"config\":{\"backend\":\"cpu\","
             "\"workload\":\"mnist-mlp\",\"batch\":256},%s,\"figures\":{\"images_per_s\":90000,"
             "\"images_per_s_median\":95000,\"latency_p50_s\":2.1e-5,\"latency_p90_s\":2.4e-5,\"latency_p99_s\":3e-5,"
             "\"gflops_per_s\":30,\"est_intensity_flop_per_byte\":12}}\n",
             machine);
    th_append(in, t);
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"train\",\"run_id\":\"prof\",\"config\":{\"backend\":\"cpu\","
             "\"workload\":\"mnist-mlp\",\"batch\":32,\"profile\":true},%s,\"figures\":{\"images_per_s\":24000,"
             "\"test_accuracy\":0.85,\"train_time_s\":2.5,\"layer_times\":[{\"name\":\"dense_0\",\"forward_s\":2e-4,"
             "\"backward_s\":4e-4},{\"name\":\"dense_1\",\"forward_s\":1e-4,\"backward_s\":2e-4},{\"name\":\"dense_2\","
             "\"forward_s\":1e-4,\"backward_s\":2e-4},{\"name\":\"dense_3\",\"forward_s\":1e-5,\"backward_s\":2e-5}]}}\n",
             machine);
    th_append(in, t);

    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots, .calibration = cal};
    int n_charts = 0;
    th_stderr_begin();
    int st = report_generate(&o, &n_charts);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    char said[300]; /* bench's prefix, as every line it writes to stderr */
    snprintf(said, sizeof said, "bench: warning: %s:5: skipped a malformed row", in);
    cr_assert(strstr(err, said) != NULL, "the malformed line is skipped with a warning naming it: %s", err);
    free(err);
    cr_assert_eq(n_charts, 6, "the five below and the seeds' published seed001_pods: %d", n_charts);
    char md_path[256], layers[128];
    snprintf(md_path, sizeof md_path, "%s/REPORT.md", out);
    char *md = th_read(md_path);
    md_chart_after(md, "](charts/layers_train_mnist-mlp_cpu_b32_", layers, sizeof layers);
    const char *charts[] = {"throughput_mnist-mlp", "tta_mnist-mlp", "scaling_mnist-mlp", layers, "roofline"};
    for (int k = 0; k < 5; k++) {
        check_png(out, charts[k]);
        char link[128];
        snprintf(link, sizeof link, "](charts/%s.png)", charts[k]);
        cr_assert(strstr(md, link) != NULL, "REPORT.md does not name %s", charts[k]);
    }
    cr_assert(strstr(md, "Fixture CPU") != NULL);
    cr_assert(strstr(md, "abc123def456") != NULL);
    char skipped[400]; /* the document outlives the terminal: the skipped line is counted in it too */
    snprintf(skipped, sizeof skipped, "\n1 line of `%s` was not read as a result row", in);
    cr_assert(strstr(md, skipped) != NULL, "REPORT.md does not count the malformed line:\n%.1500s", md);
    cr_assert(strstr(md, "| cpu | 32 |  | synthetic | **22500** |") != NULL, "the latest cpu b32 row wins:\n%s", md);
    cr_assert(strstr(md, "| cpu | 32 |  | synthetic | **900** |") == NULL, "the superseded row is not shown");
    cr_assert(strstr(md, "missed") != NULL, "a run that missed its target says so");
    /* Why one backend is slower to the target: its overall training rate and step tail beside the score. */
    cr_assert(strstr(md, "| threads | 32 | 0.88 | 9.60 | 1 of 2 | 7500 | 0.400–1.040 (uneven) | 6.40 |") != NULL,
              "the tta table shows the overall rate, the seeds' step medians and the step p99:\n%s", md);
    /* Seeds 2.6× apart in their typical step: flagged, with the reason under the table. */
    cr_assert(strstr(md, "*Uneven*: the runs (seeds) of a row marked so") != NULL, "%s", md);
    cr_assert(strstr(md, "sgemm n=2048 60.0 GFLOP/s") != NULL, "%s", md);
    cr_assert(strstr(md, "## Inference") != NULL && strstr(md, "0.021") != NULL);
    cr_assert(strstr(md, "above the memory roof") == NULL, "every point is under its roof: %s", md);
    free(md);
}

/* An ipu throughput row with the pipeline figures and the last step's timeline (2 devices, G = 4). */
static void ipu_timeline_row(const char *path)
{
    char t[8192], ev[4096] = "";
    int len = 0;
    for (int d = 0; d < 2; d++) {
        double t0 = d ? 1.0e-3 : 0.0;
        for (int mb = 0; mb < 4; mb++, t0 += 1.5e-3)
            len += snprintf(ev + len, sizeof ev - (size_t)len, "%s[%d,%d,0,%d,\"F\",%.4g,%.4g]", len ? "," : "", d, d, mb,
                            t0, t0 + 1.0e-3);
        for (int mb = 0; mb < 4; mb++, t0 += 2.5e-3)
            len += snprintf(ev + len, sizeof ev - (size_t)len, ",[%d,%d,0,%d,\"B\",%.4g,%.4g]", d, d, mb, t0, t0 + 2.0e-3);
        len += snprintf(ev + len, sizeof ev - (size_t)len, ",[%d,%d,0,-1,\"U\",%.4g,%.4g]", d, d, t0, t0 + 0.8e-3);
    }
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"tp-ipu-tl\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"ipu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\","
             "\"stages\":2,\"micro_batch\":8,\"ga\":4,\"replicas\":0,\"schedule\":\"\"},%s,\"figures\":{"
             "\"images_per_s\":9000,\"images_per_s_median\":9100,\"images_per_s_mean\":9050,\"images_per_s_stderr\":40,"
             "\"images_per_s_jitter\":150,\"pipeline\":{\"label\":\"measured\",\"stages\":2,\"micro_batch\":8,\"ga\":4,"
             "\"replicas\":1,\"bubble_measured\":0.382,\"bubble_ideal\":0.2},\"timeline\":{\"label\":\"measured\","
             "\"step\":\"last\",\"span_s\":0.0178,\"devices\":2,\"devices_shown\":2,\"events_total\":18,\"truncated\":false,"
             "\"events\":[%s]}}}\n",
             machine, ev);
    th_append(path, t);
}

/* A row of a run that stopped early: its figures must not be drawn or tabled as a result. */
static void unfinished(const char *path, const char *id, const char *status, int batch, double median)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"%s\",\"status\":\"%s\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"dataset\":\"synthetic\"},%s,"
             "\"figures\":{\"images_per_s\":%g,\"images_per_s_median\":%g,\"images_per_s_mean\":%g,"
             "\"images_per_s_stderr\":1,\"images_per_s_jitter\":1,\"gflops_per_s\":5,\"est_intensity_flop_per_byte\":3}}\n",
             id, status, batch, machine, median, median, median);
    th_append(path, t);
}

Test(harness_report, timeline_chart_and_unfinished_rows, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], plots[512], p[512];
    th_path(in, sizeof in, "results.jsonl");
    th_path(out, sizeof out, "report");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    throughput(in, "cpu", 32, 25000.0, 400.0);
    unfinished(in, "run-interrupted", "interrupted", 32, 777.0); /* later, same configuration: must not win */
    unfinished(in, "run-diverged", "diverged", 64, 555.0);       /* a configuration of its own: not drawn */
    ipu_timeline_row(in);
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
    int n_charts = 0;
    cr_assert_eq(report_generate(&o, &n_charts), TB_OK, "%s", tb_error_get());
    const char *name = "timeline_throughput_mnist-mlp_ipu_b32_s2_m8_g4_r1";
    check_png(out, name);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    char link[160];
    snprintf(link, sizeof link, "](charts/%s.png)", name);
    cr_assert(strstr(md, link) != NULL, "REPORT.md does not name %s:\n%s", name, md);
    cr_assert(strstr(md, "## Pipeline timeline") != NULL);
    cr_assert(strstr(md, "**38.2 %**") != NULL && strstr(md, "= 20.0 %") != NULL, "measured vs ideal bubble:\n%s", md);
    cr_assert(strstr(md, "18 intervals on 2 devices over 17.800 ms") != NULL, "%s", md);
    /* The unfinished rows: listed with their status, in no table or chart of results. */
    cr_assert(strstr(md, "| cpu | 32 |  | synthetic | **22500** |") != NULL, "the finished row stays the latest:\n%s", md);
    cr_assert(strstr(md, "| 777 |") == NULL && strstr(md, "| 555 |") == NULL, "%s", md);
    cr_assert(strstr(md, "**777**") == NULL && strstr(md, "**555**") == NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 64 |  | synthetic") == NULL, "the diverged configuration has no throughput line:\n%s", md);
    cr_assert(strstr(md, "## Runs that did not finish") != NULL, "%s", md);
    cr_assert(strstr(md, "| `run-interrupted` | throughput | mnist-mlp | cpu | 32 | interrupted |") != NULL, "%s", md);
    cr_assert(strstr(md, "| `run-diverged` | throughput | mnist-mlp | cpu | 64 | diverged |") != NULL, "%s", md);
    free(md);
    snprintf(p, sizeof p, "%s/charts/data/throughput_mnist-mlp.dat", out);
    char *dat = th_read(p);
    cr_assert(strstr(dat, "cpu b64") == NULL && strstr(dat, "777") == NULL, "throughput data:\n%s", dat);
    cr_assert(strstr(dat, "cpu b32") != NULL && strstr(dat, "ipu b32") != NULL, "throughput data:\n%s", dat);
    free(dat);
    snprintf(p, sizeof p, "%s/charts/data/%s.dat", out, name);
    dat = th_read(p);
    int lines = 0;
    for (const char *c = dat; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 1 + 18, "a header and one line per interval:\n%s", dat);
    free(dat);
    cr_assert_eq(n_charts, 4, "throughput, roofline, timeline and the seeds' seed001_pods: %d", n_charts);
}

/* Probe environ: a report folder with a ' in its path (bob's results) drew no chart: the scripts pasted the output
 * file's name between single quotes, which the ' ended ("gnuplot failed" for all of them, REPORT.md without one). */
Test(harness_report, charts_into_a_folder_with_quotes_in_its_name, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192];
    th_path(in, sizeof in, "results.jsonl");
    th_path(out, sizeof out, "bob's \"quoted\" report");
    throughput(in, "cpu", 32, 25000.0, 400.0);
    report_every_chart_into(in, out);
    check_png(out, "throughput_mnist-mlp");
}

/* Probe environ: an --out-dir of 1,018 bytes (five folders of 200 'd's) was cut short in the report's fixed buffers: every
 * chart and data file went into a folder "char" beside the "charts" REPORT.md links, exit 0. A path longer than
 * REPORT_PATH_MAX is refused before anything is read or written. */
Test(harness_report, an_out_dir_longer_than_the_report_takes_is_refused, .init = th_setup, .fini = th_teardown)
{
    char in[192], plots[512], out[REPORT_PATH_MAX + 200];
    th_path(in, sizeof in, "results.jsonl");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    throughput(in, "cpu", 32, 25000.0, 400.0);
    int k = snprintf(out, sizeof out, "%s/", th_dir);
    while (k < REPORT_PATH_MAX + 1) out[k] = k % 100 ? 'd' : '/', k++; /* folders of under 100 bytes each */
    out[k] = '\0';
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
    int n_charts = 0;
    cr_assert_eq(report_generate(&o, &n_charts), TB_EINVAL, "taken: %s", tb_error_get());
    cr_assert(strstr(tb_error_get(), "--out-dir") && strstr(tb_error_get(), "at most"), "%s", tb_error_get());
    struct stat sb;
    cr_assert_neq(stat(out, &sb), 0, "the folder was made");
    out[k - 1] = '\0'; /* REPORT_PATH_MAX bytes: taken */
    cr_assert_eq(report_generate(&o, &n_charts), TB_OK, "%s", tb_error_get());
    check_png(out, "throughput_mnist-mlp");
}

/* A profile row of 100 layers (EfficientNet-B0 has 208): the chart draws the 30 slowest, slowest first
 * (all 208 labels had run into one smear, and a row of 100,000 kept gnuplot busy for minutes); the data
 * file keeps every layer with its place in the model; the text says what the others take and gives the
 * time by layer type. */
Test(harness_report, many_layers_chart_the_slowest, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], plots[512], p[512];
    th_path(in, sizeof in, "results.jsonl");
    th_path(out, sizeof out, "report");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    size_t cap = 64 * 1024, len = 0;
    char *t = malloc(cap);
    cr_assert_not_null(t);
    len += (size_t)snprintf(t, cap,
                            "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"prof\",\"status\":\"ok\",\"config\":"
                            "{\"plan\":\"throughput\",\"backend\":\"cpu\",\"workload\":\"effnet-b0\",\"batch\":8},%s,"
                            "\"figures\":{\"images_per_s\":100,\"layer_times\":[",
                            machine);
    /* Layer k takes k+1 µs forward and twice that backward, conv for even k and batchnorm for odd; the
     * slowest is the last, layer 99. Total: 3 · Σ(k+1) = 15,150 µs; the 30 slowest 3 · Σ_{71..100} = 7,695. */
    for (int k = 0; k < 100; k++)
        len += (size_t)snprintf(t + len, cap - len, "%s{\"name\":\"layer_%d\",\"op\":\"%s\",\"forward_s\":%g,"
                                "\"backward_s\":%g,\"idle_s\":%g}", k ? "," : "", k, k % 2 ? "batchnorm" : "conv",
                                (k + 1) * 1e-6, 2 * (k + 1) * 1e-6, 0.3 * (k + 1) * 1e-6);
    snprintf(t + len, cap - len, "]}}\n");
    th_append(in, t);
    free(t);
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
    int n_charts = 0;
    cr_assert_eq(report_generate(&o, &n_charts), TB_OK, "%s", tb_error_get());
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    char name[128];
    md_chart_after(md, "](charts/layers_throughput_effnet-b0_cpu_b8_", name, sizeof name);
    check_png(out, name);
    cr_assert(strstr(md, "The 30 slowest of 100 layers, per step: effnet-b0 on cpu") != NULL, "%s", md);
    /* The chart's title in two lines, the kind and options on the second: on one they ran past the canvas. */
    snprintf(p, sizeof p, "%s/charts/%s.svg", out, name);
    char *svg = th_read(p);
    cr_assert(strstr(svg, ">The 30 slowest of 100 layers, per step: effnet-b0 on cpu, batch 8<") &&
                  strstr(svg, ">(throughput)<"),
              "%s", svg);
    free(svg);
    cr_assert(strstr(md, "The other 70 layers take 7.455 ms of the layers' 15.150 ms a step (49.2 %)") != NULL, "%s", md);
    /* conv: k even, Σ(k+1) over k = 0, 2, …, 98 = 2,500 µs forward; batchnorm: 2,550. */
    /* A pool's row (idle_s): each type's idle share, 0.3 of its 3 µs per µs of forward: 10 %. */
    cr_assert(strstr(md, "| batchnorm | 50 | 2.550 | 5.100 | 50.5 % | 10 % |\n| conv | 50 | 2.500 | 5.000 | 49.5 % | 10 % |") !=
                  NULL,
              "by type, largest first:\n%s", md);
    free(md);
    snprintf(p, sizeof p, "%s/charts/data/%s.dat", out, name);
    char *dat = th_read(p);
    int lines = 0;
    for (const char *c = dat; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 1 + 100, "a header and every layer:\n%s", dat);
    const char *first = strchr(dat, '\n') + 1;
    const char *slowest = "\"layer_99\"\t0.1\t0.2\t99\t\"batchnorm\"\n";
    cr_assert(strncmp(first, slowest, strlen(slowest)) == 0, "slowest first:\n%s", dat);
    free(dat);
}

/* A profiled train row of mnist-mlp on cpu at batch 32 with the given lr, whose first layer takes fw_s forward. */
static void profile_row(const char *path, const char *id, const char *lr, double fw_s)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"train\",\"run_id\":\"%s\",\"status\":\"ok\",\"config\":{\"backend\":"
             "\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"profile\":true,\"lr\":%s},%s,\"figures\":{"
             "\"images_per_s\":24000,\"layer_times\":[{\"name\":\"dense_0\",\"forward_s\":%g,\"backward_s\":4e-4},"
             "{\"name\":\"dense_1\",\"forward_s\":1e-5,\"backward_s\":2e-5}]}}\n",
             id, lr, machine, fw_s);
    th_append(path, t);
}

/* Two profiled rows apart only in lr were both charted as layers_train_mnist-mlp_cpu_b32, the later run's chart
 * and data file replacing the other's under both links. Each row's chart is its own (the name ends in a hash of
 * the configuration), its title names the option, and its data file holds that row's layer times. */
Test(harness_report, layer_charts_of_rows_apart_in_one_option, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], p[512], name[2][128];
    th_path(in, sizeof in, "results.jsonl");
    profile_row(in, "slow", "0.1", 7e-4);
    profile_row(in, "fast", "0.2", 2e-4);
    report_every_chart(in, out, sizeof out);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    md_chart_after(md, "![Per-layer time per step: mnist-mlp on cpu, batch 32 (train lr=0.1)]", name[0], sizeof name[0]);
    md_chart_after(md, "![Per-layer time per step: mnist-mlp on cpu, batch 32 (train lr=0.2)]", name[1], sizeof name[1]);
    free(md);
    cr_assert(strcmp(name[0], name[1]) != 0, "both rows charted as %s", name[0]);
    const char *first[2] = {"\"dense_0\"\t0.7\t0.4\t0\t", "\"dense_0\"\t0.2\t0.4\t0\t"};
    for (int k = 0; k < 2; k++) {
        cr_assert(strncmp(name[k], "layers_train_mnist-mlp_cpu_b32_", 31) == 0, "the readable part stays: %s", name[k]);
        check_png(out, name[k]);
        snprintf(p, sizeof p, "%s/charts/data/%s.dat", out, name[k]);
        char *dat = th_read(p);
        const char *line = strchr(dat, '\n') + 1;
        cr_assert(strncmp(line, first[k], strlen(first[k])) == 0, "%s holds the other row's data:\n%s", name[k], dat);
        free(dat);
    }
}

Test(harness_report, no_rows_is_an_error, .init = th_setup, .fini = th_teardown)
{
    char in[192], out[192], plots[512];
    th_write(th_path(in, sizeof in, "empty.jsonl"), "\n");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = th_path(out, sizeof out, "r"), .plots_dir = plots};
    int n;
    /* Unusable data, not a usage error: bench exits 1 on it (see report_cli_exit_codes). */
    cr_assert_eq(report_generate(&o, &n), TB_EFORMAT);
    o.in = "/nonexistent/results.jsonl";
    cr_assert_eq(report_generate(&o, &n), TB_EIO);
}

/* A throughput row with its headline rate (timed samples ÷ timed seconds) and per-step median apart, and
 * extra config fields (a JSON fragment, may be empty). */
static void tp_row(const char *path, const char *id, const char *backend, double overall, double median,
                   const char *extra_config)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"%s\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\"%s},%s,"
             "\"figures\":{\"images_per_s\":%g,\"images_per_s_median\":%g,\"images_per_s_mean\":%g,"
             "\"images_per_s_stderr\":1,\"images_per_s_jitter\":%g,\"repeat_images_per_s\":[%g,%g],"
             "\"gflops_per_s\":%g,\"est_intensity_flop_per_byte\":3.2,\"peak_rss_mib\":20}}\n",
             id, backend, extra_config, machine, overall, median, median, median * 0.05, overall * 0.95, overall * 1.05,
             overall * 8e-4);
    th_append(path, t);
}

static char *report_md(const char *in, const char *cal, char **err)
{
    char out[192], plots[512], p[256];
    th_path(out, sizeof out, "report");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots, .calibration = cal};
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *e = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    if (err) *err = e;
    else free(e);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    return th_read(p);
}

/* A --gnuplot that is not there: the report's tables, text and chart data files without the charts, for the tests
 * that read no chart (each chart is a gnuplot run, ~0.1 CPU-s; the tests that read charts draw them). Chart titles
 * then stay out of REPORT.md, so these tests assert nothing a title could hold. */
#define NO_GNUPLOT "/nonexistent/gnuplot"

/* err less the line that says the report has no charts (NO_GNUPLOT's), in place; the line must be there. */
static char *without_no_gnuplot_line(char *err)
{
    char *at = strstr(err, "bench report: --gnuplot " NO_GNUPLOT ": ");
    cr_assert_not_null(at, "no line saying why the report has no charts: %s", err);
    const char *next = strchr(at, '\n') ? strchr(at, '\n') + 1 : at + strlen(at);
    memmove(at, next, strlen(next) + 1);
    return err;
}

/* report_md without the charts (NO_GNUPLOT); *err (when not NULL) without the line that says so. */
static char *report_text(const char *in, const char *cal, char **err)
{
    char out[192], plots[512], p[256];
    th_path(out, sizeof out, "report");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots, .calibration = cal, .gnuplot = NO_GNUPLOT};
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *e = without_no_gnuplot_line(th_stderr_end());
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert_eq(n_charts, 0);
    if (err) *err = e;
    else free(e);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    return th_read(p);
}

/* A CPU point above the all-cores memory roof (80 GFLOP/s at 3.2 FLOP/byte against 18 GB/s: 57.6) is named
 * under the roofline with why (its bytes stayed in cache); one under it (16) is not. Neither row says its
 * threads, so both are judged against the all-threads roof. */
Test(harness_report, points_above_the_memory_roof_explained, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], cal[192];
    th_path(in, sizeof in, "results.jsonl");
    th_path(cal, sizeof cal, "calibration.json");
    th_write(cal, "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"sgemm_n\":2048,\"cpu_model\":"
                  "\"Fixture CPU\",\"cores\":2,\"blas_core\":\"Zen\",\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,"
                  "\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":18}\n");
    tp_row(in, "above", "cpu", 100000.0, 100000.0, "");
    tp_row(in, "under", "threads", 20000.0, 20000.0, "");
    char *md = report_text(in, cal, NULL);
    cr_assert(strstr(md, "Point 1 lies above the all-threads memory roof") != NULL, "%s", md);
    cr_assert(strstr(md, "that run moved fewer bytes than the model counts") != NULL, "%s", md);
    cr_assert(strstr(md, "Point 2 lies") == NULL && strstr(md, "1, 2") == NULL, "%s", md);
    free(md);
}

/* Issue 27 item 7: one headline figure. Issue 27's rows: threads' per-step median 164.6k img/s, cpu's 108.6k,
 * while overall threads ran 2.4x slower. The bar (first data column) and the table's headline are the overall
 * rate; the median stays a secondary column with a note beside the row where the two differ by > 20 %. */
Test(harness_report, headline_is_timed_samples_over_timed_seconds, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "c", "cpu", 105000.0, 108600.0, "");
    tp_row(in, "t", "threads", 43750.0, 164600.0, "");
    char *md = report_text(in, NULL, NULL);
    cr_assert(strstr(md, "| cpu | 32 |  | synthetic | **105000** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| threads | 32 |  | synthetic | **43750** |") != NULL, "%s", md);
    const char *t = strstr(md, "| threads | 32 |");
    const char *eol = strchr(t, '\n');
    const char *note = strstr(t, "per-step median +276 % from images/s");
    cr_assert(note && note < eol, "the threads row carries the note:\n%s", md);
    const char *c = strstr(md, "| cpu | 32 |");
    cr_assert(strstr(c, "uneven") == NULL || strstr(c, "uneven") > strchr(c, '\n'), "cpu's rates agree: no note");
    free(md);
    snprintf(p, sizeof p, "%s/report/charts/data/throughput_mnist-mlp.dat", th_dir);
    char *dat = th_read(p);
    cr_assert(strstr(dat, "\"cpu b32\"\t105000\t") != NULL, "the bar is the overall rate:\n%s", dat);
    cr_assert(strstr(dat, "\"threads b32\"\t43750\t") != NULL, "the bar is the overall rate:\n%s", dat);
    free(dat);
}

/* Issue 27 item 8: rows that differ in an option that changes the work (optimizer, lr, --load) are separate
 * configurations, each labelled by what differs; the header counts the rows left out and why; inference
 * rows that used --load do not claim fresh weights; a batch sweep on one replica has a speed-up and no
 * "efficiency"; a sweep over replicas has a scaling efficiency; roofline points are labelled in the key. */
Test(harness_report, hides_nothing, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], p[256], t[2048];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "a0", "cpu", 900.0, 900.0, ",\"optimizer\":\"adam\",\"lr\":0.001"); /* superseded by a1 */
    tp_row(in, "a1", "cpu", 1000.0, 1000.0, ",\"optimizer\":\"adam\",\"lr\":0.001");
    tp_row(in, "s1", "cpu", 2000.0, 2000.0, ",\"optimizer\":\"sgd\",\"lr\":0.1");
    unfinished(in, "u", "diverged", 32, 5.0);
    for (int k = 0; k < 2; k++) {
        snprintf(t, sizeof t,
                 "{\"schema_version\":1,\"kind\":\"inference\",\"run_id\":\"inf%d\",\"config\":{\"backend\":\"cpu\","
                 "\"workload\":\"mnist-mlp\",\"batch\":256,\"load\":\"%s\"},%s,\"figures\":{\"images_per_s\":%d,"
                 "\"images_per_s_median\":90000,\"latency_p50_s\":2e-5,\"latency_p90_s\":2e-5,\"latency_p99_s\":3e-5,"
                 "\"gflops_per_s\":30,\"est_intensity_flop_per_byte\":12}}\n",
                 k, k ? "w.ckpt" : "", machine, 90000 + k);
        th_append(in, t);
    }
    const int b[3] = {16, 32, 64};
    for (int k = 0; k < 3; k++) scaling(in, "cpu", "sw-b", b[k], 1000.0 * (k + 1), k + 1.0);
    for (int k = 0; k < 3; k++) {
        snprintf(t, sizeof t,
                 "{\"schema_version\":1,\"kind\":\"scaling\",\"run_id\":\"r%d\",\"sweep\":\"sw-r\",\"config\":{\"plan\":"
                 "\"scaling\",\"backend\":\"mirrored\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"epochs\":0},%s,"
                 "\"figures\":{\"images_per_s\":%g,\"global_batch\":%d,\"local_batch\":16,\"replicas\":%d,"
                 "\"accumulation\":1,\"speedup\":%g,\"efficiency\":%g,\"peak_rss_mib\":30}}\n",
                 k, 16 << k, machine, 1000.0 * (1 << k) * 0.8, 16 << k, 1 << k, (1 << k) * 0.8, k ? 0.8 : 1.0);
        th_append(in, t);
    }
    char *md = report_text(in, NULL, NULL);
    cr_assert(strstr(md, "12 rows, 10 shown. Left out: 1 superseded by a later row of the same configuration") != NULL,
              "%s", md);
    cr_assert(strstr(md, "1 of runs that did not finish") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 32 | optimizer=adam lr=0.001 | synthetic | **1000** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 32 | optimizer=sgd lr=0.1 | synthetic | **2000** |") != NULL, "%s", md);
    cr_assert(strstr(md, "fresh weights") == NULL, "%s", md);
    cr_assert(strstr(md, "| mnist-mlp | cpu | 256 | load=w.ckpt | w.ckpt | **90001** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| mnist-mlp | cpu | 256 |  | fresh | **90000** |") != NULL, "%s", md);
    const char *sb = strstr(md, "(sweep `sw-b`"), *sr = strstr(md, "(sweep `sw-r`");
    cr_assert(sb && sr, "%s", md);
    const char *sb_end = strstr(sb, "\n\n**");
    cr_assert(sb_end, "%s", md);
    cr_assert(strstr(sb, "speed-up") && strstr(sb, "speed-up") < sb_end, "%s", md);
    cr_assert(strstr(sb, "efficiency") == NULL || strstr(sb, "efficiency") > sb_end, "no efficiency on one replica:\n%s", md);
    cr_assert(strstr(sr, "scaling efficiency") != NULL && strstr(sr, "| 80 % |") != NULL, "%s", md);
    cr_assert(strstr(md, "| 3.00× |") != NULL, "%s", md);
    free(md);
    /* The roofline: one block per point, so each label goes in the key (none drawn beside a point). */
    snprintf(p, sizeof p, "%s/report/charts/data/roofline.dat", th_dir);
    char *dat = th_read(p);
    int blocks = 1;
    for (const char *c = dat; (c = strstr(c, "\n\n")); c += 2) blocks++;
    cr_assert_eq(blocks, 4, "2 training rows, 2 inference rows:\n%s", dat);
    free(dat);
    snprintf(p, sizeof p, "%s/plots/roofline.gp", TB_SOURCE_DIR);
    char *gp = th_read(p);
    cr_assert(strstr(gp, "with labels") == NULL, "labels beside points overlap");
    free(gp);
}

/* Issue 27 item 6: ceilings measured on another machine (CPU model, cores or OpenBLAS kernel set) are
 * ignored with one warning line; those of the rows' machine are used. */
Test(harness_report, calibration_of_another_machine_is_ignored, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], cal[192];
    th_path(in, sizeof in, "results.jsonl");
    th_path(cal, sizeof cal, "calibration.json");
    tp_row(in, "c", "cpu", 1000.0, 1000.0, "");
    th_write(cal, "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"cpu_model\":\"Intel(R) Xeon(R) "
                  "Processor\",\"cores\":2,\"blas_core\":\"SkylakeX\",\"sgemm_n\":2048,\"sgemm_1t_gflops\":121,"
                  "\"sgemm_all_gflops\":225,\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":22}\n");
    char *err = NULL;
    char *md = report_text(in, cal, &err);
    cr_assert(strstr(md, "Machine ceilings") == NULL && strstr(md, "121.0 GFLOP/s") == NULL, "%s", md);
    cr_assert(strstr(err, "calibration") && strstr(err, "ignored") && strstr(err, "Xeon"), "%s", err);
    int lines = 0;
    for (const char *c = err; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 1, "one warning line: %s", err);
    free(md), free(err);
    /* The same figures measured on the rows' machine are used; so is a core count that matches. */
    th_write(cal, "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"cpu_model\":\"Fixture CPU\","
                  "\"cores\":2,\"blas_core\":\"Zen\",\"sgemm_n\":2048,\"sgemm_1t_gflops\":121,"
                  "\"sgemm_all_gflops\":225,\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":22}\n");
    md = report_text(in, cal, NULL);
    cr_assert(strstr(md, "121.0 GFLOP/s") != NULL, "%s", md);
    free(md);
    /* Same CPU, another core count: ignored. */
    th_write(cal, "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"cpu_model\":\"Fixture CPU\","
                  "\"cores\":64,\"blas_core\":\"Zen\",\"sgemm_n\":2048,\"sgemm_1t_gflops\":121,"
                  "\"sgemm_all_gflops\":225,\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":22}\n");
    md = report_text(in, cal, NULL);
    cr_assert(strstr(md, "121.0 GFLOP/s") == NULL, "%s", md);
    free(md);
}

/* Issue 27 items 6 and 8: `make report` and `bench --calibrate` write only paths git ignores, and the
 * repository tracks no report, chart or calibration of some machine. */
Test(harness_report, report_and_calibration_paths_are_ignored, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --is-inside-work-tree >/dev/null 2>&1", TB_SOURCE_DIR);
    if (system(cmd) != 0) {
        cr_skip_test("not a git checkout");
        return;
    }
    static const char *const paths[] = {"results/REPORT.md", "results/charts/roofline.png",
                                        "results/charts/data/roofline.dat", "results/calibration.json"};
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        snprintf(cmd, sizeof cmd, "git -C '%s' check-ignore -q --no-index %s", TB_SOURCE_DIR, paths[k]);
        cr_assert_eq(system(cmd), 0, "%s (written by make report or --calibrate) is ignored", paths[k]);
    }
    snprintf(cmd, sizeof cmd, "test -z \"$(git -C '%s' ls-files results/REPORT.md results/charts results/calibration.json)\"",
             TB_SOURCE_DIR);
    cr_assert_eq(system(cmd), 0, "none of them is tracked");
}

/* A --profile run (slower: per-layer timers) is a configuration of its own: it must not supersede the
 * timed run of the same batch in the default suite, and its label says so. */
Test(harness_report, profiled_run_does_not_replace_the_timed_one, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "t", "cpu", 3000.0, 3000.0, ",\"profile\":false");
    tp_row(in, "p", "cpu", 2000.0, 2000.0, ",\"profile\":true");
    char *md = report_text(in, NULL, NULL);
    cr_assert(strstr(md, "| cpu | 32 | profile=off | synthetic | **3000** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 32 | profile=on | synthetic | **2000** |") != NULL, "%s", md);
    free(md);
}

/* A train row of make seeds (suites/seed-002.suite). */
static void seed_row(const char *path, const char *suite, const char *backend, int devices, int batch, int accum,
                     int stages, int spe, double time_s, double acc)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"train\",\"run_id\":\"seed-%s\",\"suite\":\"%s\",\"status\":\"ok\","
             "\"config\":{\"plan\":\"train\",\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"dataset\":"
             "\"fashion-mnist\",\"batch\":%d,\"local_batch\":1,\"replicas_total\":%d,\"accumulation\":%d,"
             "\"batch_per_replica\":1,\"devices\":%d,\"stages\":%d,\"schedule\":\"%s\",\"epochs\":50,"
             "\"steps_per_epoch\":%d,\"steps\":%d,\"eval_samples\":10000},%s,\"figures\":{\"train_time_s\":%g,"
             "\"eval_time_s\":0.04,\"test_accuracy\":%g,\"images_per_s\":19000}}\n",
             backend, suite, backend, batch, batch / accum, accum, devices, stages, stages ? "1f1b" : "", spe, 50 * spe,
             machine, time_s, acc);
    th_append(path, t);
}

static const char *after(const char *md, const char *a, const char *b)
{
    const char *pa = strstr(md, a), *pb = strstr(md, b);
    return pa && pb && pa < pb ? pb : NULL;
}

/* Issue 30 item 2: the Seeds section renders from rows: seed 001's place, then seed 002's table and chart
 * with the published figures (plots/seed-002.published.tsv, labelled published with their source) and the
 * measured rows (labelled measured here, with the row's CPU and cores and data set). Rows of other suites
 * and unfinished runs stay out. */
Test(harness_report, seeds_section_published_beside_measured, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192];
    th_path(in, sizeof in, "results.jsonl");
    th_path(out, sizeof out, "report");
    throughput(in, "cpu", 32, 25000.0, 400.0);
    seed_row(in, "suites/seed-002.suite", "cpu", 0, 1, 1, 0, 2000, 5.16, 0.8372);
    seed_row(in, "suites/seed-002.suite", "mirrored", 2, 2, 1, 0, 2000, 34.5, 0.861);
    seed_row(in, "build/seed-002.suite", "ipu", 0, 2, 2, 2, 1000, 6.25, 0.8401);
    seed_row(in, "suites/default.suite", "threads", 0, 1, 1, 0, 2000, 777.0, 0.5); /* another suite's row */
    char *md = report_md(in, NULL, NULL);
    const char *sec = strstr(md, "## Seeds");
    cr_assert_not_null(sec, "no Seeds section:\n%s", md);
    cr_assert(after(sec, "### Seed 001", "### Seed 002 — Keras MNIST MLP") != NULL, "seed 001's place, then 002:\n%s", sec);
    cr_assert(strstr(sec, "PROJECTED") != NULL && strstr(sec, "published") != NULL, "seed 001 projected beside published:\n%s", sec);
    /* Published: every system, its figure, its source. */
    const char *pub[4] = {"| 97.10 |", "| 69.45 |", "| 235.56 |", "| 10.90 |"};
    for (int k = 0; k < 4; k++) {
        char cell[32];
        snprintf(cell, sizeof cell, "**%s", pub[k] + 2);
        cell[strlen(cell) - 2] = '\0';
        strcat(cell, "** |");
        cr_assert(strstr(sec, cell) != NULL, "published %s missing:\n%s", cell, sec);
    }
    cr_assert(strstr(sec, "| published (issue 30; 2020 TF2/Keras strategy comparison) | 2x Graphcore GC2 IPU | IPUStrategy |") != NULL,
              "published rows name their source:\n%s", sec);
    /* Measured: labelled, with the machine and the data set. */
    cr_assert(strstr(sec, "| measured here | Fixture CPU, 2 cores | cpu | 1 | 1 | 1 | 50 | 2000 | fashion-mnist | **5.16** |") != NULL,
              "%s", sec);
    cr_assert(strstr(sec, "| measured here | Fixture CPU, 2 cores | mirrored, 2 devices | 2 | 1 | 2 | 50 | 2000 | "
                          "fashion-mnist | **34.50** | 86.10 % (test, 10000 images) |") != NULL, "%s", sec);
    cr_assert(strstr(sec, "| measured here | Fixture CPU, 2 cores | ipu, 2 stages, micro-batch 1 x GA 2 (1f1b) | 2 | 1 | 2 | "
                          "50 | 1000 | fashion-mnist | **6.25** |") != NULL, "%s", sec);
    cr_assert(strstr(sec, "777") == NULL, "a row of another suite is not a seed row:\n%s", sec);
    /* The chart: both kinds of bar, from the table's figures. */
    cr_assert(strstr(sec, "](charts/seeds_002.png)") != NULL, "%s", sec);
    check_png(out, "seeds_002");
    char p[256];
    snprintf(p, sizeof p, "%s/charts/data/seeds_002.dat", out);
    char *dat = th_read(p);
    cr_assert(strstr(dat, "published: 2x Graphcore GC2 IPU, IPUStrategy\t10.9\t1") != NULL, "%s", dat);
    cr_assert(strstr(dat, "measured here: mirrored, 2 devices, 50 epochs\t34.5\t2") != NULL, "%s", dat);
    free(dat);
    free(md);
}

/* Without seed rows the section still shows the published figures and says how to measure them; no chart. */
Test(harness_report, seeds_section_without_measured_rows, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192];
    th_path(in, sizeof in, "results.jsonl");
    throughput(in, "cpu", 32, 25000.0, 400.0);
    char *md = report_md(in, NULL, NULL);
    const char *sec = strstr(md, "## Seeds");
    cr_assert_not_null(sec);
    cr_assert(strstr(sec, "**235.56** |") != NULL, "%s", sec);
    cr_assert(strstr(sec, "run `make seeds`") != NULL, "%s", sec);
    cr_assert(strstr(sec, "measured here |") == NULL && strstr(sec, "seeds_002.png") == NULL, "%s", sec);
    free(md);
}

/* A throughput row of the cuda backend on "Fixture GPU" (machine.gpu), 5,000 GFLOP/s, 1,234 MiB of GPU
 * memory at its peak. */
static void gpu_row(const char *path)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"g\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"cuda\",\"device\":\"cuda\",\"workload\":\"mnist-mlp\",\"batch\":256,"
             "\"dataset\":\"synthetic\"},\"timestamp\":\"2024-05-01T12:00:00Z\",\"machine\":{\"cpu_model\":\"Fixture CPU\","
             "\"n_cores\":2,\"mem_gib\":8,\"gpu\":{\"name\":\"Fixture GPU\",\"driver_version\":\"580.65.06\","
             "\"driver_cuda_version\":\"13.0\",\"runtime_version\":\"13.0\",\"compute_capability\":\"9.0\",\"mem_gib\":139.8,"
             "\"multiprocessors\":132}},\"build\":{\"compiler\":\"GNU 12.2.0\",\"blas\":\"OpenBLAS\",\"blas_core\":\"Zen\","
             "\"commit\":\"abc123def456\"},\"figures\":{\"images_per_s\":900000,\"images_per_s_median\":910000,"
             "\"images_per_s_mean\":905000,\"images_per_s_stderr\":100,\"images_per_s_jitter\":2000,"
             "\"gflops_per_s\":5000,\"est_intensity_flop_per_byte\":40,\"peak_rss_mib\":300,\"gpu_mem_peak_mib\":1234,"
             "\"gpu_mem_used_mib\":2000}}\n");
    th_append(path, t);
}

/* A calibration of the fixture machine; gpu: its "gpu" member as JSON ("" for none). */
static void gpu_calibration(const char *path, const char *gpu)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"2024-05-01T11:00:00Z\",\"cpu_model\":\"Fixture CPU\","
             "\"cores\":2,\"blas_core\":\"Zen\",\"sgemm_n\":2048,\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,"
             "\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":18%s%s}\n", gpu[0] ? "," : "", gpu);
    th_write(path, t);
}

static const char fixture_gpu[] =
    "\"gpu\":{\"status\":\"measured\",\"name\":\"Fixture GPU\",\"driver_version\":\"580.65.06\",\"driver_cuda_version\":"
    "\"13.0\",\"runtime_version\":\"13.0\",\"compute_capability\":\"9.0\",\"mem_gib\":139.8,\"multiprocessors\":132,"
    "\"gemm_n\":8192,\"reps\":5,\"fp32_tflops\":50,\"tf32_tflops\":400,\"bf16_tflops\":800,\"copy_bytes\":1073741824,"
    "\"memcpy_d2d_gbs\":3900,\"copy_kernel_gbs\":4100}";

/* Issue 26 item 5: a row on the GPU is drawn and tabled against the GPU's ceilings from the calibration (the
 * roofline gets the GPU's roofs, the table its share of the fp32 ceiling and its GPU memory), and a cpu row
 * beside it against the sgemm's. */
Test(harness_report, gpu_rows_against_gpu_ceilings, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], cal[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    th_path(cal, sizeof cal, "calibration.json");
    throughput(in, "cpu", 32, 25000.0, 400.0);
    gpu_row(in);
    gpu_calibration(cal, fixture_gpu);
    char *md = report_md(in, cal, NULL);
    cr_assert(strstr(md, "GPU of the latest row on the cuda device: Fixture GPU, compute capability 9.0") != NULL, "%s", md);
    cr_assert(strstr(md, "driver 580.65.06 (CUDA 13.0), CUDA runtime 13.0") != NULL, "%s", md);
    cr_assert(strstr(md, "**GPU ceilings**") != NULL && strstr(md, "fp32 (TF32 off) 50.0 TFLOP/s") != NULL &&
                  strstr(md, "bf16 (fp32 accumulate) 800.0 TFLOP/s") != NULL && strstr(md, "4100 GB/s") != NULL,
              "%s", md);
    cr_assert(strstr(md, "no GPU calibration") == NULL, "%s", md);
    /* 5,000 GFLOP/s of a 50 TFLOP/s ceiling; 1,234 MiB at the peak; the cpu row has no GPU memory. */
    cr_assert(strstr(md, "| 5000.00 | 10.0 % of GPU fp32 | 300 | 1234 |") != NULL, "%s", md);
    cr_assert(strstr(md, "| GPU peak MiB |") != NULL, "%s", md);
    cr_assert(strstr(md, "Points on the cuda device sit under the GPU's roofs (Fixture GPU)") != NULL, "%s", md);
    /* The chart draws the GPU's roofs beside the CPU's (their titles are the key's). */
    snprintf(p, sizeof p, "%s/report/charts/roofline.svg", th_dir);
    char *svg = th_read(p);
    cr_assert(strstr(svg, "Fixture GPU: fp32 (TF32 off) 50.0 TFLOP/s, copy 4100 GB/s") != NULL, "no GPU roof");
    cr_assert(strstr(svg, "Fixture GPU: bf16 800 TFLOP/s") != NULL, "no bf16 roof");
    cr_assert(strstr(svg, "all threads: sgemm 115 GFLOP/s") != NULL, "the CPU's roof is still drawn");
    /* The log axes label 2 and 5 of each decade too: with the powers of ten alone the demo's chart had one
     * labelled GFLOP/s tick. */
    cr_assert(strstr(svg, ">20<") && strstr(svg, ">500<"), "no tick labels between the powers of ten");
    free(svg);
    free(md);
}

/* Without GPU ceilings (a calibration that predates them, or of a machine whose GPU was absent) the GPU rows
 * are shown without ceilings and the report says "no GPU calibration"; a calibration of another GPU is no
 * calibration of this one. */
Test(harness_report, gpu_rows_without_gpu_calibration, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], cal[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    th_path(cal, sizeof cal, "calibration.json");
    gpu_row(in);
    const char *const gpus[] = {"", "\"gpu\":{\"status\":\"absent\",\"reason\":\"cuda: no CUDA device (why)\"}",
                                "\"gpu\":{\"status\":\"measured\",\"name\":\"Other GPU\",\"fp32_tflops\":50,"
                                "\"tf32_tflops\":400,\"bf16_tflops\":800,\"memcpy_d2d_gbs\":3900,\"copy_kernel_gbs\":4100}"};
    for (int k = 0; k < 3; k++) {
        gpu_calibration(cal, gpus[k]);
        char *md = report_md(in, cal, NULL);
        cr_assert(strstr(md, "no GPU calibration of Fixture GPU") != NULL, "case %d:\n%s", k, md);
        cr_assert(strstr(md, "**GPU ceilings**") == NULL && strstr(md, "of GPU fp32") == NULL, "case %d:\n%s", k, md);
        cr_assert(strstr(md, "Points on the cuda device have no GPU roof: no GPU calibration") != NULL, "%s", md);
        cr_assert(strstr(md, "| 5000.00 | – | 300 | 1234 |") != NULL, "case %d:\n%s", k, md);
        snprintf(p, sizeof p, "%s/report/charts/roofline.svg", th_dir);
        char *svg = th_read(p);
        cr_assert(strstr(svg, "TF32") == NULL, "case %d: a GPU roof without ceilings", k);
        free(svg);
        free(md);
    }
}

/* The ceilings a cuda row carries (calibration.gpu_*) serve when no calibration file of the machine is found. */
Test(harness_report, gpu_ceilings_copied_into_rows, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], t[2048];
    th_path(in, sizeof in, "results.jsonl");
    gpu_row(in);
    char *row = th_read(in);
    /* The same row with its calibration copy, as row_begin writes it for a calibrated GPU. */
    char *cut = strstr(row, ",\"figures\"");
    cr_assert_not_null(cut);
    *cut = '\0';
    snprintf(t, sizeof t, "%s,\"calibration\":{\"sgemm_1t_gflops\":60,\"timestamp\":\"T0\",\"gpu_name\":\"Fixture GPU\","
                          "\"gpu_fp32_tflops\":40,\"gpu_tf32_tflops\":300,\"gpu_bf16_tflops\":600,\"gpu_copy_gbs\":3000},%s",
             row, cut + 1);
    free(row);
    th_write(in, t);
    char *md = report_text(in, NULL, NULL);
    cr_assert(strstr(md, "**GPU ceilings** (`bench --calibrate`; copied into the rows, T0): Fixture GPU, cuBLAS fp32 "
                         "(TF32 off) 40.0 TFLOP/s") != NULL, "%s", md);
    cr_assert(strstr(md, "| 12.5 % of GPU fp32 |") != NULL, "%s", md);
    free(md);
}

/* Probe item 1: a profile sidecar that is a FIFO (no writer) blocked the report forever on fopen; it is
 * skipped with one warning line naming it, and the report is written. */
Test(harness_report, profile_sidecar_fifo_is_skipped, .init = th_setup, .fini = th_teardown, .timeout = 20)
{
    char in[192], out[192], plots[512], pdir[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "fifo-run", "cpu", 1000.0, 1000.0, "");
    cr_assert_eq(mkdir(th_path(pdir, sizeof pdir, "profile"), 0755), 0);
    cr_assert_eq(mkfifo(th_path(p, sizeof p, "profile/fifo-run.json"), 0644), 0);
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = th_path(out, sizeof out, "report"), .plots_dir = plots,
                            .profile_dir = pdir, .gnuplot = NO_GNUPLOT}; /* no chart read */
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "fifo-run.json") && strstr(err, "not a regular file") && strstr(err, "skipped"), "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    cr_assert(th_size(p) > 0);
}

/* Probe item 2: plots/seed-002.published.tsv as a FIFO (no writer) blocked the report forever; the seeds
 * section now says it cannot read it, why, and the report is written. */
Test(harness_report, published_seed_figures_fifo_is_refused, .init = th_setup, .fini = th_teardown, .timeout = 20)
{
    char in[192], out[192], plots[192], p[256], cmd[1024];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "a", "cpu", 1000.0, 1000.0, "");
    /* The real scripts, the published figures replaced by a FIFO. */
    cr_assert_eq(mkdir(th_path(plots, sizeof plots, "plots"), 0755), 0);
    snprintf(cmd, sizeof cmd, "ln -s '%s'/plots/* '%s'/ && rm '%s/seed-002.published.tsv'", TB_SOURCE_DIR, plots, plots);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(mkfifo(th_path(p, sizeof p, "plots/seed-002.published.tsv"), 0644), 0);
    struct report_opts o = {.in = in, .out_dir = th_path(out, sizeof out, "report"), .plots_dir = plots,
                            .gnuplot = NO_GNUPLOT}; /* no chart read */
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "seed-002.published.tsv: not a regular file") != NULL, "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    cr_assert(strstr(md, "published figures not found") != NULL, "%s", md);
    free(md);
}

/* Probe item 3: REPORT.md, or a chart or data file the report writes, that is a device node or FIFO: the
 * report renamed a regular file over REPORT.md (replacing /dev/null) or blocked opening a FIFO for
 * writing. It is refused with one line naming it, before anything is written, and the node stays. */
Test(harness_report, device_or_fifo_outputs_are_refused, .init = th_setup, .fini = th_teardown, .timeout = 30)
{
    char in[192], out[192], plots[512], node[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "a", "cpu", 1000.0, 1000.0, "");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    th_path(out, sizeof out, "report");
    static const char *const names[] = {"REPORT.md", "charts/data/throughput_mnist-mlp.dat", "charts/roofline.png",
                                        "charts/data/gnuplot.log"};
    for (size_t k = 0; k < 2 * sizeof names / sizeof *names; k++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/charts/data'", out, out);
        cr_assert_eq(system(cmd), 0);
        snprintf(node, sizeof node, "%s/%s", out, names[k / 2]);
        const int fifo = k % 2 == 0; /* else a private character device like /dev/null, where one may be made */
        if (fifo) cr_assert_eq(mkfifo(node, 0644), 0);
        else if (mknod(node, S_IFCHR | 0666, makedev(1, 3)) != 0) continue;
        struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
        int n_charts = 0;
        th_stderr_begin();
        const int st = report_generate(&o, &n_charts);
        char *err = th_stderr_end();
        free(err);
        cr_assert_eq(st, TB_EIO, "%s: %s", node, tb_error_get());
        cr_assert(strstr(tb_error_get(), node) && strstr(tb_error_get(), "not a regular file"), "%s", tb_error_get());
        struct stat sb;
        cr_assert(stat(node, &sb) == 0 && (fifo ? S_ISFIFO(sb.st_mode) : S_ISCHR(sb.st_mode)), "%s was replaced", node);
        snprintf(cmd, sizeof cmd, "test -z \"$(find '%s' -type f)\"", out); /* before anything was written */
        cr_assert_eq(system(cmd), 0, "%s: the report wrote files before refusing it", node);
        tb_error_clear();
    }
}

/* ---- Probe item 13: figures missing, null, of the wrong type or infinite. */

/* A row of kind with every figure the report shows, its configuration set apart by lr = k; a train row's
 * per-layer times only where layers is set. */
static void fuzz_base(char *t, size_t n, const char *kind, int k, int layers)
{
    const char *figures = "";
    if (!strcmp(kind, "throughput"))
        figures = "\"images_per_s\":1000,\"images_per_s_median\":1010,\"images_per_s_mean\":1005,\"images_per_s_stderr\":2,"
                  "\"images_per_s_jitter\":9,\"repeat_images_per_s\":[990,1010],\"gflops_per_s\":1.5,"
                  "\"est_intensity_flop_per_byte\":3.2,\"sgemm_peak_share\":0.4,\"peak_rss_mib\":20";
    else if (!strcmp(kind, "tta"))
        figures = "\"target\":0.88,\"runs_total\":2,\"runs_reached\":1,\"tta_olympic_mean_s\":6,\"images_per_s\":12000,"
                  "\"runs\":[{\"seed\":42,\"reached\":true,\"tta_s\":6,\"eval_time_s\":0.5,\"epochs\":3,\"step_time_p99_s\":0.004,"
                  "\"step_time_median_s\":0.00025,\"curve\":[{\"time_s\":2,\"accuracy\":0.84},{\"time_s\":6,\"accuracy\":0.881}]},"
                  "{\"seed\":43,\"reached\":false,\"tta_s\":null,\"best_accuracy\":0.875,\"epochs\":4,"
                  "\"step_time_median_s\":0.0003,\"curve\":[{\"time_s\":2.1,\"accuracy\":0.83},{\"time_s\":8.4,\"accuracy\":0.875}]}]";
    else if (!strcmp(kind, "scaling"))
        figures = "\"images_per_s\":2000,\"global_batch\":32,\"local_batch\":16,\"replicas\":2,\"accumulation\":1,"
                  "\"speedup\":1.5,\"efficiency\":0.75,\"peak_rss_mib\":30,\"test_accuracy\":0.5";
    else if (!strcmp(kind, "inference"))
        figures = "\"images_per_s\":90000,\"images_per_s_median\":95000,\"latency_p50_s\":2.1e-5,\"latency_p90_s\":2.4e-5,"
                  "\"latency_p99_s\":3e-5,\"gflops_per_s\":30,\"est_intensity_flop_per_byte\":12";
    else if (!strcmp(kind, "train") && layers)
        figures = "\"images_per_s\":24000,\"images_per_s_median\":24500,\"test_accuracy\":0.85,\"train_time_s\":2.5,"
                  "\"gflops_per_s\":3,\"layer_times\":[{\"name\":\"dense_0\",\"forward_s\":2e-4,\"backward_s\":4e-4},"
                  "{\"name\":\"dense_1\",\"forward_s\":1e-4,\"backward_s\":2e-4}]";
    else if (!strcmp(kind, "train"))
        figures = "\"images_per_s\":24000,\"images_per_s_median\":24500,\"test_accuracy\":0.85,\"train_time_s\":2.5,"
                  "\"gflops_per_s\":3";
    /* Train rows as seed 002's suite writes them, for the seeds section's table and chart too. */
    snprintf(t, n,
             "{\"schema_version\":1,\"kind\":\"%s\",\"run_id\":\"%s-%d\",\"status\":\"ok\",\"sweep\":\"sw-%d\",%s\"config\":{"
             "\"plan\":\"%s\",\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\","
             "\"target\":0.88,\"epochs\":0,\"steps\":10,\"lr\":%d},%s,\"figures\":{%s}}",
             kind, kind, k, k, strcmp(kind, "train") ? "" : "\"suite\":\"suites/seed-002.suite\",", kind, k + 1, machine,
             figures);
}

/* v written to b, the value at the dotted path target replaced by the JSON text repl (NULL: the key left out). */
static void fuzz_emit(struct json_buf *b, const struct json_value *v, const char *path, const char *target, const char *repl)
{
    char child[256];
    if (v->type == JSON_OBJECT) {
        json_begin_object(b);
        for (int i = 0; i < v->n; i++) {
            snprintf(child, sizeof child, "%s%s%s", path, path[0] ? "." : "", v->keys[i]);
            if (strcmp(child, target)) json_key(b, v->keys[i]), fuzz_emit(b, &v->items[i], child, target, repl);
            else if (repl) json_key_raw(b, v->keys[i], repl);
        }
        json_end_object(b);
    } else if (v->type == JSON_ARRAY) {
        json_begin_array(b);
        for (int i = 0; i < v->n; i++) {
            snprintf(child, sizeof child, "%s.%d", path, i);
            if (strcmp(child, target)) fuzz_emit(b, &v->items[i], child, target, repl);
            else json_raw(b, repl ? repl : "null");
        }
        json_end_array(b);
    } else {
        json_write_value(b, v);
    }
}

/* Whether text holds "nan" or "inf" as a word (any case), as printf writes a non-finite double. */
static const char *nan_word(const char *text)
{
    for (const char *c = text; *c; c++) {
        if (c > text && (isalnum((unsigned char)c[-1]) || c[-1] == '_')) continue;
        if ((strncasecmp(c, "nan", 3) && strncasecmp(c, "inf", 3)) || isalnum((unsigned char)c[3])) continue;
        return c;
    }
    return NULL;
}

/* Every figure the report shows, missing, null, a string, an object or ±infinite (1e400): the tables show
 * the empty-cell mark, never nan or inf, and the charts' data files carry no such row, so gnuplot draws
 * every chart that still has a point. A train row carries per-layer times where one of them is the figure
 * replaced: its per-layer section and chart read nothing else of the figures (report.c, layers_of_row), so the
 * 40 other rows drew the same chart again, one gnuplot each (4.8 of this test's 8.6 CPU-s under ASan). */
Test(harness_report, missing_or_non_finite_figures_show_as_empty_cells, .init = th_setup, .fini = th_teardown,
     .timeout = 120)
{
    static const char *const kinds[] = {"throughput", "tta", "scaling", "inference", "train"};
    static const char *const paths[][20] = {
        {"figures", "figures.images_per_s", "figures.images_per_s_median", "figures.images_per_s_mean",
         "figures.images_per_s_stderr", "figures.images_per_s_jitter", "figures.repeat_images_per_s",
         "figures.repeat_images_per_s.0", "figures.gflops_per_s", "figures.est_intensity_flop_per_byte",
         "figures.sgemm_peak_share", "figures.peak_rss_mib", NULL},
        {"figures", "figures.runs_total", "figures.runs_reached", "figures.tta_olympic_mean_s", "figures.images_per_s",
         "figures.runs.0", "figures.runs.0.seed", "figures.runs.0.tta_s", "figures.runs.0.eval_time_s",
         "figures.runs.0.epochs", "figures.runs.0.step_time_p99_s", "figures.runs.0.step_time_median_s",
         "figures.runs.0.curve.0.time_s", "figures.runs.0.curve.1.accuracy", "figures.runs.1.best_accuracy",
         "figures.runs.1.epochs", NULL},
        {"figures", "figures.images_per_s", "figures.local_batch", "figures.replicas", "figures.accumulation",
         "figures.speedup", "figures.efficiency", "figures.peak_rss_mib", "figures.test_accuracy", "config.batch", NULL},
        {"figures", "figures.images_per_s", "figures.images_per_s_median", "figures.latency_p50_s",
         "figures.latency_p90_s", "figures.latency_p99_s", "figures.gflops_per_s",
         "figures.est_intensity_flop_per_byte", NULL},
        {"figures", "figures.images_per_s", "figures.images_per_s_median", "figures.test_accuracy",
         "figures.train_time_s", "figures.gflops_per_s", "figures.layer_times.0.forward_s",
         "figures.layer_times.1.backward_s", NULL},
    };
    static const char *const repls[] = {NULL, "null", "\"x\"", "{}", "1e400", "-1e400", "1e308", "0"};
    const int n_repls = (int)(sizeof repls / sizeof *repls);
    char in[192], t[4096], p[512], out[192];
    th_path(in, sizeof in, "results.jsonl");
    int k = 0;
    for (size_t kind = 0; kind < sizeof kinds / sizeof *kinds; kind++)
        for (int j = 0; paths[kind][j]; j++)
            for (int r = 0; r < n_repls; r++, k++) {
                fuzz_base(t, sizeof t, kinds[kind], k, !strncmp(paths[kind][j], "figures.layer_times.", 20));
                struct json_value *v = NULL;
                cr_assert_eq(json_parse(t, strlen(t), &v), TB_OK, "%s", t);
                struct json_buf b;
                json_buf_init(&b);
                fuzz_emit(&b, v, "", paths[kind][j], repls[r]);
                cr_assert_eq(json_buf_status(&b), TB_OK);
                th_append(in, json_buf_str(&b));
                th_append(in, "\n");
                json_buf_free(&b);
                json_value_free(v);
            }
    report_every_chart(in, out, sizeof out);
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    const char *w = nan_word(md);
    if (w) {
        const char *bol = w, *eol = strchr(w, '\n');
        while (bol > md && bol[-1] != '\n') bol--;
        cr_assert_fail("REPORT.md shows a non-finite figure: %.*s", (int)(eol ? eol - bol : 200), bol);
    }
    cr_assert(strstr(md, "| – |") != NULL, "the empty-cell mark is shown");
    cr_assert(strstr(md, "not rendered") == NULL, "every chart is drawn:\n%s", md);
    free(md);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s/charts/data/'*.dat > '%s/dats.txt'", out, th_dir);
    cr_assert_eq(system(cmd), 0);
    char *dats = th_read(th_path(p, sizeof p, "dats.txt"));
    for (char *line = strtok(dats, "\n"); line; line = strtok(NULL, "\n")) {
        char *dat = th_read(line);
        const char *bad = nan_word(dat);
        cr_assert(bad == NULL, "%s carries a non-finite value: %.60s", line, bad);
        free(dat);
    }
    free(dats);
}

/* Probe item 14: the tta chart of a row with more than ~252 seeds failed (its colour and dash lists
 * stopped growing while the curves went on, so gnuplot met empty words). --seeds allows 1000: a row of
 * 1000 seeds beside one of 2 is drawn. */
Test(harness_report, tta_chart_of_1000_seeds, .init = th_setup, .fini = th_teardown, .timeout = 120)
{
    char in[192], out[192];
    th_path(in, sizeof in, "results.jsonl");
    tta(in, "cpu", 1.0);
    const int seeds = 1000;
    size_t cap = 256 + (size_t)seeds * 200, len = 0;
    char *t = malloc(cap);
    cr_assert_not_null(t);
    len += (size_t)snprintf(t + len, cap - len,
                            "{\"schema_version\":1,\"kind\":\"tta\",\"run_id\":\"tta-many\",\"config\":{\"plan\":\"tta\","
                            "\"backend\":\"threads\",\"workload\":\"mnist-mlp\",\"batch\":32,\"target\":0.88,\"seeds\":%d},%s,"
                            "\"figures\":{\"target\":0.88,\"runs_total\":%d,\"runs_reached\":%d,\"tta_olympic_mean_s\":3,"
                            "\"runs\":[", seeds, machine, seeds, seeds);
    for (int s = 0; s < seeds; s++)
        len += (size_t)snprintf(t + len, cap - len,
                                "%s{\"seed\":%d,\"reached\":true,\"tta_s\":%g,\"eval_time_s\":0.1,\"epochs\":1,\"curve\":["
                                "{\"time_s\":%g,\"accuracy\":0.8},{\"time_s\":%g,\"accuracy\":0.89}]}",
                                s ? "," : "", s, 3.0 + s * 1e-3, 1.0 + s * 1e-3, 3.0 + s * 1e-3);
    snprintf(t + len, cap - len, "]}}\n");
    th_append(in, t);
    free(t);
    report_every_chart(in, out, sizeof out);
    check_png(out, "tta_mnist-mlp");
    /* A readable chart: the first seeds of the big row are drawn, and REPORT.md says so; the table counts all. */
    char p[256];
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    cr_assert(strstr(md, "The chart draws the curves of the first 20 seeds of a row") != NULL, "%s", md);
    cr_assert(strstr(md, "| 1000 of 1000 |") != NULL, "%s", md);
    free(md);
    snprintf(p, sizeof p, "%s/charts/data/tta_mnist-mlp.dat", out);
    char *dat = th_read(p);
    int blocks = 1;
    for (const char *c = dat; (c = strstr(c, "\n\n")); c += 2) blocks++;
    cr_assert_eq(blocks, 2 + 20, "the 2 seeds of one row and 20 of the other");
    free(dat);
}

/* ---- Probe item 20: paths given explicitly are never silently ignored. */

/* report_generate on rows with the given options (in, out_dir and plots_dir set here); returns its stderr. */
static char *report_err(struct report_opts o, const char *in)
{
    char out[192], plots[512];
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    o.in = in, o.out_dir = th_path(out, sizeof out, "report"), o.plots_dir = plots;
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    return err;
}

/* report_err without the charts (NO_GNUPLOT), less the line that says so. */
static char *report_err_text(struct report_opts o, const char *in)
{
    o.gnuplot = NO_GNUPLOT;
    return without_no_gnuplot_line(report_err(o, in));
}

/* --calibration naming a missing file or a directory gets a warning line naming it; the default path
 * (results/calibration.json, absent here) stays silent. */
Test(harness_report, explicit_calibration_missing_or_directory_warns, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    char in[192], dir[192];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "a", "cpu", 1000.0, 1000.0, "");
    cr_assert_eq(mkdir(th_path(dir, sizeof dir, "caldir"), 0755), 0);
    const char *const paths[] = {"/nonexistent/calibration.json", dir};
    for (int k = 0; k < 2; k++) {
        char *err = report_err_text((struct report_opts){.calibration = paths[k]}, in);
        cr_assert(strstr(err, paths[k]) && strstr(err, "warning") && strstr(err, "calibration"), "%s", err);
        cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "one line: %s", err);
        free(err);
    }
    char *err = report_err_text((struct report_opts){.calibration = CALIBRATION_DEFAULT_PATH}, in);
    cr_assert_str_eq(err, "", "the default path is silent when absent");
    free(err);
}

/* --gnuplot naming a path that is not an executable says so, not "gnuplot not found"; REPORT.md has its
 * tables and says why it has no charts. */
Test(harness_report, explicit_gnuplot_not_executable, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "a", "cpu", 1000.0, 1000.0, "");
    const char *const paths[] = {"/nonexistent/gnuplot", "/tmp", "no-such-gnuplot-here"};
    const char *const says[] = {"--gnuplot /nonexistent/gnuplot: not an executable", "--gnuplot /tmp: not an executable",
                                "--gnuplot no-such-gnuplot-here: not found on PATH"};
    for (int k = 0; k < 3; k++) {
        char *err = report_err((struct report_opts){.gnuplot = paths[k]}, in);
        cr_assert(strstr(err, says[k]) != NULL && strstr(err, "gnuplot not found") == NULL, "%s", err);
        cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "one line: %s", err);
        free(err);
        snprintf(p, sizeof p, "%s/report/REPORT.md", th_dir);
        char *md = th_read(p);
        cr_assert(strstr(md, says[k]) != NULL && strstr(md, "| cpu | 32 |") != NULL, "%s", md);
        free(md);
    }
}

/* --profile-dir naming a missing directory (or a file) warns once; the default (<dir of --in>/profile,
 * absent here) stays silent. A sidecar larger than 64 KiB is read whole (it was cut and called malformed). */
Test(harness_report, explicit_profile_dir_and_large_sidecar, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], pdir[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "big", "cpu", 1000.0, 1000.0, "");
    tp_row(in, "other", "threads", 1000.0, 1000.0, "");
    char *err = report_err_text((struct report_opts){.profile_dir = "/nonexistent/profile"}, in);
    cr_assert(strstr(err, "--profile-dir /nonexistent/profile") && strstr(err, "warning"), "%s", err);
    cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "one line for both rows: %s", err);
    free(err);
    err = report_err_text((struct report_opts){.profile_dir = in}, in);
    cr_assert(strstr(err, "--profile-dir") && strstr(err, "not a directory"), "%s", err);
    free(err);
    err = report_err_text((struct report_opts){0}, in);
    cr_assert_str_eq(err, "", "the default directory is silent when absent");
    free(err);

    cr_assert_eq(mkdir(th_path(pdir, sizeof pdir, "profile"), 0755), 0);
    FILE *f = fopen(th_path(p, sizeof p, "profile/big.json"), "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"events_note\":\"many counters\",\"counters\":[");
    for (int k = 0; k < 3000; k++) fprintf(f, "%s{\"event\":\"counter-%05d\",\"value\":%d,\"unit\":\"\"}", k ? "," : "", k, k);
    fprintf(f, "],\"top_functions\":[{\"percent\":12.5,\"symbol\":\"sgemm_kernel\",\"dso\":\"libopenblas\"}]}\n");
    fclose(f);
    cr_assert(th_size(p) > 100 * 1024, "%ld", th_size(p));
    /* Over the 64 MiB bound (sparse): refused with a line that says so. */
    f = fopen(th_path(p, sizeof p, "profile/other.json"), "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(truncate(p, 65L << 20), 0);
    err = report_err_text((struct report_opts){0}, in);
    cr_assert(strstr(err, "big.json") == NULL, "%s", err);
    cr_assert(strstr(err, "other.json") && strstr(err, "larger than 64 MiB"), "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/report/REPORT.md", th_dir);
    char *md = th_read(p);
    cr_assert(strstr(md, "| counter-02999 | 2999 |") != NULL && strstr(md, "`sgemm_kernel`") != NULL, "%s", md);
    free(md);
}

/* A run on the cuda device is another configuration than the same backend's on the cpu (bench compare keys
 * on config.device too): neither supersedes the other, and each is labelled by its device. A row without
 * config.device ran on the cpu, so a later "cpu" row supersedes it. */
Test(harness_report, device_is_part_of_the_configuration, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "old", "mirrored", 1000.0, 1000.0, "");                         /* before config.device */
    tp_row(in, "gpu", "mirrored", 9000.0, 9000.0, ",\"device\":\"cuda\"");
    tp_row(in, "new", "mirrored", 1100.0, 1100.0, ",\"device\":\"cpu\"");    /* supersedes "old" */
    tp_row(in, "alone", "threads", 5000.0, 5000.0, ",\"device\":\"cuda\""); /* no cpu row beside it */
    char *md = report_text(in, NULL, NULL);
    cr_assert(strstr(md, "4 rows, 3 shown. Left out: 1 superseded") != NULL, "%s", md);
    cr_assert(strstr(md, "| mirrored | 32 | device=cpu | synthetic | **1100** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| mirrored | 32 | device=cuda | synthetic | **9000** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| threads | 32 | device=cuda | synthetic | **5000** |") != NULL, "%s", md);
    cr_assert(strstr(md, "**1000**") == NULL, "the row without a device is the cpu's, superseded:\n%s", md);
    free(md);
    snprintf(p, sizeof p, "%s/report/charts/data/throughput_mnist-mlp.dat", th_dir);
    char *dat = th_read(p);
    cr_assert(strstr(dat, "\"mirrored b32 device=cpu\"\t1100\t") != NULL, "%s", dat);
    cr_assert(strstr(dat, "\"mirrored b32 device=cuda\"\t9000\t") != NULL, "%s", dat);
    free(dat);
}

/* A point of a scaling sweep: config_extra holds its grid settings (a JSON fragment), the figures its split. */
static void grid_point(const char *path, const char *workload, const char *backend, const char *sweep, int batch,
                       const char *config_extra, int replicas, int accumulation, double ips, double speedup)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"scaling\",\"run_id\":\"%s-b%d-%d-%d\",\"sweep\":\"%s\",\"config\":{"
             "\"plan\":\"scaling\",\"backend\":\"%s\",\"workload\":\"%s\",\"batch\":%d,\"epochs\":0%s},%s,\"figures\":{"
             "\"images_per_s\":%g,\"global_batch\":%d,\"local_batch\":%d,\"replicas\":%d,\"accumulation\":%d,"
             "\"speedup\":%g,\"efficiency\":%g,\"peak_rss_mib\":30}}\n",
             sweep, batch, replicas, accumulation, sweep, backend, workload, batch, config_extra, machine, ips, batch,
             batch / (replicas * accumulation), replicas, accumulation, speedup, speedup / replicas);
    th_append(path, t);
}

/* The block of a chart data file that starts with the header line `label` (quoted), up to the next block. */
static char *dat_block(const char *dat, const char *label)
{
    char head[256];
    snprintf(head, sizeof head, "\"%s\"\n", label);
    const char *b = strstr(dat, head);
    cr_assert(b, "no block %s in:\n%s", head, dat);
    const char *e = strstr(b, "\n\n");
    return strndup(b, e ? (size_t)(e - b + 1) : strlen(b));
}

/* A grid sweep is one line per value of the dimension it varies, not one zig-zag line through all its
 * points: a mirrored batch × devices grid gets a line per devices value; an ipu grid whose global batch is
 * micro-batch × ga × replicas runs a line along ga per micro-batch (or along the micro-batch where ga is
 * fixed). The headings and keys name the varied dimension and its values instead of the first point's
 * value, and the tables show it. */
Test(harness_report, grid_sweep_one_line_per_varied_dimension, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    /* Points in the order bench writes them: batch outer, devices inner. */
    grid_point(in, "mnist-mlp", "mirrored", "sw-m", 32, ",\"devices\":1", 1, 1, 60000, 1.0);
    grid_point(in, "mnist-mlp", "mirrored", "sw-m", 32, ",\"devices\":2", 2, 1, 7000, 0.12);
    grid_point(in, "mnist-mlp", "mirrored", "sw-m", 64, ",\"devices\":1", 1, 1, 40000, 0.67);
    grid_point(in, "mnist-mlp", "mirrored", "sw-m", 64, ",\"devices\":2", 2, 1, 48000, 0.8);
    /* --ga-list 1,2 --micro-batch-list 4,8 on 2 stages, whose ga 1 points failed: ga 2 alone is left. */
    grid_point(in, "mnist-mlp", "ipu", "sw-i", 8, ",\"stages\":2,\"ga\":2,\"micro_batch\":4", 1, 2, 6000, 1.0);
    grid_point(in, "mnist-mlp", "ipu", "sw-i", 16, ",\"stages\":2,\"ga\":2,\"micro_batch\":8", 1, 2, 9000, 1.5);
    /* The whole ga × micro-batch grid (another workload, so no row supersedes another). */
    const int ga[4] = {1, 1, 2, 2}, mb[4] = {4, 8, 4, 8};
    for (int k = 0; k < 4; k++) {
        char extra[128];
        snprintf(extra, sizeof extra, ",\"stages\":2,\"ga\":%d,\"micro_batch\":%d", ga[k], mb[k]);
        grid_point(in, "grid-b", "ipu", "sw-g", mb[k] * ga[k], extra, 1, ga[k], 1000.0 * (k + 1), k + 1.0);
    }
    report_every_chart(in, out, sizeof out);
    check_png(out, "scaling_mnist-mlp");
    check_png(out, "scaling_grid-b");
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    char *md = th_read(p);
    cr_assert(strstr(md, "**mirrored, grid: devices 1, 2** (sweep `sw-m`, throughput, synthetic data; one line per "
                         "devices)") != NULL, "%s", md);
    cr_assert(strstr(md, "| global batch | devices (grid) | local batch |") != NULL, "%s", md);
    const char *rows[4] = {strstr(md, "\n| 32 | 1 | 32 | 1 | 1 | 60000 |"), strstr(md, "\n| 64 | 1 | 64 | 1 | 1 | 40000 |"),
                           strstr(md, "\n| 32 | 2 | 16 | 2 | 1 | 7000 |"), strstr(md, "\n| 64 | 2 | 32 | 2 | 1 | 48000 |")};
    for (int k = 0; k < 4; k++)
        cr_assert(rows[k] && (!k || rows[k - 1] < rows[k]), "the table by line, then batch (row %d):\n%s", k, md);
    cr_assert(strstr(md, "**ipu stages=2 ga=2, grid: micro_batch 4, 8** (sweep `sw-i`") != NULL, "%s", md);
    cr_assert(strstr(md, "micro_batch=4**") == NULL && strstr(md, "mirrored devices=1**") == NULL,
              "no heading names its first point's value:\n%s", md);
    cr_assert(strstr(md, "| global batch | micro_batch (grid) | local batch |") != NULL, "%s", md);
    cr_assert(strstr(md, "| 16 | 8 | 8 | 1 | 2 | 9000 |") != NULL, "%s", md);
    cr_assert(strstr(md, "**ipu stages=2, grid: micro_batch 4, 8 × ga 1, 2** (sweep `sw-g`, throughput, synthetic "
                         "data; the global batch is micro-batch × ga × replicas, so a line runs along ga)") != NULL, "%s", md);
    cr_assert(strstr(md, "| global batch | micro_batch (grid) | ga (grid) | local batch |") != NULL, "%s", md);
    free(md);

    snprintf(p, sizeof p, "%s/charts/data/scaling_mnist-mlp.dat", out);
    char *dat = th_read(p);
    int blocks = 1;
    for (const char *c = dat; (c = strstr(c, "\n\n")); c += 2) blocks++;
    cr_assert_eq(blocks, 3, "a line per devices value and the ipu sweep's:\n%s", dat);
    char *b = dat_block(dat, "mirrored devices=1");
    cr_assert_str_eq(b, "\"mirrored devices=1\"\n32\t60000\t1\n64\t40000\t0.67\n");
    free(b);
    b = dat_block(dat, "mirrored devices=2");
    cr_assert_str_eq(b, "\"mirrored devices=2\"\n32\t7000\t0.12\n64\t48000\t0.8\n");
    free(b);
    b = dat_block(dat, "ipu stages=2 ga=2 (micro_batch 4 → 8)");
    cr_assert_str_eq(b, "\"ipu stages=2 ga=2 (micro_batch 4 → 8)\"\n8\t6000\t1\n16\t9000\t1.5\n");
    free(b);
    free(dat);
    snprintf(p, sizeof p, "%s/charts/data/scaling_grid-b.dat", out);
    dat = th_read(p);
    b = dat_block(dat, "ipu stages=2 micro_batch=4 (ga 1 → 2)");
    cr_assert_str_eq(b, "\"ipu stages=2 micro_batch=4 (ga 1 → 2)\"\n4\t1000\t1\n8\t3000\t3\n");
    free(b);
    b = dat_block(dat, "ipu stages=2 micro_batch=8 (ga 1 → 2)");
    cr_assert_str_eq(b, "\"ipu stages=2 micro_batch=8 (ga 1 → 2)\"\n8\t2000\t2\n16\t4000\t4\n");
    free(b);
    free(dat);
}

/* Runs `TB_BENCH_EXE args` in the test's directory with stdout and stderr into out; returns its exit code. */
static int bench_sh(const char *args, const char *out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > '%s' 2>&1", th_dir, TB_BENCH_EXE, args, out);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The CLI's statuses: 2 for a usage error (a bad option), 1 for data that cannot be used (a rows file without
 * a usable row), as `bench compare` exits on the same file. */
Test(harness_report, report_cli_exit_codes, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char p[192];
    th_path(p, sizeof p, "out.txt");
    th_write("empty.jsonl", "");
    th_write("junk.jsonl", "not json\n{\"kind\":\"throughput\"}\n");
    cr_assert_eq(bench_sh("report --in empty.jsonl --out-dir r --plots '" TB_SOURCE_DIR "/plots'", p), 1);
    char *out = th_read(p);
    cr_assert(strstr(out, "empty.jsonl has no usable result rows") != NULL, "%s", out);
    free(out);
    cr_assert_eq(bench_sh("report --in junk.jsonl --out-dir r --plots '" TB_SOURCE_DIR "/plots'", p), 1);
    cr_assert_eq(bench_sh("compare empty.jsonl empty.jsonl", p), 1, "compare agrees");
    cr_assert_eq(bench_sh("report --bogus", p), 2);
    cr_assert_eq(bench_sh("report --in", p), 2);
    cr_assert_eq(bench_sh("report --in empty.jsonl --plots /nonexistent/plots", p), 2);
    cr_assert_eq(bench_sh("report --help", p), 0);
    out = th_read(p);
    cr_assert(strstr(out, "Exit status: 0") && strstr(out, "2 usage"), "the statuses above are said: %s", out);
    free(out);
}

/* A report whose chart folder cannot be written was made without its tables, exit 0 (the sections skip a chart
 * whose table they cannot open): now refused before anything is written, exit 1, one line naming the folder.
 * As root permissions do not bite, so a child drops to nobody; the folder is root's, the report's folder nobody's. */
Test(harness_report, unwritable_charts_folder_is_refused, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], charts[256];
    throughput(th_path(in, sizeof in, "rows.jsonl"), "cpu", 32, 1000, 20);
    cr_assert_eq(mkdir(th_path(out, sizeof out, "r"), 0755), 0);
    snprintf(charts, sizeof charts, "%s/charts", out);
    cr_assert_eq(mkdir(charts, 0755), 0);
    char data[300];
    snprintf(data, sizeof data, "%s/data", charts); /* both there, as a report made by root leaves them */
    cr_assert_eq(mkdir(data, 0755), 0);
    cr_assert_eq(chmod(th_dir, 0755), 0);
    cr_assert_eq(chmod(in, 0644), 0);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        const int root = geteuid() == 0;
        if (root && (chown(out, 65534, 65534) != 0 || setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                     setuid(65534) != 0))
            _exit(100);
        if (!root && (chmod(data, 0555) != 0 || chmod(charts, 0555) != 0)) _exit(100); /* not root: a folder of ours made read-only */
        if (access(charts, W_OK) == 0) _exit(100);
        char plots[512];
        snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
        struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
        int n = 0;
        const int st = report_generate(&o, &n);
        const char *m = tb_error_get();
        if (write(fds[1], m, strlen(m)) < 0) _exit(101);
        _exit(st == TB_EIO ? 1 : st == TB_OK ? 0 : 2);
    }
    close(fds[1]);
    char msg[1024];
    const ssize_t k = read(fds[0], msg, sizeof msg - 1);
    msg[k > 0 ? k : 0] = '\0';
    close(fds[0]);
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws));
    if (WEXITSTATUS(ws) == 100) cr_skip_test("cannot make an unwritable folder here (root cannot drop privileges)");
    cr_assert_eq(WEXITSTATUS(ws), 1, "status %d: %s", WEXITSTATUS(ws), msg);
    char want[400];
    snprintf(want, sizeof want, "cannot write in %s: Permission denied", charts);
    cr_assert_str_eq(msg, want);
    char md[256];
    snprintf(md, sizeof md, "%s/REPORT.md", out);
    cr_assert(access(md, F_OK) != 0, "REPORT.md was written");
    chmod(charts, 0755), chmod(data, 0755);
}

/* Two reports into one folder at once removed each other's charts and logs (a "gnuplot failed" for a chart that
 * was there): the folder is locked while a report writes it, and a second is refused. This process holds it here. */
Test(harness_report, a_folder_another_report_is_writing_is_refused, .init = th_setup, .fini = th_teardown)
{
    char in[192], out[192], plots[512];
    throughput(th_path(in, sizeof in, "rows.jsonl"), "cpu", 32, 1000, 20);
    cr_assert_eq(mkdir(th_path(out, sizeof out, "r"), 0755), 0);
    char lock[300];
    snprintf(lock, sizeof lock, "%s/.report.lock", out);
    const int fd = open(lock, O_RDWR | O_CREAT, 0644);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0);
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots};
    int n = 0;
    cr_assert_eq(report_generate(&o, &n), TB_EIO);
    char want[300];
    snprintf(want, sizeof want, "%s: another bench report is writing there; wait for it to end", out);
    cr_assert_str_eq(tb_error_get(), want);
    char md[256];
    cr_assert(access(th_path(md, sizeof md, "r/REPORT.md"), F_OK) != 0, "REPORT.md was written");
    close(fd);
    th_stderr_begin();
    cr_assert_eq(report_generate(&o, &n), TB_OK, "%s", tb_error_get());
    free(th_stderr_end());
}

/* Rows with figures.projection (--project-devices) get a section of their own, every projected figure said to
 * be PROJECTED beside the measured rate and the model's gap at the measured arrangement; the report had shown
 * such a row as a plain measured throughput bar and nothing of its projection. Without such rows, no section. */
Test(harness_report, projections_have_their_own_section, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], out[192], md_path[256];
    th_path(in, sizeof in, "rows.jsonl");
    throughput(in, "cpu", 32, 1000, 20);
    report_every_chart(in, out, sizeof out);
    char *md = th_read(th_path(md_path, sizeof md_path, "report/REPORT.md"));
    cr_assert(strstr(md, "## Projections") == NULL, "a section without projected rows:\n%s", md);
    free(md);
    char t[4096];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"pj\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"ipu\",\"workload\":\"mnist-mlp\",\"batch\":64,\"dataset\":\"synthetic\"},%s,"
             "\"figures\":{\"images_per_s\":50000,\"projection\":{\"label\":\"projected\",\"global_batch\":64,"
             "\"validation\":{\"devices\":2,\"replicas\":1,\"ga\":32,\"images_per_s_projected\":60000,"
             "\"images_per_s_measured\":50000,\"gap\":0.2},\"rows\":[{\"devices\":16,\"local_batch\":2,\"replicas\":8,"
             "\"ga\":4,\"global_batch\":64,\"images_per_s_projected\":190000,\"utilisation\":0.2,"
             "\"scaling_efficiency\":0.95},{\"devices\":32,\"local_batch\":2,\"replicas\":16,\"ga\":2,\"global_batch\":64,"
             "\"images_per_s_projected\":-5,\"scaling_efficiency\":0.5}]}}}\n",
             machine);
    th_append(in, t);
    report_every_chart(in, out, sizeof out);
    md = th_read(md_path);
    const char *sec = strstr(md, "## Projections (PROJECTED, not measured)\n");
    cr_assert_not_null(sec, "%s", md);
    cr_assert(strstr(sec, "| mnist-mlp | ipu | 64 |  | 50000 | 60000 images/s on 2 devices (+20.0 %) | 16 | 8 × 4 | "
                          "190000 | 0.95 |\n") != NULL, "%s", sec);
    /* an impossible projected rate is an empty cell, as every figure's */
    cr_assert(strstr(sec, "| 32 | 16 × 2 | – | 0.50 |\n") != NULL, "%s", sec);
    cr_assert(sec < strstr(md, "## Inference"), "the section sits before inference");
    free(md);
}

/* A roofline row with its GFLOP/s at 3.2 FLOP/byte; figures_extra (a JSON fragment) may say its threads. */
static void roof_row(const char *path, const char *id, const char *backend, double gflops, const char *figures_extra)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"%s\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\"},%s,"
             "\"figures\":{\"images_per_s\":%g,\"gflops_per_s\":%g,\"est_intensity_flop_per_byte\":3.2%s}}\n",
             id, backend, machine, gflops * 1250, gflops, figures_extra);
    th_append(path, t);
}

/* Each CPU point is judged against the memory roof of the threads it ran on, as its ceiling share is taken
 * of their sgemm: a one-thread run at 45 GFLOP/s and 3.2 FLOP/byte is above the one-thread roof (12 GB/s:
 * 38.4) though under the all-threads one (18 GB/s: 57.6); a two-thread run at the same rate is not named;
 * one at 80 is, against the all-threads roof. The table and the chart's key say which roof is a point's. */
Test(harness_report, each_point_judged_against_its_threads_roof, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], cal[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    th_path(cal, sizeof cal, "calibration.json");
    th_write(cal, "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"sgemm_n\":2048,\"cpu_model\":"
                  "\"Fixture CPU\",\"cores\":2,\"blas_core\":\"Zen\",\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,"
                  "\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":18}\n");
    roof_row(in, "one", "cpu", 45, ",\"peak_threads\":1");
    roof_row(in, "two", "threads", 45, ",\"peak_threads\":2");
    char *md = report_text(in, cal, NULL);
    cr_assert(strstr(md, "Point 1 lies above the one-thread memory roof: a run cannot compute faster") != NULL, "%s", md);
    cr_assert(strstr(md, "Point 2 lies") == NULL && strstr(md, "Points ") == NULL, "%s", md);
    cr_assert(strstr(md, "| 1 | cpu | mnist-mlp | 32 |  | one thread | 3.20 | 45.00 |") != NULL, "%s", md);
    cr_assert(strstr(md, "| 2 | threads | mnist-mlp | 32 |  | all threads | 3.20 | 45.00 |") != NULL, "%s", md);
    free(md);
    snprintf(p, sizeof p, "%s/report/charts/data/roofline.dat", th_dir);
    char *dat = th_read(p);
    cr_assert(strstr(dat, "\"1 cpu: mnist-mlp b32, 1 thread\"\n") != NULL, "%s", dat);
    cr_assert(strstr(dat, "\"2 threads: mnist-mlp b32\"\n") != NULL, "%s", dat);
    free(dat);

    /* A row without peak_threads says its threads in config.threads or figures.devices_used. */
    th_write(in, "");
    roof_row(in, "one", "cpu", 45, ",\"devices_used\":1");
    roof_row(in, "two", "threads", 80, ",\"devices_used\":2");
    md = report_text(in, cal, NULL);
    cr_assert(strstr(md, "Points 1, 2 lie above the memory roof of their threads (the one-thread roof: 1; the "
                         "all-threads roof: 2)") != NULL, "%s", md);
    free(md);
}

/* ---- A probe of report and compare at scale and on rows edited by hand. */


/* report_generate on in into th_dir/out without gnuplot (tables and data files: the report's own work),
 * stderr captured; asserts the status want and returns REPORT.md (NULL unless TB_OK), stderr in *err. */
static char *report_tables(const char *in, int want, char **err)
{
    char out[192], plots[512], p[256];
    th_path(out, sizeof out, "out");
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    struct report_opts o = {.in = in, .out_dir = out, .plots_dir = plots, .gnuplot = "/nonexistent/gnuplot"};
    int n_charts = 0;
    th_stderr_begin();
    const int st = report_generate(&o, &n_charts);
    char *e = th_stderr_end();
    cr_assert_eq(st, want, "status %d, not %d: %s\n%s", st, want, tb_error_get(), e);
    if (err) *err = e;
    else free(e);
    if (st != TB_OK) return NULL;
    snprintf(p, sizeof p, "%s/REPORT.md", out);
    return th_read(p);
}

/* How often needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *c = hay; (c = strstr(c, needle)); c += strlen(needle)) n++;
    return n;
}

/* Rows that differ only in lr are each a configuration; a results file collecting thousands of them took
 * minutes (each label scanned every row per field, and the latest row of each configuration was found by
 * comparing every pair: 300 rows 9 s, 1,000 over a minute). 3,000 take a second or two now; the timeout
 * leaves a loaded machine tens of times that, and is far below what the quadratic work takes. */
Test(harness_report, thousands_of_configurations, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192];
    th_path(in, sizeof in, "results.jsonl");
    FILE *f = fopen(in, "w");
    cr_assert_not_null(f);
    enum { N = 3000 };
    for (int i = 0; i < N; i++)
        fprintf(f,
                "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"r%d\",\"status\":\"ok\",\"config\":{%s,"
                "\"lr\":%g},%s,\"figures\":{\"images_per_s\":%d,\"gflops_per_s\":1,\"est_intensity_flop_per_byte\":3}}\n",
                i, th_real_config, 0.001 * (i + 1), machine, 1000 + i);
    cr_assert_eq(fclose(f), 0);
    char *md = report_tables(in, TB_OK, NULL);
    cr_assert(strstr(md, "3000 rows, 3000 shown. Left out: 0 superseded") != NULL, "%.600s", md);
    cr_assert(strstr(md, "| cpu | 32 | lr=0.001 | synthetic | **1000** |") != NULL, "each row labelled by its lr");
    cr_assert(strstr(md, "| cpu | 32 | lr=0.5 | synthetic | **1499** |") != NULL, "each row labelled by its lr");
    free(md);
}

/* --in DIR/REPORT.md --out-dir DIR replaced the rows with the report. An input that is an output, however
 * named (the path, a symbolic link, a hard link, a chart's data file), is refused before anything is read
 * or written: TB_EINVAL (exit 2), one line, the file as it was. */
Test(harness_report, input_that_is_an_output_is_refused, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char md_path[192], sym[192], hard[192], dat[256], p[192];
    cr_assert_eq(mkdir(th_path(p, sizeof p, "out"), 0755), 0);
    th_path(md_path, sizeof md_path, "out/REPORT.md");
    throughput(md_path, "cpu", 32, 1000.0, 50.0);
    th_append(md_path, "{\"torn\":\n"); /* a warning, were the file read */
    throughput(md_path, "threads", 32, 1500.0, 50.0);
    char *before = th_read(md_path);
    cr_assert_eq(symlink("REPORT.md", th_path(sym, sizeof sym, "out/rows.jsonl")), 0);
    cr_assert_eq(link(md_path, th_path(hard, sizeof hard, "hard.jsonl")), 0);
    const char *const ins[] = {md_path, sym, hard};
    for (size_t k = 0; k < sizeof ins / sizeof *ins; k++) {
        char *err = NULL;
        cr_assert_null(report_tables(ins[k], TB_EINVAL, &err));
        cr_assert(strstr(tb_error_get(), "out/REPORT.md, which the report writes") != NULL, "%s", tb_error_get());
        cr_assert_str_eq(err, "", "nothing printed but the refusal");
        free(err);
        char *after = th_read(md_path);
        cr_assert_str_eq(after, before, "the rows are untouched");
        free(after);
    }
    /* The rows as a data file of an earlier report, which this one would remove. */
    cr_assert_eq(unlink(sym), 0);
    cr_assert_eq(unlink(md_path), 0);
    cr_assert_eq(mkdir(th_path(p, sizeof p, "out/charts"), 0755), 0);
    cr_assert_eq(mkdir(th_path(p, sizeof p, "out/charts/data"), 0755), 0);
    th_path(dat, sizeof dat, "out/charts/data/throughput_mnist-mlp.dat");
    cr_assert_eq(link(hard, dat), 0);
    cr_assert_null(report_tables(hard, TB_EINVAL, NULL));
    cr_assert(strstr(tb_error_get(), "throughput_mnist-mlp.dat, which the report writes or removes") != NULL, "%s",
              tb_error_get());
    char *after = th_read(hard);
    cr_assert_str_eq(after, before, "the rows are untouched");
    free(after);
    free(before);
    /* The command line: exit 2 and one line. */
    cr_assert_eq(unlink(dat), 0);
    throughput(md_path, "cpu", 32, 1000.0, 50.0);
    char o[192];
    th_path(o, sizeof o, "cli.txt");
    cr_assert_eq(bench_sh("report --in out/REPORT.md --out-dir out --plots '" TB_SOURCE_DIR "/plots'", o), 2);
    char *cli = th_read(o);
    const char *says = "bench report: --in out/REPORT.md is out/REPORT.md, which the report writes";
    cr_assert(!strncmp(cli, says, strlen(says)) && count_of(cli, "\n") == 1, "%s", cli);
    free(cli);
}

/* Rows edited by hand: a headline images/s of -5, 0 or 1e308 showed as **-5**, **0** and a 309-digit
 * integer, an accuracy of 5.0 as 500.00 %, and a batch of 1e30 as -2147483648 (an undefined cast). Each is
 * the empty-cell mark, none is drawn, and one warning says how many values no run can have. */
Test(harness_report, impossible_values_show_as_empty_cells, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], t[2048], p[256];
    th_path(in, sizeof in, "results.jsonl");
    static const char *const rates[] = {"-5", "0", "1e308", "1234"};
    for (int k = 0; k < 4; k++) {
        snprintf(t, sizeof t,
                 "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"tp%d\",\"config\":{\"plan\":\"throughput\","
                 "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"lr\":%d},%s,\"figures\":{"
                 "\"images_per_s\":%s,\"repeat_images_per_s\":[%s,900]}}\n",
                 k, k + 1, machine, rates[k], rates[k]);
        th_append(in, t);
    }
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"big\",\"config\":{\"plan\":\"throughput\","
             "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":1e30,\"lr\":9},%s,\"figures\":{\"images_per_s\":777}}\n",
             machine);
    th_append(in, t);
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"train\",\"run_id\":\"acc\",\"config\":{\"plan\":\"train\",\"backend\":\"cpu\","
             "\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"d\"},%s,\"figures\":{\"images_per_s\":800,"
             "\"test_accuracy\":5.0,\"train_time_s\":2}}\n",
             machine);
    th_append(in, t);
    snprintf(t, sizeof t, /* a run of milliseconds: its time shown, not 0.00 */
             "{\"schema_version\":1,\"kind\":\"train\",\"run_id\":\"ms\",\"config\":{\"plan\":\"train\",\"backend\":\"cpu\","
             "\"workload\":\"mnist-mlp\",\"batch\":64,\"dataset\":\"d\"},%s,\"figures\":{\"images_per_s\":800,"
             "\"train_time_s\":0.00523}}\n",
             machine);
    th_append(in, t);
    char *err = NULL;
    char *md = report_tables(in, TB_OK, &err);
    static const char *const shown_before[] = {"**-5**", "**0**", "500.00 %", "-2147483648", "0000000000", "-5,"};
    for (size_t k = 0; k < sizeof shown_before / sizeof *shown_before; k++)
        cr_assert(strstr(md, shown_before[k]) == NULL, "REPORT.md shows %s:\n%s", shown_before[k], md);
    cr_assert_eq(count_of(md, "|  | **–** | –, 900 |"), 3, "three headlines are marks:\n%s", md);
    cr_assert(strstr(md, "| cpu | 32 | lr=4 |  | **1234** | 1234, 900 |") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | – | lr=9 |  | **777** |") != NULL, "the batch no int holds:\n%s", md);
    cr_assert(strstr(md, "| mnist-mlp | cpu | 32 |  | d | 0 | 2.00 | **800** | – |  | – |") != NULL, "the accuracy:\n%s", md);
    cr_assert(strstr(md, "| mnist-mlp | cpu | 64 |  | d | 0 | 0.00523 | **800** |") != NULL, "the time:\n%s", md);
    free(md);
    /* Drawn: the two possible rates, nothing else. */
    snprintf(p, sizeof p, "%s/out/charts/data/throughput_mnist-mlp.dat", th_dir);
    char *dat = th_read(p);
    cr_assert_eq(count_of(dat, "\n"), 1 + 2, "a header and two bars:\n%s", dat);
    cr_assert(strstr(dat, "\"cpu b32 lr=4\"\t1234\t900\t1234") != NULL, "%s", dat);
    cr_assert(strstr(dat, "\"cpu b– lr=9\"\t777\t") != NULL, "%s", dat);
    free(dat);
    /* Said once: -5, 0 and 1e308 twice each (headline, repeat), the batch, the accuracy. */
    cr_assert_eq(count_of(err, "warning:"), 1, "%s", err);
    cr_assert(strstr(err, "8 values no run can have") && strstr(err, "run tp0, figures.images_per_s = -5"), "%s", err);
    free(err);
}

/* A malformed line beside good rows was warned of twice (seed 001's section read the file again), and an
 * error read "bench report: report: ...". */
Test(harness_report, warnings_and_errors_said_once, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], o[192];
    th_path(in, sizeof in, "results.jsonl");
    throughput(in, "cpu", 32, 1000.0, 50.0);
    th_append(in, "{\"torn\":\n");
    throughput(in, "threads", 32, 1500.0, 50.0);
    char *err = NULL;
    free(report_tables(in, TB_OK, &err));
    cr_assert_eq(count_of(err, "results.jsonl:2"), 1, "the torn line, once:\n%s", err);
    free(err);
    th_write(in, "\n");
    cr_assert_null(report_tables(in, TB_EFORMAT, NULL));
    cr_assert(strncmp(tb_error_get(), "report:", 7), "%s", tb_error_get());
    th_path(o, sizeof o, "cli.txt");
    cr_assert_eq(bench_sh("report --in results.jsonl --out-dir r --plots '" TB_SOURCE_DIR "/plots'", o), 1);
    char *cli = th_read(o);
    const char *says = "bench report: results.jsonl has no usable result rows";
    cr_assert(!strncmp(cli, says, strlen(says)), "%s", cli);
    free(cli);
}

/* A throughput row on dataset "mnist" with the given data CRC (NULL: a row from before rows carried it). */
static void crc_row(const char *path, const char *id, const char *crc, const char *lr, double ips)
{
    char t[2048], c[64] = "";
    if (crc) snprintf(c, sizeof c, ",\"data_crc32\":\"%s\"", crc);
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"%s\",\"config\":{\"plan\":\"throughput\","
             "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"mnist\",\"lr\":%s%s},%s,"
             "\"figures\":{\"images_per_s\":%g}}\n",
             id, lr, c, machine, ips);
    th_append(path, t);
}

/* Two runs on other data under one dataset name ("mnist" from two directories) were one configuration, the
 * later hiding the other. config.data_crc32 is part of the configuration (a row without it matches only
 * rows without it), and shows in the label only where it alone tells two rows apart. */
Test(harness_report, data_crc_is_part_of_the_configuration, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192];
    th_path(in, sizeof in, "results.jsonl");
    crc_row(in, "a", "aaaaaaaa", "0.1", 1000); /* superseded by a2 */
    crc_row(in, "a2", "aaaaaaaa", "0.1", 1100);
    crc_row(in, "b", "bbbbbbbb", "0.1", 1200);
    crc_row(in, "c", "aaaaaaaa", "0.2", 1300);
    crc_row(in, "old", NULL, "0.1", 1400);
    char *md = report_tables(in, TB_OK, NULL);
    cr_assert(strstr(md, "5 rows, 4 shown. Left out: 1 superseded") != NULL, "%.700s", md);
    cr_assert(strstr(md, "| cpu | 32 | lr=0.1 data_crc32=aaaaaaaa | mnist | **1100** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 32 | lr=0.1 data_crc32=bbbbbbbb | mnist | **1200** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 32 | lr=0.1 data_crc32=? | mnist | **1400** |") != NULL, "%s", md);
    cr_assert(strstr(md, "| cpu | 32 | lr=0.2 | mnist | **1300** |") != NULL, "lr tells it apart: no CRC\n%s", md);
    free(md);
}

/* ---- Probe B items 3, 9, 14 and 15. */

/* A throughput row whose config carries extra (",\"key\":value..."), with a calibration copy of the fixture
 * machine (cal: its members) and a ceiling share of share. */
static void share_row(const char *path, const char *id, const char *backend, const char *extra, const char *cal,
                      double share)
{
    char t[2048];
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"%s\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":32,"
             "\"dataset\":\"synthetic\"%s},%s,\"calibration\":{\"cpu_model\":\"Fixture CPU\",\"cores\":2,"
             "\"blas_core\":\"Zen\",\"timestamp\":\"T0\"%s},"
             "\"figures\":{\"images_per_s\":2000,\"gflops_per_s\":50,\"est_intensity_flop_per_byte\":3.2,"
             "\"sgemm_peak_share\":%g}}\n",
             id, backend, extra, machine, cal, share);
    th_append(path, t);
}

/* The bars' tick labels (every option of a configuration) ran off the canvas, shrank the plot and pushed the
 * y label out of it ("difficulty making room for xtic labels"): the chart's labels are wrapped and cut to fit a
 * bar, the data file's first column keeps the whole label, and gnuplot finds room for them. */
Test(harness_report, long_bar_labels_are_wrapped_to_fit, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], p[256];
    th_path(in, sizeof in, "results.jsonl");
    tp_row(in, "c", "cpu", 1700.0, 1700.0, ",\"resolution\":32");
    tp_row(in, "t", "threads", 2700.0, 2700.0, ",\"resolution\":32");
    tp_row(in, "m", "mirrored", 2400.0, 2400.0, ",\"resolution\":32");
    tp_row(in, "i3", "ipu", 2100.0, 2100.0, ",\"resolution\":32,\"repeat\":3");
    tp_row(in, "ip", "ipu", 1750.0, 1750.0,
           ",\"resolution\":32,\"stages\":2,\"micro_batch\":8,\"ga\":4,\"replicas\":1,\"repeat\":1,"
           "\"schedule\":\"1f1b\"");
    free(report_md(in, NULL, NULL));
    char *log = th_read(th_path(p, sizeof p, "report/charts/data/gnuplot.log"));
    cr_assert(strstr(log, "difficulty making room") == NULL, "%s", log);
    free(log);
    char *dat = th_read(th_path(p, sizeof p, "report/charts/data/throughput_mnist-mlp.dat"));
    const char *line = strstr(dat, "\n\"ipu b32 res=32 stages=2");
    cr_assert_not_null(line, "%s", dat);
    const char *eol = strchr(line + 1, '\n'), *wrapped = strrchr(line, '\t');
    cr_assert(eol && wrapped && wrapped < eol, "%s", dat);
    /* At most 3 lines of at most 16 characters (5 bars: 100 / 6) and a closing " …". */
    int lines = 1, col = 0, widest = 0;
    for (const char *c = wrapped + 2; c < eol - 1; c++) {
        if (c[0] == '\\' && c[1] == 'n') lines++, col = 0, c++;
        else if (((unsigned char)*c & 0xc0) != 0x80) col++;
        widest = col > widest ? col : widest;
    }
    cr_assert(lines >= 2 && lines <= 3 && widest <= 16 + 2, "%d lines, %d wide: %.*s", lines, widest,
              (int)(eol - wrapped), wrapped);
    cr_assert(strstr(wrapped, "…") != NULL && strstr(wrapped, "…") < eol, "the cut label says so: %.*s",
              (int)(eol - wrapped), wrapped);
    free(dat);
}

/* A run of one evaluation drew an x range of one point ("empty x range"), its point on the top frame and the
 * target on the bottom axis: time starts at 0 and the range is padded. */
Test(harness_report, one_point_tta_chart_has_a_range, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192], p[256], t[2048];
    th_path(in, sizeof in, "results.jsonl");
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"tta\",\"run_id\":\"one\",\"status\":\"ok\",\"config\":{\"plan\":\"tta\","
             "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"target\":0.1},%s,"
             "\"figures\":{\"target\":0.1,\"runs_total\":1,\"runs_reached\":1,\"tta_olympic_mean_s\":0.0055,"
             "\"images_per_s\":90000,\"runs\":["
             "{\"seed\":42,\"reached\":true,\"tta_s\":0.0055,\"eval_time_s\":0.001,\"epochs\":1,"
             "\"curve\":[{\"time_s\":0.0055,\"accuracy\":1.0}]}]}}\n",
             machine);
    th_append(in, t);
    free(report_md(in, NULL, NULL));
    char *log = th_read(th_path(p, sizeof p, "report/charts/data/gnuplot.log"));
    cr_assert(strstr(log, "empty x range") == NULL && strstr(log, "empty y range") == NULL, "%s", log);
    free(log);
    /* The SVG's axes: the x axis starts at 0, and the y axis reaches past the point (1) and under the target. */
    char *svg = th_read(th_path(p, sizeof p, "report/charts/tta_mnist-mlp.svg"));
    /* gnuplot writes the y ticks (0 to 1.1) before the x ticks: the x axis's 0 is a " 0" after the y axis's top. */
    const char *ytop = strstr(svg, "> 1.1</text>");
    cr_assert_not_null(ytop, "no room above the point");
    cr_assert(strstr(ytop, "> 0</text>") != NULL, "no x tick at 0");
    free(svg);
}

/* Rows carrying a calibration copy without the all-thread sgemm (a file missing it was taken whole) gave a
 * report of "0.0 GFLOP/s on 2 threads": such a copy is no calibration. A share of a calibrated peak above 100 %
 * is said once. The per-layer section says how to get what it lacks (--profile exists). */
Test(harness_report, incomplete_ceilings_and_shares_above_the_peak, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    char in[192];
    th_path(in, sizeof in, "results.jsonl");
    share_row(in, "na", "cpu", "", ",\"sgemm_1t_gflops\":126.7,\"sgemm_all_gflops\":0,\"all_threads\":2,"
                                    "\"triad_1t_gbs\":20,\"triad_all_gbs\":41", 0.4);
    char *err = NULL, *md = report_text(in, NULL, &err);
    cr_assert(strstr(md, "Machine ceilings") == NULL && strstr(md, "0.0 GFLOP/s") == NULL, "%s", md);
    cr_assert(strstr(md, "run with `--profile`") != NULL && strstr(md, "will record") == NULL, "%s", md);
    cr_assert(strstr(err, "above 100 %") == NULL, "%s", err);
    free(md), free(err);
    static const char full[] = ",\"sgemm_1t_gflops\":126.7,\"sgemm_all_gflops\":230,\"all_threads\":2,"
                               "\"triad_1t_gbs\":20,\"triad_all_gbs\":41";
    share_row(in, "hot", "threads", "", full, 86104.1);
    share_row(in, "hot2", "mirrored", "", full, 1.5);
    share_row(in, "fine", "ipu", "", full, 0.5);
    md = report_text(in, NULL, &err);
    cr_assert(strstr(md, "Machine ceilings") != NULL, "%s", md);
    cr_assert(strstr(err, "warning: 2 rows above 100 % of the calibrated peak") && strstr(err, "run hot:"), "%s", err);
    cr_assert_eq(count_of(err, "above 100 %"), 1, "%s", err);
    free(md), free(err);
}

/* A throughput row with the steps and warm-up given, and the --time-budget that chose them (0: none). */
static void budget_row(const char *path, const char *id, int steps, int warmup, double budget, double ips)
{
    char t[2048], fig[64] = "";
    if (budget > 0) snprintf(fig, sizeof fig, "\"time_budget_s\":%g,", budget);
    snprintf(t, sizeof t,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"%s\",\"status\":\"ok\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":8,\"dataset\":\"synthetic\","
             "\"steps\":%d,\"warmup\":%d},%s,\"figures\":{%s\"images_per_s\":%g}}\n",
             id, steps, warmup, machine, fig, ips);
    th_append(path, t);
}

/* Probe C 4: one --time-budget command, whose budget chose 7/28, 8/32 and 8/33 warm-up/timed steps, showed
 * as three configurations with a bar each, and a re-run superseded nothing. Such rows are keyed and named
 * by the budget; --steps given is another configuration. */
Test(harness_report, a_time_budget_run_is_keyed_by_its_budget, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char in[192];
    th_path(in, sizeof in, "results.jsonl");
    budget_row(in, "b1", 28, 7, 0.3, 1000);
    budget_row(in, "b2", 32, 8, 0.3, 1100);
    budget_row(in, "b3", 33, 8, 0.3, 1200);
    budget_row(in, "s", 32, 8, 0, 1300);
    char *md = report_tables(in, TB_OK, NULL);
    cr_assert(strstr(md, "4 rows, 2 shown. Left out: 2 superseded") != NULL, "%.700s", md);
    cr_assert(strstr(md, "steps=budget:0.3s") && strstr(md, "**1200**") && strstr(md, "steps=32"), "%s", md);
    cr_assert(strstr(md, "**1000**") == NULL && strstr(md, "**1100**") == NULL, "%s", md);
    free(md);
}

/* A sweep trained for --epochs runs each point's own steps (1875, 937, ... as the batch doubles): its heading named
 * the first point's "steps=1875" for the whole sweep. It names the epochs. */
Test(harness_report, a_sweep_trained_for_epochs_is_labelled_by_its_epochs, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    char in[192], t[1024];
    th_path(in, sizeof in, "results.jsonl");
    for (int trained = 0; trained < 2; trained++)
        for (int k = 0; k < 3; k++) {
            const int batch = 32 << k, steps = trained ? 60000 / batch : 100;
            snprintf(t, sizeof t,
                     "{\"schema_version\":1,\"kind\":\"scaling\",\"run_id\":\"r%d%d\",\"sweep\":\"sw%d\",\"config\":{"
                     "\"plan\":\"scaling\",\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"epochs\":%d,"
                     "\"steps\":%d},\"figures\":{\"images_per_s\":%d,\"global_batch\":%d,\"local_batch\":%d,"
                     "\"replicas\":1,\"accumulation\":1,\"speedup\":1,\"peak_rss_mib\":30%s}}\n",
                     trained, k, trained, batch, trained, steps, 1000 * (k + 1), batch, batch,
                     trained ? ",\"test_accuracy\":0.8" : "");
            th_append(in, t);
        }
    char *md = report_text(in, NULL, NULL);
    cr_assert(strstr(md, "steps=1 epoch") && !strstr(md, "steps=1875"), "%s", md);
    free(md);
}
