/* report.h — `bench report`: charts (gnuplot) and REPORT.md from a results file, without running anything.
 *
 * It reads result rows (results.h; a malformed line is skipped with a warning, once), keeps the latest row
 * of each configuration (the data's CRC, config.data_crc32, is part of it), writes the tables each chart needs as tab-separated files under
 * <out>/charts/data/, runs the gnuplot scripts in plots/ on them (PNG via pngcairo and SVG), and
 * writes <out>/REPORT.md with the tables and links to the charts. Charts: training throughput by
 * backend per workload (bars with jitter error bars), time-to-accuracy curves, batch-size scaling
 * (images/s and speed-up against global batch, log2 axis; a grid sweep a line per value of the dimension
 * it varies), per-layer time (rows with figures.layer_times), a roofline under the calibrated ceilings
 * (each CPU point judged against the roofs of the threads it ran on), and the ipu pipeline timeline (a
 * Gantt chart per device of a run's last training step, rows with figures.timeline). The scripts only
 * draw; every number comes from the rows. Rows whose "status" is not "ok" (diverged, interrupted) are
 * left out of every figure and listed in a table of their own. A figure no run can have (report_rows.h:
 * a rate of 0 or less, an accuracy outside [0, 1], 1e15 or more) or a batch no int holds shows as the
 * empty-cell mark, is drawn nowhere, and one warning counts them. Profiles written by tools/profile.sh
 * (<results dir>/profile/<run id>.json) are summarised when present.
 * Threading: none; it starts gnuplot as child processes and waits for each.
 */
#ifndef TB_REPORT_H
#define TB_REPORT_H

struct report_opts {
    const char *in;           /* results file (JSON Lines) */
    const char *out_dir;      /* REPORT.md and charts/ are written here */
    const char *plots_dir;    /* the gnuplot scripts (plots/) */
    const char *calibration;  /* calibration JSON; NULL or missing: the rows' own calibration, if any */
    const char *profile_dir;  /* profile sidecars; NULL = <directory of in>/profile */
    const char *gnuplot;      /* gnuplot executable; NULL = "gnuplot" on PATH */
};

/* The longest --out-dir, --plots, --profile-dir and --in the report takes, in bytes: the charts' and data files' names
 * (up to ~200 bytes, a ' doubled for gnuplot) go under them in fixed buffers, and a longer folder was cut short
 * (charts written into a folder "char" beside REPORT.md's "charts" links, exit 0). */
#define REPORT_PATH_MAX 400

/* Writes the report. *n_charts receives the number of charts rendered (PNG and SVG each count once).
 * Returns TB_OK (also when gnuplot is missing: REPORT.md then says so and has only tables), TB_EIO
 * (cannot read the results or write the output), TB_EFORMAT (no usable rows: bench exits 1, not the
 * usage status 2) or TB_EINVAL (in or calibration is a file the report writes or removes, however named:
 * REPORT.md, a chart, data or log file; or a path longer than REPORT_PATH_MAX; refused before anything is read).
 * Time linear in the rows. */
int report_generate(const struct report_opts *o, int *n_charts);

#endif
