/* ipu_exchange.c — the ipu engine's exchange: boundary tensors packed into messages in the exchange
 * precision (fp16 gradients times the loss scale) and unpacked back to fp32, pushed and popped through
 * the stage-to-stage queues, and the infeed worker that copies micro-batches (still uint8) ahead of the
 * first stage. Each device touches only the queue ends it owns; the infeed thread only its queues.
 */
#define _GNU_SOURCE
#include "ipu_priv.h"

#include "clock.h"
#include "layout.h"

#include <string.h>

/* Packs the activations (grads = 0) or gradients (grads = 1) of tensors ids into dst in the exchange
 * precision, at exec's packed offsets (16-float aligned per tensor). */
static void pack_tensors(const struct ipu_dev *v, const struct model_inst *mi, const int *ids, int k, int grads, int n,
                         void *dst, float scale)
{
    const struct ipu_ctx *c = v->c;
    const size_t eb = ipu_prec_bytes(c->p.prec);
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &v->sm->tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        const float *src = grads ? exec_dact(mi, ids[j]) : exec_act(mi, ids[j]);
        ipu_prec_pack((char *)dst + off * eb, src, len, c->p.prec, scale);
        off += tb_align16(len);
    }
}

/* Decodes a packed message payload into fp32 (dst, exec's packed layout); returns non-finite values. */
static size_t unpack_tensors(const struct ipu_dev *v, const int *ids, int k, int grads, int n, const void *src,
                             float *dst, float inv_scale)
{
    const struct ipu_ctx *c = v->c;
    const size_t eb = ipu_prec_bytes(c->p.prec);
    size_t off = 0, bad = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &v->sm->tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        bad += ipu_prec_unpack(dst + off, (const char *)src + off * eb, len, c->p.prec, inv_scale);
        off += tb_align16(len);
    }
    return bad;
}

void ipu_push_acts(struct ipu_dev *v, const struct model_inst *mi, int mb, int n, long first, const int32_t *y)
{
    struct ipu_ctx *c = v->c;
    void *buf = ipu_queue_begin_push(v->act_out, &v->t_wait);
    const double t = tb_now_s();
    *(struct msg_hdr *)buf = (struct msg_hdr){mb, n, first};
    memcpy(msg_labels(buf), y, (size_t)n * sizeof(int32_t));
    pack_tensors(v, mi, v->out_ids, v->n_out, 0, n, msg_payload(c, buf), 1.0f);
    ipu_queue_end_push(v->act_out);
    v->t_exchange += tb_now_s() - t;
    v->bytes += (double)exec_boundary_floats(v->sm, v->l1, n, 0) * (double)ipu_prec_bytes(c->p.prec);
}

void ipu_push_grads(struct ipu_dev *v, const struct model_inst *mi, int mb, int n, long first)
{
    struct ipu_ctx *c = v->c;
    void *buf = ipu_queue_begin_push(v->grad_out, &v->t_wait);
    const double t = tb_now_s();
    *(struct msg_hdr *)buf = (struct msg_hdr){mb, n, first};
    /* fp16: gradients cross scaled by the loss scale (what scaling the loss does to every gradient
     * downstream of it), so small ones survive the 2-byte format; the receiver divides it out. */
    const float scale = c->p.prec == IPU_PREC_FP16 ? c->loss_scale : 1.0f;
    pack_tensors(v, mi, v->in_ids, v->n_in, 1, n, msg_payload(c, buf), scale);
    ipu_queue_end_push(v->grad_out);
    v->t_exchange += tb_now_s() - t;
    v->bytes += (double)exec_boundary_floats(v->sm, v->l0, n, 1) * (double)ipu_prec_bytes(c->p.prec);
}

/* Receives the next activation message; returns it and sets *in_act to its fp32 contents. */
const void *ipu_pop_acts(struct ipu_dev *v, int n, const float **in_act)
{
    struct ipu_ctx *c = v->c;
    const void *msg = ipu_queue_begin_pop(v->act_in, &v->t_wait);
    const double t = tb_now_s();
    TB_ASSERT(((const struct msg_hdr *)msg)->n == n);
    if (c->p.prec == IPU_PREC_FP32) {
        *in_act = msg_payload(c, msg); /* fp32 travels as is: exec copies it into the slots */
    } else {
        unpack_tensors(v, v->in_ids, v->n_in, 0, n, msg_payload(c, msg), v->in_stage, 1.0f);
        *in_act = v->in_stage;
    }
    v->t_exchange += tb_now_s() - t;
    return msg;
}

const void *ipu_pop_grads(struct ipu_dev *v, int n, const float **out_dact)
{
    struct ipu_ctx *c = v->c;
    const void *msg = ipu_queue_begin_pop(v->grad_in, &v->t_wait);
    const double t = tb_now_s();
    if (c->p.prec == IPU_PREC_FP32) {
        *out_dact = msg_payload(c, msg);
    } else {
        const float inv = c->p.prec == IPU_PREC_FP16 ? 1.0f / c->loss_scale : 1.0f;
        if (unpack_tensors(v, v->out_ids, v->n_out, 1, n, msg_payload(c, msg), v->g_stage, inv))
            atomic_store(&c->overflow, 1);
        *out_dact = v->g_stage;
    }
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
