/* optim_cuda.h — the optimizers of core/optim.c on the device: Adam (Keras form), SGD with momentum,
 * RMSProp (TF form) and LARS, element-wise over a slice of the canonical parameter layout, with
 * optim.c's formulas. The host computes every scalar that depends on the step (the scheduled learning
 * rate optim_lr_at, Adam's step size optim_adam_alpha) and passes it in, so the schedules live in one
 * place. Launchers enqueue on `s` and never synchronise.
 */
#ifndef TB_CUDA_OPTIM_H
#define TB_CUDA_OPTIM_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scalars of one update (the enum optim_kind values of optim.h in kind). */
struct tb_cuda_optim_args {
    int kind;
    float lr;            /* optim_lr_at(step) */
    float alpha;         /* Adam: optim_adam_alpha(step), unless alpha_dev is given */
    const float *alpha_dev; /* Adam, optional: the step size read on the device (a graph's step) */
    float beta1, beta2, eps, momentum, rho, weight_decay;
};

/* One update of elements [lo,hi) of params from grads with state (optim_state_per_param copies of the
 * layout, n_params apart). seg_of (n_params) is each element's trainable segment (-1: padding, never
 * updated, as optim_update's segment walk leaves it); no_decay (n_segs) skips weight decay (and LARS's
 * trust); trust (n_segs) is LARS's, from tb_cuda_lars_trust. */
void tb_cuda_optim_update(const struct tb_cuda_optim_args *a, float *params, const float *grads, float *state,
                          size_t n_params, size_t lo, size_t hi, const int32_t *seg_of, const uint8_t *no_decay,
                          const float *trust, cudaStream_t s);
/* fp16's loss scaling: grads (n) *= inv in place (the loss scale's inverse, or 1 to check only), and *overflow
 * set to 1 when any of them is inf or NaN (left as it was otherwise: the caller zeroes it first). */
void tb_cuda_unscale_check(float *grads, size_t n, float inv, int *overflow, cudaStream_t s);
/* LARS: trust[k] = η‖w‖/(‖g‖ + wd‖w‖) per segment k (norms in double; 1 for no_decay segments or zero
 * norms), segments given as (off, n) pairs in seg_off/seg_n. One block a segment. */
void tb_cuda_lars_trust(float *trust, const float *params, const float *grads, const size_t *seg_off,
                        const size_t *seg_n, const uint8_t *no_decay, int n_segs, float eta, float wd,
                        cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
