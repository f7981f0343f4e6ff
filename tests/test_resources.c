/* test_resources.c — bench (TB_BENCH_EXE) when the system runs out of something or its output channels are
 * hostile: a file-size limit with SIGXFSZ at its default, a full disk under an output
 * that replaces an earlier one (--logits, --trace), an event log that cannot be written, a memory limit.
 *
 * A full disk is a file-size limit (RLIMIT_FSIZE) here: it needs no mount, and the write that crosses it fails as
 * on a full disk (EFBIG) once SIGXFSZ is ignored, which bench does itself. Every child runs in a fresh temp
 * directory on the MLP with a 1000-sample synthetic set (RB_BASE). Threading: none; Criterion runs each test in
 * its own process.
 */
#include "test_reliability_util.h"

#include "report_seed001.h"

#include <sys/resource.h>

TestSuite(resources, .timeout = 120);

/* Number of '\n' in s. */
static int n_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* `ulimit -f` and a row that would cross the limit: SIGXFSZ killed bench mid-write (exit 153 from the shell), the
 * results file ending in half a row and no message. Now the write fails (EFBIG), the half row is taken back, and
 * bench says so on one line, exit 1; the earlier rows are as they were. */
Test(resources, a_file_size_limit_leaves_no_half_row)
{
    char *dir = tu_mkdtemp("resources");
    cr_assert_eq(rb_run(dir, "first", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2")), 0);
    char *rows = rb_path(dir, "results.jsonl");
    size_t n0 = 0;
    char *before = tu_read_file(rows, &n0);
    cr_assert(before && n0 > 1000, "a first row");
    /* Room for a third of another row. */
    const int code = rb_run_with_file_limit_sig(dir, "second", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2"), n0 + n0 / 3,
                                                SIG_DFL);
    char *err = rb_stderr(dir, "second");
    cr_assert_eq(code, 1, "exit %d (-%d: killed by that signal): %s", code, SIGXFSZ, err);
    cr_assert_eq(n_lines(err), 1, "one line: %s", err);
    cr_assert(strstr(err, "bench: ") == err && strstr(err, "results.jsonl") && strstr(err, "File too large"), "%s", err);
    size_t n1 = 0;
    char *after = tu_read_file(rows, &n1);
    cr_assert(n1 == n0 && memcmp(before, after, n0) == 0, "the results file is as it was (%zu bytes, was %zu)", n1, n0);
    free(before), free(after), free(err), free(rows);
    tu_rm_rf(dir);
    free(dir);
}

/* Runs bench under a file-size limit (SIGXFSZ ignored, as bench does it too) over an earlier output at path holding
 * old: the run fails with one line naming the file and the reason, exit 1, and path still holds old, no temporary
 * beside it. */
static void check_replaced_output_kept(const char *opt, const char *const *extra, rlim_t limit)
{
    char *dir = tu_mkdtemp("resources");
    char *path = rb_path(dir, "earlier.out");
    static const char old[] = "an earlier output\n";
    tu_write_file(path, old, sizeof old - 1);
    const int code = rb_run_with_file_limit(dir, "full", extra, RB_ARGS(opt, "earlier.out"), limit);
    char *err = rb_stderr(dir, "full");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "earlier.out") && strstr(err, "File too large"), "the file and the reason: %s", err);
    cr_assert_eq(n_lines(err), 1, "one line: %s", err);
    size_t n = 0;
    char *now = tu_read_file(path, &n);
    cr_assert(n == sizeof old - 1 && memcmp(now, old, n) == 0, "%s's earlier file kept: %zu bytes", opt, n);
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
        cr_assert(!strstr(e->d_name, ".tmp"), "no temporary left: %s", e->d_name);
    closedir(d);
    free(now), free(err), free(path);
    tu_rm_rf(dir);
    free(dir);
}

/* --logits over an earlier file on a full disk: it was opened in place, so the earlier logits were gone and half of
 * the new ones left (an .npy whose header promised 2,000 rows). Now written beside it and renamed. */
Test(resources, logits_that_do_not_fit_keep_the_earlier_file)
{
    /* 2,000 x 10 float32 logits are 80 kB; the result row a few. */
    check_replaced_output_kept("--logits",
                               RB_ARGS("--data", "synthetic", "--synthetic-samples", "1000,2000", "--batch", "8",
                                       "--mllog", "none", "--out", "results.jsonl", "--quiet", "--plan", "evaluate"),
                               20000);
}

/* --trace the same: an earlier trace was cut to the limit. */
Test(resources, a_trace_that_does_not_fit_keeps_the_earlier_file)
{
    /* EfficientNet-B0's trace of one step is about 66 kB; its row under 20. */
    check_replaced_output_kept("--trace",
                               RB_ARGS("--workload", "effnet-b0", "--resolution", "32", "--conv-algo", "im2col", "--data",
                                       "synthetic", "--synthetic-samples", "64,16", "--batch", "4", "--steps", "2",
                                       "--mllog", "none", "--out", "results.jsonl", "--quiet", "--no-eval"),
                               40000);
}

/* An event log that a full disk cut short: its events were dropped unsaid, exit 0 (the log was only closed, never
 * checked). Now the run writes its row, says the log is incomplete, naming it and the reason, and exits 1. */
Test(resources, an_event_log_cut_short_is_said_and_the_row_kept)
{
    char *dir = tu_mkdtemp("resources");
    /* 300 steps of 125 a epoch: a log of about 6.5 kB, a row of about 3. */
    const int code = rb_run_with_file_limit(dir, "log", RB_ARGS(RB_BASE),
                                            RB_ARGS("--steps", "300", "--mllog", "ml", "--run-id", "cut"), 4500);
    char *err = rb_stderr(dir, "log");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert_eq(n_lines(err), 1, "one line: %s", err);
    cr_assert(strstr(err, "ml/cut.log") && strstr(err, "File too large") && strstr(err, "the result row was written"),
              "%s", err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    cr_assert_eq(json_get_number(r, "figures.train_steps", -1), 300);
    json_value_free(r);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* The report's seed-001 chart table on a full disk (here /dev/full behind its name): its stream was closed
 * unchecked, so gnuplot drew from a table cut short and `bench report` exited 0 with the chart "not rendered". Now
 * the table's write failure is named, the chart not drawn, and the report says it is incomplete (exit 1). */
Test(resources, a_seed001_table_cut_short_makes_the_report_incomplete)
{
    char *dir = tu_mkdtemp("resources");
    char *data = rb_path(dir, "data"), *dat = rb_path(dir, "data/seed001_pods.dat");
    cr_assert_eq(mkdir(data, 0777), 0);
    cr_assert_eq(symlink("/dev/full", dat), 0);
    char plots[1024], devices[1024], unwritten[512] = "";
    snprintf(plots, sizeof plots, "%s/plots", TB_SOURCE_DIR);
    snprintf(devices, sizeof devices, "%s/devices", TB_SOURCE_DIR);
    char *md_buf = NULL;
    size_t md_len = 0;
    FILE *md = open_memstream(&md_buf, &md_len);
    int drawn = 0;
    cr_assert_eq(report_seed001_rows(md, dir, plots, devices, NULL, 0, "none", "/bin/true", &drawn, unwritten,
                                     sizeof unwritten), TB_OK);
    fclose(md);
    cr_assert(strstr(unwritten, "seed001_pods.dat: No space left on device"), "the table named: '%s'", unwritten);
    cr_assert(strstr(md_buf, "seed001_pods not rendered"), "no chart from a table cut short");
    free(md_buf), free(data), free(dat);
    tu_rm_rf(dir);
    free(dir);
}

/* `bench export --csv FILE` on a full disk said "write to FILE failed" without why, or named its temporary
 * ("cannot close rows.csv.tmp.PID"), and to a full stdout printed a second line after its own. Now one line naming
 * the file and the reason, exit 1. */
Test(resources, an_export_on_a_full_disk_says_why)
{
    char *dir = tu_mkdtemp("resources");
    cr_assert_eq(rb_run(dir, "rows", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2")), 0);
    const int code = rb_run_with_file_limit(dir, "csv", RB_ARGS("export", "--in", "results.jsonl", "--csv", "rows.csv"),
                                            NULL, 600);
    char *err = rb_stderr(dir, "csv");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert_eq(n_lines(err), 1, "one line: %s", err);
    cr_assert(strstr(err, "rows.csv: File too large"), "%s", err);
    free(err);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* stdout on /dev/full */
        char errp[600];
        snprintf(errp, sizeof errp, "%s/full.err", dir);
        const int fo = open("/dev/full", O_WRONLY), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || chdir(dir) != 0) _exit(127);
        dup2(fo, 1), dup2(fe, 2);
        execl(TB_BENCH_EXE, TB_BENCH_EXE, "export", "--in", "results.jsonl", "--csv", "-", (char *)NULL);
        _exit(127);
    }
    cr_assert_eq(rb_wait(pid), 1);
    err = rb_stderr(dir, "full");
    cr_assert_eq(n_lines(err), 1, "one line: %s", err);
    cr_assert(strstr(err, "No space left on device"), "%s", err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* Exit status of bench with args under `ulimit -v mib MiB` in dir (stdout and stderr to out.txt and err.txt there),
 * killed after 60 s (137). */
static int run_under_memory_limit(const char *dir, long mib, const char *args)
{
    char cmd[2048];
    /* One OpenBLAS thread, as bench runs it (and ctest's environment has it): its constructor's second thread would
     * otherwise take the limits where bench's own allocations meet it first. */
    snprintf(cmd, sizeof cmd,
             "cd %s && OPENBLAS_NUM_THREADS=1 timeout -s KILL 60 sh -c 'ulimit -v %ld && exec %s %s' >out.txt 2>err.txt",
             dir, mib * 1024, TB_BENCH_EXE, args);
    const int rc = system(cmd);
    cr_assert(WIFEXITED(rc), "ulimit -v %ld MiB: %d", mib, rc);
    return WEXITSTATUS(rc);
}

/* Under a memory limit (ulimit -v) that OpenBLAS's 128 MiB packing buffer could not meet, bench spun forever in
 * OpenBLAS's allocator (it retries a failed allocation without end), deaf to SIGTERM. From the least limit at which
 * bench's main runs at all (below it the loader, or a library's constructor such as libgfortran's, fails first:
 * nothing of bench's), every run ends within its time: ok, or one line (exit 1, or 2 where the run's memory plan is
 * refused under the limit with its figures); never a hang, never a crash.
 * ASan reserves terabytes of shadow, so no limit can be set under it. */
Test(resources, a_memory_limit_ends_the_run_in_one_line_never_a_hang, .timeout = 300)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer's shadow memory leaves no room for a memory limit");
#endif
    char *dir = tu_mkdtemp("resources");
    long start = 64;
    while (start <= 4096 && run_under_memory_limit(dir, start, "--version") != 0) start += 16;
    cr_assert_leq(start, 4096, "bench --version needs more than 4 GiB of address space");
    int ended_short = 0, ran = 0;
    for (long mib = start; mib <= start + 768; mib += 24) {
        const int code = run_under_memory_limit(dir, mib,
                                                "--data synthetic --synthetic-samples 1000,200 --batch 4 --steps 2 "
                                                "--mllog none --out rows.jsonl --quiet");
        char *err_path = rb_path(dir, "err.txt"), *err = tu_read_file(err_path, NULL);
        cr_assert_neq(code, 137, "ulimit -v %ld MiB: bench hung (killed after 60 s): %s", mib, err);
        /* 2: the run's memory plan refused under the limit, with its figures */
        cr_assert(code == 0 || code == 1 || (code == 2 && err && strstr(err, "needs about")),
                  "ulimit -v %ld MiB (main runs from %ld): exit %d: %s", mib, start, code, err);
        if (code != 0) {
            cr_assert_eq(n_lines(err), 1, "ulimit -v %ld MiB: one line: %s", mib, err);
            cr_assert(!strncmp(err, "bench: ", 7), "ulimit -v %ld MiB: %s", mib, err);
            ended_short++;
        } else {
            ran++;
        }
        free(err), free(err_path);
    }
    cr_assert(ran > 0 && ended_short > 0, "the sweep spans no limit (%d runs, %d refused)", ran, ended_short);
    /* A run the machine's memory holds but the limit does not: refused before allocating, with its figures (exit 2),
     * as a run too large for the machine is; it failed midway at an allocation (exit 1), the limit unread. */
    const int code = run_under_memory_limit(dir, start + 512,
                                            "--workload effnet-b0 --batch 32 --data synthetic --synthetic-samples 64,16 "
                                            "--steps 1 --mllog none --out rows.jsonl --quiet");
    char *err_path = rb_path(dir, "err.txt"), *err = tu_read_file(err_path, NULL);
    cr_assert(code == 2 && strstr(err, "needs about") && strstr(err, "is available"), "exit %d: %s", code, err);
    free(err), free(err_path);
    tu_rm_rf(dir);
    free(dir);
}
