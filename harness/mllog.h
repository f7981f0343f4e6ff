/* mllog.h — MLPerf-style event logs: one ":::MLLOG {json}" line per event, one file per run.
 *
 *   :::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME",
 *             "key": "eval_accuracy", "value": 0.8812, "metadata": {"file": "run.c", "epoch_num": 3}}
 *
 * The keys the plans emit follow MLPerf's names (run_start, epoch_start, eval_accuracy, run_stop with
 * status success|aborted, global_batch_size, seed, opt_name, ...), so MLPerf's log checkers and
 * result summarisers can read them. It writes; it does not check a log against MLPerf's rules.
 * A log that cannot be opened is disabled (every call becomes a no-op) after one warning: the
 * benchmark matters more than its log.
 * Threading: one struct per run, used by the thread running the plan.
 */
#ifndef TB_MLLOG_H
#define TB_MLLOG_H

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
/* mllog_open, but append != 0 continues an existing log (a resumed run with the same run id). */
int mllog_open_for(struct mllog *l, const char *dir, const char *run_id, int append);
/* Writes one event; value_json is JSON text ("0.88", "\"adam\"", "null"); epoch_num < 0 omits
 * metadata.epoch_num, status NULL omits metadata.status. */
void mllog_event(struct mllog *l, enum mllog_type type, const char *key, const char *value_json, long epoch_num,
                 const char *status);
/* Shorthands for a POINT_IN_TIME event with a number, an integer or a string value. */
void mllog_point_num(struct mllog *l, const char *key, double v);
void mllog_point_int(struct mllog *l, const char *key, long long v);
void mllog_point_str(struct mllog *l, const char *key, const char *s);
/* Flushes and closes (safe on a disabled log). */
void mllog_close(struct mllog *l);

#endif
