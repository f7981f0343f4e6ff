// calibrate_kernels.cu — fill and copy kernels for the GPU ceilings (calibrate_kernels.h).
#include "calibrate_kernels.h"

#include <cuda_bf16.h>

namespace {

constexpr int kThreads = 256;

// A 32-bit mix (lowbias32): cheap, and every bit of i reaches the value.
__device__ inline uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__device__ inline float value(uint32_t seed, size_t i)
{
    const uint32_t h = mix((uint32_t)i ^ mix(seed + (uint32_t)(i >> 32)));
    return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_f32_k(float *x, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = value(seed, i);
}

__global__ void fill_bf16_k(__nv_bfloat16 *x, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(value(seed, i));
}

__global__ void copy_k(float4 *__restrict__ dst, const float4 *__restrict__ src, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// Enough resident blocks to fill every multiprocessor (2048 threads each on sm_90), no more: a grid-stride
// loop then streams with every warp busy and no tail of partial waves.
unsigned grid_for(size_t n)
{
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        sms = 132; // an H100/H200's count: the grid is then merely not sized to this GPU
    const size_t want = (n + kThreads - 1) / kThreads, cap = (size_t)sms * (2048 / kThreads);
    const size_t b = want < cap ? want : cap;
    return (unsigned)(b ? b : 1);
}

}  // namespace

extern "C" int tb_cuda_cal_fill_f32(float *x, size_t n, uint32_t seed, cudaStream_t s)
{
    fill_f32_k<<<grid_for(n), kThreads, 0, s>>>(x, n, seed);
    return (int)cudaGetLastError();
}

extern "C" int tb_cuda_cal_fill_bf16(void *x, size_t n, uint32_t seed, cudaStream_t s)
{
    fill_bf16_k<<<grid_for(n), kThreads, 0, s>>>((__nv_bfloat16 *)x, n, seed);
    return (int)cudaGetLastError();
}

extern "C" int tb_cuda_cal_copy(void *dst, const void *src, size_t n4, cudaStream_t s)
{
    copy_k<<<grid_for(n4), kThreads, 0, s>>>((float4 *)dst, (const float4 *)src, n4);
    return (int)cudaGetLastError();
}
