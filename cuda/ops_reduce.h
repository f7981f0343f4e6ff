/* ops_reduce.h — the gradient sum of replicas that share one GPU (collective_cuda.c): a kernel that
 * reproduces the host ring all-reduce's bits (backends/allreduce.c) from one launch. extern "C"
 * launcher (ops_reduce.cu); it enqueues on `s` and never synchronises; the caller checks
 * cudaGetLastError after it (TB_CU_LAUNCHED).
 */
#ifndef TB_CUDA_OPS_REDUCE_H
#define TB_CUDA_OPS_REDUCE_H

#include <cuda_runtime_api.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sums k buffers of n floats in the ring's order: chunk c of k (tb_slice's cut) is bufs[c], then
 * + bufs[c+1], ... + bufs[c+k−1] (indices mod k), each add rounded to float, which is what the ring's
 * reduce-scatter computes; the sum goes to every buffer (write_all) or to bufs[0] alone. bufs is a
 * device array of k device pointers, all on the current GPU. */
void tb_cuda_sum_ring_order(float *const *bufs, int k, size_t n, int write_all, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
