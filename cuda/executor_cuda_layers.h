/* executor_cuda_layers.h — the cuda executor's EfficientNet layers (executor_cuda_layers.c): each layer
 * kind of core/exec.c that is not part of a dense chain, run forward and backward with one launcher of
 * ops_effnet.h per layer (unfused), in fp32. Private to cuda/executor_cuda*.c.
 */
#ifndef TB_EXECUTOR_CUDA_LAYERS_H
#define TB_EXECUTOR_CUDA_LAYERS_H

#include "cuda_util.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

/* What a layer reads besides its activations: the executor's device state, shared by both passes. */
struct cu_env {
    const struct model *m;
    cudaStream_t s;
    tb_cublas *blas;
    float *params, *grads, *buffers; /* device, canonical layouts */
    void *scratch;                   /* device, tb_cuda_effnet_scratch_bytes of the larger batch */
    uint64_t seed;                   /* the run's seed: dropout keys, as the cpu's exec_step.seed */
};

/* One set of activations (n_max samples per tensor; dacts NULL for evaluation). */
struct cu_acts {
    int n_max;
    float *acts, *dacts;
};

/* Whether op is one of the EfficientNet layer kinds this file runs. */
int tb_cuda_effnet_op(enum op_kind op);
/* Whether layer l (an EfficientNet kind) runs here; if not, *why names what is missing. */
int tb_cuda_effnet_layer_ok(const struct model *m, const struct layer *l, const char **why);
/* Scratch bytes the layers' launchers need at n samples (the largest over the model's layers). */
size_t tb_cuda_effnet_scratch_bytes(const struct model *m, int n);
/* Enqueues layer l's forward for n samples; first_index/step key dropout as the cpu executor does. */
int tb_cuda_effnet_forward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n,
                           long first_index, long step, int training);
/* Enqueues layer l's backward (gradients ACCUMULATED into zeroed input gradients, as the caller zeroes them). */
int tb_cuda_effnet_backward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n,
                            long first_index, long step);

#endif
