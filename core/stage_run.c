/* stage_run.c — the passes of the cpu device's stage executor (stage_engine.h): whole-stage activation
 * slots, or the stage cut into segments run one at a time in one working slot, for recomputation
 * (checkpoints of each segment's input, the backward recomputing them) and half-precision storage
 * (each segment's activations stored per micro-batch in 2 bytes, decoded back for its backward);
 * half precision runs layers one at a time with their weights decoded into an fp32 window and their
 * outputs rounded onto the half grid. Also the memory behind them. Runs on the thread that drives the
 * executor; kernels compute in fp32 whatever the storage.
 */
#include "stage_engine.h"

#include "arena.h"
#include "clock.h"
#include "layout.h"
#include "model_range.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

static void run1(void *ctx, void (*fn)(void *, int, int), void *arg)
{
    (void)ctx;
    fn(arg, 0, 1);
}

/* Checkpoints are exact in either precision (with half storage every activation already lies on the
 * half grid), and the gradients passed between segments travel in fp32, so recomputation changes no
 * bit. */
size_t stage_boundary_pack(const struct model_inst *mi, int split, int grads, int n, void *dst, enum stage_prec prec,
                           float scale)
{
    int ids[STAGE_MAX_BOUNDARY];
    const int k = model_boundary_tensors(mi->m, split, ids, STAGE_MAX_BOUNDARY);
    TB_ASSERT(k <= STAGE_MAX_BOUNDARY);
    const size_t eb = stage_prec_bytes(prec);
    size_t off = 0, bad = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &mi->m->tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        bad += stage_prec_pack((char *)dst + off * eb, grads ? exec_dact(mi, ids[j]) : exec_act(mi, ids[j]), len, prec,
                               scale);
        off += tb_align16(len);
    }
    return bad;
}

static inline size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* Half storage: bytes of segment g's stored activations for B samples — the 2-byte per-sample area,
 * the fixed saved data (BatchNorm μ, rstd) in fp32, and per-sample saved data (GroupNorm) in fp32. */
static size_t seg_store_bytes(const struct stage_seg *g, int B)
{
    const struct model *sm = &g->plan;
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
static void seg_transfer(const struct stage_engine *e, const struct stage_seg *g, void *stash, int store)
{
    const struct model *sm = &g->plan;
    const size_t unit = sm->unit_floats * (size_t)e->B;
    char *d = (char *)stash + g->ck_off;
    if (store) stage_prec_pack(d, e->work, unit, e->cfg.prec, 1.0f);
    else stage_prec_unpack(e->work, d, unit, e->cfg.prec, 1.0f);
    d += align64(unit * 2);
    for (int j = -1; j < g->n_f32; j++) { /* j = −1: the fixed area after the per-sample one */
        float *w = j < 0 ? e->work + unit : exec_act(&g->mi, g->f32_ids[j]);
        const size_t bytes = (j < 0 ? sm->fixed_floats : (size_t)e->B * sm->tensors[g->f32_ids[j]].per_sample) *
                             sizeof(float);
        if (store) memcpy(d, w, bytes);
        else memcpy(w, d, bytes);
        d += align64(bytes);
    }
}

/* Half precision: instance mi seeing layer l's weights (and, with grads, its accumulated gradients),
 * decoded from their 2-byte stores into the fp32 windows (mi itself for a layer without). */
static struct model_inst layer_inst(const struct stage_engine *e, const struct model_inst *mi, int l, int grads)
{
    struct model_inst li = *mi;
    const int j = e->chunk_of[l - e->l0];
    if (j < 0) return li;
    const struct stage_chunk *ch = &e->chunk[j];
    stage_prec_unpack(e->wwin, e->w16 + (ch->w0 - e->p0), ch->w1 - ch->w0, e->cfg.prec, 1.0f);
    li.params = e->wwin, li.param_base = ch->w0;
    if (grads) {
        stage_prec_unpack(e->gwin, e->g16 + (ch->w0 - e->p0), ch->w1 - ch->w0, e->cfg.prec, 1.0f / e->grad_scale);
        li.grads = e->gwin;
    }
    return li;
}

/* Half precision: layer l's gradients, accumulated in the window by its backward, back into their
 * 2-byte store (fp16: times the loss scale; an overflow is counted: the schedule skips the step). */
static void grads_store(struct stage_engine *e, int l)
{
    const int j = e->chunk_of[l - e->l0];
    if (j < 0) return;
    const struct stage_chunk *ch = &e->chunk[j];
    e->nonfinite_grads +=
        (long)stage_prec_pack(e->g16 + (ch->w0 - e->p0), e->gwin, ch->w1 - ch->w0, e->cfg.prec, e->grad_scale);
}

/* Layers [st->l0, st->l1) of instance mi. Half precision runs them one at a time, each with its weights
 * decoded into the window, and rounds each output onto the half grid (to nearest) as soon as it is
 * written, so every reader — and the 2-byte store, which is then lossless — sees what a half-precision
 * device holds; kernels still compute and accumulate in fp32. */
static void half_forward(const struct stage_engine *e, const struct model_inst *mi, const struct exec_step *st)
{
    if (!e->half) {
        exec_forward(mi, st, 0, 1, NULL);
        return;
    }
    struct exec_step one = *st;
    for (int l = st->l0; l < st->l1; l++) {
        one.l0 = l, one.l1 = l + 1;
        const struct model_inst li = layer_inst(e, mi, l, 0);
        exec_forward(&li, &one, 0, 1, NULL);
        one.in_act = NULL; /* copied into the slots before the first layer */
        const struct layer *ly = &mi->m->layers[l];
        if (ly->op != OP_SOFTMAX_CE)
            stage_prec_round(exec_act(mi, ly->out), (size_t)st->n * mi->m->tensors[ly->out].per_sample, e->cfg.prec, 0,
                             0, 0, 0);
    }
}

/* Layers [st->l1−1 .. st->l0] of instance mi backward; half precision runs them one at a time, each
 * with its weights and gradient accumulators decoded into the windows, the gradients stored back after
 * (the gradient arriving in st->out_dact is taken once, by the first). */
static void half_backward(struct stage_engine *e, const struct model_inst *mi, const struct exec_step *st)
{
    if (!e->half) {
        exec_backward(mi, st, 0, 1, NULL);
        return;
    }
    struct exec_step one = *st;
    for (int l = st->l1 - 1; l >= st->l0; l--) {
        one.l0 = l, one.l1 = l + 1;
        const struct model_inst li = layer_inst(e, mi, l, 1);
        exec_backward(&li, &one, 0, 1, NULL);
        grads_store(e, l);
        one.out_dact = NULL;
    }
}

/* Recompute: segment k's input checkpoint inside a stash (k = 0: the stage input). */
static inline void *seg_ckpt(const struct stage_engine *e, void *stash, int k)
{
    return (char *)stash + e->seg[k].ck_off;
}

/* Segments: the stage's forward one segment at a time in the working slot, from st (x or in_act: the
 * stage input). Recompute keeps each later segment's input in stash; half storage without it keeps
 * each segment's activations there (keep = 0: evaluation, nothing kept but what the next segment
 * reads). The working slot then holds the last segment. */
static void seg_forward_all(struct stage_engine *e, const struct exec_step *st, void *stash, int keep)
{
    const int stored = e->half && !e->cfg.recompute;
    for (int k = 0; k < e->n_seg; k++) {
        const struct stage_seg *g = &e->seg[k];
        struct exec_step ss = *st;
        ss.l0 = g->l0, ss.l1 = g->l1;
        if (k > 0) ss.x = NULL, ss.in_act = e->half ? e->seg_in : seg_ckpt(e, stash, k);
        half_forward(e, &g->mi, &ss);
        const int more = k + 1 < e->n_seg;
        /* A stage ending at the loss runs its backward right after its forward: its last segment stays
         * resident. */
        if (stored && keep && (more || e->l1 < e->m->n_layers)) seg_transfer(e, g, stash, 1);
        if (!more) continue;
        if (e->cfg.recompute)
            stage_boundary_pack(&g->mi, g->l1, 0, st->n, seg_ckpt(e, stash, k + 1), e->cfg.prec, 1.0f);
        if (e->half) stage_boundary_pack(&g->mi, g->l1, 0, st->n, e->seg_in, STAGE_PREC_FP32, 1.0f);
    }
}

const struct model_inst *stage_run_forward(struct stage_engine *e, const struct exec_step *st, int slot, int keep)
{
    const struct model_inst *mi;
    if (!e->n_seg) {
        mi = &e->slot[slot];
        exec_forward(mi, st, 0, 1, NULL);
    } else {
        void *stash = e->stash[slot];
        if (keep && e->cfg.recompute) { /* the stage input: the first segment's checkpoint */
            if (e->l0 == 0) memcpy(stash, st->x, (size_t)st->n * e->per_in);
            else stage_prec_pack(stash, st->in_act, model_boundary_floats(&e->sm, e->l0, st->n, 0), e->cfg.prec, 1.0f);
        }
        seg_forward_all(e, st, stash, keep);
        mi = &e->seg[e->n_seg - 1].mi;
    }
    e->resident = keep ? slot : -1;
    return mi;
}

/* Segments: the stage's backward from its last segment to its first; each segment but a resident
 * last one is first recomputed from its checkpoint (BatchNorm must not count the same batch
 * statistics twice; dropout and augmentation are counter-based: the same draws), or decoded from
 * its 2-byte store, and the gradient at its input boundary is handed to the one before. st->out_dact:
 * the gradient arriving from the next stage, NULL at the loss (its forward seeded the gradient). */
static void seg_backward_all(struct stage_engine *e, const struct exec_step *st, int slot)
{
    void *stash = e->stash[slot];
    const int K = e->n_seg;
    double t_rec = 0.0;
    for (int k = K - 1; k >= 0; k--) {
        const struct stage_seg *g = &e->seg[k];
        if (!(k == K - 1 && e->resident == slot)) {
            /* The loss segment is always resident: its backward runs right after its forward. */
            TB_ASSERT(!(k == K - 1 && e->l1 == e->m->n_layers));
            if (!e->cfg.recompute) {
                seg_transfer(e, g, stash, 0); /* half storage: decoded, not recomputed */
            } else {
                struct exec_step rs = *st;
                rs.l0 = g->l0, rs.l1 = g->l1, rs.out_dact = NULL, rs.no_stats_update = 1;
                const double t0 = tb_now_s();
                if (k == 0 && e->l0 == 0) {
                    rs.x = stash;
                } else if (e->half) {
                    rs.x = NULL, rs.in_act = e->seg_in;
                    stage_prec_unpack(e->seg_in, seg_ckpt(e, stash, k), model_boundary_floats(e->m, g->l0, st->n, 0),
                                      e->cfg.prec, 1.0f);
                } else {
                    rs.x = NULL, rs.in_act = seg_ckpt(e, stash, k);
                }
                half_forward(e, &g->mi, &rs);
                t_rec += tb_now_s() - t0;
            }
        }
        struct exec_step bs = *st;
        bs.l0 = g->l0, bs.l1 = g->l1;
        if (k < K - 1) bs.out_dact = e->seg_grad;
        half_backward(e, &g->mi, &bs);
        if (k > 0) stage_boundary_pack(&g->mi, g->l0, 1, st->n, e->seg_grad, STAGE_PREC_FP32, 1.0f);
    }
    e->t_recompute = t_rec;
}

const struct model_inst *stage_run_backward(struct stage_engine *e, const struct exec_step *st, int slot)
{
    e->t_recompute = 0.0;
    if (!e->n_seg) {
        exec_backward(&e->slot[slot], st, 0, 1, NULL);
        e->resident = -1;
        return &e->slot[slot];
    }
    seg_backward_all(e, st, slot);
    e->resident = -1;
    return &e->seg[0].mi;
}

/* ---- memory ---- */

/* Without segments: a whole-stage activation slot per micro-batch in flight, one gradient arena. */
static int init_slots(struct stage_engine *e)
{
    const int B = e->B;
    struct exec_runner run = {run1, NULL, NULL, 1};
    int st;
    e->n_slots = e->cfg.slots;
    e->act_floats = model_act_floats(&e->sm, B);
    e->dacts = arena_alloc(e->act_floats);
    e->slot = calloc((size_t)e->n_slots, sizeof *e->slot);
    if (!e->dacts || !e->slot)
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory for the activations of layers %d..%d", e->l0,
                            e->l1 - 1);
    for (int k = 0; k < e->n_slots; k++) {
        struct model_inst *mi = &e->slot[k];
        mi->m = &e->sm;
        mi->n_max = B;
        mi->par = exec_units(e->cfg.par_units);
        mi->params = e->params, mi->grads = e->grads, mi->buffers = e->buffers, mi->dacts = e->dacts;
        mi->acts = arena_alloc(e->act_floats);
        mi->losses = calloc((size_t)B, sizeof(float));
        mi->correct = calloc((size_t)B, 1);
        mi->labels = calloc((size_t)B, sizeof(int32_t));
        if (!mi->acts || !mi->losses || !mi->correct || !mi->labels)
            return tb_error_set(TB_ENOMEM, "stage executor: cannot allocate %d activation slots of %.1f MiB for "
                                           "layers %d..%d", e->n_slots, (double)e->act_floats * 4.0 / 1048576.0, e->l0,
                                e->l1 - 1);
    }
    /* "auto" convolution choices come from the process-wide cache a whole-model executor of the same
     * micro-batch filled (the schedule's timing executor): the same algorithm for every stage. */
    if ((st = exec_prepare(&e->slot[0], &run, e->cfg.conv_algo, NULL)) != TB_OK) return st;
    for (int k = 1; k < e->n_slots; k++) exec_share_prepared(&e->slot[k], &e->slot[0]);
    for (int k = 0; k < e->n_slots; k++) e->slot[k].no_layer_fusion = e->cfg.no_fuse, e->slot[k].prof = e->prof;
    return TB_OK;
}

/* Segments: plans each segment of cfg.cuts and places its stored activations (half storage) or input
 * checkpoint (recompute) inside a stash, whose size goes to *stash_bytes; sizes the working slot and
 * the buffers between segments. */
static int plan_segments(struct stage_engine *e, size_t *stash_bytes)
{
    const struct model *m = e->m;
    const int B = e->B;
    const size_t eb = stage_prec_bytes(e->cfg.prec);
    const int recompute = e->cfg.recompute;
    /* Recompute keeps the stage input; half storage keeps it inside the first segment's activations. */
    const size_t in_copy = !recompute ? 0
                           : e->l0 == 0 ? (size_t)B * e->per_in
                                        : model_boundary_floats(m, e->l0, B, 0) * eb;
    e->in_bytes = align64(in_copy);
    size_t ck = e->in_bytes;
    /* Half storage with recomputation decodes a later stage's input checkpoint into seg_in too (its
     * first segment's recompute), not only the segment boundaries: it can be the largest of them. */
    if (e->half && recompute && e->l0 > 0) e->seg_in_floats = model_boundary_floats(m, e->l0, B, 0);
    for (int k = 0; k < e->n_seg; k++) {
        struct stage_seg *g = &e->seg[k];
        g->l0 = e->cfg.cuts[k], g->l1 = e->cfg.cuts[k + 1];
        TB_ASSERT(g->l0 < g->l1);
        int st;
        if ((st = model_range_init(&g->plan, m, g->l0, g->l1)) != TB_OK) return st;
        const size_t f = model_act_floats(&g->plan, B);
        if (f > e->act_floats) e->act_floats = f;
        if (e->half && !recompute) {
            if (!(g->f32_ids = malloc(sizeof *g->f32_ids * (size_t)(g->l1 - g->l0))))
                return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
            for (int i = g->l0; i < g->l1; i++) {
                const int t = m->layers[i].save;
                if (t >= 0 && m->tensors[t].per_sample > 0) g->f32_ids[g->n_f32++] = t;
            }
            g->ck_off = ck;
            ck += seg_store_bytes(g, B);
        }
        if (k > 0) {
            if (recompute) {
                g->ck_off = ck;
                ck += align64(model_boundary_floats(m, g->l0, B, 0) * eb);
            }
            const size_t gf = model_boundary_floats(m, g->l0, B, 1);
            if (gf > e->seg_grad_floats) e->seg_grad_floats = gf;
            const size_t af = model_boundary_floats(m, g->l0, B, 0);
            if (e->half && af > e->seg_in_floats) e->seg_in_floats = af;
        }
    }
    *stash_bytes = ck;
    return TB_OK;
}

/* Segments: plans each of cfg.cuts and allocates the one working slot and gradient arena (the largest
 * segment's), the fp32 gradient between segments (and, with half storage, the fp32 input of a
 * segment), and a stash per slot: recompute's checkpoints, or half storage's stored activations. */
static int init_segments(struct stage_engine *e)
{
    const int B = e->B, K = e->cfg.n_seg;
    int st;
    if (!(e->seg = calloc((size_t)K, sizeof *e->seg))) return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    e->n_seg = K;
    if ((st = plan_segments(e, &e->stash_bytes)) != TB_OK) return st;
    e->work = arena_alloc(e->act_floats);
    e->dacts = arena_alloc(e->act_floats);
    e->seg_grad = arena_alloc(e->seg_grad_floats ? e->seg_grad_floats : 16);
    if (e->half && !(e->seg_in = arena_alloc(e->seg_in_floats ? e->seg_in_floats : 16)))
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    e->seg_losses = calloc((size_t)B, sizeof(float));
    e->seg_correct = calloc((size_t)B, 1);
    e->seg_labels = calloc((size_t)B, sizeof(int32_t));
    e->n_stash = e->cfg.slots;
    e->stash = calloc((size_t)e->n_stash, sizeof *e->stash);
    if (!e->work || !e->dacts || !e->seg_grad || !e->seg_losses || !e->seg_correct || !e->seg_labels || !e->stash)
        return tb_error_set(TB_ENOMEM, "stage executor: cannot allocate the %.1f MiB working slot of layers %d..%d",
                            (double)e->act_floats * 4.0 / 1048576.0, e->l0, e->l1 - 1);
    for (int k = 0; k < e->n_stash; k++)
        if (!(e->stash[k] = arena_alloc((e->stash_bytes + 3) / 4)))
            return tb_error_set(TB_ENOMEM, "stage executor: cannot allocate %d checkpoint sets of %.1f MiB for "
                                           "layers %d..%d", e->n_stash, (double)e->stash_bytes / 1048576.0, e->l0,
                                e->l1 - 1);
    for (int k = 0; k < K; k++) {
        struct model_inst *mi = &e->seg[k].mi;
        mi->m = &e->seg[k].plan;
        mi->n_max = B;
        mi->par = exec_units(e->cfg.par_units);
        mi->params = e->params, mi->grads = e->grads, mi->buffers = e->buffers;
        mi->acts = e->work, mi->dacts = e->dacts;
        mi->losses = e->seg_losses, mi->correct = e->seg_correct, mi->labels = e->seg_labels;
    }
    struct exec_runner run = {run1, NULL, NULL, 1};
    if ((st = exec_prepare(&e->seg[0].mi, &run, e->cfg.conv_algo, NULL)) != TB_OK) return st;
    for (int k = 1; k < K; k++) exec_share_prepared(&e->seg[k].mi, &e->seg[0].mi);
    /* Recomputation counts as forward in the profile. */
    for (int k = 0; k < K; k++) e->seg[k].mi.no_layer_fusion = e->cfg.no_fuse, e->seg[k].mi.prof = e->prof;
    return TB_OK;
}

int stage_init_activations(struct stage_engine *e) { return e->cfg.n_seg > 0 ? init_segments(e) : init_slots(e); }

void stage_free_activations(struct stage_engine *e)
{
    if (e->slot) {
        for (int k = 0; k < e->n_slots; k++) {
            struct model_inst *mi = &e->slot[k];
            if (k == 0 && mi->m) exec_release(mi);
            arena_free(mi->acts);
            free(mi->losses), free(mi->correct), free(mi->labels);
        }
        free(e->slot);
    }
    if (e->stash) {
        for (int k = 0; k < e->n_stash; k++) arena_free(e->stash[k]);
        free(e->stash);
    }
    if (e->seg) {
        if (e->seg[0].mi.m) exec_release(&e->seg[0].mi);
        for (int k = 0; k < e->n_seg; k++) model_range_free(&e->seg[k].plan), free(e->seg[k].f32_ids);
        free(e->seg);
    }
    arena_free(e->work), arena_free(e->seg_grad), arena_free(e->seg_in), arena_free(e->dacts);
    free(e->seg_losses), free(e->seg_correct), free(e->seg_labels);
}
