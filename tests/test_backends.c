/* test_backends.c — backend equivalence over the registry, on the MNIST MLP and a synthetic set.
 *
 * Every registered backend (one parameterized test instance each, so a new backend is tested
 * automatically and one failing backend does not hide another) trains mnist-mlp from the same seeded
 * initial parameters (workload init → backend_set_tensors) on the same batches for K = 20 steps, at
 * batch 16 and batch 1 (in the arrangement that takes one sample: ipu on one stage, mirrored on one
 * device; a configuration refused at prepare fails the test), against the `cpu` backend (a backend tied
 * to another device, cuda, is skipped where that device is absent, and left out of the bitwise
 * comparisons with cpu: tests/test_cuda.c compares it; cpu's own instance is skipped, cpu against cpu
 * checking nothing):
 *   - step by step from cpu's exact state (params and optimizer state set before every step): the
 *     loss and the summed gradients within 1e-5 relative, and the update, given cpu's gradients,
 *     bitwise equal (every backend applies the same element-wise optimizer);
 *   - free-running with backend_train_step (the real path, fused steps included): the same
 *     trajectory within 1e-2. Tighter is ill-posed here: a backend that sums in another order
 *     (mirrored's all-reduce) agrees to ~1e-7 until a ReLU pre-activation crosses zero in one run and
 *     not in the other (step 12 on this data), after which the runs separate chaotically (Adam turns
 *     tiny gradient differences into ±lr updates); the per-step checks above carry the precision.
 * Degenerate and repeatable configurations are bitwise: `threads` with any thread count equals `cpu`
 * (the kernel contract: bitwise for any nth); every backend with one thread, device, stage and
 * replica equals `cpu`; the fused batch-1 step equals the unfused one
 * (run_config.no_fuse) in params and optimizer state; the same seed twice gives the same bits; a run of
 * steps (backend_stage_steps once, backend_run_steps in runs of 7, 1 and 12: the cuda device's own loop at
 * batch 1, else the steps one by one) gives backend_train_step's bits, for every backend.
 * Also: backend_create on an unknown name fails with TB_EINVAL and the valid names listed; mirrored's and ipu's
 * replicas (one-core devices) give a 2-core machine's bits on a 16-core one (effnet-b0, a child process as the
 * 2-core machine); mirrored with one device and --sync-bn is cpu's bits (effnet-b0); --sync-bn on a model without
 * BatchNorm is refused; ipu's automatic micro-batching, declining a batch --ga would take, names the options that run it.
 * --loss-scale where no loss is scaled, --device cpu with the cuda backend and a --conv-algo choice on the cuda device
 * are refused; on the cuda device a bf16m checkpoint resumes under bf16 (bench_emu in test_backends_emu).
 * Threaded tests carry a timeout so a deadlocked pool fails instead of hanging.
 */
#include "test_util.h"

#include "test_ckpt_meta.h"
#include "test_reliability_util.h"

#include <criterion/parameterized.h>

#include "backend.h"
#include "run.h"
#include "status.h"
#include "workload.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { K_STEPS = 20, IMG = 28 };

/* A run: which backend and how it is configured. */
struct run_spec {
    const char *backend;
    int batch;
    int n_threads;  /* threads backend (0 = all cores) */
    int n_devices;  /* mirrored (0 = all cores) */
    int stages, replicas, micro_batch, ga; /* ipu (0 = its defaults) */
    int no_fuse;
    uint64_t seed;
    struct optim_config optim;
    int peek_step;  /* run_train reads the parameters and evaluates after this step (0: never) */
};

static struct run_spec spec_default(const char *backend, int batch)
{
    struct run_spec s = {.backend = backend, .batch = batch, .seed = 42};
    optim_config_defaults(&s.optim, OPTIM_ADAM);
    s.optim.lr = workload_mnist_mlp.lr;
    return s;
}

/* Batch 1 for backend: its defaults split a batch (ipu: 2 stages want at least 4 micro-batches; mirrored:
 * a replica per core), so it gets the arrangement that takes one sample, one stage and one device, and is
 * compared rather than refused. */
static struct run_spec spec_batch1(const char *backend)
{
    struct run_spec s = spec_default(backend, 1);
    if (backend_takes_option(backend, "stages")) s.stages = 1;
    const struct backend_entry *e = backend_find(backend);
    if (e && e->caps.replicas_are_devices) s.n_devices = 1;
    return s;
}

/* spec_default at batch 16, spec_batch1 at batch 1. */
static struct run_spec spec_for(const char *backend, int batch)
{
    return batch == 1 ? spec_batch1(backend) : spec_default(backend, batch);
}

/* A prepared backend with the model and the data it trains on. */
struct setup {
    struct model m;
    struct dataset ds;
    int32_t *labels;   /* (ds.n) */
    struct backend b;
    int batch;
    size_t n_params, n_opt;
};

/* Builds mnist-mlp, a synthetic set of K_STEPS batches, and backend sp->backend prepared for it,
 * loaded with the workload's seeded initial parameters and zeroed optimizer state. */
static void setup_init(struct setup *S, const struct run_spec *sp)
{
    memset(S, 0, sizeof *S);
    S->batch = sp->batch;
    struct workload_opts o = {.classes = 10, .in_h = IMG, .in_w = IMG, .in_c = 1, .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_mnist_mlp.build(&S->m, &o), TB_OK, "mnist-mlp build: %s", tb_error_get());
    /* The data do not depend on the run's seed, so two seeds differ only in initialisation. */
    cr_assert_eq(dataset_synthetic(K_STEPS * sp->batch, IMG, IMG, 1, 10, 7, 1, &S->ds), TB_OK, "%s", tb_error_get());
    S->labels = malloc((size_t)S->ds.n * sizeof *S->labels);
    cr_assert_not_null(S->labels);
    for (int i = 0; i < S->ds.n; i++) S->labels[i] = S->ds.labels[i];

    cr_assert_eq(backend_create(&S->b, sp->backend), TB_OK, "backend_create(%s): %s", sp->backend, tb_error_get());
    struct run_config cfg = {0};
    cfg.batch = sp->batch;
    cfg.eval_batch = sp->batch;
    cfg.seed = sp->seed;
    cfg.optim = sp->optim;
    cfg.optim.total_steps = K_STEPS;
    cfg.n_threads = sp->n_threads;
    cfg.n_devices = sp->n_devices;
    cfg.ipu.stages = sp->stages, cfg.ipu.replicas = sp->replicas, cfg.ipu.micro_batch = sp->micro_batch;
    cfg.ipu.ga = sp->ga;
    cfg.no_fuse = sp->no_fuse;
    /* No refusal is accepted: a configuration refused would leave nothing compared. */
    int st = backend_prepare(&S->b, &S->m, &cfg);
    cr_assert_eq(st, TB_OK, "backend_prepare(%s, batch %d): %s", sp->backend, sp->batch, tb_error_get());

    S->n_params = S->m.n_params;
    S->n_opt = S->m.n_params * (size_t)optim_state_per_param(sp->optim.kind);
    float *params = tu_fvec(S->n_params), *buffers = tu_fvec(S->m.n_buffers), *opt = tu_fvec(S->n_opt);
    workload_mnist_mlp.init(&S->m, params, buffers, sp->seed);
    cr_assert_eq(backend_set_tensors(&S->b, TF_PARAMS, params), TB_OK, "%s", tb_error_get());
    if (S->m.n_buffers) cr_assert_eq(backend_set_tensors(&S->b, TF_BUFFERS, buffers), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_set_tensors(&S->b, TF_OPT, opt), TB_OK, "%s", tb_error_get());
    free(params), free(buffers), free(opt);
}

static void setup_free(struct setup *S)
{
    backend_destroy(&S->b);
    free(S->labels);
    dataset_free(&S->ds);
    model_free(&S->m);
}

/* The global batch of 1-based step s. */
static struct batch setup_batch(const struct setup *S, int s)
{
    const size_t per = (size_t)IMG * IMG;
    return (struct batch){S->batch, S->ds.images + (size_t)(s - 1) * S->batch * per,
                          S->labels + (size_t)(s - 1) * S->batch};
}

/* What a free-running training run leaves behind. */
struct trace {
    double loss[K_STEPS]; /* Σ per-sample loss of each step */
    float *params;        /* (n_params) */
    float *opt;           /* (state_per_param · n_params) */
    size_t n_params, n_opt;
    float *peek;          /* the parameters read after run_spec.peek_step (NULL: none) */
    struct eval_stats peek_eval; /* and the evaluation of that step's batch then */
};

static void trace_free(struct trace *t)
{
    free(t->params), free(t->opt), free(t->peek);
    memset(t, 0, sizeof *t);
}

/* The trace's end: the final parameters and optimizer state read from the backend, which is then freed. */
static void trace_finish(struct setup *S, struct trace *t)
{
    t->n_params = S->n_params, t->n_opt = S->n_opt;
    t->params = tu_fvec(t->n_params);
    t->opt = tu_fvec(t->n_opt);
    cr_assert_eq(backend_get_tensors(&S->b, TF_PARAMS, t->params), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_get_tensors(&S->b, TF_OPT, t->opt), TB_OK, "%s", tb_error_get());
    setup_free(S);
}

/* Trains under spec for K_STEPS steps with backend_train_step and records the trace. */
static void run_train(const struct run_spec *sp, struct trace *t)
{
    memset(t, 0, sizeof *t);
    struct setup S;
    setup_init(&S, sp);
    for (int s = 1; s <= K_STEPS; s++) {
        struct batch bt = setup_batch(&S, s);
        struct step_stats ss;
        cr_assert_eq(backend_train_step(&S.b, &bt, s, &ss), TB_OK, "%s step %d: %s", sp->backend, s, tb_error_get());
        cr_assert_eq(ss.n, sp->batch);
        cr_assert(isfinite(ss.loss_sum), "%s step %d: loss %g", sp->backend, s, ss.loss_sum);
        t->loss[s - 1] = ss.loss_sum;
        if (s == sp->peek_step) { /* work a backend deferred must be done first, and nothing lost */
            /* The evaluation first: the parameters' read would apply the update for it. */
            cr_assert_eq(backend_evaluate(&S.b, &bt, &t->peek_eval), TB_OK, "%s", tb_error_get());
            cr_assert_eq(t->peek_eval.n, sp->batch);
            t->peek = tu_fvec(S.n_params);
            cr_assert_eq(backend_get_tensors(&S.b, TF_PARAMS, t->peek), TB_OK, "%s", tb_error_get());
        }
    }
    trace_finish(&S, t);
}

/* run_train's trace, the K_STEPS steps staged at once and run in runs of 7, 1 and 12. */
static void run_train_runs(const struct run_spec *sp, struct trace *t)
{
    memset(t, 0, sizeof *t);
    struct setup S;
    setup_init(&S, sp);
    const struct batch all = {K_STEPS * sp->batch, S.ds.images, S.labels};
    cr_assert_eq(backend_stage_steps(&S.b, 1, K_STEPS, &all), TB_OK, "%s", tb_error_get());
    static const long runs[] = {7, 1, 12};
    struct step_stats st[K_STEPS];
    for (long r = 0, at = 1; r < 3; at += runs[r++]) {
        long done = -1;
        cr_assert_eq(backend_run_steps(&S.b, at, runs[r], st, &done), TB_OK, "%s steps %ld..: %s", sp->backend, at,
                     tb_error_get());
        cr_assert_eq(done, runs[r]);
        for (long j = 0; j < runs[r]; j++) {
            cr_assert_eq(st[j].n, sp->batch);
            t->loss[at - 1 + j] = st[j].loss_sum;
        }
    }
    cr_assert_eq(backend_finish(&S.b), TB_OK, "%s", tb_error_get());
    trace_finish(&S, t);
}

/* Losses, params and optimizer state of t bitwise equal to ref. */
static void assert_trace_bitwise(const struct trace *t, const struct trace *ref, const char *what)
{
    for (int s = 0; s < K_STEPS; s++)
        cr_assert(memcmp(&t->loss[s], &ref->loss[s], sizeof(double)) == 0, "%s: loss at step %d %.17g != %.17g",
                  what, s + 1, t->loss[s], ref->loss[s]);
    cr_assert_eq(t->n_params, ref->n_params);
    cr_assert_eq(t->n_opt, ref->n_opt);
    char w[96];
    snprintf(w, sizeof w, "%s: params", what);
    tu_assert_bitwise(t->params, ref->params, t->n_params, w);
    snprintf(w, sizeof w, "%s: optimizer state", what);
    tu_assert_bitwise(t->opt, ref->opt, t->n_opt, w);
    /* A read mid-run: the parameters and the evaluation after the deferred update, not before it. */
    cr_assert_eq(!t->peek, !ref->peek, "%s: one trace read mid-run, the other not", what);
    if (t->peek) {
        snprintf(w, sizeof w, "%s: params read mid-run", what);
        tu_assert_bitwise(t->peek, ref->peek, t->n_params, w);
        cr_assert(memcmp(&t->peek_eval.loss_sum, &ref->peek_eval.loss_sum, sizeof(double)) == 0 &&
                      t->peek_eval.correct == ref->peek_eval.correct,
                  "%s: evaluation mid-run: loss %.17g, %ld correct against %.17g, %ld", what, t->peek_eval.loss_sum,
                  t->peek_eval.correct, ref->peek_eval.loss_sum, ref->peek_eval.correct);
    }
}

/* Step-by-step equivalence of one configuration (sp->backend at sp->batch) with cpu at that batch, from
 * cpu's exact state at every step. */
static void check_spec_steps_against_cpu(const struct run_spec *spp)
{
    const struct run_spec sp = *spp;
    const int batch = sp.batch;
    struct run_spec sc = spec_default("cpu", batch);
    struct setup C, B;
    setup_init(&C, &sc);
    setup_init(&B, &sp);
    const size_t np = C.n_params, no = C.n_opt;
    cr_assert_eq(B.n_params, np);
    float *p = tu_fvec(np), *o = tu_fvec(no), *gc = tu_fvec(np), *gb = tu_fvec(np);
    float *pb = tu_fvec(np), *ob = tu_fvec(no);
    double first_loss = 0.0, last_loss = 0.0;
    for (int s = 1; s <= K_STEPS; s++) {
        /* B starts the step from cpu's state. */
        cr_assert_eq(backend_get_tensors(&C.b, TF_PARAMS, p), TB_OK);
        cr_assert_eq(backend_get_tensors(&C.b, TF_OPT, o), TB_OK);
        cr_assert_eq(backend_set_tensors(&B.b, TF_PARAMS, p), TB_OK, "%s", tb_error_get());
        cr_assert_eq(backend_set_tensors(&B.b, TF_OPT, o), TB_OK, "%s", tb_error_get());
        struct batch bt = setup_batch(&C, s);
        struct step_stats sc_, sb_;
        cr_assert_eq(backend_forward_backward(&C.b, &bt, s, &sc_), TB_OK, "cpu step %d: %s", s, tb_error_get());
        cr_assert_eq(backend_forward_backward(&B.b, &bt, s, &sb_), TB_OK, "%s step %d: %s", sp.backend, s,
                     tb_error_get());
        cr_assert(fabs(sb_.loss_sum - sc_.loss_sum) <= 1e-5 * fabs(sc_.loss_sum),
                  "%s batch %d step %d: loss %.9g, cpu %.9g", sp.backend, batch, s, sb_.loss_sum, sc_.loss_sum);
        if (s == 1) first_loss = sc_.loss_sum;
        last_loss = sc_.loss_sum;
        cr_assert_eq(backend_get_tensors(&C.b, TF_GRADS, gc), TB_OK);
        cr_assert_eq(backend_get_tensors(&B.b, TF_GRADS, gb), TB_OK, "%s", tb_error_get());
        double *want = tu_to_d(gc, np);
        char what[96];
        snprintf(what, sizeof what, "%s batch %d step %d: summed gradients", sp.backend, batch, s);
        tu_assert_close(gb, want, np, 1e-5, 1e-6, what);
        free(want);
        /* The update from identical gradients: the same element-wise optimizer, the same bits.
         * There is no public update wrapper; the interface member is what backend_train_step calls. */
        cr_assert_eq(backend_set_tensors(&B.b, TF_GRADS, gc), TB_OK, "%s", tb_error_get());
        cr_assert_eq(C.b.i->update(&C.b, s, &sc_), TB_OK, "%s", tb_error_get());
        cr_assert_eq(B.b.i->update(&B.b, s, &sb_), TB_OK, "%s", tb_error_get());
        cr_assert_eq(backend_get_tensors(&C.b, TF_PARAMS, p), TB_OK);
        cr_assert_eq(backend_get_tensors(&C.b, TF_OPT, o), TB_OK);
        cr_assert_eq(backend_get_tensors(&B.b, TF_PARAMS, pb), TB_OK);
        cr_assert_eq(backend_get_tensors(&B.b, TF_OPT, ob), TB_OK);
        snprintf(what, sizeof what, "%s batch %d step %d: params after the update", sp.backend, batch, s);
        tu_assert_bitwise(pb, p, np, what);
        snprintf(what, sizeof what, "%s batch %d step %d: optimizer state after the update", sp.backend, batch, s);
        tu_assert_bitwise(ob, o, no, what);
    }
    /* training happened: the loss moved */
    cr_assert_neq(first_loss, last_loss);
    free(p), free(o), free(gc), free(gb), free(pb), free(ob);
    setup_free(&B), setup_free(&C);
}

/* The same for registry backend k with its defaults. */
static void check_steps_against_cpu(int k, int batch)
{
    int n;
    const struct backend_entry *r = backend_registry(&n);
    cr_assert_str_eq(r[0].name, "cpu", "the registry starts with the reference backend");
    struct run_spec sp = spec_for(r[k].name, batch);
    check_spec_steps_against_cpu(&sp);
}

/* Free-running trajectory of registry backend k against cpu, within the loose bound the header
 * explains. */
static void check_trajectory_against_cpu(int k, int batch)
{
    int n;
    const struct backend_entry *r = backend_registry(&n);
    struct run_spec sc = spec_default("cpu", batch), sp = spec_for(r[k].name, batch);
    struct trace ref, t;
    run_train(&sc, &ref);
    run_train(&sp, &t);
    for (int s = 0; s < K_STEPS; s++)
        cr_assert(fabs(t.loss[s] - ref.loss[s]) <= 1e-2 * fabs(ref.loss[s]),
                  "%s batch %d: loss at step %d is %.9g, cpu has %.9g", r[k].name, batch, s + 1, t.loss[s],
                  ref.loss[s]);
    double *want = tu_to_d(ref.params, ref.n_params);
    char what[96];
    snprintf(what, sizeof what, "%s batch %d: params after %d steps", r[k].name, batch, K_STEPS);
    tu_assert_close(t.params, want, t.n_params, 1e-2, 1e-2, what);
    free(want);
    trace_free(&t), trace_free(&ref);
}

TestSuite(backends, .timeout = 60);

/* The device registry backend k is tied to (cuda), or NULL: its arithmetic is that device's, not the cpu's
 * bits, so the bitwise comparisons with cpu leave it out (tests/test_cuda.c compares within tolerances). */
static const char *tied_device(int k)
{
    int n;
    return backend_registry(&n)[k].caps.device;
}

/* Skips the calling test where backend k is tied to a device this machine lacks (cuda without a GPU). */
static void skip_unless_device_present(int k)
{
    const char *d = tied_device(k);
    int n;
    if (d && executor_device_probe(d) != TB_OK)
        cr_skip_test("backend %s: %s", backend_registry(&n)[k].name, tb_error_get());
}

/* Skips the calling test for the reference backend (cpu): the comparisons against cpu would compare it with
 * itself, which cannot fail. */
static void skip_if_reference(int k)
{
    int n;
    const struct backend_entry *e = &backend_registry(&n)[k];
    if (e->caps.reference)
        cr_skip_test("backend %s is the reference these steps are compared against: against itself nothing is "
                     "checked", e->name);
}

/* Indices into backend_registry, one test instance each. */
static int registry_indices[64];

static int registry_params(void)
{
    int n;
    backend_registry(&n);
    cr_assert_leq(n, 64);
    for (int k = 0; k < n; k++) registry_indices[k] = k;
    return n;
}

ParameterizedTestParameters(backends, steps_match_cpu)
{
    return cr_make_param_array(int, registry_indices, registry_params());
}

ParameterizedTest(int *k, backends, steps_match_cpu, .timeout = 60)
{
    skip_if_reference(*k);
    skip_unless_device_present(*k);
    if (tied_device(*k))
        cr_skip_test("backend %s runs on %s: its steps against cpu's are tests/test_cuda.c's, within tolerances "
                     "(its update is not the cpu's bits)", backend_registry(&(int){0})[*k].name, tied_device(*k));
    check_steps_against_cpu(*k, 16);
    check_steps_against_cpu(*k, 1);
}

ParameterizedTestParameters(backends, trajectory_tracks_cpu)
{
    return cr_make_param_array(int, registry_indices, registry_params());
}

ParameterizedTest(int *k, backends, trajectory_tracks_cpu, .timeout = 60)
{
    skip_if_reference(*k);
    skip_unless_device_present(*k);
    check_trajectory_against_cpu(*k, 16);
    check_trajectory_against_cpu(*k, 1);
}

/* cpu and threads differ only in nth, and every kernel is bitwise the same for any nth: threads
 * equals cpu bit for bit, with 1 thread, 2, 3 and 7 (oversubscribing this machine's cores). At batch 1,
 * 7 threads split the 8 row chunks of a 128-input layer unevenly (exec_dense1_step). */
Test(backends, threads_bitwise_cpu, .timeout = 60)
{
    const int batches[] = {16, 1};
    for (int bi = 0; bi < 2; bi++) {
        struct run_spec sc = spec_default("cpu", batches[bi]);
        struct trace ref;
        run_train(&sc, &ref);
        const int nts[] = {1, 2, 3, 7};
        for (int ni = 0; ni < 4; ni++) {
            const int nt = nts[ni];
            struct run_spec sp = spec_default("threads", batches[bi]);
            sp.n_threads = nt;
            struct trace t;
            run_train(&sp, &t);
            char what[64];
            snprintf(what, sizeof what, "threads(%d) vs cpu, batch %d", nt, batches[bi]);
            assert_trace_bitwise(&t, &ref, what);
            trace_free(&t);
        }
        trace_free(&ref);
    }
}

/* mirrored over shared memory shards the update of a training step (reduce-scatter, each replica
 * updates its chunk, all-gather of the parameters). It must leave the bits of the unsharded path
 * (all-reduce, every replica updates everything): parameters, optimizer state and summed gradients,
 * as get_tensors assembles them, after every step. 2 devices, and 3 (chunks of unequal length);
 * SGD with momentum too, whose state is one array rather than Adam's two. */
Test(backends, mirrored_sharded_update_bitwise, .timeout = 60)
{
    for (int variant = 0; variant < 3; variant++) {
        struct run_spec sp = spec_default("mirrored", 12);
        sp.n_devices = variant == 1 ? 3 : 2;
        if (variant == 2) optim_config_defaults(&sp.optim, OPTIM_SGD);
        struct setup A, B;
        setup_init(&A, &sp);
        setup_init(&B, &sp);
        const size_t np = A.n_params, no = A.n_opt;
        float *pa = tu_fvec(np), *pb = tu_fvec(np), *oa = tu_fvec(no), *ob = tu_fvec(no);
        float *ga = tu_fvec(np), *gb = tu_fvec(np);
        for (int s = 1; s <= 4; s++) {
            struct batch bt = setup_batch(&A, s);
            struct step_stats sa, sb;
            cr_assert_eq(backend_train_step(&A.b, &bt, s, &sa), TB_OK, "%s", tb_error_get());
            cr_assert_eq(backend_forward_backward(&B.b, &bt, s, &sb), TB_OK, "%s", tb_error_get());
            cr_assert_eq(B.b.i->update(&B.b, s, &sb), TB_OK, "%s", tb_error_get());
            cr_assert(memcmp(&sa.loss_sum, &sb.loss_sum, sizeof(double)) == 0, "step %d loss %.17g != %.17g", s,
                      sa.loss_sum, sb.loss_sum);
            const enum tensor_family fam[3] = {TF_PARAMS, TF_OPT, TF_GRADS};
            float *const da[3] = {pa, oa, ga}, *const db[3] = {pb, ob, gb};
            const size_t len[3] = {np, no, np};
            for (int f = 0; f < 3; f++) {
                cr_assert_eq(backend_get_tensors(&A.b, fam[f], da[f]), TB_OK);
                cr_assert_eq(backend_get_tensors(&B.b, fam[f], db[f]), TB_OK);
                char what[96];
                snprintf(what, sizeof what, "%d devices, %s, step %d, family %d", sp.n_devices,
                         optim_name(sp.optim.kind), s, f);
                tu_assert_bitwise(da[f], db[f], len[f], what);
            }
        }
        free(pa), free(pb), free(oa), free(ob), free(ga), free(gb);
        setup_free(&A), setup_free(&B);
    }
}

/* mirrored's replicas in one process share one copy of the parameters where every update is sharded (replica
 * 0's; no all-gather after the update): the bits of replicas with a copy each and the ring's all-gather
 * (TB_SHARED_PARAMS=0), every step's loss and the final parameters and optimizer state, for 3 devices (chunks of
 * unequal length) with Adam and SGD, through train_step and through forward_backward + update (gradient
 * accumulation's path). LARS (unsharded updates) keeps a copy a replica. The description says which ran. */
static void mirrored_shared_trace(const struct run_spec *sp, int accumulate, int shared, struct trace *t)
{
    if (shared)
        unsetenv("TB_SHARED_PARAMS");
    else
        setenv("TB_SHARED_PARAMS", "0", 1);
    struct setup S;
    setup_init(&S, sp);
    unsetenv("TB_SHARED_PARAMS");
    char d[256];
    backend_describe(&S.b, d, sizeof d);
    const int want = shared && sp->optim.kind != OPTIM_LARS;
    cr_assert_eq(strstr(d, "one copy of the parameters") != NULL, want, "%s (TB_SHARED_PARAMS=%d)", d, shared);
    memset(t, 0, sizeof *t);
    for (int s = 1; s <= K_STEPS; s++) {
        struct batch bt = setup_batch(&S, s);
        struct step_stats ss;
        if (accumulate) {
            cr_assert_eq(backend_forward_backward(&S.b, &bt, s, &ss), TB_OK, "%s", tb_error_get());
            cr_assert_eq(S.b.i->update(&S.b, s, &ss), TB_OK, "%s", tb_error_get());
        } else {
            cr_assert_eq(backend_train_step(&S.b, &bt, s, &ss), TB_OK, "%s", tb_error_get());
        }
        t->loss[s - 1] = ss.loss_sum;
    }
    trace_finish(&S, t);
}

Test(backends, mirrored_shared_params_bitwise, .timeout = 120)
{
    static const enum optim_kind kinds[] = {OPTIM_ADAM, OPTIM_SGD, OPTIM_LARS};
    for (int k = 0; k < 3; k++)
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            struct run_spec sp = spec_default("mirrored", 12);
            sp.n_devices = 3;
            optim_config_defaults(&sp.optim, kinds[k]);
            struct trace own, shared;
            mirrored_shared_trace(&sp, accumulate, 0, &own);
            mirrored_shared_trace(&sp, accumulate, 1, &shared);
            char what[96];
            snprintf(what, sizeof what, "3 devices, %s, %s: one copy vs a copy each", optim_name(kinds[k]),
                     accumulate ? "forward_backward + update" : "train_step");
            assert_trace_bitwise(&shared, &own, what);
            trace_free(&own), trace_free(&shared);
        }
}

/* Issue 30's MirroredStrategy seed: batch 1 on each of 2 devices is a global batch of 2 (what
 * --batch-per-replica 1 runs). Every step from cpu's state: the loss and the summed gradients of the two
 * one-sample shards match cpu's at batch 2, and the update leaves cpu's bits. */
Test(backends, mirrored_one_sample_per_replica_matches_cpu, .timeout = 60)
{
    struct run_spec sp = spec_default("mirrored", 2);
    sp.n_devices = 2;
    check_spec_steps_against_cpu(&sp);
    struct run_spec sc = spec_default("cpu", 2);
    struct trace ref, t;
    run_train(&sc, &ref);
    run_train(&sp, &t);
    for (int s = 0; s < K_STEPS; s++)
        cr_assert(fabs(t.loss[s] - ref.loss[s]) <= 1e-4 * fabs(ref.loss[s]), "step %d: loss %.9g, cpu %.9g", s + 1,
                  t.loss[s], ref.loss[s]);
    trace_free(&t), trace_free(&ref);
}

/* Degenerate arrangements are the cpu schedule: one mirrored device (the all-reduce is the
 * identity), one ipu stage with one replica and one micro-batch. Bitwise equal to cpu. */
Test(backends, degenerate_configs_bitwise_cpu, .timeout = 60)
{
    int n;
    const struct backend_entry *r = backend_registry(&n);
    const int batches[] = {16, 1};
    for (int bi = 0; bi < 2; bi++) {
        struct run_spec sc = spec_default("cpu", batches[bi]);
        struct trace ref;
        run_train(&sc, &ref);
        for (int k = 0; k < n; k++) {
            if (tied_device(k)) continue; /* another device's arithmetic: not the cpu's bits */
            struct run_spec sp = spec_default(r[k].name, batches[bi]);
            sp.n_devices = 1;
            sp.stages = 1, sp.replicas = 1, sp.micro_batch = batches[bi], sp.ga = 1;
            sp.n_threads = 1;
            struct trace t;
            run_train(&sp, &t);
            char what[96];
            snprintf(what, sizeof what, "%s (1 thread/device/stage/replica) vs cpu, batch %d", r[k].name, batches[bi]);
            assert_trace_bitwise(&t, &ref, what);
            trace_free(&t);
        }
        trace_free(&ref);
    }
}

/* The fused batch-1 step (dense gradients folded into Adam, the update deferred into the next step's
 * forward) against zero + forward/backward + update, for every backend, under a constant rate, under
 * warm-up + cosine with weight decay, and with parameters read and an evaluation mid-run (which must
 * apply the deferred update first). */
ParameterizedTestParameters(backends, fused_batch1_bitwise_unfused)
{
    return cr_make_param_array(int, registry_indices, registry_params());
}

ParameterizedTest(int *k, backends, fused_batch1_bitwise_unfused, .timeout = 60)
{
    skip_unless_device_present(*k);
    int n;
    const struct backend_entry *r = backend_registry(&n);
    for (int variant = 0; variant < 3; variant++) {
        struct run_spec sf = spec_batch1(r[*k].name);
        if (variant == 2) sf.peek_step = K_STEPS / 2;
        if (variant == 1) {
            sf.optim.warmup_steps = 3;
            sf.optim.schedule = LR_COSINE;
            sf.optim.weight_decay = 1e-3f;
        }
        struct run_spec su = sf;
        su.no_fuse = 1;
        struct trace tf, tu;
        /* The cuda device's fused step is by default its persistent kernel, whose sums run in another order
         * (test_cuda checks it within rounding of this one); the captured graph's step is the unfused arithmetic. */
        setenv("TB_CUDA_LOOP", "graph", 1);
        run_train(&sf, &tf);
        unsetenv("TB_CUDA_LOOP");
        run_train(&su, &tu);
        char what[80];
        snprintf(what, sizeof what, "%s fused vs unfused%s", r[*k].name,
                 variant == 1 ? " (warm-up, cosine, weight decay)" : variant == 2 ? " (read mid-run)" : "");
        assert_trace_bitwise(&tf, &tu, what);
        trace_free(&tf), trace_free(&tu);
    }
}

/* Runs of steps against one step a call, bitwise, at batch 16 and 1 (fused where the backend fuses). */
ParameterizedTestParameters(backends, run_steps_bitwise_train_steps)
{
    return cr_make_param_array(int, registry_indices, registry_params());
}

ParameterizedTest(int *k, backends, run_steps_bitwise_train_steps, .timeout = 60)
{
    skip_unless_device_present(*k);
    int n;
    const struct backend_entry *r = backend_registry(&n);
    for (int batch = 16; batch >= 1; batch -= 15) {
        struct run_spec sp = spec_for(r[*k].name, batch);
        struct trace a, b;
        run_train(&sp, &a);
        run_train_runs(&sp, &b);
        char what[80];
        snprintf(what, sizeof what, "%s batch %d: runs of steps vs one step a call", r[*k].name, batch);
        assert_trace_bitwise(&b, &a, what);
        trace_free(&a), trace_free(&b);
    }
}

/* Same seed, same bits; another seed, other parameters (so the comparison can fail). */
ParameterizedTestParameters(backends, same_seed_is_repeatable)
{
    return cr_make_param_array(int, registry_indices, registry_params());
}

ParameterizedTest(int *k, backends, same_seed_is_repeatable, .timeout = 60)
{
    skip_unless_device_present(*k);
    int n;
    const struct backend_entry *r = backend_registry(&n);
    struct run_spec sp = spec_default(r[*k].name, 16);
    struct trace a, b, c;
    run_train(&sp, &a);
    run_train(&sp, &b);
    char what[64];
    snprintf(what, sizeof what, "%s run twice", r[*k].name);
    assert_trace_bitwise(&b, &a, what);
    sp.seed = 43;
    run_train(&sp, &c);
    cr_assert(memcmp(c.params, a.params, a.n_params * sizeof(float)) != 0, "%s: seeds 42 and 43 gave the same params",
              r[*k].name);
    trace_free(&a), trace_free(&b), trace_free(&c);
}

Test(backends, unknown_name_lists_valid_ones)
{
    struct backend b;
    tb_error_clear();
    cr_assert_eq(backend_create(&b, "no-such-backend"), TB_EINVAL);
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "no-such-backend") != NULL, "message does not name the bad backend: %s", msg);
    int n;
    const struct backend_entry *r = backend_registry(&n);
    for (int k = 0; k < n; k++)
        cr_assert(strstr(msg, r[k].name) != NULL, "message does not list '%s': %s", r[k].name, msg);
    cr_assert(strchr(msg, '\n') == NULL, "message is not one line: %s", msg);
    backend_destroy(&b); /* safe on a failed create */
}

/* Two SGD steps (its defaults: lr 0.01, momentum 0.9) of effnet-b0 (res×res, 10 classes, BatchNorm, no dropout or
 * drop-connect, global batch `batch`, seed 42) from the workload's initial parameters, on backend with the devices
 * of layout (its n_devices, sync_bn, ipu; the rest of it is set here), every convolution on im2col (no per-process
 * timing choice, so two processes run the same kernels). The parameters after them into *p (allocated; returns
 * n_params); the losses into loss, and the buffers (BatchNorm running statistics) into *bufs (allocated, *n_bufs
 * floats), where those are not NULL. TB_PAR_UNITS and TB_REPLICA_CUT as the environment says. */
static size_t effnet_sgd_steps(const char *backend, int res, int batch, const struct run_config *layout, float **p,
                               double loss[2], float **bufs, size_t *n_bufs)
{
    const struct workload *w = workload_find("effnet-b0");
    cr_assert_not_null(w, "%s", tb_error_get());
    struct workload_opts o = {.classes = 10, .resolution = res, .in_h = res, .in_w = res, .in_c = 3, .dropout = 0.0f,
                              .drop_connect = 0.0f};
    snprintf(o.norm, sizeof o.norm, "batch");
    struct model m;
    cr_assert_eq(w->build(&m, &o), TB_OK, "effnet-b0: %s", tb_error_get());
    struct dataset ds;
    cr_assert_eq(dataset_synthetic(2 * batch, res, res, 3, 10, 7, 1, &ds), TB_OK, "%s", tb_error_get());
    struct backend b;
    cr_assert_eq(backend_create(&b, backend), TB_OK, "%s", tb_error_get());
    struct run_config cfg = *layout;
    cfg.batch = batch, cfg.eval_batch = batch, cfg.seed = 42;
    optim_config_defaults(&cfg.optim, OPTIM_SGD);
    cfg.optim.total_steps = 2;
    snprintf(cfg.conv_algo, sizeof cfg.conv_algo, "im2col");
    cr_assert_eq(backend_prepare(&b, &m, &cfg), TB_OK, "%s: %s", backend, tb_error_get());
    float *params = tu_fvec(m.n_params), *buffers = tu_fvec(m.n_buffers ? m.n_buffers : 1);
    float *opt = tu_fvec(m.n_params * (size_t)optim_state_per_param(OPTIM_SGD) + 1);
    w->init(&m, params, buffers, 42);
    cr_assert_eq(backend_set_tensors(&b, TF_PARAMS, params), TB_OK, "%s", tb_error_get());
    if (m.n_buffers) cr_assert_eq(backend_set_tensors(&b, TF_BUFFERS, buffers), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_set_tensors(&b, TF_OPT, opt), TB_OK, "%s", tb_error_get());
    for (int s = 1; s <= 2; s++) {
        const size_t first = (size_t)(s - 1) * batch; /* the step's first sample */
        const struct batch bt = {batch, ds.images + first * res * res * 3, ds.labels + first};
        struct step_stats st;
        cr_assert_eq(backend_train_step(&b, &bt, s, &st), TB_OK, "%s step %d: %s", backend, s, tb_error_get());
        if (loss) loss[s - 1] = st.loss_sum;
    }
    cr_assert_eq(backend_get_tensors(&b, TF_PARAMS, params), TB_OK, "%s", tb_error_get());
    if (bufs) cr_assert_eq(backend_get_tensors(&b, TF_BUFFERS, buffers), TB_OK, "%s", tb_error_get());
    const size_t n = m.n_params;
    if (n_bufs) *n_bufs = m.n_buffers;
    backend_destroy(&b);
    dataset_free(&ds);
    model_free(&m);
    free(opt);
    if (bufs) *bufs = buffers;
    else free(buffers);
    *p = params;
    return n;
}

/* effnet_sgd_steps at 32×32, global batch 64, on 2 replicas (mirrored: 2 devices of 32; ipu: 2 stages × 2
 * replicas, micro-batches of 8, 4 a step): the parameters into p, the losses into loss. */
static size_t replicas_effnet_steps(const char *backend, float **p, double loss[2])
{
    struct run_config cfg = {0};
    if (!strcmp(backend, "ipu")) cfg.ipu.stages = 2, cfg.ipu.replicas = 2, cfg.ipu.micro_batch = 8, cfg.ipu.ga = 4;
    else cfg.n_devices = 2;
    return effnet_sgd_steps(backend, 32, 64, &cfg, p, loss, NULL, NULL);
}

/* A replica among several (mirrored's, ipu's) is a one-core device and cuts its work as a 2-core machine does
 * (executor_config.par_units), whatever the machine: its bits on a machine of 16 cores (TB_PAR_UNITS=16) are
 * those of a machine of 2 (a child process, TB_PAR_UNITS=2, forked before this process reads its units, which
 * it does once). And the 16-core cut (TB_REPLICA_CUT=0) gives other bits at this shape, so the equality is not
 * vacuous. */
Test(backends, replica_cut_is_every_machines, .timeout = 240)
{
    static const char *const backends[] = {"mirrored", "ipu"};
    const int NB = TU_UNDER_ASAN ? 1 : 2; /* ipu's replicas cut by the same par_units: the main build checks both */
    char path[] = "/tmp/tb_replica_cut_XXXXXX";
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp failed");
    fflush(NULL);
    const pid_t pid = fork(); /* before any tb_par_units call in this process */
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        setenv("TB_PAR_UNITS", "2", 1);
        int ok = 1;
        for (int k = 0; k < NB && ok; k++) {
            float *p;
            double loss[2];
            const size_t n = replicas_effnet_steps(backends[k], &p, loss);
            ok = write(fd, loss, sizeof loss) == (ssize_t)sizeof loss &&
                 write(fd, p, n * sizeof(float)) == (ssize_t)(n * sizeof(float));
            free(p);
        }
        _exit(ok ? 0 : 3);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the 2-unit child failed (status %d)", status);
    setenv("TB_PAR_UNITS", "16", 1);
    off_t at = 0;
    for (int k = 0; k < NB; k++) {
        float *p, *q;
        double loss[2], lq[2], want_loss[2];
        const size_t n = replicas_effnet_steps(backends[k], &p, loss);
        float *want = tu_fvec(n);
        cr_assert_eq(pread(fd, want_loss, sizeof want_loss, at), (ssize_t)sizeof want_loss);
        cr_assert_eq(pread(fd, want, n * sizeof(float), at + (off_t)sizeof want_loss), (ssize_t)(n * sizeof(float)));
        at += (off_t)(sizeof want_loss + n * sizeof(float));
        cr_assert(memcmp(loss, want_loss, sizeof loss) == 0, "%s: losses %.17g %.17g on 16 units, %.17g %.17g on 2",
                  backends[k], loss[0], loss[1], want_loss[0], want_loss[1]);
        char what[96];
        snprintf(what, sizeof what, "%s 2 replicas' parameters, a 16-unit machine vs a 2-unit one", backends[k]);
        tu_assert_bitwise(p, want, n, what);
        setenv("TB_REPLICA_CUT", "0", 1);
        replicas_effnet_steps(backends[k], &q, lq);
        unsetenv("TB_REPLICA_CUT");
        cr_assert(memcmp(q, want, n * sizeof(float)) != 0,
                  "%s: the 16-unit machine's own cut gave the 2-unit bits: this shape tests no cut", backends[k]);
        free(p), free(q), free(want);
    }
    close(fd);
    unlink(path);
}

/* --sync-bn with one replica in all: the global batch is the local one, so the run is cpu's schedule and bitwise
 * cpu's (a probe's: its statistics went through the f64 collective and changed the loss in the 7th digit). */
Test(backends, mirrored_one_device_sync_bn_bitwise_cpu, .timeout = 60)
{
    float *pc, *bc, *pm, *bm;
    size_t nbc, nbm;
    const struct run_config on_cpu = {0}, one_synced = {.n_devices = 1, .sync_bn = 1}; /* at 16×16, batch 8 */
    const size_t n = effnet_sgd_steps("cpu", 16, 8, &on_cpu, &pc, NULL, &bc, &nbc);
    cr_assert_eq(effnet_sgd_steps("mirrored", 16, 8, &one_synced, &pm, NULL, &bm, &nbm), n);
    cr_assert_eq(nbm, nbc);
    tu_assert_bitwise(pm, pc, n, "mirrored --devices 1 --sync-bn vs cpu: parameters after 2 steps");
    tu_assert_bitwise(bm, bc, nbc, "mirrored --devices 1 --sync-bn vs cpu: BatchNorm running statistics");
    free(pc), free(bc), free(pm), free(bm);
}

#define OPTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* --sync-bn on a model without BatchNorm changed nothing and was recorded (compare and report key runs on it):
 * refused as --bn-eps is on mnist-mlp, one line naming the option and the way out. */
Test(backends, sync_bn_without_batchnorm_is_refused)
{
    const struct {
        const char *workload;
        const char *const *opts;
        const char *needle;
    } bad[] = {
        {"mnist-mlp", OPTS("sync-bn", NULL), "no BatchNorm"},
        {"effnet-b0-g16", OPTS("sync-bn", NULL), "--norm batch"},
        {"effnet-b0", OPTS("sync-bn", NULL, "norm", "group"), "--norm batch"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        cr_assert_eq(rb_finish_config("mirrored", bad[k].workload, bad[k].opts), TB_EINVAL, "%s: accepted",
                     bad[k].workload);
        const char *msg = tb_error_get();
        cr_assert(strstr(msg, "--sync-bn") && strstr(msg, bad[k].workload) && strstr(msg, bad[k].needle) &&
                      !strchr(msg, '\n'), "%s: %s", bad[k].workload, msg);
    }
    cr_assert_eq(rb_finish_config("mirrored", "effnet-b0", OPTS("sync-bn", NULL)), TB_OK, "%s", tb_error_get());
    cr_assert_eq(rb_finish_config("mirrored", "effnet-b0-g16", OPTS("sync-bn", NULL, "norm", "batch")), TB_OK, "%s",
                 tb_error_get());
}

/* The same for --bn-eps: a GroupNorm net (the G16 recipe's, or --norm group) has no BatchNorm to take it, and
 * the row would have recorded an epsilon nothing used. */
Test(backends, bn_eps_without_batchnorm_is_refused)
{
    const char *const *bad[] = {OPTS("bn-eps", "1e-3"), OPTS("bn-eps", "1e-3", "norm", "group")};
    const char *const wl[] = {"effnet-b0-g16", "effnet-b0"};
    for (size_t k = 0; k < 2; k++) {
        cr_assert_eq(rb_finish_config("cpu", wl[k], bad[k]), TB_EINVAL, "%s: accepted", wl[k]);
        const char *msg = tb_error_get();
        cr_assert(strstr(msg, "--bn-eps") && strstr(msg, wl[k]) && strstr(msg, "--norm batch") && !strchr(msg, '\n'),
                  "%s: %s", wl[k], msg);
    }
    cr_assert_eq(rb_finish_config("cpu", "effnet-b0", OPTS("bn-eps", "1e-3")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(rb_finish_config("cpu", "effnet-b0-g16", OPTS("bn-eps", "1e-3", "norm", "batch")), TB_OK, "%s",
                 tb_error_get());
}

/* --loss-scale where no loss is scaled (a precision other than fp16, a plan without gradients) was recorded
 * with a warning, or silently: refused, one line naming it. */
Test(backends, loss_scale_where_no_loss_is_scaled_is_refused)
{
    const struct {
        const char *const *opts;
        const char *needle;
    } bad[] = {
        {OPTS("loss-scale", "128"), "this run is fp32"},
        {OPTS("loss-scale", "dynamic", "precision", "bf16"), "this run is bf16"},
        {OPTS("loss-scale", "128", "precision", "bf16m"), "this run is bf16m"},
        {OPTS("loss-scale", "128", "precision", "fp16", "plan", "inference"), "--plan inference"},
        {OPTS("loss-scale", "128", "precision", "fp16", "plan", "evaluate", "load", "w.safetensors"), "--plan evaluate"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        cr_assert_eq(rb_finish_config("ipu", "mnist-mlp", bad[k].opts), TB_EINVAL, "case %zu: accepted", k);
        const char *msg = tb_error_get();
        cr_assert(strstr(msg, "--loss-scale") && strstr(msg, bad[k].needle) && !strchr(msg, '\n'), "case %zu: %s", k,
                  msg);
    }
    cr_assert_eq(rb_finish_config("ipu", "mnist-mlp", OPTS("loss-scale", "128", "precision", "fp16")), TB_OK, "%s",
                 tb_error_get());
    cr_assert_eq(rb_finish_config("ipu", "mnist-mlp",
                                  OPTS("loss-scale", "dynamic", "precision", "fp16m", "plan", "train", "steps", "2")),
                 TB_OK, "%s", tb_error_get());
}

/* The cuda device's contradictions, refused in one line: --device cpu with the cuda backend (it ran on the GPU,
 * unsaid), and an algorithm for --conv-algo (its kernels are its own: the rows recorded fft, direct, gemm1x1 for
 * bitwise the same run). */
Test(backends, cuda_device_refuses_device_cpu_and_a_conv_algo)
{
    if (!backend_find("cuda")) cr_skip_test("no cuda backend in this build (TB_CUDA=OFF)");
    cr_assert_eq(rb_finish_config("cuda", "mnist-mlp", OPTS("device", "cpu")), TB_EINVAL, "accepted");
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "--backend cuda runs on the cuda device") && strstr(msg, "--device cpu") && !strchr(msg, '\n'),
              "%s", msg);
    /* the check a suite's backend=* applies: it leaves cuda out of a line with device=cpu or conv-algo=fft */
    struct bench_config c;
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "backend", "cuda"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "device", "cpu"), TB_OK);
    cr_assert_eq(bench_config_check_backend(&c), TB_EINVAL);
    bench_config_defaults(&c);
    cr_assert_eq(bench_config_set(&c, "backend", "cuda"), TB_OK);
    cr_assert_eq(bench_config_set(&c, "conv-algo", "fft"), TB_OK);
    cr_assert_eq(bench_config_check_backend(&c), TB_EINVAL);
    cr_assert_eq(rb_finish_config("cuda", "mnist-mlp", OPTS("device", "cuda")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(rb_finish_config("cuda", "mnist-mlp", OPTS("batch", "8")), TB_OK, "%s", tb_error_get());

    const struct { const char *backend; const char *const *opts; } bad[] = {
        {"cuda", OPTS("conv-algo", "fft")},
        {"cuda", OPTS("conv-algo", "gemm1x1")},
        {"mirrored", OPTS("device", "cuda", "conv-algo", "direct")},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        cr_assert_eq(rb_finish_config(bad[k].backend, "effnet-b0", bad[k].opts), TB_EINVAL, "case %zu: accepted", k);
        msg = tb_error_get();
        cr_assert(strstr(msg, "--conv-algo") && strstr(msg, "cuda device") && !strchr(msg, '\n'), "case %zu: %s", k,
                  msg);
    }
    cr_assert_eq(rb_finish_config("cuda", "effnet-b0", OPTS("conv-algo", "auto")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(rb_finish_config("cpu", "effnet-b0", OPTS("conv-algo", "fft")), TB_OK, "%s", tb_error_get());
}

/* On the cuda device bf16 and bf16m are one run (fp32 master weights either way): a checkpoint of one resumes
 * under the other, and one written before the two were one word (precision=bf16) resumes under bf16m. Another
 * precision is still another configuration. Runs bench (TB_BENCH_EXE: bench_emu in test_backends_emu). */
Test(backends, cuda_bf16m_checkpoint_resumes_under_bf16, .timeout = 120)
{
    if (!backend_find("cuda")) cr_skip_test("no cuda backend in this build (TB_CUDA=OFF)");
    if (executor_device_probe("cuda") != TB_OK) cr_skip_test("cuda: %s", tb_error_get());
    static const char *const base[] = {RB_BASE, "--backend", "cuda", "--no-eval", NULL};
    char *dir = tu_mkdtemp("backends");
    cr_assert_eq(rb_run(dir, "m", base, RB_ARGS("--steps", "2", "--precision", "bf16m", "--checkpoint-dir", "ck")), 0);
    int code = rb_run(dir, "r", base, RB_ARGS("--steps", "4", "--precision", "bf16", "--resume", "ck"));
    char *err = rb_stderr(dir, "r");
    cr_assert_eq(code, 0, "%s", err);
    free(err);
    struct json_value *row = rb_last_row(dir); /* resumed, not started over */
    cr_assert_eq(json_get_number(row, "figures.resumed_from_step", -1), 2);
    json_value_free(row);
    /* an older build's bf16 checkpoint */
    cr_assert_eq(rb_run(dir, "b", base, RB_ARGS("--steps", "2", "--precision", "bf16", "--checkpoint-dir", "ck_old")), 0);
    char *d = rb_path(dir, "ck_old"), ck[600];
    checkpoint_dir_path(d, 2, ck, sizeof ck);
    ckpt_rewrite_config(ck, " precision=bf16m", " precision=bf16");
    code = rb_run(dir, "r2", base, RB_ARGS("--steps", "4", "--precision", "bf16m", "--resume", "ck_old"));
    err = rb_stderr(dir, "r2");
    cr_assert_eq(code, 0, "%s", err);
    free(err);
    row = rb_last_row(dir);
    cr_assert_eq(json_get_number(row, "figures.resumed_from_step", -1), 2);
    json_value_free(row);
    code = rb_run(dir, "r3", base, RB_ARGS("--steps", "6", "--precision", "fp16", "--resume", "ck_old"));
    err = rb_stderr(dir, "r3");
    cr_assert(code == 2 && strstr(err, "precision=bf16m in the checkpoint"), "exit %d: %s", code, err);
    free(err);
    free(d);
    tu_rm_rf(dir);
    free(dir);
}

/* ipu's automatic micro-batching wants 2 x stages micro-batches (a rule for speed); where none divides the batch
 * but --ga accepts fewer, it says so and gives the explicit options that run it, which then do. */
Test(backends, ipu_automatic_micro_batching_names_what_runs)
{
    struct workload_opts o = {.classes = 10, .in_h = IMG, .in_w = IMG, .in_c = 1, .dropout = -1, .drop_connect = -1};
    struct model m;
    cr_assert_eq(workload_mnist_mlp.build(&m, &o), TB_OK, "%s", tb_error_get());
    static const struct {
        const char *schedule;
        int micro_batch, ga, want;
        const char *needle;
    } cases[] = {
        {"1f1b", 0, 0, TB_EINVAL, "--micro-batch 1 --ga 2 runs it"},
        {"1f1b", 1, 2, TB_OK, NULL},
        /* gpipe's least accumulation is 2 x stages: the message's minimum is the explicit one */
        {"gpipe", 0, 0, TB_EINVAL, "multiple of 4 micro-batches (gpipe)"},
        {"gpipe", 1, 2, TB_EINVAL, "not divisible by 4"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct backend b;
        cr_assert_eq(backend_create(&b, "ipu"), TB_OK, "%s", tb_error_get());
        struct run_config cfg = {.batch = 2, .eval_batch = 2, .seed = 42};
        optim_config_defaults(&cfg.optim, OPTIM_SGD);
        cfg.ipu.stages = 2, cfg.ipu.micro_batch = cases[k].micro_batch, cfg.ipu.ga = cases[k].ga;
        snprintf(cfg.ipu.schedule, sizeof cfg.ipu.schedule, "%s", cases[k].schedule);
        tb_error_clear();
        const int st = backend_prepare(&b, &m, &cfg);
        cr_assert_eq(st, cases[k].want, "case %zu: %s", k, tb_error_get());
        if (cases[k].needle)
            cr_assert(strstr(tb_error_get(), cases[k].needle) && !strchr(tb_error_get(), '\n'), "case %zu: %s", k,
                      tb_error_get());
        backend_destroy(&b);
    }
    model_free(&m);
    /* --batch-per-replica's errors name it, not the --batch the user did not give. */
    cr_assert_eq(rb_finish_config("ipu", "mnist-mlp", OPTS("batch-per-replica", "3", "ga", "2")), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "--batch-per-replica 3") && !strstr(tb_error_get(), "--batch 3"), "%s",
              tb_error_get());
}

#undef OPTS
