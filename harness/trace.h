/* trace.h — one training step as a Chrome trace-event file (--trace FILE), for chrome://tracing and
 * ui.perfetto.dev.
 *
 * What it holds: a capture of the backend's events of one step (per-layer forward/backward intervals
 * from backend_trace_events, micro-batch phases from backend_timeline), taken right after that step,
 * and the writer that turns a capture into {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":
 * {...}}: one lane (tid) per device that has events, named by "M" metadata events; complete ("X")
 * events with ts/dur in microseconds since the step began; layers named "<layer> fwd|bwd" with
 * cat forward|backward and args {layer, op, micro_batch}. A device with per-layer events but no phases
 * gets enclosing "forward" and "backward" spans. threads: the engine is SPMD over its pool and thread 0
 * clocks each layer (barrier waits included), so one lane stands for the pool.
 * Not here: any timing (the backends measure), or the result row (run.c records the path and counts).
 * Threading: none. A capture owns its arrays (trace_capture_free).
 */
#ifndef TB_TRACE_H
#define TB_TRACE_H

#include "backend.h"
#include "pipeline_report.h"
#include "json.h"
#include "model.h"

struct trace_capture {
    long step;                  /* the step captured (1-based; 0 = nothing yet) */
    double step_s;              /* the harness's wall time of that step, batch assembly included */
    struct trace_event *ev;     /* (n_ev) per-layer and whole-step events */
    int n_ev, cap_ev;
    struct timeline_event *tl;  /* (n_tl) a pipelined backend's micro-batch phases */
    int n_tl, cap_tl;
};

/* What the file says about the run (otherData and lane names). Strings may be NULL. */
struct trace_meta {
    const char *backend, *workload, *desc, *run_id;
    int devices;                /* backend_n_devices: lanes the schedule has */
};

/* Copies the backend's events of its last completed training step (step `step`, step_s seconds of wall
 * time) into t, replacing what it held; TB_ENOMEM leaves t empty (step 0). */
int trace_capture_take(struct trace_capture *t, struct backend *be, long step, double step_s);
/* Frees the capture's arrays and zeroes it. */
void trace_capture_free(struct trace_capture *t);
/* Lanes (devices) with at least one event in t. */
int trace_capture_lanes(const struct trace_capture *t);
/* Writes the whole trace document for capture t of model m as the next value of b. */
void trace_write_json(struct json_buf *b, const struct trace_capture *t, const struct model *m,
                      const struct trace_meta *meta);
/* Writes the trace document to path (replacing it). TB_EIO with the path named on failure. */
int trace_write_file(const char *path, const struct trace_capture *t, const struct model *m,
                     const struct trace_meta *meta);

#endif
