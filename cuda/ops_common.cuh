/* ops_common.cuh — device helpers shared by the EfficientNet kernels (ops_*.cu); C++ (nvcc) only.
 *
 * Deterministic reductions: every sum over rows is cut into a fixed number of chunks that depends on
 * the row count alone (ops_chunks), each chunk reduced by one block in a fixed order, and the chunk
 * partials added in chunk order by a second kernel. No atomics, so a run gives the same bits every time
 * (the CPU kernels promise the same for any thread count; the GPU's bits differ from the CPU's).
 */
#ifndef TB_CUDA_OPS_COMMON_CUH
#define TB_CUDA_OPS_COMMON_CUH

#include "cuda_util.h" /* tb_cuda_env_is: the A-B switches */

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define OPS_THREADS 256 /* threads per block of the elementwise kernels */
#define OPS_ROWS_PER_CHUNK 512
#define OPS_MAX_CHUNKS 512

/* Returns the row chunks of a deterministic reduction over M rows: enough blocks to fill the H200's
 * 132 SMs several times over on EfficientNet's 100k–3M-row layers, at most OPS_MAX_CHUNKS. */
static inline int ops_chunks(size_t M)
{
    size_t k = (M + OPS_ROWS_PER_CHUNK - 1) / OPS_ROWS_PER_CHUNK;
    return k < 1 ? 1 : k > OPS_MAX_CHUNKS ? OPS_MAX_CHUNKS : (int)k;
}

/* Rows [*r0, *r1) of chunk k of K over M rows (balanced, contiguous). */
static __host__ __device__ inline void ops_chunk_range(size_t M, int K, int k, size_t *r0, size_t *r1)
{
    size_t q = M / (size_t)K, r = M % (size_t)K, i = (size_t)k;
    *r0 = i * q + (i < r ? i : r);
    *r1 = *r0 + q + (i < r ? 1 : 0);
}

/* Grid size for n elements at OPS_THREADS per block, capped (kernels loop grid-stride beyond). */
static inline unsigned ops_grid(size_t n)
{
    size_t b = (n + OPS_THREADS - 1) / OPS_THREADS;
    return b < 1 ? 1u : b > 65535u * 8u ? 65535u * 8u : (unsigned)b;
}

/* Blocks along x of a (samples, D) elementwise launch, grid (x, N): enough for ~4096 blocks in all (the
 * kernels loop grid-stride within a sample), at least 1. */
static inline unsigned ops_grid_rows(size_t D, int N)
{
    size_t cap = 4096 / (size_t)(N > 0 ? N : 1), b = (D + OPS_THREADS - 1) / OPS_THREADS;
    cap = cap < 1 ? 1 : cap;
    return b < 1 ? 1u : b > cap ? (unsigned)cap : (unsigned)b;
}

/* How far the channel index moves per grid-stride step of gx blocks of OPS_THREADS over rows of C
 * channels: the kernels then track c with an add and a compare instead of a division per element. */
static inline int ops_step_c(unsigned gx, int C) { return (int)(((size_t)gx * OPS_THREADS) % (size_t)C); }

/* Storage types: the kernels are templates over T, the element type of activations and their gradients
 * (float, or bf16 or fp16 for mixed precision); arithmetic is always float. ops_f reads an element as float,
 * ops_to<T> rounds a float to T, to nearest even: cuda_bf16.h's __float2bfloat16, cuda_fp16.h's
 * __float2half_rn (an fp16 overflow gives ±inf, not 65504: the executor's loss scaling must see it). For
 * float both are the identity, so the fp32 instantiations compute exactly what the untemplated kernels did. */
typedef __nv_bfloat16 bf16;
typedef __half f16;
static __host__ __device__ __forceinline__ float ops_f(float v) { return v; }
static __host__ __device__ __forceinline__ float ops_f(bf16 v) { return __bfloat162float(v); }
static __host__ __device__ __forceinline__ float ops_f(f16 v) { return __half2float(v); }
template <typename T> __host__ __device__ __forceinline__ T ops_to(float v);
template <> __host__ __device__ __forceinline__ float ops_to<float>(float v) { return v; }
template <> __host__ __device__ __forceinline__ bf16 ops_to<bf16>(float v) { return __float2bfloat16(v); }
template <> __host__ __device__ __forceinline__ f16 ops_to<f16>(float v) { return __float2half_rn(v); }

/* #pragma unroll in a __host__ __device__ body: the host compiler does not know it (and warns). */
#ifdef __CUDA_ARCH__
#define OPS_UNROLL _Pragma("unroll")
#else
#define OPS_UNROLL
#endif

/* floor(a / b) for b > 0, at compile time: the register offsets of the blocked convolution kernels. */
static constexpr __host__ __device__ int ops_floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* bytes rounded up to 256: where a scratch's next block starts (cuBLAS's and the wide loads' alignment). */
static constexpr size_t ops_align256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }


/* dst[e] += Σ_k part[k·(n_w+n_b) + e], chunks in order, for e < n_w into dw, then n_b more into db (may be
 * NULL): the finish of every chunked weight gradient (ops_dwconv.cu). */
int ops_parts_finish(float *dw, float *db, const double *part, int K, size_t n_w, size_t n_b, cudaStream_t st);
int ops_parts_finish(float *dw, float *db, const float *part, int K, size_t n_w, size_t n_b, cudaStream_t st);

/* V (1, 4 or 8) consecutive elements of T as floats, loaded or stored in as few transactions as the type allows
 * (4 fp32 or 8 bf16/fp16: 16 bytes, one; 4 bf16/fp16: 8 bytes): the elementwise kernels' wide path, which keeps
 * more bytes in flight per thread (a grid-stride loop of 2- or 4-byte loads cannot cover HBM's latency). Wide
 * needs p aligned to V elements (ops_width). The 2-byte types go through their pair type (ops_pair<H>: 2 values
 * a register, each rounded to nearest even on the way in, as ops_to<H>), one body for bf16 and fp16. */
template <typename H> struct ops_pair;
template <> struct ops_pair<bf16> {
    typedef __nv_bfloat162 type;
    static __host__ __device__ __forceinline__ type of(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <> struct ops_pair<f16> {
    typedef __half2 type;
    static __host__ __device__ __forceinline__ type of(float a, float b) { return __floats2half2_rn(a, b); }
};
template <typename H> struct alignas(8) ops_h16x4 {
    typename ops_pair<H>::type lo, hi;
};
template <typename H> struct alignas(16) ops_h16x8 {
    typename ops_pair<H>::type q[4];
};
template <int V> static __host__ __device__ __forceinline__ void ops_ldv(const float *p, float *v)
{
    if constexpr (V == 8) {
        const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else if constexpr (V == 4) {
        const float4 q = *reinterpret_cast<const float4 *>(p);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
        v[0] = *p;
    }
}
/* ops_ldv of a 2-byte type H (bf16, fp16). */
template <int V, typename H> static __host__ __device__ __forceinline__ void ops_ldv_h16(const H *p, float *v)
{
    if constexpr (V == 8) {
        const ops_h16x8<H> q = *reinterpret_cast<const ops_h16x8<H> *>(p);
        for (int k = 0; k < 4; k++) v[2 * k] = __low2float(q.q[k]), v[2 * k + 1] = __high2float(q.q[k]);
    } else if constexpr (V == 4) {
        const ops_h16x4<H> q = *reinterpret_cast<const ops_h16x4<H> *>(p);
        v[0] = __low2float(q.lo), v[1] = __high2float(q.lo), v[2] = __low2float(q.hi), v[3] = __high2float(q.hi);
    } else {
        v[0] = ops_f(*p);
    }
}
template <int V> static __host__ __device__ __forceinline__ void ops_ldv(const bf16 *p, float *v)
{
    ops_ldv_h16<V>(p, v);
}
template <int V> static __host__ __device__ __forceinline__ void ops_ldv(const f16 *p, float *v)
{
    ops_ldv_h16<V>(p, v);
}
template <int V> static __host__ __device__ __forceinline__ void ops_stv(float *p, const float *v)
{
    if constexpr (V == 8) {
        *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
        *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
    } else if constexpr (V == 4) {
        *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        *p = v[0];
    }
}
/* ops_stv of a 2-byte type H (bf16, fp16): each value rounded to nearest even, as ops_to<H>. */
template <int V, typename H> static __host__ __device__ __forceinline__ void ops_stv_h16(H *p, const float *v)
{
    if constexpr (V == 8) {
        ops_h16x8<H> q;
        for (int k = 0; k < 4; k++) q.q[k] = ops_pair<H>::of(v[2 * k], v[2 * k + 1]);
        *reinterpret_cast<ops_h16x8<H> *>(p) = q;
    } else if constexpr (V == 4) {
        ops_h16x4<H> q;
        q.lo = ops_pair<H>::of(v[0], v[1]);
        q.hi = ops_pair<H>::of(v[2], v[3]);
        *reinterpret_cast<ops_h16x4<H> *>(p) = q;
    } else {
        *p = ops_to<H>(v[0]);
    }
}
template <int V> static __host__ __device__ __forceinline__ void ops_stv(bf16 *p, const float *v)
{
    ops_stv_h16<V>(p, v);
}
template <int V> static __host__ __device__ __forceinline__ void ops_stv(f16 *p, const float *v)
{
    ops_stv_h16<V>(p, v);
}

/* 1 when rows of C elements of T at each pointer (NULL skipped) suit the wide path: C a multiple of 4, each
 * pointer aligned to 4 elements. The launchers also take TB_CUDA_NARROW=1 (one element a thread, for an A-B
 * run). */
template <typename T> static inline int ops_wide_ok(int C, const void *a, const void *b, const void *c = NULL)
{
    const uintptr_t m = 4 * sizeof(T) - 1;
    return C % 4 == 0 && !((uintptr_t)a & m) && !((uintptr_t)b & m) && !((uintptr_t)c & m);
}

/* The elements a thread of an elementwise pass takes over rows of C: 8 for a 2-byte T (bf16, fp16) where
 * C % 8 == 0 and every pointer is 16-byte aligned (one 16-byte transaction, as 4 floats), else 4 where
 * ops_wide_ok, else 1 (and 1 under TB_CUDA_NARROW=1). */
template <typename T> static inline int ops_width(int C, const void *a, const void *b, const void *c = NULL)
{
    if (tb_cuda_env_is("TB_CUDA_NARROW", "1")) return 1;
    if (sizeof(T) == 2 && C % 8 == 0 && !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15)) return 8;
    return ops_wide_ok<T>(C, a, b, c) ? 4 : 1;
}

/* Whether per-channel rows at each pointer (NULL skipped) may be read V elements at a time with ops_ldp, bytes
 * being the V elements' size: each pointer aligned to min(bytes, 16), and not under TB_CUDA_CHANNEL_ROWS=scalar
 * (the one-element loads, for an A-B run). */
static inline int ops_rows_vec(size_t bytes, const void *a, const void *b = NULL, const void *c = NULL,
                               const void *d = NULL, const void *e = NULL)
{
    if (bytes < 8 || tb_cuda_env_is("TB_CUDA_CHANNEL_ROWS", "scalar")) return 0;
    const uintptr_t m = (bytes < 16 ? bytes : 16) - 1;
    return !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e) & m);
}
/* V per-channel values from p as floats: ops_ldv's 16- (or 8-) byte loads where the launcher found the rows
 * aligned (vec, from ops_rows_vec), else V one-element loads; the same values. An elementwise pass whose V
 * channels each read a row's element issued V loads a row with V elements between lanes, so a warp's load
 * touched V times the sectors it used: the memory trace (make gpusim) counted the passes' L1 sectors 2.7-3.5
 * times those of their own data. */
template <int V, typename T> static __host__ __device__ __forceinline__ void ops_ldp(const T *p, float *v, int vec)
{
    if (V > 1 && vec) {
        ops_ldv<V>(p, v);
    } else {
OPS_UNROLL
        for (int k = 0; k < V; k++) v[k] = ops_f(p[k]);
    }
}

/* The launch's status: 0, or the CUDA error code the launch left (cleared, so it is reported once). */
static inline int ops_launched(void) { return (int)cudaGetLastError(); }

/* σ(x) with the accurate expf (not __expf), so the fp32 results stay within 1e-4 of the CPU's act_expf. */
static __host__ __device__ __forceinline__ float ops_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static __host__ __device__ __forceinline__ float ops_silu(float x) { return x * ops_sigmoid(x); }
/* d silu/dx = σ(x)·(1 + x·(1 - σ(x))), the CPU's act_silu_gradf. */
static __host__ __device__ __forceinline__ float ops_silu_grad(float x)
{
    float s = ops_sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

/* Sums v over a block of (32, blockDim.y) threads along y into thread (x, 0); sh holds 32·blockDim.y. */
template <typename T> static __device__ __forceinline__ T ops_sum_y(T v, T *sh)
{
    sh[threadIdx.y * 32 + threadIdx.x] = v;
    __syncthreads();
    T s = 0;
    if (threadIdx.y == 0)
        for (unsigned y = 0; y < blockDim.y; y++) s += sh[y * 32 + threadIdx.x]; /* fixed order */
    __syncthreads();
    return s;
}

/* Chunk `chunk`'s row of part (chunks, N, C): each of a (32, blockDim.y) block's N sums a thread (acc) summed
 * over y (ops_sum_y, in order) into part[(chunk·N + t)·C + c] by row 0, for c < C. The chunked weight
 * gradients' epilogue; ops_parts_host is its host mirror. */
template <int N>
static __device__ __forceinline__ void ops_part_store(double *part, const double *acc, double *sh, unsigned chunk,
                                                      int C, int c)
{
#pragma unroll
    for (int t = 0; t < N; t++) {
        const double v = ops_sum_y(acc[t], sh);
        if (threadIdx.y == 0 && c < C) part[((size_t)chunk * N + t) * C + c] = v;
    }
}

/* The host mirror of a chunked weight gradient: for each of ops_chunks(M) chunks [r0, r1) and channel c < C,
 * rows(acc, c, r0, r1, y) fills thread y's N sums (y < Y, the block's rows), which are added in y order
 * (ops_part_store), the chunks in order (ops_parts_finish), and dw (the first N−1 rows, (N−1)·C) and db (the
 * last, may be NULL) += them as floats: the kernels' order of sums, so the host twins check their index logic. */
template <int N, typename F>
static inline void ops_parts_host(float *dw, float *db, size_t M, int C, int Y, F &&rows)
{
    const int nk = ops_chunks(M);
    double *sum = (double *)calloc((size_t)N * C, sizeof(double));
    for (int k = 0; k < nk; k++) {
        size_t r0, r1;
        ops_chunk_range(M, nk, k, &r0, &r1);
        for (int c = 0; c < C; c++) {
            double part[N] = {0};
            for (int y = 0; y < Y; y++) {
                double acc[N] = {0};
                rows(acc, c, r0, r1, y);
                for (int t = 0; t < N; t++) part[t] += acc[t];
            }
            for (int t = 0; t < N; t++) sum[(size_t)t * C + c] += part[t];
        }
    }
    for (size_t e = 0; e < (size_t)(N - 1) * C; e++) dw[e] += (float)sum[e];
    if (db)
        for (int c = 0; c < C; c++) db[c] += (float)sum[(size_t)(N - 1) * C + c];
    free(sum);
}

/* The taps of a convolution (stride S, pad) that reach input row i: k = k0, k0 + S, ... with output rows
 * o = o0, o0 - 1, ... (o = (i + pad - k)/S exactly): loops stop at k >= K or o < 0 and skip o >= O, with
 * no division per tap. */
static __device__ __forceinline__ void ops_first_tap(int i, int pad, int S, int *k0, int *o0)
{
    *k0 = (i + pad) % S;
    *o0 = (i + pad) / S;
}

/* An output pixel p = (n·OH + oy)·OW + ox of a walk over pixels, advanced without divisions. */
struct ops_pix {
    int ox, oy, n;
};
static __host__ __device__ __forceinline__ ops_pix ops_pix_at(size_t p, int OW, int OH)
{
    ops_pix q = {(int)(p % (size_t)OW), (int)(p / (size_t)OW % (size_t)OH), (int)(p / ((size_t)OW * OH))};
    return q;
}
static __host__ __device__ __forceinline__ void ops_pix_add(ops_pix *q, int d, int OW, int OH)
{
    for (q->ox += d; q->ox >= OW; q->ox -= OW)
        if (++q->oy == OH) {
            q->oy = 0;
            q->n++;
        }
}

/* util/rng.h's counter-based hash, for host and device: the same bits as rng_key / rng_hash_keyed /
 * rng_uniform_keyed, so dropout masks on the GPU equal the CPU's. */
static __host__ __device__ __forceinline__ uint64_t ops_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static __host__ __device__ __forceinline__ uint64_t ops_rng_key(uint64_t seed, uint64_t stream)
{
    return ops_mix64(ops_mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (stream + 0x632be59bd9b4e019ULL));
}
static __host__ __device__ __forceinline__ uint64_t ops_rng_hash_keyed(uint64_t key, uint64_t counter)
{
    return ops_mix64(key ^ (counter * 0xd1b54a32d192ed03ULL + 0x8cb92ba72f3d8dd7ULL));
}
static __host__ __device__ __forceinline__ float ops_rng_uniform_keyed(uint64_t key, uint64_t counter)
{
    return (float)(ops_rng_hash_keyed(key, counter) >> 40) * (1.0f / 16777216.0f);
}

#endif
