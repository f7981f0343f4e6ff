/* op_act.c — SiLU, sigmoid and ReLU kernels over flat arrays, and their double references.
 *
 * Each kernel is one vectorisable loop over its slice; slices are cut in 16-float units so threads
 * never share a written cache line. Elementwise maths, so the result does not depend on (ith,nth).
 */
#include "op_act.h"

#include "layout.h"

#include <math.h>

void silu_forward(float *out, const float *inp, size_t n, int ith, int nth)
{
    size_t lo, hi;
    tb_slice16(n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) out[i] = act_siluf(inp[i]);
}

void silu_backward(float *restrict dinp, const float *restrict dout, const float *restrict inp, size_t n,
                   int ith, int nth)
{
    size_t lo, hi;
    tb_slice16(n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) dinp[i] += dout[i] * act_silu_gradf(inp[i]);
}

void sigmoid_forward(float *out, const float *inp, size_t n, int ith, int nth)
{
    size_t lo, hi;
    tb_slice16(n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) out[i] = act_sigmoidf(inp[i]);
}

void sigmoid_backward(float *restrict dinp, const float *restrict dout, const float *restrict out, size_t n,
                      int ith, int nth)
{
    size_t lo, hi;
    tb_slice16(n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) dinp[i] += dout[i] * (out[i] * (1.0f - out[i]));
}

void relu_forward(float *out, const float *inp, size_t n, int ith, int nth)
{
    size_t lo, hi;
    tb_slice16(n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float *restrict dinp, const float *restrict dout, const float *restrict out_or_inp, size_t n,
                   int ith, int nth)
{
    size_t lo, hi;
    tb_slice16(n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) dinp[i] += out_or_inp[i] > 0.0f ? dout[i] : 0.0f;
}

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

void silu_forward_ref(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = inp[i] * ref_sigmoid(inp[i]);
}

void silu_backward_ref(double *dinp, const double *dout, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double s = ref_sigmoid(inp[i]);
        dinp[i] += dout[i] * (s + inp[i] * s * (1.0 - s));
    }
}

void sigmoid_forward_ref(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = ref_sigmoid(inp[i]);
}

void sigmoid_backward_ref(double *dinp, const double *dout, const double *out, size_t n)
{
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * out[i] * (1.0 - out[i]);
}

void relu_forward_ref(double *out, const double *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0 ? inp[i] : 0.0;
}

void relu_backward_ref(double *dinp, const double *dout, const double *out_or_inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (out_or_inp[i] > 0.0) dinp[i] += dout[i];
}
