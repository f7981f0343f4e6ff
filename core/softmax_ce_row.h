/* softmax_ce_row.h — the arithmetic of one sample's softmax cross-entropy with label smoothing, written
 * once for the CPU kernel (core/op_loss.c) and the CUDA kernels (cuda/ops_dense.cu): the row's maximum and
 * argmax, Σ exp in double, the loss from the log-sum-exp, and each logit's gradient.
 *
 * Plain C11 static inline functions; under nvcc they are also __host__ __device__, so a change to the
 * maths changes both devices. Callers own the loops over samples and where a gradient goes (the CPU adds
 * it, the GPU stores it, in fp32 or bf16). Pure functions; thread-safe.
 */
#ifndef TB_SOFTMAX_CE_ROW_H
#define TB_SOFTMAX_CE_ROW_H

#include <math.h>

#ifdef __CUDACC__
#define TB_HOST_DEVICE __host__ __device__
#else
#define TB_HOST_DEVICE
#endif

/* What the loss and the gradient of one row of K logits share. */
struct sce_row {
    float mx;   /* the largest logit */
    int arg;    /* its first index: the prediction; -1 when a logit is NaN (no class is predicted) */
    double sum; /* Σ_k exp(z_k − mx), in double */
    float inv;  /* 1/sum rounded to float: the softmax's scale */
};

/* The max, argmax and Σ exp of the row z (K ≥ 1). */
TB_HOST_DEVICE static inline struct sce_row sce_row_stats(const float *z, int K)
{
    struct sce_row r;
    r.arg = 0;
    r.mx = z[0];
    int nan = z[0] != z[0];
    for (int k = 1; k < K; k++) {
        if (z[k] > r.mx) r.mx = z[k], r.arg = k;
        nan |= z[k] != z[k];
    }
    /* Every comparison with NaN is false, so the scan alone would predict class 0 (or skip the NaN): a row
     * with a NaN logit predicts nothing, and its sample never counts as correct. */
    if (nan) r.arg = -1;
    r.sum = 0.0;
    for (int k = 0; k < K; k++) r.sum += exp((double)(z[k] - r.mx));
    r.inv = (float)(1.0 / r.sum);
    return r;
}

/* The sample's loss against label y with smoothing eps: (1−ε)·(lse − z_y) + ε·(lse − mean z), in double. */
TB_HOST_DEVICE static inline float sce_loss(const float *z, int K, int y, float eps, const struct sce_row *r)
{
    const double lse = log(r->sum) + r->mx;
    double l = lse - z[y];
    if (eps != 0.0f) {
        double mean_z = 0.0;
        for (int k = 0; k < K; k++) mean_z += z[k];
        mean_z /= K;
        l = (1.0 - eps) * l + eps * (lse - mean_z);
    }
    return (float)l;
}

/* ∂loss/∂z_k · scale for logit zk (is_label: k == y): (softmax_k − target_k)·scale, target (1−ε)·onehot + ε/K. */
TB_HOST_DEVICE static inline float sce_grad(float zk, int is_label, float eps, int K, float scale,
                                            const struct sce_row *r)
{
    const float p = expf(zk - r->mx) * r->inv;
    const float t = (is_label ? 1.0f - eps : 0.0f) + eps / K;
    return (p - t) * scale;
}

#endif
