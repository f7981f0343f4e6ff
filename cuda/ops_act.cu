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

#define SE_ROWS 8 /* blockDim.y of the per-channel sums over HW */

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

__global__ void k_gap_bwd(float *dinp, const float *dout, size_t HW, int C, size_t total, float inv)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t c = i % (size_t)C, n = i / ((size_t)C * HW);
        dinp[i] += dout[n * C + c] * inv;
    }
}

__global__ void k_se_fwd(float *out, const float *inp, const float *scale, size_t HW, int C, size_t total)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t c = i % (size_t)C, n = i / ((size_t)C * HW);
        out[i] = inp[i] * scale[n * C + c];
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

__global__ void k_bias_act(float *out, const float *inp, const float *b, int C, size_t total, int act)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float v = inp[i] + (b ? b[i % (size_t)C] : 0.0f);
        out[i] = act == 1 ? ops_silu(v) : act == 2 ? ops_sigmoid(v) : v;
    }
}

/* 1/(1-p) for p < 1, 0 otherwise: op_dropout.c's drop_scale. */
static float drop_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

/* Element e of sample n is kept iff uniform(key_stream, rng_hash(step, layer, g0+n) + e) >= p, where
 * rng_hash(step, layer, g) = hash_keyed(key_sample, g): the CPU's dropout_keep with both keys from the
 * host. accumulate selects += (backward). */
__global__ void k_dropout(float *y, const float *x, size_t D, uint64_t g0, uint64_t key_stream, uint64_t key_sample,
                          float p, float scale, size_t total, int accumulate)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / D, e = i % D;
        uint64_t base = ops_rng_hash_keyed(key_sample, g0 + n);
        float v = ops_rng_uniform_keyed(key_stream, base + e) >= p ? x[i] * scale : 0.0f;
        y[i] = accumulate ? y[i] + v : v;
    }
}

/* y = base + x·s_n, s_n = scale if uniform(key_stream, rng_hash(step, layer, g0+n)) >= p else 0 (p <= 0:
 * s_n = 1); base NULL means 0. */
__global__ void k_dropconnect(float *y, const float *base, const float *x, size_t D, uint64_t g0,
                              uint64_t key_stream, uint64_t key_sample, float p, float scale, size_t total)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / D;
        float s = p <= 0.0f ? 1.0f
                  : ops_rng_uniform_keyed(key_stream, ops_rng_hash_keyed(key_sample, g0 + n)) >= p ? scale
                                                                                                  : 0.0f;
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
    if (N <= 0 || C <= 0 || HW == 0) return N < 0 || C < 0 ? (int)cudaErrorInvalidValue : 0;
    k_gap_fwd<<<dim3((unsigned)(C + 31) / 32, (unsigned)N), dim3(32, SE_ROWS), 0, STREAM(stream)>>>(out, inp, HW, C);
    return ops_launched();
}

int tb_cuda_gap_backward(float *dinp, const float *dout, int N, size_t HW, int C, void *stream)
{
    size_t total = (size_t)N * HW * (size_t)C;
    LAUNCH1D(k_gap_bwd, total, stream, dinp, dout, HW, C, total, (float)(1.0 / (double)HW));
}

int tb_cuda_se_scale_forward(float *out, const float *inp, const float *scale, int N, size_t HW, int C,
                             void *stream)
{
    size_t total = (size_t)N * HW * (size_t)C;
    LAUNCH1D(k_se_fwd, total, stream, out, inp, scale, HW, C, total);
}

int tb_cuda_se_scale_backward(float *dinp, float *dscale, const float *dout, const float *inp, const float *scale,
                              int N, size_t HW, int C, int acc, void *stream)
{
    if (N <= 0 || C <= 0 || HW == 0) return N < 0 || C < 0 ? (int)cudaErrorInvalidValue : 0;
    k_se_bwd<<<dim3((unsigned)(C + 31) / 32, (unsigned)N), dim3(32, SE_ROWS), 0, STREAM(stream)>>>(
        dinp, dscale, dout, inp, scale, HW, C, acc);
    return ops_launched();
}

int tb_cuda_bias_act_forward(float *out, const float *inp, const float *b, int N, int C, int act, void *stream)
{
    size_t total = (size_t)N * (size_t)C;
    LAUNCH1D(k_bias_act, total, stream, out, inp, b, C, total, act);
}

int tb_cuda_dropout_forward(float *out, const float *inp, int N, size_t D, uint64_t g0,
                            const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    if (a->p <= 0.0f) { /* the identity: no hashes (and a copy only when not in place) */
        if (out == inp || total == 0) return 0;
        return (int)cudaMemcpyAsync(out, inp, total * sizeof(float), cudaMemcpyDeviceToDevice, STREAM(stream));
    }
    LAUNCH1D(k_dropout, total, stream, out, inp, D, g0, ops_rng_key(a->seed, 3 /* RNG_STREAM_DROPOUT */),
             ops_rng_key(a->step, a->layer), a->p, drop_scale(a->p), total, 0);
}

int tb_cuda_dropout_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                             const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    if (a->p <= 0.0f) return tb_cuda_add_backward(dinp, NULL, dout, total, stream);
    LAUNCH1D(k_dropout, total, stream, dinp, dout, D, g0, ops_rng_key(a->seed, 3 /* RNG_STREAM_DROPOUT */),
             ops_rng_key(a->step, a->layer), a->p, drop_scale(a->p), total, 1);
}

int tb_cuda_dropconnect_add_forward(float *out, const float *shortcut, const float *branch, int N, size_t D,
                                    uint64_t g0, const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    LAUNCH1D(k_dropconnect, total, stream, out, shortcut, branch, D, g0,
             ops_rng_key(a->seed, 4 /* RNG_STREAM_DROPCONNECT */), ops_rng_key(a->step, a->layer), a->p,
             drop_scale(a->p), total);
}

int tb_cuda_dropconnect_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                                 const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    LAUNCH1D(k_dropconnect, total, stream, dinp, dinp, dout, D, g0,
             ops_rng_key(a->seed, 4 /* RNG_STREAM_DROPCONNECT */), ops_rng_key(a->step, a->layer), a->p,
             drop_scale(a->p), total);
}

} /* extern "C" */
