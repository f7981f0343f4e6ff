/* calibrate_cuda.c — the GPU's ceilings for `bench --calibrate` (executor_cuda_calibrate, core/device_info.h).
 *
 * cuBLAS GEMMs at a large square size: fp32 with TF32 off (tb_cublas_sgemm, the executors' own call), TF32
 * and bf16 (cublasGemmEx, fp32 accumulation, bf16 output); then device-to-device copy bandwidth by
 * cudaMemcpyAsync and by a float4 copy kernel, counting each copy's bytes twice (read and write), as
 * STREAM's copy does. Each figure is the best of REPS timed groups, a group being back-to-back calls
 * between two CUDA events lasting about GROUP_S (far above the events' microsecond resolution), after an
 * untimed warm-up group (cuBLAS picks and loads its kernel, the clocks rise): a ceiling is what the GPU
 * can do, not what it usually does. Inputs are hashed values in [-1, 1): zeros would switch fewer bits
 * and flatter the GEMMs. Everything it allocates is freed before it returns, on success or failure.
 */
#include "calibrate_kernels.h"
#include "cuda_util.h"
#include "executor.h"
#include "status.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { REPS = 5, DEFAULT_N = 8192, MIN_N = 1024, MAX_CALLS = 1000 };
#define GROUP_S 0.05                       /* a timed group's length */
#define COPY_BYTES_MAX (1024.0 * 1048576.0) /* far beyond any L2 (H200: 60 MB) */
#define COPY_BYTES_MIN (64.0 * 1048576.0)

struct timing {
    cudaStream_t s;
    cudaEvent_t e0, e1;
};

typedef int (*work_fn)(void *arg);

/* Seconds `calls` calls of fn take on t->s, between two events. */
static int time_calls(struct timing *t, work_fn fn, void *arg, int calls, double *sec)
{
    TB_CU(cudaEventRecord(t->e0, t->s));
    for (int k = 0; k < calls; k++) {
        const int st = fn(arg);
        if (st != TB_OK) return st;
    }
    TB_CU(cudaEventRecord(t->e1, t->s));
    TB_CU(cudaEventSynchronize(t->e1));
    float ms = 0.0f;
    TB_CU(cudaEventElapsedTime(&ms, t->e0, t->e1));
    *sec = (double)ms * 1e-3;
    return TB_OK;
}

/* The best seconds per call of fn: one call to size the groups, an untimed warm-up group, REPS timed ones. */
static int best_per_call(struct timing *t, work_fn fn, void *arg, const char *what, double *best)
{
    double one = 0.0, sec = 0.0;
    int st = time_calls(t, fn, arg, 1, &one);
    if (st != TB_OK) return st;
    int calls = one > 0.0 ? (int)(GROUP_S / one) : MAX_CALLS;
    calls = calls < 1 ? 1 : calls > MAX_CALLS ? MAX_CALLS : calls;
    if ((st = time_calls(t, fn, arg, calls, &sec)) != TB_OK) return st;
    *best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        if ((st = time_calls(t, fn, arg, calls, &sec)) != TB_OK) return st;
        if (sec / calls < *best) *best = sec / calls;
    }
    if (!(*best > 0.0) || !isfinite(*best))
        return tb_error_set(TB_EIO, "cuda: calibration: the events timed no time for %s", what);
    return TB_OK;
}

struct gemm_arg {
    tb_cublas *h;
    enum tb_gemm_prec p;
    int n;
    void *a, *b, *c;
};

/* C = A·B, n × n × n, beta 0. */
static int gemm_call(void *arg)
{
    const struct gemm_arg *g = arg;
    if (g->p == TB_GEMM_FP32) /* the executors' call, math mode as they set it (TF32 off) */
        return tb_cublas_sgemm(g->h, 0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c, g->n);
    return tb_cublas_gemm_ex(g->h, g->p, 0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c, g->n);
}

struct copy_arg {
    void *dst;
    const void *src;
    size_t bytes;
    int kernel;
    cudaStream_t s;
};

static int copy_call(void *arg)
{
    const struct copy_arg *c = arg;
    const cudaError_t e = c->kernel ? (cudaError_t)tb_cuda_cal_copy(c->dst, c->src, c->bytes / 16, c->s)
                                    : cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->s);
    if (e == cudaSuccess) return TB_OK;
    return tb_cuda_fail(e, c->kernel ? "tb_cuda_cal_copy" : "cudaMemcpyAsync(D2D)", __FILE__, __LINE__);
}

/* A launcher's cudaError_t as a tb status naming it. */
static int launched(int e, const char *what)
{
    return e ? tb_cuda_fail((cudaError_t)e, what, __FILE__, __LINE__) : TB_OK;
}

/* The three GEMM ceilings at n (already fitted to free memory), into c. */
static int gemms(struct timing *t, tb_cublas *h, int n, struct device_ceilings *c)
{
    const size_t nn = (size_t)n * n;
    void *a = NULL, *b = NULL, *d = NULL;
    cudaError_t e = cudaMalloc(&a, nn * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&b, nn * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&d, nn * sizeof(float));
    int st = e == cudaSuccess ? TB_OK : tb_cuda_fail(e, "cudaMalloc(calibration matrices)", __FILE__, __LINE__);
    const double flops = 2.0 * (double)n * n * n;
    struct gemm_arg g = {h, TB_GEMM_FP32, n, a, b, d};
    double sec = 0.0;
    if (st == TB_OK) st = launched(tb_cuda_cal_fill_f32(a, nn, 1, t->s), "tb_cuda_cal_fill_f32");
    if (st == TB_OK) st = launched(tb_cuda_cal_fill_f32(b, nn, 2, t->s), "tb_cuda_cal_fill_f32");
    if (st == TB_OK && (st = best_per_call(t, gemm_call, &g, "the fp32 GEMM", &sec)) == TB_OK)
        c->fp32_tflops = flops / sec * 1e-12;
    g.p = TB_GEMM_TF32;
    if (st == TB_OK && (st = best_per_call(t, gemm_call, &g, "the TF32 GEMM", &sec)) == TB_OK)
        c->tf32_tflops = flops / sec * 1e-12;
    /* bf16 operands in the same buffers (half their size). */
    g.p = TB_GEMM_BF16;
    if (st == TB_OK) st = launched(tb_cuda_cal_fill_bf16(a, nn, 1, t->s), "tb_cuda_cal_fill_bf16");
    if (st == TB_OK) st = launched(tb_cuda_cal_fill_bf16(b, nn, 2, t->s), "tb_cuda_cal_fill_bf16");
    if (st == TB_OK && (st = best_per_call(t, gemm_call, &g, "the bf16 GEMM", &sec)) == TB_OK)
        c->bf16_tflops = flops / sec * 1e-12;
    cudaStreamSynchronize(t->s);
    cudaFree(a), cudaFree(b), cudaFree(d);
    return st;
}

/* The copy ceilings over bytes (a multiple of 16), into c. */
static int copies(struct timing *t, size_t bytes, struct device_ceilings *c)
{
    void *src = NULL, *dst = NULL;
    cudaError_t e = cudaMalloc(&src, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&dst, bytes);
    int st = e == cudaSuccess ? TB_OK : tb_cuda_fail(e, "cudaMalloc(calibration copy)", __FILE__, __LINE__);
    struct copy_arg a = {dst, src, bytes, 0, t->s};
    double sec = 0.0;
    if (st == TB_OK) st = launched(tb_cuda_cal_fill_f32(src, bytes / sizeof(float), 3, t->s), "tb_cuda_cal_fill_f32");
    if (st == TB_OK && (st = best_per_call(t, copy_call, &a, "cudaMemcpy", &sec)) == TB_OK)
        c->memcpy_gbs = 2.0 * (double)bytes / sec * 1e-9;
    a.kernel = 1;
    if (st == TB_OK && (st = best_per_call(t, copy_call, &a, "the copy kernel", &sec)) == TB_OK)
        c->copy_kernel_gbs = 2.0 * (double)bytes / sec * 1e-9;
    cudaStreamSynchronize(t->s);
    cudaFree(src), cudaFree(dst);
    c->copy_bytes = (double)bytes;
    return st;
}

int executor_cuda_calibrate(struct device_ceilings *c, int gemm_n)
{
    memset(c, 0, sizeof *c);
    int st = tb_cuda_probe();
    if (st != TB_OK) return st;
    size_t free_b = 0, total_b = 0;
    TB_CU(cudaMemGetInfo(&free_b, &total_b));
    /* Three fp32 matrices within 70 % of what is free (another process may hold the rest). */
    int n = gemm_n > 0 ? gemm_n : DEFAULT_N;
    while (n > MIN_N && 3.0 * 4.0 * (double)n * n > 0.7 * (double)free_b) n /= 2;
    if (3.0 * 4.0 * (double)n * n > 0.7 * (double)free_b)
        return tb_error_set(TB_ENOMEM, "cuda: calibration: %.1f GiB free on the GPU, too little for %d × %d GEMMs",
                            (double)free_b / 1073741824.0, n, n);
    double copy = 0.35 * (double)free_b;
    copy = copy < COPY_BYTES_MAX ? copy : COPY_BYTES_MAX;
    if (copy < COPY_BYTES_MIN)
        return tb_error_set(TB_ENOMEM, "cuda: calibration: %.1f GiB free on the GPU, too little for the copy",
                            (double)free_b / 1073741824.0);
    const size_t copy_bytes = (size_t)(copy / 1048576.0) * 1048576; /* whole MiB: a multiple of 16 */
    c->gemm_n = n, c->reps = REPS;

    struct timing t = {0};
    tb_cublas *h = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&t.s, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreate(&t.e0);
    if (e == cudaSuccess) e = cudaEventCreate(&t.e1);
    st = e == cudaSuccess ? TB_OK : tb_cuda_fail(e, "cudaStreamCreate/cudaEventCreate", __FILE__, __LINE__);
    if (st == TB_OK) st = tb_cublas_create(&h, t.s);
    if (st == TB_OK) st = gemms(&t, h, n, c);
    tb_cublas_destroy(h); /* its workspace back before the copy's buffers */
    if (st == TB_OK) st = copies(&t, copy_bytes, c);
    if (t.e0) cudaEventDestroy(t.e0);
    if (t.e1) cudaEventDestroy(t.e1);
    if (t.s) cudaStreamDestroy(t.s);
    if (st != TB_OK) {
        /* A failure leaves no figure half-measured: the caller records why, never a partial ceiling. */
        const struct device_ceilings none = {0};
        *c = none;
    }
    return st;
}
