/* session.c — the session a plan runs over: data (a continuous, seeded stream of training batches),
 * model, initial weights and one prepared backend; and the timed step loop every training plan uses
 * (see session.h).
 *
 * Data order is a continuous stream over the training set: the sample at stream position p is
 * perm_e[p mod n] with e = p div n and perm_e a counter-based permutation per data epoch. A training
 * "epoch" is steps_per_epoch steps of that stream (Keras's steps_per_epoch on a repeated dataset), so
 * any batch size and step count is reproducible and identical on every backend.
 */
#define _GNU_SOURCE
#include "session.h"

#include "checkpoint.h"
#include "clock.h"
#include "rng.h"
#include "status.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

void session_close(struct session *s)
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

int session_open(struct session *s, const struct bench_config *c)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    int st = bench_config_finish(&s->c);
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
    s->have_cal = calibrate_load_matching(s->c.calibration, s->mi.cpu_model, s->mi.n_cores, s->mi.blas_core,
                                          &s->cal) == TB_OK;
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
int session_backend(struct session *s, int batch, int eval_batch)
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
void profile_begin(struct session *s)
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
int session_reset(struct session *s, uint64_t seed)
{
    if (!s->loaded) s->w->init(&s->m, s->params, s->buffers, seed);
    int st = backend_set_tensors(&s->be, TF_PARAMS, s->params);
    if (st == TB_OK && s->m.n_buffers) st = backend_set_tensors(&s->be, TF_BUFFERS, s->buffers);
    if (st == TB_OK && s->m.n_params) st = backend_set_tensors(&s->be, TF_OPT, s->opt_zeros);
    s->s.ds = &s->train, s->s.seed = seed, s->s.perm_epoch = -1;
    return st;
}

/* Accuracy and mean loss on the whole test set. */
int session_evaluate(struct session *s, double *acc, double *loss, double *time_s)
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

int step_record_init(struct step_record *r, long n)
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

void step_record_free(struct step_record *r)
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
int session_steps(struct session *s, long from, long to, struct step_record *rec, struct progress *pr,
                  long pr_done, double t_rate0, long samples_before)
{
    const int batch = s->be_batch;
    s->done_step = from - 1;
    if (from == 1) s->last_loss = NAN;
    for (long step = from; step <= to; step++) {
        if (bench_stop_signal())
            return tb_error_set(TB_EINTR, "interrupted by %s after step %ld", bench_signal_name(bench_stop_signal()),
                                step - 1);
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

void progress_label(const struct session *s, char *buf, size_t n, const char *extra)
{
    snprintf(buf, n, "%s%s %s/%s%s", s->c.progress_prefix, bench_plan_name(s->c.plan), s->c.backend, s->w->name,
             extra ? extra : "");
}
