/* test_results.c — result rows: append + read back (torn, garbage, non-object and newer-schema
 * lines skipped with a warning naming file:line), concurrent appends from several processes, CSV
 * export; plus the machine facts written into every row and the progress line. */
#define _GNU_SOURCE /* posix_openpt, grantpt, unlockpt, ptsname: the progress line on a pseudo-terminal */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "json.h"
#include "machine.h"
#include "progress.h"
#include "results.h"
#include "status.h"

static char tmp_dir[64];

static void make_tmp_dir(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/tb_results_XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_tmp_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    cr_assert_eq(system(cmd), 0);
}

static void path_in_tmp(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmp_dir, name);
}

static void append_raw(const char *path, const char *bytes)
{
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f);
    fputs(bytes, f);
    fclose(f);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Runs results_read_rows with stderr captured into a file; returns the captured text. */
struct collect {
    int n_rows;
    long lines[64];
    double ids[64];
    int stop_after;
};

static int collect_row(const struct json_value *row, long line_no, void *ctx)
{
    struct collect *c = ctx;
    if (c->n_rows < 64) {
        c->lines[c->n_rows] = line_no;
        c->ids[c->n_rows] = json_get_number(row, "id", -1);
    }
    c->n_rows++;
    return c->stop_after && c->n_rows >= c->stop_after ? TB_EINTR : TB_OK;
}

static int read_capturing_stderr(const char *path, struct collect *c, char *err, size_t err_size)
{
    char err_path[128];
    path_in_tmp(err_path, sizeof err_path, "stderr.txt");
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int st = results_read_rows(path, collect_row, c);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    snprintf(err, err_size, "%s", read_file(err_path));
    return st;
}

static void make_row(char *out, size_t size, int id, const char *backend, double ips)
{
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "schema_version", RESULTS_SCHEMA_VERSION);
    json_key_int(&b, "id", id);
    json_key_object(&b, "config");
    json_key_str(&b, "backend", backend);
    json_end_object(&b);
    json_key_object(&b, "figures");
    json_key_double(&b, "images_per_s", ips);
    json_end_object(&b);
    json_end_object(&b);
    cr_assert_eq(json_buf_status(&b), TB_OK);
    snprintf(out, size, "%s", json_buf_str(&b));
    json_buf_free(&b);
}

/* A file of another kind (`bench compare old.jsonl notes.txt`) gave a warning a line: the first five skipped rows
 * are named, the rest counted in one line with their span. */
Test(results, many_skipped_rows_are_counted_in_one_line, .init = make_tmp_dir, .fini = remove_tmp_dir)
{
    char path[128], row[256], err[4096];
    path_in_tmp(path, sizeof path, "notes.jsonl");
    make_row(row, sizeof row, 1, "cpu", 100.0);
    cr_assert_eq(results_append_row(path, row), TB_OK, "%s", tb_error_get()); /* line 1 */
    for (int i = 0; i < 20; i++) append_raw(path, i % 2 ? "[1]\n" : "not json\n"); /* lines 2-21 */
    cr_assert_eq(results_append_row(path, row), TB_OK, "%s", tb_error_get()); /* line 22 */
    struct collect c = {0};
    cr_assert_eq(read_capturing_stderr(path, &c, err, sizeof err), TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.n_rows, 2);
    int lines = 0;
    for (const char *q = err; *q; q++) lines += *q == '\n';
    cr_assert_eq(lines, 6, "five named and one count:\n%s", err);
    char want[200];
    snprintf(want, sizeof want, "%s:5: skipped a row that is not a JSON object", path);
    cr_assert(strstr(err, want) != NULL, "%s", err);
    snprintf(want, sizeof want, "%s: skipped 15 more rows that are not result rows (lines 7-21)", path);
    cr_assert(strstr(err, want) != NULL, "%s", err);
}

Test(results, append_and_read_back_skipping_bad_lines, .init = make_tmp_dir, .fini = remove_tmp_dir)
{
    char path[128], row[256], err[4096];
    path_in_tmp(path, sizeof path, "deep/er/rows.jsonl"); /* parents do not exist yet */
    make_row(row, sizeof row, 1, "cpu", 100.0);
    cr_assert_eq(results_append_row(path, row), TB_OK, "%s", tb_error_get());
    make_row(row, sizeof row, 2, "threads", 200.0);
    strcat(row, "\n"); /* a caller's trailing newline is not doubled */
    cr_assert_eq(results_append_row(path, row), TB_OK);
    append_raw(path, "this is not json\n");          /* line 3 */
    append_raw(path, "\n");                          /* line 4: blank, silent */
    append_raw(path, "[1,2,3]\n");                   /* line 5: not an object */
    append_raw(path, "{\"schema_version\":99,\"id\":9}\n"); /* line 6: newer schema */
    make_row(row, sizeof row, 3, "mirrored", NAN);   /* line 7 */
    cr_assert_eq(results_append_row(path, row), TB_OK);
    append_raw(path, "{\"id\":4,\"config\":{\"backend\":\"ip"); /* line 8: torn */

    struct collect c = {0};
    int st = read_capturing_stderr(path, &c, err, sizeof err);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.n_rows, 3, "good rows: got %d", c.n_rows);
    cr_assert_eq(c.lines[0], 1);
    cr_assert_eq(c.lines[1], 2);
    cr_assert_eq(c.lines[2], 7);
    cr_assert_eq(c.ids[2], 3.0);
    char want[160];
    const long warned[] = {3, 5, 6, 8};
    for (int i = 0; i < 4; i++) {
        snprintf(want, sizeof want, "%s:%ld:", path, warned[i]);
        cr_assert(strstr(err, want) != NULL, "no warning for %s in:\n%s", want, err);
    }
    snprintf(want, sizeof want, "%s:4:", path);
    cr_assert(strstr(err, want) == NULL, "blank line must not warn:\n%s", err);
    cr_assert(strstr(err, "torn") != NULL, "%s", err);

    /* Appending after a torn line first ends it, so the new row is not swallowed. */
    cr_assert_eq(results_append_row(path, "{\"id\":5}"), TB_OK);
    memset(&c, 0, sizeof c);
    read_capturing_stderr(path, &c, err, sizeof err);
    cr_assert_eq(c.n_rows, 4, "got %d", c.n_rows);
    cr_assert_eq(c.lines[3], 9);
    snprintf(want, sizeof want, "%s:8: skipped a malformed row", path);
    cr_assert(strstr(err, want) != NULL, "the completed fragment is now malformed:\n%s", err);

    /* A complete, valid last row that lacks its newline is still treated as torn... */
    append_raw(path, "{\"id\":6}");
    memset(&c, 0, sizeof c);
    read_capturing_stderr(path, &c, err, sizeof err);
    cr_assert_eq(c.n_rows, 4);
    /* ...until the next append ends its line. */
    cr_assert_eq(results_append_row(path, "{\"id\":7}"), TB_OK);
    memset(&c, 0, sizeof c);
    read_capturing_stderr(path, &c, err, sizeof err);
    cr_assert_eq(c.n_rows, 6);
    cr_assert_eq(c.ids[4], 6.0);
    cr_assert_eq(c.ids[5], 7.0);
    cr_assert(strstr(err, "torn") == NULL, "%s", err);
    /* Raw file check: exactly one newline between rows, none doubled. */
    const char *text = read_file(path);
    cr_assert(strstr(text, "\n\n\n") == NULL);
    cr_assert(strstr(text, "{\"id\":5}\n{\"id\":6}\n{\"id\":7}\n") != NULL, "%s", text);
}

Test(results, append_rejects_bad_rows, .init = make_tmp_dir, .fini = remove_tmp_dir)
{
    char path[128];
    path_in_tmp(path, sizeof path, "rows.jsonl");
    cr_assert_eq(results_append_row(path, "{\"a\":1}\n{\"b\":2}"), TB_EINVAL);
    cr_assert_eq(results_append_row(path, ""), TB_EINVAL);
    cr_assert_eq(results_append_row(path, "\n"), TB_EINVAL);
    cr_assert_eq(results_append_row(NULL, "{}"), TB_EINVAL);
    cr_assert_eq(access(path, F_OK), -1, "nothing written for rejected rows");
    cr_assert_eq(results_append_row("/proc/definitely/not/here.jsonl", "{}"), TB_EIO);
    struct collect c = {0};
    cr_assert_eq(results_read_rows(path, collect_row, &c), TB_EIO);
    cr_assert(strstr(tb_error_get(), path) != NULL);
}

Test(results, callback_can_stop, .init = make_tmp_dir, .fini = remove_tmp_dir)
{
    char path[128], row[256];
    path_in_tmp(path, sizeof path, "rows.jsonl");
    for (int i = 0; i < 5; i++) {
        make_row(row, sizeof row, i, "cpu", i);
        cr_assert_eq(results_append_row(path, row), TB_OK);
    }
    struct collect c = {.stop_after = 2};
    cr_assert_eq(results_read_rows(path, collect_row, &c), TB_EINTR);
    cr_assert_eq(c.n_rows, 2);
}

Test(results, concurrent_appends_never_interleave, .init = make_tmp_dir, .fini = remove_tmp_dir,
     .timeout = 60)
{
    char path[128];
    path_in_tmp(path, sizeof path, "rows.jsonl");
    enum { N_PROCS = 4, N_ROWS = 25, PAD = 6000 }; /* rows longer than a pipe buffer / page */
    for (int p = 0; p < N_PROCS; p++) {
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            static char row[PAD + 128];
            for (int i = 0; i < N_ROWS; i++) {
                int n = snprintf(row, sizeof row, "{\"id\":%d,\"pad\":\"", p * 1000 + i);
                memset(row + n, 'a' + p, PAD);
                snprintf(row + n + PAD, sizeof row - (size_t)(n + PAD), "\"}");
                if (results_append_row(path, row) != TB_OK)
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (int p = 0; p < N_PROCS; p++) {
        int status;
        cr_assert(wait(&status) > 0);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    char err[4096];
    struct collect c = {0};
    cr_assert_eq(read_capturing_stderr(path, &c, err, sizeof err), TB_OK);
    cr_assert_eq(c.n_rows, N_PROCS * N_ROWS);
    cr_assert_str_eq(err, "", "no line may be damaged:\n%s", err);
}

/* A disk that fills mid-row (here a file size limit, SIGXFSZ ignored so write() fails with EFBIG)
 * must leave the file as it was: no torn fragment without its newline. */
Test(results, failed_append_leaves_the_file_as_it_was, .init = make_tmp_dir, .fini = remove_tmp_dir)
{
    char path[128];
    path_in_tmp(path, sizeof path, "rows.jsonl");
    cr_assert_eq(results_append_row(path, "{\"id\":1}"), TB_OK);
    struct stat before;
    cr_assert_eq(stat(path, &before), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {(rlim_t)before.st_size + 100, (rlim_t)before.st_size + 100};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
            _exit(2);
        static char row[8192];
        int n = snprintf(row, sizeof row, "{\"id\":2,\"pad\":\"");
        memset(row + n, 'x', 4000);
        snprintf(row + n + 4000, sizeof row - (size_t)(n + 4000), "\"}");
        _exit(results_append_row(path, row) == TB_EIO ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the append must fail with TB_EIO");
    struct stat after;
    cr_assert_eq(stat(path, &after), 0);
    cr_assert_eq(after.st_size, before.st_size, "the file grew from %lld to %lld bytes",
                 (long long)before.st_size, (long long)after.st_size);
    cr_assert_str_eq(read_file(path), "{\"id\":1}\n");
}

/* A character device (/dev/null as --out) takes the row: no fsync, which it does not support. */
Test(results, append_to_dev_null_succeeds)
{
    cr_assert_eq(results_append_row("/dev/null", "{\"id\":1}"), TB_OK, "%s", tb_error_get());
}

Test(results, csv_export, .init = make_tmp_dir, .fini = remove_tmp_dir)
{
    char path[128], csv[128], row[256];
    path_in_tmp(path, sizeof path, "rows.jsonl");
    path_in_tmp(csv, sizeof csv, "plots/out.csv");
    make_row(row, sizeof row, 1, "cpu", 1234.5);
    cr_assert_eq(results_append_row(path, row), TB_OK);
    cr_assert_eq(results_append_row(path, "{\"id\":2,\"config\":{\"backend\":\"a,\\\"b\\\"\"},"
                                          "\"figures\":{\"images_per_s\":null},\"ok\":true,"
                                          "\"list\":[1,\"x\"]}"),
                 TB_OK);
    make_row(row, sizeof row, 3, "threads", 0.1);
    cr_assert_eq(results_append_row(path, row), TB_OK);
    append_raw(path, "garbage\n");
    const char *cols[] = {"id", "config.backend", "figures.images_per_s", "ok", "list", "missing"};
    char err[4096];
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int st = results_export_csv(path, csv, cols, 6);
    dup2(saved, STDERR_FILENO);
    close(saved);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    snprintf(err, sizeof err, "%s", read_file(csv));
    cr_assert_str_eq(err, "id,config.backend,figures.images_per_s,ok,list,missing\n"
                          "1,cpu,1234.5,,,\n"
                          "2,\"a,\"\"b\"\"\",,1,\"[1,\"\"x\"\"]\",\n"
                          "3,threads,0.1,,,\n");
    cr_assert_eq(results_export_csv(path, csv, cols, 0), TB_EINVAL);
    char missing[128];
    path_in_tmp(missing, sizeof missing, "missing.jsonl");
    cr_assert_eq(results_export_csv(missing, csv, cols, 6), TB_EIO);
    /* A failed export leaves the previous CSV in place and no temporary file behind. */
    cr_assert_str_eq(read_file(csv), err);
    char ls[256];
    snprintf(ls, sizeof ls, "test $(ls '%s/plots' | wc -l) -eq 1", tmp_dir);
    cr_assert_eq(system(ls), 0);
}

Test(machine, facts_read_and_written)
{
    setenv("TB_GIT_COMMIT", "abc123def456", 1);
    struct machine_info m;
    cr_assert_eq(machine_info_read(&m), TB_OK);
    cr_assert_geq(m.n_cores, 1);
    cr_assert_gt(m.mem_gib, 0.0);
    cr_assert_gt(strlen(m.cpu_model), 0);
    cr_assert_gt(strlen(m.os), 0);
    cr_assert_str_eq(m.commit, "abc123def456");
    cr_assert(strstr(m.blas, "OpenBLAS") != NULL, "blas: %s", m.blas);
    cr_assert_gt(strlen(m.blas_core), 0);
    cr_assert_eq(strlen(m.timestamp), 20, "timestamp %s", m.timestamp);
    cr_assert_eq(m.timestamp[10], 'T');
    cr_assert_eq(m.timestamp[19], 'Z');

    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "schema_version", RESULTS_SCHEMA_VERSION);
    machine_info_write_json(&m, &b);
    json_end_object(&b);
    cr_assert_eq(json_buf_status(&b), TB_OK);
    struct json_value *v = NULL;
    cr_assert_eq(json_parse(json_buf_str(&b), b.len, &v), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(json_get_str(v, "machine.cpu_model", ""), m.cpu_model);
    cr_assert_eq(json_get_number(v, "machine.n_cores", 0), (double)m.n_cores);
    cr_assert_str_eq(json_get_str(v, "build.commit", ""), "abc123def456");
    cr_assert_str_eq(json_get_str(v, "build.blas", ""), m.blas);
    cr_assert_str_eq(json_get_str(v, "build.compiler", ""), m.compiler);
    cr_assert_str_eq(json_get_str(v, "timestamp", ""), m.timestamp);
    cr_assert_not_null(json_get(v, "build.cflags"));
    json_value_free(v);
    json_buf_free(&b);

    unsetenv("TB_GIT_COMMIT");
    cr_assert_eq(machine_info_read(&m), TB_OK);
    cr_assert_neq(strcmp(m.commit, "abc123def456"), 0);
    cr_assert_gt(strlen(m.commit), 0);
}

/* A 100,000-step progress line labelled label, drawn (progress_force(force)) on fd as stderr; stderr put back. */
static void progress_into(int fd, int force, const char *label)
{
    fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    progress_force(force);
    struct progress p;
    progress_init(&p, 100000, label);
    for (long s = 1; s <= 100000; s++)
        progress_update(&p, s, 0.4321, 12345.0);
    progress_finish(&p);
    progress_force(-1);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

static void run_progress(int force, char *out, size_t size)
{
    char tmpl[] = "/tmp/tb_progress_XXXXXX";
    int fd = mkstemp(tmpl);
    cr_assert(fd >= 0);
    progress_into(fd, force, "train");
    close(fd);
    snprintf(out, size, "%s", read_file(tmpl));
    unlink(tmpl);
}

/* Issue 27 item 1a: a run whose stderr is not a terminal (piped, logged) still shows it is alive: plain
 * lines, the first after the first step, never a carriage return. */
Test(progress, plain_lines_when_not_a_terminal)
{
    static char out[1 << 16];
    run_progress(2, out, sizeof out);
    cr_assert(strncmp(out, "train step 1/100000  loss 0.4321", 32) == 0, "the first step gives a line: %s", out);
    cr_assert(strchr(out, '\r') == NULL, "never a carriage return: %s", out);
    cr_assert(out[strlen(out) - 1] == '\n', "whole lines: %s", out);
}

Test(progress, forced_on_draws_and_clears)
{
    static char out[1 << 16];
    run_progress(1, out, sizeof out);
    cr_assert(strstr(out, "\rtrain step ") != NULL, "%s", out);
    cr_assert(strstr(out, "/100000  loss 0.4321  12,345 img/s  ETA ") != NULL, "%s", out);
    cr_assert(strstr(out, "step 100000/100000") != NULL, "the last step is always drawn: %s", out);
    size_t n = strlen(out);
    cr_assert(n > 2 && out[n - 1] == '\r', "finish must end with a carriage return");
    cr_assert(strchr(out, '\n') == NULL, "never a newline");
    /* At most ~8 redraws a second: a fast loop must not draw every step. */
    int draws = 0;
    for (const char *s = out; (s = strstr(s, "\rtrain")) != NULL; s++)
        draws++;
    cr_assert_lt(draws, 1000, "drew %d times", draws);
}

/* Every redrawn line in out (the text between carriage returns) has at most `most` characters. */
static void assert_lines_fit(const char *out, int most)
{
    int draws = 0;
    for (const char *s = out; *s;) {
        const size_t len = strcspn(s, "\r");
        cr_assert_leq((int)len, most, "a line of %zu characters where %d fit: \"%.*s\"", len, most, (int)len, s);
        draws += len > 0;
        s += len + (s[len] == '\r');
    }
    cr_assert_gt(draws, 0, "nothing drawn");
}

/* Probe environ: on a terminal narrower than the line (20 columns) each redraw wrapped, and the '\r' went back to
 * the start of its last row only, so every redraw left rows behind. The line is cut to the terminal's width less one:
 * the window's size where stderr is a terminal, else $COLUMNS. */
Test(progress, redrawn_line_fits_a_narrow_terminal)
{
    const int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert_geq(master, 0);
    cr_assert_eq(grantpt(master), 0);
    cr_assert_eq(unlockpt(master), 0);
    const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    cr_assert_geq(slave, 0);
    struct termios raw;
    cr_assert_eq(tcgetattr(slave, &raw), 0);
    cfmakeraw(&raw);
    cr_assert_eq(tcsetattr(slave, TCSANOW, &raw), 0);
    const struct winsize ws = {.ws_row = 24, .ws_col = 20};
    cr_assert_eq(ioctl(slave, TIOCSWINSZ, &ws), 0);
    progress_into(slave, 1, "train threads/effnet-b0");
    close(slave);
    static char out[1 << 16];
    size_t n = 0;
    fcntl(master, F_SETFL, O_NONBLOCK);
    for (ssize_t r; n + 1 < sizeof out && (r = read(master, out + n, sizeof out - 1 - n)) > 0;) n += (size_t)r;
    out[n] = '\0';
    close(master);
    assert_lines_fit(out, 19);
    cr_assert(strstr(out, "\rstep 100000/100000") != NULL, "the step first, the label given up: %s", out);

    /* No terminal (a test's file), $COLUMNS says the width. */
    setenv("COLUMNS", "30", 1);
    run_progress(1, out, sizeof out);
    unsetenv("COLUMNS");
    assert_lines_fit(out, 29);
}

Test(progress, forced_off_is_silent)
{
    static char out[1 << 16];
    run_progress(0, out, sizeof out);
    cr_assert_str_eq(out, "");
}

/* Bench processes appending to one results file at once: a row half-written by another made this one start with a
 * '\n' it did not need, and the file held blank lines (55 in 1,500 rows of three writers). The append now waits for
 * the file's lock, under which another's row is whole. Here this process holds the lock over a half row while a child
 * appends. */
Test(results, an_append_waits_for_another_writers_row)
{
    char path[] = "/tmp/tb_results_lock_XXXXXX";
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(flock(fd, LOCK_EX), 0);
    cr_assert_eq(write(fd, "{\"a\":", 5), 5);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(results_append_row(path, "{\"b\":2}") == TB_OK ? 0 : 1);
    usleep(200 * 1000); /* the child is at the lock by now (without it, it has written) */
    cr_assert_eq(write(fd, "1}\n", 3), 3);
    cr_assert_eq(flock(fd, LOCK_UN), 0);
    close(fd);
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    cr_assert_str_eq(read_file(path), "{\"a\":1}\n{\"b\":2}\n");
    remove(path);
}
