/* backend_local.c — backend_i over one local_engine: the cpu and threads backends.
 *
 * cpu runs the engine with nth = 1 and no pool; threads with a pinned pool of --threads workers.
 * OpenBLAS is always single-threaded: the engine partitions every sgemm itself, so cores are never
 * oversubscribed and results do not depend on OpenBLAS's own threading.
 */
#include "backend.h"

#include "clock.h"
#include "local_engine.h"
#include "status.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct local_ctx {
    struct local_engine e;
    int want_threads; /* 1 for cpu, cfg.n_threads (0 = all cores) for threads */
};

static int lb_prepare(struct backend *b, const struct model *m, const struct run_config *cfg)
{
    struct local_ctx *c = b->ctx;
    int nth = c->want_threads;
    if (nth == 0) {
        nth = cfg->n_threads;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (nth == 0) nth = cores > 0 ? (int)cores : 1;
        if (nth < 1 || nth > 1024) return tb_error_set(TB_EINVAL, "--threads must be in 1..1024 (got %d)", nth);
    }
    return local_engine_init(&c->e, m, cfg, cfg->batch, nth);
}

static int lb_forward_backward(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    struct local_ctx *c = b->ctx;
    local_engine_trace_begin(&c->e, tb_now_s());
    local_engine_zero_grads(&c->e);
    int rc = local_engine_forward_backward(&c->e, batch->x, batch->y, batch->n, 0, batch->n, step, &st->loss_sum);
    if (rc == TB_EDIVERGED) st->nonfinite = 1;
    return rc;
}

static int lb_update(struct backend *b, long step, struct step_stats *st)
{
    struct local_ctx *c = b->ctx;
    (void)st;
    local_engine_update(&c->e, step);
    return TB_OK;
}

static int lb_train_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    struct local_ctx *c = b->ctx;
    int rc;
    if (c->e.fuse) {
        local_engine_trace_begin(&c->e, tb_now_s());
        rc = local_engine_train_step_fused(&c->e, batch->x, batch->y, batch->n, step, &st->loss_sum);
    } else {
        if ((rc = lb_forward_backward(b, batch, step, st)) == TB_OK) rc = lb_update(b, step, st);
    }
    if (rc == TB_EDIVERGED) st->nonfinite = 1;
    return rc;
}

static int lb_finish(struct backend *b)
{
    local_engine_finish(&((struct local_ctx *)b->ctx)->e);
    return TB_OK;
}

static int lb_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev)
{
    struct local_ctx *c = b->ctx;
    return local_engine_evaluate(&c->e, batch->x, batch->y, batch->n, ev);
}

static int lb_get(struct backend *b, enum tensor_family f, float *dst)
{
    struct local_ctx *c = b->ctx;
    size_t n;
    float *src = local_engine_family(&c->e, f, &n);
    memcpy(dst, src, n * sizeof(float));
    return TB_OK;
}

static int lb_set(struct backend *b, enum tensor_family f, const float *src)
{
    struct local_ctx *c = b->ctx;
    size_t n;
    float *dst = local_engine_family(&c->e, f, &n);
    memcpy(dst, src, n * sizeof(float));
    return TB_OK;
}

static int lb_layer_profile(struct backend *b, double *prof)
{
    struct local_ctx *c = b->ctx;
    if (!c->e.train.prof) return TB_EUNSUPPORTED;
    memcpy(prof, c->e.train.prof, 2 * (size_t)b->m->n_layers * sizeof(double));
    return TB_OK;
}

/* threads: the engine is SPMD over its pool and thread 0 clocks each layer (barriers included), so one
 * lane stands for the whole pool. */
static int lb_trace_events(struct backend *b, struct trace_event *ev, int cap)
{
    return local_engine_trace_copy(&((struct local_ctx *)b->ctx)->e, 0, ev, cap);
}

static int lb_conv_algos(struct backend *b, int *algos)
{
    exec_algos(&((struct local_ctx *)b->ctx)->e.train, algos);
    return TB_OK;
}

static int lb_n_devices(struct backend *b) { return ((struct local_ctx *)b->ctx)->e.nth; }

static void lb_describe(struct backend *b, char *buf, size_t n)
{
    struct local_ctx *c = b->ctx;
    char blas[48];
    if (b->cfg.blas_threads > 1) snprintf(blas, sizeof blas, "OpenBLAS %d threads per call", b->cfg.blas_threads);
    else snprintf(blas, sizeof blas, "OpenBLAS single-threaded");
    snprintf(buf, n, "%s: %d thread%s, %s%s", b->i->name, c->e.nth, c->e.nth == 1 ? "" : "s", blas,
             c->e.fuse ? ", fused batch-1 update" : "");
}

static void lb_destroy(struct backend *b)
{
    struct local_ctx *c = b->ctx;
    if (!c) return;
    local_engine_free(&c->e);
    free(c);
    b->ctx = NULL;
}

static const struct backend_i cpu_iface = {
    .name = "cpu", .prepare = lb_prepare, .forward_backward = lb_forward_backward, .update = lb_update,
    .evaluate = lb_evaluate, .get_tensors = lb_get, .set_tensors = lb_set, .destroy = lb_destroy,
    .describe = lb_describe, .train_step = lb_train_step, .layer_profile = lb_layer_profile, .n_devices = lb_n_devices, .conv_algos = lb_conv_algos,
    .trace_events = lb_trace_events, .finish = lb_finish,
};

static const struct backend_i threads_iface = {
    .name = "threads", .prepare = lb_prepare, .forward_backward = lb_forward_backward, .update = lb_update,
    .evaluate = lb_evaluate, .get_tensors = lb_get, .set_tensors = lb_set, .destroy = lb_destroy,
    .describe = lb_describe, .train_step = lb_train_step, .layer_profile = lb_layer_profile, .n_devices = lb_n_devices, .conv_algos = lb_conv_algos,
    .trace_events = lb_trace_events, .finish = lb_finish,
};

static int local_create(struct backend *b, const struct backend_i *iface, int want_threads)
{
    struct local_ctx *c = calloc(1, sizeof *c);
    if (!c) return tb_error_set(TB_ENOMEM, "backend %s: out of memory", iface->name);
    c->want_threads = want_threads;
    b->i = iface;
    b->ctx = c;
    return TB_OK;
}

int backend_cpu_create(struct backend *b) { return local_create(b, &cpu_iface, 1); }

int backend_threads_create(struct backend *b) { return local_create(b, &threads_iface, 0); }
