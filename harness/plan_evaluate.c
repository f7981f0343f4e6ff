/* plan_evaluate.c — --plan evaluate: loss, top-1 and top-5 of --load's weights (or the seeded init) on the
 * whole test set, in eval mode (running statistics, no dropout or augmentation), and with --logits FILE
 * the logits themselves as a NumPy .npy file for cross-framework checks (see run.h).
 *
 * Top-k counts a sample when fewer than k classes rank above its label, ties broken by the lower class
 * index as the top-1 argmax does (so top-1 here equals the backend's count of correct predictions); a
 * sample with a NaN logit ranks its label nowhere (softmax_ce_row.h predicts nothing for it either).
 * A SIGINT/SIGTERM stops it between evaluation batches: an "interrupted" row, no figures, no logits file.
 * A loss that is not finite (NaN or Inf outputs in eval mode, e.g. BatchNorm running statistics that
 * overflowed) ends it as a training run's non-finite loss does: a "diverged" row with the reason, no
 * figures, no logits file, exit 1.
 */
#define _GNU_SOURCE
#include "session.h"

#include "clock.h"
#include "fmt_figure.h"
#include "outputs.h"
#include "results.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Classes ranking above label y among K logits z (higher logit first; equal logits: lower index first);
 * K when a logit is NaN: every comparison with NaN is false, which would rank the label first. */
static int rank_of(const float *z, int K, int y)
{
    int r = 0;
    for (int k = 0; k < K; k++) {
        if (z[k] != z[k]) return K;
        r += z[k] > z[y] || (z[k] == z[y] && k < y);
    }
    return r;
}

/* Whether row z of K logits holds a NaN or an infinity. */
static int row_nonfinite(const float *z, int K)
{
    for (int k = 0; k < K; k++)
        if (!isfinite(z[k])) return 1;
    return 0;
}

/* A non-finite loss: the "diverged" row (no figures) and TB_EDIVERGED with one line saying why. The
 * row's steps are evaluation batches, as an interrupted evaluation's are: diverged_at_step is the first
 * batch with a non-finite output (or the last batch when the outputs are finite but the loss overflowed). */
static int evaluate_diverged(struct session *s, const float *logits, long n, int K, int eval_batch, double loss)
{
    long bad = 0, first = -1;
    for (long i = 0; i < n; i++)
        if (row_nonfinite(logits + (size_t)i * K, K)) bad++, first = first < 0 ? i : first;
    const long chunks = (n + eval_batch - 1) / eval_batch;
    const char *what = isnan(loss) ? "NaN" : loss > 0 ? "+Inf" : "-Inf";
    if (bad)
        tb_error_set(TB_EDIVERGED, "%s/%s: evaluate: the model's eval-mode outputs are not finite: NaN or Inf logits "
                     "for %ld of %ld test samples (the first: sample %ld), loss %s; no loss or accuracy reported",
                     s->c.backend, s->w->name, bad, n, first, what);
    else
        tb_error_set(TB_EDIVERGED, "%s/%s: evaluate: the loss is %s though every logit is finite (logits too far "
                     "apart for float); no loss or accuracy reported", s->c.backend, s->w->name, what);
    const struct stop_info si = {chunks, bad ? first / eval_batch : chunks - 1, 0, NAN, NAN, NULL, NULL};
    s->last_loss = NAN; /* no training loss */
    return plan_stopped(s, TB_EDIVERGED, s->run_base, s->c.run.batch, &si);
}

/* Writes logits (n, K) as a NumPy .npy v1.0 file: magic, version 1.0, little-endian u16 header length, the
 * header dict padded with spaces to a 64-byte boundary and ended by '\n', then the float32 data (C order). */
static int write_npy(const char *path, const float *logits, long n, int K)
{
    char dict[128];
    const int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%ld, %d), }", n, K);
    const int hlen = (10 + len + 1 + 63) / 64 * 64 - 10; /* 10 = magic 6 + version 2 + length 2 */
    unsigned char head[10 + 192];
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (unsigned char)(hlen & 0xff), head[9] = (unsigned char)(hlen >> 8);
    memset(head + 10, ' ', (size_t)hlen);
    memcpy(head + 10, dict, (size_t)len);
    head[10 + hlen - 1] = '\n';
    /* Its directory made as --out's is (a missing one failed after the whole evaluation). */
    int st = results_make_parent_dirs(path);
    if (st != TB_OK) return tb_error_set(st, "--logits %s: %s", path, tb_error_get());
    /* The data are written as the machine holds them: .npy says '<f4', so refuse a big-endian host. */
    const uint32_t one = 1;
    if (*(const unsigned char *)&one != 1) return tb_error_set(TB_EUNSUPPORTED, "--logits: big-endian hosts are not supported");
    /* Beside the file and renamed over it: on a full disk an earlier file stayed cut short, half a new one. */
    struct outputs_replace r;
    if ((st = outputs_replace_begin(&r, path)) == TB_OK) {
        outputs_replace_write(&r, head, 10 + (size_t)hlen);
        outputs_replace_write(&r, logits, (size_t)n * (size_t)K * sizeof(float));
        st = outputs_replace_end(&r);
    }
    if (st != TB_OK) return tb_error_set(st, "--logits: %s", tb_error_get());
    return TB_OK;
}

int plan_evaluate(struct session *s)
{
    struct bench_config *c = &s->c;
    const int K = s->m.n_classes;
    const long n = s->test.n;
    if (n <= 0) return tb_error_set(TB_EINVAL, "evaluate: the test set is empty");
    const int batch = c->run.batch;
    int eval_batch = c->eval_batch > 0 ? c->eval_batch : (batch > 256 ? batch : 256);
    if (eval_batch > n) eval_batch = (int)n;
    float *logits = malloc((size_t)n * (size_t)K * sizeof(float));
    if (!logits) return tb_error_set(TB_ENOMEM, "evaluate: out of memory for %ld x %d logits", n, K);
    int st = session_backend(s, batch, eval_batch);
    if (st == TB_OK) st = session_reset(s, c->run.seed);
    /* The test set goes to the backend in chunks of the eval batch, so that a stop signal is honoured
     * between them, as the other plans honour it between steps. */
    struct eval_stats ev = {0};
    const long chunks = (n + eval_batch - 1) / eval_batch;
    long done = 0;
    const double t0 = tb_now_s();
    if (st == TB_OK) st = session_evaluate_chunks(s, n, eval_batch, logits, &ev, &done);
    const double eval_s = tb_now_s() - t0;
    if (st == TB_EINTR) {
        /* No logits file (none was opened) and no figures: the row of what ran, marked partial. */
        free(logits);
        tb_error_set(st, "%s; a partial evaluation is not resumable: run it again", tb_error_get());
        /* Steps here are evaluation batches; the row keeps the run's own batch in its config, so no
         * partial rate (plan_stopped's would count training batches) and no training time. */
        const struct stop_info si = {chunks, done, 0, NAN, NAN, NULL, NULL};
        s->last_loss = NAN; /* no training loss */
        return plan_stopped(s, st, s->run_base, batch, &si);
    }
    if (st == TB_OK && ev.n != n) st = tb_error_set(TB_EINVAL, "evaluate: the backend saw %ld of %ld samples", ev.n, n);
    if (st != TB_OK) {
        free(logits);
        return st;
    }
    if (!isfinite(ev.loss_sum)) {
        st = evaluate_diverged(s, logits, n, K, eval_batch, ev.loss_sum);
        free(logits);
        return st;
    }
    long top1 = 0, top5 = 0;
    for (long i = 0; i < n; i++) {
        const int r = rank_of(logits + (size_t)i * K, K, s->test_y[i]);
        top1 += r < 1, top5 += r < 5;
    }
    const double loss = ev.loss_sum / (double)n, acc1 = (double)top1 / (double)n, acc5 = (double)top5 / (double)n;
    if (c->logits[0] && s->primary) st = write_npy(c->logits, logits, n, K);
    free(logits);
    if (st != TB_OK) return st;
    if (s->primary) {
        struct json_buf b;
        row_begin(s, &b, s->run_base, batch, 0, NULL);
        json_key_double(&b, "eval_loss", loss);
        json_key_double(&b, "eval_top1", acc1);
        json_key_double(&b, "eval_top5", acc5);
        json_key_int(&b, "eval_samples", n);
        json_key_double(&b, "eval_time_s", eval_s);
        json_key_double(&b, "images_per_s", eval_s > 0.0 ? (double)n / eval_s : NAN);
        if (c->logits[0]) json_key_str(&b, "logits_file", c->logits);
        row_common_figures(s, &b, eval_s > 0.0 ? s->m.flops_per_sample * (double)n / eval_s * 1e-9 : NAN,
                           row_infer_bytes(s, eval_batch), s->m.flops_per_sample * eval_batch);
        st = row_end(s, &b);
    }
    char es[32];
    if (st == TB_OK && !c->quiet)
        printf("trainbench evaluate: %s, %s weights, %ld %s test samples, %d classes\n"
               "  loss %.6f  top-1 %.4f  top-5 %.4f  (%s s)%s%s\n",
               s->w->name, s->loaded ? c->load : "seeded initial", n, s->synthetic ? "synthetic" : s->test.name, K,
               loss, acc1, acc5, fmt_s(es, sizeof es, eval_s), c->logits[0] ? "\n  logits      " : "", c->logits);
    if (st == TB_OK && !c->quiet && !c->compact && s->primary) printf("  result row  %s (run %s)\n", c->out, s->run_base);
    return st;
}
