// ops_dense.cu — the dense chain's element-wise and reduction kernels (GEMMs are cuBLAS's, executor_cuda.c).
// Grid-stride loops of 256 threads; reductions that must match the cpu's order (bias gradient, loss
// sums) run one thread per output over the rows in ascending order: small, and bitwise repeatable.
#include "ops_dense.h"

namespace {

constexpr int kThreads = 256;

inline unsigned blocks_for(size_t n)
{
    const size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

struct Affine4 {
    float scale[4], shift[4];
};

__global__ void input_affine_k(float *out, const uint8_t *x, size_t n, int C, Affine4 a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % (size_t)C);
        out[i] = (float)x[i] * a.scale[c] + a.shift[c];
    }
}

__global__ void bias_act_k(float *y, const float *b, int N, int OUT, int relu)
{
    const size_t n = (size_t)N * OUT;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i];
        if (b) v += b[i % (size_t)OUT];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

__global__ void relu_mask_k(float *dy, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}

__global__ void relu_backward_k(float *din, const float *dy, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        din[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void relu_forward_k(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void bias_grad_k(float *db, const float *dy, int N, int OUT)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OUT) return;
    float acc = db[o];
    for (int n = 0; n < N; n++) acc += dy[(size_t)n * OUT + o]; // the cpu's order: db[o] += d[n][o], n ascending
    db[o] = acc;
}

// One thread a sample: K is the class count (10 for the MLP), so a row is a few cache lines.
__global__ void softmax_ce_k(float *loss, float *dlogits, uint8_t *correct, const float *logits,
                             const int32_t *labels, float scale, int N, int K, float eps)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *z = logits + (size_t)n * K;
    const int y = labels[n];
    int arg = 0;
    float mx = z[0];
    for (int k = 1; k < K; k++)
        if (z[k] > mx) mx = z[k], arg = k;
    double sum = 0.0;
    for (int k = 0; k < K; k++) sum += exp((double)(z[k] - mx));
    const double lse = log(sum) + mx;
    double l = lse - z[y];
    if (eps != 0.0f) {
        double mean_z = 0.0;
        for (int k = 0; k < K; k++) mean_z += z[k];
        mean_z /= K;
        l = (1.0 - eps) * l + eps * (lse - mean_z);
    }
    loss[n] = (float)l;
    if (correct) correct[n] = (uint8_t)(arg == y);
    if (dlogits) {
        float *d = dlogits + (size_t)n * K;
        const float inv = (float)(1.0 / sum);
        for (int k = 0; k < K; k++) {
            const float p = expf(z[k] - mx) * inv;
            const float t = (k == y ? 1.0f - eps : 0.0f) + eps / K;
            d[k] = (p - t) * scale;
        }
    }
}

__global__ void loop_gather_k(tb_cuda_loop_dev d, float *in, int32_t *y, float *alpha, int n, size_t per, float scale,
                              float shift)
{
    const long long k = *d.k < d.steps ? *d.k : d.steps - 1; // a replay past the run repeats the last step
    const uint8_t *x = d.x_all + (size_t)k * n * per;
    const size_t total = (size_t)n * per;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        in[i] = (float)x[i] * scale + shift;
    if (blockIdx.x == 0 && threadIdx.x < (unsigned)n) y[threadIdx.x] = d.y_all[(size_t)k * n + threadIdx.x];
    if (blockIdx.x == 0 && threadIdx.x == 0) *alpha = d.alpha_all[k];
}

__global__ void loop_advance_k(tb_cuda_loop_dev d, const float *losses, int n)
{
    const long long k = *d.k;
    double s = 0.0;
    for (int i = 0; i < n; i++) s += losses[i]; // exec_loss_sum's order
    if (k < d.steps) d.loss_all[k] = s;
    *d.k = k + 1;
}

} // namespace

extern "C" void tb_cuda_input_affine(float *out, const uint8_t *x, size_t n, int C, const float *scale4,
                                     const float *shift4, cudaStream_t s)
{
    Affine4 a;
    for (int c = 0; c < 4; c++) a.scale[c] = scale4[c < C ? c : 0], a.shift[c] = shift4[c < C ? c : 0];
    input_affine_k<<<blocks_for(n), kThreads, 0, s>>>(out, x, n, C, a);
}

extern "C" void tb_cuda_bias_act(float *y, const float *b, int N, int OUT, int relu, cudaStream_t s)
{
    bias_act_k<<<blocks_for((size_t)N * OUT), kThreads, 0, s>>>(y, b, N, OUT, relu);
}

extern "C" void tb_cuda_relu_mask(float *dy, const float *y, size_t n, cudaStream_t s)
{
    relu_mask_k<<<blocks_for(n), kThreads, 0, s>>>(dy, y, n);
}

extern "C" void tb_cuda_relu_backward(float *din, const float *dy, const float *y, size_t n, cudaStream_t s)
{
    relu_backward_k<<<blocks_for(n), kThreads, 0, s>>>(din, dy, y, n);
}

extern "C" void tb_cuda_relu_forward(float *y, const float *x, size_t n, cudaStream_t s)
{
    relu_forward_k<<<blocks_for(n), kThreads, 0, s>>>(y, x, n);
}

extern "C" void tb_cuda_bias_grad(float *db, const float *dy, int N, int OUT, cudaStream_t s)
{
    bias_grad_k<<<(OUT + kThreads - 1) / kThreads, kThreads, 0, s>>>(db, dy, N, OUT);
}

extern "C" void tb_cuda_softmax_ce(float *loss, float *dlogits, uint8_t *correct, const float *logits,
                                   const int32_t *labels, float scale, int N, int K, float eps, cudaStream_t s)
{
    softmax_ce_k<<<(N + 127) / 128, 128, 0, s>>>(loss, dlogits, correct, logits, labels, scale, N, K, eps);
}

extern "C" void tb_cuda_loop_gather(tb_cuda_loop_dev d, float *in, int32_t *y, float *alpha, int n, size_t per,
                                    float scale, float shift, cudaStream_t s)
{
    loop_gather_k<<<blocks_for((size_t)n * per), kThreads, 0, s>>>(d, in, y, alpha, n, per, scale, shift);
}

extern "C" void tb_cuda_loop_advance(tb_cuda_loop_dev d, const float *losses, int n, cudaStream_t s)
{
    loop_advance_k<<<1, 1, 0, s>>>(d, losses, n);
}
