/* device_cuda.c — the cuda device's facts and memory for core's registry (core/device_info.h): the current
 * GPU's properties (the one the executors run on: device 0 unless CUDA_VISIBLE_DEVICES says otherwise),
 * the kernel driver's release from /proc/driver/nvidia/version (the runtime reports only the CUDA version
 * the driver supports), and the device memory the executors hold by their own accounting beside what
 * cudaMemGetInfo sees in use. */
#define _GNU_SOURCE
#include "cuda_util.h"
#include "executor.h"
#include "status.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* CUDA's integer version (13000) as "13.0". */
static void cuda_version_text(int v, char *buf, size_t n) { snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10); }

/* Whether t is a release number: digits and at least one dot ("580.65.06"). */
static int is_release(const char *t)
{
    int dots = 0;
    if (!isdigit((unsigned char)*t)) return 0;
    for (; *t; t++) {
        if (*t == '.') dots++;
        else if (!isdigit((unsigned char)*t)) return 0;
    }
    return dots > 0;
}

/* The first release number of "NVRM version: NVIDIA UNIX [Open Kernel Module for] x86_64 ... 580.65.06 ...";
 * "unknown" when the file is missing (a container without it) or says no such thing. */
static void driver_release(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
            if (is_release(t)) {
                snprintf(buf, n, "%s", t);
                break;
            }
    }
    fclose(f);
}

int executor_cuda_info(struct device_info *d)
{
    memset(d, 0, sizeof *d);
    int st = tb_cuda_probe();
    if (st != TB_OK) return st;
    int dev = 0, drv = 0, rt = 0;
    struct cudaDeviceProp p;
    TB_CU(cudaGetDevice(&dev));
    TB_CU(cudaGetDeviceProperties(&p, dev));
    TB_CU(cudaDriverGetVersion(&drv));
    TB_CU(cudaRuntimeGetVersion(&rt));
    snprintf(d->name, sizeof d->name, "%s", p.name);
    driver_release(d->driver_version, sizeof d->driver_version);
    cuda_version_text(drv, d->driver_cuda, sizeof d->driver_cuda);
    cuda_version_text(rt, d->runtime_version, sizeof d->runtime_version);
    snprintf(d->capability, sizeof d->capability, "%d.%d", p.major, p.minor);
    d->mem_gib = (double)p.totalGlobalMem / 1073741824.0;
    d->multiprocessors = p.multiProcessorCount;
    return TB_OK;
}

int executor_cuda_memory(struct device_memory *m, int reset)
{
    memset(m, 0, sizeof *m);
    int st = tb_cuda_probe();
    if (st != TB_OK) return st;
    size_t free_b = 0, total_b = 0;
    TB_CU(cudaMemGetInfo(&free_b, &total_b));
    tb_cuda_mem_counts(&m->alloc_bytes, &m->alloc_peak_bytes, reset);
    m->used_bytes = (double)(total_b - free_b);
    m->total_bytes = (double)total_b;
    return TB_OK;
}
