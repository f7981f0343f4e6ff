/* ops_norm.cu — BatchNorm (train with running stats, eval) and GroupNorm, each optionally fused with
 * SiLU, forward and backward: the GPU twins of core/op_norm.c.
 *
 * The maths is the CPU's: statistics Σx, Σx² in double, var = Σx²/M - μ² clamped at 0, rstd =
 * 1/sqrt(var + ε) rounded to float, z = (x - μ)·(γ·rstd) + β, running stats momentum·run + (1-momentum)·batch
 * with the unbiased variance (PyTorch's convention; the CPU's default momentum 0.99 is Keras').
 * BatchNorm: three kernels per pass — chunk sums (block of 32 channels × 8 rows per row chunk, so a warp
 * reads 128 contiguous bytes of a row), a per-channel finalize that adds the chunks in order, and an
 * elementwise apply. The backward recomputes dz = dout·silu'(z) in its apply pass instead of writing it
 * over dout as the CPU does: two reads (x, dout) instead of a write and a read of dz, and the SiLU costs
 * nothing next to the bandwidth. GroupNorm: one block per (sample, group) for its statistics and
 * backward sums, elementwise apply, and chunked per-channel sums for dγ, dβ.
 * Every kernel is a template over the element type T of x, out, dout and dinp (float, or bf16 or fp16 for
 * mixed precision: ops_common.cuh); statistics, γ, β, the saved (μ, rstd) and the running stats stay float.
 */
#include "ops_common.cuh"
#include "ops_effnet.h"

#define NORM_ROWS 8   /* blockDim.y of the chunk sums */
#define GN_THREADS 256 /* threads of a (sample, group) block */

/* Sums a and b over a 1-D block of GN_THREADS threads (fixed tree order) into thread 0. */
static __device__ void block_sum2(double *a, double *b)
{
    __shared__ double sa[GN_THREADS], sb[GN_THREADS];
    sa[threadIdx.x] = *a;
    sb[threadIdx.x] = *b;
    __syncthreads();
    for (unsigned h = GN_THREADS / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            sa[threadIdx.x] += sa[threadIdx.x + h];
            sb[threadIdx.x] += sb[threadIdx.x + h];
        }
        __syncthreads();
    }
    *a = sa[0];
    *b = sb[0];
}

/* z → act(z): 0 none, 1 SiLU. */
static __device__ __forceinline__ float act_f(float z, int act) { return act ? ops_silu(z) : z; }
static __device__ __forceinline__ float act_grad(float z, int act) { return act ? ops_silu_grad(z) : 1.0f; }

/* The block's two per-channel sums (s, q) summed over y and stored as chunk k's pair of part (K,2,C). */
static __device__ __forceinline__ void chunk_pair_store(double *part, int k, int C, int c, double s, double q,
                                                        double *sh)
{
    s = ops_sum_y(s, sh);
    q = ops_sum_y(q, sh);
    if (threadIdx.y == 0 && c < C) {
        part[(size_t)k * 2 * C + c] = s;
        part[(size_t)k * 2 * C + C + c] = q;
    }
}

/* part (K,2,C) = [Σx | Σx²] of each row chunk of inp (M,C). Grid (⌈C/32⌉, K), block (32, NORM_ROWS). */
template <typename T> __global__ void k_bn_stats(double *part, const T *inp, size_t M, int C)
{
    __shared__ double sh[32 * NORM_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, K = gridDim.y, k = blockIdx.y;
    size_t r0, r1;
    ops_chunk_range(M, K, k, &r0, &r1);
    double s = 0.0, q = 0.0;
    if (c < C)
#pragma unroll 4 /* four rows' loads in flight before their adds (the adds keep their order) */
        for (size_t r = r0 + threadIdx.y; r < r1; r += NORM_ROWS) {
            double v = (double)ops_f(inp[r * C + c]);
            s += v;
            q += v * v;
        }
    chunk_pair_store(part, k, C, c, s, q, sh);
}

/* ---- Wide statistics: V channels a thread (one 16-byte load: 4 fp32 or 8 bf16/fp16) ----
 * The kernels above give a lane one channel and so load 2 or 4 bytes a row; with V channels a lane each load
 * is 16 bytes. A block of 256 threads covers CGB = min(C/V, 32) channel groups × RY = 256/CGB row slots
 * (threads past CGB·RY idle); thread (g, y) sums rows r0 + y, r0 + y + RY, … of its chunk in double, and the
 * RY slots are added in order through shared memory: part (K,2,C) as the narrow kernels, other bits. */
#define BN_WIDE_THREADS 256

/* A wide-statistics block's channel groups: min(C/V, 32); its row slots are BN_WIDE_THREADS / that. */
static __host__ __device__ __forceinline__ int bn_wide_groups(int C, int V) { return C / V < 32 ? C / V : 32; }

/* One thread's sums over its rows: forward s += x, q += x²; backward (save, γ, β given) s += dz, q += dz·(x−μ)
 * with dz = dout·act'(z). __host__ too: the host twin runs this body. */
template <typename T, int V, bool BWD>
static __host__ __device__ __forceinline__ void bn_stats_rows(double *s, double *q, const T *inp, const T *dout,
                                                             const float *save, const float *gamma,
                                                             const float *beta, size_t r, size_t r1, size_t ry,
                                                             int C, int c0, int act)
{
    float mu[V], a[V], b[V];
OPS_UNROLL
    for (int v = 0; v < V; v++) {
        s[v] = q[v] = 0.0;
        if (BWD) mu[v] = save[c0 + v], a[v] = gamma[c0 + v] * save[C + c0 + v], b[v] = beta[c0 + v];
    }
    for (; r < r1; r += ry) {
        float x[V], g[V];
        ops_ldv<V>(inp + r * C + c0, x);
        if (BWD) ops_ldv<V>(dout + r * C + c0, g);
OPS_UNROLL
        for (int v = 0; v < V; v++) {
            if (BWD) {
                const float xm = x[v] - mu[v];
                const float dz = g[v] * (act ? ops_silu_grad(xm * a[v] + b[v]) : 1.0f);
                s[v] += (double)dz;
                q[v] += (double)dz * (double)xm;
            } else {
                const double d = (double)x[v];
                s[v] += d;
                q[v] += d * d;
            }
        }
    }
}

/* Grid (⌈(C/V)/CGB⌉, K chunks), block BN_WIDE_THREADS. */
template <typename T, int V, bool BWD>
__global__ void k_bn_stats_v(double *part, const T *inp, const T *dout, const float *save, const float *gamma,
                             const float *beta, size_t M, int C, int act)
{
    /* slot-major (sh[j·threads + slot], j < 2V: the V sums then the V squares): a warp's stores and the reduction's
     * loads are consecutive doubles; thread-major, 2V doubles apart, they took 7-10 wavefronts a request where 2 do
     * (make gpusim). The same values summed in the same order. */
    __shared__ double sh[BN_WIDE_THREADS * 2 * V];
    const int CG = C / V, CGB = bn_wide_groups(C, V), RY = BN_WIDE_THREADS / CGB, t = threadIdx.x;
    const int g = blockIdx.x * CGB + t % CGB, y = t / CGB, k = blockIdx.y;
    const bool live = y < RY && g < CG;
    size_t r0, r1;
    ops_chunk_range(M, gridDim.y, k, &r0, &r1);
    double sv[V], qv[V];
    if (live) bn_stats_rows<T, V, BWD>(sv, qv, inp, dout, save, gamma, beta, r0 + y, r1, RY, C, g * V, act);
#pragma unroll
    for (int v = 0; v < V; v++) {
        sh[v * BN_WIDE_THREADS + t] = live ? sv[v] : 0.0;
        sh[(V + v) * BN_WIDE_THREADS + t] = live ? qv[v] : 0.0;
    }
    __syncthreads();
    if (t < CGB && g < CG) { /* the row slots of channel group t, in order */
#pragma unroll
        for (int v = 0; v < V; v++) {
            double S = 0.0, Q = 0.0;
            for (int yy = 0; yy < RY; yy++) {
                S += sh[v * BN_WIDE_THREADS + yy * CGB + t];
                Q += sh[(V + v) * BN_WIDE_THREADS + yy * CGB + t];
            }
            part[(size_t)k * 2 * C + g * V + v] = S;
            part[(size_t)k * 2 * C + C + g * V + v] = Q;
        }
    }
}

/* Whether the wide statistics take rows of C at a and b: where ops_width gives 16-byte loads (4 fp32 channels,
 * 8 bf16 or fp16), so not under TB_CUDA_NARROW=1. */
template <typename T> static int bn_stats_wide(int C, const void *a, const void *b)
{
    return ops_width<T>(C, a, b) * (int)sizeof(T) == 16;
}

template <typename T, bool BWD>
static void bn_stats_launch(double *part, const T *inp, const T *dout, const float *save, const float *gamma,
                            const float *beta, size_t M, int C, int act, int K, cudaStream_t st)
{
    constexpr int V = 16 / sizeof(T);
    const int CG = C / V, CGB = bn_wide_groups(C, V);
    k_bn_stats_v<T, V, BWD><<<dim3((unsigned)((CG + CGB - 1) / CGB), (unsigned)K), BN_WIDE_THREADS, 0, st>>>(
        part, inp, dout, save, gamma, beta, M, C, act);
}

/* The wide forward statistics' thread bodies run on the host (fp32, V = 4), in the kernel's order of sums:
 * part (K,2,C) as the kernel leaves it. Its index logic checked without a GPU. */
static int bn_stats_host(double *part, const float *inp, size_t M, int C)
{
    constexpr int V = 4;
    if (C % V || M == 0) return (int)cudaErrorInvalidValue;
    const int K = ops_chunks(M), CG = C / V, RY = BN_WIDE_THREADS / bn_wide_groups(C, V);
    for (int k = 0; k < K; k++) {
        size_t r0, r1;
        ops_chunk_range(M, K, k, &r0, &r1);
        for (int g = 0; g < CG; g++) {
            double S[V] = {0}, Q[V] = {0};
            for (int y = 0; y < RY; y++) {
                double sv[V], qv[V];
                bn_stats_rows<float, V, false>(sv, qv, inp, NULL, NULL, NULL, NULL, r0 + y, r1, RY, C, g * V, 0);
                for (int v = 0; v < V; v++) S[v] += sv[v], Q[v] += qv[v];
            }
            for (int v = 0; v < V; v++) {
                part[(size_t)k * 2 * C + g * V + v] = S[v];
                part[(size_t)k * 2 * C + C + g * V + v] = Q[v];
            }
        }
    }
    return 0;
}

/* save and running stats per channel from the chunk sums, added in chunk order (op_norm.c's
 * bn_finalize_block). */
__global__ void k_bn_finalize(float *save, float *run_mean, float *run_var, const double *part, int K, size_t M,
                              int C, float eps, float momentum)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0, q = 0.0;
    for (int k = 0; k < K; k++) {
        s += part[(size_t)k * 2 * C + c];
        q += part[(size_t)k * 2 * C + C + c];
    }
    double inv_m = 1.0 / (double)M, mom = (double)momentum;
    double unbias = M > 1 ? (double)M / (double)(M - 1) : 1.0;
    double mu = s * inv_m, var = q * inv_m - mu * mu;
    if (var < 0.0) var = 0.0;
    save[c] = (float)mu;
    save[C + c] = (float)(1.0 / sqrt(var + (double)eps));
    if (run_mean && run_var) {
        run_mean[c] = (float)(mom * (double)run_mean[c] + (1.0 - mom) * mu);
        run_var[c] = (float)(mom * (double)run_var[c] + (1.0 - mom) * var * unbias);
    }
}

/* The elementwise passes run grid-stride over the M·C (or one sample's HW·C) elements with the channel c
 * tracked by step_c (ops_step_c): no division per element. */

/* out = act((x - mean[c])·(γ[c]·rstd[c]) + β[c]); eval computes rstd from run_var (var) per element. V
 * consecutive channels a thread (ops_ldv): i counts groups of V, cv the group's channel block (CV = C/V). */
template <typename T, bool EVAL, int V>
__global__ void k_bn_apply(T *out, const T *inp, const float *mean, const float *rstd_or_var,
                           const float *gamma, const float *beta, size_t groups, int CV, int step_cv, float eps,
                           int act, int vec)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int cv = (int)(i % (size_t)CV);
    for (; i < groups; i += (size_t)gridDim.x * blockDim.x) {
        float x[V], mu[V], r[V], ga[V], be[V];
        ops_ldv<V>(inp + i * V, x);
        const int c0 = cv * V;
        ops_ldp<V>(mean + c0, mu, vec);
        ops_ldp<V>(rstd_or_var + c0, r, vec);
        ops_ldp<V>(gamma + c0, ga, vec);
        ops_ldp<V>(beta + c0, be, vec);
#pragma unroll
        for (int j = 0; j < V; j++) {
            float rstd = EVAL ? (float)(1.0 / sqrt((double)r[j] + (double)eps)) : r[j];
            float z = (x[j] - mu[j]) * (ga[j] * rstd) + be[j];
            x[j] = act_f(z, act);
        }
        ops_stv<V>(out + i * V, x);
        cv += step_cv;
        if (cv >= CV) cv -= CV;
    }
}

/* k_bn_apply over M·C elements, 8 (bf16, fp16) or 4 channels a thread where the rows and pointers allow. */
template <typename T, bool EVAL>
static int bn_apply(T *out, const T *inp, const float *mean, const float *rstd_or_var, const float *gamma,
                    const float *beta, size_t total, int C, float eps, int act, cudaStream_t st)
{
    const int V = ops_width<T>(C, out, inp);
    const size_t groups = total / V;
    const unsigned gx = ops_grid_rows(groups, 1);
    const int CV = C / V, step = ops_step_c(gx, CV);
    const int vec = ops_rows_vec(V * sizeof(float), mean, rstd_or_var, gamma, beta);
    if (V == 8)
        k_bn_apply<T, EVAL, 8><<<gx, OPS_THREADS, 0, st>>>(out, inp, mean, rstd_or_var, gamma, beta, groups, CV, step,
                                                           eps, act, vec);
    else if (V == 4)
        k_bn_apply<T, EVAL, 4><<<gx, OPS_THREADS, 0, st>>>(out, inp, mean, rstd_or_var, gamma, beta, groups, CV, step,
                                                           eps, act, vec);
    else
        k_bn_apply<T, EVAL, 1><<<gx, OPS_THREADS, 0, st>>>(out, inp, mean, rstd_or_var, gamma, beta, groups, CV, step,
                                                           eps, act, vec);
    return ops_launched();
}

/* part (K,2,C) = [Σdz | Σdz·(x-μ)] of each row chunk. Grid (⌈C/32⌉, K), block (32, NORM_ROWS). */
template <typename T>
__global__ void k_bn_bwd_stats(double *part, const T *dout, const T *inp, const float *save,
                               const float *gamma, const float *beta, size_t M, int C, int act)
{
    __shared__ double sh[32 * NORM_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, K = gridDim.y, k = blockIdx.y;
    size_t r0, r1;
    ops_chunk_range(M, K, k, &r0, &r1);
    double s = 0.0, q = 0.0;
    if (c < C) {
        float mu = save[c], a = gamma[c] * save[C + c], b = beta[c];
#pragma unroll 4
        for (size_t r = r0 + threadIdx.y; r < r1; r += NORM_ROWS) {
            float xm = ops_f(inp[r * C + c]) - mu;
            float dz = ops_f(dout[r * C + c]) * act_grad(xm * a + b, act);
            s += (double)dz;
            q += (double)dz * (double)xm;
        }
    }
    chunk_pair_store(part, k, C, c, s, q, sh);
}

/* dγ += Σdz·x̂, dβ += Σdz; coef (3,C) = a, c2, k0 of dx = a·dz + c2·(x-μ) + k0 (op_norm.c's
 * bn_bwd_consts_block). */
__global__ void k_bn_bwd_finalize(float *coef, float *dgamma, float *dbeta, const double *part, int K,
                                  const float *save, const float *gamma, size_t M, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sdz = 0.0, sdzxm = 0.0;
    for (int k = 0; k < K; k++) {
        sdz += part[(size_t)k * 2 * C + c];
        sdzxm += part[(size_t)k * 2 * C + C + c];
    }
    double rstd = (double)save[C + c], sdzx = sdzxm * rstd, inv_m = 1.0 / (double)M;
    double kk = (double)gamma[c] * rstd;
    if (dgamma) dgamma[c] += (float)sdzx;
    if (dbeta) dbeta[c] += (float)sdz;
    coef[c] = gamma[c] * save[C + c];
    coef[C + c] = (float)(-kk * rstd * sdzx * inv_m);
    coef[2 * C + c] = (float)(-kk * sdz * inv_m);
}

/* dinp (+)= a·dz + c2·(x-μ) + k0, V consecutive channels a thread as k_bn_apply. */
template <typename T, int V>
__global__ void k_bn_bwd_apply(T *dinp, const T *dout, const T *inp, const float *save, const float *beta,
                               const float *coef, size_t groups, int CV, int step_cv, int act, int acc, int vec)
{
    const int C = CV * V;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int cv = (int)(i % (size_t)CV);
    for (; i < groups; i += (size_t)gridDim.x * blockDim.x) {
        float x[V], g[V], d[V], a[V], mu[V], be[V], c2[V], k0[V];
        ops_ldv<V>(inp + i * V, x);
        ops_ldv<V>(dout + i * V, g);
        if (acc) ops_ldv<V>(dinp + i * V, d);
        const int c0 = cv * V;
        ops_ldp<V>(coef + c0, a, vec);
        ops_ldp<V>(save + c0, mu, vec);
        ops_ldp<V>(beta + c0, be, vec);
        ops_ldp<V>(coef + C + c0, c2, vec);
        ops_ldp<V>(coef + 2 * C + c0, k0, vec);
#pragma unroll
        for (int j = 0; j < V; j++) {
            float xm = x[j] - mu[j];
            float dz = g[j] * act_grad(xm * a[j] + be[j], act);
            float v = a[j] * dz + c2[j] * xm + k0[j];
            d[j] = acc ? d[j] + v : v;
        }
        ops_stv<V>(dinp + i * V, d);
        cv += step_cv;
        if (cv >= CV) cv -= CV;
    }
}

/* Byte offset of the coefficient block after the part doubles (256-byte aligned). */
static size_t bn_coef_offset(size_t M, int C)
{
    return ops_align256((size_t)ops_chunks(M) * 2 * (size_t)C * sizeof(double));
}

/* GroupNorm statistics: save (N,G,2) per (sample, group). Grid (G, N), block GN_THREADS. */
template <typename T> __global__ void k_gn_stats(float *save, const T *inp, size_t HW, int C, int G, float eps)
{
    int g = blockIdx.x, n = blockIdx.y, Cg = C / G;
    size_t m = HW * (size_t)Cg;
    const T *x = inp + (size_t)n * HW * C + (size_t)g * Cg;
    double s = 0.0, q = 0.0;
    for (size_t i = threadIdx.x; i < m; i += GN_THREADS) {
        double v = (double)ops_f(x[(i / Cg) * C + i % Cg]);
        s += v;
        q += v * v;
    }
    block_sum2(&s, &q);
    if (threadIdx.x == 0) {
        double mu = s / (double)m, var = q / (double)m - mu * mu;
        if (var < 0.0) var = 0.0;
        save[((size_t)n * G + g) * 2] = (float)mu;
        save[((size_t)n * G + g) * 2 + 1] = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* Grid (x, N): sample n = blockIdx.y, its D = HW·C elements; the group of c is a 32-bit division. */
template <typename T>
__global__ void k_gn_apply(T *out, const T *inp, const float *save, const float *gamma, const float *beta,
                           size_t D, int C, int G, int step_c, int act)
{
    const unsigned Cg = (unsigned)(C / G);
    const size_t n = blockIdx.y;
    const float *sv = save + n * G * 2;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int c = (int)(j % (size_t)C);
    for (; j < D; j += (size_t)gridDim.x * blockDim.x) {
        unsigned g = (unsigned)c / Cg;
        float z = (ops_f(inp[n * D + j]) - sv[2 * g]) * (gamma[c] * sv[2 * g + 1]) + beta[c];
        out[n * D + j] = ops_to<T>(act_f(z, act));
        c += step_c;
        if (c >= C) c -= C;
    }
}

/* gsum (N,G,2) = [Σγ·dz | Σγ·dz·x̂] per (sample, group). Grid (G, N), block GN_THREADS. */
template <typename T>
__global__ void k_gn_bwd_stats(double *gsum, const T *dout, const T *inp, const float *save,
                               const float *gamma, const float *beta, size_t HW, int C, int G, int act)
{
    int g = blockIdx.x, n = blockIdx.y, Cg = C / G;
    size_t m = HW * (size_t)Cg, sg = ((size_t)n * G + g) * 2;
    size_t base = (size_t)n * HW * C + (size_t)g * Cg;
    float mu = save[sg], rstd = save[sg + 1];
    double s1 = 0.0, s2 = 0.0;
    for (size_t i = threadIdx.x; i < m; i += GN_THREADS) {
        int c = g * Cg + (int)(i % Cg);
        size_t j = base + (i / Cg) * C + i % Cg;
        float xh = (ops_f(inp[j]) - mu) * rstd;
        float gdz = gamma[c] * ops_f(dout[j]) * act_grad(xh * gamma[c] + beta[c], act);
        s1 += (double)gdz;
        s2 += (double)gdz * (double)xh;
    }
    block_sum2(&s1, &s2);
    if (threadIdx.x == 0) {
        gsum[sg] = s1;
        gsum[sg + 1] = s2;
    }
}

/* Grid (x, N) as k_gn_apply; inv_m = 1/(HW·C/G). */
template <typename T>
__global__ void k_gn_bwd_apply(T *dinp, const T *dout, const T *inp, const float *save, const float *gamma,
                               const float *beta, const double *gsum, size_t D, int C, int G, int step_c,
                               float inv_m, int act, int acc)
{
    const unsigned Cg = (unsigned)(C / G);
    const size_t n = blockIdx.y;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int c = (int)(j % (size_t)C);
    for (; j < D; j += (size_t)gridDim.x * blockDim.x) {
        size_t sg = (n * G + (unsigned)c / Cg) * 2, i = n * D + j;
        float rstd = save[sg + 1], xh = (ops_f(inp[i]) - save[sg]) * rstd;
        float dz = ops_f(dout[i]) * act_grad(xh * gamma[c] + beta[c], act);
        float v = rstd * (gamma[c] * dz - (float)gsum[sg] * inv_m - xh * (float)gsum[sg + 1] * inv_m);
        dinp[i] = ops_to<T>(acc ? ops_f(dinp[i]) + v : v);
        c += step_c;
        if (c >= C) c -= C;
    }
}

/* part (K,2,C) = [Σdz | Σdz·x̂] per row chunk of the N·HW rows. Grid (⌈C/32⌉, K), block (32, NORM_ROWS). */
template <typename T>
__global__ void k_gn_param_stats(double *part, const T *dout, const T *inp, const float *save,
                                 const float *gamma, const float *beta, size_t HW, int C, int G, size_t M, int act)
{
    __shared__ double sh[32 * NORM_ROWS];
    int c = blockIdx.x * 32 + threadIdx.x, K = gridDim.y, k = blockIdx.y, Cg = C / G;
    size_t r0, r1;
    ops_chunk_range(M, K, k, &r0, &r1);
    double s = 0.0, q = 0.0;
    if (c < C)
        for (size_t r = r0 + threadIdx.y; r < r1; r += NORM_ROWS) {
            size_t sg = ((r / HW) * G + (size_t)(c / Cg)) * 2;
            float xh = (ops_f(inp[r * C + c]) - save[sg]) * save[sg + 1];
            float dz = ops_f(dout[r * C + c]) * act_grad(xh * gamma[c] + beta[c], act);
            s += (double)dz;
            q += (double)dz * (double)xh;
        }
    chunk_pair_store(part, k, C, c, s, q, sh);
}

/* dβ += Σ_k part[k][0], dγ += Σ_k part[k][1], chunks in order. */
__global__ void k_param_finish(float *dgamma, float *dbeta, const double *part, int K, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0, q = 0.0;
    for (int k = 0; k < K; k++) {
        s += part[(size_t)k * 2 * C + c];
        q += part[(size_t)k * 2 * C + C + c];
    }
    if (dbeta) dbeta[c] += (float)s;
    if (dgamma) dgamma[c] += (float)q;
}

#define STREAM(s) ((cudaStream_t)(s))

/* The launchers, once per element type; the extern "C" entry points below name the instantiations. */

template <typename T>
static int bn_forward_train(T *out, float *save, float *run_mean, float *run_var, const T *inp, const float *gamma,
                            const float *beta, size_t M, int C, float eps, float momentum, int act, void *scratch,
                            void *stream)
{
    if (M == 0 || C <= 0) return C < 0 ? (int)cudaErrorInvalidValue : 0;
    cudaStream_t st = STREAM(stream);
    double *part = (double *)scratch;
    int K = ops_chunks(M), err;
    if (bn_stats_wide<T>(C, inp, NULL))
        bn_stats_launch<T, false>(part, inp, (const T *)NULL, NULL, NULL, NULL, M, C, 0, K, st);
    else
        k_bn_stats<T><<<dim3((unsigned)(C + 31) / 32, (unsigned)K), dim3(32, NORM_ROWS), 0, st>>>(part, inp, M, C);
    if ((err = ops_launched())) return err;
    k_bn_finalize<<<(unsigned)(C + 127) / 128, 128, 0, st>>>(save, run_mean, run_var, part, K, M, C, eps, momentum);
    if ((err = ops_launched())) return err;
    if (!out) return 0; /* the statistics alone: a depthwise reader applies them on load */
    return bn_apply<T, false>(out, inp, save, save + C, gamma, beta, M * (size_t)C, C, eps, act, st);
}

template <typename T>
static int bn_forward_eval(T *out, const T *inp, const float *run_mean, const float *run_var, const float *gamma,
                           const float *beta, size_t M, int C, float eps, int act, void *stream)
{
    size_t total = M * (size_t)C;
    if (total == 0) return 0;
    return bn_apply<T, true>(out, inp, run_mean, run_var, gamma, beta, total, C, eps, act, STREAM(stream));
}

template <typename T>
static int bn_backward(T *dinp, float *dgamma, float *dbeta, const T *dout, const T *inp, const float *save,
                       const float *gamma, const float *beta, size_t M, int C, int act, int acc, void *scratch,
                       void *stream)
{
    if (M == 0 || C <= 0) return C < 0 ? (int)cudaErrorInvalidValue : 0;
    cudaStream_t st = STREAM(stream);
    double *part = (double *)scratch;
    float *coef = (float *)((char *)scratch + bn_coef_offset(M, C));
    int K = ops_chunks(M), err;
    if (bn_stats_wide<T>(C, inp, dout))
        bn_stats_launch<T, true>(part, inp, dout, save, gamma, beta, M, C, act, K, st);
    else
        k_bn_bwd_stats<T><<<dim3((unsigned)(C + 31) / 32, (unsigned)K), dim3(32, NORM_ROWS), 0, st>>>(
            part, dout, inp, save, gamma, beta, M, C, act);
    if ((err = ops_launched())) return err;
    k_bn_bwd_finalize<<<(unsigned)(C + 127) / 128, 128, 0, st>>>(coef, dgamma, dbeta, part, K, save, gamma, M, C);
    if ((err = ops_launched())) return err;
    if (!dinp) return 0;
    const int V = ops_width<T>(C, dinp, dout, inp);
    const size_t groups = M * (size_t)C / V;
    const unsigned gx = ops_grid_rows(groups, 1);
    const int CV = C / V, step = ops_step_c(gx, CV);
    const int vec = ops_rows_vec(V * sizeof(float), coef, save, beta, coef + C, coef + 2 * C);
    if (V == 8)
        k_bn_bwd_apply<T, 8><<<gx, OPS_THREADS, 0, st>>>(dinp, dout, inp, save, beta, coef, groups, CV, step, act, acc,
                                                         vec);
    else if (V == 4)
        k_bn_bwd_apply<T, 4><<<gx, OPS_THREADS, 0, st>>>(dinp, dout, inp, save, beta, coef, groups, CV, step, act, acc,
                                                         vec);
    else
        k_bn_bwd_apply<T, 1><<<gx, OPS_THREADS, 0, st>>>(dinp, dout, inp, save, beta, coef, groups, CV, step, act, acc,
                                                         vec);
    return ops_launched();
}

template <typename T>
static int gn_forward(T *out, float *save, const T *inp, const float *gamma, const float *beta, int N, size_t HW,
                      int C, int G, float eps, int act, void *stream)
{
    if (G <= 0 || C % G != 0 || N < 0 || N > 65535) return (int)cudaErrorInvalidValue;
    if (N == 0 || HW == 0) return 0;
    cudaStream_t st = STREAM(stream);
    int err;
    k_gn_stats<T><<<dim3((unsigned)G, (unsigned)N), GN_THREADS, 0, st>>>(save, inp, HW, C, G, eps);
    if ((err = ops_launched())) return err;
    size_t D = HW * (size_t)C;
    unsigned gx = ops_grid_rows(D, N);
    k_gn_apply<T><<<dim3(gx, (unsigned)N), OPS_THREADS, 0, st>>>(out, inp, save, gamma, beta, D, C, G,
                                                                 ops_step_c(gx, C), act);
    return ops_launched();
}

template <typename T>
static int gn_backward(T *dinp, float *dgamma, float *dbeta, const T *dout, const T *inp, const float *save,
                       const float *gamma, const float *beta, int N, size_t HW, int C, int G, int act, int acc,
                       void *scratch, void *stream)
{
    if (G <= 0 || C % G != 0 || N < 0 || N > 65535) return (int)cudaErrorInvalidValue;
    if (N == 0 || HW == 0) return 0;
    cudaStream_t st = STREAM(stream);
    size_t M = (size_t)N * HW;
    int K = ops_chunks(M), err;
    double *part = (double *)scratch, *gsum = part + (size_t)K * 2 * C; /* gsum needs N·G·2 ≤ N·2·C */
    if (dgamma || dbeta) {
        k_gn_param_stats<T><<<dim3((unsigned)(C + 31) / 32, (unsigned)K), dim3(32, NORM_ROWS), 0, st>>>(
            part, dout, inp, save, gamma, beta, HW, C, G, M, act);
        if ((err = ops_launched())) return err;
        k_param_finish<<<(unsigned)(C + 127) / 128, 128, 0, st>>>(dgamma, dbeta, part, K, C);
        if ((err = ops_launched())) return err;
    }
    if (!dinp) return 0;
    k_gn_bwd_stats<T><<<dim3((unsigned)G, (unsigned)N), GN_THREADS, 0, st>>>(gsum, dout, inp, save, gamma, beta, HW,
                                                                            C, G, act);
    if ((err = ops_launched())) return err;
    unsigned gx = ops_grid_rows(HW * (size_t)C, N);
    k_gn_bwd_apply<T><<<dim3(gx, (unsigned)N), OPS_THREADS, 0, st>>>(dinp, dout, inp, save, gamma, beta, gsum,
                                                                     HW * (size_t)C, C, G, ops_step_c(gx, C),
                                                                     (float)(1.0 / ((double)HW * (C / G))), act, acc);
    return ops_launched();
}

extern "C" {

int tb_cuda_bn_stats_host(double *part, const float *inp, size_t M, int C) { return bn_stats_host(part, inp, M, C); }

size_t tb_cuda_bn_scratch_bytes(size_t M, int C) { return bn_coef_offset(M, C) + 3 * (size_t)C * sizeof(float); }

int tb_cuda_bn_forward_train(float *out, float *save, float *run_mean, float *run_var, const float *inp,
                             const float *gamma, const float *beta, size_t M, int C, float eps, float momentum,
                             int act, void *scratch, void *stream)
{
    return bn_forward_train(out, save, run_mean, run_var, inp, gamma, beta, M, C, eps, momentum, act, scratch,
                            stream);
}

int tb_cuda_bn_forward_eval(float *out, const float *inp, const float *run_mean, const float *run_var,
                            const float *gamma, const float *beta, size_t M, int C, float eps, int act, void *stream)
{
    return bn_forward_eval(out, inp, run_mean, run_var, gamma, beta, M, C, eps, act, stream);
}

int tb_cuda_bn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *save, const float *gamma, const float *beta, size_t M, int C, int act, int acc,
                        void *scratch, void *stream)
{
    return bn_backward(dinp, dgamma, dbeta, dout, inp, save, gamma, beta, M, C, act, acc, scratch, stream);
}

size_t tb_cuda_gn_scratch_bytes(int N, size_t HW, int C)
{
    size_t M = (size_t)N * HW;
    return (size_t)ops_chunks(M) * 2 * (size_t)C * sizeof(double) + (size_t)N * 2 * (size_t)C * sizeof(double);
}

int tb_cuda_gn_forward(float *out, float *save, const float *inp, const float *gamma, const float *beta, int N,
                       size_t HW, int C, int G, float eps, int act, void *stream)
{
    return gn_forward(out, save, inp, gamma, beta, N, HW, C, G, eps, act, stream);
}

int tb_cuda_gn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *save, const float *gamma, const float *beta, int N, size_t HW, int C, int G,
                        int act, int acc, void *scratch, void *stream)
{
    return gn_backward(dinp, dgamma, dbeta, dout, inp, save, gamma, beta, N, HW, C, G, act, acc, scratch, stream);
}

/* The 2-byte launchers, once for bf16 and once for fp16 (tb_cuda_*_bf16 and tb_cuda_*_fp16): the C API's
 * void pointers viewed as T, the same instantiations with the other type. */
#define NORM_HALF_LAUNCHERS(SUF, T) \
int tb_cuda_bn_forward_train_##SUF(void *out, float *save, float *run_mean, float *run_var, const void *inp, \
                                  const float *gamma, const float *beta, size_t M, int C, float eps, float momentum, \
                                  int act, void *scratch, void *stream) \
{ \
    return bn_forward_train((T *)(out), save, run_mean, run_var, (const T *)(inp), gamma, beta, M, C, eps, momentum, act, scratch, \
                            stream); \
} \
\
int tb_cuda_bn_forward_eval_##SUF(void *out, const void *inp, const float *run_mean, const float *run_var, \
                                 const float *gamma, const float *beta, size_t M, int C, float eps, int act, \
                                 void *stream) \
{ \
    return bn_forward_eval((T *)(out), (const T *)(inp), run_mean, run_var, gamma, beta, M, C, eps, act, stream); \
} \
\
int tb_cuda_bn_backward_##SUF(void *dinp, float *dgamma, float *dbeta, const void *dout, const void *inp, \
                             const float *save, const float *gamma, const float *beta, size_t M, int C, int act, \
                             int acc, void *scratch, void *stream) \
{ \
    return bn_backward((T *)(dinp), dgamma, dbeta, (const T *)(dout), (const T *)(inp), save, gamma, beta, M, C, act, acc, scratch, stream); \
} \
\
int tb_cuda_gn_forward_##SUF(void *out, float *save, const void *inp, const float *gamma, const float *beta, int N, \
                            size_t HW, int C, int G, float eps, int act, void *stream) \
{ \
    return gn_forward((T *)(out), save, (const T *)(inp), gamma, beta, N, HW, C, G, eps, act, stream); \
} \
\
int tb_cuda_gn_backward_##SUF(void *dinp, float *dgamma, float *dbeta, const void *dout, const void *inp, \
                             const float *save, const float *gamma, const float *beta, int N, size_t HW, int C, int G, \
                             int act, int acc, void *scratch, void *stream) \
{ \
    return gn_backward((T *)(dinp), dgamma, dbeta, (const T *)(dout), (const T *)(inp), save, gamma, beta, N, HW, C, G, act, acc, scratch, \
                       stream); \
}

NORM_HALF_LAUNCHERS(bf16, bf16)
NORM_HALF_LAUNCHERS(fp16, f16)

} /* extern "C" */
