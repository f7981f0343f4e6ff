/* report_gpu.h — what the report says of the GPU: the facts of the GPU the rows on the cuda device ran on,
 * the ceilings they are drawn against (roofline, shares), or "no GPU calibration".
 *
 * The ceilings are those of the calibration file when it was measured on the machine of the report's
 * latest row and on the same GPU (by name), else the newest copy a row of that GPU carries
 * (calibration.gpu_*), as the CPU's ceilings are chosen. Rows on the cuda device are those whose
 * config.device is "cuda". Threading: none; report.c owns the rows.
 */
#ifndef TB_REPORT_GPU_H
#define TB_REPORT_GPU_H

#include "calibrate.h"
#include "json.h"

#include <stdio.h>

struct report_gpu {
    const struct json_value *latest; /* the latest kept row on the cuda device, or NULL */
    int n_rows;                      /* kept rows on the cuda device */
    char name[256];                  /* latest's GPU (machine.gpu.name), "" when it names none */
    int have;                        /* cal holds ceilings of that GPU */
    struct calibration_gpu cal;
    char source[600];                /* where they come from */
};

/* Whether a row ran on the cuda device. */
int report_gpu_row(const struct json_value *row);
/* Chooses g's GPU and ceilings from the kept rows and the calibration file (file: read and matched to the
 * latest row's machine by report.c, NULL if not; file_source: its path and timestamp). */
void report_gpu_choose(struct report_gpu *g, const struct json_value *const *rows, const int *keep, int n,
                       const struct calibration *file, const char *file_source);
/* The header's paragraph: the GPU's facts and ceilings, or "no GPU calibration" when rows ran on a GPU
 * without them; nothing when no row did and no ceilings were found. */
void report_gpu_header(const struct report_gpu *g, FILE *md);
/* A row's GFLOP/s as a share of its GPU's fp32 ceiling; NaN without ceilings of that GPU. */
double report_gpu_share(const struct report_gpu *g, const struct json_value *row);
/* The roofline's GPU variables for plots/roofline.gp ("; gpupeak=...", or "" without ceilings), appended to
 * vars (n bytes in all). */
void report_gpu_roofline_vars(const struct report_gpu *g, char *vars, size_t n);
/* The roofline's sentence on the GPU's ceilings (when any point ran on the cuda device). */
void report_gpu_roofline_text(const struct report_gpu *g, FILE *md);

#endif
