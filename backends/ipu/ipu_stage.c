/* ipu_stage.c — building and freeing one ipu device (stage s of replica r): its stage executor (the
 * layers, parameter slice, activation slots or segments and storage precision the plan gives it), its
 * queue ends and op order; the activation memory a stage reports. A device is touched only by its own
 * worker; its memory is the executor's.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "backend_executor.h"
#include "layout.h"

#include <stdlib.h>
#include <string.h>

int ipu_dev_init(struct ipu_ctx *c, struct ipu_dev *v, int s, int r)
{
    const struct model *m = c->m;
    const struct ipu_plan *p = &c->p;
    const int S = p->S;
    int st;
    v->c = c, v->s = s, v->r = r;
    v->l0 = p->l0[s], v->l1 = p->l0[s + 1];
    v->n_slots = ipu_plan_in_flight(p, s);
    /* Segments: recompute's cut (ipu_plan_segments) or half storage's one per block. */
    int n_seg = 0;
    if (c->segmented)
        n_seg = p->recompute ? ipu_plan_segments(p, m, s, c->cuts) : ipu_plan_block_segments(p, m, s, c->cuts);
    struct executor_config ec;
    backend_executor_config(&c->cfg, p->B, 1, &ec);
    ec.eval_batch = p->B;
    ec.no_fused_step = 1;
    ec.trace = 0; /* the ipu keeps its own timeline */
    ec.l0 = v->l0, ec.l1 = v->l1;
    ec.slots = v->n_slots;
    ec.prec = p->prec, ec.master = p->master, ec.recompute = p->recompute;
    ec.cuts = n_seg ? c->cuts : NULL, ec.n_seg = n_seg;
    ec.ordinal = r * S + s; /* cuda: device d on GPU d mod the GPUs present */
    /* With several replicas each stage is a one-core device and cuts as mirrored's replicas do (the same bits on
     * every machine); decided by the replicas alone, so one replica's stages keep the machine's cut: one stage
     * of one replica is cpu's bits, and any split the bits of one stage. */
    ec.par_units = tb_replica_units(p->R);
    if ((st = executor_create(&v->ex, m, &ec)) != TB_OK) return st;
    v->n_seg = n_seg;
    if ((st = executor_grad_buffer(&v->ex, &v->gbuf)) != TB_OK) return st;
    if (!v->gbuf.host && p->R > 1) {
        /* A device's gradients (a GPU's): the ring sums host copies, taken and put back through the
         * executor (get, ring, set), as mirrored does without a device collective. */
        if (v->gbuf.data16)
            return tb_error_set(TB_EINVAL, "ipu: replicas of 2-byte stages on device %s are not supported (the "
                                           "ring sums host copies in fp32): use --precision fp32 or --replicas 1",
                                c->cfg.device);
        v->host_grads = calloc(v->gbuf.off + v->gbuf.n ? v->gbuf.off + v->gbuf.n : 1, sizeof(float));
        if (!v->host_grads) return tb_error_set(TB_ENOMEM, "ipu: out of memory for host copies of the gradients");
    }
    const int last = s == S - 1;
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
    if (v->gbuf.data16) c->gbufs16[(size_t)s * p->R + (size_t)r] = v->gbuf.data16;
    else c->gbufs[(size_t)s * p->R + (size_t)r] = v->host_grads ? v->host_grads + v->gbuf.off : v->gbuf.data;
    return TB_OK;
}

void ipu_dev_free(struct ipu_dev *v)
{
    executor_destroy(&v->ex);
    free(v->ops), free(v->ev), free(v->host_grads);
    memset(v, 0, sizeof *v);
}

/* Activation memory stage s uses, with the micro-batches it held at once (measured): what its executor
 * holds whatever is in flight (the gradient buffer; with segments the working slot, the fp32 gradient
 * and input passed between segments) plus, per micro-batch held, a whole-stage slot or a stash
 * (recompute: the stage input plus segment inputs; half storage: every activation at 2 bytes). */
double ipu_stage_act_bytes(const struct ipu_ctx *c, int s)
{
    struct ipu_dev *v = &c->dev[s]; /* replica 0 */
    const int held = v->peak_in_use_all > 0 ? v->peak_in_use_all : ipu_plan_in_flight(&c->p, s);
    struct executor_stats es;
    if (!v->ex.i || executor_stats(&v->ex, &es) != TB_OK) return 0.0;
    return es.act_fixed_bytes + (double)held * es.act_slot_bytes;
}

void ipu_set_grad_scale(struct ipu_ctx *c)
{
    const float scale = c->p.prec == STAGE_PREC_FP16 ? c->ls.scale : 1.0f;
    for (int d = 0; d < c->D; d++)
        if (c->dev[d].ex.i) executor_set_grad_scale(&c->dev[d].ex, scale);
}
