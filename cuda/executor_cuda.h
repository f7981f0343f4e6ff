/* executor_cuda.h — the cuda device's entry points beyond executor.h (the constructor and probe are
 * declared there, for core's registry): the batch-1 on-device training loop, and an executor's GPU and
 * stream (for the group collective, collective_cuda.c). Schedules do not include
 * this header (tests/check_layers.sh); the tests and, later, a backend member that hands over a run of
 * steps do.
 */
#ifndef TB_EXECUTOR_CUDA_H
#define TB_EXECUTOR_CUDA_H

#include "executor.h"

#include <stdint.h>

/* Whether ex (a cuda executor) has the captured batch-1 step: a dense chain, n_max 1, Adam, fusion on, fp32. */
int executor_cuda_has_loop(const struct executor *ex);
/* Runs steps first_step .. first_step + n_steps − 1 on the device without a host round trip per step:
 * every step's pixels (x_all, n_steps × the input's per-sample bytes) and labels (y_all) are uploaded
 * once, Adam's step sizes computed on the host (optim_adam_alpha) into a device table, and the captured
 * step (gather, forward, backward, update, loss) replayed n_steps times with cudaGraphLaunch; the
 * per-step losses come back in one copy at the end (losses: n_steps doubles, Σ over the step's sample).
 * Bitwise the same as n_steps calls of executor_train_step. TB_EUNSUPPORTED unless executor_cuda_has_loop. */
int executor_cuda_run_steps(struct executor *ex, long first_step, long n_steps, const uint8_t *x_all,
                            const int32_t *y_all, double *losses);

/* The GPU ordinal a cuda executor runs on (cfg.ordinal mod the GPUs present). */
int executor_cuda_gpu(const struct executor *ex);
/* Its stream (a cudaStream_t), on which every call enqueues its work. */
void *executor_cuda_stream(const struct executor *ex);

#endif
