/* ipu_prepare.c — preparing the ipu engine: the plan (ipu_plan_resolve), a memory estimate checked
 * before allocating, the whole-model executor that tunes convolutions once and times each layer for the
 * split, the queues, devices (stage executors), worker pool and infeed thread.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "backend_executor.h"
#include "clock.h"
#include "layout.h"
#include "fpenv.h"
#include "model_range.h"
#include "rng.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

extern void openblas_set_num_threads(int);

/* Refuses, before allocating, a plan whose estimate does not fit: failing in a second with the figures
 * beats the kernel's OOM killer minutes later. A device with memory of its own (a GPU) checks it when
 * each stage's executor is created, against its free memory: the host's says nothing of it, and
 * recomputation chosen for the host's sake would be refused there. What such devices do hold on the host,
 * replicas' host copies of their gradient slices (ipu_stage.c: a canonical-layout prefix, at most the
 * model's parameters each), is checked against the host's memory instead. */
static int check_fits(const struct ipu_ctx *c, double need, const char *what)
{
    if (c->cfg.device[0] && executor_device_own_memory(c->cfg.device)) {
        if (c->p.R == 1) return TB_OK;
        need = 4.0 * (double)c->D * (double)c->m->n_params;
        what = "the host copies of the devices' gradients";
    }
    const double avail = executor_host_mem_available();
    if (avail > 0.0 && need > 0.9 * avail) {
        /* MiB under a GiB: "needs 0.2 GiB but 0.2 GiB is available" says nothing. */
        const int gib = 0.9 * avail >= 1073741824.0;
        const double u = gib ? 1073741824.0 : 1048576.0;
        return tb_error_set(TB_EINVAL, "ipu: %s of %s at micro-batch %d: about %.1f %s needed but only %.1f %s "
                                       "available: %suse --recompute or more --stages",
                            what, c->m->name, c->p.B, need / u, gib ? "GiB" : "MiB", 0.9 * avail / u,
                            gib ? "GiB" : "MiB", c->p.B > 1 ? "lower --micro-batch (raise --ga), " : "");
    }
    return TB_OK;
}

/* Bytes the devices will hold: activation slots, gradient buffers, stashes, parameter slices, queues. */
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
        const int in_flight = ipu_plan_in_flight(p, s), l0 = p->l0[s], l1 = p->l0[s + 1];
        double act = 4.0 * (double)model_range_act_floats(m, l0, l1, p->B, work);
        double slots = in_flight, stash = 0.0;
        if (p->recompute || p->prec != STAGE_PREC_FP32) {
            /* One working slot of the largest segment, and per micro-batch held the checkpoints
             * (recompute) or every activation at 2 bytes (half storage). */
            const double eb = (double)stage_prec_bytes(p->prec);
            const int K = p->recompute ? ipu_plan_segments(p, m, s, cuts) : ipu_plan_block_segments(p, m, s, cuts);
            const double whole = act;
            act = 0.0, slots = 1.0;
            if (p->recompute)
                stash = s == 0 ? (double)p->B * (double)c->per_in : eb * (double)model_boundary_floats(m, l0, p->B, 0);
            else
                stash = whole / 2.0;
            for (int k = 0; k < K; k++) {
                const double a = 4.0 * (double)model_range_act_floats(m, cuts[k], cuts[k + 1], p->B, work);
                if (a > act) act = a;
                if (k > 0 && p->recompute) stash += eb * (double)model_boundary_floats(m, cuts[k], p->B, 0);
            }
            stash *= in_flight;
        }
        const size_t p0 = s == 0 ? 0 : ipu_plan_first_offset(m, l0, 0);
        const size_t p1 = s == p->S - 1 ? m->n_params : ipu_plan_first_offset(m, l1, 0);
        const double params = 4.0 * (double)(p1 - p0) * (2.0 + spp + p->master);
        const double queue = 2.0 * ipu_plan_queue_depth(p) * 4.0 * (double)model_boundary_floats(m, l1, p->B, 0);
        total += p->R * ((slots + 1.0) * act + params + stash + queue);
    }
    free(cuts), free(work);
    return total;
}

/* A whole-model executor of one micro-batch on one thread: it tunes the convolution algorithms (the
 * process-wide choices every stage executor then finds for the same shapes) and times each layer for
 * the split. Timing only needs plausible magnitudes: small seeded weights, unit running variances. */
static int timing_init(struct executor *ex, const struct model *m, const struct run_config *cfg, int n_max,
                       int par_units)
{
    struct executor_config ec;
    backend_executor_config(cfg, n_max, 1, &ec);
    ec.par_units = par_units; /* the stages' cut: their shapes find its tuned algorithms */
    ec.eval_batch = 1; /* it never evaluates */
    ec.no_fused_step = 1, ec.profile = 0, ec.trace = 0;
    int st = executor_create(ex, m, &ec);
    if (st != TB_OK) return st;
    float *w = malloc(sizeof(float) * (m->n_params + m->n_buffers + 1));
    if (!w) return tb_error_set(TB_ENOMEM, "ipu: out of memory");
    for (size_t i = 0; i < m->n_params; i++) w[i] = 0.1f * (2.0f * rng_uniform(cfg->seed, RNG_STREAM_INIT, i) - 1.0f);
    st = executor_set_tensors(ex, TF_PARAMS, w);
    for (size_t i = 0; i < m->n_buffers; i++) w[i] = 1.0f;
    if (st == TB_OK) st = executor_set_tensors(ex, TF_BUFFERS, w);
    free(w);
    return st;
}

/* Per-layer forward and backward seconds for n samples: one warm-up pass, then the best of two; a
 * single pass when reps = 1 (large models, where one pass already takes seconds). */
static void timing_measure(struct executor *ex, const struct run_config *cfg, int n, int reps, double *tf, double *tb)
{
    const struct model *m = ex->m;
    const size_t per_in = m->tensors[m->input].per_sample;
    uint8_t *x = calloc((size_t)n * per_in, 1);
    int32_t *y = calloc((size_t)n, sizeof *y);
    TB_ASSERT(x && y);
    for (size_t i = 0; i < (size_t)n * per_in; i++) x[i] = (uint8_t)(rng_hash(cfg->seed, RNG_STREAM_SYNTHETIC, i) & 255);
    struct executor_pass ps = {.n = n, .n_global = n, .step = 1, .training = 1, .x = x, .y = y};
    double loss;
    /* Random weights may well give a non-finite loss: only the time counts here. */
    if (reps > 1 && executor_forward_backward(ex, &ps, &loss) != TB_OK) tb_error_clear();
    for (int i = 0; i < m->n_layers; i++) tf[i] = tb[i] = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        for (int i = 0; i < m->n_layers; i++) {
            ps.l0 = i, ps.l1 = i + 1;
            const double t0 = tb_now_s();
            if (executor_forward(ex, &ps, &loss) != TB_OK) tb_error_clear();
            executor_synchronize(ex); /* a GPU's layer ends when its kernels do, not at their launch */
            const double dt = tb_now_s() - t0;
            if (dt < tf[i]) tf[i] = dt;
        }
        for (int i = m->n_layers - 1; i >= 0; i--) {
            ps.l0 = i, ps.l1 = i + 1;
            const double t0 = tb_now_s();
            executor_backward(ex, &ps);
            executor_synchronize(ex);
            const double dt = tb_now_s() - t0;
            if (dt < tb[i]) tb[i] = dt;
        }
    }
    free(x), free(y);
}

int ipu_prepare(struct backend *b, const struct model *m, const struct run_config *cfg)
{
    struct ipu_ctx *c = b->ctx;
    struct ipu_plan *p = &c->p;
    struct executor ti;
    memset(&ti, 0, sizeof ti);
    int st;
    c->m = m;
    c->cfg = *cfg;
    if (cfg->sync_bn)
        return tb_error_set(TB_EUNSUPPORTED, "ipu: --sync-bn is not supported (BatchNorm statistics are per micro-batch)");
    if (cfg->transport_mpi) return tb_error_set(TB_EUNSUPPORTED, "ipu: --transport mpi is not supported");
    if ((st = ipu_plan_resolve(p, m, cfg)) != TB_OK) return st;
    c->half = p->prec != STAGE_PREC_FP32;
    c->segmented = p->recompute || c->half;
    const int S = p->S, R = p->R;
    c->D = S * R;
    c->per_in = m->tensors[m->input].per_sample;
    c->labels_bytes = ((size_t)p->B * sizeof(int32_t) + 63) / 64 * 64;
    if (p->prec == STAGE_PREC_FP16) loss_scaler_init(&c->ls, p->loss_scale);
    else c->ls = (struct loss_scaler){.scale = 1.0f};
    fpenv_set(); /* the caller runs device 0 */
    openblas_set_num_threads(1);

    /* One whole-model instance of a micro-batch: tunes convolutions once for every stage, and times
     * each layer when the split is ours to choose. */
    if ((st = check_fits(c, 8.0 * (double)model_act_floats(m, p->B) + 12.0 * (double)m->n_params,
                         "the tuning instance")) != TB_OK)
        return st;
    if ((st = timing_init(&ti, m, cfg, p->B, tb_replica_units(p->R))) != TB_OK) goto fail;
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
    executor_destroy(&ti); /* the stages find its convolution choices in the process-wide cache */
    for (int s = 0; s < S; s++)
        if (p->l0[s] >= p->l0[s + 1]) {
            st = tb_error_set(TB_EINVAL, "ipu: stage %d of %s holds no layers (blocks %d..%d)", s, m->name,
                              p->first_block[s], p->first_block[s + 1] - 1);
            goto fail;
        }

    c->dev = calloc((size_t)c->D, sizeof *c->dev);
    c->bar = calloc((size_t)S, sizeof *c->bar);
    c->gbufs = calloc((size_t)c->D, sizeof *c->gbufs);
    c->gbufs16 = calloc((size_t)c->D, sizeof *c->gbufs16);
    c->cuts = malloc(sizeof *c->cuts * (size_t)(m->n_blocks + 2));
    const size_t links = (size_t)R * (size_t)(S - 1);
    c->q_act = calloc(links + 1, sizeof *c->q_act);
    c->q_grad = calloc(links + 1, sizeof *c->q_grad);
    if (!c->dev || !c->bar || !c->gbufs || !c->gbufs16 || !c->cuts || !c->q_act || !c->q_grad) {
        st = tb_error_set(TB_ENOMEM, "ipu: out of memory");
        goto fail;
    }
    for (int s = 0; s < S; s++) tpool_barrier_init(&c->bar[s], R, c->D);
    if ((st = check_fits(c, devices_bytes(c), "the devices")) != TB_OK && !p->recompute && !cfg->ipu.micro_batch &&
        !cfg->ipu.ga) {
        /* Nothing about the split was asked for: recomputation (same bits, a forward more) is ours to
         * choose too when the devices would not fit without it; the description says so. Only an
         * explicit choice that cannot fit is refused. */
        tb_error_clear();
        p->recompute = 1;
        p->recompute_chosen = 1;
        c->segmented = 1;
        st = check_fits(c, devices_bytes(c), "the devices (with recomputation)");
    }
    if (st != TB_OK) goto fail;
    /* The exchange: per replica, one activation and (when any crossing tensor needs one) one gradient
     * queue per boundary. */
    const size_t eb = stage_prec_bytes(p->prec);
    const int depth = ipu_plan_queue_depth(p);
    for (int r = 0; r < R; r++)
        for (int s = 0; s + 1 < S; s++) {
            const size_t k = (size_t)r * (size_t)(S - 1) + (size_t)s;
            const int split = p->l0[s + 1];
            const size_t fa = model_boundary_floats(m, split, p->B, 0), fg = model_boundary_floats(m, split, p->B, 1);
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
            if ((st = ipu_dev_init(c, dev_at(c, s, r), s, r)) != TB_OK) goto fail;
    ipu_set_grad_scale(c);

    if (c->D > 1 && !(c->pool = tpool_create(c->D, 1))) {
        st = tb_error_set(TB_ENOMEM, "ipu: cannot start %d device workers", c->D);
        goto fail;
    }
    if (p->prefetch > 0) {
        pthread_mutex_init(&c->pf_mu, NULL);
        pthread_cond_init(&c->pf_cv, NULL);
        if (pthread_create(&c->pf_th, NULL, ipu_infeed_main, c) != 0) {
            st = tb_error_set(TB_ENOMEM, "ipu: cannot start the infeed worker");
            goto fail;
        }
        c->pf_started = 1;
    }
    if ((cfg->profile && !(c->prof_all = calloc(2 * (size_t)m->n_layers, sizeof *c->prof_all))) ||
        !(c->algos_all = malloc((size_t)m->n_layers * sizeof *c->algos_all))) {
        st = tb_error_set(TB_ENOMEM, "ipu: out of memory");
        goto fail;
    }
    return TB_OK;
fail:
    executor_destroy(&ti);
    return st;
}
