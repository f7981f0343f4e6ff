/* test_op_loss.c — softmax cross-entropy with its gradient in one pass (core/op_loss.c).
 *
 * Per-sample losses against a double-precision reference (with and without label smoothing); the
 * gradient against central differences in double of scale·Σ loss, seeded with 1/N_global for a slice
 * that is only part of the global batch; stability with logits of ±1e4 (losses and gradients against
 * the double references, with and without smoothing); a hand-computed
 * label-smoothing value; the correct flags; dlogits = NULL for evaluation; the accumulate contract;
 * and thread partitions (nth ∈ {1,2,3,7}) bitwise equal to nth = 1.
 */
#include "test_util.h"

#include "op_loss.h"

/* Reference CE of one sample in double: −Σ_k t_k log p_k with t = (1−ε)·onehot + ε/K. */
static double ce_ref(const double *z, int K, int y, double eps)
{
    double mx = z[0];
    for (int k = 1; k < K; k++) mx = fmax(mx, z[k]);
    double s = 0.0;
    for (int k = 0; k < K; k++) s += exp(z[k] - mx);
    const double lse = mx + log(s);
    double l = 0.0;
    for (int k = 0; k < K; k++) {
        const double t = (k == y ? 1.0 - eps : 0.0) + eps / K;
        l -= t * (z[k] - lse);
    }
    return l;
}

struct ce_ctx {
    int N, K;
    double eps, scale;
    double *z;        /* (N,K) */
    const int32_t *y; /* (N) */
};

/* dlogits of one sample in double, the exact (softmax − target)·scale, t = (1−ε)·onehot + ε/K. */
static void ce_grad_ref(double *g, const double *z, int K, int y, double eps, double scale)
{
    double mx = z[0];
    for (int k = 1; k < K; k++) mx = fmax(mx, z[k]);
    double s = 0.0;
    for (int k = 0; k < K; k++) s += exp(z[k] - mx);
    for (int k = 0; k < K; k++) {
        const double t = (k == y ? 1.0 - eps : 0.0) + eps / K;
        g[k] = (exp(z[k] - mx) / s - t) * scale;
    }
}

/* scale · Σ_n loss_n: the quantity whose gradient the kernel accumulates into dlogits. */
static double ce_total(void *p)
{
    const struct ce_ctx *c = p;
    double L = 0.0;
    for (int n = 0; n < c->N; n++) L += ce_ref(c->z + (size_t)n * c->K, c->K, c->y[n], c->eps);
    return c->scale * L;
}

static void make_case(float *z, int32_t *y, int N, int K, uint64_t seed, float sd)
{
    tu_fill_normal(z, (size_t)N * K, seed, 0.0f, sd);
    for (int n = 0; n < N; n++) y[n] = (int32_t)rng_below(seed, 77, (uint64_t)n, (uint64_t)K);
}

TestSuite(softmax_ce);

Test(softmax_ce, loss_matches_double_reference)
{
    const int shapes[][2] = {{1, 10}, {5, 3}, {17, 10}, {33, 1000}};
    const float epss[] = {0.0f, 0.1f};
    for (int k = 0; k < 4; k++)
        for (int e = 0; e < 2; e++) {
            const int N = shapes[k][0], K = shapes[k][1];
            float *z = tu_fvec((size_t)N * K), *loss = tu_fvec(N), *d = tu_fvec((size_t)N * K);
            int32_t *y = calloc(N, sizeof *y);
            make_case(z, y, N, K, 10 + k, 3.0f);
            struct softmax_ce_shape s = {N, K, epss[e]};
            softmax_ce_forward_backward(loss, d, NULL, z, y, 1.0f / N, &s, 0, 1);
            double *zd = tu_to_d(z, (size_t)N * K), *want = tu_dvec(N);
            for (int n = 0; n < N; n++) want[n] = ce_ref(zd + (size_t)n * K, K, y[n], epss[e]);
            char what[80];
            snprintf(what, sizeof what, "loss N=%d K=%d eps=%g", N, K, (double)epss[e]);
            tu_assert_close(loss, want, N, 1e-6, 1e-7, what);
            free(z), free(loss), free(d), free(y), free(zd), free(want);
        }
}

Test(softmax_ce, gradient_matches_central_differences)
{
    /* A slice of 7 samples of a global batch of 19: the seed is 1/N_global, not 1/N. */
    const int N = 7, K = 11, N_global = 19;
    const float epss[] = {0.0f, 0.1f, 0.3f};
    for (int e = 0; e < 3; e++) {
        float *z = tu_fvec((size_t)N * K), *loss = tu_fvec(N), *d = tu_fvec((size_t)N * K);
        int32_t y[7];
        make_case(z, y, N, K, 20 + e, 2.0f);
        struct softmax_ce_shape s = {N, K, epss[e]};
        const float scale = 1.0f / (float)N_global;
        softmax_ce_forward_backward(loss, d, NULL, z, y, scale, &s, 0, 1);
        struct ce_ctx c = {N, K, epss[e], (double)scale, tu_to_d(z, (size_t)N * K), y};
        double *fd = tu_dvec((size_t)N * K);
        tu_fd_grad(fd, c.z, (size_t)N * K, ce_total, &c, 1e-5);
        char what[64];
        snprintf(what, sizeof what, "dlogits eps=%g", (double)epss[e]);
        tu_assert_close(d, fd, (size_t)N * K, 1e-4, 1e-5, what);
        /* each sample's gradient sums to zero (softmax and target both sum to 1) */
        for (int n = 0; n < N; n++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) sum += d[(size_t)n * K + k];
            cr_assert(fabs(sum) < 1e-6, "row %d of dlogits sums to %g", n, sum);
        }
        free(z), free(loss), free(d), free(c.z), free(fd);
    }
}

Test(softmax_ce, stable_for_huge_logits)
{
    const int N = 4, K = 5;
    float z[4 * 5], loss[4], d[4 * 5] = {0};
    int32_t y[4] = {0, 1, 4, 2};
    uint8_t correct[4];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) z[n * K + k] = ((n + k) % 2 ? 1e4f : -1e4f);
    /* sample 3: all equal huge logits */
    for (int k = 0; k < K; k++) z[3 * K + k] = 1e4f;
    struct softmax_ce_shape s = {N, K, 0.0f};
    softmax_ce_forward_backward(loss, d, correct, z, y, 1.0f / N, &s, 0, 1);
    for (int n = 0; n < N; n++) cr_assert(isfinite(loss[n]), "loss[%d] = %g", n, (double)loss[n]);
    for (int i = 0; i < N * K; i++) cr_assert(isfinite(d[i]), "dlogits[%d] = %g", i, (double)d[i]);
    /* The softmax of ±1e4 logits is exact in double (0, 1/3, 1/2 or 1/5: e^−2e4 is 0), so the
     * gradient is checked against it, not only for finiteness. */
    double zd[5], gd[4 * 5];
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) zd[k] = z[n * K + k];
        const double want = ce_ref(zd, K, y[n], 0.0);
        cr_assert(fabs(loss[n] - want) <= 1e-6 * fabs(want) + 1e-6, "loss[%d] = %.9g want %.9g", n,
                  (double)loss[n], want);
        ce_grad_ref(gd + n * K, zd, K, y[n], 0.0, 1.0 / N);
    }
    tu_assert_close(d, gd, (size_t)N * K, 1e-6, 1e-6, "dlogits at ±1e4");
    /* sample 0: label 0 at −1e4 with +1e4 elsewhere: loss 2e4 */
    cr_assert(fabs(loss[0] - (2e4 + log(2.0))) < 1e-2, "loss[0] = %g", (double)loss[0]);
    /* sample 3: uniform: log K */
    cr_assert(fabs(loss[3] - log(5.0)) < 1e-6, "loss[3] = %g", (double)loss[3]);
    /* and with label smoothing: the losses (thousands: ε/K of each 2e4 gap) and the gradient against
     * the same references, at the kernel's own ε (0.1f) */
    struct softmax_ce_shape s2 = {N, K, 0.1f};
    memset(d, 0, sizeof d); /* the kernel adds to dlogits */
    softmax_ce_forward_backward(loss, d, NULL, z, y, 1.0f / N, &s2, 0, 1);
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) zd[k] = z[n * K + k];
        const double want = ce_ref(zd, K, y[n], (double)s2.smoothing);
        cr_assert(fabs(loss[n] - want) <= 1e-6 * fabs(want) + 1e-6, "smoothed loss[%d] = %.9g want %.9g", n,
                  (double)loss[n], want);
        ce_grad_ref(gd + n * K, zd, K, y[n], (double)s2.smoothing, 1.0 / N);
    }
    tu_assert_close(d, gd, (size_t)N * K, 1e-6, 1e-6, "smoothed dlogits at ±1e4");
}

Test(softmax_ce, label_smoothing_value)
{
    /* K = 4, logits (1, 2, 3, 4), label 2, ε = 0.2: target (0.05, 0.05, 0.85, 0.05).
     * log p_k = z_k − log Σ e^z = z_k − 4.4401896985611957 */
    const float z[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    const int32_t y[1] = {2};
    const double lse = 4.4401896985611957;
    const double want = -(0.05 * (1 - lse) + 0.05 * (2 - lse) + 0.85 * (3 - lse) + 0.05 * (4 - lse));
    float loss[1], d[4] = {0};
    struct softmax_ce_shape s = {1, 4, 0.2f};
    softmax_ce_forward_backward(loss, d, NULL, z, y, 1.0f, &s, 0, 1);
    cr_assert(fabs(loss[0] - want) < 1e-6, "smoothed loss %.9g want %.9g", (double)loss[0], want);
    const double t[4] = {0.05, 0.05, 0.85, 0.05};
    for (int k = 0; k < 4; k++) {
        const double p = exp(z[k] - lse);
        cr_assert(fabs(d[k] - (p - t[k])) < 1e-6, "dlogits[%d] = %.9g want %.9g", k, (double)d[k], p - t[k]);
    }
    /* ε = 0: plain CE = lse − z_y */
    struct softmax_ce_shape s0 = {1, 4, 0.0f};
    softmax_ce_forward_backward(loss, NULL, NULL, z, y, 1.0f, &s0, 0, 1);
    cr_assert(fabs(loss[0] - (lse - 3.0)) < 1e-6, "plain loss %.9g want %.9g", (double)loss[0], lse - 3.0);
}

Test(softmax_ce, correct_flags)
{
    const int N = 5, K = 3;
    const float z[5 * 3] = {
        0.1f, 0.9f, 0.3f,  /* argmax 1 */
        2.0f, -1.0f, 0.0f, /* argmax 0 */
        -5.0f, -4.0f, -3.0f, /* argmax 2 */
        0.0f, 0.0f, 1e-6f, /* argmax 2 */
        7.0f, 7.5f, 7.25f, /* argmax 1 */
    };
    const int32_t y[5] = {1, 2, 2, 0, 1};
    const uint8_t want[5] = {1, 0, 1, 0, 1};
    uint8_t correct[5];
    memset(correct, 0xAB, sizeof correct);
    float loss[5];
    struct softmax_ce_shape s = {N, K, 0.0f};
    softmax_ce_forward_backward(loss, NULL, correct, z, y, 1.0f, &s, 0, 1);
    for (int n = 0; n < N; n++) cr_assert_eq(correct[n], want[n], "correct[%d] = %d want %d", n, correct[n], want[n]);
}

Test(softmax_ce, evaluation_without_gradient_and_accumulate)
{
    const int N = 9, K = 10;
    float *z = tu_fvec((size_t)N * K), *l1 = tu_fvec(N), *l2 = tu_fvec(N);
    int32_t y[9];
    make_case(z, y, N, K, 31, 2.0f);
    struct softmax_ce_shape s = {N, K, 0.1f};
    /* dlogits = NULL gives the same losses */
    float *g = tu_fvec((size_t)N * K);
    softmax_ce_forward_backward(l1, g, NULL, z, y, 0.25f, &s, 0, 1);
    softmax_ce_forward_backward(l2, NULL, NULL, z, y, 0.25f, &s, 0, 1);
    tu_assert_bitwise(l2, l1, N, "loss without dlogits");
    /* accumulate: pre-filled P gives P + G, twice into zeros gives 2G */
    float *p = tu_fvec((size_t)N * K), *a = tu_fvec((size_t)N * K), *two = tu_fvec((size_t)N * K);
    tu_fill_normal(p, (size_t)N * K, 32, 1.0f, 1.0f);
    memcpy(a, p, (size_t)N * K * sizeof *a);
    softmax_ce_forward_backward(l2, a, NULL, z, y, 0.25f, &s, 0, 1);
    softmax_ce_forward_backward(l2, two, NULL, z, y, 0.25f, &s, 0, 1);
    softmax_ce_forward_backward(l2, two, NULL, z, y, 0.25f, &s, 0, 1);
    double *want = tu_dvec((size_t)N * K);
    for (int i = 0; i < N * K; i++) want[i] = (double)p[i] + g[i];
    tu_assert_close(a, want, (size_t)N * K, 1e-6, 1e-7, "P + dlogits");
    for (int i = 0; i < N * K; i++) want[i] = 2.0 * g[i];
    tu_assert_close(two, want, (size_t)N * K, 1e-6, 1e-7, "2x dlogits");
    free(z), free(l1), free(l2), free(g), free(p), free(a), free(two), free(want);
}

Test(softmax_ce, partition_bitwise)
{
    const int shapes[][2] = {{1, 10}, {5, 10}, {64, 10}, {13, 1000}};
    for (int k = 0; k < 4; k++) {
        const int N = shapes[k][0], K = shapes[k][1];
        const size_t nz = (size_t)N * K;
        float *z = tu_fvec(nz), *init = tu_fvec(nz);
        int32_t *y = calloc(N, sizeof *y);
        make_case(z, y, N, K, 40 + k, 3.0f);
        tu_fill_normal(init, nz, 41 + k, 0.0f, 1.0f);
        struct softmax_ce_shape s = {N, K, 0.1f};
        float *l1 = tu_fvec(N), *d1 = tu_fdup(init, nz);
        uint8_t *c1 = calloc(N, 1), *cn = calloc(N, 1);
        softmax_ce_forward_backward(l1, d1, c1, z, y, 1.0f / 100.0f, &s, 0, 1);
        for (int t = 1; t < TU_N_NTHS; t++) {
            const int nth = TU_NTHS[t];
            float *ln = tu_fvec(N), *dn = tu_fdup(init, nz);
            memset(cn, 0xEE, N);
            for (int ith = 0; ith < nth; ith++)
                softmax_ce_forward_backward(ln, dn, cn, z, y, 1.0f / 100.0f, &s, ith, nth);
            char what[64];
            snprintf(what, sizeof what, "loss N=%d K=%d nth=%d", N, K, nth);
            tu_assert_bitwise(ln, l1, N, what);
            snprintf(what, sizeof what, "dlogits N=%d K=%d nth=%d", N, K, nth);
            tu_assert_bitwise(dn, d1, nz, what);
            cr_assert(memcmp(cn, c1, N) == 0, "correct flags differ at nth=%d (N=%d)", nth, N);
            free(ln), free(dn);
        }
        free(z), free(init), free(y), free(l1), free(d1), free(c1), free(cn);
    }
}
