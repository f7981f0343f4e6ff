/* export.c — result rows as one flat CSV table (see export.h). */
#define _GNU_SOURCE
#include "export.h"

#include "json.h"
#include "results.h"
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct table {
    char **cols;      /* column names (dotted paths), in order of first appearance */
    int n, cap;
    int hint;         /* where the next lookup starts: rows mostly repeat the previous row's order */
    int n_rows;
    const struct json_value **cells; /* pass 2: the current row's value per column (NULL: empty) */
    FILE *out;
};

/* Index of column name, or -1; starts at the hint and wraps around. */
static int col_find(struct table *t, const char *name)
{
    for (int k = 0; k < t->n; k++) {
        const int i = (t->hint + k) % t->n;
        if (!strcmp(t->cols[i], name)) {
            t->hint = (i + 1) % t->n;
            return i;
        }
    }
    return -1;
}

static int col_add(struct table *t, const char *name)
{
    if (col_find(t, name) >= 0) return TB_OK;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char **p = realloc(t->cols, (size_t)cap * sizeof *p);
        if (!p) return tb_error_set(TB_ENOMEM, "export: out of memory for %d columns", cap);
        t->cols = p, t->cap = cap;
    }
    if (!(t->cols[t->n] = strdup(name))) return tb_error_set(TB_ENOMEM, "export: out of memory");
    t->n++;
    return TB_OK;
}

/* Visits every leaf of object v under prefix: pass 1 (t->cells NULL) adds its column, pass 2 notes
 * its value in the row's cells. */
static int walk(struct table *t, const struct json_value *v, const char *prefix)
{
    for (int i = 0; i < v->n; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "." : "", v->keys[i]) < 0)
            return tb_error_set(TB_ENOMEM, "export: out of memory");
        const struct json_value *x = &v->items[i];
        int st = TB_OK;
        if (x->type == JSON_OBJECT) st = walk(t, x, path);
        else if (!t->cells) st = col_add(t, path);
        else {
            const int k = col_find(t, path);
            if (k >= 0) t->cells[k] = x;
        }
        free(path);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

static int on_row_columns(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    return walk(ctx, row, "");
}

static int on_row_write(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct table *t = ctx;
    memset(t->cells, 0, (size_t)t->n * sizeof *t->cells);
    int st = walk(t, row, "");
    for (int k = 0; k < t->n && st == TB_OK; k++) {
        if (k) fputc(',', t->out);
        results_csv_value(t->out, t->cells[k]);
    }
    fputs("\r\n", t->out);
    t->n_rows++;
    return st;
}

int export_csv(const char *const *inputs, int n_inputs, const char *csv_path, int *n_rows, int *n_cols)
{
    struct table t = {0};
    char *tmp_path = NULL;
    int st = TB_OK;
    const int to_stdout = !strcmp(csv_path, "-");
    struct stat sb;
    /* The table is renamed into place: renaming over /dev/null or a FIFO would replace the node with a
     * regular file (outputs.c guards --save the same way). */
    if (!to_stdout && stat(csv_path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return tb_error_set(TB_EIO, "%s: %s", csv_path,
                            S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file (--csv - writes to stdout)");
    /* The same file as an input, however named (another path, a link): the table would replace the rows. */
    for (int i = 0; i < n_inputs && !to_stdout && stat(csv_path, &sb) == 0; i++) {
        struct stat in;
        if (stat(inputs[i], &in) == 0 && in.st_dev == sb.st_dev && in.st_ino == sb.st_ino)
            return tb_error_set(TB_EINVAL, "--csv %s is also an input (--in %s); give another output file", csv_path,
                                inputs[i]);
    }
    for (int i = 0; i < n_inputs && st == TB_OK; i++) st = results_read_rows(inputs[i], on_row_columns, &t);
    if (st == TB_OK && t.n && !(t.cells = calloc((size_t)t.n, sizeof *t.cells)))
        st = tb_error_set(TB_ENOMEM, "export: out of memory");
    if (st == TB_OK && to_stdout) t.out = stdout;
    else if (st == TB_OK) {
        /* Beside the target, then renamed: a reader never sees half a table. */
        if (asprintf(&tmp_path, "%s.tmp.%ld", csv_path, (long)getpid()) < 0)
            tmp_path = NULL, st = tb_error_set(TB_ENOMEM, "export: out of memory");
        else if (!(t.out = fopen(tmp_path, "w")))
            st = tb_error_set(TB_EIO, "export: cannot create %s: %s", tmp_path, strerror(errno));
    }
    for (int k = 0; k < t.n && st == TB_OK; k++) {
        if (k) fputc(',', t.out);
        results_csv_text(t.out, t.cols[k]);
    }
    if (st == TB_OK && t.n) fputs("\r\n", t.out);
    for (int i = 0; i < n_inputs && st == TB_OK && t.n; i++) st = results_read_rows(inputs[i], on_row_write, &t);
    if (t.out && ferror(t.out) && st == TB_OK) st = tb_error_set(TB_EIO, "export: write to %s failed", csv_path);
    if (t.out && !to_stdout && fclose(t.out) != 0 && st == TB_OK)
        st = tb_error_set(TB_EIO, "export: cannot close %s: %s", tmp_path, strerror(errno));
    if (to_stdout && t.out) fflush(stdout);
    if (tmp_path && st == TB_OK && rename(tmp_path, csv_path) != 0)
        st = tb_error_set(TB_EIO, "export: cannot rename %s to %s: %s", tmp_path, csv_path, strerror(errno));
    if (tmp_path && st != TB_OK) unlink(tmp_path);
    if (n_rows) *n_rows = t.n_rows;
    if (n_cols) *n_cols = t.n;
    for (int k = 0; k < t.n; k++) free(t.cols[k]);
    free(t.cols);
    free(t.cells);
    free(tmp_path);
    return st;
}

static void export_usage(FILE *f)
{
    fprintf(f, "usage: bench export --csv FILE [--in ROWS.jsonl ...]\n"
               "Writes result rows as one CSV table: a column per key, nested keys joined with dots\n"
               "(config.batch, figures.images_per_s), the union of every row's keys (missing: empty cell),\n"
               "arrays as compact JSON in one cell, RFC 4180 quoting and CRLF line ends.\n\n"
               "  --csv FILE   the table to write (\"-\": stdout)\n"
               "  --in FILE    rows to read; repeat for several files (default results/results.jsonl)\n"
               "  --help       this text\n");
}

int export_main(int argc, char **argv)
{
    const char *csv = NULL;
    const char **in = calloc((size_t)argc + 1, sizeof *in);
    int n_in = 0, rc = -1;
    if (!in) return 1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            export_usage(stdout);
            rc = 0;
        } else if ((!strcmp(a, "--csv") || !strcmp(a, "--in")) && i + 1 < argc) {
            if (!strcmp(a, "--csv")) csv = argv[++i];
            else in[n_in++] = argv[++i];
        } else {
            fprintf(stderr, "bench export: %s '%s' (see bench export --help)\n",
                    !strcmp(a, "--csv") || !strcmp(a, "--in") ? "a value is needed after" : "unknown argument", a);
            rc = 2;
        }
    }
    if (rc < 0 && !csv) {
        export_usage(stderr);
        rc = 2;
    }
    if (rc < 0) {
        if (!n_in) in[n_in++] = "results/results.jsonl";
        int rows, cols;
        const int st = export_csv(in, n_in, csv, &rows, &cols);
        if (st != TB_OK) fprintf(stderr, "bench export: %s\n", tb_error_get());
        else if (strcmp(csv, "-")) printf("bench export: %s: %d row%s, %d column%s\n", csv, rows, rows == 1 ? "" : "s",
                                          cols, cols == 1 ? "" : "s");
        rc = st == TB_OK ? 0 : st == TB_EINVAL ? 2 : 1;
    }
    free(in);
    return rc;
}
