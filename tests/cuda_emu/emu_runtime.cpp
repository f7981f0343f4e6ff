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

#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tbemu {

namespace {

/* What a device allows (an H200's): past these a launch fails with cudaErrorInvalidConfiguration. */
constexpr unsigned kMaxThreads = 1024, kMaxBlockZ = 64, kMaxGridYZ = 65535;
constexpr unsigned kSMs = 132;       /* a cooperative launch's blocks, at most: one a multiprocessor */
constexpr unsigned kMaxCluster = 16; /* a cluster's blocks, at most (the H200's non-portable size) */
constexpr size_t kMaxDynamicShared = 227 * 1024;
constexpr size_t kStaticShared = 48 * 1024; /* a block's static __shared__ arrays, at most (CUDA's limit) */
constexpr size_t kStack = 256 * 1024;       /* a thread's stack: kernels keep register tiles as local arrays */

thread_local cudaError_t last_error = cudaSuccess;

/* Stops the process with one line: what a GPU would do wrong (hang, fail) that the emulation cannot carry on
 * past. */
[[noreturn]] __attribute__((format(printf, 1, 2))) void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::fputs("cuda emulation: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::abort();
}

/* ASan's poisoning where its runtime is linked (the emulated tests; make gpusim's build has none): a block's
 * static shared memory between and past its arrays is poisoned, so a kernel indexing past one is reported. */
extern "C" void __asan_poison_memory_region(void const volatile *, size_t) __attribute__((weak));
extern "C" void __asan_unpoison_memory_region(void const volatile *, size_t) __attribute__((weak));
void poison(const void *p, size_t n)
{
    if (__asan_poison_memory_region) __asan_poison_memory_region(p, n);
}
void unpoison(const void *p, size_t n)
{
    if (__asan_unpoison_memory_region) __asan_unpoison_memory_region(p, n);
}

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

/* Where a thread is: running (or able to), waiting at one of the barriers, or ended. */
enum : unsigned char { kRunning, kAtBlock, kAtWarp, kAtGrid, kAtCluster, kDone };
struct fiber {
    void *sp;
    unsigned char state;
    unsigned char shfl_gen; /* its shuffles so far, mod 2: which of the block's two slot rows it writes */
};

/* The barriers of a launch whose blocks run at once (run_grid_resident), each block on its own OS thread: the
 * grid's and each cluster's. A group's barrier opens when every block of it has arrived. A block that ends
 * while others of its group wait, or before they come, would leave a GPU hanging: the process stops. */
struct group {
    unsigned size, arrived, ended;
    unsigned long long gen; /* barriers opened so far */
};
struct resident {
    std::mutex mu;
    std::condition_variable cv;
    bool cooperative; /* the whole grid at once: its barrier may be reached (else clusters one at a time) */
    group grid;
    std::vector<group> clusters;
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
    unsigned char *statics;   /* static __shared__ arrays (kStaticShared bytes, allocated at the first) */
    size_t statics_used;
    std::vector<std::pair<const void *, size_t>> static_vars; /* declaration's key -> offset, this block's */
    std::vector<uint64_t> shfl; /* two rows of a slot a thread: what each put in its last two shuffles */
    resident *together;         /* the blocks running at once, or null (one block at a time) */
    unsigned cluster;           /* this block's cluster in together->clusters */
    ~block_run() { std::free(statics); }
};
thread_local block_run *run;

/* A new block starts: no static shared array yet (each is filled as the block first declares it). */
void statics_reset(block_run &r)
{
    if (r.statics_used) poison(r.statics, r.statics_used); /* past it: poisoned since the arena was made */
    r.statics_used = 0;
    r.static_vars.clear();
}

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
    run->threads[run->cur].state = kDone;
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
    f.state = kRunning;
    f.shfl_gen = 0;
}

/* Runs thread t until it reaches a barrier or ends. */
void fiber_resume(block_run &r, unsigned t)
{
    tb_emu_switch(&r.sched_sp, r.threads[t].sp);
}

/* The running thread waits at barrier `why`: back to the scheduler until release() opens it. */
void park(unsigned char why)
{
    run->waited = 1;
    fiber &f = run->threads[run->cur];
    f.state = why;
    tb_emu_switch(&f.sp, run->sched_sp);
}

uint3 thread_pos(unsigned t, uint3 b) { return uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)}; }

/* This block arrives at its group's barrier (the grid's or its cluster's): returns when the group's every
 * block has. */
void arrive(resident &c, group &g, const char *what)
{
    std::unique_lock<std::mutex> lk(c.mu);
    const unsigned long long gen = g.gen;
    if (!g.ended && ++g.arrived == g.size) {
        g.arrived = 0, g.gen++;
        c.cv.notify_all();
        return;
    }
    c.cv.wait(lk, [&] { return g.gen != gen || g.ended; });
    if (g.gen == gen)
        die("block (%u,%u,%u) waits at %s that a block which ended never reached (a GPU would hang)", block_idx.x,
            block_idx.y, block_idx.z, what);
}

/* This block has ended: a group's barrier that others wait at can never open. */
void ended(resident &c, group &g)
{
    std::lock_guard<std::mutex> lk(c.mu);
    g.ended++;
    if (g.arrived) c.cv.notify_all(); /* they stop the process, naming the barrier */
}

/* Whether every live lane of the warp of threads [w, e) waits at a shuffle: then it opens it (and says so). */
bool open_warp(block_run &r, unsigned w, unsigned e)
{
    unsigned waiting = 0, other = 0;
    for (unsigned l = w; l < e; l++) {
        waiting += r.threads[l].state == kAtWarp;
        other += r.threads[l].state != kAtWarp && r.threads[l].state != kDone;
    }
    if (!waiting || other) return false;
    for (unsigned l = w; l < e; l++)
        if (r.threads[l].state == kAtWarp) r.threads[l].state = kRunning;
    return true;
}

/* After a pass over the block's threads (each ran to its next barrier or its end): opens the barriers whose
 * every thread waits there — a warp's shuffle, then __syncthreads, a grid or a cluster barrier, which every
 * live thread of the block must have reached. Returns false once every thread has ended. Threads waiting at
 * different barriers with none to open would hang a GPU: the process stops, saying where they wait. */
bool release(block_run &r)
{
    const unsigned n = (unsigned)r.threads.size();
    unsigned at[kDone + 1] = {};
    for (const fiber &f : r.threads) at[f.state]++;
    const unsigned live = n - at[kDone];
    if (!live) return false;
    bool opened = false;
    for (unsigned w = 0; at[kAtWarp] && w < n; w += 32) opened |= open_warp(r, w, std::min(n, w + 32));
    if (opened) return true;
    if (at[kAtBlock] == live) {
        r.or_result = r.or_pending, r.or_pending = 0;
    } else if (at[kAtGrid] == live) {
        arrive(*r.together, r.together->grid, "a grid barrier");
    } else if (at[kAtCluster] == live) {
        arrive(*r.together, r.together->clusters[r.cluster], "a cluster barrier");
    } else {
        die("block (%u,%u,%u): its threads wait at different barriers (%u at __syncthreads, %u at a warp shuffle "
            "with lanes elsewhere, %u at a grid barrier, %u at a cluster barrier; %u ended): a GPU would hang",
            block_idx.x, block_idx.y, block_idx.z, at[kAtBlock], at[kAtWarp], at[kAtGrid], at[kAtCluster], at[kDone]);
    }
    TB_MEMTRACE(barrier());
    for (fiber &f : r.threads)
        if (f.state != kDone) f.state = kRunning;
    return true;
}

/* One block as fibers: each pass runs every thread that can run until it reaches a barrier or ends, a warp at
 * a time, each warp on past its shuffles as its lanes all reach them (a pass of the whole block a shuffle made
 * the persistent kernel's emulation twice as slow); release() then opens the barriers they all reached. */
void block_fibers(block_run &r, unsigned n)
{
    while (pool.stacks.size() < n) pool.stacks.push_back(static_cast<char *>(std::malloc(kStack)));
    r.threads.assign(n, fiber{});
    r.shfl.assign(2 * size_t(n), 0);
    for (unsigned t = 0; t < n; t++) fiber_init(r.threads[t], pool.stacks[t]);
    do {
        for (unsigned w = 0; w < n; w += 32) {
            const unsigned e = std::min(n, w + 32);
            do {
                for (unsigned t = w; t < e; t++) {
                    if (r.threads[t].state != kRunning) continue;
                    r.cur = t;
                    thread_idx = thread_pos(t, block_dim);
                    fiber_resume(r, t);
                }
            } while (open_warp(r, w, e));
        }
    } while (release(r));
}

std::mutex learned_mu;
std::unordered_map<const void *, int> learned; /* launch site -> 1: it waits at barriers, 0: it never did */

/* The OS threads resident launches run their blocks on, kept for the next (each keeps its fibers' stacks in
 * its stack_pool): a launch making 49 threads and their 12,544 stacks anew took 3.7 s under ASan, most of it
 * the system's. */
class worker_pool {
public:
    /* Runs fn(i) for i < n, each on its own thread, and returns when all have returned. */
    void run(unsigned n, const std::function<void(unsigned)> &fn)
    {
        std::unique_lock<std::mutex> lk(mu);
        while (threads.size() < n) {
            const unsigned i = (unsigned)threads.size();
            threads.emplace_back([this, i] { serve(i); });
        }
        job = &fn, n_job = n, n_done = 0, gen++;
        cv.notify_all();
        cv_done.wait(lk, [&] { return n_done == n_job; });
        job = nullptr;
    }
    ~worker_pool()
    {
        {
            std::lock_guard<std::mutex> lk(mu);
            stop = true;
        }
        cv.notify_all();
        for (std::thread &t : threads) t.join();
    }

private:
    void serve(unsigned i)
    {
        std::unique_lock<std::mutex> lk(mu);
        for (unsigned long long seen = 0;;) {
            cv.wait(lk, [&] { return stop || gen != seen; });
            if (stop) return;
            seen = gen;
            if (i >= n_job) continue;
            const std::function<void(unsigned)> *fn = job;
            lk.unlock();
            (*fn)(i);
            lk.lock();
            if (++n_done == n_job) cv_done.notify_one();
        }
    }
    std::mutex mu;
    std::condition_variable cv, cv_done;
    std::vector<std::thread> threads;
    const std::function<void(unsigned)> *job = nullptr;
    unsigned n_job = 0, n_done = 0;
    unsigned long long gen = 0;
    bool stop = false;
};
worker_pool workers;
std::mutex resident_mu; /* one resident launch at a time: the pool's threads are its blocks */

/* A launch's shape as a GPU checks it: cudaSuccess, or the error the launch fails with. */
cudaError_t check_launch(dim3 grid, dim3 block, size_t smem)
{
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z || nt > kMaxThreads ||
        block.z > kMaxBlockZ || grid.y > kMaxGridYZ || grid.z > kMaxGridYZ || grid.x > 0x7fffffffu)
        return cudaErrorInvalidConfiguration;
    return smem > kMaxDynamicShared ? cudaErrorInvalidValue : cudaSuccess;
}

} // namespace

void *dynamic_shared() { return run && !run->smem.empty() ? run->smem.data() : nullptr; }

void *shared_static(const void *key, size_t size)
{
    block_run &r = *run;
    for (const auto &v : r.static_vars)
        if (v.first == key) return r.statics + v.second;
    const size_t at = (r.statics_used + 127) & ~size_t(127); /* each array on its own 128 bytes: a redzone apart */
    if (at + size > kStaticShared) die("a block's static __shared__ arrays exceed CUDA's 48 KiB");
    if (!r.statics) {
        r.statics = static_cast<unsigned char *>(std::aligned_alloc(128, kStaticShared));
        if (!r.statics) die("no memory for a block's static shared arrays");
        poison(r.statics, kStaticShared);
        TB_MEMTRACE(statics(r.statics, kStaticShared));
    }
    unpoison(r.statics + at, size);
    std::memset(r.statics + at, 0xA5, size); /* not zeros: a kernel must not read shared memory it did not write */
    r.static_vars.emplace_back(key, at);
    r.statics_used = at + size;
    return r.statics + at;
}

void sync_block()
{
    if (!run || run->direct) die("__syncthreads in a kernel whose first block ran without one");
    park(kAtBlock);
}

int sync_block_or(int p)
{
    if (run && !run->direct) run->or_pending |= p != 0;
    sync_block();
    return run->or_result;
}

const void *shfl_xor_exchange(const void *v, size_t size, int lane_mask, int width)
{
    if (!run || run->direct) die("a warp shuffle in a kernel whose first block ran without a barrier");
    block_run &r = *run;
    const unsigned t = r.cur, n = (unsigned)r.threads.size();
    uint64_t *row = r.shfl.data() + size_t(r.threads[t].shfl_gen & 1) * n;
    std::memcpy(&row[t], v, size);
    park(kAtWarp);
    r.threads[t].shfl_gen ^= 1;
    /* The mask's low five bits, as the hardware reads it; a lane past its width's segment, or past the block's
     * last thread, reads its own value. */
    const unsigned lane = t & 31, w = width > 0 && width <= 32 ? (unsigned)width : 32, src_lane = lane ^ (lane_mask & 31u),
                   src = (t & ~31u) | src_lane;
    return src_lane >= (lane / w + 1) * w || src >= n ? &row[t] : &row[src];
}

void sync_grid()
{
    if (!run || !run->together || !run->together->cooperative)
        die("a grid barrier in a launch that is not cooperative (a GPU needs cudaLaunchCooperativeKernel)");
    park(kAtGrid);
}

void sync_cluster()
{
    if (!run || run->direct) die("a cluster barrier in a kernel whose first block ran without a barrier");
    park(run->together ? kAtCluster : kAtBlock); /* a launch without clusters: each block is a cluster of one */
}

void run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx, const void *key)
{
    if ((last_error = check_launch(grid, block, smem)) != cudaSuccess) return;
    const unsigned nt = block.x * block.y * block.z;
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
    TB_MEMTRACE(launch_begin((unsigned long long)grid.x * grid.y * grid.z, nt, r.smem.data(), smem));
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx = uint3{x, y, z};
                statics_reset(r);
                /* The first block of a site not seen before runs as fibers; if no thread of it waited at a
                 * barrier, the kernel has none and the rest run as plain calls (a barrier then aborts). */
                r.direct = known == 0 || (known == -1 && (x | y | z) != 0 && !r.waited);
                TB_MEMTRACE(block_begin(nt));
                if (r.direct) {
                    for (unsigned tz = 0; tz < block.z; tz++)
                        for (unsigned ty = 0; ty < block.y; ty++)
                            for (unsigned tx = 0; tx < block.x; tx++) {
                                thread_idx = uint3{tx, ty, tz};
                                body(ctx);
                            }
                } else {
                    block_fibers(r, nt);
                }
                TB_MEMTRACE(block_end());
            }
    TB_MEMTRACE(launch_end());
    run = saved;
    std::lock_guard<std::mutex> g(learned_mu);
    learned[key] = r.waited || known == 1;
}

cudaError_t run_grid_resident(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx, dim3 cl,
                              bool cooperative)
{
    cudaError_t e = check_launch(grid, block, smem);
    const unsigned long long nb = (unsigned long long)grid.x * grid.y * grid.z;
    const unsigned ncl = cl.x * cl.y * cl.z;
    if (!e && (!cl.x || !cl.y || !cl.z || ncl > kMaxCluster || grid.x % cl.x || grid.y % cl.y || grid.z % cl.z))
        e = cudaErrorInvalidClusterSize;
    if (!e && cooperative && nb > kSMs) e = cudaErrorCooperativeLaunchTooLarge;
    if (e) return last_error = e;
    /* Clusters in the order of their first block; a cooperative launch runs them all at once, any other one
     * cluster at a time (a GPU keeps only each cluster's blocks resident together). */
    const dim3 per(grid.x / cl.x, grid.y / cl.y, grid.z / cl.z);
    resident c;
    c.cooperative = cooperative;
    c.grid = group{(unsigned)nb, 0, 0, 0};
    c.clusters.assign(size_t(per.x) * per.y * per.z, group{ncl, 0, 0, 0});
    auto block_of = [&](unsigned cid, unsigned k) { /* block k (x fastest) of cluster cid */
        const unsigned cx = cid % per.x, cy = cid / per.x % per.y, cz = cid / (per.x * per.y);
        return uint3{cx * cl.x + k % cl.x, cy * cl.y + k / cl.x % cl.y, cz * cl.z + k / (cl.x * cl.y)};
    };
    const unsigned nt = block.x * block.y * block.z;
    auto one_block = [&](uint3 b, unsigned cid) {
        block_idx = b, block_dim = uint3{block.x, block.y, block.z}, grid_dim = uint3{grid.x, grid.y, grid.z};
        block_run r{};
        r.body = body, r.ctx = ctx, r.together = &c, r.cluster = cid;
        r.smem.assign(smem, 0xA5);
        run = &r;
        /* The trace sees each block as a launch of one on its own OS thread (its counts are per thread). */
        TB_MEMTRACE(launch_begin(1, nt, r.smem.data(), smem));
        TB_MEMTRACE(block_begin(nt));
        block_fibers(r, nt);
        TB_MEMTRACE(block_end());
        TB_MEMTRACE(launch_end());
        run = nullptr;
        ended(c, c.grid);
        ended(c, c.clusters[cid]);
    };
    const unsigned n_clusters = (unsigned)c.clusters.size(), batch = cooperative ? n_clusters : 1;
    std::lock_guard<std::mutex> one_at_a_time(resident_mu);
    for (unsigned first = 0; first < n_clusters; first += batch)
        workers.run(batch * ncl, [&](unsigned i) { one_block(block_of(first + i / ncl, i % ncl), first + i / ncl); });
    return cudaSuccess;
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
 * memory a block, cooperative launch, clusters of up to 16 blocks), 8 GiB of memory. */
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
    case cudaDevAttrMultiProcessorCount: *v = (int)tbemu::kSMs; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrCooperativeLaunch: *v = 1; break;
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
    p->multiProcessorCount = (int)tbemu::kSMs;
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
/* One block a multiprocessor (a cooperative launch of up to kSMs blocks), none where the shared memory asked
 * for is more than a block may have. */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *, int, size_t smem, unsigned int)
{
    *n = smem <= tbemu::kMaxDynamicShared;
    return cudaSuccess;
}
/* Clusters of up to kMaxCluster blocks, one a multiprocessor: kSMs / size of them at once. */
cudaError_t cudaOccupancyMaxActiveClusters(int *n, const void *, const cudaLaunchConfig_t *cfg)
{
    unsigned size = 0;
    for (unsigned i = 0; i < cfg->numAttrs; i++)
        if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension) {
            const auto &d = cfg->attrs[i].val.clusterDim;
            size = d.x * d.y * d.z;
        }
    *n = size >= 1 && size <= tbemu::kMaxCluster ? (int)(tbemu::kSMs / size) : 0;
    return cudaSuccess;
}
/* The untyped entry points: emu_launch.py rewrites a kernel's cudaLaunchCooperativeKernel and cudaLaunchKernelEx
 * to emu.h's typed launches (a void * kernel cannot be called with its arguments here); these are reached only
 * by a call it did not see. */
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
