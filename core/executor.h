/* executor.h — where a model's layers run: the device seam between the schedules (backends/) and the
 * kernels (core/). An executor holds a whole model, or one pipeline stage of it (executor_config.l0/l1:
 * a stage executor, with activation slots, segments and storage precision, fed and drained through
 * packed boundaries; docs/DESIGN.md).
 *
 * An executor holds one instance of a model on one device (parameters, gradients, optimizer state,
 * buffers, activations, and the threads or queues the device needs) and runs passes over ranges of
 * layers, optimizer updates and tensor copies on it. A backend is a schedule over executor_* calls: how
 * a step is spread over executors and when their gradients are exchanged. A device implementation is a
 * `struct executor_i` of function pointers plus a private context, created by name through the device
 * registry (executor_devices); the public wrappers below assert the contract and supply defaults for
 * the optional members, in the spirit of ggml-backend.
 *
 * Ownership and threading: the caller owns struct executor. One thread drives an executor at a time
 * (calls are not reentrant); the executor may run its own threads inside a call and has joined them
 * when the call returns, unless the device says otherwise (executor_synchronize). Different executors
 * may be driven concurrently, one thread each (the mirrored backend's replicas).
 */
#ifndef TB_EXECUTOR_H
#define TB_EXECUTOR_H

#include "device_info.h"
#include "exec.h"
#include "loss_scale.h"
#include "model.h"
#include "optim.h"
#include "stage_precision.h"

#include <stddef.h>
#include <stdint.h>

/* Which canonical tensor family get/set and buffer address. */
enum tensor_family {
    TF_PARAMS,  /* (model->n_params) */
    TF_GRADS,   /* (model->n_params) summed over the global batch */
    TF_OPT,     /* (optim_state_per_param · n_params) */
    TF_BUFFERS, /* (model->n_buffers) BatchNorm running statistics */
};

/* Elements of family f of a whole model m trained with optimizer k (the sizes above). */
size_t tensor_family_floats(const struct model *m, enum optim_kind k, enum tensor_family f);

/* What an evaluation counted; executor_evaluate adds to it. */
struct eval_stats {
    double loss_sum;
    long correct, n;
    /* In, optional: where to write the batch's logits, (batch n, classes) row-major, for --plan evaluate's
     * top-5 and --logits (NULL: not wanted, nothing copied). Backends that cannot return them refuse. */
    float *logits;
    /* Out, over MPI (the mirrored backend): the stop signal some rank offered, carried by the evaluation's
     * all-reduce as a training step carries it (backend_offer_stop); 0 none. */
    int stop_signal;
};

/* Everything a device needs to plan one executor. */
struct executor_config {
    const char *device;   /* registry name; NULL or "" = "cpu" (executor_create stores the registry's) */
    int threads;          /* threads the device runs kernels on (≥ 1; the cpu device pins a pool when > 1) */
    int n_max;            /* most samples one training pass holds (≥ 1) */
    int eval_batch;       /* samples per evaluation forward (0 = n_max) */
    struct optim_config optim;
    uint64_t seed;        /* keys dropout, drop-connect and augmentation */
    char conv_algo[16];   /* "auto" (or "") = measured per shape; im2col | direct | fft | gemm1x1 force one */
    int no_fuse;          /* run fusable layer pairs unfused, and no fused train step (before/after numbers) */
    int no_fused_step;    /* the schedule puts work between backward and update: executor_train_step unused */
    int profile;          /* keep per-layer forward and backward seconds (executor_stats) */
    int trace;            /* keep the current step's per-layer events (executor_stats) */
    /* A stage of a pipeline (l1 = 0: the whole model). A stage executor holds layers [l0,l1) with the
     * parameters, gradients, buffers and optimizer state of their slice of the canonical layout only;
     * get/set tensors and buffers address that slice. It runs on the calling thread (threads = 1),
     * takes the tensors crossing its first split and hands over those crossing its last one through
     * import_boundary / export_boundary, and keeps a micro-batch's activations in its slot
     * (executor_pass.slot) from its forward to its backward. */
    int l0, l1;
    int slots;            /* activation slots: micro-batches held between forward and backward (0 = 1) */
    enum stage_prec prec; /* storage of weights, gradients and kept activations (kernels compute in fp32):
                             half precision rounds every output onto the half grid and the update's
                             result stochastically (keyed by the global index), or to nearest from master.
                             The cuda device's bf16 and fp16 are mixed precision instead (autocast's):
                             activations and GEMM operands 2-byte, weights, gradients and optimizer state
                             fp32 (master implied); fp16 with loss scaling (loss_scale) */
    int master;           /* half precision: fp32 master weights in the optimizer */
    float loss_scale;     /* the cuda device's fp16 mixed precision: a static loss scale (> 0), or 0 for a
                             dynamic one (loss_scale.h); the cpu stages take theirs from the schedule */
    int recompute;        /* keep each segment's input only; the backward recomputes it (no BatchNorm
                             statistics update): the bits of a run without it */
    const int *cuts;      /* segments (required by recompute or half storage, else none): n_seg + 1 layers,
                             cuts[0] = l0 .. cuts[n_seg] = l1, at block boundaries (copied at create) */
    int n_seg;
    int prefetch;         /* passes a schedule hands over ahead (executor_prefetch) at most; 0 = none */
    int ordinal;          /* which instance of the device this executor uses (a mirrored replica's index):
                             the cuda device takes GPU ordinal mod the GPUs present; the cpu ignores it */
    int par_units;        /* cpu: cut every work split as a machine of this many cores would (0: this machine's,
                             tb_par_units; mirrored's and ipu's one-core replicas: TB_ONE_CORE_UNITS). The bits follow it,
                             never the thread count */
    float *params_from;   /* cpu: use these host parameters (another executor's, of the same model, alive as long as
                             this one) instead of its own: mirrored's replicas in one process share one copy, each
                             updating its chunk (executor_update_part). NULL: its own. A device that does not take
                             them hands out its own from executor_buffer, which the caller checks */
};

/* One pass over a slice of the global batch; zero-initialised fields give a whole-model pass. */
struct executor_pass {
    int n;                /* samples in this pass (1 .. n_max) */
    int n_global;         /* samples in the global batch: the loss gradient is seeded with 1/n_global */
    long first_index;     /* position of sample 0 within the global batch (augmentation, dropout keys) */
    long step;            /* 1-based optimizer step */
    const uint8_t *x;     /* (n,H,W,C) pixels: read by a forward that starts at layer 0 */
    const int32_t *y;     /* (n) labels: read by a forward through the loss layer */
    int training;         /* batch statistics, dropout, augmentation; required by a backward */
    int l0, l1;           /* layers [l0,l1); l1 = 0: through the last layer. A range reads the tensors of
                             earlier layers that this executor's previous passes left. Layer pairs a
                             device fuses run unfused across a split: split at block boundaries
                             (layer.block) for the whole pass's bits (the cpu device's SE-scale-into-
                             projection fusion is not bitwise) */
    const struct exec_collective *coll; /* sync BatchNorm: statistics summed over replicas (NULL: local) */
    int slot;             /* stage executors: the activation slot of this micro-batch (0 .. slots−1) */
    long *n_correct;      /* out, optional: a forward through the loss layer adds its correct predictions */
    float *logits;        /* out, optional: a forward through the loss layer writes its (n, classes) logits here */
};

/* A tensor family's storage, for collectives that work in place (all-reduce, all-gather). Half-precision
 * stage gradients are a buffer of 2-byte elements (data16, prec), summed by decoding to fp32. */
struct executor_buffer {
    float *data;          /* canonical layout; NULL when the elements are 2-byte (data16) */
    size_t n;             /* elements */
    int host;             /* 1: a host pointer the caller may read and write; 0: a device pointer */
    size_t off;           /* canonical offset of element 0 (a stage's slice; 0 for a whole model) */
    uint16_t *data16;     /* prec bf16/fp16: the elements, 2 bytes each; NULL for fp32 */
    enum stage_prec prec; /* element type: STAGE_PREC_FP32 (data) or a half precision (data16) */
    float scale;          /* the stored values are the tensors times this (fp16 gradients: the loss scale) */
};

/* What the executor recorded, as views valid until its next call. */
struct executor_stats {
    const double *profile; /* (n_layers, 2) forward, backward seconds summed over passes; NULL unless profile */
    const double *profile_busy; /* (n_layers, 2) seconds the device's threads worked in each layer (their CPU
                                   time in it less barrier spinning), summed over threads and passes; NULL: no pool */
    const double *profile_busy_max; /* (n_layers, 2) the busiest thread's work seconds in each layer (summed
                                   over passes per thread); NULL with profile_busy */
    int profile_threads;   /* threads profile_busy sums over */
    unsigned barriers;     /* barriers the device's threads have completed together, mod 2^32 (0: no pool) */
    const struct exec_trace_event *trace; /* the current step's events; NULL unless trace */
    int n_trace;
    const int *conv_algos; /* (n_layers) enum conv_algo per layer (-1: none); NULL if the device cannot tell */
    const struct loss_scaler *loss_scaling; /* a device that scales the loss itself (cuda fp16): its scale and the
                                               steps it skipped; NULL otherwise */
    /* Stage executors (zero otherwise). */
    double t_recompute;    /* seconds the last backward spent recomputing segments (the timeline's R) */
    long nonfinite_grads;  /* gradients stored as inf or NaN since the last zero_grads (fp16 overflow) */
    int n_segments;        /* segments the stage runs as (0: whole-stage slots) */
    double act_fixed_bytes; /* activation memory held whatever the micro-batches in flight */
    double act_slot_bytes;  /* activation memory per micro-batch held */
    double grad_bytes, weight_bytes; /* the slice's gradients; weights as stored (+ fp32 master) */
    double window_bytes;   /* half precision: the fp32 window one layer's weights are decoded into */
};

/* executor_i.compute's `what`. */
enum { EXECUTOR_FORWARD = 1, EXECUTOR_BACKWARD = 2 };

struct executor;

/* The samples of a run of whole training steps, as executor_stage_steps hands them over. */
struct executor_staged {
    const uint8_t *x;     /* (n · n_max, H, W, C) pixels, step by step */
    const int32_t *y;     /* (n · n_max) labels */
    long first, n;        /* steps first .. first + n − 1 (n = 0: nothing staged) */
};

/* Executors of one device that sum their gradients together (a schedule's replicas), in rank order. */
struct executor_group {
    struct executor *ex;  /* (n) the members, consecutive */
    int n;
    void *state;          /* the device's (communicators, events, pointer tables) */
    void (*release)(struct executor_group *g); /* frees state; set by the device's group_init */
    char how[128];        /* how the group sums, for a backend's description line */
};

struct executor_i {
    const char *name;
    /* required */
    void (*destroy)(struct executor *ex);
    /* A forward and/or backward over p's layer range (what: EXECUTOR_FORWARD | EXECUTOR_BACKWARD, both in
     * one dispatch); a forward through the loss layer sets *loss_sum to Σ per-sample loss. */
    int (*compute)(struct executor *ex, const struct executor_pass *p, int what, double *loss_sum);
    void (*zero_grads)(struct executor *ex);
    /* The update of part `part` of `parts` equal slices of the parameters (0 of 1: all of them). */
    int (*update)(struct executor *ex, long step, int part, int parts);
    int (*get_tensors)(struct executor *ex, enum tensor_family f, float *dst);
    int (*set_tensors)(struct executor *ex, enum tensor_family f, const float *src);
    int (*buffer)(struct executor *ex, enum tensor_family f, struct executor_buffer *b);
    int (*supports)(const struct executor *ex, enum op_kind op);
    /* optional */
    int (*synchronize)(struct executor *ex);
    int (*train_step)(struct executor *ex, const struct executor_pass *p, double *loss_sum);
    void (*finish)(struct executor *ex);
    int (*evaluate)(struct executor *ex, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev);
    int (*stats)(struct executor *ex, struct executor_stats *s);
    /* --trace: phase 0 starts a step's event list at t0; any other appends a whole-step event t0..t1. */
    void (*trace)(struct executor *ex, char phase, double t0, double t1);
    /* Stages (required when cfg.l1 > 0): see executor_import_boundary, executor_export_boundary. */
    size_t (*import_boundary)(struct executor *ex, int grads, const void *src, int n, enum stage_prec prec,
                              float scale);
    size_t (*export_boundary)(struct executor *ex, int grads, int slot, void *dst, int n, enum stage_prec prec,
                              float scale);
    /* Stages, half precision: gradients are stored times `scale` from the next call on. */
    void (*set_grad_scale)(struct executor *ex, float scale);
    /* A device that scales its loss itself (executor_stats' loss_scaling): see executor_restore_loss_scaling. */
    int (*restore_loss_scaling)(struct executor *ex, const char *state);
    /* Re-keys dropout, drop-connect, augmentation and stochastic rounding from the next pass on (a device that
     * keeps its own copy of cfg.seed; without it executor_set_seed refuses): --plan tta's next seed. */
    void (*set_seed)(struct executor *ex, uint64_t seed);
    /* Collectives over executors of this device (optional: a schedule without them sums host copies of
     * the gradients). group_init prepares g over its members (communicators, events) and says how in
     * g->how; allreduce_grads, called by one thread once every member's backward has been issued
     * (the members' own threads wait meanwhile),
     * leaves each member's TF_GRADS the sum over the group in a fixed order (the same bits every run),
     * ordered after each member's earlier work and before its later work. */
    int (*group_init)(struct executor_group *g);
    int (*allreduce_grads)(struct executor_group *g);
    /* Optional: starts copying a later pass's inputs (p->x, p->y, p->n) to the device, so that the copy
     * overlaps the passes before it; that pass then reads the copy. */
    int (*prefetch)(struct executor *ex, const struct executor_pass *p);
    /* Runs of steps, required when the device sets loop_steps (else executor.c's defaults run): see
     * executor_stage_steps and executor_run_steps. */
    int (*stage_steps)(struct executor *ex, const struct executor_staged *sg);
    int (*run_steps)(struct executor *ex, long step, long n, double *loss_sums, long *done);
};

struct executor {
    const struct executor_i *i;
    void *ctx;                  /* the device's private state */
    const struct model *m;
    struct executor_config cfg; /* as planned: device and eval_batch resolved */
    int fused_step;             /* executor_train_step runs n_max-sample steps (set by the device) */
    int loop_steps;             /* executor_run_steps stays on the device, no host round trip a step (set by
                                   the device; it then has stage_steps and run_steps) */
    const char *step_what;      /* how the fused step and runs execute, for the run's description (the
                                   device's words, e.g. "batch-1 step as a CUDA graph"; NULL: nothing said) */
    struct executor_staged staged; /* what executor_stage_steps was last given (read in place by default) */
};

/* A registry entry: device name → constructor (fills ex->i, ex->ctx from ex->m and ex->cfg). */
struct executor_device {
    const char *name;
    const char *summary;
    int (*create)(struct executor *ex);
    /* Optional, for devices that need hardware: TB_OK when one is present, else TB_EUNSUPPORTED with a
     * one-line reason (NULL: always present, as the cpu is). */
    int (*probe)(void);
    /* Optional (device_info.h): the device's facts; its measured ceilings (gemm_n 0: the device's
     * default size; seconds of work); its memory, the allocation high-water mark restarted afterwards
     * when reset. Each TB_OK, or an error with its one-line reason (the probe's where no hardware). */
    int (*info)(struct device_info *d);
    int (*calibrate)(struct device_ceilings *c, int gemm_n);
    int (*memory)(struct device_memory *m, int reset);
    /* Optional: how many instances are present (GPUs); NULL or 0: not counted (the cpu's cores). */
    int (*count)(void);
};

/* The registered devices, in display order; *n receives the count. */
const struct executor_device *executor_devices(int *n);
/* Plans an executor for m on cfg->device (TB_EINVAL with the valid names if unknown); ex is zeroed first. */
int executor_create(struct executor *ex, const struct model *m, const struct executor_config *cfg);
/* Whether device `name` can run here: TB_OK, TB_EUNSUPPORTED with the reason (no hardware present), or
 * TB_EINVAL for a name the registry does not know. */
int executor_device_probe(const char *name);
/* Device `name`'s facts (device_info.h): TB_OK; TB_EUNSUPPORTED when it keeps none or has no hardware here,
 * TB_EINVAL when the registry does not know it; each with its reason. */
int executor_device_info(const char *name, struct device_info *d);
/* Measures device `name`'s ceilings (gemm_n 0: its default), errors as executor_device_info. */
int executor_device_calibrate(const char *name, struct device_ceilings *c, int gemm_n);
/* Device `name`'s memory now; reset restarts the allocation high-water mark at what is held. Errors as
 * executor_device_info. */
int executor_device_memory(const char *name, struct device_memory *m, int reset);
/* True when device `name` keeps memory of its own (a GPU's), not the host's; no probe, no error set. */
int executor_device_own_memory(const char *name);
/* Instances of device `name` present (cuda: GPUs); 0 when the device does not count them (cpu). */
int executor_device_count(const char *name);
/* The kernel choices this process's executors measured (the host executor's convolution algorithms; the
 * cuda device makes none), as bytes another process of the same executable takes with
 * executor_choices_import: writes at most cap bytes into buf and returns the size of them all. */
size_t executor_choices_export(void *buf, size_t cap);
/* Takes choices another process of the same executable exported, over this process's own, for executors
 * created from here on; TB_EINVAL when n is not a whole number of them (nothing taken). Choices this build
 * cannot run are skipped. */
int executor_choices_import(const void *buf, size_t n);
/* Adds a device after the built-in ones (a test's double of a device; at most 4): TB_EINVAL when full
 * or the name is taken. Not thread-safe: register before creating executors. */
int executor_device_register(const struct executor_device *d);
/* Releases everything (safe on a zeroed or failed executor). */
void executor_destroy(struct executor *ex);
/* Forward over p's layers; *loss_sum gets Σ loss when the range ends at the loss layer (else 0). */
int executor_forward(struct executor *ex, const struct executor_pass *p, double *loss_sum);
/* Backward over p's layers (last to first), accumulating parameter gradients. */
int executor_backward(struct executor *ex, const struct executor_pass *p);
/* Forward then backward over p's layers in one dispatch; *loss_sum as executor_forward. */
int executor_forward_backward(struct executor *ex, const struct executor_pass *p, double *loss_sum);
/* Zeroes the gradients. */
void executor_zero_grads(struct executor *ex);
/* One optimizer update of every parameter from the current gradients. */
int executor_update(struct executor *ex, long step);
/* The update of slice `part` of `parts` (tb_slice of n_params): a sharded update's share (not LARS). */
int executor_update_part(struct executor *ex, long step, int part, int parts);
/* Copies a tensor family out in the canonical layout. */
int executor_get_tensors(struct executor *ex, enum tensor_family f, float *dst);
/* Copies a tensor family in from the canonical layout; src NULL with TF_OPT writes the optimizer's
 * initial state (optim_state_init: what create wrote), so a schedule can restart training. */
int executor_set_tensors(struct executor *ex, enum tensor_family f, const float *src);
/* The storage of family f (stable until destroy; its contents current after executor_finish). */
int executor_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b);
/* executor_buffer(TF_GRADS): the summed gradients a schedule all-reduces. */
int executor_grad_buffer(struct executor *ex, struct executor_buffer *b);
/* Waits for the device's outstanding work (a no-op for synchronous devices). */
int executor_synchronize(struct executor *ex);
/* True when the device can run layers of kind op. */
int executor_supports(const struct executor *ex, enum op_kind op);
/* One whole training step of p->n = n_max samples with the update fused in (only when ex->fused_step);
 * the update may be deferred to the next call or executor_finish. Bitwise zero + fb + update. */
int executor_train_step(struct executor *ex, const struct executor_pass *p, double *loss_sum);
/* One whole training step of p->n = n_max samples: the fused step where the device has one (ex->fused_step),
 * else zero + forward/backward + update (bitwise the same). */
int executor_step(struct executor *ex, const struct executor_pass *p, double *loss_sum);
/* Hands over the samples of steps first .. first + n − 1 (n · n_max of them, step by step) for
 * executor_run_steps. x and y stay the caller's and must stay valid until the next stage call: the default
 * reads them in place; a device with loop_steps copies them to its memory once, here. */
int executor_stage_steps(struct executor *ex, long first, long n, const uint8_t *x, const int32_t *y);
/* Runs staged steps step .. step + n − 1, bitwise n executor_step calls on their samples: loss_sums[j] gets
 * step + j's Σ loss, *done the steps completed (on a failure, step + *done failed and loss_sums[*done] holds
 * its loss where it has one). With loop_steps the steps run without a host round trip per step and the
 * losses come back in one copy. Deferred work of the last step stays deferred (executor_finish). */
int executor_run_steps(struct executor *ex, long step, long n, double *loss_sums, long *done);
/* Applies work an earlier call deferred (the fused step's update); a no-op when there is none. */
void executor_finish(struct executor *ex);
/* Evaluates n samples in chunks of cfg.eval_batch, adding to ev (TB_EUNSUPPORTED if the device cannot). */
int executor_evaluate(struct executor *ex, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev);
/* Fills s with what the executor recorded (all NULL when the device keeps nothing). */
int executor_stats(struct executor *ex, struct executor_stats *s);
/* --trace: starts the step's event list at CLOCK_MONOTONIC time t0 (no-op unless cfg.trace). */
void executor_trace_begin(struct executor *ex, double t0);
/* --trace: appends a whole-step event (phase 'A', 'U', 'W') from t0 to t1 (no-op unless cfg.trace). */
void executor_trace_add(struct executor *ex, char phase, double t0, double t1);

/* Stages: takes n samples of the tensors crossing the stage's first split (grads = 0: activations, for
 * the next forward) or its last split (grads = 1: their gradients, for the next backward), packed
 * (model_boundary_floats' layout) in precision prec, times scale; returns how many values are not
 * finite. src must stay valid until that pass has run (a device may read it in place). */
size_t executor_import_boundary(struct executor *ex, int grads, const void *src, int n, enum stage_prec prec,
                                float scale);
/* Stages: packs into dst, in precision prec times scale, the activations crossing the last split that
 * slot's forward left (grads = 0; valid until the next forward) or the gradients crossing the first
 * split that the last backward left (grads = 1); returns how many packed values are not finite. */
size_t executor_export_boundary(struct executor *ex, int grads, int slot, void *dst, int n, enum stage_prec prec,
                                float scale);
/* Stages, half precision: stores gradients times scale (fp16's loss scale) from the next call on. */
void executor_set_grad_scale(struct executor *ex, float scale);
/* --resume: puts back the loss scaler's state (loss_scaler_format's text) on a device that scales its loss
 * itself (cuda fp16); TB_OK on one that does not; TB_EFORMAT for a bad state. */
int executor_restore_loss_scaling(struct executor *ex, const char *state);
/* The seed that keys the executor's randomness from the next pass on, as if it had been created with it;
 * TB_EUNSUPPORTED when its device cannot change it. */
int executor_set_seed(struct executor *ex, uint64_t seed);
/* Prepares a gradient collective over ex[0..n) (created executors of one device): TB_EUNSUPPORTED with
 * the reason when the device has none, or none for this arrangement (the schedule then sums host copies). */
int executor_group_init(struct executor_group *g, struct executor *ex, int n);
/* Sums TF_GRADS over the group into every member in a fixed order (executor_synchronize waits for it). */
int executor_group_allreduce_grads(struct executor_group *g);
/* Releases what executor_group_init prepared (safe on a zeroed or failed group). */
void executor_group_free(struct executor_group *g);
/* Starts copying the inputs of a later pass (p->x, p->y, p->n: unchanged until that pass) to the device;
 * a no-op where the device reads host memory in place (cpu) or stages its own (a fused step). */
int executor_prefetch(struct executor *ex, const struct executor_pass *p);
/* How many passes ahead executor_prefetch copies on this executor (cfg.prefetch, or 0 where it copies
 * nothing). */
int executor_prefetches(const struct executor *ex);
/* Bytes of host memory available now (0 when unknown): what an executor's estimate is checked against. */
double executor_host_mem_available(void);
/* Bytes of host memory in all (TB_MEM_AVAILABLE when set, else the physical pages; 8 GiB when unknown). */
double executor_host_mem_total(void);

/* Constructors (one per device file). */
int executor_cpu_create(struct executor *ex);
/* The cpu device's stage executor (executor_cpu_create's when cfg.l1 > 0; executor_cpu_stage.c). */
int executor_cpu_stage_create(struct executor *ex);
/* The cuda device (cuda/executor_cuda.c, built with TB_HAVE_CUDA): TB_EUNSUPPORTED where no GPU is present. */
int executor_cuda_create(struct executor *ex);
/* The cuda device's probe: TB_OK when cudaGetDeviceCount finds a GPU, else TB_EUNSUPPORTED with why. */
int executor_cuda_probe(void);
/* The cuda device's facts: GPU 0's name, driver and runtime versions, memory, compute capability. */
int executor_cuda_info(struct device_info *d);
/* The cuda device's ceilings: cuBLAS fp32/TF32/bf16 GEMM and device-to-device copy (cuda/calibrate_cuda.c). */
int executor_cuda_calibrate(struct device_ceilings *c, int gemm_n);
/* The cuda device's memory: the executors' own accounting and cudaMemGetInfo. */
int executor_cuda_memory(struct device_memory *m, int reset);
/* The GPUs cudaGetDeviceCount finds (0 when it fails). */
int executor_cuda_count(void);

#endif
