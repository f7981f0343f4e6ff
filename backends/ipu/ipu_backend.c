/* ipu_backend.c — an IPU-style engine on CPU devices: the model is cut at block boundaries into S
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
 * Memory (the stage executors'): a stage's activation slots follow its own plan (model_range.h: only
 * the tensors it touches); its parameters, gradients and buffers keep the canonical offsets in an
 * address space of which only its slice is committed; optimizer state (and fp32 master weights) is
 * compact per stage.
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
 * Options (run_config.ipu): stages, split "5,12" (block indices; otherwise balanced on per-layer times
 * measured at prepare, which load can move; half precision rounds the gradients crossing a split to 2
 * bytes, so its bits repeat only with a given split; each stage's ring chunks its slice by its place in
 * the whole model, allreduce_ring_window, so fp32's do not depend on the split with any replicas),
 * micro_batch, ga, replicas, schedule gpipe|1f1b, recompute (segment checkpoints, above), precision
 * fp32|bf16|fp16 (+m: fp32 master weights), loss_scale (fp16), prefetch (micro-batches the infeed worker
 * runs ahead: 0 = 3, negative = off), profile. The backend writes no files: each training step's
 * intervals and per-device summary stay in memory for backend_stats (the harness's --timeline CSV and
 * figures.timeline).
 *
 * Threading and ownership: S·R device workers on one persistent pinned pool (the caller is device 0)
 * plus one infeed (prefetch) thread; each device touches only its own executor and the queue ends it
 * owns; the ring all-reduce reads a neighbour replica's gradient slice between barriers. The context
 * owns everything; calls come from one harness thread at a time.
 *
 * Devices: each stage of each replica is a stage executor (executor.h: executor_config.l0/l1, slots,
 * prec, master, recompute, cuts; core/executor_cpu_stage.c and stage_run.c on cpu), which holds the
 * stage's memory and runs its layers, segments and half-precision storage described above; this
 * engine keeps the plan, the queues and messages (boundaries exported and imported by the executors),
 * the op order, the replicas' all-reduce on the executors' gradient buffers, loss scaling and the
 * timeline. It never calls a kernel.
 *
 * Files (backends/ipu/): this one, the backend_i glue (steps, accounting, stats, canonical tensors,
 * description, constructor); ipu_prepare.c, ipu_stage.c (a device: its stage executor, queue ends, op
 * order), ipu_schedule.c (device workers), ipu_exchange.c (queues, infeed), ipu_replicas.c (all-reduce,
 * update, loss scale), ipu_plan.c, ipu_queue.c; ipu_priv.h holds the context they share.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "clock.h"
#include "model_range.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keeps the step's events and per-device summary for backend_stats (the result row's chart, the
 * --timeline CSV): the per-device logs are reset by the next evaluation or step. Grows once; an
 * allocation failure only empties the copy. */
static void keep_timeline(struct ipu_ctx *c, double span)
{
    int n = 0;
    for (int d = 0; d < c->D; d++) n += c->dev[d].n_ev;
    c->tl_step = 0;
    if (!c->dstep && !(c->dstep = calloc((size_t)c->D, sizeof *c->dstep))) {
        c->n_tl = 0;
        return;
    }
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
        const double idle = span - v->t_compute - v->t_exchange;
        c->dstep[d] = (struct device_step){d,           v->s,         v->r,           span,     v->t_compute,
                                           v->t_exchange, v->t_wait, idle > 0 ? idle : 0.0, v->t_allreduce,
                                           v->t_update, v->bytes,   v->peak_in_use};
    }
    c->tl_step = c->step;
}

/* Sums losses, fills the per-device-mean timings, and accumulates the bubble. */
static int collect(struct ipu_ctx *c, struct step_stats *st)
{
    const struct ipu_plan *p = &c->p;
    double span = 0.0, span_ar = 0.0, comp = 0.0, exch = 0.0, ar = 0.0, upd = 0.0, loss = 0.0;
    for (int d = 0; d < c->D; d++) {
        if (c->dev[d].t_end > span) span = c->dev[d].t_end;
        if (c->dev[d].t_end + c->dev[d].t_allreduce > span_ar) span_ar = c->dev[d].t_end + c->dev[d].t_allreduce;
    }
    /* The sums cover the steps the harness's per-step split covers, where it says which are timed
     * (backend_count_steps): the first timed step drops the warm-up's, and a warm-up step after it (the next
     * --repeat's) is left out; the split had covered the timed steps while these took warm-up steps 2 on.
     * Untold, the first step alone is left out: it pays page faults and warm-up. */
    int restart = 0, count = 1;
    if (!c->told) restart = c->n_steps == 1;
    else if (c->timed && !c->counted_timed) restart = 1, c->counted_timed = 1;
    else if (!c->timed && c->counted_timed) count = 0;
    if (restart) c->sum_span = c->sum_busy = 0.0, c->n_counted = 0;
    for (int d = 0; d < c->D; d++) {
        struct ipu_dev *v = &c->dev[d];
        comp += v->t_compute, exch += v->t_exchange, ar += v->t_allreduce, upd += v->t_update;
        /* The step split's tiling per stage too: compute, exchange, all-reduce and idle to the last all-reduce's end. */
        const double idle = span_ar - v->t_compute - v->t_exchange - v->t_allreduce;
        if (restart) v->sum_compute = v->sum_exchange = v->sum_idle = v->sum_allreduce = v->sum_fwd = v->sum_bwd = 0.0;
        if (count) {
            v->sum_compute += v->t_compute, v->sum_exchange += v->t_exchange, v->sum_idle += idle > 0 ? idle : 0;
            v->sum_allreduce += v->t_allreduce, v->sum_fwd += v->t_fwd, v->sum_bwd += v->t_bwd;
        }
        if (v->peak_in_use > v->peak_in_use_all) v->peak_in_use_all = v->peak_in_use;
    }
    for (int r = 0; r < p->R; r++) loss += dev_at(c, p->S - 1, r)->loss;
    st->loss_sum = loss;
    st->t_compute = comp / c->D;
    st->t_exchange = exch / c->D;
    st->t_allreduce = ar / c->D;
    /* The parts tile the devices' time to the all-reduce's end: a device's all-reduce starts at its own compute's
     * end and waits there for the last, so idle measured to the compute's end alone counted that wait twice (parts
     * of 0.85 ms in a 0.67 ms step on a loaded machine). Each device's parts lie within [0, its all-reduce's end]. */
    st->t_idle = span_ar - st->t_compute - st->t_exchange - st->t_allreduce;
    if (st->t_idle < 0) st->t_idle = 0;
    if (c->do_update) st->t_update = upd / c->D;
    if (count) c->sum_span += span * c->D, c->sum_busy += comp + exch, c->n_counted++;
    c->n_steps++;
    keep_timeline(c, span);
    if (!isfinite(loss)) {
        st->nonfinite = 1;
        return tb_error_set(TB_EDIVERGED, "loss is %g at step %ld", loss, c->step);
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
    ipu_job_begin(c);
    c->t0 = tb_now_s();
    if (c->pf_started) ipu_infeed_start_step(c, batch);
    ipu_run_devices(c);
    if (c->pf_started) ipu_infeed_wait_step(c);
    c->overflowed = atomic_load(&c->overflow);
    int rc = ipu_job_status(c);
    if (rc != TB_OK) return rc;
    rc = collect(c, st);
    if (do_update && rc == TB_OK) rc = ipu_loss_scale_after_update(c, st);
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
    ipu_job_begin(c);
    c->t0 = tb_now_s();
    ipu_run_devices(c);
    const int rc = ipu_job_status(c);
    return rc != TB_OK ? rc : ipu_loss_scale_after_update(c, st);
}

static int ipu_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev)
{
    struct ipu_ctx *c = b->ctx;
    if (batch->n <= 0) return TB_OK;
    c->mode = MODE_EVAL;
    c->batch = batch;
    c->eval_logits = ev->logits; /* the last stage's devices write their micro-batches' rows */
    ipu_job_begin(c);
    c->t0 = tb_now_s();
    ipu_run_devices(c);
    c->eval_logits = NULL;
    const int rc = ipu_job_status(c);
    if (rc != TB_OK) return rc;
    for (int r = 0; r < c->p.R; r++) {
        const struct ipu_dev *v = dev_at(c, c->p.S - 1, r);
        ev->loss_sum += v->loss, ev->correct += v->correct, ev->n += v->n_done;
    }
    return TB_OK;
}

/* ---- canonical tensors: stage slices assembled / scattered ---- */

static int ipu_get(struct backend *b, enum tensor_family f, float *dst)
{
    struct ipu_ctx *c = b->ctx;
    int st = TB_OK;
    /* Replicas hold the same values (BatchNorm buffers: replica 0's); each stage its slice. */
    for (int s = 0; s < c->p.S && st == TB_OK; s++) st = executor_get_tensors(&dev_at(c, s, 0)->ex, f, dst);
    return st;
}

static int ipu_set(struct backend *b, enum tensor_family f, const float *src)
{
    struct ipu_ctx *c = b->ctx;
    int st = TB_OK;
    for (int d = 0; d < c->D && st == TB_OK; d++) st = executor_set_tensors(&c->dev[d].ex, f, src);
    /* The optimizer's initial state (a fresh run: --repeat, a tta seed) includes the loss scaler's: a run
     * starts from the configured scale, not from where the last one left it. A checkpoint's state (src)
     * comes with its own scaler, restored after this (restore_loss_scaling). */
    if (st == TB_OK && f == TF_OPT && !src) {
        if (c->p.prec == STAGE_PREC_FP16) loss_scaler_init(&c->ls, c->p.loss_scale);
        else c->ls = (struct loss_scaler){.scale = 1.0f};
        c->overflowed = 0;
        ipu_set_grad_scale(c);
    }
    return st;
}

/* Every device's executor (stages and replicas) keys its dropout and stochastic rounding with the run's seed. */
static int ipu_set_seed(struct backend *b, uint64_t seed)
{
    struct ipu_ctx *c = b->ctx;
    int st = TB_OK;
    for (int d = 0; d < c->D && st == TB_OK; d++) st = executor_set_seed(&c->dev[d].ex, seed);
    return st;
}

/* The run's per-stage accounting so far into r. */
static void pipeline_report_fill(struct ipu_ctx *c, struct pipeline_report *r)
{
    const struct ipu_plan *p = &c->p;
    memset(r, 0, sizeof *r);
    r->stages = p->S, r->micro_batch = p->B, r->ga = p->G, r->replicas = p->R;
    r->split_given = p->split_given;
    for (int s = 0; s < p->S && s < BACKEND_MAX_STAGES; s++) r->first_block[s] = p->first_block[s];
    const long steps = c->n_counted;
    r->steps = steps;
    const double eb = (double)stage_prec_bytes(p->prec);
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
        struct ipu_dev *v = dev_at(c, s, 0);
        r->exchange_bytes[s] = eb * (double)(model_boundary_floats(c->m, v->l0, p->B, 0) +
                                             model_boundary_floats(c->m, v->l1, p->B, 1));
        struct executor_stats es;
        executor_stats(&v->ex, &es);
        r->param_bytes[s] = es.grad_bytes;
        r->peak_act_bytes[s] = ipu_stage_act_bytes(c, s);
        r->weight_bytes[s] = es.weight_bytes;
        r->weight_window_bytes[s] = es.window_bytes;
    }
    r->bubble_ideal = ipu_plan_ideal_bubble(p);
    r->bubble_measured = c->sum_span > 0 ? 1.0 - c->sum_busy / c->sum_span : NAN;
}

/* The pipeline report and (--profile) the layer profile, assembled from replica 0's stages, which
 * together hold every layer once; the last training step's intervals and per-device summary as kept. */
static int ipu_stats(struct backend *b, struct backend_stats *st)
{
    struct ipu_ctx *c = b->ctx;
    pipeline_report_fill(c, &c->rep);
    st->pipeline = &c->rep;
    st->loss_scaling = c->p.prec == STAGE_PREC_FP16 ? &c->ls : NULL;
    st->n_devices = c->p.S * c->p.R;
    if (c->prof_all) {
        const int L = c->m->n_layers;
        memset(c->prof_all, 0, 2 * (size_t)L * sizeof(double));
        for (int s = 0; s < c->p.S; s++) {
            struct ipu_dev *v = dev_at(c, s, 0);
            struct executor_stats es;
            executor_stats(&v->ex, &es);
            if (!es.profile) continue;
            for (int i = v->l0; i < v->l1; i++)
                c->prof_all[2 * i] = es.profile[2 * i], c->prof_all[2 * i + 1] = es.profile[2 * i + 1];
        }
        st->layer_profile = c->prof_all;
    }
    /* Each stage's convolutions as its replica 0 runs them (the replicas share the process's choices). */
    int ok = c->algos_all != NULL;
    for (int s = 0; ok && s < c->p.S; s++) {
        struct ipu_dev *v = dev_at(c, s, 0);
        struct executor_stats es;
        ok = executor_stats(&v->ex, &es) == TB_OK && es.conv_algos;
        for (int i = v->l0; ok && i < v->l1; i++) c->algos_all[i] = es.conv_algos[i];
    }
    tb_error_clear();
    st->conv_algos = ok ? c->algos_all : NULL;
    st->step = c->tl_step;
    st->timeline = c->tl, st->n_timeline = c->n_tl;
    st->devices = c->dstep, st->n_device_steps = c->tl_step ? c->D : 0;
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
        snprintf(t, sizeof t, "%s%.1f", s ? "/" : "", ipu_stage_act_bytes(c, s) / 1048576.0);
        strncat(mem, t, sizeof mem - strlen(mem) - 1);
    }
    char rec[96] = "";
    if (c->segmented) {
        snprintf(rec, sizeof rec, ", %s (segments ",
                 p->recompute_chosen ? "recompute chosen to fit" : p->recompute ? "recompute" : "2-byte store");
        for (int s = 0; s < p->S; s++) {
            char t[16];
            snprintf(t, sizeof t, "%s%d", s ? "/" : "", dev_at(c, s, 0)->n_seg);
            strncat(rec, t, sizeof rec - strlen(rec) - 1);
        }
        strncat(rec, ")", sizeof rec - strlen(rec) - 1);
    }
    char meas[96] = "";
    if (c->n_counted > 0 && c->sum_span > 0)
        snprintf(meas, sizeof meas, ", measured %.1f%% over %ld step%s", 100.0 * (1.0 - c->sum_busy / c->sum_span),
                 c->n_counted, c->n_counted > 1 ? "s" : "");
    char scale[96] = "";
    if (p->prec == STAGE_PREC_FP16) {
        /* Before any step (the harness takes this line at prepare) there is no count to give. */
        char skipped[40] = "";
        if (c->n_steps > 0) snprintf(skipped, sizeof skipped, ", %ld steps skipped", c->ls.skipped);
        snprintf(scale, sizeof scale, ", loss scale %g (%s%s)", (double)c->ls.scale,
                 p->loss_scale > 0.0f ? "static" : "dynamic", skipped);
    }
    /* Most important first: the harness keeps a bounded prefix of this line. */
    snprintf(buf, n,
             "ipu: %d stage%s x %d replica%s, global batch %d = micro-batch %d x GA %d x %d%s, %s, split %s (%s), "
             "%s%s%s%s, prefetch %d; bubble ideal %.1f%%%s; act MiB/stage %s",
             p->S, p->S == 1 ? "" : "s", p->R, p->R == 1 ? "" : "s", c->cfg.batch, p->B, p->G, p->R,
             p->mb_chosen == 2 ? " (chosen to fit memory)" : p->mb_chosen ? " (chosen)" : "", ipu_schedule_name(p->sched), p->S > 1 ? split : "-",
             p->S == 1 ? "one stage" : p->split_given ? "given" : "timed", stage_prec_name(p->prec),
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
        for (int d = 0; d < c->D; d++) ipu_dev_free(&c->dev[d]);
    const size_t links = (size_t)c->p.R * (size_t)(c->p.S > 0 ? c->p.S - 1 : 0);
    if (c->q_act)
        for (size_t k = 0; k < links; k++) ipu_queue_free(&c->q_act[k]);
    if (c->q_grad)
        for (size_t k = 0; k < links; k++) ipu_queue_free(&c->q_grad[k]);
    if (c->q_in)
        for (int r = 0; r < c->p.R; r++) ipu_queue_free(&c->q_in[r]);
    free(c->tl), free(c->dstep), free(c->prof_all), free(c->algos_all);
    free(c->q_act), free(c->q_grad), free(c->q_in), free(c->dev), free(c->bar);
    free(c->gbufs), free(c->gbufs16), free(c->cuts);
    free(c);
    b->ctx = NULL;
}

/* The harness's word on which steps are timed (see collect). */
static void ipu_count_steps(struct backend *b, int timed)
{
    struct ipu_ctx *c = b->ctx;
    c->told = 1, c->timed = timed != 0;
}

/* --resume of an fp16 run: the scale and counts the checkpoint kept, and the stages' gradients scaled by it. */
static int ipu_restore_loss_scaling(struct backend *b, const char *state)
{
    struct ipu_ctx *c = b->ctx;
    if (c->p.prec != STAGE_PREC_FP16) return TB_OK;
    const int st = loss_scaler_restore(&c->ls, state);
    if (st == TB_OK) ipu_set_grad_scale(c);
    return st;
}

static const struct backend_i ipu_iface = {
    .name = "ipu", .prepare = ipu_prepare, .forward_backward = ipu_forward_backward, .update = ipu_update,
    .evaluate = ipu_evaluate, .get_tensors = ipu_get, .set_tensors = ipu_set, .destroy = ipu_destroy,
    .train_step = ipu_train_step, .describe = ipu_describe, .stats = ipu_stats,
    .restore_loss_scaling = ipu_restore_loss_scaling, .set_seed = ipu_set_seed, .count_steps = ipu_count_steps,
};

int backend_ipu_create(struct backend *b)
{
    struct ipu_ctx *c = calloc(1, sizeof *c);
    if (!c) return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    b->i = &ipu_iface;
    b->ctx = c;
    return TB_OK;
}
