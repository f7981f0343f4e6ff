/* test_evaluate_nan.c — outputs that are not finite are no result (issue: probe A finding 1).
 *   - the loss layer (core/softmax_ce_row.h, shared with the cuda kernels): a row with a NaN logit predicts
 *     no class, so its sample is never correct, wherever the NaN is (every comparison with NaN is false, so
 *     the argmax scan alone predicted class 0 or skipped it); finite and +Inf rows keep their argmax;
 *   - --plan evaluate of finite mnist-mlp weights (±3e38) whose eval-mode logits are NaN or Inf: TB_EDIVERGED
 *     with one line saying the outputs are not finite, a "diverged" row without loss or accuracy figures and
 *     a diverged_at_step within the plan, no --logits file (it had been status ok, top-1 counted, exit 0);
 *   - --plan train of effnet-b0 whose training losses are finite but whose eval-mode outputs are not (SGD's
 *     first steps blow up the BatchNorm running statistics): TB_EDIVERGED, no "ok" row with a test accuracy.
 * Each test in its own temp directory; in-process runs on the cpu backend, a second or two each.
 */
#include "test_harness_util.h"

#include "json.h"
#include "op_loss.h"
#include "results.h"

#include <math.h>
#include <stdint.h>

TestSuite(evaluate_nan, .init = th_setup, .fini = th_teardown, .timeout = 120);

Test(evaluate_nan, a_row_with_a_nan_logit_is_never_a_correct_prediction)
{
    enum { N = 6, K = 3 };
    const float nan = NAN, inf = INFINITY;
    const float z[N * K] = {
        nan, 1, 2,   /* label 0: the scan started at the NaN and nothing compares above it */
        5, nan, 1,   /* label 0: the NaN was skipped */
        1, 2, nan,   /* label 1: the NaN was skipped */
        nan, nan, nan,
        1, 3, 2,     /* label 1: finite, correct */
        inf, 0, 1,   /* label 0: an infinite logit still ranks first */
    };
    const int32_t y[N] = {0, 0, 1, 0, 1, 0};
    const uint8_t want[N] = {0, 0, 0, 0, 1, 1};
    float loss[N];
    uint8_t correct[N];
    memset(correct, 0xff, sizeof correct);
    const struct softmax_ce_shape s = {N, K, 0.0f};
    softmax_ce_forward_backward(loss, NULL, correct, z, y, 1.0f, &s, 0, 1);
    for (int n = 0; n < N; n++) cr_assert_eq(correct[n], want[n], "row %d: correct %d, want %d", n, correct[n], want[n]);
    for (int n = 0; n < 4; n++) cr_assert(isnan(loss[n]), "row %d: a NaN logit gives a NaN loss", n);
    cr_assert(isfinite(loss[4]));
}

/* Sets every float of the safetensors file at path (all F32, as mnist-mlp's saves are) to ±3e38, the sign
 * flipping every 7 values: finite weights, so --load takes them, whose forward overflows to ±Inf and NaN. */
static void overflowing_weights(const char *path)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f, "%s", path);
    uint64_t hlen = 0;
    cr_assert_eq(fread(&hlen, sizeof hlen, 1, f), 1); /* little-endian host, as the format is */
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    const long data = (long)(8 + hlen), n = (ftell(f) - data) / (long)sizeof(float);
    cr_assert(n > 1000, "%ld floats", n);
    float *w = malloc((size_t)n * sizeof *w);
    cr_assert_not_null(w);
    for (long i = 0; i < n; i++) w[i] = (i / 7) % 2 ? -3e38f : 3e38f;
    cr_assert_eq(fseek(f, data, SEEK_SET), 0);
    cr_assert_eq(fwrite(w, sizeof *w, (size_t)n, f), (size_t)n);
    cr_assert_eq(fclose(f), 0);
    free(w);
}

Test(evaluate_nan, evaluate_with_non_finite_outputs_is_a_diverged_row_not_an_accuracy)
{
    char w[192], lg[192];
    th_path(w, sizeof w, "w.safetensors");
    th_path(lg, sizeof lg, "logits.npy");
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "plan", "train"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "steps", "1"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "batch", "8"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "save", w), TB_OK);
    th_bench_quiet(&c, 64, 200);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    overflowing_weights(w);

    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "plan", "evaluate"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "load", w), TB_OK);
    cr_assert_eq(bench_config_set(&c, "logits", lg), TB_OK);
    cr_assert_eq(bench_config_set(&c, "eval-batch", "64"), TB_OK);
    th_bench_quiet(&c, 64, 200);
    cr_assert_eq(bench_run(&c), TB_EDIVERGED, "%s", tb_error_get());
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "cpu/mnist-mlp: evaluate: the model's eval-mode outputs are not finite") != NULL, "%s", msg);
    cr_assert(strstr(msg, "of 200 test samples") != NULL && strchr(msg, '\n') == NULL, "%s", msg);
    cr_assert_eq(th_size(lg), -1, "no logits file from an evaluation that diverged");

    struct json_value *row = th_last_row();
    cr_assert_not_null(row);
    cr_assert_str_eq(json_get_str(row, "status", ""), "diverged");
    cr_assert_str_eq(json_get_str(row, "kind", ""), "evaluate");
    cr_assert_null(json_get(row, "figures.eval_top1"), "no accuracy from outputs that are not finite");
    cr_assert_null(json_get(row, "figures.eval_top5"));
    cr_assert_null(json_get(row, "figures.eval_loss"));
    const double at = json_get_number(row, "figures.diverged_at_step", -1);
    const double planned = json_get_number(row, "figures.planned_steps", -1);
    cr_assert_eq(planned, 4.0, "200 samples in evaluation batches of 64");
    cr_assert(at >= 1.0 && at <= planned, "diverged_at_step %g of %g", at, planned);
    cr_assert(strstr(json_get_str(row, "figures.reason", ""), "not finite") != NULL);
    json_value_free(row);
}

Test(evaluate_nan, train_whose_eval_mode_outputs_are_not_finite_reports_no_test_accuracy)
{
    struct bench_config c;
    bench_config_defaults(&c);
    static const char *const opt[][2] = {
        {"plan", "train"},   {"workload", "effnet-b0"}, {"resolution", "16"}, {"conv-algo", "im2col"},
        {"tuning", "none"},  {"batch", "2"},            {"optimizer", "sgd"}, {"lr", "0.01"},
        {"steps", "2"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(&c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    th_bench_quiet(&c, 64, 16);
    cr_assert_eq(bench_run(&c), TB_EDIVERGED, "%s", tb_error_get());
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "cpu/effnet-b0: diverged: the test loss is NaN: the model's eval-mode outputs are not "
                          "finite") != NULL, "%s", msg);
    struct json_value *row = th_last_row();
    if (row) {
        cr_assert_str_neq(json_get_str(row, "status", ""), "ok", "a row with a test accuracy of NaN outputs");
        cr_assert_null(json_get(row, "figures.test_accuracy"));
        json_value_free(row);
    }
}
