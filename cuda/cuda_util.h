/* cuda_util.h — what every file of the cuda device shares: CUDA and cuBLAS errors turned into tb_error_set
 * messages, the device probe, and cuBLAS loaded on demand.
 *
 * Every CUDA runtime call in cuda/ goes through TB_CU (or tb_cuda_status) and every cuBLAS call through
 * the wrappers below, so a failure becomes a one-line message naming the call, never an abort or a
 * silently wrong result. cuBLAS is opened with dlopen the first time a cuda executor needs it: linked,
 * its 600 MB of libraries cost every bench process ~90 ms to load, GPU or not. Thread-safety: the loader
 * runs once (pthread_once); handles are per executor, driven by one thread at a time.
 */
#ifndef TB_CUDA_UTIL_H
#define TB_CUDA_UTIL_H

#include <cuda_runtime_api.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Records "cuda: WHAT failed: <error string> (file:line)" and returns TB_EIO (TB_ENOMEM for an allocation). */
int tb_cuda_fail(cudaError_t err, const char *what, const char *file, int line);

/* Evaluates a CUDA runtime call; on failure returns its status from the enclosing function. */
#define TB_CU(call)                                                                       \
    do {                                                                                  \
        const cudaError_t tb_cu_err_ = (call);                                            \
        if (tb_cu_err_ != cudaSuccess) return tb_cuda_fail(tb_cu_err_, #call, __FILE__, __LINE__); \
    } while (0)

/* The same for a kernel launch just made (cudaGetLastError: bad configuration, no kernel image). */
#define TB_CU_LAUNCHED(what) TB_CU(cudaGetLastError())

/* 1 when the environment variable name is set to value: the TB_CUDA_* switches that pick an earlier kernel,
 * layout or path for an A-B run on one binary. Read at each call (no cache, no shared state). */
int tb_cuda_env_is(const char *name, const char *value);

/* TB_OK when at least one CUDA device is present, else TB_EUNSUPPORTED with
 * "cuda: no CUDA device (cudaGetDeviceCount: <reason>)". Safe to call on a machine without a driver. */
int tb_cuda_probe(void);

/* An opaque cuBLAS handle (cublasHandle_t) bound to one stream, with TF32 off and its own workspace so
 * that calls can be captured into a CUDA graph. */
typedef struct tb_cublas tb_cublas;
/* Loads cuBLAS if needed and creates a handle on stream s; TB_EUNSUPPORTED when the library is missing. */
int tb_cublas_create(tb_cublas **h, cudaStream_t s);
/* Destroys a handle (NULL is fine). */
void tb_cublas_destroy(tb_cublas *h);
/* Element and compute types of tb_cublas_gemm_ex. */
enum tb_gemm_prec {
    TB_GEMM_FP32, /* fp32 A, B, C; fp32 arithmetic, TF32 off (what tb_cublas_sgemm runs) */
    TB_GEMM_TF32, /* fp32 A, B, C; inputs rounded to TF32 on the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) */
    TB_GEMM_BF16, /* bf16 A, B, C; fp32 accumulation (CUBLAS_COMPUTE_32F) */
    TB_GEMM_BF16_F32C, /* bf16 A, B; fp32 C (mixed precision's weight gradients and logits); fp32 accumulation */
    TB_GEMM_FP16, /* fp16 A, B, C; fp32 accumulation (CUBLAS_COMPUTE_32F) */
    TB_GEMM_FP16_F32C, /* fp16 A, B; fp32 C (fp16 mixed precision's weight gradients and logits); fp32 accumulation */
};
/* Column-major C (m,n) = alpha·op(A)·op(B) + beta·C through cublasGemmEx in precision p (alpha, beta in fp32);
 * ta/tb: 0 = N, 1 = T. */
int tb_cublas_gemm_ex(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k, float alpha,
                      const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc);

/* batch GEMMs of tb_cublas_gemm_ex's form through cublasGemmStridedBatchedEx: product i reads A + i·sA, B + i·sB
 * and writes C + i·sC (strides in elements). */
int tb_cublas_gemm_strided_batched(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k,
                                   float alpha, const void *A, int lda, long long sA, const void *B, int ldb,
                                   long long sB, float beta, void *C, int ldc, long long sC, int batch);

/* Adds bytes (negative: freed) to this process's count of device memory the cuda device allocated, and
 * raises its high-water mark (thread-safe). */
void tb_cuda_mem_account(double bytes);
/* The count now and its high-water mark; reset restarts the mark at the count (after reading it). */
void tb_cuda_mem_counts(double *now, double *peak, int reset);
/* Column-major C (m,n) = alpha·op(A)·op(B) + beta·C, fp32 (cublasSgemm); ta/tb: 0 = N, 1 = T. */
int tb_cublas_sgemm(tb_cublas *h, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);

#ifdef __cplusplus
}
#endif

#endif
