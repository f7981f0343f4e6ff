/* ops_conv.cu — dense (groups == 1) convolutions on cuBLAS: 1×1 convs as one GEMM, and k×k convs (the
 * 3×3 stride-2 stem) as im2col + GEMM; the GPU twins of core/op_conv.c's GEMM1X1 and IM2COL algorithms.
 * The GEMMs go through cuda_util's tb_cublas_sgemm (cuBLAS loaded with dlopen, TF32 off).
 *
 * NHWC makes a 1×1 stride-1 conv a plain row-major GEMM (N·H·W, C)·(C, OC); cuBLAS is column-major, so
 * each call computes the transposed product, reading the same memory with the roles of the operands
 * swapped. The bias goes in first (a broadcast into out, then the GEMM with beta = 1): an extra write and
 * read of out that cuBLASLt's bias epilogue would save, once cuda_util wraps it (EfficientNet's convs have
 * no bias: BatchNorm follows them; the SE block's two 1×1 convs do, on (N, C) only).
 * The stem has C = 3, so its im2col columns (N·OH·OW, 27) are about the size of its 32-channel output;
 * an implicit-GEMM kernel would save writing and reading them, but the stem is a small part of a step.
 * The bias gradient (column sums of dout) is chunked in a fixed order like every reduction here
 * (ops_common.cuh).
 * Mixed precision (the _bf16 launchers): activations, their gradients and the im2col columns in bf16, the
 * weights as the executor's bf16 copy, and every GEMM through tb_cublas_gemm_ex with fp32 accumulation
 * (autocast's convolutions): bf16 outputs, fp32 weight gradients (bf16 products summed in fp32, straight
 * into the fp32 gradient). The bias, as autocast's, is added on the bf16 grid: broadcast into out (rounded
 * once), then the GEMM with beta 1.
 */
#include "cuda_util.h" /* tb_cublas_gemm_ex, for the bf16 GEMMs */
#include "ops_common.cuh"
#include "ops_effnet.h"

#include <limits.h>

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

/* One column-major GEMM C = op(A)·op(B) + beta·C: cuBLAS's sgemm for fp32, GemmEx with fp32 accumulation for
 * bf16 operands (into bf16, or into an fp32 weight gradient). Overloads, so the templates below pick by type. */
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

/* The bias-sum part buffer after the columns in the im2col scratch (the fp32 columns' size: bf16 fits). */
static double *im2col_part(void *scratch, const conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW, cols = P * s->KH * s->KW * (size_t)s->C * sizeof(float);
    return (double *)((char *)scratch + ((cols + 255) & ~(size_t)255));
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

template <typename T>
static int c1_backward_params(tb_cublas *h, float *dw, float *db, const T *inp, const T *dout, const conv_shape *s,
                              void *scratch, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C), err;
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    if ((err = gemm_bwd_w(h, dw, inp, dout, M, s->C, s->OC))) return err;
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

/* bf16 views of the C API's void pointers. */
#define B(p) ((bf16 *)(p))
#define CB(p) ((const bf16 *)(p))

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
    return (size_t)ops_chunks((size_t)s->N * s->OH * s->OW) * (size_t)s->OC * sizeof(double);
}

int tb_cuda_conv1x1_backward_params(tb_cublas *cublas, float *dw, float *db, const float *inp, const float *dout,
                                    const struct conv_shape *s, void *scratch, void *stream)
{
    return c1_backward_params(cublas, dw, db, inp, dout, s, scratch, stream);
}

size_t tb_cuda_conv_im2col_scratch_bytes(const struct conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW, cols = P * s->KH * s->KW * (size_t)s->C * sizeof(float);
    return ((cols + 255) & ~(size_t)255) + (size_t)ops_chunks(P) * (size_t)s->OC * sizeof(double);
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

/* ---- bf16 storage ---- */

int tb_cuda_conv1x1_forward_bf16(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b,
                                 const struct conv_shape *s, void *stream)
{
    return c1_forward(cublas, B(out), CB(inp), CB(w16), b, s, stream);
}

int tb_cuda_conv1x1_backward_data_bf16(tb_cublas *cublas, void *dinp, const void *dout, const void *w16,
                                       const struct conv_shape *s, int acc)
{
    return c1_backward_data(cublas, B(dinp), CB(dout), CB(w16), s, acc);
}

int tb_cuda_conv1x1_backward_params_bf16(tb_cublas *cublas, float *dw, float *db, const void *inp, const void *dout,
                                         const struct conv_shape *s, void *scratch, void *stream)
{
    return c1_backward_params(cublas, dw, db, CB(inp), CB(dout), s, scratch, stream);
}

int tb_cuda_conv_im2col_forward_bf16(tb_cublas *cublas, void *out, const void *inp, const void *w16, const float *b,
                                     const struct conv_shape *s, void *scratch, void *stream)
{
    return ic_forward(cublas, B(out), CB(inp), CB(w16), b, s, scratch, stream);
}

int tb_cuda_conv_im2col_backward_data_bf16(tb_cublas *cublas, void *dinp, const void *dout, const void *w16,
                                           const struct conv_shape *s, int acc, void *scratch, void *stream)
{
    return ic_backward_data(cublas, B(dinp), CB(dout), CB(w16), s, acc, scratch, stream);
}

int tb_cuda_conv_im2col_backward_params_bf16(tb_cublas *cublas, float *dw, float *db, const void *inp,
                                             const void *dout, const struct conv_shape *s, void *scratch,
                                             void *stream)
{
    return ic_backward_params(cublas, dw, db, CB(inp), CB(dout), s, scratch, stream);
}

} /* extern "C" */
