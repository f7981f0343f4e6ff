/* backend_local.c — the cpu and threads backends: a schedule over one executor.
 *
 * cpu plans the executor with one thread; threads with --threads (0 = all cores), which the cpu device
 * runs as a pinned pool; cuda is cpu's schedule on the cuda device (one stream, so one "thread"). A step
 * is zero + forward/backward + update, or the executor's fused train step where it has one (the batch-1
 * deferred Adam; on cuda the captured step). A run of steps is the executor's (executor_run_steps: on the
 * cuda device's captured step, a loop on the GPU; elsewhere those steps one by one, the same code path
 * for every device). OpenBLAS is always single-threaded: the executor
 * partitions every sgemm itself, so cores are never oversubscribed and results do not depend on
 * OpenBLAS's own threading. The backend owns its executor; one caller drives it.
 */
#include "backend.h"

#include "backend_executor.h"
#include "clock.h"
#include "executor.h"
#include "status.h"
#include "tpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct local_ctx {
    struct executor ex;
    struct backend_trace_buf trace; /* backend_stats' copy of the executor's trace events */
    int want_threads; /* 1 for cpu, cfg.n_threads (0 = all cores) for threads */
    const char *device; /* cuda: the device it always uses (NULL: run_config.device) */
    double *losses;     /* run_steps: each step's loss sum (cap of them) */
    long cap;
};

static int lb_prepare(struct backend *b, const struct model *m, const struct run_config *cfg)
{
    struct local_ctx *c = b->ctx;
    int nth = c->want_threads;
    if (nth == 0) {
        nth = cfg->n_threads;
        if (nth == 0) nth = tpool_cpus();
        if (nth < 1 || nth > 1024) return tb_error_set(TB_EINVAL, "--threads must be in 1..1024 (got %d)", nth);
    }
    struct executor_config ec;
    backend_executor_config(cfg, cfg->batch, nth, &ec);
    if (c->device) ec.device = c->device;
    /* cuda takes --precision (the harness refuses it for cpu and threads): bf16 and fp16 are its mixed
     * precision, with fp32 master weights whether or not the name ends in m; fp16 with --loss-scale. */
    if (c->device && stage_prec_parse(cfg->ipu.precision, &ec.prec, &ec.master) != 0)
        return tb_error_set(TB_EINVAL, "%s: unknown --precision '%s' (valid: fp32, bf16, fp16)", b->i->name,
                            cfg->ipu.precision);
    const int st = executor_create(&c->ex, m, &ec);
    b->device_loop = st == TB_OK && c->ex.loop_steps;
    return st;
}

/* The whole global batch as one pass. */
static struct executor_pass whole_batch(const struct batch *batch, long step)
{
    return (struct executor_pass){.n = batch->n, .n_global = batch->n, .step = step, .x = batch->x, .y = batch->y,
                                  .training = 1};
}

static int lb_forward_backward(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    struct local_ctx *c = b->ctx;
    executor_trace_begin(&c->ex, tb_now_s());
    executor_zero_grads(&c->ex);
    const struct executor_pass p = whole_batch(batch, step);
    int rc = executor_forward_backward(&c->ex, &p, &st->loss_sum);
    if (rc == TB_EDIVERGED) st->nonfinite = 1;
    return rc;
}

static int lb_update(struct backend *b, long step, struct step_stats *st)
{
    struct local_ctx *c = b->ctx;
    (void)st;
    return executor_update(&c->ex, step);
}

static int lb_train_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    struct local_ctx *c = b->ctx;
    executor_trace_begin(&c->ex, tb_now_s());
    const struct executor_pass p = whole_batch(batch, step);
    const int rc = executor_step(&c->ex, &p, &st->loss_sum);
    if (rc == TB_EDIVERGED) st->nonfinite = 1;
    return rc;
}

static int lb_stage_steps(struct backend *b, long first_step, long n_steps, const struct batch *all)
{
    struct local_ctx *c = b->ctx;
    if (n_steps > c->cap) {
        double *p = realloc(c->losses, (size_t)n_steps * sizeof *p);
        if (!p) return tb_error_set(TB_ENOMEM, "backend %s: out of memory for %ld losses", b->i->name, n_steps);
        c->losses = p, c->cap = n_steps;
    }
    return executor_stage_steps(&c->ex, first_step, n_steps, all->x, all->y);
}

static int lb_run_steps(struct backend *b, long step, long n_steps, struct step_stats *st, long *done)
{
    struct local_ctx *c = b->ctx;
    const int rc = executor_run_steps(&c->ex, step, n_steps, c->losses, done);
    const long got = *done + (rc == TB_EDIVERGED); /* a diverged step's loss too, for the message */
    for (long j = 0; j < got && j < n_steps; j++) st[j].loss_sum = c->losses[j];
    if (rc == TB_EDIVERGED && *done < n_steps) st[*done].nonfinite = 1;
    return rc;
}

static int lb_prefetches(struct backend *b) { return executor_prefetches(&((struct local_ctx *)b->ctx)->ex); }

static int lb_prefetch(struct backend *b, const struct batch *batch, long step)
{
    const struct executor_pass p = whole_batch(batch, step); /* the pass lb_train_step will run */
    return executor_prefetch(&((struct local_ctx *)b->ctx)->ex, &p);
}

static int lb_finish(struct backend *b)
{
    executor_finish(&((struct local_ctx *)b->ctx)->ex);
    return TB_OK;
}

static int lb_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev)
{
    struct local_ctx *c = b->ctx;
    return executor_evaluate(&c->ex, batch->x, batch->y, batch->n, ev);
}

static int lb_get(struct backend *b, enum tensor_family f, float *dst)
{
    return executor_get_tensors(&((struct local_ctx *)b->ctx)->ex, f, dst);
}

static int lb_set(struct backend *b, enum tensor_family f, const float *src)
{
    return executor_set_tensors(&((struct local_ctx *)b->ctx)->ex, f, src);
}

static int lb_set_seed(struct backend *b, uint64_t seed)
{
    return executor_set_seed(&((struct local_ctx *)b->ctx)->ex, seed);
}

/* The executor's views, and --trace events in the backend API's form. threads: the executor is SPMD over
 * its pool and thread 0 clocks each layer (barriers included), so one lane stands for the whole pool. */
static int lb_stats(struct backend *b, struct backend_stats *s)
{
    struct local_ctx *c = b->ctx;
    struct executor_stats es;
    int rc = executor_stats(&c->ex, &es);
    if (rc != TB_OK) return rc;
    s->n_devices = c->ex.cfg.threads;
    s->layer_profile = es.profile;
    s->layer_busy = es.profile_busy, s->layer_busy_max = es.profile_busy_max, s->busy_threads = es.profile_threads;
    s->barriers = es.barriers;
    s->conv_algos = es.conv_algos;
    s->loss_scaling = es.loss_scaling;
    c->trace.n = 0;
    if (b->cfg.trace && (rc = backend_executor_trace(&c->ex, 0, &c->trace)) != TB_OK) return rc;
    s->trace = c->trace.ev, s->n_trace = c->trace.n;
    return TB_OK;
}

static void lb_describe(struct backend *b, char *buf, size_t n)
{
    struct local_ctx *c = b->ctx;
    const int nth = c->ex.cfg.threads;
    if (strcmp(c->ex.cfg.device, "cpu") != 0) { /* a GPU: one stream, no host threads or OpenBLAS */
        const char *how = c->ex.fused_step ? c->ex.step_what : NULL; /* the device's words for its fused step */
        snprintf(buf, n, "%s: one %s device%s%s%s%s", b->i->name, c->ex.cfg.device,
                 c->ex.cfg.prec == STAGE_PREC_BF16   ? ", bf16 mixed precision (fp32 master weights)"
                 : c->ex.cfg.prec == STAGE_PREC_FP16 ? ", fp16 mixed precision (fp32 master weights, loss scaling)"
                                                     : "",
                 how ? ", " : "", how ? how : "", c->ex.loop_steps ? ", runs of steps on the device" : "");
        return;
    }
    char blas[48];
    if (b->cfg.blas_threads > 1) snprintf(blas, sizeof blas, "OpenBLAS %d threads per call", b->cfg.blas_threads);
    else snprintf(blas, sizeof blas, "OpenBLAS single-threaded");
    snprintf(buf, n, "%s: %d thread%s, %s%s", b->i->name, nth, nth == 1 ? "" : "s", blas,
             c->ex.fused_step ? ", fused batch-1 update" : "");
}

static void lb_destroy(struct backend *b)
{
    struct local_ctx *c = b->ctx;
    if (!c) return;
    executor_destroy(&c->ex);
    backend_trace_buf_free(&c->trace);
    free(c->losses);
    free(c);
    b->ctx = NULL;
}

static int lb_restore_loss_scaling(struct backend *b, const char *state)
{
    return executor_restore_loss_scaling(&((struct local_ctx *)b->ctx)->ex, state);
}

/* cpu, threads and cuda are one schedule (one executor) under three names: the same members. */
#define LOCAL_IFACE(NAME)                                                                                              \
    {                                                                                                                  \
        .name = NAME, .prepare = lb_prepare, .forward_backward = lb_forward_backward, .update = lb_update,            \
        .evaluate = lb_evaluate, .get_tensors = lb_get, .set_tensors = lb_set, .destroy = lb_destroy,                 \
        .describe = lb_describe, .train_step = lb_train_step, .finish = lb_finish, .stats = lb_stats,                 \
        .prefetches = lb_prefetches, .prefetch = lb_prefetch, .stage_steps = lb_stage_steps, .run_steps = lb_run_steps, \
        .restore_loss_scaling = lb_restore_loss_scaling, .set_seed = lb_set_seed                                      \
    }

static const struct backend_i cpu_iface = LOCAL_IFACE("cpu");
static const struct backend_i threads_iface = LOCAL_IFACE("threads");
/* The cpu schedule on one GPU: one executor on the cuda device, its fused step the captured graph. */
static const struct backend_i cuda_iface = LOCAL_IFACE("cuda");

static int local_create(struct backend *b, const struct backend_i *iface, int want_threads, const char *device)
{
    struct local_ctx *c = calloc(1, sizeof *c);
    if (!c) return tb_error_set(TB_ENOMEM, "backend %s: out of memory", iface->name);
    c->want_threads = want_threads;
    c->device = device;
    b->i = iface;
    b->ctx = c;
    return TB_OK;
}

int backend_cpu_create(struct backend *b) { return local_create(b, &cpu_iface, 1, NULL); }

int backend_threads_create(struct backend *b) { return local_create(b, &threads_iface, 0, NULL); }

int backend_cuda_create(struct backend *b) { return local_create(b, &cuda_iface, 1, "cuda"); }
