/* results.c — JSON Lines rows: atomic append, tolerant read, CSV export (see results.h).
 *
 * Atomicity rests on O_APPEND + one write(): on a local filesystem the kernel positions and
 * writes an O_APPEND write under the inode lock, so two rows never interleave. fsync() makes the
 * row survive a crash of the machine, not just of the process.
 */
#include "results.h"

#include "regular_file.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int results_make_parent_dirs(const char *path)
{
    size_t n = strlen(path);
    char *dir = malloc(n + 1);
    if (!dir)
        return tb_error_set(TB_ENOMEM, "results: out of memory for path %s", path);
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) {
        free(dir);
        return TB_OK; /* relative file in cwd, or directly under / */
    }
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            int err = errno;
            int st = tb_error_set(TB_EIO, "cannot create directory %s: %s", dir, strerror(err));
            free(dir);
            return st;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    free(dir);
    return TB_OK;
}

/* A failed append (disk full, file size limit) must leave the file as it was, not a torn fragment.
 * Only when the file ends exactly where our bytes did: if another writer appended after them,
 * cutting back would destroy its row, and readers skip our fragment anyway. */
static void undo_partial_append(int fd, off_t orig_size, off_t written)
{
    struct stat now;
    if (written <= 0 || fstat(fd, &now) != 0 || now.st_size != orig_size + written)
        return;
    if (ftruncate(fd, orig_size) != 0)
        fprintf(stderr, "bench: warning: could not remove a partial row (%s)\n", strerror(errno));
}

int results_append_row(const char *path, const char *line)
{
    if (!path || !*path || !line)
        return tb_error_set(TB_EINVAL, "results_append_row: NULL or empty path or line");
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] == '\n')
        len--;
    if (len == 0)
        return tb_error_set(TB_EINVAL, "results_append_row: empty row for %s", path);
    if (memchr(line, '\n', len))
        return tb_error_set(TB_EINVAL, "results_append_row: row for %s contains a newline", path);

    int st = results_make_parent_dirs(path);
    if (st != TB_OK)
        return st;

    /* The whole row including its '\n' in one buffer, so it goes out in one write(); one spare
     * byte in front for a separator. */
    char *buf = malloc(len + 2);
    if (!buf)
        return tb_error_set(TB_ENOMEM, "results_append_row: out of memory for a %zu-byte row", len);
    buf[0] = '\n';
    memcpy(buf + 1, line, len);
    buf[len + 1] = '\n';

    /* O_RDWR rather than O_WRONLY only to peek at the last byte below. */
    int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        free(buf);
        return tb_error_set(TB_EIO, "cannot open %s to append a row: %s", path, strerror(err));
    }
    /* A run that crashed mid-row leaves a last line without '\n'; starting our row with one keeps
     * the torn fragment from swallowing this row (readers then skip just the fragment). */
    struct stat sb;
    char last = '\n';
    int regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    /* Other bench processes may append to the same file at once: the last byte is read and the row written under
     * an exclusive lock (released by close), else a row half-written by another made this one start with a '\n'
     * it did not need (blank lines in the file). The size is read again under it. */
    if (regular && flock(fd, LOCK_EX) == 0 && fstat(fd, &sb) != 0) regular = 0;
    if (regular && sb.st_size > 0 && pread(fd, &last, 1, sb.st_size - 1) != 1)
        last = '\n';
    size_t off = last == '\n' ? 1 : 0;
    size_t total = len + 2;
    size_t done = off;
    while (done < total) {
        ssize_t w = write(fd, buf + done, total - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            st = tb_error_set(TB_EIO, "write to %s failed: %s", path, strerror(err));
            break;
        }
        /* A partial write (disk full, signal) would let another writer interleave; finishing it is
         * still better than leaving a torn row, and readers skip a torn line anyway. */
        done += (size_t)w;
    }
    free(buf);
    if (st != TB_OK && regular)
        undo_partial_append(fd, sb.st_size, (off_t)(done - off));
    /* fsync of a device or pipe (/dev/null, a FIFO) fails with EINVAL and means nothing there. */
    if (st == TB_OK && regular && fsync(fd) != 0) {
        int err = errno;
        st = tb_error_set(TB_EIO, "fsync of %s failed: %s", path, strerror(err));
    }
    if (close(fd) != 0 && st == TB_OK) {
        int err = errno;
        st = tb_error_set(TB_EIO, "close of %s failed: %s", path, strerror(err));
    }
    return st;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

/* Opens rows for reading: a regular file, or a pipe (`--in <(zcat rows.jsonl.gz)`, a FIFO), read once as it
 * streams. A FIFO is opened blocking, waiting for its writer as cat would (a non-blocking open would read
 * an end of file before the writer came). Directories and devices (/dev/null, a terminal) are refused. */
static FILE *rows_fopen(const char *path, const char **why)
{
    struct stat sb;
    const int have = stat(path, &sb) == 0;
    if (have && !S_ISFIFO(sb.st_mode) && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        *why = "not a regular file or a pipe (a device or socket)";
        return NULL;
    }
    if (!have || !S_ISFIFO(sb.st_mode))
        return regular_fopen(path, why); /* its reason for a directory, and the race-free check for a file */
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    FILE *f = NULL;
    if (fd < 0 || fstat(fd, &sb) != 0)
        *why = strerror(errno);
    else if (!S_ISFIFO(sb.st_mode) && !S_ISREG(sb.st_mode))
        *why = "not a regular file or a pipe (a device or socket)"; /* replaced since the stat */
    else if (!(f = fdopen(fd, "rb")))
        *why = strerror(errno);
    if (!f && fd >= 0)
        close(fd);
    return f;
}

/* A skipped row is named with its line, the first RESULTS_SKIPS_SAID of them; the rest are counted in one line
 * at the end (a file of another kind, `bench compare old.jsonl notes.txt`, gave a warning a line). */
enum { RESULTS_SKIPS_SAID = 5 };
struct skips {
    long n, first_unsaid, last_unsaid;
};

static void skip_row(struct skips *k, long line_no, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void skip_row(struct skips *k, long line_no, const char *fmt, ...)
{
    if (++k->n > RESULTS_SKIPS_SAID) {
        if (!k->first_unsaid) k->first_unsaid = line_no;
        k->last_unsaid = line_no;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static int read_rows(const char *path, int pipes, results_row_fn fn, void *ctx, long *n_skipped)
{
    if (n_skipped) *n_skipped = 0;
    if (!path || !fn)
        return tb_error_set(TB_EINVAL, "results_read_rows: NULL path or callback");
    const char *why = NULL;
    FILE *f = pipes ? rows_fopen(path, &why) : regular_fopen(path, &why);
    if (!f)
        return tb_error_set(TB_EIO, "cannot open %s: %s", path, why);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long line_no = 0;
    struct skips sk = {0};
    int st = TB_OK;
    while (st == TB_OK && (n = getline(&line, &cap, f)) >= 0) {
        line_no++;
        size_t len = (size_t)n;
        if (is_blank(line, len))
            continue;
        if (line[len - 1] != '\n') {
            fprintf(stderr, "bench: warning: %s:%ld: skipped a torn last line (no newline; an interrupted write?)\n",
                    path, line_no);
            if (n_skipped) ++*n_skipped;
            continue;
        }
        struct json_value *row = NULL;
        if (json_parse(line, len - 1, &row) != TB_OK) {
            skip_row(&sk, line_no, "bench: warning: %s:%ld: skipped a malformed row: %s\n", path, line_no, tb_error_get());
            tb_error_clear();
            continue;
        }
        if (row->type != JSON_OBJECT) {
            skip_row(&sk, line_no, "bench: warning: %s:%ld: skipped a row that is not a JSON object\n", path, line_no);
        } else if (json_get_number(row, "schema_version", 0) > RESULTS_SCHEMA_VERSION) {
            skip_row(&sk, line_no, "bench: warning: %s:%ld: skipped a row with schema_version %g (this build reads %d)\n", path,
                     line_no, json_get_number(row, "schema_version", 0), RESULTS_SCHEMA_VERSION);
        } else {
            st = fn(row, line_no, ctx);
        }
        json_value_free(row);
    }
    if (n_skipped) *n_skipped += sk.n;
    if (sk.n > RESULTS_SKIPS_SAID)
        fprintf(stderr, "bench: warning: %s: skipped %ld more rows that are not result rows (lines %ld-%ld)\n", path,
                sk.n - RESULTS_SKIPS_SAID, sk.first_unsaid, sk.last_unsaid);
    if (st == TB_OK && ferror(f))
        st = tb_error_set(TB_EIO, "read error in %s after line %ld", path, line_no);
    free(line);
    fclose(f);
    return st;
}

int results_read_rows(const char *path, results_row_fn fn, void *ctx)
{
    return read_rows(path, 0, fn, ctx, NULL);
}

int results_read_rows_stream(const char *path, results_row_fn fn, void *ctx, long *n_skipped)
{
    return read_rows(path, 1, fn, ctx, n_skipped);
}

/* ---------------------------------------------------------------- CSV */

struct csv_ctx {
    FILE *out;
    const char *const *columns;
    int n_columns;
    struct json_buf tmp;
};

static void csv_put_text(FILE *out, const char *s)
{
    int quote = s[0] == ' ' || (s[0] && s[strlen(s) - 1] == ' ') || strpbrk(s, ",\"\n\r") != NULL;
    if (!quote) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', out); /* RFC 4180: a quote inside a quoted cell is doubled */
        fputc(*p, out);
    }
    fputc('"', out);
}

static void csv_put_value(struct csv_ctx *c, const struct json_value *v)
{
    char num[40];
    if (!v)
        return;
    switch (v->type) {
    case JSON_NULL: break;
    case JSON_BOOL: fputc(v->boolean ? '1' : '0', c->out); break;
    case JSON_NUMBER:
        if (isfinite(v->number)) { /* an overflowed 1e999 reads as Inf: leave the cell empty */
            json_format_double(v->number, num, sizeof num);
            fputs(num, c->out);
        }
        break;
    case JSON_STRING: csv_put_text(c->out, v->str); break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        json_buf_reset(&c->tmp);
        json_write_value(&c->tmp, v);
        csv_put_text(c->out, json_buf_str(&c->tmp));
        break;
    }
}

void results_csv_text(FILE *out, const char *s)
{
    csv_put_text(out, s);
}

void results_csv_value(FILE *out, const struct json_value *v)
{
    struct csv_ctx c = {out, NULL, 0, {0}};
    json_buf_init(&c.tmp);
    csv_put_value(&c, v);
    json_buf_free(&c.tmp);
}

static int csv_row(const struct json_value *row, long line_no, void *ctx)
{
    struct csv_ctx *c = ctx;
    for (int i = 0; i < c->n_columns; i++) {
        if (i)
            fputc(',', c->out);
        csv_put_value(c, json_get(row, c->columns[i]));
    }
    fputc('\n', c->out);
    return TB_OK;
}

int results_export_csv(const char *jsonl, const char *csv, const char *const *columns, int n_columns)
{
    if (!jsonl || !csv || !*csv || !columns || n_columns < 1)
        return tb_error_set(TB_EINVAL, "results_export_csv: need input, output and at least one column");
    int st = results_make_parent_dirs(csv);
    if (st != TB_OK)
        return st;
    /* Write beside the target and rename, so a plot never reads a half-written CSV. */
    size_t n = strlen(csv) + 32;
    char *tmp_path = malloc(n);
    if (!tmp_path)
        return tb_error_set(TB_ENOMEM, "results_export_csv: out of memory");
    snprintf(tmp_path, n, "%s.tmp.%ld", csv, (long)getpid());
    FILE *out = fopen(tmp_path, "w");
    if (!out) {
        st = tb_error_set(TB_EIO, "results_export_csv: cannot create %s: %s", tmp_path, strerror(errno));
        free(tmp_path);
        return st;
    }
    struct csv_ctx c = {out, columns, n_columns, {0}};
    json_buf_init(&c.tmp);
    for (int i = 0; i < n_columns; i++) {
        if (i)
            fputc(',', out);
        csv_put_text(out, columns[i] ? columns[i] : "");
    }
    fputc('\n', out);
    st = results_read_rows(jsonl, csv_row, &c);
    json_buf_free(&c.tmp);
    if (ferror(out) && st == TB_OK)
        st = tb_error_set(TB_EIO, "results_export_csv: write to %s failed", tmp_path);
    if (fclose(out) != 0 && st == TB_OK)
        st = tb_error_set(TB_EIO, "results_export_csv: close of %s failed: %s", tmp_path, strerror(errno));
    if (st == TB_OK && rename(tmp_path, csv) != 0)
        st = tb_error_set(TB_EIO, "results_export_csv: cannot rename %s to %s: %s", tmp_path, csv,
                          strerror(errno));
    if (st != TB_OK)
        unlink(tmp_path);
    free(tmp_path);
    return st;
}
