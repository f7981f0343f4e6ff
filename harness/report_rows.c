/* report_rows.c — the configuration index and the range checks of row numbers (see report_rows.h). */
#include "report_rows.h"

#include "json.h"
#include "status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bits: keys are short text, and a collision only costs a strcmp. */
uint64_t report_key_hash(const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h;
}

void report_index_init(struct report_index *ix)
{
    memset(ix, 0, sizeof *ix);
}

/* The slot holding key, or the empty slot where it would go (cap > 0). */
static struct report_index_slot *slot_of(const struct report_index *ix, const char *key, uint64_t h)
{
    size_t i = (size_t)h & (ix->cap - 1);
    while (ix->slots[i].key && (ix->slots[i].hash != h || strcmp(ix->slots[i].key, key))) i = (i + 1) & (ix->cap - 1);
    return &ix->slots[i];
}

int report_index_find(const struct report_index *ix, const char *key)
{
    if (!ix->cap) return -1;
    const struct report_index_slot *s = slot_of(ix, key, report_key_hash(key));
    return s->key ? s->id : -1;
}

/* Doubles the table (cap 0: 64 slots), keeping every key's id. */
static int grow(struct report_index *ix)
{
    const size_t cap = ix->cap ? 2 * ix->cap : 64;
    struct report_index_slot *old = ix->slots, *slots = calloc(cap, sizeof *slots);
    if (!slots) return tb_error_set(TB_ENOMEM, "out of memory for an index of %d configurations", ix->n);
    const size_t old_cap = ix->cap;
    ix->slots = slots, ix->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) *slot_of(ix, old[i].key, old[i].hash) = old[i];
    free(old);
    return TB_OK;
}

int report_index_add(struct report_index *ix, const char *key, int *id, int *added)
{
    if (added) *added = 0;
    /* At most half full: probes stay short. */
    if (2 * ((size_t)ix->n + 1) > ix->cap) {
        const int st = grow(ix);
        if (st != TB_OK) return st;
    }
    const uint64_t h = report_key_hash(key);
    struct report_index_slot *s = slot_of(ix, key, h);
    if (!s->key) {
        char *copy = strdup(key);
        if (!copy) return tb_error_set(TB_ENOMEM, "out of memory for an index of %d configurations", ix->n);
        s->key = copy, s->hash = h, s->id = ix->n++;
        if (added) *added = 1;
    }
    *id = s->id;
    return TB_OK;
}

void report_index_free(struct report_index *ix)
{
    for (size_t i = 0; i < ix->cap; i++) free(ix->slots[i].key);
    free(ix->slots);
    report_index_init(ix);
}

int report_int(double v, int lo, int hi, int fallback)
{
    /* Compared as doubles (every int is one exactly); a NaN fails both. */
    return v >= (double)lo && v <= (double)hi ? (int)v : fallback;
}

enum figure_range {
    FIG_POSITIVE, /* a rate, a time, a ratio: 0 or less measures nothing */
    FIG_NONNEG,   /* a count, a size, a spread, a duration that may be 0 */
    FIG_UNIT,     /* an accuracy or a fraction: [0, 1] */
};

static const struct {
    const char *field;
    enum figure_range range;
} figure_ranges[] = {
    {"images_per_s", FIG_POSITIVE}, {"images_per_s_median", FIG_POSITIVE}, {"images_per_s_mean", FIG_POSITIVE},
    {"repeat_images_per_s", FIG_POSITIVE}, {"gflops_per_s", FIG_POSITIVE}, {"est_intensity_flop_per_byte", FIG_POSITIVE},
    {"speedup", FIG_POSITIVE}, {"efficiency", FIG_POSITIVE}, {"tta_olympic_mean_s", FIG_POSITIVE}, {"tta_s", FIG_POSITIVE},
    {"train_time_s", FIG_POSITIVE}, {"latency_p50_s", FIG_POSITIVE}, {"latency_p90_s", FIG_POSITIVE},
    {"latency_p99_s", FIG_POSITIVE}, {"step_time_median_s", FIG_POSITIVE}, {"step_time_p99_s", FIG_POSITIVE},
    {"local_batch", FIG_POSITIVE}, {"replicas", FIG_POSITIVE}, {"accumulation", FIG_POSITIVE},
    {"images_per_s_stderr", FIG_NONNEG}, {"images_per_s_jitter", FIG_NONNEG}, {"peak_rss_mib", FIG_NONNEG},
    {"gpu_mem_peak_mib", FIG_NONNEG}, {"runs_total", FIG_NONNEG}, {"runs_reached", FIG_NONNEG},
    {"sgemm_peak_share", FIG_NONNEG}, {"eval_time_s", FIG_NONNEG}, {"epochs", FIG_NONNEG}, {"time_s", FIG_NONNEG},
    {"forward_s", FIG_NONNEG}, {"backward_s", FIG_NONNEG}, {"idle_s", FIG_NONNEG}, {"span_s", FIG_NONNEG},
    {"peak_threads", FIG_NONNEG}, {"devices_used", FIG_NONNEG}, {"images_per_s_projected", FIG_POSITIVE},
    {"images_per_s_measured", FIG_POSITIVE}, {"scaling_efficiency", FIG_POSITIVE},
    {"test_accuracy", FIG_UNIT}, {"accuracy", FIG_UNIT}, {"best_accuracy", FIG_UNIT}, {"bubble_measured", FIG_UNIT},
    {"bubble_ideal", FIG_UNIT},
};

/* The entry of field in figure_ranges, or -1. */
static int figure_entry(const char *field)
{
    for (size_t k = 0; k < sizeof figure_ranges / sizeof *figure_ranges; k++)
        if (!strcmp(figure_ranges[k].field, field)) return (int)k;
    return -1;
}

int report_figure_known(const char *field)
{
    return figure_entry(field) >= 0;
}

double report_figure(const char *field, double v)
{
    if (!(fabs(v) < REPORT_FIGURE_MAX)) return NAN; /* also NaN and ±inf */
    const int k = figure_entry(field);
    if (k < 0) return v;
    switch (figure_ranges[k].range) {
    case FIG_POSITIVE: return v > 0.0 ? v : NAN;
    case FIG_NONNEG: return v >= 0.0 ? v : NAN;
    case FIG_UNIT: return v >= 0.0 && v <= 1.0 ? v : NAN;
    }
    return NAN;
}

/* The config member named key, or NULL. */
static struct json_value *config_member(struct json_value *cfg, const char *key)
{
    for (int i = 0; cfg && cfg->type == JSON_OBJECT && i < cfg->n; i++)
        if (!strcmp(cfg->keys[i], key)) return &cfg->items[i];
    return NULL;
}

int report_row_effective(struct json_value *row)
{
    struct json_value *cfg = config_member(row, "config");
    const char *backend = json_get_str(cfg, "backend", "");
    struct json_value *th = config_member(cfg, "threads");
    const int default_threads = th && th->type == JSON_NUMBER && th->number == 0 && !strcmp(backend, "threads");
    if (default_threads) {
        const double usable = json_get_number(row, "machine.usable_cores", 0), cores = json_get_number(row, "machine.n_cores", 0);
        const double n = usable >= 1 && usable <= 4096 ? usable : cores >= 1 && cores <= 4096 ? cores : 0;
        if (n > 0) th->number = floor(n);
    }
    struct json_value *sc = config_member(cfg, "schedule");
    if (sc && sc->type == JSON_STRING && !sc->str[0] && !strcmp(backend, "ipu")) {
        char *s = strdup("1f1b");
        if (s) free(sc->str), sc->str = s;
    }
    struct json_value *pf = config_member(cfg, "prefetch");
    if (pf && pf->type == JSON_NUMBER && (pf->number == 0 || pf->number == -1))
        pf->number = pf->number == -1 ? 0 : !strcmp(backend, "ipu") ? 3 : 1;
    return default_threads;
}
