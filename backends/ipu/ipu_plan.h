/* ipu_plan.h — planning for the ipu (pipelined, replicated) backend: turning a run_config into
 * stages × replicas × micro-batches × gradient accumulation, choosing split points at block boundaries
 * (given, or balanced on measured per-layer times), the per-stage op order of the gpipe and 1f1b
 * schedules, recomputation segments, and a stage's (or any layer range's) own activation plan.
 *
 * Pure planning: no threads, no kernels, no allocation beyond a stage plan's tensor table and scratch.
 * Errors are TB_EINVAL with a one-line message naming the option and the fault.
 */
#ifndef TB_IPU_PLAN_H
#define TB_IPU_PLAN_H

#include "backend.h"
#include "stage_precision.h"
#include "model.h"

#define IPU_MAX_STAGES 64

enum ipu_schedule { IPU_SCHED_1F1B, IPU_SCHED_GPIPE };

/* One entry of a stage's op order. */
struct ipu_op {
    int fwd; /* 1 forward, 0 backward */
    int mb;  /* micro-batch index 0..G-1 */
};

struct ipu_plan {
    int S, R, G, B;          /* stages, replicas, micro-batches per step (GA), samples per micro-batch */
    enum ipu_schedule sched;
    enum stage_prec prec;      /* weight and exchange storage */
    int master;              /* fp32 master weights in the optimizer (precision bf16m / fp16m) */
    int recompute;           /* keep only segment-boundary checkpoints; recompute segments in backward */
    int mb_chosen;           /* micro-batch and GA were ours: 1 the pipeline's least GA, 2 more to fit memory */
    int recompute_chosen;    /* recompute was ours: the devices would not fit without it */
    float loss_scale;        /* fp16: static loss scale, 0 = dynamic */
    int prefetch;            /* micro-batches the infeed worker runs ahead (0 = off) */
    int split_given;         /* split points came from run_config.split */
    int first_block[IPU_MAX_STAGES + 1]; /* stage s: blocks [first_block[s], first_block[s+1]) */
    int l0[IPU_MAX_STAGES + 1];          /* stage s: layers [l0[s], l0[s+1]) */
};

/* Validates cfg against model m and fills p: schedule, precision, S, R, G, B (defaults when not given:
 * S = 2, R = 1, the smallest legal G ≥ 2S dividing batch/R whose micro-batch's activations fit in a
 * third of executor_host_mem_total), split points when given (else an even split by block count, to be
 * replaced by ipu_plan_balance). TB_EINVAL with a message on any fault. */
int ipu_plan_resolve(struct ipu_plan *p, const struct model *m, const struct run_config *cfg);
/* Fills p->l0 from p->first_block (the first layer of each stage's first block). */
void ipu_plan_set_layers(struct ipu_plan *p, const struct model *m);
/* Chooses split points minimising the slowest stage, from per-layer forward and backward seconds
 * t_fwd, t_bwd (n_layers); with recompute every stage also pays its forward again. */
void ipu_plan_balance(struct ipu_plan *p, const struct model *m, const double *t_fwd, const double *t_bwd);
/* Writes stage s's op order (2·G entries) into ops; returns the count. The last stage always runs a
 * micro-batch's backward right after its forward (its loss gradient is seeded in the forward). */
int ipu_plan_ops(const struct ipu_plan *p, int s, struct ipu_op *ops);
/* Most micro-batches stage s holds between forward and backward under the schedule. */
int ipu_plan_in_flight(const struct ipu_plan *p, int s);
/* Message buffers per exchange queue that make a push never wait on a full queue in this schedule. */
int ipu_plan_queue_depth(const struct ipu_plan *p);
/* The ideal bubble fraction (S−1)/(G+S−1). */
double ipu_plan_ideal_bubble(const struct ipu_plan *p);
/* "gpipe" or "1f1b". */
const char *ipu_schedule_name(enum ipu_schedule s);

/* Recomputation checkpoints: cuts stage s at block boundaries into K segments, layers
 * [cuts[k], cuts[k+1]), writing K+1 cuts (room for one more than the stage's blocks) and returning K.
 * Minimises the stage's activation peak: two segment-sized buffers (activations, gradients) plus the
 * boundary checkpoints of every micro-batch the schedule holds at once. */
int ipu_plan_segments(const struct ipu_plan *p, const struct model *m, int s, int *cuts);
/* Half-precision storage without recomputation: cuts stage s into one segment per block (each stored
 * whole, 2 bytes a value, per micro-batch in flight; the fp32 working slot only needs the largest
 * block). Writes K+1 cuts (room for one more than the stage's blocks) and returns K. */
int ipu_plan_block_segments(const struct ipu_plan *p, const struct model *m, int s, int *cuts);
/* Activation floats a plan of layers [l0,l1) needs for n samples (what ipu_stage_model_init would
 * give); work is scratch of m->n_tensors bytes. */
size_t ipu_plan_range_act_floats(const struct model *m, int l0, int l1, int n, char *work);

/* A stage's own activation plan: a copy of the model whose tensor table gives offsets only to the
 * tensors stage [l0,l1) touches (its outputs, inputs, saved data, boundary tensors), so an activation
 * slot holds just the stage. Layers and the parameter table are shared with the source, read-only. */
struct ipu_stage_model {
    struct model m;
};

/* Builds the stage plan of layers [l0,l1) of src. */
int ipu_stage_model_init(struct ipu_stage_model *sm, const struct model *src, int l0, int l1);
/* Frees the stage plan's tensor table. */
void ipu_stage_model_free(struct ipu_stage_model *sm);
/* First parameter (buffers = 0) or buffer (buffers = 1) offset owned by a layer ≥ split; the family's size
 * when none. TB_ASSERTs the table is in layer order (model_add_param follows model_add_layer). */
size_t ipu_plan_first_offset(const struct model *m, int split, int buffers);

#endif
