/* allreduce.c — the ring all-reduce's sums over shared memory, each chunk's in one pass (see allreduce.h). */
#include "allreduce.h"

#include "layout.h"
#include "status.h"

#include <string.h>

/* Elements a block of the direct sums: the running sum stays in L1 while the R sources stream past it. */
enum { AR_BLOCK = 1024 };

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

/* Element i of replica r's buffer of prec's elements (fp32, or a 2-byte format whose partial sums are
 * rounded to it). */
static char *elem(void *const *bufs, enum stage_prec prec, int r, size_t i)
{
    return (char *)bufs[r] + i * stage_prec_bytes(prec);
}

/* fp32 block of sum_chunk: the first two sources added as they stream, the middle ones into the
 * running sum, the owner's own value last, straight into its buffer (d aliases the last source element
 * for element, so each is read before it is written). At R = 2 this is the ring's one step. */
static void sum_block_f32(float *const *b, int R, int k, size_t i, size_t len)
{
    const float *s0 = b[k] + i, *s1 = b[(k + 1) % R] + i;
    float *d = b[(k + R - 1) % R] + i;
    if (R == 2) {
        for (size_t e = 0; e < len; e++) d[e] = s0[e] + s1[e];
        return;
    }
    float acc[AR_BLOCK];
    for (size_t e = 0; e < len; e++) acc[e] = s0[e] + s1[e];
    for (int j = 2; j < R - 1; j++) {
        const float *src = b[(k + j) % R] + i;
        for (size_t e = 0; e < len; e++) acc[e] += src[e];
    }
    for (size_t e = 0; e < len; e++) d[e] = acc[e] + d[e];
}

/* 2-byte block of sum_chunk: decoded, each partial sum formed in fp32 and rounded back to nearest. */
static void sum_block_half(uint16_t *const *b, int R, int k, size_t i, size_t len, enum stage_prec prec)
{
    float acc[AR_BLOCK], g[AR_BLOCK];
    uint16_t h[AR_BLOCK];
    stage_prec_unpack(acc, b[k] + i, len, prec, 1.0f);
    for (int j = 1; j < R; j++) {
        stage_prec_unpack(g, b[(k + j) % R] + i, len, prec, 1.0f);
        for (size_t e = 0; e < len; e++) acc[e] += g[e];
        stage_prec_pack(h, acc, len, prec, 1.0f);
        if (j < R - 1) stage_prec_unpack(acc, h, len, prec, 1.0f);
    }
    memcpy(b[(k + R - 1) % R] + i, h, len * sizeof(uint16_t));
}

/* Chunk k's [lo, hi) summed over the R buffers in the ring's order — g_k, then + g_{k+1}, …, + g_{k−1},
 * the order its R−1 neighbour-to-neighbour steps formed, each partial sum rounded to the buffers'
 * precision — into bufs[k−1], the chunk's owner, whose own g_{k−1} is the last addend. The same bits
 * as the ring (float addition commutes), from one pass instead of R−1 steps. */
static void sum_chunk(void *const *bufs, int R, int k, size_t lo, size_t hi, enum stage_prec prec)
{
    /* fp32 at R = 2 keeps no running sum: one loop over the chunk, as the ring's step. */
    const size_t block = prec == STAGE_PREC_FP32 && R == 2 ? hi - lo : AR_BLOCK;
    for (size_t i = lo; i < hi; i += block) {
        const size_t len = hi - i < block ? hi - i : block;
        if (prec == STAGE_PREC_FP32) sum_block_f32((float *const *)bufs, R, k, i, len);
        else sum_block_half((uint16_t *const *)bufs, R, k, i, len, prec);
    }
}

/* The reduce-scatter: after it, replica r's buffer holds the complete sum of the chunk it owns
 * (allreduce_ring_owned). Over shared memory each owner reads its chunk from every buffer at once: two
 * barriers instead of the ring's R, and R reads and one write of a chunk a replica instead of the ring's
 * R−1 steps of two reads and a write. Only a chunk's owner writes it, and only into its own buffer, so the
 * replicas never touch a line another is writing; the other chunks of each buffer keep its own values. */
static void scatter(void *const *bufs, const struct ring_win *w, int R, int replica, enum stage_prec prec,
                    void (*barrier)(void *), void *ctx)
{
    barrier(ctx); /* every replica's gradients are complete before anyone reads another's */
    const int k = allreduce_ring_owned(R, replica);
    size_t lo, hi;
    win_chunk(w, k, R, &lo, &hi);
    if (hi > lo) sum_chunk(bufs, R, k, lo, hi, prec);
    barrier(ctx); /* every owner's chunk is complete */
}

/* The all-gather: each replica copies every chunk it does not own from that chunk's owner, then a
 * barrier, so no owner's chunk is overwritten (by its next backward) while another still reads it. */
static void gather(void *const *bufs, const struct ring_win *w, int R, int replica, enum stage_prec prec,
                   void (*barrier)(void *), void *ctx)
{
    for (int k = 0; k < R; k++) {
        const int owner = (k + R - 1) % R;
        if (owner == replica) continue;
        size_t lo, hi;
        win_chunk(w, k, R, &lo, &hi);
        if (hi > lo)
            memcpy(elem(bufs, prec, replica, lo), elem(bufs, prec, owner, lo), (hi - lo) * stage_prec_bytes(prec));
    }
    barrier(ctx);
}

/* The whole all-reduce of a window, for either element type. */
static void allreduce_window(void *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                             enum stage_prec prec, void (*barrier)(void *), void *ctx)
{
    TB_ASSERT(off + n <= N);
    if (R == 1) return;
    const struct ring_win w = {n, off, N};
    scatter(bufs, &w, R, replica, prec, barrier, ctx);
    gather(bufs, &w, R, replica, prec, barrier, ctx);
}

void allreduce_ring_window(float *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                           void (*barrier)(void *), void *ctx)
{
    allreduce_window((void *const *)bufs, n, off, N, R, replica, STAGE_PREC_FP32, barrier, ctx);
}

void allreduce_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx)
{
    allreduce_ring_window(bufs, n, 0, n, R, replica, barrier, ctx);
}

void allreduce_ring_half_window(uint16_t *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                                enum stage_prec prec, void (*barrier)(void *), void *ctx)
{
    allreduce_window((void *const *)bufs, n, off, N, R, replica, prec, barrier, ctx);
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
    const struct ring_win w = {n, 0, n};
    scatter((void *const *)bufs, &w, R, replica, STAGE_PREC_FP32, barrier, ctx);
}

void allgather_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx)
{
    if (R == 1) return;
    const struct ring_win w = {n, 0, n};
    barrier(ctx); /* every owner has finished writing its chunk */
    gather((void *const *)bufs, &w, R, replica, STAGE_PREC_FP32, barrier, ctx);
}
