/* op_conv.c — dense/grouped convolution: shapes, algorithm table, GEMM1X1, IM2COL, DIRECT, references.
 *
 * The FFT algorithm lives in op_conv_fft.c. Work is split into units fixed by the shape, never by nth
 * (pixel chunks, output rows, 16/64-wide channel blocks); threads take whole units and no reduction is
 * split between threads. Skinny GEMM1X1 passes run gemm_rows (gemm_rows.h). Each sgemm is one
 * whole-unit call, because OpenBLAS gives different bits for the same row when M or N of the call
 * changes (measured: small-size kernels and edge tiles). So every element sees the same operations
 * for any nth. Scratch is the calling thread's own buffer (see conv_scratch_floats); OpenBLAS must be
 * single-threaded (the engine owns the threads).
 */
#include "op_conv.h"

#include "gemm_rows.h"
#include "op_norm.h"
#include "layout.h"
#include "status.h"

#include <cblas.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#define CV_INLINE static inline __attribute__((always_inline))

/* floor(a / b) and ceil(a / b) for b > 0 and any sign of a. */
static inline int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static inline int ceil_div(int a, int b) { return -floor_div(-a, b); }
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ---------------------------------------------------------------------------------------------
 * Shapes, names, support, scratch
 * ------------------------------------------------------------------------------------------- */

int conv_shape_fill(struct conv_shape *s)
{
    if (s->N <= 0 || s->H <= 0 || s->W <= 0 || s->C <= 0 || s->OC <= 0 || s->KH <= 0 || s->KW <= 0 ||
        s->stride <= 0 || s->pad < 0 || s->groups <= 0)
        return tb_error_set(TB_EINVAL, "op_conv: non-positive size in shape (N=%d H=%d W=%d C=%d OC=%d K=%dx%d "
                                       "stride=%d pad=%d groups=%d)",
                            s->N, s->H, s->W, s->C, s->OC, s->KH, s->KW, s->stride, s->pad, s->groups);
    if (s->C % s->groups || s->OC % s->groups)
        return tb_error_set(TB_EINVAL, "op_conv: groups=%d does not divide C=%d and OC=%d", s->groups, s->C, s->OC);
    if (s->H + 2 * s->pad < s->KH || s->W + 2 * s->pad < s->KW)
        return tb_error_set(TB_EINVAL, "op_conv: kernel %dx%d larger than padded input %dx%d", s->KH, s->KW,
                            s->H + 2 * s->pad, s->W + 2 * s->pad);
    s->OH = (s->H + 2 * s->pad - s->KH) / s->stride + 1;
    s->OW = (s->W + 2 * s->pad - s->KW) / s->stride + 1;
    return TB_OK;
}

int conv_shape_init(struct conv_shape *s, int N, int H, int W, int C, int OC, int KH, int KW, int stride,
                    int groups)
{
    *s = (struct conv_shape){.N = N, .H = H, .W = W, .C = C, .OC = OC, .KH = KH, .KW = KW,
                             .stride = stride, .pad = (KH - 1) / 2, .groups = groups};
    if (KH != KW)
        return tb_error_set(TB_EINVAL, "op_conv: symmetric EfficientNet padding needs a square kernel (%dx%d)",
                            KH, KW);
    return conv_shape_fill(s);
}

double conv_flops(const struct conv_shape *s)
{
    return 2.0 * s->N * s->OH * s->OW * (double)s->OC * s->KH * s->KW * (s->C / s->groups);
}

const char *conv_algo_name(enum conv_algo algo)
{
    return (unsigned)algo < CONV_ALGO_COUNT ? conv_algos[algo].name : "?";
}

int conv_algo_supported(enum conv_algo algo, const struct conv_shape *s)
{
    switch (algo) {
    case CONV_ALGO_IM2COL:
    case CONV_ALGO_DIRECT: return 1;
    case CONV_ALGO_FFT: return s->stride == 1;
    case CONV_ALGO_GEMM1X1: return s->KH == 1 && s->KW == 1 && s->stride == 1 && s->pad == 0 && s->groups == 1;
    default: return 0;
    }
}

/* im2col pixel rows per chunk: about 512 KB of patches (fits L2 with the sgemm panels). */
static int im2col_chunk(const struct conv_shape *s)
{
    const int ktot = s->KH * s->KW * s->C;
    int mb = (1 << 17) / ktot;
    mb = imax(16, imin(1024, mb)) & ~15;
    return mb;
}

size_t conv_scratch_floats(enum conv_algo algo, enum conv_pass pass, const struct conv_shape *s, int nth)
{
    const size_t Cg = (size_t)(s->C / s->groups), taps = (size_t)s->KH * s->KW, ktot = taps * s->C;
    size_t n = 0;
    switch (algo) {
    case CONV_ALGO_IM2COL:
        n = (size_t)im2col_chunk(s) * ktot;
        if (pass == CONV_PASS_BACKWARD_DATA) n = (size_t)imax(im2col_chunk(s), s->OW) * ktot;
        break;
    case CONV_ALGO_DIRECT:
        if (pass == CONV_PASS_BACKWARD_DATA) n = taps * (size_t)s->OC * Cg; /* transposed weights */
        if (pass == CONV_PASS_BACKWARD_PARAMS) n = taps * Cg * 16;          /* per-tap totals */
        break;
    case CONV_ALGO_FFT: n = conv_fft_scratch_floats(pass, s, nth); break;
    case CONV_ALGO_GEMM1X1:
        if (pass == CONV_PASS_BACKWARD_DATA && gemm_rows_fits(s->OC, s->C)) n = (size_t)s->OC * s->C; /* wᵀ */
        break;
    default: break;
    }
    return tb_align16(n);
}

/* ---------------------------------------------------------------------------------------------
 * Table and dispatchers
 * ------------------------------------------------------------------------------------------- */

const struct conv_algo_i conv_algos[CONV_ALGO_COUNT] = {
    [CONV_ALGO_IM2COL] = {"im2col", 0, conv_forward_im2col, conv_backward_data_im2col, conv_backward_params_im2col},
    [CONV_ALGO_DIRECT] = {"direct", 0, conv_forward_direct, conv_backward_data_direct, conv_backward_params_direct},
    [CONV_ALGO_FFT] = {"fft", 1, conv_forward_fft, conv_backward_data_fft, conv_backward_params_fft},
    [CONV_ALGO_GEMM1X1] = {"gemm1x1", 0, conv_forward_gemm1x1, conv_backward_data_gemm1x1,
                           conv_backward_params_gemm1x1, conv_backward_data_gemm1x1_overwrite},
};

void conv_forward(enum conv_algo algo, float *out, const float *inp, const float *w, const float *b,
                  const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    TB_ASSERT((unsigned)algo < CONV_ALGO_COUNT);
    conv_algos[algo].forward(out, inp, w, b, s, plan, scratch, ith, nth);
}

void conv_backward_data(enum conv_algo algo, float *dinp, const float *dout, const float *w,
                        const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch, int ith,
                        int nth)
{
    TB_ASSERT((unsigned)algo < CONV_ALGO_COUNT);
    conv_algos[algo].backward_data(dinp, dout, w, s, plan, scratch, ith, nth);
}

void conv_backward_params(enum conv_algo algo, float *dw, float *db, const float *inp, const float *dout,
                          const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch, int ith,
                          int nth)
{
    TB_ASSERT((unsigned)algo < CONV_ALGO_COUNT);
    conv_algos[algo].backward_params(dw, db, inp, dout, s, plan, scratch, ith, nth);
}

/* ---------------------------------------------------------------------------------------------
 * Shared helpers
 * ------------------------------------------------------------------------------------------- */

/* Thread's [lo,hi) of n items taken in whole units of `unit` (the last unit may be short). */
static void slice_units(size_t n, size_t unit, int ith, int nth, size_t *lo, size_t *hi)
{
    size_t a, b;
    tb_slice((n + unit - 1) / unit, ith, nth, &a, &b);
    *lo = a * unit < n ? a * unit : n;
    *hi = b * unit < n ? b * unit : n;
}

/* db[o] += Σ_m dout[m][o] for o in [o0,o1) (acc 0: db[o] = 0 + Σ, the same bits over a zeroed db): double
 * sums, each column in row order (any slice alike). */
static void bias_grad_cols(float *db, const float *dout, size_t M, int OC, int o0, int o1, int add)
{
    for (int ob = o0; ob < o1; ob += 16) {
        const int nc = imin(16, o1 - ob);
        double sum[16] = {0};
        for (size_t m = 0; m < M; m++) {
            const float *d = dout + m * OC + ob;
            for (int j = 0; j < nc; j++) sum[j] += d[j];
        }
        for (int j = 0; j < nc; j++) db[ob + j] = (add ? db[ob + j] : 0.0f) + (float)sum[j];
    }
}

/* A GEMM1X1 bias gradient (db may be NULL): thread ith's 16-column blocks of db (OC) += Σ_rows dout (acc 0:
 * written, not added to). */
static void gemm1x1_bias_grad(float *db, const float *dout, const struct conv_shape *s, int acc, int ith, int nth)
{
    if (!db) return;
    size_t lo, hi;
    slice_units((size_t)s->OC, 16, ith, nth, &lo, &hi);
    bias_grad_cols(db, dout, (size_t)s->N * s->H * s->W, s->OC, (int)lo, (int)hi, acc);
}

/* Output-channel work units: 16-wide blocks inside each group, numbered g·nu + j. */
struct oc_units {
    int nu;         /* units per group */
    int u0, u1;     /* this thread's [u0,u1) */
};

static struct oc_units oc_units_slice(const struct conv_shape *s, int ith, int nth)
{
    const int OCg = s->OC / s->groups;
    struct oc_units u = {.nu = (OCg + 15) / 16};
    size_t a, b;
    tb_slice((size_t)u.nu * s->groups, ith, nth, &a, &b);
    u.u0 = (int)a, u.u1 = (int)b;
    return u;
}

/* ---------------------------------------------------------------------------------------------
 * GEMM1X1: out (M = N·H·W, OC) = inp (M, C) · w (C, OC)
 * ------------------------------------------------------------------------------------------- */

/* OpenBLAS does not give the same bits for a row (or column) of C when M (or N) changes — small-size
 * kernels and edge tiles sum in other orders — so every sgemm here is one fixed-size unit call whose
 * arguments depend only on the shape: threads take whole units, and a unit is the same call for any nth. */
enum { GEMM_ROWS = 256, GEMM_COLS = 64, GEMM_FEW_ROW_UNITS = 8, GEMM_MIN_TILE_ROWS = 16 };
/* sgemm calls of at most SGEMM_SMALL_ROWS × SGEMM_SMALL_COLS × SGEMM_SMALL_K (2^20 multiply-adds) go to
 * OpenBLAS's small-matrix kernels (see conv_forward_gemm1x1). */
enum { SGEMM_SMALL_ROWS = 128, SGEMM_SMALL_COLS = 64, SGEMM_SMALL_K = 128 };

/* Output tiles of a GEMM1X1 pass: row blocks of GEMM_ROWS and, when there are fewer than
 * GEMM_FEW_ROW_UNITS of them (EfficientNet's late layers: 784 rows at 7×7 batch 16, M = N at 1×1),
 * column blocks too, so those layers split over threads as well: as few as give every core of the
 * machine (par units, tb_units) the same share, because each sgemm call packs its whole row block again, and
 * 18 64-wide column blocks of 784×320·320×1152 ran at 110–114 GFLOP/s against 135–146 in 4 × 2 or 2 × 2
 * tiles (one thread, SkylakeX kernels). The column blocks are an even number (edges on multiples of 8):
 * 192 columns in three 64-wide blocks ran 2:1 on two threads. Decided by the shape and the machine,
 * never by nth, like every unit here. */
struct gemm_tiles {
    size_t M, ru; /* rows, row blocks */
    int cols, cu; /* output columns, column blocks */
};

/* An even number of column blocks of cols, at most `most` (even) and each at least GEMM_COLS / 2 wide:
 * cols / (GEMM_COLS / 2) rounded down to even, or 2 when that is 0 (64–127 columns); 1 under GEMM_COLS.
 * Only a machine of many cores (most > 2) gets blocks under 64 wide: 16 cores split 192 columns 6 ways,
 * not 2 (the simulated 16-core split, BENCHMARKS.md), where one call per core repacking its operand costs
 * less than 14 idle cores; at most 2 the blocks are those of the 64-wide rule. */
static int even_col_blocks(int cols, int most)
{
    int k = cols / (GEMM_COLS / 2) / 2 * 2;
    if (k > most) k = most;
    return k ? k : cols >= GEMM_COLS ? 2 : 1;
}

/* Block k of cu equal column blocks of cols, edges on multiples of 8: [*c0, *c0 + *n). */
static void col_block(int cols, int cu, int k, int *c0, int *n)
{
    *c0 = (int)((long)cols * k / cu) / 8 * 8;
    *n = (k + 1 == cu ? cols : (int)((long)cols * (k + 1) / cu) / 8 * 8) - *c0;
}

/* Row blocks: an even number (when more than one) of equal blocks of at most GEMM_ROWS rows, edges on
 * multiples of 8. Whole 256-row blocks and a short last one split unevenly over two threads: 784 rows
 * (7×7 layers) went 512 : 272, 3,136 (14×14) 1,792 : 1,344, and those layers scaled 1.5–1.75× on two
 * threads against 1.9–2× elsewhere. Column blocks when rows are few: enough for ru·cu ≥ the units (par). */
static struct gemm_tiles gemm_tiles_of(size_t M, int cols, int par)
{
    size_t ru = (M + GEMM_ROWS - 1) / GEMM_ROWS;
    if (ru > 1) ru += ru % 2;
    struct gemm_tiles t = {.M = M, .ru = ru, .cols = cols, .cu = 1};
    if (t.ru < GEMM_FEW_ROW_UNITS && t.ru < (size_t)par) {
        const int want = (int)(((size_t)par + ru - 1) / ru);
        t.cu = even_col_blocks(cols, want + want % 2);
    }
    /* Still fewer tiles than cores (a 1×1 layer at 32×32 batch 128: 128 rows × 192 columns, 2 tiles for
     * 16 cores): shorter row blocks, down to GEMM_MIN_TILE_ROWS rows. */
    if (par > 2 && t.ru * (size_t)t.cu < (size_t)par) { /* 2 cores: the tiles of before (their bits) */
        const size_t cu = (size_t)t.cu, want = ((size_t)par + cu - 1) / cu, most = M / GEMM_MIN_TILE_ROWS;
        /* The fewest row blocks from want on whose tiles are a multiple of the cores (6 column blocks: 8
         * row blocks, 48 tiles, 3 a core, not 4 and 24, 2 rounds for 1.5 of work), else an even number. */
        size_t k = want;
        while (k < most && (k * cu) % (size_t)par) k++;
        if ((k * cu) % (size_t)par) k = want + (want > 1 ? want % 2 : 0);
        k = k < most ? k : most;
        if (k > t.ru) t.ru = k;
    }
    return t;
}

/* Edge k of t's row blocks (k = ru: M). */
static size_t gemm_row_edge(const struct gemm_tiles *t, size_t k)
{
    return k >= t->ru ? t->M : t->M * k / t->ru / 8 * 8;
}

/* Tile u of t: rows [*m0, *m0 + *m), columns [*c0, *c0 + *n). */
static void gemm_tile(const struct gemm_tiles *t, size_t u, size_t *m0, int *m, int *c0, int *n)
{
    const size_t r = u / (size_t)t->cu;
    *m0 = gemm_row_edge(t, r);
    *m = (int)(gemm_row_edge(t, r + 1) - *m0);
    col_block(t->cols, t->cu, (int)(u % (size_t)t->cu), c0, n);
}

/* Widest dinp rows gemm_rows accumulates into (see gemm1x1_wt). */
enum { GEMM_ROWS_ACC_MAX_COLS = 48 };

static int gemm_stream(size_t M, int cols, int nth) { return tb_stream_floats(M * (size_t)cols, nth); }

void conv_forward_gemm1x1(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                          const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    const struct gemm_tiles t = gemm_tiles_of((size_t)s->N * s->H * s->W, OC, tb_units(s->par));
    const int own = !b && gemm_rows_fits(C, OC), stream = gemm_stream(t.M, OC, nth);
    size_t lo, hi;
    tb_slice(t.ru * (size_t)t.cu, ith, nth, &lo, &hi);
    for (size_t u = lo; u < hi; u++) {
        size_t m0;
        int m, c0, n;
        gemm_tile(&t, u, &m0, &m, &c0, &n);
        float *y = out + m0 * OC + c0;
        if (own) {
            gemm_rows(y, OC, inp + m0 * C, C, w + c0, OC, m, C, n, 0, stream, NULL, NULL);
            continue;
        }
        float beta = 0.0f;
        if (b) {
            for (int r = 0; r < m; r++) memcpy(y + (size_t)r * OC, b + c0, (size_t)n * sizeof(float));
            beta = 1.0f;
        } else if (C <= SGEMM_SMALL_K) {
            /* Sub-tiles OpenBLAS takes by its small-matrix kernels, which write C instead of zeroing it
             * first (memset, then a read back) and do not pack: 3136 × 480 × 80 at 148 against 127
             * GFLOP/s, × 672 × 112 at 130 against 121. Fixed by the shape, so the bits do not depend on nth. */
            for (int r = 0; r < m; r += SGEMM_SMALL_ROWS)
                for (int c = 0; c < n; c += SGEMM_SMALL_COLS)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, imin(SGEMM_SMALL_ROWS, m - r),
                                imin(SGEMM_SMALL_COLS, n - c), C, 1.0f, inp + (m0 + (size_t)r) * C, C, w + c0 + c, OC,
                                0.0f, y + (size_t)r * OC + c, OC);
            continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, C, 1.0f, inp + m0 * C, C, w + c0, OC, beta, y,
                    OC);
    }
}

int conv_gemm1x1_bn_fusable(const struct conv_shape *s)
{
    return conv_algo_supported(CONV_ALGO_GEMM1X1, s) && gemm_rows_fits(s->C, s->OC);
}

/* Rows of one tile of SE-scaled input (conv_forward_gemm1x1_bn_se): about 32 KB, so the tile is still in
 * L1 when gemm_rows reads it back (96 channels: 80 rows, 240: 32). */
enum { SE_TILE_FLOATS = 8192 };

static size_t se_tile_rows(int C)
{
    const size_t r = SE_TILE_FLOATS / (size_t)C / 8 * 8;
    return r > 8 ? r : 8;
}

size_t conv_forward_se_rows_scratch_floats(const struct conv_shape *s) { return se_tile_rows(s->C) * (size_t)s->C; }

/* tile (rows, C) = x rows [r, r + rows) · scale[sample of the row]: se_scale_forward's products. */
static void se_rows_form(float *restrict tile, const struct conv_se_rows *se, size_t r, size_t rows, int C)
{
    for (size_t i = 0; i < rows; i++) {
        const float *restrict x = se->x + (r + i) * (size_t)C, *restrict sc = se->scale + (r + i) / se->HW * (size_t)C;
        float *restrict t = tile + i * (size_t)C;
        for (int c = 0; c < C; c++) t[c] = x[c] * sc[c];
    }
}

/* conv_forward_gemm1x1_bn, or with se (inp NULL) on x·s formed a tile at a time in scratch. */
static void gemm1x1_bn_forward(float *out, const float *inp, const struct conv_se_rows *se, const float *w,
                               const struct conv_shape *s, double *part, float *scratch, int ith, int nth)
{
    TB_ASSERT(conv_gemm1x1_bn_fusable(s) && (!se || se->HW == (size_t)s->H * s->W));
    const int C = s->C, OC = s->OC;
    const size_t M = (size_t)s->N * s->H * s->W, T = se ? se_tile_rows(C) : M;
    const int stream = gemm_stream(M, OC, nth);
    size_t k0, k1;
    /* Units are the BatchNorm's row chunks, each summed by one thread in row order. gemm_rows gives
     * every output the same bits whatever the rows of the call, so out equals conv_forward_gemm1x1's; and
     * it adds the statistics row after row, so a chunk's tiles give the whole chunk's sums. */
    tb_slice((size_t)bn_row_chunks(M), ith, nth, &k0, &k1);
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        bn_chunk_range(M, (int)k, &r0, &r1);
        double *pk = part + k * 2 * (size_t)OC;
        memset(pk, 0, 2 * (size_t)OC * sizeof *pk);
        for (size_t r = r0; r < r1; r += T) {
            const size_t m = r1 - r < T ? r1 - r : T;
            if (se) se_rows_form(scratch, se, r, m, C);
            gemm_rows(out + r * OC, OC, se ? scratch : inp + r * C, C, w, OC, m, C, OC, 0, stream, pk, pk + OC);
        }
    }
}

void conv_forward_gemm1x1_bn(float *out, const float *inp, const float *w, const struct conv_shape *s, double *part,
                             int ith, int nth)
{
    gemm1x1_bn_forward(out, inp, NULL, w, s, part, NULL, ith, nth);
}

void conv_forward_gemm1x1_bn_se(float *out, const struct conv_se_rows *se, const float *w, const struct conv_shape *s,
                                double *part, float *scratch, int ith, int nth)
{
    gemm1x1_bn_forward(out, NULL, se, w, s, part, scratch, ith, nth);
}

/* Callers keep each thread's own copy (at most 10,240 floats for gemm_rows' shapes), so no barrier is needed. */
void conv_transpose_w(float *restrict wt, const float *restrict w, int C, int OC)
{
    for (int c = 0; c < C; c++)
        for (int o = 0; o < OC; o++) wt[(size_t)o * C + c] = w[(size_t)c * OC + o];
}

/* wt here is this thread's wᵀ (OC,C) in scratch when gemm_rows runs the shape (NULL: sgemm). */
static void gemm1x1_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                  float *wt, int accumulate, int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    const struct gemm_tiles t = gemm_tiles_of((size_t)s->N * s->H * s->W, C, tb_units(s->par));
    const int stream = gemm_stream(t.M, C, nth);
    size_t lo, hi;
    tb_slice(t.ru * (size_t)t.cu, ith, nth, &lo, &hi);
    if (wt && lo < hi) conv_transpose_w(wt, w, C, OC);
    for (size_t u = lo; u < hi; u++) {
        size_t m0;
        int m, c0, n;
        gemm_tile(&t, u, &m0, &m, &c0, &n);
        if (wt) {
            gemm_rows(dinp + m0 * C + c0, C, dout + m0 * OC, OC, wt + c0, C, m, OC, n, accumulate, stream, NULL, NULL);
            continue;
        }
        /* dinp tile = beta·dinp tile + dout rows · (w rows c0..c0+n)ᵀ, w (C,OC) read transposed. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, OC, 1.0f, dout + m0 * OC, OC, w + (size_t)c0 * OC,
                    OC, accumulate ? 1.0f : 0.0f, dinp + m0 * C + c0, C);
    }
}

/* This thread's wᵀ scratch when gemm_rows runs the backward data, else NULL (sgemm). Accumulating
 * into wide dinp rows, sgemm wins (240 columns: 3.8 against 5.5 ms): it defers and prefetches its
 * reads of C. EfficientNet accumulates only into a block's input (narrow: the skip also reads it). */
static int gemm1x1_data_on_rows(const struct conv_shape *s, int accumulate)
{
    return gemm_rows_fits(s->OC, s->C) && (!accumulate || s->C <= GEMM_ROWS_ACC_MAX_COLS);
}

static float *gemm1x1_wt(const struct conv_shape *s, float *scratch, int accumulate)
{
    return gemm1x1_data_on_rows(s, accumulate) ? scratch : NULL;
}

void conv_backward_data_gemm1x1(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    gemm1x1_backward_data(dinp, dout, w, s, gemm1x1_wt(s, scratch, 1), 1, ith, nth);
}

void conv_backward_data_gemm1x1_overwrite(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                          float *scratch, int ith, int nth)
{
    gemm1x1_backward_data(dinp, dout, w, s, gemm1x1_wt(s, scratch, 0), 0, ith, nth);
}

void conv_backward_params_gemm1x1_acc(float *dw, float *db, const float *inp, const float *dout,
                                      const struct conv_shape *s, int acc, int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    const size_t M = (size_t)s->N * s->H * s->W;
    size_t lo, hi;
    /* dw (C,OC) += inpᵀ · dout, K = M reduced inside each call; units along the longer side of dw, an
     * even number of them (672 in 64-wide units was 11, which two threads ran 6:5), no more than the
     * machine's cores use: every call packs all of dout (or inp) again, and 784×1152ᵀ·784×320 in 18
     * units ran at 111–118 GFLOP/s against 137–150 in 2. */
    const int longer = OC >= C ? OC : C, cu = even_col_blocks(longer, tb_units(s->par));
    const float beta = acc ? 1.0f : 0.0f; /* 0: OpenBLAS zeroes C first, the bits of adding to zeros */
    tb_slice((size_t)cu, ith, nth, &lo, &hi);
    for (size_t u = lo; u < hi; u++) {
        int b0, n;
        col_block(longer, cu, (int)u, &b0, &n);
        if (OC >= C)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, n, (int)M, 1.0f, inp, C, dout + b0, OC, beta,
                        dw + b0, OC);
        else
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, OC, (int)M, 1.0f, inp + b0, C, dout, OC, beta,
                        dw + (size_t)b0 * OC, OC);
    }
    gemm1x1_bias_grad(db, dout, s, acc, ith, nth);
}

void conv_backward_params_gemm1x1(float *dw, float *db, const float *inp, const float *dout,
                                  const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch,
                                  int ith, int nth)
{
    (void)plan, (void)scratch;
    conv_backward_params_gemm1x1_acc(dw, db, inp, dout, s, 1, ith, nth);
}

/* Two-phase weight gradient: used when dw's longer side has fewer than GEMM_FEW_ROW_UNITS 64-wide
 * blocks (EfficientNet's 16–240-channel layers: 1–4 blocks, so one thread did most of the work) and there
 * are rows for at least two chunks. The chunk count depends on M and the machine, up to 16: chunks of
 * PARAMS_CHUNK_MIN_ROWS rows, or, where that gives fewer chunks than cores, of down to
 * PARAMS_CHUNK_FEW_ROWS rows, one a core (2,048 rows at 32×32 batch 128's stage 3: 4 chunks for 16 cores,
 * and the one-pass backward, data gradient included, went on 4 of them). */
enum { PARAMS_CHUNK_MIN_ROWS = 512, PARAMS_CHUNK_FEW_ROWS = 128, PARAMS_MAX_CHUNKS = 16 };

int conv_params_row_chunks(const struct conv_shape *s)
{
    const size_t M = (size_t)s->N * s->H * s->W;
    const int longer = s->C > s->OC ? s->C : s->OC;
    if (!conv_algo_supported(CONV_ALGO_GEMM1X1, s)) return 0;
    if ((longer + GEMM_COLS - 1) / GEMM_COLS >= GEMM_FEW_ROW_UNITS || M < 2 * (size_t)PARAMS_CHUNK_MIN_ROWS) return 0;
    size_t k = M / PARAMS_CHUNK_MIN_ROWS;
    const size_t par = (size_t)tb_units(s->par);
    if (k < par) {
        const size_t few = M / PARAMS_CHUNK_FEW_ROWS;
        k = few < par ? few : par;
    }
    return (int)(k < PARAMS_MAX_CHUNKS ? k : PARAMS_MAX_CHUNKS);
}

size_t conv_params_part_floats(const struct conv_shape *s)
{
    return (size_t)conv_params_row_chunks(s) * (size_t)s->C * (size_t)s->OC;
}

void conv_backward_params_gemm1x1_chunks(float *part, const float *inp, const float *dout, const struct conv_shape *s,
                                         int ith, int nth)
{
    const int C = s->C, OC = s->OC, K = conv_params_row_chunks(s);
    const size_t M = (size_t)s->N * s->H * s->W;
    size_t k0, k1;
    tb_slice((size_t)K, ith, nth, &k0, &k1);
    const int own = gemm_rows_fits(C, OC);
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        tb_slice(M, (int)k, K, &r0, &r1);
        float *pk = part + k * (size_t)C * OC;
        if (own) {
            memset(pk, 0, (size_t)C * OC * sizeof(float));
            gemm_rows_atb(pk, OC, inp + r0 * C, C, dout + r0 * OC, OC, r1 - r0, C, OC);
            continue;
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, (int)(r1 - r0), 1.0f, inp + r0 * C, C,
                    dout + r0 * OC, OC, 0.0f, pk, OC);
    }
}

int conv_backward_gemm1x1_fusable(const struct conv_shape *s, int accumulate)
{
    return conv_params_row_chunks(s) > 0 && gemm_rows_fits(s->C, s->OC) && gemm1x1_data_on_rows(s, accumulate);
}

/* Rows of dout per piece of the fused pass: 64-row multiples (gemm_rows_atb's panels, so a chunk's part
 * is summed in the same panels as in one call), ~100 KB of a 96-channel dout, still in L2. */
/* FUSED_BWD_PF_BYTES: dout (or dz) from which the fused backward prefetches its next piece (below). */
enum { FUSED_BWD_ROWS = 256, FUSED_BWD_PF_BYTES = 4 << 20 };

size_t conv_backward_gemm1x1_fused_scratch_floats(const struct conv_shape *s, int se)
{
    const size_t base = tb_align16((size_t)s->C * s->OC) + tb_align16((size_t)FUSED_BWD_ROWS * s->OC);
    return se ? base + (size_t)FUSED_BWD_ROWS * s->C + 2 * (size_t)s->C : base;
}

int conv_se_rows_aligned(const struct conv_shape *s, size_t HW)
{
    if (!conv_backward_gemm1x1_fusable(s, 0) || HW != (size_t)s->H * s->W) return 0;
    const int K = conv_params_row_chunks(s);
    const size_t M = (size_t)s->N * HW;
    for (int k = 1; k < K; k++) {
        size_t r0, r1;
        tb_slice(M, k, K, &r0, &r1);
        if (r0 % HW) return 0;
    }
    return 1;
}

/* acc (C doubles) += dinp rows [r, r + m) · x's, sample by sample: zeroed at a sample's first row, its dscale
 * written at its last (se_scale_backward's sums: per channel, rows in order, from zero). */
static void se_rows_dscale(double *restrict acc, const struct conv_se_rows *se, const float *dinp, size_t r, size_t m,
                           int C)
{
    for (size_t i = r; i < r + m; i++) {
        const size_t p = i % se->HW;
        if (p == 0)
            for (int c = 0; c < C; c++) acc[c] = 0.0;
        const float *restrict dy = dinp + i * (size_t)C, *restrict x = se->x + i * (size_t)C;
        for (int c = 0; c < C; c++) acc[c] += (double)dy[c] * (double)x[c];
        if (p == se->HW - 1) {
            float *restrict ds = se->dscale + i / se->HW * (size_t)C;
            for (int c = 0; c < C; c++) ds[c] = (float)acc[c];
        }
    }
}

void conv_backward_gemm1x1_fused_chunks(float *dinp, int accumulate, float *part, const float *inp,
                                        const float *dout, const struct conv_bn_dout *bn,
                                        const struct conv_se_rows *se, const float *w, const struct conv_shape *s,
                                        float *scratch, int ith, int nth)
{
    TB_ASSERT(conv_backward_gemm1x1_fusable(s, accumulate));
    TB_ASSERT(!se || (!accumulate && conv_se_rows_aligned(s, se->HW)));
    const int C = s->C, OC = s->OC, K = conv_params_row_chunks(s);
    const size_t M = (size_t)s->N * s->H * s->W;
    /* With se, dinp's rows are read back at once for dscale: in cache, not streamed past it. */
    const int stream = se && se->dscale ? 0 : gemm_stream(M, C, nth);
    size_t k0, k1;
    tb_slice((size_t)K, ith, nth, &k0, &k1);
    if (k0 >= k1) return;
    float *wt = scratch; /* this thread's wᵀ (OC, C), as gemm1x1_backward_data makes it */
    float *piece = scratch + tb_align16((size_t)C * OC); /* dout's rows formed from the BatchNorm's */
    float *xs = piece + tb_align16((size_t)FUSED_BWD_ROWS * OC); /* with se: the input rows x·s */
    double *acc = (double *)(xs + (size_t)FUSED_BWD_ROWS * C); /* with se: a sample's dscale sums */
    const int pf_next = M * (size_t)OC * sizeof(float) >= FUSED_BWD_PF_BYTES;
    conv_transpose_w(wt, w, C, OC);
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        tb_slice(M, (int)k, K, &r0, &r1);
        float *pk = part + k * (size_t)C * OC;
        memset(pk, 0, (size_t)C * OC * sizeof(float));
        for (size_t r = r0; r < r1; r += FUSED_BWD_ROWS) {
            const size_t m = r1 - r < FUSED_BWD_ROWS ? r1 - r : FUSED_BWD_ROWS;
            const float *dp = bn ? NULL : dout + r * OC, *ip = se ? xs : inp + r * C;
            if (bn) {
                bn_backward_rows(piece, bn->dz + r * OC, bn->x + r * OC, bn->save, bn->coef, m, OC);
                dp = piece;
            }
            if (se) se_rows_form(xs, se, r, m, C);
            gemm_rows(dinp + r * C, (size_t)C, dp, (size_t)OC, wt, (size_t)C, m, OC, C, accumulate, stream, NULL, NULL);
            if (se && se->dscale) se_rows_dscale(acc, se, dinp, r, m, C);
            /* Where dout streams from memory, the weight gradient's FMAs prefetch the next piece's dout (or
             * the dz and x it is formed from): read in a burst at the piece's start, its misses overlapped
             * nothing (one thread, batch 16: 112×112 16 → 96 with its BatchNorm 12.3–12.6 → 10.4–10.9 ms,
             * 56×56 24 → 144 6.0–6.2 → 5.7–6.0). From 4 MB of dout: a harness that kept the 12 MB of a 28×28
             * 40 → 240 layer in L3 said the prefetches cost more than they save (4.0–4.1 → 4.3–4.4 ms), but
             * in the step, where the layers before evict it, they win (3.78 → 3.52, 3.68 → 3.55 ms). */
            const size_t rn = r + m;
            const size_t nm = pf_next && rn < M ? (M - rn < FUSED_BWD_ROWS ? M - rn : FUSED_BWD_ROWS) : 0;
            const float *next0 = nm ? (bn ? bn->dz : dout) + rn * OC : NULL, *next1 = nm && bn ? bn->x + rn * OC : NULL;
            gemm_rows_atb_pf(pk, (size_t)OC, ip, (size_t)C, dp, (size_t)OC, m, C, OC, next0, nm * OC, next1,
                             next1 ? nm * OC : 0);
        }
    }
}

void conv_parts_sum_add(float *dst, const float *part, int K, size_t n, int add, int ith, int nth)
{
    size_t lo, hi;
    slice_units(n, 16, ith, nth, &lo, &hi);
    for (size_t e0 = lo; e0 < hi; e0 += 256) { /* 256-float blocks: the k loop outside, vectorised inside */
        const size_t ne = hi - e0 < 256 ? hi - e0 : 256;
        float sum[256];
        memcpy(sum, part + e0, ne * sizeof(float));
        for (int k = 1; k < K; k++) {
            const float *restrict p = part + (size_t)k * n + e0;
            for (size_t j = 0; j < ne; j++) sum[j] += p[j];
        }
        if (add)
            for (size_t j = 0; j < ne; j++) dst[e0 + j] += sum[j];
        else /* 0 + x: the bits of adding to a zeroed dst (a sum of −0 stays +0) */
            for (size_t j = 0; j < ne; j++) dst[e0 + j] = 0.0f + sum[j];
    }
}

void conv_backward_params_gemm1x1_finish(float *dw, float *db, const float *part, const float *dout,
                                         const struct conv_shape *s, int acc, int ith, int nth)
{
    conv_parts_sum_add(dw, part, conv_params_row_chunks(s), (size_t)s->C * s->OC, acc, ith, nth);
    gemm1x1_bias_grad(db, dout, s, acc, ith, nth);
}

/* ---------------------------------------------------------------------------------------------
 * IM2COL: patches (pixels, KH·KW·C/G per group) in scratch, one sgemm per group
 * ------------------------------------------------------------------------------------------- */

/* col rows [0, m1−m0) ← patches of output pixels [m0,m1) for groups [g0,g1); row layout
 * (g−g0, ky, kx, c) so each group's K-block is contiguous; ld = ldcol. Padding is zeros. */
static void im2col_gather(float *col, size_t ldcol, const float *inp, const struct conv_shape *s, size_t m0,
                          size_t m1, int g0, int g1)
{
    const int H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW, S = s->stride,
              P = s->pad, Cg = C / s->groups;
    const size_t Kg = (size_t)KH * KW * Cg, plane = (size_t)OH * OW;
    for (size_t m = m0; m < m1; m++) {
        const int n = (int)(m / plane), oy = (int)(m % plane) / OW, ox = (int)(m % plane) % OW;
        float *dst = col + (m - m0) * ldcol;
        for (int ky = 0; ky < KH; ky++) {
            const int iy = oy * S - P + ky;
            for (int kx = 0; kx < KW; kx++) {
                const int ix = ox * S - P + kx;
                const int valid = iy >= 0 && iy < H && ix >= 0 && ix < W;
                const float *src = inp + (((size_t)n * H + (valid ? iy : 0)) * W + (valid ? ix : 0)) * C;
                for (int g = g0; g < g1; g++) {
                    float *d = dst + (size_t)(g - g0) * Kg + ((size_t)ky * KW + kx) * Cg;
                    if (valid) memcpy(d, src + (size_t)g * Cg, (size_t)Cg * sizeof(float));
                    else memset(d, 0, (size_t)Cg * sizeof(float));
                }
            }
        }
    }
}

void conv_forward_im2col(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                         const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int G = s->groups, OC = s->OC, OCg = OC / G, Cg = s->C / G;
    const size_t M = (size_t)s->N * s->OH * s->OW, Kg = (size_t)s->KH * s->KW * Cg, ktot = Kg * G;
    const size_t mb = (size_t)im2col_chunk(s);
    size_t lo, hi;
    /* Whole chunks per thread: every chunk is the same sgemm whatever nth. */
    slice_units(M, mb, ith, nth, &lo, &hi);
    for (size_t m0 = lo; m0 < hi; m0 += mb) {
        const size_t m1 = m0 + mb < hi ? m0 + mb : hi;
        const int rows = (int)(m1 - m0);
        im2col_gather(scratch, ktot, inp, s, m0, m1, 0, G);
        float *y = out + m0 * OC;
        float beta = 0.0f;
        if (b) {
            for (int r = 0; r < rows; r++) memcpy(y + (size_t)r * OC, b, (size_t)OC * sizeof(float));
            beta = 1.0f;
        }
        for (int g = 0; g < G; g++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, OCg, (int)Kg, 1.0f, scratch + g * Kg,
                        (int)ktot, w + (size_t)g * OCg, OC, beta, y + (size_t)g * OCg, OC);
    }
}

void conv_backward_data_im2col(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                               const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW, S = s->stride,
              P = s->pad, G = s->groups, OC = s->OC, OCg = OC / G, Cg = C / G;
    const size_t Kg = (size_t)KH * KW * Cg, ktot = Kg * G;
    const int rb = imax(1, im2col_chunk(s) / OW); /* output rows per chunk */
    size_t r0, r1;
    tb_slice((size_t)s->N * H, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1;) {
        const int n = (int)(r / (size_t)H);
        const int ia = (int)(r - (size_t)n * H);
        const int ib = (int)((r1 < (size_t)(n + 1) * H ? r1 : (size_t)(n + 1) * H) - (size_t)n * H);
        r = (size_t)n * H + ib;
        /* Output rows whose receptive field touches dinp rows [ia, ib). */
        const int oy_a = imax(0, ceil_div(ia + P - KH + 1, S)), oy_b = imin(OH - 1, floor_div(ib - 1 + P, S));
        if (oy_a > oy_b) continue;
        /* Chunks aligned to absolute multiples of rb and computed whole, so dcol's bits do not depend
         * on where this thread's rows start; only the scatter is clipped to our rows. */
        for (int k = oy_a / rb; k <= oy_b / rb; k++) {
            const int cy0 = k * rb, cy1 = imin(OH, cy0 + rb);
            const int rows = (cy1 - cy0) * OW;
            const float *g0 = dout + (((size_t)n * OH + cy0) * OW) * OC;
            for (int g = 0; g < G; g++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, (int)Kg, OCg, 1.0f, g0 + (size_t)g * OCg,
                            OC, w + (size_t)g * OCg, OC, 0.0f, scratch + g * Kg, (int)ktot);
            for (int oy = imax(cy0, oy_a); oy <= imin(cy1 - 1, oy_b); oy++)
                for (int ky = 0; ky < KH; ky++) {
                    const int iy = oy * S - P + ky;
                    if (iy < ia || iy >= ib) continue;
                    for (int ox = 0; ox < OW; ox++) {
                        const float *src = scratch + ((size_t)(oy - cy0) * OW + ox) * ktot;
                        for (int kx = 0; kx < KW; kx++) {
                            const int ix = ox * S - P + kx;
                            if (ix < 0 || ix >= W) continue;
                            float *d = dinp + (((size_t)n * H + iy) * W + ix) * C;
                            for (int g = 0; g < G; g++) {
                                const float *sp = src + g * Kg + ((size_t)ky * KW + kx) * Cg;
                                float *dp = d + (size_t)g * Cg;
                                for (int c = 0; c < Cg; c++) dp[c] += sp[c];
                            }
                        }
                    }
                }
        }
    }
}

void conv_backward_params_im2col(float *dw, float *db, const float *inp, const float *dout,
                                 const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch,
                                 int ith, int nth)
{
    const int G = s->groups, OC = s->OC, OCg = OC / G, Cg = s->C / G;
    const size_t M = (size_t)s->N * s->OH * s->OW, Kg = (size_t)s->KH * s->KW * Cg;
    const size_t mb = (size_t)im2col_chunk(s);
    const struct oc_units u = oc_units_slice(s, ith, nth);
    if (u.u1 <= u.u0) return;
    const int gf = u.u0 / u.nu, gl = (u.u1 - 1) / u.nu; /* groups [gf, gl] touched */
    const size_t ldcol = (size_t)(gl - gf + 1) * Kg;
    /* Pixel chunks from 0 in steps of mb for every thread: the same K-split of the reduction. */
    for (size_t m0 = 0; m0 < M; m0 += mb) {
        const size_t m1 = m0 + mb < M ? m0 + mb : M;
        im2col_gather(scratch, ldcol, inp, s, m0, m1, gf, gl + 1);
        /* One call per 16-column unit: the same call whatever nth (see GEMM_ROWS). */
        for (int unit = u.u0; unit < u.u1; unit++) {
            const int g = unit / u.nu, oa = (unit % u.nu) * 16, ob = imin(OCg, oa + 16);
            const size_t o = (size_t)g * OCg + oa;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Kg, ob - oa, (int)(m1 - m0), 1.0f,
                        scratch + (size_t)(g - gf) * Kg, (int)ldcol, dout + m0 * OC + o, OC, 1.0f, dw + o, OC);
        }
    }
    if (db)
        for (int g = gf; g <= gl; g++) {
            const int oa = g == gf ? (u.u0 % u.nu) * 16 : 0;
            const int ob = g == gl ? imin(OCg, ((u.u1 - 1) % u.nu + 1) * 16) : OCg;
            bias_grad_cols(db, dout, M, OC, g * OCg + oa, g * OCg + ob, 1);
        }
}

/* ---------------------------------------------------------------------------------------------
 * DIRECT: vectorised over a 16-channel block (NV vectors of VL lanes) of output (or input) channels
 * of a group, register-blocked over pixels. Full blocks use plain loads/stores, the last block of a
 * group masked ones (AVX2 masked stores are slow).
 * ------------------------------------------------------------------------------------------- */

#include "simd_vec.h"

/* Vectors per 16-channel block, and pixels per register block (NV·RBX accumulators = 8). */
#define NV (16 / VL)
#define RBX (8 / NV)

/* RB output pixels ox0, ox0+1, … of row (n, oy), output channels [o, o+nch) (nch ≤ 16·NVB/NV) of group g:
 * acc = bias + Σ_{ky,kx,c} inp·w in that order. CHECK skips taps whose column is outside the image.
 * wg = w + o, bg = b + o (or NULL), orow = output row + o. NVB vectors a block: NV, or 2·NV for 32-channel
 * blocks (direct_fwd_wide), whose broadcast input feeds both halves. */
CV_INLINE void direct_fwd_px(float *orow, const float *img, const float *wg, const float *bg, int nch,
                             const struct conv_shape *s, int g, int oy, int ox0, int ky0, int ky1, const int RB,
                             const int CHECK, const int FULL, const int NVB)
{
    const int W = s->W, C = s->C, OC = s->OC, KW = s->KW, S = s->stride, P = s->pad, Cg = C / s->groups;
    vmask m[2 * NV];
    vf acc[8][2 * NV];
    for (int v = 0; v < NVB; v++) {
        m[v] = vmask_n(nch - v * VL);
        const vf bv = bg ? VLD(m[v], bg + v * VL) : VZERO();
        for (int j = 0; j < RB; j++) acc[j][v] = bv;
    }
    for (int ky = ky0; ky < ky1; ky++) {
        const float *irow = img + (size_t)(oy * S - P + ky) * W * C + (size_t)g * Cg;
        for (int kx = 0; kx < KW; kx++) {
            const int ix = ox0 * S - P + kx;
            if (CHECK && (ix < 0 || ix >= W)) continue;
            const float *wt = wg + ((size_t)ky * KW + kx) * Cg * OC;
            const float *ip = irow + (ptrdiff_t)ix * C;
            for (int c = 0; c < Cg; c++) {
                vf wv[2 * NV];
                for (int v = 0; v < NVB; v++) wv[v] = VLD(m[v], wt + (size_t)c * OC + v * VL);
                for (int j = 0; j < RB; j++) {
                    const vf x = VSET1(ip[(size_t)j * S * C + c]);
                    for (int v = 0; v < NVB; v++) acc[j][v] = VFMA(x, wv[v], acc[j][v]);
                }
            }
        }
    }
    for (int j = 0; j < RB; j++)
        for (int v = 0; v < NVB; v++) VST(orow + (size_t)(ox0 + j) * OC + v * VL, m[v], acc[j][v]);
}

/* One output block (16·NVB/NV channels) of one output row: borders with checks, interior in register
 * blocks. */
CV_INLINE void direct_fwd_block(float *orow, const float *img, const float *wg, const float *bg, int nch,
                                const struct conv_shape *s, int g, int oy, int ky0, int ky1, int ox_lo, int ox_hi,
                                const int FULL, const int NVB)
{
    int ox = 0;
    for (; ox < ox_lo; ox++) direct_fwd_px(orow, img, wg, bg, nch, s, g, oy, ox, ky0, ky1, 1, 1, FULL, NVB);
    for (; ox + RBX <= ox_hi; ox += RBX)
        direct_fwd_px(orow, img, wg, bg, nch, s, g, oy, ox, ky0, ky1, RBX, 0, FULL, NVB);
    for (; ox < ox_hi; ox++) direct_fwd_px(orow, img, wg, bg, nch, s, g, oy, ox, ky0, ky1, 1, 0, FULL, NVB);
    for (; ox < s->OW; ox++) direct_fwd_px(orow, img, wg, bg, nch, s, g, oy, ox, ky0, ky1, 1, 1, FULL, NVB);
}

/* 32-channel blocks where a group's outputs come in whole ones and a vector holds 16 lanes (with 8, the
 * 2·RBX·NV accumulators would not fit the registers): each broadcast input feeds two FMAs, each sum's
 * order unchanged. The stem (3 → 32), one thread, alternating: 224×224 batch 16 3.5–3.8 → 2.6–3.1 ms,
 * 32×32 batch 128 0.9–1.1 → 0.55–0.7; in the 224 step 3.35–3.61 → 2.48–2.62. Non-temporal stores of its
 * 25.7 MB output made the stem faster still (2.1–2.2) and the two passes that read it back slower by as
 * much: not kept. */
static int direct_fwd_wide(int OCg) { return NV == 1 && OCg % 32 == 0; }

void conv_forward_direct(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                         const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW, S = s->stride,
              P = s->pad, G = s->groups, OC = s->OC, OCg = OC / G;
    int ox_lo = imin(OW, ceil_div(P, S)), ox_hi = imin(OW, floor_div(W - KW + P, S) + 1);
    if (ox_hi < ox_lo) ox_hi = ox_lo;
    size_t r0, r1;
    tb_slice((size_t)s->N * OH, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)OH), oy = (int)(r % (size_t)OH);
        const int ky0 = imax(0, P - oy * S), ky1 = imin(KH, H + P - oy * S);
        const float *img = inp + (size_t)n * H * W * C;
        for (int g = 0; g < G; g++) {
            if (direct_fwd_wide(OCg)) {
                for (int oc0 = 0; oc0 < OCg; oc0 += 32) {
                    const size_t o = (size_t)g * OCg + oc0;
                    direct_fwd_block(out + r * (size_t)OW * OC + o, img, w + o, b ? b + o : NULL, 32, s, g, oy, ky0,
                                     ky1, ox_lo, ox_hi, 1, 2 * NV);
                }
                continue;
            }
            for (int oc0 = 0; oc0 < OCg; oc0 += 16) {
                const size_t o = (size_t)g * OCg + oc0;
                const int nch = imin(16, OCg - oc0);
                float *orow = out + r * (size_t)OW * OC + o;
                const float *bo = b ? b + o : NULL;
                if (nch == 16) direct_fwd_block(orow, img, w + o, bo, nch, s, g, oy, ky0, ky1, ox_lo, ox_hi, 1, NV);
                else direct_fwd_block(orow, img, w + o, bo, nch, s, g, oy, ky0, ky1, ox_lo, ox_hi, 0, NV);
            }
        }
    }
}

/* RB dinp pixels ix = e + S·(t0+j) of one row, input channels [c, c+nch) of group g:
 * acc = Σ over the row's valid (ky, oy), the class's taps kx, and o of dout·w, in that order;
 * ox = t + (e+P−kx)/S. CHECK skips taps with ox outside [0, OW). wt is w transposed per tap,
 * (KH·KW, OC, C/G), offset to channel c; drow is offset to channel g·Cg + c. */
CV_INLINE void direct_bwd_px(float *drow, const float *const *grows, const int *kys, int nk, const float *wt, int nch,
                             const struct conv_shape *s, int g, int e, int t0, const int RB, const int CHECK,
                             const int FULL)
{
    const int C = s->C, OC = s->OC, OW = s->OW, KW = s->KW, S = s->stride, P = s->pad, G = s->groups,
              OCg = OC / G, Cg = C / G;
    vmask m[NV];
    vf acc[8][NV];
    for (int v = 0; v < NV; v++) {
        m[v] = vmask_n(nch - v * VL);
        for (int j = 0; j < RB; j++) acc[j][v] = VZERO();
    }
    for (int i = 0; i < nk; i++)
        for (int kx = 0; kx < KW; kx++) {
            const int u = e + P - kx;
            if (u % S) continue; /* tap not in this residue class (sign of % is irrelevant here) */
            const int ox0 = t0 + u / S;
            if (CHECK && (ox0 < 0 || ox0 >= OW)) continue;
            const float *gp = grows[i] + (ptrdiff_t)ox0 * OC + (size_t)g * OCg;
            const float *wp = wt + (((size_t)kys[i] * KW + kx) * OC + (size_t)g * OCg) * Cg;
            for (int o = 0; o < OCg; o++) {
                vf wv[NV];
                for (int v = 0; v < NV; v++) wv[v] = VLD(m[v], wp + (size_t)o * Cg + v * VL);
                for (int j = 0; j < RB; j++) {
                    const vf x = VSET1(gp[(size_t)j * OC + o]);
                    for (int v = 0; v < NV; v++) acc[j][v] = VFMA(x, wv[v], acc[j][v]);
                }
            }
        }
    for (int j = 0; j < RB; j++)
        for (int v = 0; v < NV; v++) {
            float *dp = drow + (size_t)(e + S * (t0 + j)) * C + v * VL;
            VST(dp, m[v], VADD(VLD(m[v], dp), acc[j][v]));
        }
}

/* One 16-channel input block of residue class e of one dinp row. */
CV_INLINE void direct_bwd_block(float *drow, const float *const *grows, const int *kys, int nk, const float *wt,
                                int nch, const struct conv_shape *s, int g, int e, int t_lo, int t_hi, int nt,
                                const int FULL)
{
    int t = 0;
    for (; t < t_lo; t++) direct_bwd_px(drow, grows, kys, nk, wt, nch, s, g, e, t, 1, 1, FULL);
    for (; t + RBX <= t_hi; t += RBX) direct_bwd_px(drow, grows, kys, nk, wt, nch, s, g, e, t, RBX, 0, FULL);
    for (; t < t_hi; t++) direct_bwd_px(drow, grows, kys, nk, wt, nch, s, g, e, t, 1, 0, FULL);
    for (; t < nt; t++) direct_bwd_px(drow, grows, kys, nk, wt, nch, s, g, e, t, 1, 1, FULL);
}

void conv_backward_data_direct(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                               const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW, S = s->stride,
              P = s->pad, G = s->groups, OC = s->OC, OCg = OC / G, Cg = C / G;
    /* wt (KH·KW, OC, Cg): each tap's (Cg × OCg) block per group transposed so c is contiguous. */
    float *wt = scratch;
    for (int t = 0; t < KH * KW; t++)
        for (int g = 0; g < G; g++)
            for (int c = 0; c < Cg; c++)
                for (int o = 0; o < OCg; o++)
                    wt[((size_t)t * OC + (size_t)g * OCg + o) * Cg + c] =
                        w[((size_t)t * Cg + c) * OC + (size_t)g * OCg + o];
    size_t r0, r1;
    tb_slice((size_t)s->N * H, ith, nth, &r0, &r1);
    const float *grows[64];
    int kys[64];
    TB_ASSERT(KH <= 64);
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)H), iy = (int)(r % (size_t)H);
        int nk = 0;
        for (int ky = 0; ky < KH; ky++) {
            const int u = iy + P - ky;
            if (u < 0 || u % S || u / S >= OH) continue;
            kys[nk] = ky;
            grows[nk++] = dout + ((size_t)n * OH + u / S) * (size_t)OW * OC;
        }
        if (!nk) continue;
        float *drow = dinp + r * (size_t)W * C;
        for (int e = 0; e < S && e < W; e++) {
            /* Class e: pixels ix = e + S·t, t in [0, nt). Interior t: all class taps in range. */
            const int nt = (W - e + S - 1) / S;
            int t_lo = 0, t_hi = nt, any = 0;
            for (int kx = 0; kx < KW; kx++) {
                const int u = e + P - kx;
                if (u % S) continue;
                any = 1;
                t_lo = imax(t_lo, -(u / S));
                t_hi = imin(t_hi, OW - u / S);
            }
            if (!any) continue;
            t_lo = imin(t_lo, nt);
            if (t_hi < t_lo) t_hi = t_lo;
            for (int g = 0; g < G; g++)
                for (int c0 = 0; c0 < Cg; c0 += 16) {
                    const int nch = imin(16, Cg - c0);
                    float *dr = drow + (size_t)g * Cg + c0;
                    if (nch == 16) direct_bwd_block(dr, grows, kys, nk, wt + c0, nch, s, g, e, t_lo, t_hi, nt, 1);
                    else direct_bwd_block(dr, grows, kys, nk, wt + c0, nch, s, g, e, t_lo, t_hi, nt, 0);
                }
        }
    }
}

/* tot[(c0+j)·NV + v] += Σ_{ox in [oxa,oxb)} inp[iy][ix(ox)][c0+j] · dout[ox][block v] for j < CB:
 * one row's partial sums in registers, then added to the totals. irow is offset to the group's
 * channel 0, drow to the output block. */
CV_INLINE void direct_params_cb(vf *tot, const float *irow, const float *drow, const vmask *m,
                                const struct conv_shape *s, int kx, int oxa, int oxb, int c0, const int CB,
                                const int FULL)
{
    const int C = s->C, OC = s->OC, S = s->stride, P = s->pad;
    vf acc[8][NV];
    for (int j = 0; j < CB; j++)
        for (int v = 0; v < NV; v++) acc[j][v] = VZERO();
    for (int ox = oxa; ox < oxb; ox++) {
        vf d[NV];
        for (int v = 0; v < NV; v++) d[v] = VLD(m[v], drow + (size_t)ox * OC + v * VL);
        const float *ip = irow + (size_t)(ox * S - P + kx) * C + c0;
        for (int j = 0; j < CB; j++) {
            const vf x = VSET1(ip[j]);
            for (int v = 0; v < NV; v++) acc[j][v] = VFMA(x, d[v], acc[j][v]);
        }
    }
    for (int j = 0; j < CB; j++)
        for (int v = 0; v < NV; v++) tot[(size_t)(c0 + j) * NV + v] = VADD(tot[(size_t)(c0 + j) * NV + v], acc[j][v]);
}

/* dW and db of one 16-wide output block [o, o+nch) of group g, over the whole batch. */
CV_INLINE void direct_params_unit(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s,
                                  vf *tot, int g, size_t o, int nch, const int FULL)
{
    const int N = s->N, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW,
              S = s->stride, P = s->pad, OC = s->OC, Cg = C / s->groups;
    vmask m[NV];
    vf tb[NV];
    for (int v = 0; v < NV; v++) m[v] = vmask_n(nch - v * VL), tb[v] = VZERO();
    for (int i = 0; i < KH * KW * Cg * NV; i++) tot[i] = VZERO();
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < OH; oy++) {
            const float *drow = dout + (((size_t)n * OH + oy) * OW) * OC + o;
            if (db)
                for (int v = 0; v < NV; v++) {
                    vf part = VZERO();
                    for (int ox = 0; ox < OW; ox++) part = VADD(part, VLD(m[v], drow + (size_t)ox * OC + v * VL));
                    tb[v] = VADD(tb[v], part);
                }
            for (int ky = 0; ky < KH; ky++) {
                const int iy = oy * S - P + ky;
                if (iy < 0 || iy >= H) continue;
                const float *irow = inp + (((size_t)n * H + iy) * W) * C + (size_t)g * Cg;
                for (int kx = 0; kx < KW; kx++) {
                    const int oxa = imax(0, ceil_div(P - kx, S)), oxb = imin(OW, floor_div(W - 1 + P - kx, S) + 1);
                    if (oxb <= oxa) continue;
                    vf *tt = tot + ((size_t)ky * KW + kx) * Cg * NV;
                    int c0 = 0;
                    for (; c0 + RBX <= Cg; c0 += RBX)
                        direct_params_cb(tt, irow, drow, m, s, kx, oxa, oxb, c0, RBX, FULL);
                    /* The last Cg % RBX channels in one call, so their FMA chains interleave: the stem's 3
                     * channels one at a time were two dependent chains per call (224×224 batch 16: 17 ms). */
                    switch (Cg - c0) {
                    case 0: break;
                    case 1: direct_params_cb(tt, irow, drow, m, s, kx, oxa, oxb, c0, 1, FULL); break;
                    case 2: direct_params_cb(tt, irow, drow, m, s, kx, oxa, oxb, c0, 2, FULL); break;
                    case 3: direct_params_cb(tt, irow, drow, m, s, kx, oxa, oxb, c0, 3, FULL); break;
                    default:
                        for (; c0 < Cg; c0++) direct_params_cb(tt, irow, drow, m, s, kx, oxa, oxb, c0, 1, FULL);
                    }
                }
            }
        }
    for (int i = 0; i < KH * KW * Cg; i++)
        for (int v = 0; v < NV; v++) {
            float *p = dw + (size_t)i * OC + o + v * VL;
            VST(p, m[v], VADD(VLD(m[v], p), tot[(size_t)i * NV + v]));
        }
    if (db)
        for (int v = 0; v < NV; v++) VST(db + o + v * VL, m[v], VADD(VLD(m[v], db + o + v * VL), tb[v]));
}

/* Whether conv_backward_params_direct takes shape s (db NULL) by direct_params_stem: a 3×3 convolution of
 * 3 input channels, no groups, whole 16-wide output blocks. */
static int direct_params_stem_shape(const struct conv_shape *s)
{
    return NV == 1 && s->KH == 3 && s->KW == 3 && s->C == 3 && s->groups == 1 && s->OC % 16 == 0;
}

/* The stem's weight gradient for NU (1 or 2) consecutive 16-wide output blocks from o: per input row all
 * 9 (tap column, channel) pairs at once over the columns where every tap is inside (9·NU FMA chains per
 * dout vector, against direct_params_cb's 3, whose latency bound it), then each tap column's border
 * columns by direct_params_cb, each sum added into the totals as direct_params_unit does. Each channel's arithmetic is the
 * same for NU 1 and 2, so taking two blocks together (one thread) or apart gives the same bits. */
CV_INLINE void direct_params_stem(float *dw, const float *inp, const float *dout, const struct conv_shape *s,
                                  size_t o, size_t r0, size_t r1, const int NU, int store)
{
    const int H = s->H, W = s->W, OH = s->OH, OW = s->OW, S = s->stride, P = s->pad, OC = s->OC;
    const vmask m = vmask_n(VL);
    const int FULL = 1;
    const int ia = imin(OW, ceil_div(P, S)), ib = imax(ia, imin(OW, floor_div(W - 3 + P, S) + 1));
    vf tot[2][27];
    for (int u = 0; u < NU; u++)
        for (int t = 0; t < 27; t++) tot[u][t] = VZERO();
    for (size_t r = r0; r < r1; r++) {
        const int n = (int)(r / (size_t)OH), oy = (int)(r % (size_t)OH);
        const float *drow = dout + (((size_t)n * OH + oy) * OW) * OC + o;
        for (int ky = 0; ky < 3; ky++) {
            const int iy = oy * S - P + ky;
            if (iy < 0 || iy >= H) continue;
            const float *irow = inp + (((size_t)n * H + iy) * W) * 3;
            vf acc[2][9];
            for (int u = 0; u < NU; u++)
                for (int t = 0; t < 9; t++) acc[u][t] = VZERO();
            for (int ox = ia; ox < ib; ox++) {
                vf d[2];
                for (int u = 0; u < NU; u++) d[u] = VLD(m, drow + (size_t)ox * OC + (size_t)u * 16);
                const float *ip = irow + (size_t)(ox * S - P) * 3;
                for (int t = 0; t < 9; t++) { /* tap column t / 3, channel t % 3 */
                    const vf x = VSET1(ip[t]);
                    for (int u = 0; u < NU; u++) acc[u][t] = VFMA(x, d[u], acc[u][t]);
                }
            }
            for (int u = 0; u < NU; u++)
                for (int t = 0; t < 9; t++) tot[u][ky * 9 + t] = VADD(tot[u][ky * 9 + t], acc[u][t]);
            for (int kx = 0; kx < 3; kx++) { /* the border columns: direct_params_cb's sums */
                const int oxa = imax(0, ceil_div(P - kx, S)), oxb = imin(OW, floor_div(W - 1 + P - kx, S) + 1);
                for (int u = 0; u < NU; u++) {
                    vf *tt = tot[u] + ky * 9 + kx * 3;
                    const float *du = drow + (size_t)u * 16;
                    if (oxa < imin(ia, oxb)) direct_params_cb(tt, irow, du, &m, s, kx, oxa, imin(ia, oxb), 0, 3, 1);
                    if (imax(ib, oxa) < oxb) direct_params_cb(tt, irow, du, &m, s, kx, imax(ib, oxa), oxb, 0, 3, 1);
                }
            }
        }
    }
    for (int u = 0; u < NU; u++)
        for (int t = 0; t < 27; t++) { /* tot index ky·9 + kx·3 + c = dw's row (ky·KW + kx)·C + c */
            float *p = dw + (size_t)t * OC + o + (size_t)u * 16;
            VST(p, m, store ? tot[u][t] : VADD(VLD(m, p), tot[u][t]));
        }
}

void conv_backward_params_direct(float *dw, float *db, const float *inp, const float *dout,
                                 const struct conv_shape *s, const struct conv_fft_plan *plan, float *scratch,
                                 int ith, int nth)
{
    const int OCg = s->OC / s->groups;
    const struct oc_units u = oc_units_slice(s, ith, nth);
    if (!db && direct_params_stem_shape(s)) {
        const size_t rows = (size_t)s->N * s->OH;
        int unit = u.u0;
        for (; unit + 2 <= u.u1; unit += 2) direct_params_stem(dw, inp, dout, s, (size_t)unit * 16, 0, rows, 2, 0);
        if (unit < u.u1) direct_params_stem(dw, inp, dout, s, (size_t)unit * 16, 0, rows, 1, 0);
        return;
    }
    vf *tot = (vf *)(void *)scratch; /* (KH·KW·Cg·NV) vectors = KH·KW·Cg·16 floats */
    for (int unit = u.u0; unit < u.u1; unit++) {
        const int g = unit / u.nu, oc0 = (unit % u.nu) * 16, nch = imin(16, OCg - oc0);
        const size_t o = (size_t)g * OCg + oc0;
        if (nch == 16) direct_params_unit(dw, db, inp, dout, s, tot, g, o, nch, 1);
        else direct_params_unit(dw, db, inp, dout, s, tot, g, o, nch, 0);
    }
}

/* The stem has 32 output channels, two 16-wide units: cut by output channels alone, 2 of 16 threads did
 * its weight gradient (the simulated 16-core split, BENCHMARKS.md: ~30 % of the core-time lost at
 * 224×224). So the N·OH output rows are cut too, into chunks fixed by the shape, each (chunk, unit pair)
 * an item writing its own part; the parts are added in chunk order after a barrier. */
enum { STEM_CHUNK_MIN_ROWS = 32 };

int conv_direct_params_row_chunks(const struct conv_shape *s)
{
    if (!direct_params_stem_shape(s)) return 0;
    const size_t k = (size_t)s->N * s->OH / STEM_CHUNK_MIN_ROWS;
    return k < 2 ? 0 : (int)(k < PARAMS_MAX_CHUNKS ? k : PARAMS_MAX_CHUNKS);
}

size_t conv_direct_params_part_floats(const struct conv_shape *s)
{
    return (size_t)conv_direct_params_row_chunks(s) * s->KH * s->KW * s->C * (size_t)s->OC;
}

void conv_backward_params_direct_chunks(float *part, const float *inp, const float *dout, const struct conv_shape *s,
                                        int ith, int nth)
{
    const int K = conv_direct_params_row_chunks(s), nu = s->OC / 16, pairs = (nu + 1) / 2;
    TB_ASSERT(K > 0);
    const size_t rows = (size_t)s->N * s->OH, per = (size_t)s->KH * s->KW * s->C * s->OC;
    size_t i0, i1;
    tb_slice((size_t)K * pairs, ith, nth, &i0, &i1);
    for (size_t i = i0; i < i1; i++) {
        const int k = (int)(i / (size_t)pairs), p = (int)(i % (size_t)pairs);
        size_t r0, r1;
        tb_slice(rows, k, K, &r0, &r1);
        float *pk = part + (size_t)k * per;
        if (2 * p + 2 <= nu) direct_params_stem(pk, inp, dout, s, (size_t)p * 32, r0, r1, 2, 1);
        else direct_params_stem(pk, inp, dout, s, (size_t)p * 32, r0, r1, 1, 1);
    }
}

void conv_backward_params_direct_finish(float *dw, const float *part, const struct conv_shape *s, int ith, int nth)
{
    conv_parts_sum_add(dw, part, conv_direct_params_row_chunks(s), (size_t)s->KH * s->KW * s->C * s->OC, 1, ith, nth);
}

size_t conv_params_parts_floats(enum conv_algo a, const struct conv_shape *s)
{
    if (a == CONV_ALGO_GEMM1X1) return conv_params_part_floats(s);
    if (a == CONV_ALGO_DIRECT) return conv_direct_params_part_floats(s);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Naive references
 * ------------------------------------------------------------------------------------------- */

void conv_forward_ref(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s)
{
    const int Cg = s->C / s->groups, OCg = s->OC / s->groups;
    for (int n = 0; n < s->N; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int o = 0; o < s->OC; o++) {
                    const int g = o / OCg;
                    double acc = b ? b[o] : 0.0;
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++)
                            for (int c = 0; c < Cg; c++) {
                                const int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                                if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                                acc += (double)inp[(((size_t)n * s->H + iy) * s->W + ix) * s->C + g * Cg + c] *
                                       w[(((size_t)ky * s->KW + kx) * Cg + c) * s->OC + o];
                            }
                    out[(((size_t)n * s->OH + oy) * s->OW + ox) * s->OC + o] = (float)acc;
                }
}

void conv_backward_data_ref(float *dinp, const float *dout, const float *w, const struct conv_shape *s)
{
    const int Cg = s->C / s->groups, OCg = s->OC / s->groups;
    for (int n = 0; n < s->N; n++)
        for (int oy = 0; oy < s->OH; oy++)
            for (int ox = 0; ox < s->OW; ox++)
                for (int o = 0; o < s->OC; o++) {
                    const int g = o / OCg;
                    const float d = dout[(((size_t)n * s->OH + oy) * s->OW + ox) * s->OC + o];
                    for (int ky = 0; ky < s->KH; ky++)
                        for (int kx = 0; kx < s->KW; kx++)
                            for (int c = 0; c < Cg; c++) {
                                const int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                                if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                                dinp[(((size_t)n * s->H + iy) * s->W + ix) * s->C + g * Cg + c] +=
                                    d * w[(((size_t)ky * s->KW + kx) * Cg + c) * s->OC + o];
                            }
                }
}

void conv_backward_params_ref(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s)
{
    const int Cg = s->C / s->groups, OCg = s->OC / s->groups;
    for (int ky = 0; ky < s->KH; ky++)
        for (int kx = 0; kx < s->KW; kx++)
            for (int c = 0; c < Cg; c++)
                for (int o = 0; o < s->OC; o++) {
                    const int g = o / OCg;
                    double acc = 0.0;
                    for (int n = 0; n < s->N; n++)
                        for (int oy = 0; oy < s->OH; oy++)
                            for (int ox = 0; ox < s->OW; ox++) {
                                const int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                                if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W) continue;
                                acc += (double)inp[(((size_t)n * s->H + iy) * s->W + ix) * s->C + g * Cg + c] *
                                       dout[(((size_t)n * s->OH + oy) * s->OW + ox) * s->OC + o];
                            }
                    dw[(((size_t)ky * s->KW + kx) * Cg + c) * s->OC + o] += (float)acc;
                }
    if (db)
        for (int o = 0; o < s->OC; o++) {
            double acc = 0.0;
            for (size_t i = 0; i < (size_t)s->N * s->OH * s->OW; i++) acc += dout[i * s->OC + o];
            db[o] += (float)acc;
        }
}
