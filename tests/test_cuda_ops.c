/* test_cuda_ops.c — the CUDA EfficientNet kernels (cuda/ops_*.cu) against the CPU kernels and their
 * references on small random shapes: every launcher's forward and backward, fp32 within 1e-4 relative
 * (normwise floor 1e-5 for elements near zero), bf16 storage within 1e-2; dropout and drop-connect masks
 * equal to the CPU's element for element.
 *
 * Built in every configuration (tests/test_*.c are globbed); without TB_HAVE_CUDA, or on a machine with
 * no CUDA device, each test is skipped with the reason, never passed.
 */
#include "test_util.h"

#include <criterion/criterion.h>

#define GPU_TESTS(X) X(activations) X(dropout_masks) X(pool_and_se) X(batchnorm) X(groupnorm) \
    X(depthwise) X(depthwise_bn_input) X(grouped) X(conv1x1) X(stem_im2col)

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
#include "op_norm.h"
#include "op_pool.h"
#include "op_se.h"
#include "ops_effnet.h"

#include <cuda_runtime_api.h>

#define RTOL 1e-4
#define ATOL 1e-5
#define BF16_TOL 1e-2

/* bf16 bits of f, rounded to nearest even (finite inputs), and back: cuda_bf16.h's helpers are C++ only. */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

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
static void *live[64];
static int n_live;

static void *dev_alloc(size_t bytes)
{
    void *d = NULL;
    CU(cudaMalloc(&d, bytes ? bytes : 1));
    CU(cudaMemset(d, 0, bytes ? bytes : 1));
    cr_assert_lt(n_live, 64);
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

    /* bf16 storage: the CPU's SiLU of the bf16-rounded inputs, within bf16's 8-bit precision */
    uint16_t *hb = malloc(n * sizeof *hb), *hy = malloc(n * sizeof *hy);
    cr_assert(hb && hy);
    float *xr = tu_fvec(n), *got = tu_fvec(n);
    for (size_t i = 0; i < n; i++) {
        hb[i] = to_bf16(x[i]);
        xr[i] = from_bf16(hb[i]);
    }
    void *db = dev_alloc(n * 2), *dyb = dev_alloc(n * 2);
    CU(cudaMemcpy(db, hb, n * 2, cudaMemcpyHostToDevice));
    OK(tb_cuda_silu_forward_bf16(dyb, db, n, NULL));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(hy, dyb, n * 2, cudaMemcpyDeviceToHost));
    silu_forward(want, xr, n, 0, 1);
    for (size_t i = 0; i < n; i++) got[i] = from_bf16(hy[i]);
    tu_assert_close_f(got, want, n, BF16_TOL, ATOL, "silu bf16");

    /* bf16 backward (overwriting: acc 0) from bf16 dout, and the bf16 residual add */
    uint16_t *hg = malloc(n * sizeof *hg);
    cr_assert(hg);
    float *gr = tu_fvec(n);
    for (size_t i = 0; i < n; i++) {
        hg[i] = to_bf16(g[i]);
        gr[i] = from_bf16(hg[i]);
    }
    void *dgb = dev_alloc(n * 2);
    CU(cudaMemcpy(dgb, hg, n * 2, cudaMemcpyHostToDevice));
    OK(tb_cuda_silu_backward_bf16(dyb, dgb, db, n, 0, NULL));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(hy, dyb, n * 2, cudaMemcpyDeviceToHost));
    memset(want, 0, n * sizeof *want);
    silu_backward(want, gr, xr, n, 0, 1);
    for (size_t i = 0; i < n; i++) got[i] = from_bf16(hy[i]);
    tu_assert_close_f(got, want, n, BF16_TOL, ATOL, "silu backward bf16");
    OK(tb_cuda_add_forward_bf16(dyb, db, dgb, n, NULL));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(hy, dyb, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        want[i] = xr[i] + gr[i];
        got[i] = from_bf16(hy[i]);
    }
    tu_assert_close_f(got, want, n, BF16_TOL, ATOL, "add bf16");
    free(hb), free(hy), free(hg), free(xr), free(gr), free(got);

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
    const size_t D = 1003, n = (size_t)N * D;
    const uint64_t g0 = 37;
    struct dropout_args a = {.seed = 1234, .step = 9, .layer = 17, .p = 0.3f};
    struct tb_cuda_drop b = {.seed = a.seed, .step = a.step, .layer = a.layer, .p = a.p};
    float *x = rnd(n, 4, 0.5f, 1.5f), *s = rnd(n, 5, 0.5f, 1.5f), *want = tu_fvec(n);
    float *dx = dev_dup(x, n), *ds = dev_dup(s, n), *dy = dev_alloc(n * 4);

    dropout_forward(want, x, N, D, g0, &a, 0, 1);
    OK(tb_cuda_dropout_forward(dy, dx, N, D, g0, &b, NULL));
    check_mask(dy, want, n, "dropout");
    memset(want, 0, n * sizeof *want);
    dropout_backward(want, x, N, D, g0, &a, 0, 1);
    CU(cudaMemset(dy, 0, n * 4));
    OK(tb_cuda_dropout_backward(dy, dx, N, D, g0, &b, NULL));
    check_mask(dy, want, n, "dropout backward");

    a.p = b.p = 0.5f; /* with N = 7 samples some branches are dropped and some kept */
    dropconnect_forward(want, x, N, D, g0, &a, 0, 1);
    OK(tb_cuda_dropconnect_add_forward(dy, NULL, dx, N, D, g0, &b, NULL));
    check_mask(dy, want, n, "drop-connect");
    memset(want, 0, n * sizeof *want);
    dropconnect_backward(want, x, N, D, g0, &a, 0, 1);
    CU(cudaMemset(dy, 0, n * 4));
    OK(tb_cuda_dropconnect_backward(dy, dx, N, D, g0, &b, NULL));
    check_mask(dy, want, n, "drop-connect backward");
    dropconnect_add_forward(want, s, x, N, D, g0, &a, 0, 1);
    OK(tb_cuda_dropconnect_add_forward(dy, ds, dx, N, D, g0, &b, NULL));
    check(dy, want, n, 1e-6, "drop-connect add");

    a.p = b.p = 0.0f; /* the identity */
    OK(tb_cuda_dropout_forward(dy, dx, N, D, g0, &b, NULL));
    check(dy, x, n, 0.0, "dropout p = 0");

    dev_free_all();
    free(x), free(s), free(want);
}

Test(cuda_ops, pool_and_se)
{
    need_gpu();
    const int N = 3, C = 45;
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

    dev_free_all();
    free(x), free(g), free(sc), free(gp), free(acc0), free(accs), free(want), free(wants);
}

Test(cuda_ops, batchnorm)
{
    need_gpu();
    const int C = 37;
    const size_t M = 3 * 23 * 17, n = M * C; /* 3 row chunks of the GPU's 512, 10 of the CPU's */
    float *x = rnd(n, 13, -1.0f, 3.0f), *g = rnd(n, 14, -1.0f, 1.0f), *gam = rnd((size_t)C, 15, 0.5f, 1.5f);
    float *bet = rnd((size_t)C, 16, -0.5f, 0.5f), *rm0 = rnd((size_t)C, 17, -0.1f, 0.1f);
    float *rv0 = rnd((size_t)C, 18, 0.9f, 1.1f), *acc0 = rnd(n, 19, -1.0f, 1.0f);
    float *dx = dev_dup(x, n), *dg = dev_dup(g, n), *dgam = dev_dup(gam, (size_t)C), *dbet = dev_dup(bet, (size_t)C);
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
        free(want), free(save), free(rm), free(rv), free(dwant), free(dgw), free(dbw), free(gcopy);
    }
    dev_free_all();
    free(x), free(g), free(gam), free(bet), free(rm0), free(rv0), free(acc0);
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

static const struct conv_impl DW = {"depthwise", dw_fwd, dw_bwd_data, dw_bwd_params, tb_cuda_dwconv_scratch_bytes};
static const struct conv_impl GC = {"grouped", gc_fwd, gc_bwd_data, gc_bwd_params, tb_cuda_dwconv_scratch_bytes};
static const struct conv_impl C1 = {"conv1x1", c1_fwd, c1_bwd_data, c1_bwd_params, tb_cuda_conv1x1_scratch_bytes};
static const struct conv_impl IC = {"im2col", ic_fwd, ic_bwd_data, ic_bwd_params, tb_cuda_conv_im2col_scratch_bytes};

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
    static const int cases[][4] = {{2, 7, 9, 24}, {1, 5, 5, 96}, {3, 1, 1, 40}}; /* N, H, W, C; OC below */
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

#endif
