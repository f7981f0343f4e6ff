/* test_reliability_util.h — helpers for the reliability suites (test_resume.c, test_killrun.c): start
 * `bench` (TB_BENCH_EXE) as a child in a directory, wait for it (or for a checkpoint, or for its signal
 * handler) or signal it, read its result rows, and compare the tensors of two checkpoints bitwise; and
 * finish an in-process bench_config, as bench's option checks see it (rb_finish_config).
 *
 * Not a test framework: every helper fails the calling test through Criterion's assertions. Static
 * functions only. Threading: none; Criterion runs each test in its own process.
 */
#ifndef TB_TEST_RELIABILITY_UTIL_H
#define TB_TEST_RELIABILITY_UTIL_H

#include "test_util.h"

#include "calibrate.h"
#include "checkpoint.h"
#include "json.h"
#include "machine.h"
#include "optim.h"
#include "outputs.h"
#include "run.h"
#include "status.h"
#include "tpool.h"
#include "workload.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RB_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The small, fast configuration every reliability run shares: the MLP on a small synthetic set. */
#define RB_BASE "--data", "synthetic", "--synthetic-samples", "1000,200", "--batch", "8", "--mllog", "none", \
                "--out", "results.jsonl", "--quiet"

/* Starts TB_BENCH_EXE with base then extra (NULL-terminated lists) in dir; stdout and stderr go to
 * dir/<tag>.out and dir/<tag>.err. The child gets default SIGINT/SIGTERM handling whatever ours is. */
static __attribute__((unused)) pid_t rb_start(const char *dir, const char *tag, const char *const *base,
                                              const char *const *extra)
{
    const char *argv[80];
    int argc = 0;
    argv[argc++] = TB_BENCH_EXE;
    /* Checked before each store, so too many arguments fail the test rather than overrun argv. */
    for (int i = 0; base && base[i]; i++) {
        cr_assert_lt(argc, 79, "more than 78 arguments");
        argv[argc++] = base[i];
    }
    for (int i = 0; extra && extra[i]; i++) {
        cr_assert_lt(argc, 79, "more than 78 arguments");
        argv[argc++] = extra[i];
    }
    argv[argc] = NULL;
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/%s.out", dir, tag);
    snprintf(err, sizeof err, "%s/%s.err", dir, tag);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || chdir(dir) != 0) _exit(127);
        dup2(fo, 1), dup2(fe, 2);
        close(fo), close(fe);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(TB_BENCH_EXE, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits for a child: its exit status, or −signal if a signal killed it. */
static __attribute__((unused)) int rb_wait(pid_t pid)
{
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    cr_assert(WIFEXITED(status));
    cr_assert_neq(WEXITSTATUS(status), 127, "could not run %s (is the bench target built?)", TB_BENCH_EXE);
    return WEXITSTATUS(status);
}

/* Runs bench to completion in dir; returns its exit status. */
static __attribute__((unused)) int rb_run(const char *dir, const char *tag, const char *const *base,
                                          const char *const *extra)
{
    return rb_wait(rb_start(dir, tag, base, extra));
}

/* rb_run with the file-size limit (RLIMIT_FSIZE) at limit bytes and SIGXFSZ's disposition sigxfsz in the child
 * (SIG_DFL: as a shell's `ulimit -f` leaves it, whatever survives a crossing is bench's own doing). */
static __attribute__((unused)) int rb_run_with_file_limit_sig(const char *dir, const char *tag, const char *const *base,
                                                              const char *const *extra, rlim_t limit,
                                                              void (*sigxfsz)(int))
{
    struct rlimit old, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = limit;
    void (*old_handler)(int) = signal(SIGXFSZ, sigxfsz);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const pid_t pid = rb_start(dir, tag, base, extra);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    return rb_wait(pid);
}

/* rb_run with the file-size limit (RLIMIT_FSIZE) at limit bytes and SIGXFSZ ignored: a write past it fails
 * with EFBIG, as on a full disk. */
static __attribute__((unused)) int rb_run_with_file_limit(const char *dir, const char *tag, const char *const *base,
                                                          const char *const *extra, rlim_t limit)
{
    return rb_run_with_file_limit_sig(dir, tag, base, extra, limit, SIG_IGN);
}

/* dir/name, malloc'd. */
static __attribute__((unused)) char *rb_path(const char *dir, const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

/* The child's stderr (tag.err in dir), malloc'd ("" if missing). */
static __attribute__((unused)) char *rb_stderr(const char *dir, const char *tag)
{
    char name[96];
    snprintf(name, sizeof name, "%s.err", tag);
    char *p = rb_path(dir, name);
    char *s = tu_read_file(p, NULL);
    free(p);
    return s ? s : strdup("");
}

/* Lines in a file (0 if it does not exist). */
static __attribute__((unused)) int rb_count_lines(const char *path)
{
    char *s = tu_read_file(path, NULL);
    int n = 0;
    for (const char *c = s; c && *c; c++) n += *c == '\n';
    free(s);
    return n;
}

/* The last line of the results file of dir, parsed (the caller frees it with json_value_free). */
static __attribute__((unused)) struct json_value *rb_last_row(const char *dir)
{
    char *p = rb_path(dir, "results.jsonl");
    char *s = tu_read_file(p, NULL);
    cr_assert_not_null(s, "no results file %s", p);
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '\n') n--;
    size_t a = n;
    while (a > 0 && s[a - 1] != '\n') a--;
    struct json_value *v = NULL;
    cr_assert_eq(json_parse(s + a, n - a, &v), TB_OK, "last row of %s is not JSON: %s", p, tb_error_get());
    free(s);
    free(p);
    return v;
}

/* Asserts that the last row of dir's results resumed from step (figures.resumed_from_step). */
static __attribute__((unused)) void rb_assert_resumed_from(const char *dir, long step)
{
    struct json_value *r = rb_last_row(dir);
    cr_assert_eq(json_get_number(r, "figures.resumed_from_step", -1), step, "the last row resumed from step %g",
                 json_get_number(r, "figures.resumed_from_step", -1));
    json_value_free(r);
}

/* The MLP as the RB_BASE runs build it, with arrays for one checkpoint's tensors. */
struct rb_model {
    struct model m;
    int spp;            /* optimizer state copies (Adam: 2) */
    float *p, *b, *o;   /* (n_params), (n_buffers), (spp · n_params) */
};

static __attribute__((unused)) void rb_model_init(struct rb_model *r)
{
    memset(r, 0, sizeof *r);
    struct workload_opts wo = {0};
    wo.in_h = 28, wo.in_w = 28, wo.in_c = 1, wo.classes = 10;
    wo.dropout = wo.drop_connect = -1.0f;
    const struct workload *w = workload_find("mnist-mlp");
    cr_assert_not_null(w);
    cr_assert_eq(w->build(&r->m, &wo), TB_OK, "%s", tb_error_get());
    r->spp = optim_state_per_param(OPTIM_ADAM);
    r->p = tu_fvec(r->m.n_params);
    r->b = tu_fvec(r->m.n_buffers);
    r->o = tu_fvec((size_t)r->spp * r->m.n_params);
}

static __attribute__((unused)) void rb_model_free(struct rb_model *r)
{
    model_free(&r->m);
    free(r->p), free(r->b), free(r->o);
}

/* Loads a checkpoint (with its optimizer state if with_opt) into r; fails the test if it cannot. */
static __attribute__((unused)) void rb_load(struct rb_model *r, const char *path, int with_opt)
{
    memset(r->p, 0, r->m.n_params * sizeof(float));
    memset(r->o, 0, (size_t)r->spp * r->m.n_params * sizeof(float));
    int st = with_opt ? checkpoint_load_state(path, &r->m, r->p, r->b, r->o, r->spp)
                      : checkpoint_load(path, &r->m, r->p, r->b);
    cr_assert_eq(st, TB_OK, "cannot load %s: %s", path, tb_error_get());
}

/* Asserts that two checkpoints hold bitwise the same params, buffers and (with_opt) optimizer state. */
static __attribute__((unused)) void rb_assert_same_tensors(const char *a, const char *b, int with_opt)
{
    struct rb_model x, y;
    rb_model_init(&x);
    rb_model_init(&y);
    rb_load(&x, a, with_opt);
    rb_load(&y, b, with_opt);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < x.m.n_params; i++)
        if (memcmp(&x.p[i], &y.p[i], sizeof(float)) != 0 && !diff++) first = i;
    cr_assert_eq(diff, 0, "%s and %s: %zu params differ, first at %zu (%.9g vs %.9g)", a, b, diff, first,
                 (double)x.p[first], (double)y.p[first]);
    cr_assert_eq(memcmp(x.b, y.b, x.m.n_buffers * sizeof(float)), 0, "%s and %s: buffers differ", a, b);
    if (with_opt)
        cr_assert_eq(memcmp(x.o, y.o, (size_t)x.spp * x.m.n_params * sizeof(float)), 0,
                     "%s and %s: optimizer state differs", a, b);
    rb_model_free(&x);
    rb_model_free(&y);
}

/* The newest complete checkpoint step in dir, or -1. */
static __attribute__((unused)) long rb_newest(const char *dir)
{
    long steps[1];
    int n = 0;
    if (checkpoint_dir_list(dir, steps, 1, &n) != TB_OK || n == 0) {
        tb_error_clear();
        return -1;
    }
    return steps[0];
}

/* Writes text to dir/name. */
static __attribute__((unused)) void rb_write(const char *dir, const char *name, const char *text)
{
    char *p = rb_path(dir, name);
    tu_write_file(p, text, strlen(text));
    free(p);
}

/* Every line of dir/results.jsonl parsed into rows[0..max) (a line that is not JSON fails the test);
 * returns the count. The caller frees each with json_value_free. */
static __attribute__((unused)) int rb_rows(const char *dir, struct json_value **rows, int max)
{
    char *p = rb_path(dir, "results.jsonl");
    char *s = tu_read_file(p, NULL);
    int n = 0;
    for (char *line = s, *end; line && *line; line = end + 1) {
        end = strchr(line, '\n');
        cr_assert_not_null(end, "%s: a torn last line", p);
        cr_assert_lt(n, max, "%s: more than %d rows", p, max);
        cr_assert_eq(json_parse(line, (size_t)(end - line), &rows[n]), TB_OK, "%s row %d: %s", p, n + 1, tb_error_get());
        n++;
    }
    free(s);
    free(p);
    return n;
}

/* Sleeps ms milliseconds. */
static __attribute__((unused)) void rb_sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000.0), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Polls (every ms) until dir holds a checkpoint newer than `after` or the child exits; returns the step
 * seen, or -1 if the child exited first (its status then in *exited). Gives up after 60 s. */
static __attribute__((unused)) long rb_wait_checkpoint(pid_t pid, const char *dir, long after, int *exited)
{
    *exited = 0;
    for (int i = 0; i < 60000; i++) {
        const long s = rb_newest(dir);
        if (s > after) return s;
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            *exited = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
            return -1;
        }
        rb_sleep_ms(1.0);
    }
    cr_assert_fail("no checkpoint in %s after 60 s", dir);
    return -1;
}

/* Polls (every ms) until the child catches sig (its handler is installed: /proc/PID/status SigCgt), or
 * it exits; returns 1, or 0 if it exited first (its status then in *exited). Gives up after 60 s. */
static __attribute__((unused)) int rb_wait_handler(pid_t pid, int sig, int *exited)
{
    *exited = 0;
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    for (int i = 0; i < 60000; i++) {
        char *s = tu_read_file(p, NULL);
        const char *c = s ? strstr(s, "SigCgt:") : NULL;
        const unsigned long long mask = c ? strtoull(c + 7, NULL, 16) : 0;
        free(s);
        if (mask >> (sig - 1) & 1) return 1;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            *exited = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
            return 0;
        }
        rb_sleep_ms(1.0);
    }
    cr_assert_fail("%s: signal %d not caught after 60 s", p, sig);
    return 0;
}

/* bench_config for backend on workload with the options (name, value pairs; value NULL for a flag; the list
 * NULL-terminated, as RB_ARGS makes it), finished: bench_config_finish's status (its message in tb_error_get). */
static __attribute__((unused)) int rb_finish_config(const char *backend, const char *workload, const char *const *opts)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "backend", backend), TB_OK, "%s", tb_error_get());
    cr_assert_eq(bench_config_set(&c, "workload", workload), TB_OK, "%s", tb_error_get());
    for (int i = 0; opts[i]; i += 2)
        cr_assert_eq(bench_config_set(&c, opts[i], opts[i + 1]), TB_OK, "--%s: %s", opts[i], tb_error_get());
    return bench_config_finish(&c);
}

/* What bench does with a command line's run options before any work (main_bench.c, then session_open): each
 * "--name [value]" of args (NULL-terminated; bench_options' names, a value after each that takes one) set on
 * a fresh configuration in order, bench_config_finish, and where outputs is set outputs_check. Returns the
 * first status other than TB_OK (its message in tb_error_get), else TB_OK. For refusals checked in this
 * process: a bench spawned under ASan costs 0.3-0.5 CPU-s before it reads an option. */
static __attribute__((unused)) int rb_config_args(struct bench_config *c, const char *const *args, int outputs)
{
    int n;
    const struct bench_option *t = bench_options(&n);
    bench_config_defaults(c);
    for (int i = 0; args[i]; i++) {
        int k = 0;
        while (k < n && !(args[i][0] == '-' && args[i][1] == '-' && !strcmp(t[k].name, args[i] + 2))) k++;
        cr_assert_lt(k, n, "'%s' is not one of bench's run options", args[i]);
        cr_assert(!t[k].has_arg || args[i + 1], "%s needs a value", args[i]);
        const int st = bench_config_set(c, t[k].name, t[k].has_arg ? args[++i] : NULL);
        if (st != TB_OK) return st;
    }
    const int st = bench_config_finish(c);
    return st == TB_OK && outputs ? outputs_check(c) : st;
}

/* What this process writes to stdout and stderr between rb_streams_begin and rb_streams_end (a temporary file
 * takes both): to see that an in-process call printed nothing beside its message, as bench would not have. */
static __attribute__((unused)) FILE *rb_streams_file;
static __attribute__((unused)) int rb_streams_saved[2] = {-1, -1};

static __attribute__((unused)) void rb_streams_begin(void)
{
    fflush(stdout), fflush(stderr);
    rb_streams_file = tmpfile();
    cr_assert_not_null(rb_streams_file);
    rb_streams_saved[0] = dup(STDOUT_FILENO), rb_streams_saved[1] = dup(STDERR_FILENO);
    cr_assert(rb_streams_saved[0] >= 0 && rb_streams_saved[1] >= 0);
    dup2(fileno(rb_streams_file), STDOUT_FILENO), dup2(fileno(rb_streams_file), STDERR_FILENO);
}

/* Restores stdout and stderr; returns what they received (malloc'd). */
static __attribute__((unused)) char *rb_streams_end(void)
{
    fflush(stdout), fflush(stderr);
    dup2(rb_streams_saved[0], STDOUT_FILENO), dup2(rb_streams_saved[1], STDERR_FILENO);
    close(rb_streams_saved[0]), close(rb_streams_saved[1]);
    const long n = ftell(rb_streams_file);
    cr_assert_geq(n, 0);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    rewind(rb_streams_file);
    s[fread(s, 1, (size_t)n, rb_streams_file)] = '\0';
    fclose(rb_streams_file);
    rb_streams_file = NULL;
    return s;
}

/* A calibration of this machine at path, as `bench --calibrate` writes it, with the sgemm ceilings given (GFLOP/s)
 * and plausible others in place of measured ones: bench applies any calibration of this CPU model, core count
 * and OpenBLAS kernel set (calibrate_matches), and measuring takes 6 CPU-s under ASan, for tests about what a
 * run does with ceilings (the calibration's own tests measure: test_calibrate.c, test_probes.c). The kernel set
 * is the one bench runs (its --version, run in dir), which this process's OpenBLAS need not have chosen. No GPU
 * figures (as a file written before GPUs were calibrated). */
static __attribute__((unused)) void rb_write_calibration(const char *dir, const char *path, double sgemm_1t,
                                                         double sgemm_all)
{
    cr_assert_eq(rb_run(dir, "version", RB_ARGS("--version"), NULL), 0);
    char *vp = rb_path(dir, "version.out"), *v = tu_read_file(vp, NULL);
    const char *k = v ? strstr(v, "OpenBLAS kernels: ") : NULL;
    cr_assert_not_null(k, "bench --version names no kernel set: %s", v ? v : "(no output)");
    k += strlen("OpenBLAS kernels: ");
    struct machine_info mi;
    machine_info_read(&mi);
    struct calibration c = {.sgemm_n = 2048, .sgemm_1t_gflops = sgemm_1t, .sgemm_all_gflops = sgemm_all,
                            .all_threads = tpool_cpus(), .triad_1t_gbs = 12.0, .triad_all_gbs = 20.0,
                            .triad_elements = 1L << 22, .cores = mi.n_cores};
    c.barrier_all_us = c.all_threads > 1 ? 1.5 : 0.0; /* as calibrate_measure: none on one thread */
    snprintf(c.blas_core, sizeof c.blas_core, "%.*s", (int)strcspn(k, " \n"), k);
    snprintf(c.cpu_model, sizeof c.cpu_model, "%s", mi.cpu_model);
    snprintf(c.timestamp, sizeof c.timestamp, "%s", mi.timestamp);
    cr_assert_eq(calibrate_write(&c, path), TB_OK, "%s", tb_error_get());
    free(v), free(vp);
}

#endif
