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
#include "rng.h"
#include "status.h"

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
     * class's up front when there are fewer classes than samples; else (--classes 100000, a one-sample
     * --describe) a class's when a sample needs it, so the tables never outgrow the samples. */
    const int all = n_classes <= n;
    const size_t per_class = (size_t)c * SYN_COMPONENTS;
    size_t n_waves = (all ? (size_t)n_classes : 1) * per_class;
    float *sx = malloc(sizeof(float) * n_waves * (size_t)w), *cx = malloc(sizeof(float) * n_waves * (size_t)w);
    float *sy = malloc(sizeof(float) * n_waves * (size_t)h), *cy = malloc(sizeof(float) * n_waves * (size_t)h);
    uint8_t *images = malloc((size_t)(per * (uint64_t)n));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n);
    float *mean = malloc(sizeof(float) * (size_t)per);
    int st = TB_OK;
    if (!sx || !cx || !sy || !cy || !images || !labels || !mean) {
        st = tb_error_set(TB_ENOMEM, "dataset_synthetic: cannot allocate %d images of %dx%dx%d", n, h, w, c);
        goto fail;
    }
    uint64_t pseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, SYN_KEY_PATTERN);
    for (int k = 0; all && k < n_classes; k++) {
        const size_t o = (size_t)k * per_class;
        class_waves(pseed, k, h, w, c, sx + o * w, cx + o * w, sy + o * h, cy + o * h);
    }
    int made = -1; /* the class whose tables the lazy buffers hold */
    uint64_t lseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, train ? SYN_KEY_LABEL_TRAIN : SYN_KEY_LABEL_TEST);
    uint64_t nseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, train ? SYN_KEY_NOISE_TRAIN : SYN_KEY_NOISE_TEST);
    for (int i = 0; i < n; i++) {
        int k = (int)rng_below(lseed, RNG_STREAM_SYNTHETIC, (uint64_t)i, (uint64_t)n_classes);
        labels[i] = k;
        if (!all && k != made) class_waves(pseed, k, h, w, c, sx, cx, sy, cy), made = k;
        const int kt = all ? k : 0; /* k's place in the tables */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < c; ch++) {
                    float m = 128.0f;
                    for (int j = 0; j < SYN_COMPONENTS; j++) {
                        size_t v = ((size_t)kt * (size_t)c + (size_t)ch) * SYN_COMPONENTS + (size_t)j;
                        m += SYN_AMPLITUDE * (sx[v * w + x] * cy[v * h + y] + cx[v * w + x] * sy[v * h + y]);
                    }
                    mean[((size_t)y * w + x) * c + ch] = m;
                }
        uint8_t *img = images + (size_t)i * (size_t)per; // (h,w,c)
        for (uint64_t p = 0; p < per; p++) {
            double z = rng_normal(nseed, RNG_STREAM_SYNTHETIC, (uint64_t)i * per + p);
            float v = floorf(mean[p] + SYN_NOISE * (float)z + 0.5f);
            img[p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    free(sx);
    free(cx);
    free(sy);
    free(cy);
    free(mean);
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
    free(sx);
    free(cx);
    free(sy);
    free(cy);
    free(mean);
    free(images);
    free(labels);
    return st;
}
