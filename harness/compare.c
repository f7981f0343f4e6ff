/* compare.c — match result rows by configuration and test the change (see compare.h). */
#define _GNU_SOURCE
#include "compare.h"

#include "json.h"
#include "results.h"
#include "stats.h"
#include "status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct group {
    char key[600];
    struct compare_line line;
    double *s[2];    /* samples: old, new */
    int n[2], cap[2];
};

struct groups {
    struct group *g;
    int n, cap;
    int side;        /* 0 while reading OLD, 1 while reading NEW */
    int status;
    int unfinished[2]; /* rows skipped because their run did not finish, per side */
};

/* Config fields that change what is measured; the key is their values in this order. */
static const char *const key_fields[] = {
    "dataset", "threads", "devices", "resolution", "norm", "norm_groups", "conv_algo", "transport", "sync_bn",
    "stages", "split", "micro_batch", "ga", "replicas", "schedule", "recompute", "precision", "prefetch", "profile",
    "no_fuse", "optimizer", "lr", "target", "eval_every", "warmup", "steps", "epochs", "steps_per_epoch",
};

/* Appends "name=value" of a config field to buf when it is present and not a default-looking value. */
static void append_field(char *buf, size_t n, const struct json_value *cfg, const char *field, int always)
{
    const struct json_value *v = json_get(cfg, field);
    if (!v) return;
    char val[96] = "";
    if (v->type == JSON_STRING) snprintf(val, sizeof val, "%s", v->str);
    else if (v->type == JSON_NUMBER) snprintf(val, sizeof val, "%.9g", v->number);
    else if (v->type == JSON_BOOL) snprintf(val, sizeof val, "%d", v->boolean);
    else return;
    if (!always && (!val[0] || !strcmp(val, "0") || !strcmp(val, "auto") || !strcmp(val, "default") ||
                    !strcmp(val, "fp32") || !strcmp(val, "shm")))
        return;
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, " %s=%s", field, val);
}

static int add_sample(struct group *g, int side, double v)
{
    if (!isfinite(v)) return TB_OK;
    if (g->n[side] == g->cap[side]) {
        int cap = g->cap[side] ? 2 * g->cap[side] : 8;
        double *p = realloc(g->s[side], (size_t)cap * sizeof *p);
        if (!p) return tb_error_set(TB_ENOMEM, "compare: out of memory");
        g->s[side] = p, g->cap[side] = cap;
    }
    g->s[side][g->n[side]++] = v;
    return TB_OK;
}

static int on_row(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct groups *gs = ctx;
    const struct json_value *cfg = json_get(row, "config");
    if (!cfg || cfg->type != JSON_OBJECT) return TB_OK;
    /* A diverged or interrupted run measured part of a run: it is no sample of its configuration (rows
     * from before "status" existed count as finished). */
    if (strcmp(json_get_str(row, "status", "ok"), "ok") != 0) {
        gs->unfinished[gs->side]++;
        return TB_OK;
    }
    const char *kind = json_get_str(row, "kind", json_get_str(cfg, "plan", "train"));
    const char *workload = json_get_str(cfg, "workload", "?");
    const char *backend = json_get_str(cfg, "backend", "?");
    const int batch = (int)json_get_number(cfg, "batch", 0);
    /* Rows from before config.device ran on the cpu, so they still match today's cpu rows. */
    const char *device = json_get_str(cfg, "device", "cpu");
    char name[200], key[600];
    snprintf(name, sizeof name, "%s %s %s b%d", kind, workload, backend, batch);
    if (strcmp(device, "cpu") != 0) snprintf(name + strlen(name), sizeof name - strlen(name), " device=%s", device);
    /* The visible name shows the options that differ from defaults; the key holds every one. */
    for (size_t k = 0; k < sizeof key_fields / sizeof *key_fields; k++)
        if (!strcmp(key_fields[k], "threads") || !strcmp(key_fields[k], "devices") || !strcmp(key_fields[k], "resolution") ||
            !strcmp(key_fields[k], "precision") || !strcmp(key_fields[k], "conv_algo") || !strcmp(key_fields[k], "no_fuse") ||
            !strcmp(key_fields[k], "stages") || !strcmp(key_fields[k], "norm"))
            append_field(name, sizeof name, cfg, key_fields[k], 0);
    snprintf(key, sizeof key, "%s|%s|%s|%s|%d", kind, workload, backend, device, batch);
    for (size_t k = 0; k < sizeof key_fields / sizeof *key_fields; k++) append_field(key, sizeof key, cfg, key_fields[k], 1);

    struct group *g = NULL;
    for (int i = 0; i < gs->n; i++)
        if (!strcmp(gs->g[i].key, key)) g = &gs->g[i];
    if (!g) {
        if (gs->n == gs->cap) {
            int cap = gs->cap ? 2 * gs->cap : 16;
            struct group *p = realloc(gs->g, (size_t)cap * sizeof *p);
            if (!p) return tb_error_set(TB_ENOMEM, "compare: out of memory");
            gs->g = p, gs->cap = cap;
        }
        g = &gs->g[gs->n++];
        memset(g, 0, sizeof *g);
        snprintf(g->key, sizeof g->key, "%s", key);
        snprintf(g->line.name, sizeof g->line.name, "%s", name);
        const int tta = !strcmp(kind, "tta");
        snprintf(g->line.metric, sizeof g->line.metric, "%s", tta ? "tta s" : "images/s");
        g->line.higher_is_better = !tta;
    }
    const struct json_value *fig = json_get(row, "figures");
    if (!fig) return TB_OK;
    int st = TB_OK;
    if (!strcmp(kind, "tta")) {
        const struct json_value *runs = json_get(fig, "runs");
        for (int i = 0; runs && runs->type == JSON_ARRAY && i < runs->n && st == TB_OK; i++)
            if (json_get_bool(&runs->items[i], "reached", 0))
                st = add_sample(g, gs->side, json_get_number(&runs->items[i], "tta_s", NAN));
        return st;
    }
    const struct json_value *rep = json_get(fig, "repeat_images_per_s");
    if (rep && rep->type == JSON_ARRAY && rep->n > 0) {
        for (int i = 0; i < rep->n && st == TB_OK; i++)
            if (rep->items[i].type == JSON_NUMBER) st = add_sample(g, gs->side, rep->items[i].number);
        return st;
    }
    return add_sample(g, gs->side, json_get_number(fig, "images_per_s", NAN));
}

/* Two configurations with the same short name differ in a field the name leaves out (lr, steps,
 * target, ...): append the " field=value" words of the key that the namesakes do not all share. */
static void disambiguate(struct groups *gs)
{
    char *extra = calloc((size_t)(gs->n ? gs->n : 1), 200);
    if (!extra) return;
    for (int i = 0; i < gs->n; i++) {
        const char *words = strchr(gs->g[i].key, ' ');
        for (; words && *words; ) {
            const char *end = strchr(words + 1, ' ');
            size_t len = end ? (size_t)(end - words) : strlen(words);
            char word[128];
            snprintf(word, sizeof word, "%.*s ", (int)(len < 120 ? len : 120), words);
            int namesakes = 0, shared = 0;
            for (int j = 0; j < gs->n; j++) {
                if (j == i || strcmp(gs->g[j].line.name, gs->g[i].line.name)) continue;
                namesakes++;
                char hay[620];
                snprintf(hay, sizeof hay, "%s ", gs->g[j].key);
                shared += strstr(hay, word) != NULL;
            }
            if (namesakes && shared < namesakes && strlen(extra + 200 * i) + len < 190)
                strncat(extra + 200 * i, words, len);
            words = end;
        }
    }
    for (int i = 0; i < gs->n; i++) {
        size_t len = strlen(gs->g[i].line.name);
        snprintf(gs->g[i].line.name + len, sizeof gs->g[i].line.name - len, "%s", extra + 200 * i);
    }
    free(extra);
}

int compare_results(const char *old_path, const char *new_path, double alpha, struct compare_line **lines, int *n_lines)
{
    *lines = NULL;
    *n_lines = 0;
    struct groups gs = {0};
    int st = results_read_rows(old_path, on_row, &gs);
    if (st == TB_OK) {
        gs.side = 1;
        st = results_read_rows(new_path, on_row, &gs);
    }
    disambiguate(&gs);
    for (int k = 0; k < 2; k++)
        if (gs.unfinished[k])
            fprintf(stderr, "compare: %s: %d row%s of runs that did not finish (status not ok) skipped\n",
                    k ? new_path : old_path, gs.unfinished[k], gs.unfinished[k] == 1 ? "" : "s");
    struct compare_line *out = NULL;
    if (st == TB_OK && gs.n > 0 && !(out = calloc((size_t)gs.n, sizeof *out)))
        st = tb_error_set(TB_ENOMEM, "compare: out of memory");
    for (int i = 0; i < gs.n && st == TB_OK; i++) {
        struct group *g = &gs.g[i];
        struct compare_line *l = &g->line;
        l->n_old = g->n[0], l->n_new = g->n[1];
        l->p = 1.0;
        l->delta_pct = NAN;
        l->old_median = l->new_median = NAN;
        struct stats_summary so, sn;
        if (g->n[0] && stats_summarize(g->s[0], g->n[0], &so) == TB_OK) l->old_median = so.median, l->old_jitter = so.mad_jitter;
        if (g->n[1] && stats_summarize(g->s[1], g->n[1], &sn) == TB_OK) l->new_median = sn.median, l->new_jitter = sn.mad_jitter;
        if (g->n[0] && g->n[1]) {
            l->delta_pct = (l->new_median - l->old_median) / l->old_median * 100.0;
            double u, p;
            if (stats_mann_whitney_u(g->s[0], g->n[0], g->s[1], g->n[1], &u, &p) == TB_OK) l->p = p;
            l->significant = l->p < alpha;
        }
        tb_error_clear();
        out[i] = *l;
    }
    for (int i = 0; i < gs.n; i++) free(gs.g[i].s[0]), free(gs.g[i].s[1]);
    free(gs.g);
    if (st != TB_OK) {
        free(out);
        return st;
    }
    *lines = out;
    *n_lines = gs.n;
    return TB_OK;
}

static void fmt_value(char *buf, size_t n, double v, double jitter, int samples)
{
    char num[32];
    if (!isfinite(v)) {
        snprintf(buf, n, "-");
        return;
    }
    if (fabs(v) >= 1e6) snprintf(num, sizeof num, "%.3fM", v * 1e-6);
    else if (fabs(v) >= 1e4) snprintf(num, sizeof num, "%.2fk", v * 1e-3);
    else if (fabs(v) >= 100) snprintf(num, sizeof num, "%.1f", v);
    else snprintf(num, sizeof num, "%.3f", v);
    if (samples > 1 && v != 0.0) snprintf(buf, n, "%s ± %.0f%%", num, 100.0 * jitter / fabs(v));
    else snprintf(buf, n, "%s", num);
}

void compare_print(const struct compare_line *l, int n, double alpha, const char *old_name, const char *new_name, FILE *f)
{
    int width = 13;
    for (int i = 0; i < n; i++) {
        int w = (int)strlen(l[i].name);
        width = w > width ? w : width;
    }
    fprintf(f, "%-*s  %-9s  %18s  %18s  %s\n", width, "configuration", "metric", "old", "new", "change");
    double log_sum = 0.0;
    int n_geo = 0, n_only = 0;
    for (int i = 0; i < n; i++) {
        if (!l[i].n_old || !l[i].n_new) {
            n_only++;
            continue;
        }
        char a[48], b[48], delta[96];
        fmt_value(a, sizeof a, l[i].old_median, l[i].old_jitter, l[i].n_old);
        fmt_value(b, sizeof b, l[i].new_median, l[i].new_jitter, l[i].n_new);
        if (l[i].significant)
            snprintf(delta, sizeof delta, "%+.2f%% (p=%.3f n=%d+%d)", l[i].delta_pct, l[i].p, l[i].n_old, l[i].n_new);
        else
            snprintf(delta, sizeof delta, "~ (p=%.3f n=%d+%d)", l[i].p, l[i].n_old, l[i].n_new);
        fprintf(f, "%-*s  %-9s  %18s  %18s  %s\n", width, l[i].name, l[i].metric, a, b, delta);
        if (l[i].old_median > 0 && l[i].new_median > 0) {
            log_sum += log(l[i].new_median / l[i].old_median) * (l[i].higher_is_better ? 1.0 : -1.0);
            n_geo++;
        }
    }
    if (n_geo > 1)
        fprintf(f, "%-*s  %-9s  %18s  %18s  %+.2f%% (speed, new vs old; tta inverted)\n", width, "geomean", "", "", "",
                (exp(log_sum / n_geo) - 1.0) * 100.0);
    if (n_only) {
        fprintf(f, "\nonly in one file:\n");
        for (int i = 0; i < n; i++)
            if (!l[i].n_old || !l[i].n_new)
                fprintf(f, "  %-*s  only in %s\n", width, l[i].name, l[i].n_old ? old_name : new_name);
    }
    int few = 0;
    for (int i = 0; i < n; i++) few |= l[i].n_old && l[i].n_new && (l[i].n_old < 4 || l[i].n_new < 4);
    fprintf(f, "\nchange: difference of medians when a two-sided Mann-Whitney U test gives p < %g, else ~.\n", alpha);
    if (few) fprintf(f, "note: fewer than 4 samples on a side cannot reach p < 0.05; use --repeat 5 (or --seeds 5).\n");
}
