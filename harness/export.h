/* export.h — `bench export --csv FILE [--in ROWS.jsonl ...]`: result rows as one flat CSV table, for
 * pandas, spreadsheets and anything else that reads CSV.
 *
 * Columns are the leaves of the rows' JSON objects, nested keys joined with dots (config.batch,
 * figures.images_per_s, figures.pipeline.bubble_measured), units in the names as the rows carry them,
 * in order of first appearance over every row of every input: the union of the rows' key sets, so a
 * row without a column has an empty cell there. Two keys of one row that spell the same column (a dotted
 * key "a.b" beside the nested path {"a":{"b":..}}, or a repeated key) are both kept: the second value
 * goes to column "a.b#2", said in a warning. An array is one cell holding its compact JSON
 * (figures.repeat_images_per_s = [1012.5,1009.1]; figures.runs with its curves). Cells as
 * results_export_csv writes them: numbers as the shortest text that reads back exactly, bools as 1/0,
 * strings as they are, null and missing keys empty. RFC 4180: one header line, records ending in CRLF, a cell holding a comma, quote, CR or LF
 * (or an edge space) in double quotes with its quotes doubled. Malformed or newer-schema lines are
 * skipped with a warning (results.h). The file is written beside the target and renamed into place, so
 * a target that is not a regular file (a device, a FIFO) or is one of the inputs is refused;
 * "-" writes to stdout. Threading: none.
 */
#ifndef TB_EXPORT_H
#define TB_EXPORT_H

/* Writes the rows of inputs[0..n_inputs) to csv_path as described above; *n_rows and *n_cols (may be
 * NULL) receive the table's size. Returns TB_OK, TB_EIO (an unreadable input, an unwritable output, an
 * output that is not a regular file), TB_EINVAL (the output is one of the inputs) or TB_ENOMEM. */
int export_csv(const char *const *inputs, int n_inputs, const char *csv_path, int *n_rows, int *n_cols);
/* `bench export` with its arguments (argv[0] = "export"): --csv FILE, --in FILE (repeatable; default
 * results/results.jsonl), --help. Returns the exit status: 0 done, 1 runtime failure, 2 usage error
 * (also an output that is one of the inputs). */
int export_main(int argc, char **argv);

#endif
