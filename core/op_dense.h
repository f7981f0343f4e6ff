/* op_dense.h — fully connected layer y = x·W + b on (N,IN) → (N,OUT).
 *
 * Weights (IN,OUT) row-major, bias (OUT). Batched paths are single-threaded OpenBLAS sgemm calls on
 * the caller's slice (the engine owns the threads); N = 1 uses our own vector kernels, which skip zero
 * inputs (ReLU outputs and blank pixels), where sgemm's call overhead dominates. Backward accumulates.
 */
#ifndef TB_OP_DENSE_H
#define TB_OP_DENSE_H

#include <stddef.h>

struct dense_shape {
    int N, IN, OUT;
    int par; /* parallel units its tiles are cut for (0: the machine's; layout.h's tb_units) */
};

/* out (N,OUT) = inp (N,IN) · w (IN,OUT) + b (OUT), then max(0,·) when relu; b may be NULL. Partitioned
 * over fixed tiles of rows of out (of OUT columns when N is small). */
void dense_forward(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s,
                   int relu, int ith, int nth);
/* The row tile height of dense_forward's and dense_backward_data's batched passes of shape s when both split
 * whole rows only (a function of the shape and the machine, never nth); 0 when either cuts columns too (or
 * the batch is under their row split, or the weights are too large for short row tiles to pay). */
int dense_row_tile(const struct dense_shape *s);
/* Rows [r0,r1) of dense_forward (all OUT columns): bitwise its tile when r0 and r1 are on dense_row_tile(s)'s
 * edges (r1 = N or r0 + the tile), so a thread owning those rows may run them through a per-sample chain. */
void dense_forward_rows(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s,
                        int relu, int r0, int r1);
/* Rows [r0,r1) of dense_backward_data (all IN columns), bitwise its tile on dense_row_tile(s)'s edges. */
void dense_backward_data_rows(float *dinp, const float *dout, const float *w, const struct dense_shape *s, int r0,
                              int r1);
/* A batch of one sums its input rows in fixed chunks: out = b + Σ_k (Σ_{i in chunk k} x[i]·w[i,:]), each
 * chunk's sum from zero (rows with x[i] = 0 skipped), the chunks added in ascending k. A pass that
 * updates w partitioned by chunks of rows can then form the same chunk sums on any thread. */
#define DENSE1_ROW_CHUNK 16
/* Returns the number of row chunks of a batch-1 input of IN. */
int dense1_chunks(int IN);
/* out[o] = b[o] + Σ_k part[k·OUT + o] in ascending k (b may be NULL), then max(0,·) when relu:
 * the last stage of a batch-1 forward whose chunk sums (dense1_chunks(IN), OUT) are in part.
 * Partitioned over columns. */
void dense1_combine(float *out, const float *part, const float *b, int IN, int OUT, int relu, int ith, int nth);
/* dense1_combine on the columns [lo,hi) only (any range: each column's arithmetic is the same). */
void dense1_combine_range(float *out, const float *part, const float *b, int IN, int OUT, int relu, int lo, int hi);
/* dinp (N,IN) += dout (N,OUT) · wᵀ. Partitioned over rows of dinp (columns when N is small). */
void dense_backward_data(float *dinp, const float *dout, const float *w, const struct dense_shape *s,
                         int ith, int nth);
/* dw (IN,OUT) += inpᵀ · dout; db (OUT) += Σ_n dout (db may be NULL); acc 0: both written, not added to
 * (the bits of adding to zeros). Partitioned over rows of dw. */
void dense_backward_params(float *dw, float *db, const float *inp, const float *dout,
                           const struct dense_shape *s, int acc, int ith, int nth);

/* Naive references for the tests. */
void dense_forward_ref(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s);
void dense_backward_data_ref(float *dinp, const float *dout, const float *w, const struct dense_shape *s);
void dense_backward_params_ref(float *dw, float *db, const float *inp, const float *dout, const struct dense_shape *s);

#endif
