/* op_conv_se.c — the 1×1 convolution that folds in the SE scale before it (see op_conv_se.h). */
#include "op_conv_se.h"

#include "gemm_rows.h"
#include "layout.h"
#include "op_norm.h"

#include <string.h>

int conv_se_fusable(const struct conv_shape *s)
{
    return conv_gemm1x1_bn_fusable(s);
}

int conv_se_pays(const struct conv_shape *s)
{
    return conv_se_fusable(s) && (size_t)s->H * s->W >= 4 * (size_t)s->OC;
}

/* One scaled weight matrix, and for the backward-data pass w's transpose beside it. */
size_t conv_se_scratch_floats(const struct conv_shape *s) { return 2 * (size_t)s->C * (size_t)s->OC; }

size_t conv_se_part_floats(const struct conv_shape *s) { return (size_t)s->N * s->C * (size_t)s->OC; }

/* ws = diag(sn) · w (C, OC); or, given wt = wᵀ (OC, C), its transpose (OC, C) = wt · diag(sn): the same
 * products, each row written contiguously (scattering a transpose per sample cost more than the GEMM). */
static void scaled_weights(float *restrict ws, const float *restrict w, const float *restrict wt,
                           const float *restrict sn, int C, int OC)
{
    if (wt) {
        for (int o = 0; o < OC; o++) {
            const float *restrict tr = wt + (size_t)o * C;
            float *restrict dr = ws + (size_t)o * C;
            for (int c = 0; c < C; c++) dr[c] = tr[c] * sn[c];
        }
        return;
    }
    for (int c = 0; c < C; c++) {
        const float k = sn[c];
        const float *restrict wr = w + (size_t)c * OC;
        for (int o = 0; o < OC; o++) ws[(size_t)c * OC + o] = wr[o] * k;
    }
}

/* Rows [r0, r1) of thread ith's BatchNorm row chunks cut at sample edges: gemm_rows on each piece with
 * sample n's scaled weights (rebuilt in scr when n changes). fwd: out = x · ws, and the chunk sums into
 * part; else: out = dout · wsᵀ. */
static void se_rows(float *out, const float *in, const float *w, const float *scale, const struct conv_shape *s,
                    double *part, float *scr, int fwd, int ith, int nth)
{
    const int C = s->C, OC = s->OC, K = fwd ? C : OC, NO = fwd ? OC : C;
    const size_t HW = (size_t)s->H * s->W, M = (size_t)s->N * HW;
    const int stream = tb_stream_floats(M * (size_t)NO, nth);
    size_t k0, k1;
    tb_slice((size_t)bn_row_chunks(M), ith, nth, &k0, &k1);
    float *wt = NULL; /* backward: wᵀ once a call, after the scaled matrix in scr */
    if (!fwd && k0 < k1) {
        wt = scr + (size_t)C * OC;
        conv_transpose_w(wt, w, C, OC);
    }
    size_t have = (size_t)-1;
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        bn_chunk_range(M, (int)k, &r0, &r1);
        double *pk = part ? part + k * 2 * (size_t)OC : NULL;
        if (pk) memset(pk, 0, 2 * (size_t)OC * sizeof *pk);
        for (size_t r = r0; r < r1;) {
            const size_t n = r / HW, re = (n + 1) * HW < r1 ? (n + 1) * HW : r1;
            if (n != have) scaled_weights(scr, w, wt, scale + n * (size_t)C, C, OC), have = n;
            /* Row sums added row after row: pieces give the chunk's sums in the order one call would. */
            gemm_rows(out + r * NO, (size_t)NO, in + r * K, (size_t)K, scr, (size_t)NO, re - r, K, NO, 0, stream, pk,
                      pk ? pk + OC : NULL);
            r = re;
        }
    }
}

void conv_se_forward(float *out, const float *x, const float *scale, const float *w, const struct conv_shape *s,
                     double *part, float *scr, int ith, int nth)
{
    se_rows(out, x, w, scale, s, part, scr, 1, ith, nth);
}

void conv_se_backward_data(float *dx, const float *dout, const float *w, const float *scale,
                           const struct conv_shape *s, float *scr, int ith, int nth)
{
    se_rows(dx, dout, w, scale, s, NULL, scr, 0, ith, nth);
}

void conv_se_backward_params_chunks(float *part, const float *x, const float *dout, const struct conv_shape *s,
                                    int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    const size_t HW = (size_t)s->H * s->W, n1 = (size_t)C * OC;
    size_t lo, hi;
    tb_slice((size_t)s->N, ith, nth, &lo, &hi);
    for (size_t n = lo; n < hi; n++) {
        float *pk = part + n * n1;
        memset(pk, 0, n1 * sizeof(float));
        gemm_rows_atb(pk, (size_t)OC, x + n * HW * C, (size_t)C, dout + n * HW * OC, (size_t)OC, HW, C, OC);
    }
}

void conv_se_backward_params_finish(float *dw, const float *part, const float *scale, const struct conv_shape *s,
                                    int add, int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    const size_t n1 = (size_t)C * OC;
    size_t lo, hi;
    tb_slice16(n1, ith, nth, &lo, &hi);
    /* A block of elements at a time, samples outer: each part row is read contiguously (one element per
     * sample at a stride of C·OC floats was a cache miss per multiply-add), and every element still sums
     * its samples in order from zero — the same bits. */
    enum { BLOCK = 512 };
    float sum[BLOCK];
    for (size_t b0 = lo; b0 < hi; b0 += BLOCK) {
        const size_t b1 = b0 + BLOCK < hi ? b0 + BLOCK : hi;
        memset(sum, 0, (b1 - b0) * sizeof *sum);
        for (int n = 0; n < s->N; n++) {
            const float *restrict sr = scale + (size_t)n * C, *restrict pr = part + (size_t)n * n1;
            for (size_t e = b0; e < b1;) { /* a run of one input channel c: one scale */
                const size_t c = e / (size_t)OC, end = (c + 1) * (size_t)OC < b1 ? (c + 1) * (size_t)OC : b1;
                const float k = sr[c];
                float *restrict a = sum - b0;
                for (; e < end; e++) a[e] += k * pr[e];
            }
        }
        if (add)
            for (size_t e = b0; e < b1; e++) dw[e] += sum[e - b0];
        else /* 0 + x: the bits of adding to a zeroed dw */
            for (size_t e = b0; e < b1; e++) dw[e] = 0.0f + sum[e - b0];
    }
}

void conv_se_dscale(float *dscale, const float *part, const float *w, const struct conv_shape *s, int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    size_t lo, hi;
    tb_slice16((size_t)s->N * C, ith, nth, &lo, &hi);
    /* Four channels of one sample at a time where they are there: four independent chains of double adds
     * instead of one (a dependent add a multiply-add was the loop's whole cost); each element's sum is the
     * same sequence. */
    for (size_t i = lo; i < hi;) {
        const size_t n = i / (size_t)C, c = i % (size_t)C;
        const float *restrict g = part + (n * C + c) * (size_t)OC, *restrict wr = w + c * (size_t)OC;
        if (i + 4 > hi || c + 4 > (size_t)C) {
            double a = 0.0;
            for (int o = 0; o < OC; o++) a += (double)wr[o] * g[o];
            dscale[i++] += (float)a;
            continue;
        }
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
        for (int o = 0; o < OC; o++) {
            a0 += (double)wr[o] * g[o];
            a1 += (double)wr[OC + o] * g[OC + o];
            a2 += (double)wr[2 * OC + o] * g[2 * OC + o];
            a3 += (double)wr[3 * OC + o] * g[3 * OC + o];
        }
        dscale[i] += (float)a0, dscale[i + 1] += (float)a1, dscale[i + 2] += (float)a2, dscale[i + 3] += (float)a3;
        i += 4;
    }
}
