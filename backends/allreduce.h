/* allreduce.h — sum R equally long float buffers in place, one buffer per replica, over shared memory.
 *
 * The ring algorithm's result, as NCCL and Horovod form it: the buffer is cut into R chunks; chunk k is
 * summed g_k + g_{k+1} + … + g_{k−1} (the order a ring's R−1 neighbour-to-neighbour steps add in) and
 * ends complete in replica k−1's buffer (the reduce-scatter), then is copied to every other buffer (the
 * all-gather). Over shared memory no step needs a neighbour: each chunk's owner sums it from all R
 * buffers in one pass and each replica copies the chunks it does not own, so a reduce-scatter is two
 * barriers and an all-reduce three, not the ring's R and 2R − 1, with the ring's bits. Every chunk is summed in
 * a fixed order, so the result is deterministic and identical on every replica. Each replica's thread
 * calls with its own index; the barrier separates the phases. Sums are streamed in L1-sized blocks.
 */
#ifndef TB_ALLREDUCE_H
#define TB_ALLREDUCE_H

#include "stage_precision.h"

#include <stddef.h>
#include <stdint.h>

/* bufs[0..R) each hold n floats; on return every bufs[k] holds Σ_r bufs[r]. Called by all R replica
 * threads (replica = 0..R-1), with barrier(ctx) synchronising them. */
void allreduce_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx);
/* allreduce_ring over a window of a whole: the n elements are elements [off, off+n) of N, and the ring's
 * chunks are the whole's (tb_slice(N, k, R)) cut to the window, so an element is summed in the same order
 * whatever window holds it (an ipu stage's gradient slice, wherever the stages are cut). */
void allreduce_ring_window(float *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                           void (*barrier)(void *), void *ctx);
/* The same ring over 2-byte values of precision prec (bf16, fp16): each partial sum is formed in fp32 and
 * rounded back to nearest, in the same fixed order, so every replica ends with the same bits. */
void allreduce_ring_half(uint16_t *const *bufs, size_t n, int R, int replica, enum stage_prec prec,
                         void (*barrier)(void *), void *ctx);
/* allreduce_ring_half over a window [off, off+n) of N, chunked as allreduce_ring_window. */
void allreduce_ring_half_window(uint16_t *const *bufs, size_t n, size_t off, size_t N, int R, int replica,
                                enum stage_prec prec, void (*barrier)(void *), void *ctx);

/* The two halves of allreduce_ring, for a sharded update (ZeRO stage 1): the reduce-scatter leaves
 * replica r with the complete sum of chunk allreduce_ring_owned(R, r) — chunk k is tb_slice(n, k, R) —
 * and the all-gather (after its own barrier) copies every replica's owned chunk to all the others.
 * reduce_scatter_ring then allgather_ring on the same buffers is allreduce_ring, bit for bit. */
void reduce_scatter_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx);
/* The all-gather half: on return every bufs[k] holds each replica's owned chunk. */
void allgather_ring(float *const *bufs, size_t n, int R, int replica, void (*barrier)(void *), void *ctx);
/* The chunk index replica holds complete after reduce_scatter_ring over R replicas. */
int allreduce_ring_owned(int R, int replica);

#endif
