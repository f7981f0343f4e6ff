/* timeline_csv.h — --timeline FILE: every training step of a pipelined backend as CSV, written by the
 * harness from what the backend reports (backend_stats: the step's intervals and per-device summary).
 *
 * Two files: FILE, one row per interval,
 *   step,device,stage,replica,microbatch,phase,start_s,end_s
 * and FILE.devices.csv, one row per device and step,
 *   step,device,stage,replica,span_s,compute_s,exchange_s,wait_s,idle_s,allreduce_s,update_s,bytes_out,slots_peak
 * times in seconds since the step began (%.9f), bytes as an integer. Each step's rows are flushed.
 * Not here: figures.timeline of a result row (timeline_row.h), the Chrome trace (trace.h).
 * Threading: none; the caller's thread.
 */
#ifndef TB_TIMELINE_CSV_H
#define TB_TIMELINE_CSV_H

#include "backend.h"

#include <stdio.h>

struct timeline_csv {
    FILE *events;  /* FILE: per interval; NULL when closed */
    FILE *devices; /* FILE.devices.csv: per device and step */
};

/* Creates (replaces) path and path.devices.csv, each with its header row; TB_EIO naming the file. */
int timeline_csv_open(struct timeline_csv *t, const char *path);
/* Appends the backend's training step `step` to both files if it is the last step the backend completed
 * (nothing otherwise, or when t is closed or the backend keeps no timeline); TB_EIO on a write error. */
int timeline_csv_step(struct timeline_csv *t, struct backend *be, long step);
/* Closes both files (safe on a zeroed or closed t) and zeroes t. */
void timeline_csv_close(struct timeline_csv *t);

#endif
