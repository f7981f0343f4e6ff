/* run.c — the run plans (train, throughput, tta, scaling, inference) over one session: data → model →
 * backend → measure → summary → result row (see run.h).
 *
 * Data order is a continuous stream over the training set: the sample at stream position p is
 * perm_e[p mod n] with e = p div n and perm_e a counter-based permutation per data epoch. A training
 * "epoch" is steps_per_epoch steps of that stream (Keras's steps_per_epoch on a repeated dataset), so
 * any batch size and step count is reproducible and identical on every backend.
 *
 * Every step is timed on its own (batch assembly included); the plans turn those times into
 * statistics with measure.h. Rows are written by one function, row_begin/row_end, whatever the plan.
 *
 * Reliability: SIGINT/SIGTERM only set a flag (a second one kills at once); the step loop checks it
 * between steps, so a run stops on a step boundary, writes a resumable checkpoint (--checkpoint-dir)
 * and a row with "status":"interrupted". Because the data stream and every random draw are pure
 * functions of (seed, step, sample), a checkpoint of params, buffers and optimizer state at step k is
 * all a resumed run needs to take the same steps k+1.. as an uninterrupted one; time to accuracy also
 * keeps its evaluations so far and its finished seeds in the checkpoint ("tta_state"). The measuring
 * plans (throughput, scaling, inference) have nothing to resume: a signal gives them a partial row. A
 * non-finite loss stops a run with a "status":"diverged" row that carries no throughput or accuracy figure.
 */
#define _GNU_SOURCE
#include "run.h"

#include "calibrate.h"
#include "clock.h"
#include "exec.h"
#include "finished.h"
#include "layer_profile.h"
#include "loss_watch.h"
#include "projection.h"
#include "checkpoint.h"
#include "json.h"
#include "machine.h"
#include "measure.h"
#include "mllog.h"
#include "outputs.h"
#include "progress.h"
#include "results.h"
#include "rng.h"
#include "status.h"
#include "timeline_row.h"
#include "trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------
 * Stopping on a signal. The first SIGINT/SIGTERM is remembered and the run stops after its current
 * step; the flag stays set (the process is on its way out: a suite's later runs stop before their first
 * step). A second signal restores the default action and re-raises it: kill now, no checkpoint. */

static volatile sig_atomic_t stop_signal;

void bench_request_stop(int signo)
{
    if (stop_signal) {
        signal(signo, SIG_DFL);
        raise(signo);
        return;
    }
    stop_signal = signo;
    static const char msg[] = "\nbench: stopping after the current step (signal again to quit at once)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

int bench_stop_signal(void)
{
    return (int)stop_signal;
}

const char *bench_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

void bench_stop_handlers_install(struct bench_stop_handlers *h)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    memset(h, 0, sizeof *h);
    sa.sa_handler = bench_request_stop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
        h->have_int = sigaction(SIGINT, &sa, &h->old_int) == 0;
    if (sigaction(SIGTERM, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
        h->have_term = sigaction(SIGTERM, &sa, &h->old_term) == 0;
}

void bench_stop_handlers_restore(const struct bench_stop_handlers *h)
{
    if (h->have_int) sigaction(SIGINT, &h->old_int, NULL);
    if (h->have_term) sigaction(SIGTERM, &h->old_term, NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * The session: data, model, initial weights and one prepared backend, shared by a plan's runs. */

/* The stream of training samples: batch assembly with a cached permutation per data epoch. */
struct stream {
    const struct dataset *ds;
    uint64_t seed;
    uint32_t *perm;
    long perm_epoch;
};

struct session {
    struct bench_config c;      /* resolved */
    const struct workload *w;
    struct dataset train, test;
    int synthetic;              /* the data are the synthetic set */
    struct model m;
    int have_model;
    float *params, *buffers;    /* initial values: (n_params), (n_buffers) */
    float *opt_zeros;           /* (optim_state_per_param · n_params) */
    struct backend be;
    int be_batch, be_eval_batch;/* what be was prepared for; 0 = none */
    uint8_t *bx;                /* (batch_cap, H, W, C) */
    int32_t *by;                /* (batch_cap) */
    int32_t *test_y;            /* (test.n) */
    int batch_cap;
    struct stream s;
    char desc[512];
    char run_base[96];          /* run id, or its stem for plans with several runs */
    struct machine_info mi;
    struct calibration cal;
    int have_cal;
    int peak_per_run;           /* the peak-memory high-water mark could be reset per run */
    double setup_time_s;
    int primary;                /* not a non-zero MPI rank: prints, writes rows and logs */
    double *prof0, *prof1;      /* --profile: per-layer (n_layers, 2) seconds at the start / end of a run */
    int prof_ok;                /* the backend delivered a per-layer profile at the start of this run */
    int loaded;                 /* params/buffers hold --load's file, not the seeded init */
    float *ck_params, *ck_buffers, *ck_opt; /* checkpoint staging: (n_params), (n_buffers), (spp · n_params) */
    long done_step;             /* session_steps: the last step completed */
    double last_loss;           /* ... and its mean loss (NaN before the first) */
    struct loss_watch watch;    /* the finite-loss divergence rule of the run's steps */
    /* what backends report per step (mirrored, ipu), summed since the last row: warm-up included */
    double sum_step, sum_compute, sum_allreduce, sum_exchange, sum_idle;
    long n_split;
    const char *row_status;     /* row_begin's "status" (NULL = "ok") */
    int split_replicas, split_accum; /* the prepared backend's own batch split (pipeline report), 0 = unknown */
    struct trace_capture trace; /* --trace: the chosen training step's events */
};

static const uint32_t *stream_perm(struct stream *s, long epoch)
{
    if (s->perm_epoch != epoch) {
        rng_permutation(s->perm, (uint32_t)s->ds->n, s->seed, ((uint64_t)RNG_STREAM_SHUFFLE << 32) | (uint64_t)epoch);
        s->perm_epoch = epoch;
    }
    return s->perm;
}

/* Copies the global batch of `step` (1-based) into x (batch, per) and y (batch). */
static void stream_batch(struct stream *s, long step, int batch, uint8_t *x, int32_t *y)
{
    const size_t per = (size_t)s->ds->h * s->ds->w * s->ds->c;
    const long n = s->ds->n;
    long p = (step - 1) * (long)batch;
    for (int j = 0; j < batch; j++, p++) {
        const uint32_t idx = stream_perm(s, p / n)[p % n];
        memcpy(x + (size_t)j * per, s->ds->images + (size_t)idx * per, per);
        y[j] = s->ds->labels[idx];
    }
}

/* The plans that only time steps default to synthetic data (tf_cnn_benchmarks' choice): what they
 * measure must not depend on a dataset being installed or decoded. */
static int plan_times_only(const struct bench_config *c)
{
    return c->plan == PLAN_THROUGHPUT || c->plan == PLAN_INFERENCE || (c->plan == PLAN_SCALING && c->epochs == 0);
}

static int max_batch(const struct session *s)
{
    int b = s->c.run.batch;
    if (s->c.plan == PLAN_SCALING) {
        struct bench_scaling_point pts[BENCH_MAX_POINTS];
        const int n = bench_scaling_points(&s->c, pts, BENCH_MAX_POINTS);
        for (int k = 0; k < n && k < BENCH_MAX_POINTS; k++) b = pts[k].batch > b ? pts[k].batch : b;
    }
    return b;
}

static int load_data(struct session *s)
{
    const struct bench_config *c = &s->c;
    const struct workload *w = s->w;
    int st;
    s->synthetic = strcmp(c->data, "synthetic") == 0 || (!c->data[0] && plan_times_only(c));
    if (s->synthetic) {
        /* The shape of the default dataset (28×28×1) unless the workload fixes one, so synthetic and
         * real runs time the same model. */
        int h = w->resolution ? w->resolution : 28, ch = w->channels ? w->channels : 1;
        int classes = c->wopts.classes > 0 ? c->wopts.classes : 10;
        int n_train = c->synthetic_train, n_test = c->synthetic_test;
        const long per = (long)h * h * ch;
        if (n_train <= 0) {
            if (plan_times_only(c)) {
                /* Enough to cycle through without holding more than ~64 MB of pixels. */
                long n = (64L << 20) / per;
                if (n > 8192) n = 8192;
                if (n < 2L * max_batch(s)) n = 2L * max_batch(s);
                n_train = (int)n;
            } else {
                n_train = 60000;
            }
        }
        if (n_test <= 0) n_test = plan_times_only(c) ? (max_batch(s) > 1024 ? max_batch(s) : 1024) : 10000;
        if ((st = dataset_synthetic(n_train, h, h, ch, classes, c->run.seed, 1, &s->train)) != TB_OK) return st;
        return dataset_synthetic(n_test, h, h, ch, classes, c->run.seed, 0, &s->test);
    }
    const char *dir = c->data[0] ? c->data : DATASET_DEFAULT_DIR;
    if ((st = dataset_load_dir(dir, 1, &s->train)) != TB_OK) return st;
    if ((st = dataset_load_dir(dir, 0, &s->test)) != TB_OK) return st;
    if ((st = dataset_check_pair(&s->train, &s->test)) != TB_OK) return st;
    /* Resample only for workloads that fix their input shape; EfficientNet resizes on the device. */
    int res = w->resolution, ch = w->channels ? w->channels : s->train.c;
    if ((res && (res != s->train.h || res != s->train.w)) || ch != s->train.c) {
        if (!res) res = s->train.h;
        struct dataset r;
        if ((st = dataset_resize(&s->train, res, res, ch, &r)) != TB_OK) return st;
        dataset_free(&s->train);
        s->train = r;
        if ((st = dataset_resize(&s->test, res, res, ch, &r)) != TB_OK) return st;
        dataset_free(&s->test);
        s->test = r;
    }
    return TB_OK;
}

static void session_close(struct session *s)
{
    backend_destroy(&s->be);
    if (s->have_model) model_free(&s->m);
    dataset_free(&s->train);
    dataset_free(&s->test);
    free(s->params);
    free(s->buffers);
    free(s->opt_zeros);
    free(s->bx);
    free(s->by);
    free(s->test_y);
    free(s->s.perm);
    free(s->prof0);
    free(s->prof1);
    free(s->ck_params);
    free(s->ck_buffers);
    free(s->ck_opt);
    trace_capture_free(&s->trace);
    memset(s, 0, sizeof *s);
}

static int session_open(struct session *s, const struct bench_config *c)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    int st = bench_config_finish(&s->c);
    if (st == TB_OK) st = outputs_check(&s->c);
    if (st != TB_OK) return st;
    const double t0 = tb_now_s();
    s->peak_per_run = measure_peak_reset();
    s->w = workload_find(s->c.workload);
    if (!s->w) return TB_EINVAL;
    if (s->c.trace[0]) {
        /* A trace path that cannot be written fails now, not after the run (a file made here is removed). */
        const int existed = access(s->c.trace, F_OK) == 0;
        FILE *f = fopen(s->c.trace, "a");
        if (!f) return tb_error_set(TB_EIO, "--trace %s: %s", s->c.trace, strerror(errno));
        fclose(f);
        if (!existed) remove(s->c.trace);
    }
    if (s->c.run.batch <= 0 && s->c.plan != PLAN_SCALING) s->c.run.batch = s->w->batch;
    if ((st = load_data(s)) != TB_OK) return st;
    struct workload_opts wo = s->c.wopts;
    wo.in_h = s->train.h, wo.in_w = s->train.w, wo.in_c = s->train.c;
    if (wo.classes <= 0) wo.classes = s->train.n_classes;
    s->c.wopts = wo;
    if ((st = s->w->build(&s->m, &wo)) != TB_OK) return st;
    s->have_model = 1;
    const int spp = optim_state_per_param(s->c.run.optim.kind);
    s->params = calloc(s->m.n_params ? s->m.n_params : 1, sizeof(float));
    s->buffers = calloc(s->m.n_buffers ? s->m.n_buffers : 1, sizeof(float));
    s->opt_zeros = calloc(s->m.n_params * (size_t)spp + 1, sizeof(float));
    s->s.perm = malloc((size_t)s->train.n * sizeof(uint32_t));
    s->test_y = malloc((size_t)(s->test.n ? s->test.n : 1) * sizeof(int32_t));
    s->batch_cap = max_batch(s);
    const size_t per = (size_t)s->train.h * s->train.w * s->train.c;
    s->bx = malloc((size_t)s->batch_cap * per);
    s->by = malloc((size_t)s->batch_cap * sizeof(int32_t));
    if (!s->params || !s->buffers || !s->opt_zeros || !s->s.perm || !s->test_y || !s->bx || !s->by)
        return tb_error_set(TB_ENOMEM, "out of memory preparing the run");
    for (int i = 0; i < s->test.n; i++) s->test_y[i] = s->test.labels[i];
    if (s->c.load[0]) {
        /* Init first so any padding between tensors holds what a fresh run has; then the file. */
        s->w->init(&s->m, s->params, s->buffers, s->c.run.seed);
        if ((st = checkpoint_load(s->c.load, &s->m, s->params, s->buffers)) != TB_OK) return st;
        s->loaded = 1;
    }
    machine_info_read(&s->mi);
    s->have_cal = calibrate_read(s->c.calibration, &s->cal) == TB_OK;
    tb_error_clear();
    if (s->c.run_id[0]) {
        snprintf(s->run_base, sizeof s->run_base, "%s", s->c.run_id);
    } else {
        static int counter;
        char ts[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
        snprintf(s->run_base, sizeof s->run_base, "%s-%s-%s-%s-%ld-%d", ts, bench_plan_name(s->c.plan), s->c.backend,
                 s->w->name, (long)getpid(), ++counter);
    }
    s->setup_time_s = tb_now_s() - t0;
    return TB_OK;
}

/* Prepares the backend for a global batch (re-creating it when the batch changes). */
static int session_backend(struct session *s, int batch, int eval_batch)
{
    if (s->be_batch == batch && s->be_eval_batch == eval_batch) return TB_OK;
    backend_destroy(&s->be);
    s->be_batch = s->be_eval_batch = 0;
    struct run_config rc = s->c.run;
    rc.batch = batch;
    rc.eval_batch = eval_batch;
    int st = backend_create(&s->be, s->c.backend);
    if (st == TB_OK) st = backend_prepare(&s->be, &s->m, &rc);
    if (st != TB_OK) return st;
    backend_describe(&s->be, s->desc, sizeof s->desc);
    s->be_batch = batch, s->be_eval_batch = eval_batch;
    /* A pipelined backend resolves replicas and accumulation itself (derived from the batch when not given). */
    struct pipeline_report pr;
    s->split_replicas = s->split_accum = 0;
    if (backend_pipeline_report(&s->be, &pr) == TB_OK) s->split_replicas = pr.replicas, s->split_accum = pr.ga;
    tb_error_clear();
    /* Under MPI every rank runs the plan; only rank 0 speaks and writes. */
    s->primary = backend_is_primary(&s->be);
    if (!s->primary) {
        s->c.quiet = 1;
        snprintf(s->c.mllog_dir, sizeof s->c.mllog_dir, "none");
    }
    return TB_OK;
}

/* --profile: snapshots the backend's summed per-layer times before a run's steps. */
static void profile_begin(struct session *s)
{
    s->prof_ok = 0;
    if (!s->c.run.profile) return;
    const size_t n = 2 * (size_t)s->m.n_layers;
    if (!s->prof0) s->prof0 = calloc(n, sizeof(double));
    if (!s->prof1) s->prof1 = calloc(n, sizeof(double));
    if (!s->prof0 || !s->prof1) return;
    if (backend_layer_profile(&s->be, s->prof0) == TB_OK) s->prof_ok = 1;
    else fprintf(stderr, "bench: note: %s\n", tb_error_get());
    tb_error_clear();
}

/* Fresh weights from the workload's seeded init (or --load's file), zero optimizer state, data order of
 * `seed`. */
static int session_reset(struct session *s, uint64_t seed)
{
    if (!s->loaded) s->w->init(&s->m, s->params, s->buffers, seed);
    int st = backend_set_tensors(&s->be, TF_PARAMS, s->params);
    if (st == TB_OK && s->m.n_buffers) st = backend_set_tensors(&s->be, TF_BUFFERS, s->buffers);
    if (st == TB_OK && s->m.n_params) st = backend_set_tensors(&s->be, TF_OPT, s->opt_zeros);
    s->s.ds = &s->train, s->s.seed = seed, s->s.perm_epoch = -1;
    return st;
}

/* Accuracy and mean loss on the whole test set. */
static int session_evaluate(struct session *s, double *acc, double *loss, double *time_s)
{
    const double t0 = tb_now_s();
    struct batch tb = {s->test.n, s->test.images, s->test_y};
    struct eval_stats ev = {0};
    int st = backend_evaluate(&s->be, &tb, &ev);
    *time_s = tb_now_s() - t0;
    if (st != TB_OK) return st;
    if (ev.n <= 0) return tb_error_set(TB_EINVAL, "evaluation saw no samples");
    *acc = (double)ev.correct / (double)ev.n;
    *loss = ev.loss_sum / (double)ev.n;
    return TB_OK;
}

/* Where a run keeps each step's time and loss: index step − base, kept while below cap. */
struct step_record {
    double *times, *losses;
    long base, cap;
};

static int step_record_init(struct step_record *r, long n)
{
    memset(r, 0, sizeof *r);
    r->base = 1;
    r->cap = n < (1L << 24) ? n : (1L << 24); /* a longer run keeps its first 2^24 steps */
    if (r->cap < 1) r->cap = 1;
    r->times = malloc((size_t)r->cap * sizeof(double));
    r->losses = malloc((size_t)r->cap * sizeof(double));
    if (!r->times || !r->losses) return tb_error_set(TB_ENOMEM, "out of memory for %ld step times", r->cap);
    return TB_OK;
}

static void step_record_free(struct step_record *r)
{
    free(r->times);
    free(r->losses);
    memset(r, 0, sizeof *r);
}

/* Steps from..to (1-based, inclusive) at the prepared batch, each timed on its own (batch assembly
 * included). The progress line shows done = pr_done + steps so far, and the rate since t_rate0 with
 * samples_before samples already counted. s->done_step and s->last_loss follow the last completed step.
 * A non-finite loss stops the run (TB_EDIVERGED); a stop signal stops it before the next step
 * (TB_EINTR). A skipped fp16 step (the ipu backend's dynamic loss scaling) is not divergence: the
 * backend handles it and reports a finite loss. */
static int session_steps(struct session *s, long from, long to, struct step_record *rec, struct progress *pr,
                         long pr_done, double t_rate0, long samples_before)
{
    const int batch = s->be_batch;
    s->done_step = from - 1;
    if (from == 1) s->last_loss = NAN, loss_watch_reset(&s->watch);
    for (long step = from; step <= to; step++) {
        if (stop_signal)
            return tb_error_set(TB_EINTR, "interrupted by %s after step %ld", bench_signal_name(stop_signal), step - 1);
        const double t0 = tb_now_s();
        stream_batch(&s->s, step, batch, s->bx, s->by);
        struct batch b = {batch, s->bx, s->by};
        struct step_stats ss;
        memset(&ss, 0, sizeof ss);
        int st = backend_train_step(&s->be, &b, step, &ss);
        if (st == TB_OK && step == to) st = backend_finish(&s->be); /* the deferred part of the last step */
        const double t1 = tb_now_s();
        const double l = ss.loss_sum / batch;
        if (st == TB_EDIVERGED || (st == TB_OK && (!isfinite(l) || ss.nonfinite))) {
            if (isfinite(l))
                return tb_error_set(TB_EDIVERGED, "%s/%s: diverged: non-finite gradients at step %ld (lower --lr?)",
                                    s->c.backend, s->w->name, step);
            return tb_error_set(TB_EDIVERGED, "%s/%s: diverged: the loss became %s at step %ld (lower --lr?)",
                                s->c.backend, s->w->name, isnan(l) ? "NaN" : l > 0 ? "+Inf" : "-Inf", step);
        }
        if (st == TB_OK && (st = loss_watch_feed(&s->watch, step, l, s->m.n_classes)) != TB_OK)
            return tb_error_set(st, "%s/%s: diverged: %s (lower --lr?)", s->c.backend, s->w->name, tb_error_get());
        if (st != TB_OK) return st;
        s->done_step = step, s->last_loss = l;
        s->sum_step += t1 - t0, s->sum_compute += ss.t_compute, s->sum_allreduce += ss.t_allreduce;
        s->sum_exchange += ss.t_exchange, s->sum_idle += ss.t_idle, s->n_split++;
        const long i = step - rec->base;
        if (i >= 0 && i < rec->cap) rec->times[i] = t1 - t0, rec->losses[i] = l;
        /* --trace: the chosen step, or every step so that the last one is kept (a copy of ~2 events per
         * layer, outside the step's timing). */
        if (s->c.trace[0] && (s->c.trace_step == 0 || step == s->c.trace_step) &&
            trace_capture_take(&s->trace, &s->be, step, t1 - t0) != TB_OK) {
            fprintf(stderr, "bench: warning: %s\n", tb_error_get());
            tb_error_clear();
        }
        if (pr->enabled) {
            const long k = step - from + 1;
            progress_update(pr, pr_done + k, l, (double)(samples_before + k * (long)batch) / (t1 - t_rate0));
        }
    }
    return TB_OK;
}

static void progress_label(const struct session *s, char *buf, size_t n, const char *extra)
{
    snprintf(buf, n, "%s%s %s/%s%s", s->c.progress_prefix, bench_plan_name(s->c.plan), s->c.backend, s->w->name,
             extra ? extra : "");
}

/* ---------------------------------------------------------------------------------------------------
 * The one row writer. */

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

/* Replicas and accumulation as configured: how a global batch splits (for the scaling table). */
static void batch_split(const struct session *s, int batch, int *replicas, int *accum, int *local)
{
    int r = s->c.run.replicas > 0 ? s->c.run.replicas : 1;
    if (strcmp(s->c.backend, "mirrored") == 0) r *= s->c.run.n_devices > 0 ? s->c.run.n_devices : s->mi.n_cores;
    int a = s->c.run.ga > 0 ? s->c.run.ga : 1;
    if (s->split_replicas > 0 && batch == s->be_batch) r = s->split_replicas, a = s->split_accum;
    *replicas = r, *accum = a;
    *local = batch / (r * a);
}

/* Threads the backend computes with, for choosing the matching sgemm ceiling. */
static int compute_threads(const struct session *s)
{
    if (strcmp(s->c.backend, "cpu") == 0) return 1;
    if (strcmp(s->c.backend, "threads") == 0 && s->c.run.n_threads > 0) return s->c.run.n_threads;
    if (s->c.run.n_devices > 0) return s->c.run.n_devices;
    return s->mi.n_cores > 0 ? s->mi.n_cores : 1;
}

/* Opens a row: schema, kind, run id, configuration, machine and build; leaves "figures" open. */
static void row_begin(const struct session *s, struct json_buf *b, const char *run_id, int batch, long steps,
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
    if (sweep) json_key_str(b, "sweep", sweep);
    json_key_str(b, "status", s->row_status ? s->row_status : "ok");
    json_key_object(b, "config");
    json_key_str(b, "plan", bench_plan_name(c->plan));
    json_key_str(b, "backend", c->backend);
    json_key_str(b, "backend_desc", s->desc);
    json_key_str(b, "workload", s->w->name);
    json_key_str(b, "model", s->m.name);
    json_key_str(b, "dataset", s->train.name);
    json_key_str(b, "data_source", s->train.source);
    json_key_int(b, "train_samples", s->train.n);
    json_key_int(b, "eval_samples", s->test.n);
    json_key_int(b, "batch", batch);
    json_key_int(b, "local_batch", local);
    json_key_int(b, "replicas_total", replicas);
    json_key_int(b, "accumulation", accum);
    json_key_int(b, "eval_batch", s->be_eval_batch);
    json_key_int(b, "steps", steps);
    json_key_int(b, "warmup", c->warmup);
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
    json_key_int(b, "devices", c->run.n_devices);
    json_key_str(b, "transport", c->transport[0] ? c->transport : "shm");
    json_key_bool(b, "sync_bn", c->run.sync_bn);
    json_key_int(b, "stages", c->run.stages);
    json_key_str(b, "split", c->run.split);
    json_key_int(b, "micro_batch", c->run.micro_batch);
    json_key_int(b, "ga", c->run.ga);
    json_key_int(b, "replicas", c->run.replicas);
    json_key_str(b, "schedule", c->run.schedule);
    json_key_bool(b, "recompute", c->run.recompute);
    json_key_str(b, "precision", c->run.precision[0] ? c->run.precision : "fp32");
    if (c->run.loss_scale > 0.0f) json_key_double(b, "loss_scale", c->run.loss_scale);
    else json_key_str(b, "loss_scale", "dynamic");
    json_key_int(b, "prefetch", c->run.prefetch);
    json_key_bool(b, "profile", c->run.profile);
    json_key_str(b, "trace", c->trace);
    json_key_int(b, "trace_step", c->trace_step);
    json_key_bool(b, "no_fuse", c->run.no_fuse);
    json_key_str(b, "save", c->save);
    json_key_str(b, "load", c->load);
    json_key_str(b, "checkpoint_dir", c->checkpoint_dir);
    json_key_int(b, "checkpoint_every", c->checkpoint_every);
    json_key_str(b, "resume", c->resume);
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
        json_key_double(b, "sgemm_1t_gflops", s->cal.sgemm_1t_gflops);
        json_key_double(b, "sgemm_all_gflops", s->cal.sgemm_all_gflops);
        json_key_int(b, "all_threads", s->cal.all_threads);
        json_key_double(b, "triad_1t_gbs", s->cal.triad_1t_gbs);
        json_key_double(b, "triad_all_gbs", s->cal.triad_all_gbs);
        json_key_str(b, "timestamp", s->cal.timestamp);
        json_end_object(b);
    }
    json_key_object(b, "figures");
}

/* Figures every row carries: achieved GFLOP/s (measured time × counted FLOPs), its share of the
 * calibrated sgemm ceiling, the estimated arithmetic intensity, and the peak memory. */
static void row_common_figures(const struct session *s, struct json_buf *b, double gflops, double bytes_per_step,
                               double flops_per_step)
{
    json_key_double(b, "gflops_per_s", gflops);
    if (bytes_per_step > 0.0) json_key_double(b, "est_intensity_flop_per_byte", flops_per_step / bytes_per_step);
    if (s->have_cal) {
        const int th = compute_threads(s);
        double peak = s->cal.sgemm_1t_gflops;
        if (th > 1 && s->cal.all_threads > 0)
            peak = s->cal.sgemm_all_gflops * (th < s->cal.all_threads ? (double)th / s->cal.all_threads : 1.0);
        json_key_int(b, "peak_threads", th);
        json_key_double(b, "sgemm_peak_gflops", peak);
        json_key_double(b, "sgemm_peak_share", gflops / peak);
    }
    json_key_double(b, "peak_rss_mib", measure_peak_rss_mib());
    json_key_str(b, "peak_rss_scope", s->peak_per_run ? "run" : "process");
    json_key_double(b, "setup_time_s", s->setup_time_s);
}

/* --profile: the per-layer forward and backward seconds per step over the `steps` steps since
 * profile_begin (warm-up included), as figures.layer_times. */
static void write_layer_times(struct session *s, struct json_buf *b, long steps)
{
    if (!s->prof_ok || steps < 1 || backend_layer_profile(&s->be, s->prof1) != TB_OK) {
        tb_error_clear();
        return;
    }
    json_key_int(b, "layer_times_steps", steps);
    json_key_array(b, "layer_times");
    for (int i = 0; i < s->m.n_layers; i++) {
        json_begin_object(b);
        json_key_str(b, "name", s->m.layers[i].name);
        json_key_str(b, "op", model_op_name(s->m.layers[i].op));
        json_key_double(b, "forward_s", (s->prof1[2 * i] - s->prof0[2 * i]) / (double)steps);
        json_key_double(b, "backward_s", (s->prof1[2 * i + 1] - s->prof0[2 * i + 1]) / (double)steps);
        json_end_object(b);
    }
    json_end_array(b);
    /* The same times by layer type, with achieved GFLOP/s: which layer types limit the speed. */
    double *d = malloc(2 * (size_t)s->m.n_layers * sizeof(double));
    struct layer_type_row rows[OP_COUNT];
    if (!d) return;
    for (int i = 0; i < 2 * s->m.n_layers; i++) d[i] = s->prof1[i] - s->prof0[i];
    const int n = layer_profile_by_type(&s->m, d, (double)steps * s->be_batch, rows);
    layer_profile_write_json(rows, n, b);
    if (s->primary && !s->c.quiet) {
        printf("  per layer type over %ld steps (forward + backward):\n", steps);
        layer_profile_print(rows, n, s->have_cal ? s->cal.sgemm_1t_gflops : 0.0, stdout);
    }
    free(d);
}

/* --trace: writes the captured step as a Chrome trace file and records it as figures.trace. A file that
 * cannot be written is a warning: the measurement in the row stands without it. */
static void write_trace(struct session *s, struct json_buf *b, const char *run_id)
{
    const struct bench_config *c = &s->c;
    if (!c->trace[0] || !s->primary) return;
    if (s->trace.step <= 0) {
        fprintf(stderr, "bench: warning: --trace %s: step %ld never ran; no trace written\n", c->trace, c->trace_step);
        return;
    }
    const struct trace_meta meta = {c->backend, s->w->name, s->desc, run_id, backend_n_devices(&s->be)};
    if (trace_write_file(c->trace, &s->trace, &s->m, &meta) != TB_OK) {
        fprintf(stderr, "bench: warning: %s\n", tb_error_get());
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
 * backend with this run's workload, batch, input shape, norm and data, in the same results file
 * (suites run cpu first; side-by-side runs append to one file). */
struct baseline_find {
    const struct session *s;
    int batch;
    double images_per_s;
    char run_id[96];
};

static int baseline_row(const struct json_value *row, long line_no, void *ctx)
{
    struct baseline_find *f = ctx;
    const struct session *s = f->s;
    (void)line_no;
    if (strcmp(json_get_str(row, "status", ""), "ok") != 0) return TB_OK;
    if (strcmp(json_get_str(row, "config.plan", ""), "throughput") != 0) return TB_OK;
    if (strcmp(json_get_str(row, "config.backend", ""), "cpu") != 0) return TB_OK;
    if (strcmp(json_get_str(row, "config.workload", ""), s->w->name) != 0) return TB_OK;
    if ((int)json_get_number(row, "config.batch", -1) != f->batch) return TB_OK;
    if ((int)json_get_number(row, "config.resolution", -1) != s->c.wopts.resolution) return TB_OK;
    if ((int)json_get_number(row, "config.input_h", -1) != s->m.in_h) return TB_OK;
    if (strcmp(json_get_str(row, "config.norm", ""), s->c.wopts.norm[0] ? s->c.wopts.norm : "default") != 0)
        return TB_OK;
    const double ips = json_get_number(row, "figures.images_per_s", 0.0);
    if (ips > 0) {
        f->images_per_s = ips;
        snprintf(f->run_id, sizeof f->run_id, "%s", json_get_str(row, "run_id", "?"));
    }
    return TB_OK;
}

/* Speed-up over the cpu baseline and scaling efficiency (speed-up ÷ devices), the figures users of
 * these suites compute by hand more than anything else. */
static void write_efficiency(struct session *s, struct json_buf *b, int batch, double images_per_s)
{
    const int devices = backend_n_devices(&s->be);
    json_key_int(b, "devices_used", devices);
    if (strcmp(s->c.backend, "cpu") == 0) return;
    struct baseline_find f = {.s = s, .batch = batch};
    if (results_read_rows(s->c.out, baseline_row, &f) != TB_OK || f.images_per_s <= 0) {
        tb_error_clear();
        if (s->primary && !s->c.quiet)
            printf("  scaling     no cpu baseline for this configuration in %s (run --backend cpu first)\n", s->c.out);
        return;
    }
    const double speedup = images_per_s / f.images_per_s;
    json_key_double(b, "speedup_vs_cpu", speedup);
    json_key_double(b, "scaling_efficiency", speedup / devices);
    json_key_str(b, "baseline_run_id", f.run_id);
    if (s->primary && !s->c.quiet)
        printf("  scaling     %.2fx the cpu baseline (%.1f images/s, run %s) on %d devices: efficiency %.0f %%\n",
               speedup, f.images_per_s, f.run_id, devices, 100.0 * speedup / devices);
}

/* The per-step split a replicated or pipelined backend reports (compute of the slowest replica,
 * all-reduce, exchange, idle), averaged over the steps since the last row, warm-up included. */
static void write_step_split(struct session *s, struct json_buf *b)
{
    const long n = s->n_split;
    const int any = n > 0 && (s->sum_compute > 0 || s->sum_allreduce > 0);
    if (any) {
        const double step = s->sum_step / n, ar = s->sum_allreduce / n;
        json_key_object(b, "step_split");
        json_key_int(b, "steps", n);
        json_key_double(b, "step_s", step);
        json_key_double(b, "compute_s", s->sum_compute / n);
        json_key_double(b, "allreduce_s", ar);
        json_key_double(b, "exchange_s", s->sum_exchange / n);
        json_key_double(b, "idle_s", s->sum_idle / n);
        json_key_double(b, "allreduce_share", step > 0 ? ar / step : 0.0);
        json_end_object(b);
        if (s->primary && !s->c.quiet)
            printf("  per step    %.1f ms: compute %.1f ms, all-reduce %.2f ms (%.1f %% of the step), exchange %.1f ms, "
                   "idle %.1f ms\n",
                   1e3 * step, 1e3 * s->sum_compute / n, 1e3 * ar, step > 0 ? 100.0 * ar / step : 0.0,
                   1e3 * s->sum_exchange / n, 1e3 * s->sum_idle / n);
    }
    s->sum_step = s->sum_compute = s->sum_allreduce = s->sum_exchange = s->sum_idle = 0.0;
    s->n_split = 0;
}

/* Pipelined backends: the measured per-stage accounting (labelled measured) and, with
 * --project-devices, the POD-scale projection built from it (labelled projected). */
static void write_pipeline(struct session *s, struct json_buf *b)
{
    struct pipeline_report r;
    if (backend_pipeline_report(&s->be, &r) != TB_OK) {
        tb_error_clear();
        return;
    }
    const int print = s->primary && !s->c.quiet;
    json_key_object(b, "pipeline");
    json_key_str(b, "label", "measured");
    json_key_int(b, "stages", r.stages);
    json_key_int(b, "micro_batch", r.micro_batch);
    json_key_int(b, "ga", r.ga);
    json_key_int(b, "replicas", r.replicas);
    json_key_double(b, "bubble_measured", r.bubble_measured);
    json_key_double(b, "bubble_ideal", r.bubble_ideal);
    json_key_double(b, "loss_scale", r.loss_scale);
    json_key_str(b, "loss_scale_mode", r.loss_scale_static ? "static" : "dynamic");
    json_key_int(b, "skipped_steps", r.skipped_steps);
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
        if (r.loss_scale != 1.0 || r.loss_scale_static || r.skipped_steps)
            printf("  loss scale  %g (%s), %ld step%s skipped on a gradient overflow\n", r.loss_scale,
                   r.loss_scale_static ? "static" : "dynamic", r.skipped_steps, r.skipped_steps == 1 ? "" : "s");
        for (int k = 0; k < r.stages && k < BACKEND_MAX_STAGES; k++)
            printf("  stage %-4d  compute %.3f s, exchange %.3f s, idle %.3f s, all-reduce %.3f s per step; "
                   "activations %.1f MiB (measured), weights %.1f MiB (+%.1f MiB fp32 window), gradients %.1f MiB\n",
                   k, r.t_compute[k], r.t_exchange[k], r.t_idle[k], r.t_allreduce[k], r.peak_act_bytes[k] / 1048576.0,
                   r.weight_bytes[k] / 1048576.0, r.weight_window_bytes[k] / 1048576.0, r.param_bytes[k] / 1048576.0);
    }
    if (s->c.n_project <= 0) return;
    struct proj_measured pm = {.stages = r.stages, .micro_batch = r.micro_batch};
    for (int k = 0; k < r.stages && k < PROJ_MAX_STAGES; k++) {
        pm.t_fwd[k] = r.t_fwd[k], pm.t_bwd[k] = r.t_bwd[k];
        pm.exchange_bytes[k] = r.exchange_bytes[k], pm.param_bytes[k] = r.param_bytes[k];
    }
    struct proj_links l;
    proj_links_default(&l);
    if (s->c.link_bw_gbs > 0) l.exchange_bw = s->c.link_bw_gbs * 1e9;
    if (s->c.link_lat_us > 0) l.exchange_lat = s->c.link_lat_us * 1e-6;
    if (s->c.allreduce_bw_gbs > 0) l.allreduce_bw = s->c.allreduce_bw_gbs * 1e9;
    if (s->c.allreduce_lat_us > 0) l.allreduce_lat = s->c.allreduce_lat_us * 1e-6;
    /* Graphcore's table keeps the global batch: B·G·R of this run, or 6144 for the IPU-POD default
     * (micro-batch 3, 2 stages: replicas 8..128 with accumulation 256..16) when it divides. */
    int global = r.micro_batch * r.ga * r.replicas;
    if (r.stages == 2 && r.micro_batch == 3) global = 6144;
    struct proj_row rows[BENCH_MAX_BATCHES];
    int n = proj_default_rows(s->c.project_devices, s->c.n_project, r.stages, r.micro_batch, global, rows);
    if (n == 0) return;
    proj_table(&pm, &l, rows, n);
    json_key_object(b, "projection");
    json_key_str(b, "label", "projected");
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
    if (print) proj_print(&pm, &l, rows, n, stdout);
}

/* Closes the row and appends it (only the primary process writes). Returns TB_OK or the writer's error. */
static int row_end(const struct session *s, struct json_buf *b)
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

static void write_throughput(struct json_buf *b, const struct measure_throughput *t)
{
    json_key_double(b, "images_per_s", t->images_per_s);
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

static void print_throughput(const struct measure_throughput *t, long warmup)
{
    /* %.4g: slow configurations (EfficientNet-B4 at 380x380 runs ~1 image/s) keep their digits. */
    printf("  images/s    %.4g overall; per step: median %.4g, mean %.4g ± %.2g (s.e.), jitter %.2g (1.4826·MAD)\n",
           t->images_per_s, t->rate.median, t->rate.mean, t->rate.stderr_, t->rate.mad_jitter);
    printf("  step time   median %.3f ms, p90 %.3f ms, p99 %.3f ms over %ld timed steps (%ld warm-up excluded)\n",
           1e3 * t->step.median, 1e3 * t->step_p90_s, 1e3 * t->step_p99_s, t->n_steps, warmup);
}

static void log_run_header(struct mllog *lg, const struct session *s, int batch, uint64_t seed)
{
    mllog_point_str(lg, "submission_benchmark", s->w->name);
    mllog_point_str(lg, "submission_platform", s->mi.cpu_model);
    mllog_event(lg, MLLOG_START, "init_start", "null", -1, NULL);
    mllog_point_int(lg, "global_batch_size", batch);
    mllog_point_int(lg, "seed", (long long)seed);
    mllog_point_str(lg, "opt_name", optim_name(s->c.run.optim.kind));
    mllog_point_num(lg, "opt_base_learning_rate", float_text(s->c.run.optim.lr));
    mllog_point_int(lg, "train_samples", s->train.n);
    mllog_point_int(lg, "eval_samples", s->test.n);
    mllog_event(lg, MLLOG_END, "init_stop", "null", -1, NULL);
}

static void open_log(struct mllog *lg, const struct session *s, const char *run_id)
{
    if (mllog_open_for(lg, s->c.mllog_dir, run_id, s->c.resume[0] != 0) != TB_OK)
        fprintf(stderr, "bench: warning: %s\n", tb_error_get());
}

/* ---------------------------------------------------------------------------------------------------
 * Checkpoints, resume, and the rows of runs that stopped early. */

/* What a resumed run must share with its checkpoint, as "key=value" words: everything that changes the
 * maths or the data order (workload and its options, data set, batch, seed, optimizer), nothing of the
 * backend's schedule, so a run may continue on another backend. The decay horizon counts only for a
 * schedule that decays (a constant rate lets a run be extended with a larger --steps). */
static void resume_config(const struct session *s, int batch, char *out, size_t n)
{
    const struct bench_config *c = &s->c;
    const struct optim_config *o = &c->run.optim;
    size_t k = 0;
#define ADD(...) (k < n ? (k += (size_t)snprintf(out + k, n - k, __VA_ARGS__)) : k)
    ADD("workload=%s model=%s params=%zu dataset=%s train_samples=%d classes=%d input=%dx%dx%d", s->w->name,
        s->m.name, s->m.n_params, s->train.name, s->train.n, s->m.n_classes, s->m.in_h, s->m.in_w, s->m.in_c);
    ADD(" resolution=%d norm=%s norm_groups=%d dropout=%.9g drop_connect=%.9g", c->wopts.resolution,
        c->wopts.norm[0] ? c->wopts.norm : "default", c->wopts.norm_groups, (double)c->wopts.dropout,
        (double)c->wopts.drop_connect);
    ADD(" batch=%d seed=%llu optimizer=%s lr=%.9g momentum=%.9g weight_decay=%.9g beta1=%.9g beta2=%.9g eps=%.9g"
        " rho=%.9g lars_eta=%.9g schedule=%d warmup_steps=%ld",
        batch, (unsigned long long)c->run.seed, optim_name(o->kind), (double)o->lr, (double)o->momentum,
        (double)o->weight_decay, (double)o->beta1, (double)o->beta2, (double)o->eps, (double)o->rho,
        (double)o->lars_eta, (int)o->schedule, o->warmup_steps);
    if (o->schedule != LR_CONSTANT)
        ADD(" total_steps=%ld decay_rate=%.9g decay_steps=%ld power=%.9g final_lr=%.9g", o->total_steps,
            (double)o->decay_rate, o->decay_steps, (double)o->power, (double)o->final_lr);
    /* Time to accuracy: what decides when it evaluates and stops (a train checkpoint has none of these
     * words, so neither plan takes the other's checkpoints). */
    if (c->plan == PLAN_TTA) {
        const long spe = c->steps_per_epoch > 0 ? c->steps_per_epoch : s->train.n / batch;
        ADD(" plan=tta target=%.9g eval_every=%ld steps_per_epoch=%ld max_epochs=%d seeds=%d", c->target,
            c->eval_every > 0 ? c->eval_every : spe, spe, c->max_epochs, c->seeds);
    }
#undef ADD
}

/* FNV-1a: the checkpoint records it beside the configuration text, which a resume compares word by word. */
static unsigned long long config_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (unsigned long long)h;
}

/* The value of key in a resume_config text into out ("(none)" if absent). */
static void config_value(const char *cfg, const char *key, char *out, size_t n)
{
    const size_t kl = strlen(key);
    for (const char *p = cfg; *p;) {
        const char *end = strchr(p, ' ');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            snprintf(out, n, "%.*s", (int)(len - kl - 1), p + kl + 1);
            return;
        }
        p += len;
        while (*p == ' ') p++;
    }
    snprintf(out, n, "(none)");
}

/* "batch=8 in the checkpoint, batch=16 now": the first word where two configurations differ. */
static void config_diff(const char *ckpt, const char *now, char *out, size_t n)
{
    snprintf(out, n, "the configuration differs");
    for (const char *p = now; *p;) {
        const char *end = strchr(p, ' '), *eq = strchr(p, '=');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (eq && eq < p + len) {
            char key[48], a[96], b[96];
            snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            config_value(ckpt, key, a, sizeof a);
            config_value(now, key, b, sizeof b);
            if (strcmp(a, b) != 0) {
                snprintf(out, n, "%s=%s in the checkpoint, %s=%s in this run", key, a, key, b);
                return;
            }
        }
        p += len;
        while (*p == ' ') p++;
    }
    /* A word only the checkpoint has (plan=tta when a train run resumes a tta checkpoint). */
    for (const char *p = ckpt; *p;) {
        const char *end = strchr(p, ' '), *eq = strchr(p, '=');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (eq && eq < p + len) {
            char key[48], b[96];
            snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            config_value(now, key, b, sizeof b);
            if (strcmp(b, "(none)") == 0) {
                snprintf(out, n, "%.*s in the checkpoint, no %s in this run", (int)len, p, key);
                return;
            }
        }
        p += len;
        while (*p == ' ') p++;
    }
}

/* Staging arrays for checkpoints, allocated on first use. */
static int session_ck_alloc(struct session *s)
{
    if (s->ck_params) return TB_OK;
    const int spp = optim_state_per_param(s->c.run.optim.kind);
    s->ck_params = calloc(s->m.n_params ? s->m.n_params : 1, sizeof(float));
    s->ck_buffers = calloc(s->m.n_buffers ? s->m.n_buffers : 1, sizeof(float));
    s->ck_opt = calloc(s->m.n_params * (size_t)spp + 1, sizeof(float));
    if (!s->ck_params || !s->ck_buffers || !s->ck_opt)
        return tb_error_set(TB_ENOMEM, "out of memory for a checkpoint of %s", s->m.name);
    return TB_OK;
}

/* Step's resumable checkpoint in --checkpoint-dir: params, buffers, optimizer state, and the metadata a
 * resume checks (configuration and its hash, step, training seconds so far). The data position needs no
 * field of its own: the stream is a pure function of (seed, step). Keeps the newest two checkpoints.
 * tta_state (time to accuracy, else NULL) is the plan's own JSON text: seed, evaluations so far, the
 * finished seeds. path receives the file's name; only the primary process writes. */
static int checkpoint_write(struct session *s, int batch, long step, long total, double train_s,
                            const char *tta_state, char *path, size_t n)
{
    const struct bench_config *c = &s->c;
    checkpoint_dir_path(c->checkpoint_dir, step, path, n);
    if (!s->primary) return TB_OK;
    const int spp = optim_state_per_param(c->run.optim.kind);
    int st = session_ck_alloc(s);
    if (st == TB_OK) st = backend_get_tensors(&s->be, TF_PARAMS, s->ck_params);
    if (st == TB_OK && s->m.n_buffers) st = backend_get_tensors(&s->be, TF_BUFFERS, s->ck_buffers);
    if (st == TB_OK && s->m.n_params && spp) st = backend_get_tensors(&s->be, TF_OPT, s->ck_opt);
    if (st != TB_OK) return st;
    char cfg[1024], hash[24], tv[40];
    resume_config(s, batch, cfg, sizeof cfg);
    snprintf(hash, sizeof hash, "%016llx", config_hash(cfg));
    snprintf(tv, sizeof tv, "%.17g", train_s);
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_str(&b, "trainbench_checkpoint", "1");
    json_key_str(&b, "regenerate", tta_state ? "bench --plan tta ... --checkpoint-dir DIR; continue with --resume DIR"
                                             : "bench --plan train ... --checkpoint-dir DIR; continue with --resume DIR");
    json_key_str(&b, "plan", bench_plan_name(c->plan));
    json_key_str(&b, "workload", s->w->name);
    json_key_str(&b, "backend", c->backend);
    json_key_str(&b, "run_id", s->run_base);
    json_key_str(&b, "config", cfg);
    json_key_str(&b, "config_hash", hash);
    json_key_int(&b, "step", step);
    json_key_int(&b, "total_steps", total);
    json_key_int(&b, "samples_seen", (long long)step * batch);
    json_key_str(&b, "train_time_s", tv);
    json_key_int(&b, "optimizer_state_copies", spp);
    json_key_int(&b, "checkpoint_every", c->checkpoint_every);
    if (tta_state) json_key_str(&b, "tta_state", tta_state);
    json_end_object(&b);
    st = json_buf_status(&b);
    if (st == TB_OK)
        st = checkpoint_save_state(path, &s->m, s->ck_params, s->ck_buffers, s->ck_opt, s->m.n_params ? spp : 0,
                                   json_buf_str(&b));
    else
        tb_error_set(st, "checkpoint %s: metadata could not be formatted", path);
    json_buf_free(&b);
    if (st == TB_OK) st = checkpoint_dir_prune(c->checkpoint_dir, 2);
    return st;
}

/* A metadata string of any length, malloc'd (a time-to-accuracy state grows with its evaluations; it
 * lives in the header, so it is shorter than the file). NULL with the error set if it cannot be read. */
static char *checkpoint_meta_alloc(const char *path, const char *key)
{
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f) fclose(f);
    if (size < 0) {
        tb_error_set(TB_EIO, "checkpoint %s: cannot read its size", path);
        return NULL;
    }
    char *out = malloc((size_t)size + 1);
    if (!out) {
        tb_error_set(TB_ENOMEM, "checkpoint %s: out of memory for its metadata '%s'", path, key);
        return NULL;
    }
    if (checkpoint_read_meta(path, key, out, (size_t)size + 1) != TB_OK) {
        free(out);
        return NULL;
    }
    return out;
}

/* --resume: loads the newest complete checkpoint of the directory into the backend; *start and *prev_s
 * receive its step and training seconds, *every its --checkpoint-every, path its name, and *tta_state
 * (when not NULL; malloc'd) the time-to-accuracy plan's state. A configuration that differs is a usage
 * error (TB_EINVAL naming the first difference); a file that cannot be read is skipped, with a warning,
 * for the one before it. */
static int resume_from(struct session *s, int batch, long total, long *start, double *prev_s, long *every, char *path,
                       size_t n, char **tta_state)
{
    const char *dir = s->c.resume;
    long steps[8];
    int cnt = 0, st = checkpoint_dir_list(dir, steps, 8, &cnt);
    char why[512];
    if (st != TB_OK) {
        snprintf(why, sizeof why, "%s", tb_error_get());
        return tb_error_set(st, "--resume: %s", why);
    }
    if (!cnt) return tb_error_set(TB_EIO, "--resume %s: no complete checkpoint (ckpt-*.safetensors) there", dir);
    if ((st = session_ck_alloc(s)) != TB_OK) return st;
    const int spp = optim_state_per_param(s->c.run.optim.kind);
    char want[1024];
    resume_config(s, batch, want, sizeof want);
    for (int i = 0; i < cnt; i++) {
        checkpoint_dir_path(dir, steps[i], path, n);
        char got[1024], hash[32], hv[24], stepv[32], tv[48];
        st = checkpoint_read_meta(path, "config", got, sizeof got);
        if (st == TB_OK) st = checkpoint_read_meta(path, "config_hash", hash, sizeof hash);
        if (st == TB_OK) st = checkpoint_read_meta(path, "step", stepv, sizeof stepv);
        if (st == TB_OK) st = checkpoint_read_meta(path, "train_time_s", tv, sizeof tv);
        if (st == TB_OK) snprintf(hv, sizeof hv, "%016llx", config_hash(got));
        if (st == TB_OK && (strcmp(hash, hv) != 0 || strtol(stepv, NULL, 10) != steps[i]))
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: its metadata does not agree with itself", path);
        if (st == TB_OK && strcmp(got, want) != 0) {
            config_diff(got, want, why, sizeof why);
            return tb_error_set(TB_EINVAL, "--resume %s: %s was made with another configuration (%s)", dir, path, why);
        }
        if (st == TB_OK && steps[i] > total)
            return tb_error_set(TB_EINVAL, "--resume %s: %s is at step %ld, past the %ld steps of this run", dir, path,
                                steps[i], total);
        if (st == TB_OK && tta_state) {
            free(*tta_state);
            if (!(*tta_state = checkpoint_meta_alloc(path, "tta_state"))) st = TB_EFORMAT;
        }
        if (st == TB_OK) {
            /* Padding between tensors as a fresh run has it. */
            memcpy(s->ck_params, s->params, s->m.n_params * sizeof(float));
            memcpy(s->ck_buffers, s->buffers, s->m.n_buffers * sizeof(float));
            memset(s->ck_opt, 0, s->m.n_params * (size_t)spp * sizeof(float));
            st = checkpoint_load_state(path, &s->m, s->ck_params, s->ck_buffers, s->ck_opt, s->m.n_params ? spp : 0);
        }
        if (st != TB_OK) {
            fprintf(stderr, "bench: warning: --resume: skipping %s\n", tb_error_get());
            continue;
        }
        st = backend_set_tensors(&s->be, TF_PARAMS, s->ck_params);
        if (st == TB_OK && s->m.n_buffers) st = backend_set_tensors(&s->be, TF_BUFFERS, s->ck_buffers);
        if (st == TB_OK && s->m.n_params && spp) st = backend_set_tensors(&s->be, TF_OPT, s->ck_opt);
        if (st != TB_OK) return st;
        *start = steps[i];
        *prev_s = strtod(tv, NULL);
        if (!(*prev_s >= 0.0)) *prev_s = 0.0;
        char ev[32];
        *every = checkpoint_read_meta(path, "checkpoint_every", ev, sizeof ev) == TB_OK ? strtol(ev, NULL, 10) : 0;
        if (*every < 0) *every = 0;
        tb_error_clear();
        return TB_OK;
    }
    return tb_error_set(TB_EFORMAT, "--resume %s: no checkpoint there could be read (%d tried; see the warnings)", dir,
                        cnt);
}

/* --checkpoint-dir: refuses a directory holding another run's checkpoints, creates a missing one. */
static int checkpoint_dir_ready(struct session *s)
{
    const struct bench_config *c = &s->c;
    if (!c->resume[0] || strcmp(c->resume, c->checkpoint_dir) != 0) {
        /* Another run's checkpoints would mix with this one's (pruning keeps the highest steps, and a
         * later --resume would pick them): a fresh run wants a directory of its own. */
        long other;
        int n_other = 0;
        if (checkpoint_dir_list(c->checkpoint_dir, &other, 1, &n_other) == TB_OK && n_other)
            return tb_error_set(TB_EINVAL, "--checkpoint-dir %s already holds another run's checkpoints (newest at step "
                                "%ld): continue it with --resume %s, or give an empty directory", c->checkpoint_dir,
                                other, c->checkpoint_dir);
        tb_error_clear();
    }
    return s->primary ? checkpoint_dir_create(c->checkpoint_dir) : TB_OK;
}

/* What a run that stopped early got done. Steps are global step numbers. */
struct stop_info {
    long planned, done, start;  /* steps planned, completed, completed before this process (resume) */
    double train_s, session_s;  /* training seconds: every session so far, this process */
    const char *checkpoint;     /* interrupted: the checkpoint written, or NULL */
    const char *sweep;          /* scaling: the sweep id, or NULL */
};

/* The row of a run that stopped early, then the stop's own status and message again. Interrupted:
 * what ran, marked "partial" (its rate is "partial_images_per_s", so no table mistakes it for a
 * measurement); diverged: where, and no throughput or accuracy figure (a run that blew up measured
 * nothing worth comparing). */
static int plan_stopped(struct session *s, int st, const char *run_id, int batch, const struct stop_info *si)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tb_error_get());
    s->row_status = st == TB_EINTR ? "interrupted" : "diverged";
    struct json_buf b;
    row_begin(s, &b, run_id, batch, si->planned, si->sweep);
    s->row_status = NULL;
    json_key_bool(&b, "partial", 1);
    json_key_int(&b, "completed_steps", si->done);
    json_key_int(&b, "planned_steps", si->planned);
    json_key_double(&b, "train_time_s", si->train_s);
    if (si->start > 0) {
        json_key_int(&b, "resumed_from_step", si->start);
        json_key_double(&b, "session_train_time_s", si->session_s);
    }
    if (st == TB_EINTR) {
        json_key_str(&b, "stopped_by", bench_signal_name(stop_signal));
        const long ran = si->done - si->start;
        if (ran > 0 && si->session_s > 0.0)
            json_key_double(&b, "partial_images_per_s", (double)ran * batch / si->session_s);
        json_key_double(&b, "last_loss", s->last_loss);
        if (si->checkpoint) json_key_str(&b, "checkpoint", si->checkpoint);
        else json_key_null(&b, "checkpoint");
    } else {
        json_key_int(&b, "diverged_at_step", si->done + 1);
        json_key_str(&b, "reason", msg);
    }
    json_key_double(&b, "peak_rss_mib", measure_peak_rss_mib());
    json_key_double(&b, "setup_time_s", s->setup_time_s);
    if (row_end(s, &b) != TB_OK) fprintf(stderr, "bench: warning: %s\n", tb_error_get());
    return tb_error_set(st, "%s", msg);
}

/* ---------------------------------------------------------------------------------------------------
 * Plans. */

/* What a point of a scaling sweep is compared with: the sweep's first successful point. */
struct scale_base {
    int batch, replicas;
    double images_per_s;   /* 0: this point is the base */
};

/* What one measured point hands back to the scaling plan. */
struct point_result {
    double images_per_s;
    double test_accuracy;  /* NaN when not trained/evaluated */
    double peak_rss_mib;
};

/* The scaling figures of a point (inside "figures"): the split of the global batch, speed-up and
 * efficiency relative to the base point (itself for the first). */
static void write_scaling(struct json_buf *b, const struct session *s, const struct scale_base *sb, int batch,
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

/* The training run: --epochs or --steps over the data, then the test accuracy. Also the points of a
 * trained scaling sweep (sb non-NULL). With --resume it continues a checkpoint's run from its step;
 * with --checkpoint-dir it checkpoints every --checkpoint-every steps, on a stop signal and at the end;
 * --save writes the final weights. Training time excludes checkpoint writing and adds the seconds the
 * resumed run had already trained. */
static int plan_train(struct session *s, int batch, const char *run_id, const struct scale_base *sb,
                      struct point_result *res)
{
    struct bench_config *c = &s->c;
    const int epochs = c->epochs > 0 ? c->epochs : s->w->epochs;
    const long spe = c->steps_per_epoch > 0 ? c->steps_per_epoch : s->train.n / batch;
    if (spe <= 0) return tb_error_set(TB_EINVAL, "--batch %d is larger than the training set (%d samples)", batch, s->train.n);
    const long total = (c->plan == PLAN_TRAIN && c->steps > 0) ? c->steps : (long)epochs * spe;
    const int eval_batch = c->eval_batch > 0 ? c->eval_batch : (batch > 256 ? batch : 256);
    c->run.optim.total_steps = total;
    int st = session_backend(s, batch, eval_batch);
    if (st == TB_OK) st = session_reset(s, c->run.seed);
    if (st != TB_OK) return st;
    const int ckpt = !sb && c->checkpoint_dir[0];
    long start = 0, resumed_every = 0;
    double prev_train = 0.0;
    char resumed_from[600] = "", ckpt_path[600] = "";
    if (!sb && c->resume[0] && (st = resume_from(s, batch, total, &start, &prev_train, &resumed_every, resumed_from,
                                                 sizeof resumed_from, NULL)) != TB_OK)
        return st;
    char note[1200];
    if (c->resume[0] && start == total && finished_at(c->resume, total, note, sizeof note)) {
        fprintf(stderr, "bench: --resume %s: the run %s: nothing to do, no new row\n", c->resume, note);
        return TB_OK;
    }
    /* A resumed run keeps its checkpoint cadence unless told otherwise. */
    if (!c->checkpoint_every) c->checkpoint_every = resumed_every;
    const long every = ckpt ? c->checkpoint_every : 0;
    if (ckpt && (st = checkpoint_dir_ready(s)) != TB_OK) return st;
    struct step_record rec;
    if ((st = step_record_init(&rec, total - start)) != TB_OK) {
        step_record_free(&rec);
        return st;
    }
    rec.base = start + 1;
    struct mllog lg;
    open_log(&lg, s, run_id);
    log_run_header(&lg, s, batch, c->run.seed);
    if (start > 0) mllog_point_int(&lg, "resumed_from_step", start);
    mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);

    struct progress pr;
    char label[96], extra[24] = "";
    if (sb) snprintf(extra, sizeof extra, " b%d", batch);
    progress_label(s, label, sizeof label, extra);
    progress_init(&pr, total, label);
    profile_begin(s);
    const double t0 = tb_now_s();
    double ckpt_time = 0.0;
    /* The newest checkpoint of this run in --checkpoint-dir (the resumed one if that is the same directory). */
    long step = start, ckpt_step = start > 0 && strcmp(c->checkpoint_dir, c->resume) == 0 ? start : -1;
    int n_ckpt = 0;
    s->done_step = start, s->last_loss = NAN;
    while (step < total && st == TB_OK) {
        if (step % spe == 0) mllog_event(&lg, MLLOG_START, "epoch_start", "null", step / spe + 1, NULL);
        long to = (step / spe + 1) * spe;
        if (to > total) to = total;
        if (every > 0 && (step / every + 1) * every < to) to = (step / every + 1) * every;
        st = session_steps(s, step + 1, to, &rec, &pr, step, t0, (step - start) * (long)batch);
        step = s->done_step;
        if (st != TB_OK) break;
        if (step % spe == 0) mllog_event(&lg, MLLOG_END, "epoch_stop", "null", step / spe, NULL);
        if (every > 0 && step % every == 0) {
            /* A periodic checkpoint is insurance: if it cannot be written (disk full), say so and train
             * on; the one at the end or on a stop signal must succeed. */
            const double c0 = tb_now_s();
            if (checkpoint_write(s, batch, step, total, prev_train + (c0 - t0 - ckpt_time), NULL, ckpt_path,
                                 sizeof ckpt_path) == TB_OK)
                ckpt_step = step, n_ckpt++;
            else
                fprintf(stderr, "bench: warning: step %ld: %s\n", step, tb_error_get());
            tb_error_clear();
            ckpt_time += tb_now_s() - c0;
        }
    }
    double session_train = tb_now_s() - t0 - ckpt_time;
    progress_finish(&pr);
    const long ran = step - start;
    /* Interrupted: a checkpoint of the last completed step, so that --resume loses nothing. Also at the
     * end of a complete run, before the evaluation, so a kill during it loses nothing either. */
    if (ckpt && ckpt_step == step && !ckpt_path[0]) snprintf(ckpt_path, sizeof ckpt_path, "%s", resumed_from);
    /* A failed final checkpoint does not void the measurement: its row is still written, naming the
     * failure, and the run then exits 1 with that error. */
    char ckpt_err[512] = "";
    if (ckpt && (st == TB_OK || st == TB_EINTR) && step > 0 && ckpt_step != step) {
        char msg[512], new_path[sizeof ckpt_path];
        snprintf(msg, sizeof msg, "%s", tb_error_get());
        const double c0 = tb_now_s();
        const int wst = checkpoint_write(s, batch, step, total, prev_train + session_train, NULL, new_path,
                                         sizeof new_path);
        ckpt_time += tb_now_s() - c0;
        if (wst == TB_OK) ckpt_step = step, n_ckpt++, memcpy(ckpt_path, new_path, sizeof ckpt_path);
        if (st == TB_OK) {
            if (wst != TB_OK) snprintf(ckpt_err, sizeof ckpt_err, "%s", tb_error_get());
        } else {
            if (wst != TB_OK) fprintf(stderr, "bench: warning: no checkpoint: %s\n", tb_error_get());
            tb_error_set(st, "%s", msg);
        }
    }
    if (st == TB_EINTR || st == TB_EDIVERGED) {
        mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, "aborted");
        mllog_close(&lg);
        step_record_free(&rec);
        const int have_ck = st == TB_EINTR && ckpt && ckpt_step == step && step > 0;
        if (st == TB_EINTR) {
            if (have_ck)
                tb_error_set(st, "%s of %ld; checkpoint %s (continue with --resume %s)", tb_error_get(), total,
                             ckpt_path, c->checkpoint_dir);
            else
                tb_error_set(st, "%s of %ld; no checkpoint (%s)", tb_error_get(), total,
                             sb ? "a scaling point is a measurement, not resumable"
                             : !ckpt ? "give --checkpoint-dir DIR to make runs resumable"
                             : step == 0 ? "nothing trained yet" : "it could not be written");
        }
        const struct stop_info si = {total, step, start, prev_train + session_train, session_train,
                                     have_ck ? ckpt_path : NULL, sb ? s->run_base : NULL};
        return plan_stopped(s, st, run_id, batch, &si);
    }
    const long recorded = ran < rec.cap ? ran : rec.cap;
    const long warm = recorded > c->warmup ? c->warmup : 0;
    struct measure_throughput tp;
    memset(&tp, 0, sizeof tp);
    if (st == TB_OK && recorded > 0) st = measure_throughput(rec.times, recorded, warm, batch, &tp);
    double acc = NAN, loss = NAN, eval_time = 0.0;
    const int evaluated = c->eval || sb;
    if (st == TB_OK && evaluated) {
        mllog_event(&lg, MLLOG_START, "eval_start", "null", epochs, NULL);
        st = session_evaluate(s, &acc, &loss, &eval_time);
        if (st == TB_OK) {
            char v[40];
            json_format_double(acc, v, sizeof v);
            mllog_event(&lg, MLLOG_POINT, "eval_accuracy", v, (long)((total + spe - 1) / spe), NULL);
            mllog_event(&lg, MLLOG_END, "eval_stop", "null", epochs, NULL);
        }
    }
    if (st == TB_OK && !sb && c->save[0] && s->primary) {
        st = session_ck_alloc(s);
        if (st == TB_OK) st = backend_get_tensors(&s->be, TF_PARAMS, s->ck_params);
        if (st == TB_OK && s->m.n_buffers) st = backend_get_tensors(&s->be, TF_BUFFERS, s->ck_buffers);
        if (st == TB_OK) {
            char meta[256];
            snprintf(meta, sizeof meta, "{\"workload\":\"%s\",\"step\":%ld,\"run_id\":\"%s\"}", s->w->name, total,
                     run_id);
            st = checkpoint_save(c->save, &s->m, s->ck_params, s->ck_buffers, meta);
        }
    }
    mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK ? "success" : "aborted");
    mllog_close(&lg);
    if (st != TB_OK) {
        step_record_free(&rec);
        return st;
    }
    const long window = recorded < 100 ? recorded : 100;
    double tail = 0.0;
    for (long i = recorded - window; i < recorded; i++) tail += rec.losses[i];
    const double final_loss = window > 0 ? tail / (double)window : NAN, first_loss = recorded > 0 ? rec.losses[0] : NAN;
    /* Over every session of the run: what the run cost, not what this process did. */
    const double train_time = prev_train + session_train;
    const double images_per_s = (double)total * batch / train_time;
    const double flops_step = model_train_flops_per_sample(&s->m) * batch;
    const double gflops = flops_step * (double)total / train_time * 1e-9;
    if (res) res->images_per_s = images_per_s, res->test_accuracy = acc, res->peak_rss_mib = measure_peak_rss_mib();

    struct json_buf b;
    row_begin(s, &b, run_id, batch, total, sb ? s->run_base : NULL);
    json_key_double(&b, "train_time_s", train_time);
    json_key_int(&b, "train_steps", total);
    json_key_int(&b, "samples", total * batch);
    if (recorded > 0) write_throughput(&b, &tp);
    /* The training run's headline rate covers every step, warm-up included (as it always has);
     * the per-step statistics above exclude the warm-up. */
    json_key_double(&b, "images_per_s", images_per_s);
    json_key_int(&b, "warmup_steps", warm);
    json_key_double(&b, "first_loss", first_loss);
    json_key_double(&b, "final_loss", final_loss);
    if (start > 0) {
        json_key_int(&b, "resumed_from_step", start);
        json_key_str(&b, "resumed_from", resumed_from);
        json_key_double(&b, "previous_train_time_s", prev_train);
        json_key_double(&b, "session_train_time_s", session_train);
        json_key_int(&b, "session_steps", ran);
    }
    if (ckpt) {
        json_key_int(&b, "checkpoints_written", n_ckpt);
        json_key_double(&b, "checkpoint_time_s", ckpt_time);
        json_key_str(&b, "checkpoint", ckpt_path);
        if (ckpt_err[0]) json_key_str(&b, "checkpoint_error", ckpt_err);
    }
    if (evaluated) {
        json_key_double(&b, "test_accuracy", acc);
        json_key_double(&b, "test_loss", loss);
        json_key_double(&b, "eval_time_s", eval_time);
    }
    write_scaling(&b, s, sb, batch, images_per_s);
    write_layer_times(s, &b, ran);
    write_trace(s, &b, run_id);
    write_pipeline(s, &b);
    write_step_split(s, &b);
    row_common_figures(s, &b, gflops, measure_train_bytes_per_step(&s->m, batch, optim_state_per_param(c->run.optim.kind)),
                       flops_step);
    st = row_end(s, &b);
    if (st == TB_OK && ckpt && ckpt_step == total && s->primary && finished_mark(c->checkpoint_dir, total, run_id, c->out))
        fprintf(stderr, "bench: warning: %s\n", tb_error_get());

    if (!c->quiet && !c->compact && !sb) {
        printf("trainbench %s on %s (%s)\n", s->w->name, s->train.name, s->desc);
        printf("  config      batch %d, %ld steps (%d epochs x %ld steps), %s lr %g, seed %llu\n", batch, total, epochs,
               spe, optim_name(c->run.optim.kind), (double)c->run.optim.lr, (unsigned long long)c->run.seed);
        if (start > 0)
            printf("  resumed     at step %ld from %s (%.3f s of training before this run)\n", start, resumed_from,
                   prev_train);
        printf("  training    %.3f s, %.0f images/s, %.2f GFLOP/s\n", train_time, images_per_s, gflops);
        if (recorded > 0) print_throughput(&tp, warm);
        if (recorded > 0)
            printf("  loss        %.4f at step %ld, %.4f mean of the last %ld steps\n", first_loss, start + 1,
                   final_loss, window);
        if (evaluated)
            printf("  test        accuracy %.2f %% on %d images, loss %.4f (%.2f s)\n", 100.0 * acc, s->test.n, loss,
                   eval_time);
        if (ckpt)
            printf("  checkpoint  %s (%d written, %.3f s, not counted as training)\n", ckpt_path[0] ? ckpt_path : "none",
                   n_ckpt, ckpt_time);
        if (c->save[0]) printf("  saved       %s\n", c->save);
        printf("  result row  %s (run %s)\n", c->out, run_id);
    } else if (c->compact && !c->quiet && !sb) {
        printf("%strain %s/%s b%d%s%s: %.0f img/s over %ld steps", c->progress_prefix, c->backend, s->w->name, batch,
               c->variant[0] ? " " : "", c->variant, images_per_s, total);
        if (evaluated) printf(", test accuracy %.2f %%", 100.0 * acc);
        printf("\n");
    }
    step_record_free(&rec);
    if (st == TB_OK && ckpt_err[0]) st = tb_error_set(TB_EIO, "%s (the result row was written)", ckpt_err);
    return st;
}

static void write_repeats(struct json_buf *b, const double *rep, int n)
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

/* Throughput at one batch: --repeat × (fresh weights, --warmup untimed steps, --steps timed steps).
 * The throughput plan, and the untrained points of a scaling sweep (sb non-NULL). */
static int plan_throughput_at(struct session *s, int batch, const char *run_id, const struct scale_base *sb,
                              struct point_result *res)
{
    struct bench_config *c = &s->c;
    const long per = c->warmup + c->steps, n_timed = (long)c->repeat * c->steps;
    c->run.optim.total_steps = per;
    int st = session_backend(s, batch, batch);
    if (st != TB_OK) return st;
    double *all = malloc((size_t)n_timed * sizeof *all), *rep = calloc((size_t)c->repeat, sizeof *rep);
    struct step_record rec;
    st = step_record_init(&rec, per);
    if (st == TB_OK && (!all || !rep)) st = tb_error_set(TB_ENOMEM, "out of memory for %ld step times", n_timed);
    struct mllog lg = {0};
    if (st == TB_OK) {
        open_log(&lg, s, run_id);
        log_run_header(&lg, s, batch, c->run.seed);
        mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);
    }
    char label[96], extra[24] = "";
    if (sb) snprintf(extra, sizeof extra, " b%d", batch);
    progress_label(s, label, sizeof label, extra);
    struct progress pr;
    progress_init(&pr, per * c->repeat, label);
    double final_loss = NAN, t_steps = 0.0;
    long steps_before = 0; /* steps of the finished repeats */
    if (st == TB_OK) profile_begin(s);
    for (int r = 0; r < c->repeat && st == TB_OK; r++, steps_before += per) {
        if ((st = session_reset(s, c->run.seed)) != TB_OK) break;
        const double t0 = tb_now_s();
        st = session_steps(s, 1, per, &rec, &pr, (long)r * per, t0, 0);
        t_steps += tb_now_s() - t0;
        if (st != TB_OK) break;
        struct measure_throughput one;
        if ((st = measure_throughput(rec.times, per, c->warmup, batch, &one)) != TB_OK) break;
        rep[r] = one.images_per_s;
        memcpy(all + (size_t)r * c->steps, rec.times + c->warmup, (size_t)c->steps * sizeof(double));
        const long win = c->steps < 100 ? c->steps : 100;
        double tail = 0.0;
        for (long i = per - win; i < per; i++) tail += rec.losses[i];
        final_loss = tail / (double)win;
    }
    progress_finish(&pr);
    mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK ? "success" : "aborted");
    mllog_close(&lg);
    if (st == TB_EINTR || st == TB_EDIVERGED) {
        step_record_free(&rec);
        free(all);
        free(rep);
        if (st == TB_EINTR) {
            /* A measurement has no state worth keeping: the row records what ran, marked partial. */
            tb_error_set(st, "%s of %ld (warm-up and repeats included); a partial measurement reports no rate and "
                         "is not resumable: run it again", tb_error_get(), per * c->repeat);
        }
        const struct stop_info si = {per * c->repeat, steps_before + s->done_step, 0, t_steps, t_steps, NULL,
                                     sb ? s->run_base : NULL};
        return plan_stopped(s, st, run_id, batch, &si);
    }
    struct measure_throughput tp;
    if (st == TB_OK) st = measure_throughput(all, n_timed, 0, batch, &tp);
    if (st == TB_OK) {
        const double flops_step = model_train_flops_per_sample(&s->m) * batch;
        const double gflops = flops_step * tp.images_per_s / batch * 1e-9;
        if (res) res->images_per_s = tp.images_per_s, res->test_accuracy = NAN, res->peak_rss_mib = measure_peak_rss_mib();
        struct json_buf b;
        row_begin(s, &b, run_id, batch, c->steps, sb ? s->run_base : NULL);
        write_throughput(&b, &tp);
        write_efficiency(s, &b, batch, tp.images_per_s);
        write_repeats(&b, rep, c->repeat);
        json_key_int(&b, "warmup_steps", c->warmup);
        json_key_double(&b, "final_loss", final_loss);
        write_scaling(&b, s, sb, batch, tp.images_per_s);
        write_layer_times(s, &b, per * c->repeat);
        write_trace(s, &b, run_id);
        write_pipeline(s, &b);
        write_step_split(s, &b);
        row_common_figures(s, &b, gflops,
                           measure_train_bytes_per_step(&s->m, batch, optim_state_per_param(c->run.optim.kind)), flops_step);
        st = row_end(s, &b);
        if (!c->quiet && !c->compact && !sb) {
            printf("trainbench throughput: %s on %s data (%s)\n", s->w->name, s->synthetic ? "synthetic" : s->train.name,
                   s->desc);
            printf("  config      batch %d, %d warm-up + %ld timed steps, %d repeat%s, %s lr %g\n", batch, c->warmup,
                   c->steps, c->repeat, c->repeat > 1 ? "s" : "", optim_name(c->run.optim.kind),
                   (double)c->run.optim.lr);
            print_throughput(&tp, c->warmup);
            if (c->repeat > 1) {
                /* Steps within a run are not independent (a noisy neighbour slows a stretch of them), so
                 * the error to compare two runs by is the spread of whole repeats, not of steps. */
                printf("  repeats    ");
                for (int r = 0; r < c->repeat; r++) printf(" %.0f", rep[r]);
                struct stats_summary rs;
                if (stats_summarize(rep, c->repeat, &rs) == TB_OK)
                    printf(" images/s: mean %.4g ± %.2g (95 %% CI over repeats)", rs.mean, stats_ci95_halfwidth(&rs));
                printf("\n");
            }
            printf("  compute     %.2f GFLOP/s (counted model FLOPs over the timed steps)\n", gflops);
            printf("  result row  %s (run %s)\n", c->out, run_id);
        } else if (c->compact && !c->quiet && !sb) {
            printf("%sthroughput %s/%s b%d%s%s: %.0f img/s (per-step median %.0f, jitter %.1f %%, %d repeat%s)\n",
                   c->progress_prefix, c->backend, s->w->name, batch, c->variant[0] ? " " : "", c->variant,
                   tp.images_per_s, tp.rate.median,
                   100.0 * tp.rate.mad_jitter / tp.rate.median, c->repeat, c->repeat > 1 ? "s" : "");
        }
    }
    step_record_free(&rec);
    free(all);
    free(rep);
    return st;
}

/* A batch-size sweep, or a grid of global batch × replicas × accumulation × micro-batch (ipu; mirrored:
 * replicas = devices): one row per point (kind "scaling", the same "sweep" id), then the table. Each
 * point sets its replicas/ga/micro-batch/devices in the run configuration, so its row's config says
 * what ran, and gets a freshly prepared backend. A failed point (a batch a backend cannot split, say)
 * is reported and skipped; the plan then fails. */
static int plan_scaling(struct session *s)
{
    struct bench_config *c = &s->c;
    struct bench_scaling_point pts[BENCH_MAX_POINTS];
    const int n = bench_scaling_points(c, pts, BENCH_MAX_POINTS);
    if (n < 0) return n;
    struct point_result res[BENCH_MAX_POINTS];
    int ok[BENCH_MAX_POINTS] = {0}, first_err = TB_OK;
    int split_r[BENCH_MAX_POINTS], split_a[BENCH_MAX_POINTS], split_l[BENCH_MAX_POINTS];
    const int grid = c->n_replicas_list || c->n_ga_list || c->n_micro_batch_list;
    struct scale_base base = {0};
    for (int k = 0; k < n; k++) {
        const struct bench_scaling_point *pt = &pts[k];
        if (c->run.replicas != pt->replicas || c->run.ga != pt->ga || c->run.micro_batch != pt->micro_batch ||
            c->run.n_devices != pt->devices) {
            c->run.replicas = pt->replicas, c->run.ga = pt->ga, c->run.micro_batch = pt->micro_batch;
            c->run.n_devices = pt->devices;
            s->be_batch = s->be_eval_batch = 0; /* a new arrangement: session_backend prepares a fresh backend */
        }
        const int batch = pt->batch;
        char id[160], label[64];
        snprintf(label, sizeof label, "batch %d", batch);
        snprintf(id, sizeof id, "%s-b%d", s->run_base, batch);
        if (grid) {
            /* Only the dimensions the grid varies name the point (a fixed one is in every row's config). */
            char dims[64] = "";
            size_t m = 0;
            if (c->n_replicas_list)
                m += (size_t)snprintf(dims + m, sizeof dims - m, "-r%d", pt->devices ? pt->devices : pt->replicas);
            if (c->n_ga_list && m < sizeof dims) m += (size_t)snprintf(dims + m, sizeof dims - m, "-g%d", pt->ga);
            if (c->n_micro_batch_list && m < sizeof dims) snprintf(dims + m, sizeof dims - m, "-m%d", pt->micro_batch);
            snprintf(id, sizeof id, "%s-b%d%s", s->run_base, batch, dims);
            snprintf(label, sizeof label, "batch %d%s", batch, dims);
        }
        if (s->peak_per_run) measure_peak_reset();
        int st = c->epochs > 0 ? plan_train(s, batch, id, &base, &res[k]) : plan_throughput_at(s, batch, id, &base, &res[k]);
        batch_split(s, batch, &split_r[k], &split_a[k], &split_l[k]);
        if (st == TB_EINTR) {
            /* The point wrote its row; the sweep stops. */
            return tb_error_set(st, "scaling point %s (%d of %d): %s; %d later point%s not run", label, k + 1, n,
                                tb_error_get(), n - k - 1, n - k - 1 == 1 ? "" : "s");
        }
        if (st != TB_OK) {
            fprintf(stderr, "bench: scaling point %s failed: %s\n", label, tb_error_get());
            if (first_err == TB_OK) first_err = st;
            continue;
        }
        ok[k] = 1;
        if (!(base.images_per_s > 0.0)) base = (struct scale_base){batch, split_r[k], res[k].images_per_s};
    }
    if (c->quiet) return first_err;
    if (c->compact) {
        printf("%sscaling %s/%s%s%s:", c->progress_prefix, c->backend, s->w->name, c->variant[0] ? " " : "", c->variant);
        for (int k = 0; k < n; k++)
            if (ok[k]) {
                printf(" b%d", pts[k].batch);
                if (grid) printf("/r%d/g%d", split_r[k], split_a[k]);
                printf(" %.0f", res[k].images_per_s);
            }
        printf(" img/s\n");
        return first_err;
    }
    printf("trainbench scaling: %s on %s data (%s), %s\n", s->w->name, s->synthetic ? "synthetic" : s->train.name,
           grid ? "a grid: each point's arrangement is in its row" : s->desc, c->epochs > 0 ? "trained" : "throughput only");
    printf("  %8s %8s %8s %6s %12s %9s %10s %10s %9s\n", "global", "local", "replicas", "accum", "images/s", "speed-up",
           "efficiency", "peak MiB", "accuracy");
    for (int k = 0; k < n; k++) {
        const int r = split_r[k], a = split_a[k], l = split_l[k];
        if (!ok[k]) {
            printf("  %8d %8d %8d %6d %12s\n", pts[k].batch, l, r, a, "failed");
            continue;
        }
        const double ips = res[k].images_per_s;
        printf("  %8d %8d %8d %6d %12.0f %9.2f %10.2f %10.1f", pts[k].batch, l, r, a, ips, ips / base.images_per_s,
               (ips / r) / (base.images_per_s / base.replicas), res[k].peak_rss_mib);
        if (!isnan(res[k].test_accuracy)) printf(" %8.2f%%", 100.0 * res[k].test_accuracy);
        printf("\n");
    }
    printf("  local = samples per replica per micro-batch (global / (replicas x accumulation)); efficiency = images/s "
           "per replica relative to the base (first) point; result rows %s (sweep %s)\n", c->out, s->run_base);
    return first_err;
}

/* The seeds of a time-to-accuracy plan: each one's accuracy curve and what its row entry needs. */
struct tta_runs {
    int n;
    struct tta_tracker *tr;
    double *tta, *ev_time, *tr_time;   /* seconds: to the target (NaN if missed), evaluating, training */
    long *steps_done;
    int *reached;
    struct measure_throughput *tp;     /* per-step rates of the seed's last session */
};

static void tta_runs_free(struct tta_runs *r)
{
    if (r->tr)
        for (int k = 0; k < r->n; k++) tta_tracker_free(&r->tr[k]);
    free(r->tr), free(r->tta), free(r->ev_time), free(r->tr_time), free(r->steps_done), free(r->reached), free(r->tp);
    memset(r, 0, sizeof *r);
}

static int tta_runs_init(struct tta_runs *r, int n, double target)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->tr = calloc((size_t)n, sizeof *r->tr);
    r->tta = calloc((size_t)n, sizeof *r->tta), r->ev_time = calloc((size_t)n, sizeof *r->ev_time);
    r->tr_time = calloc((size_t)n, sizeof *r->tr_time);
    r->steps_done = calloc((size_t)n, sizeof *r->steps_done);
    r->reached = calloc((size_t)n, sizeof *r->reached);
    r->tp = calloc((size_t)n, sizeof *r->tp);
    if (!r->tr || !r->tta || !r->ev_time || !r->tr_time || !r->steps_done || !r->reached || !r->tp)
        return tb_error_set(TB_ENOMEM, "out of memory for %d time-to-accuracy runs", n);
    for (int k = 0; k < n; k++) {
        int st = tta_tracker_init(&r->tr[k], target);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

/* Seed k ended at step after eval_s seconds of evaluation: its figures from its curve. */
static void tta_seed_finish(struct tta_runs *r, int k, long step, double eval_s)
{
    const struct tta_tracker *t = &r->tr[k];
    r->reached[k] = t->reached;
    r->steps_done[k] = step;
    r->ev_time[k] = eval_s;
    r->tta[k] = t->reached ? t->points[t->reached_at].time_s : NAN;
    r->tr_time[k] = (t->n_points ? t->points[t->n_points - 1].time_s : 0.0) - eval_s;
}

/* A curve as [[step, time_s, accuracy, loss], ...]: the rest of a point follows from the step. */
static void tta_curve_write(struct json_buf *b, const struct tta_tracker *t)
{
    json_begin_array(b);
    for (int i = 0; t && i < t->n_points; i++) {
        json_begin_array(b);
        json_int(b, t->points[i].step);
        json_double(b, t->points[i].time_s);
        json_double(b, t->points[i].accuracy);
        json_double(b, t->points[i].loss);
        json_end_array(b);
    }
    json_end_array(b);
}

/* The plan's state in a checkpoint (malloc'd JSON text, NULL with the error set): seed k_now in
 * progress at seed_step after eval_s seconds of evaluation, its curve so far, and every finished seed
 * (k_now = n: all finished). */
static char *tta_state_text(const struct tta_runs *r, int k_now, long seed_step, double eval_s)
{
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "seed_index", k_now);
    json_key_int(&b, "seed_step", seed_step);
    json_key_double(&b, "eval_time_s", eval_s);
    json_key(&b, "curve");
    tta_curve_write(&b, k_now < r->n && seed_step > 0 ? &r->tr[k_now] : NULL);
    json_key_array(&b, "done");
    for (int k = 0; k < k_now; k++) {
        json_begin_object(&b);
        json_key_int(&b, "steps", r->steps_done[k]);
        json_key_double(&b, "eval_time_s", r->ev_time[k]);
        json_key_double(&b, "images_per_s", r->tp[k].images_per_s);
        json_key_double(&b, "images_per_s_median", r->tp[k].rate.median);
        json_key(&b, "curve");
        tta_curve_write(&b, &r->tr[k]);
        json_end_object(&b);
    }
    json_end_array(&b);
    json_end_object(&b);
    char *out = NULL;
    if (json_buf_status(&b) == TB_OK) out = strdup(json_buf_str(&b));
    if (!out) tb_error_set(TB_ENOMEM, "the time-to-accuracy state could not be formatted");
    json_buf_free(&b);
    return out;
}

/* Replays a stored curve into tracker t (points at steps 1..max_step, ascending). */
static int tta_curve_read(const struct json_value *v, struct tta_tracker *t, long max_step, long spe, int batch)
{
    if (!v || v->type != JSON_ARRAY) return -1;
    long last = 0;
    for (int i = 0; i < v->n; i++) {
        const struct json_value *p = &v->items[i];
        if (p->type != JSON_ARRAY || p->n != 4 || p->items[0].type != JSON_NUMBER || p->items[2].type != JSON_NUMBER)
            return -1;
        const long step = (long)p->items[0].number;
        if ((double)step != p->items[0].number || step <= last || step > max_step) return -1;
        last = step;
        struct tta_point pt = {step, (double)step / (double)spe, step * (long)batch,
                               p->items[1].type == JSON_NUMBER ? p->items[1].number : NAN, p->items[2].number,
                               p->items[3].type == JSON_NUMBER ? p->items[3].number : NAN};
        if (tta_tracker_add(t, &pt) < 0) return -1;
    }
    return 0;
}

/* Restores a checkpoint's tta_state (from path) into r: *k_now, *seed_step, *eval_s and *g_before (the
 * steps of the finished seeds). TB_EFORMAT naming the file if it does not make sense. */
static int tta_state_restore(const char *text, const char *path, struct tta_runs *r, long max_steps, long spe,
                             int batch, int *k_now, long *seed_step, double *eval_s, long *g_before)
{
    struct json_value *v = NULL;
    int st = json_parse(text, strlen(text), &v);
    const char *why = st != TB_OK ? "not JSON" : NULL;
    const struct json_value *done = v ? json_get(v, "done") : NULL;
    const double kn = v ? json_get_number(v, "seed_index", -1) : -1, ss = v ? json_get_number(v, "seed_step", -1) : -1;
    *g_before = 0;
    if (!why && !(kn >= 0 && kn <= r->n && kn == (int)kn)) why = "seed_index out of range";
    if (!why && !(ss >= 0 && ss <= max_steps && ss == (long)ss)) why = "seed_step out of range";
    if (!why && (!done || done->type != JSON_ARRAY || done->n != (int)kn)) why = "the finished seeds do not add up";
    if (!why) {
        *k_now = (int)kn, *seed_step = (long)ss;
        *eval_s = json_get_number(v, "eval_time_s", 0.0);
        for (int k = 0; k < *k_now && !why; k++) {
            const struct json_value *d = &done->items[k];
            const double steps = json_get_number(d, "steps", -1);
            if (!(steps >= 1 && steps <= max_steps && steps == (long)steps)) why = "a finished seed's steps";
            else if (tta_curve_read(json_get(d, "curve"), &r->tr[k], (long)steps, spe, batch) != 0)
                why = "a finished seed's curve";
            else {
                tta_seed_finish(r, k, (long)steps, json_get_number(d, "eval_time_s", 0.0));
                r->tp[k].images_per_s = json_get_number(d, "images_per_s", NAN);
                r->tp[k].rate.median = json_get_number(d, "images_per_s_median", NAN);
                *g_before += (long)steps;
            }
        }
        if (!why && *k_now < r->n && tta_curve_read(json_get(v, "curve"), &r->tr[*k_now], *seed_step, spe, batch) != 0)
            why = "the curve of the seed in progress";
    }
    json_value_free(v);
    if (why) return tb_error_set(TB_EFORMAT, "checkpoint %s: its time-to-accuracy state is malformed (%s)", path, why);
    return TB_OK;
}

/* Time to accuracy: train until an evaluation reaches the target, --seeds times. The clock of a seed
 * runs over its training steps and its evaluations (MLPerf counts both), not set-up or checkpoint
 * writing. With --checkpoint-dir each seed checkpoints every --checkpoint-every steps, on a stop signal
 * and when it finishes; the files are numbered by the steps of the whole plan (every seed so far), so
 * the newest is the furthest along. --resume continues from the newest: the finished seeds' results
 * and the curve of the seed in progress come back from the checkpoint, its clock continues from the
 * seconds already spent, and it takes the same steps and evaluations as an uninterrupted run. */
static int plan_tta(struct session *s)
{
    struct bench_config *c = &s->c;
    const int batch = c->run.batch;
    const long spe = c->steps_per_epoch > 0 ? c->steps_per_epoch : s->train.n / batch;
    if (spe <= 0) return tb_error_set(TB_EINVAL, "--batch %d is larger than the training set (%d samples)", batch, s->train.n);
    const long every = c->eval_every > 0 ? c->eval_every : spe;
    const long max_steps = (long)c->max_epochs * spe;
    const int eval_batch = c->eval_batch > 0 ? c->eval_batch : (batch > 256 ? batch : 256);
    c->run.optim.total_steps = max_steps;
    int st = session_backend(s, batch, eval_batch);
    if (st != TB_OK) return st;
    const int n = c->seeds;
    struct tta_runs r;
    struct step_record rec = {0};
    char *state = NULL;
    if ((st = tta_runs_init(&r, n, c->target)) != TB_OK) goto done;
    if ((st = step_record_init(&rec, max_steps)) != TB_OK) goto done;
    const int ckpt = c->checkpoint_dir[0] != 0;
    int k0 = 0, n_ckpt = 0;
    long start = 0, g_before = 0, g_resumed = -1, resumed_every = 0;
    double prev_train = 0.0, prev_eval = 0.0, ckpt_total = 0.0;
    char resumed_from[600] = "", ckpt_path[600] = "";
    if (c->resume[0]) {
        /* The checkpoint's tensors go over the first seed's; a seed that had finished starts afresh below. */
        if ((st = session_reset(s, c->run.seed)) != TB_OK) goto done;
        if ((st = resume_from(s, batch, LONG_MAX, &g_resumed, &prev_train, &resumed_every, resumed_from,
                              sizeof resumed_from, &state)) != TB_OK)
            goto done;
        if ((st = tta_state_restore(state, resumed_from, &r, max_steps, spe, batch, &k0, &start, &prev_eval,
                                    &g_before)) != TB_OK)
            goto done;
        if (g_before + start != g_resumed) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: step %ld is not its seeds' %ld + %ld steps", resumed_from,
                              g_resumed, g_before, start);
            goto done;
        }
        if (!c->checkpoint_every) c->checkpoint_every = resumed_every;
    }
    const long ck_every = ckpt ? c->checkpoint_every : 0;
    if (ckpt && (st = checkpoint_dir_ready(s)) != TB_OK) goto done;
    /* Whether the newest checkpoint of this run in --checkpoint-dir is the resumed one. */
    const int resumed_here = g_resumed >= 0 && strcmp(c->checkpoint_dir, c->resume) == 0;
    if (resumed_here) snprintf(ckpt_path, sizeof ckpt_path, "%s", resumed_from);
    int ran = k0;
    long stop_step = 0, stop_start = 0; /* a stopped seed's completed steps and where its session began */
    double stop_time = 0.0, stop_session = 0.0;
    for (int k = k0; k < n && st == TB_OK; k++, ran++) {
        const uint64_t seed = c->run.seed + (uint64_t)k;
        const int resumed = k == k0 && start > 0;
        long step = resumed ? start : 0;
        const double prev_t = resumed ? prev_train : 0.0, prev_e = resumed ? prev_eval : 0.0;
        if (resumed) s->s.ds = &s->train, s->s.seed = seed, s->s.perm_epoch = -1; /* tensors: the checkpoint's */
        else if ((st = session_reset(s, seed)) != TB_OK) break;
        rec.base = step + 1;
        const long first = step;
        char id[128], label[96], extra[40] = "";
        if (n > 1) snprintf(id, sizeof id, "%s-seed%llu", s->run_base, (unsigned long long)seed);
        else snprintf(id, sizeof id, "%s", s->run_base);
        if (n > 1) snprintf(extra, sizeof extra, " seed %d/%d", k + 1, n);
        progress_label(s, label, sizeof label, extra);
        struct mllog lg;
        open_log(&lg, s, id);
        log_run_header(&lg, s, batch, seed);
        char tv[40];
        json_format_double(c->target, tv, sizeof tv);
        mllog_event(&lg, MLLOG_POINT, "target_accuracy", tv, -1, NULL);
        if (resumed) mllog_point_int(&lg, "resumed_from_step", step);
        mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);
        struct progress pr;
        progress_init(&pr, max_steps, label);
        const double t0 = tb_now_s();
        double eval_sess = 0.0, ckpt_time = 0.0;
        long ckpt_step = resumed && resumed_here ? step : -1;
        while (step < max_steps && st == TB_OK && !r.tr[k].reached) {
            if (step % spe == 0) mllog_event(&lg, MLLOG_START, "epoch_start", "null", step / spe + 1, NULL);
            long next = (step / every + 1) * every;
            const long epoch_end = (step / spe + 1) * spe;
            if (epoch_end < next) next = epoch_end;
            if (max_steps < next) next = max_steps;
            if (ck_every > 0 && (step / ck_every + 1) * ck_every < next) next = (step / ck_every + 1) * ck_every;
            if ((st = session_steps(s, step + 1, next, &rec, &pr, step, t0, (step - first) * (long)batch)) != TB_OK) break;
            step = next;
            if (step % spe == 0) mllog_event(&lg, MLLOG_END, "epoch_stop", "null", step / spe, NULL);
            if (step % every == 0 || step == max_steps) {
                const long epoch_num = (step + spe - 1) / spe;
                mllog_event(&lg, MLLOG_START, "eval_start", "null", epoch_num, NULL);
                double acc, loss, dt;
                if ((st = session_evaluate(s, &acc, &loss, &dt)) != TB_OK) break;
                eval_sess += dt;
                char v[40];
                json_format_double(acc, v, sizeof v);
                mllog_event(&lg, MLLOG_POINT, "eval_accuracy", v, epoch_num, NULL);
                mllog_event(&lg, MLLOG_END, "eval_stop", "null", epoch_num, NULL);
                const double clock = prev_t + prev_e + (tb_now_s() - t0 - ckpt_time);
                struct tta_point p = {step, (double)step / spe, step * (long)batch, clock, acc, loss};
                int rr = tta_tracker_add(&r.tr[k], &p);
                if (rr < 0) {
                    st = rr;
                    break;
                }
            }
            if (ck_every > 0 && step % ck_every == 0 && step < max_steps && !r.tr[k].reached) {
                /* Periodic: insurance, so a failure is a warning (the seed's last checkpoint must succeed). */
                const double c0 = tb_now_s();
                char *txt = tta_state_text(&r, k, step, prev_e + eval_sess);
                if (txt && checkpoint_write(s, batch, g_before + step, max_steps,
                                            prev_t + (c0 - t0 - ckpt_time - eval_sess), txt, ckpt_path,
                                            sizeof ckpt_path) == TB_OK)
                    ckpt_step = step, n_ckpt++;
                else
                    fprintf(stderr, "bench: warning: step %ld: %s\n", step, tb_error_get());
                free(txt);
                tb_error_clear();
                ckpt_time += tb_now_s() - c0;
            }
        }
        progress_finish(&pr);
        const double session_train = tb_now_s() - t0 - ckpt_time - eval_sess, eval_total = prev_e + eval_sess;
        if (st == TB_OK) {
            tta_seed_finish(&r, k, step, eval_total);
            const long recorded = step - first < rec.cap ? step - first : rec.cap;
            if (measure_throughput(rec.times, recorded, recorded > c->warmup ? c->warmup : 0, batch, &r.tp[k]) != TB_OK)
                memset(&r.tp[k], 0, sizeof r.tp[k]);
            tb_error_clear();
            if (ckpt) {
                /* The seed's result, so a stop during the next seed (or the row) loses nothing of it. */
                const double c0 = tb_now_s();
                char *txt = tta_state_text(&r, k + 1, 0, 0.0);
                st = txt ? checkpoint_write(s, batch, g_before + step, max_steps, prev_t + session_train, txt, ckpt_path,
                                            sizeof ckpt_path)
                         : TB_ENOMEM;
                if (st == TB_OK) n_ckpt++;
                free(txt);
                ckpt_time += tb_now_s() - c0;
            }
        } else if (st == TB_EINTR && ckpt && s->done_step > 0 && ckpt_step != s->done_step) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", tb_error_get());
            const double c0 = tb_now_s();
            char *txt = tta_state_text(&r, k, s->done_step, eval_total);
            if (txt && checkpoint_write(s, batch, g_before + s->done_step, max_steps, prev_t + session_train, txt,
                                        ckpt_path, sizeof ckpt_path) == TB_OK)
                ckpt_step = s->done_step, n_ckpt++;
            else
                fprintf(stderr, "bench: warning: no checkpoint: %s\n", tb_error_get());
            free(txt);
            ckpt_time += tb_now_s() - c0;
            tb_error_set(st, "%s", msg);
        }
        ckpt_total += ckpt_time;
        mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK && r.tr[k].reached ? "success" : "aborted");
        mllog_close(&lg);
        if (st != TB_OK) {
            stop_step = s->done_step, stop_start = first;
            stop_time = prev_t + session_train, stop_session = session_train;
            /* The newest checkpoint holds this seed's last step, or (nothing trained in it yet) the end of
             * the seed before. */
            if (!(ckpt && (ckpt_step == stop_step || (stop_step == 0 && ckpt_path[0])))) ckpt_path[0] = '\0';
            break;
        }
        g_before += step;
        if (c->compact && !c->quiet) {
            if (r.reached[k])
                printf("%stta %s/%s%s%s seed %llu: %.2f s to %.2f %% (%.2f epochs, eval %.2f s)\n", c->progress_prefix,
                       c->backend, s->w->name, c->variant[0] ? " " : "", c->variant, (unsigned long long)seed, r.tta[k],
                       100.0 * r.tr[k].points[r.tr[k].reached_at].accuracy, (double)step / spe, r.ev_time[k]);
            else
                printf("%stta %s/%s%s%s seed %llu: did not reach %.2f %% in %d epochs (best %.2f %%)\n",
                       c->progress_prefix, c->backend, s->w->name, c->variant[0] ? " " : "", c->variant,
                       (unsigned long long)seed, 100.0 * c->target, c->max_epochs, 100.0 * r.tr[k].best);
        }
    }
    if (st == TB_EINTR || st == TB_EDIVERGED) {
        /* The row of the seed that stopped (the seeds before it finished but make no olympic mean alone). */
        char id[128];
        if (n > 1) snprintf(id, sizeof id, "%s-seed%llu", s->run_base, (unsigned long long)(c->run.seed + (uint64_t)ran));
        else snprintf(id, sizeof id, "%s", s->run_base);
        if (st == TB_EINTR) {
            if (ckpt_path[0])
                tb_error_set(st, "%s of at most %ld (seed %d of %d); checkpoint %s (continue with --resume %s)",
                             tb_error_get(), max_steps, ran + 1, n, ckpt_path, c->checkpoint_dir);
            else
                tb_error_set(st, "%s of at most %ld (seed %d of %d); no checkpoint (%s)", tb_error_get(), max_steps,
                             ran + 1, n, !ckpt ? "give --checkpoint-dir DIR to make runs resumable"
                                   : stop_step == 0 ? "nothing trained yet" : "it could not be written");
        }
        const struct stop_info si = {max_steps, stop_step, stop_start, stop_time, stop_session,
                                     ckpt_path[0] ? ckpt_path : NULL, NULL};
        st = plan_stopped(s, st, id, batch, &si);
    }
    if (st != TB_OK) goto done;

    int n_reached = 0;
    double reached_tta[1024];
    for (int k = 0; k < n; k++)
        if (r.reached[k] && n_reached < 1024) reached_tta[n_reached++] = r.tta[k];
    const double olympic = tta_olympic_mean(r.tta, r.reached, n);
    const double med = n_reached ? stats_percentile(reached_tta, n_reached, 50.0) : NAN;
    double ips_sum = 0.0;
    for (int k = 0; k < n; k++) ips_sum += r.tp[k].images_per_s;
    const double flops_step = model_train_flops_per_sample(&s->m) * batch;
    const double gflops = flops_step * (ips_sum / n) / batch * 1e-9;

    struct json_buf b;
    row_begin(s, &b, s->run_base, batch, 0, NULL);
    json_key_double(&b, "target", c->target);
    json_key_int(&b, "runs_total", n);
    json_key_int(&b, "runs_reached", n_reached);
    json_key_double(&b, "tta_olympic_mean_s", olympic);
    json_key_double(&b, "tta_median_s", med);
    json_key_double(&b, "images_per_s", ips_sum / n);
    if (g_resumed >= 0) {
        json_key_int(&b, "resumed_from_step", g_resumed);
        json_key_str(&b, "resumed_from", resumed_from);
    }
    if (ckpt) {
        json_key_int(&b, "checkpoints_written", n_ckpt);
        json_key_double(&b, "checkpoint_time_s", ckpt_total);
        json_key_str(&b, "checkpoint", ckpt_path);
    }
    json_key_array(&b, "runs");
    for (int k = 0; k < n; k++) {
        json_begin_object(&b);
        json_key_int(&b, "seed", (long long)(c->run.seed + (uint64_t)k));
        json_key_bool(&b, "reached", r.reached[k]);
        json_key_str(&b, "status", r.reached[k] ? "success" : "aborted");
        json_key_double(&b, "tta_s", r.tta[k]);
        json_key_double(&b, "train_time_s", r.tr_time[k]);
        json_key_double(&b, "eval_time_s", r.ev_time[k]);
        json_key_int(&b, "steps", r.steps_done[k]);
        json_key_double(&b, "epochs", (double)r.steps_done[k] / spe);
        json_key_int(&b, "samples", r.steps_done[k] * batch);
        json_key_double(&b, "best_accuracy", r.tr[k].best);
        json_key_double(&b, "images_per_s_median", r.tp[k].rate.median);
        json_key_array(&b, "curve");
        for (int i = 0; i < r.tr[k].n_points; i++) {
            const struct tta_point *p = &r.tr[k].points[i];
            json_begin_object(&b);
            json_key_int(&b, "step", p->step);
            json_key_double(&b, "epoch", p->epoch);
            json_key_double(&b, "time_s", p->time_s);
            json_key_double(&b, "accuracy", p->accuracy);
            json_key_double(&b, "loss", p->loss);
            json_end_object(&b);
        }
        json_end_array(&b);
        json_end_object(&b);
    }
    json_end_array(&b);
    write_trace(s, &b, s->run_base);
    row_common_figures(s, &b, gflops, measure_train_bytes_per_step(&s->m, batch, optim_state_per_param(c->run.optim.kind)),
                       flops_step);
    st = row_end(s, &b);

    if (!c->quiet && !c->compact) {
        printf("trainbench time to accuracy: %s on %s (%s)\n", s->w->name, s->train.name, s->desc);
        printf("  config      target %.2f %%, batch %d, evaluation every %ld steps (%ld per epoch), at most %d epochs, "
               "%s lr %g\n",
               100.0 * c->target, batch, every, spe, c->max_epochs, optim_name(c->run.optim.kind), (double)c->run.optim.lr);
        if (g_resumed >= 0)
            printf("  resumed     at seed %d of %d, step %ld, from %s\n", k0 + 1 > n ? n : k0 + 1, n, start, resumed_from);
        for (int k = 0; k < n; k++) {
            if (r.reached[k])
                printf("  seed %-6llu %.2f s to %.2f %% (eval %.2f s of it), %.2f epochs, %ld samples, %d evaluations\n",
                       (unsigned long long)(c->run.seed + (uint64_t)k), r.tta[k],
                       100.0 * r.tr[k].points[r.tr[k].reached_at].accuracy, r.ev_time[k], (double)r.steps_done[k] / spe,
                       r.steps_done[k] * batch, r.tr[k].n_points);
            else
                printf("  seed %-6llu did not reach the target in %d epochs (best %.2f %%, %.2f s)\n",
                       (unsigned long long)(c->run.seed + (uint64_t)k), c->max_epochs, 100.0 * r.tr[k].best,
                       r.tr_time[k] + r.ev_time[k]);
        }
        if (!isnan(olympic))
            printf("  result      %.2f s olympic mean over %d run%s (%d reached the target)\n", olympic, n, n > 1 ? "s" : "",
                   n_reached);
        else
            printf("  result      no score: %d of %d runs missed the target\n", n - n_reached, n);
        if (ckpt)
            printf("  checkpoint  %s (%d written, %.3f s, not counted in the clock)\n", ckpt_path, n_ckpt, ckpt_total);
        printf("  result row  %s (run %s; logs in %s)\n", c->out, s->run_base, c->mllog_dir);
    }
done:
    free(state);
    tta_runs_free(&r);
    step_record_free(&rec);
    return st;
}

/* Forward only, from fresh weights (or --load's): images/s at --batch, then latency percentiles at batch 1. */
static int plan_inference(struct session *s)
{
    struct bench_config *c = &s->c;
    const int batch = c->run.batch;
    if (batch > s->test.n) return tb_error_set(TB_EINVAL, "--batch %d is larger than the test set (%d samples)", batch, s->test.n);
    int st = session_backend(s, batch, batch);
    if (st == TB_OK) st = session_reset(s, c->run.seed);
    if (st != TB_OK) return st;
    const long per = c->warmup + c->steps, n_timed = (long)c->repeat * c->steps;
    double *times = malloc((size_t)per * sizeof *times), *all = malloc((size_t)n_timed * sizeof *all);
    double *rep = calloc((size_t)c->repeat, sizeof *rep);
    if (!times || !all || !rep) {
        st = tb_error_set(TB_ENOMEM, "out of memory for %ld timings", n_timed);
        goto done;
    }
    struct mllog lg;
    open_log(&lg, s, s->run_base);
    log_run_header(&lg, s, batch, c->run.seed);
    mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);
    char label[96];
    progress_label(s, label, sizeof label, NULL);
    struct progress pr;
    progress_init(&pr, per * (c->repeat + 1), label);
    const size_t px = (size_t)s->test.h * s->test.w * s->test.c;
    const long n_batches = s->test.n / batch;
    long done_calls = 0;
    double correct = 0.0, seen = 0.0, batched_s = 0.0; /* batched_s: seconds of the batched forwards so far */
    const double tr0 = tb_now_s();
    for (int r = 0; r < c->repeat && st == TB_OK; r++) {
        for (long i = 0; i < per && st == TB_OK; i++) {
            if (stop_signal) {
                st = tb_error_set(TB_EINTR, "interrupted by %s after %ld of %ld batches",
                                  bench_signal_name(stop_signal), done_calls, per * c->repeat);
                break;
            }
            const long off = (i % n_batches) * batch;
            struct batch bt = {batch, s->test.images + (size_t)off * px, s->test_y + off};
            struct eval_stats ev = {0};
            const double t0 = tb_now_s();
            st = backend_evaluate(&s->be, &bt, &ev);
            times[i] = tb_now_s() - t0;
            correct += (double)ev.correct, seen += (double)ev.n;
            done_calls++;
            batched_s = tb_now_s() - tr0;
            if (pr.enabled) progress_update(&pr, done_calls, NAN, (double)done_calls * batch / (tb_now_s() - tr0));
        }
        struct measure_throughput one;
        if (st == TB_OK && (st = measure_throughput(times, per, c->warmup, batch, &one)) == TB_OK) {
            rep[r] = one.images_per_s;
            memcpy(all + (size_t)r * c->steps, times + c->warmup, (size_t)c->steps * sizeof(double));
        }
    }
    const long n_batched = done_calls;
    /* Latency: single images, one call each, cycling through the test set. */
    double *lat = times;
    for (long i = 0; i < per && st == TB_OK; i++) {
        if (stop_signal) {
            st = tb_error_set(TB_EINTR, "interrupted by %s in the batch-1 latency forwards (%ld of %ld)",
                              bench_signal_name(stop_signal), i, per);
            break;
        }
        const long idx = i % s->test.n;
        struct batch bt = {1, s->test.images + (size_t)idx * px, s->test_y + idx};
        struct eval_stats ev = {0};
        const double t0 = tb_now_s();
        st = backend_evaluate(&s->be, &bt, &ev);
        lat[i] = tb_now_s() - t0;
        if (pr.enabled) progress_update(&pr, ++done_calls, NAN, NAN);
    }
    progress_finish(&pr);
    mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK ? "success" : "aborted");
    mllog_close(&lg);
    if (st == TB_EINTR) {
        /* The row of what ran (the batched forwards; no training time), marked partial. */
        tb_error_set(st, "%s; a partial measurement reports no rate and is not resumable: run it again",
                     tb_error_get());
        const struct stop_info si = {per * c->repeat, n_batched, 0, NAN, batched_s, NULL, NULL};
        s->last_loss = NAN; /* forward only: no training loss */
        st = plan_stopped(s, st, s->run_base, batch, &si);
    }
    if (st != TB_OK) goto done;
    struct measure_throughput tp;
    struct measure_latency ml;
    if ((st = measure_throughput(all, n_timed, 0, batch, &tp)) != TB_OK) goto done;
    if ((st = measure_latency(lat + c->warmup, (int)c->steps, &ml)) != TB_OK) goto done;
    const double flops_step = s->m.flops_per_sample * batch;
    const double gflops = s->m.flops_per_sample * tp.images_per_s * 1e-9;
    struct json_buf b;
    row_begin(s, &b, s->run_base, batch, c->steps, NULL);
    write_throughput(&b, &tp);
    write_repeats(&b, rep, c->repeat);
    json_key_int(&b, "warmup_steps", c->warmup);
    json_key_double(&b, "latency_p50_s", ml.p50_s);
    json_key_double(&b, "latency_p90_s", ml.p90_s);
    json_key_double(&b, "latency_p99_s", ml.p99_s);
    json_key_double(&b, "latency_mean_s", ml.mean_s);
    json_key_double(&b, "latency_min_s", ml.min_s);
    json_key_double(&b, "latency_max_s", ml.max_s);
    json_key_int(&b, "latency_samples", ml.n);
    json_key_double(&b, s->loaded ? "loaded_weights_accuracy" : "fresh_weights_accuracy", seen > 0 ? correct / seen : NAN);
    row_common_figures(s, &b, gflops, measure_infer_bytes_per_step(&s->m, batch), flops_step);
    st = row_end(s, &b);
    if (!c->quiet && !c->compact) {
        printf("trainbench inference: %s on %s data (%s), %s weights\n", s->w->name,
               s->synthetic ? "synthetic" : s->test.name, s->desc, s->loaded ? c->load : "fresh");
        printf("  batch %-5d %.0f images/s overall; per batch: median %.0f, mean %.0f ± %.0f, jitter %.0f (%ld timed "
               "batches)\n",
               batch, tp.images_per_s, tp.rate.median, tp.rate.mean, tp.rate.stderr_, tp.rate.mad_jitter, tp.n_steps);
        printf("  batch 1     latency p50 %.3f ms, p90 %.3f ms, p99 %.3f ms over %d forwards\n", 1e3 * ml.p50_s,
               1e3 * ml.p90_s, 1e3 * ml.p99_s, ml.n);
        printf("  compute     %.2f GFLOP/s (forward FLOPs)\n", gflops);
        printf("  result row  %s (run %s)\n", c->out, s->run_base);
    } else if (c->compact && !c->quiet) {
        printf("%sinference %s/%s b%d%s%s: %.0f img/s; batch-1 latency p50 %.3f ms, p99 %.3f ms\n",
               c->progress_prefix, c->backend, s->w->name, batch, c->variant[0] ? " " : "", c->variant, tp.images_per_s, 1e3 * ml.p50_s, 1e3 * ml.p99_s);
    }
done:
    free(times);
    free(all);
    free(rep);
    return st;
}

int bench_run(const struct bench_config *cfg)
{
    if (stop_signal)
        return tb_error_set(TB_EINTR, "interrupted by %s before the run started", bench_signal_name(stop_signal));
    struct bench_stop_handlers h;
    bench_stop_handlers_install(&h);
    struct session s;
    int st = session_open(&s, cfg);
    if (st != TB_OK) {
        session_close(&s);
        bench_stop_handlers_restore(&h);
        return st;
    }
    if (s.c.describe) {
        printf("%s (%s input %dx%dx%d, %d classes)\n", s.m.name, s.train.name, s.m.in_h, s.m.in_w, s.m.in_c,
               s.m.n_classes);
        /* The algorithm column needs the per-shape autotune, which runs when a backend is prepared. */
        int *algos = calloc((size_t)s.m.n_layers, sizeof(int));
        int have = algos && session_backend(&s, s.c.run.batch, s.c.run.batch) == TB_OK &&
                   backend_conv_algos(&s.be, algos) == TB_OK;
        tb_error_clear();
        model_describe(&s.m, have ? algos : NULL, exec_conv_algo_names, stdout);
        free(algos);
        session_close(&s);
        bench_stop_handlers_restore(&h);
        return TB_OK;
    }
    switch (s.c.plan) {
    case PLAN_THROUGHPUT: st = plan_throughput_at(&s, s.c.run.batch, s.run_base, NULL, NULL); break;
    case PLAN_TTA: st = plan_tta(&s); break;
    case PLAN_SCALING: st = plan_scaling(&s); break;
    case PLAN_INFERENCE: st = plan_inference(&s); break;
    default: st = plan_train(&s, s.c.run.batch, s.run_base, NULL, NULL); break;
    }
    session_close(&s);
    bench_stop_handlers_restore(&h);
    return st;
}
