/* plan_throughput.c — the measuring plans over training steps: throughput at one batch (--repeat ×
 * --warmup + --steps), and scaling, a sweep of throughput (or trained) points over global batches or a
 * grid of replicas × accumulation × micro-batch (see run.h).
 */
#define _GNU_SOURCE
#include "session.h"

#include "perfctl.h"

#include "clock.h"
#include "stats.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Throughput at one batch: --repeat × (fresh weights, --warmup untimed steps, --steps timed steps).
 * The throughput plan, and the untrained points of a scaling sweep (sb non-NULL). */
int plan_throughput_at(struct session *s, int batch, const char *run_id, const struct scale_base *sb,
                       struct point_result *res)
{
    struct bench_config *c = &s->c;
    /* --time-budget (no --steps, and no scaling point): up to 10 warm-up steps, fewer once they have
     * used a quarter of the budget (at least 2: the first pays first-touch and autotuning), then as many
     * timed steps as the budget holds at the last warm-up step's time, 2 to 100. */
    const int budget = c->budget_steps && !sb;
    if (budget && c->budget_warmup) c->warmup = 10;
    long per = c->warmup + c->steps, n_timed = (long)c->repeat * c->steps;
    c->run.optim.total_steps = per;
    int st = session_backend(s, batch, batch);
    if (st != TB_OK) return st;
    /* fp16 steps skipped, summed over the repeats: each repeat's reset starts the loss scaler afresh (and a
     * scaling point may reuse a backend that ran before), so the count is taken per repeat. */
    long skipped = 0;
    struct step_record rec;
    st = step_record_init(&rec, per);
    double *all = NULL, *rep = calloc((size_t)c->repeat, sizeof *rep);
    struct mllog lg = {0};
    if (st == TB_OK && (st = open_log(&lg, s, run_id)) == TB_OK) {
        log_run_header(&lg, s, batch, c->run.seed);
        mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);
    }
    char extra[24] = "";
    if (sb) snprintf(extra, sizeof extra, " b%d", batch);
    struct progress pr;
    session_progress(s, &pr, budget ? 0 : per * c->repeat, extra); /* a budgeted length is known after the warm-up */
    double final_loss = NAN, t_steps = 0.0;
    long steps_before = 0; /* steps of the finished repeats */
    if (st == TB_OK) profile_begin(s);
    for (int r = 0; r < c->repeat && st == TB_OK; r++, steps_before += per) {
        if ((st = session_reset(s, c->run.seed)) != TB_OK) break;
        const long skipped_r0 = session_steps_skipped(s);
        perfctl_enable(); /* perf --control (perfctl.h): samples only the steps, not the set-up */
        const double t0 = tb_now_s();
        long first = 1;
        if (budget && r == 0) {
            /* The warm-up, a step at a time, measures how long a step takes. */
            int k = 0;
            while (st == TB_OK && k < c->warmup) {
                k++;
                st = session_steps(s, k, k, &rec, &pr, k - 1, t0, (long)(k - 1) * batch);
                /* Only the default warm-up is cut: a --warmup the user gave runs in full. */
                if (c->budget_warmup && k >= 2 && tb_now_s() - t0 >= c->budget_s / 4.0) break;
            }
            if (st != TB_OK) {
                t_steps += tb_now_s() - t0;
                break;
            }
            const double t_step = rec.times[k - 1];
            double fit = floor(c->budget_s / ((double)c->repeat * (t_step > 1e-9 ? t_step : 1e-9)));
            c->warmup = k;
            c->steps = fit > 100.0 ? 100 : fit < 2.0 ? 2 : (long)fit;
            per = c->warmup + c->steps, n_timed = (long)c->repeat * c->steps;
            /* rec holds the warm-up's steps (10, or a --warmup given) + 100, the most this can choose; the
             * backend's schedule length stays the one it was prepared with (a decaying schedule decays a little
             * less: untimed either way). */
            pr.total_steps = per * c->repeat;
            if (!c->quiet && !c->compact) {
                char msg[160];
                snprintf(msg, sizeof msg, "budget %g s: %d warm-up + %ld timed step%s at ~%.3g s/step (--steps, "
                         "--warmup or --time-budget to set)", c->budget_s, c->warmup, c->steps,
                         c->steps == 1 ? "" : "s", t_step);
                progress_finish(&pr); /* the first step's redrawn line, on a terminal */
                fprintf(stderr, "bench: %s\n", msg);
            }
            first = k + 1;
        }
        if (!all) {
            all = malloc((size_t)n_timed * sizeof *all);
            if (!all || !rep) {
                st = tb_error_set(TB_ENOMEM, "out of memory for %ld step times", n_timed);
                break;
            }
        }
        st = session_steps(s, first, per, &rec, &pr, (long)r * per + first - 1, t0, (first - 1) * (long)batch);
        t_steps += tb_now_s() - t0;
        perfctl_disable();
        if (st != TB_OK) break; /* before the count: its stats query clears the error the row must carry */
        skipped += session_steps_skipped(s) - skipped_r0;
        struct measure_throughput one;
        if ((st = measure_throughput(rec.times, per, c->warmup, batch, &one)) != TB_OK) break;
        rep[r] = one.images_per_s;
        memcpy(all + (size_t)r * c->steps, rec.times + c->warmup, (size_t)c->steps * sizeof(double));
        double losses[LOSS_TAIL_MAX], tail = 0.0;
        const long win = step_record_tail(&rec, c->steps < LOSS_TAIL_MAX ? c->steps : LOSS_TAIL_MAX, losses);
        for (long i = 0; i < win; i++) tail += losses[i];
        final_loss = tail / (double)win;
    }
    long done = steps_before + s->done_step;
    if (st == TB_OK) {
        done = per * c->repeat;
        st = session_applied_some(s, done, skipped, "more --warmup steps");
        if (st == TB_EDIVERGED) tb_error_set(st, "%s: no rate to report", tb_error_get());
    }
    progress_finish(&pr);
    mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, st == TB_OK ? "success" : "aborted");
    mllog_close(&lg, s->output_err, sizeof s->output_err);
    if (st == TB_EINTR || st == TB_EDIVERGED) {
        step_record_free(&rec);
        free(all);
        free(rep);
        if (st == TB_EINTR) {
            /* A measurement has no state worth keeping: the row records what ran, marked partial. */
            tb_error_set(st, "%s of %ld (warm-up and repeats included); a partial measurement reports no rate and "
                         "is not resumable: run it again", tb_error_get(), per * c->repeat);
        }
        const struct stop_info si = {per * c->repeat, done, 0, t_steps, t_steps, NULL, sb ? s->run_base : NULL};
        return plan_stopped(s, st, run_id, batch, &si);
    }
    struct measure_throughput tp;
    if (st == TB_OK) st = measure_throughput(all, n_timed, 0, batch, &tp);
    if (st == TB_OK) {
        const double flops_step = model_train_flops_per_sample(&s->m) * batch;
        const double gflops = flops_step * tp.images_per_s / batch * 1e-9;
        if (res) *res = (struct point_result){tp.images_per_s, NAN, measure_peak_rss_mib(), 0};
        /* The summary first, then the row: what the row's writers print (scaling, per-step split, layer
         * profile, trace, pipeline) follows the run's own header, and "result row" only a row written. */
        if (!c->quiet && !c->compact && !sb) {
            printf("trainbench throughput: %s on %s data (%s)\n", s->w->name, s->synthetic ? "synthetic" : s->train.name,
                   s->desc);
            printf("  config      batch %d, %d warm-up + %ld timed step%s, %d repeat%s, %s lr %g\n", batch, c->warmup,
                   c->steps, c->steps == 1 ? "" : "s", c->repeat, c->repeat > 1 ? "s" : "",
                   optim_name(c->run.optim.kind), (double)c->run.optim.lr);
            char warm[96]; /* per repeat, as the row's warmup_steps counts it */
            if (c->repeat > 1)
                snprintf(warm, sizeof warm, "%d warm-up step%s excluded from each of the %d repeats", c->warmup,
                         c->warmup == 1 ? "" : "s", c->repeat);
            else snprintf(warm, sizeof warm, "%d warm-up excluded", c->warmup);
            print_throughput(&tp, warm, "overall");
            print_repeats(rep, c->repeat);
            printf("  compute     %.2f GFLOP/s (counted model FLOPs over the timed steps)\n", gflops);
        } else if (c->compact && !c->quiet && !sb) {
            printf("%sthroughput %s/%s b%d%s%s: %.0f img/s (per-step median %.0f, jitter %.1f %%, %d repeat%s)\n",
                   c->progress_prefix, c->backend, s->w->name, batch, c->variant[0] ? " " : "", c->variant,
                   tp.images_per_s, tp.rate.median,
                   100.0 * tp.rate.mad_jitter / tp.rate.median, c->repeat, c->repeat > 1 ? "s" : "");
        }
        struct json_buf b;
        row_begin(s, &b, run_id, batch, c->steps, sb ? s->run_base : NULL);
        write_throughput(&b, &tp, "images_per_s");
        write_efficiency(s, &b, batch, tp.images_per_s);
        write_repeats(&b, rep, c->repeat);
        json_key_int(&b, "warmup_steps", c->warmup);
        if (budget) json_key_double(&b, "time_budget_s", c->budget_s);
        json_key_double(&b, "final_loss", final_loss);
        write_scaling(&b, s, sb, batch, tp.images_per_s);
        write_layer_times(s, &b, per * c->repeat);
        write_trace(s, &b, run_id);
        write_pipeline(s, &b, tp.images_per_s, skipped); /* every repeat's skips, not the last one's */
        write_step_split(s, &b);
        write_step_executions(s, &b);
        row_common_figures(s, &b, gflops,
                           row_train_bytes(s, batch), flops_step);
        st = row_end(s, &b);
        if (st == TB_OK && !c->quiet && !c->compact && !sb) printf("  result row  %s (run %s)\n", c->out, run_id);
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
 * is reported and skipped; the plan then fails (scaling_failed). */

/* The sweep's status once every point was tried: TB_OK, or one line naming the failed points. Some
 * points ran and wrote rows: a runtime failure (exit 1; a usage status would claim nothing ran). None
 * ran: the first point's own status (a batch no point can split stays a usage error, exit 2). */
static int scaling_failed(int n, int n_failed, int first_err, const char *labels, const char *first_msg)
{
    if (n_failed == 0) return TB_OK;
    const char *which = n_failed > 1 ? "the first: " : "";
    if (n_failed == n)
        return tb_error_set(first_err, "scaling: no point ran: %s failed (%s%s)", labels, which, first_msg);
    return tb_error_set(first_err == TB_EINVAL ? TB_EUNSUPPORTED : first_err,
                        "scaling: %d of %d points failed: %s (%s%s); the other %d wrote their rows", n_failed, n, labels,
                        which, first_msg, n - n_failed);
}

int plan_scaling(struct session *s)
{
    struct bench_config *c = &s->c;
    struct bench_scaling_point pts[BENCH_MAX_POINTS];
    const int n = bench_scaling_points(c, pts, BENCH_MAX_POINTS);
    if (n < 0) return n;
    struct point_result res[BENCH_MAX_POINTS] = {{0}};
    int ok[BENCH_MAX_POINTS] = {0}, first_err = TB_OK, n_failed = 0;
    /* The failed points and the first one's message: a later point's success clears the error text. */
    char failed[256] = "", first_msg[512] = "";
    int split_r[BENCH_MAX_POINTS], split_a[BENCH_MAX_POINTS], split_l[BENCH_MAX_POINTS];
    const int grid = c->n_replicas_list || c->n_ga_list || c->n_micro_batch_list;
    /* A point's replicas: mirrored's are its devices; ipu's are its own, and its --devices stays the same at
     * every point (naming points by it gave every point one run id). */
    const struct backend_entry *be = backend_find(c->backend);
    const int rep_dev = be && be->caps.replicas_are_devices;
    struct scale_base base = {0};
    char first_desc[sizeof s->desc] = ""; /* the first point that ran, as its backend described it */
    for (int k = 0; k < n; k++) {
        const struct bench_scaling_point *pt = &pts[k];
        if (c->run.ipu.replicas != pt->replicas || c->run.ipu.ga != pt->ga || c->run.ipu.micro_batch != pt->micro_batch ||
            c->run.n_devices != pt->devices) {
            c->run.ipu.replicas = pt->replicas, c->run.ipu.ga = pt->ga, c->run.ipu.micro_batch = pt->micro_batch;
            c->run.n_devices = pt->devices;
            s->be_batch = s->be_eval_batch = 0; /* a new arrangement: session_backend prepares a fresh backend */
        }
        const int batch = pt->batch;
        char id[176], label[96]; /* run_base (95) + "-b" + a batch + dims (63) */
        snprintf(label, sizeof label, "batch %d", batch);
        snprintf(id, sizeof id, "%s-b%d", s->run_base, batch);
        if (grid) {
            /* Only the dimensions the grid varies name the point (a fixed one is in every row's config). */
            char dims[64] = "";
            size_t m = 0;
            if (c->n_replicas_list)
                m += (size_t)snprintf(dims + m, sizeof dims - m, "-r%d", rep_dev ? pt->devices : pt->replicas);
            if (c->n_ga_list && m < sizeof dims) m += (size_t)snprintf(dims + m, sizeof dims - m, "-g%d", pt->ga);
            if (c->n_micro_batch_list && m < sizeof dims) snprintf(dims + m, sizeof dims - m, "-m%d", pt->micro_batch);
            snprintf(id, sizeof id, "%s-b%d%s", s->run_base, batch, dims);
            snprintf(label, sizeof label, "batch %d%s", batch, dims);
        }
        /* The lines a point's row writers print (baseline, per-step split, pipeline) come before the sweep's
         * table: say which point they belong to. */
        if (!c->quiet && !c->compact) printf("  point       %s (%d of %d)\n", label, k + 1, n);
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
            if (first_err == TB_OK) first_err = st, snprintf(first_msg, sizeof first_msg, "%s", tb_error_get());
            const size_t used = strlen(failed);
            snprintf(failed + used, sizeof failed - used, "%s%s", n_failed ? ", " : "", label);
            n_failed++;
            continue;
        }
        ok[k] = 1;
        if (!(base.images_per_s > 0.0)) base = (struct scale_base){batch, split_r[k], res[k].images_per_s};
        if (!first_desc[0]) snprintf(first_desc, sizeof first_desc, "%s", s->desc);
    }
    const int st = scaling_failed(n, n_failed, first_err, failed, first_msg);
    if (c->quiet) return st;
    if (c->compact) {
        printf("%sscaling %s/%s%s%s:", c->progress_prefix, c->backend, s->w->name, c->variant[0] ? " " : "", c->variant);
        for (int k = 0; k < n; k++)
            if (ok[k]) {
                printf(" b%d", pts[k].batch);
                if (grid) printf("/r%d/g%d", split_r[k], split_a[k]);
                printf(" %.0f", res[k].images_per_s);
            }
        printf(" img/s\n");
        return st;
    }
    /* Efficiency (speed-up per replica) says something only where the replicas change; with the same replicas
     * throughout it is the speed-up again (the report leaves it out then too). Weak scaling keeps the local
     * batch, strong scaling the global one. */
    int r_vary = 0, l_vary = 0, g_vary = 0, k0 = -1;
    for (int k = 0; k < n; k++) {
        if (!ok[k]) continue;
        if (k0 < 0) k0 = k;
        r_vary |= split_r[k] != split_r[k0], l_vary |= split_l[k] != split_l[k0];
        g_vary |= pts[k].batch != pts[k0].batch;
    }
    const char *kind = !r_vary   ? "a batch sweep at fixed replicas"
                       : !l_vary ? "weak scaling (local batch fixed)"
                       : !g_vary ? "strong scaling (global batch fixed)"
                                 : "replicas and local batch both vary";
    /* The backend's description is of one arrangement: where the points' differ, the words that differ run from
     * the first point's to the last's ("2 devices, 4 to 16 samples each"). */
    char desc[2 * sizeof s->desc + 64];
    if (!first_desc[0] || !strcmp(first_desc, s->desc)) snprintf(desc, sizeof desc, "%s", s->desc);
    else {
        const char *f = first_desc, *l = s->desc;
        const size_t nf = strlen(f), nl = strlen(l);
        size_t p = 0, q = 0; /* common prefix and suffix, cut at a space */
        while (p < nf && p < nl && f[p] == l[p]) p++;
        while (p > 0 && f[p - 1] != ' ') p--;
        while (q < nf - p && q < nl - p && f[nf - 1 - q] == l[nl - 1 - q]) q++;
        while (q > 0 && f[nf - q] != ' ') q--;
        /* One differing phrase reads as a range; differences spread over several clauses (an ipu point's batch,
         * micro-batch, accumulation and activations) ran the first description into the last: both, whole. */
        const int spread = memchr(f + p, ',', nf - p - q) || memchr(f + p, ';', nf - p - q) ||
                           memchr(l + p, ',', nl - p - q) || memchr(l + p, ';', nl - p - q);
        if (spread) snprintf(desc, sizeof desc, "first point: %s; last point: %s", f, l);
        else
            snprintf(desc, sizeof desc, "%.*s%.*s to %.*s%s", (int)p, f, (int)(nf - p - q), f + p, (int)(nl - p - q),
                     l + p, f + nf - q);
    }
    printf("trainbench scaling: %s on %s data (%s), %s, %s\n", s->w->name, s->synthetic ? "synthetic" : s->train.name,
           grid ? "a grid: each point's arrangement is in its row" : desc,
           c->epochs > 0 ? "trained" : "throughput only", kind);
    printf("  %8s %8s %8s %6s %12s %9s", "global", "local", "replicas", "accum", "images/s", "speed-up");
    if (r_vary) printf(" %10s", "efficiency");
    printf(" %10s", "peak MiB");
    if (c->epochs > 0) printf(" %9s", "accuracy"); /* a throughput sweep never evaluates */
    printf("\n");
    for (int k = 0; k < n; k++) {
        const int r = split_r[k], a = split_a[k], l = split_l[k];
        if (!ok[k]) {
            printf("  %8d %8d %8d %6d %12s\n", pts[k].batch, l, r, a, "failed");
            continue;
        }
        const double ips = res[k].images_per_s;
        printf("  %8d %8d %8d %6d %11.0f%s %9.2f", pts[k].batch, l, r, a, ips, res[k].with_warmup ? "*" : " ",
               ips / base.images_per_s);
        if (r_vary) printf(" %10.2f", (ips / r) / (base.images_per_s / base.replicas));
        printf(" %10.1f", res[k].peak_rss_mib);
        if (!isnan(res[k].test_accuracy)) printf(" %8.2f%%", 100.0 * res[k].test_accuracy);
        printf("\n");
    }
    int cold = 0;
    for (int k = 0; k < n; k++) cold |= ok[k] && res[k].with_warmup;
    printf("  local = samples per replica per micro-batch (global / (replicas x accumulation))%s%s%s; result rows %s "
           "(sweep %s)\n", r_vary ? "; efficiency = images/s per replica relative to the base (first) point" : "",
           c->epochs > 0 ? "; images/s over the timed steps (warm-up excluded)" : "",
           cold ? "; * no more steps than --warmup: every step timed, the cold first ones too" : "", c->out,
           s->run_base);
    return st;
}
