/* ipu_priv.h — private to the ipu engine's files (backends/ipu/): the engine context (struct ipu_ctx),
 * one device (struct ipu_dev: stage s of replica r) with its segments and weight chunks, the exchange's
 * message header, the small inline helpers, and the functions one file of the engine calls in another.
 * Not an interface: backend.h's backend_ipu_create is. See ipu_backend.c for the design.
 */
#ifndef TB_IPU_PRIV_H
#define TB_IPU_PRIV_H

#include "backend.h"
#include "executor.h"
#include "ipu_plan.h"
#include "ipu_queue.h"
#include "loss_scale.h"
#include "pipeline_report.h"
#include "status.h"
#include "tpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define MSG_HDR 64               /* bytes of a message header */

struct ipu_ctx;

/* What leads every exchange message; labels (B int32) follow at MSG_HDR, the payload after them. */
struct msg_hdr {
    int mb, n;
    long first_index;
};

/* One timeline record: what a device did for which micro-batch, in seconds since the step began. */
struct ipu_event {
    int mb;
    char kind; /* F forward, B backward, R recompute, A all-reduce, U update */
    double t0, t1;
};

enum { MODE_TRAIN, MODE_UPDATE, MODE_EVAL };

/* One device: stage s of replica r — a stage executor (layers [l0,l1), their parameter slice, slots or
 * segments, storage precision) and what the schedule keeps around it. */
struct ipu_dev {
    struct ipu_ctx *c;
    int s, r;
    int l0, l1;                       /* layers [l0,l1) */
    struct executor ex;               /* the stage executor (core/executor_cpu_stage.c on cpu) */
    struct executor_buffer gbuf;      /* its gradient slice, for the replicas' ring (fp32 or 2-byte) */
    float *host_grads;                /* (gbuf.off + gbuf.n) canonical-layout host copy of the slice the ring
                                         sums when gbuf is off the host (a GPU's), else NULL */
    int n_slots;                      /* activation slots: micro-batches in flight */
    int n_seg;                        /* segments the stage runs as (0: whole-stage slots) */
    struct ipu_queue *act_in, *act_out, *grad_in, *grad_out, *infeed; /* NULL where there is none */
    struct ipu_op *ops;               /* (2G) this stage's op order */
    int n_ops;
    /* this step */
    double t_compute, t_exchange, t_wait, t_allreduce, t_update, t_end;
    double bytes;                     /* payload bytes this device pushed into the exchange */
    int in_use, peak_in_use;          /* activation slots (or stashes) holding a micro-batch */
    double loss;
    long correct, n_done;
    struct ipu_event *ev;
    int n_ev, cap_ev;
    double t_fwd, t_bwd;              /* this step's forward and backward (+ recompute) seconds */
    /* since prepare (steps after the first, once there are two) */
    int peak_in_use_all;
    double sum_compute, sum_exchange, sum_idle, sum_allreduce, sum_fwd, sum_bwd;
};

struct ipu_ctx {
    struct ipu_plan p;
    int half;                         /* bf16/fp16: activations are stored in 2 bytes (segments) */
    int segmented;                    /* stages run as segments: recompute or half storage */
    const struct model *m;
    struct run_config cfg;
    int D;                            /* devices S·R, device d = r·S + s */
    struct ipu_dev *dev;              /* (D) */
    struct ipu_queue *q_act, *q_grad; /* (R·(S−1)) boundary s of replica r at r·(S−1) + s */
    struct ipu_queue *q_in;           /* (R) infeed, when prefetching */
    struct tpool_barrier *bar;        /* (S) the R replicas of stage s (the gradient all-reduce) */
    float **gbufs;                    /* (S·R) the gradient slice of (s, r) at s·R + r, for the ring */
    uint16_t **gbufs16;               /* (S·R) half precision: its 2-byte gradients, likewise */
    struct tpool *pool;               /* D pinned workers (NULL when D = 1) */
    size_t per_in;                    /* uint8 bytes of one input sample */
    size_t labels_bytes;              /* B int32 labels rounded up to 64 */
    /* the job in flight */
    int mode;
    const struct batch *batch;
    float *eval_logits;               /* MODE_EVAL: the caller's (batch n, classes) logits, or NULL */
    long step;
    int do_update;
    double t0;
    _Atomic int overflow;             /* fp16: a gradient overflowed in the exchange this step */
    _Atomic int dev_err;              /* the job's first failed executor call's status (ipu_dev_fail), or 0 */
    char dev_err_msg[256];            /* its message, written by the device that failed first */
    int overflowed;                   /* the last forward_backward overflowed (its update is skipped) */
    struct loss_scaler ls;            /* fp16: the loss scale and its policy (scale 1 otherwise) */
    /* infeed worker */
    pthread_t pf_th;
    int pf_started, pf_stop;
    pthread_mutex_t pf_mu;
    pthread_cond_t pf_cv;
    long pf_gen, pf_done;
    const struct batch *pf_batch;
    /* accounting since prepare: the timed steps where the harness says which they are (backend_count_steps),
     * else the steps after the first (the first pays page faults and warm-up) */
    double sum_span, sum_busy;        /* Σ devices × pipeline span; Σ compute + exchange */
    long n_steps;                     /* training steps run */
    long n_counted;                   /* steps in the sums */
    int told;                         /* backend_count_steps was called: timed says which steps count */
    int timed;                        /* the steps that follow are timed */
    int counted_timed;                /* the sums hold timed steps (so no warm-up step joins them) */
    double t_measure;                 /* seconds spent timing layers for the split */
    struct timeline_event *tl;        /* (cap_tl) the last training step's events: evaluation resets v->ev */
    int n_tl, cap_tl;
    long tl_step;                     /* the step tl and dstep hold (0: none yet) */
    struct device_step *dstep;        /* (D) the last training step per device */
    struct pipeline_report rep;       /* backend_stats' view, refilled on each query */
    double *prof_all;                 /* --profile: (n_layers, 2) backend_stats' view, all stages */
    int *algos_all;                   /* (n_layers) backend_stats' convolution algorithms, all stages */
    int *cuts;                        /* (n_blocks + 2) scratch: a stage's segment cuts at prepare */
};

static inline void ev_add(struct ipu_dev *v, int mb, char kind, double t0, double t1)
{
    if (v->n_ev < v->cap_ev) v->ev[v->n_ev++] = (struct ipu_event){mb, kind, t0 - v->c->t0, t1 - v->c->t0};
}

static inline struct ipu_dev *dev_at(struct ipu_ctx *c, int s, int r) { return &c->dev[r * c->p.S + s]; }

static inline int32_t *msg_labels(const void *msg) { return (int32_t *)((char *)msg + MSG_HDR); }

static inline void *msg_payload(const struct ipu_ctx *c, const void *msg)
{
    return (char *)msg + MSG_HDR + c->labels_bytes;
}

/* Scale of the 2-byte gradients: fp16 keeps them times the loss scale so that small ones survive. */
static inline float grad_scale(const struct ipu_ctx *c) { return c->p.prec == STAGE_PREC_FP16 ? c->ls.scale : 1.0f; }

/* ---- ipu_stage.c ---- */

/* Builds device v = stage s of replica r: its stage executor, queue ends and op order. */
int ipu_dev_init(struct ipu_ctx *c, struct ipu_dev *v, int s, int r);
/* Frees everything device v holds and zeroes it (safe on a partly built device). */
void ipu_dev_free(struct ipu_dev *v);
/* Activation bytes stage s uses (replica 0), with the micro-batches it held at once (measured). */
double ipu_stage_act_bytes(const struct ipu_ctx *c, int s);
/* Sets the 2-byte gradients' scale (fp16: the loss scale) on every device's executor. */
void ipu_set_grad_scale(struct ipu_ctx *c);

/* ---- ipu_exchange.c ---- */

/* Sends the boundary activations slot's forward left (micro-batch mb, n samples from first, labels y)
 * to the next stage. */
void ipu_push_acts(struct ipu_dev *v, int slot, int mb, int n, long first, const int32_t *y);
/* Sends micro-batch mb's boundary gradients the last backward left to the previous stage (fp16: times
 * the loss scale). */
void ipu_push_grads(struct ipu_dev *v, int mb, int n, long first);
/* Receives the next activation message and imports it into v's executor (release with the queue). */
const void *ipu_pop_acts(struct ipu_dev *v, int n);
/* Receives the next gradient message and imports it into v's executor; flags an fp16 overflow. */
const void *ipu_pop_grads(struct ipu_dev *v, int n);
/* The infeed thread's main loop (arg: the ipu_ctx). */
void *ipu_infeed_main(void *arg);
/* Hands batch b to the infeed thread for this step. */
void ipu_infeed_start_step(struct ipu_ctx *c, const struct batch *b);
/* Waits until the infeed thread has queued the whole step. */
void ipu_infeed_wait_step(struct ipu_ctx *c);

/* ---- ipu_schedule.c ---- */

/* Runs the job in c->mode on every device (the caller is device 0) and returns when all are done. */
void ipu_run_devices(struct ipu_ctx *c);

/* ---- ipu_replicas.c ---- */

/* All-reduces device v's gradient slice over its stage's replicas (timed as 'A'). */
void ipu_allreduce_grads(struct ipu_dev *v);
/* Records st (unless TB_OK, or TB_EDIVERGED: a non-finite loss, which the step's loss check reports) as the
 * job's failure when it is the first: the job runs on, every device keeping its place in the queues and
 * rings, and ipu_job_status fails the step after. */
void ipu_dev_fail(struct ipu_ctx *c, int st);
/* Starts a job's failure record (before ipu_run_devices). */
void ipu_job_begin(struct ipu_ctx *c);
/* TB_OK, or the job's first failure with its message (after ipu_run_devices). */
int ipu_job_status(struct ipu_ctx *c);
/* Device v's optimizer update of its slice, unless a gradient overflowed (timed as 'U'). */
void ipu_dev_update(struct ipu_dev *v);
/* fp16: counts a skipped step and adjusts a dynamic loss scale; TB_EDIVERGED after too many in a row. */
int ipu_loss_scale_after_update(struct ipu_ctx *c, struct step_stats *st);

/* ---- ipu_prepare.c ---- */

/* backend_i.prepare: plans, tunes, times, and builds the devices, queues and workers. */
int ipu_prepare(struct backend *b, const struct model *m, const struct run_config *cfg);

#endif
