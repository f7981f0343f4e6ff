/* options.c — every bench option in one table and one parser, shared by the command line and suite
 * files, plus the defaults that depend on the workload (see run.h).
 *
 * Values are validated here, once, with a message naming the option (`--batch: expected an integer in
 * 1..1048576, got 'x'`). Each backend's registry entry names the options it takes beyond those every
 * backend takes (struct backend_caps); one given for a backend that does not take it is a usage error
 * naming the backends that do, never a setting recorded in the row that changed nothing.
 * Threading: no shared state.
 */
#define _GNU_SOURCE
#include "run.h"

#include "arena.h"
#include "status.h"
#include "tpool.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct bench_option options[] = {
    {"backend", 1, "NAME", "execution backend (default cpu; see --list for each one's own options)", 0},
    {"device", 1, "cpu|cuda", "where the kernels run (default cpu; see --list for the devices built in)", 0},
    {"workload", 1, "NAME", "workload (default mnist-mlp; see --list)", 0},
    {"plan", 1, "PLAN", "train | throughput | tta | scaling | inference | evaluate (default: train when\n"
                        "--epochs or --steps is given, else throughput); evaluate: loss, top-1 and top-5\n"
                        "of --load's weights (without --load, the seeded initial ones) on the test set", 0},
    {"batch", 1, "N", "global batch: samples per optimizer step (workload default; the throughput plan\n"
                      "without --batch lowers it until a step takes seconds, said on stderr)", 0},
    {"batch-per-replica", 1, "B", "samples per replica per step, as tf.distribute counts them: the global batch is\n"
                                  "B x replicas (mirrored: --devices; ipu: --replicas, B = micro-batch x ga)", 0},
    {"epochs", 1, "E", "train: epochs (workload default); scaling: train each point E epochs", 0},
    {"steps-per-epoch", 1, "S", "steps per epoch (default: one pass over the training set)", 0},
    {"steps", 1, "N", "train: total steps (overrides --epochs); throughput, scaling, inference: timed\n"
                      "steps per measurement (default 100; throughput: from --time-budget; each step's\n"
                      "time is kept: at most 16777216 with the warm-up, and over the repeats)", 0},
    {"warmup", 1, "N", "untimed steps before timing (default 10; throughput: up to 10, from --time-budget)", 0},
    {"steps-per-execution", 1, "N|auto", "training steps handed to the backend per call, the same bits (default auto:\n"
                                         "one, except on a device that loops on its own (cuda, batch 1), which gets\n"
                                         "runs of about a second; N: up to N steps a call, per-step times then the\n"
                                         "run's mean)", 0},
    {"time-budget", 1, "SECONDS", "throughput without --steps: time the timed steps may take, measured on the\n"
                                  "warm-up steps (default 60; at most 100 steps, at least 2)", 0},
    {"repeat", 1, "N", "throughput, scaling, inference: repeat the whole measurement N times (default 1)", 0},
    {"target", 1, "ACC", "tta: test accuracy to reach, in [1e-9, 1] (default: the workload's)", 0},
    {"eval-every", 1, "STEPS", "tta: evaluate every STEPS steps (default: every epoch)", 0},
    {"seeds", 1, "N", "tta: runs with seeds seed..seed+N-1; olympic mean (default 1)", 0},
    {"max-epochs", 1, "E", "tta: give up after E epochs (default 15)", 0},
    {"batches", 1, "LIST", "scaling: global batches, e.g. 16,32,64,128,256 (the default)", 1},
    {"replicas-list", 1, "LIST", "scaling grid: replicas per point (ipu: pipeline replicas; mirrored: devices,\n"
                                 "local batch = global / devices), e.g. 1,2", 1},
    {"ga-list", 1, "LIST", "scaling grid, ipu: gradient-accumulation steps per point, e.g. 4,8", 1},
    {"micro-batch-list", 1, "LIST", "scaling grid, ipu: micro-batch sizes per point; with --ga or --ga-list the\n"
                                    "global batch is micro-batch x ga x replicas (no --batches)", 1},
    {"optimizer", 1, "NAME", "adam | sgd | rmsprop | lars (default: the workload's recipe, shown by --list;\n"
                             "giving --optimizer or --lr replaces the whole recipe)", 0},
    {"lr", 1, "X", "learning rate (default: the recipe's, scaled to the batch; else the optimizer's)", 0},
    {"momentum", 1, "X", "momentum for sgd, rmsprop, lars", 0},
    {"weight-decay", 1, "X", "L2 weight decay (not on biases and norm parameters)", 0},
    {"seed", 1, "S", "seed for init, shuffling and all randomness (default 42)", 0},
    {"data", 1, "DIR|synthetic", "IDX (MNIST-style) or CIFAR-10 binary directory, or a synthetic set\n"
                                 "(default: " DATASET_DEFAULT_DIR " to train, synthetic to time)", 0},
    {"classes", 1, "N", "output classes (default: the dataset's)", 0},
    {"resolution", 1, "R", "input resolution R×R (EfficientNet; the model resamples on the device)", 0},
    {"norm", 1, "batch|group[:G]", "normalisation layers (EfficientNet; G groups, dividing every layer's channels,\n"
                                   "e.g. 1, 2, 4, 8 or 16; default: the workload's)", 0},
    {"dropout", 1, "X", "dropout rate before the classifier, in [0,1)", 0},
    {"bn-eps", 1, "X", "BatchNorm epsilon (EfficientNet; default: a --load file's bn_eps, else torchvision's:\n"
                       "1e-5 for B0-B4, 1e-3 for B5-B7)", 0},
    {"describe", 0, NULL, "print the model's per-layer table instead of running", 0},
    {"threads", 1, "N", "threads backend: worker threads (default: all cores)", 0},
    {"eval-batch", 1, "N", "samples per evaluation forward (default max(batch, 256))", 0},
    {"no-eval", 0, NULL, "train: skip the test-set evaluation", 0},
    {"conv-algo", 1, "ALGO",
     "auto (timed once per shape) | im2col | direct | fft | gemm1x1 (layers it cannot run: auto)", 0},
    {"devices", 1, "N", "mirrored / ipu: devices (default: the cores this process may use; mirrored over MPI: "
                        "per rank, default 1)", 0},
    {"transport", 1, "shm|mpi", "mirrored: gradient exchange between replicas (mpi: under mpirun, a ring within "
                                "each rank's devices and MPI_Allreduce between ranks; bind each rank to its own "
                                "cores, e.g. mpirun --map-by slot:PE=8 --bind-to core)", 0},
    {"sync-bn", 0, NULL, "mirrored: BatchNorm statistics over the global batch", 0},
    {"stages", 1, "S", "ipu: pipeline stages", 0},
    {"split", 1, "a,b,...", "ipu: first block of each stage after the first", 1},
    {"micro-batch", 1, "B", "ipu: samples per micro-batch", 0},
    {"ga", 1, "G", "ipu: gradient accumulation: micro-batches per step", 0},
    {"replicas", 1, "R", "ipu: data-parallel replicas of the pipeline", 0},
    {"schedule", 1, "gpipe|1f1b", "ipu: pipeline schedule", 0},
    {"recompute", 0, NULL, "ipu: recompute activations in the backward pass", 0},
    {"precision", 1, "fp32|fp16|bf16|fp16m|bf16m", "ipu: storage precision of activations and weights (m: keep fp32\n"
                                                   "master weights in the optimizer); cuda: bf16 or fp16 mixed\n"
                                                   "precision (2-byte activations and GEMMs, fp32 master weights:\n"
                                                   "bf16m, fp16m the same; fp16 with loss scaling)", 0},
    {"loss-scale", 1, "dynamic|N", "fp16: loss scale, dynamic (default: halved on overflow, doubled after 2000\n"
                                   "clean steps) or a static N in [1, 1e30]; an overflow skips the step, and 10\n"
                                   "in a row at the lowest (or static) scale end the run as diverged", 0},
    {"prefetch", 1, "N", "ipu: micro-batches prepared ahead (default 3; 0 = none); cpu, mirrored, cuda on a\n"
                         "device that copies its inputs (cuda): batches copied ahead of their step over a\n"
                         "copy stream (default 1; 0 = none; the cpu device reads them in place)", 0},
    {"label-smoothing", 1, "X", "cross-entropy label smoothing in [0,1) (default 0)", 0},
    {"lr-schedule", 1, "NAME", "constant | exponential | polynomial | cosine decay after the warm-up (default:\n"
                               "the recipe's, else constant); the decay runs to the last step", 0},
    {"lr-warmup", 1, "STEPS", "linear learning-rate warm-up from 0 over STEPS steps (default: the recipe's, else 0)", 0},
    {"lr-decay-rate", 1, "X", "exponential: lr·X^(step/decay-steps) (default: the recipe's, else 0.97)", 0},
    {"lr-decay-steps", 1, "N", "exponential: steps per decay period (default: the recipe's, else 1)", 0},
    {"lr-power", 1, "X", "polynomial decay power (default: the recipe's, else 1)", 0},
    {"lr-final", 1, "X", "polynomial / cosine: final learning rate (default 0)", 0},
    {"profile", 0, NULL, "backends: record per-layer times", 0},
    {"timeline", 1, "FILE", "ipu: write the per-device, per-micro-batch timeline (CSV) to FILE", 0},
    {"trace", 1, "FILE", "train, throughput, tta: write a Chrome trace (JSON, for chrome://tracing or\n"
                         "ui.perfetto.dev) of one training step, one lane per device (implies --profile)", 0},
    {"trace-step", 1, "N", "--trace: the step to record (default: the last; with --repeat, of the last)", 0},
    {"project-devices", 1, "LIST", "ipu: project throughput to these device counts (e.g. 16,64,128,256);\n"
                                   "figures labelled projected", 1},
    {"project-device", 1, "NAME|FILE", "ipu: project onto a described device (devices/NAME.spec: ipu-bow, ipu-mk2, a100,\n"
                                       "h100, h200; cpu-this from results/calibration.json): per-layer roofline\n"
                                       "composed over stages, micro-batches, replicas; labelled PROJECTED. Without\n"
                                       "--plan nothing is trained; with --plan, the run's measured stage times are\n"
                                       "printed beside the model's (validation)", 0},
    {"device-set", 1, "K=V,...", "projection: override spec keys (e.g. kernel_overhead_us=3); printed as such", 1},
    {"link-bw", 1, "GB/s", "--project-devices: stage-to-stage exchange bandwidth (default 32; a\n"
                           "--project-device spec has its own links, --device-set changes them)", 0},
    {"link-latency", 1, "us", "--project-devices: latency per exchange transfer (default 5)", 0},
    {"allreduce-bw", 1, "GB/s", "--project-devices: all-reduce bandwidth per device (default 12.5)", 0},
    {"allreduce-latency", 1, "us", "--project-devices: latency per ring step (default 10)", 0},
    {"no-fuse", 0, NULL, "disable fused kernels (to measure what fusion buys)", 0},
    {"logits", 1, "FILE", "evaluate: write the test set's logits as NumPy .npy (float32, shape (N, classes))", 0},
    {"save", 1, "FILE", "train: write the trained parameters and buffers at the end (safetensors,\n"
                        "torchvision names; tools/ckpt_roundtrip.py reads it)", 0},
    {"load", 1, "FILE", "start from saved parameters and buffers (ours or a torchvision state_dict)", 0},
    {"checkpoint-dir", 1, "DIR", "train, tta: resumable checkpoints (parameters, buffers, optimizer state) in DIR\n"
                                 "on SIGINT/SIGTERM, every --checkpoint-every steps and at the end; the newest two\n"
                                 "are kept", 0},
    {"checkpoint-every", 1, "N", "train, tta: also checkpoint every N steps (needs --checkpoint-dir or --resume)", 0},
    {"resume", 1, "DIR", "train, tta: continue from the newest checkpoint in DIR (same configuration; keeps\n"
                         "checkpointing there unless --checkpoint-dir says otherwise)", 0},
    {"synthetic-samples", 1, "N[,M]", "--data synthetic: N training (and M test) samples (default 60000,1000\n"
                                      "to train, fewer to time and at large resolutions, said on stderr)", 1},
    {"out", 1, "FILE", "append result rows here (default results/results.jsonl; no other output or input\n"
                         "of the run may be this file)", 0},
    {"mllog", 1, "DIR|none", "MLPerf-style event logs <DIR>/<run id>.log (default: mllog/ beside --out)", 0},
    {"calibration", 1, "FILE", "machine ceilings for GFLOP/s shares (default " "results/calibration.json)", 0},
    {"tuning", 1, "FILE|none", "--conv-algo auto: the algorithms timed on this machine, kept for later runs of\n"
                               "this executable so they run the same kernels and bits (default\n"
                               "results/tuning.json; none: time them every run)", 0},
    {"run-id", 1, "ID", "name of this run in rows and logs (default: generated)", 0},
    {"quiet", 0, NULL, "no summary on stdout, no progress on stderr (warnings and errors only)", 0},
};

_Static_assert(sizeof options / sizeof *options <= BENCH_MAX_OPTIONS, "bench_config.given has a flag per option");

const struct bench_option *bench_options(int *n)
{
    *n = (int)(sizeof options / sizeof *options);
    return options;
}

const char *bench_plan_name(enum bench_plan p)
{
    switch (p) {
    case PLAN_TRAIN: return "train";
    case PLAN_THROUGHPUT: return "throughput";
    case PLAN_TTA: return "tta";
    case PLAN_SCALING: return "scaling";
    case PLAN_INFERENCE: return "inference";
    case PLAN_EVALUATE: return "evaluate";
    default: return "auto";
    }
}

void bench_config_defaults(struct bench_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->backend, sizeof c->backend, "cpu");
    snprintf(c->device, sizeof c->device, "cpu");
    snprintf(c->workload, sizeof c->workload, "mnist-mlp");
    snprintf(c->out, sizeof c->out, "results/results.jsonl");
    snprintf(c->calibration, sizeof c->calibration, "results/calibration.json");
    snprintf(c->tuning, sizeof c->tuning, "results/tuning.json");
    c->eval = 1;
    c->run.seed = 42;
    c->wopts.dropout = -1.0f;
    c->wopts.drop_connect = -1.0f;
    c->warmup = -1;
    c->lr = c->momentum = c->weight_decay = -1.0f;
}

static int get_long(const char *opt, const char *s, long lo, long hi, long *out)
{
    if (!s) return tb_error_set(TB_EINVAL, "--%s: expected an integer in %ld..%ld", opt, lo, hi);
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return tb_error_set(TB_EINVAL, "--%s: expected an integer in %ld..%ld, got '%s'", opt, lo, hi, s);
    *out = v;
    return TB_OK;
}

static int get_int(const char *opt, const char *s, long lo, long hi, int *out)
{
    long v = 0; /* get_long sets it on success; zeroed because the inlined code hides that from GCC */
    int st = get_long(opt, s, lo, hi, &v);
    if (st == TB_OK) *out = (int)v;
    return st;
}

static int get_double(const char *opt, const char *s, double lo, double hi, int hi_open, double *out)
{
    if (!s) return tb_error_set(TB_EINVAL, "--%s: expected a number", opt);
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v >= lo && (hi_open ? v < hi : v <= hi)))
        return tb_error_set(TB_EINVAL, "--%s: expected a number in [%g, %g%c, got '%s'", opt, lo, hi,
                            hi_open ? ')' : ']', s);
    *out = v;
    return TB_OK;
}

static int get_float(const char *opt, const char *s, double lo, double hi, int hi_open, float *out)
{
    double v = 0.0; /* get_double sets it on success; zeroed for GCC, as get_int does */
    int st = get_double(opt, s, lo, hi, hi_open, &v);
    if (st != TB_OK) return st;
    /* An open bound is checked again as stored: 0.99999999 is below 1 as a double and 1 as a float. */
    if (hi_open && (double)(float)v >= hi)
        return tb_error_set(TB_EINVAL, "--%s: expected a number in [%g, %g), got '%s' (%g in single precision)", opt,
                            lo, hi, s, (double)(float)v);
    *out = (float)v;
    return TB_OK;
}

static int get_str(const char *opt, const char *s, char *dst, size_t n);

/* A directory: as get_str, less trailing slashes, so "ck/" and "ck" are one directory wherever they are compared
 * as text (a resume and its checkpoint directory, a suite's directories). */
static int get_dir(const char *opt, const char *s, char *dst, size_t n)
{
    const int st = get_str(opt, s, dst, n);
    for (size_t len = strlen(dst); st == TB_OK && len > 1 && dst[len - 1] == '/'; len--) dst[len - 1] = '\0';
    return st;
}

static int get_str(const char *opt, const char *s, char *dst, size_t n)
{
    if (!s || !*s) return tb_error_set(TB_EINVAL, "--%s: needs a non-empty value", opt);
    if (strlen(s) >= n) return tb_error_set(TB_EINVAL, "--%s: value longer than %zu characters", opt, n - 1);
    memcpy(dst, s, strlen(s) + 1);
    return TB_OK;
}

/* Appends name to a ", "-separated list in buf (n bytes), as far as it fits. */
static void join_name(char *buf, size_t n, const char *name)
{
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "%s%s", used ? ", " : "", name);
}

/* One of the words in `valid` (a NULL-terminated list); the message lists them. */
static int get_choice(const char *opt, const char *s, const char *const *valid, char *dst, size_t n)
{
    for (int k = 0; valid[k]; k++)
        if (s && strcmp(s, valid[k]) == 0) return get_str(opt, s, dst, n);
    char names[160] = "";
    for (int k = 0; valid[k]; k++) join_name(names, sizeof names, valid[k]);
    return tb_error_set(TB_EINVAL, "--%s: unknown '%s' (valid: %s)", opt, s ? s : "", names);
}

/* A flag: no value, or 1/0, true/false, yes/no, on/off (suite files). */
static int get_flag(const char *opt, const char *s, int *out)
{
    if (!s || !strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) return *out = 1, TB_OK;
    if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) return *out = 0, TB_OK;
    return tb_error_set(TB_EINVAL, "--%s: a flag takes no value (or 1/0, true/false), got '%s'", opt, s);
}

/* A comma list of integers in lo..hi into out[0..max); *n receives the count. */
static int get_int_list(const char *opt, const char *s, long lo, long hi, int *out, int max, int *n)
{
    *n = 0;
    if (!s || !*s) return tb_error_set(TB_EINVAL, "--%s: needs a comma-separated list of integers", opt);
    char buf[512];
    if (strlen(s) >= sizeof buf) return tb_error_set(TB_EINVAL, "--%s: list too long", opt);
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == max) return tb_error_set(TB_EINVAL, "--%s: more than %d values", opt, max);
        long v;
        char *end;
        errno = 0;
        v = strtol(tok, &end, 10);
        if (errno || end == tok || *end != '\0' || v < lo || v > hi)
            return tb_error_set(TB_EINVAL, "--%s: '%s' in '%s' is not an integer in %ld..%ld", opt, tok, s, lo, hi);
        out[(*n)++] = (int)v;
    }
    if (*n == 0 || s[strlen(s) - 1] == ',' || s[0] == ',' || strstr(s, ",,"))
        return tb_error_set(TB_EINVAL, "--%s: empty item in '%s'", opt, s);
    return TB_OK;
}

/* A list of measurement points: a value twice would run (and record) the same point twice. */
static int list_unique(const char *opt, const char *s, const int *l, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (l[i] == l[j]) return tb_error_set(TB_EINVAL, "--%s: %d appears twice in '%s'", opt, l[i], s);
    return TB_OK;
}

static const char *const plan_names[] = {"train", "throughput", "tta", "scaling", "inference", "evaluate", NULL};
static const char *const conv_algo_choices[] = {"auto", "im2col", "direct", "fft", "gemm1x1", NULL};
static const char *const transports[] = {"shm", "mpi", NULL};
static const char *const schedules[] = {"gpipe", "1f1b", NULL};
static const char *const precisions[] = {"fp32", "fp16", "bf16", "fp16m", "bf16m", NULL};

/* A setter below returns this for an option that is not in its group (never a status: those are <= 0). */
#define NOT_MINE 1
#define IS(s) (strcmp(name, s) == 0)

/* --device: one of the devices known, and built into this binary. */
static int get_device(const char *s, char *dst, size_t n)
{
    int n_dev;
    const struct device_entry *d = device_registry(&n_dev), *hit = NULL;
    char known[160] = "", built[160] = "";
    for (int k = 0; k < n_dev; k++) {
        join_name(known, sizeof known, d[k].name);
        if (d[k].built) join_name(built, sizeof built, d[k].name);
        if (strcmp(d[k].name, s) == 0) hit = &d[k];
    }
    if (!hit) return tb_error_set(TB_EINVAL, "--device: unknown '%s' (valid: %s)", s, known);
    if (!hit->built)
        return tb_error_set(TB_EINVAL, "--device: device %s is not built in this binary (built: %s)", s, built);
    return get_str("device", s, dst, n);
}

/* The backend, workload, plan and what it measures (--batch, --steps, ... and the scaling lists). */
static int set_plan_option(struct bench_config *c, const char *name, const char *v)
{
    char tmp[32];
    int n = 0, list[BENCH_MAX_BATCHES];
    if (IS("backend")) return get_str(name, v, c->backend, sizeof c->backend);
    if (IS("device")) return get_device(v, c->device, sizeof c->device);
    if (IS("workload")) return get_str(name, v, c->workload, sizeof c->workload);
    if (IS("plan")) {
        int st = get_choice(name, v, plan_names, tmp, sizeof tmp);
        if (st == TB_OK)
            for (int k = 0; plan_names[k]; k++)
                if (!strcmp(v, plan_names[k])) c->plan = (enum bench_plan)(PLAN_TRAIN + k);
        return st;
    }
    if (IS("batch")) return get_int(name, v, 1, 1 << 20, &c->run.batch);
    if (IS("batch-per-replica")) return get_int(name, v, 1, 1 << 20, &c->batch_per_replica);
    if (IS("epochs")) return get_int(name, v, 1, 100000, &c->epochs);
    if (IS("steps-per-epoch")) return get_long(name, v, 1, 1L << 40, &c->steps_per_epoch);
    if (IS("steps")) return get_long(name, v, 1, 1L << 40, &c->steps);
    if (IS("warmup")) return get_int(name, v, 0, 1000000, &c->warmup);
    if (IS("steps-per-execution")) {
        if (v && !strcmp(v, "auto")) return c->steps_per_execution = 0, TB_OK;
        const int st = get_long(name, v, 1, 1L << 40, &c->steps_per_execution);
        if (st != TB_OK) /* the range's message, with the word it also takes */
            return tb_error_set(TB_EINVAL, "--steps-per-execution: expected auto or an integer in 1..%ld, got '%s'",
                                1L << 40, v ? v : "");
        return st;
    }
    if (IS("time-budget")) return get_double(name, v, 0.001, 1e7, 0, &c->time_budget);
    if (IS("repeat")) return get_int(name, v, 1, 1000, &c->repeat);
    if (IS("target")) {
        double t = 0.0;
        int st = get_double(name, v, 1e-9, 1.0, 0, &t); /* --help's range */
        if (st == TB_OK) c->target = t;
        return st;
    }
    if (IS("eval-every")) return get_long(name, v, 1, 1L << 40, &c->eval_every);
    if (IS("seeds")) return get_int(name, v, 1, 1000, &c->seeds);
    if (IS("max-epochs")) return get_int(name, v, 1, 100000, &c->max_epochs);
    if (IS("batches")) {
        int st = get_int_list(name, v, 1, 1 << 20, list, BENCH_MAX_BATCHES, &n);
        if (st == TB_OK) st = list_unique(name, v, list, n);
        if (st != TB_OK) return st;
        memcpy(c->batches, list, (size_t)n * sizeof *list);
        c->n_batches = n;
        c->batches_given = 1;
        return TB_OK;
    }
    if (IS("replicas-list") || IS("ga-list") || IS("micro-batch-list")) {
        int st = get_int_list(name, v, 1, IS("ga-list") ? 1 << 16 : IS("replicas-list") ? 1024 : 1 << 20, list,
                              BENCH_MAX_BATCHES, &n);
        if (st == TB_OK) st = list_unique(name, v, list, n);
        if (st != TB_OK) return st;
        int *dst = IS("replicas-list") ? c->replicas_list : IS("ga-list") ? c->ga_list : c->micro_batch_list;
        memcpy(dst, list, (size_t)n * sizeof *list);
        *(IS("replicas-list") ? &c->n_replicas_list : IS("ga-list") ? &c->n_ga_list : &c->n_micro_batch_list) = n;
        return TB_OK;
    }
    return NOT_MINE;
}

/* The optimizer, the seed, the data and the model, and evaluation. */
static int set_training_option(struct bench_config *c, const char *name, const char *v)
{
    long l = 0;
    if (IS("optimizer")) {
        enum optim_kind kind;
        if (optim_parse(v, &kind) != 0)
            return tb_error_set(TB_EINVAL, "--optimizer: unknown '%s' (valid: adam, sgd, rmsprop, lars)", v);
        c->optimizer_set = 1;
        return get_str(name, v, c->optimizer, sizeof c->optimizer);
    }
    if (IS("lr")) {
        int st = get_float(name, v, 1e-12, 1e3, 0, &c->lr);
        if (st == TB_OK) c->lr_set = 1;
        return st;
    }
    if (IS("momentum")) return get_float(name, v, 0.0, 1.0, 1, &c->momentum);
    if (IS("weight-decay")) return get_float(name, v, 0.0, 1.0, 0, &c->weight_decay);
    if (IS("seed")) {
        int st = get_long(name, v, 0, LONG_MAX, &l);
        if (st == TB_OK) c->run.seed = (uint64_t)l;
        return st;
    }
    if (IS("data")) return get_str(name, v, c->data, sizeof c->data);
    if (IS("classes")) return get_int(name, v, 2, 100000, &c->wopts.classes);
    if (IS("resolution")) return get_int(name, v, 8, 1024, &c->wopts.resolution);
    if (IS("norm")) {
        if (!strcmp(v, "batch")) {
            c->wopts.norm_groups = 0;
            return get_str(name, v, c->wopts.norm, sizeof c->wopts.norm);
        }
        if (!strncmp(v, "group", 5) && (v[5] == '\0' || v[5] == ':')) {
            c->wopts.norm_groups = 0;
            if (v[5] == ':') {
                int st = get_int("norm group count", v + 6, 1, 4096, &c->wopts.norm_groups);
                if (st != TB_OK) return tb_error_set(TB_EINVAL, "--norm: expected group:G with G in 1..4096, got '%s'", v);
            }
            snprintf(c->wopts.norm, sizeof c->wopts.norm, "group");
            return TB_OK;
        }
        return tb_error_set(TB_EINVAL, "--norm: expected batch, group or group:G, got '%s'", v);
    }
    if (IS("dropout")) return get_float(name, v, 0.0, 1.0, 1, &c->wopts.dropout);
    if (IS("bn-eps")) {
        int st = get_float(name, v, 0.0, 1.0, 0, &c->wopts.bn_eps);
        /* A normal float, as a --load file's bn_eps must be (strtof's range): 1e-45 was taken here, refused there.
         * One message for every value refused, 0 and 1.5 alike. */
        if (st != TB_OK || !(c->wopts.bn_eps >= FLT_MIN))
            st = tb_error_set(TB_EINVAL, "--bn-eps: expected a number in (0, 1] that a float holds (%g or more), got '%s'",
                              (double)FLT_MIN, v);
        return st;
    }
    if (IS("describe")) return get_flag(name, v, &c->describe);
    if (IS("threads")) return get_int(name, v, 1, 1024, &c->run.n_threads);
    if (IS("eval-batch")) return get_int(name, v, 1, 1 << 20, &c->eval_batch);
    if (IS("no-eval")) {
        int f;
        int st = get_flag(name, v, &f);
        if (st == TB_OK) c->eval = !f;
        return st;
    }
    return NOT_MINE;
}

/* What the backends read: kernels, threads, devices, pipelines, precision, profiling. */
static int set_backend_option(struct bench_config *c, const char *name, const char *v)
{
    int n = 0, list[BENCH_MAX_BATCHES];
    if (IS("conv-algo")) return get_choice(name, v, conv_algo_choices, c->run.conv_algo, sizeof c->run.conv_algo);
    if (IS("devices")) return get_int(name, v, 1, 1024, &c->run.n_devices);
    if (IS("transport")) {
        int st = get_choice(name, v, transports, c->transport, sizeof c->transport);
        if (st == TB_OK) c->run.transport_mpi = !strcmp(v, "mpi");
        return st;
    }
    if (IS("sync-bn")) return get_flag(name, v, &c->run.sync_bn);
    if (IS("stages")) return get_int(name, v, 1, 1024, &c->run.ipu.stages);
    if (IS("split")) {
        int st = get_int_list(name, v, 1, 100000, list, BENCH_MAX_BATCHES, &n);
        if (st != TB_OK) return st;
        for (int k = 1; k < n; k++)
            if (list[k] <= list[k - 1])
                return tb_error_set(TB_EINVAL, "--split: block indices must increase, got '%s'", v);
        return get_str(name, v, c->run.ipu.split, sizeof c->run.ipu.split);
    }
    if (IS("micro-batch")) return get_int(name, v, 1, 1 << 20, &c->run.ipu.micro_batch);
    if (IS("ga")) return get_int(name, v, 1, 1 << 16, &c->run.ipu.ga);
    if (IS("replicas")) return get_int(name, v, 1, 1024, &c->run.ipu.replicas);
    if (IS("schedule")) return get_choice(name, v, schedules, c->run.ipu.schedule, sizeof c->run.ipu.schedule);
    if (IS("recompute")) return get_flag(name, v, &c->run.ipu.recompute);
    if (IS("precision")) return get_choice(name, v, precisions, c->run.ipu.precision, sizeof c->run.ipu.precision);
    if (IS("prefetch")) {
        /* The backends read 0 as "their default" and a negative count as "none": 0 given means none. */
        const int st = get_int(name, v, 0, 1024, &c->run.ipu.prefetch);
        if (st == TB_OK && c->run.ipu.prefetch == 0) c->run.ipu.prefetch = -1;
        return st;
    }
    if (IS("loss-scale")) {
        if (!strcmp(v, "dynamic")) return c->run.ipu.loss_scale = 0.0f, TB_OK;
        char *end = NULL;
        errno = 0;
        const double x = strtod(v, &end);
        const double hi = (double)(float)RUN_LOSS_SCALE_MAX; /* stored as a float: 1e30 rounds up a little */
        if (errno || end == v || *end != '\0' || !(x >= RUN_LOSS_SCALE_MIN && x <= hi))
            return tb_error_set(TB_EINVAL, "--loss-scale: expected dynamic or a number in [%g, %g], got '%s'",
                                RUN_LOSS_SCALE_MIN, RUN_LOSS_SCALE_MAX, v);
        c->run.ipu.loss_scale = (float)x;
        return TB_OK;
    }
    if (IS("profile")) return get_flag(name, v, &c->run.profile);
    return NOT_MINE;
}

/* The learning-rate schedule and label smoothing. */
static int set_schedule_option(struct bench_config *c, const char *name, const char *v)
{
    if (IS("label-smoothing")) return get_float(name, v, 0.0, 1.0, 1, &c->wopts.label_smoothing);
    if (IS("lr-schedule")) {
        static const char *const schedules_lr[] = {"constant", "exponential", "polynomial", "cosine", NULL};
        return get_choice(name, v, schedules_lr, c->lr_schedule, sizeof c->lr_schedule);
    }
    if (IS("lr-warmup")) return get_long(name, v, 0, 1L << 40, &c->lr_warmup);
    if (IS("lr-decay-rate")) return get_float(name, v, 1e-6, 1.0, 0, &c->lr_decay_rate);
    if (IS("lr-decay-steps")) return get_long(name, v, 1, 1L << 40, &c->lr_decay_steps);
    if (IS("lr-power")) return get_float(name, v, 1e-3, 100.0, 0, &c->lr_power);
    if (IS("lr-final")) return get_float(name, v, 0.0, 1e3, 0, &c->lr_final);
    return NOT_MINE;
}

/* Traces, projections, checkpoints and where results go. */
static int set_output_option(struct bench_config *c, const char *name, const char *v)
{
    int n = 0, list[BENCH_MAX_BATCHES];
    if (IS("timeline")) return get_str(name, v, c->timeline, sizeof c->timeline);
    if (IS("trace")) return get_str(name, v, c->trace, sizeof c->trace);
    if (IS("trace-step")) return get_long(name, v, 1, 1L << 40, &c->trace_step);
    if (IS("project-devices")) {
        int st = get_int_list(name, v, 1, 1 << 20, list, BENCH_MAX_BATCHES, &n);
        if (st == TB_OK) st = list_unique(name, v, list, n);
        if (st != TB_OK) return st;
        memcpy(c->project_devices, list, (size_t)n * sizeof *list);
        c->n_project = n;
        return TB_OK;
    }
    if (IS("project-device")) return get_str(name, v, c->project_device, sizeof c->project_device);
    if (IS("device-set")) return get_str(name, v, c->device_set, sizeof c->device_set);
    if (IS("link-bw")) return get_double(name, v, 1e-3, 1e6, 0, &c->link_bw_gbs);
    if (IS("link-latency")) return get_double(name, v, 0.0, 1e6, 0, &c->link_lat_us);
    if (IS("allreduce-bw")) return get_double(name, v, 1e-3, 1e6, 0, &c->allreduce_bw_gbs);
    if (IS("allreduce-latency")) return get_double(name, v, 0.0, 1e6, 0, &c->allreduce_lat_us);
    if (IS("no-fuse")) return get_flag(name, v, &c->run.no_fuse);
    if (IS("save")) return get_str(name, v, c->save, sizeof c->save);
    if (IS("logits")) return get_str(name, v, c->logits, sizeof c->logits);
    if (IS("load")) return get_str(name, v, c->load, sizeof c->load);
    if (IS("checkpoint-dir")) return get_dir(name, v, c->checkpoint_dir, sizeof c->checkpoint_dir);
    if (IS("checkpoint-every")) return get_long(name, v, 1, 1L << 40, &c->checkpoint_every);
    if (IS("resume")) return get_dir(name, v, c->resume, sizeof c->resume);
    if (IS("synthetic-samples")) {
        int st = get_int_list(name, v, 1, 1L << 24, list, 2, &n);
        if (st == TB_OK) c->synthetic_train = list[0], c->synthetic_test = n > 1 ? list[1] : 0;
        return st;
    }
    if (IS("out")) return get_str(name, v, c->out, sizeof c->out);
    if (IS("mllog")) return get_str(name, v, c->mllog_dir, sizeof c->mllog_dir);
    if (IS("calibration")) return get_str(name, v, c->calibration, sizeof c->calibration);
    if (IS("tuning")) return get_str(name, v, c->tuning, sizeof c->tuning);
    if (IS("run-id")) {
        for (const char *p = v; *p; p++)
            if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || strchr("._-", *p)))
                return tb_error_set(TB_EINVAL, "--run-id: only letters, digits, '.', '_' and '-' (it names files), got '%s'", v);
        return get_str(name, v, c->run_id, sizeof c->run_id);
    }
    if (IS("quiet")) return get_flag(name, v, &c->quiet);
    return NOT_MINE;
}

int bench_config_set(struct bench_config *c, const char *name, const char *v)
{
    static int (*const setters[])(struct bench_config *, const char *, const char *) = {
        set_plan_option, set_training_option, set_backend_option, set_schedule_option, set_output_option};
    int k = 0;
    while (k < (int)(sizeof options / sizeof *options) && !IS(options[k].name)) k++;
    if (k == (int)(sizeof options / sizeof *options)) return tb_error_set(TB_EINVAL, "unknown option '%s'", name);
    if (options[k].has_arg && !v) return tb_error_set(TB_EINVAL, "--%s needs a value", name);
    c->finished = 0;
    for (size_t i = 0; i < sizeof setters / sizeof *setters; i++) {
        const int st = setters[i](c, name, v);
        if (st == NOT_MINE) continue;
        /* Remembered so that an option the chosen backend does not take can be refused (bench_config_finish). */
        if (st == TB_OK) c->given[k] = 1;
        return st;
    }
    return tb_error_set(TB_EINVAL, "option '%s' is listed but not handled (a bug in options.c)", name);
}
#undef IS

/* The options of the grid dimensions (replicas, accumulation, micro-batch), in bench_scaling_points's order. */
static const char *const grid_opt[] = {"replicas-list", "ga-list", "micro-batch-list"};

/* Whether the backend has grid dimension dim: it takes the dimension's list option. */
static int grid_has(const char *backend, int dim)
{
    return backend_takes_option(backend, grid_opt[dim]);
}

/* Whether the backend's replicas are its devices (mirrored), not replicas of its own (ipu). */
static int replicas_are_devices(const char *backend)
{
    const struct backend_entry *e = backend_find(backend);
    return e && e->caps.replicas_are_devices;
}

static int grid_given(const struct bench_config *c)
{
    return c->n_replicas_list || c->n_ga_list || c->n_micro_batch_list;
}

/* A grid of a backend with micro-batches (ipu) whose micro-batch and accumulation are both known: each
 * point's global batch is B·G·R. */
static int grid_product(const struct bench_config *c)
{
    return grid_given(c) && grid_has(c->backend, 2) && (c->n_micro_batch_list || c->run.ipu.micro_batch > 0) &&
           (c->n_ga_list || c->run.ipu.ga > 0);
}

static const int default_batches[] = {16, 32, 64, 128, 256};

int bench_scaling_points(const struct bench_config *c, struct bench_scaling_point *pts, int cap)
{
    /* mir: the replicas are devices (mirrored); acc: the backend splits a batch into micro-batches and
     * accumulation (ipu), so a grid point's replicas, ga and micro-batch are its own. */
    const int grid = grid_given(c), mir = replicas_are_devices(c->backend), acc = !mir && grid_has(c->backend, 1);
    static const char *const dim_what[] = {"replicas", "gradient accumulation", "micro-batches"};
    const int dim_n[] = {c->n_replicas_list, c->n_ga_list, c->n_micro_batch_list};
    const int dim_scalar[] = {c->run.ipu.replicas, c->run.ipu.ga, c->run.ipu.micro_batch};
    static const char *const scalar_opt[] = {"replicas", "ga", "micro-batch"};
    for (int d = 0; d < 3; d++) {
        if (!dim_n[d]) continue;
        if (!grid_has(c->backend, d)) {
            char who[128];
            const int n_who = backend_option_takers(grid_opt[d], who, sizeof who);
            return tb_error_set(TB_EINVAL, "--%s: backend %s has no %s (%s%s %s)", grid_opt[d], c->backend,
                                dim_what[d], n_who == 1 ? "only " : "", who, n_who == 1 ? "does" : "do");
        }
        if (dim_scalar[d] > 0)
            return tb_error_set(TB_EINVAL, "--%s and --%s both given: use one", grid_opt[d], scalar_opt[d]);
    }
    if (mir && c->n_replicas_list) {
        if (c->run.n_devices > 0)
            return tb_error_set(TB_EINVAL, "--replicas-list sets %s's --devices per point: drop --devices", c->backend);
        if (c->run.transport_mpi)
            return tb_error_set(TB_EINVAL, "--replicas-list: with --transport mpi the replicas are the MPI ranks "
                                           "(mpirun -n), one sweep per rank count");
    }
    const int product = grid_product(c);
    if (product && c->batches_given)
        return tb_error_set(TB_EINVAL, "--batches: with micro-batch and ga given, each %s point's global batch is "
                                       "micro-batch x ga x replicas; leave --batches out", c->backend);
    const int one_r = c->run.ipu.replicas, one_g = c->run.ipu.ga, one_b = c->run.ipu.micro_batch;
    const int *R = c->n_replicas_list ? c->replicas_list : &one_r, nR = c->n_replicas_list ? c->n_replicas_list : 1;
    const int *G = c->n_ga_list ? c->ga_list : &one_g, nG = c->n_ga_list ? c->n_ga_list : 1;
    const int *B = c->n_micro_batch_list ? c->micro_batch_list : &one_b, nB = c->n_micro_batch_list ? c->n_micro_batch_list : 1;
    const int zero = 0;
    const int *N = product ? &zero : c->n_batches ? c->batches : default_batches;
    const int nN = product ? 1 : c->n_batches ? c->n_batches : (int)(sizeof default_batches / sizeof *default_batches);
    int n = 0;
    for (int i = 0; i < nN; i++)
        for (int ir = 0; ir < nR; ir++)
            for (int ig = 0; ig < nG; ig++)
                for (int ib = 0; ib < nB; ib++) {
                    const int r = R[ir], g = G[ig], b = B[ib], rr = r > 0 ? r : 1;
                    const long batch = product ? (long)b * g * rr : N[i];
                    if (batch > (1L << 20))
                        return tb_error_set(TB_EINVAL, "--plan scaling: micro-batch %d x ga %d x replicas %d = %ld "
                                                       "samples is more than %d", b, g, rr, batch, 1 << 20);
                    if (grid && mir && (batch % rr || rr > batch))
                        return tb_error_set(TB_EINVAL, "--plan scaling: batch %ld does not split evenly over %d %s "
                                                       "replicas (devices)", batch, rr, c->backend);
                    if (grid && acc && !product) {
                        const int unit = (g > 0 ? g : b > 0 ? b : 1) * rr;
                        if (batch % unit) {
                            char what[80]; /* "ga 4 x replicas 2 = 8", or "replicas 3" when neither is given */
                            if (g > 0 || b > 0)
                                snprintf(what, sizeof what, "%s %d x replicas %d = %d", g > 0 ? "ga" : "micro-batch",
                                         g > 0 ? g : b, rr, unit);
                            else
                                snprintf(what, sizeof what, "replicas %d", rr);
                            return tb_error_set(TB_EINVAL, "--plan scaling: %s batch %ld is not a multiple of %s",
                                                c->backend, batch, what);
                        }
                    }
                    if (n >= BENCH_MAX_POINTS)
                        return tb_error_set(TB_EINVAL, "--plan scaling: the sweep has more than %d points",
                                            BENCH_MAX_POINTS);
                    if (n < cap) {
                        pts[n] = (struct bench_scaling_point){(int)batch, c->run.ipu.replicas, c->run.ipu.ga,
                                                              c->run.ipu.micro_batch, c->run.n_devices};
                        if (acc && grid) pts[n].replicas = r, pts[n].ga = g, pts[n].micro_batch = b;
                        if (mir && c->n_replicas_list) pts[n].devices = r;
                    }
                    n++;
                }
    return n;
}

int bench_option_given(const struct bench_config *c, const char *name)
{
    for (size_t k = 0; k < sizeof options / sizeof *options; k++)
        if (!strcmp(options[k].name, name)) return c->given[k];
    return 0;
}

void bench_config_recipe_lr(struct bench_config *c, const struct workload *w, int batch)
{
    if (c->lr_set || c->optimizer_set || w->lr <= 0.0f) return;
    c->run.optim.lr = w->lr;
    if (w->lr_batch > 0 && batch > 0) c->run.optim.lr *= (float)batch / (float)w->lr_batch;
}

/* The global batch when it is not given as --batch: --batch-per-replica B times the replicas (how
 * tf.distribute and Graphcore's IPUStrategy count it: a MirroredStrategy replica takes B samples, so
 * Keras's "batch 1" on two GPUs is a global batch of 2), or an ipu run's micro-batch x ga x replicas when
 * both are given (Graphcore's effective batch size). Without it a batch-1 seed could not run on two
 * devices or two pipeline stages at all (--batch is global: 1 sample cannot feed two replicas, nor fill a
 * two-stage pipeline), and --micro-batch 1 --ga 2 silently ran the workload's batch 32 as 16 replicas. */
static int global_batch(struct bench_config *c)
{
    const int bpr = bench_option_given(c, "batch-per-replica") ? c->batch_per_replica : 0;
    if (bench_option_given(c, "batch")) {
        if (bpr)
            return tb_error_set(TB_EINVAL, "--batch %d is the global batch and --batch-per-replica %d sets it too: "
                                           "give one of them", c->run.batch, bpr);
        return TB_OK;
    }
    if (c->plan == PLAN_SCALING) {
        if (bpr) return tb_error_set(TB_EINVAL, "--plan scaling takes --batches LIST, not --batch-per-replica");
        return TB_OK;
    }
    const struct backend_entry *e = backend_find(c->backend);
    const int mirrored = e && e->caps.replicas_are_devices;
    const int pipelined = backend_takes_option(c->backend, "micro-batch"); /* ipu: named only by it */
    if (bpr) {
        long R = 1;
        if (mirrored) {
            if (!strcmp(c->transport, "mpi"))
                return tb_error_set(TB_EINVAL, "--batch-per-replica: with --transport mpi the replicas are the MPI "
                                               "ranks, unknown until the run starts; give --batch (ranks x B)");
            long cores = tpool_cpus();
            R = c->run.n_devices > 0 ? c->run.n_devices : cores > 0 ? cores : 1;
        } else if (pipelined) {
            R = c->run.ipu.replicas > 0 ? c->run.ipu.replicas : 1;
        }
        if ((long)bpr * R > (1L << 20))
            return tb_error_set(TB_EINVAL, "--batch-per-replica %d x %ld replicas is more than %d samples", bpr, R, 1 << 20);
        /* The pipeline's own check would name --batch, which the user did not give: say it in their terms. */
        const int mb = pipelined ? c->run.ipu.micro_batch : 0, ga = pipelined ? c->run.ipu.ga : 0;
        if (mb > 0 && ga > 0 && bpr != mb * ga)
            return tb_error_set(TB_EINVAL, "--batch-per-replica %d is not --micro-batch %d x --ga %d: a replica's batch "
                                           "is its --ga micro-batches", bpr, mb, ga);
        if (mb > 0 && ga <= 0 && bpr % mb)
            return tb_error_set(TB_EINVAL, "--batch-per-replica %d is not a multiple of --micro-batch %d: a replica's "
                                           "batch is whole micro-batches", bpr, mb);
        if (ga > 0 && mb <= 0 && bpr % ga)
            return tb_error_set(TB_EINVAL, "--batch-per-replica %d is not a multiple of --ga %d: a replica's batch is "
                                           "its --ga micro-batches of one size", bpr, ga);
        c->run.batch = (int)((long)bpr * R);
    } else if (pipelined && c->run.ipu.micro_batch > 0 && c->run.ipu.ga > 0) {
        const long R = c->run.ipu.replicas > 0 ? c->run.ipu.replicas : 1;
        const long n = (long)c->run.ipu.micro_batch * c->run.ipu.ga * R;
        if (n > (1L << 20))
            return tb_error_set(TB_EINVAL, "--micro-batch %d x --ga %d x %ld replicas is more than %d samples",
                                c->run.ipu.micro_batch, c->run.ipu.ga, R, 1 << 20);
        c->run.batch = (int)n;
    }
    return TB_OK;
}

/* What the device refuses: an explicit --device other than the one the backend is tied to (cuda), and an
 * algorithm for --conv-algo or a --tuning file on the cuda device, whose kernels are its own (cuda/ never
 * reads either; the row recorded the algorithm, and "none" for the file). Also in bench_config_check_backend,
 * so that a suite's backend=* leaves such a backend out. */
static int device_refuses(const struct bench_config *c)
{
    const struct backend_entry *be = backend_find(c->backend);
    const char *tied = be ? be->caps.device : NULL;
    if (tied && bench_option_given(c, "device") && strcmp(c->device, tied) != 0)
        return tb_error_set(TB_EINVAL, "--backend %s runs on the %s device; --device %s contradicts it", c->backend,
                            tied, c->device);
    if (bench_option_given(c, "conv-algo") && strcmp(c->run.conv_algo, "auto") != 0 &&
        !strcmp(tied ? tied : c->device, "cuda"))
        return tb_error_set(TB_EINVAL, "--conv-algo %s: the cuda device runs its own convolution kernels and takes no "
                                       "algorithm choice (give auto, or run on --device cpu)", c->run.conv_algo);
    if (bench_option_given(c, "tuning") && strcmp(c->tuning, "none") != 0 && !strcmp(tied ? tied : c->device, "cuda"))
        return tb_error_set(TB_EINVAL, "--tuning %s: the cuda device runs its own convolution kernels and times no "
                                       "algorithms to keep (give none, or run on --device cpu)", c->tuning);
    /* What the cuda executors refuse when they are created (backend_mirrored.c's prepare_offhost,
     * executor_cuda_stage.c), said here too: a usage error, before a GPU is looked for (without one, these read
     * "no CUDA device", exit 1, and with one only after the replicas or stages were made). */
    if (!strcmp(tied ? tied : c->device, "cuda")) {
        if (!strcmp(c->backend, "mirrored") && c->run.sync_bn)
            return tb_error_set(TB_EINVAL, "--sync-bn: mirrored's replicas on the cuda device do not share BatchNorm "
                                           "statistics yet (that needs a device all-reduce inside the passes); drop "
                                           "it, or run on --device cpu");
        const char *prec = c->run.ipu.precision;
        if (!strcmp(c->backend, "ipu") && prec[0] && strcmp(prec, "fp32") != 0)
            return tb_error_set(TB_EINVAL, "--precision %s: the ipu's stages on the cuda device are fp32 only (2-byte "
                                           "storage of a stage is not implemented there yet); run on --device cpu",
                                prec);
        if (!strcmp(c->backend, "ipu") && c->run.ipu.recompute)
            return tb_error_set(TB_EINVAL, "--recompute: the ipu's stages on the cuda device do not recompute "
                                           "activations yet; drop it, or run on --device cpu");
    }
    return TB_OK;
}

/* --loss-scale where no loss is scaled (a precision other than fp16, or a plan that computes no gradient): the
 * row would record a setting the run ignored (after the backend's check, so that a backend without the option
 * names itself). */
static int loss_scale_unused(const struct bench_config *c)
{
    if (!bench_option_given(c, "loss-scale")) return TB_OK;
    const char *prec = c->run.ipu.precision[0] ? c->run.ipu.precision : "fp32";
    if (strcmp(prec, "fp16") != 0 && strcmp(prec, "fp16m") != 0)
        return tb_error_set(TB_EINVAL, "--loss-scale applies to --precision fp16 or fp16m (this run is %s, which "
                                       "scales no loss)", prec);
    if (c->plan == PLAN_INFERENCE || c->plan == PLAN_EVALUATE)
        return tb_error_set(TB_EINVAL, "--loss-scale applies to the plans that train; --plan %s computes no gradient",
                            bench_plan_name(c->plan));
    return TB_OK;
}

int bench_config_times_only(const struct bench_config *c)
{
    return c->plan == PLAN_THROUGHPUT || c->plan == PLAN_INFERENCE || (c->plan == PLAN_SCALING && c->epochs == 0);
}

int bench_config_synthetic(const struct bench_config *c)
{
    /* What the plans that only time steps measure must not depend on a dataset being installed or decoded. */
    return strcmp(c->data, "synthetic") == 0 || (!c->data[0] && bench_config_times_only(c));
}

const char *bench_config_project_list(const struct bench_config *c, char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    for (int i = 0; i < c->n_project; i++) {
        const size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%d", i ? "," : "", c->project_devices[i]);
    }
    return buf;
}

void bench_config_storage_bytes(const struct bench_config *c, int *act, int *param)
{
    const char *prec = c->run.ipu.precision;
    const size_t len = strlen(prec);
    *act = *param = 4;
    if (!len || !strcmp(prec, "fp32")) return;
    *act = 2;
    *param = prec[len - 1] == 'm' || !strcmp(c->device, "cuda") ? 4 : 2;
}

int bench_config_finish(struct bench_config *c)
{
    if (c->finished) return TB_OK;
    const struct workload *w = workload_find(c->workload);
    if (!w) return TB_EINVAL;
    /* TB_MEM_AVAILABLE stands in for the machine's memory when set: a value it cannot read would silently plan
     * for the real machine instead. */
    const char *mem = getenv("TB_MEM_AVAILABLE");
    if (mem && *mem && !(arena_mem_override() > 0.0))
        return tb_error_set(TB_EINVAL, "TB_MEM_AVAILABLE='%s' is not a byte count (a number, optionally with K, M "
                                       "or G: 300M, 16G)", mem);
    /* The model options a workload's builder applies; any other is a usage error, never a setting the row
     * records and the run ignores (mnist-mlp has no resolution, normalisation, dropout or BatchNorm). */
    static const struct { const char *opt; unsigned flag; } wl_opts[] = {
        {"resolution", WL_OPT_RESOLUTION}, {"norm", WL_OPT_NORM}, {"dropout", WL_OPT_DROPOUT}, {"bn-eps", WL_OPT_BN_EPS}};
    for (size_t k = 0; k < sizeof wl_opts / sizeof *wl_opts; k++)
        if (!(w->opts & wl_opts[k].flag) && bench_option_given(c, wl_opts[k].opt))
            return tb_error_set(TB_EINVAL, "--%s is not an option of workload %s (its model has no such setting; "
                                           "the EfficientNet workloads take it)", wl_opts[k].opt, w->name);
    /* Likewise an algorithm for convolutions the model does not have (the row recorded it): the convolutional
     * workloads are the ones that take an input resolution (auto, the default, says nothing). */
    if (!(w->opts & WL_OPT_RESOLUTION) && bench_option_given(c, "conv-algo") && strcmp(c->run.conv_algo, "auto") != 0)
        return tb_error_set(TB_EINVAL, "--conv-algo %s: workload %s has no convolutions to run with it (the "
                                       "EfficientNet workloads have)", c->run.conv_algo, w->name);
    struct backend probe;
    if (backend_create(&probe, c->backend) != TB_OK) return TB_EINVAL;
    backend_destroy(&probe);
    /* A backend tied to a device (cuda) runs there; the row records it. An explicit --device elsewhere is a
     * contradiction (it used to be dropped without a word): checked before the device is set. */
    int st = device_refuses(c);
    if (st != TB_OK) return st;
    /* A --tuning file with a fixed algorithm: only auto reads or writes the file, so the row recorded "none"
     * for the file named (after the device's refusals, which say more on cuda). */
    if (bench_option_given(c, "tuning") && strcmp(c->tuning, "none") != 0 && bench_option_given(c, "conv-algo") &&
        strcmp(c->run.conv_algo, "auto") != 0)
        return tb_error_set(TB_EINVAL, "--tuning %s: only --conv-algo auto reads or keeps a tuning file, and "
                                       "--conv-algo %s times nothing (give one or the other)", c->tuning,
                            c->run.conv_algo);
    const struct backend_entry *be = backend_find(c->backend);
    if (be && be->caps.device) snprintf(c->device, sizeof c->device, "%s", be->caps.device);

    st = global_batch(c);
    if (st != TB_OK) return st;

    enum optim_kind kind = w->optimizer;
    if (c->optimizer_set && optim_parse(c->optimizer, &kind) != 0)
        return tb_error_set(TB_EINVAL, "--optimizer: unknown '%s'", c->optimizer);
    optim_config_defaults(&c->run.optim, kind);
    if (c->lr_set) c->run.optim.lr = c->lr;
    else if (w->lr > 0.0f && kind == w->optimizer) c->run.optim.lr = w->lr;
    /* The workload's recipe (workload.h), unless the user chose the optimizer or the rate. */
    if (!c->lr_set && !c->optimizer_set) {
        bench_config_recipe_lr(c, w, c->run.batch > 0 ? c->run.batch : w->batch);
        c->run.optim.schedule = w->schedule;
        c->run.optim.warmup_steps = w->warmup_steps;
        if (w->decay_rate > 0.0f) c->run.optim.decay_rate = w->decay_rate;
        if (w->decay_steps > 0) c->run.optim.decay_steps = w->decay_steps;
        if (w->power > 0.0f) c->run.optim.power = w->power;
    }
    if (!c->wopts.norm[0] && w->norm) snprintf(c->wopts.norm, sizeof c->wopts.norm, "%s", w->norm);
    /* The group count that will run, so the row records it rather than 0 for "the builder's". */
    if (!strcmp(c->wopts.norm, "group") && c->wopts.norm_groups == 0) c->wopts.norm_groups = w->norm_groups;
    if (c->momentum >= 0.0f) c->run.optim.momentum = c->momentum;
    if (c->weight_decay >= 0.0f) c->run.optim.weight_decay = c->weight_decay;
    if (c->lr_schedule[0]) {
        static const char *const names[] = {"constant", "exponential", "polynomial", "cosine"};
        for (int k = 0; k < 4; k++)
            if (strcmp(c->lr_schedule, names[k]) == 0) c->run.optim.schedule = (enum lr_schedule)k;
    }
    if (bench_option_given(c, "lr-warmup")) c->run.optim.warmup_steps = c->lr_warmup;
    if (c->lr_decay_steps > 0) c->run.optim.decay_steps = c->lr_decay_steps;
    /* The exponential decay's step as the schedule runs it (optim.c takes 0 as 1) and --help states it: the row
     * recorded 0, and a run given --lr-decay-steps 1 was another configuration of the same function. */
    if (c->run.optim.schedule == LR_EXPONENTIAL && c->run.optim.decay_steps <= 0) c->run.optim.decay_steps = 1;
    if (c->lr_decay_rate > 0.0f) c->run.optim.decay_rate = c->lr_decay_rate;
    if (c->lr_power > 0.0f) c->run.optim.power = c->lr_power;
    if (c->lr_final > 0.0f) c->run.optim.final_lr = c->lr_final;

    /* A device projection alone trains nothing; with an explicit --plan the run also validates it. */
    c->project_only = c->project_device[0] && c->plan == PLAN_AUTO;
    const int plan_chosen = c->plan == PLAN_AUTO;
    if (c->plan == PLAN_AUTO) c->plan = (c->epochs > 0 || c->steps > 0) ? PLAN_TRAIN : PLAN_THROUGHPUT;
    const enum bench_plan p = c->plan;
    const char *pn = bench_plan_name(p);
    /* The plan as the messages below name it: where no --plan was given, what chose it, so that "(this is train)"
     * after `bench --steps 3 --repeat 5` points at --plan rather than contradicting what was typed. */
    char pw[80];
    if (!plan_chosen) snprintf(pw, sizeof pw, "%s", pn);
    else if (p == PLAN_TRAIN)
        snprintf(pw, sizeof pw, "train, which --%s chooses without --plan", c->steps > 0 ? "steps" : "epochs");
    else snprintf(pw, sizeof pw, "%s, the default plan", pn);
    if (c->seeds > 1 && p != PLAN_TTA) return tb_error_set(TB_EINVAL, "--seeds applies to --plan tta (this is %s)", pw);
    if (bench_option_given(c, "eval-batch") &&
        (p == PLAN_THROUGHPUT || p == PLAN_INFERENCE || (p == PLAN_SCALING && c->epochs <= 0)))
        return tb_error_set(TB_EINVAL, "--eval-batch applies to the plans that evaluate (train, tta, evaluate, scaling "
                                       "with --epochs); %s does not", pn);
    if ((c->target > 0.0 || c->eval_every > 0 || c->max_epochs > 0) && p != PLAN_TTA)
        return tb_error_set(TB_EINVAL, "--target, --eval-every and --max-epochs apply to --plan tta (this is %s)", pw);
    if (c->repeat > 1 && (p == PLAN_TRAIN || p == PLAN_TTA))
        return tb_error_set(TB_EINVAL, "--repeat applies to the throughput, scaling and inference plans (this is %s; "
                                       "tta takes --seeds)", pw);
    /* One pass of the test set, and a trained point, run once: a repeat the row recorded would be unrun. */
    if (c->repeat > 1 && p == PLAN_EVALUATE)
        return tb_error_set(TB_EINVAL, "--repeat: --plan evaluate runs the test set once (the same figures each time)");
    if (c->repeat > 1 && p == PLAN_SCALING && c->epochs > 0)
        return tb_error_set(TB_EINVAL, "--repeat applies to an untrained scaling sweep; with --epochs each point "
                                       "trains once");
    /* A trained point runs whole epochs (plan_train.c's length is --steps only for --plan train). */
    if (c->steps > 0 && p == PLAN_SCALING && c->epochs > 0)
        return tb_error_set(TB_EINVAL, "--steps applies to an untrained scaling sweep; with --epochs each point "
                                       "trains whole epochs (--steps-per-epoch sets their length)");
    /* Inference computes no loss. */
    if (p == PLAN_INFERENCE && bench_option_given(c, "label-smoothing"))
        return tb_error_set(TB_EINVAL, "--label-smoothing shapes the training loss; --plan inference computes none");
    if (c->n_batches > 0 && p != PLAN_SCALING)
        return tb_error_set(TB_EINVAL, "--batches applies to --plan scaling (this is %s; use --batch)", pw);
    if (grid_given(c) && p != PLAN_SCALING)
        return tb_error_set(TB_EINVAL, "--replicas-list, --ga-list and --micro-batch-list apply to --plan scaling "
                                       "(this is %s; use --replicas, --ga, --micro-batch)", pw);
    if (c->trace_step > 0 && !c->trace[0]) return tb_error_set(TB_EINVAL, "--trace-step needs --trace FILE");
    if (c->steps_per_execution > 0 && (p == PLAN_INFERENCE || p == PLAN_EVALUATE))
        return tb_error_set(TB_EINVAL, "--steps-per-execution applies to the plans that train (this is %s)", pw);
    if (c->steps_per_execution > 1 && (c->trace[0] || c->timeline[0]))
        return tb_error_set(TB_EINVAL, "--steps-per-execution %ld hands steps over in runs: --%s records single steps "
                                       "(give 1 or auto)", c->steps_per_execution, c->trace[0] ? "trace" : "timeline");
    if (c->trace[0] && p != PLAN_TRAIN && p != PLAN_THROUGHPUT && p != PLAN_TTA)
        return tb_error_set(TB_EINVAL, "--trace records one training step of one run: it applies to --plan train, "
                                       "throughput and tta (this is %s)", pw);
    if (p == PLAN_SCALING && c->run.batch > 0)
        return tb_error_set(TB_EINVAL, "--plan scaling takes --batches LIST, not --batch");
    if (p == PLAN_TTA && c->steps > 0)
        return tb_error_set(TB_EINVAL, "--plan tta runs until the target or --max-epochs; --steps does not apply");
    if (p == PLAN_INFERENCE && c->epochs > 0)
        return tb_error_set(TB_EINVAL, "--plan inference runs fresh weights; --epochs does not apply");
    if (p == PLAN_THROUGHPUT && c->epochs > 0)
        return tb_error_set(TB_EINVAL, "--plan throughput times --steps steps; --epochs does not apply (use --plan train)");
    if (c->logits[0] && p != PLAN_EVALUATE)
        return tb_error_set(TB_EINVAL, "--logits applies to --plan evaluate (this is %s)", pw);
    if (p == PLAN_EVALUATE && (c->epochs > 0 || c->steps > 0))
        return tb_error_set(TB_EINVAL, "--plan evaluate takes no --epochs or --steps: it runs the whole test set once");
    if (c->save[0] && p != PLAN_TRAIN) return tb_error_set(TB_EINVAL, "--save applies to --plan train (this is %s)", pw);
    if ((c->checkpoint_dir[0] || c->checkpoint_every || c->resume[0]) && p != PLAN_TRAIN && p != PLAN_TTA)
        return tb_error_set(TB_EINVAL, "--checkpoint-dir, --checkpoint-every and --resume apply to the plans that train "
                                       "to a result (train, tta); --plan %s %s, so there is nothing to resume: run it "
                                       "again", pn, p == PLAN_SCALING ? "is a sweep of separate measurements"
                                                    : "measures step times from fresh weights");
    if (c->resume[0] && c->load[0])
        return tb_error_set(TB_EINVAL, "--resume continues from its checkpoint; --load %s does not apply", c->load);
    if (c->checkpoint_every && !c->checkpoint_dir[0] && !c->resume[0])
        return tb_error_set(TB_EINVAL, "--checkpoint-every needs --checkpoint-dir DIR (or --resume DIR)");
    if (c->resume[0] && !c->checkpoint_dir[0]) snprintf(c->checkpoint_dir, sizeof c->checkpoint_dir, "%s", c->resume);
    if (p == PLAN_TTA && c->epochs > 0)
        return tb_error_set(TB_EINVAL, "--plan tta runs until the target or --max-epochs; --epochs does not apply");
    if (bench_option_given(c, "synthetic-samples") && !bench_config_synthetic(c)) {
        if (c->data[0])
            return tb_error_set(TB_EINVAL, "--synthetic-samples applies to --data synthetic; --data %s reads its files",
                                c->data);
        return tb_error_set(TB_EINVAL, "--synthetic-samples applies to synthetic data; --plan %s reads %s without "
                                       "--data (give --data synthetic)", bench_plan_name(p), DATASET_DEFAULT_DIR);
    }
    if (bench_option_given(c, "steps-per-epoch") &&
        (p == PLAN_THROUGHPUT || p == PLAN_INFERENCE || p == PLAN_EVALUATE || (p == PLAN_SCALING && c->epochs <= 0)))
        return tb_error_set(TB_EINVAL, "--steps-per-epoch applies to the plans that count epochs (train, tta, scaling "
                                       "with --epochs); %s does not", pn);
    if (c->run.profile && (p == PLAN_INFERENCE || p == PLAN_EVALUATE))
        return tb_error_set(TB_EINVAL, "--profile times the layers of training steps; --plan %s has none", pn);
    /* A trained scaling point always evaluates (plan_train.c): its test accuracy is the sweep's accuracy column. */
    if (bench_option_given(c, "no-eval") && p != PLAN_TRAIN)
        return tb_error_set(TB_EINVAL, "--no-eval applies to --plan train; %s %s", pn,
                            p == PLAN_TTA                         ? "evaluates to find its target"
                            : p == PLAN_EVALUATE                  ? "is the evaluation"
                            : p == PLAN_SCALING && c->epochs > 0 ? "with --epochs evaluates every point (its accuracy)"
                                                                  : "never evaluates");
    /* Plans that train nothing record no training recipe: an option of one would be a setting the run ignored. */
    if (p == PLAN_INFERENCE || p == PLAN_EVALUATE) {
        static const char *const recipe[] = {"optimizer", "lr", "momentum", "weight-decay", "lr-schedule", "lr-warmup",
                                             "lr-decay-rate", "lr-decay-steps", "lr-power", "lr-final", "dropout"};
        for (size_t k = 0; k < sizeof recipe / sizeof *recipe; k++)
            if (bench_option_given(c, recipe[k]))
                return tb_error_set(TB_EINVAL, "--%s applies to the plans that train; --plan %s runs %s weights in "
                                               "eval mode", recipe[k], pn, p == PLAN_EVALUATE ? "--load's" : "fresh");
        if (p == PLAN_EVALUATE && bench_option_given(c, "warmup"))
            return tb_error_set(TB_EINVAL, "--warmup applies to the timed plans; --plan evaluate runs the test set once");
    }
    /* A schedule's parameters belong to that schedule: another would leave them unused. */
    {
        static const char *const sched_names[] = {"constant", "exponential", "polynomial", "cosine"};
        static const struct { const char *opt; unsigned schedules; const char *which; } own[] = {
            {"lr-decay-rate", 1u << LR_EXPONENTIAL, "exponential"},
            {"lr-decay-steps", 1u << LR_EXPONENTIAL, "exponential"},
            {"lr-power", 1u << LR_POLYNOMIAL, "polynomial"},
            {"lr-final", 1u << LR_POLYNOMIAL | 1u << LR_COSINE, "polynomial or cosine"},
        };
        const enum lr_schedule sc = c->run.optim.schedule;
        for (size_t k = 0; k < sizeof own / sizeof *own; k++)
            if (bench_option_given(c, own[k].opt) && !(own[k].schedules & 1u << sc))
                return tb_error_set(TB_EINVAL, "--%s does not apply to the %s learning-rate schedule (--lr-schedule %s)",
                                    own[k].opt, sched_names[sc], own[k].which);
    }

    /* Adam's moments decay by its betas: a --momentum the row recorded would be one the run ignored. */
    if (bench_option_given(c, "momentum") && c->run.optim.kind == OPTIM_ADAM)
        return tb_error_set(TB_EINVAL, "--momentum applies to sgd, rmsprop and lars; this run's optimizer is adam%s",
                            c->optimizer_set ? "" : " (the workload's recipe: --optimizer chooses another)");

    /* The throughput plan's length follows --time-budget unless --steps says it (plan_throughput.c):
     * its warm-up is then up to 10 steps, cut short when slow steps would spend the budget on it. */
    c->budget_steps = p == PLAN_THROUGHPUT && c->steps <= 0;
    c->budget_warmup = c->budget_steps && c->warmup < 0;
    if (c->time_budget > 0.0 && p != PLAN_THROUGHPUT)
        return tb_error_set(TB_EINVAL, "--time-budget applies to --plan throughput (this is %s)", pw);
    if (c->time_budget > 0.0 && !c->budget_steps)
        return tb_error_set(TB_EINVAL, "--time-budget chooses the number of timed steps; --steps %ld sets it",
                            c->steps);
    if (c->budget_steps && c->warmup == 0)
        return tb_error_set(TB_EINVAL, "--warmup 0: a time budget sizes the timed steps on a warm-up step; give "
                                       "--warmup 1 or more, or --steps N");
    c->budget_s = c->time_budget > 0.0 ? c->time_budget : 60.0;
    if (c->warmup < 0) c->warmup = 10;
    if (c->repeat < 1) c->repeat = 1;
    if (c->seeds < 1) c->seeds = 1;
    if (p == PLAN_TTA) {
        if (c->max_epochs < 1) c->max_epochs = 15;
        if (c->target <= 0.0) {
            /* The workload's float target as the decimal it was written as (0.88, not 0.879999995). */
            char t[32];
            snprintf(t, sizeof t, "%.7g", (double)w->tta_target);
            c->target = strtod(t, NULL);
        }
        if (!(c->target > 0.0))
            return tb_error_set(TB_EINVAL, "--plan tta: workload %s has no default target; give --target ACC", w->name);
    }
    if ((p == PLAN_THROUGHPUT || p == PLAN_INFERENCE || (p == PLAN_SCALING && c->epochs == 0)) && c->steps <= 0)
        c->steps = 100;
    /* A measurement keeps each step's time for its statistics: past BENCH_MAX_TIMED_STEPS the throughput plan read
     * beyond its record (a crash after 2^24 steps, hours in) and inference's latency count overflowed an int. */
    if ((p == PLAN_THROUGHPUT || p == PLAN_INFERENCE || (p == PLAN_SCALING && c->epochs == 0)) &&
        (c->warmup + c->steps > BENCH_MAX_TIMED_STEPS || c->steps * c->repeat > BENCH_MAX_TIMED_STEPS))
        return tb_error_set(TB_EINVAL, "--steps %ld (--warmup %d, --repeat %d): --plan %s keeps every step's time, "
                                       "at most %ld steps a repeat with its warm-up and as many timed steps in all "
                                       "(--plan train runs longer)", c->steps, c->warmup, c->repeat, pn,
                            BENCH_MAX_TIMED_STEPS);
    if (p == PLAN_SCALING) {
        const int n = bench_scaling_points(c, NULL, 0);
        if (n < 0) return n;
        if (c->n_batches == 0 && !grid_product(c)) {
            memcpy(c->batches, default_batches, sizeof default_batches);
            c->n_batches = (int)(sizeof default_batches / sizeof *default_batches);
        }
    }
    if (c->trace[0]) {
        const long known = p == PLAN_THROUGHPUT && !c->budget_steps ? c->warmup + c->steps
                           : p == PLAN_TRAIN                         ? c->steps
                                                                     : 0;
        if (known > 0 && c->trace_step > known)
            return tb_error_set(TB_EINVAL, "--trace-step %ld: the run has %ld steps", c->trace_step, known);
        /* A time budget chooses its length after the warm-up, but never more than 100 timed steps
         * (plan_throughput.c): a step past that bound can never run. (tta's bound needs the training set's
         * size: plan_tta.c checks it.) */
        if (p == PLAN_THROUGHPUT && c->budget_steps && c->trace_step > c->warmup + 100)
            return tb_error_set(TB_EINVAL, "--trace-step %ld: a --time-budget run has at most %ld steps (%d warm-up + "
                                           "up to 100 timed)", c->trace_step, c->warmup + 100L, c->warmup);
        c->run.profile = 1;
        c->run.trace = 1;
    }
    /* After the plan's checks, so that a grid list on a backend without that dimension keeps its own
     * message (bench_scaling_points). */
    st = bench_config_check_backend(c);
    if (st != TB_OK) return st;
    if (c->device_set[0] && !c->project_device[0]) /* after the backend's check: cpu refuses it as ipu's option */
        return tb_error_set(TB_EINVAL, "--device-set %s overrides a --project-device spec; no --project-device is "
                                       "given", c->device_set);
    /* The link model is --project-devices' alone (a spec carries its own links): given without it, the row would
     * record a setting nothing read. */
    static const char *const links[] = {"link-bw", "link-latency", "allreduce-bw", "allreduce-latency"};
    for (int k = 0; k < 4 && c->n_project <= 0; k++)
        if (bench_option_given(c, links[k]))
            return tb_error_set(TB_EINVAL, "--%s sets the link model of --project-devices, which is not given (a "
                                           "--project-device spec has its own links: --device-set changes them)",
                                links[k]);
    /* --sync-bn changes only BatchNorm statistics: on a model without BatchNorm the row would record a setting
     * that changed nothing, and compare/report would key identical runs apart (after the backend's check, so
     * that cpu names the backend that takes it). The EfficientNet builder makes BatchNorm unless --norm group. */
    if (c->run.sync_bn && !(w->opts & WL_OPT_BN_EPS))
        return tb_error_set(TB_EINVAL, "--sync-bn is not an option of workload %s (its model has no BatchNorm "
                                       "layer; the EfficientNet workloads have them)", w->name);
    if (c->run.sync_bn && !strcmp(c->wopts.norm, "group"))
        return tb_error_set(TB_EINVAL, "--sync-bn: workload %s runs GroupNorm (--norm group), which has no batch "
                                       "statistics to synchronise; --norm batch gives it BatchNorm layers", w->name);
    /* Likewise BatchNorm's epsilon where GroupNorm replaced every BatchNorm (GroupNorm's epsilon is its own). */
    if (c->wopts.bn_eps > 0.0f && !strcmp(c->wopts.norm, "group"))
        return tb_error_set(TB_EINVAL, "--bn-eps: workload %s runs GroupNorm (--norm group), which has no BatchNorm "
                                       "layer to take it; --norm batch gives it BatchNorm layers", w->name);
    if ((st = loss_scale_unused(c)) != TB_OK) return st;
    struct stat out_sb;
    if (!c->mllog_dir[0] && stat(c->out, &out_sb) == 0 && !S_ISREG(out_sb.st_mode)) {
        /* --out /dev/null: no results kept, so no event log either (and no mllog/ made in /dev). */
        snprintf(c->mllog_dir, sizeof c->mllog_dir, "none");
    } else if (!c->mllog_dir[0]) {
        const char *slash = strrchr(c->out, '/');
        if (slash) snprintf(c->mllog_dir, sizeof c->mllog_dir, "%.*s/mllog", (int)(slash - c->out), c->out);
        else snprintf(c->mllog_dir, sizeof c->mllog_dir, "mllog");
    }
    c->finished = 1;
    return TB_OK;
}

int bench_config_check_backend(const struct bench_config *c)
{
    const int st = device_refuses(c);
    if (st != TB_OK) return st;
    for (size_t k = 0; k < sizeof options / sizeof *options; k++) {
        if (!c->given[k] || backend_takes_option(c->backend, options[k].name)) continue;
        char who[128];
        const int n_who = backend_option_takers(options[k].name, who, sizeof who);
        return tb_error_set(TB_EINVAL, "--%s is an option of the %s backend%s, not %s", options[k].name, who,
                            n_who > 1 ? "s" : "", c->backend);
    }
    return TB_OK;
}
