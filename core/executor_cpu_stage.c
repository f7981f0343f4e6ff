/* executor_cpu_stage.c — the cpu device's stage executor: layers [l0,l1) of a model with the parameters,
 * gradients, buffers and optimizer state of their slice only, activation slots for the micro-batches a
 * pipeline holds in flight, optional segments (recomputation, half-precision storage: stage_run.c),
 * storage precision fp32 | bf16 | fp16 (± an fp32 master), and the packed boundaries a schedule moves
 * between stages. Its executor_i: passes, zeroing, the update (half precision: a layer at a time in the
 * windows, rounded stochastically or from the master), tensors in the canonical layout (its slice), the
 * gradient buffer for all-reduce, boundaries, stats.
 *
 * Runs every call on the calling thread (one schedule worker per stage); owns all it allocates.
 */
#define _GNU_SOURCE
#include "stage_engine.h"

#include "arena.h"
#include "layout.h"
#include "model_range.h"
#include "status.h"

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
#ifdef MADV_HUGEPAGE
    /* As arena_alloc's: a stage's weights and gradients on 2 MiB pages (fewer TLB misses, and one fault a
     * 2 MiB page instead of 512: at prepare, a whole effnet's span cost ~10 µs a 4 KiB fault in a VM). */
    if (hi > lo) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    if (hi > lo) memset((float *)p + lo, 0, (hi - lo) * sizeof(float));
    return p;
}

static void span_free(float *p, size_t n)
{
    if (p) munmap(p, (n ? n : 16) * sizeof(float));
}

/* Gives back the pages of a span outside [lo,hi) (exec_prepare zeroes a whole gradient arena): they read
 * as zero again and are never touched by the stage. */
static void span_trim(float *p, size_t n, size_t lo, size_t hi)
{
    if (!p) return;
    const size_t page = 4096 / sizeof(float);
    const size_t a = (lo / page) * page, b = (hi + page - 1) / page * page;
    if (a > 0) madvise(p, a * sizeof(float), MADV_DONTNEED);
    if (b < n) madvise(p + b, (n - b) * sizeof(float), MADV_DONTNEED);
}

/* Whether entry pe is a trainable tensor of the stage's layers (what its optimizer updates). */
static int stage_trains(const struct stage_engine *e, const struct param_entry *pe)
{
    return pe->kind != PARAM_BUFFER && pe->kind != PARAM_COUNTER && pe->layer >= e->l0 && pe->layer < e->l1;
}

/* Half precision: groups the stage's tensors (e->segs, in layer order) into one chunk per layer with
 * weights, rebases them per chunk, and sizes the fp32 windows to the largest. */
static int init_chunks(struct stage_engine *e)
{
    const struct model *m = e->m;
    const int nl = e->l1 - e->l0;
    e->chunk = calloc((size_t)nl + 1, sizeof *e->chunk);
    e->chunk_of = malloc(sizeof *e->chunk_of * ((size_t)nl + 1));
    e->lsegs = calloc((size_t)e->n_segs + 1, sizeof *e->lsegs);
    if (!e->chunk || !e->chunk_of || !e->lsegs) return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    for (int l = 0; l < nl; l++) e->chunk_of[l] = -1;
    int i = 0;
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *pe = &m->params[k];
        if (!stage_trains(e, pe)) continue;
        int j = e->chunk_of[pe->layer - e->l0];
        if (j < 0) {
            j = e->chunk_of[pe->layer - e->l0] = e->n_chunk++;
            e->chunk[j] = (struct stage_chunk){pe->off, pe->off + pe->n, i, 0};
        }
        TB_ASSERT(j == e->n_chunk - 1); /* a layer's tensors are consecutive in the table */
        struct stage_chunk *ch = &e->chunk[j];
        if (pe->off < ch->w0) ch->w0 = pe->off;
        if (pe->off + pe->n > ch->w1) ch->w1 = pe->off + pe->n;
        ch->nseg++;
        i++;
    }
    TB_ASSERT(i == e->n_segs);
    for (int j = 0; j < e->n_chunk; j++) {
        const struct stage_chunk *ch = &e->chunk[j];
        for (int k = ch->seg0; k < ch->seg0 + ch->nseg; k++) {
            e->lsegs[k] = e->segs[k];
            e->lsegs[k].off = e->segs[k].off + e->p0 - ch->w0;
        }
        if (ch->w1 - ch->w0 > e->wwin_floats) e->wwin_floats = ch->w1 - ch->w0;
    }
    if (!(e->wwin = arena_alloc(e->wwin_floats ? e->wwin_floats : 16)) ||
        !(e->gwin = arena_alloc(e->wwin_floats ? e->wwin_floats : 16)))
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory for the weight window of layers %d..%d", e->l0,
                            e->l1 - 1);
    return TB_OK;
}

/* The optimizer's initial state (optim_state_init) in the stage's layout: (spp, p1−p0), or per chunk. */
static void opt_state_init(struct stage_engine *e)
{
    const enum optim_kind kind = e->cfg.optim.kind;
    const size_t spp = (size_t)optim_state_per_param(kind);
    if (!e->chunk) {
        optim_state_init(kind, e->opt, e->p1 - e->p0);
        return;
    }
    for (int j = 0; j < e->n_chunk; j++) {
        const struct stage_chunk *ch = &e->chunk[j];
        optim_state_init(kind, e->opt + spp * (ch->w0 - e->p0), ch->w1 - ch->w0);
    }
}

static void stage_free(struct stage_engine *e)
{
    const struct model *m = e->m;
    if (!m) return;
    stage_free_activations(e);
    span_free(e->params, m->n_params), span_free(e->grads, m->n_params), span_free(e->buffers, m->n_buffers);
    arena_free((float *)e->w16), arena_free((float *)e->g16), arena_free(e->wwin), arena_free(e->gwin);
    free(e->chunk), free(e->chunk_of), free(e->lsegs);
    arena_free(e->opt), arena_free(e->master);
    arena_free(e->in_stage), arena_free(e->g_stage);
    free(e->segs), free(e->trust), free(e->prof), free(e->cuts), free(e->algos);
    model_range_free(&e->sm);
    memset(e, 0, sizeof *e);
}

/* Parameters, gradients, buffers, optimizer state of the slice; returns TB_OK or TB_ENOMEM. */
static int init_params(struct stage_engine *e)
{
    const struct model *m = e->m;
    const size_t np = e->p1 - e->p0;
    if (!e->half) {
        e->params = span_alloc(m->n_params, e->p0, e->p1);
        e->grads = span_alloc(m->n_params, e->p0, e->p1);
    } else {
        e->w16 = (uint16_t *)arena_alloc((np + 1) / 2);
        e->g16 = (uint16_t *)arena_alloc((np + 1) / 2);
    }
    e->buffers = span_alloc(m->n_buffers, e->q0, e->q1);
    e->opt = arena_alloc(np * (size_t)optim_state_per_param(e->cfg.optim.kind));
    if (e->cfg.master) e->master = arena_alloc(np);
    e->segs = calloc((size_t)m->n_entries + 1, sizeof *e->segs);
    e->trust = calloc((size_t)m->n_entries + 1, sizeof *e->trust);
    if ((e->half ? !e->w16 || !e->g16 : !e->params || !e->grads) || !e->buffers || !e->opt ||
        (e->cfg.master && !e->master) || !e->segs || !e->trust)
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory for the parameters of layers %d..%d", e->l0,
                            e->l1 - 1);
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *pe = &m->params[k];
        if (!stage_trains(e, pe)) continue;
        TB_ASSERT(pe->off >= e->p0 && pe->off + pe->n <= e->p1);
        e->segs[e->n_segs++] = (struct optim_segment){pe->off - e->p0, pe->n, pe->kind != PARAM_WEIGHT};
    }
    int st;
    if (e->half && (st = init_chunks(e)) != TB_OK) return st;
    opt_state_init(e);
    return TB_OK;
}

/* ---- executor_i ---- */

static struct stage_engine *eng(const struct executor *ex) { return ex->ctx; }

static void stage_destroy(struct executor *ex)
{
    if (ex->ctx) stage_free(eng(ex));
    free(ex->ctx);
    ex->ctx = NULL;
}

static int stage_compute(struct executor *ex, const struct executor_pass *p, int what, double *loss_sum)
{
    struct stage_engine *e = eng(ex);
    struct exec_step st = {.n = p->n, .n_global = p->n_global, .first_index = p->first_index, .step = p->step,
                           .seed = e->cfg.seed, .training = p->training, .x = p->x, .y = p->y, .l0 = e->l0,
                           .l1 = e->l1};
    *loss_sum = 0.0;
    if (what & EXECUTOR_FORWARD) {
        TB_ASSERT(e->l0 == 0 || e->in_act); /* executor_import_boundary first */
        st.in_act = e->l0 > 0 ? e->in_act : NULL;
        const struct model_inst *mi = stage_run_forward(e, &st, p->slot, p->training);
        e->in_act = NULL;
        if (e->l1 == ex->m->n_layers) {
            *loss_sum = exec_loss_sum(mi, p->n);
            if (p->n_correct) *p->n_correct += exec_correct_count(mi, p->n);
            if (p->logits) exec_logits_copy(mi, p->n, p->logits);
        }
    }
    if (what & EXECUTOR_BACKWARD) {
        st.x = NULL, st.y = NULL, st.in_act = NULL, st.out_dact = e->out_dact;
        stage_run_backward(e, &st, p->slot);
        e->out_dact = NULL;
    }
    return TB_OK;
}

static void stage_zero_grads(struct executor *ex)
{
    struct stage_engine *e = eng(ex);
    if (e->g16) memset(e->g16, 0, (e->p1 - e->p0) * sizeof(uint16_t));
    else memset(e->grads + e->p0, 0, (e->p1 - e->p0) * sizeof(float));
    e->nonfinite_grads = 0;
    e->resident = -1;
}

/* Half precision: the update one layer at a time — weights decoded into the window (or the fp32
 * master's slice), the optimizer on that slice, then stored back in 2 bytes: rounded stochastically,
 * keyed by the global index so every replica rounds the same way (to nearest from a master). */
static void update_half(struct stage_engine *e, long step)
{
    const struct optim_config *oc = &e->cfg.optim;
    const enum stage_prec prec = e->cfg.prec;
    const size_t spp = (size_t)optim_state_per_param(oc->kind);
    for (int j = 0; j < e->n_chunk; j++) {
        const struct stage_chunk *ch = &e->chunk[j];
        const size_t a = ch->w0 - e->p0, len = ch->w1 - ch->w0;
        float *w = e->master ? e->master + a : e->wwin;
        if (!e->master) stage_prec_unpack(w, e->w16 + a, len, prec, 1.0f);
        float *g = e->gwin;
        stage_prec_unpack(g, e->g16 + a, len, prec, 1.0f / e->grad_scale);
        const struct optim_segment *sg = e->lsegs + ch->seg0;
        float *trust = e->trust + ch->seg0;
        if (oc->kind == OPTIM_LARS) optim_lars_trust(oc, w, g, sg, ch->nseg, trust, 0, 1);
        optim_update(oc, w, g, e->opt + spp * a, len, sg, ch->nseg, trust, step, 0, 1);
        if (!e->master) stage_prec_round(w, len, prec, 1, e->cfg.seed, step, ch->w0);
        stage_prec_pack(e->w16 + a, w, len, prec, 1.0f);
    }
}

static int stage_update(struct executor *ex, long step, int part, int parts)
{
    struct stage_engine *e = eng(ex);
    if (parts != 1)
        return tb_error_set(TB_EUNSUPPORTED, "stage executor: no sharded update (part %d of %d)", part, parts);
    const size_t n = e->p1 - e->p0;
    if (n == 0) return TB_OK;
    if (e->half) {
        update_half(e, step);
        return TB_OK;
    }
    const struct optim_config *oc = &e->cfg.optim;
    float *w = e->master ? e->master : e->params + e->p0;
    const float *g = e->grads + e->p0;
    if (oc->kind == OPTIM_LARS) optim_lars_trust(oc, w, g, e->segs, e->n_segs, e->trust, 0, 1);
    optim_update(oc, w, g, e->opt, n, e->segs, e->n_segs, e->trust, step, 0, 1);
    return TB_OK;
}

/* Optimizer state between the stage and the canonical (spp, n_params) layout: out non-NULL copies the
 * slice out, else in's slice in. fp32 keeps it as (spp, p1−p0); half precision per layer chunk,
 * (spp, w1−w0) at spp·(w0−p0), so each layer's update is one optimizer call on its own window. */
static void opt_copy(const struct stage_engine *e, float *out, const float *in)
{
    const size_t np = e->m->n_params, n = e->p1 - e->p0;
    const size_t spp = (size_t)optim_state_per_param(e->cfg.optim.kind);
    if (!e->chunk) {
        for (size_t k = 0; k < spp; k++) {
            if (out) memcpy(out + k * np + e->p0, e->opt + k * n, n * sizeof(float));
            else memcpy(e->opt + k * n, in + k * np + e->p0, n * sizeof(float));
        }
        return;
    }
    if (out)
        for (size_t k = 0; k < spp; k++) memset(out + k * np + e->p0, 0, n * sizeof(float)); /* the gaps */
    for (int j = 0; j < e->n_chunk; j++) {
        const struct stage_chunk *ch = &e->chunk[j];
        const size_t len = ch->w1 - ch->w0;
        for (size_t k = 0; k < spp; k++) {
            float *dev = e->opt + spp * (ch->w0 - e->p0) + k * len;
            if (out) memcpy(out + k * np + ch->w0, dev, len * sizeof(float));
            else memcpy(dev, in + k * np + ch->w0, len * sizeof(float));
        }
    }
}

/* Reads (its slice of) a canonical family: fp32 master weights when kept, else the stored ones. */
static int stage_get(struct executor *ex, enum tensor_family f, float *dst)
{
    const struct stage_engine *e = eng(ex);
    const size_t n = e->p1 - e->p0;
    switch (f) {
    case TF_PARAMS:
        if (e->master) memcpy(dst + e->p0, e->master, n * sizeof(float));
        else if (e->w16) stage_prec_unpack(dst + e->p0, e->w16, n, e->cfg.prec, 1.0f);
        else memcpy(dst + e->p0, e->params + e->p0, n * sizeof(float));
        break;
    case TF_GRADS:
        if (e->g16) stage_prec_unpack(dst + e->p0, e->g16, n, e->cfg.prec, 1.0f / e->grad_scale);
        else memcpy(dst + e->p0, e->grads + e->p0, n * sizeof(float));
        break;
    case TF_OPT: opt_copy(e, dst, NULL); break;
    case TF_BUFFERS: memcpy(dst + e->q0, e->buffers + e->q0, (e->q1 - e->q0) * sizeof(float)); break;
    }
    return TB_OK;
}

static int stage_set(struct executor *ex, enum tensor_family f, const float *src)
{
    struct stage_engine *e = eng(ex);
    const size_t n = e->p1 - e->p0;
    switch (f) {
    case TF_PARAMS:
        if (e->master) memcpy(e->master, src + e->p0, n * sizeof(float));
        /* Stored weights are half precision: what a device holds is the nearest half value. */
        if (e->w16) stage_prec_pack(e->w16, src + e->p0, n, e->cfg.prec, 1.0f);
        else memcpy(e->params + e->p0, src + e->p0, n * sizeof(float));
        break;
    case TF_GRADS:
        if (e->g16) stage_prec_pack(e->g16, src + e->p0, n, e->cfg.prec, e->grad_scale);
        else memcpy(e->grads + e->p0, src + e->p0, n * sizeof(float));
        break;
    case TF_OPT:
        if (src) opt_copy(e, NULL, src);
        else opt_state_init(e);
        break;
    case TF_BUFFERS: memcpy(e->buffers + e->q0, src + e->q0, (e->q1 - e->q0) * sizeof(float)); break;
    }
    return TB_OK;
}

/* The slice's storage: TF_GRADS is what a schedule all-reduces over replicas (2-byte with half
 * precision: data16). The optimizer state has no canonical slice (compact, or per layer chunk). */
static int stage_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b)
{
    struct stage_engine *e = eng(ex);
    b->host = 1, b->prec = STAGE_PREC_FP32, b->scale = 1.0f;
    switch (f) {
    case TF_PARAMS:
    case TF_GRADS: {
        const int g = f == TF_GRADS;
        b->off = e->p0, b->n = e->p1 - e->p0;
        if (e->half) b->data16 = g ? e->g16 : e->w16, b->prec = e->cfg.prec, b->scale = g ? e->grad_scale : 1.0f;
        else b->data = (g ? e->grads : e->params) + e->p0;
        return TB_OK;
    }
    case TF_BUFFERS: b->off = e->q0, b->n = e->q1 - e->q0, b->data = e->buffers + e->q0; return TB_OK;
    case TF_OPT: break;
    }
    return tb_error_set(TB_EUNSUPPORTED, "stage executor: no buffer of tensor family %d", (int)f);
}

static int stage_supports(const struct executor *ex, enum op_kind op)
{
    (void)ex;
    return op >= 0 && op < OP_COUNT;
}

static int stage_stats(struct executor *ex, struct executor_stats *s)
{
    struct stage_engine *e = eng(ex);
    /* The algorithms the stage was prepared with: slot 0's, or with segments (recompute, half storage: no slots)
     * segment 0's, whose layer states every segment shares (exec_share_prepared); every slot and segment finds its
     * shapes in the one cache. Without the segments' a row of such a run would not say which kernels it ran. */
    const struct model_inst *prepared = e->n_seg ? &e->seg[0].mi : e->slot ? &e->slot[0] : NULL;
    if (!e->algos && prepared && prepared->ls && (e->algos = malloc((size_t)ex->m->n_layers * sizeof *e->algos)))
        exec_algos(prepared, e->algos);
    s->conv_algos = e->algos;
    const double np = (double)(e->p1 - e->p0), act = (double)e->act_floats * 4.0;
    s->profile = e->prof;
    s->t_recompute = e->t_recompute;
    s->nonfinite_grads = e->nonfinite_grads;
    s->n_segments = e->n_seg;
    s->act_fixed_bytes = e->n_seg ? act + act + (double)(e->seg_grad_floats + e->seg_in_floats) * 4.0 : act;
    s->act_slot_bytes = e->n_seg ? (double)e->stash_bytes : act;
    s->grad_bytes = (e->g16 ? 2.0 : 4.0) * np;
    s->weight_bytes = (e->w16 ? 2.0 : 4.0) * np + (e->master ? 4.0 * np : 0.0);
    s->window_bytes = 4.0 * (double)e->wwin_floats;
    return TB_OK;
}

static size_t stage_import(struct executor *ex, int grads, const void *src, int n, enum stage_prec prec, float scale)
{
    struct stage_engine *e = eng(ex);
    TB_ASSERT(grads ? e->l1 < ex->m->n_layers : e->l0 > 0);
    if (prec == STAGE_PREC_FP32 && scale == 1.0f) { /* fp32 is read in place: exec copies it into the slots */
        if (grads) e->out_dact = src;
        else e->in_act = src;
        return 0;
    }
    const int *ids = grads ? e->out_ids : e->in_ids, k = grads ? e->n_out : e->n_in;
    float *dst = grads ? e->g_stage : e->in_stage;
    const size_t eb = stage_prec_bytes(prec);
    size_t off = 0, bad = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &e->sm.tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        bad += stage_prec_unpack(dst + off, (const char *)src + off * eb, len, prec, scale);
        off += tb_align16(len);
    }
    if (grads) e->out_dact = dst;
    else e->in_act = dst;
    return bad;
}

static size_t stage_export(struct executor *ex, int grads, int slot, void *dst, int n, enum stage_prec prec,
                           float scale)
{
    const struct stage_engine *e = eng(ex);
    TB_ASSERT(grads ? e->l0 > 0 : e->l1 < ex->m->n_layers);
    const struct model_inst *mi = !e->n_seg ? &e->slot[slot] : grads ? &e->seg[0].mi : &e->seg[e->n_seg - 1].mi;
    return stage_boundary_pack(mi, grads ? e->l0 : e->l1, grads, n, dst, prec, scale);
}

static void stage_set_grad_scale(struct executor *ex, float scale)
{
    struct stage_engine *e = eng(ex);
    e->grad_scale = e->cfg.prec == STAGE_PREC_FP16 ? scale : 1.0f;
}

/* The engine's own copy of the config keys its passes and its stochastic rounding. */
static void stage_set_seed(struct executor *ex, uint64_t seed) { eng(ex)->cfg.seed = seed; }

static const struct executor_i stage_iface = {
    .name = "cpu", .destroy = stage_destroy, .compute = stage_compute, .zero_grads = stage_zero_grads,
    .update = stage_update, .get_tensors = stage_get, .set_tensors = stage_set, .buffer = stage_buffer,
    .supports = stage_supports, .stats = stage_stats, .import_boundary = stage_import,
    .export_boundary = stage_export, .set_grad_scale = stage_set_grad_scale, .set_seed = stage_set_seed,
};

int executor_cpu_stage_create(struct executor *ex)
{
    const struct model *m = ex->m;
    const struct executor_config *cfg = &ex->cfg;
    struct stage_engine *e = calloc(1, sizeof *e);
    if (!e) return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    ex->i = &stage_iface, ex->ctx = e; /* executor_create destroys it on failure */
    if ((cfg->prec != STAGE_PREC_FP32 || cfg->recompute) != (cfg->n_seg > 0))
        return tb_error_set(TB_EINVAL, "stage executor: half precision and recomputation run as segments (cuts), "
                                       "and segments are for nothing else");
    e->m = m;
    e->cfg = *cfg;
    e->l0 = cfg->l0, e->l1 = cfg->l1, e->B = cfg->n_max;
    e->half = cfg->prec != STAGE_PREC_FP32;
    e->per_in = m->tensors[m->input].per_sample;
    e->grad_scale = 1.0f;
    e->resident = -1;
    if (cfg->n_seg > 0) {
        TB_ASSERT(cfg->cuts && cfg->cuts[0] == cfg->l0 && cfg->cuts[cfg->n_seg] == cfg->l1);
        if (!(e->cuts = malloc(sizeof *e->cuts * (size_t)(cfg->n_seg + 1))))
            return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
        memcpy(e->cuts, cfg->cuts, sizeof *e->cuts * (size_t)(cfg->n_seg + 1));
    }
    e->cfg.cuts = e->cuts;
    model_range_slice(m, e->l0, e->l1, 0, &e->p0, &e->p1);
    model_range_slice(m, e->l0, e->l1, 1, &e->q0, &e->q1);
    e->n_in = model_boundary_tensors(m, e->l0, e->in_ids, STAGE_MAX_BOUNDARY);
    e->n_out = model_boundary_tensors(m, e->l1, e->out_ids, STAGE_MAX_BOUNDARY);
    if (e->n_in > STAGE_MAX_BOUNDARY || e->n_out > STAGE_MAX_BOUNDARY)
        return tb_error_set(TB_EINVAL, "stage executor: more than %d tensors cross a split of %s", STAGE_MAX_BOUNDARY,
                            m->name);
    int st;
    if ((st = model_range_init(&e->sm, m, e->l0, e->l1)) != TB_OK) return st;
    if ((st = init_params(e)) != TB_OK) return st;
    if (cfg->profile && !(e->prof = calloc(2 * (size_t)m->n_layers, sizeof *e->prof)))
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    if ((st = stage_init_activations(e)) != TB_OK) return st;
    span_trim(e->grads, m->n_params, e->p0, e->p1);
    if (e->l0 > 0 && !(e->in_stage = arena_alloc(model_boundary_floats(m, e->l0, e->B, 0))))
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    if (e->l1 < m->n_layers && !(e->g_stage = arena_alloc(model_boundary_floats(m, e->l1, e->B, 1) + 16)))
        return tb_error_set(TB_ENOMEM, "stage executor: out of memory");
    return TB_OK;
}
