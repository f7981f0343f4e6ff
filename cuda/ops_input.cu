// ops_input.cu — the input layer's general path on the GPU: uint8 pixels resampled (bilinear,
// align_corners = False) to the model's resolution, channels expanded 1 → C, normalised, and in training
// the counter-keyed crop (zero padding) and flip: core/exec.c's input_forward, element for element.
// One thread per output pixel on a (32, 8) block over (x, y), the sample in blockIdx.z: no division per
// element. The coordinate arithmetic is written with __fadd_rn / __fmul_rn so nvcc cannot contract it
// into FMAs: the truncations to a source row/column must fall where the cpu's do. The output's element type
// T is float, or bf16 or fp16 for mixed precision (each value rounded once after the fp32 arithmetic).
#include "ops_common.cuh"
#include "ops_effnet.h"

#include <cuda_runtime.h>

namespace {

__device__ __forceinline__ float bilerp(const uint8_t *r0, const uint8_t *r1, int x0, int x1, int SC, int c, float wy,
                                        float wx)
{
    const float v00 = r0[x0 * SC + c], v01 = r0[x1 * SC + c], v10 = r1[x0 * SC + c], v11 = r1[x1 * SC + c];
    const float a = __fadd_rn(__fmul_rn(1.0f - wx, v00), __fmul_rn(wx, v01));
    const float b = __fadd_rn(__fmul_rn(1.0f - wx, v10), __fmul_rn(wx, v11));
    return __fadd_rn(__fmul_rn(1.0f - wy, a), __fmul_rn(wy, b));
}

/* Output coordinate o's source neighbours *i0, *i1 (clamped to [0, S)) at scale r and its weight on *i1:
 * align_corners = False, rounded as the cpu's (no FMA moves a truncation). One axis of the bilinear map. */
__device__ __forceinline__ float src_coord(int o, float r, int S, int *i0, int *i1)
{
    float f = __fadd_rn(__fmul_rn(__fadd_rn((float)o, 0.5f), r), -0.5f);
    if (f < 0.0f) f = 0.0f;
    int i = (int)f;
    if (i > S - 1) i = S - 1;
    *i0 = i;
    *i1 = i + 1 < S ? i + 1 : S - 1;
    return f - (float)i;
}

template <typename T> __global__ void k_input(T *out, const uint8_t *x, tb_cuda_input a, uint64_t key)
{
    const int xo = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    const int n = blockIdx.z;
    if (xo >= a.W || y >= a.H) return;
    int dy = 0, dx = 0, flip = 0;
    if (a.augment) { // the sample's draw, as exec.c: key (step << 32 | global index)
        const uint64_t r = ops_rng_hash_keyed(key, (a.step << 32) | (a.g0 + (uint64_t)n));
        const int p = a.pad, span = 2 * p + 1;
        if (p > 0) dy = (int)(r % (uint64_t)span) - p, dx = (int)((r >> 16) % (uint64_t)span) - p;
        flip = a.flip ? (int)((r >> 40) & 1) : 0;
    }
    T *dp = out + (((size_t)n * a.H + y) * a.W + xo) * a.C;
    const int oy = y + dy, ox = (flip ? a.W - 1 - xo : xo) + dx;
    if (oy < 0 || oy >= a.H || ox < 0 || ox >= a.W) { // zero padding = pixel value 0
#pragma unroll
        for (int c = 0; c < 4; c++) // unrolled: constant indices keep scale/shift out of local memory
            if (c < a.C) dp[c] = ops_to<T>(a.shift[c]);
        return;
    }
    int y0, y1, x0, x1;
    const float wy = src_coord(oy, a.ry, a.SH, &y0, &y1), wx = src_coord(ox, a.rx, a.SW, &x0, &x1);
    const uint8_t *s = x + (size_t)n * a.SH * a.SW * a.SC;
    const uint8_t *r0 = s + (size_t)y0 * a.SW * a.SC, *r1 = s + (size_t)y1 * a.SW * a.SC;
    const float grey = a.SC == 1 ? bilerp(r0, r1, x0, x1, 1, 0, wy, wx) : 0.0f;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        if (c >= a.C) break;
        const float v = a.SC == 1 ? grey : bilerp(r0, r1, x0, x1, a.SC, c, wy, wx);
        dp[c] = ops_to<T>(__fadd_rn(__fmul_rn(v, a.scale[c]), a.shift[c]));
    }
}

template <typename T> int input_forward(T *out, const uint8_t *x, int N, const struct tb_cuda_input *a, void *stream)
{
    if (N <= 0) return 0;
    tb_cuda_input k = *a;
    k.ry = (float)a->SH / (float)a->H, k.rx = (float)a->SW / (float)a->W; // exec.c's ratios, on the host
    const dim3 block(32, 8), grid((unsigned)((a->W + 31) / 32), (unsigned)((a->H + 7) / 8), (unsigned)N);
    k_input<T><<<grid, block, 0, (cudaStream_t)stream>>>(out, x, k, ops_rng_key(a->seed, 5 /* RNG_STREAM_AUGMENT */));
    return (int)cudaGetLastError();
}

} // namespace

extern "C" int tb_cuda_input_forward(float *out, const uint8_t *x, int N, const struct tb_cuda_input *a, void *stream)
{
    return input_forward(out, x, N, a, stream);
}

extern "C" int tb_cuda_input_forward_bf16(void *out, const uint8_t *x, int N, const struct tb_cuda_input *a,
                                          void *stream)
{
    return input_forward((bf16 *)out, x, N, a, stream);
}

extern "C" int tb_cuda_input_forward_fp16(void *out, const uint8_t *x, int N, const struct tb_cuda_input *a,
                                          void *stream)
{
    return input_forward((f16 *)out, x, N, a, stream);
}
