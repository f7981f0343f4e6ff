/* test_rng.c — rng_normal_fill, the vector path of the normal draws (effnet's weight init), is bit for bit
 * the scalar draw (float)(scale · rng_normal_keyed(key, counter)) at every scale, length and offset. Its
 * fallback to the exact draw is a guarantee rather than a frequent need: with it taken out, these 11 million
 * draws still matched (libmvec's draws are within ~1e-15 of glibc's; a float's rounding interval is ~1e-7
 * wide), so what this test catches is a wrong counter, scale, sign, tail or write past the end. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static size_t count_differences(uint64_t key, uint64_t c0, double scale, size_t n, size_t *first)
{
    float *v = malloc(sizeof *v * (n + 1));
    cr_assert(v);
    v[n] = 12345.0f; /* a guard: nothing past n is written */
    rng_normal_fill(key, c0, scale, v, n);
    cr_assert_eq(v[n], 12345.0f, "wrote past %zu", n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float e = (float)(scale * rng_normal_keyed(key, c0 + i));
        if (memcmp(&e, &v[i], sizeof e) != 0 && bad++ == 0) *first = i;
    }
    free(v);
    return bad;
}

Test(rng, normal_fill_is_the_scalar_draw_bit_for_bit, .timeout = 120)
{
    const double scales[] = {1.0, 0.0625, 0.2041241452319315, 3.7, 1e-30, 1e30, -0.5};
    const size_t lengths[] = {0, 1, 3, 4, 5, 7, 1000003};
    for (size_t s = 0; s < sizeof scales / sizeof *scales; s++)
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            const uint64_t key = rng_key(42 + s, RNG_STREAM_INIT), c0 = ((uint64_t)(l + 1) << 40) + 3 * l;
            size_t first = 0;
            const size_t bad = count_differences(key, c0, scales[s], lengths[l], &first);
            cr_assert_eq(bad, 0, "scale %g, %zu draws from counter %llu: %zu differ, first at %zu", scales[s], lengths[l],
                         (unsigned long long)c0, bad, first);
        }
    /* Many draws at one scale (of which ~10^2 lie within 1e-12 of a rounding edge and take the exact path). */
    size_t first = 0;
    cr_assert_eq(count_differences(rng_key(7, RNG_STREAM_INIT), 0, 0.044194173824159216, 4000000, &first), 0,
                 "first difference at %zu", first);
}
