/* test_util.h — small helpers shared by the foundation's Criterion suites (dense, loss, optim,
 * backends, train, cli): allocation that asserts, seeded fills, tolerant and bitwise comparisons,
 * central differences in double, and temp-file helpers.
 *
 * Not a test framework: every helper fails the calling test through Criterion's assertions. All
 * functions are static inline so a suite that uses only some of them compiles without warnings.
 * Threading: none; each Criterion test runs in its own process.
 */
#ifndef TB_TEST_UTIL_H
#define TB_TEST_UTIL_H

/* asprintf, mkdtemp: include this header before any system header. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* 1 in the AddressSanitizer build: for a test that repeats its check over variants whose code paths other
 * tests already take under ASan (the main build still runs every variant). TU_SKIP_UNDER_ASAN skips the
 * calling test there (`make test-san`): for the long training runs (an epoch to
 * an accuracy, a recipe's 30-50 steps) whose code paths shorter tests already take under ASan and UBSan. The
 * main build's ctest runs them in full; under ASan they took about a sixth of its ctest (355 -> 300 s without them). */
#ifdef __SANITIZE_ADDRESS__
#define TU_UNDER_ASAN 1
#define TU_SKIP_UNDER_ASAN(what)                                                                                \
    cr_skip_test("%s: a long run, checked in the main build; its paths are the shorter tests' under ASan", what)
#else
#define TU_UNDER_ASAN 0
#define TU_SKIP_UNDER_ASAN(what) ((void)0)
#endif

/* Under ASan, every how-many-th cut point of the walks that check a model split at each of them (layer ranges
 * bitwise the whole model: 37 of test_executor's 66 s there): each cut runs the same kernels, and the main
 * build walks them all. */
#define TU_ASAN_STRIDE (TU_UNDER_ASAN ? 3 : 1)

/* Thread counts every partition test walks. */
static const int TU_NTHS[] = {1, 2, 3, 7};
#define TU_N_NTHS ((int)(sizeof TU_NTHS / sizeof TU_NTHS[0]))

/* Returns n zeroed floats (at least one), failing the test on allocation failure. */
static inline float *tu_fvec(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p, "out of memory (%zu floats)", n);
    return p;
}

/* Returns n zeroed doubles (at least one), failing the test on allocation failure. */
static inline double *tu_dvec(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p, "out of memory (%zu doubles)", n);
    return p;
}

/* Returns a malloc'd copy of n floats. */
static inline float *tu_fdup(const float *src, size_t n)
{
    float *p = tu_fvec(n);
    memcpy(p, src, n * sizeof *p);
    return p;
}

/* p (n) = mean + sd·N(0,1), a pure function of (seed, i). */
static inline void tu_fill_normal(float *p, size_t n, uint64_t seed, float mean, float sd)
{
    for (size_t i = 0; i < n; i++) p[i] = mean + sd * (float)rng_normal(seed, 4242, i);
}

/* p (n) uniform in [lo, hi), a pure function of (seed, i). */
static inline void tu_fill_uniform(float *p, size_t n, uint64_t seed, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * rng_uniform(seed, 4243, i);
}

/* Returns a double copy of n floats. */
static inline double *tu_to_d(const float *f, size_t n)
{
    double *d = tu_dvec(n);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

/* max|a − r| / max|r|: a normwise relative error, robust to elements near zero (NaN gives inf). */
static inline double tu_rel_err(const float *a, const float *r, size_t n)
{
    double e = 0.0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]);
        if (d > e || isnan(d)) e = isnan(d) ? INFINITY : d;
        if (fabs(r[i]) > m) m = fabs(r[i]);
    }
    return e / m;
}

/* ‖a − b‖₂ / ‖b‖₂: the relative 2-norm distance of a from b (n floats). */
static inline double tu_rel_dist(const float *a, const float *b, size_t n)
{
    double d = 0.0, q = 0.0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), q += (double)b[i] * b[i];
    return sqrt(d / q);
}

/* Asserts |got − want| ≤ atol·max|want| + rtol·|want| elementwise (NaN fails). */
static inline void tu_assert_close(const float *got, const double *want, size_t n, double rtol, double atol,
                                   const char *what)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= atol * mx + rtol * fabs(want[i])))
            cr_assert_fail("%s[%zu]: got %.9g want %.9g (err %.3g, max |want| %.3g)", what, i, (double)got[i],
                           want[i], err, mx);
    }
}

/* Same as tu_assert_close with a float reference. */
static inline void tu_assert_close_f(const float *got, const float *want, size_t n, double rtol, double atol,
                                     const char *what)
{
    double *w = tu_to_d(want, n);
    tu_assert_close(got, w, n, rtol, atol, what);
    free(w);
}

/* Asserts two float arrays have identical bit patterns. */
static inline void tu_assert_bitwise(const float *got, const float *want, size_t n, const char *what)
{
    /* One compare of the whole array; element by element (to name the first difference) only when it fails:
     * under ASan each 4-byte memcmp goes through its interceptor. */
    if (n == 0 || memcmp(got, want, n * sizeof *got) == 0) return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            cr_assert_fail("%s[%zu]: %.9g != %.9g (not bitwise equal)", what, i, (double)got[i], (double)want[i]);
}

/* Asserts two double arrays have identical bit patterns. */
static inline void tu_assert_bitwise_d(const double *got, const double *want, size_t n, const char *what)
{
    if (n == 0 || memcmp(got, want, n * sizeof *got) == 0) return; /* as tu_assert_bitwise */
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            cr_assert_fail("%s[%zu]: %.17g != %.17g (not bitwise equal)", what, i, got[i], want[i]);
}

/* g (n) = ∂loss/∂p by central differences in double, perturbing p in place (restored after). */
static inline void tu_fd_grad(double *g, double *p, size_t n, double (*loss)(void *), void *ctx, double rel_h)
{
    for (size_t i = 0; i < n; i++) {
        double v = p[i], h = rel_h * fmax(1.0, fabs(v));
        p[i] = v + h;
        double lp = loss(ctx);
        p[i] = v - h;
        double lm = loss(ctx);
        p[i] = v;
        g[i] = (lp - lm) / (2.0 * h);
    }
}

/* Makes a fresh directory under /tmp named after tag; returns it malloc'd. */
static inline char *tu_mkdtemp(const char *tag)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "/tmp/tb_%s_XXXXXX", tag) > 0);
    cr_assert_not_null(mkdtemp(p), "mkdtemp(%s) failed", p);
    return p;
}

/* Reads a whole file into a malloc'd NUL-terminated string (NULL if it cannot be opened). */
static inline char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* Writes n bytes to path (creating or truncating it). */
static inline void tu_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n, "short write to %s", path);
    cr_assert_eq(fclose(f), 0);
}

/* Writes the IDX pair dir/<prefix>-images-idx3-ubyte (n 28x28 images, pixels px[i] or zeros where px is NULL) and
 * dir/<prefix>-labels-idx1-ubyte (labels[i], or i % 10 where labels is NULL), uncompressed. */
static inline void tu_write_idx(const char *dir, const char *prefix, int n, const uint8_t *px, const uint8_t *labels)
{
    const size_t npx = 28u * 28u * (size_t)n;
    uint8_t *img = calloc(16 + npx, 1), *lab = malloc(8 + (size_t)n);
    cr_assert(img && lab);
    const uint32_t hi[4] = {0x803u, (uint32_t)n, 28u, 28u}, hl[2] = {0x801u, (uint32_t)n}; /* big-endian */
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 4; b++) img[4 * k + b] = (uint8_t)(hi[k] >> (24 - 8 * b));
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 4; b++) lab[4 * k + b] = (uint8_t)(hl[k] >> (24 - 8 * b));
    if (px) memcpy(img + 16, px, npx);
    for (int i = 0; i < n; i++) lab[8 + i] = labels ? labels[i] : (uint8_t)(i % 10);
    char p[600];
    cr_assert_lt(snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, prefix), (int)sizeof p);
    tu_write_file(p, img, 16 + npx);
    cr_assert_lt(snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, prefix), (int)sizeof p);
    tu_write_file(p, lab, 8 + (size_t)n);
    free(img), free(lab);
}

/* Removes a directory tree made by a test (best effort; paths are our own temp dirs). */
static inline void tu_rm_rf(const char *dir)
{
    char *cmd = NULL;
    if (asprintf(&cmd, "rm -rf '%s'", dir) > 0) {
        if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
        free(cmd);
    }
}

#endif
