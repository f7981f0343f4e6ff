// emu_selftest.cu — small kernels that ask the CPU emulation (emu.h, emu_runtime.cpp) for what the cuda
// device's kernels rely on it for: warp shuffles, grid and cluster barriers between blocks running at once, a
// block's own static shared memory, and a stop where a GPU would hang. Built only for the emulation
// (tests/cuda_emu/test_emu_runtime.c calls the launchers below); valid CUDA, so what it asks is what a GPU does.
#include "emu_selftest.h"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

namespace {

// Every thread's value t·10 through __shfl_xor_sync with each lane mask 1, 2, ..., 16 (row k: mask 2^k),
// with a __syncthreads between rows (a barrier of the block among the warps' own).
__global__ void k_shfl_xor(int *out, int width)
{
    const int t = threadIdx.x, n = blockDim.x;
    for (int k = 0; k < 5; k++) {
        out[k * n + t] = __shfl_xor_sync(0xffffffffu, t * 10, 1 << k, width);
        __syncthreads();
    }
}

// Rounds of: thread 0 of block b writes round·1000 + b, a grid barrier, then reads block b+1's (mod the grid),
// and a second barrier before the next round overwrites it.
__global__ void k_grid_rounds(int *slot, int *out, int rounds)
{
    cg::grid_group grid = cg::this_grid();
    const int b = blockIdx.x, G = gridDim.x;
    for (int r = 0; r < rounds; r++) {
        if (threadIdx.x == 0) slot[b] = r * 1000 + b;
        grid.sync();
        if (threadIdx.x == 0) out[r * G + b] = slot[(b + 1) % G];
        grid.sync();
    }
}

// As k_grid_rounds with the cluster's barrier: block b reads the next block of its own cluster.
__global__ void k_cluster_rounds(int *slot, int *out, int rounds, int cluster)
{
    cg::cluster_group cl = cg::this_cluster();
    const int b = blockIdx.x, G = gridDim.x, first = b / cluster * cluster;
    for (int r = 0; r < rounds; r++) {
        if (threadIdx.x == 0) slot[b] = r * 1000 + b;
        cl.sync();
        if (threadIdx.x == 0) out[r * G + b] = slot[first + (b - first + 1) % cluster];
        cl.sync();
    }
}

// A block's static shared memory while every block runs: the first byte of an array it has not written
// (out[2b]), then its own index written, a grid barrier (every block has written its own), and what it reads
// back (out[2b+1]).
__global__ void k_static_own(int *out)
{
    __shared__ unsigned char fresh[8];
    __shared__ int mine[4];
    cg::grid_group grid = cg::this_grid();
    const int b = blockIdx.x;
    if (threadIdx.x == 0) out[2 * b] = fresh[3];
    __syncthreads();
    if (threadIdx.x == 0) mine[1] = b;
    grid.sync();
    if (threadIdx.x == 1) out[2 * b + 1] = mine[1];
}

// Half a warp waits at __syncthreads while the other half waits in a shuffle of the whole warp's: a GPU
// would hang (or read lanes that never came).
__global__ void k_divergent(int *out)
{
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
    }
}

// Each thread writes its slot of a shared array and reads its neighbour's: a race without the barrier
// between (kSync false), what make gpusim's racecheck must report.
template <bool kSync> __global__ void k_neighbour(int *out)
{
    __shared__ int s[1024];
    const int t = threadIdx.x, n = blockDim.x;
    s[t] = t;
    if (kSync) __syncthreads();
    out[t] = s[(t + 1) % n];
}

// Block b writes slot b; with `chained`, it also reads slot b-1, which another block of the launch writes: a
// race between blocks (the emulation runs them in order, so the read sees the write; a GPU need not).
__global__ void k_slots(int *slot, int chained)
{
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x;
    slot[b] = b;
    if (chained && b > 0) slot[b] += slot[b - 1];
}

// A grid barrier; block 0 leaves first when `early`.
__global__ void k_grid_sync(int early)
{
    if (early && blockIdx.x == 0) return;
    cg::this_grid().sync();
}

} // namespace

// A launch of `blocks` x `threads` in clusters of `cluster` blocks along x (attr: the config's one attribute).
static cudaLaunchConfig_t cluster_config(int blocks, int threads, int cluster, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)cluster, attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)blocks), cfg.blockDim = dim3((unsigned)threads), cfg.attrs = attr, cfg.numAttrs = 1;
    return cfg;
}

extern "C" cudaError_t emu_shfl_xor(int *out, int threads, int width)
{
    k_shfl_xor<<<1, threads>>>(out, width);
    return cudaGetLastError();
}

extern "C" cudaError_t emu_grid_rounds(int *slot, int *out, int blocks, int threads, int rounds)
{
    void *args[] = {&slot, &out, &rounds};
    return cudaLaunchCooperativeKernel((const void *)k_grid_rounds, dim3((unsigned)blocks), dim3((unsigned)threads),
                                       args, 0, 0);
}

extern "C" cudaError_t emu_cluster_rounds(int *slot, int *out, int blocks, int cluster, int rounds)
{
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cluster_config(blocks, 64, cluster, &attr);
    return cudaLaunchKernelEx(&cfg, k_cluster_rounds, slot, out, rounds, cluster);
}

extern "C" cudaError_t emu_static_own(int *out, int blocks)
{
    void *args[] = {&out};
    return cudaLaunchCooperativeKernel((const void *)k_static_own, dim3((unsigned)blocks), dim3(64), args, 0, 0);
}

extern "C" cudaError_t emu_divergent(int *out)
{
    k_divergent<<<1, 32>>>(out);
    return cudaGetLastError();
}

extern "C" cudaError_t emu_grid_sync(int blocks, int launch, int early)
{
    if (launch == 0) {
        k_grid_sync<<<blocks, 32>>>(early);
        return cudaGetLastError();
    }
    if (launch == 2) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = cluster_config(blocks, 32, 2, &attr);
        return cudaLaunchKernelEx(&cfg, k_grid_sync, early);
    }
    void *args[] = {&early};
    return cudaLaunchCooperativeKernel((const void *)k_grid_sync, dim3((unsigned)blocks), dim3(32), args, 0, 0);
}

extern "C" cudaError_t emu_neighbour(int *out, int threads, int sync)
{
    if (sync) k_neighbour<true><<<1, threads>>>(out);
    else k_neighbour<false><<<1, threads>>>(out);
    return cudaGetLastError();
}

extern "C" cudaError_t emu_slots(int *slot, int blocks, int chained)
{
    k_slots<<<blocks, 32>>>(slot, chained);
    return cudaGetLastError();
}
