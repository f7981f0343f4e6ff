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

size_t conv_se_scratch_floats(const struct conv_shape *s) { return (size_t)s->C * (size_t)s->OC; }

size_t conv_se_part_floats(const struct conv_shape *s) { return (size_t)s->N * s->C * (size_t)s->OC; }

/* ws = diag(sn) · w (C, OC), or its transpose (OC, C) when t. */
static void scaled_weights(float *restrict ws, const float *restrict w, const float *restrict sn, int C, int OC,
                           int t)
{
    for (int c = 0; c < C; c++) {
        const float k = sn[c];
        const float *restrict wr = w + (size_t)c * OC;
        if (t)
            for (int o = 0; o < OC; o++) ws[(size_t)o * C + c] = wr[o] * k;
        else
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
    const int stream = tb_stream_floats(M * (size_t)NO);
    size_t k0, k1;
    tb_slice((size_t)bn_row_chunks(M), ith, nth, &k0, &k1);
    size_t have = (size_t)-1;
    for (size_t k = k0; k < k1; k++) {
        size_t r0, r1;
        bn_chunk_range(M, (int)k, &r0, &r1);
        double *pk = part ? part + k * 2 * (size_t)OC : NULL;
        if (pk) memset(pk, 0, 2 * (size_t)OC * sizeof *pk);
        for (size_t r = r0; r < r1;) {
            const size_t n = r / HW, re = (n + 1) * HW < r1 ? (n + 1) * HW : r1;
            if (n != have) scaled_weights(scr, w, scale + n * (size_t)C, C, OC, !fwd), have = n;
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
                                    int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    const size_t n1 = (size_t)C * OC;
    size_t lo, hi;
    tb_slice16(n1, ith, nth, &lo, &hi);
    for (size_t e = lo; e < hi; e++) {
        const size_t c = e / (size_t)OC;
        float acc = 0.0f;
        for (int n = 0; n < s->N; n++) acc += scale[(size_t)n * C + c] * part[(size_t)n * n1 + e];
        dw[e] += acc;
    }
}

void conv_se_dscale(float *dscale, const float *part, const float *w, const struct conv_shape *s, int ith, int nth)
{
    const int C = s->C, OC = s->OC;
    size_t lo, hi;
    tb_slice16((size_t)s->N * C, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        const size_t n = i / (size_t)C, c = i % (size_t)C;
        const float *restrict g = part + (n * C + c) * (size_t)OC, *restrict wr = w + c * (size_t)OC;
        double a = 0.0;
        for (int o = 0; o < OC; o++) a += (double)wr[o] * g[o];
        dscale[i] += (float)a;
    }
}
