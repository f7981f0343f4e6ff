/* test_seeds_repeats.c — runs that share one prepared backend start like runs of their own (bench as a child,
 * TB_BENCH_EXE):
 * - --plan tta --seeds N: seed k keys its own dropout, drop-connect and stochastic rounding, so its curve is
 *   bitwise the one of a run with --seed <that seed> alone (the backend is prepared once, with the first seed);
 * - --repeat: each repeat starts the fp16 loss scaler from its configured scale, so --repeat 2 is two of
 *   what --repeat 1 is (an all-skipped repeat is not followed by one that trains at the scale it reached);
 * - --plan tta --profile is refused (the plan records no layer times).
 * Each child runs in its own temp directory; the rows are read back from its --out file.
 */
#include "test_bench_proc.h"

#include "json.h"
#include "status.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

TestSuite(seeds_repeats, .timeout = 60);

/* Runs bench with args (at most 40) plus --out DIR/row.jsonl in a fresh temp directory; returns the row
 * (free with json_value_free), or NULL when want_rc is not 0 (then the exit status is checked, and where err is
 * not NULL *err receives what bench wrote on stderr, malloc'd). */
static struct json_value *bench_row_err(const char *const *args, int want_rc, char **err)
{
    char *dir = tu_mkdtemp("seeds");
    char *out = rb_path(dir, "row.jsonl");
    const char *all[48];
    int n = 0;
    for (; args[n]; n++) all[n] = args[n];
    cr_assert(n <= 40);
    all[n++] = "--out", all[n++] = out, all[n] = NULL;
    struct proc p;
    run_bench_in(dir, all, -1, &p);
    cr_assert_eq(p.code, want_rc, "bench exited %d, want %d: %s", p.code, want_rc, p.err);
    struct json_value *v = NULL;
    if (want_rc == 0) {
        size_t len = 0;
        char *text = tu_read_file(out, &len);
        cr_assert(text, "no row in %s", out);
        cr_assert_eq(json_parse(text, len, &v), TB_OK, "the row is not one JSON value: %s", tb_error_get());
        free(text);
    } else if (err) {
        *err = strdup(p.err ? p.err : "");
        cr_assert_not_null(*err);
    }
    proc_free(&p);
    tu_rm_rf(dir);
    free(out), free(dir);
    return v;
}

/* bench_row_err without the stderr. */
static struct json_value *bench_row(const char *const *args, int want_rc) { return bench_row_err(args, want_rc, NULL); }

/* Writes a tiny IDX data set (n_train and n_test 28×28 images, fixed pixels, labels 0..9) into dir: synthetic
 * data are drawn from --seed, so two seeds' runs would not see the same samples. */
static void write_idx(const char *dir, int n_train, int n_test)
{
    uint32_t x = 12345; /* one LCG stream over the training images, then the test images */
    for (int t = 0; t < 2; t++) {
        const int n = t ? n_test : n_train;
        uint8_t *px = malloc((size_t)n * 28 * 28);
        cr_assert_not_null(px);
        for (int i = 0; i < n * 28 * 28; i++) {
            x = x * 1664525u + 1013904223u;
            px[i] = (uint8_t)(x >> 24);
        }
        tu_write_idx(dir, t ? "t10k" : "train", n, px, NULL);
        free(px);
    }
}

/* The loss at the last evaluation of run k of a tta row. */
static double tta_loss(const struct json_value *row, int k)
{
    char path[64];
    snprintf(path, sizeof path, "figures.runs.%d.curve", k);
    const struct json_value *c = json_get(row, path);
    cr_assert(c && c->type == JSON_ARRAY && c->n > 0, "run %d has no curve", k);
    snprintf(path, sizeof path, "figures.runs.%d.curve.%d.loss", k, c->n - 1);
    const double l = json_get_number(row, path, -1.0);
    cr_assert(l > 0.0, "run %d: no loss at its last evaluation", k);
    return l;
}

/* Seed 43 of --seeds 2 (from --seed 42) against --seed 43 alone, with `common` (NULL-terminated). */
static void expect_second_seed_alone(const char *const *common)
{
    char *data = tu_mkdtemp("seeds-data");
    write_idx(data, 32, 16);
    const char *a[48], *b[48];
    int n = 0;
    for (; common[n]; n++) a[n] = b[n] = common[n];
    a[n] = b[n] = "--data", a[n + 1] = b[n + 1] = data;
    n += 2;
    a[n] = "--seed", a[n + 1] = "42", a[n + 2] = "--seeds", a[n + 3] = "2", a[n + 4] = NULL;
    b[n] = "--seed", b[n + 1] = "43", b[n + 2] = NULL;
    struct json_value *two = bench_row(a, 0), *one = bench_row(b, 0);
    cr_assert_eq(json_get_number(two, "figures.runs.1.seed", -1), 43);
    const double in_seeds = tta_loss(two, 1), alone = tta_loss(one, 0);
    /* Bitwise: the same seed runs the same arithmetic whether or not another seed ran first in the process. */
    cr_assert(in_seeds == alone, "seed 43 inside --seeds 2: loss %.17g; --seed 43 alone: %.17g", in_seeds, alone);
    /* And the first seed's is another run (the seeds are not one run twice). */
    cr_assert(tta_loss(two, 0) != in_seeds, "seeds 42 and 43 gave the same loss %.17g", in_seeds);
    json_value_free(two), json_value_free(one);
    tu_rm_rf(data);
    free(data);
}

/* effnet-b0 has dropout and drop-connect: before the fix seed 43 kept seed 42's masks. */
Test(seeds_repeats, tta_seed_k_is_the_run_with_that_seed_alone_cpu_dropout)
{
    expect_second_seed_alone(ARGS("--plan", "tta", "--workload", "effnet-b0", "--resolution", "16", "--batch", "8", "--max-epochs", "1",
                                  "--steps-per-epoch", "2", "--target", "0.99", "--conv-algo", "im2col", "--tuning",
                                  "none", "--mllog", "none", "--quiet"));
}

/* mnist-mlp has no random layers; ipu bf16 stages round their weights stochastically, keyed by the seed. */
Test(seeds_repeats, tta_seed_k_is_the_run_with_that_seed_alone_ipu_rounding)
{
    expect_second_seed_alone(ARGS("--plan", "tta", "--workload", "mnist-mlp", "--batch", "8", "--max-epochs", "1",
                                  "--steps-per-epoch", "4", "--target", "0.99", "--backend", "ipu", "--devices", "2",
                                  "--stages", "2", "--split", "2", "--precision", "bf16", "--tuning", "none",
                                  "--mllog", "none", "--quiet"));
}

#define FP16_THROUGHPUT                                                                                                \
    "--plan", "throughput", "--workload", "effnet-b0", "--resolution", "16", "--data", "synthetic",                    \
        "--synthetic-samples", "64,16", "--batch", "8", "--backend", "ipu", "--devices", "1", "--stages", "1",         \
        "--precision", "fp16", "--steps", "8", "--warmup", "2", "--conv-algo", "im2col", "--tuning", "none",           \
        "--mllog", "none", "--quiet"

/* Every step of one repeat overflows at the initial scale (no update: exit 1). Before the fix a second repeat
 * went on at the scale the first reached, trained, and the run passed with the first repeat's skips in it. */
Test(seeds_repeats, fp16_repeat_two_is_two_of_repeat_one)
{
    char *e1, *e2;
    bench_row_err(ARGS(FP16_THROUGHPUT, "--repeat", "1"), 1, &e1);
    bench_row_err(ARGS(FP16_THROUGHPUT, "--repeat", "2"), 1, &e2);
    /* Both refuse for having applied no update, and the second repeat came down from the initial scale to where
     * the first did (had it gone on from the first's scale, it would have ended 2^10 lower, or trained). */
    cr_assert(strstr(e1, "no update applied") && strstr(e1, "all 10 steps"), "--repeat 1: %s", e1);
    cr_assert(strstr(e2, "no update applied") && strstr(e2, "all 20 steps"), "--repeat 2: %s", e2);
    const char *s1 = strstr(e1, "loss scale now "), *s2 = strstr(e2, "loss scale now ");
    cr_assert(s1 && s2, "no scale named: %s / %s", e1, e2);
    cr_assert_eq(strtod(s1 + strlen("loss scale now "), NULL), strtod(s2 + strlen("loss scale now "), NULL),
                 "the scale the repeats reached: %s / %s", e1, e2);
    free(e1), free(e2);
}

/* At resolution 32 the scale comes down within the run (8 of 10 steps skipped) and it trains: a second repeat
 * repeats the first bitwise (before the fix it started at the first one's scale and skipped other steps), and
 * the row counts both repeats' skipped steps. */
Test(seeds_repeats, fp16_repeats_start_from_the_initial_loss_scale)
{
#define FP16_R32                                                                                                       \
    "--plan", "throughput", "--workload", "effnet-b0", "--resolution", "32", "--data", "synthetic",                    \
        "--synthetic-samples", "64,16", "--batch", "8", "--backend", "ipu", "--devices", "1", "--stages", "1",         \
        "--precision", "fp16", "--steps", "8", "--warmup", "2", "--conv-algo", "im2col", "--tuning", "none",           \
        "--mllog", "none", "--quiet"
    struct json_value *one = bench_row(ARGS(FP16_R32, "--repeat", "1"), 0), *two = bench_row(ARGS(FP16_R32, "--repeat", "2"), 0);
    const double l1 = json_get_number(one, "figures.final_loss", -1), l2 = json_get_number(two, "figures.final_loss", -2);
    cr_assert(l1 > 0.0 && l1 == l2, "final loss: --repeat 1 %.17g, the second of --repeat 2 %.17g", l1, l2);
    /* The row's count is the run's, every repeat's skips (it was the last repeat's alone). */
    const double k1 = json_get_number(one, "figures.loss_scaling.skipped_steps", -1);
    cr_assert(k1 > 0.0, "the first repeat skipped steps: %g", k1);
    cr_assert_eq(json_get_number(two, "figures.loss_scaling.skipped_steps", -2), 2 * k1);
    json_value_free(one), json_value_free(two);
#undef FP16_R32
}

Test(seeds_repeats, tta_refuses_profile)
{
    struct proc p;
    run_bench(ARGS("--plan", "tta", "--workload", "mnist-mlp", "--data", "synthetic", "--synthetic-samples", "64,16",
                   "--batch", "8", "--max-epochs", "1", "--steps-per-epoch", "2", "--target", "0.99", "--profile",
                   "--tuning", "none", "--mllog", "none"),
              &p);
    cr_assert_eq(p.code, 2, "exit %d, want 2: %s", p.code, p.err);
    cr_assert(strstr(p.err, "--profile") && strchr(p.err, '\n') == p.err + strlen(p.err) - 1,
              "want one line naming --profile: %s", p.err);
    proc_free(&p);
}

/* A repeat that diverges keeps its reason: the per-repeat count of skipped steps queried the backend's stats
 * after the failed steps, and that query cleared the error, so bench printed "bench: " and nothing more. */
Test(seeds_repeats, a_diverged_repeat_says_why)
{
    char *dir = tu_mkdtemp("seeds");
    char *out = rb_path(dir, "row.jsonl");
    struct proc p;
    run_bench_in(dir,
                 ARGS("--backend", "ipu", "--precision", "fp16", "--plan", "throughput", "--steps", "20", "--warmup", "2",
                      "--lr", "1000", "--repeat", "2", "--data", "synthetic", "--synthetic-samples", "256,64", "--batch",
                      "16", "--mllog", "none", "--quiet", "--out", out),
                 -1, &p);
    cr_assert_eq(p.code, 1, "exit %d: %s", p.code, p.err);
    cr_assert(strstr(p.err, "diverged") && strstr(p.err, "NaN"), "the reason was lost: '%s'", p.err);
    proc_free(&p);
    tu_rm_rf(dir);
    free(out), free(dir);
}
