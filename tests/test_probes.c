/* test_probes.c — defects found by probing `bench` (TB_BENCH_EXE) from outside (issue 29): a final
 * checkpoint that cannot be written, output locations that cannot be written, FIFOs and endless files
 * given as input, resuming a finished run, a reused run id, non-finite weights, messages.
 *
 * Every child runs in a fresh temp directory on the MLP with a 1000-sample synthetic set (RB_BASE). Refusals made
 * before a run's first step are spawned once for each kind, the others made in this process (before_any_work).
 */
#include "test_reliability_util.h"

#include "calibrate.h"
#include "devmodel.h"
#include "loss_watch.h"
#include "results.h"
#include "session.h"

#include <math.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>

TestSuite(probes, .timeout = 120);

/* A fresh directory for a test's runs. */
static char *new_dir(void)
{
    return tu_mkdtemp("probes");
}

/* Number of '\n' in s. */
static int n_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* What bench does with base then extra (NULL-terminated) before a run's first step, made in this process with dir
 * as the working directory, as rb_run's child has it: the options set and bench_config_finish (exit 2 on a
 * refusal), then session_open (outputs_check, the data, the model, --load's weights; bench_run's status: exit 2
 * for TB_EINVAL, else 1). Returns the exit status bench would have had there, 0 where it would go on to run; *err
 * receives what its stderr would hold by then ("bench: " and the message, and anything printed on either stream;
 * malloc'd). For the cases of a kind past the first, which is spawned: a spawn under ASan costs 0.3-0.5 CPU-s
 * before it reads an option. */
static int before_any_work(const char *dir, const char *const *base, const char *const *extra, char **err)
{
    const char *args[80];
    int n = 0;
    for (int k = 0; k < 2; k++)
        for (const char *const *a = k ? extra : base; a && *a; a++) {
            cr_assert_lt(n, 79, "more than 78 arguments");
            args[n++] = *a;
        }
    args[n] = NULL;
    char here[4096];
    cr_assert(getcwd(here, sizeof here) && chdir(dir) == 0);
    struct bench_config c;
    tb_error_clear();
    rb_streams_begin();
    int code = rb_config_args(&c, args, 0) != TB_OK ? 2 : 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", code ? tb_error_get() : "");
    if (!code) {
        struct session s;
        const int st = session_open(&s, &c);
        if (st != TB_OK) code = st == TB_EINVAL ? 2 : 1, snprintf(msg, sizeof msg, "%s", tb_error_get());
        session_close(&s);
    }
    char *printed = rb_streams_end();
    cr_assert_eq(chdir(here), 0);
    cr_assert(asprintf(err, "%s%s%s%s", printed, code ? "bench: " : "", msg, code ? "\n" : "") >= 0);
    free(printed);
    return code;
}

/* Runs bench with every file it writes limited to limit bytes (a full disk for anything larger):
 * SIGXFSZ ignored, so the write that crosses the limit fails with EFBIG. Both are inherited by the
 * child; this test's own process restores them after. */

/* Out of space for the checkpoint at the end of a run: the run was measured, so its row is written
 * (naming the failure), the error is printed once, and the exit status is 1. */
Test(probes, a_failed_final_checkpoint_still_writes_the_row)
{
    char *dir = new_dir();
    /* The MLP's checkpoint with Adam state is megabytes; a result row is a few kilobytes. */
    const int code = rb_run_with_file_limit(dir, "ck", RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--checkpoint-dir", "ck"), 100000);
    char *err = rb_stderr(dir, "ck");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert_eq(n_lines(err), 1, "the error once, on one line: %s", err);
    cr_assert(strstr(err, "ckpt-0000000020") != NULL, "the message names the checkpoint: %s", err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    cr_assert_eq(json_get_number(r, "figures.train_steps", -1), 20);
    cr_assert(json_get_number(r, "figures.images_per_s", 0) > 0);
    cr_assert(strstr(json_get_str(r, "figures.checkpoint_error", ""), "ckpt-0000000020") != NULL,
              "the row records the checkpoint failure");
    cr_assert_eq(json_get_number(r, "figures.checkpoints_written", -1), 0);
    json_value_free(r);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* The same in the tta plan: a seed that reached its target was measured, so its row is written with the
 * checkpoint failure in it, and the run exits 1 naming the checkpoint (before: exit 1 and no row). */
Test(probes, a_failed_tta_checkpoint_still_writes_the_row)
{
    char *dir = new_dir();
    const int code = rb_run_with_file_limit(dir, "tta", RB_ARGS(RB_BASE),
                                            RB_ARGS("--plan", "tta", "--target", "0.05", "--eval-every", "4",
                                                    "--max-epochs", "1", "--checkpoint-dir", "ck"),
                                            100000);
    char *err = rb_stderr(dir, "tta");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert_eq(n_lines(err), 1, "the error once, on one line: %s", err);
    cr_assert(strstr(err, "the result row was written") != NULL, "%s", err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "ok");
    cr_assert_eq(json_get_number(r, "figures.runs_reached", -1), 1);
    cr_assert(strstr(json_get_str(r, "figures.checkpoint_error", ""), "ckpt-") != NULL,
              "the row records the checkpoint failure");
    json_value_free(r);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* An output location that cannot be written used to fail only after the training (a read-only --out,
 * a --save into a missing directory) or not at all (an --mllog that could not be created was a
 * warning). Now each is one line naming the option, exit 1, before any work: no checkpoint written. The first
 * case is spawned, the others checked in this process (before_any_work: session_open's outputs_check refuses
 * them). */
Test(probes, output_locations_are_checked_before_any_work)
{
    char *dir = new_dir();
    /* Names longer than the file system takes (255): once found only when the finished run wrote its row (--out),
     * or its weights, whose temporary adds 11 bytes to the name (--save). */
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0 || name_max > 4000) name_max = 255;
    char long_out[4096], long_save[4096], out_len[32];
    memset(long_out, 'o', (size_t)name_max + 1), long_out[name_max + 1] = '\0'; /* one byte over */
    snprintf(out_len, sizeof out_len, "%ld bytes", name_max + 1);
    /* fits alone, not with the 11 bytes of --save's temporary suffix */
    memset(long_save, 's', (size_t)name_max - 10), long_save[name_max - 10] = '\0';
    const char *const cases[][4] = {
        {"--out", long_out, "--out", out_len},
        {"--out", "new/dir/..", "--out", "directory"},
        {"--save", long_save, "--save", "with the temporary file's suffix"},
        {"--out", "/proc/tb-no-such-dir/r.jsonl", "--out", "/proc"},
        {"--out", ".", "--out", "directory"},
        {"--mllog", "/proc/tb-no-such-dir", "--mllog", "/proc"},
        {"--mllog", "plain", "--mllog", "not a directory"}, /* a file made below */
        {"--save", "/proc/tb-no-such.st", "--save", "/proc"},
        {"--save", "missing/x.st", "--save", "missing"},
        {"--save", "/dev/null", "--save", "not a regular file"},
        {"--checkpoint-dir", "results.jsonl/ck", "--checkpoint-dir", "not a directory"},
    };
    cr_assert_eq(rb_run(dir, "good", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2")), 0);
    char *plain = rb_path(dir, "plain");
    tu_write_file(plain, "x", 1);
    free(plain);
    /* The file --out writes, named as --mllog's directory: two outputs on one path, a usage error (exit 2) before
     * the directory's check (it said "not a directory", exit 1) */
    {
        char *err = NULL;
        const int code = before_any_work(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--mllog", "results.jsonl"), &err);
        cr_assert(code == 2 && strstr(err, "the same path as --out results.jsonl"), "exit %d: %s", code, err);
        free(err);
    }
    char *ck = rb_path(dir, "ck");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *const *extra = RB_ARGS("--steps", "20", cases[i][0], cases[i][1],
                                           strcmp(cases[i][0], "--checkpoint-dir") ? "--checkpoint-dir" : NULL, "ck");
        char *err = NULL;
        const int code = i == 0 ? rb_run(dir, "bad", RB_ARGS(RB_BASE), extra)
                                : before_any_work(dir, RB_ARGS(RB_BASE), extra, &err);
        if (i == 0) err = rb_stderr(dir, "bad");
        cr_assert_eq(code, 1, "%s %s: exit %d: %s", cases[i][0], cases[i][1], code, err);
        cr_assert_eq(n_lines(err), 1, "%s %s: not one line: %s", cases[i][0], cases[i][1], err);
        cr_assert(strstr(err, cases[i][2]) && strstr(err, cases[i][3]), "%s %s: unclear: %s", cases[i][0], cases[i][1],
                  err);
        /* Spawned, the run could have trained before failing; in this process session_open refused, before any. */
        if (i == 0)
            cr_assert_neq(access(ck, F_OK), 0, "%s %s: the run trained (wrote a checkpoint) before failing",
                          cases[i][0], cases[i][1]);
        free(err);
    }
    free(ck);
    tu_rm_rf(dir);
    free(dir);
}

/* --out /dev/null: the run goes through (no fsync of a device), writes no event log beside it. */
Test(probes, out_dev_null_is_accepted)
{
    char *dir = new_dir();
    const int had_mllog = access("/dev/mllog", F_OK) == 0;
    const int code = rb_run(dir, "null", RB_ARGS("--data", "synthetic", "--synthetic-samples", "1000,200", "--batch", "8",
                                                 "--quiet", "--out", "/dev/null"),
                            RB_ARGS("--steps", "5"));
    char *err = rb_stderr(dir, "null");
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    cr_assert_str_eq(err, "");
    if (!had_mllog) cr_assert_neq(access("/dev/mllog", F_OK), 0, "an event log directory was made in /dev");
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* Runs bench to completion in dir, but fails the test (killing the child) if it takes longer than
 * limit_s seconds: a run that blocks forever must not hang the suite. */
static int run_bounded_with(const char *dir, const char *tag, const char *const *base, const char *const *extra,
                            double limit_s)
{
    pid_t pid = rb_start(dir, tag, base, extra);
    for (double t = 0; t < limit_s; t += 0.05) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        cr_assert_geq(r, 0);
        if (r == pid) {
            cr_assert(WIFEXITED(status), "the child died of signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            return WEXITSTATUS(status);
        }
        nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert(0, "%s: still running after %g s (blocked on a FIFO?)", tag, limit_s);
    return -1;
}

/* The same, after the tests' base arguments (a short synthetic run). */
static int run_bounded(const char *dir, const char *tag, const char *const *extra, double limit_s)
{
    return run_bounded_with(dir, tag, RB_ARGS(RB_BASE), extra, limit_s);
}

/* A FIFO as --load, as --suite, or named like the newest checkpoint under --resume blocked open()
 * forever. Now: regular files only, checked on a non-blocking open. */
Test(probes, fifos_are_refused_not_waited_on)
{
    char *dir = new_dir();
    char *fifo = rb_path(dir, "fifo");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    int code = run_bounded(dir, "load", RB_ARGS("--steps", "3", "--load", "fifo"), 30);
    char *err = rb_stderr(dir, "load");
    cr_assert_eq(code, 1, "--load fifo: exit %d: %s", code, err);
    cr_assert(strstr(err, "fifo") && strstr(err, "not a regular file"), "--load fifo: %s", err);
    free(err);
    code = run_bounded(dir, "suite", RB_ARGS("--suite", "fifo"), 30);
    err = rb_stderr(dir, "suite");
    cr_assert_eq(code, 1, "--suite fifo: exit %d: %s", code, err);
    cr_assert(strstr(err, "fifo") && strstr(err, "not a regular file"), "--suite fifo: %s", err);
    free(err);
    /* A FIFO newer than the run's real checkpoints: skipped with a warning, the resume goes on. */
    cr_assert_eq(rb_run(dir, "first", RB_ARGS(RB_BASE), RB_ARGS("--steps", "10", "--no-eval", "--checkpoint-dir", "ck")), 0);
    char *ck = rb_path(dir, "ck"), p[600];
    checkpoint_dir_path(ck, 15, p, sizeof p);
    cr_assert_eq(mkfifo(p, 0644), 0);
    code = run_bounded(dir, "resume", RB_ARGS("--steps", "20", "--no-eval", "--resume", "ck"), 30);
    err = rb_stderr(dir, "resume");
    cr_assert_eq(code, 0, "--resume past a FIFO: exit %d: %s", code, err);
    cr_assert(strstr(err, "ckpt-0000000015") && strstr(err, "not a regular file"), "no warning naming the FIFO: %s", err);
    rb_assert_resumed_from(dir, 10);
    free(err), free(ck), free(fifo);
    tu_rm_rf(dir);
    free(dir);
}

/* A checkpoint with one tensor all NaN trained 50 steps with exit 0 (the NaN bias sits behind a ReLU,
 * so the loss stayed finite) and --save wrote the NaNs back. Now --load refuses it, naming the tensor;
 * so does --resume for NaN optimizer state. */
Test(probes, non_finite_weights_are_refused_at_load)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(RB_BASE), RB_ARGS("--steps", "5", "--save", "a.st", "--checkpoint-dir", "ck")), 0);
    struct rb_model r;
    rb_model_init(&r);
    char *a = rb_path(dir, "a.st"), *nan_st = rb_path(dir, "nan.st");
    rb_load(&r, a, 0);
    const struct param_entry *e = NULL;
    for (int k = 0; k < r.m.n_entries && !e; k++)
        if (r.m.params[k].kind != PARAM_BUFFER && r.m.params[k].kind != PARAM_COUNTER && strstr(r.m.params[k].name, "bias"))
            e = &r.m.params[k];
    cr_assert_not_null(e, "the MLP has a bias");
    for (size_t i = 0; i < e->n; i++) r.p[e->off + i] = NAN;
    cr_assert_eq(checkpoint_save(nan_st, &r.m, r.p, r.b, "{}"), TB_OK, "%s", tb_error_get());
    /* session_open loads the weights: in this process (before_any_work), as messages_say_what_is_wrong's spawned
     * refusal of a --load file */
    char *err;
    const int code =
        before_any_work(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "50", "--load", "nan.st", "--save", "b.st"), &err);
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, e->name) && strstr(err, "NaN"), "the message names the tensor: %s", err);
    cr_assert_eq(n_lines(err), 1, "%s", err); /* session_open's refusal: before any step, so nothing saved */
    free(err);
    /* The resumable checkpoint with NaN Adam state (its first moment of the first tensor). */
    char p[600], *ck = rb_path(dir, "ck");
    checkpoint_dir_path(ck, 5, p, sizeof p);
    rb_load(&r, p, 1);
    r.o[r.m.params[0].off] = INFINITY;
    char meta[4096];
    cr_assert_eq(checkpoint_read_meta(p, "config", meta, sizeof meta), TB_OK);
    /* Rewrite it with every metadata key the resume checks: copy them from the original. */
    static const char *const keys[] = {"trainbench_checkpoint", "plan", "workload", "backend", "run_id", "config",
                                       "config_hash", "step", "total_steps", "samples_seen", "train_time_s",
                                       "optimizer_state_copies", "checkpoint_every"};
    char json[8192] = "{";
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char v[4096];
        cr_assert_eq(checkpoint_read_meta(p, keys[k], v, sizeof v), TB_OK, "%s: %s", keys[k], tb_error_get());
        snprintf(json + strlen(json), sizeof json - strlen(json), "%s\"%s\":\"%s\"", k ? "," : "", keys[k], v);
    }
    strcat(json, "}");
    cr_assert_eq(checkpoint_save_state(p, &r.m, r.p, r.b, r.o, r.spp, json), TB_OK, "%s", tb_error_get());
    const int code2 = rb_run(dir, "res", RB_ARGS(RB_BASE), RB_ARGS("--steps", "10", "--resume", "ck"));
    err = rb_stderr(dir, "res");
    cr_assert_eq(code2, 1, "resumed from Inf optimizer state: exit %d: %s", code2, err);
    /* A warning names the file set aside (below); the error says none could be read. */
    cr_assert(strstr(err, "no checkpoint there could be read") != NULL, "%s", err);
    cr_assert(strstr(err, "Inf") && strstr(err, "__optimizer__"), "the message names the tensor: %s", err);
    free(err), free(ck);
    rb_model_free(&r);
    free(a), free(nan_st);
    tu_rm_rf(dir);
    free(dir);
}

/* Adam at --lr 10 on the MLP: the loss jumps from 2.3 to 1e11, then (ReLUs dead) falls back to a
 * uniform guess, all finite: the run "finished" at chance accuracy with exit 0. Now the finite-loss
 * rule (loss_watch.h) stops it as diverged, with the diverged row. */
Test(probes, a_finite_but_exploded_loss_is_divergence)
{
    char *dir = new_dir();
    const int code = rb_run(dir, "div", RB_ARGS(RB_BASE), RB_ARGS("--steps", "200", "--optimizer", "adam", "--lr", "10"));
    char *err = rb_stderr(dir, "div");
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "diverged") && strstr(err, "stayed above"), "unclear message: %s", err);
    free(err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "diverged");
    const long at = (long)json_get_number(r, "figures.diverged_at_step", -1);
    cr_assert(at > LOSS_WATCH_STEPS && at < 100, "diverged_at_step %ld", at);
    cr_assert_eq(json_get_number(r, "figures.completed_steps", -1), at - 1);
    cr_assert_null(json_get(r, "figures.test_accuracy"));
    json_value_free(r);
    /* A sane learning rate trains on. */
    cr_assert_eq(rb_run(dir, "ok", RB_ARGS(RB_BASE), RB_ARGS("--steps", "200", "--optimizer", "adam", "--lr", "0.003")), 0);
    tu_rm_rf(dir);
    free(dir);
}

/* The rule itself: LOSS_WATCH_STEPS consecutive steps above LOSS_WATCH_FACTOR x the reference, the
 * reference being the larger of the first loss and ln(classes); a spike that recovers is no divergence. */
Test(probes, loss_watch_rule)
{
    struct loss_watch w;
    loss_watch_reset(&w);
    const double chance = log(10.0), limit = LOSS_WATCH_FACTOR * chance;
    cr_assert_eq(loss_watch_feed(&w, 1, 2.0, 10), TB_OK); /* below chance: the reference is ln 10 */
    for (long s = 2; s < 2 + LOSS_WATCH_STEPS - 1; s++) cr_assert_eq(loss_watch_feed(&w, s, limit * 1.01, 10), TB_OK);
    cr_assert_eq(loss_watch_feed(&w, 100, limit * 0.99, 10), TB_OK, "one step under the limit ends the streak");
    for (long s = 101; s < 101 + LOSS_WATCH_STEPS - 1; s++) cr_assert_eq(loss_watch_feed(&w, s, 1e9, 10), TB_OK);
    cr_assert_eq(loss_watch_feed(&w, 200, 5e9, 10), TB_EDIVERGED);
    cr_assert(strstr(tb_error_get(), "from step 101") && strstr(tb_error_get(), "5e+09"), "%s", tb_error_get());
    /* A resumed run with a small loss: the reference is still a uniform guess's, so noise is fine. */
    loss_watch_reset(&w);
    cr_assert_eq(loss_watch_feed(&w, 1001, 0.01, 10), TB_OK);
    for (long s = 1002; s < 1100; s++) cr_assert_eq(loss_watch_feed(&w, s, 1.5, 10), TB_OK);
    /* A first loss above chance (a bad init) raises the reference. */
    loss_watch_reset(&w);
    cr_assert_eq(loss_watch_feed(&w, 1, 50.0, 10), TB_OK);
    for (long s = 2; s < 100; s++) cr_assert_eq(loss_watch_feed(&w, s, 400.0, 10), TB_OK);
}

/* Runs bench with args in dir, its standard output and error written to the files out and err (NULL: that stream
 * closed); returns its exit status. */
static int run_with_streams(const char *dir, const char *const *args, const char *out, const char *err)
{
    const char *argv[32];
    int argc = 0;
    argv[argc++] = TB_BENCH_EXE;
    for (int i = 0; args[i]; i++) argv[argc++] = args[i];
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        const char *path[2] = {out, err};
        for (int fd = 1; fd <= 2; fd++) {
            const int f = path[fd - 1] ? open(path[fd - 1], O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
            if (path[fd - 1] && f < 0) _exit(127);
            if (f >= 0) dup2(f, fd), close(f);
            else close(fd);
        }
        if (chdir(dir) != 0) _exit(127);
        execv(TB_BENCH_EXE, (char *const *)argv);
        _exit(127);
    }
    return rb_wait(pid);
}

/* Runs bench with args and its standard output on /dev/full; returns its exit status, stderr in err. */
static int run_to_dev_full(const char *dir, const char *const *args, char **err)
{
    char *err_path = rb_path(dir, "full.err");
    const int code = run_with_streams(dir, args, "/dev/full", err_path);
    *err = tu_read_file(err_path, NULL);
    free(err_path);
    return code;
}

/* Runs bench with args in dir and standard stream `closed` closed (the others on dir/closed.out and closed.err); returns
 * its exit status. */
static int run_with_closed(const char *dir, int closed, const char *const *args)
{
    char *out_path = rb_path(dir, "closed.out"), *err_path = rb_path(dir, "closed.err");
    const int code = run_with_streams(dir, args, closed == 1 ? NULL : out_path, closed == 2 ? NULL : err_path);
    free(out_path), free(err_path);
    return code;
}

/* Probe environ: with stderr closed (`2>&-`) the first file bench opened took descriptor 2, and its progress lines
 * went into the MLPerf event log (a line of it cut in two); with stdout closed, the summary would follow. Every line
 * of the log is an event, every row whole, and a closed stdout is still said (exit 1), as before. */
Test(probes, a_closed_standard_stream_writes_into_no_output)
{
    char *dir = new_dir();
    static const char *const args[] = {"--data", "synthetic", "--synthetic-samples", "64,32", "--batch", "4", "--steps",
                                       "3", "--out", "rows.jsonl", NULL};
    for (int closed = 1; closed <= 2; closed++) {
        const int code = run_with_closed(dir, closed, args);
        char *err = rb_path(dir, "closed.err"), *text = tu_read_file(err, NULL);
        if (closed == 1) {
            cr_assert_eq(code, 1, "stdout closed: exit %d: %s", code, text);
            cr_assert(strstr(text, "bench: cannot write to standard output"), "%s", text);
        } else {
            cr_assert_eq(code, 0, "stderr closed: exit %d", code);
        }
        free(err), free(text);
    }
    char *rows = rb_path(dir, "rows.jsonl"), *text = tu_read_file(rows, NULL);
    cr_assert_not_null(text);
    cr_assert_eq(n_lines(text), 2, "two rows: %s", text);
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        struct json_value *v = NULL;
        cr_assert_eq(json_parse(line, strlen(line), &v), TB_OK, "not a row: %s", line);
        json_value_free(v);
    }
    free(rows), free(text);
    char *logs = rb_path(dir, "mllog");
    DIR *d = opendir(logs);
    cr_assert_not_null(d);
    int n_logs = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *p = NULL;
        cr_assert(asprintf(&p, "%s/%s", logs, e->d_name) > 0);
        char *log = tu_read_file(p, NULL);
        for (char *line = log, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = '\0';
            cr_assert(strncmp(line, ":::MLLOG {", 10) == 0, "%s: not an event: %s", e->d_name, line);
        }
        n_logs++;
        free(p), free(log);
    }
    closedir(d);
    cr_assert_eq(n_logs, 2);
    free(logs);
    tu_rm_rf(dir);
    free(dir);
}

/* Messages that misled: a duplicate tensor name reported as an overlap, a directory as a short read,
 * stdout on a full device ignored (exit 0), --prefetch 0 described as "prefetch 3", a scaling error
 * reading "not a multiple of 1 1 x replicas 3", 4-stage descriptions cut off. */
Test(probes, messages_say_what_is_wrong)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--save", "a.st")), 0);
    /* The same tensor entry twice in the header (same offsets). */
    char *a = rb_path(dir, "a.st"), *dup = rb_path(dir, "dup.st");
    size_t len;
    char *bytes = tu_read_file(a, &len);
    cr_assert(bytes && len > 8);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(uint8_t)bytes[i] << (8 * i);
    char *hdr = strndup(bytes + 8, hl);
    struct rb_model r;
    rb_model_init(&r);
    char key[160];
    snprintf(key, sizeof key, "\"%s\":{", r.m.params[0].name);
    char *at = strstr(hdr, key), *end = at ? strchr(at, '}') : NULL;
    cr_assert(at && end, "no entry %s in %s", key, hdr);
    const size_t entry = (size_t)(end + 1 - at) + 1; /* with a comma after it */
    const uint64_t nhl = hl + entry;
    char *out = malloc(len + entry);
    for (int i = 0; i < 8; i++) out[i] = (char)(nhl >> (8 * i));
    size_t o = 8, pre = (size_t)(at - hdr);
    memcpy(out + o, hdr, pre), o += pre;
    memcpy(out + o, at, entry - 1), o += entry - 1;
    out[o++] = ',';
    memcpy(out + o, at, hl - pre), o += hl - pre;
    memcpy(out + o, bytes + 8 + hl, len - 8 - hl), o += len - 8 - hl;
    tu_write_file(dup, out, o);
    free(out), free(hdr), free(bytes);
    /* session_open reads --load's file: in this process (before_any_work), as fifos_are_refused_not_waited_on's
     * spawned --load refusal */
    char *err;
    int code = before_any_work(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--load", "dup.st"), &err);
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "duplicate tensor name") && strstr(err, r.m.params[0].name), "%s", err);
    free(err);
    /* A directory as --load (in this process, as the file above). */
    cr_assert_eq(unlink(dup), 0);
    cr_assert_eq(mkdir(dup, 0755), 0);
    code = before_any_work(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--load", "dup.st"), &err);
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "is a directory") && !strstr(err, "short read"), "%s", err);
    free(err);
    /* Standard output on a full device: the run is not a success. */
    code = run_to_dev_full(dir, RB_ARGS("--list"), &err);
    cr_assert_eq(code, 1, "--list > /dev/full: exit %d: %s", code, err);
    cr_assert(strstr(err, "standard output"), "%s", err);
    free(err);
    /* --prefetch 0 is no prefetch, and a 4-stage description is whole. */
    static const char *const ipu[] = {"--data", "synthetic", "--synthetic-samples", "256,64", "--mllog", "none", "--out",
                                      "results.jsonl", "--backend", "ipu", "--stages", "4", "--micro-batch", "2", "--ga",
                                      "4", "--batch", "8", "--steps", "2", NULL};
    cr_assert_eq(rb_run(dir, "pf", ipu, RB_ARGS("--prefetch", "0")), 0);
    char *po = rb_path(dir, "pf.out"), *text = tu_read_file(po, NULL);
    cr_assert(text && strstr(text, "prefetch 0;"), "%s", text);
    const char *mem = strstr(text, "act MiB/stage ");
    cr_assert_not_null(mem, "%s", text);
    int slashes = 0;
    for (const char *c = mem + 14; *c && *c != ')' && *c != '\n'; c++) slashes += *c == '/';
    const char *close = strpbrk(mem, ")\n");
    cr_assert(slashes == 3 && close && *close == ')', "the description is cut: %s", text);
    free(text), free(po);
    /* The ipu scaling grid's unit, said plainly (bench_config_finish's refusal: in this process, as the usage errors
     * of the tests above past their first). */
    static const char *const sc[] = {"--data", "synthetic", "--backend", "ipu", "--mllog", "none", "--out",
                                     "results.jsonl", "--plan", "scaling", "--replicas-list", "3", "--batches", "16",
                                     NULL};
    code = before_any_work(dir, sc, NULL, &err);
    cr_assert_eq(code, 2, "exit %d: %s", code, err);
    cr_assert(strstr(err, "not a multiple of replicas 3") && !strstr(err, "1 1"), "%s", err);
    free(err);
    rb_model_free(&r);
    free(a), free(dup);
    tu_rm_rf(dir);
    free(dir);
}

/* A row names its --load weights by what they are (config.load_crc32), as it names its data (data_crc32): trained in
 * place (--save over --load's file), two runs of one command read other weights under one path, and their rows told
 * nobody; the seed, whose init only fills the padding between the stored tensors, leaves the CRC as it is. */
Test(probes, loaded_weights_are_recorded_by_their_crc)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "first", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--no-eval", "--save", "a.st")), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(rb_run(dir, i ? "inplace2" : "inplace1", RB_ARGS(RB_BASE),
                            RB_ARGS("--steps", "2", "--no-eval", "--load", "a.st", "--save", "a.st")),
                     0);
    cr_assert_eq(rb_run(dir, "eval", RB_ARGS(RB_BASE), RB_ARGS("--plan", "evaluate", "--load", "a.st", "--seed", "5")),
                 0);
    cr_assert_eq(rb_run(dir, "eval2", RB_ARGS(RB_BASE), RB_ARGS("--plan", "evaluate", "--load", "a.st")), 0);
    struct json_value *rows[5];
    cr_assert_eq(rb_rows(dir, rows, 5), 5);
    cr_assert_null(json_get(rows[0], "config.load_crc32"), "a run that loaded nothing names no weights");
    const char *crc[4];
    for (int i = 0; i < 4; i++) {
        crc[i] = json_get_str(rows[i + 1], "config.load_crc32", "");
        cr_assert_eq(strlen(crc[i]), 8, "row %d: config.load_crc32 '%s'", i + 2, crc[i]);
        cr_assert_eq(strspn(crc[i], "0123456789abcdef"), 8, "row %d: config.load_crc32 '%s'", i + 2, crc[i]);
    }
    cr_assert_str_neq(crc[0], crc[1], "two runs in place read other weights from one path: one CRC %s", crc[0]);
    cr_assert_str_neq(crc[1], crc[2], "the second run in place saved over the weights it read");
    cr_assert_str_eq(crc[2], crc[3], "one file read under two seeds: %s and %s", crc[2], crc[3]);
    for (int i = 0; i < 5; i++) json_value_free(rows[i]);
    tu_rm_rf(dir);
    free(dir);
}

/* Resuming a run that had finished wrote another "ok" row each time. Now it says the run is finished
 * (exit 0, no row); without the note (a run killed after its last checkpoint, before its row) the
 * resume still evaluates and writes the row, and a larger --steps extends the run. */
Test(probes, resuming_a_finished_run_writes_no_row)
{
    char *dir = new_dir();
    char *res = rb_path(dir, "results.jsonl");
    cr_assert_eq(rb_run(dir, "a", RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--checkpoint-dir", "ck")), 0);
    cr_assert_eq(rb_count_lines(res), 1);
    for (int i = 0; i < 2; i++) {
        const int code = rb_run(dir, "again", RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--resume", "ck"));
        char *err = rb_stderr(dir, "again");
        cr_assert_eq(code, 0, "exit %d: %s", code, err);
        cr_assert(strstr(err, "finished at step 20") && strstr(err, "no new row"), "%s", err);
        cr_assert_eq(rb_count_lines(res), 1, "resume %d of a finished run wrote a row", i + 1);
        free(err);
    }
    char *note = rb_path(dir, "ck/finished.json");
    cr_assert_eq(unlink(note), 0);
    cr_assert_eq(rb_run(dir, "row", RB_ARGS(RB_BASE), RB_ARGS("--steps", "20", "--resume", "ck")), 0);
    cr_assert_eq(rb_count_lines(res), 2, "the row of a run killed before it is written on resume");
    cr_assert_eq(rb_run(dir, "ext", RB_ARGS(RB_BASE), RB_ARGS("--steps", "30", "--resume", "ck")), 0);
    cr_assert_eq(rb_count_lines(res), 3, "an extended run writes its row");
    rb_assert_resumed_from(dir, 20);
    free(note), free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* A reused --run-id overwrote the earlier run's MLLOG silently; --blas-core Bogus ran OpenBLAS's
 * default kernels silently. Now: a usage error naming the log (a resume writes its own log beside it),
 * and one naming the kernel set. */
Test(probes, reused_run_id_and_unknown_blas_core_are_refused)
{
    char *dir = new_dir();
    static const char *const base[] = {"--data", "synthetic", "--synthetic-samples", "1000,200", "--batch", "8", "--out",
                                       "results.jsonl", "--quiet", "--run-id", "X", NULL};
    cr_assert_eq(rb_run(dir, "a", base, RB_ARGS("--steps", "5", "--checkpoint-dir", "ck")), 0);
    char *log = rb_path(dir, "mllog/X.log"), *res = rb_path(dir, "results.jsonl");
    const int lines = rb_count_lines(log);
    cr_assert_gt(lines, 5);
    /* outputs_check's refusal, as outputs_that_collide_with_each_other_or_an_input_are_refused's spawned first: in
     * this process (before_any_work) */
    char *err;
    int code = before_any_work(dir, base, RB_ARGS("--steps", "5"), &err);
    cr_assert_eq(code, 2, "exit %d: %s", code, err);
    cr_assert(strstr(err, "--run-id X") && strstr(err, "mllog/X.log"), "%s", err);
    cr_assert_eq(n_lines(err), 1, "%s", err);
    cr_assert_eq(rb_count_lines(log), lines, "the earlier log changed");
    cr_assert_eq(rb_count_lines(res), 1);
    free(err);
    /* Resuming the run under its id writes the session's own whole log beside the first (MLPerf's clock does
     * not pause, so one log across the gap would time it), and leaves the first as it was. */
    cr_assert_eq(rb_run(dir, "c", base, RB_ARGS("--steps", "8", "--resume", "ck")), 0);
    cr_assert_eq(rb_count_lines(log), lines, "the resumed run wrote into the first session's log");
    char *log2 = rb_path(dir, "mllog/X-resume1.log");
    char *text = tu_read_file(log2, NULL);
    cr_assert(text && strstr(text, "resumed_from_step"), "the resumed session's log is missing or says no resume");
    free(text), free(log2);
    /* An unknown kernel set. */
    code = rb_run(dir, "blas", RB_ARGS("--blas-core", "Bogus"), RB_ARGS("--version"));
    err = rb_stderr(dir, "blas");
    cr_assert_eq(code, 2, "exit %d: %s", code, err);
    cr_assert(strstr(err, "--blas-core Bogus") && strstr(err, "Haswell"), "%s", err);
    free(err);
    free(log), free(res);
    tu_rm_rf(dir);
    free(dir);
}

/* --project-device FIFO blocked in fopen forever, and a directory was "larger than 16383 bytes". Now
 * both are one line saying the path is not a regular file, exit 2; the seed figures' reader
 * (dev_published_load) refuses a FIFO the same way instead of waiting for a writer. */
Test(probes, a_fifo_or_directory_as_device_spec_is_refused)
{
    char *dir = new_dir();
    char *fifo = rb_path(dir, "spec.fifo");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    int code = run_bounded(dir, "fifo", RB_ARGS("--backend", "ipu", "--project-device", "./spec.fifo"), 30);
    char *err = rb_stderr(dir, "fifo");
    cr_assert_eq(code, 2, "exit %d: %s", code, err);
    cr_assert_eq(n_lines(err), 1, "%s", err);
    cr_assert(strstr(err, "spec.fifo") && strstr(err, "not a regular file"), "%s", err);
    free(err);
    code = run_bounded(dir, "dir", RB_ARGS("--backend", "ipu", "--project-device", dir), 30);
    err = rb_stderr(dir, "dir");
    cr_assert_eq(code, 2, "exit %d: %s", code, err);
    cr_assert_eq(n_lines(err), 1, "%s", err);
    cr_assert(strstr(err, "directory") && !strstr(err, "larger than"), "%s", err);
    free(err);
    struct dev_published pub;
    alarm(20); /* a blocking open kills the test instead of hanging it */
    cr_assert_neq(dev_published_load(fifo, &pub), TB_OK);
    alarm(0);
    cr_assert(strstr(tb_error_get(), "not a regular file"), "%s", tb_error_get());
    free(fifo);
    tu_rm_rf(dir);
    free(dir);
}

/* Whether path is (still) a FIFO. */
static int is_fifo(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISFIFO(sb.st_mode);
}

/* --calibrate and --calibrate-if-needed renamed their file over whatever --calibration named: a device
 * node (as root, /dev/null became a regular file), a FIFO, a results file. Now they refuse a target that
 * is not a regular file, or a regular file that is not a calibration, with one line before measuring
 * (exit 2, a usage error) and leave it alone; an empty file or another machine's calibration is replaced. */
Test(probes, calibrate_replaces_only_a_calibration, .timeout = 240)
{
    char *dir = new_dir();
    char *fifo = rb_path(dir, "fifo"), *rows = rb_path(dir, "rows.jsonl"), *node = rb_path(dir, "null");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    /* A private device node (root only: mknod), never the machine's /dev/null. */
    const int have_node = mknod(node, S_IFCHR | 0666, makedev(1, 3)) == 0;
    static const char rows_text[] = "{\"schema\":1,\"kind\":\"train\",\"run_id\":\"a\"}\n{\"schema\":1,\"run_id\":\"b\"}\n";
    rb_write(dir, "rows.jsonl", rows_text);
    rb_write(dir, "one.json", "{\"schema\":1,\"kind\":\"train\"}\n");
    static const char *const targets[] = {"fifo", "rows.jsonl", "one.json", "null"};
    /* Either mode checks its target first (main_bench.c's cmd_calibrate: calibrate_check_target), before it
     * measures: each mode spawned on a target of either kind of refusal, and every target checked in this process
     * (a spawn costs 0.3-0.5 CPU-s under ASan). */
    static const struct {
        const char *mode;
        int target;
    } spawned[] = {{"--calibrate", 0}, {"--calibrate-if-needed", 1}};
    for (size_t k = 0; k < sizeof spawned / sizeof *spawned; k++) {
        const char *m = spawned[k].mode, *target = targets[spawned[k].target];
        const int t = spawned[k].target;
        /* no run options: --calibrate refuses them */
        const int code = run_bounded_with(dir, "cal", RB_ARGS(m), RB_ARGS("--calibration", target), 60);
        char *err = rb_stderr(dir, "cal"), *out = rb_path(dir, "cal.out"), *text = tu_read_file(out, NULL);
        cr_assert_eq(code, 2, "%s --calibration %s: exit %d: %s", m, target, code, err);
        cr_assert_eq(n_lines(err), 1, "%s %s: %s", m, target, err);
        cr_assert(strstr(err, "--calibration") && strstr(err, target), "%s", err);
        cr_assert(strstr(err, t == 0 || t == 3 ? "not a regular file" : "not a calibration"), "%s", err);
        cr_assert(!text || !strstr(text, "calibrating"), "%s %s: measured before refusing: %s", m, target, text);
        free(text), free(out), free(err);
    }
    for (int t = 0; t < 4; t++) {
        if (t == 3 && !have_node) continue;
        char *path = rb_path(dir, targets[t]);
        alarm(30); /* a blocking open of the FIFO kills the test instead of hanging it */
        const int st = calibrate_check_target(path);
        alarm(0);
        const char *msg = tb_error_get();
        cr_assert_neq(st, TB_OK, "--calibration %s: accepted", targets[t]); /* bench exits 2 on any refusal */
        cr_assert(!strchr(msg, '\n'), "--calibration %s: not one line: %s", targets[t], msg);
        cr_assert(strstr(msg, "--calibration") && strstr(msg, targets[t]), "%s", msg);
        cr_assert(strstr(msg, t == 0 || t == 3 ? "not a regular file" : "not a calibration"), "%s", msg);
        free(path);
    }
    cr_assert(is_fifo(fifo), "the FIFO was replaced");
    if (have_node) {
        struct stat sb;
        cr_assert(stat(node, &sb) == 0 && S_ISCHR(sb.st_mode), "the device node was replaced");
    }
    char *text = tu_read_file(rows, NULL);
    cr_assert_str_eq(text, rows_text, "the results file changed");
    free(text);
    /* Another machine's calibration is replaced by this one's. */
    rb_write(dir, "cal.json", "{\"schema\":1,\"kind\":\"calibration\",\"cpu_model\":\"Another CPU\",\"cores\":999,"
                              "\"sgemm_1t_gflops\":1,\"triad_all_gbs\":1}\n");
    int code = rb_run(dir, "other", RB_ARGS("--calibrate-if-needed", "--calibration", "cal.json"), NULL);
    char *err = rb_stderr(dir, "other");
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    char *cal = rb_path(dir, "cal.json");
    text = tu_read_file(cal, NULL);
    cr_assert(text && strstr(text, "\"kind\":\"calibration\"") && !strstr(text, "Another CPU"), "%s", text);
    free(text), free(err), free(cal);
    free(fifo), free(rows), free(node);
    tu_rm_rf(dir);
    free(dir);
}

/* The whole of a file, malloc'd ("" when missing), to see that a refused run left it alone. */
static char *contents(const char *dir, const char *name)
{
    char *p = rb_path(dir, name), *s = tu_read_file(p, NULL);
    free(p);
    return s ? s : strdup("");
}

/* Whether dir/name holds exactly the n bytes of want (binary: weights start with a length full of zeros). */
static int same_bytes(const char *dir, const char *name, const char *want, size_t n)
{
    char *p = rb_path(dir, name);
    size_t len = 0;
    char *s = tu_read_file(p, &len);
    free(p);
    const int same = s && len == n && memcmp(s, want, n) == 0;
    free(s);
    return same;
}

/* An output written whole over someone's data not named as this run's input: another results file (--save over
 * it replaced the rows, exit 0), a checkpoint of another run (--save into its folder); refused before any work,
 * nothing changed. A weights file, or any other, is replaced as before. */
Test(probes, outputs_over_results_or_checkpoints_are_refused)
{
    char *dir = new_dir();
    static const char row[] = "{\"schema_version\":1,\"kind\":\"train\",\"config\":{\"backend\":\"cpu\"}}\n";
    char *other = rb_path(dir, "other.jsonl"), *ck = rb_path(dir, "old"), *ckf = rb_path(dir, "old/ckpt-0000000002.safetensors");
    cr_assert_eq(mkdir(ck, 0755), 0);
    FILE *f = fopen(other, "w");
    cr_assert(f && fputs(row, f) >= 0 && fclose(f) == 0);
    f = fopen(ckf, "w");
    cr_assert(f && fputs("not really a checkpoint", f) >= 0 && fclose(f) == 0);
    static const struct {
        const char *args[6], *msg;
    } cases[] = {
        {{"--steps", "2", "--save", "other.jsonl"}, "--save other.jsonl: an existing results file"},
        {{"--steps", "2", "--trace", "other.jsonl"}, "--trace other.jsonl: an existing results file"},
        {{"--steps", "2", "--save", "old/ckpt-0000000002.safetensors"},
         "--save old/ckpt-0000000002.safetensors: an existing file named as a run's checkpoints are"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *err = NULL;
        const int code = before_any_work(dir, RB_ARGS(RB_BASE), cases[i].args, &err);
        cr_assert_eq(code, 2, "case %zu: exit %d: %s", i, code, err);
        cr_assert(strstr(err, cases[i].msg) && n_lines(err) == 1, "case %zu: %s", i, err);
        free(err);
    }
    char *r = contents(dir, "other.jsonl"), *c = contents(dir, "old/ckpt-0000000002.safetensors");
    cr_assert_str_eq(r, row);
    cr_assert_str_eq(c, "not really a checkpoint");
    free(r), free(c);
    /* any other file is replaced, as before: a user's own "ckpt-best" too, and a checkpoint trained in place */
    static const char *const others[] = {"w.st", "ckpt-best.safetensors"};
    for (int k = 0; k < 2; k++) {
        char *w = rb_path(dir, others[k]);
        f = fopen(w, "w");
        cr_assert(f && fputs("old weights", f) >= 0 && fclose(f) == 0);
        char *err = NULL;
        cr_assert_eq(before_any_work(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--save", others[k]), &err), 0,
                     "%s: %s", others[k], err);
        free(err), free(w);
    }
    char *err = NULL;
    const int in_place = before_any_work(dir, RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--load",
                                         "old/ckpt-0000000002.safetensors", "--save", "old/ckpt-0000000002.safetensors"),
                                         &err);
    cr_assert(!strstr(err, "named as a run's checkpoints"), "training in place refused: exit %d: %s", in_place, err);
    free(err);
    free(other), free(ck), free(ckf);
    tu_rm_rf(dir);
    free(dir);
}

/* Nothing checked that outputs differ from each other and from the inputs: --trace, --save, --logits or
 * --timeline on the --out file replaced its rows; --logits on --load's file replaced the weights;
 * --out on --load's file appended a row to them. Now every such pair is one line naming both options,
 * exit 2, before any work. Directories may be shared (--mllog and --checkpoint-dir, --resume's default).
 * The first case and the suite's (suite_load's own check) are spawned, the others checked in this process
 * (before_any_work: session_open's outputs_check refuses them). */
Test(probes, outputs_that_collide_with_each_other_or_an_input_are_refused, .timeout = 240)
{
    char *dir = new_dir();
    cr_assert_eq(rb_run(dir, "good", RB_ARGS(RB_BASE), RB_ARGS("--steps", "2", "--save", "a.st")), 0);
    for (const char *sub = "d\0data\0"; *sub; sub += strlen(sub) + 1) {
        char *p = rb_path(dir, sub);
        cr_assert_eq(mkdir(p, 0755), 0);
        free(p);
    }
    rb_write(dir, "data/train-images-idx3-ubyte", "not read: refused before");
    rb_write(dir, "s.suite", "steps=2\n");
    char *rows = contents(dir, "results.jsonl"), *a_st = rb_path(dir, "a.st");
    size_t n_weights = 0;
    char *weights = tu_read_file(a_st, &n_weights);
    free(a_st);
    cr_assert(weights && n_weights > 0);
    static const struct {
        const char *args[12];
        const char *a, *b; /* the two options the message names */
    } cases[] = {
        {{"--steps", "2", "--trace", "results.jsonl"}, "--trace", "--out"},
        {{"--steps", "2", "--save", "results.jsonl"}, "--save", "--out"},
        {{"--plan", "evaluate", "--load", "a.st", "--logits", "results.jsonl"}, "--logits", "--out"},
        {{"--backend", "ipu", "--steps", "2", "--timeline", "results.jsonl"}, "--timeline", "--out"},
        {{"--plan", "evaluate", "--load", "a.st", "--logits", "a.st"}, "--logits", "--load"},
        {{"--steps", "2", "--load", "a.st", "--out", "a.st"}, "--out", "--load"},
        {{"--steps", "2", "--load", "./a.st", "--trace", "d/../a.st"}, "--trace", "--load"},
        {{"--steps", "2", "--trace", "new.json", "--save", "d/../new.json"}, "--save", "--trace"},
        {{"--backend", "ipu", "--steps", "2", "--timeline", "t.csv", "--trace", "t.csv.devices.csv"}, "--trace", "--timeline"},
        {{"--steps", "2", "--checkpoint-dir", "ck", "--trace", "ck"}, "--trace", "--checkpoint-dir"},
        {{"--steps", "2", "--calibration", "cal.json", "--out", "./cal.json"}, "--out", "--calibration"},
        {{"--steps", "2", "--data", "data", "--out", "data/train-images-idx3-ubyte"}, "--out", "--data"},
        {{"--suite", "s.suite", "--out", "s.suite"}, "--out", "--suite"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* A case reading a data directory takes no --synthetic-samples (refused beside a --data DIR). */
        const int reads_data = !strcmp(cases[i].b, "--data"), spawned = i == 0 || !strcmp(cases[i].b, "--suite");
        const char *const *base = reads_data ? RB_ARGS("--batch", "8", "--mllog", "none", "--out", "results.jsonl",
                                                       "--quiet")
                                             : RB_ARGS(RB_BASE);
        char *err = NULL;
        const int code =
            spawned ? rb_run(dir, "bad", base, cases[i].args) : before_any_work(dir, base, cases[i].args, &err);
        if (spawned) err = rb_stderr(dir, "bad");
        /* the suite's own output checks refuse one over the suite file before any run, as the others (it was
         * the run's failure, exit 1, after the lines before it ran) */
        cr_assert_eq(code, 2, "case %zu (%s, %s): exit %d: %s", i, cases[i].a, cases[i].b, code, err);
        cr_assert(strstr(err, cases[i].a) && strstr(err, cases[i].b), "case %zu: does not name both: %s", i, err);
        cr_assert_eq(n_lines(err), 1, "case %zu: %s", i, err);
        char *r = contents(dir, "results.jsonl"), *s = contents(dir, "s.suite");
        cr_assert_str_eq(r, rows, "case %zu: the result rows changed", i);
        cr_assert(same_bytes(dir, "a.st", weights, n_weights), "case %zu: the weights changed", i);
        cr_assert_str_eq(s, "steps=2\n", "case %zu: the suite changed", i);
        for (const char *made = "new.json\0t.csv\0ck\0cal.json\0"; *made; made += strlen(made) + 1) {
            char *p = rb_path(dir, made);
            cr_assert_neq(access(p, F_OK), 0, "case %zu: %s was written", i, made);
            free(p);
        }
        free(r), free(s), free(err);
    }
    /* What stays allowed: --out appends, --resume keeps checkpointing in its directory, --mllog may share
     * the checkpoint directory, a device sink may take more than one output, and --save may replace --load's
     * weights (read before the run; the save renames a whole new file over them at its end). */
    /* (in place and the shared directory in one run: each run costs 0.3-0.5 CPU-s under ASan before its work) */
    cr_assert_eq(rb_run(dir, "inplace", RB_ARGS(RB_BASE),
                        RB_ARGS("--steps", "2", "--load", "a.st", "--save", "./a.st", "--checkpoint-dir", "ck",
                                "--mllog", "ck")),
                 0);
    cr_assert(!same_bytes(dir, "a.st", weights, n_weights), "--save in place did not write the trained weights");
    /* (the device sink, where one can be made, on the resumed run: one run for both) */
    char *node = rb_path(dir, "null");
    const int sink = mknod(node, S_IFCHR | 0666, makedev(1, 3)) == 0;
    const char *const *res = sink ? RB_ARGS("--steps", "4", "--resume", "ck", "--mllog", "ck", "--out", "null",
                                            "--trace", "null")
                                  : RB_ARGS("--steps", "4", "--resume", "ck", "--mllog", "ck");
    const int code = rb_run(dir, "res", RB_ARGS(RB_BASE), res);
    char *err = rb_stderr(dir, "res");
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    free(err);
    free(node), free(rows), free(weights);
    tu_rm_rf(dir);
    free(dir);
}
