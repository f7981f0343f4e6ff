/* report_seed001.h — the report's seed-001 subsection: EfficientNet-B4 G16 on IPU-PODs, Graphcore's
 * published throughput beside the device model's projection (devmodel.h), the same configuration
 * projected onto the other shipped devices, and, on this machine, the cpu-this model's per-stage times
 * against a measured ipu run's. Every figure is labelled published, measured or PROJECTED; the machine
 * is named. Reads: <devices_dir>/seed001.published and the *.spec files, the rows file (optional), and
 * draws with <plots_dir>/seed001.gp and seed001_cpu.gp. Threading: none (starts gnuplot and waits).
 */
#ifndef TB_REPORT_SEED001_H
#define TB_REPORT_SEED001_H

#include <stdio.h>

/* Writes "### Seed 001 — EfficientNet-B4 G16 on IPU-PODs" into md (a Markdown file being written in
 * the directory that holds chart_dir).
 *   chart_dir    where seed001_pods.{png,svg} and seed001_cpu.{png,svg} go (created; data files under
 *                chart_dir/data/); the Markdown links them as <basename of chart_dir>/NAME.png
 *   plots_dir    the gnuplot scripts (plots/)
 *   devices_dir  device specs and seed001.published (devices/)
 *   rows_path    result rows (JSON Lines) holding a measured ipu run with --stages >= 2 and --split (the
 *                newest ok one is used; effnet-b4-g16 preferred); NULL or none: the validation says how
 *                to make one (the command is printed)
 *   gnuplot      the executable; NULL = "gnuplot" on PATH (missing: tables only, said in md)
 * Returns TB_OK, or TB_EIO / TB_EINVAL when the published file or the ipu-bow spec cannot be read (md
 * then carries a line saying so). */
int report_seed001(FILE *md, const char *chart_dir, const char *plots_dir, const char *devices_dir,
                   const char *rows_path, const char *gnuplot);

#endif
