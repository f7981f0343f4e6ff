/* ops_dwconv.cu — depthwise and grouped convolutions on NHWC fp32, forward, backward-data and
 * backward-weights: the GPU twins of core/op_dwconv.c and the grouped path of core/op_conv.c.
 *
 * Why our own and not cuDNN: cuDNN's NHWC fp32 depthwise 3×3 ran at 152 GB/s of input+output on the
 * H200 (8.1 ms at 128×112×112×96), 3.5% of the ~4.3 TB/s the HBM gives a copy; at ~18 FLOPs per float
 * moved a depthwise conv is bandwidth-bound, so a direct kernel that reads each input about once from
 * HBM (the K² re-reads hit L1/L2) should run near copy speed.
 *
 * Depthwise forward: a thread owns one channel (a warp covers 32 consecutive channels: 128-byte
 * coalesced rows) and DW_OXT consecutive output columns of one output row; per kernel row it loads the
 * (DW_OXT-1)·S + K input values it needs into registers once and reuses them across the K taps and the
 * DW_OXT outputs (K, S compile-time for 3/5 × 1/2, the EfficientNet shapes; a per-output kernel runs
 * every other shape). Optional fusions, as on the CPU: the input may be the BatchNorm(+SiLU) of the
 * stored tensor (applied on load, so the normalised tensor is never written), and the epilogue adds the
 * bias and optionally applies SiLU.
 * Backward-data gathers (one thread per input element sums the taps that reach it): no atomics.
 * Backward-weights: chunks of output pixels × (tap, 32 channels) blocks sum in double, and a finish
 * kernel adds the chunks in order (deterministic, as in ops_common.cuh).
 * Grouped (G16 = 16-channel groups): direct kernels, one thread per output / input / weight element,
 * the warp spread over output channels so weight and dout reads coalesce.
 * Every kernel is a template over the element type T of the input, output and their gradients (float, or
 * bf16 or fp16 for mixed precision: ops_common.cuh); weights, biases, the BatchNorm on load and every sum are float.
 */
/* Two translation units, so that a 2-core build compiles them at once (one took ~100 s of nvcc, the main build's
 * critical path, once the fp16 instantiations joined): this file defines the fp32 and bf16 launchers, the host
 * twins and ops_parts_finish; ops_dwconv_fp16.cu includes it with OPS_DWCONV_FP16 defined and defines the fp16
 * launchers only (templates are instantiated where a launcher uses them). */
#include "ops_common.cuh"
#include "ops_effnet.h"

#include <stdlib.h>

#define DW_OXT 4   /* output columns per thread in the specialised depthwise forward */
#define DW_ROWS 8  /* blockDim.y of the weight-gradient sums */
#define GC_PART_DOUBLES ((size_t)8 << 20) /* cap on the grouped weight-gradient parts: 64 MB */

/* Kernel-side copy of the optional BatchNorm on the input. */
struct bn_in_dev {
    const float *save, *gamma, *beta;
    int silu;
};

/* The input value the convolution sees at channel c: x, or bn(x). */
template <typename T>
static __host__ __device__ __forceinline__ float load_in(const T *p, int c, int C, const bn_in_dev &bn)
{
    float x = ops_f(*p);
    if (!bn.save) return x;
    float z = (x - bn.save[c]) * (bn.gamma[c] * bn.save[C + c]) + bn.beta[c];
    return bn.silu ? ops_silu(z) : z;
}

static __host__ __device__ __forceinline__ float epilogue(float v, const float *b, int c, int act)
{
    if (b) v += b[c];
    return act ? ops_silu(v) : v;
}

/* Specialised depthwise forward: K×K, stride S; one thread = channel c, DW_OXT columns of row (n, oy). */
template <typename T, int K, int S>
__global__ void k_dw_fwd(T *out, const T *inp, const float *w, const float *b, bn_in_dev bn, int act, conv_shape s)
{
    const int OWB = (s.OW + DW_OXT - 1) / DW_OXT, C = s.C;
    const size_t total = (size_t)s.N * s.OH * OWB * C;
    constexpr int XN = (DW_OXT - 1) * S + K;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(idx % C);
        size_t r = idx / C;
        int oxb = (int)(r % OWB);
        r /= OWB;
        int oy = (int)(r % s.OH), n = (int)(r / s.OH);
        int ox0 = oxb * DW_OXT, ix0 = ox0 * S - s.pad;
        float acc[DW_OXT];
#pragma unroll
        for (int t = 0; t < DW_OXT; t++) acc[t] = 0.0f;
#pragma unroll
        for (int ky = 0; ky < K; ky++) {
            int iy = oy * S - s.pad + ky;
            if (iy < 0 || iy >= s.H) continue;
            const T *row = inp + (((size_t)n * s.H + iy) * s.W) * C + c;
            float xin[XN];
#pragma unroll
            for (int j = 0; j < XN; j++) {
                int ix = ix0 + j;
                xin[j] = ix >= 0 && ix < s.W ? load_in(row + (size_t)ix * C, c, C, bn) : 0.0f;
            }
#pragma unroll
            for (int kx = 0; kx < K; kx++) {
                float wv = w[(ky * K + kx) * C + c];
#pragma unroll
                for (int t = 0; t < DW_OXT; t++) acc[t] += xin[t * S + kx] * wv;
            }
        }
        T *o = out + (((size_t)n * s.OH + oy) * s.OW + ox0) * C + c;
#pragma unroll
        for (int t = 0; t < DW_OXT; t++)
            if (ox0 + t < s.OW) o[(size_t)t * C] = ops_to<T>(epilogue(acc[t], b, c, act));
    }
}

/* Any depthwise shape: one thread per output element. */
template <typename T>
__global__ void k_dw_fwd_any(T *out, const T *inp, const float *w, const float *b, bn_in_dev bn, int act, conv_shape s)
{
    const int C = s.C;
    const size_t total = (size_t)s.N * s.OH * s.OW * C;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(idx % C);
        size_t r = idx / C;
        int ox = (int)(r % s.OW);
        r /= s.OW;
        int oy = (int)(r % s.OH), n = (int)(r / s.OH);
        float acc = 0.0f;
        for (int ky = 0; ky < s.KH; ky++) {
            int iy = oy * s.stride - s.pad + ky;
            if (iy < 0 || iy >= s.H) continue;
            for (int kx = 0; kx < s.KW; kx++) {
                int ix = ox * s.stride - s.pad + kx;
                if (ix < 0 || ix >= s.W) continue;
                acc += load_in(inp + (((size_t)n * s.H + iy) * s.W + ix) * C + c, c, C, bn) *
                       w[(ky * s.KW + kx) * C + c];
            }
        }
        out[idx] = ops_to<T>(epilogue(acc, b, c, act));
    }
}

/* dinp (+)= Σ over the taps reaching (n, iy, ix) of dout·w; one thread per input element. */
template <typename T> __global__ void k_dw_bwd_data(T *dinp, const T *dout, const float *w, conv_shape s, int acc)
{
    const int C = s.C;
    const size_t total = (size_t)s.N * s.H * s.W * C;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(idx % C);
        size_t r = idx / C;
        int ix = (int)(r % s.W);
        r /= s.W;
        int iy = (int)(r % s.H), n = (int)(r / s.H);
        float v = 0.0f;
        int ky0, oy0, kx0, ox0;
        ops_first_tap(iy, s.pad, s.stride, &ky0, &oy0);
        ops_first_tap(ix, s.pad, s.stride, &kx0, &ox0);
        for (int ky = ky0, oy = oy0; ky < s.KH && oy >= 0; ky += s.stride, oy--) {
            if (oy >= s.OH) continue;
            for (int kx = kx0, ox = ox0; kx < s.KW && ox >= 0; kx += s.stride, ox--) {
                if (ox >= s.OW) continue;
                v += ops_f(dout[(((size_t)n * s.OH + oy) * s.OW + ox) * C + c]) * w[(ky * s.KW + kx) * C + c];
            }
        }
        dinp[idx] = ops_to<T>(acc ? ops_f(dinp[idx]) + v : v);
    }
}

/* A blocked thread's V channels from c of the BatchNorm on its input, in registers: μ, γ·rstd (the same float
 * product load_in forms) and β, loaded once for all the thread's loads (on 0: no BatchNorm). Read per element
 * instead, every input load took four more loads, lanes V floats apart: make gpusim counted the fused depthwise's
 * L1 sectors 4.8 times the unfused one's (a compiler may hoist them; this does not leave it to one). */
template <int V> struct bn_regs {
    float mu[V], k[V], be[V];
    int on, silu;
};
template <int V> static __host__ __device__ __forceinline__ bn_regs<V> bn_regs_of(const bn_in_dev &bn, int c, int C)
{
    bn_regs<V> r{};
    r.on = bn.save != NULL, r.silu = bn.silu;
    if (r.on) {
OPS_UNROLL
        for (int v = 0; v < V; v++)
            r.mu[v] = bn.save[c + v], r.k[v] = bn.gamma[c + v] * bn.save[C + c + v], r.be[v] = bn.beta[c + v];
    }
    return r;
}

/* V consecutive channels of the values the convolution sees: x, or bn(x) (load_in's arithmetic). */
template <int V, typename T>
static __host__ __device__ __forceinline__ void load_in_v(float *x, const T *p, const bn_regs<V> &r)
{
    ops_ldv<V>(p, x);
    if (!r.on) return;
OPS_UNROLL
    for (int v = 0; v < V; v++) {
        const float z = (x[v] - r.mu[v]) * r.k[v] + r.be[v];
        x[v] = r.silu ? ops_silu(z) : z;
    }
}

/* a[t][v] = 0 for the DW_OXT × V sums of a blocked kernel's thread. */
template <int V> static __host__ __device__ __forceinline__ void dw_zero(float (*a)[V])
{
OPS_UNROLL
    for (int t = 0; t < DW_OXT; t++)
OPS_UNROLL
        for (int v = 0; v < V; v++) a[t][v] = 0.0f;
}

/* dst[j] (j < N) = the V channels from c at column i0 + j of a row (p: its first element, columns C apart), zeros
 * outside [0, n), the BatchNorm applied on load when bn has one: a kernel row's values in registers. */
template <int N, int V, typename T>
static __host__ __device__ __forceinline__ void dw_row_load(float (*dst)[V], const T *p, int i0, int n, int c, int C,
                                                           const bn_regs<V> &bn)
{
OPS_UNROLL
    for (int j = 0; j < N; j++) {
        const int i = i0 + j;
        if (i >= 0 && i < n) {
            load_in_v<V>(dst[j], p + (size_t)i * C + c, bn);
        } else {
OPS_UNROLL
            for (int v = 0; v < V; v++) dst[j][v] = 0.0f;
        }
    }
}

/* The blocked forward of K×K stride S (3/5 × 1/2), one thread's work: V channels from c (1, or 4 in one
 * transaction each), DW_OXT output columns from ox0 of output row `row` = n·OH + oy; per kernel row the
 * (DW_OXT−1)·S + K inputs it needs are loaded once and reused across the K taps and DW_OXT outputs — k_dw_fwd's
 * arithmetic, element for element, on a grid that costs one division a thread instead of six. __host__ too:
 * the host twin runs this body. */
template <typename T, int K, int S, int V>
static __host__ __device__ __forceinline__ void dw_fwd_strip(T *out, const T *inp, const float *w, const float *b,
                                                            const bn_in_dev &bn, int act, const conv_shape &s, int c,
                                                            int ox0, int row)
{
    constexpr int XN = (DW_OXT - 1) * S + K;
    const int C = s.C, n = row / s.OH, oy = row - n * s.OH, ix0 = ox0 * S - s.pad;
    const bn_regs<V> r = bn_regs_of<V>(bn, c, C);
    float acc[DW_OXT][V];
    dw_zero<V>(acc);
OPS_UNROLL
    for (int ky = 0; ky < K; ky++) {
        const int iy = oy * S - s.pad + ky;
        if (iy < 0 || iy >= s.H) continue;
        float xin[XN][V];
        dw_row_load<XN, V>(xin, inp + ((size_t)n * s.H + iy) * s.W * C, ix0, s.W, c, C, r);
OPS_UNROLL
        for (int kx = 0; kx < K; kx++) {
            float wv[V];
            ops_ldv<V>(w + (ky * K + kx) * C + c, wv);
OPS_UNROLL
            for (int t = 0; t < DW_OXT; t++)
OPS_UNROLL
                for (int v = 0; v < V; v++) acc[t][v] += xin[t * S + kx][v] * wv[v];
        }
    }
    T *o = out + ((size_t)row * s.OW + ox0) * C + c;
OPS_UNROLL
    for (int t = 0; t < DW_OXT; t++) {
        if (ox0 + t >= s.OW) continue;
        float r[V];
OPS_UNROLL
        for (int v = 0; v < V; v++) r[v] = epilogue(acc[t][v], b, c + v, act);
        ops_stv<V>(o + (size_t)t * C, r);
    }
}

/* The blocked backward-data of K×K stride S (3/5 × 1/2), one thread's work: V channels from c, the DW_OXT
 * input columns from ix0 (a multiple of DW_OXT) of input row `row` = n·H + iy. Per kernel row it loads the
 * dout values its columns reach into registers once, instead of once per (column, tap) as the gather below
 * does, and adds each column's taps in the gather's order (ky, then kx, ascending): the same sums. PH = pad
 * mod S makes every register index compile-time: column ix0 + t meets tap kx at output column
 * (ix0 + pad − PH)/S + (PH + t − kx)/S wherever S divides PH + t − kx. __host__ too, so the host twin below
 * runs this very body. */
template <typename T, int K, int S, int PH, int V>
static __host__ __device__ __forceinline__ void dw_bwd_data_strip(T *dinp, const T *dout, const float *w,
                                                                  const conv_shape &s, int acc, int c, int ix0,
                                                                  int row)
{
    constexpr int OMIN = ops_floor_div(PH - (K - 1), S), OMAX = ops_floor_div(PH + DW_OXT - 1, S);
    constexpr int NX = OMAX - OMIN + 1;
    const int C = s.C, n = row / s.H, iy = row - n * s.H, ub = (ix0 + s.pad - PH) / S;
    float g[DW_OXT][V];
    dw_zero<V>(g);
OPS_UNROLL
    for (int ky = 0; ky < K; ky++) {
        const int ny = iy + s.pad - ky;
        if (ny < 0 || ny % S) continue;
        const int oy = ny / S;
        if (oy >= s.OH) continue;
        float d[NX][V];
        const bn_regs<V> none{}; /* no BatchNorm on dout */
        dw_row_load<NX, V>(d, dout + ((size_t)n * s.OH + oy) * s.OW * C, ub + OMIN, s.OW, c, C, none);
OPS_UNROLL
        for (int kx = 0; kx < K; kx++) {
            float wv[V];
            ops_ldv<V>(w + (ky * K + kx) * C + c, wv);
OPS_UNROLL
            for (int t = 0; t < DW_OXT; t++)
                if ((PH + t - kx - OMIN * S) % S == 0)
OPS_UNROLL
                    for (int v = 0; v < V; v++) g[t][v] += d[(PH + t - kx - OMIN * S) / S][v] * wv[v];
        }
    }
    T *o = dinp + ((size_t)row * s.W + ix0) * C + c;
OPS_UNROLL
    for (int t = 0; t < DW_OXT; t++) {
        if (ix0 + t >= s.W) continue;
        float r[V];
        if (acc) ops_ldv<V>(o + (size_t)t * C, r);
OPS_UNROLL
        for (int v = 0; v < V; v++) r[v] = acc ? r[v] + g[t][v] : g[t][v];
        ops_stv<V>(o + (size_t)t * C, r);
    }
}

/* The blocked kernels' grid: x over a row's strips × channel groups (CV = C/V of them), y over the rows
 * (N·OH output rows forward, N·H input rows backward); one division a thread. */
template <typename T, int K, int S, int V>
__global__ void k_dw_fwd_t(T *out, const T *inp, const float *w, const float *b, bn_in_dev bn, int act, conv_shape s)
{
    const unsigned CV = (unsigned)(s.C / V), per_row = (unsigned)((s.OW + DW_OXT - 1) / DW_OXT) * CV;
    const int rows = s.N * s.OH;
    for (int row = blockIdx.y; row < rows; row += gridDim.y)
        for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < per_row; j += gridDim.x * blockDim.x) {
            const unsigned strip = j / CV;
            dw_fwd_strip<T, K, S, V>(out, inp, w, b, bn, act, s, (int)(j - strip * CV) * V, (int)strip * DW_OXT,
                                     row);
        }
}

template <typename T, int K, int S, int PH, int V>
__global__ void k_dw_bwd_data_t(T *dinp, const T *dout, const float *w, conv_shape s, int acc)
{
    const unsigned CV = (unsigned)(s.C / V), per_row = (unsigned)((s.W + DW_OXT - 1) / DW_OXT) * CV;
    const int rows = s.N * s.H;
    for (int row = blockIdx.y; row < rows; row += gridDim.y)
        for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < per_row; j += gridDim.x * blockDim.x) {
            const unsigned strip = j / CV;
            dw_bwd_data_strip<T, K, S, PH, V>(dinp, dout, w, s, acc, (int)(j - strip * CV) * V,
                                              (int)strip * DW_OXT, row);
        }
}

/* Which blocked instance takes a shape: 1..6 for (K, S, PH) = (3,1,0) (3,2,0) (3,2,1) (5,1,0) (5,2,0)
 * (5,2,1), 0 for the earlier kernels (any other shape, or TB_CUDA_DW=old for an A-B run: k_dw_fwd, the
 * gather and the per-pixel weight gradient). */
static int dw_kind(const conv_shape *s)
{
    const int K = s->KH, S = s->stride;
    if (s->KW != K || (K != 3 && K != 5) || (S != 1 && S != 2) || s->pad < 0 || s->pad >= K) return 0;
    return (K == 3 ? 1 : 4) + (S == 2 ? 1 + s->pad % 2 : 0);
}

/* A blocked instance's K, S and pad mod S as a type, for dw_with_kind's generic callers. */
template <int K_, int S_, int PH_> struct dw_inst {
    static constexpr int K = K_, S = S_, PH = PH_;
};

/* f(dw_inst<K, S, PH>{}) for kind (dw_kind's 1..6): the one place kinds map to instances, for the launchers
 * and their host twins alike (the forward and weight gradient ignore PH). */
template <typename F> static void dw_with_kind(int kind, F &&f)
{
    switch (kind) {
    case 1: f(dw_inst<3, 1, 0>{}); break;
    case 2: f(dw_inst<3, 2, 0>{}); break;
    case 3: f(dw_inst<3, 2, 1>{}); break;
    case 4: f(dw_inst<5, 1, 0>{}); break;
    case 5: f(dw_inst<5, 2, 0>{}); break;
    default: f(dw_inst<5, 2, 1>{}); break;
    }
}

/* part (K, taps+1, C): chunk k's Σ in(tap)·dout per (tap, channel), tap == taps the bias (Σ dout), for
 * any kernel size. Grid (⌈C/32⌉, taps+1, K), block (32, DW_ROWS). */
template <typename T>
__global__ void k_dw_bwd_params(double *part, const T *inp, const T *dout, bn_in_dev bn, conv_shape s)
{
    __shared__ double sh[32 * DW_ROWS];
    const int C = s.C, taps = s.KH * s.KW, tap = blockIdx.y, K = gridDim.z, k = blockIdx.z;
    const int c = blockIdx.x * 32 + threadIdx.x, ky = tap / s.KW, kx = tap % s.KW;
    const size_t P = (size_t)s.N * s.OH * s.OW;
    size_t p0, p1;
    ops_chunk_range(P, K, k, &p0, &p1);
    double acc = 0.0;
    if (c < C && tap == taps)
        for (size_t p = p0 + threadIdx.y; p < p1; p += DW_ROWS) acc += (double)ops_f(dout[p * C + c]);
    else if (c < C) {
        ops_pix q = ops_pix_at(p0 + threadIdx.y, s.OW, s.OH);
        for (size_t p = p0 + threadIdx.y; p < p1; p += DW_ROWS, ops_pix_add(&q, DW_ROWS, s.OW, s.OH)) {
            int iy = q.oy * s.stride - s.pad + ky, ix = q.ox * s.stride - s.pad + kx;
            if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) continue;
            acc += (double)ops_f(dout[p * C + c]) *
                   (double)load_in(inp + (((size_t)q.n * s.H + iy) * s.W + ix) * C + c, c, C, bn);
        }
    }
    acc = ops_sum_y(acc, sh);
    if (threadIdx.y == 0 && c < C) part[((size_t)k * (taps + 1) + tap) * C + c] = acc;
}

/* The same sums for K×K (3, 5) with every tap and the bias in registers: dout and the input read once
 * per block instead of once per tap. Grid (⌈C/32⌉, 1, K chunks), block (32, DW_ROWS). */
template <typename T, int K>
__global__ void k_dw_bwd_params_t(double *part, const T *inp, const T *dout, bn_in_dev bn, conv_shape s)
{
    __shared__ double sh[32 * DW_ROWS];
    constexpr int TAPS = K * K;
    const int C = s.C, nk = gridDim.z, k = blockIdx.z, c = blockIdx.x * 32 + threadIdx.x;
    const size_t P = (size_t)s.N * s.OH * s.OW;
    size_t p0, p1;
    ops_chunk_range(P, nk, k, &p0, &p1);
    double acc[TAPS + 1];
#pragma unroll
    for (int t = 0; t <= TAPS; t++) acc[t] = 0.0;
    if (c < C) {
        ops_pix q = ops_pix_at(p0 + threadIdx.y, s.OW, s.OH);
        for (size_t p = p0 + threadIdx.y; p < p1; p += DW_ROWS, ops_pix_add(&q, DW_ROWS, s.OW, s.OH)) {
            const double g = (double)ops_f(dout[p * C + c]);
            acc[TAPS] += g;
#pragma unroll
            for (int ky = 0; ky < K; ky++) {
                int iy = q.oy * s.stride - s.pad + ky;
                if (iy < 0 || iy >= s.H) continue;
                const T *row = inp + ((size_t)q.n * s.H + iy) * s.W * C + c;
#pragma unroll
                for (int kx = 0; kx < K; kx++) {
                    int ix = q.ox * s.stride - s.pad + kx;
                    if (ix >= 0 && ix < s.W) acc[ky * K + kx] += g * (double)load_in(row + (size_t)ix * C, c, C, bn);
                }
            }
        }
    }
    ops_part_store<TAPS + 1>(part, acc, sh, k, C, c);
}

/* The output strips (DW_OXT columns of one output row) of a depthwise shape: N·OH·⌈OW/DW_OXT⌉. */
static __host__ __device__ __forceinline__ size_t dw_strips(const conv_shape &s)
{
    return (size_t)s.N * s.OH * ((s.OW + DW_OXT - 1) / DW_OXT);
}

/* The blocked weight gradient of K×K stride S (3/5 × 1/2), one thread's sums: channel c over the output
 * strips (DW_OXT output columns of one output row, of N·OH·⌈OW/DW_OXT⌉) u0 + y, u0 + y + DW_ROWS, … below u1.
 * Per kernel row the (DW_OXT−1)·S + K inputs its taps read are loaded (BatchNorm on load as the forward) and
 * converted once, and each meets the strip's DW_OXT douts in registers: per 4 pixels K·XN + 4 loads against
 * the per-pixel kernel's 4·(K² + 1). acc[ky·K + kx] += Σ in·dout, acc[K²] += Σ dout, in double. __host__ too:
 * the host twin runs this body. */
template <typename T, int K, int S>
static __host__ __device__ __forceinline__ void dw_bwd_params_strips(double *acc, const T *inp, const T *dout,
                                                                    const bn_in_dev &bn, const conv_shape &s, int c,
                                                                    size_t u0, size_t u1, int y)
{
    constexpr int XN = (DW_OXT - 1) * S + K, TAPS = K * K;
    const int C = s.C, strips = (s.OW + DW_OXT - 1) / DW_OXT;
    const bn_regs<1> r = bn_regs_of<1>(bn, c, C);
    ops_pix q = ops_pix_at(u0 + y, strips, s.OH); /* q.ox: the strip */
    for (size_t u = u0 + y; u < u1; u += DW_ROWS, ops_pix_add(&q, DW_ROWS, strips, s.OH)) {
        const int ox0 = q.ox * DW_OXT, ix0 = ox0 * S - s.pad;
        const T *drow = dout + (((size_t)q.n * s.OH + q.oy) * s.OW + ox0) * C + c;
        double g[DW_OXT];
        OPS_UNROLL
        for (int t = 0; t < DW_OXT; t++) {
            g[t] = ox0 + t < s.OW ? (double)ops_f(drow[(size_t)t * C]) : 0.0;
            acc[TAPS] += g[t];
        }
        OPS_UNROLL
        for (int ky = 0; ky < K; ky++) {
            const int iy = q.oy * S - s.pad + ky;
            if (iy < 0 || iy >= s.H) continue;
            float xf[XN][1];
            dw_row_load<XN, 1>(xf, inp + ((size_t)q.n * s.H + iy) * s.W * C, ix0, s.W, c, C, r);
            double xin[XN];
            OPS_UNROLL
            for (int j = 0; j < XN; j++) xin[j] = (double)xf[j][0];
            OPS_UNROLL
            for (int kx = 0; kx < K; kx++)
                OPS_UNROLL
                for (int t = 0; t < DW_OXT; t++) acc[ky * K + kx] += g[t] * xin[t * S + kx];
        }
    }
}

/* part (chunks, K²+1, C) of the blocked weight gradient. Grid (⌈C/32⌉, 1, chunks of the strips), block
 * (32, DW_ROWS). */
template <typename T, int K, int S>
__global__ void k_dw_bwd_params_s(double *part, const T *inp, const T *dout, bn_in_dev bn, conv_shape s)
{
    __shared__ double sh[32 * DW_ROWS];
    constexpr int TAPS = K * K;
    const int C = s.C, c = blockIdx.x * 32 + threadIdx.x;
    size_t u0, u1;
    ops_chunk_range(dw_strips(s), gridDim.z, blockIdx.z, &u0, &u1);
    double acc[TAPS + 1];
#pragma unroll
    for (int t = 0; t <= TAPS; t++) acc[t] = 0.0;
    if (c < C) dw_bwd_params_strips<T, K, S>(acc, inp, dout, bn, s, c, u0, u1, threadIdx.y);
    ops_part_store<TAPS + 1>(part, acc, sh, blockIdx.z, C, c);
}

/* dst[e] += Σ_k part[k][e] for e < n_w into dw, then n_b more into db (may be NULL): chunks in order, summed in
 * double (parts of double, or of float from a split GEMM). */
template <typename P> __global__ void k_parts_finish(float *dw, float *db, const P *part, int K, size_t n_w, size_t n_b)
{
    size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x, n = n_w + n_b;
    if (e >= n || (e >= n_w && !db)) return;
    double s = 0.0;
    for (int k = 0; k < K; k++) s += part[(size_t)k * n + e];
    if (e < n_w) dw[e] += (float)s;
    else db[e - n_w] += (float)s;
}

template <typename P>
static int parts_finish(float *dw, float *db, const P *part, int K, size_t n_w, size_t n_b, cudaStream_t st)
{
    size_t n = n_w + n_b;
    if (n == 0) return 0;
    k_parts_finish<P><<<(unsigned)((n + 255) / 256), 256, 0, st>>>(dw, db, part, K, n_w, n_b);
    return ops_launched();
}
#ifndef OPS_DWCONV_FP16 /* defined once: in this unit */
int ops_parts_finish(float *dw, float *db, const double *part, int K, size_t n_w, size_t n_b, cudaStream_t st)
{
    return parts_finish(dw, db, part, K, n_w, n_b, st);
}
int ops_parts_finish(float *dw, float *db, const float *part, int K, size_t n_w, size_t n_b, cudaStream_t st)
{
    return parts_finish(dw, db, part, K, n_w, n_b, st);
}
#endif

/* Grouped forward: one thread per output element (oc fastest). */
template <typename T> __global__ void k_gc_fwd(T *out, const T *inp, const float *w, const float *b, conv_shape s)
{
    const int OC = s.OC, Cg = s.C / s.groups, OCg = s.OC / s.groups;
    const size_t total = (size_t)s.N * s.OH * s.OW * OC;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int oc = (int)(idx % OC);
        size_t r = idx / OC;
        int ox = (int)(r % s.OW);
        r /= s.OW;
        int oy = (int)(r % s.OH), n = (int)(r / s.OH), c0 = oc / OCg * Cg;
        float acc = 0.0f;
        for (int ky = 0; ky < s.KH; ky++) {
            int iy = oy * s.stride - s.pad + ky;
            if (iy < 0 || iy >= s.H) continue;
            for (int kx = 0; kx < s.KW; kx++) {
                int ix = ox * s.stride - s.pad + kx;
                if (ix < 0 || ix >= s.W) continue;
                const T *x = inp + (((size_t)n * s.H + iy) * s.W + ix) * s.C + c0;
                const float *wt = w + (size_t)(ky * s.KW + kx) * Cg * OC + oc;
                for (int ci = 0; ci < Cg; ci++) acc += ops_f(x[ci]) * wt[(size_t)ci * OC];
            }
        }
        out[idx] = ops_to<T>(b ? acc + b[oc] : acc);
    }
}

/* Grouped backward-data: one thread per input element, gathering its group's output channels. */
template <typename T> __global__ void k_gc_bwd_data(T *dinp, const T *dout, const float *w, conv_shape s, int acc)
{
    const int C = s.C, OC = s.OC, Cg = s.C / s.groups, OCg = s.OC / s.groups;
    const size_t total = (size_t)s.N * s.H * s.W * C;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(idx % C);
        size_t r = idx / C;
        int ix = (int)(r % s.W);
        r /= s.W;
        int iy = (int)(r % s.H), n = (int)(r / s.H), ci = c % Cg, o0 = c / Cg * OCg;
        float v = 0.0f;
        int ky0, oy0, kx0, ox0;
        ops_first_tap(iy, s.pad, s.stride, &ky0, &oy0);
        ops_first_tap(ix, s.pad, s.stride, &kx0, &ox0);
        for (int ky = ky0, oy = oy0; ky < s.KH && oy >= 0; ky += s.stride, oy--) {
            if (oy >= s.OH) continue;
            for (int kx = kx0, ox = ox0; kx < s.KW && ox >= 0; kx += s.stride, ox--) {
                if (ox >= s.OW) continue;
                const T *g = dout + (((size_t)n * s.OH + oy) * s.OW + ox) * OC + o0;
                const float *wt = w + ((size_t)(ky * s.KW + kx) * Cg + ci) * OC + o0;
                for (int o = 0; o < OCg; o++) v += ops_f(g[o]) * wt[o];
            }
        }
        dinp[idx] = ops_to<T>(acc ? ops_f(dinp[idx]) + v : v);
    }
}

/* Grouped weight gradient: part (K, KH·KW·Cg·OC + OC), one thread per weight (or bias) element summing
 * its chunk of output pixels in double. Grid (⌈elements/256⌉, K). */
template <typename T>
__global__ void k_gc_bwd_params(double *part, const T *inp, const T *dout, conv_shape s, size_t n_w)
{
    const int OC = s.OC, Cg = s.C / s.groups, OCg = s.OC / s.groups, K = gridDim.y, k = blockIdx.y;
    size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x, n = n_w + (size_t)OC;
    if (e >= n) return;
    const size_t P = (size_t)s.N * s.OH * s.OW;
    size_t p0, p1;
    ops_chunk_range(P, K, k, &p0, &p1);
    double acc = 0.0;
    if (e >= n_w) {
        for (size_t p = p0; p < p1; p++) acc += (double)ops_f(dout[p * OC + (e - n_w)]);
    } else {
        int oc = (int)(e % OC), ci = (int)(e / OC % Cg), tap = (int)(e / ((size_t)OC * Cg));
        int ky = tap / s.KW, kx = tap % s.KW, c = oc / OCg * Cg + ci;
        ops_pix q = ops_pix_at(p0, s.OW, s.OH);
        for (size_t p = p0; p < p1; p++, ops_pix_add(&q, 1, s.OW, s.OH)) {
            int iy = q.oy * s.stride - s.pad + ky, ix = q.ox * s.stride - s.pad + kx;
            if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) continue;
            const T x = inp[(((size_t)q.n * s.H + iy) * s.W + ix) * s.C + c];
            acc += (double)ops_f(dout[p * OC + oc]) * (double)ops_f(x);
        }
    }
    part[(size_t)k * n + e] = acc;
}

/* Row chunks of the grouped weight gradient: ops_chunks, fewer when the parts would pass the cap. */
static int gc_chunks(const conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW;
    size_t per = (size_t)s->KH * s->KW * (s->C / s->groups) * s->OC + (size_t)s->OC;
    size_t cap = GC_PART_DOUBLES / per;
    int K = ops_chunks(P);
    return (size_t)K > cap ? (cap < 1 ? 1 : (int)cap) : K;
}

static bn_in_dev bn_dev(const struct tb_cuda_bn_in *bn)
{
    bn_in_dev d = {NULL, NULL, NULL, 0};
    if (bn) d = {bn->save, bn->gamma, bn->beta, bn->silu};
    return d;
}

static int dw_valid(const conv_shape *s)
{
    return s->N >= 0 && s->C > 0 && s->OC == s->C && s->groups == s->C && s->KH > 0 && s->KW > 0 && s->stride > 0;
}

static int gc_valid(const conv_shape *s)
{
    return s->N >= 0 && s->groups > 0 && s->C % s->groups == 0 && s->OC % s->groups == 0 && s->KH > 0 &&
           s->KW > 0 && s->stride > 0;
}

#define STREAM(s) ((cudaStream_t)(s))

/* The launchers, once per element type; the extern "C" entry points below name the instantiations. */

/* dw_kind, or 0 (the earlier kernels) under TB_CUDA_DW=old: an A-B run on one binary. */
static int dw_use_blocked(const conv_shape *s) { return tb_cuda_env_is("TB_CUDA_DW", "old") ? 0 : dw_kind(s); }

/* 4 channels a thread (one 16- or 8-byte transaction a load) where C and the pointers allow, unless
 * TB_CUDA_NARROW=1. */
template <typename T> static int dw_wide(const conv_shape *s, const void *a, const void *b, const float *w)
{
    return !tb_cuda_env_is("TB_CUDA_NARROW", "1") && ops_wide_ok<T>(s->C, a, b) && ops_wide_ok<float>(s->C, w, NULL);
}

/* The blocked grid over `rows` rows of `width` columns in strips of DW_OXT, C/V channel groups a strip. */
static dim3 dw_grid(const conv_shape *s, int width, size_t rows, int V)
{
    const size_t per_row = (size_t)((width + DW_OXT - 1) / DW_OXT) * (s->C / V);
    return dim3((unsigned)((per_row + OPS_THREADS - 1) / OPS_THREADS), (unsigned)(rows < 65535 ? rows : 65535));
}

template <typename T, int V>
static void dw_forward_t(int kind, T *out, const T *inp, const float *w, const float *b, bn_in_dev d, int act,
                         const conv_shape *s, cudaStream_t st)
{
    const dim3 g = dw_grid(s, s->OW, (size_t)s->N * s->OH, V);
    dw_with_kind(kind, [&](auto i) {
        k_dw_fwd_t<T, decltype(i)::K, decltype(i)::S, V><<<g, OPS_THREADS, 0, st>>>(out, inp, w, b, d, act, *s);
    });
}

template <typename T>
static int dw_forward(T *out, const T *inp, const float *w, const float *b, const struct tb_cuda_bn_in *bn, int act,
                      const conv_shape *s, void *stream)
{
    if (!dw_valid(s)) return (int)cudaErrorInvalidValue;
    size_t total = (size_t)s->N * s->OH * s->OW * s->C;
    if (total == 0) return 0;
    cudaStream_t st = STREAM(stream);
    bn_in_dev d = bn_dev(bn);
    const int kind = dw_use_blocked(s);
    if (kind) {
        if (dw_wide<T>(s, out, inp, w)) dw_forward_t<T, 4>(kind, out, inp, w, b, d, act, s, st);
        else dw_forward_t<T, 1>(kind, out, inp, w, b, d, act, s, st);
        return ops_launched();
    }
    size_t tiles = (size_t)s->N * s->OH * ((s->OW + DW_OXT - 1) / DW_OXT) * s->C;
    int K = s->KH, S = s->stride;
    if (s->KW != K || (K != 3 && K != 5) || (S != 1 && S != 2))
        k_dw_fwd_any<T><<<ops_grid(total), OPS_THREADS, 0, st>>>(out, inp, w, b, d, act, *s);
    else if (K == 3 && S == 1)
        k_dw_fwd<T, 3, 1><<<ops_grid(tiles), OPS_THREADS, 0, st>>>(out, inp, w, b, d, act, *s);
    else if (K == 3)
        k_dw_fwd<T, 3, 2><<<ops_grid(tiles), OPS_THREADS, 0, st>>>(out, inp, w, b, d, act, *s);
    else if (S == 1)
        k_dw_fwd<T, 5, 1><<<ops_grid(tiles), OPS_THREADS, 0, st>>>(out, inp, w, b, d, act, *s);
    else
        k_dw_fwd<T, 5, 2><<<ops_grid(tiles), OPS_THREADS, 0, st>>>(out, inp, w, b, d, act, *s);
    return ops_launched();
}

template <typename T, int V>
static void dw_backward_data_t(int kind, T *dinp, const T *dout, const float *w, const conv_shape *s, int acc,
                               cudaStream_t st)
{
    const dim3 g = dw_grid(s, s->W, (size_t)s->N * s->H, V);
    dw_with_kind(kind, [&](auto i) {
        using I = decltype(i);
        k_dw_bwd_data_t<T, I::K, I::S, I::PH, V><<<g, OPS_THREADS, 0, st>>>(dinp, dout, w, *s, acc);
    });
}

template <typename T>
static int dw_backward_data(T *dinp, const T *dout, const float *w, const conv_shape *s, int acc, void *stream)
{
    if (!dw_valid(s)) return (int)cudaErrorInvalidValue;
    size_t total = (size_t)s->N * s->H * s->W * s->C;
    if (total == 0) return 0;
    cudaStream_t st = STREAM(stream);
    const int kind = dw_use_blocked(s);
    if (!kind) k_dw_bwd_data<T><<<ops_grid(total), OPS_THREADS, 0, st>>>(dinp, dout, w, *s, acc);
    else if (dw_wide<T>(s, dinp, dout, w)) dw_backward_data_t<T, 4>(kind, dinp, dout, w, s, acc, st);
    else dw_backward_data_t<T, 1>(kind, dinp, dout, w, s, acc, st);
    return ops_launched();
}

#ifndef OPS_DWCONV_FP16 /* the host twins: this unit's */
/* The blocked kernels' thread bodies run on the host over every (row, strip, channel group), V channels a
 * thread (1 or 4): their index logic checked against the CPU without a GPU (tests/test_cuda_ops.c). */
template <int V>
static void dw_backward_data_host_v(int kind, float *dinp, const float *dout, const float *w, const conv_shape *s,
                                    int acc)
{
    const int strips = (s->W + DW_OXT - 1) / DW_OXT;
    for (int row = 0; row < s->N * s->H; row++)
        for (int x = 0; x < strips; x++)
            for (int c = 0; c < s->C; c += V)
                dw_with_kind(kind, [&](auto i) {
                    using I = decltype(i);
                    dw_bwd_data_strip<float, I::K, I::S, I::PH, V>(dinp, dout, w, *s, acc, c, x * DW_OXT, row);
                });
}

static int dw_backward_data_host(float *dinp, const float *dout, const float *w, const conv_shape *s, int acc,
                                 int wide)
{
    const int kind = dw_valid(s) ? dw_kind(s) : 0;
    if (!kind || (wide && s->C % 4)) return (int)cudaErrorInvalidValue;
    if (wide) dw_backward_data_host_v<4>(kind, dinp, dout, w, s, acc);
    else dw_backward_data_host_v<1>(kind, dinp, dout, w, s, acc);
    return 0;
}

template <int V>
static void dw_forward_host_v(int kind, float *out, const float *inp, const float *w, const float *b, int act,
                              const conv_shape *s)
{
    const bn_in_dev none = {NULL, NULL, NULL, 0};
    const int strips = (s->OW + DW_OXT - 1) / DW_OXT;
    for (int row = 0; row < s->N * s->OH; row++)
        for (int x = 0; x < strips; x++)
            for (int c = 0; c < s->C; c += V)
                dw_with_kind(kind, [&](auto i) {
                    using I = decltype(i);
                    dw_fwd_strip<float, I::K, I::S, V>(out, inp, w, b, none, act, *s, c, x * DW_OXT, row);
                });
}

static int dw_forward_host(float *out, const float *inp, const float *w, const float *b, int act,
                           const conv_shape *s, int wide)
{
    const int kind = dw_valid(s) ? dw_kind(s) : 0;
    if (!kind || (wide && s->C % 4)) return (int)cudaErrorInvalidValue;
    if (wide) dw_forward_host_v<4>(kind, out, inp, w, b, act, s);
    else dw_forward_host_v<1>(kind, out, inp, w, b, act, s);
    return 0;
}
#endif

template <typename T>
static int dw_backward_params(float *dw, float *db, const T *inp, const T *dout, const struct tb_cuda_bn_in *bn,
                              const conv_shape *s, void *scratch, void *stream)
{
    if (!dw_valid(s)) return (int)cudaErrorInvalidValue;
    size_t P = (size_t)s->N * s->OH * s->OW;
    if (P == 0) return 0;
    cudaStream_t st = STREAM(stream);
    int K = ops_chunks(P), taps = s->KH * s->KW, err;
    double *part = (double *)scratch;
    const dim3 block(32, DW_ROWS);
    const int kind = dw_use_blocked(s);
    if (kind) { /* blocked: chunks of the strips (no more than the pixels', which the scratch is sized for) */
        K = ops_chunks(dw_strips(*s));
        const dim3 grid((unsigned)(s->C + 31) / 32, 1, (unsigned)K);
        const bn_in_dev d = bn_dev(bn);
        dw_with_kind(kind, [&](auto i) {
            k_dw_bwd_params_s<T, decltype(i)::K, decltype(i)::S><<<grid, block, 0, st>>>(part, inp, dout, d, *s);
        });
    } else if (s->KH == 3 && s->KW == 3)
        k_dw_bwd_params_t<T, 3><<<dim3((unsigned)(s->C + 31) / 32, 1, (unsigned)K), block, 0, st>>>(part, inp, dout,
                                                                                                     bn_dev(bn), *s);
    else if (s->KH == 5 && s->KW == 5)
        k_dw_bwd_params_t<T, 5><<<dim3((unsigned)(s->C + 31) / 32, 1, (unsigned)K), block, 0, st>>>(part, inp, dout,
                                                                                                     bn_dev(bn), *s);
    else
        k_dw_bwd_params<T><<<dim3((unsigned)(s->C + 31) / 32, (unsigned)(taps + (db ? 1 : 0)), (unsigned)K), block,
                             0, st>>>(part, inp, dout, bn_dev(bn), *s);
    if ((err = ops_launched())) return err;
    /* part rows are (taps+1)·C wide whether or not the bias row was computed; finish skips it without db */
    return ops_parts_finish(dw, db, part, K, (size_t)taps * s->C, (size_t)s->C, st);
}

#ifndef OPS_DWCONV_FP16 /* the host twins: this unit's */
/* One blocked instance's host twin: each thread's sums (dw_bwd_params_strips) added as the kernel does. */
template <int K, int S> static void dw_params_host_k(float *dw, float *db, const float *inp, const float *dout,
                                                   const conv_shape *s)
{
    const bn_in_dev none = {NULL, NULL, NULL, 0};
    ops_parts_host<K * K + 1>(dw, db, dw_strips(*s), s->C, DW_ROWS,
                              [&](double *acc, int c, size_t u0, size_t u1, int y) {
                                  dw_bwd_params_strips<float, K, S>(acc, inp, dout, none, *s, c, u0, u1, y);
                              });
}

/* The blocked weight gradient's host twin (no BatchNorm on load): its index logic checked without a GPU. */
static int dw_backward_params_host(float *dw, float *db, const float *inp, const float *dout, const conv_shape *s)
{
    const int kind = dw_valid(s) ? dw_kind(s) : 0;
    if (!kind) return (int)cudaErrorInvalidValue;
    dw_with_kind(kind, [&](auto i) { dw_params_host_k<decltype(i)::K, decltype(i)::S>(dw, db, inp, dout, s); });
    return 0;
}
#endif

template <typename T>
static int gc_forward(T *out, const T *inp, const float *w, const float *b, const conv_shape *s, void *stream)
{
    if (!gc_valid(s)) return (int)cudaErrorInvalidValue;
    size_t total = (size_t)s->N * s->OH * s->OW * s->OC;
    if (total == 0) return 0;
    k_gc_fwd<T><<<ops_grid(total), OPS_THREADS, 0, STREAM(stream)>>>(out, inp, w, b, *s);
    return ops_launched();
}

template <typename T>
static int gc_backward_data(T *dinp, const T *dout, const float *w, const conv_shape *s, int acc, void *stream)
{
    if (!gc_valid(s)) return (int)cudaErrorInvalidValue;
    size_t total = (size_t)s->N * s->H * s->W * s->C;
    if (total == 0) return 0;
    k_gc_bwd_data<T><<<ops_grid(total), OPS_THREADS, 0, STREAM(stream)>>>(dinp, dout, w, *s, acc);
    return ops_launched();
}

template <typename T>
static int gc_backward_params(float *dw, float *db, const T *inp, const T *dout, const conv_shape *s, void *scratch,
                              void *stream)
{
    if (!gc_valid(s)) return (int)cudaErrorInvalidValue;
    if ((size_t)s->N * s->OH * s->OW == 0) return 0;
    cudaStream_t st = STREAM(stream);
    int K = gc_chunks(s), err;
    size_t n_w = (size_t)s->KH * s->KW * (s->C / s->groups) * s->OC, n = n_w + (size_t)s->OC;
    double *part = (double *)scratch;
    k_gc_bwd_params<T><<<dim3((unsigned)((n + 255) / 256), (unsigned)K), 256, 0, st>>>(part, inp, dout, *s, n_w);
    if ((err = ops_launched())) return err;
    return ops_parts_finish(dw, db, part, K, n_w, (size_t)s->OC, st);
}

/* The 2-byte launchers, once for bf16 (this unit) and once for fp16 (ops_dwconv_fp16.cu): tb_cuda_*_bf16 and
 * tb_cuda_*_fp16, the C API's void pointers viewed as T, the same instantiations with the other type. */
#define DW_HALF_LAUNCHERS(SUF, T) \
int tb_cuda_dwconv_forward_##SUF(void *out, const void *inp, const float *w, const float *b, \
                                const struct tb_cuda_bn_in *bn, int act, const struct conv_shape *s, void *stream) \
{ \
    return dw_forward((T *)(out), (const T *)(inp), w, b, bn, act, s, stream); \
} \
\
int tb_cuda_dwconv_backward_data_##SUF(void *dinp, const void *dout, const float *w, const struct conv_shape *s, \
                                      int acc, void *stream) \
{ \
    return dw_backward_data((T *)(dinp), (const T *)(dout), w, s, acc, stream); \
} \
\
int tb_cuda_dwconv_backward_params_##SUF(float *dw, float *db, const void *inp, const void *dout, \
                                        const struct tb_cuda_bn_in *bn, const struct conv_shape *s, void *scratch, \
                                        void *stream) \
{ \
    return dw_backward_params(dw, db, (const T *)(inp), (const T *)(dout), bn, s, scratch, stream); \
} \
\
int tb_cuda_gconv_forward_##SUF(void *out, const void *inp, const float *w, const float *b, const struct conv_shape *s, \
                               void *stream) \
{ \
    return gc_forward((T *)(out), (const T *)(inp), w, b, s, stream); \
} \
\
int tb_cuda_gconv_backward_data_##SUF(void *dinp, const void *dout, const float *w, const struct conv_shape *s, \
                                     int acc, void *stream) \
{ \
    return gc_backward_data((T *)(dinp), (const T *)(dout), w, s, acc, stream); \
} \
\
int tb_cuda_gconv_backward_params_##SUF(float *dw, float *db, const void *inp, const void *dout, \
                                       const struct conv_shape *s, void *scratch, void *stream) \
{ \
    return gc_backward_params(dw, db, (const T *)(inp), (const T *)(dout), s, scratch, stream); \
}

extern "C" {

#ifndef OPS_DWCONV_FP16 /* the fp32 and bf16 launchers (and the host twins' entry points) */
int tb_cuda_dwconv_forward(float *out, const float *inp, const float *w, const float *b,
                           const struct tb_cuda_bn_in *bn, int act, const struct conv_shape *s, void *stream)
{
    return dw_forward(out, inp, w, b, bn, act, s, stream);
}

int tb_cuda_dwconv_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s, int acc,
                                 void *stream)
{
    return dw_backward_data(dinp, dout, w, s, acc, stream);
}

int tb_cuda_dwconv_backward_params_host(float *dw, float *db, const float *inp, const float *dout,
                                        const struct conv_shape *s)
{
    return dw_backward_params_host(dw, db, inp, dout, s);
}

int tb_cuda_dwconv_backward_data_host(float *dinp, const float *dout, const float *w, const struct conv_shape *s,
                                      int acc, int wide)
{
    return dw_backward_data_host(dinp, dout, w, s, acc, wide);
}

int tb_cuda_dwconv_forward_host(float *out, const float *inp, const float *w, const float *b, int act,
                                const struct conv_shape *s, int wide)
{
    return dw_forward_host(out, inp, w, b, act, s, wide);
}

size_t tb_cuda_dwconv_scratch_bytes(const struct conv_shape *s)
{
    size_t P = (size_t)s->N * s->OH * s->OW;
    if (s->groups == s->C && s->OC == s->C)
        return (size_t)ops_chunks(P) * ((size_t)s->KH * s->KW + 1) * (size_t)s->C * sizeof(double);
    size_t per = (size_t)s->KH * s->KW * (s->C / s->groups) * s->OC + (size_t)s->OC;
    return (size_t)gc_chunks(s) * per * sizeof(double);
}

int tb_cuda_dwconv_backward_params(float *dw, float *db, const float *inp, const float *dout,
                                   const struct tb_cuda_bn_in *bn, const struct conv_shape *s, void *scratch,
                                   void *stream)
{
    return dw_backward_params(dw, db, inp, dout, bn, s, scratch, stream);
}

int tb_cuda_gconv_forward(float *out, const float *inp, const float *w, const float *b, const struct conv_shape *s,
                          void *stream)
{
    return gc_forward(out, inp, w, b, s, stream);
}

int tb_cuda_gconv_backward_data(float *dinp, const float *dout, const float *w, const struct conv_shape *s, int acc,
                                void *stream)
{
    return gc_backward_data(dinp, dout, w, s, acc, stream);
}

int tb_cuda_gconv_backward_params(float *dw, float *db, const float *inp, const float *dout,
                                  const struct conv_shape *s, void *scratch, void *stream)
{
    return gc_backward_params(dw, db, inp, dout, s, scratch, stream);
}

DW_HALF_LAUNCHERS(bf16, bf16)

#else /* ops_dwconv_fp16.cu */
DW_HALF_LAUNCHERS(fp16, f16)
#endif
} /* extern "C" */
