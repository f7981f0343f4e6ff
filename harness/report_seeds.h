/* report_seeds.h — the report's "Seeds" section: issue 30's seeds, published figures beside ours.
 *
 * report.c calls report_seeds() once, with the rows it kept; report_seeds prints "## Seeds", then each
 * seed's subsection: report_seed001() (harness/report_seed001.c, its own file so that seed 001's author
 * edits nothing else) and seed 002's, the Keras MNIST MLP (harness/report_seeds.c): a table and a chart
 * (plots/seeds.gp) of the published figures (plots/seed-002.published.tsv, labelled "published
 * (source)") beside the rows `make seeds` measured (suites/seed-002.suite, labelled "measured here"
 * with the row's CPU model and cores). Figures come from those files and rows only.
 * Threading: none; the caller owns every pointer.
 */
#ifndef TB_REPORT_SEEDS_H
#define TB_REPORT_SEEDS_H

#include "json.h"

#include <stdio.h>

struct report_seeds_in {
    FILE *md;                               /* REPORT.md, open for writing */
    const struct json_value *const *rows;   /* every row read (n_rows) */
    const int *keep;                        /* (n_rows) 1: the latest row of its configuration */
    int n_rows;
    const char *plots_dir;                  /* gnuplot scripts and the published figures */
    const char *data_dir;                   /* <out>/charts/data: chart tables go here */
    void *report;                           /* report.c's context, for report_render_chart */
    const char *charts_dir;                 /* <out>/charts: seed 001's charts go here */
    const char *rows_path;                  /* the rows file rows were read from (named by seed 001's validation) */
    const char *devices_dir;                /* device specs and seed001.published (devices/) */
    const char *gnuplot;                    /* NULL = "gnuplot" on PATH */
    int *n_charts;                          /* the report's count of charts drawn: seed 001's add theirs */
};

/* Renders plots/<script> on data into charts/<name>.png and .svg (report.c's renderer; extra_vars:
 * more gnuplot assignments, "name='value'; ...", or NULL): 1 if both were written, 0 if not (no gnuplot, or it failed; the report says so through report_md_chart). */
int report_render_chart(void *report, const char *script, const char *name, const char *data, const char *title,
                        const char *sub, const char *extra_vars);
/* A chart's data table opened for writing ("w"), or NULL; a failure makes the report incomplete, said and exit 1. */
FILE *report_open_data(void *report, const char *path);
/* Records a chart table that could not be written ("path: why"), unless one is already: the report is incomplete. */
void report_mark_unwritten(void *report, const char *what);
/* A chart's table opened for writing ("w"), or NULL with "PATH: why" into unwritten (un bytes) unless it holds a
 * reason already: the report is then incomplete. */
FILE *report_data_open(const char *path, char *unwritten, size_t un);
/* Closes a chart's table f: TB_OK, or TB_EIO where a write failed (a full disk), with "PATH: why" into unwritten (un
 * bytes) unless it holds a reason already: the report is then incomplete. */
int report_data_close(FILE *f, const char *path, char *unwritten, size_t un);
/* Closes what report_open_data opened; a failed write makes the report incomplete, as a failed open. */
void report_close_data(void *report, FILE *f, const char *path);
/* A string as a gnuplot single-quoted literal body ('' for a quote), cut to fit n bytes. */
void report_gp_quote(char *dst, size_t n, const char *s);
/* v in fmt into buf, or the report's empty-cell mark "–" where the row lacks it or it is not finite (printf would
 * show nan or inf); returns buf. */
const char *report_cell(char *buf, size_t n, double v, const char *fmt);
/* The chart's Markdown: the image and its links, or why it is missing. */
void report_md_chart(void *report, const char *name, const char *alt, int rendered);

/* "## Seeds" and every seed's subsection. */
void report_seeds(const struct report_seeds_in *in);

#endif
