/* test_tpool.c — the persistent pool (every ith runs once, barriers order phases, reuse across many
 * tasks) and the shared-memory all-reduce (exact sums for any replica count, identical on every
 * replica, bitwise repeatable). Threaded tests carry a timeout so a deadlock fails instead of hanging. */
#define _GNU_SOURCE
#include "allreduce.h"
#include "layout.h"
#include "tpool.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct count_task {
    struct tpool *p;
    _Atomic int hits[16];
    int phase[16];
    _Atomic int bad;
};

static void count_run(void *arg, int ith, int nth)
{
    struct count_task *t = arg;
    atomic_fetch_add(&t->hits[ith], 1);
    for (int ph = 0; ph < 50; ph++) {
        t->phase[ith] = ph;
        tpool_barrier(t->p);
        /* After the barrier every thread must have reached this phase. */
        for (int k = 0; k < nth; k++)
            if (t->phase[k] < ph) atomic_store(&t->bad, 1);
        tpool_barrier(t->p);
    }
}

Test(tpool, every_thread_runs_each_task_once_and_barriers_order_phases, .timeout = 60)
{
    for (int n = 1; n <= 5; n++) {
        struct tpool *p = tpool_create(n, 0);
        cr_assert_not_null(p);
        cr_assert_eq(tpool_size(p), n);
        struct count_task t;
        memset(&t, 0, sizeof t);
        t.p = p;
        for (int rep = 0; rep < 200; rep++) tpool_run(p, count_run, &t);
        for (int k = 0; k < n; k++) cr_assert_eq(atomic_load(&t.hits[k]), 200, "thread %d of %d", k, n);
        cr_assert_eq(atomic_load(&t.bad), 0, "a barrier let a thread through early (n=%d)", n);
        tpool_destroy(p);
    }
}

struct ar_task {
    struct tpool *p;
    float **bufs;
    size_t n;
    int fill_inside; /* each replica writes its own buffer inside the task, as a backward pass does */
};

static float ar_value(size_t i, int r) { return (float)((i * 7 + (size_t)r * 13) % 101) - 50.0f; }

static void pool_barrier(void *ctx) { tpool_barrier(ctx); }

static void ar_run(void *arg, int ith, int nth)
{
    struct ar_task *t = arg;
    if (t->fill_inside)
        for (size_t i = 0; i < t->n; i++) t->bufs[ith][i] = ar_value(i, ith);
    allreduce_ring(t->bufs, t->n, nth, ith, pool_barrier, t->p);
}

Test(allreduce, ring_sums_exactly_and_identically_for_any_replica_count, .timeout = 60)
{
    const size_t sizes[] = {1, 7, 1000, 4099};
    for (int R = 1; R <= 5; R++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            const size_t n = sizes[si];
            struct tpool *p = tpool_create(R, 0);
            float **bufs = calloc((size_t)R, sizeof *bufs);
            double *expect = calloc(n, sizeof *expect);
            for (int r = 0; r < R; r++) {
                bufs[r] = malloc(n * sizeof(float));
                /* Small integers: every summation order gives the exact same float. */
                for (size_t i = 0; i < n; i++) bufs[r][i] = ar_value(i, r);
                for (size_t i = 0; i < n; i++) expect[i] += bufs[r][i];
            }
            for (int inside = 0; inside < 2; inside++) {
                if (inside)
                    for (int r = 0; r < R; r++) memset(bufs[r], 0xff, n * sizeof(float)); /* NaN until written */
                else
                    for (int r = 0; r < R; r++)
                        for (size_t i = 0; i < n; i++) bufs[r][i] = ar_value(i, r);
                struct ar_task t = {p, bufs, n, inside};
                tpool_run(p, ar_run, &t);
                for (int r = 0; r < R; r++)
                    for (size_t i = 0; i < n; i++)
                        cr_assert_eq(bufs[r][i], (float)expect[i], "R=%d n=%zu replica %d element %zu (fill %s)", R,
                                     n, r, i, inside ? "inside" : "before");
            }
            for (int r = 0; r < R; r++) free(bufs[r]);
            free(bufs);
            free(expect);
            tpool_destroy(p);
        }
}

Test(allreduce, ring_is_bitwise_repeatable_on_inexact_sums, .timeout = 60)
{
    const int R = 3;
    const size_t n = 5000;
    float *runs[2];
    for (int k = 0; k < 2; k++) {
        struct tpool *p = tpool_create(R, 0);
        float *bufs[3];
        for (int r = 0; r < R; r++) {
            bufs[r] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) bufs[r][i] = 1.0f / (float)(i + 1 + (size_t)r * 3) * (r % 2 ? -1.7f : 1.3f);
        }
        struct ar_task t = {p, bufs, n, 0};
        tpool_run(p, ar_run, &t);
        for (int r = 1; r < R; r++) cr_assert_eq(memcmp(bufs[0], bufs[r], n * sizeof(float)), 0, "replicas differ");
        runs[k] = bufs[0];
        for (int r = 1; r < R; r++) free(bufs[r]);
        tpool_destroy(p);
    }
    cr_assert_eq(memcmp(runs[0], runs[1], n * sizeof(float)), 0, "two runs differ");
    free(runs[0]);
    free(runs[1]);
}

/* A ring over windows of a buffer (an ipu stage's gradient slice) chunks by place in the whole
 * (allreduce_ring_window): cut anywhere, the windows end with the bits of one ring over the whole, on
 * sums whose order shows (inexact values, 4 replicas). Chunked by the window alone they did not. */
struct arw_task {
    struct tpool *p;
    float **bufs; /* (R) whole buffers of N */
    size_t N;
    const size_t *cuts; /* window edges, cuts[0] = 0 … cuts[nw] = N */
    int nw;
};

static void arw_run(void *arg, int ith, int nth)
{
    struct arw_task *t = arg;
    float *win[8];
    for (int w = 0; w < t->nw; w++) {
        for (int r = 0; r < nth; r++) win[r] = t->bufs[r] + t->cuts[w];
        allreduce_ring_window(win, t->cuts[w + 1] - t->cuts[w], t->cuts[w], t->N, nth, ith, pool_barrier, t->p);
    }
}

Test(allreduce, windows_sum_as_the_whole, .timeout = 60)
{
    enum { R = 4 };
    const size_t N = 4099;
    const size_t whole[] = {0, N}, split_a[] = {0, 1, 1500, 1501, N}, split_b[] = {0, 2049, 3000, N};
    const size_t *cuts[3] = {whole, split_a, split_b};
    const int nw[3] = {1, 4, 3};
    float *ref = NULL;
    for (int c = 0; c < 3; c++) {
        struct tpool *p = tpool_create(R, 0);
        float *bufs[R];
        for (int r = 0; r < R; r++) {
            bufs[r] = malloc(N * sizeof(float));
            for (size_t i = 0; i < N; i++) bufs[r][i] = 1.0f / (float)(i + 1 + (size_t)r * 3) * (r % 2 ? -1.7f : 1.3f);
        }
        struct arw_task t = {p, bufs, N, cuts[c], nw[c]};
        tpool_run(p, arw_run, &t);
        for (int r = 1; r < R; r++) cr_assert_eq(memcmp(bufs[0], bufs[r], N * sizeof(float)), 0, "replicas differ");
        if (!ref) ref = bufs[0];
        else cr_assert_eq(memcmp(bufs[0], ref, N * sizeof(float)), 0, "windows %d differ from the whole", c);
        for (int r = ref == bufs[0] ? 1 : 0; r < R; r++) free(bufs[r]);
        tpool_destroy(p);
    }
    free(ref);
}

/* A pinned pool pins its creator to the first core while it lives and puts the creator's mask back when
 * destroyed: left pinned, the thread ran the rest of its process on core 0 (every test process of a
 * ctest -j run there together). */
Test(tpool, destroy_puts_back_the_creators_mask)
{
    cpu_set_t before, during, after;
    cr_assert_eq(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
    struct tpool *p = tpool_create(2, 1);
    cr_assert_not_null(p);
    cr_assert_eq(pthread_getaffinity_np(pthread_self(), sizeof during, &during), 0);
    cr_assert_eq(CPU_COUNT(&during), 1, "the creator runs on one core while its pool lives");
    tpool_destroy(p);
    cr_assert_eq(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
    cr_assert(CPU_EQUAL(&before, &after), "the creator's mask: %d cores before, %d after", CPU_COUNT(&before),
              CPU_COUNT(&after));
}

/* The ring's summation order, written out: element i of chunk k (tb_slice of the whole N) is g_k, then
 * + g_{k+1}, …, + g_{k−1} — the order its R−1 steps add in — each partial sum rounded to the buffers'
 * precision. Any implementation of the all-reduce must keep these bits: runs' losses depend on them. */
static float order_value(size_t i, int r)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + 17u);
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    const float m = (float)(h & 0xffffu) / 65536.0f - 0.5f;
    return ldexpf(m, (int)((h >> 16) % 21) - 10); /* inexact sums: magnitudes 2^-11 … 2^10 */
}

static float ring_order_sum(size_t i, size_t N, int R, enum stage_prec prec)
{
    int k = 0;
    for (size_t lo, hi;; k++) {
        tb_slice(N, k, R, &lo, &hi);
        if (i < hi) break;
    }
    float acc = order_value(i, k);
    if (prec != STAGE_PREC_FP32) stage_prec_round(&acc, 1, prec, 0, 0, 0, 0);
    for (int j = 1; j < R; j++) {
        float g = order_value(i, (k + j) % R);
        if (prec != STAGE_PREC_FP32) stage_prec_round(&g, 1, prec, 0, 0, 0, 0);
        acc = g + acc;
        if (prec != STAGE_PREC_FP32) stage_prec_round(&acc, 1, prec, 0, 0, 0, 0);
    }
    return acc;
}

struct order_task {
    struct tpool *p;
    void **bufs; /* (R) */
    size_t N;
    enum stage_prec prec;
    int scatter_only; /* fp32: reduce_scatter_ring alone */
};

static void order_run(void *arg, int ith, int nth)
{
    struct order_task *t = arg;
    if (t->prec != STAGE_PREC_FP32)
        allreduce_ring_half((uint16_t *const *)t->bufs, t->N, nth, ith, t->prec, pool_barrier, t->p);
    else if (t->scatter_only)
        reduce_scatter_ring((float *const *)t->bufs, t->N, nth, ith, pool_barrier, t->p);
    else
        allreduce_ring((float *const *)t->bufs, t->N, nth, ith, pool_barrier, t->p);
}

Test(allreduce, sums_in_the_rings_order_bitwise, .timeout = 120)
{
    const size_t sizes[] = {1, 7, 1000, 4099, 70001};
    const enum stage_prec precs[] = {STAGE_PREC_FP32, STAGE_PREC_BF16, STAGE_PREC_FP16};
    for (int R = 1; R <= 7; R++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (int pi = 0; pi < 3; pi++)
                for (int scatter = 0; scatter < (pi == 0 ? 2 : 1); scatter++) {
                    const size_t N = sizes[si];
                    const enum stage_prec prec = precs[pi];
                    const size_t esz = stage_prec_bytes(prec);
                    struct tpool *p = tpool_create(R, 0);
                    void *bufs[7];
                    float *tmp = malloc(N * sizeof(float));
                    for (int r = 0; r < R; r++) {
                        bufs[r] = malloc(N * esz);
                        for (size_t i = 0; i < N; i++) tmp[i] = order_value(i, r);
                        stage_prec_pack(bufs[r], tmp, N, prec, 1.0f);
                    }
                    struct order_task t = {p, bufs, N, prec, scatter};
                    tpool_run(p, order_run, &t);
                    for (int r = 0; r < R; r++) {
                        size_t lo = 0, hi = N; /* after a reduce-scatter, the chunk replica r owns */
                        if (scatter) tb_slice(N, allreduce_ring_owned(R, r), R, &lo, &hi);
                        stage_prec_unpack(tmp, bufs[r], N, prec, 1.0f);
                        for (size_t i = lo; i < hi; i++) {
                            const float want = ring_order_sum(i, N, R, prec);
                            cr_assert_eq(memcmp(&tmp[i], &want, sizeof want), 0,
                                         "R=%d N=%zu %s%s replica %d element %zu: %a, the ring's order gives %a", R,
                                         N, stage_prec_name(prec), scatter ? " (reduce-scatter)" : "", r, i,
                                         (double)tmp[i], (double)want);
                        }
                    }
                    for (int r = 0; r < R; r++) free(bufs[r]);
                    free(tmp);
                    tpool_destroy(p);
                }
}
