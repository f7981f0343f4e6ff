/* gemm_rows.c — register-blocked row-panel GEMMs for skinny 1×1 convolutions (see gemm_rows.h). */
#include "gemm_rows.h"

#include <stdint.h>

#include "prefetch.h"
#include "simd_vec.h"

#define AI static inline __attribute__((always_inline))

/* Output vectors per column block (NV ≤ NV_MAX) and rows per register block for each NV: about 12
 * accumulators, leaving registers for the right-hand vectors and the broadcast (16 on AVX2). */
/* GROUP_ROWS: a multiple of every RB_OF. */
/* ATB_PF_EVERY: gemm_rows_atb steps its prefetch spans every this many rows of a panel, with as many lines
 * each time: stepping four spans every row cost 15-25 % of the FMA rate in L1 (gemm_rows_atb 142 → 185
 * GFLOP/s at 200,704 × 16 · 96, 134 → 184 at 24 · 144, 145 → 198 at 40 · 240; every 16 rows no better). */
enum { NV_MAX = 6, RB_MAX = 8, ATB_ROWS = 64, GROUP_ROWS = 24, ATB_PF_EVERY = 8 };
/* Software prefetch only where the hardware's falls short (measured): gemm_rows when a row of x is
 * longer than a line (K > 16: RB interleaved slow streams), gemm_rows_atb when a panel row of a and b
 * together is 48 floats or more. Below these the prefetch instructions cost more than they save. (At 48,
 * the SE projection's weight gradient at 112×112, 32 · 16 from memory: 1.72–1.76 → 1.17–1.23 ms; 10 %
 * slower from L2; 24 · 24 unchanged, 16 · 16 unsettled.) */
enum { GR_PF_MIN_K = 16, GR_PF_MIN_ATB = 48, GR_PF_BYTES = 4096 };
#define RB_OF(nv) ((nv) >= 5 ? 2 : (nv) == 4 ? 3 : (nv) == 3 ? 4 : (nv) == 2 ? 6 : 8)

/* Measured on this VM (commit message): sgemm wins once the right-hand matrix leaves L1. */
int gemm_rows_fits(int K, int N)
{
    return K > 0 && N > 0 && (long)K * N <= 10240;
}

/* Vector j of a block's NV at p: the last one masked when !FULL (right-hand rows, and y's old values). */
#define LOAD_J(p, j) ((FULL || (j) < NV - 1) ? VLD_F(p) : VLD_M(tail, (p)))

/* gemm_rows_atb's next panel of a and of b, prefetched a few lines per step of the FMA loop. */
struct gr_pf {
    struct pf_span a, b, m0, m1; /* m0, m1: the caller's ranges (gemm_rows_atb_pf), over the whole call */
};

/* acc (RB,NV vectors) = Σ_{k<K} x[i·si + k·sk] · b[k, ·], from zero in registers: the one FMA loop of
 * both kernels (rows: x (RB,K) row-major; atb: aᵀ, so the strides swap). Prefetches spread over the
 * loop: pf (rows) is the next register block's x, one line a row every 16 k; sp (atb) the next panel.
 * From DRAM, without them, 200,704 × 96 → 16 ran at 57 GFLOP/s against 92 from cache. */
AI void panel_fma(vf acc[RB_MAX][NV_MAX], const float *x, size_t si, size_t sk, const float *b, size_t ldb, int K,
                  int RB, int NV, int FULL, vmask tail, const float *pf, struct gr_pf *sp)
{
    for (int i = 0; i < RB; i++)
        for (int j = 0; j < NV; j++) acc[i][j] = VZERO();
    for (int k = 0; k < K; k++) {
        if (pf && (k & 15) == 0)
            for (int i = 0; i < RB; i++) __builtin_prefetch(pf + i * si + k, 0, 3);
        if (sp && (k & (ATB_PF_EVERY - 1)) == 0) {
            pf_span_step(&sp->a, 0);
            pf_span_step(&sp->b, 0);
            pf_span_step(&sp->m0, 0);
            pf_span_step(&sp->m1, 0);
        }
        vf bv[NV_MAX];
        for (int j = 0; j < NV; j++) bv[j] = LOAD_J(b + (size_t)k * ldb + j * VL, j);
        for (int i = 0; i < RB; i++) {
            const vf a = VSET1(x[i * si + k * sk]);
            for (int j = 0; j < NV; j++) acc[i][j] = VFMA(a, bv[j], acc[i][j]);
        }
    }
}

/* y rows [0,RB) × vectors [0,NV) = x rows · b [+ y]; the last vector masked when !FULL. With ss (non-NULL
 * after inlining) the outputs' column sums and sums of squares are added into ss, sq (vsum_pd: masked
 * for a partial last vector; lane by lane, a 56×56 96 → 24 projection ran 2.4× slower). */
AI void rows_block(float *y, size_t ldy, const float *x, size_t ldx, const float *b, size_t ldb, int K, int RB,
                   int NV, int FULL, vmask tail, int accumulate, int stream, const float *pf, double *ss, double *sq,
                   int valid)
{
    vf acc[RB_MAX][NV_MAX];
    panel_fma(acc, x, ldx, 1, b, ldb, K, RB, NV, FULL, tail, pf, NULL);
    /* y's old value is added last (not the chains' start): its loads then overlap the next block's
     * FMAs instead of stalling this one's (2× at 24×144 when y came from DRAM). */
    if (accumulate)
        for (int i = 0; i < RB; i++)
            for (int j = 0; j < NV; j++) acc[i][j] = VADD(acc[i][j], LOAD_J(y + i * ldy + j * VL, j));
    if (ss)
        for (int j = 0; j < NV; j++) {
            vf col[RB_MAX];
            for (int i = 0; i < RB; i++) col[i] = acc[i][j];
            vsum_pd(ss + j * VL, sq + j * VL, col, RB, FULL || j < NV - 1 ? VL : valid);
        }
    for (int i = 0; i < RB; i++)
        for (int j = 0; j < NV; j++) {
            float *p = y + i * ldy + j * VL;
            if (!FULL && j == NV - 1) VST_M(p, tail, acc[i][j]);
            else if (stream) VST_NT(p, acc[i][j]);
            else VST_F(p, acc[i][j]);
        }
}

/* All M rows of one column block: RB_OF(NV)-row blocks, then single rows; ss, sq as in rows_block. */
AI void rows_cols(float *y, size_t ldy, const float *x, size_t ldx, const float *b, size_t ldb, size_t M, int K,
                  int NV, int FULL, vmask tail, int accumulate, int stream, size_t xrows, double *ss, double *sq,
                  int valid)
{
    const int RB = RB_OF(NV);
    /* x's rows GR_PF_BYTES ahead (at least the next block): with the next block alone, 1 KB ahead at 32
     * columns, the misses came too late (200,704 rows 32 → 16 from memory: 2.1–2.3 → 1.5–1.6 ms; no change
     * at 50,176 rows 96 → 24 or 144 → 24, 12,544 rows 240 → 40). */
    const size_t rows_pf = GR_PF_BYTES / (ldx * sizeof(float)), ahead = rows_pf > (size_t)RB ? rows_pf : (size_t)RB;
    size_t m = 0;
    for (; m + RB <= M; m += RB) {
        const size_t next = m + (size_t)RB + ahead; /* the prefetched block's rows end here */
        rows_block(y + m * ldy, ldy, x + m * ldx, ldx, b, ldb, K, RB, NV, FULL, tail, accumulate, stream,
                   K > GR_PF_MIN_K && next <= xrows ? x + (m + ahead) * ldx : NULL, ss, sq, valid);
    }
    for (; m < M; m++)
        rows_block(y + m * ldy, ldy, x + m * ldx, ldx, b, ldb, K, 1, NV, FULL, tail, accumulate, stream, NULL, ss, sq,
                   valid);
}

/* c rows [0,RB) × vectors [0,NV) += Σ_{r<R} a[r, i] · b[r, ·], summed from zero in registers. */
AI void atb_block(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, int R, int RB, int NV,
                  int FULL, vmask tail, struct gr_pf *sp)
{
    vf acc[RB_MAX][NV_MAX];
    panel_fma(acc, a, 1, lda, b, ldb, R, RB, NV, FULL, tail, NULL, sp);
    for (int i = 0; i < RB; i++)
        for (int j = 0; j < NV; j++) {
            float *p = c + i * ldc + j * VL;
            const vf v = VADD(LOAD_J(p, j), acc[i][j]);
            if (!FULL && j == NV - 1) VST_M(p, tail, v);
            else VST_F(p, v);
        }
}

/* All K rows of c for one column block and R rows of a and b. */
AI void atb_cols(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, int R, int K, int NV,
                 int FULL, vmask tail, struct gr_pf *sp)
{
    const int RB = RB_OF(NV);
    int i = 0;
    for (; i + RB <= K; i += RB) atb_block(c + i * ldc, ldc, a + i, lda, b, ldb, R, RB, NV, FULL, tail, sp);
    for (; i < K; i++) atb_block(c + i * ldc, ldc, a + i, lda, b, ldb, R, 1, NV, FULL, tail, sp);
}

/* Column block q of nb over N: vectors [*v0, *v0 + *nv), the last one partial (tail lanes) when FULL is 0. */
static void col_block_of(int N, int nb, int q, int *v0, int *nv, int *full, vmask *tail)
{
    const int nvec = (N + VL - 1) / VL;
    *v0 = nvec * q / nb;
    *nv = nvec * (q + 1) / nb - *v0;
    *full = !(q == nb - 1 && N % VL);
    *tail = vmask_n(N % VL);
}

static int col_blocks(int N) { return ((N + VL - 1) / VL + NV_MAX - 1) / NV_MAX; }

/* Instantiates body(NV, FULL) for the runtime nv and full. */
#define DISPATCH(nv, full, body)                                      \
    do {                                                               \
        switch ((nv) * 2 + !!(full)) {                                 \
        case 2: body(1, 0); break;                                     \
        case 3: body(1, 1); break;                                     \
        case 4: body(2, 0); break;                                     \
        case 5: body(2, 1); break;                                     \
        case 6: body(3, 0); break;                                     \
        case 7: body(3, 1); break;                                     \
        case 8: body(4, 0); break;                                     \
        case 9: body(4, 1); break;                                     \
        case 10: body(5, 0); break;                                    \
        case 11: body(5, 1); break;                                    \
        case 12: body(6, 0); break;                                    \
        case 13: body(6, 1); break;                                    \
        default: break;                                                \
        }                                                              \
    } while (0)

void gemm_rows(float *y, size_t ldy, const float *x, size_t ldx, const float *b, size_t ldb, size_t M, int K,
               int N, int accumulate, int stream, double *ss, double *sq)
{
    stream = stream && ((uintptr_t)y % (VL * sizeof(float))) == 0 && ldy % VL == 0;
    const int nb = col_blocks(N);
    /* Groups of GROUP_ROWS rows, all column blocks of a group before the next: y is read (accumulate)
     * and written row after row, which the prefetchers follow (one column block at a time over all
     * rows read y at a stride, and stalled 1.6× at 240 columns). */
    for (size_t m0 = 0; m0 < M; m0 += GROUP_ROWS) {
        const size_t mg = M - m0 < GROUP_ROWS ? M - m0 : GROUP_ROWS;
        float *yg = y + m0 * ldy;
        const float *xg = x + m0 * ldx;
        for (int q = 0; q < nb; q++) {
            int v0, nv, full;
            vmask tail;
            col_block_of(N, nb, q, &v0, &nv, &full, &tail);
            float *yq = yg + (size_t)v0 * VL;
            const float *bq = b + (size_t)v0 * VL;
            const int valid = N - (v0 + nv - 1) * VL; /* lanes of the block's last vector */
            if (ss) {
                double *sqq = ss + (size_t)v0 * VL, *qq = sq + (size_t)v0 * VL;
#define ROWS(NV_, FULL_) rows_cols(yq, ldy, xg, ldx, bq, ldb, mg, K, NV_, FULL_, tail, accumulate, stream, M - m0, sqq, qq, valid)
                DISPATCH(nv, full, ROWS);
#undef ROWS
            } else {
#define ROWS(NV_, FULL_) rows_cols(yq, ldy, xg, ldx, bq, ldb, mg, K, NV_, FULL_, tail, accumulate, stream, M - m0, NULL, NULL, valid)
                DISPATCH(nv, full, ROWS);
#undef ROWS
            }
        }
    }
    if (stream) VFENCE_NT(); /* the stores are weakly ordered: make them visible before the barrier */
}

static void atb_run(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, size_t R, int K,
                    int N, const float *m0, size_t n0f, const float *m1, size_t n1f)
{
    const int nb = col_blocks(N);
    /* FMA steps a panel: one per row of the panel in every register block of every column block. */
    int steps = 0;
    for (int q = 0; q < nb; q++) {
        int v0, nv, full;
        vmask tail;
        col_block_of(N, nb, q, &v0, &nv, &full, &tail);
        steps += K / RB_OF(nv) + K % RB_OF(nv);
    }
    steps *= ATB_ROWS / ATB_PF_EVERY;
    const int more = m0 || m1;
    const size_t panels = (R + ATB_ROWS - 1) / ATB_ROWS;
    const struct pf_span m0s = pf_span_of(m0, m0 ? m0 + n0f : NULL, (size_t)steps * panels),
                         m1s = pf_span_of(m1, m1 ? m1 + n1f : NULL, (size_t)steps * panels);
    struct gr_pf sp = {.m0 = m0s, .m1 = m1s};
    for (size_t r0 = 0; r0 < R; r0 += ATB_ROWS) {
        const int rr = (int)(R - r0 < ATB_ROWS ? R - r0 : ATB_ROWS);
        const float *ar = a + r0 * lda, *br = b + r0 * ldb;
        /* While a panel is summed, the next panel's rows of a and b are prefetched (two spans), spread
         * over the panel's FMA steps: from DRAM the loop otherwise waits on every new line. */
        const size_t n0 = r0 + ATB_ROWS, n1 = n0 + ATB_ROWS < R ? n0 + ATB_ROWS : R;
        const int pf = n0 < R && lda + ldb >= GR_PF_MIN_ATB;
        sp.a = pf ? pf_span_of(a + n0 * lda, a + (n1 - 1) * lda + K, (size_t)steps) : (struct pf_span){0};
        sp.b = pf ? pf_span_of(b + n0 * ldb, b + (n1 - 1) * ldb + N, (size_t)steps) : (struct pf_span){0};
        for (int q = 0; q < nb; q++) {
            int v0, nv, full;
            vmask tail;
            col_block_of(N, nb, q, &v0, &nv, &full, &tail);
#define ATB(NV_, FULL_)                                                                                  \
    atb_cols(c + (size_t)v0 * VL, ldc, ar, lda, br + (size_t)v0 * VL, ldb, rr, K, NV_, FULL_, tail, \
             pf || more ? &sp : NULL)
            DISPATCH(nv, full, ATB);
#undef ATB
        }
    }
}

void gemm_rows_atb(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, size_t R, int K,
                   int N)
{
    atb_run(c, ldc, a, lda, b, ldb, R, K, N, NULL, 0, NULL, 0);
}

void gemm_rows_atb_pf(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, size_t R, int K,
                      int N, const float *m0, size_t n0, const float *m1, size_t n1)
{
    atb_run(c, ldc, a, lda, b, ldb, R, K, N, m0, n0, m1, n1);
}
