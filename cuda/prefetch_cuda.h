/* prefetch_cuda.h — inputs copied ahead for a cuda executor (--prefetch): a ring of slots, each a pinned
 * host staging buffer and a device buffer for one pass's pixels and labels, filled on a copy stream of
 * its own while the executor's stream computes earlier passes; events order the two streams.
 *
 * put (executor_prefetch) copies a later pass's inputs into the next slot's pinned buffer and enqueues
 * its upload; take (the pass's own upload) finds the slot by the pass's pointers, count and step, makes
 * the compute stream wait for that upload, and copies device to device into the executor's input
 * buffers (~1000× PCIe's bandwidth, so the pass waits for nothing that did not already overlap). A pass
 * without a matching slot uploads as before. A slot is reused only after its upload and its take are
 * complete. One thread drives it (the executor's contract). Ran on an H200 (test_cuda_mirrored's
 * prefetch_is_bitwise_neutral).
 */
#ifndef TB_CUDA_PREFETCH_H
#define TB_CUDA_PREFETCH_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

struct tb_cuda_prefetch;

/* A ring of `slots` slots for passes of up to n_max samples of per_in pixel bytes, with its own copy
 * stream, on the current GPU. */
int tb_cuda_prefetch_create(struct tb_cuda_prefetch **pf, int slots, int n_max, size_t per_in);
/* Releases everything (NULL is fine); waits for copies in flight. */
void tb_cuda_prefetch_destroy(struct tb_cuda_prefetch *pf);
/* Starts the upload of a later pass's n samples (x and/or y may be NULL: not read by that pass). */
int tb_cuda_prefetch_put(struct tb_cuda_prefetch *pf, const uint8_t *x, const int32_t *y, int n, long step);
/* If a slot holds this pass's inputs: the copy into dx/dy ordered on stream s after their upload, and 1;
 * else 0 (nothing enqueued); a negative tb status on a CUDA failure. */
int tb_cuda_prefetch_take(struct tb_cuda_prefetch *pf, const uint8_t *x, const int32_t *y, int n, long step,
                          uint8_t *dx, int32_t *dy, cudaStream_t s);

#endif
