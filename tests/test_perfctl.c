/* test_perfctl.c — bench's side of perf's control-fifo protocol (TB_PERF_CTL, harness/perfctl.h).
 *
 * A fake perf holds the control fifo open for reading and the ack fifo for writing, as `perf record
 * --delay=-1 --control fifo:CTL,ACK` does, answers every command with "ack", and logs the commands:
 * a throughput run with --repeat 2 sends enable, disable, enable, disable — one window per repeat,
 * opened after the set-up and closed before the row is written. Without an ack fifo nothing waits;
 * with no reader on the control fifo bench warns and runs as usual. Where perf itself can run, it
 * counts with its events enabled exactly twice.
 */
#include "test_reliability_util.h"

#include <poll.h>
#include <signal.h>

#define BASE RB_ARGS("--data", "synthetic", "--synthetic-samples", "256,64", "--mllog", "none", "--out", "rows.jsonl", \
                     "--quiet", "--plan", "throughput", "--batch", "8", "--steps", "3", "--warmup", "1", "--repeat", "2")

/* Runs bench with TB_PERF_CTL=env in dir while acting as perf on the fifos ctl (and ack, if given):
 * returns the commands received, malloc'd; the exit status in *code. */
static char *fake_perf(const char *dir, const char *env, const char *ctl, const char *ack, int *code)
{
    const int cfd = open(ctl, O_RDONLY | O_NONBLOCK);
    const int afd = ack ? open(ack, O_RDWR | O_NONBLOCK) : -1;
    cr_assert(cfd >= 0 && (!ack || afd >= 0), "cannot open the fifos");
    cr_assert_eq(setenv("TB_PERF_CTL", env, 1), 0);
    const pid_t pid = rb_start(dir, "run", BASE, NULL);
    unsetenv("TB_PERF_CTL");
    char got[512] = "";
    size_t n = 0;
    int status = 0, done = 0;
    for (int i = 0; i < 6000 && !done; i++) {
        done = waitpid(pid, &status, WNOHANG) == pid; /* then one more read drains what is left */
        struct pollfd p = {cfd, POLLIN, 0};
        if (poll(&p, 1, 10) <= 0) continue;
        const ssize_t k = read(cfd, got + n, sizeof got - 1 - n);
        if (k <= 0) { /* end of file: bench closed the fifo and is exiting */
            rb_sleep_ms(10.0);
            continue;
        }
        for (ssize_t j = 0; j < k; j++)
            if (got[n + (size_t)j] == '\n' && afd >= 0) cr_assert_eq(write(afd, "ack\n", 4), 4);
        n += (size_t)k;
        got[n] = '\0';
    }
    cr_assert(done, "bench did not finish within 60 s (commands so far: %s)", got);
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    close(cfd);
    if (afd >= 0) close(afd);
    return strdup(got);
}

static void make_fifos(const char *dir, char **ctl, char **ack)
{
    *ctl = rb_path(dir, "ctl");
    *ack = rb_path(dir, "ack");
    cr_assert_eq(mkfifo(*ctl, 0600), 0);
    cr_assert_eq(mkfifo(*ack, 0600), 0);
}

Test(perfctl, enable_and_disable_around_each_repeat_with_acks)
{
    char *dir = tu_mkdtemp("perfctl"), *ctl, *ack, *env = NULL;
    make_fifos(dir, &ctl, &ack);
    cr_assert(asprintf(&env, "%s,%s", ctl, ack) > 0);
    int code;
    char *got = fake_perf(dir, env, ctl, ack, &code);
    char *err = rb_stderr(dir, "run");
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    cr_assert_str_eq(got, "enable\ndisable\nenable\ndisable\n", "stderr: %s", err);
    cr_assert(strstr(err, "TB_PERF_CTL") == NULL, "no warning expected: %s", err);
    char *rows = rb_path(dir, "rows.jsonl");
    cr_assert_eq(rb_count_lines(rows), 1, "the run wrote its row");
    free(rows), free(got), free(err), free(env), free(ctl), free(ack);
    tu_rm_rf(dir);
    free(dir);
}

Test(perfctl, without_an_ack_fifo_nothing_waits)
{
    char *dir = tu_mkdtemp("perfctl"), *ctl, *ack;
    make_fifos(dir, &ctl, &ack);
    int code;
    char *got = fake_perf(dir, ctl, ctl, NULL, &code);
    cr_assert_eq(code, 0);
    cr_assert_str_eq(got, "enable\ndisable\nenable\ndisable\n");
    free(got), free(ctl), free(ack);
    tu_rm_rf(dir);
    free(dir);
}

Test(perfctl, no_reader_warns_once_and_runs)
{
    char *dir = tu_mkdtemp("perfctl"), *ctl, *ack, *env = NULL;
    make_fifos(dir, &ctl, &ack);
    cr_assert(asprintf(&env, "%s,%s", ctl, ack) > 0);
    cr_assert_eq(setenv("TB_PERF_CTL", env, 1), 0);
    const int code = rb_run(dir, "run", BASE, NULL);
    unsetenv("TB_PERF_CTL");
    char *err = rb_stderr(dir, "run");
    cr_assert_eq(code, 0, "%s", err);
    const char *w = strstr(err, "no reader");
    cr_assert(w != NULL, "%s", err);
    cr_assert(strstr(w + 1, "TB_PERF_CTL") == NULL, "one warning, not one per call: %s", err);
    char *rows = rb_path(dir, "rows.jsonl");
    cr_assert_eq(rb_count_lines(rows), 1);
    free(rows), free(err), free(env), free(ctl), free(ack);
    tu_rm_rf(dir);
    free(dir);
}

Test(perfctl, real_perf_counts_only_the_enabled_windows)
{
    if (system("perf stat --delay=-1 --control fifo:/dev/null -e task-clock true >/dev/null 2>&1") != 0)
        cr_skip_test("perf with --control is not usable here");
    char *dir = tu_mkdtemp("perfctl"), *ctl, *ack, *cmd = NULL;
    make_fifos(dir, &ctl, &ack);
    cr_assert(asprintf(&cmd, "cd '%s' && TB_PERF_CTL='%s,%s' perf stat --delay=-1 --control 'fifo:%s,%s' -e task-clock -- "
                             "'%s' --data synthetic --synthetic-samples 256,64 --mllog none --out rows.jsonl --quiet "
                             "--plan throughput --batch 8 --steps 3 --warmup 1 --repeat 2 > perf.out 2>&1",
                      dir, ctl, ack, ctl, ack, TB_BENCH_EXE) > 0);
    const int rc = system(cmd);
    char *p = rb_path(dir, "perf.out");
    char *out = tu_read_file(p, NULL);
    cr_assert(out && rc == 0, "perf stat failed (%d): %s", rc, out ? out : "");
    int enabled = 0;
    for (const char *c = out; (c = strstr(c, "Events enabled")); c++) enabled++;
    cr_assert_eq(enabled, 2, "%s", out);
    cr_assert(strstr(out, "TB_PERF_CTL") == NULL, "%s", out);
    free(out), free(p), free(cmd), free(ctl), free(ack);
    tu_rm_rf(dir);
    free(dir);
}

/* TB_PERF_CTL naming a regular file: bench opened it for writing and put "enable\ndisable\n..." over its
 * first bytes (a results file lost its first row). Now anything but a FIFO is one warning and ignored;
 * the file is unchanged and the run goes on. So is an ack path that is not a FIFO. */
Test(perfctl, a_regular_file_is_not_written)
{
    char *dir = tu_mkdtemp("perfctl"), *env = NULL;
    static const char text[] = "{\"schema\":1,\"run_id\":\"first\"}\n{\"schema\":1,\"run_id\":\"second\"}\n";
    rb_write(dir, "pc.jsonl", text);
    char *pc = rb_path(dir, "pc.jsonl");
    cr_assert_eq(setenv("TB_PERF_CTL", pc, 1), 0);
    const int code = rb_run(dir, "run", BASE, NULL);
    unsetenv("TB_PERF_CTL");
    char *err = rb_stderr(dir, "run"), *got = tu_read_file(pc, NULL);
    cr_assert_eq(code, 0, "%s", err);
    cr_assert_str_eq(got, text, "the file was written");
    cr_assert(strstr(err, "TB_PERF_CTL") && strstr(err, "not a FIFO"), "no warning: %s", err);
    int lines = 0;
    for (const char *c = err; *c; c++) lines += *c == '\n';
    cr_assert_eq(lines, 1, "one warning, not one per call: %s", err);
    free(got), free(err);
    /* A real control fifo with a regular file as the ack path: commands flow, nothing waits on the file. */
    char *ctl, *ack;
    make_fifos(dir, &ctl, &ack);
    cr_assert(asprintf(&env, "%s,%s", ctl, pc) > 0);
    int code2;
    got = fake_perf(dir, env, ctl, NULL, &code2);
    err = rb_stderr(dir, "run");
    cr_assert_eq(code2, 0, "%s", err);
    cr_assert_str_eq(got, "enable\ndisable\nenable\ndisable\n", "stderr: %s", err);
    cr_assert(strstr(err, "ack") && strstr(err, "not a FIFO"), "no warning about the ack path: %s", err);
    char *again = tu_read_file(pc, NULL);
    cr_assert_str_eq(again, text, "the ack file changed");
    free(again), free(got), free(err), free(env), free(ctl), free(ack), free(pc);
    tu_rm_rf(dir);
    free(dir);
}
