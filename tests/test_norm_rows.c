/* test_norm_rows.c — the row-partitioned training BatchNorm (bn_forward_train_chunks → finish,
 * bn_backward_chunks → finish) that the executor runs on its threads.
 *
 * Checks: the chunk count depends on M alone and bounds the scratch; for every nth ∈ {1,2,3,7} the
 * chunk → finish pair is bitwise equal to the nth = 1 single-call kernels (and so are the single-call
 * and sync-BN two-phase kernels at every nth), on shapes where chunks and items matter: 16, 24 and 40
 * channels over many rows (9 and 16 chunks, M not a multiple of the chunk or of 16), 1283 channels over
 * few rows (channel-group items), and a shape with fewer items than threads; agreement with the double
 * references; acc = 0 overwriting; 3 real threads with a real barrier between the phases; and the
 * executor end to end: EfficientNet-B0 trained on the threads backend with 2 and 3 threads is bitwise
 * the cpu backend (params, running statistics, losses), as the kernel contract promises.
 *
 * Partition tests call the slices ith = 0..nth-1 one after another, every slice of phase 1 before any
 * of phase 2 (the barrier); the slices are disjoint, so this is what nth threads compute.
 */
#include "test_util.h"

#include <criterion/criterion.h>
#include <pthread.h>

#include "backend.h"
#include "op_norm.h"
#include "status.h"
#include "workload.h"

#define EPS BN_EPS_DEFAULT
#define MOM BN_MOMENTUM_DEFAULT

static const enum norm_act ACTS[] = {NORM_ACT_NONE, NORM_ACT_SILU};

struct shape {
    size_t M;
    int C;
};
/* 2085 = 130·16 + 5 rows: 16 chunks, the last one short; 1061 rows: 9 chunks of 7 or 8 16-row units and
 * a 5-row tail; 131×1283: two chunks of 8 channel groups each; 37×16 under 7 threads: one item, idle
 * threads; 21×2061: more channels than one 2048-channel block; 16×1152 (a 1×1 layer at batch 16): one 16-row
 * unit, shared by channel slices. */
static const struct shape SHAPES[] = {{2085, 16}, {2085, 24}, {1061, 40}, {131, 1283},
                                      {37, 16},   {300, 70},  {21, 2061}, {16, 1152}};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

struct bn_case {
    size_t M;
    int C;
    float *x, *gamma, *beta, *rm, *rv, *dy; /* x, dy (M,C); the rest (C) */
};

/* p (M,C): per channel, rows in the first third ±2^e·(1+u) with e in [lo, hi], the last third the same
 * values negated in mirror order, the middle third N(0,1) as filled. The big values cancel exactly,
 * but a double running sum of ~2^hi rounds the small ones away differently in every summation order,
 * so a change in the order of a reduction shows in the float results (plain N(0,1) data sums exactly
 * in double and would hide it). */
static void fill_cancelling(float *p, size_t M, int C, uint64_t seed, int lo, int hi)
{
    for (size_t r = 0; r < M / 3; r++)
        for (size_t c = 0; c < (size_t)C; c++) {
            const uint64_t i = r * (size_t)C + c;
            const float u = rng_uniform(seed, 7, i), sgn = rng_uniform(seed, 8, i) < 0.5f ? -1.0f : 1.0f;
            p[i] = sgn * ldexpf(1.0f + u, lo + (int)((float)(hi - lo + 1) * rng_uniform(seed, 9, i)));
            p[(M - 1 - r) * (size_t)C + c] = -p[i];
        }
}

static void case_init(struct bn_case *t, struct shape s, uint64_t seed)
{
    t->M = s.M;
    t->C = s.C;
    size_t n = s.M * (size_t)s.C, C = (size_t)s.C;
    t->x = tu_fvec(n);
    t->dy = tu_fvec(n);
    t->gamma = tu_fvec(C);
    t->beta = tu_fvec(C);
    t->rm = tu_fvec(C);
    t->rv = tu_fvec(C);
    tu_fill_normal(t->x, n, seed, 0.7f, 1.5f); /* non-zero mean, non-unit variance */
    tu_fill_normal(t->dy, n, seed + 1, 0.0f, 1.0f);
    tu_fill_normal(t->gamma, C, seed + 2, 1.0f, 0.3f);
    tu_fill_normal(t->beta, C, seed + 3, 0.0f, 0.5f);
    tu_fill_normal(t->rm, C, seed + 4, 0.0f, 0.1f);
    tu_fill_uniform(t->rv, C, seed + 5, 1.0f, 1.5f);
}

/* The same shapes with x and dy whose sums depend on the summation order. */
static void case_init_wide(struct bn_case *t, struct shape s, uint64_t seed)
{
    case_init(t, s, seed);
    fill_cancelling(t->x, s.M, s.C, seed + 6, 20, 40);
    fill_cancelling(t->dy, s.M, s.C, seed + 7, 20, 30);
}

static void case_free(struct bn_case *t)
{
    free(t->x), free(t->dy), free(t->gamma), free(t->beta), free(t->rm), free(t->rv);
}

/* One training forward + backward's outputs. */
struct bn_out {
    float *y, *save, *rm, *rv, *dx, *dg, *db;
    float *dz; /* (M,C) the dout handed to backward: dz afterwards under SiLU */
};

static void out_init(struct bn_out *o, const struct bn_case *t)
{
    size_t n = t->M * (size_t)t->C, C = (size_t)t->C;
    o->y = tu_fvec(n);
    o->dx = tu_fvec(n);
    o->dz = tu_fdup(t->dy, n);
    o->save = tu_fvec(2 * C);
    o->rm = tu_fdup(t->rm, C);
    o->rv = tu_fdup(t->rv, C);
    o->dg = tu_fvec(C);
    o->db = tu_fvec(C);
}

static void out_free(struct bn_out *o)
{
    free(o->y), free(o->dx), free(o->dz), free(o->save), free(o->rm), free(o->rv), free(o->dg), free(o->db);
}

static void out_assert_bitwise(const struct bn_out *a, const struct bn_out *b, const struct bn_case *t,
                               const char *what)
{
    size_t n = t->M * (size_t)t->C, C = (size_t)t->C;
    const struct {
        const float *a, *b;
        size_t n;
        const char *name;
    } f[] = {{a->y, b->y, n, "y"},        {a->save, b->save, 2 * C, "save"}, {a->rm, b->rm, C, "run_mean"},
             {a->rv, b->rv, C, "run_var"}, {a->dx, b->dx, n, "dx"},          {a->dg, b->dg, C, "dgamma"},
             {a->db, b->db, C, "dbeta"},   {a->dz, b->dz, n, "dz left in dout"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        char m[160];
        snprintf(m, sizeof m, "%s (M=%zu C=%d): %s", what, t->M, t->C, f[i].name);
        tu_assert_bitwise(f[i].a, f[i].b, f[i].n, m);
    }
}

/* Single-call kernels, nth slices one after another; backward accumulates (acc = 1). */
static void run_single(struct bn_out *o, const struct bn_case *t, enum norm_act act, int nth)
{
    for (int i = 0; i < nth; i++)
        bn_forward_train(o->y, o->save, o->rm, o->rv, t->x, t->gamma, t->beta, t->M, t->C, EPS, MOM, act, i, nth);
    for (int i = 0; i < nth; i++)
        bn_backward(o->dx, o->dg, o->db, o->dz, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, 1, i, nth);
}

/* Chunk → finish pairs, every phase-1 slice before any phase-2 slice. */
static void run_rows(struct bn_out *o, const struct bn_case *t, enum norm_act act, int acc, int nth)
{
    double *part = tu_dvec(bn_chunk_doubles(t->M, t->C));
    for (int i = 0; i < nth; i++) bn_forward_train_chunks(part, t->x, t->M, t->C, i, nth);
    for (int i = 0; i < nth; i++)
        bn_forward_train_finish(o->y, o->save, o->rm, o->rv, t->x, t->gamma, t->beta, part, t->M, t->C, EPS, MOM,
                                act, i, nth);
    for (int i = 0; i < nth; i++)
        bn_backward_chunks(part, o->dz, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, i, nth);
    for (int i = 0; i < nth; i++)
        bn_backward_finish(o->dx, o->dg, o->db, o->dz, t->x, o->save, t->gamma, part, t->M, t->C, acc, i, nth);
    free(part);
}

/* Sync-BN two-phase kernels for one replica. */
static void run_two_phase(struct bn_out *o, const struct bn_case *t, enum norm_act act, int nth)
{
    double *sums = tu_dvec(2 * (size_t)t->C);
    for (int i = 0; i < nth; i++) bn_stats_partial(sums, t->x, t->M, t->C, i, nth);
    for (int i = 0; i < nth; i++) bn_stats_finalize(o->save, o->rm, o->rv, sums, t->M, t->C, EPS, MOM, i, nth);
    for (int i = 0; i < nth; i++) bn_forward_apply(o->y, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, i, nth);
    for (int i = 0; i < nth; i++)
        bn_backward_partial(sums, o->dz, t->x, o->save, t->gamma, t->beta, t->M, t->C, act, i, nth);
    for (int i = 0; i < nth; i++) bn_backward_params_apply(o->dg, o->db, sums, t->C, i, nth);
    for (int i = 0; i < nth; i++)
        bn_backward_data_apply(o->dx, o->dz, t->x, o->save, t->gamma, sums, t->M, t->M, t->C, 1, i, nth);
    free(sums);
}

TestSuite(bn_rows);

Test(bn_rows, chunk_count_depends_on_rows_only)
{
    cr_assert_eq(bn_row_chunks(1), 1);
    cr_assert_eq(bn_row_chunks(128), 1);
    cr_assert_eq(bn_row_chunks(129), 2);
    cr_assert_eq(bn_row_chunks(1061), 9);
    cr_assert_eq(bn_row_chunks(1 << 20), 16);
    int prev = 1;
    for (size_t M = 1; M < 5000; M += 7) { /* monotone: scratch sized for n_max covers every smaller batch */
        const int k = bn_row_chunks_max(M), e = bn_row_chunks(M);
        cr_assert(k >= prev && k >= 1 && k <= 16, "bn_row_chunks_max(%zu) = %d after %d", M, k, prev);
        cr_assert(e >= 1 && e <= k && 4 * e >= 3 * k, "bn_row_chunks(%zu) = %d of at most %d", M, e, k);
        prev = k;
    }
    cr_assert_eq(bn_chunk_doubles(1061, 24), (size_t)9 * 2 * 24);
    /* 3,136 rows (14×14 at batch 16, 28×28 at 4): 196 units, which 16 does not divide: 14 equal chunks of
     * 224 rows, each starting on a whole image row; 3,072 rows (192 units): 16, as before. */
    cr_assert_eq(bn_row_chunks_max(3136), 16);
    cr_assert_eq(bn_row_chunks(3136), 14);
    for (int k = 0; k < 14; k++) {
        size_t r0, r1;
        bn_chunk_range(3136, k, &r0, &r1);
        cr_assert(r0 == (size_t)k * 224 && r1 == r0 + 224, "chunk %d: [%zu, %zu)", k, r0, r1);
    }
    cr_assert_eq(bn_row_chunks(3072), 16);
    cr_assert_eq(bn_row_chunks(1061), 9); /* 67 units, a prime: no equal cut in range, K0 */
}

/* The executor's path at every nth is the single-call kernels at nth = 1, and so are the single-call
 * and two-phase kernels at every nth. */
Test(bn_rows, every_partition_bitwise, .timeout = 120)
{
    for (int si = 0; si < 2 * N_SHAPES; si++) {
        struct bn_case t;
        if (si < N_SHAPES) case_init(&t, SHAPES[si], 300 + (uint64_t)si);
        else case_init_wide(&t, SHAPES[si - N_SHAPES], 300 + (uint64_t)si);
        for (int k = 0; k < 2; k++) {
            struct bn_out ref;
            out_init(&ref, &t);
            run_single(&ref, &t, ACTS[k], 1);
            for (int q = 0; q < TU_N_NTHS; q++) {
                const int nth = TU_NTHS[q];
                char what[96];
                struct bn_out r, s, p;
                out_init(&r, &t), out_init(&s, &t), out_init(&p, &t);
                run_rows(&r, &t, ACTS[k], 1, nth);
                run_single(&s, &t, ACTS[k], nth);
                run_two_phase(&p, &t, ACTS[k], nth);
                snprintf(what, sizeof what, "rows act=%d nth=%d", (int)ACTS[k], nth);
                out_assert_bitwise(&r, &ref, &t, what);
                snprintf(what, sizeof what, "single act=%d nth=%d", (int)ACTS[k], nth);
                out_assert_bitwise(&s, &ref, &t, what);
                snprintf(what, sizeof what, "two-phase act=%d nth=%d", (int)ACTS[k], nth);
                out_assert_bitwise(&p, &ref, &t, what);
                out_free(&r), out_free(&s), out_free(&p);
            }
            out_free(&ref);
        }
        case_free(&t);
    }
}

/* The wide data does expose the order: summing the rows of each channel in one run from the top
 * instead of chunk by chunk changes some float of the forward (so the bitwise tests above could fail). */
Test(bn_rows, wide_data_is_order_sensitive)
{
    struct bn_case t;
    case_init_wide(&t, SHAPES[0], 700);
    struct bn_out o;
    out_init(&o, &t);
    run_single(&o, &t, NORM_ACT_NONE, 1);
    const size_t C = (size_t)t.C;
    int differs = 0;
    for (size_t c = 0; c < C; c++) {
        double s = 0.0;
        for (size_t r = 0; r < t.M; r++) s += (double)t.x[r * C + c];
        differs += (float)(s * (1.0 / (double)t.M)) != o.save[c];
    }
    cr_assert(bn_row_chunks(t.M) > 1 && differs > 0, "no channel mean depends on the summation order");
    out_free(&o);
    case_free(&t);
}

/* acc = 0: onto garbage, the finish kernel gives the bits acc = 1 gives onto zeros. */
Test(bn_rows, finish_overwrites)
{
    struct bn_case t;
    case_init(&t, SHAPES[1], 400);
    size_t n = t.M * (size_t)t.C;
    for (int k = 0; k < 2; k++) {
        struct bn_out ref;
        out_init(&ref, &t);
        run_rows(&ref, &t, ACTS[k], 1, 1);
        for (int q = 0; q < TU_N_NTHS; q++) {
            struct bn_out o;
            out_init(&o, &t);
            tu_fill_normal(o.dx, n, 401 + (uint64_t)q, 3.0f, 5.0f);
            run_rows(&o, &t, ACTS[k], 0, TU_NTHS[q]);
            out_assert_bitwise(&o, &ref, &t, "acc=0 onto garbage");
            out_free(&o);
        }
        out_free(&ref);
    }
    case_free(&t);
}

/* The chunked sums against the naive double references (two-pass variance, libm exp). */
Test(bn_rows, matches_double_reference, .timeout = 60)
{
    const struct shape shapes[] = {{2085, 40}, {131, 1283}};
    for (int si = 0; si < 2; si++) {
        struct bn_case t;
        case_init(&t, shapes[si], 500 + (uint64_t)si);
        size_t n = t.M * (size_t)t.C, C = (size_t)t.C;
        for (int k = 0; k < 2; k++) {
            struct bn_out o;
            out_init(&o, &t);
            run_rows(&o, &t, ACTS[k], 1, 3);
            double *x = tu_to_d(t.x, n), *g = tu_to_d(t.gamma, C), *b = tu_to_d(t.beta, C), *dy = tu_to_d(t.dy, n);
            double *rm = tu_to_d(t.rm, C), *rv = tu_to_d(t.rv, C), *y = tu_dvec(n), *save = tu_dvec(2 * C);
            double *dx = tu_dvec(n), *dg = tu_dvec(C), *db = tu_dvec(C);
            bn_forward_train_ref(y, save, rm, rv, x, g, b, t.M, t.C, EPS, MOM, ACTS[k]);
            bn_backward_ref(dx, dg, db, dy, x, save, g, b, t.M, t.C, ACTS[k]);
            tu_assert_close(o.y, y, n, 1e-5, 1e-6, "y");
            tu_assert_close(o.save, save, 2 * C, 1e-6, 1e-7, "save");
            tu_assert_close(o.rm, rm, C, 1e-6, 1e-7, "run_mean");
            tu_assert_close(o.rv, rv, C, 1e-6, 1e-7, "run_var");
            tu_assert_close(o.dx, dx, n, 1e-4, 2e-5, "dx");
            tu_assert_close(o.dg, dg, C, 1e-4, 1e-5, "dgamma");
            tu_assert_close(o.db, db, C, 1e-4, 1e-5, "dbeta");
            free(x), free(g), free(b), free(dy), free(rm), free(rv), free(y), free(save), free(dx), free(dg), free(db);
            out_free(&o);
        }
        case_free(&t);
    }
}

/* Real threads: 3 workers run both pairs with a pthread barrier between phases, as the executor does. */
struct worker {
    struct bn_out *o;
    const struct bn_case *t;
    double *part;
    pthread_barrier_t *bar;
    int ith, nth;
};

static void *worker_run(void *p)
{
    struct worker *w = p;
    const struct bn_case *t = w->t;
    struct bn_out *o = w->o;
    bn_forward_train_chunks(w->part, t->x, t->M, t->C, w->ith, w->nth);
    pthread_barrier_wait(w->bar);
    bn_forward_train_finish(o->y, o->save, o->rm, o->rv, t->x, t->gamma, t->beta, w->part, t->M, t->C, EPS, MOM,
                            NORM_ACT_SILU, w->ith, w->nth);
    pthread_barrier_wait(w->bar); /* save complete; the part buffer is reused */
    bn_backward_chunks(w->part, o->dz, t->x, o->save, t->gamma, t->beta, t->M, t->C, NORM_ACT_SILU, w->ith, w->nth);
    pthread_barrier_wait(w->bar);
    bn_backward_finish(o->dx, o->dg, o->db, o->dz, t->x, o->save, t->gamma, w->part, t->M, t->C, 1, w->ith, w->nth);
    return NULL;
}

Test(bn_rows, real_threads_bitwise, .timeout = 60)
{
    const struct shape shapes[] = {{2100, 24}, {131, 1283}};
    for (int si = 0; si < 2; si++) {
        struct bn_case t;
        case_init(&t, shapes[si], 600 + (uint64_t)si);
        struct bn_out ref, o;
        out_init(&ref, &t), out_init(&o, &t);
        run_single(&ref, &t, NORM_ACT_SILU, 1);
        enum { NTH = 3 };
        double *part = tu_dvec(bn_chunk_doubles(t.M, t.C));
        pthread_barrier_t bar;
        cr_assert_eq(pthread_barrier_init(&bar, NULL, NTH), 0);
        pthread_t th[NTH];
        struct worker w[NTH];
        for (int i = 0; i < NTH; i++) {
            w[i] = (struct worker){&o, &t, part, &bar, i, NTH};
            cr_assert_eq(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
        }
        for (int i = 0; i < NTH; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&bar);
        out_assert_bitwise(&o, &ref, &t, "3 threads");
        free(part);
        out_free(&ref), out_free(&o);
        case_free(&t);
    }
}

/* The executor's BatchNorm dispatch (chunks, the pool's barrier, finish; scratch sized by exec_prepare)
 * on a real model: EfficientNet-B0 at 32×32, batch 16, where the stem and expansion BatchNorms run on
 * every thread (4096 rows: 16 chunks) and the small late ones serially. im2col is forced so the
 * convolutions do not pick a per-thread-count algorithm; only nth differs between the runs. */
enum { E2E_STEPS = 2, E2E_BATCH = 16, E2E_RES = 32 };

struct e2e_run {
    double loss[E2E_STEPS];
    float *params, *buffers;
    size_t n_params, n_buffers;
};

static void e2e_train(const char *backend, int n_threads, struct e2e_run *r)
{
    struct model m;
    struct workload_opts o = {.classes = 10, .resolution = E2E_RES, .in_h = E2E_RES, .in_w = E2E_RES, .in_c = 3,
                              .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_effnet[0].build(&m, &o), TB_OK, "effnet-b0 build: %s", tb_error_get());
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(E2E_STEPS * E2E_BATCH, E2E_RES, E2E_RES, 3, 10, 7, 1, &ds), TB_OK, "%s",
                 tb_error_get());
    int32_t labels[E2E_STEPS * E2E_BATCH];
    for (int i = 0; i < ds.n; i++) labels[i] = ds.labels[i];

    struct backend b;
    cr_assert_eq(backend_create(&b, backend), TB_OK, "%s", tb_error_get());
    struct run_config cfg = {.batch = E2E_BATCH, .eval_batch = E2E_BATCH, .seed = 5, .n_threads = n_threads};
    optim_config_defaults(&cfg.optim, OPTIM_SGD);
    cfg.optim.total_steps = E2E_STEPS;
    snprintf(cfg.conv_algo, sizeof cfg.conv_algo, "im2col");
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s prepare: %s", backend, tb_error_get());
    r->n_params = m.n_params, r->n_buffers = m.n_buffers;
    r->params = tu_fvec(m.n_params);
    r->buffers = tu_fvec(m.n_buffers);
    float *opt = tu_fvec(m.n_params * (size_t)optim_state_per_param(cfg.optim.kind));
    workload_effnet[0].init(&m, r->params, r->buffers, cfg.seed);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, r->params), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_set_tensors(&b, TF_BUFFERS, r->buffers), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_set_tensors(&b, TF_OPT, opt), TB_OK, "%s", tb_error_get());
    const size_t per = (size_t)E2E_RES * E2E_RES * 3;
    for (int s = 1; s <= E2E_STEPS; s++) {
        struct batch bt = {E2E_BATCH, ds.images + (size_t)(s - 1) * E2E_BATCH * per, labels + (s - 1) * E2E_BATCH};
        struct step_stats ss;
        cr_assert_eq(backend_train_step(&b, &bt, s, &ss), TB_OK, "%s step %d: %s", backend, s, tb_error_get());
        cr_assert(isfinite(ss.loss_sum), "%s step %d: loss %g", backend, s, ss.loss_sum);
        r->loss[s - 1] = ss.loss_sum;
    }
    cr_assert_eq(backend_get_tensors(&b, TF_PARAMS, r->params), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_get_tensors(&b, TF_BUFFERS, r->buffers), TB_OK, "%s", tb_error_get());
    free(opt);
    backend_destroy(&b);
    dataset_free(&ds);
    model_free(&m);
}

Test(bn_rows, effnet_threads_bitwise_cpu, .timeout = 300)
{
    struct e2e_run ref;
    e2e_train("cpu", 0, &ref);
    for (int nt = 2; nt <= 3; nt++) {
        struct e2e_run r;
        e2e_train("threads", nt, &r);
        char what[64];
        for (int s = 0; s < E2E_STEPS; s++)
            cr_assert(memcmp(&r.loss[s], &ref.loss[s], sizeof r.loss[s]) == 0, "threads(%d) step %d loss %.17g != %.17g",
                      nt, s + 1, r.loss[s], ref.loss[s]);
        snprintf(what, sizeof what, "threads(%d) vs cpu params", nt);
        tu_assert_bitwise(r.params, ref.params, ref.n_params, what);
        snprintf(what, sizeof what, "threads(%d) vs cpu running stats", nt);
        tu_assert_bitwise(r.buffers, ref.buffers, ref.n_buffers, what);
        free(r.params), free(r.buffers);
    }
    free(ref.params), free(ref.buffers);
}
