/* calibrate_kernels.h — the kernels `bench --calibrate` needs on the GPU (calibrate_cuda.c): matrices filled
 * with hashed values in [-1, 1) (zeros would flatter the GEMMs: less switching, less power) and a float4
 * copy whose bandwidth is the device-to-device ceiling beside cudaMemcpy's. extern "C" launchers enqueue
 * on `s` and never synchronise; each returns the launch's cudaError_t (0: launched).
 */
#ifndef TB_CUDA_CALIBRATE_KERNELS_H
#define TB_CUDA_CALIBRATE_KERNELS_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[i] = a hash of (seed, i) in [-1, 1) for i < n, as fp32. */
int tb_cuda_cal_fill_f32(float *x, size_t n, uint32_t seed, cudaStream_t s);
/* The same values rounded to bf16 (2 bytes each: x holds n of them). */
int tb_cuda_cal_fill_bf16(void *x, size_t n, uint32_t seed, cudaStream_t s);
/* dst[i] = src[i] for i < n4 16-byte elements, grid-stride over every multiprocessor. */
int tb_cuda_cal_copy(void *dst, const void *src, size_t n4, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
