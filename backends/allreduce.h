/* allreduce.h — sum R equally long float buffers in place, one buffer per replica, over shared memory.
 *
 * The ring algorithm NCCL and Horovod use: the buffer is cut into R chunks; R−1 reduce-scatter steps
 * (replica r adds its left neighbour's copy of chunk (r−s−1) mod R into its own) leave replica r with
 * the complete sum of chunk (r+1) mod R; R−1 all-gather steps copy the complete chunks around the ring.
 * Every chunk is summed in a fixed order, so the result is deterministic and identical on every
 * replica. Each replica's thread calls allreduce_ring with its own index; the barrier separates steps.
 * Work inside a step is streamed in cache-sized pieces.
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
