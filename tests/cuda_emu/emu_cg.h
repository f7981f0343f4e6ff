/* emu_cg.h — cooperative_groups as the CPU emulation has it: the types, so that a kernel using them compiles,
 * and a grid or cluster barrier that stops the process. One block runs at a time (emu.h), so blocks cannot
 * wait for each other: the emulated device reports no cooperative launch (cudaDevAttrCooperativeLaunch 0),
 * and code that asks first (mlp_persist.cu) never reaches these. */
#ifndef TB_CUDA_EMU_CG_H
#define TB_CUDA_EMU_CG_H

#include <cstdio>
#include <cstdlib>

namespace cooperative_groups {

/* Stops the process with one line naming what the emulation cannot do. */
[[noreturn]] inline void emu_unsupported(const char *what)
{
    std::fprintf(stderr, "cuda emulation: %s is not emulated (blocks run one at a time)\n", what);
    std::abort();
}
struct grid_group {
    void sync() { emu_unsupported("a grid barrier"); }
};
struct cluster_group {
    void sync() { emu_unsupported("a cluster barrier"); }
};
/* The launch's grid and cluster, as cooperative_groups names them: their sync() stops the process. */
inline grid_group this_grid() { return grid_group{}; }
inline cluster_group this_cluster() { return cluster_group{}; }

} // namespace cooperative_groups

#endif
