/* ipu_exchange.c — the ipu engine's exchange: boundary tensors exported by a stage executor into
 * messages in the exchange precision (fp16 gradients times the loss scale) and imported by the next
 * one (decoded back to fp32 there), pushed and popped through
 * the stage-to-stage queues, and the infeed worker that copies micro-batches (still uint8) ahead of the
 * first stage. Each device touches only the queue ends it owns; the infeed thread only its queues.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "clock.h"
#include "model_range.h"

#include <string.h>

void ipu_push_acts(struct ipu_dev *v, int slot, int mb, int n, long first, const int32_t *y)
{
    struct ipu_ctx *c = v->c;
    void *buf = ipu_queue_begin_push(v->act_out, &v->t_wait);
    const double t = tb_now_s();
    *(struct msg_hdr *)buf = (struct msg_hdr){mb, n, first};
    memcpy(msg_labels(buf), y, (size_t)n * sizeof(int32_t));
    executor_export_boundary(&v->ex, 0, slot, msg_payload(c, buf), n, c->p.prec, 1.0f);
    ipu_queue_end_push(v->act_out);
    v->t_exchange += tb_now_s() - t;
    v->bytes += (double)model_boundary_floats(c->m, v->l1, n, 0) * (double)stage_prec_bytes(c->p.prec);
}

void ipu_push_grads(struct ipu_dev *v, int mb, int n, long first)
{
    struct ipu_ctx *c = v->c;
    void *buf = ipu_queue_begin_push(v->grad_out, &v->t_wait);
    const double t = tb_now_s();
    *(struct msg_hdr *)buf = (struct msg_hdr){mb, n, first};
    /* fp16: gradients cross scaled by the loss scale (what scaling the loss does to every gradient
     * downstream of it), so small ones survive the 2-byte format; the receiver divides it out. */
    const float scale = c->p.prec == STAGE_PREC_FP16 ? c->ls.scale : 1.0f;
    executor_export_boundary(&v->ex, 1, 0, msg_payload(c, buf), n, c->p.prec, scale);
    ipu_queue_end_push(v->grad_out);
    v->t_exchange += tb_now_s() - t;
    v->bytes += (double)model_boundary_floats(c->m, v->l0, n, 1) * (double)stage_prec_bytes(c->p.prec);
}

const void *ipu_pop_acts(struct ipu_dev *v, int n)
{
    struct ipu_ctx *c = v->c;
    const void *msg = ipu_queue_begin_pop(v->act_in, &v->t_wait);
    const double t = tb_now_s();
    TB_ASSERT(((const struct msg_hdr *)msg)->n == n);
    /* fp32 travels as is: the executor reads it in place, until the forward that takes it */
    executor_import_boundary(&v->ex, 0, msg_payload(c, msg), n, c->p.prec, 1.0f);
    v->t_exchange += tb_now_s() - t;
    return msg;
}

const void *ipu_pop_grads(struct ipu_dev *v, int n)
{
    struct ipu_ctx *c = v->c;
    const void *msg = ipu_queue_begin_pop(v->grad_in, &v->t_wait);
    const double t = tb_now_s();
    const float inv = c->p.prec == STAGE_PREC_FP16 ? 1.0f / c->ls.scale : 1.0f;
    if (executor_import_boundary(&v->ex, 1, msg_payload(c, msg), n, c->p.prec, inv)) atomic_store(&c->overflow, 1);
    v->t_exchange += tb_now_s() - t;
    return msg;
}

/* ---- infeed: a worker copying micro-batches (still uint8) ahead of the first stage ---- */

void *ipu_infeed_main(void *arg)
{
    struct ipu_ctx *c = arg;
    const struct ipu_plan *p = &c->p;
    long seen = 0;
    pthread_mutex_lock(&c->pf_mu);
    for (;;) {
        while (c->pf_gen == seen && !c->pf_stop) pthread_cond_wait(&c->pf_cv, &c->pf_mu);
        if (c->pf_stop) break;
        seen = c->pf_gen;
        const struct batch *b = c->pf_batch;
        pthread_mutex_unlock(&c->pf_mu);
        for (int i = 0; i < p->G; i++)
            for (int r = 0; r < p->R; r++) {
                const long first = (long)r * p->G * p->B + (long)i * p->B;
                void *buf = ipu_queue_begin_push(&c->q_in[r], NULL);
                *(struct msg_hdr *)buf = (struct msg_hdr){i, p->B, first};
                memcpy(msg_labels(buf), b->y + first, (size_t)p->B * sizeof(int32_t));
                memcpy(msg_payload(c, buf), b->x + (size_t)first * c->per_in, (size_t)p->B * c->per_in);
                ipu_queue_end_push(&c->q_in[r]);
            }
        pthread_mutex_lock(&c->pf_mu);
        c->pf_done = seen;
        pthread_cond_broadcast(&c->pf_cv);
    }
    pthread_mutex_unlock(&c->pf_mu);
    return NULL;
}

void ipu_infeed_start_step(struct ipu_ctx *c, const struct batch *b)
{
    pthread_mutex_lock(&c->pf_mu);
    c->pf_batch = b;
    c->pf_gen++;
    pthread_cond_broadcast(&c->pf_cv);
    pthread_mutex_unlock(&c->pf_mu);
}

void ipu_infeed_wait_step(struct ipu_ctx *c)
{
    pthread_mutex_lock(&c->pf_mu);
    while (c->pf_done != c->pf_gen) pthread_cond_wait(&c->pf_cv, &c->pf_mu);
    pthread_mutex_unlock(&c->pf_mu);
}
