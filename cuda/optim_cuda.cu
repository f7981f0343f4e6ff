// optim_cuda.cu — optim.c's update rules, one element a thread. The arithmetic is optim.c's scalar
// (non-AVX2) path written the same way (fmaf where it uses fmaf, IEEE sqrt and division: no fast math),
// so the results agree with the cpu to a few ulp (the cpu's AVX2 Adam divides by a Newton-refined
// reciprocal), not bitwise.
#include "optim_cuda.h"

namespace {

constexpr int kThreads = 256;
enum { ADAM = 0, SGD = 1, RMSPROP = 2, LARS = 3 }; // enum optim_kind (core/optim.h)

struct Args {
    int kind;
    float lr, alpha;
    const float *alpha_dev;
    float b1, b2, eps, mu, rho, wd;
};

__global__ void update_k(Args a, float *p, const float *g_, float *st, size_t n, size_t lo, size_t hi,
                         const int32_t *seg_of, const uint8_t *no_decay, const float *trust)
{
    const float alpha = a.alpha_dev ? *a.alpha_dev : a.alpha;
    for (size_t i = lo + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < hi; i += (size_t)gridDim.x * blockDim.x) {
        const int sg = seg_of[i];
        if (sg < 0) continue; // padding between tensors: optim_update never touches it
        const int nd = no_decay[sg];
        const float d = nd ? 0.0f : a.wd;
        switch (a.kind) {
        case ADAM: {
            float *m = st, *v = st + n;
            const float g = fmaf(d, p[i], g_[i]);
            const float mi = fmaf(g - m[i], 1.0f - a.b1, m[i]);
            const float vi = fmaf(fmaf(g, g, -v[i]), 1.0f - a.b2, v[i]);
            m[i] = mi, v[i] = vi;
            p[i] -= alpha * mi / (sqrtf(vi) + a.eps);
            break;
        }
        case SGD: { // PyTorch form: buf = μ·buf + g; p -= lr·buf
            const float g = g_[i] + d * p[i];
            st[i] = a.mu * st[i] + g;
            p[i] -= a.lr * st[i];
            break;
        }
        case RMSPROP: { // TF form: ms = ρ·ms + (1−ρ)g²; mom = μ·mom + lr·g/√(ms+ε); p −= mom
            float *ms = st, *mom = st + n;
            const float g = g_[i] + d * p[i];
            ms[i] = a.rho * ms[i] + (1.0f - a.rho) * g * g;
            mom[i] = a.mu * mom[i] + a.lr * g / sqrtf(ms[i] + a.eps);
            p[i] -= mom[i];
            break;
        }
        case LARS: {
            const float t = nd || !trust ? 1.0f : trust[sg];
            const float g = g_[i] + d * p[i];
            st[i] = a.mu * st[i] + a.lr * t * g;
            p[i] -= st[i];
            break;
        }
        }
    }
}

__global__ void lars_trust_k(float *trust, const float *p, const float *g, const size_t *off, const size_t *cnt,
                             const uint8_t *no_decay, float eta, float wd)
{
    __shared__ double sw[kThreads], sg[kThreads];
    const int k = blockIdx.x;
    const size_t o = off[k], n = cnt[k];
    double w2 = 0.0, g2 = 0.0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        w2 += (double)p[o + i] * p[o + i];
        g2 += (double)g[o + i] * g[o + i];
    }
    sw[threadIdx.x] = w2, sg[threadIdx.x] = g2;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) { // fixed tree: the same bits every run
        if ((int)threadIdx.x < h) sw[threadIdx.x] += sw[threadIdx.x + h], sg[threadIdx.x] += sg[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float t = 1.0f;
        const double wn = sqrt(sw[0]), gn = sqrt(sg[0]);
        if (!no_decay[k] && wn > 0.0 && gn > 0.0) t = (float)(eta * wn / (gn + wd * wn));
        trust[k] = t;
    }
}

// g *= inv over n elements; *overflow = 1 if any was inf or NaN (an atomic: blocks' plain stores of the same 1
// were a race in CUDA's memory model, and make gpusim's global racecheck said so).
__global__ void unscale_check_k(float *g, size_t n, float inv, int *overflow)
{
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        bad |= !isfinite(v);
        g[i] = v * inv;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(overflow, 1);
}

} // namespace

extern "C" void tb_cuda_unscale_check(float *grads, size_t n, float inv, int *overflow, cudaStream_t s)
{
    if (n == 0) return;
    const size_t b = (n + kThreads - 1) / kThreads;
    unscale_check_k<<<(unsigned)(b < 4096 ? b : 4096), kThreads, 0, s>>>(grads, n, inv, overflow);
}

extern "C" void tb_cuda_optim_update(const tb_cuda_optim_args *a, float *params, const float *grads, float *state,
                                     size_t n_params, size_t lo, size_t hi, const int32_t *seg_of,
                                     const uint8_t *no_decay, const float *trust, cudaStream_t s)
{
    if (lo >= hi) return;
    const Args k = {a->kind, a->lr, a->alpha, a->alpha_dev, a->beta1, a->beta2, a->eps, a->momentum, a->rho,
                    a->weight_decay};
    const size_t n = hi - lo, b = (n + kThreads - 1) / kThreads;
    update_k<<<(unsigned)(b < 65535 ? b : 65535), kThreads, 0, s>>>(k, params, grads, state, n_params, lo, hi, seg_of,
                                                                    no_decay, trust);
}

extern "C" void tb_cuda_lars_trust(float *trust, const float *params, const float *grads, const size_t *seg_off,
                                   const size_t *seg_n, const uint8_t *no_decay, int n_segs, float eta, float wd,
                                   cudaStream_t s)
{
    if (n_segs > 0) lars_trust_k<<<n_segs, kThreads, 0, s>>>(trust, params, grads, seg_off, seg_n, no_decay, eta, wd);
}
