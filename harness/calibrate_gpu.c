/* calibrate_gpu.c — the GPU part of a calibration (see calibrate.h): measured through core's device
 * registry (executor_device_calibrate: the cuda device measures itself, cuda/calibrate_cuda.c), or the
 * reason there is none; and its member "gpu" in the calibration file. */
#include "calibrate.h"

#include "executor.h"
#include "status.h"

#include <stdio.h>
#include <string.h>

/* A registry that does not know the device (TB_EINVAL) is a bench built without it. */
static enum calibration_gpu_state unavailable(struct calibration_gpu *g, int st)
{
    if (st == TB_EINVAL) {
        g->state = CAL_GPU_NOT_BUILT;
        snprintf(g->why, sizeof g->why, "this bench was built without the %s device (TB_CUDA=OFF, or no nvcc)",
                 CALIBRATION_GPU_DEVICE);
    } else {
        g->state = CAL_GPU_ABSENT;
        snprintf(g->why, sizeof g->why, "%s", tb_error_get());
    }
    tb_error_clear();
    return g->state;
}

enum calibration_gpu_state calibrate_gpu_probe(struct calibration_gpu *g)
{
    memset(g, 0, sizeof *g);
    const int st = executor_device_info(CALIBRATION_GPU_DEVICE, &g->info);
    if (st != TB_OK) return unavailable(g, st);
    return g->state = CAL_GPU_MEASURED;
}

enum calibration_gpu_state calibrate_measure_gpu(struct calibration_gpu *g, int gemm_n)
{
    if (calibrate_gpu_probe(g) != CAL_GPU_MEASURED) return g->state;
    const int st = executor_device_calibrate(CALIBRATION_GPU_DEVICE, &g->c, gemm_n);
    const struct device_ceilings *c = &g->c;
    if (st == TB_OK && c->fp32_tflops > 0.0 && c->tf32_tflops > 0.0 && c->bf16_tflops > 0.0 && c->memcpy_gbs > 0.0 &&
        c->copy_kernel_gbs > 0.0)
        return g->state;
    g->state = CAL_GPU_FAILED;
    snprintf(g->why, sizeof g->why, "%s", st != TB_OK ? tb_error_get() : "a ceiling came out as zero");
    memset(&g->c, 0, sizeof g->c);
    tb_error_clear();
    return g->state;
}

const char *calibrate_gpu_state_name(enum calibration_gpu_state s)
{
    switch (s) {
    case CAL_GPU_MEASURED: return "measured";
    case CAL_GPU_ABSENT: return "absent";
    case CAL_GPU_NOT_BUILT: return "not built";
    case CAL_GPU_FAILED: return "failed";
    default: return "unknown";
    }
}

int calibrate_gpu_matches(const struct calibration_gpu *g, const char *gpu_name)
{
    return g->state == CAL_GPU_MEASURED && g->c.fp32_tflops > 0.0 && gpu_name && !strcmp(g->info.name, gpu_name);
}

double calibrate_gpu_copy_gbs(const struct calibration_gpu *g)
{
    return g->c.memcpy_gbs > g->c.copy_kernel_gbs ? g->c.memcpy_gbs : g->c.copy_kernel_gbs;
}

void calibrate_gpu_write_json(const struct calibration_gpu *g, struct json_buf *b)
{
    if (g->state == CAL_GPU_UNKNOWN) return;
    json_key_object(b, "gpu");
    json_key_str(b, "status", calibrate_gpu_state_name(g->state));
    if (g->state != CAL_GPU_MEASURED) {
        json_key_str(b, "reason", g->why);
        if (g->state == CAL_GPU_FAILED) json_key_str(b, "name", g->info.name);
        json_end_object(b);
        return;
    }
    const struct device_info *d = &g->info;
    const struct device_ceilings *c = &g->c;
    json_key_str(b, "name", d->name);
    json_key_str(b, "driver_version", d->driver_version);
    json_key_str(b, "driver_cuda_version", d->driver_cuda);
    json_key_str(b, "runtime_version", d->runtime_version);
    json_key_str(b, "compute_capability", d->capability);
    json_key_double(b, "mem_gib", d->mem_gib);
    json_key_int(b, "multiprocessors", d->multiprocessors);
    json_key_int(b, "gemm_n", c->gemm_n);
    json_key_int(b, "reps", c->reps);
    json_key_double(b, "fp32_tflops", c->fp32_tflops);
    json_key_double(b, "tf32_tflops", c->tf32_tflops);
    json_key_double(b, "bf16_tflops", c->bf16_tflops);
    json_key_double(b, "copy_bytes", c->copy_bytes);
    json_key_double(b, "memcpy_d2d_gbs", c->memcpy_gbs);
    json_key_double(b, "copy_kernel_gbs", c->copy_kernel_gbs);
    json_end_object(b);
}

int calibrate_gpu_read_json(const struct json_value *file, struct calibration_gpu *g)
{
    memset(g, 0, sizeof *g);
    const struct json_value *v = json_get(file, "gpu");
    if (!v) return TB_OK;
    const char *status = json_get_str(v, "status", "");
    const enum calibration_gpu_state states[] = {CAL_GPU_MEASURED, CAL_GPU_ABSENT, CAL_GPU_NOT_BUILT, CAL_GPU_FAILED};
    for (size_t k = 0; k < sizeof states / sizeof *states; k++)
        if (!strcmp(status, calibrate_gpu_state_name(states[k]))) g->state = states[k];
    if (g->state == CAL_GPU_UNKNOWN) return tb_error_set(TB_EFORMAT, "gpu: unknown status \"%s\"", status);
    snprintf(g->why, sizeof g->why, "%s", json_get_str(v, "reason", ""));
    struct device_info *d = &g->info;
    struct device_ceilings *c = &g->c;
    snprintf(d->name, sizeof d->name, "%s", json_get_str(v, "name", ""));
    if (g->state != CAL_GPU_MEASURED) return TB_OK;
    snprintf(d->driver_version, sizeof d->driver_version, "%s", json_get_str(v, "driver_version", "unknown"));
    snprintf(d->driver_cuda, sizeof d->driver_cuda, "%s", json_get_str(v, "driver_cuda_version", "unknown"));
    snprintf(d->runtime_version, sizeof d->runtime_version, "%s", json_get_str(v, "runtime_version", "unknown"));
    snprintf(d->capability, sizeof d->capability, "%s", json_get_str(v, "compute_capability", "unknown"));
    d->mem_gib = json_get_number(v, "mem_gib", 0);
    d->multiprocessors = (int)calibrate_json_in_range(v, "multiprocessors", 0, 1 << 30);
    c->gemm_n = (int)calibrate_json_in_range(v, "gemm_n", 0, 1 << 30);
    c->reps = (int)calibrate_json_in_range(v, "reps", 0, 1 << 30);
    c->fp32_tflops = json_get_number(v, "fp32_tflops", 0);
    c->tf32_tflops = json_get_number(v, "tf32_tflops", 0);
    c->bf16_tflops = json_get_number(v, "bf16_tflops", 0);
    c->copy_bytes = json_get_number(v, "copy_bytes", 0);
    c->memcpy_gbs = json_get_number(v, "memcpy_d2d_gbs", 0);
    c->copy_kernel_gbs = json_get_number(v, "copy_kernel_gbs", 0);
    if (!(c->fp32_tflops > 0.0) || !(c->tf32_tflops > 0.0) || !(c->bf16_tflops > 0.0) || !(c->memcpy_gbs > 0.0) ||
        !(c->copy_kernel_gbs > 0.0) || !d->name[0]) {
        memset(g, 0, sizeof *g);
        return tb_error_set(TB_EFORMAT, "gpu: status measured without a name or a positive ceiling");
    }
    return TB_OK;
}
