/* executor_cpu.h — the cpu device behind executor.h: one model instance in host memory, its kernels run by
 * the shared schedule (exec.h) on 1..threads pinned threads. Its state keeps the name `struct
 * local_engine` and its direct entry points the local_engine_ prefix: white-box tests reach into the
 * instances (exec_forward on e->train, e->params), and backends/local_engine.h plans one from a
 * run_config for them. Schedules use executor.h only.
 *
 * Owns its arenas (params, grads, optimizer state, buffers, training and evaluation activations) and,
 * when threads > 1, a thread pool. Calls are not reentrant: one caller drives an engine at a time.
 */
#ifndef TB_EXECUTOR_CPU_H
#define TB_EXECUTOR_CPU_H

#include "exec.h"
#include "executor.h"
#include "tpool.h"

/* A span of floats in an arena. */
struct grad_span {
    size_t off, n;
};

struct local_engine {
    const struct model *m;
    struct executor_config cfg;
    struct model_inst train, eval; /* share params and buffers; separate activations */
    float *params, *grads, *opt, *buffers;
    struct optim_segment *segs;
    int n_segs;
    float *trust;                  /* LARS: per-segment trust ratios */
    struct tpool *pool;            /* NULL when nth == 1 */
    int nth;
    int fuse;                      /* train steps may use the fused dense-gradient update */
    int dense1;                    /* fused steps of a dense chain run exec_dense1_step */
    long pending;                  /* fuse: the step whose update waits for the next forward (0: none) */
    float *pending_in;             /* fuse: that step's dense-layer inputs (exec_save_dense_inputs) */
    int *algos;                    /* (n_layers) each layer's enum conv_algo (-1 none), for executor_stats */
    double claimed;                /* bytes this engine counted against the process's memory budget */
    struct exec_trace trace;       /* --trace: the current (or last) training step's events; ev NULL = off */
    double *busy_sum;              /* --profile with threads: (n_layers, 2) work seconds summed over the
                                      pool's threads, then (n_layers, 2) the busiest thread's, refreshed
                                      from train.prof_busy by executor_stats */
    struct grad_span *zspans;      /* the gradient spans zero_grads zeroes when train.pfirst leaves the rest
                                      to the layers' first backward (executor_cpu.c) */
    int n_zspans;
    size_t zfloats;                /* floats in them */
    uint8_t *pcap;                 /* (n_layers) the layers zero_grads marks in train.pfirst instead */
};

/* Plans and allocates an engine for m under cfg (cfg->n_max training samples per pass, cfg->threads
 * threads: a pinned pool when > 1); frees what it made on failure. */
int local_engine_create(struct local_engine *e, const struct model *m, const struct executor_config *cfg);
/* Frees everything (safe on a zeroed engine). */
void local_engine_free(struct local_engine *e);
/* Zeroes the gradients (partitioned over the engine's threads), or marks them for the next backward pass to
 * write (the lazy zeroing: executor_cpu.c; the other entry points see zeros either way). */
void local_engine_zero_grads(struct local_engine *e);
/* Forward and/or backward (executor_i.compute's what) of st over the engine's threads; st->coll and
 * st->trace as the caller sets them. Sets *loss_sum from a forward through the loss layer (else 0). */
int local_engine_pass(struct local_engine *e, const struct exec_step *st, int what, double *loss_sum);
/* Forward + backward of n samples (pixels x (n,H,W,C), labels y (n)) at global position first_index of a
 * global batch of n_global; ACCUMULATES into the gradients; returns the summed loss in *loss_sum. */
int local_engine_forward_backward(struct local_engine *e, const uint8_t *x, const int32_t *y, int n,
                                  long first_index, int n_global, long step, double *loss_sum);
/* A whole training step of n = n_max samples with the dense gradients fused into the update (only
 * when e->fuse). The update is deferred: the next fused step applies it inside its forward, which
 * then reads each weight once, and local_engine_finish (called by every other entry point) applies
 * it otherwise. Same result, bitwise, as zero_grads + forward_backward + update. */
int local_engine_train_step_fused(struct local_engine *e, const uint8_t *x, const int32_t *y, int n, long step,
                                  double *loss_sum);
/* Applies a deferred fused update, if one is pending (with --trace, recorded as a 'U' event). */
void local_engine_finish(struct local_engine *e);
/* One optimizer update from the current gradients (with --trace, recorded as the step's 'U' event). */
void local_engine_update(struct local_engine *e, long step);
/* The update of part `part` of `parts` equal slices of the parameters (tb_slice), on the calling
 * thread: a sharded update's share (not LARS, whose trust ratios need whole tensors). */
void local_engine_update_part(struct local_engine *e, long step, int part, int parts);
/* Evaluates n samples in chunks of cfg.eval_batch; adds to ev. */
int local_engine_evaluate(struct local_engine *e, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev);
/* --trace: starts a step's event list at CLOCK_MONOTONIC time t0 (no-op when tracing is off). */
void local_engine_trace_begin(struct local_engine *e, double t0);
/* Canonical pointer and size of a tensor family (applies a deferred update first). */
float *local_engine_family(struct local_engine *e, enum tensor_family f, size_t *n);

#endif
