/* ops_act.cu — elementwise activations, residual add, global average pool, SE scale, dropout and
 * drop-connect: the GPU twins of core/op_act.c, op_pool.c, op_se.c, op_dropout.c.
 *
 * All are bandwidth-bound: grid-stride loops with one element per thread per iteration (coalesced),
 * and the per-(sample, channel) sums (pool, dscale) a block of 32 channels × 8 row-strides that adds in
 * double in a fixed order, as the CPU does, so fp32 results agree to ~1e-7 relative. Every kernel is a
 * template over the activations' element type T (ops_common.cuh): float for the fp32 launchers, bf16 for
 * the _bf16 ones, fp16 for the _fp16 ones (half the bytes moved; arithmetic in float, each stored value rounded
 * once).
 */
#include "ops_common.cuh"
#include "ops_effnet.h"

/* blockDim.y of the per-(sample, channel) sums over HW: 1024-thread blocks, because there are only
 * N·⌈C/32⌉ of them (256 for 112×112×32 at batch 256) to keep the HBM busy. */
#define SE_ROWS 32

template <typename T> __global__ void k_silu_fwd(T *out, const T *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ops_to<T>(ops_silu(ops_f(inp[i])));
}

template <typename T> __global__ void k_silu_bwd(T *dinp, const T *dout, const T *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dinp[i] = ops_to<T>(ops_f(dinp[i]) + ops_f(dout[i]) * ops_silu_grad(ops_f(inp[i])));
}

template <typename T> __global__ void k_sigmoid_fwd(T *out, const T *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ops_to<T>(ops_sigmoid(ops_f(inp[i])));
}

template <typename T> __global__ void k_sigmoid_bwd(T *dinp, const T *dout, const T *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float y = ops_f(out[i]);
        dinp[i] = ops_to<T>(ops_f(dinp[i]) + ops_f(dout[i]) * (y * (1.0f - y)));
    }
}

template <typename T> __global__ void k_add(T *out, const T *a, const T *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ops_to<T>(ops_f(a[i]) + ops_f(b[i]));
}

template <typename T> __global__ void k_add_bwd(T *da, T *db, const T *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = ops_f(dout[i]);
        if (da) da[i] = ops_to<T>(ops_f(da[i]) + g);
        if (db) db[i] = ops_to<T>(ops_f(db[i]) + g);
    }
}

/* Block (32, SE_ROWS) per (32 channels, sample): out (N,C) = (Σ_hw inp) / HW in double. */
template <typename T> __global__ void k_gap_fwd(T *out, const T *inp, size_t HW, int C)
{
    __shared__ double sh[32 * SE_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, n = blockIdx.y;
    double s = 0.0;
    if (c < C)
#pragma unroll 4 /* four rows' loads in flight before their adds (in the same order) */
        for (size_t p = threadIdx.y; p < HW; p += SE_ROWS) s += (double)ops_f(inp[((size_t)n * HW + p) * C + c]);
    s = ops_sum_y(s, sh);
    if (threadIdx.y == 0 && c < C) out[(size_t)n * C + c] = ops_to<T>((float)(s * (1.0 / (double)HW)));
}

/* The (N, D = HW·C) kernels below run on grid (x, N): sample n = blockIdx.y, a grid-stride loop over its
 * D elements, channel c tracked by step_c (ops_step_c): no division per element. */

/* Wide (V = 4, ops_ldv) where C is a multiple of 4 and the pointers allow: j counts groups of V elements
 * (DV = D/V of them), cv the group's channel block (CV = C/V); the same arithmetic per element. */
template <typename T, int V>
__global__ void k_gap_bwd(T *dinp, const T *dout, size_t DV, int CV, int step_cv, float inv, int vec)
{
    const size_t n = blockIdx.y, stride = (size_t)gridDim.x * blockDim.x;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int cv = (int)(j % (size_t)CV);
    T *dx = dinp + n * DV * V;
    const T *dy = dout + n * (size_t)CV * V;
    for (; j < DV; j += stride) {
        float v[V], g[V];
        ops_ldv<V>(dx + j * V, v);
        ops_ldp<V>(dy + cv * V, g, vec);
#pragma unroll
        for (int k = 0; k < V; k++) v[k] += g[k] * inv;
        ops_stv<V>(dx + j * V, v);
        cv += step_cv;
        if (cv >= CV) cv -= CV;
    }
}

template <typename T, int V>
__global__ void k_se_fwd(T *out, const T *inp, const T *scale, size_t DV, int CV, int step_cv, int vec)
{
    const size_t n = blockIdx.y, stride = (size_t)gridDim.x * blockDim.x;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int cv = (int)(j % (size_t)CV);
    const T *s = scale + n * (size_t)CV * V;
    for (; j < DV; j += stride) {
        float v[V], sc[V];
        ops_ldv<V>(inp + (n * DV + j) * V, v);
        ops_ldp<V>(s + cv * V, sc, vec);
#pragma unroll
        for (int k = 0; k < V; k++) v[k] *= sc[k];
        ops_stv<V>(out + (n * DV + j) * V, v);
        cv += step_cv;
        if (cv >= CV) cv -= CV;
    }
}

/* Block (32, SE_ROWS) per (32 channels, sample): dinp rows and the sample's dscale in one read of dout. */
template <typename T>
__global__ void k_se_bwd(T *__restrict__ dinp, T *dscale, const T *__restrict__ dout, const T *__restrict__ inp,
                         const T *scale, size_t HW, int C, int acc)
{
    __shared__ double sh[32 * SE_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, n = blockIdx.y;
    double s = 0.0;
    if (c < C) {
        float sc = ops_f(scale[(size_t)n * C + c]);
#pragma unroll 4 /* dinp aliases neither input (restrict): later rows' loads may pass this row's store */
        for (size_t p = threadIdx.y; p < HW; p += SE_ROWS) {
            size_t i = ((size_t)n * HW + p) * C + c;
            float dy = ops_f(dout[i]);
            if (dinp) dinp[i] = ops_to<T>(acc ? ops_f(dinp[i]) + dy * sc : dy * sc);
            s += (double)dy * (double)ops_f(inp[i]);
        }
    }
    s = ops_sum_y(s, sh);
    if (threadIdx.y == 0 && c < C && dscale)
        dscale[(size_t)n * C + c] = ops_to<T>(ops_f(dscale[(size_t)n * C + c]) + (float)s);
}

/* 1/(1-p) for p < 1, 0 otherwise: op_dropout.c's drop_scale. */
static float drop_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

/* Element e of sample n (grid (x, N), n = blockIdx.y) is kept iff
 * uniform(key_stream, rng_hash(step, layer, g0+n) + e) >= p, where rng_hash(step, layer, g) =
 * hash_keyed(key_sample, g): the CPU's dropout_keep with both keys from the host. accumulate selects +=. */
template <typename T>
__global__ void k_dropout(T *y, const T *x, size_t D, uint64_t g0, uint64_t key_stream, uint64_t key_sample, float p,
                          float scale, int accumulate)
{
    const size_t n = blockIdx.y;
    const uint64_t base = ops_rng_hash_keyed(key_sample, g0 + n);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < D; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = n * D + e;
        float v = ops_rng_uniform_keyed(key_stream, base + e) >= p ? ops_f(x[i]) * scale : 0.0f;
        y[i] = ops_to<T>(accumulate ? ops_f(y[i]) + v : v);
    }
}

/* y = base + x·s_n on sample n = blockIdx.y, s_n = scale if uniform(key_stream, rng_hash(step, layer, g0+n))
 * >= p else 0 (p <= 0: s_n = 1); base NULL means 0. V elements a thread (ops_ldv; DV = D/V groups a sample). */
template <typename T, int V>
__global__ void k_dropconnect(T *y, const T *base, const T *x, size_t DV, uint64_t g0, uint64_t key_stream,
                              uint64_t key_sample, float p, float scale)
{
    const size_t n = blockIdx.y;
    const float s = p <= 0.0f ? 1.0f
                    : ops_rng_uniform_keyed(key_stream, ops_rng_hash_keyed(key_sample, g0 + n)) >= p ? scale
                                                                                                    : 0.0f;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < DV; e += (size_t)gridDim.x * blockDim.x) {
        const size_t i = (n * DV + e) * V;
        float v[V], b[V];
        ops_ldv<V>(x + i, v);
        if (base) ops_ldv<V>(base + i, b);
#pragma unroll
        for (int k = 0; k < V; k++) v[k] = base ? b[k] + v[k] * s : v[k] * s;
        ops_stv<V>(y + i, v);
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

/* The launchers, once per element type; the extern "C" entry points below name the instantiations. */

template <typename T> static int silu_fwd(T *out, const T *inp, size_t n, void *stream)
{
    LAUNCH1D(k_silu_fwd<T>, n, stream, out, inp, n);
}

template <typename T> static int silu_bwd(T *dinp, const T *dout, const T *inp, size_t n, void *stream)
{
    LAUNCH1D(k_silu_bwd<T>, n, stream, dinp, dout, inp, n);
}

template <typename T> static int sigmoid_fwd(T *out, const T *inp, size_t n, void *stream)
{
    LAUNCH1D(k_sigmoid_fwd<T>, n, stream, out, inp, n);
}

template <typename T> static int sigmoid_bwd(T *dinp, const T *dout, const T *out, size_t n, void *stream)
{
    LAUNCH1D(k_sigmoid_bwd<T>, n, stream, dinp, dout, out, n);
}

template <typename T> static int add_fwd(T *out, const T *a, const T *b, size_t n, void *stream)
{
    LAUNCH1D(k_add<T>, n, stream, out, a, b, n);
}

template <typename T> static int add_bwd(T *da, T *db, const T *dout, size_t n, void *stream)
{
    LAUNCH1D(k_add_bwd<T>, n, stream, da, db, dout, n);
}

template <typename T> static int gap_fwd(T *out, const T *inp, int N, size_t HW, int C, void *stream)
{
    if (N < 0 || N > 65535 || C < 0) return (int)cudaErrorInvalidValue;
    if (N == 0 || C == 0 || HW == 0) return 0;
    k_gap_fwd<T><<<dim3((unsigned)(C + 31) / 32, (unsigned)N), dim3(32, SE_ROWS), 0, STREAM(stream)>>>(out, inp, HW,
                                                                                                      C);
    return ops_launched();
}

/* 8 (bf16, fp16) or 4 elements a thread where C and the pointers allow (ops_width). */
template <typename T> static int gap_bwd(T *dinp, const T *dout, int N, size_t HW, int C, void *stream)
{
    const int V = ops_width<T>(C, dinp, dout);
    const size_t DV = HW * (size_t)C / V;
    const float inv = (float)(1.0 / (double)HW);
    const int vec = ops_rows_vec(V * sizeof(T), dout);
    if (V == 8) LAUNCH_ROWS((k_gap_bwd<T, 8>), DV, N, stream, dinp, dout, DV, C / 8, ops_step_c(gx, C / 8), inv, vec);
    if (V == 4) LAUNCH_ROWS((k_gap_bwd<T, 4>), DV, N, stream, dinp, dout, DV, C / 4, ops_step_c(gx, C / 4), inv, vec);
    LAUNCH_ROWS((k_gap_bwd<T, 1>), DV, N, stream, dinp, dout, DV, C, ops_step_c(gx, C), inv, 0);
}

template <typename T>
static int se_fwd(T *out, const T *inp, const T *scale, int N, size_t HW, int C, void *stream)
{
    const int V = ops_width<T>(C, out, inp);
    const size_t DV = HW * (size_t)C / V;
    const int vec = ops_rows_vec(V * sizeof(T), scale);
    if (V == 8) LAUNCH_ROWS((k_se_fwd<T, 8>), DV, N, stream, out, inp, scale, DV, C / 8, ops_step_c(gx, C / 8), vec);
    if (V == 4) LAUNCH_ROWS((k_se_fwd<T, 4>), DV, N, stream, out, inp, scale, DV, C / 4, ops_step_c(gx, C / 4), vec);
    LAUNCH_ROWS((k_se_fwd<T, 1>), DV, N, stream, out, inp, scale, DV, C, ops_step_c(gx, C), 0);
}

template <typename T>
static int se_bwd(T *dinp, T *dscale, const T *dout, const T *inp, const T *scale, int N, size_t HW, int C, int acc,
                  void *stream)
{
    if (N < 0 || N > 65535 || C < 0) return (int)cudaErrorInvalidValue;
    if (N == 0 || C == 0 || HW == 0) return 0;
    k_se_bwd<T><<<dim3((unsigned)(C + 31) / 32, (unsigned)N), dim3(32, SE_ROWS), 0, STREAM(stream)>>>(
        dinp, dscale, dout, inp, scale, HW, C, acc);
    return ops_launched();
}

template <typename T>
static int dropout_fwd(T *out, const T *inp, int N, size_t D, uint64_t g0, const struct tb_cuda_drop *a, void *stream)
{
    size_t total = (size_t)N * D;
    if (a->p <= 0.0f) { /* the identity: no hashes (and a copy only when not in place) */
        if (out == inp || total == 0) return 0;
        return (int)cudaMemcpyAsync(out, inp, total * sizeof(T), cudaMemcpyDeviceToDevice, STREAM(stream));
    }
    LAUNCH_ROWS(k_dropout<T>, D, N, stream, out, inp, D, g0, ops_rng_key(a->seed, 3 /* RNG_STREAM_DROPOUT */),
                ops_rng_key(a->step, a->layer), a->p, drop_scale(a->p), 0);
}

template <typename T>
static int dropout_bwd(T *dinp, const T *dout, int N, size_t D, uint64_t g0, const struct tb_cuda_drop *a,
                       void *stream)
{
    size_t total = (size_t)N * D;
    if (a->p <= 0.0f) return add_bwd<T>(dinp, NULL, dout, total, stream);
    LAUNCH_ROWS(k_dropout<T>, D, N, stream, dinp, dout, D, g0, ops_rng_key(a->seed, 3 /* RNG_STREAM_DROPOUT */),
                ops_rng_key(a->step, a->layer), a->p, drop_scale(a->p), 1);
}

/* y = base + x·keep/(1-p) (base may be NULL) over N samples of D, 8 (bf16, fp16) or 4 elements a thread where D
 * and the pointers allow. */
template <typename T>
static int dropconnect(T *y, const T *base, const T *x, int N, size_t D, uint64_t g0, const struct tb_cuda_drop *a,
                       void *stream)
{
    const uint64_t ks = ops_rng_key(a->seed, 4 /* RNG_STREAM_DROPCONNECT */), kn = ops_rng_key(a->step, a->layer);
    const float sc = drop_scale(a->p);
    const int V = ops_width<T>(D % 8 == 0 ? 8 : D % 4 == 0 ? 4 : 1, y, x, base);
    const size_t DV = D / V;
    if (V == 8) LAUNCH_ROWS((k_dropconnect<T, 8>), DV, N, stream, y, base, x, DV, g0, ks, kn, a->p, sc);
    if (V == 4) LAUNCH_ROWS((k_dropconnect<T, 4>), DV, N, stream, y, base, x, DV, g0, ks, kn, a->p, sc);
    LAUNCH_ROWS((k_dropconnect<T, 1>), DV, N, stream, y, base, x, DV, g0, ks, kn, a->p, sc);
}

template <typename T>
static int dropconnect_add_fwd(T *out, const T *shortcut, const T *branch, int N, size_t D, uint64_t g0,
                               const struct tb_cuda_drop *a, void *stream)
{
    return dropconnect(out, shortcut, branch, N, D, g0, a, stream);
}

template <typename T>
static int dropconnect_bwd(T *dinp, const T *dout, int N, size_t D, uint64_t g0, const struct tb_cuda_drop *a, int acc,
                           void *stream)
{
    return dropconnect(dinp, acc ? dinp : (const T *)NULL, dout, N, D, g0, a, stream);
}

extern "C" {

int tb_cuda_silu_forward(float *out, const float *inp, size_t n, void *stream) { return silu_fwd(out, inp, n, stream); }

int tb_cuda_silu_backward(float *dinp, const float *dout, const float *inp, size_t n, void *stream)
{
    return silu_bwd(dinp, dout, inp, n, stream);
}

int tb_cuda_sigmoid_forward(float *out, const float *inp, size_t n, void *stream)
{
    return sigmoid_fwd(out, inp, n, stream);
}

int tb_cuda_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n, void *stream)
{
    return sigmoid_bwd(dinp, dout, out, n, stream);
}

int tb_cuda_add_forward(float *out, const float *a, const float *b, size_t n, void *stream)
{
    return add_fwd(out, a, b, n, stream);
}

int tb_cuda_add_backward(float *da, float *db, const float *dout, size_t n, void *stream)
{
    return add_bwd(da, db, dout, n, stream);
}

int tb_cuda_gap_forward(float *out, const float *inp, int N, size_t HW, int C, void *stream)
{
    return gap_fwd(out, inp, N, HW, C, stream);
}

int tb_cuda_gap_backward(float *dinp, const float *dout, int N, size_t HW, int C, void *stream)
{
    return gap_bwd(dinp, dout, N, HW, C, stream);
}

int tb_cuda_se_scale_forward(float *out, const float *inp, const float *scale, int N, size_t HW, int C,
                             void *stream)
{
    return se_fwd(out, inp, scale, N, HW, C, stream);
}

int tb_cuda_se_scale_backward(float *dinp, float *dscale, const float *dout, const float *inp, const float *scale,
                              int N, size_t HW, int C, int acc, void *stream)
{
    return se_bwd(dinp, dscale, dout, inp, scale, N, HW, C, acc, stream);
}

int tb_cuda_dropout_forward(float *out, const float *inp, int N, size_t D, uint64_t g0,
                            const struct tb_cuda_drop *a, void *stream)
{
    return dropout_fwd(out, inp, N, D, g0, a, stream);
}

int tb_cuda_dropout_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                             const struct tb_cuda_drop *a, void *stream)
{
    return dropout_bwd(dinp, dout, N, D, g0, a, stream);
}

int tb_cuda_dropconnect_add_forward(float *out, const float *shortcut, const float *branch, int N, size_t D,
                                    uint64_t g0, const struct tb_cuda_drop *a, void *stream)
{
    return dropconnect_add_fwd(out, shortcut, branch, N, D, g0, a, stream);
}

int tb_cuda_dropconnect_backward(float *dinp, const float *dout, int N, size_t D, uint64_t g0,
                                 const struct tb_cuda_drop *a, int acc, void *stream)
{
    return dropconnect_bwd(dinp, dout, N, D, g0, a, acc, stream);
}

/* The 2-byte launchers, once for bf16 and once for fp16 (tb_cuda_*_bf16 and tb_cuda_*_fp16): the C API's
 * void pointers viewed as T, the same instantiations with the other type. */
#define ACT_HALF_LAUNCHERS(SUF, T) \
int tb_cuda_silu_forward_##SUF(void *out, const void *inp, size_t n, void *stream) \
{ \
    return silu_fwd((T *)(out), (const T *)(inp), n, stream); \
} \
\
int tb_cuda_silu_backward_##SUF(void *dinp, const void *dout, const void *inp, size_t n, void *stream) \
{ \
    return silu_bwd((T *)(dinp), (const T *)(dout), (const T *)(inp), n, stream); \
} \
\
int tb_cuda_sigmoid_forward_##SUF(void *out, const void *inp, size_t n, void *stream) \
{ \
    return sigmoid_fwd((T *)(out), (const T *)(inp), n, stream); \
} \
\
int tb_cuda_sigmoid_backward_##SUF(void *dinp, const void *dout, const void *out, size_t n, void *stream) \
{ \
    return sigmoid_bwd((T *)(dinp), (const T *)(dout), (const T *)(out), n, stream); \
} \
\
int tb_cuda_add_forward_##SUF(void *out, const void *a, const void *b, size_t n, void *stream) \
{ \
    return add_fwd((T *)(out), (const T *)(a), (const T *)(b), n, stream); \
} \
\
int tb_cuda_add_backward_##SUF(void *da, void *db, const void *dout, size_t n, void *stream) \
{ \
    return add_bwd((T *)(da), (T *)(db), (const T *)(dout), n, stream); \
} \
\
int tb_cuda_gap_forward_##SUF(void *out, const void *inp, int N, size_t HW, int C, void *stream) \
{ \
    return gap_fwd((T *)(out), (const T *)(inp), N, HW, C, stream); \
} \
\
int tb_cuda_gap_backward_##SUF(void *dinp, const void *dout, int N, size_t HW, int C, void *stream) \
{ \
    return gap_bwd((T *)(dinp), (const T *)(dout), N, HW, C, stream); \
} \
\
int tb_cuda_se_scale_forward_##SUF(void *out, const void *inp, const void *scale, int N, size_t HW, int C, \
                                  void *stream) \
{ \
    return se_fwd((T *)(out), (const T *)(inp), (const T *)(scale), N, HW, C, stream); \
} \
\
int tb_cuda_se_scale_backward_##SUF(void *dinp, void *dscale, const void *dout, const void *inp, const void *scale, \
                                   int N, size_t HW, int C, int acc, void *stream) \
{ \
    return se_bwd((T *)(dinp), (T *)(dscale), (const T *)(dout), (const T *)(inp), (const T *)(scale), N, HW, C, acc, stream); \
} \
\
int tb_cuda_dropout_forward_##SUF(void *out, const void *inp, int N, size_t D, uint64_t g0, \
                                 const struct tb_cuda_drop *a, void *stream) \
{ \
    return dropout_fwd((T *)(out), (const T *)(inp), N, D, g0, a, stream); \
} \
\
int tb_cuda_dropout_backward_##SUF(void *dinp, const void *dout, int N, size_t D, uint64_t g0, \
                                  const struct tb_cuda_drop *a, void *stream) \
{ \
    return dropout_bwd((T *)(dinp), (const T *)(dout), N, D, g0, a, stream); \
} \
\
int tb_cuda_dropconnect_add_forward_##SUF(void *out, const void *shortcut, const void *branch, int N, size_t D, \
                                         uint64_t g0, const struct tb_cuda_drop *a, void *stream) \
{ \
    return dropconnect_add_fwd((T *)(out), (const T *)(shortcut), (const T *)(branch), N, D, g0, a, stream); \
} \
\
int tb_cuda_dropconnect_backward_##SUF(void *dinp, const void *dout, int N, size_t D, uint64_t g0, \
                                      const struct tb_cuda_drop *a, int acc, void *stream) \
{ \
    return dropconnect_bwd((T *)(dinp), (const T *)(dout), N, D, g0, a, acc, stream); \
}

ACT_HALF_LAUNCHERS(bf16, bf16)
ACT_HALF_LAUNCHERS(fp16, f16)

} /* extern "C" */
