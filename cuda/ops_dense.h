/* ops_dense.h — the CUDA kernels of a dense chain (mnist-mlp): the uint8 input's affine, bias and ReLU
 * after a cuBLAS GEMM, ReLU masks, bias gradients, softmax cross-entropy, and the on-device loop's
 * bookkeeping. extern "C" launchers (ops_dense.cu) enqueue on `s` and never synchronise; each returns
 * nothing, the caller checks cudaGetLastError after it (TB_CU_LAUNCHED). Layouts are the cpu
 * executor's: row-major (N, features), canonical parameter offsets.
 */
#ifndef TB_CUDA_OPS_DENSE_H
#define TB_CUDA_OPS_DENSE_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = x[i]·scale[i % C] + shift[i % C] for i < n (C ≤ 4 channels): the cpu's input_grey path. */
void tb_cuda_input_affine(float *out, const uint8_t *x, size_t n, int C, const float *scale4, const float *shift4,
                          cudaStream_t s);
/* y (N,OUT) += b (broadcast over rows; b may be NULL), then max(0,·) when relu. */
void tb_cuda_bias_act(float *y, const float *b, int N, int OUT, int relu, cudaStream_t s);
/* dy[i] = y[i] > 0 ? dy[i] : 0 for i < n (a fused or standalone ReLU's backward, in place). */
void tb_cuda_relu_mask(float *dy, const float *y, size_t n, cudaStream_t s);
/* din[i] += y[i] > 0 ? dy[i] : 0 (a standalone ReLU layer's backward into its input's gradient). */
void tb_cuda_relu_backward(float *din, const float *dy, const float *y, size_t n, cudaStream_t s);
/* y[i] = max(0, x[i]) (a standalone ReLU layer). */
void tb_cuda_relu_forward(float *y, const float *x, size_t n, cudaStream_t s);
/* db (OUT) += Σ_n dy (N,OUT), summed over n in ascending order. */
void tb_cuda_bias_grad(float *db, const float *dy, int N, int OUT, cudaStream_t s);
/* Per sample n < N: loss[n] = CE of softmax(logits[n]) against labels[n] with smoothing eps (log-sum-exp in
 * double: core/softmax_ce_row.h, op_loss.c's arithmetic), correct[n] = argmax == label, and when dlogits is
 * non-NULL dlogits[n] = (softmax − target)·scale (written, not added: the cpu zeroes it first). */
void tb_cuda_softmax_ce(float *loss, float *dlogits, uint8_t *correct, const float *logits, const int32_t *labels,
                        float scale, int N, int K, float eps, cudaStream_t s);

/* ---- bf16 storage (the executor's --precision bf16): the launchers above with activations and their
 * gradients as bf16 (void *: __nv_bfloat16 on the device), arithmetic in fp32, each stored value rounded
 * once to nearest even; biases, bias gradients, losses and the logits stay fp32. ---- */

/* out (n bf16) = x·scale + shift per channel. */
void tb_cuda_input_affine_bf16(void *out, const uint8_t *x, size_t n, int C, const float *scale4,
                               const float *shift4, cudaStream_t s);
/* y (N,OUT bf16) += b (fp32, may be NULL), then max(0,·) when relu: the GEMM's output rounded a second time. */
void tb_cuda_bias_act_bf16(void *y, const float *b, int N, int OUT, int relu, cudaStream_t s);
/* dy[i] = y[i] > 0 ? dy[i] : 0, both bf16. */
void tb_cuda_relu_mask_bf16(void *dy, const void *y, size_t n, cudaStream_t s);
/* din[i] += y[i] > 0 ? dy[i] : 0, all bf16. */
void tb_cuda_relu_backward_bf16(void *din, const void *dy, const void *y, size_t n, cudaStream_t s);
/* y[i] = max(0, x[i]), bf16. */
void tb_cuda_relu_forward_bf16(void *y, const void *x, size_t n, cudaStream_t s);
/* db (OUT, fp32) += Σ_n dy (N,OUT bf16), n ascending, summed in fp32. */
void tb_cuda_bias_grad_bf16(float *db, const void *dy, int N, int OUT, cudaStream_t s);
/* tb_cuda_softmax_ce from fp32 logits (the loss in fp32, as autocast computes it) with dlogits written as bf16. */
void tb_cuda_softmax_ce_bf16(float *loss, void *dlogits, uint8_t *correct, const float *logits,
                             const int32_t *labels, float scale, int N, int K, float eps, cudaStream_t s);
/* dst (n bf16) = src (n fp32) rounded to nearest even: the weights' bf16 copy after an update. */
void tb_cuda_to_bf16(void *dst, const float *src, size_t n, cudaStream_t s);

/* ---- fp16 storage (IEEE half: 11-bit significand, max 65504; the executor's --precision fp16, with loss
 * scaling): each launcher is its _bf16 twin above with fp16 for bf16 (void *: __half on the device), the same
 * fp32 arithmetic and one rounding to nearest even per stored value (an overflow is ±inf, not saturated). ---- */

/* tb_cuda_input_affine_bf16 with fp16 storage. */
void tb_cuda_input_affine_fp16(void *out, const uint8_t *x, size_t n, int C, const float *scale4,
                               const float *shift4, cudaStream_t s);
/* tb_cuda_bias_act_bf16 with fp16 storage. */
void tb_cuda_bias_act_fp16(void *y, const float *b, int N, int OUT, int relu, cudaStream_t s);
/* tb_cuda_relu_mask_bf16 with fp16 storage. */
void tb_cuda_relu_mask_fp16(void *dy, const void *y, size_t n, cudaStream_t s);
/* tb_cuda_relu_backward_bf16 with fp16 storage. */
void tb_cuda_relu_backward_fp16(void *din, const void *dy, const void *y, size_t n, cudaStream_t s);
/* tb_cuda_relu_forward_bf16 with fp16 storage. */
void tb_cuda_relu_forward_fp16(void *y, const void *x, size_t n, cudaStream_t s);
/* tb_cuda_bias_grad_bf16 with fp16 storage. */
void tb_cuda_bias_grad_fp16(float *db, const void *dy, int N, int OUT, cudaStream_t s);
/* tb_cuda_softmax_ce_bf16 with fp16 dlogits; scale stays a plain multiplier (the executor passes
 * loss_scale/n_global). */
void tb_cuda_softmax_ce_fp16(float *loss, void *dlogits, uint8_t *correct, const float *logits,
                             const int32_t *labels, float scale, int N, int K, float eps, cudaStream_t s);
/* dst (n fp16) = src (n fp32) rounded to nearest even (|x| ≥ 65520 gives ±inf): the weights' fp16 copy. */
void tb_cuda_to_fp16(void *dst, const float *src, size_t n, cudaStream_t s);

/* The on-device loop (executor_run_steps on cuda): step k of a run whose data is all on the device. */
struct tb_cuda_loop_dev {
    const uint8_t *x_all;   /* (steps, per) pixels of every step's sample(s) */
    const int32_t *y_all;   /* (steps, n) labels */
    const float *alpha_all; /* (steps) the host-computed step size of each step (Adam: optim_adam_alpha) */
    double *loss_all;       /* (steps) out: Σ per-sample loss of each step */
    long long *k;           /* the current step's index into the run, advanced by tb_cuda_loop_advance */
    long long steps;
};
/* Step k's input: x = pixels·scale + shift into in (n·per floats), labels into y, alpha into *alpha. */
void tb_cuda_loop_gather(struct tb_cuda_loop_dev d, float *in, int32_t *y, float *alpha, int n, size_t per,
                         float scale, float shift, cudaStream_t s);
/* loss_all[k] = Σ losses[0..n) (double, ascending), then k += 1: the last node of a captured step. */
void tb_cuda_loop_advance(struct tb_cuda_loop_dev d, const float *losses, int n, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
