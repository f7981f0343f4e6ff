/* report.c — charts and REPORT.md from result rows (see report.h). */
#define _GNU_SOURCE
#include "report.h"

#include "calibrate.h"
#include "report_gpu.h"
#include "report_rows.h"
#include "report_seeds.h"
#include "json.h"
#include "outputs.h"
#include "regular_file.h"
#include "results.h"
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_POINTS 64

/* ------------------------------------------------------------------------------------------------
 * Rows. */

/* What the kept rows of one kind, workload and backend hold in one variant field (variant_label's
 * question "does another kept row differ in it?", answered once instead of by a scan per row). */
struct field_seen {
    int first;              /* the first kept row of the group, whose text the others were compared with */
    unsigned char distinct; /* texts among the group's kept rows: 0, 1, or 2 for two or more */
};

struct rows {
    const char *path;   /* for warnings */
    struct json_value **v;
    int n, cap;
    int *keep;          /* 1 if the row is the latest of its configuration */
    int *group;         /* (n) the row's kind, workload and backend as an index into seen */
    struct field_seen *seen; /* (groups × N_VARIANT) */
    unsigned char *show_crc; /* (n) 1: the label names the row's data CRC (another kept row would share its name) */
    long n_bare;        /* rows skipped here for want of config or figures (the reader counts the lines it skips) */
};

/* Keeps a private copy of each row (the reader frees its own after the callback). */
static int collect(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct rows *r = ctx;
    if (!json_get(row, "config") || !json_get(row, "figures")) {
        fprintf(stderr, "bench report: warning: %s:%ld: a row without config or figures; skipped\n", r->path, line_no);
        r->n_bare++;
        return TB_OK;
    }
    struct json_value *copy = NULL;
    const int st = json_value_copy(row, &copy);
    if (st != TB_OK) return st;
    report_row_effective(copy); /* a default and the same value typed out: one configuration, as in compare */
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        struct json_value **p = realloc(r->v, (size_t)cap * sizeof *p);
        if (!p) {
            json_value_free(copy);
            return tb_error_set(TB_ENOMEM, "out of memory");
        }
        r->v = p, r->cap = cap;
    }
    r->v[r->n++] = copy;
    return TB_OK;
}

static const char *cs(const struct json_value *row, const char *field)
{
    char path[96];
    snprintf(path, sizeof path, "config.%s", field);
    return json_get_str(row, path, "");
}

static double cn(const struct json_value *row, const char *field)
{
    char path[96];
    snprintf(path, sizeof path, "config.%s", field);
    return json_get_number(row, path, 0.0);
}

/* A count from a row (cores, threads): v in int's range and not negative, else 0 (as if absent). */
static int row_count(double v)
{
    return report_int(v, 0, INT_MAX, 0);
}

/* A figure, NaN where the row lacks it or holds a value no run measures (report_figure: a rate of 0 or
 * less, an accuracy outside [0, 1], 1e15 or more): both show as the empty-cell mark and are not drawn. */
static double fg(const struct json_value *row, const char *field)
{
    char path[96];
    snprintf(path, sizeof path, "figures.%s", field);
    return report_figure(field, json_get_number(row, path, NAN));
}

/* fg for a figure inside figures (a run of figures.runs, a curve point, a layer): field is its own name. */
static double fg_in(const struct json_value *v, const char *field)
{
    return report_figure(field, json_get_number(v, field, NAN));
}

/* report_cell as a value, for a cell in a printf argument list: cellf(v, "%.0f").s lives to the end of the
 * full expression (C11 6.2.4p8). */
struct cell {
    char s[64];
};

static struct cell cellf(double v, const char *fmt)
{
    struct cell c;
    report_cell(c.s, sizeof c.s, v, fmt);
    return c;
}

/* The row's share of the sgemm ceiling, NaN unless the ceiling it used was measured on the row's own machine
 * (rows written before calibrations named their machine cannot show that, so they show none). */
static double row_sgemm_share(const struct json_value *row)
{
    const struct json_value *c = json_get(row, "calibration");
    struct calibration rc = {.cores = row_count(json_get_number(c, "cores", 0))};
    snprintf(rc.cpu_model, sizeof rc.cpu_model, "%s", json_get_str(c, "cpu_model", ""));
    snprintf(rc.blas_core, sizeof rc.blas_core, "%s", json_get_str(c, "blas_core", ""));
    char why[8];
    if (!c || !calibrate_matches(&rc, json_get_str(row, "machine.cpu_model", "?"),
                                 row_count(json_get_number(row, "machine.n_cores", 0)), json_get_str(row, "build.blas_core", "?"),
                                 why, sizeof why))
        return NAN;
    return fg(row, "sgemm_peak_share");
}

/* A row of a run that finished: "status" "ok", or no status at all (rows written before it existed).
 * A diverged or interrupted run's figures describe a partial run and stay out of every chart. */
static int row_ok(const struct json_value *row)
{
    return !strcmp(json_get_str(row, "status", "ok"), "ok");
}

static const char *kind_of(const struct json_value *row)
{
    return json_get_str(row, "kind", json_get_str(row, "config.plan", "train"));
}

/* Options that change what a row measures, beyond kind, workload, backend and batch. The device first: a
 * run on the cuda device is another configuration than the same backend's on the cpu (as bench compare keys). */
static const char *const variant_fields[] = {"device", "threads", "devices", "resolution", "norm", "norm_groups",
                                             "conv_algo", "precision", "stages", "micro_batch", "ga", "replicas", "schedule",
                                             "recompute", "no_fuse", "transport", "sync_bn", "dataset", "optimizer", "lr",
                                             "momentum", "weight_decay", "lr_schedule", "lr_warmup", "lr_decay_rate",
                                             "lr_decay_steps", "lr_power", "lr_final", "label_smoothing",
                                             "steps", "warmup", "repeat", "steps_per_epoch", "load", "dropout",
                                             "classes", "loss_scale", "prefetch", "split", "eval_every", "max_epochs",
                                             "seeds", "profile", "steps_per_execution"};
enum { N_VARIANT = sizeof variant_fields / sizeof *variant_fields };

/* The data a row trained and tested on, as config.data_crc32 (8 hex digits), or NULL for rows written before
 * rows carried it. Two runs on other data under one dataset name ("mnist" from two directories) are other
 * configurations. A row without the CRC matches only rows without it: it cannot say which data it ran on,
 * and matching it to one that can would be a guess (older rows still supersede each other as before). */
static const char *data_crc(const struct json_value *row)
{
    const struct json_value *v = json_get(json_get(row, "config"), "data_crc32");
    return v && v->type == JSON_STRING ? v->str : NULL;
}

/* An int config field's text in a key: (int)v where v fits an int, else v itself ("1e+30"): no
 * out-of-range double is cast (undefined behaviour), and rows of other such values stay apart. */
static void key_int(char *buf, size_t n, double v)
{
    if (v >= INT_MIN && v <= INT_MAX) snprintf(buf, n, "%d", (int)v);
    else snprintf(buf, n, "%g", v);
}

/* The --time-budget a throughput row's steps were sized to (figures.time_budget_s), else 0. Such a row's
 * steps and warm-up are what the budget chose at the machine's speed of the moment (7/28, then 8/33, for one
 * command): it is keyed and named by its budget instead, so that one command stays one configuration. */
static double row_budget(const struct json_value *row)
{
    const double b = json_get_number(row, "figures.time_budget_s", 0.0);
    return isfinite(b) && b > 0.0 && !strcmp(kind_of(row), "throughput") ? b : 0.0;
}

/* A budgeted row whose --warmup was given (config.warmup_given): that warm-up ran in full, the user's choice, not
 * the budget's, so it keys and names the row as its budget does. */
static int budget_warmup_given(const struct json_value *row)
{
    return json_get_bool(row, "config.warmup_given", 0);
}

/* The configuration key of a row (batch left out for scaling sweeps, which group by sweep). */
static void row_key(const struct json_value *row, char *key, size_t n, int with_batch)
{
    char num[32];
    key_int(num, sizeof num, with_batch ? cn(row, "batch") : cn(row, "epochs"));
    /* The CRC near the front: a long key is cut at n, and the data must not be what is cut. */
    snprintf(key, n, "%s|%s|%s|%s|%s|crc=%s", kind_of(row), cs(row, "workload"), cs(row, "backend"),
             with_batch ? "" : "sweep", num, data_crc(row) ? data_crc(row) : "");
    for (size_t k = 0; k < sizeof variant_fields / sizeof *variant_fields; k++) {
        const struct json_value *v = json_get(json_get(row, "config"), variant_fields[k]);
        size_t len = strlen(key);
        /* Rows from before config.device ran on the cpu: the same key as today's cpu rows. */
        if (!strcmp(variant_fields[k], "device")) {
            snprintf(key + len, n - len, "|%s", v && v->type == JSON_STRING ? v->str : "cpu");
            continue;
        }
        if (row_budget(row) > 0.0 && !strcmp(variant_fields[k], "steps")) {
            snprintf(key + len, n - len, "|budget=%g", row_budget(row));
            continue;
        }
        if (row_budget(row) > 0.0 && !strcmp(variant_fields[k], "warmup") && !budget_warmup_given(row)) continue;
        if (!v) continue;
        /* Rows from before --steps-per-execution ran as auto (0) does: the same key (field_text too). */
        if (!strcmp(variant_fields[k], "steps_per_execution") && v->type == JSON_NUMBER && v->number == 0) continue;
        if (v->type == JSON_STRING) snprintf(key + len, n - len, "|%s", v->str);
        else if (v->type == JSON_NUMBER) snprintf(key + len, n - len, "|%g", v->number);
        else if (v->type == JSON_BOOL) snprintf(key + len, n - len, "|%d", v->boolean);
    }
    if (!strcmp(kind_of(row), "tta")) {
        size_t len = strlen(key);
        snprintf(key + len, n - len, "|%g", cn(row, "target"));
    }
}

/* A config field's value as text ("" when absent). */
static void field_text(const struct json_value *row, const char *field, char *buf, size_t n)
{
    const struct json_value *v = json_get(json_get(row, "config"), field);
    buf[0] = '\0';
    if (!v && !strcmp(field, "device")) snprintf(buf, n, "cpu"); /* rows from before config.device */
    if (row_budget(row) > 0.0 && !strcmp(field, "steps")) snprintf(buf, n, "budget:%gs", row_budget(row));
    if (!v || (row_budget(row) > 0.0 && (!strcmp(field, "steps") || (!strcmp(field, "warmup") && !budget_warmup_given(row)))))
        return;
    /* A sweep trained for --epochs runs each point's own steps (1875, 937, ... at batch 32, 64, ...): its label read
     * the first point's "steps=1875" for every point. The epochs are what was asked. */
    const double epochs = cn(row, "epochs");
    if (!strcmp(field, "steps") && !strcmp(kind_of(row), "scaling") && epochs > 0) {
        snprintf(buf, n, "%g epoch%s", epochs, epochs == 1 ? "" : "s");
        return;
    }
    /* 0 in these means the option was not given (the backend's default): no option to show. */
    static const char *const unset0[] = {"steps_per_execution", "micro_batch", "ga", "replicas"};
    if (v->type == JSON_NUMBER && v->number == 0)
        for (size_t k = 0; k < sizeof unset0 / sizeof *unset0; k++)
            if (!strcmp(field, unset0[k])) return;
    if (v->type == JSON_STRING) snprintf(buf, n, "%s", v->str);
    else if (v->type == JSON_NUMBER) snprintf(buf, n, "%g", v->number);
    else if (v->type == JSON_BOOL) snprintf(buf, n, "%s", v->boolean ? "on" : "off");
}

/* Fields variant_label shows whenever they are set, in its own words. */
static int shown_always(const char *field)
{
    static const char *const f[] = {"device", "threads", "devices", "resolution", "stages", "precision", "conv_algo",
                                    "norm", "no_fuse"};
    for (size_t k = 0; k < sizeof f / sizeof *f; k++)
        if (!strcmp(f[k], field)) return 1;
    return 0;
}

/* Whether field is one of list[0..n). */
static int in_fields(const char *const *list, size_t n, const char *field)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(list[k], field)) return 1;
    return 0;
}

/* Whether another kept row of row i's kind, workload and backend has another text (field_text) than mine in
 * variant field k, from rs->seen (index_labels). */
static int differs_from_kept(const struct rows *rs, int i, size_t k, const char *mine)
{
    const struct field_seen *s = &rs->seen[(size_t)rs->group[i] * N_VARIANT + k];
    /* Two texts among the kept rows: one is not mine. One: the others differ exactly when it is not mine
     * (where it is, row i, if kept, is one of those that hold it). */
    if (s->distinct != 1) return s->distinct > 1;
    char other[160];
    field_text(rs->v[s->first], variant_fields[k], other, sizeof other);
    return strcmp(mine, other) != 0;
}

/* Where field is in variant_fields. */
static size_t variant_index(const char *field)
{
    size_t k = 0;
    while (k < N_VARIANT && strcmp(variant_fields[k], field)) k++;
    TB_ASSERT(k < N_VARIANT);
    return k;
}

/* variant_label without the fields skip[0..n_skip): a grid sweep's label names the dimensions it varies
 * itself rather than its first point's values. */
static void variant_label_skip(const struct rows *rs, int i, const char *const *skip, size_t n_skip, char *buf, size_t n)
{
    const struct json_value *row = rs->v[i];
    buf[0] = '\0';
    for (size_t k = 0; k < N_VARIANT; k++) {
        if (shown_always(variant_fields[k]) || in_fields(skip, n_skip, variant_fields[k])) continue;
        char mine[160];
        field_text(row, variant_fields[k], mine, sizeof mine);
        if (mine[0] && strlen(buf) + strlen(mine) + 24 < n && differs_from_kept(rs, i, k, mine))
            snprintf(buf + strlen(buf), n - strlen(buf), " %s=%s", variant_fields[k], mine);
    }
    char extra[512];
    snprintf(extra, sizeof extra, "%s", buf);
    buf[0] = '\0';
    /* The device whenever it is not the cpu, and the cpu's beside a row of its backend on another device. */
    char dev[160];
    field_text(row, "device", dev, sizeof dev);
    if (!in_fields(skip, n_skip, "device") && (strcmp(dev, "cpu") || differs_from_kept(rs, i, variant_index("device"), dev)))
        snprintf(buf + strlen(buf), n - strlen(buf), " device=%.60s", dev);
    if (cn(row, "threads") > 0) snprintf(buf + strlen(buf), n - strlen(buf), " threads=%g", cn(row, "threads"));
    if (cn(row, "devices") > 0 && !in_fields(skip, n_skip, "devices"))
        snprintf(buf + strlen(buf), n - strlen(buf), " devices=%g", cn(row, "devices"));
    if (cn(row, "resolution") > 0) snprintf(buf + strlen(buf), n - strlen(buf), " res=%g", cn(row, "resolution"));
    if (cn(row, "stages") > 0) snprintf(buf + strlen(buf), n - strlen(buf), " stages=%g", cn(row, "stages"));
    const char *pr = cs(row, "precision");
    if (pr[0] && strcmp(pr, "fp32")) snprintf(buf + strlen(buf), n - strlen(buf), " %s", pr);
    const char *ca = cs(row, "conv_algo");
    if (ca[0] && strcmp(ca, "auto")) snprintf(buf + strlen(buf), n - strlen(buf), " conv=%s", ca);
    const char *nm = cs(row, "norm");
    if (nm[0] && strcmp(nm, "default") && strcmp(nm, "batch")) snprintf(buf + strlen(buf), n - strlen(buf), " norm=%s", nm);
    if (json_get_bool(row, "config.no_fuse", 0)) snprintf(buf + strlen(buf), n - strlen(buf), " no-fuse");
    snprintf(buf + strlen(buf), n - strlen(buf), "%s", extra);
    /* The data only where it alone tells this row's name from another's ("?": a row from before the CRC). */
    if (rs->show_crc && rs->show_crc[i])
        snprintf(buf + strlen(buf), n - strlen(buf), " data_crc32=%s", data_crc(row) ? data_crc(row) : "?");
}

/* A short label of the options that set row i apart: " device=cuda threads=2 res=32", then every other
 * option that changes the work (variant_fields) in which this row differs from another kept row of its
 * kind, workload and backend (" optimizer=sgd lr=0.1 load=w.ckpt"), so that two rows are never shown
 * under the same label; a backend's own options, absent from other backends' rows, are not differences.
 * Where two kept rows would still share a name (kind, workload, backend, batch, label), their data CRCs
 * tell them apart (" data_crc32=1a2b3c4d"). */
static void variant_label(const struct rows *rs, int i, char *buf, size_t n)
{
    variant_label_skip(rs, i, NULL, 0, buf, n);
}

/* A count (stages, replicas) as printed: (int)v, or "–" where v is not one an int holds. */
static struct cell count_cell(double v)
{
    struct cell c;
    const int k = report_int(v, 0, INT_MAX, -1);
    if (k < 0) snprintf(c.s, sizeof c.s, "–");
    else snprintf(c.s, sizeof c.s, "%d", k);
    return c;
}

/* The batch as a table shows it: "–" where it is not a count an int holds (1e30 cast to int is undefined). */
static struct cell batch_cell(const struct json_value *row)
{
    return count_cell(cn(row, "batch"));
}

/* Marks the latest row of each configuration, and for scaling the latest sweep of each; rows of runs
 * that did not finish are never kept and never replace a finished one. From the last row back, so that
 * "a later row of the same key" is a look-up in the keys seen so far. */
static int mark_latest(struct rows *r)
{
    r->keep = calloc((size_t)(r->n ? r->n : 1), sizeof *r->keep);
    /* Per key (by id): the row of the latest sweep seen of it, or -1 once a key has two sweeps. */
    int *sweep_row = malloc((size_t)(r->n ? r->n : 1) * sizeof *sweep_row);
    struct report_index keys, points;
    report_index_init(&keys);
    report_index_init(&points);
    int st = r->keep && sweep_row ? TB_OK : tb_error_set(TB_ENOMEM, "out of memory");
    char key[1024];
    for (int i = r->n - 1; i >= 0 && st == TB_OK; i--) {
        if (!row_ok(r->v[i])) continue;
        const int scaling = !strcmp(kind_of(r->v[i]), "scaling");
        row_key(r->v[i], key, sizeof key, !scaling);
        int id, added;
        if ((st = report_index_add(&keys, key, &id, &added)) != TB_OK) break;
        if (!scaling) {
            r->keep[i] = added;
            continue;
        }
        /* A later row of the same key and another sweep replaces a sweep; one of the same sweep is a sibling
         * point, and replaces only the point at its batch. */
        const char *sweep = json_get_str(r->v[i], "sweep", "");
        int later = 0;
        if (added) sweep_row[id] = i;
        else if (sweep_row[id] < 0 || strcmp(json_get_str(r->v[sweep_row[id]], "sweep", ""), sweep))
            later = 1, sweep_row[id] = -1;
        char batch[32], *point = NULL;
        key_int(batch, sizeof batch, cn(r->v[i], "batch"));
        if (asprintf(&point, "%s\x1f%s\x1f%s", key, sweep, batch) < 0) {
            st = tb_error_set(TB_ENOMEM, "out of memory");
            break;
        }
        st = report_index_add(&points, point, &id, &added);
        free(point);
        r->keep[i] = !later && added;
    }
    free(sweep_row);
    report_index_free(&keys);
    report_index_free(&points);
    return st;
}

/* The group key of a row: kind, workload and backend, each with its length (no separator is ambiguous). */
static char *group_key(const struct json_value *row)
{
    char *key = NULL;
    const char *k = kind_of(row), *w = cs(row, "workload"), *b = cs(row, "backend");
    return asprintf(&key, "%zu:%s%zu:%s%zu:%s", strlen(k), k, strlen(w), w, strlen(b), b) < 0 ? NULL : key;
}

/* Prepares variant_label (after mark_latest): each row's group, what the group's kept rows hold in each
 * variant field, and which kept rows would share a name but for their data CRC. Time linear in the rows:
 * the labels of thousands of configurations had each scanned every row, field by field. */
static int index_labels(struct rows *r)
{
    const size_t n = (size_t)(r->n ? r->n : 1);
    struct report_index groups, names;
    report_index_init(&groups);
    report_index_init(&names);
    int *name_of = malloc(n * sizeof *name_of), *name_first = malloc(n * sizeof *name_first);
    unsigned char *name_mixed = calloc(n, 1);
    r->group = malloc(n * sizeof *r->group);
    r->show_crc = calloc(n, 1);
    int st = name_of && name_first && name_mixed && r->group && r->show_crc ? TB_OK : tb_error_set(TB_ENOMEM, "out of memory");
    for (int i = 0; i < r->n && st == TB_OK; i++) {
        char *key = group_key(r->v[i]);
        st = key ? report_index_add(&groups, key, &r->group[i], NULL) : tb_error_set(TB_ENOMEM, "out of memory");
        free(key);
    }
    if (st == TB_OK && !(r->seen = calloc((size_t)(groups.n ? groups.n : 1) * N_VARIANT, sizeof *r->seen)))
        st = tb_error_set(TB_ENOMEM, "out of memory");
    for (int i = 0; i < r->n && st == TB_OK; i++) {
        if (!r->keep[i]) continue;
        for (size_t k = 0; k < N_VARIANT; k++) {
            struct field_seen *s = &r->seen[(size_t)r->group[i] * N_VARIANT + k];
            if (s->distinct == 0) {
                s->first = i, s->distinct = 1;
                continue;
            }
            if (s->distinct > 1) continue;
            char mine[160], first[160];
            field_text(r->v[i], variant_fields[k], mine, sizeof mine);
            field_text(r->v[s->first], variant_fields[k], first, sizeof first);
            if (strcmp(mine, first)) s->distinct = 2;
        }
    }
    /* Names (show_crc still 0): a name two kept rows of other data share shows their CRCs. */
    for (int i = 0; i < r->n && st == TB_OK; i++) {
        if (!r->keep[i]) continue;
        char var[512], *name = NULL, *group = group_key(r->v[i]);
        variant_label(r, i, var, sizeof var);
        const int tta = !strcmp(kind_of(r->v[i]), "tta");
        if (!group || asprintf(&name, "%s b%s t%g%s", group, batch_cell(r->v[i]).s, tta ? cn(r->v[i], "target") : 0.0, var) < 0)
            name = NULL;
        int added = 0;
        st = name ? report_index_add(&names, name, &name_of[i], &added) : tb_error_set(TB_ENOMEM, "out of memory");
        free(name), free(group);
        if (st != TB_OK) break;
        if (added) {
            name_first[name_of[i]] = i;
            continue;
        }
        const char *mine = data_crc(r->v[i]), *theirs = data_crc(r->v[name_first[name_of[i]]]);
        if ((mine == NULL) != (theirs == NULL) || (mine && strcmp(mine, theirs))) name_mixed[name_of[i]] = 1;
    }
    for (int i = 0; i < r->n && st == TB_OK; i++) r->show_crc[i] = r->keep[i] && name_mixed[name_of[i]];
    free(name_of), free(name_first), free(name_mixed);
    report_index_free(&groups);
    report_index_free(&names);
    return st;
}

/* The figures under v (path: its place, key: its name, or its array's for an element) that the report
 * shows and that hold a value no run measures (report_figure): *n counts them, first names the first. Only
 * the parts of figures the report reads are walked (the top level, runs and their curves, layer_times,
 * pipeline, timeline): figures.layer_types[].gflops_per_s is 0 for a type without FLOPs, and not shown. */
static void find_impossible(const struct json_value *v, const char *key, const char *path, int *n, char *first, size_t size)
{
    static const char *const walked[] = {"figures", "runs", "curve", "layer_times", "pipeline", "timeline",
                                         "repeat_images_per_s"};
    if (v->type == JSON_NUMBER) {
        if (!report_figure_known(key) || !isnan(report_figure(key, v->number))) return;
        if (!(*n)++) snprintf(first, size, "%s = %g", path, v->number);
        return;
    }
    if ((v->type != JSON_OBJECT && v->type != JSON_ARRAY) || !in_fields(walked, sizeof walked / sizeof *walked, key)) return;
    for (int i = 0; i < v->n; i++) {
        char sub[256];
        if (v->type == JSON_OBJECT) snprintf(sub, sizeof sub, "%s.%s", path, v->keys[i]);
        else snprintf(sub, sizeof sub, "%s.%d", path, i);
        const struct json_value *c = &v->items[i];
        /* An array's elements go by its name: an object element (a run) is walked, a number checked. */
        find_impossible(c, v->type == JSON_OBJECT ? v->keys[i] : key, sub, n, first, size);
    }
}

/* Says once on stderr how many figures of the rows shown hold values no run measures (shown as the
 * empty-cell mark, drawn nowhere), and batches no int holds, as bench compare says the samples it skips. */
static void warn_impossible(const struct rows *r)
{
    int n = 0;
    char first[300] = "", what[300] = "";
    const char *run = "?";
    for (int i = 0; i < r->n; i++) {
        if (!r->keep[i]) continue;
        const int before = n;
        const struct json_value *fig = json_get(r->v[i], "figures");
        if (fig) find_impossible(fig, "figures", "figures", &n, what, sizeof what);
        const struct json_value *b = json_get(r->v[i], "config.batch");
        if (b && b->type == JSON_NUMBER && report_int(b->number, 0, INT_MAX, -1) < 0 && !n++)
            snprintf(what, sizeof what, "config.batch = %g", b->number);
        if (before == 0 && n > 0) {
            snprintf(first, sizeof first, "%s", what);
            run = json_get_str(r->v[i], "run_id", "?");
        }
    }
    if (n)
        fprintf(stderr, "bench report: warning: %s: %d value%s no run can have (a rate or time of 0 or less, an accuracy "
                        "outside [0, 1], 1e15 or more, a batch no int holds; the first: run %s, %s) shown as – and left out "
                        "of the charts\n",
                r->path, n, n == 1 ? "" : "s", run, first);
}

/* ------------------------------------------------------------------------------------------------
 * Output helpers. */

static int make_dirs(const char *dir)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return tb_error_set(TB_EIO, "path too long: %s", dir);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return tb_error_set(TB_EIO, "cannot create %s: %s", buf, strerror(errno));
        *p = saved;
        if (!saved) break;
    }
    return TB_OK;
}

/* A file-name-safe copy of s. */
static void safe_name(char *dst, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++) {
        char ch = *s;
        dst[k++] = (('a' <= ch && ch <= 'z') || ('A' <= ch && ch <= 'Z') || ('0' <= ch && ch <= '9') || ch == '-' || ch == '.')
                       ? ch
                       : '_';
    }
    dst[k] = '\0';
}

void report_gp_quote(char *dst, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 2 < n; s++) {
        if (*s == '\'') dst[k++] = '\'';
        dst[k++] = *s;
    }
    dst[k] = '\0';
}

/* A label for a data file: double-quoted, without tabs, newlines or quotes. */
static void dat_label(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) fputc((*s == '"' || *s == '\t' || *s == '\n') ? ' ' : *s, f);
    fputc('"', f);
}

/* s's characters (UTF-8 code points) in its first len bytes. */
static int utf8_chars(const char *s, size_t len)
{
    int n = 0;
    for (size_t k = 0; k < len; k++) n += ((unsigned char)s[k] & 0xc0) != 0x80;
    return n;
}

/* A bar's tick label, wrapped at spaces into lines of about width characters (a longer word stands alone), at
 * most max_lines lines and the last cut with "…" where more is left: every option of a configuration on one
 * line ran off the chart and shrank its plot area (the table under the chart has them all). The lines are
 * joined by gnuplot's \n escape, which it reads in a quoted data-file string. */
static void wrap_label(const char *s, int width, int max_lines, char *out, size_t n)
{
    size_t o = 0;
    int lines = 1, col = 0;
    out[0] = '\0';
    while (*s == ' ') s++;
    while (*s) {
        const size_t len = strcspn(s, " ");
        const int chars = utf8_chars(s, len);
        const int wrap = col > 0 && col + 1 + chars > width;
        /* The separator, the word and room for a closing " …" (4 bytes) and the NUL, or the label stops here. */
        if (o + 2 + len + 5 > n || (wrap && lines == max_lines)) {
            if (o + 5 <= n) memcpy(out + o, " …", 5), o += 4;
            break;
        }
        if (wrap) out[o++] = '\\', out[o++] = 'n', lines++, col = 0;
        else if (col > 0) out[o++] = ' ', col++;
        memcpy(out + o, s, len), o += len, out[o] = '\0';
        col += chars;
        s += len;
        while (*s == ' ') s++;
    }
}

struct ctx {
    const struct report_opts *o;
    struct rows rows;
    char charts_dir[1024], data_dir[1024];
    int have_gnuplot;
    char no_gnuplot[1200];      /* why there is none: "gnuplot not found", or what is wrong with --gnuplot */
    int gnuplot_failed;
    int n_charts;
    struct calibration cal;
    int have_cal;
    char cal_source[600];
    struct report_gpu gpu;      /* the GPU of the rows on the cuda device, and its ceilings */
    FILE *md;
    char unwritten[1400];       /* the first chart table that could not be written, and why ("" = none) */
};

/* v if finite and within an int's range, else 0: a figure from a row that printf and gnuplot can take. */
static double finite_or_0(double v)
{
    return isfinite(v) && fabs(v) < 1e9 ? v : 0.0;
}

/* A tab and v in a chart's data file, or "-" (no number to gnuplot) for a column the chart does not draw:
 * the data files carry no nan or inf. */
static void dat_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "\t%.6g", v);
    else fputs("\t-", f);
}

/* Where a chart has no point to draw: said, instead of a chart gnuplot would fail on. */
static void md_no_chart(struct ctx *x, const char *name, const char *what)
{
    fprintf(x->md, "_(chart %s not drawn: no row has a finite %s)_\n\n", name, what);
}

static int file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int)(sb.st_size > 0x7fffffff ? 0x7fffffff : sb.st_size) : -1;
}

/* Runs gnuplot on plots/<script> with the data file and variables; returns 1 if both files exist. */
static int render(struct ctx *x, const char *script, const char *name, const char *data, const char *title,
                  const char *sub, const char *extra_vars)
{
    if (!x->have_gnuplot) return 0;
    char png[1200], svg[1200], spath[1200], q[4][1200];
    snprintf(png, sizeof png, "%s/%s.png", x->charts_dir, name);
    snprintf(svg, sizeof svg, "%s/%s.svg", x->charts_dir, name);
    snprintf(spath, sizeof spath, "%s/%s", x->o->plots_dir, script);
    remove(png);
    remove(svg);
    report_gp_quote(q[0], sizeof q[0], x->o->plots_dir);
    report_gp_quote(q[1], sizeof q[1], data);
    report_gp_quote(q[2], sizeof q[2], title);
    report_gp_quote(q[3], sizeof q[3], sub);
    char qp[1200], qs[1200];
    report_gp_quote(qp, sizeof qp, png);
    report_gp_quote(qs, sizeof qs, svg);
    /* Allocated: extra_vars grows with the chart (the tta chart's two words per curve). */
    char *vars = NULL;
    if (asprintf(&vars, "dir='%s'; datafile='%s'; outpng='%s'; outsvg='%s'; ttl='%s'; sub='%s'; %s", q[0], q[1], qp, qs,
                 q[2], q[3], extra_vars ? extra_vars : "") < 0) {
        fprintf(stderr, "bench report: out of memory for the chart %s\n", name);
        x->gnuplot_failed++;
        return 0;
    }
    char log[1200];
    snprintf(log, sizeof log, "%s/gnuplot.log", x->data_dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    const char *gp = x->o->gnuplot ? x->o->gnuplot : "gnuplot";
    char *argv[] = {(char *)gp, "-e", vars, spath, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, gp, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(vars);
    if (rc != 0) {
        x->have_gnuplot = 0;
        if (x->o->gnuplot)
            snprintf(x->no_gnuplot, sizeof x->no_gnuplot, "--gnuplot %s: %s (%s)", x->o->gnuplot,
                     strchr(x->o->gnuplot, '/') ? "cannot be run" : "not found on PATH", strerror(rc));
        return 0;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && file_size(png) > 0 && file_size(svg) > 0;
    if (!ok) {
        fprintf(stderr, "bench report: gnuplot failed on %s for %s (see %s)\n", script, name, log);
        x->gnuplot_failed++;
        return 0;
    }
    x->n_charts++;
    return 1;
}

/* TB_OK if path is missing or a regular file. A device or FIFO in the report's place must not be touched:
 * REPORT.md is renamed into place (which would replace /dev/null with a regular file), a chart's data is
 * opened for writing (a FIFO without a reader blocks forever), gnuplot's old outputs are removed. */
static int check_output(const char *path)
{
    const char *why = regular_target_why(path);
    return why ? tb_error_set(TB_EIO, "%s: %s", path, why) : TB_OK;
}

/* Whether a file name has an extension of the files the report writes and removes in charts/ and
 * charts/data/ (check_outputs, clean_charts). */
static int output_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcmp(dot, ".png") || !strcmp(dot, ".svg") || !strcmp(dot, ".dat") || !strcmp(dot, ".log"));
}

/* Calls fn(path, arg) for every chart, data and log file (by suffix) already in charts/ and charts/data/, until
 * one returns other than TB_OK; returns that status. */
static int each_output(const struct ctx *x, int (*fn)(const char *path, void *arg), void *arg)
{
    const char *dirs[2] = {x->charts_dir, x->data_dir};
    int st = TB_OK;
    for (int d = 0; d < 2 && st == TB_OK; d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        struct dirent *e;
        while (st == TB_OK && (e = readdir(dir))) {
            if (!output_name(e->d_name)) continue;
            char p[1400];
            snprintf(p, sizeof p, "%s/%s", dirs[d], e->d_name);
            st = fn(p, arg);
        }
        closedir(dir);
    }
    return st;
}

static int check_output_cb(const char *path, void *arg)
{
    (void)arg;
    return check_output(path);
}

/* check_output of REPORT.md and of every output already in charts/ and charts/data/, before anything is
 * written. */
static int check_outputs(const struct ctx *x, const char *md_path)
{
    int st = check_output(md_path);
    return st == TB_OK ? each_output(x, check_output_cb, NULL) : st;
}

/* An input (opt path, its stat) against one of the report's outputs. */
struct input_check {
    const char *opt, *path;
    struct stat in;
};

static int input_is_not(const char *out, void *arg)
{
    const struct input_check *c = arg;
    struct stat sb;
    if (stat(out, &sb) == 0 && sb.st_dev == c->in.st_dev && sb.st_ino == c->in.st_ino)
        return tb_error_set(TB_EINVAL, "%s %s is %s, which the report writes or removes; give another --out-dir or input",
                            c->opt, c->path, out);
    return TB_OK;
}

/* TB_EINVAL when the input file at path (given as option opt) is one the report writes or removes, however
 * it is named (another path, a link; same device and inode, as bench export checks --csv): REPORT.md, its
 * temporary, or a chart, data or log file in charts/ or charts/data/. The report would replace the rows it
 * reads (--in DIR/REPORT.md --out-dir DIR did). A missing input is said where it is read. */
static int check_input(const struct ctx *x, const char *opt, const char *path, const char *md_path, const char *md_tmp)
{
    struct input_check c = {.opt = opt, .path = path};
    if (!path || stat(path, &c.in) != 0) return TB_OK;
    int st = input_is_not(md_path, &c);
    if (st == TB_OK) st = input_is_not(md_tmp, &c);
    return st == TB_OK ? each_output(x, input_is_not, &c) : st;
}

/* Removes the charts and data files an earlier report left in charts/ (only names this file writes),
 * so a chart whose rows are gone does not linger beside the new ones. */
static void clean_charts(const struct ctx *x)
{
    /* seed001_: its measured-stage chart is drawn only where the rows hold such a run; left from an earlier report,
     * it showed a run the rows no longer have. */
    static const char *const prefixes[] = {"throughput_", "tta_", "scaling_", "layers_", "roofline", "timeline_", "seeds_",
                                            "seed001_", "gnuplot.log"};
    const char *dirs[2] = {x->charts_dir, x->data_dir};
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (!output_name(e->d_name)) continue;
            for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++)
                if (!strncmp(e->d_name, prefixes[k], strlen(prefixes[k]))) {
                    char p[1400];
                    snprintf(p, sizeof p, "%s/%s", dirs[d], e->d_name);
                    remove(p);
                    break;
                }
        }
        closedir(dir);
    }
}

/* The machine and commit(s) of the given rows, for a chart's subtitle. */
static void subtitle(const struct ctx *x, const int *idx, int n, char *buf, size_t size)
{
    if (n == 0) {
        snprintf(buf, size, "no rows");
        return;
    }
    const struct json_value *last = x->rows.v[idx[n - 1]];
    char commits[200] = "";
    int n_commits = 0;
    /* Distinct commits, newest first, through an index: a chart of thousands of rows compared each with all. */
    struct report_index seen;
    report_index_init(&seen);
    for (int i = n - 1; i >= 0; i--) {
        const char *c = json_get_str(x->rows.v[idx[i]], "build.commit", "unknown");
        int id, added;
        if (report_index_add(&seen, c, &id, &added) != TB_OK) {
            tb_error_clear(); /* out of memory: the commits counted so far */
            break;
        }
        if (!added) continue;
        if (n_commits++ < 2) snprintf(commits + strlen(commits), sizeof commits - strlen(commits), "%s%s", n_commits > 1 ? ", " : "", c);
    }
    report_index_free(&seen);
    char more[32] = "";
    if (n_commits > 2) snprintf(more, sizeof more, " (+%d more)", n_commits - 2);
    snprintf(buf, size, "%s, %s cores, %s · commit %s%s · %.10s", json_get_str(last, "machine.cpu_model", "unknown CPU"),
             cellf(json_get_number(last, "machine.n_cores", 0), "%g").s, json_get_str(last, "build.blas_core", "?"), commits,
             more, json_get_str(last, "timestamp", ""));
}

static void md_chart(struct ctx *x, const char *name, const char *alt, int rendered)
{
    if (rendered)
        fprintf(x->md, "![%s](charts/%s.png)\n\n[SVG](charts/%s.svg) · data: `charts/data/%s.dat`\n\n", alt, name, name, name);
    else
        fprintf(x->md, "_(chart %s not rendered: %s)_\n\n", name,
                x->have_gnuplot ? "gnuplot failed, see charts/data/gnuplot.log" : x->no_gnuplot);
}

/* A chart's table, opened for writing; NULL where it cannot be, the first such file and why kept (the report
 * then exits 1 and says so: the section's table and chart are missing from REPORT.md). */
static FILE *dat_open(struct ctx *x, const char *path)
{
    return report_data_open(path, x->unwritten, sizeof x->unwritten);
}

FILE *report_data_open(const char *path, char *unwritten, size_t un)
{
    FILE *f = fopen(path, "w");
    if (!f && unwritten && un && !unwritten[0]) snprintf(unwritten, un, "%s: %s", path, strerror(errno));
    return f;
}

int report_data_close(FILE *f, const char *path, char *unwritten, size_t un)
{
    const int err = tb_fclose_errno(f);
    if (err && unwritten && un && !unwritten[0]) snprintf(unwritten, un, "%s: %s", path, strerror(err));
    return err ? TB_EIO : TB_OK;
}

/* Closes a chart's table; a write that failed (a full disk) makes the report incomplete, as an open that failed. */
static void dat_close(struct ctx *x, FILE *f, const char *path)
{
    report_data_close(f, path, x->unwritten, sizeof x->unwritten);
}

FILE *report_open_data(void *report, const char *path)
{
    return dat_open(report, path);
}

void report_mark_unwritten(void *report, const char *what)
{
    struct ctx *x = report;
    if (!x->unwritten[0]) snprintf(x->unwritten, sizeof x->unwritten, "%s", what);
}

void report_close_data(void *report, FILE *f, const char *path)
{
    dat_close(report, f, path);
}

/* The renderer and chart links for the sections in other files (report_seeds.h). */
int report_render_chart(void *report, const char *script, const char *name, const char *data, const char *title,
                        const char *sub, const char *extra_vars)
{
    return render(report, script, name, data, title, sub, extra_vars);
}

void report_md_chart(void *report, const char *name, const char *alt, int rendered)
{
    md_chart(report, name, alt, rendered);
}

/* The distinct workloads of rows of a kind (kept rows only), in order of appearance. */
static int workloads_of(const struct ctx *x, const char *kind, const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < x->rows.n; i++) {
        if (!x->rows.keep[i] || strcmp(kind_of(x->rows.v[i]), kind)) continue;
        const char *w = cs(x->rows.v[i], "workload");
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= !strcmp(out[k], w);
        if (!seen && n < max) out[n++] = w;
    }
    return n;
}

/* The per-step median against the headline (timed samples ÷ timed seconds): a note when they differ by more
 * than 20 %, else "". */
static void rate_note(const struct json_value *r, char *buf, size_t n)
{
    const double overall = fg(r, "images_per_s"), median = fg(r, "images_per_s_median");
    buf[0] = '\0';
    if (!(overall > 0.0) || !(median > 0.0) || fabs(median / overall - 1.0) <= 0.20) return;
    snprintf(buf, n, "per-step median %+.0f %% from images/s: uneven steps", 100.0 * (median / overall - 1.0));
}

/* One warning for the rows shown whose ceiling share exceeds 100 %: no run computes faster than the peak it
 * is a share of, so that peak was measured low (a busy machine) or is not the one the run had. */
static void warn_shares_above_peak(const struct ctx *x)
{
    int n = 0;
    const char *first = NULL;
    double first_share = 0.0;
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *r = x->rows.v[i];
        if (!x->rows.keep[i]) continue;
        const double share = report_gpu_row(r) ? report_gpu_share(&x->gpu, r) : row_sgemm_share(r);
        if (!(isfinite(share) && share > 1.0)) continue;
        if (!n++) first = json_get_str(r, "run_id", "?"), first_share = share;
    }
    if (n)
        fprintf(stderr, "bench report: warning: %d row%s above 100 %% of the calibrated peak %s share%s taken of "
                        "(run %s: %.0f %%): that peak was measured on a busy machine or is not the run's; calibrate "
                        "again on a quiet machine (bench --calibrate)\n", n, n == 1 ? "" : "s",
                n == 1 ? "its" : "their", n == 1 ? " is" : "s are", first, 100.0 * first_share);
}

/* ------------------------------------------------------------------------------------------------
 * Sections. */

static void section_throughput(struct ctx *x)
{
    const char *wl[64];
    int nw = workloads_of(x, "throughput", wl, 64);
    fprintf(x->md, "## Training throughput\n\n");
    if (nw == 0) {
        fprintf(x->md, "No throughput rows (`bench --plan throughput`).\n\n");
        return;
    }
    fprintf(x->md, "Images per second over the timed steps after the warm-up (`--plan throughput`, synthetic data "
                   "unless stated). The headline, the bar and every ranking is **images/s = timed samples ÷ timed "
                   "seconds** over all repeats; the error bar spans the slowest and fastest repeat. The per-step "
                   "*median* and *jitter* (1.4826·MAD of per-step rates) describe the steps' spread; where the median "
                   "differs from the headline by more than 20 %% the row says so, since then the steps are uneven and "
                   "the median (which ignores slow steps) is not what the run achieved. GFLOP/s counts the model's "
                   "training FLOPs; the ceiling share is of the calibrated sgemm ceiling of the row's own machine, and "
                   "for a row on the cuda device of its GPU's fp32 cuBLAS ceiling (TF32 off).\n\n");
    for (int k = 0; k < nw; k++) {
        int idx[512], n = 0, bars = 0;
        char name[160], safe[128], path[1200], title[256], sub[400];
        safe_name(safe, sizeof safe, wl[k]);
        snprintf(name, sizeof name, "throughput_%s", safe);
        snprintf(path, sizeof path, "%s/%s.dat", x->data_dir, name);
        FILE *f = dat_open(x, path);
        if (!f) continue;
        fprintf(f, "# label\timages/s (timed samples / timed s)\tslowest repeat\tfastest repeat\tper-step median"
                   "\tjitter\tlabel wrapped for the chart\n");
        /* Each bar's tick label gets its share of the plot's width: about 800 px over the bars and a slot's
         * margin, at 7 px a character and a gap between neighbours. Where that is under 10 characters (10 bars
         * or more) the labels stand upright instead, one line of at most 24 characters. tick_lines: the most
         * lines a label took. */
        int n_bars = 0, tick_lines = 1;
        for (int i = 0; i < x->rows.n; i++)
            n_bars += x->rows.keep[i] && !strcmp(kind_of(x->rows.v[i]), "throughput") &&
                      !strcmp(cs(x->rows.v[i], "workload"), wl[k]) && isfinite(fg(x->rows.v[i], "images_per_s"));
        int width = 100 / (n_bars + 1);
        const int upright = width < 10;
        width = upright ? 24 : width > 40 ? 40 : width;
        for (int i = 0; i < x->rows.n && n < 512; i++) {
            const struct json_value *r = x->rows.v[i];
            if (!x->rows.keep[i] || strcmp(kind_of(r), "throughput") || strcmp(cs(r, "workload"), wl[k])) continue;
            char var[512], label[640];
            variant_label(&x->rows, i, var, sizeof var);
            snprintf(label, sizeof label, "%s b%s%s", cs(r, "backend"), batch_cell(r).s, var);
            idx[n++] = i;
            /* A row without a finite rate has no bar (its table row says "–"). */
            const double overall = fg(r, "images_per_s");
            if (!isfinite(overall)) continue;
            double lo = overall, hi = overall;
            const struct json_value *rep = json_get(r, "figures.repeat_images_per_s");
            for (int q = 0; rep && rep->type == JSON_ARRAY && q < rep->n; q++) {
                const struct json_value *v = &rep->items[q];
                const double rv = v->type == JSON_NUMBER ? report_figure("repeat_images_per_s", v->number) : NAN;
                if (!isfinite(rv)) continue;
                lo = rv < lo ? rv : lo;
                hi = rv > hi ? rv : hi;
            }
            dat_label(f, label);
            fprintf(f, "\t%.6g\t%.6g\t%.6g", overall, lo, hi);
            dat_num(f, fg(r, "images_per_s_median"));
            dat_num(f, fg(r, "images_per_s_jitter"));
            char wrapped[720];
            wrap_label(label, width, upright ? 1 : 3, wrapped, sizeof wrapped);
            int lines = 1;
            for (const char *c = wrapped; (c = strstr(c, "\\n")) != NULL; c += 2) lines++;
            tick_lines = lines > tick_lines ? lines : tick_lines;
            fputc('\t', f);
            dat_label(f, wrapped);
            fprintf(f, "\n");
            bars++;
        }
        dat_close(x, f, path);
        snprintf(title, sizeof title, "Training throughput by backend: %s", wl[k]);
        subtitle(x, idx, n, sub, sizeof sub);
        fprintf(x->md, "### %s\n\n", wl[k]);
        char vars[48];
        snprintf(vars, sizeof vars, "ticklines=%d; upright=%d", tick_lines, upright);
        if (bars) md_chart(x, name, title, render(x, "throughput.gp", name, path, title, sub, vars));
        else md_no_chart(x, name, "images/s");
        int any_gpu = 0; /* a GPU memory column only where a row ran on the GPU */
        for (int j = 0; j < n; j++) any_gpu |= report_gpu_row(x->rows.v[idx[j]]);
        fprintf(x->md, "| backend | batch | options | data | images/s | repeats | per-step median | jitter | "
                       "mean ± s.e. | note | GFLOP/s | ceiling share | peak RSS MiB |%s commit |\n",
                any_gpu ? " GPU peak MiB |" : "");
        fprintf(x->md, "|---|---:|---|---|---:|---|---:|---:|---:|---|---:|---:|---:|%s---|\n", any_gpu ? "---:|" : "");
        for (int j = 0; j < n; j++) {
            const struct json_value *r = x->rows.v[idx[j]];
            char var[512], share[32], reps[256] = "", note[160], gpu_mem[48] = "";
            variant_label(&x->rows, idx[j], var, sizeof var);
            if (report_gpu_row(r)) report_cell(share, sizeof share, 100.0 * report_gpu_share(&x->gpu, r), "%.1f %% of GPU fp32");
            else report_cell(share, sizeof share, 100.0 * row_sgemm_share(r), "%.1f %%");
            if (any_gpu) {
                char mib[32];
                report_cell(mib, sizeof mib, fg(r, "gpu_mem_peak_mib"), "%.0f");
                snprintf(gpu_mem, sizeof gpu_mem, " %s |", mib);
            }
            const struct json_value *rep = json_get(r, "figures.repeat_images_per_s");
            for (int i = 0; rep && rep->type == JSON_ARRAY && i < rep->n && i < 12; i++) {
                const struct json_value *v = &rep->items[i];
                snprintf(reps + strlen(reps), sizeof reps - strlen(reps), "%s%s", i ? ", " : "",
                         cellf(v->type == JSON_NUMBER ? report_figure("repeat_images_per_s", v->number) : NAN, "%.0f").s);
            }
            rate_note(r, note, sizeof note);
            fprintf(x->md, "| %s | %s | %s | %s | **%s** | %s | %s | %s | %s ± %s | %s | %s | %s | %s |%s %s |\n",
                    cs(r, "backend"), batch_cell(r).s, var[0] ? var + 1 : "", cs(r, "dataset"),
                    cellf(fg(r, "images_per_s"), "%.0f").s, reps, cellf(fg(r, "images_per_s_median"), "%.0f").s,
                    cellf(fg(r, "images_per_s_jitter"), "%.0f").s, cellf(fg(r, "images_per_s_mean"), "%.0f").s,
                    cellf(fg(r, "images_per_s_stderr"), "%.0f").s, note, cellf(fg(r, "gflops_per_s"), "%.2f").s, share,
                    cellf(fg(r, "peak_rss_mib"), "%.0f").s, gpu_mem, json_get_str(r, "build.commit", "?"));
        }
        fprintf(x->md, "\n");
    }
}

/* Curves drawn per row: a row of --seeds 1000 would bury the chart under its key. */
#define TTA_MAX_CURVES 20

/* The time-to-accuracy chart and table of one workload and target. */
static void tta_chart(struct ctx *x, const char *wl, double target, int several)
{
    int idx[256] = {0}, n = 0, blocks = 0, capped = 0;
    char name[200], safe[128], path[1300], title[256], sub[400];
    /* One colour per configuration (row), one dash pattern per seed within it: a word of each per curve,
     * which grow with the curves (gnuplot met empty words when fixed buffers filled). */
    char *colours = NULL, *dashes = NULL, *vars = NULL;
    size_t colours_len = 0, dashes_len = 0;
    safe_name(safe, sizeof safe, wl);
    if (several) snprintf(name, sizeof name, "tta_%s_t%.4g", safe, target);
    else snprintf(name, sizeof name, "tta_%s", safe);
    snprintf(path, sizeof path, "%s/%s.dat", x->data_dir, name);
    FILE *cw = open_memstream(&colours, &colours_len), *dw = open_memstream(&dashes, &dashes_len);
    FILE *f = cw && dw ? dat_open(x, path) : NULL;
    if (!f) {
        if (cw) fclose(cw);
        if (dw) fclose(dw);
        free(colours), free(dashes);
        return;
    }
    for (int i = 0; i < x->rows.n && n < 256; i++) {
        const struct json_value *r = x->rows.v[i];
        if (!x->rows.keep[i] || strcmp(kind_of(r), "tta") || strcmp(cs(r, "workload"), wl) || cn(r, "target") != target)
            continue;
        idx[n++] = i;
        const struct json_value *runs = json_get(r, "figures.runs");
        for (int s = 0, drawn = 0; runs && runs->type == JSON_ARRAY && s < runs->n; s++) {
            const struct json_value *curve = json_get(&runs->items[s], "curve");
            int points = 0; /* only finite points are drawn; a curve without one is no block */
            for (int p = 0; curve && curve->type == JSON_ARRAY && p < curve->n; p++)
                points += isfinite(fg_in(&curve->items[p], "time_s")) && isfinite(fg_in(&curve->items[p], "accuracy"));
            if (!points) continue;
            if (drawn++ == TTA_MAX_CURVES) capped = 1;
            if (drawn > TTA_MAX_CURVES) continue;
            char label[720], var[512];
            variant_label(&x->rows, i, var, sizeof var);
            snprintf(label, sizeof label, "%s b%s%s seed %s", cs(r, "backend"), batch_cell(r).s, var,
                     cellf(json_get_number(&runs->items[s], "seed", NAN), "%.0f").s);
            if (blocks++) fprintf(f, "\n\n");
            dat_label(f, label);
            fprintf(f, "\n");
            fprintf(cw, "%d ", (n - 1) % 8 + 1);
            fprintf(dw, "%d ", s % 5 + 1);
            for (int p = 0; p < curve->n; p++) {
                const double t = fg_in(&curve->items[p], "time_s"), a = fg_in(&curve->items[p], "accuracy");
                if (isfinite(t) && isfinite(a)) fprintf(f, "%.6g\t%.6g\n", t, a);
            }
        }
    }
    dat_close(x, f, path);
    const int words_ok = fclose(cw) == 0 && fclose(dw) == 0;
    snprintf(title, sizeof title, "Time to accuracy: %s, target %.4g (test accuracy against wall time)", wl, target);
    subtitle(x, idx, n, sub, sizeof sub);
    if (!words_ok || asprintf(&vars, "nblocks=%d; target=%.6g; colours='%s'; dashes='%s'", blocks, target, colours, dashes) < 0)
        vars = NULL;
    md_chart(x, name, title, blocks > 0 && vars && render(x, "tta.gp", name, path, title, sub, vars));
    free(vars), free(colours), free(dashes);
    if (capped)
        fprintf(x->md, "The chart draws the curves of the first %d seeds of a row; the score and the counts below are "
                       "of all of them.\n\n", TTA_MAX_CURVES);
    /* The training rate beside the score: time to accuracy pays the overall rate, which a long step tail
     * drags down however fast the median step is (a 2-thread pool on a shared 2-core machine). */
    fprintf(x->md, "| backend | batch | target | score (olympic mean, s) | reached | training images/s (overall) | "
                   "step median ms (fastest–slowest run) | step p99 ms (slowest run) | runs: seed → time to target s "
                   "(of it evaluation s), epochs | commit |\n"
                   "|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
    int uneven = 0;
    for (int j = 0; j < n; j++) {
        const struct json_value *r = x->rows.v[idx[j]];
        char runs_txt[1024] = "", score[32], rate[32], p99[32], med[160] = "–";
        const struct json_value *runs = json_get(r, "figures.runs");
        double p99_max = NAN, med_lo = NAN, med_hi = NAN;
        for (int s = 0; runs && runs->type == JSON_ARRAY && s < runs->n; s++) {
            const double v = fg_in(&runs->items[s], "step_time_p99_s");
            if (isfinite(v) && !(v <= p99_max)) p99_max = v;
            const double m = fg_in(&runs->items[s], "step_time_median_s");
            if (isfinite(m) && !(m <= med_hi)) med_hi = m;
            if (isfinite(m) && !(m >= med_lo)) med_lo = m;
        }
        if (isfinite(med_lo)) {
            /* Seeds of one configuration whose typical step differs by more than 1.8×: the machine, not the
             * configuration, changed between them (BENCHMARKS.md: a 2-vCPU guest's threads fell into 2.6×
             * slower steps for whole seeds); said beside the row and under the table. */
            const int bi = med_hi > 1.8 * med_lo;
            uneven |= bi;
            snprintf(med, sizeof med, "%s–%s%s", cellf(1e3 * med_lo, "%.3f").s, cellf(1e3 * med_hi, "%.3f").s,
                     bi ? " (uneven)" : "");
        }
        report_cell(rate, sizeof rate, fg(r, "images_per_s"), "%.0f");
        report_cell(p99, sizeof p99, 1e3 * p99_max, "%.2f");
        for (int s = 0; runs && runs->type == JSON_ARRAY && s < runs->n && s < 10; s++) {
            const struct json_value *ru = &runs->items[s];
            size_t len = strlen(runs_txt);
            const struct cell seed = cellf(json_get_number(ru, "seed", NAN), "%.0f");
            if (json_get_bool(ru, "reached", 0))
                snprintf(runs_txt + len, sizeof runs_txt - len, "%s%s → %s (%s), %s", s ? "; " : "", seed.s,
                         cellf(fg_in(ru, "tta_s"), "%.2f").s, cellf(fg_in(ru, "eval_time_s"), "%.2f").s,
                         cellf(fg_in(ru, "epochs"), "%.2f").s);
            else
                snprintf(runs_txt + len, sizeof runs_txt - len, "%s%s → missed (best %s in %s epochs)", s ? "; " : "",
                         seed.s, cellf(fg_in(ru, "best_accuracy"), "%.4f").s, cellf(fg_in(ru, "epochs"), "%.1f").s);
        }
        report_cell(score, sizeof score, fg(r, "tta_olympic_mean_s"), "%.2f");
        fprintf(x->md, "| %s | %s | %s | %s | %s of %s | %s | %s | %s | %s | %s |\n", cs(r, "backend"),
                batch_cell(r).s, cellf(cn(r, "target"), "%.4g").s, score, cellf(fg(r, "runs_reached"), "%.0f").s,
                cellf(fg(r, "runs_total"), "%.0f").s, rate, med, p99, runs_txt, json_get_str(r, "build.commit", "?"));
    }
    fprintf(x->md, "\n");
    if (uneven)
        fprintf(x->md, "*Uneven*: the runs (seeds) of a row marked so differ by more than 1.8× in median step time, "
                       "although each seed does the same work: something outside the configuration changed "
                       "between them, and the score carries it. On the 2-vCPU guests these results come from, multi-threaded backends fall into "
                       "a mode where every step is ~2.6× slower for a whole seed (both threads busy, every kernel "
                       "slower alike, no steal time reported), while one thread never does; compare such rows by "
                       "their fastest seeds or rerun them (BENCHMARKS.md, fifteenth session).\n\n");
}

static void section_tta(struct ctx *x)
{
    const char *wl[64];
    int nw = workloads_of(x, "tta", wl, 64);
    fprintf(x->md, "## Time to accuracy\n\n");
    if (nw == 0) {
        fprintf(x->md, "No time-to-accuracy rows (`bench --plan tta`).\n\n");
        return;
    }
    fprintf(x->md, "Wall time from the first training step to the end of the evaluation that first reaches the target "
                   "test accuracy, evaluations included (also shown on their own), as MLPerf times it. The score of "
                   "several seeds is the olympic mean (fastest and slowest dropped); a run that misses the target "
                   "within `--max-epochs` counts as infinitely slow. MLPerf-style event logs: `mllog/<run id>*.log`.\n\n");
    for (int k = 0; k < nw; k++) {
        /* One chart per target: curves against different targets do not share a finish line. */
        double targets[16];
        int nt = 0;
        for (int i = 0; i < x->rows.n; i++) {
            const struct json_value *r = x->rows.v[i];
            if (!x->rows.keep[i] || strcmp(kind_of(r), "tta") || strcmp(cs(r, "workload"), wl[k])) continue;
            int seen = 0;
            for (int t = 0; t < nt; t++) seen |= targets[t] == cn(r, "target");
            if (!seen && nt < 16) targets[nt++] = cn(r, "target");
        }
        fprintf(x->md, "### %s\n\n", wl[k]);
        for (int t = 0; t < nt; t++) tta_chart(x, wl[k], targets[t], nt > 1);
    }
}

/* The config fields a grid sweep sets per point: --replicas-list (replicas; devices where the replicas are
 * devices, mirrored), --micro-batch-list, --ga-list. Listed in the order lines and columns show them; a line
 * along one of them (see sweep_lines) is chosen from the last: ga first. */
static const char *const grid_dims[] = {"devices", "replicas", "micro_batch", "ga"};
enum { N_GRID_DIMS = sizeof grid_dims / sizeof *grid_dims };

/* How a sweep's points are ordered and joined: by the grid dimensions in by[] (the line's key), then batch. */
struct sweep_order {
    const struct rows *rows;
    int by[N_GRID_DIMS];
};

static int cmp_sweep_point(const void *a, const void *b, void *ctx)
{
    const struct sweep_order *o = ctx;
    const struct json_value *p = o->rows->v[*(const int *)a], *q = o->rows->v[*(const int *)b];
    for (int d = 0; d < N_GRID_DIMS; d++) {
        const double u = cn(p, grid_dims[d]), v = cn(q, grid_dims[d]);
        if (o->by[d] && u != v) return (u > v) - (u < v);
    }
    const double u = cn(p, "batch"), v = cn(q, "batch");
    return (u > v) - (u < v);
}

/* Groups the points idx[0..n) by the grid dimensions in by[]: grp[j] is point j's group. Returns the number
 * of groups; *shared = 1 when two points of one group have the same global batch (a line through them
 * would run vertically). */
static int group_points(const struct rows *rs, const int *idx, int n, const int *by, int *grp, int *shared)
{
    char keys[MAX_POINTS][200];
    int ng = 0;
    *shared = 0;
    for (int j = 0; j < n; j++) {
        char key[200] = "", v[40];
        for (int d = 0; d < N_GRID_DIMS; d++) {
            if (!by[d]) continue;
            field_text(rs->v[idx[j]], grid_dims[d], v, sizeof v);
            snprintf(key + strlen(key), sizeof key - strlen(key), "|%s", v);
        }
        int g = 0;
        while (g < ng && strcmp(keys[g], key)) g++;
        if (g == ng) snprintf(keys[ng++], sizeof keys[0], "%s", key);
        grp[j] = g;
        for (int i = 0; i < j; i++) *shared |= grp[i] == g && cn(rs->v[idx[i]], "batch") == cn(rs->v[idx[j]], "batch");
    }
    return ng;
}

/* Which lines a sweep's points make. varied[d]: grid dimension d differs between its points. A line joins
 * the points that share every varied dimension (one line per devices value of a batch × devices grid), so
 * only the global batch changes along it; *along = -1. Where that leaves every point alone because the
 * global batch is itself micro-batch × ga × replicas (an ipu grid of --ga-list and --micro-batch-list),
 * a line instead runs along one varied dimension (ga, else micro-batch, else replicas) through points of
 * distinct batches, and *along names it. Sorts idx by line, then batch; returns the number of lines. */
static int sweep_lines(const struct rows *rs, int *idx, int n, int *varied, int *along, int *grp)
{
    struct sweep_order o = {.rows = rs};
    int n_varied = 0, shared;
    for (int d = 0; d < N_GRID_DIMS; d++) {
        char v0[40], v[40];
        field_text(rs->v[idx[0]], grid_dims[d], v0, sizeof v0);
        varied[d] = 0;
        for (int j = 1; j < n && !varied[d]; j++) {
            field_text(rs->v[idx[j]], grid_dims[d], v, sizeof v);
            varied[d] = strcmp(v, v0) != 0;
        }
        o.by[d] = varied[d], n_varied += varied[d];
    }
    *along = -1;
    if (n_varied && n > 1 && group_points(rs, idx, n, o.by, grp, &shared) == n)
        for (int d = N_GRID_DIMS - 1; d >= 0 && *along < 0; d--) {
            if (!varied[d]) continue;
            o.by[d] = 0;
            if (group_points(rs, idx, n, o.by, grp, &shared) < n && !shared) *along = d;
            else o.by[d] = 1;
        }
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_sweep_point, &o);
    return group_points(rs, idx, n, o.by, grp, &shared);
}

/* A scaling point's rate, the one its speed-up divides: a trained point's timed steps (warm-up excluded), as
 * plan_train.c's point_rate; a throughput point's measured rate. */
static double scaling_ips(const struct json_value *r)
{
    const double timed = fg(r, "timed_images_per_s");
    return cn(r, "epochs") > 0 && isfinite(timed) ? timed : fg(r, "images_per_s");
}

/* A trained point no longer than its --warmup: its rate times every step, the cold first ones too. */
static int scaling_with_warmup(const struct json_value *r)
{
    return cn(r, "epochs") > 0 && cn(r, "warmup") > 0 && fg(r, "warmup_steps") == 0.0;
}

/* Whether a scaling row is a point of its chart: see section_scaling. */
static int scaling_point(const struct json_value *r)
{
    return cn(r, "batch") >= 1 && cn(r, "batch") < 1e9 && isfinite(fg(r, "images_per_s")) && isfinite(fg(r, "speedup"));
}

/* The values of grid dimension d over the points idx[0..n) (sorted as sweep_lines left them), distinct, in
 * increasing order, separated by sep: "1, 2". */
static void dim_values(const struct rows *rs, const int *idx, int n, int d, const char *sep, char *buf, size_t size)
{
    double vals[MAX_POINTS];
    int nv = 0;
    for (int j = 0; j < n; j++) {
        const double v = cn(rs->v[idx[j]], grid_dims[d]);
        int k = 0;
        while (k < nv && vals[k] != v) k++;
        if (k == nv) vals[nv++] = v;
    }
    for (int i = 1; i < nv; i++) /* a handful of values: insertion sort */
        for (int k = i; k > 0 && vals[k - 1] > vals[k]; k--) {
            const double t = vals[k];
            vals[k] = vals[k - 1], vals[k - 1] = t;
        }
    buf[0] = '\0';
    for (int k = 0; k < nv; k++) snprintf(buf + strlen(buf), size - strlen(buf), "%s%g", k ? sep : "", vals[k]);
}

static void section_scaling(struct ctx *x)
{
    const char *wl[64];
    int nw = workloads_of(x, "scaling", wl, 64);
    fprintf(x->md, "## Batch-size scaling\n\n");
    if (nw == 0) {
        fprintf(x->md, "No scaling rows (`bench --plan scaling --batches 16,32,64,128,256`).\n\n");
        return;
    }
    fprintf(x->md, "One sweep per backend (the latest). *Speed-up* is images/s relative to the sweep's base (first) "
                   "point. Where the sweep changes the number of replicas, *scaling efficiency* is the speed-up per "
                   "replica added (images/s per replica relative to the base): 100 %% means each replica processes "
                   "samples as fast as at the base. "
                   "Peak RSS is the run's high-water mark (VmHWM, reset per point when the kernel allows).\n\n");
    for (int k = 0; k < nw; k++) {
        /* The sweeps of this workload, in order. */
        const char *sweeps[64];
        int ns = 0;
        int all_idx[1024], n_all = 0;
        for (int i = 0; i < x->rows.n; i++) {
            const struct json_value *r = x->rows.v[i];
            if (!x->rows.keep[i] || strcmp(kind_of(r), "scaling") || strcmp(cs(r, "workload"), wl[k])) continue;
            const char *sw = json_get_str(r, "sweep", "");
            int seen = 0;
            for (int s = 0; s < ns; s++) seen |= !strcmp(sweeps[s], sw);
            if (!seen && ns < 64) sweeps[ns++] = sw;
            if (n_all < 1024) all_idx[n_all++] = i;
        }
        char name[160], safe[128], path[1200], title[256], sub[400], vars[64];
        safe_name(safe, sizeof safe, wl[k]);
        snprintf(name, sizeof name, "scaling_%s", safe);
        snprintf(path, sizeof path, "%s/%s.dat", x->data_dir, name);
        FILE *f = dat_open(x, path);
        if (!f) continue;
        fprintf(x->md, "### %s\n\n", wl[k]);
        int blocks = 0;
        char tables[1 << 15] = "";
        for (int s = 0; s < ns; s++) {
            int idx[MAX_POINTS], n = 0, grp[MAX_POINTS], varied[N_GRID_DIMS], along;
            for (int j = 0; j < n_all && n < MAX_POINTS; j++)
                if (!strcmp(json_get_str(x->rows.v[all_idx[j]], "sweep", ""), sweeps[s])) idx[n++] = all_idx[j];
            const int n_lines = sweep_lines(&x->rows, idx, n, varied, &along, grp);
            int grid = 0;
            for (int d = 0; d < N_GRID_DIMS; d++) grid |= varied[d];
            const struct json_value *r0 = x->rows.v[idx[0]];
            /* A grid's label leaves its dimensions to the lines and the heading: its first point's values
             * would misname the others. The dimensions it holds fixed are said once. */
            char var[512], label[640], dims[256] = "", fixed[128] = "";
            variant_label_skip(&x->rows, idx[0], grid_dims, grid ? N_GRID_DIMS : 0, var, sizeof var);
            for (int d = 0; grid && d < N_GRID_DIMS; d++) {
                char v[40];
                field_text(r0, grid_dims[d], v, sizeof v);
                if (!varied[d] && v[0] && strcmp(v, "0"))
                    snprintf(fixed + strlen(fixed), sizeof fixed - strlen(fixed), " %s=%s", grid_dims[d], v);
                if (!varied[d]) continue;
                char vals[160];
                dim_values(&x->rows, idx, n, d, ", ", vals, sizeof vals);
                snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%s %s", dims[0] ? " × " : "", grid_dims[d],
                         vals);
            }
            const int trained = cn(r0, "epochs") > 0;
            snprintf(label, sizeof label, "%s%s%s", cs(r0, "backend"), var, fixed);
            /* One block per line: points with a batch (the axis is logarithmic), a finite rate and speed-up
             * are drawn; a line without one is no block. */
            for (int g = 0; g < n_lines; g++) {
                int points = 0, first = -1;
                for (int j = 0; j < n; j++)
                    if (grp[j] == g && scaling_point(x->rows.v[idx[j]])) points++, first = first < 0 ? j : first;
                if (!points) continue;
                char line[900];
                snprintf(line, sizeof line, "%s", label);
                for (int d = 0; d < N_GRID_DIMS; d++) {
                    char v[40];
                    field_text(x->rows.v[idx[first]], grid_dims[d], v, sizeof v);
                    if (varied[d] && d != along)
                        snprintf(line + strlen(line), sizeof line - strlen(line), " %s=%s", grid_dims[d], v);
                }
                if (along >= 0) {
                    int members[MAX_POINTS], m = 0;
                    for (int j = 0; j < n; j++)
                        if (grp[j] == g && scaling_point(x->rows.v[idx[j]])) members[m++] = idx[j];
                    char vals[200];
                    dim_values(&x->rows, members, m, along, " → ", vals, sizeof vals);
                    snprintf(line + strlen(line), sizeof line - strlen(line), " (%s %s)", grid_dims[along], vals);
                }
                if (trained) snprintf(line + strlen(line), sizeof line - strlen(line), " (trained)");
                if (blocks++) fprintf(f, "\n\n");
                dat_label(f, line);
                fprintf(f, "\n");
                for (int j = 0; j < n; j++) {
                    const struct json_value *r = x->rows.v[idx[j]];
                    if (grp[j] == g && scaling_point(r))
                        fprintf(f, "%s\t%.6g\t%.6g\n", batch_cell(r).s, scaling_ips(r), fg(r, "speedup"));
                }
            }
            /* Scaling efficiency (speed-up per added replica) only means something where replicas change;
             * with one replica throughout it would just repeat the speed-up under a misleading name. */
            int replicas_vary = 0;
            for (int j = 1; j < n; j++) replicas_vary |= fg(x->rows.v[idx[j]], "replicas") != fg(r0, "replicas");
            char how[200] = "";
            if (grid && along >= 0)
                snprintf(how, sizeof how, "; the global batch is micro-batch × ga × replicas, so a line runs along %s",
                         grid_dims[along]);
            else if (grid) {
                snprintf(how, sizeof how, "; one line per ");
                for (int d = 0, c = 0; d < N_GRID_DIMS; d++)
                    if (varied[d])
                        snprintf(how + strlen(how), sizeof how - strlen(how), "%s%s", c++ ? " × " : "", grid_dims[d]);
            }
            size_t len = strlen(tables);
            snprintf(tables + len, sizeof tables - len, "**%s%s%s%s** (sweep `%s`, %s%s)\n\n| global batch |", label,
                     grid ? ", grid: " : "", dims, trained ? " (trained)" : "", sweeps[s],
                     trained ? "trained, images/s over the timed steps (* over every step: no more than the warm-up)"
                             : "throughput, synthetic data", how);
            for (int d = 0; d < N_GRID_DIMS; d++)
                if (varied[d])
                    snprintf(tables + strlen(tables), sizeof tables - strlen(tables), " %s (grid) |", grid_dims[d]);
            snprintf(tables + strlen(tables), sizeof tables - strlen(tables),
                     " local batch | replicas | accumulation | images/s | speed-up |%s peak RSS MiB | test accuracy "
                     "|\n|---:|", replicas_vary ? " scaling efficiency |" : "");
            for (int d = 0; d < N_GRID_DIMS; d++)
                if (varied[d]) snprintf(tables + strlen(tables), sizeof tables - strlen(tables), "---:|");
            snprintf(tables + strlen(tables), sizeof tables - strlen(tables), "---:|---:|---:|---:|---:|%s---:|---:|\n",
                     replicas_vary ? "---:|" : "");
            for (int j = 0; j < n; j++) {
                const struct json_value *r = x->rows.v[idx[j]];
                char acc[32], eff[80] = "", cols[160] = "";
                report_cell(acc, sizeof acc, 100.0 * fg(r, "test_accuracy"), "%.2f %%");
                if (replicas_vary) snprintf(eff, sizeof eff, " %s |", cellf(100.0 * fg(r, "efficiency"), "%.0f %%").s);
                for (int d = 0; d < N_GRID_DIMS; d++) {
                    char v[40];
                    field_text(r, grid_dims[d], v, sizeof v);
                    if (varied[d]) snprintf(cols + strlen(cols), sizeof cols - strlen(cols), " %s |", v[0] ? v : "–");
                }
                len = strlen(tables);
                snprintf(tables + len, sizeof tables - len, "| %s |%s %s | %s | %s | %s | %s |%s %s | %s |\n",
                         batch_cell(r).s, cols, cellf(fg(r, "local_batch"), "%g").s, cellf(fg(r, "replicas"), "%g").s,
                         cellf(fg(r, "accumulation"), "%g").s,
                         cellf(scaling_ips(r), scaling_with_warmup(r) ? "%.0f*" : "%.0f").s,
                         cellf(fg(r, "speedup"), "%.2f×").s, eff, cellf(fg(r, "peak_rss_mib"), "%.0f").s, acc);
            }
            len = strlen(tables);
            snprintf(tables + len, sizeof tables - len, "\n");
        }
        dat_close(x, f, path);
        snprintf(title, sizeof title, "Batch-size scaling: %s", wl[k]);
        subtitle(x, all_idx, n_all, sub, sizeof sub);
        snprintf(vars, sizeof vars, "nblocks=%d", blocks);
        md_chart(x, name, title, blocks > 0 && render(x, "scaling.gp", name, path, title, sub, vars));
        fputs(tables, x->md);
    }
}

/* Rows run with --project-devices: what the POD-scale model made of their measured stage times (row.c's
 * figures.projection), one line a device count, each said to be PROJECTED; the measured rate and the model at the
 * measured arrangement beside them, so the reader sees how far the model misses. Drawn nowhere else: the
 * throughput table shows those rows' measured rates only. */
static void section_projections(struct ctx *x)
{
    int any = 0;
    for (int i = 0; i < x->rows.n; i++) any |= x->rows.keep[i] && json_get(x->rows.v[i], "figures.projection") != NULL;
    if (!any) return;
    fprintf(x->md, "## Projections (PROJECTED, not measured)\n\n"
                   "Rows run with `--project-devices`: this machine's measured per-stage times scaled to more devices by "
                   "the link model of `harness/projection.c` (pipeline fill, exchange, ring all-reduce), at the run's "
                   "global batch. They project a POD of *these cores*, not of IPUs or any other device; the model leaves "
                   "out the weight update and per-step overhead, and the *model at the measured arrangement* column "
                   "shows how far it misses what the run measured.\n\n"
                   "| workload | backend | batch | options | measured images/s | model at the measured arrangement | "
                   "devices | replicas × GA | PROJECTED images/s | scaling efficiency |\n"
                   "|---|---|---:|---|---:|---|---:|---|---:|---:|\n");
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *r = x->rows.v[i], *pj = json_get(r, "figures.projection");
        if (!x->rows.keep[i] || !pj) continue;
        char var[512], model[160] = "–";
        variant_label(&x->rows, i, var, sizeof var);
        const struct json_value *v = json_get(pj, "validation");
        const double vp = fg_in(v, "images_per_s_projected"), vm = fg_in(v, "images_per_s_measured");
        if (v && isfinite(vp) && isfinite(vm))
            snprintf(model, sizeof model, "%.0f images/s on %s device%s (%+.1f %%)", vp,
                     count_cell(json_get_number(v, "devices", NAN)).s,
                     json_get_number(v, "devices", 0) == 1 ? "" : "s", 100.0 * (vp / vm - 1.0));
        const struct json_value *rows = json_get(pj, "rows");
        const int n = rows && rows->type == JSON_ARRAY ? rows->n : 0;
        for (int k = 0; k < (n ? n : 1); k++) {
            const struct json_value *p = n ? &rows->items[k] : NULL;
            char rg[160] = "–";
            if (p)
                snprintf(rg, sizeof rg, "%s × %s", count_cell(json_get_number(p, "replicas", NAN)).s,
                         count_cell(json_get_number(p, "ga", NAN)).s);
            fprintf(x->md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cs(r, "workload"), cs(r, "backend"),
                    batch_cell(r).s, var[0] ? var + 1 : "", cellf(fg(r, "images_per_s"), "%.0f").s, model,
                    p ? count_cell(json_get_number(p, "devices", NAN)).s : "none fits",
                    rg, p ? cellf(fg_in(p, "images_per_s_projected"), "%.0f").s : "–",
                    p ? cellf(fg_in(p, "scaling_efficiency"), "%.2f").s : "–");
        }
    }
    fprintf(x->md, "\n");
}

static void section_inference(struct ctx *x)
{
    int any = 0;
    for (int i = 0; i < x->rows.n; i++) any |= x->rows.keep[i] && !strcmp(kind_of(x->rows.v[i]), "inference");
    fprintf(x->md, "## Inference\n\n");
    if (!any) {
        fprintf(x->md, "No inference rows (`bench --plan inference`).\n\n");
        return;
    }
    fprintf(x->md, "Forward only: images/s (timed samples ÷ timed seconds) at the batch shown, the per-batch median "
                   "beside it, and the latency of single images at batch 1.\n\n| workload | backend | batch | options | "
                   "weights | images/s | per-batch median | note | latency p50 ms | p90 ms | p99 ms | GFLOP/s | commit |\n"
                   "|---|---|---:|---|---|---:|---:|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *r = x->rows.v[i];
        if (!x->rows.keep[i] || strcmp(kind_of(r), "inference")) continue;
        char var[512];
        variant_label(&x->rows, i, var, sizeof var);
        char note[160];
        rate_note(r, note, sizeof note);
        fprintf(x->md, "| %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s | %s |\n",
                cs(r, "workload"), cs(r, "backend"), batch_cell(r).s, var[0] ? var + 1 : "",
                cs(r, "load")[0] ? cs(r, "load") : "fresh", cellf(fg(r, "images_per_s"), "%.0f").s,
                cellf(fg(r, "images_per_s_median"), "%.0f").s, note, cellf(1e3 * fg(r, "latency_p50_s"), "%.3f").s,
                cellf(1e3 * fg(r, "latency_p90_s"), "%.3f").s, cellf(1e3 * fg(r, "latency_p99_s"), "%.3f").s,
                cellf(fg(r, "gflops_per_s"), "%.2f").s, json_get_str(r, "build.commit", "?"));
    }
    fprintf(x->md, "\n");
}

static void section_train(struct ctx *x)
{
    int any = 0;
    for (int i = 0; i < x->rows.n; i++) any |= x->rows.keep[i] && !strcmp(kind_of(x->rows.v[i]), "train");
    if (!any) return;
    fprintf(x->md, "## Training runs\n\n| workload | backend | batch | options | data | steps | time s | images/s | "
                   "per-step median | note | test accuracy | GFLOP/s | commit |\n"
                   "|---|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|---|\n");
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *r = x->rows.v[i];
        if (!x->rows.keep[i] || strcmp(kind_of(r), "train")) continue;
        char var[512], acc[32];
        variant_label(&x->rows, i, var, sizeof var);
        report_cell(acc, sizeof acc, 100.0 * fg(r, "test_accuracy"), "%.2f %%");
        char note[160];
        rate_note(r, note, sizeof note);
        fprintf(x->md, "| %s | %s | %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s |\n",
                cs(r, "workload"), cs(r, "backend"), batch_cell(r).s, var[0] ? var + 1 : "", cs(r, "dataset"),
                cellf(cn(r, "steps"), "%.0f").s, cellf(fg(r, "train_time_s"), fg(r, "train_time_s") < 1.0 ? "%.3g" : "%.2f").s,
                cellf(fg(r, "images_per_s"), "%.0f").s, cellf(fg(r, "images_per_s_median"), "%.0f").s, note, acc,
                cellf(fg(r, "gflops_per_s"), "%.2f").s, json_get_str(r, "build.commit", "?"));
    }
    fprintf(x->md, "\n");
}

/* One layer of a row's figures.layer_times: what the chart and the by-type table read. */
struct layer_time {
    const char *name, *op;
    double fw_ms, bw_ms;
    double idle_ms; /* a pool's threads' mean wait in it (figures.layer_times[].idle_s); NAN: one thread */
    int pos;        /* its place in the model */
};

static int cmp_layer_time(const void *a, const void *b)
{
    const struct layer_time *p = a, *q = b;
    const double tp = p->fw_ms + p->bw_ms, tq = q->fw_ms + q->bw_ms;
    return tp > tq ? -1 : tp < tq ? 1 : p->pos - q->pos;
}

/* At most this many bars: EfficientNet-B0 has 208 layers, whose labels overlapped into one smear, and a
 * row of 100,000 kept gnuplot busy for minutes; the table under the chart says what the rest take. */
#define REPORT_LAYER_BARS 30

/* The run's layer times by layer type, as the --profile printout gives them; on a pool, with the share
 * of each type's time its threads spent waiting (imbalance, layers run on one thread). Types past the
 * 64th are summed as "other". */
static void layers_by_type(struct ctx *x, const struct layer_time *lt, int n, double total_ms)
{
    enum { MAX_OPS = 64 };
    const char *ops[MAX_OPS];
    double fw[MAX_OPS] = {0}, bw[MAX_OPS] = {0}, idle[MAX_OPS] = {0};
    int count[MAX_OPS] = {0}, n_ops = 0, pool = 0;
    for (int k = 0; k < n; k++) {
        int j = 0;
        while (j < n_ops && strcmp(ops[j], lt[k].op)) j++;
        if (j == n_ops) {
            if (n_ops == MAX_OPS - 1) ops[j = MAX_OPS - 1] = "other", n_ops = MAX_OPS;
            else ops[n_ops++] = lt[k].op;
        }
        fw[j] += lt[k].fw_ms, bw[j] += lt[k].bw_ms, count[j]++;
        if (isfinite(lt[k].idle_ms)) idle[j] += lt[k].idle_ms, pool = 1;
    }
    fprintf(x->md, "| layer type | layers | forward ms | backward ms | share |%s\n|---|---:|---:|---:|---:|%s\n",
            pool ? " threads idle |" : "", pool ? "---:|" : "");
    for (int done = 0; done < n_ops; done++) { /* largest first */
        int j = -1;
        for (int k = 0; k < n_ops; k++)
            if (count[k] >= 0 && (j < 0 || fw[k] + bw[k] > fw[j] + bw[j])) j = k;
        const double t = fw[j] + bw[j];
        fprintf(x->md, "| %s | %d | %s | %s | %s |", ops[j], count[j], cellf(fw[j], "%.3f").s, cellf(bw[j], "%.3f").s,
                cellf(total_ms > 0 ? 100.0 * t / total_ms : NAN, "%.1f %%").s);
        if (pool) fprintf(x->md, " %s |", cellf(t > 0 ? 100.0 * idle[j] / t : NAN, "%.0f %%").s);
        fprintf(x->md, "\n");
        count[j] = -1;
    }
    if (pool)
        fprintf(x->md, "\n*Threads idle*: the share of the type's time a thread of the pool, on average, waited (for "
                       "the others, or for a layer run on one thread) — what the split loses, apart from kernel speed.\n");
    fprintf(x->md, "\n");
}

/* One run's per-layer section: its chart of the slowest layers, the table (every layer, slowest first, with
 * its place in the model) in charts/data, and the time by layer type. used: the chart names taken so far. */
static void layers_of_row(struct ctx *x, int i, const struct json_value *arr, struct report_index *used)
{
    const struct json_value *r = x->rows.v[i];
    struct layer_time *lt = malloc((size_t)arr->n * sizeof *lt);
    if (!lt) return;
    int n = 0;
    double total_ms = 0.0;
    for (int k = 0; k < arr->n; k++) {
        const struct json_value *e = &arr->items[k];
        struct layer_time t = {json_get_str(e, "name", "?"), json_get_str(e, "op", "?"),
                               1e3 * report_figure("forward_s", json_get_number(e, "forward_s", 0.0)),
                               1e3 * report_figure("backward_s", json_get_number(e, "backward_s", 0.0)),
                               1e3 * fg_in(e, "idle_s"), k};
        if (!isfinite(t.fw_ms) || !isfinite(t.bw_ms)) continue; /* no bar gnuplot could draw */
        lt[n++] = t;
        total_ms += t.fw_ms + t.bw_ms;
    }
    qsort(lt, (size_t)n, sizeof *lt, cmp_layer_time);
    char name[200], safe[160], path[1300], title[480], sub[400], tag[160], vars[760], key[1024], var[512];
    snprintf(tag, sizeof tag, "%s_%s_%s_b%s", kind_of(r), cs(r, "workload"), cs(r, "backend"), batch_cell(r).s);
    safe_name(safe, sizeof safe, tag);
    /* The readable part alone named rows of other options (lr, precision, ...) alike, and each overwrote the
     * other's chart: a hash of the row's whole configuration keeps them apart and stays the same from report to
     * report; a number follows in the unlikely case two configurations share the hash. */
    row_key(r, key, sizeof key, 1);
    const uint64_t h64 = report_key_hash(key);
    const unsigned h = (unsigned)(h64 ^ (h64 >> 32));
    snprintf(name, sizeof name, "layers_%s_%08x", safe, h);
    int id, added = 0;
    for (int dup = 2; report_index_add(used, name, &id, &added) == TB_OK && !added; dup++)
        snprintf(name, sizeof name, "layers_%s_%08x_%d", safe, h, dup);
    if (!added) tb_error_clear(); /* out of memory in the index: the name as it stands */
    variant_label(&x->rows, i, var, sizeof var);
    snprintf(path, sizeof path, "%s/%s.dat", x->data_dir, name);
    FILE *f = dat_open(x, path);
    if (!f) {
        free(lt);
        return;
    }
    fprintf(f, "# layer\tforward ms\tbackward ms\tplace in the model\tlayer type (slowest first)\n");
    for (int k = 0; k < n; k++) {
        dat_label(f, lt[k].name);
        fprintf(f, "\t%.6g\t%.6g\t%d\t", lt[k].fw_ms, lt[k].bw_ms, lt[k].pos);
        dat_label(f, lt[k].op);
        fputc('\n', f);
    }
    dat_close(x, f, path);
    const int bars = n < REPORT_LAYER_BARS ? n : REPORT_LAYER_BARS;
    double drawn_ms = 0.0;
    for (int k = 0; k < bars; k++) drawn_ms += lt[k].fw_ms + lt[k].bw_ms;
    int one[1] = {i};
    if (bars < n)
        snprintf(title, sizeof title, "The %d slowest of %d layers, per step: %s on %s, batch %s (%s%.200s)", bars,
                 n, cs(r, "workload"), cs(r, "backend"), batch_cell(r).s, kind_of(r), var);
    else
        snprintf(title, sizeof title, "Per-layer time per step: %s on %s, batch %s (%s%.200s)", cs(r, "workload"),
                 cs(r, "backend"), batch_cell(r).s, kind_of(r), var);
    subtitle(x, one, 1, sub, sizeof sub);
    /* The chart's title in two lines, the run's kind and options on the second: on one line they ran past the
     * canvas (the title is centred over the plot, which the layer names push right). */
    char head[400], qk[700];
    snprintf(head, sizeof head, "%.*s", (int)strcspn(title, "("), title);
    if (head[0] && head[strlen(head) - 1] == ' ') head[strlen(head) - 1] = '\0';
    report_gp_quote(qk, sizeof qk, title + strcspn(title, "("));
    snprintf(vars, sizeof vars, "K=%d; ttl2='%s'", bars, qk);
    if (bars) md_chart(x, name, title, render(x, "layers.gp", name, path, head, sub, vars));
    else md_no_chart(x, name, "layer time");
    if (bars < n)
        fprintf(x->md, "The other %d layers take %s ms of the layers' %s ms a step (%s); the data file has every "
                       "layer, slowest first, with its place in the model.\n\n",
                n - bars, cellf(total_ms - drawn_ms, "%.3f").s, cellf(total_ms, "%.3f").s,
                cellf(total_ms > 0 ? 100.0 * (total_ms - drawn_ms) / total_ms : NAN, "%.1f %%").s);
    if (n) layers_by_type(x, lt, n, total_ms);
    free(lt);
}

static void section_layers(struct ctx *x)
{
    fprintf(x->md, "## Per-layer time\n\n");
    int found = 0;
    struct report_index used;
    report_index_init(&used);
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *lt = json_get(x->rows.v[i], "figures.layer_times");
        if (!x->rows.keep[i] || !lt || lt->type != JSON_ARRAY || lt->n == 0) continue;
        layers_of_row(x, i, lt, &used);
        found++;
    }
    report_index_free(&used);
    if (!found)
        fprintf(x->md, "No row carries per-layer times: run with `--profile` (any backend; the plans that train) to "
                       "record them into `figures.layer_times` (each layer's `forward_s` and `backward_s` a step), and "
                       "this section then draws one chart per run.\n\n");
}

/* The CPU threads a row computed with: figures.peak_threads (those of the sgemm ceiling its share is of),
 * else config.threads, else figures.devices_used; 0 when the row does not say. */
static int row_threads(const struct json_value *r)
{
    const double v[3] = {fg(r, "peak_threads"), cn(r, "threads"), fg(r, "devices_used")};
    for (int k = 0; k < 3; k++)
        if (isfinite(v[k]) && v[k] >= 1 && v[k] < 1e6) return (int)v[k];
    return 0;
}

static void section_roofline(struct ctx *x)
{
    fprintf(x->md, "## Roofline\n\n");
    char path[1200], title[256], sub[400], vars[1024];
    snprintf(path, sizeof path, "%s/roofline.dat", x->data_dir);
    FILE *f = dat_open(x, path);
    if (!f) return;
    const char *backends[32];
    int nb = 0, idx[2048], n = 0, n_gpu = 0;
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *r = x->rows.v[i];
        /* Throughput and inference rows only: the other plans time the same steps again. */
        if (strcmp(kind_of(r), "throughput") && strcmp(kind_of(r), "inference")) continue;
        /* Both axes are logarithmic: a point needs a finite, positive intensity and rate. */
        const double ai = fg(r, "est_intensity_flop_per_byte"), gf = fg(r, "gflops_per_s");
        if (!x->rows.keep[i] || !(isfinite(ai) && ai > 0) || !(isfinite(gf) && gf > 0)) continue;
        int seen = 0;
        for (int k = 0; k < nb; k++) seen |= !strcmp(backends[k], cs(r, "backend"));
        if (!seen && nb < 32) backends[nb++] = cs(r, "backend");
        if (n < 2048) idx[n++] = i, n_gpu += report_gpu_row(r);
    }
    /* One block per point, numbered, its label in the key rather than beside the point: labels of
     * neighbouring points (the same model at two batches sits at almost the same intensity) overlapped.
     * The key keeps a short label; the table under the chart gives each number's full options. Points of
     * one backend share a colour (column 3), each its own marker. */
    /* Each CPU point is judged against the memory roof of the threads it ran on, as its ceiling share is
     * taken of the sgemm of those threads: one thread's roof for a one-thread run, else the all-threads
     * roof (no number of threads moves more). above[0]: points above the one-thread roof, above[1]: the
     * all-threads roof. */
    char points[1 << 14] = "", above[2][512] = {"", ""};
    int n_above[2] = {0, 0}, n_one = 0;
    for (int j = 0; j < n; j++) {
        const struct json_value *r = x->rows.v[idx[j]];
        const int gpu = report_gpu_row(r), one = !gpu && row_threads(r) == 1;
        /* a: the roof it is judged against (a calibration without one thread's triad has the other only). */
        const int a = one && x->cal.triad_1t_gbs > 0 ? 0 : 1;
        const double bw = a ? x->cal.triad_all_gbs : x->cal.triad_1t_gbs;
        n_one += !a;
        /* Above its roof: the traffic model overestimated the bytes (a working set that stayed in cache),
         * which the text below says. */
        if (x->have_cal && !gpu && bw > 0 && fg(r, "gflops_per_s") > fg(r, "est_intensity_flop_per_byte") * bw) {
            size_t al = strlen(above[a]);
            snprintf(above[a] + al, sizeof above[a] - al, "%s%d", n_above[a]++ ? ", " : "", j + 1);
        }
        char label[640], var[512], key[640];
        variant_label(&x->rows, idx[j], var, sizeof var);
        /* The options too, as far as a key line holds them (points of one backend and batch read alike: fp32,
         * bf16 and fp16 runs did); the table below has them whole. */
        snprintf(label, sizeof label, "%d %s: %s%s b%s%s%s", j + 1, cs(r, "backend"), cs(r, "workload"),
                 strcmp(kind_of(r), "inference") ? "" : " fwd", batch_cell(r).s, one ? ", 1 thread" : "", var);
        wrap_label(label, 48, 1, key, sizeof key);
        int colour = 0;
        while (colour < nb && strcmp(backends[colour], cs(r, "backend"))) colour++;
        if (j) fprintf(f, "\n\n");
        dat_label(f, key);
        fprintf(f, "\n%.6g\t%.6g\t%d\n", fg(r, "est_intensity_flop_per_byte"), fg(r, "gflops_per_s"), colour % 8 + 1);
        size_t len = strlen(points);
        snprintf(points + len, sizeof points - len, "| %d | %s | %s%s | %s | %s | %s | %.2f | %.2f |\n", j + 1,
                 cs(r, "backend"), cs(r, "workload"), strcmp(kind_of(r), "inference") ? "" : " (forward)",
                 batch_cell(r).s, var[0] ? var + 1 : "",
                 gpu ? "the GPU" : !x->have_cal ? "–" : a ? "all threads" : "one thread",
                 fg(r, "est_intensity_flop_per_byte"), fg(r, "gflops_per_s"));
    }
    dat_close(x, f, path);
    if (n == 0) {
        fprintf(x->md, "No rows with GFLOP/s and an intensity estimate.\n\n");
        return;
    }
    /* The points' extent: the chart zooms to them and their roofs, so that a point just above its roof
     * (as the text names it) is seen to be. */
    double ai_lo = INFINITY, ai_hi = 0, gf_lo = INFINITY, gf_hi = 0;
    for (int j = 0; j < n; j++) {
        const double ai = fg(x->rows.v[idx[j]], "est_intensity_flop_per_byte"), gf = fg(x->rows.v[idx[j]], "gflops_per_s");
        ai_lo = fmin(ai_lo, ai), ai_hi = fmax(ai_hi, ai), gf_lo = fmin(gf_lo, gf), gf_hi = fmax(gf_hi, gf);
    }
    snprintf(vars, sizeof vars, "nblocks=%d; peak1=%.6g; peakall=%.6g; bw1=%.6g; bwall=%.6g; dxmin=%.6g; dxmax=%.6g; "
             "dymin=%.6g; dymax=%.6g", n, x->have_cal ? x->cal.sgemm_1t_gflops : 0.0,
             x->have_cal ? x->cal.sgemm_all_gflops : 0.0, x->have_cal ? x->cal.triad_1t_gbs : 0.0,
             x->have_cal ? x->cal.triad_all_gbs : 0.0, ai_lo, ai_hi, gf_lo, gf_hi);
    if (n_gpu) report_gpu_roofline_vars(&x->gpu, vars, sizeof vars); /* GPU roofs only under GPU points */
    snprintf(title, sizeof title, "Roofline: achieved GFLOP/s against estimated arithmetic intensity");
    subtitle(x, idx, n, sub, sizeof sub);
    fprintf(x->md, "Each point is a throughput run (training step) or an inference run (`fwd`), the latest per "
                   "configuration: GFLOP/s = the model's counted FLOPs ÷ measured "
                   "time; the intensity is **estimated** from a compulsory-traffic model of a step (parameters, "
                   "gradients, optimizer state and activations moved once), not measured. ");
    if (x->have_cal)
        fprintf(x->md, "Ceilings measured by `bench --calibrate` (%s): OpenBLAS sgemm n=%d %.1f GFLOP/s on one thread, "
                       "%.1f on %d; triad %.1f GB/s on one thread, %.1f on all.\n\n",
                x->cal_source, x->cal.sgemm_n, x->cal.sgemm_1t_gflops, x->cal.sgemm_all_gflops, x->cal.all_threads,
                x->cal.triad_1t_gbs, x->cal.triad_all_gbs);
    else
        fprintf(x->md, "No calibration of this machine (CPU model, core count and OpenBLAS kernel set of the latest "
                       "row) was found (run `bench --calibrate` on it), so the chart has no ceilings.\n\n");
    if (n_gpu) report_gpu_roofline_text(&x->gpu, x->md);
    if (x->have_cal && n_one)
        fprintf(x->md, "A point is judged against the roofs of the threads it ran on, as the throughput table's ceiling "
                       "share is: a one-thread run (marked `1 thread`) against the one-thread roof, any other against "
                       "the all-threads roof, since no number of threads computes or moves more.\n\n");
    const int n_ab = n_above[0] + n_above[1];
    if (n_ab) {
        char which[1200];
        if (!n_above[1]) snprintf(which, sizeof which, "the one-thread memory roof");
        else if (!n_above[0]) snprintf(which, sizeof which, "the all-threads memory roof");
        else
            snprintf(which, sizeof which,
                     "the memory roof of their threads (the one-thread roof: %s; the all-threads roof: %s)", above[0],
                     above[1]);
        char list[1030];
        snprintf(list, sizeof list, "%s%s%s", above[0], n_above[0] && n_above[1] ? ", " : "", above[1]);
        fprintf(x->md, "Point%s %s lie%s above %s: a run cannot compute faster than memory delivers its bytes, so %s "
                       "moved fewer bytes than the model counts — a working set (weights, optimizer state, a small "
                       "batch's activations) that stayed in the caches between steps. %s true intensity is higher: to "
                       "the right of where %s drawn.\n\n",
                n_ab > 1 ? "s" : "", list, n_ab > 1 ? "" : "s", which, n_ab > 1 ? "those runs" : "that run",
                n_ab > 1 ? "Their" : "Its", n_ab > 1 ? "they are" : "it is");
    }
    md_chart(x, "roofline", title, render(x, "roofline.gp", "roofline", path, title, sub, vars));
    fprintf(x->md, "| point | backend | workload | batch | options | roofs of | intensity FLOP/byte (estimated) | "
                   "GFLOP/s |\n|---:|---|---|---:|---|---|---:|---:|\n%s\n", points);
}

/* A profile sidecar is read whole up to this size (perf's counters and symbols: kilobytes to a few MB). */
#define PROFILE_MAX_BYTES (64L << 20)

/* The rest of f as a NUL-terminated malloc'd string of *len bytes, or NULL with *why: larger than
 * PROFILE_MAX_BYTES, a read error, or out of memory. */
static char *read_sidecar(FILE *f, size_t *len, const char **why)
{
    const long max = PROFILE_MAX_BYTES;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && sb.st_size > max) {
        *why = "larger than 64 MiB";
        return NULL;
    }
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break; /* end of file or an error */
        if ((long)cap > max) {
            free(buf);
            *why = "larger than 64 MiB";
            return NULL;
        }
        char *more = realloc(buf, 2 * cap + 1);
        if (!more) free(buf);
        buf = more, cap *= 2;
    }
    if (!buf) {
        *why = "out of memory";
        return NULL;
    }
    if (ferror(f)) {
        free(buf);
        *why = "read error";
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void section_profiles(struct ctx *x)
{
    char dir[1024];
    if (x->o->profile_dir) snprintf(dir, sizeof dir, "%s", x->o->profile_dir);
    else {
        const char *slash = strrchr(x->o->in, '/');
        if (slash) snprintf(dir, sizeof dir, "%.*s/profile", (int)(slash - x->o->in), x->o->in);
        else snprintf(dir, sizeof dir, "profile");
    }
    struct stat dir_sb;
    const int dir_ok = stat(dir, &dir_sb) == 0;
    if (!dir_ok || !S_ISDIR(dir_sb.st_mode)) {
        /* Given explicitly: said once; the default directory is optional. */
        if (x->o->profile_dir)
            fprintf(stderr, "bench report: warning: --profile-dir %s: %s; no profiles shown\n", dir,
                    dir_ok ? "not a directory" : strerror(errno));
        return;
    }
    int found = 0;
    for (int i = 0; i < x->rows.n; i++) {
        const char *id = json_get_str(x->rows.v[i], "run_id", "");
        if (!id[0] || !row_ok(x->rows.v[i])) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s.json", dir, id);
        struct stat sb;
        if (stat(path, &sb) != 0) continue; /* most runs have no sidecar */
        /* Not fopen: a FIFO without a writer would block the report forever, a device never end. */
        const char *why = NULL;
        FILE *f = regular_fopen(path, &why);
        if (!f) {
            fprintf(stderr, "bench report: warning: profile %s: %s; skipped\n", path, why);
            continue;
        }
        size_t len = 0;
        char *buf = read_sidecar(f, &len, &why);
        fclose(f);
        if (!buf) {
            fprintf(stderr, "bench report: warning: profile %s: %s; skipped\n", path, why);
            continue;
        }
        struct json_value *p = NULL;
        const int parsed = json_parse(buf, len, &p);
        free(buf);
        if (parsed != TB_OK) {
            fprintf(stderr, "bench report: warning: %s: %s; skipped\n", path, tb_error_get());
            continue;
        }
        if (!found++) fprintf(x->md, "## Profiles (perf)\n\n");
        const struct json_value *r = x->rows.v[i];
        fprintf(x->md, "### %s %s/%s batch %s (run `%s`)\n\n%s\n\n", kind_of(r), cs(r, "backend"), cs(r, "workload"),
                batch_cell(r).s, id, json_get_str(p, "events_note", ""));
        const struct json_value *cnt = json_get(p, "counters");
        if (cnt && cnt->type == JSON_ARRAY && cnt->n) {
            fprintf(x->md, "| counter | value | unit |\n|---|---:|---|\n");
            for (int k = 0; k < cnt->n; k++) {
                const struct json_value *c = &cnt->items[k];
                const struct json_value *v = json_get(c, "value");
                if (v && v->type == JSON_NUMBER)
                    fprintf(x->md, "| %s | %s | %s |\n", json_get_str(c, "event", "?"), cellf(v->number, "%.6g").s,
                            json_get_str(c, "unit", ""));
                else
                    fprintf(x->md, "| %s | %s | %s |\n", json_get_str(c, "event", "?"),
                            v && v->type == JSON_STRING ? v->str : "not counted", json_get_str(c, "unit", ""));
            }
            fprintf(x->md, "\n");
        }
        const struct json_value *top = json_get(p, "top_functions");
        if (top && top->type == JSON_ARRAY && top->n) {
            fprintf(x->md, "| self %% | function | object |\n|---:|---|---|\n");
            for (int k = 0; k < top->n && k < 15; k++)
                fprintf(x->md, "| %s | `%s` | %s |\n", cellf(json_get_number(&top->items[k], "percent", NAN), "%.2f").s,
                        json_get_str(&top->items[k], "symbol", "?"), json_get_str(&top->items[k], "dso", ""));
            fprintf(x->md, "\n");
        }
        json_value_free(p);
    }
}

#define MAX_TIMELINES 4    /* Gantt charts: the latest rows carrying a timeline */
#define MAX_LANES 32

/* The Gantt chart of one row's figures.timeline (the last training step of an ipu run), with the
 * measured bubble beside it. The data file has one line per interval: lane, start and end in ms,
 * phase number (position in "FBRAU"), micro-batch. */
static void timeline_chart(struct ctx *x, int i, const char *name)
{
    static const char phases[] = "FBRAU";
    const struct json_value *r = x->rows.v[i];
    const struct json_value *tl = json_get(r, "figures.timeline");
    const struct json_value *ev = json_get(tl, "events");
    char path[1300], title[400], sub[400], vars[4096], ytics[3000], present_txt[16] = "";
    snprintf(path, sizeof path, "%s/%s.dat", x->data_dir, name);
    FILE *f = dat_open(x, path);
    if (!f) return;
    fprintf(f, "# lane\tstart ms\tend ms\tphase (1 forward, 2 backward, 3 recompute, 4 all-reduce, 5 update)\tmicro-batch\n");
    int lane_dev[MAX_LANES], lane_stage[MAX_LANES], lane_rep[MAX_LANES], nl = 0, present[5] = {0}, n_ev = 0;
    double span = report_figure("span_s", json_get_number(tl, "span_s", 0.0));
    if (!isfinite(span) || span < 0.0) span = 0.0; /* a gnuplot variable: never nan or inf */
    for (int k = 0; ev && ev->type == JSON_ARRAY && k < ev->n; k++) {
        const struct json_value *e = &ev->items[k];
        if (e->type != JSON_ARRAY || e->n < 7 || e->items[4].type != JSON_STRING) continue;
        const char *ph = strchr(phases, e->items[4].str[0]);
        if (!ph || !e->items[4].str[0]) continue;
        /* [device, stage, replica, micro-batch, phase, start s, end s]: numbers that fit an int and finite
         * times, or the event is not drawn (nor cast to int out of range). */
        int numbers = 1;
        for (int q = 0; q < 7; q++)
            if (q != 4) numbers &= e->items[q].type == JSON_NUMBER && fabs(e->items[q].number) < 1e9;
        if (!numbers) continue;
        const int dev = (int)e->items[0].number;
        int lane = 0;
        while (lane < nl && lane_dev[lane] != dev) lane++;
        if (lane == nl) {
            if (nl == MAX_LANES) continue;
            lane_dev[nl] = dev, lane_stage[nl] = (int)e->items[1].number, lane_rep[nl] = (int)e->items[2].number;
            nl++;
        }
        const double t0 = e->items[5].number, t1 = e->items[6].number;
        fprintf(f, "%d\t%.6f\t%.6f\t%d\t%d\n", lane, 1e3 * t0, 1e3 * t1, (int)(ph - phases) + 1, (int)e->items[3].number);
        present[ph - phases] = 1;
        span = t1 > span ? t1 : span;
        n_ev++;
    }
    dat_close(x, f, path);
    int len = snprintf(ytics, sizeof ytics, "set ytics (");
    for (int l = 0; l < nl && len < (int)sizeof ytics; l++)
        len += snprintf(ytics + len, sizeof ytics - (size_t)len, "%s\"device %d (stage %d, replica %d)\" %d", l ? ", " : "",
                        lane_dev[l], lane_stage[l], lane_rep[l], l);
    if (len < (int)sizeof ytics) snprintf(ytics + len, sizeof ytics - (size_t)len, ")");
    for (int p = 0; p < 5; p++)
        if (present[p]) snprintf(present_txt + strlen(present_txt), sizeof present_txt - strlen(present_txt), "%d ", p + 1);
    char qy[3100];
    report_gp_quote(qy, sizeof qy, ytics);
    snprintf(vars, sizeof vars, "nlanes=%d; span_ms=%.6g; phases='%s'; ytics_cmd='%s'", nl > 0 ? nl : 1, 1e3 * span,
             present_txt, qy);
    /* Counts that do not fit an int (a row edited by hand) print as the empty-cell mark, never cast. */
    const struct cell c_stages = count_cell(json_get_number(r, "figures.pipeline.stages", cn(r, "stages"))),
                      c_replicas = count_cell(json_get_number(r, "figures.pipeline.replicas", cn(r, "replicas"))),
                      c_mb = count_cell(json_get_number(r, "figures.pipeline.micro_batch", cn(r, "micro_batch"))),
                      c_ga = count_cell(json_get_number(r, "figures.pipeline.ga", cn(r, "ga")));
    const char *sched = cs(r, "schedule");
    snprintf(title, sizeof title,
             "Pipeline timeline (measured): %s on %s, %s stage%s x %s replica%s, micro-batch %s x GA %s%s%s, last training step",
             cs(r, "workload"), cs(r, "backend"), c_stages.s, strcmp(c_stages.s, "1") ? "s" : "", c_replicas.s,
             strcmp(c_replicas.s, "1") ? "s" : "", c_mb.s, c_ga.s, sched[0] ? ", " : "", sched);
    int one[1] = {i};
    subtitle(x, one, 1, sub, sizeof sub);
    char var[512], bubble[256] = "";
    variant_label(&x->rows, i, var, sizeof var);
    fprintf(x->md, "### %s, %s b%s%s (%s, run `%s`)\n\n", cs(r, "workload"), cs(r, "backend"), batch_cell(r).s, var,
            kind_of(r), json_get_str(r, "run_id", "?"));
    const struct json_value *pipe = json_get(r, "figures.pipeline");
    const double bm = fg_in(pipe, "bubble_measured"), bi = fg_in(pipe, "bubble_ideal");
    if (isfinite(bm) && isfinite(bi))
        snprintf(bubble, sizeof bubble, " Pipeline bubble, measured over the run's steps after the first: **%.1f %%** of "
                                        "device time, against the ideal (S−1)/(G+S−1) = %.1f %% of this schedule.",
                 100.0 * bm, 100.0 * bi);
    fprintf(x->md, "The run's last training step: %d interval%s on %d device%s over %.3f ms (measured).%s", n_ev,
            n_ev == 1 ? "" : "s", nl, nl == 1 ? "" : "s", 1e3 * span, bubble);
    if (json_get_bool(tl, "truncated", 0))
        fprintf(x->md, " The row keeps at most 512 intervals: %s of %s devices are drawn.",
                cellf(json_get_number(tl, "devices_shown", nl), "%g").s, cellf(json_get_number(tl, "devices", nl), "%g").s);
    fprintf(x->md, "\n\n");
    md_chart(x, name, title, n_ev > 0 && render(x, "timeline.gp", name, path, title, sub, vars));
}

/* One Gantt chart per ipu row carrying figures.timeline (the latest MAX_TIMELINES of them). */
static void section_timeline(struct ctx *x)
{
    int idx[MAX_TIMELINES], n = 0, total = 0;
    for (int i = x->rows.n - 1; i >= 0; i--) {
        const struct json_value *tl = json_get(x->rows.v[i], "figures.timeline");
        if (!x->rows.keep[i] || !tl || tl->type != JSON_OBJECT) continue;
        if (n < MAX_TIMELINES) idx[n++] = i;
        total++;
    }
    fprintf(x->md, "## Pipeline timeline\n\n");
    if (n == 0) {
        fprintf(x->md, "No row carries a timeline (`figures.timeline`: ipu runs write the last training step's "
                       "intervals per device).\n\n");
        return;
    }
    char which[64];
    if (total > n) snprintf(which, sizeof which, "the latest %d of the %d ipu runs that carry one", n, total);
    else snprintf(which, sizeof which, "%s", n > 1 ? "each ipu run" : "the ipu run");
    fprintf(x->md, "A Gantt chart of the last training step of %s: one lane per device (a pipeline stage of one "
                   "replica), one box per forward, backward, recompute, all-reduce and update interval, numbered by "
                   "micro-batch, timed on the device workers from the start of the step. The gaps are the bubble: a "
                   "device waiting for its neighbour's activations or gradients, or for the others to finish.\n\n",
            which);
    char used[MAX_TIMELINES][220];
    for (int k = n - 1; k >= 0; k--) {
        const struct json_value *r = x->rows.v[idx[k]];
        char tag[200], safe[200], name[220];
        snprintf(tag, sizeof tag, "%s_%s_%s_b%s_s%g_m%g_g%g_r%g", kind_of(r), cs(r, "workload"), cs(r, "backend"),
                 batch_cell(r).s, json_get_number(r, "figures.pipeline.stages", cn(r, "stages")),
                 json_get_number(r, "figures.pipeline.micro_batch", cn(r, "micro_batch")),
                 json_get_number(r, "figures.pipeline.ga", cn(r, "ga")),
                 json_get_number(r, "figures.pipeline.replicas", cn(r, "replicas")));
        safe_name(safe, sizeof safe, tag);
        snprintf(name, sizeof name, "timeline_%.200s", safe);
        /* Rows that differ only in options the tag leaves out (precision, schedule, ...) get a number. */
        for (int j = n - 1, dup = 1; j > k; j--)
            if (!strcmp(used[j], name)) snprintf(name, sizeof name, "timeline_%.190s_%d", safe, ++dup), j = n;
        snprintf(used[k], sizeof used[k], "%s", name);
        timeline_chart(x, idx[k], name);
    }
}

/* Rows of runs that stopped early (diverged, interrupted): listed, never drawn. */
static void section_unfinished(struct ctx *x)
{
    int n = 0;
    for (int i = 0; i < x->rows.n; i++) n += !row_ok(x->rows.v[i]);
    if (!n) return;
    fprintf(x->md, "## Runs that did not finish\n\n%d row%s with a status other than `ok`, left out of every figure "
                   "and chart above.\n\n| run id | kind | workload | backend | batch | status | timestamp |\n"
                   "|---|---|---|---|---:|---|---|\n",
            n, n == 1 ? "" : "s");
    for (int i = 0; i < x->rows.n; i++) {
        const struct json_value *r = x->rows.v[i];
        if (row_ok(r)) continue;
        fprintf(x->md, "| `%s` | %s | %s | %s | %s | %s | %s |\n", json_get_str(r, "run_id", "?"), kind_of(r),
                cs(r, "workload"), cs(r, "backend"), batch_cell(r).s, json_get_str(r, "status", "?"),
                json_get_str(r, "timestamp", ""));
    }
    fprintf(x->md, "\n");
}

int report_generate(const struct report_opts *o, int *n_charts)
{
    *n_charts = 0;
    const char *const opts[] = {"--out-dir", "--plots", "--profile-dir", "--in"};
    const char *const paths[] = {o->out_dir, o->plots_dir, o->profile_dir, o->in};
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++)
        if (paths[k] && strlen(paths[k]) > REPORT_PATH_MAX)
            return tb_error_set(TB_EINVAL, "%s: a path of %zu bytes; the report takes at most %d (its charts' and data "
                                           "files' names go under it)", opts[k], strlen(paths[k]), REPORT_PATH_MAX);
    struct ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.rows.path = o->in;
    snprintf(x.charts_dir, sizeof x.charts_dir, "%s/charts", o->out_dir);
    snprintf(x.data_dir, sizeof x.data_dir, "%s/charts/data", o->out_dir);
    char md_path[1100], md_tmp[1200];
    snprintf(md_path, sizeof md_path, "%s/REPORT.md", o->out_dir);
    snprintf(md_tmp, sizeof md_tmp, "%s.tmp%ld", md_path, (long)getpid());
    /* Before anything is read: a refusal is the only line printed. */
    int st = check_input(&x, "--in", o->in, md_path, md_tmp);
    if (st == TB_OK) st = check_input(&x, "--calibration", o->calibration, md_path, md_tmp);
    long n_skipped = 0;
    if (st == TB_OK) st = results_read_rows_stream(o->in, collect, &x.rows, &n_skipped);
    n_skipped += x.rows.n_bare;
    /* Data that cannot be used, not a usage error: exit 1, as `bench compare` on the same file. */
    if (st == TB_OK && x.rows.n == 0)
        st = tb_error_set(TB_EFORMAT, "%s has no usable result rows (it is empty, or no line is a well-formed row with "
                                      "config and figures)", o->in);
    if (st == TB_OK) st = mark_latest(&x.rows);
    if (st == TB_OK) st = index_labels(&x.rows);
    if (st == TB_OK) warn_impossible(&x.rows);
    if (st == TB_OK) st = make_dirs(x.data_dir);
    /* Each folder tried (an existing one of another user's, after `sudo make demo`), before anything is written, so
     * that a report is not made without its tables. */
    if (st == TB_OK) st = outputs_dir_writable(o->out_dir);
    if (st == TB_OK) st = outputs_dir_writable(x.charts_dir);
    if (st == TB_OK) st = outputs_dir_writable(x.data_dir);
    if (st == TB_OK) st = check_outputs(&x, md_path);
    /* One report at a time in a folder: two at once removed each other's charts and logs (a "gnuplot failed" for a
     * chart that was there). The folder's lock, held to the end. */
    int dir_lock = -1;
    char lock_path[1100];
    snprintf(lock_path, sizeof lock_path, "%s/.report.lock", o->out_dir); /* its own file: a tuning save beside waits on another */
    if (st == TB_OK && (dir_lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) >= 0 &&
        flock(dir_lock, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        st = tb_error_set(TB_EIO, "%s: another bench report is writing there; wait for it to end", o->out_dir);
    /* Our own temporary name: whatever a crashed run left there goes, and "x" creates it afresh. */
    if (st == TB_OK) remove(md_tmp);
    if (st == TB_OK && !(x.md = fopen(md_tmp, "wx"))) st = tb_error_set(TB_EIO, "cannot write %s: %s", md_tmp, strerror(errno));
    if (st != TB_OK) goto done;
    clean_charts(&x);

    /* Ceilings: those of the machine of the latest row only (CPU model, cores, OpenBLAS kernel set): the
     * calibration file if it was measured there, else the newest copy a row of that machine carries. */
    const struct json_value *lr = x.rows.n ? x.rows.v[x.rows.n - 1] : NULL;
    const char *m_cpu = json_get_str(lr, "machine.cpu_model", "?"), *m_core = json_get_str(lr, "build.blas_core", "?");
    const int m_cores = row_count(json_get_number(lr, "machine.n_cores", 0));
    const int cal_st = lr && o->calibration ? calibrate_load_matching(o->calibration, m_cpu, m_cores, m_core, &x.cal)
                                            : TB_EINVAL;
    if (cal_st == TB_OK) {
        x.have_cal = 1;
        snprintf(x.cal_source, sizeof x.cal_source, "%s, %s", o->calibration, x.cal.timestamp);
    } else if (cal_st == TB_EIO && strcmp(o->calibration, CALIBRATION_DEFAULT_PATH)) {
        /* A file given explicitly that cannot be read is said (one that reads but does not fit this machine
         * is, by calibrate_load_matching); the default one is optional. */
        fprintf(stderr, "bench report: warning: %s; no ceilings from it\n", tb_error_get());
    }
    report_gpu_choose(&x.gpu, (const struct json_value *const *)x.rows.v, x.rows.keep, x.rows.n,
                      x.have_cal ? &x.cal : NULL, x.cal_source);
    int n_foreign = 0;
    for (int i = x.rows.n - 1; i >= 0 && !x.have_cal; i--) {
        const struct json_value *c = json_get(x.rows.v[i], "calibration");
        /* A ceiling no machine has (0, 1e308) is no ceiling: finite_or_0's bound, as for the others; a copy
         * without every ceiling is no calibration (a missing all-thread sgemm read "0.0 GFLOP/s on 2 threads"). */
        if (!c || !(finite_or_0(json_get_number(c, "sgemm_1t_gflops", 0)) > 0) ||
            !(finite_or_0(json_get_number(c, "sgemm_all_gflops", 0)) > 0) ||
            !(finite_or_0(json_get_number(c, "triad_1t_gbs", 0)) > 0) ||
            !(finite_or_0(json_get_number(c, "triad_all_gbs", 0)) > 0))
            continue;
        struct calibration rc = {.cores = row_count(json_get_number(c, "cores", 0))};
        snprintf(rc.cpu_model, sizeof rc.cpu_model, "%s", json_get_str(c, "cpu_model", "unknown"));
        snprintf(rc.blas_core, sizeof rc.blas_core, "%s", json_get_str(c, "blas_core", "unknown"));
        char why[400];
        if (!json_get(c, "cpu_model")) snprintf(why, sizeof why, "they name no machine (rows written before they did)");
        if (!json_get(c, "cpu_model") || !calibrate_matches(&rc, m_cpu, m_cores, m_core, why, sizeof why)) {
            if (!n_foreign++)
                fprintf(stderr, "bench report: warning: ceilings copied into the rows ignored for the latest row's machine: %s\n",
                        why);
            continue;
        }
        x.cal = rc;
        /* Printed and passed to gnuplot: a non-finite ceiling is no ceiling (0). */
        x.cal.sgemm_1t_gflops = json_get_number(c, "sgemm_1t_gflops", 0);
        x.cal.sgemm_all_gflops = finite_or_0(json_get_number(c, "sgemm_all_gflops", 0));
        x.cal.all_threads = (int)finite_or_0(json_get_number(c, "all_threads", 0));
        x.cal.triad_1t_gbs = finite_or_0(json_get_number(c, "triad_1t_gbs", 0));
        x.cal.triad_all_gbs = finite_or_0(json_get_number(c, "triad_all_gbs", 0));
        x.cal.sgemm_n = 2048;
        snprintf(x.cal_source, sizeof x.cal_source, "copied into the rows, %s", json_get_str(c, "timestamp", "?"));
        x.have_cal = 1;
    }
    tb_error_clear();
    warn_shares_above_peak(&x);
    x.have_gnuplot = 1;
    snprintf(x.no_gnuplot, sizeof x.no_gnuplot, "gnuplot not found");
    struct stat gp_sb;
    /* --gnuplot naming a path: checked here, so that the report says what is wrong with it. */
    if (o->gnuplot && strchr(o->gnuplot, '/')) {
        const char *why = stat(o->gnuplot, &gp_sb) != 0 ? strerror(errno)
                          : S_ISDIR(gp_sb.st_mode)      ? "a directory"
                          : !S_ISREG(gp_sb.st_mode)     ? "not a regular file"
                          : access(o->gnuplot, X_OK)    ? "not executable"
                                                        : NULL;
        if (why) {
            x.have_gnuplot = 0;
            snprintf(x.no_gnuplot, sizeof x.no_gnuplot, "--gnuplot %s: not an executable (%s)", o->gnuplot, why);
        }
    }

    int n_keep = 0, n_unfinished = 0;
    for (int i = 0; i < x.rows.n; i++) n_keep += x.rows.keep[i], n_unfinished += !row_ok(x.rows.v[i]);
    const int n_superseded = x.rows.n - n_keep - n_unfinished;
    const struct json_value *last = x.rows.v[x.rows.n - 1];
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    fprintf(x.md, "# trainbench report\n\n");
    fprintf(x.md, "Generated by `bench report` on %s from `%s`: %d row%s, %d shown. Left out: %d superseded by a "
                  "later row of the same configuration (kind, workload, backend, batch and every option that changes "
                  "the work: %d fields such as device, optimizer, lr, steps, dataset and load, and the data's CRC-32 where "
                  "rows record it; a row's options column names those in which it differs from the other rows of its "
                  "backend, and the CRC where only it does), %d of runs that did not finish%s.\n\n",
            when, o->in, x.rows.n, x.rows.n == 1 ? "" : "s", n_keep, n_superseded,
            (int)N_VARIANT, n_unfinished,
            n_unfinished ? " (listed at the end)" : "");
    if (n_skipped)
        fprintf(x.md, "%ld %s of `%s` %s not read as %s (torn, malformed, without config or figures, or of a newer "
                      "schema than this build reads; "
                      "`bench report`'s warnings name %s), so %s in no count above.\n\n",
                n_skipped, n_skipped == 1 ? "line" : "lines", o->in, n_skipped == 1 ? "was" : "were",
                n_skipped == 1 ? "a result row" : "result rows", n_skipped == 1 ? "it" : "them",
                n_skipped == 1 ? "it is" : "they are");
    fprintf(x.md, "Machine of the latest row: %s, %s cores, %s GiB; %s; %s; %s (kernel set %s); commit %s.\n\n",
            json_get_str(last, "machine.cpu_model", "?"), cellf(json_get_number(last, "machine.n_cores", 0), "%g").s,
            cellf(json_get_number(last, "machine.mem_gib", 0), "%.1f").s, json_get_str(last, "machine.os", "?"),
            json_get_str(last, "build.compiler", "?"), json_get_str(last, "build.blas", "?"),
            json_get_str(last, "build.blas_core", "?"), json_get_str(last, "build.commit", "?"));
    double la_min = INFINITY, la_max = -INFINITY;
    for (int i = 0; i < x.rows.n; i++) {
        const double la = json_get_number(x.rows.v[i], "load_avg.0", NAN);
        if (!x.rows.keep[i] || !isfinite(la)) continue;
        la_min = la < la_min ? la : la_min;
        la_max = la > la_max ? la : la_max;
    }
    if (la_max >= 0.0) {
        /* Said as it was: a load above the core count means other processes competed for the CPU. */
        const double cores = json_get_number(last, "machine.n_cores", 0);
        fprintf(x.md, "1-minute load average when the rows shown were written: %.1f to %.1f on %s cores (%s).\n\n",
                la_min, la_max, cellf(cores, "%g").s,
                la_max > cores ? "above the core count at times: other processes competed for the CPU, and those "
                                 "rows' figures are noisier"
                               : "never above the core count: no sign of other processes competing for the CPU");
    }
    fprintf(x.md, "Every figure is measured on that machine unless it says *estimated*. Units are in the column "
                  "names; result-row fields carry them as suffixes (`_s`, `_per_s`, `_mib`, `_gflops`).\n\n");
    if (x.have_cal)
        fprintf(x.md, "**Machine ceilings** (`bench --calibrate`; %s): sgemm n=%d %.1f GFLOP/s on 1 thread, %.1f GFLOP/s "
                      "on %d threads; triad %.2f GB/s on 1 thread, %.2f GB/s on all.\n\n",
                x.cal_source, x.cal.sgemm_n, x.cal.sgemm_1t_gflops, x.cal.sgemm_all_gflops, x.cal.all_threads,
                x.cal.triad_1t_gbs, x.cal.triad_all_gbs);
    report_gpu_header(&x.gpu, x.md);
    section_throughput(&x);
    section_tta(&x);
    section_scaling(&x);
    section_projections(&x);
    section_inference(&x);
    section_train(&x);
    section_layers(&x);
    section_roofline(&x);
    section_profiles(&x);
    section_timeline(&x);
    /* Device specs sit beside the gnuplot scripts: <root>/plots and <root>/devices. */
    char devices_dir[1100];
    const size_t pl = strlen(o->plots_dir);
    if (pl >= 5 && !strcmp(o->plots_dir + pl - 5, "plots") && (pl == 5 || o->plots_dir[pl - 6] == '/'))
        snprintf(devices_dir, sizeof devices_dir, "%.*sdevices", (int)(pl - 5), o->plots_dir);
    else
        snprintf(devices_dir, sizeof devices_dir, "%s/../devices", o->plots_dir);
    report_seeds(&(struct report_seeds_in){x.md, (const struct json_value *const *)x.rows.v, x.rows.keep, x.rows.n,
                                            o->plots_dir, x.data_dir, &x, x.charts_dir, o->in, devices_dir,
                                            o->gnuplot, &x.n_charts});
    section_unfinished(&x);
    if (x.unwritten[0])
        fprintf(x.md, "---\n**This report is incomplete**: a chart's table could not be written (%s), so its section "
                      "lacks its table and chart.\n\n", x.unwritten);
    if (!x.have_gnuplot && !o->gnuplot)
        fprintf(x.md, "---\ngnuplot was not found, so this report has tables only (install gnuplot-nox).\n");
    else if (!x.have_gnuplot)
        fprintf(x.md, "---\n%s, so this report has tables only.\n", x.no_gnuplot);
    if (fclose(x.md) != 0 || rename(md_tmp, md_path) != 0) {
        st = tb_error_set(TB_EIO, "cannot write %s: %s", md_path, strerror(errno));
        remove(md_tmp);
    }
    x.md = NULL;
    if (st == TB_OK && x.unwritten[0])
        st = tb_error_set(TB_EIO, "cannot write %s; %s was written without that section's table and chart", x.unwritten,
                          md_path);
    if (!x.have_gnuplot) fprintf(stderr, "bench report: %s; REPORT.md has tables only\n", x.no_gnuplot);
    *n_charts = x.n_charts;
done:
    if (dir_lock >= 0) close(dir_lock);
    if (x.md) fclose(x.md);
    for (int i = 0; i < x.rows.n; i++) json_value_free(x.rows.v[i]);
    free(x.rows.v);
    free(x.rows.keep);
    free(x.rows.group);
    free(x.rows.seen);
    free(x.rows.show_crc);
    return st;
}
