/* export.c — result rows as one flat CSV table (see export.h). */
#define _GNU_SOURCE
#include "export.h"

#include "json.h"
#include "outputs.h"
#include "regular_file.h"
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
    int *slots;       /* hash of the names: column index + 1, 0 for an empty slot; a power of 2 */
    int n_slots;
    long *stamp;      /* per column: the serial of the last row that filled it */
    unsigned char *warned; /* per column: its collision was reported */
    long row;         /* serial of the row being walked (both passes) */
    const char *path; /* the input being read, for warnings */
    long line_no;
    int n_rows;
    const struct json_value **cells; /* pass 2: the current row's value per column (NULL: empty) */
    FILE *out;
};

static unsigned long hash_name(const char *s)
{
    unsigned long h = 1469598103934665603UL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211UL;
    return h;
}

/* The slot of name in t->slots: the one holding it, or the empty one where it would go. */
static int slot_of(const struct table *t, const char *name)
{
    int i = (int)(hash_name(name) & (unsigned long)(t->n_slots - 1));
    while (t->slots[i] && strcmp(t->cols[t->slots[i] - 1], name)) i = (i + 1) & (t->n_slots - 1);
    return i;
}

/* Index of column name, or -1. A hash: a row of 100,000 keys took 10 s with a linear search. */
static int col_find(const struct table *t, const char *name)
{
    return t->n_slots ? t->slots[slot_of(t, name)] - 1 : -1;
}

/* Index of column name, added at the end if new; -1 when out of memory (the error set). */
static int col_add(struct table *t, const char *name)
{
    const int k = col_find(t, name);
    if (k >= 0) return k;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char **p = realloc(t->cols, (size_t)cap * sizeof *p);
        long *q = p ? realloc(t->stamp, (size_t)cap * sizeof *q) : NULL;
        unsigned char *w = q ? realloc(t->warned, (size_t)cap) : NULL;
        if (p) t->cols = p;
        if (q) t->stamp = q;
        if (w) t->warned = w;
        if (!w) return tb_error_set(TB_ENOMEM, "out of memory for %d columns", cap), -1;
        t->cap = cap;
    }
    if (2 * (t->n + 1) > t->n_slots) { /* at most half full */
        const int n_slots = t->n_slots ? 2 * t->n_slots : 128;
        int *slots = calloc((size_t)n_slots, sizeof *slots);
        if (!slots) return tb_error_set(TB_ENOMEM, "out of memory for %d columns", t->n), -1;
        free(t->slots);
        t->slots = slots, t->n_slots = n_slots;
        for (int c = 0; c < t->n; c++) t->slots[slot_of(t, t->cols[c])] = c + 1;
    }
    if (!(t->cols[t->n] = strdup(name))) return tb_error_set(TB_ENOMEM, "out of memory"), -1;
    t->stamp[t->n] = 0;
    t->warned[t->n] = 0;
    t->slots[slot_of(t, name)] = t->n + 1;
    return t->n++;
}

/* The column of a leaf at path in the row being walked: path's own, unless this row already filled it
 * (a dotted key "a.b" beside the nested path {"a":{"b":..}} spells the same name, as does a repeated
 * key), then "path#2", "path#3"..., so that no value is dropped; said once per column. Pass 1 (add)
 * creates the columns, pass 2 finds the same ones. */
static int leaf_column(struct table *t, const char *path, int add)
{
    int k = add ? col_add(t, path) : col_find(t, path);
    if (k < 0 || t->stamp[k] != t->row) {
        if (k >= 0) t->stamp[k] = t->row;
        return k;
    }
    const int first = k;
    for (int n = 2; k >= 0 && t->stamp[k] == t->row; n++) {
        char *alt = NULL;
        if (asprintf(&alt, "%s#%d", path, n) < 0) return tb_error_set(TB_ENOMEM, "out of memory"), -1;
        k = add ? col_add(t, alt) : col_find(t, alt);
        if (add && k >= 0 && !t->warned[first]) {
            t->warned[first] = 1;
            fprintf(stderr, "bench export: warning: %s:%ld: two keys spell the column %s (a dotted key beside the nested path, or a "
                            "repeated key); the second value is column %s\n", t->path, t->line_no, path, alt);
        }
        free(alt);
    }
    if (k >= 0) t->stamp[k] = t->row;
    return k;
}

/* Visits every leaf of object v under prefix: pass 1 (t->cells NULL) adds its column, pass 2 notes
 * its value in the row's cells. */
static int walk(struct table *t, const struct json_value *v, const char *prefix)
{
    for (int i = 0; i < v->n; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "." : "", v->keys[i]) < 0)
            return tb_error_set(TB_ENOMEM, "out of memory");
        const struct json_value *x = &v->items[i];
        int st = TB_OK;
        if (x->type == JSON_OBJECT) st = walk(t, x, path);
        else {
            const int k = leaf_column(t, path, !t->cells);
            if (k >= 0 && t->cells) t->cells[k] = x;
            else if (k < 0 && !t->cells) st = TB_ENOMEM;
        }
        free(path);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

static int on_row_columns(const struct json_value *row, long line_no, void *ctx)
{
    struct table *t = ctx;
    t->row++, t->line_no = line_no;
    return walk(t, row, "");
}

static int on_row_write(const struct json_value *row, long line_no, void *ctx)
{
    struct table *t = ctx;
    t->row++, t->line_no = line_no;
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
    const char *why = to_stdout ? NULL : regular_target_why(csv_path);
    if (why) return tb_error_set(TB_EIO, "--csv %s: %s (--csv - writes to stdout)", csv_path, why);
    /* The same file as an input, however named (another path, a link): the table would replace the rows. */
    for (int i = 0; i < n_inputs && !to_stdout && stat(csv_path, &sb) == 0; i++) {
        struct stat in;
        if (stat(inputs[i], &in) == 0 && in.st_dev == sb.st_dev && in.st_ino == sb.st_ino)
            return tb_error_set(TB_EINVAL, "--csv %s is also an input (--in %s); give another output file", csv_path,
                                inputs[i]);
    }
    /* Nor other rows, or a checkpoint (a table over a results file lost its rows, exit 0). */
    if (!to_stdout && (st = outputs_check_kind("--csv", csv_path)) != TB_OK) return st;
    for (int i = 0; i < n_inputs && st == TB_OK; i++) {
        t.path = inputs[i];
        st = results_read_rows(inputs[i], on_row_columns, &t);
    }
    /* No row to write: an error, not an empty table renamed over the file a user had (compare and report
     * refuse the same input). */
    if (st == TB_OK && t.n == 0) /* no row gave a column */
        st = tb_error_set(TB_EFORMAT, "no usable result rows in %s%s (empty, or no line is a well-formed "
                                      "row); %s left as it was", inputs[0], n_inputs > 1 ? " and the other inputs" : "",
                          to_stdout ? "nothing written" : csv_path);
    if (st == TB_OK && t.n && !(t.cells = calloc((size_t)t.n, sizeof *t.cells)))
        st = tb_error_set(TB_ENOMEM, "out of memory");
    if (st == TB_OK && to_stdout) t.out = stdout;
    else if (st == TB_OK) {
        /* Beside the target, then renamed: a reader never sees half a table. */
        if (asprintf(&tmp_path, "%s.tmp.%ld", csv_path, (long)getpid()) < 0)
            tmp_path = NULL, st = tb_error_set(TB_ENOMEM, "out of memory");
        else if (!(t.out = fopen(tmp_path, "w")))
            st = tb_error_set(TB_EIO, "cannot create %s: %s", tmp_path, strerror(errno));
    }
    for (int k = 0; k < t.n && st == TB_OK; k++) {
        if (k) fputc(',', t.out);
        results_csv_text(t.out, t.cols[k]);
    }
    if (st == TB_OK && t.n) fputs("\r\n", t.out);
    for (int i = 0; i < n_inputs && st == TB_OK && t.n; i++) {
        t.path = inputs[i];
        st = results_read_rows(inputs[i], on_row_write, &t);
    }
    /* The write's own reason (a full disk), not only that one failed. */
    if (t.out && to_stdout) {
        errno = 0;
        if ((fflush(stdout) != 0 || ferror(stdout)) && st == TB_OK)
            st = tb_error_set(TB_EIO, "write to standard output failed: %s", errno ? strerror(errno) : "a write failed");
    } else if (t.out) {
        const int err = tb_fclose_errno(t.out);
        if (err && st == TB_OK) st = tb_error_set(TB_EIO, "cannot write %s: %s", csv_path, strerror(err));
    }
    if (tmp_path && st == TB_OK && rename(tmp_path, csv_path) != 0)
        st = tb_error_set(TB_EIO, "cannot rename %s to %s: %s", tmp_path, csv_path, strerror(errno));
    if (tmp_path && st != TB_OK) unlink(tmp_path);
    if (n_rows) *n_rows = t.n_rows;
    if (n_cols) *n_cols = t.n;
    for (int k = 0; k < t.n; k++) free(t.cols[k]);
    free(t.cols);
    free(t.slots);
    free(t.stamp);
    free(t.warned);
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
    if (rc < 0 && !csv) { /* one line, as every usage error: the whole usage is --help's */
        fprintf(stderr, "bench export: --csv FILE is needed (\"-\" for stdout; see bench export --help)\n");
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
