/* executor_cuda.c — the cuda device: one model instance in the memory of one GPU, its layers run on one
 * stream (cuBLAS for the GEMMs, ops_dense.cu and optim_cuda.cu for the rest), and its executor_i.
 *
 * What runs here today: dense chains (mnist-mlp: input, dense with or without ReLU, ReLU, softmax
 * cross-entropy with label smoothing) and EfficientNet (B0–B7, G16; BatchNorm or GroupNorm; the input's
 * resampling and training crop/flip in ops_input.cu; every other EfficientNet layer kind in
 * executor_cuda_layers.c, one ops_effnet.h launcher per layer, unfused), fp32, forward and backward over
 * any layer range, every optimizer of core/optim.c (whole or part k of K), evaluation, and for batch 1
 * with Adam a dense chain's runs of steps (executor_run_steps) and fused train step as one persistent
 * kernel (mlp_persist.h; TB_CUDA_LOOP=graph, or a chain it does not take: the step captured once into a
 * CUDA graph and replayed; not under --profile or --trace, which take the per-layer path); --profile and --trace as
 * events around each layer (a stage's too: --profile), --trace's around the update; with cfg.prec bf16 or fp16, mixed
 * precision (executor_cuda_bf16.h: 2-byte activations and GEMM operands, fp32 master weights, gradients and
 * optimizer state; no graph; fp16 with loss scaling: the loss gradient seeded times the scale, the gradients
 * unscaled and checked at the update, an overflowed step skipped, the scale as core/loss_scale.h). Stage
 * executors (cfg.l1 > 0, the ipu schedule's devices), fp32 only: the same passes on a layer range's plan,
 * one activation slot per micro-batch in flight, the parameter slice, packed boundaries copied through the
 * host (executor_cuda_stage.c); each stage pass returns when its kernels are done. A model with another layer
 * kind is refused at create with TB_EUNSUPPORTED naming it; so are, on a stage, 2-byte storage and
 * recomputation. Where no GPU is present, create fails with TB_EUNSUPPORTED and the runtime's reason.
 *
 * Layouts are the cpu executor's: canonical parameter offsets, activations at tensor.unit_off · n_max
 * (mixed precision: a byte offset per tensor, tb_cuda_bf16_layout), so get/set tensors are plain copies and a
 * test can compare the two devices element by element.
 * Placement: an executor runs on GPU cfg.ordinal mod the GPUs present, on a stream and memory of its
 * own (a schedule's replicas share a GPU when there are fewer GPUs than replicas); gradients of a group
 * of executors are summed by collective_cuda.c, inputs copied ahead by prefetch_cuda.c.
 * Synchronisation: every call returns with its work enqueued; those that hand results to the host (a
 * loss, get_tensors, evaluate, a stage's export) wait on the stream, and so does every pass of a stage.
 * Ownership: the context owns every allocation.
 */
#include "executor_cuda.h"

#include "clock.h"
#include "collective_cuda.h"
#include "cuda_util.h"
#include "executor_cuda_bf16.h"
#include "executor_cuda_layers.h"
#include "executor_cuda_stage.h"
#include "grad_layout.h"
#include "layout.h"
#include "mlp_persist.h"
#include "ops_dense.h"
#include "ops_effnet.h"
#include "optim_cuda.h"
#include "prefetch_cuda.h"
#include "stage_precision.h"
#include "status.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_ctx {
    const struct model *m;                   /* a stage's: its range plan (stage->sm), the model's tables */
    struct cu_stage *stage;                  /* a stage executor's slices, slots and boundaries; NULL: whole */
    struct executor_config cfg;
    int gpu;                                 /* the GPU ordinal: cfg.ordinal mod the GPUs present */
    struct tb_cuda_prefetch *pf;             /* inputs copied ahead (--prefetch; NULL until the first) */
    cudaStream_t s;
    tb_cublas *blas;
    float *params, *grads, *opt, *buffers;   /* device, canonical layouts */
    uint16_t *params16;                      /* device, mixed precision only: the weights' bf16 or fp16 copy */
    size_t *off_train, *off_eval;            /* mixed precision: each tensor's byte offset in train / eval (host) */
    /* fp16 mixed precision: the loss gradient is seeded times ls.scale, so the fp32 gradients come out scaled
     * (grads_scaled) until the update's check unscales them; a step with an inf or NaN among them is skipped. */
    int fp16;                                /* the 2-byte type is fp16 (else bf16, no scaling) */
    struct loss_scaler ls;
    int grads_scaled;                        /* the gradients are times ls.scale (a backward since the check) */
    int *d_overflow, *h_overflow;            /* the check's flag: device, pinned host */
    int checked;                             /* the gradients were checked (until a backward or set_tensors) */
    int skip;                                /* they overflowed: each update part does nothing */
    size_t *doff;                            /* each gradient's byte offset in train.dacts (host; NULL: acts') */
    int eval_shared;                         /* eval.acts is train.acts (evaluation between steps only) */
    struct cu_acts train, eval;             /* the training pass's (with gradients) and evaluation's */
    void *scratch;                           /* device: the EfficientNet launchers' (sized at create) */
    float *losses;                           /* device (max n): per-sample losses */
    uint8_t *correct, *x;                    /* device: argmax == label; a pass's pixels */
    int32_t *labels;                         /* device */
    float *h_losses;                         /* pinned (max n) */
    uint8_t *h_correct;                      /* pinned (max n) */
    int n_io;                                /* samples the I/O buffers hold: max(n_max, eval batch) */
    size_t per_in;                           /* input bytes per sample */
    /* The optimizer's segments: each parameter's segment (-1: padding), per segment no_decay and
     * LARS's trust, and (off, n) for the trust kernel. */
    int32_t *seg_of;
    uint8_t *no_decay;
    float *trust;
    size_t *seg_off, *seg_n;
    int n_segs;
    int err;                                 /* a failure in a void call (zero_grads), reported next */
    char err_msg[256];
    /* The captured batch-1 step (loop = 1 when the model has one). */
    int loop;
    cudaGraph_t graph;
    cudaGraphExec_t gexec;
    struct tb_cuda_loop_dev ld;              /* device views the graph reads */
    uint8_t *l_x;                            /* device: the run's pixels (cap steps) */
    int32_t *l_y;
    float *l_alpha, *l_alpha_now;            /* device: per-step Adam step sizes; the current one */
    double *l_loss;                          /* device: per-step loss sums */
    long long *l_k;                          /* device: the step index the graph reads */
    long l_cap;                              /* steps the loop buffers hold */
    long l_first, l_n;                       /* the staged steps (l_n = 0: none staged) */
    double l_bytes;                          /* their device bytes (part of dev_bytes) */
    void *h_stage;                           /* pinned: a fused step's pixels, label, alpha and loss */
    /* The runs as one persistent kernel (mlp_persist.h; persist = 1) instead of the graph's replays. */
    int persist;
    /* BatchNorm -> depthwise pairs run fused (tb_cuda_bn_dw_pairs; NULL: none, stages and --no-fuse) where both
     * are in the pass enqueued last (fuse_l0 <= layer < fuse_l1; -1 before any); which BatchNorms' training
     * forwards left their output to the depthwise (cu_env). One flag a layer, not a set per activation set: a
     * whole-model executor trains on one set (train; evaluation never fuses), so a second training slot would need
     * its own. */
    int *bn_dw;
    unsigned char *bn_unwritten;
    int fuse_l0, fuse_l1;
    struct tb_cuda_mlp_plan mlp;
    float *mlp_scratch;
    /* --profile (whole models and stages; a stage's layers keep the model's indices): events after each layer's
     * forward F[i+1] and backward B[i] (F[l0], B[l1]: the pass's start), read after the pass; per layer forward and
     * backward seconds summed over passes. */
    cudaEvent_t *ev_f, *ev_b;
    double *prof;
    /* --trace (whole models): the step's events, its layers' from the same per-layer events, put on the host's
     * clock by an event the step's begin records and waits for (t0_dev: when the device reached it; 0: not
     * this step). */
    struct exec_trace tr;
    cudaEvent_t ev_t0;
    cudaEvent_t ev_u[2];                     /* --trace: around the update's kernels (its 'U' interval) */
    double t0_dev;
    double dev_bytes;                        /* device memory it allocated (the rows' gpu_mem_peak_mib) */
};

static struct cuda_ctx *ctx_of(const struct executor *ex) { return ex->ctx; }

/* cudaMalloc of n bytes (at least 1, so every family has a distinct pointer), counted in c->dev_bytes and
 * the process's tally (tb_cuda_mem_account); cuda_destroy gives the whole count back. */
static int dev_alloc(struct cuda_ctx *c, void **p, size_t n, const char *what)
{
    const size_t bytes = n ? n : 1;
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) return tb_cuda_fail(e, what, __FILE__, __LINE__);
    c->dev_bytes += (double)bytes;
    tb_cuda_mem_account((double)bytes);
    return TB_OK;
}

static float *act(const struct cuda_ctx *c, const struct cu_acts *in, int t)
{
    if (in->off) return (float *)((char *)in->acts + in->off[t]); /* mixed precision: the logits are fp32 there */
    return in->acts + c->m->tensors[t].unit_off * (size_t)in->n_max;
}

static float *dact(const struct cuda_ctx *c, const struct cu_acts *in, int t)
{
    if (in->doff) return (float *)((char *)in->dacts + in->doff[t]);
    return in->dacts + c->m->tensors[t].unit_off * (size_t)in->n_max;
}

/* ---- what the device runs ---- */

/* Whether layer l runs here; if not, why (for create's message). */
static int layer_ok(const struct model *m, const struct layer *l, const char **why)
{
    *why = NULL;
    switch (l->op) {
    case OP_INPUT: {
        const struct tensor *src = &m->tensors[l->in], *dst = &m->tensors[l->out];
        const int flat = dst->h == 1 && dst->w == 1 && dst->per_sample == src->per_sample;
        /* The flat (MLP) input: the affine kernel; an image: ops_input.cu (resampling, 1 → C channels,
         * the training crop and flip), as exec.c's input_forward allows. */
        if (flat ? src->c > 4 : dst->c > 4 || (src->c != dst->c && src->c != 1))
            *why = "input with these channels";
        else if (flat && (l->a.input.pad > 0 || l->a.input.flip))
            *why = "augmentation of a flat input";
        return *why == NULL;
    }
    case OP_DENSE:
        if (l->act != ACT_NONE && l->act != ACT_RELU) *why = "dense with a fused SiLU";
        return *why == NULL;
    case OP_RELU:
    case OP_SOFTMAX_CE: return 1;
    default: return tb_cuda_effnet_layer_ok(m, l, why);
    }
}

static int cuda_supports(const struct executor *ex, enum op_kind op)
{
    return op == OP_INPUT || op == OP_DENSE || op == OP_RELU || op == OP_SOFTMAX_CE || tb_cuda_effnet_op(op);
}

/* The device state the EfficientNet layers read. */
static struct cu_env env_of(const struct cuda_ctx *c)
{
    return (struct cu_env){.m = c->m, .s = c->s, .blas = c->blas, .params = c->params, .grads = c->grads,
                           .buffers = c->buffers, .scratch = c->scratch, .seed = c->cfg.seed,
                           .params16 = c->params16, .fp16 = c->fp16, .loss_scale = c->fp16 ? c->ls.scale : 1.0f,
                           .x = c->x, .labels = c->labels, .losses = c->losses, .correct = c->correct,
                           .bn_dw = c->bn_dw, .bn_unwritten = c->bn_unwritten, .fuse_l0 = c->fuse_l0,
                           .fuse_l1 = c->fuse_l1};
}

/* Every entry point starts here: this executor's GPU made current on the calling thread (replicas on
 * several GPUs are driven from several threads, and one thread drives several), then a failure a void
 * call left is reported. */
static int sticky(struct cuda_ctx *c)
{
    TB_CU(cudaSetDevice(c->gpu));
    if (!c->err) return TB_OK;
    const int st = c->err;
    c->err = 0;
    return tb_error_set(st, "%s", c->err_msg);
}

/* ---- passes ---- */

static int layer_forward(struct cuda_ctx *c, const struct cu_acts *in, const struct layer *l, int n, int n_global,
                         int training, long first_index, long step)
{
    const struct model *m = c->m;
    if (c->params16) { /* mixed precision: every layer on its 2-byte path */
        const struct cu_env e = env_of(c);
        return tb_cuda_bf16_forward(&e, in, l, n, n_global, training, first_index, step);
    }
    float *out = act(c, in, l->out);
    switch (l->op) {
    case OP_INPUT: { /* fp32 and mixed precision alike in executor_cuda_layers.c */
        const struct cu_env e = env_of(c);
        return tb_cuda_input_layer(&e, in, l, n, training, first_index, step);
    }
    case OP_DENSE: {
        const int IN = l->a.dense.IN, OUT = l->a.dense.OUT;
        /* Row-major y (n,OUT) = x (n,IN) · W (IN,OUT) is column-major yᵀ = Wᵀ xᵀ: W's buffer is Wᵀ with
         * ld OUT, x's is xᵀ with ld IN. */
        int st = tb_cublas_sgemm(c->blas, 0, 0, OUT, n, IN, 1.0f, c->params + l->w_off, OUT, act(c, in, l->in), IN,
                                 0.0f, out, OUT);
        if (st != TB_OK) return st;
        tb_cuda_bias_act(out, l->n_b ? c->params + l->b_off : NULL, n, OUT, l->act == ACT_RELU, c->s);
        TB_CU_LAUNCHED("dense bias");
        return TB_OK;
    }
    case OP_RELU:
        tb_cuda_relu_forward(out, act(c, in, l->in), (size_t)n * m->tensors[l->out].per_sample, c->s);
        TB_CU_LAUNCHED("relu");
        return TB_OK;
    case OP_SOFTMAX_CE:
        tb_cuda_softmax_ce(c->losses, training ? dact(c, in, l->in) : NULL, c->correct, act(c, in, l->in), c->labels,
                           1.0f / (float)n_global, n, m->tensors[l->in].c, l->a.ce.smoothing, c->s);
        TB_CU_LAUNCHED("softmax_ce");
        return TB_OK;
    default: {
        const struct cu_env e = env_of(c);
        return tb_cuda_effnet_forward(&e, in, l, n, first_index, step, training);
    }
    }
}

static int layer_backward(struct cuda_ctx *c, const struct cu_acts *in, const struct layer *l, int li, int n,
                          long first_index, long step)
{
    const struct model *m = c->m;
    if (c->params16) { /* mixed precision: every layer on its 2-byte path (its own zeroing of 2-byte gradients) */
        const struct cu_env e = env_of(c);
        return tb_cuda_bf16_backward(&e, in, l, li, n, first_index, step);
    }
    if (l->op == OP_INPUT || l->op == OP_SOFTMAX_CE) return TB_OK; /* no gradient / seeded in the forward */
    const struct tensor *ti = &m->tensors[l->in];
    float *din = ti->needs_grad ? dact(c, in, l->in) : NULL, *dout = dact(c, in, l->out);
    /* Each input's gradient is overwritten by its last reader's backward where that layer kind can (exec.c's
     * shortcut), else zeroed just before it and accumulated into. */
    const struct cu_env e = env_of(c);
    const int over = tb_cuda_prepare_input_grads(&e, in, l, li, n, sizeof(float));
    if (over < 0) return over;
    const size_t total = (size_t)n * m->tensors[l->out].per_sample;
    if (l->act == ACT_RELU) {
        tb_cuda_relu_mask(dout, act(c, in, l->out), total, c->s);
        TB_CU_LAUNCHED("relu mask");
    }
    switch (l->op) {
    case OP_DENSE: {
        const int IN = l->a.dense.IN, OUT = l->a.dense.OUT;
        int st;
        /* din (n,IN) += dout (n,OUT) · Wᵀ: column-major dinᵀ = (Wᵀ)ᵀ doutᵀ. */
        if (din && (st = tb_cublas_sgemm(c->blas, 1, 0, IN, n, OUT, 1.0f, c->params + l->w_off, OUT, dout, OUT, 1.0f,
                                         din, IN)) != TB_OK)
            return st;
        /* dW (IN,OUT) += xᵀ · dout: column-major dWᵀ = doutᵀ · x. */
        if ((st = tb_cublas_sgemm(c->blas, 0, 1, OUT, IN, n, 1.0f, dout, OUT, act(c, in, l->in), IN, 1.0f,
                                  c->grads + l->w_off, OUT)) != TB_OK)
            return st;
        if (l->n_b) {
            tb_cuda_bias_grad(c->grads + l->b_off, dout, n, OUT, c->s);
            TB_CU_LAUNCHED("bias gradient");
        }
        return TB_OK;
    }
    case OP_RELU:
        if (din) {
            tb_cuda_relu_backward(din, dout, act(c, in, l->out), total, c->s);
            TB_CU_LAUNCHED("relu backward");
        }
        return TB_OK;
    default: return tb_cuda_effnet_backward(&e, in, l, n, first_index, step, over);
    }
}

/* Uploads n samples' pixels (when the pass starts at the input) and labels (when it ends at the loss). */
static int upload(struct cuda_ctx *c, const uint8_t *x, const int32_t *y, int n)
{
    if (x) TB_CU(cudaMemcpyAsync(c->x, x, (size_t)n * c->per_in, cudaMemcpyHostToDevice, c->s));
    if (y) TB_CU(cudaMemcpyAsync(c->labels, y, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, c->s));
    return TB_OK;
}

/* Waits for the stream and sums the pass's per-sample losses (and correct predictions) in exec.c's order. */
static int read_loss(struct cuda_ctx *c, int n, double *loss_sum, long *n_correct)
{
    TB_CU(cudaMemcpyAsync(c->h_losses, c->losses, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, c->s));
    TB_CU(cudaMemcpyAsync(c->h_correct, c->correct, (size_t)n, cudaMemcpyDeviceToHost, c->s));
    TB_CU(cudaStreamSynchronize(c->s));
    double s = 0.0;
    long k = 0;
    for (int i = 0; i < n; i++) s += c->h_losses[i], k += c->h_correct[i];
    *loss_sum = s;
    if (n_correct) *n_correct += k;
    return TB_OK;
}

/* Enqueues pass p's layers on in's activations (a stage: its slot, the imported boundary copied in first). */
static int enqueue_pass(struct cuda_ctx *c, const struct executor_pass *p, const struct cu_acts *in, int fwd, int bwd)
{
    const struct model *m = c->m;
    const int at_loss = p->l1 == m->n_layers;
    const uint8_t *px = p->l0 == 0 ? p->x : NULL;
    const int32_t *py = at_loss ? p->y : NULL;
    int st;
    /* Inputs copied ahead (cuda_prefetch) are taken on the device; otherwise uploaded now. */
    const int ahead = fwd && c->pf ? tb_cuda_prefetch_take(c->pf, px, py, p->n, p->step, c->x, c->labels, c->s) : 0;
    if (ahead < 0) return ahead;
    if (fwd && !ahead && (st = upload(c, px, py, p->n)) != TB_OK) return st;
    if (fwd && c->stage && (st = tb_cuda_stage_feed(c->stage, 0, in, p->n, c->s)) != TB_OK) return st;
    if (fwd && c->ev_f) TB_CU(cudaEventRecord(c->ev_f[p->l0], c->s));
    c->fuse_l0 = p->l0, c->fuse_l1 = p->l1; /* a pair inside the pass runs fused, forward and backward alike */
    for (int i = p->l0; fwd && i < p->l1; i++) {
        if ((st = layer_forward(c, in, &m->layers[i], p->n, p->n_global, p->training, p->first_index, p->step)) !=
            TB_OK)
            return st;
        if (c->ev_f) TB_CU(cudaEventRecord(c->ev_f[i + 1], c->s));
    }
    if (bwd && c->stage && (st = tb_cuda_stage_feed(c->stage, 1, in, p->n, c->s)) != TB_OK) return st;
    if (bwd && c->ev_b) TB_CU(cudaEventRecord(c->ev_b[p->l1], c->s));
    for (int i = p->l1 - 1; bwd && i >= p->l0; i--) {
        if ((st = layer_backward(c, in, &m->layers[i], i, p->n, p->first_index, p->step)) != TB_OK) return st;
        if (c->ev_b) TB_CU(cudaEventRecord(c->ev_b[i], c->s));
    }
    return TB_OK;
}

/* --trace: layer i's event from a to b (phase 'F' or 'B'; layer -1: a whole-step phase), put on the host's clock
 * through the step's ev_t0. */
static int trace_layer(struct cuda_ctx *c, int i, char phase, cudaEvent_t a, cudaEvent_t b)
{
    float ma, mb;
    TB_CU(cudaEventElapsedTime(&ma, c->ev_t0, a));
    TB_CU(cudaEventElapsedTime(&mb, c->ev_t0, b));
    exec_trace_add(&c->tr, i, phase, c->t0_dev + 1e-3 * ma, c->t0_dev + 1e-3 * mb);
    return TB_OK;
}

/* --profile, --trace: waits for the pass, adds its layers' event intervals (forward, backward) to c->prof, and
 * for a training pass appends them to the step's trace in the order they ran. */
static int layer_events_add(struct cuda_ctx *c, const struct executor_pass *p, int fwd, int bwd)
{
    TB_CU(cudaEventSynchronize(bwd ? c->ev_b[p->l0] : c->ev_f[p->l1]));
    const int trace = c->tr.ev && c->t0_dev > 0.0 && p->training;
    int st = TB_OK;
    for (int i = p->l0; fwd && st == TB_OK && i < p->l1; i++) {
        float ms;
        TB_CU(cudaEventElapsedTime(&ms, c->ev_f[i], c->ev_f[i + 1]));
        if (c->prof) c->prof[2 * i] += 1e-3 * ms;
        if (trace) st = trace_layer(c, i, 'F', c->ev_f[i], c->ev_f[i + 1]);
    }
    for (int i = p->l1 - 1; bwd && st == TB_OK && i >= p->l0; i--) {
        float ms;
        TB_CU(cudaEventElapsedTime(&ms, c->ev_b[i + 1], c->ev_b[i]));
        if (c->prof) c->prof[2 * i + 1] += 1e-3 * ms;
        if (trace) st = trace_layer(c, i, 'B', c->ev_b[i + 1], c->ev_b[i]);
    }
    return st;
}

/* --trace: phase 0 starts the step's list at host time t0 and marks where the device is (ev_t0, waited for,
 * so the layers' event times map onto the host's clock); another phase is a whole-step event t0..t1. */
static void cuda_trace(struct executor *ex, char phase, double t0, double t1)
{
    struct cuda_ctx *c = ctx_of(ex);
    if (!c->tr.ev) return;
    if (phase) {
        exec_trace_add(&c->tr, -1, phase, t0, t1);
        return;
    }
    c->tr.t0 = t0, c->tr.n = 0, c->t0_dev = 0.0;
    if (cudaSetDevice(c->gpu) == cudaSuccess && cudaEventRecord(c->ev_t0, c->s) == cudaSuccess &&
        cudaEventSynchronize(c->ev_t0) == cudaSuccess)
        c->t0_dev = tb_now_s();
    else
        (void)cudaGetLastError(); /* no layer events this step; the run goes on */
}

static int cuda_compute(struct executor *ex, const struct executor_pass *p, int what, double *loss_sum)
{
    struct cuda_ctx *c = ctx_of(ex);
    const struct model *m = c->m;
    int st = sticky(c);
    if (st != TB_OK) return st;
    *loss_sum = 0.0;
    /* Sync BatchNorm needs the statistics summed over replicas between its passes (NCCL): refused rather
     * than run with local statistics. */
    if (p->coll && p->training)
        return tb_error_set(TB_EUNSUPPORTED,
                            "cuda: sync BatchNorm across replicas is not implemented on this device yet");
    const int fwd = !!(what & EXECUTOR_FORWARD), bwd = !!(what & EXECUTOR_BACKWARD);
    const int at_loss = p->l1 == m->n_layers;
    const struct cu_acts *in = c->stage ? &c->stage->slot[p->slot] : &c->train;
    st = enqueue_pass(c, p, in, fwd, bwd);
    if (st == TB_OK && fwd && at_loss && p->logits) {
        /* The loss layer's input, (n, classes) fp32 (the ipu schedule's last stage in evaluate: top-5, --logits),
         * copied on the stream before read_loss waits for it, as cuda_evaluate's. */
        const struct layer *ce = &m->layers[m->n_layers - 1];
        const size_t bytes = (size_t)p->n * m->tensors[ce->in].per_sample * sizeof(float);
        const cudaError_t e = cudaMemcpyAsync(p->logits, act(c, in, ce->in), bytes, cudaMemcpyDeviceToHost, c->s);
        if (e != cudaSuccess) st = tb_cuda_fail(e, "cudaMemcpyAsync(logits)", __FILE__, __LINE__);
    }
    if (bwd && c->fp16) c->grads_scaled = 1, c->checked = 0;
    if (st == TB_OK && c->ev_f) st = layer_events_add(c, p, fwd, bwd);
    if (c->stage) {
        /* A stage's pass returns when its kernels are done, after a failure too: the imported host buffer is the
         * caller's again (its copy ran), and the schedule's F and B intervals time the pass itself. */
        const cudaError_t e = cudaStreamSynchronize(c->s);
        if (st == TB_OK && e != cudaSuccess) st = tb_cuda_fail(e, "cudaStreamSynchronize(stage pass)", __FILE__, __LINE__);
    }
    if (st != TB_OK || !fwd || !at_loss) return st; /* no loss layer in this pass: nothing to wait for */
    if ((st = read_loss(c, p->n, loss_sum, p->n_correct)) != TB_OK) return st;
    return isfinite(*loss_sum) ? TB_OK : tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", *loss_sum, p->step);
}

/* The parameters this executor trains, [*p0,*p1) of the canonical layout: all of them, or a stage's slice. */
static void param_slice(const struct cuda_ctx *c, size_t *p0, size_t *p1)
{
    *p0 = c->stage ? c->stage->p0 : 0;
    *p1 = c->stage ? c->stage->p1 : c->m->n_params;
}

static void cuda_zero_grads(struct executor *ex)
{
    struct cuda_ctx *c = ctx_of(ex);
    size_t p0, p1;
    param_slice(c, &p0, &p1);
    cudaError_t e = cudaSetDevice(c->gpu);
    if (e == cudaSuccess) e = cudaMemsetAsync(c->grads + p0, 0, (p1 - p0) * sizeof(float), c->s);
    if (e != cudaSuccess && !c->err) {
        c->err = tb_cuda_fail(e, "cudaMemsetAsync(gradients)", __FILE__, __LINE__);
        snprintf(c->err_msg, sizeof c->err_msg, "%s", tb_error_get());
    }
}

/* The weights' 2-byte copy (mixed precision) of n parameters from lo, cast from the fp32 master. */
static void cast_weights(struct cuda_ctx *c, size_t lo, size_t n)
{
    if (c->fp16) tb_cuda_to_fp16(c->params16 + lo, c->params + lo, n, c->s);
    else tb_cuda_to_bf16(c->params16 + lo, c->params + lo, n, c->s);
}

/* fp16, once per set of gradients (at a step's first update part): the gradients unscaled in place and checked
 * for inf and NaN; an overflowed step's update is skipped whole, and the scale follows loss_scale.h. One host
 * round trip a step, as PyTorch's GradScaler takes one. */
static int fp16_check(struct cuda_ctx *c, long step)
{
    if (c->checked) return TB_OK;
    size_t p0, p1;
    param_slice(c, &p0, &p1);
    TB_CU(cudaMemsetAsync(c->d_overflow, 0, sizeof(int), c->s));
    tb_cuda_unscale_check(c->grads + p0, p1 - p0, c->grads_scaled ? 1.0f / c->ls.scale : 1.0f, c->d_overflow, c->s);
    TB_CU_LAUNCHED("fp16 gradient check");
    TB_CU(cudaMemcpyAsync(c->h_overflow, c->d_overflow, sizeof(int), cudaMemcpyDeviceToHost, c->s));
    TB_CU(cudaStreamSynchronize(c->s));
    c->grads_scaled = 0;
    c->checked = 1;
    c->skip = *c->h_overflow != 0;
    loss_scaler_after_step(&c->ls, c->skip);
    return loss_scaler_check(&c->ls, step);
}

/* The update's scalars at a step: the schedules are optim.c's, computed here on the host. */
static struct tb_cuda_optim_args optim_args(const struct optim_config *o, long step)
{
    return (struct tb_cuda_optim_args){.kind = (int)o->kind, .lr = optim_lr_at(o, step),
                                       .alpha = o->kind == OPTIM_ADAM ? optim_adam_alpha(o, step) : 0.0f,
                                       .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .momentum = o->momentum,
                                       .rho = o->rho, .weight_decay = o->weight_decay};
}

/* The update's kernels for part k of K (the fp16 check at a step's first part), enqueued. */
static int update_enqueue(struct cuda_ctx *c, long step, int part, int parts)
{
    int st;
    if (c->fp16 && (st = fp16_check(c, step)) != TB_OK) return st;
    if (c->fp16 && c->skip) return TB_OK;
    const struct optim_config *o = &c->cfg.optim;
    if (o->kind == OPTIM_LARS) { /* whole tensors only (executor_update_part refuses LARS) */
        tb_cuda_lars_trust(c->trust, c->params, c->grads, c->seg_off, c->seg_n, c->no_decay, c->n_segs, o->lars_eta,
                           o->weight_decay, c->s);
        TB_CU_LAUNCHED("lars trust");
    }
    size_t p0, p1, lo, hi; /* part k of K of this executor's parameters (a stage: of its slice) */
    param_slice(c, &p0, &p1);
    tb_slice(p1 - p0, part, parts, &lo, &hi);
    lo += p0, hi += p0;
    const struct tb_cuda_optim_args a = optim_args(o, step);
    tb_cuda_optim_update(&a, c->params, c->grads, c->opt, c->m->n_params, lo, hi, c->seg_of, c->no_decay, c->trust,
                         c->s);
    TB_CU_LAUNCHED("optimizer update");
    if (c->params16) { /* mixed precision: the GEMMs' 2-byte weights, cast once per update from the fp32 master */
        cast_weights(c, lo, hi - lo);
        TB_CU_LAUNCHED("2-byte weight copy");
    }
    return TB_OK;
}

/* The update of part k of K (the fp16 check at a step's first part); under --trace the step's 'U' interval, as the
 * cpu executor records it: events around the update's kernels, waited for (a trace waits after each pass already),
 * so the step's trace ends with the pass over every parameter, not before it. */
static int cuda_update(struct executor *ex, long step, int part, int parts)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    const int trace = c->tr.ev && c->t0_dev > 0.0;
    if (trace) TB_CU(cudaEventRecord(c->ev_u[0], c->s));
    if ((st = update_enqueue(c, step, part, parts)) != TB_OK || !trace) return st;
    TB_CU(cudaEventRecord(c->ev_u[1], c->s));
    TB_CU(cudaEventSynchronize(c->ev_u[1]));
    return trace_layer(c, -1, 'U', c->ev_u[0], c->ev_u[1]);
}

static float *family(struct cuda_ctx *c, enum tensor_family f, size_t *n)
{
    *n = tensor_family_floats(c->m, c->cfg.optim.kind, f);
    switch (f) {
    case TF_PARAMS: return c->params;
    case TF_GRADS: return c->grads;
    case TF_OPT: return c->opt;
    case TF_BUFFERS: return c->buffers;
    }
    return NULL;
}

/* What this executor holds of family f in the canonical layout: `runs` runs of len floats from off, stride
 * apart — the whole family in one run, or a stage's slice (TF_OPT: one run per optimizer state copy). The
 * device arrays are the canonical layout's whole size either way (a stage touches only its slice). */
struct fam_view {
    float *base; /* the device array (canonical offsets) */
    size_t n;    /* its floats */
    size_t off, len, stride;
    int runs;
};

static int family_view(struct cuda_ctx *c, enum tensor_family f, struct fam_view *v)
{
    v->base = family(c, f, &v->n);
    v->off = 0, v->len = v->n, v->stride = 0, v->runs = 1;
    if (!v->base) return tb_error_set(TB_EINVAL, "cuda executor: no tensor family %d", (int)f);
    const struct cu_stage *sg = c->stage;
    if (!sg) return TB_OK;
    v->off = f == TF_BUFFERS ? sg->q0 : sg->p0;
    v->len = f == TF_BUFFERS ? sg->q1 - sg->q0 : sg->p1 - sg->p0;
    if (f == TF_OPT) v->stride = c->m->n_params, v->runs = optim_state_per_param(c->cfg.optim.kind);
    return TB_OK;
}

static int cuda_get(struct executor *ex, enum tensor_family f, float *dst)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    struct fam_view v;
    if ((st = family_view(c, f, &v)) != TB_OK) return st;
    /* On the executor's stream (non-blocking: a plain cudaMemcpy would not wait for its kernels). */
    for (int r = 0; r < v.runs && v.len; r++) {
        const size_t at = v.off + (size_t)r * v.stride;
        TB_CU(cudaMemcpyAsync(dst + at, v.base + at, v.len * sizeof(float), cudaMemcpyDeviceToHost, c->s));
    }
    TB_CU(cudaStreamSynchronize(c->s));
    if (f == TF_GRADS && c->grads_scaled) { /* fp16 between a backward and its check: the tensors, unscaled */
        const float inv = 1.0f / c->ls.scale;
        for (int r = 0; r < v.runs; r++)
            for (size_t i = 0, at = v.off + (size_t)r * v.stride; i < v.len; i++) dst[at + i] *= inv;
    }
    return TB_OK;
}

static int cuda_set(struct executor *ex, enum tensor_family f, const float *src)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    struct fam_view v;
    if ((st = family_view(c, f, &v)) != TB_OK) return st;
    float *init = NULL;
    if (!src) { /* TF_OPT's initial state, written on the host by optim.c and copied */
        if (!(init = malloc((v.n ? v.n : 1) * sizeof(float)))) return tb_error_set(TB_ENOMEM, "cuda: out of memory");
        optim_state_init(c->cfg.optim.kind, init, c->m->n_params);
        src = init;
    }
    /* Ordered after the stream's earlier kernels, and complete (src free again) when this returns. */
    cudaError_t e = cudaSuccess;
    for (int r = 0; r < v.runs && v.len && e == cudaSuccess; r++) {
        const size_t at = v.off + (size_t)r * v.stride;
        e = cudaMemcpyAsync(v.base + at, src + at, v.len * sizeof(float), cudaMemcpyHostToDevice, c->s);
    }
    if (e == cudaSuccess && f == TF_PARAMS && c->params16) { /* mixed precision (whole models): the 2-byte copy */
        cast_weights(c, 0, v.n);
        e = cudaGetLastError();
    }
    if (f == TF_GRADS) c->grads_scaled = 0, c->checked = 0; /* the caller's tensors, as get_tensors hands them out */
    /* The optimizer's initial state (a fresh run: --repeat, a tta seed) includes the loss scaler's, as on ipu: a
     * run starts from the configured scale. A checkpoint's state (src) is followed by restore_loss_scaling. */
    if (init && c->fp16) loss_scaler_init(&c->ls, c->cfg.loss_scale);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->s);
    free(init);
    if (e != cudaSuccess) return tb_cuda_fail(e, "cudaMemcpy(set_tensors)", __FILE__, __LINE__);
    return TB_OK;
}

static int cuda_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b)
{
    struct cuda_ctx *c = ctx_of(ex);
    struct fam_view v;
    const int st = family_view(c, f, &v);
    if (st != TB_OK) return st;
    /* A stage's optimizer state is several runs of the canonical layout: no buffer, as on the cpu stage. */
    if (c->stage && f == TF_OPT)
        return tb_error_set(TB_EUNSUPPORTED, "cuda: a stage executor has no buffer of its optimizer state");
    b->data = v.base + v.off;
    b->n = v.len;
    b->off = v.off; /* a stage's slice (0 for a whole model) */
    b->host = 0;    /* a device pointer: an all-reduce over these needs NCCL (or a staging copy) */
    b->prec = STAGE_PREC_FP32;
    b->scale = f == TF_GRADS && c->grads_scaled ? c->ls.scale : 1.0f; /* fp16 between a backward and its check */
    return TB_OK;
}

static int cuda_synchronize(struct executor *ex)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    TB_CU(cudaStreamSynchronize(c->s));
    return TB_OK;
}

static int cuda_evaluate(struct executor *ex, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev)
{
    struct cuda_ctx *c = ctx_of(ex);
    const struct model *m = c->m;
    int st = sticky(c);
    if (st != TB_OK) return st;
    for (int off = 0; off < n; off += c->eval.n_max) {
        const int k = n - off < c->eval.n_max ? n - off : c->eval.n_max;
        if ((st = upload(c, x + (size_t)off * c->per_in, y + off, k)) != TB_OK) return st;
        for (int i = 0; i < m->n_layers; i++)
            /* exec.c's evaluation keys (first_index = off, step 0); nothing is dropped without training. */
            if ((st = layer_forward(c, &c->eval, &m->layers[i], k, k, 0, off, 0)) != TB_OK) return st;
        double l;
        long correct = 0;
        if (ev->logits) { /* the loss layer's input: this chunk's (k, classes) logits */
            const struct layer *ce = &m->layers[m->n_layers - 1];
            const size_t K = m->tensors[ce->in].per_sample;
            TB_CU(cudaMemcpyAsync(ev->logits + (size_t)off * K, act(c, &c->eval, ce->in), (size_t)k * K * sizeof(float),
                                  cudaMemcpyDeviceToHost, c->s));
        }
        if ((st = read_loss(c, k, &l, &correct)) != TB_OK) return st;
        ev->loss_sum += l;
        ev->correct += correct;
        ev->n += k;
    }
    return TB_OK;
}

/* ---- the captured batch-1 step ---- */

/* The loop-eligible chain's one-channel flat input as x·scale + shift (the graph's gather, the persistent
 * kernel's first layer). */
static void flat_input_affine(const struct model *m, float *scale, float *shift)
{
    const struct layer *in0 = &m->layers[0];
    *scale = in0->a.input.scale / in0->a.input.std[0], *shift = -in0->a.input.shift[0] / in0->a.input.std[0];
}

/* Records one training step of the loop's current data slot into c->graph: gather, forward, zeroed
 * gradients, backward, Adam with the step size read on the device, loss sum and index advance. */
static int loop_capture(struct cuda_ctx *c)
{
    const struct model *m = c->m;
    const struct layer *in0 = &m->layers[0];
    float scale, shift;
    flat_input_affine(m, &scale, &shift);
    TB_CU(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    int st = TB_OK;
    /* The input layer's work is the gather's (the step's pixels from the run's table); the rest is the
     * plain pass's calls, so the replayed step is the plain step's kernels in the same order. */
    tb_cuda_loop_gather(c->ld, act(c, &c->train, in0->out), c->labels, c->l_alpha_now, 1, c->per_in, scale, shift,
                        c->s);
    c->fuse_l0 = 0, c->fuse_l1 = m->n_layers;
    for (int i = 1; i < m->n_layers && st == TB_OK; i++)
        st = layer_forward(c, &c->train, &m->layers[i], 1, 1, 1, 0, 1);
    if (st == TB_OK && cudaMemsetAsync(c->grads, 0, m->n_params * sizeof(float), c->s) != cudaSuccess)
        st = tb_error_set(TB_EIO, "cuda: cudaMemsetAsync in a captured step failed");
    for (int i = m->n_layers - 1; i >= 0 && st == TB_OK; i--)
        st = layer_backward(c, &c->train, &m->layers[i], i, 1, 0, 1);
    if (st == TB_OK) {
        struct tb_cuda_optim_args a = optim_args(&c->cfg.optim, 1);
        a.alpha_dev = c->l_alpha_now;
        tb_cuda_optim_update(&a, c->params, c->grads, c->opt, m->n_params, 0, m->n_params, c->seg_of, c->no_decay,
                             c->trust, c->s);
        tb_cuda_loop_advance(c->ld, c->losses, 1, c->s);
        const cudaError_t le = cudaGetLastError(); /* a launch the capture recorded badly */
        if (le != cudaSuccess) st = tb_cuda_fail(le, "a launch in the captured step", __FILE__, __LINE__);
    }
    cudaGraph_t g = NULL;
    const cudaError_t e = cudaStreamEndCapture(c->s, &g); /* always end the capture, even after a failure */
    if (st != TB_OK) {
        if (g) cudaGraphDestroy(g);
        return st;
    }
    if (e != cudaSuccess) return tb_cuda_fail(e, "cudaStreamEndCapture", __FILE__, __LINE__);
    c->graph = g;
    TB_CU(cudaGraphInstantiate(&c->gexec, c->graph, 0));
    return TB_OK;
}

/* Makes the loop's data buffers hold `steps` steps (they only grow) and captures the step on first use;
 * the graph reads the buffers through c->ld, so growing them means capturing again. */
static int loop_reserve(struct cuda_ctx *c, long steps)
{
    if (steps <= c->l_cap && (c->gexec || c->persist)) return TB_OK;
    if (c->gexec) cudaGraphExecDestroy(c->gexec), c->gexec = NULL;
    if (c->graph) cudaGraphDestroy(c->graph), c->graph = NULL;
    if (steps > c->l_cap) {
        void *old[] = {c->l_x, c->l_y, c->l_alpha, c->l_loss};
        for (int k = 0; k < 4; k++)
            if (old[k]) cudaFree(old[k]);
        c->dev_bytes -= c->l_bytes;
        tb_cuda_mem_account(-c->l_bytes);
        c->l_x = NULL, c->l_y = NULL, c->l_alpha = NULL, c->l_loss = NULL, c->l_cap = 0;
        const double before = c->dev_bytes;
        const size_t ns = (size_t)steps;
        int st = dev_alloc(c, (void **)&c->l_x, ns * c->per_in, "cudaMalloc(loop pixels)");
        if (st == TB_OK) st = dev_alloc(c, (void **)&c->l_y, ns * sizeof(int32_t), "cudaMalloc(loop labels)");
        if (st == TB_OK) st = dev_alloc(c, (void **)&c->l_alpha, ns * sizeof(float), "cudaMalloc(loop steps)");
        if (st == TB_OK) st = dev_alloc(c, (void **)&c->l_loss, ns * sizeof(double), "cudaMalloc(loop losses)");
        c->l_bytes = c->dev_bytes - before; /* what the next growth gives back, even after a failure here */
        if (st != TB_OK) return st;
        c->l_cap = steps;
    }
    c->ld = (struct tb_cuda_loop_dev){c->l_x, c->l_y, c->l_alpha, c->l_loss, c->l_k, c->l_cap};
    return c->persist ? TB_OK : loop_capture(c); /* the persistent kernel reads the table as it is */
}

/* Runs of steps (ex->loop_steps): the staged steps' pixels, labels and Adam step sizes go to the device
 * once (stage), then each run replays the captured step n times back to back from the run's first index and
 * copies its n losses back in one copy (run): the stream never waits on the host within a run. */
static int cuda_stage_steps(struct executor *ex, const struct executor_staged *sg)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    c->l_n = 0;
    if ((st = loop_reserve(c, sg->n)) != TB_OK) return st;
    float *alpha = malloc((size_t)sg->n * sizeof(float));
    if (!alpha) return tb_error_set(TB_ENOMEM, "cuda: out of memory for %ld step sizes", sg->n);
    for (long k = 0; k < sg->n; k++) alpha[k] = optim_adam_alpha(&c->cfg.optim, sg->first + k);
    const size_t n = (size_t)sg->n;
    cudaError_t e = cudaMemcpyAsync(c->l_x, sg->x, n * c->per_in, cudaMemcpyHostToDevice, c->s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(c->l_y, sg->y, n * sizeof(int32_t), cudaMemcpyHostToDevice, c->s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(c->l_alpha, alpha, n * sizeof(float), cudaMemcpyHostToDevice, c->s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->s); /* alpha (pageable) is the host's again */
    free(alpha);
    if (e != cudaSuccess) return tb_cuda_fail(e, "staging a run of steps", __FILE__, __LINE__);
    c->l_first = sg->first, c->l_n = sg->n;
    return TB_OK;
}

static int cuda_run_steps(struct executor *ex, long step, long n, double *loss_sums, long *done)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    /* A fused step since the stage overwrote the table's first sample: stage again. */
    if (c->l_n == 0 || step < c->l_first || step + n > c->l_first + c->l_n)
        return tb_error_set(TB_EINVAL, "cuda: steps %ld..%ld are not staged on the device", step, step + n - 1);
    const long k0 = step - c->l_first;
    cudaError_t e = cudaSuccess;
    if (c->persist) {
        e = tb_cuda_mlp_run(&c->mlp, c->ld, k0, n, c->s);
    } else {
        /* The run's first index, through the pinned staging buffer (its last 8 bytes, after the fused step's). */
        long long *pk = (long long *)((uint8_t *)c->h_stage + (c->per_in + 7) / 8 * 8 + 24);
        e = cudaStreamSynchronize(c->s);
        if (e == cudaSuccess) {
            *pk = k0;
            e = cudaMemcpyAsync(c->l_k, pk, sizeof *pk, cudaMemcpyHostToDevice, c->s);
        }
        for (long k = 0; k < n && e == cudaSuccess; k++) e = cudaGraphLaunch(c->gexec, c->s);
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(loss_sums, c->l_loss + k0, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, c->s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->s);
    if (e != cudaSuccess) return tb_cuda_fail(e, "the on-device loop", __FILE__, __LINE__);
    for (long k = 0; k < n; k++)
        if (!isfinite(loss_sums[k])) {
            *done = k;
            return tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", loss_sums[k], step + k);
        }
    *done = n;
    return TB_OK;
}

/* The fused train step: one replay of the captured step on this step's sample, waiting for its loss (one
 * round trip a step; cuda_run_steps does without). It writes the table's first slot, so a staged run must be
 * staged again. */
static int cuda_train_step(struct executor *ex, const struct executor_pass *p, double *loss_sum)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    if ((st = loop_reserve(c, 1)) != TB_OK) return st;
    c->l_n = 0;
    /* Pinned staging: pixels, then the label, the step size, the loss and run_steps' first index, 8-byte
     * aligned. */
    uint8_t *px = c->h_stage;
    const size_t off = (c->per_in + 7) / 8 * 8;
    int32_t *py = (int32_t *)(px + off);
    float *pa = (float *)(px + off + 8);
    double *pl = (double *)(px + off + 16);
    TB_CU(cudaStreamSynchronize(c->s)); /* the staging buffer is free (the last step's copies are done) */
    memcpy(px, p->x, c->per_in);
    *py = p->y[0];
    *pa = optim_adam_alpha(&c->cfg.optim, p->step);
    TB_CU(cudaMemcpyAsync(c->l_x, px, c->per_in, cudaMemcpyHostToDevice, c->s));
    TB_CU(cudaMemcpyAsync(c->l_y, py, sizeof(int32_t), cudaMemcpyHostToDevice, c->s));
    TB_CU(cudaMemcpyAsync(c->l_alpha, pa, sizeof(float), cudaMemcpyHostToDevice, c->s));
    if (c->persist) {
        TB_CU(tb_cuda_mlp_run(&c->mlp, c->ld, 0, 1, c->s));
    } else {
        TB_CU(cudaMemsetAsync(c->l_k, 0, sizeof(long long), c->s));
        TB_CU(cudaGraphLaunch(c->gexec, c->s));
    }
    TB_CU(cudaMemcpyAsync(pl, c->l_loss, sizeof(double), cudaMemcpyDeviceToHost, c->s));
    TB_CU(cudaStreamSynchronize(c->s));
    *loss_sum = *pl;
    return isfinite(*loss_sum) ? TB_OK : tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", *loss_sum, p->step);
}

/* Starts the upload of a later pass's inputs on the copy stream (prefetch_cuda.c), the ring's
 * cfg.prefetch + 1 slots created on first use: the pass that reads them may be that many calls away. */
static int cuda_prefetch(struct executor *ex, const struct executor_pass *p)
{
    struct cuda_ctx *c = ctx_of(ex);
    int st = sticky(c);
    if (st != TB_OK) return st;
    if (!c->pf && (st = tb_cuda_prefetch_create(&c->pf, c->cfg.prefetch + 1, c->cfg.n_max, c->per_in)) != TB_OK)
        return st;
    const int at_loss = p->l1 == 0 || p->l1 == c->m->n_layers; /* the keys cuda_compute will look for */
    return tb_cuda_prefetch_put(c->pf, p->l0 == 0 ? p->x : NULL, at_loss ? p->y : NULL, p->n, p->step);
}

int executor_cuda_gpu(const struct executor *ex) { return ctx_of(ex)->gpu; }

void *executor_cuda_stream(const struct executor *ex) { return ctx_of(ex)->s; }

/* ---- lifetime ---- */

static void cuda_destroy(struct executor *ex)
{
    struct cuda_ctx *c = ctx_of(ex);
    if (!c) return;
    cudaSetDevice(c->gpu);
    tb_cuda_prefetch_destroy(c->pf);
    if (c->s) cudaStreamSynchronize(c->s);
    if (c->gexec) cudaGraphExecDestroy(c->gexec);
    if (c->graph) cudaGraphDestroy(c->graph);
    tb_cublas_destroy(c->blas);
    void *dev[] = {c->params, c->params16, c->grads, c->opt, c->buffers, c->train.acts, c->train.dacts,
                   c->eval_shared ? NULL : c->eval.acts,
                   c->losses, c->correct, c->x, c->labels, c->seg_of, c->no_decay, c->trust, c->seg_off, c->seg_n,
                   c->l_x, c->l_y, c->l_alpha, c->l_alpha_now, c->l_loss, c->l_k, c->scratch, c->mlp_scratch,
                   c->d_overflow};
    for (size_t k = 0; k < sizeof dev / sizeof *dev; k++)
        if (dev[k]) cudaFree(dev[k]);
    if (c->h_losses) cudaFreeHost(c->h_losses);
    if (c->h_correct) cudaFreeHost(c->h_correct);
    if (c->h_stage) cudaFreeHost(c->h_stage);
    if (c->h_overflow) cudaFreeHost(c->h_overflow);
    for (int i = 0; c->ev_f && c->ev_b && i <= c->m->n_layers; i++) { /* c->m: a stage's is freed below */
        if (c->ev_f[i]) cudaEventDestroy(c->ev_f[i]);
        if (c->ev_b[i]) cudaEventDestroy(c->ev_b[i]);
    }
    if (c->ev_t0) cudaEventDestroy(c->ev_t0);
    for (int k = 0; k < 2; k++)
        if (c->ev_u[k]) cudaEventDestroy(c->ev_u[k]);
    free(c->ev_f), free(c->ev_b), free(c->prof), free(c->tr.ev), free(c->bn_dw), free(c->bn_unwritten);
    if (c->stage) tb_cuda_stage_free(c->stage), free(c->stage);
    if (c->s) cudaStreamDestroy(c->s);
    tb_cuda_mem_account(-c->dev_bytes);
    free(c->off_train), free(c->off_eval), free(c->doff);
    free(c);
    ex->ctx = NULL;
}

/* The optimizer's segment tables (one per trainable tensor, as executor_cpu.c builds them; a stage's: the
 * tensors of its layers only, so LARS's trust ratios cover nothing else) on the device. */
static int build_segments(struct cuda_ctx *c)
{
    const struct model *m = c->m;
    const int l0 = c->stage ? c->stage->l0 : 0, l1 = c->stage ? c->stage->l1 : m->n_layers;
    const size_t np = m->n_params;
    int32_t *seg_of = malloc((np ? np : 1) * sizeof *seg_of);
    uint8_t *nd = malloc((size_t)m->n_entries + 1);
    size_t *off = malloc(((size_t)m->n_entries + 1) * sizeof *off), *cnt = malloc(((size_t)m->n_entries + 1) * sizeof *cnt);
    int st = TB_OK;
    if (!seg_of || !nd || !off || !cnt) st = tb_error_set(TB_ENOMEM, "cuda: out of memory");
    for (size_t i = 0; st == TB_OK && i < np; i++) seg_of[i] = -1;
    int n = 0;
    for (int i = 0; st == TB_OK && i < m->n_entries; i++) {
        const struct param_entry *pe = &m->params[i];
        if (pe->kind == PARAM_BUFFER || pe->kind == PARAM_COUNTER || pe->layer < l0 || pe->layer >= l1) continue;
        for (size_t j = pe->off; j < pe->off + pe->n; j++) seg_of[j] = n;
        off[n] = pe->off, cnt[n] = pe->n, nd[n] = pe->kind != PARAM_WEIGHT;
        n++;
    }
    c->n_segs = n;
    if (st == TB_OK) st = dev_alloc(c, (void **)&c->seg_of, np * sizeof *seg_of, "cudaMalloc(segments)");
    if (st == TB_OK) st = dev_alloc(c, (void **)&c->no_decay, (size_t)n, "cudaMalloc(segments)");
    if (st == TB_OK) st = dev_alloc(c, (void **)&c->trust, (size_t)n * sizeof(float), "cudaMalloc(segments)");
    if (st == TB_OK) st = dev_alloc(c, (void **)&c->seg_off, (size_t)n * sizeof *off, "cudaMalloc(segments)");
    if (st == TB_OK) st = dev_alloc(c, (void **)&c->seg_n, (size_t)n * sizeof *cnt, "cudaMalloc(segments)");
    cudaError_t e = cudaSuccess;
    if (st == TB_OK && np) e = cudaMemcpy(c->seg_of, seg_of, np * sizeof *seg_of, cudaMemcpyHostToDevice);
    if (st == TB_OK && n && e == cudaSuccess) e = cudaMemcpy(c->no_decay, nd, (size_t)n, cudaMemcpyHostToDevice);
    if (st == TB_OK && n && e == cudaSuccess) e = cudaMemcpy(c->seg_off, off, (size_t)n * sizeof *off, cudaMemcpyHostToDevice);
    if (st == TB_OK && n && e == cudaSuccess) e = cudaMemcpy(c->seg_n, cnt, (size_t)n * sizeof *cnt, cudaMemcpyHostToDevice);
    if (st == TB_OK && e != cudaSuccess) st = tb_cuda_fail(e, "cudaMemcpy(segments)", __FILE__, __LINE__);
    free(seg_of), free(nd), free(off), free(cnt);
    return st;
}

/* Whether the model is a dense chain the captured batch-1 step runs: a one-channel flat input, then
 * dense layers (ReLU or none) and the loss; Adam at n_max 1, fusion allowed. */
static int loop_eligible(const struct executor *ex)
{
    const struct model *m = ex->m;
    const struct executor_config *cfg = &ex->cfg;
    if (cfg->n_max != 1 || cfg->optim.kind != OPTIM_ADAM || cfg->no_fuse || cfg->no_fused_step) return 0;
    if (cfg->prec != STAGE_PREC_FP32 || cfg->l1) return 0; /* the captured step is the fp32 whole model's */
    if (m->n_layers < 2 || m->layers[0].op != OP_INPUT || m->tensors[m->layers[0].in].c != 1) return 0;
    for (int i = 1; i < m->n_layers - 1; i++)
        if (m->layers[i].op != OP_DENSE) return 0;
    return m->layers[m->n_layers - 1].op == OP_SOFTMAX_CE;
}

/* The persistent kernel's plan for a loop-eligible chain (mlp_persist.h), unless TB_CUDA_LOOP=graph asks for
 * the captured graph (the tests compare the two) or the chain does not fit it (then the graph, said on
 * stderr once with why). Every dense layer must have a bias (the kernel's combine adds it). */
static int persist_plan(struct cuda_ctx *c)
{
    const struct model *m = c->m;
    if (tb_cuda_env_is("TB_CUDA_LOOP", "graph")) return TB_OK;
    const int D = m->n_layers - 2;
    if (D > TB_CUDA_MLP_MAX_LAYERS) return TB_OK;
    struct tb_cuda_mlp_plan *p = &c->mlp;
    memset(p, 0, sizeof *p);
    const size_t np = m->n_params;
    const struct optim_config *o = &c->cfg.optim;
    for (int l = 0; l < D; l++) {
        const struct layer *ly = &m->layers[l + 1];
        if (!ly->n_b) return TB_OK;
        struct tb_cuda_mlp_layer *L = &p->L[l];
        L->w = c->params + ly->w_off, L->b = c->params + ly->b_off;
        L->mw = c->opt + ly->w_off, L->vw = c->opt + np + ly->w_off;
        L->mb = c->opt + ly->b_off, L->vb = c->opt + np + ly->b_off;
        L->in = ly->a.dense.IN, L->out = ly->a.dense.OUT, L->relu = ly->act == ACT_RELU;
        L->wd = o->weight_decay;
    }
    p->n_layers = D;
    flat_input_affine(m, &p->scale, &p->shift);
    p->b1 = o->beta1, p->b2 = o->beta2, p->eps = o->eps;
    p->smoothing = m->layers[m->n_layers - 1].a.ce.smoothing;
    const char *why = NULL;
    const size_t floats = tb_cuda_mlp_prepare(p, &why);
    if (!floats) {
        fprintf(stderr, "cuda: runs of steps as a CUDA graph: the persistent kernel does not take %s (%s)\n", m->name,
                why ? why : "?");
        return TB_OK;
    }
    int st = dev_alloc(c, (void **)&c->mlp_scratch, floats * sizeof(float), "cudaMalloc(persistent loop scratch)");
    if (st != TB_OK) return st;
    tb_cuda_mlp_bind(p, c->mlp_scratch);
    c->persist = 1;
    return TB_OK;
}

static int cuda_stats(struct executor *ex, struct executor_stats *s);

/* --plan tta's next seed: the dropout and drop-connect keys (env_of reads cfg.seed at every call). */
static void cuda_set_seed(struct executor *ex, uint64_t seed) { ctx_of(ex)->cfg.seed = seed; }

/* --resume of an fp16 run: the loss scale and counts the checkpoint kept. */
static int cuda_restore_loss_scaling(struct executor *ex, const char *state)
{
    struct cuda_ctx *c = ctx_of(ex);
    return c->fp16 ? loss_scaler_restore(&c->ls, state) : TB_OK;
}

static const struct executor_i cuda_iface = {
    .name = "cuda", .destroy = cuda_destroy, .compute = cuda_compute, .zero_grads = cuda_zero_grads,
    .update = cuda_update, .get_tensors = cuda_get, .set_tensors = cuda_set, .buffer = cuda_buffer,
    .supports = cuda_supports, .synchronize = cuda_synchronize, .train_step = cuda_train_step,
    .evaluate = cuda_evaluate, .group_init = tb_cuda_group_init, .allreduce_grads = tb_cuda_group_allreduce,
    .prefetch = cuda_prefetch, .stage_steps = cuda_stage_steps, .run_steps = cuda_run_steps, .stats = cuda_stats,
    .trace = cuda_trace, .restore_loss_scaling = cuda_restore_loss_scaling, .set_seed = cuda_set_seed,
};

/* ---- stage executors (cfg.l1 > 0): executor_cuda_stage.c's plan and boundaries around the passes above ---- */

static int cuda_stats(struct executor *ex, struct executor_stats *s)
{
    const struct cuda_ctx *c = ctx_of(ex);
    if (c->stage) tb_cuda_stage_stats(c->stage, s);
    s->profile = c->prof;
    s->trace = c->tr.ev, s->n_trace = c->tr.n;
    s->loss_scaling = c->fp16 ? &c->ls : NULL;
    return TB_OK;
}

/* Records the boundary for the next pass, which copies it in (tb_cuda_stage_feed) and returns when the copy
 * and its kernels are done: src is read until then, as executor.h allows. */
static size_t cuda_import(struct executor *ex, int grads, const void *src, int n, enum stage_prec prec, float scale)
{
    return tb_cuda_stage_import(ctx_of(ex)->stage, grads, src, n, prec, scale);
}

/* The export cannot return a failure: it is kept and reported by the next call that can (sticky). */
static size_t cuda_export(struct executor *ex, int grads, int slot, void *dst, int n, enum stage_prec prec,
                          float scale)
{
    struct cuda_ctx *c = ctx_of(ex);
    size_t bad = 0;
    const cudaError_t e = cudaSetDevice(c->gpu);
    const int st = e != cudaSuccess ? tb_cuda_fail(e, "cudaSetDevice", __FILE__, __LINE__)
                                    : tb_cuda_stage_export(c->stage, grads, slot, dst, n, prec, scale, c->s, &bad);
    if (st != TB_OK && !c->err) {
        c->err = st;
        snprintf(c->err_msg, sizeof c->err_msg, "%s", tb_error_get());
    }
    return bad;
}

/* fp32 stages store their gradients unscaled whatever the scale: only fp16 storage keeps them times the loss
 * scale (the cpu stage's rule), and this device refuses 2-byte storage at create. */
static void cuda_set_grad_scale(struct executor *ex, float scale)
{
    (void)ex, (void)scale;
}

/* A stage: no evaluate (the schedule streams evaluation through the stages' forwards), no fused step or
 * runs of steps, no prefetch (the schedule's infeed hands over the inputs). */
static const struct executor_i cuda_stage_iface = {
    .name = "cuda", .destroy = cuda_destroy, .compute = cuda_compute, .zero_grads = cuda_zero_grads,
    .update = cuda_update, .get_tensors = cuda_get, .set_tensors = cuda_set, .buffer = cuda_buffer,
    .supports = cuda_supports, .synchronize = cuda_synchronize, .stats = cuda_stats,
    .import_boundary = cuda_import, .export_boundary = cuda_export, .set_grad_scale = cuda_set_grad_scale,
    .set_seed = cuda_set_seed,
    .group_init = tb_cuda_group_init, .allreduce_grads = tb_cuda_group_allreduce,
};

int executor_cuda_probe(void) { return tb_cuda_probe(); }

int executor_cuda_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) (void)cudaGetLastError(), n = 0;
    return n;
}

int executor_cuda_create(struct executor *ex)
{
    /* Refused before the probe, being what no machine runs, GPU or not: a stage's 2-byte storage or
     * recomputation (tb_cuda_stage_refuse). bf16 and fp16 are mixed precision, with fp32 master weights
     * whatever cfg.master says; fp16 with loss scaling. */
    int st;
    if (ex->cfg.l1 && (st = tb_cuda_stage_refuse(&ex->cfg)) != TB_OK) return st;
    st = tb_cuda_probe(); /* then: without a GPU nothing else matters */
    if (st != TB_OK) return st;
    const struct model *m = ex->m;
    const int stage = ex->cfg.l1 > 0;
    /* Mixed precision (never on a stage: refused above): 2-byte activations, bf16 or fp16. */
    const int half = ex->cfg.prec == STAGE_PREC_BF16 || ex->cfg.prec == STAGE_PREC_FP16;
    for (int i = stage ? ex->cfg.l0 : 0; i < (stage ? ex->cfg.l1 : m->n_layers); i++) {
        const char *why;
        if (!layer_ok(m, &m->layers[i], &why))
            return why ? tb_error_set(TB_EUNSUPPORTED, "cuda: %s (layer %s) is not implemented on this device yet", why,
                                      m->layers[i].name)
                       : tb_error_set(TB_EUNSUPPORTED, "cuda: layer kind %s is not implemented on this device yet",
                                      model_op_name(m->layers[i].op));
    }
    if (m->layers[m->n_layers - 1].op != OP_SOFTMAX_CE || m->layers[0].op != OP_INPUT)
        return tb_error_set(TB_EUNSUPPORTED, "cuda: a model must start at its input and end at its loss");
    const char *bf16_why;
    if (half && !tb_cuda_bf16_model_ok(m, &bf16_why))
        return tb_error_set(TB_EUNSUPPORTED, "cuda: %s: %s", ex->cfg.prec == STAGE_PREC_FP16 ? "fp16" : "bf16",
                            bf16_why);
    struct cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return tb_error_set(TB_ENOMEM, "cuda executor: out of memory");
    ex->ctx = c; /* from here on, executor_destroy (called by executor_create on failure) frees it all */
    ex->i = stage ? &cuda_stage_iface : &cuda_iface;
    c->m = m;
    c->cfg = ex->cfg;
    c->fp16 = ex->cfg.prec == STAGE_PREC_FP16;
    c->fuse_l1 = -1;
    if (!stage) { /* a stage's range plan keeps the layers apart (its slots hold what its boundaries export) */
        if (!(c->bn_dw = malloc((size_t)m->n_layers * sizeof *c->bn_dw)) ||
            !(c->bn_unwritten = calloc((size_t)m->n_layers, 1)))
            return tb_error_set(TB_ENOMEM, "cuda executor: out of memory");
        /* --no-fuse runs the pairs apart, as TB_CUDA_BN_DW=apart does (the row's no_fuse is then true). */
        if (ex->cfg.no_fuse || tb_cuda_bn_dw_pairs(m, c->bn_dw) == 0) free(c->bn_dw), c->bn_dw = NULL;
    }
    if (c->fp16) loss_scaler_init(&c->ls, ex->cfg.loss_scale);
    if (stage) { /* the range plan: its layers see activation offsets of the tensors the range touches only */
        if (!(c->stage = calloc(1, sizeof *c->stage))) return tb_error_set(TB_ENOMEM, "cuda executor: out of memory");
        if ((st = tb_cuda_stage_plan(c->stage, m, &ex->cfg)) != TB_OK) return st;
        c->m = &c->stage->sm;
    }
    /* Replica r of a schedule on GPU r mod the GPUs present: with one GPU, every replica on it (a stream
     * and memory each), so multi-device schedules run on one card. */
    const int n_gpus = executor_cuda_count();
    c->gpu = n_gpus > 0 && ex->cfg.ordinal > 0 ? ex->cfg.ordinal % n_gpus : 0;
    TB_CU(cudaSetDevice(c->gpu));
    const int n_max = ex->cfg.n_max, eval_n = ex->cfg.eval_batch;
    c->n_io = n_max > eval_n ? n_max : eval_n;
    c->per_in = m->tensors[m->input].per_sample;
    /* Activation arenas in bytes: the cpu's fp32 layout, or mixed precision's (2-byte, offsets per tensor); a
     * stage has its slots and gradient arena instead (the range plan's fp32 layout), and no evaluation arena. */
    size_t b_train = stage ? 0 : model_act_floats(m, n_max) * sizeof(float);
    size_t b_eval = stage ? 0 : model_act_floats(m, eval_n) * sizeof(float);
    const size_t b_slot = stage ? c->stage->act_floats * sizeof(float) : 0;
    if (half) {
        if (!(c->off_train = malloc((size_t)m->n_tensors * sizeof(size_t))) ||
            !(c->off_eval = malloc((size_t)m->n_tensors * sizeof(size_t))))
            return tb_error_set(TB_ENOMEM, "cuda executor: out of memory");
        b_train = tb_cuda_bf16_layout(m, n_max, c->off_train), b_eval = tb_cuda_bf16_layout(m, eval_n, c->off_eval);
        c->train.off = c->off_train, c->eval.off = c->off_eval;
    }
    /* Evaluation's activations in the training arena: an evaluation runs between steps, never inside one (a
     * step's forward and backward are one dispatch, or consecutive calls), and every step's forward rewrites
     * what its backward reads. TB_CUDA_EVAL_ARENA=own keeps an arena of its own (an A-B run of peak memory). */
    c->eval_shared = !stage && !tb_cuda_env_is("TB_CUDA_EVAL_ARENA", "own");
    /* The gradients: only those alive at once take bytes at once (grad_layout.h); TB_CUDA_GRAD_LAYOUT=full
     * keeps one per tensor (the activations' layout), for an A-B run of peak memory. */
    size_t b_grads = b_train;
    if (!stage && !tb_cuda_env_is("TB_CUDA_GRAD_LAYOUT", "full")) {
        if (!(c->doff = malloc((size_t)m->n_tensors * sizeof(size_t))))
            return tb_error_set(TB_ENOMEM, "cuda executor: out of memory");
        const size_t b = tb_cuda_grad_layout(m, n_max, half, c->doff);
        if (b) b_grads = b, c->train.doff = c->doff;
    }
    /* Refuse before allocating: the estimate against the device's free memory (mixed precision: the weights' copy and
     * the smaller arenas; a stage: the canonical-size parameter arrays it allocates, its slots and gradient
     * arena). */
    const int sp = optim_state_per_param(ex->cfg.optim.kind);
    const double params_bytes = 4.0 * ((double)m->n_params * (2.0 + sp) + (double)m->n_buffers);
    const double need = stage  ? params_bytes + (double)(c->stage->n_slots + 1) * (double)b_slot
                        : params_bytes + (half ? 2.0 * (double)m->n_params : 0.0) + (double)b_grads +
                              (c->eval_shared ? (double)(b_train > b_eval ? b_train : b_eval)
                                              : (double)b_train + (double)b_eval);
    size_t free_b = 0, total_b = 0;
    TB_CU(cudaMemGetInfo(&free_b, &total_b));
    if (need > 0.9 * (double)free_b) {
        if (stage)
            return tb_error_set(TB_ENOMEM, "cuda: layers %d..%d of %s, %d slots of micro-batch %d, need about %.1f GiB "
                                           "but the GPU has %.1f GiB free: lower --micro-batch or use more stages",
                                c->stage->l0, c->stage->l1 - 1, m->name, c->stage->n_slots, n_max,
                                need / 1073741824.0, (double)free_b / 1073741824.0);
        return tb_error_set(TB_ENOMEM, "cuda: %s at batch %d needs about %.1f GiB but the GPU has %.1f GiB free: "
                                       "lower --batch or --eval-batch", m->name, n_max, need / 1073741824.0,
                            (double)free_b / 1073741824.0);
    }
    TB_CU(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
    if ((st = tb_cublas_create(&c->blas, c->s)) != TB_OK) return st;
    const size_t np = m->n_params, no = np * (size_t)optim_state_per_param(ex->cfg.optim.kind);
    c->train.n_max = n_max, c->eval.n_max = eval_n;
    /* Once, for the larger of the two batches: no allocation per step. */
    const size_t s_train = tb_cuda_effnet_scratch_bytes(m, n_max), s_eval = tb_cuda_effnet_scratch_bytes(m, eval_n);
    const size_t scratch = s_train > s_eval ? s_train : s_eval;
    if ((st = dev_alloc(c, (void **)&c->params, np * sizeof(float), "cudaMalloc(params)")) != TB_OK ||
        (st = dev_alloc(c, (void **)&c->grads, np * sizeof(float), "cudaMalloc(grads)")) != TB_OK ||
        (st = dev_alloc(c, (void **)&c->opt, no * sizeof(float), "cudaMalloc(optimizer state)")) != TB_OK ||
        (st = dev_alloc(c, (void **)&c->buffers, m->n_buffers * sizeof(float), "cudaMalloc(buffers)")) != TB_OK)
        return st;
    if (!stage && c->eval_shared &&
        ((st = dev_alloc(c, (void **)&c->train.acts, b_train > b_eval ? b_train : b_eval, "cudaMalloc(activations)")) !=
             TB_OK ||
         (st = dev_alloc(c, (void **)&c->train.dacts, b_grads, "cudaMalloc(activation gradients)")) != TB_OK))
        return st;
    if (c->eval_shared) c->eval.acts = c->train.acts;
    if (!stage && !c->eval_shared &&
        ((st = dev_alloc(c, (void **)&c->train.acts, b_train, "cudaMalloc(activations)")) != TB_OK ||
         (st = dev_alloc(c, (void **)&c->train.dacts, b_grads, "cudaMalloc(activation gradients)")) != TB_OK ||
         (st = dev_alloc(c, (void **)&c->eval.acts, b_eval, "cudaMalloc(evaluation activations)")) != TB_OK))
        return st;
    if (stage) { /* a slot per micro-batch in flight, one gradient arena their backwards share */
        struct cu_stage *sg = c->stage;
        if ((st = dev_alloc(c, (void **)&sg->dacts, b_slot, "cudaMalloc(stage activation gradients)")) != TB_OK)
            return st;
        for (int k = 0; k < sg->n_slots; k++) {
            if ((st = dev_alloc(c, (void **)&sg->slot[k].acts, b_slot, "cudaMalloc(stage activation slot)")) != TB_OK)
                return st;
            sg->slot[k].dacts = sg->dacts;
        }
    }
    if ((st = dev_alloc(c, (void **)&c->losses, (size_t)c->n_io * sizeof(float), "cudaMalloc(losses)")) != TB_OK ||
        (st = dev_alloc(c, (void **)&c->correct, (size_t)c->n_io, "cudaMalloc(correct)")) != TB_OK ||
        (st = dev_alloc(c, (void **)&c->x, (size_t)c->n_io * c->per_in, "cudaMalloc(pixels)")) != TB_OK ||
        (st = dev_alloc(c, (void **)&c->labels, (size_t)c->n_io * sizeof(int32_t), "cudaMalloc(labels)")) != TB_OK ||
        (st = dev_alloc(c, &c->scratch, scratch, "cudaMalloc(scratch)")) != TB_OK || (st = build_segments(c)) != TB_OK)
        return st;
    if (half &&
        (st = dev_alloc(c, (void **)&c->params16, np * sizeof(uint16_t), "cudaMalloc(2-byte weights)")) != TB_OK)
        return st;
    if (c->fp16) {
        if ((st = dev_alloc(c, (void **)&c->d_overflow, sizeof(int), "cudaMalloc(overflow flag)")) != TB_OK) return st;
        TB_CU(cudaMallocHost((void **)&c->h_overflow, sizeof(int)));
    }
    TB_CU(cudaMallocHost((void **)&c->h_losses, (size_t)c->n_io * sizeof(float)));
    TB_CU(cudaMallocHost((void **)&c->h_correct, (size_t)c->n_io));
    /* Zeroed like the cpu's arenas (get_tensors before any pass reads zeros), the optimizer's initial state
     * written as every executor writes it (issue 27). */
    TB_CU(cudaMemsetAsync(c->grads, 0, np * sizeof(float), c->s));
    TB_CU(cudaMemsetAsync(c->params, 0, np * sizeof(float), c->s));
    if (half) TB_CU(cudaMemsetAsync(c->params16, 0, np * sizeof(uint16_t), c->s)); /* +0 in both: the zeros' copy */
    if (m->n_buffers) TB_CU(cudaMemsetAsync(c->buffers, 0, m->n_buffers * sizeof(float), c->s));
    if ((st = cuda_set(ex, TF_OPT, NULL)) != TB_OK) return st;
    /* The segment tables went through the legacy stream (cudaMemcpy): complete before any pass reads them. */
    TB_CU(cudaDeviceSynchronize());
    /* --profile, --trace: the events each pass records. A stage profiles its layers too (the ipu backend assembles
     * the stages' rows; without them the row's per-layer times were zeros); its trace is the schedule's. */
    const int trace = ex->cfg.trace && !stage;
    if (ex->cfg.profile || trace) {
        const size_t ne = (size_t)m->n_layers + 1;
        c->ev_f = calloc(ne, sizeof *c->ev_f), c->ev_b = calloc(ne, sizeof *c->ev_b);
        if (ex->cfg.profile) c->prof = calloc(2 * (size_t)m->n_layers, sizeof *c->prof);
        if (trace) c->tr.cap = 2 * m->n_layers + 8, c->tr.micro_batch = -1,
                   c->tr.ev = calloc((size_t)c->tr.cap, sizeof *c->tr.ev);
        if (!c->ev_f || !c->ev_b || (ex->cfg.profile && !c->prof) || (trace && !c->tr.ev))
            return tb_error_set(TB_ENOMEM, "cuda executor: out of memory");
        for (size_t i = 0; i < ne; i++) {
            TB_CU(cudaEventCreate(&c->ev_f[i]));
            TB_CU(cudaEventCreate(&c->ev_b[i]));
        }
        if (trace) {
            TB_CU(cudaEventCreate(&c->ev_t0));
            TB_CU(cudaEventCreate(&c->ev_u[0]));
            TB_CU(cudaEventCreate(&c->ev_u[1]));
        }
    }
    c->loop = loop_eligible(ex);
    if (c->loop && (ex->cfg.profile || ex->cfg.trace)) {
        /* The fused batch-1 step (persistent kernel or graph) has no layer boundaries to put events at: it would
         * record zeros as per-layer times. Such a run takes the per-layer path and says so, once a process: its
         * step times are that path's, not the fused step's. */
        static atomic_flag said = ATOMIC_FLAG_INIT;
        c->loop = 0;
        if (!atomic_flag_test_and_set(&said))
            fprintf(stderr, "bench: note: %s on the cuda device: batch-1 steps run layer by layer so that each layer "
                            "is timed, not fused in one persistent kernel (their step times are not the fused "
                            "step's)\n",
                    ex->cfg.trace ? "--trace" : "--profile"); /* the harness's --trace sets profile too */
    }
    if (c->loop) {
        if ((st = dev_alloc(c, (void **)&c->l_k, sizeof(long long), "cudaMalloc(loop step)")) != TB_OK ||
            (st = dev_alloc(c, (void **)&c->l_alpha_now, sizeof(float), "cudaMalloc(loop step size)")) != TB_OK)
            return st;
        TB_CU(cudaMallocHost(&c->h_stage, (c->per_in + 7) / 8 * 8 + 32));
        ex->fused_step = 1;
        ex->loop_steps = 1;
        ex->step_what = "batch-1 step as a CUDA graph";
        if ((st = persist_plan(c)) != TB_OK) return st;
        if (c->persist) {
            static const char *what[2][2] = {
                {"batch-1 steps in one persistent kernel",
                 "batch-1 steps in one persistent kernel, the last layer in every block"},
                {"batch-1 steps in one persistent kernel, one thread-block cluster",
                 "batch-1 steps in one persistent kernel, one thread-block cluster, the last layer in every block"}};
            ex->step_what = what[c->mlp.cluster != 0][c->mlp.replicate_last != 0];
        }
    }
    return TB_OK;
}
