/* cublas_dl.c — cuBLAS through dlopen: the handles and GEMMs of cuda_util.h (tb_cublas_*).
 *
 * cuBLAS is declared here by hand (the few entry points we call, with cublas_api.h's types) and looked up
 * in libcublas.so.<major> from the toolkit the build found, then by soname on the loader's path. Apart from
 * cuda_util.c so that the CPU emulation of the kernels (tests/cuda_emu) takes cuda_util.c as it is and
 * puts its own host GEMMs in place of this file. */
#define _GNU_SOURCE
#include "cuda_util.h"

#include "status.h"

#include <cublas_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TB_CUBLAS_MAJOR
#define TB_CUBLAS_MAJOR 13
#endif
#define TB_STR2(x) #x
#define TB_STR(x) TB_STR2(x)

/* The cuBLAS entry points we use, resolved once. */
static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                            const float *, int, const float *, int, const float *, float *, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*gemm_sb_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                 const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long,
                                 const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
                                 cublasGemmAlgo_t);
    const char *(*status_string)(cublasStatus_t);
    int loaded;
    char why[256];
} cb;
static pthread_once_t cb_once = PTHREAD_ONCE_INIT;

static void cb_load(void)
{
    const char *names[] = {
#ifdef TB_CUBLAS_DIR
        TB_CUBLAS_DIR "/libcublas.so." TB_STR(TB_CUBLAS_MAJOR),
#endif
        "libcublas.so." TB_STR(TB_CUBLAS_MAJOR), "libcublas.so"};
    void *lib = NULL;
    for (size_t k = 0; k < sizeof names / sizeof *names && !lib; k++) lib = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(cb.why, sizeof cb.why, "cannot load cuBLAS (libcublas.so.%d): %s", TB_CUBLAS_MAJOR, dlerror());
        return;
    }
    /* The _v2 symbols are what cublas_v2.h's names map to. */
    *(void **)&cb.create = dlsym(lib, "cublasCreate_v2");
    *(void **)&cb.destroy = dlsym(lib, "cublasDestroy_v2");
    *(void **)&cb.set_stream = dlsym(lib, "cublasSetStream_v2");
    *(void **)&cb.set_math_mode = dlsym(lib, "cublasSetMathMode");
    *(void **)&cb.set_workspace = dlsym(lib, "cublasSetWorkspace_v2");
    *(void **)&cb.sgemm = dlsym(lib, "cublasSgemm_v2");
    *(void **)&cb.gemm_ex = dlsym(lib, "cublasGemmEx");
    *(void **)&cb.gemm_sb_ex = dlsym(lib, "cublasGemmStridedBatchedEx");
    *(void **)&cb.status_string = dlsym(lib, "cublasGetStatusString");
    if (!cb.create || !cb.destroy || !cb.set_stream || !cb.set_math_mode || !cb.set_workspace || !cb.sgemm ||
        !cb.gemm_ex || !cb.gemm_sb_ex || !cb.status_string) {
        snprintf(cb.why, sizeof cb.why, "cuBLAS lacks an entry point trainbench calls");
        return;
    }
    cb.loaded = 1;
}

static int cb_fail(cublasStatus_t s, const char *what)
{
    return tb_error_set(TB_EIO, "cuda: %s failed: %s", what, cb.status_string ? cb.status_string(s) : "cuBLAS error");
}

#define TB_CB(call, what)                                 \
    do {                                                  \
        const cublasStatus_t tb_cb_s_ = (call);           \
        if (tb_cb_s_ != CUBLAS_STATUS_SUCCESS) return cb_fail(tb_cb_s_, what); \
    } while (0)

struct tb_cublas {
    cublasHandle_t h;
    void *workspace;
    size_t ws_bytes;
};

/* Workspace cuBLAS may use per call: given explicitly, so that graph capture never allocates. NVIDIA's
 * cublasSetWorkspace notes recommend 32 MiB on Hopper (sm90 and later) and 4 MiB before it — what PyTorch
 * gives its handles too; a smaller one narrows the heuristics' choice of kernels (split-K among them).
 * TB_CUDA_CUBLAS_WS_MIB=N sets N MiB (1..1024; 4 is what every GPU got until the twentieth session). */
static size_t cublas_workspace_bytes(void)
{
    const char *v = getenv("TB_CUDA_CUBLAS_WS_MIB");
    if (v && *v) {
        char *end = NULL;
        const long mib = strtol(v, &end, 10);
        if (end && !*end && mib >= 1 && mib <= 1024) return (size_t)mib << 20;
    }
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        major = 0;
    }
    return (size_t)(major >= 9 ? 32 : 4) << 20;
}

int tb_cublas_create(tb_cublas **out, cudaStream_t s)
{
    *out = NULL;
    pthread_once(&cb_once, cb_load);
    if (!cb.loaded) return tb_error_set(TB_EUNSUPPORTED, "cuda: %s", cb.why);
    tb_cublas *h = calloc(1, sizeof *h);
    if (!h) return tb_error_set(TB_ENOMEM, "cuda: out of memory");
    *out = h;
    TB_CB(cb.create(&h->h), "cublasCreate");
    TB_CB(cb.set_stream(h->h, s), "cublasSetStream");
    /* fp32 as fp32: no TF32 tensor-core rounding of the inputs (CUBLAS_DEFAULT_MATH since CUDA 11), so the
     * GEMMs match the cpu executor to ~1e-6 relative; NVIDIA_TF32_OVERRIDE=1 in the environment would
     * still force TF32 — leave it unset for comparisons. */
    TB_CB(cb.set_math_mode(h->h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    h->ws_bytes = cublas_workspace_bytes();
    TB_CU(cudaMalloc(&h->workspace, h->ws_bytes));
    tb_cuda_mem_account((double)h->ws_bytes);
    TB_CB(cb.set_workspace(h->h, h->workspace, h->ws_bytes), "cublasSetWorkspace");
    return TB_OK;
}

void tb_cublas_destroy(tb_cublas *h)
{
    if (!h) return;
    if (h->h) cb.destroy(h->h);
    if (h->workspace) {
        cudaFree(h->workspace);
        tb_cuda_mem_account(-(double)h->ws_bytes);
    }
    free(h);
}

int tb_cublas_sgemm(tb_cublas *h, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc)
{
    TB_CB(cb.sgemm(h->h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, lda, B,
                   ldb, &beta, C, ldc),
          "cublasSgemm");
    return TB_OK;
}

/* Element types (A and B; C) and compute type of precision p. */
static void gemm_types(enum tb_gemm_prec p, cudaDataType *t, cudaDataType *tc, cublasComputeType_t *ct)
{
    const int bf = p == TB_GEMM_BF16 || p == TB_GEMM_BF16_F32C, hf = p == TB_GEMM_FP16 || p == TB_GEMM_FP16_F32C;
    *t = bf ? CUDA_R_16BF : hf ? CUDA_R_16F : CUDA_R_32F;
    *tc = p == TB_GEMM_BF16_F32C || p == TB_GEMM_FP16_F32C ? CUDA_R_32F : *t; /* 2-byte products summed into fp32 */
    *ct = p == TB_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

int tb_cublas_gemm_ex(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k, float alpha,
                      const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc)
{
    cudaDataType t, tc;
    cublasComputeType_t ct;
    gemm_types(p, &t, &tc, &ct);
    TB_CB(cb.gemm_ex(h->h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, t,
                     lda, B, t, ldb, &beta, C, tc, ldc, ct, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    return TB_OK;
}

int tb_cublas_gemm_strided_batched(tb_cublas *h, enum tb_gemm_prec p, int ta, int tb, int m, int n, int k,
                                   float alpha, const void *A, int lda, long long sA, const void *B, int ldb,
                                   long long sB, float beta, void *C, int ldc, long long sC, int batch)
{
    cudaDataType t, tc;
    cublasComputeType_t ct;
    gemm_types(p, &t, &tc, &ct);
    TB_CB(cb.gemm_sb_ex(h->h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, t,
                        lda, sA, B, t, ldb, sB, &beta, C, tc, ldc, sC, batch, ct, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
    return TB_OK;
}
