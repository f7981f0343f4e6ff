/* ipu_stage.c — one ipu device's stage memory and precision: building a device (parameter slices in
 * committed address spaces, optimizer state, activation slots or segments with their stashes, the
 * half-precision weight windows and per-layer chunks, its queue ends and op order) and freeing it;
 * running a stage's layers in half precision (weights decoded per layer, outputs rounded onto the half
 * grid, gradients stored back in 2 bytes); segments for recomputation and half storage (checkpoints,
 * stored activations, the forward and the backward walk over segments); and the activation memory a
 * stage uses. A device's memory is touched only by its own worker.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "arena.h"
#include "clock.h"
#include "layout.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void ipu_run1(void *ctx, void (*fn)(void *, int, int), void *arg)
{
    (void)ctx;
    fn(arg, 0, 1);
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
const struct model_inst *ipu_seg_forward_all(struct ipu_dev *v, const struct exec_step *st, void *stash, int keep)
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
const struct model_inst *ipu_seg_backward_all(struct ipu_dev *v, int mb, const struct exec_step *st, void *stash)
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

/* ---- building and freeing a device ---- */

/* Without recomputation: a whole-stage activation slot per micro-batch in flight, one gradient arena. */
static int dev_init_slots(struct ipu_ctx *c, struct ipu_dev *v, int in_flight, const struct model_inst *tuned)
{
    const int B = c->p.B;
    struct exec_runner run = {ipu_run1, NULL, NULL, 1};
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
    struct exec_runner run = {ipu_run1, NULL, NULL, 1};
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

int ipu_dev_init(struct ipu_ctx *c, struct ipu_dev *v, int s, int r, const struct model_inst *tuned)
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

void ipu_dev_free(struct ipu_ctx *c, struct ipu_dev *v)
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

/* Activation memory stage s uses, with the micro-batches it held at once (measured): its gradient
 * arena plus a whole-stage slot per micro-batch held; with segments, the working slot and the
 * gradient arena (both the largest segment's), the fp32 gradient and input passed between segments,
 * and a stash per micro-batch held (recompute: the stage input plus segment inputs; half storage:
 * every activation of the stage at 2 bytes). */
double ipu_stage_act_bytes(const struct ipu_ctx *c, int s)
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
