/* test_calibrate.c — what counts as a calibration of this machine: a file without "kind": "calibration" or
 * without one of the four ceilings a row divides by is none (one warning, ignored by runs, measured again by
 * --calibrate-if-needed); one whose all-thread figures barely beat one thread's (measured on a busy machine)
 * is kept by runs with one warning, and --calibrate-if-needed measures it again. No measuring here: the
 * files are written by hand (bench --calibrate takes seconds; test_calibrate_gpu.c runs it once). */
#include "test_harness_util.h"

#include "calibrate.h"
#include "json.h"
#include "outputs.h"
#include "tpool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fields of a calibration of "Test CPU" (2 cores, Zen) before its ceilings. */
static const char head[] = "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"cpu_model\":\"Test CPU\","
                           "\"cores\":2,\"blas_core\":\"Zen\",\"sgemm_n\":2048,\"all_threads\":2";

/* Writes name with head, the ceilings given (",\"key\":value..."), and returns its path in p. */
static const char *cal_file(char *p, size_t n, const char *name, const char *ceilings)
{
    char text[1024];
    snprintf(text, sizeof text, "%s%s}\n", head, ceilings);
    th_write(th_path(p, n, name), text);
    return p;
}

static const char good[] = ",\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,\"triad_1t_gbs\":12,\"triad_all_gbs\":18";

/* What two runs of this process say loading the file at p as "Test CPU"'s calibration (each must keep it: TB_OK),
 * and in *lines how many lines that is. */
static char *load_twice(const char *p, struct calibration *c, int *lines)
{
    th_stderr_begin();
    const int st = calibrate_load_matching(p, "Test CPU", 2, "Zen", c);
    const int st2 = calibrate_load_matching(p, "Test CPU", 2, "Zen", c);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert_eq(st2, TB_OK, "%s", tb_error_get());
    *lines = 0;
    for (const char *e = err; *e; e++) *lines += *e == '\n';
    return err;
}

/* Probe B item 3: a file missing a ceiling read it as 0 (rows: "sgemm_peak_gflops": 0), and one without
 * "kind": "calibration" was read though --calibrate refuses to replace it. */
Test(calibrate, a_file_without_every_ceiling_or_its_kind_is_no_calibration, .init = th_setup, .fini = th_teardown)
{
    static const char *const ceilings[] = {"sgemm_1t_gflops", "sgemm_all_gflops", "triad_1t_gbs", "triad_all_gbs"};
    static const char *const values[] = {"60", "115", "12", "18"};
    char p[192];
    struct calibration c;
    cr_assert_eq(calibrate_read(cal_file(p, sizeof p, "good.json", good), &c), TB_OK, "%s", tb_error_get());
    for (int k = 0; k < 4; k++) {
        char text[512] = "";
        for (int j = 0; j < 4; j++)
            if (j != k) snprintf(text + strlen(text), sizeof text - strlen(text), ",\"%s\":%s", ceilings[j], values[j]);
        cr_assert_eq(calibrate_read(cal_file(p, sizeof p, "na.json", text), &c), TB_EFORMAT, "without %s: read",
                     ceilings[k]);
        cr_assert(strstr(tb_error_get(), "na.json") && strstr(tb_error_get(), ceilings[k]), "%s", tb_error_get());
    }
    char text[1024];
    snprintf(text, sizeof text, "{\"kind\":\"rows\",\"cpu_model\":\"Test CPU\",\"cores\":2,\"blas_core\":\"Zen\"%s}",
             good);
    th_write(th_path(p, sizeof p, "kr.json"), text);
    cr_assert_eq(calibrate_read(p, &c), TB_EFORMAT);
    cr_assert(strstr(tb_error_get(), "not a calibration file"), "%s", tb_error_get());
    snprintf(text, sizeof text, "{\"cpu_model\":\"Test CPU\",\"cores\":2,\"blas_core\":\"Zen\"%s}", good);
    th_write(th_path(p, sizeof p, "nokind.json"), text);
    cr_assert_eq(calibrate_read(p, &c), TB_EFORMAT);
    /* Runs and the report: one warning line, and no ceilings. */
    cal_file(p, sizeof p, "na.json", ",\"sgemm_1t_gflops\":60,\"triad_1t_gbs\":12,\"triad_all_gbs\":18");
    th_stderr_begin();
    int st = calibrate_load_matching(p, "Test CPU", 2, "Zen", &c);
    const int st2 = calibrate_load_matching(p, "Test CPU", 2, "Zen", &c);
    char *err = th_stderr_end();
    cr_assert_eq(st, TB_EINVAL);
    cr_assert_eq(st2, TB_EINVAL);
    cr_assert(strstr(err, "ignored") && strstr(err, "sgemm_all_gflops"), "%s", err);
    int lines = 0;
    for (const char *e = err; *e; e++) lines += *e == '\n';
    cr_assert_eq(lines, 1, "one warning line: %s", err);
    cr_assert(c.sgemm_1t_gflops == 0.0, "nothing of an ignored file is kept");
    free(err);
    /* --calibrate-if-needed measures again. */
    char why[400];
    cr_assert_eq(calibrate_check_current(p, "Test CPU", 2, "Zen", NULL, &c, why, sizeof why), TB_EINVAL);
    cr_assert(strstr(why, "sgemm_all_gflops"), "%s", why);
}

/* Probe B item 4: a calibration measured while other processes held the other cores (all threads barely beat
 * one) was kept for good by --calibrate-if-needed; so was a hand-edited all-thread sgemm of 0.001 GFLOP/s. */
Test(calibrate, a_busy_machine_s_calibration_is_measured_again, .init = th_setup, .fini = th_teardown)
{
    char p[192], why[400];
    struct calibration c;
    cr_assert_eq(calibrate_check_current(cal_file(p, sizeof p, "good.json", good), "Test CPU", 2, "Zen", NULL, &c,
                                         why, sizeof why),
                 TB_OK, "%s", why);
    cr_assert(calibrate_sane(&c, why, sizeof why));
    static const char *const busy[] = {
        ",\"sgemm_1t_gflops\":126.7,\"sgemm_all_gflops\":114.2,\"triad_1t_gbs\":20.65,\"triad_all_gbs\":41.47",
        ",\"sgemm_1t_gflops\":126.7,\"sgemm_all_gflops\":0.001,\"triad_1t_gbs\":20.65,\"triad_all_gbs\":41.47",
        ",\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,\"triad_1t_gbs\":20,\"triad_all_gbs\":11",
    };
    for (size_t k = 0; k < sizeof busy / sizeof *busy; k++) {
        cal_file(p, sizeof p, "busy.json", busy[k]);
        cr_assert_eq(calibrate_check_current(p, "Test CPU", 2, "Zen", NULL, &c, why, sizeof why), TB_EINVAL, "kept: %s",
                     busy[k]);
        cr_assert(strstr(why, "all threads barely beat one"), "%s", why);
        /* Runs keep its figures (one thread's still stand), with one warning line per file. */
        int lines;
        char *err = load_twice(p, &c, &lines);
        cr_assert(k > 0 || (strstr(err, "warning") && strstr(err, "barely beat one") && strstr(err, "busy.json")),
                  "%s", err);
        cr_assert_eq(lines, k == 0, "one warning line a file a process: %s", err);
        free(err);
    }
    /* One core: nothing to beat. */
    c = (struct calibration){.sgemm_1t_gflops = 60, .sgemm_all_gflops = 60, .all_threads = 1, .triad_1t_gbs = 12,
                             .triad_all_gbs = 12, .cores = 1};
    cr_assert(calibrate_sane(&c, why, sizeof why));
    /* Another machine's, or one without this machine's GPU: measured again too. */
    cal_file(p, sizeof p, "good.json", good);
    cr_assert_eq(calibrate_check_current(p, "Other CPU", 2, "Zen", NULL, &c, why, sizeof why), TB_EINVAL);
    cr_assert(strstr(why, "Other CPU"), "%s", why);
    cr_assert_eq(calibrate_check_current(p, "Test CPU", 2, "Zen", "NVIDIA H200", &c, why, sizeof why), TB_EINVAL);
    cr_assert(strstr(why, "NVIDIA H200"), "%s", why);
    cr_assert_eq(calibrate_check_current(th_path(p, sizeof p, "missing.json"), "Test CPU", 2, "Zen", NULL, &c, why,
                                         sizeof why),
                 TB_EIO);
}

/* Probe environ: `taskset -c 0 bench --calibrate` on 2 cores wrote all-thread ceilings of one core; --calibrate-if-needed
 * then kept it for a process allowed both, and a 2-thread run took the one core's sgemm as its ceiling (twice its
 * real share). The file now says how many cores its process could use; fewer than now is measured again, and a run
 * keeps it with one warning. */
Test(calibrate, a_calibration_of_a_narrower_affinity_is_measured_again, .init = th_setup, .fini = th_teardown)
{
    const int now = tpool_cpus();
    if (now < 2) cr_skip_test("this process may use one core: no affinity is narrower");
    char p[192], why[400], ceil[256];
    struct calibration c;
    snprintf(ceil, sizeof ceil, "%s,\"usable_cores\":%d", good, now - 1);
    cal_file(p, sizeof p, "narrow.json", ceil);
    cr_assert_eq(calibrate_check_current(p, "Test CPU", 2, "Zen", NULL, &c, why, sizeof why), TB_EINVAL, "kept");
    cr_assert(strstr(why, "affinity") && strstr(why, "this process may use"), "%s", why);
    int lines;
    char *err = load_twice(p, &c, &lines);
    cr_assert(strstr(err, "bench: warning: calibration") && strstr(err, "affinity"), "%s", err);
    cr_assert_eq(lines, 1, "one warning line a file a process: %s", err);
    free(err);
    /* As many cores as now, or more (calibrated on the whole machine, run under taskset): current. */
    snprintf(ceil, sizeof ceil, "%s,\"usable_cores\":%d", good, now);
    cal_file(p, sizeof p, "same.json", ceil);
    cr_assert_eq(calibrate_check_current(p, "Test CPU", 2, "Zen", NULL, &c, why, sizeof why), TB_OK, "%s", why);
    cr_assert_eq(c.usable_cores, now);
    /* Written and read back. */
    c.usable_cores = now - 1;
    cr_assert_eq(calibrate_write(&c, th_path(p, sizeof p, "rt.json")), TB_OK, "%s", tb_error_get());
    struct calibration r;
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
    cr_assert_eq(r.usable_cores, now - 1);
}

/* A run with a file missing a ceiling: one warning, and the row carries no share of it (it had
 * "sgemm_peak_gflops": 0 and the file's zero copied into "calibration"). */
Test(calibrate, a_run_ignores_a_file_without_every_ceiling, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    char cal[192], out[192], cmd[1024];
    cal_file(cal, sizeof cal, "na.json", ",\"sgemm_1t_gflops\":60,\"triad_1t_gbs\":12,\"triad_all_gbs\":18");
    th_path(out, sizeof out, "rows.jsonl");
    snprintf(cmd, sizeof cmd, "'%s' --plan throughput --data synthetic --synthetic-samples 64,32 --batch 8 --steps 2 "
             "--warmup 1 --calibration '%s' --out '%s' --mllog none --quiet 2>'%s/err.txt'", TB_BENCH_EXE, cal, out,
             th_dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char p[192];
    char *err = th_read(th_path(p, sizeof p, "err.txt"));
    cr_assert(strstr(err, "na.json ignored") && strstr(err, "sgemm_all_gflops"), "%s", err);
    free(err);
    char *row = th_read(out);
    cr_assert(strstr(row, "sgemm_peak") == NULL && strstr(row, "\"calibration\"") == NULL, "%s", row);
    free(row);
}

/* Two calibrations into one file at once measured each other's load. The second now waits for the first, saying so:
 * here this process holds the file's lock; bench is watched until it says it waits (up to 30 s: a loaded machine
 * starts it slowly), then stopped, and must not have touched the file. */
Test(calibrate, a_second_calibration_into_one_file_waits_for_the_first, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    char p[192], err[192];
    cal_file(p, sizeof p, "c.json", good); /* "Test CPU": not this machine's, so measured again once the lock is had */
    const int lock = outputs_lock_beside(p, NULL);
    cr_assert(lock >= 0, "no lock beside %s", p);
    th_path(err, sizeof err, "err.txt");
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        const int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644), fo = open("/dev/null", O_WRONLY);
        if (fe < 0 || fo < 0) _exit(127);
        dup2(fo, 1), dup2(fe, 2);
        execl(TB_BENCH_EXE, TB_BENCH_EXE, "--calibrate-if-needed", "--calibration", p, (char *)NULL);
        _exit(127);
    }
    char *said = NULL;
    int waiting = 0, exited = 0, status = 0;
    for (int i = 0; i < 300 && !waiting && !exited; i++) {
        usleep(100000);
        free(said);
        said = th_read(err);
        waiting = said && strstr(said, "bench: waiting for another bench calibrating into") && strstr(said, "c.json");
        exited = waitpid(pid, &status, WNOHANG) == pid;
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    close(lock);
    cr_assert(waiting && !exited, "bench did not wait (exited %d, status %d): %s", exited, status, said);
    free(said);
    char *text = th_read(p);
    cr_assert(text && strstr(text, "\"Test CPU\""), "the file was replaced while another held it: %s", text);
    free(text);
}
