/* ipu_replicas.c — what the ipu engine's replicas do together after the micro-batches: each stage's
 * gradient all-reduce over its R replicas (concurrent rings, one per stage), each device's optimizer
 * update of its slice (half precision: a layer at a time in the windows, rounded stochastically or from
 * an fp32 master), and fp16 loss scaling (skipped steps, dynamic scale, divergence).
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
    const size_t n = v->p1 - v->p0;
    if (!v->g16) {
        allreduce_ring(&c->gbufs[(size_t)v->s * c->p.R], n, c->p.R, v->r, rep_barrier_wait, &c->bar[v->s]);
    } else {
        allreduce_ring_half(&c->gbufs16[(size_t)v->s * c->p.R], n, c->p.R, v->r, c->p.prec, rep_barrier_wait,
                            &c->bar[v->s]);
        /* fp16: a sum over replicas may overflow where no replica's share did. */
        if (c->p.prec == IPU_PREC_FP16)
            for (size_t i = 0; i < n; i++)
                if ((v->g16[i] & 0x7c00u) == 0x7c00u) {
                    atomic_store(&c->overflow, 1);
                    break;
                }
    }
    const double t1 = tb_now_s();
    v->t_allreduce = t1 - t;
    ev_add(v, -1, 'A', t, t1);
}

/* Half precision: the update one layer at a time — weights decoded into the window (or the fp32
 * master's slice), the optimizer on that slice, then stored back in 2 bytes: rounded stochastically,
 * keyed by the global index so every replica rounds the same way (to nearest from a master). */
static void update_half(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const struct optim_config *oc = &c->cfg.optim;
    const size_t spp = (size_t)optim_state_per_param(oc->kind);
    for (int j = 0; j < v->n_chunk; j++) {
        const struct ipu_chunk *ch = &v->chunk[j];
        const size_t a = ch->w0 - v->p0, len = ch->w1 - ch->w0;
        float *w = v->master ? v->master + a : v->wwin;
        if (!v->master) ipu_prec_unpack(w, v->w16 + a, len, c->p.prec, 1.0f);
        float *g = v->gwin;
        ipu_prec_unpack(g, v->g16 + a, len, c->p.prec, 1.0f / grad_scale(c));
        const struct optim_segment *sg = v->lsegs + ch->seg0;
        float *trust = v->trust + ch->seg0;
        if (oc->kind == OPTIM_LARS) optim_lars_trust(oc, w, g, sg, ch->nseg, trust, 0, 1);
        optim_update(oc, w, g, v->opt + spp * a, len, sg, ch->nseg, trust, c->step, 0, 1);
        if (!v->master) ipu_prec_round(w, len, c->p.prec, 1, c->cfg.seed, c->step, ch->w0);
        ipu_prec_pack(v->w16 + a, w, len, c->p.prec, 1.0f);
    }
}

void ipu_dev_update(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const size_t n = v->p1 - v->p0;
    if (atomic_load(&c->overflow) || n == 0) return;
    const double t0 = tb_now_s();
    const struct optim_config *oc = &c->cfg.optim;
    if (c->half) {
        update_half(v);
        const double t1 = tb_now_s();
        v->t_update = t1 - t0;
        ev_add(v, -1, 'U', t0, t1);
        return;
    }
    float *w = v->master ? v->master : v->params + v->p0;
    const float *g = v->grads + v->p0;
    if (oc->kind == OPTIM_LARS) optim_lars_trust(oc, w, g, v->segs, v->n_segs, v->trust, 0, 1);
    optim_update(oc, w, g, v->opt, n, v->segs, v->n_segs, v->trust, c->step, 0, 1);
    if (c->p.prec != IPU_PREC_FP32) {
        if (v->master) {
            memcpy(v->params + v->p0, v->master, n * sizeof(float));
            ipu_prec_round(v->params + v->p0, n, c->p.prec, 0, 0, 0, 0);
        } else {
            /* Stored weights are half precision: the fp32 result of the update is rounded back
             * stochastically, keyed by the global index, so every replica rounds the same way. */
            ipu_prec_round(v->params + v->p0, n, c->p.prec, 1, c->cfg.seed, c->step, v->p0);
        }
    }
    const double t1 = tb_now_s();
    v->t_update = t1 - t0;
    ev_add(v, -1, 'U', t0, t1);
}

/* fp16: a step whose gradients overflowed the exchange is skipped (and counted); a dynamic loss
 * scale then halves, and doubles again after LOSS_SCALE_GROW clean steps; a static one stays. A scale
 * that can go no lower (static, or dynamic at 1) and still overflows OVERFLOW_DIVERGED steps in a row
 * trains nothing: the run has diverged (TB_EDIVERGED), as a non-finite loss has in fp32. */
int ipu_loss_scale_after_update(struct ipu_ctx *c, struct step_stats *st)
{
    if (c->p.prec != IPU_PREC_FP16) return TB_OK;
    if (c->overflowed) {
        c->skipped_steps++;
        c->clean_steps = 0;
        const int floor = c->p.loss_scale > 0.0f || c->loss_scale <= 1.0f;
        c->overflow_run = floor ? c->overflow_run + 1 : 0;
        if (c->p.loss_scale == 0.0f && c->loss_scale > 1.0f) c->loss_scale *= 0.5f;
        if (c->overflow_run >= OVERFLOW_DIVERGED) {
            st->nonfinite = 1;
            return tb_error_set(TB_EDIVERGED,
                                "fp16 gradients overflowed on %d steps in a row at %s loss scale %g (step %ld): "
                                "lower --lr%s",
                                c->overflow_run, c->p.loss_scale > 0.0f ? "the static" : "the lowest",
                                (double)c->loss_scale, c->step, c->p.loss_scale > 0.0f ? " or --loss-scale" : "");
        }
    } else {
        c->overflow_run = 0;
        if (c->p.loss_scale == 0.0f && ++c->clean_steps >= LOSS_SCALE_GROW) {
            c->clean_steps = 0;
            if (c->loss_scale < 16777216.0f) c->loss_scale *= 2.0f;
        }
    }
    return TB_OK;
}
