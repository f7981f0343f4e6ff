/* ipu_replicas.c — what the ipu engine's replicas do together after the micro-batches: each stage's
 * gradient all-reduce over its R replicas (concurrent rings, one per stage, on the stage executors'
 * gradient buffers: fp32, or 2-byte summed in fp32), each device's optimizer update of its slice (its
 * executor's: half precision rounds stochastically or from an fp32 master), and fp16 loss scaling
 * (skipped steps, dynamic scale, divergence).
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "allreduce.h"
#include "clock.h"

#include <string.h>

static void rep_barrier_wait(void *ctx) { tpool_barrier_wait(ctx); }

/* Sums device v's gradient slice over the R replicas of its stage (ring; half precision in 2 bytes,
 * summing in fp32); fp16 flags an overflow of the sum. Timed as the step's 'A' interval. */
void ipu_allreduce_grads(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const double t = tb_now_s();
    const size_t n = v->gbuf.n;
    if (!v->gbuf.data16) {
        /* Off the host: the slice into its host copy first (the ring's first barrier waits for every
         * replica's), and the sums back after (its last barrier has seen every chunk gathered). */
        if (v->host_grads) ipu_dev_fail(c, executor_get_tensors(&v->ex, TF_GRADS, v->host_grads));
        allreduce_ring_window(&c->gbufs[(size_t)v->s * c->p.R], n, v->gbuf.off, c->m->n_params, c->p.R, v->r,
                              rep_barrier_wait, &c->bar[v->s]);
        if (v->host_grads) ipu_dev_fail(c, executor_set_tensors(&v->ex, TF_GRADS, v->host_grads));
    } else {
        allreduce_ring_half_window(&c->gbufs16[(size_t)v->s * c->p.R], n, v->gbuf.off, c->m->n_params, c->p.R, v->r,
                                   c->p.prec, rep_barrier_wait, &c->bar[v->s]);
        /* fp16: a sum over replicas may overflow where no replica's share did. */
        if (c->p.prec == STAGE_PREC_FP16)
            for (size_t i = 0; i < n; i++)
                if ((v->gbuf.data16[i] & 0x7c00u) == 0x7c00u) {
                    atomic_store(&c->overflow, 1);
                    break;
                }
    }
    const double t1 = tb_now_s();
    v->t_allreduce = t1 - t;
    ev_add(v, -1, 'A', t, t1);
}

void ipu_dev_update(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    if (atomic_load(&c->overflow) || v->gbuf.n == 0 || atomic_load(&c->dev_err)) return;
    const double t0 = tb_now_s();
    ipu_dev_fail(c, executor_update(&v->ex, c->step)); /* a device's (a GPU's) call can fail */
    const double t1 = tb_now_s();
    v->t_update = t1 - t0;
    ev_add(v, -1, 'U', t0, t1);
}

/* fp16: a step whose gradients overflowed the exchange is skipped (its update was not applied) and
 * counted; the scale follows loss_scale.h's policy, and the devices' gradient scale with it. */
int ipu_loss_scale_after_update(struct ipu_ctx *c, struct step_stats *st)
{
    if (c->p.prec != STAGE_PREC_FP16) return TB_OK;
    if (loss_scaler_after_step(&c->ls, c->overflowed)) ipu_set_grad_scale(c);
    const int rc = loss_scaler_check(&c->ls, c->step);
    if (rc != TB_OK) st->nonfinite = 1;
    return rc;
}
