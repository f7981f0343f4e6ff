/* grad_layout.h — where the cuda executor keeps the activation gradients of a training pass (grad_layout.c).
 *
 * A tensor's gradient lives, within a backward, from its last reader's backward (the first to write it) to its
 * producer's backward (the last to read it: its dout). Gradients whose lives do not overlap share bytes, so
 * the gradient arena is the most that is alive at once, not the sum of every tensor (the cpu layout's copy of
 * the activations: half of effnet-b0's 48 GB at 224 batch 256 on the H200). The loss's gradient, written
 * by the forward, lives from the loss layer on, as every backward starts there.
 */
#ifndef TB_CUDA_GRAD_LAYOUT_H
#define TB_CUDA_GRAD_LAYOUT_H

#include "model.h"

#include <stddef.h>

/* Fills doff (n_tensors) with each gradient's byte offset at n_max samples (elements of 4 bytes, or 2 with
 * bf16 but for the logits' 4), 256-byte aligned, sharing bytes between gradients whose lives are disjoint;
 * returns the arena's bytes, or 0 when the model has no gradient or the host is out of memory. */
size_t tb_cuda_grad_layout(const struct model *m, int n_max, int bf16, size_t *doff);

/* The backward steps (0 = the last layer's backward) between which tensor t's gradient is alive, inclusive:
 * 0 when it has none (no gradient, or nothing reads it: it never crosses a backward). */
int tb_cuda_grad_life(const struct model *m, int t, int *first, int *last);

#endif
