/* emu_selftest.h — the launchers of emu_selftest.cu's kernels, for tests/cuda_emu/test_emu_runtime.c: each returns the
 * launch's error. Pointers are device memory (host memory on the emulation). */
#ifndef TB_CUDA_EMU_SELFTEST_H
#define TB_CUDA_EMU_SELFTEST_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[k·threads + t] = __shfl_xor_sync(all, t·10, 1 << k, width) for k < 5, in one block of `threads`. */
cudaError_t emu_shfl_xor(int *out, int threads, int width);
/* A cooperative launch: `rounds` rounds of each block writing slot[b], a grid barrier, and reading block
 * b+1's into out[round·blocks + b]. */
cudaError_t emu_grid_rounds(int *slot, int *out, int blocks, int threads, int rounds);
/* As emu_grid_rounds in clusters of `cluster` blocks (cudaLaunchKernelEx), each reading the next block of its
 * own cluster after a cluster barrier. */
cudaError_t emu_cluster_rounds(int *slot, int *out, int blocks, int cluster, int rounds);
/* A cooperative launch: out[2b] the first byte block b reads of a static shared array it never wrote,
 * out[2b+1] what it reads back of its own index after every block wrote its own and a grid barrier. */
cudaError_t emu_static_own(int *out, int blocks);
/* One warp whose halves wait at different barriers (the emulation stops the process). */
cudaError_t emu_divergent(int *out);
/* A grid barrier in a plain launch (launch 0), a cooperative one (1) or one of 2-block clusters (2); block 0
 * leaves before it when early. */
cudaError_t emu_grid_sync(int blocks, int launch, int early);

/* One block of `threads` (≤ 1024): out[t] = what thread t+1 (mod threads) wrote to shared memory, after a
 * barrier when sync, else racing it. */
cudaError_t emu_neighbour(int *out, int threads, int sync);
/* `blocks` blocks, block b writing slot[b]; chained: each also reads slot[b-1] (another block's write). */
cudaError_t emu_slots(int *slot, int blocks, int chained);

#ifdef __cplusplus
}
#endif

#endif
