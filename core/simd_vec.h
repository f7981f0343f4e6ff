/* simd_vec.h — the vector layer the convolution kernels are written against: VL float lanes (16 with
 * AVX-512, 8 with AVX2+FMA, 16 emulated lanes elsewhere), masks for channel tails, and load/store/FMA
 * macros. Full vectors use plain loads and stores; only tails are masked (AVX2's masked stores are
 * microcoded on Zen). Header-only, included by the kernel files that share it; not a public API.
 */
#ifndef TB_SIMD_VEC_H
#define TB_SIMD_VEC_H

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VL 16
#define VL_NATIVE 1 /* hardware lanes (0: emulated) */
typedef __m512 vf;
typedef __mmask16 vmask;
static inline vmask vmask_n(int n) { return n <= 0 ? (vmask)0 : n >= 16 ? (vmask)0xFFFF : (vmask)((1u << n) - 1u); }
#define VLD_F(p) _mm512_loadu_ps(p)
#define VLD_M(m, p) _mm512_maskz_loadu_ps((m), (p))
#define VST_F(p, v) _mm512_storeu_ps((p), (v))
#define VST_M(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VST_NT(p, v) _mm512_stream_ps((p), (v)) /* p aligned to VL floats */
#define VFENCE_NT() _mm_sfence()
#elif defined(__AVX2__) && defined(__FMA__)
#define VL 8
#define VL_NATIVE 1
typedef __m256 vf;
typedef __m256i vmask;
static inline vmask vmask_n(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define VLD_F(p) _mm256_loadu_ps(p)
#define VLD_M(m, p) _mm256_maskload_ps((p), (m))
#define VST_F(p, v) _mm256_storeu_ps((p), (v))
#define VST_M(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VST_NT(p, v) _mm256_stream_ps((p), (v)) /* p aligned to VL floats */
#define VFENCE_NT() _mm_sfence()
#else
/* Emulated lanes: the same kernels on any target (the compiler vectorises the lane loops). */
#define VL 16
#define VL_NATIVE 0
typedef struct { float f[VL]; } vf;
typedef int vmask;
static inline vmask vmask_n(int n) { return n <= 0 ? 0 : n >= VL ? VL : n; }
static inline vf vld_m(vmask m, const float *p)
{
    vf r;
    for (int i = 0; i < VL; i++) r.f[i] = i < m ? p[i] : 0.0f;
    return r;
}
static inline void vst_m(float *p, vmask m, vf v) { for (int i = 0; i < m; i++) p[i] = v.f[i]; }
static inline vf vfma(vf a, vf b, vf c) { for (int i = 0; i < VL; i++) c.f[i] += a.f[i] * b.f[i]; return c; }
static inline vf vadd(vf a, vf b) { for (int i = 0; i < VL; i++) a.f[i] += b.f[i]; return a; }
static inline vf vmul(vf a, vf b) { for (int i = 0; i < VL; i++) a.f[i] *= b.f[i]; return a; }
static inline vf vset1(float x) { vf r; for (int i = 0; i < VL; i++) r.f[i] = x; return r; }
#define VLD_F(p) vld_m(VL, (p))
#define VLD_M(m, p) vld_m((m), (p))
#define VST_F(p, v) vst_m((p), VL, (v))
#define VST_M(p, m, v) vst_m((p), (m), (v))
#define VFMA(a, b, c) vfma((a), (b), (c))
#define VADD(a, b) vadd((a), (b))
#define VMUL(a, b) vmul((a), (b))
#define VSET1(x) vset1(x)
#define VZERO() vset1(0.0f)
#define VST_NT(p, v) vst_m((p), VL, (v))
#define VFENCE_NT() ((void)0)
#endif

/* s[l] += v[r][l] and, with q (non-NULL), q[l] += v[r][l]² in double, over rows r = 0 .. rows-1 in
 * order, for the first n lanes (0 < n ≤ VL): float outputs summed as BatchNorm's statistics and the
 * global pool sum them (each value converted, then added; its square is exact in double). The sums stay
 * in registers over the rows; lanes from n on are neither read nor written. */
static inline __attribute__((always_inline)) void vsum_pd(double *s, double *q, const vf *v, int rows, int n)
{
#if defined(__AVX512F__)
    const __mmask8 ml = (__mmask8)(n >= 8 ? 0xFF : (1u << n) - 1u);
    const __mmask8 mh = (__mmask8)(n >= 16 ? 0xFF : n > 8 ? (1u << (n - 8)) - 1u : 0u);
    __m512d s0 = _mm512_maskz_loadu_pd(ml, s), s1 = _mm512_maskz_loadu_pd(mh, s + 8);
    __m512d q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd(); /* set only with q: zero quiets -Wmaybe-uninitialized */
    if (q) q0 = _mm512_maskz_loadu_pd(ml, q), q1 = _mm512_maskz_loadu_pd(mh, q + 8);
    for (int r = 0; r < rows; r++) {
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v[r]));
        const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[r]), 1)));
        s0 = _mm512_add_pd(s0, lo), s1 = _mm512_add_pd(s1, hi);
        if (q) q0 = _mm512_fmadd_pd(lo, lo, q0), q1 = _mm512_fmadd_pd(hi, hi, q1);
    }
    _mm512_mask_storeu_pd(s, ml, s0), _mm512_mask_storeu_pd(s + 8, mh, s1);
    if (q) _mm512_mask_storeu_pd(q, ml, q0), _mm512_mask_storeu_pd(q + 8, mh, q1);
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
    const __m256i ml = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), lane);
    const __m256i mh = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - 4), lane);
    __m256d s0 = _mm256_maskload_pd(s, ml), s1 = _mm256_maskload_pd(s + 4, mh);
    __m256d q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
    if (q) q0 = _mm256_maskload_pd(q, ml), q1 = _mm256_maskload_pd(q + 4, mh);
    for (int r = 0; r < rows; r++) {
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v[r]));
        const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v[r], 1));
        s0 = _mm256_add_pd(s0, lo), s1 = _mm256_add_pd(s1, hi);
        if (q) q0 = _mm256_fmadd_pd(lo, lo, q0), q1 = _mm256_fmadd_pd(hi, hi, q1);
    }
    _mm256_maskstore_pd(s, ml, s0), _mm256_maskstore_pd(s + 4, mh, s1);
    if (q) _mm256_maskstore_pd(q, ml, q0), _mm256_maskstore_pd(q + 4, mh, q1);
#else
    for (int r = 0; r < rows; r++) {
        float f[VL];
        VST_F(f, v[r]);
        for (int l = 0; l < n; l++) {
            const double d = (double)f[l];
            s[l] += d;
            if (q) q[l] += d * d;
        }
    }
#endif
}

/* Inside kernels templated on FULL (a whole vector, or block, of channels, known at compile time). */
#define VLD(m, p) (FULL ? VLD_F(p) : VLD_M((m), (p)))
#define VST(p, m, v)                          \
    do {                                      \
        if (FULL) VST_F((p), (v));            \
        else VST_M((p), (m), (v));            \
    } while (0)

#endif
