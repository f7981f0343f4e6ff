/* executor_cuda_layers.h — the cuda executor's EfficientNet layers (executor_cuda_layers.c): each layer
 * kind of core/exec.c that is not part of a dense chain, run forward and backward with one launcher of
 * ops_effnet.h per layer (a BatchNorm and its depthwise reader fused: tb_cuda_bn_dw_pairs), in fp32 or with
 * bf16 activations (mixed precision), and the input layer for both; the state the layers read. Private to
 * cuda/executor_cuda*.c (and tests/test_cuda.c, which checks the pairs).
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
    const uint16_t *params16;        /* mixed precision: the weights' 2-byte copy (GEMM operands); NULL: fp32 */
    int fp16;                        /* mixed precision's 2-byte type: 1 fp16, 0 bf16 */
    float loss_scale;                /* the loss gradient's factor: fp16's loss scale, else 1 */
    const uint8_t *x;                /* device: the pass's pixels (the input layer) */
    const int32_t *labels;           /* device: the pass's labels (the loss layer) */
    float *losses;                   /* device: per-sample losses (the loss layer) */
    uint8_t *correct;                /* device: argmax == label (the loss layer) */
    /* BatchNorm applied in its depthwise reader's loads (tb_cuda_bn_dw_pairs): per layer, a BatchNorm's depthwise
     * or a depthwise's BatchNorm, else -1 (NULL: no pair). A training forward of a BatchNorm whose depthwise is in
     * the same pass (fuse_l0 <= layer < fuse_l1) leaves its output unwritten and says so in bn_unwritten[bn]; the
     * depthwise's forward and backward then read the BatchNorm's input and apply it as they load. */
    const int *bn_dw;
    unsigned char *bn_unwritten; /* the training activations' (host; per layer) */
    int fuse_l0, fuse_l1;
};

/* Mixed precision's launcher f_fp16 or f_bf16 (same arguments) by the executor's 2-byte type. */
#define TB_CU_HALF(e, f, ...) ((e)->fp16 ? f##_fp16(__VA_ARGS__) : f##_bf16(__VA_ARGS__))

/* One set of activations (n_max samples per tensor; dacts NULL for evaluation). */
struct cu_acts {
    int n_max;
    float *acts, *dacts; /* fp32: the cpu's layout (unit_off · n_max); mixed precision: bytes at off[t] */
    const size_t *off;   /* mixed precision: each tensor's byte offset (tb_cuda_bf16_layout); NULL: fp32 */
    const size_t *doff;  /* each gradient's byte offset in dacts (tb_cuda_grad_layout); NULL: as the acts */
};

/* Tensor t's activations: fp32, or in mixed precision bf16 (fp32 for saved data and the logits). */
void *tb_cuda_act(const struct cu_env *e, const struct cu_acts *a, int t);
/* Tensor t's activation gradients (bf16 in mixed precision). */
void *tb_cuda_dact(const struct cu_env *e, const struct cu_acts *a, int t);
/* Enqueues the input layer l: pixels (e->x) to fp32 or bf16 activations, resampled and augmented as exec.c. */
int tb_cuda_input_layer(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n, int training,
                        long first_index, long step);
/* Whether op is one of the EfficientNet layer kinds this file runs. */
int tb_cuda_effnet_op(enum op_kind op);
/* Whether layer l (an EfficientNet kind) runs here; if not, *why names what is missing. */
int tb_cuda_effnet_layer_ok(const struct model *m, const struct layer *l, const char **why);
/* Fills pair (n_layers) with the BatchNorm -> depthwise pairs that may run fused (the BatchNorm's output read by
 * the depthwise alone, on its fused-load path: pair[bn] = dw, pair[dw] = bn, else -1); returns how many. None
 * under TB_CUDA_BN_DW=apart (an A-B run). */
int tb_cuda_bn_dw_pairs(const struct model *m, int *pair);
/* Scratch bytes the layers' launchers need at n samples (the largest over the model's layers). */
size_t tb_cuda_effnet_scratch_bytes(const struct model *m, int n);
/* Enqueues layer l's forward for n samples; first_index/step key dropout as the cpu executor does. */
int tb_cuda_effnet_forward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n,
                           long first_index, long step, int training);
/* Readies layer li's input gradients (elem bytes an element) for its backward: returns the mask of those its
 * backward overwrites (bit 0 l->in, bit 1 l->in2: exec.c's overwrite-instead-of-zero at their last reader),
 * having zeroed the others that are at their last reader; a negative tb status on a CUDA error. */
int tb_cuda_prepare_input_grads(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int li, int n,
                                size_t elem);
/* Enqueues layer l's backward: input gradients overwritten where `over` (tb_cuda_prepare_input_grads) says,
 * else ACCUMULATED into the gradients the caller zeroed. */
int tb_cuda_effnet_backward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n,
                            long first_index, long step, int over);

#endif
