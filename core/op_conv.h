/* op_conv.h — dense and grouped convolutions on NHWC activations, HWIO weights, four algorithms.
 *
 * Algorithms (enum conv_algo), all computing the same maths:
 *   GEMM1X1  1×1, stride 1, pad 0, groups 1: the GEMM (N·H·W × C)·(C × OC), in fixed tiles by sgemm,
 *            or by gemm_rows.h's kernels when the weight matrix fits L1;
 *   IM2COL   any shape: patches gathered into per-thread scratch, one sgemm per group;
 *   DIRECT   any shape: register-blocked loops vectorised over output channels (small C per group);
 *   FFT      stride 1 only: FFTW r2c/c2r over 16-channel chunks, products per frequency.
 * What it is not: depthwise convolution (op_dwconv.h), normalisation, activation.
 *
 * Contract (core/layout.h): kernels never allocate or fail; `scratch` is THIS thread's buffer of
 * conv_scratch_floats(algo, pass, s, nth) floats, 64-byte aligned (NULL when that is 0); forward is
 * partitioned over outputs, backward_data over dinp, backward_params over blocks of dw/db; each element is
 * computed by the same sequence of operations whatever (ith, nth), so any nth gives the same bits.
 * Backward accumulates (+=). OpenBLAS must run single-threaded: the engine owns the threads.
 * FFT needs a plan made once outside the kernels (FFTW planning is not thread-safe); a plan is
 * read-only afterwards and shared by all threads.
 *
 * Engine use: at prepare, per conv layer, keep the algorithms with conv_algo_supported(), create a
 * plan when conv_algos[a].needs_plan, and size each thread's scratch as the max over layers and passes
 * of conv_scratch_floats(); the autotuner can then time conv_algos[a].forward/... once per shape.
 */
#ifndef TB_OP_CONV_H
#define TB_OP_CONV_H

#include <stddef.h>

/* Convolution geometry. pad is symmetric (torchvision EfficientNet: (K-1)/2 for every stride). */
struct conv_shape {
    int N, H, W, C;      /* input (N,H,W,C) */
    int OH, OW, OC;      /* output (N,OH,OW,OC); OH = (H + 2·pad − KH)/stride + 1 */
    int KH, KW;          /* kernel; weights (KH,KW,C/groups,OC) */
    int stride, pad, groups;
    int par;             /* parallel units its work splits are cut for (0: the machine's; layout.h's tb_units) */
};

enum conv_algo {
    CONV_ALGO_IM2COL,
    CONV_ALGO_DIRECT,
    CONV_ALGO_FFT,
    CONV_ALGO_GEMM1X1,
    CONV_ALGO_COUNT
};

/* Which kernel a scratch size is asked for. */
enum conv_pass { CONV_PASS_FORWARD, CONV_PASS_BACKWARD_DATA, CONV_PASS_BACKWARD_PARAMS };

/* FFTW plans for one shape (opaque; made by conv_fft_plan_create). */
struct conv_fft_plan;

/* Fills s with EfficientNet padding (KH-1)/2 and computes OH, OW; TB_EINVAL if the shape is invalid. */
int conv_shape_init(struct conv_shape *s, int N, int H, int W, int C, int OC, int KH, int KW, int stride,
                    int groups);
/* Recomputes OH, OW from the other fields (explicit pad); TB_EINVAL (message set) if invalid. */
int conv_shape_fill(struct conv_shape *s);
/* Forward FLOPs (2 per multiply-add) of the shape, bias excluded. */
double conv_flops(const struct conv_shape *s);

/* Returns a short name ("im2col", "direct", "fft", "gemm1x1"). */
const char *conv_algo_name(enum conv_algo algo);
/* Returns 1 if algo can run shape s (GEMM1X1: 1×1/1/pad 0/groups 1; FFT: stride 1), else 0. */
int conv_algo_supported(enum conv_algo algo, const struct conv_shape *s);
/* Floats of scratch ONE thread needs for this kernel when the work is split nth ways (multiple of 16). */
size_t conv_scratch_floats(enum conv_algo algo, enum conv_pass pass, const struct conv_shape *s, int nth);

/* Scratch floats one thread needs for an FFT kernel (conv_scratch_floats calls this). */
size_t conv_fft_scratch_floats(enum conv_pass pass, const struct conv_shape *s, int nth);
/* Makes FFTW plans for shape s (stride 1); call outside kernels, serialised internally. */
int conv_fft_plan_create(struct conv_fft_plan **out, const struct conv_shape *s);
/* Frees a plan (NULL is fine); serialised internally like planning. */
void conv_fft_plan_destroy(struct conv_fft_plan *p);

/* The three kernels of one algorithm, in a table the engine's autotuner can iterate.
 * plan is NULL unless needs_plan; scratch as described above. */
struct conv_algo_i {
    const char *name;
    int needs_plan; /* create a conv_fft_plan before calling the kernels */
    /* out (N,OH,OW,OC) = conv(inp (N,H,W,C), w (KH,KW,C/G,OC)) + b (OC); b may be NULL. */
    void (*forward)(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                    const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
    /* dinp (N,H,W,C) += convᵀ(dout (N,OH,OW,OC), w (KH,KW,C/G,OC)). */
    void (*backward_data)(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                          const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
    /* dw (KH,KW,C/G,OC) += corr(inp (N,H,W,C), dout (N,OH,OW,OC)); db (OC) += Σ dout (db may be NULL). */
    void (*backward_params)(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s,
                            const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
    /* dinp (N,H,W,C) = convᵀ(dout, w), writing every element without reading dinp (no memset first), or
     * NULL when the algorithm can only accumulate. */
    void (*backward_data_overwrite)(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                    float *scratch, int ith, int nth);
};
/* Indexed by enum conv_algo. */
extern const struct conv_algo_i conv_algos[CONV_ALGO_COUNT];

/* Dispatchers through conv_algos (the algorithm must be supported for s). */
void conv_forward(enum conv_algo algo, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* dinp (N,H,W,C) += ... with algorithm algo. */
void conv_backward_data(enum conv_algo algo, float *dinp, const float *dout, const float *w,
                        const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch, int ith,
                        int nth);
/* dw, db += ... with algorithm algo. */
void conv_backward_params(enum conv_algo algo, float *dw, float *db, const float *inp, const float *dout,
                          const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch, int ith,
                          int nth);

/* Per-algorithm kernels (same signatures as the table). */
/* out (N·H·W, OC) = inp (N·H·W, C) · w (C, OC) + b; partitioned over 256-row blocks, each cut into an
 * even number of column blocks when there are too few row blocks for the machine's cores (all fixed by
 * the shape and the machine). */
void conv_forward_gemm1x1(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                          const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* dinp (N,H,W,C) += dout (N·H·W, OC) · wᵀ; partitioned like the forward (256-row blocks, column blocks
 * of dinp when rows are few). */
void conv_backward_data_gemm1x1(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* dinp (N,H,W,C) = dout · wᵀ over the accumulating kernel's tiles, so dinp needs no memset first and is
 * not read. Rows wider than 48 channels go through gemm_rows here but sgemm when accumulating, so the
 * two kernels may round those differently. */
void conv_backward_data_gemm1x1_overwrite(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                          float *scratch, int ith, int nth);
/* dw (C,OC) += inpᵀ · dout; db += column sums; partitioned over an even number of blocks (at least 32
 * wide, no more than the machine's cores use) of dw's longer side. */
void conv_backward_params_gemm1x1(float *dw, float *db, const float *inp, const float *dout,
                                  const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch,
                                  int ith, int nth);
/* conv_backward_params_gemm1x1; acc 0: dw and db written (sgemm's beta 0), not added to. */
void conv_backward_params_gemm1x1_acc(float *dw, float *db, const float *inp, const float *dout,
                                      const struct conv_shape *s, int acc, int ith, int nth);
/* Whether conv_forward_gemm1x1_bn runs shape s: a 1×1 convolution gemm_rows computes (small C·OC). */
int conv_gemm1x1_bn_fusable(const struct conv_shape *s);
/* conv_forward_gemm1x1 without bias that also takes the statistics of the BatchNorm reading out, while
 * the outputs are in registers: part (bn_row_chunks(M), 2, OC) = [Σ | Σ²] of each row chunk, bitwise
 * bn_forward_train_chunks of out, so the BatchNorm goes straight to bn_forward_train_finish. Threads take
 * whole row chunks. */
void conv_forward_gemm1x1_bn(float *out, const float *inp, const float *w, const struct conv_shape *s, double *part,
                             int ith, int nth);
/* The SE scale before a 1×1 convolution, applied to the convolution's input rows as they are read
 * instead of written out as a tensor (effnet-b0's blocks 2–3 at 32×32, where conv_se_pays says no): x
 * (N·H·W, C) is the scale's input, scale (N, C) its per-sample factors, HW = H·W. The product x·s is
 * rounded to float before the GEMM as the scale's own kernel rounds it, so every result is the same bits
 * as the scale followed by the convolution. dscale (N, C), for the backward: the scale's factor gradient,
 * Σ_hw dinp·x in double in row order per sample as se_scale_backward sums it, written (not added); NULL:
 * not wanted. */
struct conv_se_rows {
    const float *x, *scale;
    float *dscale;
    size_t HW;
};
/* Per-thread scratch floats conv_forward_gemm1x1_bn_se needs: one tile of scaled input rows. */
size_t conv_forward_se_rows_scratch_floats(const struct conv_shape *s);
/* conv_forward_gemm1x1_bn on the rows x·scale[n] of se, formed a tile at a time in scratch: out and part
 * bitwise se_scale_forward then conv_forward_gemm1x1_bn. */
void conv_forward_gemm1x1_bn_se(float *out, const struct conv_se_rows *se, const float *w, const struct conv_shape *s,
                                double *part, float *scratch, int ith, int nth);
/* ---- GEMM1X1 weight gradient in two calls with a barrier between them (all nth threads call the
 *      first, wait, then the second), for shapes whose dw has too few 64-wide blocks to split evenly:
 *      the M-row reduction is cut into conv_params_row_chunks(s) chunks fixed by the shape, each one
 *      sgemm into its own (C,OC) part, and the parts are added in chunk order. Bitwise the same for any
 *      nth (not the same bits as the single-call kernel, which sums all rows in one sgemm). ---- */

/* Row chunks of the two-phase GEMM1X1 weight gradient for s, or 0 when s uses the single call. */
int conv_params_row_chunks(const struct conv_shape *s);
/* Floats of the shared part buffer the two-phase pair needs: conv_params_row_chunks(s)·C·OC. */
size_t conv_params_part_floats(const struct conv_shape *s);
/* Phase 1: part (K,C,OC) = inpᵀ · dout over each row chunk; partitioned over chunks. */
void conv_backward_params_gemm1x1_chunks(float *part, const float *inp, const float *dout, const struct conv_shape *s,
                                         int ith, int nth);
/* Whether conv_backward_gemm1x1_fused_chunks runs s: the two-phase weight gradient on gemm_rows, and the
 * data gradient (overwriting, or accumulating when !accumulate is 0) on gemm_rows too. */
int conv_backward_gemm1x1_fusable(const struct conv_shape *s, int accumulate);
/* Phase 1 with the data gradient in the same pass over dout (read once, not twice: 77 MB at 112×112×96
 * batch 16): each chunk in 256-row pieces, dinp's rows (= or += dout·wᵀ) then the chunk's part from the
 * piece still in cache. dinp and part bitwise the separate kernels' (conv_backward_data_gemm1x1 or its
 * _overwrite, conv_backward_params_gemm1x1_chunks); partitioned over chunks. With bn (non-NULL; dout may
 * then be NULL) dout is never read: each piece is formed from the BatchNorm's, as its bn_backward_finish
 * would have written it, so the results are the same bits. */
/* The BatchNorm after the convolution, whose data gradient (this convolution's dout) the fused pass may
 * form piece by piece as it reads (bn_backward_rows) instead of reading it from memory: its dz, its
 * input x (this convolution's output), save and the coef of bn_backward_coefs. */
struct conv_bn_dout {
    const float *dz, *x, *save, *coef;
};
/* wt (OC, C) = wᵀ for the 1×1 weights w (C, OC). */
void conv_transpose_w(float *wt, const float *w, int C, int OC);
/* Floats of per-thread scratch conv_backward_gemm1x1_fused_chunks needs: wᵀ and one piece of dout (with
 * se: one of the scaled input and C doubles of dscale sums too). */
size_t conv_backward_gemm1x1_fused_scratch_floats(const struct conv_shape *s, int se);
/* With se (non-NULL; inp is then NULL) the input rows are x·scale[n], formed a piece at a time, and each
 * sample's dscale is summed from its dinp rows while they are in cache: dinp, part and dscale bitwise
 * se_scale_forward's output fed to this kernel and se_scale_backward's dscale (accumulate must be 0, and
 * conv_se_rows_aligned(s, se->HW): a sample's rows in one chunk). */
void conv_backward_gemm1x1_fused_chunks(float *dinp, int accumulate, float *part, const float *inp,
                                        const float *dout, const struct conv_bn_dout *bn,
                                        const struct conv_se_rows *se, const float *w, const struct conv_shape *s,
                                        float *scratch, int ith, int nth);
/* Whether conv_backward_gemm1x1_fused_chunks takes an se on s: fusable (overwriting) and every row chunk of
 * the weight gradient starts at a sample (a multiple of HW rows), so one thread sums each sample's dscale. */
int conv_se_rows_aligned(const struct conv_shape *s, size_t HW);
/* dst (n) += Σ_k part[k] over part (K, n), k ascending (the same bits for any nth); acc 0: dst = that sum,
 * never read (the bits of adding to zeros); partitioned over 16-float blocks. Phase 2 of the chunked weight
 * gradients (GEMM1X1 here, depthwise in op_dwconv.c). */
void conv_parts_sum_add(float *dst, const float *part, int K, size_t n, int acc, int ith, int nth);
/* Phase 2, after a barrier: dw (C,OC) += Σ_k part[k] in chunk order; db (OC) += column sums of dout (db may
 * be NULL); acc 0: both written, not added to; partitioned over 16-float blocks of dw and of db. */
void conv_backward_params_gemm1x1_finish(float *dw, float *db, const float *part, const float *dout,
                                         const struct conv_shape *s, int acc, int ith, int nth);
/* im2col + sgemm forward; partitioned over fixed chunks of output pixels. */
void conv_forward_im2col(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                         const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* sgemm + col2im backward-data; partitioned over rows (n, iy) of dinp. */
void conv_backward_data_im2col(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                               const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* im2col + sgemm backward-params; partitioned over 16-wide OC blocks of dw inside each group. */
void conv_backward_params_im2col(float *dw, float *db, const float *inp, const float *dout,
                                 const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch,
                                 int ith, int nth);
/* Direct forward vectorised over output channels; partitioned over output rows (n, oy). */
void conv_forward_direct(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                         const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* Direct backward-data vectorised over input channels; partitioned over rows (n, iy) of dinp. */
void conv_backward_data_direct(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                               const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* Direct backward-params vectorised over output channels; partitioned over 16-wide OC column blocks. */
void conv_backward_params_direct(float *dw, float *db, const float *inp, const float *dout,
                                 const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch,
                                 int ith, int nth);
/* ---- The stem's weight gradient (conv_backward_params_direct's 3×3, 3-input-channel shapes, no bias) in
 *      two calls with a barrier between them, as the GEMM1X1 pair above: the N·OH output rows cut into
 *      conv_direct_params_row_chunks(s) chunks fixed by the shape, each chunk's (KH,KW,C,OC) part written
 *      by items of (chunk, two 16-wide units), then the parts added in chunk order. Bitwise the same for any
 *      nth (not the single call's bits, which sums all rows in one total). ---- */

/* Row chunks of the two-phase stem weight gradient for s, or 0 when s uses the single call. */
int conv_direct_params_row_chunks(const struct conv_shape *s);
/* Floats of the shared part buffer the stem's pair needs: chunks·KH·KW·C·OC. */
size_t conv_direct_params_part_floats(const struct conv_shape *s);
/* Phase 1: part (K,KH,KW,C,OC) = each row chunk's weight gradient; partitioned over (chunk, unit pair). */
void conv_backward_params_direct_chunks(float *part, const float *inp, const float *dout, const struct conv_shape *s,
                                        int ith, int nth);
/* Phase 2, after a barrier: dw (KH,KW,C,OC) += Σ_k part[k] in chunk order; partitioned over 16-float blocks. */
void conv_backward_params_direct_finish(float *dw, const float *part, const struct conv_shape *s, int ith, int nth);
/* Floats of the shared part buffer algorithm a's two-phase weight gradient needs for s (0: none). */
size_t conv_params_parts_floats(enum conv_algo a, const struct conv_shape *s);
/* FFT forward (stride 1, plan required); partitioned over 16-wide output-channel blocks. */
void conv_forward_fft(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                      const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* FFT backward-data; partitioned over 16-wide input-channel blocks of dinp. */
void conv_backward_data_fft(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                            const struct conv_fft_plan *plan, float *scratch, int ith, int nth);
/* FFT backward-params; partitioned over 16-wide OC column blocks of dw. */
void conv_backward_params_fft(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s,
                              const struct conv_fft_plan *plan, float *scratch, int ith, int nth);

/* Naive references for the tests (single-threaded, double accumulation). */
void conv_forward_ref(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s);
/* dinp (N,H,W,C) += reference backward-data. */
void conv_backward_data_ref(float *dinp, const float *dout, const float *w, const struct conv_shape *s);
/* dw (KH,KW,C/G,OC), db (OC) += reference backward-params (db may be NULL). */
void conv_backward_params_ref(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s);

#endif
