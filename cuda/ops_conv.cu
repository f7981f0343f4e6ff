/* ops_conv.cu — dense (groups == 1) convolutions on cuBLAS: 1×1 convs as one GEMM, and k×k convs (the
 * 3×3 stride-2 stem) as im2col + GEMM; the GPU twins of core/op_conv.c's GEMM1X1 and IM2COL algorithms.
 * The GEMMs go through cuda_util's tb_cublas_sgemm (cuBLAS loaded with dlopen, TF32 off).
 *
 * NHWC makes a 1×1 stride-1 conv a plain row-major GEMM (N·H·W, C)·(C, OC); cuBLAS is column-major, so
 * each call computes the transposed product, reading the same memory with the roles of the operands
 * swapped. The bias goes in first (a broadcast into out, then the GEMM with beta = 1): an extra write and
 * read of out that cuBLASLt's bias epilogue would save, once cuda_util wraps it (EfficientNet's convs have
 * no bias: BatchNorm follows them; the SE block's two 1×1 convs do, on (N, C) only).
 * The stem (C = 3 or 1) has direct kernels instead (below, and tb_cuda_conv_direct_*): its im2col columns
 * (N·OH·OW, 27) are about the size of its 32-channel output, and its GEMMs are the skinniest of a step.
 * The bias gradient (column sums of dout) is chunked in a fixed order like every reduction here
 * (ops_common.cuh).
 * Mixed precision (the _bf16 launchers): activations, their gradients and the im2col columns in bf16, the
 * weights as the executor's bf16 copy, and every GEMM through tb_cublas_gemm_ex with fp32 accumulation
 * (autocast's convolutions): bf16 outputs, fp32 weight gradients (bf16 products summed in fp32, straight
 * into the fp32 gradient). The bias, as autocast's, is added on the bf16 grid: broadcast into out (rounded
 * once), then the GEMM with beta 1. The _fp16 launchers are the same with fp16 (IEEE half) for bf16
 * throughout (TB_GEMM_FP16, TB_GEMM_FP16_F32C).
 */
#include "cuda_util.h" /* tb_cublas_gemm_ex, for the bf16 and fp16 GEMMs */
#include "ops_common.cuh"
#include "ops_effnet.h"

#include <limits.h>
#include <stdlib.h>

#define COL_ROWS 8 /* blockDim.y of the column sums */

/* out (M,OC) row-major = b broadcast over the rows; the column tracked by step_c (ops_step_c). */
template <typename T> __global__ void k_bias_rows(T *out, const float *b, size_t total, int OC, int step_c)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int c = (int)(i % (size_t)OC);
    for (; i < total; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = ops_to<T>(b[c]);
        c += step_c;
        if (c >= OC) c -= OC;
    }
}

/* part (K, OC) = Σ of each row chunk of x (M, OC). Grid (⌈OC/32⌉, K), block (32, COL_ROWS). */
template <typename T> __global__ void k_colsum_chunks(double *part, const T *x, size_t M, int OC)
{
    __shared__ double sh[32 * COL_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, K = gridDim.y, k = blockIdx.y;
    size_t r0, r1;
    ops_chunk_range(M, K, k, &r0, &r1);
    double s = 0.0;
    if (c < OC)
        for (size_t r = r0 + threadIdx.y; r < r1; r += COL_ROWS) s += (double)ops_f(x[r * OC + c]);
    s = ops_sum_y(s, sh);
    if (threadIdx.y == 0 && c < OC) part[(size_t)k * OC + c] = s;
}

/* db (OC) += Σ_k part[k], chunks in order. */
__global__ void k_colsum_finish(float *db, const double *part, int K, int OC)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    double s = 0.0;
    for (int k = 0; k < K; k++) s += part[(size_t)k * OC + c];
    db[c] += (float)s;
}

/* cols (P, KH·KW·C) = the input patch of each output pixel in (ky, kx, c) order, the HWIO weight's row
 * order, zeros outside the image. */
template <typename T> __global__ void k_im2col(T *cols, const T *inp, conv_shape s)
{
    const int C = s.C, KK = s.KH * s.KW;
    const size_t total = (size_t)s.N * s.OH * s.OW * KK * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % C), tap = (int)(i / C % KK);
        size_t p = i / ((size_t)C * KK);
        int ox = (int)(p % s.OW), oy = (int)(p / s.OW % s.OH), n = (int)(p / ((size_t)s.OW * s.OH));
        int iy = oy * s.stride - s.pad + tap / s.KW, ix = ox * s.stride - s.pad + tap % s.KW;
        cols[i] = iy >= 0 && iy < s.H && ix >= 0 && ix < s.W ? inp[(((size_t)n * s.H + iy) * s.W + ix) * C + c]
                                                              : ops_to<T>(0.0f);
    }
}

/* dinp (n,iy,ix,c) (+)= Σ over the taps reaching it of dcols: a gather, so no atomics. */
template <typename T> __global__ void k_col2im(T *dinp, const T *dcols, conv_shape s, int acc)
{
    const int C = s.C, KK = s.KH * s.KW;
    const size_t total = (size_t)s.N * s.H * s.W * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % C);
        size_t r = i / C;
        int ix = (int)(r % s.W);
        r /= s.W;
        int iy = (int)(r % s.H), n = (int)(r / s.H);
        float v = 0.0f;
        int ky0, oy0, kx0, ox0;
        ops_first_tap(iy, s.pad, s.stride, &ky0, &oy0);
        ops_first_tap(ix, s.pad, s.stride, &kx0, &ox0);
        for (int ky = ky0, oy = oy0; ky < s.KH && oy >= 0; ky += s.stride, oy--) {
            if (oy >= s.OH) continue;
            for (int kx = kx0, ox = ox0; kx < s.KW && ox >= 0; kx += s.stride, ox--) {
                if (ox >= s.OW) continue;
                size_t p = ((size_t)n * s.OH + oy) * s.OW + ox;
                v += ops_f(dcols[(p * KK + ky * s.KW + kx) * C + c]);
            }
        }
        dinp[i] = ops_to<T>(acc ? ops_f(dinp[i]) + v : v);
    }
}

/* ---- Direct k×k convolution of few input channels (the stem: 3×3, C = 3) ----
 * im2col + GEMM writes and reads columns as large as the stem's output, and its weight gradient is a GEMM
 * of inner dimension N·OH·OW (3.2 M at 224 batch 256) with a 27 × 32 result: the stem's forward alone took
 * 7.4 ms of a 121 ms effnet-b0 step on the H200. Here a warp owns one output pixel, a lane per output
 * channel: the pixel's KH·KW·C patch is read once into registers (the same addresses in every lane, so
 * one transaction each) and the weights sit in shared memory. The weight gradient keeps a thread's
 * KH·KW·C + 1 sums (taps, bias) in double registers over its pixels, chunked and finished in chunk order
 * like every reduction here. K and C are template parameters so the patch stays in registers. */
#define DC_PIX 8       /* blockDim.y: pixels of the forward, pixel rows of the weight gradient */
#define DC_MAX_OC 256  /* the forward's weights in shared memory: KH·KW·C·OC floats, 27 KB at most */
#define DC_MAX_GRID 8192

/* The input patch of output pixel (n, oy, ox) in (ky, kx, c) order, zeros outside the image. */
template <typename T, int K, int CI>
static __host__ __device__ __forceinline__ void dc_patch(float *x, const T *inp, const conv_shape &s, int n, int oy,
                                                        int ox)
{
OPS_UNROLL
    for (int ky = 0; ky < K; ky++) {
        const int iy = oy * s.stride - s.pad + ky;
OPS_UNROLL
        for (int kx = 0; kx < K; kx++) {
            const int ix = ox * s.stride - s.pad + kx;
            const bool inside = iy >= 0 && iy < s.H && ix >= 0 && ix < s.W;
            const size_t at = inside ? (((size_t)n * s.H + iy) * s.W + ix) * CI : 0;
OPS_UNROLL
            for (int ci = 0; ci < CI; ci++) x[(ky * K + kx) * CI + ci] = inside ? ops_f(inp[at + ci]) : 0.0f;
        }
    }
}

/* Output channel oc of one pixel: Σ_t x[t]·w[t·OC + oc], then the bias rounded to T first (as the GEMM
 * path adds it: broadcast into the T output, then beta = 1). */
template <typename T, int KD>
static __host__ __device__ __forceinline__ float dc_fwd_one(const float *x, const float *w, const float *b, int OC,
                                                           int oc)
{
    float acc = 0.0f;
OPS_UNROLL
    for (int t = 0; t < KD; t++) acc += x[t] * w[t * OC + oc];
    return b ? acc + ops_f(ops_to<T>(b[oc])) : acc;
}

/* Forward: block (32 lanes over output channels, DC_PIX pixels), grid-stride over the pixels. */
template <typename T, typename WT, int K, int CI>
__global__ void k_conv_direct_fwd(T *out, const T *inp, const WT *w, const float *b, conv_shape s)
{
    extern __shared__ float dc_w[];
    constexpr int KD = K * K * CI;
    const int OC = s.OC;
    for (int i = threadIdx.y * 32 + threadIdx.x; i < KD * OC; i += 32 * DC_PIX) dc_w[i] = ops_f(w[i]);
    __syncthreads();
    const size_t P = (size_t)s.N * s.OH * s.OW;
    for (size_t p = blockIdx.x * (size_t)DC_PIX + threadIdx.y; p < P; p += (size_t)gridDim.x * DC_PIX) {
        const ops_pix q = ops_pix_at(p, s.OW, s.OH);
        float x[KD];
        dc_patch<T, K, CI>(x, inp, s, q.n, q.oy, q.ox);
        for (int oc = threadIdx.x; oc < OC; oc += 32)
            out[p * OC + oc] = ops_to<T>(dc_fwd_one<T, KD>(x, dc_w, b, OC, oc));
    }
}

/* One thread's weight-gradient sums: acc[t] += Σ x_p[t]·dout[p, oc] (t < KD) and acc[KD] += Σ dout[p, oc]
 * over pixels p0 + y, p0 + y + DC_PIX, … below p1. */
template <typename T, int K, int CI>
static __host__ __device__ __forceinline__ void dc_params_thread(double *acc, const T *inp, const T *dout,
                                                                const conv_shape &s, int oc, size_t p0, size_t p1,
                                                                int y)
{
    constexpr int KD = K * K * CI;
    ops_pix q = ops_pix_at(p0 + y, s.OW, s.OH);
    for (size_t p = p0 + y; p < p1; p += DC_PIX, ops_pix_add(&q, DC_PIX, s.OW, s.OH)) {
        float x[KD];
        dc_patch<T, K, CI>(x, inp, s, q.n, q.oy, q.ox);
        const double g = (double)ops_f(dout[p * s.OC + oc]);
        acc[KD] += g;
OPS_UNROLL
        for (int t = 0; t < KD; t++) acc[t] += g * (double)x[t];
    }
}

/* part (chunks, KD + 1, OC): chunk k's sums. Grid (⌈OC/32⌉, chunks), block (32, DC_PIX). */
template <typename T, int K, int CI>
__global__ void k_conv_direct_bwd_params(double *part, const T *inp, const T *dout, conv_shape s)
{
    __shared__ double sh[32 * DC_PIX];
    constexpr int KD = K * K * CI;
    const int oc = blockIdx.x * 32 + threadIdx.x, OC = s.OC;
    size_t p0, p1;
    ops_chunk_range((size_t)s.N * s.OH * s.OW, gridDim.y, blockIdx.y, &p0, &p1);
    double acc[KD + 1];
#pragma unroll
    for (int t = 0; t <= KD; t++) acc[t] = 0.0;
    if (oc < OC) dc_params_thread<T, K, CI>(acc, inp, dout, s, oc, p0, p1, threadIdx.y);
    ops_part_store<KD + 1>(part, acc, sh, blockIdx.y, OC, oc);
}

/* 1 for (K, C) = (3, 3), 2 for (3, 1): the direct instances; 0 where they do not apply. */
static int dc_kind(const conv_shape *s)
{
    if (s->N < 0 || s->groups != 1 || s->KH != 3 || s->KW != 3 || s->stride < 1 || s->OC < 1 || s->OC > DC_MAX_OC)
        return 0;
    return s->C == 3 ? 1 : s->C == 1 ? 2 : 0;
}

template <typename T, typename WT>
static int dc_forward(T *out, const T *inp, const WT *w, const float *b, const conv_shape *s, void *stream)
{
    const int kind = dc_kind(s);
    if (!kind) return (int)cudaErrorInvalidValue;
    const size_t P = (size_t)s->N * s->OH * s->OW, bytes = (size_t)9 * s->C * s->OC * sizeof(float);
    if (P == 0) return 0;
    const size_t want = (P + DC_PIX - 1) / DC_PIX;
    const unsigned grid = (unsigned)(want < DC_MAX_GRID ? want : DC_MAX_GRID);
    const dim3 block(32, DC_PIX);
    cudaStream_t st = (cudaStream_t)stream;
    if (kind == 1) k_conv_direct_fwd<T, WT, 3, 3><<<grid, block, bytes, st>>>(out, inp, w, b, *s);
    else k_conv_direct_fwd<T, WT, 3, 1><<<grid, block, bytes, st>>>(out, inp, w, b, *s);
    return ops_launched();
}

template <typename T>
static int dc_backward_params(float *dw, float *db, const T *inp, const T *dout, const conv_shape *s, void *scratch,
                              void *stream)
{
    const int kind = dc_kind(s);
    if (!kind) return (int)cudaErrorInvalidValue;
    const size_t P = (size_t)s->N * s->OH * s->OW;
    if (P == 0) return 0;
    const int K = ops_chunks(P), KD = 9 * s->C;
    const dim3 grid((unsigned)(s->OC + 31) / 32, (unsigned)K), block(32, DC_PIX);
    cudaStream_t st = (cudaStream_t)stream;
    double *part = (double *)scratch;
    if (kind == 1) k_conv_direct_bwd_params<T, 3, 3><<<grid, block, 0, st>>>(part, inp, dout, *s);
    else k_conv_direct_bwd_params<T, 3, 1><<<grid, block, 0, st>>>(part, inp, dout, *s);
    int err = ops_launched();
    return err ? err : ops_parts_finish(dw, db, part, K, (size_t)KD * s->OC, (size_t)s->OC, st);
}

/* The host twins: the kernels' thread bodies run on the host over every thread, in the kernels' order of
 * sums (a pixel row's sums, then rows 0..DC_PIX-1, then chunks), so the index logic is checked without a
 * GPU (tests/test_cuda_ops.c). */
template <int K, int CI>
static void dc_forward_host(float *out, const float *inp, const float *w, const float *b, const conv_shape *s)
{
    constexpr int KD = K * K * CI;
    const size_t P = (size_t)s->N * s->OH * s->OW;
    for (size_t p = 0; p < P; p++) {
        const ops_pix q = ops_pix_at(p, s->OW, s->OH);
        float x[KD];
        dc_patch<float, K, CI>(x, inp, *s, q.n, q.oy, q.ox);
        for (int oc = 0; oc < s->OC; oc++) out[p * s->OC + oc] = dc_fwd_one<float, KD>(x, w, b, s->OC, oc);
    }
}

template <int K, int CI>
static void dc_backward_params_host(float *dw, float *db, const float *inp, const float *dout, const conv_shape *s)
{
    ops_parts_host<K * K * CI + 1>(dw, db, (size_t)s->N * s->OH * s->OW, s->OC, DC_PIX,
                                   [&](double *acc, int oc, size_t p0, size_t p1, int y) {
                                       dc_params_thread<float, K, CI>(acc, inp, dout, *s, oc, p0, p1, y);
                                   });
}

/* One column-major GEMM C = op(A)·op(B) + beta·C: cuBLAS's sgemm for fp32, GemmEx with fp32 accumulation for
 * bf16 or fp16 operands (into the same type, or into an fp32 weight gradient). Overloads, so the templates below
 * pick by type. */
static int gemm(tb_cublas *h, int ta, int tb, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    return tb_cublas_sgemm(h, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
static int gemm(tb_cublas *h, int ta, int tb, int m, int n, int k, const bf16 *A, int lda, const bf16 *B, int ldb,
                float beta, bf16 *C, int ldc)
{
    return tb_cublas_gemm_ex(h, TB_GEMM_BF16, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
static int gemm(tb_cublas *h, int ta, int tb, int m, int n, int k, const bf16 *A, int lda, const bf16 *B, int ldb,
                float beta, float *C, int ldc)
{
    return tb_cublas_gemm_ex(h, TB_GEMM_BF16_F32C, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
static int gemm(tb_cublas *h, int ta, int tb, int m, int n, int k, const f16 *A, int lda, const f16 *B, int ldb,
                float beta, f16 *C, int ldc)
{
    return tb_cublas_gemm_ex(h, TB_GEMM_FP16, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
static int gemm(tb_cublas *h, int ta, int tb, int m, int n, int k, const f16 *A, int lda, const f16 *B, int ldb,
                float beta, float *C, int ldc)
{
    return tb_cublas_gemm_ex(h, TB_GEMM_FP16_F32C, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

/* The row-major products below, each one column-major GEMM of the transposed problem. */
/* out (M,OC) = in (M,K)·w (K,OC) + beta·out. */
template <typename T>
static int gemm_fwd(tb_cublas *h, T *out, const T *in, const T *w, int M, int K, int OC, float beta)
{
    return gemm(h, 0, 0, OC, M, K, w, OC, in, K, beta, out, OC);
}

/* din (M,K) = dout (M,OC)·wᵀ + beta·din. */
template <typename T>
static int gemm_bwd_data(tb_cublas *h, T *din, const T *dout, const T *w, int M, int K, int OC, float beta)
{
    return gemm(h, 1, 0, K, M, OC, w, OC, dout, OC, beta, din, K);
}

/* dw (K,OC) += in (M,K)ᵀ·dout (M,OC), dw fp32 whatever T. */
template <typename T> static int gemm_bwd_w(tb_cublas *h, float *dw, const T *in, const T *dout, int M, int K, int OC)
{
    return gemm(h, 0, 1, OC, K, M, dout, OC, in, K, 1.0f, dw, OC);
}

/* The 1×1 weight gradient split over rows. One GEMM of inner dimension M = N·H·W (3.2 M at 112×112 batch 256)
 * into an output of K·OC floats (1,536 for 16→96) has output tiles for a few SMs and leaves each a reduction
 * of millions of rows; cut into S chunks of M/S rows, one strided-batched GEMM writes S fp32 parts (beta 0)
 * and ops_parts_finish adds them into dw in chunk order (double sums): S·K·OC floats of scratch, the same
 * result on every run. S: chunks of at least WG_ROWS rows, about WG_BLOCKS output tiles of 128×128 in all
 * (two waves of an H200's 132 SMs), at most WG_SPLIT; 1 (the one GEMM) where that gives under 2, or with
 * TB_CUDA_WGRAD=gemm (an A-B run). Rows past S·(M/S), fewer than S, go into one more part. */
enum { WG_ROWS = 4096, WG_SPLIT = 256, WG_BLOCKS = 264, WG_TILE = 128 * 128 };
static int wg_split_auto(size_t M, int K, int OC)
{
    const size_t out = (size_t)K * OC, tiles = (out + WG_TILE - 1) / WG_TILE;
    size_t s = (WG_BLOCKS + tiles - 1) / tiles;
    if (s > M / WG_ROWS) s = M / WG_ROWS;
    if (s > WG_SPLIT) s = WG_SPLIT;
    return s < 2 ? 1 : (int)s;
}

static int wg_split(size_t M, int K, int OC)
{
    return tb_cuda_env_is("TB_CUDA_WGRAD", "gemm") ? 1 : wg_split_auto(M, K, OC);
}

/* Parts (floats) of the split weight gradient: S·K·OC, plus one part for the rows past S·(M/S). Sized for
 * the split whatever TB_CUDA_WGRAD says now: it is read at each call, so a scratch sized while it was set
 * must still hold the parts once it is unset. */
static size_t wg_part_floats(size_t M, int K, int OC)
{
    const int S = wg_split_auto(M, K, OC);
    return S < 2 ? 0 : (size_t)(S + 1) * K * OC;
}

static int gemm_sb(tb_cublas *h, int m, int n, int k, const float *A, int lda, long long sA, const float *B, int ldb,
                   long long sB, float *C, int ldc, long long sC, int batch)
{
    return tb_cublas_gemm_strided_batched(h, TB_GEMM_FP32, 0, 1, m, n, k, 1.0f, A, lda, sA, B, ldb, sB, 0.0f, C, ldc,
                                          sC, batch);
}
static int gemm_sb(tb_cublas *h, int m, int n, int k, const bf16 *A, int lda, long long sA, const bf16 *B, int ldb,
                   long long sB, float *C, int ldc, long long sC, int batch)
{
    return tb_cublas_gemm_strided_batched(h, TB_GEMM_BF16_F32C, 0, 1, m, n, k, 1.0f, A, lda, sA, B, ldb, sB, 0.0f, C,
                                          ldc, sC, batch);
}
static int gemm_sb(tb_cublas *h, int m, int n, int k, const f16 *A, int lda, long long sA, const f16 *B, int ldb,
                   long long sB, float *C, int ldc, long long sC, int batch)
{
    return tb_cublas_gemm_strided_batched(h, TB_GEMM_FP16_F32C, 0, 1, m, n, k, 1.0f, A, lda, sA, B, ldb, sB, 0.0f, C,
                                          ldc, sC, batch);
}

/* gemm_bwd_w through S row chunks (wg_split's) into part (wg_part_floats), then their sum into dw. */
template <typename T>
static int gemm_bwd_w_split(tb_cublas *h, float *dw, const T *in, const T *dout, int M, int K, int OC, int S,
                            float *part, cudaStream_t st)
{
    const int R = M / S, rest = M - S * R;
    const size_t out = (size_t)K * OC;
    int err = gemm_sb(h, OC, K, R, dout, OC, (long long)R * OC, in, K, (long long)R * K, part, OC, (long long)out, S);
    if (!err && rest)
        err = gemm(h, 0, 1, OC, K, rest, dout + (size_t)S * R * OC, OC, in + (size_t)S * R * K, K, 0.0f,
                   part + (size_t)S * out, OC);
    return err ? err : ops_parts_finish(dw, NULL, part, S + (rest ? 1 : 0), out, 0, st);
}

/* db (OC) += column sums of dout (M, OC) through part (ops_chunks(M)·OC doubles). */
template <typename T> static int bias_grad(float *db, const T *dout, size_t M, int OC, double *part, cudaStream_t st)
{
    int K = ops_chunks(M), err;
    k_colsum_chunks<T><<<dim3((unsigned)(OC + 31) / 32, (unsigned)K), dim3(32, COL_ROWS), 0, st>>>(part, dout, M, OC);
    if ((err = ops_launched())) return err;
    k_colsum_finish<<<(unsigned)(OC + 127) / 128, 128, 0, st>>>(db, part, K, OC);
    return ops_launched();
}

/* Rows of the GEMM (N·OH·OW) if they and the other sizes fit cuBLAS's int, else -1. */
static int gemm_rows(const conv_shape *s, size_t k)
{
    size_t P = (size_t)s->N * s->OH * s->OW;
    return s->N < 0 || s->groups != 1 || P > INT_MAX || k > INT_MAX || s->OC <= 0 ? -1 : (int)P;
}

static int is_1x1(const conv_shape *s)
{
    return s->KH == 1 && s->KW == 1 && s->stride == 1 && s->pad == 0 && s->OH == s->H && s->OW == s->W;
}

/* Forward of a conv whose GEMM input is in (M, Kd): bias first, then the GEMM on the handle's stream. */
template <typename T>
static int fwd_common(tb_cublas *h, T *out, const T *in, const T *w, const float *b, int M, int Kd, int OC,
                      cudaStream_t st)
{
    size_t total = (size_t)M * OC;
    if (b) {
        unsigned gx = ops_grid_rows(total, 1);
        k_bias_rows<T><<<gx, OPS_THREADS, 0, st>>>(out, b, total, OC, ops_step_c(gx, OC));
        int err = ops_launched();
        if (err) return err;
    }
    return gemm_fwd(h, out, in, w, M, Kd, OC, b ? 1.0f : 0.0f);
}

/* Bytes of the im2col scratch before its bias-sum parts: the fp32 columns (bf16, fp16 fit), 256-byte aligned. */
static size_t im2col_part_off(const conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW, cols = P * s->KH * s->KW * (size_t)s->C * sizeof(float);
    return ops_align256(cols);
}

/* The bias-sum part buffer after the columns in the im2col scratch. */
static double *im2col_part(void *scratch, const conv_shape *s)
{
    return (double *)((char *)scratch + im2col_part_off(s));
}

/* The launchers, once per element type; the extern "C" entry points below name the instantiations. */

template <typename T>
static int c1_forward(tb_cublas *h, T *out, const T *inp, const T *w, const float *b, const conv_shape *s,
                      void *stream)
{
    int M = gemm_rows(s, (size_t)s->C);
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    return M ? fwd_common(h, out, inp, w, b, M, s->C, s->OC, (cudaStream_t)stream) : 0;
}

template <typename T>
static int c1_backward_data(tb_cublas *h, T *dinp, const T *dout, const T *w, const conv_shape *s, int acc)
{
    int M = gemm_rows(s, (size_t)s->C);
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    return M ? gemm_bwd_data(h, dinp, dout, w, M, s->C, s->OC, acc ? 1.0f : 0.0f) : 0;
}

/* Bytes of the 1×1 scratch before the split weight gradient's parts: the bias gradient's chunk sums,
 * 256-byte aligned. */
static size_t c1_wg_off(const conv_shape *s)
{
    const size_t bias = (size_t)ops_chunks((size_t)s->N * s->OH * s->OW) * (size_t)s->OC * sizeof(double);
    return ops_align256(bias);
}

template <typename T>
static int c1_backward_params(tb_cublas *h, float *dw, float *db, const T *inp, const T *dout, const conv_shape *s,
                              void *scratch, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C), err;
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    const int S = wg_split((size_t)M, s->C, s->OC);
    if (S > 1)
        err = gemm_bwd_w_split(h, dw, inp, dout, M, s->C, s->OC, S, (float *)((char *)scratch + c1_wg_off(s)),
                               (cudaStream_t)stream);
    else
        err = gemm_bwd_w(h, dw, inp, dout, M, s->C, s->OC);
    if (err) return err;
    return db ? bias_grad(db, dout, (size_t)M, s->OC, (double *)scratch, (cudaStream_t)stream) : 0;
}

/* inp's im2col columns in scratch (M rows of KH·KW·C): the forward's and the weight gradient's operand;
 * *M = 0: nothing to do. */
template <typename T> static int ic_columns(const T *inp, const conv_shape *s, void *scratch, void *stream, int *M)
{
    const size_t Kd = (size_t)s->KH * s->KW * s->C;
    *M = gemm_rows(s, Kd);
    if (*M < 0) return (int)cudaErrorInvalidValue;
    if (!*M) return 0;
    k_im2col<T><<<ops_grid((size_t)*M * Kd), OPS_THREADS, 0, (cudaStream_t)stream>>>((T *)scratch, inp, *s);
    return ops_launched();
}

template <typename T>
static int ic_forward(tb_cublas *h, T *out, const T *inp, const T *w, const float *b, const conv_shape *s,
                      void *scratch, void *stream)
{
    int M, err = ic_columns(inp, s, scratch, stream, &M);
    if (err || !M) return err;
    return fwd_common(h, out, (T *)scratch, w, b, M, s->KH * s->KW * s->C, s->OC, (cudaStream_t)stream);
}

template <typename T>
static int ic_backward_data(tb_cublas *h, T *dinp, const T *dout, const T *w, const conv_shape *s, int acc,
                            void *scratch, void *stream)
{
    size_t Kd = (size_t)s->KH * s->KW * s->C;
    int M = gemm_rows(s, Kd), err;
    if (M < 0) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    T *dcols = (T *)scratch;
    if ((err = gemm_bwd_data(h, dcols, dout, w, M, (int)Kd, s->OC, 0.0f))) return err;
    size_t total = (size_t)s->N * s->H * s->W * s->C;
    k_col2im<T><<<ops_grid(total), OPS_THREADS, 0, (cudaStream_t)stream>>>(dinp, dcols, *s, acc);
    return ops_launched();
}

template <typename T>
static int ic_backward_params(tb_cublas *h, float *dw, float *db, const T *inp, const T *dout, const conv_shape *s,
                              void *scratch, void *stream)
{
    int M, err = ic_columns(inp, s, scratch, stream, &M);
    if (err || !M) return err;
    if ((err = gemm_bwd_w(h, dw, (T *)scratch, dout, M, s->KH * s->KW * s->C, s->OC))) return err;
    return db ? bias_grad(db, dout, (size_t)M, s->OC, im2col_part(scratch, s), (cudaStream_t)stream) : 0;
}

extern "C" {

int tb_cuda_conv1x1_forward(tb_cublas *cublas, float *out, const float *inp, const float *w, const float *b,
                            const struct conv_shape *s, void *stream)
{
    return c1_forward(cublas, out, inp, w, b, s, stream);
}

int tb_cuda_conv1x1_backward_data(tb_cublas *cublas, float *dinp, const float *dout, const float *w,
                                  const struct conv_shape *s, int acc)
{
    return c1_backward_data(cublas, dinp, dout, w, s, acc);
}

size_t tb_cuda_conv1x1_scratch_bytes(const struct conv_shape *s)
{
    return c1_wg_off(s) + wg_part_floats((size_t)s->N * s->OH * s->OW, s->C, s->OC) * sizeof(float);
}

int tb_cuda_conv1x1_backward_params(tb_cublas *cublas, float *dw, float *db, const float *inp, const float *dout,
                                    const struct conv_shape *s, void *scratch, void *stream)
{
    return c1_backward_params(cublas, dw, db, inp, dout, s, scratch, stream);
}

size_t tb_cuda_conv_im2col_scratch_bytes(const struct conv_shape *s)
{
    return im2col_part_off(s) + (size_t)ops_chunks((size_t)s->N * s->OH * s->OW) * (size_t)s->OC * sizeof(double);
}

int tb_cuda_conv_direct_fits(const struct conv_shape *s) { return dc_kind(s) != 0; }

size_t tb_cuda_conv_direct_scratch_bytes(const struct conv_shape *s)
{
    return (size_t)ops_chunks((size_t)s->N * s->OH * s->OW) * ((size_t)s->KH * s->KW * s->C + 1) * (size_t)s->OC *
           sizeof(double);
}

int tb_cuda_conv_direct_forward(float *out, const float *inp, const float *w, const float *b,
                                const struct conv_shape *s, void *stream)
{
    return dc_forward(out, inp, w, b, s, stream);
}

int tb_cuda_conv_direct_backward_params(float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s, void *scratch, void *stream)
{
    return dc_backward_params(dw, db, inp, dout, s, scratch, stream);
}

int tb_cuda_conv_direct_forward_host(float *out, const float *inp, const float *w, const float *b,
                                     const struct conv_shape *s)
{
    const int kind = dc_kind(s);
    if (kind == 1) dc_forward_host<3, 3>(out, inp, w, b, s);
    else if (kind == 2) dc_forward_host<3, 1>(out, inp, w, b, s);
    return kind ? 0 : (int)cudaErrorInvalidValue;
}

int tb_cuda_conv_direct_backward_params_host(float *dw, float *db, const float *inp, const float *dout,
                                             const struct conv_shape *s)
{
    const int kind = dc_kind(s);
    if (kind == 1) dc_backward_params_host<3, 3>(dw, db, inp, dout, s);
    else if (kind == 2) dc_backward_params_host<3, 1>(dw, db, inp, dout, s);
    return kind ? 0 : (int)cudaErrorInvalidValue;
}

int tb_cuda_conv_im2col_forward(tb_cublas *cublas, float *out, const float *inp, const float *w, const float *b,
                                const struct conv_shape *s, void *scratch, void *stream)
{
    return ic_forward(cublas, out, inp, w, b, s, scratch, stream);
}

int tb_cuda_conv_im2col_backward_data(tb_cublas *cublas, float *dinp, const float *dout, const float *w,
                                      const struct conv_shape *s, int acc, void *scratch, void *stream)
{
    return ic_backward_data(cublas, dinp, dout, w, s, acc, scratch, stream);
}

int tb_cuda_conv_im2col_backward_params(tb_cublas *cublas, float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s, void *scratch, void *stream)
{
    return ic_backward_params(cublas, dw, db, inp, dout, s, scratch, stream);
}

/* The 2-byte launchers, once for bf16 and once for fp16 (tb_cuda_*_bf16 and tb_cuda_*_fp16): the C API's
 * void pointers viewed as T, the same instantiations with the other type. */
#define CONV_HALF_LAUNCHERS(SUF, T) \
int tb_cuda_conv1x1_forward_##SUF(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b, \
                                 const struct conv_shape *s, void *stream) \
{ \
    return c1_forward(cublas, (T *)(out), (const T *)(inp), (const T *)(w16), b, s, stream); \
} \
\
int tb_cuda_conv1x1_backward_data_##SUF(tb_cublas *cublas, void *dinp, const void *dout, const void *w16, \
                                       const struct conv_shape *s, int acc) \
{ \
    return c1_backward_data(cublas, (T *)(dinp), (const T *)(dout), (const T *)(w16), s, acc); \
} \
\
int tb_cuda_conv1x1_backward_params_##SUF(tb_cublas *cublas, float *dw, float *db, const void *inp, const void *dout, \
                                         const struct conv_shape *s, void *scratch, void *stream) \
{ \
    return c1_backward_params(cublas, dw, db, (const T *)(inp), (const T *)(dout), s, scratch, stream); \
} \
\
int tb_cuda_conv_direct_forward_##SUF(void *out, const void *inp, const void *w16, const float *b, \
                                     const struct conv_shape *s, void *stream) \
{ \
    return dc_forward((T *)(out), (const T *)(inp), (const T *)(w16), b, s, stream); \
} \
\
int tb_cuda_conv_direct_backward_params_##SUF(float *dw, float *db, const void *inp, const void *dout, \
                                             const struct conv_shape *s, void *scratch, void *stream) \
{ \
    return dc_backward_params(dw, db, (const T *)(inp), (const T *)(dout), s, scratch, stream); \
} \
\
int tb_cuda_conv_im2col_forward_##SUF(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b, \
                                     const struct conv_shape *s, void *scratch, void *stream) \
{ \
    return ic_forward(cublas, (T *)(out), (const T *)(inp), (const T *)(w16), b, s, scratch, stream); \
} \
\
int tb_cuda_conv_im2col_backward_data_##SUF(tb_cublas *cublas, void *dinp, const void *dout, const void *w16, \
                                           const struct conv_shape *s, int acc, void *scratch, void *stream) \
{ \
    return ic_backward_data(cublas, (T *)(dinp), (const T *)(dout), (const T *)(w16), s, acc, scratch, stream); \
} \
\
int tb_cuda_conv_im2col_backward_params_##SUF(tb_cublas *cublas, float *dw, float *db, const void *inp, \
                                             const void *dout, const struct conv_shape *s, void *scratch, \
                                             void *stream) \
{ \
    return ic_backward_params(cublas, dw, db, (const T *)(inp), (const T *)(dout), s, scratch, stream); \
}

CONV_HALF_LAUNCHERS(bf16, bf16)
CONV_HALF_LAUNCHERS(fp16, f16)

} /* extern "C" */
