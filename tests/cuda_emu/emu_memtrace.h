/* emu_memtrace.h — the grid runner's side of the memory-access trace (emu_memtrace.cpp): which launch, block
 * and allocation the kernels' accesses belong to. Only the trace's build (TB_EMU_MEMTRACE, make gpusim) calls it. */
#ifndef TB_CUDA_EMU_MEMTRACE_H
#define TB_CUDA_EMU_MEMTRACE_H

#include <cstddef>

namespace tbemu {
namespace memtrace {

/* A launch starts: its shape and its dynamic shared memory (smem bytes at shm); its kernel names itself
 * (kernel_name, emu.h's TBEMU_KERNEL). */
void launch_begin(unsigned long long grid, unsigned block, void *shm, size_t smem);
/* The running launch's static __shared__ arrays live in the n bytes at p (emu_runtime.cpp's shared_static). */
void statics(void *p, size_t n);
/* A block of nthreads starts. */
void block_begin(unsigned nthreads);
/* The block's threads have all passed a barrier (__syncthreads, a grid or cluster one): racecheck's accesses
 * before it and after it never race. */
void barrier();
/* The block ends: its warps' requests are counted. */
void block_end();
/* The launch ends: its counts join its kernel's. */
void launch_end();
/* The hazards the racecheck found in the launches ended so far (shared memory, and global where checked). */
unsigned long long hazards();
/* A device allocation of n bytes at p is made (cudaMalloc). */
void on_alloc(void *p, size_t n);
/* The device allocation at p is freed (cudaFree). */
void on_free(void *p);

} // namespace memtrace
} // namespace tbemu

#endif
