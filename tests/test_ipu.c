/* test_ipu.c — the ipu backend (pipelined, replicated) against cpu, its configuration errors, its
 * accounting, and the pieces it is built from (stage boundaries in the executor, schedules, split
 * balancing, half-precision storage).
 *
 * Equivalence: same seed, same initial parameters, same global batches; per-step losses and final
 * parameters within 1e-5 relative of `cpu` for the MNIST MLP and for EfficientNet-B0 with GroupNorm at
 * 16×16 (convolutions forced to im2col for both, so autotuning cannot pick differently); one stage,
 * one micro-batch, one replica is bitwise `cpu`; recomputation (segment checkpoints, every stage) and
 * prefetching change nothing, bitwise.
 * Threaded tests carry a timeout so a deadlocked pipeline fails instead of hanging.
 */
#include "test_util.h"

#include "backend.h"
#include "exec.h"
#include "ipu_plan.h"
#include "stage_precision.h"
#include "pipeline_report.h"
#include "run.h"
#include "status.h"
#include "timeline_csv.h"
#include "workload.h"

#include <sys/stat.h>
#include <unistd.h>

enum { MAX_STEPS = 8 };

/* A training run: backend and ipu options. */
struct spec {
    const char *backend;
    int effnet;              /* 0: mnist-mlp 28×28×1; 1: effnet-b0, GroupNorm, 16×16×3; 2: same, BatchNorm */
    int resolution;          /* effnet: input side (0: 16) */
    int batch, steps;
    int stages, ga, replicas, micro_batch, recompute, prefetch, n_devices;
    const char *schedule, *precision, *split, *timeline;
    float loss_scale;        /* fp16: static scale, 0 = dynamic */
    uint64_t seed;
    const struct trace *from; /* non-NULL: start from its parameters and optimizer state ... */
    int first;               /* ... as step first + 1 (data and step numbers continue) */
    int total;               /* the schedule's total steps (0: first + steps) */
    const char *device;      /* the executors' device (NULL: cpu) */
};

/* What a run leaves behind. */
struct trace {
    double loss[MAX_STEPS];  /* Σ per-sample loss of each step */
    struct step_stats st[MAX_STEPS];
    float *params;           /* (n_params) */
    float *opt;              /* (state_per_param · n_params) */
    size_t n_params, n_opt;
    double eval_loss;
    long eval_correct;
    char desc[512];
    struct pipeline_report rep; /* what the run measured per stage */
};

static struct spec spec_of(const char *backend, int effnet, int batch)
{
    return (struct spec){.backend = backend, .effnet = effnet, .batch = batch, .steps = effnet ? 3 : 6, .seed = 42};
}

static const struct workload *build_model(const struct spec *sp, struct model *m, int *H, int *W, int *C)
{
    struct workload_opts o = {.classes = 10, .dropout = -1, .drop_connect = -1};
    const struct workload *w;
    if (sp->effnet) {
        w = &workload_effnet[0];
        *H = *W = sp->resolution > 0 ? sp->resolution : 16, *C = 3;
        o.resolution = *H;
        snprintf(o.norm, sizeof o.norm, "%s", sp->effnet == 2 ? "batch" : "group");
    } else {
        w = &workload_mnist_mlp;
        *H = *W = 28, *C = 1;
    }
    o.in_h = *H, o.in_w = *W, o.in_c = *C;
    cr_assert_eq(w->build(m, &o), TB_OK, "%s build: %s", w->name, tb_error_get());
    return w;
}

static void fill_config(const struct spec *sp, const struct workload *w, struct run_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->batch = sp->batch;
    cfg->eval_batch = sp->batch;
    cfg->seed = sp->seed;
    optim_config_defaults(&cfg->optim, w->optimizer);
    if (w->lr > 0) cfg->optim.lr = w->lr;
    /* RMSProp's default 0.016 makes an 8-sample EfficientNet chaotic: every rounding difference grows. */
    if (sp->effnet) cfg->optim.lr = 1e-4f;
    cfg->optim.total_steps = sp->total ? sp->total : sp->first + sp->steps;
    cfg->ipu.stages = sp->stages, cfg->ipu.ga = sp->ga, cfg->ipu.replicas = sp->replicas;
    cfg->ipu.micro_batch = sp->micro_batch;
    cfg->ipu.recompute = sp->recompute, cfg->ipu.prefetch = sp->prefetch, cfg->n_devices = sp->n_devices;
    cfg->ipu.loss_scale = sp->loss_scale;
    snprintf(cfg->ipu.schedule, sizeof cfg->ipu.schedule, "%s", sp->schedule ? sp->schedule : "");
    snprintf(cfg->ipu.precision, sizeof cfg->ipu.precision, "%s", sp->precision ? sp->precision : "");
    snprintf(cfg->ipu.split, sizeof cfg->ipu.split, "%s", sp->split ? sp->split : "");
    snprintf(cfg->conv_algo, sizeof cfg->conv_algo, "im2col");
    if (sp->device) snprintf(cfg->device, sizeof cfg->device, "%s", sp->device);
}

/* w->init(m, params, buffers, seed) through a copy kept for the last model and seed: the runs of a test mostly
 * start from the same initial state, and drawing EfficientNet's 4 M parameters again was a tenth of such a run's
 * time under ASan. The model is known by its workload, seed, sizes and each layer's kind and parameter counts. */
static void init_params(const struct workload *w, const struct model *m, float *params, float *buffers, uint64_t seed)
{
    static struct {
        const struct workload *w;
        uint64_t seed, shape;
        size_t n_params, n_buffers;
        float *params, *buffers; /* (n_params), (n_buffers) */
    } kept;
    uint64_t shape = 1469598103934665603ull; /* FNV-1a over the layers' kinds and parameter counts */
    for (int i = 0; i < m->n_layers; i++) {
        const uint64_t v[3] = {(uint64_t)m->layers[i].op, m->layers[i].n_w, m->layers[i].n_b};
        for (int k = 0; k < 3; k++) shape = (shape ^ v[k]) * 1099511628211ull;
    }
    if (kept.w != w || kept.seed != seed || kept.shape != shape || kept.n_params != m->n_params ||
        kept.n_buffers != m->n_buffers) {
        free(kept.params), free(kept.buffers);
        kept.w = w, kept.seed = seed, kept.shape = shape, kept.n_params = m->n_params, kept.n_buffers = m->n_buffers;
        kept.params = tu_fvec(m->n_params);
        kept.buffers = tu_fvec(m->n_buffers);
        w->init(m, kept.params, kept.buffers, seed);
    }
    memcpy(params, kept.params, m->n_params * sizeof(float));
    memcpy(buffers, kept.buffers, m->n_buffers * sizeof(float));
}

/* Trains under sp on a fixed synthetic set from the workload's seeded initial parameters, then
 * evaluates on the training samples. */
static void run_train(const struct spec *sp, struct trace *t)
{
    memset(t, 0, sizeof *t);
    cr_assert_leq(sp->steps, MAX_STEPS);
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(sp, &m, &H, &W, &C);
    struct dataset ds;
    cr_assert_eq(dataset_synthetic((sp->first + sp->steps) * sp->batch, H, W, C, 10, 7, 1, &ds), TB_OK, "%s",
                 tb_error_get());
    int32_t *labels = malloc((size_t)ds.n * sizeof *labels);
    cr_assert_not_null(labels);
    for (int i = 0; i < ds.n; i++) labels[i] = ds.labels[i];

    struct backend b;
    cr_assert_eq(backend_create(&b, sp->backend), TB_OK, "%s", tb_error_get());
    struct run_config cfg;
    fill_config(sp, w, &cfg);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "prepare %s: %s", sp->backend, tb_error_get());
    t->n_params = m.n_params;
    t->n_opt = m.n_params * (size_t)optim_state_per_param(cfg.optim.kind);
    t->params = tu_fvec(t->n_params);
    t->opt = tu_fvec(t->n_opt);
    float *buffers = tu_fvec(m.n_buffers);
    init_params(w, &m, t->params, buffers, sp->seed);
    if (sp->from) {
        cr_assert_eq(sp->from->n_params, t->n_params);
        memcpy(t->params, sp->from->params, t->n_params * sizeof(float));
        memcpy(t->opt, sp->from->opt, t->n_opt * sizeof(float));
    }
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, t->params), TB_OK);
    if (m.n_buffers) cr_assert_eq(backend_set_tensors(&b, TF_BUFFERS, buffers), TB_OK);
    cr_assert_eq(backend_set_tensors(&b, TF_OPT, t->opt), TB_OK);

    const size_t per = (size_t)H * W * C;
    struct timeline_csv csv = {0}; /* --timeline: the harness writes it from the backend's stats */
    if (sp->timeline) cr_assert_eq(timeline_csv_open(&csv, sp->timeline), TB_OK, "%s", tb_error_get());
    for (int s = 0; s < sp->steps; s++) {
        const size_t at = (size_t)(sp->first + s) * sp->batch;
        struct batch bt = {sp->batch, ds.images + at * per, labels + at};
        int st = backend_train_step(&b, &bt, sp->first + s + 1, &t->st[s]);
        cr_assert_eq(st, TB_OK, "%s step %d: %s", sp->backend, s + 1, tb_error_get());
        cr_assert_eq(timeline_csv_step(&csv, &b, sp->first + s + 1), TB_OK, "%s", tb_error_get());
        cr_assert(isfinite(t->st[s].loss_sum), "%s step %d: loss %g", sp->backend, s + 1, t->st[s].loss_sum);
        t->loss[s] = t->st[s].loss_sum;
    }
    struct batch all = {sp->steps * sp->batch, ds.images + (size_t)sp->first * sp->batch * per,
                        labels + (size_t)sp->first * sp->batch};
    struct eval_stats ev = {0};
    cr_assert_eq(backend_evaluate(&b, &all, &ev), TB_OK, "%s", tb_error_get());
    cr_assert_eq(ev.n, sp->steps * sp->batch);
    t->eval_loss = ev.loss_sum, t->eval_correct = ev.correct;
    cr_assert_eq(backend_get_tensors(&b, TF_PARAMS, t->params), TB_OK);
    cr_assert_eq(backend_get_tensors(&b, TF_OPT, t->opt), TB_OK);
    backend_describe(&b, t->desc, sizeof t->desc);
    if (strcmp(sp->backend, "ipu") == 0) cr_assert_eq(backend_pipeline_report(&b, &t->rep), TB_OK);
    timeline_csv_close(&csv);
    backend_destroy(&b);
    free(buffers), free(labels);
    dataset_free(&ds);
    model_free(&m);
}

static void trace_free(struct trace *t)
{
    free(t->params), free(t->opt);
    memset(t, 0, sizeof *t);
}

static void assert_close(const struct trace *t, const struct trace *ref, int steps, double rtol, const char *what)
{
    for (int s = 0; s < steps; s++)
        cr_assert(fabs(t->loss[s] - ref->loss[s]) <= rtol * fabs(ref->loss[s]),
                  "%s: loss at step %d is %.9g, cpu has %.9g (rel %.3g)", what, s + 1, t->loss[s], ref->loss[s],
                  fabs(t->loss[s] - ref->loss[s]) / fabs(ref->loss[s]));
    cr_assert_eq(t->n_params, ref->n_params);
    /* Parameters: within rtol in norm (‖Δ‖ ≤ rtol·‖params‖), and elementwise within 10·rtol of the
     * largest |param|. Not rtol per element: Adam and RMSProp divide by the gradient's own magnitude,
     * so the summation-order noise of a near-cancelled gradient (micro-batches accumulate in another
     * order than one big batch; mirrored shows the same) moves a single weight by a relatively large
     * amount. The bitwise tests below pin the pipeline itself exactly. */
    double *want = tu_to_d(ref->params, ref->n_params);
    char w[128];
    snprintf(w, sizeof w, "%s: params", what);
    tu_assert_close(t->params, want, t->n_params, 10 * rtol, 10 * rtol, w);
    double dn = 0.0, rn = 0.0;
    for (size_t i = 0; i < t->n_params; i++) dn += (t->params[i] - want[i]) * (t->params[i] - want[i]), rn += want[i] * want[i];
    cr_assert(sqrt(dn) <= rtol * sqrt(rn), "%s: ‖Δparams‖/‖params‖ = %.3g", what, sqrt(dn / rn));
    free(want);
    cr_assert(fabs(t->eval_loss - ref->eval_loss) <= rtol * fabs(ref->eval_loss), "%s: eval loss %.9g vs %.9g", what,
              t->eval_loss, ref->eval_loss);
}

static void assert_bitwise(const struct trace *t, const struct trace *ref, int steps, const char *what)
{
    for (int s = 0; s < steps; s++)
        cr_assert(memcmp(&t->loss[s], &ref->loss[s], sizeof(double)) == 0, "%s: loss at step %d %.17g != %.17g", what,
                  s + 1, t->loss[s], ref->loss[s]);
    char w[128];
    snprintf(w, sizeof w, "%s: params", what);
    tu_assert_bitwise(t->params, ref->params, t->n_params, w);
    snprintf(w, sizeof w, "%s: optimizer state", what);
    tu_assert_bitwise(t->opt, ref->opt, t->n_opt, w);
    cr_assert_eq(t->eval_correct, ref->eval_correct, "%s: eval correct", what);
}

/* Runs sp against cpu at the same batch. */
static void check_against_cpu(const struct spec *sp, const char *what)
{
    struct spec sc = spec_of("cpu", sp->effnet, sp->batch);
    sc.steps = sp->steps;
    struct trace ref, t;
    run_train(&sc, &ref);
    cr_assert_neq(ref.loss[0], ref.loss[sp->steps - 1], "training moved the loss");
    run_train(sp, &t);
    cr_log_info("%s: %s", what, t.desc);
    assert_close(&t, &ref, sp->steps, 1e-5, what);
    trace_free(&t), trace_free(&ref);
}

TestSuite(ipu, .timeout = 120);

/* ---- equivalence with cpu ---- */

Test(ipu, mlp_s2_g4_r1_matches_cpu, .timeout = 60)
{
    const char *scheds[2] = {"1f1b", "gpipe"};
    for (int k = 0; k < 2; k++) {
        struct spec sp = spec_of("ipu", 0, 16);
        sp.stages = 2, sp.ga = 4, sp.replicas = 1, sp.schedule = scheds[k];
        char what[64];
        snprintf(what, sizeof what, "mlp ipu S=2 G=4 R=1 %s", scheds[k]);
        check_against_cpu(&sp, what);
    }
}

Test(ipu, mlp_s2_g2_r2_matches_cpu, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 2, sp.replicas = 2;
    check_against_cpu(&sp, "mlp ipu S=2 G=2 R=2");
}

/* ---- Stages on a device whose tensors are off the host (a GPU's), on the cpu: a double of the cpu device
 * whose executor_buffer says host = 0 and hands out poisoned pointers, so a schedule that read them would
 * crash; the replicas' ring must go through host copies (get, ring, set). ---- */

static struct executor_i offhost_whole_i, offhost_stage_i; /* the cpu device's tables, wrapped */
static const struct executor_i *cpu_whole_i, *cpu_stage_i;

static int offhost_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b)
{
    const int st = (ex->cfg.l1 > 0 ? cpu_stage_i : cpu_whole_i)->buffer(ex, f, b);
    b->host = 0;
    if (b->data) b->data = (float *)(uintptr_t)16;
    if (b->data16) b->data16 = (uint16_t *)(uintptr_t)16;
    return st;
}

static int offhost_create(struct executor *ex)
{
    const int st = executor_cpu_create(ex);
    if (st != TB_OK) return st;
    const int stage = ex->cfg.l1 > 0;
    const struct executor_i **orig = stage ? &cpu_stage_i : &cpu_whole_i;
    struct executor_i *mine = stage ? &offhost_stage_i : &offhost_whole_i;
    if (!*orig) *orig = ex->i;
    *mine = **orig;
    mine->name = "offhost";
    mine->buffer = offhost_buffer;
    ex->i = mine;
    return TB_OK;
}

static int failing_create(struct executor *ex);

/* The doubles: "offhost", and "failing" (offhost, with stage 1's backward failing from step 2 on). */
static void register_offhost(void)
{
    static const struct executor_device d[2] = {
        {.name = "offhost", .summary = "test: cpu tensors reported off the host", .create = offhost_create},
        {.name = "failing", .summary = "test: offhost, stage 1's backward fails from step 2", .create = failing_create},
    };
    for (int k = 0; k < 2; k++) cr_assert_eq(executor_device_register(&d[k]), TB_OK, "%s", tb_error_get());
}

/* Bitwise the same run on the cpu device: 2 stages × 2 replicas (the ring over host copies) and one
 * replica (no ring), 1F1B and GPipe, accumulation 4. */
Test(ipu, offhost_stages_bitwise_cpu, .init = register_offhost, .timeout = 90)
{
    static const char *const scheds[2] = {"1f1b", "gpipe"};
    for (int k = 0; k < 2; k++)
        for (int R = 1; R <= 2; R++) {
            struct spec sp = spec_of("ipu", 0, 16);
            sp.stages = 2, sp.ga = 4, sp.replicas = R, sp.schedule = scheds[k];
            struct trace ref, t;
            run_train(&sp, &ref);
            sp.device = "offhost";
            run_train(&sp, &t);
            char what[96];
            snprintf(what, sizeof what, "mlp ipu S=2 G=4 R=%d %s on offhost vs cpu", R, scheds[k]);
            assert_bitwise(&t, &ref, sp.steps, what);
            trace_free(&t), trace_free(&ref);
        }
}

/* A device's call that fails (a GPU's launch, say) fails the step with its message, once every device has
 * kept its place in the queues and the ring (no deadlock, no abort); the backend is freed cleanly after. A
 * double of the offhost device whose stage-1 backward fails from step 2 on. */
static int failing_compute(struct executor *ex, const struct executor_pass *p, int what, double *loss_sum)
{
    if (ex->cfg.l0 > 0 && (what & EXECUTOR_BACKWARD) && p->step >= 2)
        return tb_error_set(TB_EIO, "failing: a kernel launch failed at step %ld", p->step);
    return cpu_stage_i->compute(ex, p, what, loss_sum);
}

static struct executor_i failing_stage_i;

static int failing_create(struct executor *ex)
{
    const int st = offhost_create(ex);
    if (st != TB_OK || ex->cfg.l1 == 0) return st;
    failing_stage_i = *ex->i;
    failing_stage_i.compute = failing_compute;
    ex->i = &failing_stage_i;
    return TB_OK;
}

Test(ipu, device_failure_fails_the_step, .init = register_offhost, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.replicas = 2, sp.device = "failing";
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(2 * sp.batch, H, W, C, 10, 7, 1, &ds), TB_OK);
    int32_t y[32];
    for (int i = 0; i < 2 * sp.batch; i++) y[i] = ds.labels[i];
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK, "%s", tb_error_get());
    struct run_config cfg;
    fill_config(&sp, w, &cfg);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers);
    w->init(&m, params, buffers, sp.seed);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, params), TB_OK);
    const size_t per = (size_t)H * W * C;
    struct step_stats st = {0};
    struct batch b1 = {sp.batch, ds.images, y}, b2 = {sp.batch, ds.images + (size_t)sp.batch * per, y + sp.batch};
    cr_assert_eq(backend_train_step(&b, &b1, 1, &st), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_train_step(&b, &b2, 2, &st), TB_EIO);
    cr_assert(strstr(tb_error_get(), "a kernel launch failed at step 2"), "%s", tb_error_get());
    backend_destroy(&b);
    free(params), free(buffers);
    dataset_free(&ds);
    model_free(&m);
}

/* 2-byte stages' replicas would sum host copies in fp32: refused in one line at prepare. */
Test(ipu, offhost_half_replicas_refused, .init = register_offhost, .timeout = 30)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 2, sp.replicas = 2, sp.precision = "bf16", sp.device = "offhost";
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK, "%s", tb_error_get());
    struct run_config cfg;
    fill_config(&sp, w, &cfg);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "replicas of 2-byte stages on device offhost"), "%s", tb_error_get());
    backend_destroy(&b);
    model_free(&m);
}

/* Issue 30's IPUStrategy seed: two stages of micro-batch 1 with accumulation 2 (the least 1f1b allows),
 * global batch 2: trains, and matches cpu at batch 2. Grouped (gpipe) needs 4 micro-batches. */
Test(ipu, mlp_s2_b1_g2_matches_cpu, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 2);
    sp.stages = 2, sp.micro_batch = 1, sp.ga = 2, sp.replicas = 1, sp.schedule = "1f1b";
    check_against_cpu(&sp, "mlp ipu S=2 B=1 G=2 R=1 1f1b");
    sp = spec_of("ipu", 0, 4);
    sp.stages = 2, sp.micro_batch = 1, sp.ga = 4, sp.replicas = 1, sp.schedule = "gpipe";
    check_against_cpu(&sp, "mlp ipu S=2 B=1 G=4 R=1 gpipe");
}

/* Four stages and two replicas: eight devices on this machine's cores (oversubscribed), given splits. */
Test(ipu, mlp_s4_oversubscribed_matches_cpu, .timeout = 90)
{
    const char *scheds[2] = {"1f1b", "gpipe"};
    for (int k = 0; k < 2; k++) {
        struct spec sp = spec_of("ipu", 0, 32);
        sp.stages = 4, sp.ga = 8, sp.replicas = 2, sp.split = "1,2,4", sp.schedule = scheds[k];
        char what[64];
        snprintf(what, sizeof what, "mlp ipu S=4 G=8 R=2 %s", scheds[k]);
        check_against_cpu(&sp, what);
    }
}

Test(ipu, mlp_s1_g1_r1_bitwise_cpu, .timeout = 60)
{
    struct spec sc = spec_of("cpu", 0, 16), sp = spec_of("ipu", 0, 16);
    sp.stages = 1, sp.ga = 1, sp.replicas = 1;
    struct trace ref, t;
    run_train(&sc, &ref);
    run_train(&sp, &t);
    assert_bitwise(&t, &ref, sp.steps, "mlp ipu S=1 G=1 R=1 vs cpu");
    trace_free(&t), trace_free(&ref);
}

Test(ipu, effnet_gn_s2_g4_r1_matches_cpu, .timeout = 120)
{
    struct spec sp = spec_of("ipu", 1, 8);
    sp.stages = 2, sp.ga = 4, sp.replicas = 1; /* split balanced on measured layer times */
    check_against_cpu(&sp, "effnet-b0 GN ipu S=2 G=4 R=1");
}

/* Under ASan effnet_gn_s2_g4_r1_matches_cpu alone of the three EfficientNet-against-cpu variants (it balances the
 * split on measured layer times, which no other test under ASan does): two replicas of EfficientNet train there in
 * effnet_bn_split_between_fused_layers_bitwise (the all-reduce sums floats of any layer kind alike) and evaluate in
 * evaluate_collects_the_logits_cpus_evaluate_does; one stage of GroupNorm's is stages_are_bitwise_neutral's
 * reference and one stage, one micro-batch, one replica mlp_s1_g1_r1_bitwise_cpu's. The main build runs all three. */
static void skip_effnet_variant_under_asan(void)
{
    if (TU_UNDER_ASAN) cr_skip_test("under ASan its paths are other tests' (see above); the main build checks it");
}

Test(ipu, effnet_gn_s2_g2_r2_matches_cpu, .timeout = 120)
{
    skip_effnet_variant_under_asan();
    struct spec sp = spec_of("ipu", 1, 8);
    sp.stages = 2, sp.ga = 2, sp.replicas = 2, sp.split = "6";
    check_against_cpu(&sp, "effnet-b0 GN ipu S=2 G=2 R=2");
}

Test(ipu, effnet_gn_s1_bitwise_cpu, .timeout = 120)
{
    skip_effnet_variant_under_asan();
    struct spec sc = spec_of("cpu", 1, 8), sp = spec_of("ipu", 1, 8);
    sc.steps = sp.steps = 2;
    sp.stages = 1, sp.ga = 1, sp.replicas = 1;
    struct trace ref, t;
    run_train(&sc, &ref);
    run_train(&sp, &t);
    assert_bitwise(&t, &ref, sp.steps, "effnet-b0 GN ipu S=1 vs cpu");
    trace_free(&t), trace_free(&ref);
}

/* The pipeline adds no arithmetic: with the same micro-batches (and replicas), any number of stages and
 * either schedule gives the bits of one stage. Three replicas: each stage's ring chunks its gradient slice
 * by the slice's place in the whole model, so a sum's order does not move with the split (chunked by the
 * slice alone, split 2 and 3 ended 2.189352888862292 and 2.189352871477604 against one stage's
 * 2.1893528719743096). */
Test(ipu, stages_are_bitwise_neutral, .timeout = 120)
{
    for (int e = 0; e < 2; e++) {
        const int R = e ? 1 : 3;
        struct spec one = spec_of("ipu", e, e ? 12 : 36);
        one.stages = 1, one.ga = 6, one.replicas = R, one.steps = e ? 2 : 4;
        struct trace ref;
        run_train(&one, &ref);
        const char *splits[2][2] = {{"2", "1,3"}, {"6", "3,11"}};
        for (int S = 2; S <= 3; S++)
            for (int k = 0; k < 2; k++) {
                struct spec sp = one;
                sp.stages = S, sp.split = splits[e][S - 2];
                sp.schedule = k ? "gpipe" : "1f1b";
                if (k && 6 % (2 * S)) continue; /* gpipe needs GA divisible by 2·S */
                /* Under ASan EfficientNet's 1F1B stages are other tests' (two: effnet_gn_s2_g4_r1_matches_cpu's,
                 * three: recompute_and_prefetch_are_bitwise_neutral's base run); here its three under GPipe. */
                if (TU_UNDER_ASAN && e && !k) continue;
                struct trace t;
                run_train(&sp, &t);
                char what[96];
                snprintf(what, sizeof what, "%s S=%d %s R=%d vs S=1", e ? "effnet" : "mlp", S, sp.schedule, R);
                assert_bitwise(&t, &ref, one.steps, what);
                trace_free(&t);
            }
        trace_free(&ref);
    }
}

/* A split between a BatchNorm and the depthwise convolution that reads it (effnet's stem and block 1: split
 * 1), which one stage fuses (dwconv_backward_data_bn): the convolution's stage sums its weight gradient in
 * that fused pass's parts and order, so the split changes no bit (block 1's depthwise weights differed).
 * Two replicas: the stages cut for TB_ONE_CORE_UNITS on any machine, and at 32×32 and micro-batch 2 the
 * stem's output has 4 BatchNorm row chunks, enough for the pair to fuse. */
Test(ipu, effnet_bn_split_between_fused_layers_bitwise, .timeout = 60)
{
    struct spec one = spec_of("ipu", 2, 8); /* 2: BatchNorm */
    one.resolution = 32, one.stages = 1, one.ga = 2, one.replicas = 2, one.steps = 2;
    struct trace ref, t;
    run_train(&one, &ref);
    struct spec sp = one;
    sp.stages = 2, sp.split = "1";
    run_train(&sp, &t);
    assert_bitwise(&t, &ref, one.steps, "effnet BN S=2 split 1 vs S=1");
    trace_free(&ref), trace_free(&t);
}

/* Recomputation rebuilds the same activations (counter-based dropout, no second BN update), and the
 * infeed only moves bytes: both leave every bit unchanged. */
Test(ipu, recompute_and_prefetch_are_bitwise_neutral, .timeout = 120)
{
    for (int e = 0; e < 2; e++) {
        struct spec base = spec_of("ipu", e, e ? 12 : 16);
        base.stages = e ? 3 : 2, base.ga = e ? 6 : 4, base.split = e ? "4,10" : NULL, base.prefetch = -1;
        base.steps = e ? 2 : 4;
        struct trace ref;
        run_train(&base, &ref);
        struct spec rc = base, pf = base;
        rc.recompute = 1;
        pf.prefetch = 2;
        struct trace a, b = {0};
        run_train(&rc, &a);
        assert_bitwise(&a, &ref, base.steps, e ? "effnet recompute" : "mlp recompute");
        cr_assert(strstr(a.desc, "recompute") != NULL, "%s", a.desc);
        /* Under ASan the MLP's infeed only: it moves any model's input bytes alike. */
        if (!TU_UNDER_ASAN || !e) {
            run_train(&pf, &b);
            assert_bitwise(&b, &ref, base.steps, e ? "effnet prefetch" : "mlp prefetch");
            /* the infeed ran: base without it (-1: off), pf with 2 micro-batches ahead */
            cr_assert(strstr(ref.desc, "prefetch 0") != NULL && strstr(b.desc, "prefetch 2") != NULL, "%s / %s",
                      ref.desc, b.desc);
        }
        trace_free(&ref), trace_free(&a), trace_free(&b);
    }
}

/* Segments per stage from a description's "recompute (segments a/b)"; returns how many were read. */
static int desc_segments(const char *desc, int *k0, int *k1)
{
    const char *p = strstr(desc, "recompute (segments ");
    return p ? sscanf(p, "recompute (segments %d/%d)", k0, k1) : 0;
}

/* Segment checkpoints on every stage, the last included: the same kernels in the same order, so
 * every loss, parameter, optimizer state and evaluation is bitwise a run without recomputation, for
 * both schedules (GroupNorm EfficientNet: dropout and drop-connect recomputed from their counters;
 * BatchNorm, 1f1b only: its running statistics, which the evaluation uses, are updated once). */
Test(ipu, recompute_segments_bitwise_both_schedules, .timeout = 120)
{
    const char *scheds[2] = {"1f1b", "gpipe"};
    for (int e = 0; e < 3; e++)
        for (int k = 0; k < (e == 2 ? 1 : 2); k++) {
            /* Under ASan not GroupNorm's EfficientNet: recompute_and_prefetch_are_bitwise_neutral recomputes it
             * under 1F1B there (three stages) and recompute_reduces_activation_memory under GPipe; the MLP's and
             * BatchNorm's stay here. */
            if (TU_UNDER_ASAN && e == 1) continue;
            struct spec base = spec_of("ipu", e, e ? 8 : 16);
            base.stages = 2, base.ga = 4, base.schedule = scheds[k], base.steps = e ? 2 : 4;
            base.split = e ? "6" : "1"; /* the MLP's first stage is its input block alone */
            struct trace ref, t;
            run_train(&base, &ref);
            struct spec rc = base;
            rc.recompute = 1;
            run_train(&rc, &t);
            char what[96];
            snprintf(what, sizeof what, "%s S=2 G=4 %s recompute", e == 2 ? "effnet BN" : e ? "effnet GN" : "mlp",
                     scheds[k]);
            cr_log_info("%s: %s", what, t.desc);
            int k0 = 0, k1 = 0;
            cr_assert_eq(desc_segments(t.desc, &k0, &k1), 2, "%s: %s", what, t.desc);
            /* Segments are cut where they lower the peak: both EfficientNet stages; the MLP's last. */
            cr_assert(k0 >= (e ? 2 : 1) && k1 >= 2, "%s: stages cut into %d/%d segments", what, k0, k1);
            assert_bitwise(&t, &ref, base.steps, what);
            cr_assert_eq(t.eval_loss, ref.eval_loss, "%s: eval loss", what);
            trace_free(&ref), trace_free(&t);
        }
}

/* BatchNorm EfficientNet (statistics per micro-batch, so not cpu's numbers): trains, repeats bitwise. */
Test(ipu, effnet_bn_repeatable, .timeout = 120)
{
    struct spec sp = spec_of("ipu", 2, 8); /* 2: BatchNorm (1 is GroupNorm) */
    sp.steps = 2;
    struct trace a, b = {0};
    run_train(&sp, &a);
    /* Under ASan one run: the second takes the same paths again; whether it repeats bitwise is the main build's
     * question (there glibc's allocator, not ASan's filled one, hands out the memory a stray read would see). */
    if (!TU_UNDER_ASAN) {
        run_train(&sp, &b);
        assert_bitwise(&a, &b, sp.steps, "effnet ipu run twice");
    }
    cr_assert(a.loss[0] > 0.0 && a.loss[0] != a.loss[1], "step losses %.17g, %.17g: the steps did not run", a.loss[0],
              a.loss[1]);
    trace_free(&a), trace_free(&b);
}

/* Evaluation with logits (bench --plan evaluate, --logits): the pipeline's last stage writes each micro-batch's
 * rows where the batch has them, so the logits are cpu's from the same weights (other micro-batches, other
 * kernel splits and fusions: within 1e-4), every row written, for replicas too. */
Test(ipu, evaluate_collects_the_logits_cpus_evaluate_does)
{
    enum { N = 50, K = 10 };
    static const char *const backs[] = {"cpu", "ipu", "ipu"};
    float *lg[3];
    double loss[3];
    for (int k = 0; k < 3; k++) {
        /* Under ASan the one-replica evaluation is left out: in the two replicas' each last stage writes its
         * micro-batches' rows by the same code (ipu_schedule.c), replica 0 as the one replica's would. */
        if (TU_UNDER_ASAN && k == 1) {
            lg[k] = NULL;
            continue;
        }
        struct spec sp = spec_of(backs[k], 1, 8);
        if (k) sp.stages = 2, sp.ga = 4, sp.replicas = k == 2 ? 2 : 1, sp.batch = k == 2 ? 16 : 8;
        struct model m;
        int H, W, C;
        const struct workload *w = build_model(&sp, &m, &H, &W, &C);
        struct dataset ds;
        cr_assert_eq(dataset_synthetic(N, H, W, C, K, 7, 0, &ds), TB_OK, "%s", tb_error_get());
        int32_t y[N];
        for (int i = 0; i < N; i++) y[i] = ds.labels[i];
        struct backend b;
        cr_assert_eq(backend_create(&b, sp.backend), TB_OK, "%s", tb_error_get());
        struct run_config cfg;
        fill_config(&sp, w, &cfg);
        cfg.eval_batch = 8;
        cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s: %s", sp.backend, tb_error_get());
        float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers + 1);
        w->init(&m, params, buffers, 5);
        cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, params), TB_OK);
        if (m.n_buffers) cr_assert_eq(backend_set_tensors(&b, TF_BUFFERS, buffers), TB_OK);
        lg[k] = tu_fvec(N * K);
        for (int i = 0; i < N * K; i++) lg[k][i] = NAN; /* a row left unwritten stays NaN */
        struct batch all = {N, ds.images, y};
        struct eval_stats ev = {.logits = lg[k]};
        cr_assert_eq(backend_evaluate(&b, &all, &ev), TB_OK, "%s: %s", sp.backend, tb_error_get());
        cr_assert_eq(ev.n, N);
        loss[k] = ev.loss_sum;
        backend_destroy(&b);
        free(params), free(buffers);
        dataset_free(&ds);
        model_free(&m);
    }
    for (int k = 1; k < 3; k++) {
        if (!lg[k]) continue;
        cr_assert(fabs(loss[k] - loss[0]) <= 1e-5 * fabs(loss[0]), "loss %.9g vs cpu %.9g", loss[k], loss[0]);
        for (int i = 0; i < N * K; i++)
            cr_assert(fabsf(lg[k][i] - lg[0][i]) <= 1e-4f * (1.0f + fabsf(lg[0][i])), "ipu (%d replicas) logit %d: %.9g, cpu %.9g",
                      k, i, (double)lg[k][i], (double)lg[0][i]);
    }
    for (int k = 0; k < 3; k++) free(lg[k]);
}

/* Only --batch: two stages, one replica, GA the smallest multiple of 2 ≥ 2·S dividing the batch. */
Test(ipu, defaults_from_batch_only, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 32);
    sp.steps = 2;
    struct trace t;
    run_train(&sp, &t);
    cr_assert(strstr(t.desc, "2 stages x 1 replica") != NULL, "%s", t.desc);
    cr_assert(strstr(t.desc, "global batch 32 = micro-batch 8 x GA 4 x 1") != NULL, "%s", t.desc);
    trace_free(&t);
}

/* ---- configuration errors ---- */

static void expect_einval(struct spec sp, const char *needle)
{
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK);
    struct run_config cfg;
    fill_config(&sp, w, &cfg);
    tb_error_clear();
    int st = backend_prepare(&b, &m, &cfg);
    const char *msg = tb_error_get();
    cr_assert_eq(st, TB_EINVAL, "expected TB_EINVAL (%s), got %d: %s", needle, st, msg);
    cr_assert(strstr(msg, needle) != NULL, "message does not mention '%s': %s", needle, msg);
    cr_assert(strncmp(msg, "ipu: ", 5) == 0 && strchr(msg, '\n') == NULL, "message not one 'ipu: ' line: %s", msg);
    backend_destroy(&b);
    model_free(&m);
}

Test(ipu, bad_configurations_are_einval)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 9; /* the MLP has 5 blocks */
    expect_einval(sp, "more than the 5 blocks");
    sp = spec_of("ipu", 0, 16);
    sp.split = "3,2";
    expect_einval(sp, "strictly increasing");
    sp.split = "0";
    expect_einval(sp, "strictly increasing");
    sp.split = "2,9";
    expect_einval(sp, "strictly increasing");
    sp.split = "2";
    sp.stages = 3;
    expect_einval(sp, "needs 2");
    sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.replicas = 2, sp.ga = 2, sp.n_devices = 3;
    expect_einval(sp, "need 4 devices");
    sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 2, sp.replicas = 2, sp.schedule = "gpipe";
    expect_einval(sp, "not divisible by 4");
    sp = spec_of("ipu", 0, 24);
    sp.stages = 3, sp.ga = 4;
    expect_einval(sp, "not divisible by 3");
    sp = spec_of("ipu", 0, 16);
    sp.stages = 4, sp.ga = 2, sp.replicas = 1;
    expect_einval(sp, "less than the 4 stages");
    sp = spec_of("ipu", 0, 16);
    sp.schedule = "zigzag";
    expect_einval(sp, "unknown --schedule 'zigzag'");
    sp = spec_of("ipu", 0, 16);
    sp.precision = "fp8";
    expect_einval(sp, "unknown --precision");
    sp = spec_of("ipu", 0, 16);
    sp.micro_batch = 4, sp.ga = 2, sp.replicas = 1;
    expect_einval(sp, "global batch");
    sp = spec_of("ipu", 0, 5);
    expect_einval(sp, "cannot be cut into micro-batches");
    sp = spec_of("ipu", 0, 16);
    sp.precision = "fp16", sp.loss_scale = 0.5f;
    expect_einval(sp, "--loss-scale 0.5 is outside");
    sp.loss_scale = -8.0f;
    expect_einval(sp, "--loss-scale -8 is outside");
    sp.loss_scale = 1e31f;
    expect_einval(sp, "--loss-scale");
}

/* ---- accounting and timeline ---- */

Test(ipu, timeline_and_accounting, .timeout = 60)
{
    char *dir = tu_mkdtemp("ipu_tl");
    char path[512];
    snprintf(path, sizeof path, "%s/timeline.csv", dir);
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.replicas = 2, sp.batch = 32, sp.steps = 3, sp.timeline = path;
    struct trace t;
    run_train(&sp, &t);
    for (int s = 0; s < sp.steps; s++) {
        const struct step_stats *st = &t.st[s];
        cr_assert_gt(st->t_compute, 0.0);
        cr_assert_geq(st->t_idle, 0.0);
        cr_assert_geq(st->t_exchange, 0.0);
        cr_assert_gt(st->t_allreduce, 0.0, "two replicas all-reduce");
        cr_assert_leq(st->t_compute + st->t_exchange, st->t_forward_backward * 1.01 + 1e-4);
    }
    cr_assert(strstr(t.desc, "bubble ideal 20.0%") != NULL, "%s", t.desc);
    cr_assert(strstr(t.desc, "measured") != NULL, "%s", t.desc);
    size_t len;
    char *csv = tu_read_file(path, &len);
    cr_assert_not_null(csv, "no timeline at %s", path);
    const char *hdr = "step,device,stage,replica,microbatch,phase,start_s,end_s\n";
    cr_assert(strncmp(csv, hdr, strlen(hdr)) == 0, "header: %.80s", csv);
    /* start/end of F and B per (step, stage, replica, micro-batch) */
    double f0[4][2][2][4], f1[4][2][2][4], b0[4][2][2][4], b1[4][2][2][4];
    unsigned char seen[2][4][2][2][4] = {{{{{0}}}}}; /* each F and B slot once: the counts below then cover all */
    int nf = 0, nb = 0, na = 0, nu = 0;
    char *line = strchr(csv, '\n') + 1;
    while (*line) {
        long step;
        int d, s, r, mb;
        char ph;
        double a, z;
        cr_assert_eq(sscanf(line, "%ld,%d,%d,%d,%d,%c,%lf,%lf", &step, &d, &s, &r, &mb, &ph, &a, &z), 8, "bad row: %.60s",
                     line);
        cr_assert_leq(a, z);
        cr_assert(step >= 1 && step <= 3 && s >= 0 && s < 2 && r >= 0 && r < 2 && d == r * 2 + s);
        if (ph == 'F' || ph == 'B') {
            cr_assert(mb >= 0 && mb < 4, "micro-batch %d: %.60s", mb, line);
            cr_assert(!seen[ph == 'B'][step][s][r][mb]++, "a second %c row: %.60s", ph, line);
        }
        if (ph == 'F') f0[step][s][r][mb] = a, f1[step][s][r][mb] = z, nf++;
        if (ph == 'B') b0[step][s][r][mb] = a, b1[step][s][r][mb] = z, nb++;
        na += ph == 'A', nu += ph == 'U';
        line = strchr(line, '\n') + 1;
    }
    cr_assert_eq(nf, 3 * 2 * 2 * 4);
    cr_assert_eq(nb, 3 * 2 * 2 * 4);
    cr_assert_eq(na, 3 * 4);
    cr_assert_eq(nu, 3 * 4);
    for (int step = 1; step <= 3; step++)
        for (int r = 0; r < 2; r++)
            for (int mb = 0; mb < 4; mb++) {
                /* dependencies the exchange enforces */
                cr_assert_leq(f1[step][0][r][mb], f0[step][1][r][mb] + 1e-6, "stage 1 forward before stage 0's ended");
                cr_assert_leq(b1[step][1][r][mb], b0[step][0][r][mb] + 1e-6, "stage 0 backward before stage 1's ended");
                cr_assert_leq(f1[step][1][r][mb], b0[step][1][r][mb] + 1e-6);
            }
    free(csv);
    /* per device and step: compute + exchange + idle = the pipeline span */
    char dpath[600];
    snprintf(dpath, sizeof dpath, "%s.devices.csv", path);
    char *dev = tu_read_file(dpath, &len);
    cr_assert_not_null(dev, "no device log at %s", dpath);
    int rows = 0;
    for (char *l = strchr(dev, '\n') + 1; *l; l = strchr(l, '\n') + 1, rows++) {
        long step;
        int d, s, r, peak;
        double span, comp, exch, wait, idle, ar, upd, bytes;
        cr_assert_eq(sscanf(l, "%ld,%d,%d,%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%d", &step, &d, &s, &r, &span, &comp, &exch,
                            &wait, &idle, &ar, &upd, &bytes, &peak), 13, "bad row %.80s", l);
        cr_assert(fabs(comp + exch + idle - span) <= 1e-6 * (1 + span), "compute+exchange+idle != span: %.80s", l);
        cr_assert_gt(bytes, 0.0, "each device of a 2-stage pipeline sends");
        cr_assert(peak >= 1 && peak <= 2, "1f1b holds at most S-s micro-batches: %d", peak);
    }
    cr_assert_eq(rows, 3 * 4);
    free(dev);
    trace_free(&t);
    tu_rm_rf(dir);
    free(dir);
}

/* The harness's pipeline report and per-layer profile. The split is given (both stages then recompute:
 * segments 2+/2+, as in recompute_segments_bitwise_both_schedules). That the backward includes the
 * recomputation is checked by accounting, not by comparing measured times: the report books each
 * micro-batch's forward (F) and its recomputation plus backward (R + B) as the timeline does, and two steps
 * make the report's steps (the first is left out) the timeline's. It compared t_bwd against t_fwd, a ratio of
 * 8 micro-batches' wall times (about 4 here): a preempted forward on a loaded machine could invert it. */
Test(ipu, pipeline_report_and_profile, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 1, 8);
    sp.split = "6";
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(2 * 8, H, W, C, 10, 7, 1, &ds), TB_OK);
    int32_t y[16];
    for (int i = 0; i < 16; i++) y[i] = ds.labels[i];
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK);
    struct run_config cfg;
    fill_config(&sp, w, &cfg);
    cfg.profile = 1, cfg.ipu.recompute = 1, cfg.ipu.ga = 4;
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers);
    w->init(&m, params, buffers, 42);
    backend_set_tensors(&b, TF_PARAMS, params);
    for (int s = 0; s < 2; s++) {
        struct batch bt = {8, ds.images + (size_t)s * 8 * H * W * C, y + s * 8};
        struct step_stats st;
        cr_assert_eq(backend_train_step(&b, &bt, s + 1, &st), TB_OK, "%s", tb_error_get());
    }
    struct pipeline_report r;
    cr_assert_eq(backend_pipeline_report(&b, &r), TB_OK);
    cr_assert(r.stages == 2 && r.micro_batch == 2 && r.ga == 4 && r.replicas == 1);
    cr_assert(r.split_given && r.first_block[0] == 0 && r.first_block[1] == 6, "the split the run had: given %d, %d,%d",
              r.split_given, r.first_block[0], r.first_block[1]);
    cr_assert_float_eq(r.bubble_ideal, 0.2, 1e-12);
    cr_assert(r.bubble_measured >= 0.0 && r.bubble_measured < 1.0);
    /* Step 2's intervals per stage: F, R (recomputation) and B, summed over its 4 micro-batches. */
    struct timeline_event ev[64];
    const int n_ev = backend_timeline(&b, ev, 64);
    cr_assert(n_ev > 0 && n_ev <= 64, "%d timeline events", n_ev);
    double f[2] = {0}, rc[2] = {0}, bw[2] = {0};
    int nr[2] = {0};
    for (int k = 0; k < n_ev; k++) {
        const int s = ev[k].stage;
        const double d = ev[k].end_s - ev[k].start_s;
        cr_assert(s >= 0 && s < 2 && d >= 0.0);
        if (ev[k].phase == 'F') f[s] += d;
        if (ev[k].phase == 'R') rc[s] += d, nr[s]++;
        if (ev[k].phase == 'B') bw[s] += d;
    }
    double pb = 0;
    for (int s = 0; s < 2; s++) {
        cr_assert_gt(r.t_fwd[s], 0.0);
        cr_assert_eq(nr[s], 4, "stage %d recomputes each of the 4 micro-batches (%d R intervals)", s, nr[s]);
        cr_assert_gt(rc[s], 0.0, "stage %d: no time recomputing", s);
        cr_assert_float_eq(r.t_fwd[s], f[s] / 4, 1e-9, "stage %d: forward %.9g s per micro-batch, the timeline %.9g", s,
                           r.t_fwd[s], f[s] / 4);
        cr_assert_float_eq(r.t_bwd[s], (rc[s] + bw[s]) / 4, 1e-9,
                           "stage %d backward includes recomputation: %.9g s per micro-batch, the timeline's R + B %.9g",
                           s, r.t_bwd[s], (rc[s] + bw[s]) / 4);
        cr_assert_gt(r.exchange_bytes[s], 0.0);
        cr_assert_gt(r.peak_act_bytes[s], 0.0);
        pb += r.param_bytes[s];
    }
    cr_assert_eq(pb, 4.0 * (double)m.n_params, "stage parameter slices tile the arena");
    double *prof = tu_dvec(6 * (size_t)m.n_layers + 1);
    int busy_threads = -1;
    cr_assert_eq(backend_layer_profile(&b, prof, &busy_threads), TB_OK, "%s", tb_error_get());
    cr_assert_eq(busy_threads, 0, "stages run on one thread each: no busy-time profile");
    double tot = 0;
    for (int i = 0; i < 2 * m.n_layers; i++) tot += prof[i];
    cr_assert_gt(tot, 0.0);
    free(prof), free(params), free(buffers);
    backend_destroy(&b);
    dataset_free(&ds);
    model_free(&m);
}

/* Recomputation trades activation memory for a second forward, on every stage: a stage keeps only its
 * segment checkpoints per micro-batch in flight. */
Test(ipu, recompute_reduces_activation_memory, .timeout = 60)
{
    char *dir = tu_mkdtemp("ipu_rc");
    char path[512];
    snprintf(path, sizeof path, "%s/timeline.csv", dir);
    struct spec sp = spec_of("ipu", 1, 16);
    sp.stages = 2, sp.ga = 8, sp.schedule = "gpipe", sp.split = "6", sp.steps = 2;
    struct trace a, b;
    run_train(&sp, &a);
    sp.recompute = 1, sp.timeline = path;
    run_train(&sp, &b);
    const double *ma = a.rep.peak_act_bytes, *mb = b.rep.peak_act_bytes;
    cr_assert_lt(mb[0], ma[0] / 2, "stage 0 under gpipe holds 8 micro-batches without recomputation: %g vs %g", mb[0],
                 ma[0]);
    cr_assert_lt(mb[1], ma[1] * 0.8, "the last stage recomputes its segments too: %g vs %g bytes", mb[1], ma[1]);
    /* The timeline keeps one F, at most one R (stage 1's last segment is resident), and one B per
     * micro-batch, the R ending where the B starts. */
    size_t len;
    char *csv = tu_read_file(path, &len);
    cr_assert_not_null(csv);
    int nf[2] = {0}, nr[2] = {0}, nb[2] = {0};
    double r_end = -1.0;
    for (char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        long step;
        int d, s, r, mbi;
        char ph;
        double t0, t1;
        cr_assert_eq(sscanf(line, "%ld,%d,%d,%d,%d,%c,%lf,%lf", &step, &d, &s, &r, &mbi, &ph, &t0, &t1), 8);
        if (ph == 'F') nf[s]++;
        if (ph == 'R') nr[s]++, r_end = t1;
        if (ph == 'B') {
            nb[s]++;
            if (r_end >= 0.0) cr_assert_eq(t0, r_end, "B starts where R ends");
            r_end = -1.0;
        }
    }
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(nf[s], 2 * 8, "stage %d forwards", s);
        cr_assert_eq(nb[s], 2 * 8, "stage %d backwards", s);
    }
    cr_assert_eq(nr[0], 2 * 8, "stage 0 recomputes every micro-batch");
    cr_assert_eq(nr[1], 2 * 8, "stage 1 recomputes all but its resident last segment");
    free(csv);
    trace_free(&a), trace_free(&b);
    tu_rm_rf(dir);
    free(dir);
}

/* ---- half precision ---- */

static int on_bf16_grid(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        if (u & 0xffffu) return 0;
    }
    return 1;
}

Test(ipu, bf16_weights_train_close_to_fp32, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16), sb;
    /* The split is given: bf16 rounds the gradients crossing a stage boundary to 2 bytes, so the bits
     * depend on where the stages are cut, and a split balanced on layer times measured at prepare (a few
     * microseconds a block here) moved from block 2 to 3 under load and failed the repeat below (CI). */
    sp.stages = 2, sp.ga = 4, sp.replicas = 2, sp.batch = 32, sp.split = "2";
    sb = sp;
    sb.precision = "bf16";
    struct trace ref, a, a2;
    run_train(&sp, &ref);
    run_train(&sb, &a);
    run_train(&sb, &a2);
    cr_assert(on_bf16_grid(a.params, a.n_params), "bf16 weights off the bf16 grid");
    assert_bitwise(&a2, &a, sb.steps, "bf16 run twice (seeded stochastic rounding)");
    /* bf16 keeps ~3 significant digits: the losses follow fp32's loosely */
    for (int s = 0; s < sb.steps; s++)
        cr_assert(fabs(a.loss[s] - ref.loss[s]) <= 0.05 * fabs(ref.loss[s]), "step %d: bf16 %g fp32 %g", s + 1, a.loss[s],
                  ref.loss[s]);
    cr_assert_lt(a.loss[sb.steps - 1], a.loss[0], "bf16 training did not reduce the loss");
    sb.precision = "bf16m";
    struct trace m;
    run_train(&sb, &m);
    cr_assert(!on_bf16_grid(m.params, m.n_params), "fp32 master weights are reported, not the bf16 copy");
    trace_free(&ref), trace_free(&a), trace_free(&a2), trace_free(&m);
}

/* bf16 storage: each layer's output is rounded onto the bf16 grid as it is written, and every activation
 * a stage keeps for a micro-batch's backward is stored in 2 bytes, with an fp32 working slot and
 * gradient arena of one block. Measured activation memory: each micro-batch held costs at most ~half
 * of fp32's (gpipe holds 4 on stage 0, 1f1b 2), and every stage needs well under fp32's. Decoding the
 * store, or recomputing from 2-byte checkpoints, gives the same bits (both schedules, GroupNorm and
 * BatchNorm); and the numbers really are bf16's: the losses are not fp32's. */
Test(ipu, bf16_activation_store, .timeout = 120)
{
    const char *scheds[2] = {"1f1b", "gpipe"};
    /* Under ASan GroupNorm's under 1F1B only: half_recompute_stage_input_fits stores BatchNorm's effnet in 2 bytes
     * there, recomputed under both schedules and not under GPipe (whose four micro-batches held fill the most 2-byte
     * slots); the two schedules' memory against each other is the main build's. */
    for (int e = 1; e < (TU_UNDER_ASAN ? 2 : 3); e++) {
        double mem[2][2][2]; /* [schedule][fp32, bf16][stage] */
        for (int k = 0; k < (TU_UNDER_ASAN ? 1 : 2); k++) {
            struct spec sp = spec_of("ipu", e, 16);
            sp.stages = 2, sp.ga = 4, sp.split = "6", sp.steps = 1, sp.schedule = scheds[k];
            struct trace f32 = {0}, st, rc;
            /* One step: its first loss and its activations' peak, the same every step. Under ASan none: that run is
             * fp32's two stages under 1F1B (effnet_gn_s2_g4_r1_matches_cpu's), and the bf16 figures against it are
             * the main build's. */
            if (!TU_UNDER_ASAN) run_train(&sp, &f32);
            sp.steps = 2;
            sp.precision = "bf16";
            run_train(&sp, &st);
            char what[96];
            snprintf(what, sizeof what, "%s %s bf16 store vs recompute", e == 2 ? "effnet BN" : "effnet GN", scheds[k]);
            cr_log_info("%s: %s", what, st.desc);
            cr_assert(strstr(st.desc, "2-byte store (segments ") != NULL, "%s", st.desc);
            sp.recompute = 1;
            run_train(&sp, &rc);
            assert_bitwise(&rc, &st, sp.steps, what);
            cr_assert_eq(rc.eval_loss, st.eval_loss, "%s: eval loss", what);
            if (TU_UNDER_ASAN) {
                trace_free(&st), trace_free(&rc);
                continue;
            }
            cr_assert(st.loss[0] != f32.loss[0], "%s: the first loss is fp32's (%.9g)", what, st.loss[0]);
            for (int s = 0; s < 2; s++) {
                mem[k][0][s] = f32.rep.peak_act_bytes[s], mem[k][1][s] = st.rep.peak_act_bytes[s];
                cr_assert_lt(mem[k][1][s], 0.65 * mem[k][0][s], "%s: stage %d activations %.0f bytes vs %.0f in fp32",
                             what, s, mem[k][1][s], mem[k][0][s]);
            }
            trace_free(&f32), trace_free(&st), trace_free(&rc);
        }
        if (TU_UNDER_ASAN) continue;
        /* Stage 0: two more micro-batches held under gpipe than under 1f1b. */
        const double d32 = mem[1][0][0] - mem[0][0][0], d16 = mem[1][1][0] - mem[0][1][0];
        cr_assert_gt(d32, 0.0);
        cr_assert_lt(d16, 0.55 * d32, "a micro-batch held costs %.0f bytes in bf16, %.0f in fp32", d16 / 2, d32 / 2);
    }
}

/* Recomputation with half storage decodes a later stage's input checkpoint into the fp32 segment-input
 * buffer, which was sized for the segment boundaries only: at 32×32 with the split after layer 12,
 * stage 1's input (1,792 floats a sample-batch) is larger than any later boundary (1,280), so the
 * decode wrote past the buffer and the run aborted in free ("double free or corruption"). Both half
 * formats, both schedules; the result must also be bitwise the 2-byte store without recomputation. */
Test(ipu, half_recompute_stage_input_fits, .timeout = 120)
{
    const char *precs[2] = {"bf16", "fp16"};
    for (int k = 0; k < 2; k++) {
        struct spec sp = spec_of("ipu", 2, 16);
        /* Under ASan bf16's one step: the decode that overflowed runs in every step's backward, and each step
         * unpacks every layer's 2-byte weights once a micro-batch and pass, most of such a run's time there
         * (bf16_activation_store takes a second step of 2-byte checkpoints under 1F1B; GPipe's is fp16's here). */
        sp.resolution = 32, sp.stages = 2, sp.micro_batch = 4, sp.ga = 4, sp.split = "12";
        sp.steps = TU_UNDER_ASAN && !k ? 1 : 2;
        sp.precision = precs[k], sp.schedule = k ? "gpipe" : "1f1b";
        struct trace st = {0}, rc;
        /* Under ASan bf16's run without recomputation, the reference its bits are held to, is left out: the same
         * 2-byte store under 1F1B runs in bf16_activation_store there; the recomputing run that overflowed stays. */
        const int reference = !TU_UNDER_ASAN || k;
        if (reference) run_train(&sp, &st);
        sp.recompute = 1;
        run_train(&sp, &rc);
        cr_assert(strstr(rc.desc, "recompute (segments ") != NULL, "%s", rc.desc);
        if (reference) assert_bitwise(&rc, &st, sp.steps, precs[k]);
        trace_free(&st), trace_free(&rc);
    }
}

/* Half precision keeps the weights and the gradient accumulators in 2 bytes and the optimizer state per
 * layer: all leave and enter the canonical layout intact, so 2 steps, out, into a new backend, and 2
 * more are bitwise 4 straight (bf16 with stochastic rounding keyed by the step; bf16m with its fp32
 * master). Stored weights take 2 bytes each, against fp32's 4 (the master adds 4), and so do the
 * gradients the replicas all-reduce. */
Test(ipu, half_weights_round_trip_and_size, .timeout = 120)
{
    const char *precs[2] = {"bf16", "bf16m"};
    for (int e = 0; e < 2; e++) {
        struct spec sp = spec_of("ipu", e, e ? 8 : 16);
        sp.stages = 2, sp.ga = 4, sp.split = e ? "6" : "1", sp.steps = 1;
        struct trace f32 = {0};
        /* One step: what it is read for, the bytes each stage stores, is fixed at prepare. Under ASan the MLP's sizes
         * only (the accounting is the same code for any model); EfficientNet's are the main build's. */
        const int sizes = !TU_UNDER_ASAN || !e;
        if (sizes) run_train(&sp, &f32);
        /* Under ASan 1 + 1 steps against 2: the state leaves and enters the backends the same way after any
         * step, and each step unpacks every layer's 2-byte weights once a micro-batch and pass, most of a run's
         * time there. */
        const int h = TU_UNDER_ASAN ? 1 : 2;
        sp.steps = 2 * h;
        /* Under ASan the MLP's bf16 and the effnet's bf16m only: bf16m's 2-byte windows are bf16's, with the fp32
         * master beside them. */
        for (int q = TU_UNDER_ASAN && e ? 1 : 0; q < (TU_UNDER_ASAN && !e ? 1 : 2); q++) {
            sp.precision = precs[q];
            struct spec a = sp, b = sp;
            a.steps = b.steps = h, a.total = b.total = 2 * h;
            b.first = h;
            struct trace whole, t1, t2;
            run_train(&sp, &whole);
            run_train(&a, &t1);
            b.from = &t1;
            run_train(&b, &t2);
            char what[64];
            snprintf(what, sizeof what, "%s %s %d + %d steps", e ? "effnet GN" : "mlp", precs[q], h, h);
            for (int k = 0; k < h; k++)
                cr_assert(memcmp(&t2.loss[k], &whole.loss[h + k], sizeof(double)) == 0,
                          "%s: loss at step %d %.17g != %.17g", what, h + 1 + k, t2.loss[k], whole.loss[h + k]);
            tu_assert_bitwise(t2.params, whole.params, whole.n_params, what);
            tu_assert_bitwise(t2.opt, whole.opt, whole.n_opt, what);
            for (int s = 0; s < 2 && sizes; s++) {
                cr_assert_eq(whole.rep.weight_bytes[s], (q ? 1.5 : 0.5) * f32.rep.weight_bytes[s],
                             "%s: stage %d stores %.0f bytes of weights, fp32 %.0f", what, s, whole.rep.weight_bytes[s],
                             f32.rep.weight_bytes[s]);
                cr_assert_eq(whole.rep.weight_window_bytes[s] > 0.0, whole.rep.weight_bytes[s] > 0.0, "%s: window", what);
                cr_assert_eq(f32.rep.weight_window_bytes[s], 0.0);
                cr_assert_eq(whole.rep.param_bytes[s], 0.5 * f32.rep.param_bytes[s], "%s: 2-byte gradients", what);
            }
            trace_free(&whole), trace_free(&t1), trace_free(&t2);
        }
        trace_free(&f32);
    }
}

/* Fashion-MNIST test accuracy of mnist-mlp after one epoch (1,875 steps of 32) on ipu S=2, G=4 at
 * precision prec; the two sets come from the caller. After a quarter epoch bf16's accuracy still moved
 * with where its stochastic rounding fell: 0.7845–0.8075 over the four splits against fp32's 0.7978, so
 * the given split passed by 0.0003 of the 0.01 allowed; after one epoch the splits reach 0.8400–0.8455
 * against 0.8432. */
static double mlp_test_accuracy(const char *prec, const struct dataset *tr, const struct dataset *te)
{
    struct spec sp = spec_of("ipu", 0, 32);
    /* The split is given, as the one the layer times measured at prepare choose on an idle machine: bf16
     * rounds what crosses the stage boundary to 2 bytes, so the cut moves the bf16 run's bits. Here it moves
     * the accuracy too: split 1, 2, 3, 4 reach 0.8054, 0.8075, 0.7845, 0.7904 against fp32's 0.7978 (split-
     * independent), and a timed cut that moved under load from block 2 to 3 (bf16_weights_train_close_to_fp32
     * saw it in CI) would fail this test. */
    sp.stages = 2, sp.ga = 4, sp.precision = prec, sp.steps = 1875, sp.split = "2";
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    cr_assert_geq(tr->n, sp.steps * sp.batch);
    int32_t *ytr = malloc(sizeof *ytr * (size_t)tr->n), *yte = malloc(sizeof *yte * (size_t)te->n);
    cr_assert(ytr && yte);
    for (int i = 0; i < tr->n; i++) ytr[i] = tr->labels[i];
    for (int i = 0; i < te->n; i++) yte[i] = te->labels[i];
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK);
    struct run_config cfg;
    fill_config(&sp, w, &cfg);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *p = tu_fvec(m.n_params), *opt = tu_fvec(m.n_params * (size_t)optim_state_per_param(cfg.optim.kind));
    float *buf = tu_fvec(m.n_buffers + 1);
    w->init(&m, p, buf, 42);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, p), TB_OK);
    cr_assert_eq(backend_set_tensors(&b, TF_OPT, opt), TB_OK);
    const size_t per = (size_t)H * W * C;
    for (int k = 0; k < sp.steps; k++) {
        struct batch bt = {sp.batch, tr->images + (size_t)k * sp.batch * per, ytr + (size_t)k * sp.batch};
        struct step_stats st;
        cr_assert_eq(backend_train_step(&b, &bt, k + 1, &st), TB_OK, "%s step %d: %s", prec, k + 1, tb_error_get());
    }
    struct batch all = {te->n, te->images, yte};
    struct eval_stats ev = {0};
    cr_assert_eq(backend_evaluate(&b, &all, &ev), TB_OK, "%s", tb_error_get());
    backend_destroy(&b);
    free(p), free(opt), free(buf), free(ytr), free(yte);
    model_free(&m);
    return (double)ev.correct / (double)ev.n;
}

/* Issue 5's equivalence for half precision: bf16 with stochastic rounding (weights, activations and
 * gradients in 2 bytes) reaches fp32's test accuracy within 1 point. */
Test(ipu, bf16_mlp_accuracy_within_a_point_of_fp32, .timeout = 120)
{
    TU_SKIP_UNDER_ASAN("two epochs of mnist-mlp on ipu");
    struct stat sb;
    if (stat(DATASET_DEFAULT_DIR, &sb) != 0) cr_skip_test("%s not installed (dataset-fashion-mnist)", DATASET_DEFAULT_DIR);
    struct dataset tr, te;
    cr_assert_eq(dataset_load_dir(DATASET_DEFAULT_DIR, 1, &tr), TB_OK, "%s", tb_error_get());
    cr_assert_eq(dataset_load_dir(DATASET_DEFAULT_DIR, 0, &te), TB_OK, "%s", tb_error_get());
    const double a32 = mlp_test_accuracy("fp32", &tr, &te), a16 = mlp_test_accuracy("bf16", &tr, &te);
    cr_log_info("mnist-mlp Fashion-MNIST test accuracy (10,000 samples): fp32 %.4f, bf16 %.4f", a32, a16);
    cr_assert_gt(a32, 0.6, "fp32 did not learn (%.3f): the comparison would say nothing", a32);
    cr_assert(fabs(a16 - a32) <= 0.01, "bf16 %.4f vs fp32 %.4f", a16, a32);
    dataset_free(&tr), dataset_free(&te);
}

Test(ipu, fp16_trains_with_loss_scaling, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.precision = "fp16";
    struct trace t;
    run_train(&sp, &t);
    cr_assert(strstr(t.desc, "loss scale 32768") != NULL, "%s", t.desc);
    cr_assert_lt(t.loss[sp.steps - 1], t.loss[0]);
    for (size_t i = 0; i < t.n_params; i++)
        cr_assert_eq(t.params[i], (float)(_Float16)t.params[i], "param %zu %.9g is not an fp16 value", i,
                     (double)t.params[i]);
    trace_free(&t);
}

/* fp16 overflow: the classifier's weights (after the split) blown up 1024× make the gradient crossing
 * the exchange overflow at the loss scale while every activation, logits included, stays inside fp16's
 * range (activations are stored in fp16 too); the step is skipped on every device (parameters
 * unchanged) and the scale halves. */
Test(ipu, fp16_overflow_skips_step_and_halves_scale, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.replicas = 1, sp.precision = "fp16", sp.split = "2";
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(16, H, W, C, 10, 7, 1, &ds), TB_OK);
    int32_t y[16];
    for (int i = 0; i < 16; i++) y[i] = ds.labels[i];
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK);
    struct run_config cfg;
    fill_config(&sp, w, &cfg);
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *p0 = tu_fvec(m.n_params), *p1 = tu_fvec(m.n_params), *buf = tu_fvec(m.n_buffers);
    w->init(&m, p0, buf, 42);
    for (int k = 0; k < m.n_entries; k++)
        if (m.layers[m.params[k].layer].out == m.logits && m.params[k].kind == PARAM_WEIGHT)
            for (size_t i = 0; i < m.params[k].n; i++) p0[m.params[k].off + i] *= 1024.0f;
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, p0), TB_OK);
    cr_assert_eq(backend_get_tensors(&b, TF_PARAMS, p0), TB_OK); /* as stored: fp16 */
    struct batch bt = {16, ds.images, y};
    struct step_stats st;
    cr_assert_eq(backend_train_step(&b, &bt, 1, &st), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_get_tensors(&b, TF_PARAMS, p1), TB_OK);
    tu_assert_bitwise(p1, p0, m.n_params, "parameters after an overflowed step");
    char desc[512];
    backend_describe(&b, desc, sizeof desc);
    cr_assert(strstr(desc, "loss scale 16384 (dynamic, 1 steps skipped)") != NULL, "%s", desc);
    free(p0), free(p1), free(buf);
    backend_destroy(&b);
    dataset_free(&ds);
    model_free(&m);
}

/* --loss-scale N: a fixed scale trains fp16 like the dynamic one and never moves. */
Test(ipu, fp16_static_loss_scale_trains, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.precision = "fp16", sp.loss_scale = 1024.0f;
    struct trace t;
    run_train(&sp, &t);
    cr_assert(strstr(t.desc, "loss scale 1024 (static, 0 steps skipped)") != NULL, "%s", t.desc);
    cr_assert_lt(t.loss[sp.steps - 1], t.loss[0], "static loss scale: the loss did not fall");
    for (size_t i = 0; i < t.n_params; i++)
        cr_assert_eq(t.params[i], (float)(_Float16)t.params[i], "param %zu is not an fp16 value", i);
    trace_free(&t);
}

/* An injected overflow: a static scale of 1e30 makes every gradient crossing the exchange overflow
 * fp16, so every step is skipped (and counted), the parameters and optimizer state stay as set, and a
 * static scale is not lowered. */
Test(ipu, fp16_static_overflow_skips_steps_keeps_scale, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.precision = "fp16", sp.loss_scale = 1e30f, sp.steps = 3;
    struct trace t;
    run_train(&sp, &t);
    cr_assert(strstr(t.desc, "loss scale 1e+30 (static, 3 steps skipped)") != NULL, "%s", t.desc);
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    float *p0 = tu_fvec(m.n_params), *buf = tu_fvec(m.n_buffers), *zero = tu_fvec(t.n_opt);
    w->init(&m, p0, buf, sp.seed);
    for (size_t i = 0; i < m.n_params; i++) p0[i] = (float)(_Float16)p0[i]; /* as an fp16 device stores them */
    tu_assert_bitwise(t.params, p0, m.n_params, "parameters after three overflowed steps");
    tu_assert_bitwise(t.opt, zero, t.n_opt, "optimizer state after three overflowed steps");
    for (int s = 0; s < sp.steps; s++) cr_assert(isfinite(t.loss[s]), "the forward is fine: loss %g", t.loss[s]);
    free(p0), free(buf), free(zero);
    model_free(&m);
    trace_free(&t);
}

/* Trains sp's model from its seeded parameters for up to max_steps fp16 steps on synthetic data with
 * optimizer lr (0: the spec's); returns the 1-based step whose train_step failed (0: none) and its status. */
static int fp16_steps_until_failure(const struct spec *sp, float lr, int max_steps, int *status)
{
    struct model m;
    int H, W, C;
    const struct workload *w = build_model(sp, &m, &H, &W, &C);
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(sp->batch * 4, H, W, C, 10, 7, 1, &ds), TB_OK);
    int32_t *y = malloc(sizeof *y * (size_t)ds.n);
    for (int i = 0; i < ds.n; i++) y[i] = ds.labels[i];
    struct backend b;
    cr_assert_eq(backend_create(&b, "ipu"), TB_OK);
    struct run_config cfg;
    fill_config(sp, w, &cfg);
    cfg.optim.kind = OPTIM_SGD, cfg.optim.total_steps = max_steps;
    if (lr > 0.0f) cfg.optim.lr = lr;
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s", tb_error_get());
    float *p0 = tu_fvec(m.n_params), *buf = tu_fvec(m.n_buffers);
    w->init(&m, p0, buf, 42);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, p0), TB_OK);
    int failed = 0;
    *status = TB_OK;
    const size_t per = (size_t)H * W * C;
    for (int s = 1; s <= max_steps && !failed; s++) {
        const size_t at = (size_t)((s - 1) % 4) * sp->batch;
        struct batch bt = {sp->batch, ds.images + at * per, y + at};
        struct step_stats st;
        *status = backend_train_step(&b, &bt, s, &st);
        if (*status != TB_OK) {
            failed = s;
            cr_assert(st.nonfinite, "a diverged step says its gradients were not finite");
        }
    }
    free(p0), free(buf), free(y);
    backend_destroy(&b);
    dataset_free(&ds);
    model_free(&m);
    return failed;
}

/* fp16 whose every step overflows trains nothing: with a static scale (1e30) the run is diverged after
 * 10 overflowed steps in a row, not "ok" after skipping them all; with the dynamic scale (SGD at lr
 * 1e3, the probe's recipe) once the scale has fallen to 1 and 10 more steps overflowed. A few
 * overflowed steps are still only skipped (fp16_static_overflow_skips_steps_keeps_scale). */
Test(ipu, fp16_overflow_every_step_is_diverged, .timeout = 60)
{
    struct spec sp = spec_of("ipu", 0, 16);
    sp.stages = 2, sp.ga = 4, sp.precision = "fp16", sp.loss_scale = 1e30f;
    int status;
    cr_assert_eq(fp16_steps_until_failure(&sp, 0.0f, 30, &status), 10, "static 1e30: diverged at step 10");
    cr_assert_eq(status, TB_EDIVERGED, "%s", tb_error_get());
    cr_assert(strstr(tb_error_get(), "overflowed on 10 steps in a row") != NULL, "%s", tb_error_get());
    sp.loss_scale = 0.0f;
    const int at = fp16_steps_until_failure(&sp, 1e3f, 60, &status);
    cr_assert(at > 15 && at <= 60, "dynamic scale at lr 1e3: diverged at step %d (the scale halves 15 times first)",
              at);
    cr_assert_eq(status, TB_EDIVERGED, "%s", tb_error_get());
}

/* The bench option: dynamic, or a static scale in [1, 1e30]; anything else a usage error naming it. */
Test(ipu, loss_scale_option)
{
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(c.run.ipu.loss_scale, 0.0f, "dynamic by default");
    cr_assert_eq(bench_config_set(&c, "loss-scale", "1024"), TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.run.ipu.loss_scale, 1024.0f);
    cr_assert_eq(bench_config_set(&c, "loss-scale", "1e30"), TB_OK, "%s", tb_error_get());
    cr_assert_eq(c.run.ipu.loss_scale, 1e30f);
    cr_assert_eq(bench_config_set(&c, "loss-scale", "dynamic"), TB_OK);
    cr_assert_eq(c.run.ipu.loss_scale, 0.0f);
    const char *bad[] = {"0.5", "0", "-4", "1e31", "inf", "nan", "12x", "static", ""};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tb_error_clear();
        cr_assert_eq(bench_config_set(&c, "loss-scale", bad[k]), TB_EINVAL, "'%s' accepted", bad[k]);
        cr_assert(strstr(tb_error_get(), "--loss-scale") != NULL, "%s", tb_error_get());
        cr_assert_eq(c.run.ipu.loss_scale, 0.0f, "'%s' changed the setting", bad[k]);
    }
}

Test(ipu, precision_conversions)
{
    const float x[6] = {1.0f, -2.5f, 1.00390625f /* 1 + 2^-8: a bf16 tie, rounds to even */, 1.0e-8f, 70000.0f, 0.1f};
    uint16_t h[6];
    float back[6];
    stage_prec_pack(h, x, 6, STAGE_PREC_BF16, 1.0f);
    cr_assert_eq(stage_prec_unpack(back, h, 6, STAGE_PREC_BF16, 1.0f), 0);
    cr_assert_eq(back[0], 1.0f);
    cr_assert_eq(back[1], -2.5f);
    cr_assert_eq(back[2], 1.0f);
    cr_assert_float_eq(back[5], 0.1f, 1e-3);
    /* fp16: 70000 overflows to inf and is reported; 1e-8 survives only when scaled up */
    stage_prec_pack(h, x, 6, STAGE_PREC_FP16, 1.0f);
    cr_assert_eq(stage_prec_unpack(back, h, 6, STAGE_PREC_FP16, 1.0f), 1);
    cr_assert(isinf(back[4]));
    cr_assert_eq(back[3], 0.0f);
    stage_prec_pack(h, x, 4, STAGE_PREC_FP16, 1024.0f);
    cr_assert_eq(stage_prec_unpack(back, h, 4, STAGE_PREC_FP16, 1.0f / 1024.0f), 0);
    cr_assert_float_eq(back[3], 1.0e-8f, 1e-10);
    /* stochastic rounding is unbiased and lands on the grid; counter-based: reproducible */
    const int n = 20000;
    float *v = tu_fvec((size_t)n), *w = tu_fvec((size_t)n);
    for (int p = 0; p < 2; p++) {
        const enum stage_prec pr = p ? STAGE_PREC_FP16 : STAGE_PREC_BF16;
        const float val = 1.0f + 1.0f / 3.0f * (p ? 0x1p-10f : 0x1p-7f); /* a third of an ulp above 1 */
        for (int i = 0; i < n; i++) v[i] = w[i] = val;
        stage_prec_round(v, (size_t)n, pr, 1, 9, 5, 0);
        stage_prec_round(w, (size_t)n, pr, 1, 9, 5, 0);
        tu_assert_bitwise(v, w, (size_t)n, "stochastic rounding twice");
        double mean = 0;
        int up = 0;
        for (int i = 0; i < n; i++) {
            mean += v[i];
            up += v[i] > 1.0f;
            cr_assert(v[i] == 1.0f || v[i] == 1.0f + (p ? 0x1p-10f : 0x1p-7f), "not on the grid: %.9g", (double)v[i]);
        }
        mean /= n;
        cr_assert(fabs((double)up / n - 1.0 / 3.0) < 0.02, "%s: rounded up %d of %d", stage_prec_name(pr), up, n);
        cr_assert(fabs(mean - val) < 2e-4 * val);
    }
    free(v), free(w);
}

/* ---- planning ---- */

Test(ipu, schedules_are_well_formed)
{
    struct ipu_plan p = {.S = 4, .G = 8};
    struct ipu_op ops[16];
    for (int sched = 0; sched < 2; sched++) {
        p.sched = sched ? IPU_SCHED_GPIPE : IPU_SCHED_1F1B;
        for (int s = 0; s < 4; s++) {
            cr_assert_eq(ipu_plan_ops(&p, s, ops), 16);
            int seen_f[8] = {0}, seen_b[8] = {0}, nextf = 0, nextb = 0;
            for (int k = 0; k < 16; k++) {
                /* every micro-batch once forward then once backward, each in ascending order */
                if (ops[k].fwd) {
                    cr_assert_eq(ops[k].mb, nextf);
                    nextf++;
                    seen_f[ops[k].mb]++;
                } else {
                    cr_assert(seen_f[ops[k].mb]);
                    cr_assert_eq(ops[k].mb, nextb);
                    nextb++;
                    seen_b[ops[k].mb]++;
                }
            }
            for (int i = 0; i < 8; i++) cr_assert(seen_f[i] == 1 && seen_b[i] == 1);
            const int want = s == 3 ? 1 : sched ? 8 : 4 - s;
            cr_assert_eq(ipu_plan_in_flight(&p, s), want, "%s stage %d in flight", ipu_schedule_name(p.sched), s);
        }
    }
    cr_assert_float_eq(ipu_plan_ideal_bubble(&p), 3.0 / 11.0, 1e-12);
}

Test(ipu, balance_follows_measured_costs)
{
    struct model m;
    struct spec sp = spec_of("ipu", 0, 16);
    int H, W, C;
    build_model(&sp, &m, &H, &W, &C);
    cr_assert_eq(m.n_blocks, 5);
    double *tf = tu_dvec((size_t)m.n_layers), *tb = tu_dvec((size_t)m.n_layers);
    /* all the cost in the first dense layer (block 1): it must sit alone against the rest */
    for (int i = 0; i < m.n_layers; i++) tf[i] = tb[i] = m.layers[i].block == 1 ? 10.0 : 0.1;
    struct ipu_plan p = {.S = 2, .G = 4};
    ipu_plan_balance(&p, &m, tf, tb);
    cr_assert(p.first_block[1] == 2, "split at block %d", p.first_block[1]);
    for (int i = 0; i < m.n_layers; i++) tf[i] = tb[i] = m.layers[i].block == 4 ? 10.0 : 0.1;
    ipu_plan_balance(&p, &m, tf, tb);
    cr_assert_eq(p.first_block[1], 4);
    cr_assert_eq(p.l0[1], 4, "block 4 starts at layer 4 (input, dense×3 before it)");
    p.S = 5;
    ipu_plan_balance(&p, &m, tf, tb);
    for (int s = 0; s < 5; s++) cr_assert_eq(p.first_block[s], s);
    free(tf), free(tb);
    model_free(&m);
}

/* Recomputation segments: whole blocks, in order, tiling the stage; the chosen cut's peak (two
 * segment arenas + the checkpoints of every micro-batch held) is no worse than one segment or one per
 * block. */
Test(ipu, segments_tile_stages_at_block_boundaries)
{
    for (int e = 0; e < 2; e++) {
        struct model m;
        struct spec sp = spec_of("ipu", e, 8);
        int H, W, C;
        build_model(&sp, &m, &H, &W, &C);
        for (int sched = 0; sched < 2; sched++) {
            struct ipu_plan p = {.S = 2, .G = 4, .B = 2, .recompute = 1};
            p.sched = sched ? IPU_SCHED_GPIPE : IPU_SCHED_1F1B;
            p.first_block[1] = e ? 6 : 2, p.first_block[2] = m.n_blocks;
            ipu_plan_set_layers(&p, &m);
            int *cuts = calloc((size_t)m.n_blocks + 2, sizeof *cuts);
            char *work = malloc((size_t)m.n_tensors);
            for (int s = 0; s < 2; s++) {
                const int K = ipu_plan_segments(&p, &m, s, cuts);
                const int nb = p.first_block[s + 1] - p.first_block[s];
                cr_assert(K >= 1 && K <= nb, "stage %d: %d segments of %d blocks", s, K, nb);
                cr_assert_eq(cuts[0], p.l0[s]);
                cr_assert_eq(cuts[K], p.l0[s + 1]);
                double peak = 0, ck = 0, per_block = 0, ck_all = 0;
                for (int k = 0; k < K; k++) {
                    cr_assert_lt(cuts[k], cuts[k + 1], "segment %d empty", k);
                    if (k > 0) {
                        cr_assert_neq(m.layers[cuts[k]].block, m.layers[cuts[k] - 1].block, "cut inside a block");
                        ck += (double)exec_boundary_floats(&m, cuts[k], p.B, 0);
                    }
                    const double a = (double)ipu_plan_range_act_floats(&m, cuts[k], cuts[k + 1], p.B, work);
                    if (a > peak) peak = a;
                }
                /* the range size is what a stage plan of the range allocates */
                struct ipu_stage_model sm;
                cr_assert_eq(ipu_stage_model_init(&sm, &m, p.l0[s], p.l0[s + 1]), TB_OK);
                const double one = (double)ipu_plan_range_act_floats(&m, p.l0[s], p.l0[s + 1], p.B, work);
                cr_assert_eq(one, (double)model_act_floats(&sm.m, p.B), "range floats disagree with the stage plan");
                ipu_stage_model_free(&sm);
                int start = p.l0[s];
                for (int i = p.l0[s] + 1; i <= p.l0[s + 1]; i++)
                    if (i == p.l0[s + 1] || m.layers[i].block != m.layers[i - 1].block) {
                        const double a = (double)ipu_plan_range_act_floats(&m, start, i, p.B, work);
                        if (a > per_block) per_block = a;
                        if (i < p.l0[s + 1]) ck_all += (double)exec_boundary_floats(&m, i, p.B, 0);
                        start = i;
                    }
                const double held = ipu_plan_in_flight(&p, s);
                const double mine = 2 * peak + held * ck;
                cr_assert_leq(mine, 2 * one, "stage %d: worse than one segment", s);
                cr_assert_leq(mine, 2 * per_block + held * ck_all, "stage %d: worse than a segment per block", s);
            }
            free(cuts), free(work);
        }
        model_free(&m);
    }
}

static void run1(void *ctx, void (*fn)(void *, int, int), void *arg)
{
    (void)ctx;
    fn(arg, 0, 1);
}

/* The executor's stage boundaries: two stage instances exchanging in_act / out_dact reproduce the
 * whole-model forward and backward bitwise (same samples, no micro-batching). */
Test(ipu, exec_stage_boundaries_bitwise)
{
    struct model m;
    struct spec sp = spec_of("ipu", 1, 4);
    int H, W, C;
    const struct workload *w = build_model(&sp, &m, &H, &W, &C);
    const int n = 3;
    int cut = 0;
    for (int i = 0; i < m.n_layers; i++)
        if (m.layers[i].block == 5) {
            cut = i;
            break;
        }
    cr_assert_gt(cut, 0);
    int ids[8];
    cr_assert_eq(exec_boundary_tensors(&m, cut, ids, 8), 1, "one tensor crosses a block boundary");
    float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers);
    w->init(&m, params, buffers, 5);
    uint8_t *x = malloc((size_t)n * H * W * C);
    int32_t y[3] = {1, 7, 3};
    for (int i = 0; i < n * H * W * C; i++) x[i] = (uint8_t)(rng_hash(1, 2, (uint64_t)i) & 255);
    /* whole model */
    struct model_inst full = {.m = &m, .n_max = n};
    full.params = params, full.buffers = tu_fvec(m.n_buffers), full.grads = tu_fvec(m.n_params);
    full.acts = tu_fvec(model_act_floats(&m, n)), full.dacts = tu_fvec(model_act_floats(&m, n));
    full.losses = tu_fvec(n), full.correct = calloc(n, 1), full.labels = calloc(n, 4);
    struct model_inst part[2];
    struct ipu_stage_model sm[2];
    cr_assert_eq(ipu_stage_model_init(&sm[0], &m, 0, cut), TB_OK);
    cr_assert_eq(ipu_stage_model_init(&sm[1], &m, cut, m.n_layers), TB_OK);
    float *grads2 = tu_fvec(m.n_params), *buf2 = tu_fvec(m.n_buffers);
    for (int k = 0; k < 2; k++) {
        part[k] = (struct model_inst){.m = &sm[k].m, .n_max = n, .params = params, .grads = grads2, .buffers = buf2};
        cr_assert_lt(model_act_floats(&sm[k].m, n), model_act_floats(&m, n), "a stage slot holds only its stage");
        part[k].acts = tu_fvec(model_act_floats(&sm[k].m, n)), part[k].dacts = tu_fvec(model_act_floats(&sm[k].m, n));
        part[k].losses = tu_fvec(n), part[k].correct = calloc(n, 1), part[k].labels = calloc(n, 4);
    }
    struct exec_step st = {.n = n, .n_global = n, .step = 1, .seed = 3, .training = 1, .x = x, .y = y, .l0 = 0,
                           .l1 = m.n_layers};
    /* im2col everywhere (exec_prepare with a forced algorithm does not measure) */
    struct exec_runner r1 = {run1, NULL, NULL, 1};
    cr_assert_eq(exec_prepare(&full, &r1, "im2col", NULL), TB_OK);
    cr_assert_eq(exec_prepare(&part[0], &r1, "im2col", &full), TB_OK);
    cr_assert_eq(exec_prepare(&part[1], &r1, "im2col", &full), TB_OK);
    exec_forward(&full, &st, 0, 1, NULL);
    exec_backward(&full, &st, 0, 1, NULL);
    /* stage 0 forward, pack its boundary, stage 1 forward + backward, pack the gradient, stage 0 backward */
    const size_t fa = exec_boundary_floats(&m, cut, n, 0), fg = exec_boundary_floats(&m, cut, n, 1);
    float *act = tu_fvec(fa), *grad = tu_fvec(fg);
    struct exec_step s0 = st, s1 = st;
    s0.l1 = cut, s1.l0 = cut;
    exec_forward(&part[0], &s0, 0, 1, NULL);
    memcpy(act, exec_act(&part[0], ids[0]), (size_t)n * m.tensors[ids[0]].per_sample * sizeof(float));
    s1.in_act = act;
    exec_forward(&part[1], &s1, 0, 1, NULL);
    exec_backward(&part[1], &s1, 0, 1, NULL);
    memcpy(grad, exec_dact(&part[1], ids[0]), (size_t)n * m.tensors[ids[0]].per_sample * sizeof(float));
    s0.out_dact = grad;
    exec_backward(&part[0], &s0, 0, 1, NULL);
    tu_assert_bitwise(part[1].losses, full.losses, n, "losses");
    tu_assert_bitwise(grads2, full.grads, m.n_params, "parameter gradients");
    free(act), free(grad), free(x), free(params), free(buffers), free(grads2), free(buf2);
    for (int k = 0; k < 2; k++) {
        exec_release(&part[k]);
        free(part[k].acts), free(part[k].dacts), free(part[k].losses), free(part[k].correct), free(part[k].labels);
    }
    exec_release(&full);
    free(full.buffers), free(full.grads), free(full.acts), free(full.dacts), free(full.losses), free(full.correct);
    free(full.labels);
    for (int k = 0; k < 2; k++) ipu_stage_model_free(&sm[k]);
    model_free(&m);
}
