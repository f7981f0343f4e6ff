/* backend_executor.h — what the schedules over executors (backend_local.c, backend_mirrored.c) share: the
 * executor configuration a backend's run configuration plans, and --trace events out of an executor in
 * the backend API's form. Stateless helpers; the caller owns every buffer (a backend_trace_buf too).
 */
#ifndef TB_BACKEND_EXECUTOR_H
#define TB_BACKEND_EXECUTOR_H

#include "backend.h"
#include "executor.h"

/* The executor configuration for passes of at most n_max samples on `threads` threads under rc (device
 * "cpu"; eval batch, optimizer, seed, convolution algorithm, fusion, profile, trace and prefetch depth
 * from rc). */
void backend_executor_config(const struct run_config *rc, int n_max, int threads, struct executor_config *ec);
/* Trace events gathered for backend_stats: the backend owns one and refills it on each query. */
struct backend_trace_buf {
    struct trace_event *ev;
    int n, cap;
};

/* Appends ex's trace events for the current step to t as device `device`; TB_ENOMEM if t cannot grow. */
int backend_executor_trace(struct executor *ex, int device, struct backend_trace_buf *t);
/* Frees t's array and zeroes it. */
void backend_trace_buf_free(struct backend_trace_buf *t);

#endif
