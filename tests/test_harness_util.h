/* test_harness_util.h — helpers shared by the harness suites (tests/test_harness_*.c): a private temp
 * directory per test, writing and reading small files, running a function with stderr captured, pointing an
 * in-process bench run at the test's directory, and reading back the last row it wrote.
 * Every helper fails the calling test through Criterion's assertions. Static functions only, so a
 * suite that uses some of them compiles without warnings. Threading: none.
 */
#ifndef TB_TEST_HARNESS_UTIL_H
#define TB_TEST_HARNESS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <criterion/criterion.h>

#include "json.h"
#include "progress.h"
#include "results.h"
#include "run.h"
#include "status.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char th_dir[128];

/* Criterion .init: a fresh temp directory, which is also the working directory. */
static __attribute__((unused)) void th_setup(void)
{
    snprintf(th_dir, sizeof th_dir, "/tmp/tb_harness_XXXXXX");
    cr_assert_not_null(mkdtemp(th_dir));
    cr_assert_eq(chdir(th_dir), 0);
}

/* Criterion .fini: removes the temp directory. */
static __attribute__((unused)) void th_teardown(void)
{
    char cmd[192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", th_dir);
    cr_assert_eq(chdir("/"), 0);
    cr_assert_eq(system(cmd), 0);
}

/* th_dir/name into out. */
static __attribute__((unused)) const char *th_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", th_dir, name);
    return out;
}

static __attribute__((unused)) void th_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

static __attribute__((unused)) void th_append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f, "cannot append to %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* The whole file as a malloc'd string (the caller frees it). */
static __attribute__((unused)) char *th_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static __attribute__((unused)) long th_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* results_read_rows callback: keeps a copy of each row in *ctx (a struct json_value *), freeing the one before. */
static __attribute__((unused)) int th_keep_last(const struct json_value *row, long line_no, void *ctx)
{
    (void)line_no;
    struct json_value **last = ctx;
    json_value_free(*last);
    *last = NULL;
    return json_value_copy(row, last);
}

/* The last row of th_dir/rows.jsonl (th_bench_quiet's), parsed (the caller frees it with json_value_free); NULL
 * when there is no such file or it holds no row. */
static __attribute__((unused)) struct json_value *th_last_row(void)
{
    char p[192];
    struct json_value *row = NULL;
    if (th_size(th_path(p, sizeof p, "rows.jsonl")) < 0) return NULL;
    cr_assert_eq(results_read_rows(p, th_keep_last, &row), TB_OK, "%s", tb_error_get());
    return row;
}

/* Redirects stderr into th_dir/stderr.txt until th_stderr_end, which returns what was written. */
static int th_saved_stderr = -1;
static __attribute__((unused)) void th_stderr_begin(void)
{
    char p[192];
    fflush(stderr);
    th_saved_stderr = dup(STDERR_FILENO);
    int fd = open(th_path(p, sizeof p, "stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(th_saved_stderr >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

static __attribute__((unused)) char *th_stderr_end(void)
{
    char p[192];
    fflush(stderr);
    dup2(th_saved_stderr, STDERR_FILENO);
    close(th_saved_stderr);
    return th_read(th_path(p, sizeof p, "stderr.txt"));
}

/* Points an in-process bench run at this test's directory, quietly: synthetic data of train and test
 * samples, rows in rows.jsonl, no calibration file (none.json does not exist), no progress display. */
/* A --plan scaling configuration for backend with the option pairs kv (NULL-ended; NULL: none), not finished. */
static __attribute__((unused)) void th_scaling_config(struct bench_config *c, const char *backend,
                                                      const char *const *kv)
{
    bench_config_defaults(c);
    cr_assert_eq(bench_config_set(c, "backend", backend), TB_OK);
    cr_assert_eq(bench_config_set(c, "plan", "scaling"), TB_OK);
    for (int k = 0; kv && kv[k]; k += 2)
        cr_assert_eq(bench_config_set(c, kv[k], kv[k + 1]), TB_OK, "--%s %s: %s", kv[k], kv[k + 1], tb_error_get());
}

/* That configuration is refused at finish, as a usage error in one line that contains needle. */
static __attribute__((unused)) void th_scaling_refused(const char *backend, const char *const *kv, const char *needle)
{
    struct bench_config c;
    th_scaling_config(&c, backend, kv);
    cr_assert_eq(bench_config_finish(&c), TB_EINVAL, "accepted (%s)", needle);
    cr_assert(strstr(tb_error_get(), needle) != NULL, "message '%s' lacks '%s'", tb_error_get(), needle);
    cr_assert(strchr(tb_error_get(), '\n') == NULL, "one line");
}

static __attribute__((unused)) void th_bench_quiet(struct bench_config *c, int train, int test)
{
    char p[192];
    cr_assert_eq(bench_config_set(c, "data", "synthetic"), TB_OK);
    cr_assert_eq(bench_config_set(c, "out", th_path(p, sizeof p, "rows.jsonl")), TB_OK);
    cr_assert_eq(bench_config_set(c, "calibration", th_path(p, sizeof p, "none.json")), TB_OK);
    cr_assert_eq(bench_config_set(c, "quiet", NULL), TB_OK);
    c->synthetic_train = train, c->synthetic_test = test;
    progress_force(0);
}

/* A quiet in-process tta plan to target with `seeds` seeds, at most max_epochs epochs, an evaluation
 * every 16 steps, on 1,024 training and 256 test samples (th_bench_quiet). */
static __attribute__((unused)) void th_small_tta(struct bench_config *c, const char *target, const char *seeds,
                                                 const char *max_epochs)
{
    bench_config_defaults(c);
    cr_assert_eq(bench_config_set(c, "plan", "tta"), TB_OK);
    cr_assert_eq(bench_config_set(c, "target", target), TB_OK);
    cr_assert_eq(bench_config_set(c, "seeds", seeds), TB_OK);
    cr_assert_eq(bench_config_set(c, "max-epochs", max_epochs), TB_OK);
    cr_assert_eq(bench_config_set(c, "eval-every", "16"), TB_OK);
    th_bench_quiet(c, 1024, 256);
}

/* A row's configuration as bench writes it (67 fields, lr left to the row): the work per row of a real
 * results file, which quadratic code multiplies by the rows (the scale tests of report and compare). */
static __attribute__((unused)) const char th_real_config[] =
    "\"plan\":\"throughput\",\"backend\":\"cpu\",\"backend_desc\":\"cpu: 1 thread, OpenBLAS single-thread"
    "ed\",\"device\":\"cpu\",\"workload\":\"mnist-mlp\",\"model\":\"mnist-mlp\",\"dataset\":\"synthetic\""
    ",\"data_source\":\"synthetic\",\"train_samples\":8192,\"eval_samples\":32,\"batch\":32,\"local_batch"
    "\":32,\"batch_per_replica\":0,\"replicas_total\":1,\"accumulation\":1,\"eval_batch\":32,\"steps\":10"
    "0,\"warmup\":10,\"steps_per_execution\":0,\"repeat\":5,\"epochs\":0,\"steps_per_epoch\":0,\"optimize"
    "r\":\"adam\",\"momentum\":0,\"weight_decay\":0,\"lr_schedule\":\"constant\",\"lr_warmup\":0,\"label_"
    "smoothing\":0,\"seed\":42,\"threads\":0,\"classes\":10,\"input_h\":28,\"input_w\":28,\"input_c\":1,"
    "\"resolution\":0,\"norm\":\"default\",\"norm_groups\":0,\"bn_eps\":null,\"dropout\":null,\"params\":"
    "167690,\"train_flops_per_sample\":802304,\"forward_flops_per_sample\":334336,\"conv_algo\":\"auto\","
    "\"devices\":0,\"transport\":\"shm\",\"sync_bn\":false,\"stages\":0,\"split\":\"\",\"micro_batch\":0,"
    "\"ga\":0,\"replicas\":0,\"schedule\":\"\",\"recompute\":false,\"precision\":\"fp32\",\"loss_scale\":"
    "\"dynamic\",\"prefetch\":0,\"profile\":false,\"trace\":\"\",\"trace_step\":0,\"no_fuse\":false,\"sav"
    "e\":\"\",\"load\":\"\",\"logits\":\"\",\"checkpoint_dir\":\"\",\"checkpoint_every\":0,\"resume\":\""
    "\"";

#endif
