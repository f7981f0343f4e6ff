/* op_norm.c — BatchNorm / GroupNorm (+ fused SiLU) kernels and their double references.
 *
 * Every kernel is built from four block routines over a channel range [c0, c0+cn) of a row range:
 * norm_stats_rows (Σx, Σx² in double), norm_fwd_rows (y = act((x-μ)·a + β), a = γ·rstd),
 * norm_bwd_sums_rows (Σdz, Σdz·(x-μ) in double) and norm_bwd_rows (dx += a·dz + c2·(x-μ) + k0).
 * Channels go in blocks of NORM_CB so the per-channel double accumulators live on the stack; the
 * same routine and expression serve every entry point, which is what makes the single-call,
 * two-phase, chunk → finish and any-nth paths bitwise identical. BatchNorm's sums follow fixed row
 * chunks (see the BatchNorm section) so that rows, not only channels, can be split over threads.
 * With AVX-512 (or AVX2+FMA) the row passes run VL-channel vectors with masked channel tails (SiLU with
 * its own sigmoid, norm_v_sigmoid), the SiLU backward sums take two rows per pass over float
 * accumulators, added into double every 16 rows, the statistics four rows per pass (AVX-512),
 * and BatchNorm outputs of tb_stream_bytes() or more go out with non-temporal stores (norm_nt); sums keep
 * one order for any thread split either way.
 */
#include "op_norm.h"

#include "env_switch.h"
#include "layout.h"
#include "op_act.h"
#include "prefetch.h"
#include "status.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Channels per block: 2·2048 doubles of accumulators on the stack, so every EfficientNet-B0 layer is one
 * block. With 256, a 14×14×672 layer walked each row three times in 256-channel pieces, which defeated
 * the prefetchers: its forward apply took 4.0 ms and its backward apply 3.0 ms at batch 16, against
 * 1.7 and 1.2 ms in one block (same bits: blocking only changes which channels a pass visits). */
#define NORM_CB 2048
/* Rows per float partial sum in the SiLU backward sums (then added in double). */
#define NORM_FROWS 16
/* GroupNorm keeps 256-channel chunks of whole groups: a chunk's rows stay in L2 for its second pass. */
#define GN_CB 256

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include "simd_vec.h"
#define NORM_VEC 1
/* The few operations the row passes need beyond simd_vec.h, at VL lanes (16 with AVX-512, 8 with AVX2).
 * Every lane runs the same instructions, full vector or masked tail, so channel tails and any thread
 * split give the same bits. */
#if defined(__AVX512F__)
#define NV_SUB _mm512_sub_ps
#define NV_MUL _mm512_mul_ps
#define NV_MIN _mm512_min_ps
#define NV_MAX _mm512_max_ps
#define NV_FMSUB _mm512_fmsub_ps
#define NV_FNMADD _mm512_fnmadd_ps
#define NV_RCP _mm512_rcp14_ps
#define NV_SHL23_ADD(p, t) \
    _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), _mm512_slli_epi32(_mm512_castps_si512(t), 23)))
#else
#define NV_SUB _mm256_sub_ps
#define NV_MUL _mm256_mul_ps
#define NV_MIN _mm256_min_ps
#define NV_MAX _mm256_max_ps
#define NV_FMSUB _mm256_fmsub_ps
#define NV_FNMADD _mm256_fnmadd_ps
#define NV_RCP _mm256_rcp_ps
#define NV_SHL23_ADD(p, t) \
    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(t), 23)))
#endif
#define NV_ALL vmask_n(VL) /* every lane: the mask full vectors pass (and FULL paths ignore) */
/* Loads and stores below are simd_vec.h's VLD(m, p) / VST(p, m, v): a full vector when FULL (a constant
 * after inlining), else the lanes of m. */

/* σ(z) of VL lanes for the fused SiLU: 1/(1 + 2^t), t = -z·log2(e), with z clamped to [-87, 87] (σ is 1
 * or below 2e-38 there). t = k + f, k rounded by the 1.5·2^23 trick (its low bits are k, so one shift
 * and an integer add build 2^k), f = -z·log2(e) - k exact to ~2^-30 from a two-part constant, and 2^f on
 * [-1/2, 1/2] by a degree-5 polynomial (relative error 9.1e-8, fitted for this kernel); 1/(1+e) by the
 * reciprocal estimate plus one Newton step (~1e-7 relative with AVX2's 12-bit rcpps, less with
 * AVX-512's rcp14) instead of a division. σ is within 2.4e-7 relative wherever it is above 1e-6
 * (1.8e-7 absolute everywhere), as the natural-log reduction before it (2 more FMAs, a vroundps) was:
 * SiLU in L1 went 0.53 → 0.41 ns an element. The scalar act_sigmoidf's exp, the division and the
 * two-factor scaling made BatchNorm+SiLU compute-bound before (forward apply 18 ms, backward sums 28 ms
 * for 77 MB against 10–12 ms without SiLU). NaN passes through (min/max keep their second operand;
 * its shifted bits are 0). */
static inline vf norm_v_sigmoid(vf z)
{
    const vf x = NV_MAX(VSET1(-87.0f), NV_MIN(VSET1(87.0f), z));
    const vf nl2e = VSET1(-1.44269504088896341f), magic = VSET1(12582912.0f);
    const vf tm = VADD(NV_MUL(x, nl2e), magic);
    vf f = NV_FMSUB(x, nl2e, NV_SUB(tm, magic));
    f = VFMA(x, VSET1(-1.9259629891e-08f), f); /* -log2(e) - (float)-log2(e) */
    vf p = VSET1(1.3264729525e-03f);
    p = VFMA(p, f, VSET1(9.6715130809e-03f));
    p = VFMA(p, f, VSET1(5.5507337346e-02f));
    p = VFMA(p, f, VSET1(2.4022242076e-01f));
    p = VFMA(p, f, VSET1(6.9314697761e-01f));
    p = VFMA(p, f, VSET1(1.0f));
    const vf d = VADD(NV_SHL23_ADD(p, tm), VSET1(1.0f));
    const vf y = NV_RCP(d);
    return NV_MUL(y, NV_FNMADD(d, y, VSET1(2.0f)));
}

/* silu'(z) = σ·(1 + z·(1 - σ)); *y = silu(z) = z·σ, norm_v_fwd's output bitwise. */
static inline __attribute__((always_inline)) vf norm_v_silu_grad_y(vf z, vf *y)
{
    const vf s = norm_v_sigmoid(z);
    *y = NV_MUL(z, s);
    return NV_MUL(s, VFMA(z, NV_SUB(VSET1(1.0f), s), VSET1(1.0f)));
}

/* silu'(z) = σ·(1 + z·(1 - σ)). */
static inline vf norm_v_silu_grad(vf z)
{
    vf y;
    return norm_v_silu_grad_y(z, &y);
}
/* VL channels of one row: *d = x - μ and the return z = d·a + b, the pre-activation the forward applies
 * SiLU to and the backward differentiates it at (the two must agree). */
static inline __attribute__((always_inline)) vf norm_v_z(vf *d, const float *x, const float *mean, const float *a,
                                                         const float *b, vmask m, const int FULL)
{
    *d = NV_SUB(VLD(m, x), VLD(m, mean));
    return VFMA(*d, VLD(m, a), VLD(m, b));
}
/* VL channels of one row: *d = x - μ and the return dz = dy·silu'(d·a + b), the one expression both
 * backward kernels (sums, and GroupNorm's data pass that recomputes dz) use. */
static inline __attribute__((always_inline)) vf norm_v_dz(vf *d, const float *x, const float *dy, const float *mean,
                                                          const float *a, const float *b, vmask m, const int FULL)
{
    const vf z = norm_v_z(d, x, mean, a, b, m, FULL);
    return NV_MUL(VLD(m, dy), norm_v_silu_grad(z));
}

/* The output gradient of a BatchNorm whose output feeds an SE scale and its global pool only (see
 * bn_backward_chunks_se): dy = do·s[n] + dp[n]·(1/HW) for the row's sample n, formed here instead of in
 * memory. s[k], p[k]: rows k of the call's scale and pool gradient, at the call's first channel. */
struct norm_se_rows {
    const float *s[2], *p[2];
    float inv;
};

/* NR (1 or 2, a constant after inlining) rows of VL channels (or the lanes of m) of the backward sums:
 * dz (stored over dy when store), then fs, fq += Σdz, Σdz·(x-μ) in float (the caller adds them into
 * double every NORM_FROWS rows); one load and store of the accumulators for all NR rows. With se
 * (non-NULL after inlining) dy holds do and the output gradient is formed from it as in the unfused
 * kernels: do·s rounded, then fma(dp, 1/HW, ·), as se_scale_backward and global_avgpool_backward do. */
static inline __attribute__((always_inline)) void norm_v_bwd_sums(float *fs, float *fq, const float *x, float *dy,
                                                                  size_t C, const float *mean, const float *a,
                                                                  const float *b, int store, const int NR, vmask m,
                                                                  const int FULL, const struct norm_se_rows *se,
                                                                  int j, float *yo)
{
    vf s = VLD(m, fs), q = VLD(m, fq);
    for (int k = 0; k < NR; k++) {
        vf d, y;
        const vf z = norm_v_z(&d, x + (size_t)k * C, mean, a, b, m, FULL);
        vf g = VLD(m, dy + (size_t)k * C);
        if (se) g = VFMA(VLD(m, se->p[k] + j), VSET1(se->inv), NV_MUL(g, VLD(m, se->s[k] + j)));
        const vf dz = NV_MUL(g, norm_v_silu_grad_y(z, &y));
        if (yo) VST(yo + (size_t)k * C, m, y);
        if (store) VST(dy + (size_t)k * C, m, dz);
        s = VADD(s, dz);
        q = VFMA(dz, d, q);
    }
    VST(fs, m, s);
    VST(fq, m, q);
}

/* NR rows of channels [0,cn): full vectors, then the masked tail; with yo (non-NULL after inlining) the
 * SiLU outputs too, rows of C floats there. */
static inline __attribute__((always_inline)) void norm_v_bwd_sums_rows(float *fs, float *fq, const float *x,
                                                                       float *dy, size_t C, int cn,
                                                                       const float *mean, const float *a,
                                                                       const float *b, int store, const int NR,
                                                                       const struct norm_se_rows *se, float *yo)
{
    int j = 0;
    for (; j + VL <= cn; j += VL)
        norm_v_bwd_sums(fs + j, fq + j, x + j, dy + j, C, mean + j, a + j, b + j, store, NR, NV_ALL, 1, se, j,
                        yo ? yo + j : NULL);
    if (j < cn)
        norm_v_bwd_sums(fs + j, fq + j, x + j, dy + j, C, mean + j, a + j, b + j, store, NR, vmask_n(cn - j), 0, se,
                        j, yo ? yo + j : NULL);
}
#define NORM_SFENCE() VFENCE_NT()
#else
#define NORM_VEC 0
#define NORM_SFENCE() ((void)0)
#endif

/* Thread ith's channels [c0,c1), cut at multiples of 16 (one cache line of floats). */
static void norm_ch_slice(int C, int ith, int nth, int *c0, int *c1)
{
    size_t lo, hi;
    tb_slice16((size_t)C, ith, nth, &lo, &hi);
    *c0 = (int)lo, *c1 = (int)hi;
}

/* The passes whose sums chain through accumulators (the statistics; the SiLU backward's sums, with the
 * sigmoid between the loads and the adds) prefetch the rows this many bytes ahead: with the hardware
 * prefetcher alone they waited on their misses. One thread, statistics over a tensor in memory (add 0):
 * 25.7 MB of C = 32 2.0–3.0 → 0.5 ms, C = 96 77 MB 2.0–2.2 → 1.8, C = 240 0.65 → 0.22 (2 and 4 KB ahead
 * did less); the backward sums (with SE) of 50,176 × 144 3.4 → 2.3 ms, 12,544 × 240 1.3 → 1.1, the
 * bandwidth-bound 200,704 × 96 unchanged, rows under 64 channels 5 % slower (so not there). Rows just
 * written (add 1: the fused kernels' batches) are in cache. */
enum { NORM_PF_BYTES = 8192 };

/* Rows of C floats that make NORM_PF_BYTES (rounded up): how far ahead those passes prefetch. */
static inline size_t norm_pf_rows(size_t C) { return (NORM_PF_BYTES + 4 * C - 1) / (4 * C); }

#if defined(__AVX512F__)
/* Channel blocks of 16 whose double accumulators (Σx, Σx² for the low and high 8 lanes: 4 registers a
 * block) stay in registers over all rows of a call: 6 blocks = 24 of the 32. With the accumulators in
 * memory every row (the compiler's vectorisation of the scalar loop, or a few rows per round trip) the
 * pass ran at 15–30 GB/s by C, from store-forwarding and 4K-aliasing stalls against the input. */
enum { NORM_STATS_NB = 6 };

/* s, q (16·NB channels from x, the last block's lanes in m) = Σx, Σx² over M rows of stride C. */
static inline __attribute__((always_inline)) void norm_v_stats_nb(double *s, double *q, const float *x, size_t M,
                                                                  size_t C, const int NB, vmask m, int add)
{
    const size_t ahead = add ? 0 : norm_pf_rows(C);
    __m512d acc[NORM_STATS_NB][4];
    for (int b = 0; b < NB; b++) {
        const __mmask8 lo = (__mmask8)((b == NB - 1 ? m : NV_ALL) & 0xFF), hi = (__mmask8)((b == NB - 1 ? m : NV_ALL) >> 8);
        acc[b][0] = add ? _mm512_maskz_loadu_pd(lo, s + 16 * b) : _mm512_setzero_pd();
        acc[b][1] = add ? _mm512_maskz_loadu_pd(hi, s + 16 * b + 8) : _mm512_setzero_pd();
        acc[b][2] = add ? _mm512_maskz_loadu_pd(lo, q + 16 * b) : _mm512_setzero_pd();
        acc[b][3] = add ? _mm512_maskz_loadu_pd(hi, q + 16 * b + 8) : _mm512_setzero_pd();
    }
    for (size_t r = 0; r < M; r++) {
        const float *xr = x + r * C;
        if (ahead && r + ahead < M) pf_lines(xr, ahead * C * sizeof(float), (size_t)NB * 64, 0);
        for (int b = 0; b < NB; b++) {
            const vf v = _mm512_maskz_loadu_ps(b == NB - 1 ? m : NV_ALL, xr + 16 * b);
            const __m512d v0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            const __m512d v1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            acc[b][0] = _mm512_add_pd(acc[b][0], v0), acc[b][1] = _mm512_add_pd(acc[b][1], v1);
            acc[b][2] = _mm512_fmadd_pd(v0, v0, acc[b][2]); /* v·v is exact in double: fused or not */
            acc[b][3] = _mm512_fmadd_pd(v1, v1, acc[b][3]);
        }
    }
    for (int b = 0; b < NB; b++) {
        const __mmask8 lo = (__mmask8)((b == NB - 1 ? m : NV_ALL) & 0xFF), hi = (__mmask8)((b == NB - 1 ? m : NV_ALL) >> 8);
        _mm512_mask_storeu_pd(s + 16 * b, lo, acc[b][0]), _mm512_mask_storeu_pd(s + 16 * b + 8, hi, acc[b][1]);
        _mm512_mask_storeu_pd(q + 16 * b, lo, acc[b][2]), _mm512_mask_storeu_pd(q + 16 * b + 8, hi, acc[b][3]);
    }
}
#endif

/* s, q (cn) = Σx, Σx² over rows [0,M) of inp (M,C), channels [c0,c0+cn); rows in ascending order. With
 * add the sums continue from s, q's values (the same additions as one call over all the rows). */
static void norm_stats_rows(double *restrict s, double *restrict q, const float *restrict inp, size_t M,
                            size_t C, int c0, int cn, int add)
{
#if defined(__AVX512F__)
    /* Channels in groups of at most NORM_STATS_NB blocks, as even as the blocks allow; each group
     * walks all M rows (its slice of each row) with the sums in registers. */
    const int nb = (cn + 15) / 16, ng = (nb + NORM_STATS_NB - 1) / NORM_STATS_NB;
    for (int g = 0, b0 = 0; g < ng; g++) {
        const int b1 = (int)((long)nb * (g + 1) / ng), gb = b1 - b0, j0 = 16 * b0;
        const vmask m = vmask_n(cn - 16 * (b1 - 1));
        const float *x = inp + (size_t)c0 + (size_t)j0;
        switch (gb) {
        case 1: norm_v_stats_nb(s + j0, q + j0, x, M, C, 1, m, add); break;
        case 2: norm_v_stats_nb(s + j0, q + j0, x, M, C, 2, m, add); break;
        case 3: norm_v_stats_nb(s + j0, q + j0, x, M, C, 3, m, add); break;
        case 4: norm_v_stats_nb(s + j0, q + j0, x, M, C, 4, m, add); break;
        case 5: norm_v_stats_nb(s + j0, q + j0, x, M, C, 5, m, add); break;
        default: norm_v_stats_nb(s + j0, q + j0, x, M, C, 6, m, add); break;
        }
        b0 = b1;
    }
#else
    if (!add)
        for (int j = 0; j < cn; j++) s[j] = q[j] = 0.0;
    for (size_t r = 0; r < M; r++) {
        const float *restrict x = inp + r * C + (size_t)c0;
        for (int j = 0; j < cn; j++) {
            double v = (double)x[j];
            s[j] += v;
            q[j] += v * v;
        }
    }
#endif
}

#if NORM_VEC
/* VL channels (or the lanes of m) of one output row: y = act((x - mean)·a + b); with nt (full vectors
 * only) a non-temporal store; with pacc (non-NULL after inlining) the outputs also added into the pool
 * sums there, in double, as global_avgpool_forward adds them. */
static inline __attribute__((always_inline)) void norm_v_fwd(float *y, const float *x, const float *mean,
                                                             const float *a, const float *b, int silu, int nt,
                                                             vmask m, const int FULL, double *pacc)
{
    vf d;
    const vf z = norm_v_z(&d, x, mean, a, b, m, FULL);
    const vf v = silu ? NV_MUL(z, norm_v_sigmoid(z)) : z;
    if (FULL && nt)
        VST_NT(y, v);
    else
        VST(y, m, v);
    if (pacc) vsum_pd(pacc, NULL, &v, 1, VL); /* lanes outside m hold 0 (masked loads), added too */
}
#endif

/* out rows [r0,r1), channels [c0,c0+cn) = act((x - mean)·a + b); mean, a, b (cn). With nt the full
 * vectors go out with non-temporal stores (the caller checked alignment and size). With pacc (cn
 * doubles rounded up to VL, non-NULL after inlining) every output is also added there, row by row. */
static inline __attribute__((always_inline)) void
norm_fwd_rows_k(float *restrict out, const float *restrict inp, const float *restrict mean,
                const float *restrict a, const float *restrict b, size_t r0, size_t r1, size_t C, int c0,
                int cn, int silu, int nt, double *restrict pacc, int pf)
{
#if NORM_VEC
    const int cv = cn - cn % VL;
    const vmask tm = vmask_n(cn - cv);
#endif
    const size_t ahead = pf && C >= BN_APPLY_PF_MIN_C ? norm_pf_rows(C) : 0;
    for (size_t r = r0; r < r1; r++) {
        const float *restrict x = inp + r * C + (size_t)c0;
        float *restrict y = out + r * C + (size_t)c0;
        int j = 0;
        if (ahead) pf_lines(x, ahead * C * sizeof(float), (size_t)cn * sizeof(float), 0);
#if NORM_VEC
        for (; j < cv; j += VL) norm_v_fwd(y + j, x + j, mean + j, a + j, b + j, silu, nt, NV_ALL, 1, pacc ? pacc + j : NULL);
        if (j < cn) norm_v_fwd(y + j, x + j, mean + j, a + j, b + j, silu, nt, tm, 0, pacc ? pacc + j : NULL);
        j = cn;
#else
        (void)nt;
#endif
        for (; j < cn; j++) {
            float z = (x[j] - mean[j]) * a[j] + b[j];
            y[j] = silu ? act_siluf(z) : z;
            if (pacc) pacc[j] += (double)y[j];
        }
    }
}

/* Whether a row kernel writing channels [c0, ...) of rows of C floats at out, in a tensor of n floats that nth
 * threads write, streams its stores: large enough (tb_stream_floats) and every full vector aligned to its size. */
static int norm_nt(const float *out, size_t n, int nth, size_t C, int c0)
{
#if NORM_VEC
    return tb_stream_floats(n, nth) && (uintptr_t)out % (VL * sizeof(float)) == 0 && C % VL == 0 && c0 % VL == 0;
#else
    (void)out, (void)n, (void)nth, (void)C, (void)c0;
    return 0;
#endif
}

/* norm_fwd_rows_k for act; stream as norm_nt decides for a tensor of M_total rows written by nth threads. */
static void norm_fwd_rows(float *out, const float *inp, const float *mean, const float *a, const float *b,
                          size_t r0, size_t r1, size_t C, int c0, int cn, enum norm_act act, size_t M_total, int nth)
{
    const int nt = norm_nt(out, M_total * C, nth, C, c0);
    if (act == NORM_ACT_SILU && nt)
        norm_fwd_rows_k(out, inp, mean, a, b, r0, r1, C, c0, cn, 1, 1, NULL, 0);
    else if (act == NORM_ACT_SILU)
        norm_fwd_rows_k(out, inp, mean, a, b, r0, r1, C, c0, cn, 1, 0, NULL, 0);
    else if (nt)
        norm_fwd_rows_k(out, inp, mean, a, b, r0, r1, C, c0, cn, 0, 1, NULL, 0);
    else
        norm_fwd_rows_k(out, inp, mean, a, b, r0, r1, C, c0, cn, 0, 0, NULL, 0);
    if (nt) NORM_SFENCE(); /* the stores are weakly ordered: visible before the caller's barrier */
}

/* norm_fwd_rows with SiLU over the HW rows of each sample [n0,n1), pool (N,C) channels [c0,c0+cn) of
 * those samples = the mean of each sample's outputs: summed in double over its rows in order and
 * scaled by 1/HW in double, global_avgpool_forward's operations. */
static void norm_fwd_rows_pool(float *out, float *pool, const float *inp, const float *mean, const float *a,
                               const float *b, size_t n0, size_t n1, size_t HW, size_t C, int c0, int cn,
                               size_t M_total, int nth)
{
    const int nt = norm_nt(out, M_total * C, nth, C, c0);
    const double inv = 1.0 / (double)HW;
    double acc[NORM_CB];
    const int cz = (cn + 15) / 16 * 16 < NORM_CB ? (cn + 15) / 16 * 16 : NORM_CB; /* masked tails add their 0s */
    for (size_t n = n0; n < n1; n++) {
        for (int j = 0; j < cz; j++) acc[j] = 0.0;
        if (nt) norm_fwd_rows_k(out, inp, mean, a, b, n * HW, (n + 1) * HW, C, c0, cn, 1, 1, acc, 0);
        else norm_fwd_rows_k(out, inp, mean, a, b, n * HW, (n + 1) * HW, C, c0, cn, 1, 0, acc, 0);
        for (int j = 0; j < cn; j++) pool[n * C + (size_t)c0 + (size_t)j] = (float)(acc[j] * inv);
    }
    if (nt) NORM_SFENCE();
}

/* The SE inputs of bn_backward_chunks_se for a call over rows [rbase, rbase + M): scale and dpool (N,C)
 * at channel 0, HW rows a sample. */
struct norm_se_in {
    const float *scale, *dpool;
    size_t HW, rbase;
};

/* sdz, sdzd (cn) = Σ dz, Σ dz·(x - mean) over rows [0,M), dz = dout·act'((x-mean)·a + b). With store
 * (SiLU only) dz is written back over dout, so a second pass reads it instead of recomputing the
 * exp; one pointer reads and writes, so there is no aliasing for the vectoriser to fear. Without
 * store, dout is only read (GroupNorm passes a const buffer through a cast). With se (SiLU only) dout
 * holds the SE scale's output gradient and the kernel's own is formed from it (norm_se_rows). */
static inline __attribute__((always_inline)) void
norm_bwd_sums_rows_k(double *restrict sdz, double *restrict sdzd, float *dout, const float *restrict inp,
                     const float *restrict mean, const float *restrict a, const float *restrict b, size_t M,
                     size_t C, int c0, int cn, int silu, int store, const struct norm_se_in *se)
{
    for (int j = 0; j < cn; j++) sdz[j] = sdzd[j] = 0.0;
    const float inv = se ? (float)(1.0 / (double)se->HW) : 0.0f; /* global_avgpool_backward's factor */
    int cv = 0; /* channels [0,cv) go in vectors (all of them, masked tail included, with SiLU); the rest,
                 * and everything without vectors or SiLU, below */
#if NORM_VEC
    if (silu) {
        cv = cn;
        /* Float sums over blocks of NORM_FROWS rows, each block added into the double sums: converting
         * every dz and d to double cost as much as the sigmoid (backward sums of a 50,176 × 144 layer
         * 11.1 → 9.9 ms, 200,704 × 96: 24.3 → 17.7 ms). Blocks start at row 0 of the call, and every
         * caller passes whole chunks (or samples), so the sums keep one order for any thread split.
         * Two rows per load/store of the accumulators; rows stay the outer loop, for locality. */
        float fs[NORM_CB], fq[NORM_CB];
        struct norm_se_rows sr = {.inv = inv};
        const size_t ahead = C >= 64 ? norm_pf_rows(C) : 0; /* shorter rows: lost 5 % */
        for (size_t r0 = 0; r0 < M; r0 += NORM_FROWS) {
            const size_t r1 = M - r0 < NORM_FROWS ? M : r0 + NORM_FROWS;
            for (int j = 0; j < cv; j++) fs[j] = fq[j] = 0.0f;
            size_t r = r0;
            for (; r < r1; r += 2) {
                const int nr = r + 2 <= r1 ? 2 : 1;
                if (ahead && r + 2 + ahead < M) /* both rows' lines of x and dout, NORM_PF_BYTES ahead */
                    for (size_t k = 0; k < 2; k++) { /* this call's channels only: a chunk's channel groups */
                        const size_t e = ((r + ahead + k) * C + (size_t)c0) * sizeof(float);
                        pf_lines(inp, e, (size_t)cn * sizeof(float), 0);
                        pf_lines(dout, e, (size_t)cn * sizeof(float), 1);
                    }
                if (se)
                    for (int k = 0; k < nr; k++) {
                        const size_t o = (se->rbase + r + (size_t)k) / se->HW * C + (size_t)c0;
                        sr.s[k] = se->scale + o, sr.p[k] = se->dpool + o;
                    }
                if (nr == 2)
                    norm_v_bwd_sums_rows(fs, fq, inp + r * C + (size_t)c0, dout + r * C + (size_t)c0, C, cv, mean, a,
                                         b, store, 2, se ? &sr : NULL, NULL);
                else
                    norm_v_bwd_sums_rows(fs, fq, inp + r * C + (size_t)c0, dout + r * C + (size_t)c0, C, cv, mean, a,
                                         b, store, 1, se ? &sr : NULL, NULL);
            }
            for (int j = 0; j < cv; j++) {
                sdz[j] += (double)fs[j];
                sdzd[j] += (double)fq[j];
            }
        }
    }
#endif
    if (cv == cn) return;
    for (size_t r = 0; r < M; r++) {
        const float *restrict x = inp + r * C + (size_t)c0;
        float *restrict dy = dout + r * C + (size_t)c0;
        const size_t o = se ? (se->rbase + r) / se->HW * C + (size_t)c0 : 0;
        for (int j = cv; j < cn; j++) {
            float d = x[j] - mean[j];
            float dz = dy[j];
            if (se) { /* written as the unfused kernels write it, so the compiler contracts it alike */
                dz = dz * se->scale[o + (size_t)j];
                dz += se->dpool[o + (size_t)j] * inv;
            }
            if (silu) dz *= act_silu_gradf(d * a[j] + b[j]);
            if (silu && store) dy[j] = dz;
            sdz[j] += (double)dz;
            sdzd[j] += (double)dz * (double)d;
        }
    }
}

/* norm_bwd_sums_rows_k for act and store; se (SiLU and store only) as there. */
static void norm_bwd_sums_rows(double *sdz, double *sdzd, float *dout, const float *inp, const float *mean,
                               const float *a, const float *b, size_t M, size_t C, int c0, int cn,
                               enum norm_act act, int store, const struct norm_se_in *se)
{
    if (se) {
        TB_ASSERT(act == NORM_ACT_SILU && store);
        norm_bwd_sums_rows_k(sdz, sdzd, dout, inp, mean, a, b, M, C, c0, cn, 1, 1, se);
    } else if (act == NORM_ACT_SILU && store)
        norm_bwd_sums_rows_k(sdz, sdzd, dout, inp, mean, a, b, M, C, c0, cn, 1, 1, NULL);
    else if (act == NORM_ACT_SILU)
        norm_bwd_sums_rows_k(sdz, sdzd, dout, inp, mean, a, b, M, C, c0, cn, 1, 0, NULL);
    else
        norm_bwd_sums_rows_k(sdz, sdzd, dout, inp, mean, a, b, M, C, c0, cn, 0, 0, NULL);
}

#if NORM_VEC
/* VL channels (or the lanes of m) of one row of norm_bwd_rows_k. */
static inline __attribute__((always_inline)) void norm_v_bwd(float *dx, const float *dy, const float *x,
                                                             const float *mean, const float *a, const float *b,
                                                             const float *c2, const float *k0, int silu, int acc,
                                                             int nt, vmask m, const int FULL)
{
    vf d, dz;
    if (silu) {
        dz = norm_v_dz(&d, x, dy, mean, a, b, m, FULL);
    } else {
        d = NV_SUB(VLD(m, x), VLD(m, mean));
        dz = VLD(m, dy);
    }
    vf g = VFMA(VLD(m, c2), d, VLD(m, k0));
    g = VFMA(VLD(m, a), dz, g);
    if (acc)
        VST(dx, m, VADD(VLD(m, dx), g));
    else if (FULL && nt)
        VST_NT(dx, g);
    else
        VST(dx, m, g);
}
#endif

/* dinp rows [r0,r1), channels [c0,c0+cn) += (acc) or = (!acc) a·dz + c2·(x - mean) + k0 (all per
 * channel, (cn)). Overwriting spares the caller a memset of dinp and this loop a read of it; with nt
 * (overwriting only) the full vectors go out with non-temporal stores. */
static inline __attribute__((always_inline)) void
norm_bwd_rows_k(float *restrict dinp, const float *restrict dout, const float *restrict inp,
                const float *restrict mean, const float *restrict a, const float *restrict b,
                const float *restrict c2, const float *restrict k0, size_t r0, size_t r1, size_t C, int c0,
                int cn, int silu, int acc, int nt)
{
#if NORM_VEC
    const int cv = cn - cn % VL;
    const vmask tm = vmask_n(cn - cv);
#endif
    for (size_t r = r0; r < r1; r++) {
        const float *restrict x = inp + r * C + (size_t)c0;
        const float *restrict dy = dout + r * C + (size_t)c0;
        float *restrict dx = dinp + r * C + (size_t)c0;
        int j = 0;
#if NORM_VEC
        for (; j < cv; j += VL) norm_v_bwd(dx + j, dy + j, x + j, mean + j, a + j, b + j, c2 + j, k0 + j, silu, acc, nt, NV_ALL, 1);
        if (j < cn) norm_v_bwd(dx + j, dy + j, x + j, mean + j, a + j, b + j, c2 + j, k0 + j, silu, acc, nt, tm, 0);
        j = cn;
#else
        (void)nt;
#endif
        for (; j < cn; j++) {
            float d = x[j] - mean[j];
            float dz = dy[j];
            if (silu) dz *= act_silu_gradf(d * a[j] + b[j]);
            const float g = a[j] * dz + c2[j] * d + k0[j];
            dx[j] = acc ? dx[j] + g : g;
        }
    }
}

/* norm_bwd_rows_k for act and acc; an overwrite streams as norm_nt decides for M_total rows and nth threads. */
static void norm_bwd_rows(float *dinp, const float *dout, const float *inp, const float *mean, const float *a,
                          const float *b, const float *c2, const float *k0, size_t r0, size_t r1, size_t C,
                          int c0, int cn, enum norm_act act, int acc, size_t M_total, int nth)
{
    const int nt = !acc && norm_nt(dinp, M_total * C, nth, C, c0);
    if (act == NORM_ACT_SILU && acc)
        norm_bwd_rows_k(dinp, dout, inp, mean, a, b, c2, k0, r0, r1, C, c0, cn, 1, 1, 0);
    else if (act == NORM_ACT_SILU)
        norm_bwd_rows_k(dinp, dout, inp, mean, a, b, c2, k0, r0, r1, C, c0, cn, 1, 0, 0);
    else if (acc)
        norm_bwd_rows_k(dinp, dout, inp, mean, a, b, c2, k0, r0, r1, C, c0, cn, 0, 1, 0);
    else if (nt)
        norm_bwd_rows_k(dinp, dout, inp, mean, a, b, c2, k0, r0, r1, C, c0, cn, 0, 0, 1);
    else
        norm_bwd_rows_k(dinp, dout, inp, mean, a, b, c2, k0, r0, r1, C, c0, cn, 0, 0, 0);
    if (nt) NORM_SFENCE(); /* as in norm_fwd_rows */
}

/* ------------------------------------------------------------------------------------------------
 * BatchNorm. Every per-channel sum is Σ_k (Σ_{rows of chunk k} v) with chunk k's rows summed in
 * ascending order from 0 and the chunk totals added in ascending k from 0: bn_row_chunks fixes the
 * chunks from M alone. The channel-partitioned kernels walk the chunks themselves (norm_*_chunked);
 * the row kernels store each chunk's sums and add them after the caller's barrier (bn_combine_block).
 * Both orders are the same additions, so the two families are bitwise interchangeable. The routines
 * that turn sums into per-channel constants are noinline: one compiled body for every caller, so
 * gcc's FMA contraction (gnu11 + -march=native) is decided once and their bits cannot differ by caller.
 */

#define BN_CHUNK_ROWS 128 /* fewest rows a chunk is given before there are BN_CHUNKS_MAX chunks */
#define BN_CHUNKS_MAX 16  /* an even split over 2 and 4 threads, 6/5/5 chunks over 3 */
#define BN_ITEMS 16       /* work items the chunk kernels aim for: chunks × channel groups */

/* Whether bn_row_chunks may take fewer, equal chunks (TB_BN_EVEN_CHUNKS=0: never; read once, a constant of
 * the process, since the chunks fix the bits). */
static int bn_even_chunks(void)
{
    static _Atomic int on; /* 0 unread, 1 on, 2 off */
    int v = on;
    if (!v) {
        v = tb_env_off("TB_BN_EVEN_CHUNKS") ? 2 : 1;
        on = v;
    }
    return v == 1;
}

/* The most chunks M rows are cut into (K0): one a BN_CHUNK_ROWS rows, up to BN_CHUNKS_MAX. Monotone in M,
 * so buffers sized for a batch hold any smaller one's (bn_chunk_doubles). */
int bn_row_chunks_max(size_t M)
{
    size_t k = (M + BN_CHUNK_ROWS - 1) / BN_CHUNK_ROWS;
    return k < 1 ? 1 : k > BN_CHUNKS_MAX ? BN_CHUNKS_MAX : (int)k;
}

/* The chunks are cut at 16-row units (tb_slice16). Where K0 does not divide the units, the chunks are unequal
 * and their edges fall inside image rows at shapes such as 14×14 at batch 16 (3,136 rows: 16 chunks of 192 or
 * 208), and the kernels that take a BatchNorm's statistics or apply it as they walk a depthwise convolution's
 * rows (dwconv_bn_fusable, dwconv_forward_bn_fusable need chunks on whole rows) refuse the layer, which then
 * runs its BatchNorm as separate passes over the tensor. The largest K in [3/4 K0, K0] that divides the units
 * makes every chunk q units, so each edge falls on a whole row wherever K divides the image rows N·H (14
 * chunks of 224 rows there). At 224×224 every layer's chunks then fall on whole rows at batches 1, 4, 16, 64
 * and 128, where one size at each did not; over square images of 16…600 pixels at batches 1…256, 10,712
 * shapes more and none fewer (BENCHMARKS.md, thirty-third session). M alone still fixes the cut, and where
 * K0 divides the units it is K0's (the same bits as before); not monotone in M. */
int bn_row_chunks(size_t M)
{
    const int k0 = bn_row_chunks_max(M);
    const size_t units = (M + 15) / 16;
    if (units % (size_t)k0 == 0 || !bn_even_chunks()) return k0;
    for (int e = k0 - 1; 4 * e >= 3 * k0; e--)
        if (units % (size_t)e == 0) return e;
    return k0;
}

size_t bn_chunk_doubles(size_t M, int C) { return (size_t)bn_row_chunks_max(M) * 2 * (size_t)C; }

/* Rows [r0,r1) of chunk k of K over M rows, cut at 16-row units like the row slices. */
static void bn_chunk_rows(size_t M, int K, int k, size_t *r0, size_t *r1) { tb_slice16(M, k, K, r0, r1); }

void bn_chunk_range(size_t M, int k, size_t *r0, size_t *r1) { bn_chunk_rows(M, bn_row_chunks(M), k, r0, r1); }

/* s, q (cn) += cs, cq (cn): one chunk's sums added on, the step of the fixed chunk order every BatchNorm
 * reduction takes (walked by the kernel, or from the part buffer after the barrier). */
static inline void bn_add_chunk(double *s, double *q, const double *cs, const double *cq, int cn)
{
    for (int j = 0; j < cn; j++) {
        s[j] += cs[j];
        q[j] += cq[j];
    }
}

/* s, q (cn) = Σx, Σx² of inp (M,C), channels [c0,c0+cn), in the chunked order. */
static void norm_stats_chunked(double *s, double *q, const float *inp, size_t M, int C, int c0, int cn)
{
    const int K = bn_row_chunks(M);
    double cs[NORM_CB], cq[NORM_CB];
    for (int j = 0; j < cn; j++) s[j] = q[j] = 0.0;
    for (int k = 0; k < K; k++) {
        size_t r0, r1;
        bn_chunk_rows(M, K, k, &r0, &r1);
        norm_stats_rows(cs, cq, inp + r0 * (size_t)C, r1 - r0, (size_t)C, c0, cn, 0);
        bn_add_chunk(s, q, cs, cq, cn);
    }
}

/* s, q (cn) = the per-channel sums of channels [c0,c0+cn) from part (K,2,C), added in chunk order. */
static __attribute__((noinline)) void bn_combine_block(double *s, double *q, const double *part, int K, int C,
                                                       int c0, int cn)
{
    for (int j = 0; j < cn; j++) s[j] = q[j] = 0.0;
    for (int k = 0; k < K; k++) {
        const double *p = part + (size_t)k * 2 * (size_t)C + c0;
        bn_add_chunk(s, q, p, p + C, cn);
    }
}

/* From s, q (cn) = Σx, Σx² over M rows of channels [c0,c0+cn): mean (cn) = μ and a (cn) = γ·rstd
 * when non-NULL; for the channels [c0+j0, c0+j1) this thread owns, save (2,C) and the running stats
 * (unless NULL). One routine for every caller keeps μ and rstd the same bits everywhere. */
static __attribute__((noinline)) void bn_finalize_block(float *mean, float *a, float *save, float *run_mean,
                                                        float *run_var, const double *s, const double *q,
                                                        const float *gamma, size_t M, int C, int c0, int cn,
                                                        int j0, int j1, float eps, float momentum)
{
    double inv_m = 1.0 / (double)M, mom = (double)momentum;
    double unbias = M > 1 ? (double)M / (double)(M - 1) : 1.0;
    for (int j = 0; j < cn; j++) {
        int c = c0 + j;
        double mu = s[j] * inv_m;
        double var = q[j] * inv_m - mu * mu;
        if (var < 0.0) var = 0.0;
        const float mf = (float)mu, rf = (float)(1.0 / sqrt(var + (double)eps));
        if (mean) mean[j] = mf;
        if (a) a[j] = gamma[c] * rf;
        if (j < j0 || j >= j1) continue;
        save[c] = mf;
        save[C + c] = rf;
        if (run_mean && run_var) {
            run_mean[c] = (float)(mom * (double)run_mean[c] + (1.0 - mom) * mu);
            run_var[c] = (float)(mom * (double)run_var[c] + (1.0 - mom) * var * unbias);
        }
    }
}

/* a (cn) = γ·rstd for channels [c0,c0+cn) from save (2,C). */
static void bn_scale_block(float *a, const float *save, const float *gamma, int C, int c0, int cn)
{
    for (int j = 0; j < cn; j++) a[j] = gamma[c0 + j] * save[C + c0 + j];
}

/* c2, k0 (cn): per-channel backward constants for channels [c0,c0+cn) from sdz = Σdz and
 * sdzx = Σdz·x̂ (cn) over M_total rows: dx = a·dz + c2·(x-μ) + k0 = γ·rstd·(dz - Σdz/M - x̂·Σdz·x̂/M). */
static __attribute__((noinline)) void bn_bwd_consts_block(float *c2, float *k0, const double *sdz,
                                                          const double *sdzx, const float *save,
                                                          const float *gamma, size_t M_total, int C, int c0,
                                                          int cn)
{
    double inv_m = 1.0 / (double)M_total;
    for (int j = 0; j < cn; j++) {
        double rstd = (double)save[C + c0 + j];
        double k = (double)gamma[c0 + j] * rstd;
        c2[j] = (float)(-k * rstd * sdzx[j] * inv_m);
        k0[j] = (float)(-k * sdz[j] * inv_m);
    }
}

/* Thread ith's channels [cs,ce) ∩ block [c0,c0+cn) as j0..j1 within the block (j0 ≥ j1: none). */
static void bn_owned(int cs, int ce, int c0, int cn, int *j0, int *j1)
{
    *j0 = cs > c0 ? cs - c0 : 0;
    *j1 = ce < c0 + cn ? ce - c0 : cn;
}

void bn_stats_partial(double *sums, const float *inp, size_t M, int C, int ith, int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    double s[NORM_CB], q[NORM_CB];
    for (int c0 = cs; c0 < ce; c0 += NORM_CB) {
        int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
        norm_stats_chunked(s, q, inp, M, C, c0, cn);
        memcpy(sums + c0, s, (size_t)cn * sizeof *s);
        memcpy(sums + C + c0, q, (size_t)cn * sizeof *q);
    }
}

void bn_stats_finalize(float *save, float *run_mean, float *run_var, const double *sums, size_t M_total, int C,
                       float eps, float momentum, int ith, int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    if (ce > cs)
        bn_finalize_block(NULL, NULL, save, run_mean, run_var, sums + cs, sums + C + cs, NULL, M_total, C, cs,
                          ce - cs, 0, ce - cs, eps, momentum);
}

void bn_forward_apply(float *out, const float *inp, const float *save, const float *gamma, const float *beta,
                      size_t M, int C, enum norm_act act, int ith, int nth)
{
    size_t r0, r1;
    tb_slice16(M, ith, nth, &r0, &r1);
    float a[NORM_CB];
    for (int c0 = 0; c0 < C && r1 > r0; c0 += NORM_CB) {
        int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB;
        bn_scale_block(a, save, gamma, C, c0, cn);
        norm_fwd_rows(out, inp, save + c0, a, beta + c0, r0, r1, (size_t)C, c0, cn, act, M, nth);
    }
}

void bn_forward_train(float *out, float *save, float *run_mean, float *run_var, const float *inp,
                      const float *gamma, const float *beta, size_t M, int C, float eps, float momentum,
                      enum norm_act act, int ith, int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    double s[NORM_CB], q[NORM_CB];
    float mean[NORM_CB], a[NORM_CB];
    for (int c0 = cs; c0 < ce; c0 += NORM_CB) {
        int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
        norm_stats_chunked(s, q, inp, M, C, c0, cn);
        bn_finalize_block(mean, a, save, run_mean, run_var, s, q, gamma, M, C, c0, cn, 0, cn, eps, momentum);
        norm_fwd_rows(out, inp, mean, a, beta + c0, 0, M, (size_t)C, c0, cn, act, M, nth);
    }
}

/* Channel groups per chunk for the chunk kernels' work items: enough for about BN_ITEMS items when
 * there are few chunks (few rows, often many channels), in 16-channel units, and one when there are
 * many, so each item reads whole rows. The grouping never changes a sum, only who computes it. */
static int bn_item_groups(int K, int C)
{
    const int want = (BN_ITEMS + K - 1) / K, units = (C + 15) / 16;
    return want < units ? want : units;
}

/* Work item i = k·G + g: rows [r0,r1) of chunk k and channels [c0,c1) of group g. */
static void bn_item(size_t i, size_t M, int C, int K, int G, size_t *r0, size_t *r1, int *c0, int *c1, int *k)
{
    *k = (int)(i / (size_t)G);
    bn_chunk_rows(M, K, *k, r0, r1);
    norm_ch_slice(C, (int)(i % (size_t)G), G, c0, c1);
}

void bn_forward_train_chunks(double *part, const float *inp, size_t M, int C, int ith, int nth)
{
    const int K = bn_row_chunks(M), G = bn_item_groups(K, C);
    size_t i0, i1;
    tb_slice((size_t)K * (size_t)G, ith, nth, &i0, &i1);
    /* Accumulators on the stack (part's lines may be shared with another thread's item), NORM_CB of
     * them: gcc fully unrolls the channel loop for a small array bound, which runs slower. */
    double s[NORM_CB], q[NORM_CB];
    for (size_t i = i0; i < i1; i++) {
        size_t r0, r1;
        int ca, cb, k;
        bn_item(i, M, C, K, G, &r0, &r1, &ca, &cb, &k);
        double *p = part + (size_t)k * 2 * (size_t)C;
        for (int c0 = ca; c0 < cb; c0 += NORM_CB) {
            int cn = cb - c0 < NORM_CB ? cb - c0 : NORM_CB;
            norm_stats_rows(s, q, inp + r0 * (size_t)C, r1 - r0, (size_t)C, c0, cn, 0);
            memcpy(p + c0, s, (size_t)cn * sizeof *s);
            memcpy(p + C + c0, q, (size_t)cn * sizeof *q);
        }
    }
}

/* A finish pass over few row units (16-row units, or samples when pooling: fewer than two a thread) shares
 * each unit among threads by channel slices: a 1×1 layer's 16 rows at batch 16 went to one thread of two,
 * and at batch 128 to 8 threads of 16. The units × g slices (16-channel aligned) are numbered unit-major and
 * thread ith takes slots [*s0,*s1). Elementwise once the chunk sums are combined, so any split gives the
 * same bits. Returns 0 (and nothing set) when there are units enough for whole rows a thread. */
static int bn_few_units(size_t U, int C, int ith, int nth, int *g, size_t *s0, size_t *s1)
{
    if (U >= 2 * (size_t)nth || C < 32) return 0;
    const int cu = (C + 15) / 16, want = (int)((2 * (size_t)nth + U - 1) / U);
    *g = want < cu ? want : cu;
    tb_slice(U * (size_t)*g, ith, nth, s0, s1);
    return 1;
}

/* Slot s of bn_few_units: its unit's rows [r0,r1) (unit = sample of HW rows when HW, else 16 rows) and
 * channels [c0,c1). */
static void bn_slot(size_t s, int g, size_t M, size_t HW, int C, size_t *r0, size_t *r1, int *c0, int *c1)
{
    const size_t u = s / (size_t)g, rows = HW ? HW : 16;
    *r0 = u * rows;
    *r1 = *r0 + rows < M ? *r0 + rows : M;
    norm_ch_slice(C, (int)(s % (size_t)g), g, c0, c1);
}

/* bn_forward_train_finish, or with pool (non-NULL) bn_forward_train_finish_pool: rows split by 16-row
 * units, or by whole samples of HW rows when pooling (bn_few_units: with channel slices too). */
static void bn_finish(float *out, float *pool, size_t HW, float *save, float *run_mean, float *run_var,
                      const float *inp, const float *gamma, const float *beta, const double *part, size_t M, int C,
                      float eps, float momentum, enum norm_act act, int ith, int nth)
{
    const int K = bn_row_chunks(M);
    size_t r0, r1;
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    double s[NORM_CB], q[NORM_CB];
    float mean[NORM_CB], a[NORM_CB];
    size_t s0, s1;
    int g;
    if (bn_few_units(pool ? M / HW : (M + 15) / 16, C, ith, nth, &g, &s0, &s1)) {
        /* The channels this thread owns: their saved statistics and running averages. */
        for (int c0 = cs; c0 < ce; c0 += NORM_CB) {
            const int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
            bn_combine_block(s, q, part, K, C, c0, cn);
            bn_finalize_block(NULL, NULL, save, run_mean, run_var, s, q, gamma, M, C, c0, cn, 0, cn, eps, momentum);
        }
        for (size_t sl = s0; sl < s1 && out; sl++) {
            int ca, cb;
            bn_slot(sl, g, M, pool ? HW : 0, C, &r0, &r1, &ca, &cb);
            for (int c0 = ca; c0 < cb; c0 += NORM_CB) {
                const int cn = cb - c0 < NORM_CB ? cb - c0 : NORM_CB;
                bn_combine_block(s, q, part, K, C, c0, cn);
                bn_finalize_block(mean, a, save, NULL, NULL, s, q, gamma, M, C, c0, cn, 0, 0, eps, momentum);
                if (pool)
                    norm_fwd_rows_pool(out, pool, inp, mean, a, beta + c0, r0 / HW, r1 / HW, HW, (size_t)C, c0, cn, M,
                                       nth);
                else
                    norm_fwd_rows(out, inp, mean, a, beta + c0, r0, r1, (size_t)C, c0, cn, act, M, nth);
            }
        }
        return;
    }
    if (pool) {
        tb_slice(M / HW, ith, nth, &r0, &r1); /* samples: each pool sum on one thread, in row order */
        r0 *= HW, r1 *= HW;
    } else {
        tb_slice16(M, ith, nth, &r0, &r1);
    }
    for (int c0 = 0; c0 < C; c0 += NORM_CB) {
        int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB, j0, j1;
        bn_owned(cs, ce, c0, cn, &j0, &j1);
        if (r1 <= r0 && j1 <= j0) continue;
        /* Every thread adds the same chunk sums itself: the same bits, no second barrier. */
        bn_combine_block(s, q, part, K, C, c0, cn);
        bn_finalize_block(mean, a, save, run_mean, run_var, s, q, gamma, M, C, c0, cn, j0, j1, eps, momentum);
        if (r1 <= r0 || !out) continue;
        if (pool)
            norm_fwd_rows_pool(out, pool, inp, mean, a, beta + c0, r0 / HW, r1 / HW, HW, (size_t)C, c0, cn, M, nth);
        else norm_fwd_rows(out, inp, mean, a, beta + c0, r0, r1, (size_t)C, c0, cn, act, M, nth);
    }
}

void bn_forward_train_finish(float *out, float *save, float *run_mean, float *run_var, const float *inp,
                             const float *gamma, const float *beta, const double *part, size_t M, int C, float eps,
                             float momentum, enum norm_act act, int ith, int nth)
{
    bn_finish(out, NULL, 0, save, run_mean, run_var, inp, gamma, beta, part, M, C, eps, momentum, act, ith, nth);
}

void bn_forward_train_finish_pool(float *out, float *pool, float *save, float *run_mean, float *run_var,
                                  const float *inp, const float *gamma, const float *beta, const double *part,
                                  size_t M, size_t HW, int C, float eps, float momentum, int ith, int nth)
{
    TB_ASSERT(HW > 0 && M % HW == 0);
    bn_finish(out, pool, HW, save, run_mean, run_var, inp, gamma, beta, part, M, C, eps, momentum, NORM_ACT_SILU,
              ith, nth);
}

void bn_forward_eval(float *out, const float *inp, const float *run_mean, const float *run_var,
                     const float *gamma, const float *beta, size_t M, int C, float eps, enum norm_act act,
                     int ith, int nth)
{
    size_t r0, r1;
    tb_slice16(M, ith, nth, &r0, &r1);
    float a[NORM_CB];
    for (int c0 = 0; c0 < C && r1 > r0; c0 += NORM_CB) {
        int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB;
        for (int j = 0; j < cn; j++) {
            float rstd = (float)(1.0 / sqrt((double)run_var[c0 + j] + (double)eps));
            a[j] = gamma[c0 + j] * rstd;
        }
        norm_fwd_rows(out, inp, run_mean + c0, a, beta + c0, r0, r1, (size_t)C, c0, cn, act, M, nth);
    }
}

/* sdz, sdzx (cn) = Σdz, Σdz·x̂ of channels [c0,c0+cn) over rows [0,M) in the chunked order, using
 * a (cn) = γ·rstd; dout ← dz (SiLU). Σdz·(x-μ) is summed and scaled by rstd once, after the chunks. */
static void bn_bwd_sums_chunked(double *sdz, double *sdzx, float *dout, const float *inp, const float *save,
                                const float *a, const float *beta, size_t M, int C, int c0, int cn,
                                enum norm_act act)
{
    const int K = bn_row_chunks(M);
    double cs[NORM_CB], cd[NORM_CB];
    for (int j = 0; j < cn; j++) sdz[j] = sdzx[j] = 0.0;
    for (int k = 0; k < K; k++) {
        size_t r0, r1;
        bn_chunk_rows(M, K, k, &r0, &r1);
        const size_t off = r0 * (size_t)C;
        norm_bwd_sums_rows(cs, cd, dout + off, inp + off, save + c0, a, beta + c0, r1 - r0, (size_t)C, c0, cn, act, 1,
                           NULL);
        bn_add_chunk(sdz, sdzx, cs, cd, cn);
    }
    for (int j = 0; j < cn; j++) sdzx[j] *= (double)save[C + c0 + j];
}

void bn_backward_partial(double *sums, float *dout, const float *inp, const float *save,
                         const float *gamma, const float *beta, size_t M, int C, enum norm_act act, int ith,
                         int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    double sdz[NORM_CB], sdzx[NORM_CB];
    float a[NORM_CB];
    for (int c0 = cs; c0 < ce; c0 += NORM_CB) {
        int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
        bn_scale_block(a, save, gamma, C, c0, cn);
        bn_bwd_sums_chunked(sdz, sdzx, dout, inp, save, a, beta, M, C, c0, cn, act);
        memcpy(sums + c0, sdz, (size_t)cn * sizeof *sdz);
        memcpy(sums + C + c0, sdzx, (size_t)cn * sizeof *sdzx);
    }
}

void bn_backward_params_apply(float *dgamma, float *dbeta, const double *sums, int C, int ith, int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    for (int c = cs; c < ce; c++) {
        dgamma[c] += (float)sums[C + c];
        dbeta[c] += (float)sums[c];
    }
}

void bn_backward_data_apply(float *dinp, const float *dz, const float *inp, const float *save, const float *gamma,
                            const double *sums, size_t M, size_t M_total, int C, int acc, int ith, int nth)
{
    size_t r0, r1;
    tb_slice16(M, ith, nth, &r0, &r1);
    float a[NORM_CB], c2[NORM_CB], k0[NORM_CB];
    for (int c0 = 0; c0 < C && r1 > r0; c0 += NORM_CB) {
        int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB;
        bn_scale_block(a, save, gamma, C, c0, cn);
        bn_bwd_consts_block(c2, k0, sums + c0, sums + C + c0, save, gamma, M_total, C, c0, cn);
        norm_bwd_rows(dinp, dz, inp, save + c0, a, NULL, c2, k0, r0, r1, (size_t)C, c0, cn, NORM_ACT_NONE, acc, M, nth);
    }
}

void bn_backward(float *dinp, float *dgamma, float *dbeta, float *dout, const float *inp, const float *save,
                 const float *gamma, const float *beta, size_t M, int C, enum norm_act act, int acc, int ith,
                 int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    double sdz[NORM_CB], sdzx[NORM_CB];
    float a[NORM_CB], c2[NORM_CB], k0[NORM_CB];
    for (int c0 = cs; c0 < ce; c0 += NORM_CB) {
        int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
        bn_scale_block(a, save, gamma, C, c0, cn);
        bn_bwd_sums_chunked(sdz, sdzx, dout, inp, save, a, beta, M, C, c0, cn, act);
        for (int j = 0; j < cn; j++) {
            dgamma[c0 + j] += (float)sdzx[j];
            dbeta[c0 + j] += (float)sdz[j];
        }
        bn_bwd_consts_block(c2, k0, sdz, sdzx, save, gamma, M, C, c0, cn);
        norm_bwd_rows(dinp, dout, inp, save + c0, a, NULL, c2, k0, 0, M, (size_t)C, c0, cn, NORM_ACT_NONE, acc, M, nth);
    }
}

/* bn_backward_chunks, or with se (non-NULL) bn_backward_chunks_se. */
static void bn_bwd_chunks(double *part, float *dout, const float *inp, const float *save, const float *gamma,
                          const float *beta, size_t M, int C, enum norm_act act, const struct norm_se_in *se,
                          int ith, int nth)
{
    const int K = bn_row_chunks(M), G = bn_item_groups(K, C);
    size_t i0, i1;
    tb_slice((size_t)K * (size_t)G, ith, nth, &i0, &i1);
    double sdz[NORM_CB], sdzd[NORM_CB];
    float a[NORM_CB];
    for (size_t i = i0; i < i1; i++) {
        size_t r0, r1;
        int ca, cb, k;
        bn_item(i, M, C, K, G, &r0, &r1, &ca, &cb, &k);
        double *p = part + (size_t)k * 2 * (size_t)C;
        const size_t off = r0 * (size_t)C;
        for (int c0 = ca; c0 < cb; c0 += NORM_CB) {
            int cn = cb - c0 < NORM_CB ? cb - c0 : NORM_CB;
            bn_scale_block(a, save, gamma, C, c0, cn);
            struct norm_se_in sek;
            if (se) sek = *se, sek.rbase = r0;
            norm_bwd_sums_rows(sdz, sdzd, dout + off, inp + off, save + c0, a, beta + c0, r1 - r0, (size_t)C, c0,
                               cn, act, 1, se ? &sek : NULL);
            memcpy(p + c0, sdz, (size_t)cn * sizeof *sdz);
            memcpy(p + C + c0, sdzd, (size_t)cn * sizeof *sdzd);
        }
    }
}

void bn_stats_rows_add(double *part_k, const float *x, size_t rows, int C)
{
    for (int c0 = 0; c0 < C; c0 += NORM_CB) {
        const int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB;
        norm_stats_rows(part_k + c0, part_k + C + c0, x, rows, (size_t)C, c0, cn, 1);
    }
}

void bn_apply_begin(struct bn_apply *ap, const float *save, const float *gamma, const float *beta, int C)
{
    TB_ASSERT(C > 0 && C <= BN_STREAM_MAX_C && BN_STREAM_MAX_C <= NORM_CB);
    ap->mean = save, ap->beta = beta, ap->C = C;
    bn_scale_block(ap->a, save, gamma, C, 0, C);
}

void bn_apply_rows(const struct bn_apply *ap, float *y, const float *x, size_t rows)
{
    /* bn_finish's rows for its one channel block, with plain stores (kept in cache), and x prefetched
     * NORM_PF_BYTES ahead: the depthwise forward makes its input rows here, from x in memory, between taps
     * that read only cache, and the hardware prefetcher alone left the misses waiting (one thread, batch
     * 16, dwconv_forward_bn_in: 112×112×96 stride 2 6.6–7.4 → 5.1–5.3 ms, 56×56×144 5×5 stride 2 3.2 →
     * 2.5, stride 1 3.8 → 3.5; in the step features.2.0.block.1.0's forward 7.0 → 4.8 ms). */
    norm_fwd_rows_k(y, x, ap->mean, ap->a, ap->beta, 0, rows, (size_t)ap->C, 0, ap->C, 1, 0, NULL, 1);
}

void bn_bwd_stream_begin(struct bn_bwd_stream *st, double *part_k, const float *save, const float *gamma,
                         const float *beta, int C)
{
    bn_apply_begin(&st->ap, save, gamma, beta, C);
    st->part = part_k, st->phase = 0;
    for (int j = 0; j < 2 * C; j++) part_k[j] = 0.0;
}

/* The float partials of the current NORM_FROWS-row block into the chunk's double sums. */
static void bn_bwd_stream_flush(struct bn_bwd_stream *st)
{
    for (int j = 0; j < st->ap.C; j++) {
        st->part[j] += (double)st->fs[j];
        st->part[st->ap.C + j] += (double)st->fq[j];
    }
    st->phase = 0;
}

/* bn_bwd_stream_rows' rows [r, end) of one float block, with y when yo (non-NULL after inlining). */
static inline __attribute__((always_inline)) void bn_bwd_stream_block(struct bn_bwd_stream *st, float *dout,
                                                                      const float *inp, float *yo, size_t r,
                                                                      size_t end)
{
    const int C = st->ap.C;
    const size_t Cs = (size_t)C;
#if NORM_VEC
    /* x, NORM_PF_BYTES ahead, as norm_bwd_sums_rows_k reads it (dout, just written by the depthwise backward,
     * is in cache): the stream read x from memory with the hardware prefetcher alone, and its misses did not
     * overlap the sigmoid (one thread, batch 16, dwconv_backward_data_bn at 112×112×96 stride 2: 12.1–12.8 →
     * 8.3–8.5 ms; in the step, with the weight gradient, 13.0 → 10.0). Past the rows given: the caller's
     * next rows, or lines past the tensor (a prefetch does not fault). From 32 channels (the sums
     * alone lost at fewer than 64): 112×112×32 3.6–4.1 → 3.2–3.3 ms, in the step 4.93 → 4.42. */
    const size_t ahead = C >= 32 ? norm_pf_rows(Cs) : 0;
    for (; r + 2 <= end; r += 2) {
        if (ahead) pf_lines(inp + r * Cs, ahead * Cs * sizeof(float), 2 * Cs * sizeof(float), 0);
        norm_v_bwd_sums_rows(st->fs, st->fq, inp + r * Cs, dout + r * Cs, Cs, C, st->ap.mean, st->ap.a, st->ap.beta, 1, 2,
                             NULL, yo ? yo + r * Cs : NULL);
    }
    if (r < end)
        norm_v_bwd_sums_rows(st->fs, st->fq, inp + r * Cs, dout + r * Cs, Cs, C, st->ap.mean, st->ap.a, st->ap.beta, 1, 1,
                             NULL, yo ? yo + r * Cs : NULL);
#else
    /* Without vectors norm_bwd_sums_rows_k adds every dz into the double sums directly (the float
     * partials stay 0): the same here. */
    for (; r < end; r++)
        for (int j = 0; j < C; j++) {
            const float d = inp[r * Cs + (size_t)j] - st->ap.mean[j], z = d * st->ap.a[j] + st->ap.beta[j];
            const float dz = dout[r * Cs + (size_t)j] * act_silu_gradf(z);
            if (yo) yo[r * Cs + (size_t)j] = act_siluf(z);
            dout[r * Cs + (size_t)j] = dz;
            st->part[j] += (double)dz;
            st->part[C + j] += (double)dz * (double)d;
        }
#endif
}

void bn_bwd_stream_rows(struct bn_bwd_stream *st, float *dout, const float *inp, float *y, size_t rows)
{
    size_t r = 0;
    while (r < rows) {
        if (st->phase == 0)
            for (int j = 0; j < st->ap.C; j++) st->fs[j] = st->fq[j] = 0.0f;
        const size_t room = (size_t)(NORM_FROWS - st->phase), take = rows - r < room ? rows - r : room;
        if (y) bn_bwd_stream_block(st, dout, inp, y, r, r + take);
        else bn_bwd_stream_block(st, dout, inp, NULL, r, r + take);
        r += take;
        st->phase += (int)take;
        if (st->phase == NORM_FROWS) bn_bwd_stream_flush(st);
    }
}

void bn_bwd_stream_end(struct bn_bwd_stream *st)
{
    if (st->phase) bn_bwd_stream_flush(st);
}

void bn_backward_chunks(double *part, float *dout, const float *inp, const float *save, const float *gamma,
                        const float *beta, size_t M, int C, enum norm_act act, int ith, int nth)
{
    bn_bwd_chunks(part, dout, inp, save, gamma, beta, M, C, act, NULL, ith, nth);
}

void bn_backward_chunks_se(double *part, float *dse, const float *scale, const float *dpool, size_t HW,
                           const float *inp, const float *save, const float *gamma, const float *beta, size_t M,
                           int C, int ith, int nth)
{
    TB_ASSERT(HW > 0 && M % HW == 0);
    const struct norm_se_in se = {scale, dpool, HW, 0};
    bn_bwd_chunks(part, dse, inp, save, gamma, beta, M, C, NORM_ACT_SILU, &se, ith, nth);
}

/* Channel block [c0, c0+cn) of BatchNorm's second phase: the chunk sums combined, dgamma and dbeta of
 * the block's channels [j0, j1) added; with consts also a, c2, k0 of the whole block, for the data
 * gradient. The one computation bn_backward_finish and bn_backward_coefs share (so they agree bitwise). */
static void bn_bwd_block(float *a, float *c2, float *k0, float *dgamma, float *dbeta, const float *save,
                         const float *gamma, const double *part, size_t M, int C, int c0, int cn, int j0, int j1,
                         int consts)
{
    double sdz[NORM_CB], sdzx[NORM_CB];
    bn_combine_block(sdz, sdzx, part, bn_row_chunks(M), C, c0, cn);
    for (int j = 0; j < cn; j++) sdzx[j] *= (double)save[C + c0 + j];
    for (int j = j0; j < j1; j++) {
        dgamma[c0 + j] += (float)sdzx[j];
        dbeta[c0 + j] += (float)sdz[j];
    }
    if (!consts) return;
    bn_scale_block(a, save, gamma, C, c0, cn);
    bn_bwd_consts_block(c2, k0, sdz, sdzx, save, gamma, M, C, c0, cn);
}

void bn_backward_finish(float *dinp, float *dgamma, float *dbeta, const float *dz, const float *inp,
                        const float *save, const float *gamma, const double *part, size_t M, int C, int acc,
                        int ith, int nth)
{
    size_t r0, r1;
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    float a[NORM_CB], c2[NORM_CB], k0[NORM_CB];
    size_t s0, s1;
    int g;
    if (bn_few_units((M + 15) / 16, C, ith, nth, &g, &s0, &s1)) {
        for (int c0 = cs; c0 < ce; c0 += NORM_CB) { /* the parameter gradients of the channels it owns */
            const int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
            bn_bwd_block(a, c2, k0, dgamma, dbeta, save, gamma, part, M, C, c0, cn, 0, cn, 0);
        }
        for (size_t sl = s0; sl < s1; sl++) {
            int ca, cb;
            bn_slot(sl, g, M, 0, C, &r0, &r1, &ca, &cb);
            for (int c0 = ca; c0 < cb; c0 += NORM_CB) {
                const int cn = cb - c0 < NORM_CB ? cb - c0 : NORM_CB;
                bn_bwd_block(a, c2, k0, dgamma, dbeta, save, gamma, part, M, C, c0, cn, 0, 0, 1);
                norm_bwd_rows(dinp, dz, inp, save + c0, a, NULL, c2, k0, r0, r1, (size_t)C, c0, cn, NORM_ACT_NONE, acc,
                              M, nth);
            }
        }
        return;
    }
    tb_slice16(M, ith, nth, &r0, &r1);
    for (int c0 = 0; c0 < C; c0 += NORM_CB) {
        int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB, j0, j1;
        bn_owned(cs, ce, c0, cn, &j0, &j1);
        if (r1 <= r0 && j1 <= j0) continue;
        bn_bwd_block(a, c2, k0, dgamma, dbeta, save, gamma, part, M, C, c0, cn, j0, j1, r1 > r0);
        if (r1 > r0)
            norm_bwd_rows(dinp, dz, inp, save + c0, a, NULL, c2, k0, r0, r1, (size_t)C, c0, cn, NORM_ACT_NONE, acc, M,
                          nth);
    }
}

void bn_backward_coefs(float *coef, float *dgamma, float *dbeta, const float *save, const float *gamma,
                       const double *part, size_t M, int C, int ith, int nth)
{
    int cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    float a[NORM_CB], c2[NORM_CB], k0[NORM_CB];
    for (int c0 = 0; c0 < C; c0 += NORM_CB) {
        int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB, j0, j1;
        bn_owned(cs, ce, c0, cn, &j0, &j1);
        if (j1 <= j0) continue;
        bn_bwd_block(a, c2, k0, dgamma, dbeta, save, gamma, part, M, C, c0, cn, j0, j1, 1);
        for (int j = j0; j < j1; j++) coef[c0 + j] = a[j], coef[C + c0 + j] = c2[j], coef[2 * C + c0 + j] = k0[j];
    }
}

void bn_backward_rows(float *dx, const float *dz, const float *inp, const float *save, const float *coef,
                      size_t rows, int C)
{
    for (int c0 = 0; c0 < C; c0 += NORM_CB) {
        const int cn = C - c0 < NORM_CB ? C - c0 : NORM_CB;
        norm_bwd_rows(dx, dz, inp, save + c0, coef + c0, NULL, coef + C + c0, coef + 2 * C + c0, 0, rows, (size_t)C,
                      c0, cn, NORM_ACT_NONE, 0, 0, 1);
    }
}

/* ------------------------------------------------------------------------------------------------
 * GroupNorm. A sample is processed in chunks of whole groups (≤ GN_CB channels, or one group when
 * a group is wider), so the per-group constants of a chunk fit on the stack and the chunk's rows are
 * still in cache for the second pass.
 */

/* Groups per chunk: as many whole groups as fit in GN_CB channels, at least one. */
static int gn_groups_per_chunk(int Cg) { return Cg <= GN_CB ? GN_CB / Cg : 1; }

/* mean, a (cn) for channels [c0,c0+cn) of sample save_n (G,2): μ of the channel's group and γ·rstd. */
static void gn_consts_block(float *mean, float *a, const float *save_n, const float *gamma, int Cg, int c0,
                            int cn)
{
    for (int j = 0; j < cn; j++) {
        int g = (c0 + j) / Cg;
        mean[j] = save_n[2 * g];
        a[j] = gamma[c0 + j] * save_n[2 * g + 1];
    }
}

void gn_forward(float *out, float *save, const float *inp, const float *gamma, const float *beta, int N,
                size_t HW, int C, int G, float eps, enum norm_act act, int ith, int nth)
{
    TB_ASSERT(G > 0 && C % G == 0);
    int Cg = C / G, gpc = gn_groups_per_chunk(Cg);
    size_t n0, n1, sz = HW * (size_t)C;
    tb_slice((size_t)N, ith, nth, &n0, &n1);
    double s[NORM_CB], q[NORM_CB], gs[NORM_CB], gq[NORM_CB];
    float mean[NORM_CB], a[NORM_CB];
    double inv_m = 1.0 / ((double)HW * (double)Cg);
    for (size_t n = n0; n < n1; n++) {
        const float *x = inp + n * sz;
        float *y = out + n * sz, *sv = save + n * (size_t)G * 2;
        for (int g0 = 0; g0 < G; g0 += gpc) {
            int g1 = g0 + gpc < G ? g0 + gpc : G, ce = g1 * Cg;
            for (int g = 0; g < g1 - g0; g++) gs[g] = gq[g] = 0.0;
            for (int c0 = g0 * Cg; c0 < ce; c0 += NORM_CB) {
                int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
                norm_stats_rows(s, q, x, HW, (size_t)C, c0, cn, 0);
                for (int j = 0; j < cn; j++) {
                    gs[(c0 + j) / Cg - g0] += s[j];
                    gq[(c0 + j) / Cg - g0] += q[j];
                }
            }
            for (int g = g0; g < g1; g++) {
                double mu = gs[g - g0] * inv_m, var = gq[g - g0] * inv_m - mu * mu;
                if (var < 0.0) var = 0.0;
                sv[2 * g] = (float)mu;
                sv[2 * g + 1] = (float)(1.0 / sqrt(var + (double)eps));
            }
            for (int c0 = g0 * Cg; c0 < ce; c0 += NORM_CB) {
                int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
                gn_consts_block(mean, a, sv, gamma, Cg, c0, cn);
                norm_fwd_rows(y, x, mean, a, beta + c0, 0, HW, (size_t)C, c0, cn, act, 0, 1);
            }
        }
    }
}

void gn_backward_data(float *dinp, const float *dout, const float *inp, const float *save, const float *gamma,
                      const float *beta, int N, size_t HW, int C, int G, enum norm_act act, int acc, int ith,
                      int nth)
{
    TB_ASSERT(G > 0 && C % G == 0);
    int Cg = C / G, gpc = gn_groups_per_chunk(Cg);
    size_t n0, n1, sz = HW * (size_t)C;
    tb_slice((size_t)N, ith, nth, &n0, &n1);
    double sdz[NORM_CB], sdzd[NORM_CB], g1s[NORM_CB], g2s[NORM_CB];
    float mean[NORM_CB], a[NORM_CB], c2[NORM_CB], k0[NORM_CB];
    double inv_m = 1.0 / ((double)HW * (double)Cg);
    for (size_t n = n0; n < n1; n++) {
        const float *x = inp + n * sz, *dy = dout + n * sz, *sv = save + n * (size_t)G * 2;
        float *dx = dinp + n * sz;
        for (int g0 = 0; g0 < G; g0 += gpc) {
            int g1 = g0 + gpc < G ? g0 + gpc : G, ce = g1 * Cg;
            /* Pass 1: per group S1 = Σ dx̂ and Σ dx̂·(x-μ), with dx̂ = γ·dz. */
            for (int g = 0; g < g1 - g0; g++) g1s[g] = g2s[g] = 0.0;
            for (int c0 = g0 * Cg; c0 < ce; c0 += NORM_CB) {
                int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
                gn_consts_block(mean, a, sv, gamma, Cg, c0, cn);
                norm_bwd_sums_rows(sdz, sdzd, (float *)dy, x, mean, a, beta + c0, HW, (size_t)C, c0, cn, act, 0, NULL);
                for (int j = 0; j < cn; j++) {
                    g1s[(c0 + j) / Cg - g0] += (double)gamma[c0 + j] * sdz[j];
                    g2s[(c0 + j) / Cg - g0] += (double)gamma[c0 + j] * sdzd[j];
                }
            }
            /* dx = rstd·(dx̂ - S1/M - x̂·S2/M), S2 = Σ dx̂·x̂ = rstd·Σ dx̂·(x-μ). Store per group. */
            for (int g = g0; g < g1; g++) {
                double rstd = (double)sv[2 * g + 1];
                g2s[g - g0] = -rstd * rstd * rstd * g2s[g - g0] * inv_m;
                g1s[g - g0] = -rstd * g1s[g - g0] * inv_m;
            }
            /* Pass 2, over the chunk just read (still in cache for typical H·W). */
            for (int c0 = g0 * Cg; c0 < ce; c0 += NORM_CB) {
                int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
                gn_consts_block(mean, a, sv, gamma, Cg, c0, cn);
                for (int j = 0; j < cn; j++) {
                    c2[j] = (float)g2s[(c0 + j) / Cg - g0];
                    k0[j] = (float)g1s[(c0 + j) / Cg - g0];
                }
                norm_bwd_rows(dx, dy, x, mean, a, beta + c0, c2, k0, 0, HW, (size_t)C, c0, cn, act, acc, 0, 1);
            }
        }
    }
}

void gn_backward_params(float *dgamma, float *dbeta, const float *dout, const float *inp, const float *save,
                        const float *gamma, const float *beta, int N, size_t HW, int C, int G, enum norm_act act,
                        int ith, int nth)
{
    TB_ASSERT(G > 0 && C % G == 0);
    int Cg = C / G, cs, ce;
    norm_ch_slice(C, ith, nth, &cs, &ce);
    size_t sz = HW * (size_t)C;
    double acc1[NORM_CB], acc2[NORM_CB], sdz[NORM_CB], sdzd[NORM_CB];
    float mean[NORM_CB], a[NORM_CB];
    for (int c0 = cs; c0 < ce; c0 += NORM_CB) {
        int cn = ce - c0 < NORM_CB ? ce - c0 : NORM_CB;
        for (int j = 0; j < cn; j++) acc1[j] = acc2[j] = 0.0;
        /* Σ over samples in order of per-sample sums: x̂ = (x-μ)·rstd with a per-sample rstd. */
        for (int n = 0; n < N; n++) {
            const float *sv = save + (size_t)n * (size_t)G * 2;
            gn_consts_block(mean, a, sv, gamma, Cg, c0, cn);
            norm_bwd_sums_rows(sdz, sdzd, (float *)dout + (size_t)n * sz, inp + (size_t)n * sz, mean, a, beta + c0,
                               HW, (size_t)C, c0, cn, act, 0, NULL);
            for (int j = 0; j < cn; j++) {
                acc1[j] += sdz[j];
                acc2[j] += sdzd[j] * (double)sv[2 * ((c0 + j) / Cg) + 1];
            }
        }
        for (int j = 0; j < cn; j++) {
            dgamma[c0 + j] += (float)acc2[j];
            dbeta[c0 + j] += (float)acc1[j];
        }
    }
}

/* ------------------------------------------------------------------------------------------------
 * Double references: the textbook formulas, two-pass variance, no blocking.
 */

static double ref_act(double z, enum norm_act act) { return act == NORM_ACT_SILU ? z / (1.0 + exp(-z)) : z; }

static double ref_act_grad(double z, enum norm_act act)
{
    if (act != NORM_ACT_SILU) return 1.0;
    double s = 1.0 / (1.0 + exp(-z));
    return s * (1.0 + z * (1.0 - s));
}

void bn_forward_train_ref(double *out, double *save, double *run_mean, double *run_var, const double *inp,
                          const double *gamma, const double *beta, size_t M, int C, double eps, double momentum,
                          enum norm_act act)
{
    for (int c = 0; c < C; c++) {
        double mu = 0.0, var = 0.0;
        for (size_t r = 0; r < M; r++) mu += inp[r * C + c];
        mu /= (double)M;
        for (size_t r = 0; r < M; r++) var += (inp[r * C + c] - mu) * (inp[r * C + c] - mu);
        double var_unbiased = M > 1 ? var / (double)(M - 1) : var / (double)M;
        var /= (double)M;
        double rstd = 1.0 / sqrt(var + eps);
        save[c] = mu;
        save[C + c] = rstd;
        if (run_mean && run_var) {
            run_mean[c] = momentum * run_mean[c] + (1.0 - momentum) * mu;
            run_var[c] = momentum * run_var[c] + (1.0 - momentum) * var_unbiased;
        }
        for (size_t r = 0; r < M; r++)
            out[r * C + c] = ref_act(gamma[c] * (inp[r * C + c] - mu) * rstd + beta[c], act);
    }
}

void bn_forward_eval_ref(double *out, const double *inp, const double *run_mean, const double *run_var,
                         const double *gamma, const double *beta, size_t M, int C, double eps, enum norm_act act)
{
    for (size_t r = 0; r < M; r++)
        for (int c = 0; c < C; c++)
            out[r * C + c] =
                ref_act(gamma[c] * (inp[r * C + c] - run_mean[c]) / sqrt(run_var[c] + eps) + beta[c], act);
}

void bn_backward_ref(double *dinp, double *dgamma, double *dbeta, const double *dout, const double *inp,
                     const double *save, const double *gamma, const double *beta, size_t M, int C,
                     enum norm_act act)
{
    for (int c = 0; c < C; c++) {
        double mu = save[c], rstd = save[C + c], sdz = 0.0, sdzxh = 0.0;
        for (size_t r = 0; r < M; r++) {
            double xh = (inp[r * C + c] - mu) * rstd;
            double dz = dout[r * C + c] * ref_act_grad(gamma[c] * xh + beta[c], act);
            sdz += dz;
            sdzxh += dz * xh;
        }
        dgamma[c] += sdzxh;
        dbeta[c] += sdz;
        for (size_t r = 0; r < M; r++) {
            double xh = (inp[r * C + c] - mu) * rstd;
            double dz = dout[r * C + c] * ref_act_grad(gamma[c] * xh + beta[c], act);
            dinp[r * C + c] += gamma[c] * rstd * (dz - sdz / (double)M - xh * sdzxh / (double)M);
        }
    }
}

void gn_forward_ref(double *out, double *save, const double *inp, const double *gamma, const double *beta, int N,
                    size_t HW, int C, int G, double eps, enum norm_act act)
{
    int Cg = C / G;
    double m = (double)HW * (double)Cg;
    for (int n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * HW * (size_t)C;
        double *y = out + (size_t)n * HW * (size_t)C;
        for (int g = 0; g < G; g++) {
            double mu = 0.0, var = 0.0;
            for (size_t p = 0; p < HW; p++)
                for (int c = g * Cg; c < (g + 1) * Cg; c++) mu += x[p * C + c];
            mu /= m;
            for (size_t p = 0; p < HW; p++)
                for (int c = g * Cg; c < (g + 1) * Cg; c++) var += (x[p * C + c] - mu) * (x[p * C + c] - mu);
            double rstd = 1.0 / sqrt(var / m + eps);
            save[((size_t)n * G + g) * 2] = mu;
            save[((size_t)n * G + g) * 2 + 1] = rstd;
            for (size_t p = 0; p < HW; p++)
                for (int c = g * Cg; c < (g + 1) * Cg; c++)
                    y[p * C + c] = ref_act(gamma[c] * (x[p * C + c] - mu) * rstd + beta[c], act);
        }
    }
}

void gn_backward_ref(double *dinp, double *dgamma, double *dbeta, const double *dout, const double *inp,
                     const double *save, const double *gamma, const double *beta, int N, size_t HW, int C, int G,
                     enum norm_act act)
{
    int Cg = C / G;
    double m = (double)HW * (double)Cg;
    for (int n = 0; n < N; n++) {
        size_t base = (size_t)n * HW * (size_t)C;
        for (int g = 0; g < G; g++) {
            double mu = save[((size_t)n * G + g) * 2], rstd = save[((size_t)n * G + g) * 2 + 1];
            double s1 = 0.0, s2 = 0.0; /* Σ dx̂, Σ dx̂·x̂ */
            for (size_t p = 0; p < HW; p++)
                for (int c = g * Cg; c < (g + 1) * Cg; c++) {
                    size_t i = base + p * C + c;
                    double xh = (inp[i] - mu) * rstd;
                    double dz = dout[i] * ref_act_grad(gamma[c] * xh + beta[c], act);
                    s1 += gamma[c] * dz;
                    s2 += gamma[c] * dz * xh;
                    dgamma[c] += dz * xh;
                    dbeta[c] += dz;
                }
            for (size_t p = 0; p < HW; p++)
                for (int c = g * Cg; c < (g + 1) * Cg; c++) {
                    size_t i = base + p * C + c;
                    double xh = (inp[i] - mu) * rstd;
                    double dz = dout[i] * ref_act_grad(gamma[c] * xh + beta[c], act);
                    dinp[i] += rstd * (gamma[c] * dz - s1 / m - xh * s2 / m);
                }
        }
    }
}
