/* mlp_persist.h — the batch-1 dense chain's runs of steps as one persistent kernel (issue 26 item 3: the
 * seed-002 MLP's on-device loop).
 *
 * The captured graph of a step (executor_cuda.c) replays ~30 kernels a step, each a node the GPU starts
 * after the last ends: 61 µs a step on the H200, 6.2 s for 100,000 steps. Here one cooperative launch runs
 * all the run's steps: each block owns fixed row chunks of the layers' weights and keeps them, with their
 * Adam moments, in shared memory for the whole run; a step is the forward layer by layer (chunk sums through
 * global memory, one grid barrier a layer), the loss in every block, and the backward layer by layer (each
 * block's rows: wᵀ·δ for the layer below, then the rows' Adam update from the old weights' product), so a
 * step costs 2·layers − 1 grid barriers and no launch. Where the last layer is small (mnist-mlp's 128×10) every
 * block holds all of it and runs its forward and backward itself (forty-third session: 2·layers − 3 barriers;
 * TB_CUDA_MLP_LAST=apart keeps it on its chunks' owners), in the owners' order, so with the same bits. Arithmetic per element is the unfused path's (the
 * same Adam expression, the input affine, softmax_ce_row.h); sums run in another order, so the results agree
 * with the graph's within rounding, not bitwise. Runs of any length give the same bits as steps one at a
 * time (the kernel's arithmetic does not depend on where a run starts).
 * TB_CUDA_MLP_SYNC=cluster (nineteenth session, not yet run on a GPU): the blocks — at most 16, so chunks of
 * ⌈widest input / 16⌉ rows unless TB_CUDA_MLP_ROWS says otherwise — launch as one thread-block cluster and
 * each barrier is the cluster's hardware barrier instead of a grid barrier through global memory atomics (about
 * 4.5 µs a barrier-separated phase on the H200 with 49 blocks); the same arithmetic as grid barriers with the
 * same rows, so the same bits.
 */
#ifndef TB_CUDA_MLP_PERSIST_H
#define TB_CUDA_MLP_PERSIST_H

#include "ops_dense.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TB_CUDA_MLP_MAX_LAYERS 8
#define TB_CUDA_MLP_MAX_WIDTH 1024 /* a layer's outputs (the block's δ and logits live in shared memory) */
#define TB_CUDA_MLP_ROWS 16         /* rows of a weight chunk (fewer chunks for narrow layers; the environment's
                                       TB_CUDA_MLP_ROWS overrides it, for a sweep) */

/* One dense layer: y = x·W + b (W row-major in × out), ReLU when relu; pointers into the executor's canonical
 * parameter and Adam-state arrays, and its scratch. */
struct tb_cuda_mlp_layer {
    float *w, *b, *mw, *vw, *mb, *vb;
    int in, out, relu;
    float wd;          /* the weight's decay (the bias has none: no_decay) */
    int chunks, first; /* its rows in `chunks` chunks, chunk c on block (first + c) mod blocks */
    float *part;       /* scratch (chunks × out): the forward's chunk sums */
    float *delta;      /* scratch (out): ∂loss/∂(pre-activation) of this layer */
};

/* A dense chain and the run's constants. */
struct tb_cuda_mlp_plan {
    int n_layers, blocks;
    int cluster;                    /* 1: the blocks are one thread-block cluster (≤ 16), barriers the cluster's */
    int replicate_last;             /* 1: every block holds the whole last layer and runs it itself (the same
                                       bits as its chunks' owners would), so a step has two grid barriers fewer */
    size_t smem;                    /* dynamic shared memory a block needs */
    struct tb_cuda_mlp_layer L[TB_CUDA_MLP_MAX_LAYERS];
    float scale, shift;             /* the input's affine (one channel) */
    float b1, b2, eps, smoothing;   /* Adam's, the loss's label smoothing */
};

/* Plans the chunks, blocks and shared memory of p (its layers' shapes and pointers filled in, scratch not
 * yet): returns the scratch floats p needs, or 0 with *why set where the chain does not fit one cooperative
 * launch on the current device. */
size_t tb_cuda_mlp_prepare(struct tb_cuda_mlp_plan *p, const char **why);
/* Points p's scratch into `scratch` (as many floats as tb_cuda_mlp_prepare returned). */
void tb_cuda_mlp_bind(struct tb_cuda_mlp_plan *p, float *scratch);
/* Runs steps k0 .. k0+n−1 of the staged table d (pixels, labels, Adam step sizes; each step's loss into
 * d.loss_all[k]) on s; returns the launch's error. */
cudaError_t tb_cuda_mlp_run(const struct tb_cuda_mlp_plan *p, struct tb_cuda_loop_dev d, long long k0, long long n,
                            cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
