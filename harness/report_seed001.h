/* report_seed001.h — the report's seed-001 subsection: EfficientNet-B4 G16 on IPU-PODs, Graphcore's
 * published throughput beside the device model's projection (devmodel.h), the same configuration
 * projected onto the other shipped devices, and, on this machine, the cpu-this model's per-stage times
 * against a measured ipu run's. Every figure is labelled published, measured or PROJECTED; the machine
 * is named. Reads: <devices_dir>/seed001.published and the *.spec files, the rows file (optional), and
 * draws with <plots_dir>/seed001.gp and seed001_cpu.gp. Threading: none (starts gnuplot and waits).
 */
#ifndef TB_REPORT_SEED001_H
#define TB_REPORT_SEED001_H

#include "calibrate.h"
#include "devmodel.h"
#include "json.h"

#include <stdio.h>

/* This machine's validation: the newest ok ipu row of a rows file with ≥ 2 stages, a split and per-stage
 * times (effnet-b4-g16 preferred), its model rebuilt from the row's config, and the cpu-this spec from
 * the row's own calibration projected onto the same stages. */
struct seed001_cpu {
    char run_id[128], cpu[128], split[64], precision[16];
    int cores, stages, micro_batch, in_h, in_w, recompute;
    struct calibration cal;
    double meas_fwd[PROJ_MAX_STAGES], meas_bwd[PROJ_MAX_STAGES]; /* measured, seconds per micro-batch */
    struct dev_spec d;
    struct model m;
    int have_model;
    struct dev_run r;
};
/* TB_OK; TB_EIO when the file holds no such row; TB_EINVAL when it cannot be modelled (message set).
 * Call seed001_cpu_free after any return. */
int seed001_cpu_load(const char *rows_path, struct seed001_cpu *v);
void seed001_cpu_free(struct seed001_cpu *v);

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
 *   drawn        incremented for each chart drawn (the report's count); NULL: not counted
 * Returns TB_OK, or TB_EIO / TB_EINVAL when the published file or the ipu-bow spec cannot be read (md
 * then carries a line saying so). */
int report_seed001(FILE *md, const char *chart_dir, const char *plots_dir, const char *devices_dir,
                   const char *rows_path, const char *gnuplot, int *drawn);
/* report_seed001 on rows already read (rows[0..n_rows), those of rows_path, which names them): `bench report`
 * reads its file once, so each malformed line's warning is printed once. A chart table that could not be written
 * is named in unwritten (un bytes, when it is still ""), for the report to say it is incomplete. */
int report_seed001_rows(FILE *md, const char *chart_dir, const char *plots_dir, const char *devices_dir,
                        const struct json_value *const *rows, int n_rows, const char *rows_path, const char *gnuplot,
                        int *drawn, char *unwritten, size_t un);

#endif
