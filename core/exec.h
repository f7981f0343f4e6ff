/* exec.h — runs a model's forward and backward passes over a range of layers.
 *
 * The executor is the one sequential schedule every backend shares: it walks layers in order and
 * calls the kernels with a thread slice. How slices map to threads is the caller's: exec_forward and
 * exec_backward are themselves (ith, nth) tasks with barriers between dependent phases, run by the
 * cpu backend with nth = 1 and by the threads backend on its pool. Nothing here allocates in the step.
 */
#ifndef TB_EXEC_H
#define TB_EXEC_H

#include "model.h"
#include "op_conv.h"
#include "optim.h"

#include <stdint.h>

/* Synchronisation the executor needs from whoever runs it with nth > 1. */
struct exec_sync {
    void (*barrier)(void *ctx); /* all nth threads wait here; NULL when nth == 1 */
    void *ctx;
};

/* Cross-replica collectives the executor may call in the middle of a pass (sync BatchNorm). Called by
 * thread 0 of the replica only (replicas that use them run with nth = 1). */
struct exec_collective {
    /* In-place sum of n doubles over all replicas, identical result on every replica. */
    void (*allreduce_f64)(void *ctx, double *buf, size_t n);
    void *ctx;
    size_t m_total_factor; /* global samples ÷ this replica's samples (BatchNorm's M_total) */
};

/* --trace: one layer's forward or backward (layer ≥ 0) or a whole-step phase (layer −1: 'A' all-reduce,
 * 'U' update, 'W' waiting for other devices), in seconds since the recorder's t0. */
struct exec_trace_event {
    int layer, micro_batch; /* micro_batch −1: the step has none */
    char phase;             /* 'F' forward, 'B' backward, or a whole-step phase */
    double t0, t1;
};

/* --trace: an append-only list of one device's events for one step. The engine that owns it sets t0 and
 * n = 0 when a step starts; exec_forward/exec_backward append one event per layer from thread 0's clock
 * (barrier waits included, as the --profile sums count them). Events past cap are counted, not kept. */
struct exec_trace {
    double t0;                   /* CLOCK_MONOTONIC seconds of the step's start */
    int micro_batch;             /* stamped on the events appended next (−1: none) */
    struct exec_trace_event *ev; /* (cap) owned by the engine */
    int n, cap;
    long dropped;
};

/* One forward/backward over a slice of the global batch. */
struct exec_step {
    int n;              /* samples in this slice (≤ n_max) */
    int n_global;       /* samples in the global batch: the loss gradient is seeded with 1/n_global */
    long first_index;   /* position of sample 0 of this slice within the global batch */
    long step;          /* 1-based optimizer step: keys dropout, drop-connect, augmentation */
    uint64_t seed;
    int training;       /* batch statistics, dropout, augmentation, gradients */
    const uint8_t *x;   /* (n,H,W,C) input pixels */
    const int32_t *y;   /* (n) labels */
    int l0, l1;         /* layer range [l0,l1); 0 and n_layers for a whole model */
    /* Pipeline stages. in_act: when non-NULL, the activations of every tensor crossing the split before
     * l0 (exec_boundary_tensors order, each n·per_sample floats at a 16-float-aligned offset), copied
     * into their slots before layer l0 runs. out_dact: when non-NULL, the gradients of the tensors
     * crossing the split before l1 that need one (same packing), copied into their gradient slots
     * before the backward starts; readers inside [l0,l1) then accumulate onto them. */
    const float *in_act;
    const float *out_dact;
    int no_stats_update;   /* BatchNorm: do not update running statistics (recomputation) */
    const struct exec_collective *coll; /* non-NULL: BatchNorm statistics are global (sync BN) */
    int defer_dense_params; /* skip dense backward-params: exec_update_fused applies them (batch 1) */
    /* Batch-1 fused Adam (exec_can_fuse_update): when optim is non-NULL, every dense layer first applies
     * the previous step's deferred update (gradient pending_in ⊗ its output gradient, which nothing has
     * overwritten since) and computes its output from the updated weights in the same pass over them,
     * on all threads. The pass reads each weight once per step instead of twice. */
    const struct optim_config *optim;
    float pending_alpha;     /* that update's step size (optim_adam_alpha of its step) */
    const float *pending_in; /* the dense layers' inputs at that step (exec_save_dense_inputs) */
    struct exec_trace *trace; /* --trace: thread 0 appends each layer's interval here (NULL = off) */
};

/* Forward pass over layers [l0,l1) for thread ith of nth; the loss layer also seeds dlogits when training. */
void exec_forward(const struct model_inst *mi, const struct exec_step *st, int ith, int nth,
                  const struct exec_sync *sync);
/* Backward pass over layers [l1-1 .. l0], accumulating parameter gradients into mi->grads (writing them
 * where mi->pfirst marks the layer; thread 0 then marks it in mi->pwrote). */
void exec_backward(const struct model_inst *mi, const struct exec_step *st, int ith, int nth,
                   const struct exec_sync *sync);
/* Whether layer li's backward can write its parameter gradients rather than add to them (a dense layer, or
 * a convolution prepared on GEMM1X1): where mi->pfirst marks it, its gradients need no zeroing first. */
int exec_params_first_write(const struct model_inst *mi, int li);
/* The units an engine configured with par_units (executor_config.par_units) cuts its work for: par_units, or 0
 * (the machine's) under TB_REPLICA_CUT=0, the A/B of the replicas' one-core cut. */
int exec_units(int par_units);
/* Tensors crossing a pipeline split placed before layer `split` (produced before it, read at or after
 * it; never the uint8 input), in ascending id order: writes up to max_ids ids, returns the count. */
int exec_boundary_tensors(const struct model *m, int split, int *ids, int max_ids);
/* Floats of a packed boundary buffer (in_act / out_dact layout) for n samples at `split`; grads = 1
 * counts only the tensors that need a gradient. */
size_t exec_boundary_floats(const struct model *m, int split, int n, int grads);
/* Sum of per-sample losses of the last forward, in sample order (independent of nth). */
double exec_loss_sum(const struct model_inst *mi, int n);
/* Number of correct predictions of the last forward. */
int exec_correct_count(const struct model_inst *mi, int n);
/* Copies the last forward's (n, classes) logits, the loss layer's input, into dst. */
void exec_logits_copy(const struct model_inst *mi, int n, float *dst);
/* True when one step of n samples under c can fuse dense gradients into the update (batch 1, Adam,
 * every weight in a dense layer). */
int exec_can_fuse_update(const struct model *m, int n, const struct optim_config *c);
/* The fused update of `step` after a backward with defer_dense_params: Adam on every dense layer with
 * the outer-product gradient (inputs from exec_save_dense_inputs) computed on the fly. Partitioned over
 * chunks of weight rows. */
void exec_update_fused(const struct model_inst *mi, const struct optim_config *c, long step, const float *in,
                       int ith, int nth);
/* Floats of exec_save_dense_inputs' copy: the dense layers' input widths (batch 1). */
size_t exec_dense_inputs_floats(const struct model *m);
/* Copies every dense layer's input activation (batch 1) into dst, in layer order (thread 0's work). */
void exec_save_dense_inputs(const struct model_inst *mi, float *dst);
/* True when m is a dense chain exec_dense1_step runs: the flat grey input (no augmentation), dense layers
 * each reading the one before (ReLU or none; none on the last), softmax cross-entropy. */
int exec_dense1_chain(const struct model *m);
/* Floats of the shared buffer exec_dense1_step needs (every dense layer's chunk sums at once). */
size_t exec_dense1_shared_floats(const struct model *m);
/* Floats of each thread's scratch exec_dense1_step needs (the loss's copies on threads > 0). */
size_t exec_dense1_scratch_floats(const struct model *m);
/* One fused batch-1 training step of a dense chain (exec_dense1_chain; prepared with n_max 1) as thread
 * ith of nth: bitwise exec_forward + exec_backward with defer_dense_params and st->optim's deferred
 * update, then exec_save_dense_inputs into pending_in, with one barrier a layer (exec_dense1.c). */
void exec_dense1_step(const struct model_inst *mi, const struct exec_step *st, float *pending_in, int ith, int nth,
                      const struct exec_sync *sync);
/* How the engine runs a task on its threads (for preparation work such as autotuning). */
struct exec_runner {
    void (*run)(void *ctx, void (*fn)(void *arg, int ith, int nth), void *arg);
    void (*barrier)(void *ctx);
    void *ctx;
    int nth;
};
/* Prepares instance mi: each convolution's algorithm (algo_name forces one where the shape supports it;
 * "auto" measures every supported one once per shape and thread count, cached process-wide; tune_from,
 * if non-NULL, copies another instance's choices), FFT plans, per-thread scratch and the shared partial-sum buffer. */
int exec_prepare(struct model_inst *mi, const struct exec_runner *r, const char *algo_name,
                 const struct model_inst *tune_from);
/* Frees what exec_prepare made. */
void exec_release(struct model_inst *mi);
/* Makes dst run on src's prepared state (algorithms, plans, scratch, shared sums) without owning it. */
void exec_share_prepared(struct model_inst *dst, const struct model_inst *src);
/* Writes each layer's convolution algorithm (enum conv_algo, -1 if none) into algos (n_layers). */
void exec_algos(const struct model_inst *mi, int *algos);
/* Names of enum conv_algo values. */
extern const char *const exec_conv_algo_names[];
/* One choice of the process-wide autotuning cache: a convolution's shape, the pool's threads, the backward
 * passes timed with it (data: 1 when the input needs a gradient, + 2 when the backward overwrites it) and the
 * algorithm (enum conv_algo) that won. */
struct exec_tune_entry {
    struct conv_shape s;
    int nth, data, algo;
};
/* The most entries the cache holds (a file or another process may offer more; the rest are timed). */
#define EXEC_TUNE_MAX 512
/* Copies up to cap of the cache's entries into out (in the order they were added; nothing when out is NULL);
 * returns how many it holds. */
int exec_tune_entries(struct exec_tune_entry *out, int cap);
/* Adds a choice measured before (a tuning file, another MPI rank), so that exec_prepare takes it instead of
 * timing the shape; where the key is cached already, replace says whether e's algorithm takes its place.
 * TB_EINVAL when the algorithm cannot run the shape or a field is out of range (nothing changed). */
int exec_tune_add(const struct exec_tune_entry *e, int replace);
/* How many of the cache's entries this process measured (the rest were added). */
int exec_tune_measured(void);
/* Appends an event from t0_abs..t1_abs, absolute tb_now_s() seconds (clock.h); no-op when tr is NULL. */
void exec_trace_add(struct exec_trace *tr, int layer, char phase, double t0_abs, double t1_abs);
/* Float pointer to tensor t's activations in instance mi. */
float *exec_act(const struct model_inst *mi, int t);
/* Float pointer to tensor t's activation gradients in instance mi. */
float *exec_dact(const struct model_inst *mi, int t);

#endif
