/* gemm_rows.h — our own small GEMMs for the skinny 1×1 convolutions that OpenBLAS runs at a third of peak.
 *
 * EfficientNet's early 1×1 layers multiply a tall matrix (N·H·W rows, up to 200,704 at 224×224 batch 16)
 * by a weight matrix with a small side (16–40 channels). sgemm packs both operands and blocks for large
 * K and N; here the weight matrix fits L1, so a register block of rows × output vectors streams the tall
 * matrix once and writes each output once (optionally with non-temporal stores, which skip the read
 * for ownership a 77 MB output would otherwise cost).
 * What it is not: a general GEMM; gemm_rows_fits says where it wins (measured against sgemm in the
 * commit that added it).
 * Threading: none inside; callers split rows. Every output element is one fixed sequence of operations
 * (a chain of FMAs over k from zero, then + its old value when accumulating) whatever the row range or column range of
 * the call, so any partition gives the same bits.
 */
#ifndef TB_GEMM_ROWS_H
#define TB_GEMM_ROWS_H

#include <stddef.h>

/* Returns 1 when a (K, N) right-hand matrix is small enough (fits L1) for gemm_rows / gemm_rows_atb. */
int gemm_rows_fits(int K, int N);

/* y (M,N; row stride ldy) = x (M,K; ldx) · b (K,N; ldb) [+ y]: accumulate adds to y's old value;
 * stream uses non-temporal stores for whole vectors when y and ldy allow it (then fences). With ss and sq
 * (N doubles each; NULL: none) every column's outputs are added into ss[col] and their squares into
 * sq[col], in double, row after row: a BatchNorm's statistics taken while the outputs are in registers,
 * bitwise bn_forward_train_chunks' over the same rows. */
void gemm_rows(float *y, size_t ldy, const float *x, size_t ldx, const float *b, size_t ldb, size_t M, int K,
               int N, int accumulate, int stream, double *ss, double *sq);

/* c (K,N; ldc) += aᵀ · b for a (R,K; lda), b (R,N; ldb): 64-row sub-sums in registers, each added to c. */
void gemm_rows_atb(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, size_t R, int K,
                   int N);

/* gemm_rows_atb that also prefetches the n0 floats at m0 and the n1 at m1 (either may be NULL), a few lines per
 * step of its FMA loop over the whole call: what the caller reads next, while this call computes. */
void gemm_rows_atb_pf(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, size_t R, int K,
                      int N, const float *m0, size_t n0, const float *m1, size_t n1);

#endif
