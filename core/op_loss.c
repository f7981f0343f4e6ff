/* op_loss.c — stable softmax cross-entropy with its gradient in one pass; the per-sample arithmetic is
 * softmax_ce_row.h's, shared with the CUDA kernels. */
#include "op_loss.h"

#include "layout.h"
#include "softmax_ce_row.h"

void softmax_ce_forward_backward(float *loss, float *dlogits, uint8_t *correct, const float *logits,
                                 const int32_t *labels, float scale, const struct softmax_ce_shape *s,
                                 int ith, int nth)
{
    const int K = s->K;
    const float eps = s->smoothing;
    size_t lo, hi;
    tb_slice((size_t)s->N, ith, nth, &lo, &hi);
    for (size_t n = lo; n < hi; n++) {
        const float *z = logits + n * K;
        const int y = labels[n];
        const struct sce_row r = sce_row_stats(z, K);
        loss[n] = sce_loss(z, K, y, eps, &r);
        if (correct) correct[n] = (uint8_t)(r.arg == y);
        if (dlogits) {
            float *d = dlogits + n * K;
            for (int k = 0; k < K; k++) d[k] += sce_grad(z[k], k == y, eps, K, scale, &r);
        }
    }
}
