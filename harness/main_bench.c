/* main_bench.c — the `bench` command: options → bench_config → a plan, a suite, a calibration, a
 * comparison or a report.
 *
 *   bench [options]                  one run (see --help; the option table lives in options.c)
 *   bench --suite FILE [options]     the runs of a suite file, options as defaults for every line
 *   bench --calibrate                measure the sgemm, bandwidth and GPU ceilings into results/calibration.json
 *   bench compare OLD.jsonl NEW.jsonl  (compare.c)
 *   bench export --csv FILE          (export.c)
 *   bench report [--in FILE] [--out-dir DIR]
 *
 * The only place that turns a status into an exit code: 0 success, 1 runtime failure (bad data file,
 * divergence, out of memory, a failed run in a suite), 2 usage error (unknown option or name, bad
 * number, a bad suite line).
 */
#define _GNU_SOURCE
#include "blas_core.h"
#include "build_info.h"
#include "calibrate.h"
#include "compare.h"
#include "export.h"
#include "machine.h"
#include "outputs.h"
#include "repo_dir.h"
#include "report.h"
#include "run.h"
#include "status.h"
#include "suite.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A run's failure, said by bench_end once every rank of an MPI job is there (bench_main's runs and suites). */
static char end_msg[512];

static void usage(FILE *f)
{
    fprintf(f, "usage: bench [options]\n"
               "       bench --suite FILE [options]\n"
               "       bench --calibrate | --calibrate-if-needed [--calibration FILE]\n"
               "       bench compare [--alpha P] [--ignore KEY[,KEY...]] OLD.jsonl NEW.jsonl\n"
               "       bench export --csv FILE [--in ROWS.jsonl ...]\n"
               "       bench report [--in FILE] [--out-dir DIR] [--plots DIR] [--calibration FILE] [--profile-dir DIR]\n"
               "                    [--gnuplot PATH]\n"
               "Trains a workload on an execution backend under a run plan and records what it measured.\n\n");
    int n;
    const struct bench_option *o = bench_options(&n);
    for (int k = 0; k < n; k++) {
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", o[k].name, o[k].has_arg ? " " : "", o[k].has_arg ? o[k].meta : "");
        if (strlen(head) > 23) fprintf(f, "  %s\n  %-23s ", head, "");
        else fprintf(f, "  %-23s ", head);
        for (const char *p = o[k].help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fprintf(f, "  %-23s ", "");
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-23s %s\n", "--suite FILE", "run every line of a suite file (see suites/default.suite)");
    fprintf(f, "  %-23s %s\n", "--calibrate",
            "measure sgemm GFLOP/s, triad GB/s and the GPU's ceilings into --calibration and exit");
    fprintf(f, "  %-23s %s\n", "", "(replaces only a calibration: never rows, a device or a FIFO)");
    fprintf(f, "  %-23s %s\n", "--calibrate-if-needed", "the same, unless --calibration is a whole calibration of this machine");
    fprintf(f, "  %-23s %s\n", "", "(measured while it was not busy)");
    fprintf(f, "  --blas-core auto|env|NAME\n  %-23s %s\n", "", "OpenBLAS kernel set: auto lets OpenBLAS detect the CPU (default;");
    fprintf(f, "  %-23s %s\n", "", "ignores an inherited OPENBLAS_CORETYPE; where OpenBLAS does not know the");
    fprintf(f, "  %-23s %s\n", "", "CPU and falls back to older kernels than its ISA runs, the best set for");
    fprintf(f, "  %-23s %s\n", "", "the ISA: SkylakeX for AVX-512, Haswell for AVX2), env keeps the environment's,");
    fprintf(f, "  %-23s %s\n", "", "OPENBLAS_NUM_THREADS included (auto and NAME load OpenBLAS with one thread),");
    fprintf(f, "  %-23s %s\n", "", "NAME forces one (e.g. Haswell, SkylakeX, Cooperlake)");
    fprintf(f, "  %-23s %s\n", "--list", "list backends (with the options only they take), devices and workloads");
    fprintf(f, "  --help, --version\n");
    fprintf(f, "\nAn option given twice counts with its last value (a script's later --steps overrides an earlier one).\n");
    fprintf(f, "\nEnvironment: TB_MEM_AVAILABLE=BYTES plans memory as if the machine had that much; TB_PAR_UNITS=N\n"
               "cuts the work as a machine of N cores would; TB_<change>=0 switches put a change's old path back for an\n"
               "A/B (docs/DESIGN.md lists them). Rows record every TB_*, OPENBLAS_* and OMP_* variable (config.env).\n");
    fprintf(f, "\nExit status: 0 ok, 1 runtime failure (data, divergence, memory, a failed suite run), 2 usage error,\n"
               "130 / 143 stopped by SIGINT / SIGTERM (after a checkpoint, with --checkpoint-dir).\n");
}

/* --list: the backends with the options only they take, the devices, the workloads. */
static void list_all(void)
{
    int n;
    const struct backend_entry *b = backend_registry(&n);
    printf("backends:\n");
    for (int k = 0; k < n; k++) {
        /* A backend tied to hardware this machine lacks (cuda without a GPU) is not offered as if it ran. */
        const int absent = b[k].caps.device && executor_device_probe(b[k].caps.device) != TB_OK;
        printf("  %-10s %s%s\n", b[k].name, b[k].summary, absent ? " (no device present: every run that trains or times exits 1)" : "");
        if (absent) tb_error_clear();
        if (!b[k].caps.options[0]) continue;
        int col = printf("  %-10s options:", "");
        for (const char *p = b[k].caps.options; *p;) {
            const int len = (int)strcspn(p, " ");
            if (col + len + 3 > 104) col = printf("\n  %-19s", "") - 1; /* wrap under the first option */
            col += printf(" --%.*s", len, p);
            p += len + strspn(p + len, " ");
        }
        printf("\n");
    }
    const struct device_entry *d = device_registry(&n);
    printf("devices:\n");
    for (int k = 0; k < n; k++) {
        /* A built device that needs hardware says whether this machine has it. */
        const int absent = d[k].built && executor_device_probe(d[k].name) != TB_OK;
        printf("  %-10s %s%s\n", d[k].name, d[k].summary,
               !d[k].built ? " (not built in this binary)" : absent ? " (built; no device present)" : "");
        if (absent) tb_error_clear();
    }
    const struct workload *const *w = workload_registry(&n);
    printf("workloads:\n");
    for (int k = 0; k < n; k++) {
        char recipe[256];
        workload_recipe_text(w[k], recipe, sizeof recipe);
        printf("  %-14s %s\n  %-14s recipe: %s\n", w[k]->name, w[k]->summary, "", recipe);
    }
}

/* buf (n bytes) = this executable's path, resolved from /proc/self/exe; returns 0 if it cannot be read. */
static int self_exe(char *buf, size_t n)
{
    const ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0) return 0;
    buf[k] = '\0';
    return 1;
}

/* --blas-core: may re-execute this program, so it runs before anything is done. The resolved path,
 * not /proc/self/exe itself: under valgrind the latter is the tool's binary, which refuses to run
 * ("You cannot run ... directly"), while readlink reports the client. */
static void choose_blas_core(const char *mode, char **argv)
{
    char exe[PATH_MAX];
    blas_core_apply(mode, self_exe(exe, sizeof exe) ? exe : "/proc/self/exe", argv);
}

static int status_exit(int st)
{
    /* A run stopped by SIGINT/SIGTERM exits as the shell expects of one killed by it: 130 / 143. */
    if (st == TB_EINTR && bench_stop_signal()) return 128 + bench_stop_signal();
    return st == TB_OK ? 0 : st == TB_EINVAL ? 2 : 1;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmd_report(int argc, char **argv)
{
    struct report_opts o = {0};
    o.in = is_file("results/results.jsonl") ? "results/results.jsonl" : "results/sample.jsonl";
    o.out_dir = "results";
    o.calibration = CALIBRATION_DEFAULT_PATH;
    static char plots[PATH_MAX + 16];
    o.plots_dir = repo_dir("plots", plots, sizeof plots); /* run from elsewhere: beside the build directory */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench report [--in FILE] [--out-dir DIR] [--plots DIR] [--calibration FILE]\n"
                   "                    [--profile-dir DIR] [--gnuplot PATH]\n"
                   "Charts (gnuplot) and REPORT.md from result rows, without running anything.\n\n"
                   "  --in FILE           result rows (default results/results.jsonl, else results/sample.jsonl)\n"
                   "  --out-dir DIR       where REPORT.md and charts/ go (default results)\n"
                   "  --plots DIR         the gnuplot scripts (default plots/ here or beside the build)\n"
                   "  --calibration FILE  machine ceilings for the roofline (default %s)\n"
                   "  --profile-dir DIR   tools/profile.sh sidecars (default <dir of --in>/profile)\n"
                   "  --gnuplot PATH      the gnuplot executable (default gnuplot on PATH)\n"
                   "  --help              this text\n\n"
                   "Exit status: 0 the report written (a chart gnuplot could not draw is said in REPORT.md), 1 no\n"
                   "usable rows, a folder that cannot be written, or a chart's table cut short (REPORT.md then says\n"
                   "it is incomplete), 2 usage.\n", CALIBRATION_DEFAULT_PATH);
            return 0;
        }
        const char **dst = !strcmp(a, "--in") ? &o.in : !strcmp(a, "--out-dir") ? &o.out_dir
                           : !strcmp(a, "--plots") ? &o.plots_dir : !strcmp(a, "--calibration") ? &o.calibration
                           : !strcmp(a, "--profile-dir") ? &o.profile_dir : !strcmp(a, "--gnuplot") ? &o.gnuplot : NULL;
        if (!dst) {
            fprintf(stderr, "bench report: unknown option '%s' (valid: --in FILE, --out-dir DIR, --plots DIR, "
                            "--calibration FILE, --profile-dir DIR, --gnuplot PATH)\n", a);
            return 2;
        }
        /* "--in --out-dir X" (make report RESULTS= left empty) would read --out-dir as the rows' path. */
        if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2) || !argv[i + 1][0]) {
            fprintf(stderr, "bench report: %s needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!is_dir(o.plots_dir)) {
        fprintf(stderr, "bench report: no gnuplot scripts in '%s' (give --plots DIR)\n", o.plots_dir);
        return 2;
    }
    int n_charts = 0;
    int st = report_generate(&o, &n_charts);
    if (st != TB_OK) {
        fprintf(stderr, "bench report: %s\n", tb_error_get());
        return status_exit(st);
    }
    printf("bench report: %s/REPORT.md with %d chart%s (PNG + SVG in %s/charts) from %s\n", o.out_dir, n_charts,
           n_charts == 1 ? "" : "s", o.out_dir, o.in);
    return 0;
}

/* The GPU's lines of `bench --calibrate`: its facts and ceilings, or one line saying why there are none. */
static void print_gpu_calibration(const struct calibration_gpu *g)
{
    if (g->state != CAL_GPU_MEASURED) {
        printf("  gpu         %s: %s%s%s\n", calibrate_gpu_state_name(g->state), g->info.name[0] ? g->info.name : "",
               g->info.name[0] ? ": " : "", g->why);
        return;
    }
    const struct device_info *d = &g->info;
    const struct device_ceilings *c = &g->c;
    printf("  gpu         %s: compute capability %s, %d SMs, %.1f GiB; driver %s (CUDA %s), runtime %s\n", d->name,
           d->capability, d->multiprocessors, d->mem_gib, d->driver_version, d->driver_cuda, d->runtime_version);
    printf("  gpu gemm    cuBLAS n=%d: fp32 (TF32 off) %.1f TFLOP/s, TF32 %.1f TFLOP/s, bf16 (fp32 accumulate) %.1f "
           "TFLOP/s (best of %d)\n", c->gemm_n, c->fp32_tflops, c->tf32_tflops, c->bf16_tflops, c->reps);
    printf("  gpu copy    device to device: cudaMemcpy %.0f GB/s, copy kernel %.0f GB/s "
           "(%.0f MiB read + written a copy)\n", c->memcpy_gbs, c->copy_kernel_gbs, c->copy_bytes / 1048576.0);
    /* cuBLAS's environment switches change what the fp32 and TF32 figures mean. */
    const char *tf32 = getenv("NVIDIA_TF32_OVERRIDE"), *emu = getenv("CUBLAS_EMULATE_SINGLE_PRECISION");
    if (tf32 && !strcmp(tf32, "0"))
        printf("  warning     NVIDIA_TF32_OVERRIDE=0 is set: the TF32 figure ran without TF32\n");
    if (emu && strcmp(emu, "0"))
        printf("  warning     CUBLAS_EMULATE_SINGLE_PRECISION=%s is set: fp32 may be emulated\n", emu);
}

/* only_if_needed (--calibrate-if-needed): keeps a file already measured on this machine (CPU model, cores,
 * OpenBLAS kernel set, and the GPU when one answers now) that passes its own sanity check, so `make demo`
 * measures once per machine and never reuses another's or a busy machine's. */
/* --quiet: only warnings and errors. */
#define CAL_SAY(...) \
    do { \
        if (!quiet) printf(__VA_ARGS__); \
    } while (0)
static int cmd_calibrate_locked(const char *path, int only_if_needed, int quiet)
{
    struct calibration cal;
    if (only_if_needed) {
        struct machine_info mi;
        machine_info_read(&mi);
        struct calibration_gpu now;
        const int gpu_now = calibrate_gpu_probe(&now) == CAL_GPU_MEASURED;
        char why[400];
        const int st = calibrate_check_current(path, mi.cpu_model, mi.n_cores, mi.blas_core,
                                               gpu_now ? now.info.name : NULL, &cal, why, sizeof why);
        if (st == TB_OK) {
            CAL_SAY("calibration %s: measured on this machine (%s), kept\n", path, cal.timestamp);
            return 0;
        }
        /* Another machine's, not a calibration, or one its own sanity check calls bad: measured again. */
        if (st != TB_EIO) fprintf(stderr, "bench: calibration %s: %s; measuring again\n", path, why);
        tb_error_clear();
    }
    CAL_SAY("calibrating: OpenBLAS sgemm n=2048 on 1 and all threads, triad bandwidth, the GPU if any "
           "(a few seconds)...\n");
    fflush(stdout);
    int st = calibrate_measure(&cal, 2048);
    if (st == TB_OK) calibrate_measure_gpu(&cal.gpu, 0);
    if (st == TB_OK) st = calibrate_write(&cal, path);
    if (st != TB_OK) {
        fprintf(stderr, "bench: %s\n", tb_error_get());
        return 1;
    }
    CAL_SAY("  sgemm       %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d thread%s (OpenBLAS %s kernels)\n",
           cal.sgemm_1t_gflops, cal.sgemm_all_gflops, cal.all_threads, cal.all_threads == 1 ? "" : "s", cal.blas_core);
    CAL_SAY("  triad       %.2f GB/s on 1 thread, %.2f GB/s on all (3 x %ld doubles)\n", cal.triad_1t_gbs,
           cal.triad_all_gbs, cal.triad_elements);
    if (cal.barrier_all_us > 0.0)
        CAL_SAY("  barrier     %.2f us on %d pinned thread%s (the threads backend's pool)\n", cal.barrier_all_us,
               cal.all_threads, cal.all_threads == 1 ? "" : "s");
    if (!quiet) print_gpu_calibration(&cal.gpu);
    CAL_SAY("  written to  %s\n", path);
    /* Under taskset or a narrower cpuset "all threads" are the allowed cores only: said, as the file is this
     * affinity's (--calibrate-if-needed in a process allowed more measures again). */
    if (cal.usable_cores > 0 && cal.usable_cores < cal.cores)
        fprintf(stderr, "bench: note: calibrated on the %d of this machine's %d cores this process may use (its CPU "
                        "affinity); a run allowed more takes these all-thread ceilings as too low\n",
                cal.usable_cores, cal.cores);
    /* Written all the same (exit 0: make demo goes on), but on stderr, and --calibrate-if-needed measures
     * such a file again (calibrate_check_current). */
    double la[1];
    char why[400];
    if (!calibrate_sane(&cal, why, sizeof why))
        fprintf(stderr, "bench: warning: calibration %s: %s%s; calibrate again on a quiet machine\n", path, why,
                getloadavg(la, 1) == 1 && la[0] > 0.5 ? " (the load average is high)" : "");
    /* A GPU that answered but could not be measured is a failure; one that is absent or not built is not. */
    if (cal.gpu.state == CAL_GPU_FAILED) {
        fprintf(stderr, "bench: calibrating the GPU failed (above); the CPU ceilings were written\n");
        return 1;
    }
    return 0;
}
#undef CAL_SAY

static int cmd_calibrate(const char *path, int only_if_needed, int quiet)
{
    /* Before measuring, and before reading it as a calibration: a path it must not replace is refused. */
    if (calibrate_check_target(path) != TB_OK) {
        fprintf(stderr, "bench: %s\n", tb_error_get());
        return 2; /* a usage error, as every other output bench refuses before it runs */
    }
    /* One calibration at a time into a file: two at once measured each other's load (and the if-needed one then
     * finds the first's, made meanwhile, and keeps it). */
    const int lock = outputs_lock_beside(path, "calibrating into");
    const int rc = cmd_calibrate_locked(path, only_if_needed, quiet);
    if (lock >= 0) close(lock);
    return rc;
}

enum { OPT_SUITE = 1, OPT_CALIBRATE, OPT_CALIBRATE_IF, OPT_BLAS, OPT_LIST, OPT_HELP, OPT_VERSION, OPT_TABLE = 1000 };

/* Where a shipped suite named as from the repository's root (suites/default.suite) is not there (bench run from
 * another folder) but is beside the build: " (the repository's is <path>)", else "". */
static void suite_elsewhere(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    const char *rest = strncmp(path, "suites/", 7) == 0 ? path + 7 : NULL;
    if (!rest || is_file(path)) return;
    char dir[1024], alt[1200];
    repo_dir("suites", dir, sizeof dir);
    snprintf(alt, sizeof alt, "%s/%s", dir, rest);
    char real[PATH_MAX];
    if (strcmp(dir, "suites") != 0 && is_file(alt))
        snprintf(out, n, " (the repository's is %.1200s)", realpath(alt, real) ? real : alt);
}

/* The line for an unknown long option (name as typed: "--stpes" or "--stpes=3"), with the nearest of the n
 * options in opts where one is near enough to be a typo. */
static void unknown_option(const char *name, const struct option *opts, int n)
{
    char word[64];
    snprintf(word, sizeof word, "%s", name + strspn(name, "-"));
    word[strcspn(word, "=")] = '\0';
    const char *names[BENCH_MAX_OPTIONS + 8];
    int k = 0;
    for (; k < n && k < (int)(sizeof names / sizeof *names); k++) names[k] = opts[k].name;
    const char *near = tb_text_nearest(word, names, k);
    if (near) fprintf(stderr, "bench: unknown option '%s' (did you mean --%s? see bench --help)\n", name, near);
    else fprintf(stderr, "bench: unknown option '%s' (see bench --help)\n", name);
}

static int bench_main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "compare") == 0) return compare_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "export") == 0) return export_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "report") == 0) return cmd_report(argc - 1, argv + 1);

    int n_table;
    const struct bench_option *table = bench_options(&n_table);
    struct option *opts = calloc((size_t)n_table + 8, sizeof *opts);
    if (!opts) return 1;
    for (int k = 0; k < n_table; k++)
        opts[k] = (struct option){table[k].name, table[k].has_arg ? required_argument : no_argument, 0, OPT_TABLE + k};
    int n = n_table;
    opts[n++] = (struct option){"suite", required_argument, 0, OPT_SUITE};
    opts[n++] = (struct option){"calibrate", no_argument, 0, OPT_CALIBRATE};
    opts[n++] = (struct option){"calibrate-if-needed", no_argument, 0, OPT_CALIBRATE_IF};
    opts[n++] = (struct option){"blas-core", required_argument, 0, OPT_BLAS};
    opts[n++] = (struct option){"list", no_argument, 0, OPT_LIST};
    opts[n++] = (struct option){"help", no_argument, 0, OPT_HELP};
    opts[n++] = (struct option){"version", no_argument, 0, OPT_VERSION};
    opts[n] = (struct option){0, 0, 0, 0};

    struct bench_config c;
    bench_config_defaults(&c);
    const char *blas = "auto", *suite_path = NULL;
    int calibrate = 0, version = 0, o, rc = 0;
    opterr = 0;
    while (rc == 0 && (o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        const char *name = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        if (o >= OPT_TABLE && o < OPT_TABLE + n_table) {
            if (bench_config_set(&c, table[o - OPT_TABLE].name, optarg) != TB_OK) {
                fprintf(stderr, "bench: %s (see bench --help)\n", tb_error_get());
                rc = 2;
            }
            continue;
        }
        switch (o) {
        case OPT_SUITE: suite_path = optarg; break;
        case OPT_CALIBRATE: calibrate = 1; break;
        case OPT_CALIBRATE_IF: calibrate = 2; break;
        case OPT_BLAS: blas = optarg; break;
        case OPT_LIST: list_all(); free(opts); return 0;
        case OPT_HELP: usage(stdout); free(opts); return 0;
        case OPT_VERSION: version = 1; break;
        case ':': fprintf(stderr, "bench: %s needs a value (see bench --help)\n", name); rc = 2; break;
        default:
            /* bench has no short options: "-batch" is read as -b -a ... and getopt stops inside the word, so
             * argv[optind - 1] would be the word before it. Name the single-dash word itself. */
            if (optopt > 0 && optind < argc && argv[optind][0] == '-' && argv[optind][1] != '-')
                fprintf(stderr, "bench: unknown option '%s' (options take two dashes: see bench --help)\n", argv[optind]);
            else if (optopt > 0 && name[0] == '-' && name[1] != '-')
                fprintf(stderr, "bench: unknown option '%s' (options take two dashes: see bench --help)\n", name);
            else
                unknown_option(name, opts, n);
            rc = 2;
            break;
        }
    }
    free(opts);
    if (rc) return rc;
    if (optind < argc) {
        fprintf(stderr, "bench: unexpected argument '%s' (see bench --help)\n", argv[optind]);
        return 2;
    }
    const char *known;
    if (!blas_core_known(blas, &known)) {
        fprintf(stderr, "bench: --blas-core %s: not an OpenBLAS kernel set (give auto, env or one of %s)\n", blas, known);
        return 2;
    }
    choose_blas_core(blas, argv);
    if (version) {
        /* The kernel set too: what --blas-core chose here (compare gives PyTorch the same). */
        const char *bt = getenv("OPENBLAS_NUM_THREADS");
        printf("bench (trainbench) %s, commit %s, %s\nOpenBLAS kernels: %s (loaded with OPENBLAS_NUM_THREADS=%s)\n",
               TB_VERSION, TB_GIT_COMMIT, TB_COMPILER, openblas_get_corename(), bt ? bt : "unset");
        return 0;
    }
    if (calibrate) {
        /* It measures this machine and exits: a run option beside it would be recorded nowhere and do nothing. */
        const char *cal = calibrate == 2 ? "--calibrate-if-needed" : "--calibrate";
        for (int k = 0; k < n_table; k++)
            if (c.given[k] && strcmp(table[k].name, "calibration") != 0 && strcmp(table[k].name, "quiet") != 0) {
                fprintf(stderr, "bench: --%s does not apply to %s (it measures this machine's ceilings and exits)\n",
                        table[k].name, cal);
                return 2;
            }
        if (suite_path) {
            fprintf(stderr, "bench: --suite does not apply to %s (run them one after the other)\n", cal);
            return 2;
        }
        return cmd_calibrate(c.calibration, calibrate == 2, c.quiet);
    }

    if (suite_path) {
        struct suite s;
        int st = suite_load(suite_path, &c, &s);
        if (st != TB_OK) {
            char elsewhere[1300];
            suite_elsewhere(suite_path, elsewhere, sizeof elsewhere);
            fprintf(stderr, "bench: %s%s\n", tb_error_get(), elsewhere);
            return st == TB_EIO ? 1 : 2;
        }
        printf("suite %s: %d run%s%s\n", suite_path, s.n_runs, s.n_runs == 1 ? "" : "s",
               s.n_skipped ? " (optional lines skipped, see above)" : "");
        fflush(stdout);
        st = suite_run(&s);
        suite_free(&s);
        if (st != TB_OK) {
            /* A failed run is a runtime failure whatever its own status; a stop signal is 130 / 143. */
            snprintf(end_msg, sizeof end_msg, "%s", tb_error_get()); /* said by bench_end */
            return st == TB_EINTR && bench_stop_signal() ? status_exit(st) : 1;
        }
        return 0;
    }

    int st = bench_config_finish(&c);
    if (st != TB_OK) {
        fprintf(stderr, "bench: %s\n", tb_error_get());
        return 2;
    }
    st = bench_run(&c);
    if (st != TB_OK) {
        snprintf(end_msg, sizeof end_msg, "%s", tb_error_get()); /* said by bench_end */
        return status_exit(st);
    }
    return 0;
}

/* A standard stream the caller closed (`2>&-`, some daemons and launchers) left its number free, and the first file
 * bench opened took it: its progress lines and warnings went into the MLPerf event log, a checkpoint folder's lock
 * or the data being read. Each closed one gets /dev/null, read-only: nothing opened later lands there, and a write
 * fails (EBADF) as it did on the closed stream, so stdout's check below still reports a lost summary. */
static void std_fds_reserve(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0 && nul != fd) { /* lower fds are open by now, so nul is fd itself unless /dev/null is odd */
            dup2(nul, fd);
            close(nul);
        }
    }
}

/* A summary or table that could not be written (stdout on a full disk, /dev/full, a closed pipe's
 * EPIPE with SIGPIPE ignored) is a failure: exit 1 with why, not 0. */
int main(int argc, char **argv)
{
    std_fds_reserve();
    /* A file-size limit (ulimit -f) killed bench by SIGXFSZ in the middle of a write: a result row cut in half, no
     * message. Ignored, the write fails with EFBIG, which every writer handles as a full disk (a partial row taken
     * back, the old file kept, one line naming the file). */
    signal(SIGXFSZ, SIG_IGN);
    int rc = bench_main(argc, argv);
    errno = 0;
    /* Only where nothing failed before: a failure has said its one line already (export's to stdout names it). */
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "bench: cannot write to standard output: %s\n", errno ? strerror(errno) : "write error");
        rc = 1;
    }
    bench_end(rc, end_msg);
    return rc;
}
