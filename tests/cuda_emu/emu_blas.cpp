/* emu_blas.cpp — cuda_util.h's GEMMs for the CPU emulation (what cublas_dl.c does through cuBLAS): fp32 by
 * OpenBLAS's sgemm; bf16 and fp16 operands widened to fp32, multiplied in fp32, and the product rounded to
 * the output type to nearest even, as cublasGemmEx with CUBLAS_COMPUTE_32F does (in its own summation order). */
#include "emu.h" /* first (it defines __shared__ before the CUDA headers): tbemu::capturing, tbemu::record */

#include "cuda_util.h"

extern "C" {
#include "status.h"
}

#include <cblas.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <vector>

struct tb_cublas {
    cudaStream_t stream; /* a GEMM on it while it is captured goes into the graph, as cuBLAS's kernels would */
};

extern "C" int tb_cublas_create(tb_cublas **h, cudaStream_t s)
{
    *h = static_cast<tb_cublas *>(std::calloc(1, sizeof **h));
    if (!*h) return tb_error_set(TB_ENOMEM, "cuda: out of memory");
    (*h)->stream = s;
    return TB_OK;
}

extern "C" void tb_cublas_destroy(tb_cublas *h) { std::free(h); }

namespace {

int elem_bytes(enum tb_gemm_prec p) { return p == TB_GEMM_FP32 || p == TB_GEMM_TF32 ? 4 : 2; }
bool is_fp16(enum tb_gemm_prec p) { return p == TB_GEMM_FP16 || p == TB_GEMM_FP16_F32C; }
bool c_is_fp32(enum tb_gemm_prec p) { return elem_bytes(p) == 4 || p == TB_GEMM_BF16_F32C || p == TB_GEMM_FP16_F32C; }

float load(enum tb_gemm_prec p, const void *base, size_t i)
{
    if (elem_bytes(p) == 4) return static_cast<const float *>(base)[i];
    if (is_fp16(p)) return __half2float(static_cast<const __half *>(base)[i]);
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[i]);
}

/* rows x cols of a column-major matrix with leading dimension ld, as fp32 (same layout, ld = rows). */
std::vector<float> widen(enum tb_gemm_prec p, const void *m, int rows, int cols, int ld)
{
    std::vector<float> w((size_t)rows * cols);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) w[(size_t)j * rows + i] = load(p, m, (size_t)j * ld + i);
    return w;
}

void one_gemm(enum tb_gemm_prec p, int ta, int tb, int m, int n, int k, float alpha, const void *A, int lda,
              const void *B, int ldb, float beta, void *C, int ldc)
{
    const CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
    if (elem_bytes(p) == 4) {
        cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, static_cast<const float *>(A), lda,
                    static_cast<const float *>(B), ldb, beta, static_cast<float *>(C), ldc);
        return;
    }
    const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    const std::vector<float> a = widen(p, A, ar, ac, lda), b = widen(p, B, br, bc, ldb);
    if (c_is_fp32(p)) {
        cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, a.data(), ar, b.data(), br, beta, static_cast<float *>(C), ldc);
        return;
    }
    std::vector<float> c = beta != 0.0f ? widen(p, C, m, n, ldc) : std::vector<float>((size_t)m * n, 0.0f);
    cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, a.data(), ar, b.data(), br, beta, c.data(), m);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const float v = c[(size_t)j * m + i];
            if (is_fp16(p)) static_cast<__half *>(C)[(size_t)j * ldc + i] = __float2half_rn(v);
            else static_cast<__nv_bfloat16 *>(C)[(size_t)j * ldc + i] = __float2bfloat16(v);
        }
}

} // namespace

/* One GEMM now, or into the graph its handle's stream is capturing (the operands are read at the replay). */
static void gemm_on(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k, float alpha, const void *A,
                    int lda, const void *B, int ldb, float beta, void *C, int ldc)
{
    if (tbemu::capturing(h->stream))
        tbemu::record(h->stream, [=] { one_gemm(p, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); });
    else
        one_gemm(p, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

extern "C" int tb_cublas_sgemm(tb_cublas *h, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                               const float *B, int ldb, float beta, float *C, int ldc)
{
    gemm_on(h, TB_GEMM_FP32, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return TB_OK;
}

extern "C" int tb_cublas_gemm_ex(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k, float alpha,
                                 const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc)
{
    gemm_on(h, p, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return TB_OK;
}

extern "C" int tb_cublas_gemm_strided_batched(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k,
                                              float alpha, const void *A, int lda, long long sA, const void *B, int ldb,
                                              long long sB, float beta, void *C, int ldc, long long sC, int batch)
{
    const size_t eb = (size_t)elem_bytes(p), ec = c_is_fp32(p) ? 4 : eb;
    for (int i = 0; i < batch; i++)
        gemm_on(h, p, ta, tb, m, n, k, alpha, static_cast<const char *>(A) + (size_t)i * sA * eb, lda,
                static_cast<const char *>(B) + (size_t)i * sB * eb, ldb, beta, static_cast<char *>(C) + (size_t)i * sC * ec,
                ldc);
    return TB_OK;
}
