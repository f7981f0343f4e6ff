/* test_op_norm.c — BatchNorm and GroupNorm (plain and fused with SiLU) against the double references,
 * central differences in double against every backward (inputs, γ, β), the accumulate contract,
 * thread partitions (nth ∈ {1,2,3,7} bitwise equal to nth = 1, and real threads), the two-phase
 * (sync) BatchNorm API, running-statistic updates, eval mode, and fused == unfused.
 *
 * Partition tests call the slices ith = 0..nth-1 one after another: the slices are disjoint, so this
 * is what nth threads compute, without the scheduling noise. Sizes are small and odd (N=3, H=5, W=7,
 * C=13) so vector tails, partial channel units and idle threads are all exercised.
 */
#include "test_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_act.h"
#include "op_norm.h"
#include "op_pool.h"
#include "op_se.h"
#include "rng.h"

#define EPS BN_EPS_DEFAULT
#define MOM BN_MOMENTUM_DEFAULT

/* p (n) ~ mean + sd·N(0,1), deterministic in seed. */
static void fill(float *p, size_t n, uint64_t seed, float mean, float sd)
{
    for (size_t i = 0; i < n; i++) p[i] = mean + sd * (float)rng_normal(seed, 99, i);
}

static const enum norm_act ACTS[] = {NORM_ACT_NONE, NORM_ACT_SILU};

/* ------------------------------------------------------------------------------------------------
 * BatchNorm fixtures
 */
struct bn_case {
    size_t M;
    int C;
    float *x, *gamma, *beta, *rm, *rv, *dy; /* x, dy (M,C); the rest (C) */
};

static void bn_case_init(struct bn_case *t, size_t M, int C, uint64_t seed)
{
    t->M = M;
    t->C = C;
    size_t n = M * (size_t)C;
    t->x = tu_fvec(n);
    t->dy = tu_fvec(n);
    t->gamma = tu_fvec((size_t)C);
    t->beta = tu_fvec((size_t)C);
    t->rm = tu_fvec((size_t)C);
    t->rv = tu_fvec((size_t)C);
    fill(t->x, n, seed, 0.7f, 1.5f); /* non-zero mean, non-unit variance */
    fill(t->dy, n, seed + 1, 0.0f, 1.0f);
    fill(t->gamma, (size_t)C, seed + 2, 1.0f, 0.3f);
    fill(t->beta, (size_t)C, seed + 3, 0.0f, 0.5f);
    fill(t->rm, (size_t)C, seed + 4, 0.0f, 0.1f);
    for (int c = 0; c < C; c++) t->rv[c] = 1.0f + 0.5f * fabsf((float)rng_normal(seed + 5, 99, (uint64_t)c));
}

static void bn_case_free(struct bn_case *t)
{
    free(t->x);
    free(t->dy);
    free(t->gamma);
    free(t->beta);
    free(t->rm);
    free(t->rv);
}

/* Results of one BN training forward + backward. */
struct bn_out {
    float *y, *save, *rm, *rv, *dx, *dg, *db;
    float *dyc; /* (M,C) the copy of dy handed to backward, which turns it into dz under SiLU */
};

static void bn_out_init(struct bn_out *o, const struct bn_case *t)
{
    size_t n = t->M * (size_t)t->C, C = (size_t)t->C;
    o->y = tu_fvec(n);
    o->dx = tu_fvec(n);
    o->dyc = tu_fvec(n);
    o->save = tu_fvec(2 * C);
    o->rm = tu_fvec(C);
    o->rv = tu_fvec(C);
    o->dg = tu_fvec(C);
    o->db = tu_fvec(C);
    memcpy(o->rm, t->rm, C * sizeof(float));
    memcpy(o->rv, t->rv, C * sizeof(float));
}

static void bn_out_free(struct bn_out *o)
{
    free(o->y);
    free(o->dx);
    free(o->dyc);
    free(o->save);
    free(o->rm);
    free(o->rv);
    free(o->dg);
    free(o->db);
}

/* Single-call forward + backward with nth slices run one after another. */
static void bn_run(struct bn_out *o, const struct bn_case *t, enum norm_act act, int nth)
{
    for (int i = 0; i < nth; i++)
        bn_forward_train(o->y, o->save, o->rm, o->rv, t->x, t->gamma, t->beta, t->M, t->C, EPS, MOM, act, i, nth);
    memcpy(o->dyc, t->dy, t->M * (size_t)t->C * sizeof(float));
    for (int i = 0; i < nth; i++)
        bn_backward(o->dx, o->dg, o->db, o->dyc, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, 1, i, nth);
}

/* Two-phase forward + backward for one replica (partials are already global). */
static void bn_run_two_phase(struct bn_out *o, const struct bn_case *t, enum norm_act act, int nth)
{
    size_t C = (size_t)t->C;
    double *sums = tu_dvec(2 * C);
    for (int i = 0; i < nth; i++) bn_stats_partial(sums, t->x, t->M, t->C, i, nth);
    for (int i = 0; i < nth; i++) bn_stats_finalize(o->save, o->rm, o->rv, sums, t->M, t->C, EPS, MOM, i, nth);
    for (int i = 0; i < nth; i++) bn_forward_apply(o->y, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, i, nth);
    memcpy(o->dyc, t->dy, t->M * C * sizeof(float));
    for (int i = 0; i < nth; i++)
        bn_backward_partial(sums, o->dyc, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, i, nth);
    for (int i = 0; i < nth; i++) bn_backward_params_apply(o->dg, o->db, sums, t->C, i, nth);
    for (int i = 0; i < nth; i++)
        bn_backward_data_apply(o->dx, o->dyc, t->x, o->save, t->gamma, sums, t->M, t->M, t->C, 1, i, nth);
    free(sums);
}

static void bn_out_assert_bitwise(const struct bn_out *a, const struct bn_out *b, const struct bn_case *t,
                                  const char *what)
{
    size_t n = t->M * (size_t)t->C, C = (size_t)t->C;
    char m[128];
    snprintf(m, sizeof m, "%s y", what);
    tu_assert_bitwise(a->y, b->y, n, m);
    snprintf(m, sizeof m, "%s save", what);
    tu_assert_bitwise(a->save, b->save, 2 * C, m);
    snprintf(m, sizeof m, "%s run_mean", what);
    tu_assert_bitwise(a->rm, b->rm, C, m);
    snprintf(m, sizeof m, "%s run_var", what);
    tu_assert_bitwise(a->rv, b->rv, C, m);
    snprintf(m, sizeof m, "%s dx", what);
    tu_assert_bitwise(a->dx, b->dx, n, m);
    snprintf(m, sizeof m, "%s dgamma", what);
    tu_assert_bitwise(a->dg, b->dg, C, m);
    snprintf(m, sizeof m, "%s dbeta", what);
    tu_assert_bitwise(a->db, b->db, C, m);
    snprintf(m, sizeof m, "%s dz left in dout", what);
    tu_assert_bitwise(a->dyc, b->dyc, n, m);
}

/* ------------------------------------------------------------------------------------------------
 * BatchNorm tests
 */
TestSuite(bn);

Test(bn, forward_train_matches_ref)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 10);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    for (int k = 0; k < 2; k++) {
        struct bn_out o;
        bn_out_init(&o, &t);
        bn_run(&o, &t, ACTS[k], 1);
        double *x = tu_to_d(t.x, n), *g = tu_to_d(t.gamma, C), *b = tu_to_d(t.beta, C);
        double *rm = tu_to_d(t.rm, C), *rv = tu_to_d(t.rv, C), *y = tu_dvec(n), *save = tu_dvec(2 * C);
        bn_forward_train_ref(y, save, rm, rv, x, g, b, t.M, t.C, EPS, MOM, ACTS[k]);
        tu_assert_close(o.y, y, n, 1e-5, 1e-6, "y");
        tu_assert_close(o.save, save, 2 * C, 1e-6, 1e-7, "save");
        tu_assert_close(o.rm, rm, C, 1e-6, 1e-7, "run_mean");
        tu_assert_close(o.rv, rv, C, 1e-6, 1e-7, "run_var");
        free(x), free(g), free(b), free(rm), free(rv), free(y), free(save);
        bn_out_free(&o);
    }
    bn_case_free(&t);
}

Test(bn, running_stats_keras_momentum_unbiased_var)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 20);
    struct bn_out o;
    bn_out_init(&o, &t);
    bn_forward_train(o.y, o.save, o.rm, o.rv, t.x, t.gamma, t.beta, t.M, t.C, EPS, 0.99f, NORM_ACT_NONE, 0, 1);
    for (int c = 0; c < t.C; c++) {
        double s = 0.0, ss = 0.0;
        for (size_t r = 0; r < t.M; r++) s += t.x[r * t.C + c];
        double mean = s / (double)t.M;
        for (size_t r = 0; r < t.M; r++) ss += (t.x[r * t.C + c] - mean) * (t.x[r * t.C + c] - mean);
        double var_unbiased = ss / (double)(t.M - 1), var = ss / (double)t.M;
        double want_m = 0.99 * t.rm[c] + 0.01 * mean, want_v = 0.99 * t.rv[c] + 0.01 * var_unbiased;
        cr_assert(fabs(o.rm[c] - want_m) <= 1e-6 * (1.0 + fabs(want_m)), "run_mean[%d] %.9g want %.9g", c,
                  (double)o.rm[c], want_m);
        cr_assert(fabs(o.rv[c] - want_v) <= 1e-6 * (1.0 + fabs(want_v)), "run_var[%d] %.9g want %.9g", c,
                  (double)o.rv[c], want_v);
        /* save holds the batch mean and the rstd of the BIASED variance. */
        cr_assert(fabs(o.save[c] - mean) <= 1e-6 * (1.0 + fabs(mean)));
        cr_assert(fabs(o.save[t.C + c] - 1.0 / sqrt(var + EPS)) <= 1e-6 / sqrt(var + EPS));
    }
    /* NULL running stats (a recomputed forward): same output and save, nothing else touched. */
    float *y2 = tu_fvec(t.M * (size_t)t.C), *save2 = tu_fvec(2 * (size_t)t.C);
    bn_forward_train(y2, save2, NULL, NULL, t.x, t.gamma, t.beta, t.M, t.C, EPS, 0.99f, NORM_ACT_NONE, 0, 1);
    tu_assert_bitwise(y2, o.y, t.M * (size_t)t.C, "y without running stats");
    tu_assert_bitwise(save2, o.save, 2 * (size_t)t.C, "save without running stats");
    free(y2), free(save2);
    bn_out_free(&o);
    bn_case_free(&t);
}

Test(bn, eval_uses_running_stats)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 30);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    float *y = tu_fvec(n), *ytrain = tu_fvec(n), *save = tu_fvec(2 * C);
    for (int k = 0; k < 2; k++) {
        bn_forward_eval(y, t.x, t.rm, t.rv, t.gamma, t.beta, t.M, t.C, EPS, ACTS[k], 0, 1);
        double *want = tu_dvec(n);
        for (size_t r = 0; r < t.M; r++)
            for (size_t c = 0; c < C; c++) {
                double z = t.gamma[c] * (t.x[r * C + c] - (double)t.rm[c]) / sqrt((double)t.rv[c] + EPS) + t.beta[c];
                want[r * C + c] = ACTS[k] == NORM_ACT_SILU ? z / (1.0 + exp(-z)) : z;
            }
        tu_assert_close(y, want, n, 1e-5, 1e-6, "eval y");
        double *x = tu_to_d(t.x, n), *g = tu_to_d(t.gamma, C), *b = tu_to_d(t.beta, C), *rm = tu_to_d(t.rm, C);
        double *rv = tu_to_d(t.rv, C), *yref = tu_dvec(n);
        bn_forward_eval_ref(yref, x, rm, rv, g, b, t.M, t.C, EPS, ACTS[k]);
        tu_assert_close(y, yref, n, 1e-5, 1e-6, "eval y vs ref");
        free(x), free(g), free(b), free(rm), free(rv), free(yref), free(want);
    }
    /* Batch statistics would give a different answer: the test above is not vacuous. */
    bn_forward_train(ytrain, save, NULL, NULL, t.x, t.gamma, t.beta, t.M, t.C, EPS, MOM, NORM_ACT_SILU, 0, 1);
    cr_assert(fabsf(ytrain[0] - y[0]) > 1e-3f);
    /* A row's eval output does not depend on the other rows of the batch. */
    float *y2 = tu_fvec(n);
    for (size_t i = 0; i < C; i++) t.x[i] += 5.0f;
    bn_forward_eval(y2, t.x, t.rm, t.rv, t.gamma, t.beta, t.M, t.C, EPS, NORM_ACT_SILU, 0, 1);
    tu_assert_bitwise(y2 + C, y + C, n - C, "eval rows independent");
    free(y), free(y2), free(ytrain), free(save);
    bn_case_free(&t);
}

struct bn_fd {
    double *x, *gamma, *beta, *w, *y, *save;
    size_t M;
    int C;
    enum norm_act act;
};

static double bn_fd_loss(void *p)
{
    struct bn_fd *f = p;
    bn_forward_train_ref(f->y, f->save, NULL, NULL, f->x, f->gamma, f->beta, f->M, f->C, EPS, MOM, f->act);
    double l = 0.0;
    for (size_t i = 0; i < f->M * (size_t)f->C; i++) l += f->w[i] * f->y[i];
    return l;
}

Test(bn, backward_matches_ref_and_finite_differences)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 40);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    for (int k = 0; k < 2; k++) {
        struct bn_out o;
        bn_out_init(&o, &t);
        bn_run(&o, &t, ACTS[k], 1);
        struct bn_fd f = {tu_to_d(t.x, n), tu_to_d(t.gamma, C), tu_to_d(t.beta, C), tu_to_d(t.dy, n), tu_dvec(n), tu_dvec(2 * C),
                          t.M, t.C, ACTS[k]};
        /* Reference backward from the reference forward's save. */
        double *dx = tu_dvec(n), *dg = tu_dvec(C), *db = tu_dvec(C);
        bn_fd_loss(&f);
        bn_backward_ref(dx, dg, db, f.w, f.x, f.save, f.gamma, f.beta, t.M, t.C, ACTS[k]);
        tu_assert_close(o.dx, dx, n, 1e-4, 2e-5, "dx vs ref");
        tu_assert_close(o.dg, dg, C, 1e-4, 1e-5, "dgamma vs ref");
        tu_assert_close(o.db, db, C, 1e-4, 1e-5, "dbeta vs ref");
        /* Central differences of Σ dy·y in double. */
        double *gx = tu_dvec(n), *gg = tu_dvec(C), *gb = tu_dvec(C);
        tu_fd_grad(gx, f.x, n, bn_fd_loss, &f, 1e-5);
        tu_fd_grad(gg, f.gamma, C, bn_fd_loss, &f, 1e-5);
        tu_fd_grad(gb, f.beta, C, bn_fd_loss, &f, 1e-5);
        tu_assert_close(o.dx, gx, n, 1e-3, 1e-4, "dx vs fd");
        tu_assert_close(o.dg, gg, C, 1e-3, 1e-4, "dgamma vs fd");
        tu_assert_close(o.db, gb, C, 1e-3, 1e-4, "dbeta vs fd");
        free(f.x), free(f.gamma), free(f.beta), free(f.w), free(f.y), free(f.save);
        free(dx), free(dg), free(db), free(gx), free(gg), free(gb);
        bn_out_free(&o);
    }
    bn_case_free(&t);
}

Test(bn, backward_accumulates)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 50);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    for (int k = 0; k < 2; k++) {
        struct bn_out o;
        bn_out_init(&o, &t);
        bn_run(&o, &t, ACTS[k], 1); /* o.dx = g from zero */
        /* Two calls from zero give exactly 2g. */
        float *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C), *dyc = tu_fvec(n);
        for (int rep = 0; rep < 2; rep++) {
            memcpy(dyc, t.dy, n * sizeof *dyc);
            bn_backward(dx, dg, db, dyc, t.x, o.save, t.gamma, t.beta, t.M, t.C, ACTS[k], 1, 0, 1);
        }
        for (size_t i = 0; i < n; i++) cr_assert(dx[i] == 2.0f * o.dx[i], "dx[%zu] not doubled", i);
        for (size_t c = 0; c < C; c++) cr_assert(dg[c] == 2.0f * o.dg[c] && db[c] == 2.0f * o.db[c]);
        /* Onto arbitrary contents: v0 + g. */
        fill(dx, n, 7, 0.0f, 1.0f);
        float *v0 = tu_fvec(n);
        memcpy(v0, dx, n * sizeof *dx);
        memset(dg, 0, C * sizeof *dg);
        memset(db, 0, C * sizeof *db);
        memcpy(dyc, t.dy, n * sizeof *dyc);
        bn_backward(dx, dg, db, dyc, t.x, o.save, t.gamma, t.beta, t.M, t.C, ACTS[k], 1, 0, 1);
        for (size_t i = 0; i < n; i++) cr_assert(dx[i] == v0[i] + o.dx[i], "dx[%zu] did not accumulate", i);
        free(dx), free(dg), free(db), free(v0), free(dyc);
        bn_out_free(&o);
    }
    bn_case_free(&t);
}

/* acc = 0 overwrites dx: onto garbage it gives the bits acc = 1 gives onto zeros, for the single-call and
 * the two-phase kernels, every partition. */
Test(bn, backward_overwrites)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 57);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    for (int k = 0; k < 2; k++) {
        struct bn_out o;
        bn_out_init(&o, &t);
        bn_run(&o, &t, ACTS[k], 1); /* o.dx = g, accumulated from zero */
        float *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C), *dyc = tu_fvec(n);
        double *sums = tu_dvec(2 * C);
        for (int ni = 0; ni < TU_N_NTHS; ni++) {
            const int nth = TU_NTHS[ni];
            fill(dx, n, 8 + ni, 3.0f, 5.0f);
            memcpy(dyc, t.dy, n * sizeof *dyc);
            for (int i = 0; i < nth; i++)
                bn_backward(dx, dg, db, dyc, t.x, o.save, t.gamma, t.beta, t.M, t.C, ACTS[k], 0, i, nth);
            tu_assert_bitwise(dx, o.dx, n, "bn_backward acc=0 dx");
            fill(dx, n, 9 + ni, -2.0f, 5.0f);
            memcpy(dyc, t.dy, n * sizeof *dyc);
            for (int i = 0; i < nth; i++)
                bn_backward_partial(sums, dyc, t.x, o.save, t.gamma, t.beta, t.M, t.C, ACTS[k], i, nth);
            for (int i = 0; i < nth; i++)
                bn_backward_data_apply(dx, dyc, t.x, o.save, t.gamma, sums, t.M, t.M, t.C, 0, i, nth);
            tu_assert_bitwise(dx, o.dx, n, "bn_backward_data_apply acc=0 dx");
        }
        free(dx), free(dg), free(db), free(dyc), free(sums);
        bn_out_free(&o);
    }
    bn_case_free(&t);
}

Test(bn, two_phase_accumulates)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 55);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    struct bn_out a, b;
    bn_out_init(&a, &t);
    bn_out_init(&b, &t);
    bn_run_two_phase(&a, &t, NORM_ACT_SILU, 1);
    bn_run_two_phase(&b, &t, NORM_ACT_SILU, 1);
    bn_run_two_phase(&b, &t, NORM_ACT_SILU, 1); /* forward again (same x, same save), backward adds */
    for (size_t i = 0; i < n; i++) cr_assert(b.dx[i] == 2.0f * a.dx[i], "dx[%zu] not doubled", i);
    for (size_t c = 0; c < C; c++) cr_assert(b.dg[c] == 2.0f * a.dg[c] && b.db[c] == 2.0f * a.db[c]);
    bn_out_free(&a);
    bn_out_free(&b);
    bn_case_free(&t);
}

Test(bn, partition_bitwise)
{
    const int Cs[] = {13, 70};
    for (int ci = 0; ci < 2; ci++) {
        struct bn_case t;
        bn_case_init(&t, 3 * 5 * 7, Cs[ci], 60 + (uint64_t)ci);
        for (int k = 0; k < 2; k++) {
            struct bn_out ref, ref2;
            bn_out_init(&ref, &t);
            bn_out_init(&ref2, &t);
            bn_run(&ref, &t, ACTS[k], 1);
            bn_run_two_phase(&ref2, &t, ACTS[k], 1);
            /* One replica of the two-phase API is bitwise the single-call kernels. */
            bn_out_assert_bitwise(&ref2, &ref, &t, "two-phase vs single");
            float *ye = tu_fvec(t.M * (size_t)t.C), *ye1 = tu_fvec(t.M * (size_t)t.C);
            bn_forward_eval(ye1, t.x, t.rm, t.rv, t.gamma, t.beta, t.M, t.C, EPS, ACTS[k], 0, 1);
            for (int q = 1; q < TU_N_NTHS; q++) {
                int nth = TU_NTHS[q];
                char what[64];
                struct bn_out o, o2;
                bn_out_init(&o, &t);
                bn_out_init(&o2, &t);
                bn_run(&o, &t, ACTS[k], nth);
                bn_run_two_phase(&o2, &t, ACTS[k], nth);
                snprintf(what, sizeof what, "C=%d act=%d nth=%d", t.C, (int)ACTS[k], nth);
                bn_out_assert_bitwise(&o, &ref, &t, what);
                bn_out_assert_bitwise(&o2, &ref, &t, what);
                for (int i = 0; i < nth; i++)
                    bn_forward_eval(ye, t.x, t.rm, t.rv, t.gamma, t.beta, t.M, t.C, EPS, ACTS[k], i, nth);
                tu_assert_bitwise(ye, ye1, t.M * (size_t)t.C, what);
                bn_out_free(&o);
                bn_out_free(&o2);
            }
            free(ye), free(ye1);
            bn_out_free(&ref);
            bn_out_free(&ref2);
        }
        bn_case_free(&t);
    }
}

/* Sync BN over two replicas of unequal size (2 and 1 samples of 5·7 rows): partial sums are
 * all-reduced (added here), each replica applies the global statistics to its rows, adds its LOCAL
 * dγ/dβ (which the gradient all-reduce then sums), and uses the GLOBAL backward sums for dx. The
 * result must match one BN over the whole batch. */
Test(bn, sync_two_replicas_match_full_batch)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 70);
    size_t C = (size_t)t.C, n = t.M * C, M0 = 2 * 35, M1 = t.M - M0;
    for (int k = 0; k < 2; k++) {
        enum norm_act act = ACTS[k];
        struct bn_out full;
        bn_out_init(&full, &t);
        bn_run(&full, &t, act, 1);

        double *s0 = tu_dvec(2 * C), *s1 = tu_dvec(2 * C), *sg = tu_dvec(2 * C);
        float *save0 = tu_fvec(2 * C), *save1 = tu_fvec(2 * C), *y = tu_fvec(n), *dx = tu_fvec(n);
        float *rm0 = tu_fvec(C), *rv0 = tu_fvec(C), *rm1 = tu_fvec(C), *rv1 = tu_fvec(C);
        float *dg0 = tu_fvec(C), *db0 = tu_fvec(C), *dg1 = tu_fvec(C), *db1 = tu_fvec(C);
        memcpy(rm0, t.rm, C * 4), memcpy(rv0, t.rv, C * 4), memcpy(rm1, t.rm, C * 4), memcpy(rv1, t.rv, C * 4);
        float *dyc = tu_fvec(n);
        memcpy(dyc, t.dy, n * sizeof *dyc);
        const float *x1 = t.x + M0 * C;
        float *dy1 = dyc + M0 * C;

        bn_stats_partial(s0, t.x, M0, t.C, 0, 1);
        bn_stats_partial(s1, x1, M1, t.C, 0, 1);
        for (size_t i = 0; i < 2 * C; i++) sg[i] = s0[i] + s1[i];
        bn_stats_finalize(save0, rm0, rv0, sg, t.M, t.C, EPS, MOM, 0, 1);
        bn_stats_finalize(save1, rm1, rv1, sg, t.M, t.C, EPS, MOM, 0, 1);
        tu_assert_bitwise(save0, save1, 2 * C, "replica saves");
        tu_assert_bitwise(rm0, rm1, C, "replica running means");
        bn_forward_apply(y, t.x, save0, t.gamma, t.beta, M0, t.C, act, 0, 1);
        bn_forward_apply(y + M0 * C, x1, save1, t.gamma, t.beta, M1, t.C, act, 0, 1);
        tu_assert_close_f(y, full.y, n, 1e-5, 1e-6, "sync y");
        tu_assert_close_f(save0, full.save, 2 * C, 1e-6, 1e-7, "sync save");
        tu_assert_close_f(rm0, full.rm, C, 1e-6, 1e-7, "sync run_mean");
        tu_assert_close_f(rv0, full.rv, C, 1e-6, 1e-7, "sync run_var");

        bn_backward_partial(s0, dyc, t.x, save0, t.gamma, t.beta, M0, t.C, act, 0, 1);
        bn_backward_partial(s1, dy1, x1, save1, t.gamma, t.beta, M1, t.C, act, 0, 1);
        bn_backward_params_apply(dg0, db0, s0, t.C, 0, 1);
        bn_backward_params_apply(dg1, db1, s1, t.C, 0, 1);
        for (size_t i = 0; i < 2 * C; i++) sg[i] = s0[i] + s1[i];
        bn_backward_data_apply(dx, dyc, t.x, save0, t.gamma, sg, M0, t.M, t.C, 1, 0, 1);
        bn_backward_data_apply(dx + M0 * C, dy1, x1, save1, t.gamma, sg, M1, t.M, t.C, 1, 0, 1);
        for (size_t c = 0; c < C; c++) dg0[c] += dg1[c], db0[c] += db1[c]; /* the gradient all-reduce */
        tu_assert_close_f(dx, full.dx, n, 1e-4, 1e-5, "sync dx");
        tu_assert_close_f(dg0, full.dg, C, 1e-5, 1e-6, "sync dgamma");
        tu_assert_close_f(db0, full.db, C, 1e-5, 1e-6, "sync dbeta");

        free(s0), free(s1), free(sg), free(save0), free(save1), free(y), free(dx), free(dyc);
        free(rm0), free(rv0), free(rm1), free(rv1), free(dg0), free(db0), free(dg1), free(db1);
        bn_out_free(&full);
    }
    bn_case_free(&t);
}

/* The fused kernel equals BN followed by the SiLU kernels: forward y, and backward through SiLU
 * (silu_backward into a zeroed dz) then BN without activation. */
Test(bn, fused_silu_matches_unfused)
{
    struct bn_case t;
    bn_case_init(&t, 3 * 5 * 7, 13, 80);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    struct bn_out fused, plain;
    bn_out_init(&fused, &t);
    bn_out_init(&plain, &t);
    bn_run(&fused, &t, NORM_ACT_SILU, 1);
    bn_forward_train(plain.y, plain.save, plain.rm, plain.rv, t.x, t.gamma, t.beta, t.M, t.C, EPS, MOM,
                     NORM_ACT_NONE, 0, 1);
    float *a = tu_fvec(n), *dz = tu_fvec(n);
    silu_forward(a, plain.y, n, 0, 1);
    tu_assert_close_f(fused.y, a, n, 1e-6, 1e-7, "fused y");
    silu_backward(dz, t.dy, plain.y, n, 0, 1);
    /* the fused backward left dz in its dout; the plain one leaves dout alone */
    tu_assert_close_f(fused.dyc, dz, n, 1e-6, 1e-7, "fused dz left in dout");
    memcpy(a, dz, n * sizeof *a);
    bn_backward(plain.dx, plain.dg, plain.db, dz, t.x, plain.save, t.gamma, t.beta, t.M, t.C, NORM_ACT_NONE, 1, 0, 1);
    tu_assert_bitwise(dz, a, n, "dout untouched without activation");
    tu_assert_close_f(fused.dx, plain.dx, n, 1e-5, 1e-6, "fused dx");
    tu_assert_close_f(fused.dg, plain.dg, C, 1e-5, 1e-6, "fused dgamma");
    tu_assert_close_f(fused.db, plain.db, C, 1e-5, 1e-6, "fused dbeta");
    free(a), free(dz);
    bn_out_free(&fused);
    bn_out_free(&plain);
    bn_case_free(&t);
}

/* Larger than one channel block (NORM_CB = 256) and not a multiple of 16. */
Test(bn, wide_channels_match_ref)
{
    struct bn_case t;
    bn_case_init(&t, 2 * 3 * 3, 301, 90);
    size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    struct bn_out o;
    bn_out_init(&o, &t);
    bn_run(&o, &t, NORM_ACT_SILU, 1);
    struct bn_fd f = {tu_to_d(t.x, n), tu_to_d(t.gamma, C), tu_to_d(t.beta, C), tu_to_d(t.dy, n), tu_dvec(n), tu_dvec(2 * C),
                      t.M, t.C, NORM_ACT_SILU};
    bn_fd_loss(&f);
    tu_assert_close(o.y, f.y, n, 1e-5, 1e-6, "y");
    double *dx = tu_dvec(n), *dg = tu_dvec(C), *db = tu_dvec(C);
    bn_backward_ref(dx, dg, db, f.w, f.x, f.save, f.gamma, f.beta, t.M, t.C, NORM_ACT_SILU);
    tu_assert_close(o.dx, dx, n, 1e-4, 2e-5, "dx");
    tu_assert_close(o.dg, dg, C, 1e-4, 1e-5, "dgamma");
    tu_assert_close(o.db, db, C, 1e-4, 1e-5, "dbeta");
    struct bn_out o3;
    bn_out_init(&o3, &t);
    bn_run(&o3, &t, NORM_ACT_SILU, 3);
    bn_out_assert_bitwise(&o3, &o, &t, "wide nth=3");
    free(f.x), free(f.gamma), free(f.beta), free(f.w), free(f.y), free(f.save), free(dx), free(dg), free(db);
    bn_out_free(&o);
    bn_out_free(&o3);
    bn_case_free(&t);
}

/* n floats, zeroed, at a 64-byte boundary plus off floats (calloc's large blocks sit 16 bytes past a page). */
static float *aligned_fvec(size_t n, size_t off)
{
    float *p = aligned_alloc(64, ((n + off) * sizeof(float) + 63) / 64 * 64);
    cr_assert_not_null(p);
    memset(p, 0, (n + off) * sizeof(float));
    return p + off;
}

/* A tensor of at least 16 MiB: the row kernels write y and an overwritten dx with non-temporal stores
 * when the output is 32-byte aligned. Both match the reference, and are bitwise what plain stores give
 * (the same output one float off the boundary takes the plain path). */
Test(bn, streamed_outputs_match_ref_and_plain, .timeout = 60)
{
    struct bn_case t;
    bn_case_init(&t, 65600, 64, 110); /* 16.8 MB a tensor */
    const size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
    float *y[2], *dx[2], *dyc = tu_fvec(n), *save = tu_fvec(2 * C), *rm = tu_fvec(C), *rv = tu_fvec(C);
    float *dg = tu_fvec(C), *db = tu_fvec(C);
    for (int k = 0; k < 2; k++) {
        for (int a = 0; a < 2; a++) { /* a = 0: aligned (streamed), 1: one float off (plain) */
            y[a] = aligned_fvec(n, (size_t)a);
            dx[a] = aligned_fvec(n, (size_t)a);
            memcpy(rm, t.rm, C * sizeof(float));
            memcpy(rv, t.rv, C * sizeof(float));
            memcpy(dyc, t.dy, n * sizeof(float));
            bn_forward_train(y[a], save, rm, rv, t.x, t.gamma, t.beta, t.M, t.C, EPS, MOM, ACTS[k], 0, 1);
            bn_backward(dx[a], dg, db, dyc, t.x, save, t.gamma, t.beta, t.M, t.C, ACTS[k], 0, 0, 1);
        }
        tu_assert_bitwise(y[0], y[1], n, "streamed y against plain stores");
        tu_assert_bitwise(dx[0], dx[1], n, "streamed dx against plain stores");
        struct bn_fd f = {tu_to_d(t.x, n), tu_to_d(t.gamma, C), tu_to_d(t.beta, C), tu_to_d(t.dy, n), tu_dvec(n),
                          tu_dvec(2 * C), t.M, t.C, ACTS[k]};
        bn_fd_loss(&f);
        tu_assert_close(y[0], f.y, n, 1e-5, 1e-6, "streamed y");
        double *rdx = tu_dvec(n), *rdg = tu_dvec(C), *rdb = tu_dvec(C);
        bn_backward_ref(rdx, rdg, rdb, f.w, f.x, f.save, f.gamma, f.beta, t.M, t.C, ACTS[k]);
        tu_assert_close(dx[0], rdx, n, 1e-4, 2e-5, "streamed dx");
        free(f.x), free(f.gamma), free(f.beta), free(f.w), free(f.y), free(f.save), free(rdx), free(rdg), free(rdb);
        free(y[0]), free(dx[0]), free(y[1] - 1), free(dx[1] - 1);
    }
    free(dyc), free(save), free(rm), free(rv), free(dg), free(db);
    bn_case_free(&t);
}

/* Real threads: 2 workers run their slices concurrently; the result is bitwise nth = 1. */
struct bn_thread_arg {
    struct bn_out *o;
    const struct bn_case *t;
    int ith, nth, phase;
};

static void *bn_thread(void *p)
{
    struct bn_thread_arg *a = p;
    const struct bn_case *t = a->t;
    struct bn_out *o = a->o;
    if (a->phase == 0)
        bn_forward_train(o->y, o->save, o->rm, o->rv, t->x, t->gamma, t->beta, t->M, t->C, EPS, MOM,
                         NORM_ACT_SILU, a->ith, a->nth);
    else
        bn_backward(o->dx, o->dg, o->db, o->dyc, t->x, o->save, t->gamma, t->beta, t->M, t->C, NORM_ACT_SILU, 1,
                    a->ith, a->nth);
    return NULL;
}

/* The SE-fused first backward pass gives the dz and sums that se_scale_backward, then
 * global_avgpool_backward, then bn_backward_chunks give, bit for bit, for any nth (chunks that cut
 * samples, C with a masked tail, and HW smaller and larger than a chunk). */
Test(bn, se_fused_backward_matches_unfused)
{
    static const struct { int N; size_t HW; int C; } shapes[] = {{3, 49, 37}, {4, 200, 24}, {2, 9, 130}, {16, 1, 16}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const int N = shapes[k].N, C = shapes[k].C;
        const size_t HW = shapes[k].HW, M = (size_t)N * HW, n = M * (size_t)C, nc = (size_t)N * (size_t)C;
        struct bn_case t;
        bn_case_init(&t, M, C, 300 + k);
        float *y = tu_fvec(n), *save = tu_fvec(2 * (size_t)C), *s = tu_fvec(nc), *dp = tu_fvec(nc);
        float *dh = tu_fvec(n), *dse = tu_fvec(n), *ds = tu_fvec(nc), *dx0 = tu_fvec(n), *dx1 = tu_fvec(n);
        fill(s, nc, 400 + k, 0.5f, 0.2f);
        fill(dp, nc, 500 + k, 0.0f, 1.0f);
        bn_forward_train(y, save, NULL, NULL, t.x, t.gamma, t.beta, M, C, EPS, MOM, NORM_ACT_SILU, 0, 1);
        double *p0 = tu_dvec(bn_chunk_doubles(M, C)), *p1 = tu_dvec(bn_chunk_doubles(M, C));
        /* unfused, one thread: dh = do·s, then += dp/HW, then the chunk sums (dz over dh) */
        se_scale_backward(dh, ds, t.dy, y, s, N, HW, C, 0, 0, 1);
        global_avgpool_backward(dh, dp, N, HW, C, 0, 1);
        bn_backward_chunks(p0, dh, t.x, save, t.gamma, t.beta, M, C, NORM_ACT_SILU, 0, 1);
        bn_backward_finish(dx0, ds, ds, dh, t.x, save, t.gamma, p0, M, C, 0, 0, 1);
        for (int ni = 0; ni < TU_N_NTHS; ni++) {
            const int nth = TU_NTHS[ni];
            memcpy(dse, t.dy, n * sizeof(float));
            for (int i = 0; i < nth; i++)
                bn_backward_chunks_se(p1, dse, s, dp, HW, t.x, save, t.gamma, t.beta, M, C, i, nth);
            for (int i = 0; i < nth; i++) bn_backward_finish(dx1, ds, ds, dse, t.x, save, t.gamma, p1, M, C, 0, i, nth);
            char what[96];
            snprintf(what, sizeof what, "N %d HW %zu C %d nth %d: dz", N, HW, C, nth);
            tu_assert_bitwise(dse, dh, n, what);
            snprintf(what, sizeof what, "N %d HW %zu C %d nth %d: chunk sums", N, HW, C, nth);
            tu_assert_bitwise_d(p1, p0, bn_chunk_doubles(M, C), what);
            snprintf(what, sizeof what, "N %d HW %zu C %d nth %d: dx", N, HW, C, nth);
            tu_assert_bitwise(dx1, dx0, n, what);
        }
        free(p0), free(p1);
        free(y), free(save), free(s), free(dp), free(dh), free(dse), free(ds), free(dx0), free(dx1);
        bn_case_free(&t);
    }
}

/* Phase 2 split for a consumer that applies it as it reads: bn_backward_coefs' dgamma and dbeta, then
 * bn_backward_rows over any row range, give bn_backward_finish's, bit for bit, for any nth (a 2048+
 * channel case spans two coefficient blocks). */
Test(bn, coefs_then_rows_match_finish)
{
    static const struct { size_t M; int C; } shapes[] = {{3 * 49, 37}, {800, 24}, {18, 2100}, {1030, 96}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const size_t M = shapes[k].M, n = M * (size_t)shapes[k].C;
        const int C = shapes[k].C;
        struct bn_case t;
        bn_case_init(&t, M, C, 600 + k);
        float *y = tu_fvec(n), *save = tu_fvec(2 * (size_t)C), *dz = tu_fvec(n), *dx0 = tu_fvec(n), *dx1 = tu_fvec(n);
        float *g0 = tu_fvec((size_t)C), *b0 = tu_fvec((size_t)C), *g1 = tu_fvec((size_t)C), *b1 = tu_fvec((size_t)C);
        float *coef = tu_fvec(3 * (size_t)C);
        double *part = tu_dvec(bn_chunk_doubles(M, C));
        bn_forward_train(y, save, NULL, NULL, t.x, t.gamma, t.beta, M, C, EPS, MOM, NORM_ACT_SILU, 0, 1);
        memcpy(dz, t.dy, n * sizeof(float));
        bn_backward_chunks(part, dz, t.x, save, t.gamma, t.beta, M, C, NORM_ACT_SILU, 0, 1);
        bn_backward_finish(dx0, g0, b0, dz, t.x, save, t.gamma, part, M, C, 0, 0, 1);
        for (int ni = 0; ni < TU_N_NTHS; ni++) {
            const int nth = TU_NTHS[ni];
            memset(g1, 0, (size_t)C * sizeof(float)), memset(b1, 0, (size_t)C * sizeof(float));
            memset(dx1, 0xFF, n * sizeof(float));
            for (int i = 0; i < nth; i++) bn_backward_coefs(coef, g1, b1, save, t.gamma, part, M, C, i, nth);
            /* rows in uneven pieces, as a consumer reads them */
            for (size_t r = 0, step = 7; r < M; r += step, step = step * 3 % 97 + 1)
                bn_backward_rows(dx1 + r * C, dz + r * C, t.x + r * C, save, coef, M - r < step ? M - r : step, C);
            char what[96];
            snprintf(what, sizeof what, "M %zu C %d nth %d: dx", M, C, nth);
            tu_assert_bitwise(dx1, dx0, n, what);
            snprintf(what, sizeof what, "M %zu C %d nth %d: dgamma", M, C, nth);
            tu_assert_bitwise(g1, g0, (size_t)C, what);
            snprintf(what, sizeof what, "M %zu C %d nth %d: dbeta", M, C, nth);
            tu_assert_bitwise(b1, b0, (size_t)C, what);
        }
        free(part), free(y), free(save), free(dz), free(dx0), free(dx1), free(g0), free(b0), free(g1), free(b1);
        free(coef);
        bn_case_free(&t);
    }
}

/* The forward apply with the SE pool taken in the same pass gives the outputs, statistics and pool
 * of bn_forward_train_finish then global_avgpool_forward, bit for bit, for any nth (NT stores too). */
Test(bn, finish_pool_matches_finish_then_pool)
{
    static const struct { int N; size_t HW; int C; } shapes[] = {{3, 49, 37}, {4, 200, 48}, {2, 9, 130}, {16, 1, 16},
                                                                 {2, 4096, 64}, {8, 1, 1152}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const int N = shapes[k].N, C = shapes[k].C;
        const size_t HW = shapes[k].HW, M = (size_t)N * HW, n = M * (size_t)C, nc = (size_t)N * (size_t)C;
        struct bn_case t;
        bn_case_init(&t, M, C, 600 + k);
        double *part = tu_dvec(bn_chunk_doubles(M, C));
        bn_forward_train_chunks(part, t.x, M, C, 0, 1);
        float *y0 = tu_fvec(n), *y1 = tu_fvec(n), *p0 = tu_fvec(nc), *p1 = tu_fvec(nc);
        float *s0 = tu_fvec(2 * (size_t)C), *s1 = tu_fvec(2 * (size_t)C);
        bn_forward_train_finish(y0, s0, NULL, NULL, t.x, t.gamma, t.beta, part, M, C, EPS, MOM, NORM_ACT_SILU, 0, 1);
        global_avgpool_forward(p0, y0, N, HW, C, 0, 1);
        for (int ni = 0; ni < TU_N_NTHS; ni++) {
            const int nth = TU_NTHS[ni];
            memset(p1, 0xff, nc * sizeof(float));
            for (int i = 0; i < nth; i++)
                bn_forward_train_finish_pool(y1, p1, s1, NULL, NULL, t.x, t.gamma, t.beta, part, M, HW, C, EPS, MOM,
                                             i, nth);
            char what[96];
            snprintf(what, sizeof what, "N %d HW %zu C %d nth %d: y", N, HW, C, nth);
            tu_assert_bitwise(y1, y0, n, what);
            snprintf(what, sizeof what, "N %d HW %zu C %d nth %d: pool", N, HW, C, nth);
            tu_assert_bitwise(p1, p0, nc, what);
            snprintf(what, sizeof what, "N %d HW %zu C %d nth %d: save", N, HW, C, nth);
            tu_assert_bitwise(s1, s0, 2 * (size_t)C, what);
        }
        free(part), free(y0), free(y1), free(p0), free(p1), free(s0), free(s1);
        bn_case_free(&t);
    }
}

Test(bn, real_threads_bitwise, .timeout = 30)
{
    struct bn_case t;
    bn_case_init(&t, 4 * 8 * 8, 96, 100);
    struct bn_out ref, o;
    bn_out_init(&ref, &t);
    bn_out_init(&o, &t);
    bn_run(&ref, &t, NORM_ACT_SILU, 1);
    memcpy(o.dyc, t.dy, t.M * (size_t)t.C * sizeof(float));
    for (int phase = 0; phase < 2; phase++) {
        pthread_t th[2];
        struct bn_thread_arg args[2];
        for (int i = 0; i < 2; i++) {
            args[i] = (struct bn_thread_arg){&o, &t, i, 2, phase};
            cr_assert_eq(pthread_create(&th[i], NULL, bn_thread, &args[i]), 0);
        }
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    }
    bn_out_assert_bitwise(&o, &ref, &t, "2 threads");
    bn_out_free(&ref);
    bn_out_free(&o);
    bn_case_free(&t);
}

/* ------------------------------------------------------------------------------------------------
 * GroupNorm
 */
TestSuite(gn);

struct gn_case {
    int N, C, G;
    size_t HW;
    float *x, *gamma, *beta, *dy;
};

static void gn_case_init(struct gn_case *t, int N, size_t HW, int C, int G, uint64_t seed)
{
    t->N = N, t->HW = HW, t->C = C, t->G = G;
    size_t n = (size_t)N * HW * (size_t)C;
    t->x = tu_fvec(n);
    t->dy = tu_fvec(n);
    t->gamma = tu_fvec((size_t)C);
    t->beta = tu_fvec((size_t)C);
    fill(t->x, n, seed, -0.4f, 2.0f);
    fill(t->dy, n, seed + 1, 0.0f, 1.0f);
    fill(t->gamma, (size_t)C, seed + 2, 1.0f, 0.3f);
    fill(t->beta, (size_t)C, seed + 3, 0.0f, 0.5f);
}

static void gn_case_free(struct gn_case *t)
{
    free(t->x);
    free(t->dy);
    free(t->gamma);
    free(t->beta);
}

struct gn_fd {
    double *x, *gamma, *beta, *w, *y, *save;
    const struct gn_case *t;
    enum norm_act act;
};

static double gn_fd_loss(void *p)
{
    struct gn_fd *f = p;
    const struct gn_case *t = f->t;
    gn_forward_ref(f->y, f->save, f->x, f->gamma, f->beta, t->N, t->HW, t->C, t->G, GN_EPS_DEFAULT, f->act);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)t->N * t->HW * (size_t)t->C; i++) l += f->w[i] * f->y[i];
    return l;
}

/* Forward + backward with nth slices for every kernel. */
static void gn_run(float *y, float *save, float *dx, float *dg, float *db, const struct gn_case *t,
                   enum norm_act act, int nth)
{
    for (int i = 0; i < nth; i++)
        gn_forward(y, save, t->x, t->gamma, t->beta, t->N, t->HW, t->C, t->G, GN_EPS_DEFAULT, act, i, nth);
    for (int i = 0; i < nth; i++)
        gn_backward_data(dx, t->dy, t->x, save, t->gamma, t->beta, t->N, t->HW, t->C, t->G, act, 1, i, nth);
    for (int i = 0; i < nth; i++)
        gn_backward_params(dg, db, t->dy, t->x, save, t->gamma, t->beta, t->N, t->HW, t->C, t->G, act, i, nth);
}

/* Shapes: the brief's odd case with 4 groups, one group (layer-norm-like), one channel per group,
 * groups wider than a channel block (Cg = 260), and many 2-channel groups over two chunks. */
static const int GN_CASES[][4] = {{3, 35, 12, 4}, {3, 35, 13, 1}, {3, 35, 13, 13}, {2, 6, 520, 2}, {2, 5, 300, 150}};

Test(gn, matches_ref_and_finite_differences)
{
    for (size_t ci = 0; ci < sizeof GN_CASES / sizeof GN_CASES[0]; ci++) {
        struct gn_case t;
        gn_case_init(&t, GN_CASES[ci][0], (size_t)GN_CASES[ci][1], GN_CASES[ci][2], GN_CASES[ci][3], 200 + ci);
        size_t n = (size_t)t.N * t.HW * (size_t)t.C, C = (size_t)t.C, ns = (size_t)t.N * (size_t)t.G * 2;
        for (int k = 0; k < 2; k++) {
            float *y = tu_fvec(n), *save = tu_fvec(ns), *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C);
            gn_run(y, save, dx, dg, db, &t, ACTS[k], 1);
            struct gn_fd f = {tu_to_d(t.x, n), tu_to_d(t.gamma, C), tu_to_d(t.beta, C), tu_to_d(t.dy, n), tu_dvec(n), tu_dvec(ns),
                              &t, ACTS[k]};
            gn_fd_loss(&f);
            char what[96];
            snprintf(what, sizeof what, "case %zu act %d y", ci, (int)ACTS[k]);
            tu_assert_close(y, f.y, n, 1e-5, 1e-6, what);
            tu_assert_close(save, f.save, ns, 1e-6, 1e-7, "save");
            double *rdx = tu_dvec(n), *rdg = tu_dvec(C), *rdb = tu_dvec(C);
            gn_backward_ref(rdx, rdg, rdb, f.w, f.x, f.save, f.gamma, f.beta, t.N, t.HW, t.C, t.G, ACTS[k]);
            snprintf(what, sizeof what, "case %zu act %d dx vs ref", ci, (int)ACTS[k]);
            tu_assert_close(dx, rdx, n, 1e-4, 2e-5, what);
            tu_assert_close(dg, rdg, C, 1e-4, 1e-5, "dgamma vs ref");
            tu_assert_close(db, rdb, C, 1e-4, 1e-5, "dbeta vs ref");
            double *gx = tu_dvec(n), *gg = tu_dvec(C), *gb = tu_dvec(C);
            tu_fd_grad(gx, f.x, n, gn_fd_loss, &f, 1e-5);
            tu_fd_grad(gg, f.gamma, C, gn_fd_loss, &f, 1e-5);
            tu_fd_grad(gb, f.beta, C, gn_fd_loss, &f, 1e-5);
            snprintf(what, sizeof what, "case %zu act %d dx vs fd", ci, (int)ACTS[k]);
            tu_assert_close(dx, gx, n, 1e-3, 1e-4, what);
            tu_assert_close(dg, gg, C, 1e-3, 1e-4, "dgamma vs fd");
            tu_assert_close(db, gb, C, 1e-3, 1e-4, "dbeta vs fd");
            free(f.x), free(f.gamma), free(f.beta), free(f.w), free(f.y), free(f.save);
            free(rdx), free(rdg), free(rdb), free(gx), free(gg), free(gb);
            free(y), free(save), free(dx), free(dg), free(db);
        }
        gn_case_free(&t);
    }
}

Test(gn, backward_accumulates)
{
    struct gn_case t;
    gn_case_init(&t, 3, 35, 12, 4, 300);
    size_t n = (size_t)t.N * t.HW * (size_t)t.C, C = (size_t)t.C, ns = (size_t)t.N * (size_t)t.G * 2;
    float *y = tu_fvec(n), *save = tu_fvec(ns), *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C);
    float *dx2 = tu_fvec(n), *dg2 = tu_fvec(C), *db2 = tu_fvec(C);
    gn_run(y, save, dx, dg, db, &t, NORM_ACT_SILU, 1);
    for (int rep = 0; rep < 2; rep++) {
        gn_backward_data(dx2, t.dy, t.x, save, t.gamma, t.beta, t.N, t.HW, t.C, t.G, NORM_ACT_SILU, 1, 0, 1);
        gn_backward_params(dg2, db2, t.dy, t.x, save, t.gamma, t.beta, t.N, t.HW, t.C, t.G, NORM_ACT_SILU, 0, 1);
    }
    for (size_t i = 0; i < n; i++) cr_assert(dx2[i] == 2.0f * dx[i], "dx[%zu] not doubled", i);
    for (size_t c = 0; c < C; c++) cr_assert(dg2[c] == 2.0f * dg[c] && db2[c] == 2.0f * db[c], "dγ/dβ[%zu]", c);
    free(y), free(save), free(dx), free(dg), free(db), free(dx2), free(dg2), free(db2);
    gn_case_free(&t);
}

/* acc = 0 overwrites dx: onto garbage it gives the bits acc = 1 gives onto zeros, every partition. */
Test(gn, backward_overwrites)
{
    struct gn_case t;
    gn_case_init(&t, 3, 35, 12, 4, 310);
    size_t n = (size_t)t.N * t.HW * (size_t)t.C, C = (size_t)t.C, ns = (size_t)t.N * (size_t)t.G * 2;
    float *y = tu_fvec(n), *save = tu_fvec(ns), *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C);
    float *dx2 = tu_fvec(n);
    for (int k = 0; k < 2; k++) {
        memset(dx, 0, n * sizeof *dx);
        gn_run(y, save, dx, dg, db, &t, ACTS[k], 1);
        for (int ni = 0; ni < TU_N_NTHS; ni++) {
            const int nth = TU_NTHS[ni];
            fill(dx2, n, 20 + ni, 1.0f, 4.0f);
            for (int i = 0; i < nth; i++)
                gn_backward_data(dx2, t.dy, t.x, save, t.gamma, t.beta, t.N, t.HW, t.C, t.G, ACTS[k], 0, i, nth);
            tu_assert_bitwise(dx2, dx, n, "gn_backward_data acc=0 dx");
        }
    }
    free(y), free(save), free(dx), free(dg), free(db), free(dx2);
    gn_case_free(&t);
}

Test(gn, partition_bitwise)
{
    const int cases[][4] = {{3, 35, 12, 4}, {3, 35, 72, 4}, {2, 5, 300, 150}};
    for (int ci = 0; ci < 3; ci++) {
        struct gn_case t;
        gn_case_init(&t, cases[ci][0], (size_t)cases[ci][1], cases[ci][2], cases[ci][3], 400 + (uint64_t)ci);
        size_t n = (size_t)t.N * t.HW * (size_t)t.C, C = (size_t)t.C, ns = (size_t)t.N * (size_t)t.G * 2;
        for (int k = 0; k < 2; k++) {
            float *y1 = tu_fvec(n), *s1 = tu_fvec(ns), *dx1 = tu_fvec(n), *dg1 = tu_fvec(C), *db1 = tu_fvec(C);
            gn_run(y1, s1, dx1, dg1, db1, &t, ACTS[k], 1);
            for (int q = 1; q < TU_N_NTHS; q++) {
                float *y = tu_fvec(n), *s = tu_fvec(ns), *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C);
                gn_run(y, s, dx, dg, db, &t, ACTS[k], TU_NTHS[q]);
                char what[64];
                snprintf(what, sizeof what, "case %d act %d nth %d", ci, (int)ACTS[k], TU_NTHS[q]);
                tu_assert_bitwise(y, y1, n, what);
                tu_assert_bitwise(s, s1, ns, what);
                tu_assert_bitwise(dx, dx1, n, what);
                tu_assert_bitwise(dg, dg1, C, what);
                tu_assert_bitwise(db, db1, C, what);
                free(y), free(s), free(dx), free(dg), free(db);
            }
            free(y1), free(s1), free(dx1), free(dg1), free(db1);
        }
        gn_case_free(&t);
    }
}

Test(gn, fused_silu_matches_unfused)
{
    struct gn_case t;
    gn_case_init(&t, 3, 35, 12, 4, 500);
    size_t n = (size_t)t.N * t.HW * (size_t)t.C, C = (size_t)t.C, ns = (size_t)t.N * (size_t)t.G * 2;
    float *yf = tu_fvec(n), *sf = tu_fvec(ns), *dxf = tu_fvec(n), *dgf = tu_fvec(C), *dbf = tu_fvec(C), *dy0 = tu_fvec(n);
    memcpy(dy0, t.dy, n * sizeof *dy0);
    gn_run(yf, sf, dxf, dgf, dbf, &t, NORM_ACT_SILU, 1);
    tu_assert_bitwise(t.dy, dy0, n, "GroupNorm backward leaves dout intact");
    free(dy0);
    float *z = tu_fvec(n), *s = tu_fvec(ns), *a = tu_fvec(n), *dz = tu_fvec(n), *dx = tu_fvec(n), *dg = tu_fvec(C), *db = tu_fvec(C);
    gn_forward(z, s, t.x, t.gamma, t.beta, t.N, t.HW, t.C, t.G, GN_EPS_DEFAULT, NORM_ACT_NONE, 0, 1);
    silu_forward(a, z, n, 0, 1);
    tu_assert_close_f(yf, a, n, 1e-6, 1e-7, "fused y");
    silu_backward(dz, t.dy, z, n, 0, 1);
    gn_backward_data(dx, dz, t.x, s, t.gamma, t.beta, t.N, t.HW, t.C, t.G, NORM_ACT_NONE, 1, 0, 1);
    gn_backward_params(dg, db, dz, t.x, s, t.gamma, t.beta, t.N, t.HW, t.C, t.G, NORM_ACT_NONE, 0, 1);
    tu_assert_close_f(dxf, dx, n, 1e-5, 1e-6, "fused dx");
    tu_assert_close_f(dgf, dg, C, 1e-5, 1e-6, "fused dgamma");
    tu_assert_close_f(dbf, db, C, 1e-5, 1e-6, "fused dbeta");
    free(yf), free(sf), free(dxf), free(dgf), free(dbf), free(z), free(s), free(a), free(dz), free(dx), free(dg),
        free(db);
    gn_case_free(&t);
}
