/* pipeline_report.h — what a pipelined backend (ipu) measures, as the harness reads it through the
 * stats query (struct backend_stats): the per-stage accounting of the run, the last training step's
 * micro-batch intervals, and the last step's per-device summary. Plain data; no functions.
 * Included by the harness where it reads these (row.c, session.c, trace.c, timeline_row.c, the
 * timeline CSV writer) and by the backends that fill them.
 */
#ifndef TB_PIPELINE_REPORT_H
#define TB_PIPELINE_REPORT_H

/* What a pipelined backend measured (per stage, averaged over the run's steps): the harness uses it for
 * its accounting table and the POD-scale projection. Times in seconds per micro-batch. */
#define BACKEND_MAX_STAGES 64
struct pipeline_report {
    int stages, micro_batch, ga, replicas;
    int first_block[BACKEND_MAX_STAGES]; /* the block each stage starts at: the split as --split takes it
                                            (stages 1…S−1), whether given or timed at prepare */
    int split_given;                     /* 1: --split; 0: balanced on layer times measured at prepare */
    double t_fwd[BACKEND_MAX_STAGES], t_bwd[BACKEND_MAX_STAGES];
    double exchange_bytes[BACKEND_MAX_STAGES]; /* bytes entering stage s per micro-batch (fwd + bwd) */
    double param_bytes[BACKEND_MAX_STAGES];    /* gradient bytes stage s holds and all-reduces per step */
    double t_compute[BACKEND_MAX_STAGES], t_exchange[BACKEND_MAX_STAGES], t_idle[BACKEND_MAX_STAGES],
        t_allreduce[BACKEND_MAX_STAGES];       /* per step */
    double peak_act_bytes[BACKEND_MAX_STAGES]; /* measured activation memory per stage */
    double weight_bytes[BACKEND_MAX_STAGES];   /* weights as stored (2 or 4 bytes each, + an fp32 master) */
    double weight_window_bytes[BACKEND_MAX_STAGES]; /* half precision: fp32 window one layer's weights
                                                       are decoded into while it runs (0 in fp32); its
                                                       gradients use a second window of the same size */
    double bubble_measured, bubble_ideal;
    long steps;                          /* the training steps the per-step and per-micro-batch figures and
                                            bubble_measured average over */
};

/* One interval of a pipelined backend's last completed training step: what device `device` (stage,
 * replica) did, for which micro-batch, from start_s to end_s seconds after the step began (measured). */
struct timeline_event {
    int device, stage, replica;
    int micro_batch;       /* -1 for whole-step phases (all-reduce, update) */
    char phase;            /* 'F' forward, 'B' backward, 'R' recompute, 'A' all-reduce, 'U' update */
    double start_s, end_s;
};

/* One device's last completed training step, summed (seconds; the --timeline device log's row): the
 * pipeline span (the slowest device's end), its compute, exchange (packing, copying), waiting on the
 * queues, idle (span − compute − exchange, ≥ 0), all-reduce and update, the payload bytes it pushed into
 * the exchange, and the most micro-batches it held at once. */
struct device_step {
    int device, stage, replica;
    double span_s, compute_s, exchange_s, wait_s, idle_s, allreduce_s, update_s;
    double bytes_out;
    int slots_peak;
};

#endif
