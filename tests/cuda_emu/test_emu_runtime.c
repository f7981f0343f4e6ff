/* test_emu_runtime.c — the CPU emulation of the cuda device (tests/cuda_emu) does what the device's kernels rely
 * on it for, on emu_selftest.cu's small kernels: warp shuffles (lane masks, widths, a block's partial last
 * warp), grid barriers between the blocks of a cooperative launch and cluster barriers within clusters (a block
 * reads what its neighbour wrote before the barrier, over many rounds), each block's own static shared memory
 * (0xA5 where not written) while all run at once, a cooperative launch of more blocks than the device holds
 * refused, and the process stopped where a GPU would hang: a warp's lanes waiting at different barriers, a grid barrier
 * in a launch that is not cooperative (plain or of clusters), a block leaving before a grid barrier the others
 * wait at. */
#include "emu_selftest.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>

/* A device allocation of n ints, set to -1. */
static int *dev_ints(size_t n)
{
    int *p = NULL;
    cr_assert_eq(cudaMalloc((void **)&p, n * sizeof *p), cudaSuccess);
    cr_assert_eq(cudaMemset(p, 0xff, n * sizeof *p), cudaSuccess);
    return p;
}

/* What __shfl_xor_sync gives lane t of n threads for value t·10: lane t ^ mask's, unless that lane lies in a
 * later width segment or past the block (then its own). */
static int shfl_expect(int t, int n, int mask, int width)
{
    const int lane = t & 31, src_lane = lane ^ mask, src = (t & ~31) | src_lane;
    return src_lane >= (lane / width + 1) * width || src >= n ? t * 10 : src * 10;
}

Test(emu, shfl_xor_masks_widths_and_a_partial_warp)
{
    static const int widths[] = {32, 16, 8, 4, 2};
    const int n = 80; /* two warps and half of a third */
    int *out = dev_ints(5 * (size_t)n);
    for (int w = 0; w < 5; w++) {
        cr_assert_eq(emu_shfl_xor(out, n, widths[w]), cudaSuccess);
        for (int k = 0; k < 5; k++)
            for (int t = 0; t < n; t++)
                cr_assert_eq(out[k * n + t], shfl_expect(t, n, 1 << k, widths[w]), "width %d, mask %d, thread %d: %d",
                             widths[w], 1 << k, t, out[k * n + t]);
    }
    cudaFree(out);
}

Test(emu, grid_barrier_orders_blocks)
{
    enum { BLOCKS = 49, ROUNDS = 40 };
    int *slot = dev_ints(BLOCKS), *out = dev_ints((size_t)BLOCKS * ROUNDS);
    cr_assert_eq(emu_grid_rounds(slot, out, BLOCKS, 96, ROUNDS), cudaSuccess);
    for (int r = 0; r < ROUNDS; r++)
        for (int b = 0; b < BLOCKS; b++)
            cr_assert_eq(out[r * BLOCKS + b], r * 1000 + (b + 1) % BLOCKS, "round %d, block %d read %d", r, b,
                         out[r * BLOCKS + b]);
    cudaFree(slot), cudaFree(out);
}

Test(emu, cluster_barrier_orders_a_clusters_blocks)
{
    enum { BLOCKS = 24, CLUSTER = 4, ROUNDS = 30 };
    int *slot = dev_ints(BLOCKS), *out = dev_ints((size_t)BLOCKS * ROUNDS);
    cr_assert_eq(emu_cluster_rounds(slot, out, BLOCKS, CLUSTER, ROUNDS), cudaSuccess);
    for (int r = 0; r < ROUNDS; r++)
        for (int b = 0; b < BLOCKS; b++) {
            const int first = b / CLUSTER * CLUSTER, next = first + (b - first + 1) % CLUSTER;
            cr_assert_eq(out[r * BLOCKS + b], r * 1000 + next, "round %d, block %d read %d", r, b, out[r * BLOCKS + b]);
        }
    cr_assert_eq(emu_cluster_rounds(slot, out, 10, CLUSTER, 1), cudaErrorInvalidClusterSize,
                 "a grid that is not whole clusters is refused");
    cr_assert_eq(emu_cluster_rounds(slot, out, 34, 17, 1), cudaErrorInvalidClusterSize, "clusters of 17 are refused");
    cudaFree(slot), cudaFree(out);
}

Test(emu, static_shared_is_each_blocks_own)
{
    enum { BLOCKS = 16 };
    int *out = dev_ints(2 * BLOCKS);
    cr_assert_eq(emu_static_own(out, BLOCKS), cudaSuccess);
    for (int b = 0; b < BLOCKS; b++) {
        cr_assert_eq(out[2 * b], 0xA5, "block %d: unwritten shared memory reads %#x, not 0xA5", b, out[2 * b]);
        cr_assert_eq(out[2 * b + 1], b, "block %d read back %d: another block's shared memory", b, out[2 * b + 1]);
    }
    cudaFree(out);
}

Test(emu, cooperative_launch_past_the_device_is_refused)
{
    int *slot = dev_ints(133), *out = dev_ints(133);
    cr_assert_eq(emu_grid_rounds(slot, out, 133, 32, 1), cudaErrorCooperativeLaunchTooLarge);
    cr_assert_eq(out[0], -1, "a refused launch ran");
    cudaFree(slot), cudaFree(out);
}

Test(emu, lanes_at_different_barriers_stop, .signal = SIGABRT)
{
    int *out = dev_ints(32);
    emu_divergent(out);
}

Test(emu, grid_barrier_outside_a_cooperative_launch_stops, .signal = SIGABRT)
{
    emu_grid_sync(4, 0, 0);
}

Test(emu, grid_barrier_in_a_cluster_launch_stops, .signal = SIGABRT)
{
    emu_grid_sync(4, 2, 0); /* clusters run one at a time: the grid's barrier would never open */
}

Test(emu, block_leaving_before_a_grid_barrier_stops, .signal = SIGABRT)
{
    emu_grid_sync(8, 1, 1);
}

Test(emu, grid_barrier_every_block_reaches_passes)
{
    cr_assert_eq(emu_grid_sync(8, 1, 0), cudaSuccess);
}
