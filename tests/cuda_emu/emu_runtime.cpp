/* emu_runtime.cpp — the CPU emulation's grid runner (emu.h) and the CUDA runtime calls the kernels' launchers
 * and test_cuda_ops make, on host memory: enough of cudart for the ops to run, synchronously, on one CPU
 * thread. Launch shapes are checked as a GPU checks them (a bad one is the launch's error, read back by
 * cudaGetLastError, never run), so a launcher's grid arithmetic is tested too. */
#include "emu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <ucontext.h>
#include <unordered_map>
#include <vector>

namespace tbemu {

thread_local uint3 thread_idx, block_idx;
thread_local dim3 block_dim, grid_dim;

namespace {

/* What a device allows (an H200's): past these a launch fails with cudaErrorInvalidConfiguration. */
constexpr unsigned kMaxThreads = 1024, kMaxBlockZ = 64, kMaxGridYZ = 65535;
constexpr size_t kMaxDynamicShared = 227 * 1024;
constexpr size_t kStack = 256 * 1024; /* a thread's stack: kernels keep register tiles as local arrays */

thread_local cudaError_t last_error = cudaSuccess;

/* A thread's context. On x86-64 a switch is six registers and the stack pointer (tb_emu_switch below):
 * ucontext's swapcontext makes a sigprocmask system call at each, which was 60 % of the emulation's time
 * (10.6 s against 3.2 for test_cuda_ops). ASan takes it without a false report: every thread's frames
 * return before its stack is reused, so no poisoned redzone is left behind. Elsewhere, ucontext. */
#if defined(__x86_64__)
#define TB_EMU_SWITCH 1
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
#else
struct fiber {
    ucontext_t ctx;
    int done;
};
#endif

/* The block running now: its threads' fibers and the scheduler's context they switch back to. */
struct block_run {
    std::vector<fiber> threads;
#ifdef TB_EMU_SWITCH
    void *sched_sp;
#else
    ucontext_t sched;
#endif
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
#ifdef TB_EMU_SWITCH
    tb_emu_switch(&run->threads[run->cur].sp, run->sched_sp); /* never resumed */
#endif /* else uc_link returns to the scheduler */
}

/* Thread t's context, to start at thread_entry on stack (kStack bytes). */
void fiber_init(fiber &f, char *stack)
{
#ifdef TB_EMU_SWITCH
    /* tb_emu_switch pops six registers and returns into thread_entry with the stack as a call leaves it
     * (16-byte aligned before the return address the call would have pushed). */
    void **sp = reinterpret_cast<void **>(reinterpret_cast<uintptr_t>(stack + kStack) & ~uintptr_t(15));
    *--sp = nullptr;                                       /* thread_entry's return address: never used */
    *--sp = reinterpret_cast<void *>(&thread_entry);
    for (int k = 0; k < 6; k++) *--sp = nullptr;           /* rbp, rbx, r12-r15 */
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = &run->sched;
    makecontext(&f.ctx, thread_entry, 0);
#endif
    f.done = 0;
}

/* Runs thread t until it reaches a barrier or ends. */
void fiber_resume(block_run &r, unsigned t)
{
#ifdef TB_EMU_SWITCH
    tb_emu_switch(&r.sched_sp, r.threads[t].sp);
#else
    swapcontext(&r.sched, &r.threads[t].ctx);
#endif
}

uint3 thread_pos(unsigned t, dim3 b) { return uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)}; }

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
#ifdef TB_EMU_SWITCH
    tb_emu_switch(&run->threads[run->cur].sp, run->sched_sp);
#else
    swapcontext(&run->threads[run->cur].ctx, &run->sched);
#endif
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
    block_dim = block, grid_dim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx = uint3{x, y, z};
                /* The first block of a site not seen before runs as fibers; if no thread of it waited at a
                 * barrier, the kernel has none and the rest run as plain calls (a barrier then aborts). */
                r.direct = known == 0 || (known == -1 && (x | y | z) != 0 && !r.waited);
                if (r.direct) {
                    for (unsigned t = 0; t < nt; t++) {
                        thread_idx = thread_pos(t, block);
                        body(ctx);
                    }
                } else {
                    block_fibers(r, (unsigned)nt);
                }
            }
    run = saved;
    std::lock_guard<std::mutex> g(learned_mu);
    learned[key] = r.waited || known == 1;
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
cudaError_t cudaMalloc(void **p, size_t n)
{
    /* 256-byte aligned, as cudaMalloc's, and n bytes exactly, so that ASan sees a read past the end. */
    return posix_memalign(p, 256, n ? n : 1) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind)
{
    if (n) std::memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t)
{
    return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
    if (n) std::memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) { return cudaMemset(d, v, n); }

} // extern "C"
