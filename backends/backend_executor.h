/* backend_executor.h — what the schedules over executors (backend_local.c, backend_mirrored.c) share: the
 * executor configuration a backend's run configuration plans, and --trace events out of an executor in
 * the backend API's form. Stateless helpers; the caller owns every buffer.
 */
#ifndef TB_BACKEND_EXECUTOR_H
#define TB_BACKEND_EXECUTOR_H

#include "backend.h"
#include "executor.h"

/* The executor configuration for passes of at most n_max samples on `threads` threads under rc (device
 * "cpu"; eval batch, optimizer, seed, convolution algorithm, fusion, profile and trace from rc). */
void backend_executor_config(const struct run_config *rc, int n_max, int threads, struct executor_config *ec);
/* Copies at most cap of ex's trace events for the current step into ev as device `device` (cap 0: ev may
 * be NULL); returns how many the step has. */
int backend_executor_trace(struct executor *ex, int device, struct trace_event *ev, int cap);

#endif
