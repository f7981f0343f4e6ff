/* op_pool.c — global average pooling kernels and references. */
#include "op_pool.h"

#include "layout.h"

#define POOL_CB 2048 /* channels per block of double accumulators: rows in one piece, as in op_norm.c */

void global_avgpool_forward(float *out, const float *inp, int N, size_t HW, int C, int ith, int nth)
{
    size_t lo, hi, Cs = (size_t)C;
    tb_slice16((size_t)N * Cs, ith, nth, &lo, &hi);
    double acc[POOL_CB];
    double inv = 1.0 / (double)HW;
    for (size_t i = lo; i < hi;) {
        size_t n = i / Cs, c0 = i % Cs;
        size_t cn = Cs - c0 < hi - i ? Cs - c0 : hi - i;
        cn = cn < POOL_CB ? cn : POOL_CB;
        const float *x = inp + n * HW * Cs + c0;
        for (size_t j = 0; j < cn; j++) acc[j] = 0.0;
        for (size_t p = 0; p < HW; p++) {
            const float *restrict xp = x + p * Cs;
            for (size_t j = 0; j < cn; j++) acc[j] += (double)xp[j];
        }
        for (size_t j = 0; j < cn; j++) out[i + j] = (float)(acc[j] * inv);
        i += cn;
    }
}

void global_avgpool_backward(float *dinp, const float *dout, int N, size_t HW, int C, int ith, int nth)
{
    size_t r0, r1, Cs = (size_t)C;
    tb_slice16((size_t)N * HW, ith, nth, &r0, &r1);
    float inv = (float)(1.0 / (double)HW);
    for (size_t r = r0; r < r1; r++) {
        const float *restrict dy = dout + (r / HW) * Cs;
        float *restrict dx = dinp + r * Cs;
        for (size_t c = 0; c < Cs; c++) dx[c] += dy[c] * inv;
    }
}

void global_avgpool_forward_ref(double *out, const double *inp, int N, size_t HW, int C)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (size_t p = 0; p < HW; p++) s += inp[((size_t)n * HW + p) * C + c];
            out[(size_t)n * C + c] = s / (double)HW;
        }
}

void global_avgpool_backward_ref(double *dinp, const double *dout, int N, size_t HW, int C)
{
    for (int n = 0; n < N; n++)
        for (size_t p = 0; p < HW; p++)
            for (int c = 0; c < C; c++) dinp[((size_t)n * HW + p) * C + c] += dout[(size_t)n * C + c] / (double)HW;
}
