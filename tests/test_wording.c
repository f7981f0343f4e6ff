/* test_wording.c — small wording and consistency defects:
 *   - counts of 1 in messages said in the singular ("the 1 sample of a batch", "1 timed step", "1 replica",
 *     "measured on 1 core"), where they read "1 samples";
 *   - --tuning FILE with a fixed --conv-algo (only auto reads or keeps the file; the row recorded "none") is a
 *     usage error, as the cuda device's --tuning is;
 *   - tools/cachesim.sh knows mnist-mlp (no convolutions: no --conv-algo for it) however --workload is spelt.
 */
#include "test_util.h"

#include "test_bench_proc.h"

#include "calibrate.h"
#include "run.h"
#include "status.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(wording, .timeout = 60);

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* bench with args: exit 2, stderr holding want and nothing of the plural `not`; one line where one_line (a
 * backend's refusal follows a line naming the run it prepared). */
static void expect_refusal(const char *const *args, int one_line, const char *want, const char *not)
{
    struct proc p;
    run_bench(args, &p);
    cr_assert_eq(p.code, 2, "exited %d, want 2 (stderr: %s)", p.code, p.err);
    const char *nl = strchr(p.err, '\n');
    if (one_line) cr_assert(nl && !nl[1], "not one line: %s", p.err);
    cr_assert(strstr(p.err, want) != NULL, "no '%s' in: %s", want, p.err);
    if (not) cr_assert(strstr(p.err, not) == NULL, "'%s' in: %s", not, p.err);
    proc_free(&p);
}

Test(wording, mirrored_refusal_says_one_sample)
{
    expect_refusal(ARGS("--backend", "mirrored", "--devices", "2", "--batch", "1", "--data", "synthetic",
                        "--synthetic-samples", "64,32", "--steps", "2", "--out", "r.jsonl"),
                   0, "--devices 2 is more than the 1 sample of a batch", "1 samples");
}

/* The plan's refusals where --replicas is 1 (its default) or one sample is left a replica. */
Test(wording, ipu_refusals_say_one_replica)
{
#define IPU "--backend", "ipu", "--data", "synthetic", "--synthetic-samples", "64,32", "--steps", "2", "--out", "r.jsonl"
    expect_refusal(ARGS(IPU, "--batch", "3", "--micro-batch", "2"), 0, "--micro-batch 2 × 1 replica", "replicas");
    expect_refusal(ARGS(IPU, "--batch", "3", "--ga", "2"), 0, "--ga 2 × 1 replica", "replicas");
    /* two stages: 2 x 2 micro-batches at least, none of which divides 2 samples; 1 leaves the pipeline empty */
    expect_refusal(ARGS(IPU, "--stages", "2", "--batch", "2"), 0, "gives the replica at least 2 x 2 stages", "replicas");
    expect_refusal(ARGS(IPU, "--stages", "2", "--batch", "1"), 0, "the replica needs a multiple of 2 micro-batches",
                   "1 samples");
    expect_refusal(ARGS(IPU, "--stages", "2", "--batch", "1"), 0, "dividing its 1 sample,", "replicas");
#undef IPU
}

Test(wording, throughput_says_one_timed_step)
{
    char *dir = tu_mkdtemp("wording_tp");
    char *out = rb_path(dir, "r.jsonl");
    struct proc p;
    run_bench(ARGS("--plan", "throughput", "--data", "synthetic", "--synthetic-samples", "64,32", "--batch", "8",
                   "--warmup", "1", "--steps", "1", "--mllog", "none", "--out", out),
              &p);
    cr_assert_eq(p.code, 0, "exited %d (stderr: %s)", p.code, p.err);
    cr_assert(strstr(p.out, "1 warm-up + 1 timed step, 1 repeat,") != NULL, "%s", p.out);
    proc_free(&p);
    tu_rm_rf(dir);
    free(out), free(dir);
}

Test(wording, calibration_measured_on_one_core)
{
    struct calibration c;
    memset(&c, 0, sizeof c);
    snprintf(c.cpu_model, sizeof c.cpu_model, "cpu");
    snprintf(c.blas_core, sizeof c.blas_core, "Haswell");
    c.cores = 1;
    char why[256] = "";
    cr_assert_eq(calibrate_matches(&c, "cpu", 4, "Haswell", why, sizeof why), 0);
    cr_assert_str_eq(why, "measured on 1 core, this machine has 4");
    c.cores = 2;
    cr_assert_eq(calibrate_matches(&c, "cpu", 4, "Haswell", why, sizeof why), 0);
    cr_assert_str_eq(why, "measured on 2 cores, this machine has 4");
}

/* bench_config_finish on effnet-b0 (it has convolutions) with the options (name, value pairs). */
static int finish_effnet(const char *const *opts)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "workload", "effnet-b0"), TB_OK, "%s", tb_error_get());
    for (int i = 0; opts[i]; i += 2)
        cr_assert_eq(bench_config_set(&c, opts[i], opts[i + 1]), TB_OK, "--%s: %s", opts[i], tb_error_get());
    return bench_config_finish(&c);
}

/* conv_tuning_on is 0 for a fixed algorithm: the file named was never read or written, and the row said
 * "none". Refused as the cuda device's --tuning is; either option alone, or the file with auto, still runs. */
Test(wording, tuning_file_with_a_fixed_algorithm_is_refused)
{
    cr_assert_eq(finish_effnet(ARGS("tuning", "t.json", "conv-algo", "im2col")), TB_EINVAL, "accepted");
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "--tuning t.json") && strstr(msg, "--conv-algo im2col") && !strchr(msg, '\n'), "%s", msg);
    cr_assert_eq(finish_effnet(ARGS("conv-algo", "direct", "tuning", "t.json")), TB_EINVAL, "accepted");
    cr_assert_eq(finish_effnet(ARGS("tuning", "t.json", "conv-algo", "auto")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(finish_effnet(ARGS("tuning", "none", "conv-algo", "im2col")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(finish_effnet(ARGS("conv-algo", "im2col")), TB_OK, "the default file: %s", tb_error_get());
    cr_assert_eq(finish_effnet(ARGS("tuning", "t.json")), TB_OK, "%s", tb_error_get());
    /* as the user meets it: exit 2, one line, no row */
    char *dir = tu_mkdtemp("wording_tuning");
    char *out = rb_path(dir, "r.jsonl");
    expect_refusal(ARGS("--workload", "effnet-b0", "--resolution", "16", "--data", "synthetic", "--batch", "2",
                        "--steps", "1", "--tuning", "t.json", "--conv-algo", "im2col", "--out", out),
                   1, "--tuning t.json: only --conv-algo auto", NULL);
    cr_assert_eq(access(out, F_OK), -1, "a refused run writes no row");
    tu_rm_rf(dir);
    free(out), free(dir);
}

/* tools/cachesim.sh's bench command line, with a stub valgrind that prints it and fails (the script then
 * shows the run's last lines on stderr): whether --conv-algo gemm1x1 was added for args. */
static int cachesim_adds_conv_algo(const char *dir, const char *args)
{
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "PATH='%s/bin':\"$PATH\" OUT_DIR='%s/out' sh '%s/tools/cachesim.sh' '%s/b' %s "
                             ">/dev/null 2>'%s/err'", dir, dir, TB_SOURCE_DIR, dir, args, dir) > 0);
    const int rc = system(cmd);
    free(cmd);
    char *path = rb_path(dir, "err");
    char *err = tu_read_file(path, NULL);
    cr_assert(err && rc != 0 && strstr(err, "VALGRIND "), "the stub did not run (rc %d): %s", rc, err ? err : "");
    const int added = strstr(err, " --conv-algo gemm1x1 ") != NULL;
    free(err), free(path);
    return added;
}

Test(wording, cachesim_knows_mnist_mlp_however_spelt)
{
    char *dir = tu_mkdtemp("wording_cachesim");
    char *bin = rb_path(dir, "bin"), *b = rb_path(dir, "b");
    cr_assert_eq(mkdir(bin, 0755), 0);
    cr_assert_eq(mkdir(b, 0755), 0);
    char *vg = rb_path(bin, "valgrind"), *bench = rb_path(b, "bench");
    rb_write(bin, "valgrind", "#!/bin/sh\necho \"VALGRIND $*\"\nexit 1\n");
    rb_write(b, "bench", "#!/bin/sh\nexit 0\n");
    cr_assert_eq(chmod(vg, 0755), 0);
    cr_assert_eq(chmod(bench, 0755), 0);
    cr_assert(cachesim_adds_conv_algo(dir, ""), "the default run (effnet-b0)");
    cr_assert(cachesim_adds_conv_algo(dir, "--work effnet-b0"), "a prefix getopt_long takes");
    cr_assert(!cachesim_adds_conv_algo(dir, "--workload mnist-mlp"));
    cr_assert(!cachesim_adds_conv_algo(dir, "--workload=mnist-mlp"));
    cr_assert(!cachesim_adds_conv_algo(dir, "--batch 8"), "bench's default workload is mnist-mlp");
    cr_assert(!cachesim_adds_conv_algo(dir, "--workload effnet-b0 --workload=mnist-mlp"), "the last one wins");
    tu_rm_rf(dir);
    free(vg), free(bench), free(bin), free(b), free(dir);
}
