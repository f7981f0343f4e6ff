/* backend_executor.c — run_config → executor_config, and executor trace events → trace_event. Stateless;
 * called by the thread that drives the executor. */
#include "backend_executor.h"

#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void backend_executor_config(const struct run_config *rc, int n_max, int threads, struct executor_config *ec)
{
    memset(ec, 0, sizeof *ec);
    ec->device = rc->device[0] ? rc->device : "cpu";
    ec->threads = threads;
    ec->n_max = n_max;
    ec->eval_batch = rc->eval_batch;
    ec->optim = rc->optim;
    ec->seed = rc->seed;
    snprintf(ec->conv_algo, sizeof ec->conv_algo, "%s", rc->conv_algo);
    ec->no_fuse = rc->no_fuse;
    ec->profile = rc->profile;
    ec->trace = rc->trace;
    ec->loss_scale = rc->ipu.loss_scale; /* the cuda device's fp16 (0: dynamic) */
    ec->prefetch = rc->ipu.prefetch == 0 ? 1 : rc->ipu.prefetch > 0 ? rc->ipu.prefetch : 0; /* 0: the default */
}

int backend_executor_trace(struct executor *ex, int device, struct backend_trace_buf *t)
{
    struct executor_stats s;
    if (executor_stats(ex, &s) != TB_OK || !s.trace || s.n_trace <= 0) return TB_OK;
    if (t->n + s.n_trace > t->cap) {
        struct trace_event *p = realloc(t->ev, (size_t)(t->n + s.n_trace) * sizeof *p);
        if (!p) return tb_error_set(TB_ENOMEM, "out of memory for %d trace events", t->n + s.n_trace);
        t->ev = p, t->cap = t->n + s.n_trace;
    }
    for (int k = 0; k < s.n_trace; k++)
        t->ev[t->n++] = (struct trace_event){device, s.trace[k].layer, s.trace[k].micro_batch, s.trace[k].phase,
                                             s.trace[k].t0, s.trace[k].t1};
    return TB_OK;
}

void backend_trace_buf_free(struct backend_trace_buf *t)
{
    free(t->ev);
    memset(t, 0, sizeof *t);
}
