/* plan_tta.c — time to accuracy: train until an evaluation reaches the target, --seeds times, olympic
 * mean; resumable mid-seed through checkpoints that carry the plan's own state (see run.h).
 */
#define _GNU_SOURCE
#include "session.h"

#include "checkpoint.h"
#include "clock.h"
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

/* Time to accuracy: train until an evaluation reaches the target, --seeds times. The clock of a seed
 * runs over its training steps and its evaluations (MLPerf counts both), not set-up or checkpoint
 * writing. With --checkpoint-dir each seed checkpoints every --checkpoint-every steps, on a stop signal
 * and when it finishes; the files are numbered by the steps of the whole plan (every seed so far), so
 * the newest is the furthest along. --resume continues from the newest: the finished seeds' results
 * and the curve of the seed in progress come back from the checkpoint, its clock continues from the
 * seconds already spent, and it takes the same steps and evaluations as an uninterrupted run. */
int plan_tta(struct session *s)
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
