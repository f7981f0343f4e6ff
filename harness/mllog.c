/* mllog.c — MLPerf-style ":::MLLOG" event lines (see mllog.h). */
#define _GNU_SOURCE
#include "mllog.h"

#include "json.h"
#include "status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* mkdir -p dir. */
static int make_dirs(const char *dir)
{
    char buf[640];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = saved;
        if (!saved) break;
    }
    return 0;
}

int mllog_open(struct mllog *l, const char *dir, const char *run_id)
{
    return mllog_open_for(l, dir, run_id, 0);
}

/* <dir>/<run_id>.log, or for k > 0 the k-th resumed session's <dir>/<run_id>-resume<k>.log, into l->path. */
static int log_path(struct mllog *l, const char *dir, const char *run_id, int k)
{
    const int n = k ? snprintf(l->path, sizeof l->path, "%s/%s-resume%d.log", dir, run_id, k)
                    : snprintf(l->path, sizeof l->path, "%s/%s.log", dir, run_id);
    if (n >= (int)sizeof l->path) return tb_error_set(TB_EIO, "--mllog: path %s/%s.log is too long", dir, run_id);
    return TB_OK;
}

int mllog_open_for(struct mllog *l, const char *dir, const char *run_id, int resumed)
{
    memset(l, 0, sizeof *l);
    if (!dir || !*dir || strcmp(dir, "none") == 0) return TB_OK;
    int st = log_path(l, dir, run_id, 0);
    if (st != TB_OK) return st;
    if (make_dirs(dir) != 0)
        return tb_error_set(TB_EIO, "--mllog: cannot create directory %s: %s", dir, strerror(errno));
    /* A resumed session never appends: the interrupted one's log already has its header, run_start and
     * run_stop (MLPerf's checker wants each exactly once), and MLPerf's clock may not pause, so a log
     * spanning the gap would time the pause. It gets the first free -resume<k> name instead. */
    for (int k = 1;; k++) {
        l->f = fopen(l->path, "wx");
        if (l->f || errno != EEXIST || !resumed || k >= 10000) break;
        if ((st = log_path(l, dir, run_id, k)) != TB_OK) return st;
    }
    if (!l->f && errno == EEXIST) /* TB_EINVAL: a run id used twice, which the caller may refuse (open_log) */
        return tb_error_set(TB_EINVAL, "--mllog: %s exists (another run with this run id): not overwritten, no log",
                            l->path);
    if (!l->f) return tb_error_set(TB_EIO, "--mllog: cannot create %s: %s", l->path, strerror(errno));
    return TB_OK;
}

long long mllog_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mllog_event_meta(struct mllog *l, enum mllog_type type, const char *key, const char *value_json,
                      const struct mllog_meta *m)
{
    if (!l->f) return;
    static const char *const names[] = {"POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"};
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_str(&b, "namespace", "");
    /* Integer milliseconds, as MLPerf's own logger writes them. */
    json_key_int(&b, "time_ms", m->time_ms > 0 ? m->time_ms : mllog_now_ms());
    json_key_str(&b, "event_type", names[type]);
    json_key_str(&b, "key", key);
    json_key_raw(&b, "value", value_json ? value_json : "null");
    json_key_object(&b, "metadata");
    json_key_str(&b, "file", "harness/run.c");
    if (m->epoch_num >= 0) json_key_int(&b, "epoch_num", m->epoch_num);
    if (m->samples_count >= 0) json_key_int(&b, "samples_count", m->samples_count);
    if (m->status) json_key_str(&b, "status", m->status);
    json_end_object(&b);
    json_end_object(&b);
    if (json_buf_status(&b) == TB_OK) fprintf(l->f, ":::MLLOG %s\n", json_buf_str(&b));
    json_buf_free(&b);
}

void mllog_event(struct mllog *l, enum mllog_type type, const char *key, const char *value_json, long epoch_num,
                 const char *status)
{
    const struct mllog_meta m = {epoch_num, -1, status, 0};
    mllog_event_meta(l, type, key, value_json, &m);
}

void mllog_point_num(struct mllog *l, const char *key, double v)
{
    char t[40];
    json_format_double(v, t, sizeof t);
    mllog_event(l, MLLOG_POINT, key, t, -1, NULL);
}

void mllog_point_int(struct mllog *l, const char *key, long long v)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", v);
    mllog_event(l, MLLOG_POINT, key, t, -1, NULL);
}

void mllog_point_str(struct mllog *l, const char *key, const char *s)
{
    if (!l->f) return;
    struct json_buf b;
    json_buf_init(&b);
    json_str(&b, s);
    if (json_buf_status(&b) == TB_OK) mllog_event(l, MLLOG_POINT, key, json_buf_str(&b), -1, NULL);
    json_buf_free(&b);
}

/* A float as the shortest decimal that reads back as the same float (0.001f: 0.001, not
 * 0.0010000000474974513). */
static void point_float(struct mllog *l, const char *key, float f)
{
    char t[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, (double)f);
        if ((float)strtod(t, NULL) == f) break;
    }
    mllog_point_num(l, key, strtod(t, NULL));
}

/* An event at a recorded time. */
static void event_at(struct mllog *l, enum mllog_type type, const char *key, const char *value_json, long long t)
{
    const struct mllog_meta m = {-1, -1, NULL, t};
    mllog_event_meta(l, type, key, value_json, &m);
}

static void point_str_at(struct mllog *l, const char *key, const char *s, long long t)
{
    struct json_buf b;
    json_buf_init(&b);
    json_str(&b, s);
    if (json_buf_status(&b) == TB_OK) event_at(l, MLLOG_POINT, key, json_buf_str(&b), t);
    json_buf_free(&b);
}

/* A submission_* value: the environment's MLPERF_SUBMISSION_<NAME> when set (a submitter's, without a
 * command-line option per MLPerf key), else ours. */
static const char *submission_value(const char *env, const char *fallback)
{
    const char *v = getenv(env);
    return v && *v ? v : fallback;
}

static const char *const schedule_names[] = {"constant", "exponential", "polynomial", "cosine"};

/* The optimizer's hyperparameters under MLPerf's names: the opt_* keys every optimizer has, then its
 * own. SGD and LARS also get the sgd_opt_* / lars_opt_* keys MLPerf's ResNet rules name; Adam gets
 * opt_adam_*. RMSprop has no MLPerf keys: opt_rmsprop_* follows the opt_<optimizer>_* pattern. */
static void log_optimizer(struct mllog *l, const struct optim_config *o, long spe)
{
    const int decays = o->schedule != LR_CONSTANT;
    /* The decay runs from the end of the warm-up to the last step (optim_lr_at). */
    long decay_steps = o->schedule == LR_EXPONENTIAL ? o->decay_steps : o->total_steps - o->warmup_steps;
    if (decay_steps < 1) decay_steps = 1; /* optim_lr_at's floor */
    const int ends = o->schedule == LR_POLYNOMIAL || o->schedule == LR_COSINE;
    mllog_point_str(l, "opt_name", optim_name(o->kind));
    point_float(l, "opt_base_learning_rate", o->lr);
    point_float(l, "opt_weight_decay", o->weight_decay);
    mllog_point_int(l, "opt_learning_rate_warmup_steps", o->warmup_steps);
    if (spe > 0) mllog_point_num(l, "opt_learning_rate_warmup_epochs", (double)o->warmup_steps / (double)spe);
    mllog_point_str(l, "opt_learning_rate_decay_schedule", schedule_names[o->schedule]);
    if (decays) {
        mllog_point_int(l, "opt_learning_rate_training_steps", o->total_steps);
        mllog_point_int(l, "opt_learning_rate_decay_steps", decay_steps);
    }
    if (ends) point_float(l, "opt_end_learning_rate", o->final_lr);
    if (o->schedule == LR_EXPONENTIAL) point_float(l, "opt_learning_rate_decay_factor", o->decay_rate);
    if (o->schedule == LR_POLYNOMIAL) point_float(l, "opt_learning_rate_decay_poly_power", o->power);
    switch (o->kind) {
    case OPTIM_ADAM:
        point_float(l, "opt_adam_beta_1", o->beta1);
        point_float(l, "opt_adam_beta_2", o->beta2);
        point_float(l, "opt_adam_epsilon", o->eps);
        break;
    case OPTIM_RMSPROP:
        point_float(l, "opt_rmsprop_rho", o->rho);
        point_float(l, "opt_rmsprop_momentum", o->momentum);
        point_float(l, "opt_rmsprop_epsilon", o->eps);
        break;
    case OPTIM_SGD:
    case OPTIM_LARS: {
        const int lars = o->kind == OPTIM_LARS;
        char k[64];
#define OPT_KEY(suffix) (snprintf(k, sizeof k, "%s_opt_%s", lars ? "lars" : "sgd", suffix), k)
        point_float(l, OPT_KEY("base_learning_rate"), o->lr);
        point_float(l, OPT_KEY("momentum"), o->momentum);
        point_float(l, OPT_KEY("weight_decay"), o->weight_decay);
        if (ends) point_float(l, OPT_KEY("end_learning_rate"), o->final_lr);
        if (decays) mllog_point_int(l, OPT_KEY("learning_rate_decay_steps"), decay_steps);
        if (o->schedule == LR_POLYNOMIAL) point_float(l, OPT_KEY("learning_rate_decay_poly_power"), o->power);
        if (lars && spe > 0)
            mllog_point_num(l, "lars_opt_learning_rate_warmup_epochs", (double)o->warmup_steps / (double)spe);
#undef OPT_KEY
        if (lars) {
            /* Our trust ratio eta*|w|/(|g| + wd*|w|) adds no epsilon. */
            mllog_point_num(l, "lars_epsilon", 0.0);
            point_float(l, "lars_opt_trust_coefficient", o->lars_eta);
        }
        break;
    }
    }
}

void mllog_run_header(struct mllog *l, const struct mllog_run_info *ri)
{
    if (!l->f) return;
    const long long t0 = ri->init_start_ms > 0 ? ri->init_start_ms : mllog_now_ms();
    /* The run's facts come first, stamped with the start of its set-up so the log reads in time order. The
     * checker accepts only MLPerf's own benchmark names: an image classifier's is "resnet" (the open
     * division may change the model; trainbench's datasets make it a benchmark of its own all the same,
     * see BENCHMARKS.md). */
    point_str_at(l, "submission_benchmark", "resnet", t0);
    point_str_at(l, "submission_division", "open", t0);
    point_str_at(l, "submission_org", submission_value("MLPERF_SUBMISSION_ORG", "trainbench"), t0);
    point_str_at(l, "submission_platform",
                 submission_value("MLPERF_SUBMISSION_PLATFORM", ri->platform && *ri->platform ? ri->platform : "unknown"),
                 t0);
    point_str_at(l, "submission_status", submission_value("MLPERF_SUBMISSION_STATUS", "research"), t0);
    if (ri->workload) point_str_at(l, "trainbench_workload", ri->workload, t0);
    if (ri->backend) point_str_at(l, "trainbench_backend", ri->backend, t0);
    /* MLPerf's runs drop the page cache before init and log cache_clear true; trainbench does not, and
     * says so. */
    event_at(l, MLLOG_POINT, "cache_clear", "false", t0);
    event_at(l, MLLOG_START, "init_start", "null", t0);
    for (int i = 0; i < ri->n_phases; i++) {
        const struct mllog_phase *ph = &ri->phases[i];
        if (ph->start_ms <= 0 || ph->stop_ms <= 0) continue;
        event_at(l, MLLOG_START, ph->start_key, "null", ph->start_ms);
        event_at(l, MLLOG_END, ph->stop_key, "null", ph->stop_ms);
    }
    mllog_point_int(l, "global_batch_size", ri->global_batch);
    mllog_point_int(l, "gradient_accumulation_steps", ri->accumulation > 0 ? ri->accumulation : 1);
    mllog_point_int(l, "seed", (long long)ri->seed);
    if (ri->optim) log_optimizer(l, ri->optim, ri->steps_per_epoch);
    mllog_point_int(l, "train_samples", ri->train_samples);
    mllog_point_int(l, "eval_samples", ri->eval_samples);
    mllog_event(l, MLLOG_END, "init_stop", "null", -1, NULL);
}

int mllog_close(struct mllog *l, char *why, size_t n)
{
    if (!l->f) return TB_OK;
    const int err = tb_fclose_errno(l->f);
    l->f = NULL;
    if (!err) return TB_OK;
    if (why && n && !why[0]) snprintf(why, n, "--mllog %s: the event log is incomplete: %s", l->path, strerror(err));
    return TB_EIO;
}
