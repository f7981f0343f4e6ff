/* stage_engine.h — the cpu device's stage executor (executor_config.l1 > 0), private to its two files:
 * executor_cpu_stage.c (building and freeing it, its executor_i: update, tensors, boundaries, stats) and
 * stage_run.c (its passes: whole-stage slots, or segments for recomputation and half-precision storage).
 * Not an interface: executor.h is.
 *
 * Memory: the stage's parameters, gradients and buffers keep the canonical offsets in an address space
 * of which only its slice is committed; optimizer state (and fp32 master weights) is compact. With half
 * precision the weights and gradients are 2-byte (w16, g16) and each layer's are decoded into fp32
 * windows while it runs; its optimizer state is laid out per layer chunk. Touched only by the thread
 * that drives the executor.
 */
#ifndef TB_STAGE_ENGINE_H
#define TB_STAGE_ENGINE_H

#include "exec.h"
#include "executor.h"
#include "stage_precision.h"

#include <stdint.h>

#define STAGE_MAX_BOUNDARY 32 /* tensors crossing one split */

/* One segment of a stage (whole blocks), with its own compact activation plan; every segment's
 * instance works in the stage's one working slot and gradient arena. */
struct stage_seg {
    int l0, l1;                       /* layers [l0,l1) */
    struct model plan;                /* the tensors the segment touches (model_range_init) */
    struct model_inst mi;             /* acts = the working slot, dacts = the gradient arena */
    size_t ck_off;                    /* bytes into a stash: this segment's input checkpoint (recompute)
                                         or its stored activations (half storage) */
    int *f32_ids, n_f32;              /* half storage: per-sample saved data kept exact (GroupNorm μ, rstd) */
};

/* Half precision: one layer's weights — canonical range [w0,w1), decoded into the fp32 window while the
 * layer runs; its optimizer state sits at spp·(w0−p0) laid out (spp, w1−w0); its tensors for the update
 * are lsegs[seg0 .. seg0+nseg), rebased to w0. */
struct stage_chunk {
    size_t w0, w1;
    int seg0, nseg;
};

struct stage_engine {
    const struct model *m;
    struct executor_config cfg;       /* cfg.cuts points at cuts */
    int *cuts;                        /* (n_seg + 1) the segments' first layers, then l1 */
    int l0, l1, B;                    /* layers [l0,l1); samples per pass (n_max) */
    int half;                         /* prec is bf16 or fp16 */
    size_t per_in;                    /* uint8 bytes of one input sample */
    struct model sm;                  /* the stage's activation plan */
    size_t p0, p1, q0, q1;            /* its parameter and buffer ranges in the canonical layout */
    float *params, *grads;            /* (n_params) address space, only [p0,p1) committed and touched;
                                         both NULL with half precision (w16, g16 hold them) */
    uint16_t *w16;                    /* half precision: (p1−p0) the weights as stored, 2 bytes each */
    uint16_t *g16;                    /* half precision: (p1−p0) the accumulated gradients, 2 bytes each
                                         (fp16: times grad_scale) */
    float *wwin, *gwin;               /* half precision: (wwin_floats) one layer's weights, gradients in fp32 */
    size_t wwin_floats;
    struct stage_chunk *chunk;        /* half precision: (n_chunk) the layers with weights, in order */
    int n_chunk;
    int *chunk_of;                    /* (l1−l0) layer → chunk index, −1 without weights */
    struct optim_segment *lsegs;      /* half precision: (n_segs) the update's tensors rebased per chunk */
    float *buffers;                   /* (n_buffers) address space, only [q0,q1) touched */
    float *opt;                       /* (state_per_param, p1−p0) */
    float *master;                    /* (p1−p0) fp32 master weights, or NULL */
    struct optim_segment *segs;       /* (n_segs) rebased to p0 */
    int n_segs;
    float *trust;                     /* LARS: (n_segs) */
    int n_slots;                      /* activation slots (0 with segments) */
    struct model_inst *slot;          /* (n_slots) share params, grads, buffers, dacts, scratch */
    float *dacts;                     /* (act_floats) one backward at a time */
    size_t act_floats;                /* floats of one activation slot (with segments: the largest segment's) */
    /* segments (recompute, half storage): the stage cut at block boundaries, run one at a time in one slot */
    int n_seg;
    struct stage_seg *seg;            /* (n_seg) */
    float *work;                      /* (act_floats) the working slot */
    float *seg_grad;                  /* (seg_grad_floats) gradients crossing a segment boundary, fp32 */
    size_t seg_grad_floats;
    float *seg_in;                    /* half storage: (seg_in_floats) a segment's input, decoded to fp32 */
    size_t seg_in_floats;
    float *seg_losses;                /* (B) what the segment instances share */
    uint8_t *seg_correct;             /* (B) */
    int32_t *seg_labels;              /* (B) */
    int n_stash;                      /* segments: one stash per slot */
    void **stash;                     /* (n_stash) recompute: the stage input (uint8 pixels at layer 0,
                                         else boundary activations), then each later segment's input;
                                         half storage without recompute: every segment's activations.
                                         Activations in the storage precision */
    size_t stash_bytes, in_bytes;     /* one checkpoint set; its stage input part */
    int resident;                     /* slot whose last segment the working slot holds, −1 none */
    int in_ids[STAGE_MAX_BOUNDARY], n_in;   /* tensors crossing the split before l0 */
    int out_ids[STAGE_MAX_BOUNDARY], n_out; /* tensors crossing the split before l1 */
    float *in_stage;                  /* (B, in floats) decoded incoming activations (half exchange) */
    float *g_stage;                   /* (B, out grad floats) decoded incoming gradients (half exchange) */
    const float *in_act;              /* imported activations for the next forward (fp32, packed) */
    const float *out_dact;            /* imported gradients for the next backward (fp32, packed) */
    float grad_scale;                 /* fp16: gradients are stored times this (the loss scale) */
    long nonfinite_grads;             /* since zero_grads: gradients that overflowed their 2-byte store */
    double t_recompute;               /* the last backward's recomputation seconds */
    double *prof;                     /* --profile: (n_layers, 2) seconds, only this stage's layers */
    int *algos;                       /* (n_layers) the prepared convolution algorithms (slot 0 or segment 0), for
                                         stats (NULL before) */
};

/* ---- stage_run.c ---- */

/* The forward of pass st (layers [l0,l1)) for slot `slot`; keep = 0 (evaluation): nothing kept for a
 * backward. Returns the instance that holds the stage's last layers' outputs. */
const struct model_inst *stage_run_forward(struct stage_engine *e, const struct exec_step *st, int slot, int keep);
/* The backward of slot's micro-batch (st->out_dact: the gradient arriving at l1, NULL at the loss);
 * recomputes or decodes segments as needed. Returns the instance that holds the gradients at l0. */
const struct model_inst *stage_run_backward(struct stage_engine *e, const struct exec_step *st, int slot);
/* Packs the activations (grads = 0) or gradients (grads = 1) of the tensors crossing `split` out of
 * instance mi into dst (exec's packed layout, values of precision prec times scale); returns how many
 * packed values are not finite. */
size_t stage_boundary_pack(const struct model_inst *mi, int split, int grads, int n, void *dst, enum stage_prec prec,
                           float scale);
/* Builds the stage's activation slots (without segments) or its segments, stashes and working slot. */
int stage_init_activations(struct stage_engine *e);
/* Frees what stage_init_activations made. */
void stage_free_activations(struct stage_engine *e);

#endif
