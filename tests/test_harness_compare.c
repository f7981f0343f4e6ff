/* test_harness_compare.c — `bench compare` on fixture rows: a known shift is reported with its size
 * and p < 0.05, no shift gives "~", rows of one configuration pool their repeats, configurations on
 * one side only are listed, tta rows compare their times to accuracy, and rows of runs that did not
 * finish (status not "ok") are never matched; a tta seed that missed counts as infinitely slow; classes,
 * load and max_epochs are part of a configuration; the note on too few samples follows the exact test's
 * smallest p and --alpha; --ignore backend matches rows across backends; the
 * spread printed after ± is the 95 % confidence interval of the median, labelled; `bench compare
 * --help` and `bench report --help` print usage and exit 0; thousands of configurations take seconds; a
 * batch no int holds is "b-" and a rate of 1e308 no sample; the data's CRC is part of a configuration; a
 * --time-budget run is keyed by its budget, not by the steps it chose. */
#include "test_harness_util.h"

#include "compare.h"
#include "status.h"

#include <math.h>
#include <sys/wait.h>

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

/* Six repeats of a run at ~1000 images/s: the baseline the tests shift or leave alone. */
static const double BASE[6] = {1000, 1010, 990, 1005, 995, 1002};

/* The two result files a CLI test compares, and the file its output goes to (192 bytes each). */
static void compare_paths(char *a, char *b, char *p)
{
    th_path(a, 192, "old.jsonl");
    th_path(b, 192, "new.jsonl");
    th_path(p, 192, "cli.txt");
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
    int st = compare_results(a, b, NULL, l, n);
    char *err = th_stderr_end(); /* stderr is back before an assertion can end the test */
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    return err;
}

/* What compare_print prints for the lines (old.jsonl against new.jsonl) with options o, malloc'd. */
static char *printed_opts(const struct compare_line *l, int n, const struct compare_opts *o)
{
    char p[192];
    FILE *f = fopen(th_path(p, sizeof p, "out.txt"), "w");
    cr_assert_not_null(f);
    compare_print(l, n, o, "old.jsonl", "new.jsonl", f);
    fclose(f);
    return th_read(p);
}

/* The same at the defaults (alpha 0.05, nothing ignored). */
static char *printed(const struct compare_line *l, int n)
{
    return printed_opts(l, n, NULL);
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
    double up[6], same[6];
    for (int i = 0; i < 6; i++) up[i] = BASE[i] * 1.10, same[i] = BASE[(i + 3) % 6] + (i % 2 ? 1.0 : -1.0);
    row(a, "cpu", 32, BASE, 6);
    row(b, "cpu", 32, up, 6);           /* +10 %: significant */
    row(a, "threads", 32, BASE, 6);
    row(b, "threads", 32, same, 6);     /* the same distribution: ~ */
    row(a, "cpu", 64, BASE, 3);         /* one configuration, two rows: pooled to 6 samples */
    row(a, "cpu", 64, BASE + 3, 3);
    row(b, "cpu", 64, up, 6);
    row(a, "cpu", 128, BASE, 6);        /* only in OLD */
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

    char *out = printed(l, n);
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
    cr_assert_eq(compare_results(a, b, NULL, &l, &n), TB_OK);
    cr_assert_eq(n, 1);
    cr_assert(!l[0].significant);
    cr_assert_float_eq(l[0].delta_pct, 100.0, 1e-9);
    free(l);
}

Test(harness_compare, tta_rows_compare_times_to_accuracy, .init = th_setup, .fini = th_teardown)
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
    cr_assert_eq(compare_results(a, b, NULL, &l, &n), TB_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(l[0].metric, "tta s");
    cr_assert_eq(l[0].n_old, 5, "the missed run is a sample too");
    cr_assert_eq(l[0].missed_old, 1);
    cr_assert_eq(l[0].missed_new, 0);
    cr_assert_float_eq(l[0].old_median, 10.5, 1e-9, "the middle of 10, 10.2, 10.5, 11 and the miss");
    cr_assert(l[0].significant, "p = %g", l[0].p);
    cr_assert(l[0].delta_pct < -45.0);
    free(l);
}

/* A tta row with one run per time in t[0..n); NAN is a seed that missed its target. */
static void tta_row(const char *path, const double *t, int n)
{
    char text[4096];
    int len = snprintf(text, sizeof text,
                       "{\"schema_version\":1,\"kind\":\"tta\",\"status\":\"ok\",\"config\":{\"plan\":\"tta\","
                       "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"target\":0.88,\"max_epochs\":15},"
                       "\"figures\":{\"runs\":[");
    for (int i = 0; i < n; i++) {
        if (isnan(t[i])) len += snprintf(text + len, sizeof text - (size_t)len, "%s{\"seed\":%d,\"reached\":false,"
                                         "\"tta_s\":null}", i ? "," : "", 42 + i);
        else len += snprintf(text + len, sizeof text - (size_t)len, "%s{\"seed\":%d,\"reached\":true,\"tta_s\":%g}",
                             i ? "," : "", 42 + i, t[i]);
    }
    snprintf(text + len, sizeof text - (size_t)len, "]}}\n");
    th_append(path, text);
}

/* A seed that missed its target was dropped, so a new run where half the seeds missed (and the rest were
 * quick) read as a significant -58 %. It is a sample of +inf, as the olympic mean counts it: ranked above
 * every time, in the median, counted in n, and each line says how many missed on each side. */
Test(harness_compare, tta_missed_seeds_count_as_infinitely_slow, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const double old_t[6] = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5};
    const double half[12] = {0.50, 0.51, 0.52, 0.53, 0.54, 0.55, NAN, NAN, NAN, NAN, NAN, NAN};
    tta_row(a, old_t, 6);
    tta_row(b, half, 12);
    struct compare_line *l;
    int n;
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(l[0].n_old, 6);
    cr_assert_eq(l[0].n_new, 12, "n counts every seed");
    cr_assert(l[0].missed_old == 0 && l[0].missed_new == 6, "%d, %d", l[0].missed_old, l[0].missed_new);
    cr_assert_float_eq(l[0].old_median, 1.25, 1e-12);
    cr_assert(isinf(l[0].new_median) && l[0].new_median > 0, "the middle of 12 is a miss: %g", l[0].new_median);
    cr_assert(isnan(l[0].delta_pct), "no percentage of an infinite median: %g", l[0].delta_pct);
    /* Six times below every old one, six above: U is exactly its mean. */
    cr_assert(!l[0].significant, "p = %g", l[0].p);
    cr_assert_float_eq(l[0].p, 1.0, 1e-12);
    char *out = printed(l, n);
    cr_assert(strstr(out, "no score") != NULL, "%s", out);
    cr_assert(strstr(out, "~ (p=1.000 n=6+12) old 0 of 6 missed, new 6 of 12 missed") != NULL, "%s", out);
    const size_t table = (size_t)(strstr(out, "old, new:") - out); /* the footnotes say "infinitely" */
    cr_assert(!memmem(out, table, "-58", 3) && !memmem(out, table, "nan", 3) && !memmem(out, table, "inf", 3), "%s",
              out);
    cr_assert(strstr(out, "missed: a tta seed that missed its target counts as infinitely slow") != NULL, "%s", out);
    free(out);
    free(l);

    /* Every new seed missed: it was "no finite samples", nothing compared; it is a significant slow-down,
     * said in words where there is no percentage. */
    th_path(b, sizeof b, "all_missed.jsonl");
    const double none[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    tta_row(b, none, 6);
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, 1);
    cr_assert(l[0].n_new == 6 && l[0].missed_new == 6);
    cr_assert(l[0].significant, "p = %g", l[0].p);
    cr_assert_float_eq(l[0].u, 0.0, 0, "no old time is above a miss");
    out = printed(l, n);
    cr_assert(strstr(out, "new slower (p=0.003 n=6+6) old 0 of 6 missed, new 6 of 6 missed") != NULL, "%s", out);
    cr_assert(strstr(out, "nothing to compare") == NULL, "%s", out);
    free(out);
    free(l);

    /* The other way round: the old run missed everywhere, the new one reached. */
    free(compare_captured(b, a, &l, &n));
    cr_assert(l[0].significant && l[0].missed_old == 6 && l[0].missed_new == 0);
    out = printed(l, n);
    cr_assert(strstr(out, "new faster (p=0.003 n=6+6) old 6 of 6 missed, new 0 of 6 missed") != NULL, "%s", out);
    free(out);
    free(l);
}

/* A throughput row of mnist-mlp cpu b32 whose config also holds extra ("\"classes\":10," or ""). */
static void row_cfg(const char *path, const char *extra, const double *rep, int n)
{
    char text[2048];
    int len = snprintf(text, sizeof text,
                       "{\"schema_version\":1,\"kind\":\"throughput\",\"config\":{%s\"plan\":\"throughput\","
                       "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\","
                       "\"steps\":100,"
                       "\"warmup\":10},\"figures\":{\"repeat_images_per_s\":[", extra);
    for (int i = 0; i < n; i++) len += snprintf(text + len, sizeof text - (size_t)len, "%s%.6g", i ? "," : "", rep[i]);
    snprintf(text + len, sizeof text - (size_t)len, "]}}\n");
    th_append(path, text);
}

/* Rows of another model (classes), other initial weights (load) or another tta budget (max_epochs) were
 * matched as one configuration, so a 1000-class model's rate read as a +10 % change of the 10-class one's.
 * Each is keyed as the report's variant_fields key it; rows that lack a key still match each other, and
 * --ignore classes matches them again. */
Test(harness_compare, classes_load_and_max_epochs_are_part_of_the_configuration, .init = th_setup,
     .fini = th_teardown)
{
    static const struct {
        const char *old_cfg, *new_cfg;
        int lines;
    } cases[] = {
        {"\"classes\":10,", "\"classes\":1000,", 2},
        {"\"classes\":10,", "\"classes\":10,", 1},
        {"", "", 1}, /* older rows without the field */
        {"\"load\":\"\",", "\"load\":\"w.ckpt\",", 2},
        {"\"load\":\"\",", "", 1}, /* no weights loaded either way */
        {"\"max_epochs\":15,", "\"max_epochs\":30,", 2},
    };
    double up[6];
    for (int i = 0; i < 6; i++) up[i] = BASE[i] * 1.1;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char a[192], b[192], fa[32], fb[32];
        snprintf(fa, sizeof fa, "old%zu.jsonl", k);
        snprintf(fb, sizeof fb, "new%zu.jsonl", k);
        th_path(a, sizeof a, fa);
        th_path(b, sizeof b, fb);
        row_cfg(a, cases[k].old_cfg, BASE, 6);
        row_cfg(b, cases[k].new_cfg, up, 6);
        struct compare_line *l;
        int n;
        free(compare_captured(a, b, &l, &n));
        cr_assert_eq(n, cases[k].lines, "case %zu (%s vs %s): %d lines", k, cases[k].old_cfg, cases[k].new_cfg, n);
        if (n == 2) cr_assert(l[0].n_new == 0 && l[1].n_old == 0, "case %zu: each side alone", k);
        else cr_assert(l[0].significant && l[0].n_old == 6 && l[0].n_new == 6, "case %zu", k);
        free(l);
    }
    char a[192], b[192];
    th_path(a, sizeof a, "old0.jsonl");
    th_path(b, sizeof b, "new0.jsonl");
    struct compare_line *l;
    int n;
    free(compare_captured(a, b, &l, &n));
    find(l, n, "throughput mnist-mlp cpu b32 classes=10");
    find(l, n, "throughput mnist-mlp cpu b32 classes=1000");
    free(l);
    const struct compare_opts o = {0.05, "classes"};
    cr_assert_eq(compare_results(a, b, &o, &l, &n), TB_OK, "%s", tb_error_get());
    cr_assert_eq(n, 1);
    cr_assert_str_eq(l[0].name, "throughput mnist-mlp cpu b32 [classes 10 → 1000]");
    free(l);
}

/* The note said fewer than 4 samples a side cannot reach p < 0.05, whatever --alpha: but 3+5 reach 0.036.
 * The exact test's smallest two-sided p is 2/C(n1 + n2, n1); the note is printed where that is not below
 * the alpha in use, and says it. No p is reported below it, though the normal approximation the U test
 * uses under ties (tta misses tie) would go there on few samples. */
Test(harness_compare, smallest_p_note_follows_the_exact_test, .init = th_setup, .fini = th_teardown)
{
    cr_assert_float_eq(compare_min_p(3, 5), 2.0 / 56, 1e-15);
    cr_assert_float_eq(compare_min_p(5, 3), 2.0 / 56, 1e-15);
    cr_assert_float_eq(compare_min_p(2, 2), 1.0 / 3, 1e-15);
    cr_assert_float_eq(compare_min_p(4, 4), 2.0 / 70, 1e-15);
    cr_assert_float_eq(compare_min_p(6, 6), 2.0 / 924, 1e-15);
    cr_assert_float_eq(compare_min_p(1, 1), 1.0, 0, "2/C(2, 1) = 1");
    cr_assert_float_eq(compare_min_p(0, 4), 1.0, 0);
    cr_assert(compare_min_p(200, 200) >= 0.0 && compare_min_p(200, 200) < 1e-100);

    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const double three[3] = {1000, 1010, 990}, five[5] = {1100, 1110, 1090, 1105, 1095};
    row(a, "cpu", 32, three, 3);
    row(b, "cpu", 32, five, 5);
    struct compare_line *l;
    int n;
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, 1);
    cr_assert(l[0].significant, "3+5 can: p = %g", l[0].p);
    cr_assert_float_eq(l[0].p, 2.0 / 56, 1e-12);
    char *out = printed(l, n);
    cr_assert(strstr(out, "(p=0.036 n=3+5)") != NULL, "%s", out);
    cr_assert(strstr(out, "note:") == NULL, "no note where p < 0.05 is reachable:\n%s", out);
    free(out);
    /* At --alpha 0.01 the same counts cannot: the note says so, with the alpha and the floor. */
    const struct compare_opts strict = {0.01, NULL};
    free(l);
    cr_assert_eq(compare_results(a, b, &strict, &l, &n), TB_OK);
    cr_assert(!l[0].significant);
    out = printed_opts(l, n, &strict);
    cr_assert(strstr(out, "note: 3+5 samples cannot reach p < 0.01 (smallest possible p 0.0357); use --repeat 5 "
                          "(or --seeds 5).") != NULL, "%s", out);
    free(out);
    free(l);

    /* 2+2 cannot at 0.05 (1/3); two configurations with the same counts get one note. */
    const double two[2] = {1000, 1010}, two_up[2] = {2000, 2020};
    row(a, "cpu", 64, two, 2), row(b, "cpu", 64, two_up, 2);
    row(a, "cpu", 128, two, 2), row(b, "cpu", 128, two_up, 2);
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, 3);
    cr_assert(!find(l, n, "throughput mnist-mlp cpu b64")->significant);
    out = printed(l, n);
    const char *note = "note: 2+2 samples cannot reach p < 0.05 (smallest possible p 0.333); use --repeat 4 "
                       "(or --seeds 4).";
    cr_assert(strstr(out, note) != NULL, "%s", out);
    cr_assert(strstr(strstr(out, note) + 1, note) == NULL, "once:\n%s", out);
    cr_assert(strstr(out, "note: 3+5") == NULL, "%s", out);
    free(out);
    free(l);

    /* 3 times against 4 misses: ties, so the U test approximates (p 0.032); the exact floor is 2/35. */
    th_path(a, sizeof a, "tta_old.jsonl");
    th_path(b, sizeof b, "tta_new.jsonl");
    const double t3[3] = {1.0, 1.1, 1.2}, miss4[4] = {NAN, NAN, NAN, NAN};
    tta_row(a, t3, 3);
    tta_row(b, miss4, 4);
    free(compare_captured(a, b, &l, &n));
    cr_assert_float_eq(l[0].p, 2.0 / 35, 1e-12);
    cr_assert(!l[0].significant);
    out = printed(l, n);
    cr_assert(strstr(out, "note: 3+4 samples cannot reach p < 0.05 (smallest possible p 0.0571)") != NULL, "%s", out);
    free(out);
    free(l);
}

Test(harness_compare, missing_file_is_an_error)
{
    struct compare_line *l;
    int n;
    cr_assert_eq(compare_results("/nonexistent/a.jsonl", "/nonexistent/b.jsonl", NULL, &l, &n), TB_EIO);
}

Test(harness_compare, ignore_backend_matches_rows_across_backends, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    double up[6];
    for (int i = 0; i < 6; i++) up[i] = BASE[i] * 1.5;
    row(a, "cpu", 32, BASE, 6);
    row(b, "threads", 32, up, 6);
    row(a, "cpu", 64, BASE, 6); /* b64 only in OLD: still one side only */
    struct compare_line *l;
    int n;
    cr_assert_eq(compare_results(a, b, NULL, &l, &n), TB_OK);
    cr_assert_eq(n, 3, "without --ignore, cpu and threads are different configurations");
    cr_assert_eq(find(l, n, "throughput mnist-mlp cpu b32")->n_new, 0);
    free(l);

    const struct compare_opts o = {0.05, "backend"};
    cr_assert_eq(compare_results(a, b, &o, &l, &n), TB_OK, "%s", tb_error_get());
    cr_assert_eq(n, 2);
    const struct compare_line *m = find(l, n, "throughput mnist-mlp b32 [backend cpu → threads]");
    cr_assert_eq(m->n_old, 6);
    cr_assert_eq(m->n_new, 6);
    cr_assert(m->significant);
    cr_assert_float_eq(m->delta_pct, 50.0, 1e-6);
    cr_assert_eq(find(l, n, "throughput mnist-mlp b64 [backend cpu]")->n_new, 0);
    free(l);

    const struct compare_opts bad = {0.05, "backend,seed"};
    cr_assert_eq(compare_results(a, b, &bad, &l, &n), TB_EINVAL, "the seed is never part of the match");
    cr_assert(strstr(tb_error_get(), "seed") != NULL, "%s", tb_error_get());
    tb_error_clear();
}

/* An effnet row with the convolution algorithms it ran (figures.conv_algos) and one rate. */
static void row_algos(const char *path, const char *algos, double rate)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"r\",\"config\":{\"plan\":\"throughput\","
             "\"backend\":\"cpu\",\"workload\":\"effnet-b0\",\"batch\":64,\"dataset\":\"synthetic\",\"seed\":1,"
             "\"steps\":6,\"warmup\":1},\"figures\":{\"images_per_s\":%g,\"conv_algos\":\"%s\"}}\n",
             rate, algos);
    th_append(path, text);
}

/* Rows that ran other convolution algorithms (--conv-algo auto timed apart) are flagged beside their change:
 * part of it may be the kernels'. Equal algorithms, or rows that carry none, add nothing. */
Test(harness_compare, rows_of_other_convolution_algorithms_are_flagged, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    row_algos(a, "dggi", 100), row_algos(a, "dggi", 101);
    row_algos(b, "dggg", 110), row_algos(b, "dggg", 111);
    struct compare_line *l;
    int n;
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, 1);
    cr_assert_str_eq(l[0].name, "throughput effnet-b0 cpu b64 [conv_algos differ]");
    free(l);
    row_algos(b, "dggi", 112); /* now NEW's rows differ among themselves too */
    free(compare_captured(a, b, &l, &n));
    cr_assert_str_eq(l[0].name, "throughput effnet-b0 cpu b64 [conv_algos differ]");
    free(l);
    th_path(b, sizeof b, "same.jsonl");
    row_algos(b, "dggi", 110);
    free(compare_captured(a, b, &l, &n));
    cr_assert_str_eq(l[0].name, "throughput effnet-b0 cpu b64");
    free(l);
    row_algos(b, "iggi", 111);
    free(compare_captured(a, b, &l, &n));
    cr_assert_str_eq(l[0].name, "throughput effnet-b0 cpu b64 [conv_algos differ within a side]");
    free(l);
}

Test(harness_compare, median_ci_from_order_statistics)
{
    const double x[10] = {7, 1, 9, 3, 5, 10, 2, 8, 4, 6};
    double lo, hi;
    /* n = 10: [x(2), x(9)] covers the median with 1 − 2·11/1024 = 97.9 %, [x(3), x(8)] with 89.1 %. */
    cr_assert_eq(compare_median_ci(x, 10, 0.95, &lo, &hi), TB_OK);
    cr_assert_float_eq(lo, 2.0, 0);
    cr_assert_float_eq(hi, 9.0, 0);
    cr_assert_eq(compare_median_ci(x, 10, 0.80, &lo, &hi), TB_OK);
    cr_assert(lo == 3.0 && hi == 8.0, "80 %%: [%g, %g]", lo, hi);
    /* n = 6: only [min, max] (96.9 %); n = 5: even that covers 93.8 %, no interval. */
    cr_assert_eq(compare_median_ci(x, 6, 0.95, &lo, &hi), TB_OK);
    cr_assert(lo == 1.0 && hi == 10.0, "[%g, %g]", lo, hi);
    cr_assert_eq(compare_median_ci(x, 5, 0.95, &lo, &hi), TB_OK);
    cr_assert(isinf(lo) && lo < 0 && isinf(hi) && hi > 0);
    cr_assert_eq(compare_median_ci(x, 0, 0.95, &lo, &hi), TB_EINVAL);
    tb_error_clear();
}

Test(harness_compare, spread_is_a_labelled_95_ci_of_the_median, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    const double few[3] = {1000, 1010, 990};
    row(a, "cpu", 32, BASE, 6);
    row(b, "cpu", 32, BASE, 6);
    row(a, "cpu", 64, few, 3);
    row(b, "cpu", 64, few, 3);
    struct compare_line *l;
    int n;
    cr_assert_eq(compare_results(a, b, NULL, &l, &n), TB_OK);
    const struct compare_line *c32 = find(l, n, "throughput mnist-mlp cpu b32");
    cr_assert(c32->old_lo == 990.0 && c32->old_hi == 1010.0, "[%g, %g]", c32->old_lo, c32->old_hi);
    char *out = printed(l, n);
    /* The header names the interval; median 1001, interval [990, 1010]: the wider side, 11, is 1.1 % of it
     * (the MAD jitter was 0.7 %); 3 samples bound no median at 95 %; the footnote says what ± is. */
    const char *const want[] = {"old ± 95 % CI", "new ± 95 % CI", "1001.0 ± 1.1%", "1000.0 ± ∞",
                                "95 % confidence interval of the median", "~ (p="};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        cr_assert(strstr(out, want[k]) != NULL, "no '%s' in:\n%s", want[k], out);
    free(out);
    free(l);
}

/* Runs `TB_BENCH_EXE args` in the test's directory with stdout and stderr into out; returns its exit code. */
static int bench_sh(const char *args, const char *out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > '%s' 2>&1", th_dir, TB_BENCH_EXE, args, out);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

Test(harness_compare, cli_help_and_ignore, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], p[192];
    compare_paths(a, b, p);
    cr_assert_eq(bench_sh("compare --help", p), 0, "bench compare --help exits 0");
    char *out = th_read(p);
    cr_assert(strstr(out, "usage: bench compare") && strstr(out, "--ignore"), "%s", out);
    free(out);
    cr_assert_eq(bench_sh("compare old.jsonl", p), 2, "one file");
    out = th_read(p); /* one line, not the whole usage */
    cr_assert_str_eq(out, "bench compare: needs two results files, OLD.jsonl NEW.jsonl (1 given; see bench compare --help)\n");
    free(out);
    cr_assert_eq(bench_sh("report --help", p), 0, "bench report --help exits 0");
    out = th_read(p);
    cr_assert(strstr(out, "usage: bench report") && strstr(out, "--in FILE"), "%s", out);
    free(out);

    const double up[6] = {2000, 2020, 1980, 2010, 1990, 2004};
    row(a, "cpu", 32, BASE, 6);
    row(b, "threads", 32, up, 6);
    cr_assert_eq(bench_sh("compare --ignore backend old.jsonl new.jsonl", p), 0);
    out = th_read(p);
    cr_assert(strstr(out, "throughput mnist-mlp b32 [backend cpu → threads]") != NULL, "%s", out);
    cr_assert(strstr(out, "+100.00% (p=0.002 n=6+6)") != NULL, "%s", out);
    cr_assert(strstr(out, "only in one file") == NULL, "%s", out);
    free(out);
    cr_assert_eq(bench_sh("compare --ignore nosuchkey old.jsonl new.jsonl", p), 2, "an unknown key is a usage error");
}

/* Probe environ: a results file named -old.jsonl could not be compared by that name: "--" was an unknown option, and
 * the refusal of -old.jsonl did not say how. "--" ends the options; the refusal says so where such a file exists. */
Test(harness_compare, files_after_a_double_dash_may_start_with_a_dash, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], p[192];
    th_path(a, sizeof a, "-old.jsonl");
    th_path(b, sizeof b, "-new.jsonl");
    th_path(p, sizeof p, "out.txt");
    const double up[6] = {2000, 2020, 1980, 2010, 1990, 2004};
    row(a, "cpu", 32, BASE, 6);
    row(b, "cpu", 32, up, 6);
    cr_assert_eq(bench_sh("compare -- -old.jsonl -new.jsonl", p), 0);
    char *out = th_read(p);
    cr_assert(strstr(out, "+100.00% (p=0.002 n=6+6)") != NULL, "%s", out);
    free(out);
    cr_assert_eq(bench_sh("compare -old.jsonl -new.jsonl", p), 2);
    out = th_read(p);
    cr_assert(strstr(out, "unknown option '-old.jsonl'") && strstr(out, "put -- before the files"), "%s", out);
    free(out);
    cr_assert_eq(bench_sh("compare --alhpa 0.1 x y", p), 2);
    out = th_read(p);
    cr_assert(strstr(out, "unknown option '--alhpa'") && !strstr(out, "put --"), "no such file, no hint: %s", out);
    free(out);
    cr_assert_eq(bench_sh("compare -- -old.jsonl -new.jsonl -old.jsonl", p), 2, "a third file");
}

/* Probe item 15: a file without one usable row (empty, every line malformed, every run unfinished) is an
 * error naming it, exit 1, whichever side it is on; it was "no result rows", or an empty table, exit 0. */
Test(harness_compare, file_without_usable_rows_is_an_error, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], p[192];
    compare_paths(a, b, p);
    row(a, "cpu", 32, BASE, 6);
    static const char *const bad[] = {"", "not JSON\n{\"truncated\":\n", "{\"schema_version\":1,\"kind\":\"throughput\"}\n"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        th_write(b, bad[k]);
        struct compare_line *l = NULL;
        int n = 0;
        th_stderr_begin();
        int st = compare_results(a, b, NULL, &l, &n);
        char *err = th_stderr_end();
        free(err);
        cr_assert_eq(st, TB_EFORMAT, "case %zu", k);
        cr_assert(strstr(tb_error_get(), "new.jsonl") && strstr(tb_error_get(), "no usable result rows"), "%s",
                  tb_error_get());
        tb_error_clear();
        cr_assert_eq(bench_sh("compare old.jsonl new.jsonl", p), 1, "case %zu: the new side", k);
        cr_assert_eq(bench_sh("compare new.jsonl old.jsonl", p), 1, "case %zu: the old side", k);
        char *out = th_read(p);
        cr_assert(strstr(out, "bench compare: new.jsonl: no usable result rows") != NULL, "%s", out);
        free(out);
    }
    th_write(b, "");
    th_write(a, "");
    cr_assert_eq(bench_sh("compare old.jsonl new.jsonl", p), 1, "both empty");
}

/* Probe item 15: a configuration in both files whose samples on one side are all non-finite was listed as
 * "only in" the other file; it is listed as having no finite samples there. Rates that are not positive
 * (a negative or zero images/s) are no samples either: skipped, counted in one warning line per file. */
Test(harness_compare, non_finite_and_non_positive_samples, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    row(a, "cpu", 32, BASE, 6);
    th_append(b, "{\"schema_version\":1,\"kind\":\"throughput\",\"config\":{\"plan\":\"throughput\",\"backend\":\"cpu\","
                 "\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\",\"steps\":100,\"warmup\":10},"
                 "\"figures\":{\"images_per_s\":1e400,\"repeat_images_per_s\":[1e400,-1e400]}}\n");
    const double bad[6] = {-100, 0, 1000, 1010, 990, 1005};
    row(a, "cpu", 64, BASE, 6);
    row(b, "cpu", 64, bad, 6);
    struct compare_line *l;
    int n;
    char *err = compare_captured(a, b, &l, &n);
    cr_assert(strstr(err, "new.jsonl: 4 samples that are not finite positive rates or times below 1e15 skipped") != NULL, "%s",
              err);
    cr_assert(strstr(err, "old.jsonl") == NULL, "%s", err);
    free(err);
    cr_assert_eq(n, 2);
    const struct compare_line *c32 = find(l, n, "throughput mnist-mlp cpu b32");
    cr_assert(c32->n_old == 6 && c32->n_new == 0 && c32->rows_old == 1 && c32->rows_new == 1);
    const struct compare_line *c64 = find(l, n, "throughput mnist-mlp cpu b64");
    cr_assert_eq(c64->n_new, 4, "-100 and 0 are no samples");
    cr_assert(c64->new_median > 0);
    char *out = printed(l, n);
    cr_assert(strstr(out, "only in") == NULL, "%s", out);
    cr_assert(strstr(out, "throughput mnist-mlp cpu b32  no finite samples in new.jsonl") != NULL, "%s", out);
    cr_assert(strstr(out, "-100") == NULL && strstr(out, "p=0.000") == NULL, "%s", out);
    free(out);
    free(l);
}

/* Probe item 21: --ignore with an empty key (",", "backend,,devices", a trailing comma, "") or a key given
 * twice ("backend,backend", or --ignore twice) was accepted; each is a usage error naming the problem. */
Test(harness_compare, ignore_refuses_empty_and_duplicate_keys, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], p[192];
    compare_paths(a, b, p);
    row(a, "cpu", 32, BASE, 6);
    row(b, "threads", 32, BASE, 6);
    static const struct {
        const char *args, *says;
    } bad[] = {{"--ignore ,", "empty key"}, {"--ignore backend,,devices", "empty key"}, {"--ignore backend,", "empty key"},
               {"--ignore ''", "empty key"}, {"--ignore backend,backend", "backend is given twice"},
               {"--ignore backend --ignore devices,backend", "backend is given twice"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char args[256];
        snprintf(args, sizeof args, "compare %s old.jsonl new.jsonl", bad[k].args);
        cr_assert_eq(bench_sh(args, p), 2, "%s", args);
        char *out = th_read(p);
        cr_assert(strstr(out, bad[k].says) != NULL && strchr(out, '\n') == strrchr(out, '\n'), "%s: %s", args, out);
        cr_assert(!strncmp(out, "bench compare: --ignore ", 24), "one prefix, bench's: %s", out);
        free(out);
    }
    struct compare_line *l;
    int n;
    const struct compare_opts o = {0.05, "backend,,devices"};
    cr_assert_eq(compare_results(a, b, &o, &l, &n), TB_EINVAL);
    tb_error_clear();
    cr_assert_eq(bench_sh("compare --ignore backend,devices old.jsonl new.jsonl", p), 0, "distinct keys still work");
}

/* ---- A probe of compare at scale and on rows edited by hand. */


/* A throughput row with extra config fields (a JSON fragment after the batch) and the given repeat rates. */
static void row_text(FILE *f, const char *batch, const char *extra, const char *rates)
{
    fprintf(f,
            "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"r\",\"config\":{\"plan\":\"throughput\",\"backend\":"
            "\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":%s,\"dataset\":\"mnist\",\"steps\":100,\"warmup\":10%s},"
            "\"figures\":{\"repeat_images_per_s\":[%s]}}\n",
            batch, extra, rates);
}

/* Rows that differ only in lr are each a configuration: 3,000 a side took 35 to 45 s in the optimised build
 * (a linear search for each row's configuration, then every pair of names compared word by word), minutes
 * under ASan. They take well under a second now (3 s under ASan at 10,000 a side); the timeout leaves a loaded
 * machine tens of times that. */
Test(harness_compare, thousands_of_configurations, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    enum { N = 3000 };
    for (int side = 0; side < 2; side++) {
        FILE *f = fopen(side ? b : a, "w");
        cr_assert_not_null(f);
        for (int i = 0; i < N; i++)
            fprintf(f,
                    "{\"schema_version\":1,\"kind\":\"throughput\",\"run_id\":\"r\",\"config\":{%s,\"lr\":%g},"
                    "\"figures\":{\"repeat_images_per_s\":[%s]}}\n",
                    th_real_config, 0.001 * (i + 1), side ? "1100,1110,1090" : "1000,1010,990");
        cr_assert_eq(fclose(f), 0);
    }
    struct compare_line *l;
    int n;
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, N);
    const struct compare_line *first = find(l, n, "throughput mnist-mlp cpu b32 lr=0.001");
    cr_assert(first->n_old == 3 && first->n_new == 3 && first->old_median == 1000 && first->new_median == 1100);
    cr_assert_str_eq(l[N - 1].name, "throughput mnist-mlp cpu b32 lr=3");
    free(l);
}

/* A batch of 1e30 (a row edited by hand) was cast to int, undefined, and printed as b-2147483648: it is
 * compare's empty mark. A rate of 1e308 is no measurement either (its median printed 300 digits): skipped
 * and counted with the non-positive ones. */
Test(harness_compare, batch_no_int_holds_and_rates_no_run_reaches, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    row_text(f, "1e30", "", "1000,1010");
    row_text(f, "32", "", "1000,1010");
    cr_assert_eq(fclose(f), 0);
    f = fopen(b, "w");
    cr_assert_not_null(f);
    row_text(f, "1e30", "", "1000,1010");
    row_text(f, "32", "", "1e308,1010,1020");
    cr_assert_eq(fclose(f), 0);
    struct compare_line *l;
    int n;
    char *err = compare_captured(a, b, &l, &n);
    cr_assert(strstr(err, "new.jsonl: 1 sample that is not") != NULL, "%s", err);
    free(err);
    cr_assert_eq(n, 2);
    cr_assert_eq(find(l, n, "throughput mnist-mlp cpu b-")->n_new, 2);
    const struct compare_line *c32 = find(l, n, "throughput mnist-mlp cpu b32");
    cr_assert(c32->n_new == 2 && c32->new_median == 1015, "1e308 is no sample");
    char *out = printed(l, n);
    cr_assert(strstr(out, "2147483648") == NULL && strstr(out, "0000000000") == NULL, "%s", out);
    free(out);
    free(l);
}

/* Two runs on other data under one dataset name were one configuration. config.data_crc32 is part of it;
 * a name shows the CRC only where nothing else tells two configurations apart. A row without the CRC (from
 * before rows carried it) matches only rows without it, which compare says, naming --ignore data_crc32. */
Test(harness_compare, data_crc_is_part_of_the_configuration, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    row_text(f, "32", ",\"lr\":0.1,\"data_crc32\":\"aaaaaaaa\"", "1000,1010");
    row_text(f, "32", ",\"lr\":0.2,\"data_crc32\":\"aaaaaaaa\"", "1000,1010");
    cr_assert_eq(fclose(f), 0);
    f = fopen(b, "w");
    cr_assert_not_null(f);
    row_text(f, "32", ",\"lr\":0.1,\"data_crc32\":\"aaaaaaaa\"", "1000,1010");
    row_text(f, "32", ",\"lr\":0.1,\"data_crc32\":\"bbbbbbbb\"", "500,510");
    row_text(f, "32", ",\"lr\":0.2,\"data_crc32\":\"aaaaaaaa\"", "1000,1010");
    cr_assert_eq(fclose(f), 0);
    struct compare_line *l;
    int n;
    char *err = compare_captured(a, b, &l, &n);
    cr_assert(strstr(err, "data_crc32") == NULL, "every row carries the CRC: no note\n%s", err);
    free(err);
    cr_assert_eq(n, 3);
    const struct compare_line *same = find(l, n, "throughput mnist-mlp cpu b32 lr=0.1 data_crc32=aaaaaaaa");
    cr_assert(same->n_old == 2 && same->n_new == 2 && same->new_median == 1005, "the other data's rates are not pooled");
    const struct compare_line *other = find(l, n, "throughput mnist-mlp cpu b32 lr=0.1 data_crc32=bbbbbbbb");
    cr_assert(other->rows_old == 0 && other->rows_new == 1);
    find(l, n, "throughput mnist-mlp cpu b32 lr=0.2"); /* lr tells it apart: no CRC */
    free(l);
    /* Old rows without the CRC: their own configurations, said on stderr; --ignore data_crc32 matches them. */
    f = fopen(a, "w");
    cr_assert_not_null(f);
    row_text(f, "32", ",\"lr\":0.1", "1000,1010");
    cr_assert_eq(fclose(f), 0);
    err = compare_captured(a, b, &l, &n);
    cr_assert(strstr(err, "old.jsonl has rows without config.data_crc32") && strstr(err, "--ignore data_crc32"), "%s", err);
    free(err);
    cr_assert_eq(find(l, n, "throughput mnist-mlp cpu b32 lr=0.1")->rows_new, 0);
    free(l);
    const struct compare_opts o = {0.05, "data_crc32"};
    th_stderr_begin();
    const int st = compare_results(a, b, &o, &l, &n);
    err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(strstr(err, "data_crc32") == NULL, "%s", err);
    free(err);
    const struct compare_line *pooled = find(l, n, "throughput mnist-mlp cpu b32 lr=0.1 [data_crc32 ? → *]");
    cr_assert(pooled->n_old == 2 && pooled->n_new == 4, "both data's rows pooled, as asked");
    free(l);
}

/* A throughput row sized by --time-budget: the steps and warm-up the budget chose, the budget, one rate. */
static void row_budget(const char *path, int steps, int warmup, double budget, double ips)
{
    char text[1024], fig[64] = "";
    if (budget > 0) snprintf(fig, sizeof fig, "\"time_budget_s\":%g,", budget);
    snprintf(text, sizeof text,
             "{\"schema_version\":1,\"kind\":\"throughput\",\"status\":\"ok\",\"config\":{\"plan\":\"throughput\","
             "\"backend\":\"cpu\",\"workload\":\"mnist-mlp\",\"batch\":8,\"dataset\":\"synthetic\",\"steps\":%d,"
             "\"warmup\":%d},\"figures\":{%s\"images_per_s\":%g}}\n",
             steps, warmup, fig, ips);
    th_append(path, text);
}

/* Probe C 4: one --time-budget command ran 7/28, 8/32, 8/32 and 8/33 warm-up/timed steps (the budget chose
 * them at the speed of the moment), and compare matched one pair of four rows, listing the others as on one
 * side only. Budgeted rows are keyed by the budget; another budget, or explicit --steps, is another
 * configuration. */
Test(harness_compare, a_time_budget_run_is_keyed_by_its_budget, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192];
    th_path(a, sizeof a, "old.jsonl");
    th_path(b, sizeof b, "new.jsonl");
    row_budget(a, 28, 7, 0.3, 1000), row_budget(a, 32, 8, 0.3, 1010);
    row_budget(b, 32, 8, 0.3, 1005), row_budget(b, 33, 8, 0.3, 995);
    row_budget(a, 30, 8, 1.0, 900), row_budget(b, 30, 8, 1.0, 910); /* another budget */
    row_budget(a, 32, 8, 0, 800), row_budget(b, 32, 8, 0, 810);     /* --steps 32 --warmup 8 given */
    struct compare_line *l;
    int n;
    free(compare_captured(a, b, &l, &n));
    cr_assert_eq(n, 3, "one configuration a budget, and the explicit steps: %d lines", n);
    int budget_pairs = 0;
    for (int i = 0; i < n; i++) {
        cr_assert(l[i].n_old > 0 && l[i].n_new > 0, "'%s' is on one side only", l[i].name);
        budget_pairs += l[i].n_old == 2 && l[i].n_new == 2;
    }
    cr_assert_eq(budget_pairs, 1, "the four rows of the 0.3 s budget are one configuration");
    free(l);
}

/* A throughput row of mnist-mlp b32 on backend with config extra (ending in ",") and machine members. */
static void row_be(const char *path, const char *backend, const char *extra, const char *machine, const double *rep)
{
    char text[2048];
    int len = snprintf(text, sizeof text,
                       "{\"schema_version\":1,\"kind\":\"throughput\",\"machine\":{%s},\"config\":{%s\"plan\":\"throughput\","
                       "\"backend\":\"%s\",\"workload\":\"mnist-mlp\",\"batch\":32,\"dataset\":\"synthetic\",\"steps\":100,"
                       "\"warmup\":10},\"figures\":{\"repeat_images_per_s\":[", machine, extra, backend);
    for (int i = 0; i < 6; i++) len += snprintf(text + len, sizeof text - (size_t)len, "%s%.6g", i ? "," : "", rep[i]);
    snprintf(text + len, sizeof text - (size_t)len, "]}}\n");
    th_append(path, text);
}

/* Rows record an option not given as 0 or "", so a run of the default and one with the same value typed out
 * (--threads 2 on a 2-core machine, the ipu's --schedule 1f1b or --prefetch 3) were two configurations, each
 * "only in one file". Compare (and the report) read such a row as the run was: one configuration. */
Test(harness_compare, a_default_and_its_value_typed_out_are_one_configuration, .init = th_setup, .fini = th_teardown)
{
    static const struct {
        const char *backend, *old_cfg, *old_machine, *new_cfg, *new_machine;
        int lines;
    } cases[] = {
        {"threads", "\"threads\":0,", "\"n_cores\":2,\"usable_cores\":2", "\"threads\":2,", "\"n_cores\":2", 1},
        {"threads", "\"threads\":0,", "\"n_cores\":2", "\"threads\":2,", "\"n_cores\":2", 1}, /* before usable_cores */
        {"threads", "\"threads\":0,", "\"n_cores\":2,\"usable_cores\":1", "\"threads\":0,", "\"n_cores\":2", 2}, /* taskset */
        {"cpu", "\"threads\":0,", "\"n_cores\":2", "\"threads\":0,", "\"n_cores\":4", 1}, /* cpu takes no --threads */
        {"ipu", "\"schedule\":\"\",", "", "\"schedule\":\"1f1b\",", "", 1},
        {"ipu", "\"schedule\":\"\",", "", "\"schedule\":\"gpipe\",", "", 2},
        {"ipu", "\"prefetch\":0,", "", "\"prefetch\":3,", "", 1},
        {"ipu", "\"prefetch\":0,", "", "\"prefetch\":-1,", "", 2}, /* --prefetch 0: none */
        {"mirrored", "\"prefetch\":0,", "", "\"prefetch\":1,", "", 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char a[192], b[192], fa[32], fb[32];
        snprintf(fa, sizeof fa, "old%zu.jsonl", k);
        snprintf(fb, sizeof fb, "new%zu.jsonl", k);
        row_be(th_path(a, sizeof a, fa), cases[k].backend, cases[k].old_cfg, cases[k].old_machine, BASE);
        row_be(th_path(b, sizeof b, fb), cases[k].backend, cases[k].new_cfg, cases[k].new_machine, BASE);
        struct compare_line *l;
        int n;
        char *err = compare_captured(a, b, &l, &n);
        cr_assert_eq(n, cases[k].lines, "case %zu (%s: %s vs %s): %d lines", k, cases[k].backend, cases[k].old_cfg,
                     cases[k].new_cfg, n);
        /* the default on other cores: not matched, and said how to match them */
        if (k == 2) cr_assert(strstr(err, "ran on 1 core in") && strstr(err, "--ignore threads"), "%s", err);
        else cr_assert(!strstr(err, "--ignore threads"), "case %zu: %s", k, err);
        free(err), free(l);
    }
}

/* The README's "the same across backends", cpu.jsonl against threads.jsonl with --ignore backend: the threads rows
 * record --threads and the cpu's do not, so nothing matched, and the table came out empty without a word. Said, with
 * the --ignore that matches them; --ignore backend,threads matches them, and cpu against mirrored needs no hint. */
Test(harness_compare, ignore_backend_says_threads_rows_need_ignore_threads, .init = th_setup, .fini = th_teardown)
{
    char a[192], b[192], c[192], d[192];
    row_be(th_path(a, sizeof a, "cpu.jsonl"), "cpu", "\"threads\":0,", "\"n_cores\":2", BASE);
    /* threads rows of another lr: --ignore backend,threads would not match them either, so no hint */
    row_be(th_path(d, sizeof d, "threads-lr.jsonl"), "threads", "\"threads\":0,\"lr\":0.5,", "\"n_cores\":2", BASE);
    row_be(th_path(b, sizeof b, "threads.jsonl"), "threads", "\"threads\":0,", "\"n_cores\":2", BASE);
    row_be(th_path(c, sizeof c, "mirrored.jsonl"), "mirrored", "\"threads\":0,", "\"n_cores\":2", BASE);
    static const struct {
        const char *ignore, *other;
        int lines, hint;
    } cases[] = {{"backend", "threads", 2, 1}, {"backend,threads", "threads", 1, 0}, {"backend", "mirrored", 1, 0},
                 {"backend", "threads-lr", 2, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const struct compare_opts o = {.ignore = cases[k].ignore};
        struct compare_line *l;
        int n;
        th_stderr_begin();
        const char *other = !strcmp(cases[k].other, "threads") ? b : !strcmp(cases[k].other, "mirrored") ? c : d;
        const int st = compare_results(a, other, &o, &l, &n);
        char *err = th_stderr_end();
        cr_assert_eq(st, TB_OK, "%s", tb_error_get());
        cr_assert_eq(n, cases[k].lines, "case %zu: %d lines", k, n);
        cr_assert_eq(strstr(err, "--ignore backend,threads matches them") != NULL, cases[k].hint, "case %zu: %s", k, err);
        free(err), free(l);
    }
}
