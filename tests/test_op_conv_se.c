/* Tests of the 1×1 convolution that folds in the SE scale before it (op_conv_se.h): forward, data
 * gradient, weight gradient and dscale against a double reference of the unfused pair (se_scale then the
 * convolution), the BatchNorm statistics it takes against bn_forward_train_chunks of its own output, and
 * every output bitwise the same for nth ∈ {1, 2, 3, 7}.
 */
#include "test_util.h"

#include <criterion/criterion.h>

#include "op_conv_se.h"
#include "op_norm.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

TestSuite(conv_se);

/* N, H, W, C, OC: samples whose rows straddle BatchNorm chunks, channel tails, one sample. */
static const int shapes[][5] = {{3, 7, 7, 24, 40}, {2, 16, 16, 96, 24}, {16, 6, 6, 24, 144}, {3, 5, 9, 37, 19},
                                {1, 4, 4, 16, 16}};
static const int nths[] = {1, 2, 3, 7};

/* n uniform floats in [-1, 1). */
static float *rnd(size_t n, uint64_t stream)
{
    float *p = malloc(n * sizeof(float));
    cr_assert(p);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * rng_uniform(77, stream, i) - 1.0f;
    return p;
}

struct se_ref {
    double *y, *dx, *dw, *ds;
};

/* The unfused pair in double: y = (x ⊙ s[n]) · w; dx = (dout · wᵀ) ⊙ s[n]; dw = Σ (x ⊙ s)ᵀ dout;
 * ds[n][c] = Σ_p x[p][c] · (dout · wᵀ)[p][c]. */
static struct se_ref reference(const float *x, const float *s, const float *w, const float *dout, const struct conv_shape *sh)
{
    const size_t HW = (size_t)sh->H * sh->W, M = (size_t)sh->N * HW, C = (size_t)sh->C, OC = (size_t)sh->OC;
    struct se_ref r = {calloc(M * OC, sizeof(double)), calloc(M * C, sizeof(double)), calloc(C * OC, sizeof(double)),
                       calloc((size_t)sh->N * C, sizeof(double))};
    cr_assert(r.y && r.dx && r.dw && r.ds);
    for (size_t p = 0; p < M; p++) {
        const size_t n = p / HW;
        for (size_t c = 0; c < C; c++) {
            const double xs = (double)x[p * C + c] * s[n * C + c];
            double g = 0.0;
            for (size_t o = 0; o < OC; o++) {
                r.y[p * OC + o] += xs * w[c * OC + o];
                r.dw[c * OC + o] += xs * dout[p * OC + o];
                g += (double)dout[p * OC + o] * w[c * OC + o];
            }
            r.dx[p * C + c] = g * s[n * C + c];
            r.ds[n * C + c] += g * x[p * C + c];
        }
    }
    return r;
}

Test(conv_se, kernels_match_reference_and_are_bitwise_in_nth)
{
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        struct conv_shape sh;
        cr_assert_eq(conv_shape_init(&sh, shapes[q][0], shapes[q][1], shapes[q][2], shapes[q][3], shapes[q][4], 1, 1, 1,
                                     1),
                     0);
        cr_assert(conv_se_fusable(&sh), "case %zu", q);
        const size_t M = (size_t)sh.N * sh.H * sh.W, C = (size_t)sh.C, OC = (size_t)sh.OC, np = bn_chunk_doubles(M, sh.OC);
        float *x = rnd(M * C, 10 + q), *w = rnd(C * OC, 20 + q), *dout = rnd(M * OC, 30 + q);
        float *s = rnd((size_t)sh.N * C, 40 + q); /* made sigmoid outputs: (0, 1) */
        for (size_t i = 0; i < (size_t)sh.N * C; i++) s[i] = 0.5f + 0.49f * s[i];
        const struct se_ref r = reference(x, s, w, dout, &sh);
        float *y[2], *dx[2], *dw[2], *ds[2], *part = malloc(conv_se_part_floats(&sh) * sizeof(float));
        double *stats[2], *want = calloc(np, sizeof(double));
        float *scr = malloc(7 * conv_se_scratch_floats(&sh) * sizeof(float));
        cr_assert(part && want && scr);
        for (int k = 0; k < 2; k++) {
            y[k] = malloc(M * OC * sizeof(float)), dx[k] = malloc(M * C * sizeof(float));
            dw[k] = calloc(C * OC, sizeof(float)), ds[k] = calloc((size_t)sh.N * C, sizeof(float));
            stats[k] = calloc(np, sizeof(double));
            cr_assert(y[k] && dx[k] && dw[k] && ds[k] && stats[k]);
        }
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            const int nt = nths[t], k = t > 0;
            memset(dw[k], 0, C * OC * sizeof(float)), memset(ds[k], 0, (size_t)sh.N * C * sizeof(float));
            memset(dx[k], 0xff, M * C * sizeof(float)); /* overwritten, never read */
            const size_t ks = conv_se_scratch_floats(&sh);
            for (int i = 0; i < nt; i++) conv_se_forward(y[k], x, s, w, &sh, stats[k], scr + (size_t)i * ks, i, nt);
            for (int i = 0; i < nt; i++) conv_se_backward_data(dx[k], dout, w, s, &sh, scr + (size_t)i * ks, i, nt);
            for (int i = 0; i < nt; i++) conv_se_backward_params_chunks(part, x, dout, &sh, i, nt);
            for (int i = 0; i < nt; i++) conv_se_backward_params_finish(dw[k], part, s, &sh, 1, i, nt);
            /* acc 0 (a first write: the executor no longer zeroes it): NaN-filled, written, the same bits */
            float *dwn = malloc(C * OC * sizeof(float));
            cr_assert(dwn);
            memset(dwn, 0xff, C * OC * sizeof(float));
            for (int i = 0; i < nt; i++) conv_se_backward_params_finish(dwn, part, s, &sh, 0, i, nt);
            char wn[64];
            snprintf(wn, sizeof wn, "case %zu nth %d: dw written", q, nt), tu_assert_bitwise(dwn, dw[k], C * OC, wn);
            free(dwn);
            for (int i = 0; i < nt; i++) conv_se_dscale(ds[k], part, w, &sh, i, nt);
            char what[80];
            if (!k) {
                snprintf(what, sizeof what, "case %zu: y", q), tu_assert_close(y[0], r.y, M * OC, 1e-5, 1e-5, what);
                snprintf(what, sizeof what, "case %zu: dx", q), tu_assert_close(dx[0], r.dx, M * C, 1e-5, 1e-5, what);
                snprintf(what, sizeof what, "case %zu: dw", q), tu_assert_close(dw[0], r.dw, C * OC, 1e-5, 1e-4, what);
                snprintf(what, sizeof what, "case %zu: ds", q), tu_assert_close(ds[0], r.ds, (size_t)sh.N * C, 1e-5, 1e-4, what);
                bn_forward_train_chunks(want, y[0], M, sh.OC, 0, 1);
                snprintf(what, sizeof what, "case %zu: statistics", q), tu_assert_bitwise_d(stats[0], want, np, what);
                continue;
            }
            snprintf(what, sizeof what, "case %zu nth %d: y", q, nt), tu_assert_bitwise(y[1], y[0], M * OC, what);
            snprintf(what, sizeof what, "case %zu nth %d: dx", q, nt), tu_assert_bitwise(dx[1], dx[0], M * C, what);
            snprintf(what, sizeof what, "case %zu nth %d: dw", q, nt), tu_assert_bitwise(dw[1], dw[0], C * OC, what);
            snprintf(what, sizeof what, "case %zu nth %d: ds", q, nt), tu_assert_bitwise(ds[1], ds[0], (size_t)sh.N * C, what);
            snprintf(what, sizeof what, "case %zu nth %d: statistics", q, nt), tu_assert_bitwise_d(stats[1], stats[0], np, what);
        }
        for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]), free(dw[k]), free(ds[k]), free(stats[k]);
        free(x), free(w), free(dout), free(s), free(part), free(want), free(scr);
        free(r.y), free(r.dx), free(r.dw), free(r.ds);
    }
}

/* Outside gemm_rows' reach (C·OC > 10,240) the executor keeps the unfused pair. */
Test(conv_se, large_weights_are_refused)
{
    struct conv_shape sh;
    cr_assert_eq(conv_shape_init(&sh, 2, 7, 7, 480, 80, 1, 1, 1, 1), 0);
    cr_assert(!conv_se_fusable(&sh));
    cr_assert_eq(conv_shape_init(&sh, 2, 7, 7, 240, 40, 1, 1, 1, 1), 0);
    cr_assert(conv_se_fusable(&sh));
    cr_assert_eq(conv_shape_init(&sh, 2, 7, 7, 240, 40, 3, 3, 1, 1), 0);
    cr_assert(!conv_se_fusable(&sh), "a 3×3 convolution");
}

/* The executor folds the scale in only where a sample's part (C·OC) is at most a quarter of its tensor
 * (H·W·C): EfficientNet-B0 at 32×32 keeps it at 16×16 (OC 16) and leaves it at 8×8 (OC 24) and 4×4 (OC 40);
 * at 224×224 its fusable layers (28×28 and up) all keep it. */
Test(conv_se, pays_only_where_the_parts_are_small)
{
    static const int cases[][6] = {/* N, H, C, OC, pays */
                                   {128, 16, 32, 16, 1}, {128, 8, 144, 24, 0}, {128, 4, 240, 40, 0},
                                   {16, 28, 240, 40, 1}, {16, 56, 144, 24, 1}, {2, 10, 24, 25, 1},
                                   {2, 10, 24, 26, 0}, {2, 14, 480, 80, 0}};
    for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
        struct conv_shape sh;
        cr_assert_eq(conv_shape_init(&sh, cases[q][0], cases[q][1], cases[q][1], cases[q][2], cases[q][3], 1, 1, 1, 1),
                     0);
        cr_assert_eq(conv_se_pays(&sh), cases[q][4], "case %zu: %d×%d, C %d, OC %d", q, cases[q][1], cases[q][1],
                     cases[q][2], cases[q][3]);
    }
}
