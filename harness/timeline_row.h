/* timeline_row.h — a pipelined backend's last training step as `figures.timeline` of a result row.
 *
 * What the row carries (the report draws its Gantt chart from it alone): the step's span, the device
 * count, and one compact array per interval, [device, stage, replica, micro_batch, "F|B|R|A|U",
 * start_s, end_s], times in seconds since the step began rounded to 0.1 µs. At most
 * TIMELINE_ROW_MAX_EVENTS intervals are written, whole devices at a time (lanes are never half
 * drawn); "truncated" says when devices were left out. Labelled "measured".
 * Not here: the per-step CSV of every step (--timeline: timeline_csv.h), or any drawing.
 * Threading: none; it allocates a scratch copy of the events for the duration of the call.
 */
#ifndef TB_TIMELINE_ROW_H
#define TB_TIMELINE_ROW_H

#include "backend.h"
#include "pipeline_report.h"
#include "json.h"

#define TIMELINE_ROW_MAX_EVENTS 512

/* Writes "timeline": {...} into the open object of b (a row's "figures") from the backend's last
 * training step; writes nothing when the backend keeps no timeline or has no step yet. */
void timeline_row_write(struct json_buf *b, struct backend *be);

#endif
