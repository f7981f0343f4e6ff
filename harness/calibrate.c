/* calibrate.c — sgemm and triad ceilings (see calibrate.h). */
#define _GNU_SOURCE
#include "calibrate.h"

#include "clock.h"
#include "json.h"
#include "machine.h"
#include "outputs.h"
#include "regular_file.h"
#include "status.h"
#include "tpool.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern void openblas_set_num_threads(int);
extern int openblas_get_num_threads(void);

/* Best GFLOP/s of a few n×n sgemm calls on `threads` OpenBLAS threads (one untimed call first). */
static double sgemm_gflops(const float *a, const float *b, float *c, int n, int threads)
{
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double best = 0.0;
    const double t_start = tb_now_s();
    for (int r = 0; r < 5 && (r < 2 || tb_now_s() - t_start < 1.5); r++) {
        double t0 = tb_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * (double)n * n / (tb_now_s() - t0) * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

struct triad_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go, abort;
    pthread_barrier_t bar;
};

struct triad_task {
    double *a, *b, *c;
    long lo, hi;
    int reps;
    struct triad_gate *gate;
    double best_s;
};

/* Each thread first-touches its own slice (so pages live near it), waits at the gate until every
 * thread exists, then all run the triad in lock step: a barrier before and after each repetition
 * makes the time that of the slowest thread. */
static void *triad_worker(void *arg)
{
    struct triad_task *t = arg;
    for (long i = t->lo; i < t->hi; i++) t->a[i] = 0.0, t->b[i] = 1.0, t->c[i] = 2.0;
    pthread_mutex_lock(&t->gate->mu);
    while (!t->gate->go && !t->gate->abort) pthread_cond_wait(&t->gate->cv, &t->gate->mu);
    int abort = t->gate->abort;
    pthread_mutex_unlock(&t->gate->mu);
    if (abort) return NULL;
    const double s = 3.0;
    double best = 1e30;
    for (int r = 0; r < t->reps; r++) {
        pthread_barrier_wait(&t->gate->bar);
        double t0 = tb_now_s();
        double *restrict a = t->a;
        const double *restrict b = t->b, *restrict c = t->c;
        for (long i = t->lo; i < t->hi; i++) a[i] = b[i] + s * c[i];
        pthread_barrier_wait(&t->gate->bar);
        double dt = tb_now_s() - t0;
        if (dt < best) best = dt;
    }
    t->best_s = best;
    return NULL;
}

/* One barrier of a pinned pool of `threads` threads (the threads backend's pool: tpool), in µs: the best of a
 * few runs of back-to-back barriers, so a wait for a late thread is left out and what remains is the cost a
 * schedule pays per barrier on top of its imbalance. The pool pins its caller, and tpool_destroy puts the
 * caller's mask back before OpenBLAS runs again. */
enum { BARRIER_REPS = 20000 };
static void barrier_task(void *arg, int ith, int nth)
{
    (void)ith, (void)nth;
    for (int i = 0; i < BARRIER_REPS; i++) tpool_barrier(arg);
}

static double barrier_us(int threads)
{
    struct tpool *p = tpool_create(threads, 1);
    double best = 0.0;
    if (p) {
        tpool_run(p, barrier_task, p); /* untimed: wakes and places every worker */
        for (int r = 0; r < 5; r++) {
            const double t0 = tb_now_s();
            tpool_run(p, barrier_task, p);
            const double us = (tb_now_s() - t0) * 1e6 / BARRIER_REPS;
            if (best == 0.0 || us < best) best = us;
        }
        tpool_destroy(p);
    }
    return best;
}

/* Best triad bandwidth in GB/s over n elements with `threads` threads; 0 on failure. */
static double triad_gbs(double *a, double *b, double *c, long n, int threads)
{
    enum { MAX_T = 256 };
    if (threads > MAX_T) threads = MAX_T;
    pthread_t th[MAX_T];
    struct triad_task task[MAX_T];
    struct triad_gate gate = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    int started = 1;
    for (int k = 0; k < threads; k++) task[k] = (struct triad_task){a, b, c, n * k / threads, n * (k + 1) / threads, 8, &gate, 0.0};
    for (int k = 1; k < threads && started == k; k++)
        if (pthread_create(&th[k], NULL, triad_worker, &task[k]) == 0) started++;
    int ok = started == threads && pthread_barrier_init(&gate.bar, NULL, (unsigned)threads) == 0;
    pthread_mutex_lock(&gate.mu);
    gate.go = ok, gate.abort = !ok;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    if (ok) triad_worker(&task[0]);
    for (int k = 1; k < started; k++) pthread_join(th[k], NULL);
    if (!ok) return 0.0;
    pthread_barrier_destroy(&gate.bar);
    return 24.0 * (double)n / task[0].best_s * 1e-9;
}

int calibrate_measure(struct calibration *c, int sgemm_n)
{
    memset(c, 0, sizeof *c);
    struct machine_info mi;
    machine_info_read(&mi);
    snprintf(c->cpu_model, sizeof c->cpu_model, "%s", mi.cpu_model);
    snprintf(c->blas_core, sizeof c->blas_core, "%s", mi.blas_core);
    snprintf(c->timestamp, sizeof c->timestamp, "%s", mi.timestamp);
    const int n = sgemm_n > 0 ? sgemm_n : 2048;
    c->all_threads = tpool_cpus();
    c->usable_cores = c->all_threads;
    c->cores = mi.n_cores;
    c->sgemm_n = n;

    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
    float *d = malloc((size_t)n * n * sizeof *d);
    if (!a || !b || !d) {
        free(a), free(b), free(d);
        return tb_error_set(TB_ENOMEM, "calibrate: out of memory for %d×%d sgemm", n, n);
    }
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f;
    const int saved_threads = openblas_get_num_threads();
    c->sgemm_1t_gflops = sgemm_gflops(a, b, d, n, 1);
    c->sgemm_all_gflops = sgemm_gflops(a, b, d, n, c->all_threads);
    /* OpenBLAS may cap the count below what we asked for; record what it ran with. */
    c->all_threads = openblas_get_num_threads();
    openblas_set_num_threads(saved_threads);
    free(a), free(b), free(d);

    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = 32L << 20;
    long elems = 4 * llc / (long)sizeof(double);
    if (elems < (1L << 22)) elems = 1L << 22;
    if (elems > (1L << 24)) elems = 1L << 24; /* 128 MiB an array: VMs report odd cache sizes */
    double *x = malloc((size_t)elems * sizeof *x), *y = malloc((size_t)elems * sizeof *y);
    double *z = malloc((size_t)elems * sizeof *z);
    if (!x || !y || !z) {
        free(x), free(y), free(z);
        return tb_error_set(TB_ENOMEM, "calibrate: out of memory for the triad arrays (3 × %ld doubles)", elems);
    }
    c->triad_elements = elems;
    c->triad_1t_gbs = triad_gbs(x, y, z, elems, 1);
    c->triad_all_gbs = triad_gbs(x, y, z, elems, c->all_threads);
    free(x), free(y), free(z);
    /* Last: the pool pins this thread while it lives, and OpenBLAS's threads must not inherit that. */
    c->barrier_all_us = c->all_threads > 1 ? barrier_us(c->all_threads) : 0.0;
    return TB_OK;
}

/* A calibration is about 1 KB; a bound no calibration reaches, so that one padded or pretty-printed is read
 * whole (8 KB were read, and a longer file was cut and refused). */
enum { CAL_MAX = 1 << 20 };

/* Reads path whole (at most CAL_MAX bytes) and parses it into *v; TB_EIO where it cannot be read, TB_EFORMAT
 * where it is not JSON, each naming path. */
static int cal_parse_file(const char *path, struct json_value **v)
{
    *v = NULL;
    const char *why = NULL;
    FILE *f = regular_fopen(path, &why);
    if (!f) return tb_error_set(TB_EIO, "calibration %s: %s", path, why);
    char *buf = malloc(CAL_MAX + 1);
    if (!buf) {
        fclose(f);
        return tb_error_set(TB_ENOMEM, "calibration %s: out of memory", path);
    }
    const size_t n = fread(buf, 1, CAL_MAX + 1, f);
    fclose(f);
    if (n > CAL_MAX) {
        free(buf);
        return tb_error_set(TB_EFORMAT, "calibration %s: over %d bytes, not a calibration file", path, CAL_MAX);
    }
    buf[n] = '\0';
    const int st = json_parse(buf, n, v);
    free(buf);
    if (st != TB_OK) return tb_error_set(TB_EFORMAT, "calibration %s: %s", path, tb_error_get());
    return TB_OK;
}

int calibrate_check_target(const char *path)
{
    int st = outputs_check_replaced("--calibration", path, 1);
    if (st != TB_OK) return st;
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size == 0) return TB_OK; /* nothing there to lose */
    /* Any machine's calibration may be replaced; anything else (results rows, say) is someone's data. */
    struct json_value *v = NULL;
    const int is_cal = cal_parse_file(path, &v) == TB_OK && !strcmp(json_get_str(v, "kind", ""), "calibration");
    json_value_free(v);
    tb_error_clear();
    if (!is_cal)
        return tb_error_set(TB_EIO, "--calibration %s: not a calibration file (no \"kind\": \"calibration\"), so it is "
                                    "not replaced; give another path", path);
    return TB_OK;
}

int calibrate_write(const struct calibration *c, const char *path)
{
    int st = calibrate_check_target(path);
    if (st != TB_OK) return st;
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "schema", 1);
    json_key_str(&b, "kind", "calibration");
    json_key_str(&b, "timestamp", c->timestamp);
    json_key_str(&b, "cpu_model", c->cpu_model);
    json_key_int(&b, "cores", c->cores);
    if (c->usable_cores > 0) json_key_int(&b, "usable_cores", c->usable_cores);
    json_key_str(&b, "blas_core", c->blas_core);
    json_key_int(&b, "sgemm_n", c->sgemm_n);
    json_key_double(&b, "sgemm_1t_gflops", c->sgemm_1t_gflops);
    json_key_double(&b, "sgemm_all_gflops", c->sgemm_all_gflops);
    json_key_int(&b, "all_threads", c->all_threads);
    json_key_double(&b, "triad_1t_gbs", c->triad_1t_gbs);
    json_key_double(&b, "triad_all_gbs", c->triad_all_gbs);
    json_key_int(&b, "triad_elements", c->triad_elements);
    if (c->barrier_all_us > 0.0) json_key_double(&b, "barrier_all_us", c->barrier_all_us);
    calibrate_gpu_write_json(&c->gpu, &b);
    json_end_object(&b);
    st = json_buf_status(&b);
    if (st != TB_OK) {
        json_buf_free(&b);
        return tb_error_set(st, "calibrate: cannot format %s", path);
    }
    st = outputs_write_text(path, json_buf_str(&b));
    json_buf_free(&b);
    if (st != TB_OK) return tb_error_set(st, "calibrate: %s", tb_error_get());
    return TB_OK;
}

double calibrate_json_in_range(const struct json_value *v, const char *key, double lo, double hi)
{
    const double x = json_get_number(v, key, 0);
    return x >= lo && x <= hi ? x : 0.0;
}

int calibrate_read(const char *path, struct calibration *c)
{
    memset(c, 0, sizeof *c);
    struct json_value *v = NULL;
    int st = cal_parse_file(path, &v);
    if (st != TB_OK) return st;
    /* Every ceiling a row divides by, where the file has it: a negative, zero or absurd one gave negative or
     * 1e301 "peak shares". The bounds hold any machine this measures (a GFLOP/s to an exaFLOP/s, a MB/s to a
     * PB/s); the thread and core counts are counts. */
    static const char *const ceil[] = {"sgemm_1t_gflops", "sgemm_all_gflops", "triad_1t_gbs", "triad_all_gbs"};
    static const char *const counts[] = {"all_threads", "cores", "usable_cores"};
    char bad[160] = "";
    for (size_t k = 0; k < sizeof ceil / sizeof *ceil && !bad[0]; k++) {
        const struct json_value *x = json_get(v, ceil[k]);
        if (!x) continue;
        if (x->type != JSON_NUMBER) snprintf(bad, sizeof bad, "%s is not a number", ceil[k]);
        else if (!(x->number >= 1e-3 && x->number <= 1e9))
            snprintf(bad, sizeof bad, "%s %g is not a measured ceiling (want 0.001 to 1e9)", ceil[k], x->number);
    }
    for (size_t k = 0; k < sizeof counts / sizeof *counts && !bad[0]; k++) {
        const struct json_value *x = json_get(v, counts[k]);
        if (x && !(x->type == JSON_NUMBER && x->number >= 1 && x->number <= 1e6 && x->number == floor(x->number)))
            snprintf(bad, sizeof bad, "%s is not a count of 1 or more", counts[k]);
    }
    c->sgemm_n = (int)calibrate_json_in_range(v, "sgemm_n", 1, 1 << 20);
    c->sgemm_1t_gflops = json_get_number(v, "sgemm_1t_gflops", 0);
    c->sgemm_all_gflops = json_get_number(v, "sgemm_all_gflops", 0);
    c->all_threads = (int)calibrate_json_in_range(v, "all_threads", 1, 1e6);
    c->triad_1t_gbs = json_get_number(v, "triad_1t_gbs", 0);
    c->triad_all_gbs = json_get_number(v, "triad_all_gbs", 0);
    c->triad_elements = (long)calibrate_json_in_range(v, "triad_elements", 1, 1e15);
    c->barrier_all_us = json_get_number(v, "barrier_all_us", 0);
    if (!(c->barrier_all_us >= 0.0 && c->barrier_all_us < 1e6)) c->barrier_all_us = 0.0; /* NaN, negative: unknown */
    c->cores = (int)calibrate_json_in_range(v, "cores", 1, 1e6);
    c->usable_cores = (int)calibrate_json_in_range(v, "usable_cores", 1, 1e6);
    /* As the file has them: compared with this machine's own (calibrate_matches cleans what it prints). */
    snprintf(c->cpu_model, sizeof c->cpu_model, "%s", json_get_str(v, "cpu_model", "unknown"));
    snprintf(c->blas_core, sizeof c->blas_core, "%s", json_get_str(v, "blas_core", "unknown"));
    tb_text_clean(c->timestamp, sizeof c->timestamp, json_get_str(v, "timestamp", "unknown"));
    st = calibrate_gpu_read_json(v, &c->gpu);
    /* Not a calibration unless it says so and holds every ceiling a row divides by: a missing one read as 0
     * gave rows "sgemm_peak_gflops": 0 and a report of "0.0 GFLOP/s on 2 threads". */
    const int is_cal = !strcmp(json_get_str(v, "kind", ""), "calibration");
    const char *missing = NULL;
    for (size_t k = 0; k < sizeof ceil / sizeof *ceil && !missing; k++)
        if (!json_get(v, ceil[k])) missing = ceil[k];
    json_value_free(v);
    if (bad[0]) return tb_error_set(TB_EFORMAT, "calibration %s: %s", path, bad);
    if (!is_cal)
        return tb_error_set(TB_EFORMAT, "calibration %s: not a calibration file (no \"kind\": \"calibration\")", path);
    if (missing)
        return tb_error_set(TB_EFORMAT, "calibration %s: no %s (a calibration holds sgemm_1t_gflops, sgemm_all_gflops, "
                                        "triad_1t_gbs and triad_all_gbs)", path, missing);
    if (st != TB_OK) return tb_error_set(TB_EFORMAT, "calibration %s: %s", path, tb_error_get());
    return TB_OK;
}

int calibrate_matches(const struct calibration *c, const char *cpu_model, int cores, const char *blas_core,
                      char *why, size_t n)
{
    /* The file's names as one line of text in the message (a newline or a terminal escape in the file split and
     * coloured the warning); compared as they are. */
    char a[sizeof c->cpu_model * 4], b[sizeof c->cpu_model * 4];
    if (strcmp(c->cpu_model, cpu_model))
        snprintf(why, n, "measured on \"%s\", this is \"%s\"", (tb_text_clean(a, sizeof a, c->cpu_model), a),
                 (tb_text_clean(b, sizeof b, cpu_model), b));
    else if (c->cores != cores)
        snprintf(why, n, "measured on %d core%s, this machine has %d", c->cores, c->cores == 1 ? "" : "s", cores);
    else if (strcmp(c->blas_core, blas_core))
        snprintf(why, n, "measured with the OpenBLAS kernel set %s, this run uses %s",
                 (tb_text_clean(a, sizeof a, c->blas_core), a), (tb_text_clean(b, sizeof b, blas_core), b));
    else return 1;
    return 0;
}

int calibrate_sane(const struct calibration *c, char *why, size_t n)
{
    const int threads = c->all_threads > 0 ? c->all_threads : c->cores;
    if (threads <= 1 || (c->sgemm_all_gflops >= 1.2 * c->sgemm_1t_gflops && c->triad_all_gbs >= c->triad_1t_gbs))
        return 1;
    snprintf(why, n, "all threads barely beat one (sgemm %.1f GFLOP/s on %d threads against %.1f on one, triad %.2f "
                     "GB/s against %.2f): other processes were probably using the other cores", c->sgemm_all_gflops,
             threads, c->sgemm_1t_gflops, c->triad_all_gbs, c->triad_1t_gbs);
    return 0;
}

/* 1, with why (n bytes), where c was measured on fewer cores than this process may use: calibrated under taskset or
 * a narrower cpuset, its all-thread ceilings are of those cores, and a run on more took them as its own (a 2-thread
 * run's sgemm share of a 1-core ceiling, twice what it is). A file from before the count was kept says nothing. */
static int calibrate_narrower(const struct calibration *c, char *why, size_t n)
{
    const int now = tpool_cpus();
    if (c->usable_cores <= 0 || c->usable_cores >= now) return 0;
    snprintf(why, n, "measured on %d of the machine's %d cores (a narrower CPU affinity: taskset or a cpuset), this "
                     "process may use %d", c->usable_cores, c->cores, now);
    return 1;
}

int calibrate_check_current(const char *path, const char *cpu_model, int cores, const char *blas_core,
                            const char *gpu_name, struct calibration *c, char *why, size_t n)
{
    const int st = calibrate_read(path, c);
    if (st == TB_EIO) return st;
    if (st != TB_OK) snprintf(why, n, "%s", tb_error_get());
    else if (calibrate_matches(c, cpu_model, cores, blas_core, why, n) && calibrate_sane(c, why, n) &&
             !calibrate_narrower(c, why, n)) {
        if (!gpu_name || calibrate_gpu_matches(&c->gpu, gpu_name)) return TB_OK;
        snprintf(why, n, "it holds no ceilings of this machine's GPU (%s)", gpu_name);
    }
    return tb_error_set(TB_EINVAL, "%s", why);
}

int calibrate_load_matching(const char *path, const char *cpu_model, int cores, const char *blas_core,
                            struct calibration *c)
{
    int st = calibrate_read(path, c);
    if (st == TB_EIO) return st;
    char why[400];
    if (st != TB_OK) snprintf(why, sizeof why, "%s", tb_error_get());
    else if (calibrate_matches(c, cpu_model, cores, blas_core, why, sizeof why)) {
        /* Kept (its one-thread ceilings still stand), but said once per file: its all-thread ceilings are too
         * low, so shares of them overstate what a run achieved. */
        static char warned_busy[512];
        if (!calibrate_sane(c, why, sizeof why) && strcmp(warned_busy, path)) {
            fprintf(stderr, "bench: warning: calibration %s: %s; calibrate again on a quiet machine "
                            "(bench --calibrate)\n", path, why);
            snprintf(warned_busy, sizeof warned_busy, "%s", path);
        } else if (calibrate_narrower(c, why, sizeof why) && strcmp(warned_busy, path)) {
            fprintf(stderr, "bench: warning: calibration %s: %s: its all-thread ceilings are too low for a run on "
                            "more threads; calibrate again without the affinity (bench --calibrate)\n", path, why);
            snprintf(warned_busy, sizeof warned_busy, "%s", path);
        }
        return TB_OK;
    }
    /* Once per file per process: a suite opens a session per run, and one line says it. */
    static char warned[512];
    if (strcmp(warned, path)) {
        fprintf(stderr, "bench: warning: calibration %s ignored: %s (run bench --calibrate on this machine)\n", path, why);
        snprintf(warned, sizeof warned, "%s", path);
    }
    memset(c, 0, sizeof *c);
    return tb_error_set(TB_EINVAL, "calibration %s: %s", path, why);
}
