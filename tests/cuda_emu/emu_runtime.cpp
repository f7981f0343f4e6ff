/* emu_runtime.cpp — the CPU emulation's grid runner (emu.h) and the CUDA runtime calls the cuda device makes
 * (its kernels' launchers, its C glue, its tests), on host memory: enough of cudart for the device to run,
 * synchronously, each host thread's launches on that thread. Launch shapes are checked as a GPU checks them (a
 * bad one is the launch's error, read back by cudaGetLastError, never run), so a launcher's grid arithmetic
 * is tested too. */
#include "emu.h"
#ifdef TB_EMU_MEMTRACE
#include "emu_memtrace.h"
#define TB_MEMTRACE(call) tbemu::memtrace::call
#else
#define TB_MEMTRACE(call) ((void)0)
#endif

extern "C" {
#include "clock.h" /* tb_now_s: the events' host clock */
}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tbemu {

namespace {

/* What a device allows (an H200's): past these a launch fails with cudaErrorInvalidConfiguration. */
constexpr unsigned kMaxThreads = 1024, kMaxBlockZ = 64, kMaxGridYZ = 65535;
constexpr size_t kMaxDynamicShared = 227 * 1024;
constexpr size_t kStack = 256 * 1024; /* a thread's stack: kernels keep register tiles as local arrays */

thread_local cudaError_t last_error = cudaSuccess;

/* A thread's context: a switch is six registers and the stack pointer (tb_emu_switch below); ucontext's
 * swapcontext makes a sigprocmask system call at each, which was 60 % of the emulation's time (10.6 s
 * against 3.2 for test_cuda_ops). ASan takes it without a false report: every thread's frames return before
 * its stack is reused, so no poisoned redzone is left behind. x86-64 only, as cuda_emu.cmake builds it. */
#if !defined(__x86_64__)
#error "the CUDA emulation's thread switch is x86-64's (tests/cuda_emu/cuda_emu.cmake builds it only there)"
#endif
extern "C" void tb_emu_switch(void **save_sp, void *to_sp);
asm(".text\n"
    ".globl tb_emu_switch\n"
    ".type tb_emu_switch,@function\n"
    "tb_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size tb_emu_switch,.-tb_emu_switch\n");
struct fiber {
    void *sp;
    int done;
};

/* The block running now: its threads' fibers and the scheduler's context they switch back to. */
struct block_run {
    std::vector<fiber> threads;
    void *sched_sp;
    unsigned cur;
    int direct;        /* threads run as plain calls: the kernel never waited at a barrier */
    int waited;        /* a thread of this launch reached a barrier */
    int or_pending, or_result; /* __syncthreads_or: this barrier's OR, the last barrier's */
    void (*body)(void *);
    void *ctx;
    std::vector<unsigned char> smem;
};
thread_local block_run *run;

/* Threads' stacks, kept for the next launch: allocating them a launch (mmap and munmap at this size) was
 * most of the emulation's time. Freed when the OS thread ends. */
struct stack_pool {
    std::vector<char *> stacks;
    ~stack_pool()
    {
        for (char *s : stacks) std::free(s);
    }
};
thread_local stack_pool pool;

/* Where a thread starts: the kernel's body, then back to the scheduler for good. */
void thread_entry()
{
    run->body(run->ctx);
    run->threads[run->cur].done = 1;
    tb_emu_switch(&run->threads[run->cur].sp, run->sched_sp); /* never resumed */
}

/* Thread t's context, to start at thread_entry on stack (kStack bytes). */
void fiber_init(fiber &f, char *stack)
{
    /* tb_emu_switch pops six registers and returns into thread_entry with the stack as a call leaves it
     * (16-byte aligned before the return address the call would have pushed). */
    void **sp = reinterpret_cast<void **>(reinterpret_cast<uintptr_t>(stack + kStack) & ~uintptr_t(15));
    *--sp = nullptr;                                       /* thread_entry's return address: never used */
    *--sp = reinterpret_cast<void *>(&thread_entry);
    for (int k = 0; k < 6; k++) *--sp = nullptr;           /* rbp, rbx, r12-r15 */
    f.sp = sp;
    f.done = 0;
}

/* Runs thread t until it reaches a barrier or ends. */
void fiber_resume(block_run &r, unsigned t)
{
    tb_emu_switch(&r.sched_sp, r.threads[t].sp);
}

uint3 thread_pos(unsigned t, uint3 b) { return uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)}; }

/* One block as fibers: each thread runs until it reaches a barrier or ends; a pass over every live thread
 * brings them all to the barrier, the next pass past it. */
void block_fibers(block_run &r, unsigned n)
{
    while (pool.stacks.size() < n) pool.stacks.push_back(static_cast<char *>(std::malloc(kStack)));
    r.threads.assign(n, fiber{});
    for (unsigned t = 0; t < n; t++) fiber_init(r.threads[t], pool.stacks[t]);
    for (unsigned live = n; live > 0;) {
        live = 0;
        for (unsigned t = 0; t < n; t++) {
            if (r.threads[t].done) continue;
            r.cur = t;
            thread_idx = thread_pos(t, block_dim);
            fiber_resume(r, t);
            live += !r.threads[t].done;
        }
        r.or_result = r.or_pending, r.or_pending = 0;
    }
}

std::mutex learned_mu;
std::unordered_map<const void *, int> learned; /* launch site -> 1: it waits at barriers, 0: it never did */

} // namespace

void *dynamic_shared() { return run && !run->smem.empty() ? run->smem.data() : nullptr; }

void sync_block()
{
    if (!run || run->direct) {
        std::fprintf(stderr, "cuda emulation: __syncthreads in a kernel whose first block ran without one\n");
        std::abort();
    }
    run->waited = 1;
    tb_emu_switch(&run->threads[run->cur].sp, run->sched_sp);
}

int sync_block_or(int p)
{
    if (run && !run->direct) run->or_pending |= p != 0;
    sync_block();
    return run->or_result;
}

void run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx, const void *key)
{
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z || nt > kMaxThreads ||
        block.z > kMaxBlockZ || grid.y > kMaxGridYZ || grid.z > kMaxGridYZ || grid.x > 0x7fffffffu) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (smem > kMaxDynamicShared) {
        last_error = cudaErrorInvalidValue;
        return;
    }
    int known;
    {
        std::lock_guard<std::mutex> g(learned_mu);
        auto it = learned.find(key);
        known = it == learned.end() ? -1 : it->second;
    }
    block_run r{};
    r.body = body, r.ctx = ctx;
    r.smem.assign(smem, 0xA5); /* not zeros: a kernel must not read shared memory it did not write */
    block_run *saved = run;
    run = &r;
    block_dim = uint3{block.x, block.y, block.z}, grid_dim = uint3{grid.x, grid.y, grid.z};
    TB_MEMTRACE(launch_begin((unsigned long long)grid.x * grid.y * grid.z, (unsigned)nt, r.smem.data(), smem));
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx = uint3{x, y, z};
                /* The first block of a site not seen before runs as fibers; if no thread of it waited at a
                 * barrier, the kernel has none and the rest run as plain calls (a barrier then aborts). */
                r.direct = known == 0 || (known == -1 && (x | y | z) != 0 && !r.waited);
                TB_MEMTRACE(block_begin((unsigned)nt));
                if (r.direct) {
                    for (unsigned tz = 0; tz < block.z; tz++)
                        for (unsigned ty = 0; ty < block.y; ty++)
                            for (unsigned tx = 0; tx < block.x; tx++) {
                                thread_idx = uint3{tx, ty, tz};
                                body(ctx);
                            }
                } else {
                    block_fibers(r, (unsigned)nt);
                }
                TB_MEMTRACE(block_end());
            }
    TB_MEMTRACE(launch_end());
    run = saved;
    std::lock_guard<std::mutex> g(learned_mu);
    learned[key] = r.waited || known == 1;
}

/* Streams: everything runs as it is issued, so a stream is only whether it is capturing, and into what. */
struct graph {
    std::vector<std::function<void()>> work;
};
struct stream {
    graph *capture; /* non-null while capturing */
};

bool capturing(cudaStream_t st) { return st && reinterpret_cast<stream *>(st)->capture; }

void record(cudaStream_t st, std::function<void()> work)
{
    reinterpret_cast<stream *>(st)->capture->work.push_back(std::move(work));
}

} // namespace tbemu

/* ---- the CUDA runtime calls the ops and their tests make ---- */

extern "C" {

cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = tbemu::last_error;
    tbemu::last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return tbemu::last_error; }
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "emulated CUDA error";
    }
}
const char *cudaGetErrorName(cudaError_t e) { return cudaGetErrorString(e); }
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
/* Device allocations and their sizes: cudaMemGetInfo's free is the emulated memory less what is held. */
static std::mutex alloc_mu;
static std::unordered_map<void *, size_t> allocs;
static size_t alloc_bytes;

cudaError_t cudaMalloc(void **p, size_t n)
{
    /* 256-byte aligned, as cudaMalloc's, and n bytes exactly, so that ASan sees a read past the end. */
    if (posix_memalign(p, 256, n ? n : 1) != 0) return tbemu::last_error = cudaErrorMemoryAllocation;
    std::lock_guard<std::mutex> g(alloc_mu);
    allocs[*p] = n, alloc_bytes += n;
    TB_MEMTRACE(on_alloc(*p, n));
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    {
        std::lock_guard<std::mutex> g(alloc_mu);
        auto it = allocs.find(p);
        if (it == allocs.end()) return tbemu::last_error = cudaErrorInvalidValue; /* not ours, or freed twice */
        alloc_bytes -= it->second;
        allocs.erase(it);
        TB_MEMTRACE(on_free(p));
    }
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind)
{
    if (n) std::memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st)
{
    if (tbemu::capturing(st)) {
        tbemu::record(st, [d, s, n] {
            if (n) std::memmove(d, s, n);
        });
        return cudaSuccess;
    }
    return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
    if (n) std::memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
    if (tbemu::capturing(st)) {
        tbemu::record(st, [d, v, n] {
            if (n) std::memset(d, v, n);
        });
        return cudaSuccess;
    }
    return cudaMemset(d, v, n);
}

/* Pinned host memory is host memory (not the device's: no count). */
cudaError_t cudaMallocHost(void **p, size_t n)
{
    return posix_memalign(p, 256, n ? n : 1) == 0 ? cudaSuccess : (tbemu::last_error = cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p)
{
    std::free(p);
    return cudaSuccess;
}

/* What the emulated device says of itself: an H200's shape (132 SMs, compute capability 9.0, 227 KiB of shared
 * memory a block), no cooperative launch (blocks run one at a time), 8 GiB of memory. */
static const size_t kEmuMemory = size_t(8) << 30;
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    std::lock_guard<std::mutex> g(alloc_mu);
    *free_b = kEmuMemory - (alloc_bytes < kEmuMemory ? alloc_bytes : kEmuMemory), *total = kEmuMemory;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int)
{
    switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrCooperativeLaunch: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    default: *v = 0; break;
    }
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int)
{
    *p = cudaDeviceProp{};
    std::snprintf(p->name, sizeof p->name, "CUDA emulation on the CPU");
    p->totalGlobalMem = kEmuMemory;
    p->multiProcessorCount = 132;
    p->major = 9, p->minor = 0;
    p->sharedMemPerBlockOptin = 232448;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *, int, size_t, unsigned int)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *, const cudaLaunchConfig_t *)
{
    *n = 0;
    return cudaSuccess;
}
/* The launches whose blocks must run at once (emu_cg.h). */
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *, void **) { return cudaErrorNotSupported; }
cudaError_t cudaLaunchCooperativeKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t)
{
    return cudaErrorNotSupported;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int)
{
    *st = reinterpret_cast<cudaStream_t>(new tbemu::stream{});
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *st) { return cudaStreamCreateWithFlags(st, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t st)
{
    delete reinterpret_cast<tbemu::stream *>(st);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode)
{
    if (!st) return cudaErrorStreamCaptureUnsupported;
    tbemu::stream *s = reinterpret_cast<tbemu::stream *>(st);
    if (s->capture) return cudaErrorIllegalState;
    s->capture = new tbemu::graph{};
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
    tbemu::stream *s = st ? reinterpret_cast<tbemu::stream *>(st) : nullptr;
    if (!s || !s->capture) return cudaErrorIllegalState;
    *g = reinterpret_cast<cudaGraph_t>(s->capture);
    s->capture = nullptr;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
    *e = reinterpret_cast<cudaGraphExec_t>(new tbemu::graph(*reinterpret_cast<tbemu::graph *>(g)));
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t)
{
    for (auto &w : reinterpret_cast<tbemu::graph *>(e)->work) w();
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete reinterpret_cast<tbemu::graph *>(g);
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    delete reinterpret_cast<tbemu::graph *>(e);
    return cudaSuccess;
}

/* Events: the host's clock when recorded (the work before it has run by then). */
struct tbemu_event {
    double ms;
};
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int)
{
    *e = reinterpret_cast<cudaEvent_t>(new tbemu_event{0.0});
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete reinterpret_cast<tbemu_event *>(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
    tbemu_event *ev = reinterpret_cast<tbemu_event *>(e);
    if (tbemu::capturing(st)) {
        tbemu::record(st, [ev] { ev->ms = 1e3 * tb_now_s(); });
        return cudaSuccess;
    }
    ev->ms = 1e3 * tb_now_s();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(reinterpret_cast<tbemu_event *>(b)->ms - reinterpret_cast<tbemu_event *>(a)->ms);
    return cudaSuccess;
}

} // extern "C"
