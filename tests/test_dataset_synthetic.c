/* test_dataset_synthetic.c — the synthetic set's bytes are a function of (seed, split, shape, classes)
 * only: the documented formula (against a one-pixel-at-a-time reference written here), the same bytes on
 * the fast path as on the first generator's (TB_SYN_FAST=0), and pinned by CRC-32s taken from the first
 * generator (so a faster one cannot change what every earlier row trained on).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dataset.h"
#include "rng.h"
#include "status.h"

/* The generator's documented formula, one pixel at a time and nothing cached (dataset_synthetic.c's
 * constants: 2 waves a channel, amplitude 40, noise sigma 48). */
static void reference(int n, int h, int w, int c, int classes, uint64_t seed, int train, uint8_t *img, int32_t *lab)
{
    const double two_pi = 6.283185307179586;
    const uint64_t pseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, 1);
    const uint64_t lseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, train ? 2 : 3);
    const uint64_t nseed = rng_hash(seed, RNG_STREAM_SYNTHETIC, train ? 4 : 5);
    const uint64_t per = (uint64_t)h * w * c;
    for (int i = 0; i < n; i++) {
        const int k = (int)rng_below(lseed, RNG_STREAM_SYNTHETIC, (uint64_t)i, (uint64_t)classes);
        lab[i] = k;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < c; ch++) {
                    float m = 128.0f;
                    for (int j = 0; j < 2; j++) {
                        const uint64_t v = ((uint64_t)k * c + ch) * 2 + j;
                        double fx = 1.0 + (double)rng_below(pseed, RNG_STREAM_SYNTHETIC, 3 * v + 0, 3);
                        double fy = 1.0 + (double)rng_below(pseed, RNG_STREAM_SYNTHETIC, 3 * v + 1, 3);
                        double ph = two_pi * rng_uniform(pseed, RNG_STREAM_SYNTHETIC, 3 * v + 2);
                        double a = two_pi * fx * ((double)x + 0.5) / w + ph, b = two_pi * fy * ((double)y + 0.5) / h;
                        m += 40.0f * ((float)sin(a) * (float)cos(b) + (float)cos(a) * (float)sin(b));
                    }
                    const uint64_t p = ((uint64_t)y * w + x) * c + ch;
                    double z = rng_normal(nseed, RNG_STREAM_SYNTHETIC, (uint64_t)i * per + p);
                    float v = floorf(m + 48.0f * (float)z + 0.5f);
                    img[(uint64_t)i * per + p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
    }
}

static void make(int n, int h, int w, int c, int classes, uint64_t seed, int train, struct dataset *ds)
{
    cr_assert_eq(dataset_synthetic(n, h, w, c, classes, seed, train, ds), TB_OK, "%s", tb_error_get());
}

/* The formula: labels exactly, and every byte within one of the reference's. Not bit for bit: where a
 * pixel's mean + sigma·z + 1/2 lies within a float rounding of an integer, the compiler's contraction of
 * that sum into a fused multiply-add (which differs between the -O1 this file has under the sanitizers and
 * the library's -O2/-O3) can put it on either side; such pixels are ~1 in 10,000. */
static void check_against_reference(int n, int h, int w, int c, int classes, uint64_t seed, int train)
{
    struct dataset ds;
    make(n, h, w, c, classes, seed, train, &ds);
    const size_t per = (size_t)h * w * c, total = per * (size_t)n;
    uint8_t *img = malloc(total);
    int32_t *lab = malloc(sizeof *lab * (size_t)n);
    cr_assert(img && lab);
    reference(n, h, w, c, classes, seed, train, img, lab);
    cr_assert_eq(memcmp(ds.labels, lab, sizeof *lab * (size_t)n), 0, "%dx%dx%d: labels differ", h, w, c);
    size_t off_by_one = 0;
    for (size_t q = 0; q < total; q++) {
        const int d = abs((int)ds.images[q] - (int)img[q]);
        cr_assert_leq(d, 1, "%d samples %dx%dx%d, %d classes, seed %llu, %s: byte %zu (sample %zu) %d vs %d", n, h, w, c,
                      classes, (unsigned long long)seed, train ? "train" : "test", q, q / per, ds.images[q], img[q]);
        off_by_one += d;
    }
    cr_assert_leq(off_by_one, total / 1000 + 1, "%zu of %zu bytes one off the reference", off_by_one, total);
    free(img), free(lab);
    dataset_free(&ds);
}

/* Small and odd shapes (one channel, three, a width that is not a vector's), both splits, fewer classes
 * than samples (the tables made up front) and more (made per sample). */
Test(dataset_synthetic, bytes_are_the_reference_formulas)
{
    check_against_reference(37, 28, 28, 1, 10, 42, 1);
    check_against_reference(19, 13, 7, 3, 4, 7, 0);
    check_against_reference(5, 9, 11, 3, 64, 3, 1);
    check_against_reference(3, 32, 32, 3, 1000, 42, 0);
}

/* The fast path (threads from 2^20 pixels, cached class means, libmvec's draws with an exact fallback near an
 * integer) is bit for bit the first generator's, TB_SYN_FAST=0, built with the same flags: at sizes that take
 * the threads, at an odd width (the vector's tail), with per-sample tables (more classes than samples). */
Test(dataset_synthetic, fast_path_is_bitwise_the_first_generators, .timeout = 120)
{
    const struct {
        int n, h, w, c, classes;
    } sh[] = {{6000, 28, 28, 1, 10}, {40, 97, 101, 3, 7}, {400, 30, 30, 3, 1000}, {3, 13, 7, 3, 4}};
    for (size_t t = 0; t < sizeof sh / sizeof sh[0]; t++)
        for (int train = 0; train < 2; train++) {
            struct dataset fast, plain;
            unsetenv("TB_SYN_FAST");
            make(sh[t].n, sh[t].h, sh[t].w, sh[t].c, sh[t].classes, 42 + t, train, &fast);
            setenv("TB_SYN_FAST", "0", 1);
            make(sh[t].n, sh[t].h, sh[t].w, sh[t].c, sh[t].classes, 42 + t, train, &plain);
            unsetenv("TB_SYN_FAST");
            const size_t total = (size_t)sh[t].n * sh[t].h * sh[t].w * sh[t].c;
            cr_assert_eq(memcmp(fast.labels, plain.labels, sizeof *fast.labels * (size_t)sh[t].n), 0);
            for (size_t q = 0; q < total; q++)
                cr_assert_eq(fast.images[q], plain.images[q], "%d samples %dx%dx%d, %d classes, %s: byte %zu: %d vs %d",
                             sh[t].n, sh[t].h, sh[t].w, sh[t].c, sh[t].classes, train ? "train" : "test", q,
                             fast.images[q], plain.images[q]);
            dataset_free(&fast), dataset_free(&plain);
        }
}

/* The CRC-32s of the images and labels the first generator made (commit 4342ffe), which every row before
 * the fast path trained on: the same on both paths. */
Test(dataset_synthetic, large_sets_keep_the_first_generators_bytes, .timeout = 120)
{
#ifndef __FMA__
    /* The class means' sums are contracted into fused multiply-adds where the target has them (every
     * -march=native build on the x86-64-v3/v4 machines these figures come from); without, other bytes. */
    cr_skip_test("built without FMA (TB_NATIVE=OFF and no -march): the CRCs are of FMA builds");
#endif
    struct golden {
        int n, h, w, c, classes;
        uint64_t seed;
        int train;
        unsigned long img_crc, lab_crc;
    } g[] = {
        {6000, 28, 28, 1, 10, 42, 1, 0x31e93573, 0xf4d9b1fd},
        {24, 224, 224, 3, 10, 42, 1, 0xaa055e98, 0x4f183c3e},
        {300, 32, 32, 3, 100, 9, 0, 0x7e9d1c63, 0xa52768fa},
    };
    for (int plain = 0; plain < 2; plain++)
        for (size_t t = 0; t < sizeof g / sizeof g[0]; t++) {
            struct dataset ds;
            if (plain) setenv("TB_SYN_FAST", "0", 1);
            make(g[t].n, g[t].h, g[t].w, g[t].c, g[t].classes, g[t].seed, g[t].train, &ds);
            unsetenv("TB_SYN_FAST");
            const size_t bytes = (size_t)g[t].n * g[t].h * g[t].w * g[t].c;
            const unsigned long ci = crc32(crc32(0L, Z_NULL, 0), ds.images, (uInt)bytes);
            const unsigned long cl = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)ds.labels, (uInt)(sizeof *ds.labels * (size_t)g[t].n));
            cr_expect_eq(ci, g[t].img_crc, "%s: %d samples %dx%dx%d: images crc %08lx, the first generator's %08lx",
                         plain ? "TB_SYN_FAST=0" : "fast", g[t].n, g[t].h, g[t].w, g[t].c, ci, g[t].img_crc);
            cr_expect_eq(cl, g[t].lab_crc, "%d samples: labels crc %08lx, the first generator's %08lx", g[t].n, cl,
                         g[t].lab_crc);
            dataset_free(&ds);
        }
}
