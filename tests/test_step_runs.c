/* test_step_runs.c — the harness's runs of steps (--steps-per-execution N: the batches of an epoch staged
 * once, then N steps a backend call) against one step a call, on the cpu: the same bits.
 *
 * The seam is the one a GPU's own loop uses (backend_run_steps → executor_run_steps; the cuda device's
 * captured step is test_executor's and test_backends' cuda instances), so the cpu runs here check what the
 * harness does around it: the sample order of the staged batches, the step keys, the losses booked step
 * by step, runs cut at epoch ends and evaluations, and the deferred batch-1 update finished at the end.
 *   - train, mnist-mlp, 3 epochs of 50 steps at batch 1 (the fused, deferred Adam) and 8: first and final
 *     loss, test accuracy and loss equal, the saved weights bitwise; 8 calls an epoch at N = 7
 *     (figures.step_executions = 24), none recorded one step a call;
 *   - tta, two seeds, an evaluation every 16 steps, N = 5: every evaluation's accuracy and loss and each
 *     seed's steps equal;
 *   - a diverging run (SGD at lr 1000): the same error, at the same step, in the same row;
 *   - the first plain progress line (after step 1) shows the same step and loss;
 *   - --steps-per-execution with --trace, or on the inference plan, is refused;
 *   - no call straddles the warm-up's end (throughput, train and tta), so the warm-up stays out of the
 *     timed steps: --warmup 1 --steps 20 at N = 21 is 2 calls a repeat; train's weights stay bitwise.
 * Single-threaded (the cpu backend); a few seconds.
 */
#include "test_harness_util.h"

#include "checkpoint.h"
#include "json.h"
#include "results.h"
#include "workload.h"

#include <math.h>

TestSuite(step_runs, .init = th_setup, .fini = th_teardown, .timeout = 120);

/* The last row of rows.jsonl, which must be there (the caller frees it); the file is then removed, so the
 * next run's row is the next one read. */
static struct json_value *last_row(void)
{
    struct json_value *row = th_last_row();
    cr_assert_not_null(row, "no row written");
    char p[192];
    remove(th_path(p, sizeof p, "rows.jsonl"));
    return row;
}

/* A quiet mnist-mlp run of `plan` at `batch` on 1,024 + 256 synthetic samples, with --steps-per-execution
 * `spe` (NULL: not given) and one more option (name NULL: none); returns bench_run's status. */
static int bench(const char *plan, const char *batch, const char *spe, const char *name, const char *value)
{
    struct bench_config c;
    if (!strcmp(plan, "tta")) {
        th_small_tta(&c, "0.5", "2", "3");
    } else {
        bench_config_defaults(&c);
        cr_assert_eq(bench_config_set(&c, "plan", plan), TB_OK);
        th_bench_quiet(&c, 1024, 256);
        cr_assert_eq(bench_config_set(&c, "epochs", "3"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "steps-per-epoch", "50"), TB_OK);
    }
    cr_assert_eq(bench_config_set(&c, "batch", batch), TB_OK);
    if (spe) cr_assert_eq(bench_config_set(&c, "steps-per-execution", spe), TB_OK, "%s", tb_error_get());
    if (name) cr_assert_eq(bench_config_set(&c, name, value), TB_OK, "%s", tb_error_get());
    return bench_run(&c);
}

/* The number at path in both rows, bitwise the same. */
static void same_number(const struct json_value *a, const struct json_value *b, const char *path)
{
    const struct json_value *va = json_get(a, path), *vb = json_get(b, path);
    cr_assert(va && vb && va->type == JSON_NUMBER && vb->type == JSON_NUMBER, "%s missing", path);
    cr_assert(memcmp(&va->number, &vb->number, sizeof(double)) == 0, "%s: %.17g one step a call, %.17g in runs", path,
              va->number, vb->number);
}

/* mnist-mlp's parameters in a --save file. */
static float *saved_params(const char *file, size_t *n)
{
    struct model m;
    struct workload_opts o = {.classes = 10, .in_h = 28, .in_w = 28, .in_c = 1, .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_mnist_mlp.build(&m, &o), TB_OK, "%s", tb_error_get());
    float *p = calloc(m.n_params, sizeof *p), *buf = calloc(m.n_buffers + 1, sizeof *buf);
    cr_assert(p && buf);
    char path[192];
    cr_assert_eq(checkpoint_load(th_path(path, sizeof path, file), &m, p, buf), TB_OK, "%s", tb_error_get());
    *n = m.n_params;
    free(buf);
    model_free(&m);
    return p;
}

Test(step_runs, train_runs_of_steps_give_the_per_step_bits)
{
    static const char *const batches[] = {"1", "8"};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(bench("train", batches[k], NULL, "save", "one.safetensors"), TB_OK, "%s", tb_error_get());
        struct json_value *one = last_row();
        cr_assert_eq(bench("train", batches[k], "7", "save", "runs.safetensors"), TB_OK, "%s", tb_error_get());
        struct json_value *runs = last_row();
        static const char *const figs[] = {"figures.first_loss", "figures.final_loss", "figures.test_accuracy",
                                           "figures.test_loss", "figures.train_steps"};
        for (size_t i = 0; i < sizeof figs / sizeof *figs; i++) same_number(one, runs, figs[i]);
        cr_assert_null(json_get(one, "figures.step_executions"), "one step a call records no runs");
        cr_assert_eq(json_get_number(runs, "figures.step_executions", -1), 24.0, "runs of 7 cut at each epoch's end "
                     "(50 = 7·7 + 1): 8 calls an epoch");
        cr_assert_eq(json_get_number(runs, "config.steps_per_execution", -1), 7.0);
        cr_assert_eq(json_get_number(one, "config.steps_per_execution", -1), 0.0);
        size_t n1, n2;
        float *p1 = saved_params("one.safetensors", &n1), *p2 = saved_params("runs.safetensors", &n2);
        cr_assert_eq(n1, n2);
        cr_assert(memcmp(p1, p2, n1 * sizeof *p1) == 0, "batch %s: the saved weights differ", batches[k]);
        free(p1), free(p2);
        json_value_free(one), json_value_free(runs);
    }
}

Test(step_runs, tta_evaluations_are_the_per_step_ones)
{
    cr_assert_eq(bench("tta", "32", NULL, NULL, NULL), TB_OK, "%s", tb_error_get());
    struct json_value *one = last_row();
    cr_assert_eq(bench("tta", "32", "5", NULL, NULL), TB_OK, "%s", tb_error_get());
    struct json_value *runs = last_row();
    for (int s = 0; s < 2; s++) {
        char path[96];
        snprintf(path, sizeof path, "figures.runs.%d.steps", s);
        same_number(one, runs, path);
        snprintf(path, sizeof path, "figures.runs.%d.curve", s);
        const struct json_value *ca = json_get(one, path), *cb = json_get(runs, path);
        cr_assert(ca && cb && ca->n == cb->n && ca->n > 0, "seed %d: the evaluations differ in number", s);
        for (int i = 0; i < ca->n; i++) {
            static const char *const keys[] = {"step", "accuracy", "loss"};
            for (int j = 0; j < 3; j++) {
                snprintf(path, sizeof path, "figures.runs.%d.curve.%d.%s", s, i, keys[j]);
                same_number(one, runs, path);
            }
        }
    }
    json_value_free(one), json_value_free(runs);
}

Test(step_runs, divergence_is_found_at_the_same_step)
{
    char msg[2][512];
    double at[2];
    for (int k = 0; k < 2; k++) {
        struct bench_config c;
        bench_config_defaults(&c);
        th_bench_quiet(&c, 1024, 256);
        cr_assert_eq(bench_config_set(&c, "steps", "50"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "batch", "8"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "optimizer", "sgd"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr", "1000"), TB_OK);
        if (k) cr_assert_eq(bench_config_set(&c, "steps-per-execution", "9"), TB_OK);
        cr_assert_eq(bench_run(&c), TB_EDIVERGED, "%s", tb_error_get());
        snprintf(msg[k], sizeof msg[k], "%s", tb_error_get());
        struct json_value *row = last_row();
        cr_assert_str_eq(json_get_str(row, "status", ""), "diverged");
        at[k] = json_get_number(row, "figures.diverged_at_step", -1);
        json_value_free(row);
    }
    cr_assert_str_eq(msg[1], msg[0]);
    cr_assert_eq(at[1], at[0]);
    cr_assert_gt(at[0], 1.0);
}

/* The first plain progress line (the one after step 1): "<label> step 1/150  loss X  ..." up to the rate. */
static void first_progress_line(const char *spe, char *out, size_t n)
{
    struct bench_config c;
    bench_config_defaults(&c);
    th_bench_quiet(&c, 1024, 256);
    c.quiet = 0; /* progress on (plain lines), the summary on stdout is not read */
    cr_assert_eq(bench_config_set(&c, "epochs", "3"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "steps-per-epoch", "50"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "batch", "4"), TB_OK);
    if (spe) cr_assert_eq(bench_config_set(&c, "steps-per-execution", spe), TB_OK);
    progress_force(2);
    th_stderr_begin();
    const int st = bench_run(&c);
    char *err = th_stderr_end();
    progress_force(-1);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    const char *line = strstr(err, " step 1/150");
    cr_assert_not_null(line, "no progress line after step 1:\n%s", err);
    const char *rate = strstr(line, " img/s");
    cr_assert_not_null(rate);
    while (rate > line && rate[-1] != ' ') rate--; /* the loss, without the rate */
    snprintf(out, n, "%.*s", (int)(rate - line), line);
    free(err);
}

Test(step_runs, progress_shows_the_same_steps_and_losses)
{
    char one[256], runs[256];
    first_progress_line(NULL, one, sizeof one);
    first_progress_line("6", runs, sizeof runs);
    cr_assert_str_eq(runs, one);
    cr_assert_not_null(strstr(one, "loss "), "%s", one);
}

Test(step_runs, refused_where_single_steps_are_recorded)
{
    cr_assert_eq(bench("train", "8", "4", "trace", "t.json"), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "--trace") != NULL, "%s", tb_error_get());
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "plan", "inference"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "steps-per-execution", "4"), TB_OK);
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "plans that train") != NULL, "%s", tb_error_get());
    cr_assert_eq(bench_config_set(&c, "steps-per-execution", "0"), TB_EINVAL, "0 is not a count (auto is)");
}

/* A quiet mnist-mlp run of `plan` at batch 8 with --warmup `warmup` and --steps-per-execution `spe` (NULL: not
 * given), plus the options in kv (name, value pairs, NULL-terminated); returns its row (the caller frees it). */
static struct json_value *warm_run(const char *plan, const char *warmup, const char *spe, const char *const *kv)
{
    struct bench_config c;
    if (!strcmp(plan, "tta")) {
        th_small_tta(&c, "0.5", "2", "3");
        cr_assert_eq(bench_config_set(&c, "batch", "32"), TB_OK);
    } else {
        bench_config_defaults(&c);
        cr_assert_eq(bench_config_set(&c, "plan", plan), TB_OK);
        th_bench_quiet(&c, 1024, 256);
        cr_assert_eq(bench_config_set(&c, "batch", "8"), TB_OK);
    }
    cr_assert_eq(bench_config_set(&c, "warmup", warmup), TB_OK);
    if (spe) cr_assert_eq(bench_config_set(&c, "steps-per-execution", spe), TB_OK);
    for (int k = 0; kv && kv[k]; k += 2)
        cr_assert_eq(bench_config_set(&c, kv[k], kv[k + 1]), TB_OK, "--%s %s: %s", kv[k], kv[k + 1], tb_error_get());
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    return last_row();
}

Test(step_runs, throughput_calls_stop_at_the_warmup_end)
{
    /* One call of 21 steps would share the cold first step's time with the 20 timed ones. */
    static const char *const kv[] = {"steps", "20", "repeat", "2", NULL};
    struct json_value *row = warm_run("throughput", "1", "21", kv);
    cr_assert_eq(json_get_number(row, "figures.step_executions", -1), 4.0, "each repeat: the warm-up step, then 20");
    cr_assert_eq(json_get_number(row, "figures.warmup_steps", -1), 1.0);
    cr_assert_eq(json_get_number(row, "figures.timed_steps", -1), 40.0);
    json_value_free(row);
}

Test(step_runs, train_calls_stop_at_the_warmup_end_with_the_same_bits)
{
    static const char *const kv1[] = {"steps", "20", "save", "one.safetensors", NULL};
    static const char *const kv2[] = {"steps", "20", "save", "runs.safetensors", NULL};
    struct json_value *one = warm_run("train", "1", NULL, kv1), *runs = warm_run("train", "1", "10", kv2);
    cr_assert_eq(json_get_number(runs, "figures.step_executions", -1), 3.0, "steps 1, 2-11 and 12-20");
    cr_assert_eq(json_get_number(runs, "figures.warmup_steps", -1), 1.0);
    static const char *const figs[] = {"figures.first_loss", "figures.final_loss", "figures.train_steps"};
    for (size_t i = 0; i < sizeof figs / sizeof *figs; i++) same_number(one, runs, figs[i]);
    size_t n1, n2;
    float *p1 = saved_params("one.safetensors", &n1), *p2 = saved_params("runs.safetensors", &n2);
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(p1, p2, n1 * sizeof *p1) == 0, "the saved weights differ");
    free(p1), free(p2);
    json_value_free(one), json_value_free(runs);
}

Test(step_runs, tta_calls_stop_at_the_warmup_end)
{
    /* Evaluations every 16 steps at N = 8: 2 calls a period; a warm-up of 2 adds one call to each seed's
     * first period (steps 1-2, 3-10, 11-16), and changes no step. */
    struct json_value *cold = warm_run("tta", "0", "8", NULL), *warm = warm_run("tta", "2", "8", NULL);
    cr_assert_eq(json_get_number(warm, "figures.step_executions", -1),
                 json_get_number(cold, "figures.step_executions", -1) + 2.0, "one more call for each of 2 seeds");
    for (int s = 0; s < 2; s++) {
        char path[96];
        snprintf(path, sizeof path, "figures.runs.%d.steps", s);
        same_number(cold, warm, path);
        snprintf(path, sizeof path, "figures.runs.%d.curve.0.loss", s);
        same_number(cold, warm, path);
    }
    json_value_free(cold), json_value_free(warm);
}
