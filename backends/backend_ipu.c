/* backend_ipu.c — an IPU-style engine on CPU devices: the model is cut at block boundaries into S
 * pipeline stages, each a device worker (a thread pinned to a core) that owns its layers' parameters,
 * gradients, optimizer state and activation slots; micro-batches stream through the stages under a
 * gpipe (fill–drain) or 1f1b schedule; activations and gradients cross stage boundaries as explicit
 * copies through bounded single-producer/single-consumer queues (the exchange); after G micro-batches
 * each stage's gradients are all-reduced over R replicas of the pipeline and each stage applies one
 * optimizer update to its slice of the parameters. One step is still one update over the global batch
 * B·G·R, with the loss gradient seeded by 1/N_global, so results match `cpu` up to summation order
 * wherever normalisation is per sample; with the same micro-batches any number of stages and either
 * schedule gives the bits of one stage, and one stage × one micro-batch × one replica is `cpu`, bitwise.
 *
 * Not: an IPU simulator (no tile memory model, no BSP supersteps: the exchange is asynchronous), nor
 * a model-parallel split inside a layer. BatchNorm statistics are per micro-batch, as on the IPU.
 * Replicas live here rather than in a mirrored wrapper: each stage all-reduces only its own slice,
 * the S rings running concurrently, with no full-model gradient buffer anywhere.
 *
 * Memory: a stage's activation slots follow its own plan (ipu_stage_model: only the tensors it
 * touches); its parameters, gradients and buffers keep the canonical offsets in an address space of
 * which only its slice is committed; optimizer state (and fp32 master weights) is compact per stage.
 * Precision: bf16/fp16 store in 2 bytes the weights (updates rounded stochastically with
 * counter-based randomness keyed by the global index, so replicas stay identical; to nearest from an
 * fp32 master with bf16m/fp16m), every activation a stage keeps for a backward, and the tensors
 * crossing the exchange. Kernels still compute and accumulate in fp32: a stage runs as segments of one
 * block (half storage) whose layers run one at a time — the layer's weights decoded into an fp32
 * window, its output rounded onto the half grid as it is written — and each segment's activations
 * are stored per micro-batch in 2 bytes (losslessly, being on the grid) and decoded back for its
 * backward in a segment-sized fp32 working slot. Gradient accumulators are 2-byte too (each layer's
 * decoded into a second window for its backward and rounded back to nearest; replicas all-reduce
 * them in 2 bytes, summing in fp32); optimizer state stays fp32, laid out per layer so each layer's
 * update works in the windows. fp16 keeps every gradient it stores or sends times the loss scale:
 * an overflow skips the step on every device (counted) and halves a dynamic scale; a static one
 * (--loss-scale N) stays. Evaluation streams micro-batch-sized chunks through the stages.
 * Recomputation (Graphcore-style checkpoints): each stage is cut at block boundaries into segments
 * (ipu_plan_segments: the cut that minimises the stage's peak); the forward keeps, per micro-batch in
 * flight, only the stage input and each later segment's input (fp32), running the segments one at a
 * time in one segment-sized slot; the backward walks the segments from last to first, recomputing
 * each (no BatchNorm statistics update) from its checkpoint and handing the gradient at its input to
 * the one before. Same kernels in the same order: the bits of a run without it.
 *
 * Options (run_config): stages, split "5,12" (block indices; otherwise balanced on per-layer times
 * measured at prepare), micro_batch, ga, replicas, schedule gpipe|1f1b, recompute (segment
 * checkpoints, above), precision fp32|bf16|fp16 (+m: fp32 master weights), loss_scale (fp16),
 * prefetch (micro-batches the infeed worker runs ahead: 0 = 3, negative = off), timeline (CSV path;
 * a per-device, per-step log goes beside it as <path>.devices.csv), profile.
 *
 * Threading and ownership: S·R device workers on one persistent pinned pool (the caller is device 0)
 * plus one infeed (prefetch) thread; each device touches only its own arenas and the queue ends it
 * owns; the ring all-reduce reads a neighbour replica's gradient slice between barriers. The context
 * owns everything; calls come from one harness thread at a time.
 */
#define _GNU_SOURCE
#include "backend.h"

#include "allreduce.h"
#include "arena.h"
#include "clock.h"
#include "exec.h"
#include "fpenv.h"
#include "ipu_plan.h"
#include "ipu_precision.h"
#include "ipu_queue.h"
#include "layout.h"
#include "rng.h"
#include "status.h"
#include "tpool.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void openblas_set_num_threads(int);

#define MSG_HDR 64               /* bytes of a message header */
#define MAX_BOUNDARY 32          /* tensors crossing one split */
#define LOSS_SCALE_INIT 32768.0f /* fp16: dynamic loss scale, halved on overflow */
#define OVERFLOW_DIVERGED 10     /* fp16: overflowed steps in a row at the lowest scale that end a run */
#define LOSS_SCALE_GROW 2000     /* fp16: clean steps before the scale doubles */

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

struct ipu_ctx;

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
    FILE *timeline;                   /* per micro-batch events */
    FILE *devlog;                     /* per device and step: compute, exchange, wait, idle, ... */
    struct timeline_event *tl;        /* (cap_tl) the last training step's events: evaluation resets v->ev */
    int n_tl, cap_tl;
};

static void rep_barrier_wait(void *ctx) { tpool_barrier_wait(ctx); }

/* A float address space of n floats of which only [lo,hi) is committed (pre-faulted, zeroed): a stage
 * keeps the canonical offsets of its layers without paying for the others'. */
static float *span_alloc(size_t n, size_t lo, size_t hi)
{
    size_t bytes = (n ? n : 16) * sizeof(float);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (hi > lo) memset((float *)p + lo, 0, (hi - lo) * sizeof(float));
    return p;
}

static void span_free(float *p, size_t n)
{
    if (p) munmap(p, (n ? n : 16) * sizeof(float));
}

static void ev_add(struct ipu_dev *v, int mb, char kind, double t0, double t1)
{
    if (v->n_ev < v->cap_ev) v->ev[v->n_ev++] = (struct ipu_event){mb, kind, t0 - v->c->t0, t1 - v->c->t0};
}

static inline struct ipu_dev *dev_at(struct ipu_ctx *c, int s, int r) { return &c->dev[r * c->p.S + s]; }

static inline int32_t *msg_labels(const void *msg) { return (int32_t *)((char *)msg + MSG_HDR); }

static inline void *msg_payload(const struct ipu_ctx *c, const void *msg)
{
    return (char *)msg + MSG_HDR + c->labels_bytes;
}

/* ---- exchange: packing boundary tensors into messages and back ---- */

/* Packs the activations (grads = 0) or gradients (grads = 1) of tensors ids into dst in the exchange
 * precision, at exec's packed offsets (16-float aligned per tensor). */
static void pack_tensors(const struct ipu_dev *v, const struct model_inst *mi, const int *ids, int k, int grads, int n,
                         void *dst, float scale)
{
    const struct ipu_ctx *c = v->c;
    const size_t eb = ipu_prec_bytes(c->p.prec);
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &v->sm->tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        const float *src = grads ? exec_dact(mi, ids[j]) : exec_act(mi, ids[j]);
        ipu_prec_pack((char *)dst + off * eb, src, len, c->p.prec, scale);
        off += tb_align16(len);
    }
}

/* Decodes a packed message payload into fp32 (dst, exec's packed layout); returns non-finite values. */
static size_t unpack_tensors(const struct ipu_dev *v, const int *ids, int k, int grads, int n, const void *src,
                             float *dst, float inv_scale)
{
    const struct ipu_ctx *c = v->c;
    const size_t eb = ipu_prec_bytes(c->p.prec);
    size_t off = 0, bad = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &v->sm->tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        bad += ipu_prec_unpack(dst + off, (const char *)src + off * eb, len, c->p.prec, inv_scale);
        off += tb_align16(len);
    }
    return bad;
}

static void push_acts(struct ipu_dev *v, const struct model_inst *mi, int mb, int n, long first, const int32_t *y)
{
    struct ipu_ctx *c = v->c;
    void *buf = ipu_queue_begin_push(v->act_out, &v->t_wait);
    const double t = tb_now_s();
    *(struct msg_hdr *)buf = (struct msg_hdr){mb, n, first};
    memcpy(msg_labels(buf), y, (size_t)n * sizeof(int32_t));
    pack_tensors(v, mi, v->out_ids, v->n_out, 0, n, msg_payload(c, buf), 1.0f);
    ipu_queue_end_push(v->act_out);
    v->t_exchange += tb_now_s() - t;
    v->bytes += (double)exec_boundary_floats(v->sm, v->l1, n, 0) * (double)ipu_prec_bytes(c->p.prec);
}

static void push_grads(struct ipu_dev *v, const struct model_inst *mi, int mb, int n, long first)
{
    struct ipu_ctx *c = v->c;
    void *buf = ipu_queue_begin_push(v->grad_out, &v->t_wait);
    const double t = tb_now_s();
    *(struct msg_hdr *)buf = (struct msg_hdr){mb, n, first};
    /* fp16: gradients cross scaled by the loss scale (what scaling the loss does to every gradient
     * downstream of it), so small ones survive the 2-byte format; the receiver divides it out. */
    const float scale = c->p.prec == IPU_PREC_FP16 ? c->loss_scale : 1.0f;
    pack_tensors(v, mi, v->in_ids, v->n_in, 1, n, msg_payload(c, buf), scale);
    ipu_queue_end_push(v->grad_out);
    v->t_exchange += tb_now_s() - t;
    v->bytes += (double)exec_boundary_floats(v->sm, v->l0, n, 1) * (double)ipu_prec_bytes(c->p.prec);
}

/* Receives the next activation message; returns it and sets *in_act to its fp32 contents. */
static const void *pop_acts(struct ipu_dev *v, int n, const float **in_act)
{
    struct ipu_ctx *c = v->c;
    const void *msg = ipu_queue_begin_pop(v->act_in, &v->t_wait);
    const double t = tb_now_s();
    TB_ASSERT(((const struct msg_hdr *)msg)->n == n);
    if (c->p.prec == IPU_PREC_FP32) {
        *in_act = msg_payload(c, msg); /* fp32 travels as is: exec copies it into the slots */
    } else {
        unpack_tensors(v, v->in_ids, v->n_in, 0, n, msg_payload(c, msg), v->in_stage, 1.0f);
        *in_act = v->in_stage;
    }
    v->t_exchange += tb_now_s() - t;
    return msg;
}

static const void *pop_grads(struct ipu_dev *v, int n, const float **out_dact)
{
    struct ipu_ctx *c = v->c;
    const void *msg = ipu_queue_begin_pop(v->grad_in, &v->t_wait);
    const double t = tb_now_s();
    if (c->p.prec == IPU_PREC_FP32) {
        *out_dact = msg_payload(c, msg);
    } else {
        const float inv = c->p.prec == IPU_PREC_FP16 ? 1.0f / c->loss_scale : 1.0f;
        if (unpack_tensors(v, v->out_ids, v->n_out, 1, n, msg_payload(c, msg), v->g_stage, inv))
            atomic_store(&c->overflow, 1);
        *out_dact = v->g_stage;
    }
    v->t_exchange += tb_now_s() - t;
    return msg;
}

/* ---- the device's work ---- */

static struct exec_step step_of(const struct ipu_dev *v, int n, long first, int training)
{
    const struct ipu_ctx *c = v->c;
    return (struct exec_step){.n = n, .n_global = c->cfg.batch, .first_index = first, .step = c->step,
                              .seed = c->cfg.seed, .training = training, .l0 = v->l0, .l1 = v->l1};
}

/* Packs the activations (grads = 0) or gradients (grads = 1) of the tensors crossing `split` out of
 * instance mi into dst (exec's packed layout, values of precision prec). Checkpoints are exact in
 * either precision (with half storage every activation already lies on the half grid), and the
 * gradients passed between segments travel in fp32, so recomputation changes no bit. */
static void boundary_pack(const struct model_inst *mi, int split, int grads, int n, void *dst, enum ipu_prec prec)
{
    int ids[MAX_BOUNDARY];
    const int k = exec_boundary_tensors(mi->m, split, ids, MAX_BOUNDARY);
    TB_ASSERT(k <= MAX_BOUNDARY);
    const size_t eb = ipu_prec_bytes(prec);
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &mi->m->tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        ipu_prec_pack((char *)dst + off * eb, grads ? exec_dact(mi, ids[j]) : exec_act(mi, ids[j]), len, prec, 1.0f);
        off += tb_align16(len);
    }
}

static inline size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* Half storage: bytes of segment g's stored activations for B samples — the 2-byte per-sample area,
 * the fixed saved data (BatchNorm μ, rstd) in fp32, and per-sample saved data (GroupNorm) in fp32. */
static size_t seg_store_bytes(const struct ipu_seg *g, int B)
{
    const struct model *sm = &g->plan.m;
    size_t bytes = align64(sm->unit_floats * (size_t)B * 2) + align64(sm->fixed_floats * sizeof(float));
    for (int j = 0; j < g->n_f32; j++)
        bytes += align64((size_t)B * sm->tensors[g->f32_ids[j]].per_sample * sizeof(float));
    return bytes;
}

/* Half storage: moves segment g's activations between the working slot and their place in a stash —
 * store = 1 packs them (as g's forward left them), 0 unpacks them back for its backward. The 2-byte
 * per-sample area is lossless (every layer output was rounded onto the half grid when written:
 * half_forward); the saved data that is not an activation (BatchNorm's fixed μ, rstd; GroupNorm's
 * per-sample ones) travels exactly, in fp32. */
static void seg_transfer(const struct ipu_dev *v, const struct ipu_seg *g, void *stash, int store)
{
    const struct ipu_ctx *c = v->c;
    const struct model *sm = &g->plan.m;
    const size_t unit = sm->unit_floats * (size_t)c->p.B;
    char *d = (char *)stash + g->ck_off;
    if (store) ipu_prec_pack(d, v->work, unit, c->p.prec, 1.0f);
    else ipu_prec_unpack(v->work, d, unit, c->p.prec, 1.0f);
    d += align64(unit * 2);
    for (int j = -1; j < g->n_f32; j++) { /* j = −1: the fixed area after the per-sample one */
        float *w = j < 0 ? v->work + unit : exec_act(&g->mi, g->f32_ids[j]);
        const size_t bytes = (j < 0 ? sm->fixed_floats : (size_t)c->p.B * sm->tensors[g->f32_ids[j]].per_sample) *
                             sizeof(float);
        if (store) memcpy(d, w, bytes);
        else memcpy(w, d, bytes);
        d += align64(bytes);
    }
}

/* Scale of the 2-byte gradients: fp16 keeps them times the loss scale so that small ones survive. */
static inline float grad_scale(const struct ipu_ctx *c) { return c->p.prec == IPU_PREC_FP16 ? c->loss_scale : 1.0f; }

/* Half precision: instance mi seeing layer l's weights (and, with grads, its accumulated gradients),
 * decoded from their 2-byte stores into the device's fp32 windows (mi itself for a layer without). */
static struct model_inst layer_inst(const struct ipu_dev *v, const struct model_inst *mi, int l, int grads)
{
    struct model_inst li = *mi;
    const int j = v->chunk_of[l - v->l0];
    if (j < 0) return li;
    const struct ipu_chunk *ch = &v->chunk[j];
    ipu_prec_unpack(v->wwin, v->w16 + (ch->w0 - v->p0), ch->w1 - ch->w0, v->c->p.prec, 1.0f);
    li.params = v->wwin, li.param_base = ch->w0;
    if (grads) {
        ipu_prec_unpack(v->gwin, v->g16 + (ch->w0 - v->p0), ch->w1 - ch->w0, v->c->p.prec, 1.0f / grad_scale(v->c));
        li.grads = v->gwin;
    }
    return li;
}

/* Half precision: layer l's gradients, accumulated in the window by its backward, back into their
 * 2-byte store (fp16: times the loss scale; an overflow skips the step, as in the exchange). */
static void grads_store(struct ipu_dev *v, int l)
{
    const int j = v->chunk_of[l - v->l0];
    if (j < 0) return;
    const struct ipu_chunk *ch = &v->chunk[j];
    if (ipu_prec_pack(v->g16 + (ch->w0 - v->p0), v->gwin, ch->w1 - ch->w0, v->c->p.prec, grad_scale(v->c)))
        atomic_store(&v->c->overflow, 1);
}

/* Layers [st->l0, st->l1) of instance mi. Half precision runs them one at a time, each with its weights
 * decoded into the window, and rounds each output onto the half grid (to nearest) as soon as it is
 * written, so every reader — and the 2-byte store, which is then lossless — sees what a half-precision
 * device holds; kernels still compute and accumulate in fp32. */
static void half_forward(const struct ipu_dev *v, const struct model_inst *mi, const struct exec_step *st)
{
    const struct ipu_ctx *c = v->c;
    if (!c->half) {
        exec_forward(mi, st, 0, 1, NULL);
        return;
    }
    struct exec_step one = *st;
    for (int l = st->l0; l < st->l1; l++) {
        one.l0 = l, one.l1 = l + 1;
        const struct model_inst li = layer_inst(v, mi, l, 0);
        exec_forward(&li, &one, 0, 1, NULL);
        one.in_act = NULL; /* copied into the slots before the first layer */
        const struct layer *ly = &mi->m->layers[l];
        if (ly->op != OP_SOFTMAX_CE)
            ipu_prec_round(exec_act(mi, ly->out), (size_t)st->n * mi->m->tensors[ly->out].per_sample, c->p.prec, 0, 0,
                           0, 0);
    }
}

/* Layers [st->l1−1 .. st->l0] of instance mi backward; half precision runs them one at a time, each
 * with its weights and gradient accumulators decoded into the windows, the gradients stored back after
 * (the gradient arriving in st->out_dact is taken once, by the first). */
static void half_backward(struct ipu_dev *v, const struct model_inst *mi, const struct exec_step *st)
{
    if (!v->c->half) {
        exec_backward(mi, st, 0, 1, NULL);
        return;
    }
    struct exec_step one = *st;
    for (int l = st->l1 - 1; l >= st->l0; l--) {
        one.l0 = l, one.l1 = l + 1;
        const struct model_inst li = layer_inst(v, mi, l, 1);
        exec_backward(&li, &one, 0, 1, NULL);
        grads_store(v, l);
        one.out_dact = NULL;
    }
}

/* Recompute: segment k's input checkpoint inside a stash (k = 0: the stage input). */
static inline void *seg_ckpt(const struct ipu_dev *v, void *stash, int k) { return (char *)stash + v->seg[k].ck_off; }

/* Segments: the stage's forward one segment at a time in the working slot, from st (x or in_act: the
 * stage input). Recompute keeps each later segment's input in stash; half storage without it keeps
 * each segment's activations there (keep = 0: evaluation, nothing kept but what the next segment
 * reads). Returns the last segment's instance, which the working slot then holds. */
static const struct model_inst *seg_forward_all(struct ipu_dev *v, const struct exec_step *st, void *stash, int keep)
{
    const struct ipu_ctx *c = v->c;
    const int stored = c->half && !c->p.recompute;
    for (int k = 0; k < v->n_seg; k++) {
        const struct ipu_seg *g = &v->seg[k];
        struct exec_step ss = *st;
        ss.l0 = g->l0, ss.l1 = g->l1;
        if (k > 0) ss.x = NULL, ss.in_act = c->half ? v->seg_in : seg_ckpt(v, stash, k);
        half_forward(v, &g->mi, &ss);
        const int more = k + 1 < v->n_seg;
        /* The last stage's backward follows its forward at once: its last segment stays resident. */
        if (stored && keep && (more || v->s < c->p.S - 1)) seg_transfer(v, g, stash, 1);
        if (!more) continue;
        if (c->p.recompute) boundary_pack(&g->mi, g->l1, 0, st->n, seg_ckpt(v, stash, k + 1), c->p.prec);
        if (c->half) boundary_pack(&g->mi, g->l1, 0, st->n, v->seg_in, IPU_PREC_FP32);
    }
    return &v->seg[v->n_seg - 1].mi;
}

/* Recompute: the stage's backward from its last segment to its first; each segment but a resident
 * last one is first recomputed from its checkpoint (BatchNorm must not count the same batch
 * statistics twice; dropout and augmentation are counter-based: the same draws), and the gradient
 * at its input boundary is handed to the one before. st->out_dact: the gradient arriving from the
 * next stage, NULL on the last (its loss seeded the gradient in the forward). The timeline keeps one
 * R and one B per micro-batch, as without segments: the backward's exact start and end, split by the
 * summed recomputation time (the segments interleave the two). */
static const struct model_inst *seg_backward_all(struct ipu_dev *v, int mb, const struct exec_step *st, void *stash)
{
    const struct ipu_ctx *c = v->c;
    const int K = v->n_seg;
    const double t_begin = tb_now_s();
    double t_rec = 0.0;
    for (int k = K - 1; k >= 0; k--) {
        const struct ipu_seg *g = &v->seg[k];
        if (!(k == K - 1 && v->resident == mb)) {
            /* The loss segment is always resident: the last stage runs a backward right after its forward. */
            TB_ASSERT(!(k == K - 1 && v->s == c->p.S - 1));
            if (!c->p.recompute) {
                seg_transfer(v, g, stash, 0); /* half storage: decoded, not recomputed */
            } else {
                struct exec_step rs = *st;
                rs.l0 = g->l0, rs.l1 = g->l1, rs.out_dact = NULL, rs.no_stats_update = 1;
                const double t0 = tb_now_s();
                if (k == 0 && v->s == 0) {
                    rs.x = stash;
                } else if (c->half) {
                    rs.x = NULL, rs.in_act = v->seg_in;
                    ipu_prec_unpack(v->seg_in, seg_ckpt(v, stash, k), exec_boundary_floats(c->m, g->l0, st->n, 0),
                                    c->p.prec, 1.0f);
                } else {
                    rs.x = NULL, rs.in_act = seg_ckpt(v, stash, k);
                }
                half_forward(v, &g->mi, &rs);
                t_rec += tb_now_s() - t0;
            }
        }
        struct exec_step bs = *st;
        bs.l0 = g->l0, bs.l1 = g->l1;
        if (k < K - 1) bs.out_dact = v->seg_grad;
        half_backward(v, &g->mi, &bs);
        if (k > 0) boundary_pack(&g->mi, g->l0, 1, st->n, v->seg_grad, IPU_PREC_FP32);
    }
    const double t_end = tb_now_s();
    v->t_compute += t_end - t_begin, v->t_bwd += t_end - t_begin;
    if (t_rec > 0.0) ev_add(v, mb, 'R', t_begin, t_begin + t_rec);
    ev_add(v, mb, 'B', t_begin + t_rec, t_end);
    v->resident = -1;
    return &v->seg[0].mi;
}

static void dev_forward(struct ipu_dev *v, int mb)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int last = v->s == p->S - 1, n = p->B;
    const long first = (long)v->r * p->G * p->B + (long)mb * p->B;
    const struct model_inst *mi = c->segmented ? NULL : &v->slot[mb % v->n_slots];
    void *stash = c->segmented ? v->stash[mb % v->n_stash] : NULL;
    struct exec_step st = step_of(v, n, first, 1);
    const void *msg = NULL;
    struct ipu_queue *q = NULL;
    if (v->s == 0) {
        if (v->infeed) {
            msg = ipu_queue_begin_pop(q = v->infeed, &v->t_wait);
            st.x = msg_payload(c, msg);
            st.y = msg_labels(msg);
        } else {
            st.x = c->batch->x + (size_t)first * c->per_in;
            st.y = c->batch->y + first;
        }
        if (p->recompute) memcpy(stash, st.x, (size_t)n * c->per_in);
    } else {
        msg = pop_acts(v, n, &st.in_act);
        q = v->act_in;
        st.y = msg_labels(msg);
        if (p->recompute) ipu_prec_pack(stash, st.in_act, exec_boundary_floats(v->sm, v->l0, n, 0), p->prec, 1.0f);
    }
    const double t0 = tb_now_s();
    if (stash) mi = seg_forward_all(v, &st, stash, 1);
    else exec_forward(mi, &st, 0, 1, NULL);
    const double t1 = tb_now_s();
    v->t_compute += t1 - t0;
    v->t_fwd += t1 - t0;
    ev_add(v, mb, 'F', t0, t1);
    v->resident = mb;
    if (last) v->loss += exec_loss_sum(mi, n);
    else push_acts(v, mi, mb, n, first, st.y);
    if (q) ipu_queue_end_pop(q); /* in_act, x and y pointed into the message until here */
    if (++v->in_use > v->peak_in_use) v->peak_in_use = v->in_use;
}

static void dev_backward(struct ipu_dev *v, int mb)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int n = p->B;
    const long first = (long)v->r * p->G * p->B + (long)mb * p->B;
    const struct model_inst *mi = c->segmented ? NULL : &v->slot[mb % v->n_slots];
    struct exec_step st = step_of(v, n, first, 1);
    const void *msg = NULL;
    if (v->grad_in) msg = pop_grads(v, n, &st.out_dact);
    if (c->segmented) {
        mi = seg_backward_all(v, mb, &st, v->stash[mb % v->n_stash]);
    } else {
        const double t0 = tb_now_s();
        exec_backward(mi, &st, 0, 1, NULL);
        const double t1 = tb_now_s();
        v->t_compute += t1 - t0;
        v->t_bwd += t1 - t0;
        ev_add(v, mb, 'B', t0, t1);
    }
    if (msg) ipu_queue_end_pop(v->grad_in);
    if (v->grad_out) push_grads(v, mi, mb, n, first);
    v->in_use--;
}

static void dev_train(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    double t = tb_now_s();
    if (v->g16) memset(v->g16, 0, (v->p1 - v->p0) * sizeof(uint16_t));
    else memset(v->grads + v->p0, 0, (v->p1 - v->p0) * sizeof(float));
    v->t_compute += tb_now_s() - t;
    v->resident = -1;
    for (int k = 0; k < v->n_ops; k++) {
        if (v->ops[k].fwd) dev_forward(v, v->ops[k].mb);
        else dev_backward(v, v->ops[k].mb);
    }
    v->t_end = tb_now_s() - c->t0;
    if (c->p.R > 1) {
        t = tb_now_s();
        const size_t n = v->p1 - v->p0;
        if (!v->g16) {
            allreduce_ring(&c->gbufs[(size_t)v->s * c->p.R], n, c->p.R, v->r, rep_barrier_wait, &c->bar[v->s]);
        } else {
            allreduce_ring_half(&c->gbufs16[(size_t)v->s * c->p.R], n, c->p.R, v->r, c->p.prec, rep_barrier_wait,
                                &c->bar[v->s]);
            /* fp16: a sum over replicas may overflow where no replica's share did. */
            if (c->p.prec == IPU_PREC_FP16)
                for (size_t i = 0; i < n; i++)
                    if ((v->g16[i] & 0x7c00u) == 0x7c00u) {
                        atomic_store(&c->overflow, 1);
                        break;
                    }
        }
        const double t1 = tb_now_s();
        v->t_allreduce = t1 - t;
        ev_add(v, -1, 'A', t, t1);
    }
}

/* Half precision: the update one layer at a time — weights decoded into the window (or the fp32
 * master's slice), the optimizer on that slice, then stored back in 2 bytes: rounded stochastically,
 * keyed by the global index so every replica rounds the same way (to nearest from a master). */
static void update_half(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const struct optim_config *oc = &c->cfg.optim;
    const size_t spp = (size_t)optim_state_per_param(oc->kind);
    for (int j = 0; j < v->n_chunk; j++) {
        const struct ipu_chunk *ch = &v->chunk[j];
        const size_t a = ch->w0 - v->p0, len = ch->w1 - ch->w0;
        float *w = v->master ? v->master + a : v->wwin;
        if (!v->master) ipu_prec_unpack(w, v->w16 + a, len, c->p.prec, 1.0f);
        float *g = v->gwin;
        ipu_prec_unpack(g, v->g16 + a, len, c->p.prec, 1.0f / grad_scale(c));
        const struct optim_segment *sg = v->lsegs + ch->seg0;
        float *trust = v->trust + ch->seg0;
        if (oc->kind == OPTIM_LARS) optim_lars_trust(oc, w, g, sg, ch->nseg, trust, 0, 1);
        optim_update(oc, w, g, v->opt + spp * a, len, sg, ch->nseg, trust, c->step, 0, 1);
        if (!v->master) ipu_prec_round(w, len, c->p.prec, 1, c->cfg.seed, c->step, ch->w0);
        ipu_prec_pack(v->w16 + a, w, len, c->p.prec, 1.0f);
    }
}

static void dev_update(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const size_t n = v->p1 - v->p0;
    if (atomic_load(&c->overflow) || n == 0) return;
    const double t0 = tb_now_s();
    const struct optim_config *oc = &c->cfg.optim;
    if (c->half) {
        update_half(v);
        const double t1 = tb_now_s();
        v->t_update = t1 - t0;
        ev_add(v, -1, 'U', t0, t1);
        return;
    }
    float *w = v->master ? v->master : v->params + v->p0;
    const float *g = v->grads + v->p0;
    if (oc->kind == OPTIM_LARS) optim_lars_trust(oc, w, g, v->segs, v->n_segs, v->trust, 0, 1);
    optim_update(oc, w, g, v->opt, n, v->segs, v->n_segs, v->trust, c->step, 0, 1);
    if (c->p.prec != IPU_PREC_FP32) {
        if (v->master) {
            memcpy(v->params + v->p0, v->master, n * sizeof(float));
            ipu_prec_round(v->params + v->p0, n, c->p.prec, 0, 0, 0, 0);
        } else {
            /* Stored weights are half precision: the fp32 result of the update is rounded back
             * stochastically, keyed by the global index, so every replica rounds the same way. */
            ipu_prec_round(v->params + v->p0, n, c->p.prec, 1, c->cfg.seed, c->step, v->p0);
        }
    }
    const double t1 = tb_now_s();
    v->t_update = t1 - t0;
    ev_add(v, -1, 'U', t0, t1);
}

static void dev_eval(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int last = v->s == p->S - 1;
    const int N = c->batch->n, chunks = (N + p->B - 1) / p->B;
    const struct model_inst *mi = c->segmented ? NULL : &v->slot[0];
    v->resident = -1;
    for (int k = v->r; k < chunks; k += p->R) {
        const long first = (long)k * p->B;
        const int n = N - first < p->B ? (int)(N - first) : p->B;
        struct exec_step st = step_of(v, n, first, 0);
        const void *msg = NULL;
        if (v->s == 0) {
            st.x = c->batch->x + (size_t)first * c->per_in;
            st.y = c->batch->y + first;
        } else {
            msg = pop_acts(v, n, &st.in_act);
            st.y = msg_labels(msg);
        }
        const double t0 = tb_now_s();
        if (c->segmented) mi = seg_forward_all(v, &st, v->stash[0], 0); /* nothing in flight: any stash will do */
        else exec_forward(mi, &st, 0, 1, NULL);
        v->t_compute += tb_now_s() - t0;
        if (last) {
            v->loss += exec_loss_sum(mi, n);
            v->correct += exec_correct_count(mi, n);
            v->n_done += n;
        } else {
            push_acts(v, mi, k, n, first, st.y);
        }
        if (msg) ipu_queue_end_pop(v->act_in);
    }
}

static void dev_task(void *arg, int d, int nth)
{
    struct ipu_ctx *c = arg;
    struct ipu_dev *v = &c->dev[d];
    v->t_compute = v->t_exchange = v->t_wait = v->t_allreduce = v->t_update = v->t_end = 0.0;
    v->t_fwd = v->t_bwd = 0.0;
    v->bytes = v->loss = 0.0;
    v->correct = v->n_done = 0;
    v->n_ev = 0;
    v->in_use = v->peak_in_use = 0;
    switch (c->mode) {
    case MODE_TRAIN:
        dev_train(v);
        if (c->do_update) {
            /* fp16: every device must know whether any gradient overflowed before anyone updates. */
            if (c->p.prec == IPU_PREC_FP16 && nth > 1) tpool_barrier(c->pool);
            dev_update(v);
        }
        break;
    case MODE_UPDATE: dev_update(v); break;
    case MODE_EVAL: dev_eval(v); break;
    }
}

static void run_devices(struct ipu_ctx *c)
{
    if (c->pool) tpool_run(c->pool, dev_task, c);
    else dev_task(c, 0, 1);
}

/* ---- infeed: a worker copying micro-batches (still uint8) ahead of the first stage ---- */

static void *infeed_main(void *arg)
{
    struct ipu_ctx *c = arg;
    const struct ipu_plan *p = &c->p;
    long seen = 0;
    pthread_mutex_lock(&c->pf_mu);
    for (;;) {
        while (c->pf_gen == seen && !c->pf_stop) pthread_cond_wait(&c->pf_cv, &c->pf_mu);
        if (c->pf_stop) break;
        seen = c->pf_gen;
        const struct batch *b = c->pf_batch;
        pthread_mutex_unlock(&c->pf_mu);
        for (int i = 0; i < p->G; i++)
            for (int r = 0; r < p->R; r++) {
                const long first = (long)r * p->G * p->B + (long)i * p->B;
                void *buf = ipu_queue_begin_push(&c->q_in[r], NULL);
                *(struct msg_hdr *)buf = (struct msg_hdr){i, p->B, first};
                memcpy(msg_labels(buf), b->y + first, (size_t)p->B * sizeof(int32_t));
                memcpy(msg_payload(c, buf), b->x + (size_t)first * c->per_in, (size_t)p->B * c->per_in);
                ipu_queue_end_push(&c->q_in[r]);
            }
        pthread_mutex_lock(&c->pf_mu);
        c->pf_done = seen;
        pthread_cond_broadcast(&c->pf_cv);
    }
    pthread_mutex_unlock(&c->pf_mu);
    return NULL;
}

static void infeed_start_step(struct ipu_ctx *c, const struct batch *b)
{
    pthread_mutex_lock(&c->pf_mu);
    c->pf_batch = b;
    c->pf_gen++;
    pthread_cond_broadcast(&c->pf_cv);
    pthread_mutex_unlock(&c->pf_mu);
}

static void infeed_wait_step(struct ipu_ctx *c)
{
    pthread_mutex_lock(&c->pf_mu);
    while (c->pf_done != c->pf_gen) pthread_cond_wait(&c->pf_cv, &c->pf_mu);
    pthread_mutex_unlock(&c->pf_mu);
}

/* ---- preparation ---- */

/* Refuses, before allocating, a plan whose estimate does not fit: failing in a second with the figures
 * beats the kernel's OOM killer minutes later. */
static int check_fits(const struct ipu_ctx *c, double need, const char *what)
{
    const double avail = arena_mem_available();
    if (avail > 0.0 && need > 0.9 * avail)
        return tb_error_set(TB_EINVAL, "ipu: %s of %s at micro-batch %d needs about %.1f GiB but only %.1f GiB is "
                                       "available: lower --micro-batch (raise --ga), use --recompute or more --stages",
                            what, c->m->name, c->p.B, need / 1073741824.0, 0.9 * avail / 1073741824.0);
    return TB_OK;
}

/* Bytes the devices will hold: activation slots, gradient arenas, stashes, parameter slices, queues. */
static double devices_bytes(const struct ipu_ctx *c)
{
    const struct ipu_plan *p = &c->p;
    const struct model *m = c->m;
    const double spp = optim_state_per_param(c->cfg.optim.kind);
    double total = 0.0;
    int *cuts = malloc(sizeof *cuts * (size_t)(m->n_blocks + 2));
    char *work = malloc((size_t)m->n_tensors + 1);
    TB_ASSERT(cuts && work);
    for (int s = 0; s < p->S; s++) {
        double act = 4.0 * (double)model_act_floats(&c->stage[s].m, p->B);
        const int in_flight = ipu_plan_in_flight(p, s), l0 = p->l0[s], l1 = p->l0[s + 1];
        double slots = in_flight, stash = 0.0;
        if (p->recompute || p->prec != IPU_PREC_FP32) {
            /* One working slot of the largest segment, and per micro-batch held the checkpoints
             * (recompute) or every activation at 2 bytes (half storage). */
            const double eb = (double)ipu_prec_bytes(p->prec);
            const int K = p->recompute ? ipu_plan_segments(p, m, s, cuts) : ipu_plan_block_segments(p, m, s, cuts);
            const double whole = act;
            act = 0.0, slots = 1.0;
            if (p->recompute)
                stash = s == 0 ? (double)p->B * (double)c->per_in : eb * (double)exec_boundary_floats(m, l0, p->B, 0);
            else
                stash = whole / 2.0;
            for (int k = 0; k < K; k++) {
                const double a = 4.0 * (double)ipu_plan_range_act_floats(m, cuts[k], cuts[k + 1], p->B, work);
                if (a > act) act = a;
                if (k > 0 && p->recompute) stash += eb * (double)exec_boundary_floats(m, cuts[k], p->B, 0);
            }
            stash *= in_flight;
        }
        const size_t p0 = s == 0 ? 0 : ipu_plan_first_offset(m, l0, 0);
        const size_t p1 = s == p->S - 1 ? m->n_params : ipu_plan_first_offset(m, l1, 0);
        const double params = 4.0 * (double)(p1 - p0) * (2.0 + spp + p->master);
        const double queue = 2.0 * ipu_plan_queue_depth(p) * 4.0 * (double)exec_boundary_floats(m, l1, p->B, 0);
        total += p->R * ((slots + 1.0) * act + params + stash + queue);
    }
    free(cuts), free(work);
    return total;
}

struct timing_inst {
    struct model_inst mi;
    float *params, *grads, *buffers;
};

/* Frees the instance's arenas but keeps its tuned layer state (what the stages copy). */
static void timing_free_arenas(struct timing_inst *t)
{
    arena_free(t->mi.acts), arena_free(t->mi.dacts);
    free(t->mi.losses), free(t->mi.correct), free(t->mi.labels);
    arena_free(t->params), arena_free(t->grads), arena_free(t->buffers);
    t->mi.acts = t->mi.dacts = t->mi.losses = NULL, t->mi.correct = NULL, t->mi.labels = NULL;
    t->params = t->grads = t->buffers = NULL;
}

static void timing_free(struct timing_inst *t)
{
    if (t->mi.m) exec_release(&t->mi);
    timing_free_arenas(t);
    memset(t, 0, sizeof *t);
}

static void run1(void *ctx, void (*fn)(void *, int, int), void *arg)
{
    (void)ctx;
    fn(arg, 0, 1);
}

/* A whole-model instance of one micro-batch: it tunes the convolution algorithms every stage then
 * copies, and times each layer for the split. */
static int timing_init(struct timing_inst *t, const struct model *m, const struct run_config *cfg, int n_max)
{
    memset(t, 0, sizeof *t);
    struct model_inst *mi = &t->mi;
    mi->m = m;
    mi->n_max = n_max;
    const size_t act = model_act_floats(m, n_max);
    t->params = arena_alloc(m->n_params);
    t->grads = arena_alloc(m->n_params);
    t->buffers = arena_alloc(m->n_buffers);
    mi->acts = arena_alloc(act);
    mi->dacts = arena_alloc(act);
    mi->losses = calloc((size_t)n_max, sizeof(float));
    mi->correct = calloc((size_t)n_max, 1);
    mi->labels = calloc((size_t)n_max, sizeof(int32_t));
    if (!t->params || !t->grads || !t->buffers || !mi->acts || !mi->dacts || !mi->losses || !mi->correct ||
        !mi->labels)
        return tb_error_set(TB_ENOMEM, "ipu: cannot allocate a %d-sample instance of %s (%.1f MiB of activations)",
                            n_max, m->name, (double)act * 8.0 / 1048576.0);
    mi->params = t->params, mi->grads = t->grads, mi->buffers = t->buffers;
    /* Timing only needs plausible magnitudes: small seeded weights, unit running variances. */
    for (size_t i = 0; i < m->n_params; i++)
        t->params[i] = 0.1f * (2.0f * rng_uniform(cfg->seed, RNG_STREAM_INIT, i) - 1.0f);
    for (size_t i = 0; i < m->n_buffers; i++) t->buffers[i] = 1.0f;
    struct exec_runner r = {run1, NULL, NULL, 1};
    mi->no_layer_fusion = cfg->no_fuse;
    return exec_prepare(mi, &r, cfg->conv_algo, NULL);
}

/* Per-layer forward and backward seconds for n samples: one warm-up pass, then the best of two; a
 * single pass when reps = 1 (large models, where one pass already takes seconds). */
static void timing_measure(struct timing_inst *t, const struct run_config *cfg, int n, int reps, double *tf,
                           double *tb)
{
    const struct model *m = t->mi.m;
    const size_t per_in = m->tensors[m->input].per_sample;
    uint8_t *x = calloc((size_t)n * per_in, 1);
    int32_t *y = calloc((size_t)n, sizeof *y);
    TB_ASSERT(x && y);
    for (size_t i = 0; i < (size_t)n * per_in; i++) x[i] = (uint8_t)(rng_hash(cfg->seed, RNG_STREAM_SYNTHETIC, i) & 255);
    struct exec_step st = {.n = n, .n_global = n, .step = 1, .seed = cfg->seed, .training = 1, .x = x, .y = y,
                           .l0 = 0, .l1 = m->n_layers, .no_stats_update = 1};
    if (reps > 1) {
        exec_forward(&t->mi, &st, 0, 1, NULL);
        exec_backward(&t->mi, &st, 0, 1, NULL);
    }
    for (int i = 0; i < m->n_layers; i++) tf[i] = tb[i] = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        for (int i = 0; i < m->n_layers; i++) {
            st.l0 = i, st.l1 = i + 1;
            const double t0 = tb_now_s();
            exec_forward(&t->mi, &st, 0, 1, NULL);
            const double dt = tb_now_s() - t0;
            if (dt < tf[i]) tf[i] = dt;
        }
        for (int i = m->n_layers - 1; i >= 0; i--) {
            st.l0 = i, st.l1 = i + 1;
            const double t0 = tb_now_s();
            exec_backward(&t->mi, &st, 0, 1, NULL);
            const double dt = tb_now_s() - t0;
            if (dt < tb[i]) tb[i] = dt;
        }
    }
    free(x), free(y);
}

/* Without recomputation: a whole-stage activation slot per micro-batch in flight, one gradient arena. */
static int dev_init_slots(struct ipu_ctx *c, struct ipu_dev *v, int in_flight, const struct model_inst *tuned)
{
    const int B = c->p.B;
    struct exec_runner run = {run1, NULL, NULL, 1};
    int st;
    v->n_slots = in_flight;
    v->act_floats = model_act_floats(v->sm, B);
    v->dacts = arena_alloc(v->act_floats);
    v->slot = calloc((size_t)v->n_slots, sizeof *v->slot);
    if (!v->dacts || !v->slot)
        return tb_error_set(TB_ENOMEM, "ipu: out of memory for the activations of stage %d", v->s);
    for (int k = 0; k < v->n_slots; k++) {
        struct model_inst *mi = &v->slot[k];
        mi->m = v->sm;
        mi->n_max = B;
        mi->params = v->params, mi->grads = v->grads, mi->buffers = v->buffers, mi->dacts = v->dacts;
        mi->acts = arena_alloc(v->act_floats);
        mi->losses = calloc((size_t)B, sizeof(float));
        mi->correct = calloc((size_t)B, 1);
        mi->labels = calloc((size_t)B, sizeof(int32_t));
        if (!mi->acts || !mi->losses || !mi->correct || !mi->labels)
            return tb_error_set(TB_ENOMEM, "ipu: cannot allocate %d activation slots of %.1f MiB for stage %d",
                                v->n_slots, (double)v->act_floats * 4.0 / 1048576.0, v->s);
    }
    if ((st = exec_prepare(&v->slot[0], &run, c->cfg.conv_algo, tuned)) != TB_OK) return st;
    for (int k = 1; k < v->n_slots; k++) exec_share_prepared(&v->slot[k], &v->slot[0]);
    for (int k = 0; k < v->n_slots; k++) v->slot[k].no_layer_fusion = c->cfg.no_fuse;
    return TB_OK;
}

/* Segments: cuts stage v->s (recompute: ipu_plan_segments; half storage: one per block), plans each,
 * and allocates the one working slot and gradient arena (the largest segment's), the fp32 gradient
 * between segments (and, with half storage, the fp32 input of a segment), and a stash per
 * micro-batch in flight: recompute's checkpoints, or half storage's stored activations. */
static int dev_init_segments(struct ipu_ctx *c, struct ipu_dev *v, int in_flight, const struct model_inst *tuned)
{
    const struct model *m = c->m;
    const int B = c->p.B;
    const size_t eb = ipu_prec_bytes(c->p.prec);
    int *cuts = malloc(sizeof *cuts * (size_t)(m->n_blocks + 2));
    if (!cuts) return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    const int K =
        c->p.recompute ? ipu_plan_segments(&c->p, m, v->s, cuts) : ipu_plan_block_segments(&c->p, m, v->s, cuts);
    v->seg = calloc((size_t)K, sizeof *v->seg);
    if (!v->seg) {
        free(cuts);
        return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    }
    v->n_seg = K;
    /* Recompute keeps the stage input; half storage keeps it inside the first segment's activations. */
    const size_t in_copy = !c->p.recompute ? 0
                           : v->s == 0    ? (size_t)B * c->per_in
                                          : exec_boundary_floats(m, v->l0, B, 0) * eb;
    v->in_bytes = align64(in_copy);
    size_t ck = v->in_bytes;
    /* Half storage with recomputation decodes a later stage's input checkpoint into seg_in too (its
     * first segment's recompute), not only the segment boundaries: it can be the largest of them. */
    if (c->half && c->p.recompute && v->s > 0) v->seg_in_floats = exec_boundary_floats(m, v->l0, B, 0);
    int st = TB_OK;
    for (int k = 0; k < K; k++) {
        struct ipu_seg *g = &v->seg[k];
        g->l0 = cuts[k], g->l1 = cuts[k + 1];
        if ((st = ipu_stage_model_init(&g->plan, m, g->l0, g->l1)) != TB_OK) break;
        const size_t f = model_act_floats(&g->plan.m, B);
        if (f > v->act_floats) v->act_floats = f;
        if (c->half && !c->p.recompute) {
            if (!(g->f32_ids = malloc(sizeof *g->f32_ids * (size_t)(g->l1 - g->l0)))) {
                st = tb_error_set(TB_ENOMEM, "ipu: out of memory");
                break;
            }
            for (int i = g->l0; i < g->l1; i++) {
                const int t = m->layers[i].save;
                if (t >= 0 && m->tensors[t].per_sample > 0) g->f32_ids[g->n_f32++] = t;
            }
            g->ck_off = ck;
            ck += seg_store_bytes(g, B);
        }
        if (k > 0) {
            if (c->p.recompute) {
                g->ck_off = ck;
                ck += align64(exec_boundary_floats(m, g->l0, B, 0) * eb);
            }
            const size_t gf = exec_boundary_floats(m, g->l0, B, 1);
            if (gf > v->seg_grad_floats) v->seg_grad_floats = gf;
            const size_t af = exec_boundary_floats(m, g->l0, B, 0);
            if (c->half && af > v->seg_in_floats) v->seg_in_floats = af;
        }
    }
    free(cuts);
    if (st != TB_OK) return st;
    v->stash_bytes = ck;
    v->work = arena_alloc(v->act_floats);
    v->dacts = arena_alloc(v->act_floats);
    v->seg_grad = arena_alloc(v->seg_grad_floats ? v->seg_grad_floats : 16);
    if (c->half && !(v->seg_in = arena_alloc(v->seg_in_floats ? v->seg_in_floats : 16)))
        return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    v->seg_losses = calloc((size_t)B, sizeof(float));
    v->seg_correct = calloc((size_t)B, 1);
    v->seg_labels = calloc((size_t)B, sizeof(int32_t));
    v->n_stash = in_flight;
    v->stash = calloc((size_t)v->n_stash, sizeof *v->stash);
    if (!v->work || !v->dacts || !v->seg_grad || !v->seg_losses || !v->seg_correct || !v->seg_labels || !v->stash)
        return tb_error_set(TB_ENOMEM, "ipu: cannot allocate the %.1f MiB recomputation slot of stage %d",
                            (double)v->act_floats * 4.0 / 1048576.0, v->s);
    for (int k = 0; k < v->n_stash; k++)
        if (!(v->stash[k] = arena_alloc((v->stash_bytes + 3) / 4)))
            return tb_error_set(TB_ENOMEM, "ipu: cannot allocate %d checkpoint sets of %.1f MiB for stage %d",
                                v->n_stash, (double)v->stash_bytes / 1048576.0, v->s);
    for (int k = 0; k < K; k++) {
        struct model_inst *mi = &v->seg[k].mi;
        mi->m = &v->seg[k].plan.m;
        mi->n_max = B;
        mi->params = v->params, mi->grads = v->grads, mi->buffers = v->buffers;
        mi->acts = v->work, mi->dacts = v->dacts;
        mi->losses = v->seg_losses, mi->correct = v->seg_correct, mi->labels = v->seg_labels;
    }
    struct exec_runner run = {run1, NULL, NULL, 1};
    if ((st = exec_prepare(&v->seg[0].mi, &run, c->cfg.conv_algo, tuned)) != TB_OK) return st;
    for (int k = 1; k < K; k++) exec_share_prepared(&v->seg[k].mi, &v->seg[0].mi);
    for (int k = 0; k < K; k++) v->seg[k].mi.no_layer_fusion = c->cfg.no_fuse;
    return TB_OK;
}

/* Whether entry e is a trainable tensor of device v's layers (what its optimizer updates). */
static int stage_trains(const struct ipu_dev *v, const struct param_entry *e)
{
    return e->kind != PARAM_BUFFER && e->kind != PARAM_COUNTER && e->layer >= v->l0 && e->layer < v->l1;
}

/* Half precision: groups the stage's tensors (v->segs, in layer order) into one chunk per layer with
 * weights, rebases them per chunk, and sizes the fp32 window to the largest. */
static int dev_init_chunks(struct ipu_ctx *c, struct ipu_dev *v)
{
    const struct model *m = c->m;
    const int nl = v->l1 - v->l0;
    v->chunk = calloc((size_t)nl + 1, sizeof *v->chunk);
    v->chunk_of = malloc(sizeof *v->chunk_of * ((size_t)nl + 1));
    v->lsegs = calloc((size_t)v->n_segs + 1, sizeof *v->lsegs);
    if (!v->chunk || !v->chunk_of || !v->lsegs) return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    for (int l = 0; l < nl; l++) v->chunk_of[l] = -1;
    int i = 0;
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (!stage_trains(v, e)) continue;
        int j = v->chunk_of[e->layer - v->l0];
        if (j < 0) {
            j = v->chunk_of[e->layer - v->l0] = v->n_chunk++;
            v->chunk[j] = (struct ipu_chunk){e->off, e->off + e->n, i, 0};
        }
        TB_ASSERT(j == v->n_chunk - 1); /* a layer's tensors are consecutive in the table */
        struct ipu_chunk *ch = &v->chunk[j];
        if (e->off < ch->w0) ch->w0 = e->off;
        if (e->off + e->n > ch->w1) ch->w1 = e->off + e->n;
        ch->nseg++;
        i++;
    }
    TB_ASSERT(i == v->n_segs);
    for (int j = 0; j < v->n_chunk; j++) {
        const struct ipu_chunk *ch = &v->chunk[j];
        for (int k = ch->seg0; k < ch->seg0 + ch->nseg; k++) {
            v->lsegs[k] = v->segs[k];
            v->lsegs[k].off = v->segs[k].off + v->p0 - ch->w0;
        }
        if (ch->w1 - ch->w0 > v->wwin_floats) v->wwin_floats = ch->w1 - ch->w0;
    }
    if (!(v->wwin = arena_alloc(v->wwin_floats ? v->wwin_floats : 16)) ||
        !(v->gwin = arena_alloc(v->wwin_floats ? v->wwin_floats : 16)))
        return tb_error_set(TB_ENOMEM, "ipu: out of memory for the weight window of stage %d", v->s);
    return TB_OK;
}

static int dev_init(struct ipu_ctx *c, struct ipu_dev *v, int s, int r, const struct model_inst *tuned)
{
    const struct model *m = c->m;
    const struct ipu_plan *p = &c->p;
    const int S = p->S, B = p->B;
    int st;
    v->c = c, v->s = s, v->r = r;
    v->l0 = p->l0[s], v->l1 = p->l0[s + 1];
    v->sm = &c->stage[s].m;
    v->p0 = s == 0 ? 0 : ipu_plan_first_offset(m, v->l0, 0);
    v->p1 = s == S - 1 ? m->n_params : ipu_plan_first_offset(m, v->l1, 0);
    v->q0 = s == 0 ? 0 : ipu_plan_first_offset(m, v->l0, 1);
    v->q1 = s == S - 1 ? m->n_buffers : ipu_plan_first_offset(m, v->l1, 1);
    const size_t np = v->p1 - v->p0;
    if (!c->half) {
        v->params = span_alloc(m->n_params, v->p0, v->p1);
        v->grads = span_alloc(m->n_params, v->p0, v->p1);
    } else {
        v->w16 = (uint16_t *)arena_alloc((np + 1) / 2);
        v->g16 = (uint16_t *)arena_alloc((np + 1) / 2);
    }
    v->buffers = span_alloc(m->n_buffers, v->q0, v->q1);
    v->opt = arena_alloc(np * (size_t)optim_state_per_param(c->cfg.optim.kind));
    if (p->master) v->master = arena_alloc(np);
    v->segs = calloc((size_t)m->n_entries + 1, sizeof *v->segs);
    v->trust = calloc((size_t)m->n_entries + 1, sizeof *v->trust);
    if ((c->half ? !v->w16 || !v->g16 : !v->params || !v->grads) || !v->buffers || !v->opt ||
        (p->master && !v->master) || !v->segs || !v->trust)
        return tb_error_set(TB_ENOMEM, "ipu: out of memory for the parameters of stage %d", s);
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (!stage_trains(v, e)) continue;
        TB_ASSERT(e->off >= v->p0 && e->off + e->n <= v->p1);
        v->segs[v->n_segs++] = (struct optim_segment){e->off - v->p0, e->n, e->kind != PARAM_WEIGHT};
    }
    if (c->half && (st = dev_init_chunks(c, v)) != TB_OK) return st;

    v->n_in = exec_boundary_tensors(m, v->l0, v->in_ids, MAX_BOUNDARY);
    v->n_out = exec_boundary_tensors(m, v->l1, v->out_ids, MAX_BOUNDARY);
    if (v->n_in > MAX_BOUNDARY || v->n_out > MAX_BOUNDARY)
        return tb_error_set(TB_EINVAL, "ipu: more than %d tensors cross a split of %s", MAX_BOUNDARY, m->name);
    const int last = s == S - 1;
    const int in_flight = ipu_plan_in_flight(p, s);
    st = c->segmented ? dev_init_segments(c, v, in_flight, tuned) : dev_init_slots(c, v, in_flight, tuned);
    if (st != TB_OK) return st;
    if (p->prec != IPU_PREC_FP32) {
        if (s > 0 && !(v->in_stage = arena_alloc(exec_boundary_floats(m, v->l0, B, 0)))) return TB_ENOMEM;
        if (!last && !(v->g_stage = arena_alloc(exec_boundary_floats(m, v->l1, B, 1)))) return TB_ENOMEM;
    }
    const int links = S - 1;
    if (s > 0) {
        v->act_in = &c->q_act[(size_t)r * links + (size_t)(s - 1)];
        if (c->q_grad[(size_t)r * links + (size_t)(s - 1)].ready) v->grad_out = &c->q_grad[(size_t)r * links + (size_t)(s - 1)];
    }
    if (!last) {
        v->act_out = &c->q_act[(size_t)r * links + (size_t)s];
        if (c->q_grad[(size_t)r * links + (size_t)s].ready) v->grad_in = &c->q_grad[(size_t)r * links + (size_t)s];
    }
    if (s == 0 && c->q_in) v->infeed = &c->q_in[r];
    v->ops = malloc(sizeof *v->ops * 2 * (size_t)p->G);
    v->cap_ev = 3 * p->G + 8;
    v->ev = malloc(sizeof *v->ev * (size_t)v->cap_ev);
    if (!v->ops || !v->ev) return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    v->n_ops = ipu_plan_ops(p, s, v->ops);
    if (c->cfg.profile) {
        if (!(v->prof = calloc(2 * (size_t)m->n_layers, sizeof(double)))) return TB_ENOMEM;
        for (int k = 0; k < v->n_slots; k++) v->slot[k].prof = v->prof;
        for (int k = 0; k < v->n_seg; k++) v->seg[k].mi.prof = v->prof; /* recomputation counts as forward */
    }
    v->resident = -1;
    if (v->g16) c->gbufs16[(size_t)s * p->R + (size_t)r] = v->g16;
    else c->gbufs[(size_t)s * p->R + (size_t)r] = v->grads + v->p0;
    return TB_OK;
}

static void dev_free(struct ipu_ctx *c, struct ipu_dev *v)
{
    const struct model *m = c->m;
    if (v->slot) {
        for (int k = 0; k < v->n_slots; k++) {
            struct model_inst *mi = &v->slot[k];
            if (k == 0 && mi->m) exec_release(mi);
            arena_free(mi->acts);
            free(mi->losses), free(mi->correct), free(mi->labels);
        }
        free(v->slot);
    }
    if (v->stash) {
        for (int k = 0; k < v->n_stash; k++) arena_free(v->stash[k]);
        free(v->stash);
    }
    if (v->seg) {
        if (v->seg[0].mi.m) exec_release(&v->seg[0].mi);
        for (int k = 0; k < v->n_seg; k++) ipu_stage_model_free(&v->seg[k].plan), free(v->seg[k].f32_ids);
        free(v->seg);
    }
    arena_free(v->work), arena_free(v->seg_grad), arena_free(v->seg_in);
    free(v->seg_losses), free(v->seg_correct), free(v->seg_labels);
    span_free(v->params, m->n_params);
    arena_free((float *)v->w16), arena_free((float *)v->g16), arena_free(v->wwin), arena_free(v->gwin);
    free(v->chunk), free(v->chunk_of), free(v->lsegs);
    span_free(v->grads, m->n_params);
    span_free(v->buffers, m->n_buffers);
    arena_free(v->opt), arena_free(v->master), arena_free(v->dacts);
    arena_free(v->in_stage), arena_free(v->g_stage);
    free(v->segs), free(v->trust), free(v->ops), free(v->ev), free(v->prof);
    memset(v, 0, sizeof *v);
}

static int ipu_prepare(struct backend *b, const struct model *m, const struct run_config *cfg)
{
    struct ipu_ctx *c = b->ctx;
    struct ipu_plan *p = &c->p;
    struct timing_inst ti;
    memset(&ti, 0, sizeof ti);
    int st;
    c->m = m;
    c->cfg = *cfg;
    if (cfg->sync_bn)
        return tb_error_set(TB_EUNSUPPORTED, "ipu: --sync-bn is not supported (BatchNorm statistics are per micro-batch)");
    if (cfg->transport_mpi) return tb_error_set(TB_EUNSUPPORTED, "ipu: --transport mpi is not supported");
    if ((st = ipu_plan_resolve(p, m, cfg)) != TB_OK) return st;
    c->half = p->prec != IPU_PREC_FP32;
    c->segmented = p->recompute || c->half;
    const int S = p->S, R = p->R;
    c->D = S * R;
    c->per_in = m->tensors[m->input].per_sample;
    c->labels_bytes = ((size_t)p->B * sizeof(int32_t) + 63) / 64 * 64;
    c->loss_scale = p->prec != IPU_PREC_FP16 ? 1.0f : p->loss_scale > 0.0f ? p->loss_scale : LOSS_SCALE_INIT;
    fpenv_set(); /* the caller runs device 0 */
    openblas_set_num_threads(1);

    /* One whole-model instance of a micro-batch: tunes convolutions once for every stage, and times
     * each layer when the split is ours to choose. */
    if ((st = check_fits(c, 8.0 * (double)model_act_floats(m, p->B) + 12.0 * (double)m->n_params,
                         "the tuning instance")) != TB_OK)
        return st;
    if ((st = timing_init(&ti, m, cfg, p->B)) != TB_OK) goto fail;
    if (S > 1 && !p->split_given) {
        double *tf = calloc((size_t)m->n_layers, sizeof *tf), *tb = calloc((size_t)m->n_layers, sizeof *tb);
        if (!tf || !tb) {
            free(tf), free(tb);
            st = tb_error_set(TB_ENOMEM, "ipu: out of memory");
            goto fail;
        }
        /* About 1.5 GFLOP per pass: enough samples to time the kernels as they will run, not more. */
        const double f = model_train_flops_per_sample(m);
        int n = f > 0 ? (int)(1.5e9 / f) : p->B;
        if (n > p->B) n = p->B;
        if (n < 1) n = 1;
        const double t0 = tb_now_s();
        timing_measure(&ti, cfg, n, f * n > 5e9 ? 1 : 2, tf, tb);
        c->t_measure = tb_now_s() - t0;
        ipu_plan_balance(p, m, tf, tb);
        free(tf), free(tb);
    }
    timing_free_arenas(&ti); /* the stages need its convolution choices, not its memory */
    for (int s = 0; s < S; s++)
        if (p->l0[s] >= p->l0[s + 1]) {
            st = tb_error_set(TB_EINVAL, "ipu: stage %d of %s holds no layers (blocks %d..%d)", s, m->name,
                              p->first_block[s], p->first_block[s + 1] - 1);
            goto fail;
        }

    c->stage = calloc((size_t)S, sizeof *c->stage);
    c->dev = calloc((size_t)c->D, sizeof *c->dev);
    c->bar = calloc((size_t)S, sizeof *c->bar);
    c->gbufs = calloc((size_t)c->D, sizeof *c->gbufs);
    c->gbufs16 = calloc((size_t)c->D, sizeof *c->gbufs16);
    const size_t links = (size_t)R * (size_t)(S - 1);
    c->q_act = calloc(links + 1, sizeof *c->q_act);
    c->q_grad = calloc(links + 1, sizeof *c->q_grad);
    if (!c->stage || !c->dev || !c->bar || !c->gbufs || !c->gbufs16 || !c->q_act || !c->q_grad) {
        st = tb_error_set(TB_ENOMEM, "ipu: out of memory");
        goto fail;
    }
    for (int s = 0; s < S; s++) {
        tpool_barrier_init(&c->bar[s], R, c->D);
        if ((st = ipu_stage_model_init(&c->stage[s], m, p->l0[s], p->l0[s + 1])) != TB_OK) goto fail;
    }
    if ((st = check_fits(c, devices_bytes(c), "the devices")) != TB_OK) goto fail;
    /* The exchange: per replica, one activation and (when any crossing tensor needs one) one gradient
     * queue per boundary. */
    const size_t eb = ipu_prec_bytes(p->prec);
    const int depth = ipu_plan_queue_depth(p);
    for (int r = 0; r < R; r++)
        for (int s = 0; s + 1 < S; s++) {
            const size_t k = (size_t)r * (size_t)(S - 1) + (size_t)s;
            const int split = p->l0[s + 1];
            const size_t fa = exec_boundary_floats(m, split, p->B, 0), fg = exec_boundary_floats(m, split, p->B, 1);
            if ((st = ipu_queue_init(&c->q_act[k], depth, MSG_HDR + c->labels_bytes + fa * eb)) != TB_OK) goto fail;
            if (fg && (st = ipu_queue_init(&c->q_grad[k], depth, MSG_HDR + c->labels_bytes + fg * eb)) != TB_OK)
                goto fail;
        }
    if (p->prefetch > 0) {
        c->q_in = calloc((size_t)R, sizeof *c->q_in);
        if (!c->q_in) {
            st = tb_error_set(TB_ENOMEM, "ipu: out of memory");
            goto fail;
        }
        for (int r = 0; r < R; r++)
            if ((st = ipu_queue_init(&c->q_in[r], p->prefetch, MSG_HDR + c->labels_bytes + (size_t)p->B * c->per_in)) !=
                TB_OK)
                goto fail;
    }
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++)
            if ((st = dev_init(c, dev_at(c, s, r), s, r, &ti.mi)) != TB_OK) goto fail;
    timing_free(&ti);

    if (c->D > 1 && !(c->pool = tpool_create(c->D, 1))) {
        st = tb_error_set(TB_ENOMEM, "ipu: cannot start %d device workers", c->D);
        goto fail;
    }
    if (p->prefetch > 0) {
        pthread_mutex_init(&c->pf_mu, NULL);
        pthread_cond_init(&c->pf_cv, NULL);
        if (pthread_create(&c->pf_th, NULL, infeed_main, c) != 0) {
            st = tb_error_set(TB_ENOMEM, "ipu: cannot start the infeed worker");
            goto fail;
        }
        c->pf_started = 1;
    }
    if (cfg->timeline[0]) {
        if (!(c->timeline = fopen(cfg->timeline, "w"))) {
            st = tb_error_set(TB_EIO, "ipu: cannot create the timeline file '%s'", cfg->timeline);
            goto fail;
        }
        fprintf(c->timeline, "step,device,stage,replica,microbatch,phase,start_s,end_s\n");
        char path[300];
        snprintf(path, sizeof path, "%s.devices.csv", cfg->timeline);
        if (!(c->devlog = fopen(path, "w"))) {
            st = tb_error_set(TB_EIO, "ipu: cannot create the device log '%s'", path);
            goto fail;
        }
        fprintf(c->devlog, "step,device,stage,replica,span_s,compute_s,exchange_s,wait_s,idle_s,allreduce_s,update_s,"
                           "bytes_out,slots_peak\n");
    }
    return TB_OK;
fail:
    timing_free(&ti);
    return st;
}

/* ---- steps ---- */

static void write_timeline(struct ipu_ctx *c, double span)
{
    if (!c->timeline) return;
    for (int d = 0; d < c->D; d++) {
        const struct ipu_dev *v = &c->dev[d];
        for (int k = 0; k < v->n_ev; k++)
            fprintf(c->timeline, "%ld,%d,%d,%d,%d,%c,%.9f,%.9f\n", c->step, d, v->s, v->r, v->ev[k].mb, v->ev[k].kind,
                    v->ev[k].t0, v->ev[k].t1);
        const double idle = span - v->t_compute - v->t_exchange;
        fprintf(c->devlog, "%ld,%d,%d,%d,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.0f,%d\n", c->step, d, v->s, v->r, span,
                v->t_compute, v->t_exchange, v->t_wait, idle > 0 ? idle : 0.0, v->t_allreduce, v->t_update, v->bytes,
                v->peak_in_use);
    }
    fflush(c->timeline);
    fflush(c->devlog);
}

/* Keeps the step's events for backend_timeline (the result row's chart): the per-device logs are
 * reset by the next evaluation or step. Grows once; an allocation failure only empties the copy. */
static void keep_timeline(struct ipu_ctx *c)
{
    int n = 0;
    for (int d = 0; d < c->D; d++) n += c->dev[d].n_ev;
    if (n > c->cap_tl) {
        struct timeline_event *p = realloc(c->tl, (size_t)n * sizeof *p);
        if (!p) {
            c->n_tl = 0;
            return;
        }
        c->tl = p, c->cap_tl = n;
    }
    c->n_tl = 0;
    for (int d = 0; d < c->D; d++) {
        const struct ipu_dev *v = &c->dev[d];
        for (int k = 0; k < v->n_ev; k++)
            c->tl[c->n_tl++] = (struct timeline_event){d, v->s, v->r, v->ev[k].mb, v->ev[k].kind, v->ev[k].t0, v->ev[k].t1};
    }
}

static int ipu_timeline(struct backend *b, struct timeline_event *ev, int cap)
{
    const struct ipu_ctx *c = b->ctx;
    const int n = cap < c->n_tl ? cap : c->n_tl;
    if (n > 0) memcpy(ev, c->tl, (size_t)n * sizeof *ev);
    return c->n_tl;
}

/* Sums losses, fills the per-device-mean timings, and accumulates the bubble. */
static int collect(struct ipu_ctx *c, struct step_stats *st)
{
    const struct ipu_plan *p = &c->p;
    double span = 0.0, comp = 0.0, exch = 0.0, ar = 0.0, upd = 0.0, loss = 0.0;
    for (int d = 0; d < c->D; d++)
        if (c->dev[d].t_end > span) span = c->dev[d].t_end;
    /* The first step pays page faults and warm-up: the run's figures are over the later ones. */
    const int restart = c->n_steps == 1;
    if (restart) c->sum_span = c->sum_busy = 0.0;
    for (int d = 0; d < c->D; d++) {
        struct ipu_dev *v = &c->dev[d];
        comp += v->t_compute, exch += v->t_exchange, ar += v->t_allreduce, upd += v->t_update;
        const double idle = span - v->t_compute - v->t_exchange;
        if (restart) v->sum_compute = v->sum_exchange = v->sum_idle = v->sum_allreduce = v->sum_fwd = v->sum_bwd = 0.0;
        v->sum_compute += v->t_compute, v->sum_exchange += v->t_exchange, v->sum_idle += idle > 0 ? idle : 0;
        v->sum_allreduce += v->t_allreduce, v->sum_fwd += v->t_fwd, v->sum_bwd += v->t_bwd;
        if (v->peak_in_use > v->peak_in_use_all) v->peak_in_use_all = v->peak_in_use;
    }
    for (int r = 0; r < p->R; r++) loss += dev_at(c, p->S - 1, r)->loss;
    st->loss_sum = loss;
    st->t_compute = comp / c->D;
    st->t_exchange = exch / c->D;
    st->t_idle = span - st->t_compute - st->t_exchange;
    if (st->t_idle < 0) st->t_idle = 0;
    st->t_allreduce = ar / c->D;
    if (c->do_update) st->t_update = upd / c->D;
    c->sum_span += span * c->D;
    c->sum_busy += comp + exch;
    c->n_steps++;
    write_timeline(c, span);
    keep_timeline(c);
    if (!isfinite(loss)) {
        st->nonfinite = 1;
        return tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", loss, c->step);
    }
    return TB_OK;
}

/* fp16: a step whose gradients overflowed the exchange is skipped (and counted); a dynamic loss
 * scale then halves, and doubles again after LOSS_SCALE_GROW clean steps; a static one stays. A scale
 * that can go no lower (static, or dynamic at 1) and still overflows OVERFLOW_DIVERGED steps in a row
 * trains nothing: the run has diverged (TB_EDIVERGED), as a non-finite loss has in fp32. */
static int loss_scale_after_update(struct ipu_ctx *c, struct step_stats *st)
{
    if (c->p.prec != IPU_PREC_FP16) return TB_OK;
    if (c->overflowed) {
        c->skipped_steps++;
        c->clean_steps = 0;
        const int floor = c->p.loss_scale > 0.0f || c->loss_scale <= 1.0f;
        c->overflow_run = floor ? c->overflow_run + 1 : 0;
        if (c->p.loss_scale == 0.0f && c->loss_scale > 1.0f) c->loss_scale *= 0.5f;
        if (c->overflow_run >= OVERFLOW_DIVERGED) {
            st->nonfinite = 1;
            return tb_error_set(TB_EDIVERGED,
                                "fp16 gradients overflowed on %d steps in a row at %s loss scale %g (step %ld): "
                                "lower --lr%s",
                                c->overflow_run, c->p.loss_scale > 0.0f ? "the static" : "the lowest",
                                (double)c->loss_scale, c->step, c->p.loss_scale > 0.0f ? " or --loss-scale" : "");
        }
    } else {
        c->overflow_run = 0;
        if (c->p.loss_scale == 0.0f && ++c->clean_steps >= LOSS_SCALE_GROW) {
            c->clean_steps = 0;
            if (c->loss_scale < 16777216.0f) c->loss_scale *= 2.0f;
        }
    }
    return TB_OK;
}

static int run_train(struct ipu_ctx *c, const struct batch *batch, long step, int do_update, struct step_stats *st)
{
    c->mode = MODE_TRAIN;
    c->batch = batch;
    c->step = step;
    c->do_update = do_update;
    atomic_store(&c->overflow, 0);
    c->t0 = tb_now_s();
    if (c->pf_started) infeed_start_step(c, batch);
    run_devices(c);
    if (c->pf_started) infeed_wait_step(c);
    c->overflowed = atomic_load(&c->overflow);
    int rc = collect(c, st);
    if (do_update && rc == TB_OK) rc = loss_scale_after_update(c, st);
    return rc;
}

static int ipu_forward_backward(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    return run_train(b->ctx, batch, step, 0, st);
}

static int ipu_train_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    return run_train(b->ctx, batch, step, 1, st);
}

static int ipu_update(struct backend *b, long step, struct step_stats *st)
{
    struct ipu_ctx *c = b->ctx;
    c->mode = MODE_UPDATE;
    c->step = step;
    atomic_store(&c->overflow, c->overflowed);
    c->t0 = tb_now_s();
    run_devices(c);
    return loss_scale_after_update(c, st);
}

static int ipu_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev)
{
    struct ipu_ctx *c = b->ctx;
    /* The last stage's devices hold only micro-batch logits in turn; not collected. */
    if (ev->logits) return tb_error_set(TB_EUNSUPPORTED, "ipu: evaluation logits are not collected (use cpu or threads)");
    if (batch->n <= 0) return TB_OK;
    c->mode = MODE_EVAL;
    c->batch = batch;
    c->t0 = tb_now_s();
    run_devices(c);
    for (int r = 0; r < c->p.R; r++) {
        const struct ipu_dev *v = dev_at(c, c->p.S - 1, r);
        ev->loss_sum += v->loss, ev->correct += v->correct, ev->n += v->n_done;
    }
    return TB_OK;
}

/* ---- canonical tensors: stage slices assembled / scattered ---- */

/* Optimizer state between a device and the canonical (spp, n_params) layout: out non-NULL copies the
 * device's slice out, else in's slice in. fp32 keeps it as (spp, p1−p0); half precision per layer chunk,
 * (spp, w1−w0) at spp·(w0−p0), so each layer's update is one optimizer call on its own window. */
static void opt_copy(const struct ipu_dev *v, float *out, const float *in)
{
    const size_t np = v->c->m->n_params, n = v->p1 - v->p0;
    const size_t spp = (size_t)optim_state_per_param(v->c->cfg.optim.kind);
    if (!v->chunk) {
        for (size_t k = 0; k < spp; k++) {
            if (out) memcpy(out + k * np + v->p0, v->opt + k * n, n * sizeof(float));
            else memcpy(v->opt + k * n, in + k * np + v->p0, n * sizeof(float));
        }
        return;
    }
    if (out)
        for (size_t k = 0; k < spp; k++) memset(out + k * np + v->p0, 0, n * sizeof(float)); /* the gaps */
    for (int j = 0; j < v->n_chunk; j++) {
        const struct ipu_chunk *ch = &v->chunk[j];
        const size_t len = ch->w1 - ch->w0;
        for (size_t k = 0; k < spp; k++) {
            float *dev = v->opt + spp * (ch->w0 - v->p0) + k * len;
            if (out) memcpy(out + k * np + ch->w0, dev, len * sizeof(float));
            else memcpy(dev, in + k * np + ch->w0, len * sizeof(float));
        }
    }
}

static int ipu_get(struct backend *b, enum tensor_family f, float *dst)
{
    struct ipu_ctx *c = b->ctx;
    for (int s = 0; s < c->p.S; s++) {
        const struct ipu_dev *v = dev_at(c, s, 0); /* replicas hold the same values (BN buffers: replica 0's) */
        const size_t n = v->p1 - v->p0;
        switch (f) {
        case TF_PARAMS:
            if (v->master) memcpy(dst + v->p0, v->master, n * sizeof(float));
            else if (v->w16) ipu_prec_unpack(dst + v->p0, v->w16, n, c->p.prec, 1.0f);
            else memcpy(dst + v->p0, v->params + v->p0, n * sizeof(float));
            break;
        case TF_GRADS:
            if (v->g16) ipu_prec_unpack(dst + v->p0, v->g16, n, c->p.prec, 1.0f / grad_scale(c));
            else memcpy(dst + v->p0, v->grads + v->p0, n * sizeof(float));
            break;
        case TF_OPT: opt_copy(v, dst, NULL); break;
        case TF_BUFFERS: memcpy(dst + v->q0, v->buffers + v->q0, (v->q1 - v->q0) * sizeof(float)); break;
        }
    }
    return TB_OK;
}

static int ipu_set(struct backend *b, enum tensor_family f, const float *src)
{
    struct ipu_ctx *c = b->ctx;
    for (int d = 0; d < c->D; d++) {
        struct ipu_dev *v = &c->dev[d];
        const size_t n = v->p1 - v->p0;
        switch (f) {
        case TF_PARAMS:
            if (v->master) memcpy(v->master, src + v->p0, n * sizeof(float));
            /* Stored weights are half precision: what a device holds is the nearest half value. */
            if (v->w16) ipu_prec_pack(v->w16, src + v->p0, n, c->p.prec, 1.0f);
            else memcpy(v->params + v->p0, src + v->p0, n * sizeof(float));
            break;
        case TF_GRADS:
            if (v->g16) ipu_prec_pack(v->g16, src + v->p0, n, c->p.prec, grad_scale(c));
            else memcpy(v->grads + v->p0, src + v->p0, n * sizeof(float));
            break;
        case TF_OPT: opt_copy(v, NULL, src); break;
        case TF_BUFFERS: memcpy(v->buffers + v->q0, src + v->q0, (v->q1 - v->q0) * sizeof(float)); break;
        }
    }
    return TB_OK;
}

/* Activation memory stage s uses, with the micro-batches it held at once (measured): its gradient
 * arena plus a whole-stage slot per micro-batch held; with segments, the working slot and the
 * gradient arena (both the largest segment's), the fp32 gradient and input passed between segments,
 * and a stash per micro-batch held (recompute: the stage input plus segment inputs; half storage:
 * every activation of the stage at 2 bytes). */
static double stage_act_bytes(const struct ipu_ctx *c, int s)
{
    const struct ipu_dev *v = &c->dev[s]; /* replica 0 */
    const int held = v->peak_in_use_all > 0 ? v->peak_in_use_all : ipu_plan_in_flight(&c->p, s);
    double bytes = (double)v->act_floats * 4.0;
    if (c->segmented)
        bytes += (double)v->act_floats * 4.0 + (double)(v->seg_grad_floats + v->seg_in_floats) * 4.0 +
                 (double)held * (double)v->stash_bytes;
    else
        bytes += (double)held * (double)v->act_floats * 4.0;
    return bytes;
}

static int ipu_pipeline_report(struct backend *b, struct pipeline_report *r);

static int ipu_n_devices(struct backend *b)
{
    struct pipeline_report r;
    ipu_pipeline_report(b, &r);
    return r.stages * r.replicas;
}

static int ipu_pipeline_report(struct backend *b, struct pipeline_report *r)
{
    struct ipu_ctx *c = b->ctx;
    const struct ipu_plan *p = &c->p;
    memset(r, 0, sizeof *r);
    r->stages = p->S, r->micro_batch = p->B, r->ga = p->G, r->replicas = p->R;
    const long steps = c->n_steps > 1 ? c->n_steps - 1 : c->n_steps;
    const double eb = (double)ipu_prec_bytes(p->prec);
    for (int s = 0; s < p->S && s < BACKEND_MAX_STAGES; s++) {
        double f = 0, bw = 0, cp = 0, ex = 0, id = 0, ar = 0;
        for (int k = 0; k < p->R; k++) {
            const struct ipu_dev *v = dev_at(c, s, k);
            f += v->sum_fwd, bw += v->sum_bwd, cp += v->sum_compute, ex += v->sum_exchange, id += v->sum_idle;
            ar += v->sum_allreduce;
        }
        const double per_mb = steps > 0 ? 1.0 / ((double)steps * p->G * p->R) : 0.0;
        const double per_step = steps > 0 ? 1.0 / ((double)steps * p->R) : 0.0;
        r->t_fwd[s] = f * per_mb, r->t_bwd[s] = bw * per_mb;
        r->t_compute[s] = cp * per_step, r->t_exchange[s] = ex * per_step, r->t_idle[s] = id * per_step;
        r->t_allreduce[s] = ar * per_step;
        const struct ipu_dev *v = dev_at(c, s, 0);
        r->exchange_bytes[s] = eb * (double)(exec_boundary_floats(c->m, v->l0, p->B, 0) +
                                             exec_boundary_floats(c->m, v->l1, p->B, 1));
        r->param_bytes[s] = (v->g16 ? 2.0 : 4.0) * (double)(v->p1 - v->p0);
        r->peak_act_bytes[s] = stage_act_bytes(c, s);
        const double np = (double)(v->p1 - v->p0);
        r->weight_bytes[s] = (v->w16 ? 2.0 : 4.0) * np + (v->master ? 4.0 * np : 0.0);
        r->weight_window_bytes[s] = 4.0 * (double)v->wwin_floats;
    }
    r->bubble_ideal = ipu_plan_ideal_bubble(p);
    r->loss_scale = c->loss_scale;
    r->loss_scale_static = p->loss_scale > 0.0f;
    r->skipped_steps = c->skipped_steps;
    r->bubble_measured = c->sum_span > 0 ? 1.0 - c->sum_busy / c->sum_span : NAN;
    return TB_OK;
}

/* Replica 0's stages together hold every layer once. */
static int ipu_layer_profile(struct backend *b, double *prof)
{
    struct ipu_ctx *c = b->ctx;
    const int L = c->m->n_layers;
    if (!c->dev || !c->dev[0].prof) return tb_error_set(TB_EUNSUPPORTED, "ipu: prepared without --profile");
    memset(prof, 0, 2 * (size_t)L * sizeof(double));
    for (int s = 0; s < c->p.S; s++) {
        const struct ipu_dev *v = dev_at(c, s, 0);
        for (int i = v->l0; i < v->l1; i++) prof[2 * i] = v->prof[2 * i], prof[2 * i + 1] = v->prof[2 * i + 1];
    }
    return TB_OK;
}

static void ipu_describe(struct backend *b, char *buf, size_t n)
{
    struct ipu_ctx *c = b->ctx;
    const struct ipu_plan *p = &c->p;
    if (!c->dev) {
        snprintf(buf, n, "ipu: not prepared");
        return;
    }
    char split[160] = "";
    for (int s = 1; s < p->S; s++) {
        char t[16];
        snprintf(t, sizeof t, "%s%d", s > 1 ? "," : "", p->first_block[s]);
        strncat(split, t, sizeof split - strlen(split) - 1);
    }
    char mem[256] = "";
    for (int s = 0; s < p->S; s++) {
        char t[32];
        snprintf(t, sizeof t, "%s%.1f", s ? "/" : "", stage_act_bytes(c, s) / 1048576.0);
        strncat(mem, t, sizeof mem - strlen(mem) - 1);
    }
    char rec[96] = "";
    if (c->segmented) {
        snprintf(rec, sizeof rec, ", %s (segments ", p->recompute ? "recompute" : "2-byte store");
        for (int s = 0; s < p->S; s++) {
            char t[16];
            snprintf(t, sizeof t, "%s%d", s ? "/" : "", dev_at(c, s, 0)->n_seg);
            strncat(rec, t, sizeof rec - strlen(rec) - 1);
        }
        strncat(rec, ")", sizeof rec - strlen(rec) - 1);
    }
    char meas[96] = "";
    if (c->n_steps > 0 && c->sum_span > 0)
        snprintf(meas, sizeof meas, ", measured %.1f%% over %ld step%s", 100.0 * (1.0 - c->sum_busy / c->sum_span),
                 c->n_steps > 1 ? c->n_steps - 1 : 1, c->n_steps > 2 ? "s" : "");
    char scale[64] = "";
    if (p->prec == IPU_PREC_FP16) {
        /* Before any step (the harness takes this line at prepare) there is no count to give. */
        char skipped[40] = "";
        if (c->n_steps > 0) snprintf(skipped, sizeof skipped, ", %ld steps skipped", c->skipped_steps);
        snprintf(scale, sizeof scale, ", loss scale %g (%s%s)", (double)c->loss_scale,
                 p->loss_scale > 0.0f ? "static" : "dynamic", skipped);
    }
    /* Most important first: the harness keeps a bounded prefix of this line. */
    snprintf(buf, n,
             "ipu: %d stage%s x %d replica%s, global batch %d = micro-batch %d x GA %d x %d, %s, split %s (%s), "
             "%s%s%s%s, prefetch %d; bubble ideal %.1f%%%s; act MiB/stage %s",
             p->S, p->S == 1 ? "" : "s", p->R, p->R == 1 ? "" : "s", c->cfg.batch, p->B, p->G, p->R,
             ipu_schedule_name(p->sched), p->S > 1 ? split : "-",
             p->S == 1 ? "one stage" : p->split_given ? "given" : "timed", ipu_prec_name(p->prec),
             p->master ? " + fp32 master" : "", scale, rec, p->prefetch,
             100.0 * ipu_plan_ideal_bubble(p), meas, mem);
}

static void ipu_destroy(struct backend *b)
{
    struct ipu_ctx *c = b->ctx;
    if (!c) return;
    if (c->pf_started) {
        pthread_mutex_lock(&c->pf_mu);
        c->pf_stop = 1;
        pthread_cond_broadcast(&c->pf_cv);
        pthread_mutex_unlock(&c->pf_mu);
        pthread_join(c->pf_th, NULL);
        pthread_mutex_destroy(&c->pf_mu);
        pthread_cond_destroy(&c->pf_cv);
    }
    tpool_destroy(c->pool);
    if (c->dev)
        for (int d = 0; d < c->D; d++) dev_free(c, &c->dev[d]);
    const size_t links = (size_t)c->p.R * (size_t)(c->p.S > 0 ? c->p.S - 1 : 0);
    if (c->q_act)
        for (size_t k = 0; k < links; k++) ipu_queue_free(&c->q_act[k]);
    if (c->q_grad)
        for (size_t k = 0; k < links; k++) ipu_queue_free(&c->q_grad[k]);
    if (c->q_in)
        for (int r = 0; r < c->p.R; r++) ipu_queue_free(&c->q_in[r]);
    if (c->stage)
        for (int s = 0; s < c->p.S; s++) ipu_stage_model_free(&c->stage[s]);
    if (c->timeline) fclose(c->timeline);
    if (c->devlog) fclose(c->devlog);
    free(c->tl);
    free(c->q_act), free(c->q_grad), free(c->q_in), free(c->stage), free(c->dev), free(c->bar);
    free(c->gbufs), free(c->gbufs16);
    free(c);
    b->ctx = NULL;
}

static const struct backend_i ipu_iface = {
    .name = "ipu", .prepare = ipu_prepare, .forward_backward = ipu_forward_backward, .update = ipu_update,
    .evaluate = ipu_evaluate, .get_tensors = ipu_get, .set_tensors = ipu_set, .destroy = ipu_destroy,
    .train_step = ipu_train_step, .describe = ipu_describe, .pipeline_report = ipu_pipeline_report,
    .n_devices = ipu_n_devices,
    .layer_profile = ipu_layer_profile,
    .timeline = ipu_timeline,
};

int backend_ipu_create(struct backend *b)
{
    struct ipu_ctx *c = calloc(1, sizeof *c);
    if (!c) return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    b->i = &ipu_iface;
    b->ctx = c;
    return TB_OK;
}
