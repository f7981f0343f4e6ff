/* backend_executor.c — run_config → executor_config, and executor trace events → trace_event. Stateless;
 * called by the thread that drives the executor. */
#include "backend_executor.h"

#include "status.h"

#include <stdio.h>
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
}

int backend_executor_trace(struct executor *ex, int device, struct trace_event *ev, int cap)
{
    struct executor_stats s;
    if (executor_stats(ex, &s) != TB_OK || !s.trace) return 0;
    for (int k = 0; k < s.n_trace && k < cap; k++)
        ev[k] = (struct trace_event){device, s.trace[k].layer, s.trace[k].micro_batch, s.trace[k].phase, s.trace[k].t0,
                                     s.trace[k].t1};
    return s.n_trace;
}
