/* ipu_queue.h — the ipu backend's exchange: a bounded single-producer/single-consumer queue of
 * fixed-size message buffers between two device workers.
 *
 * The producer asks for a free buffer (blocking while all `cap` buffers are full: back-pressure),
 * fills it and commits it; the consumer takes the oldest committed buffer (blocking while none is),
 * reads it and releases it. Buffers are preallocated once, 64-byte aligned; nothing allocates per
 * message. Waiting sleeps on a condition variable, so oversubscribed workers (more devices than
 * cores) yield the core instead of spinning. Exactly one producer thread and one consumer thread.
 * The seconds a call spent blocked are added to *t_wait: that is the device's idle (bubble) time.
 */
#ifndef TB_IPU_QUEUE_H
#define TB_IPU_QUEUE_H

#include <pthread.h>
#include <stddef.h>

struct ipu_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    int cap;              /* message buffers */
    int head, count;      /* oldest committed buffer; committed buffers */
    size_t bytes;         /* bytes per buffer (a multiple of 64) */
    unsigned char *buf;   /* (cap, bytes) */
    int ready;            /* init succeeded (free is then safe) */
};

/* Allocates cap buffers of at least `bytes` bytes each; TB_ENOMEM on failure. */
int ipu_queue_init(struct ipu_queue *q, int cap, size_t bytes);
/* Frees the buffers (safe on a zeroed queue). */
void ipu_queue_free(struct ipu_queue *q);
/* Producer: returns the next free buffer, blocking while the queue is full. */
void *ipu_queue_begin_push(struct ipu_queue *q, double *t_wait);
/* Producer: publishes the buffer from ipu_queue_begin_push to the consumer. */
void ipu_queue_end_push(struct ipu_queue *q);
/* Consumer: returns the oldest published buffer, blocking while the queue is empty. */
const void *ipu_queue_begin_pop(struct ipu_queue *q, double *t_wait);
/* Consumer: hands the buffer from ipu_queue_begin_pop back to the producer. */
void ipu_queue_end_pop(struct ipu_queue *q);
/* Messages published and not yet popped (for invariant checks between steps). */
int ipu_queue_count(struct ipu_queue *q);

#endif
