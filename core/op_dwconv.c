/* op_dwconv.c — depthwise convolution kernels: SIMD specialisations, portable path, references.
 *
 * Vectorised over channels (NHWC puts them contiguous): one vector holds VL channels of one pixel
 * (16 with AVX-512, 8 with AVX2+FMA, 16 emulated lanes elsewhere); the last channel block of a pixel
 * uses masked loads/stores, so any C works, and full blocks use plain ones (AVX2 masked stores are
 * slow). Specialised kernels (k ∈ {3,5}, stride ∈ {1,2}, pad (k-1)/2) hold the k² weight vectors of a
 * channel block while they sweep an output row, and split each row into left border / interior /
 * right border so the interior has no bounds checks; rows outside the image use a clamped row pointer
 * with zeroed weights instead of a branch. Reductions never cross vector lanes and their order depends
 * only on the element's position, never on the thread slice: every nth gives the same bits.
 */
#include "op_dwconv.h"
#include "op_norm.h"

#include "layout.h"
#include "prefetch.h"
#include "status.h"

#include <stdint.h>
#include <string.h>

#define DW_INLINE static inline __attribute__((always_inline))
/* A software prefetch of one cache line for reading (rw 0) or writing (rw 1); a no-op without the builtin. */
#if defined(__GNUC__)
#define DW_PREFETCH(p, rw) __builtin_prefetch((p), (rw), 3)
#else
#define DW_PREFETCH(p, rw) ((void)(p))
#endif
/* Full unrolling of the k-loops (k ≤ 5) lets the weight and accumulator arrays live in registers. */
#define DW_UNROLL _Pragma("GCC unroll 5")

/* ---------------------------------------------------------------------------------------------
 * Vector layer: VL float lanes, masks for channel tails
 * ------------------------------------------------------------------------------------------- */
#include "simd_vec.h"

/* floor(a / b) for b > 0 and any sign of a. */
static inline int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Thread's channel range for backward_params: whole VL-channel blocks (whole cache lines per pixel)
 * unless there are fewer blocks than threads. Depends only on (C, ith, nth). */
static void channel_slice(int C, int ith, int nth, int *lo, int *hi)
{
    size_t a, b;
    const int nb = (C + VL - 1) / VL;
    if (nb >= nth) {
        tb_slice((size_t)nb, ith, nth, &a, &b);
        *lo = (int)a * VL;
        *hi = (int)b * VL < C ? (int)b * VL : C;
    } else {
        tb_slice((size_t)C, ith, nth, &a, &b);
        *lo = (int)a;
        *hi = (int)b;
    }
}

int dwconv_shape_init(struct conv_shape *s, int N, int H, int W, int C, int K, int stride)
{
    return conv_shape_init(s, N, H, W, C, C, K, K, stride, C);
}

int dwconv_shape_valid(const struct conv_shape *s)
{
    if (s->N <= 0 || s->H <= 0 || s->W <= 0 || s->C <= 0 || s->KH <= 0 || s->KW <= 0 || s->stride <= 0 ||
        s->pad < 0)
        return 0;
    if (s->groups != s->C || s->OC != s->C) return 0;
    return s->OH == (s->H + 2 * s->pad - s->KH) / s->stride + 1 &&
           s->OW == (s->W + 2 * s->pad - s->KW) / s->stride + 1 && s->OH > 0 && s->OW > 0;
}

int dwconv_specialised(const struct conv_shape *s)
{
    const int K = s->KH;
    return s->KW == K && (K == 3 || K == 5) && (s->stride == 1 || s->stride == 2) && s->pad == (K - 1) / 2;
}

double dwconv_flops(const struct conv_shape *s)
{
    return 2.0 * s->N * s->OH * s->OW * (double)s->C * s->KH * s->KW;
}

/* ---------------------------------------------------------------------------------------------
 * Specialisations: K ∈ {3,5}, S ∈ {1,2}, P = (K-1)/2 (compile-time constants after inlining)
 * ------------------------------------------------------------------------------------------- */

/* Output columns [*lo, *hi) of OW whose K taps at stride S, pad (K-1)/2, all fall inside [0, IW). */
static inline void interior_cols(int K, int S, int IW, int OW, int *lo, int *hi)
{
    const int P = (K - 1) / 2;
    *lo = (P + S - 1) / S < OW ? (P + S - 1) / S : OW;
    *hi = floor_div(IW - 1 - P, S) + 1 < OW ? floor_div(IW - 1 - P, S) + 1 : OW;
    if (*hi < *lo) *hi = *lo;
}

/* Geometry of one correlation pass: `in` (N,IH,IW,C) read, `out` (N,OH,OW,C) written. */
struct dw_geom {
    int N, IH, IW, OH, OW, C;
};

/* Weight vector of tap (ky, kx), or of the 180°-rotated tap for backward-data. */
#define DW_TAP(ky, kx) (BWD ? (K - 1 - (ky)) * K + (K - 1 - (kx)) : (ky) * K + (kx))

/* RB consecutive output pixels from ox, channels [c0, c0+VL), the first nout of them stored:
 * acc[o] = b + Σ_{ky∈[ky0,ky1)} Σ_kx in[ky][(ox+o)·S−P+kx]·w (BWD: out += Σ in·rot180(w)).
 * CHECK (runs that reach a border) skips taps whose column is outside [0, IW). Each input column of a kernel
 * row is loaded once and fed to every output that uses it, so RB = 8 runs 8 independent FMA chains
 * with K weight vectors + 8 accumulators in registers (fits AVX2's 16). Per output the sum runs over
 * (ky, kx) in lexicographic order whatever RB, so block boundaries never change the bits. */
DW_INLINE void corr_run(float *orow, const float *const *rows, int ky0, int ky1, const float *w, const float *b,
                        int ox, int nout, int c0, int C, int IW, const int K, const int S, const int BWD, const int RB,
                        const int CHECK, const int FULL, int acc_out)
{
    const int P = (K - 1) / 2;
    const vmask m = vmask_n(C - c0);
    vf acc[8];
    const vf bias = (!BWD && b) ? VLD(m, b + c0) : VZERO();
    for (int o = 0; o < RB; o++) acc[o] = bias;
    for (int ky = ky0; ky < ky1; ky++) {
        vf wk[5];
        DW_UNROLL for (int kx = 0; kx < K; kx++) wk[kx] = VLD(m, w + (size_t)DW_TAP(ky, kx) * C + c0);
        const float *rp = rows[ky] + c0;
        _Pragma("GCC unroll 24") for (int j = 0; j < (RB - 1) * S + K; j++) {
            const int ix = ox * S - P + j; /* input column */
            if (CHECK && (ix < 0 || ix >= IW)) continue;
            const vf x = VLD(m, rp + (ptrdiff_t)ix * C);
            DW_UNROLL for (int kx = 0; kx < K; kx++) {
                const int d = j - kx;
                if (d >= 0 && d % S == 0 && d / S < RB) acc[d / S] = VFMA(x, wk[kx], acc[d / S]);
            }
        }
    }
    /* Unrolled with a test per pixel (not a loop bound of nout): acc stays in registers. */
    _Pragma("GCC unroll 8") for (int o = 0; o < RB; o++) {
        if (o >= nout) break;
        float *op = orow + (size_t)(ox + o) * C + c0;
        if (BWD && acc_out) VST(op, m, VADD(VLD(m, op), acc[o]));
        else VST(op, m, acc[o]);
    }
}

/* Two prefetch streams spread over a row's channel-block iterations (the next output row's new input
 * rows and its output pixels, or a backward pass's equivalents), a few lines per iteration, so the
 * misses overlap the arithmetic instead of queueing behind a burst (the miss buffers are few: a burst of a
 * whole 8-pixel block's lines stalled the loads behind it). Batch 16, one thread, against the burst:
 * 56×56×144 forward 7.6–8.2 → 4.5–4.7 ms, 112×112×96 stride 2 10.5–11.4 → 7.4–7.8 ms. Offsets are
 * clamped to the tensors. */
struct dw_pf {
    struct pf_span in, out; /* read, written */
    struct pf_span in2;     /* read: a second input (empty but where a caller's ext sets it) */
};

/* The streams [i, i + ni) of ib (size isz) and [o, o + no) of ob (size osz), clamped to the tensors,
 * over nit iterations. */
static inline struct dw_pf pf_make(const void *ib, size_t i, size_t ni, size_t isz, const void *ob, size_t o,
                                   size_t no, size_t osz, int nit)
{
    const char *ic = ib, *oc = ob;
    const size_t it = nit > 0 ? (size_t)nit : 1;
    return (struct dw_pf){pf_span_of(ic + (i < isz ? i : isz), ic + (i + ni < isz ? i + ni : isz), it),
                          pf_span_of(oc + (o < osz ? o : osz), oc + (o + no < osz ? o + no : osz), it),
                          pf_span_of(ic, ic, 1)};
}

DW_INLINE void pf_step(struct dw_pf *pf)
{
    pf_span_step(&pf->in, 0);
    pf_span_step(&pf->out, 1);
    pf_span_step(&pf->in2, 0);
}

/* All channel blocks of a run of RB pixels from ox: pixel-major, so memory is walked contiguously. */
DW_INLINE void corr_run_all(float *orow, const float *const *rows, int ky0, int ky1, const float *w, const float *b,
                            int ox, int nout, int C, int IW, const int K, const int S, const int BWD, const int RB,
                            const int CHECK, int acc_out, struct dw_pf *pf)
{
    int c0 = 0;
    for (; c0 + VL <= C; c0 += VL) {
        pf_step(pf);
        corr_run(orow, rows, ky0, ky1, w, b, ox, nout, c0, C, IW, K, S, BWD, RB, CHECK, 1, acc_out);
    }
    if (c0 < C) {
        pf_step(pf);
        corr_run(orow, rows, ky0, ky1, w, b, ox, nout, c0, C, IW, K, S, BWD, RB, CHECK, 0, acc_out);
    }
}
#undef DW_TAP

/* out rows [r0,r1) of (N·OH) = Σ_taps in·w (+ b), or with BWD: out += Σ_taps in·rot180(w) (= when acc_out
 * is 0; every output pixel is written either way).
 * BWD (stride 1 only) is backward-data: dinp = correlation of dout with the kernel rotated by 180°,
 * same symmetric pad. Kernel rows outside the image are skipped (ky range), columns by the borders. */
DW_INLINE void corr_rows(float *out, const float *in, const float *w, const float *b, const struct dw_geom *g,
                         size_t r0, size_t r1, const int K, const int S, const int BWD, int acc_out, const int RING,
                         size_t ring_n, const float *pf_in, struct dw_pf *ext)
{
    const int P = (K - 1) / 2, C = g->C, IH = g->IH, IW = g->IW, OH = g->OH, OW = g->OW;
    int ox_lo, ox_hi;
    interior_cols(K, S, IW, OW, &ox_lo, &ox_hi);
    const int n8 = (ox_hi - ox_lo) / 8, rest = (ox_hi - ox_lo) % 8;
    const int bordered8 = S == 1 || OW < 8; /* which row schedule (below) */
    const int runs = bordered8 ? (OW + 7) / 8 : ox_lo + n8 + (rest >= 4) + rest % 4 + (OW - ox_hi);
    const int nit = runs * ((C + VL - 1) / VL);
    const size_t in_row = (size_t)IW * C * sizeof(float), out_row = (size_t)OW * C * sizeof(float);
    const size_t in_size = (size_t)g->N * IH * in_row, out_size = (size_t)g->N * OH * out_row;
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)OH), oy = (int)(r % (size_t)OH);
        const int ky0 = P - oy * S > 0 ? P - oy * S : 0, ky1 = IH + P - oy * S < K ? IH + P - oy * S : K;
        const float *rows[5];
        DW_UNROLL for (int ky = 0; ky < K; ky++) {
            const int iy = oy * S - P + ky;
            const size_t gi = (size_t)n * IH + (size_t)(iy >= 0 && iy < IH ? iy : 0);
            rows[ky] = in + (RING ? gi % ring_n : gi) * (size_t)IW * C;
        }
        float *orow = out + r * (size_t)OW * C;
        /* The next output row reads S new input rows, adjacent in memory to this row's newest ones (in
         * the next sample too), and writes the next output row. */
        const int inew = oy * S - P + K; /* first input row the next output row is the first to read */
        const size_t oi = ((size_t)n * IH + (size_t)(inew > 0 ? inew : 0)) * in_row, oo = (r + 1) * out_row;
        /* Not the ring's source rows at stride 2: two rows of x an output row, their lines issued within
         * this row's taps alone (a quarter of the pixels), outran the miss buffers; the hardware prefetcher
         * streams them while bn_apply_rows makes the rows. One thread, batch 16, dwconv_forward_bn_in,
         * alternating: 112×112×96 7.5–8.1 → 6.5–6.7 ms, 56×56×144 2.6–2.9 → 2.5–2.6. At stride 1, and
         * reading a stored input, the prefetch still wins (56×56×144 s1 ring 3.4 vs 3.7 without; 112×112×96
         * s2 stored 3.7 vs 5.5). Nor where bn_apply_rows prefetches x itself (BN_APPLY_PF_MIN_C channels
         * or more): both streams at once lost (56×56×144 stride 1 2.9 without this one against 3.2 with;
         * 28×28×240 1.9 against 2.0), while at 32 channels this one is the only prefetch (2.8 against 3.9). */
        const size_t in_pf = RING && (BWD || S == 2 || C >= BN_APPLY_PF_MIN_C) ? 0 : (size_t)S * in_row;
        struct dw_pf pf = pf_make(pf_in, in_pf ? oi : 0, in_pf, in_size, out, oo, out_row, out_size, nit);
        if (ext) pf.in = ext->in, pf.in2 = ext->in2; /* the caller's read streams, carried over the rows */
        if (bordered8) {
            /* Runs of 8 output pixels from column 0; a run that reaches a border (or past OW: the last
             * may be partial, its phantom pixels summed and dropped) checks its input columns. Bordered
             * pixels one at a time are a single FMA chain each, with K² weight loads: on 7×7 and 14×14
             * layers, where 4 of 7 or 14 pixels are border, the forward ran at 41–61 GFLOP/s that way
             * (now 116–135). On wide stride-2 rows this schedule measured 10–15 % slower than the one
             * below (bordered run code with more columns than registers for their offsets). */
            for (int ox = 0; ox < OW; ox += 8) {
                if (ox >= ox_lo && ox + 8 <= ox_hi)
                    corr_run_all(orow, rows, ky0, ky1, w, b, ox, 8, C, IW, K, S, BWD, 8, 0, acc_out, &pf);
                else
                    corr_run_all(orow, rows, ky0, ky1, w, b, ox, OW - ox, C, IW, K, S, BWD, 8, 1, acc_out, &pf);
            }
            if (ext) ext->in = pf.in, ext->in2 = pf.in2;
            continue;
        }
        /* Border pixels one at a time, interior runs of 8, 4, then 1. */
        int ox = 0;
        for (; ox < ox_lo; ox++) corr_run_all(orow, rows, ky0, ky1, w, b, ox, 1, C, IW, K, S, BWD, 1, 1, acc_out, &pf);
        for (; ox + 8 <= ox_hi; ox += 8)
            corr_run_all(orow, rows, ky0, ky1, w, b, ox, 8, C, IW, K, S, BWD, 8, 0, acc_out, &pf);
        if (ox + 4 <= ox_hi) {
            corr_run_all(orow, rows, ky0, ky1, w, b, ox, 4, C, IW, K, S, BWD, 4, 0, acc_out, &pf);
            ox += 4;
        }
        for (; ox < ox_hi; ox++) corr_run_all(orow, rows, ky0, ky1, w, b, ox, 1, C, IW, K, S, BWD, 1, 0, acc_out, &pf);
        for (; ox < OW; ox++) corr_run_all(orow, rows, ky0, ky1, w, b, ox, 1, C, IW, K, S, BWD, 1, 1, acc_out, &pf);
        if (ext) ext->in = pf.in, ext->in2 = pf.in2;
    }
}

static void fwd_k3s1(float *o, const float *i, const float *w, const float *b, const struct dw_geom *g,
                     size_t r0, size_t r1)
{
    corr_rows(o, i, w, b, g, r0, r1, 3, 1, 0, 0, 0, 0, i, NULL);
}
static void fwd_k3s2(float *o, const float *i, const float *w, const float *b, const struct dw_geom *g,
                     size_t r0, size_t r1)
{
    corr_rows(o, i, w, b, g, r0, r1, 3, 2, 0, 0, 0, 0, i, NULL);
}
static void fwd_k5s1(float *o, const float *i, const float *w, const float *b, const struct dw_geom *g,
                     size_t r0, size_t r1)
{
    corr_rows(o, i, w, b, g, r0, r1, 5, 1, 0, 0, 0, 0, i, NULL);
}
static void fwd_k5s2(float *o, const float *i, const float *w, const float *b, const struct dw_geom *g,
                     size_t r0, size_t r1)
{
    corr_rows(o, i, w, b, g, r0, r1, 5, 2, 0, 0, 0, 0, i, NULL);
}
/* The forward reading its input from a ring of K rows (row g of the N·IH at slot g mod K), prefetching
 * the rows of x the ring's next rows are made from. */
static void fwd_ring_rows(float *o, const float *ring, const float *w, const float *b, const struct dw_geom *g,
                          size_t r0, size_t r1, int K, int S, const float *x)
{
    if (K == 3 && S == 1) corr_rows(o, ring, w, b, g, r0, r1, 3, 1, 0, 0, 1, (size_t)K, x, NULL);
    else if (K == 3) corr_rows(o, ring, w, b, g, r0, r1, 3, 2, 0, 0, 1, (size_t)K, x, NULL);
    else if (S == 1) corr_rows(o, ring, w, b, g, r0, r1, 5, 1, 0, 0, 1, (size_t)K, x, NULL);
    else corr_rows(o, ring, w, b, g, r0, r1, 5, 2, 0, 0, 1, (size_t)K, x, NULL);
}
static void bwd_k3s1(float *o, const float *i, const float *w, const struct dw_geom *g, size_t r0, size_t r1,
                     int acc)
{
    corr_rows(o, i, w, NULL, g, r0, r1, 3, 1, 1, acc, 0, 0, i, NULL);
}
static void bwd_k5s1(float *o, const float *i, const float *w, const struct dw_geom *g, size_t r0, size_t r1,
                     int acc)
{
    corr_rows(o, i, w, NULL, g, r0, r1, 5, 1, 1, acc, 0, 0, i, NULL);
}
/* Stride-1 backward-data (overwriting) reading dout from a ring of ring_n rows (row g of the N·OH at slot
 * g mod ring_n), which is in cache: no prefetch of it. */
static void bwd_s1_ring(float *o, const float *ring, const float *w, const struct dw_geom *g, size_t r0, size_t r1,
                        int K, size_t ring_n, struct dw_pf *ext)
{
    if (K == 3) corr_rows(o, ring, w, NULL, g, r0, r1, 3, 1, 1, 0, 1, ring_n, ring, ext);
    else corr_rows(o, ring, w, NULL, g, r0, r1, 5, 1, 1, 0, 1, ring_n, ring, ext);
}

/* Stride-2 backward-data. dinp[iy][ix] += Σ dout[oy][ox]·w[ky][kx] over the nk valid (ky, oy) pairs of
 * the row and the kx with ox = (ix+P−kx)/2 integral and in range. Interior columns go in pairs
 * ix = 2t+e (e = 0, 1) whose tap sets (kx ≡ e+P mod 2) are compile-time constants, ox = t + (e+P−kx)/2.
 * A run covers RT pairs: each dout column is loaded once per kernel row and fed to every pixel of the
 * run that uses it. */
DW_INLINE void bwd_s2_run(float *drow, const float *const *grows, const int *kys, int nk, const float *w, int t0,
                          int c0, int C, const int K, const int RT, const int FULL, int acc_out)
{
    const int P = (K - 1) / 2;
    const vmask m = vmask_n(C - c0);
    vf acc[8];
    for (int q = 0; q < 2 * RT; q++) acc[q] = VZERO();
    for (int i = 0; i < nk; i++) {
        vf wk[5];
        DW_UNROLL for (int kx = 0; kx < K; kx++) wk[kx] = VLD(m, w + (size_t)(kys[i] * K + kx) * C + c0);
        const float *gp = grows[i] + (size_t)t0 * C + c0;
        _Pragma("GCC unroll 16") for (int j = -K; j < RT + K; j++) {
            int used = 0;
            for (int e = 0; e < 2; e++)
                for (int kx = (e + P) & 1; kx < K; kx += 2) {
                    const int t = j - (e + P - kx) / 2;
                    used |= t >= 0 && t < RT;
                }
            if (!used) continue;
            const vf x = VLD(m, gp + (ptrdiff_t)j * C);
            DW_UNROLL for (int e = 0; e < 2; e++)
                DW_UNROLL for (int kx = (e + P) & 1; kx < K; kx += 2) {
                    const int t = j - (e + P - kx) / 2;
                    if (t >= 0 && t < RT) acc[2 * t + e] = VFMA(x, wk[kx], acc[2 * t + e]);
                }
        }
    }
    for (int q = 0; q < 2 * RT; q++) {
        float *dp = drow + (size_t)(2 * t0 + q) * C + c0;
        VST(dp, m, acc_out ? VADD(VLD(m, dp), acc[q]) : acc[q]);
    }
}

/* One border dinp pixel ix, channel block c0: per-tap checks. */
DW_INLINE void bwd_s2_px(float *drow, const float *const *grows, const int *kys, int nk, const float *w, int ix,
                         int c0, int C, int OW, const int K, const int FULL, int acc_out)
{
    const int P = (K - 1) / 2;
    const vmask m = vmask_n(C - c0);
    vf acc = VZERO();
    for (int i = 0; i < nk; i++)
        DW_UNROLL for (int kx = 0; kx < K; kx++) {
            const int u = ix + P - kx;
            if (u < 0 || (u & 1) || u / 2 >= OW) continue;
            acc = VFMA(VLD(m, grows[i] + (size_t)(u / 2) * C + c0), VLD(m, w + (size_t)(kys[i] * K + kx) * C + c0),
                       acc);
        }
    float *dp = drow + (size_t)ix * C + c0;
    VST(dp, m, acc_out ? VADD(VLD(m, dp), acc) : acc);
}

/* call_full for every whole channel block, call_tail for a partial last one, each after a pf_step. */
#define DW_CBLOCKS(pf, call_full, call_tail)                        \
    do {                                                            \
        int c0 = 0;                                                 \
        for (; c0 + VL <= C; c0 += VL) pf_step(pf), call_full;      \
        if (c0 < C) pf_step(pf), call_tail;                         \
    } while (0)

DW_INLINE void bwd_s2_rows(float *dinp, const float *dout, const float *w, const struct conv_shape *s, size_t r0,
                           size_t r1, const int K, int acc, size_t ring_n, struct dw_pf *ext)
{
    const int P = (K - 1) / 2, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW;
    /* Interior t: every tap's ox in [0, OW) for both parities, and 2t+1 < W. */
    int t_lo = 0, t_hi = W / 2;
    for (int e = 0; e < 2; e++)
        for (int kx = (e + P) & 1; kx < K; kx += 2) {
            const int off = (e + P - kx) / 2;
            if (-off > t_lo) t_lo = -off;
            if (OW - off < t_hi) t_hi = OW - off;
        }
    if (t_hi < t_lo) t_hi = t_lo;
    const int ix_l = 2 * t_lo < W ? 2 * t_lo : W, ix_r = 2 * t_hi > ix_l ? 2 * t_hi : ix_l;
    /* Channel-block iterations a row (the right border is empty when ix_r passes W, at W of 1). */
    const int nit = (ix_l + (t_hi - t_lo) / 4 + (t_hi - t_lo) % 4 + (W > ix_r ? W - ix_r : 0)) * ((C + VL - 1) / VL);
    const size_t g_row = (size_t)OW * C * sizeof(float), d_row = (size_t)W * C * sizeof(float);
    const size_t g_size = (size_t)s->N * OH * g_row, d_size = (size_t)s->N * H * d_row;
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)H), iy = (int)(r % (size_t)H);
        const float *grows[3];
        int kys[3], nk = 0;
        for (int ky = (iy + P) & 1; ky < K; ky += 2) {
            const int oy = (iy + P - ky) / 2;
            if (oy < 0 || oy >= OH) continue;
            kys[nk] = ky;
            const size_t gi = (size_t)n * OH + (size_t)oy;
            grows[nk] = dout + (ring_n ? gi % ring_n : gi) * (size_t)OW * C;
            nk++;
        }
        float *drow = dinp + r * (size_t)W * C;
        /* Prefetch, spread over the row: the next dinp row and the newest dout row it reads (not from a ring
         * of dout rows, which is in cache). */
        const int oyn = (iy + 1 + P) / 2 < OH ? (iy + 1 + P) / 2 : OH - 1;
        const size_t og = ring_n ? 0 : ((size_t)n * OH + (size_t)oyn) * g_row, od = (r + 1) * d_row;
        struct dw_pf pf = pf_make(dout, og, ring_n ? 0 : g_row, g_size, dinp, od, d_row, d_size, nit);
        if (ext) pf.in = ext->in, pf.in2 = ext->in2; /* the caller's read streams, carried over the rows */
        if (!nk) { /* no tap reaches this row */
            if (!acc) memset(drow, 0, (size_t)W * C * sizeof(float));
            continue; /* (the streams stay where they were) */
        }
        for (int ix = 0; ix < ix_l; ix++)
            DW_CBLOCKS(&pf, bwd_s2_px(drow, grows, kys, nk, w, ix, c0, C, OW, K, 1, acc),
                       bwd_s2_px(drow, grows, kys, nk, w, ix, c0, C, OW, K, 0, acc));
        int t = t_lo;
        for (; t + 4 <= t_hi; t += 4)
            DW_CBLOCKS(&pf, bwd_s2_run(drow, grows, kys, nk, w, t, c0, C, K, 4, 1, acc),
                       bwd_s2_run(drow, grows, kys, nk, w, t, c0, C, K, 4, 0, acc));
        for (; t < t_hi; t++)
            DW_CBLOCKS(&pf, bwd_s2_run(drow, grows, kys, nk, w, t, c0, C, K, 1, 1, acc),
                       bwd_s2_run(drow, grows, kys, nk, w, t, c0, C, K, 1, 0, acc));
        for (int ix = ix_r; ix < W; ix++)
            DW_CBLOCKS(&pf, bwd_s2_px(drow, grows, kys, nk, w, ix, c0, C, OW, K, 1, acc),
                       bwd_s2_px(drow, grows, kys, nk, w, ix, c0, C, OW, K, 0, acc));
        if (ext) ext->in = pf.in, ext->in2 = pf.in2;
    }
}

static void bwd_k3s2(float *dinp, const float *dout, const float *w, const struct conv_shape *s, size_t r0, size_t r1,
                     int acc)
{
    bwd_s2_rows(dinp, dout, w, s, r0, r1, 3, acc, 0, NULL);
}
static void bwd_k5s2(float *dinp, const float *dout, const float *w, const struct conv_shape *s, size_t r0, size_t r1,
                     int acc)
{
    bwd_s2_rows(dinp, dout, w, s, r0, r1, 5, acc, 0, NULL);
}
/* Stride-2 backward-data (overwriting) reading dout from a ring of ring_n rows, as bwd_s1_ring. */
static void bwd_s2_ring3(float *dinp, const float *ring, const float *w, const struct conv_shape *s, size_t r0,
                         size_t r1, size_t ring_n, struct dw_pf *ext)
{
    bwd_s2_rows(dinp, ring, w, s, r0, r1, 3, 0, ring_n, ext);
}
static void bwd_s2_ring5(float *dinp, const float *ring, const float *w, const struct conv_shape *s, size_t r0,
                         size_t r1, size_t ring_n, struct dw_pf *ext)
{
    bwd_s2_rows(dinp, ring, w, s, r0, r1, 5, 0, ring_n, ext);
}

/* A prefetch over the slab's lines of a run of pixels (the next row's), one line at a time from the
 * kernel's inner loop: from DRAM the weight gradient otherwise waits on each new line, and bursts of
 * prefetches stall the loads behind them. */
struct dw_slab_pf {
    const char *base;
    size_t off, end, size, stride; /* next pixel's slab, the run's end, the tensor's size, bytes a pixel */
    int nl, l;                     /* lines a pixel, next line */
};

DW_INLINE void slab_pf_line(struct dw_slab_pf *f)
{
    if (f->off >= f->end) return;
    const size_t o = f->off + (size_t)f->l * 64;
    if (o < f->size) DW_PREFETCH(f->base + o, 0);
    if (++f->l == f->nl) f->l = 0, f->off += f->stride;
}

/* One input row's contribution for channel block [c0, min(c0+VL, c_end)):
 * tot[kx] += Σ_ox dout[ox]·inp[ox·S−P+kx], summed in registers first (two interleaved partials over
 * even/odd ox to hide FMA latency). */
DW_INLINE void params_row(vf *tot, const float *irow, const float *drow, int c0, int c_end, int C, int W, int OW,
                          int ox_lo, int ox_hi, const int K, const int S, const int FULL, const int PF,
                          struct dw_slab_pf *fd, struct dw_slab_pf *fi)
{
    const int P = (K - 1) / 2;
    const vmask m = vmask_n(c_end - c0);
    irow += c0, drow += c0;
    vf pa[5], pb[5];
    DW_UNROLL for (int kx = 0; kx < K; kx++) pa[kx] = pb[kx] = VZERO();
    int ox = 0;
    for (; ox < ox_lo; ox++) {
        const vf d = VLD(m, drow + (size_t)ox * C);
        DW_UNROLL for (int kx = 0; kx < K; kx++) {
            const int ix = ox * S - P + kx;
            if (ix < 0 || ix >= W) continue;
            pa[kx] = VFMA(d, VLD(m, irow + (size_t)ix * C), pa[kx]);
        }
    }
    for (; ox + 2 <= ox_hi; ox += 2) {
        const vf d0 = VLD(m, drow + (size_t)ox * C), d1 = VLD(m, drow + (size_t)(ox + 1) * C);
        const float *ip = irow + (size_t)(ox * S - P) * C;
        DW_UNROLL for (int kx = 0; kx < K; kx++) {
            pa[kx] = VFMA(d0, VLD(m, ip + (size_t)kx * C), pa[kx]);
            pb[kx] = VFMA(d1, VLD(m, ip + (size_t)(S + kx) * C), pb[kx]);
        }
        if (PF) {
            slab_pf_line(fd);
            for (int q = 0; q < S; q++) slab_pf_line(fi); /* S input pixels a dout pixel */
        }
    }
    for (; ox < ox_hi; ox++) {
        const vf d = VLD(m, drow + (size_t)ox * C);
        const float *ip = irow + (size_t)(ox * S - P) * C;
        DW_UNROLL for (int kx = 0; kx < K; kx++) pa[kx] = VFMA(d, VLD(m, ip + (size_t)kx * C), pa[kx]);
    }
    for (; ox < OW; ox++) {
        const vf d = VLD(m, drow + (size_t)ox * C);
        DW_UNROLL for (int kx = 0; kx < K; kx++) {
            const int ix = ox * S - P + kx;
            if (ix < 0 || ix >= W) continue;
            pa[kx] = VFMA(d, VLD(m, irow + (size_t)ix * C), pa[kx]);
        }
    }
    DW_UNROLL for (int kx = 0; kx < K; kx++) tot[kx] = VADD(tot[kx], VADD(pa[kx], pb[kx]));
}

/* One row's bias-gradient partial for channel block [c0, min(c0+VL, c_end)), added to *tb. */
DW_INLINE void params_bias_row(vf *tb, const float *drow, int c0, int c_end, int C, int OW, const int FULL)
{
    const vmask m = vmask_n(c_end - c0);
    vf b0 = VZERO(), b1 = VZERO();
    int ox = 0;
    for (; ox + 2 <= OW; ox += 2) {
        b0 = VADD(b0, VLD(m, drow + (size_t)ox * C + c0));
        b1 = VADD(b1, VLD(m, drow + (size_t)(ox + 1) * C + c0));
    }
    if (ox < OW) b0 = VADD(b0, VLD(m, drow + (size_t)ox * C + c0));
    *tb = VADD(*tb, VADD(b0, b1));
}

/* dw[t][c0..] += tot[t] for the K² taps, db[c0..] += tb (db may be NULL); = instead of += with store. */
DW_INLINE void params_store(float *dw, float *db, const vf *tot, vf tb, int c0, int c_end, int C, const int K,
                            const int FULL, int store)
{
    const vmask m = vmask_n(c_end - c0);
    for (int t = 0; t < K * K; t++) {
        float *p = dw + (size_t)t * C + c0;
        VST(p, m, store ? tot[t] : VADD(VLD(m, p), tot[t]));
    }
    if (db) VST(db + c0, m, store ? tb : VADD(VLD(m, db + c0), tb));
}

/* Channels per slab: one pass over the tensors per slab reads each of its cache lines once. 256 keeps the
 * per-tap totals (25 KB at 5×5) in L1 and walks every EfficientNet tensor up to 256 channels in one
 * pass (64 walked 56×56×144 in three strided passes: 7.5–8.0 against 7.1–7.3 ms at batch 16). */
enum { DW_SLAB = 256, DW_SLAB_V = DW_SLAB / VL };

/* dw[ky][kx][c] (+ db[c]) += Σ_{n,oy,ox} over channels [c_lo, c_hi), in slabs of DW_SLAB channels:
 * each (n, oy, ky) row is summed in registers per channel block, then added to per-tap totals kept on
 * the stack (a two-level sum, more accurate than one long chain, fixed in order). While a row is summed
 * the next row's dout and new input rows are prefetched, a few pixels per call: from DRAM the kernel
 * otherwise waits on each new line. */
DW_INLINE void params_k(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s, int c_lo,
                        int c_hi, size_t r0, size_t r1, int store, const int K, const int S)
{
    const int P = (K - 1) / 2, N = s->N, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW;
    int ox_lo, ox_hi;
    interior_cols(K, S, W, OW, &ox_lo, &ox_hi);
    const size_t px = (size_t)C * sizeof(float);
    const size_t in_size = (size_t)N * H * W * px, d_size = (size_t)N * OH * OW * px;
    for (int s0 = c_lo; s0 < c_hi; s0 += DW_SLAB) {
        const int s1 = s0 + DW_SLAB < c_hi ? s0 + DW_SLAB : c_hi;
        const int nb = (s1 - s0 + VL - 1) / VL, full = (s1 - s0) / VL; /* blocks; whole ones */
        const size_t l0 = (size_t)s0 * sizeof(float) / 64 * 64; /* the slab's first line in a pixel */
        const int nl = (int)(((size_t)s1 * sizeof(float) + 63 - l0) / 64);
        vf tot[DW_SLAB_V][25], tb[DW_SLAB_V];
        for (int v = 0; v < nb; v++) {
            tb[v] = VZERO();
            for (int t = 0; t < K * K; t++) tot[v][t] = VZERO();
        }
        for (size_t r = r0; r < r1; r++) {
            const int n = (int)(r / (size_t)OH), oy = (int)(r % (size_t)OH);
            const float *drow = dout + (((size_t)n * OH + oy) * OW) * C;
            /* Next row: dout row oy+1 (adjacent in memory) and input rows from oy·S−P+K on. */
            const size_t od = (((size_t)n * OH + oy + 1) * OW) * px + l0;
            const int inew = oy * S - P + K;
            const size_t oi = ((size_t)n * H + (size_t)(inew > 0 ? inew : 0)) * W * px + l0;
            struct dw_slab_pf fd = {(const char *)dout, od, od + OW * px, d_size, px, nl, 0};
            struct dw_slab_pf fi = {(const char *)inp, oi, oi + S * W * px, in_size, px, nl, 0};
            if (db) {
                for (int v = 0; v < full; v++) params_bias_row(&tb[v], drow, s0 + v * VL, s1, C, OW, 1);
                if (full < nb) params_bias_row(&tb[full], drow, s0 + full * VL, s1, C, OW, 0);
            }
            for (int ky = 0; ky < K; ky++) {
                const int iy = oy * S - P + ky;
                if (iy < 0 || iy >= H) continue;
                const float *irow = inp + (((size_t)n * H + iy) * W) * C;
                for (int v = 0; v < full; v++)
                    params_row(tot[v] + ky * K, irow, drow, s0 + v * VL, s1, C, W, OW, ox_lo, ox_hi, K, S, 1, 1,
                               &fd, &fi);
                if (full < nb)
                    params_row(tot[full] + ky * K, irow, drow, s0 + full * VL, s1, C, W, OW, ox_lo, ox_hi, K, S, 0,
                               1, &fd, &fi);
            }
        }
        for (int v = 0; v < nb; v++) {
            if (v < full) params_store(dw, db, tot[v], tb[v], s0 + v * VL, s1, C, K, 1, store);
            else params_store(dw, db, tot[v], tb[v], s0 + v * VL, s1, C, K, 0, store);
        }
    }
}

/* Channels [a,z) over output rows [r0,r1) of the N·OH, added into dw/db, or stored with store (specialised
 * shapes: each K and stride its own compiled body). */
static void params_rows(float *dw, float *db, const float *i, const float *d, const struct conv_shape *s, int a, int z,
                        size_t r0, size_t r1, int store)
{
    if (s->KH == 3 && s->stride == 1) params_k(dw, db, i, d, s, a, z, r0, r1, store, 3, 1);
    else if (s->KH == 3) params_k(dw, db, i, d, s, a, z, r0, r1, store, 3, 2);
    else if (s->stride == 1) params_k(dw, db, i, d, s, a, z, r0, r1, store, 5, 1);
    else params_k(dw, db, i, d, s, a, z, r0, r1, store, 5, 2);
}

/* ---------------------------------------------------------------------------------------------
 * Public kernels: dispatch to a specialisation or the portable path
 * ------------------------------------------------------------------------------------------- */

/* out rows [r0,r1) of the N·OH output rows (specialised shapes). */
static void fwd_rows(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                     size_t r0, size_t r1)
{
    const struct dw_geom g = {s->N, s->H, s->W, s->OH, s->OW, s->C};
    if (s->KH == 3) (s->stride == 1 ? fwd_k3s1 : fwd_k3s2)(out, inp, w, b, &g, r0, r1);
    else (s->stride == 1 ? fwd_k5s1 : fwd_k5s2)(out, inp, w, b, &g, r0, r1);
}

void dwconv_forward(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                    int ith, int nth)
{
    if (!dwconv_specialised(s)) {
        dwconv_forward_portable(out, inp, w, b, s, ith, nth);
        return;
    }
    size_t r0, r1;
    tb_slice((size_t)s->N * s->OH, ith, nth, &r0, &r1);
    fwd_rows(out, inp, w, b, s, r0, r1);
}

/* Whether BatchNorm row chunks over N·H·W rows of W pixels all start on a whole row. */
static int chunks_on_rows(int N, int H, int W)
{
    const size_t M = (size_t)N * H * W;
    for (int k = 0; k < bn_row_chunks(M); k++) {
        size_t e0, e1;
        bn_chunk_range(M, k, &e0, &e1);
        if (e0 % (size_t)W) return 0;
    }
    return 1;
}

int dwconv_forward_bn_fusable(const struct conv_shape *s)
{
    return dwconv_specialised(s) && chunks_on_rows(s->N, s->OH, s->OW);
}

/* Output (or input) rows computed before a BatchNorm pass runs over them: about 64 KB, still in L2. */
enum { DW_BN_BATCH_FLOATS = 16384 };

/* Rows of `row` floats per batch of the fused kernels: DW_BN_BATCH_FLOATS' worth, at least one. */
static size_t bn_batch_rows(size_t row) { return row >= DW_BN_BATCH_FLOATS ? 1 : DW_BN_BATCH_FLOATS / row; }

/* What a fused forward reads: the input tensor inp, or (inp NULL) rows that ap makes from x into ring, a
 * ring of K rows (row g of the N·H at slot g mod K), have_hi the end of the rows made so far. */
struct fwd_src {
    const float *inp, *x;
    float *ring;
    const struct bn_apply *ap;
    size_t have_hi;
};

/* Output rows [r, rn) of the N·OH from src. */
static void fwd_src_rows(float *out, struct fwd_src *src, const float *w, const float *b, const struct conv_shape *s,
                         size_t r, size_t rn)
{
    if (src->inp) {
        fwd_rows(out, src->inp, w, b, s, r, rn);
        return;
    }
    const int K = s->KH, S = s->stride, P = (K - 1) / 2, H = s->H, OH = s->OH;
    const size_t in_row = (size_t)s->W * s->C;
    const struct dw_geom g = {s->N, H, s->W, OH, s->OW, s->C};
    for (size_t q = r; q < rn; q++) {
        /* Output row q reads input rows [lo, hi) of its sample: each made once, into slot g mod K (rows
         * only move forward, and no K of them share a slot). */
        const size_t n = q / (size_t)OH;
        const int oy = (int)(q % (size_t)OH), lo = oy * S - P < 0 ? 0 : oy * S - P;
        const int hi = oy * S - P + K > H ? H : oy * S - P + K;
        const size_t glo = n * H + (size_t)lo, ghi = n * H + (size_t)hi;
        for (size_t gi = src->have_hi > glo ? src->have_hi : glo; gi < ghi; gi++)
            bn_apply_rows(src->ap, src->ring + gi % (size_t)K * in_row, src->x + gi * in_row, (size_t)s->W);
        src->have_hi = ghi;
        fwd_ring_rows(out, src->ring, w, b, &g, q, q + 1, K, S, src->x);
    }
}

/* This thread's output rows from src: with part, the next BatchNorm's row chunks (whole output rows), each
 * chunk's sums added a batch of rows at a time while they are in cache; else a slice of rows. */
static void fwd_walk(float *out, struct fwd_src *src, const float *w, const float *b, const struct conv_shape *s,
                     double *part, int ith, int nth)
{
    const size_t OW = (size_t)s->OW, row = OW * (size_t)s->C, M = (size_t)s->N * s->OH * OW;
    const size_t batch = bn_batch_rows(row);
    size_t k0 = 0, k1 = 1, ra = 0, rb = 0;
    if (part) tb_slice((size_t)bn_row_chunks(M), ith, nth, &k0, &k1);
    else tb_slice((size_t)s->N * s->OH, ith, nth, &ra, &rb);
    for (size_t k = k0; k < k1; k++) {
        double *pk = NULL;
        if (part) {
            size_t e0, e1;
            bn_chunk_range(M, (int)k, &e0, &e1);
            ra = e0 / OW, rb = e1 / OW;
            pk = part + k * 2 * (size_t)s->C;
            memset(pk, 0, 2 * (size_t)s->C * sizeof *pk);
        }
        for (size_t r = ra; r < rb; r += batch) {
            const size_t rn = rb - r < batch ? rb : r + batch;
            fwd_src_rows(out, src, w, b, s, r, rn);
            if (pk) bn_stats_rows_add(pk, out + r * row, (rn - r) * OW, s->C);
        }
    }
}

void dwconv_forward_bn(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                       double *part, int ith, int nth)
{
    TB_ASSERT(dwconv_forward_bn_fusable(s));
    struct fwd_src src = {.inp = inp};
    fwd_walk(out, &src, w, b, s, part, ith, nth);
}

int dwconv_forward_bn_in_fusable(const struct conv_shape *s)
{
    return dwconv_specialised(s) && s->C <= BN_STREAM_MAX_C;
}

size_t dwconv_forward_bn_in_scratch_floats(const struct conv_shape *s)
{
    return (size_t)s->KH * s->W * (size_t)s->C;
}

void dwconv_forward_bn_in(float *out, const float *x, const float *save, const float *gamma, const float *beta,
                          const float *w, const float *b, const struct conv_shape *s, double *part, float *ring,
                          int ith, int nth)
{
    TB_ASSERT(dwconv_forward_bn_in_fusable(s) && (!part || dwconv_forward_bn_fusable(s)));
    struct bn_apply ap;
    bn_apply_begin(&ap, save, gamma, beta, s->C);
    struct fwd_src src = {.x = x, .ring = ring, .ap = &ap};
    fwd_walk(out, &src, w, b, s, part, ith, nth);
}

/* dinp rows [r0,r1) of the N·H input rows (specialised shapes): overwrite, or accumulate with acc. */
static void bwd_data_rows(float *dinp, const float *dout, const float *w, const struct conv_shape *s, size_t r0,
                          size_t r1, int acc)
{
    if (s->stride == 1) {
        /* dinp = dout ⋆ rot180(w) with the same pad: the forward row kernel in BWD mode. */
        const struct dw_geom g = {s->N, s->OH, s->OW, s->H, s->W, s->C};
        (s->KH == 3 ? bwd_k3s1 : bwd_k5s1)(dinp, dout, w, &g, r0, r1, acc);
    } else {
        (s->KH == 3 ? bwd_k3s2 : bwd_k5s2)(dinp, dout, w, s, r0, r1, acc);
    }
}

void dwconv_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s, int acc,
                          int ith, int nth)
{
    if (!dwconv_specialised(s)) {
        dwconv_backward_data_portable(dinp, dout, w, s, acc, ith, nth);
        return;
    }
    size_t r0, r1;
    tb_slice((size_t)s->N * s->H, ith, nth, &r0, &r1);
    bwd_data_rows(dinp, dout, w, s, r0, r1, acc);
}

int dwconv_bn_fusable(const struct conv_shape *s)
{
    return dwconv_specialised(s) && s->C <= BN_STREAM_MAX_C && chunks_on_rows(s->N, s->H, s->W);
}

/* Tap row tk (K taps of C floats) += params_row's sums of one input row against one dout row, for the
 * channel block [c0, c0+VL) (the lanes below C when !FULL). The rows are in cache: no prefetch. */
DW_INLINE void params_taps_add(float *tk, const float *irow, const float *drow, int c0, int C, int W, int OW,
                               int ox_lo, int ox_hi, const int K, const int S, const int FULL)
{
    const vmask m = vmask_n(C - c0);
    vf tot[5];
    DW_UNROLL for (int kx = 0; kx < K; kx++) tot[kx] = VLD(m, tk + (size_t)kx * C + c0);
    params_row(tot, irow, drow, c0, C, C, W, OW, ox_lo, ox_hi, K, S, FULL, 0, NULL, NULL);
    DW_UNROLL for (int kx = 0; kx < K; kx++) VST(tk + (size_t)kx * C + c0, m, tot[kx]);
}

/* Input rows [r, rn) of the N·H, whose SiLU outputs are the rows of y: each paired with the output rows
 * it feeds (one per tap row ky), dwk (K², C) += that row's Σ_ox y·dout per tap, summed in registers first
 * by params_row, as params_k sums its (output row, tap row) pairs. dout is the tensor, or with ring_n a
 * ring of that many rows (row g of the N·OH at slot g mod ring_n). */
DW_INLINE void params_in_rows(float *dwk, const float *y, const float *dout, const struct conv_shape *s, size_t r,
                              size_t rn, const int K, const int S, size_t ring_n)
{
    const int P = (K - 1) / 2, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW;
    int ox_lo, ox_hi;
    interior_cols(K, S, W, OW, &ox_lo, &ox_hi);
    for (size_t q = r; q < rn; q++) {
        const int n = (int)(q / (size_t)H), iy = (int)(q % (size_t)H);
        const float *yrow = y + (q - r) * (size_t)W * C;
        for (int ky = 0; ky < K; ky++) {
            const int t = iy + P - ky; /* = oy·S */
            if (t < 0 || t % S || t / S >= OH) continue;
            const size_t gi = (size_t)n * OH + (size_t)(t / S);
            const float *drow = dout + (ring_n ? gi % ring_n : gi) * OW * C;
            float *tk = dwk + (size_t)ky * K * C;
            int c0 = 0;
            for (; c0 + VL <= C; c0 += VL) params_taps_add(tk, yrow, drow, c0, C, W, OW, ox_lo, ox_hi, K, S, 1);
            if (c0 < C) params_taps_add(tk, yrow, drow, c0, C, W, OW, ox_lo, ox_hi, K, S, 0);
        }
    }
}

static void params_in_rows_k(float *dwk, const float *y, const float *dout, const struct conv_shape *s, size_t r,
                             size_t rn, size_t ring_n)
{
    if (s->KH == 3 && s->stride == 1) params_in_rows(dwk, y, dout, s, r, rn, 3, 1, ring_n);
    else if (s->KH == 3) params_in_rows(dwk, y, dout, s, r, rn, 3, 2, ring_n);
    else if (s->stride == 1) params_in_rows(dwk, y, dout, s, r, rn, 5, 1, ring_n);
    else params_in_rows(dwk, y, dout, s, r, rn, 5, 2, ring_n);
}

size_t dwconv_bn_params_part_floats(const struct conv_shape *s)
{
    return (size_t)bn_row_chunks_max((size_t)s->N * s->H * s->W) * (size_t)s->KH * s->KW * (size_t)s->C;
}

size_t dwconv_bn_params_scratch_floats(const struct conv_shape *s)
{
    const size_t row = (size_t)s->W * (size_t)s->C;
    return bn_batch_rows(row) * row;
}

/* Rows of dwconv_backward_data_bn's ring of dout rows: a batch of input rows reads at most batch + K − 1
 * output rows at stride 1 (fewer at stride 2, a sample boundary included), and the ring must hold them all
 * at once for the weight gradient's taps. */
static size_t dout_ring_rows(const struct conv_shape *s)
{
    return bn_batch_rows((size_t)s->W * (size_t)s->C) + (size_t)s->KH;
}

size_t dwconv_bn_dout_ring_floats(const struct conv_shape *s)
{
    return dout_ring_rows(s) * (size_t)s->OW * (size_t)s->C;
}

/* A ring of dout rows that bd's rows are formed into as the input rows reach them: ring_n rows (row g of
 * the N·OH at slot g mod ring_n), have_hi the end of the rows formed so far (rows only move forward). */
struct dout_ring {
    const struct conv_bn_dout *bd;
    float *ring;
    size_t ring_n, have_hi;
};

/* [*glo, *ghi) of the N·OH: the dout rows input rows [r, rn) of the N·H read (every output row a tap of
 * theirs reaches); empty (*ghi <= *glo) when they read none. */
static void dout_window(const struct conv_shape *s, size_t r, size_t rn, size_t *glo, size_t *ghi)
{
    const int K = s->KH, S = s->stride, P = (K - 1) / 2, H = s->H, OH = s->OH;
    *glo = SIZE_MAX, *ghi = 0;
    for (size_t q = r; q < rn; q++) {
        const size_t n = q / (size_t)H;
        const int iy = (int)(q % (size_t)H);
        const int lo = floor_div(iy + P - K + S, S), hi = floor_div(iy + P, S); /* ⌈(iy+P−K+1)/S⌉, ⌊(iy+P)/S⌋ */
        const int a = lo > 0 ? lo : 0, z = hi < OH - 1 ? hi : OH - 1;
        if (a > z) continue;
        if (n * OH + (size_t)a < *glo) *glo = n * OH + (size_t)a;
        if (n * OH + (size_t)z + 1 > *ghi) *ghi = n * OH + (size_t)z + 1;
    }
}

/* Forms the dout rows input rows [r, rn) read that the ring does not hold yet: bn_backward_rows of the
 * BatchNorm's dz and x, its bn_backward_finish's bits. Then points pf's read streams at the dz and x rows the
 * next batch of input rows, [rn, rnext), will form, spread over nit kernel iterations: their misses overlap
 * this batch's arithmetic instead of stalling the next fill. */
static void dout_ring_fill(struct dout_ring *dr, const struct conv_shape *s, size_t r, size_t rn, size_t rnext,
                           struct dw_pf *pf, size_t nit)
{
    const size_t row = (size_t)s->OW * (size_t)s->C;
    size_t glo, ghi;
    dout_window(s, r, rn, &glo, &ghi);
    if (ghi > glo) {
        TB_ASSERT(ghi - glo <= dr->ring_n);
        for (size_t g = dr->have_hi > glo ? dr->have_hi : glo; g < ghi; g++)
            bn_backward_rows(dr->ring + g % dr->ring_n * row, dr->bd->dz + g * row, dr->bd->x + g * row,
                             dr->bd->save, dr->bd->coef, (size_t)s->OW, s->C);
        if (ghi > dr->have_hi) dr->have_hi = ghi;
    }
    size_t nlo, nhi;
    dout_window(s, rn, rnext, &nlo, &nhi);
    const size_t a = (dr->have_hi > nlo ? dr->have_hi : nlo) * row, z = nhi * row;
    if (z <= a) {
        pf->in = pf->in2 = pf_span_of(dr->bd->dz, dr->bd->dz, 1);
        return;
    }
    pf->in = pf_span_of(dr->bd->dz + a, dr->bd->dz + z, nit);
    pf->in2 = pf_span_of(dr->bd->x + a, dr->bd->x + z, nit);
}

void dwconv_backward_data_bn(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                             double *part, const float *bn_in, const float *save, const float *gamma,
                             const float *beta, float *dwpart, float *ybuf, const struct conv_bn_dout *bd,
                             float *ring, int ith, int nth)
{
    TB_ASSERT(dwconv_bn_fusable(s) && !dwpart == !ybuf && (!bd || (dwpart && ring)));
    struct dout_ring dr = {bd, ring, bd ? dout_ring_rows(s) : 0, 0};
    const float *dsrc = bd ? ring : dout;
    const struct dw_geom g1 = {s->N, s->OH, s->OW, s->H, s->W, s->C};
    /* The kernels' channel-block iterations a row, about: runs of 8 pixels (fewer at stride 2's borders). */
    const size_t its = (size_t)(s->W + 7) / 8 * (size_t)((s->C + VL - 1) / VL);
    const size_t W = (size_t)s->W, row = W * (size_t)s->C, M = (size_t)s->N * s->H * W;
    const size_t batch = bn_batch_rows(row), taps = (size_t)s->KH * s->KW * (size_t)s->C;
    size_t k0, k1;
    tb_slice((size_t)bn_row_chunks(M), ith, nth, &k0, &k1);
    struct bn_bwd_stream st;
    for (size_t k = k0; k < k1; k++) {
        size_t e0, e1;
        bn_chunk_range(M, (int)k, &e0, &e1);
        bn_bwd_stream_begin(&st, part + k * 2 * (size_t)s->C, save, gamma, beta, s->C);
        float *dwk = dwpart ? dwpart + k * taps : NULL;
        if (dwk) memset(dwk, 0, taps * sizeof(float));
        for (size_t r = e0 / W, r1 = e1 / W; r < r1; r += batch) {
            const size_t rn = r1 - r < batch ? r1 : r + batch;
            if (bd) {
                const size_t total = (size_t)s->N * s->H, rnext = total - rn < batch ? total : rn + batch;
                struct dw_pf ext;
                dout_ring_fill(&dr, s, r, rn, rnext, &ext, (rn - r) * its);
                if (s->stride == 1) bwd_s1_ring(dinp, ring, w, &g1, r, rn, s->KH, dr.ring_n, &ext);
                else (s->KH == 3 ? bwd_s2_ring3 : bwd_s2_ring5)(dinp, ring, w, s, r, rn, dr.ring_n, &ext);
            } else {
                bwd_data_rows(dinp, dout, w, s, r, rn, 0);
            }
            /* The stream prefetches x ahead itself (bn_bwd_stream_rows). The weight gradient's taps, on rows
             * in cache, prefetched the next batch's x too (the twenty-first session: 112×112×96 stride 2
             * 16.6–17.1 → 13.5–13.9 ms, one thread, batch 16); with the stream's own prefetch that second
             * stream and its bookkeeping lost: 10.4 → 9.8 ms there, 56×56×144 5.7–6.1 → 5.3–5.5, 112×112×32
             * 4.7 → 4.2, 56×56×144 5×5 stride 2 4.5–4.9 → 4.0–4.2 without it. */
            bn_bwd_stream_rows(&st, dinp + r * row, bn_in + r * row, ybuf, (rn - r) * W);
            if (dwk) params_in_rows_k(dwk, ybuf, dsrc, s, r, rn, dr.ring_n);
        }
        bn_bwd_stream_end(&st);
    }
}

void dwconv_bn_params_finish(float *dw, const float *dwpart, const struct conv_shape *s, int ith, int nth)
{
    conv_parts_sum_add(dw, dwpart, bn_row_chunks((size_t)s->N * s->H * s->W), (size_t)s->KH * s->KW * (size_t)s->C, 1,
                       ith, nth);
}

void dwconv_bn_params_parts(float *dwpart, const float *inp, const float *dout, const struct conv_shape *s, int ith,
                            int nth)
{
    TB_ASSERT(dwconv_bn_fusable(s));
    /* dwconv_backward_data_bn's walk without the data gradient and the stream: the same chunks, each zeroed
     * then summed input row by input row (its batches of rows change nothing, params_in_rows adds row by
     * row), with the stored rows in place of the recomputed ones. */
    const size_t W = (size_t)s->W, row = W * (size_t)s->C, M = (size_t)s->N * s->H * W;
    const size_t taps = (size_t)s->KH * s->KW * (size_t)s->C;
    size_t k0, k1;
    tb_slice((size_t)bn_row_chunks(M), ith, nth, &k0, &k1);
    for (size_t k = k0; k < k1; k++) {
        size_t e0, e1;
        bn_chunk_range(M, (int)k, &e0, &e1);
        float *dwk = dwpart + k * taps;
        memset(dwk, 0, taps * sizeof(float));
        params_in_rows_k(dwk, inp + e0 / W * row, dout, s, e0 / W, e1 / W, 0);
    }
}

void dwconv_backward_params(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s,
                            int ith, int nth)
{
    if (!dwconv_specialised(s)) {
        dwconv_backward_params_portable(dw, db, inp, dout, s, ith, nth);
        return;
    }
    int c0, c1;
    channel_slice(s->C, ith, nth, &c0, &c1);
    if (c1 <= c0) return;
    params_rows(dw, db, inp, dout, s, c0, c1, 0, (size_t)s->N * s->OH, 0);
}

/* With fewer channel blocks than cores (32 channels at 16×16 in EfficientNet's stage 1: 2 blocks for 16
 * cores), channel slices gave each thread single channels, so each of them read half the cache lines of
 * both tensors: 16 threads did 3.9× one thread's work (the simulated 16-core split, BENCHMARKS.md).
 * Items of (row chunk, channel block) instead, each into its own part, summed after a barrier. */
enum { DW_PARAMS_MAX_CHUNKS = 16 };

int dwconv_params_row_chunks(const struct conv_shape *s)
{
    if (!dwconv_specialised(s)) return 0;
    const int nb = (s->C + VL - 1) / VL, par = tb_units(s->par);
    if (nb >= par) return 0;
    const size_t rows = (size_t)s->N * s->OH;
    /* Enough chunks for every core, and items (chunks × blocks) a multiple of the cores where one is
     * within DW_PARAMS_MAX_CHUNKS: 96 channels (6 blocks) in 3 chunks gave 18 items, 2 rounds on 16 cores
     * for 1.1 rounds of work; in 8 chunks, 48 items, 3 each. */
    size_t k = (size_t)((par + nb - 1) / nb);
    while (k < DW_PARAMS_MAX_CHUNKS && (k * (size_t)nb) % (size_t)par) k++;
    k = k < DW_PARAMS_MAX_CHUNKS ? k : DW_PARAMS_MAX_CHUNKS;
    k = k < rows ? k : rows;
    return k < 2 ? 0 : (int)k;
}

size_t dwconv_params_part_floats(const struct conv_shape *s)
{
    return (size_t)DW_PARAMS_MAX_CHUNKS * ((size_t)s->KH * s->KW + 1) * (size_t)s->C;
}

void dwconv_backward_params_chunks(float *part, int with_db, const float *inp, const float *dout,
                                   const struct conv_shape *s, int ith, int nth)
{
    const int K = dwconv_params_row_chunks(s), nb = (s->C + VL - 1) / VL;
    TB_ASSERT(K > 0);
    const size_t taps = (size_t)s->KH * s->KW * (size_t)s->C, rows = (size_t)s->N * s->OH;
    size_t i0, i1;
    tb_slice((size_t)K * (size_t)nb, ith, nth, &i0, &i1);
    for (size_t i = i0; i < i1; i++) {
        const int k = (int)(i / (size_t)nb), c0 = (int)(i % (size_t)nb) * VL;
        size_t r0, r1;
        tb_slice(rows, k, K, &r0, &r1);
        float *dbk = with_db ? part + (size_t)K * taps + (size_t)k * s->C : NULL;
        params_rows(part + (size_t)k * taps, dbk, inp, dout, s, c0, c0 + VL < s->C ? c0 + VL : s->C, r0, r1, 1);
    }
}

void dwconv_backward_params_finish(float *dw, float *db, const float *part, const struct conv_shape *s, int ith,
                                   int nth)
{
    const int K = dwconv_params_row_chunks(s);
    const size_t taps = (size_t)s->KH * s->KW * (size_t)s->C;
    conv_parts_sum_add(dw, part, K, taps, 1, ith, nth);
    if (db) conv_parts_sum_add(db, part + (size_t)K * taps, K, (size_t)s->C, 1, ith, nth);
}

/* ---------------------------------------------------------------------------------------------
 * Portable path: any K, stride, pad; inner loops over contiguous channels for the vectoriser
 * ------------------------------------------------------------------------------------------- */

void dwconv_forward_portable(float *restrict out, const float *restrict inp, const float *restrict w,
                             const float *restrict b, const struct conv_shape *s, int ith, int nth)
{
    const int H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW, S = s->stride,
              P = s->pad;
    size_t r0, r1;
    tb_slice((size_t)s->N * OH, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)OH), oy = (int)(r % (size_t)OH);
        for (int ox = 0; ox < OW; ox++) {
            float *restrict o = out + (r * OW + ox) * (size_t)C;
            if (b) memcpy(o, b, (size_t)C * sizeof(float));
            else memset(o, 0, (size_t)C * sizeof(float));
            for (int ky = 0; ky < KH; ky++) {
                const int iy = oy * S - P + ky;
                if (iy < 0 || iy >= H) continue;
                for (int kx = 0; kx < KW; kx++) {
                    const int ix = ox * S - P + kx;
                    if (ix < 0 || ix >= W) continue;
                    const float *restrict ip = inp + (((size_t)n * H + iy) * W + ix) * C;
                    const float *restrict wp = w + ((size_t)ky * KW + kx) * C;
                    for (int c = 0; c < C; c++) o[c] += ip[c] * wp[c];
                }
            }
        }
    }
}

void dwconv_backward_data_portable(float *restrict dinp, const float *restrict dout, const float *restrict w,
                                   const struct conv_shape *s, int acc, int ith, int nth)
{
    const int H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW, S = s->stride,
              P = s->pad;
    size_t r0, r1;
    tb_slice((size_t)s->N * H, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)H), iy = (int)(r % (size_t)H);
        for (int ix = 0; ix < W; ix++) {
            float *restrict d = dinp + (r * W + ix) * (size_t)C;
            if (!acc) memset(d, 0, (size_t)C * sizeof(float));
            for (int ky = 0; ky < KH; ky++) {
                const int u = iy + P - ky;
                if (u < 0 || u % S) continue;
                const int oy = u / S;
                if (oy >= OH) continue;
                for (int kx = 0; kx < KW; kx++) {
                    const int v = ix + P - kx;
                    if (v < 0 || v % S) continue;
                    const int ox = v / S;
                    if (ox >= OW) continue;
                    const float *restrict g = dout + (((size_t)n * OH + oy) * OW + ox) * C;
                    const float *restrict wp = w + ((size_t)ky * KW + kx) * C;
                    for (int c = 0; c < C; c++) d[c] += g[c] * wp[c];
                }
            }
        }
    }
}

void dwconv_backward_params_portable(float *restrict dw, float *restrict db, const float *restrict inp,
                                     const float *restrict dout, const struct conv_shape *s, int ith, int nth)
{
    enum { CB = 64 };
    const int N = s->N, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW,
              S = s->stride, P = s->pad;
    int c_lo, c_hi;
    channel_slice(C, ith, nth, &c_lo, &c_hi);
    for (int c0 = c_lo; c0 < c_hi; c0 += CB) {
        const int nc = c_hi - c0 < CB ? c_hi - c0 : CB;
        for (int ky = 0; ky < KH; ky++)
            for (int kx = 0; kx < KW; kx++) {
                float tot[CB] = {0};
                for (int n = 0; n < N; n++)
                    for (int oy = 0; oy < OH; oy++) {
                        const int iy = oy * S - P + ky;
                        if (iy < 0 || iy >= H) continue;
                        float part[CB] = {0};
                        for (int ox = 0; ox < OW; ox++) {
                            const int ix = ox * S - P + kx;
                            if (ix < 0 || ix >= W) continue;
                            const float *restrict g = dout + (((size_t)n * OH + oy) * OW + ox) * C + c0;
                            const float *restrict ip = inp + (((size_t)n * H + iy) * W + ix) * C + c0;
                            for (int c = 0; c < nc; c++) part[c] += g[c] * ip[c];
                        }
                        for (int c = 0; c < nc; c++) tot[c] += part[c];
                    }
                float *restrict p = dw + ((size_t)ky * KW + kx) * C + c0;
                for (int c = 0; c < nc; c++) p[c] += tot[c];
            }
        if (db) {
            float tot[CB] = {0};
            for (size_t row = 0; row < (size_t)N * OH; row++) {
                float part[CB] = {0};
                for (int ox = 0; ox < OW; ox++) {
                    const float *restrict g = dout + (row * OW + ox) * C + c0;
                    for (int c = 0; c < nc; c++) part[c] += g[c];
                }
                for (int c = 0; c < nc; c++) tot[c] += part[c];
            }
            for (int c = 0; c < nc; c++) db[c0 + c] += tot[c];
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Naive references
 * ------------------------------------------------------------------------------------------- */

void dwconv_forward_ref(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s)
{
    for (int n = 0; n < s->N; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int c = 0; c < s->C; c++) {
                    double acc = b ? b[c] : 0.0;
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++) {
                            const int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            acc += (double)inp[(((size_t)n * s->H + iy) * s->W + ix) * s->C + c] *
                                   w[((size_t)ky * s->KW + kx) * s->C + c];
                        }
                    out[(((size_t)n * s->OH + oy) * s->OW + ox) * s->C + c] = (float)acc;
                }
}

void dwconv_backward_data_ref(float *dinp, const float *dout, const float *w, const struct conv_shape *s)
{
    for (int n = 0; n < s->N; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int c = 0; c < s->C; c++)
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++) {
                            const int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            dinp[(((size_t)n * s->H + iy) * s->W + ix) * s->C + c] +=
                                dout[(((size_t)n * s->OH + oy) * s->OW + ox) * s->C + c] *
                                w[((size_t)ky * s->KW + kx) * s->C + c];
                        }
}

void dwconv_backward_params_ref(float *dw, float *db, const float *inp, const float *dout,
                                const struct conv_shape *s)
{
    for (int ky = 0; ky < s->KH; ky++)
        for (int kx = 0; kx < s->KW; kx++)
            for (int c = 0; c < s->C; c++) {
                double acc = 0.0;
                for (int n = 0; n < s->N; n++)
                    for (int oy = 0; oy < s->OH; oy++)
                        for (int ox = 0; ox < s->OW; ox++) {
                            const int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                            if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                            acc += (double)dout[(((size_t)n * s->OH + oy) * s->OW + ox) * s->C + c] *
                                   inp[(((size_t)n * s->H + iy) * s->W + ix) * s->C + c];
                        }
                dw[((size_t)ky * s->KW + kx) * s->C + c] += (float)acc;
            }
    if (db)
        for (int c = 0; c < s->C; c++) {
            double acc = 0.0;
            for (size_t i = 0; i < (size_t)s->N * s->OH * s->OW; i++) acc += dout[i * s->C + c];
            db[c] += (float)acc;
        }
}
