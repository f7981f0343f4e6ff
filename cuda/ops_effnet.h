/* ops_effnet.h — launchers of the CUDA EfficientNet kernels (cuda/ops_conv.cu, ops_dwconv.cu,
 * ops_norm.cu, ops_act.cu), callable from C11.
 *
 * Contract, as core/layout.h's for the CPU kernels, of which each launcher is the GPU twin:
 *   - activations NHWC, conv weights HWIO (KH,KW,C/G,OC), depthwise weights (KH,KW,C), fp32 unless a
 *     name ends in _bf16 or _fp16 (bf16 or fp16 storage, fp32 arithmetic: the sections at the end);
 *   - every pointer is device memory; stream is a cudaStream_t passed as void* (NULL: legacy stream);
 *   - each returns 0, a (positive) cudaError_t code, or the negative tb status of a failed
 *     tb_cublas_sgemm / tb_cublas_gemm_ex (its message already recorded); nothing is allocated: reductions take a
 *     scratch buffer of the size the matching *_scratch_bytes function returns (256-byte aligned);
 *   - backward ACCUMULATES (+=) into dinp/dw/db unless an acc argument is 0 (then =); gradients are +dL/dx;
 *   - reductions are chunked in a fixed order without atomics: the same bits on every run.
 * Compiled with nvcc -arch=sm_90; tests/test_cuda_ops.c checks them against the CPU kernels (22/22 on an
 * H200, 2026-11-28).
 */
#ifndef TB_CUDA_OPS_EFFNET_H
#define TB_CUDA_OPS_EFFNET_H

#include "op_conv.h" /* struct conv_shape (core/) */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLAS is loaded with dlopen by cuda/cuda_util.c (linking it cost every bench process ~90 ms): the
 * GEMMs here go through its wrapper, declared as there. A handle is bound to one stream at creation, so
 * the stream passed to a conv launcher must be its handle's. TF32 is off in those handles: true fp32. The bf16
 * and fp16 GEMMs use cuda_util.h's tb_cublas_gemm_ex (ops_conv.cu includes it). */
typedef struct tb_cublas tb_cublas;
int tb_cublas_sgemm(tb_cublas *h, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);

/* ---- ops_conv.cu: dense (groups == 1) convolutions on cuBLAS ---- */

/* out (N·H·W, OC) = inp (N·H·W, C) · w (C, OC) + b (OC, may be NULL): a 1×1 stride-1 conv is one GEMM. */
int tb_cuda_conv1x1_forward(tb_cublas *cublas, float *out, const float *inp, const float *w, const float *b,
                            const struct conv_shape *s, void *stream);
/* dinp (N·H·W, C) += dout · wᵀ (= when acc is 0), on the handle's stream. */
int tb_cuda_conv1x1_backward_data(tb_cublas *cublas, float *dinp, const float *dout, const float *w,
                                  const struct conv_shape *s, int acc);
/* dw (C, OC) += inpᵀ · dout; db (OC) += Σ_rows dout (db may be NULL; needs scratch). */
int tb_cuda_conv1x1_backward_params(tb_cublas *cublas, float *dw, float *db, const float *inp, const float *dout,
                                    const struct conv_shape *s, void *scratch, void *stream);
/* Scratch bytes of tb_cuda_conv1x1_backward_params (the bias gradient's chunk sums). */
size_t tb_cuda_conv1x1_scratch_bytes(const struct conv_shape *s);
/* k×k dense conv (the stem) as im2col + GEMM: out = conv(inp, w) + b (b may be NULL). */
int tb_cuda_conv_im2col_forward(tb_cublas *cublas, float *out, const float *inp, const float *w, const float *b,
                                const struct conv_shape *s, void *scratch, void *stream);
/* dinp += convᵀ(dout, w) (= when acc is 0): GEMM into columns, then a gather col2im (no atomics). */
int tb_cuda_conv_im2col_backward_data(tb_cublas *cublas, float *dinp, const float *dout, const float *w,
                                      const struct conv_shape *s, int acc, void *scratch, void *stream);
/* dw (KH·KW·C, OC) += colsᵀ · dout; db (OC) += Σ dout (db may be NULL). */
int tb_cuda_conv_im2col_backward_params(tb_cublas *cublas, float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s, void *scratch, void *stream);
/* Scratch bytes of the im2col launchers: the columns (N·OH·OW, KH·KW·C) and the bias sums. */
size_t tb_cuda_conv_im2col_scratch_bytes(const struct conv_shape *s);

/* Direct 3×3 conv of 1 or 3 input channels (the stem; groups 1, OC ≤ 256): no columns, no GEMM.
 * 1 when the direct launchers below take the shape. */
int tb_cuda_conv_direct_fits(const struct conv_shape *s);
/* out (N,OH,OW,OC) = conv(inp, w (3,3,C,OC)) + b (OC, may be NULL), directly. */
int tb_cuda_conv_direct_forward(float *out, const float *inp, const float *w, const float *b,
                                const struct conv_shape *s, void *stream);
/* dw (3·3·C, OC) += corr(inp, dout); db (OC) += Σ dout (may be NULL), directly (needs scratch). The
 * backward-data of such a conv is tb_cuda_conv_im2col_backward_data's (the stem has none to compute). */
int tb_cuda_conv_direct_backward_params(float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s, void *scratch, void *stream);
/* Scratch bytes of tb_cuda_conv_direct_backward_params (chunk sums of the taps and the bias). */
size_t tb_cuda_conv_direct_scratch_bytes(const struct conv_shape *s);
/* The direct forward's thread body run on the host (host arrays; no GPU needed): its index logic under test. */
int tb_cuda_conv_direct_forward_host(float *out, const float *inp, const float *w, const float *b,
                                     const struct conv_shape *s);
/* The direct weight gradient's thread bodies run on the host in the kernel's order of sums (host arrays). */
int tb_cuda_conv_direct_backward_params_host(float *dw, float *db, const float *inp, const float *dout,
                                             const struct conv_shape *s);

/* ---- ops_dwconv.cu: depthwise (groups == C == OC) and grouped (C/groups channels per group) ---- */

/* The BatchNorm(+SiLU) whose output a convolution reads, applied to each input value as it is loaded
 * (the CPU's dwconv_forward_bn_in): y = silu((x - save[c])·gamma[c]·save[C+c] + beta[c]). */
struct tb_cuda_bn_in {
    const float *save, *gamma, *beta; /* save (2,C) = [μ | rstd] of the training forward */
    int silu;                         /* 1: SiLU after the affine map */
};

/* out (N,OH,OW,C) = dwconv(in, w (KH,KW,C)) + b (C, may be NULL); in = inp, or bn(inp) when bn is
 * non-NULL (the normalised input is never stored); epilogue act: 0 none, 1 SiLU. */
int tb_cuda_dwconv_forward(float *out, const float *inp, const float *w, const float *b,
                           const struct tb_cuda_bn_in *bn, int act, const struct conv_shape *s, void *stream);
/* dinp (N,H,W,C) += dwconvᵀ(dout, w) (= when acc is 0). */
int tb_cuda_dwconv_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                 int acc, void *stream);
/* The backward-data's blocked kernel (K 3 or 5, stride 1 or 2) run on the host over every thread, a channel a
 * thread or (wide, C % 4 == 0) four (host arrays; no GPU needed): its index logic under test;
 * cudaErrorInvalidValue for a shape it does not take. */
int tb_cuda_dwconv_backward_data_host(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                      int acc, int wide);
/* The forward's blocked kernel the same way (no BatchNorm on load; act 0 or 1 as the launcher's). */
int tb_cuda_dwconv_forward_host(float *out, const float *inp, const float *w, const float *b, int act,
                                const struct conv_shape *s, int wide);
/* The weight gradient's blocked kernel (the same shapes) run on the host over every thread, in the kernel's
 * order of sums, without a BatchNorm on load (host arrays; no GPU needed); cudaErrorInvalidValue otherwise. */
int tb_cuda_dwconv_backward_params_host(float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s);
/* dw (KH,KW,C) += corr(in, dout); db (C) += Σ dout (may be NULL); in as in the forward (bn may be NULL). */
int tb_cuda_dwconv_backward_params(float *dw, float *db, const float *inp, const float *dout,
                                   const struct tb_cuda_bn_in *bn, const struct conv_shape *s, void *scratch,
                                   void *stream);
/* Scratch bytes of tb_cuda_dwconv_backward_params and tb_cuda_gconv_backward_params. */
size_t tb_cuda_dwconv_scratch_bytes(const struct conv_shape *s);
/* Grouped conv (1 < groups < C, e.g. G16's 16-channel groups): out = conv(inp, w (KH,KW,C/G,OC)) + b. */
int tb_cuda_gconv_forward(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                          void *stream);
/* dinp (N,H,W,C) += convᵀ(dout, w) (= when acc is 0), grouped. */
int tb_cuda_gconv_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s, int acc,
                                void *stream);
/* dw (KH,KW,C/G,OC) += corr(inp, dout); db (OC) += Σ dout (may be NULL), grouped. */
int tb_cuda_gconv_backward_params(float *dw, float *db, const float *inp, const float *dout,
                                  const struct conv_shape *s, void *scratch, void *stream);

/* ---- ops_norm.cu: BatchNorm over (M = N·H·W, C) and GroupNorm; act 0 none, 1 SiLU ---- */

/* The wide BatchNorm statistics' thread bodies (4 fp32 channels a thread, C % 4 == 0) run on the host: part
 * (ops_chunks(M), 2, C) = [Σx | Σx²] per row chunk, as the kernel leaves it (host arrays; no GPU needed). */
int tb_cuda_bn_stats_host(double *part, const float *inp, size_t M, int C);
/* Scratch bytes of the BatchNorm launchers for M rows of C channels (chunk sums and coefficients). */
size_t tb_cuda_bn_scratch_bytes(size_t M, int C);
/* Training forward: save (2,C) = [μ | rstd] (biased variance, ε inside the root); out = act(γ·x̂ + β) (out NULL:
 * not written, for a reader that applies save on load: tb_cuda_bn_in); run_mean/run_var (may be NULL) ←
 * momentum·run + (1-momentum)·batch with the unbiased variance. */
int tb_cuda_bn_forward_train(float *out, float *save, float *run_mean, float *run_var, const float *inp,
                             const float *gamma, const float *beta, size_t M, int C, float eps, float momentum,
                             int act, void *scratch, void *stream);
/* Eval forward: out = act(γ·(x - run_mean)/sqrt(run_var + ε) + β). */
int tb_cuda_bn_forward_eval(float *out, const float *inp, const float *run_mean, const float *run_var,
                            const float *gamma, const float *beta, size_t M, int C, float eps, int act,
                            void *stream);
/* Backward: dinp += ∂L/∂x (= when acc is 0), dgamma += Σdz·x̂, dbeta += Σdz, dz = dout·act'(z)
 * recomputed from x (dout is NOT overwritten, unlike the CPU's bn_backward with SiLU). */
int tb_cuda_bn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *save, const float *gamma, const float *beta, size_t M, int C, int act, int acc,
                        void *scratch, void *stream);
/* Scratch bytes of the GroupNorm launchers. */
size_t tb_cuda_gn_scratch_bytes(int N, size_t HW, int C);
/* GroupNorm forward: save (N,G,2) = (μ, rstd) per sample and group of C/G channels; out = act(γ·x̂ + β). */
int tb_cuda_gn_forward(float *out, float *save, const float *inp, const float *gamma, const float *beta, int N,
                       size_t HW, int C, int G, float eps, int act, void *stream);
/* GroupNorm backward: dinp += ∂L/∂x (= when acc is 0), dgamma += Σdz·x̂, dbeta += Σdz. */
int tb_cuda_gn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *save, const float *gamma, const float *beta, int N, size_t HW, int C, int G,
                        int act, int acc, void *scratch, void *stream);

/* ---- ops_act.cu: elementwise, pooling, SE, residual, dropout ---- */

/* out (n) = silu(inp); in place allowed. */
int tb_cuda_silu_forward(float *out, const float *inp, size_t n, void *stream);
/* dinp (n) += dout · silu'(inp). */
int tb_cuda_silu_backward(float *dinp, const float *dout, const float *inp, size_t n, void *stream);
/* out (n) = σ(inp); in place allowed. */
int tb_cuda_sigmoid_forward(float *out, const float *inp, size_t n, void *stream);
/* dinp (n) += dout · out·(1 - out), from the sigmoid's OUTPUT. */
int tb_cuda_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n, void *stream);
/* out (n) = a + b (the residual add without drop-connect); out may alias a or b. */
int tb_cuda_add_forward(float *out, const float *a, const float *b, size_t n, void *stream);
/* da (n) += dout, db (n) += dout (either may be NULL). */
int tb_cuda_add_backward(float *da, float *db, const float *dout, size_t n, void *stream);
/* out (N,C) = mean over HW of inp (N,HW,C), summed in double like the CPU. */
int tb_cuda_gap_forward(float *out, const float *inp, int N, size_t HW, int C, void *stream);
/* dinp (N,HW,C) += dout (N,C) / HW. */
int tb_cuda_gap_backward(float *dinp, const float *dout, int N, size_t HW, int C, void *stream);
/* out (N,HW,C) = inp · scale (N,C) broadcast over HW: the SE excite. */
int tb_cuda_se_scale_forward(float *out, const float *inp, const float *scale, int N, size_t HW, int C,
                             void *stream);
/* dinp += dout·scale (= when acc is 0; may be NULL); dscale (N,C) += Σ_hw dout·inp in double (may be NULL). */
int tb_cuda_se_scale_backward(float *dinp, float *dscale, const float *dout, const float *inp, const float *scale,
                              int N, size_t HW, int C, int acc, void *stream);
/* The SE block is tb_cuda_gap_forward → tb_cuda_conv1x1_forward (H = W = 1, with bias) → SiLU →
 * conv1x1 → sigmoid → tb_cuda_se_scale_forward, each with its backward. */

/* Dropout / drop-connect keys: core/op_dropout.h's struct dropout_args, as scalars. */
struct tb_cuda_drop {
    uint64_t seed, step; /* run seed, optimizer step */
    uint32_t layer;      /* the layer's rng id */
    float p;             /* drop probability; 0 = identity, >= 1 drops everything */
};
/* out (N,D) = inp · keep(g0+n, e)/(1-p), the CPU's dropout_forward mask bit for bit. */
int tb_cuda_dropout_forward(float *out, const float *inp, int N, size_t D, uint64_t g0,
                            const struct tb_cuda_drop *a, void *stream);
/* dinp (N,D) += dout · keep(g0+n, e)/(1-p), the forward's mask recomputed. */
int tb_cuda_dropout_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                             const struct tb_cuda_drop *a, void *stream);
/* out (N,D) = shortcut (may be NULL: 0) + branch · keep(g0+n)/(1-p): drop-connect, fused residual add. */
int tb_cuda_dropconnect_add_forward(float *out, const float *shortcut, const float *branch, int N, size_t D,
                                    uint64_t g0, const struct tb_cuda_drop *a, void *stream);
/* dinp (N,D) += dout · keep(g0+n)/(1-p) (= when acc is 0): the branch's gradient (the shortcut's is dout). */
int tb_cuda_dropconnect_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                                 const struct tb_cuda_drop *a, int acc, void *stream);

/* ---- ops_input.cu: the input layer's resampling, channel expansion and training augmentation ---- */

/* core/exec.c's input_forward for an (N, SH, SW, SC) uint8 batch into (N, H, W, C) floats. */
struct tb_cuda_input {
    int SH, SW, SC, H, W, C;         /* source and destination shapes (C ≤ 4; SC == C or 1) */
    float scale[4], shift[4];        /* per channel: x = pixel·scale + shift (exec_priv.h's input_affine) */
    int augment, pad, flip;          /* augment: the training crop (±pad, zero fill) and flip */
    uint64_t seed, step, g0;         /* the draw's key: run seed, optimizer step, sample 0's global index */
    float ry, rx;                    /* set by the launcher (SH/H, SW/W) */
};
/* out = the normalised, resampled and (when augment) cropped/flipped pixels, the cpu's element for element. */
int tb_cuda_input_forward(float *out, const uint8_t *x, int N, const struct tb_cuda_input *a, void *stream);

/* ---- bf16 storage (mixed precision: the executor's --precision bf16) ----
 * Each launcher below is its fp32 twin above with every activation and activation gradient in bf16 (void *:
 * __nv_bfloat16 on the device), the same arguments in the same order, arithmetic in fp32 and each stored
 * value rounded once to nearest even (an accumulation reads the bf16 value, adds in fp32, rounds). Weights:
 * the GEMM launchers (conv1x1, im2col) take the weights' bf16 copy (w16); the direct kernels (depthwise,
 * grouped, norms) read the fp32 weights. Biases, γ, β, saved statistics, running statistics, weight and
 * bias gradients stay fp32; reductions are the fp32 twins' (double sums, or cuBLAS's fp32 accumulation). */

/* tb_cuda_conv1x1_forward, bf16 storage. */
int tb_cuda_conv1x1_forward_bf16(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b,
                                 const struct conv_shape *s, void *stream);
/* tb_cuda_conv1x1_backward_data, bf16 storage. */
int tb_cuda_conv1x1_backward_data_bf16(tb_cublas *cublas, void *dinp, const void *dout, const void *w16,
                                       const struct conv_shape *s, int acc);
/* tb_cuda_conv1x1_backward_params, bf16 storage. */
int tb_cuda_conv1x1_backward_params_bf16(tb_cublas *cublas, float *dw, float *db, const void *inp, const void *dout,
                                         const struct conv_shape *s, void *scratch, void *stream);
/* tb_cuda_conv_im2col_forward, bf16 storage (the fp32 twin's scratch size holds the bf16 columns). */
int tb_cuda_conv_im2col_forward_bf16(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b,
                                     const struct conv_shape *s, void *scratch, void *stream);
/* tb_cuda_conv_im2col_backward_data, bf16 storage. */
int tb_cuda_conv_im2col_backward_data_bf16(tb_cublas *cublas, void *dinp, const void *dout, const void *w16,
                                           const struct conv_shape *s, int acc, void *scratch, void *stream);
/* tb_cuda_conv_im2col_backward_params, bf16 storage. */
int tb_cuda_conv_im2col_backward_params_bf16(tb_cublas *cublas, float *dw, float *db, const void *inp,
                                             const void *dout, const struct conv_shape *s, void *scratch,
                                             void *stream);

/* tb_cuda_conv_direct_forward, bf16 storage, the weights' bf16 copy as the GEMM path's. */
int tb_cuda_conv_direct_forward_bf16(void *out, const void *inp, const void *w16, const float *b,
                                     const struct conv_shape *s, void *stream);
/* tb_cuda_conv_direct_backward_params, bf16 storage. */
int tb_cuda_conv_direct_backward_params_bf16(float *dw, float *db, const void *inp, const void *dout,
                                             const struct conv_shape *s, void *scratch, void *stream);

/* tb_cuda_dwconv_forward, bf16 storage. */
int tb_cuda_dwconv_forward_bf16(void *out, const void *inp, const float *w, const float *b,
                                const struct tb_cuda_bn_in *bn, int act, const struct conv_shape *s, void *stream);
/* tb_cuda_dwconv_backward_data, bf16 storage. */
int tb_cuda_dwconv_backward_data_bf16(void *dinp, const void *dout, const float *w, const struct conv_shape *s,
                                      int acc, void *stream);
/* tb_cuda_dwconv_backward_params, bf16 storage. */
int tb_cuda_dwconv_backward_params_bf16(float *dw, float *db, const void *inp, const void *dout,
                                        const struct tb_cuda_bn_in *bn, const struct conv_shape *s, void *scratch,
                                        void *stream);
/* tb_cuda_gconv_forward, bf16 storage. */
int tb_cuda_gconv_forward_bf16(void *out, const void *inp, const float *w, const float *b, const struct conv_shape *s,
                               void *stream);
/* tb_cuda_gconv_backward_data, bf16 storage. */
int tb_cuda_gconv_backward_data_bf16(void *dinp, const void *dout, const float *w, const struct conv_shape *s,
                                     int acc, void *stream);
/* tb_cuda_gconv_backward_params, bf16 storage. */
int tb_cuda_gconv_backward_params_bf16(float *dw, float *db, const void *inp, const void *dout,
                                       const struct conv_shape *s, void *scratch, void *stream);

/* tb_cuda_bn_forward_train, bf16 storage. */
int tb_cuda_bn_forward_train_bf16(void *out, float *save, float *run_mean, float *run_var, const void *inp,
                                  const float *gamma, const float *beta, size_t M, int C, float eps, float momentum,
                                  int act, void *scratch, void *stream);
/* tb_cuda_bn_forward_eval, bf16 storage. */
int tb_cuda_bn_forward_eval_bf16(void *out, const void *inp, const float *run_mean, const float *run_var,
                                 const float *gamma, const float *beta, size_t M, int C, float eps, int act,
                                 void *stream);
/* tb_cuda_bn_backward, bf16 storage. */
int tb_cuda_bn_backward_bf16(void *dinp, float *dgamma, float *dbeta, const void *dout, const void *inp,
                             const float *save, const float *gamma, const float *beta, size_t M, int C, int act,
                             int acc, void *scratch, void *stream);
/* tb_cuda_gn_forward, bf16 storage. */
int tb_cuda_gn_forward_bf16(void *out, float *save, const void *inp, const float *gamma, const float *beta, int N,
                            size_t HW, int C, int G, float eps, int act, void *stream);
/* tb_cuda_gn_backward, bf16 storage. */
int tb_cuda_gn_backward_bf16(void *dinp, float *dgamma, float *dbeta, const void *dout, const void *inp,
                             const float *save, const float *gamma, const float *beta, int N, size_t HW, int C, int G,
                             int act, int acc, void *scratch, void *stream);

/* tb_cuda_silu_forward, bf16 storage. */
int tb_cuda_silu_forward_bf16(void *out, const void *inp, size_t n, void *stream);
/* tb_cuda_silu_backward, bf16 storage. */
int tb_cuda_silu_backward_bf16(void *dinp, const void *dout, const void *inp, size_t n, void *stream);
/* tb_cuda_sigmoid_forward, bf16 storage. */
int tb_cuda_sigmoid_forward_bf16(void *out, const void *inp, size_t n, void *stream);
/* tb_cuda_sigmoid_backward, bf16 storage. */
int tb_cuda_sigmoid_backward_bf16(void *dinp, const void *dout, const void *out, size_t n, void *stream);
/* tb_cuda_add_forward, bf16 storage. */
int tb_cuda_add_forward_bf16(void *out, const void *a, const void *b, size_t n, void *stream);
/* tb_cuda_add_backward, bf16 storage. */
int tb_cuda_add_backward_bf16(void *da, void *db, const void *dout, size_t n, void *stream);
/* tb_cuda_gap_forward, bf16 storage. */
int tb_cuda_gap_forward_bf16(void *out, const void *inp, int N, size_t HW, int C, void *stream);
/* tb_cuda_gap_backward, bf16 storage. */
int tb_cuda_gap_backward_bf16(void *dinp, const void *dout, int N, size_t HW, int C, void *stream);
/* tb_cuda_se_scale_forward, bf16 storage. */
int tb_cuda_se_scale_forward_bf16(void *out, const void *inp, const void *scale, int N, size_t HW, int C,
                                  void *stream);
/* tb_cuda_se_scale_backward, bf16 storage. */
int tb_cuda_se_scale_backward_bf16(void *dinp, void *dscale, const void *dout, const void *inp, const void *scale,
                                   int N, size_t HW, int C, int acc, void *stream);
/* tb_cuda_dropout_forward, bf16 storage. */
int tb_cuda_dropout_forward_bf16(void *out, const void *inp, int N, size_t D, uint64_t g0,
                                 const struct tb_cuda_drop *a, void *stream);
/* tb_cuda_dropout_backward, bf16 storage. */
int tb_cuda_dropout_backward_bf16(void *dinp, const void *dout, int N, size_t D, uint64_t g0,
                                  const struct tb_cuda_drop *a, void *stream);
/* tb_cuda_dropconnect_add_forward, bf16 storage. */
int tb_cuda_dropconnect_add_forward_bf16(void *out, const void *shortcut, const void *branch, int N, size_t D,
                                         uint64_t g0, const struct tb_cuda_drop *a, void *stream);
/* tb_cuda_dropconnect_backward, bf16 storage. */
int tb_cuda_dropconnect_backward_bf16(void *dinp, const void *dout, int N, size_t D, uint64_t g0,
                                      const struct tb_cuda_drop *a, int acc, void *stream);

/* tb_cuda_input_forward, bf16 storage. */
int tb_cuda_input_forward_bf16(void *out, const uint8_t *x, int N, const struct tb_cuda_input *a, void *stream);

/* ---- fp16 storage (mixed precision: the executor's --precision fp16, with loss scaling) ----
 * IEEE half: an 11-bit significand (2^-11 ≈ 4.9e-4 relative per rounding, a quarter of bf16's) but a 5-bit
 * exponent (max 65504, normals from 2^-14), so the executor scales the loss to keep the gradients in range and
 * checks for the ±inf an overflow rounds to (never saturated). Each launcher below is its _bf16 twin above
 * with fp16 for bf16 (void *: __half on the device): the same arguments, the same fp32 arithmetic, each
 * stored value rounded once to nearest even; the launchers with a w16 argument (the GEMM kinds, the direct stem)
 * take the weights' fp16 copy. */

/* tb_cuda_conv1x1_forward_bf16 with fp16 storage. */
int tb_cuda_conv1x1_forward_fp16(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b,
                                 const struct conv_shape *s, void *stream);

/* tb_cuda_conv1x1_backward_data_bf16 with fp16 storage. */
int tb_cuda_conv1x1_backward_data_fp16(tb_cublas *cublas, void *dinp, const void *dout, const void *w16,
                                       const struct conv_shape *s, int acc);

/* tb_cuda_conv1x1_backward_params_bf16 with fp16 storage. */
int tb_cuda_conv1x1_backward_params_fp16(tb_cublas *cublas, float *dw, float *db, const void *inp, const void *dout,
                                         const struct conv_shape *s, void *scratch, void *stream);

/* tb_cuda_conv_im2col_forward_bf16 with fp16 storage. */
int tb_cuda_conv_im2col_forward_fp16(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b,
                                     const struct conv_shape *s, void *scratch, void *stream);

/* tb_cuda_conv_im2col_backward_data_bf16 with fp16 storage. */
int tb_cuda_conv_im2col_backward_data_fp16(tb_cublas *cublas, void *dinp, const void *dout, const void *w16,
                                           const struct conv_shape *s, int acc, void *scratch, void *stream);

/* tb_cuda_conv_im2col_backward_params_bf16 with fp16 storage. */
int tb_cuda_conv_im2col_backward_params_fp16(tb_cublas *cublas, float *dw, float *db, const void *inp,
                                             const void *dout, const struct conv_shape *s, void *scratch,
                                             void *stream);

/* tb_cuda_conv_direct_forward_bf16 with fp16 storage. */
int tb_cuda_conv_direct_forward_fp16(void *out, const void *inp, const void *w16, const float *b,
                                     const struct conv_shape *s, void *stream);

/* tb_cuda_conv_direct_backward_params_bf16 with fp16 storage. */
int tb_cuda_conv_direct_backward_params_fp16(float *dw, float *db, const void *inp, const void *dout,
                                             const struct conv_shape *s, void *scratch, void *stream);

/* tb_cuda_dwconv_forward_bf16 with fp16 storage. */
int tb_cuda_dwconv_forward_fp16(void *out, const void *inp, const float *w, const float *b,
                                const struct tb_cuda_bn_in *bn, int act, const struct conv_shape *s, void *stream);

/* tb_cuda_dwconv_backward_data_bf16 with fp16 storage. */
int tb_cuda_dwconv_backward_data_fp16(void *dinp, const void *dout, const float *w, const struct conv_shape *s,
                                      int acc, void *stream);

/* tb_cuda_dwconv_backward_params_bf16 with fp16 storage. */
int tb_cuda_dwconv_backward_params_fp16(float *dw, float *db, const void *inp, const void *dout,
                                        const struct tb_cuda_bn_in *bn, const struct conv_shape *s, void *scratch,
                                        void *stream);

/* tb_cuda_gconv_forward_bf16 with fp16 storage. */
int tb_cuda_gconv_forward_fp16(void *out, const void *inp, const float *w, const float *b, const struct conv_shape *s,
                               void *stream);

/* tb_cuda_gconv_backward_data_bf16 with fp16 storage. */
int tb_cuda_gconv_backward_data_fp16(void *dinp, const void *dout, const float *w, const struct conv_shape *s,
                                     int acc, void *stream);

/* tb_cuda_gconv_backward_params_bf16 with fp16 storage. */
int tb_cuda_gconv_backward_params_fp16(float *dw, float *db, const void *inp, const void *dout,
                                       const struct conv_shape *s, void *scratch, void *stream);

/* tb_cuda_bn_forward_train_bf16 with fp16 storage. */
int tb_cuda_bn_forward_train_fp16(void *out, float *save, float *run_mean, float *run_var, const void *inp,
                                  const float *gamma, const float *beta, size_t M, int C, float eps, float momentum,
                                  int act, void *scratch, void *stream);

/* tb_cuda_bn_forward_eval_bf16 with fp16 storage. */
int tb_cuda_bn_forward_eval_fp16(void *out, const void *inp, const float *run_mean, const float *run_var,
                                 const float *gamma, const float *beta, size_t M, int C, float eps, int act,
                                 void *stream);

/* tb_cuda_bn_backward_bf16 with fp16 storage. */
int tb_cuda_bn_backward_fp16(void *dinp, float *dgamma, float *dbeta, const void *dout, const void *inp,
                             const float *save, const float *gamma, const float *beta, size_t M, int C, int act,
                             int acc, void *scratch, void *stream);

/* tb_cuda_gn_forward_bf16 with fp16 storage. */
int tb_cuda_gn_forward_fp16(void *out, float *save, const void *inp, const float *gamma, const float *beta, int N,
                            size_t HW, int C, int G, float eps, int act, void *stream);

/* tb_cuda_gn_backward_bf16 with fp16 storage. */
int tb_cuda_gn_backward_fp16(void *dinp, float *dgamma, float *dbeta, const void *dout, const void *inp,
                             const float *save, const float *gamma, const float *beta, int N, size_t HW, int C, int G,
                             int act, int acc, void *scratch, void *stream);

/* tb_cuda_silu_forward_bf16 with fp16 storage. */
int tb_cuda_silu_forward_fp16(void *out, const void *inp, size_t n, void *stream);

/* tb_cuda_silu_backward_bf16 with fp16 storage. */
int tb_cuda_silu_backward_fp16(void *dinp, const void *dout, const void *inp, size_t n, void *stream);

/* tb_cuda_sigmoid_forward_bf16 with fp16 storage. */
int tb_cuda_sigmoid_forward_fp16(void *out, const void *inp, size_t n, void *stream);

/* tb_cuda_sigmoid_backward_bf16 with fp16 storage. */
int tb_cuda_sigmoid_backward_fp16(void *dinp, const void *dout, const void *out, size_t n, void *stream);

/* tb_cuda_add_forward_bf16 with fp16 storage. */
int tb_cuda_add_forward_fp16(void *out, const void *a, const void *b, size_t n, void *stream);

/* tb_cuda_add_backward_bf16 with fp16 storage. */
int tb_cuda_add_backward_fp16(void *da, void *db, const void *dout, size_t n, void *stream);

/* tb_cuda_gap_forward_bf16 with fp16 storage. */
int tb_cuda_gap_forward_fp16(void *out, const void *inp, int N, size_t HW, int C, void *stream);

/* tb_cuda_gap_backward_bf16 with fp16 storage. */
int tb_cuda_gap_backward_fp16(void *dinp, const void *dout, int N, size_t HW, int C, void *stream);

/* tb_cuda_se_scale_forward_bf16 with fp16 storage. */
int tb_cuda_se_scale_forward_fp16(void *out, const void *inp, const void *scale, int N, size_t HW, int C,
                                  void *stream);

/* tb_cuda_se_scale_backward_bf16 with fp16 storage. */
int tb_cuda_se_scale_backward_fp16(void *dinp, void *dscale, const void *dout, const void *inp, const void *scale,
                                   int N, size_t HW, int C, int acc, void *stream);

/* tb_cuda_dropout_forward_bf16 with fp16 storage. */
int tb_cuda_dropout_forward_fp16(void *out, const void *inp, int N, size_t D, uint64_t g0,
                                 const struct tb_cuda_drop *a, void *stream);

/* tb_cuda_dropout_backward_bf16 with fp16 storage. */
int tb_cuda_dropout_backward_fp16(void *dinp, const void *dout, int N, size_t D, uint64_t g0,
                                  const struct tb_cuda_drop *a, void *stream);

/* tb_cuda_dropconnect_add_forward_bf16 with fp16 storage. */
int tb_cuda_dropconnect_add_forward_fp16(void *out, const void *shortcut, const void *branch, int N, size_t D,
                                         uint64_t g0, const struct tb_cuda_drop *a, void *stream);

/* tb_cuda_dropconnect_backward_bf16 with fp16 storage. */
int tb_cuda_dropconnect_backward_fp16(void *dinp, const void *dout, int N, size_t D, uint64_t g0,
                                      const struct tb_cuda_drop *a, int acc, void *stream);

/* tb_cuda_input_forward_bf16 with fp16 storage. */
int tb_cuda_input_forward_fp16(void *out, const uint8_t *x, int N, const struct tb_cuda_input *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
