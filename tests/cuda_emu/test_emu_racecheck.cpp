/* test_emu_racecheck.cpp — make gpusim's racecheck (emu_memtrace.cpp) reports a shared-memory race and only a
 * race: one block's threads each write their slot and read their neighbour's, with the barrier between (no
 * hazard) and without (one a thread). Built as make gpusim's kernels are (GCC's ThreadSanitizer
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
    cudaFree(out);
    std::printf("racecheck: %llu hazards with the barrier, %llu without (%d threads): %s\n", synced, racing, (int)N,
                fails ? "FAILED" : "as expected");
    return fails ? 1 : 0;
}
