/* test_executor.c — the executor contract (core/executor.h), for every device in the registry.
 *
 * One parameterized instance per registered device (a new device is tested automatically), on the MNIST
 * MLP and on EfficientNet-B0 at 16×16 (BatchNorm running statistics, every op kind but GroupNorm, forced
 * im2col so nothing is autotuned), with 1 and 2 threads:
 *   - create/destroy: the planned configuration (device, eval batch) and a destroy that is safe twice;
 *     an unknown device fails with TB_EINVAL and the valid names listed;
 *   - get/set of every tensor family round-trips bitwise, and the families are distinct storage;
 *   - the gradient buffer handle is TF_GRADS: same size, same contents both ways, stable pointer;
 *   - forward + backward over [0,L) in one pass equals, bitwise (loss, gradients, running statistics),
 *     forward [0,k), forward [k,L), backward [k,L), backward [0,k), at every split of the MLP and at
 *     every block boundary of EfficientNet; a forward that stops before the loss layer reports loss 0;
 *   - an update in parts k of K (every k, K = 2, 3, 7) equals the whole update bitwise for SGD with
 *     momentum and Adam with weight decay, and each part writes only its slice;
 *   - the fused train step (batch-1 MLP, Adam) equals zero + forward/backward + update bitwise;
 *   - a run of steps (2 steps one at a time, then executor_stage_steps from step 3 once,
 *     executor_run_steps in runs of 5, 1 and 6: the device's loop where it has one, cuda's captured step;
 *     else executor.c's default, whose sample offsets and step numbers are then what is checked) equals
 *     executor_step step by step, bitwise, at batch 1 and 4;
 *   - supports() answers every op kind (cpu: all of them) and refuses out-of-range kinds;
 *   - stats: profile, trace and convolution algorithms when asked for, NULL when not;
 *   - stage executors (layer ranges with slots, segments and recomputation where the device has them,
 *     boundaries exported and imported packed) give the whole executor's bits; the optimizer's initial
 *     state is the executor's.
 * A device that cannot run a model here (cuda without a GPU, or a layer kind it lacks) refuses at create
 * with TB_EUNSUPPORTED; its tests then report themselves skipped with that reason (device_runs).
 * Threaded cases carry a timeout so a deadlocked pool fails instead of hanging.
 */
#include "test_util.h"

#include <criterion/parameterized.h>

#include "dataset.h"
#include "executor.h"
#include "layout.h"
#include "model_range.h"
#include "status.h"
#include "workload.h"

enum { IMG = 28, EFF_RES = 16 };

/* A model, its seeded initial state and a synthetic set to run it on. */
struct fixture {
    struct model m;
    struct dataset ds;
    int32_t *y;       /* (ds.n) */
    float *params, *buffers;
    int effnet;
};

static void fixture_init(struct fixture *f, int effnet, int n)
{
    memset(f, 0, sizeof *f);
    f->effnet = effnet;
    const struct workload *w = effnet ? workload_find("effnet-b0") : &workload_mnist_mlp;
    cr_assert_not_null(w, "%s", tb_error_get());
    struct workload_opts o = {.classes = 10, .in_h = effnet ? EFF_RES : IMG, .in_w = effnet ? EFF_RES : IMG,
                              .in_c = effnet ? 3 : 1, .resolution = effnet ? EFF_RES : 0, .dropout = -1,
                              .drop_connect = -1};
    if (effnet) snprintf(o.norm, sizeof o.norm, "batch");
    cr_assert_eq(w->build(&f->m, &o), TB_OK, "%s build: %s", w->name, tb_error_get());
    cr_assert_eq(dataset_synthetic(n, o.in_h, o.in_w, o.in_c, 10, 7, 1, &f->ds), TB_OK, "%s", tb_error_get());
    f->y = malloc((size_t)n * sizeof *f->y);
    cr_assert_not_null(f->y);
    for (int i = 0; i < n; i++) f->y[i] = f->ds.labels[i];
    f->params = tu_fvec(f->m.n_params);
    f->buffers = tu_fvec(f->m.n_buffers);
    w->init(&f->m, f->params, f->buffers, 42);
}

static void fixture_free(struct fixture *f)
{
    free(f->params), free(f->buffers), free(f->y);
    dataset_free(&f->ds);
    model_free(&f->m);
}

static struct executor_config config(const char *device, int threads, int n_max, enum optim_kind kind)
{
    struct executor_config c = {.device = device, .threads = threads, .n_max = n_max, .seed = 42};
    optim_config_defaults(&c.optim, kind);
    c.optim.total_steps = 20;
    snprintf(c.conv_algo, sizeof c.conv_algo, "im2col"); /* no autotuning: the same algorithms every run */
    return c;
}

/* Loads a created ex with f's initial parameters and buffers and zero optimizer state. */
static void ex_load(struct executor *ex, const struct fixture *f)
{
    cr_assert_eq(executor_set_tensors(ex, TF_PARAMS, f->params), TB_OK, "%s", tb_error_get());
    if (f->m.n_buffers) cr_assert_eq(executor_set_tensors(ex, TF_BUFFERS, f->buffers), TB_OK, "%s", tb_error_get());
    float *opt = tu_fvec(f->m.n_params * (size_t)optim_state_per_param(ex->cfg.optim.kind));
    cr_assert_eq(executor_set_tensors(ex, TF_OPT, opt), TB_OK, "%s", tb_error_get());
    free(opt);
}

/* Creates ex for f under c, loaded with f's initial parameters and buffers and zero optimizer state. */
static void ex_init(struct executor *ex, const struct fixture *f, const struct executor_config *c)
{
    cr_assert_eq(executor_create(ex, &f->m, c), TB_OK, "executor_create(%s): %s", c->device, tb_error_get());
    ex_load(ex, f);
}

static size_t family_floats(const struct executor *ex, enum tensor_family fam)
{
    return tensor_family_floats(ex->m, ex->cfg.optim.kind, fam);
}

/* A malloc'd copy of family fam. */
static float *family_get(struct executor *ex, enum tensor_family fam)
{
    float *p = tu_fvec(family_floats(ex, fam));
    cr_assert_eq(executor_get_tensors(ex, fam, p), TB_OK, "%s", tb_error_get());
    return p;
}

/* pa and pb (n floats of family fam) bitwise equal, but for elements [x0, x1), which must agree within float
 * rounding (relative 2-norm distance 1e-5; x0 == x1: none exempt). */
static void assert_floats_bitwise_but(const float *pa, const float *pb, size_t n, enum tensor_family fam,
                                      const char *what, size_t x0, size_t x1)
{
    cr_assert(x0 <= x1 && x1 <= n, "%s: exempt range [%zu, %zu) of %zu elements", what, x0, x1, n);
    char w[256];
    snprintf(w, sizeof w, "%s: family %d, elements", what, (int)fam);
    tu_assert_bitwise(pa, pb, x1 > x0 ? x0 : n, w);
    if (x1 > x0) {
        snprintf(w, sizeof w, "%s: family %d, elements from %zu", what, (int)fam, x1);
        tu_assert_bitwise(pa + x1, pb + x1, n - x1, w);
        const double d = tu_rel_dist(pa + x0, pb + x0, x1 - x0);
        cr_assert(d <= 1e-5, "%s: family %d elements [%zu, %zu): relative distance %.3g", what, (int)fam, x0, x1, d);
    }
}

/* Family fam of a and b bitwise equal. */
static void assert_family_bitwise(struct executor *a, struct executor *b, enum tensor_family fam, const char *what)
{
    float *pa = family_get(a, fam), *pb = family_get(b, fam);
    assert_floats_bitwise_but(pa, pb, family_floats(a, fam), fam, what, 0, 0);
    free(pa), free(pb);
}

/* One training pass of samples [0,n) of f at step 1. */
static struct executor_pass train_pass(const struct fixture *f, int n, int l0, int l1)
{
    return (struct executor_pass){.n = n, .n_global = n, .step = 1, .x = f->ds.images, .y = f->y, .training = 1,
                                  .l0 = l0, .l1 = l1};
}

/* Indices into executor_devices, one test instance each. */
static int device_indices[64];

static int device_params(void)
{
    int n;
    executor_devices(&n);
    cr_assert_leq(n, 64);
    for (int k = 0; k < n; k++) device_indices[k] = k;
    return n;
}

static const char *device_name(int k)
{
    int n;
    return executor_devices(&n)[k].name;
}

/* Whether device k runs f's model here; if not, why (the device's own message) into why. A device that
 * needs hardware this machine lacks (cuda without a GPU) or a layer kind it does not implement yet
 * refuses at create with TB_EUNSUPPORTED: its tests report themselves skipped with that reason, never
 * passed. Any other failure fails the test. */
static int device_runs(const struct fixture *f, int k, char *why, size_t n)
{
    struct executor_config c = config(device_name(k), 1, 4, OPTIM_ADAM);
    struct executor ex;
    const int st = executor_create(&ex, &f->m, &c);
    executor_destroy(&ex);
    if (st == TB_EUNSUPPORTED) {
        snprintf(why, n, "device %s cannot run %s here: %s", device_name(k), f->m.name, tb_error_get());
        return 0;
    }
    cr_assert_eq(st, TB_OK, "executor_create(%s): %s", device_name(k), tb_error_get());
    return 1;
}

/* Skips the calling test (freeing its fixture) unless device k runs f's model here. */
#define SKIP_UNLESS_RUNS(f, k)                              \
    do {                                                    \
        char why_[320];                                     \
        if (!device_runs(f, k, why_, sizeof why_)) {        \
            fixture_free(f);                                \
            cr_skip_test("%s", why_);                       \
        }                                                   \
    } while (0)

/* device_runs's probe kept as the test's own executor: creates ex for f under c and returns 1, or 0 with why (the
 * device's message) where the device says TB_EUNSUPPORTED; any other failure fails the test. An EfficientNet
 * executor's creation is a few tenths of a CPU-second under ASan, so a test whose first executor has the probe's
 * configuration makes one, not two. */
static int ex_create_if_runs(struct executor *ex, const struct fixture *f, const struct executor_config *c, char *why,
                             size_t n)
{
    const int st = executor_create(ex, &f->m, c);
    if (st == TB_EUNSUPPORTED) {
        snprintf(why, n, "device %s cannot run %s here: %s", c->device, f->m.name, tb_error_get());
        executor_destroy(ex);
        return 0;
    }
    cr_assert_eq(st, TB_OK, "executor_create(%s): %s", c->device, tb_error_get());
    return 1;
}

TestSuite(executor, .timeout = 120);

Test(executor, registry_lists_cpu_and_refuses_unknown)
{
    int n;
    const struct executor_device *d = executor_devices(&n);
    cr_assert_geq(n, 1);
    int cpu = 0;
    for (int k = 0; k < n; k++) {
        cr_assert(d[k].name && d[k].name[0] && d[k].summary && d[k].summary[0] && d[k].create, "entry %d", k);
        for (int j = 0; j < k; j++) cr_assert_str_neq(d[j].name, d[k].name, "device %s listed twice", d[k].name);
        cpu += strcmp(d[k].name, "cpu") == 0;
    }
    cr_assert_eq(cpu, 1, "no cpu device");
    struct fixture f;
    fixture_init(&f, 0, 4);
    struct executor ex;
    struct executor_config c = config("no-such-device", 1, 4, OPTIM_ADAM);
    cr_assert_eq(executor_create(&ex, &f.m, &c), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "no-such-device") && strstr(tb_error_get(), "cpu"), "message: %s",
              tb_error_get());
    cr_assert_null(ex.i);
    executor_destroy(&ex); /* safe on a failed create */
    fixture_free(&f);
}

ParameterizedTestParameters(executor, create_destroy)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, create_destroy)
{
    struct fixture f;
    fixture_init(&f, 0, 8);
    SKIP_UNLESS_RUNS(&f, *k);
    for (int threads = 1; threads <= 2; threads++) {
        struct executor ex;
        struct executor_config c = config(device_name(*k), threads, 8, OPTIM_ADAM);
        ex_init(&ex, &f, &c);
        cr_assert_not_null(ex.i);
        cr_assert_str_eq(ex.cfg.device, device_name(*k));
        cr_assert_eq(ex.cfg.eval_batch, 8, "eval_batch 0 resolves to n_max");
        cr_assert_eq(ex.cfg.threads, threads);
        cr_assert_eq(ex.m, &f.m);
        cr_assert_eq(executor_synchronize(&ex), TB_OK);
        executor_destroy(&ex);
        cr_assert_null(ex.i, "destroy leaves a zeroed executor");
        cr_assert_null(ex.ctx);
        executor_destroy(&ex); /* and again */
    }
    fixture_free(&f);
}

ParameterizedTestParameters(executor, tensors_round_trip)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, tensors_round_trip)
{
    struct fixture f;
    fixture_init(&f, 1, 4);
    struct executor ex;
    struct executor_config c = config(device_name(*k), 1, 4, OPTIM_ADAM);
    char why[320];
    if (!ex_create_if_runs(&ex, &f, &c, why, sizeof why)) { /* EfficientNet not on this device yet: the MLP's families */
        cr_log_info("%s: the MLP's tensors instead (no buffers)", why);
        fixture_free(&f);
        fixture_init(&f, 0, 4);
        SKIP_UNLESS_RUNS(&f, *k);
        cr_assert_eq(executor_create(&ex, &f.m, &c), TB_OK, "%s", tb_error_get());
    }
    cr_assert(f.m.n_buffers > 0 || !f.effnet);
    const enum tensor_family fams[4] = {TF_PARAMS, TF_GRADS, TF_OPT, TF_BUFFERS};
    float *want[4];
    for (int j = 0; j < 4; j++) { /* distinct patterns, set in turn: each family is its own storage */
        const size_t n = family_floats(&ex, fams[j]);
        want[j] = tu_fvec(n);
        /* j + 1 plus a fraction that cycles: no two families alike (a seeded normal draw per element was a fifth
         * of the test under ASan, for EfficientNet's 16 M floats) */
        for (size_t i = 0; i < n; i++) want[j][i] = (float)(j + 1) + (float)(i % 1021) / 1024.0f;
        cr_assert_eq(executor_set_tensors(&ex, fams[j], want[j]), TB_OK, "%s", tb_error_get());
    }
    for (int j = 0; j < 4; j++) {
        const size_t n = family_floats(&ex, fams[j]);
        float *got = family_get(&ex, fams[j]);
        cr_assert(memcmp(got, want[j], n * sizeof(float)) == 0, "family %d does not round-trip", (int)fams[j]);
        free(got), free(want[j]);
    }
    executor_destroy(&ex);
    fixture_free(&f);
}

ParameterizedTestParameters(executor, grad_buffer_is_tf_grads)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, grad_buffer_is_tf_grads)
{
    struct fixture f;
    fixture_init(&f, 0, 8);
    SKIP_UNLESS_RUNS(&f, *k);
    struct executor ex;
    struct executor_config c = config(device_name(*k), 2, 8, OPTIM_ADAM);
    ex_init(&ex, &f, &c);
    struct executor_buffer b, b2;
    cr_assert_eq(executor_grad_buffer(&ex, &b), TB_OK, "%s", tb_error_get());
    cr_assert_eq(b.n, f.m.n_params);
    cr_assert_not_null(b.data);
    if (!b.host) {
        cr_log_info("device %s keeps its gradients off the host: contents not compared", device_name(*k));
    } else {
        /* After a real pass: the buffer holds what get_tensors reads. */
        executor_zero_grads(&ex);
        const struct executor_pass p = train_pass(&f, 8, 0, 0);
        double loss;
        cr_assert_eq(executor_forward_backward(&ex, &p, &loss), TB_OK, "%s", tb_error_get());
        float *g = family_get(&ex, TF_GRADS);
        cr_assert(memcmp(g, b.data, b.n * sizeof(float)) == 0, "buffer differs from TF_GRADS after a pass");
        /* Writes through the buffer are what get_tensors reads, and set_tensors lands in the buffer. */
        tu_fill_normal(b.data, b.n, 5, 0.0f, 1.0f);
        float *g2 = family_get(&ex, TF_GRADS);
        cr_assert(memcmp(g2, b.data, b.n * sizeof(float)) == 0, "a write through the buffer is not TF_GRADS");
        cr_assert_eq(executor_set_tensors(&ex, TF_GRADS, g), TB_OK);
        cr_assert(memcmp(g, b.data, b.n * sizeof(float)) == 0, "set_tensors(TF_GRADS) not seen in the buffer");
        free(g), free(g2);
    }
    cr_assert_eq(executor_buffer(&ex, TF_GRADS, &b2), TB_OK);
    cr_assert_eq(b2.data, b.data, "the handle moved");
    cr_assert_eq(executor_buffer(&ex, TF_PARAMS, &b2), TB_OK);
    cr_assert_neq(b2.data, b.data, "params and gradients share storage");
    executor_destroy(&ex);
    fixture_free(&f);
}

/* The whole model's forward+backward of samples [0,n) on `threads` threads, from a fresh executor: its loss and
 * the families a split pass must reproduce. It is a function of (model, device, threads, n) alone, so each walk of
 * the cut points runs it once rather than once a cut (EfficientNet's 4 M parameters made each executor's
 * creation and tensor copies, not the arithmetic, the walk's cost). */
struct whole_pass {
    double loss;
    float *grads, *buffers, *params; /* (n_params), (n_buffers; NULL without), (n_params) */
};

/* The whole pass of w on a (created and loaded under threads and n), which it destroys. */
static void whole_pass_on(struct whole_pass *w, struct executor *a, const struct fixture *f, int n)
{
    executor_zero_grads(a);
    struct executor_pass whole = train_pass(f, n, 0, 0);
    cr_assert_eq(executor_forward_backward(a, &whole, &w->loss), TB_OK, "%s", tb_error_get());
    cr_assert_gt(w->loss, 0.0);
    w->grads = family_get(a, TF_GRADS);
    w->buffers = f->m.n_buffers ? family_get(a, TF_BUFFERS) : NULL;
    w->params = family_get(a, TF_PARAMS);
    executor_destroy(a);
}

static void whole_pass_run(struct whole_pass *w, const struct fixture *f, const char *device, int threads, int n)
{
    struct executor_config c = config(device, threads, n, OPTIM_ADAM);
    struct executor a;
    ex_init(&a, f, &c);
    whole_pass_on(w, &a, f, n);
}

/* whole_pass_run through ex_create_if_runs: 0 and why where the device cannot run f's model, else 1 with w filled. */
static int whole_pass_try(struct whole_pass *w, const struct fixture *f, const char *device, int threads, int n,
                          char *why, size_t why_n)
{
    struct executor_config c = config(device, threads, n, OPTIM_ADAM);
    struct executor a;
    if (!ex_create_if_runs(&a, f, &c, why, why_n)) return 0;
    ex_load(&a, f);
    whole_pass_on(w, &a, f, n);
    return 1;
}

static void whole_pass_free(struct whole_pass *w)
{
    free(w->grads), free(w->buffers), free(w->params);
}

/* The whole model's forward+backward (w, on the same threads and samples) against the same work split at layer
 * k, on a fresh executor. Bitwise, but for a split between a BatchNorm+SiLU and the depthwise convolution that
 * reads it (EfficientNet's stem and block 1): the whole model takes that convolution's weight gradient from the
 * rows the BatchNorm's backward stream recomputes (exec.c's dw_params_in_bn), summed in another order than the
 * separate kernel's that the split runs, so that gradient agrees within rounding and the rest bitwise. */
static void check_split(const struct fixture *f, const struct whole_pass *w, const char *device, int threads, int n,
                        int k)
{
    const int L = f->m.n_layers;
    struct executor_config c = config(device, threads, n, OPTIM_ADAM);
    struct executor b;
    ex_init(&b, f, &c);
    double lb = -1.0, lb2 = -1.0;
    executor_zero_grads(&b);
    const struct executor_pass lo = train_pass(f, n, 0, k), hi = train_pass(f, n, k, L);
    cr_assert_eq(executor_forward(&b, &lo, &lb), TB_OK, "%s", tb_error_get());
    cr_assert_eq(lb, 0.0, "a forward that stops before the loss layer reports a loss");
    cr_assert_eq(executor_forward(&b, &hi, &lb2), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_backward(&b, &hi), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_backward(&b, &lo), TB_OK, "%s", tb_error_get());
    char what[96];
    snprintf(what, sizeof what, "%s, %d thread(s), split at layer %d of %d", f->m.name, threads, k, L);
    cr_assert(memcmp(&w->loss, &lb2, sizeof lb2) == 0, "%s: loss %.17g whole, %.17g split", what, w->loss, lb2);
    const struct layer *p = &f->m.layers[k - 1], *d = &f->m.layers[k];
    const int cut = p->op == OP_BN && p->act == ACT_SILU && d->op == OP_DWCONV && d->in == p->out;
    const enum tensor_family fams[3] = {TF_GRADS, TF_BUFFERS, TF_PARAMS};
    const float *want[3] = {w->grads, w->buffers, w->params};
    for (int j = 0; j < 3; j++) {
        if (fams[j] == TF_BUFFERS && !f->m.n_buffers) continue;
        float *got = family_get(&b, fams[j]);
        const size_t x0 = j == 0 && cut ? d->w_off : 0, x1 = j == 0 && cut ? d->w_off + d->n_w : 0;
        assert_floats_bitwise_but(want[j], got, family_floats(&b, fams[j]), fams[j], what, x0, x1);
        free(got);
    }
    executor_destroy(&b);
}

ParameterizedTestParameters(executor, layer_ranges_bitwise_whole)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, layer_ranges_bitwise_whole)
{
    struct fixture f;
    fixture_init(&f, 0, 8);
    SKIP_UNLESS_RUNS(&f, *k);
    struct whole_pass w;
    for (int threads = 1; threads <= 2; threads++) {
        whole_pass_run(&w, &f, device_name(*k), threads, 8);
        for (int s = 1; s < f.m.n_layers; s++) check_split(&f, &w, device_name(*k), threads, 8, s);
        whole_pass_free(&w);
    }
    fixture_free(&f);
    fixture_init(&f, 1, 4);
    char why[320];
    /* the 1-thread whole pass's executor is device_runs's probe (whole_pass_try) */
    if (!whole_pass_try(&w, &f, device_name(*k), 1, 4, why, sizeof why)) {
        cr_log_info("%s", why); /* the MLP's splits ran; EfficientNet's wait for the device */
        fixture_free(&f);
        return;
    }
    /* Under ASan every TU_ASAN_STRIDE-th block boundary, each of those on one thread count, 1 and 2 in turn (the
     * stem's cut, whose depthwise gradient is exempt, on 1): a cut runs the same kernels on either, and each count
     * still crosses three cuts; the main build walks every boundary on both. */
    int splits = 0;
    for (int threads = 1; threads <= 2; threads++) {
        if (threads > 1) whole_pass_run(&w, &f, device_name(*k), threads, 4);
        splits = 0;
        for (int s = 1; s < f.m.n_layers; s++) {
            if (f.m.layers[s].block == f.m.layers[s - 1].block) continue;
            const int i = splits++;
            if (i % TU_ASAN_STRIDE == 0 && (!TU_UNDER_ASAN || i / TU_ASAN_STRIDE % 2 == threads - 1))
                check_split(&f, &w, device_name(*k), threads, 4, s);
        }
        whole_pass_free(&w);
    }
    cr_assert_geq(splits, 8, "effnet-b0 has only %d block boundaries", splits);
    fixture_free(&f);
}

/* An update in `parts` parts against the whole update, from the same random gradients and state. */
static void check_update_parts(const struct fixture *f, const char *device, const struct optim_config *oc, int parts)
{
    struct executor_config c = config(device, 1, 4, oc->kind);
    c.optim = *oc;
    struct executor a, b;
    ex_init(&a, f, &c);
    ex_init(&b, f, &c);
    const size_t np = f->m.n_params, no = family_floats(&a, TF_OPT);
    float *g = tu_fvec(np), *o = tu_fvec(no);
    tu_fill_normal(g, np, 11, 0.0f, 0.1f);
    tu_fill_uniform(o, no, 12, 0.0f, 0.01f); /* Adam's v must be ≥ 0: uniform non-negative state */
    struct executor *both[2] = {&a, &b};
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(executor_set_tensors(both[e], TF_GRADS, g), TB_OK);
        cr_assert_eq(executor_set_tensors(both[e], TF_OPT, o), TB_OK);
    }
    cr_assert_eq(executor_update(&a, 3), TB_OK, "%s", tb_error_get());
    for (int part = 0; part < parts; part++) {
        float *before = family_get(&b, TF_PARAMS);
        cr_assert_eq(executor_update_part(&b, 3, part, parts), TB_OK, "%s", tb_error_get());
        float *after = family_get(&b, TF_PARAMS);
        size_t lo, hi;
        tb_slice(np, part, parts, &lo, &hi);
        char w[128];
        snprintf(w, sizeof w, "part %d of %d wrote outside its slice [%zu,%zu): parameters", part, parts, lo, hi);
        tu_assert_bitwise(after, before, lo, w);
        snprintf(w, sizeof w, "part %d of %d wrote outside its slice [%zu,%zu): parameters from %zu", part, parts, lo,
                 hi, hi);
        tu_assert_bitwise(after + hi, before + hi, np - hi, w);
        free(before), free(after);
    }
    char what[80];
    snprintf(what, sizeof what, "%s update in %d parts vs whole", optim_name(oc->kind), parts);
    assert_family_bitwise(&a, &b, TF_PARAMS, what);
    assert_family_bitwise(&a, &b, TF_OPT, what);
    free(g), free(o);
    executor_destroy(&a), executor_destroy(&b);
}

ParameterizedTestParameters(executor, update_parts_bitwise_whole)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, update_parts_bitwise_whole)
{
    struct fixture f;
    fixture_init(&f, 0, 4);
    SKIP_UNLESS_RUNS(&f, *k);
    struct optim_config sgd, adam;
    optim_config_defaults(&sgd, OPTIM_SGD);
    sgd.momentum = 0.9f;
    optim_config_defaults(&adam, OPTIM_ADAM);
    adam.weight_decay = 1e-3f;
    const int parts[] = {1, 2, 3, 7};
    for (int j = 0; j < 4; j++) {
        check_update_parts(&f, device_name(*k), &sgd, parts[j]);
        check_update_parts(&f, device_name(*k), &adam, parts[j]);
    }
    fixture_free(&f);
}

ParameterizedTestParameters(executor, fused_step_bitwise_unfused)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, fused_step_bitwise_unfused)
{
    struct fixture f;
    fixture_init(&f, 0, 8);
    SKIP_UNLESS_RUNS(&f, *k);
    for (int threads = 1; threads <= 2; threads++) {
        struct executor_config cf = config(device_name(*k), threads, 1, OPTIM_ADAM), cu = cf;
        cu.no_fuse = 1;
        struct executor a, b;
        /* The cuda device's fused step is by default its persistent kernel, whose sums run in another order
         * (test_cuda checks it within rounding of this one); the captured graph's step is the unfused arithmetic. */
        setenv("TB_CUDA_LOOP", "graph", 1);
        ex_init(&a, &f, &cf);
        unsetenv("TB_CUDA_LOOP");
        ex_init(&b, &f, &cu);
        cr_assert(!b.fused_step, "no_fuse still offers the fused step");
        if (!a.fused_step) {
            cr_log_info("device %s has no fused batch-1 step", device_name(*k));
        } else {
            const size_t per = (size_t)IMG * IMG;
            for (int s = 1; s <= 6; s++) {
                struct executor_pass p = {.n = 1, .n_global = 1, .step = s, .x = f.ds.images + (size_t)(s - 1) * per,
                                          .y = f.y + s - 1, .training = 1};
                double la, lb;
                cr_assert_eq(executor_train_step(&a, &p, &la), TB_OK, "%s", tb_error_get());
                executor_zero_grads(&b);
                cr_assert_eq(executor_forward_backward(&b, &p, &lb), TB_OK, "%s", tb_error_get());
                cr_assert_eq(executor_update(&b, s), TB_OK);
                cr_assert(memcmp(&la, &lb, sizeof la) == 0, "step %d: loss %.17g fused, %.17g unfused", s, la, lb);
            }
            executor_finish(&a);
            assert_family_bitwise(&a, &b, TF_PARAMS, "fused vs unfused");
            assert_family_bitwise(&a, &b, TF_OPT, "fused vs unfused");
        }
        executor_destroy(&a), executor_destroy(&b);
    }
    fixture_free(&f);
}

ParameterizedTestParameters(executor, run_steps_bitwise_steps)
{
    return cr_make_param_array(int, device_indices, device_params());
}

/* Where the device has no loop of its own (cpu), what runs is executor.c's default, a loop of
 * executor_step: the check is then that it takes each step's samples at the right offset of the staged
 * set and numbers the steps from the staged first step. The staged set starts after WARM steps run one
 * at a time (the harness stages span after span), so an offset or a step number counted from step 1
 * rather than from the staged first step shows. */
ParameterizedTest(int *k, executor, run_steps_bitwise_steps)
{
    enum { STEPS = 12, WARM = 2 };
    struct fixture f;
    fixture_init(&f, 0, (WARM + STEPS) * 4);
    SKIP_UNLESS_RUNS(&f, *k);
    const size_t per = (size_t)IMG * IMG;
    for (int b = 1; b <= 4; b += 3) {
        struct executor_config c = config(device_name(*k), 1, b, OPTIM_ADAM);
        struct executor run, each;
        ex_init(&run, &f, &c);
        ex_init(&each, &f, &c);
        cr_log_info("device %s, batch %d: %s", device_name(*k), b,
                    run.loop_steps ? "its own loop" : "the default run of steps");
        double lr[WARM + STEPS], le[WARM + STEPS];
        for (int s = 1; s <= WARM; s++) {
            const struct executor_pass p = {.n = b, .n_global = b, .step = s,
                                            .x = f.ds.images + (size_t)(s - 1) * b * per, .y = f.y + (s - 1) * b,
                                            .training = 1};
            cr_assert_eq(executor_step(&run, &p, &lr[s - 1]), TB_OK, "%s", tb_error_get());
        }
        cr_assert_eq(executor_stage_steps(&run, WARM + 1, STEPS, f.ds.images + (size_t)WARM * b * per,
                                          f.y + WARM * b),
                     TB_OK, "%s", tb_error_get());
        static const long runs[] = {5, 1, 6};
        for (long r = 0, at = WARM + 1; r < 3; at += runs[r++]) {
            long done = -1;
            cr_assert_eq(executor_run_steps(&run, at, runs[r], lr + at - 1, &done), TB_OK, "%s", tb_error_get());
            cr_assert_eq(done, runs[r]);
        }
        for (int s = 1; s <= WARM + STEPS; s++) {
            const struct executor_pass p = {.n = b, .n_global = b, .step = s,
                                            .x = f.ds.images + (size_t)(s - 1) * b * per, .y = f.y + (s - 1) * b,
                                            .training = 1};
            cr_assert_eq(executor_step(&each, &p, &le[s - 1]), TB_OK, "%s", tb_error_get());
            cr_assert(memcmp(&lr[s - 1], &le[s - 1], sizeof(double)) == 0, "batch %d step %d: loss %.17g in a run, "
                      "%.17g alone", b, s, lr[s - 1], le[s - 1]);
        }
        executor_finish(&run), executor_finish(&each);
        assert_family_bitwise(&run, &each, TF_PARAMS, "run of steps vs steps");
        assert_family_bitwise(&run, &each, TF_OPT, "run of steps vs steps");
        executor_destroy(&run), executor_destroy(&each);
    }
    fixture_free(&f);
}

ParameterizedTestParameters(executor, supports_answers)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, supports_answers)
{
    struct fixture f;
    fixture_init(&f, 0, 4);
    SKIP_UNLESS_RUNS(&f, *k);
    struct executor ex;
    struct executor_config c = config(device_name(*k), 1, 4, OPTIM_ADAM);
    ex_init(&ex, &f, &c);
    for (int op = 0; op < OP_COUNT; op++) {
        const int s = executor_supports(&ex, (enum op_kind)op);
        cr_assert(s == 0 || s == 1, "supports(%s) = %d", model_op_name((enum op_kind)op), s);
        if (strcmp(device_name(*k), "cpu") == 0) cr_assert(s, "cpu refuses %s", model_op_name((enum op_kind)op));
    }
    for (int i = 0; i < f.m.n_layers; i++) /* it was created for this model: it runs every layer */
        cr_assert(executor_supports(&ex, f.m.layers[i].op), "layer %s", f.m.layers[i].name);
    cr_assert(!executor_supports(&ex, OP_COUNT));
    cr_assert(!executor_supports(&ex, (enum op_kind)-1));
    executor_destroy(&ex);
    fixture_free(&f);
}

ParameterizedTestParameters(executor, stats_when_asked)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, stats_when_asked)
{
    struct fixture f;
    fixture_init(&f, 1, 4);
    const int L = f.m.n_layers;
    for (int on = 0; on <= 1; on++) {
        struct executor_config c = config(device_name(*k), 1, 4, OPTIM_ADAM);
        c.profile = c.trace = on;
        struct executor ex;
        if (!on) { /* the probe's configuration (ex_create_if_runs) */
            char why[320];
            if (!ex_create_if_runs(&ex, &f, &c, why, sizeof why)) {
                fixture_free(&f);
                cr_skip_test("%s", why);
            }
            ex_load(&ex, &f);
        } else {
            ex_init(&ex, &f, &c);
        }
        executor_trace_begin(&ex, 0.0);
        executor_zero_grads(&ex);
        const struct executor_pass p = train_pass(&f, 4, 0, 0);
        double loss;
        cr_assert_eq(executor_forward_backward(&ex, &p, &loss), TB_OK, "%s", tb_error_get());
        executor_trace_add(&ex, 'A', 1.0, 2.0);
        struct executor_stats s;
        cr_assert_eq(executor_stats(&ex, &s), TB_OK);
        if (!on) {
            cr_assert_null(s.profile, "a profile nobody asked for");
            cr_assert_null(s.trace, "a trace nobody asked for");
            cr_assert_eq(s.n_trace, 0);
        } else {
            /* Every device of this binary (cpu, cuda) records both when asked: a device that stopped fails here. */
            cr_assert(s.profile || s.trace, "device %s asked for a profile and a trace recorded neither",
                      device_name(*k));
            cr_assert_not_null(s.profile);
            double fwd = 0.0, bwd = 0.0;
            for (int i = 0; i < L; i++) fwd += s.profile[2 * i], bwd += s.profile[2 * i + 1];
            cr_assert(fwd > 0.0 && bwd > 0.0, "profile: %g s forward, %g s backward", fwd, bwd);
            cr_assert_not_null(s.trace);
            int F = 0, B = 0;
            for (int e = 0; e < s.n_trace; e++) F += s.trace[e].phase == 'F', B += s.trace[e].phase == 'B';
            cr_assert_eq(F, L, "one forward event a layer");
            cr_assert_gt(B, 0);
            cr_assert_eq(s.trace[s.n_trace - 1].phase, 'A', "the schedule's own event comes last");
            cr_assert_eq(s.trace[s.n_trace - 1].layer, -1);
            cr_assert_eq(s.trace[s.n_trace - 1].t0, 1.0, "events are relative to trace_begin's t0");
        }
        if (s.conv_algos) {
            int convs = 0;
            for (int i = 0; i < L; i++) {
                if (f.m.layers[i].op != OP_CONV) {
                    cr_assert_eq(s.conv_algos[i], -1, "layer %s", f.m.layers[i].name);
                    continue;
                }
                cr_assert_str_eq(exec_conv_algo_names[s.conv_algos[i]], "im2col", "layer %s", f.m.layers[i].name);
                convs++;
            }
            cr_assert_gt(convs, 0);
        }
        executor_destroy(&ex);
    }
    fixture_free(&f);
}

/* Micro-batch i of the two (n / 2 samples each, in slot i) that a stage check runs over n samples. */
static struct executor_pass micro_pass(const struct fixture *f, int n, int i)
{
    const int mb = n / 2;
    const size_t per = f->m.tensors[f->m.input].per_sample;
    return (struct executor_pass){.n = mb, .n_global = n, .first_index = i * mb, .step = 1, .training = 1,
                                  .x = f->ds.images + (size_t)(i * mb) * per, .y = f->y + i * mb, .slot = i};
}

/* The families a stage check compares, in its order: round 0 (the gradients) reads [0, 3), round 1 (after one
 * update) [1, 4). */
static const enum tensor_family stage_fams[4] = {TF_GRADS, TF_PARAMS, TF_BUFFERS, TF_OPT};

/* The whole executor's side of a stage check: its forward + backward of each micro-batch in turn, the loss
 * summed, and family stage_fams[j] before (fam[0][j], j < 3) and after (fam[1][j], j >= 1) one update (NULL
 * for an empty family). A function of (model, device, n) alone: each walk of the cut points runs it once
 * rather than once a cut (an EfficientNet executor's creation and copies of its 4 M parameters are the cost). */
struct whole_steps {
    double loss;
    float *fam[2][4];
};

static void whole_steps_run(struct whole_steps *r, const struct fixture *f, const char *device, int n)
{
    memset(r, 0, sizeof *r);
    struct executor_config c = config(device, 1, n / 2, OPTIM_RMSPROP);
    struct executor whole;
    ex_init(&whole, f, &c);
    executor_zero_grads(&whole);
    for (int i = 0; i < 2; i++) {
        double l;
        struct executor_pass w = micro_pass(f, n, i);
        cr_assert_eq(executor_forward_backward(&whole, &w, &l), TB_OK, "%s", tb_error_get());
        r->loss += l;
    }
    for (int round = 0; round < 2; round++) {
        for (int j = round; j < round + 3; j++)
            if (family_floats(&whole, stage_fams[j])) r->fam[round][j] = family_get(&whole, stage_fams[j]);
        if (!round) cr_assert_eq(executor_update(&whole, 1), TB_OK);
    }
    executor_destroy(&whole);
}

static void whole_steps_free(struct whole_steps *r)
{
    for (int round = 0; round < 2; round++)
        for (int j = 0; j < 4; j++) free(r->fam[round][j]);
}

/* Stage executors (issue 25): layers [0,k) and [k,L) as two stages, two micro-batches in two slots
 * (1F1B's order: forward 0, forward 1, backward 0, backward 1), the boundary exported packed in fp32
 * and imported by the other stage, give the whole executor's loss, gradients and running statistics
 * (its forward + backward of each micro-batch in turn: whole, on the same n samples) bitwise, and the same
 * update; with segments cut at every block boundary and recomputation too. */
static void check_stages(const struct fixture *f, const struct whole_steps *whole, const char *device, int n, int k,
                         int segmented)
{
    const int L = f->m.n_layers, mb = n / 2;
    struct executor_config c = config(device, 1, mb, OPTIM_RMSPROP);
    struct executor st[2];
    int cuts[2][64], nc[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        const int l0 = s ? k : 0, l1 = s ? L : k;
        cuts[s][nc[s]++] = l0;
        for (int i = l0 + 1; i < l1 && segmented; i++)
            if (f->m.layers[i].block != f->m.layers[i - 1].block && nc[s] < 62) cuts[s][nc[s]++] = i;
        cuts[s][nc[s]] = l1;
        struct executor_config sc = c;
        sc.l0 = l0, sc.l1 = l1, sc.slots = 2, sc.recompute = segmented, sc.cuts = segmented ? cuts[s] : NULL;
        sc.n_seg = segmented ? nc[s] : 0;
        ex_init(&st[s], f, &sc);
    }
    executor_zero_grads(&st[0]), executor_zero_grads(&st[1]);
    double ls = 0.0;
    const size_t fa = model_boundary_floats(&f->m, k, mb, 0), fg = model_boundary_floats(&f->m, k, mb, 1);
    float *acts[2] = {tu_fvec(fa + 16), tu_fvec(fa + 16)}, *grads = tu_fvec(fg + 16);
    struct executor_pass p[2];
    for (int i = 0; i < 2; i++) p[i] = micro_pass(f, n, i);
    for (int i = 0; i < 2; i++) { /* forward of both micro-batches through stage 0, exported */
        struct executor_pass a = p[i];
        a.l0 = 0, a.l1 = k;
        double l;
        cr_assert_eq(executor_forward(&st[0], &a, &l), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_export_boundary(&st[0], 0, i, acts[i], mb, STAGE_PREC_FP32, 1.0f), 0);
    }
    for (int i = 0; i < 2; i++) {
        struct executor_pass a = p[i], b = p[i];
        a.l0 = 0, a.l1 = k, a.x = NULL, a.y = NULL;
        b.l0 = k, b.l1 = L, b.x = NULL;
        double l;
        cr_assert_eq(executor_import_boundary(&st[1], 0, acts[i], mb, STAGE_PREC_FP32, 1.0f), 0);
        cr_assert_eq(executor_forward(&st[1], &b, &l), TB_OK, "%s", tb_error_get());
        ls += l;
        cr_assert_eq(executor_backward(&st[1], &b), TB_OK, "%s", tb_error_get());
        if (fg) {
            cr_assert_eq(executor_export_boundary(&st[1], 1, i, grads, mb, STAGE_PREC_FP32, 1.0f), 0);
            cr_assert_eq(executor_import_boundary(&st[0], 1, grads, mb, STAGE_PREC_FP32, 1.0f), 0);
        }
        cr_assert_eq(executor_backward(&st[0], &a), TB_OK, "%s", tb_error_get());
    }
    char what[128];
    snprintf(what, sizeof what, "%s, stages [0,%d) [%d,%d)%s", f->m.name, k, k, L, segmented ? ", segments" : "");
    cr_assert(memcmp(&whole->loss, &ls, sizeof ls) == 0, "%s: loss %.17g whole, %.17g stages", what, whole->loss, ls);
    for (int round = 0; round < 2; round++) { /* the gradients, then the state after one update */
        for (int j = round; j < round + 3; j++) { /* round 0: grads, params, buffers; 1: params, buffers, opt */
            const enum tensor_family fam = stage_fams[j];
            const size_t nf = family_floats(&st[0], fam);
            if (!nf) continue;
            const float *a = whole->fam[round][j];
            float *b = tu_fvec(nf);
            for (int s = 0; s < 2; s++) cr_assert_eq(executor_get_tensors(&st[s], fam, b), TB_OK, "%s", tb_error_get());
            for (int e = 0; e < f->m.n_entries; e++) {
                const struct param_entry *pe = &f->m.params[e];
                const int is_buf = pe->kind == PARAM_BUFFER || pe->kind == PARAM_COUNTER;
                if (is_buf != (fam == TF_BUFFERS)) continue;
                for (size_t base = 0; base < nf; base += fam == TF_BUFFERS ? nf : f->m.n_params) {
                    char w[400];
                    snprintf(w, sizeof w, "%s: family %d (round %d), whole vs stages: %s", what, (int)fam, round,
                             pe->name);
                    tu_assert_bitwise(&a[base + pe->off], &b[base + pe->off], pe->n, w);
                }
            }
            free(b);
        }
        if (!round)
            for (int s = 0; s < 2; s++) cr_assert_eq(executor_update(&st[s], 1), TB_OK);
    }
    free(acts[0]), free(acts[1]), free(grads);
    executor_destroy(&st[0]), executor_destroy(&st[1]);
}

ParameterizedTestParameters(executor, stages_bitwise_whole)
{
    return cr_make_param_array(int, device_indices, device_params());
}

/* Whether device k makes stage executors (a device may refuse them with TB_EUNSUPPORTED). */
static int device_has_stages(const struct fixture *f, int k)
{
    struct executor_config c = config(device_name(k), 1, 4, OPTIM_SGD);
    c.l0 = 0, c.l1 = f->m.n_layers;
    struct executor ex;
    const int st = executor_create(&ex, &f->m, &c);
    executor_destroy(&ex);
    if (st == TB_EUNSUPPORTED) return 0;
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    return 1;
}

/* Whether device k's stage executors recompute (segments cut at block boundaries); if not, why into why. The
 * cuda device refuses recomputation with TB_EUNSUPPORTED (its stages are whole-stage fp32 slots), so only the
 * recompute variant of stages_bitwise_whole leaves it out, saying so. */
static int device_has_recompute(const struct fixture *f, int k, char *why, size_t n)
{
    struct executor_config c = config(device_name(k), 1, 2, OPTIM_SGD);
    const int cuts[2] = {0, f->m.n_layers};
    c.l0 = 0, c.l1 = f->m.n_layers, c.recompute = 1, c.cuts = cuts, c.n_seg = 1;
    struct executor ex;
    const int st = executor_create(&ex, &f->m, &c);
    executor_destroy(&ex);
    if (st == TB_EUNSUPPORTED) {
        snprintf(why, n, "device %s: stage executors without recomputation only: %s", device_name(k), tb_error_get());
        return 0;
    }
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    return 1;
}

ParameterizedTest(int *k, executor, stages_bitwise_whole)
{
    struct fixture f;
    fixture_init(&f, 0, 8);
    SKIP_UNLESS_RUNS(&f, *k);
    if (!device_has_stages(&f, *k)) {
        fixture_free(&f);
        cr_skip_test("device %s makes no stage executors", device_name(*k));
    }
    struct whole_steps whole;
    whole_steps_run(&whole, &f, device_name(*k), 8);
    for (int s = 1; s < f.m.n_layers; s++) check_stages(&f, &whole, device_name(*k), 8, s, 0);
    whole_steps_free(&whole);
    fixture_free(&f);
    fixture_init(&f, 1, 4);
    char why[320];
    if (!device_runs(&f, *k, why, sizeof why)) {
        cr_log_info("%s", why);
        fixture_free(&f);
        return;
    }
    const int recompute = device_has_recompute(&f, *k, why, sizeof why);
    if (!recompute) cr_log_info("%s", why);
    whole_steps_run(&whole, &f, device_name(*k), 4);
    int splits = 0;
    for (int s = 1; s < f.m.n_layers; s++) {
        if (f.m.layers[s].block == f.m.layers[s - 1].block) continue;
        const int i = splits++;
        if (i % (3 * TU_ASAN_STRIDE)) continue; /* every third block boundary: enough, and quick */
        /* Under ASan (every ninth boundary) each cut plain or segmented in turn, the stem's plain: both kinds of
         * stage executor still run there, and test_ipu's recompute_segments_bitwise_both_schedules and
         * stages_are_bitwise_neutral run EfficientNet's both ways through the ipu backend. */
        const int odd = i / (3 * TU_ASAN_STRIDE) % 2;
        if (!TU_UNDER_ASAN || !odd || !recompute) check_stages(&f, &whole, device_name(*k), 4, s, 0);
        if (recompute && (!TU_UNDER_ASAN || odd)) check_stages(&f, &whole, device_name(*k), 4, s, 1);
    }
    whole_steps_free(&whole);
    fixture_free(&f);
}

/* A cpu stage executor tells the convolution algorithms it runs (executor_stats' conv_algos, a row's
 * figures.conv_algos) with slots and with segments alike: a segmented stage (recompute, the ipu's 2-byte storage)
 * has no slots, and once reported none, so an ipu row of such a run did not say which kernels it ran. */
Test(executor, stage_reports_conv_algos_with_segments_too)
{
    struct fixture f;
    fixture_init(&f, 1, 2);
    const int L = f.m.n_layers;
    int cuts[64], n_cut = 0;
    cuts[n_cut++] = 0;
    for (int i = 1; i < L && n_cut < 62; i++)
        if (f.m.layers[i].block != f.m.layers[i - 1].block) cuts[n_cut++] = i;
    cuts[n_cut] = L;
    for (int segmented = 0; segmented < 2; segmented++) {
        struct executor_config c = config("cpu", 1, 2, OPTIM_SGD);
        c.l0 = 0, c.l1 = L, c.recompute = segmented, c.cuts = segmented ? cuts : NULL, c.n_seg = segmented ? n_cut : 0;
        struct executor ex;
        ex_init(&ex, &f, &c);
        struct executor_stats s;
        cr_assert_eq(executor_stats(&ex, &s), TB_OK, "%s", tb_error_get());
        cr_assert_not_null(s.conv_algos, "a %s stage reports no convolution algorithms",
                           segmented ? "segmented" : "slotted");
        int convs = 0;
        for (int i = 0; i < L; i++)
            if (f.m.layers[i].op == OP_CONV) {
                cr_assert_str_eq(exec_conv_algo_names[s.conv_algos[i]], "im2col", "layer %s", f.m.layers[i].name);
                convs++;
            }
        cr_assert_gt(convs, 0);
        executor_destroy(&ex);
    }
    fixture_free(&f);
}

/* The optimizer's initial state is the executor's (issue 27): RMSProp's mean square starts at 1, and
 * set_tensors(TF_OPT, NULL) writes it again after training moved it. */
ParameterizedTestParameters(executor, optimizer_state_starts_initialised)
{
    return cr_make_param_array(int, device_indices, device_params());
}

ParameterizedTest(int *k, executor, optimizer_state_starts_initialised)
{
    struct fixture f;
    fixture_init(&f, 0, 8);
    SKIP_UNLESS_RUNS(&f, *k);
    struct executor_config c = config(device_name(*k), 1, 8, OPTIM_RMSPROP);
    const size_t n = f.m.n_params * (size_t)optim_state_per_param(OPTIM_RMSPROP);
    float *want = tu_fvec(n);
    optim_state_init(OPTIM_RMSPROP, want, f.m.n_params);
    for (int stage = 0; stage < 2; stage++) {
        if (stage && !device_has_stages(&f, *k)) continue;
        struct executor ex;
        struct executor_config sc = c;
        if (stage) sc.l0 = 0, sc.l1 = f.m.n_layers;
        cr_assert_eq(executor_create(&ex, &f.m, &sc), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_set_tensors(&ex, TF_PARAMS, f.params), TB_OK);
        for (int round = 0; round < 2; round++) {
            float *got = family_get(&ex, TF_OPT);
            cr_assert(memcmp(got, want, n * sizeof(float)) == 0, "%s executor: the initial state (round %d)",
                      stage ? "stage" : "whole", round);
            free(got);
            struct executor_pass p = train_pass(&f, 8, 0, stage ? f.m.n_layers : 0);
            double l;
            executor_zero_grads(&ex);
            cr_assert_eq(executor_forward_backward(&ex, &p, &l), TB_OK, "%s", tb_error_get());
            cr_assert_eq(executor_update(&ex, 1), TB_OK);
            got = family_get(&ex, TF_OPT);
            cr_assert(memcmp(got, want, n * sizeof(float)) != 0, "an update moves the state");
            free(got);
            cr_assert_eq(executor_set_tensors(&ex, TF_OPT, NULL), TB_OK);
        }
        executor_destroy(&ex);
    }
    free(want);
    fixture_free(&f);
}
