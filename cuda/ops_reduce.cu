// ops_reduce.cu — tb_cuda_sum_ring_order (ops_reduce.h): one block row per ring chunk, grid-stride over
// the chunk's elements; every element's k adds run in one thread in the ring's order, so the bits are the
// host ring's whatever the grid. No FMA can form (adds only), and nvcc does not reassociate float adds.
#include "ops_reduce.h"

#include "ops_common.cuh"

namespace {

__global__ void sum_ring_order_k(float *const *bufs, int k, size_t n, int write_all)
{
    const int c = blockIdx.y; // the chunk: the ring's reduce-scatter starts it at replica c
    size_t lo, hi;
    ops_chunk_range(n, k, c, &lo, &hi);
    for (size_t i = lo + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < hi;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = bufs[c][i];
        for (int j = 1; j < k; j++) {
            const int m = c + j < k ? c + j : c + j - k;
            s = s + bufs[m][i]; // the ring's `mine += theirs`: float adds commute, so the same bits
        }
        if (write_all)
            for (int j = 0; j < k; j++) bufs[j][i] = s;
        else
            bufs[0][i] = s;
    }
}

} // namespace

extern "C" void tb_cuda_sum_ring_order(float *const *bufs, int k, size_t n, int write_all, cudaStream_t s)
{
    const size_t chunk = n / (size_t)k + 1;
    size_t bx = (chunk + OPS_THREADS - 1) / OPS_THREADS;
    bx = bx < 1 ? 1 : bx > 4096 ? 4096 : bx; // grid-stride beyond; k rows of blocks already fill the GPU
    sum_ring_order_k<<<dim3((unsigned)bx, (unsigned)k), OPS_THREADS, 0, s>>>(bufs, k, n, write_all);
}
