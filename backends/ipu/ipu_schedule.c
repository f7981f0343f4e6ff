/* ipu_schedule.c — the ipu engine's device workers: a device's training step (its gpipe or 1f1b op
 * order of micro-batch forwards and backwards, between the exchange's queues), its evaluation (chunks
 * streamed through the stages), and the dispatch of a job (train, update, evaluate) to the S·R workers
 * on the pinned pool. Each worker touches only its own device.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "clock.h"

#include <string.h>

static struct exec_step step_of(const struct ipu_dev *v, int n, long first, int training)
{
    const struct ipu_ctx *c = v->c;
    return (struct exec_step){.n = n, .n_global = c->cfg.batch, .first_index = first, .step = c->step,
                              .seed = c->cfg.seed, .training = training, .l0 = v->l0, .l1 = v->l1};
}

static void dev_forward(struct ipu_dev *v, int mb)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int last = v->s == p->S - 1, n = p->B;
    const long first = (long)v->r * p->G * p->B + (long)mb * p->B;
    const struct model_inst *mi = c->segmented ? NULL : &v->slot[mb % v->n_slots];
    void *stash = c->segmented ? v->stash[mb % v->n_stash] : NULL;
    struct exec_step st = step_of(v, n, first, 1);
    const void *msg = NULL;
    struct ipu_queue *q = NULL;
    if (v->s == 0) {
        if (v->infeed) {
            msg = ipu_queue_begin_pop(q = v->infeed, &v->t_wait);
            st.x = msg_payload(c, msg);
            st.y = msg_labels(msg);
        } else {
            st.x = c->batch->x + (size_t)first * c->per_in;
            st.y = c->batch->y + first;
        }
        if (p->recompute) memcpy(stash, st.x, (size_t)n * c->per_in);
    } else {
        msg = ipu_pop_acts(v, n, &st.in_act);
        q = v->act_in;
        st.y = msg_labels(msg);
        if (p->recompute) ipu_prec_pack(stash, st.in_act, exec_boundary_floats(v->sm, v->l0, n, 0), p->prec, 1.0f);
    }
    const double t0 = tb_now_s();
    if (stash) mi = ipu_seg_forward_all(v, &st, stash, 1);
    else exec_forward(mi, &st, 0, 1, NULL);
    const double t1 = tb_now_s();
    v->t_compute += t1 - t0;
    v->t_fwd += t1 - t0;
    ev_add(v, mb, 'F', t0, t1);
    v->resident = mb;
    if (last) v->loss += exec_loss_sum(mi, n);
    else ipu_push_acts(v, mi, mb, n, first, st.y);
    if (q) ipu_queue_end_pop(q); /* in_act, x and y pointed into the message until here */
    if (++v->in_use > v->peak_in_use) v->peak_in_use = v->in_use;
}

static void dev_backward(struct ipu_dev *v, int mb)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int n = p->B;
    const long first = (long)v->r * p->G * p->B + (long)mb * p->B;
    const struct model_inst *mi = c->segmented ? NULL : &v->slot[mb % v->n_slots];
    struct exec_step st = step_of(v, n, first, 1);
    const void *msg = NULL;
    if (v->grad_in) msg = ipu_pop_grads(v, n, &st.out_dact);
    if (c->segmented) {
        mi = ipu_seg_backward_all(v, mb, &st, v->stash[mb % v->n_stash]);
    } else {
        const double t0 = tb_now_s();
        exec_backward(mi, &st, 0, 1, NULL);
        const double t1 = tb_now_s();
        v->t_compute += t1 - t0;
        v->t_bwd += t1 - t0;
        ev_add(v, mb, 'B', t0, t1);
    }
    if (msg) ipu_queue_end_pop(v->grad_in);
    if (v->grad_out) ipu_push_grads(v, mi, mb, n, first);
    v->in_use--;
}

static void dev_train(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    double t = tb_now_s();
    if (v->g16) memset(v->g16, 0, (v->p1 - v->p0) * sizeof(uint16_t));
    else memset(v->grads + v->p0, 0, (v->p1 - v->p0) * sizeof(float));
    v->t_compute += tb_now_s() - t;
    v->resident = -1;
    for (int k = 0; k < v->n_ops; k++) {
        if (v->ops[k].fwd) dev_forward(v, v->ops[k].mb);
        else dev_backward(v, v->ops[k].mb);
    }
    v->t_end = tb_now_s() - c->t0;
    if (c->p.R > 1) ipu_allreduce_grads(v);
}

static void dev_eval(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int last = v->s == p->S - 1;
    const int N = c->batch->n, chunks = (N + p->B - 1) / p->B;
    const struct model_inst *mi = c->segmented ? NULL : &v->slot[0];
    v->resident = -1;
    for (int k = v->r; k < chunks; k += p->R) {
        const long first = (long)k * p->B;
        const int n = N - first < p->B ? (int)(N - first) : p->B;
        struct exec_step st = step_of(v, n, first, 0);
        const void *msg = NULL;
        if (v->s == 0) {
            st.x = c->batch->x + (size_t)first * c->per_in;
            st.y = c->batch->y + first;
        } else {
            msg = ipu_pop_acts(v, n, &st.in_act);
            st.y = msg_labels(msg);
        }
        const double t0 = tb_now_s();
        if (c->segmented) mi = ipu_seg_forward_all(v, &st, v->stash[0], 0); /* nothing in flight: any stash will do */
        else exec_forward(mi, &st, 0, 1, NULL);
        v->t_compute += tb_now_s() - t0;
        if (last) {
            v->loss += exec_loss_sum(mi, n);
            v->correct += exec_correct_count(mi, n);
            v->n_done += n;
        } else {
            ipu_push_acts(v, mi, k, n, first, st.y);
        }
        if (msg) ipu_queue_end_pop(v->act_in);
    }
}

static void dev_task(void *arg, int d, int nth)
{
    struct ipu_ctx *c = arg;
    struct ipu_dev *v = &c->dev[d];
    v->t_compute = v->t_exchange = v->t_wait = v->t_allreduce = v->t_update = v->t_end = 0.0;
    v->t_fwd = v->t_bwd = 0.0;
    v->bytes = v->loss = 0.0;
    v->correct = v->n_done = 0;
    v->n_ev = 0;
    v->in_use = v->peak_in_use = 0;
    switch (c->mode) {
    case MODE_TRAIN:
        dev_train(v);
        if (c->do_update) {
            /* fp16: every device must know whether any gradient overflowed before anyone updates. */
            if (c->p.prec == IPU_PREC_FP16 && nth > 1) tpool_barrier(c->pool);
            ipu_dev_update(v);
        }
        break;
    case MODE_UPDATE: ipu_dev_update(v); break;
    case MODE_EVAL: dev_eval(v); break;
    }
}

void ipu_run_devices(struct ipu_ctx *c)
{
    if (c->pool) tpool_run(c->pool, dev_task, c);
    else dev_task(c, 0, 1);
}
