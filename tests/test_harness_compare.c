/* test_harness_compare.c — `bench compare` on fixture rows: a known shift is reported with its size
 * and p < 0.05, no shift gives "~", rows of one configuration pool their repeats, configurations on
 * one side only are listed, tta rows compare their times to accuracy, and rows of runs that did not
 * finish (status not "ok") are never matched. */
#include "test_harness_util.h"

#include "compare.h"
#include "status.h"

#include <math.h>

/* A throughput row with the given repeat rates. */
static void row(const char *path, const char *backend, int batch, const double *rep, int n)
{
    char text[2048];
    int len = snprintf(text, sizeof text,
                       "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"r\",\"config\":{\"plan\":\"throughput\","
                       "\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"dataset\":\"synthetic\",\"seed\":%d,"
                       "\"steps\":100,\"warmup\":10},\"figures\":{\"images_per_s\":%g,\"repeat_images_per_s\":[",
                       backend, batch, rand() % 100, rep[0]);
    for (int i = 0; i < n; i++) len += snprintf(text + len, sizeof text - (size_t)len, "%s%.6g", i ? "," : "", rep[i]);
    snprintf(text + len, sizeof text - (size_t)len, "]}}\n");
    th_append(path, text);
}

static const struct compare_line *find(const struct compare_line *l, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(l[i].name, name)) return &l[i];
    cr_assert_fail("no line '%s'", name);
    return NULL;
}

/* compare_results(a, b) at alpha 0.05 with stderr captured; asserts TB_OK and returns what it printed. */
static char *compare_captured(const char *a, const char *b, struct compare_line **l, int *n)
{
    th_stderr_begin();
    int st = compare_results(a, b, 0.05, l, n);
    char *err = th_stderr_end(); /* stderr is back before an assertion can end the test */
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    return err;
}

/* A throughput row of a run that stopped early (status given), with the given rate. */
static void row_status(const char *path, const char *status, int batch, double ips)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"u\",\"status\":\"%s\",\"config\":{\"plan\":"
             "\"throughput\",\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":%d,\"dataset\":\"synthetic\","
             "\"steps\":100,\"warmup\":10},\"figures\":{\"images_per_s\":%g,\"repeat_images_per_s\":[%g]}}\n",
             status, batch, ips, ips);
    th_append(path, text);
}

Test(harness_compare, unfinished_rows_are_not_matched, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const double base[4] = {1000, 1010, 990, 1005};
    row(a, "cpu", 32, base, 4);
    row(b, "cpu", 32, base, 4);
    row_status(b, "interrupted", 32, 10.0); /* would pool into cpu b32 and drag its median down */
    row_status(a, "diverged", 64, 500.0);   /* same configuration on both sides, but neither finished */
    row_status(b, "diverged", 64, 900.0);
    struct compare_line *l;
    int n;
    char *err = compare_captured(a, b, &l, &n);
    cr_assert(strstr(err, "old.jsonl: 1 row of runs that did not finish") != NULL, "%s", err);
    cr_assert(strstr(err, "new.jsonl: 2 rows of runs that did not finish") != NULL, "%s", err);
    free(err);
    cr_assert_eq(n, 1, "only the finished configuration is a line (%d)", n);
    const struct compare_line *cpu = find(l, n, "throughput mnist-mlp cpu b32");
    cr_assert_eq(cpu->n_old, 4);
    cr_assert_eq(cpu->n_new, 4, "the interrupted row adds no sample");
    cr_assert(!cpu->significant);
    cr_assert_float_eq(cpu->new_median, cpu->old_median, 1e-9);
    free(l);
}

Test(harness_compare, known_shift_and_no_shift, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const double base[6] = {1000, 1010, 990, 1005, 995, 1002};
    double up[6], same[6];
    for (int i = 0; i < 6; i++) up[i] = base[i] * 1.10, same[i] = base[(i + 3) % 6] + (i % 2 ? 1.0 : -1.0);
    row(a, "cpu", 32, base, 6);
    row(b, "cpu", 32, up, 6);           /* +10 %: significant */
    row(a, "threads", 32, base, 6);
    row(b, "threads", 32, same, 6);     /* the same distribution: ~ */
    row(a, "cpu", 64, base, 3);         /* one configuration, two rows: pooled to 6 samples */
    row(a, "cpu", 64, base + 3, 3);
    row(b, "cpu", 64, up, 6);
    row(a, "cpu", 128, base, 6);        /* only in OLD */
    th_append(b, "this line is not JSON\n");
    struct compare_line *l;
    int n;
    char *err = compare_captured(a, b, &l, &n);
    cr_assert(strstr(err, "new.jsonl:4") != NULL, "the malformed line is reported: %s", err);
    free(err);
    cr_assert_eq(n, 4);
    const struct compare_line *cpu = find(l, n, "throughput mnist-mlp cpu b32");
    cr_assert(cpu->significant);
    cr_assert(cpu->p < 0.01, "p = %g", cpu->p);
    cr_assert_float_eq(cpu->delta_pct, 10.0, 1e-6);
    cr_assert_eq(cpu->n_old, 6);
    const struct compare_line *thr = find(l, n, "throughput mnist-mlp threads b32");
    cr_assert(!thr->significant, "p = %g", thr->p);
    cr_assert(thr->p > 0.05);
    const struct compare_line *c64 = find(l, n, "throughput mnist-mlp cpu b64");
    cr_assert_eq(c64->n_old, 6, "rows of one configuration pool their repeats");
    cr_assert(c64->significant);
    const struct compare_line *c128 = find(l, n, "throughput mnist-mlp cpu b128");
    cr_assert_eq(c128->n_new, 0);

    char p[192];
    FILE *f = fopen(th_path(p, sizeof p, "out.txt"), "w");
    compare_print(l, n, 0.05, "old.jsonl", "new.jsonl", f);
    fclose(f);
    char *out = th_read(p);
    cr_assert(strstr(out, "+10.00% (p=0.002 n=6+6)") != NULL, "%s", out);
    cr_assert(strstr(out, "~ (p=") != NULL, "%s", out);
    cr_assert(strstr(out, "only in old.jsonl") != NULL, "%s", out);
    cr_assert(strstr(out, "geomean") != NULL, "%s", out);
    free(out);
    free(l);
}

Test(harness_compare, one_sample_a_side_is_never_significant, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const double x = 1000, y = 2000;
    row(a, "cpu", 32, &x, 1);
    row(b, "cpu", 32, &y, 1);
    struct compare_line *l;
    int n;
    cr_assert_eq(compare_results(a, b, 0.05, &l, &n), TB_OK);
    cr_assert_eq(n, 1);
    cr_assert(!l[0].significant);
    cr_assert_float_eq(l[0].delta_pct, 100.0, 1e-9);
    free(l);
}

Test(harness_compare, tta_rows_compare_times_of_runs_that_reached, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const char *head = "{\"schema_version\":1,\"kind\":\"tta\",\"config\":{\"plan\":\"tta\",\"backend\":\"cpu\","
                       "\"workload\":\"mnist-mlp\",\"batch\":32,\"target\":0.88},\"figures\":{\"runs\":[";
    char text[2048];
    snprintf(text, sizeof text, "%s{\"reached\":true,\"tta_s\":10},{\"reached\":true,\"tta_s\":11},{\"reached\":true,"
                                "\"tta_s\":10.5},{\"reached\":true,\"tta_s\":10.2},{\"reached\":false,\"tta_s\":null}]}}\n", head);
    th_append(a, text);
    snprintf(text, sizeof text, "%s{\"reached\":true,\"tta_s\":5},{\"reached\":true,\"tta_s\":5.5},{\"reached\":true,"
                                "\"tta_s\":5.2},{\"reached\":true,\"tta_s\":5.1}]}}\n", head);
    th_append(b, text);
    struct compare_line *l;
    int n;
    cr_assert_eq(compare_results(a, b, 0.05, &l, &n), TB_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(l[0].metric, "tta s");
    cr_assert_eq(l[0].n_old, 4, "the missed run has no time");
    cr_assert(l[0].significant, "p = %g", l[0].p);
    cr_assert(l[0].delta_pct < -45.0);
    free(l);
}

Test(harness_compare, missing_file_is_an_error)
{
    struct compare_line *l;
    int n;
    cr_assert_eq(compare_results("/nonexistent/a.jsonl", "/nonexistent/b.jsonl", 0.05, &l, &n), TB_EIO);
}
