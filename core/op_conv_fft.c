/* op_conv_fft.c — FFT convolution (stride 1) through FFTW single precision.
 *
 * Every transform is a batch of 16 channel-interleaved 2-D real transforms of size FH×FW (≥ the
 * padded input, 2·3·5·7-smooth), so one r2c and one c2r plan serve all three passes; the kernels copy
 * a 16-channel slice of an NHWC tensor into a zero-padded (FH,FW,16) buffer, transform, multiply per
 * frequency, and transform back (fftwf_execute_dft_* new-array calls on the thread's scratch):
 *   forward          Y_o  = Σ_c X_c · conj(W_co)        (correlation; input placed at offset pad)
 *   backward_data    dX_c = Σ_o dY_o · W_co             (full convolution; crop at offset pad)
 *   backward_params  dW_co = Σ_n X_c · conj(dY_o)       (lags 0..K-1)
 * Work is partitioned over 16-wide channel blocks of the output written, aligned inside each group,
 * so every element is computed by the same transforms and sums for any nth.
 * Plans are made with FFTW_ESTIMATE: the same plan (hence the same bits) in every engine and run.
 * Planning and destruction are serialised by a mutex; executing a plan is thread-safe in FFTW.
 */
#include "op_conv.h"

#include "layout.h"
#include "status.h"

#include <fftw3.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

struct conv_fft_plan {
    int FH, FW, NF;    /* transform size; NF = FH·(FW/2+1) complex frequencies */
    fftwf_plan r2c;    /* (FH,FW,16) real → (FH,FW/2+1,16) complex */
    fftwf_plan c2r;    /* inverse, unnormalised */
};

static pthread_mutex_t fft_plan_lock = PTHREAD_MUTEX_INITIALIZER;

static inline int imin(int a, int b) { return a < b ? a : b; }

/* Smallest m ≥ n whose only prime factors are 2, 3, 5, 7 (FFTW's fast sizes). */
static int fft_good_size(int n)
{
    for (int m = n;; m++) {
        int r = m;
        for (int p = 2; p <= 7; p++)
            while (r % p == 0) r /= p;
        if (r == 1) return m;
    }
}

static void fft_dims(const struct conv_shape *s, int *FH, int *FW, int *NF)
{
    *FH = fft_good_size(s->H + 2 * s->pad);
    *FW = fft_good_size(s->W + 2 * s->pad);
    *NF = *FH * (*FW / 2 + 1);
}

/* Channel block per pass: the product/accumulator buffer (NF × inner × block complex) stays under
 * about 16 MB; blocks are whole 16-channel chunks. */
static int fft_block(int NF, int inner, int total)
{
    const size_t budget = (size_t)1 << 22;
    size_t b = budget / ((size_t)NF * inner * 2);
    int blk = (int)(b / 16) * 16;
    const int all = (total + 15) / 16 * 16;
    if (blk < 16) blk = 16;
    return blk < all ? blk : all;
}

/* Scratch layout of one thread (floats, each part 64-byte aligned). */
struct fft_layout {
    int FH, FW, NF, blk;
    size_t real, cplx, prod, xf, yf, total;
};

static void fft_layout_of(enum conv_pass pass, const struct conv_shape *s, struct fft_layout *L)
{
    const int G = s->groups, Cg = s->C / G, OCg = s->OC / G;
    fft_dims(s, &L->FH, &L->FW, &L->NF);
    const size_t NF = (size_t)L->NF;
    size_t nreal = tb_align16((size_t)L->FH * L->FW * 16), ncplx = tb_align16(NF * 32), nprod, nxf, nyf = 0;
    if (pass == CONV_PASS_BACKWARD_DATA) {
        L->blk = fft_block(L->NF, OCg, Cg);
        nprod = NF * OCg * L->blk * 2; /* W[f][o][c] split re/im */
        nxf = NF * OCg * 2;            /* dY[f][o] interleaved */
    } else {
        L->blk = fft_block(L->NF, Cg, OCg);
        nprod = NF * Cg * L->blk * 2;  /* conj W[f][c][o] or dW accumulators, split re/im */
        nxf = NF * Cg * 2;             /* X[f][c] interleaved */
        if (pass == CONV_PASS_BACKWARD_PARAMS) nyf = NF * L->blk * 2; /* dY[f][o] of the block */
    }
    L->real = 0;
    L->cplx = L->real + nreal;
    L->prod = L->cplx + ncplx;
    L->xf = L->prod + tb_align16(nprod);
    L->yf = L->xf + tb_align16(nxf);
    L->total = L->yf + tb_align16(nyf);
}

size_t conv_fft_scratch_floats(enum conv_pass pass, const struct conv_shape *s, int nth)
{
    (void)nth;
    if (s->stride != 1) return 0;
    struct fft_layout L;
    fft_layout_of(pass, s, &L);
    return L.total;
}

int conv_fft_plan_create(struct conv_fft_plan **out, const struct conv_shape *s)
{
    *out = NULL;
    if (s->stride != 1)
        return tb_error_set(TB_EUNSUPPORTED, "op_conv_fft: stride %d not supported (FFT needs stride 1)", s->stride);
    struct conv_fft_plan *p = calloc(1, sizeof *p);
    float *real = NULL;
    fftwf_complex *cplx = NULL;
    int st = TB_ENOMEM;
    if (!p) return tb_error_set(TB_ENOMEM, "op_conv_fft: out of memory for a plan");
    fft_dims(s, &p->FH, &p->FW, &p->NF);
    real = fftwf_malloc(sizeof(float) * (size_t)p->FH * p->FW * 16);
    cplx = fftwf_malloc(sizeof(fftwf_complex) * (size_t)p->NF * 16);
    if (!real || !cplx) {
        tb_error_set(TB_ENOMEM, "op_conv_fft: out of memory for planning buffers (%dx%d)", p->FH, p->FW);
        goto fail;
    }
    const int dims[2] = {p->FH, p->FW};
    pthread_mutex_lock(&fft_plan_lock);
    p->r2c = fftwf_plan_many_dft_r2c(2, dims, 16, real, NULL, 16, 1, cplx, NULL, 16, 1, FFTW_ESTIMATE);
    p->c2r = fftwf_plan_many_dft_c2r(2, dims, 16, cplx, NULL, 16, 1, real, NULL, 16, 1, FFTW_ESTIMATE);
    pthread_mutex_unlock(&fft_plan_lock);
    if (!p->r2c || !p->c2r) {
        st = tb_error_set(TB_EUNSUPPORTED, "op_conv_fft: FFTW could not plan %dx%d transforms", p->FH, p->FW);
        goto fail;
    }
    fftwf_free(real);
    fftwf_free(cplx);
    *out = p;
    return TB_OK;
fail:
    fftwf_free(real);
    fftwf_free(cplx);
    conv_fft_plan_destroy(p);
    return st;
}

void conv_fft_plan_destroy(struct conv_fft_plan *p)
{
    if (!p) return;
    pthread_mutex_lock(&fft_plan_lock);
    if (p->r2c) fftwf_destroy_plan(p->r2c);
    if (p->c2r) fftwf_destroy_plan(p->c2r);
    pthread_mutex_unlock(&fft_plan_lock);
    free(p);
}

/* ---------------------------------------------------------------------------------------------
 * Kernel helpers
 * ------------------------------------------------------------------------------------------- */

/* Thread's 16-wide channel-block units of a per-group dimension `per` (OCg or Cg): unit g·nu + j. */
static void fft_units(int per, int G, int ith, int nth, int *nu, int *u0, int *u1)
{
    size_t a, b;
    *nu = (per + 15) / 16;
    tb_slice((size_t)*nu * G, ith, nth, &a, &b);
    *u0 = (int)a, *u1 = (int)b;
}

/* This thread's [a, z) channel range inside group g, or a == z. */
static void fft_group_range(int g, int per, int nu, int u0, int u1, int *a, int *z)
{
    const int lo = g * nu > u0 ? g * nu : u0, hi = (g + 1) * nu < u1 ? (g + 1) * nu : u1;
    *a = hi > lo ? (lo - g * nu) * 16 : 0;
    *z = hi > lo ? imin(per, (hi - g * nu) * 16) : 0;
}

/* real (FH,FW,16) ← zeros, then rows×cols of `src` (row stride ld_row, pixel stride ld_px, nl of 16
 * lanes) placed at (y0, x0); r2c into cplx. */
static void fft_load_forward(const struct conv_fft_plan *p, float *real, fftwf_complex *cplx, const float *src,
                             int rows, int cols, size_t ld_row, size_t ld_px, int nl, int y0, int x0)
{
    memset(real, 0, sizeof(float) * (size_t)p->FH * p->FW * 16);
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < cols; x++) {
            const float *sp = src + (size_t)y * ld_row + (size_t)x * ld_px;
            float *dp = real + ((size_t)(y + y0) * p->FW + (x + x0)) * 16;
            for (int l = 0; l < nl; l++) dp[l] = sp[l];
        }
    fftwf_execute_dft_r2c(p->r2c, real, cplx);
}

/* Asserts that plan and scratch fit shape s and fills the pass's scratch layout L (every kernel's preamble). */
static void fft_check_layout(enum conv_pass pass, const struct conv_shape *s, const struct conv_fft_plan *plan,
                             const float *scratch, struct fft_layout *L)
{
    TB_ASSERT(plan && s->stride == 1);
    TB_ASSERT(((uintptr_t)scratch & 63) == 0); /* FFTW new-array execute needs the planned alignment */
    fft_layout_of(pass, s, L);
    TB_ASSERT(L->FH == plan->FH && L->FW == plan->FW);
}

/* dst (NF,ld) complex, re/im interleaved ← lanes l < nl of cplx (NF,16): a slice's spectra for the products. */
static inline void fft_store_spectra(float *dst, const fftwf_complex *cplx, size_t NF, size_t ld, int nl)
{
    for (size_t f = 0; f < NF; f++)
        for (int l = 0; l < nl; l++) {
            dst[(f * ld + l) * 2] = cplx[f * 16 + l][0];
            dst[(f * ld + l) * 2 + 1] = cplx[f * 16 + l][1];
        }
}

/* cplx (NF,16) ← Σ_k x[f][k] · (pr + i·pi)[f][k][j + l]; x (NF,K) re/im interleaved, pr/pi (NF,K,B) split. */
static inline void fft_mul_spectra(fftwf_complex *cplx, const float *x, const float *pr, const float *pi, size_t NF,
                                   int K, size_t B, int j)
{
    for (size_t f = 0; f < NF; f++) {
        float yr[16] = {0}, yi[16] = {0};
        for (int k = 0; k < K; k++) {
            const float xr = x[(f * K + k) * 2], xi = x[(f * K + k) * 2 + 1];
            const float *ar = pr + (f * K + k) * B + j, *ai = pi + (f * K + k) * B + j;
            for (int l = 0; l < 16; l++) {
                yr[l] += xr * ar[l] - xi * ai[l];
                yi[l] += xr * ai[l] + xi * ar[l];
            }
        }
        for (int l = 0; l < 16; l++) cplx[f * 16 + l][0] = yr[l], cplx[f * 16 + l][1] = yi[l];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Forward
 * ------------------------------------------------------------------------------------------- */

void conv_forward_fft(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                      const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int N = s->N, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW,
              P = s->pad, G = s->groups, OC = s->OC, Cg = C / G, OCg = OC / G;
    struct fft_layout L;
    fft_check_layout(CONV_PASS_FORWARD, s, plan, scratch, &L);
    const size_t NF = (size_t)L.NF, OB = (size_t)L.blk;
    float *real = scratch + L.real;
    fftwf_complex *cplx = (fftwf_complex *)(void *)(scratch + L.cplx);
    float *wr = scratch + L.prod, *wi = wr + NF * Cg * OB;
    float *xf = scratch + L.xf;
    const float scale = 1.0f / ((float)L.FH * (float)L.FW);
    int nu, u0, u1;
    fft_units(OCg, G, ith, nth, &nu, &u0, &u1);
    for (int g = u0 / (nu ? nu : 1); g < G && g * nu < u1; g++) {
        int oa, oz;
        fft_group_range(g, OCg, nu, u0, u1, &oa, &oz);
        for (int ob0 = oa; ob0 < oz; ob0 += (int)OB) {
            const int obn = imin((int)OB, oz - ob0);
            /* conj(FFT(w)) of every (c, o) filter of the block: wr/wi [f][c][o]. */
            for (int c = 0; c < Cg; c++)
                for (int j = 0; j < obn; j += 16) {
                    const int nl = imin(16, obn - j);
                    const float *src = w + (size_t)c * OC + (size_t)g * OCg + ob0 + j;
                    fft_load_forward(plan, real, cplx, src, KH, KW, (size_t)KW * Cg * OC, (size_t)Cg * OC, nl, 0, 0);
                    /* all 16 lanes: lanes past nl transform zeros, so the product sees zeros */
                    for (size_t f = 0; f < NF; f++)
                        for (int l = 0; l < 16; l++) {
                            wr[(f * Cg + c) * OB + j + l] = cplx[f * 16 + l][0];
                            wi[(f * Cg + c) * OB + j + l] = -cplx[f * 16 + l][1];
                        }
                }
            for (int n = 0; n < N; n++) {
                /* X[f][c] of image n, group g (input placed at offset pad). */
                const float *img = inp + (size_t)n * H * W * C + (size_t)g * Cg;
                for (int c0 = 0; c0 < Cg; c0 += 16) {
                    const int nl = imin(16, Cg - c0);
                    fft_load_forward(plan, real, cplx, img + c0, H, W, (size_t)W * C, (size_t)C, nl, P, P);
                    fft_store_spectra(xf + (size_t)c0 * 2, cplx, NF, (size_t)Cg, nl);
                }
                for (int j = 0; j < obn; j += 16) {
                    const int nl = imin(16, obn - j);
                    fft_mul_spectra(cplx, xf, wr, wi, NF, Cg, OB, j);
                    fftwf_execute_dft_c2r(plan->c2r, cplx, real);
                    const size_t o = (size_t)g * OCg + ob0 + j;
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) {
                            const float *sp = real + ((size_t)oy * L.FW + ox) * 16;
                            float *dp = out + (((size_t)n * OH + oy) * OW + ox) * OC + o;
                            for (int l = 0; l < nl; l++) dp[l] = sp[l] * scale + (b ? b[o + l] : 0.0f);
                        }
                }
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Backward data
 * ------------------------------------------------------------------------------------------- */

void conv_backward_data_fft(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                            const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int N = s->N, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW,
              P = s->pad, G = s->groups, OC = s->OC, Cg = C / G, OCg = OC / G;
    struct fft_layout L;
    fft_check_layout(CONV_PASS_BACKWARD_DATA, s, plan, scratch, &L);
    const size_t NF = (size_t)L.NF, CB = (size_t)L.blk;
    float *real = scratch + L.real;
    fftwf_complex *cplx = (fftwf_complex *)(void *)(scratch + L.cplx);
    float *wr = scratch + L.prod, *wi = wr + NF * OCg * CB;
    float *yf = scratch + L.xf;
    const float scale = 1.0f / ((float)L.FH * (float)L.FW);
    int nu, u0, u1;
    fft_units(Cg, G, ith, nth, &nu, &u0, &u1);
    for (int g = u0 / (nu ? nu : 1); g < G && g * nu < u1; g++) {
        int ca, cz;
        fft_group_range(g, Cg, nu, u0, u1, &ca, &cz);
        for (int cb0 = ca; cb0 < cz; cb0 += (int)CB) {
            const int cbn = imin((int)CB, cz - cb0);
            /* FFT(w) of every (o, c) filter of the block: wr/wi [f][o][c]. */
            for (int o = 0; o < OCg; o++)
                for (int j = 0; j < cbn; j += 16) {
                    const int nl = imin(16, cbn - j);
                    const float *src = w + (size_t)(cb0 + j) * OC + (size_t)g * OCg + o;
                    /* lanes are input channels: stride OC between lanes, so gather by hand */
                    memset(real, 0, sizeof(float) * (size_t)L.FH * L.FW * 16);
                    for (int ky = 0; ky < KH; ky++)
                        for (int kx = 0; kx < KW; kx++)
                            for (int l = 0; l < nl; l++)
                                real[((size_t)ky * L.FW + kx) * 16 + l] =
                                    src[((size_t)ky * KW + kx) * Cg * OC + (size_t)l * OC];
                    fftwf_execute_dft_r2c(plan->r2c, real, cplx);
                    for (size_t f = 0; f < NF; f++)
                        for (int l = 0; l < 16; l++) {
                            wr[(f * OCg + o) * CB + j + l] = cplx[f * 16 + l][0];
                            wi[(f * OCg + o) * CB + j + l] = cplx[f * 16 + l][1];
                        }
                }
            for (int n = 0; n < N; n++) {
                /* dY[f][o] of image n, group g (placed at the origin). */
                const float *img = dout + (size_t)n * OH * OW * OC + (size_t)g * OCg;
                for (int o0 = 0; o0 < OCg; o0 += 16) {
                    const int nl = imin(16, OCg - o0);
                    fft_load_forward(plan, real, cplx, img + o0, OH, OW, (size_t)OW * OC, (size_t)OC, nl, 0, 0);
                    fft_store_spectra(yf + (size_t)o0 * 2, cplx, NF, (size_t)OCg, nl);
                }
                for (int j = 0; j < cbn; j += 16) {
                    const int nl = imin(16, cbn - j);
                    fft_mul_spectra(cplx, yf, wr, wi, NF, OCg, CB, j);
                    fftwf_execute_dft_c2r(plan->c2r, cplx, real);
                    const size_t c = (size_t)g * Cg + cb0 + j;
                    for (int iy = 0; iy < H; iy++)
                        for (int ix = 0; ix < W; ix++) {
                            const float *sp = real + ((size_t)(iy + P) * L.FW + ix + P) * 16;
                            float *dp = dinp + (((size_t)n * H + iy) * W + ix) * C + c;
                            for (int l = 0; l < nl; l++) dp[l] += sp[l] * scale;
                        }
                }
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Backward params
 * ------------------------------------------------------------------------------------------- */

void conv_backward_params_fft(float *dw, float *db, const float *inp, const float *dout, const struct conv_shape *s,
                              const struct conv_fft_plan *plan, float *scratch, int ith, int nth)
{
    const int N = s->N, H = s->H, W = s->W, C = s->C, OH = s->OH, OW = s->OW, KH = s->KH, KW = s->KW,
              P = s->pad, G = s->groups, OC = s->OC, Cg = C / G, OCg = OC / G;
    struct fft_layout L;
    fft_check_layout(CONV_PASS_BACKWARD_PARAMS, s, plan, scratch, &L);
    const size_t NF = (size_t)L.NF, OB = (size_t)L.blk;
    float *real = scratch + L.real;
    fftwf_complex *cplx = (fftwf_complex *)(void *)(scratch + L.cplx);
    float *ar = scratch + L.prod, *ai = ar + NF * Cg * OB;
    float *xf = scratch + L.xf, *yf = scratch + L.yf;
    const float scale = 1.0f / ((float)L.FH * (float)L.FW);
    int nu, u0, u1;
    fft_units(OCg, G, ith, nth, &nu, &u0, &u1);
    for (int g = u0 / (nu ? nu : 1); g < G && g * nu < u1; g++) {
        int oa, oz;
        fft_group_range(g, OCg, nu, u0, u1, &oa, &oz);
        for (int ob0 = oa; ob0 < oz; ob0 += (int)OB) {
            const int obn = imin((int)OB, oz - ob0);
            memset(ar, 0, sizeof(float) * NF * Cg * OB * 2);
            for (int n = 0; n < N; n++) {
                const float *img = inp + (size_t)n * H * W * C + (size_t)g * Cg;
                for (int c0 = 0; c0 < Cg; c0 += 16) {
                    const int nl = imin(16, Cg - c0);
                    fft_load_forward(plan, real, cplx, img + c0, H, W, (size_t)W * C, (size_t)C, nl, P, P);
                    fft_store_spectra(xf + (size_t)c0 * 2, cplx, NF, (size_t)Cg, nl);
                }
                const float *gimg = dout + (size_t)n * OH * OW * OC + (size_t)g * OCg + ob0;
                for (int j = 0; j < obn; j += 16) {
                    const int nl = imin(16, obn - j);
                    fft_load_forward(plan, real, cplx, gimg + j, OH, OW, (size_t)OW * OC, (size_t)OC, nl, 0, 0);
                    fft_store_spectra(yf + (size_t)j * 2, cplx, NF, OB, nl);
                }
                /* acc[f][c][o] += X[f][c] · conj(dY[f][o]) */
                for (size_t f = 0; f < NF; f++)
                    for (int c = 0; c < Cg; c++) {
                        const float xr = xf[(f * Cg + c) * 2], xi = xf[(f * Cg + c) * 2 + 1];
                        float *pr = ar + (f * Cg + c) * OB, *pi = ai + (f * Cg + c) * OB;
                        const float *yp = yf + f * OB * 2;
                        for (int o = 0; o < obn; o++) {
                            const float dr = yp[2 * o], di = yp[2 * o + 1];
                            pr[o] += xr * dr + xi * di;
                            pi[o] += xi * dr - xr * di;
                        }
                    }
            }
            for (int c = 0; c < Cg; c++)
                for (int j = 0; j < obn; j += 16) {
                    const int nl = imin(16, obn - j);
                    for (size_t f = 0; f < NF; f++)
                        for (int l = 0; l < 16; l++) {
                            const int ok = l < nl;
                            cplx[f * 16 + l][0] = ok ? ar[(f * Cg + c) * OB + j + l] : 0.0f;
                            cplx[f * 16 + l][1] = ok ? ai[(f * Cg + c) * OB + j + l] : 0.0f;
                        }
                    fftwf_execute_dft_c2r(plan->c2r, cplx, real);
                    for (int ky = 0; ky < KH; ky++)
                        for (int kx = 0; kx < KW; kx++) {
                            const float *sp = real + ((size_t)ky * L.FW + kx) * 16;
                            float *dp = dw + (((size_t)ky * KW + kx) * Cg + c) * OC + (size_t)g * OCg + ob0 + j;
                            for (int l = 0; l < nl; l++) dp[l] += sp[l] * scale;
                        }
                }
            if (db) {
                const size_t M = (size_t)N * OH * OW;
                for (int o = 0; o < obn; o++) {
                    const size_t oc = (size_t)g * OCg + ob0 + o;
                    double acc = 0.0;
                    for (size_t m = 0; m < M; m++) acc += dout[m * OC + oc];
                    db[oc] += (float)acc;
                }
            }
        }
    }
}
