// ops_dense.cu — the dense chain's element-wise and reduction kernels (GEMMs are cuBLAS's, executor_cuda.c).
// Grid-stride loops of 256 threads; reductions that must match the cpu's order (bias gradient, loss
// sums) run one thread per output over the rows in ascending order: small, and bitwise repeatable. The
// softmax cross-entropy's per-sample arithmetic is core/softmax_ce_row.h's, the cpu's own. Kernels are
// templates over the activations' element type (float, or bf16 or fp16 for mixed precision: ops_common.cuh).
#include "ops_dense.h"

#include "ops_common.cuh"
#include "softmax_ce_row.h"

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

template <typename T> __global__ void input_affine_k(T *out, const uint8_t *x, size_t n, int C, Affine4 a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % (size_t)C);
        out[i] = ops_to<T>((float)x[i] * a.scale[c] + a.shift[c]);
    }
}

template <typename T> __global__ void bias_act_k(T *y, const float *b, int N, int OUT, int relu)
{
    const size_t n = (size_t)N * OUT;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = ops_f(y[i]);
        if (b) v += b[i % (size_t)OUT];
        y[i] = ops_to<T>(relu ? (v > 0.0f ? v : 0.0f) : v);
    }
}

template <typename T> __global__ void relu_mask_k(T *dy, const T *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!(ops_f(y[i]) > 0.0f)) dy[i] = ops_to<T>(0.0f);
}

template <typename T> __global__ void relu_backward_k(T *din, const T *dy, const T *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        din[i] = ops_to<T>(ops_f(din[i]) + (ops_f(y[i]) > 0.0f ? ops_f(dy[i]) : 0.0f));
}

template <typename T> __global__ void relu_forward_k(T *y, const T *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = ops_f(x[i]);
        y[i] = ops_to<T>(v > 0.0f ? v : 0.0f);
    }
}

template <typename T> __global__ void bias_grad_k(float *db, const T *dy, int N, int OUT)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OUT) return;
    float acc = db[o];
    for (int n = 0; n < N; n++) acc += ops_f(dy[(size_t)n * OUT + o]); // the cpu's order: n ascending
    db[o] = acc;
}

// One thread a sample: K is the class count (10 for the MLP), so a row is a few cache lines. Logits are
// fp32 in both precisions (the loss is computed in fp32, as autocast does); the gradient goes out as TG.
template <typename TG>
__global__ void softmax_ce_k(float *loss, TG *dlogits, uint8_t *correct, const float *logits, const int32_t *labels,
                             float scale, int N, int K, float eps)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *z = logits + (size_t)n * K;
    const int y = labels[n];
    const sce_row r = sce_row_stats(z, K);
    loss[n] = sce_loss(z, K, y, eps, &r);
    if (correct) correct[n] = (uint8_t)(r.arg == y);
    if (dlogits) { // written, not added: the executor zeroes nothing before the loss layer
        TG *d = dlogits + (size_t)n * K;
        for (int k = 0; k < K; k++) d[k] = ops_to<TG>(sce_grad(z[k], k == y, eps, K, scale, &r));
    }
}

// dst = src rounded to the 2-byte type H (bf16 or fp16), to nearest even (ops_to<H>): the weights' copy.
template <typename H> __global__ void to_half_k(H *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = ops_to<H>(src[i]);
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

static Affine4 affine4(int C, const float *scale4, const float *shift4)
{
    Affine4 a;
    for (int c = 0; c < 4; c++) a.scale[c] = scale4[c < C ? c : 0], a.shift[c] = shift4[c < C ? c : 0];
    return a;
}

extern "C" void tb_cuda_input_affine(float *out, const uint8_t *x, size_t n, int C, const float *scale4,
                                     const float *shift4, cudaStream_t s)
{
    input_affine_k<<<blocks_for(n), kThreads, 0, s>>>(out, x, n, C, affine4(C, scale4, shift4));
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

/* The 2-byte launchers, once for bf16 and once for fp16 (tb_cuda_*_bf16 and tb_cuda_*_fp16): the C API's
 * void pointers viewed as T, the same instantiations with the other type. */
#define DENSE_HALF_LAUNCHERS(SUF, T) \
extern "C" void tb_cuda_input_affine_##SUF(void *out, const uint8_t *x, size_t n, int C, const float *scale4, \
                                          const float *shift4, cudaStream_t s) \
{ \
    input_affine_k<<<blocks_for(n), kThreads, 0, s>>>((T *)(out), x, n, C, affine4(C, scale4, shift4)); \
} \
\
extern "C" void tb_cuda_bias_act_##SUF(void *y, const float *b, int N, int OUT, int relu, cudaStream_t s) \
{ \
    bias_act_k<<<blocks_for((size_t)N * OUT), kThreads, 0, s>>>((T *)(y), b, N, OUT, relu); \
} \
\
extern "C" void tb_cuda_relu_mask_##SUF(void *dy, const void *y, size_t n, cudaStream_t s) \
{ \
    relu_mask_k<<<blocks_for(n), kThreads, 0, s>>>((T *)(dy), (const T *)(y), n); \
} \
\
extern "C" void tb_cuda_relu_backward_##SUF(void *din, const void *dy, const void *y, size_t n, cudaStream_t s) \
{ \
    relu_backward_k<<<blocks_for(n), kThreads, 0, s>>>((T *)(din), (const T *)(dy), (const T *)(y), n); \
} \
\
extern "C" void tb_cuda_relu_forward_##SUF(void *y, const void *x, size_t n, cudaStream_t s) \
{ \
    relu_forward_k<<<blocks_for(n), kThreads, 0, s>>>((T *)(y), (const T *)(x), n); \
} \
\
extern "C" void tb_cuda_bias_grad_##SUF(float *db, const void *dy, int N, int OUT, cudaStream_t s) \
{ \
    bias_grad_k<<<(OUT + kThreads - 1) / kThreads, kThreads, 0, s>>>(db, (const T *)(dy), N, OUT); \
} \
\
extern "C" void tb_cuda_softmax_ce_##SUF(float *loss, void *dlogits, uint8_t *correct, const float *logits, \
                                        const int32_t *labels, float scale, int N, int K, float eps, cudaStream_t s) \
{ \
    softmax_ce_k<<<(N + 127) / 128, 128, 0, s>>>(loss, (T *)(dlogits), correct, logits, labels, scale, N, K, eps); \
} \
\
extern "C" void tb_cuda_to_##SUF(void *dst, const float *src, size_t n, cudaStream_t s) \
{ \
    if (n) to_half_k<<<blocks_for(n), kThreads, 0, s>>>((T *)(dst), src, n); \
}

DENSE_HALF_LAUNCHERS(bf16, bf16)
DENSE_HALF_LAUNCHERS(fp16, f16)

extern "C" void tb_cuda_loop_gather(tb_cuda_loop_dev d, float *in, int32_t *y, float *alpha, int n, size_t per,
                                    float scale, float shift, cudaStream_t s)
{
    loop_gather_k<<<blocks_for((size_t)n * per), kThreads, 0, s>>>(d, in, y, alpha, n, per, scale, shift);
}

extern "C" void tb_cuda_loop_advance(tb_cuda_loop_dev d, const float *losses, int n, cudaStream_t s)
{
    loop_advance_k<<<1, 1, 0, s>>>(d, losses, n);
}
