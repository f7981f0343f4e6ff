/* rng.c — counter-based hashing (SplitMix64 finaliser chained over the key). */
#include "rng.h"

#include "mvec.h"

#include <math.h>

uint64_t rng_key(uint64_t seed, uint64_t stream)
{
    return rng_mix64(rng_mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (stream + 0x632be59bd9b4e019ULL));
}

uint64_t rng_hash(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_hash_keyed(rng_key(seed, stream), counter);
}

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_uniform_keyed(rng_key(seed, stream), counter);
}

double rng_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_normal_keyed(rng_key(seed, stream), counter);
}

double rng_normal_keyed(uint64_t key, uint64_t counter)
{
    double u1, u2;
    rng_box_muller_uniforms(key, counter, &u1, &u2);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n)
{
    /* Lemire's multiply-shift with rejection; re-draws use a derived counter. */
    uint64_t x = rng_hash(seed, stream, counter);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        uint64_t k = 1;
        while (l < t) {
            x = rng_hash(seed ^ (k++ * 0x9e3779b97f4a7c15ULL), stream, counter);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

void rng_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t stream)
{
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)rng_below(seed, stream, i, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

/* One draw of rng_normal_fill the exact way: never inlined, so the vector path's fallback rounds with this
 * file's flags, as the scalar loop does. */
__attribute__((noinline)) static float normal_exact(uint64_t key, uint64_t counter, double scale)
{
    return (float)(scale * rng_normal_keyed(key, counter));
}

#ifdef TB_HAVE_MVEC

/* rng_normal_fill four draws at a time: the draw from libmvec's log and cosine (of the same arguments as
 * the scalar path's, so within ~1e-14 of its value, relatively), kept where it lies more than 1e-12
 * (relatively) inside the rounding interval of its nearest float — where the exact value must round to that
 * float too — and made by normal_exact elsewhere (a few draws in 10^5). Returns how many it wrote. */
__attribute__((target("avx2,fma"))) static size_t normal_fill_avx2(uint64_t key, uint64_t c0, double scale,
                                                                   float *dst, size_t n)
{
    const __m256d sc = _mm256_set1_pd(scale);
    const __m256d half = _mm256_set1_pd(0.5), rel = _mm256_set1_pd(1e-12), sign = _mm256_set1_pd(-0.0);
    const __m128 signf = _mm_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256d d = _mm256_mul_pd(sc, tb_normal4_approx(key, c0 + i));
        const __m128 f = _mm256_cvtpd_ps(d);
        /* Magnitudes: the float's neighbours are its bits ∓ 1 (0 and the largest float fail the test below:
         * a NaN neighbour compares false), the midpoints exact in double. */
        const __m256d a = _mm256_andnot_pd(sign, d);
        const __m128 fa = _mm_andnot_ps(signf, f);
        const __m128i fb = _mm_castps_si128(fa);
        const __m256d fad = _mm256_cvtps_pd(fa);
        const __m256d lo = _mm256_mul_pd(_mm256_add_pd(fad, _mm256_cvtps_pd(_mm_castsi128_ps(_mm_sub_epi32(fb, _mm_set1_epi32(1))))), half);
        const __m256d hi = _mm256_mul_pd(_mm256_add_pd(fad, _mm256_cvtps_pd(_mm_castsi128_ps(_mm_add_epi32(fb, _mm_set1_epi32(1))))), half);
        const __m256d del = _mm256_mul_pd(a, rel);
        const __m256d inside = _mm256_and_pd(_mm256_cmp_pd(a, _mm256_add_pd(lo, del), _CMP_GT_OQ),
                                             _mm256_cmp_pd(a, _mm256_sub_pd(hi, del), _CMP_LT_OQ));
        _mm_storeu_ps(dst + i, f);
        const int ok = _mm256_movemask_pd(inside) & (_mm_movemask_ps(_mm_cmpgt_ps(fa, _mm_setzero_ps())) & 0xf);
        for (int q = 0; ok != 0xf && q < 4; q++)
            if (!(ok >> q & 1)) dst[i + q] = normal_exact(key, c0 + i + (uint64_t)q, scale);
    }
    return i;
}
#endif

void rng_normal_fill(uint64_t key, uint64_t counter0, double scale, float *dst, size_t n)
{
    size_t i = 0;
#ifdef TB_HAVE_MVEC
    if (tb_mvec_usable()) i = normal_fill_avx2(key, counter0, scale, dst, n);
#endif
    for (; i < n; i++) dst[i] = normal_exact(key, counter0 + i, scale);
}
