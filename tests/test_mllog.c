/* test_mllog.c — a tta run's event log against MLPerf's logging rules (the common and open-division
 * checks of mlcommons/logging's compliance_checker, training rulesets 2.1.0 to 6.1.0): the keys they
 * require, with the metadata and in the order they check them; an init interval that covers the data
 * loading, model build and backend prepare; gradient_accumulation_steps and each optimizer's opt_* keys
 * under MLPerf's names. The train plan's logs too (a run ending mid-epoch), and interrupted and resumed
 * train and tta runs: each session a whole log of its own, its epochs balanced. BENCHMARKS.md "MLPerf
 * logging compliance" has the checker's own verdict. */
#include "test_harness_util.h"

#include "checkpoint.h"
#include "json.h"
#include "run.h"
#include "status.h"

#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* One ":::MLLOG" line. */
struct ev {
    char key[64], type[16];
    long long t;
    long epoch;             /* metadata.epoch_num, -1: absent */
    long long samples;      /* metadata.samples_count, -1: absent */
    int has_value, has_status;
    char status[16];        /* metadata.status ("" if absent) */
    double num;             /* a numeric value (NaN otherwise) */
    char str[128];          /* a string value ("" otherwise) */
};

struct evlog {
    struct ev e[512];
    int n;
};

static void read_log(const char *path, struct evlog *L)
{
    char *text = th_read(path);
    L->n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cr_assert(strncmp(line, ":::MLLOG {", 10) == 0, "line: %s", line);
        cr_assert(L->n < 512);
        struct json_value *v = NULL;
        cr_assert_eq(json_parse(line + 9, strlen(line + 9), &v), TB_OK, "%s", tb_error_get());
        struct ev *e = &L->e[L->n++];
        snprintf(e->key, sizeof e->key, "%s", json_get_str(v, "key", ""));
        snprintf(e->type, sizeof e->type, "%s", json_get_str(v, "event_type", ""));
        e->t = (long long)json_get_number(v, "time_ms", -1);
        e->epoch = (long)json_get_number(v, "metadata.epoch_num", -1);
        e->samples = (long long)json_get_number(v, "metadata.samples_count", -1);
        e->has_status = json_get(v, "metadata.status") != NULL;
        snprintf(e->status, sizeof e->status, "%s", json_get_str(v, "metadata.status", ""));
        const struct json_value *val = json_get(v, "value");
        e->has_value = val != NULL;
        e->num = val && val->type == JSON_NUMBER ? val->number : NAN;
        snprintf(e->str, sizeof e->str, "%s", json_get_str(v, "value", ""));
        json_value_free(v);
    }
    free(text);
}

static int count(const struct evlog *L, const char *key)
{
    int n = 0;
    for (int i = 0; i < L->n; i++) n += strcmp(L->e[i].key, key) == 0;
    return n;
}

/* The line of key's first (last: last != 0) event, or -1. */
static int line_of(const struct evlog *L, const char *key, int last)
{
    int at = -1;
    for (int i = 0; i < L->n; i++)
        if (strcmp(L->e[i].key, key) == 0) {
            at = i;
            if (!last) break;
        }
    return at;
}

static const struct ev *one(const struct evlog *L, const char *key)
{
    cr_assert_eq(count(L, key), 1, "exactly one %s", key);
    return &L->e[line_of(L, key, 0)];
}

/* What the checker's common.yaml, open_common.yaml and open_resnet.yaml check, rule by rule (the last's
 * "an eval_accuracy below 1.0" only with below_one: a run that learns the synthetic set perfectly fails
 * it, rightly). */
static void check_mlperf_common(const struct evlog *L, int batch, int below_one_required)
{
    const char *const once[] = {"submission_benchmark", "submission_division", "submission_org",
                                "submission_platform", "submission_status", "init_stop", "run_start", "run_stop",
                                "train_samples", "eval_samples", "global_batch_size", "gradient_accumulation_steps",
                                "seed", "opt_name", "opt_base_learning_rate"};
    for (size_t i = 0; i < sizeof once / sizeof once[0]; i++) one(L, once[i]);
    cr_assert_str_eq(one(L, "submission_benchmark")->str, "resnet", "the only image-classification name it accepts");
    cr_assert_str_eq(one(L, "submission_division")->str, "open");
    cr_assert(one(L, "submission_org")->str[0] && one(L, "submission_platform")->str[0]);
    const char *status = one(L, "submission_status")->str;
    cr_assert(!strcmp(status, "cloud") || !strcmp(status, "onprem") || !strcmp(status, "preview") ||
              !strcmp(status, "research"), "%s", status);
    cr_assert_eq(count(L, "target_accuracy"), 0, "not an MLPerf key");
    /* cache_clear with a value, and the submission_* facts, before the init interval. */
    const int init0 = line_of(L, "init_start", 0), init1 = line_of(L, "init_stop", 0);
    const int run0 = line_of(L, "run_start", 0), run1 = line_of(L, "run_stop", 0);
    cr_assert(count(L, "cache_clear") >= 1 && L->e[line_of(L, "cache_clear", 0)].has_value);
    cr_assert(init0 >= 0 && line_of(L, "cache_clear", 0) < init0);
    for (int i = 0; i < init0; i++) cr_assert(strncmp(L->e[i].key, "init_", 5) != 0);
    cr_assert(line_of(L, "submission_division", 0) < init0);
    /* init_start (any number, none after init_stop or run_start) < init_stop < run_start < run_stop. */
    cr_assert(line_of(L, "init_start", 1) < init1 && init1 < run0 && run0 < run1);
    /* Not strictly later: time_ms has millisecond resolution and this tiny set-up took under 1 ms on a Zen 4
     * (init_start == init_stop failed CI); the line order above shows the interval encloses it. */
    cr_assert(L->e[init1].t >= L->e[init0].t, "init_stop before init_start: %lld, %lld", L->e[init0].t,
              L->e[init1].t);
    cr_assert(L->e[init1].t - L->e[init0].t < 30LL * 60 * 1000, "well inside the open division's 240 minutes");
    cr_assert(L->e[run1].has_status);
    cr_assert_str_eq(L->e[run0].type, "INTERVAL_START");
    /* The hyperparameters inside the init interval. */
    const char *const hyper[] = {"global_batch_size", "gradient_accumulation_steps", "seed", "opt_name",
                                 "opt_base_learning_rate", "train_samples", "eval_samples"};
    for (size_t i = 0; i < sizeof hyper / sizeof hyper[0]; i++) {
        const int at = line_of(L, hyper[i], 0);
        cr_assert(at > init0 && at < init1, "%s inside the init interval", hyper[i]);
    }
    cr_assert_eq(one(L, "global_batch_size")->num, batch);
    /* Epochs: at least one epoch_stop (or block_stop), every epoch event with epoch_num. */
    cr_assert(count(L, "epoch_start") >= 1 && count(L, "epoch_stop") >= 1);
    int evals = 0, below_one = 0;
    for (int i = 0; i < L->n; i++) {
        const struct ev *e = &L->e[i];
        if (!strncmp(e->key, "epoch_", 6)) cr_assert(e->epoch >= 1, "%s line %d: epoch_num", e->key, i);
        if (!strncmp(e->key, "eval_", 5) && strcmp(e->key, "eval_samples") != 0) {
            cr_assert(e->epoch >= 1 && e->samples >= 0, "%s line %d: epoch_num and samples_count", e->key, i);
            cr_assert_eq(e->samples % batch, 0, "samples trained: a whole number of steps");
            cr_assert(i > run0 && i < run1, "%s inside the run", e->key);
        }
        if (!strcmp(e->key, "eval_accuracy")) evals++, below_one += e->num < 1.0;
    }
    cr_assert(evals >= 1);
    if (below_one_required) cr_assert(below_one >= 1, "open_resnet.yaml: an eval_accuracy below 1.0");
    cr_assert_eq(count(L, "epoch_start"), count(L, "epoch_stop"), "every epoch closed, the last one cut short too");
}

/* A phase [start_key, stop_key] logged once, inside the init interval in lines and in time. */
static void check_phase_inside_init(const struct evlog *L, const char *start_key, const char *stop_key)
{
    const struct ev *a = one(L, start_key), *b = one(L, stop_key), *i0 = one(L, "init_start"), *i1 = one(L, "init_stop");
    const int la = line_of(L, start_key, 0), lb = line_of(L, stop_key, 0);
    cr_assert(line_of(L, "init_start", 0) < la && la < lb && lb < line_of(L, "init_stop", 0), "%s..%s", start_key,
              stop_key);
    cr_assert(i0->t <= a->t && a->t <= b->t && b->t <= i1->t, "%s %lld..%lld inside init %lld..%lld", start_key, a->t,
              b->t, i0->t, i1->t);
}

/* th_small_tta under run id run_id. */
static void small_tta(struct bench_config *c, const char *run_id, const char *seeds, const char *target,
                      const char *max_epochs)
{
    th_small_tta(c, target, seeds, max_epochs);
    cr_assert_eq(bench_config_set(c, "run-id", run_id), TB_OK);
}

Test(mllog, tta_log_passes_mlperf_common_checks, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    /* 32 steps per epoch, evaluated every 16: the target is reached mid-epoch. */
    small_tta(&c, "comp", "2", "0.5", "5");
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    char p[192];
    static struct evlog L;
    read_log(th_path(p, sizeof p, "mllog/comp-seed42.log"), &L);
    check_mlperf_common(&L, 32, 1);
    /* The first seed's init interval is the process's set-up: data loading, model build, backend. */
    check_phase_inside_init(&L, "staging_start", "staging_stop");
    check_phase_inside_init(&L, "model_build_start", "model_build_stop");
    check_phase_inside_init(&L, "backend_prepare_start", "backend_prepare_stop");
    const struct ev *acc = &L.e[line_of(&L, "eval_accuracy", 0)];
    cr_assert_eq(acc->samples, 16 * 32, "first evaluation after 16 steps of 32");
    cr_assert_eq(acc->epoch, 1);
    /* The second seed re-initialises its weights on the session's data: its own, shorter init interval. */
    read_log(th_path(p, sizeof p, "mllog/comp-seed43.log"), &L);
    check_mlperf_common(&L, 32, 1);
    cr_assert_eq(count(&L, "staging_start"), 0, "the data were loaded once, in the first seed's init");
}

Test(mllog, a_missed_target_still_closes_its_epochs, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    small_tta(&c, "missed", "1", "0.9", "1");
    cr_assert_eq(bench_config_set(&c, "lr", "1e-9"), TB_OK);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    char p[192];
    static struct evlog L;
    read_log(th_path(p, sizeof p, "mllog/missed.log"), &L);
    check_mlperf_common(&L, 32, 1);
}

/* Each optimizer's hyperparameters under MLPerf's names, inside the init interval, with their values. */
Test(mllog, optimizer_keys_under_mlperf_names, .init = th_setup, .fini = th_teardown, .timeout = 120)
{
    static const struct {
        const char *name, *keys[10];
    } opts[] = {
        {"sgd", {"sgd_opt_base_learning_rate", "sgd_opt_momentum", "sgd_opt_weight_decay",
                 "sgd_opt_end_learning_rate", "sgd_opt_learning_rate_decay_steps",
                 "sgd_opt_learning_rate_decay_poly_power", NULL}},
        {"adam", {"opt_adam_beta_1", "opt_adam_beta_2", "opt_adam_epsilon", NULL}},
        {"rmsprop", {"opt_rmsprop_rho", "opt_rmsprop_momentum", "opt_rmsprop_epsilon", NULL}},
        {"lars", {"lars_opt_base_learning_rate", "lars_opt_momentum", "lars_opt_weight_decay", "lars_epsilon",
                  "lars_opt_learning_rate_warmup_epochs", "lars_opt_end_learning_rate",
                  "lars_opt_learning_rate_decay_steps", "lars_opt_learning_rate_decay_poly_power", NULL}},
    };
    static const char *const common[] = {"opt_name", "opt_base_learning_rate", "opt_weight_decay",
                                         "opt_learning_rate_warmup_steps", "opt_learning_rate_warmup_epochs",
                                         "opt_learning_rate_decay_schedule", "opt_end_learning_rate",
                                         "opt_learning_rate_decay_steps", "opt_learning_rate_decay_poly_power",
                                         "gradient_accumulation_steps"};
    static struct evlog L;
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        struct bench_config c;
        char id[32], p[192];
        snprintf(id, sizeof id, "opt-%s", opts[k].name);
        small_tta(&c, id, "1", "0.99", "1");
        cr_assert_eq(bench_config_set(&c, "optimizer", opts[k].name), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr", "0.002"), TB_OK);
        if (strcmp(opts[k].name, "adam") != 0) /* Adam has none: refused there */
            cr_assert_eq(bench_config_set(&c, "momentum", "0.8"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "weight-decay", "0.0001"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr-schedule", "polynomial"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr-warmup", "8"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr-power", "2"), TB_OK);
        cr_assert_eq(bench_config_set(&c, "lr-final", "0.0001"), TB_OK);
        cr_assert_eq(bench_run(&c), TB_OK, "%s: %s", opts[k].name, tb_error_get());
        snprintf(id, sizeof id, "mllog/opt-%s.log", opts[k].name);
        read_log(th_path(p, sizeof p, id), &L);
        check_mlperf_common(&L, 32, 0);
        const int init0 = line_of(&L, "init_start", 0), init1 = line_of(&L, "init_stop", 0);
        for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) {
            const int at = line_of(&L, common[i], 0);
            cr_assert(at > init0 && at < init1 && count(&L, common[i]) == 1, "%s: %s", opts[k].name, common[i]);
        }
        for (int i = 0; opts[k].keys[i]; i++) {
            const int at = line_of(&L, opts[k].keys[i], 0);
            cr_assert(at > init0 && at < init1 && count(&L, opts[k].keys[i]) == 1, "%s: %s", opts[k].name,
                      opts[k].keys[i]);
        }
        cr_assert_str_eq(one(&L, "opt_name")->str, opts[k].name);
        cr_assert_str_eq(one(&L, "opt_learning_rate_decay_schedule")->str, "polynomial");
        cr_assert_eq(one(&L, "opt_base_learning_rate")->num, 0.002, "the float 0.002f written as 0.002");
        cr_assert_eq(one(&L, "opt_weight_decay")->num, 0.0001);
        cr_assert_eq(one(&L, "opt_end_learning_rate")->num, 0.0001);
        cr_assert_eq(one(&L, "opt_learning_rate_decay_poly_power")->num, 2.0);
        cr_assert_eq(one(&L, "opt_learning_rate_warmup_steps")->num, 8);
        cr_assert_eq(one(&L, "opt_learning_rate_warmup_epochs")->num, 0.25, "8 of 32 steps per epoch");
        cr_assert_eq(one(&L, "opt_learning_rate_decay_steps")->num, 32 - 8, "the decay runs after the warm-up");
        cr_assert_eq(one(&L, "gradient_accumulation_steps")->num, 1, "the cpu backend does not accumulate");
        if (!strcmp(opts[k].name, "sgd") || !strcmp(opts[k].name, "lars") || !strcmp(opts[k].name, "rmsprop")) {
            char key[64];
            snprintf(key, sizeof key, "%s%s", !strcmp(opts[k].name, "rmsprop") ? "opt_rmsprop" : opts[k].name,
                     !strcmp(opts[k].name, "rmsprop") ? "_momentum" : "_opt_momentum");
            cr_assert_float_eq(one(&L, key)->num, 0.8, 1e-12, "%s", key);
        }
        if (!strcmp(opts[k].name, "lars")) cr_assert_eq(one(&L, "lars_opt_learning_rate_warmup_epochs")->num, 0.25);
    }
}

/* One session's log whatever its end: one header (the submission_* facts, init_stop, run_start, run_stop
 * once each), run_stop with status (status: its value), and its epochs balanced and in order: each
 * epoch_start (the first with epoch first_epoch, then one more each) closed by its own epoch_stop before
 * the next opens and before run_stop, all between run_start and run_stop. Returns the epochs. */
static int check_session(const struct evlog *L, long first_epoch, const char *status)
{
    static const char *const once[] = {"submission_benchmark", "submission_division", "submission_org",
                                       "submission_platform", "submission_status", "init_stop", "run_start",
                                       "run_stop"};
    for (size_t i = 0; i < sizeof once / sizeof once[0]; i++) one(L, once[i]);
    const int run0 = line_of(L, "run_start", 0), run1 = line_of(L, "run_stop", 0);
    cr_assert_str_eq(L->e[run1].status, status);
    cr_assert_eq(run1, L->n - 1, "run_stop ends the log");
    long open = 0, next = first_epoch;
    int epochs = 0;
    for (int i = 0; i < L->n; i++) {
        const struct ev *e = &L->e[i];
        if (!strcmp(e->key, "epoch_start")) {
            cr_assert(i > run0 && i < run1, "line %d: epoch_start outside the run", i);
            cr_assert_eq(open, 0, "line %d: epoch_start %ld while epoch %ld is open", i, e->epoch, open);
            cr_assert_eq(e->epoch, next, "line %d: epoch_start %ld, want %ld", i, e->epoch, next);
            open = e->epoch, next = e->epoch + 1, epochs++;
        } else if (!strcmp(e->key, "epoch_stop")) {
            cr_assert(i > run0 && i < run1, "line %d: epoch_stop outside the run", i);
            cr_assert_eq(e->epoch, open, "line %d: epoch_stop %ld, open: %ld", i, e->epoch, open);
            open = 0;
        }
    }
    cr_assert_eq(open, 0, "epoch %ld never stopped", open);
    return epochs;
}

/* A quiet in-process train run of `steps` steps under run id run_id, on 1,024 training samples at
 * batch 32 (32 steps an epoch) and 256 test samples. */
static void small_train(struct bench_config *c, const char *run_id, const char *steps)
{
    bench_config_defaults(c);
    cr_assert_eq(bench_config_set(c, "plan", "train"), TB_OK);
    cr_assert_eq(bench_config_set(c, "steps", steps), TB_OK);
    cr_assert_eq(bench_config_set(c, "batch", "32"), TB_OK);
    cr_assert_eq(bench_config_set(c, "run-id", run_id), TB_OK);
    th_bench_quiet(c, 1024, 256);
}

Test(mllog, a_train_run_ending_mid_epoch_closes_that_epoch, .init = th_setup, .fini = th_teardown, .timeout = 60)
{
    static struct evlog L;
    char p[192];
    /* 40 steps: epoch 1 whole, epoch 2 cut after 8 steps (it stayed open before the evaluation and
     * run_stop); 2 steps: one epoch cut short, which had no epoch_stop at all (the checker FAILED it). */
    static const struct {
        const char *id, *steps;
        int epochs;
    } runs[] = {{"mid", "40", 2}, {"short", "2", 1}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        struct bench_config c;
        small_train(&c, runs[k].id, runs[k].steps);
        cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
        char name[64];
        snprintf(name, sizeof name, "mllog/%s.log", runs[k].id);
        read_log(th_path(p, sizeof p, name), &L);
        check_mlperf_common(&L, 32, 0);
        cr_assert_eq(check_session(&L, 1, "success"), runs[k].epochs, "%s", runs[k].id);
        cr_assert(line_of(&L, "epoch_stop", 1) < line_of(&L, "eval_start", 0), "%s: the epoch ends before the "
                  "evaluation of the trained model", runs[k].id);
    }
}

/* Starts c in a child process with TB_STOP_IN_EVAL=stop_in_eval (NULL: none) there: a stop signal's flag
 * stays set in the process it reached, so an interrupted run cannot be this test's own. The child exits
 * 0 when its run was interrupted, 1 otherwise. */
static pid_t start_child(const struct bench_config *c, const char *stop_in_eval)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (stop_in_eval) setenv("TB_STOP_IN_EVAL", stop_in_eval, 1);
        _exit(bench_run(c) == TB_EINTR ? 0 : 1);
    }
    return pid;
}

static void wait_interrupted(pid_t pid)
{
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the child run was not interrupted (wait status %d)", ws);
}

/* The newest checkpoint's step in dir (-1: none yet). */
static long newest_checkpoint(const char *dir)
{
    long steps[4];
    int n = 0;
    if (checkpoint_dir_list(dir, steps, 4, &n) != TB_OK) tb_error_clear(); /* not created yet */
    return n > 0 ? steps[0] : -1;
}

Test(mllog, an_interrupted_and_resumed_train_run_logs_each_session_whole, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    static struct evlog L;
    char p[192], ck[192], log0[192], log1[192];
    th_path(ck, sizeof ck, "ck");
    struct bench_config c;
    /* Far more steps than it gets to: SIGINT once its first periodic checkpoint exists. */
    small_train(&c, "res", "1000000");
    cr_assert_eq(bench_config_set(&c, "checkpoint-dir", ck), TB_OK);
    cr_assert_eq(bench_config_set(&c, "checkpoint-every", "8"), TB_OK);
    const pid_t pid = start_child(&c, NULL);
    for (int i = 0; i < 20000 && newest_checkpoint(ck) < 0; i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
    cr_assert_eq(kill(pid, SIGINT), 0);
    wait_interrupted(pid);
    const long k = newest_checkpoint(ck);
    cr_assert_geq(k, 8, "the stop's checkpoint");
    read_log(th_path(log0, sizeof log0, "mllog/res.log"), &L);
    check_session(&L, 1, "aborted");
    const long size0 = th_size(log0);
    /* Resumed under the same run id to the middle of the epoch after the one it stopped in. */
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", (k / 32 + 1) * 32 + 8);
    small_train(&c, "res", steps);
    cr_assert_eq(bench_config_set(&c, "resume", ck), TB_OK);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    cr_assert_eq(th_size(log0), size0, "the interrupted session's log gained lines");
    read_log(th_path(log1, sizeof log1, "mllog/res-resume1.log"), &L);
    check_mlperf_common(&L, 32, 0);
    cr_assert_eq(check_session(&L, k / 32 + 1, "success"), 2, "stopped at %ld: the epoch it resumed in, and the next, "
                 "cut short", k);
    cr_assert_eq(one(&L, "resumed_from_step")->num, k);
    cr_assert(line_of(&L, "epoch_stop", 1) < line_of(&L, "eval_start", 0));
    cr_assert_neq(access(th_path(p, sizeof p, "mllog/res-resume2.log"), F_OK), 0);
}

Test(mllog, an_interrupted_and_resumed_tta_run_logs_each_session_whole, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    static struct evlog L;
    char p[192], ck[192], log0[192], log1[192];
    th_path(ck, sizeof ck, "ck");
    struct bench_config c;
    /* 2 epochs of 32 steps, evaluated every 16, never reaching 0.9 (lr 1e-9 learns nothing). */
#define TTA_RES(...)                                                                                               \
    do {                                                                                                           \
        small_tta(&c, "ttares", "1", "0.9", "2");                                                                  \
        cr_assert_eq(bench_config_set(&c, "lr", "1e-9"), TB_OK);                                                   \
        cr_assert_eq(bench_config_set(&c, __VA_ARGS__), TB_OK);                                                    \
    } while (0)
    /* Stopped in its first evaluation (step 16, mid-epoch 1). */
    TTA_RES("checkpoint-dir", ck);
    wait_interrupted(start_child(&c, "1"));
    read_log(th_path(log0, sizeof log0, "mllog/ttares.log"), &L);
    check_session(&L, 1, "aborted");
    const long size0 = th_size(log0);
    /* Resumed: it evaluates step 16 again, reopens epoch 1, and stops in its third evaluation (step 48,
     * mid-epoch 2). */
    TTA_RES("resume", ck);
    wait_interrupted(start_child(&c, "3"));
    read_log(th_path(log1, sizeof log1, "mllog/ttares-resume1.log"), &L);
    cr_assert_eq(check_session(&L, 1, "aborted"), 2);
    cr_assert_eq(one(&L, "resumed_from_step")->num, 16);
    const long size1 = th_size(log1);
    /* Resumed again, to the end. */
    TTA_RES("resume", ck);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
#undef TTA_RES
    cr_assert_eq(th_size(log0), size0, "the first session's log gained lines");
    cr_assert_eq(th_size(log1), size1, "the second session's log gained lines");
    read_log(th_path(p, sizeof p, "mllog/ttares-resume2.log"), &L);
    check_mlperf_common(&L, 32, 1);
    cr_assert_eq(check_session(&L, 2, "aborted"), 1, "epoch 2 reopened; a missed target is aborted");
    cr_assert_eq(one(&L, "resumed_from_step")->num, 48);
}
