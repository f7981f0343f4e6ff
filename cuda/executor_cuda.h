/* executor_cuda.h — the cuda device's entry points beyond executor.h (the constructor and probe are
 * declared there, for core's registry): an executor's GPU and stream (for the group collective,
 * collective_cuda.c). Schedules do not include this header (tests/check_layers.sh); the batch-1 loop on
 * the device is reached through executor.h's runs of steps (executor_stage_steps, executor_run_steps).
 */
#ifndef TB_EXECUTOR_CUDA_H
#define TB_EXECUTOR_CUDA_H

#include "executor.h"

/* The GPU ordinal a cuda executor runs on (cfg.ordinal mod the GPUs present). */
int executor_cuda_gpu(const struct executor *ex);
/* Its stream (a cudaStream_t), on which every call enqueues its work. */
void *executor_cuda_stream(const struct executor *ex);

#endif
