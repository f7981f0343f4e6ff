/* ops_act.cu — elementwise activations, residual add, global average pool, SE scale, dropout and
 * drop-connect: the GPU twins of core/op_act.c, op_pool.c, op_se.c, op_dropout.c.
 *
 * All are bandwidth-bound: grid-stride loops with one element per thread per iteration (coalesced),
 * and the per-(sample, channel) sums (pool, dscale) a block of 32 channels × 8 row-strides that adds in
 * double in a fixed order, as the CPU does, so fp32 results agree to ~1e-7 relative.
 */
#include "ops_common.cuh"
#include "ops_effnet.h"

#include <cuda_bf16.h>

/* blockDim.y of the per-(sample, channel) sums over HW: 1024-thread blocks, because there are only
 * N·⌈C/32⌉ of them (256 for 112×112×32 at batch 256) to keep the HBM busy. */
#define SE_ROWS 32

__global__ void k_silu_fwd(float *out, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ops_silu(inp[i]);
}

__global__ void k_silu_bwd(float *dinp, const float *dout, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dinp[i] += dout[i] * ops_silu_grad(inp[i]);
}

__global__ void k_sigmoid_fwd(float *out, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ops_sigmoid(inp[i]);
}

__global__ void k_sigmoid_bwd(float *dinp, const float *dout, const float *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dinp[i] += dout[i] * (out[i] * (1.0f - out[i]));
}

__global__ void k_silu_fwd_bf16(__nv_bfloat16 *out, const __nv_bfloat16 *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(ops_silu(__bfloat162float(inp[i])));
}

__global__ void k_silu_bwd_bf16(__nv_bfloat16 *dinp, const __nv_bfloat16 *dout, const __nv_bfloat16 *inp, size_t n,
                                int acc)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = __bfloat162float(dout[i]) * ops_silu_grad(__bfloat162float(inp[i]));
        dinp[i] = __float2bfloat16(acc ? __bfloat162float(dinp[i]) + g : g);
    }
}

__global__ void k_add(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void k_add_bwd(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = dout[i];
        if (da) da[i] += g;
        if (db) db[i] += g;
    }
}

__global__ void k_add_bf16(__nv_bfloat16 *out, const __nv_bfloat16 *a, const __nv_bfloat16 *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

/* Block (32, SE_ROWS) per (32 channels, sample): out (N,C) = (Σ_hw inp) / HW in double. */
__global__ void k_gap_fwd(float *out, const float *inp, size_t HW, int C)
{
    __shared__ double sh[32 * SE_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, n = blockIdx.y;
    double s = 0.0;
    if (c < C)
        for (size_t p = threadIdx.y; p < HW; p += SE_ROWS) s += (double)inp[((size_t)n * HW + p) * C + c];
    s = ops_sum_y(s, sh);
    if (threadIdx.y == 0 && c < C) out[(size_t)n * C + c] = (float)(s * (1.0 / (double)HW));
}

/* The (N, D = HW·C) kernels below run on grid (x, N): sample n = blockIdx.y, a grid-stride loop over its
 * D elements, channel c tracked by step_c (ops_step_c): no division per element. */

__global__ void k_gap_bwd(float *dinp, const float *dout, size_t D, int C, int step_c, float inv)
{
    const size_t n = blockIdx.y, stride = (size_t)gridDim.x * blockDim.x;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int c = (int)(j % (size_t)C);
    float *dx = dinp + n * D;
    const float *dy = dout + n * C;
    for (; j < D; j += stride) {
        dx[j] += dy[c] * inv;
        c += step_c;
        if (c >= C) c -= C;
    }
}

__global__ void k_se_fwd(float *out, const float *inp, const float *scale, size_t D, int C, int step_c)
{
    const size_t n = blockIdx.y, stride = (size_t)gridDim.x * blockDim.x;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int c = (int)(j % (size_t)C);
    const float *s = scale + n * C;
    for (; j < D; j += stride) {
        out[n * D + j] = inp[n * D + j] * s[c];
        c += step_c;
        if (c >= C) c -= C;
    }
}

/* Block (32, SE_ROWS) per (32 channels, sample): dinp rows and the sample's dscale in one read of dout. */
__global__ void k_se_bwd(float *dinp, float *dscale, const float *dout, const float *inp, const float *scale,
                         size_t HW, int C, int acc)
{
    __shared__ double sh[32 * SE_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, n = blockIdx.y;
    double s = 0.0;
    if (c < C) {
        float sc = scale[(size_t)n * C + c];
        for (size_t p = threadIdx.y; p < HW; p += SE_ROWS) {
            size_t i = ((size_t)n * HW + p) * C + c;
            float dy = dout[i];
            if (dinp) dinp[i] = acc ? dinp[i] + dy * sc : dy * sc;
            s += (double)dy * (double)inp[i];
        }
    }
    s = ops_sum_y(s, sh);
    if (threadIdx.y == 0 && c < C && dscale) dscale[(size_t)n * C + c] += (float)s;
}

/* 1/(1-p) for p < 1, 0 otherwise: op_dropout.c's drop_scale. */
static float drop_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

/* Element e of sample n (grid (x, N), n = blockIdx.y) is kept iff
 * uniform(key_stream, rng_hash(step, layer, g0+n) + e) >= p, where rng_hash(step, layer, g) =
 * hash_keyed(key_sample, g): the CPU's dropout_keep with both keys from the host. accumulate selects +=. */
__global__ void k_dropout(float *y, const float *x, size_t D, uint64_t g0, uint64_t key_stream, uint64_t key_sample,
                          float p, float scale, int accumulate)
{
    const size_t n = blockIdx.y;
    const uint64_t base = ops_rng_hash_keyed(key_sample, g0 + n);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < D; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = n * D + e;
        float v = ops_rng_uniform_keyed(key_stream, base + e) >= p ? x[i] * scale : 0.0f;
        y[i] = accumulate ? y[i] + v : v;
    }
}

/* y = base + x·s_n on sample n = blockIdx.y, s_n = scale if uniform(key_stream, rng_hash(step, layer, g0+n))
 * >= p else 0 (p <= 0: s_n = 1); base NULL means 0. */
__global__ void k_dropconnect(float *y, const float *base, const float *x, size_t D, uint64_t g0,
                              uint64_t key_stream, uint64_t key_sample, float p, float scale)
{
    const size_t n = blockIdx.y;
    const float s = p <= 0.0f ? 1.0f
                    : ops_rng_uniform_keyed(key_stream, ops_rng_hash_keyed(key_sample, g0 + n)) >= p ? scale
                                                                                                    : 0.0f;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < D; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = n * D + e;
        y[i] = base ? base[i] + x[i] * s : x[i] * s;
    }
}

#define STREAM(s) ((cudaStream_t)(s))
#define LAUNCH1D(kern, n, st, ...)                                                                                     \
    do {                                                                                                               \
        if ((n) == 0) return 0;                                                                                        \
        kern<<<ops_grid(n), OPS_THREADS, 0, STREAM(st)>>>(__VA_ARGS__);                                               \
        return ops_launched();                                                                                         \
    } while (0)
/* The same on grid (ops_grid_rows(D, N), N) for the per-sample kernels; gx names the blocks along x. */
#define LAUNCH_ROWS(kern, D, N, st, ...)                                                                               \
    do {                                                                                                               \
        if ((N) > 65535) return (int)cudaErrorInvalidValue;                                                           \
        if ((D) == 0 || (N) <= 0) return 0;                                                                            \
        const unsigned gx = ops_grid_rows(D, N);                                                                       \
        kern<<<dim3(gx, (unsigned)(N)), OPS_THREADS, 0, STREAM(st)>>>(__VA_ARGS__);                                   \
        return ops_launched();                                                                                         \
    } while (0)

extern "C" {

int tb_cuda_silu_forward(float *out, const float *inp, size_t n, void *stream)
{
    LAUNCH1D(k_silu_fwd, n, stream, out, inp, n);
}

int tb_cuda_silu_backward(float *dinp, const float *dout, const float *inp, size_t n, void *stream)
{
    LAUNCH1D(k_silu_bwd, n, stream, dinp, dout, inp, n);
}

int tb_cuda_sigmoid_forward(float *out, const float *inp, size_t n, void *stream)
{
    LAUNCH1D(k_sigmoid_fwd, n, stream, out, inp, n);
}

int tb_cuda_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n, void *stream)
{
    LAUNCH1D(k_sigmoid_bwd, n, stream, dinp, dout, out, n);
}

int tb_cuda_silu_forward_bf16(void *out, const void *inp, size_t n, void *stream)
{
    LAUNCH1D(k_silu_fwd_bf16, n, stream, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)inp, n);
}

int tb_cuda_silu_backward_bf16(void *dinp, const void *dout, const void *inp, size_t n, int acc, void *stream)
{
    LAUNCH1D(k_silu_bwd_bf16, n, stream, (__nv_bfloat16 *)dinp, (const __nv_bfloat16 *)dout,
             (const __nv_bfloat16 *)inp, n, acc);
}

int tb_cuda_add_forward(float *out, const float *a, const float *b, size_t n, void *stream)
{
    LAUNCH1D(k_add, n, stream, out, a, b, n);
}

int tb_cuda_add_backward(float *da, float *db, const float *dout, size_t n, void *stream)
{
    LAUNCH1D(k_add_bwd, n, stream, da, db, dout, n);
}

int tb_cuda_add_forward_bf16(void *out, const void *a, const void *b, size_t n, void *stream)
{
    LAUNCH1D(k_add_bf16, n, stream, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, n);
}

int tb_cuda_gap_forward(float *out, const float *inp, int N, size_t HW, int C, void *stream)
{
    if (N < 0 || N > 65535 || C < 0) return (int)cudaErrorInvalidValue;
    if (N == 0 || C == 0 || HW == 0) return 0;
    k_gap_fwd<<<dim3((unsigned)(C + 31) / 32, (unsigned)N), dim3(32, SE_ROWS), 0, STREAM(stream)>>>(out, inp, HW, C);
    return ops_launched();
}

int tb_cuda_gap_backward(float *dinp, const float *dout, int N, size_t HW, int C, void *stream)
{
    const size_t D = HW * (size_t)C;
    LAUNCH_ROWS(k_gap_bwd, D, N, stream, dinp, dout, D, C, ops_step_c(gx, C), (float)(1.0 / (double)HW));
}

int tb_cuda_se_scale_forward(float *out, const float *inp, const float *scale, int N, size_t HW, int C,
                             void *stream)
{
    const size_t D = HW * (size_t)C;
    LAUNCH_ROWS(k_se_fwd, D, N, stream, out, inp, scale, D, C, ops_step_c(gx, C));
}

int tb_cuda_se_scale_backward(float *dinp, float *dscale, const float *dout, const float *inp, const float *scale,
                              int N, size_t HW, int C, int acc, void *stream)
{
    if (N < 0 || N > 65535 || C < 0) return (int)cudaErrorInvalidValue;
    if (N == 0 || C == 0 || HW == 0) return 0;
    k_se_bwd<<<dim3((unsigned)(C + 31) / 32, (unsigned)N), dim3(32, SE_ROWS), 0, STREAM(stream)>>>(
        dinp, dscale, dout, inp, scale, HW, C, acc);
    return ops_launched();
}

int tb_cuda_dropout_forward(float *out, const float *inp, int N, size_t D, uint64_t g0,
                            const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    if (a->p <= 0.0f) { /* the identity: no hashes (and a copy only when not in place) */
        if (out == inp || total == 0) return 0;
        return (int)cudaMemcpyAsync(out, inp, total * sizeof(float), cudaMemcpyDeviceToDevice, STREAM(stream));
    }
    LAUNCH_ROWS(k_dropout, D, N, stream, out, inp, D, g0, ops_rng_key(a->seed, 3 /* RNG_STREAM_DROPOUT */),
                ops_rng_key(a->step, a->layer), a->p, drop_scale(a->p), 0);
}

int tb_cuda_dropout_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                             const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    if (a->p <= 0.0f) return tb_cuda_add_backward(dinp, NULL, dout, total, stream);
    LAUNCH_ROWS(k_dropout, D, N, stream, dinp, dout, D, g0, ops_rng_key(a->seed, 3 /* RNG_STREAM_DROPOUT */),
                ops_rng_key(a->step, a->layer), a->p, drop_scale(a->p), 1);
}

int tb_cuda_dropconnect_add_forward(float *out, const float *shortcut, const float *branch, int N, size_t D,
                                    uint64_t g0, const struct tb_cuda_drop *a, void *stream)
{
    LAUNCH_ROWS(k_dropconnect, D, N, stream, out, shortcut, branch, D, g0,
                ops_rng_key(a->seed, 4 /* RNG_STREAM_DROPCONNECT */), ops_rng_key(a->step, a->layer), a->p,
                drop_scale(a->p));
}

int tb_cuda_dropconnect_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                                 const struct tb_cuda_drop *a, void *stream)
{
    LAUNCH_ROWS(k_dropconnect, D, N, stream, dinp, dinp, dout, D, g0,
                ops_rng_key(a->seed, 4 /* RNG_STREAM_DROPCONNECT */), ops_rng_key(a->step, a->layer), a->p,
                drop_scale(a->p));
}

} /* extern "C" */
