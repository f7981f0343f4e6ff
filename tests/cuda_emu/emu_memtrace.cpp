/* emu_memtrace.cpp — what the cuda device's kernels would ask of a GPU's memory, counted on the CPU emulation
 * (make gpusim; cuda/README.md). The trace's build compiles the rewritten kernels with GCC's ThreadSanitizer
 * instrumentation but links no TSan runtime: each load and store calls the __tsan_readN/__tsan_writeN below,
 * which note the access with the emulated thread that made it. At a block's end the accesses are grouped as a
 * GPU groups them: the k-th execution of one instruction (its return address) by the 32 lanes of a warp is one
 * request. Per kernel it counts:
 *  - global memory (inside a cudaMalloc): requests and the 32-byte sectors they touch (a coalesced fp32 warp
 *    access is 4 sectors; 32 is one sector a lane), the bytes the lanes asked for, and the distinct sectors a
 *    launch read and wrote (the least DRAM moves if L2 keeps what a launch reuses and nothing across launches);
 *  - shared memory: requests and wavefronts, a wavefront being one pass of the 32 banks (4-byte words; a
 *    request takes as many as the busiest bank has distinct words, and at least its bytes / 128).
 * A model, not a measurement: no caches, no timing, and lanes are paired by occurrence, so a branch one lane
 * takes and its neighbour does not can pair unlike accesses. Reads TB_GPUSIM_OUT (a file) at start; without
 * it nothing is counted.
 *
 * It also checks what compute-sanitizer's racecheck checks: two threads of a block touching one 2-byte unit of
 * shared memory between the same two barriers, one of them writing (the block's threads run one after another
 * here, so such a pair gives the emulation's order's result where a GPU's is undefined). With TB_GPUSIM_GLOBAL=1
 * it checks global memory between a launch's blocks too: a block reading or writing a 2-byte unit another block
 * of the launch wrote (the emulation runs blocks in order, so a later block sees an earlier one's writes where a
 * GPU's blocks run in any order). Each kernel's first hazard is written, with its count at exit, to
 * TB_GPUSIM_OUT.races (a global one's kernel named "k (global)"). */
#include "emu.h"
#include "emu_memtrace.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tbemu {
namespace memtrace {

namespace {

enum { GLOBAL = 0, SHARED = 1 };

struct counts {
    unsigned long long launches, blocks, threads;
    unsigned long long ld_req, ld_sec, ld_bytes, st_req, st_sec, st_bytes; /* global */
    unsigned long long uniq_rd, uniq_wr;                                   /* global, bytes */
    unsigned long long sh_req, sh_wave, sh_bytes;                          /* shared */
    void add(const counts &o)
    {
        launches += o.launches, blocks += o.blocks, threads += o.threads;
        ld_req += o.ld_req, ld_sec += o.ld_sec, ld_bytes += o.ld_bytes;
        st_req += o.st_req, st_sec += o.st_sec, st_bytes += o.st_bytes;
        uniq_rd += o.uniq_rd, uniq_wr += o.uniq_wr;
        sh_req += o.sh_req, sh_wave += o.sh_wave, sh_bytes += o.sh_bytes;
    }
};

struct req_key {
    uintptr_t pc;
    unsigned warp, occ;
    unsigned char write, space;
    bool operator==(const req_key &o) const
    {
        return pc == o.pc && warp == o.warp && occ == o.occ && write == o.write && space == o.space;
    }
};
struct req_hash {
    size_t operator()(const req_key &k) const
    {
        uint64_t h = k.pc * 0x9E3779B97F4A7C15ull;
        h ^= ((uint64_t)k.warp << 32 | k.occ) * 0xC2B2AE3D27D4EB4Full;
        return (size_t)(h ^ (h >> 29) ^ ((uint64_t)k.write << 1 | k.space));
    }
};
struct lane_access {
    uintptr_t addr;
    unsigned size;
};

/* A run of 2-byte accesses one thread made back to back (access() says why it is held). */
struct held {
    uintptr_t addr, pc;
    unsigned t, size;
    unsigned char write, space;
};

/* A racecheck's hazards: how many, and the first, described. */
struct hazard_log {
    unsigned long long n;
    std::string first;
    /* One more; line() describes it where it is the first. */
    template <class L> void note(L line)
    {
        if (!n++) first = line();
    }
    void add(const hazard_log &o)
    {
        if (!n) first = o.first;
        n += o.n;
    }
};

/* One launch on this host thread: its block's pending requests, its distinct sectors, its counts. */
struct launch_state {
    launch_state *outer; /* the launch this one ran inside, if any */
    held run;
    std::string name;
    const char *named; /* the kernel's __PRETTY_FUNCTION__, once it has said it */
    uintptr_t shm_lo, shm_hi; /* dynamic shared memory */
    uintptr_t st_lo, st_hi;   /* static __shared__ arrays */
    std::vector<std::unordered_map<uintptr_t, unsigned>> occ; /* a block's threads: instruction -> executions */
    std::unordered_map<req_key, std::vector<lane_access>, req_hash> reqs;
    std::unordered_set<uintptr_t> rd, wr; /* sectors */
    counts c;
    /* racecheck: the block's shared units touched since its last barrier (epoch + 1 when set this epoch) */
    struct unit {
        unsigned epoch;
        int writer, reader; /* a thread, -1 none, -2 (reader) several */
    };
    std::unordered_map<uintptr_t, unit> units;
    unsigned epoch;
    hazard_log shared_hz;
    /* global racecheck (TB_GPUSIM_GLOBAL=1): the launch's written units -> the block that wrote them */
    std::unordered_map<uintptr_t, unsigned long long> written;
    hazard_log global_hz;
};
thread_local launch_state *cur;

/* Device allocations [start, end), and a generation that a free moves on (a host thread's cached range is
 * good while the generation it was found in is current). */
std::mutex mu;
std::map<uintptr_t, uintptr_t> ranges;
std::atomic<unsigned long long> generation{0};
std::map<std::string, counts> kernels; /* by kernel name, under mu */
std::map<std::string, hazard_log> races; /* by kernel name ("k (global)": between its blocks), under mu */
std::string out_path;
thread_local uintptr_t cache_lo = 1, cache_hi = 0;
thread_local unsigned long long cache_gen;

const bool enabled = [] {
    const char *p = std::getenv("TB_GPUSIM_OUT");
    if (!p || !*p) return false;
    out_path = p;
    return true;
}();
const bool global_races = [] {
    const char *p = std::getenv("TB_GPUSIM_GLOBAL");
    return p && std::strcmp(p, "1") == 0;
}();

bool is_device(uintptr_t a)
{
    const unsigned long long g = generation.load(std::memory_order_acquire);
    if (a >= cache_lo && a < cache_hi && g == cache_gen) return true;
    std::lock_guard<std::mutex> l(mu);
    auto it = ranges.upper_bound(a);
    if (it == ranges.begin()) return false;
    --it;
    if (a >= it->second) return false;
    cache_lo = it->first, cache_hi = it->second, cache_gen = g;
    return true;
}

void write_report()
{
    std::lock_guard<std::mutex> l(mu);
    FILE *f = std::fopen(out_path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "cuda emulation: cannot write the memory trace to %s\n", out_path.c_str());
        return;
    }
    std::fprintf(f, "kernel\tlaunches\tblocks\tthreads\tld_req\tld_sectors\tld_bytes\tst_req\tst_sectors\tst_bytes"
                    "\tuniq_rd_bytes\tuniq_wr_bytes\tsh_req\tsh_wavefronts\tsh_bytes\n");
    for (const auto &k : kernels) {
        const counts &c = k.second;
        std::fprintf(f, "%s\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n",
                     k.first.c_str(), c.launches, c.blocks, c.threads, c.ld_req, c.ld_sec, c.ld_bytes, c.st_req,
                     c.st_sec, c.st_bytes, c.uniq_rd, c.uniq_wr, c.sh_req, c.sh_wave, c.sh_bytes);
    }
    std::fclose(f);
    const std::string rpath = out_path + ".races";
    FILE *r = std::fopen(rpath.c_str(), "w");
    if (!r) {
        std::fprintf(stderr, "cuda emulation: cannot write the racecheck to %s\n", rpath.c_str());
        return;
    }
    for (const auto &k : races) std::fprintf(r, "%s\t%llu\t%s\n", k.first.c_str(), k.second.n, k.second.first.c_str());
    std::fclose(r);
}

/* global racecheck: an access of size bytes at a by the running block, against what other blocks of the launch
 * wrote. */
void global_check(launch_state *s, uintptr_t a, unsigned size, unsigned char write)
{
    const unsigned long long me =
        block_idx.x + (unsigned long long)grid_dim.x * (block_idx.y + (unsigned long long)grid_dim.y * block_idx.z);
    for (uintptr_t u = a >> 1; u <= (a + size - 1) >> 1; u++) {
        auto it = s->written.find(u);
        const bool other = it != s->written.end() && it->second != me;
        if (write && !other) s->written[u] = me;
        if (!other) continue;
        s->global_hz.note([&] {
            char line[256];
            std::snprintf(line, sizeof line, "block %llu %s global address %#lx, which block %llu wrote in the same launch",
                          me, write ? "writes" : "reads", (unsigned long)(u * 2), it->second);
            return std::string(line);
        });
        return; /* one hazard an access */
    }
}

/* racecheck: thread t's access of size bytes at a in shared memory (base: its array's or the dynamic area's
 * start), against what other threads did to its units since the block's last barrier. */
void race_check(launch_state *s, unsigned t, uintptr_t a, unsigned size, unsigned char write, uintptr_t base)
{
    const int me = (int)t;
    for (uintptr_t u = a >> 1; u <= (a + size - 1) >> 1; u++) {
        launch_state::unit &st = s->units[u];
        if (st.epoch != s->epoch + 1) st = launch_state::unit{s->epoch + 1, -1, -1};
        int other = -1;
        const char *did = nullptr; /* what the other thread did */
        if (st.writer >= 0 && st.writer != me) other = st.writer, did = "wrote";
        else if (write && st.reader != -1 && st.reader != me) other = st.reader, did = "read";
        if (write) st.writer = me;
        else st.reader = st.reader == -1 || st.reader == me ? me : -2;
        if (!did) continue;
        s->shared_hz.note([&] {
            char line[256], who[32];
            if (other >= 0) std::snprintf(who, sizeof who, "thread %d", other);
            else std::snprintf(who, sizeof who, "other threads");
            std::snprintf(line, sizeof line, "block (%u,%u,%u): thread %d %s shared byte +%lu, which %s %s since the "
                          "last barrier", block_idx.x, block_idx.y, block_idx.z, me, write ? "writes" : "reads",
                          (unsigned long)(u * 2 - base), who, did);
            return std::string(line);
        });
        return; /* one hazard an access */
    }
}

/* Notes access a (size bytes, its space) by thread t as the k-th execution of instruction pc. */
void note(launch_state *s, unsigned t, uintptr_t pc, uintptr_t a, unsigned size, unsigned char write,
          unsigned char space)
{
    const unsigned occ = s->occ[t][pc]++;
    s->reqs[req_key{pc, t / 32, occ, write, space}].push_back(lane_access{a, size});
    if (space == GLOBAL) {
        auto &set = write ? s->wr : s->rd;
        for (uintptr_t sec = a >> 5; sec <= (a + size - 1) >> 5; sec++) set.insert(sec);
    }
}

/* The held 2-byte run, noted as one access. */
void flush(launch_state *s)
{
    if (s->run.size) note(s, s->run.t, s->run.pc, s->run.addr, s->run.size, s->run.write, s->run.space);
    s->run.size = 0;
}

/* One access of size bytes at p by the emulated thread running now; pc names its instruction. */
inline void access(const void *p, unsigned size, unsigned char write, const void *pc)
{
    launch_state *s = cur;
    if (!s) return;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    unsigned char space;
    uintptr_t base = 0;
    if ((a >= s->shm_lo && a < s->shm_hi) || (a >= s->st_lo && a < s->st_hi))
        space = SHARED, base = a >= s->shm_lo && a < s->shm_hi ? s->shm_lo : s->st_lo;
    else if (is_device(a))
        space = GLOBAL;
    else
        return; /* a thread's own stack (local memory, registers) or the host's */
    const unsigned t = thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z);
    const uintptr_t ipc = reinterpret_cast<uintptr_t>(pc);
    if (space == SHARED) race_check(s, t, a, size, write, base);
    else if (global_races) global_check(s, a, size, write);
    /* The host copies a vector of bf16 or fp16 values element by element (their types' own copy operators),
     * where the GPU moves it in one access: 2-byte accesses a thread makes back to back, each following the
     * last, inside one aligned 16 bytes, are held and noted as one. */
    held &r = s->run;
    if (r.size && size == 2 && t == r.t && write == r.write && space == r.space && a == r.addr + r.size &&
        (a >> 4) == (r.addr >> 4)) {
        r.size += 2;
        return;
    }
    flush(s);
    if (size == 2) {
        r = held{a, ipc, t, 2, write, space};
        return;
    }
    note(s, t, ipc, a, size, write, space);
}

} // namespace

/* "void k(T*, int) [with T = float; int V = 4]" as "k<float,4>": a kernel's name and template arguments
 * ("{anonymous}::" dropped). */
static std::string short_name(const char *pretty)
{
    std::string s(pretty), name;
    const size_t paren = s.find('(');
    size_t b = s.rfind(' ', paren);
    name = s.substr(b == std::string::npos ? 0 : b + 1, paren - (b == std::string::npos ? 0 : b + 1));
    if (name.compare(0, 13, "{anonymous}::") == 0) name.erase(0, 13);
    const size_t w = s.find("[with ");
    if (w == std::string::npos) return name;
    std::string args;
    for (size_t i = w + 6; i < s.size();) {
        const size_t eq = s.find(" = ", i);
        if (eq == std::string::npos) break;
        size_t end = s.find("; ", eq), close = s.rfind(']');
        if (end == std::string::npos) end = close;
        /* GCC adds the typedefs the signature uses ("size_t = long unsigned int"): not arguments. */
        const std::string lhs = s.substr(i, eq - i);
        if (lhs.size() < 2 || lhs.compare(lhs.size() - 2, 2, "_t") != 0)
            args += (args.empty() ? "" : ",") + s.substr(eq + 3, end - eq - 3);
        i = end + 2;
    }
    return name + "<" + args + ">";
}

void kernel_name(const char *pretty)
{
    launch_state *s = cur;
    if (!s || s->named == pretty) return;
    static std::mutex names_mu;
    static std::unordered_map<const char *, std::string> names;
    std::lock_guard<std::mutex> l(names_mu);
    auto it = names.find(pretty);
    if (it == names.end()) it = names.emplace(pretty, short_name(pretty)).first;
    s->name = it->second, s->named = pretty;
}

unsigned long long hazards()
{
    std::lock_guard<std::mutex> l(mu);
    unsigned long long n = 0;
    for (const auto &k : races) n += k.second.n;
    return n;
}

void on_alloc(void *p, size_t n)
{
    if (!enabled) return;
    std::lock_guard<std::mutex> l(mu);
    ranges[reinterpret_cast<uintptr_t>(p)] = reinterpret_cast<uintptr_t>(p) + (n ? n : 1);
}

void on_free(void *p)
{
    if (!enabled) return;
    std::lock_guard<std::mutex> l(mu);
    ranges.erase(reinterpret_cast<uintptr_t>(p));
    generation.fetch_add(1, std::memory_order_release);
}

void launch_begin(unsigned long long grid, unsigned block, void *shm, size_t smem)
{
    if (!enabled) return;
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(write_report); });
    launch_state *s = new launch_state{};
    s->name = "?"; /* until the kernel's first thread names it */
    s->shm_lo = reinterpret_cast<uintptr_t>(shm), s->shm_hi = s->shm_lo + (shm ? smem : 0);
    s->c.launches = 1, s->c.blocks = grid, s->c.threads = grid * block;
    s->outer = cur; /* run_grid may be entered again from a launch (it saves its own state too) */
    cur = s;
}

void statics(void *p, size_t n)
{
    if (cur) cur->st_lo = reinterpret_cast<uintptr_t>(p), cur->st_hi = cur->st_lo + n;
}

void block_begin(unsigned nthreads)
{
    if (!cur) return;
    cur->occ.resize(nthreads);
    for (auto &m : cur->occ) m.clear();
    cur->units.clear(), cur->epoch = 0;
}

void barrier()
{
    if (cur) cur->epoch++;
}

void block_end()
{
    launch_state *s = cur;
    if (!s) return;
    flush(s);
    std::vector<uintptr_t> u;
    for (auto &kv : s->reqs) {
        const std::vector<lane_access> &lanes = kv.second;
        u.clear();
        unsigned long long bytes = 0;
        if (kv.first.space == GLOBAL) {
            for (const lane_access &l : lanes) {
                bytes += l.size;
                for (uintptr_t sec = l.addr >> 5; sec <= (l.addr + l.size - 1) >> 5; sec++) u.push_back(sec);
            }
            std::sort(u.begin(), u.end());
            const unsigned long long sectors = (unsigned long long)(std::unique(u.begin(), u.end()) - u.begin());
            if (kv.first.write)
                s->c.st_req++, s->c.st_sec += sectors, s->c.st_bytes += bytes;
            else
                s->c.ld_req++, s->c.ld_sec += sectors, s->c.ld_bytes += bytes;
        } else {
            for (const lane_access &l : lanes) {
                bytes += l.size;
                for (uintptr_t w = l.addr >> 2; w <= (l.addr + l.size - 1) >> 2; w++) u.push_back(w);
            }
            std::sort(u.begin(), u.end());
            u.erase(std::unique(u.begin(), u.end()), u.end());
            unsigned per_bank[32] = {0}, busiest = 0;
            for (uintptr_t w : u) busiest = std::max(busiest, ++per_bank[w & 31]);
            const unsigned long long by_bytes = (u.size() * 4 + 127) / 128;
            s->c.sh_req++, s->c.sh_wave += std::max<unsigned long long>(busiest, by_bytes), s->c.sh_bytes += bytes;
        }
    }
    s->reqs.clear();
}

void launch_end()
{
    launch_state *s = cur;
    if (!s) return;
    cur = s->outer;
    s->c.uniq_rd = 32ull * s->rd.size(), s->c.uniq_wr = 32ull * s->wr.size();
    {
        std::lock_guard<std::mutex> l(mu);
        kernels[s->name].add(s->c);
        if (s->shared_hz.n) races[s->name].add(s->shared_hz);
        if (s->global_hz.n) races[s->name + " (global)"].add(s->global_hz);
    }
    delete s;
}

} // namespace memtrace
} // namespace tbemu

/* The instrumentation's entry points (GCC's -fsanitize=thread with no runtime behind it). */
extern "C" {
void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
#define TB_TSAN_ACCESS(n)                                                                                         \
    void __tsan_read##n(void *p) { tbemu::memtrace::access(p, n, 0, __builtin_return_address(0)); }             \
    void __tsan_write##n(void *p) { tbemu::memtrace::access(p, n, 1, __builtin_return_address(0)); }            \
    void __tsan_unaligned_read##n(void *p) { tbemu::memtrace::access(p, n, 0, __builtin_return_address(0)); }   \
    void __tsan_unaligned_write##n(void *p) { tbemu::memtrace::access(p, n, 1, __builtin_return_address(0)); }
TB_TSAN_ACCESS(1)
TB_TSAN_ACCESS(2)
TB_TSAN_ACCESS(4)
TB_TSAN_ACCESS(8)
TB_TSAN_ACCESS(16)
/* An access of n bytes (an aggregate copy): 4-byte pieces, as a thread's word loads. */
static void access_range(void *p, unsigned long n, unsigned char write, const void *pc)
{
    for (unsigned long i = 0; i < n; i += 4) tbemu::memtrace::access((char *)p + i, n - i < 4 ? n - i : 4, write, pc);
}
void __tsan_read_range(void *p, unsigned long n) { access_range(p, n, 0, __builtin_return_address(0)); }
void __tsan_write_range(void *p, unsigned long n) { access_range(p, n, 1, __builtin_return_address(0)); }
void __tsan_vptr_read(void **) {}
void __tsan_vptr_update(void **, void *) {}
/* std::shared_ptr's count (a captured launch's arguments): the operation itself, uncounted. */
int __tsan_atomic32_fetch_add(volatile int *p, int v, int) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
}
