/* plan_inference.c — forward only: images/s at --batch and batch-1 latency percentiles (see run.h).
 */
#define _GNU_SOURCE
#include "session.h"

#include "clock.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Forward only, from fresh weights (or --load's): images/s at --batch, then latency percentiles at batch 1. */
int plan_inference(struct session *s)
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
    if ((st = open_log(&lg, s, s->run_base)) != TB_OK) goto done;
    log_run_header(&lg, s, batch, c->run.seed);
    mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);
    struct progress pr;
    session_progress(s, &pr, per * (c->repeat + 1), NULL);
    pr.no_loss = 1; /* forward passes only */
    const size_t px = (size_t)s->test.h * s->test.w * s->test.c;
    const long n_batches = s->test.n / batch;
    long done_calls = 0;
    double correct = 0.0, seen = 0.0, batched_s = 0.0; /* batched_s: seconds of the batched forwards so far */
    const double tr0 = tb_now_s();
    for (int r = 0; r < c->repeat && st == TB_OK; r++) {
        for (long i = 0; i < per && st == TB_OK; i++) {
            if (session_stop_due(s)) {
                st = tb_error_set(TB_EINTR, "interrupted by %s after %ld of %ld batches",
                                  bench_signal_name(bench_stop_signal()), done_calls, per * c->repeat);
                break;
            }
            const long off = (i % n_batches) * batch;
            struct batch bt = {batch, s->test.images + (size_t)off * px, s->test_y + off};
            struct eval_stats ev = {0};
            const double t0 = tb_now_s();
            st = backend_evaluate(&s->be, &bt, &ev);
            session_stop_heard(s, ev.stop_signal);
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
        if (session_stop_due(s)) {
            st = tb_error_set(TB_EINTR, "interrupted by %s in the batch-1 latency forwards (%ld of %ld)",
                              bench_signal_name(bench_stop_signal()), i, per);
            break;
        }
        const long idx = i % s->test.n;
        struct batch bt = {1, s->test.images + (size_t)idx * px, s->test_y + idx};
        struct eval_stats ev = {0};
        const double t0 = tb_now_s();
        st = backend_evaluate(&s->be, &bt, &ev);
        session_stop_heard(s, ev.stop_signal);
        lat[i] = tb_now_s() - t0;
        if (pr.enabled) progress_update(&pr, ++done_calls, NAN, NAN);
    }
    progress_finish(&pr);
    mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK ? "success" : "aborted");
    mllog_close(&lg, s->output_err, sizeof s->output_err);
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
    write_throughput(&b, &tp, "images_per_s");
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
    /* The devices (cores) the forwards ran on, as throughput rows say it: without a calibration (no
     * peak_threads) the report's roofline has only this to judge a one-thread row against one thread's roofs. */
    json_key_int(&b, "devices_used", backend_n_devices(&s->be));
    row_common_figures(s, &b, gflops, row_infer_bytes(s, batch), flops_step);
    st = row_end(s, &b);
    if (!c->quiet && !c->compact) {
        printf("trainbench inference: %s on %s data (%s), %s weights\n", s->w->name,
               s->synthetic ? "synthetic" : s->test.name, s->desc, s->loaded ? c->load : "fresh");
        printf("  batch %-5d %.0f images/s overall; per batch: median %.0f, mean %.0f ± %.0f (s.e.), jitter %.0f "
               "(1.4826·MAD; %ld timed batches)\n",
               batch, tp.images_per_s, tp.rate.median, tp.rate.mean, tp.rate.stderr_, tp.rate.mad_jitter, tp.n_steps);
        print_repeats(rep, c->repeat); /* the row's repeat_images_per_s, as throughput prints them */
        printf("  batch 1     latency p50 %.3f ms, p90 %.3f ms, p99 %.3f ms over %d forwards\n", 1e3 * ml.p50_s,
               1e3 * ml.p90_s, 1e3 * ml.p99_s, ml.n);
        printf("  compute     %.2f GFLOP/s (forward FLOPs)\n", gflops);
        if (st == TB_OK) printf("  result row  %s (run %s)\n", c->out, s->run_base);
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
