/* test_optim.c — optimizers and learning-rate schedules (core/optim.c).
 *
 * Each optimizer (Adam in Keras form, SGD with momentum in PyTorch form, RMSProp in TF form, LARS
 * with per-tensor trust ratios) runs 3 steps on a few elements against the same formulas evaluated
 * in double here (within 1e-6 relative), with weight decay applied only to decayed segments and the
 * padding between segments left exactly as it was; the fused optim_adam_outer is held bitwise against
 * dense_backward_params (batch 1, zeroed gradients) followed by optim_update, and its fused next
 * forward against dense_forward; the LR schedules
 * against their closed forms; and every update with nth ∈ {1,2,3,7} (slices run one after another)
 * bitwise equal to nth = 1.
 */
#include "test_util.h"

#include "layout.h"
#include "op_dense.h"
#include "optim.h"

/* The parameter layout the element-wise tests use: three tensors with alignment gaps between them,
 * the last a bias (no decay), like the engine's segments over the param arena. */
enum { N_EL = 48 };
static const struct optim_segment SEGS[] = {{0, 13, 0}, {16, 7, 0}, {32, 11, 1}};
#define N_SEGS 3

/* Segment index of element i, or -1 in a gap. */
static int seg_of(size_t i)
{
    for (int k = 0; k < N_SEGS; k++)
        if (i >= SEGS[k].off && i < SEGS[k].off + SEGS[k].n) return k;
    return -1;
}

/* Reference state in double, updated by the formulas the optimizers document. */
struct ref_state {
    double p[N_EL], s0[N_EL], s1[N_EL];
};

/* Gradient of step t (1-based), element i: varied signs and magnitudes, some exact zeros. */
static float grad_at(int t, size_t i)
{
    if ((i + (size_t)t) % 11 == 0) return 0.0f;
    return (float)(0.5 * rng_normal(900 + (uint64_t)t, 1, i));
}

static void init_params(float *p, struct ref_state *r)
{
    for (size_t i = 0; i < N_EL; i++) {
        /* away from zero so relative comparisons mean something */
        float v = (float)(0.3 + 0.7 * rng_uniform(5, 1, i));
        p[i] = (i % 2) ? -v : v;
        r->p[i] = p[i];
        r->s0[i] = r->s1[i] = 0.0;
    }
}

/* One reference step of kind at step t with gradient g (float, as the kernel sees it). Without
 * segments, every element belongs to one decayed tensor. */
static void ref_step(const struct optim_config *c, struct ref_state *r, const float *g, int t, const double *trust,
                     int with_segs)
{
    const double lr = c->lr;
    for (size_t i = 0; i < N_EL; i++) {
        const int k = with_segs ? seg_of(i) : 0;
        if (k < 0) continue; /* gaps (padding) are outside every tensor */
        const double wd = with_segs && SEGS[k].no_decay ? 0.0 : c->weight_decay;
        const double gi = (double)g[i] + wd * r->p[i];
        switch (c->kind) {
        case OPTIM_ADAM: {
            const double b1 = c->beta1, b2 = c->beta2;
            const double alpha = lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t));
            r->s0[i] += (gi - r->s0[i]) * (1.0 - b1);
            r->s1[i] += (gi * gi - r->s1[i]) * (1.0 - b2);
            r->p[i] -= alpha * r->s0[i] / (sqrt(r->s1[i]) + (double)c->eps);
            break;
        }
        case OPTIM_SGD:
            r->s0[i] = c->momentum * r->s0[i] + gi;
            r->p[i] -= lr * r->s0[i];
            break;
        case OPTIM_RMSPROP:
            r->s0[i] = c->rho * r->s0[i] + (1.0 - c->rho) * gi * gi;
            r->s1[i] = c->momentum * r->s1[i] + lr * gi / sqrt(r->s0[i] + (double)c->eps);
            r->p[i] -= r->s1[i];
            break;
        case OPTIM_LARS:
            r->s0[i] = c->momentum * r->s0[i] + lr * trust[k] * gi;
            r->p[i] -= r->s0[i];
            break;
        }
    }
}

/* LARS trust ratios of the reference state: η‖w‖/(‖g‖ + wd‖w‖), 1 for no-decay tensors. */
static void ref_trust(const struct optim_config *c, const struct ref_state *r, const float *g, double *trust)
{
    for (int k = 0; k < N_SEGS; k++) {
        trust[k] = 1.0;
        if (SEGS[k].no_decay) continue;
        double wn = 0.0, gn = 0.0;
        for (size_t i = SEGS[k].off; i < SEGS[k].off + SEGS[k].n; i++)
            wn += r->p[i] * r->p[i], gn += (double)g[i] * g[i];
        wn = sqrt(wn), gn = sqrt(gn);
        if (wn > 0.0 && gn > 0.0) trust[k] = c->lars_eta * wn / (gn + c->weight_decay * wn);
    }
}

/* |got − want| ≤ 1e-6·|want| + 1e-7·max|want|: relative, with a floor for elements where the
 * update cancels (momentum of a gradient that changed sign). With segments, the padding between
 * tensors must be left exactly as it was, which is what the reference holds there (it never moves it). */
static void assert_rel(const float *got, const double *want, const char *what, int t, int with_segs)
{
    double mx = 0.0;
    for (size_t i = 0; i < N_EL; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < N_EL; i++) {
        if (with_segs && seg_of(i) < 0) {
            cr_assert(got[i] == (float)want[i], "%s[%zu] (padding) after step %d: %.9g, was %.9g", what, i, t,
                      (double)got[i], want[i]);
            continue;
        }
        const double err = fabs((double)got[i] - want[i]);
        cr_assert(err <= 1e-6 * fabs(want[i]) + 1e-7 * mx, "%s[%zu] after step %d: got %.9g want %.12g (rel %.3g)",
                  what, i, t, (double)got[i], want[i], err / fabs(want[i]));
    }
}

/* Runs 3 steps of c on the kernel and on the reference and compares params and state after each. */
static void check_three_steps(const struct optim_config *c, int with_segs)
{
    float p[N_EL], g[N_EL], state[2 * N_EL] = {0};
    float trust[N_SEGS];
    struct ref_state r;
    init_params(p, &r);
    const int ns = optim_state_per_param(c->kind);
    for (int t = 1; t <= 3; t++) {
        for (size_t i = 0; i < N_EL; i++) g[i] = grad_at(t, i);
        double tr[N_SEGS] = {1, 1, 1};
        if (c->kind == OPTIM_LARS) {
            ref_trust(c, &r, g, tr);
            optim_lars_trust(c, p, g, SEGS, N_SEGS, trust, 0, 1);
            for (int k = 0; k < N_SEGS; k++)
                cr_assert(fabs(trust[k] - tr[k]) <= 1e-6 * fabs(tr[k]), "trust[%d] step %d: %.9g want %.9g", k, t,
                          (double)trust[k], tr[k]);
        }
        ref_step(c, &r, g, t, tr, with_segs);
        if (with_segs)
            optim_update(c, p, g, state, N_EL, SEGS, N_SEGS, c->kind == OPTIM_LARS ? trust : NULL, t, 0, 1);
        else
            optim_update(c, p, g, state, N_EL, NULL, 0, NULL, t, 0, 1);
        char what[48];
        snprintf(what, sizeof what, "%s%s params", optim_name(c->kind), with_segs ? "" : " (no segs)");
        assert_rel(p, r.p, what, t, with_segs);
        snprintf(what, sizeof what, "%s state0", optim_name(c->kind));
        assert_rel(state, r.s0, what, t, with_segs);
        if (ns > 1) {
            snprintf(what, sizeof what, "%s state1", optim_name(c->kind));
            assert_rel(state + N_EL, r.s1, what, t, with_segs);
        }
    }
}

TestSuite(optim);

Test(optim, names_and_state_sizes)
{
    const enum optim_kind kinds[] = {OPTIM_ADAM, OPTIM_SGD, OPTIM_RMSPROP, OPTIM_LARS};
    const int states[] = {2, 1, 2, 1};
    for (int k = 0; k < 4; k++) {
        enum optim_kind back;
        cr_assert_eq(optim_parse(optim_name(kinds[k]), &back), 0, "optim_parse(%s)", optim_name(kinds[k]));
        cr_assert_eq(back, kinds[k]);
        cr_assert_eq(optim_state_per_param(kinds[k]), states[k], "%s state per param", optim_name(kinds[k]));
    }
    enum optim_kind dummy;
    cr_assert_neq(optim_parse("adamw", &dummy), 0);
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_ADAM);
    cr_assert(c.lr == 1e-3f && c.beta1 == 0.9f && c.beta2 == 0.999f && c.eps == 1e-7f, "Keras Adam defaults");
}

Test(optim, adam_three_steps)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_ADAM);
    c.lr = 0.01f;
    check_three_steps(&c, 1);
    check_three_steps(&c, 0);
    c.weight_decay = 0.05f; /* decayed tensors only */
    check_three_steps(&c, 1);
    check_three_steps(&c, 0);
    c.eps = 1e-2f; /* large enough that ε outside the square root is visible */
    check_three_steps(&c, 1);
}

Test(optim, sgd_momentum_three_steps)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = 0.1f;
    check_three_steps(&c, 1);
    check_three_steps(&c, 0);
    c.weight_decay = 0.05f;
    check_three_steps(&c, 1);
    check_three_steps(&c, 0);
}

Test(optim, rmsprop_three_steps)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_RMSPROP);
    check_three_steps(&c, 1);
    check_three_steps(&c, 0);
    c.weight_decay = 0.05f;
    check_three_steps(&c, 1);
    check_three_steps(&c, 0);
}

Test(optim, lars_three_steps)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_LARS);
    c.lr = 0.5f, c.lars_eta = 0.02f;
    check_three_steps(&c, 1);
    c.weight_decay = 0.05f;
    check_three_steps(&c, 1);
}

/* A no_decay segment with zero gradient and zero state must not move under any weight decay. */
Test(optim, weight_decay_skips_no_decay_segments)
{
    const enum optim_kind kinds[] = {OPTIM_ADAM, OPTIM_SGD, OPTIM_RMSPROP, OPTIM_LARS};
    for (int k = 0; k < 4; k++) {
        struct optim_config c;
        optim_config_defaults(&c, kinds[k]);
        c.weight_decay = 0.5f;
        float p[N_EL], p0[N_EL], g[N_EL] = {0}, state[2 * N_EL] = {0}, trust[N_SEGS];
        struct ref_state r;
        init_params(p, &r);
        memcpy(p0, p, sizeof p);
        if (kinds[k] == OPTIM_LARS) optim_lars_trust(&c, p, g, SEGS, N_SEGS, trust, 0, 1);
        optim_update(&c, p, g, state, N_EL, SEGS, N_SEGS, trust, 1, 0, 1);
        for (size_t i = 0; i < N_EL; i++) {
            const int s = seg_of(i);
            if (s < 0) /* padding: in no tensor, so not decayed either */
                cr_assert(p[i] == p0[i], "%s: padding element %zu moved from %g to %g", optim_name(kinds[k]), i,
                          (double)p0[i], (double)p[i]);
            else if (SEGS[s].no_decay)
                cr_assert(p[i] == p0[i], "%s: no_decay element %zu moved from %g to %g", optim_name(kinds[k]), i,
                          (double)p0[i], (double)p[i]);
            else
                cr_assert(fabsf(p[i]) < fabsf(p0[i]), "%s: decayed element %zu did not shrink (%g -> %g)",
                          optim_name(kinds[k]), i, (double)p0[i], (double)p[i]);
        }
    }
}

/* ------------------------------------------------------------------------------------------------
 * The fused batch-1 Adam against the unfused kernels.
 */

/* Runs 3 Adam steps both ways on a (rows, cols) weight and asserts params, m and v bitwise equal
 * after each; x has exact zeros (dead ReLUs) on some rows. The fused kernel also computes the next
 * input's forward from the updated weights, held bitwise against dense_forward. */
static void check_outer(const struct optim_config *c, int rows, int cols, float wd)
{
    const size_t n = (size_t)rows * cols;
    float *w1 = tu_fvec(n), *st1 = tu_fvec(2 * n), *g = tu_fvec(n);
    float *w2 = tu_fvec(n), *m2 = tu_fvec(n), *v2 = tu_fvec(n);
    float *x = tu_fvec(rows), *dy = tu_fvec(cols), *xn = tu_fvec(rows), *b = tu_fvec(cols);
    float *y1 = tu_fvec(cols), *y2 = tu_fvec(cols), *part = tu_fvec((size_t)dense1_chunks(rows) * cols);
    tu_fill_normal(w1, n, 60, 0.0f, 0.2f);
    tu_fill_normal(b, cols, 59, 0.0f, 0.3f);
    memcpy(w2, w1, n * sizeof *w1);
    struct optim_config cu = *c;
    cu.weight_decay = wd; /* the unfused path reads wd from the config; segs NULL = decayed */
    for (long t = 1; t <= 3; t++) {
        tu_fill_normal(x, rows, 61 + (uint64_t)t, 0.5f, 1.0f);
        for (int r = 0; r < rows; r++)
            if ((r + t) % 3 == 0) x[r] = 0.0f;
        tu_fill_normal(dy, cols, 71 + (uint64_t)t, 0.0f, 0.1f);
        /* unfused: gradient into zeros, then the flat update */
        memset(g, 0, n * sizeof *g);
        struct dense_shape s = {.N = 1, .IN = rows, .OUT = cols};
        dense_backward_params(g, NULL, x, dy, &s, 1, 0, 1);
        optim_update(&cu, w1, g, st1, n, NULL, 0, NULL, t, 0, 1);
        /* fused, in two column slices to show columns are independent, with the next forward (ReLU) */
        tu_fill_normal(xn, rows, 81 + (uint64_t)t, 0.5f, 1.0f);
        for (int r = 0; r < rows; r++)
            if ((r + t) % 4 == 1) xn[r] = 0.0f;
        /* each row chunk's forward sum, as the engine's fused pass forms them, then combined; up to 16
         * columns in one call (the flat narrow path takes whole rows only) */
        const float a = optim_adam_alpha(c, t);
        const int half = cols <= 16 ? cols : cols / 2;
        for (int r0 = 0; r0 < rows; r0 += DENSE1_ROW_CHUNK) {
            const int nr = rows - r0 < DENSE1_ROW_CHUNK ? rows - r0 : DENSE1_ROW_CHUNK;
            const size_t o = (size_t)r0 * cols;
            float *pk = part + (size_t)(r0 / DENSE1_ROW_CHUNK) * cols;
            memset(pk, 0, (size_t)cols * sizeof *pk);
            optim_adam_outer(c, a, w2 + o, m2 + o, v2 + o, x + r0, dy, nr, cols, 0, half, wd, xn + r0, pk);
            optim_adam_outer(c, a, w2 + o, m2 + o, v2 + o, x + r0, dy, nr, cols, half, cols, wd, xn + r0, pk);
        }
        dense1_combine(y2, part, b, rows, cols, 1, 0, 1);
        dense_forward(y1, xn, w1, b, &s, 1, 0, 1);
        char what[96];
        snprintf(what, sizeof what, "fused forward %dx%d wd=%g step %ld", rows, cols, (double)wd, t);
        tu_assert_bitwise(y2, y1, (size_t)cols, what);
        snprintf(what, sizeof what, "fused params %dx%d wd=%g step %ld", rows, cols, (double)wd, t);
        tu_assert_bitwise(w2, w1, n, what);
        snprintf(what, sizeof what, "fused m %dx%d wd=%g step %ld", rows, cols, (double)wd, t);
        tu_assert_bitwise(m2, st1, n, what);
        snprintf(what, sizeof what, "fused v %dx%d wd=%g step %ld", rows, cols, (double)wd, t);
        tu_assert_bitwise(v2, st1 + n, n, what);
    }
    free(w1), free(st1), free(g), free(w2), free(m2), free(v2), free(x), free(dy), free(xn), free(b), free(y1),
        free(y2), free(part);
}

Test(optim, adam_outer_equals_backward_params_plus_update)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_ADAM);
    c.lr = 0.01f;
    /* 37 and 50 rows: several row chunks of the fused forward, the last one short; up to 16 columns
     * (the 10 classes): the narrow path, flat over rows, with and without a masked tail */
    const int shapes[][2] = {{13, 21}, {9, 37}, {5, 3}, {7, 8}, {11, 129}, {37, 19}, {50, 264}, {37, 10}, {17, 16}};
    for (int k = 0; k < 9; k++) {
        check_outer(&c, shapes[k][0], shapes[k][1], 0.0f);
        check_outer(&c, shapes[k][0], shapes[k][1], 0.01f);
    }
}

/* The fused update must use the scheduled learning rate, as optim_update does. */
Test(optim, adam_outer_follows_lr_schedule)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_ADAM);
    c.lr = 0.01f;
    c.warmup_steps = 2;
    c.schedule = LR_COSINE;
    c.total_steps = 5;
    check_outer(&c, 13, 21, 0.0f);
}

/* ------------------------------------------------------------------------------------------------
 * Learning-rate schedules
 */
static void assert_lr(const struct optim_config *c, long step, double want, const char *what)
{
    const float got = optim_lr_at(c, step);
    cr_assert(fabs(got - want) <= 1e-6 * fabs(want) + 1e-12, "%s at step %ld: %.9g want %.9g", what, step,
              (double)got, want);
}

Test(optim, lr_warmup_then_constant)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = 0.1f, c.warmup_steps = 10, c.total_steps = 100;
    for (long s = 1; s <= 10; s++) assert_lr(&c, s, 0.1f * s / 10.0, "warm-up");
    for (long s = 11; s <= 120; s += 7) assert_lr(&c, s, 0.1f, "constant");
}

Test(optim, lr_cosine)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = 0.2f, c.final_lr = 0.002f, c.schedule = LR_COSINE, c.total_steps = 100;
    const double lr = c.lr, fl = c.final_lr;
    for (long s = 1; s <= 100; s += 3) assert_lr(&c, s, fl + 0.5 * (lr - fl) * (1.0 + cos(M_PI * s / 100.0)), "cosine");
    assert_lr(&c, 50, fl + 0.5 * (lr - fl), "cosine midpoint");
    assert_lr(&c, 100, fl, "cosine end");
    assert_lr(&c, 150, fl, "cosine past the horizon");
    /* with warm-up: linear to lr over 10 steps, then the cosine over the remaining 90 */
    c.warmup_steps = 10;
    assert_lr(&c, 5, lr * 0.5, "cosine warm-up");
    assert_lr(&c, 10, lr, "cosine warm-up end");
    for (long s = 11; s <= 100; s += 9)
        assert_lr(&c, s, fl + 0.5 * (lr - fl) * (1.0 + cos(M_PI * (s - 10) / 90.0)), "cosine after warm-up");
}

Test(optim, lr_polynomial)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = 0.1f, c.final_lr = 0.001f, c.schedule = LR_POLYNOMIAL, c.total_steps = 200, c.power = 2.0f;
    const double lr = c.lr, fl = c.final_lr;
    for (long s = 1; s <= 200; s += 11) {
        const double f = 1.0 - s / 200.0;
        assert_lr(&c, s, (lr - fl) * f * f + fl, "polynomial");
    }
    assert_lr(&c, 200, fl, "polynomial end");
    c.power = 1.0f;
    assert_lr(&c, 50, (lr - fl) * 0.75 + fl, "linear decay");
}

Test(optim, lr_exponential)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = 0.1f, c.schedule = LR_EXPONENTIAL, c.decay_rate = 0.5f, c.decay_steps = 10, c.total_steps = 1000;
    for (long s = 1; s <= 100; s += 7) assert_lr(&c, s, 0.1f * pow(0.5, s / 10.0), "exponential");
    assert_lr(&c, 30, 0.1f * 0.125, "exponential at 3 decay periods");
    c.warmup_steps = 4;
    assert_lr(&c, 2, 0.1f * 0.5, "exponential warm-up");
    assert_lr(&c, 14, 0.1f * 0.5, "exponential after warm-up");
}

/* ------------------------------------------------------------------------------------------------
 * Partitions
 */
Test(optim, partition_bitwise)
{
    /* 1237 floats in tensors of odd sizes with gaps, the last two no-decay. */
    const struct optim_segment segs[] = {{0, 501, 0}, {512, 37, 1}, {560, 600, 0}, {1168, 1, 1}, {1184, 53, 1}};
    const int ns = 5;
    const size_t n = 1237;
    const enum optim_kind kinds[] = {OPTIM_ADAM, OPTIM_SGD, OPTIM_RMSPROP, OPTIM_LARS};
    for (int k = 0; k < 4; k++) {
        struct optim_config c;
        optim_config_defaults(&c, kinds[k]);
        c.weight_decay = 0.01f;
        c.warmup_steps = 1, c.total_steps = 10, c.schedule = LR_COSINE;
        const size_t nst = (size_t)optim_state_per_param(kinds[k]) * n;
        float *p0 = tu_fvec(n), *grads = tu_fvec(3 * n);
        tu_fill_normal(p0, n, 80, 0.0f, 0.5f);
        tu_fill_normal(grads, 3 * n, 81, 0.0f, 0.1f);
        float *pr = NULL, *sr = NULL;
        for (int t = 0; t < TU_N_NTHS; t++) {
            const int nth = TU_NTHS[t];
            float *p = tu_fdup(p0, n), *st = tu_fvec(nst), trust[5];
            for (long step = 1; step <= 3; step++) {
                const float *g = grads + (size_t)(step - 1) * n;
                if (kinds[k] == OPTIM_LARS)
                    for (int ith = 0; ith < nth; ith++) optim_lars_trust(&c, p, g, segs, ns, trust, ith, nth);
                for (int ith = 0; ith < nth; ith++)
                    optim_update(&c, p, g, st, n, segs, ns, kinds[k] == OPTIM_LARS ? trust : NULL, step, ith, nth);
            }
            if (nth == 1) {
                pr = p, sr = st;
                continue;
            }
            char what[64];
            snprintf(what, sizeof what, "%s params nth=%d", optim_name(kinds[k]), nth);
            tu_assert_bitwise(p, pr, n, what);
            snprintf(what, sizeof what, "%s state nth=%d", optim_name(kinds[k]), nth);
            tu_assert_bitwise(st, sr, nst, what);
            free(p), free(st);
        }
        free(pr), free(sr), free(p0), free(grads);
    }
}

Test(optim, adam_outer_partition_bitwise)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_ADAM);
    const int rows = 29, cols = 45;
    const size_t n = (size_t)rows * cols;
    float *w0 = tu_fvec(n), *x = tu_fvec(rows), *dy = tu_fvec(cols);
    tu_fill_normal(w0, n, 90, 0.0f, 0.2f);
    tu_fill_normal(x, rows, 91, 0.0f, 1.0f);
    tu_fill_normal(dy, cols, 92, 0.0f, 0.1f);
    for (int r = 0; r < rows; r += 4) x[r] = 0.0f;
    float *wr = tu_fdup(w0, n), *mr = tu_fvec(n), *vr = tu_fvec(n);
    for (long t = 1; t <= 2; t++)
        optim_adam_outer(&c, optim_adam_alpha(&c, t), wr, mr, vr, x, dy, rows, cols, 0, cols, 0.01f, NULL, NULL);
    for (int k = 1; k < TU_N_NTHS; k++) {
        const int nth = TU_NTHS[k];
        float *w = tu_fdup(w0, n), *m = tu_fvec(n), *v = tu_fvec(n);
        for (long t = 1; t <= 2; t++)
            for (int ith = 0; ith < nth; ith++) {
                size_t lo, hi;
                tb_slice((size_t)cols, ith, nth, &lo, &hi);
                optim_adam_outer(&c, optim_adam_alpha(&c, t), w, m, v, x, dy, rows, cols, (int)lo, (int)hi, 0.01f, NULL,
                                 NULL);
            }
        tu_assert_bitwise(w, wr, n, "adam_outer params");
        tu_assert_bitwise(m, mr, n, "adam_outer m");
        tu_assert_bitwise(v, vr, n, "adam_outer v");
        free(w), free(m), free(v);
    }
    free(w0), free(x), free(dy), free(wr), free(mr), free(vr);
}
