/* report_gpu.c — the report's GPU facts, ceilings and shares (see report_gpu.h). */
#include "report_gpu.h"

#include "report_seeds.h" /* report_gp_quote */

#include <math.h>
#include <string.h>

int report_gpu_row(const struct json_value *row)
{
    return !strcmp(json_get_str(row, "config.device", "cpu"), "cuda");
}

/* A ceiling a row carries: finite and not negative, else 0 (none): it is printed and passed to gnuplot. */
static double ceiling(const struct json_value *c, const char *key)
{
    const double v = json_get_number(c, key, 0);
    return isfinite(v) && v > 0 ? v : 0.0;
}

/* The GPU ceilings a row carries (calibration.gpu_*) into g->cal, if it carries them for g's GPU. */
static int from_row(struct report_gpu *g, const struct json_value *row)
{
    const struct json_value *c = json_get(row, "calibration");
    if (!c || strcmp(json_get_str(c, "gpu_name", ""), g->name) || !(ceiling(c, "gpu_fp32_tflops") > 0))
        return 0;
    memset(&g->cal, 0, sizeof g->cal);
    g->cal.state = CAL_GPU_MEASURED;
    snprintf(g->cal.info.name, sizeof g->cal.info.name, "%s", g->name);
    g->cal.c.fp32_tflops = ceiling(c, "gpu_fp32_tflops");
    g->cal.c.tf32_tflops = ceiling(c, "gpu_tf32_tflops");
    g->cal.c.bf16_tflops = ceiling(c, "gpu_bf16_tflops");
    g->cal.c.memcpy_gbs = ceiling(c, "gpu_copy_gbs"); /* the better of the two copies */
    snprintf(g->source, sizeof g->source, "copied into the rows, %s", json_get_str(c, "timestamp", "?"));
    return 1;
}

void report_gpu_choose(struct report_gpu *g, const struct json_value *const *rows, const int *keep, int n,
                       const struct calibration *file, const char *file_source)
{
    memset(g, 0, sizeof *g);
    for (int i = 0; i < n; i++)
        if (keep[i] && report_gpu_row(rows[i])) g->latest = rows[i], g->n_rows++;
    if (g->latest) snprintf(g->name, sizeof g->name, "%s", json_get_str(g->latest, "machine.gpu.name", ""));
    /* Without GPU rows the file's ceilings are still the machine's: shown, drawn against nothing. */
    if (file && file->gpu.state == CAL_GPU_MEASURED && (!g->latest || calibrate_gpu_matches(&file->gpu, g->name))) {
        g->cal = file->gpu;
        g->have = 1;
        snprintf(g->source, sizeof g->source, "%s", file_source);
        if (!g->latest) snprintf(g->name, sizeof g->name, "%s", file->gpu.info.name);
        return;
    }
    for (int i = n - 1; i >= 0 && g->name[0] && !g->have; i--)
        if (report_gpu_row(rows[i])) g->have = from_row(g, rows[i]);
}

void report_gpu_header(const struct report_gpu *g, FILE *md)
{
    if (g->latest) {
        const struct json_value *r = g->latest;
        const double mem = json_get_number(r, "machine.gpu.mem_gib", 0), sms = json_get_number(r, "machine.gpu.multiprocessors", 0);
        char mem_txt[32] = "–", sms_txt[32] = "–"; /* the report's empty-cell mark, never nan or inf */
        if (isfinite(mem)) snprintf(mem_txt, sizeof mem_txt, "%.1f", mem);
        if (isfinite(sms)) snprintf(sms_txt, sizeof sms_txt, "%g", sms);
        if (json_get(r, "machine.gpu"))
            fprintf(md, "GPU of the latest row on the cuda device: %s, compute capability %s, %s GiB, %s SMs; "
                        "driver %s (CUDA %s), CUDA runtime %s.\n\n",
                    g->name, json_get_str(r, "machine.gpu.compute_capability", "?"), mem_txt, sms_txt,
                    json_get_str(r, "machine.gpu.driver_version", "?"),
                    json_get_str(r, "machine.gpu.driver_cuda_version", "?"),
                    json_get_str(r, "machine.gpu.runtime_version", "?"));
        else
            fprintf(md, "The latest row on the cuda device names no GPU (written before rows did).\n\n");
    }
    if (g->have) {
        const struct device_ceilings *c = &g->cal.c;
        fprintf(md, "**GPU ceilings** (`bench --calibrate`; %s): %s, cuBLAS fp32 (TF32 off) %.1f TFLOP/s, TF32 %.1f "
                    "TFLOP/s, bf16 (fp32 accumulate) %.1f TFLOP/s",
                g->source, g->name, c->fp32_tflops, c->tf32_tflops, c->bf16_tflops);
        if (c->gemm_n > 0) fprintf(md, " at n=%d", c->gemm_n);
        if (c->copy_kernel_gbs > 0)
            fprintf(md, "; device-to-device copy %.0f GB/s by cudaMemcpy, %.0f GB/s by a copy kernel (read + write "
                        "counted).\n\n", c->memcpy_gbs, c->copy_kernel_gbs);
        else
            fprintf(md, "; device-to-device copy %.0f GB/s (read + write counted).\n\n", c->memcpy_gbs);
    } else if (g->latest) {
        fprintf(md, "**GPU**: no GPU calibration of %s (run `bench --calibrate` on the machine with that GPU): its %d "
                    "row%s on the cuda device %s shown without ceilings or shares.\n\n",
                g->name[0] ? g->name : "the rows' GPU", g->n_rows, g->n_rows == 1 ? "" : "s",
                g->n_rows == 1 ? "is" : "are");
    }
}

double report_gpu_share(const struct report_gpu *g, const struct json_value *row)
{
    if (!g->have || !report_gpu_row(row) || strcmp(json_get_str(row, "machine.gpu.name", ""), g->name)) return NAN;
    return json_get_number(row, "figures.gflops_per_s", NAN) / (1e3 * g->cal.c.fp32_tflops);
}

void report_gpu_roofline_vars(const struct report_gpu *g, char *vars, size_t n)
{
    if (!g->have || !g->latest) return;
    char q[600];
    report_gp_quote(q, sizeof q, g->name);
    const size_t len = strlen(vars);
    snprintf(vars + len, n - len, "; gpupeak=%.6g; gputf32=%.6g; gpubf16=%.6g; gpubw=%.6g; gpuname='%s'",
             1e3 * g->cal.c.fp32_tflops, 1e3 * g->cal.c.tf32_tflops, 1e3 * g->cal.c.bf16_tflops,
             calibrate_gpu_copy_gbs(&g->cal), q);
}

void report_gpu_roofline_text(const struct report_gpu *g, FILE *md)
{
    if (g->have)
        fprintf(md, "Points on the cuda device sit under the GPU's roofs (%s): fp32 with TF32 off %.1f TFLOP/s — "
                    "what its GEMMs run —, TF32 %.0f and bf16 %.0f TFLOP/s dotted and dashed, all under "
                    "device-to-device copy at %.0f GB/s.\n\n",
                g->name, g->cal.c.fp32_tflops, g->cal.c.tf32_tflops, g->cal.c.bf16_tflops,
                calibrate_gpu_copy_gbs(&g->cal));
    else
        fprintf(md, "Points on the cuda device have no GPU roof: no GPU calibration of %s was found.\n\n",
                g->name[0] ? g->name : "their GPU");
}
