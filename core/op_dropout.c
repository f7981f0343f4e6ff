/* op_dropout.c — dropout / drop-connect kernels: masks recomputed from util/rng.h counters.
 *
 * The per-sample key rng_hash(step, layer, g) is computed once per sample, the stream's key once per
 * sample run; each element then costs one inline mix (rng_uniform_keyed, the same bits as rng_uniform).
 */
#include "op_dropout.h"

#include "layout.h"
#include "rng.h"

/* The counter base shared by all elements of global sample g. */
static uint64_t drop_sample_key(const struct dropout_args *a, uint64_t g)
{
    return rng_hash(a->step, a->layer, g);
}

int dropout_keep(const struct dropout_args *a, uint64_t g, uint64_t e)
{
    return rng_uniform(a->seed, RNG_STREAM_DROPOUT, drop_sample_key(a, g) + e) >= a->p;
}

int dropconnect_keep(const struct dropout_args *a, uint64_t g)
{
    return rng_uniform(a->seed, RNG_STREAM_DROPCONNECT, drop_sample_key(a, g)) >= a->p;
}

/* 1/(1-p) for p < 1; 0 for p >= 1 (everything dropped, and no 0·inf). */
static float drop_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

/* y[i] (=|+=) x[i]·keep·scale over [lo,hi) of (N,D), sample by sample; accumulate selects +=. */
static void dropout_apply(float *y, const float *x, size_t D, uint64_t g0, const struct dropout_args *a, size_t lo,
                          size_t hi, int accumulate)
{
    float scale = drop_scale(a->p);
    for (size_t i = lo; i < hi;) {
        size_t n = i / D, e0 = i % D, end = (n + 1) * D < hi ? (n + 1) * D : hi;
        if (a->p <= 0.0f) {
            /* The identity (every u >= 0 is kept, scale 1): skip the hashes. */
            for (; i < end; i++) y[i] = accumulate ? y[i] + x[i] : x[i];
            continue;
        }
        const uint64_t key = drop_sample_key(a, g0 + n), k = rng_key(a->seed, RNG_STREAM_DROPOUT);
        for (size_t e = e0; i < end; i++, e++) {
            float v = rng_uniform_keyed(k, key + e) >= a->p ? x[i] * scale : 0.0f;
            y[i] = accumulate ? y[i] + v : v;
        }
    }
}

void dropout_forward(float *out, const float *inp, int N, size_t D, uint64_t g0, const struct dropout_args *a,
                     int ith, int nth)
{
    size_t lo, hi;
    tb_slice16((size_t)N * D, ith, nth, &lo, &hi);
    dropout_apply(out, inp, D, g0, a, lo, hi, 0);
}

void dropout_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0, const struct dropout_args *a,
                      int ith, int nth)
{
    size_t lo, hi;
    tb_slice16((size_t)N * D, ith, nth, &lo, &hi);
    dropout_apply(dinp, dout, D, g0, a, lo, hi, 1);
}

/* y[i] = base[i] + x[i]·s_n (base may be NULL: 0; accumulate: base = y) over [lo,hi) of (N,D). */
static void dropconnect_apply(float *y, const float *base, const float *x, size_t D, uint64_t g0,
                              const struct dropout_args *a, size_t lo, size_t hi)
{
    float scale = drop_scale(a->p);
    for (size_t i = lo; i < hi;) {
        size_t n = i / D, end = (n + 1) * D < hi ? (n + 1) * D : hi;
        float s = a->p <= 0.0f ? 1.0f : dropconnect_keep(a, g0 + n) ? scale : 0.0f;
        if (base)
            for (; i < end; i++) y[i] = base[i] + x[i] * s;
        else
            for (; i < end; i++) y[i] = x[i] * s;
    }
}

void dropconnect_forward(float *out, const float *inp, int N, size_t D, uint64_t g0, const struct dropout_args *a,
                         int ith, int nth)
{
    size_t lo, hi;
    tb_slice16((size_t)N * D, ith, nth, &lo, &hi);
    dropconnect_apply(out, NULL, inp, D, g0, a, lo, hi);
}

void dropconnect_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                          const struct dropout_args *a, int ith, int nth)
{
    size_t lo, hi;
    tb_slice16((size_t)N * D, ith, nth, &lo, &hi);
    dropconnect_apply(dinp, dinp, dout, D, g0, a, lo, hi);
}

void dropconnect_add_forward(float *out, const float *shortcut, const float *branch, int N, size_t D, uint64_t g0,
                             const struct dropout_args *a, int ith, int nth)
{
    size_t lo, hi;
    tb_slice16((size_t)N * D, ith, nth, &lo, &hi);
    dropconnect_apply(out, shortcut, branch, D, g0, a, lo, hi);
}

static double drop_scale_ref(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

void dropout_forward_ref(double *out, const double *inp, int N, size_t D, uint64_t g0, const struct dropout_args *a)
{
    for (int n = 0; n < N; n++)
        for (size_t e = 0; e < D; e++) {
            size_t i = (size_t)n * D + e;
            out[i] = dropout_keep(a, g0 + (uint64_t)n, e) ? inp[i] * drop_scale_ref(a->p) : 0.0;
        }
}

void dropout_backward_ref(double *dinp, const double *dout, int N, size_t D, uint64_t g0,
                          const struct dropout_args *a)
{
    for (int n = 0; n < N; n++)
        for (size_t e = 0; e < D; e++) {
            size_t i = (size_t)n * D + e;
            if (dropout_keep(a, g0 + (uint64_t)n, e)) dinp[i] += dout[i] * drop_scale_ref(a->p);
        }
}

void dropconnect_forward_ref(double *out, const double *inp, int N, size_t D, uint64_t g0,
                             const struct dropout_args *a)
{
    for (int n = 0; n < N; n++) {
        int keep = dropconnect_keep(a, g0 + (uint64_t)n);
        for (size_t e = 0; e < D; e++)
            out[(size_t)n * D + e] = keep ? inp[(size_t)n * D + e] * drop_scale_ref(a->p) : 0.0;
    }
}

void dropconnect_backward_ref(double *dinp, const double *dout, int N, size_t D, uint64_t g0,
                              const struct dropout_args *a)
{
    for (int n = 0; n < N; n++)
        if (dropconnect_keep(a, g0 + (uint64_t)n))
            for (size_t e = 0; e < D; e++) dinp[(size_t)n * D + e] += dout[(size_t)n * D + e] * drop_scale_ref(a->p);
}
