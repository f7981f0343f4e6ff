/* resume.c — checkpoints and resume for the plans that train to a result (train, tta), and the rows of
 * runs that stopped early (see session.h).
 *
 * Because the data stream and every random draw are pure functions of (seed, step, sample), a
 * checkpoint of params, buffers and optimizer state at step k is all a resumed run needs to take the same
 * steps k+1.. as an uninterrupted one; a resume refuses a checkpoint made with another configuration.
 */
#define _GNU_SOURCE
#include "session.h"

#include "checkpoint.h"
#include "loss_scale.h"
#include "mpi_transport.h"
#include "outputs.h"
#include "status.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a resumed run must share with its checkpoint, as "key=value" words: everything that changes the
 * maths or the data order (workload and its options, data set, batch, seed, optimizer), nothing of the
 * backend's schedule, so a run may continue on another backend. The decay horizon counts only for a
 * schedule that decays (a constant rate lets a run be extended with a larger --steps). */
/* The last words of resume_config's text: the data's CRC, then (fp16 only) the loss-scale policy, then (BatchNorm
 * models only) the samples a BatchNorm statistic is over; a checkpoint written before one was recorded lacks it and
 * every word after it. */
#define DATA_CRC_KEY "data_crc32"
#define DATA_CRC_WORD DATA_CRC_KEY "="
#define LOSS_SCALE_WORD "loss_scale="
#define BN_BATCH_KEY "bn_batch"
#define BN_BATCH_WORD BN_BATCH_KEY "="
#define SYNC_BN_WORD " sync_bn=1" /* an older build's word (resume_normalise) */

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
    /* The BatchNorm ε the model runs with (its default changed with issue 28; --bn-eps sets it): a run
     * resumed at another ε would silently compute another function. */
    for (int i = 0; i < s->m.n_layers; i++)
        if (s->m.layers[i].op == OP_BN) {
            ADD(" bn_eps=%.9g", (double)s->m.layers[i].a.norm.eps);
            break;
        }
    ADD(" batch=%d seed=%llu optimizer=%s lr=%.9g momentum=%.9g weight_decay=%.9g beta1=%.9g beta2=%.9g eps=%.9g"
        " rho=%.9g lars_eta=%.9g schedule=%d warmup_steps=%ld",
        batch, (unsigned long long)c->run.seed, optim_name(o->kind), (double)o->lr, (double)o->momentum,
        (double)o->weight_decay, (double)o->beta1, (double)o->beta2, (double)o->eps, (double)o->rho,
        (double)o->lars_eta, (int)o->schedule, o->warmup_steps);
    /* The loss itself (smoothing changes it as the rate does); written only when set, so checkpoints from
     * before it was recorded (all at 0) still match a run at 0. */
    if (c->wopts.label_smoothing != 0.0f) ADD(" label_smoothing=%.9g", (double)c->wopts.label_smoothing);
    /* Storage precision changes every stored value (the same rule: written only when not fp32). The cuda device
     * keeps fp32 master weights whatever the name, so there bf16 is bf16m and fp16 is fp16m: one word for both
     * (resume_normalise reads older checkpoints' the same way). */
    if (c->run.ipu.precision[0] && strcmp(c->run.ipu.precision, "fp32") != 0) {
        const int cuda_half = !strcmp(c->device, "cuda") && (!strcmp(c->run.ipu.precision, "bf16") ||
                                                              !strcmp(c->run.ipu.precision, "fp16"));
        ADD(" precision=%s%s", c->run.ipu.precision, cuda_half ? "m" : "");
    }
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
    /* Last, so that a cause named above (the seed of a synthetic set) is the one said, and so that a checkpoint
     * written before it was recorded matches this text without it (resume_from): the data's CRC, since another
     * set under the same name (another directory, other pixels) is another run. */
    ADD(" %s%08x", DATA_CRC_WORD, (unsigned)s->data_crc32);
    /* fp16's loss-scale policy (static at N, or dynamic) decides which steps are skipped and at what scale:
     * after the CRC, so that a checkpoint written before it was recorded matches this text without it. */
    const char *prec = c->run.ipu.precision;
    if (!strcmp(prec, "fp16") || !strcmp(prec, "fp16m")) {
        if (c->run.ipu.loss_scale > 0.0f) ADD(" %s%.9g", LOSS_SCALE_WORD, (double)c->run.ipu.loss_scale);
        else ADD(" %sdynamic", LOSS_SCALE_WORD);
    }
    /* BatchNorm's statistics are over each replica's micro-batch (the whole batch with --sync-bn, or on one
     * replica): another --devices, --micro-batch, --ga or --sync-bn computes another function, and arrangements
     * with as many samples a statistic compute the same one. Last, for the checkpoints from before it. */
    for (int i = 0; i < s->m.n_layers; i++)
        if (s->m.layers[i].op == OP_BN) {
            int r, a, l;
            batch_split(s, batch, &r, &a, &l);
            ADD(" %s%d", BN_BATCH_WORD, c->run.sync_bn ? batch / a : l);
            break;
        }
#undef ADD
}

/* A checkpoint's text as resume_config now writes it where an older build wrote the same run otherwise: on the cuda
 * device "precision=bf16" or "fp16" (now with the m); and " sync_bn=1", the word before bn_batch, as the
 * statistics over the whole batch (mirrored: no accumulation) it meant. text has room for n bytes. */
static void resume_normalise(const struct session *s, int batch, char *text, size_t n)
{
    /* An exponential decay without --lr-decay-steps ran 1 a step but was recorded as 0 before the fiftieth
     * session: the same schedule, read as this build writes it. */
    char *ds = s->c.run.optim.schedule == LR_EXPONENTIAL ? strstr(text, " decay_steps=0 ") : NULL;
    if (ds) ds[strlen(" decay_steps=")] = '1';
    const size_t sl = strlen(SYNC_BN_WORD);
    char *sw = strstr(text, SYNC_BN_WORD);
    if (sw && (sw[sl] == ' ' || !sw[sl]) && !strstr(text, BN_BATCH_WORD)) {
        memmove(sw, sw + sl, strlen(sw + sl) + 1);
        const size_t len = strlen(text);
        snprintf(text + len, n - len, " %s%d", BN_BATCH_WORD, batch);
    }
    if (strcmp(s->c.device, "cuda") != 0) return;
    char *p = strstr(text, " precision=");
    if (!p) return;
    p += strlen(" precision=");
    const size_t len = strcspn(p, " ");
    if (!((len == 4 && (!strncmp(p, "bf16", 4) || !strncmp(p, "fp16", 4))) && strlen(text) + 2 <= n)) return;
    memmove(p + 5, p + 4, strlen(p + 4) + 1);
    p[4] = 'm';
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

/* A configuration value as the user knows it: dropout and drop_connect record -1 for "the workload's"
 * (the text stays as checkpoints hold it), shown as that, with the classifier's dropout the workload's
 * model has (built once more, graph metadata only, this run's dropout aside). */
static void shown_value(const struct session *s, const char *key, const char *v, char *out, size_t n)
{
    if (!strcmp(key, "plan") && !strcmp(v, "(none)")) { /* only tta writes the word: a train run's text lacks it */
        snprintf(out, n, "train");
        return;
    }
    const int is_dropout = strcmp(key, "dropout") == 0;
    if (strcmp(v, "-1") != 0 || (!is_dropout && strcmp(key, "drop_connect") != 0)) {
        snprintf(out, n, "%s", v);
        return;
    }
    snprintf(out, n, "the workload's");
    if (!is_dropout || !s || !s->w) return;
    struct workload_opts wo = s->c.wopts;
    wo.dropout = -1.0f;
    struct model m;
    memset(&m, 0, sizeof m);
    if (s->w->build(&m, &wo) == TB_OK)
        for (int i = 0; i < m.n_layers; i++)
            if (m.layers[i].op == OP_DROPOUT) {
                snprintf(out, n, "the workload's (%g)", (double)m.layers[i].a.drop.p);
                break;
            }
    tb_error_clear();
    model_free(&m);
}

/* An older build named an IDX set by its folder ("fashion-mnist" where the folder's name said fashion, else
 * "mnist"); sets are now named by their contents, so its checkpoint of this very data (Fashion-MNIST in a folder
 * named mnist) named another set and was refused. Where got names an IDX set so and records this run's data CRC
 * (the same bytes), its dataset word becomes this run's, and *old receives the name it had; returns 1 then. */
static int resume_folder_name(const char *want, char *got, size_t n, char *old, size_t old_n)
{
    char a[96], b[96], ca[32], cb[32];
    config_value(got, "dataset", a, sizeof a);
    config_value(want, "dataset", b, sizeof b);
    config_value(got, DATA_CRC_KEY, ca, sizeof ca);
    config_value(want, DATA_CRC_KEY, cb, sizeof cb);
    const int folder_name = !strcmp(a, "mnist") || !strcmp(a, "fashion-mnist");
    const int idx_now = !strcmp(b, "mnist") || !strcmp(b, "fashion-mnist") || !strcmp(b, "idx");
    if (!strcmp(a, b) || !folder_name || !idx_now || !strcmp(ca, "(none)") || strcmp(ca, cb) != 0) return 0;
    char from[112];
    snprintf(from, sizeof from, " dataset=%s ", a);
    char *at = strstr(got, from);
    const size_t la = strlen(a), lb = strlen(b);
    if (!at || strlen(got) - la + lb + 1 > n) return 0;
    at += strlen(" dataset=");
    memmove(at + lb, at + la, strlen(at + la) + 1);
    memcpy(at, b, lb);
    snprintf(old, old_n, "%s", a);
    return 1;
}

/* "batch=8 in the checkpoint, batch=16 in this run": the first word where two configurations differ, each side
 * named by its label (then: ckpt's, "in the checkpoint"; here: now's, "in this run"). */
static void config_diff(const struct session *s, const char *ckpt, const char *now, const char *then, const char *here,
                        char *out, size_t n)
{
    snprintf(out, n, "the configuration differs");
    /* The cause before its consequence: another --classes is named as classes, not as the parameter count
     * that comes first in the text. */
    {
        char a[96], b[96];
        config_value(ckpt, "classes", a, sizeof a);
        config_value(now, "classes", b, sizeof b);
        if (strcmp(a, b) != 0) {
            snprintf(out, n, "classes=%s %s, classes=%s %s", a, then, b, here);
            return;
        }
    }
    for (const char *p = now; *p;) {
        const char *end = strchr(p, ' '), *eq = strchr(p, '=');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (eq && eq < p + len) {
            char key[48], a[96], b[96];
            snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            config_value(ckpt, key, a, sizeof a);
            config_value(now, key, b, sizeof b);
            if (strcmp(a, b) != 0 && strcmp(key, BN_BATCH_KEY) != 0) { /* a consequence: last, below */
                char sa[96], sb[96];
                shown_value(s, key, a, sa, sizeof sa);
                shown_value(s, key, b, sb, sizeof sb);
                snprintf(out, n, "%s=%s %s, %s=%s %s", key, sa, then, key, sb, here);
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
                char sb[96];
                shown_value(s, key, b, sb, sizeof sb);
                if (strcmp(sb, b) != 0) snprintf(out, n, "%.*s %s, %s=%s %s", (int)len, p, then, key, sb, here);
                else snprintf(out, n, "%.*s %s, no %s %s", (int)len, p, then, key, here);
                return;
            }
        }
        p += len;
        while (*p == ' ') p++;
    }
    /* Only the schedule differs, where it decides what a BatchNorm statistic is over. */
    char a[32], b[32];
    config_value(ckpt, BN_BATCH_KEY, a, sizeof a);
    config_value(now, BN_BATCH_KEY, b, sizeof b);
    if (strcmp(a, b) != 0)
        snprintf(out, n, "BatchNorm statistics over %s samples %s, over %s %s: --devices, --micro-batch, --ga and "
                 "--sync-bn decide it", a, then, b, here);
}

/* Staging arrays for checkpoints, allocated on first use. */
int session_ck_alloc(struct session *s)
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

/* The metadata keys of a train run's loss history: step 1's loss, and the last (up to LOSS_TAIL_MAX) steps'
 * losses oldest first, space-separated; %.17g, so they read back bitwise and the resumed run's figures are
 * the straight run's to the bit. Outside the configuration text, whose hash older checkpoints must match. */
#define LOSS_FIRST_KEY "first_loss"
#define LOSS_TAIL_KEY "last_losses"

static void loss_history_write(struct json_buf *b, const struct loss_history *h)
{
    /* %.17g of a double is at most 24 characters, plus a space. */
    const size_t cap = (size_t)LOSS_TAIL_MAX * 26 + 1;
    char v[40], *tail = malloc(cap);
    if (!tail) {
        /* Leaving the keys out only makes a later resume's figures its session's (said then). */
        fprintf(stderr, "bench: warning: out of memory for the checkpoint's loss history\n");
        return;
    }
    size_t k = 0;
    tail[0] = '\0';
    for (long i = 0; i < h->n_tail && k < cap; i++)
        k += (size_t)snprintf(tail + k, cap - k, "%s%.17g", i ? " " : "", h->tail[i]);
    snprintf(v, sizeof v, "%.17g", h->first);
    json_key_str(b, LOSS_FIRST_KEY, v);
    json_key_str(b, LOSS_TAIL_KEY, tail);
    free(tail);
}

/* A checkpoint's loss history at step into h; h->known = 0 when it has none (a build before they were kept,
 * or a run resumed from one of those: a note says so) or one that does not read back (a warning). */
static void loss_history_read(const struct session *s, const char *path, long step, struct loss_history *h)
{
    memset(h, 0, sizeof *h);
    char first[48], *tail = malloc((size_t)LOSS_TAIL_MAX * 32);
    if (!tail) {
        fprintf(stderr, "bench: warning: out of memory for %s's loss history: first_loss and final_loss describe "
                        "this session's steps\n", path);
        return;
    }
    const int has_first = checkpoint_read_meta(path, LOSS_FIRST_KEY, first, sizeof first) == TB_OK,
              has_tail = checkpoint_read_meta(path, LOSS_TAIL_KEY, tail, (size_t)LOSS_TAIL_MAX * 32) == TB_OK;
    tb_error_clear();
    if (!has_first && !has_tail) {
        if (!s->c.quiet && s->primary)
            fprintf(stderr, "bench: note: %s holds no loss history (a build's, or a run's resumed from one, "
                            "whose checkpoints kept none): first_loss and final_loss describe this session's "
                            "steps\n", path);
        free(tail);
        return;
    }
    char *end = NULL;
    h->first = has_first ? strtod(first, &end) : NAN;
    int ok = has_first && has_tail && end != first && *end == '\0';
    for (const char *p = tail; ok && *p;) {
        if (h->n_tail == LOSS_TAIL_MAX) {
            ok = 0;
            break;
        }
        h->tail[h->n_tail++] = strtod(p, &end);
        ok = end != p && (*end == ' ' || *end == '\0');
        p = end;
        while (*p == ' ') p++;
    }
    /* The tail must end at the checkpoint's step and reach back as far as the final-loss window does. */
    h->known = ok && h->n_tail == (step < LOSS_TAIL_MAX ? step : LOSS_TAIL_MAX);
    if (!h->known) {
        if (s->primary)
            fprintf(stderr, "bench: warning: %s: its loss history does not read back: first_loss and final_loss "
                            "describe this session's steps\n", path);
        memset(h, 0, sizeof *h);
    }
    free(tail);
}

/* Step's resumable checkpoint in --checkpoint-dir: params, buffers, optimizer state, and the metadata a
 * resume checks (configuration and its hash, step, training seconds so far). The data position needs no
 * field of its own: the stream is a pure function of (seed, step). Keeps the newest two checkpoints.
 * tta_state (time to accuracy, else NULL) is the plan's own JSON text: seed, evaluations so far, the
 * finished seeds. losses (train, else NULL) is the run's loss history up to step. path receives the
 * file's name; only the primary process writes. */
int checkpoint_write(struct session *s, int batch, long step, long total, double train_s,
                     const char *tta_state, const struct loss_history *losses, char *path, size_t n)
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
    if (losses && losses->known) loss_history_write(&b, losses);
    /* fp16's loss scaler: a resumed run goes on at the scale this one reached, with its counts (a fresh
     * scaler would start at 32768 again, skip steps this run did not, and report only its own skips). */
    struct backend_stats bs;
    if (backend_stats(&s->be, &bs) == TB_OK && bs.loss_scaling) {
        char ls[128];
        loss_scaler_format(bs.loss_scaling, ls, sizeof ls);
        json_key_str(&b, "loss_scaler", ls);
    }
    tb_error_clear();
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

/* A checkpoint --resume skipped as damaged (unreadable or malformed), in the directory this run writes: renamed
 * to "<name>.unreadable", out of the checkpoints' names, with a warning. Left there, pruning (which keeps the
 * highest steps) would keep it as one of the newest two and delete the good one this run resumed from. */
static void set_aside(const struct session *s, const char *path, int st)
{
    if (!s->primary || (st != TB_EIO && st != TB_EFORMAT) || strcmp(s->c.resume, s->c.checkpoint_dir) != 0) return;
    char aside[4096 + 16];
    if (snprintf(aside, sizeof aside, "%s.unreadable", path) >= (int)sizeof aside) return;
    if (rename(path, aside) == 0)
        fprintf(stderr, "bench: warning: --resume: renamed it to %s, so that keeping the newest checkpoints keeps "
                        "usable ones\n", aside);
    else
        fprintf(stderr, "bench: warning: --resume: cannot rename %s aside (%s): pruning may keep it and remove a "
                        "usable checkpoint\n", path, strerror(errno));
}

/* Whether a checkpoint's loss_scaler text (at path) is one this run's backend would restore: tried on a copy of the
 * backend's own scaler (its static or dynamic policy), so that resume_from can skip a malformed one before taking the
 * checkpoint. TB_OK where the backend keeps no scaler (it ignores the text); else TB_EFORMAT naming path. */
static int resume_scaler_check(struct session *s, const char *path, const char *text)
{
    struct backend_stats bs;
    if (backend_stats(&s->be, &bs) != TB_OK || !bs.loss_scaling) {
        tb_error_clear();
        return TB_OK;
    }
    struct loss_scaler probe = *bs.loss_scaling;
    if (loss_scaler_restore(&probe, text) == TB_OK) return TB_OK;
    char why[256];
    snprintf(why, sizeof why, "%s", tb_error_get());
    return tb_error_set(TB_EFORMAT, "checkpoint %s: %s", path, why);
}

/* The directory check resume_from makes first, alone (session_open's, before any work). */
int resume_dir_has_checkpoints(const char *dir, long *steps, int max, int *cnt)
{
    int st = checkpoint_dir_list(dir, steps, max, cnt);
    if (st != TB_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tb_error_get());
        return tb_error_set(st, "--resume: %s", why);
    }
    return *cnt ? TB_OK : tb_error_set(TB_EIO, "--resume %s: no complete checkpoint (ckpt-*.safetensors) there", dir);
}

/* --resume: loads the newest complete checkpoint of the directory into the backend; *start and *prev_s
 * receive its step and training seconds, *every its --checkpoint-every, path its name, tta (when not NULL) the
 * time-to-accuracy plan's state to check and keep, and *losses (when not NULL) the train run's loss history
 * (known = 0 when it has none). A configuration that differs is a usage error (TB_EINVAL naming the first
 * difference); a file that cannot be read, or whose plan state or loss scaler is malformed, is skipped, with a
 * warning, for the one before it, and set aside (set_aside). */
int resume_from(struct session *s, int batch, long total, long *start, double *prev_s, long *every, char *path,
                size_t n, const struct resume_check *tta, struct loss_history *losses)
{
    const char *dir = s->c.resume;
    long steps[8];
    int cnt = 0, st = resume_dir_has_checkpoints(dir, steps, 8, &cnt);
    char why[512];
    if (st != TB_OK) return st;
    if ((st = session_ck_alloc(s)) != TB_OK) return st;
    const int spp = optim_state_per_param(s->c.run.optim.kind);
    char want[1024];
    resume_config(s, batch, want, sizeof want);
    s->resume_n_damaged = 0;
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
        if (st == TB_OK) resume_normalise(s, batch, got, sizeof got);
        char folder[96] = "";
        const int renamed = st == TB_OK && resume_folder_name(want, got, sizeof got, folder, sizeof folder);
        /* A checkpoint of a build before the data's CRC, or before fp16's loss-scale policy: its text is this
         * run's without those last words; it resumes, and says what could not be checked. */
        const char *crc = strstr(want, " " DATA_CRC_WORD), *lsw = strstr(want, " " LOSS_SCALE_WORD),
                   *bnw = strstr(want, " " BN_BATCH_WORD);
        const size_t got_len = strlen(got);
        const int no_crc = st == TB_OK && crc && !strstr(got, DATA_CRC_WORD) && got_len == (size_t)(crc - want) &&
                           strncmp(got, want, got_len) == 0;
        const int no_ls = st == TB_OK && lsw && !strstr(got, LOSS_SCALE_WORD) &&
                          (no_crc || (got_len == (size_t)(lsw - want) && strncmp(got, want, got_len) == 0));
        const int no_bn = st == TB_OK && bnw && !strstr(got, BN_BATCH_WORD) &&
                          (no_crc || no_ls || (got_len == (size_t)(bnw - want) && strncmp(got, want, got_len) == 0));
        const int old_ckpt = no_crc || no_ls || no_bn;
        if (no_crc && !s->c.quiet)
            fprintf(stderr, "bench: note: %s predates the data's CRC in checkpoints: that this run's data is the "
                            "checkpoint's could not be checked\n", path);
        if (no_ls && !s->c.quiet)
            fprintf(stderr, "bench: note: %s predates fp16's loss-scale policy in checkpoints: that it ran with "
                            "this run's %.*s could not be checked\n", path, (int)strcspn(lsw + 1, " "), lsw + 1);
        if (no_bn && !s->c.quiet)
            fprintf(stderr, "bench: note: %s predates BatchNorm's statistics group in checkpoints: that it ran with "
                            "this run's %.*s could not be checked\n", path, (int)strcspn(bnw + 1, " "), bnw + 1);
        if (st == TB_OK && !old_ckpt && strcmp(got, want) != 0) {
            config_diff(s, got, want, "in the checkpoint", "in this run", why, sizeof why);
            return tb_error_set(TB_EINVAL, "--resume %s: %s was made with another configuration (%s)", dir, path, why);
        }
        if (st == TB_OK && steps[i] > total)
            return tb_error_set(TB_EINVAL, "--resume %s: %s is at step %ld, past the %ld steps of this run", dir, path,
                                steps[i], total);
        if (st == TB_OK && renamed && !s->c.quiet)
            fprintf(stderr, "bench: note: %s names its data set by its folder (dataset=%s, as older builds did); its "
                            "data CRC is this run's, so it resumes on this run's %s\n", path, folder, s->train.name);
        if (st == TB_OK) {
            /* Padding between tensors as a fresh run has it. */
            memcpy(s->ck_params, s->params, s->m.n_params * sizeof(float));
            memcpy(s->ck_buffers, s->buffers, s->m.n_buffers * sizeof(float));
            memset(s->ck_opt, 0, s->m.n_params * (size_t)spp * sizeof(float));
            st = checkpoint_load_state(path, &s->m, s->ck_params, s->ck_buffers, s->ck_opt, s->m.n_params ? spp : 0);
        }
        /* The plan's state and fp16's scaler are checked here, before the checkpoint is taken: damaged, they skip it
         * for the one before as a torn file does (once taken, a probe's malformed tta_state or loss_scaler ended the
         * run with the older good checkpoint untried). */
        if (st == TB_OK && tta) {
            char *state = checkpoint_meta_alloc(path, "tta_state");
            st = state ? tta->fn(tta->ctx, path, steps[i], state) : TB_EFORMAT;
            free(state);
        }
        char ls[128];
        int has_ls = 0;
        if (st == TB_OK) {
            /* No key (TB_EINVAL) is a run without a scaler; one that is not a string is damage. */
            const int ms = checkpoint_read_meta(path, "loss_scaler", ls, sizeof ls);
            has_ls = ms == TB_OK;
            if (has_ls) st = resume_scaler_check(s, path, ls);
            else if (ms != TB_EINVAL) st = ms;
        }
        if (st != TB_OK) {
            fprintf(stderr, "bench: warning: --resume: skipping %s\n", tb_error_get());
            set_aside(s, path, st);
            s->resume_n_damaged++;
            continue;
        }
        st = backend_set_tensors(&s->be, TF_PARAMS, s->ck_params);
        if (st == TB_OK && s->m.n_buffers) st = backend_set_tensors(&s->be, TF_BUFFERS, s->ck_buffers);
        if (st == TB_OK && s->m.n_params && spp) st = backend_set_tensors(&s->be, TF_OPT, s->ck_opt);
        /* After the tensors, as the backends expect (their set_tensors leaves a checkpoint's scaler to this). */
        if (st == TB_OK && has_ls && (st = backend_restore_loss_scaling(&s->be, ls)) != TB_OK) {
            snprintf(why, sizeof why, "%s", tb_error_get());
            return tb_error_set(st, "--resume: checkpoint %s: %s", path, why);
        }
        if (st != TB_OK) return st;
        *start = steps[i];
        *prev_s = strtod(tv, NULL);
        if (!(*prev_s >= 0.0 && *prev_s < 1e12)) *prev_s = 0.0; /* NaN, negative, inf ("train inf s at 0 img/s"): unknown */
        char ev[32];
        *every = checkpoint_read_meta(path, "checkpoint_every", ev, sizeof ev) == TB_OK ? strtol(ev, NULL, 10) : 0;
        if (*every < 0) *every = 0;
        if (losses) loss_history_read(s, path, steps[i], losses);
        tb_error_clear();
        return TB_OK;
    }
    return tb_error_set(TB_EFORMAT, "--resume %s: no checkpoint there could be read (%d tried; see the warnings)", dir,
                        cnt);
}

/* Under MPI, before the first step: each rank's configuration and data against rank 0's (session.h). */
int session_ranks_check(struct session *s, int batch, int eval_batch)
{
    const struct bench_config *c = &s->c;
    if (!c->run.transport_mpi || mpi_transport_world() < 2) return TB_OK;
    char mine[4096], root[sizeof mine];
    memset(mine, 0, sizeof mine);
    resume_config(s, batch, mine, sizeof mine);
    /* Beyond what a resume compares (it may extend a run): what decides how many steps and evaluations run. */
    const size_t k = strlen(mine);
    snprintf(mine + k, sizeof mine - k, " run_plan=%s steps=%ld epochs=%d steps_per_epoch=%ld warmup=%d repeat=%d "
             "eval=%d eval_batch=%d eval_every=%ld test_samples=%d devices=%d steps_per_execution=%ld eval_chunk=%d",
             bench_plan_name(c->plan), c->steps, c->epochs, c->steps_per_epoch, c->warmup, c->repeat, c->eval,
             c->eval_batch, c->eval_every, session_eval_samples(s), c->run.n_devices, c->steps_per_execution,
             /* the chunk the backend was prepared with, which each rank sized by its own free memory: unlike
              * counts pair unlike collectives */
             eval_batch);
    memcpy(root, mine, sizeof root);
    int st = mpi_transport_bcast(root, sizeof root);
    long differ = st == TB_OK && strcmp(root, mine) != 0;
    if (st == TB_OK) st = mpi_transport_allreduce_long(&differ, 1);
    if (st != TB_OK) return st;
    if (!differ) return TB_OK;
    bench_fail_collective(); /* every rank refuses: none is left in a collective */
    if (strcmp(root, mine) == 0)
        return tb_error_set(TB_EINVAL, "%ld MPI rank%s run%s another configuration or other data than rank 0: every "
                            "rank must be given the same options and data", differ, differ == 1 ? "" : "s",
                            differ == 1 ? "s" : "");
    char why[512];
    config_diff(s, root, mine, "on rank 0", "on this rank", why, sizeof why);
    return tb_error_set(TB_EINVAL, "this rank's configuration or data differ from rank 0's (%s): every rank must be "
                        "given the same options and data", why);
}

/* The run's checkpoint folders' locks, before a resume reads them (session.h). */
int checkpoint_dirs_lock(struct session *s)
{
    const struct bench_config *c = &s->c;
    int st = TB_OK;
    /* Held to the session's end: a second bench in the folder (a resume beside the run still writing there, two
     * resumes of one folder, two fresh runs) mixed checkpoints and wrote the run's row twice. The resume folder too,
     * where it is another: two resumes of it would both finish the run. Under MPI rank 0 alone holds them. */
    const char *dirs[2];
    int resumed[2];
    const int nd = outputs_checkpoint_dirs(c, dirs, resumed);
    for (int d = 0; d < nd && st == TB_OK && s->primary; d++) {
        if (s->n_dir_locks >= 2) continue;
        int locked = 0;
        for (int k = 0; k < s->n_dir_locks; k++) locked |= outputs_same_file(s->dir_lock_path[k], dirs[d]);
        if (locked) continue;
        int fd = -1;
        if ((st = checkpoint_dir_lock(dirs[d], &fd)) != TB_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", tb_error_get());
            st = tb_error_set(TB_EIO, "%s %s", resumed[d] ? "--resume" : "--checkpoint-dir", why);
        } else if (fd >= 0) {
            snprintf(s->dir_lock_path[s->n_dir_locks], sizeof s->dir_lock_path[0], "%s", dirs[d]);
            s->dir_lock_fd[s->n_dir_locks++] = fd;
        }
    }
    if (c->run.transport_mpi) { /* every rank stops where rank 0 could not lock, before any collective */
        long v = st;
        if (mpi_transport_bcast(&v, sizeof v) == TB_OK && v != TB_OK && st == TB_OK)
            st = tb_error_set(TB_EIO, "rank 0 could not take the checkpoint folder's lock");
        else if (st == TB_OK)
            tb_error_clear();
    }
    return st;
}

int checkpoint_dir_ready(struct session *s)
{
    const struct bench_config *c = &s->c;
    if (!c->resume[0] || !outputs_same_file(c->resume, c->checkpoint_dir)) {
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
    /* Under MPI rank 0 alone writes; every rank takes part in the lock's broadcast. */
    const int st = s->primary ? checkpoint_dir_create(c->checkpoint_dir) : TB_OK;
    return st != TB_OK ? st : checkpoint_dirs_lock(s); /* a folder made just now */
}

/* The row of a run that stopped early, then the stop's own status and message again. Interrupted:
 * what ran, marked "partial" (its rate is "partial_images_per_s", so no table mistakes it for a
 * measurement); diverged: where, and no throughput or accuracy figure (a run that blew up measured
 * nothing worth comparing). */
int plan_stopped(struct session *s, int st, const char *run_id, int batch, const struct stop_info *si)
{
    /* Every diverged row comes here; over MPI the figures it stops on are the ranks' sums (bench_end waits). */
    if (st == TB_EDIVERGED) bench_fail_collective();
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
        json_key_str(&b, "stopped_by", bench_signal_name(bench_stop_signal()));
        const long ran = si->done - si->start;
        if (ran > 0 && si->session_s > 0.0)
            json_key_double(&b, "partial_images_per_s", (double)ran * batch / si->session_s);
        json_key_double(&b, "last_loss", s->last_loss);
        if (si->checkpoint) json_key_str(&b, "checkpoint", si->checkpoint);
        else json_key_null(&b, "checkpoint");
    } else {
        /* The failing step, or the last one where every step ran (no update applied, or the evaluation after). */
        json_key_int(&b, "diverged_at_step", si->planned > 0 && si->done >= si->planned ? si->planned : si->done + 1);
        json_key_str(&b, "reason", msg);
    }
    write_step_executions(s, &b);
    json_key_double(&b, "peak_rss_mib", measure_peak_rss_mib());
    row_gpu_memory(s, &b);
    json_key_double(&b, "setup_time_s", s->setup_time_s);
    if (row_end(s, &b) != TB_OK) fprintf(stderr, "bench: warning: %s\n", tb_error_get());
    return tb_error_set(st, "%s", msg);
}
