/* plan_tta.c — time to accuracy: train until an evaluation reaches the target, --seeds times, olympic
 * mean; resumable mid-seed through checkpoints that carry the plan's own state (see run.h).
 */
#define _GNU_SOURCE
#include "session.h"

#include "clock.h"
#include "finished.h"
#include "fmt_figure.h"
#include "stats.h"
#include "status.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A time-to-accuracy plan as its steps below share it: its shape, the seeds' results, where it resumed,
 * its checkpoints, and where a stopped seed stopped. */
struct tta_plan {
    struct session *s;
    int batch, n;                /* global batch, seeds */
    long spe, every, max_steps;  /* steps per epoch, evaluation period, a seed's most steps */
    struct tta_runs r;
    struct step_record rec;
    int ckpt;                    /* checkpoints go to --checkpoint-dir */
    long ck_every;               /* a periodic checkpoint every this many steps of a seed (0: none) */
    int k0;                      /* the first seed this process runs (resume: the one in progress) */
    long start;                  /* resume: the steps seed k0 had done */
    long g_before;               /* the steps of the finished seeds (checkpoints are numbered by the plan's steps) */
    long g_resumed;              /* the resumed checkpoint's step (-1: a fresh plan) */
    double prev_train, prev_eval; /* resume: seed k0's seconds training and evaluating before this process */
    double ckpt_total;           /* seconds spent writing checkpoints */
    int n_ckpt;
    char resumed_from[600], ckpt_path[600];
    char ckpt_err[512];          /* a finished seed's checkpoint that could not be written (the first): the
                                    result is still written, naming it, and the run then exits 1 */
    int resumed_here;            /* the newest checkpoint in --checkpoint-dir is the resumed one */
    long done_ckpt;              /* the plan step of a checkpoint holding every seed's result (-1: none) */
    int finished;                /* --resume of a plan that finished and wrote its row: nothing to do */
    int ran;                     /* the seed that stopped, or n */
    int seed_warned;             /* the backend cannot reseed: said once */
    long stop_step, stop_start;  /* a stopped seed's completed steps and where its session began */
    double stop_time, stop_session;
    /* the result */
    int n_reached;
    double olympic, median, ips_sum, flops_step, gflops;
};

/* One seed's run in this process. */
struct tta_seed {
    int k;
    uint64_t seed;
    int resumed;                 /* it continues the resumed checkpoint */
    long step, first;            /* the last completed step; the step this session began at */
    double prev_t, prev_e;       /* seconds training and evaluating before this process */
    double t0, eval_sess, ckpt_time; /* this process: clock start, seconds evaluating, writing checkpoints */
    double eval_cut;             /* seconds of an evaluation a stop cut short: neither training nor on the
                                  * curve (the resumed seed runs that evaluation again, and counts it then) */
    double session_train;
    long ckpt_step;              /* the step of this seed's newest checkpoint (-1: none) */
    long open_epoch;             /* the epoch whose epoch_start the log has and epoch_stop not yet (0: none) */
    char id[128];
    struct mllog lg;
    struct progress pr;
};

/* resume_from's check of a checkpoint's tta_state (struct resume_check): restored into fresh seeds' records, which
 * replace the plan's only if the whole state makes sense, so a damaged checkpoint is skipped for the one before it
 * with nothing of it left behind. */
static int tta_resume_check(void *ctx, const char *path, long step, const char *state)
{
    struct tta_plan *p = ctx;
    struct tta_runs r;
    int k_now = 0;
    long seed_step = 0, g_before = 0;
    double eval_s = 0.0;
    int st = tta_runs_init(&r, p->n, p->s->c.target);
    if (st == TB_OK)
        st = tta_state_restore(state, path, &r, p->max_steps, p->spe, p->batch, &k_now, &seed_step, &eval_s, &g_before);
    if (st == TB_OK && g_before + seed_step != step)
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: step %ld is not its seeds' %ld + %ld steps", path, step, g_before,
                          seed_step);
    if (st != TB_OK) {
        tta_runs_free(&r);
        return st;
    }
    tta_runs_free(&p->r);
    p->r = r;
    p->k0 = k_now, p->start = seed_step, p->prev_eval = eval_s, p->g_before = g_before;
    return TB_OK;
}

/* --resume: the checkpoint's tensors go over the first seed's (a seed that had finished starts afresh
 * in tta_seed_open); the finished seeds' results and the curve of the seed in progress come back from
 * its tta_state (tta_resume_check). */
static int tta_resume(struct tta_plan *p)
{
    struct session *s = p->s;
    struct bench_config *c = &s->c;
    long resumed_every = 0;
    int st;
    if ((st = session_reset(s, c->run.seed)) != TB_OK) return st;
    const struct resume_check check = {tta_resume_check, p};
    if ((st = resume_from(s, p->batch, LONG_MAX, &p->g_resumed, &p->prev_train, &resumed_every, p->resumed_from,
                          sizeof p->resumed_from, &check, NULL)) != TB_OK)
        return st;
    if (!c->checkpoint_every) c->checkpoint_every = resumed_every;
    return TB_OK;
}

/* Sets the plan up: its shape, a prepared backend, the seeds' records, the resumed state and the
 * checkpoint directory. */
static int tta_begin(struct tta_plan *p)
{
    struct session *s = p->s;
    struct bench_config *c = &s->c;
    /* The plan writes no layer times (its steps interleave evaluations and seeds): a --profile would be
     * recorded in the row and honoured nowhere. --trace (which implies it internally) writes its trace. */
    if (bench_option_given(c, "profile"))
        return tb_error_set(TB_EINVAL, "--profile: --plan tta records no layer times; use --plan train or throughput");
    const int batch = p->batch = c->run.batch;
    p->spe = c->steps_per_epoch > 0 ? c->steps_per_epoch : s->train.n / batch;
    if (p->spe <= 0)
        return tb_error_set(TB_EINVAL, "--batch %d is larger than the training set (%d samples)", batch, s->train.n);
    p->every = c->eval_every > 0 ? c->eval_every : p->spe;
    p->max_steps = (long)c->max_epochs * p->spe;
    /* A seed never runs past max_steps: a --trace-step after it is refused as train refuses one past --steps. */
    if (c->trace[0] && c->trace_step > p->max_steps)
        return tb_error_set(TB_EINVAL, "--trace-step %ld: a seed has at most %ld steps (--max-epochs %d, %ld steps an "
                                       "epoch)", c->trace_step, p->max_steps, c->max_epochs, p->spe);
    const int eval_batch = session_eval_batch(s, batch);
    c->run.optim.total_steps = p->max_steps;
    int st = session_backend(s, batch, eval_batch);
    if (st != TB_OK) return st;
    p->n = c->seeds;
    if ((st = tta_runs_init(&p->r, p->n, c->target)) != TB_OK) return st;
    if ((st = step_record_init(&p->rec, p->max_steps)) != TB_OK) return st;
    p->ckpt = c->checkpoint_dir[0] != 0;
    p->g_resumed = -1;
    /* The folders' locks before the resume reads them: a run finishing there meanwhile could not be seen. */
    if ((c->resume[0] || p->ckpt) && (st = checkpoint_dirs_lock(s)) != TB_OK) return st;
    if (c->resume[0] && (st = tta_resume(p)) != TB_OK) return st;
    /* Every seed done and the row written (finished.json): resuming would only write the same row again. */
    char note[1200];
    int done = p->g_resumed >= 0 && p->k0 == p->n ? finished_check(c->resume, p->g_resumed, note, sizeof note) : 0;
    /* Resumed before the plan's end: a note of a later step means the last checkpoint was set aside as damaged and
     * an older one taken; the plan finished and wrote its row all the same. An unreadable note is refused where a
     * damaged checkpoint was set aside, and left to the checkpoints where the newest was taken, as the train plan
     * does. */
    long noted = -1;
    if (!done && p->g_resumed >= 0 && p->k0 < p->n) {
        const int r = finished_read(c->resume, &noted, note, sizeof note);
        done = r < 0 && s->resume_n_damaged ? finished_refuse(c->resume, -1) : r == 1 && noted > p->g_resumed;
        if (done >= 0) tb_error_clear();
    }
    if (done < 0) return TB_EIO;
    if (done) {
        fprintf(stderr, "bench: --resume %s: the run %s: nothing to do, no new row\n", c->resume, note);
        p->finished = 1;
        return TB_OK;
    }
    p->ck_every = p->ckpt ? c->checkpoint_every : 0;
    if (p->ckpt && (st = checkpoint_dir_ready(s)) != TB_OK) return st;
    /* Whether the newest checkpoint of this run in --checkpoint-dir is the resumed one. */
    p->resumed_here = p->g_resumed >= 0 && strcmp(c->checkpoint_dir, c->resume) == 0;
    if (p->resumed_here) snprintf(p->ckpt_path, sizeof p->ckpt_path, "%s", p->resumed_from);
    p->done_ckpt = p->resumed_here && p->k0 == p->n ? p->g_resumed : -1;
    p->ran = p->k0;
    return TB_OK;
}

/* A seed's run id: the plan's, with the seed when there are several. */
static void tta_seed_id(const struct tta_plan *p, uint64_t seed, char *id, size_t n)
{
    if (p->n > 1) snprintf(id, n, "%s-seed%llu", p->s->run_base, (unsigned long long)seed);
    else snprintf(id, n, "%s", p->s->run_base);
}

/* Starts seed k: fresh weights (or the resumed checkpoint's), its event log and progress line, its clock. */
static int tta_seed_open(struct tta_plan *p, struct tta_seed *q, int k)
{
    struct session *s = p->s;
    const struct bench_config *c = &s->c;
    const long long init_ms = mllog_now_ms(); /* this seed's set-up: its MLPerf init interval */
    q->k = k;
    q->seed = c->run.seed + (uint64_t)k;
    q->resumed = k == p->k0 && p->start > 0;
    q->step = q->resumed ? p->start : 0;
    q->prev_t = q->resumed ? p->prev_train : 0.0, q->prev_e = q->resumed ? p->prev_eval : 0.0;
    if (q->resumed) s->s.ds = &s->train, s->s.seed = q->seed, s->s.perm_epoch = -1; /* tensors: the checkpoint's */
    else {
        const int st = session_reset(s, q->seed);
        if (st != TB_OK) return st;
    }
    /* The backend was prepared with the first seed: this seed keys its own dropout, drop-connect and stochastic
     * rounding, as a run with --seed <this seed> alone would. */
    if (backend_set_seed(&s->be, q->seed) != TB_OK) {
        if (!p->seed_warned)
            fprintf(stderr, "bench: warning: %s: the seeds after the first keep seed %llu's dropout and rounding\n",
                    tb_error_get(), (unsigned long long)c->run.seed);
        p->seed_warned = 1;
        tb_error_clear();
    }
    p->rec.base = q->step + 1;
    q->first = q->step;
    char extra[40] = "";
    tta_seed_id(p, q->seed, q->id, sizeof q->id);
    if (p->n > 1) snprintf(extra, sizeof extra, " seed %d/%d", k + 1, p->n);
    const int lst = open_log(&q->lg, s, q->id);
    if (lst != TB_OK) return lst;
    /* No target_accuracy: MLPerf has no such key (its rules hold the target); the row has it. */
    log_run_header_at(&q->lg, s, p->batch, q->seed, p->spe, init_ms);
    if (q->resumed) mllog_point_int(&q->lg, "resumed_from_step", q->step);
    mllog_event(&q->lg, MLLOG_START, "run_start", "null", -1, NULL);
    session_progress(s, &q->pr, p->max_steps, extra);
    q->t0 = tb_now_s();
    q->eval_sess = q->ckpt_time = q->eval_cut = 0.0;
    q->ckpt_step = q->resumed && p->resumed_here ? q->step : -1;
    return TB_OK;
}

/* An evaluation at the seed's step, added to its curve; the clock counts it (MLPerf does). */
static int tta_seed_evaluate(struct tta_plan *p, struct tta_seed *q)
{
    const long step = q->step, epoch_num = (step + p->spe - 1) / p->spe;
    /* MLPerf's eval events carry the epoch and the samples trained so far. */
    struct mllog_meta m = {epoch_num, (long long)step * p->batch, NULL, 0};
    mllog_event_meta(&q->lg, MLLOG_START, "eval_start", "null", &m);
    double acc, loss, dt;
    int st = session_evaluate(p->s, &acc, &loss, &dt);
    if (st != TB_OK) {
        q->eval_cut += dt;
        return st;
    }
    q->eval_sess += dt;
    char v[40];
    json_format_double(acc, v, sizeof v);
    mllog_event_meta(&q->lg, MLLOG_POINT, "eval_accuracy", v, &m);
    mllog_event_meta(&q->lg, MLLOG_END, "eval_stop", "null", &m);
    const double clock = q->prev_t + q->prev_e + (tb_now_s() - q->t0 - q->ckpt_time);
    struct tta_point pt = {step, (double)step / p->spe, step * (long)p->batch, clock, acc, loss};
    const int rr = tta_tracker_add(&p->r.tr[q->k], &pt);
    return rr < 0 ? rr : TB_OK;
}

/* Periodic: insurance, so a failure is a warning (the seed's last checkpoint must succeed). */
static void tta_seed_checkpoint_periodic(struct tta_plan *p, struct tta_seed *q)
{
    const double c0 = tb_now_s();
    char *txt = tta_state_text(&p->r, q->k, q->step, q->prev_e + q->eval_sess);
    if (txt && checkpoint_write(p->s, p->batch, p->g_before + q->step, p->max_steps,
                                q->prev_t + (c0 - q->t0 - q->ckpt_time - q->eval_sess), txt, NULL, p->ckpt_path,
                                sizeof p->ckpt_path) == TB_OK)
        q->ckpt_step = q->step, p->n_ckpt++;
    else {
        progress_finish(&q->pr); /* the terminal's progress line cleared first, as plan_train does */
        fprintf(stderr, "bench: warning: step %ld: %s\n", q->step, tb_error_get());
    }
    free(txt);
    tb_error_clear();
    q->ckpt_time += tb_now_s() - c0;
}

/* Whether the seed evaluates after step: each evaluation period, and its last step. */
static int tta_eval_due(const struct tta_plan *p, long step) { return step % p->every == 0 || step == p->max_steps; }

/* The seed's steps until an evaluation reaches the target or --max-epochs runs out: an epoch, an
 * evaluation period or a checkpoint period at a time, whichever ends first. */
static int tta_seed_loop(struct tta_plan *p, struct tta_seed *q)
{
    const long spe = p->spe, every = p->every, max_steps = p->max_steps, ck_every = p->ck_every;
    const struct tta_tracker *tr = &p->r.tr[q->k];
    int st = TB_OK;
    /* A stop during an evaluation checkpoints the step before that evaluation is on the curve: the
     * resumed seed runs it first, as the straight run did, or its curve (and the step that reached the
     * target) would differ from the straight run's. */
    const long at = q->step;
    if (at > 0 && tta_eval_due(p, at) &&
        (tr->n_points == 0 || tr->points[tr->n_points - 1].step < at))
        st = tta_seed_evaluate(p, q);
    while (q->step < max_steps && st == TB_OK && !tr->reached) {
        const long step = q->step;
        /* A resumed seed opens the epoch it resumed in. */
        if (!q->open_epoch) {
            q->open_epoch = step / spe + 1;
            mllog_event(&q->lg, MLLOG_START, "epoch_start", "null", q->open_epoch, NULL);
        }
        long next = (step / every + 1) * every;
        const long epoch_end = (step / spe + 1) * spe;
        if (epoch_end < next) next = epoch_end;
        if (max_steps < next) next = max_steps;
        if (ck_every > 0 && (step / ck_every + 1) * ck_every < next) next = (step / ck_every + 1) * ck_every;
        /* The line's rate is the summary's training rate: with the evaluations' time in it, it read 5,950 img/s
         * where the summary said 46,630 (an evaluation every 50 steps). Its ETA stays the wall clock's. */
        if ((st = session_steps(p->s, step + 1, next, &p->rec, &q->pr, step, q->t0 + q->ckpt_time + q->eval_sess,
                                (step - q->first) * (long)p->batch)) != TB_OK)
            break;
        q->step = next;
        if (next % spe == 0) {
            mllog_event(&q->lg, MLLOG_END, "epoch_stop", "null", next / spe, NULL);
            q->open_epoch = 0;
        }
        if (tta_eval_due(p, next) && (st = tta_seed_evaluate(p, q)) != TB_OK) break;
        if (ck_every > 0 && next % ck_every == 0 && next < max_steps && !tr->reached) tta_seed_checkpoint_periodic(p, q);
    }
    return st;
}

/* A seed that ended (reached the target or ran out of epochs): its figures, and with --checkpoint-dir
 * its result in a checkpoint, so a stop during the next seed (or the row) loses nothing of it. */
static int tta_seed_done(struct tta_plan *p, struct tta_seed *q)
{
    const int k = q->k;
    tta_seed_finish(&p->r, k, q->step, q->prev_e + q->eval_sess);
    const long recorded = q->step - q->first < p->rec.cap ? q->step - q->first : p->rec.cap;
    if (measure_throughput(p->rec.times, recorded, recorded > p->s->c.warmup ? p->s->c.warmup : 0, p->batch,
                           &p->r.tp[k]) != TB_OK)
        memset(&p->r.tp[k], 0, sizeof p->r.tp[k]);
    tb_error_clear();
    /* The overall rate as documented and printed: samples trained ÷ training seconds, every step (the
     * warm-up included) being what the time to accuracy pays; the per-step figures stay the timed steps'. */
    p->r.tp[k].images_per_s = p->r.tr_time[k] > 0.0 ? (double)p->r.steps_done[k] * p->batch / p->r.tr_time[k] : 0.0;
    if (!p->ckpt) return TB_OK;
    const double c0 = tb_now_s();
    char *txt = tta_state_text(&p->r, k + 1, 0, 0.0), path[sizeof p->ckpt_path];
    const int st = txt ? checkpoint_write(p->s, p->batch, p->g_before + q->step, p->max_steps,
                                          q->prev_t + q->session_train, txt, NULL, path, sizeof path)
                       : TB_ENOMEM;
    if (st == TB_OK) p->n_ckpt++, memcpy(p->ckpt_path, path, sizeof path);
    if (st == TB_OK && k == p->n - 1) p->done_ckpt = p->g_before + q->step;
    /* The seed was measured: a checkpoint that cannot be written does not void it (as in the train plan). */
    if (st != TB_OK && !p->ckpt_err[0]) snprintf(p->ckpt_err, sizeof p->ckpt_err, "%s", tb_error_get());
    free(txt);
    q->ckpt_time += tb_now_s() - c0;
    return TB_OK;
}

/* A seed stopped by a signal: a checkpoint of its last completed step (if not already written), keeping
 * the stop's own message. */
static void tta_seed_interrupted(struct tta_plan *p, struct tta_seed *q, int st)
{
    struct session *s = p->s;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tb_error_get());
    const double c0 = tb_now_s();
    char *txt = tta_state_text(&p->r, q->k, s->done_step, q->prev_e + q->eval_sess);
    if (txt && checkpoint_write(s, p->batch, p->g_before + s->done_step, p->max_steps, q->prev_t + q->session_train,
                                txt, NULL, p->ckpt_path, sizeof p->ckpt_path) == TB_OK)
        q->ckpt_step = s->done_step, p->n_ckpt++;
    else
        fprintf(stderr, "bench: warning: no checkpoint: %s\n", tb_error_get());
    free(txt);
    q->ckpt_time += tb_now_s() - c0;
    tb_error_set(st, "%s", msg);
}

/* Ends the seed's session: its result or its stop, its checkpoint, its event log. A stopped seed leaves
 * where it stopped in p for the stopped row. */
static int tta_seed_close(struct tta_plan *p, struct tta_seed *q, int st)
{
    struct session *s = p->s;
    progress_finish(&q->pr);
    q->session_train = tb_now_s() - q->t0 - q->ckpt_time - q->eval_sess - q->eval_cut;
    if (st == TB_OK) st = tta_seed_done(p, q);
    else if (st == TB_EINTR && p->ckpt && s->done_step > 0 && q->ckpt_step != s->done_step) tta_seed_interrupted(p, q, st);
    p->ckpt_total += q->ckpt_time;
    /* An epoch cut short (the target reached mid-epoch, a stop) still ends: MLPerf's checker wants an
     * epoch_stop, and every interval closed. */
    if (q->open_epoch) mllog_event(&q->lg, MLLOG_END, "epoch_stop", "null", q->open_epoch, NULL);
    q->open_epoch = 0;
    mllog_event(&q->lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK && p->r.tr[q->k].reached ? "success" : "aborted");
    mllog_close(&q->lg, s->output_err, sizeof s->output_err);
    if (st != TB_OK) {
        p->stop_step = s->done_step, p->stop_start = q->first;
        p->stop_time = q->prev_t + q->session_train, p->stop_session = q->session_train;
        /* The newest checkpoint holds this seed's last step, or (nothing trained in it yet) the end of
         * the seed before. */
        if (!(p->ckpt && (q->ckpt_step == p->stop_step || (p->stop_step == 0 && p->ckpt_path[0]))))
            p->ckpt_path[0] = '\0';
    }
    return st;
}

/* A suite's one line for a finished seed. */
static void tta_seed_print(const struct tta_plan *p, const struct tta_seed *q)
{
    const struct bench_config *c = &p->s->c;
    const struct tta_runs *r = &p->r;
    const int k = q->k;
    if (!c->compact || c->quiet) return;
    if (r->reached[k])
        printf("%stta %s/%s%s%s seed %llu: %.2f s to %.2f %% (%.2f epochs, eval %.2f s)\n", c->progress_prefix,
               c->backend, p->s->w->name, c->variant[0] ? " " : "", c->variant, (unsigned long long)q->seed, r->tta[k],
               100.0 * r->tr[k].points[r->tr[k].reached_at].accuracy, (double)q->step / p->spe, r->ev_time[k]);
    else
        printf("%stta %s/%s%s%s seed %llu: did not reach %.2f %% in %d epoch%s (best %.2f %%)\n", c->progress_prefix,
               c->backend, p->s->w->name, c->variant[0] ? " " : "", c->variant, (unsigned long long)q->seed,
               100.0 * c->target, c->max_epochs, c->max_epochs == 1 ? "" : "s", 100.0 * r->tr[k].best);
}

/* Seed k, from its first (or resumed) step to its end. */
static int tta_seed(struct tta_plan *p, int k)
{
    struct tta_seed q;
    memset(&q, 0, sizeof q);
    int st = tta_seed_open(p, &q, k);
    if (st != TB_OK) return st;
    st = tta_seed_close(p, &q, tta_seed_loop(p, &q));
    if (st != TB_OK) return st;
    p->g_before += q.step;
    tta_seed_print(p, &q);
    return TB_OK;
}

/* The row of the seed that stopped (the seeds before it finished but make no olympic mean alone). */
static int tta_stopped(struct tta_plan *p, int st)
{
    const struct bench_config *c = &p->s->c;
    char id[128];
    tta_seed_id(p, c->run.seed + (uint64_t)p->ran, id, sizeof id);
    if (st == TB_EINTR) {
        if (p->ckpt_path[0])
            tb_error_set(st, "%s of at most %ld (seed %d of %d); checkpoint %s (continue with --resume %s)",
                         tb_error_get(), p->max_steps, p->ran + 1, p->n, p->ckpt_path, c->checkpoint_dir);
        else
            tb_error_set(st, "%s of at most %ld (seed %d of %d); no checkpoint (%s)", tb_error_get(), p->max_steps,
                         p->ran + 1, p->n, !p->ckpt ? "give --checkpoint-dir DIR to make runs resumable"
                         : p->stop_step == 0 ? "nothing trained yet" : "it could not be written");
    }
    const struct stop_info si = {p->max_steps, p->stop_step, p->stop_start, p->stop_time, p->stop_session,
                                 p->ckpt_path[0] ? p->ckpt_path : NULL, NULL};
    return plan_stopped(p->s, st, id, p->batch, &si);
}

/* The plan's result over its seeds: the olympic mean and median time to the target, the mean rate. */
static void tta_result(struct tta_plan *p)
{
    const struct tta_runs *r = &p->r;
    const int n = p->n;
    double reached_tta[1024];
    p->n_reached = 0;
    for (int k = 0; k < n; k++)
        if (r->reached[k] && p->n_reached < 1024) reached_tta[p->n_reached++] = r->tta[k];
    p->olympic = tta_olympic_mean(r->tta, r->reached, n);
    p->median = p->n_reached ? stats_percentile(reached_tta, p->n_reached, 50.0) : NAN;
    p->ips_sum = 0.0;
    for (int k = 0; k < n; k++) p->ips_sum += r->tp[k].images_per_s;
    p->flops_step = model_train_flops_per_sample(&p->s->m) * p->batch;
    p->gflops = p->flops_step * (p->ips_sum / n) / p->batch * 1e-9;
}

/* The row's "runs": each seed's result and its accuracy curve. */
static void tta_row_runs(const struct tta_plan *p, struct json_buf *b)
{
    const struct tta_runs *r = &p->r;
    json_key_array(b, "runs");
    for (int k = 0; k < p->n; k++) {
        json_begin_object(b);
        json_key_int(b, "seed", (long long)(p->s->c.run.seed + (uint64_t)k));
        json_key_bool(b, "reached", r->reached[k]);
        json_key_str(b, "status", r->reached[k] ? "success" : "aborted");
        json_key_double(b, "tta_s", r->tta[k]);
        json_key_double(b, "train_time_s", r->tr_time[k]);
        json_key_double(b, "eval_time_s", r->ev_time[k]);
        json_key_int(b, "steps", r->steps_done[k]);
        json_key_double(b, "epochs", (double)r->steps_done[k] / p->spe);
        json_key_int(b, "samples", r->steps_done[k] * p->batch);
        json_key_double(b, "best_accuracy", r->tr[k].best);
        json_key_double(b, "images_per_s_median", r->tp[k].rate.median);
        /* The overall rate is what the time to accuracy pays; a median well above it means stalled steps
         * (a shared machine preempting one worker of a pool stalls the whole step), shown by the p99. */
        json_key_double(b, "images_per_s", r->tp[k].images_per_s);
        json_key_double(b, "step_time_median_s", r->tp[k].step.median);
        json_key_double(b, "step_time_p99_s", r->tp[k].step_p99_s);
        json_key_array(b, "curve");
        for (int i = 0; i < r->tr[k].n_points; i++) {
            const struct tta_point *pt = &r->tr[k].points[i];
            json_begin_object(b);
            json_key_int(b, "step", pt->step);
            json_key_double(b, "epoch", pt->epoch);
            json_key_double(b, "time_s", pt->time_s);
            json_key_double(b, "accuracy", pt->accuracy);
            json_key_double(b, "loss", pt->loss);
            json_end_object(b);
        }
        json_end_array(b);
        json_end_object(b);
    }
    json_end_array(b);
}

/* The plan's result row. */
static int tta_row(struct tta_plan *p)
{
    struct session *s = p->s;
    const struct bench_config *c = &s->c;
    struct json_buf b;
    row_begin(s, &b, s->run_base, p->batch, 0, NULL);
    json_key_double(&b, "target", c->target);
    json_key_int(&b, "runs_total", p->n);
    json_key_int(&b, "runs_reached", p->n_reached);
    json_key_double(&b, "tta_olympic_mean_s", p->olympic);
    json_key_double(&b, "tta_median_s", p->median);
    json_key_double(&b, "images_per_s", p->ips_sum / p->n);
    if (p->g_resumed >= 0) {
        json_key_int(&b, "resumed_from_step", p->g_resumed);
        json_key_str(&b, "resumed_from", p->resumed_from);
    }
    if (p->ckpt) write_checkpoints(&b, p->n_ckpt, p->ckpt_total, p->ckpt_path);
    if (p->ckpt_err[0]) json_key_str(&b, "checkpoint_error", p->ckpt_err);
    tta_row_runs(p, &b);
    write_step_executions(s, &b);
    write_trace(s, &b, s->run_base);
    row_common_figures(s, &b, p->gflops,
                       row_train_bytes(s, p->batch),
                       p->flops_step);
    const int st = row_end(s, &b);
    /* The plan finished and its row exists (as in the train plan): a later --resume has nothing to do.
     * Only when the newest checkpoint holds every seed (g_before is then the plan's last step). */
    if (st == TB_OK && p->ckpt && p->done_ckpt == p->g_before && s->primary &&
        finished_mark(c->checkpoint_dir, p->g_before, s->run_base, c->out))
        fprintf(stderr, "bench: warning: %s\n", tb_error_get());
    return st;
}

/* The summary block on stdout (a suite prints a line per seed instead), before the row is written: what the
 * row's writers print follows it. */
static void tta_print(const struct tta_plan *p)
{
    const struct session *s = p->s;
    const struct bench_config *c = &s->c;
    const struct tta_runs *r = &p->r;
    const int n = p->n;
    if (c->quiet) return;
    if (c->compact) { /* a suite: the seeds had their lines (tta_seed_print); the score is the run's */
        if (n > 1 || !p->n_reached) {
            printf("%stta %s/%s%s%s: ", c->progress_prefix, c->backend, s->w->name, c->variant[0] ? " " : "",
                   c->variant);
            if (!isnan(p->olympic)) printf("%.2f s olympic mean over %d runs (%d reached)\n", p->olympic, n, p->n_reached);
            else printf("no score: %d of %d runs missed the target\n", n - p->n_reached, n);
        }
        return;
    }
    printf("trainbench time to accuracy: %s on %s (%s)\n", s->w->name, s->train.name, s->desc);
    printf("  config      target %.2f %%, batch %d, evaluation every %ld steps (%ld per epoch), at most %d epochs, "
           "%s lr %g\n",
           100.0 * c->target, p->batch, p->every, p->spe, c->max_epochs, optim_name(c->run.optim.kind),
           (double)c->run.optim.lr);
    if (p->g_resumed >= 0)
        printf("  resumed     at seed %d of %d, step %ld, from %s\n", p->k0 + 1 > n ? n : p->k0 + 1, n, p->start,
               p->resumed_from);
    for (int k = 0; k < n; k++) {
        char f[4][32]; /* seconds under 1 with three digits: a 5 ms run printed "train 0.00 s" */
        if (r->reached[k])
            printf("  seed %-6llu %s s to %.2f %% (eval %s s of it), %.2f epochs, %ld samples, %d evaluation%s\n",
                   (unsigned long long)(c->run.seed + (uint64_t)k), fmt_s(f[0], 32, r->tta[k]),
                   100.0 * r->tr[k].points[r->tr[k].reached_at].accuracy, fmt_s(f[1], 32, r->ev_time[k]),
                   (double)r->steps_done[k] / p->spe, r->steps_done[k] * p->batch, r->tr[k].n_points,
                   r->tr[k].n_points == 1 ? "" : "s");
        else
            printf("  seed %-6llu did not reach the target in %d epoch%s (best %.2f %%, %s s)\n",
                   (unsigned long long)(c->run.seed + (uint64_t)k), c->max_epochs, c->max_epochs == 1 ? "" : "s",
                   100.0 * r->tr[k].best, fmt_s(f[0], 32, r->tr_time[k] + r->ev_time[k]));
        /* Where the time went: the overall rate is what the time to accuracy pays (see tta_row_runs). */
        if (r->tp[k].n_steps > 0)
            printf("  %-11s train %s s at %.4g img/s overall (per-step median %.4g; step median %.3f ms, p99 %.3f "
                   "ms), eval %s s\n", "", fmt_s(f[2], 32, r->tr_time[k]), r->tp[k].images_per_s, r->tp[k].rate.median,
                   1e3 * r->tp[k].step.median, 1e3 * r->tp[k].step_p99_s, fmt_s(f[3], 32, r->ev_time[k]));
    }
    if (!isnan(p->olympic))
        printf("  result      %.2f s olympic mean over %d run%s (%d reached the target)\n", p->olympic, n,
               n > 1 ? "s" : "", p->n_reached);
    else
        printf("  result      no score: %d of %d runs missed the target\n", n - p->n_reached, n);
    if (p->ckpt)
        printf("  checkpoint  %s (%d written, %.3f s, not counted in the clock)\n",
               p->ckpt_path[0] ? p->ckpt_path : "none", p->n_ckpt, p->ckpt_total);
}

/* The summary's last line, once the row is written. */
static void tta_print_row(const struct tta_plan *p)
{
    const struct session *s = p->s;
    const struct bench_config *c = &s->c;
    if (c->quiet || c->compact) return;
    if (strcmp(c->mllog_dir, "none") != 0)
        printf("  result row  %s (run %s; logs in %s)\n", c->out, s->run_base, c->mllog_dir);
    else
        printf("  result row  %s (run %s)\n", c->out, s->run_base);
}

/* Time to accuracy: train until an evaluation reaches the target, --seeds times. The clock of a seed
 * runs over its training steps and its evaluations (MLPerf counts both), not set-up or checkpoint
 * writing. With --checkpoint-dir each seed checkpoints every --checkpoint-every steps, on a stop signal
 * and when it finishes; the files are numbered by the steps of the whole plan (every seed so far), so
 * the newest is the furthest along. --resume continues from the newest: the finished seeds' results
 * and the curve of the seed in progress come back from the checkpoint, its clock continues from the
 * seconds already spent, and it takes the same steps and evaluations as an uninterrupted run. */
int plan_tta(struct session *s)
{
    struct tta_plan p;
    memset(&p, 0, sizeof p);
    p.s = s;
    int st = tta_begin(&p);
    if (st == TB_OK && !p.finished) {
        for (int k = p.k0; k < p.n; k++, p.ran++)
            if ((st = tta_seed(&p, k)) != TB_OK) break;
        if (st == TB_EINTR || st == TB_EDIVERGED) st = tta_stopped(&p, st);
        if (st == TB_OK) {
            tta_result(&p);
            tta_print(&p);
            st = tta_row(&p);
            if (st == TB_OK) tta_print_row(&p);
            if (st == TB_OK && p.ckpt_err[0])
                st = tb_error_set(TB_EIO, "%s (the result row was written)", p.ckpt_err);
        }
    }
    tta_runs_free(&p.r);
    step_record_free(&p.rec);
    return st;
}
