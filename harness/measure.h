/* measure.h — what the run plans derive from raw timings: step statistics, latency percentiles, the
 * time-to-accuracy tracker, peak memory, and the estimated arithmetic intensity of a training step.
 *
 * Pure bookkeeping on numbers the plans measured (the clock reads stay in run.c), so each piece is
 * testable on scripted input. Statistics come from stats.h (GSL). It does not time anything, write
 * rows or print.
 * Threading: no shared state; every struct is owned by its caller.
 */
#ifndef TB_MEASURE_H
#define TB_MEASURE_H

#include "stats.h"

#include <stddef.h>

struct model;

/* Throughput of the timed steps of a run (warm-up steps excluded). */
struct measure_throughput {
    long n_steps;              /* timed steps */
    double time_s;             /* Σ timed step times */
    double images_per_s;       /* n_steps·batch / time_s: the overall rate */
    struct stats_summary rate; /* over per-step rates batch / t_step, images/s */
    struct stats_summary step; /* over per-step times, s */
    double step_p90_s, step_p99_s;
};

/* Summarises step_times[warmup..n) (seconds) of steps over `batch` samples. Returns TB_OK, or
 * TB_EINVAL when no timed step is left, batch < 1 or a time is not positive and finite. */
int measure_throughput(const double *step_times, long n, long warmup, int batch, struct measure_throughput *out);

/* Latency percentiles (seconds) of single forwards. */
struct measure_latency {
    int n;
    double p50_s, p90_s, p99_s, mean_s, min_s, max_s;
};

/* Summarises latencies[0..n) (seconds). Returns TB_OK or TB_EINVAL (n < 1, NaN/Inf). */
int measure_latency(const double *latencies, int n, struct measure_latency *out);

/* One evaluation during a time-to-accuracy run. */
struct tta_point {
    long step;
    double epoch;      /* step / steps_per_epoch */
    long samples;      /* training samples seen */
    double time_s;     /* clock since the first step, at the end of this evaluation */
    double accuracy;
    double loss;
};

/* Follows the evaluations of one time-to-accuracy run: stops at the first that reaches the target. */
struct tta_tracker {
    double target;     /* accuracy in (0, 1] */
    int reached;       /* 1 once an evaluation reached the target */
    int reached_at;    /* index into points of that evaluation (-1 before) */
    double best;       /* best accuracy seen (NaN before the first point) */
    struct tta_point *points; /* the accuracy curve, owned */
    int n_points, cap_points;
};

/* Starts a tracker for target accuracy (0, 1]. Returns TB_OK or TB_EINVAL. */
int tta_tracker_init(struct tta_tracker *t, double target);
/* Records an evaluation; returns 1 if the run has now reached the target (and so should stop), 0 if
 * not, or TB_ENOMEM. Points after the target are still recorded but do not move reached_at. */
int tta_tracker_add(struct tta_tracker *t, const struct tta_point *p);
/* Frees the curve. */
void tta_tracker_free(struct tta_tracker *t);

/* MLPerf-style olympic mean of time-to-accuracy over runs: a run that missed its target counts as
 * +∞, the fastest and slowest are dropped when n ≥ 3; NaN when a missed run survives the drop
 * (or n < 1), so one failed run out of five still gives a score but two do not. */
double tta_olympic_mean(const double *tta_s, const int *reached, int n);

/* Peak resident memory. Resets the kernel's high-water mark (/proc/self/clear_refs "5") so the
 * next read covers only what follows; returns 1 if that worked, 0 if the peak stays process-wide. */
int measure_peak_reset(void);
/* Current peak resident set in MiB: VmHWM from /proc/self/status, else getrusage's ru_maxrss. */
double measure_peak_rss_mib(void);

/* Estimated bytes one training step moves to and from memory for a global batch: parameters, gradients
 * and optimizer state read/written once per step, and activations written forward and re-read
 * backward with their gradients. A compulsory-traffic model, not a measurement: caches make the
 * real figure smaller for small models, spills make it larger for big ones. act_bytes, param_bytes: an
 * activation's and a parameter's (and its gradient's) storage, 4 or 2 (bench_config_storage_bytes); the
 * optimizer's state is fp32. */
double measure_train_bytes_per_step(const struct model *m, int batch, int opt_state_per_param, int act_bytes,
                                    int param_bytes);
/* Estimated bytes of an inference forward of a batch (parameters read once per batch), storage as above. */
double measure_infer_bytes_per_step(const struct model *m, int batch, int act_bytes, int param_bytes);

#endif
