/* timeline_row.c — figures.timeline from backend_timeline (see timeline_row.h). */
#include "timeline_row.h"

#include <math.h>
#include <stdlib.h>

/* 0.1 µs is far below what a step's phases last and keeps a row of 512 intervals near 20 KB. */
static double round_time(double t) { return round(t * 1e7) / 1e7; }

void timeline_row_write(struct json_buf *b, struct backend *be)
{
    const int n = backend_timeline(be, NULL, 0);
    if (n <= 0) return;
    struct timeline_event *ev = malloc((size_t)n * sizeof *ev);
    if (!ev) return; /* the row stays valid without its chart */
    const int got = backend_timeline(be, ev, n);
    const int total = got < n ? got : n;
    /* Devices in order while all their events fit; the events arrive grouped by device. */
    int devices = backend_n_devices(be), shown_devices = 0, shown = 0;
    double span = 0.0;
    for (int k = 0; k < total; k++) {
        if (ev[k].end_s > span) span = ev[k].end_s;
        if (ev[k].device + 1 > devices) devices = ev[k].device + 1;
    }
    for (int k = 0; k < total;) {
        int e = k;
        while (e < total && ev[e].device == ev[k].device) e++;
        if (shown + (e - k) > TIMELINE_ROW_MAX_EVENTS) break;
        shown += e - k, shown_devices++;
        k = e;
    }
    if (shown_devices == 0 && total > 0) { /* one device alone is over the cap: part of its lane */
        shown = total < TIMELINE_ROW_MAX_EVENTS ? total : TIMELINE_ROW_MAX_EVENTS;
        shown_devices = 1;
    }
    json_key_object(b, "timeline");
    json_key_str(b, "label", "measured");
    json_key_str(b, "step", "last");
    json_key_double(b, "span_s", round_time(span));
    json_key_int(b, "devices", devices);
    json_key_int(b, "devices_shown", shown_devices);
    json_key_int(b, "events_total", total);
    json_key_bool(b, "truncated", shown < total);
    json_key_array(b, "events");
    for (int k = 0; k < shown; k++) {
        const char phase[2] = {ev[k].phase, '\0'};
        json_begin_array(b);
        json_int(b, ev[k].device);
        json_int(b, ev[k].stage);
        json_int(b, ev[k].replica);
        json_int(b, ev[k].micro_batch);
        json_str(b, phase);
        json_double(b, round_time(ev[k].start_s));
        json_double(b, round_time(ev[k].end_s));
        json_end_array(b);
    }
    json_end_array(b);
    json_end_object(b);
    free(ev);
}
