/* plan_train.c — the training run: --epochs or --steps over the data, then the test accuracy; resumable
 * through checkpoints (see run.h). Also the points of a trained scaling sweep.
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

/* The training run: --epochs or --steps over the data, then the test accuracy. Also the points of a
 * trained scaling sweep (sb non-NULL). With --resume it continues a checkpoint's run from its step;
 * with --checkpoint-dir it checkpoints every --checkpoint-every steps, on a stop signal and at the end;
 * --save writes the final weights. Training time excludes checkpoint writing and adds the seconds the
 * resumed run had already trained. */
int plan_train(struct session *s, int batch, const char *run_id, const struct scale_base *sb,
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
    if (ckpt && (st == TB_OK || st == TB_EINTR) && step > 0 && ckpt_step != step) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tb_error_get());
        const double c0 = tb_now_s();
        const int wst = checkpoint_write(s, batch, step, total, prev_train + session_train, NULL, ckpt_path,
                                         sizeof ckpt_path);
        ckpt_time += tb_now_s() - c0;
        if (wst == TB_OK) ckpt_step = step, n_ckpt++;
        if (st == TB_OK) {
            st = wst;
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
            printf("  checkpoint  %s (%d written, %.3f s, not counted as training)\n", ckpt_path, n_ckpt, ckpt_time);
        if (c->save[0]) printf("  saved       %s\n", c->save);
        printf("  result row  %s (run %s)\n", c->out, run_id);
    } else if (c->compact && !c->quiet && !sb) {
        printf("%strain %s/%s b%d%s%s: %.0f img/s over %ld steps", c->progress_prefix, c->backend, s->w->name, batch,
               c->variant[0] ? " " : "", c->variant, images_per_s, total);
        if (evaluated) printf(", test accuracy %.2f %%", 100.0 * acc);
        printf("\n");
    }
    step_record_free(&rec);
    return st;
}
