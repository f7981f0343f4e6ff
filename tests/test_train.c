/* test_train.c — an end-to-end training run: mnist-mlp on Fashion-MNIST, batch 32, one epoch, cpu.
 *
 * Drives the library the way the CLI does (bench_config → bench_run, result row appended to a temp
 * file), reads the row back with results_read_rows and asserts the test accuracy reaches 80 % (Keras
 * reaches about 85 % after one epoch of this model). Skipped when the dataset is not installed.
 * Single-threaded; about two seconds.
 */
#include "test_util.h"

#include "results.h"
#include "run.h"
#include "session.h"
#include "status.h"

#include <sys/stat.h>
#include <unistd.h>

struct rows {
    int n;
    double accuracy;
    char backend[32], dataset[64];
    long steps;
};

static int on_row(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct rows *r = ctx;
    r->n++;
    r->accuracy = json_get_number(row, "figures.test_accuracy", -1.0);
    r->steps = (long)json_get_number(row, "config.steps", -1.0);
    snprintf(r->backend, sizeof r->backend, "%s", json_get_str(row, "config.backend", ""));
    snprintf(r->dataset, sizeof r->dataset, "%s", json_get_str(row, "config.dataset", ""));
    return TB_OK;
}

Test(train, fashion_mnist_one_epoch_reaches_80_percent, .timeout = 120)
{
    struct stat st;
    if (stat(DATASET_DEFAULT_DIR, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cr_skip_test("Fashion-MNIST not installed at %s", DATASET_DEFAULT_DIR);
        return;
    }
    char *dir = tu_mkdtemp("train");
    struct bench_config c;
    bench_config_defaults(&c);
    snprintf(c.backend, sizeof c.backend, "cpu");
    snprintf(c.workload, sizeof c.workload, "mnist-mlp");
    snprintf(c.data, sizeof c.data, "%s", DATASET_DEFAULT_DIR);
    snprintf(c.out, sizeof c.out, "%s/results.jsonl", dir);
    c.run.batch = 32;
    c.epochs = 1;
    c.quiet = 1;
    /* As the CLI does: the workload's optimizer with its defaults (Keras Adam, lr 1e-3). */
    optim_config_defaults(&c.run.optim, workload_mnist_mlp.optimizer);
    c.run.optim.lr = workload_mnist_mlp.lr;
    int rc = bench_run(&c);
    cr_assert_eq(rc, TB_OK, "bench_run: %s (%s)", tb_error_get(), tb_status_name(rc));

    struct rows r = {0};
    cr_assert_eq(results_read_rows(c.out, on_row, &r), TB_OK, "reading %s: %s", c.out, tb_error_get());
    cr_assert_eq(r.n, 1, "expected one result row, found %d", r.n);
    cr_assert_str_eq(r.backend, "cpu");
    cr_assert_str_eq(r.dataset, "fashion-mnist");
    cr_assert_eq(r.steps, 60000 / 32, "one epoch of batch 32 is 1875 steps, the row says %ld", r.steps);
    cr_assert(r.accuracy >= 0.80, "test accuracy %.4f after one epoch, want >= 0.80", r.accuracy);
    cr_assert(r.accuracy <= 1.0, "test accuracy %.4f", r.accuracy);
    tu_rm_rf(dir);
    free(dir);
}

/* Issue 27 item 4: the default evaluation batch is bounded by what its activations need (1 GiB), not
 * max(batch, 256): effnet-b0 at 224×224 with --steps 8 peaked at 18 GB evaluating 256 at a time. It never
 * exceeds the test set, and halves until the run fits the memory given. */
Test(train, eval_batch_sized_to_the_job)
{
    const struct workload *w = workload_find("effnet-b0");
    cr_assert_not_null(w);
    struct workload_opts o = {0};
    o.in_h = o.in_w = 224, o.in_c = 3, o.classes = 10, o.dropout = -1.0f, o.drop_connect = -1.0f;
    struct model m;
    cr_assert_eq(w->build(&m, &o), TB_OK, "%s", tb_error_get());
    const int eb = eval_batch_choose(&m, 8, 0, 10000, 1, 0.0);
    cr_assert_geq(eb, 8, "at least the training batch");
    cr_assert_lt(eb, 256, "256 samples of 224×224 activations is many GB");
    cr_assert_leq(4.0 * (double)(model_act_floats(&m, eb) - model_act_floats(&m, 0)), 1.1 * (double)(1L << 30));
    cr_assert_eq(eval_batch_choose(&m, 8, 1048576, 200, 1, 0.0), 200, "clamped to the test set");
    const double small = model_train_bytes(&m, 8, 1, 8) / 0.9 * 1.01;
    cr_assert_leq(eval_batch_choose(&m, 8, 512, 10000, 1, small), 8, "halved until it fits");
    model_free(&m);
}
