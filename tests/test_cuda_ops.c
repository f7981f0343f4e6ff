/* test_cuda_ops.c — the CUDA EfficientNet kernels (cuda/ops_*.cu) against the CPU kernels and their
 * references on small random shapes: every launcher's forward and backward, fp32 within 1e-4 relative
 * (normwise floor 1e-5 for elements near zero); dropout and drop-connect masks equal to the CPU's element for
 * element. Every _bf16 and _fp16 launcher (mixed precision, ops_effnet.h and ops_dense.h) against the same fp32
 * CPU kernel run on the inputs rounded to the type, one test body for both (struct half): bf16 within 1e-2
 * relative, with a normwise floor of 4e-3 of the largest element (one bf16 ulp: a bias or an earlier term
 * rounded to bf16 before the sum carries its own rounding, which near a cancellation is large beside the
 * result); fp16 the same at its own ulp (FP16_TOL, FP16_ATOL).
 *
 * Built in every configuration (tests/test_*.c are globbed); without TB_HAVE_CUDA, or on a machine with
 * no CUDA device, each test is skipped with the reason, never passed.
 */
#include "test_util.h"

#include <criterion/criterion.h>

#define GPU_TESTS(X) X(activations) X(dropout_masks) X(pool_and_se) X(batchnorm) X(groupnorm) \
    X(depthwise) X(depthwise_bn_input) X(grouped) X(conv1x1) X(stem_im2col) X(activations_bf16) \
    X(dropout_masks_bf16) X(pool_and_se_bf16) X(batchnorm_bf16) X(groupnorm_bf16) X(depthwise_bf16) \
    X(depthwise_bn_input_bf16) X(grouped_bf16) X(conv1x1_bf16) X(stem_im2col_bf16) X(input_bf16) \
    X(dense_chain_bf16) X(stem_direct) X(stem_direct_bf16) X(depthwise_blocked_vs_old) \
    X(depthwise_blocked_host) X(stem_direct_host) X(batchnorm_stats_host) X(activations_fp16) \
    X(dropout_masks_fp16) X(pool_and_se_fp16) X(batchnorm_fp16) X(groupnorm_fp16) X(depthwise_fp16) \
    X(depthwise_bn_input_fp16) X(grouped_fp16) X(conv1x1_fp16) X(stem_im2col_fp16) X(input_fp16) \
    X(dense_chain_fp16) X(stem_direct_fp16) X(fp16_round_host)

#ifndef TB_HAVE_CUDA

#define SKIP_TEST(name) \
    Test(cuda_ops, name) { cr_skip_test("built without CUDA (TB_HAVE_CUDA unset): no kernels to compare"); }
GPU_TESTS(SKIP_TEST)

#else

#include "cuda_util.h"
#include "op_act.h"
#include "op_conv.h"
#include "op_dropout.h"
#include "op_dwconv.h"
#include "op_loss.h"
#include "op_norm.h"
#include "op_pool.h"
#include "op_se.h"
#include "ops_dense.h"
#include "ops_effnet.h"
#include "stage_precision.h"

#include <cuda_runtime_api.h>

#define RTOL 1e-4
#define ATOL 1e-5
#define BF16_TOL 1e-2
#define BF16_ATOL 4e-3
/* fp16 keeps 11 significant bits: 2^-11 ≈ 4.9e-4 relative per rounding, an ulp 2^-10 ≈ 9.8e-4 of the value
 * (a quarter of bf16's). The bounds are bf16's reasoning at fp16's ulp: 3e-3 relative, about three ulps (bf16's
 * 1e-2 is about 2.5 of its 3.9e-3), and a floor of 1e-3 of the tensor's largest |value|, one ulp there (a bias
 * or earlier term rounded before the sum keeps its rounding, large beside a result near a cancellation). */
#define FP16_TOL 3e-3
#define FP16_ATOL 1e-3

/* Skips the test unless a CUDA device answers. */
static void need_gpu(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        cr_skip_test("no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
}

#define CU(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        cr_assert_eq(e_, cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                                   \
    } while (0)
/* A launcher's status: 0, else the test fails naming it (and the CUDA error, if it is one). */
#define OK(call)                                                                                                   \
    do {                                                                                                           \
        int st_ = (call);                                                                                          \
        cr_assert_eq(st_, 0, "%s returned %d (%s)", #call, st_,                                                    \
                     st_ > 0 ? cudaGetErrorString((cudaError_t)st_) : "tb status");                                \
    } while (0)

/* Device buffers of the running test, freed by dev_free_all. */
static void *live[128];
static int n_live;

static void *dev_alloc(size_t bytes)
{
    void *d = NULL;
    CU(cudaMalloc(&d, bytes ? bytes : 1));
    CU(cudaMemset(d, 0, bytes ? bytes : 1));
    cr_assert_lt(n_live, 128);
    live[n_live++] = d;
    return d;
}

/* A device copy of n host floats. */
static float *dev_dup(const float *h, size_t n)
{
    float *d = dev_alloc(n * sizeof *d);
    CU(cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice));
    return d;
}

/* h (n) ← the device's d (n), after the work queued on the legacy stream. */
static void dev_get(float *h, const float *d, size_t n)
{
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
}

static void dev_free_all(void)
{
    for (int i = 0; i < n_live; i++) CU(cudaFree(live[i]));
    n_live = 0;
}

/* Asserts the device's d (n) is close to the host's want (n). */
static void check(const float *d, const float *want, size_t n, double rtol, const char *what)
{
    float *got = tu_fvec(n);
    dev_get(got, d, n);
    tu_assert_close_f(got, want, n, rtol, ATOL, what);
    free(got);
}

/* A random host vector in [lo, hi). */
static float *rnd(size_t n, uint64_t seed, float lo, float hi)
{
    float *p = tu_fvec(n);
    tu_fill_uniform(p, n, seed, lo, hi);
    return p;
}

Test(cuda_ops, activations)
{
    need_gpu();
    const size_t n = 10007;
    float *x = rnd(n, 1, -8.0f, 8.0f), *g = rnd(n, 2, -1.0f, 1.0f), *acc0 = rnd(n, 3, -1.0f, 1.0f);
    float *want = tu_fvec(n), *dwant = tu_fdup(acc0, n);
    float *dx = dev_dup(x, n), *dg = dev_dup(g, n), *dy = dev_alloc(n * 4), *dd = dev_dup(acc0, n);

    silu_forward(want, x, n, 0, 1);
    OK(tb_cuda_silu_forward(dy, dx, n, NULL));
    check(dy, want, n, RTOL, "silu");
    silu_backward(dwant, g, x, n, 0, 1);
    OK(tb_cuda_silu_backward(dd, dg, dx, n, NULL));
    check(dd, dwant, n, RTOL, "silu backward");

    sigmoid_forward(want, x, n, 0, 1);
    OK(tb_cuda_sigmoid_forward(dy, dx, n, NULL));
    check(dy, want, n, RTOL, "sigmoid");
    memcpy(dwant, acc0, n * sizeof *dwant);
    CU(cudaMemcpy(dd, acc0, n * 4, cudaMemcpyHostToDevice));
    sigmoid_backward(dwant, g, want, n, 0, 1);
    OK(tb_cuda_sigmoid_backward(dd, dg, dy, n, NULL));
    check(dd, dwant, n, RTOL, "sigmoid backward");

    for (size_t i = 0; i < n; i++) want[i] = x[i] + g[i];
    OK(tb_cuda_add_forward(dy, dx, dg, n, NULL));
    check(dy, want, n, 0.0, "add");
    for (size_t i = 0; i < n; i++) dwant[i] = acc0[i] + g[i];
    CU(cudaMemcpy(dd, acc0, n * 4, cudaMemcpyHostToDevice));
    OK(tb_cuda_add_backward(dd, NULL, dg, n, NULL));
    check(dd, dwant, n, 0.0, "add backward");

    dev_free_all();
    free(x), free(g), free(acc0), free(want), free(dwant);
}

/* Asserts got and want are zero at the same elements (the same mask) and close elsewhere. */
static void check_mask(const float *d, const float *want, size_t n, const char *what)
{
    float *got = tu_fvec(n);
    dev_get(got, d, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i] == 0.0f, want[i] == 0.0f, "%s[%zu]: got %g want %g (mask differs)", what, i,
                     (double)got[i], (double)want[i]);
    tu_assert_close_f(got, want, n, 1e-6, 1e-7, what);
    free(got);
}

Test(cuda_ops, dropout_masks)
{
    need_gpu();
    const int N = 7;
    const size_t D = 1003, n = (size_t)N * D, n_max = (size_t)N * 1008;
    const uint64_t g0 = 37;
    struct dropout_args a = {.seed = 1234, .step = 9, .layer = 17, .p = 0.3f};
    struct tb_cuda_drop b = {.seed = a.seed, .step = a.step, .layer = a.layer, .p = a.p};
    float *x = rnd(n_max, 4, 0.5f, 1.5f), *s = rnd(n_max, 5, 0.5f, 1.5f), *want = tu_fvec(n_max);
    float *dx = dev_dup(x, n_max), *ds = dev_dup(s, n_max), *dy = dev_alloc(n_max * 4);

    dropout_forward(want, x, N, D, g0, &a, 0, 1);
    OK(tb_cuda_dropout_forward(dy, dx, N, D, g0, &b, NULL));
    check_mask(dy, want, n, "dropout");
    memset(want, 0, n * sizeof *want);
    dropout_backward(want, x, N, D, g0, &a, 0, 1);
    CU(cudaMemset(dy, 0, n * 4));
    OK(tb_cuda_dropout_backward(dy, dx, N, D, g0, &b, NULL));
    check_mask(dy, want, n, "dropout backward");

    a.p = b.p = 0.5f; /* with N = 7 samples some branches are dropped and some kept */
    /* D 1003: an element a thread; 1004: 4; 1008: 4 (8 in bf16) */
    for (size_t Dd = 1003; Dd <= 1008; Dd += Dd == 1003 ? 1 : 4) {
        const size_t nd = (size_t)N * Dd;
        dropconnect_forward(want, x, N, Dd, g0, &a, 0, 1);
        OK(tb_cuda_dropconnect_add_forward(dy, NULL, dx, N, Dd, g0, &b, NULL));
        check_mask(dy, want, nd, "drop-connect");
        memset(want, 0, nd * sizeof *want);
        dropconnect_backward(want, x, N, Dd, g0, &a, 0, 1);
        CU(cudaMemset(dy, 0, nd * 4));
        OK(tb_cuda_dropconnect_backward(dy, dx, N, Dd, g0, &b, 1, NULL));
        check_mask(dy, want, nd, "drop-connect backward");
        OK(tb_cuda_dropconnect_backward(dy, dx, N, Dd, g0, &b, 0, NULL)); /* acc 0 overwrites what is there */
        check_mask(dy, want, nd, "drop-connect backward, overwriting");
        dropconnect_add_forward(want, s, x, N, Dd, g0, &a, 0, 1);
        OK(tb_cuda_dropconnect_add_forward(dy, ds, dx, N, Dd, g0, &b, NULL));
        check(dy, want, nd, 1e-6, "drop-connect add");
    }

    a.p = b.p = 0.0f; /* the identity */
    OK(tb_cuda_dropout_forward(dy, dx, N, D, g0, &b, NULL));
    check(dy, x, n, 0.0, "dropout p = 0");

    dev_free_all();
    free(x), free(s), free(want);
}

Test(cuda_ops, pool_and_se)
{
    need_gpu();
    /* C 45: an element a thread in the elementwise passes; 52: 4 a thread; 48: 4 (fp32) or 8 (bf16) a thread */
    for (int C = 45; C <= 52; C += C == 45 ? 3 : 4) {
        const int N = 3;
        const size_t HW = 7 * 9, n = (size_t)N * HW * C, nc = (size_t)N * C;
        float *x = rnd(n, 6, -2.0f, 2.0f), *g = rnd(n, 7, -1.0f, 1.0f), *sc = rnd(nc, 8, 0.0f, 1.0f);
        float *gp = rnd(nc, 9, -1.0f, 1.0f), *acc0 = rnd(n, 10, -1.0f, 1.0f), *accs = rnd(nc, 11, -1.0f, 1.0f);
        float *want = tu_fvec(n), *wants = tu_fdup(accs, nc);
        float *dx = dev_dup(x, n), *dg = dev_dup(g, n), *dsc = dev_dup(sc, nc), *dgp = dev_dup(gp, nc);
        float *dy = dev_alloc(n * 4), *dp = dev_alloc(nc * 4), *dds = dev_dup(accs, nc);

        global_avgpool_forward(want, x, N, HW, C, 0, 1);
        OK(tb_cuda_gap_forward(dp, dx, N, HW, C, NULL));
        check(dp, want, nc, RTOL, "global average pool");
        memcpy(want, acc0, n * sizeof *want);
        CU(cudaMemcpy(dy, acc0, n * 4, cudaMemcpyHostToDevice));
        global_avgpool_backward(want, gp, N, HW, C, 0, 1);
        OK(tb_cuda_gap_backward(dy, dgp, N, HW, C, NULL));
        check(dy, want, n, RTOL, "global average pool backward");

        se_scale_forward(want, x, sc, N, HW, C, 0, 1);
        OK(tb_cuda_se_scale_forward(dy, dx, dsc, N, HW, C, NULL));
        check(dy, want, n, RTOL, "SE scale");
        memcpy(want, acc0, n * sizeof *want);
        CU(cudaMemcpy(dy, acc0, n * 4, cudaMemcpyHostToDevice));
        se_scale_backward(want, wants, g, x, sc, N, HW, C, 1, 0, 1);
        OK(tb_cuda_se_scale_backward(dy, dds, dg, dx, dsc, N, HW, C, 1, NULL));
        check(dy, want, n, RTOL, "SE scale backward dinp");
        check(dds, wants, nc, RTOL, "SE scale backward dscale");
        /* acc 0 overwrites dinp (the executor's shortcut); dscale accumulates either way */
        memset(want, 0, n * sizeof *want);
        se_scale_backward(want, wants, g, x, sc, N, HW, C, 0, 0, 1);
        OK(tb_cuda_se_scale_backward(dy, dds, dg, dx, dsc, N, HW, C, 0, NULL));
        check(dy, want, n, RTOL, "SE scale backward dinp, overwriting");
        check(dds, wants, nc, RTOL, "SE scale backward dscale, accumulated again");

        dev_free_all();
        free(x), free(g), free(sc), free(gp), free(acc0), free(accs), free(want), free(wants);
    }
}

Test(cuda_ops, batchnorm)
{
    need_gpu();
    /* C 37: a channel a thread in the elementwise passes; 44: 4 a thread; 40: 4 (fp32) or 8 (bf16) a thread */
    for (int C = 37; C <= 44; C += C == 37 ? 3 : 4) {
        const size_t M = 3 * 23 * 17, n = M * C; /* 3 row chunks of the GPU's 512, 10 of the CPU's */
        float *x = rnd(n, 13, -1.0f, 3.0f), *g = rnd(n, 14, -1.0f, 1.0f), *gam = rnd((size_t)C, 15, 0.5f, 1.5f);
        float *bet = rnd((size_t)C, 16, -0.5f, 0.5f), *rm0 = rnd((size_t)C, 17, -0.1f, 0.1f);
        float *rv0 = rnd((size_t)C, 18, 0.9f, 1.1f), *acc0 = rnd(n, 19, -1.0f, 1.0f);
        float *dx = dev_dup(x, n), *dg = dev_dup(g, n), *dgam = dev_dup(gam, (size_t)C);
        float *dbet = dev_dup(bet, (size_t)C);
        float *dy = dev_alloc(n * 4), *dsave = dev_alloc(2 * (size_t)C * 4);
        void *scr = dev_alloc(tb_cuda_bn_scratch_bytes(M, C));
        for (int act = 0; act <= 1; act++) {
            float *want = tu_fvec(n), *save = tu_fvec(2 * (size_t)C), *rm = tu_fdup(rm0, (size_t)C);
            float *rv = tu_fdup(rv0, (size_t)C), *drm = dev_dup(rm0, (size_t)C), *drv = dev_dup(rv0, (size_t)C);
            bn_forward_train(want, save, rm, rv, x, gam, bet, M, C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT, act, 0, 1);
            OK(tb_cuda_bn_forward_train(dy, dsave, drm, drv, dx, dgam, dbet, M, C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT,
                                        act, scr, NULL));
            check(dy, want, n, RTOL, "BN train forward");
            check(dsave, save, 2 * (size_t)C, RTOL, "BN save");
            check(drm, rm, (size_t)C, RTOL, "BN running mean");
            check(drv, rv, (size_t)C, RTOL, "BN running var");

            bn_forward_eval(want, x, rm, rv, gam, bet, M, C, BN_EPS_DEFAULT, act, 0, 1);
            OK(tb_cuda_bn_forward_eval(dy, dx, drm, drv, dgam, dbet, M, C, BN_EPS_DEFAULT, act, NULL));
            check(dy, want, n, RTOL, "BN eval forward");

            /* backward from the CPU's save, accumulating onto nonzero gradients */
            float *dwant = tu_fdup(acc0, n), *dgw = tu_fdup(gam, (size_t)C), *dbw = tu_fdup(bet, (size_t)C);
            float *gcopy = tu_fdup(g, n); /* the CPU overwrites dout with dz under SiLU */
            float *ddx = dev_dup(acc0, n), *ddg = dev_dup(gam, (size_t)C), *ddb = dev_dup(bet, (size_t)C);
            float *dsv = dev_dup(save, 2 * (size_t)C);
            bn_backward(dwant, dgw, dbw, gcopy, x, save, gam, bet, M, C, act, 1, 0, 1);
            OK(tb_cuda_bn_backward(ddx, ddg, ddb, dg, dx, dsv, dgam, dbet, M, C, act, 1, scr, NULL));
            check(ddx, dwant, n, RTOL, "BN backward dinp");
            check(ddg, dgw, (size_t)C, RTOL, "BN backward dgamma");
            check(ddb, dbw, (size_t)C, RTOL, "BN backward dbeta");
            /* acc 0 overwrites dinp (the executor's shortcut at a gradient's last reader) */
            memcpy(gcopy, g, n * sizeof *gcopy), memset(dwant, 0, n * sizeof *dwant);
            bn_backward(dwant, dgw, dbw, gcopy, x, save, gam, bet, M, C, act, 1, 0, 1);
            OK(tb_cuda_bn_backward(ddx, ddg, ddb, dg, dx, dsv, dgam, dbet, M, C, act, 0, scr, NULL));
            check(ddx, dwant, n, RTOL, "BN backward dinp, overwriting");
            free(want), free(save), free(rm), free(rv), free(dwant), free(dgw), free(dbw), free(gcopy);
        }
        dev_free_all();
        free(x), free(g), free(gam), free(bet), free(rm0), free(rv0), free(acc0);
    }
}

/* The wide BatchNorm statistics' thread bodies on the host (no GPU): each channel's Σx and Σx² over the chunks
 * against a direct double sum, for one block of channel groups (C 40), several (C 200) and one group (C 4);
 * C % 4 != 0 is not theirs. */
Test(cuda_ops, batchnorm_stats_host)
{
    static const int Cs[] = {40, 200, 4};
    const size_t M = 3 * 23 * 17; /* 3 row chunks */
    for (size_t i = 0; i < sizeof Cs / sizeof Cs[0]; i++) {
        const int C = Cs[i];
        float *x = rnd(M * (size_t)C, 1800 + i, -1.0f, 3.0f);
        const size_t K = (M + 511) / 512;
        double *part = calloc(K * 2 * (size_t)C, sizeof *part);
        cr_assert_not_null(part);
        cr_assert_eq(tb_cuda_bn_stats_host(part, x, M, C), 0);
        for (int c = 0; c < C; c++) {
            double s = 0.0, q = 0.0, ws = 0.0, wq = 0.0;
            for (size_t k = 0; k < K; k++) s += part[k * 2 * C + c], q += part[k * 2 * C + C + c];
            for (size_t r = 0; r < M; r++) {
                const double v = x[r * C + c];
                ws += v, wq += v * v;
            }
            cr_assert(fabs(s - ws) <= 1e-12 * fabs(wq) && fabs(q - wq) <= 1e-12 * fabs(wq),
                      "C %d channel %d: Σx %.17g vs %.17g, Σx² %.17g vs %.17g", C, c, s, ws, q, wq);
        }
        free(x), free(part);
    }
    double one = 0.0;
    float zero = 0.0f;
    cr_assert_neq(tb_cuda_bn_stats_host(&one, &zero, 1, 37), 0);
}

Test(cuda_ops, groupnorm)
{
    need_gpu();
    const int N = 3, C = 32, G = 4;
    const size_t HW = 20 * 19, n = (size_t)N * HW * C; /* dγ, dβ over 3 row chunks */
    float *x = rnd(n, 20, -1.0f, 3.0f), *g = rnd(n, 21, -1.0f, 1.0f), *gam = rnd((size_t)C, 22, 0.5f, 1.5f);
    float *bet = rnd((size_t)C, 23, -0.5f, 0.5f), *acc0 = rnd(n, 24, -1.0f, 1.0f);
    float *dx = dev_dup(x, n), *dg = dev_dup(g, n), *dgam = dev_dup(gam, (size_t)C), *dbet = dev_dup(bet, (size_t)C);
    float *dy = dev_alloc(n * 4), *dsave = dev_alloc((size_t)N * G * 2 * 4);
    void *scr = dev_alloc(tb_cuda_gn_scratch_bytes(N, HW, C));
    for (int act = 0; act <= 1; act++) {
        float *want = tu_fvec(n), *save = tu_fvec((size_t)N * G * 2);
        gn_forward(want, save, x, gam, bet, N, HW, C, G, GN_EPS_DEFAULT, act, 0, 1);
        OK(tb_cuda_gn_forward(dy, dsave, dx, dgam, dbet, N, HW, C, G, GN_EPS_DEFAULT, act, NULL));
        check(dy, want, n, RTOL, "GN forward");
        check(dsave, save, (size_t)N * G * 2, RTOL, "GN save");

        float *dwant = tu_fdup(acc0, n), *dgw = tu_fdup(gam, (size_t)C), *dbw = tu_fdup(bet, (size_t)C);
        float *ddx = dev_dup(acc0, n), *ddg = dev_dup(gam, (size_t)C), *ddb = dev_dup(bet, (size_t)C);
        float *dsv = dev_dup(save, (size_t)N * G * 2);
        gn_backward_data(dwant, g, x, save, gam, bet, N, HW, C, G, act, 1, 0, 1);
        gn_backward_params(dgw, dbw, g, x, save, gam, bet, N, HW, C, G, act, 0, 1);
        OK(tb_cuda_gn_backward(ddx, ddg, ddb, dg, dx, dsv, dgam, dbet, N, HW, C, G, act, 1, scr, NULL));
        check(ddx, dwant, n, RTOL, "GN backward dinp");
        check(ddg, dgw, (size_t)C, RTOL, "GN backward dgamma");
        check(ddb, dbw, (size_t)C, RTOL, "GN backward dbeta");
        free(want), free(save), free(dwant), free(dgw), free(dbw);
    }
    dev_free_all();
    free(x), free(g), free(gam), free(bet), free(acc0);
}

/* Sizes of a convolution's tensors. */
static size_t in_n(const struct conv_shape *s) { return (size_t)s->N * s->H * s->W * s->C; }
static size_t out_n(const struct conv_shape *s) { return (size_t)s->N * s->OH * s->OW * s->OC; }
static size_t w_n(const struct conv_shape *s) { return (size_t)s->KH * s->KW * (s->C / s->groups) * s->OC; }

/* The three launchers of one convolution kind, uniform for check_conv. */
struct conv_impl {
    const char *name;
    int (*fwd)(tb_cublas *h, float *out, const float *inp, const float *w, const float *b,
               const struct conv_shape *s, void *scratch);
    int (*bwd_data)(tb_cublas *h, float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                    void *scratch);
    int (*bwd_params)(tb_cublas *h, float *dw, float *db, const float *inp, const float *dout,
                      const struct conv_shape *s, void *scratch);
    size_t (*scratch_bytes)(const struct conv_shape *s);
};

/* Forward (with bias), backward-data and backward-params (accumulating) against the CPU's references. */
static void check_conv(const struct conv_impl *im, const struct conv_shape *s, tb_cublas *h, uint64_t seed)
{
    size_t ni = in_n(s), no = out_n(s), nw = w_n(s), nb = (size_t)s->OC;
    float *x = rnd(ni, seed, -1.0f, 1.0f), *w = rnd(nw, seed + 1, -0.5f, 0.5f), *b = rnd(nb, seed + 2, -1, 1);
    float *g = rnd(no, seed + 3, -1.0f, 1.0f), *acci = rnd(ni, seed + 4, -1.0f, 1.0f);
    float *accw = rnd(nw, seed + 5, -1.0f, 1.0f), *accb = rnd(nb, seed + 6, -1.0f, 1.0f);
    float *dx = dev_dup(x, ni), *dw = dev_dup(w, nw), *db = dev_dup(b, nb), *dg = dev_dup(g, no);
    float *dy = dev_alloc(no * 4), *ddi = dev_dup(acci, ni), *ddw = dev_dup(accw, nw), *ddb = dev_dup(accb, nb);
    void *scr = dev_alloc(im->scratch_bytes(s));
    char what[160];

    float *want = tu_fvec(no);
    conv_forward_ref(want, x, w, b, s);
    OK(im->fwd(h, dy, dx, dw, db, s, scr));
    snprintf(what, sizeof what, "%s forward %dx%dx%dx%d k%d s%d g%d", im->name, s->N, s->H, s->W, s->C, s->KH,
             s->stride, s->groups);
    check(dy, want, no, RTOL, what);
    free(want);

    float *wi = tu_fdup(acci, ni), *ww = tu_fdup(accw, nw), *wb = tu_fdup(accb, nb);
    conv_backward_data_ref(wi, g, w, s);
    conv_backward_params_ref(ww, wb, x, g, s);
    OK(im->bwd_data(h, ddi, dg, dw, s, scr));
    OK(im->bwd_params(h, ddw, ddb, dx, dg, s, scr));
    snprintf(what, sizeof what, "%s backward", im->name);
    check(ddi, wi, ni, RTOL, what);
    check(ddw, ww, nw, RTOL, what);
    check(ddb, wb, nb, RTOL, what);
    free(wi), free(ww), free(wb);

    dev_free_all();
    free(x), free(w), free(b), free(g), free(acci), free(accw), free(accb);
}

static int dw_fwd(tb_cublas *h, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, void *scratch)
{
    (void)h, (void)scratch;
    return tb_cuda_dwconv_forward(out, inp, w, b, NULL, 0, s, NULL);
}
static int dw_bwd_data(tb_cublas *h, float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                       void *scratch)
{
    (void)h, (void)scratch;
    return tb_cuda_dwconv_backward_data(dinp, dout, w, s, 1, NULL);
}
static int dw_bwd_params(tb_cublas *h, float *dw, float *db, const float *inp, const float *dout,
                         const struct conv_shape *s, void *scratch)
{
    (void)h;
    return tb_cuda_dwconv_backward_params(dw, db, inp, dout, NULL, s, scratch, NULL);
}
static int gc_fwd(tb_cublas *h, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, void *scratch)
{
    (void)h, (void)scratch;
    return tb_cuda_gconv_forward(out, inp, w, b, s, NULL);
}
static int gc_bwd_data(tb_cublas *h, float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                       void *scratch)
{
    (void)h, (void)scratch;
    return tb_cuda_gconv_backward_data(dinp, dout, w, s, 1, NULL);
}
static int gc_bwd_params(tb_cublas *h, float *dw, float *db, const float *inp, const float *dout,
                         const struct conv_shape *s, void *scratch)
{
    (void)h;
    return tb_cuda_gconv_backward_params(dw, db, inp, dout, s, scratch, NULL);
}
static int c1_fwd(tb_cublas *h, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, void *scratch)
{
    (void)scratch;
    return tb_cuda_conv1x1_forward(h, out, inp, w, b, s, NULL);
}
static int c1_bwd_data(tb_cublas *h, float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                       void *scratch)
{
    (void)scratch;
    return tb_cuda_conv1x1_backward_data(h, dinp, dout, w, s, 1);
}
static int c1_bwd_params(tb_cublas *h, float *dw, float *db, const float *inp, const float *dout,
                         const struct conv_shape *s, void *scratch)
{
    return tb_cuda_conv1x1_backward_params(h, dw, db, inp, dout, s, scratch, NULL);
}
static int ic_fwd(tb_cublas *h, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, void *scratch)
{
    return tb_cuda_conv_im2col_forward(h, out, inp, w, b, s, scratch, NULL);
}
static int ic_bwd_data(tb_cublas *h, float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                       void *scratch)
{
    return tb_cuda_conv_im2col_backward_data(h, dinp, dout, w, s, 1, scratch, NULL);
}
static int ic_bwd_params(tb_cublas *h, float *dw, float *db, const float *inp, const float *dout,
                         const struct conv_shape *s, void *scratch)
{
    return tb_cuda_conv_im2col_backward_params(h, dw, db, inp, dout, s, scratch, NULL);
}

/* The direct stem kernels as the executor pairs them: forward and weight gradient direct, backward-data by
 * im2col (the stem's input needs none; a conv whose input does takes that path); scratch for both. */
static int dc_fwd(tb_cublas *h, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, void *scratch)
{
    (void)h, (void)scratch;
    return tb_cuda_conv_direct_forward(out, inp, w, b, s, NULL);
}
static int dc_bwd_params(tb_cublas *h, float *dw, float *db, const float *inp, const float *dout,
                         const struct conv_shape *s, void *scratch)
{
    (void)h;
    return tb_cuda_conv_direct_backward_params(dw, db, inp, dout, s, scratch, NULL);
}
static size_t dc_scratch(const struct conv_shape *s)
{
    size_t a = tb_cuda_conv_im2col_scratch_bytes(s), b = tb_cuda_conv_direct_scratch_bytes(s);
    return a > b ? a : b;
}

static const struct conv_impl DW = {"depthwise", dw_fwd, dw_bwd_data, dw_bwd_params, tb_cuda_dwconv_scratch_bytes};
static const struct conv_impl GC = {"grouped", gc_fwd, gc_bwd_data, gc_bwd_params, tb_cuda_dwconv_scratch_bytes};
static const struct conv_impl C1 = {"conv1x1", c1_fwd, c1_bwd_data, c1_bwd_params, tb_cuda_conv1x1_scratch_bytes};
static const struct conv_impl IC = {"im2col", ic_fwd, ic_bwd_data, ic_bwd_params, tb_cuda_conv_im2col_scratch_bytes};
static const struct conv_impl DC = {"direct", dc_fwd, ic_bwd_data, dc_bwd_params, dc_scratch};

/* The direct kernels' shapes: EfficientNet's stem small (C 3, stride 2), one with 3 weight-gradient
 * chunks (1080 pixels) and OC past a warp, a grey-image stem (C 1, stride 1). N, H, W, C, OC, stride. */
static const int dc_cases[][6] = {{2, 17, 15, 3, 32, 2}, {3, 40, 36, 3, 48, 2}, {1, 9, 8, 1, 16, 1}};
#define N_DC (sizeof dc_cases / sizeof dc_cases[0])

/* Case i of dc_cases as a 3×3 conv shape the direct kernels take. */
static struct conv_shape dc_shape(size_t i)
{
    const int *c = dc_cases[i];
    struct conv_shape s;
    cr_assert_eq(conv_shape_init(&s, c[0], c[1], c[2], c[3], c[4], 3, 3, c[5], 1), 0);
    cr_assert(tb_cuda_conv_direct_fits(&s));
    return s;
}

/* A depthwise shape with an explicit pad (dwconv_shape_init picks (K-1)/2). */
static struct conv_shape dw_shape_pad(int N, int H, int W, int C, int K, int stride, int pad)
{
    struct conv_shape s = {.N = N, .H = H, .W = W, .C = C, .OC = C, .KH = K, .KW = K, .stride = stride, .pad = pad,
                           .groups = C};
    cr_assert_eq(conv_shape_fill(&s), 0);
    return s;
}

Test(cuda_ops, depthwise)
{
    need_gpu();
    /* N, H, W, C, K, stride: the specialised 3/5 × 1/2 kernels (odd widths, partial column tiles) and
     * the any-shape kernel (K 7, stride 3); the last has 5 row chunks in its weight gradient */
    static const int cases[][6] = {{2, 9, 11, 19, 3, 1}, {2, 9, 11, 19, 3, 2}, {2, 13, 7, 37, 5, 1},
                                   {1, 13, 7, 37, 5, 2}, {3, 8, 8, 96, 3, 2},  {1, 1, 1, 8, 3, 1},
                                   {2, 7, 9, 21, 7, 1},  {1, 9, 8, 20, 3, 3},  {4, 24, 24, 40, 3, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct conv_shape s;
        cr_assert_eq(dwconv_shape_init(&s, c[0], c[1], c[2], c[3], c[4], c[5]), 0);
        check_conv(&DW, &s, NULL, 100 + 10 * i);
    }
}

/* The forward with a BatchNorm+SiLU applied on load and a SiLU epilogue, and the weight gradient from
 * the same on-load input, against BN apply → reference conv → SiLU on the CPU. */
Test(cuda_ops, depthwise_bn_input)
{
    need_gpu();
    struct conv_shape s;
    cr_assert_eq(dwconv_shape_init(&s, 2, 10, 9, 24, 3, 2), 0);
    size_t ni = in_n(&s), no = out_n(&s), nw = w_n(&s), C = (size_t)s.C, M = ni / C;
    float *x = rnd(ni, 200, -1, 3), *w = rnd(nw, 201, -0.5f, 0.5f), *b = rnd(C, 202, -1, 1);
    float *gam = rnd(C, 203, 0.5f, 1.5f), *bet = rnd(C, 204, -0.5f, 0.5f), *save = tu_fvec(2 * C);
    float *y = tu_fvec(ni), *want = tu_fvec(no), *g = rnd(no, 205, -1, 1);
    bn_forward_train(y, save, NULL, NULL, x, gam, bet, M, s.C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT, NORM_ACT_SILU, 0,
                     1);
    dwconv_forward_ref(want, y, w, b, &s);
    silu_forward(want, want, no, 0, 1);
    float *dx = dev_dup(x, ni), *dw = dev_dup(w, nw), *db = dev_dup(b, C), *dout = dev_alloc(no * 4);
    struct tb_cuda_bn_in bn = {dev_dup(save, 2 * C), dev_dup(gam, C), dev_dup(bet, C), 1};
    OK(tb_cuda_dwconv_forward(dout, dx, dw, db, &bn, 1, &s, NULL));
    check(dout, want, no, RTOL, "depthwise with BN+SiLU input and SiLU epilogue");

    float *ww = tu_fvec(nw), *ddw = dev_alloc(nw * 4), *dg = dev_dup(g, no);
    dwconv_backward_params_ref(ww, NULL, y, g, &s);
    void *scr = dev_alloc(tb_cuda_dwconv_scratch_bytes(&s));
    OK(tb_cuda_dwconv_backward_params(ddw, NULL, dx, dg, &bn, &s, scr, NULL));
    check(ddw, ww, nw, RTOL, "depthwise weight gradient from the BN+SiLU input");
    dev_free_all();
    free(x), free(w), free(b), free(gam), free(bet), free(save), free(y), free(want), free(g), free(ww);
}

/* Blocked depthwise shapes (N, H, W, C, K, stride, pad): all six (K, stride, pad mod stride) instances, odd
 * widths and partial column strips, C a multiple of 4 (the 4-channel path) and not. */
static const int dwb_cases[][7] = {{2, 9, 11, 19, 3, 1, 1}, {2, 9, 11, 20, 3, 1, 1}, {2, 9, 11, 19, 3, 2, 0},
                                   {2, 9, 11, 24, 3, 2, 0}, {2, 9, 11, 19, 3, 2, 1}, {3, 8, 8, 96, 3, 2, 1},
                                   {1, 13, 7, 37, 5, 1, 2}, {1, 13, 7, 12, 5, 1, 2}, {1, 13, 7, 37, 5, 2, 2},
                                   {1, 13, 7, 40, 5, 2, 2}, {1, 13, 7, 37, 5, 2, 1}, {1, 13, 7, 36, 5, 2, 1},
                                   {2, 8, 13, 8, 3, 2, 2},  {1, 1, 1, 8, 3, 1, 1},   {1, 6, 6, 4, 5, 2, 3}};
#define N_DWB (sizeof dwb_cases / sizeof dwb_cases[0])

/* Asserts a (n) == b (n) element for element (±0 alike): a the default path's, b the A-B switch's. */
static void assert_equal(const float *a, const float *b, size_t n, const char *what, size_t i)
{
    for (size_t e = 0; e < n; e++)
        cr_assert(a[e] == b[e], "%s, case %zu, element %zu: default %.9g, switched back %.9g", what, i, e, a[e], b[e]);
}

/* The blocked forward and backward-data (the defaults for K 3/5, stride 1/2, 4 channels a thread where C % 4
 * == 0) do the earlier kernels' arithmetic in their order: equal to them (TB_CUDA_DW=old), bias and SiLU
 * epilogue and BatchNorm+SiLU on load included, backward-data accumulating and overwriting. */
Test(cuda_ops, depthwise_blocked_vs_old)
{
    need_gpu();
    for (size_t i = 0; i < N_DWB; i++) {
        const int *c = dwb_cases[i];
        struct conv_shape s = dw_shape_pad(c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
        const size_t ni = in_n(&s), no = out_n(&s), nw = w_n(&s), C = (size_t)s.C;
        float *x = rnd(ni, 1490 + i, -1, 2), *g = rnd(no, 1500 + i, -1, 1), *w = rnd(nw, 1510 + i, -0.5f, 0.5f);
        float *acc = rnd(ni, 1520 + i, -1, 1), *b = rnd(C, 1530 + i, -1, 1), *save = rnd(2 * C, 1540 + i, 0.5f, 1);
        float *gam = rnd(C, 1550 + i, 0.5f, 1.5f), *bet = rnd(C, 1560 + i, -0.5f, 0.5f);
        float *dx = dev_dup(x, ni), *dg = dev_dup(g, no), *dw = dev_dup(w, nw), *db = dev_dup(b, C);
        float *y[2] = {dev_alloc(no * 4), dev_alloc(no * 4)}, *di[2] = {dev_dup(acc, ni), dev_dup(acc, ni)};
        const struct tb_cuda_bn_in bn = {dev_dup(save, 2 * C), dev_dup(gam, C), dev_dup(bet, C), 1};
        const int add = (int)(i % 2), on_load = (int)(i % 3 == 0); /* accumulate or overwrite; BN on load */
        for (int old = 0; old <= 1; old++) {
            if (old) cr_assert_eq(setenv("TB_CUDA_DW", "old", 1), 0);
            const int st1 = tb_cuda_dwconv_forward(y[old], dx, dw, db, on_load ? &bn : NULL, 1, &s, NULL);
            const int st2 = tb_cuda_dwconv_backward_data(di[old], dg, dw, &s, add, NULL);
            unsetenv("TB_CUDA_DW");
            OK(st1);
            OK(st2);
        }
        float *h[2] = {tu_fvec(no), tu_fvec(no)}, *hi[2] = {tu_fvec(ni), tu_fvec(ni)};
        for (int k = 0; k < 2; k++) dev_get(h[k], y[k], no), dev_get(hi[k], di[k], ni);
        assert_equal(h[0], h[1], no, "forward", i);
        assert_equal(hi[0], hi[1], ni, "backward-data", i);
        dev_free_all();
        free(x), free(g), free(w), free(acc), free(b), free(save), free(gam), free(bet);
        free(h[0]), free(h[1]), free(hi[0]), free(hi[1]);
    }
}

/* The elementwise passes that read per-channel rows (BatchNorm's apply forward and backward, the SE scale, the
 * pool's backward) read them 4 or 8 floats a load by default and one a load under TB_CUDA_CHANNEL_ROWS=scalar:
 * the same values into the same arithmetic, so the same bits. C 44: 4 channels a thread; C 37: one (the
 * scalar loads either way). */
Test(cuda_ops, channel_rows_vs_scalar)
{
    need_gpu();
    for (int C = 37; C <= 44; C += 7) {
        const size_t M = 2 * 23 * 17, n = M * (size_t)C, c = (size_t)C;
        const int N = 2;
        const size_t HW = M / (size_t)N;
        float *x = rnd(n, 1570, -1, 3), *g = rnd(n, 1571, -1, 1), *gam = rnd(c, 1572, 0.5f, 1.5f);
        float *bet = rnd(c, 1573, -0.5f, 0.5f), *rv = rnd(c, 1574, 0.9f, 1.1f), *acc = rnd(n, 1575, -1, 1);
        float *sc = rnd((size_t)N * c, 1576, 0, 1), *gp = rnd((size_t)N * c, 1577, -1, 1);
        float *dx = dev_dup(x, n), *dg = dev_dup(g, n), *dgam = dev_dup(gam, c), *dbet = dev_dup(bet, c);
        float *drv = dev_dup(rv, c), *dsc = dev_dup(sc, (size_t)N * c), *dgp = dev_dup(gp, (size_t)N * c);
        void *scr = dev_alloc(tb_cuda_bn_scratch_bytes(M, C));
        enum { TRAIN, EVAL, BWD, BWD_OVER, SE, GAP, NOUT };
        float *h[2][NOUT];
        for (int scalar = 0; scalar <= 1; scalar++) {
            if (scalar) cr_assert_eq(setenv("TB_CUDA_CHANNEL_ROWS", "scalar", 1), 0);
            float *y[NOUT], *save = dev_alloc(2 * c * 4), *rm = dev_alloc(c * 4), *rvar = dev_dup(rv, c);
            for (int k = 0; k < NOUT; k++) y[k] = k == BWD || k == GAP ? dev_dup(acc, n) : dev_alloc(n * 4);
            int st[NOUT];
            st[TRAIN] = tb_cuda_bn_forward_train(y[TRAIN], save, rm, rvar, dx, dgam, dbet, M, C, BN_EPS_DEFAULT,
                                                 BN_MOMENTUM_DEFAULT, 1, scr, NULL);
            st[EVAL] = tb_cuda_bn_forward_eval(y[EVAL], dx, dbet, drv, dgam, dbet, M, C, BN_EPS_DEFAULT, 1, NULL);
            st[BWD] = tb_cuda_bn_backward(y[BWD], NULL, NULL, dg, dx, save, dgam, dbet, M, C, 1, 1, scr, NULL);
            st[BWD_OVER] = tb_cuda_bn_backward(y[BWD_OVER], NULL, NULL, dg, dx, save, dgam, dbet, M, C, 0, 0, scr, NULL);
            st[SE] = tb_cuda_se_scale_forward(y[SE], dx, dsc, N, HW, C, NULL);
            st[GAP] = tb_cuda_gap_backward(y[GAP], dgp, N, HW, C, NULL);
            unsetenv("TB_CUDA_CHANNEL_ROWS");
            for (int k = 0; k < NOUT; k++) {
                OK(st[k]);
                h[scalar][k] = tu_fvec(n);
                dev_get(h[scalar][k], y[k], n);
            }
        }
        static const char *what[NOUT] = {"BN train forward", "BN eval forward", "BN backward, accumulating",
                                         "BN backward, overwriting", "SE scale", "pool backward"};
        for (int k = 0; k < NOUT; k++) {
            assert_equal(h[0][k], h[1][k], n, what[k], (size_t)C);
            free(h[0][k]), free(h[1][k]);
        }
        dev_free_all();
        free(x), free(g), free(gam), free(bet), free(rv), free(acc), free(sc), free(gp);
    }
}

/* The blocked kernels' thread bodies on the host (no GPU), a channel a thread and (C % 4 == 0) four: the
 * forward with bias (and SiLU), the backward-data (accumulating or overwriting) and the weight and bias
 * gradients (accumulating) against the CPU references. */
Test(cuda_ops, depthwise_blocked_host)
{
    for (size_t i = 0; i < N_DWB; i++) {
        const int *c = dwb_cases[i];
        struct conv_shape s = dw_shape_pad(c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
        const size_t ni = in_n(&s), no = out_n(&s), nw = w_n(&s), C = (size_t)s.C;
        float *x = rnd(ni, 1630 + i, -1, 1), *g = rnd(no, 1600 + i, -1, 1), *w = rnd(nw, 1610 + i, -0.5f, 0.5f);
        float *b = rnd(C, 1660 + i, -1, 1), *acc0 = rnd(ni, 1620 + i, -1, 1);
        char what[96];
        for (int wide = 0; wide <= (s.C % 4 == 0); wide++) {
            const int act = (int)((i + wide) % 2), acc = (int)(i % 2) == 0;
            float *want = tu_fvec(no), *got = tu_fvec(no);
            dwconv_forward_ref(want, x, w, b, &s);
            if (act) silu_forward(want, want, no, 0, 1);
            cr_assert_eq(tb_cuda_dwconv_forward_host(got, x, w, b, act, &s, wide), 0, "case %zu", i);
            snprintf(what, sizeof what, "host blocked forward k%d s%d pad %d wide %d", c[4], c[5], c[6], wide);
            tu_assert_close_f(got, want, no, RTOL, ATOL, what);
            free(want), free(got);

            float *gi = tu_fdup(acc0, ni), *wi = acc ? tu_fdup(acc0, ni) : tu_fvec(ni);
            dwconv_backward_data_ref(wi, g, w, &s);
            cr_assert_eq(tb_cuda_dwconv_backward_data_host(gi, g, w, &s, acc, wide), 0, "case %zu", i);
            snprintf(what, sizeof what, "host blocked backward-data k%d s%d pad %d wide %d", c[4], c[5], c[6], wide);
            tu_assert_close_f(gi, wi, ni, RTOL, ATOL, what);
            free(gi), free(wi);
        }
        float *gw = rnd(nw, 1640 + i, -1, 1), *gb = rnd(C, 1650 + i, -1, 1);
        float *ww = tu_fdup(gw, nw), *wb = tu_fdup(gb, C);
        dwconv_backward_params_ref(ww, wb, x, g, &s);
        cr_assert_eq(tb_cuda_dwconv_backward_params_host(gw, gb, x, g, &s), 0, "case %zu", i);
        snprintf(what, sizeof what, "host blocked weight gradient k%d s%d pad %d", c[4], c[5], c[6]);
        tu_assert_close_f(gw, ww, nw, RTOL, ATOL, what);
        tu_assert_close_f(gb, wb, C, RTOL, ATOL, what);
        free(x), free(g), free(w), free(b), free(acc0), free(gw), free(gb), free(ww), free(wb);
    }
    struct conv_shape k7 = dw_shape_pad(1, 9, 9, 8, 7, 1, 3); /* not a blocked shape: the earlier kernels' */
    float one = 0.0f;
    cr_assert_neq(tb_cuda_dwconv_backward_data_host(&one, &one, &one, &k7, 1, 0), 0);
    cr_assert_neq(tb_cuda_dwconv_forward_host(&one, &one, &one, NULL, 0, &k7, 0), 0);
    cr_assert_neq(tb_cuda_dwconv_backward_params_host(&one, &one, &one, &one, &k7), 0);
    struct conv_shape c19 = dw_shape_pad(1, 5, 5, 19, 3, 1, 1); /* 4 channels a thread needs C % 4 == 0 */
    cr_assert_neq(tb_cuda_dwconv_forward_host(&one, &one, &one, NULL, 0, &c19, 1), 0);
}

Test(cuda_ops, grouped)
{
    need_gpu();
    /* N, H, W, C, OC, K, stride: G16's 16-channel groups, and groups of 8 in and 24 out */
    static const int cases[][7] = {{2, 9, 11, 48, 48, 3, 1}, {2, 9, 11, 32, 32, 5, 2}, {1, 6, 7, 16, 48, 3, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct conv_shape s;
        cr_assert_eq(conv_shape_init(&s, c[0], c[1], c[2], c[3], c[4], c[5], c[5], c[6], c[3] / 16 > 1 ? c[3] / 16 : 2),
                     0);
        check_conv(&GC, &s, NULL, 300 + 10 * i);
    }
}

/* A cuBLAS handle on the legacy stream, as the executor makes one (TF32 off). */
static tb_cublas *blas_handle(void)
{
    tb_cublas *h = NULL;
    int st = tb_cublas_create(&h, NULL);
    cr_assert_eq(st, 0, "tb_cublas_create: %d (cuBLAS missing on a GPU machine?)", st);
    return h;
}

Test(cuda_ops, conv1x1)
{
    need_gpu();
    tb_cublas *h = blas_handle();
    /* N, H, W, C; OC below. The last has 8,427 rows against 16·35 weights: the weight gradient split in 2 row
     * chunks of 4,213 and one more part for the last row (ops_conv.cu's wg_split). */
    static const int cases[][4] = {{2, 7, 9, 24}, {1, 5, 5, 96}, {3, 1, 1, 40}, {3, 53, 53, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct conv_shape s;
        cr_assert_eq(conv_shape_init(&s, c[0], c[1], c[2], c[3], c[3] * 2 + 3, 1, 1, 1, 1), 0);
        check_conv(&C1, &s, h, 400 + 10 * i);
    }
    tb_cublas_destroy(h);
}

Test(cuda_ops, stem_im2col)
{
    need_gpu();
    tb_cublas *h = blas_handle();
    struct conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, 17, 15, 3, 32, 3, 3, 2, 1), 0); /* EfficientNet's stem, small */
    check_conv(&IC, &s, h, 500);
    cr_assert_eq(conv_shape_init(&s, 1, 9, 9, 8, 16, 5, 5, 1, 1), 0);
    check_conv(&IC, &s, h, 510);
    tb_cublas_destroy(h);
}

Test(cuda_ops, stem_direct)
{
    need_gpu();
    tb_cublas *h = blas_handle();
    for (size_t i = 0; i < N_DC; i++) {
        const struct conv_shape s = dc_shape(i);
        check_conv(&DC, &s, h, 520 + 10 * i);
    }
    struct conv_shape no;
    cr_assert_eq(conv_shape_init(&no, 1, 9, 9, 8, 16, 3, 3, 1, 1), 0); /* 8 input channels: im2col's */
    cr_assert(!tb_cuda_conv_direct_fits(&no));
    tb_cublas_destroy(h);
}

/* The direct stem kernels' thread bodies on the host (no GPU): forward and (accumulating) weight and bias
 * gradients against the CPU references. */
Test(cuda_ops, stem_direct_host)
{
    for (size_t i = 0; i < N_DC; i++) {
        const struct conv_shape s = dc_shape(i);
        size_t ni = in_n(&s), no = out_n(&s), nw = w_n(&s), nb = (size_t)s.OC;
        float *x = rnd(ni, 1700 + i, -1, 1), *w = rnd(nw, 1710 + i, -0.5f, 0.5f), *b = rnd(nb, 1720 + i, -1, 1);
        float *g = rnd(no, 1730 + i, -1, 1), *got = tu_fvec(no), *want = tu_fvec(no);
        conv_forward_ref(want, x, w, b, &s);
        cr_assert_eq(tb_cuda_conv_direct_forward_host(got, x, w, b, &s), 0);
        tu_assert_close_f(got, want, no, RTOL, ATOL, "host direct forward");
        float *gw = rnd(nw, 1740 + i, -1, 1), *gb = rnd(nb, 1750 + i, -1, 1);
        float *ww = tu_fdup(gw, nw), *wb = tu_fdup(gb, nb);
        conv_backward_params_ref(ww, wb, x, g, &s);
        cr_assert_eq(tb_cuda_conv_direct_backward_params_host(gw, gb, x, g, &s), 0);
        tu_assert_close_f(gw, ww, nw, RTOL, ATOL, "host direct weight gradient");
        tu_assert_close_f(gb, wb, nb, RTOL, ATOL, "host direct bias gradient");
        free(x), free(w), free(b), free(g), free(got), free(want), free(gw), free(gb), free(ww), free(wb);
    }
}

/* ---- 2-byte storage (bf16, fp16): host values on the type's grid, their device copies, and the checks ---- */

/* fp16 (IEEE binary16: a sign, 5 exponent bits biased by 15, 10 fraction bits) on the host, bit by bit: the CPU's
 * inputs are rounded with it, so they must sit exactly where the device's __float2half_rn puts them
 * (fp16_round_host checks it against the compiler's _Float16). The bits of f rounded to nearest, ties to even:
 * normals from 2^-14 (0x0400), subnormals (multiples of 2^-24) below, ±0 at or below 2^-25 (the tie with 2^-24
 * goes to the even 0), ±inf from 65520 (the tie above 65504 goes to the even 2^16, which is past the range), NaN
 * a quiet NaN. */
static uint16_t fp16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* |f| ≥ 65520 or inf: ±inf */
    if (a >= 0x38800000u) { /* normal: exponent rebiased from 127 to 15, the low 13 fraction bits dropped */
        const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u); /* a carry out of the fraction bumps the exponent */
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (a <= 0x33000000u) return sign; /* |f| ≤ 2^-25 (float subnormals included): ±0 */
    /* subnormal: |f| / 2^-24 = mant · 2^(e - 126), mant with its implicit bit; 14 ≤ 126 - e ≤ 24 here */
    const uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, sh = 126 - e;
    const uint32_t rem = mant & ((1u << sh) - 1u), tie = 1u << (sh - 1);
    uint32_t m = mant >> sh;
    m += rem > tie || (rem == tie && (m & 1u)); /* 1024 (from 1023 up) is 0x0400, the smallest normal */
    return (uint16_t)(sign | m);
}

/* The float value of fp16 bits h (exact: every fp16 value is a float). */
static float fp16_value(uint16_t h)
{
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float v;
    if (e == 0) {
        v = ldexpf((float)m, -24); /* ±0, subnormals */
    } else if (e == 31) {
        v = m ? NAN : INFINITY;
    } else {
        const uint32_t u = ((e + 112u) << 23) | (m << 13); /* exponent rebiased from 15 to 127 */
        memcpy(&v, &u, sizeof v);
    }
    return h & 0x8000u ? -v : v;
}

static void fp16_round(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = fp16_value(fp16_bits(x[i]));
}
static void fp16_pack(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = fp16_bits(src[i]);
}
static void fp16_unpack(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = fp16_value(src[i]);
}
/* bf16 is stage_precision's (bit manipulation, to nearest even), as the executor's own host conversions. */
static void bf16_round(float *x, size_t n) { stage_prec_round(x, n, STAGE_PREC_BF16, 0, 0, 0, 0); }
static void bf16_pack(uint16_t *dst, const float *src, size_t n)
{
    stage_prec_pack(dst, src, n, STAGE_PREC_BF16, 1.0f);
}
static void bf16_unpack(float *dst, const uint16_t *src, size_t n)
{
    stage_prec_unpack(dst, src, n, STAGE_PREC_BF16, 1.0f);
}

/* The launchers with a _bf16 and an _fp16 twin (ops_effnet.h, ops_dense.h), by the name between tb_cuda_ and
 * the suffix. */
#define HALF_LAUNCHERS(X)                                                                                            \
    X(conv1x1_forward) X(conv1x1_backward_data) X(conv1x1_backward_params) X(conv_im2col_forward)                  \
    X(conv_im2col_backward_data) X(conv_im2col_backward_params) X(conv_direct_forward)                              \
    X(conv_direct_backward_params) X(dwconv_forward) X(dwconv_backward_data) X(dwconv_backward_params)              \
    X(gconv_forward) X(gconv_backward_data) X(gconv_backward_params) X(bn_forward_train) X(bn_forward_eval)         \
    X(bn_backward) X(gn_forward) X(gn_backward) X(silu_forward) X(silu_backward) X(sigmoid_forward)                 \
    X(sigmoid_backward) X(add_forward) X(add_backward) X(gap_forward) X(gap_backward) X(se_scale_forward)           \
    X(se_scale_backward) X(dropout_forward) X(dropout_backward) X(dropconnect_add_forward) X(dropconnect_backward)  \
    X(input_forward) X(input_affine) X(bias_act) X(relu_mask) X(relu_backward) X(relu_forward) X(bias_grad)        \
    X(softmax_ce) X(to)

/* A 2-byte storage type under test: its name, its tolerance, the host's rounding onto its grid and conversions
 * to and from its bits, and its launchers. Each launcher member has the _bf16 launcher's type, so an _fp16 twin
 * whose signature differs does not compile. */
struct half {
    const char *name;
    double tol, atol; /* relative, and the floor as a fraction of the tensor's largest |value| */
    void (*round)(float *x, size_t n);
    void (*pack)(uint16_t *dst, const float *src, size_t n);
    void (*unpack)(float *dst, const uint16_t *src, size_t n);
#define HALF_MEMBER(f) __typeof__(tb_cuda_##f##_bf16) *f;
    HALF_LAUNCHERS(HALF_MEMBER)
#undef HALF_MEMBER
};

#define HALF_BF16(f) .f = tb_cuda_##f##_bf16,
#define HALF_FP16(f) .f = tb_cuda_##f##_fp16,
static const struct half half_bf16 = {.name = "bf16", .tol = BF16_TOL, .atol = BF16_ATOL, .round = bf16_round,
                                      .pack = bf16_pack, .unpack = bf16_unpack, HALF_LAUNCHERS(HALF_BF16)};
static const struct half half_fp16 = {.name = "fp16", .tol = FP16_TOL, .atol = FP16_ATOL, .round = fp16_round,
                                      .pack = fp16_pack, .unpack = fp16_unpack, HALF_LAUNCHERS(HALF_FP16)};

/* Test(cuda_ops, name_bf16) and Test(cuda_ops, name_fp16), each running name_h with its type. */
#define HALF_TESTS(name)                                                                                             \
    Test(cuda_ops, name##_bf16) { name##_h(&half_bf16); }                                                          \
    Test(cuda_ops, name##_fp16) { name##_h(&half_fp16); }

/* "what (bf16)": a check's name with the type's (valid until the next call). */
static const char *hmsg(const struct half *o, const char *what)
{
    static char buf[224];
    snprintf(buf, sizeof buf, "%s (%s)", what, o->name);
    return buf;
}

/* A random host vector in [lo, hi) rounded to o's grid (the values its store holds, and the CPU's inputs). */
static float *rnd_h(const struct half *o, size_t n, uint64_t seed, float lo, float hi)
{
    float *p = rnd(n, seed, lo, hi);
    o->round(p, n);
    return p;
}

/* A device copy of n host floats in o's type (rounded to nearest even). */
static void *dev_h(const struct half *o, const float *h, size_t n)
{
    uint16_t *b = malloc((n ? n : 1) * sizeof *b);
    cr_assert_not_null(b);
    o->pack(b, h, n);
    void *d = dev_alloc(n * 2);
    CU(cudaMemcpy(d, b, n * 2, cudaMemcpyHostToDevice));
    free(b);
    return d;
}

/* h (n) ← the device's d (n values of o's type) as floats, after the work queued on the legacy stream. */
static void dev_get_h(const struct half *o, float *h, const void *d, size_t n)
{
    uint16_t *b = malloc((n ? n : 1) * sizeof *b);
    cr_assert_not_null(b);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(b, d, n * 2, cudaMemcpyDeviceToHost));
    o->unpack(h, b, n);
    free(b);
}

/* Asserts the device's d (n values of o's type) is within o's tolerance of want (n). */
static void check_h(const struct half *o, const void *d, const float *want, size_t n, const char *what)
{
    float *got = tu_fvec(n);
    dev_get_h(o, got, d, n);
    tu_assert_close_f(got, want, n, o->tol, o->atol, hmsg(o, what));
    free(got);
}

/* Asserts the device's fp32 d (n), computed from inputs of o's type, is within o's tolerance of want (n). */
static void check32_h(const struct half *o, const float *d, const float *want, size_t n, const char *what)
{
    float *got = tu_fvec(n);
    dev_get(got, d, n);
    tu_assert_close_f(got, want, n, o->tol, o->atol, hmsg(o, what));
    free(got);
}

/* Asserts the device's d (n values of o's type) is zero exactly where want is and close elsewhere. */
static void check_mask_h(const struct half *o, const void *d, const float *want, size_t n, const char *what)
{
    float *got = tu_fvec(n);
    dev_get_h(o, got, d, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i] == 0.0f, want[i] == 0.0f, "%s (%s)[%zu]: got %g want %g (mask differs)", what, o->name,
                     i, (double)got[i], (double)want[i]);
    tu_assert_close_f(got, want, n, o->tol, o->atol, hmsg(o, what));
    free(got);
}

/* ---- 2-byte storage: each _bf16 and _fp16 launcher against its fp32 CPU kernel on inputs rounded to the type;
 * one body per check (name_h), run once per type (HALF_TESTS) ---- */

/* fp16_bits / fp16_value on the host (no GPU): every fp16 value back to its own bits, the documented edges, and
 * agreement with the compiler's _Float16 conversion (stage_prec_pack) at every midpoint between neighbouring fp16
 * values, the floats either side of each, and a sweep of float bit patterns. */
Test(cuda_ops, fp16_round_host)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float v = fp16_value((uint16_t)h);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) {
            cr_assert(isnan(v), "fp16 0x%04x is a NaN", h);
            cr_assert(isnan(fp16_value(fp16_bits(v))));
            continue;
        }
        cr_assert_eq(fp16_bits(v), h, "fp16 0x%04x (%g) came back as 0x%04x", h, (double)v, fp16_bits(v));
    }
    /* the top (65504, the tie 65520 and past it: ±inf), the subnormal range's ends and ties, ties to even */
    static const struct {
        float x;
        uint16_t bits;
    } edges[] = {{65504.0f, 0x7bff},      {65519.99f, 0x7bff},       {0x1.ffdp+15f, 0x7bff},     {65520.0f, 0x7c00},
                 {-70000.0f, 0xfc00},     {1e30f, 0x7c00},           {0x1p-14f, 0x0400},         {0x1.ff8p-15f, 0x03ff},
                 {0x1.ffap-15f, 0x03ff},  {0x1.ffcp-15f, 0x0400},    {0x1.ffep-15f, 0x0400},     {0x1p-24f, 0x0001},
                 {0x1p-25f, 0x0000},      {0x1.000002p-25f, 0x0001}, {0x1.8p-24f, 0x0002},       {0x1p-126f, 0x0000},
                 {-0.0f, 0x8000},         {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02},
                 {-1.0f - 0x1p-10f, 0xbc01}};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        cr_assert_eq(fp16_bits(edges[i].x), edges[i].bits, "fp16 of %a: 0x%04x, want 0x%04x", (double)edges[i].x,
                     fp16_bits(edges[i].x), edges[i].bits);

    const size_t n_mid = (size_t)0x7c00 * 6, n_sweep = ((size_t)1 << 32) / 4093 + 1;
    float *x = tu_fvec(n_mid + n_sweep);
    size_t n = 0;
    for (uint32_t h = 0; h < 0x7c00u; h++) { /* up to the midpoint 65520 between 65504 and (the even) 2^16 */
        const float lo = fp16_value((uint16_t)h), hi = h == 0x7bffu ? 65536.0f : fp16_value((uint16_t)(h + 1));
        const float mid = (lo + hi) * 0.5f; /* exact: 12 significant bits */
        const float pts[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) x[n++] = pts[k], x[n++] = -pts[k];
    }
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 4093) {
        const uint32_t b = (uint32_t)u;
        memcpy(&x[n], &b, sizeof b);
        if (!isnan(x[n])) n++;
    }
    uint16_t *want = malloc(n * sizeof *want);
    cr_assert_not_null(want);
    stage_prec_pack(want, x, n, STAGE_PREC_FP16, 1.0f);
    for (size_t i = 0; i < n; i++)
        if (fp16_bits(x[i]) != want[i])
            cr_assert_fail("fp16 of %a: 0x%04x, _Float16 says 0x%04x", (double)x[i], fp16_bits(x[i]), want[i]);
    free(x), free(want);
}

static void activations_h(const struct half *o)
{
    need_gpu();
    const size_t n = 10007;
    float *x = rnd_h(o, n, 31, -8.0f, 8.0f), *g = rnd_h(o, n, 32, -1.0f, 1.0f), *acc0 = rnd_h(o, n, 33, -1.0f, 1.0f);
    float *want = tu_fvec(n), *dwant = tu_fvec(n), *y = tu_fvec(n);
    void *dx = dev_h(o, x, n), *dg = dev_h(o, g, n), *dy = dev_alloc(n * 2), *dd = dev_h(o, acc0, n);
    void *dd2 = dev_h(o, acc0, n);

    silu_forward(want, x, n, 0, 1);
    OK(o->silu_forward(dy, dx, n, NULL));
    check_h(o, dy, want, n, "silu");
    memcpy(dwant, acc0, n * sizeof *dwant);
    silu_backward(dwant, g, x, n, 0, 1);
    OK(o->silu_backward(dd, dg, dx, n, NULL));
    check_h(o, dd, dwant, n, "silu backward (accumulating)");

    OK(o->sigmoid_forward(dy, dx, n, NULL));
    dev_get_h(o, y, dy, n); /* the backward reads the stored (rounded) output, as the executor's does */
    sigmoid_forward(want, x, n, 0, 1);
    tu_assert_close_f(y, want, n, o->tol, o->atol, hmsg(o, "sigmoid"));
    memcpy(dwant, acc0, n * sizeof *dwant);
    CU(cudaMemcpy(dd, dd2, n * 2, cudaMemcpyDeviceToDevice));
    sigmoid_backward(dwant, g, y, n, 0, 1);
    OK(o->sigmoid_backward(dd, dg, dy, n, NULL));
    check_h(o, dd, dwant, n, "sigmoid backward");

    for (size_t i = 0; i < n; i++) want[i] = x[i] + g[i];
    OK(o->add_forward(dy, dx, dg, n, NULL));
    check_h(o, dy, want, n, "add");
    for (size_t i = 0; i < n; i++) dwant[i] = acc0[i] + g[i];
    CU(cudaMemcpy(dd, dd2, n * 2, cudaMemcpyDeviceToDevice));
    OK(o->add_backward(dd, dd2, dg, n, NULL)); /* both branches */
    check_h(o, dd, dwant, n, "add backward (a)");
    check_h(o, dd2, dwant, n, "add backward (b)");

    dev_free_all();
    free(x), free(g), free(acc0), free(want), free(dwant), free(y);
}
HALF_TESTS(activations)

static void dropout_masks_h(const struct half *o)
{
    need_gpu();
    const int N = 7;
    const size_t D = 1003, n = (size_t)N * D, n_max = (size_t)N * 1008;
    const uint64_t g0 = 37;
    struct dropout_args a = {.seed = 1234, .step = 9, .layer = 17, .p = 0.3f};
    struct tb_cuda_drop b = {.seed = a.seed, .step = a.step, .layer = a.layer, .p = a.p};
    float *x = rnd_h(o, n_max, 34, 0.5f, 1.5f), *s = rnd_h(o, n_max, 35, 0.5f, 1.5f), *want = tu_fvec(n_max);
    void *dx = dev_h(o, x, n_max), *ds = dev_h(o, s, n_max), *dy = dev_alloc(n_max * 2);

    dropout_forward(want, x, N, D, g0, &a, 0, 1);
    OK(o->dropout_forward(dy, dx, N, D, g0, &b, NULL));
    check_mask_h(o, dy, want, n, "dropout");
    memset(want, 0, n * sizeof *want);
    dropout_backward(want, x, N, D, g0, &a, 0, 1);
    CU(cudaMemset(dy, 0, n * 2));
    OK(o->dropout_backward(dy, dx, N, D, g0, &b, NULL));
    check_mask_h(o, dy, want, n, "dropout backward");

    a.p = b.p = 0.5f;
    for (size_t Dd = 1003; Dd <= 1008; Dd += Dd == 1003 ? 1 : 4) { /* 1, 4 and 8 elements a thread */
        const size_t nd = (size_t)N * Dd;
        dropconnect_forward(want, x, N, Dd, g0, &a, 0, 1);
        OK(o->dropconnect_add_forward(dy, NULL, dx, N, Dd, g0, &b, NULL));
        check_mask_h(o, dy, want, nd, "drop-connect");
        memset(want, 0, nd * sizeof *want);
        dropconnect_backward(want, x, N, Dd, g0, &a, 0, 1);
        CU(cudaMemset(dy, 0, nd * 2));
        OK(o->dropconnect_backward(dy, dx, N, Dd, g0, &b, 1, NULL));
        check_mask_h(o, dy, want, nd, "drop-connect backward");
        OK(o->dropconnect_backward(dy, dx, N, Dd, g0, &b, 0, NULL));
        check_mask_h(o, dy, want, nd, "drop-connect backward, overwriting");
        dropconnect_add_forward(want, s, x, N, Dd, g0, &a, 0, 1);
        OK(o->dropconnect_add_forward(dy, ds, dx, N, Dd, g0, &b, NULL));
        check_h(o, dy, want, nd, "drop-connect add");
    }

    a.p = b.p = 0.0f; /* the identity: a copy of the stored values */
    OK(o->dropout_forward(dy, dx, N, D, g0, &b, NULL));
    float *got = tu_fvec(n);
    dev_get_h(o, got, dy, n);
    tu_assert_bitwise(got, x, n, hmsg(o, "dropout p = 0"));
    free(got);

    dev_free_all();
    free(x), free(s), free(want);
}
HALF_TESTS(dropout_masks)

static void pool_and_se_h(const struct half *o)
{
    need_gpu();
    /* C 45: an element a thread in the elementwise passes; 52: 4 a thread; 48: 4 (fp32) or 8 (2-byte) a thread */
    for (int C = 45; C <= 52; C += C == 45 ? 3 : 4) {
        const int N = 3;
        const size_t HW = 7 * 9, n = (size_t)N * HW * C, nc = (size_t)N * C;
        float *x = rnd_h(o, n, 36, -2.0f, 2.0f), *g = rnd_h(o, n, 37, -1.0f, 1.0f), *sc = rnd_h(o, nc, 38, 0.0f, 1.0f);
        float *gp = rnd_h(o, nc, 39, -1.0f, 1.0f), *acc0 = rnd_h(o, n, 40, -1.0f, 1.0f);
        float *accs = rnd_h(o, nc, 41, -1.0f, 1.0f), *want = tu_fvec(n), *wants = tu_fdup(accs, nc);
        void *dx = dev_h(o, x, n), *dg = dev_h(o, g, n), *dsc = dev_h(o, sc, nc), *dgp = dev_h(o, gp, nc);
        void *dy = dev_alloc(n * 2), *dp = dev_alloc(nc * 2), *dds = dev_h(o, accs, nc), *dacc = dev_h(o, acc0, n);

        global_avgpool_forward(want, x, N, HW, C, 0, 1);
        OK(o->gap_forward(dp, dx, N, HW, C, NULL));
        check_h(o, dp, want, nc, "global average pool");
        memcpy(want, acc0, n * sizeof *want);
        CU(cudaMemcpy(dy, dacc, n * 2, cudaMemcpyDeviceToDevice));
        global_avgpool_backward(want, gp, N, HW, C, 0, 1);
        OK(o->gap_backward(dy, dgp, N, HW, C, NULL));
        check_h(o, dy, want, n, "global average pool backward");

        se_scale_forward(want, x, sc, N, HW, C, 0, 1);
        OK(o->se_scale_forward(dy, dx, dsc, N, HW, C, NULL));
        check_h(o, dy, want, n, "SE scale");
        memcpy(want, acc0, n * sizeof *want);
        CU(cudaMemcpy(dy, dacc, n * 2, cudaMemcpyDeviceToDevice));
        se_scale_backward(want, wants, g, x, sc, N, HW, C, 1, 0, 1);
        OK(o->se_scale_backward(dy, dds, dg, dx, dsc, N, HW, C, 1, NULL));
        check_h(o, dy, want, n, "SE scale backward dinp");
        check_h(o, dds, wants, nc, "SE scale backward dscale");
        /* acc 0 overwrites dinp (the executor's shortcut); dscale accumulates either way (rounded twice now) */
        memset(want, 0, n * sizeof *want);
        se_scale_backward(want, wants, g, x, sc, N, HW, C, 0, 0, 1);
        OK(o->se_scale_backward(dy, dds, dg, dx, dsc, N, HW, C, 0, NULL));
        check_h(o, dy, want, n, "SE scale backward dinp, overwriting");
        check_h(o, dds, wants, nc, "SE scale backward dscale, accumulated again");

        dev_free_all();
        free(x), free(g), free(sc), free(gp), free(acc0), free(accs), free(want), free(wants);
    }
}
HALF_TESTS(pool_and_se)

static void batchnorm_h(const struct half *o)
{
    need_gpu();
    /* C 37: a channel a thread in the elementwise passes; 44: 4 a thread; 40: 4 (fp32) or 8 (2-byte) a thread */
    for (int C = 37; C <= 44; C += C == 37 ? 3 : 4) {
        const size_t M = 3 * 23 * 17, n = M * C;
        float *x = rnd_h(o, n, 42, -1.0f, 3.0f), *g = rnd_h(o, n, 43, -1.0f, 1.0f);
        float *gam = rnd((size_t)C, 44, 0.5f, 1.5f);
        float *bet = rnd((size_t)C, 45, -0.5f, 0.5f), *rm0 = rnd((size_t)C, 46, -0.1f, 0.1f);
        float *rv0 = rnd((size_t)C, 47, 0.9f, 1.1f), *acc0 = rnd_h(o, n, 48, -1.0f, 1.0f);
        void *dx = dev_h(o, x, n), *dg = dev_h(o, g, n), *dy = dev_alloc(n * 2);
        float *dgam = dev_dup(gam, (size_t)C), *dbet = dev_dup(bet, (size_t)C), *dsave = dev_alloc(2 * (size_t)C * 4);
        void *scr = dev_alloc(tb_cuda_bn_scratch_bytes(M, C));
        for (int act = 0; act <= 1; act++) {
            float *want = tu_fvec(n), *save = tu_fvec(2 * (size_t)C), *rm = tu_fdup(rm0, (size_t)C);
            float *rv = tu_fdup(rv0, (size_t)C), *drm = dev_dup(rm0, (size_t)C), *drv = dev_dup(rv0, (size_t)C);
            bn_forward_train(want, save, rm, rv, x, gam, bet, M, C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT, act, 0, 1);
            OK(o->bn_forward_train(dy, dsave, drm, drv, dx, dgam, dbet, M, C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT, act,
                                   scr, NULL));
            check_h(o, dy, want, n, "BN train forward");
            check32_h(o, dsave, save, 2 * (size_t)C, "BN save (fp32)");
            check32_h(o, drm, rm, (size_t)C, "BN running mean");
            check32_h(o, drv, rv, (size_t)C, "BN running var");

            bn_forward_eval(want, x, rm, rv, gam, bet, M, C, BN_EPS_DEFAULT, act, 0, 1);
            OK(o->bn_forward_eval(dy, dx, drm, drv, dgam, dbet, M, C, BN_EPS_DEFAULT, act, NULL));
            check_h(o, dy, want, n, "BN eval forward");

            float *dwant = tu_fdup(acc0, n), *dgw = tu_fdup(gam, (size_t)C), *dbw = tu_fdup(bet, (size_t)C);
            float *gcopy = tu_fdup(g, n); /* the CPU overwrites dout with dz under SiLU */
            void *ddx = dev_h(o, acc0, n);
            float *ddg = dev_dup(gam, (size_t)C), *ddb = dev_dup(bet, (size_t)C), *dsv = dev_dup(save, 2 * (size_t)C);
            bn_backward(dwant, dgw, dbw, gcopy, x, save, gam, bet, M, C, act, 1, 0, 1);
            OK(o->bn_backward(ddx, ddg, ddb, dg, dx, dsv, dgam, dbet, M, C, act, 1, scr, NULL));
            check_h(o, ddx, dwant, n, "BN backward dinp");
            check32_h(o, ddg, dgw, (size_t)C, "BN backward dgamma");
            check32_h(o, ddb, dbw, (size_t)C, "BN backward dbeta");
            memcpy(gcopy, g, n * sizeof *gcopy), memset(dwant, 0, n * sizeof *dwant);
            bn_backward(dwant, dgw, dbw, gcopy, x, save, gam, bet, M, C, act, 1, 0, 1);
            OK(o->bn_backward(ddx, ddg, ddb, dg, dx, dsv, dgam, dbet, M, C, act, 0, scr, NULL));
            check_h(o, ddx, dwant, n, "BN backward dinp, overwriting");
            free(want), free(save), free(rm), free(rv), free(dwant), free(dgw), free(dbw), free(gcopy);
        }
        dev_free_all();
        free(x), free(g), free(gam), free(bet), free(rm0), free(rv0), free(acc0);
    }
}
HALF_TESTS(batchnorm)

/* channel_rows_vs_scalar in o's storage: C 48 takes 8 channels a thread (2-byte data, the float rows in two
 * 16-byte loads; the SE scale's and the pool gradient's 2-byte rows in one), C 44 four (8-byte rows). */
static void channel_rows_vs_scalar_h(const struct half *o)
{
    need_gpu();
    for (int C = 44; C <= 48; C += 4) {
        const size_t M = 2 * 23 * 17, n = M * (size_t)C, c = (size_t)C;
        const int N = 2;
        const size_t HW = M / (size_t)N;
        float *x = rnd_h(o, n, 1580, -1, 3), *g = rnd_h(o, n, 1581, -1, 1), *gam = rnd(c, 1582, 0.5f, 1.5f);
        float *bet = rnd(c, 1583, -0.5f, 0.5f), *rv = rnd(c, 1584, 0.9f, 1.1f), *acc = rnd_h(o, n, 1585, -1, 1);
        float *sc = rnd_h(o, (size_t)N * c, 1586, 0, 1), *gp = rnd_h(o, (size_t)N * c, 1587, -1, 1);
        void *dx = dev_h(o, x, n), *dg = dev_h(o, g, n), *dsc = dev_h(o, sc, (size_t)N * c);
        void *dgp = dev_h(o, gp, (size_t)N * c);
        float *dgam = dev_dup(gam, c), *dbet = dev_dup(bet, c), *drv = dev_dup(rv, c);
        void *scr = dev_alloc(tb_cuda_bn_scratch_bytes(M, C));
        enum { TRAIN, EVAL, BWD, SE, GAP, NOUT };
        float *h[2][NOUT];
        for (int scalar = 0; scalar <= 1; scalar++) {
            if (scalar) cr_assert_eq(setenv("TB_CUDA_CHANNEL_ROWS", "scalar", 1), 0);
            void *y[NOUT];
            float *save = dev_alloc(2 * c * 4), *rm = dev_alloc(c * 4), *rvar = dev_dup(rv, c);
            for (int k = 0; k < NOUT; k++) y[k] = k == BWD || k == GAP ? dev_h(o, acc, n) : dev_alloc(n * 2);
            int st[NOUT];
            st[TRAIN] = o->bn_forward_train(y[TRAIN], save, rm, rvar, dx, dgam, dbet, M, C, BN_EPS_DEFAULT,
                                            BN_MOMENTUM_DEFAULT, 1, scr, NULL);
            st[EVAL] = o->bn_forward_eval(y[EVAL], dx, dbet, drv, dgam, dbet, M, C, BN_EPS_DEFAULT, 1, NULL);
            st[BWD] = o->bn_backward(y[BWD], NULL, NULL, dg, dx, save, dgam, dbet, M, C, 1, 1, scr, NULL);
            st[SE] = o->se_scale_forward(y[SE], dx, dsc, N, HW, C, NULL);
            st[GAP] = o->gap_backward(y[GAP], dgp, N, HW, C, NULL);
            unsetenv("TB_CUDA_CHANNEL_ROWS");
            for (int k = 0; k < NOUT; k++) {
                OK(st[k]);
                h[scalar][k] = tu_fvec(n);
                dev_get_h(o, h[scalar][k], y[k], n);
            }
        }
        static const char *what[NOUT] = {"BN train forward", "BN eval forward", "BN backward", "SE scale",
                                         "pool backward"};
        for (int k = 0; k < NOUT; k++) {
            assert_equal(h[0][k], h[1][k], n, what[k], (size_t)C);
            free(h[0][k]), free(h[1][k]);
        }
        dev_free_all();
        free(x), free(g), free(gam), free(bet), free(rv), free(acc), free(sc), free(gp);
    }
}
HALF_TESTS(channel_rows_vs_scalar)

static void groupnorm_h(const struct half *o)
{
    need_gpu();
    const int N = 3, C = 32, G = 4;
    const size_t HW = 20 * 19, n = (size_t)N * HW * C, ns = (size_t)N * G * 2;
    float *x = rnd_h(o, n, 49, -1.0f, 3.0f), *g = rnd_h(o, n, 50, -1.0f, 1.0f), *gam = rnd((size_t)C, 51, 0.5f, 1.5f);
    float *bet = rnd((size_t)C, 52, -0.5f, 0.5f), *acc0 = rnd_h(o, n, 53, -1.0f, 1.0f);
    void *dx = dev_h(o, x, n), *dg = dev_h(o, g, n), *dy = dev_alloc(n * 2);
    float *dgam = dev_dup(gam, (size_t)C), *dbet = dev_dup(bet, (size_t)C), *dsave = dev_alloc(ns * 4);
    void *scr = dev_alloc(tb_cuda_gn_scratch_bytes(N, HW, C));
    for (int act = 0; act <= 1; act++) {
        float *want = tu_fvec(n), *save = tu_fvec(ns);
        gn_forward(want, save, x, gam, bet, N, HW, C, G, GN_EPS_DEFAULT, act, 0, 1);
        OK(o->gn_forward(dy, dsave, dx, dgam, dbet, N, HW, C, G, GN_EPS_DEFAULT, act, NULL));
        check_h(o, dy, want, n, "GN forward");
        check32_h(o, dsave, save, ns, "GN save (fp32)");

        float *dwant = tu_fdup(acc0, n), *dgw = tu_fdup(gam, (size_t)C), *dbw = tu_fdup(bet, (size_t)C);
        void *ddx = dev_h(o, acc0, n);
        float *ddg = dev_dup(gam, (size_t)C), *ddb = dev_dup(bet, (size_t)C), *dsv = dev_dup(save, ns);
        gn_backward_data(dwant, g, x, save, gam, bet, N, HW, C, G, act, 1, 0, 1);
        gn_backward_params(dgw, dbw, g, x, save, gam, bet, N, HW, C, G, act, 0, 1);
        OK(o->gn_backward(ddx, ddg, ddb, dg, dx, dsv, dgam, dbet, N, HW, C, G, act, 1, scr, NULL));
        check_h(o, ddx, dwant, n, "GN backward dinp");
        check32_h(o, ddg, dgw, (size_t)C, "GN backward dgamma");
        check32_h(o, ddb, dbw, (size_t)C, "GN backward dbeta");
        free(want), free(save), free(dwant), free(dgw), free(dbw);
    }
    dev_free_all();
    free(x), free(g), free(gam), free(bet), free(acc0);
}
HALF_TESTS(groupnorm)

/* The 2-byte convolution launchers by kind: depthwise and grouped read the fp32 weights, the GEMM kinds
 * (conv1x1, im2col) and the direct stem the weights' 2-byte copy w16. */
enum conv16_kind { CONV16_DW, CONV16_GC, CONV16_C1, CONV16_IC, CONV16_DC };
static const char *const conv16_name[] = {"depthwise", "grouped", "conv1x1", "im2col", "direct"};

static int conv16_fwd(const struct half *o, enum conv16_kind k, tb_cublas *h, void *out, const void *in,
                      const float *w, const void *w16, const float *b, const struct conv_shape *s, void *scr)
{
    switch (k) {
    case CONV16_DW: return o->dwconv_forward(out, in, w, b, NULL, 0, s, NULL);
    case CONV16_GC: return o->gconv_forward(out, in, w, b, s, NULL);
    case CONV16_C1: return o->conv1x1_forward(h, out, in, w16, b, s, NULL);
    case CONV16_DC: return o->conv_direct_forward(out, in, w16, b, s, NULL);
    default: return o->conv_im2col_forward(h, out, in, w16, b, s, scr, NULL);
    }
}

static int conv16_bwd_data(const struct half *o, enum conv16_kind k, tb_cublas *h, void *din, const void *dout,
                           const float *w, const void *w16, const struct conv_shape *s, void *scr)
{
    switch (k) {
    case CONV16_DW: return o->dwconv_backward_data(din, dout, w, s, 1, NULL);
    case CONV16_GC: return o->gconv_backward_data(din, dout, w, s, 1, NULL);
    case CONV16_C1: return o->conv1x1_backward_data(h, din, dout, w16, s, 1);
    default: return o->conv_im2col_backward_data(h, din, dout, w16, s, 1, scr, NULL);
    }
}

static int conv16_bwd_params(const struct half *o, enum conv16_kind k, tb_cublas *h, float *dw, float *db,
                             const void *in, const void *dout, const struct conv_shape *s, void *scr)
{
    switch (k) {
    case CONV16_DW: return o->dwconv_backward_params(dw, db, in, dout, NULL, s, scr, NULL);
    case CONV16_GC: return o->gconv_backward_params(dw, db, in, dout, s, scr, NULL);
    case CONV16_C1: return o->conv1x1_backward_params(h, dw, db, in, dout, s, scr, NULL);
    case CONV16_DC: return o->conv_direct_backward_params(dw, db, in, dout, s, scr, NULL);
    default: return o->conv_im2col_backward_params(h, dw, db, in, dout, s, scr, NULL);
    }
}

static size_t conv16_scratch(enum conv16_kind k, const struct conv_shape *s)
{
    return k == CONV16_C1 ? tb_cuda_conv1x1_scratch_bytes(s)
           : k == CONV16_IC ? tb_cuda_conv_im2col_scratch_bytes(s)
           : k == CONV16_DC ? dc_scratch(s)
                            : tb_cuda_dwconv_scratch_bytes(s);
}

/* check_conv for a 2-byte launcher kind: forward (with bias), backward-data into a 2-byte gradient and
 * backward-params into fp32 ones (accumulating), against the CPU references on the rounded inputs (and
 * rounded weights for the kinds that read w16). */
static void check_conv16(const struct half *o, enum conv16_kind k, const struct conv_shape *s, tb_cublas *h,
                         uint64_t seed)
{
    size_t ni = in_n(s), no = out_n(s), nw = w_n(s), nb = (size_t)s->OC;
    float *x = rnd_h(o, ni, seed, -1.0f, 1.0f), *w = rnd(nw, seed + 1, -0.5f, 0.5f), *b = rnd(nb, seed + 2, -1, 1);
    float *g = rnd_h(o, no, seed + 3, -1.0f, 1.0f), *acci = rnd_h(o, ni, seed + 4, -1.0f, 1.0f);
    float *accw = rnd(nw, seed + 5, -1.0f, 1.0f), *accb = rnd(nb, seed + 6, -1.0f, 1.0f);
    float *wref = tu_fdup(w, nw);
    if (k == CONV16_C1 || k == CONV16_IC || k == CONV16_DC) o->round(wref, nw);
    void *dx = dev_h(o, x, ni), *dw16 = dev_h(o, w, nw), *dg = dev_h(o, g, no), *dy = dev_alloc(no * 2);
    void *ddi = dev_h(o, acci, ni), *scr = dev_alloc(conv16_scratch(k, s));
    float *dw = dev_dup(w, nw), *db = dev_dup(b, nb), *ddw = dev_dup(accw, nw), *ddb = dev_dup(accb, nb);
    char what[160];

    float *want = tu_fvec(no);
    conv_forward_ref(want, x, wref, b, s);
    OK(conv16_fwd(o, k, h, dy, dx, dw, dw16, db, s, scr));
    snprintf(what, sizeof what, "%s forward %dx%dx%dx%d k%d s%d g%d", conv16_name[k], s->N, s->H, s->W, s->C, s->KH,
             s->stride, s->groups);
    check_h(o, dy, want, no, what);
    free(want);

    float *wi = tu_fdup(acci, ni), *ww = tu_fdup(accw, nw), *wb = tu_fdup(accb, nb);
    conv_backward_data_ref(wi, g, wref, s);
    conv_backward_params_ref(ww, wb, x, g, s);
    OK(conv16_bwd_data(o, k, h, ddi, dg, dw, dw16, s, scr));
    OK(conv16_bwd_params(o, k, h, ddw, ddb, dx, dg, s, scr));
    snprintf(what, sizeof what, "%s backward", conv16_name[k]);
    check_h(o, ddi, wi, ni, what);
    check32_h(o, ddw, ww, nw, what);
    check32_h(o, ddb, wb, nb, what);
    free(wi), free(ww), free(wb);

    dev_free_all();
    free(x), free(w), free(b), free(g), free(acci), free(accw), free(accb), free(wref);
}

static void depthwise_h(const struct half *o)
{
    need_gpu();
    static const int cases[][6] = {{2, 9, 11, 19, 3, 1}, {2, 9, 11, 19, 3, 2}, {2, 13, 7, 37, 5, 1},
                                   {1, 13, 7, 37, 5, 2}, {2, 7, 9, 21, 7, 1},  {4, 24, 24, 40, 3, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct conv_shape s;
        cr_assert_eq(dwconv_shape_init(&s, c[0], c[1], c[2], c[3], c[4], c[5]), 0);
        check_conv16(o, CONV16_DW, &s, NULL, 600 + 10 * i);
    }
}
HALF_TESTS(depthwise)

/* The 2-byte depthwise forward with a BatchNorm+SiLU on load and a SiLU epilogue, and its weight gradient. */
static void depthwise_bn_input_h(const struct half *o)
{
    need_gpu();
    struct conv_shape s;
    cr_assert_eq(dwconv_shape_init(&s, 2, 10, 9, 24, 3, 2), 0);
    size_t ni = in_n(&s), no = out_n(&s), nw = w_n(&s), C = (size_t)s.C, M = ni / C;
    float *x = rnd_h(o, ni, 700, -1, 3), *w = rnd(nw, 701, -0.5f, 0.5f), *b = rnd(C, 702, -1, 1);
    float *gam = rnd(C, 703, 0.5f, 1.5f), *bet = rnd(C, 704, -0.5f, 0.5f), *save = tu_fvec(2 * C);
    float *y = tu_fvec(ni), *want = tu_fvec(no), *g = rnd_h(o, no, 705, -1, 1);
    bn_forward_train(y, save, NULL, NULL, x, gam, bet, M, s.C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT, NORM_ACT_SILU, 0,
                     1);
    dwconv_forward_ref(want, y, w, b, &s);
    silu_forward(want, want, no, 0, 1);
    void *dx = dev_h(o, x, ni), *dout = dev_alloc(no * 2), *dg = dev_h(o, g, no);
    float *dw = dev_dup(w, nw), *db = dev_dup(b, C);
    struct tb_cuda_bn_in bn = {dev_dup(save, 2 * C), dev_dup(gam, C), dev_dup(bet, C), 1};
    OK(o->dwconv_forward(dout, dx, dw, db, &bn, 1, &s, NULL));
    check_h(o, dout, want, no, "depthwise with BN+SiLU input and SiLU epilogue");

    float *ww = tu_fvec(nw), *ddw = dev_alloc(nw * 4);
    dwconv_backward_params_ref(ww, NULL, y, g, &s);
    void *scr = dev_alloc(tb_cuda_dwconv_scratch_bytes(&s));
    OK(o->dwconv_backward_params(ddw, NULL, dx, dg, &bn, &s, scr, NULL));
    check32_h(o, ddw, ww, nw, "depthwise weight gradient from the BN+SiLU input");
    dev_free_all();
    free(x), free(w), free(b), free(gam), free(bet), free(save), free(y), free(want), free(g), free(ww);
}
HALF_TESTS(depthwise_bn_input)

static void grouped_h(const struct half *o)
{
    need_gpu();
    static const int cases[][7] = {{2, 9, 11, 48, 48, 3, 1}, {1, 6, 7, 16, 48, 3, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct conv_shape s;
        cr_assert_eq(conv_shape_init(&s, c[0], c[1], c[2], c[3], c[4], c[5], c[5], c[6], c[3] / 16 > 1 ? c[3] / 16 : 2),
                     0);
        check_conv16(o, CONV16_GC, &s, NULL, 800 + 10 * i);
    }
}
HALF_TESTS(grouped)

static void conv1x1_h(const struct half *o)
{
    need_gpu();
    tb_cublas *h = blas_handle();
    /* N, H, W, C; OC below; the last with the split weight gradient, as in conv1x1. */
    static const int cases[][4] = {{2, 7, 9, 24}, {1, 5, 5, 96}, {3, 1, 1, 40}, {3, 53, 53, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *c = cases[i];
        struct conv_shape s;
        cr_assert_eq(conv_shape_init(&s, c[0], c[1], c[2], c[3], c[3] * 2 + 3, 1, 1, 1, 1), 0);
        check_conv16(o, CONV16_C1, &s, h, 900 + 10 * i);
    }
    tb_cublas_destroy(h);
}
HALF_TESTS(conv1x1)

static void stem_im2col_h(const struct half *o)
{
    need_gpu();
    tb_cublas *h = blas_handle();
    struct conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, 17, 15, 3, 32, 3, 3, 2, 1), 0);
    check_conv16(o, CONV16_IC, &s, h, 1000);
    tb_cublas_destroy(h);
}
HALF_TESTS(stem_im2col)

static void stem_direct_h(const struct half *o)
{
    need_gpu();
    tb_cublas *h = blas_handle();
    for (size_t i = 0; i < N_DC; i++) {
        const struct conv_shape s = dc_shape(i);
        check_conv16(o, CONV16_DC, &s, h, 1010 + 10 * i);
    }
    tb_cublas_destroy(h);
}
HALF_TESTS(stem_direct)

/* The input layer in 2 bytes: the general path (resampling, 1 → 3 channels, training crop/flip) against the fp32
 * launcher's values rounded once (the same fp32 arithmetic, then one rounding: bitwise), and the flat affine
 * path against the cpu's formula (input_grey: x·scale + shift). */
static void input_h(const struct half *o)
{
    need_gpu();
    const int N = 3, SH = 28, SW = 28, SC = 1;
    const size_t np = (size_t)N * SH * SW * SC;
    uint8_t *px = malloc(np);
    cr_assert_not_null(px);
    for (size_t i = 0; i < np; i++) px[i] = (uint8_t)(rng_uniform(77, 1, i) * 256.0f);
    uint8_t *dpx = dev_alloc(np);
    CU(cudaMemcpy(dpx, px, np, cudaMemcpyHostToDevice));
    struct tb_cuda_input a = {.SH = SH, .SW = SW, .SC = SC, .H = 32, .W = 32, .C = 3, .augment = 1, .pad = 4,
                              .flip = 1, .seed = 5, .step = 3, .g0 = 11};
    for (int c = 0; c < 3; c++) a.scale[c] = 1.0f / (255.0f * (0.2f + 0.01f * c)), a.shift[c] = -0.4f - 0.05f * c;
    const size_t no = (size_t)N * 32 * 32 * 3;
    float *d32 = dev_alloc(no * 4), *want = tu_fvec(no), *got = tu_fvec(no);
    void *d16 = dev_alloc(no * 2);
    OK(tb_cuda_input_forward(d32, dpx, N, &a, NULL));
    OK(o->input_forward(d16, dpx, N, &a, NULL));
    dev_get(want, d32, no);
    o->round(want, no);
    dev_get_h(o, got, d16, no);
    tu_assert_bitwise(got, want, no, hmsg(o, "input vs the fp32 launcher rounded"));

    const float scale[4] = {1.0f / 255.0f, 0, 0, 0}, shift[4] = {-0.5f, 0, 0, 0};
    o->input_affine(d16, dpx, np, 1, scale, shift, NULL);
    CU(cudaGetLastError());
    for (size_t i = 0; i < np; i++) want[i] = (float)px[i] * scale[0] + shift[0];
    check_h(o, d16, want, np, "input affine");
    dev_free_all();
    free(px), free(want), free(got);
}
HALF_TESTS(input)

/* The dense chain's 2-byte kernels (ops_dense.h): bias + ReLU after a GEMM, the ReLU mask, forward and backward,
 * the bias gradient, the softmax cross-entropy's 2-byte gradient against op_loss.c (at the 1/N of a plain step
 * and at a loss scale's 1024/N), and the weights' 2-byte copy (bitwise the host's rounding, fp16's overflow to
 * ±inf and its subnormals included). */
static void dense_chain_h(const struct half *o)
{
    need_gpu();
    const int N = 13, OUT = 37, K = 10;
    const size_t n = (size_t)N * OUT;
    float *y = rnd_h(o, n, 1100, -2.0f, 2.0f), *b = rnd((size_t)OUT, 1101, -1.0f, 1.0f), *g = rnd_h(o, n, 1102, -1, 1);
    float *acc0 = rnd_h(o, n, 1103, -1.0f, 1.0f), *want = tu_fvec(n), *got = tu_fvec(n);
    float *db = dev_dup(b, (size_t)OUT);
    void *dy = dev_h(o, y, n), *dg = dev_h(o, g, n), *dd = dev_h(o, acc0, n);
    for (int relu = 0; relu <= 1; relu++) { /* y += b, then max(0,·) */
        CU(cudaMemcpy(dy, dev_h(o, y, n), n * 2, cudaMemcpyDeviceToDevice));
        o->bias_act(dy, db, N, OUT, relu, NULL);
        CU(cudaGetLastError());
        for (size_t i = 0; i < n; i++) {
            const float v = y[i] + b[i % OUT];
            want[i] = relu && v < 0.0f ? 0.0f : v;
        }
        check_h(o, dy, want, n, relu ? "bias + ReLU" : "bias");
    }
    float *yr = tu_fvec(n); /* the ReLU layer's output from y */
    relu_forward(yr, y, n, 0, 1);
    o->relu_forward(dy, dev_h(o, y, n), n, NULL);
    CU(cudaGetLastError());
    check_h(o, dy, yr, n, "ReLU forward");
    memcpy(want, acc0, n * sizeof *want);
    relu_backward(want, g, yr, n, 0, 1);
    o->relu_backward(dd, dg, dy, n, NULL);
    CU(cudaGetLastError());
    check_h(o, dd, want, n, "ReLU backward");
    for (size_t i = 0; i < n; i++) want[i] = yr[i] > 0.0f ? g[i] : 0.0f;
    o->relu_mask(dg, dy, n, NULL);
    CU(cudaGetLastError());
    check_h(o, dg, want, n, "ReLU mask");
    float *dbw = tu_fdup(b, (size_t)OUT), *ddb = dev_dup(b, (size_t)OUT);
    for (int i = 0; i < N; i++)
        for (int o_ = 0; o_ < OUT; o_++) dbw[o_] += want[(size_t)i * OUT + o_];
    o->bias_grad(ddb, dg, N, OUT, NULL);
    CU(cudaGetLastError());
    check32_h(o, ddb, dbw, (size_t)OUT, "bias gradient");

    /* softmax cross-entropy: fp32 logits, a 2-byte gradient (the cpu adds into zeros; the device writes) */
    float *z = rnd((size_t)N * K, 1104, -4.0f, 4.0f), *loss = tu_fvec(N), *dz = tu_fvec((size_t)N * K);
    int32_t lab[13];
    for (int i = 0; i < N; i++) lab[i] = (int32_t)((i * 7) % K);
    const struct softmax_ce_shape ss = {.N = N, .K = K, .smoothing = 0.1f};
    uint8_t cor[13], dcor_h[13];
    float *dzl = dev_dup(z, (size_t)N * K), *dloss = dev_alloc((size_t)N * 4);
    int32_t *dlab = dev_alloc(sizeof lab);
    uint8_t *dcor = dev_alloc((size_t)N);
    void *ddz = dev_alloc((size_t)N * K * 2);
    CU(cudaMemcpy(dlab, lab, sizeof lab, cudaMemcpyHostToDevice));
    for (int scaled = 0; scaled <= 1; scaled++) { /* scale: 1/N, and 1024/N (a loss scale over the batch) */
        const float scale = (scaled ? 1024.0f : 1.0f) / N;
        memset(dz, 0, (size_t)N * K * sizeof *dz);
        softmax_ce_forward_backward(loss, dz, cor, z, lab, scale, &ss, 0, 1);
        o->softmax_ce(dloss, ddz, dcor, dzl, dlab, scale, N, K, 0.1f, NULL);
        CU(cudaGetLastError());
        check(dloss, loss, (size_t)N, RTOL, hmsg(o, "softmax CE loss (fp32 logits)"));
        check_h(o, ddz, dz, (size_t)N * K, scaled ? "softmax CE gradient, loss-scaled" : "softmax CE gradient");
        CU(cudaMemcpy(dcor_h, dcor, (size_t)N, cudaMemcpyDeviceToHost));
        cr_assert(memcmp(dcor_h, cor, (size_t)N) == 0, "softmax CE correct flags (%s)", o->name);
    }

    /* the weights' 2-byte copy: rounding to nearest even, bitwise the host's; the first few past fp16's range
     * (±inf there, never the largest finite), at its top and in its subnormals */
    float *wts = rnd(n, 1105, -3.0f, 3.0f);
    static const float edge[] = {65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e30f, 3e-5f, 6e-8f, 2.9e-8f, -0.0f};
    memcpy(wts, edge, sizeof edge);
    float *dwts = dev_dup(wts, n);
    void *dw16 = dev_alloc(n * 2);
    o->to(dw16, dwts, n, NULL);
    CU(cudaGetLastError());
    dev_get_h(o, got, dw16, n);
    o->round(wts, n);
    tu_assert_bitwise(got, wts, n, hmsg(o, "weight copy"));

    dev_free_all();
    free(y), free(b), free(g), free(acc0), free(want), free(got), free(yr), free(dbw), free(z), free(loss), free(dz);
    free(wts);
}
HALF_TESTS(dense_chain)

#endif
