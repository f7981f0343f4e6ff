/* mvec.h — glibc's libmvec, the vector log and cosine the normal draws take four at a time (x86-64 with GCC
 * or clang; the callers check AVX2 and FMA at run time and keep a scalar path). Within 4 ulp: never the scalar
 * functions' bits, so every caller keeps the exact draw where a result could differ (util/rng.c,
 * workloads/dataset_synthetic.c). */
#ifndef TB_MVEC_H
#define TB_MVEC_H

#if defined(__x86_64__) && defined(__GNUC__)
#define TB_HAVE_MVEC 1
#include <immintrin.h>

#include "rng.h"
/* Four natural logarithms. */
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_log(__m256d x);
/* Four cosines. */
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_cos(__m256d x);

/* Whether this CPU runs the four-wide paths (AVX2 and FMA). */
static inline int tb_mvec_usable(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

/* Draws counter0 … counter0 + 3 of a key as rng_normal_keyed makes them (Box–Muller of the same uniforms and
 * arguments), with libmvec's log and cosine: within ~1e-14 of those values, relatively, not their bits. */
__attribute__((target("avx2,fma"))) static inline __m256d tb_normal4_approx(uint64_t key, uint64_t counter0)
{
    double u1[4], u2[4];
    for (int q = 0; q < 4; q++) rng_box_muller_uniforms(key, counter0 + (uint64_t)q, &u1[q], &u2[q]);
    const __m256d l = _ZGVdN4v_log(_mm256_loadu_pd(u1));
    const __m256d c = _ZGVdN4v_cos(_mm256_mul_pd(_mm256_set1_pd(6.283185307179586), _mm256_loadu_pd(u2)));
    return _mm256_mul_pd(_mm256_sqrt_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0), l)), c);
}
#endif

#endif
