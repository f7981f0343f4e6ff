/* suite.c — suite files: parse, expand lists, validate, run (see suite.h).
 *
 * A SIGINT/SIGTERM during a suite stops it after the current run: that run stops after its step and
 * writes its interrupted row (and checkpoint), no later run starts, and suite_run returns TB_EINTR with
 * a one-line count of the runs done and not started (the CLI exits 130 / 143). */
#define _GNU_SOURCE
#include "suite.h"

#include "checkpoint.h"
#include "finished.h"
#include "outputs.h"
#include "regular_file.h"
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_WORDS 64
#define MAX_ALTS 64

struct word {
    char key[48];
    char *alts[MAX_ALTS];   /* the values to expand over (one for a plain value; NULL for a bare flag) */
    int n_alts;
    int star;               /* backend=*: the registered backends */
};

/* The backends a line's backend=* left out because they do not take one of its options. */
struct star_skips {
    unsigned mask;          /* bit k: backend_registry()[k] */
    char why[256];          /* the first refusal */
    long optional;          /* the line's optional runs skipped: each reason said once, the rest counted */
    long said;              /* of them, those whose reason was printed */
    char reasons[4][200];   /* the reasons printed (the first four kinds; later new ones are printed each time) */
    int n_reasons;
};

static int list_valued(const char *key)
{
    int n;
    const struct bench_option *o = bench_options(&n);
    for (int k = 0; k < n; k++)
        if (strcmp(o[k].name, key) == 0) return o[k].list_valued;
    return 0;
}

static int add_run(struct suite *s, const struct bench_config *c, int line)
{
    if (s->n_runs == SUITE_MAX_RUNS)
        return tb_error_set(TB_EINVAL, "%s:%d: the suite expands to more than %d runs", s->path, line, SUITE_MAX_RUNS);
    if (s->n_runs == s->cap_runs) {
        int cap = s->cap_runs ? 2 * s->cap_runs : 16;
        struct suite_run *r = realloc(s->runs, (size_t)cap * sizeof *r);
        if (!r) return tb_error_set(TB_ENOMEM, "%s:%d: out of memory", s->path, line);
        s->runs = r, s->cap_runs = cap;
    }
    s->runs[s->n_runs].c = *c;
    s->runs[s->n_runs].line = line;
    s->n_runs++;
    return TB_OK;
}

/* Whether name is a device bench knows but this binary was built without (cuda in a CPU-only build). */
static int device_not_built(const char *name)
{
    int n;
    const struct device_entry *d = device_registry(&n);
    for (int k = 0; k < n; k++)
        if (!strcmp(d[k].name, name)) return !d[k].built;
    return 0;
}

/* Re-raises the current message prefixed with file:line. */
static int at_line(const struct suite *s, int line)
{
    return tb_error_set(TB_EINVAL, "%s:%d: %s", s->path, line, tb_error_get());
}

/* backend=*: whether c's backend takes every option the line (or the command line) gave; one that does
 * not is left out of the expansion and recorded in skips. */
static int star_takes(const struct word *w, int n_words, const struct bench_config *c, struct star_skips *skips)
{
    int star = 0;
    for (int k = 0; k < n_words; k++) star |= w[k].star;
    if (!star || bench_config_check_backend(c) == TB_OK) return 1;
    int n;
    const struct backend_entry *b = backend_registry(&n);
    for (int k = 0; k < n && k < 32; k++)
        if (strcmp(b[k].name, c->backend) == 0) skips->mask |= 1u << k;
    if (!skips->why[0]) snprintf(skips->why, sizeof skips->why, "%s", tb_error_get());
    tb_error_clear();
    return 0;
}

/* After a line: a note naming the backends its backend=* left out, or an error when it left out all. */
static int star_report(const struct suite *s, int line, const struct star_skips *skips, int runs_before)
{
    if (!skips->mask) return TB_OK;
    if (s->n_runs == runs_before)
        return tb_error_set(TB_EINVAL, "%s:%d: backend=*: no registered backend takes every option of the line (%s)",
                            s->path, line, skips->why);
    char names[256] = "";
    int n;
    const struct backend_entry *b = backend_registry(&n);
    for (int k = 0; k < n && k < 32; k++)
        if (skips->mask & (1u << k))
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", b[k].name);
    fprintf(stderr, "bench: %s:%d: backend=* runs the backends that take the line's options; skipping %s (%s)\n",
            s->path, line, names, skips->why);
    return TB_OK;
}

/* An optional run that cannot run here: each reason is said once a line (a line of lists printed the same one
 * once a combination), the runs skipped for a reason already said are counted (skip_tally). */
static void skip_optional(struct suite *s, struct star_skips *skips, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void skip_optional(struct suite *s, struct star_skips *skips, int line, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    int said = 0;
    for (int k = 0; k < skips->n_reasons && !said; k++) said = !strncmp(skips->reasons[k], why, sizeof skips->reasons[k] - 1);
    if (!said) {
        fprintf(stderr, "bench: %s:%d: skipping optional run: %s\n", s->path, line, why);
        if (skips->n_reasons < 4) snprintf(skips->reasons[skips->n_reasons++], sizeof skips->reasons[0], "%.199s", why);
        skips->said++;
    }
    skips->optional++;
    tb_error_clear();
    s->n_skipped++;
}

static void skip_tally(const struct suite *s, const struct star_skips *skips, int line)
{
    const long more = skips->optional - skips->said;
    if (more > 0)
        fprintf(stderr, "bench: %s:%d: skipped %ld more optional run%s of the line, for the reason%s above\n", s->path,
                line, more, more == 1 ? "" : "s", skips->said == 1 ? "" : "s");
}

/* Validates and appends one combination (idx picks an alternative per word). */
static int expand_one(struct suite *s, const struct bench_config *base, struct word *w, int n_words, const int *idx,
                      int line, int optional, struct star_skips *skips)
{
    struct bench_config c = *base;
    snprintf(c.suite, sizeof c.suite, "%s", s->path); /* the row says which suite ran it (make seeds' report) */
    int first = 1; /* the line's first combination: its notes, once a line */
    for (int k = 0; k < n_words; k++) first = first && idx[k] == 0;
    for (int k = 0; k < n_words; k++) {
        const char *v = w[k].alts[idx[k]];
        /* The line's word wins over the command line's option: said, so that neither is ignored unseen. */
        if (first && w[k].alts[0] && bench_option_given(base, w[k].key)) { /* a bare flag on both agrees */
            char vals[256] = "";
            for (int a = 0; a < w[k].n_alts && w[k].alts[a]; a++)
                snprintf(vals + strlen(vals), sizeof vals - strlen(vals), "%s%s", a ? "," : "=", w[k].alts[a]);
            fprintf(stderr, "bench: %s:%d: %s%s replaces the command line's --%s for this line's runs\n", s->path, line,
                    w[k].key, vals, w[k].key);
        }
        if (bench_config_set(&c, w[k].key, v) != TB_OK) {
            /* An optional line may name a device this binary was built without: it cannot run here. */
            if (optional && !strcmp(w[k].key, "device") && v && device_not_built(v)) {
                skip_optional(s, skips, line, "device %s cannot run here: %s", v, tb_error_get());
                return TB_OK;
            }
            return at_line(s, line);
        }
    }
    if (optional) {
        struct backend probe;
        const char *what = NULL;
        if (!workload_find(c.workload)) what = c.workload;
        else if (backend_create(&probe, c.backend) != TB_OK) what = c.backend;
        else backend_destroy(&probe);
        if (what) {
            skip_optional(s, skips, line, "'%s' is not registered in this build", what);
            return TB_OK;
        }
    }
    if (!star_takes(w, n_words, &c, skips)) return TB_OK;
    if (bench_config_finish(&c) != TB_OK) return at_line(s, line);
    /* The device the run would use (its backend's, as cuda's, or --device), probed as bench_run and backend=*
     * do: an optional line meant for a machine with a GPU is skipped on one without, with the probe's reason. */
    if (optional && c.device[0] && !c.describe && !c.project_only && executor_device_probe(c.device) != TB_OK) {
        const struct backend_entry *be = backend_find(c.backend);
        skip_optional(s, skips, line, "%s %s cannot run here: %s", be && be->caps.device ? "backend" : "device",
                      be && be->caps.device ? c.backend : c.device, tb_error_get());
        return TB_OK;
    }
    /* What tells this run apart in the one-line summaries: the options a list varied. */
    for (int k = 0; k < n_words; k++) {
        if (w[k].n_alts < 2 || !strcmp(w[k].key, "backend") || !strcmp(w[k].key, "batch")) continue;
        size_t len = strlen(c.variant);
        snprintf(c.variant + len, sizeof c.variant - len, "%s%s=%s", len ? " " : "", w[k].key, w[k].alts[idx[k]]);
    }
    return add_run(s, &c, line);
}

/* An option name: letters, digits and '-' (bench's long options, with or without their dashes). */
static int name_ok(const char *t)
{
    for (; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') || *t == '-')) return 0;
    return 1;
}

/* Two runs starting afresh in one checkpoint directory would mix their checkpoints (the second would
 * refuse to start, after the first ran): found here, before anything runs. A later run that resumes the
 * directory continues the earlier one's run, which is fine. */
static int check_checkpoint_dirs(const struct suite *s, const struct bench_config *base)
{
    for (int i = 0; i < s->n_runs; i++) {
        const char *d = s->runs[i].c.checkpoint_dir;
        if (!d[0]) continue;
        for (int j = i + 1; j < s->n_runs; j++) {
            if (strcmp(d, s->runs[j].c.checkpoint_dir) != 0 || strcmp(d, s->runs[j].c.resume) == 0) continue;
            if (strcmp(d, base->checkpoint_dir) == 0 || strcmp(d, base->resume) == 0)
                return tb_error_set(TB_EINVAL, "suite %s: the command line's checkpoint directory '%s' would be shared "
                                    "by several runs: give each line a checkpoint-dir of its own", s->path, d);
            if (s->runs[i].line == s->runs[j].line)
                return tb_error_set(TB_EINVAL, "%s:%d: the line expands to several runs that would share "
                                    "checkpoint-dir '%s' (give each run a line and a directory of its own)",
                                    s->path, s->runs[j].line, d);
            return tb_error_set(TB_EINVAL, "%s:%d: checkpoint-dir '%s' is already line %d's: every run needs a "
                                "directory of its own", s->path, s->runs[j].line, d, s->runs[i].line);
        }
    }
    return TB_OK;
}

/* A run id names one run's event log and rows: two runs under one id would meet each other's log
 * (the second refused, after the first ran). Found here, before anything runs; a resume continues. */
static int check_run_ids(const struct suite *s)
{
    for (int i = 0; i < s->n_runs; i++) {
        const char *id = s->runs[i].c.run_id;
        if (!id[0]) continue;
        for (int j = i + 1; j < s->n_runs; j++)
            if (strcmp(id, s->runs[j].c.run_id) == 0 && !s->runs[j].c.resume[0])
                return tb_error_set(TB_EINVAL, "%s:%d: run id '%s' is already line %d's run's: every run needs an "
                                    "id of its own (or none: one is generated)", s->path, s->runs[j].line, id,
                                    s->runs[i].line);
    }
    return TB_OK;
}

/* The files one run writes whole (replacing what was there): another run's output of any kind on one of
 * them destroys it — a later line's save= over an earlier line's rows, two expansions of one line saving to one
 * file. Result rows (out=) may be shared: runs append. Found here, before anything runs. */
static int check_run_outputs(const struct suite *s)
{
    for (int i = 0; i < s->n_runs; i++) {
        const struct bench_config *a = &s->runs[i].c;
        { /* a run writing over the suite file itself: refused here, not after the runs before it */
            const char *own[] = {a->out, a->save, a->trace, a->logits, a->timeline};
            static const char *const own_names[] = {"out", "save", "trace", "logits", "timeline"};
            for (int k = 0; k < 5; k++)
                if (own[k][0] && outputs_same_file(own[k], s->path))
                    return tb_error_set(TB_EINVAL, "%s:%d: the run's --%s %s is this suite file (--suite): the run "
                                        "would destroy it; give it another path", s->path, s->runs[i].line,
                                        own_names[k], own[k]);
        }
        const char *whole[] = {a->save, a->trace, a->logits, a->timeline};
        static const char *const names[] = {"save", "trace", "logits", "timeline"};
        /* Someone's data where an output would go (bench_run's check, made for every line before the first runs) */
        if (outputs_check_kinds(a, "") != TB_OK) {
            char why[400];
            snprintf(why, sizeof why, "%s", tb_error_get());
            return tb_error_set(TB_EINVAL, "%s:%d: %s", s->path, s->runs[i].line, why);
        }
        for (int j = 0; j < s->n_runs; j++) {
            const struct bench_config *b = &s->runs[j].c;
            /* Another run's checkpoints (its own too, as one command line refuses them), in the folder it writes
             * and the one it resumes from: the output would replace a checkpoint a run resumes from, or be replaced
             * by the checkpointer. */
            const char *ck[2];
            int resumed[2];
            const int nd = outputs_checkpoint_dirs(b, ck, resumed);
            for (int d = 0; d < nd; d++)
                for (int k = 0; k < 4; k++)
                    if (whole[k][0] && outputs_checkpoint_name(whole[k], ck[d]))
                        return tb_error_set(TB_EINVAL, "%s:%d: %s=%s is a name line %d's checkpoints in %s use "
                                            "(" FINISHED_NOTE_NAME ", " CHECKPOINT_NAME_PREFIX "*); give another path",
                                            s->path, s->runs[i].line, names[k], whole[k], s->runs[j].line, ck[d]);
            if (j == i) continue;
            /* An earlier run's input replaced by a later run's output: the suite could not run again (a later run
             * reading an earlier one's output, save= then load=, is a pipeline, and fine). */
            const char *in[] = {b->load, b->calibration};
            static const char *const in_names[] = {"load", "calibration"};
            for (int k = 0; k < 4 && j < i; k++)
                for (int m = 0; m < 2; m++)
                    if (whole[k][0] && in[m][0] && outputs_same_file(whole[k], in[m]))
                        return tb_error_set(TB_EINVAL, "%s:%d: %s=%s is line %d's %s=, which it reads: this run would "
                                            "replace it, and the suite could not run again; give it another path",
                                            s->path, s->runs[i].line, names[k], whole[k], s->runs[j].line, in_names[m]);
            const char *theirs[] = {b->save, b->trace, b->logits, b->timeline, b->out};
            static const char *const their_names[] = {"save", "trace", "logits", "timeline", "out"};
            for (int k = 0; k < 4; k++)
                for (int m = 0; m < 5; m++) {
                    if (!whole[k][0] || !theirs[m][0] || (j < i && m < 4) || !outputs_same_file(whole[k], theirs[m]))
                        continue;
                    if (s->runs[i].line == s->runs[j].line)
                        return tb_error_set(TB_EINVAL, "%s:%d: the line expands to several runs that would all write "
                                            "%s=%s (give each run a line and a file of its own)", s->path,
                                            s->runs[i].line, names[k], whole[k]);
                    return tb_error_set(TB_EINVAL, "%s:%d: %s=%s is line %d's %s= too: one run would replace the "
                                        "other's file; give each its own", s->path, s->runs[i].line, names[k],
                                        whole[k], s->runs[j].line, their_names[m]);
                }
        }
    }
    return TB_OK;
}

/* Parses one line (comments already cut) into words; values point into the line. */
static int parse_line(struct suite *s, char *text, int line, struct word *w, int *n_words, int *optional)
{
    *n_words = 0;
    *optional = 0;
    char *save = NULL;
    int first = 1;
    for (char *tok = strtok_r(text, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save), first = 0) {
        if (first && strcmp(tok, "?") == 0) {
            *optional = 1;
            continue;
        }
        if (*n_words == MAX_WORDS) return tb_error_set(TB_EINVAL, "%s:%d: more than %d options on a line", s->path, line, MAX_WORDS);
        struct word *wd = &w[(*n_words)++];
        memset(wd, 0, sizeof *wd);
        char *eq = strchr(tok, '=');
        if (eq) *eq = '\0';
        if (strlen(tok) >= sizeof wd->key || !*tok || !name_ok(tok)) {
            char shown[96];
            tb_text_clean(shown, sizeof shown, tok); /* as every message shows bytes from a file */
            return tb_error_set(TB_EINVAL, "%s:%d: bad option name '%s' (names are letters, digits and '-')", s->path,
                                line, shown);
        }
        snprintf(wd->key, sizeof wd->key, "%s", tok[0] == '-' && tok[1] == '-' ? tok + 2 : tok);
        int known = 0, n_opts;
        const struct bench_option *o = bench_options(&n_opts);
        for (int k = 0; k < n_opts; k++) known |= strcmp(o[k].name, wd->key) == 0;
        if (!known) {
            const char *names[BENCH_MAX_OPTIONS]; /* for the nearest, only where one is needed */
            for (int k = 0; k < n_opts; k++) names[k] = o[k].name;
            const char *near = tb_text_nearest(wd->key, names, n_opts);
            return tb_error_set(TB_EINVAL, "%s:%d: unknown option '%s'%s%s%s", s->path, line, wd->key,
                                near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
        }
        for (int k = 0; k < *n_words - 1; k++)
            if (strcmp(w[k].key, wd->key) == 0)
                return tb_error_set(TB_EINVAL, "%s:%d: option '%s' given twice (use a comma list)", s->path, line, wd->key);
        if (!eq) {
            wd->alts[0] = NULL;
            wd->n_alts = 1;
            continue;
        }
        char *val = eq + 1;
        if (!*val) return tb_error_set(TB_EINVAL, "%s:%d: option '%s' has an empty value", s->path, line, wd->key);
        if (strcmp(wd->key, "backend") == 0 && strcmp(val, "*") == 0) {
            int n;
            const struct backend_entry *b = backend_registry(&n);
            for (int k = 0; k < n && k < MAX_ALTS; k++) {
                /* A backend tied to hardware this machine lacks (cuda without a GPU) is left out, said once:
                 * `make demo` on a CPU machine runs what it can instead of failing a line. */
                if (b[k].caps.device && executor_device_probe(b[k].caps.device) != TB_OK) {
                    static int said;
                    if (!said++)
                        fprintf(stderr, "bench: backend=* leaves out %s here: %s\n", b[k].name, tb_error_get());
                    tb_error_clear();
                    continue;
                }
                wd->alts[wd->n_alts++] = (char *)b[k].name;
            }
            wd->star = 1;
            continue;
        }
        if (list_valued(wd->key)) {
            wd->alts[wd->n_alts++] = val;
            continue;
        }
        if (val[0] == ',' || val[strlen(val) - 1] == ',' || strstr(val, ",,"))
            return tb_error_set(TB_EINVAL, "%s:%d: option '%s' has an empty item in its list", s->path, line, wd->key);
        char *vs = NULL;
        for (char *v = strtok_r(val, ",", &vs); v; v = strtok_r(NULL, ",", &vs)) {
            if (wd->n_alts == MAX_ALTS)
                return tb_error_set(TB_EINVAL, "%s:%d: option '%s' lists more than %d values", s->path, line, wd->key, MAX_ALTS);
            wd->alts[wd->n_alts++] = v;
        }
        if (wd->n_alts == 0)
            return tb_error_set(TB_EINVAL, "%s:%d: option '%s' has an empty item in its list", s->path, line, wd->key);
    }
    return TB_OK;
}

/* Reads one line (its '\n' kept) into buf of SUITE_MAX_LINE + 2 bytes: its length, 0 at the end of the
 * file, or a status (message set) for a line too long, a NUL byte, a file over SUITE_MAX_BYTES or a read
 * error. *total counts the bytes read so far. getline would grow without bound on /dev/zero-like input. */
static long read_line(FILE *f, char *buf, const char *path, int line, size_t *total)
{
    size_t n = 0;
    int ch;
    while ((ch = getc(f)) != EOF) {
        if (++*total > SUITE_MAX_BYTES)
            return tb_error_set(TB_EINVAL, "suite %s: larger than %d bytes; is it a suite file?", path, SUITE_MAX_BYTES);
        if (ch == '\0') return tb_error_set(TB_EINVAL, "%s:%d: a NUL byte in the line", path, line);
        if (n == SUITE_MAX_LINE)
            return tb_error_set(TB_EINVAL, "%s:%d: line longer than %d bytes", path, line, SUITE_MAX_LINE);
        buf[n++] = (char)ch;
        if (ch == '\n') break;
    }
    if (ferror(f)) return tb_error_set(TB_EIO, "suite %s: read error", path);
    buf[n] = '\0';
    return (long)n;
}

int suite_load(const char *path, const struct bench_config *base, struct suite *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    const char *why = NULL;
    FILE *f = regular_fopen(path, &why);
    if (!f) return tb_error_set(TB_EIO, "suite %s: %s", path, why);
    char *text = malloc(SUITE_MAX_LINE + 2);
    size_t total = 0;
    long len;
    int line = 0, st = TB_OK;
    struct word *w = calloc(MAX_WORDS, sizeof *w);
    if (!w || !text) st = tb_error_set(TB_ENOMEM, "suite %s: out of memory", path);
    while (st == TB_OK && (len = read_line(f, text, path, line + 1, &total)) != 0) {
        line++;
        if (len < 0) {
            st = (int)len;
            break;
        }
        char *hash = strchr(text, '#');
        if (hash) *hash = '\0';
        int n_words, optional;
        if ((st = parse_line(out, text, line, w, &n_words, &optional)) != TB_OK) break;
        if (n_words == 0) {
            if (optional) st = tb_error_set(TB_EINVAL, "%s:%d: '?' with no options after it", path, line);
            continue;
        }
        /* Every combination counts, run or skipped: a line of long lists whose runs are all skipped (an optional
         * line for a workload not built in) expanded without end, a note a combination. */
        long combos = 1;
        for (int k = 0; k < n_words && combos <= SUITE_MAX_RUNS; k++) combos *= w[k].n_alts > 0 ? w[k].n_alts : 1;
        if (combos > SUITE_MAX_RUNS) {
            st = tb_error_set(TB_EINVAL, "%s:%d: the line expands to more than %d runs", path, line, SUITE_MAX_RUNS);
            break;
        }
        int idx[MAX_WORDS] = {0};
        const int runs_before = out->n_runs;
        struct star_skips skips = {0};
        for (;;) {
            if ((st = expand_one(out, base, w, n_words, idx, line, optional, &skips)) != TB_OK) break;
            int k = n_words - 1; /* odometer: the last option varies fastest */
            while (k >= 0 && ++idx[k] == w[k].n_alts) idx[k--] = 0;
            if (k < 0) break;
        }
        if (st == TB_OK) skip_tally(out, &skips, line);
        if (st == TB_OK) st = star_report(out, line, &skips, runs_before);
    }
    if (st == TB_OK && ferror(f)) st = tb_error_set(TB_EIO, "suite %s: read error", path);
    free(text);
    free(w);
    fclose(f);
    if (st == TB_OK && out->n_runs == 0 && out->n_skipped == 0)
        st = tb_error_set(TB_EINVAL, "suite %s: no runs in the file", path);
    if (st == TB_OK) st = check_checkpoint_dirs(out, base);
    if (st == TB_OK) st = check_run_ids(out);
    if (st == TB_OK) st = check_run_outputs(out);
    if (st != TB_OK) suite_free(out);
    return st;
}

int suite_run(const struct suite *s)
{
    int first_err = TB_OK, n_failed = 0, n_ok = 0, n_started = 0, interrupted = 0;
    /* bench_run installs the stop handlers per run; these cover the moments between runs, so a signal
     * there also stops the suite instead of killing it. */
    struct bench_stop_handlers h;
    bench_stop_handlers_install(&h);
    for (int k = 0; k < s->n_runs && !bench_stop_signal(); k++) {
        struct bench_config c = s->runs[k].c;
        snprintf(c.progress_prefix, sizeof c.progress_prefix, "[%d/%d] ", k + 1, s->n_runs);
        c.compact = 1;
        n_started++;
        int st = bench_run(&c);
        if (st == TB_EINTR && bench_stop_signal()) {
            /* The run wrote its interrupted row (and checkpoint); its message says how to resume it. */
            fprintf(stderr, "bench: %s:%d: run %d stopped: %s\n", s->path, s->runs[k].line, k + 1, tb_error_get());
            interrupted = 1;
        } else if (st != TB_OK) {
            /* Under MPI a line failed on one rank alone ends the job: its other ranks are still in its collectives,
             * and this rank's next line would meet them there. */
            char what[sizeof s->path + 64];
            snprintf(what, sizeof what, "%s:%d: run %d failed: ", s->path, s->runs[k].line, k + 1);
            bench_fail_say(what, tb_error_get(), 1);
            if (first_err == TB_OK) first_err = st;
            n_failed++;
        } else {
            n_ok++;
        }
        fflush(stdout);
    }
    bench_stop_handlers_restore(&h);
    const int sig = bench_stop_signal();
    if (sig)
        return tb_error_set(TB_EINTR, "suite %s stopped by %s: %d of %d runs done (%d completed, %d interrupted, %d "
                            "failed), %d not started", s->path, bench_signal_name(sig), n_started, s->n_runs, n_ok,
                            interrupted, n_failed, s->n_runs - n_started);
    if (n_failed) {
        tb_error_set(first_err, "suite %s: %d of %d runs failed", s->path, n_failed, s->n_runs);
    }
    return first_err;
}

void suite_free(struct suite *s)
{
    free(s->runs);
    s->runs = NULL;
    s->n_runs = s->cap_runs = 0;
}
