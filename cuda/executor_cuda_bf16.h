/* executor_cuda_bf16.h — mixed precision on the cuda device (--precision bf16 or fp16), arranged as PyTorch's
 * autocast with channels-last tensors: fp32 master weights, gradients and optimizer state; activations and
 * their gradients stored in 2 bytes, bf16 or fp16 (half the bytes of a bandwidth-bound network); GEMMs on
 * 2-byte operands (the weights' copy, made once per update) with fp32 accumulation; the loss in fp32 from
 * fp32 logits (fp16: its gradient seeded times the loss scale, executor_cuda.c's). This file: which tensors
 * are 2-byte, their byte layout, and the dense chain's layers (dense, ReLU, softmax cross-entropy) on them;
 * the input and EfficientNet layers go through executor_cuda_layers.c's 2-byte path (TB_CU_HALF).
 * Private to cuda/executor_cuda*.c.
 */
#ifndef TB_EXECUTOR_CUDA_BF16_H
#define TB_EXECUTOR_CUDA_BF16_H

#include "executor_cuda_layers.h"

#include <stddef.h>

/* Whether model m runs in mixed precision on this device; if not, *why says what it lacks. */
int tb_cuda_bf16_model_ok(const struct model *m, const char **why);
/* Fills off (m->n_tensors) with each tensor's byte offset in a mixed-precision activation arena of n_max
 * samples (bf16; fp32 for saved data and the logits; 256-byte aligned) and returns the arena's bytes. The
 * gradients' arena uses the same offsets (every gradient bf16). */
size_t tb_cuda_bf16_layout(const struct model *m, int n_max, size_t *off);
/* Enqueues layer l's forward for n samples of a pass over n_global (the loss gradient's 1/n_global). */
int tb_cuda_bf16_forward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n, int n_global,
                         int training, long first_index, long step);
/* Enqueues layer l's (index li) backward, each input gradient zeroed before its last reader as exec.c does. */
int tb_cuda_bf16_backward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int li, int n,
                          long first_index, long step);

#endif
