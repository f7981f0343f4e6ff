/* trace.c — captures a training step's events and writes them as a Chrome trace (see trace.h). */
#include "trace.h"

#include "outputs.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grows *p to hold n items of size sz; the old contents need not survive (the capture is replaced). */
static int ensure(void **p, int *cap, int n, size_t sz)
{
    if (n <= *cap) return TB_OK;
    void *q = realloc(*p, (size_t)n * sz);
    if (!q) return TB_ENOMEM;
    *p = q, *cap = n;
    return TB_OK;
}

int trace_capture_take(struct trace_capture *t, struct backend *be, long step, double step_s)
{
    t->step = 0, t->n_ev = t->n_tl = 0;
    const int n_ev = backend_trace_events(be, NULL, 0), n_tl = backend_timeline(be, NULL, 0);
    if (ensure((void **)&t->ev, &t->cap_ev, n_ev, sizeof *t->ev) != TB_OK ||
        ensure((void **)&t->tl, &t->cap_tl, n_tl, sizeof *t->tl) != TB_OK)
        return tb_error_set(TB_ENOMEM, "--trace: out of memory for %d events", n_ev + n_tl);
    const int got_ev = n_ev ? backend_trace_events(be, t->ev, n_ev) : 0;
    const int got_tl = n_tl ? backend_timeline(be, t->tl, n_tl) : 0;
    t->n_ev = got_ev < n_ev ? got_ev : n_ev;
    t->n_tl = got_tl < n_tl ? got_tl : n_tl;
    t->step = step, t->step_s = step_s;
    return TB_OK;
}

void trace_capture_free(struct trace_capture *t)
{
    free(t->ev);
    free(t->tl);
    memset(t, 0, sizeof *t);
}

static int max_device(const struct trace_capture *t)
{
    int d = -1;
    for (int k = 0; k < t->n_ev; k++) d = t->ev[k].device > d ? t->ev[k].device : d;
    for (int k = 0; k < t->n_tl; k++) d = t->tl[k].device > d ? t->tl[k].device : d;
    return d;
}

static int lane_has(const struct trace_capture *t, int d, int *has_tl)
{
    int any = 0;
    *has_tl = 0;
    for (int k = 0; k < t->n_tl; k++)
        if (t->tl[k].device == d) any = *has_tl = 1;
    for (int k = 0; k < t->n_ev && !any; k++)
        if (t->ev[k].device == d) any = 1;
    return any;
}

int trace_capture_lanes(const struct trace_capture *t)
{
    int n = 0, tl;
    for (int d = 0; d <= max_device(t); d++) n += lane_has(t, d, &tl);
    return n;
}

static const char *phase_word(char p)
{
    switch (p) {
    case 'F': return "forward";
    case 'B': return "backward";
    case 'R': return "recompute";
    case 'A': return "all-reduce";
    case 'U': return "update";
    case 'W': return "wait";
    default: return "other";
    }
}

/* Microseconds at 1 ns resolution: shorter text, and nothing a trace viewer can show is lost. */
static double us(double s) { return round(s * 1e9) / 1e3; }

static void meta_event(struct json_buf *b, const char *name, int tid, const char *key, const char *sval, long ival)
{
    json_begin_object(b);
    json_key_str(b, "name", name);
    json_key_str(b, "ph", "M");
    json_key_int(b, "pid", 0);
    json_key_int(b, "tid", tid);
    json_key_object(b, "args");
    if (sval) json_key_str(b, key, sval);
    else json_key_int(b, key, ival);
    json_end_object(b);
    json_end_object(b);
}

/* Opens a complete event; the caller may add members (args) and closes it. */
static void x_begin(struct json_buf *b, const char *name, const char *cat, int tid, double t0, double t1)
{
    json_begin_object(b);
    json_key_str(b, "name", name);
    json_key_str(b, "cat", cat);
    json_key_str(b, "ph", "X");
    json_key_double(b, "ts", us(t0));
    json_key_double(b, "dur", t1 > t0 ? round((us(t1) - us(t0)) * 1e3) / 1e3 : 0.0);
    json_key_int(b, "pid", 0);
    json_key_int(b, "tid", tid);
}

static void lane_name(char *buf, size_t n, const struct trace_capture *t, int d, int has_tl, int lanes,
                      const struct trace_meta *meta)
{
    const char *be = meta && meta->backend ? meta->backend : "device";
    if (has_tl) {
        for (int k = 0; k < t->n_tl; k++)
            if (t->tl[k].device == d) {
                snprintf(buf, n, "device %d (stage %d, replica %d)", d, t->tl[k].stage, t->tl[k].replica);
                return;
            }
    }
    const int devices = meta ? meta->devices : 1;
    if (lanes == 1 && devices > 1)
        snprintf(buf, n, "%s: thread 0 of %d (the pool runs every layer together)", be, devices);
    else if (lanes > 1)
        snprintf(buf, n, "%s replica %d", be, d);
    else
        snprintf(buf, n, "%s device %d", be, d);
}

/* One lane: its micro-batch phases, else forward/backward spans around its layers; then the layers. */
static void lane_events(struct json_buf *b, const struct trace_capture *t, const struct model *m, int d, int has_tl)
{
    char name[160];
    if (has_tl) {
        for (int k = 0; k < t->n_tl; k++) {
            const struct timeline_event *e = &t->tl[k];
            if (e->device != d) continue;
            if (e->micro_batch >= 0) snprintf(name, sizeof name, "%s mb %d", phase_word(e->phase), e->micro_batch);
            else snprintf(name, sizeof name, "%s", phase_word(e->phase));
            x_begin(b, name, phase_word(e->phase), d, e->start_s, e->end_s);
            json_key_object(b, "args");
            json_key_int(b, "micro_batch", e->micro_batch);
            json_key_int(b, "stage", e->stage);
            json_key_int(b, "replica", e->replica);
            json_end_object(b);
            json_end_object(b);
        }
    } else {
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (int k = 0; k < t->n_ev; k++) {
            const struct trace_event *e = &t->ev[k];
            if (e->device != d || e->layer < 0 || (e->phase != 'F' && e->phase != 'B')) continue;
            const int j = e->phase == 'B';
            if (e->start_s < lo[j]) lo[j] = e->start_s;
            if (e->end_s > hi[j]) hi[j] = e->end_s;
        }
        for (int j = 0; j < 2; j++)
            if (hi[j] >= lo[j]) {
                x_begin(b, j ? "backward" : "forward", "step", d, lo[j], hi[j]);
                json_end_object(b);
            }
    }
    for (int k = 0; k < t->n_ev; k++) {
        const struct trace_event *e = &t->ev[k];
        if (e->device != d) continue;
        const int is_layer = e->layer >= 0 && e->layer < m->n_layers;
        if (is_layer)
            snprintf(name, sizeof name, "%s %s", m->layers[e->layer].name, e->phase == 'B' ? "bwd" : "fwd");
        else
            snprintf(name, sizeof name, "%s", phase_word(e->phase));
        x_begin(b, name, phase_word(e->phase), d, e->start_s, e->end_s);
        json_key_object(b, "args");
        if (is_layer) {
            json_key_int(b, "layer", e->layer);
            json_key_str(b, "op", model_op_name(m->layers[e->layer].op));
        }
        json_key_int(b, "micro_batch", e->micro_batch);
        json_end_object(b);
        json_end_object(b);
    }
}

void trace_write_json(struct json_buf *b, const struct trace_capture *t, const struct model *m,
                      const struct trace_meta *meta)
{
    const int top = max_device(t), lanes = trace_capture_lanes(t);
    char name[256];
    json_begin_object(b);
    json_key_array(b, "traceEvents");
    snprintf(name, sizeof name, "trainbench %s/%s step %ld", meta && meta->backend ? meta->backend : "?",
             meta && meta->workload ? meta->workload : "?", t->step);
    meta_event(b, "process_name", 0, "name", name, 0);
    for (int d = 0; d <= top; d++) {
        int has_tl;
        if (!lane_has(t, d, &has_tl)) continue;
        lane_name(name, sizeof name, t, d, has_tl, lanes, meta);
        meta_event(b, "thread_name", d, "name", name, 0);
        meta_event(b, "thread_sort_index", d, "sort_index", NULL, d);
        lane_events(b, t, m, d, has_tl);
    }
    json_end_array(b);
    json_key_str(b, "displayTimeUnit", "ms");
    json_key_object(b, "otherData");
    json_key_str(b, "generator", "trainbench --trace");
    json_key_str(b, "label", "measured");
    if (meta && meta->backend) json_key_str(b, "backend", meta->backend);
    if (meta && meta->desc) json_key_str(b, "backend_desc", meta->desc);
    if (meta && meta->workload) json_key_str(b, "workload", meta->workload);
    if (meta && meta->run_id) json_key_str(b, "run_id", meta->run_id);
    json_key_str(b, "model", m->name);
    json_key_int(b, "step", t->step);
    json_key_double(b, "step_us", us(t->step_s));
    json_key_int(b, "lanes", lanes);
    json_key_int(b, "devices", meta ? meta->devices : lanes);
    json_key_str(b, "clock", "ts/dur in microseconds since the backend began the step; layer times are each "
                             "device's thread 0 clock, barrier waits included");
    json_end_object(b);
    json_end_object(b);
}

int trace_write_file(const char *path, const struct trace_capture *t, const struct model *m,
                     const struct trace_meta *meta)
{
    struct json_buf b;
    json_buf_init(&b);
    trace_write_json(&b, t, m, meta);
    int st = json_buf_status(&b);
    if (st != TB_OK) {
        json_buf_free(&b);
        return tb_error_set(st, "--trace %s: the trace could not be formatted", path);
    }
    /* Beside the file and renamed over it: on a full disk an earlier trace stayed cut short, half a new one. */
    struct outputs_replace r;
    if ((st = outputs_replace_begin(&r, path)) == TB_OK) {
        outputs_replace_write(&r, json_buf_str(&b), strlen(json_buf_str(&b)));
        outputs_replace_write(&r, "\n", 1);
        st = outputs_replace_end(&r);
    }
    json_buf_free(&b);
    if (st != TB_OK) return tb_error_set(st, "--trace: %s", tb_error_get());
    return TB_OK;
}
