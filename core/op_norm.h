/* op_norm.h — BatchNorm and GroupNorm over NHWC activations, each optionally fused with SiLU.
 *
 * What it is: training/eval forward and backward kernels, the two-phase BatchNorm API a mirrored
 * (sync-BN) engine all-reduces between, and double references (_ref) for the tests.
 * What it is not: the SiLU kernels themselves (op_act.h) or the all-reduce (backends).
 *
 * Maths. x̂ = (x - μ)·rstd, rstd = 1/sqrt(σ² + ε) with the biased batch variance σ²; z = γ·x̂ + β;
 * y = z (NORM_ACT_NONE) or y = silu(z) (NORM_ACT_SILU). dout is ∂L/∂y.
 * BatchNorm statistics are per channel over M = N·H·W rows; GroupNorm statistics per (sample, group)
 * over H·W·C/G values.
 *
 * Fused SiLU: forward writes only y = silu(z); backward recomputes z from x, μ and rstd (the same
 * expression as forward) instead of keeping z, so the fused layer saves x and 2 floats per channel
 * (group) rather than x and z: one activation tensor less per norm layer, and no separate ∂L/∂z
 * buffer to zero. BatchNorm backward needs dz = dout·silu'(z) in both of its passes (reduction, then
 * apply); the exp and division cost more than a pass over memory, so its first pass writes dz back
 * over dout and the second reads it: WITH NORM_ACT_SILU, BN BACKWARD OVERWRITES dout WITH ∂L/∂z.
 * dout is the layer's own output gradient, dead once this backward has consumed it. GroupNorm's
 * data and parameter kernels are partitioned differently (samples vs channels), so they leave dout
 * intact and each recomputes dz.

 * Numerics and determinism. Statistics are sums in double, per channel, Σx and Σx² (one pass; products
 * of floats are exact in double, and the cancellation in Σx²/M - μ² costs ~1e-16·M·(μ/σ)² relative —
 * negligible for normalisation inputs). The fused-SiLU backward sums Σdz and Σdz·(x-μ) (no
 * cancellation to fear) add 16 rows in float, then each such partial in double. BatchNorm's M rows are
 * cut into bn_row_chunks(M) fixed chunks (the cut depends on M alone): each chunk is summed over its
 * rows in ascending order from zero, and the chunk sums are added in chunk order from zero. Every
 * kernel takes its sums in exactly that order whatever the thread split, so all kernels are bitwise
 * identical for any nth; the two-phase BN APIs (sync BN, and the row-partitioned chunk → finish pairs)
 * use the same block routines, so one replica (partials → finalize → apply) and chunks → finish are
 * bitwise identical to the single-call kernels.
 *
 * Threading (ith, nth). "channel-partitioned" kernels give each thread a range of channels cut at
 * 16-float units (each thread reduces over all rows of its own channels, then writes them);
 * "row-partitioned" kernels split the M rows (elementwise, no false sharing on small C);
 * "item-partitioned" chunk kernels split (row chunk × channel group) items — channel groups only when
 * there are few chunks — and write each item's sums to a shared part buffer that the finish kernel
 * reads after the caller's barrier, so layers with few channels and many rows (EfficientNet's early
 * 16/24/40-channel layers) and layers with few rows and many channels both split evenly;
 * GroupNorm data kernels split the samples. Backward ACCUMULATES into dinp, dgamma, dbeta; forward
 * overwrites out and save. out must not alias inp (x is needed by backward).
 */
#ifndef TB_OP_NORM_H
#define TB_OP_NORM_H

#include <stddef.h>

enum norm_act { NORM_ACT_NONE = 0, NORM_ACT_SILU = 1 };

#define BN_EPS_DEFAULT 1e-3f      /* Keras / TF EfficientNet */
#define BN_MOMENTUM_DEFAULT 0.99f /* Keras: running = 0.99·running + 0.01·batch */
#define GN_EPS_DEFAULT 1e-5f      /* PyTorch nn.GroupNorm */
#define GN_GROUPS_DEFAULT 4       /* Graphcore's EfficientNet GroupNorm runs */

/* ---- BatchNorm: inp (N,H,W,C) viewed as (M = N·H·W, C); gamma, beta, run_mean, run_var (C);
 *      save (2,C) = [μ | rstd] of the batch, written by training forward, read by backward. ---- */

/* Training forward: batch statistics → save; out (M,C) = act(γ·x̂+β); running stats (if run_mean and
 * run_var are non-NULL — pass NULL when recomputing a forward) ← momentum·running + (1-momentum)·batch,
 * with the UNBIASED batch variance (PyTorch's convention). Channel-partitioned: a layer with few channels
 * runs on few threads; the executor uses the chunk → finish pair below, which gives the same bits. */
void bn_forward_train(float *out, float *save, float *run_mean, float *run_var, const float *inp,
                      const float *gamma, const float *beta, size_t M, int C, float eps, float momentum,
                      enum norm_act act, int ith, int nth);
/* Eval forward: out (M,C) = act(γ·(x - run_mean)/sqrt(run_var + ε) + β). Row-partitioned. */
void bn_forward_eval(float *out, const float *inp, const float *run_mean, const float *run_var,
                     const float *gamma, const float *beta, size_t M, int C, float eps, enum norm_act act,
                     int ith, int nth);
/* Backward of bn_forward_train: dinp (M,C) += ∂L/∂x (= when acc is 0), dgamma (C) += Σ dz·x̂,
 * dbeta (C) += Σ dz, where dz = dout (M,C) · act'(z); with NORM_ACT_SILU dout is overwritten with dz.
 * Channel-partitioned (each thread reduces, then writes, its channels). */
void bn_backward(float *dinp, float *dgamma, float *dbeta, float *dout, const float *inp,
                 const float *save, const float *gamma, const float *beta, size_t M, int C,
                 enum norm_act act, int acc, int ith, int nth);

/* ---- Row-partitioned training BatchNorm in two calls with a barrier between them (all nth threads
 *      call the first, wait, then call the second). part (K,2,C) doubles, K = bn_row_chunks(M), shared
 *      by the threads: bn_chunk_doubles(M, C) of scratch. Bitwise identical to bn_forward_train and
 *      bn_backward for any nth (and to each other's nth). ---- */

/* Row chunks of the fixed reduction order over M rows: K0 = min(16, ⌈M/128⌉), at least 1, or where K0 does
 * not divide the ⌈M/16⌉ 16-row units the largest count in [3/4 K0, K0] that does (equal chunks, whose
 * edges fall on whole image rows at more shapes); TB_BN_EVEN_CHUNKS=0 keeps K0. */
int bn_row_chunks(size_t M);
/* K0 above: the most chunks M rows are cut into, monotone in M (what buffers are sized by). */
int bn_row_chunks_max(size_t M);
/* Doubles of the part buffer the chunk kernels fill for M rows of C channels: bn_row_chunks_max(M)·2·C. */
size_t bn_chunk_doubles(size_t M, int C);
/* Forward phase 1: part (K,2,C) = [Σx | Σx²] of each row chunk of inp (M,C). Item-partitioned. */
void bn_forward_train_chunks(double *part, const float *inp, size_t M, int C, int ith, int nth);
/* Forward phase 2, after a barrier: adds part in chunk order; save (2,C) and the running stats (unless
 * NULL, as in bn_forward_train) for this thread's channels; out (M,C) = act(γ·x̂+β) for its rows, unless
 * out is NULL (the consumer applies it: bn_apply_rows). */
void bn_forward_train_finish(float *out, float *save, float *run_mean, float *run_var, const float *inp,
                             const float *gamma, const float *beta, const double *part, size_t M, int C, float eps,
                             float momentum, enum norm_act act, int ith, int nth);
/* part_k (2,C) += [Σx | Σx²] over rows (rows,C) of x, in row order and double: chunk k's part of
 * bn_forward_train_chunks (zeroed first) fed a few rows at a time by the kernel producing them, bitwise. */
void bn_stats_rows_add(double *part_k, const float *x, size_t rows, int C);

#define BN_STREAM_MAX_C 2048
/* Channels from which bn_apply_rows prefetches its rows of x ahead (fewer: the hardware's prefetch alone). */
#define BN_APPLY_PF_MIN_C 64
/* ---- A BatchNorm+SiLU's output formed by its consumer a few rows at a time, from x, as it needs them
 *      (the training forward's apply pass left out): bitwise bn_forward_train_finish's rows. ---- */
struct bn_apply {
    const float *mean, *beta;
    int C;
    float a[BN_STREAM_MAX_C];
};
/* Readies ap for a BatchNorm whose statistics are in save (gamma, beta its); C ≤ BN_STREAM_MAX_C. */
void bn_apply_begin(struct bn_apply *ap, const float *save, const float *gamma, const float *beta, int C);
/* y (rows,C) = silu((x - μ)·γ·rstd + β) for x (rows,C). */
void bn_apply_rows(const struct bn_apply *ap, float *y, const float *x, size_t rows);

/* ---- bn_backward_chunks (SiLU) fed by a producer of dout, one row chunk at a time in row order, a few
 *      rows per call while they are in cache: begin, rows … rows, end give chunk k's part (2,C) and dz
 *      over dout bitwise as bn_backward_chunks does. C ≤ BN_STREAM_MAX_C. ---- */
struct bn_bwd_stream {
    double *part;       /* (2,C): this chunk's [Σdz | Σdz·(x-μ)] in the part buffer */
    struct bn_apply ap; /* μ, γ·rstd, β: the z = (x-μ)·a + β the forward applied SiLU to */
    int phase;          /* rows of the current float block */
    float fs[BN_STREAM_MAX_C], fq[BN_STREAM_MAX_C];
};
/* Starts chunk sums into part_k (2·C doubles, zeroed here) for a BatchNorm with save, gamma, beta. */
void bn_bwd_stream_begin(struct bn_bwd_stream *st, double *part_k, const float *save, const float *gamma,
                         const float *beta, int C);
/* The next rows of the chunk: dout (rows,C) ← dz = dout·silu'(z), its sums added; inp (rows,C) is x;
 * y (rows,C), unless NULL, ← silu(z), the forward's output bitwise. */
void bn_bwd_stream_rows(struct bn_bwd_stream *st, float *dout, const float *inp, float *y, size_t rows);
/* Ends the chunk: the last partial block into part. */
void bn_bwd_stream_end(struct bn_bwd_stream *st);
/* Rows [*r0,*r1) of chunk k of bn_row_chunks(M): the cut every chunk kernel uses. */
void bn_chunk_range(size_t M, int k, size_t *r0, size_t *r1);

/* bn_forward_train_finish with SiLU whose output's global average pool (pool (N,C), N = M/HW samples of
 * HW rows) is taken in the same pass, bitwise global_avgpool_forward of out: threads take whole samples. */
void bn_forward_train_finish_pool(float *out, float *pool, float *save, float *run_mean, float *run_var,
                                  const float *inp, const float *gamma, const float *beta, const double *part,
                                  size_t M, size_t HW, int C, float eps, float momentum, int ith, int nth);
/* Backward phase 1: part (K,2,C) = [Σdz | Σdz·(x-μ)] of each row chunk; with NORM_ACT_SILU dout (M,C)
 * is overwritten with dz. Item-partitioned. */
void bn_backward_chunks(double *part, float *dout, const float *inp, const float *save, const float *gamma,
                        const float *beta, size_t M, int C, enum norm_act act, int ith, int nth);
/* Backward phase 1 of a BatchNorm+SiLU whose output y is read only by an SE scale (o = y·s, s (N,C))
 * and by the global average pool (p, (N,C)) of the SE branch: the output gradient, dy = do·s[n] +
 * dp[n]/HW for sample n = row / HW, is formed as it is read instead of by se_scale_backward and
 * global_avgpool_backward in two passes over memory, with the same roundings (bitwise the same
 * dz). dse (M,C) holds do and is overwritten with dz, for phase 2. Otherwise bn_backward_chunks. */
void bn_backward_chunks_se(double *part, float *dse, const float *scale, const float *dpool, size_t HW,
                           const float *inp, const float *save, const float *gamma, const float *beta, size_t M,
                           int C, int ith, int nth);
/* Backward phase 2, after a barrier: dgamma, dbeta (C) += Σdz·x̂, Σdz for this thread's channels; dinp
 * (M,C) += (= when acc is 0) ∂L/∂x for its rows, reading dz (M,C): the dout phase 1 left. */
void bn_backward_finish(float *dinp, float *dgamma, float *dbeta, const float *dz, const float *inp,
                        const float *save, const float *gamma, const double *part, size_t M, int C, int acc,
                        int ith, int nth);
/* Phase 2 split in two, for a consumer that applies it as it reads (conv_backward_gemm1x1_fused_chunks):
 * after the barrier, dgamma, dbeta as bn_backward_finish adds them, and coef (3, C) = the per-channel
 * a, c2, k0 of its data gradient, this thread's channels (a barrier before coef is read). */
void bn_backward_coefs(float *coef, float *dgamma, float *dbeta, const float *save, const float *gamma,
                       const double *part, size_t M, int C, int ith, int nth);
/* dx (rows, C) = a·dz + c2·(x - μ) + k0 with coef from bn_backward_coefs: rows of bn_backward_finish's
 * dinp (acc 0), bit for bit, at any row offset (dz, inp and dx point at the same first row). */
void bn_backward_rows(float *dx, const float *dz, const float *inp, const float *save, const float *coef,
                      size_t rows, int C);

/* ---- Two-phase BatchNorm for a global (sync) BN over replicas. Forward:
 *        bn_stats_partial (each replica, its M_r rows) → all-reduce sums (sum over replicas, fixed
 *        order) → bn_stats_finalize (M_total = Σ M_r) → bn_forward_apply.
 *      Backward:
 *        bn_backward_partial (dout ← dz for SiLU) → bn_backward_params_apply with the LOCAL sums (the
 *        gradient all-reduce sums dγ/dβ later) → all-reduce sums → bn_backward_data_apply with the
 *        GLOBAL sums, reading dz.
 *      sums (2,C) are doubles so the all-reduced statistics lose nothing. With one replica the
 *      sequence is bitwise identical to bn_forward_train / bn_backward. ---- */

/* sums (2,C) = [Σx | Σx²] per channel over inp (M,C) rows (overwritten). Channel-partitioned. */
void bn_stats_partial(double *sums, const float *inp, size_t M, int C, int ith, int nth);
/* save (2,C) = [μ | rstd] from global sums (2,C) over M_total rows; updates run_mean/run_var (C)
 * unless NULL. Every replica calls it with the same sums, so their running stats stay identical.
 * Channel-partitioned. */
void bn_stats_finalize(float *save, float *run_mean, float *run_var, const double *sums, size_t M_total,
                       int C, float eps, float momentum, int ith, int nth);
/* out (M,C) = act(γ·(x - μ)·rstd + β) from save (2,C). Row-partitioned. */
void bn_forward_apply(float *out, const float *inp, const float *save, const float *gamma,
                      const float *beta, size_t M, int C, enum norm_act act, int ith, int nth);
/* sums (2,C) = [Σ dz | Σ dz·x̂] over this replica's M rows (overwritten); with NORM_ACT_SILU dout (M,C)
 * is overwritten with dz = dout·silu'(z). Channel-partitioned. */
void bn_backward_partial(double *sums, float *dout, const float *inp, const float *save,
                         const float *gamma, const float *beta, size_t M, int C, enum norm_act act,
                         int ith, int nth);
/* dgamma (C) += sums[C+c], dbeta (C) += sums[c]. Channel-partitioned. */
void bn_backward_params_apply(float *dgamma, float *dbeta, const double *sums, int C, int ith, int nth);
/* dinp (M,C) += (= when acc is 0) γ·rstd·(dz - Σdz/M_total - x̂·Σdz·x̂/M_total) from global sums (2,C)
 * and dz (M,C), the gradient at z that bn_backward_partial left in dout. Row-partitioned. */
void bn_backward_data_apply(float *dinp, const float *dz, const float *inp, const float *save,
                            const float *gamma, const double *sums, size_t M, size_t M_total, int C, int acc,
                            int ith, int nth);

/* ---- GroupNorm: inp (N,H,W,C) with HW = H·W, G groups of C/G consecutive channels (C % G == 0);
 *      gamma, beta (C) per channel; save (N,G,2) = (μ, rstd) per sample and group. ---- */

/* out (N,HW,C) = act(γ·x̂+β) with per-(sample, group) statistics → save. Sample-partitioned. */
void gn_forward(float *out, float *save, const float *inp, const float *gamma, const float *beta, int N,
                size_t HW, int C, int G, float eps, enum norm_act act, int ith, int nth);
/* dinp (N,HW,C) += ∂L/∂x (= when acc is 0). Sample-partitioned. */
void gn_backward_data(float *dinp, const float *dout, const float *inp, const float *save,
                      const float *gamma, const float *beta, int N, size_t HW, int C, int G,
                      enum norm_act act, int acc, int ith, int nth);
/* dgamma (C) += Σ dz·x̂, dbeta (C) += Σ dz over all samples and positions. Channel-partitioned. */
void gn_backward_params(float *dgamma, float *dbeta, const float *dout, const float *inp, const float *save,
                        const float *gamma, const float *beta, int N, size_t HW, int C, int G,
                        enum norm_act act, int ith, int nth);

/* ---- Double references: naive, two-pass variance, libm exp; same shapes; backward refs accumulate. */
void bn_forward_train_ref(double *out, double *save, double *run_mean, double *run_var, const double *inp,
                          const double *gamma, const double *beta, size_t M, int C, double eps,
                          double momentum, enum norm_act act);
void bn_forward_eval_ref(double *out, const double *inp, const double *run_mean, const double *run_var,
                         const double *gamma, const double *beta, size_t M, int C, double eps,
                         enum norm_act act);
void bn_backward_ref(double *dinp, double *dgamma, double *dbeta, const double *dout, const double *inp,
                     const double *save, const double *gamma, const double *beta, size_t M, int C,
                     enum norm_act act);
void gn_forward_ref(double *out, double *save, const double *inp, const double *gamma, const double *beta,
                    int N, size_t HW, int C, int G, double eps, enum norm_act act);
void gn_backward_ref(double *dinp, double *dgamma, double *dbeta, const double *dout, const double *inp,
                     const double *save, const double *gamma, const double *beta, int N, size_t HW, int C,
                     int G, enum norm_act act);

#endif
