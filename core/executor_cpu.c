/* executor_cpu.c — the cpu device: one model instance in host arenas, the shared schedule (exec.c) run on
 * the calling thread alone or on a pinned pool (tpool.c) of cfg.threads threads, thread 0 being the
 * caller; and its executor_i. What the pool runs is one task per call (a pass, an update, a zeroing), so
 * a schedule pays one indirect call per executor call, never one per layer.
 *
 * Ownership: the engine owns its arenas, pool, trace and profile; views it hands out (executor_stats,
 * executor_buffer) live as long as it does. The memory every engine of the process claimed is one
 * process-wide sum (claimed_bytes), updated by create and free on the thread that drives them.
 */
#include "executor_cpu.h"

#include "arena.h"
#include "clock.h"
#include "env_switch.h"
#include "fpenv.h"
#include "layout.h"
#include "status.h"
#include "zero.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fb_task {
    struct local_engine *e;
    const struct model_inst *mi;
    struct exec_step st;
    int forward, backward;
    int save_inputs;  /* fused: keep the dense layers' inputs for the deferred update */
};

static void barrier_cb(void *ctx) { tpool_barrier(ctx); }

static void fb_run(void *arg, int ith, int nth)
{
    struct fb_task *t = arg;
    struct exec_sync sync = {t->e->pool ? barrier_cb : NULL, t->e->pool};
    if (t->save_inputs && t->e->dense1) {
        exec_dense1_step(t->mi, &t->st, t->e->pending_in, ith, nth, &sync);
        return;
    }
    if (t->forward) exec_forward(t->mi, &t->st, ith, nth, &sync);
    if (t->backward) exec_backward(t->mi, &t->st, ith, nth, &sync);
    /* The forward that read the previous copy ended in a barrier. */
    if (t->save_inputs && ith == 0) exec_save_dense_inputs(t->mi, t->e->pending_in);
}

static void run(struct local_engine *e, void (*fn)(void *, int, int), void *arg)
{
    if (e->pool) tpool_run(e->pool, fn, arg);
    else fn(arg, 0, 1);
}

static void run_cb(void *ctx, void (*fn)(void *, int, int), void *arg) { run(ctx, fn, arg); }

static void engine_barrier(void *ctx) { tpool_barrier(((struct local_engine *)ctx)->pool); }

static int inst_init(struct model_inst *mi, const struct model *m, int n_max, int with_grads)
{
    memset(mi, 0, sizeof *mi);
    mi->m = m;
    mi->n_max = n_max;
    size_t act = model_act_floats(m, n_max);
    mi->acts = arena_alloc(act);
    mi->losses = calloc((size_t)n_max, sizeof(float));
    mi->correct = calloc((size_t)n_max, 1);
    mi->labels = calloc((size_t)n_max, sizeof(int32_t));
    if (with_grads) mi->dacts = arena_alloc(act);
    if (!mi->acts || !mi->losses || !mi->correct || !mi->labels || (with_grads && !mi->dacts))
        return tb_error_set(TB_ENOMEM, "cannot allocate activations for %d samples of %s (%.1f MiB)", n_max,
                            m->name, (double)act * 4.0 / 1048576.0);
    return TB_OK;
}

static void inst_free(struct model_inst *mi)
{
    arena_free(mi->acts);
    arena_free(mi->dacts);
    free(mi->losses);
    free(mi->correct);
    free(mi->labels);
    if (mi->m) exec_release(mi);
    free(mi->prof);
    free(mi->prof_busy);
    free(mi->pfirst);
    free(mi->pwrote);
    memset(mi, 0, sizeof *mi);
}

/* ---- Lazy zeroing of the parameter gradients ----
 * A layer whose backward can write its parameter gradients rather than add to them (exec_params_first_write:
 * dense layers and GEMM1X1 convolutions, nearly all of EfficientNet's and the MLP's parameters) is only
 * marked at zero_grads (train.pfirst); its first backward writes them and the pass's end clears the mark
 * (grads_settle), so later passes (micro-batches) add. The rest are zeroed at zero_grads as before. What goes is
 * the zeroing pass's write of 94 % of effnet-b0's gradient (15 MB a step; all 0.67 MB of the MLP's; the first
 * backward's stores still fetch the lines they write) and a pool run a step; TB_GRAD_FIRST_WRITE=0 zeroes it
 * all in one pass, as before (the A/B). */

static int span_cmp(const void *a, const void *b)
{
    const size_t x = ((const struct grad_span *)a)->off, y = ((const struct grad_span *)b)->off;
    return x < y ? -1 : x > y;
}

/* At create, once the algorithms are fixed: the layers zero_grads marks (e->pcap: exec_params_first_write)
 * and the spans of the gradient arena it still zeroes, all the rest (padding between entries included), in
 * e->zspans. Every float is in one or the other. */
static int plan_zero_spans(struct local_engine *e)
{
    const struct model *m = e->m;
    struct grad_span *w = malloc((2 * (size_t)m->n_layers + 1) * sizeof *w);
    e->zspans = malloc((2 * (size_t)m->n_layers + 1) * sizeof *e->zspans);
    e->pcap = calloc((size_t)m->n_layers, 1);
    if (!w || !e->zspans || !e->pcap) {
        free(w);
        return tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
    }
    int nw = 0;
    for (int li = 0; li < m->n_layers; li++) {
        if (!(e->pcap[li] = (uint8_t)exec_params_first_write(&e->train, li))) continue;
        const struct layer *l = &m->layers[li];
        w[nw++] = (struct grad_span){l->w_off, l->n_w};
        if (l->n_b) w[nw++] = (struct grad_span){l->b_off, l->n_b};
    }
    qsort(w, (size_t)nw, sizeof *w, span_cmp);
    size_t at = 0;
    e->n_zspans = 0, e->zfloats = 0;
    for (int k = 0; k <= nw; k++) {
        const size_t end = k < nw ? w[k].off : m->n_params;
        TB_ASSERT(end >= at);
        if (end > at) e->zspans[e->n_zspans++] = (struct grad_span){at, end - at}, e->zfloats += end - at;
        if (k < nw) at = w[k].off + w[k].n;
    }
    free(w);
    return TB_OK;
}

/* Memory the engines of this process have claimed, so replicas and stages are refused together. */
static double claimed_bytes;

int local_engine_create(struct local_engine *e, const struct model *m, const struct executor_config *cfg)
{
    const int n_max = cfg->n_max, nth = cfg->threads;
    TB_ASSERT(n_max >= 1 && nth >= 1);
    /* Refuse before allocating anything: a configuration that cannot fit fails in a second with the
     * estimate, not minutes later in the kernel's OOM killer. */
    const double need = model_train_bytes(m, n_max, optim_state_per_param(cfg->optim.kind),
                                          cfg->eval_batch > 0 ? cfg->eval_batch : n_max);
    const double avail = arena_mem_available();
    if (avail > 0.0 && claimed_bytes + need > 0.9 * avail) {
        /* MiB under a GiB ("needs 0.0 GiB but 0.0 GiB is available" says nothing); --resolution only where
         * the model has one to lower (its input is resampled by a convolutional model). */
        const int gib = 0.9 * avail >= 1073741824.0;
        const double u = gib ? 1073741824.0 : 1048576.0;
        int conv = 0;
        for (int i = 0; i < m->n_layers; i++) conv |= m->layers[i].op == OP_CONV;
        return tb_error_set(TB_EINVAL, "%s at batch %d needs about %.1f %s per engine (%.1f %s with the engines "
                                       "already planned) but only %.1f %s is available: lower --batch%s or --eval-batch",
                            m->name, n_max, need / u, gib ? "GiB" : "MiB", (claimed_bytes + need) / u,
                            gib ? "GiB" : "MiB", 0.9 * avail / u, gib ? "GiB" : "MiB", conv ? ", --resolution" : "");
    }
    memset(e, 0, sizeof *e);
    e->claimed = need;
    claimed_bytes += need;
    fpenv_set(); /* the calling thread runs kernels too (thread 0) */
    e->m = m;
    e->cfg = *cfg;
    e->nth = nth;
    int st = TB_OK;
    const size_t np = m->n_params;
    e->params = cfg->params_from ? cfg->params_from : arena_alloc(np); /* shared: another engine owns them */
    e->grads = arena_alloc(np);
    e->opt = arena_alloc(np * (size_t)optim_state_per_param(cfg->optim.kind));
    e->buffers = arena_alloc(m->n_buffers);
    if (!e->params || !e->grads || !e->opt || !e->buffers) {
        st = TB_ENOMEM;
        goto fail;
    }
    optim_state_init(cfg->optim.kind, e->opt, np); /* the optimizer's initial state is the executor's */
    /* One optimizer segment per trainable tensor: weight-decay exclusions and LARS trust ratios. */
    e->segs = calloc((size_t)m->n_entries + 1, sizeof *e->segs);
    e->trust = calloc((size_t)m->n_entries + 1, sizeof *e->trust);
    if (!e->segs || !e->trust) {
        st = tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
        goto fail;
    }
    for (int i = 0; i < m->n_entries; i++) {
        const struct param_entry *pe = &m->params[i];
        if (pe->kind == PARAM_BUFFER || pe->kind == PARAM_COUNTER) continue;
        e->segs[e->n_segs++] = (struct optim_segment){pe->off, pe->n, pe->kind != PARAM_WEIGHT};
    }
    if ((st = inst_init(&e->train, m, n_max, 1)) != TB_OK) goto fail;
    int eval_n = cfg->eval_batch > 0 ? cfg->eval_batch : n_max;
    if ((st = inst_init(&e->eval, m, eval_n, 0)) != TB_OK) goto fail;
    struct model_inst *ins[2] = {&e->train, &e->eval};
    for (int k = 0; k < 2; k++)
        ins[k]->params = e->params, ins[k]->grads = e->grads, ins[k]->opt = e->opt, ins[k]->buffers = e->buffers;
    e->fuse = !cfg->no_fuse && !cfg->no_fused_step && exec_can_fuse_update(m, n_max, &cfg->optim);
    e->dense1 = e->fuse && exec_dense1_chain(m);
    e->train.no_layer_fusion = e->eval.no_layer_fusion = cfg->no_fuse;
    e->train.par = e->eval.par = exec_units(cfg->par_units); /* before exec_prepare, which sizes the splits' parts */
    if (e->fuse && !(e->pending_in = malloc(exec_dense_inputs_floats(m) * sizeof(float)))) {
        st = tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
        goto fail;
    }
    if (nth > 1) {
        e->pool = tpool_create(nth, 1);
        if (!e->pool) {
            st = tb_error_set(TB_ENOMEM, "cannot start %d worker threads", nth);
            goto fail;
        }
    }
    if (cfg->profile) {
        e->train.prof = calloc(2 * (size_t)m->n_layers, sizeof(double));
        /* Barrier waits per thread (a pool only): imbalance and serial layers, apart from kernel time. */
        if (nth > 1) {
            e->train.prof_busy = calloc(2 * (size_t)m->n_layers * (size_t)nth, sizeof(double));
            e->train.prof_busy_cpu = nth > tpool_cpus();
            e->busy_sum = calloc(4 * (size_t)m->n_layers, sizeof(double));
        }
        if (!e->train.prof || (nth > 1 && (!e->train.prof_busy || !e->busy_sum))) {
            st = tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
            goto fail;
        }
    }
    if (cfg->trace) {
        /* Every layer's forward and backward, plus a few whole-step phases (update, all-reduce, wait). */
        e->trace.cap = 2 * m->n_layers + 8;
        e->trace.micro_batch = -1;
        if (!(e->trace.ev = calloc((size_t)e->trace.cap, sizeof *e->trace.ev))) {
            st = tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
            goto fail;
        }
    }
    struct exec_runner r = {run_cb, e->pool ? engine_barrier : NULL, e, nth};
    if ((st = exec_prepare(&e->train, &r, cfg->conv_algo, NULL)) != TB_OK) goto fail;
    if ((st = exec_prepare(&e->eval, &r, cfg->conv_algo, &e->train)) != TB_OK) goto fail;
    if (!(e->algos = malloc((size_t)m->n_layers * sizeof *e->algos))) {
        st = tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
        goto fail;
    }
    exec_algos(&e->train, e->algos); /* fixed from here on */
    if (!tb_env_off("TB_GRAD_FIRST_WRITE")) {
        e->train.pfirst = calloc((size_t)m->n_layers, 1);
        e->train.pwrote = calloc((size_t)m->n_layers, 1);
        if (!e->train.pfirst || !e->train.pwrote) {
            st = tb_error_set(TB_ENOMEM, "local_engine_create: out of memory");
            goto fail;
        }
        if ((st = plan_zero_spans(e)) != TB_OK) goto fail;
    }
    return TB_OK;
fail:
    local_engine_free(e);
    return st;
}

void local_engine_free(struct local_engine *e)
{
    claimed_bytes -= e->claimed;
    tpool_destroy(e->pool);
    inst_free(&e->train);
    inst_free(&e->eval);
    if (!e->cfg.params_from) arena_free(e->params);
    arena_free(e->grads);
    arena_free(e->opt);
    arena_free(e->buffers);
    free(e->segs);
    free(e->trust);
    free(e->trace.ev);
    free(e->pending_in);
    free(e->algos);
    free(e->busy_sum);
    free(e->zspans);
    free(e->pcap);
    memset(e, 0, sizeof *e);
}

static void zero_task(void *arg, int ith, int nth)
{
    struct local_engine *e = arg;
    size_t lo, hi;
    tb_slice(e->m->n_params, ith, nth, &lo, &hi);
    tb_zero_floats(e->grads + lo, hi - lo, e->m->n_params);
}

static void zero_spans_run(void *arg, int ith, int nth)
{
    struct local_engine *e = arg;
    for (int k = 0; k < e->n_zspans; k++) {
        size_t lo, hi;
        tb_slice(e->zspans[k].n, ith, nth, &lo, &hi);
        tb_zero_floats(e->grads + e->zspans[k].off + lo, hi - lo, e->m->n_params);
    }
}

/* Zeroes layer li's parameter gradients (calling thread). */
static void zero_layer_grads(struct local_engine *e, int li)
{
    const struct layer *l = &e->m->layers[li];
    memset(e->grads + l->w_off, 0, l->n_w * sizeof(float));
    if (l->n_b) memset(e->grads + l->b_off, 0, l->n_b * sizeof(float));
}

/* After a backward pass over [l0,l1) (pass 1) or before the gradients are read (pass 0, all layers): a
 * layer still marked is written by its pass's backward, or zeroed here; the marks are cleared. */
static void grads_settle(struct local_engine *e, int l0, int l1, int pass)
{
    struct model_inst *mi = &e->train;
    if (!mi->pfirst) return;
    for (int li = l0; li < l1; li++) {
        if (mi->pfirst[li] && !(pass && mi->pwrote[li])) zero_layer_grads(e, li);
        mi->pfirst[li] = mi->pwrote[li] = 0;
    }
}

void local_engine_zero_grads(struct local_engine *e)
{
    local_engine_finish(e);
    struct model_inst *mi = &e->train;
    if (!mi->pfirst) {
        run(e, zero_task, e);
        return;
    }
    /* A few hundred KB (EfficientNet's norms and depthwise weights) on this thread: no pool run. */
    if (e->zfloats >= (1u << 18)) run(e, zero_spans_run, e);
    else zero_spans_run(e, 0, 1);
    memcpy(mi->pfirst, e->pcap, (size_t)e->m->n_layers);
    memset(mi->pwrote, 0, (size_t)e->m->n_layers);
}

int local_engine_pass(struct local_engine *e, const struct exec_step *st, int what, double *loss_sum)
{
    TB_ASSERT(st->n >= 1 && st->n <= e->train.n_max && st->l0 >= 0 && st->l0 < st->l1 && st->l1 <= e->m->n_layers);
    local_engine_finish(e);
    struct fb_task t = {.e = e, .mi = &e->train, .st = *st, .forward = !!(what & EXECUTOR_FORWARD),
                        .backward = !!(what & EXECUTOR_BACKWARD)};
    run(e, fb_run, &t);
    if (t.backward) grads_settle(e, st->l0, st->l1, 1);
    *loss_sum = 0.0;
    if (!t.forward || st->l1 != e->m->n_layers) return TB_OK; /* no loss layer in this pass */
    *loss_sum = exec_loss_sum(&e->train, st->n);
    return isfinite(*loss_sum) ? TB_OK : tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", *loss_sum, st->step);
}

int local_engine_forward_backward(struct local_engine *e, const uint8_t *x, const int32_t *y, int n,
                                  long first_index, int n_global, long step, double *loss_sum)
{
    const struct exec_step st = {.n = n, .n_global = n_global, .first_index = first_index, .step = step,
                                 .seed = e->cfg.seed, .training = 1, .x = x, .y = y, .l0 = 0, .l1 = e->m->n_layers,
                                 .trace = e->trace.ev ? &e->trace : NULL};
    return local_engine_pass(e, &st, EXECUTOR_FORWARD | EXECUTOR_BACKWARD, loss_sum);
}

int local_engine_train_step_fused(struct local_engine *e, const uint8_t *x, const int32_t *y, int n, long step,
                                  double *loss_sum)
{
    TB_ASSERT(e->fuse && n == e->train.n_max);
    struct fb_task t = {.e = e, .mi = &e->train, .forward = 1, .backward = 1, .save_inputs = 1};
    t.st = (struct exec_step){.n = n, .n_global = n, .first_index = 0, .step = step, .seed = e->cfg.seed,
                              .training = 1, .x = x, .y = y, .l0 = 0, .l1 = e->m->n_layers,
                              .defer_dense_params = 1, .optim = e->pending ? &e->cfg.optim : NULL,
                              .pending_alpha = e->pending ? optim_adam_alpha(&e->cfg.optim, e->pending) : 0.0f,
                              .pending_in = e->pending_in, .trace = e->trace.ev ? &e->trace : NULL};
    run(e, fb_run, &t);
    grads_settle(e, 0, e->m->n_layers, 1);
    e->pending = step;
    *loss_sum = exec_loss_sum(&e->train, n);
    return isfinite(*loss_sum) ? TB_OK : tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", *loss_sum, step);
}

static void finish_run(void *arg, int ith, int nth)
{
    struct local_engine *e = arg;
    exec_update_fused(&e->train, &e->cfg.optim, e->pending, e->pending_in, ith, nth);
}

void local_engine_finish(struct local_engine *e)
{
    if (!e->pending) return;
    const double t0 = e->trace.ev ? tb_now_s() : 0.0;
    run(e, finish_run, e);
    if (e->trace.ev) exec_trace_add(&e->trace, -1, 'U', t0, tb_now_s());
    e->pending = 0;
}

struct upd_task {
    struct local_engine *e;
    long step;
};

static void upd_run(void *arg, int ith, int nth)
{
    struct upd_task *t = arg;
    struct local_engine *e = t->e;
    if (e->cfg.optim.kind == OPTIM_LARS) {
        optim_lars_trust(&e->cfg.optim, e->params, e->grads, e->segs, e->n_segs, e->trust, ith, nth);
        if (e->pool) tpool_barrier(e->pool);
    }
    optim_update(&e->cfg.optim, e->params, e->grads, e->opt, e->m->n_params, e->segs, e->n_segs, e->trust, t->step,
                 ith, nth);
}

void local_engine_update(struct local_engine *e, long step)
{
    local_engine_finish(e);
    grads_settle(e, 0, e->m->n_layers, 0);
    struct upd_task t = {e, step};
    const double t0 = e->trace.ev ? tb_now_s() : 0.0;
    run(e, upd_run, &t);
    if (e->trace.ev) exec_trace_add(&e->trace, -1, 'U', t0, tb_now_s());
}

void local_engine_update_part(struct local_engine *e, long step, int part, int parts)
{
    TB_ASSERT(e->cfg.optim.kind != OPTIM_LARS);
    local_engine_finish(e);
    grads_settle(e, 0, e->m->n_layers, 0);
    const double t0 = e->trace.ev ? tb_now_s() : 0.0;
    optim_update(&e->cfg.optim, e->params, e->grads, e->opt, e->m->n_params, e->segs, e->n_segs, e->trust, step,
                 part, parts);
    if (e->trace.ev) exec_trace_add(&e->trace, -1, 'U', t0, tb_now_s());
}

int local_engine_evaluate(struct local_engine *e, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev)
{
    local_engine_finish(e);
    const size_t per = e->m->tensors[e->m->input].per_sample;
    for (int off = 0; off < n; off += e->eval.n_max) {
        int k = n - off < e->eval.n_max ? n - off : e->eval.n_max;
        struct fb_task t = {.e = e, .mi = &e->eval, .forward = 1, .backward = 0};
        t.st = (struct exec_step){.n = k, .n_global = k, .first_index = off, .step = 0, .seed = e->cfg.seed,
                                  .training = 0, .x = x + (size_t)off * per, .y = y + off, .l0 = 0,
                                  .l1 = e->m->n_layers};
        run(e, fb_run, &t);
        ev->loss_sum += exec_loss_sum(&e->eval, k);
        ev->correct += exec_correct_count(&e->eval, k);
        ev->n += k;
        if (ev->logits) { /* the loss layer's input: this chunk's (k, classes) logits */
            const struct layer *ce = &e->m->layers[e->m->n_layers - 1];
            const size_t K = e->m->tensors[ce->in].per_sample;
            memcpy(ev->logits + (size_t)off * K, exec_act(&e->eval, ce->in), (size_t)k * K * sizeof(float));
        }
    }
    return TB_OK;
}

void local_engine_trace_begin(struct local_engine *e, double t0)
{
    if (!e->trace.ev) return;
    e->trace.t0 = t0;
    e->trace.n = 0;
}

float *local_engine_family(struct local_engine *e, enum tensor_family f, size_t *n)
{
    local_engine_finish(e); /* the caller may read or write any family */
    if (f == TF_GRADS) grads_settle(e, 0, e->m->n_layers, 0); /* and hold it: nothing left to a first write */
    *n = tensor_family_floats(e->m, e->cfg.optim.kind, f);
    switch (f) {
    case TF_PARAMS: return e->params;
    case TF_GRADS: return e->grads;
    case TF_OPT: return e->opt;
    case TF_BUFFERS: return e->buffers;
    }
    return NULL;
}

/* ---- executor_i: thin adapters, one per executor call ---- */

static struct local_engine *eng(const struct executor *ex) { return ex->ctx; }

static void cpu_destroy(struct executor *ex)
{
    local_engine_free(eng(ex));
    free(ex->ctx);
    ex->ctx = NULL;
}

static int cpu_compute(struct executor *ex, const struct executor_pass *p, int what, double *loss_sum)
{
    struct local_engine *e = eng(ex);
    const struct exec_step st = {.n = p->n, .n_global = p->n_global, .first_index = p->first_index, .step = p->step,
                                 .seed = e->cfg.seed, .training = p->training, .x = p->x, .y = p->y, .l0 = p->l0,
                                 .l1 = p->l1, .coll = p->coll,
                                 .trace = p->training && e->trace.ev ? &e->trace : NULL};
    const int rc = local_engine_pass(e, &st, what, loss_sum);
    if ((what & EXECUTOR_FORWARD) && p->l1 == ex->m->n_layers) {
        if (p->n_correct) *p->n_correct += exec_correct_count(&e->train, p->n);
        if (p->logits && rc == TB_OK) exec_logits_copy(&e->train, p->n, p->logits);
    }
    return rc;
}

static void cpu_zero_grads(struct executor *ex) { local_engine_zero_grads(eng(ex)); }

static int cpu_update(struct executor *ex, long step, int part, int parts)
{
    if (parts == 1) local_engine_update(eng(ex), step);
    else local_engine_update_part(eng(ex), step, part, parts);
    return TB_OK;
}

static int cpu_get(struct executor *ex, enum tensor_family f, float *dst)
{
    size_t n;
    const float *src = local_engine_family(eng(ex), f, &n);
    memcpy(dst, src, n * sizeof(float));
    return TB_OK;
}

static int cpu_set(struct executor *ex, enum tensor_family f, const float *src)
{
    size_t n;
    float *dst = local_engine_family(eng(ex), f, &n);
    if (!src) optim_state_init(ex->cfg.optim.kind, dst, ex->m->n_params); /* TF_OPT's initial state */
    else memcpy(dst, src, n * sizeof(float));
    return TB_OK;
}

static int cpu_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b)
{
    if (f < TF_PARAMS || f > TF_BUFFERS) return tb_error_set(TB_EINVAL, "cpu executor: no tensor family %d", (int)f);
    b->data = local_engine_family(eng(ex), f, &b->n);
    b->host = 1;
    return TB_OK;
}

/* exec.c runs every op kind there is. */
static int cpu_supports(const struct executor *ex, enum op_kind op) { return op >= 0 && op < OP_COUNT; }

static int cpu_train_step(struct executor *ex, const struct executor_pass *p, double *loss_sum)
{
    TB_ASSERT(p->first_index == 0 && p->n_global == p->n && p->l0 == 0 && (p->l1 == 0 || p->l1 == ex->m->n_layers));
    return local_engine_train_step_fused(eng(ex), p->x, p->y, p->n, p->step, loss_sum);
}

static void cpu_finish(struct executor *ex) { local_engine_finish(eng(ex)); }

static int cpu_evaluate(struct executor *ex, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev)
{
    return local_engine_evaluate(eng(ex), x, y, n, ev);
}

static int cpu_stats(struct executor *ex, struct executor_stats *s)
{
    const struct local_engine *e = eng(ex);
    s->profile = e->train.prof;
    if (e->busy_sum) {
        const size_t n2 = 2 * (size_t)e->m->n_layers;
        for (size_t k = 0; k < n2; k++) {
            double w = 0.0, mx = 0.0;
            for (int t = 0; t < e->nth; t++) {
                const double b = e->train.prof_busy[(size_t)t * n2 + k];
                w += b;
                if (b > mx) mx = b;
            }
            e->busy_sum[k] = w, e->busy_sum[n2 + k] = mx;
        }
        s->profile_busy = e->busy_sum;
        s->profile_busy_max = e->busy_sum + n2;
        s->profile_threads = e->nth;
    }
    if (e->pool) s->barriers = tpool_barriers(e->pool);
    s->trace = e->trace.ev;
    s->n_trace = e->trace.ev ? e->trace.n : 0;
    s->conv_algos = e->algos;
    return TB_OK;
}

static void cpu_trace(struct executor *ex, char phase, double t0, double t1)
{
    struct local_engine *e = eng(ex);
    if (!phase) local_engine_trace_begin(e, t0);
    else exec_trace_add(e->trace.ev ? &e->trace : NULL, -1, phase, t0, t1);
}

/* The engine keeps its own copy of the config, which its passes read the seed from. */
static void cpu_set_seed(struct executor *ex, uint64_t seed) { eng(ex)->cfg.seed = seed; }

static const struct executor_i cpu_iface = {
    .name = "cpu", .destroy = cpu_destroy, .compute = cpu_compute, .zero_grads = cpu_zero_grads,
    .update = cpu_update, .get_tensors = cpu_get, .set_tensors = cpu_set, .buffer = cpu_buffer,
    .supports = cpu_supports, .train_step = cpu_train_step, .finish = cpu_finish, .evaluate = cpu_evaluate,
    .stats = cpu_stats, .trace = cpu_trace, .set_seed = cpu_set_seed,
};

int executor_cpu_create(struct executor *ex)
{
    if (ex->cfg.l1) return executor_cpu_stage_create(ex); /* a pipeline stage: executor_cpu_stage.c */
    struct local_engine *e = calloc(1, sizeof *e);
    if (!e) return tb_error_set(TB_ENOMEM, "cpu executor: out of memory");
    const int st = local_engine_create(e, ex->m, &ex->cfg);
    if (st != TB_OK) {
        free(e);
        return st;
    }
    ex->i = &cpu_iface;
    ex->ctx = e;
    ex->fused_step = e->fuse;
    return TB_OK;
}
