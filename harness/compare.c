/* compare.c — match result rows by configuration and test the change (see compare.h). */
#define _GNU_SOURCE
#include "compare.h"

#include "json.h"
#include "report_rows.h"
#include "results.h"
#include "stats.h"
#include "status.h"

#include <float.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IGNORE 8

struct group {
    char key[1024];
    struct compare_line line;
    double *s[2];    /* samples: old, new; +inf for a tta seed that missed its target */
    int n[2], cap[2];
    int missed[2];   /* of those, the tta seeds that missed, per side */
    int rows[2];     /* rows of this configuration, per side */
    char ign[2][MAX_IGNORE][48]; /* per side, the value of each ignored key first seen ("" before) */
    unsigned char ign_mixed[2][MAX_IGNORE]; /* 1 when a side's rows differ in that key */
    char algos[2][256];           /* per side, figures.conv_algos first seen ("" before or where absent) */
    unsigned char algos_mixed[2]; /* 1 when a side's rows ran different convolution algorithms */
};

struct groups {
    struct group *g;
    int n, cap;
    struct report_index keys; /* key → index into g: thousands of configurations made a linear search quadratic */
    int side;        /* 0 while reading OLD, 1 while reading NEW */
    int status;
    int unfinished[2]; /* rows skipped because their run did not finish, per side */
    int rows[2];       /* rows matched to a configuration, per side */
    int skipped[2];    /* samples that were no finite positive number below REPORT_FIGURE_MAX, per side */
    int crc_rows[2][2]; /* rows matched, per side, without [0] and with [1] config.data_crc32 */
    int default_threads[2]; /* per side: the cores a threads-backend row of the default --threads had (-1: several) */
    char ignore[MAX_IGNORE][32];
    int n_ignore;
};

/* Config fields that change what is measured; the key is their values in this order (a field a row lacks
 * adds nothing, so older rows without it still match each other). With key_fields_if_set below these hold
 * every field of the report's variant_fields (report.c) but "repeat" and "seeds": those only say how many
 * samples a row holds, and compare pools samples. Added to agree with it: "classes" (another output layer
 * is another model), "max_epochs" (tta's budget decides which seeds miss) and, if set, "load" (other
 * initial weights). "data_crc32", the CRC of the data a run trained and tested on, tells apart runs on
 * other data under one dataset name ("mnist" from two directories), as the report's key does: a row from
 * before rows carried it matches only rows without it (it cannot say which data it ran on, and matching it
 * to one that can would be a guess), so such a file against a newer one needs --ignore data_crc32, which
 * compare_results suggests. */
static const char *const key_fields[] = {
    "device", "dataset", "data_crc32", "classes", "threads", "devices", "resolution", "norm", "norm_groups", "conv_algo",
    "transport", "sync_bn", "stages", "split", "micro_batch", "ga", "replicas", "schedule", "recompute", "precision",
    "prefetch", "profile", "no_fuse", "optimizer", "lr", "target", "max_epochs", "eval_every", "warmup", "steps", "epochs",
    "steps_per_epoch", "steps_per_execution",
};
/* The same, keyed only when set (not 0, not ""): the recipe's fields, so rows of a build that did not record
 * them (absent) still match today's rows at their defaults. */
static const char *const key_fields_if_set[] = {
    "momentum", "weight_decay", "lr_schedule", "lr_warmup", "lr_decay_rate", "lr_decay_steps", "lr_power", "lr_final",
    "label_smoothing", "dropout", "loss_scale", "load",
};
/* Of those, the ones the visible name shows when they differ from their default. */
static const char *const name_fields[] = {"device", "threads", "devices", "resolution", "precision", "conv_algo", "no_fuse",
                                          "stages", "norm"};
/* The fields every name shows (the row's kind is not ignorable: it decides the metric). */
static const char *const head_fields[] = {"workload", "backend", "batch"};

#define COUNT(a) (sizeof(a) / sizeof *(a))

static int in_list(const char *const *list, size_t n, const char *field)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(list[k], field)) return 1;
    return 0;
}

/* Index of field among the ignored keys, or -1. */
static int ignored(const struct groups *gs, const char *field)
{
    for (int k = 0; k < gs->n_ignore; k++)
        if (!strcmp(gs->ignore[k], field)) return k;
    return -1;
}

/* Parses "backend,devices" into gs->ignore; TB_EINVAL for a key that is not part of the match, an empty
 * key (",", "a,,b", a trailing comma, "") or one given twice: each is a typo whose intent is unclear. */
static int parse_ignore(struct groups *gs, const char *list)
{
    if (!list) return TB_OK;
    for (const char *p = list;; p++) {
        const size_t len = strcspn(p, ",");
        if (!len)
            return tb_error_set(TB_EINVAL, "--ignore '%s': an empty key (give keys separated by single commas)",
                                list);
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(len < sizeof key - 1 ? len : sizeof key - 1), p);
        if (len >= sizeof key ||
            (!in_list(head_fields, COUNT(head_fields), key) && !in_list(key_fields, COUNT(key_fields), key) &&
             !in_list(key_fields_if_set, COUNT(key_fields_if_set), key)))
            return tb_error_set(TB_EINVAL, "--ignore %.*s: not a key rows are matched by (workload, backend, "
                                           "batch, or a config field such as devices, threads, precision)", (int)len, p);
        if (ignored(gs, key) >= 0) return tb_error_set(TB_EINVAL, "--ignore '%s': %s is given twice", list, key);
        if (gs->n_ignore == MAX_IGNORE) return tb_error_set(TB_EINVAL, "--ignore: at most %d keys", MAX_IGNORE);
        snprintf(gs->ignore[gs->n_ignore++], sizeof gs->ignore[0], "%s", key);
        p += len;
        if (!*p) return TB_OK;
    }
}

/* The text of a scalar config field into val; 0 when it is absent or not a scalar. */
static int field_text(const struct json_value *cfg, const char *field, char *val, size_t n)
{
    const struct json_value *v = json_get(cfg, field);
    /* Rows from before config.device ran on the cpu, so they still match today's cpu rows. */
    if (!v && !strcmp(field, "device")) return snprintf(val, n, "cpu"), 1;
    if (!v) return 0;
    if (v->type == JSON_STRING) snprintf(val, n, "%s", v->str);
    else if (v->type == JSON_NUMBER) snprintf(val, n, "%.9g", v->number);
    else if (v->type == JSON_BOOL) snprintf(val, n, "%d", v->boolean);
    else return 0;
    return 1;
}

/* Appends "name=value" of a config field to buf when it is present and not a default-looking value. */
static void append_field(char *buf, size_t n, const struct json_value *cfg, const char *field, int always)
{
    char val[96] = "";
    if (!field_text(cfg, field, val, sizeof val)) return;
    if (!always && (!val[0] || !strcmp(val, "0") || !strcmp(val, "auto") || !strcmp(val, "default") ||
                    !strcmp(val, "fp32") || !strcmp(val, "shm") ||
                    (!strcmp(field, "device") && !strcmp(val, "cpu"))))
        return;
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, " %s=%s", field, val);
}

/* Appends v to g's samples of the side being read. */
static int push_sample(struct groups *gs, struct group *g, double v)
{
    const int side = gs->side;
    if (g->n[side] == g->cap[side]) {
        int cap = g->cap[side] ? 2 * g->cap[side] : 8;
        double *p = realloc(g->s[side], (size_t)cap * sizeof *p);
        if (!p) return tb_error_set(TB_ENOMEM, "out of memory");
        g->s[side] = p, g->cap[side] = cap;
    }
    g->s[side][g->n[side]++] = v;
    return TB_OK;
}

/* Adds v to g's samples of the side being read. A rate or time that is not a finite positive number
 * (inf from 1e400, a negative or zero images/s), or one no run reaches (1e308: REPORT_FIGURE_MAX, as the
 * report hides it), measures nothing: skipped and counted for a warning. */
static int add_sample(struct groups *gs, struct group *g, double v)
{
    if (!(v > 0.0 && v < REPORT_FIGURE_MAX)) {
        gs->skipped[gs->side]++;
        return TB_OK;
    }
    return push_sample(gs, g, v);
}

/* One tta seed: its time when it reached the target; +inf when it missed, as the plan's olympic mean counts
 * it (plan_tta.c), since dropping it would make a run that misses more often look faster. A run without a
 * "reached" flag says neither: skipped. */
static int add_tta_run(struct groups *gs, struct group *g, const struct json_value *run)
{
    const struct json_value *r = json_get(run, "reached");
    if (!r || r->type != JSON_BOOL) {
        gs->skipped[gs->side]++;
        return TB_OK;
    }
    if (r->boolean) return add_sample(gs, g, json_get_number(run, "tta_s", NAN));
    g->missed[gs->side]++;
    return push_sample(gs, g, INFINITY);
}

/* Notes the values of the ignored keys of one row of g's side. */
static void note_ignored(const struct groups *gs, struct group *g, const struct json_value *cfg)
{
    for (int k = 0; k < gs->n_ignore; k++) {
        char val[48] = "?";
        field_text(cfg, gs->ignore[k], val, sizeof val);
        char *seen = g->ign[gs->side][k];
        if (!seen[0]) snprintf(seen, sizeof g->ign[0][0], "%s", val);
        else if (strcmp(seen, val)) g->ign_mixed[gs->side][k] = 1;
    }
}

static int on_row(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct groups *gs = ctx;
    /* The reader's row, freed after this call: the defaults its run had written in, so that a default and the same
     * value typed out (--threads 2 on 2 cores) are one configuration, as in the report. */
    const int default_threads = report_row_effective((struct json_value *)row);
    const struct json_value *cfg = json_get(row, "config");
    if (!cfg || cfg->type != JSON_OBJECT) return TB_OK;
    if (default_threads) { /* the core counts they had, for the hint should the two files' differ */
        const int n = (int)json_get_number(cfg, "threads", 0), *have = &gs->default_threads[gs->side];
        gs->default_threads[gs->side] = !*have || *have == n ? n : -1;
    }
    /* A diverged or interrupted run measured part of a run: it is no sample of its configuration (rows
     * from before "status" existed count as finished). */
    if (strcmp(json_get_str(row, "status", "ok"), "ok") != 0) {
        gs->unfinished[gs->side]++;
        return TB_OK;
    }
    const char *kind = json_get_str(row, "kind", json_get_str(cfg, "plan", "train"));
    char name[200], key[1024];
    snprintf(name, sizeof name, "%s", kind);
    snprintf(key, sizeof key, "%s|", kind);
    /* workload, backend, b<batch>; an ignored one is left out of both. */
    for (size_t k = 0; k < COUNT(head_fields); k++) {
        char val[64] = "?";
        if (ignored(gs, head_fields[k]) >= 0) continue;
        /* A batch no int holds (1e30, −5: a row edited by hand) is "-", compare's empty mark (cast to int, 1e30
         * was undefined and printed b-2147483648). */
        const int batch = report_int(json_get_number(cfg, "batch", 0), 0, INT_MAX, -1);
        if (!strcmp(head_fields[k], "batch")) snprintf(val, sizeof val, batch >= 0 ? "%d" : "-", batch);
        else field_text(cfg, head_fields[k], val, sizeof val);
        size_t nl = strlen(name), kl = strlen(key);
        snprintf(name + nl, sizeof name - nl, " %s%s", strcmp(head_fields[k], "batch") ? "" : "b", val);
        snprintf(key + kl, sizeof key - kl, "%s=%s|", head_fields[k], val);
    }
    /* A throughput row sized by --time-budget (figures.time_budget_s): its steps and warm-up are what the budget
     * chose at the speed of the moment (7/28, then 8/33, for one command), so the budget keys it instead, as
     * the report does: one command is one configuration. */
    double budget = json_get_number(row, "figures.time_budget_s", 0.0);
    if (!(isfinite(budget) && budget > 0.0) || strcmp(kind, "throughput")) budget = 0.0;
    /* A --warmup given runs in full whatever the budget: the user's warm-up is keyed (config.warmup_given). */
    const int warmup_given = json_get_bool(cfg, "warmup_given", 0);
    /* The visible name shows the options that differ from defaults; the key holds every one. */
    for (size_t k = 0; k < COUNT(key_fields); k++) {
        if (ignored(gs, key_fields[k]) >= 0) continue;
        if (budget > 0.0 && (!strcmp(key_fields[k], "steps") || (!strcmp(key_fields[k], "warmup") && !warmup_given))) {
            const size_t kl = strlen(key);
            if (!strcmp(key_fields[k], "steps")) snprintf(key + kl, sizeof key - kl, " time_budget_s=%.9g", budget);
            continue;
        }
        if (in_list(name_fields, COUNT(name_fields), key_fields[k])) append_field(name, sizeof name, cfg, key_fields[k], 0);
        append_field(key, sizeof key, cfg, key_fields[k], 1);
    }
    for (size_t k = 0; k < COUNT(key_fields_if_set); k++)
        if (ignored(gs, key_fields_if_set[k]) < 0) append_field(key, sizeof key, cfg, key_fields_if_set[k], 0);

    int id, added;
    int st = report_index_add(&gs->keys, key, &id, &added);
    if (st != TB_OK) return st;
    struct group *g = added ? NULL : &gs->g[id];
    if (!g) {
        if (gs->n == gs->cap) {
            int cap = gs->cap ? 2 * gs->cap : 16;
            struct group *p = realloc(gs->g, (size_t)cap * sizeof *p);
            if (!p) return tb_error_set(TB_ENOMEM, "out of memory");
            gs->g = p, gs->cap = cap;
        }
        g = &gs->g[gs->n++];
        TB_ASSERT(id == gs->n - 1); /* ids and groups are both in order of first appearance */
        memset(g, 0, sizeof *g);
        snprintf(g->key, sizeof g->key, "%s", key);
        snprintf(g->line.name, sizeof g->line.name, "%s", name);
        const int tta = !strcmp(kind, "tta");
        snprintf(g->line.metric, sizeof g->line.metric, "%s", tta ? "tta s" : "images/s");
        g->line.higher_is_better = !tta;
    }
    note_ignored(gs, g, cfg);
    /* The kernels each row ran (--conv-algo auto's choices): a change between the sides may be theirs. */
    const char *algos = json_get_str(row, "figures.conv_algos", "");
    char *seen = g->algos[gs->side];
    if (algos[0] && !seen[0]) snprintf(seen, sizeof g->algos[0], "%s", algos);
    else if (algos[0] && strncmp(seen, algos, sizeof g->algos[0] - 1)) g->algos_mixed[gs->side] = 1;
    gs->rows[gs->side]++;
    gs->crc_rows[gs->side][json_get(cfg, "data_crc32") != NULL]++;
    g->rows[gs->side]++;
    const struct json_value *fig = json_get(row, "figures");
    if (!fig) return TB_OK;
    if (!strcmp(kind, "tta")) {
        const struct json_value *runs = json_get(fig, "runs");
        for (int i = 0; runs && runs->type == JSON_ARRAY && i < runs->n && st == TB_OK; i++)
            st = add_tta_run(gs, g, &runs->items[i]);
        return st;
    }
    const struct json_value *rep = json_get(fig, "repeat_images_per_s");
    if (rep && rep->type == JSON_ARRAY && rep->n > 0) {
        for (int i = 0; i < rep->n && st == TB_OK; i++)
            st = add_sample(gs, g, rep->items[i].type == JSON_NUMBER ? rep->items[i].number : NAN);
        return st;
    }
    return add_sample(gs, g, json_get_number(fig, "images_per_s", NAN));
}

/* Whether the key word w (" field=value", len bytes) is one disambiguate's pass crc takes: the data's CRC
 * in pass 1, every other word in pass 0. */
static int pass_word(const char *w, size_t len, int crc)
{
    static const char tag[] = " data_crc32=";
    return (len >= sizeof tag - 1 && !strncmp(w, tag, sizeof tag - 1)) == crc;
}

/* Two configurations with the same short name differ in a field the name leaves out (lr, steps,
 * target, ...): append the " field=value" words of the key that the namesakes do not all share. Pass 0
 * takes every word but the data's CRC; pass 1 (after it) the CRC alone, only where the names are still
 * alike: it says nothing where lr already tells two runs apart. Names and words go through indexes, so the
 * time is linear in the words (it compared every pair of configurations, a formatted key per pair). */
static void disambiguate(struct groups *gs, int crc)
{
    const size_t n = (size_t)(gs->n ? gs->n : 1);
    struct report_index names, words;
    report_index_init(&names);
    report_index_init(&words);
    int *name_of = malloc(n * sizeof *name_of), *namesakes = calloc(n, sizeof *namesakes);
    int *count = NULL, *last = NULL, cap = 0; /* per word of a name: keys holding it, the last that did */
    char *extra = calloc(n, 200);
    int st = name_of && namesakes && extra ? TB_OK : TB_ENOMEM;
    for (int i = 0; i < gs->n && st == TB_OK; i++)
        if ((st = report_index_add(&names, gs->g[i].line.name, &name_of[i], NULL)) == TB_OK) namesakes[name_of[i]]++;
    /* Each word counted once per key that holds it, among the keys of one name ("<name id> word"). */
    for (int i = 0; i < gs->n && st == TB_OK; i++) {
        if (namesakes[name_of[i]] < 2) continue;
        for (const char *w = strchr(gs->g[i].key, ' '); w && *w && st == TB_OK;) {
            const char *end = strchr(w + 1, ' ');
            const size_t len = end ? (size_t)(end - w) : strlen(w);
            char word[1100];
            snprintf(word, sizeof word, "%d%.*s", name_of[i], (int)len, w);
            int id, added;
            if (pass_word(w, len, crc) && (st = report_index_add(&words, word, &id, &added)) == TB_OK) {
                if (id >= cap) {
                    const int c2 = cap ? 2 * cap : 256;
                    int *pc = realloc(count, (size_t)c2 * sizeof *pc), *pl = pc ? realloc(last, (size_t)c2 * sizeof *pl) : NULL;
                    if (pc) count = pc;
                    if (pl) last = pl, cap = c2;
                    else st = TB_ENOMEM;
                }
                if (st == TB_OK && added) count[id] = 0, last[id] = -1;
                if (st == TB_OK && last[id] != i) count[id]++, last[id] = i;
            }
            w = end;
        }
    }
    /* A word not every namesake holds tells this one apart. Key words are at most " steps_per_execution=" and
     * a 95-byte value: none is cut. */
    for (int i = 0; i < gs->n && st == TB_OK; i++) {
        const int m = namesakes[name_of[i]];
        if (m < 2) continue;
        for (const char *w = strchr(gs->g[i].key, ' '); w && *w;) {
            const char *end = strchr(w + 1, ' ');
            const size_t len = end ? (size_t)(end - w) : strlen(w);
            char word[1100];
            snprintf(word, sizeof word, "%d%.*s", name_of[i], (int)len, w);
            const int id = pass_word(w, len, crc) ? report_index_find(&words, word) : -1;
            if (id >= 0 && count[id] < m && strlen(extra + 200 * i) + len < 190) strncat(extra + 200 * i, w, len);
            w = end;
        }
    }
    for (int i = 0; i < gs->n && st == TB_OK; i++) {
        size_t len = strlen(gs->g[i].line.name);
        snprintf(gs->g[i].line.name + len, sizeof gs->g[i].line.name - len, "%s", extra + 200 * i);
    }
    /* Out of memory: the names as they are (the lines still say which is which by their order). */
    if (st != TB_OK) tb_error_clear();
    free(name_of), free(namesakes), free(count), free(last), free(extra);
    report_index_free(&names);
    report_index_free(&words);
}

/* Appends what the ignored keys were on each side: " [backend cpu → threads]"; a side whose rows
 * differ in a key shows "*"; a key equal on both sides shows once. Then " [conv_algos differ]" where the
 * sides' rows ran other convolution algorithms (" within a side" where one side's rows did). */
static void annotate_ignored(const struct groups *gs, struct group *g)
{
    char note[160] = "";
    for (int k = 0; k < gs->n_ignore; k++) {
        const char *v[2];
        for (int s = 0; s < 2; s++) v[s] = g->ign_mixed[s][k] ? "*" : g->ign[s][k];
        size_t len = strlen(note);
        const char *sep = len ? "; " : "";
        if (!v[0][0] || !v[1][0] || !strcmp(v[0], v[1]))
            snprintf(note + len, sizeof note - len, "%s%s %s", sep, gs->ignore[k], v[0][0] ? v[0] : v[1]);
        else
            snprintf(note + len, sizeof note - len, "%s%s %s → %s", sep, gs->ignore[k], v[0], v[1]);
    }
    size_t len = strlen(g->line.name);
    if (note[0]) snprintf(g->line.name + len, sizeof g->line.name - len, " [%s]", note);
    /* Rows that ran other convolution algorithms measured other kernels as well as the change compared. */
    const int differ = g->algos[0][0] && g->algos[1][0] && strcmp(g->algos[0], g->algos[1]);
    len = strlen(g->line.name);
    if (differ || g->algos_mixed[0] || g->algos_mixed[1])
        snprintf(g->line.name + len, sizeof g->line.name - len, " [conv_algos differ%s]",
                 differ ? "" : " within a side");
}

int compare_median_ci(const double *x, int n, double level, double *lo, double *hi)
{
    *lo = -INFINITY, *hi = INFINITY;
    if (!x || n < 1 || !(level > 0.0 && level < 1.0))
        return tb_error_set(TB_EINVAL, "compare_median_ci: %d samples at level %g", n, level);
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return tb_error_set(TB_ENOMEM, "compare_median_ci: out of memory");
    memcpy(s, x, (size_t)n * sizeof *s);
    gsl_sort(s, 1, (size_t)n);
    /* [x(j), x(n+1-j)] (1-based order statistics) holds the median with probability
     * 1 − 2·P(B ≤ j − 1), B ~ Binomial(n, 1/2), whatever the distribution: the largest j that still
     * covers `level` gives the narrowest such interval. */
    int best = 0;
    for (int j = 1; 2 * j <= n + 1; j++)
        if (1.0 - 2.0 * gsl_cdf_binomial_P((unsigned)(j - 1), 0.5, (unsigned)n) >= level) best = j;
    if (best) *lo = s[best - 1], *hi = s[n - best];
    free(s);
    return TB_OK;
}

double compare_min_p(int n1, int n2)
{
    if (n1 < 1 || n2 < 1) return 1.0;
    const int k = n1 < n2 ? n1 : n2, m = n1 + n2 - k;
    double c = 1.0; /* C(n1 + n2, k), built up as a product so that it stays exact while it is small */
    for (int i = 1; i <= k; i++) c = c * (m + i) / i;
    return fmin(1.0, 2.0 / c);
}

/* The median of x[0..n) (n ≥ 1), which may hold +inf (missed tta seeds): +inf when the middle reaches one. */
static int sample_median(const double *x, int n, double *med)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return tb_error_set(TB_ENOMEM, "out of memory");
    memcpy(s, x, (size_t)n * sizeof *s);
    gsl_sort(s, 1, (size_t)n);
    /* Halves added, not the sum halved: inf stays inf, and two huge rates do not overflow. */
    *med = n % 2 ? s[n / 2] : s[n / 2 - 1] / 2 + s[n / 2] / 2;
    free(s);
    return TB_OK;
}

/* Mann–Whitney U and p of g's old samples against its new ones. stats_mann_whitney_u takes finite values
 * only; the test uses ranks alone, so a miss (+inf) becomes one value above every finite sample: it ranks
 * above every time and ties with the other misses, as +inf would. */
static int group_u_test(const struct group *g, double *u, double *p)
{
    const int n = g->n[0] + g->n[1];
    double *x = malloc((size_t)n * sizeof *x), top = 0.0;
    if (!x) return tb_error_set(TB_ENOMEM, "out of memory");
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < g->n[s]; i++)
            if (isfinite(g->s[s][i])) top = fmax(top, g->s[s][i]);
    top = nextafter(top, INFINITY);
    if (!isfinite(top)) top = DBL_MAX; /* a finite sample of DBL_MAX s would tie with the misses: none is real */
    for (int s = 0, k = 0; s < 2; s++)
        for (int i = 0; i < g->n[s]; i++) x[k++] = isfinite(g->s[s][i]) ? g->s[s][i] : top;
    int st = stats_mann_whitney_u(x, g->n[0], x + g->n[0], g->n[1], u, p);
    free(x);
    return st;
}

/* Whether a configuration only in the old file and one only in the new are one without field (its " field=VALUE"
 * left out of both keys): a hint to --ignore it then names rows it would match (one at b8 against one at b16 it
 * would not). Linear in the configurations, through an index of the old side's reduced keys. */
static int one_sided_pair_without(const struct groups *gs, const char *field)
{
    char tok[64];
    snprintf(tok, sizeof tok, " %s=", field);
    struct report_index ix;
    report_index_init(&ix);
    int found = 0;
    for (int side = 0; side < 2 && !found; side++)
        for (int i = 0; i < gs->n && !found; i++) {
            const struct group *g = &gs->g[i];
            if (!g->rows[side] || g->rows[!side]) continue;
            char red[sizeof g->key];
            snprintf(red, sizeof red, "%s", g->key);
            char *at = strstr(red, tok);
            if (at) {
                const char *end = strchr(at + 1, ' ');
                memmove(at, end ? end : at + strlen(at), strlen(end ? end : at + strlen(at)) + 1);
            }
            int id;
            if (side == 0 && report_index_add(&ix, red, &id, NULL) != TB_OK) break;
            if (side == 1) found = report_index_find(&ix, red) >= 0;
        }
    report_index_free(&ix);
    return found;
}

int compare_results(const char *old_path, const char *new_path, const struct compare_opts *o,
                    struct compare_line **lines, int *n_lines)
{
    *lines = NULL;
    *n_lines = 0;
    struct groups gs = {0};
    const double alpha = o && o->alpha > 0.0 ? o->alpha : 0.05;
    int st = parse_ignore(&gs, o ? o->ignore : NULL);
    if (st == TB_OK) st = results_read_rows_stream(old_path, on_row, &gs, NULL);
    if (st == TB_OK) {
        gs.side = 1;
        st = results_read_rows_stream(new_path, on_row, &gs, NULL);
    }
    if (st == TB_OK) {
        disambiguate(&gs, 0);
        disambiguate(&gs, 1);
    }
    for (int i = 0; i < gs.n; i++) annotate_ignored(&gs, &gs.g[i]);
    /* One side's rows from before rows carried the data's CRC, the other's with it: they match nothing
     * (data_crc32 above), which reads as "every configuration only in one file" unless said. */
    int one_sided = 0;
    for (int i = 0; i < gs.n; i++) one_sided |= !gs.g[i].rows[0] || !gs.g[i].rows[1];
    if (st == TB_OK && one_sided && ignored(&gs, "data_crc32") < 0 &&
        ((gs.crc_rows[0][0] && gs.crc_rows[1][1]) || (gs.crc_rows[0][1] && gs.crc_rows[1][0])))
        fprintf(stderr, "bench compare: %s has rows without config.data_crc32 (written before rows carried it) and %s rows "
                        "with it; they match only rows like them: --ignore data_crc32 matches them by the rest\n",
                gs.crc_rows[0][0] && gs.crc_rows[1][1] ? old_path : new_path,
                gs.crc_rows[0][0] && gs.crc_rows[1][1] ? new_path : old_path);
    /* Rows of the default --threads match by the cores they had: two machines' (or affinities') differ. */
    const int *dt = gs.default_threads;
    if (st == TB_OK && one_sided && ignored(&gs, "threads") < 0 && dt[0] && dt[1] && dt[0] != dt[1] &&
        one_sided_pair_without(&gs, "threads")) {
        char n[2][24];
        for (int k = 0; k < 2; k++) {
            if (dt[k] > 0) snprintf(n[k], sizeof n[k], "%d core%s", dt[k], dt[k] == 1 ? "" : "s");
            else snprintf(n[k], sizeof n[k], "several core counts");
        }
        fprintf(stderr, "bench compare: the threads backend's rows of the default --threads (every usable core) ran on %s "
                        "in %s and %s in %s, so they do not match: --ignore threads matches them by the rest\n",
                n[0], old_path, n[1], new_path);
    }
    /* cpu.jsonl against threads.jsonl with --ignore backend (the README's example once): the threads rows record
     * --threads, which no other backend's row has, so nothing matched and the table was empty without a word. */
    int alone[2][2] = {{0}}; /* per side, configurations only there: of other backends [0], of threads [1] */
    const int kb = ignored(&gs, "backend");
    for (int i = 0; kb >= 0 && i < gs.n; i++)
        for (int k = 0; k < 2; k++)
            if (gs.g[i].rows[k] && !gs.g[i].rows[!k]) alone[k][!strcmp(gs.g[i].ign[k][kb], "threads")] = 1;
    if (st == TB_OK && kb >= 0 && ignored(&gs, "threads") < 0 &&
        ((alone[0][0] && alone[1][1]) || (alone[0][1] && alone[1][0])) && one_sided_pair_without(&gs, "threads"))
        fprintf(stderr, "bench compare: the threads backend's rows record --threads, which other backends' rows lack, "
                        "so --ignore backend alone matches them to none: --ignore backend,threads matches them by the "
                        "rest\n");
    for (int k = 0; k < 2; k++)
        if (gs.unfinished[k])
            fprintf(stderr, "bench compare: %s: %d row%s of runs that did not finish (status not ok) skipped\n",
                    k ? new_path : old_path, gs.unfinished[k], gs.unfinished[k] == 1 ? "" : "s");
    for (int k = 0; k < 2; k++)
        if (gs.skipped[k])
            fprintf(stderr, "bench compare: %s: %d sample%s that %s not finite positive rates or times below 1e15 skipped\n",
                    k ? new_path : old_path, gs.skipped[k], gs.skipped[k] == 1 ? "" : "s",
                    gs.skipped[k] == 1 ? "is" : "are");
    /* A side without rows compares nothing: an empty table (or none) would read as "no change". */
    for (int k = 0; k < 2 && st == TB_OK; k++)
        if (!gs.rows[k])
            st = tb_error_set(TB_EFORMAT, "%s: no usable result rows (%s)", k ? new_path : old_path,
                              gs.unfinished[k] ? "only rows of runs that did not finish"
                                               : "it is empty, or no line is a well-formed row with a config");
    struct compare_line *out = NULL;
    if (st == TB_OK && gs.n > 0 && !(out = calloc((size_t)gs.n, sizeof *out)))
        st = tb_error_set(TB_ENOMEM, "out of memory");
    for (int i = 0; i < gs.n && st == TB_OK; i++) {
        struct group *g = &gs.g[i];
        struct compare_line *l = &g->line;
        l->n_old = g->n[0], l->n_new = g->n[1];
        l->missed_old = g->missed[0], l->missed_new = g->missed[1];
        l->rows_old = g->rows[0], l->rows_new = g->rows[1];
        l->p = 1.0;
        l->delta_pct = NAN;
        l->old_median = l->new_median = NAN;
        double *med[2] = {&l->old_median, &l->new_median}, *lo[2] = {&l->old_lo, &l->new_lo},
               *hi[2] = {&l->old_hi, &l->new_hi};
        for (int s = 0; s < 2; s++) {
            *lo[s] = -INFINITY, *hi[s] = INFINITY;
            if (g->n[s] && sample_median(g->s[s], g->n[s], med[s]) == TB_OK)
                compare_median_ci(g->s[s], g->n[s], COMPARE_CI_LEVEL, lo[s], hi[s]);
        }
        l->u = NAN;
        if (g->n[0] && g->n[1]) {
            /* A median that is a miss has no size to take a percentage of: NaN, and the print says which. */
            if (isfinite(l->old_median) && isfinite(l->new_median))
                l->delta_pct = (l->new_median - l->old_median) / l->old_median * 100.0;
            double u, p;
            /* No exact test gets below its floor; the normal approximation stats.c uses under ties (the
             * misses tie) can, on few samples: 3 times against 4 misses would give 0.032, not 2/35. */
            if (group_u_test(g, &u, &p) == TB_OK) l->u = u, l->p = fmax(p, compare_min_p(g->n[0], g->n[1]));
            l->significant = l->p < alpha;
        }
        tb_error_clear();
        out[i] = *l;
    }
    for (int i = 0; i < gs.n; i++) free(gs.g[i].s[0]), free(gs.g[i].s[1]);
    free(gs.g);
    report_index_free(&gs.keys);
    if (st != TB_OK) {
        free(out);
        return st;
    }
    *lines = out;
    *n_lines = gs.n;
    return TB_OK;
}

/* Field width for s so that it fills w columns: UTF-8 continuation bytes ("±", "∞") take none. */
static int cols(const char *s, int w)
{
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) == 0x80;
    return w;
}

/* "1.23k ± 4%": the median and the half-width of its confidence interval in percent of it (the wider
 * side, as benchstat prints it); "± ∞" when the samples are too few for the interval or it reaches a missed
 * seed; "no score" for a median that is a miss (+inf), as the tta plan prints a run without a time. */
static void fmt_value(char *buf, size_t n, double v, double lo, double hi)
{
    char num[32];
    if (isinf(v) && v > 0) {
        snprintf(buf, n, "no score");
        return;
    }
    if (!isfinite(v)) {
        snprintf(buf, n, "-");
        return;
    }
    if (fabs(v) >= 1e6) snprintf(num, sizeof num, "%.3fM", v * 1e-6);
    else if (fabs(v) >= 1e4) snprintf(num, sizeof num, "%.2fk", v * 1e-3);
    else if (fabs(v) >= 100) snprintf(num, sizeof num, "%.1f", v);
    else snprintf(num, sizeof num, "%.3f", v);
    const double half = fmax(hi - v, v - lo), pct = v != 0.0 ? 100.0 * half / fabs(v) : INFINITY;
    if (!isfinite(pct)) snprintf(buf, n, "%s ± ∞", num);
    else snprintf(buf, n, pct < 9.95 ? "%s ± %.1f%%" : "%s ± %.0f%%", num, pct);
}

/* The change column: the difference of medians in percent when significant, "~" when not; where a median
 * is a miss there is no percentage, so a significant change says its direction in words. Then how many
 * seeds missed on each side, where any did. */
static void fmt_change(char *buf, size_t n, const struct compare_line *l)
{
    int len;
    if (!l->significant) {
        len = snprintf(buf, n, "~ (p=%.3f n=%d+%d)", l->p, l->n_old, l->n_new);
    } else if (isfinite(l->delta_pct)) {
        len = snprintf(buf, n, "%+.2f%% (p=%.3f n=%d+%d)", l->delta_pct, l->p, l->n_old, l->n_new);
    } else {
        /* U counts pairs with old > new: above half of them, new is lower (faster, for a time). */
        const int new_lower = l->u > 0.5 * l->n_old * l->n_new;
        const char *word = l->higher_is_better ? (new_lower ? "worse" : "better") : (new_lower ? "faster" : "slower");
        len = snprintf(buf, n, "new %s (p=%.3f n=%d+%d)", word, l->p, l->n_old, l->n_new);
    }
    if ((l->missed_old || l->missed_new) && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " old %d of %d missed, new %d of %d missed", l->missed_old, l->n_old,
                 l->missed_new, l->n_new);
}

void compare_print(const struct compare_line *l, int n, const struct compare_opts *o, const char *old_name,
                   const char *new_name, FILE *f)
{
    const double alpha = o && o->alpha > 0.0 ? o->alpha : 0.05;
    int width = 13;
    for (int i = 0; i < n; i++) {
        int w = (int)strlen(l[i].name) - cols(l[i].name, 0);
        width = w > width ? w : width;
    }
    const char *ha = "old ± 95 % CI", *hb = "new ± 95 % CI";
    fprintf(f, "%-*s  %-9s  %*s  %*s  %s\n", width, "configuration", "metric", cols(ha, 20), ha, cols(hb, 20), hb,
            "change");
    double log_sum = 0.0;
    int n_geo = 0, n_only = 0, n_unsampled = 0, n_inf = 0, n_missed = 0;
    for (int i = 0; i < n; i++) {
        if (!l[i].n_old || !l[i].n_new) {
            if (l[i].rows_old && l[i].rows_new) n_unsampled++;
            else n_only++;
            continue;
        }
        char a[48], b[48], delta[160];
        fmt_value(a, sizeof a, l[i].old_median, l[i].old_lo, l[i].old_hi);
        fmt_value(b, sizeof b, l[i].new_median, l[i].new_lo, l[i].new_hi);
        fmt_change(delta, sizeof delta, &l[i]);
        n_inf += l[i].n_old < 6 || l[i].n_new < 6;
        n_missed += l[i].missed_old || l[i].missed_new;
        fprintf(f, "%-*s  %-*s  %*s  %*s  %s\n", cols(l[i].name, width), l[i].name, 9, l[i].metric, cols(a, 20), a,
                cols(b, 20), b, delta);
        if (l[i].old_median > 0 && l[i].new_median > 0 && isfinite(l[i].old_median) && isfinite(l[i].new_median)) {
            log_sum += log(l[i].new_median / l[i].old_median) * (l[i].higher_is_better ? 1.0 : -1.0);
            n_geo++;
        }
    }
    if (n_geo > 1)
        fprintf(f, "%-*s  %-9s  %20s  %20s  %+.2f%% (speed, new vs old; tta inverted)\n", width, "geomean", "", "", "",
                (exp(log_sum / n_geo) - 1.0) * 100.0);
    if (n_only) {
        fprintf(f, "\nonly in one file:\n");
        for (int i = 0; i < n; i++)
            if ((!l[i].n_old || !l[i].n_new) && !(l[i].rows_old && l[i].rows_new))
                fprintf(f, "  %-*s  only in %s\n", cols(l[i].name, width), l[i].name, l[i].rows_old ? old_name : new_name);
    }
    /* In both files, but a side has no sample to test (every one non-finite or not positive). */
    if (n_unsampled) {
        fprintf(f, "\nin both files, nothing to compare:\n");
        for (int i = 0; i < n; i++)
            if ((!l[i].n_old || !l[i].n_new) && l[i].rows_old && l[i].rows_new)
                fprintf(f, "  %-*s  no finite samples in %s%s%s\n", cols(l[i].name, width), l[i].name,
                        l[i].n_old ? "" : old_name, !l[i].n_old && !l[i].n_new ? " or " : "", l[i].n_new ? "" : new_name);
    }
    fprintf(f, "\nold, new: median ± the 95 %% confidence interval of the median (distribution-free, from order "
               "statistics; the wider side, in %% of the median).\n");
    if (n_inf) fprintf(f, "± ∞: fewer than 6 samples cannot bound the median at 95 %%; use --repeat 6 (or --seeds 6).\n");
    fprintf(f, "change: difference of medians when a two-sided Mann-Whitney U test gives p < %g, else ~.\n", alpha);
    if (n_missed)
        fprintf(f, "missed: a tta seed that missed its target counts as infinitely slow, as the plan's olympic mean "
                   "counts it: it ranks above every time in the test (tied with other misses), a median or interval "
                   "that reaches one is \"no score\" or ± ∞, and n counts it.\n");
    if (o && o->ignore && o->ignore[0])
        fprintf(f, "ignored: %s (rows that differ only in these are one configuration; [key old → new])\n", o->ignore);
    /* The exact test's smallest two-sided p is 2/C(n1 + n2, n1): where that is not below alpha no change
     * can be called, whatever the samples; say so once per pair of sample counts. */
    int need = 1;
    while (compare_min_p(need, need) >= alpha) need++;
    for (int i = 0; i < n; i++) {
        if (!l[i].n_old || !l[i].n_new) continue;
        const double floor_p = compare_min_p(l[i].n_old, l[i].n_new);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = l[j].n_old == l[i].n_old && l[j].n_new == l[i].n_new;
        if (floor_p < alpha || seen) continue;
        fprintf(f, "note: %d+%d samples cannot reach p < %g (smallest possible p %.3g); use --repeat %d "
                   "(or --seeds %d).\n", l[i].n_old, l[i].n_new, alpha, floor_p, need, need);
    }
}

static void compare_usage(FILE *f)
{
    fprintf(f, "usage: bench compare [--alpha P] [--ignore KEY[,KEY...]] [--] OLD.jsonl NEW.jsonl\n"
               "Matches the result rows of two files by configuration and tests each change, as benchstat does.\n\n"
               "  --alpha P         significance level of the Mann-Whitney U test (default 0.05)\n"
               "  --ignore KEYS     leave these keys out of the match (e.g. backend; cpu rows against threads rows:\n"
               "                    backend,threads), so rows that differ only in them are compared\n"
               "                    configuration by configuration\n"
               "                    (an option left at its default matches its value typed out: the threads\n"
               "                    backend's --threads as the cores the run could use, the ipu's schedule and\n"
               "                    prefetch; default --threads on machines of other core counts: --ignore threads)\n"
               "  --help            this text\n\n"
               "Samples: per-repeat images/s (throughput, scaling, inference; train and evaluate rows: their\n"
               "images/s), each seed's time to accuracy (tta; a seed that missed the target counts as infinitely\n"
               "slow). old/new: median ± 95 %% confidence\n"
               "interval of the median; change: difference of medians when p < alpha, else ~. Exit status: 0, 1 a\n"
               "file unreadable or without a usable row, 2 usage.\n");
}

int compare_main(int argc, char **argv)
{
    struct compare_opts o = {0.05, NULL};
    static char ignore[256];
    const char *files[2];
    int nf = 0;
    ignore[0] = '\0';
    int files_only = 0; /* after "--": a file named -old.jsonl is a file, as getopt has it for bench's own options */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!files_only && !strcmp(a, "--")) {
            files_only = 1;
            continue;
        }
        if (files_only) {
            if (nf == 2) {
                fprintf(stderr, "bench compare: unexpected argument '%s' (see bench compare --help)\n", a);
                return 2;
            }
            files[nf++] = a;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            compare_usage(stdout);
            return 0;
        }
        if ((!strcmp(a, "--alpha") || !strcmp(a, "--ignore")) && i + 1 >= argc) {
            fprintf(stderr, "bench compare: %s needs a value (see bench compare --help)\n", a);
            return 2;
        }
        if (!strcmp(a, "--alpha")) {
            char *end;
            o.alpha = strtod(argv[++i], &end);
            if (*end || !(o.alpha > 0.0 && o.alpha < 1.0)) {
                fprintf(stderr, "bench compare: --alpha: expected a number in (0, 1), got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--ignore")) {
            size_t len = strlen(ignore);
            snprintf(ignore + len, sizeof ignore - len, "%s%s", len ? "," : "", argv[++i]);
            o.ignore = ignore;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "bench compare: unknown option '%s' (%ssee bench compare --help)\n", a,
                    access(a, F_OK) == 0 ? "the file of that name: put -- before the files; " : "");
            return 2;
        } else if (nf < 2) {
            files[nf++] = a;
        } else {
            fprintf(stderr, "bench compare: unexpected argument '%s' (see bench compare --help)\n", a);
            return 2;
        }
    }
    if (nf != 2) { /* one line, as every usage error: the whole usage is --help's */
        fprintf(stderr, "bench compare: needs two results files, OLD.jsonl NEW.jsonl (%d given; see bench compare "
                        "--help)\n", nf);
        return 2;
    }
    struct compare_line *lines;
    int n;
    int st = compare_results(files[0], files[1], &o, &lines, &n);
    if (st != TB_OK) {
        fprintf(stderr, "bench compare: %s\n", tb_error_get());
        return st == TB_EINVAL ? 2 : 1;
    }
    compare_print(lines, n, &o, files[0], files[1], stdout);
    free(lines);
    return 0;
}
