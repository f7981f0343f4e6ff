/* results.h — result rows as JSON Lines: atomic append, tolerant read-back, CSV export.
 *
 * One row = one run = one line of JSON ending in '\n'. results_append_row() writes a row with a
 * single O_APPEND write() followed by fsync(), so concurrent writers (several bench processes, MPI
 * ranks) never interleave and a crash leaves at most one torn last line. results_read_rows() skips
 * a torn or malformed line with a warning naming the file and line instead of failing the whole
 * file. It does not build rows (json.h does) nor decide their fields (the CLI does); it only
 * rejects rows from a newer schema than this build understands.
 * Threading: stateless; safe to call from several threads or processes on the same file.
 */
#ifndef TB_RESULTS_H
#define TB_RESULTS_H

#include "json.h"

#include <stdio.h>

/* Bump when a field changes meaning or is removed; readers skip rows with a newer version. */
#define RESULTS_SCHEMA_VERSION 1

/* Called once per good row (a JSON object) with its 1-based line number; return TB_OK to go on,
 * anything else stops the read and is returned by results_read_rows. The row is freed after. */
typedef int (*results_row_fn)(const struct json_value *row, long line_no, void *ctx);

/* Creates every missing directory above the file path (mkdir -p of its dirname): --out and --logits name
 * files in directories they may create. TB_OK or TB_EIO naming the directory. */
int results_make_parent_dirs(const char *path);

/* Appends one row (a single line of JSON, with or without the final '\n') to path atomically,
 * creating missing parent directories. Returns TB_OK, TB_EINVAL (embedded newline) or TB_EIO. */
int results_append_row(const char *path, const char *line);

/* Calls fn for every good row of a JSON Lines file; skips blank lines silently and torn, invalid,
 * non-object or newer-schema lines with a warning on stderr. Returns TB_OK, TB_EIO (cannot open
 * or read) or the first non-OK value returned by fn. */
int results_read_rows(const char *path, results_row_fn fn, void *ctx);

/* results_read_rows for a reader that reads its input once: path may also be a pipe or FIFO (`bench report
 * --in <(zcat rows.gz)`), read as it streams. The others take regular files only: they read a file again
 * (export's two passes), or read bench's own --out, where a pipe would be its own output. *n_skipped (unless
 * NULL) receives the count of non-blank lines skipped (torn, malformed, not objects, of a newer schema). */
int results_read_rows_stream(const char *path, results_row_fn fn, void *ctx, long *n_skipped);

/* Writes the given dotted paths of every good row of jsonl as CSV columns (header = the paths) to
 * csv, replacing it atomically. Missing or null values are empty cells, bools are 1/0, strings are
 * quoted when needed, objects and arrays are compact JSON. Returns TB_OK, TB_EINVAL or TB_EIO. */
int results_export_csv(const char *jsonl, const char *csv, const char *const *columns, int n_columns);

/* Writes s to out as one CSV cell, quoted (quotes doubled) when it holds a comma, quote, CR or LF or
 * starts or ends with a space (RFC 4180). */
void results_csv_text(FILE *out, const char *s);
/* Writes v to out as one CSV cell, as results_export_csv does (NULL or null: an empty cell). */
void results_csv_value(FILE *out, const struct json_value *v);

#endif
