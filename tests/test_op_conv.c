/* test_op_conv.c — dense/grouped convolution: every supported algorithm (gemm1x1, im2col, direct, fft)
 * against the naive references on odd shapes, reference gradients against central differences in
 * double, the accumulate contract, bitwise partition invariance for nth ∈ {1,2,3,7}, the algorithm
 * table and support predicate, and shape validation.
 */
#include "test_util.h"

#include <criterion/criterion.h>

#include "op_conv.h"
#include "op_se.h"
#include "op_norm.h"
#include "rng.h"
#include "status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* N, H, W, C, OC, K, stride, groups, pad (-1 = EfficientNet (K-1)/2) */
struct cv_case {
    int N, H, W, C, OC, K, S, G, P;
};

static const struct cv_case cases[] = {
    {2, 15, 13, 3, 32, 3, 2, 1, -1},  /* stem */
    {2, 9, 11, 20, 24, 3, 1, 1, -1},  /* dense 3×3, C not a multiple of 16 */
    {1, 7, 9, 32, 32, 3, 1, 2, -1},   /* group size 16 */
    {2, 11, 7, 48, 48, 5, 1, 3, -1},  /* group size 16, 5×5 */
    {2, 13, 9, 32, 48, 5, 2, 2, -1},  /* group size 16, OC/G = 24 (tail), stride 2 */
    {3, 5, 7, 19, 37, 1, 1, 1, -1},   /* 1×1 */
    {2, 6, 7, 17, 10, 1, 2, 1, -1},   /* 1×1 stride 2 */
    {1, 9, 9, 16, 16, 3, 2, 1, 0},    /* explicit pad 0 */
    {2, 7, 7, 12, 12, 3, 1, 12, -1},  /* depthwise as a grouped conv */
    {1, 3, 2, 16, 20, 5, 1, 1, -1},   /* kernel larger than the image */
    {2, 10, 6, 8, 40, 3, 1, 1, -1},   /* OC spans several 16-blocks, odd tail */
    {2, 16, 17, 24, 150, 1, 1, 1, -1}, /* 1×1 with several row and column units */
    {1, 20, 15, 150, 24, 1, 1, 1, -1}, /* 1×1 with C > OC (row units of dw) */
    {1, 5, 7, 12, 100, 1, 1, 1, -1},   /* 1×1, one row unit, 64–127 columns: two column blocks */
    {2, 15, 17, 64, 64, 3, 1, 4, -1},  /* several im2col chunks */
    {2, 9, 8, 6, 20, 3, 2, 1, -1},     /* C % 4 = 2: the direct weight gradient's two leftover channels */
    {2, 15, 19, 80, 200, 1, 1, 1, -1}, /* 1×1 past gemm_rows with small K: sgemm's small-matrix sub-tiles, tails */
    {1, 9, 7, 5, 64, 3, 1, 1, -1},     /* the direct forward's 32-channel blocks, two of them */
    {2, 8, 9, 64, 64, 3, 2, 2, -1},    /* ... in each of two groups */
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static struct conv_shape make_shape(const struct cv_case *c)
{
    struct conv_shape s = {.N = c->N, .H = c->H, .W = c->W, .C = c->C, .OC = c->OC, .KH = c->K, .KW = c->K,
                           .stride = c->S, .pad = c->P < 0 ? (c->K - 1) / 2 : c->P, .groups = c->G};
    cr_assert_eq(conv_shape_fill(&s), 0, "%s", tb_error_get());
    return s;
}

static float *rand_buf(size_t n, uint64_t stream)
{
    float *p = malloc(n * sizeof(float) + 1); /* exact size: sanitizers catch any overrun */
    cr_assert(p);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * rng_uniform(4321, stream, i) - 1.0f;
    return p;
}

static float *zero_buf(size_t n)
{
    float *p = calloc(n + 1, sizeof(float));
    cr_assert(p);
    return p;
}

struct cv_bufs {
    size_t ni, no, nw;
    float *inp, *w, *b, *dout;
};

static struct cv_bufs make_bufs(const struct conv_shape *s, uint64_t seed)
{
    struct cv_bufs B;
    B.ni = (size_t)s->N * s->H * s->W * s->C;
    B.no = (size_t)s->N * s->OH * s->OW * s->OC;
    B.nw = (size_t)s->KH * s->KW * (s->C / s->groups) * s->OC;
    B.inp = rand_buf(B.ni, seed * 8 + 1);
    B.w = rand_buf(B.nw, seed * 8 + 2);
    B.b = rand_buf((size_t)s->OC, seed * 8 + 3);
    B.dout = rand_buf(B.no, seed * 8 + 4);
    return B;
}

static void free_bufs(struct cv_bufs *B) { free(B->inp), free(B->w), free(B->b), free(B->dout); }

/* Per-thread scratch and (FFT) plan for one algorithm and shape. */
struct cv_env {
    struct conv_fft_plan *plan;
    float *scratch[3]; /* per pass */
};

static struct cv_env make_env(enum conv_algo a, const struct conv_shape *s, int nth)
{
    struct cv_env E = {0};
    if (conv_algos[a].needs_plan) cr_assert_eq(conv_fft_plan_create(&E.plan, s), 0, "%s", tb_error_get());
    for (int p = 0; p < 3; p++) {
        size_t n = conv_scratch_floats(a, (enum conv_pass)p, s, nth);
        cr_assert_eq(n % 16, 0);
        E.scratch[p] = n ? aligned_alloc(64, n * sizeof(float)) : NULL;
        if (n) {
            cr_assert(E.scratch[p]);
            memset(E.scratch[p], 0xFF, n * sizeof(float)); /* NaNs: no kernel may read scratch it did not write */
        }
    }
    return E;
}

static void free_env(struct cv_env *E)
{
    conv_fft_plan_destroy(E->plan);
    for (int p = 0; p < 3; p++) free(E->scratch[p]);
}

static void check_algo_against_ref_on(enum conv_algo a, const struct cv_case *cs, int n_cases)
{
    int ran = 0;
    for (int ci = 0; ci < n_cases; ci++) {
        const struct conv_shape s = make_shape(&cs[ci]);
        if (!conv_algo_supported(a, &s)) continue;
        ran++;
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci);
        struct cv_env E = make_env(a, &s, 1);
        float *o1 = zero_buf(B.no), *o2 = zero_buf(B.no);
        for (int bias = 0; bias < 2; bias++) {
            conv_forward(a, o1, B.inp, B.w, bias ? B.b : NULL, &s, E.plan, E.scratch[0], 0, 1);
            conv_forward_ref(o2, B.inp, B.w, bias ? B.b : NULL, &s);
            cr_expect_leq(tu_rel_err(o1, o2, B.no), 1e-4, "%s forward case %d bias %d: rel err %g", conv_algo_name(a), ci,
                          bias, tu_rel_err(o1, o2, B.no));
        }
        /* Backward starts from non-zero gradients to check +=. */
        float *d1 = rand_buf(B.ni, 99), *d2 = rand_buf(B.ni, 99);
        conv_backward_data(a, d1, B.dout, B.w, &s, E.plan, E.scratch[1], 0, 1);
        conv_backward_data_ref(d2, B.dout, B.w, &s);
        cr_expect_leq(tu_rel_err(d1, d2, B.ni), 1e-4, "%s backward_data case %d: rel err %g", conv_algo_name(a), ci,
                      tu_rel_err(d1, d2, B.ni));
        float *w1 = rand_buf(B.nw, 98), *w2 = rand_buf(B.nw, 98);
        float *b1 = rand_buf((size_t)s.OC, 97), *b2 = rand_buf((size_t)s.OC, 97);
        conv_backward_params(a, w1, b1, B.inp, B.dout, &s, E.plan, E.scratch[2], 0, 1);
        conv_backward_params_ref(w2, b2, B.inp, B.dout, &s);
        cr_expect_leq(tu_rel_err(w1, w2, B.nw), 1e-4, "%s backward_params dw case %d: rel err %g", conv_algo_name(a), ci,
                      tu_rel_err(w1, w2, B.nw));
        cr_expect_leq(tu_rel_err(b1, b2, (size_t)s.OC), 1e-4, "%s backward_params db case %d", conv_algo_name(a), ci);
        /* db may be NULL (the stem's own weight-gradient kernel runs only then). */
        float *w3 = rand_buf(B.nw, 96), *w4 = rand_buf(B.nw, 96);
        conv_backward_params(a, w3, NULL, B.inp, B.dout, &s, E.plan, E.scratch[2], 0, 1);
        conv_backward_params_ref(w4, NULL, B.inp, B.dout, &s);
        cr_expect_leq(tu_rel_err(w3, w4, B.nw), 1e-4, "%s backward_params dw (no db) case %d: rel err %g",
                      conv_algo_name(a), ci, tu_rel_err(w3, w4, B.nw));
        free(o1), free(o2), free(d1), free(d2), free(w1), free(w2), free(b1), free(b2), free(w3), free(w4);
        free_env(&E);
        free_bufs(&B);
    }
    cr_assert_gt(ran, 0, "no case ran for %s", conv_algo_name(a));
}

static void check_algo_against_ref(enum conv_algo a) { check_algo_against_ref_on(a, cases, N_CASES); }

Test(conv, gemm1x1_matches_reference) { check_algo_against_ref(CONV_ALGO_GEMM1X1); }
Test(conv, im2col_matches_reference) { check_algo_against_ref(CONV_ALGO_IM2COL); }
Test(conv, direct_matches_reference) { check_algo_against_ref(CONV_ALGO_DIRECT); }
Test(conv, fft_matches_reference) { check_algo_against_ref(CONV_ALGO_FFT); }

/* Two backward calls from zero give twice one call. */
static void check_accumulate(enum conv_algo a)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        if (!conv_algo_supported(a, &s)) continue;
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 300);
        struct cv_env E = make_env(a, &s, 1);
        float *d1 = zero_buf(B.ni), *d2 = zero_buf(B.ni), *w1 = zero_buf(B.nw), *w2 = zero_buf(B.nw);
        float *b1 = zero_buf((size_t)s.OC), *b2 = zero_buf((size_t)s.OC);
        conv_backward_data(a, d1, B.dout, B.w, &s, E.plan, E.scratch[1], 0, 1);
        for (int k = 0; k < 2; k++) conv_backward_data(a, d2, B.dout, B.w, &s, E.plan, E.scratch[1], 0, 1);
        conv_backward_params(a, w1, b1, B.inp, B.dout, &s, E.plan, E.scratch[2], 0, 1);
        for (int k = 0; k < 2; k++) conv_backward_params(a, w2, b2, B.inp, B.dout, &s, E.plan, E.scratch[2], 0, 1);
        for (size_t i = 0; i < B.ni; i++) d1[i] *= 2.0f;
        for (size_t i = 0; i < B.nw; i++) w1[i] *= 2.0f;
        for (int o = 0; o < s.OC; o++) b1[o] *= 2.0f;
        cr_expect_leq(tu_rel_err(d2, d1, B.ni), 1e-6, "%s dinp accumulate case %d", conv_algo_name(a), ci);
        cr_expect_leq(tu_rel_err(w2, w1, B.nw), 1e-6, "%s dw accumulate case %d", conv_algo_name(a), ci);
        cr_expect_leq(tu_rel_err(b2, b1, (size_t)s.OC), 1e-6, "%s db accumulate case %d", conv_algo_name(a), ci);
        free(d1), free(d2), free(w1), free(w2), free(b1), free(b2);
        free_env(&E);
        free_bufs(&B);
    }
}

Test(conv, gemm1x1_accumulates) { check_accumulate(CONV_ALGO_GEMM1X1); }
Test(conv, im2col_accumulates) { check_accumulate(CONV_ALGO_IM2COL); }
Test(conv, direct_accumulates) { check_accumulate(CONV_ALGO_DIRECT); }
Test(conv, fft_accumulates) { check_accumulate(CONV_ALGO_FFT); }

/* Every ith of nth called in turn (each with its own scratch) gives the same bits as nth = 1. */
static void check_partition_on(enum conv_algo a, const struct cv_case *cs, int n_cases)
{
    static const int nths[] = {2, 3, 7};
    for (int ci = 0; ci < n_cases; ci++) {
        const struct conv_shape s = make_shape(&cs[ci]);
        if (!conv_algo_supported(a, &s)) continue;
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 400);
        struct cv_env E1 = make_env(a, &s, 1);
        float *o1 = zero_buf(B.no), *d1 = rand_buf(B.ni, 5), *w1 = rand_buf(B.nw, 6), *b1 = rand_buf((size_t)s.OC, 7);
        float *u1 = zero_buf(B.no); /* without bias: GEMM1X1's own kernel where it fits, sgemm with bias */
        conv_forward(a, o1, B.inp, B.w, B.b, &s, E1.plan, E1.scratch[0], 0, 1);
        conv_forward(a, u1, B.inp, B.w, NULL, &s, E1.plan, E1.scratch[0], 0, 1);
        conv_backward_data(a, d1, B.dout, B.w, &s, E1.plan, E1.scratch[1], 0, 1);
        conv_backward_params(a, w1, b1, B.inp, B.dout, &s, E1.plan, E1.scratch[2], 0, 1);
        float *v1 = rand_buf(B.nw, 8); /* dw without db */
        conv_backward_params(a, v1, NULL, B.inp, B.dout, &s, E1.plan, E1.scratch[2], 0, 1);
        for (int k = 0; k < 3; k++) {
            const int nth = nths[k];
            struct cv_env E = make_env(a, &s, nth);
            float *on = zero_buf(B.no), *dn = rand_buf(B.ni, 5), *wn = rand_buf(B.nw, 6),
                  *bn = rand_buf((size_t)s.OC, 7), *un = zero_buf(B.no), *vn = rand_buf(B.nw, 8);
            memset(on, 0xFF, B.no * sizeof(float)); /* NaN: a missed element cannot pass */
            memset(un, 0xFF, B.no * sizeof(float));
            for (int ith = 0; ith < nth; ith++) {
                conv_forward(a, on, B.inp, B.w, B.b, &s, E.plan, E.scratch[0], ith, nth);
                conv_forward(a, un, B.inp, B.w, NULL, &s, E.plan, E.scratch[0], ith, nth);
                conv_backward_data(a, dn, B.dout, B.w, &s, E.plan, E.scratch[1], ith, nth);
                conv_backward_params(a, wn, bn, B.inp, B.dout, &s, E.plan, E.scratch[2], ith, nth);
                conv_backward_params(a, vn, NULL, B.inp, B.dout, &s, E.plan, E.scratch[2], ith, nth);
            }
            cr_expect(!memcmp(v1, vn, B.nw * sizeof(float)), "%s dw (no db) case %d nth %d not bitwise",
                      conv_algo_name(a), ci, nth);
            cr_expect(!memcmp(o1, on, B.no * sizeof(float)), "%s forward case %d nth %d not bitwise", conv_algo_name(a),
                      ci, nth);
            cr_expect(!memcmp(u1, un, B.no * sizeof(float)), "%s forward (no bias) case %d nth %d not bitwise",
                      conv_algo_name(a), ci, nth);
            cr_expect(!memcmp(d1, dn, B.ni * sizeof(float)), "%s backward_data case %d nth %d not bitwise",
                      conv_algo_name(a), ci, nth);
            cr_expect(!memcmp(w1, wn, B.nw * sizeof(float)), "%s dw case %d nth %d not bitwise", conv_algo_name(a), ci,
                      nth);
            cr_expect(!memcmp(b1, bn, (size_t)s.OC * sizeof(float)), "%s db case %d nth %d not bitwise",
                      conv_algo_name(a), ci, nth);
            free(on), free(dn), free(wn), free(bn), free(un), free(vn);
            free_env(&E);
        }
        free(o1), free(d1), free(w1), free(b1), free(u1), free(v1);
        free_env(&E1);
        free_bufs(&B);
    }
}

static void check_partition(enum conv_algo a) { check_partition_on(a, cases, N_CASES); }

Test(conv, gemm1x1_partition_is_bitwise) { check_partition(CONV_ALGO_GEMM1X1); }
Test(conv, im2col_partition_is_bitwise) { check_partition(CONV_ALGO_IM2COL); }
Test(conv, direct_partition_is_bitwise) { check_partition(CONV_ALGO_DIRECT); }
Test(conv, fft_partition_is_bitwise) { check_partition(CONV_ALGO_FFT); }

/* The work split of a 16-core machine (TB_PAR_UNITS, read once a process: each Criterion test is one), whose
 * GEMM1X1 tiles are narrower and shorter where the 2-core ones are fewer than cores, and whose two-phase
 * weight gradients have more, shorter row chunks: against the references, bitwise for any nth, every part
 * written. Shapes of EfficientNet's late layers at 32×32 (M = N at 1×1, 2×2) and stage 3's 2,048 rows. */
Test(conv, many_core_split_matches_reference_and_is_bitwise, .timeout = 60)
{
    setenv("TB_PAR_UNITS", "16", 1);
    static const struct cv_case many[] = {
        {128, 1, 1, 1152, 192, 1, 1, 1, -1}, /* 128 rows × 192 columns: 8 row × 6 column tiles, not 2 */
        {128, 1, 1, 192, 1152, 1, 1, 1, -1}, /* the expansion: 16 column tiles; its data gradient 24 */
        {32, 2, 2, 320, 1280, 1, 1, 1, -1},  /* 128 rows: the head */
        {24, 3, 3, 100, 40, 1, 1, 1, -1},    /* 216 rows, 40 columns: 13 row tiles of 16–24 rows */
        {128, 4, 4, 40, 240, 1, 1, 1, -1},   /* 2,048 rows: 16 weight-gradient chunks, not 4 */
    };
    const int n = (int)(sizeof many / sizeof many[0]);
    const struct conv_shape s4 = make_shape(&many[4]);
    cr_assert_eq(conv_params_row_chunks(&s4), 16, "2,048 rows on 16 cores: %d chunks", conv_params_row_chunks(&s4));
    check_algo_against_ref_on(CONV_ALGO_GEMM1X1, many, n);
    check_partition_on(CONV_ALGO_GEMM1X1, many, n);
    struct cv_bufs B = make_bufs(&s4, 900);
    float *ref_w = rand_buf(B.nw, 95), *w1 = rand_buf(B.nw, 95), *w7 = rand_buf(B.nw, 95);
    float *part = malloc(conv_params_part_floats(&s4) * sizeof(float));
    cr_assert(part);
    conv_backward_params_ref(ref_w, NULL, B.inp, B.dout, &s4);
    for (int pass = 0; pass < 2; pass++) {
        const int nth = pass ? 7 : 1;
        float *w = pass ? w7 : w1;
        memset(part, 0xFF, conv_params_part_floats(&s4) * sizeof(float));
        for (int ith = 0; ith < nth; ith++) conv_backward_params_gemm1x1_chunks(part, B.inp, B.dout, &s4, ith, nth);
        for (int ith = 0; ith < nth; ith++) conv_backward_params_gemm1x1_finish(w, NULL, part, B.dout, &s4, 1, ith, nth);
    }
    cr_expect_leq(tu_rel_err(w1, ref_w, B.nw), 1e-5, "16 chunks: dw rel err %g", tu_rel_err(w1, ref_w, B.nw));
    cr_expect(!memcmp(w1, w7, B.nw * sizeof(float)), "16 chunks: nth 7 not bitwise");
    free(ref_w), free(w1), free(w7), free(part);
    free_bufs(&B);
}

/* acc 0 (the executor's first write into a layer's gradients, which it no longer zeroes): GEMM1X1's weight and
 * bias gradients are written, never read — filled with NaN first — and hold the bits of acc 1 over zeros, in
 * the two-phase form (row-chunk parts, then their sum) and the single sgemm call (beta 0), for nth 1 and 3. */
Test(conv, gemm1x1_params_written_are_the_bits_added_to_zeros)
{
    static const struct cv_case cases[] = {
        {3, 32, 33, 70, 17, 1, 1, 1, -1},   /* 6 row chunks, C > OC */
        {2, 24, 24, 24, 40, 1, 1, 1, -1},   /* 2 row chunks */
        {128, 1, 1, 1152, 192, 1, 1, 1, -1}, /* few rows: one sgemm per column block */
        {8, 2, 2, 192, 1152, 1, 1, 1, -1},   /* OC > C */
    };
    for (int ci = 0; ci < (int)(sizeof cases / sizeof *cases); ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 940);
        const int K = conv_params_row_chunks(&s);
        cr_assert_eq(K > 0, ci < 2, "case %d: %d row chunks", ci, K);
        float *part = K ? malloc(conv_params_part_floats(&s) * sizeof(float)) : NULL;
        float *w[2], *b[2];
        for (int nth = 1; nth <= 3; nth += 2) {
            for (int acc = 0; acc < 2; acc++) {
                w[acc] = malloc(B.nw * sizeof(float)), b[acc] = malloc((size_t)s.OC * sizeof(float));
                cr_assert(w[acc] && b[acc] && (part || !K));
                memset(w[acc], acc ? 0 : 0xff, B.nw * sizeof(float)); /* acc 0: NaN, must be written */
                memset(b[acc], acc ? 0 : 0xff, (size_t)s.OC * sizeof(float));
                if (K) {
                    for (int ith = 0; ith < nth; ith++)
                        conv_backward_params_gemm1x1_chunks(part, B.inp, B.dout, &s, ith, nth);
                    for (int ith = 0; ith < nth; ith++)
                        conv_backward_params_gemm1x1_finish(w[acc], b[acc], part, B.dout, &s, acc, ith, nth);
                } else {
                    for (int ith = 0; ith < nth; ith++)
                        conv_backward_params_gemm1x1_acc(w[acc], b[acc], B.inp, B.dout, &s, acc, ith, nth);
                }
            }
            char what[64];
            snprintf(what, sizeof what, "case %d nth %d: dw", ci, nth), tu_assert_bitwise(w[0], w[1], B.nw, what);
            snprintf(what, sizeof what, "case %d nth %d: db", ci, nth), tu_assert_bitwise(b[0], b[1], (size_t)s.OC, what);
            for (int acc = 0; acc < 2; acc++) free(w[acc]), free(b[acc]);
        }
        free(part);
        free_bufs(&B);
    }
}

/* L = Σ out·R in double, from an independent double forward; one element of inp, w or b perturbed. */
static double loss_double(const struct cv_bufs *B, const struct conv_shape *s, size_t pi, double di, size_t pw,
                          double dw_, int pb, double db_)
{
    const int Cg = s->C / s->groups, OCg = s->OC / s->groups;
    double L = 0.0;
    for (int n = 0; n < s->N; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int o = 0; o < s->OC; o++) {
                    const int g = o / OCg;
                    double acc = (double)B->b[o] + (o == pb ? db_ : 0.0);
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++) {
                            int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            for (int c = 0; c < Cg; c++) {
                                size_t ii = (((size_t)n * s->H + iy) * s->W + ix) * s->C + g * Cg + c;
                                size_t wi = (((size_t)ky * s->KW + kx) * Cg + c) * s->OC + o;
                                acc += ((double)B->inp[ii] + (ii == pi ? di : 0.0)) *
                                       ((double)B->w[wi] + (wi == pw ? dw_ : 0.0));
                            }
                        }
                    L += acc * B->dout[(((size_t)n * s->OH + oy) * s->OW + ox) * s->OC + o];
                }
    return L;
}

Test(conv, reference_gradients_match_central_differences)
{
    const double h = 1e-3;
    const size_t NONE = (size_t)-1;
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 100);
        float *dinp = zero_buf(B.ni), *dw = zero_buf(B.nw), *db = zero_buf((size_t)s.OC);
        conv_backward_data_ref(dinp, B.dout, B.w, &s);
        conv_backward_params_ref(dw, db, B.inp, B.dout, &s);
        for (int k = 0; k < 5; k++) {
            size_t i = (size_t)rng_below(7, (uint64_t)ci, (uint64_t)k, B.ni);
            double fd =
                (loss_double(&B, &s, i, h, NONE, 0, -1, 0) - loss_double(&B, &s, i, -h, NONE, 0, -1, 0)) / (2 * h);
            cr_expect(fabs(fd - dinp[i]) <= 1e-4 * (fabs(fd) + 1.0), "case %d dinp[%zu]: fd %g analytic %g", ci, i, fd,
                      (double)dinp[i]);
            size_t j = (size_t)rng_below(8, (uint64_t)ci, (uint64_t)k, B.nw);
            fd = (loss_double(&B, &s, NONE, 0, j, h, -1, 0) - loss_double(&B, &s, NONE, 0, j, -h, -1, 0)) / (2 * h);
            cr_expect(fabs(fd - dw[j]) <= 1e-4 * (fabs(fd) + 1.0), "case %d dw[%zu]: fd %g analytic %g", ci, j, fd,
                      (double)dw[j]);
            int o = (int)rng_below(9, (uint64_t)ci, (uint64_t)k, (uint64_t)s.OC);
            fd = (loss_double(&B, &s, NONE, 0, NONE, 0, o, h) - loss_double(&B, &s, NONE, 0, NONE, 0, o, -h)) / (2 * h);
            cr_expect(fabs(fd - db[o]) <= 1e-4 * (fabs(fd) + 1.0), "case %d db[%d]: fd %g analytic %g", ci, o, fd,
                      (double)db[o]);
        }
        free(dinp), free(dw), free(db);
        free_bufs(&B);
    }
}

Test(conv, reference_forward_matches_double)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 200);
        float *out = zero_buf(B.no);
        conv_forward_ref(out, B.inp, B.w, B.b, &s);
        double L = 0.0;
        for (size_t i = 0; i < B.no; i++) L += (double)out[i] * B.dout[i];
        const double Ld = loss_double(&B, &s, (size_t)-1, 0, (size_t)-1, 0, -1, 0);
        cr_expect(fabs(L - Ld) <= 1e-5 * (fabs(Ld) + 1.0), "case %d: %g vs %g", ci, L, Ld);
        free(out);
        free_bufs(&B);
    }
}

Test(conv, algorithm_table_and_support)
{
    struct conv_shape s;
    cr_assert_eq(conv_shape_init(&s, 2, 8, 8, 16, 32, 1, 1, 1, 1), 0);
    cr_expect(conv_algo_supported(CONV_ALGO_GEMM1X1, &s));
    cr_expect(conv_algo_supported(CONV_ALGO_FFT, &s));
    cr_assert_eq(conv_shape_init(&s, 2, 8, 8, 16, 32, 3, 3, 2, 1), 0);
    cr_expect(!conv_algo_supported(CONV_ALGO_GEMM1X1, &s));
    cr_expect(!conv_algo_supported(CONV_ALGO_FFT, &s));
    cr_expect(conv_algo_supported(CONV_ALGO_IM2COL, &s));
    cr_expect(conv_algo_supported(CONV_ALGO_DIRECT, &s));
    cr_expect_eq(conv_fft_scratch_floats(CONV_PASS_FORWARD, &s, 1), 0);
    struct conv_fft_plan *p = (struct conv_fft_plan *)&s;
    cr_expect_eq(conv_fft_plan_create(&p, &s), TB_EUNSUPPORTED);
    cr_expect_null(p);
    for (int a = 0; a < CONV_ALGO_COUNT; a++) {
        cr_expect_not_null(conv_algos[a].name);
        cr_expect_not_null(conv_algos[a].forward);
        cr_expect_not_null(conv_algos[a].backward_data);
        cr_expect_not_null(conv_algos[a].backward_params);
        cr_expect_str_eq(conv_algo_name((enum conv_algo)a), conv_algos[a].name);
    }
    cr_expect(conv_algos[CONV_ALGO_FFT].needs_plan);
    cr_expect(!conv_algos[CONV_ALGO_IM2COL].needs_plan);
}

Test(conv, shape_validation)
{
    struct conv_shape s;
    /* torchvision EfficientNet-B0 stem: 224 → 112 with pad 1 */
    cr_expect_eq(conv_shape_init(&s, 8, 224, 224, 3, 32, 3, 3, 2, 1), 0);
    cr_expect_eq(s.OH, 112);
    cr_expect_eq(s.OW, 112);
    cr_expect_eq(s.pad, 1);
    cr_expect_eq(conv_shape_init(&s, 8, 15, 15, 32, 32, 5, 5, 2, 2), 0);
    cr_expect_eq(s.OH, 8);
    cr_expect_eq(s.pad, 2);
    cr_expect(conv_flops(&s) == 2.0 * 8 * 8 * 8 * 32 * 25 * 16);
    cr_expect_eq(conv_shape_init(&s, 8, 16, 16, 30, 32, 3, 3, 1, 4), TB_EINVAL); /* 4 does not divide 30 */
    cr_expect_eq(conv_shape_init(&s, 0, 16, 16, 32, 32, 3, 3, 1, 1), TB_EINVAL);
    cr_expect_eq(conv_shape_init(&s, 1, 16, 16, 32, 32, 3, 5, 1, 1), TB_EINVAL); /* non-square */
    s = (struct conv_shape){
        .N = 1, .H = 2, .W = 2, .C = 4, .OC = 4, .KH = 7, .KW = 7, .stride = 1, .pad = 1, .groups = 1};
    cr_expect_eq(conv_shape_fill(&s), TB_EINVAL); /* kernel larger than the padded input */
}

/* FFT with channel blocks smaller than the group (the product buffer exceeds its budget): against
 * im2col (itself held to the reference above), and bitwise across nth. */
Test(conv, fft_multi_block_matches_im2col)
{
    const struct cv_case c = {1, 40, 40, 96, 96, 3, 1, 1, -1};
    const struct conv_shape s = make_shape(&c);
    struct cv_bufs B = make_bufs(&s, 77);
    struct cv_env F = make_env(CONV_ALGO_FFT, &s, 1), I = make_env(CONV_ALGO_IM2COL, &s, 1);
    float *o1 = zero_buf(B.no), *o2 = zero_buf(B.no), *d1 = zero_buf(B.ni), *d2 = zero_buf(B.ni);
    float *w1 = zero_buf(B.nw), *w2 = zero_buf(B.nw);
    conv_forward(CONV_ALGO_FFT, o1, B.inp, B.w, B.b, &s, F.plan, F.scratch[0], 0, 1);
    conv_forward(CONV_ALGO_IM2COL, o2, B.inp, B.w, B.b, &s, NULL, I.scratch[0], 0, 1);
    cr_expect_leq(tu_rel_err(o1, o2, B.no), 1e-4, "forward rel err %g", tu_rel_err(o1, o2, B.no));
    conv_backward_data(CONV_ALGO_FFT, d1, B.dout, B.w, &s, F.plan, F.scratch[1], 0, 1);
    conv_backward_data(CONV_ALGO_IM2COL, d2, B.dout, B.w, &s, NULL, I.scratch[1], 0, 1);
    cr_expect_leq(tu_rel_err(d1, d2, B.ni), 1e-4, "backward_data rel err %g", tu_rel_err(d1, d2, B.ni));
    conv_backward_params(CONV_ALGO_FFT, w1, NULL, B.inp, B.dout, &s, F.plan, F.scratch[2], 0, 1);
    conv_backward_params(CONV_ALGO_IM2COL, w2, NULL, B.inp, B.dout, &s, NULL, I.scratch[2], 0, 1);
    cr_expect_leq(tu_rel_err(w1, w2, B.nw), 1e-4, "backward_params rel err %g", tu_rel_err(w1, w2, B.nw));
    /* nth = 3 in turn: bitwise equal to nth = 1 */
    struct cv_env F3 = make_env(CONV_ALGO_FFT, &s, 3);
    float *o3 = zero_buf(B.no), *d3 = zero_buf(B.ni), *w3 = zero_buf(B.nw);
    for (int ith = 0; ith < 3; ith++) {
        conv_forward(CONV_ALGO_FFT, o3, B.inp, B.w, B.b, &s, F3.plan, F3.scratch[0], ith, 3);
        conv_backward_data(CONV_ALGO_FFT, d3, B.dout, B.w, &s, F3.plan, F3.scratch[1], ith, 3);
        conv_backward_params(CONV_ALGO_FFT, w3, NULL, B.inp, B.dout, &s, F3.plan, F3.scratch[2], ith, 3);
    }
    cr_expect(!memcmp(o1, o3, B.no * sizeof(float)), "forward not bitwise for nth 3");
    cr_expect(!memcmp(d1, d3, B.ni * sizeof(float)), "backward_data not bitwise for nth 3");
    cr_expect(!memcmp(w1, w3, B.nw * sizeof(float)), "backward_params not bitwise for nth 3");
    free(o1), free(o2), free(o3), free(d1), free(d2), free(d3), free(w1), free(w2), free(w3);
    free_env(&F), free_env(&I), free_env(&F3);
    free_bufs(&B);
}

/* The two-phase GEMM1X1 weight gradient (row-chunk parts, then their sum): on shapes that use it, it
 * matches the reference and gives the same bits for nth ∈ {1,2,3,7} (all ith run phase 1, then phase 2). */
Test(conv, gemm1x1_row_chunk_params_match_reference_and_are_bitwise)
{
    static const struct cv_case chunk_cases[] = {
        {2, 24, 24, 24, 40, 1, 1, 1, -1}, /* M = 1152: 2 chunks */
        {3, 32, 33, 70, 17, 1, 1, 1, -1}, /* 6 chunks, C > OC, tails in both */
        {8, 32, 40, 16, 96, 1, 1, 1, -1}, /* 16 chunks (the cap) */
    };
    static const int nths[] = {1, 2, 3, 7};
    cr_assert_eq(conv_params_row_chunks(&(struct conv_shape){.N = 128, .H = 1, .W = 1, .C = 1152, .OC = 192,
                                                               .KH = 1, .KW = 1, .stride = 1, .groups = 1}),
                 0, "few rows: the single call");
    for (int ci = 0; ci < 3; ci++) {
        const struct conv_shape s = make_shape(&chunk_cases[ci]);
        const int K = conv_params_row_chunks(&s);
        cr_assert(K >= 2, "case %d: %d chunks", ci, K);
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 700);
        float *ref_w = rand_buf(B.nw, 98), *ref_b = rand_buf((size_t)s.OC, 97), *w1 = NULL, *b1 = NULL;
        conv_backward_params_ref(ref_w, ref_b, B.inp, B.dout, &s);
        float *part = malloc(conv_params_part_floats(&s) * sizeof(float));
        cr_assert(part);
        for (int k = 0; k < 4; k++) {
            const int nth = nths[k];
            float *w = rand_buf(B.nw, 98), *b = rand_buf((size_t)s.OC, 97);
            memset(part, 0xFF, conv_params_part_floats(&s) * sizeof(float)); /* NaN: every part is written */
            for (int ith = 0; ith < nth; ith++) conv_backward_params_gemm1x1_chunks(part, B.inp, B.dout, &s, ith, nth);
            for (int ith = 0; ith < nth; ith++) conv_backward_params_gemm1x1_finish(w, b, part, B.dout, &s, 1, ith, nth);
            if (nth == 1) {
                cr_expect_leq(tu_rel_err(w, ref_w, B.nw), 1e-5, "case %d dw rel err %g", ci,
                              tu_rel_err(w, ref_w, B.nw));
                cr_expect_leq(tu_rel_err(b, ref_b, (size_t)s.OC), 1e-5, "case %d db", ci);
                w1 = w, b1 = b;
                continue;
            }
            cr_expect(!memcmp(w, w1, B.nw * sizeof(float)), "case %d dw nth %d not bitwise", ci, nth);
            cr_expect(!memcmp(b, b1, (size_t)s.OC * sizeof(float)), "case %d db nth %d not bitwise", ci, nth);
            free(w), free(b);
        }
        free(w1), free(b1), free(part), free(ref_w), free(ref_b);
        free_bufs(&B);
    }
}

/* The two-phase stem weight gradient (row-chunk parts per (chunk, unit pair), then their sum): on the
 * shapes that use it, it matches the reference, gives the same bits for nth ∈ {1,2,3,7} (all ith run phase
 * 1, then phase 2) and writes every part; few rows, a bias or another shape keep the single call. Where the
 * kernel is not built (no 16-lane vectors) the test reports itself skipped rather than passing unchecked. */
Test(conv, stem_row_chunk_params_match_reference_and_are_bitwise)
{
    static const struct cv_case stem_cases[] = {
        {4, 33, 31, 3, 32, 3, 2, 1, -1},   /* 68 output rows: 2 chunks, odd sizes */
        {8, 32, 32, 3, 48, 3, 1, 1, -1},   /* 256 rows: 8 chunks, an odd unit (3 units: a pair and one) */
        {16, 64, 48, 3, 32, 3, 2, 1, -1},  /* 512 rows: 16 chunks (the cap) */
    };
    static const int nths[] = {1, 2, 3, 7};
    const struct conv_shape few = make_shape(&(struct cv_case){1, 16, 16, 3, 32, 3, 2, 1, -1});
    cr_assert_eq(conv_direct_params_row_chunks(&few), 0, "8 rows: the single call");
    cr_assert_eq(conv_params_parts_floats(CONV_ALGO_IM2COL, &few), 0);
    int ran = 0, not_built = 0;
    for (int ci = 0; ci < 3; ci++) {
        const struct conv_shape s = make_shape(&stem_cases[ci]);
        const int K = conv_direct_params_row_chunks(&s);
        if (K == 0) { /* the stem kernel needs 16-lane vectors: other targets keep the single call */
            cr_log_info("stem two-phase not built for this vector width: case %d skipped", ci);
            not_built++;
            continue;
        }
        ran++;
        cr_assert(K >= 2, "case %d: %d chunks", ci, K);
        const size_t nparts = conv_direct_params_part_floats(&s);
        cr_assert_eq(nparts, conv_params_parts_floats(CONV_ALGO_DIRECT, &s));
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 800);
        float *ref_w = rand_buf(B.nw, 96), *w1 = NULL;
        conv_backward_params_ref(ref_w, NULL, B.inp, B.dout, &s);
        float *part = malloc(nparts * sizeof(float));
        cr_assert(part);
        for (int k = 0; k < 4; k++) {
            const int nth = nths[k];
            float *w = rand_buf(B.nw, 96);
            memset(part, 0xFF, nparts * sizeof(float)); /* NaN: every part is written */
            for (int ith = 0; ith < nth; ith++) conv_backward_params_direct_chunks(part, B.inp, B.dout, &s, ith, nth);
            for (int ith = 0; ith < nth; ith++) conv_backward_params_direct_finish(w, part, &s, ith, nth);
            if (nth == 1) {
                cr_expect_leq(tu_rel_err(w, ref_w, B.nw), 1e-5, "case %d dw rel err %g", ci,
                              tu_rel_err(w, ref_w, B.nw));
                w1 = w;
                continue;
            }
            cr_expect(!memcmp(w, w1, B.nw * sizeof(float)), "case %d dw nth %d not bitwise", ci, nth);
            free(w);
        }
        free(w1), free(part), free(ref_w);
        free_bufs(&B);
    }
    /* Built for one case, built for all: each is a shape the kernel takes. */
    cr_assert(ran == 0 || not_built == 0, "the stem two-phase kernel took %d of the 3 stem shapes", ran);
    if (ran == 0) cr_skip_test("the stem two-phase kernel is not built for this vector width (it needs 16-lane "
                               "vectors): none of the 3 cases ran");
}

/* The data gradient and phase 1 of the weight gradient in one pass over dout give what the separate
 * kernels give, bit for bit, for any nth: dinp overwritten (NaN-filled start) or accumulated onto random
 * values, and every part; also when dout is formed piece by piece from a BatchNorm's dz and x (the
 * separate kernels then read the whole dout bn_backward_rows makes). Shapes whose data gradient sgemm runs
 * are refused. */
Test(conv, gemm1x1_fused_backward_matches_separate_kernels)
{
    static const struct cv_case fc[] = {
        {16, 14, 14, 24, 144, 1, 1, 1, -1}, /* an expansion: 6 chunks, 256-row pieces and a short one */
        {4, 16, 16, 40, 240, 1, 1, 1, -1},  /* C·OC near gemm_rows' limit */
        {2, 33, 31, 16, 96, 1, 1, 1, -1},   /* rows not a multiple of 64 in any chunk */
        {3, 20, 20, 70, 17, 1, 1, 1, -1},   /* C > 48: overwrite only */
    };
    static const int nths[] = {1, 2, 3, 7};
    for (int ci = 0; ci < 4; ci++) {
        const struct conv_shape s = make_shape(&fc[ci]);
        for (int acc = 0; acc < 2; acc++) {
            if (!conv_backward_gemm1x1_fusable(&s, acc)) {
                cr_assert(ci == 3 && acc == 1, "case %d acc %d refused", ci, acc);
                continue;
            }
            struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 900);
            const size_t np = conv_params_part_floats(&s), M = (size_t)s.N * s.H * s.W;
            /* A BatchNorm after the convolution: dz, its input x, save (μ, rstd) and coef (a, c2, k0). */
            float *dz = rand_buf(B.no, 41), *bx = rand_buf(B.no, 42), *save = rand_buf(2 * (size_t)s.OC, 43);
            float *coef = rand_buf(3 * (size_t)s.OC, 44);
            struct conv_bn_dout bd = {dz, bx, save, coef};
            float *d0 = rand_buf(B.ni, 31), *d1 = malloc(B.ni * sizeof(float)), *p0 = malloc(np * sizeof(float));
            float *p1 = malloc(np * sizeof(float));
            const size_t ks = conv_backward_gemm1x1_fused_scratch_floats(&s, 0);
            float *scr = malloc(7 * ks * sizeof(float)), *d0b = malloc(B.ni * sizeof(float));
            float *p0b = malloc(np * sizeof(float)), *dob = malloc(B.no * sizeof(float));
            cr_assert(d1 && p0 && p1 && scr && d0b && p0b && dob);
            memcpy(d0b, d0, B.ni * sizeof(float));
            if (acc) conv_backward_data_gemm1x1(d0, B.dout, B.w, &s, NULL, scr, 0, 1);
            else conv_backward_data_gemm1x1_overwrite(d0, B.dout, B.w, &s, scr, 0, 1);
            conv_backward_params_gemm1x1_chunks(p0, B.inp, B.dout, &s, 0, 1);
            bn_backward_rows(dob, dz, bx, save, coef, M, s.OC);
            if (acc) conv_backward_data_gemm1x1(d0b, dob, B.w, &s, NULL, scr, 0, 1);
            else conv_backward_data_gemm1x1_overwrite(d0b, dob, B.w, &s, scr, 0, 1);
            conv_backward_params_gemm1x1_chunks(p0b, B.inp, dob, &s, 0, 1);
            for (int k = 0; k < 8; k++) {
                const int nth = nths[k % 4], viabn = k >= 4;
                if (acc) {
                    float *init = rand_buf(B.ni, 31);
                    memcpy(d1, init, B.ni * sizeof(float));
                    free(init);
                } else {
                    memset(d1, 0xFF, B.ni * sizeof(float));
                }
                memset(p1, 0xFF, np * sizeof(float));
                for (int ith = 0; ith < nth; ith++)
                    conv_backward_gemm1x1_fused_chunks(d1, acc, p1, B.inp, viabn ? NULL : B.dout, viabn ? &bd : NULL,
                                                       NULL, B.w, &s, scr + (size_t)ith * ks, ith, nth);
                char what[64];
                snprintf(what, sizeof what, "case %d acc %d nth %d bn %d: dinp", ci, acc, nth, viabn);
                tu_assert_bitwise(d1, viabn ? d0b : d0, B.ni, what);
                snprintf(what, sizeof what, "case %d acc %d nth %d bn %d: part", ci, acc, nth, viabn);
                tu_assert_bitwise(p1, viabn ? p0b : p0, np, what);
            }
            free(d0), free(d1), free(p0), free(p1), free(scr), free(d0b), free(p0b), free(dob);
            free(dz), free(bx), free(save), free(coef);
            free_bufs(&B);
        }
    }
}

/* GEMM1X1 backward-data with β = 0: every element written (NaN-filled start), the values of the
 * accumulating kernel applied to zeros, and the same bits for nth ∈ {2,3,7} as for nth = 1. */
Test(conv, gemm1x1_backward_data_overwrite)
{
    static const int nths[] = {1, 2, 3, 7};
    int ran = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        if (!conv_algo_supported(CONV_ALGO_GEMM1X1, &s)) continue;
        ran++;
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 900);
        struct cv_env E = make_env(CONV_ALGO_GEMM1X1, &s, 1);
        float *ref = zero_buf(B.ni);
        conv_backward_data_gemm1x1(ref, B.dout, B.w, &s, NULL, E.scratch[1], 0, 1);
        float *d1 = NULL;
        for (int k = 0; k < 4; k++) {
            float *d = zero_buf(B.ni);
            memset(d, 0xFF, B.ni * sizeof(float));
            for (int ith = 0; ith < nths[k]; ith++)
                conv_backward_data_gemm1x1_overwrite(d, B.dout, B.w, &s, E.scratch[1], ith, nths[k]);
            if (k == 0) {
                /* Wide dinp accumulates through sgemm but is overwritten by gemm_rows: other rounding. */
                cr_expect_leq(tu_rel_err(d, ref, B.ni), 1e-6, "case %d rel err %g", ci, tu_rel_err(d, ref, B.ni));
                d1 = d;
                continue;
            }
            cr_expect(!memcmp(d, d1, B.ni * sizeof(float)), "case %d nth %d not bitwise", ci, nths[k]);
            free(d);
        }
        free(ref), free(d1);
        free_env(&E);
        free_bufs(&B);
    }
    cr_assert_gt(ran, 0);
}

/* Outputs of 16 MiB and more are written with non-temporal stores (forward out for 8→64 channels,
 * backward dinp for 64→8): same values as the reference, same bits for nth 1 and 3, and the
 * overwrite kernel writes every element. */
Test(conv, gemm1x1_streamed_outputs_match_reference, .timeout = 60)
{
    static const struct cv_case big[] = {{1, 256, 256, 8, 64, 1, 1, 1, -1}, {1, 256, 256, 64, 8, 1, 1, 1, -1}};
    for (int ci = 0; ci < 2; ci++) {
        const struct conv_shape s = make_shape(&big[ci]);
        struct cv_bufs B = make_bufs(&s, (uint64_t)ci + 1100);
        struct cv_env E = make_env(CONV_ALGO_GEMM1X1, &s, 3);
        /* 64-byte aligned outputs: the kernels stream only to aligned rows. */
        float *o = aligned_alloc(64, B.no * sizeof(float)), *o3 = aligned_alloc(64, B.no * sizeof(float));
        float *d = aligned_alloc(64, B.ni * sizeof(float)), *d3 = aligned_alloc(64, B.ni * sizeof(float));
        float *oref = zero_buf(B.no), *dref = rand_buf(B.ni, 5), *d0 = rand_buf(B.ni, 5);
        cr_assert(o && o3 && d && d3);
        memcpy(d, d0, B.ni * sizeof(float));
        conv_forward(CONV_ALGO_GEMM1X1, o, B.inp, B.w, NULL, &s, NULL, E.scratch[0], 0, 1);
        memset(o3, 0xFF, B.no * sizeof(float));
        for (int ith = 0; ith < 3; ith++) conv_forward(CONV_ALGO_GEMM1X1, o3, B.inp, B.w, NULL, &s, NULL, NULL, ith, 3);
        conv_forward_ref(oref, B.inp, B.w, NULL, &s);
        cr_expect_leq(tu_rel_err(o, oref, B.no), 1e-5, "case %d forward rel err %g", ci, tu_rel_err(o, oref, B.no));
        cr_expect(!memcmp(o, o3, B.no * sizeof(float)), "case %d forward nth 3 not bitwise", ci);
        conv_backward_data(CONV_ALGO_GEMM1X1, d, B.dout, B.w, &s, NULL, E.scratch[1], 0, 1);
        conv_backward_data_ref(dref, B.dout, B.w, &s);
        cr_expect_leq(tu_rel_err(d, dref, B.ni), 1e-5, "case %d backward_data rel err %g", ci,
                      tu_rel_err(d, dref, B.ni));
        memset(d3, 0xFF, B.ni * sizeof(float));
        for (int ith = 0; ith < 3; ith++)
            conv_backward_data_gemm1x1_overwrite(d3, B.dout, B.w, &s, E.scratch[1], ith, 3);
        memset(dref, 0, B.ni * sizeof(float));
        conv_backward_data_ref(dref, B.dout, B.w, &s);
        cr_expect_leq(tu_rel_err(d3, dref, B.ni), 1e-5, "case %d overwrite rel err %g", ci, tu_rel_err(d3, dref, B.ni));
        free(o), free(o3), free(oref), free(d), free(dref), free(d3), free(d0);
        free_env(&E);
        free_bufs(&B);
    }
}

/* The SE scale formed in the projection's rows (conv_forward_gemm1x1_bn_se, and the one-pass backward with a
 * conv_se_rows) gives what se_scale_forward then the convolution, and the convolution's backward then
 * se_scale_backward's dscale give, bit for bit, for any nth: out and the statistics; dinp, the weight-gradient
 * parts and dscale, with dout read or formed from a BatchNorm's. Shapes: the 32×32 blocks 2 and 3 at batch 16,
 * 6×6 (backward pieces ending mid-sample where its chunks hold whole samples), and one whose chunks cut a
 * sample (refused). Forward tiles end mid-sample in every case. */
Test(conv, gemm1x1_se_rows_match_scale_then_conv)
{
    static const int shapes[][5] = {{16, 8, 96, 24, 1},  {16, 8, 144, 24, 1}, {64, 4, 144, 40, 1},
                                    {64, 4, 240, 40, 1}, {32, 6, 144, 24, 1}, {17, 9, 144, 24, 0}};
    static const int nths[] = {1, 2, 3, 7};
    int aligned_seen = 0;
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        struct conv_shape s;
        cr_assert_eq(conv_shape_init(&s, shapes[q][0], shapes[q][1], shapes[q][1], shapes[q][2], shapes[q][3], 1, 1, 1,
                                     1),
                     0);
        const size_t HW = (size_t)s.H * s.W, M = (size_t)s.N * HW, nin = M * (size_t)s.C, nout = M * (size_t)s.OC;
        const size_t nsc = (size_t)s.N * s.C, np = conv_params_part_floats(&s), nb = bn_chunk_doubles(M, s.OC);
        cr_assert(conv_gemm1x1_bn_fusable(&s) && conv_backward_gemm1x1_fusable(&s, 0), "case %zu", q);
        const int aligned = conv_se_rows_aligned(&s, HW);
        /* Chunks follow the machine's cores (TB_PAR_UNITS): the last shape's cut a sample on any of them. */
        if (!shapes[q][4]) {
            cr_expect(!aligned, "case %zu: chunks cutting samples accepted", q);
            continue;
        }
        if (!aligned) continue;
        aligned_seen++;
        float *x = malloc(nin * sizeof(float)), *sc = malloc(nsc * sizeof(float)), *y3 = malloc(nin * sizeof(float));
        float *w = malloc((size_t)s.C * s.OC * sizeof(float)), *dout = malloc(nout * sizeof(float));
        float *y0 = malloc(nout * sizeof(float)), *y1 = malloc(nout * sizeof(float));
        float *d0 = malloc(nin * sizeof(float)), *d1 = malloc(nin * sizeof(float)), *p0 = malloc(np * sizeof(float));
        float *p1 = malloc(np * sizeof(float)), *ds0 = calloc(nsc, sizeof(float)), *ds1 = malloc(nsc * sizeof(float));
        double *b0 = calloc(nb, sizeof(double)), *b1 = calloc(nb, sizeof(double));
        const size_t ks = conv_backward_gemm1x1_fused_scratch_floats(&s, 1);
        const size_t kf = conv_forward_se_rows_scratch_floats(&s), kk = ((ks > kf ? ks : kf) + 15) / 16 * 16;
        float *scr = malloc(7 * kk * sizeof(float));
        cr_assert(x && sc && y3 && w && dout && y0 && y1 && d0 && d1 && p0 && p1 && ds0 && ds1 && b0 && b1 && scr);
        for (size_t i = 0; i < nin; i++) x[i] = 2.0f * rng_uniform(71, q, i) - 1.0f;
        for (size_t i = 0; i < nsc; i++) sc[i] = rng_uniform(72, q, i);
        for (size_t i = 0; i < (size_t)s.C * s.OC; i++) w[i] = 2.0f * rng_uniform(73, q, i) - 1.0f;
        for (size_t i = 0; i < nout; i++) dout[i] = 2.0f * rng_uniform(74, q, i) - 1.0f;
        /* A BatchNorm after the convolution, for the formed-dout variant. */
        float *dz = rand_buf(nout, 45), *bx = rand_buf(nout, 46), *save = rand_buf(2 * (size_t)s.OC, 47);
        float *coef = rand_buf(3 * (size_t)s.OC, 48), *dob = malloc(nout * sizeof(float));
        float *d0b = malloc(nin * sizeof(float)), *p0b = malloc(np * sizeof(float)), *ds0b = calloc(nsc, sizeof(float));
        cr_assert(dz && bx && save && coef && dob && d0b && p0b && ds0b);
        const struct conv_bn_dout bd = {dz, bx, save, coef};
        /* The unfused pair. */
        se_scale_forward(y3, x, sc, s.N, HW, s.C, 0, 1);
        conv_forward_gemm1x1_bn(y0, y3, w, &s, b0, 0, 1);
        conv_backward_gemm1x1_fused_chunks(d0, 0, p0, y3, dout, NULL, NULL, w, &s, scr, 0, 1);
        se_scale_backward(NULL, ds0, d0, x, sc, s.N, HW, s.C, 0, 0, 1);
        bn_backward_rows(dob, dz, bx, save, coef, M, s.OC);
        conv_backward_gemm1x1_fused_chunks(d0b, 0, p0b, y3, dob, NULL, NULL, w, &s, scr, 0, 1);
        se_scale_backward(NULL, ds0b, d0b, x, sc, s.N, HW, s.C, 0, 0, 1);
        const struct conv_se_rows se = {x, sc, ds1, HW};
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            const int nth = nths[t];
            char what[80];
            memset(y1, 0xff, nout * sizeof(float));
            for (int i = 0; i < nth; i++) conv_forward_gemm1x1_bn_se(y1, &se, w, &s, b1, scr + (size_t)i * kk, i, nth);
            snprintf(what, sizeof what, "case %zu nth %d: out", q, nth);
            tu_assert_bitwise(y1, y0, nout, what);
            snprintf(what, sizeof what, "case %zu nth %d: statistics", q, nth);
            tu_assert_bitwise_d(b1, b0, nb, what);
            for (int viabn = 0; viabn < 2; viabn++) {
                memset(d1, 0xff, nin * sizeof(float)), memset(p1, 0xff, np * sizeof(float));
                memset(ds1, 0xff, nsc * sizeof(float));
                for (int i = 0; i < nth; i++)
                    conv_backward_gemm1x1_fused_chunks(d1, 0, p1, NULL, viabn ? NULL : dout, viabn ? &bd : NULL, &se, w,
                                                       &s, scr + (size_t)i * kk, i, nth);
                snprintf(what, sizeof what, "case %zu nth %d bn %d: dinp", q, nth, viabn);
                tu_assert_bitwise(d1, viabn ? d0b : d0, nin, what);
                snprintf(what, sizeof what, "case %zu nth %d bn %d: part", q, nth, viabn);
                tu_assert_bitwise(p1, viabn ? p0b : p0, np, what);
                snprintf(what, sizeof what, "case %zu nth %d bn %d: dscale", q, nth, viabn);
                tu_assert_bitwise(ds1, viabn ? ds0b : ds0, nsc, what);
            }
        }
        free(x), free(sc), free(y3), free(w), free(dout), free(y0), free(y1), free(d0), free(d1), free(p0), free(p1);
        free(ds0), free(ds1), free(b0), free(b1), free(scr), free(dz), free(bx), free(save), free(coef), free(dob);
        free(d0b), free(p0b), free(ds0b);
    }
    cr_assert(aligned_seen >= 4, "only %d of the 5 shapes had sample-aligned chunks", aligned_seen);
}

/* The 1×1 forward that also takes its BatchNorm's statistics writes conv_forward_gemm1x1's outputs and
 * bn_forward_train_chunks' sums of them, bit for bit, for any nth: full and masked-tail column vectors,
 * one chunk and sixteen, and rows that end mid register block. */
Test(conv, gemm1x1_bn_stats_match_unfused)
{
    static const int shapes[][4] = {{16, 14, 24, 144}, {4, 9, 40, 37}, {1, 3, 16, 96}, {16, 7, 96, 24}};
    static const int nths[] = {1, 2, 3, 7};
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        struct conv_shape s;
        cr_assert_eq(conv_shape_init(&s, shapes[q][0], shapes[q][1], shapes[q][1], shapes[q][2], shapes[q][3], 1, 1, 1,
                                     1),
                     0);
        cr_assert(conv_gemm1x1_bn_fusable(&s), "case %zu", q);
        const size_t M = (size_t)s.N * s.H * s.W, nin = M * (size_t)s.C, nout = M * (size_t)s.OC;
        const size_t np = bn_chunk_doubles(M, s.OC);
        float *x = malloc(nin * sizeof(float)), *w = malloc((size_t)s.C * s.OC * sizeof(float));
        float *y0 = malloc(nout * sizeof(float)), *y1 = malloc(nout * sizeof(float));
        double *p0 = calloc(np, sizeof(double)), *p1 = calloc(np, sizeof(double));
        cr_assert(x && w && y0 && y1 && p0 && p1);
        for (size_t i = 0; i < nin; i++) x[i] = 2.0f * rng_uniform(91, q, i) - 1.0f;
        for (size_t i = 0; i < (size_t)s.C * s.OC; i++) w[i] = 2.0f * rng_uniform(92, q, i) - 1.0f;
        conv_forward_gemm1x1(y0, x, w, NULL, &s, NULL, NULL, 0, 1);
        bn_forward_train_chunks(p0, y0, M, s.OC, 0, 1);
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            memset(y1, 0xff, nout * sizeof(float));
            for (int i = 0; i < nths[t]; i++) conv_forward_gemm1x1_bn(y1, x, w, &s, p1, i, nths[t]);
            char what[64];
            snprintf(what, sizeof what, "case %zu nth %d: out", q, nths[t]);
            tu_assert_bitwise(y1, y0, nout, what);
            snprintf(what, sizeof what, "case %zu nth %d: part", q, nths[t]);
            tu_assert_bitwise_d(p1, p0, np, what);
        }
        free(x), free(w), free(y0), free(y1), free(p0), free(p1);
    }
}
