/* allreduce.c — ring reduce-scatter + all-gather over shared memory (see allreduce.h). */
#include "allreduce.h"

#include "layout.h"
#include "status.h"

#include <string.h>

/* One replica's view of the ring: add the left neighbour's chunk [lo,hi) into its own, or copy it. */
struct ring_ops {
    void (*add)(const struct ring_ops *o, size_t lo, size_t hi);
    void (*copy)(const struct ring_ops *o, size_t lo, size_t hi);
    void *mine;
    const void *theirs;
    enum stage_prec prec;
};

/* The buffers' n elements as a window at offset off of a whole of N (off + n ≤ N): chunk k is
 * tb_slice(N, k, R) cut to the window, so an element's chunk, and with it the order its sum is formed
 * in, is its place in the whole, not in the window (an ipu stage's slice: the same bits for any split). */
struct ring_win {
    size_t n, off, N;
};

/* Chunk k of the window, as indices into the buffers (lo == hi: empty). */
static void win_chunk(const struct ring_win *w, int k, int R, size_t *lo, size_t *hi)
{
    size_t a, b;
    tb_slice(w->N, k, R, &a, &b);
    a = a > w->off ? a - w->off : 0;
    b = b > w->off ? b - w->off : 0;
    *lo = a < w->n ? a : w->n;
    *hi = b < w->n ? b : w->n;
}

/* The ring schedule both element types share: R−1 reduce-scatter steps, then R−1 all-gather steps. */
static void ring_scatter(const struct ring_win *w, int R, int replica, const struct ring_ops *o,
                         void (*barrier)(void *), void *ctx)
{
    barrier(ctx); /* every replica's gradients are complete before anyone reads a neighbour's */
    for (int s = 0; s < R - 1; s++) {
        size_t lo, hi;
        win_chunk(w, ((replica - s - 1) % R + R) % R, R, &lo, &hi);
        if (hi > lo) o->add(o, lo, hi);
        barrier(ctx);
    }
}

static void ring_gather(const struct ring_win *w, int R, int replica, const struct ring_ops *o,
                        void (*barrier)(void *), void *ctx)
{
    for (int s = 0; s < R - 1; s++) {
        size_t lo, hi;
        win_chunk(w, ((replica - s) % R + R) % R, R, &lo, &hi);
        if (hi > lo) o->copy(o, lo, hi);
        barrier(ctx);
    }
}

static void ring(const struct ring_win *w, int R, int replica, const struct ring_ops *o, void (*barrier)(void *),
                 void *ctx)
{
    ring_scatter(w, R, replica, o, barrier, ctx);
    ring_gather(w, R, replica, o, barrier, ctx);
}

static void add_f32(const struct ring_ops *o, size_t lo, size_t hi)
{
    float *mine = o->mine;
    const float *theirs = o->theirs;
    for (size_t i = lo; i < hi; i++) mine[i] += theirs[i];
}

static void copy_f32(const struct ring_ops *o, size_t lo, size_t hi)
{
    memcpy((float *)o->mine + lo, (const float *)o->theirs + lo, (hi - lo) * sizeof(float));
}

/* Decode, add in fp32, round back to nearest: a cache-resident block at a time. */
static void add_half(const struct ring_ops *o, size_t lo, size_t hi)
{
    uint16_t *mine = o->mine;
    const uint16_t *theirs = o->theirs;
    float a[256], b[256];
    for (size_t i = lo; i < hi; i += 256) {
        const size_t len = hi - i < 256 ? hi - i : 256;
        stage_prec_unpack(a, mine + i, len, o->prec, 1.0f);
        stage_prec_unpack(b, theirs + i, len, o->prec, 1.0f);
        for (size_t j = 0; j < len; j++) a[j] += b[j];
        stage_prec_pack(mine + i, a, len, o->prec, 1.0f);
    }
}

static void copy_half(const struct ring_ops *o, size_t lo, size_t hi)
{
    memcpy((uint16_t *)o->mine + lo, (const uint16_t *)o->theirs + lo, (hi - lo) * sizeof(uint16_t));
}

/* Replica's view of a ring over fp32 buffers. */
static struct ring_ops f32_ops(float *const *bufs, int R, int replica)
{
    return (struct ring_ops){add_f32, copy_f32, bufs[replica], bufs[(replica - 1 + R) % R], STAGE_PREC_FP32};
}

void allreduce_ring_window(float *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                           void (*barrier)(void *), void *ctx)
{
    TB_ASSERT(off + n <= N);
    if (R == 1) return;
    const struct ring_ops o = f32_ops(bufs, R, replica);
    const struct ring_win w = {n, off, N};
    ring(&w, R, replica, &o, barrier, ctx);
}

void allreduce_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx)
{
    allreduce_ring_window(bufs, n, 0, n, R, replica, barrier, ctx);
}

void allreduce_ring_half_window(uint16_t *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                                enum stage_prec prec, void (*barrier)(void *), void *ctx)
{
    TB_ASSERT(off + n <= N);
    if (R == 1) return;
    const struct ring_ops o = {add_half, copy_half, bufs[replica], bufs[(replica - 1 + R) % R], prec};
    const struct ring_win w = {n, off, N};
    ring(&w, R, replica, &o, barrier, ctx);
}

void allreduce_ring_half(uint16_t *const *bufs, size_t n, int R, int replica, enum stage_prec prec,
                         void (*barrier)(void *), void *ctx)
{
    allreduce_ring_half_window(bufs, n, 0, n, R, replica, prec, barrier, ctx);
}

int allreduce_ring_owned(int R, int replica) { return (replica + 1) % R; }

void reduce_scatter_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx)
{
    if (R == 1) return;
    const struct ring_ops o = f32_ops(bufs, R, replica);
    const struct ring_win w = {n, 0, n};
    ring_scatter(&w, R, replica, &o, barrier, ctx);
}

void allgather_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx)
{
    if (R == 1) return;
    const struct ring_ops o = f32_ops(bufs, R, replica);
    const struct ring_win w = {n, 0, n};
    barrier(ctx); /* every owner has finished writing its chunk */
    ring_gather(&w, R, replica, &o, barrier, ctx);
}
