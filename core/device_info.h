/* device_info.h — what a device of the registry (executor.h) tells about itself beyond running layers: its
 * facts (name, driver and runtime versions, memory, compute capability), its measured ceilings (`bench
 * --calibrate`) and the device memory a run used.
 *
 * The registry's optional members fill these (the cuda device: cuda/device_cuda.c, cuda/calibrate_cuda.c);
 * the harness asks through executor_device_info / _calibrate / _memory, so it never names a device's code
 * (the layering of tests/check_layers.sh). Plain data: no ownership, no threads.
 */
#ifndef TB_DEVICE_INFO_H
#define TB_DEVICE_INFO_H

/* Facts of the device a run uses (the cuda device: GPU 0, the one its executors run on). */
struct device_info {
    char name[256];            /* "NVIDIA H200" (cudaDeviceProp.name's size) */
    char driver_version[32];   /* the kernel driver's release ("580.65.06"), "unknown" when unreadable */
    char driver_cuda[16];      /* the newest CUDA version the driver supports (cudaDriverGetVersion), "13.0" */
    char runtime_version[16];  /* the CUDA runtime linked in (cudaRuntimeGetVersion), "13.0" */
    char capability[16];       /* compute capability, "9.0" */
    double mem_gib;            /* global memory, GiB */
    int multiprocessors;       /* streaming multiprocessors */
};

/* Measured ceilings of a device: each the best of a few timed repetitions after a warm-up. */
struct device_ceilings {
    int gemm_n;                /* square GEMM size (n × n × n) */
    int reps;                  /* timed repetitions of each figure (best kept) */
    double fp32_tflops;        /* cuBLAS sgemm, TF32 off (the executors' GEMM), 10^12 FLOP/s */
    double tf32_tflops;        /* cublasGemmEx fp32 in and out, TF32 tensor cores */
    double bf16_tflops;        /* cublasGemmEx bf16 A, B and C, fp32 accumulation */
    double copy_bytes;         /* bytes of one copy's source (and destination) */
    double memcpy_gbs;         /* cudaMemcpyAsync device to device, 10^9 bytes/s, read + write counted */
    double copy_kernel_gbs;    /* a float4 copy kernel, counted the same way */
};

/* The device memory of this process, as the device accounts it. */
struct device_memory {
    double alloc_bytes;        /* what the device's executors hold now (their own accounting) */
    double alloc_peak_bytes;   /* the high-water mark of alloc_bytes since the last reset */
    double used_bytes;         /* the device's memory in use now, by every process (total − free) */
    double total_bytes;        /* the device's memory */
};

#endif
