/* mllog.h — MLPerf-style event logs: one ":::MLLOG {json}" line per event, one file per run
 * (a resumed run: one per session, see mllog_open_for).
 *
 *   :::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME",
 *             "key": "eval_accuracy", "value": 0.8812, "metadata": {"file": "run.c", "epoch_num": 3}}
 *
 * The keys the plans emit are MLPerf's (constants.py of mlcommons/logging) wherever MLPerf has one:
 * run_start, epoch_start, eval_accuracy, run_stop with status success|aborted, global_batch_size, seed,
 * opt_name, ... A run's log is laid out for MLPerf's compliance checker (open division, see
 * mllog_run_header and BENCHMARKS.md "MLPerf logging compliance"); it writes, it does not check.
 * A log that cannot be opened is disabled (every call becomes a no-op) after one warning: the
 * benchmark matters more than its log.
 * Threading: one struct per run, used by the thread running the plan.
 */
#ifndef TB_MLLOG_H
#define TB_MLLOG_H

#include "optim.h"

#include <stdint.h>
#include <stdio.h>

enum mllog_type { MLLOG_POINT, MLLOG_START, MLLOG_END };

struct mllog {
    FILE *f;          /* NULL: disabled */
    char path[640];
};

/* Creates <dir>/<run_id>.log (and dir); an existing log is never overwritten: another run's events
 * would be lost. dir NULL, "" or "none" disables logging. Returns TB_OK, or TB_EIO (with a message)
 * when the file cannot be created or exists; the log is then disabled. */
int mllog_open(struct mllog *l, const char *dir, const char *run_id);
/* mllog_open, but for a resumed session (resumed != 0) whose <run_id>.log exists (the interrupted
 * session's, same run id) a log of its own, the first free <dir>/<run_id>-resume<k>.log (k = 1, 2, ...):
 * each session's log is a whole MLPerf log (one header, run_start and run_stop), and none spans the
 * pause between sessions, which MLPerf's clock may not contain. */
int mllog_open_for(struct mllog *l, const char *dir, const char *run_id, int resumed);
/* An event's metadata besides "file": a number < 0 (status NULL) is left out. time_ms 0 = now; a
 * time recorded earlier (mllog_now_ms) places an event that happened before the log was opened. */
struct mllog_meta {
    long epoch_num;
    long long samples_count;   /* MLPerf: training samples seen when the event happened */
    const char *status;
    long long time_ms;
};
#define MLLOG_META_NONE {-1, -1, NULL, 0}

/* Wall-clock milliseconds since the Unix epoch: the clock of time_ms. */
long long mllog_now_ms(void);
/* Writes one event; value_json is JSON text ("0.88", "\"adam\"", "null"). */
void mllog_event_meta(struct mllog *l, enum mllog_type type, const char *key, const char *value_json,
                      const struct mllog_meta *m);
/* mllog_event_meta with only epoch_num (< 0: none) and status (NULL: none), at the current time. */
void mllog_event(struct mllog *l, enum mllog_type type, const char *key, const char *value_json, long epoch_num,
                 const char *status);
/* Shorthands for a POINT_IN_TIME event with a number, an integer or a string value. */
void mllog_point_num(struct mllog *l, const char *key, double v);
void mllog_point_int(struct mllog *l, const char *key, long long v);
void mllog_point_str(struct mllog *l, const char *key, const char *s);
/* A set-up phase inside a run's init interval (a time 0: the phase is not logged). */
struct mllog_phase {
    const char *start_key, *stop_key;
    long long start_ms, stop_ms;
};

/* What a run's header says: who and what ran (the submission_* keys), its init interval and the
 * hyperparameters MLPerf logs inside it. */
struct mllog_run_info {
    const char *workload;       /* trainbench's workload (trainbench_workload; MLPerf has no key for it) */
    const char *backend;        /* trainbench_backend */
    const char *platform;       /* submission_platform ("" or NULL: "unknown") */
    long long init_start_ms;    /* when this run's set-up began (0: now) */
    struct mllog_phase phases[4]; /* set-up phases inside the init interval, in order */
    int n_phases;
    int global_batch;
    int accumulation;           /* micro-batches per optimizer step (1: none) */
    uint64_t seed;
    const struct optim_config *optim;
    long steps_per_epoch;       /* for the warm-up in epochs (<= 0: not logged) */
    long train_samples, eval_samples;
};

/* The head of a run's log, in the order MLPerf's checker wants: submission_* and cache_clear, then
 * init_start, the set-up phases, the hyperparameters (global_batch_size, gradient_accumulation_steps,
 * seed, opt_* of the optimizer, train_samples, eval_samples), init_stop. The caller writes run_start
 * next. */
void mllog_run_header(struct mllog *l, const struct mllog_run_info *ri);

/* Flushes and closes (safe on a disabled log). TB_OK, or TB_EIO where an event could not be written (a full disk):
 * the log is incomplete, and "--mllog FILE: ..." goes into why (n bytes) unless it holds a reason already. The
 * thread's error is left as it is (a stopped run's message follows the close). */
int mllog_close(struct mllog *l, char *why, size_t n);

#endif
