/* ipu_priv.h — private to the ipu engine's files (backends/ipu/): the engine context (struct ipu_ctx),
 * one device (struct ipu_dev: stage s of replica r) with its segments and weight chunks, the exchange's
 * message header, the small inline helpers, and the functions one file of the engine calls in another.
 * Not an interface: backend.h's backend_ipu_create is. See ipu_backend.c for the design.
 */
#ifndef TB_IPU_PRIV_H
#define TB_IPU_PRIV_H

#include "backend.h"
#include "exec.h"
#include "ipu_plan.h"
#include "ipu_precision.h"
#include "ipu_queue.h"
#include "pipeline_report.h"
#include "status.h"
#include "tpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define MSG_HDR 64               /* bytes of a message header */
#define MAX_BOUNDARY 32          /* tensors crossing one split */
#define LOSS_SCALE_INIT 32768.0f /* fp16: dynamic loss scale, halved on overflow */
#define OVERFLOW_DIVERGED 10     /* fp16: overflowed steps in a row at the lowest scale that end a run */
#define LOSS_SCALE_GROW 2000     /* fp16: clean steps before the scale doubles */

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

/* Recomputation: one segment of a stage (whole blocks), with its own compact activation plan; every
 * segment's instance works in the device's one working slot and gradient arena. */
struct ipu_seg {
    int l0, l1;                       /* layers [l0,l1) */
    struct ipu_stage_model plan;      /* the tensors the segment touches */
    struct model_inst mi;             /* acts = the working slot, dacts = the gradient arena */
    size_t ck_off;                    /* bytes into a stash: this segment's input checkpoint (recompute)
                                         or its stored activations (half storage) */
    int *f32_ids, n_f32;              /* half storage: per-sample saved data kept exact (GroupNorm μ, rstd) */
};

/* Half precision: one layer's weights — canonical range [w0,w1), decoded into the device's fp32 window
 * while the layer runs; its optimizer state sits at spp·(w0−p0) laid out (spp, w1−w0); its tensors for
 * the update are lsegs[seg0 .. seg0+nseg), rebased to w0. */
struct ipu_chunk {
    size_t w0, w1;
    int seg0, nseg;
};

/* One device: stage s of replica r. */
struct ipu_dev {
    struct ipu_ctx *c;
    int s, r;
    int l0, l1;                       /* layers [l0,l1) */
    const struct model *sm;           /* the stage's activation plan */
    size_t p0, p1, q0, q1;            /* its parameter and buffer ranges in the canonical layout */
    float *params, *grads;            /* (n_params) address space, only [p0,p1) committed and touched;
                                         both NULL with half precision (w16, g16 hold them) */
    uint16_t *w16;                    /* half precision: (p1−p0) the weights as stored, 2 bytes each */
    uint16_t *g16;                    /* half precision: (p1−p0) the accumulated gradients, 2 bytes each
                                         (fp16: times the loss scale) */
    float *wwin, *gwin;               /* half precision: (wwin_floats) one layer's weights, gradients in fp32 */
    size_t wwin_floats;
    struct ipu_chunk *chunk;          /* half precision: (n_chunk) the layers with weights, in order */
    int n_chunk;
    int *chunk_of;                    /* (l1−l0) layer → chunk index, −1 without weights */
    struct optim_segment *lsegs;      /* half precision: (n_segs) the update's tensors rebased per chunk */
    float *buffers;                   /* (n_buffers) address space, only [q0,q1) touched */
    float *opt;                       /* (state_per_param, p1−p0) */
    float *master;                    /* (p1−p0) fp32 master weights, or NULL */
    struct optim_segment *segs;       /* (n_segs) rebased to p0 */
    int n_segs;
    float *trust;                     /* LARS: (n_segs) */
    int n_slots;                      /* activation slots: micro-batches in flight (0 with segments) */
    struct model_inst *slot;          /* (n_slots) share params, grads, buffers, dacts, scratch */
    float *dacts;                     /* (act_floats) one backward at a time */
    size_t act_floats;                /* floats of one activation slot (with segments: the largest segment's) */
    /* segments (recompute, half storage): the stage cut at block boundaries, run one at a time in one slot */
    int n_seg;
    struct ipu_seg *seg;              /* (n_seg) */
    float *work;                      /* (act_floats) the working slot */
    float *seg_grad;                  /* (seg_grad_floats) gradients crossing a segment boundary, fp32 */
    size_t seg_grad_floats;
    float *seg_in;                    /* half storage: (seg_in_floats) a segment's input, decoded to fp32 */
    size_t seg_in_floats;
    float *seg_losses;                /* (B) what the segment instances share */
    uint8_t *seg_correct;             /* (B) */
    int32_t *seg_labels;              /* (B) */
    int n_stash;                      /* segments: one stash per micro-batch in flight */
    void **stash;                     /* (n_stash) recompute: the stage input (uint8 pixels at stage 0,
                                         else boundary activations), then each later segment's input;
                                         half storage without recompute: every segment's activations.
                                         Activations in the storage precision (fp32, bf16, fp16) */
    size_t stash_bytes, in_bytes;     /* one checkpoint set; its stage input part */
    int resident;                     /* micro-batch whose last segment the working slot holds, −1 none */
    int in_ids[MAX_BOUNDARY], n_in;   /* tensors crossing the split before l0 */
    int out_ids[MAX_BOUNDARY], n_out; /* tensors crossing the split before l1 */
    float *in_stage;                  /* (B, in_floats) decoded incoming activations (half exchange) */
    float *g_stage;                   /* (B, gin_floats) decoded incoming gradients (half exchange) */
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
    double *prof;                     /* --profile: (n_layers, 2) seconds, only this stage's layers */
};

struct ipu_ctx {
    struct ipu_plan p;
    int half;                         /* bf16/fp16: activations are stored in 2 bytes (segments) */
    int segmented;                    /* stages run as segments: recompute or half storage */
    const struct model *m;
    struct run_config cfg;
    int D;                            /* devices S·R, device d = r·S + s */
    struct ipu_stage_model *stage;    /* (S) */
    struct ipu_dev *dev;              /* (D) */
    struct ipu_queue *q_act, *q_grad; /* (R·(S−1)) boundary s of replica r at r·(S−1) + s */
    struct ipu_queue *q_in;           /* (R) infeed, when prefetching */
    struct tpool_barrier *bar;        /* (S) the R replicas of stage s (the gradient all-reduce) */
    float **gbufs;                    /* (S·R) grads + p0 of (s, r) at s·R + r, for the ring */
    uint16_t **gbufs16;               /* (S·R) half precision: g16 of (s, r), likewise */
    struct tpool *pool;               /* D pinned workers (NULL when D = 1) */
    size_t per_in;                    /* uint8 bytes of one input sample */
    size_t labels_bytes;              /* B int32 labels rounded up to 64 */
    /* the job in flight */
    int mode;
    const struct batch *batch;
    long step;
    int do_update;
    double t0;
    _Atomic int overflow;             /* fp16: a gradient overflowed in the exchange this step */
    int overflowed;                   /* the last forward_backward overflowed (its update is skipped) */
    float loss_scale;
    long clean_steps, skipped_steps;
    int overflow_run;                 /* fp16: overflowed steps in a row with the scale at its floor */
    /* infeed worker */
    pthread_t pf_th;
    int pf_started, pf_stop;
    pthread_mutex_t pf_mu;
    pthread_cond_t pf_cv;
    long pf_gen, pf_done;
    const struct batch *pf_batch;
    /* accounting since prepare (steps after the first: the first pays page faults and warm-up) */
    double sum_span, sum_busy;        /* Σ devices × pipeline span; Σ compute + exchange */
    long n_steps;
    double t_measure;                 /* seconds spent timing layers for the split */
    struct timeline_event *tl;        /* (cap_tl) the last training step's events: evaluation resets v->ev */
    int n_tl, cap_tl;
    long tl_step;                     /* the step tl and dstep hold (0: none yet) */
    struct device_step *dstep;        /* (D) the last training step per device */
    struct pipeline_report rep;       /* backend_stats' view, refilled on each query */
    double *prof_all;                 /* --profile: (n_layers, 2) backend_stats' view, all stages */
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
static inline float grad_scale(const struct ipu_ctx *c) { return c->p.prec == IPU_PREC_FP16 ? c->loss_scale : 1.0f; }

/* ---- ipu_stage.c ---- */

/* Runs fn on the caller as the only thread (the exec_runner of one device). */
void ipu_run1(void *ctx, void (*fn)(void *, int, int), void *arg);
/* Builds device v = stage s of replica r: parameters, optimizer state, activations, queue ends, op order
 * (tuned: the instance whose convolution choices the stage copies). */
int ipu_dev_init(struct ipu_ctx *c, struct ipu_dev *v, int s, int r, const struct model_inst *tuned);
/* Frees everything device v holds and zeroes it (safe on a partly built device). */
void ipu_dev_free(struct ipu_ctx *c, struct ipu_dev *v);
/* Activation bytes stage s uses (replica 0), with the micro-batches it held at once (measured). */
double ipu_stage_act_bytes(const struct ipu_ctx *c, int s);
/* Segments: the stage's forward one segment at a time from st into stash (keep = 0: evaluation); returns
 * the last segment's instance. */
const struct model_inst *ipu_seg_forward_all(struct ipu_dev *v, const struct exec_step *st, void *stash, int keep);
/* Segments: the stage's backward of micro-batch mb from its last segment to its first, recomputing or
 * decoding each; returns the first segment's instance. */
const struct model_inst *ipu_seg_backward_all(struct ipu_dev *v, int mb, const struct exec_step *st, void *stash);

/* ---- ipu_exchange.c ---- */

/* Sends micro-batch mb's boundary activations (n samples from first, labels y) to the next stage. */
void ipu_push_acts(struct ipu_dev *v, const struct model_inst *mi, int mb, int n, long first, const int32_t *y);
/* Sends micro-batch mb's boundary gradients to the previous stage (fp16: times the loss scale). */
void ipu_push_grads(struct ipu_dev *v, const struct model_inst *mi, int mb, int n, long first);
/* Receives the next activation message; sets *in_act to its fp32 contents (release with the queue). */
const void *ipu_pop_acts(struct ipu_dev *v, int n, const float **in_act);
/* Receives the next gradient message; sets *out_dact to its fp32 contents, flags an fp16 overflow. */
const void *ipu_pop_grads(struct ipu_dev *v, int n, const float **out_dact);
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
/* Device v's optimizer update of its slice, unless a gradient overflowed (timed as 'U'). */
void ipu_dev_update(struct ipu_dev *v);
/* fp16: counts a skipped step and adjusts a dynamic loss scale; TB_EDIVERGED after too many in a row. */
int ipu_loss_scale_after_update(struct ipu_ctx *c, struct step_stats *st);

/* ---- ipu_prepare.c ---- */

/* backend_i.prepare: plans, tunes, times, and builds the devices, queues and workers. */
int ipu_prepare(struct backend *b, const struct model *m, const struct run_config *cfg);

#endif
