/* test_op_dwconv.c — depthwise convolution: optimised and portable kernels against the naive
 * references, reference gradients against central differences in double, the accumulate contract,
 * bitwise partition invariance for nth ∈ {1,2,3,7}, and an opt-in benchmark (TB_DWCONV_BENCH=1).
 */
#include "test_util.h"

#include <criterion/criterion.h>

#include "op_conv.h"
#include "op_dwconv.h"
#include "op_norm.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* N, H, W, C, K, stride, pad (-1 = EfficientNet (K-1)/2) */
struct dw_case {
    int N, H, W, C, K, S, P;
};

static const struct dw_case cases[] = {
    {2, 9, 11, 19, 3, 1, -1}, {2, 9, 11, 19, 3, 2, -1}, {2, 13, 7, 37, 5, 1, -1}, {1, 13, 7, 37, 5, 2, -1},
    {3, 8, 8, 96, 3, 2, -1},  {2, 6, 5, 33, 5, 2, -1},  {1, 2, 3, 17, 5, 1, -1},  {1, 1, 1, 8, 3, 1, -1},
    {2, 3, 2, 16, 5, 2, -1},  {1, 5, 5, 40, 3, 1, -1},  {2, 7, 9, 21, 7, 1, -1},  {2, 7, 9, 21, 1, 1, -1},
    {1, 9, 8, 20, 3, 3, -1},  {2, 9, 9, 24, 3, 1, 0},   {1, 10, 7, 18, 4, 2, 1},
    /* one column at stride 2: the row has no interior and no right border */
    {1, 1, 1, 16, 5, 2, -1},  {2, 2, 1, 24, 3, 2, -1},
    /* stride 2 with 8 or more output columns: the border-pixel schedule (the others run bordered 8-runs) */
    {1, 5, 19, 24, 3, 2, -1}, {2, 4, 21, 20, 5, 2, -1}, {1, 3, 37, 16, 3, 2, -1},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static struct conv_shape make_shape(const struct dw_case *c)
{
    struct conv_shape s = {.N = c->N, .H = c->H, .W = c->W, .C = c->C, .OC = c->C, .KH = c->K, .KW = c->K,
                           .stride = c->S, .pad = c->P < 0 ? (c->K - 1) / 2 : c->P, .groups = c->C};
    cr_assert_eq(conv_shape_fill(&s), 0);
    cr_assert(dwconv_shape_valid(&s));
    return s;
}

static float *rand_buf(size_t n, uint64_t stream)
{
    float *p = malloc(n * sizeof(float)); /* exact size: sanitizers catch any overrun */
    cr_assert(p);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * rng_uniform(1234, stream, i) - 1.0f;
    return p;
}

static float *zero_buf(size_t n)
{
    float *p = malloc(n * sizeof(float));
    cr_assert(p);
    memset(p, 0, n * sizeof(float));
    return p;
}

struct dw_bufs {
    size_t ni, no, nw;
    float *inp, *w, *b, *dout;
};

/* 64-byte aligned copy of n floats (the engine's arenas are 64-byte aligned; benchmarks use these). */
static float *aligned_copy(const float *src, size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    cr_assert(p);
    memcpy(p, src, n * sizeof(float));
    return p;
}

static struct dw_bufs make_bufs(const struct conv_shape *s, uint64_t seed)
{
    struct dw_bufs B;
    B.ni = (size_t)s->N * s->H * s->W * s->C;
    B.no = (size_t)s->N * s->OH * s->OW * s->C;
    B.nw = (size_t)s->KH * s->KW * s->C;
    B.inp = rand_buf(B.ni, seed * 8 + 1);
    B.w = rand_buf(B.nw, seed * 8 + 2);
    B.b = rand_buf((size_t)s->C, seed * 8 + 3);
    B.dout = rand_buf(B.no, seed * 8 + 4);
    return B;
}

static void free_bufs(struct dw_bufs *B)
{
    free(B->inp), free(B->w), free(B->b), free(B->dout);
}

typedef void (*fwd_fn)(float *, const float *, const float *, const float *, const struct conv_shape *, int, int);
typedef void (*bwd_fn)(float *, const float *, const float *, const struct conv_shape *, int, int, int);
typedef void (*par_fn)(float *, float *, const float *, const float *, const struct conv_shape *, int, int);

struct dw_impl {
    const char *name;
    fwd_fn fwd;
    bwd_fn bwd;
    par_fn par;
};
static const struct dw_impl impls[] = {
    {"dispatch", dwconv_forward, dwconv_backward_data, dwconv_backward_params},
    {"portable", dwconv_forward_portable, dwconv_backward_data_portable, dwconv_backward_params_portable},
};

static void check_against_ref(const struct dw_impl *im)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci);
        float *o1 = zero_buf(B.no), *o2 = zero_buf(B.no);
        for (int bias = 0; bias < 2; bias++) {
            im->fwd(o1, B.inp, B.w, bias ? B.b : NULL, &s, 0, 1);
            dwconv_forward_ref(o2, B.inp, B.w, bias ? B.b : NULL, &s);
            cr_expect_leq(tu_rel_err(o1, o2, B.no), 1e-4, "%s forward case %d bias %d: rel err %g", im->name, ci, bias,
                          tu_rel_err(o1, o2, B.no));
        }
        /* Backward starts from non-zero gradients to check +=. */
        float *d1 = rand_buf(B.ni, 99), *d2 = rand_buf(B.ni, 99);
        im->bwd(d1, B.dout, B.w, &s, 1, 0, 1);
        dwconv_backward_data_ref(d2, B.dout, B.w, &s);
        cr_expect_leq(tu_rel_err(d1, d2, B.ni), 1e-4, "%s backward_data case %d: rel err %g", im->name, ci,
                      tu_rel_err(d1, d2, B.ni));
        /* acc = 0 writes every element (NaN-filled start) with the bits of accumulating onto zeros. */
        float *dz = zero_buf(B.ni), *dnan = rand_buf(B.ni, 99);
        memset(dnan, 0xFF, B.ni * sizeof(float));
        im->bwd(dz, B.dout, B.w, &s, 1, 0, 1);
        im->bwd(dnan, B.dout, B.w, &s, 0, 0, 1);
        cr_expect(!memcmp(dz, dnan, B.ni * sizeof(float)), "%s backward_data overwrite case %d", im->name, ci);
        free(dz), free(dnan);
        float *w1 = rand_buf(B.nw, 98), *w2 = rand_buf(B.nw, 98);
        float *b1 = rand_buf((size_t)s.C, 97), *b2 = rand_buf((size_t)s.C, 97);
        im->par(w1, b1, B.inp, B.dout, &s, 0, 1);
        dwconv_backward_params_ref(w2, b2, B.inp, B.dout, &s);
        cr_expect_leq(tu_rel_err(w1, w2, B.nw), 1e-4, "%s backward_params dw case %d: rel err %g", im->name, ci,
                      tu_rel_err(w1, w2, B.nw));
        cr_expect_leq(tu_rel_err(b1, b2, (size_t)s.C), 1e-4, "%s backward_params db case %d", im->name, ci);
        /* db = NULL must be accepted. */
        im->par(w1, NULL, B.inp, B.dout, &s, 0, 1);
        free(o1), free(o2), free(d1), free(d2), free(w1), free(w2), free(b1), free(b2);
        free_bufs(&B);
    }
}

Test(dwconv, dispatch_matches_reference) { check_against_ref(&impls[0]); }
Test(dwconv, portable_matches_reference) { check_against_ref(&impls[1]); }

Test(dwconv, specialised_shapes_are_specialised)
{
    struct conv_shape s;
    cr_assert_eq(dwconv_shape_init(&s, 2, 9, 9, 19, 3, 2), 0);
    cr_expect(dwconv_specialised(&s));
    cr_assert_eq(dwconv_shape_init(&s, 2, 9, 9, 19, 5, 1), 0);
    cr_expect(dwconv_specialised(&s));
    cr_assert_eq(dwconv_shape_init(&s, 2, 9, 9, 19, 7, 1), 0);
    cr_expect(!dwconv_specialised(&s));
}

/* The depthwise reference equals the grouped-convolution reference with groups = C: (KH,KW,1,C) is
 * the same memory as (KH,KW,C). */
Test(dwconv, reference_matches_grouped_conv_reference)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci + 50);
        float *o1 = zero_buf(B.no), *o2 = zero_buf(B.no);
        dwconv_forward_ref(o1, B.inp, B.w, B.b, &s);
        conv_forward_ref(o2, B.inp, B.w, B.b, &s);
        cr_expect_leq(tu_rel_err(o1, o2, B.no), 1e-6, "case %d", ci);
        float *d1 = zero_buf(B.ni), *d2 = zero_buf(B.ni);
        dwconv_backward_data_ref(d1, B.dout, B.w, &s);
        conv_backward_data_ref(d2, B.dout, B.w, &s);
        cr_expect_leq(tu_rel_err(d1, d2, B.ni), 1e-6, "case %d", ci);
        float *w1 = zero_buf(B.nw), *w2 = zero_buf(B.nw);
        dwconv_backward_params_ref(w1, NULL, B.inp, B.dout, &s);
        conv_backward_params_ref(w2, NULL, B.inp, B.dout, &s);
        cr_expect_leq(tu_rel_err(w1, w2, B.nw), 1e-6, "case %d", ci);
        free(o1), free(o2), free(d1), free(d2), free(w1), free(w2);
        free_bufs(&B);
    }
}

/* L = Σ out·R in double, from an independent double forward. */
static double loss_double(const float *inp, const float *w, const float *b, const float *R, const struct conv_shape *s,
                          size_t pert_i, double di, size_t pert_w, double dw_, int pert_b, double db_)
{
    double L = 0.0;
    for (int n = 0; n < s->N; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int c = 0; c < s->C; c++) {
                    double acc = (double)b[c] + (c == pert_b ? db_ : 0.0);
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++) {
                            int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            size_t ii = (((size_t)n * s->H + iy) * s->W + ix) * s->C + c;
                            size_t wi = ((size_t)ky * s->KW + kx) * s->C + c;
                            acc += ((double)inp[ii] + (ii == pert_i ? di : 0.0)) *
                                   ((double)w[wi] + (wi == pert_w ? dw_ : 0.0));
                        }
                    L += acc * R[(((size_t)n * s->OH + oy) * s->OW + ox) * s->C + c];
                }
    return L;
}

Test(dwconv, reference_gradients_match_central_differences)
{
    const double h = 1e-3;
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci + 100);
        float *dinp = zero_buf(B.ni), *dw = zero_buf(B.nw), *db = zero_buf((size_t)s.C);
        dwconv_backward_data_ref(dinp, B.dout, B.w, &s);
        dwconv_backward_params_ref(dw, db, B.inp, B.dout, &s);
        const size_t NONE = (size_t)-1;
        for (int k = 0; k < 6; k++) {
            size_t i = (size_t)rng_below(7, (uint64_t)ci, (uint64_t)k, B.ni);
            double fd = (loss_double(B.inp, B.w, B.b, B.dout, &s, i, h, NONE, 0, -1, 0) -
                         loss_double(B.inp, B.w, B.b, B.dout, &s, i, -h, NONE, 0, -1, 0)) / (2 * h);
            cr_expect(fabs(fd - dinp[i]) <= 1e-4 * (fabs(fd) + 1.0), "case %d dinp[%zu]: fd %g analytic %g", ci, i, fd,
                      (double)dinp[i]);
            size_t j = (size_t)rng_below(8, (uint64_t)ci, (uint64_t)k, B.nw);
            fd = (loss_double(B.inp, B.w, B.b, B.dout, &s, NONE, 0, j, h, -1, 0) -
                  loss_double(B.inp, B.w, B.b, B.dout, &s, NONE, 0, j, -h, -1, 0)) / (2 * h);
            cr_expect(fabs(fd - dw[j]) <= 1e-4 * (fabs(fd) + 1.0), "case %d dw[%zu]: fd %g analytic %g", ci, j, fd,
                      (double)dw[j]);
            int c = (int)rng_below(9, (uint64_t)ci, (uint64_t)k, (uint64_t)s.C);
            fd = (loss_double(B.inp, B.w, B.b, B.dout, &s, NONE, 0, NONE, 0, c, h) -
                  loss_double(B.inp, B.w, B.b, B.dout, &s, NONE, 0, NONE, 0, c, -h)) / (2 * h);
            cr_expect(fabs(fd - db[c]) <= 1e-4 * (fabs(fd) + 1.0), "case %d db[%d]: fd %g analytic %g", ci, c, fd,
                      (double)db[c]);
        }
        free(dinp), free(dw), free(db);
        free_bufs(&B);
    }
}

Test(dwconv, reference_forward_matches_double)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci + 200);
        float *out = zero_buf(B.no);
        dwconv_forward_ref(out, B.inp, B.w, B.b, &s);
        double L = 0.0;
        for (size_t i = 0; i < B.no; i++) L += (double)out[i] * B.dout[i];
        const double Ld = loss_double(B.inp, B.w, B.b, B.dout, &s, (size_t)-1, 0, (size_t)-1, 0, -1, 0);
        cr_expect(fabs(L - Ld) <= 1e-5 * (fabs(Ld) + 1.0), "case %d: %g vs %g", ci, L, Ld);
        free(out);
        free_bufs(&B);
    }
}

/* Two backward calls from zero give exactly twice one call (each call sums first, then adds). */
static void check_accumulate(const struct dw_impl *im)
{
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci + 300);
        float *d1 = zero_buf(B.ni), *d2 = zero_buf(B.ni), *w1 = zero_buf(B.nw), *w2 = zero_buf(B.nw);
        float *b1 = zero_buf((size_t)s.C), *b2 = zero_buf((size_t)s.C);
        im->bwd(d1, B.dout, B.w, &s, 1, 0, 1);
        im->bwd(d2, B.dout, B.w, &s, 1, 0, 1);
        im->bwd(d2, B.dout, B.w, &s, 1, 0, 1);
        im->par(w1, b1, B.inp, B.dout, &s, 0, 1);
        im->par(w2, b2, B.inp, B.dout, &s, 0, 1);
        im->par(w2, b2, B.inp, B.dout, &s, 0, 1);
        for (size_t i = 0; i < B.ni; i++) d1[i] *= 2.0f;
        for (size_t i = 0; i < B.nw; i++) w1[i] *= 2.0f;
        for (int c = 0; c < s.C; c++) b1[c] *= 2.0f;
        cr_expect_leq(tu_rel_err(d2, d1, B.ni), 1e-6, "%s dinp accumulate case %d", im->name, ci);
        cr_expect_leq(tu_rel_err(w2, w1, B.nw), 1e-6, "%s dw accumulate case %d", im->name, ci);
        cr_expect_leq(tu_rel_err(b2, b1, (size_t)s.C), 1e-6, "%s db accumulate case %d", im->name, ci);
        free(d1), free(d2), free(w1), free(w2), free(b1), free(b2);
        free_bufs(&B);
    }
}

Test(dwconv, dispatch_accumulates) { check_accumulate(&impls[0]); }
Test(dwconv, portable_accumulates) { check_accumulate(&impls[1]); }

/* Every ith of nth called in turn must give the same bits as nth = 1. */
static void check_partition(const struct dw_impl *im)
{
    static const int nths[] = {2, 3, 7};
    for (int ci = 0; ci < N_CASES; ci++) {
        const struct conv_shape s = make_shape(&cases[ci]);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci + 400);
        float *o1 = zero_buf(B.no), *on = zero_buf(B.no);
        float *d1 = rand_buf(B.ni, 5), *w1 = rand_buf(B.nw, 6), *b1 = rand_buf((size_t)s.C, 7);
        im->fwd(o1, B.inp, B.w, B.b, &s, 0, 1);
        im->bwd(d1, B.dout, B.w, &s, 1, 0, 1);
        im->par(w1, b1, B.inp, B.dout, &s, 0, 1);
        for (int k = 0; k < 3; k++) {
            const int nth = nths[k];
            float *dn_k = rand_buf(B.ni, 5), *wn_k = rand_buf(B.nw, 6), *bn_k = rand_buf((size_t)s.C, 7);
            memset(on, 0xFF, B.no * sizeof(float)); /* NaN: a missed element cannot pass */
            for (int ith = 0; ith < nth; ith++) {
                im->fwd(on, B.inp, B.w, B.b, &s, ith, nth);
                im->bwd(dn_k, B.dout, B.w, &s, 1, ith, nth);
                im->par(wn_k, bn_k, B.inp, B.dout, &s, ith, nth);
            }
            cr_expect(!memcmp(o1, on, B.no * sizeof(float)), "%s forward case %d nth %d not bitwise", im->name, ci,
                      nth);
            cr_expect(!memcmp(d1, dn_k, B.ni * sizeof(float)), "%s backward_data case %d nth %d not bitwise", im->name,
                      ci, nth);
            cr_expect(!memcmp(w1, wn_k, B.nw * sizeof(float)), "%s dw case %d nth %d not bitwise", im->name, ci, nth);
            cr_expect(!memcmp(b1, bn_k, (size_t)s.C * sizeof(float)), "%s db case %d nth %d not bitwise", im->name, ci,
                      nth);
            free(dn_k), free(wn_k), free(bn_k);
        }
        free(o1), free(on), free(d1), free(w1), free(b1);
        free_bufs(&B);
    }
}

Test(dwconv, dispatch_partition_is_bitwise) { check_partition(&impls[0]); }
Test(dwconv, portable_partition_is_bitwise) { check_partition(&impls[1]); }

/* The weight gradient in (row chunk, channel block) parts, as a 16-core machine takes it where channel blocks
 * are fewer than cores (TB_PAR_UNITS, read once a process: each Criterion test is one): against the
 * reference with and without db, every part written, bitwise for any nth (all ith of phase 1, then of
 * phase 2); shapes of many channel blocks keep the single call. */
Test(dwconv, many_core_params_parts_match_reference_and_are_bitwise, .timeout = 60)
{
    setenv("TB_PAR_UNITS", "16", 1);
    static const struct dw_case pc[] = {
        {8, 16, 16, 32, 3, 1, -1}, /* stage 1 at 32×32 (2 blocks of 16: 8 chunks) */
        {4, 16, 15, 96, 3, 2, -1}, /* stage 2's stride 2, 6 blocks */
        {3, 9, 11, 37, 5, 1, -1},  /* a short last block, 5×5 */
        {2, 7, 9, 20, 5, 2, -1},   /* few rows: chunks limited by them */
    };
    static const int nths[] = {1, 2, 3, 7};
    const struct conv_shape wide = make_shape(&(struct dw_case){2, 8, 8, 1152, 3, 1, -1});
    cr_assert_eq(dwconv_params_row_chunks(&wide), 0, "1152 channels: the single call");
    for (int ci = 0; ci < (int)(sizeof pc / sizeof pc[0]); ci++) {
        const struct conv_shape s = make_shape(&pc[ci]);
        const int K = dwconv_params_row_chunks(&s);
        cr_assert(K >= 2, "case %d: %d chunks", ci, K);
        struct dw_bufs B = make_bufs(&s, (uint64_t)ci + 900);
        const size_t np = dwconv_params_part_floats(&s);
        float *part = malloc(np * sizeof(float)), *wr = rand_buf(B.nw, 6), *br = rand_buf((size_t)s.C, 7);
        cr_assert(part);
        dwconv_backward_params_ref(wr, br, B.inp, B.dout, &s);
        for (int with_db = 0; with_db < 2; with_db++) {
            float *w1 = NULL, *b1 = NULL;
            for (int k = 0; k < 4; k++) {
                const int nth = nths[k];
                float *w = rand_buf(B.nw, 6), *b = rand_buf((size_t)s.C, 7);
                memset(part, 0xFF, np * sizeof(float)); /* NaN: a part not written cannot pass */
                for (int ith = 0; ith < nth; ith++)
                    dwconv_backward_params_chunks(part, with_db, B.inp, B.dout, &s, ith, nth);
                for (int ith = 0; ith < nth; ith++)
                    dwconv_backward_params_finish(w, with_db ? b : NULL, part, &s, ith, nth);
                if (nth == 1) {
                    cr_expect_leq(tu_rel_err(w, wr, B.nw), 1e-5, "case %d dw rel err %g", ci, tu_rel_err(w, wr, B.nw));
                    if (with_db)
                        cr_expect_leq(tu_rel_err(b, br, (size_t)s.C), 1e-5, "case %d db rel err %g", ci,
                                      tu_rel_err(b, br, (size_t)s.C));
                    w1 = w, b1 = b;
                    continue;
                }
                cr_expect(!memcmp(w, w1, B.nw * sizeof(float)), "case %d dw nth %d not bitwise", ci, nth);
                cr_expect(!memcmp(b, b1, (size_t)s.C * sizeof(float)), "case %d db nth %d not bitwise", ci, nth);
                free(w), free(b);
            }
            free(w1), free(b1);
        }
        free(part), free(wr), free(br);
        free_bufs(&B);
    }
}

Test(dwconv, shape_validation)
{
    struct conv_shape s;
    cr_expect_eq(dwconv_shape_init(&s, 2, 112, 112, 96, 3, 2), 0);
    cr_expect_eq(s.OH, 56);
    cr_expect_eq(s.OW, 56);
    cr_expect_eq(s.pad, 1);
    cr_expect_eq(dwconv_shape_init(&s, 2, 15, 15, 96, 5, 2), 0);
    cr_expect_eq(s.OH, 8); /* torchvision: (15 + 4 − 5)/2 + 1 */
    cr_expect_neq(dwconv_shape_init(&s, 0, 8, 8, 16, 3, 1), 0);
    s.OC = 17;
    cr_expect(!dwconv_shape_valid(&s));
}

/* ---------------------------------------------------------------------------------------------
 * Opt-in benchmark (TB_DWCONV_BENCH=1, run with OPENBLAS_NUM_THREADS=1): GFLOP/s single-threaded.
 * ------------------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * ts.tv_nsec;
}

enum { BENCH_FWD, BENCH_BWD, BENCH_PAR, BENCH_FWD_REF, BENCH_BWD_REF, BENCH_PAR_REF };

/* Best of `reps` timings of one kernel, in seconds. */
static double bench_one(int which, const struct conv_shape *s, struct dw_bufs *B, float *out, float *dinp, float *dw,
                        int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        switch (which) {
        case BENCH_FWD: dwconv_forward(out, B->inp, B->w, NULL, s, 0, 1); break;
        case BENCH_BWD: dwconv_backward_data(dinp, B->dout, B->w, s, 1, 0, 1); break;
        case BENCH_PAR: dwconv_backward_params(dw, NULL, B->inp, B->dout, s, 0, 1); break;
        case BENCH_FWD_REF: dwconv_forward_ref(out, B->inp, B->w, NULL, s); break;
        case BENCH_BWD_REF: dwconv_backward_data_ref(dinp, B->dout, B->w, s); break;
        case BENCH_PAR_REF: dwconv_backward_params_ref(dw, NULL, B->inp, B->dout, s); break;
        }
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

Test(dwconv, bench, .timeout = 120)
{
    if (!getenv("TB_DWCONV_BENCH")) cr_skip_test("set TB_DWCONV_BENCH=1 to run");
    static const int shp[][6] = {{16, 112, 112, 96, 3, 2}, {128, 16, 16, 96, 3, 1}, {16, 56, 56, 144, 5, 2},
                                 {128, 8, 8, 240, 5, 1}};
    static const char *names[] = {"forward", "backward_data", "backward_params"};
    for (size_t k = 0; k < sizeof shp / sizeof shp[0]; k++) {
        struct conv_shape s;
        cr_assert_eq(dwconv_shape_init(&s, shp[k][0], shp[k][1], shp[k][2], shp[k][3], shp[k][4], shp[k][5]), 0);
        struct dw_bufs B0 = make_bufs(&s, 7), B = B0;
        B.inp = aligned_copy(B0.inp, B.ni), B.dout = aligned_copy(B0.dout, B.no), B.w = aligned_copy(B0.w, B.nw);
        float *z = zero_buf(B.ni);
        float *out = aligned_copy(z, B.no), *dinp = aligned_copy(z, B.ni), *dw = aligned_copy(z, B.nw);
        free(z);
        const double fl = dwconv_flops(&s);
        cr_log_info("N=%d %dx%d C=%d k=%d s=%d -> %dx%d (%.1f MFLOP)", s.N, s.H, s.W, s.C, s.KH, s.stride, s.OH,
                    s.OW, fl / 1e6);
        for (int p = 0; p < 3; p++) {
            const double t = bench_one(p, &s, &B, out, dinp, dw, 10);
            const double tr = k < 2 ? bench_one(p + 3, &s, &B, out, dinp, dw, 1) : 0.0;
            if (tr > 0)
                cr_log_info("  %-15s %7.2f GFLOP/s  %8.3f ms   ref %6.2f GFLOP/s  speedup %5.1fx", names[p],
                            fl / t / 1e9, t * 1e3, fl / tr / 1e9, tr / t);
            else
                cr_log_info("  %-15s %7.2f GFLOP/s  %8.3f ms", names[p], fl / t / 1e9, t * 1e3);
        }
        free(out), free(dinp), free(dw), free(B.inp), free(B.dout), free(B.w);
        free_bufs(&B0);
    }
}

/* The depthwise backward data fused with its input BatchNorm's first backward pass equals the two
 * kernels one after the other, bit for bit, for any nth: dz over dinp and the chunk sums. Shapes whose
 * chunks start mid-row are refused (dwconv_bn_fusable), the others cover both strides, both kernel
 * sizes, masked channel tails and one chunk. With the weight gradient taken in the same pass (from the
 * SiLU rows the stream recomputes) dz and the sums are unchanged, and dw is the double reference's on
 * the forward's output within float rounding, the same bits for every nth; and the same bits again when
 * dout is not read but formed from the BatchNorm after the convolution (a ring of rows from its dz and x,
 * whose bn_backward_rows dout is). */
Test(dwconv, bn_fused_backward_matches_unfused)
{
    static const struct dw_case fc[] = {{16, 8, 8, 40, 3, 1, -1},   {4, 16, 16, 24, 5, 2, -1},
                                        {2, 7, 7, 48, 3, 2, -1},    {16, 7, 7, 37, 3, 1, -1},
                                        {2, 14, 14, 150, 5, 1, -1}, {16, 14, 14, 32, 3, 1, -1}};
    static const int nths[] = {1, 2, 3, 7};
    int fused = 0;
    for (size_t q = 0; q < sizeof fc / sizeof *fc; q++) {
        const struct conv_shape s = make_shape(&fc[q]);
        const size_t M = (size_t)s.N * s.H * s.W, nin = M * (size_t)s.C, nout = (size_t)s.N * s.OH * s.OW * s.C;
        if (!dwconv_bn_fusable(&s)) {
            cr_assert_eq(q, 4, "case %zu refused", q);
            continue;
        }
        fused++;
        float *x = rand_buf(nin, 40 + q), *w = rand_buf((size_t)s.C * s.KH * s.KW, 60 + q);
        /* dout as the BatchNorm after the convolution writes it: from its dz, x, save and coefficients. */
        float *dz2 = rand_buf(nout, 50 + q), *x2 = rand_buf(nout, 90 + q), *save2 = rand_buf(2 * (size_t)s.C, 100 + q);
        float *coef2 = rand_buf(3 * (size_t)s.C, 110 + q), *dout = zero_buf(nout);
        bn_backward_rows(dout, dz2, x2, save2, coef2, (size_t)s.N * s.OH * s.OW, s.C);
        const struct conv_bn_dout bd = {dz2, x2, save2, coef2};
        float *gamma = rand_buf((size_t)s.C, 70 + q), *beta = rand_buf((size_t)s.C, 80 + q), *y = zero_buf(nin);
        float *save = zero_buf(2 * (size_t)s.C), *d0 = zero_buf(nin), *d1 = zero_buf(nin);
        double *p0 = calloc(bn_chunk_doubles(M, s.C), sizeof(double)), *p1 = calloc(bn_chunk_doubles(M, s.C), sizeof(double));
        cr_assert(p0 && p1);
        bn_forward_train(y, save, NULL, NULL, x, gamma, beta, M, s.C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT, NORM_ACT_SILU,
                         0, 1);
        dwconv_backward_data(d0, dout, w, &s, 0, 0, 1);
        bn_backward_chunks(p0, d0, x, save, gamma, beta, M, s.C, NORM_ACT_SILU, 0, 1);
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            memset(d1, 0xff, nin * sizeof(float));
            for (int i = 0; i < nths[t]; i++) dwconv_backward_data_bn(d1, dout, w, &s, p1, x, save, gamma, beta, NULL, NULL, NULL, NULL, i,
                                                                   nths[t]);
            char what[64];
            snprintf(what, sizeof what, "case %zu nth %d: dz", q, nths[t]);
            tu_assert_bitwise(d1, d0, nin, what);
            snprintf(what, sizeof what, "case %zu nth %d: part", q, nths[t]);
            tu_assert_bitwise_d(p1, p0, bn_chunk_doubles(M, s.C), what);
        }
        /* The weight gradient in the same pass. */
        const size_t nw = (size_t)s.C * s.KH * s.KW;
        float *dwr = zero_buf(nw), *dw1 = zero_buf(nw), *dwn = zero_buf(nw);
        float *dwpart = zero_buf(dwconv_bn_params_part_floats(&s));
        dwconv_backward_params_ref(dwr, NULL, y, dout, &s);
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            const size_t ys = dwconv_bn_params_scratch_floats(&s);
            float *ybuf = zero_buf(ys * (size_t)nths[t]), *dw = t ? dwn : dw1;
            memset(d1, 0xff, nin * sizeof(float));
            memset(dw, 0, nw * sizeof(float));
            for (int i = 0; i < nths[t]; i++)
                dwconv_backward_data_bn(d1, dout, w, &s, p1, x, save, gamma, beta, dwpart, ybuf + (size_t)i * ys, NULL, NULL, i,
                                        nths[t]);
            for (int i = 0; i < nths[t]; i++) dwconv_bn_params_finish(dw, dwpart, &s, i, nths[t]);
            char what[64];
            snprintf(what, sizeof what, "case %zu nth %d with dw: dz", q, nths[t]);
            tu_assert_bitwise(d1, d0, nin, what);
            snprintf(what, sizeof what, "case %zu nth %d with dw: part", q, nths[t]);
            tu_assert_bitwise_d(p1, p0, bn_chunk_doubles(M, s.C), what);
            if (t) {
                snprintf(what, sizeof what, "case %zu nth %d: dw against nth 1", q, nths[t]);
                tu_assert_bitwise(dw, dw1, nw, what);
            }
            /* dout formed in a ring of rows instead of read. */
            const size_t rs = dwconv_bn_dout_ring_floats(&s);
            float *ring = zero_buf(rs * (size_t)nths[t]), *dwf = zero_buf(nw);
            memset(d1, 0xff, nin * sizeof(float));
            for (int i = 0; i < nths[t]; i++)
                dwconv_backward_data_bn(d1, NULL, w, &s, p1, x, save, gamma, beta, dwpart, ybuf + (size_t)i * ys, &bd,
                                        ring + (size_t)i * rs, i, nths[t]);
            for (int i = 0; i < nths[t]; i++) dwconv_bn_params_finish(dwf, dwpart, &s, i, nths[t]);
            snprintf(what, sizeof what, "case %zu nth %d dout formed: dz", q, nths[t]);
            tu_assert_bitwise(d1, d0, nin, what);
            snprintf(what, sizeof what, "case %zu nth %d dout formed: part", q, nths[t]);
            tu_assert_bitwise_d(p1, p0, bn_chunk_doubles(M, s.C), what);
            snprintf(what, sizeof what, "case %zu nth %d dout formed: dw", q, nths[t]);
            tu_assert_bitwise(dwf, dw, nw, what);
            free(ring), free(dwf);
            free(ybuf);
        }
        double big = 0.0;
        for (size_t i = 0; i < nw; i++) big = fmax(big, fabs((double)dwr[i]));
        cr_assert(big > 0.0);
        for (size_t i = 0; i < nw; i++)
            cr_assert(fabs((double)dw1[i] - dwr[i]) <= 1e-5 * big, "case %zu dw[%zu]: %.9g fused, %.9g reference", q, i,
                      (double)dw1[i], (double)dwr[i]);
        free(dwr), free(dw1), free(dwn), free(dwpart);
        free(x), free(dout), free(w), free(gamma), free(beta), free(y), free(save), free(d0), free(d1), free(p0), free(p1);
        free(dz2), free(x2), free(save2), free(coef2);
    }
    cr_assert_eq(fused, 5); /* case 5: 14×14 at batch 16, on whole rows by bn_row_chunks' even cut */
}

/* The depthwise forward whose input is formed row by row from the BatchNorm+SiLU before it
 * (dwconv_forward_bn_in) writes what that BatchNorm's apply pass then dwconv_forward (or, with the next
 * BatchNorm's sums, dwconv_forward_bn) write, bit for bit, for any nth: strides 1 and 2, kernels 3 and 5,
 * masked channel tails, several samples, odd sizes, and a shape whose output chunks start mid-row (no
 * sums there). */
Test(dwconv, bn_input_fused_forward_matches_unfused)
{
    static const struct dw_case fc[] = {{16, 8, 8, 40, 3, 1, -1}, {4, 16, 16, 24, 5, 2, -1}, {2, 7, 7, 48, 3, 2, -1},
                                        {16, 7, 7, 37, 3, 1, -1}, {3, 13, 11, 20, 5, 1, -1}, {3, 24, 24, 150, 5, 2, -1}};
    static const int nths[] = {1, 2, 3, 7};
    int with_sums = 0;
    for (size_t q = 0; q < sizeof fc / sizeof *fc; q++) {
        const struct conv_shape s = make_shape(&fc[q]);
        cr_assert(dwconv_forward_bn_in_fusable(&s), "case %zu", q);
        const size_t Mi = (size_t)s.N * s.H * s.W, M = (size_t)s.N * s.OH * s.OW, nin = Mi * s.C, nout = M * s.C;
        float *x = rand_buf(nin, 240 + q), *w = rand_buf((size_t)s.C * s.KH * s.KW, 250 + q);
        float *gamma = rand_buf((size_t)s.C, 260 + q), *beta = rand_buf((size_t)s.C, 270 + q), *save = zero_buf(2 * (size_t)s.C);
        float *yin = zero_buf(nin), *o0 = zero_buf(nout), *o1 = zero_buf(nout);
        const int sums = dwconv_forward_bn_fusable(&s);
        with_sums += sums;
        double *p0 = calloc(bn_chunk_doubles(M, s.C), sizeof(double)), *p1 = calloc(bn_chunk_doubles(M, s.C), sizeof(double));
        cr_assert(p0 && p1);
        bn_forward_train(yin, save, NULL, NULL, x, gamma, beta, Mi, s.C, BN_EPS_DEFAULT, BN_MOMENTUM_DEFAULT,
                         NORM_ACT_SILU, 0, 1);
        if (sums) dwconv_forward_bn(o0, yin, w, NULL, &s, p0, 0, 1);
        else dwconv_forward(o0, yin, w, NULL, &s, 0, 1);
        const size_t rs = dwconv_forward_bn_in_scratch_floats(&s);
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            float *ring = zero_buf(rs * (size_t)nths[t]);
            memset(o1, 0xff, nout * sizeof(float));
            for (int i = 0; i < nths[t]; i++)
                dwconv_forward_bn_in(o1, x, save, gamma, beta, w, NULL, &s, sums ? p1 : NULL, ring + (size_t)i * rs, i,
                                     nths[t]);
            char what[64];
            snprintf(what, sizeof what, "case %zu nth %d: out", q, nths[t]);
            tu_assert_bitwise(o1, o0, nout, what);
            if (sums) {
                snprintf(what, sizeof what, "case %zu nth %d: part", q, nths[t]);
                tu_assert_bitwise_d(p1, p0, bn_chunk_doubles(M, s.C), what);
            }
            free(ring);
        }
        free(x), free(w), free(gamma), free(beta), free(save), free(yin), free(o0), free(o1), free(p0), free(p1);
    }
    cr_assert(with_sums > 0 && with_sums < (int)(sizeof fc / sizeof *fc), "%d cases with sums", with_sums);
}

/* The depthwise forward that also takes its BatchNorm's statistics writes dwconv_forward's outputs and
 * bn_forward_train_chunks' sums of them, bit for bit, for any nth; chunks starting mid-row are refused. */
Test(dwconv, bn_fused_forward_matches_unfused)
{
    static const struct dw_case fc[] = {{16, 8, 8, 40, 3, 1, -1},   {4, 16, 16, 24, 5, 2, -1},
                                        {2, 7, 7, 48, 3, 2, -1},    {16, 7, 7, 37, 3, 1, -1},
                                        {2, 14, 14, 150, 5, 1, -1}, {16, 14, 14, 32, 3, 1, -1}};
    static const int nths[] = {1, 2, 3, 7};
    int fused = 0;
    for (size_t q = 0; q < sizeof fc / sizeof *fc; q++) {
        const struct conv_shape s = make_shape(&fc[q]);
        const size_t M = (size_t)s.N * s.OH * s.OW, nin = (size_t)s.N * s.H * s.W * s.C, nout = M * (size_t)s.C;
        if (!dwconv_forward_bn_fusable(&s)) {
            cr_assert_eq(q, 4, "case %zu refused", q);
            continue;
        }
        fused++;
        float *x = rand_buf(nin, 140 + q), *w = rand_buf((size_t)s.C * s.KH * s.KW, 150 + q), *b = rand_buf((size_t)s.C, 160 + q);
        float *y0 = zero_buf(nout), *y1 = zero_buf(nout);
        double *p0 = calloc(bn_chunk_doubles(M, s.C), sizeof(double)), *p1 = calloc(bn_chunk_doubles(M, s.C), sizeof(double));
        cr_assert(p0 && p1);
        dwconv_forward(y0, x, w, b, &s, 0, 1);
        bn_forward_train_chunks(p0, y0, M, s.C, 0, 1);
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            memset(y1, 0xff, nout * sizeof(float));
            for (int i = 0; i < nths[t]; i++) dwconv_forward_bn(y1, x, w, b, &s, p1, i, nths[t]);
            char what[64];
            snprintf(what, sizeof what, "case %zu nth %d: out", q, nths[t]);
            tu_assert_bitwise(y1, y0, nout, what);
            snprintf(what, sizeof what, "case %zu nth %d: part", q, nths[t]);
            tu_assert_bitwise_d(p1, p0, bn_chunk_doubles(M, s.C), what);
        }
        free(x), free(w), free(b), free(y0), free(y1), free(p0), free(p1);
    }
    cr_assert_eq(fused, 5); /* case 5: 14×14 at batch 16, on whole rows by bn_row_chunks' even cut */
}
