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

#include "arena.h"
#include "checkpoint.h"
#include "clock.h"
#include "conv_tuning.h"
#include "exec.h"
#include "outputs.h"
#include "plan_project.h"
#include "projection.h"
#include "rng.h"
#include "status.h"
#include "tpool.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

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

/* The sample shape a workload's model takes without resampling: the output of its input layer when that
 * is an image (EfficientNet: --resolution or the variant's, × 3 channels), found by building the model
 * once at a placeholder shape (graph metadata only: no weights, no activations). 0 when the input layer
 * is not an image (mnist-mlp flattens its input) or the build fails (the real build reports that). */
static int native_shape(const struct session *s, int *h, int *w, int *ch, double *train_flops)
{
    struct workload_opts wo = s->c.wopts;
    wo.in_h = 28, wo.in_w = 28, wo.in_c = 1;
    if (wo.classes <= 0) wo.classes = 10;
    struct model m;
    memset(&m, 0, sizeof m);
    int ok = 0;
    if (s->w->build(&m, &wo) == TB_OK && m.n_layers > 0 && m.layers[0].op == OP_INPUT) {
        const struct tensor *t = &m.tensors[m.layers[0].out];
        if (t->h > 1 && t->w > 1) *h = t->h, *w = t->w, *ch = t->c, ok = 1;
        *train_flops = model_train_flops_per_sample(&m);
    }
    tb_error_clear();
    model_free(&m);
    return ok;
}

/* The default batch of a throughput run (no --batch): the workload's, lowered (by halves, not below 8)
 * until a step is about 5 s of counted FLOPs at ~10 GFLOP/s a core, so the headline `bench --workload
 * effnet-b4` times steps of seconds, not a minute (batch 128 at 380×380 is ~56 s a step on two cores).
 * The rate is an assumption, not a measurement: a step shorter than planned only means more of them. */
static int throughput_default_batch(const struct session *s, double train_flops)
{
    const long cores = tpool_cpus();
    const double flop_step_budget = 5.0 * 10e9 * (double)(cores > 0 ? cores : 1);
    int b = s->w->batch;
    while (b > 8 && (double)b * train_flops > flop_step_budget) b /= 2;
    return b;
}

static int load_data(struct session *s)
{
    const struct bench_config *c = &s->c;
    const struct workload *w = s->w;
    int st;
    s->synthetic = bench_config_synthetic(c);
    if (s->synthetic) {
        /* At the shape the model takes (EfficientNet: res×res×3) so that no resampling happens on the
         * device; else the workload's fixed shape, else the default dataset's (28×28×1), so synthetic and
         * real runs time the same model. */
        int h = w->resolution ? w->resolution : 28, wd = h, ch = w->channels ? w->channels : 1;
        if (!w->resolution) (void)native_shape(s, &h, &wd, &ch, &(double){0});
        int classes = c->wopts.classes > 0 ? c->wopts.classes : 10;
        int n_train = c->synthetic_train, n_test = c->synthetic_test;
        const long per = (long)h * wd * ch;
        /* ~64 MB of pixels per split at most: enough to cycle through or to estimate an accuracy. */
        long cap = (64L << 20) / per;
        if (c->describe || c->project_only) {
            /* The table (or the device projection) needs the shape only. */
            n_train = n_train > 0 ? n_train : 1, n_test = n_test > 0 ? n_test : 1;
        }
        if (n_train <= 0) {
            if (bench_config_times_only(c)) {
                /* ~16 MB: only the step time is measured, and generating 380×380×3 samples costs seconds. */
                long n = cap / 4;
                if (n > 8192) n = 8192;
                if (n < 2L * max_batch(s)) n = 2L * max_batch(s);
                n_train = (int)n;
            } else {
                /* Fashion-MNIST's 60,000, within ~256 MB of pixels: 60,000 224×224×3 images would be 9 GB. */
                n_train = cap * 4 < 60000 ? (int)(cap * 4) : 60000;
                if (n_train < 2 * max_batch(s)) n_train = 2 * max_batch(s);
            }
        }
        if (n_test <= 0) {
            /* Small: a test set at most 1,000 samples (and ~64 MB), so evaluation costs seconds whatever the
             * resolution (10,000 380×380 images took an hour after one step); of the plans that only time
             * steps, inference reads one batch of it and the others none. */
            long n = cap < 1000 ? cap : 1000;
            if (n < 32) n = 32;
            if (bench_config_times_only(c)) n = c->plan != PLAN_INFERENCE ? 32 : n < max_batch(s) ? max_batch(s) : n;
            n_test = (int)n;
        }
        /* Generating costs ~15 ns a pixel a core: say so before a wait of seconds (a piped run is otherwise silent). */
        if (!c->quiet && !c->compact && (double)(n_train + n_test) * (double)per > 16e6)
            fprintf(stderr, "bench: %s %s/%s: generating %d + %d synthetic %dx%dx%d samples\n",
                    bench_plan_name(c->plan), c->backend, w->name, n_train, n_test, h, wd, ch);
        if ((st = dataset_synthetic(n_train, h, wd, ch, classes, c->run.seed, 1, &s->train)) != TB_OK) return st;
        return dataset_synthetic(n_test, h, wd, ch, classes, c->run.seed, 0, &s->test);
    }
    const char *dir = c->data[0] ? c->data : DATASET_DEFAULT_DIR;
    if ((st = dataset_load_dir(dir, 1, &s->train)) != TB_OK) return st;
    if ((st = dataset_load_dir(dir, 0, &s->test)) != TB_OK) return st;
    if ((st = dataset_check_pair(&s->train, &s->test)) != TB_OK) return st;
    for (int k = 0; k < 2 && !c->quiet; k++) { /* a choice the reader made where the directory left one */
        const char *note = k ? s->test.note : s->train.note;
        if (note[0]) fprintf(stderr, "bench: note: %s\n", note);
    }
    /* Labels say how many classes an IDX set has: one stray byte (255) made a 256-way model of a 10-class set,
     * unsaid. Where most of the classes the labels imply never occur, said. */
    const int n_cls = s->train.n_classes;
    if (n_cls > 10 && n_cls <= 256) {
        char seen[256] = {0};
        int present = 0;
        for (int k = 0; k < 2; k++) {
            const struct dataset *d = k ? &s->test : &s->train;
            for (int i = 0; i < d->n; i++)
                if (d->labels[i] >= 0 && d->labels[i] < n_cls && !seen[d->labels[i]]) seen[d->labels[i]] = 1, present++;
        }
        if (2 * present < n_cls)
            fprintf(stderr, "bench: warning: %s: the labels reach %d, so the model gets %d outputs, but only %d of those "
                            "classes occur (a stray label? check the label files)\n", dir, n_cls - 1, n_cls, present);
    }
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
    for (int k = 0; k < s->n_dir_locks; k++) close(s->dir_lock_fd[k]); /* the checkpoint folders, free for the next */
    s->n_dir_locks = 0;
    timeline_csv_close(&s->timeline);
    backend_destroy(&s->be);
    if (s->have_model) model_free(&s->m);
    dataset_free(&s->train);
    dataset_free(&s->test);
    free(s->params);
    free(s->buffers);
    for (int k = 1; k <= s->ahead; k++) free(s->ahead_x[k]), free(s->ahead_y[k]);
    free(s->ahead_x);
    free(s->ahead_y);
    free(s->bx);
    free(s->by);
    free(s->run_x);
    free(s->run_y);
    free(s->run_st);
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
    if (st == TB_OK) st = outputs_check(&s->c);
    if (st != TB_OK) return st;
    const double t0 = tb_now_s();
    s->init_ms = mllog_now_ms();
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
    if (s->c.run.batch <= 0 && s->c.plan == PLAN_THROUGHPUT) {
        int h, wd, ch;
        double flops = 0.0;
        (void)native_shape(s, &h, &wd, &ch, &flops);
        s->c.run.batch = throughput_default_batch(s, flops);
        if (s->c.run.batch != s->w->batch) s->batch_lowered = 1;
        /* The recipe at the batch that will run, not the workload's (what bench_config_finish knew). */
        bench_config_recipe_lr(&s->c, s->w, s->c.run.batch);
    }
    if (s->c.run.batch <= 0 && s->c.plan != PLAN_SCALING) s->c.run.batch = s->w->batch;
    /* --resume of a directory with nothing to resume: said before the data are read or a backend is prepared. */
    if (s->c.resume[0]) {
        long steps[8];
        int cnt = 0;
        if ((st = resume_dir_has_checkpoints(s->c.resume, steps, 8, &cnt)) != TB_OK) return st;
    }
    s->data_ms[0] = mllog_now_ms();
    if ((st = load_data(s)) != TB_OK) return st;
    /* What the data is, not what its directory is called: a run resumed on other pixels, or two rows of
     * other sets under one name, differ here (a probe resumed a run on another set unsaid). */
    {
        uLong crc = crc32(0L, Z_NULL, 0);
        const struct dataset *d[2] = {&s->train, &s->test};
        for (int k = 0; k < 2; k++) {
            /* crc32_z: a size_t length (crc32's uInt would need chunks past 4 GiB) */
            crc = crc32_z(crc, d[k]->images, (size_t)d[k]->n * d[k]->h * d[k]->w * d[k]->c);
            crc = crc32_z(crc, (const Bytef *)d[k]->labels, (size_t)d[k]->n * sizeof *d[k]->labels);
        }
        s->data_crc32 = (uint32_t)crc;
    }
    s->data_ms[1] = mllog_now_ms();
    struct workload_opts wo = s->c.wopts;
    wo.in_h = s->train.h, wo.in_w = s->train.w, wo.in_c = s->train.c;
    if (wo.classes <= 0) wo.classes = s->train.n_classes;
    /* A label at or past the model's classes would read another sample's logits (or past the last row): the
     * data and --classes must agree before anything is built. */
    for (int k = 0; k < 2; k++) {
        const struct dataset *d = k ? &s->test : &s->train;
        int top = -1;
        for (int i = 0; i < d->n; i++) top = d->labels[i] > top ? d->labels[i] : top;
        if (top >= wo.classes)
            return tb_error_set(TB_EINVAL, "--classes %d, but the %s set's labels reach %d (%s): give --classes %d or more",
                                wo.classes, k ? "test" : "training", top, d->source[0] ? d->source : d->name, top + 1);
    }
    if (s->c.load[0] && wo.bn_eps <= 0.0f) {
        /* The ε the file's weights were trained with (its bn_eps), unless --bn-eps says otherwise; a plain
         * torchvision state_dict has none and gets the variant's torchvision default. */
        char v[32];
        if (checkpoint_read_meta(s->c.load, "bn_eps", v, sizeof v) == TB_OK) {
            /* The range --bn-eps takes: a file's 1e30 or inf made the model's output uniform, and "abc" fell back
             * to the default, unsaid. */
            char *end;
            errno = 0;
            const float e = strtof(v, &end);
            if (end == v || *end || errno || !(e > 0.0f && e <= 1.0f))
                return tb_error_set(TB_EFORMAT, "--load %s: its bn_eps \"%s\" is not a number in (0, 1]", s->c.load, v);
            wo.bn_eps = e;
        }
        tb_error_clear(); /* an unreadable file is reported by checkpoint_load below */
    }
    s->c.wopts = wo;
    s->build_ms[0] = mllog_now_ms();
    if ((st = s->w->build(&s->m, &wo)) != TB_OK) return st;
    s->build_ms[1] = mllog_now_ms();
    s->have_model = 1;
    s->params = calloc(s->m.n_params ? s->m.n_params : 1, sizeof(float));
    s->buffers = calloc(s->m.n_buffers ? s->m.n_buffers : 1, sizeof(float));
    s->s.perm = malloc((size_t)s->train.n * sizeof(uint32_t));
    s->test_y = malloc((size_t)(s->test.n ? s->test.n : 1) * sizeof(int32_t));
    s->batch_cap = max_batch(s);
    const size_t per = (size_t)s->train.h * s->train.w * s->train.c;
    s->bx = malloc((size_t)s->batch_cap * per);
    s->by = malloc((size_t)s->batch_cap * sizeof(int32_t));
    if (!s->params || !s->buffers || !s->s.perm || !s->test_y || !s->bx || !s->by)
        return tb_error_set(TB_ENOMEM, "out of memory preparing the run");
    for (int i = 0; i < s->test.n; i++) s->test_y[i] = s->test.labels[i];
    if (s->c.load[0]) {
        /* Init first so any padding between tensors holds what a fresh run has; then the file. */
        s->w->init(&s->m, s->params, s->buffers, s->c.run.seed);
        if ((st = checkpoint_load(s->c.load, &s->m, s->params, s->buffers)) != TB_OK) return st;
        /* Weights trained with another GroupNorm group count have the same shapes but are another model. */
        char g[32];
        if (checkpoint_read_meta(s->c.load, "gn_groups", g, sizeof g) == TB_OK) {
            char *end;
            const long groups = strtol(g, &end, 10);
            if (end == g || *end || groups < 1 || groups > 1 << 20)
                return tb_error_set(TB_EFORMAT, "--load %s: its gn_groups \"%s\" is not a group count", s->c.load, g);
            for (int i = 0; i < s->m.n_layers; i++)
                if (s->m.layers[i].op == OP_GN) {
                    if (groups != s->m.layers[i].a.norm.groups)
                        return tb_error_set(TB_EINVAL, "--load %s: trained with GroupNorm of %s groups; this model has %d "
                                                       "(give --norm group:%s)", s->c.load, g,
                                            s->m.layers[i].a.norm.groups, g);
                    break;
                }
        }
        tb_error_clear();
        s->loaded = 1;
        /* What the weights are, not what their file is called (as data_crc32 for the data): training in place
         * (--save over --load's file) or a file replaced leaves the path the same and the run another. The
         * stored tensors only, in the model's order: the padding between them is the seed's. */
        uLong crc = crc32(0L, Z_NULL, 0);
        for (int k = 0; k < s->m.n_entries; k++) {
            const struct param_entry *e = &s->m.params[k];
            const float *arena = e->kind == PARAM_BUFFER || e->kind == PARAM_COUNTER ? s->buffers : s->params;
            crc = crc32_z(crc, (const Bytef *)(arena + e->off), e->n * sizeof *arena);
        }
        s->load_crc32 = (uint32_t)crc;
    }
    machine_info_read(&s->mi);
    machine_gpu_read(&s->mi, s->c.device);
    const int cal_st = calibrate_load_matching(s->c.calibration, s->mi.cpu_model, s->mi.n_cores, s->mi.blas_core,
                                               &s->cal);
    s->have_cal = cal_st == TB_OK;
    /* A missing default file is the usual first run; a path the user named that cannot be read is said, once the
     * backend says whether this process speaks (session_backend). */
    s->cal_unread[0] = '\0';
    if (cal_st == TB_EIO && strcmp(s->c.calibration, CALIBRATION_DEFAULT_PATH) != 0)
        snprintf(s->cal_unread, sizeof s->cal_unread, "%s", tb_error_get());
    tb_error_clear();
    /* --project-device beside a run: a spec it cannot have (cpu-this without this machine's calibration, a device
     * not in the set) is refused before any step, as the projection alone refuses it, not said after the run. */
    if (s->c.project_device[0] && !s->c.project_only) {
        struct dev_spec d;
        const int st = project_device_spec(s->c.project_device, s->c.device_set, s->c.calibration, &s->cal,
                                           s->have_cal, &d);
        if (st != TB_OK) return st;
    }
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

/* The batch buffers --prefetch needs for the prepared backend: as many more as it takes batches ahead
 * (kept for later backends of the session). An explicit --prefetch that copies nothing says so, once. */
static int session_ahead(struct session *s, int talk)
{
    const int ahead = backend_prefetches(&s->be);
    if (ahead == 0 && s->c.run.ipu.prefetch > 0 && talk && !s->prefetch_note_done++) {
        const char *dev = s->be.cfg.device[0] ? s->be.cfg.device : "cpu";
        /* A device loop (cuda's batch-1 steps) reads no batch from the host: the run's samples go to the device
         * once, before its steps. */
        if (backend_loops_on_device(&s->be))
            fprintf(stderr, "bench: note: --prefetch %d: nothing is copied ahead: %s on device %s runs its steps in a "
                            "loop on the device, from the run's samples staged there once\n",
                    s->c.run.ipu.prefetch, s->c.backend, dev);
        else
            fprintf(stderr, "bench: note: --prefetch %d: nothing is copied ahead: %s on device %s reads each batch in "
                            "host memory where it is assembled\n", s->c.run.ipu.prefetch, s->c.backend, dev);
    }
    if (ahead <= s->ahead) return TB_OK;
    const size_t per = s->m.tensors[s->m.input].per_sample;
    uint8_t **x = realloc(s->ahead_x, (size_t)(ahead + 1) * sizeof *x);
    if (x) s->ahead_x = x;
    int32_t **y = realloc(s->ahead_y, (size_t)(ahead + 1) * sizeof *y);
    if (y) s->ahead_y = y;
    if (!x || !y) return tb_error_set(TB_ENOMEM, "out of memory for --prefetch's batches");
    x[0] = s->bx, y[0] = s->by;
    for (; s->ahead < ahead; s->ahead++) {
        const int k = s->ahead + 1;
        x[k] = malloc((size_t)s->batch_cap * per);
        y[k] = malloc((size_t)s->batch_cap * sizeof(int32_t));
        if (!x[k] || !y[k]) {
            free(x[k]), free(y[k]);
            return tb_error_set(TB_ENOMEM, "out of memory for --prefetch's %d batches", ahead);
        }
    }
    return TB_OK;
}

/* --project-devices where none of the counts fits the arrangement the backend chose (its stages, micro-batch and
 * global batch, known once it is prepared): the run would measure, then project nothing. Refused before a step,
 * as a usage error; a scaling sweep keeps its points (another point's arrangement may fit) and notes the counts
 * left out at its first row (row.c). */
static int projection_fits(const struct session *s, const struct pipeline_report *pr)
{
    const struct bench_config *c = &s->c;
    if (c->n_project <= 0 || c->plan == PLAN_SCALING) return TB_OK;
    const int global = pr->micro_batch * pr->ga * pr->replicas;
    struct proj_row rows[BENCH_MAX_BATCHES];
    if (proj_default_rows(c->project_devices, c->n_project, pr->stages, pr->micro_batch, global, rows) > 0)
        return TB_OK;
    char list[BENCH_MAX_BATCHES * 12], whys[400] = "", why[160];
    bench_config_project_list(c, list, sizeof list);
    for (int i = 0; i < c->n_project; i++) { /* each count's reason, as far as the line holds them */
        proj_row_fits(c->project_devices[i], pr->stages, pr->micro_batch, global, why, sizeof why);
        const size_t len = strlen(whys);
        snprintf(whys + len, sizeof whys - len, "%s%s", i ? "; " : "", why);
    }
    return tb_error_set(TB_EINVAL, "--project-devices %s: no count fits this run's %d stage%s, micro-batch %d and "
                                   "global batch %d, so nothing would be projected (%s)", list, pr->stages,
                        pr->stages == 1 ? "" : "s", pr->micro_batch, global, whys);
}

/* A training BatchNorm over one value a channel (a batch of one at a 1×1 map: effnet-b0's last layers at 32×32)
 * normalises it to 0, so its output is its bias and no gradient passes: the run would train nothing and say
 * nothing. PyTorch refuses the same ("Expected more than 1 value per channel when training"). Checked once the
 * backend is prepared, with the split it chose (batch_split): a pipeline's micro-batch, derived when not given, or
 * a mirrored replica's samples. */
static int bn_values_check(const struct session *s, int batch, int pipelined)
{
    if (s->c.plan == PLAN_INFERENCE || s->c.plan == PLAN_EVALUATE) return TB_OK; /* running statistics */
    int replicas, accum, local;
    batch_split(s, batch, &replicas, &accum, &local);
    const long seen = (long)local * (s->c.run.sync_bn ? replicas : 1); /* the samples one BatchNorm sums over */
    for (int i = 0; i < s->m.n_layers; i++) {
        const struct layer *l = &s->m.layers[i];
        if (l->op != OP_BN) continue;
        const struct tensor *t = &s->m.tensors[l->out];
        if (seen * t->h * t->w < 2)
            return tb_error_set(TB_EINVAL, "%s at batch %d: BatchNorm %s sees %ld value%s a channel (%ld sample%s of "
                                           "%dx%d), so it trains nothing; use %s, or --norm group",
                                s->w->name, batch, l->name, seen * t->h * t->w, seen * t->h * t->w == 1 ? "" : "s",
                                seen, seen == 1 ? "" : "s", t->h, t->w,
                                pipelined ? "a micro-batch of 2 or more (--micro-batch)"
                                                   : replicas > 1 ? "2 or more samples a replica, or --sync-bn"
                                                                  : "a batch of 2 or more");
    }
    return TB_OK;
}

/* Prepares the backend for a global batch (re-creating it when the batch changes). */
int session_backend(struct session *s, int batch, int eval_batch)
{
    /* Every plan calls this before its run's steps: the per-step split and the backend calls count from here.
     * A scaling point that failed wrote no row, and a stopped one's row takes no split, so neither may pass
     * its steps on to the next point's row. */
    memset(s->split, 0, sizeof s->split);
    s->n_exec = s->n_exec_steps = 0;
    if (s->be_batch == batch && s->be_eval_batch == eval_batch) return TB_OK;
    timeline_csv_close(&s->timeline);
    const int replaced = s->be.i != NULL;
    backend_destroy(&s->be);
    s->be_batch = s->be_eval_batch = 0;
    /* A scaling sweep's next point: the peak memory counts from here, once the previous point's arenas are
     * freed, so that a small point after a large one reports its own peak, not the large one's. The freed
     * memory is handed back first: malloc keeps it resident where told to (MALLOC_TRIM_THRESHOLD_, as the
     * tests set it), and it would count in the next point's peak. */
    if (replaced && s->peak_per_run) {
        malloc_trim(0);
        measure_peak_reset();
    }
    /* The GPU memory figures count from the backend about to be prepared (its executors' allocations). */
    struct device_memory dm;
    if (s->mi.have_gpu && executor_device_memory(s->c.device, &dm, 1) != TB_OK) tb_error_clear();
    /* Preparing can take a while (the ipu backend times every layer to balance its stages): a first line
     * before it, so that a piped run is not silent. */
    const int talk = !s->c.quiet && !s->c.compact;
    if (talk) {
        char what[128] = "";
        if (s->batch_lowered && batch == s->c.run.batch)
            snprintf(what, sizeof what, " (lowered from the workload's %d so a step takes seconds; --batch to set)",
                     s->w->batch);
        fprintf(stderr, "bench: %s %s/%s, batch %d%s: preparing the backend\n", bench_plan_name(s->c.plan),
                s->c.backend, s->w->name, batch, what);
        /* More threads than cores take turns on them: a figure of the scheduler, not of the machine's best. The
         * cores this process may use (under taskset or a cpuset fewer than the machine's: --threads 2 on one
         * allowed core went unsaid), and mirrored's devices on the cpu, each a thread, as --threads. */
        const int takes_threads = backend_takes_option(s->c.backend, "threads");
        const struct backend_entry *be = backend_find(s->c.backend);
        const int cpu_devices = be && be->caps.replicas_are_devices && !strcmp(s->c.device, "cpu");
        const int T = takes_threads ? s->c.run.n_threads : cpu_devices ? s->c.run.n_devices : 0;
        const int cores = s->mi.usable_cores > 0 ? s->mi.usable_cores : s->mi.n_cores;
        if (T > cores && cores > 0) {
            char of[64] = "";
            if (cores < s->mi.n_cores)
                snprintf(of, sizeof of, " (of the machine's %d: the process's CPU affinity)", s->mi.n_cores);
            fprintf(stderr, "bench: note: --%s %d on %d core%s%s: the %s take turns, so the figures are not this "
                            "machine's best\n", takes_threads ? "threads" : "devices", T, cores, cores == 1 ? "" : "s",
                    of, takes_threads ? "threads" : "devices");
        }
    }
    s->prepare_ms[0] = mllog_now_ms();
    struct run_config rc = s->c.run;
    rc.batch = batch;
    rc.eval_batch = eval_batch;
    snprintf(rc.device, sizeof rc.device, "%s", s->c.device);
    /* --tuning: the choices timed on this machine by this executable before, into the process's cache (once a
     * process: a suite opens a session per run, and the cache outlives them). */
    static char tuning_read[sizeof s->c.tuning];
    static int tuning_unusable; /* the file read was not a tuning file: said once, never written over */
    int tuning = conv_tuning_on(&s->c);
    if (tuning && strcmp(tuning_read, s->c.tuning) != 0) {
        tuning_unusable = conv_tuning_load(s->c.tuning, &s->mi) < 0;
        snprintf(tuning_read, sizeof tuning_read, "%s", s->c.tuning);
    }
    tuning = tuning && !tuning_unusable;
    const int timed0 = exec_tune_measured();
    int st = backend_create(&s->be, s->c.backend);
    if (st == TB_OK) st = backend_prepare(&s->be, &s->m, &rc);
    s->conv_timed = exec_tune_measured() - timed0;
    /* What this preparation timed, kept for the next run; only the rank that writes (a failed write is said,
     * once a process, and costs the next run its timing, never this run). */
    static int tuning_unsaved;
    const int saved = st == TB_OK && tuning && s->conv_timed > 0 && backend_is_primary(&s->be);
    if (saved && conv_tuning_save(s->c.tuning, &s->mi) != TB_OK) {
        if (!tuning_unsaved++) fprintf(stderr, "bench: warning: %s\n", tb_error_get());
        tb_error_clear();
    } else if (saved && talk) { /* the preparation's silent seconds (9 at 224x224), said */
        fprintf(stderr, "bench: timed the algorithms of %d convolution shape%s; kept in %s for later runs\n",
                s->conv_timed, s->conv_timed == 1 ? "" : "s", s->c.tuning);
    }
    /* Over MPI, before the first collective of a step: ranks given other options or data would pair unlike ones. */
    if (st == TB_OK) st = session_ranks_check(s, batch, eval_batch);
    if (st != TB_OK) return st;
    s->prepare_ms[1] = mllog_now_ms();
    backend_describe(&s->be, s->desc, sizeof s->desc);
    s->be_batch = batch, s->be_eval_batch = eval_batch;
    s->run_step_s = 0.0; /* another backend or batch: the next run of steps measures its pace again */
    s->run_cap = 0;      /* ... and stages its steps afresh: the buffers hold run_cap steps of the old batch */
    /* A pipelined backend resolves replicas and accumulation itself (derived from the batch when not given);
     * mirrored's replicas are its devices, GPUs or the cores this process may use, every rank's under MPI. */
    struct pipeline_report pr;
    s->split_replicas = s->split_accum = 0;
    const int pipelined = backend_pipeline_report(&s->be, &pr) == TB_OK;
    tb_error_clear();
    const struct backend_entry *e = backend_find(s->c.backend);
    if (pipelined) s->split_replicas = pr.replicas, s->split_accum = pr.ga;
    else if (e && e->caps.replicas_are_devices && backend_n_devices(&s->be) > 0)
        s->split_replicas = backend_n_devices(&s->be), s->split_accum = 1;
    /* What a pipelined backend chose (micro-batch × GA, stages, recomputation) when not told. */
    if (talk && pipelined) fprintf(stderr, "bench: %s\n", s->desc);
    /* The refusals first, then --timeline's file, which opening truncates: a refused run leaves it as it was. */
    if ((st = bn_values_check(s, batch, pipelined)) != TB_OK || (pipelined && (st = projection_fits(s, &pr)) != TB_OK) ||
        (s->c.timeline[0] && (st = timeline_csv_open(&s->timeline, s->c.timeline)) != TB_OK)) {
        s->be_batch = s->be_eval_batch = 0; /* not a backend to run: the next call prepares it again */
        return st;
    }
    if ((st = session_ahead(s, talk)) != TB_OK) return st;
    /* Under MPI every rank runs the plan; only rank 0 speaks and writes. */
    s->primary = backend_is_primary(&s->be);
    static int cal_said; /* once a process: a suite opens a session per run */
    if (s->primary && s->cal_unread[0] && !cal_said++)
        fprintf(stderr, "bench: warning: --calibration: %s; the rows carry no machine ceilings\n", s->cal_unread);
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
    const size_t n = 6 * (size_t)s->m.n_layers + 1; /* backend_layer_profile's layout */
    if (!s->prof0) s->prof0 = calloc(n, sizeof(double));
    if (!s->prof1) s->prof1 = calloc(n, sizeof(double));
    if (!s->prof0 || !s->prof1) return;
    if (backend_layer_profile(&s->be, s->prof0, &s->busy_threads) == TB_OK) s->prof_ok = 1;
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
    /* The optimizer's initial state is the executors' (RMSProp's mean square at 1): NULL restores it. */
    if (st == TB_OK && s->m.n_params) st = backend_set_tensors(&s->be, TF_OPT, NULL);
    s->s.ds = &s->train, s->s.seed = seed, s->s.perm_epoch = -1;
    return st;
}

int eval_batch_choose(const struct model *m, int batch, int requested, int test_n, int state_floats, double avail)
{
    int eb = requested;
    if (eb <= 0) {
        /* Default: at least the training batch (already allocated for), up to 256 samples while their
         * forward activations stay under 1 GiB: 256 × 224×224 EfficientNet-B0 samples peaked at 18 GB. */
        const double per = 4.0 * (double)(model_act_floats(m, 2) - model_act_floats(m, 1));
        long fit = per > 0.0 ? (long)((double)(1L << 30) / per) : 256;
        eb = fit < 256 ? (int)fit : 256;
        if (eb < batch) eb = batch;
    }
    /* Never more than the test set: a larger batch only allocates room for samples that do not exist. */
    if (test_n > 0 && eb > test_n) eb = test_n;
    /* Never more than fits beside training (the backend refuses a run that does not fit at all). */
    while (eb > 1 && avail > 0.0 && model_train_bytes(m, batch, state_floats, eb) > 0.9 * avail &&
           model_train_bytes(m, batch, state_floats, 1) <= 0.9 * avail)
        eb /= 2;
    return eb < 1 ? 1 : eb;
}

int session_eval_samples(const struct session *s)
{
    return s->eval_n > 0 && s->eval_n < s->test.n ? s->eval_n : s->test.n;
}

int session_eval_batch(struct session *s, int batch)
{
    const int req = s->c.eval_batch;
    const int eb = eval_batch_choose(&s->m, batch, req, session_eval_samples(s),
                                     optim_state_per_param(s->c.run.optim.kind), arena_mem_available());
    if (req > 0 && eb < req && s->eval_note_done == 0 && !s->c.quiet) {
        s->eval_note_done = 1;
        fprintf(stderr, "bench: note: --eval-batch %d: evaluating in batches of %d (%s)\n", req, eb,
                eb == session_eval_samples(s) ? "the samples evaluated" : "what fits in memory");
    }
    return eb;
}

int session_stop_due(struct session *s)
{
    const int sig = bench_stop_signal();
    return sig && (bench_stop_agreed() || !backend_offer_stop(&s->be, sig)) ? sig : 0;
}

void session_stop_heard(struct session *s, int signo)
{
    if (!signo || bench_stop_agreed()) return;
    if (!bench_stop_signal() && s->primary)
        fprintf(stderr, "bench: another rank was sent %s: every rank stops at this point with it\n", bench_signal_name(signo));
    bench_stop_agree(signo);
}

/* Accuracy and mean loss on the test set (its first session_eval_samples samples). */
int session_evaluate_chunks(struct session *s, long n, int chunk, float *logits, struct eval_stats *ev, long *done)
{
    const size_t px = (size_t)s->test.h * s->test.w * s->test.c;
    const long chunks = (n + chunk - 1) / chunk;
    int st = TB_OK;
    for (*done = 0; *done < chunks && st == TB_OK; ++*done) {
        if (session_stop_due(s))
            return tb_error_set(TB_EINTR, "interrupted by %s after %ld of %ld evaluation batches",
                                bench_signal_name(bench_stop_signal()), *done, chunks);
        const long off = *done * chunk, m = n - off < chunk ? n - off : chunk;
        struct batch tb = {(int)m, s->test.images + (size_t)off * px, s->test_y + off};
        if (logits) ev->logits = logits + (size_t)off * (size_t)s->m.n_classes;
        st = backend_evaluate(&s->be, &tb, ev);
        session_stop_heard(s, ev->stop_signal);
    }
    return st;
}

/* TB_STOP_IN_EVAL=K[:MS]: SIGTERM raised MS milliseconds (default 0) into this process's K-th
 * evaluation. The tests' way to stop a run inside an evaluation, which a signal from outside hits only
 * by chance (a few ms in a run); MS stands for the evaluation's time before the stop. */
static void stop_in_eval_failpoint(void)
{
    static long count;
    const char *e = getenv("TB_STOP_IN_EVAL");
    char *end;
    if (!e || !*e || ++count != strtol(e, &end, 10)) return;
    const long ms = *end == ':' ? strtol(end + 1, NULL, 10) : 0;
    if (ms > 0) {
        const struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    raise(SIGTERM);
}

int session_evaluate(struct session *s, double *acc, double *loss, double *time_s)
{
    const double t0 = tb_now_s();
    stop_in_eval_failpoint();
    const int n = session_eval_samples(s);
    struct eval_stats ev = {0};
    long done;
    int st = session_evaluate_chunks(s, n, s->be_eval_batch > 0 ? s->be_eval_batch : n, NULL, &ev, &done);
    *time_s = tb_now_s() - t0;
    if (st == TB_EINTR) return tb_error_set(st, "interrupted by %s in the evaluation", bench_signal_name(bench_stop_signal()));
    if (st != TB_OK) return st;
    if (ev.n <= 0) return tb_error_set(TB_EINVAL, "evaluation saw no samples");
    *acc = (double)ev.correct / (double)ev.n;
    *loss = ev.loss_sum / (double)ev.n;
    /* A test loss that is not finite is a model that diverged in eval mode (running statistics, no dropout),
     * though its training loss may be finite: no accuracy of it is a result (TB_EDIVERGED, as a training
     * loss's NaN is). A NaN loss means a NaN or Inf logit; an Inf one may also be logits too far apart. */
    if (!isfinite(*loss))
        return tb_error_set(TB_EDIVERGED, "%s/%s: diverged: the test loss is %s: the model's eval-mode outputs are "
                            "not finite%s (lower --lr?)", s->c.backend, s->w->name,
                            isnan(*loss) ? "NaN" : *loss > 0 ? "+Inf" : "-Inf",
                            isnan(*loss) ? "" : " or too far apart for float");
    return TB_OK;
}

int step_record_init(struct step_record *r, long n)
{
    memset(r, 0, sizeof *r);
    r->base = 1;
    r->cap = n < BENCH_MAX_TIMED_STEPS ? n : BENCH_MAX_TIMED_STEPS; /* a longer run times its first ones */
    if (r->cap < 1) r->cap = 1;
    r->first_loss = NAN;
    r->times = malloc((size_t)r->cap * sizeof(double));
    if (!r->times) return tb_error_set(TB_ENOMEM, "out of memory for %ld step times", r->cap);
    return TB_OK;
}

void step_record_free(struct step_record *r)
{
    free(r->times);
    memset(r, 0, sizeof *r);
}

void step_record_book(struct step_record *r, long step, double dt, double loss)
{
    const long i = step - r->base;
    if (i < 0) return;
    if (i < r->cap) r->times[i] = dt;
    if (i == 0) r->first_loss = loss;
    r->ring[i % LOSS_TAIL_MAX] = loss;
    r->n_booked = i + 1;
}

long step_record_tail(const struct step_record *r, long n, double *out)
{
    if (n > r->n_booked) n = r->n_booked;
    if (n > LOSS_TAIL_MAX) n = LOSS_TAIL_MAX;
    for (long k = 0; k < n; k++) out[k] = r->ring[(r->n_booked - n + k) % LOSS_TAIL_MAX];
    return n > 0 ? n : 0;
}

/* The most pixels and labels a run of steps stages at once: an MNIST epoch at batch 1 is 47 MB, so
 * mnist-mlp's epoch is staged whole; an EfficientNet batch of hundreds of large images is a step alone. */
#define RUN_SPAN_BYTES (64L << 20)
/* An automatic run of steps lasts about this long: a progress line, a stop signal or a checkpoint then
 * waits at most this for the run in flight, and one host round trip is spread over its steps. */
#define RUN_TARGET_S 1.0

/* The steps one backend call may run: --steps-per-execution N, else (auto) unbounded where the backend
 * loops on its device (runs are sized by time, run_length), and 1 elsewhere or with --trace/--timeline,
 * which record single steps. */
static long steps_per_call(const struct session *s)
{
    if (s->c.steps_per_execution > 0) return s->c.steps_per_execution;
    return backend_loops_on_device(&s->be) && !s->c.trace[0] && !s->c.timeline[0] ? LONG_MAX : 1;
}

/* Assembles the batches of steps from .. (at most) to in stream order, as many as RUN_SPAN_BYTES holds
 * (at least one), and stages them with the backend; *last gets the last step staged. */
static int run_stage(struct session *s, long from, long to, long *last)
{
    const int batch = s->be_batch;
    const size_t per = (size_t)s->train.h * s->train.w * s->train.c;
    const size_t step_bytes = (size_t)batch * (per + sizeof(int32_t));
    long n = to - from + 1, fit = (long)(RUN_SPAN_BYTES / step_bytes);
    if (fit < 1) fit = 1;
    if (n > fit) n = fit;
    if (n > s->run_cap) {
        free(s->run_x), free(s->run_y), free(s->run_st);
        s->run_x = malloc((size_t)n * batch * per);
        s->run_y = malloc((size_t)n * batch * sizeof *s->run_y);
        s->run_st = malloc((size_t)n * sizeof *s->run_st);
        s->run_cap = s->run_x && s->run_y && s->run_st ? n : 0;
        if (!s->run_cap) return tb_error_set(TB_ENOMEM, "out of memory staging %ld steps of batch %d", n, batch);
    }
    for (long k = 0; k < n; k++)
        stream_batch(&s->s, from + k, batch, s->run_x + (size_t)k * batch * per, s->run_y + (size_t)k * batch);
    const struct batch all = {(int)(n * batch), s->run_x, s->run_y};
    *last = from + n - 1;
    return backend_stage_steps(&s->be, from, n, &all);
}

/* The length of the next run: per_call steps, or (auto) about RUN_TARGET_S at the last run's pace (one
 * step while it is unknown); never more than the left steps staged. */
static long run_length(const struct session *s, long per_call, long left)
{
    long k = per_call;
    if (per_call == LONG_MAX) {
        const double q = s->run_step_s > 0.0 ? RUN_TARGET_S / s->run_step_s : 1.0;
        k = q >= (double)left ? left : q < 1.0 ? 1 : (long)q;
    }
    return k < left ? k : left;
}

/* Whether step is timed: past the warm-up, the first c.warmup steps of the record, as the plans count them. */
static int step_timed(const struct session *s, const struct step_record *rec, long step)
{
    return step - rec->base >= s->c.warmup;
}

/* Books one step that ran (st: its own status, ss: what it reported, dt: its seconds): the divergence
 * rules, the session's counters, the step record and, on the per-step path (traced), --trace's capture.
 * TB_OK to go on; else the step is not done. */
static int step_book(struct session *s, long step, int st, const struct step_stats *ss, double dt,
                     struct step_record *rec, int traced, struct progress *pr)
{
    const double l = ss->loss_sum / s->be_batch;
    if (st == TB_EDIVERGED || (st == TB_OK && (!isfinite(l) || ss->nonfinite))) {
        /* A finite loss: the backend stopped on its gradients (fp16 overflows at the lowest or a static loss
         * scale), and its message names the cause and the remedy (--loss-scale), which "lower --lr" alone
         * would hide. */
        if (isfinite(l) && st == TB_EDIVERGED && tb_error_get()[0])
            return tb_error_set(TB_EDIVERGED, "%s/%s: diverged: %s", s->c.backend, s->w->name, tb_error_get());
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
    session_stop_heard(s, ss->stop_signal);
    /* The warm-up's steps apart (the first c.warmup of the record, as the plans count them): the split on the
     * row and stdout then covers the steps its step-time line times, not the cold first ones. */
    struct split_sums *sp = &s->split[step_timed(s, rec, step)];
    sp->step += dt, sp->compute += ss->t_compute, sp->allreduce += ss->t_allreduce;
    sp->exchange += ss->t_exchange, sp->idle += ss->t_idle, sp->n++;
    step_record_book(rec, step, dt, l);
    /* --trace: the chosen step, or every step so that the last one is kept (a copy of ~2 events per
     * layer, outside the step's timing). */
    if (traced && s->c.trace[0] && (s->c.trace_step == 0 || step == s->c.trace_step) &&
        trace_capture_take(&s->trace, &s->be, step, dt) != TB_OK) {
        progress_finish(pr); /* a terminal's redrawn line cleared: the warning starts a line of its own */
        fprintf(stderr, "bench: warning: %s\n", tb_error_get());
        tb_error_clear();
    }
    return TB_OK;
}

/* Steps from..to (1-based, inclusive) at the prepared batch. One step a backend call (batch assembly
 * included in its time; with --prefetch on devices that copy their inputs, the batches of the next steps
 * handed over ahead), or in runs (steps_per_call): the batches of up to RUN_SPAN_BYTES of steps
 * assembled in the same stream order and staged once, then runs of them, each run's time shared evenly by
 * its steps and its losses booked step by step, so the losses, the divergence rules, the record and the
 * progress line are the per-step path's (the same bits: backend_run_steps is those steps' train steps).
 * Runs end at `to`, where the callers put epoch ends, evaluations and checkpoints, and at the last warm-up
 * step (rec->base + warmup - 1), so that no timed step shares a call's time with the warm-up. The progress
 * line shows done = pr_done + steps so far, and the rate since t_rate0 with samples_before samples already
 * counted. s->done_step and s->last_loss follow the last completed step. A non-finite loss stops the run
 * (TB_EDIVERGED); a stop signal stops it before the next call (TB_EINTR). A skipped fp16 step (the ipu
 * backend's dynamic loss scaling) is not divergence: the backend handles it and reports a finite loss. */
int session_steps(struct session *s, long from, long to, struct step_record *rec, struct progress *pr,
                  long pr_done, double t_rate0, long samples_before)
{
    const int batch = s->be_batch;
    const long per_call = steps_per_call(s);
    long staged_to = from - 1; /* the last step staged with the backend by this call */
    const int ahead = backend_prefetches(&s->be) > 0 ? backend_prefetches(&s->be) : 0;
    s->done_step = from - 1;
    if (from == 1) s->last_loss = NAN, loss_watch_reset(&s->watch);
    for (long step = from; step <= to;) {
        if (session_stop_due(s))
            return tb_error_set(TB_EINTR, "interrupted by %s after step %ld", bench_signal_name(bench_stop_signal()),
                                step - 1);
        /* step_book quotes the backend's message for a finite-loss divergence: none left from before. */
        tb_error_clear();
        /* The backend's per-step sums (the ipu's per-stage figures) cover the split's steps; a call's steps are
         * all warm-up or all timed (see warm_end below). */
        backend_count_steps(&s->be, step_timed(s, rec, step));
        const double t0 = tb_now_s();
        struct step_stats one;
        const struct step_stats *sts = &one;
        long k = 1, done = 0;
        int st = TB_OK;
        if (per_call == 1) {
            /* --prefetch: this step's batch was handed over `ahead` steps ago (the first steps' now); step
             * step + ahead's goes now, so its copy runs while this step computes. */
            const int at = ahead ? (int)(step % (ahead + 1)) : 0;
            uint8_t *bx = ahead ? s->ahead_x[at] : s->bx;
            int32_t *by = ahead ? s->ahead_y[at] : s->by;
            if (!ahead || step == from) stream_batch(&s->s, step, batch, bx, by);
            for (long n = step == from ? step + 1 : step + ahead; ahead && n <= step + ahead && n <= to && st == TB_OK;
                 n++) {
                const int an = (int)(n % (ahead + 1));
                stream_batch(&s->s, n, batch, s->ahead_x[an], s->ahead_y[an]);
                const struct batch next = {batch, s->ahead_x[an], s->ahead_y[an]};
                st = backend_prefetch(&s->be, &next, n);
            }
            const struct batch b = {batch, bx, by};
            memset(&one, 0, sizeof one);
            if (st == TB_OK) st = backend_train_step(&s->be, &b, step, &one);
            done = st == TB_OK;
        } else {
            /* The staged batches are the copies ahead: no per-step prefetch within a run. */
            if (step > staged_to && (st = run_stage(s, step, to, &staged_to)) != TB_OK) return st;
            /* A call never straddles the last warm-up step (the callers number the warm-up from rec->base):
             * each step of a call is timed as the call's mean, so a call over both would share the cold first
             * steps' time with timed steps. The steps and their bits are the same either way. */
            const long warm_end = rec->base + s->c.warmup - 1;
            const long end = step <= warm_end && warm_end < staged_to ? warm_end : staged_to;
            k = run_length(s, per_call, end - step + 1);
            st = backend_run_steps(&s->be, step, k, s->run_st, &done);
            sts = s->run_st;
        }
        if (st == TB_OK && step + k - 1 == to && (st = backend_finish(&s->be)) != TB_OK)
            done = k - 1; /* the deferred part of the last step failed: that step did */
        if (st != TB_OK && done >= k) done = k - 1;
        const double t1 = tb_now_s(), dt = (t1 - t0) / (double)k;
        if (per_call == LONG_MAX) s->run_step_s = dt;
        s->n_exec++, s->n_exec_steps += k;
        if (per_call == 1 && timeline_csv_step(&s->timeline, &s->be, step) != TB_OK) { /* outside the time */
            progress_finish(pr);
            fprintf(stderr, "bench: warning: %s\n", tb_error_get());
            tb_error_clear();
        }
        for (long j = 0; j < k && j <= done; j++) {
            const int rc = step_book(s, step + j, j < done ? TB_OK : st, &sts[j], dt, rec, per_call == 1, pr);
            if (rc != TB_OK) return rc;
            if (pr->enabled) {
                const long n = step + j - from + 1;
                progress_update(pr, pr_done + n, s->last_loss,
                                (double)(samples_before + n * (long)batch) / (t1 - t_rate0));
            }
        }
        step += k;
    }
    return TB_OK;
}

void session_progress(const struct session *s, struct progress *p, long total_steps, const char *extra)
{
    char label[96];
    snprintf(label, sizeof label, "%s%s %s/%s%s", s->c.progress_prefix, bench_plan_name(s->c.plan), s->c.backend,
             s->w->name, extra ? extra : "");
    progress_init(p, total_steps, label);
    if (s->c.quiet) progress_silence(p); /* --quiet: warnings and errors only on stderr */
}

long session_steps_skipped(struct session *s)
{
    struct backend_stats bs;
    if (backend_stats(&s->be, &bs) != TB_OK || !bs.loss_scaling) {
        tb_error_clear();
        return 0;
    }
    return bs.loss_scaling->skipped;
}

/* The diverged rule needs 10 overflows in a row at the lowest scale, so a run shorter than that could skip
 * every step and still look like a result: one that applied no update trained nothing, and ends as diverged
 * (train and throughput alike). skipped counts from the run's own start (a scaling point may reuse a backend,
 * a resumed run carries its checkpoint's skips); advice: what lets a dynamic scale come down ("more steps",
 * "more --warmup steps"). */
int session_applied_some(struct session *s, long ran, long skipped, const char *advice)
{
    struct backend_stats bs;
    if (ran < 1 || skipped < ran || backend_stats(&s->be, &bs) != TB_OK || !bs.loss_scaling) {
        tb_error_clear();
        return TB_OK;
    }
    /* A static scale never comes down: more steps would not help, a lower --loss-scale would. */
    if (bs.loss_scaling->fixed > 0.0f)
        return tb_error_set(TB_EDIVERGED, "%s/%s: no update applied: fp16 gradients overflowed on all %ld steps (static "
                                          "loss scale %g; lower --lr or --loss-scale)",
                            s->c.backend, s->w->name, ran, (double)bs.loss_scaling->fixed);
    /* A dynamic scale at its floor (1) whose last step still overflowed: the gradients overflow fp16 unscaled, so
     * more steps cannot lower the scale, and with no update applied the rate took no part. A wider format helps,
     * or on ipu a larger micro-batch (BatchNorm over 2 samples overflowed where over 8 it did not). */
    if (bs.loss_scaling->overflow_run > 0)
        return tb_error_set(TB_EDIVERGED, "%s/%s: no update applied: fp16 gradients overflowed on all %ld steps, the "
                                          "last ones even at the lowest loss scale 1 (unscaled; more steps cannot "
                                          "help): use --precision bf16 or fp32%s",
                            s->c.backend, s->w->name, ran, !strcmp(s->c.backend, "ipu") ? ", or a larger --micro-batch"
                                                                                        : "");
    return tb_error_set(TB_EDIVERGED, "%s/%s: no update applied: fp16 gradients overflowed on all %ld steps (loss "
                                      "scale now %g; lower --lr, or run %s so the dynamic scale can come down)",
                        s->c.backend, s->w->name, ran, (double)bs.loss_scaling->scale, advice);
}
