/* test_row_threads.c — the threads a row says it ran on, and what a scaling sweep prints about its points
 * (probe C's findings 7, 8 and 11), with bench run as a child process (TB_BENCH_EXE).
 *
 * An inference row says the devices (cores) its forwards ran on, so that the report's roofline judges a
 * one-thread row against one thread's roofs even without a calibration; under a restricted CPU affinity
 * (taskset, a cpuset, mpirun --bind-to core) the ceiling share is taken of the threads the process may use,
 * not of the machine's cores; a batch sweep at fixed replicas prints no "efficiency" (it would be the
 * speed-up again) and its description is not that of its last point alone.
 * Each child runs in its own temp directory.
 */
#include "test_bench_proc.h"

#include "json.h"
#include "results.h"
#include "status.h"

#include <sched.h>
#include <unistd.h>

TestSuite(row_threads, .timeout = 60);

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* What the tests read of a row. */
struct row_facts {
    double devices_used, peak_threads, sgemm_peak_gflops;
    int n_cores, usable_cores;
    char cpu_model[128], blas_core[64];
};

static int keep_facts(const struct json_value *row, long line, void *ctx)
{
    (void)line;
    struct row_facts *f = ctx;
    f->devices_used = json_get_number(row, "figures.devices_used", -1);
    f->peak_threads = json_get_number(row, "figures.peak_threads", -1);
    f->sgemm_peak_gflops = json_get_number(row, "figures.sgemm_peak_gflops", -1);
    f->n_cores = (int)json_get_number(row, "machine.n_cores", 0);
    f->usable_cores = (int)json_get_number(row, "machine.usable_cores", 0);
    snprintf(f->cpu_model, sizeof f->cpu_model, "%s", json_get_str(row, "machine.cpu_model", "?"));
    snprintf(f->blas_core, sizeof f->blas_core, "%s", json_get_str(row, "build.blas_core", "?"));
    return TB_OK;
}

/* The facts of the last row of path. */
static struct row_facts last_row(const char *path)
{
    struct row_facts f = {.n_cores = -1};
    cr_assert_eq(results_read_rows(path, keep_facts, &f), TB_OK);
    cr_assert_neq(f.n_cores, -1, "no row in %s", path);
    return f;
}

/* Probe C 7: a cpu inference row without a calibration wrote neither devices_used nor peak_threads, so the
 * report took it for an all-threads run. */
Test(row_threads, an_inference_row_says_the_devices_it_ran_on)
{
    char *dir = tu_mkdtemp("rowthr-inf"), *out = NULL;
    cr_assert(asprintf(&out, "%s/rows.jsonl", dir) > 0);
    struct proc p;
    run_bench_in(dir,
                 ARGS("--plan", "inference", "--backend", "cpu", "--batch", "8", "--steps", "2", "--warmup", "1",
                      "--data", "synthetic", "--synthetic-samples", "64,32", "--mllog", "none", "--quiet", "--out",
                      out),
                 -1, &p);
    cr_assert_eq(p.code, 0, "exit %d", p.code);
    const struct row_facts r = last_row(out);
    cr_assert_eq(r.devices_used, 1.0, "a cpu inference row: devices_used %g", r.devices_used);
    tu_rm_rf(dir);
    free(dir), free(out);
    proc_free(&p);
}

/* The first CPU this process may run on, for a run narrowed to it alone; skips the test on a one-CPU machine. */
static int one_allowed_cpu(void)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) cr_skip_test("one CPU: no affinity narrower than the machine");
    cpu_set_t mine;
    CPU_ZERO(&mine);
    cr_assert_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine)) cpu++;
    return cpu;
}

/* Probe C 8: under `taskset -c 0` a threads run computed with one thread but took its ceiling share of the
 * machine's (all-thread) sgemm, peak_threads 2. */
Test(row_threads, the_ceiling_is_of_the_cores_the_process_may_use)
{
    const int cpu = one_allowed_cpu();
    char *dir = tu_mkdtemp("rowthr-aff"), *out = NULL, *cal = NULL;
    cr_assert(asprintf(&out, "%s/rows.jsonl", dir) > 0 && asprintf(&cal, "%s/cal.json", dir) > 0);
#define AFF_RUN(...)                                                                                                 \
    ARGS("--plan", "throughput", "--backend", "threads", "--batch", "8", "--steps", "2", "--warmup", "1", "--data",  \
         "synthetic", "--synthetic-samples", "64,32", "--mllog", "none", "--quiet", "--out", out, __VA_ARGS__)
    /* A first run says this machine's facts, for a calibration that matches it. */
    struct proc p;
    run_bench_in(dir, AFF_RUN("--seed", "1"), -1, &p);
    cr_assert_eq(p.code, 0);
    proc_free(&p);
    struct row_facts r = last_row(out);
    const int cores = r.n_cores;
    FILE *f = fopen(cal, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"cpu_model\":\"%s\",\"cores\":%d,"
            "\"blas_core\":\"%s\",\"sgemm_n\":2048,\"sgemm_1t_gflops\":100,\"sgemm_all_gflops\":%d,\"all_threads\":%d,"
            "\"triad_1t_gbs\":10,\"triad_all_gbs\":%d}\n",
            r.cpu_model, cores, r.blas_core, 100 * cores, cores, 10 * cores);
    fclose(f);
    run_bench_in(dir, AFF_RUN("--calibration", cal), cpu, &p);
#undef AFF_RUN
    cr_assert_eq(p.code, 0);
    proc_free(&p);
    r = last_row(out);
    cr_assert_eq(r.devices_used, 1.0, "one core: %g devices", r.devices_used);
    cr_assert_eq(r.peak_threads, 1.0, "one core allowed, peak_threads %g", r.peak_threads);
    cr_assert_eq(r.sgemm_peak_gflops, 100.0, "one thread's ceiling, not %g", r.sgemm_peak_gflops);
    tu_rm_rf(dir);
    free(dir), free(out), free(cal);
}

/* Probe C 11: a batch sweep on 2 mirrored devices printed "efficiency" 3.56 beside speed-up 3.56, and its
 * description ("2 devices, 16 samples each") was the last point's. */
Test(row_threads, a_batch_sweep_prints_no_efficiency_and_no_last_point_description)
{
    char *dir = tu_mkdtemp("rowthr-sweep"), *out = NULL;
    cr_assert(asprintf(&out, "%s/rows.jsonl", dir) > 0);
    struct proc p;
    run_bench_in(dir,
                 ARGS("--plan", "scaling", "--backend", "mirrored", "--devices", "2", "--batches", "8,16", "--steps",
                      "2", "--warmup", "1", "--data", "synthetic", "--synthetic-samples", "64,32", "--mllog", "none",
                      "--out", out),
                 -1, &p);
    const char *so = p.out;
    cr_assert_eq(p.code, 0, "exit %d: %s", p.code, so);
    const char *head = strstr(so, "trainbench scaling:");
    cr_assert_not_null(head, "%s", so);
    cr_assert(strstr(head, "efficiency") == NULL, "replicas fixed, yet an efficiency: %s", head);
    cr_assert(strstr(head, "fixed replicas") != NULL, "the sweep's kind is not named: %s", head);
    const char *eol = strchr(head, '\n');
    cr_assert_not_null(eol);
    /* The first point's 4 samples a device are named as well as the last's 8. */
    const char *span = strstr(head, "2 devices, 4 to 8 samples each");
    cr_assert(span && span < eol, "the description: %.*s", (int)(eol - head), head);
    tu_rm_rf(dir);
    free(dir), free(out);
    proc_free(&p);
}

/* Probe environ: under `taskset -c 0` on two cores, `--threads 2` and mirrored's `--devices 2` ran two threads on one
 * core unsaid (the note compared with the machine's cores, and only for --threads), and the row said n_cores 2 alone:
 * nothing in it told the run from one on both cores. The note compares with the cores the process may use, for
 * mirrored's devices too, and the row records them (machine.usable_cores). */
Test(row_threads, more_threads_than_the_allowed_cores_are_noted_and_the_row_says_the_allowed_cores)
{
    const int cpu = one_allowed_cpu();
    char *dir = tu_mkdtemp("rowthr-note"), *out = NULL;
    cr_assert(asprintf(&out, "%s/rows.jsonl", dir) > 0);
    static const char *const opt[2][2] = {{"--backend", "threads"}, {"--backend", "mirrored"}};
    static const char *const count[2][2] = {{"--threads", "2"}, {"--devices", "2"}};
    for (int k = 0; k < 2; k++) {
        struct proc p;
        run_bench_in(dir,
                     ARGS(opt[k][0], opt[k][1], count[k][0], count[k][1], "--batch", "8", "--steps", "2", "--data",
                          "synthetic", "--synthetic-samples", "64,32", "--mllog", "none", "--out", out),
                     cpu, &p);
        cr_assert_eq(p.code, 0, "%s", p.err);
        char want[64];
        snprintf(want, sizeof want, "bench: note: %s 2 on 1 core (of the machine's %d", count[k][0],
                 (int)sysconf(_SC_NPROCESSORS_ONLN));
        cr_assert(strstr(p.err, want), "no \"%s\" in: %s", want, p.err);
        proc_free(&p);
        const struct row_facts r = last_row(out);
        cr_assert_eq(r.usable_cores, 1, "%s: machine.usable_cores %d under one allowed core", opt[k][1], r.usable_cores);
        cr_assert_gt(r.n_cores, 1);
    }
    tu_rm_rf(dir);
    free(dir), free(out);
}
