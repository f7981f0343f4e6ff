/* op_se.h — squeeze-and-excitation channel scaling y (N,H,W,C) = x (N,H,W,C) · s (N,C).
 *
 * What it is: the "excite" multiply of an SE block and its backward to x and to s, plus double refs.
 * What it is not: the squeeze (op_pool.h) or the SE block's two 1×1 convolutions on (N,C), which are
 * dense layers (op_dense.h), or the sigmoid gate (op_act.h).
 * Threading: forward is partitioned over the N·H·W rows; backward over samples (a thread writes the
 * dinp rows and the dscale row of its samples, reading dout once). ds is a double sum over H·W in
 * ascending order: bitwise identical for any (ith,nth). Backward ACCUMULATES into dinp and dscale.
 */
#ifndef TB_OP_SE_H
#define TB_OP_SE_H

#include <stddef.h>

/* out (N,HW,C) = inp (N,HW,C) · scale (N,C) broadcast over the HW positions. */
void se_scale_forward(float *out, const float *inp, const float *scale, int N, size_t HW, int C, int ith,
                      int nth);
/* dinp (N,HW,C) += dout·scale (= when acc is 0); dscale (N,C) += Σ_hw dout·inp. Either output may be NULL
 * to skip it. */
void se_scale_backward(float *dinp, float *dscale, const float *dout, const float *inp, const float *scale, int N,
                       size_t HW, int C, int acc, int ith, int nth);

/* Double references, single-threaded; the backward ref accumulates. */
void se_scale_forward_ref(double *out, const double *inp, const double *scale, int N, size_t HW, int C);
void se_scale_backward_ref(double *dinp, double *dscale, const double *dout, const double *inp,
                           const double *scale, int N, size_t HW, int C);

#endif
