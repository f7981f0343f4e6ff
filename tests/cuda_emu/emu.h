/* emu.h — CUDA kernels run on the CPU: the shim force-included (-include) into each cuda .cu file that
 * tests/cuda_emu/emu_launch.py made host C++, so the cuda device's tests check its kernels' logic (indexing,
 * launch shapes, fp16/bf16 rounding, barriers) on a machine without a GPU, and under ASan their bounds.
 *
 * A launch runs its grid block by block in order; a block's threads run one after another, each on its own
 * stack (a fiber), switching at a barrier (__syncthreads, a warp shuffle, a grid or cluster barrier), so a
 * barrier means what it means on a GPU, and threads that wait at different ones stop the process with a line
 * saying so. A cooperative launch (cudaLaunchCooperativeKernel) or one of thread-block clusters runs every
 * block at once, each on its own OS thread, so that grid and cluster barriers can be reached. A block's
 * __shared__ arrays, static and dynamic, are its own memory, filled with 0xA5 bytes as it starts (a kernel
 * must not read what it did not write). Device memory is host memory; a stream runs what it is given at
 * once, unless it is capturing a graph (emu_runtime.cpp). What it cannot show: races between a block's
 * threads (they never run at once), speed. Never part of bench: a test-only build (bench_emu is bench on it,
 * for tests and rehearsals).
 */
#ifndef TB_CUDA_EMU_H
#define TB_CUDA_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <functional>
#include <memory>
#include <tuple>
#include <utility>

namespace tbemu {

/* The position of the thread running now, set by the grid runner before each switch into a thread. Inline
 * and of a type without a constructor (uint3, not dim3): every unit sees the definition, so no TLS wrapper
 * is called at each use (UBSan at -O2 read an extern one's address as null). */
inline thread_local uint3 thread_idx, block_idx, block_dim, grid_dim;

/* Runs body(ctx) once for every thread of the grid (blocks in order, threads as fibers); key names the
 * launch site (whether its kernel ever waits at a barrier is learned on its first launch: the first block
 * runs as fibers, the rest as plain calls where none waited). Sets the last error on a bad configuration,
 * as a launch does. */
void run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx, const void *key);
/* The dynamic shared memory of the launch running now. */
void *dynamic_shared();
/* __syncthreads: switches to the block's next thread; returns when every thread of the block got here. */
void sync_block();
/* A warp shuffle's exchange: puts this thread's size bytes at v where its warp's lanes read them, waits for
 * every lane of the warp, and returns where lane (this lane ^ lane_mask) put its own (this lane's, past the
 * width's segment or the block's end). Valid until the thread's next shuffle. */
const void *shfl_xor_exchange(const void *v, size_t size, int lane_mask, int width);
/* cooperative_groups' grid and cluster barriers (emu_cg.h): return when every block of the grid, or of this
 * block's cluster, got here; outside a launch whose blocks all run at once, stop the process saying so. */
void sync_grid();
void sync_cluster();
/* A static __shared__ declaration as emu_launch.py rewrites it: size bytes of the running block's own shared
 * memory, the same for every thread of the block that asks with this key (the declaration's). */
void *shared_static(const void *key, size_t size);
/* Runs body(ctx) for every thread of the grid with all blocks at once, each on its own OS thread (blocks
 * of cluster_dim a cluster); cooperative: at most as many blocks as the device holds at once. Returns the
 * launch's error (a bad configuration: nothing runs). */
cudaError_t run_grid_resident(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx, dim3 cluster_dim,
                              bool cooperative);

/* __syncthreads_or(p): the barrier, then whether p was nonzero in any thread of the block. */
int sync_block_or(int p);

template <class F> struct site {
    static const char key; /* one address a launch site: the key run_grid learns barriers by */
};
template <class F> const char site<F>::key = 0;

/* Whether stream st is being captured into a graph; record adds work to its graph instead of running it
 * (cudaGraphLaunch runs the graph's work in order). */
bool capturing(cudaStream_t st);
void record(cudaStream_t st, std::function<void()> work);

/* Runs kernel f (a callable) on args, the launch's copy of its arguments (as the GPU's): block by block
 * (run_grid; key names the launch site), or every block at once where they must be resident together
 * (cooperative, or in clusters: run_grid_resident). A stream capturing a graph records the launch instead,
 * the copy kept with it. Returns the launch's error. */
template <class F, class Args>
cudaError_t launch_call(F f, Args args, dim3 grid, dim3 block, size_t smem, cudaStream_t st, const void *key,
                        dim3 cluster_dim = dim3(1, 1, 1), bool cooperative = false)
{
    struct call {
        F f;
        Args args;
    };
    void (*body)(void *) = [](void *p) { std::apply(static_cast<call *>(p)->f, static_cast<call *>(p)->args); };
    const bool together = cooperative || cluster_dim.x * cluster_dim.y * cluster_dim.z > 1;
    auto go = [=](call *c) -> cudaError_t {
        if (together) return run_grid_resident(grid, block, smem, body, c, cluster_dim, cooperative);
        run_grid(grid, block, smem, body, c, key);
        return cudaPeekAtLastError();
    };
    if (capturing(st)) {
        auto c = std::make_shared<call>(call{f, std::move(args)});
        record(st, [c, go] { (void)go(c.get()); });
        return cudaSuccess;
    }
    call c{f, std::move(args)};
    return go(&c);
}

template <class F> struct launcher {
    F call_kernel;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <class... A> void operator()(A &&...a) const
    {
        (void)launch_call(call_kernel, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...), grid, block, smem, stream,
                          &site<F>::key);
    }
};

/* kernel<<<grid, block, smem, stream>>> as emu_launch.py rewrites it: the launcher, called with the arguments. */
template <class F> launcher<F> launch(F call_kernel, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t st = 0)
{
    return launcher<F>{call_kernel, grid, block, smem, st};
}

/* A kernel launched through the runtime's API (cudaLaunchCooperativeKernel, cudaLaunchKernelEx, which
 * emu_launch.py rewrites to the two below): launch_call with the kernel's own address as its site's key. */
template <class... P, size_t... I>
std::tuple<P...> unpack_args(void **args, std::index_sequence<I...>)
{
    return std::tuple<P...>(*static_cast<P *>(args[I])...);
}

/* cudaLaunchCooperativeKernel((const void *)k, grid, block, args, smem, stream), the kernel's type kept. */
template <class... P>
cudaError_t launch_cooperative(void (*k)(P...), dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t st)
{
    return launch_call(k, unpack_args<P...>(args, std::index_sequence_for<P...>{}), grid, block, smem, st,
                       reinterpret_cast<const void *>(k), dim3(1, 1, 1), true);
}

/* cudaLaunchKernelEx(&config, k, args...): its grid, block, shared memory, stream, cluster dimension and
 * cooperative attribute (any other attribute: cudaErrorNotSupported, not silently ignored). */
template <class... P, class... A> cudaError_t launch_ex(const cudaLaunchConfig_t *cfg, void (*k)(P...), A &&...a)
{
    dim3 cluster_dim(1, 1, 1);
    bool cooperative = false;
    for (unsigned i = 0; i < cfg->numAttrs; i++) {
        const cudaLaunchAttribute &at = cfg->attrs[i];
        if (at.id == cudaLaunchAttributeClusterDimension)
            cluster_dim = dim3(at.val.clusterDim.x, at.val.clusterDim.y, at.val.clusterDim.z);
        else if (at.id == cudaLaunchAttributeCooperative)
            cooperative = at.val.cooperative != 0;
        else
            return cudaErrorNotSupported;
    }
    return launch_call(k, std::tuple<P...>(std::forward<A>(a)...), cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes,
                       cfg->stream, reinterpret_cast<const void *>(k), cluster_dim, cooperative);
}

} // namespace tbemu

/* threadIdx, blockIdx, blockDim and gridDim: emu_launch.py names tbemu's (not a macro here: a launch
 * configuration's own .blockDim and .gridDim fields keep their names). */
#define __launch_bounds__(...)
/* The first statement of every kernel (emu_launch.py puts it there): the memory trace's build learns the
 * kernel's name and template arguments from it (a launch site spells them only in part: macros, templates). */
#ifdef TB_EMU_MEMTRACE
namespace tbemu {
namespace memtrace {
void kernel_name(const char *pretty);
}
} // namespace tbemu
#define TBEMU_KERNEL() tbemu::memtrace::kernel_name(__PRETTY_FUNCTION__)
#else
#define TBEMU_KERNEL() ((void)0)
#endif
#define __syncthreads() tbemu::sync_block()
#define __syncthreads_or(p) tbemu::sync_block_or(p)

/* cuda_runtime.h's templates over a kernel that it declares for nvcc only: attributes as the emulation has
 * them (its host templates, cudaLaunchKernelEx among them, call the C entry points emu_runtime.cpp defines). */
template <class T> cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int) { return cudaSuccess; }
template <class T> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, T *)
{
    *a = cudaFuncAttributes{};
    a->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
template <class T> cudaError_t cudaOccupancyMaxActiveClusters(int *n, T k, const cudaLaunchConfig_t *cfg)
{
    return cudaOccupancyMaxActiveClusters(n, reinterpret_cast<const void *>(k), cfg);
}

/* The device intrinsics the kernels use, as their host meaning (round-to-nearest arithmetic is the host's). */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
/* glibc declares __expf and __logf itself (its own exp and log): macros, not functions, over those. */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline T __ldcg(const T *p) { return *p; }
/* A warp shuffle: every lane of the warp exchanges at once (a barrier of the warp's fibers). The mask is taken
 * to be the whole warp's, as every shuffle of ours has it. */
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a shuffle moves at most 8 bytes");
    T r;
    std::memcpy(&r, tbemu::shfl_xor_exchange(&v, sizeof v, lane_mask, width), sizeof r);
    return r;
}
/* Atomics: plain read-modify-writes (a block's threads never run at once; blocks that do run at once on
 * threads do not use them), outside make gpusim's trace (no_sanitize: its racecheck would call two blocks'
 * atomics on one word a race). */
template <class T> __attribute__((no_sanitize_thread)) static inline T atomicAdd(T *p, T v)
{
    const T old = *p;
    *p = old + v;
    return old;
}
template <class T> __attribute__((no_sanitize_thread)) static inline T atomicOr(T *p, T v)
{
    const T old = *p;
    *p = old | v;
    return old;
}
using std::isfinite;
using std::max;
using std::min;

#endif
