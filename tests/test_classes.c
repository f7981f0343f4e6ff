/* test_classes.c — class counts beyond a byte (issue 28 item 1): ImageNet's 1000 classes and more.
 *
 * Labels were uint8 in memory, so --classes 1000 was refused everywhere (even --describe). Here: the
 * EfficientNet parameter counts at 1000 classes are torchvision's (sum of p.numel() over
 * efficientnet_bK().parameters(), torchvision 0.14); a 1000-class synthetic set has labels ≥ 256; such a
 * label reaches the loss (the loss of label 999 is −log softmax(logits)[999], not that of 999 % 256);
 * and a 1000-class training run with its evaluation goes through the CLI's library path (bench_run).
 * Single-threaded; a few seconds.
 */
#include "test_util.h"

#include "backend.h"
#include "dataset.h"
#include "results.h"
#include "run.h"
#include "status.h"
#include "workload.h"

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

static size_t effnet_params(const char *name, int classes)
{
    const struct workload *w = workload_find(name);
    cr_assert_not_null(w, "%s", name);
    struct workload_opts o = {.classes = classes, .in_h = 224, .in_w = 224, .in_c = 3, .dropout = -1,
                              .drop_connect = -1};
    struct model m;
    cr_assert_eq(w->build(&m, &o), TB_OK, "%s: %s", name, tb_error_get());
    const size_t n = model_count_params(&m);
    model_free(&m);
    return n;
}

Test(classes, effnet_parameter_counts_are_torchvisions_at_1000_classes)
{
    /* torchvision.models.efficientnet_b0..b7(): sum(p.numel() for p in m.parameters()). */
    static const size_t want[8] = {5288548, 7794184, 9109994, 12233232, 19341616, 30389784, 43040704, 66347960};
    for (int k = 0; k < 8; k++) {
        char name[24]; /* "effnet-b" and any int: GCC at -O1 cannot bound k */
        snprintf(name, sizeof name, "effnet-b%d", k);
        cr_expect_eq(effnet_params(name, 1000), want[k], "%s: %zu parameters, torchvision has %zu", name,
                     effnet_params(name, 1000), want[k]);
    }
}

/* `bench --workload NAME --classes 1000 --describe`'s "total: N trainable parameters" (stdout captured). */
static long describe_total(const char *name)
{
    char *dir = tu_mkdtemp("describe"), *path = NULL;
    cr_assert(asprintf(&path, "%s/out.txt", dir) > 0);
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "workload", name), TB_OK);
    cr_assert_eq(bench_config_set(&c, "classes", "1000"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "data", "synthetic"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "synthetic-samples", "16,16"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "batch", "1"), TB_OK);
    c.describe = 1;
    fflush(stdout);
    const int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    const int rc = bench_run(&c);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    cr_assert_eq(rc, TB_OK, "--describe --classes 1000: %s", tb_error_get());
    char *text = tu_read_file(path, NULL);
    const char *t = text ? strstr(text, "total: ") : NULL;
    cr_assert_not_null(t, "no total line in:\n%s", text ? text : "");
    const long n = strtol(t + 7, NULL, 10);
    free(text), free(path);
    tu_rm_rf(dir);
    free(dir);
    return n;
}

Test(classes, describe_at_1000_classes_gives_torchvisions_totals, .timeout = 120)
{
    cr_expect_eq(describe_total("effnet-b0"), 5288548L);
    cr_expect_eq(describe_total("effnet-b4"), 19341616L);
}

Test(classes, synthetic_set_with_1000_classes_has_labels_past_255)
{
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(512, 8, 8, 1, 1000, 42, 1, &ds), TB_OK, "%s", tb_error_get());
    int hi = 0, max = 0;
    for (int i = 0; i < ds.n; i++) {
        cr_assert(ds.labels[i] >= 0 && ds.labels[i] < 1000, "label %d", (int)ds.labels[i]);
        hi += ds.labels[i] >= 256;
        if (ds.labels[i] > max) max = ds.labels[i];
    }
    cr_assert_gt(hi, 300, "%d of 512 labels are >= 256 (uniform over 1000 classes: ~381)", hi);
    cr_assert_gt(max, 900);
    dataset_free(&ds);
    /* The in-memory limit is far past a byte; beyond it a clear refusal. */
    cr_assert_eq(dataset_synthetic(4, 2, 2, 1, 65536, 1, 1, &ds), TB_OK, "%s", tb_error_get());
    dataset_free(&ds);
    cr_assert_eq(dataset_synthetic(4, 2, 2, 1, DATASET_MAX_CLASSES + 1, 1, 1, &ds), TB_EINVAL);
}

/* More classes than samples make each sample's class tables when it needs them (a one-sample --describe at
 * 100,000 classes had built tables for all of them: 2 GB); the samples are those of the set built with every
 * class's tables up front (more samples than classes), bit for bit. */
Test(classes, synthetic_samples_are_the_same_with_tables_made_per_class)
{
    struct dataset few, many;
    cr_assert_eq(dataset_synthetic(7, 12, 10, 3, 64, 42, 1, &few), TB_OK, "%s", tb_error_get());   /* 64 > 7 */
    cr_assert_eq(dataset_synthetic(200, 12, 10, 3, 64, 42, 1, &many), TB_OK, "%s", tb_error_get()); /* 64 <= 200 */
    cr_assert_eq(memcmp(few.labels, many.labels, 7 * sizeof *few.labels), 0);
    cr_assert_eq(memcmp(few.images, many.images, (size_t)7 * 12 * 10 * 3), 0, "per-class tables gave other pixels");
    dataset_free(&few), dataset_free(&many);
    /* and the big case stays small and quick: one sample of 100,000 classes at 224×224×3 */
    cr_assert_eq(dataset_synthetic(1, 224, 224, 3, 100000, 42, 1, &few), TB_OK, "%s", tb_error_get());
    dataset_free(&few);
}

/* One sample's loss and logits through the cpu backend's evaluation of a 1000-class mnist-mlp. */
static double loss_of_label(int32_t label, float *logits)
{
    struct workload_opts o = {.classes = 1000, .in_h = 8, .in_w = 8, .in_c = 1, .dropout = -1, .drop_connect = -1};
    struct model m;
    cr_assert_eq(workload_mnist_mlp.build(&m, &o), TB_OK, "%s", tb_error_get());
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(1, 8, 8, 1, 1000, 42, 1, &ds), TB_OK, "%s", tb_error_get());
    struct backend b;
    cr_assert_eq(backend_create(&b, "cpu"), TB_OK);
    struct run_config cfg = {0};
    cfg.batch = cfg.eval_batch = 1;
    cfg.seed = 3;
    optim_config_defaults(&cfg.optim, OPTIM_ADAM);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers + 1);
    workload_mnist_mlp.init(&m, params, buffers, 3);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, params), TB_OK);
    struct batch bt = {1, ds.images, &label};
    struct eval_stats ev = {.logits = logits};
    cr_assert_eq(backend_evaluate(&b, &bt, &ev), TB_OK, "%s", tb_error_get());
    cr_assert_eq(ev.n, 1);
    backend_destroy(&b);
    free(params), free(buffers);
    dataset_free(&ds);
    model_free(&m);
    return ev.loss_sum;
}

Test(classes, a_label_past_255_reaches_the_loss)
{
    float *logits = tu_fvec(1000), *logits2 = tu_fvec(1000);
    const double l999 = loss_of_label(999, logits), l231 = loss_of_label(999 % 256, logits2);
    tu_assert_bitwise(logits, logits2, 1000, "the logits do not depend on the label");
    double mx = -INFINITY, z = 0;
    for (int k = 0; k < 1000; k++) mx = logits[k] > mx ? logits[k] : mx;
    for (int k = 0; k < 1000; k++) z += exp((double)logits[k] - mx);
    const double want999 = log(z) + mx - logits[999], want231 = log(z) + mx - logits[231];
    cr_assert(fabs(l999 - want999) <= 1e-4 * fabs(want999) + 1e-5, "loss(999) %.7g, -log softmax[999] %.7g", l999,
              want999);
    cr_assert(fabs(l231 - want231) <= 1e-4 * fabs(want231) + 1e-5, "loss(231) %.7g, want %.7g", l231, want231);
    cr_assert(fabs(l999 - l231) > 1e-6, "label 999 and 231 give the same loss %.7g", l999);
    free(logits), free(logits2);
}

struct row1 {
    int n, classes;
    double acc;
};

static int on_row(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct row1 *r = ctx;
    r->n++;
    r->classes = (int)json_get_number(row, "config.classes", -1);
    r->acc = json_get_number(row, "figures.test_accuracy", -1);
    return TB_OK;
}

Test(classes, a_1000_class_synthetic_run_trains_and_evaluates, .timeout = 120)
{
    char *dir = tu_mkdtemp("classes");
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "backend", "cpu"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "workload", "mnist-mlp"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "data", "synthetic"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "classes", "1000"), TB_OK, "%s", tb_error_get());
    cr_assert_eq(bench_config_set(&c, "synthetic-samples", "256,128"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "steps", "4"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "batch", "32"), TB_OK);
    snprintf(c.out, sizeof c.out, "%s/results.jsonl", dir);
    snprintf(c.mllog_dir, sizeof c.mllog_dir, "none");
    c.quiet = 1;
    optim_config_defaults(&c.run.optim, workload_mnist_mlp.optimizer);
    int rc = bench_run(&c);
    cr_assert_eq(rc, TB_OK, "bench_run: %s", tb_error_get());
    struct row1 r = {0};
    cr_assert_eq(results_read_rows(c.out, on_row, &r), TB_OK, "%s", tb_error_get());
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.classes, 1000);
    cr_assert(r.acc >= 0.0 && r.acc <= 1.0, "test accuracy %g", r.acc);
    tu_rm_rf(dir);
    free(dir);
}
