/* report_seeds.c — the report's "Seeds" section and its seed-002 subsection (see report_seeds.h).
 *
 * Seed 002 is a Keras MNIST MLP timed per TensorFlow strategy (issue 30). Its published figures are read
 * from plots/seed-002.published.tsv (one line per system, cited there); the measured ones are the kept,
 * finished train rows that suites/seed-002.suite wrote (top-level "suite" ending in seed-002.suite).
 * Each table row and chart bar is labelled "published (source)" or "measured here"; measured rows name
 * their machine (CPU model and cores from the row) and data set, since the seed trained on MNIST and
 * `make seeds` trains on Fashion-MNIST unless given MNIST. Time is fit()'s: figures.train_time_s, the
 * clock around all epochs' steps, without the evaluation after them.
 */
#define _GNU_SOURCE
#include "report_seeds.h"

#include "regular_file.h"
#include "report_rows.h"
#include "report_seed001.h"
#include "status.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED002_SUITE "seed-002.suite"
#define SEED002_PUBLISHED "seed-002.published.tsv"
#define MAX_PUBLISHED 32
#define MAX_MEASURED 256

struct published {
    char system[128], strategy[96], devices[16], epochs[16], counterpart[32], source[256];
    double time_s, acc_pct; /* NAN: not given ("-") */
};

static double num_or_nan(const char *s)
{
    char *end;
    const double v = strtod(s, &end);
    return end == s ? NAN : v;
}

/* Reads the published figures: tab-separated lines, '#' comments. Returns the count, or -1 with *why if
 * the file cannot be opened; a line with fewer than 8 fields is skipped with a warning. */
static int published_read(const char *path, struct published *p, int max, const char **why)
{
    /* Not fopen: a FIFO without a writer would block the report forever, a device never end. */
    FILE *f = regular_fopen(path, why);
    if (!f) return -1;
    char line[2048];
    int n = 0, line_no = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        line_no++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *field[8], *save = NULL, *t = strtok_r(line, "\t", &save);
        int k = 0;
        for (; t && k < 8; t = strtok_r(NULL, "\t", &save)) field[k++] = t;
        if (k < 8) {
            fprintf(stderr, "bench report: warning: %s:%d: expected 8 tab-separated fields, got %d; skipped\n", path,
                    line_no, k);
            continue;
        }
        struct published *q = &p[n++];
        snprintf(q->system, sizeof q->system, "%s", field[0]);
        snprintf(q->strategy, sizeof q->strategy, "%s", field[1]);
        snprintf(q->devices, sizeof q->devices, "%s", field[2]);
        snprintf(q->epochs, sizeof q->epochs, "%s", field[3]);
        q->time_s = num_or_nan(field[4]);
        q->acc_pct = num_or_nan(field[5]);
        snprintf(q->counterpart, sizeof q->counterpart, "%s", field[6]);
        snprintf(q->source, sizeof q->source, "%s", field[7]);
    }
    fclose(f);
    return n;
}

const char *report_cell(char *buf, size_t n, double v, const char *fmt)
{
    /* 1e308 in %.0f is a number 309 digits long: no figure reaches REPORT_FIGURE_MAX. */
    if (isfinite(v) && fabs(v) < REPORT_FIGURE_MAX) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "–");
    return buf;
}

static const char *cfg_str(const struct json_value *r, const char *field)
{
    char path[96];
    snprintf(path, sizeof path, "config.%s", field);
    return json_get_str(r, path, "");
}

static double cfg_num(const struct json_value *r, const char *field)
{
    char path[96];
    snprintf(path, sizeof path, "config.%s", field);
    return json_get_number(r, path, NAN);
}

/* A kept, finished training row of suites/seed-002.suite (any directory: make seeds may run a copy). */
static int is_seed002(const struct json_value *r)
{
    const char *suite = json_get_str(r, "suite", "");
    const char *base = strrchr(suite, '/');
    base = base ? base + 1 : suite;
    return !strcmp(base, SEED002_SUITE) && !strcmp(json_get_str(r, "kind", ""), "train") &&
           !strcmp(json_get_str(r, "status", "ok"), "ok");
}

/* Devices a measured row ran on: mirrored's --devices, ipu's stages × replicas, else 1. */
static int row_devices(const struct json_value *r)
{
    const char *b = cfg_str(r, "backend");
    const double stages = cfg_num(r, "stages"), replicas = cfg_num(r, "replicas_total"), dev = cfg_num(r, "devices");
    /* Through report_int: a count no int holds (1e30) is 0, "–" in the table, never an undefined cast. */
    if (!strcmp(b, "ipu")) return report_int((stages > 0 ? stages : 1) * (replicas > 0 ? replicas : 1), 0, INT_MAX, 0);
    if (!strcmp(b, "mirrored")) return report_int(replicas > 0 ? replicas : dev > 0 ? dev : 1, 0, INT_MAX, 0);
    return 1;
}

/* row_devices as a cell: "–" for 0, a count no int holds. */
struct devices_text {
    char s[16];
};
static struct devices_text devices_cell(const struct json_value *r)
{
    struct devices_text t;
    const int d = row_devices(r);
    if (d > 0) snprintf(t.s, sizeof t.s, "%d", d);
    else snprintf(t.s, sizeof t.s, "–");
    return t;
}

/* "cpu", "mirrored, 2 devices", "ipu, 2 stages, micro-batch 1 × GA 2". */
static void row_how(const struct json_value *r, char *buf, size_t n)
{
    const char *b = cfg_str(r, "backend");
    char c[3][32];
    if (!strcmp(b, "ipu"))
        snprintf(buf, n, "ipu, %s stages, micro-batch %s x GA %s (%s)", report_cell(c[0], sizeof c[0], cfg_num(r, "stages"), "%g"),
                 report_cell(c[1], sizeof c[1], cfg_num(r, "local_batch"), "%g"),
                 report_cell(c[2], sizeof c[2], cfg_num(r, "accumulation"), "%g"),
                 cfg_str(r, "schedule")[0] ? cfg_str(r, "schedule") : "1f1b");
    else if (!strcmp(b, "mirrored"))
        snprintf(buf, n, "mirrored, %s devices", devices_cell(r).s);
    else if (!strcmp(b, "threads") && cfg_num(r, "threads") > 0)
        snprintf(buf, n, "threads (%s)", report_cell(c[0], sizeof c[0], cfg_num(r, "threads"), "%g"));
    else
        snprintf(buf, n, "%s", b);
}

static void row_machine(const struct json_value *r, char *buf, size_t n)
{
    char cores[32];
    snprintf(buf, n, "%s, %s cores", json_get_str(r, "machine.cpu_model", "unknown CPU"),
             report_cell(cores, sizeof cores, json_get_number(r, "machine.n_cores", 0), "%g"));
}

static void seed002(const struct report_seeds_in *in)
{
    fprintf(in->md, "### Seed 002 — Keras MNIST MLP\n\n");
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", in->plots_dir, SEED002_PUBLISHED);
    struct published pub[MAX_PUBLISHED];
    const char *why = "";
    const int n_pub = published_read(path, pub, MAX_PUBLISHED, &why);
    if (n_pub < 0) fprintf(stderr, "bench report: warning: cannot read the published seed figures %s: %s\n", path, why);
    int idx[MAX_MEASURED], n = 0;
    for (int i = 0; i < in->n_rows && n < MAX_MEASURED; i++)
        if (in->keep[i] && is_seed002(in->rows[i])) idx[n++] = i;

    fprintf(in->md, "784-128-256-128-10 MLP, Adam (lr 0.001), batch 1 per replica, `steps_per_epoch` 2000 "
                    "(`suites/seed-002.suite`, run by `make seeds`). **Time is fit()'s**: the training of all "
                    "epochs, without the test-set evaluation after it (published: Keras's fit(); measured: "
                    "`figures.train_time_s`). Published figures: `plots/%s`, labelled *published (source)*; "
                    "ours are labelled *measured here* with the machine of their row.\n\n", SEED002_PUBLISHED);
    if (n_pub < 0) fprintf(in->md, "_(published figures not found: %s: %s)_\n\n", path, why);
    if (n == 0) fprintf(in->md, "No measured seed-002 rows in these results: run `make seeds`.\n\n");

    /* The chart: one horizontal bar per system, published and measured in their own colours. */
    char dat[1300], name[] = "seeds_002", sub[600] = "", machine[300] = "", data[64] = "";
    snprintf(dat, sizeof dat, "%s/%s.dat", in->data_dir, name);
    FILE *f = n ? report_open_data(in->report, dat) : NULL;
    int bars = 0;
    if (f) {
        fprintf(f, "# label\tseconds (fit: training of all epochs)\tkind (1 published, 2 measured here)\n");
        for (int k = 0; k < n_pub; k++)
            if (!isnan(pub[k].time_s)) {
                fprintf(f, "published: %s, %s\t%.6g\t1\n", pub[k].system, pub[k].strategy, pub[k].time_s);
                bars++;
            }
        for (int j = 0; j < n; j++) {
            const struct json_value *r = in->rows[idx[j]];
            char how[200];
            row_how(r, how, sizeof how);
            row_machine(r, machine, sizeof machine);
            snprintf(data, sizeof data, "%s", cfg_str(r, "dataset"));
            /* A row without a finite time has no bar (its table row says "–"). */
            const double t = report_figure("train_time_s", json_get_number(r, "figures.train_time_s", NAN));
            if (!isfinite(t)) continue;
            char ep[32];
            fprintf(f, "measured here: %s, %s epochs\t%.6g\t2\n", how, report_cell(ep, sizeof ep, cfg_num(r, "epochs"), "%g"), t);
            bars++;
        }
        report_close_data(in->report, f, dat);
    }
    snprintf(sub, sizeof sub, "measured here: %s%s%s", n ? machine : "no rows yet (make seeds)", n ? ", data " : "",
             n ? data : "");
    /* The key names the source: src='...' (a gnuplot single-quoted string: '' for a quote). */
    char vars[700] = "src='", *v = vars + strlen(vars);
    for (const char *c = n_pub > 0 ? pub[0].source : "-"; *c && v < vars + sizeof vars - 4; c++) {
        if (*c == '\'') *v++ = '\'';
        *v++ = *c;
    }
    snprintf(v, (size_t)(vars + sizeof vars - v), "'");
    /* No chart of the published figures alone: it would say nothing about this machine. */
    const int rendered = f && n && bars ? report_render_chart(in->report, "seeds.gp", name, dat,
                                                         "Seed 002: Keras MNIST MLP, fit() seconds per system", sub, vars)
                                   : 0;
    if (n) report_md_chart(in->report, name, "Seed 002: fit() seconds per system, published and measured here", rendered);

    fprintf(in->md, "| figure | system | strategy / backend | devices | batch per replica | global batch | epochs | "
                    "steps per epoch | data | fit time s | accuracy |\n"
                    "|---|---|---|---:|---:|---:|---:|---:|---|---:|---|\n");
    for (int k = 0; k < n_pub; k++) {
        char t[32], a[48];
        if (isnan(pub[k].time_s)) snprintf(t, sizeof t, "–");
        else snprintf(t, sizeof t, "%.2f", pub[k].time_s);
        if (isnan(pub[k].acc_pct)) snprintf(a, sizeof a, "–");
        else snprintf(a, sizeof a, "%.2f %% (validation)", pub[k].acc_pct);
        fprintf(in->md, "| published (%s) | %s | %s | %s | 1 | – | %s | 2000 | MNIST | **%s** | %s |\n", pub[k].source,
                pub[k].system, pub[k].strategy, pub[k].devices, strcmp(pub[k].epochs, "-") ? pub[k].epochs : "–", t,
                a);
    }
    for (int j = 0; j < n; j++) {
        const struct json_value *r = in->rows[idx[j]];
        char how[200], m[300];
        row_how(r, how, sizeof how);
        row_machine(r, m, sizeof m);
        char c[7][32];
        fprintf(in->md, "| measured here | %s | %s | %s | %s | %s | %s | %s | %s | **%s** | %s (test, %s images) |\n", m,
                how, devices_cell(r).s, report_cell(c[0], sizeof c[0], cfg_num(r, "local_batch"), "%g"),
                report_cell(c[1], sizeof c[1], cfg_num(r, "batch"), "%g"), report_cell(c[2], sizeof c[2], cfg_num(r, "epochs"), "%g"),
                report_cell(c[3], sizeof c[3], cfg_num(r, "steps_per_epoch"), "%g"), cfg_str(r, "dataset"),
                report_cell(c[4], sizeof c[4], report_figure("train_time_s", json_get_number(r, "figures.train_time_s", NAN)), "%.2f"),
                report_cell(c[5], sizeof c[5],
                            100.0 * report_figure("test_accuracy", json_get_number(r, "figures.test_accuracy", NAN)), "%.2f %%"),
                report_cell(c[6], sizeof c[6], cfg_num(r, "eval_samples"), "%g"));
    }
    fprintf(in->md, "\nHow the set-ups map (the suite's comments give the reasons): a MirroredStrategy replica takes "
                    "batch 1, so the global batch is the replica count and a step is one global batch "
                    "(`--batch-per-replica 1`); the IPU run is two pipeline stages of micro-batch 1 with gradient "
                    "accumulation 2, the least a pipeline allows, and its 2000 Keras steps (micro-batches) per epoch "
                    "are 1000 weight updates of 2 samples. The published accuracies are on MNIST (validation); "
                    "ours on the data set named in the row (Fashion-MNIST, a harder set, unless `make seeds "
                    "SEED_DATA=DIR` named an MNIST folder), over the whole test set. The V100 figure is of 10 "
                    "epochs and the TPU's epochs are not given; ours are the rows' own.\n\n");
}

void report_seeds(const struct report_seeds_in *in)
{
    fprintf(in->md, "## Seeds\n\nIssue 30's seed figures, published, beside what this suite measures of them.\n\n");
    /* Seed 001: its own file (harness/report_seed001.c); a failure is said in the Markdown by it, and a chart table it
     * could not write makes the report incomplete, as the other sections' do. */
    char unwritten[1300] = "";
    if (report_seed001_rows(in->md, in->charts_dir, in->plots_dir, in->devices_dir, in->rows, in->n_rows, in->rows_path,
                            in->gnuplot, in->n_charts, unwritten, sizeof unwritten) != TB_OK)
        tb_error_clear();
    if (unwritten[0]) report_mark_unwritten(in->report, unwritten);
    seed002(in);
}
