/* ipu_schedule.c — the ipu engine's device workers: a device's training step (its gpipe or 1f1b op
 * order of micro-batch forwards and backwards on its stage executor, between the exchange's queues),
 * its evaluation (chunks
 * streamed through the stages), and the dispatch of a job (train, update, evaluate) to the S·R workers
 * on the pinned pool. Each worker touches only its own device.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "clock.h"

#include <string.h>

/* The pass of n samples at global position first, for micro-batch mb's slot. */
static struct executor_pass pass_of(const struct ipu_dev *v, int mb, int n, long first, int training)
{
    const struct ipu_ctx *c = v->c;
    return (struct executor_pass){.n = n, .n_global = c->cfg.batch, .first_index = first, .step = c->step,
                                  .training = training, .l0 = v->l0, .l1 = v->l1, .slot = mb % v->n_slots};
}

void ipu_dev_fail(struct ipu_ctx *c, int st)
{
    int none = 0;
    if (st == TB_OK || st == TB_EDIVERGED) return;
    if (atomic_compare_exchange_strong(&c->dev_err, &none, st))
        snprintf(c->dev_err_msg, sizeof c->dev_err_msg, "%s", tb_error_get()); /* this thread's message */
}

void ipu_job_begin(struct ipu_ctx *c)
{
    atomic_store(&c->dev_err, 0);
    c->dev_err_msg[0] = 0;
}

int ipu_job_status(struct ipu_ctx *c)
{
    const int st = atomic_load(&c->dev_err);
    return st ? tb_error_set(st, "ipu: %s", c->dev_err_msg) : TB_OK;
}

static void dev_forward(struct ipu_dev *v, int mb)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int last = v->s == p->S - 1, n = p->B;
    const long first = (long)v->r * p->G * p->B + (long)mb * p->B;
    struct executor_pass ps = pass_of(v, mb, n, first, 1);
    const void *msg = NULL;
    struct ipu_queue *q = NULL;
    if (v->s == 0) {
        if (v->infeed) {
            msg = ipu_queue_begin_pop(q = v->infeed, &v->t_wait);
            ps.x = msg_payload(c, msg);
            ps.y = msg_labels(msg);
        } else {
            ps.x = c->batch->x + (size_t)first * c->per_in;
            ps.y = c->batch->y + first;
        }
    } else {
        msg = ipu_pop_acts(v, n);
        q = v->act_in;
        ps.y = msg_labels(msg);
    }
    double loss = 0.0;
    const double t0 = tb_now_s();
    ipu_dev_fail(c, executor_forward(&v->ex, &ps, &loss));
    const double t1 = tb_now_s();
    v->t_compute += t1 - t0;
    v->t_fwd += t1 - t0;
    ev_add(v, mb, 'F', t0, t1);
    if (last) v->loss += loss;
    else ipu_push_acts(v, ps.slot, mb, n, first, ps.y);
    if (q) ipu_queue_end_pop(q); /* x, y and the imported activations pointed into the message until here */
    if (++v->in_use > v->peak_in_use) v->peak_in_use = v->in_use;
}

/* The timeline keeps one R and one B per micro-batch: the backward's exact start and end, split by the
 * summed recomputation time (segments interleave the two). */
static void dev_backward(struct ipu_dev *v, int mb)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int n = p->B;
    const long first = (long)v->r * p->G * p->B + (long)mb * p->B;
    const struct executor_pass ps = pass_of(v, mb, n, first, 1);
    const void *msg = NULL;
    if (v->grad_in) msg = ipu_pop_grads(v, n);
    const double t0 = tb_now_s();
    ipu_dev_fail(c, executor_backward(&v->ex, &ps));
    const double t1 = tb_now_s();
    struct executor_stats es;
    executor_stats(&v->ex, &es);
    v->t_compute += t1 - t0;
    v->t_bwd += t1 - t0;
    if (es.t_recompute > 0.0) ev_add(v, mb, 'R', t0, t0 + es.t_recompute);
    ev_add(v, mb, 'B', t0 + es.t_recompute, t1);
    if (msg) ipu_queue_end_pop(v->grad_in);
    if (v->grad_out) ipu_push_grads(v, mb, n, first);
    v->in_use--;
}

static void dev_train(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    double t = tb_now_s();
    executor_zero_grads(&v->ex);
    v->t_compute += tb_now_s() - t;
    for (int k = 0; k < v->n_ops; k++) {
        if (v->ops[k].fwd) dev_forward(v, v->ops[k].mb);
        else dev_backward(v, v->ops[k].mb);
    }
    ipu_dev_fail(c, executor_synchronize(&v->ex)); /* an asynchronous device's passes end here, not at launch */
    /* fp16: a gradient that overflowed its 2-byte store skips the step, as one in the exchange does. */
    struct executor_stats es;
    executor_stats(&v->ex, &es);
    if (es.nonfinite_grads) atomic_store(&c->overflow, 1);
    v->t_end = tb_now_s() - c->t0;
    if (c->p.R > 1) ipu_allreduce_grads(v);
}

static void dev_eval(struct ipu_dev *v)
{
    struct ipu_ctx *c = v->c;
    const struct ipu_plan *p = &c->p;
    const int last = v->s == p->S - 1;
    const int N = c->batch->n, chunks = (N + p->B - 1) / p->B;
    for (int k = v->r; k < chunks; k += p->R) {
        const long first = (long)k * p->B;
        const int n = N - first < p->B ? (int)(N - first) : p->B;
        /* Nothing is in flight: slot 0 will do. */
        struct executor_pass ps = pass_of(v, 0, n, first, 0);
        const void *msg = NULL;
        if (v->s == 0) {
            ps.x = c->batch->x + (size_t)first * c->per_in;
            ps.y = c->batch->y + first;
        } else {
            msg = ipu_pop_acts(v, n);
            ps.y = msg_labels(msg);
        }
        long correct = 0;
        if (last) ps.n_correct = &correct;
        if (last && c->eval_logits) ps.logits = c->eval_logits + (size_t)first * (size_t)v->ex.m->n_classes;
        double loss = 0.0;
        const double t0 = tb_now_s();
        ipu_dev_fail(c, executor_forward(&v->ex, &ps, &loss));
        v->t_compute += tb_now_s() - t0;
        if (last) {
            v->loss += loss;
            v->correct += correct;
            v->n_done += n;
        } else {
            ipu_push_acts(v, ps.slot, k, n, first, ps.y);
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
            if (c->p.prec == STAGE_PREC_FP16 && nth > 1) tpool_barrier(c->pool);
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
