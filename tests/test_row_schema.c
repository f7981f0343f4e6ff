/* test_row_schema.c — every key a result row can carry is documented in results/README.md.
 *
 * Runs short bench runs on tiny synthetic data that together reach every row writer: throughput with
 * repeats, train with evaluation, checkpoint and resume, tta with a tiny target and two seeds, a batch
 * sweep, inference on fresh and on loaded weights, evaluate with --logits, ipu fp16 with its pipeline report, timeline and
 * projection, --profile, --trace, mirrored against a cpu baseline, a diverged run and an interrupted
 * one. It collects every key path of the rows (nested keys joined with dots, "[]" for the elements of
 * an array of objects) and fails on any that no table of the README lists in its first column (`path`,
 * where a `*` segment matches any one key), and on any documented field none of the runs wrote (stale
 * documentation, or a writer this test does not reach yet). A writer that adds a key must document it.
 * Fields the README marks "cuda only" (their meaning starts so) come from runs on the cuda device alone:
 * a row of any other device carrying one fails, and they are required only where a GPU answers (a cuda
 * throughput run is added then); without one the test says which it could not check.
 * The committed sample rows (results/sample.jsonl, what `make report` renders without a run) are held to the
 * same tables.
 */
#include "test_reliability_util.h"

#include "executor.h"
#include "results.h"
#include "tpool.h"

#include <signal.h>

TestSuite(row_schema, .timeout = 120);

struct paths {
    char **p;
    char **where; /* the run id of the first row that had it */
    int n, cap;
};

static void paths_add(struct paths *ps, const char *path, const char *run_id)
{
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i], path)) return;
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 256;
        ps->p = realloc(ps->p, (size_t)ps->cap * sizeof *ps->p);
        ps->where = realloc(ps->where, (size_t)ps->cap * sizeof *ps->where);
        cr_assert(ps->p && ps->where);
    }
    ps->p[ps->n] = strdup(path);
    ps->where[ps->n++] = strdup(run_id);
}

static void paths_free(struct paths *ps)
{
    for (int i = 0; i < ps->n; i++) free(ps->p[i]), free(ps->where[i]);
    free(ps->p), free(ps->where);
}

/* Adds the key paths under v (an object or an array) to ps. */
static void walk(struct paths *ps, const struct json_value *v, const char *prefix, const char *run_id)
{
    char path[512];
    if (v->type == JSON_ARRAY) {
        int objects = 0;
        for (int i = 0; i < v->n; i++) objects |= v->items[i].type == JSON_OBJECT;
        if (!objects) {
            paths_add(ps, prefix, run_id); /* numbers, strings or arrays of them: one field */
            return;
        }
        snprintf(path, sizeof path, "%s[]", prefix);
        for (int i = 0; i < v->n; i++)
            if (v->items[i].type == JSON_OBJECT) walk(ps, &v->items[i], path, run_id);
        return;
    }
    for (int i = 0; i < v->n; i++) {
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", v->keys[i]);
        const struct json_value *x = &v->items[i];
        if (x->type == JSON_OBJECT || x->type == JSON_ARRAY) walk(ps, x, path, run_id);
        else paths_add(ps, path, run_id);
    }
}

/* Adds to dups each key that stands twice in one object under v: readers disagree on which value such a key
 * has (bench's json_get takes the first, jq and pandas the last). */
static void dup_keys(struct paths *dups, const struct json_value *v, const char *prefix, const char *run_id)
{
    char path[512];
    for (int i = 0; i < v->n; i++) {
        const char *key = v->type == JSON_OBJECT ? v->keys[i] : "[]";
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", key);
        if (v->type == JSON_OBJECT)
            for (int j = 0; j < i; j++)
                if (!strcmp(v->keys[j], v->keys[i])) paths_add(dups, path, run_id);
        const struct json_value *x = &v->items[i];
        if (x->type == JSON_OBJECT || x->type == JSON_ARRAY) dup_keys(dups, x, path, run_id);
    }
}

struct seen {
    struct paths dups;    /* keys written twice in one object */
    struct paths keys;
    struct paths off_gpu; /* the keys of rows not on the cuda device */
    struct paths kinds;   /* "kind status" */
};

static int on_row(const struct json_value *row, long line_no, void *ctx)
{
    struct seen *s = ctx;
    char kind[96];
    (void)line_no;
    walk(&s->keys, row, "", json_get_str(row, "run_id", "?"));
    dup_keys(&s->dups, row, "", json_get_str(row, "run_id", "?"));
    if (strcmp(json_get_str(row, "config.device", "cpu"), "cuda")) walk(&s->off_gpu, row, "", json_get_str(row, "run_id", "?"));
    snprintf(kind, sizeof kind, "%s %s", json_get_str(row, "kind", "?"), json_get_str(row, "status", "?"));
    paths_add(&s->kinds, kind, "");
    return TB_OK;
}

/* The backticked names in the first cell of every table row of the README; those whose meaning (the
 * second cell) starts with "cuda only" also into cuda_only. */
static void documented(struct paths *doc, struct paths *cuda_only)
{
    char *text = tu_read_file(TB_SOURCE_DIR "/results/README.md", NULL);
    cr_assert_not_null(text, "cannot read results/README.md");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "| `", 3) != 0) continue;
        char *end = strstr(line + 1, " |");
        const int cuda = end && !strncmp(end, " | cuda only", 12);
        if (end) *end = '\0';
        for (char *a = strchr(line, '`'); a; a = strchr(a, '`')) {
            char *b = strchr(a + 1, '`');
            if (!b) break;
            *b = '\0';
            paths_add(doc, a + 1, "");
            if (cuda) paths_add(cuda_only, a + 1, "");
            a = b + 1;
        }
    }
    free(text);
}

/* Whether path matches a documented name: the same segments, where a `*` segment matches any key. */
static int matches(const char *doc, const char *path)
{
    while (*doc && *path) {
        size_t dl = strcspn(doc, "."), pl = strcspn(path, ".");
        const int star = doc[0] == '*' && (dl == 1 || !strncmp(doc + 1, "[]", dl - 1));
        if (!star && (dl != pl || strncmp(doc, path, dl))) return 0;
        doc += dl + (doc[dl] == '.');
        path += pl + (path[pl] == '.');
    }
    return !*doc && !*path;
}

#define BASE RB_ARGS("--data", "synthetic", "--synthetic-samples", "256,64", "--mllog", "none", "--out", "rows.jsonl", \
                     "--quiet", "--calibration", "calibration.json")
#define SHORT "--steps", "2", "--warmup", "1"

/* Runs bench with BASE and extra in dir; asserts the exit status. */
static void run(const char *dir, const char *tag, const char *const *extra, int want)
{
    const int code = rb_run(dir, tag, BASE, extra);
    char *err = rb_stderr(dir, tag);
    cr_assert_eq(code, want, "%s: exit %d, want %d: %s", tag, code, want, err);
    free(err);
}

Test(row_schema, every_key_of_every_plan_is_documented)
{
    /* ctest's test_row_schema_cuda entry (the main build, which has the cuda layer the ASan build lacks) runs
     * this test for the cuda row's fields alone: Skipped, saying why, where no GPU answers. */
    if (getenv("TB_ROW_SCHEMA_GPU_ONLY") && executor_device_probe("cuda") != TB_OK)
        cr_skip_test("no GPU answers here: the cuda row's documented fields are checked where one does");
    tb_error_clear();
    char *dir = tu_mkdtemp("schema");
    /* Ceilings of this machine (a calibration of another is ignored): the rows' calibration fields. Written as
     * bench writes one (rb_write_calibration) where no GPU answers: the rows copy its fields whatever they
     * measured, and measuring took 4.5 CPU-s under ASan. Where a GPU answers, measured: its ceilings too. */
    const int gpu = executor_device_probe("cuda") == TB_OK;
    tb_error_clear();
    if (gpu) {
        const int code = rb_run(dir, "calibrate", RB_ARGS("--calibrate", "--calibration", "calibration.json"),
                                RB_ARGS("--quiet"));
        cr_assert_eq(code, 0);
    } else {
        char *cal = rb_path(dir, "calibration.json");
        rb_write_calibration(dir, cal, 40.0, 75.0);
        free(cal);
    }
    /* Writers that add to a row, not change it, share a run: each run under ASan costs 0.3-0.5 CPU-s before its
     * work, and a key a shared run stopped writing fails the check below that every documented key is written. */
    run(dir, "throughput", RB_ARGS("--plan", "throughput", "--batch", "8", "--time-budget", "0.001", "--warmup", "1",
                                   "--repeat", "2"), 0); /* time_budget_s beside the repeats' figures */
    run(dir, "train", RB_ARGS("--plan", "train", "--batch", "16", "--steps", "4", "--save", "w.safetensors",
                              "--steps-per-execution", "3", "--checkpoint-dir", "ck"), 0);
    run(dir, "resume", RB_ARGS("--plan", "train", "--batch", "16", "--steps", "6", "--resume", "ck"), 0);
    run(dir, "tta", RB_ARGS("--plan", "tta", "--batch", "32", "--target", "0.05", "--eval-every", "2", "--seeds", "2",
                            "--max-epochs", "1", "--checkpoint-dir", "ck-tta"), 0);
    run(dir, "scaling", RB_ARGS("--plan", "scaling", "--batches", "8,16", SHORT), 0);
    run(dir, "scaling-trained", RB_ARGS("--plan", "scaling", "--batches", "8,16", "--epochs", "1", "--steps-per-epoch", "2"), 0);
    run(dir, "inference", RB_ARGS("--plan", "inference", "--batch", "8", SHORT), 0);
    run(dir, "inference-loaded", RB_ARGS("--plan", "inference", "--batch", "8", SHORT, "--load", "w.safetensors"), 0);
    run(dir, "evaluate", RB_ARGS("--plan", "evaluate", "--load", "w.safetensors", "--logits", "l.npy"), 0);
    run(dir, "ipu", RB_ARGS("--plan", "throughput", "--backend", "ipu", "--stages", "2", "--micro-batch", "2", "--ga", "2",
                            "--batch", "8", "--precision", "fp16", "--project-devices", "4,8", SHORT), 0);
    run(dir, "profile", RB_ARGS("--plan", "throughput", "--backend", "threads", "--threads", "2", "--profile",
                                "--trace", "t.json", "--batch", "8", SHORT), 0);
    run(dir, "mirrored", RB_ARGS("--plan", "throughput", "--backend", "mirrored", "--devices", "2", "--batch", "8", SHORT), 0);
    /* A model with convolutions: the algorithms they ran (figures.conv_algos). */
    run(dir, "convolutions", RB_ARGS("--plan", "throughput", "--workload", "effnet-b0", "--resolution", "16", "--batch", "4",
                                     "--synthetic-samples", "16,8", SHORT), 0);
    /* The cuda device's fields, where a GPU answers (the calibration above measured it too). */
    if (gpu) run(dir, "cuda", RB_ARGS("--plan", "throughput", "--backend", "cuda", "--batch", "8", SHORT), 0);
    /* A final checkpoint that cannot be written (a file-size limit): the row is still written, naming it. */
    cr_assert_eq(rb_run_with_file_limit(dir, "checkpoint-failed", BASE,
                                        RB_ARGS("--plan", "train", "--batch", "16", "--steps", "4", "--checkpoint-dir",
                                                "ck-full"),
                                        100000),
                 1);
    run(dir, "diverged", RB_ARGS("--plan", "train", "--optimizer", "sgd", "--lr", "1000", "--batch", "8", "--steps", "50"), 1);
    /* Interrupted: SIGINT mid-run, once a step's checkpoint shows steps have run (the row's partial rate needs
     * one; 100 ms after the handler was in place was too soon under ASan beside another test). */
    pid_t pid = rb_start(dir, "interrupted", BASE,
                         RB_ARGS("--plan", "train", "--batch", "8", "--steps", "100000000", "--checkpoint-dir", "ck-int",
                                 "--checkpoint-every", "1"));
    int exited = 0;
    char *ck_int = rb_path(dir, "ck-int");
    cr_assert_geq(rb_wait_checkpoint(pid, ck_int, 0, &exited), 1, "the long run ended (status %d) before it was interrupted",
                  exited);
    free(ck_int);
    cr_assert_eq(kill(pid, SIGINT), 0);
    cr_assert_eq(rb_wait(pid), 130);

    struct seen s = {0};
    char *rows = rb_path(dir, "rows.jsonl");
    cr_assert_eq(results_read_rows(rows, on_row, &s), TB_OK, "%s", tb_error_get());
    free(rows);
    for (int i = 0; i < s.dups.n; i++)
        cr_log_error("%s: written twice in one row (run %s)", s.dups.p[i], s.dups.where[i]);
    cr_assert_eq(s.dups.n, 0, "%d keys written twice in one object (the first: %s)", s.dups.n,
                 s.dups.n ? s.dups.p[0] : "");
    /* Coverage: every plan and every status wrote a row. */
    const char *const kinds[] = {"throughput ok", "train ok", "tta ok", "scaling ok", "inference ok", "evaluate ok", "train diverged",
                                 "train interrupted"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        int found = 0;
        for (int i = 0; i < s.kinds.n; i++) found |= !strcmp(s.kinds.p[i], kinds[k]);
        cr_assert(found, "no '%s' row", kinds[k]);
    }
    cr_assert_gt(s.keys.n, 200, "only %d key paths: a run wrote less than it should", s.keys.n);

    struct paths doc = {0}, cuda_only = {0};
    documented(&doc, &cuda_only);
    cr_assert_gt(cuda_only.n, 5, "the README marks only %d fields cuda only", cuda_only.n);
    cr_assert_gt(doc.n, 100, "the README's tables list only %d fields", doc.n);
    char missing[8192] = "";
    int n_missing = 0;
    for (int i = 0; i < s.keys.n; i++) {
        int ok = 0;
        for (int j = 0; j < doc.n && !ok; j++) ok = matches(doc.p[j], s.keys.p[i]);
        if (ok) continue;
        n_missing++;
        size_t len = strlen(missing);
        snprintf(missing + len, sizeof missing - len, "\n  %s (run %s)", s.keys.p[i], s.keys.where[i]);
    }
    cr_assert_eq(n_missing, 0, "%d row key%s not documented in results/README.md (add a table row `path` | meaning):%s",
                 n_missing, n_missing == 1 ? "" : "s", missing);
    /* No row of another device carries a field of the cuda device's. */
    missing[0] = '\0';
    for (int i = 0; i < s.off_gpu.n; i++)
        for (int j = 0; j < cuda_only.n; j++)
            if (matches(cuda_only.p[j], s.off_gpu.p[i]))
                n_missing++, snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "\n  %s (run %s)",
                                      s.off_gpu.p[i], s.off_gpu.where[i]);
    cr_assert_eq(n_missing, 0, "cuda-only fields in rows not on the cuda device:%s", missing);
    /* And the other way: a documented field no run wrote is stale, or this test misses a writer. The cuda
     * device's need a GPU. */
    missing[0] = '\0';
    int n_unchecked = 0;
    for (int j = 0; j < doc.n; j++) {
        int ok = 0, cuda = 0;
        for (int i = 0; i < s.keys.n && !ok; i++) ok = matches(doc.p[j], s.keys.p[i]);
        for (int k = 0; k < cuda_only.n && !cuda; k++) cuda = !strcmp(cuda_only.p[k], doc.p[j]);
        /* The calibration's barrier needs a pool of two threads: on one core there is none to time. */
        const int one_core = !strcmp(doc.p[j], "calibration.barrier_all_us") && tpool_cpus() < 2;
        if (!ok && ((cuda && !gpu) || one_core)) n_unchecked++;
        else if (!ok) n_missing++, snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", doc.p[j]);
    }
    cr_assert_eq(n_missing, 0, "documented in results/README.md but written by none of these runs (stale, or a run "
                               "is missing here):%s", missing);
    if (n_unchecked)
        cr_log_info("%d cuda-only (or two-core) fields not checked: no GPU answers here (they are checked where one does)",
                    n_unchecked);
    paths_free(&doc);
    paths_free(&cuda_only);
    paths_free(&s.off_gpu);
    paths_free(&s.keys);
    paths_free(&s.dups);
    paths_free(&s.kinds);
    tu_rm_rf(dir);
    free(dir);
}

Test(row_schema, pattern_matching_of_documented_names)
{
    cr_assert(matches("figures.images_per_s", "figures.images_per_s"));
    cr_assert(!matches("figures.images_per_s", "figures.images_per_s_median"));
    cr_assert(!matches("figures", "figures.images_per_s"));
    cr_assert(matches("figures.runs[].curve[].step", "figures.runs[].curve[].step"));
    cr_assert(matches("figures.layers.*.forward_s", "figures.layers.conv1.forward_s"));
    cr_assert(matches("figures.*[].x", "figures.per_stage[].x"));
    cr_assert(!matches("figures.layers.*.forward_s", "figures.layers.conv1.backward_s"));
}

static int on_sample_row(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    walk(ctx, row, "", json_get_str(row, "run_id", "?"));
    return TB_OK;
}

/* `make report` renders results/sample.jsonl on a fresh clone: its ipu rows kept figures.pipeline.loss_scale,
 * loss_scale_mode and skipped_steps for months after the writer moved them to figures.loss_scaling (the
 * README too). The test above checks what bench writes against the README; this checks the sample. */
Test(row_schema, the_committed_sample_rows_carry_only_documented_keys)
{
    struct paths keys = {0}, doc = {0}, cuda_only = {0};
    cr_assert_eq(results_read_rows(TB_SOURCE_DIR "/results/sample.jsonl", on_sample_row, &keys), TB_OK, "%s",
                 tb_error_get());
    cr_assert_gt(keys.n, 50, "results/sample.jsonl: only %d key paths", keys.n);
    documented(&doc, &cuda_only);
    char missing[4096] = "";
    int n_missing = 0;
    for (int i = 0; i < keys.n; i++) {
        int ok = 0;
        for (int j = 0; j < doc.n && !ok; j++) ok = matches(doc.p[j], keys.p[i]);
        if (!ok)
            n_missing++, snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "\n  %s (run %s)",
                                  keys.p[i], keys.where[i]);
    }
    cr_assert_eq(n_missing, 0,
                 "%d key%s of results/sample.jsonl not in results/README.md's schema (stale sample rows: regenerate "
                 "them with suites/sample.suite, or drop the keys the writer no longer writes):%s",
                 n_missing, n_missing == 1 ? "" : "s", missing);
    paths_free(&keys);
    paths_free(&doc);
    paths_free(&cuda_only);
}
