/* layout.h — the one place that states tensor layouts and the kernel contract.
 *
 * Layouts (row-major, last index fastest):
 *   activations        (N,H,W,C)  NHWC; a dense activation is (N,C)
 *   dense weight       (IN,OUT)   y = x·W + b
 *   conv weight        (KH,KW,C/G,OC) HWIO; group g reads input channels [g·C/G, (g+1)·C/G)
 *                                 and writes output channels [g·OC/G, (g+1)·OC/G)
 *   depthwise weight   (KH,KW,C)
 *   bias, norm γ/β     (C)
 *
 * Kernel contract (every file core/op_*.c):
 *   - plain functions on raw pointers plus a shape struct and a thread slice (ith, nth), 0 <= ith < nth;
 *     one body serves any nth, and the union of the slices is the whole op;
 *   - a kernel never allocates, spawns threads, or fails; scratch comes in as a pointer;
 *   - backward is split by what it writes: *_backward_data writes dinp, *_backward_params writes
 *     dw/db, each partitioned over its own output: no atomics, bitwise the same for any nth;
 *   - backward ACCUMULATES (+=) into dinp, dw and db: the engine zeroes them once per step;
 *     gradients mean +dL/dx;
 *   - a naive reference (suffix _ref, single-threaded, obviously correct) sits beside each optimised
 *     kernel for the tests.
 */
#ifndef TB_LAYOUT_H
#define TB_LAYOUT_H

#include "tpool.h"

#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

/* Returns the [lo, hi) slice of n items that thread ith of nth owns (contiguous, balanced). */
static inline void tb_slice(size_t n, int ith, int nth, size_t *lo, size_t *hi)
{
    size_t q = n / (size_t)nth, r = n % (size_t)nth, i = (size_t)ith;
    *lo = i * q + (i < r ? i : r);
    *hi = *lo + q + (i < r ? 1 : 0);
}

/* The [lo, hi) slice of n items thread ith of nth owns, cut at multiples of 16 (one cache line of
 * floats) so two threads never write one line. */
static inline void tb_slice16(size_t n, int ith, int nth, size_t *lo, size_t *hi)
{
    tb_slice((n + 15) / 16, ith, nth, lo, hi);
    *lo = *lo * 16 < n ? *lo * 16 : n;
    *hi = *hi * 16 < n ? *hi * 16 : n;
}

/* Parallel units the machine can use: the cores this process may run on (tpool_cpus: its affinity mask,
 * so an MPI rank bound to 8 cores cuts for 8) rounded up to even, at least 2. A constant of the process, so
 * work cut by it (never by nth) gives the same bits for any thread count. TB_PAR_UNITS=N cuts as a machine
 * of N cores would: with more threads than cores, --profile's per-thread work then shows how that machine's
 * threads would share each layer (tools/scaling.sh's simulated points). */
static inline int tb_par_units(void)
{
    static _Atomic int units;
    int u = units;
    if (!u) {
        const char *env = getenv("TB_PAR_UNITS");
        const long want = env ? strtol(env, NULL, 10) : 0;
        const long cores = want > 0 && want <= 4096 ? want : tpool_cpus();
        u = cores > 2 ? (int)(cores + cores % 2) : 2;
        units = u;
    }
    return u;
}

/* The parallel units a work split is cut for: par where an engine was given its own (a shape's .par: a
 * one-core replica cuts as TB_ONE_CORE_UNITS, whatever the machine), else the machine's. */
static inline int tb_units(int par) { return par > 0 ? par : tb_par_units(); }

/* The cut of a one-core device among several (a mirrored replica, an ipu replica's stage): a 2-core machine's,
 * the fewest units any machine cuts for, so its bits are every machine's and its splits are not 16 cores' on a
 * 16-core one (more, smaller pieces and BatchNorm's fused passes off: +3.7 % bytes a replica step, simulated). */
enum { TB_ONE_CORE_UNITS = 2 };

/* The units (executor_config.par_units) of each replica's engines in a run of `replicas` replicas: the one-core
 * cut among several; 0, the machine's, for one, whose schedule is cpu's and keeps cpu's bits. */
static inline int tb_replica_units(int replicas) { return replicas > 1 ? TB_ONE_CORE_UNITS : 0; }

/* The smallest output one thread of our kernels writes with non-temporal stores (skipping the read for
 * ownership of lines nothing will read from the cache): chosen once from the machine (core/stream_bytes.c
 * says how), or TB_STREAM_KB=N (KiB, then for the whole output whatever the threads) to A/B it in one binary. */
size_t tb_stream_bytes(void);
/* The smallest output nth threads write with non-temporal stores: tb_stream_bytes() for each thread where the
 * machine's rule is per thread (a core's L2), else for the whole output. */
size_t tb_stream_bytes_for(int nth);

/* Returns whether an output of n floats that nth threads write goes out with non-temporal stores. */
static inline int tb_stream_floats(size_t n, int nth) { return n * sizeof(float) >= tb_stream_bytes_for(nth); }

/* Returns n rounded up to a multiple of 16 floats (64 bytes), the arena alignment unit. */
static inline size_t tb_align16(size_t n) { return (n + 15) & ~(size_t)15; }

#endif
