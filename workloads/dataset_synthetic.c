/* dataset_synthetic.c — a deterministic, learnable stand-in for an image dataset.
 *
 * Each class k has a smooth mean image: per channel, 128 plus two plane waves with random integer
 * frequencies (1..3 cycles per image in x and y) and random phases. A sample is its class's mean
 * plus Gaussian noise, rounded to uint8. Everything comes from util/rng.h keyed by counters, so
 * sample i is the same whatever n is and on every machine; the class patterns depend on the seed
 * only (not on train), so a model trained on the train split is tested on the same classes.
 * Not a model of any real data set. Reentrant; the dataset it builds is owned by the caller.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "env_switch.h"
#include "mvec.h"
#include "rng.h"
#include "status.h"
#include "tpool.h"

#define SYN_COMPONENTS 2
#define SYN_AMPLITUDE 40.0f /* per wave: means span 128 +- 80 */
#define SYN_NOISE 48.0f     /* noise sigma, in pixel units */
#define SYN_TWO_PI 6.283185307179586

/* Counter domains inside RNG_STREAM_SYNTHETIC, so the uses never share a counter. */
enum { SYN_KEY_PATTERN = 1, SYN_KEY_LABEL_TRAIN, SYN_KEY_LABEL_TEST, SYN_KEY_NOISE_TRAIN, SYN_KEY_NOISE_TEST };

/* Class k's wave tables (c · SYN_COMPONENTS waves, each w values of x and h of y) into sx, cx (waves × w) and
 * sy, cy (waves × h), from the pattern seed: the same values whichever buffer or order they are made in. */
static void class_waves(uint64_t pseed, int k, int h, int w, int c, float *sx, float *cx, float *sy, float *cy)
{
    const size_t nw = (size_t)c * SYN_COMPONENTS;
    for (size_t u = 0; u < nw; u++) {
        const size_t v = (size_t)k * nw + u; /* the wave's global index: its random draws */
        double fx = 1.0 + (double)rng_below(pseed, RNG_STREAM_SYNTHETIC, 3 * v + 0, 3);
        double fy = 1.0 + (double)rng_below(pseed, RNG_STREAM_SYNTHETIC, 3 * v + 1, 3);
        double phase = SYN_TWO_PI * rng_uniform(pseed, RNG_STREAM_SYNTHETIC, 3 * v + 2);
        for (int x = 0; x < w; x++) {
            double a = SYN_TWO_PI * fx * ((double)x + 0.5) / w + phase;
            sx[u * (size_t)w + x] = (float)sin(a);
            cx[u * (size_t)w + x] = (float)cos(a);
        }
        for (int y = 0; y < h; y++) {
            double b = SYN_TWO_PI * fy * ((double)y + 0.5) / h;
            sy[u * (size_t)h + y] = (float)sin(b);
            cy[u * (size_t)h + y] = (float)cos(b);
        }
    }
}

/* What every thread of one generation reads; images and labels are written by sample, each sample by one
 * thread, so the bytes do not depend on how the samples are shared out. */
struct syn_job {
    int n, h, w, c, n_classes, all;
    uint64_t per, pseed, lseed, nkey;
    const float *sx, *cx, *sy, *cy; /* every class's wave tables (all) */
    const float *means;             /* every class's mean image, when they fit (else NULL) */
    int vector;                     /* libmvec's draws (not TB_SYN_FAST=0, and the CPU has AVX2 and FMA) */
    uint8_t *images;
    int32_t *labels;
    _Atomic int failed;
};

/* Class k's mean image from wave tables at class slot kt: 128 plus the waves, summed in one fixed order. */
static void class_mean(const struct syn_job *j, const float *sx, const float *cx, const float *sy, const float *cy,
                       int kt, float *mean)
{
    const int h = j->h, w = j->w, c = j->c;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                float m = 128.0f;
                for (int q = 0; q < SYN_COMPONENTS; q++) {
                    size_t v = ((size_t)kt * (size_t)c + (size_t)ch) * SYN_COMPONENTS + (size_t)q;
                    m += SYN_AMPLITUDE * (sx[v * w + x] * cy[v * h + y] + cx[v * w + x] * sy[v * h + y]);
                }
                mean[((size_t)y * w + x) * c + ch] = m;
            }
}

/* Pixel p of an image: its mean plus noise sigma times the normal draw, rounded, clamped to a byte. Never
 * inlined: the fast path's fallback must round as the plain path does, with this file's flags, not with the
 * AVX2 function's (where the compiler may fuse the multiply-add that the plain path keeps apart). */
__attribute__((noinline)) static uint8_t noise_pixel(uint64_t nkey, uint64_t counter, float mean)
{
    double z = rng_normal_keyed(nkey, counter);
    float v = floorf(mean + SYN_NOISE * (float)z + 0.5f);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#ifdef TB_HAVE_MVEC

/* The same bytes as noise_pixel, four pixels at a time: the normal draws from libmvec's log and cosine (an
 * approximation within ~1e-14 of glibc's scalar ones), and wherever mean + sigma·z + 1/2 lies within
 * SYN_EXACT_MARGIN of an integer — where the float rounding of the exact path could fall either side —
 * the pixel is made by noise_pixel itself. Elsewhere both round to the same integer: the exact path's float
 * steps are within ~1.3e-4 of the real value (sigma · 2^-24 · |z| ≤ 8.6, and three roundings at < 1024). */
#define SYN_EXACT_MARGIN 1e-3
__attribute__((target("avx2,fma"))) static void noise_row_avx2(uint64_t nkey, uint64_t base, const float *mean,
                                                               uint8_t *img, size_t n)
{
    size_t p = 0;
    for (; p + 4 <= n; p += 4) {
        const __m256d z = tb_normal4_approx(nkey, base + p);
        const __m256d r = _mm256_add_pd(_mm256_fmadd_pd(_mm256_set1_pd(SYN_NOISE), z, _mm256_cvtps_pd(_mm_loadu_ps(mean + p))),
                                        _mm256_set1_pd(0.5));
        const __m256d f = _mm256_floor_pd(r), fr = _mm256_sub_pd(r, f);
        const int near = _mm256_movemask_pd(_mm256_or_pd(_mm256_cmp_pd(fr, _mm256_set1_pd(SYN_EXACT_MARGIN), _CMP_LT_OQ),
                                                         _mm256_cmp_pd(fr, _mm256_set1_pd(1.0 - SYN_EXACT_MARGIN), _CMP_GT_OQ)));
        const __m128i v = _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(f, _mm256_setzero_pd()), _mm256_set1_pd(255.0)));
        const int32_t bytes = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packus_epi32(v, v), _mm_setzero_si128()));
        memcpy(img + p, &bytes, 4);
        for (int q = 0; near && q < 4; q++)
            if (near >> q & 1) img[p + q] = noise_pixel(nkey, base + p + q, mean[p + q]);
    }
    for (; p < n; p++) img[p] = noise_pixel(nkey, base + p, mean[p]);
}
#endif

/* An image's n pixels from their means, four at a time when vector; counter base + p draws pixel p's noise. */
static void noise_row(uint64_t nkey, uint64_t base, const float *mean, uint8_t *img, size_t n, int vector)
{
#ifdef TB_HAVE_MVEC
    if (vector) {
        noise_row_avx2(nkey, base, mean, img, n);
        return;
    }
#endif
    (void)vector;
    for (size_t p = 0; p < n; p++) img[p] = noise_pixel(nkey, base + p, mean[p]);
}

/* Thread ith of nth: class means ith, ith+nth, … (phase 0), or a contiguous run of samples (phase 1). */
static void syn_means(void *arg, int ith, int nth)
{
    struct syn_job *j = arg;
    for (int k = ith; k < j->n_classes; k += nth)
        class_mean(j, j->sx, j->cx, j->sy, j->cy, k, (float *)j->means + (size_t)k * j->per);
}

static void syn_samples(void *arg, int ith, int nth)
{
    struct syn_job *j = arg;
    const int i0 = (int)((int64_t)j->n * ith / nth), i1 = (int)((int64_t)j->n * (ith + 1) / nth);
    if (i0 == i1) return;
    const size_t per_class = (size_t)j->c * SYN_COMPONENTS, per = (size_t)j->per;
    /* Own scratch: a mean image unless they are cached, a class's tables when they are made per sample. */
    float *mean = j->means ? NULL : malloc(sizeof(float) * per);
    float *tab = j->all ? NULL : malloc(sizeof(float) * per_class * (size_t)(2 * j->w + 2 * j->h));
    if ((!j->means && !mean) || (!j->all && !tab)) {
        j->failed = 1;
        free(mean), free(tab);
        return;
    }
    float *sx = tab, *cx = tab ? sx + per_class * j->w : NULL, *sy = tab ? cx + per_class * j->w : NULL,
          *cy = tab ? sy + per_class * j->h : NULL;
    int made = -1; /* the class whose tables or mean the scratch holds */
    for (int i = i0; i < i1; i++) {
        const int k = (int)rng_below(j->lseed, RNG_STREAM_SYNTHETIC, (uint64_t)i, (uint64_t)j->n_classes);
        j->labels[i] = k;
        const float *mk;
        if (j->means) mk = j->means + (size_t)k * per;
        else {
            if (k != made) {
                if (j->all) class_mean(j, j->sx, j->cx, j->sy, j->cy, k, mean);
                else {
                    class_waves(j->pseed, k, j->h, j->w, j->c, sx, cx, sy, cy);
                    class_mean(j, sx, cx, sy, cy, 0, mean);
                }
                made = k;
            }
            mk = mean;
        }
        noise_row(j->nkey, (uint64_t)i * j->per, mk, j->images + (size_t)i * per, per, j->vector); // (h,w,c)
    }
    free(mean), free(tab);
}

/* Below this many pixels one thread makes the set (a pool's start costs more than it saves). */
#define SYN_THREADED_PIXELS (1u << 20)
/* Every class's mean image is kept when they fit in this many bytes (224×224×3 at 100 classes: 60 MB). */
#define SYN_MEANS_BYTES (64u << 20)

int dataset_synthetic(int n, int h, int w, int c, int n_classes, uint64_t seed, int train, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0 || h <= 0 || w <= 0 || c <= 0)
        return tb_error_set(TB_EINVAL, "dataset_synthetic: bad shape n=%d h=%d w=%d c=%d", n, h, w, c);
    if (n_classes < 1 || n_classes > DATASET_MAX_CLASSES)
        return tb_error_set(TB_EINVAL, "dataset_synthetic: n_classes %d outside [1,%d]", n_classes, DATASET_MAX_CLASSES);
    uint64_t per = (uint64_t)h * (uint64_t)w * (uint64_t)c;
    if ((uint64_t)h * (uint64_t)w > INT_MAX || per > INT_MAX || per * (uint64_t)n > (uint64_t)SIZE_MAX / 2)
        return tb_error_set(TB_ENOMEM, "dataset_synthetic: %d images of %dx%dx%d is too large", n, h, w, c);

    /* Separable tables: sin(a(x) + b(y)) = sin a cos b + cos a sin b, per (class, channel, wave). Every
     * class's up front when there are fewer classes than samples (and then their mean images too, when they
     * fit); else (--classes 100000, a one-sample --describe) a class's when a sample needs it, so the tables
     * never outgrow the samples. */
    /* TB_SYN_FAST=0: the first generator's path (one thread, a mean image a sample, scalar draws), the same
     * bytes slower: what the tests hold the fast path to, and an A/B. */
    const int plain = tb_env_off("TB_SYN_FAST");
    struct syn_job j = {.n = n, .h = h, .w = w, .c = c, .n_classes = n_classes, .all = n_classes <= n, .per = per};
#ifdef TB_HAVE_MVEC
    j.vector = !plain && tb_mvec_usable();
#endif
    const size_t per_class = (size_t)c * SYN_COMPONENTS;
    const size_t n_waves = (j.all ? (size_t)n_classes : 0) * per_class;
    float *tab = j.all ? malloc(sizeof(float) * n_waves * (size_t)(2 * w + 2 * h)) : NULL;
    float *means = !plain && j.all && (uint64_t)n_classes * per * sizeof(float) <= SYN_MEANS_BYTES
                       ? malloc(sizeof(float) * (size_t)n_classes * (size_t)per) : NULL;
    uint8_t *images = malloc((size_t)(per * (uint64_t)n));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n);
    const int threads = !plain && per * (uint64_t)n >= SYN_THREADED_PIXELS && tpool_cpus() > 1 ? tpool_cpus() : 1;
    struct tpool *pool = threads > 1 ? tpool_create(threads, 0) : NULL;
    int st = TB_OK;
    if ((j.all && !tab) || !images || !labels) {
        st = tb_error_set(TB_ENOMEM, "dataset_synthetic: cannot allocate %d images of %dx%dx%d", n, h, w, c);
        goto fail;
    }
    j.pseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, SYN_KEY_PATTERN);
    j.lseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, train ? SYN_KEY_LABEL_TRAIN : SYN_KEY_LABEL_TEST);
    j.nkey = rng_key(rng_hash(seed, RNG_STREAM_SYNTHETIC, train ? SYN_KEY_NOISE_TRAIN : SYN_KEY_NOISE_TEST),
                     RNG_STREAM_SYNTHETIC);
    j.images = images, j.labels = labels;
    if (j.all) {
        float *sx = tab, *cx = sx + n_waves * w, *sy = cx + n_waves * w, *cy = sy + n_waves * h;
        for (int k = 0; k < n_classes; k++) {
            const size_t o = (size_t)k * per_class;
            class_waves(j.pseed, k, h, w, c, sx + o * w, cx + o * w, sy + o * h, cy + o * h);
        }
        j.sx = sx, j.cx = cx, j.sy = sy, j.cy = cy;
        j.means = means;
        if (means) {
            if (pool) tpool_run(pool, syn_means, &j);
            else syn_means(&j, 0, 1);
        }
    }
    if (pool) tpool_run(pool, syn_samples, &j);
    else syn_samples(&j, 0, 1);
    if (j.failed) {
        st = tb_error_set(TB_ENOMEM, "dataset_synthetic: out of memory making %d images of %dx%dx%d", n, h, w, c);
        goto fail;
    }
    tpool_destroy(pool);
    free(tab), free(means);
    out->n = n;
    out->h = h;
    out->w = w;
    out->c = c;
    out->n_classes = n_classes;
    out->images = images;
    out->labels = labels;
    snprintf(out->name, sizeof out->name, "synthetic");
    snprintf(out->source, sizeof out->source, "synthetic");
    return TB_OK;
fail:
    tpool_destroy(pool);
    free(tab), free(means);
    free(images);
    free(labels);
    return st;
}
