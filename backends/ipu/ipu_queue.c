/* ipu_queue.c — bounded SPSC message queue over a mutex and two condition variables (see ipu_queue.h). */
#include "ipu_queue.h"

#include "clock.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int ipu_queue_init(struct ipu_queue *q, int cap, size_t bytes)
{
    memset(q, 0, sizeof *q);
    TB_ASSERT(cap >= 1);
    q->cap = cap;
    q->bytes = (bytes + 63) / 64 * 64;
    if (q->bytes == 0) q->bytes = 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, q->bytes * (size_t)cap) != 0)
        return tb_error_set(TB_ENOMEM, "ipu exchange: cannot allocate %d buffers of %zu bytes", cap, q->bytes);
    memset(p, 0, q->bytes * (size_t)cap); /* pre-fault now, not in the first step */
    q->buf = p;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->ready = 1;
    return TB_OK;
}

void ipu_queue_free(struct ipu_queue *q)
{
    if (q->ready) {
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->not_empty);
        pthread_cond_destroy(&q->not_full);
    }
    free(q->buf);
    memset(q, 0, sizeof *q);
}

void *ipu_queue_begin_push(struct ipu_queue *q, double *t_wait)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == q->cap) {
        const double t0 = tb_now_s();
        while (q->count == q->cap) pthread_cond_wait(&q->not_full, &q->mu);
        if (t_wait) *t_wait += tb_now_s() - t0;
    }
    const int slot = (q->head + q->count) % q->cap;
    pthread_mutex_unlock(&q->mu);
    /* Only the producer writes this buffer until it commits: the consumer never reads past count. */
    return q->buf + (size_t)slot * q->bytes;
}

void ipu_queue_end_push(struct ipu_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

const void *ipu_queue_begin_pop(struct ipu_queue *q, double *t_wait)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == 0) {
        const double t0 = tb_now_s();
        while (q->count == 0) pthread_cond_wait(&q->not_empty, &q->mu);
        if (t_wait) *t_wait += tb_now_s() - t0;
    }
    const int slot = q->head;
    pthread_mutex_unlock(&q->mu);
    return q->buf + (size_t)slot * q->bytes;
}

void ipu_queue_end_pop(struct ipu_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

int ipu_queue_count(struct ipu_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}
