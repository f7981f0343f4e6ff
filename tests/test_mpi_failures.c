/* test_mpi_failures.c — bench under `mpirun -np 2 ... --transport mpi` when one rank fails or is stopped: every
 * rank ends within seconds (a hang shows as timeout's 124), the failure said once or by the rank it is its own,
 * rank 0's results file keeps its rows and a stop leaves a checkpoint to resume.
 *
 * Each test runs mpirun through sh in a fresh folder (MPMD launches, `-np 1 A : -np 1 B`, give the ranks other
 * options or environments), under `timeout 60`. Skipped where the build has no MPI or mpirun is not installed.
 * Not under ASan: Open MPI's own allocations are reported as leaks there (tools/check_mpi.sh runs in the main
 * build too). Threading: none; Criterion runs each test in its own process.
 */
#include "test_reliability_util.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MPI_SMALL "--backend mirrored --transport mpi --workload mnist-mlp --data synthetic " \
                  "--synthetic-samples 256,64 --batch 4 --mllog none --quiet"
/* A line already in the results file, which every failure must leave as it was. */
#define EARLIER_ROW "{\"earlier\":1}\n"

/* Skips the test where an MPI job cannot run here. */
static void need_mpi(void)
{
#if !defined(TB_HAVE_MPI) || TU_UNDER_ASAN
    cr_skip_test("no MPI in this build (or an ASan build)");
#endif
    if (system("command -v mpirun >/dev/null 2>&1") != 0) cr_skip_test("mpirun is not installed");
}

/* Runs `timeout 60 mpirun --oversubscribe ARGS` in dir (root allowed, as CI runs); stdout and stderr in
 * dir/mpi.out and dir/mpi.err, and *err (unless NULL) receives that stderr, malloc'd. Returns the exit status
 * (124: it hung). */
static int run_mpi(const char *dir, const char *args, char **err)
{
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "cd '%s' && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 60 "
                             "mpirun --oversubscribe %s >mpi.out 2>mpi.err", dir, args) > 0);
    const int rc = system(cmd);
    free(cmd);
    cr_assert(WIFEXITED(rc), "sh did not exit");
    if (err) {
        char *err_path = rb_path(dir, "mpi.err");
        *err = tu_read_file(err_path, NULL);
        free(err_path);
        cr_assert(*err, "no stderr file in %s", dir);
    }
    return WEXITSTATUS(rc);
}

/* Lines of s that start with "bench: " and contain what. */
static int bench_lines_with(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; p && *p;) {
        const char *end = strchr(p, '\n');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), p);
        if (!strncmp(line, "bench: ", 7) && strstr(line, what)) n++;
        p = end ? end + 1 : NULL;
    }
    return n;
}

/* A stop signal sent to rank 1 alone (in its first evaluation, TB_STOP_IN_EVAL) stopped rank 1, whose exit then
 * waited in MPI_Finalize for rank 0, itself waiting in the next step's all-reduce for rank 1: a hang. Every rank
 * now stops after the same step: rank 0 writes the checkpoint and the interrupted row, exit 143, and --resume
 * finishes the run. */
Test(mpi_failures, a_signal_to_one_rank_stops_every_rank_after_one_step, .timeout = 240)
{
    need_mpi();
    char *dir = tu_mkdtemp("mpisig");
    rb_write(dir, "results.jsonl", EARLIER_ROW);
    const char *opts = MPI_SMALL " --plan tta --target 0.999 --eval-every 4 --max-epochs 1 --checkpoint-dir ck "
                       "--out results.jsonl";
    char args[1024];
    snprintf(args, sizeof args, "-np 1 %s %s : -np 1 -x TB_STOP_IN_EVAL=1 %s %s", TB_BENCH_EXE, opts, TB_BENCH_EXE,
             opts);
    char *err;
    const int rc = run_mpi(dir, args, &err);
    cr_assert_eq(rc, 143, "exit %d (124: a hang); stderr:\n%s", rc, err);
    cr_expect_eq(bench_lines_with(err, "interrupted by SIGTERM"), 1, "said once:\n%s", err);
    char *rows_path = rb_path(dir, "results.jsonl");
    cr_expect_eq(rb_count_lines(rows_path), 2, "the earlier row and the interrupted one");
    char *rows = tu_read_file(rows_path, NULL);
    cr_assert(rows && strstr(rows, EARLIER_ROW) == rows);
    cr_expect(strstr(rows, "\"status\":\"interrupted\""), "%s", rows);
    char *ck = rb_path(dir, "ck");
    cr_assert_eq(rb_newest(ck), 4, "the checkpoint of the step every rank stopped after");
    snprintf(args, sizeof args, "-np 2 %s %s --resume ck", TB_BENCH_EXE, opts);
    free(err);
    const int rc2 = run_mpi(dir, args, &err);
    cr_assert_eq(rc2, 0, "resume: exit %d; stderr:\n%s", rc2, err);
    free(rows);
    rows = tu_read_file(rows_path, NULL);
    cr_expect_eq(rb_count_lines(rows_path), 3);
    cr_expect(strstr(rows, "\"resumed_from_step\":4"), "%s", rows);
    free(err), free(rows), free(rows_path), free(ck);
    tu_rm_rf(dir);
    free(dir);
}

/* Ranks given other --steps (an MPMD launch) paired unlike collectives: the rank done first evaluated while the
 * other still stepped, and Open MPI read past a buffer (exit 15, or a hang). Refused before a step on every rank,
 * exit 2, the differing rank naming the option; rank 0's earlier rows kept. */
Test(mpi_failures, ranks_given_other_options_are_refused_before_a_step, .timeout = 120)
{
    need_mpi();
    char *dir = tu_mkdtemp("mpicfg");
    rb_write(dir, "results.jsonl", EARLIER_ROW);
    char args[1024];
    snprintf(args, sizeof args, "-np 1 %s " MPI_SMALL " --steps 5 --out results.jsonl : -np 1 %s " MPI_SMALL
             " --steps 3 --out results.jsonl", TB_BENCH_EXE, TB_BENCH_EXE);
    char *err;
    const int rc = run_mpi(dir, args, &err);
    cr_assert_eq(rc, 2, "exit %d; stderr:\n%s", rc, err);
    cr_expect_eq(bench_lines_with(err, "rank 1 of 2: this rank's configuration or data differ from rank 0's (steps=5 "
                                       "on rank 0, steps=3 on this rank)"), 1, "%s", err);
    char *rows_path = rb_path(dir, "results.jsonl");
    cr_expect_eq(rb_count_lines(rows_path), 1, "rank 0's earlier row alone");
    free(err), free(rows_path);
    tu_rm_rf(dir);
    free(dir);
}

/* A rank failing alone after the ranks joined (here rank 1's --resume folder holds only a damaged checkpoint)
 * waited in MPI_Finalize while rank 0 waited in its first step's all-reduce: a hang. It now ends the job within
 * seconds, its line naming the rank; rank 0's checkpoints and rows are as they were. */
Test(mpi_failures, a_rank_failing_alone_ends_the_job, .timeout = 240)
{
    need_mpi();
    char *dir = tu_mkdtemp("mpialone");
    char args[1024];
    snprintf(args, sizeof args, "-np 2 %s " MPI_SMALL " --steps 6 --checkpoint-dir ck --out results.jsonl",
             TB_BENCH_EXE);
    cr_assert_eq(run_mpi(dir, args, NULL), 0);
    /* ck2: a copy of the newest checkpoint, cut short. */
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "cd '%s' && mkdir ck2 && head -c 3000 ck/ckpt-0000000006.safetensors > "
                             "ck2/ckpt-0000000006.safetensors", dir) > 0);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    snprintf(args, sizeof args, "-np 1 %s " MPI_SMALL " --steps 9 --resume ck --out results.jsonl : -np 1 %s "
             MPI_SMALL " --steps 9 --resume ck2 --out results.jsonl", TB_BENCH_EXE, TB_BENCH_EXE);
    char *err;
    const int rc = run_mpi(dir, args, &err);
    cr_assert_eq(rc, 1, "exit %d (124: a hang); stderr:\n%s", rc, err);
    cr_expect_eq(bench_lines_with(err, "rank 1 of 2: --resume ck2: no checkpoint there could be read"), 1, "%s", err);
    char *rows_path = rb_path(dir, "results.jsonl");
    cr_expect_eq(rb_count_lines(rows_path), 1, "the first run's row alone");
    char *ck = rb_path(dir, "ck");
    cr_expect_eq(rb_newest(ck), 6);
    free(err), free(rows_path), free(ck);
    tu_rm_rf(dir);
    free(dir);
}

/* A divergence is every rank's (the loss is the ranks' sum), but rank 0 writes its row first, and that waits for the
 * results file's lock: after 5 s rank 1 took the failure for its own, said so ("this rank alone") and aborted the
 * job, rank 0's diverged row lost. The ranks now wait for each other without a limit on such a failure: here the
 * file is held 7 s; one line, the diverged row written. */
Test(mpi_failures, a_divergence_waits_for_rank_0_s_row_behind_a_lock, .timeout = 240)
{
    need_mpi();
    char *dir = tu_mkdtemp("mpidiv");
    rb_write(dir, "results.jsonl", EARLIER_ROW);
    char *cmd = NULL;
    cr_assert(asprintf(&cmd, "cd '%s' && (flock results.jsonl sleep 7 &) && sleep 0.3", dir) > 0);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    char args[1024];
    snprintf(args, sizeof args, "-np 2 %s " MPI_SMALL " --steps 200 --optimizer sgd --lr 1e3 --out results.jsonl",
             TB_BENCH_EXE);
    char *err;
    const int rc = run_mpi(dir, args, &err);
    cr_assert_eq(rc, 1, "exit %d (124: a hang); stderr:\n%s", rc, err);
    cr_expect_eq(bench_lines_with(err, "diverged"), 1, "said once:\n%s", err);
    cr_expect(!strstr(err, "this rank alone"), "%s", err);
    char *rows_path = rb_path(dir, "results.jsonl"), *rows = tu_read_file(rows_path, NULL);
    cr_expect_eq(rb_count_lines(rows_path), 2, "the earlier row and the diverged one");
    cr_expect(rows && strstr(rows, "\"status\":\"diverged\""), "%s", rows);
    free(err), free(rows), free(rows_path);
    tu_rm_rf(dir);
    free(dir);
}
