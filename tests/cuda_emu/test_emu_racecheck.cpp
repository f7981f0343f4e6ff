/* test_emu_racecheck.cpp — make gpusim's racecheck (emu_memtrace.cpp) reports a shared-memory race and only a
 * race: one block's threads each write their slot and read their neighbour's, with the barrier between (no
 * hazard) and without (one a thread); and in global memory between blocks (TB_GPUSIM_GLOBAL=1), each block
 * on its own slot (none) or reading the slot another block wrote (one a block but the first). Built as make gpusim's kernels are (GCC's ThreadSanitizer
 * instrumentation feeding the trace); ctest sets TB_GPUSIM_OUT, without which nothing is traced. */
#include "emu_memtrace.h"
#include "emu_selftest.h"

#include <cstdio>

int main()
{
    enum { N = 256 };
    int *out = nullptr;
    if (cudaMalloc(reinterpret_cast<void **>(&out), N * sizeof *out) != cudaSuccess) return 1;
    int fails = 0;
    if (emu_neighbour(out, N, 1) != cudaSuccess) return 1;
    const unsigned long long synced = tbemu::memtrace::hazards();
    for (int t = 0; t < N; t++) fails += out[t] != (t + 1) % N;
    if (synced != 0) std::fprintf(stderr, "racecheck: %llu hazards with the barrier, 0 expected\n", synced), fails++;
    if (emu_neighbour(out, N, 0) != cudaSuccess) return 1;
    const unsigned long long racing = tbemu::memtrace::hazards() - synced;
    if (racing != N) std::fprintf(stderr, "racecheck: %llu hazards without the barrier, %d expected\n", racing, N), fails++;
    /* Between blocks, in global memory (TB_GPUSIM_GLOBAL=1): none where each block keeps to its slot, one a
     * block but the first where each reads the slot before its own. */
    const unsigned long long before = tbemu::memtrace::hazards();
    if (emu_slots(out, 64, 0) != cudaSuccess) return 1;
    const unsigned long long own = tbemu::memtrace::hazards() - before;
    if (emu_slots(out, 64, 1) != cudaSuccess) return 1;
    const unsigned long long chained = tbemu::memtrace::hazards() - before - own;
    if (own != 0) std::fprintf(stderr, "racecheck: %llu global hazards from blocks on their own slots\n", own), fails++;
    if (chained != 63) std::fprintf(stderr, "racecheck: %llu global hazards from chained blocks, 63 expected\n", chained), fails++;
    cudaFree(out);
    std::printf("racecheck: %llu hazards with the barrier, %llu without (%d threads); between blocks %llu apart, %llu "
                "chained (64 blocks): %s\n", synced, racing, (int)N, own, chained, fails ? "FAILED" : "as expected");
    return fails ? 1 : 0;
}
