/* op_conv_se.h — a 1×1 convolution (GEMM1X1 on gemm_rows) that reads an SE scale's input instead of its
 * output: out = (x ⊙ s[n]) · w computed as x · (diag(s[n]) · w), per sample n.
 *
 * Why: in every MBConv block the SE scale writes x ⊙ s (a whole tensor: 77 MB at 112×112×32 batch 16)
 * only for the projection convolution to read it, and its backward reads that convolution's input
 * gradient and x again for dscale. With the scale folded into the weights (C·OC ≤ 10,240 floats, built in
 * L1 per sample) neither pass exists: the weight gradient is Σ_n diag(s[n]) · G[n] and dscale[n][c] =
 * Σ_o w[c][o] · G[n][c][o] from the per-sample G[n] = x[n]ᵀ · dout[n], and the data gradient comes out
 * already multiplied by s[n].
 * What it is not: bitwise the unfused pair (x·s is rounded before the product there); the executor's
 * test holds them within float tolerance.
 * Threading: like every kernel here, fixed units (BatchNorm row chunks, samples, 16-float blocks) split
 * over threads, so any nth gives the same bits.
 */
#ifndef TB_OP_CONV_SE_H
#define TB_OP_CONV_SE_H

#include "op_conv.h"

#include <stddef.h>

/* Whether these kernels run shape s: a bias-free 1×1 convolution gemm_rows computes (small C·OC). */
int conv_se_fusable(const struct conv_shape *s);
/* Whether the executor should run them on s: conv_se_fusable, and H·W ≥ 4·OC (a sample's weight-gradient
 * part, C·OC floats, at most a quarter of its scaled tensor, H·W·C): below that the per-sample parts and
 * short GEMMs cost more than the passes the fusion saves (BENCHMARKS.md, twentieth session). */
int conv_se_pays(const struct conv_shape *s);
/* Floats of per-thread scratch the forward and backward-data kernels need (one scaled weight matrix, and
 * wᵀ beside it for the backward-data pass). */
size_t conv_se_scratch_floats(const struct conv_shape *s);
/* Floats of the shared part buffer of the weight gradient: N·C·OC (one G[n] per sample). */
size_t conv_se_part_floats(const struct conv_shape *s);

/* out (N·H·W, OC) = (x ⊙ scale[n]) · w, scale (N, C); with part (non-NULL) also the statistics of the
 * BatchNorm reading out, as conv_forward_gemm1x1_bn takes them (bitwise bn_forward_train_chunks of out).
 * Threads take whole BatchNorm row chunks; scr is this thread's conv_se_scratch_floats. */
void conv_se_forward(float *out, const float *x, const float *scale, const float *w, const struct conv_shape *s,
                     double *part, float *scr, int ith, int nth);
/* dx (N·H·W, C) = (dout · wᵀ) ⊙ scale[n]: the SE scale's input gradient through its product (overwritten,
 * not read). */
void conv_se_backward_data(float *dx, const float *dout, const float *w, const float *scale,
                           const struct conv_shape *s, float *scr, int ith, int nth);
/* Weight gradient, phase 1: part (N, C, OC) = x[n]ᵀ · dout[n] per sample; partitioned over samples. */
void conv_se_backward_params_chunks(float *part, const float *x, const float *dout, const struct conv_shape *s,
                                    int ith, int nth);
/* Phase 2, after a barrier: dw (C, OC) += Σ_n scale[n][c] · part[n][c][o] in sample order (acc 0: written,
 * not added to). */
void conv_se_backward_params_finish(float *dw, const float *part, const float *scale, const struct conv_shape *s,
                                    int acc, int ith, int nth);
/* After phase 1 (part intact): dscale (N, C) += Σ_o w[c][o] · part[n][c][o], summed in double. */
void conv_se_dscale(float *dscale, const float *part, const float *w, const struct conv_shape *s, int ith, int nth);

#endif
