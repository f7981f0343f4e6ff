/* test_small_refusals.c — small settings a row recorded and the run ignored, a dataset named after its folder,
 * and rows read from a pipe:
 *   - --tuning FILE on the cuda device (its kernels are its own; the row said "none") is refused as --conv-algo is;
 *   - --conv-algo on a workload without convolutions (mnist-mlp) is refused as --resolution is;
 *   - an IDX set's name comes from its contents, never the directory's name;
 *   - `bench report` and `bench compare` read rows from a pipe or FIFO; devices and directories stay refused.
 * (The committed sample rows' keys are checked by test_row_schema.c, beside the walker they need.)
 */
#include "test_util.h"

#include "test_reliability_util.h"

#include "backend.h"
#include "dataset.h"
#include "run.h"
#include "status.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(small, .timeout = 60);

#define OPTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* cuda/ never reads --tuning (conv_tuning_on is 0 there): the row recorded "none" for a file the user named. */
Test(small, tuning_file_on_the_cuda_device_is_refused)
{
    if (!backend_find("cuda")) cr_skip_test("no cuda backend in this build (TB_CUDA=OFF)");
    cr_assert_eq(rb_finish_config("cuda", "effnet-b0", OPTS("tuning", "t.json")), TB_EINVAL, "accepted");
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "--tuning t.json") && strstr(msg, "cuda device") && !strchr(msg, '\n'), "%s", msg);
    cr_assert_eq(rb_finish_config("mirrored", "effnet-b0", OPTS("device", "cuda", "tuning", "t.json")), TB_EINVAL,
                 "accepted on mirrored --device cuda");
    /* a suite's backend=* leaves cuda out of a line with tuning=FILE */
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "backend", "cuda"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "tuning", "t.json"), TB_OK);
    cr_assert_eq(bench_config_check_backend(&c), TB_EINVAL);
    cr_assert_eq(rb_finish_config("cuda", "effnet-b0", OPTS("tuning", "none")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(rb_finish_config("cuda", "effnet-b0", OPTS("batch", "8")), TB_OK, "the default file: %s",
                 tb_error_get());
    cr_assert_eq(rb_finish_config("cpu", "effnet-b0", OPTS("tuning", "t.json")), TB_OK, "%s", tb_error_get());
}

/* The row recorded "conv_algo":"fft" for an MLP, which has no convolution to run with it. */
Test(small, conv_algo_on_a_workload_without_convolutions_is_refused)
{
    static const char *const algos[] = {"im2col", "direct", "fft", "gemm1x1"};
    for (size_t k = 0; k < sizeof algos / sizeof *algos; k++) {
        cr_assert_eq(rb_finish_config("cpu", "mnist-mlp", OPTS("conv-algo", algos[k])), TB_EINVAL, "%s accepted",
                     algos[k]);
        const char *msg = tb_error_get();
        cr_assert(strstr(msg, "--conv-algo") && strstr(msg, "mnist-mlp") && strstr(msg, "no convolutions") &&
                      !strchr(msg, '\n'),
                  "%s", msg);
    }
    cr_assert_eq(rb_finish_config("threads", "mnist-mlp", OPTS("conv-algo", "fft")), TB_EINVAL, "accepted on threads");
    cr_assert_eq(rb_finish_config("cpu", "mnist-mlp", OPTS("conv-algo", "auto")), TB_OK, "auto: %s", tb_error_get());
    cr_assert_eq(rb_finish_config("cpu", "effnet-b0", OPTS("conv-algo", "fft")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(rb_finish_config("cpu", "effnet-b0-g16", OPTS("conv-algo", "gemm1x1")), TB_OK, "%s", tb_error_get());
    /* and so through bench: a usage error, exit 2 */
    char *dir = tu_mkdtemp("small");
    const int code = rb_run(dir, "mlp", RB_ARGS(RB_BASE), RB_ARGS("--steps", "1", "--conv-algo", "direct"));
    char *err = rb_stderr(dir, "mlp");
    cr_assert(code == 2 && strstr(err, "--conv-algo direct: workload mnist-mlp"), "exit %d: %s", code, err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

static void expect_name(const char *dir, int train, const char *want)
{
    struct dataset ds;
    cr_assert_eq(idx_load_dir(dir, train, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(ds.name, want, "%s: %s, want %s", dir, ds.name, want);
    dataset_free(&ds);
}

/* The name was guessed from the directory ("fashion" in it: fashion-mnist, else mnist), so Fashion-MNIST
 * copied to a folder named mnist was recorded as MNIST, and anything under a folder named fashion as
 * Fashion-MNIST. It now comes from the contents. */
Test(small, an_idx_sets_name_is_what_it_holds_not_its_folders_name)
{
    char *dir = tu_mkdtemp("small");
    char sub[600];
    /* MNIST's test-split class counts, in a folder named after the other set */
    static const int mnist_test[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    uint8_t *lab = malloc(10000);
    cr_assert_not_null(lab);
    for (int k = 0, i = 0; k < 10; k++)
        for (int j = 0; j < mnist_test[k]; j++) lab[i++] = (uint8_t)k;
    snprintf(sub, sizeof sub, "%s/fashion-mnist", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    tu_write_idx(sub, "t10k", 10000, NULL, lab);
    expect_name(sub, 0, "mnist");
    /* one label more of class 0, one fewer of class 1: no longer MNIST's counts, so the format's name */
    lab[980] = 0;
    tu_write_idx(sub, "t10k", 10000, NULL, lab);
    expect_name(sub, 0, "idx");
    /* a small set in a folder that says Fashion */
    snprintf(sub, sizeof sub, "%s/My-Fashion-set", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    tu_write_idx(sub, "t10k", 3, NULL, lab);
    expect_name(sub, 0, "idx");
    free(lab);
    /* Debian's Fashion-MNIST under a folder named mnist (links to its files) */
    struct stat st;
    if (stat(DATASET_DEFAULT_DIR "/t10k-labels-idx1-ubyte.gz", &st) == 0) {
        snprintf(sub, sizeof sub, "%s/mnist", dir);
        cr_assert_eq(mkdir(sub, 0700), 0);
        static const char *const files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                            "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
        for (int k = 0; k < 4; k++) {
            char from[300], to[900];
            snprintf(from, sizeof from, "%s/%s", DATASET_DEFAULT_DIR, files[k]);
            snprintf(to, sizeof to, "%s/%s", sub, files[k]);
            cr_assert_eq(symlink(from, to), 0);
        }
        expect_name(sub, 0, "fashion-mnist"); /* the train split: idx/debian_fashion_mnist */
    } else {
        cr_log_info("%s not installed: the Fashion-MNIST part is not checked", DATASET_DEFAULT_DIR);
    }
    tu_rm_rf(dir);
    free(dir);
}

/* ---------------------------------------------------------------- rows from a pipe */

/* A child that writes the file at src into the FIFO at fifo (opening it blocks until the reader opens). */
static pid_t feed_fifo(const char *fifo, const char *src)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(20); /* never outlives a test whose bench did not open the FIFO */
        size_t n = 0;
        char *text = tu_read_file(src, &n);
        const int fd = open(fifo, O_WRONLY);
        if (!text || fd < 0) _exit(1);
        for (size_t off = 0; off < n;) {
            const ssize_t w = write(fd, text + off, n - off);
            if (w <= 0) _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    return pid;
}

/* Lets a writer still waiting on fifo go (its writes then fail), so that a bench that never read it fails the
 * test instead of hanging it. */
static void release(const char *fifo)
{
    const int fd = open(fifo, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
}

/* `bench report --in <(zcat rows.gz)` was refused as "not a regular file": rows are read once, as they
 * stream, so a pipe serves. /dev/null and a directory are still refused, and export, which reads its
 * inputs twice, still refuses a pipe rather than wait on it. */
Test(small, report_and_compare_read_rows_from_a_pipe)
{
    char *dir = tu_mkdtemp("small");
    char *a = rb_path(dir, "a.fifo"), *b = rb_path(dir, "b.fifo");
    const char *sample = TB_SOURCE_DIR "/results/sample.jsonl";
    cr_assert_eq(mkfifo(a, 0600), 0);
    cr_assert_eq(mkfifo(b, 0600), 0);
    pid_t wa = feed_fifo(a, sample), wb = feed_fifo(b, sample);
    int code = rb_run(dir, "cmp", RB_ARGS("compare", "a.fifo", "b.fifo"), NULL);
    release(a);
    release(b);
    char *err = rb_stderr(dir, "cmp");
    cr_assert_eq(code, 0, "compare on two FIFOs: exit %d: %s", code, err);
    free(err);
    char *cmp_out = rb_path(dir, "cmp.out"), *out = tu_read_file(cmp_out, NULL);
    cr_assert(out && strstr(out, "mnist-mlp"), "compare printed no configuration:\n%s", out ? out : "");
    free(out);
    free(cmp_out);
    cr_assert_eq(rb_wait(wa), 0, "compare did not read the first FIFO");
    cr_assert_eq(rb_wait(wb), 0, "compare did not read the second FIFO");
    /* report, tables only (no gnuplot: fast) */
    wa = feed_fifo(a, sample);
    code = rb_run(dir, "rep", RB_ARGS("report", "--in", "a.fifo", "--out-dir", "r", "--plots", TB_SOURCE_DIR "/plots",
                                      "--gnuplot", "/nonexistent/gp"),
                  NULL);
    release(a);
    err = rb_stderr(dir, "rep");
    cr_assert(code == 0 && strstr(err, "REPORT.md has tables only"), "report on a FIFO: exit %d: %s", code, err);
    free(err);
    cr_assert_eq(rb_wait(wa), 0, "report did not read the FIFO");
    char *md_path = rb_path(dir, "r/REPORT.md"), *md = tu_read_file(md_path, NULL);
    cr_assert(md && strstr(md, "mnist-mlp"), "REPORT.md has no rows");
    free(md);
    free(md_path);
    /* not a file of rows */
    static const char *const bad[][2] = {{"/dev/null", "not a regular file or a pipe"}, {".", "is a directory"}};
    for (int k = 0; k < 2; k++) {
        code = rb_run(dir, "bad", RB_ARGS("compare", bad[k][0], "a.fifo"), NULL);
        err = rb_stderr(dir, "bad");
        cr_assert(code != 0 && strstr(err, bad[k][1]), "%s: exit %d: %s", bad[k][0], code, err);
        free(err);
    }
    code = rb_run(dir, "exp", RB_ARGS("export", "--csv", "x.csv", "--in", "a.fifo"), NULL);
    err = rb_stderr(dir, "exp");
    cr_assert(code != 0 && strstr(err, "not a regular file"), "export on a FIFO: exit %d: %s", code, err);
    free(err);
    free(a);
    free(b);
    tu_rm_rf(dir);
    free(dir);
}
