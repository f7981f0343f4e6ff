/* session.h — private to the run files (run.c, session.c, row.c, resume.c, stop.c, plan_*.c): the session a
 * plan runs over (data, model, initial weights, one prepared backend), the record of a run's steps, and
 * the pieces the plans share: the row writer, checkpoints and resume, the rows of runs that stopped early.
 * Not an interface of the library: run.h is; these names may change with the plans.
 * Threading: a session belongs to the one thread that runs bench_run.
 */
#ifndef TB_SESSION_H
#define TB_SESSION_H

#include "run.h"

#include "calibrate.h"
#include "loss_watch.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "mllog.h"
#include "progress.h"
#include "timeline_csv.h"
#include "trace.h"

#include <stddef.h>
#include <stdint.h>

/* The stream of training samples: batch assembly with a cached permutation per data epoch. */
struct stream {
    const struct dataset *ds;
    uint64_t seed;
    uint32_t *perm;
    long perm_epoch;
};

/* Sums of what a replicated or pipelined backend reports per step, and over how many steps. */
struct split_sums {
    double step, compute, allreduce, exchange, idle; /* seconds */
    long n;
};

struct session {
    struct bench_config c;      /* resolved */
    char output_err[320];       /* a requested output beside the row (--trace) that could not be written: why */
    const struct workload *w;
    struct dataset train, test;
    int synthetic;              /* the data are the synthetic set */
    struct model m;
    int have_model;
    float *params, *buffers;    /* initial values: (n_params), (n_buffers) */
    struct backend be;
    int be_batch, be_eval_batch;/* what be was prepared for; 0 = none */
    int eval_n;                 /* samples session_evaluate uses (the first of the test set); 0 = all */
    int eval_note_done;      /* the --eval-batch clamp was announced (once a session) */
    int batch_lowered;          /* throughput without --batch: the workload's batch lowered (see session.c) */
    uint8_t *bx;                /* (batch_cap, H, W, C) */
    int32_t *by;                /* (batch_cap) */
    /* session_steps' runs of steps (--steps-per-execution): the staged steps' batches and each step's
     * statistics (run_cap steps), and the last run's seconds a step (0: none yet) */
    uint8_t *run_x;
    int32_t *run_y;
    struct step_stats *run_st;
    long run_cap;
    double run_step_s;
    long n_exec, n_exec_steps;  /* backend calls that ran training steps, and those steps, since the last row */
    /* --prefetch on devices that copy their inputs (backend_prefetches): the steps' batches are assembled
     * and handed over `ahead` steps early, batch of step k in buffer k mod (ahead + 1) (buffer 0: bx/by). */
    int ahead;                  /* 0: none */
    int prefetch_note_done;     /* an explicit --prefetch that copies nothing was announced */
    uint8_t **ahead_x;          /* (ahead + 1) */
    int32_t **ahead_y;
    int32_t *test_y;            /* (test.n) */
    int batch_cap;
    struct stream s;
    char desc[512];
    char run_base[96];          /* run id, or its stem for plans with several runs */
    struct machine_info mi;
    struct calibration cal;
    int have_cal;
    int peak_per_run;           /* the peak-memory high-water mark could be reset per run */
    double setup_time_s;
    int primary;                /* not a non-zero MPI rank: prints, writes rows and logs */
    double *prof0, *prof1;      /* --profile: per-layer (n_layers, 2) seconds, then threads' work (n_layers, 2)
                                   and the busiest thread's (n_layers, 2), then the pool's barriers so far,
                                   at the start / end of a run (backend_layer_profile) */
    char cal_unread[320];       /* --calibration named a file that could not be read: why (said once) */
    int conv_timed;             /* convolution shapes the last backend's preparation timed (not from --tuning) */
    int busy_threads;           /* threads the work seconds sum over (0: the backend has no pool) */
    int prof_ok;                /* the backend delivered a per-layer profile at the start of this run */
    int loaded;                 /* params/buffers hold --load's file, not the seeded init */
    float *ck_params, *ck_buffers, *ck_opt; /* checkpoint staging: (n_params), (n_buffers), (spp · n_params) */
    long done_step;             /* session_steps: the last step completed */
    double last_loss;           /* ... and its mean loss (NaN before the first) */
    struct loss_watch watch;    /* the finite-loss divergence rule of the run's steps */
    /* what backends report per step (mirrored, ipu), summed since the last row: [0] the warm-up's steps (the
     * first c.warmup of a step record), [1] the others, the steps the step-time figures cover */
    struct split_sums split[2];
    const char *row_status;     /* row_begin's "status" (NULL = "ok") */
    int projection_noted;       /* --project-devices' left-out counts said (once a run, not a scaling point) */
    uint32_t data_crc32;        /* CRC-32 of the training and test sets as loaded (pixels, then labels) */
    uint32_t load_crc32;        /* with loaded: CRC-32 of --load's tensors as read (each entry's floats, in order) */
    int split_replicas, split_accum; /* the prepared backend's own batch split (a pipeline's report, or mirrored's
                                      * replicas: its devices, GPUs or usable cores, every rank's), 0 = unknown */
    struct trace_capture trace; /* --trace: the chosen training step's events */
    struct timeline_csv timeline; /* --timeline: open while be is prepared */
    /* Wall-clock ms (mllog_now_ms) of the set-up, for the MLPerf init interval of the first run's log
     * (log_run_header): session_open's start, data loading, model build, the last backend prepare. */
    long long init_ms, data_ms[2], build_ms[2], prepare_ms[2];
    int init_logged;            /* a run's log has covered them */
    int resume_n_damaged;       /* newer checkpoints the last resume_from skipped as damaged for the one it took */
    int n_dir_locks;            /* checkpoint folders this session holds (checkpoint_dir_ready), closed at its end */
    int dir_lock_fd[2];
    char dir_lock_path[2][512];
};

/* The losses a run's final loss is the mean of, and that a train run's checkpoints carry. */
#define LOSS_TAIL_MAX 100

/* Where a run keeps its steps' times and losses, indexed by step − base: each time while below cap; of the losses
 * only the first and the last LOSS_TAIL_MAX (all the figures use), at any length, so a run past cap still has its
 * final loss and its memory stops growing at cap times. */
struct step_record {
    double *times;               /* times[i]: step base + i's seconds, i < cap */
    long base, cap;
    long n_booked;               /* steps booked: base .. base + n_booked − 1 (the last booked step's index + 1) */
    double first_loss;           /* step base's loss */
    double ring[LOSS_TAIL_MAX];  /* ring[i % LOSS_TAIL_MAX]: step base + i's loss, for the last LOSS_TAIL_MAX */
};

/* A train run's losses that its checkpoints carry, so that a resumed run's first_loss and final_loss are
 * the whole run's, not its session's (plan_train's final loss is the mean of the last LOSS_TAIL_MAX). */
struct loss_history {
    int known;                  /* the checkpoint carried them (not one of a build before they were kept) */
    double first;               /* step 1's loss */
    long n_tail;                /* min(step, LOSS_TAIL_MAX) */
    double tail[LOSS_TAIL_MAX]; /* losses of steps step − n_tail + 1 .. step, oldest first */
};

/* What a run that stopped early got done. Steps are global step numbers. */
struct stop_info {
    long planned, done, start;  /* steps planned, completed, completed before this process (resume) */
    double train_s, session_s;  /* training seconds: every session so far, this process */
    const char *checkpoint;     /* interrupted: the checkpoint written, or NULL */
    const char *sweep;          /* scaling: the sweep id, or NULL */
};

/* What a point of a scaling sweep is compared with: the sweep's first successful point. */
struct scale_base {
    int batch, replicas;
    double images_per_s;   /* 0: this point is the base */
};

/* What one measured point hands back to the scaling plan. */
struct point_result {
    double images_per_s;
    double test_accuracy;  /* NaN when not trained/evaluated */
    double peak_rss_mib;
    int with_warmup;       /* a trained point no longer than --warmup: its rate times every step, cold ones too */
};

/* session.c */

/* Opens a session for c: resolves the configuration, loads the data, builds the model, names the run. */
int session_open(struct session *s, const struct bench_config *c);
/* Releases everything the session holds (safe after a failed session_open). */
void session_close(struct session *s);
/* Prepares the backend for a global batch (re-creating it when the batch changes). */
int session_backend(struct session *s, int batch, int eval_batch);
/* --profile: snapshots the backend's summed per-layer times before a run's steps. */
void profile_begin(struct session *s);
/* Fresh weights (seeded init or --load's), zero optimizer state, the data order of seed. */
int session_reset(struct session *s, uint64_t seed);
/* The samples session_evaluate uses: eval_n when set and smaller, else the whole test set. */
int session_eval_samples(const struct session *s);
/* The evaluation batch: requested (> 0) or the default (the batch, up to 256 while under 1 GiB of
 * activations), at most test_n and halved until the run fits in 90 % of avail bytes (0 = unknown). */
int eval_batch_choose(const struct model *m, int batch, int requested, int test_n, int state_floats, double avail);
/* eval_batch_choose for this session's model, test set and memory; notes a clamped --eval-batch once. */
int session_eval_batch(struct session *s, int batch);
/* Accuracy and mean loss on the whole test set, and the seconds it took. */
int session_evaluate(struct session *s, double *acc, double *loss, double *time_s);
/* The stop signal when the run stops now, else 0: a signal this process was sent stops it at once, unless the
 * run spans MPI ranks: then only once every rank knows of it (a collective carried it), so that all of them stop
 * after the same step and none waits in a collective for a rank gone. */
int session_stop_due(struct session *s);
/* What a step or an evaluation reported of a stop signal another rank was sent (step_stats.stop_signal,
 * eval_stats.stop_signal): every rank agrees to stop; rank 0 says so where it was not sent one itself. */
void session_stop_heard(struct session *s, int signo);
/* Evaluates the first n test samples into ev in chunks of chunk samples, the batches the backend evaluates in,
 * so that a stop signal is honoured between them (TB_EINTR, saying after how many); logits (n, classes), when
 * not NULL, receives every chunk's rows in place. *done: the chunks evaluated. */
int session_evaluate_chunks(struct session *s, long n, int chunk, float *logits, struct eval_stats *ev, long *done);
/* Allocates room for the times of n steps (at most BENCH_MAX_TIMED_STEPS kept), base 1. */
int step_record_init(struct step_record *r, long n);
/* Frees what step_record_init allocated (safe on a zeroed record). */
void step_record_free(struct step_record *r);
/* Books step's time (while below cap) and loss; steps are booked in increasing order from base (a repeat may start
 * again at base). */
void step_record_book(struct step_record *r, long step, double dt, double loss);
/* Copies the losses of the last n booked steps (at most LOSS_TAIL_MAX and the steps booked), oldest first, to out;
 * returns how many. */
long step_record_tail(const struct step_record *r, long n, double *out);
/* Steps from..to at the prepared batch, one backend call each or in runs (--steps-per-execution), each
 * step timed; TB_EDIVERGED on a non-finite loss, TB_EINTR on a stop. */
int session_steps(struct session *s, long from, long to, struct step_record *rec, struct progress *pr, long pr_done,
                  double t_rate0, long samples_before);
/* Starts p for total_steps steps, labelled "[k/n] plan backend/workload" and extra; off under --quiet. */
void session_progress(const struct session *s, struct progress *p, long total_steps, const char *extra);
/* fp16: the steps the backend has skipped on a gradient overflow (a resumed checkpoint's too; 0: no loss scaler). */
long session_steps_skipped(struct session *s);
/* fp16: TB_EDIVERGED, with why and advice ("more steps"), when all ran steps were skipped (since the run began). */
int session_applied_some(struct session *s, long ran, long skipped, const char *advice);

/* row.c */

/* Replicas and accumulation a global batch splits into, and the local batch (for the scaling table). */
void batch_split(const struct session *s, int batch, int *replicas, int *accum, int *local);
/* Opens a row: schema, kind, run id, configuration, machine and build; leaves "figures" open. */
void row_begin(const struct session *s, struct json_buf *b, const char *run_id, int batch, long steps,
               const char *sweep);
/* Whether the session's calibration holds ceilings of the GPU the run uses (the cuda device). */
int row_gpu_calibrated(const struct session *s);
/* Runs on a GPU: figures.gpu_mem_peak_mib (the executors' allocation high-water mark since the backend was
 * prepared) and gpu_mem_used_mib (the device's memory in use, cudaMemGetInfo); nothing otherwise. */
void row_gpu_memory(const struct session *s, struct json_buf *b);
/* The switches the run reads from its environment (every TB_* variable: the A/B paths, the work split's units,
 * streaming stores; and OpenBLAS's and OpenMP's), sorted by name: a malloc'd array of environ's strings, their
 * count in *n (free the array; NULL when out of memory). */
const char **run_env_switches(size_t *n);
/* The estimated bytes a training step (measure_train_bytes_per_step) or an inference forward of batch samples
 * moves, at the run's storage precision and optimizer. */
double row_train_bytes(const struct session *s, int batch);
double row_infer_bytes(const struct session *s, int batch);
/* Figures every row carries: GFLOP/s, its share of the device's ceiling, intensity, peak memory. */
void row_common_figures(const struct session *s, struct json_buf *b, double gflops, double bytes_per_step,
                        double flops_per_step);
/* --profile: per-layer seconds per step over the steps since profile_begin, as figures.layer_times. */
void write_layer_times(struct session *s, struct json_buf *b, long steps);
/* --trace: writes the captured step's Chrome trace and records it as figures.trace. */
void write_trace(struct session *s, struct json_buf *b, const char *run_id);
/* Speed-up over the cpu baseline in the results file and scaling efficiency. */
void write_efficiency(struct session *s, struct json_buf *b, int batch, double images_per_s);
/* The per-step split (compute, all-reduce, exchange, idle) over the timed steps since the last row (all of them
 * where none followed the warm-up, as a short train run's figures); resets the sums. */
void write_step_split(struct session *s, struct json_buf *b);
/* The backend calls the steps since the last row ran in (figures.step_executions), when some call ran
 * more than one step; resets the count. */
void write_step_executions(struct session *s, struct json_buf *b);
/* Pipelined backends: the measured per-stage accounting and the --project-devices projection, checked
 * against measured_images_per_s (the run's timed images/s; 0 = none) at the run's own arrangement; with fp16 loss
 * scaling, the scale and the skipped steps (skipped, or the scaler's count where skipped < 0). */
void write_pipeline(struct session *s, struct json_buf *b, double measured_images_per_s, long skipped);
/* Closes the row and appends it (only the primary process writes). */
int row_end(const struct session *s, struct json_buf *b);
/* The per-step throughput statistics of t as figures, the timed steps' overall rate under rate_key (a train
 * row's images_per_s is its every step's, so its timed rate has a name of its own). */
void write_throughput(struct json_buf *b, const struct measure_throughput *t, const char *rate_key);
/* The per-step throughput statistics of t on stdout, the overall rate labelled by rate_what and the step times'
 * warm-up said by warm_what ("5 warm-up excluded"). */
void print_throughput(const struct measure_throughput *t, const char *warm_what, const char *rate_what);
/* The event log's run header: benchmark, platform, batch, seed, optimizer, data sizes. */
/* A run's log header (mllog_run_header). Its init interval starts at init_ms (the caller's own set-up;
 * 0: now), or at session_open for the session's first run, whose log then also shows the data loading,
 * model build and backend prepare. spe: steps per epoch (<= 0: unknown). */
void log_run_header_at(struct mllog *lg, struct session *s, int batch, uint64_t seed, long spe, long long init_ms);
/* log_run_header_at for the plans that only time steps: no epochs, the set-up starting now. */
void log_run_header(struct mllog *lg, struct session *s, int batch, uint64_t seed);
/* Opens the run's event log: TB_OK, with a warning where it cannot be; TB_EINVAL where a --run-id's log was made
 * by another run meanwhile (two started at once with one id). */
int open_log(struct mllog *lg, const struct session *s, const char *run_id);
/* The scaling figures of a point relative to the sweep's base point (nothing when sb is NULL). */
void write_scaling(struct json_buf *b, const struct session *s, const struct scale_base *sb, int batch, double ips);
/* Each repeat's images/s and, from two repeats on, their statistics. */
void write_repeats(struct json_buf *b, const double *rep, int n);
/* From two repeats on, their images/s on stdout (the first 12 and the last; the others counted) with the mean and its
 * 95 % interval over the repeats. */
void print_repeats(const double *rep, int n);
/* The checkpoints a run wrote (count, seconds, the newest file). */
void write_checkpoints(struct json_buf *b, int written, double time_s, const char *path);

/* resume.c */

/* Staging arrays for checkpoints, allocated on first use. */
int session_ck_alloc(struct session *s);
/* Writes step's resumable checkpoint into --checkpoint-dir (tta_state: the tta plan's JSON, else NULL;
 * losses: the run's loss history up to step, or NULL when it has none to carry). */
int checkpoint_write(struct session *s, int batch, long step, long total, double train_s, const char *tta_state,
                     const struct loss_history *losses, char *path, size_t n);
/* --resume's directory holds a complete checkpoint: TB_OK with the steps of its newest (up to max) in steps and
 * *cnt, else the one-line error a resume gives (exit 1). For the check before any work. */
int resume_dir_has_checkpoints(const char *dir, long *steps, int max, int *cnt);
/* The tta plan's part in choosing a checkpoint to resume: fn(ctx, path, step, state) checks and keeps the plan state
 * (tta_state) of checkpoint path at plan step step; any status but TB_OK (set, naming path) skips it as damaged. */
struct resume_check {
    int (*fn)(void *ctx, const char *path, long step, const char *state);
    void *ctx;
};
/* --resume: loads the newest usable checkpoint of the directory into the backend (tta, when not NULL, checks and
 * keeps its plan state; losses, when not NULL, receives its loss history; known = 0 when it carries none). */
int resume_from(struct session *s, int batch, long total, long *start, double *prev_s, long *every, char *path,
                size_t n, const struct resume_check *tta, struct loss_history *losses);
/* Takes the locks of the run's checkpoint folder and --resume's (those that exist), held to session_close: before a
 * resume reads anything, so that no second run can finish the run meanwhile. TB_EIO naming a folder another bench
 * holds; under MPI every rank calls it and every rank gets rank 0's answer. */
int checkpoint_dirs_lock(struct session *s);
/* --checkpoint-dir: refuses a directory holding another run's checkpoints, creates a missing one, locks it. */
int checkpoint_dir_ready(struct session *s);
/* Under MPI: every rank's configuration and data (resume_config's text and what decides the plan's steps and
 * evaluations) against rank 0's, before the first step. TB_EINVAL on every rank where any differs (the ranks'
 * collectives would not pair up: a rank that ran fewer steps read another's gradients as its evaluation), a
 * differing rank naming the first word; eval_batch: the evaluation's chunk the backend was prepared with. Every rank
 * must call it; TB_OK without MPI. */
int session_ranks_check(struct session *s, int batch, int eval_batch);
/* Writes the row of a run that stopped early (interrupted or diverged), then returns st with its message. */
int plan_stopped(struct session *s, int st, const char *run_id, int batch, const struct stop_info *si);

/* plan_*.c */

/* The training run (also a trained scaling point when sb is not NULL). */
int plan_train(struct session *s, int batch, const char *run_id, const struct scale_base *sb,
               struct point_result *res);
/* Throughput at one batch (also an untrained scaling point when sb is not NULL). */
int plan_throughput_at(struct session *s, int batch, const char *run_id, const struct scale_base *sb,
                       struct point_result *res);
/* A batch-size sweep or a grid: one row per point, then the table. */
int plan_scaling(struct session *s);
/* Time to accuracy over --seeds seeds. */
int plan_tta(struct session *s);
/* Forward only: images/s at --batch and batch-1 latency percentiles. */
int plan_inference(struct session *s);
/* Loss, top-1 and top-5 of the loaded (or seeded) weights on the whole test set; --logits writes them as .npy. */
int plan_evaluate(struct session *s);

#endif
