/* row.c — the one row writer: every plan opens a result row with row_begin (schema, configuration,
 * machine, build), adds its figures with the write_* helpers, and closes and appends it with row_end; plus
 * the summary lines and event-log header the plans share (see session.h).
 */
#define _GNU_SOURCE
#include "session.h"

#include "conv_tuning.h"
#include "fmt_figure.h"
#include "layer_profile.h"
#include "layout.h"
#include "op_conv.h"
#include "plan_project.h"
#include "projection.h"
#include "results.h"
#include "stats.h"
#include "status.h"
#include "timeline_row.h"
#include "tpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A float as the shortest double that reads back as the same float: 0.001f is written 0.001, not
 * 0.0010000000474974513. */
static double float_text(float f)
{
    char t[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, (double)f);
        if ((float)strtod(t, NULL) == f) break;
    }
    return strtod(t, NULL);
}

/* What the session's backend declares in the registry (session_open checked that it is registered). */
static const struct backend_caps *caps_of(const struct session *s)
{
    static const struct backend_caps none = {"", 0, 0, 0, NULL};
    const struct backend_entry *e = backend_find(s->c.backend);
    return e ? &e->caps : &none;
}

/* Replicas and accumulation: how a global batch splits — as the prepared backend split it for its own batch, else
 * as configured (the scaling table's points before they run). */
void batch_split(const struct session *s, int batch, int *replicas, int *accum, int *local)
{
    int r = s->c.run.ipu.replicas > 0 ? s->c.run.ipu.replicas : 1;
    /* Without --devices, the cores this process may use (its affinity), as the backends and compute_threads
     * count them: under taskset or a cpuset that is fewer than the machine's. */
    if (caps_of(s)->replicas_are_devices) {
        const int d = s->c.run.n_devices > 0 ? s->c.run.n_devices : tpool_cpus();
        r *= d > 0 ? d : 1;
    }
    int a = s->c.run.ipu.ga > 0 ? s->c.run.ipu.ga : 1;
    if (s->split_replicas > 0 && batch == s->be_batch) r = s->split_replicas, a = s->split_accum;
    *replicas = r, *accum = a;
    *local = batch / (r * a);
}

/* Threads the backend computes with, for choosing the matching sgemm ceiling: its own count (cpu: 1),
 * else --threads or --devices where it takes them, else every core this process may use (its affinity, as
 * the backends count their default; under taskset or a cpuset that is fewer than the machine's). */
static int compute_threads(const struct session *s)
{
    if (caps_of(s)->threads > 0) return caps_of(s)->threads;
    if (s->c.run.n_threads > 0 && backend_takes_option(s->c.backend, "threads")) return s->c.run.n_threads;
    if (s->c.run.n_devices > 0) return s->c.run.n_devices;
    const int cpus = tpool_cpus();
    return cpus > 0 ? cpus : 1;
}

/* The ceiling, in GFLOP/s, a row's GFLOP/s is a share of: on a GPU (the cuda device) its fp32 GEMM's, where the
 * calibration holds that GPU; else the calibrated sgemm of the threads the run computes with (one thread's,
 * or the all-thread figure scaled to the run's share of the machine's threads); 0 without a calibration. */
static double row_peak_gflops(const struct session *s)
{
    if (s->mi.have_gpu) return row_gpu_calibrated(s) ? 1e3 * s->cal.gpu.c.fp32_tflops : 0.0;
    if (!s->have_cal) return 0.0;
    const int th = compute_threads(s);
    if (th > 1 && s->cal.all_threads > 0)
        return s->cal.sgemm_all_gflops * (th < s->cal.all_threads ? (double)th / s->cal.all_threads : 1.0);
    return s->cal.sgemm_1t_gflops;
}

/* qsort's order of "NAME=value" entries: by name. */
static int env_name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char **run_env_switches(size_t *count)
{
    static const char *const prefixes[] = {"TB_", "OPENBLAS_", "OMP_"};
    static const char REEXEC[] = "TB_BLAS_REEXEC="; /* bench's own re-exec count, not a switch */
    size_t n = 0;
    for (char **e = environ; *e; e++) n++;
    const char **set = malloc((n ? n : 1) * sizeof *set);
    size_t k = 0;
    for (char **e = environ; set && *e; e++)
        for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++)
            if (strncmp(*e, prefixes[p], strlen(prefixes[p])) == 0 && strchr(*e, '=') &&
                strncmp(*e, REEXEC, sizeof REEXEC - 1) != 0) {
                set[k++] = *e;
                break;
            }
    if (k) qsort(set, k, sizeof *set, env_name_cmp);
    *count = k;
    return set;
}

/* The switches the run read from its environment, as config.env, so that two rows of an A/B say which side
 * each is. Sorted by name, so the same environment writes the same row. */
static void row_env(struct json_buf *b)
{
    size_t k = 0;
    const char **set = run_env_switches(&k);
    json_key_object(b, "env");
    for (size_t i = 0; i < k; i++) {
        const char *eq = strchr(set[i], '=');
        char name[128];
        const size_t len = (size_t)(eq - set[i]) < sizeof name - 1 ? (size_t)(eq - set[i]) : sizeof name - 1;
        memcpy(name, set[i], len);
        name[len] = '\0';
        json_key_str(b, name, eq + 1);
    }
    json_end_object(b);
    free(set);
}

/* The precision this run computes in, as its rows name it. */
static const char *run_precision(const struct session *s)
{
    return s->c.run.ipu.precision[0] ? s->c.run.ipu.precision : "fp32";
}

/* Opens a row: schema, kind, run id, configuration, machine and build; leaves "figures" open. */
void row_begin(const struct session *s, struct json_buf *b, const char *run_id, int batch, long steps,
               const char *sweep)
{
    const struct bench_config *c = &s->c;
    int replicas, accum, local;
    batch_split(s, batch, &replicas, &accum, &local);
    json_buf_init(b);
    json_begin_object(b);
    json_key_int(b, "schema_version", RESULTS_SCHEMA_VERSION);
    json_key_str(b, "kind", bench_plan_name(c->plan));
    json_key_str(b, "run_id", run_id);
    json_key_str(b, "suite", c->suite);
    if (sweep) json_key_str(b, "sweep", sweep);
    json_key_str(b, "status", s->row_status ? s->row_status : "ok");
    json_key_object(b, "config");
    json_key_str(b, "plan", bench_plan_name(c->plan));
    json_key_str(b, "backend", c->backend);
    json_key_str(b, "backend_desc", s->desc);
    json_key_str(b, "device", c->device);
    json_key_str(b, "workload", s->w->name);
    json_key_str(b, "model", s->m.name);
    json_key_str(b, "dataset", s->train.name);
    json_key_str(b, "data_source", s->train.source);
    {
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)s->data_crc32);
        json_key_str(b, "data_crc32", crc);
    }
    json_key_int(b, "train_samples", s->train.n);
    json_key_int(b, "eval_samples", session_eval_samples(s));
    /* The whole test set, which data_crc32 is of: a train run of --steps evaluates only its first eval_samples,
     * so without it a synthetic set's size (--synthetic-samples N,M) could not be told from the row. */
    json_key_int(b, "test_samples", s->test.n);
    json_key_int(b, "batch", batch);
    json_key_int(b, "local_batch", local);
    json_key_int(b, "batch_per_replica", c->batch_per_replica);
    json_key_int(b, "replicas_total", replicas);
    json_key_int(b, "accumulation", accum);
    json_key_int(b, "eval_batch", s->be_eval_batch);
    json_key_int(b, "steps", steps);
    json_key_int(b, "warmup", c->warmup);
    /* --warmup given: a budgeted throughput run's warm-up is then the user's (run in full), a configuration that
     * compare and the report key, not one the budget chose at the speed of the moment (c->budget_warmup). */
    json_key_bool(b, "warmup_given", c->budget_steps ? !c->budget_warmup : bench_option_given(c, "warmup"));
    json_key_int(b, "steps_per_execution", c->steps_per_execution);
    json_key_int(b, "repeat", c->repeat);
    json_key_int(b, "epochs", c->epochs);
    json_key_int(b, "steps_per_epoch", c->steps_per_epoch);
    json_key_str(b, "optimizer", optim_name(c->run.optim.kind));
    json_key_double(b, "lr", float_text(c->run.optim.lr));
    json_key_double(b, "momentum", float_text(c->run.optim.momentum));
    json_key_double(b, "weight_decay", float_text(c->run.optim.weight_decay));
    {
        static const char *const sched[] = {"constant", "exponential", "polynomial", "cosine"};
        json_key_str(b, "lr_schedule", sched[c->run.optim.schedule]);
        json_key_int(b, "lr_warmup", c->run.optim.warmup_steps);
        /* The decay's own parameters: two cosine runs with other floors are other configurations. */
        json_key_double(b, "lr_decay_rate", float_text(c->run.optim.decay_rate));
        json_key_int(b, "lr_decay_steps", c->run.optim.decay_steps);
        json_key_double(b, "lr_power", float_text(c->run.optim.power));
        json_key_double(b, "lr_final", float_text(c->run.optim.final_lr));
        json_key_double(b, "label_smoothing", float_text(c->wopts.label_smoothing));
    }
    json_key_int(b, "seed", (long long)c->run.seed);
    json_key_int(b, "threads", c->run.n_threads);
    json_key_int(b, "classes", s->m.n_classes);
    json_key_int(b, "input_h", s->m.in_h);
    json_key_int(b, "input_w", s->m.in_w);
    json_key_int(b, "input_c", s->m.in_c);
    json_key_int(b, "resolution", c->wopts.resolution);
    json_key_str(b, "norm", c->wopts.norm[0] ? c->wopts.norm : "default");
    json_key_int(b, "norm_groups", c->wopts.norm_groups);
    { /* the BatchNorm ε the model ran with (default, a --load file's bn_eps, or --bn-eps); null: none */
        const struct layer *bn = NULL;
        for (int i = 0; i < s->m.n_layers && !bn; i++)
            if (s->m.layers[i].op == OP_BN) bn = &s->m.layers[i];
        if (bn) json_key_double(b, "bn_eps", float_text(bn->a.norm.eps));
        else json_key_null(b, "bn_eps");
    }
    if (c->wopts.dropout >= 0.0f) json_key_double(b, "dropout", float_text(c->wopts.dropout));
    else json_key_null(b, "dropout");
    json_key_int(b, "params", (long long)model_count_params(&s->m));
    json_key_double(b, "train_flops_per_sample", model_train_flops_per_sample(&s->m));
    json_key_double(b, "forward_flops_per_sample", s->m.flops_per_sample);
    if (c->plan == PLAN_TTA) {
        json_key_double(b, "target", c->target);
        json_key_int(b, "eval_every", c->eval_every);
        json_key_int(b, "seeds", c->seeds);
        json_key_int(b, "max_epochs", c->max_epochs);
    }
    json_key_str(b, "conv_algo", c->run.conv_algo[0] ? c->run.conv_algo : "auto");
    json_key_str(b, "tuning", conv_tuning_on(c) ? c->tuning : "none");
    json_key_int(b, "devices", c->run.n_devices);
    json_key_str(b, "transport", c->transport[0] ? c->transport : "shm");
    json_key_bool(b, "sync_bn", c->run.sync_bn);
    json_key_int(b, "stages", c->run.ipu.stages);
    json_key_str(b, "split", c->run.ipu.split);
    json_key_int(b, "micro_batch", c->run.ipu.micro_batch);
    json_key_int(b, "ga", c->run.ipu.ga);
    json_key_int(b, "replicas", c->run.ipu.replicas);
    json_key_str(b, "schedule", c->run.ipu.schedule);
    json_key_bool(b, "recompute", c->run.ipu.recompute);
    json_key_str(b, "precision", run_precision(s));
    if (c->run.ipu.loss_scale > 0.0f) json_key_double(b, "loss_scale", c->run.ipu.loss_scale);
    else json_key_str(b, "loss_scale", "dynamic");
    json_key_int(b, "prefetch", c->run.ipu.prefetch);
    /* The projections asked for beside the measurement (figures.projection; --project-device's validation is
     * printed only): they change nothing measured, so no reader keys a configuration by them. */
    char pd[BENCH_MAX_BATCHES * 12];
    json_key_str(b, "project_devices", bench_config_project_list(c, pd, sizeof pd));
    json_key_str(b, "project_device", c->project_device);
    json_key_bool(b, "profile", c->run.profile);
    json_key_str(b, "trace", c->trace);
    json_key_int(b, "trace_step", c->trace_step);
    json_key_bool(b, "no_fuse", c->run.no_fuse);
    json_key_str(b, "save", c->save);
    json_key_str(b, "load", c->load);
    if (s->loaded) {
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)s->load_crc32);
        json_key_str(b, "load_crc32", crc);
    }
    json_key_str(b, "logits", c->logits);
    json_key_str(b, "checkpoint_dir", c->checkpoint_dir);
    json_key_int(b, "checkpoint_every", c->checkpoint_every);
    json_key_str(b, "resume", c->resume);
    /* The units the kernels' work splits are cut for on this machine (layout.h; the bits follow them). */
    json_key_int(b, "work_units", tb_par_units());
    row_env(b);
    json_end_object(b);
    machine_info_write_json(&s->mi, b);
    /* How busy the machine was when the row was written: noisy neighbours explain noisy figures. */
    double la[3];
    if (getloadavg(la, 3) == 3) {
        json_key_array(b, "load_avg");
        for (int k = 0; k < 3; k++) json_double(b, la[k]);
        json_end_array(b);
    }
    if (s->have_cal) {
        json_key_object(b, "calibration");
        if (row_gpu_calibrated(s)) { /* the GPU's ceilings the row's GPU share was taken of */
            const struct calibration_gpu *g = &s->cal.gpu;
            json_key_str(b, "gpu_name", g->info.name);
            json_key_double(b, "gpu_fp32_tflops", g->c.fp32_tflops);
            json_key_double(b, "gpu_tf32_tflops", g->c.tf32_tflops);
            json_key_double(b, "gpu_bf16_tflops", g->c.bf16_tflops);
            json_key_double(b, "gpu_copy_gbs", calibrate_gpu_copy_gbs(g));
        }
        json_key_double(b, "sgemm_1t_gflops", s->cal.sgemm_1t_gflops);
        json_key_double(b, "sgemm_all_gflops", s->cal.sgemm_all_gflops);
        json_key_int(b, "all_threads", s->cal.all_threads);
        json_key_double(b, "triad_1t_gbs", s->cal.triad_1t_gbs);
        json_key_double(b, "triad_all_gbs", s->cal.triad_all_gbs);
        if (s->cal.barrier_all_us > 0.0) json_key_double(b, "barrier_all_us", s->cal.barrier_all_us);
        json_key_str(b, "timestamp", s->cal.timestamp);
        json_key_str(b, "cpu_model", s->cal.cpu_model);
        json_key_int(b, "cores", s->cal.cores);
        json_key_str(b, "blas_core", s->cal.blas_core);
        json_end_object(b);
    }
    json_key_object(b, "figures");
}

int row_gpu_calibrated(const struct session *s)
{
    return s->have_cal && s->mi.have_gpu && calibrate_gpu_matches(&s->cal.gpu, s->mi.gpu.name);
}

void row_gpu_memory(const struct session *s, struct json_buf *b)
{
    struct device_memory dm;
    if (!s->mi.have_gpu) return;
    if (executor_device_memory(s->c.device, &dm, 0) != TB_OK) {
        tb_error_clear();
        return;
    }
    json_key_double(b, "gpu_mem_peak_mib", dm.alloc_peak_bytes / 1048576.0);
    json_key_double(b, "gpu_mem_used_mib", dm.used_bytes / 1048576.0);
}

/* figures.conv_algos: each convolution's algorithm, a letter a layer in the model's order (i im2col, d direct,
 * f fft, g gemm1x1), so two rows whose bits differ say whether their kernels did; and conv_shapes_timed, the
 * shapes the backend's preparation timed rather than took from --tuning or an earlier run of the process.
 * Nothing where the backend does not tell (the cuda device) or the model has no convolution. */
static void row_conv_algos(const struct session *s, struct json_buf *b)
{
    _Static_assert(CONV_ALGO_IM2COL == 0 && CONV_ALGO_DIRECT == 1 && CONV_ALGO_FFT == 2 && CONV_ALGO_GEMM1X1 == 3 &&
                       CONV_ALGO_COUNT == 4,
                   "one letter an algorithm, in enum conv_algo's order");
    int *algos = malloc((size_t)s->m.n_layers * sizeof *algos);
    char *letters = malloc((size_t)s->m.n_layers + 1);
    if (algos && letters && backend_conv_algos((struct backend *)&s->be, algos) == TB_OK) {
        size_t k = 0;
        for (int i = 0; i < s->m.n_layers; i++)
            if (algos[i] >= 0) letters[k++] = "idfg"[algos[i]];
        letters[k] = '\0';
        if (k) { /* a model without convolutions has nothing to say */
            json_key_str(b, "conv_algos", letters);
            json_key_int(b, "conv_shapes_timed", s->conv_timed);
        }
    }
    tb_error_clear();
    free(algos), free(letters);
}

double row_train_bytes(const struct session *s, int batch)
{
    int act, param;
    bench_config_storage_bytes(&s->c, &act, &param);
    return measure_train_bytes_per_step(&s->m, batch, optim_state_per_param(s->c.run.optim.kind), act, param);
}

double row_infer_bytes(const struct session *s, int batch)
{
    int act, param;
    bench_config_storage_bytes(&s->c, &act, &param);
    return measure_infer_bytes_per_step(&s->m, batch, act, param);
}

/* Figures every row carries: achieved GFLOP/s (measured time × counted FLOPs), its share of the
 * calibrated ceiling of the device it ran on (the sgemm's, or for the cuda device the GPU's fp32 GEMM),
 * the estimated arithmetic intensity, and the peak memory (host, and the GPU's on the cuda device). */
void row_common_figures(const struct session *s, struct json_buf *b, double gflops, double bytes_per_step,
                        double flops_per_step)
{
    json_key_double(b, "gflops_per_s", gflops);
    if (bytes_per_step > 0.0) json_key_double(b, "est_intensity_flop_per_byte", flops_per_step / bytes_per_step);
    const double peak = row_peak_gflops(s);
    if (s->mi.have_gpu) {
        /* The kernels ran on the GPU: a share of the host's sgemm would mean nothing. */
        if (peak > 0.0) {
            json_key_double(b, "gpu_peak_tflops", s->cal.gpu.c.fp32_tflops);
            json_key_double(b, "gpu_peak_share", gflops / peak);
        }
    } else if (s->have_cal) {
        json_key_int(b, "peak_threads", compute_threads(s));
        json_key_double(b, "sgemm_peak_gflops", peak);
        json_key_double(b, "sgemm_peak_share", gflops / peak);
    }
    row_conv_algos(s, b);
    json_key_double(b, "peak_rss_mib", measure_peak_rss_mib());
    json_key_str(b, "peak_rss_scope", s->peak_per_run ? "run" : "process");
    row_gpu_memory(s, b);
    json_key_double(b, "setup_time_s", s->setup_time_s);
}

/* --profile: the per-layer forward and backward seconds per step over the `steps` steps since
 * profile_begin (warm-up included), as figures.layer_times. */
void write_layer_times(struct session *s, struct json_buf *b, long steps)
{
    if (!s->prof_ok || steps < 1 || backend_layer_profile(&s->be, s->prof1, &s->busy_threads) != TB_OK) {
        tb_error_clear();
        return;
    }
    const int L = s->m.n_layers, T = s->busy_threads;
    /* d: this run's times, then its threads' work seconds summed (layer_profile's layout), then the busiest
     * thread's. */
    double *d = malloc(6 * (size_t)L * sizeof(double));
    struct layer_type_row rows[OP_COUNT];
    if (!d) return;
    for (int i = 0; i < 6 * L; i++) d[i] = s->prof1[i] - s->prof0[i];
    json_key_int(b, "layer_times_steps", steps);
    /* The pool's barriers a step (a count mod 2^32 at both ends): with the calibrated cost of one, what
     * synchronisation alone takes of a step, apart from the waits for late threads that idle_s holds. */
    const unsigned nb = (unsigned)s->prof1[6 * L] - (unsigned)s->prof0[6 * L];
    const double per_step = (double)nb / (double)steps;
    if (nb > 0) json_key_double(b, "barriers_per_step", per_step);
    json_key_array(b, "layer_times");
    for (int i = 0; i < L; i++) {
        json_begin_object(b);
        json_key_str(b, "name", s->m.layers[i].name);
        json_key_str(b, "op", model_op_name(s->m.layers[i].op));
        json_key_double(b, "forward_s", d[2 * i] / (double)steps);
        json_key_double(b, "backward_s", d[2 * i + 1] / (double)steps);
        /* The layer's time less a thread's mean work in it, per step: what imbalance and serial work cost. */
        if (T > 0) {
            json_key_double(b, "idle_s", (d[2 * i] + d[2 * i + 1] - (d[2 * L + 2 * i] + d[2 * L + 2 * i + 1]) / T) /
                                             (double)steps);
            /* The busiest thread's work: with the mean (time − idle), the layer's imbalance, even when the
             * pool has more threads than cores (work is then CPU time). */
            json_key_double(b, "work_max_s", (d[4 * L + 2 * i] + d[4 * L + 2 * i + 1]) / (double)steps);
        }
        json_end_object(b);
    }
    json_end_array(b);
    /* The same times by layer type, with achieved GFLOP/s: which layer types limit the speed. */
    const int n = layer_profile_by_type(&s->m, d, T > 0 ? d + 2 * L : NULL, T, (double)steps * s->be_batch, rows);
    layer_profile_write_json(rows, n, b);
    if (s->primary && !s->c.quiet) {
        printf("  per layer type over %ld step%s (forward + backward):\n", steps, steps == 1 ? "" : "s");
        /* The per-type share is of the ceiling the row's own share uses: the run's threads' sgemm, or the
         * GPU's fp32 GEMM when the kernels ran there (one thread's sgemm read 123 % for 2 threads' convs). */
        layer_profile_print(rows, n, row_peak_gflops(s), s->mi.have_gpu ? "GPU fp32 peak" : "sgemm peak", stdout);
        if (nb > 0) {
            printf("  barriers    %.0f a step", per_step);
            /* The calibrated cost is of a pool as wide as the machine: only a run that wide can use it. */
            if (s->have_cal && s->cal.barrier_all_us > 0.0 && s->busy_threads == s->cal.all_threads)
                printf(", x %.2f us each (bench --calibrate) = %.3f ms of synchronisation a step", s->cal.barrier_all_us,
                       per_step * s->cal.barrier_all_us * 1e-3);
            printf("\n");
        }
    }
    free(d);
}

/* --trace: writes the captured step as a Chrome trace file and records it as figures.trace. A file that
 * cannot be written leaves the row without it (the measurement stands) and the run's exit status 1. */
void write_trace(struct session *s, struct json_buf *b, const char *run_id)
{
    const struct bench_config *c = &s->c;
    if (!c->trace[0] || !s->primary) return;
    if (s->trace.step <= 0) {
        fprintf(stderr, "bench: warning: --trace %s: step %ld never ran; no trace written\n", c->trace, c->trace_step);
        return;
    }
    const struct trace_meta meta = {c->backend, s->w->name, s->desc, run_id, backend_n_devices(&s->be)};
    if (trace_write_file(c->trace, &s->trace, &s->m, &meta) != TB_OK) {
        if (!s->output_err[0]) snprintf(s->output_err, sizeof s->output_err, "%s", tb_error_get());
        tb_error_clear();
        return;
    }
    const int lanes = trace_capture_lanes(&s->trace), events = s->trace.n_ev + s->trace.n_tl;
    json_key_object(b, "trace");
    json_key_str(b, "label", "measured");
    json_key_str(b, "file", c->trace);
    json_key_int(b, "step", s->trace.step);
    json_key_double(b, "step_s", s->trace.step_s);
    json_key_int(b, "lanes", lanes);
    json_key_int(b, "events", events);
    json_end_object(b);
    if (!c->quiet)
        printf("  trace       %s: step %ld, %d lane%s, %d events (chrome://tracing or ui.perfetto.dev)\n", c->trace,
               s->trace.step, lanes, lanes == 1 ? "" : "s", events);
}

/* The cpu baseline for scaling efficiency: the newest successful throughput row of the single-thread
 * reference backend (backend_reference) on the cpu device with this run's workload, batch, input shape and
 * model (classes, norm, parameter count), optimizer, convolution algorithm and fusion switch, in the same results
 * file (suites run cpu first; side-by-side runs append to one file). A row without one of those keys (an
 * older schema) is not told apart by it. */
struct baseline_find {
    const struct session *s;
    const char *reference;
    int batch;
    double images_per_s;
    char run_id[96];
    char precision[16]; /* the baseline's */
};

/* The results file is appended to across sessions on other machines: a baseline is one of this machine (CPU
 * model, cores, OpenBLAS kernel set) measured as this run is (no --profile, which slows every layer; the same
 * steps per call, data, precision and environment switches). Unlike the keys above, a row that lacks one of
 * these is no baseline: a figure of an unknown machine or run is no ratio. */
static int baseline_comparable(const struct json_value *row, const struct session *s)
{
    const struct json_value *prof = json_get(row, "config.profile");
    if (!prof || prof->type != JSON_BOOL || prof->boolean) return 0;
    if (json_get_number(row, "machine.n_cores", -1) != s->mi.n_cores) return 0;
    if (json_get_number(row, "config.steps_per_execution", -1) != s->c.steps_per_execution) return 0;
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)s->data_crc32);
    const struct { const char *key, *v; } strs[] = {
        {"machine.cpu_model", s->mi.cpu_model},
        {"build.blas_core", s->mi.blas_core},
        {"config.data_source", s->train.source},
        {"config.data_crc32", crc},
    };
    for (size_t k = 0; k < sizeof strs / sizeof *strs; k++) {
        const struct json_value *v = json_get(row, strs[k].key);
        if (!v || v->type != JSON_STRING || strcmp(v->str, strs[k].v) != 0) return 0;
    }
    /* The same precision, or fp32: the reference computes in fp32 only, so a half-precision run's ratio is to its
     * fp32 (write_efficiency says so); requiring the run's own precision left such runs without one. */
    const struct json_value *prec = json_get(row, "config.precision");
    const char *mine = run_precision(s);
    if (!prec || prec->type != JSON_STRING || (strcmp(prec->str, mine) != 0 && strcmp(prec->str, "fp32") != 0))
        return 0;
    /* config.env: the same TB_/OPENBLAS_/OMP_ switches, no more and no fewer. */
    const struct json_value *env = json_get(row, "config.env");
    if (!env || env->type != JSON_OBJECT) return 0;
    size_t n = 0;
    const char **set = run_env_switches(&n);
    int same = set && (size_t)env->n == n;
    for (size_t i = 0; same && i < n; i++) {
        const char *eq = strchr(set[i], '=');
        const size_t len = (size_t)(eq - set[i]);
        int found = 0;
        for (int j = 0; j < env->n && !found; j++)
            found = strlen(env->keys[j]) == len && strncmp(env->keys[j], set[i], len) == 0 &&
                    env->items[j].type == JSON_STRING && strcmp(env->items[j].str, eq + 1) == 0;
        same = found;
    }
    free(set);
    return same;
}

static int baseline_row(const struct json_value *row, long line_no, void *ctx)
{
    struct baseline_find *f = ctx;
    const struct session *s = f->s;
    (void)line_no;
    if (strcmp(json_get_str(row, "status", ""), "ok") != 0) return TB_OK;
    if (strcmp(json_get_str(row, "config.plan", ""), "throughput") != 0) return TB_OK;
    if (strcmp(json_get_str(row, "config.backend", ""), f->reference) != 0) return TB_OK;
    if (strcmp(json_get_str(row, "config.workload", ""), s->w->name) != 0) return TB_OK;
    if ((int)json_get_number(row, "config.batch", -1) != f->batch) return TB_OK;
    if ((int)json_get_number(row, "config.resolution", -1) != s->c.wopts.resolution) return TB_OK;
    if ((int)json_get_number(row, "config.input_h", -1) != s->m.in_h) return TB_OK;
    if (strcmp(json_get_str(row, "config.norm", ""), s->c.wopts.norm[0] ? s->c.wopts.norm : "default") != 0)
        return TB_OK;
    /* Another model or optimizer would make the ratio a comparison of two workloads, not of two backends. */
    const struct { const char *key; double v; } nums[] = {
        {"config.classes", s->m.n_classes},
        {"config.norm_groups", s->c.wopts.norm_groups},
        {"config.params", (double)model_count_params(&s->m)},
    };
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++)
        if (json_get_number(row, nums[k].key, nums[k].v) != nums[k].v) return TB_OK;
    const struct { const char *key, *v; } strs[] = {
        {"config.optimizer", optim_name(s->c.run.optim.kind)},
        {"config.conv_algo", s->c.run.conv_algo[0] ? s->c.run.conv_algo : "auto"},
        /* the reference on the CPU, whatever this run's device: a --backend cpu --device cuda row is the GPU's
         * schedule, and a ratio to it would not be one to the cpu (a --backend cuda run still finds its cpu row) */
        {"config.device", "cpu"},
    };
    for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
        if (strcmp(json_get_str(row, strs[k].key, strs[k].v), strs[k].v) != 0) return TB_OK;
    const struct json_value *nf = json_get(row, "config.no_fuse");
    if (nf && nf->type == JSON_BOOL && nf->boolean != (s->c.run.no_fuse != 0)) return TB_OK;
    if (!baseline_comparable(row, s)) return TB_OK;
    const double ips = json_get_number(row, "figures.images_per_s", 0.0);
    if (ips > 0) {
        f->images_per_s = ips;
        snprintf(f->run_id, sizeof f->run_id, "%s", json_get_str(row, "run_id", "?"));
        snprintf(f->precision, sizeof f->precision, "%s", json_get_str(row, "config.precision", "fp32"));
    }
    return TB_OK;
}

/* Speed-up over the cpu baseline and scaling efficiency (speed-up ÷ devices), the figures users of
 * these suites compute by hand more than anything else. */
void write_efficiency(struct session *s, struct json_buf *b, int batch, double images_per_s)
{
    const int devices = backend_n_devices(&s->be);
    json_key_int(b, "devices_used", devices);
    const char *ref = backend_reference();
    if (!ref || caps_of(s)->reference) return;
    struct baseline_find f = {.s = s, .reference = ref, .batch = batch};
    if (results_read_rows(s->c.out, baseline_row, &f) != TB_OK || f.images_per_s <= 0) {
        tb_error_clear();
        if (s->primary && !s->c.quiet)
            /* The plan and batch named: in a suite that ran a cpu scaling sweep first, "run --backend cpu first"
             * read as wrong, as only a throughput row is a baseline, and a sweep's lines did not say which point. */
            printf("  scaling     no %s baseline at batch %d in %s: it is a --plan throughput --backend %s row of "
                   "this run's workload, batch and options, on this machine\n", ref, batch, s->c.out, ref);
        return;
    }
    const double speedup = images_per_s / f.images_per_s;
    const int other = strcmp(f.precision, run_precision(s)) != 0;
    json_key_double(b, "speedup_vs_cpu", speedup);
    json_key_double(b, "scaling_efficiency", speedup / devices);
    json_key_str(b, "baseline_run_id", f.run_id);
    json_key_str(b, "baseline_precision", f.precision);
    if (s->primary && !s->c.quiet)
        printf("  scaling     %.2fx the %s baseline (%s%s%.1f images/s, run %s) on %d device%s: efficiency %.0f %%\n",
               speedup, ref, other ? f.precision : "", other ? ", " : "", f.images_per_s, f.run_id, devices, devices == 1 ? "" : "s",
               100.0 * speedup / devices);
}

/* The per-step split a replicated or pipelined backend reports (compute, all-reduce, exchange, idle), averaged
 * over the steps since the last row that the step-time figures cover: the warm-up's steps only where no other
 * step ran (a train run no longer than its warm-up, whose figures then include it too). */
void write_step_split(struct session *s, struct json_buf *b)
{
    const struct split_sums *sp = &s->split[s->split[1].n > 0];
    const long n = sp->n;
    const int any = n > 0 && (sp->compute > 0 || sp->allreduce > 0);
    if (any) {
        const double step = sp->step / n, ar = sp->allreduce / n;
        json_key_object(b, "step_split");
        json_key_int(b, "steps", n);
        json_key_double(b, "step_s", step);
        json_key_double(b, "compute_s", sp->compute / n);
        json_key_double(b, "allreduce_s", ar);
        json_key_double(b, "exchange_s", sp->exchange / n);
        json_key_double(b, "idle_s", sp->idle / n);
        json_key_double(b, "allreduce_share", step > 0 ? ar / step : 0.0);
        json_end_object(b);
        if (s->primary && !s->c.quiet) {
            char f[5][32];
            printf("  per step    %s ms: compute %s ms, all-reduce %s ms (%.1f %% of the step), exchange %s ms, idle %s ms\n",
                   fmt_ms(f[0], 32, step), fmt_ms(f[1], 32, sp->compute / n), fmt_ms(f[2], 32, ar),
                   step > 0 ? 100.0 * ar / step : 0.0, fmt_ms(f[3], 32, sp->exchange / n), fmt_ms(f[4], 32, sp->idle / n));
        }
    }
    memset(s->split, 0, sizeof s->split);
}

void write_step_executions(struct session *s, struct json_buf *b)
{
    if (s->n_exec > 0 && s->n_exec < s->n_exec_steps) json_key_int(b, "step_executions", s->n_exec);
    s->n_exec = s->n_exec_steps = 0;
}

/* The summary's fp16 loss-scale line. */
static void print_loss_scale(double scale, int is_static, long skipped)
{
    printf("  loss scale  %g (%s), %ld step%s skipped on a gradient overflow\n", scale, is_static ? "static" : "dynamic",
           skipped, skipped == 1 ? "" : "s");
}

/* Pipelined backends: the measured per-stage accounting (labelled measured) and, with
 * --project-devices, the POD-scale projection built from it (labelled projected). On every backend with fp16's
 * loss scaling (ipu stages, the cuda device): the scale now, static or dynamic, and the steps skipped on a
 * gradient overflow, on the summary under the pipeline's lines where there are any. One stats query for both.
 * skipped >= 0: the run's skipped steps as its plan counted them (throughput: summed over --repeat, whose repeats
 * each restart the scaler); < 0: the scaler's own count. */
void write_pipeline(struct session *s, struct json_buf *b, double measured_images_per_s, long skipped)
{
    const int print = s->primary && !s->c.quiet;
    struct backend_stats st;
    if (backend_stats(&s->be, &st) != TB_OK) {
        tb_error_clear();
        return;
    }
    const struct loss_scaler *ls = st.loss_scaling;
    if (ls && skipped < 0) skipped = ls->skipped;
    if (ls) {
        json_key_object(b, "loss_scaling");
        json_key_double(b, "scale", ls->scale);
        json_key_str(b, "mode", ls->fixed > 0.0f ? "static" : "dynamic");
        json_key_int(b, "skipped_steps", skipped);
        json_end_object(b);
    }
    if (!st.pipeline) {
        if (print && ls) print_loss_scale(ls->scale, ls->fixed > 0.0f, skipped);
        return;
    }
    const struct pipeline_report r = *st.pipeline; /* a copy: timeline_row_write queries the stats again */
    json_key_object(b, "pipeline");
    json_key_str(b, "label", "measured");
    json_key_int(b, "stages", r.stages);
    json_key_int(b, "micro_batch", r.micro_batch);
    json_key_int(b, "ga", r.ga);
    json_key_int(b, "replicas", r.replicas);
    /* The cut as --split takes it: a timed one moves with load, and in half precision the cut changes the
     * bits (the gradients crossing it are rounded), so a row says which one its run had. */
    if (r.stages > 1) {
        char split[BACKEND_MAX_STAGES * 12] = "";
        for (int k = 1; k < r.stages && k < BACKEND_MAX_STAGES; k++) {
            const size_t len = strlen(split);
            snprintf(split + len, sizeof split - len, "%s%d", k > 1 ? "," : "", r.first_block[k]);
        }
        json_key_str(b, "split", split);
        json_key_str(b, "split_chosen_by", r.split_given ? "given" : "timed");
    }
    json_key_int(b, "steps", r.steps);
    json_key_double(b, "bubble_measured", r.bubble_measured);
    json_key_double(b, "bubble_ideal", r.bubble_ideal);
    json_key_array(b, "per_stage");
    for (int k = 0; k < r.stages && k < BACKEND_MAX_STAGES; k++) {
        json_begin_object(b);
        json_key_double(b, "fwd_s_per_micro_batch", r.t_fwd[k]);
        json_key_double(b, "bwd_s_per_micro_batch", r.t_bwd[k]);
        json_key_double(b, "compute_s", r.t_compute[k]);
        json_key_double(b, "exchange_s", r.t_exchange[k]);
        json_key_double(b, "idle_s", r.t_idle[k]);
        json_key_double(b, "allreduce_s", r.t_allreduce[k]);
        json_key_double(b, "exchange_bytes_per_micro_batch", r.exchange_bytes[k]);
        json_key_double(b, "param_bytes", r.param_bytes[k]);
        json_key_double(b, "peak_activation_bytes", r.peak_act_bytes[k]);
        json_key_double(b, "weight_bytes", r.weight_bytes[k]);
        json_key_double(b, "weight_window_bytes", r.weight_window_bytes[k]);
        json_end_object(b);
    }
    json_end_array(b);
    json_end_object(b);
    timeline_row_write(b, &s->be);
    if (print) {
        printf("  pipeline    measured bubble %.1f %% (ideal (S-1)/(G+S-1) = %.1f %%)\n", 100.0 * r.bubble_measured,
               100.0 * r.bubble_ideal);
        if (ls) print_loss_scale(ls->scale, ls->fixed > 0.0f, skipped);
        /* ms: an mnist-mlp step's stages (µs of work) printed as 0.000 s throughout. */
        for (int k = 0; k < r.stages && k < BACKEND_MAX_STAGES; k++) {
            char m[4][32]; /* sizes under 0.1 MiB in KiB: an mnist-mlp stage's activations printed 0.0 MiB */
            printf("  stage %-4d  compute %.3f ms, exchange %.3f ms, idle %.3f ms, all-reduce %.3f ms per step; "
                   "activations %s (measured), weights %s (+%s fp32 window), gradients %s\n",
                   k, 1e3 * r.t_compute[k], 1e3 * r.t_exchange[k], 1e3 * r.t_idle[k], 1e3 * r.t_allreduce[k],
                   fmt_mib(m[0], 32, r.peak_act_bytes[k]), fmt_mib(m[1], 32, r.weight_bytes[k]),
                   fmt_mib(m[2], 32, r.weight_window_bytes[k]), fmt_mib(m[3], 32, r.param_bytes[k]));
        }
    }
    if (print && s->c.project_device[0])
        plan_project_validate(s, r.t_fwd, r.t_bwd, r.stages < PROJ_MAX_STAGES ? r.stages : PROJ_MAX_STAGES, r.micro_batch,
                              stdout);
    if (s->c.n_project <= 0) return;
    struct proj_measured pm = {.stages = r.stages, .micro_batch = r.micro_batch};
    for (int k = 0; k < r.stages && k < PROJ_MAX_STAGES; k++) {
        pm.t_fwd[k] = r.t_fwd[k], pm.t_bwd[k] = r.t_bwd[k];
        pm.exchange_bytes[k] = r.exchange_bytes[k], pm.param_bytes[k] = r.param_bytes[k];
    }
    struct proj_links l;
    proj_links_default(&l);
    /* Given, not non-zero: a latency of 0 (in the options' range) was the default's 5 or 10 us. */
    if (bench_option_given(&s->c, "link-bw")) l.exchange_bw = s->c.link_bw_gbs * 1e9;
    if (bench_option_given(&s->c, "link-latency")) l.exchange_lat = s->c.link_lat_us * 1e-6;
    if (bench_option_given(&s->c, "allreduce-bw")) l.allreduce_bw = s->c.allreduce_bw_gbs * 1e9;
    if (bench_option_given(&s->c, "allreduce-latency")) l.allreduce_lat = s->c.allreduce_lat_us * 1e-6;
    /* Graphcore's table keeps the global batch: this run's B·G·R, so that every row is the run's training
     * (the same batch, the same optimisation) on more devices. */
    const int global = r.micro_batch * r.ga * r.replicas;
    struct proj_row rows[BENCH_MAX_BATCHES];
    int n = proj_default_rows(s->c.project_devices, s->c.n_project, r.stages, r.micro_batch, global, rows);
    if (s->primary && !s->projection_noted++) { /* once a run, not once a scaling point */
        proj_notes_left_out(s->c.project_devices, s->c.n_project, r.stages, r.micro_batch, global,
                            "--project-devices", stderr);
        if (n == 0) fprintf(stderr, "bench: note: --project-devices: no device count fits, so no projection\n");
    }
    if (n == 0) return;
    proj_table(&pm, &l, rows, n);
    /* The model at the arrangement this run measured, beside what it measured: how far the model (which
     * leaves out the weight update and the per-step overhead) misses on this machine. */
    struct proj_row v = {.replicas = r.replicas, .ga = r.ga};
    proj_project(&pm, &l, &v);
    const int validated = measured_images_per_s > 0.0 && v.images_per_s > 0.0;
    const double gap = validated ? v.images_per_s / measured_images_per_s - 1.0 : 0.0;
    json_key_object(b, "projection");
    json_key_str(b, "label", "projected");
    json_key_int(b, "global_batch", global);
    if (validated) {
        json_key_object(b, "validation");
        json_key_int(b, "devices", v.devices);
        json_key_int(b, "replicas", v.replicas);
        json_key_int(b, "ga", v.ga);
        json_key_double(b, "images_per_s_projected", v.images_per_s);
        json_key_double(b, "images_per_s_measured", measured_images_per_s);
        json_key_double(b, "gap", gap);
        json_end_object(b);
    }
    json_key_double(b, "exchange_gbs", l.exchange_bw * 1e-9);
    json_key_double(b, "exchange_latency_us", l.exchange_lat * 1e6);
    json_key_double(b, "allreduce_gbs", l.allreduce_bw * 1e-9);
    json_key_double(b, "allreduce_latency_us", l.allreduce_lat * 1e6);
    json_key_array(b, "rows");
    for (int i = 0; i < n; i++) {
        json_begin_object(b);
        json_key_int(b, "devices", rows[i].devices);
        json_key_int(b, "local_batch", rows[i].local_batch);
        json_key_int(b, "replicas", rows[i].replicas);
        json_key_int(b, "ga", rows[i].ga);
        json_key_int(b, "global_batch", rows[i].global_batch);
        json_key_double(b, "images_per_s_projected", rows[i].images_per_s);
        json_key_double(b, "utilisation", rows[i].utilisation);
        json_key_double(b, "scaling_efficiency", rows[i].efficiency);
        json_end_object(b);
    }
    json_end_array(b);
    json_end_object(b);
    if (!print) return;
    proj_print(&pm, &l, rows, n, stdout);
    printf("  global batch %d at every device count: this run's (micro-batch %d x accumulation %d x %d replica%s)\n",
           global, r.micro_batch, r.ga, r.replicas, r.replicas == 1 ? "" : "s");
    if (validated)
        printf("  validation  at the measured arrangement (%d device%s, %d replica%s, accumulation %d): projected %.1f "
               "images/s, measured %.1f: %+.1f %% (the model leaves out the weight update and per-step overhead)\n",
               v.devices, v.devices == 1 ? "" : "s", v.replicas, v.replicas == 1 ? "" : "s", v.ga, v.images_per_s,
               measured_images_per_s, 100.0 * gap);
}

/* Closes the row and appends it (only the primary process writes). Returns TB_OK or the writer's error. */
int row_end(const struct session *s, struct json_buf *b)
{
    json_end_object(b); /* figures */
    json_end_object(b);
    int st = json_buf_status(b);
    if (st == TB_OK && !s->primary) {
        json_buf_free(b);
        return TB_OK;
    }
    if (st == TB_OK) st = results_append_row(s->c.out, json_buf_str(b));
    else tb_error_set(st, "result row for %s could not be formatted", s->c.out);
    json_buf_free(b);
    return st;
}

void write_throughput(struct json_buf *b, const struct measure_throughput *t, const char *rate_key)
{
    json_key_double(b, rate_key, t->images_per_s);
    json_key_double(b, "images_per_s_median", t->rate.median);
    json_key_double(b, "images_per_s_mean", t->rate.mean);
    json_key_double(b, "images_per_s_stderr", t->rate.stderr_);
    json_key_double(b, "images_per_s_jitter", t->rate.mad_jitter);
    json_key_double(b, "images_per_s_min", t->rate.min);
    json_key_double(b, "images_per_s_max", t->rate.max);
    json_key_int(b, "timed_steps", t->n_steps);
    json_key_double(b, "timed_s", t->time_s);
    json_key_double(b, "step_time_median_s", t->step.median);
    json_key_double(b, "step_time_p90_s", t->step_p90_s);
    json_key_double(b, "step_time_p99_s", t->step_p99_s);
}

void print_throughput(const struct measure_throughput *t, const char *warm_what, const char *rate_what)
{
    /* %.4g: slow configurations (EfficientNet-B4 at 380x380 runs ~1 image/s) keep their digits. */
    printf("  images/s    %.4g %s; per step: median %.4g, mean %.4g ± %.2g (s.e.), jitter %.2g (1.4826·MAD)\n",
           t->images_per_s, rate_what, t->rate.median, t->rate.mean, t->rate.stderr_, t->rate.mad_jitter);
    printf("  step time   median %.3f ms, p90 %.3f ms, p99 %.3f ms over %ld timed step%s (%s)\n",
           1e3 * t->step.median, 1e3 * t->step_p90_s, 1e3 * t->step_p99_s, t->n_steps, t->n_steps == 1 ? "" : "s",
           warm_what);
}

void log_run_header_at(struct mllog *lg, struct session *s, int batch, uint64_t seed, long spe, long long init_ms)
{
    struct mllog_run_info ri = {0};
    ri.workload = s->w->name, ri.backend = s->c.backend, ri.platform = s->mi.cpu_model;
    ri.init_start_ms = init_ms;
    if (!s->init_logged) {
        /* MLPerf's init interval covers data loading and model build: the first run's starts with the
         * session. */
        ri.init_start_ms = s->init_ms;
        const struct mllog_phase ph[] = {{"staging_start", "staging_stop", s->data_ms[0], s->data_ms[1]},
                                         {"model_build_start", "model_build_stop", s->build_ms[0], s->build_ms[1]},
                                         {"backend_prepare_start", "backend_prepare_stop", s->prepare_ms[0],
                                          s->prepare_ms[1]}};
        ri.n_phases = (int)(sizeof ph / sizeof ph[0]);
        memcpy(ri.phases, ph, sizeof ph);
        s->init_logged = 1;
    }
    ri.global_batch = batch;
    ri.accumulation = s->split_accum > 0 ? s->split_accum : 1;
    ri.seed = seed;
    ri.optim = &s->c.run.optim;
    ri.steps_per_epoch = spe;
    ri.train_samples = s->train.n, ri.eval_samples = session_eval_samples(s);
    mllog_run_header(lg, &ri);
}

void log_run_header(struct mllog *lg, struct session *s, int batch, uint64_t seed)
{
    log_run_header_at(lg, s, batch, seed, 0, 0);
}

int open_log(struct mllog *lg, const struct session *s, const char *run_id)
{
    const int st = mllog_open_for(lg, s->c.mllog_dir, run_id, s->c.resume[0] != 0);
    if (st == TB_OK) return TB_OK;
    /* A --run-id whose log another run made after this one's up-front check (two started at once with one id):
     * refused before a step, as the check refuses it, so that no two rows share the id. */
    if (st == TB_EINVAL && s->c.run_id[0]) {
        char why[600];
        snprintf(why, sizeof why, "%s", tb_error_get());
        return tb_error_set(TB_EINVAL, "--run-id %s: %s; another run with this id started at the same time: give each "
                                       "its own", s->c.run_id, why);
    }
    fprintf(stderr, "bench: warning: %s\n", tb_error_get());
    tb_error_clear();
    return TB_OK;
}

/* The scaling figures of a point (inside "figures"): the split of the global batch, speed-up and
 * efficiency relative to the base point (itself for the first). */
void write_scaling(struct json_buf *b, const struct session *s, const struct scale_base *sb, int batch,
                   double ips)
{
    if (!sb) return;
    int r, a, l;
    batch_split(s, batch, &r, &a, &l);
    const int base_is_self = !(sb->images_per_s > 0.0);
    const double base_ips = base_is_self ? ips : sb->images_per_s;
    const int base_r = base_is_self ? r : sb->replicas;
    json_key_int(b, "global_batch", batch);
    json_key_int(b, "local_batch", l);
    json_key_int(b, "replicas", r);
    json_key_int(b, "accumulation", a);
    json_key_int(b, "base_batch", base_is_self ? batch : sb->batch);
    json_key_double(b, "speedup", ips / base_ips);
    json_key_double(b, "efficiency", (ips / r) / (base_ips / base_r));
}

void print_repeats(const double *rep, int n)
{
    if (n < 2) return;
    /* Steps within a run are not independent (a noisy neighbour slows a stretch of them), so the error to compare
     * two runs by is the spread of whole repeats, not of steps. */
    /* --repeat takes up to 1000: every rate on the line made it 7,000 characters. The first PRINTED_REPEATS and the
     * last, the rest counted (the row has them all). */
    enum { PRINTED_REPEATS = 12 };
    printf("  repeats    ");
    for (int r = 0; r < n; r++) {
        if (n > PRINTED_REPEATS + 1 && r == PRINTED_REPEATS) {
            printf(" ... (%d more: repeat_images_per_s in the row) ...", n - PRINTED_REPEATS - 1);
            r = n - 1;
        }
        printf(" %.0f", rep[r]);
    }
    struct stats_summary rs;
    if (stats_summarize(rep, n, &rs) == TB_OK)
        printf(" images/s: mean %.4g ± %.2g (95 %% CI over repeats)", rs.mean, stats_ci95_halfwidth(&rs));
    printf("\n");
}

void write_repeats(struct json_buf *b, const double *rep, int n)
{
    json_key_array(b, "repeat_images_per_s");
    for (int r = 0; r < n; r++) json_double(b, rep[r]);
    json_end_array(b);
    struct stats_summary rs;
    if (n >= 2 && stats_summarize(rep, n, &rs) == TB_OK) {
        json_key_double(b, "repeat_images_per_s_median", rs.median);
        json_key_double(b, "repeat_images_per_s_mean", rs.mean);
        json_key_double(b, "repeat_images_per_s_stderr", rs.stderr_);
        json_key_double(b, "repeat_images_per_s_ci95", stats_ci95_halfwidth(&rs));
        json_key_double(b, "repeat_images_per_s_jitter", rs.mad_jitter);
    }
}

/* --checkpoint-dir: the checkpoints a run wrote, the seconds writing them took (not counted as training
 * or in the time to accuracy) and the newest one. */
void write_checkpoints(struct json_buf *b, int written, double time_s, const char *path)
{
    json_key_int(b, "checkpoints_written", written);
    json_key_double(b, "checkpoint_time_s", time_s);
    json_key_str(b, "checkpoint", path);
}
