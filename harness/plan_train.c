/* plan_train.c — the training run: --epochs or --steps over the data, then the test accuracy; resumable
 * through checkpoints (see run.h). Also the points of a trained scaling sweep.
 */
#define _GNU_SOURCE
#include "session.h"

#include "checkpoint.h"
#include "clock.h"
#include "finished.h"
#include "fmt_figure.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One training run as its steps below share it: what was planned, where it resumed, what it wrote and
 * what it measured. */
struct train_run {
    struct session *s;
    int batch;
    const char *run_id;
    const struct scale_base *sb; /* a trained scaling point (no checkpoints, no resume, always evaluated) */
    int epochs;
    long spe, total;             /* steps per epoch, steps of the whole run */
    int ckpt;                    /* checkpoints go to --checkpoint-dir */
    long every;                  /* a periodic checkpoint every this many steps (0: none) */
    long start;                  /* the resumed checkpoint's step (0: a fresh run) */
    double prev_train;           /* training seconds before this process (resume) */
    struct loss_history hist;    /* the resumed checkpoint's losses (known = 0: it had none) */
    int finished;                /* --resume of a run that finished and wrote its row: nothing to do */
    char resumed_from[600], ckpt_path[600];
    char ckpt_err[512];          /* a complete run's final checkpoint could not be written: why ("" = it was) */
    struct step_record rec;
    struct mllog lg;
    struct progress pr;
    double t0, ckpt_time, session_train; /* this process: clock start, seconds checkpointing, training */
    long step, ckpt_step;        /* the last completed step; the step of the newest checkpoint (-1: none) */
    long skipped0;               /* fp16 steps skipped before this run's first step (a resumed checkpoint's) */
    long open_epoch;             /* the epoch whose epoch_start the log has and epoch_stop not yet (0: none) */
    int n_ckpt;
    /* measured */
    long recorded, warm, window; /* steps with a recorded time, of them warm-up, in the final-loss mean */
    long first_step;             /* the step first_loss is of: 1, or this session's first (see train_figures) */
    struct measure_throughput tp;
    double acc, loss, eval_time;
    int evaluated;
    double first_loss, final_loss, train_time, images_per_s, flops_step, gflops;
};

/* Sets a run up: its length, a prepared backend holding fresh weights (or the resumed checkpoint's), the
 * checkpoint directory, the step record, the event log and the progress line. */
static int train_begin(struct train_run *t)
{
    struct session *s = t->s;
    struct bench_config *c = &s->c;
    const int batch = t->batch;
    const long long init_ms = mllog_now_ms(); /* this run's set-up: its MLPerf init interval */
    t->epochs = c->epochs > 0 ? c->epochs : s->w->epochs;
    t->spe = c->steps_per_epoch > 0 ? c->steps_per_epoch : s->train.n / batch;
    if (t->spe <= 0)
        return tb_error_set(TB_EINVAL, "--batch %d is larger than the training set (%d samples)", batch, s->train.n);
    t->total = (c->plan == PLAN_TRAIN && c->steps > 0) ? c->steps : (long)t->epochs * t->spe;
    if (c->plan == PLAN_TRAIN && c->steps > 0 && !t->sb && c->eval) {
        /* A run of --steps N evaluates in proportion to what it trained: the first max(1,000, N × batch)
         * test samples, so `--steps 1` on effnet-b4 does not spend an hour on 10,000 380×380 images; a
         * run of whole epochs (the benchmark) evaluates the whole test set. */
        const long n = t->total * (long)batch > 1000 ? t->total * (long)batch : 1000;
        if (n < s->test.n) {
            s->eval_n = (int)n;
            if (!c->quiet && !c->compact)
                fprintf(stderr, "bench: --steps %ld: evaluating the first %ld of the %d test samples (train by "
                                "--epochs for the whole set)\n", c->steps, n, s->test.n);
        }
    }
    const int eval_batch = session_eval_batch(s, batch);
    c->run.optim.total_steps = t->total;
    int st = session_backend(s, batch, eval_batch);
    if (st == TB_OK) st = session_reset(s, c->run.seed);
    if (st != TB_OK) return st;
    t->ckpt = !t->sb && c->checkpoint_dir[0];
    long resumed_every = 0;
    /* The folders' locks before the resume reads them: a run finishing there meanwhile could not be seen. */
    if (!t->sb && (c->resume[0] || t->ckpt) && (st = checkpoint_dirs_lock(s)) != TB_OK) return st;
    if (!t->sb && c->resume[0] &&
        (st = resume_from(s, batch, t->total, &t->start, &t->prev_train, &resumed_every, t->resumed_from,
                          sizeof t->resumed_from, NULL, &t->hist)) != TB_OK)
        return st;
    char note[1200];
    /* At the last step the note decides (unreadable: refused, finished_check). Before it, a note of this total means
     * the run's last checkpoint was set aside as damaged and an older one taken: the run finished and wrote its row
     * all the same, and running its last steps again would write a second. An unreadable note there is refused too
     * where a damaged checkpoint was set aside (the run may have finished), and left to the checkpoints where the
     * newest was taken (extending a run). */
    int done = 0;
    if (c->resume[0] && (t->start == t->total || s->resume_n_damaged))
        done = finished_check(c->resume, t->total, note, sizeof note);
    else if (c->resume[0] && (done = finished_at(c->resume, t->total, note, sizeof note)) < 0) {
        done = 0;
        tb_error_clear();
    }
    if (done < 0) return TB_EIO;
    if (done) {
        fprintf(stderr, "bench: --resume %s: the run %s: nothing to do, no new row\n", c->resume, note);
        t->finished = 1;
        return TB_OK;
    }
    /* A resumed run keeps its checkpoint cadence unless told otherwise. */
    if (!c->checkpoint_every) c->checkpoint_every = resumed_every;
    t->every = t->ckpt ? c->checkpoint_every : 0;
    if (t->ckpt && (st = checkpoint_dir_ready(s)) != TB_OK) return st;
    /* A resumed run's scaler carries the checkpoint's skips: "no update applied" is of this run's steps. */
    t->skipped0 = session_steps_skipped(s);
    if ((st = step_record_init(&t->rec, t->total - t->start)) != TB_OK) return st;
    t->rec.base = t->start + 1;
    if ((st = open_log(&t->lg, s, t->run_id)) != TB_OK) return st;
    log_run_header_at(&t->lg, s, batch, c->run.seed, t->spe, init_ms);
    if (t->start > 0) mllog_point_int(&t->lg, "resumed_from_step", t->start);
    mllog_event(&t->lg, MLLOG_START, "run_start", "null", -1, NULL);
    char extra[24] = "";
    if (t->sb) snprintf(extra, sizeof extra, " b%d", batch);
    session_progress(s, &t->pr, t->total, extra);
    profile_begin(s);
    return TB_OK;
}

/* The run's losses up to t->step, as its checkpoint carries them and its figures use them: the resumed
 * checkpoint's history, then this session's steps, the tail cut to the last LOSS_TAIL_MAX. h->known = 0
 * when the run resumed from a checkpoint without one (its first loss is not known here). */
static void train_history(const struct train_run *t, struct loss_history *h)
{
    if (t->start > 0) {
        *h = t->hist;
    } else {
        memset(h, 0, sizeof *h);
        h->known = 1, h->first = NAN;
    }
    /* The record keeps the session's first loss and its last LOSS_TAIL_MAX at any length: past its cap of times (2^24
     * steps) the history was dropped, and the final loss was that of steps 2^24 − 99 .. 2^24. */
    const long ran = t->step - t->start;
    if (!h->known) return;
    if (t->start == 0 && ran > 0) h->first = t->rec.first_loss;
    const long add = ran < LOSS_TAIL_MAX ? ran : LOSS_TAIL_MAX;
    const long keep = h->n_tail < LOSS_TAIL_MAX - add ? h->n_tail : LOSS_TAIL_MAX - add;
    memmove(h->tail, h->tail + (h->n_tail - keep), (size_t)keep * sizeof *h->tail);
    if (add > 0) step_record_tail(&t->rec, add, h->tail + keep);
    h->n_tail = keep + add;
}

/* A periodic checkpoint at t->step. It is insurance: if it cannot be written (disk full), say so and
 * train on; the one at the end or on a stop signal must succeed. */
static void train_checkpoint_periodic(struct train_run *t)
{
    const double c0 = tb_now_s();
    struct loss_history h;
    train_history(t, &h);
    if (checkpoint_write(t->s, t->batch, t->step, t->total, t->prev_train + (c0 - t->t0 - t->ckpt_time), NULL, &h,
                         t->ckpt_path, sizeof t->ckpt_path) == TB_OK)
        t->ckpt_step = t->step, t->n_ckpt++;
    else {
        /* On a terminal the progress line is up: cleared, or the warning went on at its end ("ETA 0:04bench: ..."). */
        progress_finish(&t->pr);
        fprintf(stderr, "bench: warning: step %ld: %s\n", t->step, tb_error_get());
    }
    tb_error_clear();
    t->ckpt_time += tb_now_s() - c0;
}

/* The steps from the start (or the resumed step) to the total, an epoch (or a checkpoint period) at a
 * time; t->step follows the last completed step, t->session_train the seconds they took. */
static int train_loop(struct train_run *t)
{
    struct session *s = t->s;
    const long spe = t->spe, total = t->total, every = t->every, start = t->start;
    int st = TB_OK;
    t->t0 = tb_now_s();
    /* The newest checkpoint of this run in --checkpoint-dir (the resumed one if that is the same directory). */
    t->step = start;
    t->ckpt_step = start > 0 && strcmp(s->c.checkpoint_dir, s->c.resume) == 0 ? start : -1;
    s->done_step = start, s->last_loss = NAN;
    while (t->step < total && st == TB_OK) {
        const long step = t->step;
        /* A resumed run opens the epoch it resumed in. */
        if (!t->open_epoch) {
            t->open_epoch = step / spe + 1;
            mllog_event(&t->lg, MLLOG_START, "epoch_start", "null", t->open_epoch, NULL);
        }
        long to = (step / spe + 1) * spe;
        if (to > total) to = total;
        if (every > 0 && (step / every + 1) * every < to) to = (step / every + 1) * every;
        /* The line's rate is the summary's, training seconds alone: with the checkpoints' time in it, it read
         * 14,234 img/s where the summary said 18,702. (Its ETA stays the wall clock's.) */
        st = session_steps(s, step + 1, to, &t->rec, &t->pr, step, t->t0 + t->ckpt_time,
                           (step - start) * (long)t->batch);
        t->step = s->done_step;
        if (st != TB_OK) break;
        if (t->step % spe == 0) {
            mllog_event(&t->lg, MLLOG_END, "epoch_stop", "null", t->step / spe, NULL);
            t->open_epoch = 0;
        }
        if (every > 0 && t->step % every == 0) train_checkpoint_periodic(t);
    }
    t->session_train = tb_now_s() - t->t0 - t->ckpt_time;
    progress_finish(&t->pr);
    return st;
}

/* An epoch cut short (--steps ending mid-epoch, a stop, a failed step) still ends, before the evaluation
 * and run_stop: MLPerf's checker wants an epoch_stop, and every interval closed (as in the tta plan). */
static void train_close_epoch(struct train_run *t)
{
    if (t->open_epoch) mllog_event(&t->lg, MLLOG_END, "epoch_stop", "null", t->open_epoch, NULL);
    t->open_epoch = 0;
}

/* Interrupted: a checkpoint of the last completed step, so that --resume loses nothing. Also at the end
 * of a complete run, before the evaluation, so a kill during it loses nothing either. A failed final
 * checkpoint does not void the measurement: a complete run goes on, t->ckpt_err names the failure, its
 * row is still written and the run then exits 1 with that error (plan_train). A stopped run keeps its
 * own status and message. */
static int train_last_checkpoint(struct train_run *t, int st)
{
    const long step = t->step;
    if (t->ckpt && t->ckpt_step == step && !t->ckpt_path[0])
        snprintf(t->ckpt_path, sizeof t->ckpt_path, "%s", t->resumed_from);
    if (!(t->ckpt && (st == TB_OK || st == TB_EINTR) && step > 0 && t->ckpt_step != step)) return st;
    char msg[512], new_path[sizeof t->ckpt_path];
    snprintf(msg, sizeof msg, "%s", tb_error_get());
    const double c0 = tb_now_s();
    struct loss_history h;
    train_history(t, &h);
    const int wst = checkpoint_write(t->s, t->batch, step, t->total, t->prev_train + t->session_train, NULL, &h,
                                     new_path, sizeof new_path);
    t->ckpt_time += tb_now_s() - c0;
    if (wst == TB_OK) t->ckpt_step = step, t->n_ckpt++, memcpy(t->ckpt_path, new_path, sizeof t->ckpt_path);
    if (st == TB_OK) {
        if (wst != TB_OK) snprintf(t->ckpt_err, sizeof t->ckpt_err, "%s", tb_error_get());
        return st;
    }
    if (wst != TB_OK) fprintf(stderr, "bench: warning: no checkpoint: %s\n", tb_error_get());
    tb_error_set(st, "%s", msg);
    return st;
}

/* A run stopped by a signal or a non-finite loss: its message says whether and how it can continue,
 * and its row records what ran. */
static int train_stopped(struct train_run *t, int st)
{
    struct session *s = t->s;
    const long step = t->step;
    train_close_epoch(t);
    mllog_event(&t->lg, MLLOG_END, "run_stop", "null", -1, "aborted");
    mllog_close(&t->lg, t->s->output_err, sizeof t->s->output_err);
    step_record_free(&t->rec);
    const int have_ck = st == TB_EINTR && t->ckpt && t->ckpt_step == step && step > 0;
    if (st == TB_EINTR) {
        if (have_ck)
            tb_error_set(st, "%s of %ld; checkpoint %s (continue with --resume %s)", tb_error_get(), t->total,
                         t->ckpt_path, s->c.checkpoint_dir);
        else
            tb_error_set(st, "%s of %ld; no checkpoint (%s)", tb_error_get(), t->total,
                         t->sb ? "a scaling point is a measurement, not resumable"
                         : !t->ckpt ? "give --checkpoint-dir DIR to make runs resumable"
                         : step == 0 ? "nothing trained yet" : "it could not be written");
    }
    const struct stop_info si = {t->total, step, t->start, t->prev_train + t->session_train, t->session_train,
                                 have_ck ? t->ckpt_path : NULL, t->sb ? s->run_base : NULL};
    return plan_stopped(s, st, t->run_id, t->batch, &si);
}

/* The metadata members that tell another framework how to feed the saved model: the input layer's
 * affine map (pixels p → (p·scale − mean[c]) / std[c], done inside the model, so a PyTorch user applies
 * the same transform before torchvision's model), the resolution it resamples to, and the BatchNorm
 * momentum in PyTorch's convention (1 − ours). checkpoint_save adds bn_eps itself. */
static void save_preprocessing(const struct model *m, char *buf, size_t n)
{
    const struct layer *in = NULL, *bn = NULL;
    for (int i = 0; i < m->n_layers; i++) {
        if (!in && m->layers[i].op == OP_INPUT) in = &m->layers[i];
        if (!bn && m->layers[i].op == OP_BN) bn = &m->layers[i];
    }
    int k = 0;
    const struct tensor *t = in ? &m->tensors[in->out] : NULL;
    if (t && t->h == 1 && t->w == 1 && t->c == m->in_h * m->in_w * m->in_c && m->in_h * m->in_w > 1) {
        /* A flattening input (mnist-mlp): the data's own shape and channels, no per-channel shift and no
         * resampling (it said 1x1 and three channels, which a reader following it would resample to). */
        k = snprintf(buf, n,
                     "\"input_scale\":\"%.7g\",\"input_resolution\":\"%dx%d\",\"input_channels\":\"%d\","
                     "\"preprocessing\":\"uint8 HWC pixels p: x = p*input_scale, flattened in HWC order to %d values "
                     "inside the model; no resampling (the model is built for input_resolution)\"",
                     (double)in->a.input.scale, m->in_h, m->in_w, m->in_c, t->c);
    } else if (in) {
        const float *mu = in->a.input.shift, *sd = in->a.input.std;
        k = snprintf(buf, n,
                     "\"input_scale\":\"%.7g\",\"input_mean\":\"[%.6g,%.6g,%.6g]\",\"input_std\":\"[%.6g,%.6g,%.6g]\","
                     "\"input_resolution\":\"%dx%d\",\"preprocessing\":\"uint8 HWC pixels p: x = (p*input_scale - "
                     "input_mean[c]) / input_std[c], inside the model; resampled to input_resolution (bilinear, "
                     "half-pixel centres, no antialias) when the data's shape differs; grey replicated to 3 channels\"",
                     (double)in->a.input.scale, (double)mu[0], (double)mu[1], (double)mu[2], (double)sd[0],
                     (double)sd[1], (double)sd[2], t->h, t->w);
    }
    if (bn && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "%s\"bn_momentum_torch\":\"%.6g\"", k ? "," : "",
                 1.0 - (double)bn->a.norm.momentum);
    if (!in && !bn) snprintf(buf, n, "\"preprocessing\":\"none\"");
}

/* --save: the trained parameters and buffers (primary process only). */
static int train_save(struct train_run *t)
{
    struct session *s = t->s;
    int st = session_ck_alloc(s);
    if (st == TB_OK) st = backend_get_tensors(&s->be, TF_PARAMS, s->ck_params);
    if (st == TB_OK && s->m.n_buffers) st = backend_get_tensors(&s->be, TF_BUFFERS, s->ck_buffers);
    if (st == TB_OK) {
        char meta[1024], pre[640];
        save_preprocessing(&s->m, pre, sizeof pre);
        snprintf(meta, sizeof meta, "{\"workload\":\"%s\",\"step\":%ld,\"run_id\":\"%s\",%s}", s->w->name, t->total,
                 t->run_id, pre);
        st = checkpoint_save(s->c.save, &s->m, s->ck_params, s->ck_buffers, meta);
    }
    return st;
}

/* A trained scaling point's rate: its timed steps' (warm-up excluded), as an untrained point's. The whole run's
 * rate put the process's one-time start-up (first touches, the pool, the BLAS) in the first point's alone: batches
 * 8 then 16 read a 7.4x speed-up, 16 then 8 a 0.70x one (probe G, 20 steps a point). */
static double point_rate(const struct train_run *t)
{
    return t->recorded > t->warm && t->tp.images_per_s > 0.0 ? t->tp.images_per_s : t->images_per_s;
}

/* After the steps: the per-step statistics, the test-set evaluation (always for a scaling point),
 * --save, and the end of the event log. */
static int train_evaluate(struct train_run *t, int st)
{
    struct session *s = t->s;
    const struct bench_config *c = &s->c;
    const long ran = t->step - t->start;
    t->recorded = ran < t->rec.cap ? ran : t->rec.cap;
    t->warm = t->recorded > c->warmup ? c->warmup : 0;
    memset(&t->tp, 0, sizeof t->tp);
    if (st == TB_OK && t->recorded > 0) st = measure_throughput(t->rec.times, t->recorded, t->warm, t->batch, &t->tp);
    t->acc = t->loss = NAN, t->eval_time = 0.0;
    t->evaluated = c->eval || t->sb;
    train_close_epoch(t);
    if (st == TB_OK && t->evaluated) {
        /* MLPerf's eval events carry the epoch and the samples trained so far. */
        const struct mllog_meta m = {(t->step + t->spe - 1) / t->spe, (long long)t->step * t->batch, NULL, 0};
        mllog_event_meta(&t->lg, MLLOG_START, "eval_start", "null", &m);
        if (!c->quiet && !c->compact) {
            /* Evaluating hundreds of large images takes minutes: not in silence. */
            char msg[64];
            snprintf(msg, sizeof msg, "evaluating %d test samples", session_eval_samples(s));
            progress_note(&t->pr, msg);
        }
        st = session_evaluate(s, &t->acc, &t->loss, &t->eval_time);
        if (st == TB_OK) {
            char v[40];
            json_format_double(t->acc, v, sizeof v);
            mllog_event_meta(&t->lg, MLLOG_POINT, "eval_accuracy", v, &m);
            mllog_event_meta(&t->lg, MLLOG_END, "eval_stop", "null", &m);
        }
    }
    if (st == TB_OK && !t->sb && c->save[0] && s->primary) st = train_save(t);
    mllog_event(&t->lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK ? "success" : "aborted");
    mllog_close(&t->lg, t->s->output_err, sizeof t->s->output_err);
    return st;
}

/* The run's figures from its steps, and what a scaling point hands back (res, when not NULL). */
static void train_figures(struct train_run *t, struct point_result *res)
{
    /* The losses over every session of the run (the same sum, in the same order, as a straight run's), unless
     * it resumed from a checkpoint without them: then this session's steps alone, from first_step. */
    struct loss_history h;
    train_history(t, &h);
    double tail = 0.0;
    if (h.known) {
        t->window = h.n_tail;
        for (long i = 0; i < h.n_tail; i++) tail += h.tail[i];
        t->first_loss = h.first;
        t->first_step = 1;
    } else {
        double losses[LOSS_TAIL_MAX];
        t->window = step_record_tail(&t->rec, LOSS_TAIL_MAX, losses);
        for (long i = 0; i < t->window; i++) tail += losses[i];
        t->first_loss = t->window > 0 ? t->rec.first_loss : NAN;
        t->first_step = t->start + 1;
    }
    t->final_loss = t->window > 0 ? tail / (double)t->window : NAN;
    /* Over every session of the run: what the run cost, not what this process did. */
    t->train_time = t->prev_train + t->session_train;
    t->images_per_s = (double)t->total * t->batch / t->train_time;
    t->flops_step = model_train_flops_per_sample(&t->s->m) * t->batch;
    t->gflops = t->flops_step * (double)t->total / t->train_time * 1e-9;
    if (res)
        *res = (struct point_result){point_rate(t), t->acc, measure_peak_rss_mib(), t->s->c.warmup > 0 && t->warm == 0};
}

/* The run's result row. */
static int train_row(struct train_run *t)
{
    struct session *s = t->s;
    const struct bench_config *c = &s->c;
    const int batch = t->batch;
    const long total = t->total;
    struct json_buf b;
    row_begin(s, &b, t->run_id, batch, total, t->sb ? s->run_base : NULL);
    json_key_double(&b, "train_time_s", t->train_time);
    json_key_int(&b, "train_steps", total);
    json_key_int(&b, "samples", total * batch);
    /* The training run's headline rate covers every step, warm-up included (as it always has); the per-step
     * statistics exclude the warm-up, and their overall rate is timed_images_per_s (one key, one figure: a
     * second images_per_s was read as the first by bench's own readers and as the last by jq and pandas). */
    if (t->recorded > 0) write_throughput(&b, &t->tp, "timed_images_per_s");
    json_key_double(&b, "images_per_s", t->images_per_s);
    json_key_int(&b, "warmup_steps", t->warm);
    json_key_double(&b, "first_loss", t->first_loss);
    json_key_double(&b, "final_loss", t->final_loss);
    /* 1: the two figures above are the whole run's; later: resumed from a checkpoint without the run's losses,
     * they are this session's. */
    json_key_int(&b, "loss_figures_from_step", t->first_step);
    if (t->start > 0) {
        json_key_int(&b, "resumed_from_step", t->start);
        json_key_str(&b, "resumed_from", t->resumed_from);
        json_key_double(&b, "previous_train_time_s", t->prev_train);
        json_key_double(&b, "session_train_time_s", t->session_train);
        json_key_int(&b, "session_steps", t->step - t->start);
    }
    if (t->ckpt) {
        write_checkpoints(&b, t->n_ckpt, t->ckpt_time, t->ckpt_path);
        if (t->ckpt_err[0]) json_key_str(&b, "checkpoint_error", t->ckpt_err);
    }
    if (t->evaluated) {
        json_key_double(&b, "test_accuracy", t->acc);
        json_key_double(&b, "test_loss", t->loss);
        json_key_double(&b, "eval_time_s", t->eval_time);
    }
    write_scaling(&b, s, t->sb, batch, point_rate(t));
    write_layer_times(s, &b, t->step - t->start);
    write_trace(s, &b, t->run_id);
    write_pipeline(s, &b, t->recorded > 0 ? t->tp.images_per_s : 0.0, -1);
    write_step_split(s, &b);
    write_step_executions(s, &b);
    row_common_figures(s, &b, t->gflops,
                       row_train_bytes(s, batch),
                       t->flops_step);
    const int st = row_end(s, &b);
    /* The run finished and its row exists: a later --resume of the same steps has nothing to do. */
    if (st == TB_OK && t->ckpt && t->ckpt_step == total && s->primary &&
        finished_mark(c->checkpoint_dir, total, t->run_id, c->out))
        fprintf(stderr, "bench: warning: %s\n", tb_error_get());
    return st;
}

/* The summary on stdout: a block for a single run, one line in a suite, nothing for a scaling point. Printed
 * before the row is written, so that what the row's writers print follows it; plan_train adds the row's line. */
static void train_print(const struct train_run *t)
{
    const struct session *s = t->s;
    const struct bench_config *c = &s->c;
    const int batch = t->batch;
    if (!c->quiet && !c->compact && !t->sb) {
        printf("trainbench %s on %s (%s)\n", s->w->name, s->train.name, s->desc);
        /* --steps sets the length: the epochs are what those steps make (1.88 epochs of 16 steps), not the
         * workload's default count. */
        char len[96];
        if (t->total == (long)t->epochs * t->spe)
            snprintf(len, sizeof len, "%d epoch%s x %ld steps", t->epochs, t->epochs == 1 ? "" : "s", t->spe);
        else snprintf(len, sizeof len, "%.3g epochs of %ld steps", (double)t->total / t->spe, t->spe);
        printf("  config      batch %d, %ld steps (%s), %s lr %g, seed %llu\n", batch, t->total, len,
               optim_name(c->run.optim.kind), (double)c->run.optim.lr, (unsigned long long)c->run.seed);
        if (t->start > 0)
            printf("  resumed     at step %ld from %s (%.3f s of training before this run)\n", t->start,
                   t->resumed_from, t->prev_train);
        printf("  training    %.3f s, %.0f images/s, %.2f GFLOP/s\n", t->train_time, t->images_per_s, t->gflops);
        char warm[128]; /* a run no longer than its warm-up times every step, cold ones too: said */
        if (t->warm == 0 && c->warmup > 0)
            snprintf(warm, sizeof warm, "--warmup %d not applied: the run has %ld step%s, each timed", c->warmup,
                     t->recorded, t->recorded == 1 ? "" : "s");
        else snprintf(warm, sizeof warm, "%ld warm-up excluded", t->warm);
        if (t->recorded > 0) print_throughput(&t->tp, warm, "over the timed steps");
        if (t->window > 0)
            printf("  loss        %.4f at step %ld, %.4f mean of the last %ld steps\n", t->first_loss, t->first_step,
                   t->final_loss, t->window);
        if (t->evaluated) {
            char e[32];
            printf("  test        accuracy %.2f %% on %d images, loss %.4f (%s s)\n", 100.0 * t->acc,
                   session_eval_samples(s), t->loss, fmt_s(e, sizeof e, t->eval_time));
        }
        if (t->ckpt)
            printf("  checkpoint  %s (%d written, %.3f s, not counted as training)\n",
                   t->ckpt_path[0] ? t->ckpt_path : "none", t->n_ckpt, t->ckpt_time);
        if (c->save[0]) printf("  saved       %s\n", c->save);
    } else if (c->compact && !c->quiet && !t->sb) {
        printf("%strain %s/%s b%d%s%s: %.0f img/s over %ld steps", c->progress_prefix, c->backend, s->w->name, batch,
               c->variant[0] ? " " : "", c->variant, t->images_per_s, t->total);
        if (t->evaluated) printf(", test accuracy %.2f %%", 100.0 * t->acc);
        printf("\n");
    }
}

/* The training run: --epochs or --steps over the data, then the test accuracy. Also the points of a
 * trained scaling sweep (sb non-NULL). With --resume it continues a checkpoint's run from its step;
 * with --checkpoint-dir it checkpoints every --checkpoint-every steps, on a stop signal and at the end;
 * --save writes the final weights. Training time excludes checkpoint writing and adds the seconds the
 * resumed run had already trained. */
int plan_train(struct session *s, int batch, const char *run_id, const struct scale_base *sb, struct point_result *res)
{
    struct train_run t;
    memset(&t, 0, sizeof t);
    t.s = s, t.batch = batch, t.run_id = run_id, t.sb = sb;
    int st = train_begin(&t);
    if (st != TB_OK || t.finished) {
        step_record_free(&t.rec);
        return st;
    }
    st = train_last_checkpoint(&t, train_loop(&t));
    if (st == TB_OK)
        st = session_applied_some(s, t.step - t.start, session_steps_skipped(s) - t.skipped0, "more steps");
    if (st == TB_EINTR || st == TB_EDIVERGED) return train_stopped(&t, st);
    st = train_evaluate(&t, st);
    if (st == TB_EINTR) {
        /* Stopped in the final evaluation: the steps are done (and checkpointed with --checkpoint-dir), so a
         * resume runs no step, evaluates and writes the row. */
        tb_error_set(st, "%s after step %ld", tb_error_get(), t.step);
        return train_stopped(&t, st);
    }
    /* Eval-mode outputs that are not finite: a diverged row, not a row without one. */
    if (st == TB_EDIVERGED) return train_stopped(&t, st);
    if (st == TB_OK) {
        train_figures(&t, res);
        train_print(&t);
        st = train_row(&t);
        const struct bench_config *c = &s->c;
        if (st == TB_OK && !c->quiet && !c->compact && !sb) printf("  result row  %s (run %s)\n", c->out, run_id);
    }
    step_record_free(&t.rec);
    if (st == TB_OK && t.ckpt_err[0]) st = tb_error_set(TB_EIO, "%s (the result row was written)", t.ckpt_err);
    return st;
}
