/* test_mirrored_offhost.c — the mirrored schedule over executors whose tensors are off the host (the cuda
 * device's case), and --prefetch, exercised on the cpu without a GPU.
 *
 * Two doubles of a device are registered (executor_device_register): the cpu executor whose
 * executor_buffer says host = 0 and hands out a poisoned pointer (a schedule that dereferenced it would
 * crash), so mirrored must take its off-host paths:
 *   - "offhost-staged": no collective: the gradients go through host copies (get, the ring, set);
 *   - "offhost-group": a gradient collective (group_init / allreduce_grads) that sums the replicas in the
 *     ring's order from one thread, as the cuda device's tb_cuda_sum_ring_order does on one GPU, a
 *     prefetch member that snapshots the passes handed over ahead (and checks, when the pass runs, that
 *     it is that pass on unchanged data), and a count of 3 instances (mirrored's default replicas).
 * Checked: both are bitwise the cpu device's mirrored (the host ring, sharded update) in loss, parameters,
 * optimizer state and summed gradients after every step, at 2 and 3 replicas (unequal chunks), with Adam
 * and SGD; --sync-bn is refused with one line; the description names the path; the default replicas are
 * the device's count; and an in-process train run with --prefetch hands every step after the first over
 * ahead, each taken by its own pass, bitwise the run with --prefetch 0.
 */
#include "test_util.h"

#include "test_harness_util.h"

#include "backend.h"
#include "checkpoint.h"
#include "executor.h"
#include "layout.h"
#include "status.h"
#include "workload.h"

#include <pthread.h>
#include <stdint.h>

enum { IMG = 28, STEPS = 4 };

/* ---- the doubles ---- */

static const struct executor_i *cpu_i; /* the cpu device's table, which the doubles wrap */
static struct executor_i staged_i, group_i;

/* What a GPU's buffer says: not a host pointer; poisoned so a dereference fails loudly. */
static int offhost_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b)
{
    const int st = cpu_i->buffer(ex, f, b);
    b->host = 0;
    b->data = (float *)(uintptr_t)16;
    return st;
}

/* The device's collective: every element summed in the ring's order (chunk c from replica c on),
 * written to every member, from the calling thread. */
static int tg_calls;

static void tg_release(struct executor_group *g)
{
    free(g->state);
    g->state = NULL;
}

static int tg_init(struct executor_group *g)
{
    float **bufs = calloc((size_t)g->n, sizeof *bufs);
    cr_assert_not_null(bufs);
    for (int k = 0; k < g->n; k++) {
        struct executor_buffer b;
        cr_assert_eq(cpu_i->buffer(&g->ex[k], TF_GRADS, &b), TB_OK);
        bufs[k] = b.data;
    }
    g->state = bufs, g->release = tg_release;
    snprintf(g->how, sizeof g->how, "test collective in the ring's order");
    return TB_OK;
}

static int tg_allreduce(struct executor_group *g)
{
    float **bufs = g->state;
    const int k = g->n;
    const size_t n = g->ex[0].m->n_params;
    for (int c = 0; c < k; c++) {
        size_t lo, hi;
        tb_slice(n, c, k, &lo, &hi);
        for (size_t i = lo; i < hi; i++) {
            float s = bufs[c][i];
            for (int j = 1; j < k; j++) s = s + bufs[(c + j) % k][i];
            for (int j = 0; j < k; j++) bufs[j][i] = s;
        }
    }
    tg_calls++;
    return TB_OK;
}

/* Passes handed over ahead: the executor, the pass's keys and a snapshot of its data. The replicas'
 * workers run their passes concurrently, hence the lock. */
enum { MAX_AHEAD = 64 };
static struct ahead {
    const struct executor *ex;
    const uint8_t *x;
    const int32_t *y;
    int n;
    long step;
    uint8_t *xs;
    int32_t *ys;
} ahead[MAX_AHEAD];
static int n_ahead, puts_total, hits, stale;
static pthread_mutex_t ahead_lock = PTHREAD_MUTEX_INITIALIZER;

static int pf_prefetch(struct executor *ex, const struct executor_pass *p)
{
    const size_t per = ex->m->tensors[ex->m->input].per_sample;
    pthread_mutex_lock(&ahead_lock);
    cr_assert_lt(n_ahead, MAX_AHEAD, "passes handed over ahead are never taken");
    struct ahead *a = &ahead[n_ahead++];
    *a = (struct ahead){ex, p->x, p->y, p->n, p->step, malloc((size_t)p->n * per), malloc((size_t)p->n * 4)};
    memcpy(a->xs, p->x, (size_t)p->n * per);
    memcpy(a->ys, p->y, (size_t)p->n * 4);
    puts_total++;
    pthread_mutex_unlock(&ahead_lock);
    return TB_OK;
}

static int pf_compute(struct executor *ex, const struct executor_pass *p, int what, double *loss_sum)
{
    if (what & EXECUTOR_FORWARD) {
        const size_t per = ex->m->tensors[ex->m->input].per_sample;
        pthread_mutex_lock(&ahead_lock);
        for (int k = 0; k < n_ahead; k++) {
            struct ahead *a = &ahead[k];
            if (a->ex != ex || a->x != p->x || a->y != p->y || a->n != p->n || a->step != p->step) continue;
            /* The data the pass reads are what was handed over (a device reads its copy). */
            if (memcmp(a->xs, p->x, (size_t)p->n * per) || memcmp(a->ys, p->y, (size_t)p->n * 4)) stale++;
            else hits++;
            free(a->xs), free(a->ys);
            *a = ahead[--n_ahead];
            break;
        }
        pthread_mutex_unlock(&ahead_lock);
    }
    return cpu_i->compute(ex, p, what, loss_sum);
}

static int wrap(struct executor *ex, struct executor_i *dst, int group)
{
    const int st = executor_cpu_create(ex);
    if (st != TB_OK) return st;
    if (!cpu_i) cpu_i = ex->i;
    *dst = *cpu_i;
    dst->name = group ? "offhost-group" : "offhost-staged";
    dst->buffer = offhost_buffer;
    if (group) {
        dst->group_init = tg_init, dst->allreduce_grads = tg_allreduce;
        dst->prefetch = pf_prefetch, dst->compute = pf_compute;
    }
    ex->i = dst;
    return TB_OK;
}

static int staged_create(struct executor *ex) { return wrap(ex, &staged_i, 0); }
static int group_create(struct executor *ex) { return wrap(ex, &group_i, 1); }
static int group_count(void) { return 3; }

static void register_doubles(void)
{
    static const struct executor_device d[2] = {
        {.name = "offhost-staged", .summary = "test: cpu tensors reported off the host, no collective",
         .create = staged_create},
        {.name = "offhost-group", .summary = "test: cpu tensors reported off the host, a ring-order collective",
         .create = group_create, .count = group_count},
    };
    for (int k = 0; k < 2; k++) cr_assert_eq(executor_device_register(&d[k]), TB_OK, "%s", tb_error_get());
}

/* ---- backend-level runs ---- */

struct setup {
    struct model m;
    struct dataset ds;
    int32_t *labels;
    struct backend b;
    size_t n_params, n_opt;
};

static int setup_init(struct setup *S, const char *device, int R, int batch, enum optim_kind kind, int sync_bn)
{
    memset(S, 0, sizeof *S);
    struct workload_opts o = {.classes = 10, .in_h = IMG, .in_w = IMG, .in_c = 1, .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_mnist_mlp.build(&S->m, &o), TB_OK, "%s", tb_error_get());
    cr_assert_eq(dataset_synthetic(STEPS * batch, IMG, IMG, 1, 10, 7, 1, &S->ds), TB_OK, "%s", tb_error_get());
    S->labels = malloc((size_t)S->ds.n * sizeof *S->labels);
    cr_assert_not_null(S->labels);
    for (int i = 0; i < S->ds.n; i++) S->labels[i] = S->ds.labels[i];
    cr_assert_eq(backend_create(&S->b, "mirrored"), TB_OK);
    struct run_config cfg = {.batch = batch, .eval_batch = batch, .seed = 42, .n_devices = R, .sync_bn = sync_bn};
    optim_config_defaults(&cfg.optim, kind);
    cfg.optim.lr = kind == OPTIM_ADAM ? workload_mnist_mlp.lr : 0.05f;
    cfg.optim.total_steps = STEPS;
    snprintf(cfg.device, sizeof cfg.device, "%s", device);
    const int st = backend_prepare(&S->b, &S->m, &cfg);
    if (st != TB_OK) return st;
    S->n_params = S->m.n_params;
    S->n_opt = S->n_params * (size_t)optim_state_per_param(kind);
    float *p = tu_fvec(S->n_params), *bu = tu_fvec(S->m.n_buffers);
    workload_mnist_mlp.init(&S->m, p, bu, 42);
    cr_assert_eq(backend_set_tensors(&S->b, TF_PARAMS, p), TB_OK, "%s", tb_error_get());
    free(p), free(bu);
    return TB_OK;
}

static void setup_free(struct setup *S)
{
    backend_destroy(&S->b);
    free(S->labels);
    dataset_free(&S->ds);
    model_free(&S->m);
}

static struct batch batch_of(const struct setup *S, int batch, int s)
{
    const size_t per = (size_t)IMG * IMG;
    return (struct batch){batch, S->ds.images + (size_t)(s - 1) * batch * per, S->labels + (size_t)(s - 1) * batch};
}

/* Each step through the real path (train_step), then one forward_backward + update: every family bitwise
 * the host ring's. */
static void check_bitwise_host_ring(const char *device, int R, enum optim_kind kind)
{
    const int batch = 4 * R;
    struct setup A, B;
    cr_assert_eq(setup_init(&A, "cpu", R, batch, kind, 0), TB_OK, "%s", tb_error_get());
    cr_assert_eq(setup_init(&B, device, R, batch, kind, 0), TB_OK, "%s: %s", device, tb_error_get());
    const size_t np = A.n_params, no = A.n_opt;
    float *a = tu_fvec(no > np ? no : np), *b = tu_fvec(no > np ? no : np);
    for (int s = 1; s <= STEPS; s++) {
        const struct batch bt = batch_of(&A, batch, s);
        struct step_stats sa = {0}, sb = {0};
        cr_assert_eq(backend_train_step(&A.b, &bt, s, &sa), TB_OK, "%s", tb_error_get());
        if (s < STEPS) {
            cr_assert_eq(backend_train_step(&B.b, &bt, s, &sb), TB_OK, "%s", tb_error_get());
        } else {
            cr_assert_eq(backend_forward_backward(&B.b, &bt, s, &sb), TB_OK, "%s", tb_error_get());
            cr_assert_eq(backend_update(&B.b, s, &sb), TB_OK, "%s", tb_error_get());
        }
        cr_assert(memcmp(&sa.loss_sum, &sb.loss_sum, sizeof(double)) == 0, "%s step %d: loss %.17g vs %.17g",
                  device, s, sb.loss_sum, sa.loss_sum);
        const enum tensor_family fam[3] = {TF_PARAMS, TF_OPT, TF_GRADS};
        const size_t len[3] = {np, no, np};
        for (int f = 0; f < 3; f++) {
            cr_assert_eq(backend_get_tensors(&A.b, fam[f], a), TB_OK, "%s", tb_error_get());
            cr_assert_eq(backend_get_tensors(&B.b, fam[f], b), TB_OK, "%s", tb_error_get());
            char what[128];
            snprintf(what, sizeof what, "%s, %d replicas, %s, step %d, family %d", device, R, optim_name(kind), s, f);
            tu_assert_bitwise(b, a, len[f], what);
        }
    }
    free(a), free(b);
    setup_free(&A), setup_free(&B);
}

Test(mirrored_offhost, staged_host_copies_bitwise_the_host_ring, .init = register_doubles, .timeout = 120)
{
    for (int R = 2; R <= 3; R++) {
        check_bitwise_host_ring("offhost-staged", R, OPTIM_ADAM);
        check_bitwise_host_ring("offhost-staged", R, OPTIM_SGD);
    }
}

Test(mirrored_offhost, device_collective_bitwise_the_host_ring, .init = register_doubles, .timeout = 120)
{
    for (int R = 2; R <= 3; R++) {
        tg_calls = 0;
        check_bitwise_host_ring("offhost-group", R, OPTIM_ADAM);
        cr_assert_eq(tg_calls, STEPS, "the device's collective ran once a step (%d)", tg_calls);
        check_bitwise_host_ring("offhost-group", R, OPTIM_SGD);
    }
}

/* The description says which path sums; the default replicas are the device's count; sync BatchNorm
 * on device tensors is one line, TB_EUNSUPPORTED. */
Test(mirrored_offhost, describe_default_replicas_and_sync_bn, .init = register_doubles, .timeout = 60)
{
    struct setup S;
    char d[512];
    cr_assert_eq(setup_init(&S, "offhost-staged", 2, 8, OPTIM_ADAM, 0), TB_OK, "%s", tb_error_get());
    backend_describe(&S.b, d, sizeof d);
    cr_assert(strstr(d, "2 offhost-staged replicas") && strstr(d, "ring all-reduce of host copies") &&
                  strstr(d, "has no gradient collective"), "%s", d);
    setup_free(&S);
    cr_assert_eq(setup_init(&S, "offhost-group", 0, 12, OPTIM_ADAM, 0), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_n_devices(&S.b), 3, "the device's count of instances");
    backend_describe(&S.b, d, sizeof d);
    cr_assert(strstr(d, "3 offhost-group replicas") && strstr(d, "test collective"), "%s", d);
    cr_assert(!strstr(d, "sharded"), "no sharded update off the host: %s", d);
    setup_free(&S);
    const int st = setup_init(&S, "offhost-group", 2, 8, OPTIM_ADAM, 1);
    cr_assert_eq(st, TB_EUNSUPPORTED);
    cr_assert(strstr(tb_error_get(), "--sync-bn") && !strchr(tb_error_get(), '\n'), "%s", tb_error_get());
    setup_free(&S);
}

/* ---- --prefetch through the harness's step loop ---- */

/* A quiet in-process train run of mirrored on the group double; returns the final parameters' file. */
static void prefetch_run(const char *prefetch, const char *save)
{
    struct bench_config c;
    char p[192];
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "backend", "mirrored"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "device", "offhost-group"), TB_OK, "%s", tb_error_get());
    cr_assert_eq(bench_config_set(&c, "devices", "2"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "plan", "train"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "batch", "8"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "steps", "6"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "mllog", "none"), TB_OK);
    if (prefetch) cr_assert_eq(bench_config_set(&c, "prefetch", prefetch), TB_OK);
    cr_assert_eq(bench_config_set(&c, "save", th_path(p, sizeof p, save)), TB_OK);
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_config_finish(&c), TB_OK, "%s", tb_error_get());
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
}

/* The parameters a run saved (the file's metadata records the run's options, so not its bytes). */
static float *saved_params(const char *name, const struct model *m)
{
    char p[192];
    float *params = tu_fvec(m->n_params), *buffers = tu_fvec(m->n_buffers);
    cr_assert_eq(checkpoint_load(th_path(p, sizeof p, name), m, params, buffers), TB_OK, "%s", tb_error_get());
    free(buffers);
    return params;
}

Test(mirrored_offhost, prefetch_hands_each_step_over_ahead_bitwise, .init = register_doubles, .fini = th_teardown,
     .timeout = 120)
{
    th_setup();
    prefetch_run("0", "none.safetensors");
    cr_assert_eq(puts_total, 0, "--prefetch 0 hands nothing over ahead");
    prefetch_run(NULL, "ahead.safetensors");
    /* Every step but the first of each run of steps: 2 replicas × at least 5 of the 6 steps. */
    cr_assert_geq(puts_total, 10, "passes handed over ahead: %d", puts_total);
    cr_assert_eq(hits, puts_total, "each taken by its own pass (%d of %d)", hits, puts_total);
    cr_assert_eq(stale, 0, "the harness changed a batch it had handed over");
    cr_assert_eq(n_ahead, 0, "handed over and never run");
    struct model m;
    struct workload_opts o = {.classes = 10, .in_h = IMG, .in_w = IMG, .in_c = 1, .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_mnist_mlp.build(&m, &o), TB_OK, "%s", tb_error_get());
    float *a = saved_params("none.safetensors", &m), *b = saved_params("ahead.safetensors", &m);
    tu_assert_bitwise(b, a, m.n_params, "parameters with --prefetch against --prefetch 0");
    free(a), free(b);
    model_free(&m);
}
