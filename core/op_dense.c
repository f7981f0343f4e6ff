/* op_dense.c — dense layer kernels: sgemm on the thread's slice, vector kernels for N = 1.
 *
 * Partitioning is by the output written, never along K; batched work goes in fixed tiles (below), so
 * any nth gives the same bits as nth = 1.
 */
#include "op_dense.h"

#include "layout.h"
#include "simd.h"

#include <cblas.h>
#include <string.h>

/* sgemm's result for one element depends on the call's M and N (OpenBLAS picks micro-kernels and edge
 * paths by size), so batched work is cut into tiles whose shape depends on the op's shape only, never
 * on nth: each thread runs whole tiles, one sgemm call each, and the bits do not depend on the thread
 * count. Tiles are large (every call repacks the weight panel): 64 rows, or for small N column tiles, as many
 * as the machine's cores use (col_tile). */
enum { ROW_TILE = 64, COL_TILE = 32 };

/* Rows when there are at least two row tiles, else columns: a function of N only. */
static int split_rows(int N) { return N >= 2 * ROW_TILE; }

/* Column tile width for n columns: as many tiles as par units (tb_units: the machine's cores) use, each a
 * multiple of 8 and at least COL_TILE wide. 32-wide tiles cut an SE expansion (48 → 1152) at batch 64
 * into 36 sgemm calls of 64×32×48, which ran at half the speed of two calls at batch 128. */
static int col_tile(int n, int par)
{
    const int u = tb_units(par), w = ((n + u - 1) / u + 7) / 8 * 8;
    return w > COL_TILE ? w : COL_TILE;
}

/* Runs the body (variadic, so commas are fine) for each tile [t0,t1) of [0,n) that thread ith owns. */
#define FOR_TILES(n, tile, ith, nth, t0, t1, ...)                                                  \
    do {                                                                                            \
        size_t tlo_, thi_;                                                                          \
        tb_slice(((size_t)(n) + (tile) - 1) / (tile), ith, nth, &tlo_, &thi_);                     \
        for (size_t k_ = tlo_; k_ < thi_; k_++) {                                                   \
            const size_t t0 = k_ * (tile), t1 = t0 + (tile) < (size_t)(n) ? t0 + (tile) : (size_t)(n); \
            __VA_ARGS__;                                                                            \
        }                                                                                           \
    } while (0)

/* Tiles of an R × n output of a batched pass split by rows (split_rows(R)): ROW_TILE-row tiles, or where
 * those are fewer than the machine's cores (an SE layer at batch 128: 2 tiles for 16 cores, which left 14
 * idle: the simulated 16-core split, BENCHMARKS.md), column tiles as many as the cores want, where the
 * output is wide enough for them (16 columns each) and the weights are large; else whole-width row tiles
 * down to 8 rows first, and columns only if those are still too few. Whole rows because narrow column
 * tiles ran the sgemm kernels' edge paths (1152 → 48 at batch 128 on 16 cores: 3 columns × 6 rows, 18 tiles,
 * 182 µs of work and 22.4 on the busiest of 16 threads; 16 whole-width 8-row tiles: 176 and 11.2), and
 * because a thread that owns whole rows can carry them through the next per-sample layer without waiting
 * for the others (the SE chain, dense_row_tile). Large weights (over DENSE_ROWS_FIRST floats) with a wide
 * output keep the column tiles: each 8-row tile repacks all the weights (1152 × 48's data gradient, 1152
 * wide: 183 → 493 µs of work). Edges on multiples of 8. By the shape and the machine, never nth; at 2 cores
 * always the ROW_TILE tiles. */
enum { DENSE_ROWS_FIRST = 10240 };

struct dense_tiles {
    int R, n;   /* output rows and columns */
    int th, tw; /* tile height and width */
    int rt, ct; /* row and column tiles */
};

static int round8(int v) { return (v + 7) / 8 * 8; }

/* wfloats: the layer's IN·OUT; par_units: the shape's .par. */
static struct dense_tiles dense_tiles_of(int R, int n, long wfloats, int par_units)
{
    struct dense_tiles t = {.R = R, .n = n, .th = ROW_TILE, .tw = n, .rt = (R + ROW_TILE - 1) / ROW_TILE, .ct = 1};
    const int par = tb_units(par_units);
    if (t.rt >= par) return t;
    const int cap = n / 16 > 1 ? n / 16 : 1; /* column tiles of at least 16 */
    int ct = (par + t.rt - 1) / t.rt;
    if (wfloats <= DENSE_ROWS_FIRST || cap < ct) {
        int rt = par < R / 8 ? par : R / 8;
        if (rt < t.rt) rt = t.rt;
        t.th = round8((R + rt - 1) / rt), t.rt = (R + t.th - 1) / t.th;
        if (t.rt >= par) return t;
        ct = (par + t.rt - 1) / t.rt;
        if (ct > cap) ct = cap;
    }
    t.tw = round8((n + ct - 1) / ct), t.ct = (n + t.tw - 1) / t.tw;
    return t;
}

int dense_row_tile(const struct dense_shape *s)
{
    if (!split_rows(s->N)) return 0;
    const long wf = (long)s->IN * s->OUT;
    const struct dense_tiles f = dense_tiles_of(s->N, s->OUT, wf, s->par),
                             b = dense_tiles_of(s->N, s->IN, wf, s->par);
    return f.ct == 1 && b.ct == 1 && f.th == b.th ? f.th : 0;
}

/* Runs the body for each tile of t thread ith owns: rows [r0,r1), columns [c0,c1). */
#define FOR_TILES2(t, ith, nth, r0, r1, c0, c1, ...)                                                 \
    do {                                                                                            \
        size_t ulo_, uhi_;                                                                          \
        tb_slice((size_t)(t).rt * (size_t)(t).ct, ith, nth, &ulo_, &uhi_);                          \
        for (size_t u_ = ulo_; u_ < uhi_; u_++) {                                                   \
            const size_t r0 = u_ / (size_t)(t).ct * (size_t)(t).th, c0 = u_ % (size_t)(t).ct * (size_t)(t).tw; \
            const size_t r1 = r0 + (size_t)(t).th < (size_t)(t).R ? r0 + (size_t)(t).th : (size_t)(t).R; \
            const size_t c1 = c0 + (size_t)(t).tw < (size_t)(t).n ? c0 + (size_t)(t).tw : (size_t)(t).n; \
            __VA_ARGS__;                                                                            \
        }                                                                                           \
    } while (0)

/* In-place ReLU on rows [r0,r1) × columns [c0,c1) of y (rows, ld). */
static void relu_block(float *y, size_t ld, size_t r0, size_t r1, size_t c0, size_t c1)
{
    for (size_t r = r0; r < r1; r++) {
        float *row = y + r * ld;
        for (size_t c = c0; c < c1; c++) row[c] = row[c] > 0.0f ? row[c] : 0.0f;
    }
}

/* One tile of the batched row-split forward: rows [r0,r1) × columns [c0,c1) of out, one sgemm call. */
static void fwd_tile(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s, int relu,
                     size_t r0, size_t r1, size_t c0, size_t c1)
{
    const int IN = s->IN, OUT = s->OUT, m = (int)(r1 - r0), n = (int)(c1 - c0);
    float *y = out + r0 * OUT + c0;
    float beta = 0.0f;
    if (b) {
        for (int r = 0; r < m; r++) memcpy(y + (size_t)r * OUT, b + c0, (size_t)n * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, IN, 1.0f, inp + r0 * IN, IN, w + c0, OUT, beta, y,
                OUT);
    if (relu) relu_block(out, (size_t)OUT, r0, r1, c0, c1);
}

/* One tile of the batched row-split backward data pass: rows [r0,r1) × columns [c0,c1) of dinp. */
static void bwd_data_tile(float *dinp, const float *dout, const float *w, const struct dense_shape *s, size_t r0,
                          size_t r1, size_t c0, size_t c1)
{
    const int IN = s->IN, OUT = s->OUT;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)(c1 - c0), OUT, 1.0f, dout + r0 * OUT,
                OUT, w + c0 * OUT, OUT, 1.0f, dinp + r0 * IN + c0, IN);
}

void dense_forward_rows(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s,
                        int relu, int r0, int r1)
{
    fwd_tile(out, inp, w, b, s, relu, (size_t)r0, (size_t)r1, 0, (size_t)s->OUT);
}

void dense_backward_data_rows(float *dinp, const float *dout, const float *w, const struct dense_shape *s, int r0,
                              int r1)
{
    bwd_data_tile(dinp, dout, w, s, (size_t)r0, (size_t)r1, 0, (size_t)s->IN);
}

void dense_forward(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s,
                   int relu, int ith, int nth)
{
    const int N = s->N, IN = s->IN, OUT = s->OUT;
    if (N == 1) {
        size_t lo, hi;
        tb_slice((size_t)OUT, ith, nth, &lo, &hi);
        /* Column blocks of the thread's slice: y = b, then y += each row chunk's sum. Rows with x[i] == 0
         * (blank pixels, dead ReLUs) cost nothing. */
        enum { CB = 256 };
        float part[CB];
        for (size_t c0 = lo; c0 < hi; c0 += CB) {
            const int n = hi - c0 < CB ? (int)(hi - c0) : CB;
            float *y = out + c0;
            if (b) memcpy(y, b + c0, (size_t)n * sizeof(float));
            else memset(y, 0, (size_t)n * sizeof(float));
            for (int i0 = 0; i0 < IN; i0 += DENSE1_ROW_CHUNK) {
                const int i1 = IN - i0 < DENSE1_ROW_CHUNK ? IN : i0 + DENSE1_ROW_CHUNK;
                memset(part, 0, (size_t)n * sizeof(float));
                for (int i = i0; i < i1; i++)
                    if (inp[i] != 0.0f) simd_axpy(part, inp[i], w + (size_t)i * OUT + c0, n);
                simd_axpy(y, 1.0f, part, n);
            }
        }
        if (relu) relu_block(out, (size_t)OUT, 0, 1, lo, hi);
        return;
    }
    if (split_rows(N)) {
        const struct dense_tiles t = dense_tiles_of(N, OUT, (long)IN * OUT, s->par);
        FOR_TILES2(t, ith, nth, lo, hi, c0, c1, fwd_tile(out, inp, w, b, s, relu, lo, hi, c0, c1));
    } else {
        FOR_TILES(OUT, col_tile(OUT, s->par), ith, nth, lo, hi, {
            const int n = (int)(hi - lo);
            float beta = 0.0f;
            if (b) {
                for (int r = 0; r < N; r++) memcpy(out + (size_t)r * OUT + lo, b + lo, (size_t)n * sizeof(float));
                beta = 1.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, n, IN, 1.0f, inp, IN, w + lo, OUT, beta,
                        out + lo, OUT);
            if (relu) relu_block(out, (size_t)OUT, 0, (size_t)N, lo, hi);
        });
    }
}

int dense1_chunks(int IN) { return (IN + DENSE1_ROW_CHUNK - 1) / DENSE1_ROW_CHUNK; }

void dense1_combine(float *out, const float *part, const float *b, int IN, int OUT, int relu, int ith, int nth)
{
    size_t lo, hi;
    tb_slice16((size_t)OUT, ith, nth, &lo, &hi);
    dense1_combine_range(out, part, b, IN, OUT, relu, (int)lo, (int)hi);
}

void dense1_combine_range(float *out, const float *part, const float *b, int IN, int OUT, int relu, int lo, int hi)
{
    const int n = hi - lo, K = dense1_chunks(IN);
    if (n <= 0) return;
    float *y = out + lo;
    if (b) memcpy(y, b + lo, (size_t)n * sizeof(float));
    else memset(y, 0, (size_t)n * sizeof(float));
    /* fma(1, s, y) = y + s, rounded once: dense_forward's chunk additions. */
    for (int k = 0; k < K; k++) simd_axpy(y, 1.0f, part + (size_t)k * OUT + lo, n);
    if (relu) relu_block(out, (size_t)OUT, 0, 1, (size_t)lo, (size_t)hi);
}

void dense_backward_data(float *dinp, const float *dout, const float *w, const struct dense_shape *s,
                         int ith, int nth)
{
    const int N = s->N, IN = s->IN, OUT = s->OUT;
    if (N == 1) {
        size_t lo, hi;
        tb_slice((size_t)IN, ith, nth, &lo, &hi);
        for (size_t i = lo; i < hi; i++) dinp[i] += simd_dot(w + i * OUT, dout, OUT);
        return;
    }
    if (split_rows(N)) {
        const struct dense_tiles t = dense_tiles_of(N, IN, (long)IN * OUT, s->par);
        FOR_TILES2(t, ith, nth, lo, hi, c0, c1, bwd_data_tile(dinp, dout, w, s, lo, hi, c0, c1));
    } else {
        FOR_TILES(IN, col_tile(IN, s->par), ith, nth, lo, hi, {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, (int)(hi - lo), OUT, 1.0f, dout, OUT,
                        w + lo * OUT, OUT, 1.0f, dinp + lo, IN);
        });
    }
}

void dense_backward_params(float *dw, float *db, const float *inp, const float *dout,
                           const struct dense_shape *s, int acc, int ith, int nth)
{
    const int N = s->N, IN = s->IN, OUT = s->OUT;
    const float beta = acc ? 1.0f : 0.0f; /* 0: OpenBLAS zeroes C first, the bits of adding to zeros */
    if (N == 1) {
        size_t lo, hi;
        tb_slice((size_t)IN, ith, nth, &lo, &hi);
        /* dW[i,:] += x[i]·dy: zero inputs give zero rows, skip them (written as zeros when not adding). */
        for (size_t i = lo; i < hi; i++) {
            const float xi = inp[i];
            float *g = dw + i * OUT;
            if (xi == 0.0f) {
                if (!acc) memset(g, 0, (size_t)OUT * sizeof(float));
            } else if (acc) {
                for (int o = 0; o < OUT; o++) g[o] += xi * dout[o];
            } else {
                for (int o = 0; o < OUT; o++) g[o] = 0.0f + xi * dout[o];
            }
        }
    } else {
        /* dW rows [t0,t1) = inp[:, t0:t1]ᵀ · dout, K = N reduced inside one call per tile; with few rows
         * (an SE expansion, 48 → 1152: one row tile, so one thread) the tiles are columns of dW. */
        if (split_rows(IN)) {
            FOR_TILES(IN, ROW_TILE, ith, nth, t0, t1, {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(t1 - t0), OUT, N, 1.0f, inp + t0, IN,
                            dout, OUT, beta, dw + t0 * OUT, OUT);
            });
        } else {
            FOR_TILES(OUT, col_tile(OUT, s->par), ith, nth, t0, t1, {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IN, (int)(t1 - t0), N, 1.0f, inp, IN, dout + t0,
                            OUT, beta, dw + t0, OUT);
            });
        }
    }
    if (db) {
        size_t olo, ohi;
        tb_slice((size_t)OUT, ith, nth, &olo, &ohi);
        if (!acc)
            for (size_t o = olo; o < ohi; o++) db[o] = 0.0f + dout[o];
        for (int n = !acc; n < N; n++) {
            const float *d = dout + (size_t)n * OUT;
            for (size_t o = olo; o < ohi; o++) db[o] += d[o];
        }
    }
}

void dense_forward_ref(float *out, const float *inp, const float *w, const float *b, const struct dense_shape *s)
{
    for (int n = 0; n < s->N; n++)
        for (int o = 0; o < s->OUT; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < s->IN; i++) acc += (double)inp[(size_t)n * s->IN + i] * w[(size_t)i * s->OUT + o];
            out[(size_t)n * s->OUT + o] = (float)acc;
        }
}

void dense_backward_data_ref(float *dinp, const float *dout, const float *w, const struct dense_shape *s)
{
    for (int n = 0; n < s->N; n++)
        for (int i = 0; i < s->IN; i++) {
            double acc = 0.0;
            for (int o = 0; o < s->OUT; o++) acc += (double)dout[(size_t)n * s->OUT + o] * w[(size_t)i * s->OUT + o];
            dinp[(size_t)n * s->IN + i] += (float)acc;
        }
}

void dense_backward_params_ref(float *dw, float *db, const float *inp, const float *dout, const struct dense_shape *s)
{
    for (int i = 0; i < s->IN; i++)
        for (int o = 0; o < s->OUT; o++) {
            double acc = 0.0;
            for (int n = 0; n < s->N; n++) acc += (double)inp[(size_t)n * s->IN + i] * dout[(size_t)n * s->OUT + o];
            dw[(size_t)i * s->OUT + o] += (float)acc;
        }
    if (db)
        for (int o = 0; o < s->OUT; o++) {
            double acc = 0.0;
            for (int n = 0; n < s->N; n++) acc += dout[(size_t)n * s->OUT + o];
            db[o] += (float)acc;
        }
}
