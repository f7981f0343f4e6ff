/* simd.h — the few vector primitives our own kernels share: AVX-512 where the compiler targets it,
 * AVX2+FMA otherwise (the earlier VMs here were Zen 3 without AVX-512), scalar as the portable fallback.
 *
 * Every primitive processes each element with the same instructions wherever a slice starts or ends
 * (masked tails, not scalar epilogues), so kernels built on them stay bitwise independent of nth.
 */
#ifndef TB_SIMD_H
#define TB_SIMD_H

#include <math.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TB_SIMD_AVX2 1
#endif

/* Returns Σ a[o]·b[o] over n elements in a fixed order (a function of n only). */
static inline float simd_dot(const float *restrict a, const float *restrict b, int n)
{
#ifdef TB_SIMD_AVX2
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
           acc3 = _mm256_setzero_ps();
    int o = 0;
    for (; o + 32 <= n; o += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + o), _mm256_loadu_ps(b + o), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + o + 8), _mm256_loadu_ps(b + o + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + o + 16), _mm256_loadu_ps(b + o + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + o + 24), _mm256_loadu_ps(b + o + 24), acc3);
    }
    for (; o + 8 <= n; o += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + o), _mm256_loadu_ps(b + o), acc0);
    __m256 s = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; o < n; o++) r = fmaf(a[o], b[o], r);
    return r;
#else
    float r = 0.0f;
    for (int o = 0; o < n; o++) r += a[o] * b[o];
    return r;
#endif
}

/* y[o] = fma(a, x[o], y[o]) for o < n: one rounding per element, the same in every lane and the tail. */
static inline void simd_axpy(float *restrict y, float a, const float *restrict x, int n)
{
    int o = 0;
#ifdef TB_SIMD_AVX2
    const __m256 av = _mm256_set1_ps(a);
    for (; o + 8 <= n; o += 8) _mm256_storeu_ps(y + o, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + o), _mm256_loadu_ps(y + o)));
#endif
    for (; o < n; o++) y[o] = fmaf(a, x[o], y[o]);
}

#ifdef TB_SIMD_AVX2
/* Mask for the first `left` (< 8) lanes, for _mm256_maskload_ps / _mm256_maskstore_ps. */
static inline __m256i simd_tail_mask(int left)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

#endif
