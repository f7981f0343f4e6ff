/* ops_conv.cu — dense (groups == 1) convolutions on cuBLAS: 1×1 convs as one GEMM, and k×k convs (the
 * 3×3 stride-2 stem) as im2col + GEMM; the GPU twins of core/op_conv.c's GEMM1X1 and IM2COL algorithms.
 *
 * NHWC makes a 1×1 stride-1 conv a plain row-major GEMM (N·H·W, C)·(C, OC); cuBLAS is column-major, so
 * each call computes the transposed product, reading the same memory with the roles of the operands
 * swapped. The bias goes in first (a broadcast into out, then the GEMM with beta = 1): no extra pass.
 * The stem has C = 3, so its im2col columns (N·OH·OW, 27) are small next to its output; an implicit-GEMM
 * kernel would save that pass but the stem is < 1% of EfficientNet's time. The bias gradient (column
 * sums of dout) is chunked in a fixed order like every reduction here (ops_common.cuh).
 */
#include "ops_common.cuh"
#include "ops_effnet.h"

#include <cublas_v2.h>
#include <limits.h>

#define COL_ROWS 8 /* blockDim.y of the column sums */

static int blas(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS ? 0 : TB_CUDA_CUBLAS_ERR + (int)st; }

/* out (M,OC) row-major = b broadcast over the rows (float or bf16 out). */
template <typename T> __global__ void k_bias_rows(T *out, const float *b, size_t total, int OC)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = (T)b[i % (size_t)OC];
}

/* part (K, OC) = Σ of each row chunk of x (M, OC). Grid (⌈OC/32⌉, K), block (32, COL_ROWS). */
__global__ void k_colsum_chunks(double *part, const float *x, size_t M, int OC)
{
    __shared__ double sh[32 * COL_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, K = gridDim.y, k = blockIdx.y;
    size_t r0, r1;
    ops_chunk_range(M, K, k, &r0, &r1);
    double s = 0.0;
    if (c < OC)
        for (size_t r = r0 + threadIdx.y; r < r1; r += COL_ROWS) s += (double)x[r * OC + c];
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
__global__ void k_im2col(float *cols, const float *inp, conv_shape s)
{
    const int C = s.C, KK = s.KH * s.KW;
    const size_t total = (size_t)s.N * s.OH * s.OW * KK * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % C), tap = (int)(i / C % KK);
        size_t p = i / ((size_t)C * KK);
        int ox = (int)(p % s.OW), oy = (int)(p / s.OW % s.OH), n = (int)(p / ((size_t)s.OW * s.OH));
        int iy = oy * s.stride - s.pad + tap / s.KW, ix = ox * s.stride - s.pad + tap % s.KW;
        cols[i] = iy >= 0 && iy < s.H && ix >= 0 && ix < s.W ? inp[(((size_t)n * s.H + iy) * s.W + ix) * C + c]
                                                              : 0.0f;
    }
}

/* dinp (n,iy,ix,c) (+)= Σ over the taps reaching it of dcols: a gather, so no atomics. */
__global__ void k_col2im(float *dinp, const float *dcols, conv_shape s, int acc)
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
        for (int ky = 0; ky < s.KH; ky++) {
            int ty = iy + s.pad - ky;
            if (ty < 0 || ty % s.stride || ty / s.stride >= s.OH) continue;
            for (int kx = 0; kx < s.KW; kx++) {
                int tx = ix + s.pad - kx;
                if (tx < 0 || tx % s.stride || tx / s.stride >= s.OW) continue;
                size_t p = ((size_t)n * s.OH + ty / s.stride) * s.OW + tx / s.stride;
                v += dcols[(p * KK + ky * s.KW + kx) * C + c];
            }
        }
        dinp[i] = acc ? dinp[i] + v : v;
    }
}

/* out (M,OC) = in (M,K)·w (K,OC) + beta·out, row-major; t the storage type (fp32: Sgemm, bf16: GemmEx). */
static int gemm_fwd(cublasHandle_t h, void *out, const void *in, const void *w, int M, int K, int OC, float beta,
                    cudaDataType_t t)
{
    const float one = 1.0f;
    if (t == CUDA_R_32F)
        return blas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, OC, M, K, &one, (const float *)w, OC, (const float *)in,
                                K, &beta, (float *)out, OC));
    return blas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, OC, M, K, &one, w, t, OC, in, t, K, &beta, out, t, OC,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* din (M,K) = dout (M,OC)·wᵀ + beta·din, row-major. */
static int gemm_bwd_data(cublasHandle_t h, void *din, const void *dout, const void *w, int M, int K, int OC,
                         float beta, cudaDataType_t t)
{
    const float one = 1.0f;
    if (t == CUDA_R_32F)
        return blas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, K, M, OC, &one, (const float *)w, OC,
                                (const float *)dout, OC, &beta, (float *)din, K));
    return blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, K, M, OC, &one, w, t, OC, dout, t, OC, &beta, din, t, K,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* dw (K,OC) fp32 += in (M,K)ᵀ·dout (M,OC), row-major. */
static int gemm_bwd_w(cublasHandle_t h, float *dw, const void *in, const void *dout, int M, int K, int OC,
                      cudaDataType_t t)
{
    const float one = 1.0f;
    if (t == CUDA_R_32F)
        return blas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, OC, K, M, &one, (const float *)dout, OC,
                                (const float *)in, K, &one, dw, OC));
    return blas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, OC, K, M, &one, dout, t, OC, in, t, K, &one, dw, CUDA_R_32F,
                             OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* db (OC) += column sums of dout (M, OC) through part (ops_chunks(M)·OC doubles). */
static int bias_grad(float *db, const float *dout, size_t M, int OC, double *part, cudaStream_t st)
{
    int K = ops_chunks(M), err;
    k_colsum_chunks<<<dim3((unsigned)(OC + 31) / 32, (unsigned)K), dim3(32, COL_ROWS), 0, st>>>(part, dout, M, OC);
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

/* Sets the handle's stream; 0 or the error. */
static int on_stream(void *cublas, void *stream)
{
    return blas(cublasSetStream((cublasHandle_t)cublas, (cudaStream_t)stream));
}

/* Forward of a conv whose GEMM input is in (M, Kd): bias first, then the GEMM. */
static int fwd_common(void *cublas, void *out, const void *in, const void *w, const float *b, int M, int Kd, int OC,
                      cudaDataType_t t, void *stream)
{
    int err = on_stream(cublas, stream);
    if (err) return err;
    size_t total = (size_t)M * OC;
    if (b) {
        if (t == CUDA_R_32F)
            k_bias_rows<float><<<ops_grid(total), OPS_THREADS, 0, (cudaStream_t)stream>>>((float *)out, b, total, OC);
        else
            k_bias_rows<__nv_bfloat16>
                <<<ops_grid(total), OPS_THREADS, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)out, b, total, OC);
        if ((err = ops_launched())) return err;
    }
    return gemm_fwd((cublasHandle_t)cublas, out, in, w, M, Kd, OC, b ? 1.0f : 0.0f, t);
}

extern "C" {

int tb_cuda_conv1x1_forward(void *cublas, float *out, const float *inp, const float *w, const float *b,
                            const struct conv_shape *s, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C);
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    return M ? fwd_common(cublas, out, inp, w, b, M, s->C, s->OC, CUDA_R_32F, stream) : 0;
}

int tb_cuda_conv1x1_backward_data(void *cublas, float *dinp, const float *dout, const float *w,
                                  const struct conv_shape *s, int acc, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C), err;
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    if ((err = on_stream(cublas, stream))) return err;
    return gemm_bwd_data((cublasHandle_t)cublas, dinp, dout, w, M, s->C, s->OC, acc ? 1.0f : 0.0f, CUDA_R_32F);
}

size_t tb_cuda_conv1x1_scratch_bytes(const struct conv_shape *s)
{
    return (size_t)ops_chunks((size_t)s->N * s->OH * s->OW) * (size_t)s->OC * sizeof(double);
}

int tb_cuda_conv1x1_backward_params(void *cublas, float *dw, float *db, const float *inp, const float *dout,
                                    const struct conv_shape *s, void *scratch, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C), err;
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    if ((err = on_stream(cublas, stream))) return err;
    if ((err = gemm_bwd_w((cublasHandle_t)cublas, dw, inp, dout, M, s->C, s->OC, CUDA_R_32F))) return err;
    return db ? bias_grad(db, dout, (size_t)M, s->OC, (double *)scratch, (cudaStream_t)stream) : 0;
}

int tb_cuda_conv1x1_forward_bf16(void *cublas, void *out, const void *inp, const void *w, const float *b,
                                 const struct conv_shape *s, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C);
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    return M ? fwd_common(cublas, out, inp, w, b, M, s->C, s->OC, CUDA_R_16BF, stream) : 0;
}

int tb_cuda_conv1x1_backward_data_bf16(void *cublas, void *dinp, const void *dout, const void *w,
                                       const struct conv_shape *s, int acc, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C), err;
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    if ((err = on_stream(cublas, stream))) return err;
    return gemm_bwd_data((cublasHandle_t)cublas, dinp, dout, w, M, s->C, s->OC, acc ? 1.0f : 0.0f, CUDA_R_16BF);
}

int tb_cuda_conv1x1_backward_params_bf16(void *cublas, float *dw, const void *inp, const void *dout,
                                         const struct conv_shape *s, void *stream)
{
    int M = gemm_rows(s, (size_t)s->C), err;
    if (M < 0 || !is_1x1(s)) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    if ((err = on_stream(cublas, stream))) return err;
    return gemm_bwd_w((cublasHandle_t)cublas, dw, inp, dout, M, s->C, s->OC, CUDA_R_16BF);
}

size_t tb_cuda_conv_im2col_scratch_bytes(const struct conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW, cols = P * s->KH * s->KW * (size_t)s->C * sizeof(float);
    return ((cols + 255) & ~(size_t)255) + (size_t)ops_chunks(P) * (size_t)s->OC * sizeof(double);
}

/* The bias-sum part buffer after the columns in the im2col scratch. */
static double *im2col_part(void *scratch, const conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW, cols = P * s->KH * s->KW * (size_t)s->C * sizeof(float);
    return (double *)((char *)scratch + ((cols + 255) & ~(size_t)255));
}

int tb_cuda_conv_im2col_forward(void *cublas, float *out, const float *inp, const float *w, const float *b,
                                const struct conv_shape *s, void *scratch, void *stream)
{
    size_t Kd = (size_t)s->KH * s->KW * s->C;
    int M = gemm_rows(s, Kd), err;
    if (M < 0) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    float *cols = (float *)scratch;
    k_im2col<<<ops_grid((size_t)M * Kd), OPS_THREADS, 0, (cudaStream_t)stream>>>(cols, inp, *s);
    if ((err = ops_launched())) return err;
    return fwd_common(cublas, out, cols, w, b, M, (int)Kd, s->OC, CUDA_R_32F, stream);
}

int tb_cuda_conv_im2col_backward_data(void *cublas, float *dinp, const float *dout, const float *w,
                                      const struct conv_shape *s, int acc, void *scratch, void *stream)
{
    size_t Kd = (size_t)s->KH * s->KW * s->C;
    int M = gemm_rows(s, Kd), err;
    if (M < 0) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    float *dcols = (float *)scratch;
    if ((err = on_stream(cublas, stream))) return err;
    if ((err = gemm_bwd_data((cublasHandle_t)cublas, dcols, dout, w, M, (int)Kd, s->OC, 0.0f, CUDA_R_32F)))
        return err;
    size_t total = (size_t)s->N * s->H * s->W * s->C;
    k_col2im<<<ops_grid(total), OPS_THREADS, 0, (cudaStream_t)stream>>>(dinp, dcols, *s, acc);
    return ops_launched();
}

int tb_cuda_conv_im2col_backward_params(void *cublas, float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s, void *scratch, void *stream)
{
    size_t Kd = (size_t)s->KH * s->KW * s->C;
    int M = gemm_rows(s, Kd), err;
    if (M < 0) return (int)cudaErrorInvalidValue;
    if (!M) return 0;
    float *cols = (float *)scratch;
    k_im2col<<<ops_grid((size_t)M * Kd), OPS_THREADS, 0, (cudaStream_t)stream>>>(cols, inp, *s);
    if ((err = ops_launched())) return err;
    if ((err = on_stream(cublas, stream))) return err;
    if ((err = gemm_bwd_w((cublasHandle_t)cublas, dw, cols, dout, M, (int)Kd, s->OC, CUDA_R_32F))) return err;
    return db ? bias_grad(db, dout, (size_t)M, s->OC, im2col_part(scratch, s), (cudaStream_t)stream) : 0;
}

} /* extern "C" */
