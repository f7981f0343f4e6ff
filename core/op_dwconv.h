/* op_dwconv.h — depthwise k×k convolution on NHWC activations, weights (KH,KW,C).
 *
 * The layer that limits EfficientNet on CPUs (about 2·K² FLOPs per element moved), so it has its own
 * direct kernels vectorised over channels: specialisations for k ∈ {3,5}, stride ∈ {1,2}, pad (k-1)/2
 * with branch-free interiors (AVX-512 16 lanes, AVX2+FMA 8 lanes, emulated 16 lanes on other targets),
 * and a portable path (plain loops over C that the compiler vectorises) for every other shape.
 * What it is not: dense or grouped convolution (op_conv.h).
 *
 * The shape is a struct conv_shape with groups == C == OC (use dwconv_shape_init). Contract as in
 * core/layout.h: forward partitioned over output rows (n, oy), backward_data over dinp rows (n, iy),
 * backward_params over vector-wide channel blocks of dw/db (single channels when there are fewer
 * blocks than threads); every element is computed by the same operations for any (ith, nth), so
 * results are bitwise independent of nth. Backward accumulates (+=). No allocation, no scratch.
 */
#ifndef TB_OP_DWCONV_H
#define TB_OP_DWCONV_H

#include "op_conv.h"

/* Fills s for a depthwise K×K convolution with EfficientNet padding (K-1)/2; TB_EINVAL if invalid. */
int dwconv_shape_init(struct conv_shape *s, int N, int H, int W, int C, int K, int stride);
/* Returns 1 if s describes a depthwise convolution (groups == C == OC, valid sizes), else 0. */
int dwconv_shape_valid(const struct conv_shape *s);
/* Returns 1 if s runs on a specialised kernel (k 3/5, stride 1/2, pad (k-1)/2), 0 if on the portable path. */
int dwconv_specialised(const struct conv_shape *s);
/* Forward FLOPs (2 per multiply-add), bias excluded. */
double dwconv_flops(const struct conv_shape *s);

/* out (N,OH,OW,C) = dwconv(inp (N,H,W,C), w (KH,KW,C)) + b (C); b may be NULL. */
void dwconv_forward(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                    int ith, int nth);
/* dinp (N,H,W,C) += dwconvᵀ(dout (N,OH,OW,C), w (KH,KW,C)); = when acc is 0 (every element written). */
void dwconv_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s, int acc,
                          int ith, int nth);
/* Whether dwconv_forward_bn runs shape s: a specialised shape whose output's BatchNorm row chunks
 * (bn_row_chunks over N·OH·OW) start on whole output rows. */
int dwconv_forward_bn_fusable(const struct conv_shape *s);
/* dwconv_forward that also takes the statistics of the BatchNorm reading out: threads take whole row
 * chunks, compute a few output rows, then add them into the chunk's sums while they are in cache, so
 * part (bn_row_chunks, 2, C) equals bn_forward_train_chunks of out, bitwise (and out dwconv_forward's). */
void dwconv_forward_bn(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                       double *part, int ith, int nth);
/* Whether dwconv_forward_bn_in runs shape s: a specialised shape of at most BN_STREAM_MAX_C channels. */
int dwconv_forward_bn_in_fusable(const struct conv_shape *s);
/* Floats of a thread's ring of input rows in dwconv_forward_bn_in: KH rows. */
size_t dwconv_forward_bn_in_scratch_floats(const struct conv_shape *s);
/* dwconv_forward (and with part, dwconv_forward_bn's statistics of out) whose input is the BatchNorm+SiLU
 * of x (save, gamma, beta that BatchNorm's), each input row formed once per thread into ring (this
 * thread's dwconv_forward_bn_in_scratch_floats) as the output rows reach it (bn_apply_rows): the input
 * tensor is never written. out and part are bitwise those of the BatchNorm's apply pass, then
 * dwconv_forward or dwconv_forward_bn, for any nth. */
void dwconv_forward_bn_in(float *out, const float *x, const float *save, const float *gamma, const float *beta,
                          const float *w, const float *b, const struct conv_shape *s, double *part, float *ring,
                          int ith, int nth);
/* Whether dwconv_backward_data_bn runs shape s: a specialised shape of at most BN_STREAM_MAX_C channels
 * whose input's BatchNorm row chunks (bn_row_chunks over N·H·W) start on whole input rows. */
int dwconv_bn_fusable(const struct conv_shape *s);
/* dwconv_backward_data (overwriting dinp) fused with the first backward pass of the BatchNorm+SiLU
 * that produced the input: threads take whole row chunks, compute a few input rows of dinp, then turn
 * them into dz while they are in cache (bn_bwd_stream_*; bn_in is that BatchNorm's input x, save,
 * gamma, beta its), so part (K,2,C) and dz over dinp equal dwconv_backward_data then
 * bn_backward_chunks, bitwise, and the BatchNorm goes straight to bn_backward_finish.
 * With dwpart (dwconv_bn_params_part_floats) and ybuf (this thread's dwconv_bn_params_scratch_floats),
 * the weight gradient too, from the input rows the stream recomputes (the forward's SiLU outputs,
 * bitwise) instead of the stored input: each row chunk's taps into dwpart; dwconv_bn_params_finish adds
 * them into dw after a barrier. Not bitwise dwconv_backward_params (the row sums are added input row by
 * input row, chunk by chunk), the same for any nth. No bias gradient.
 * With bd (and dwpart; dout may then be NULL) dout is never read: each of its rows is formed once per
 * thread into ring (this thread's dwconv_bn_dout_ring_floats) from the BatchNorm after this convolution, as
 * its bn_backward_finish would have written it (bn_backward_rows), when the input rows first reach it: the
 * same bits, without that BatchNorm's data gradient written and read back. */
void dwconv_backward_data_bn(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                             double *part, const float *bn_in, const float *save, const float *gamma,
                             const float *beta, float *dwpart, float *ybuf, const struct conv_bn_dout *bd,
                             float *ring, int ith, int nth);
/* Floats of a thread's ring of dout rows in dwconv_backward_data_bn with bd. */
size_t dwconv_bn_dout_ring_floats(const struct conv_shape *s);
/* Floats of dwconv_backward_data_bn's weight-gradient parts: (row chunks, KH·KW, C). */
size_t dwconv_bn_params_part_floats(const struct conv_shape *s);
/* Floats of a thread's SiLU rows in dwconv_backward_data_bn (one batch of input rows). */
size_t dwconv_bn_params_scratch_floats(const struct conv_shape *s);
/* dw (KH,KW,C) += Σ_k dwpart[k] in ascending chunk k: partitioned over taps·channels. */
void dwconv_bn_params_finish(float *dw, const float *dwpart, const struct conv_shape *s, int ith, int nth);
/* dwconv_backward_data_bn's weight-gradient parts dwpart from the stored input inp (N,H,W,C) and dout
 * (N,OH,OW,C), for a layer whose input BatchNorm runs elsewhere (another pipeline stage): the same row chunks,
 * each summed in the same order, so after a barrier dwconv_bn_params_finish gives the fused path's bits
 * (inp holds the rows that path recomputes). Partitioned over row chunks; shapes dwconv_bn_fusable takes. */
void dwconv_bn_params_parts(float *dwpart, const float *inp, const float *dout, const struct conv_shape *s, int ith,
                            int nth);
/* ---- The weight gradient in two calls with a barrier between them (all nth threads call the first,
 *      wait, then the second), for specialised shapes with fewer VL-channel blocks than the machine's
 *      cores: items of (row chunk of the N·OH, channel block) into parts, added in chunk order. Bitwise
 *      the same for any nth (not the single call's bits). ---- */

/* Row chunks of the two-phase weight gradient for s on this machine, or 0 when s uses the single call. */
int dwconv_params_row_chunks(const struct conv_shape *s);
/* Floats of the part buffer the pair needs at most: 16 chunks of (KH·KW + 1)·C. */
size_t dwconv_params_part_floats(const struct conv_shape *s);
/* Phase 1: part = each chunk's dw (K, KH·KW·C) then, with with_db, each chunk's db (K, C). */
void dwconv_backward_params_chunks(float *part, int with_db, const float *inp, const float *dout,
                                   const struct conv_shape *s, int ith, int nth);
/* Phase 2, after a barrier: dw (KH,KW,C) += Σ_k its parts, db (C) += Σ_k its parts (db may be NULL). */
void dwconv_backward_params_finish(float *dw, float *db, const float *part, const struct conv_shape *s, int ith,
                                   int nth);
/* dw (KH,KW,C) += corr(inp (N,H,W,C), dout (N,OH,OW,C)); db (C) += Σ dout (db may be NULL). */
void dwconv_backward_params(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s,
                            int ith, int nth);

/* The portable kernels, callable directly so tests cover them whatever the dispatcher picks. */
void dwconv_forward_portable(float *out, const float *inp, const float *w, const float *b,
                             const struct conv_shape *s, int ith, int nth);
/* dinp (N,H,W,C) += (or = when acc is 0) ..., portable path. */
void dwconv_backward_data_portable(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                   int acc, int ith, int nth);
/* dw (KH,KW,C), db (C) += ..., portable path. */
void dwconv_backward_params_portable(float *dw, float *db, const float *inp, const float *dout,
                                     const struct conv_shape *s, int ith, int nth);

/* Naive references for the tests (single-threaded, double accumulation). */
void dwconv_forward_ref(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s);
/* dinp (N,H,W,C) += reference backward-data. */
void dwconv_backward_data_ref(float *dinp, const float *dout, const float *w, const struct conv_shape *s);
/* dw (KH,KW,C), db (C) += reference backward-params (db may be NULL). */
void dwconv_backward_params_ref(float *dw, float *db, const float *inp, const float *dout,
                                const struct conv_shape *s);

#endif
