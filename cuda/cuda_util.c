/* cuda_util.c — CUDA errors as tb_error_set messages, the device probe, the count of device memory
 * (cuBLAS, the rest of cuda_util.h, is cublas_dl.c). */
#define _GNU_SOURCE
#include "cuda_util.h"

#include "status.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_cuda_fail(cudaError_t err, const char *what, const char *file, int line)
{
    const int st = err == cudaErrorMemoryAllocation ? TB_ENOMEM : TB_EIO;
    const char *base = strrchr(file, '/');
    return tb_error_set(st, "cuda: %s failed: %s (%s:%d)", what, cudaGetErrorString(err), base ? base + 1 : file,
                        line);
}

int tb_cuda_env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

int tb_cuda_probe(void)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* the runtime keeps the error sticky for the next call otherwise */
        return tb_error_set(TB_EUNSUPPORTED, "cuda: no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    }
    if (n < 1) return tb_error_set(TB_EUNSUPPORTED, "cuda: no CUDA device (cudaGetDeviceCount found 0)");
    return TB_OK;
}

/* The process's device allocations: a count and its high-water mark, under one lock (executors of
 * mirrored replicas may be created from several threads). */
static struct {
    pthread_mutex_t mu;
    double now, peak;
} mem = {PTHREAD_MUTEX_INITIALIZER, 0.0, 0.0};

void tb_cuda_mem_account(double bytes)
{
    pthread_mutex_lock(&mem.mu);
    mem.now += bytes;
    if (mem.now > mem.peak) mem.peak = mem.now;
    pthread_mutex_unlock(&mem.mu);
}

void tb_cuda_mem_counts(double *now, double *peak, int reset)
{
    pthread_mutex_lock(&mem.mu);
    *now = mem.now, *peak = mem.peak;
    if (reset) mem.peak = mem.now;
    pthread_mutex_unlock(&mem.mu);
}
