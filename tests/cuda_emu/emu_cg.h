/* emu_cg.h — cooperative_groups as the CPU emulation has it: the grid and cluster groups of this_grid() and
 * this_cluster(), whose sync() is the emulation's barrier over the blocks (emu.h). Only a launch that runs its
 * blocks at once (cooperative, or in clusters) can reach one; in any other the process stops saying so, where
 * a GPU would hang or fail the launch. */
#ifndef TB_CUDA_EMU_CG_H
#define TB_CUDA_EMU_CG_H

namespace cooperative_groups {

struct grid_group {
    void sync() { tbemu::sync_grid(); }
};
struct cluster_group {
    void sync() { tbemu::sync_cluster(); }
};
/* The launch's grid and this block's cluster, as cooperative_groups names them. */
inline grid_group this_grid() { return grid_group{}; }
inline cluster_group this_cluster() { return cluster_group{}; }

} // namespace cooperative_groups

#endif
