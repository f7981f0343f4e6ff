/* test_op_act.c — the elementwise and small EfficientNet kernels: act_expf accuracy and limits;
 * SiLU, sigmoid, ReLU; global average pool; SE channel scale; dropout and drop-connect.
 *
 * Each kernel is held against its double reference, its backward against central differences in
 * double (through the reference forward), the accumulate contract (two calls give 2×), and thread
 * partitions (nth ∈ {1,2,3,7}, slices run one after another, bitwise equal to nth = 1). Dropout
 * masks are checked to be pure functions of (seed, step, layer, global sample, element): the same
 * whether a batch is processed at once or in pieces, and recomputed identically by backward.
 */
#include "test_util.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_act.h"
#include "op_dropout.h"
#include "op_pool.h"
#include "op_se.h"
#include "rng.h"

static void fill(float *p, size_t n, uint64_t seed, float mean, float sd)
{
    for (size_t i = 0; i < n; i++) p[i] = mean + sd * (float)rng_normal(seed, 99, i);
}

/* Position of a float on the ordered integer line, for ulp distances across signs. */
static int64_t float_ord(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

/* ------------------------------------------------------------------------------------------------
 * act_expf
 */
TestSuite(expf);

Test(expf, within_2ulp_of_libm_on_normal_range)
{
    /* A dense sweep of [-87.3, 88.72] (normal results) plus every 8th float of [-1, 1]. */
    const int n = 2000003;
    int64_t worst = 0;
    float worst_x = 0.0f;
    for (int i = 0; i <= n; i++) {
        float x = -87.3f + (88.72f + 87.3f) * (float)i / (float)n;
        int64_t d = llabs(float_ord(act_expf(x)) - float_ord(expf(x)));
        if (d > worst) worst = d, worst_x = x;
        /* against the exact value: |err| ≤ 2 ulp of the true result */
        double e = exp((double)x), ulp = ldexp(1.0, ilogb(e) - 23);
        cr_assert(fabs((double)act_expf(x) - e) <= 2.0 * ulp, "act_expf(%a) = %a, exp = %a", (double)x,
                  (double)act_expf(x), e);
    }
    for (uint32_t b = 0; b < 0x3f800000u; b += 8) {
        float x;
        memcpy(&x, &b, sizeof x);
        for (int s = 0; s < 2; s++, x = -x) {
            int64_t d = llabs(float_ord(act_expf(x)) - float_ord(expf(x)));
            if (d > worst) worst = d, worst_x = x;
        }
    }
    cr_assert(worst <= 2, "max %lld ulp from expf at x = %a", (long long)worst, (double)worst_x);
}

Test(expf, limits_without_nan)
{
    const float big[] = {88.73f, 89.0f, 100.0f, 104.0f, 1e4f, 1e30f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        cr_assert(isinf(act_expf(big[i])) && act_expf(big[i]) > 0, "exp(%g) = %g", (double)big[i],
                  (double)act_expf(big[i]));
        cr_assert(act_expf(-big[i]) == 0.0f || big[i] < 104.0f, "exp(%g) = %g", (double)-big[i],
                  (double)act_expf(-big[i]));
    }
    cr_assert(act_expf(88.72f) == expf(88.72f)); /* largest finite results stay finite */
    cr_assert(isfinite(act_expf(88.7228f)));
    /* subnormal results: within 2 of the smallest subnormal */
    for (float x = -87.4f; x > -103.5f; x -= 0.37f)
        cr_assert(fabs((double)act_expf(x) - exp((double)x)) <= 2.0 * 0x1p-149, "exp(%g)", (double)x);
    cr_assert(act_expf(-105.0f) == 0.0f && act_expf(-INFINITY) == 0.0f);
    cr_assert(isnan(act_expf(NAN)));
    cr_assert(act_expf(0.0f) == 1.0f && act_expf(-0.0f) == 1.0f);
}

/* The vectorised kernels (the loops in op_act.c) over extreme inputs: finite, correctly saturated, and
 * their backward equal to the exact derivative within the forward's tolerance (a NaN or an infinity
 * fails the comparison). */
Test(expf, kernels_saturate_without_nan)
{
    const float xs[] = {-FLT_MAX, -1e30f, -1e4f, -104.0f, -100.0f, -88.8f, -88.0f, -20.0f, -1e-30f, 0.0f,
                        1e-30f, 20.0f, 88.0f, 88.8f, 100.0f, 104.0f, 1e4f, 1e30f, FLT_MAX};
    enum { K = sizeof xs / sizeof xs[0], R = 5 };
    float x[K * R], s[K * R], y[K * R], ds[K * R], dy[K * R], one[K * R];
    for (int i = 0; i < K * R; i++) x[i] = xs[i % K], one[i] = 1.0f, ds[i] = dy[i] = 0.0f;
    sigmoid_forward(s, x, K * R, 0, 1);
    silu_forward(y, x, K * R, 0, 1);
    sigmoid_backward(ds, one, s, K * R, 0, 1);
    silu_backward(dy, one, x, K * R, 0, 1);
    for (int i = 0; i < K * R; i++) {
        double xd = x[i], sd = 1.0 / (1.0 + exp(-xd));
        cr_assert(s[i] >= 0.0f && s[i] <= 1.0f, "sigmoid(%g) = %g", xd, (double)s[i]);
        cr_assert(fabs(s[i] - sd) <= 1e-6 * sd + 1e-38, "sigmoid(%g) = %g want %g", xd, (double)s[i], sd);
        cr_assert(isfinite(y[i]), "silu(%g) = %g", xd, (double)y[i]);
        /* below x ≈ -88.7, e^-x overflows and silu flushes to -0 instead of ~-1e-37 */
        cr_assert(fabs(y[i] - xd * sd) <= 1e-6 * fabs(xd * sd) + 1e-30, "silu(%g) = %g", xd, (double)y[i]);
        cr_assert(isfinite(ds[i]) && isfinite(dy[i]), "backward at %g: %g %g", xd, (double)ds[i], (double)dy[i]);
        /* sigmoid' from the saved output s, as the backward takes it: s(1−s), only the product rounded */
        const double dsd = (double)s[i] * (1.0 - (double)s[i]);
        cr_assert(fabs(ds[i] - dsd) <= 1e-6 * dsd + 1e-38, "sigmoid'(%g) = %g want %g", xd, (double)ds[i], dsd);
        /* SiLU' = s(1 + x(1−s)) in double, 1−s as σ(−x) so it keeps its digits at large x; silu's
         * own flush to 0 below x ≈ -88.7 (where the exact value is ~-1e-37) within the same 1e-30 */
        const double dyd = sd * (1.0 + xd * (1.0 / (1.0 + exp(xd))));
        cr_assert(fabs(dy[i] - dyd) <= 1e-6 * fabs(dyd) + 1e-30, "silu'(%g) = %g want %g", xd, (double)dy[i],
                  dyd);
    }
    float inf[2] = {INFINITY, -INFINITY}, si[2];
    sigmoid_forward(si, inf, 2, 0, 1);
    cr_assert(si[0] == 1.0f && si[1] == 0.0f);
}

/* ------------------------------------------------------------------------------------------------
 * SiLU, sigmoid, ReLU
 */
TestSuite(act);

enum { ACT_SILU_K, ACT_SIGMOID_K, ACT_RELU_K, ACT_NK };
static const char *const ACT_NAMES[] = {"silu", "sigmoid", "relu"};

static void act_fwd(int k, float *out, const float *inp, size_t n, int ith, int nth)
{
    if (k == ACT_SILU_K) silu_forward(out, inp, n, ith, nth);
    if (k == ACT_SIGMOID_K) sigmoid_forward(out, inp, n, ith, nth);
    if (k == ACT_RELU_K) relu_forward(out, inp, n, ith, nth);
}

/* Backward from the saved tensor each op keeps: SiLU its input, sigmoid its output, ReLU either. */
static void act_bwd(int k, float *dinp, const float *dout, const float *inp, const float *out, size_t n, int ith,
                    int nth)
{
    if (k == ACT_SILU_K) silu_backward(dinp, dout, inp, n, ith, nth);
    if (k == ACT_SIGMOID_K) sigmoid_backward(dinp, dout, out, n, ith, nth);
    if (k == ACT_RELU_K) relu_backward(dinp, dout, (ith & 1) ? out : inp, n, ith, nth);
}

static void act_fwd_ref(int k, double *out, const double *inp, size_t n)
{
    if (k == ACT_SILU_K) silu_forward_ref(out, inp, n);
    if (k == ACT_SIGMOID_K) sigmoid_forward_ref(out, inp, n);
    if (k == ACT_RELU_K) relu_forward_ref(out, inp, n);
}

/* Inputs ~N(0,3), kept at least 0.01 from 0 so ReLU's kink stays outside the FD step. */
static float *act_inputs(size_t n, uint64_t seed)
{
    float *x = tu_fvec(n);
    fill(x, n, seed, 0.0f, 3.0f);
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) < 0.01f) x[i] = x[i] < 0 ? -0.01f - x[i] : 0.01f + x[i];
    return x;
}

struct act_fd {
    int k;
    size_t n;
    double *x, *w, *y;
};

static double act_fd_loss(void *p)
{
    struct act_fd *f = p;
    act_fwd_ref(f->k, f->y, f->x, f->n);
    double l = 0.0;
    for (size_t i = 0; i < f->n; i++) l += f->w[i] * f->y[i];
    return l;
}

Test(act, forward_backward_match_ref_and_finite_differences)
{
    const size_t n = 1001;
    for (int k = 0; k < ACT_NK; k++) {
        float *x = act_inputs(n, 10 + (uint64_t)k), *y = tu_fvec(n), *dy = tu_fvec(n), *dx = tu_fvec(n);
        fill(dy, n, 20 + (uint64_t)k, 0.0f, 1.0f);
        act_fwd(k, y, x, n, 0, 1);
        act_bwd(k, dx, dy, x, y, n, 0, 1);
        struct act_fd f = {k, n, tu_to_d(x, n), tu_to_d(dy, n), tu_dvec(n)};
        act_fd_loss(&f);
        char what[64];
        snprintf(what, sizeof what, "%s forward", ACT_NAMES[k]);
        tu_assert_close(y, f.y, n, 1e-6, 1e-7, what);
        double *dref = tu_dvec(n), *g = tu_dvec(n);
        if (k == ACT_SILU_K) silu_backward_ref(dref, f.w, f.x, n);
        double *yd = tu_to_d(y, n); /* sigmoid's backward works from the (float) output it is given */
        if (k == ACT_SIGMOID_K) sigmoid_backward_ref(dref, f.w, yd, n);
        free(yd);
        if (k == ACT_RELU_K) relu_backward_ref(dref, f.w, f.x, n);
        snprintf(what, sizeof what, "%s backward vs ref", ACT_NAMES[k]);
        tu_assert_close(dx, dref, n, 1e-5, 1e-7, what);
        tu_fd_grad(g, f.x, n, act_fd_loss, &f, 1e-5);
        snprintf(what, sizeof what, "%s backward vs fd", ACT_NAMES[k]);
        tu_assert_close(dx, g, n, 1e-4, 1e-6, what);
        free(x), free(y), free(dy), free(dx), free(f.x), free(f.w), free(f.y), free(dref), free(g);
    }
}

Test(act, backward_accumulates)
{
    const size_t n = 333;
    for (int k = 0; k < ACT_NK; k++) {
        float *x = act_inputs(n, 30), *y = tu_fvec(n), *dy = tu_fvec(n), *g = tu_fvec(n), *g2 = tu_fvec(n);
        fill(dy, n, 31, 0.0f, 1.0f);
        act_fwd(k, y, x, n, 0, 1);
        act_bwd(k, g, dy, x, y, n, 0, 1);
        act_bwd(k, g2, dy, x, y, n, 0, 1);
        act_bwd(k, g2, dy, x, y, n, 0, 1);
        for (size_t i = 0; i < n; i++) cr_assert(g2[i] == 2.0f * g[i], "%s dinp[%zu] not doubled", ACT_NAMES[k], i);
        free(x), free(y), free(dy), free(g), free(g2);
    }
}

Test(act, partition_bitwise_and_in_place)
{
    const size_t n = 1001;
    for (int k = 0; k < ACT_NK; k++) {
        float *x = act_inputs(n, 40), *dy = tu_fvec(n), *y1 = tu_fvec(n), *g1 = tu_fvec(n);
        fill(dy, n, 41, 0.0f, 1.0f);
        act_fwd(k, y1, x, n, 0, 1);
        act_bwd(k, g1, dy, x, y1, n, 0, 1);
        for (int q = 1; q < TU_N_NTHS; q++) {
            float *y = tu_fvec(n), *g = tu_fvec(n);
            for (int i = 0; i < TU_NTHS[q]; i++) act_fwd(k, y, x, n, i, TU_NTHS[q]);
            for (int i = 0; i < TU_NTHS[q]; i++) act_bwd(k, g, dy, x, y1, n, i, TU_NTHS[q]);
            tu_assert_bitwise(y, y1, n, ACT_NAMES[k]);
            tu_assert_bitwise(g, g1, n, ACT_NAMES[k]);
            free(y), free(g);
        }
        float *z = tu_fvec(n);
        memcpy(z, x, n * sizeof *z);
        act_fwd(k, z, z, n, 0, 1);
        tu_assert_bitwise(z, y1, n, "in place");
        free(x), free(dy), free(y1), free(g1), free(z);
    }
}

/* ------------------------------------------------------------------------------------------------
 * Global average pool
 */
TestSuite(pool);

struct pool_fd {
    int N, C;
    size_t HW;
    double *x, *w, *y;
};

static double pool_fd_loss(void *p)
{
    struct pool_fd *f = p;
    global_avgpool_forward_ref(f->y, f->x, f->N, f->HW, f->C);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)f->N * (size_t)f->C; i++) l += f->w[i] * f->y[i];
    return l;
}

static const int POOL_CASES[][3] = {{3, 35, 13}, {2, 9, 300}, {1, 1, 5}};

Test(pool, matches_ref_finite_differences_accumulate_partition)
{
    for (int ci = 0; ci < 3; ci++) {
        int N = POOL_CASES[ci][0], C = POOL_CASES[ci][2];
        size_t HW = (size_t)POOL_CASES[ci][1], nx = (size_t)N * HW * (size_t)C, ny = (size_t)N * (size_t)C;
        float *x = tu_fvec(nx), *y = tu_fvec(ny), *dy = tu_fvec(ny), *dx = tu_fvec(nx), *dx2 = tu_fvec(nx);
        fill(x, nx, 50 + (uint64_t)ci, 0.5f, 2.0f);
        fill(dy, ny, 60 + (uint64_t)ci, 0.0f, 1.0f);
        global_avgpool_forward(y, x, N, HW, C, 0, 1);
        global_avgpool_backward(dx, dy, N, HW, C, 0, 1);
        struct pool_fd f = {N, C, HW, tu_to_d(x, nx), tu_to_d(dy, ny), tu_dvec(ny)};
        pool_fd_loss(&f);
        tu_assert_close(y, f.y, ny, 1e-6, 1e-7, "pool forward");
        double *dref = tu_dvec(nx), *g = tu_dvec(nx);
        global_avgpool_backward_ref(dref, f.w, N, HW, C);
        tu_assert_close(dx, dref, nx, 1e-6, 1e-7, "pool backward vs ref");
        tu_fd_grad(g, f.x, nx, pool_fd_loss, &f, 1e-5);
        tu_assert_close(dx, g, nx, 1e-4, 1e-6, "pool backward vs fd");
        global_avgpool_backward(dx2, dy, N, HW, C, 0, 1);
        global_avgpool_backward(dx2, dy, N, HW, C, 0, 1);
        for (size_t i = 0; i < nx; i++) cr_assert(dx2[i] == 2.0f * dx[i], "pool dinp[%zu] not doubled", i);
        for (int q = 1; q < TU_N_NTHS; q++) {
            float *yq = tu_fvec(ny), *dxq = tu_fvec(nx);
            for (int i = 0; i < TU_NTHS[q]; i++) global_avgpool_forward(yq, x, N, HW, C, i, TU_NTHS[q]);
            for (int i = 0; i < TU_NTHS[q]; i++) global_avgpool_backward(dxq, dy, N, HW, C, i, TU_NTHS[q]);
            tu_assert_bitwise(yq, y, ny, "pool forward partition");
            tu_assert_bitwise(dxq, dx, nx, "pool backward partition");
            free(yq), free(dxq);
        }
        free(x), free(y), free(dy), free(dx), free(dx2), free(f.x), free(f.w), free(f.y), free(dref), free(g);
    }
}

/* ------------------------------------------------------------------------------------------------
 * SE channel scale
 */
TestSuite(se);

struct se_fd {
    int N, C;
    size_t HW;
    double *x, *s, *w, *y;
};

static double se_fd_loss(void *p)
{
    struct se_fd *f = p;
    se_scale_forward_ref(f->y, f->x, f->s, f->N, f->HW, f->C);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)f->N * f->HW * (size_t)f->C; i++) l += f->w[i] * f->y[i];
    return l;
}

Test(se, matches_ref_finite_differences_accumulate_partition)
{
    for (int ci = 0; ci < 3; ci++) {
        int N = POOL_CASES[ci][0], C = POOL_CASES[ci][2];
        size_t HW = (size_t)POOL_CASES[ci][1], nx = (size_t)N * HW * (size_t)C, ns = (size_t)N * (size_t)C;
        float *x = tu_fvec(nx), *s = tu_fvec(ns), *y = tu_fvec(nx), *dy = tu_fvec(nx), *dx = tu_fvec(nx), *ds = tu_fvec(ns);
        fill(x, nx, 70 + (uint64_t)ci, 0.2f, 1.5f);
        for (size_t i = 0; i < ns; i++) s[i] = 1.0f / (1.0f + expf(-(float)rng_normal(71, 99, i)));
        fill(dy, nx, 72 + (uint64_t)ci, 0.0f, 1.0f);
        se_scale_forward(y, x, s, N, HW, C, 0, 1);
        se_scale_backward(dx, ds, dy, x, s, N, HW, C, 1, 0, 1);
        struct se_fd f = {N, C, HW, tu_to_d(x, nx), tu_to_d(s, ns), tu_to_d(dy, nx), tu_dvec(nx)};
        se_fd_loss(&f);
        tu_assert_close(y, f.y, nx, 1e-6, 1e-7, "se forward");
        double *rdx = tu_dvec(nx), *rds = tu_dvec(ns), *gx = tu_dvec(nx), *gs = tu_dvec(ns);
        se_scale_backward_ref(rdx, rds, f.w, f.x, f.s, N, HW, C);
        tu_assert_close(dx, rdx, nx, 1e-6, 1e-7, "se dinp vs ref");
        tu_assert_close(ds, rds, ns, 1e-5, 1e-6, "se dscale vs ref");
        tu_fd_grad(gx, f.x, nx, se_fd_loss, &f, 1e-5);
        tu_fd_grad(gs, f.s, ns, se_fd_loss, &f, 1e-5);
        tu_assert_close(dx, gx, nx, 1e-4, 1e-6, "se dinp vs fd");
        tu_assert_close(ds, gs, ns, 1e-4, 1e-6, "se dscale vs fd");
        /* accumulate: two calls from zero give 2×; NULL skips an output */
        float *dx2 = tu_fvec(nx), *ds2 = tu_fvec(ns);
        se_scale_backward(dx2, ds2, dy, x, s, N, HW, C, 1, 0, 1);
        se_scale_backward(dx2, NULL, dy, x, s, N, HW, C, 1, 0, 1);
        se_scale_backward(NULL, ds2, dy, x, s, N, HW, C, 1, 0, 1);
        for (size_t i = 0; i < nx; i++) cr_assert(dx2[i] == 2.0f * dx[i], "se dinp[%zu] not doubled", i);
        for (size_t i = 0; i < ns; i++) cr_assert(ds2[i] == 2.0f * ds[i], "se dscale[%zu] not doubled", i);
        /* acc = 0 overwrites dinp (NaN-filled start) with what accumulating onto zeros gives */
        float *dx3 = tu_fvec(nx);
        memset(dx3, 0xFF, nx * sizeof(float));
        se_scale_backward(dx3, NULL, dy, x, s, N, HW, C, 0, 0, 1);
        tu_assert_bitwise(dx3, dx, nx, "se dinp overwrite");
        free(dx3);
        for (int q = 1; q < TU_N_NTHS; q++) {
            float *yq = tu_fvec(nx), *dxq = tu_fvec(nx), *dsq = tu_fvec(ns);
            for (int i = 0; i < TU_NTHS[q]; i++) se_scale_forward(yq, x, s, N, HW, C, i, TU_NTHS[q]);
            for (int i = 0; i < TU_NTHS[q]; i++) se_scale_backward(dxq, dsq, dy, x, s, N, HW, C, 1, i, TU_NTHS[q]);
            tu_assert_bitwise(yq, y, nx, "se forward partition");
            tu_assert_bitwise(dxq, dx, nx, "se dinp partition");
            tu_assert_bitwise(dsq, ds, ns, "se dscale partition");
            free(yq), free(dxq), free(dsq);
        }
        free(x), free(s), free(y), free(dy), free(dx), free(ds), free(dx2), free(ds2);
        free(f.x), free(f.s), free(f.w), free(f.y), free(rdx), free(rds), free(gx), free(gs);
    }
}

/* A tensor large enough (4·112·112·96 floats, 19 MB) for se_scale_forward's non-temporal stores gives
 * every product x·s exactly, at any nth, on an aligned output and on one off by a float
 * (which takes the plain stores). */
Test(se, forward_streamed_is_exact)
{
    const int N = 4, C = 96;
    const size_t HW = 112 * 112, n = (size_t)N * HW * C;
    float *x = malloc(n * sizeof(float)), *s = malloc((size_t)N * C * sizeof(float));
    float *y = aligned_alloc(64, (n + 16) * sizeof(float));
    cr_assert(x && s && y);
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000003u) / 1000003.0f - 0.5f;
    for (size_t i = 0; i < (size_t)N * C; i++) s[i] = 0.25f + (float)i / 517.0f;
    for (int off = 0; off < 2; off++)
        for (int q = 0; q < TU_N_NTHS; q++) {
            float *yo = y + off;
            memset(y, 0xFF, (n + 16) * sizeof(float));
            for (int i = 0; i < TU_NTHS[q]; i++) se_scale_forward(yo, x, s, N, HW, C, i, TU_NTHS[q]);
            for (size_t i = 0; i < n; i++) {
                const float e = x[i] * s[(i / (HW * C)) * C + i % C];
                if (memcmp(&yo[i], &e, sizeof e))
                    cr_assert_fail("offset %d nth %d: y[%zu] = %a, want %a", off, TU_NTHS[q], i, (double)yo[i], (double)e);
            }
        }
    free(x), free(s), free(y);
}

/* ------------------------------------------------------------------------------------------------
 * Dropout and drop-connect
 */
TestSuite(dropout);

static struct dropout_args drop_args(float p) { return (struct dropout_args){.seed = 42, .step = 7, .layer = 3, .p = p}; }

Test(dropout, p0_is_identity)
{
    const int N = 5;
    const size_t D = 37, n = (size_t)N * D;
    struct dropout_args a = drop_args(0.0f);
    float *x = tu_fvec(n), *y = tu_fvec(n), *dy = tu_fvec(n), *dx = tu_fvec(n), *v0 = tu_fvec(n), *sc = tu_fvec(n);
    fill(x, n, 80, 0.0f, 1.0f);
    fill(dy, n, 81, 0.0f, 1.0f);
    fill(dx, n, 82, 0.0f, 1.0f);
    fill(sc, n, 83, 0.0f, 1.0f);
    memcpy(v0, dx, n * sizeof *dx);
    dropout_forward(y, x, N, D, 100, &a, 0, 1);
    tu_assert_bitwise(y, x, n, "dropout p=0 forward");
    dropout_backward(dx, dy, N, D, 100, &a, 0, 1);
    for (size_t i = 0; i < n; i++) cr_assert(dx[i] == v0[i] + dy[i], "dropout p=0 backward [%zu]", i);
    dropconnect_forward(y, x, N, D, 100, &a, 0, 1);
    tu_assert_bitwise(y, x, n, "drop-connect p=0 forward");
    dropconnect_add_forward(y, sc, x, N, D, 100, &a, 0, 1);
    for (size_t i = 0; i < n; i++) cr_assert(y[i] == sc[i] + x[i], "drop-connect add p=0 [%zu]", i);
    /* in place */
    memcpy(y, x, n * sizeof *y);
    dropout_forward(y, y, N, D, 100, &a, 0, 1);
    tu_assert_bitwise(y, x, n, "dropout p=0 in place");
    free(x), free(y), free(dy), free(dx), free(v0), free(sc);
}

/* Processing global samples [0,8) at once equals [0,4) and [4,8) separately (as two replicas or
 * two micro-batches would), for every kernel. */
Test(dropout, mask_independent_of_batch_split)
{
    const int N = 8;
    const size_t D = 37, n = (size_t)N * D, h = (size_t)(N / 2) * D;
    struct dropout_args a = drop_args(0.4f);
    float *x = tu_fvec(n), *dy = tu_fvec(n), *sc = tu_fvec(n);
    fill(x, n, 90, 0.0f, 1.0f);
    fill(dy, n, 91, 0.0f, 1.0f);
    fill(sc, n, 92, 0.0f, 1.0f);
    for (int kind = 0; kind < 3; kind++) {
        float *y = tu_fvec(n), *ys = tu_fvec(n), *dx = tu_fvec(n), *dxs = tu_fvec(n);
        if (kind == 0) {
            dropout_forward(y, x, N, D, 0, &a, 0, 1);
            dropout_forward(ys, x, N / 2, D, 0, &a, 0, 1);
            dropout_forward(ys + h, x + h, N / 2, D, N / 2, &a, 0, 1);
            dropout_backward(dx, dy, N, D, 0, &a, 0, 1);
            dropout_backward(dxs, dy, N / 2, D, 0, &a, 0, 1);
            dropout_backward(dxs + h, dy + h, N / 2, D, N / 2, &a, 0, 1);
        } else if (kind == 1) {
            dropconnect_forward(y, x, N, D, 0, &a, 0, 1);
            dropconnect_forward(ys, x, N / 2, D, 0, &a, 0, 1);
            dropconnect_forward(ys + h, x + h, N / 2, D, N / 2, &a, 0, 1);
            dropconnect_backward(dx, dy, N, D, 0, &a, 0, 1);
            dropconnect_backward(dxs, dy, N / 2, D, 0, &a, 0, 1);
            dropconnect_backward(dxs + h, dy + h, N / 2, D, N / 2, &a, 0, 1);
        } else {
            dropconnect_add_forward(y, sc, x, N, D, 0, &a, 0, 1);
            dropconnect_add_forward(ys, sc, x, N / 2, D, 0, &a, 0, 1);
            dropconnect_add_forward(ys + h, sc + h, x + h, N / 2, D, N / 2, &a, 0, 1);
        }
        tu_assert_bitwise(ys, y, n, "split forward");
        tu_assert_bitwise(dxs, dx, n, "split backward");
        free(y), free(ys), free(dx), free(dxs);
    }
    /* The samples of the second half are not the first half's masks again. */
    float *y = tu_fvec(n);
    for (size_t i = 0; i < n; i++) x[i] = 1.0f;
    dropout_forward(y, x, N, D, 0, &a, 0, 1);
    cr_assert(memcmp(y, y + h, h * sizeof *y) != 0);
    free(x), free(dy), free(sc), free(y);
}

Test(dropout, backward_recomputes_forward_mask_with_inverted_scale)
{
    const int N = 64;
    const size_t D = 1000, n = (size_t)N * D;
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    struct dropout_args a = drop_args(p);
    float *x = tu_fvec(n), *y = tu_fvec(n), *dy = tu_fvec(n), *dx = tu_fvec(n);
    fill(x, n, 100, 2.0f, 0.5f); /* nonzero, so y == 0 means dropped */
    fill(dy, n, 101, 0.0f, 1.0f);
    dropout_forward(y, x, N, D, 0, &a, 0, 1);
    dropout_backward(dx, dy, N, D, 0, &a, 0, 1);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        int k = dropout_keep(&a, i / D, i % D);
        cr_assert((y[i] != 0.0f) == k, "forward mask [%zu]", i);
        cr_assert(y[i] == (k ? x[i] * scale : 0.0f), "forward value [%zu]", i);
        cr_assert(dx[i] == (k ? dy[i] * scale : 0.0f), "backward [%zu] does not use the forward mask", i);
        kept += (size_t)k;
    }
    /* keep rate 1-p within 5 standard deviations */
    double sd = sqrt((double)n * p * (1.0 - p));
    cr_assert(fabs((double)kept - (double)n * (1.0 - p)) < 5.0 * sd, "kept %zu of %zu", kept, n);
    free(x), free(y), free(dy), free(dx);
}

Test(dropout, mask_keyed_by_seed_step_layer)
{
    const size_t D = 4096;
    struct dropout_args a = drop_args(0.5f), b;
    int same_step = 1, same_layer = 1, same_seed = 1, same_sample = 1;
    for (size_t e = 0; e < D; e++) {
        int k = dropout_keep(&a, 3, e);
        b = a, b.step++;
        same_step &= dropout_keep(&b, 3, e) == k;
        b = a, b.layer++;
        same_layer &= dropout_keep(&b, 3, e) == k;
        b = a, b.seed++;
        same_seed &= dropout_keep(&b, 3, e) == k;
        same_sample &= dropout_keep(&a, 4, e) == k;
    }
    cr_assert(!same_step && !same_layer && !same_seed && !same_sample);
    /* drop-connect and dropout draw from different streams */
    int differ = 0;
    for (uint64_t g = 0; g < 256; g++) differ |= dropconnect_keep(&a, g) != dropout_keep(&a, g, 0);
    cr_assert(differ);
}

Test(dropout, dropconnect_drops_whole_samples)
{
    const int N = 2000;
    const size_t D = 11, n = (size_t)N * D;
    const float p = 0.2f;
    struct dropout_args a = drop_args(p);
    float *x = tu_fvec(n), *y = tu_fvec(n), *sc = tu_fvec(n), *ya = tu_fvec(n);
    fill(x, n, 110, 3.0f, 0.5f);
    fill(sc, n, 111, 0.0f, 1.0f);
    dropconnect_forward(y, x, N, D, 1000, &a, 0, 1);
    dropconnect_add_forward(ya, sc, x, N, D, 1000, &a, 0, 1);
    int kept = 0;
    for (int s = 0; s < N; s++) {
        int k = dropconnect_keep(&a, 1000 + (uint64_t)s);
        kept += k;
        for (size_t e = 0; e < D; e++) {
            size_t i = (size_t)s * D + e;
            cr_assert(y[i] == (k ? x[i] * (1.0f / (1.0f - p)) : 0.0f), "sample %d element %zu", s, (size_t)e);
            cr_assert(fabsf(ya[i] - (sc[i] + y[i])) <= 1e-6f * (fabsf(sc[i]) + fabsf(y[i])), "add [%zu]", i);
        }
    }
    double sd = sqrt(N * p * (1.0 - p));
    cr_assert(fabs(kept - N * (1.0 - p)) < 5.0 * sd, "kept %d of %d samples", kept, N);
    /* p >= 1 drops everything without NaN */
    struct dropout_args all = drop_args(1.0f);
    dropconnect_forward(y, x, N, D, 0, &all, 0, 1);
    dropout_forward(ya, x, N, D, 0, &all, 0, 1);
    for (size_t i = 0; i < n; i++) cr_assert(y[i] == 0.0f && ya[i] == 0.0f);
    free(x), free(y), free(sc), free(ya);
}

struct drop_fd {
    int N, kind;
    size_t D;
    uint64_t g0;
    const struct dropout_args *a;
    double *x, *w, *y;
};

static double drop_fd_loss(void *p)
{
    struct drop_fd *f = p;
    if (f->kind == 0)
        dropout_forward_ref(f->y, f->x, f->N, f->D, f->g0, f->a);
    else
        dropconnect_forward_ref(f->y, f->x, f->N, f->D, f->g0, f->a);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)f->N * f->D; i++) l += f->w[i] * f->y[i];
    return l;
}

Test(dropout, matches_ref_finite_differences_accumulate_partition)
{
    const int N = 9;
    const size_t D = 53, n = (size_t)N * D;
    const uint64_t g0 = 17;
    struct dropout_args a = drop_args(0.35f);
    for (int kind = 0; kind < 2; kind++) {
        float *x = tu_fvec(n), *y = tu_fvec(n), *dy = tu_fvec(n), *dx = tu_fvec(n), *dx2 = tu_fvec(n);
        fill(x, n, 120, 0.0f, 1.0f);
        fill(dy, n, 121, 0.0f, 1.0f);
        if (kind == 0) {
            dropout_forward(y, x, N, D, g0, &a, 0, 1);
            dropout_backward(dx, dy, N, D, g0, &a, 0, 1);
            for (int r = 0; r < 2; r++) dropout_backward(dx2, dy, N, D, g0, &a, 0, 1);
        } else {
            dropconnect_forward(y, x, N, D, g0, &a, 0, 1);
            dropconnect_backward(dx, dy, N, D, g0, &a, 0, 1);
            for (int r = 0; r < 2; r++) dropconnect_backward(dx2, dy, N, D, g0, &a, 0, 1);
        }
        struct drop_fd f = {N, kind, D, g0, &a, tu_to_d(x, n), tu_to_d(dy, n), tu_dvec(n)};
        drop_fd_loss(&f);
        tu_assert_close(y, f.y, n, 1e-6, 0.0, "dropout forward vs ref");
        double *dref = tu_dvec(n), *g = tu_dvec(n);
        if (kind == 0)
            dropout_backward_ref(dref, f.w, N, D, g0, &a);
        else
            dropconnect_backward_ref(dref, f.w, N, D, g0, &a);
        tu_assert_close(dx, dref, n, 1e-6, 0.0, "dropout backward vs ref");
        tu_fd_grad(g, f.x, n, drop_fd_loss, &f, 1e-5);
        tu_assert_close(dx, g, n, 1e-5, 1e-7, "dropout backward vs fd");
        for (size_t i = 0; i < n; i++) cr_assert(dx2[i] == 2.0f * dx[i], "dinp[%zu] not doubled", i);
        for (int q = 1; q < TU_N_NTHS; q++) {
            float *yq = tu_fvec(n), *dxq = tu_fvec(n);
            for (int i = 0; i < TU_NTHS[q]; i++) {
                if (kind == 0) {
                    dropout_forward(yq, x, N, D, g0, &a, i, TU_NTHS[q]);
                    dropout_backward(dxq, dy, N, D, g0, &a, i, TU_NTHS[q]);
                } else {
                    dropconnect_forward(yq, x, N, D, g0, &a, i, TU_NTHS[q]);
                    dropconnect_backward(dxq, dy, N, D, g0, &a, i, TU_NTHS[q]);
                }
            }
            tu_assert_bitwise(yq, y, n, "dropout forward partition");
            tu_assert_bitwise(dxq, dx, n, "dropout backward partition");
            free(yq), free(dxq);
        }
        float *sc = tu_fvec(n), *ya = tu_fvec(n), *yaq = tu_fvec(n);
        fill(sc, n, 122, 0.0f, 1.0f);
        dropconnect_add_forward(ya, sc, x, N, D, g0, &a, 0, 1);
        for (int i = 0; i < 7; i++) dropconnect_add_forward(yaq, sc, x, N, D, g0, &a, i, 7);
        tu_assert_bitwise(yaq, ya, n, "drop-connect add partition");
        free(x), free(y), free(dy), free(dx), free(dx2), free(f.x), free(f.w), free(f.y), free(dref), free(g);
        free(sc), free(ya), free(yaq);
    }
}
