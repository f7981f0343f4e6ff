/* test_cuda.c — the cuda device against the cpu executor (built only with TB_CUDA; needs a GPU to run).
 *
 * Where no GPU is present every test reports itself skipped with the runtime's reason ("no CUDA device:
 * ..."), never passed. On a GPU (first run on an H200 on 2026-11-28), with TF32 off (cuda_util.c); fp32
 * comparisons are per tensor in L2 norm with looser element bounds (assert_close_abs, check_tensors: sums
 * that cancel keep the summation order's rounding relative to their terms):
 *   - each dense-chain op's forward and backward (input affine, dense + ReLU, dense, softmax cross-entropy,
 *     with and without label smoothing): the loss, and the parameter gradients of a backward over every
 *     layer range [k,L), within 1e-4 of the cpu executor's;
 *   - one training step of mnist-mlp (zero, forward/backward, Adam update): parameters within 1e-5, with a
 *     floor of lr/1000 (Adam magnifies a near-zero gradient's relative error);
 *   - every optimizer (SGD, Adam with weight decay, RMSProp, LARS) with a warm-up and a cosine schedule,
 *     whole and in parts, from the same gradients and state: parameters and state within 1e-5;
 *   - evaluation: loss, correct count and logits;
 *   - the on-device loop: 50 steps staged once and replayed from the captured graph in runs of 1, 7, 20
 *     and 22 (executor_stage_steps, executor_run_steps; TB_CUDA_LOOP=graph) bitwise 50 plain steps on the
 *     device (losses, parameters, Adam state), and within 1e-4 of the cpu's; a fused step in between asks for
 *     a new stage;
 *   - the persistent kernel (the default runs): runs of 1, 7, 20, 22 bitwise one run of 50 and the fused
 *     step, within 1e-4 of the graph and the cpu;
 *   - EfficientNet-B0 at 32×32, BatchNorm and G16 with GroupNorm: one training
 *     forward+backward (crop/flip, dropout, drop-connect) against the cpu's (loss 1e-4, gradients 1e-3, running
 *     statistics 1e-4), one SGD step (parameters 1e-4), evaluation after a step (loss 1e-4, correct count);
 *   - EfficientNet B0 and B0-G16 from grey 28×28 pixels (resampled, 1 → 3 channels) accepted at create;
 *   - the device's facts (name, versions, memory, compute capability) and its memory accounting;
 *   - mixed precision (--precision bf16: bf16 activations and GEMMs, fp32 master weights): one training step
 *     of mnist-mlp and of effnet-b0 (32×32, BatchNorm) against the cpu's fp32 step — loss within 1e-2 (mlp) /
 *     2e-2 (b0) relative, each parameter tensor's gradient within 0.15 / 0.1 in L2 norm (floored at a
 *     hundredth of the largest tensor's norm) or 8 times a cpu baseline from bf16-rounded weights, running
 *     statistics 2e-2 likewise, and the fp32 master weights' SGD step from the device's own gradients within
 *     1e-5 of the cpu's —, the loss falling over 12 bf16 steps on one batch (mlp: each step within 5e-2 of
 *     the cpu's fp32 loss), and evaluation after a step (loss and logits within 2e-2 or 8 times the baseline).
 *     The bf16 tolerances are what the H200 runs support (assert_close_bf16 says why).
 *   - fp16 mixed precision (--precision fp16, not yet run on a GPU): the bf16 step and loss-fall checks with
 *     fp16 (baseline from fp16-rounded weights), and loss scaling: a static scale of 1e30 overflows every
 *     step, each update is skipped (weights bitwise unchanged, steps counted, scale kept) and the tenth in a
 *     row is a diverged run naming --loss-scale; a dynamic scale halves on an overflowed step and the next
 *     clean step updates.
 * The gradient shortcut (overwrite at a gradient's last reader) in the shared gradient arena gives the values
 * zeroing and accumulating in one slot per tensor give. --no-fuse runs the BatchNorm -> depthwise pairs apart
 * (TB_CUDA_BN_DW=apart's bits). Two stages' forward returns the cpu's evaluation logits (ipu's evaluate).
 * --profile and --trace at batch 1 take the per-layer path (the fused step has no layers to time), stages keep a
 * profile of their layers, and a traced step ends with its update's event.
 * Without a GPU too: the gradient arena (no two gradients alive together share a byte), the bf16 activation
 * layout (disjoint, aligned, fp32 where it must be), the cuda backend's --list line.
 */
#include "test_util.h"

#include "backend.h"
#include "dataset.h"
#include "executor.h"
#include "executor_cuda.h"
#include "executor_cuda_bf16.h"
#include "executor_cuda_layers.h"
#include "grad_layout.h"
#include "model_range.h"
#include "stage_precision.h"
#include "status.h"
#include "workload.h"

#include <cuda_runtime_api.h>

enum { IMG = 28, N = 16, LOOP_STEPS = 50, EFF_RES = 32, EFF_N = 8 };

/* Skips the test, with the runtime's reason, where this machine has no GPU. */
static void need_gpu(void)
{
    if (executor_cuda_probe() == TB_OK) return;
    const char *msg = tb_error_get(), *why = strchr(msg, '('); /* "cuda: no CUDA device (<the runtime's reason>)" */
    cr_skip_test("no CUDA device: %s", why ? why : msg);
}

/* need_gpu, and a device that can launch cooperatively: the persistent kernel's grid barriers need every
 * block resident at once (the CPU emulation, tests/cuda_emu, runs such a launch's blocks on threads of their own). */
static void need_cooperative_launch(void)
{
    need_gpu();
    int dev = 0, coop = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess)
        cr_skip_test("the device's cooperative launch attribute could not be read");
    if (!coop) cr_skip_test("the device has no cooperative launch: no persistent kernel to test");
}

struct fixture {
    struct model m;
    struct dataset ds;
    int32_t *y;
    float *params, *buffers;
};

static void fixture_init(struct fixture *f, int n, float smoothing)
{
    memset(f, 0, sizeof *f);
    struct workload_opts o = {.classes = 10, .in_h = IMG, .in_w = IMG, .in_c = 1, .dropout = -1, .drop_connect = -1,
                              .label_smoothing = smoothing};
    cr_assert_eq(workload_mnist_mlp.build(&f->m, &o), TB_OK, "%s", tb_error_get());
    cr_assert_eq(dataset_synthetic(n, IMG, IMG, 1, 10, 7, 1, &f->ds), TB_OK, "%s", tb_error_get());
    f->y = malloc((size_t)n * sizeof *f->y);
    cr_assert_not_null(f->y);
    for (int i = 0; i < n; i++) f->y[i] = f->ds.labels[i];
    f->params = tu_fvec(f->m.n_params);
    f->buffers = tu_fvec(f->m.n_buffers);
    workload_mnist_mlp.init(&f->m, f->params, f->buffers, 42);
}

static void fixture_free(struct fixture *f)
{
    free(f->params), free(f->buffers), free(f->y);
    dataset_free(&f->ds);
    model_free(&f->m);
}

static struct executor_config config(const char *device, int n_max, enum optim_kind kind)
{
    struct executor_config c = {.device = device, .threads = 1, .n_max = n_max, .seed = 42};
    optim_config_defaults(&c.optim, kind);
    c.optim.total_steps = 100;
    return c;
}

static void ex_init(struct executor *ex, const struct fixture *f, const struct executor_config *c)
{
    cr_assert_eq(executor_create(ex, &f->m, c), TB_OK, "executor_create(%s): %s", c->device, tb_error_get());
    cr_assert_eq(executor_set_tensors(ex, TF_PARAMS, f->params), TB_OK, "%s", tb_error_get());
}

/* ex_init with the environment's var set to value for the executor's creation (the cuda device reads its
 * TB_CUDA_* switches there), unset after. */
static void ex_init_env(struct executor *ex, const struct fixture *f, const struct executor_config *c, const char *var,
                        const char *value)
{
    cr_assert_eq(setenv(var, value, 1), 0);
    ex_init(ex, f, c);
    unsetenv(var);
}

static size_t fam_n(const struct executor *ex, enum tensor_family fam)
{
    return tensor_family_floats(ex->m, ex->cfg.optim.kind, fam);
}

static float *fam_get(struct executor *ex, enum tensor_family fam)
{
    float *p = tu_fvec(fam_n(ex, fam));
    cr_assert_eq(executor_get_tensors(ex, fam, p), TB_OK, "%s", tb_error_get());
    return p;
}

/* How close a must be to b, tensor by tensor (a parameter entry of family fam; TF_BUFFERS: the buffer entries;
 * TF_OPT: the family as one tensor, its copies are not per tensor). */
struct closeness {
    double tol;       /* ‖a − b‖₂ ≤ tol·max(‖b‖₂, floor·the largest tensor's norm) ... */
    double floor;
    const float *base; /* ... or ≤ k_base·‖base − b‖₂ if that is more (base may be NULL) */
    double k_base;
    double elem;      /* > 0: each element |a − b| ≤ elem·(|b| + max(0.1·the tensor's largest |b|, floor·the
                         family's largest |b|)) + abs_floor */
    double abs_floor;
};

/* Checks every tensor, then fails naming the worst one (not the first: a failing GPU run shows the whole
 * picture); returns the worst ratio of error to allowed per tensor and, in *elem_worst, per element. */
static double check_tensors(const struct model *m, const float *a, const float *b, size_t n, enum tensor_family fam,
                            const struct closeness *q, double *elem_worst, const char *what)
{
    double top = 0.0, worst = 0.0, ew = 0.0, mx = 0.0;
    char msg[512] = "", emsg[512] = "";
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < (fam == TF_OPT ? 1 : m->n_entries); k++) {
            const struct param_entry *pe = fam == TF_OPT ? NULL : &m->params[k];
            if (pe && (pe->kind == PARAM_COUNTER || (pe->kind == PARAM_BUFFER) != (fam == TF_BUFFERS))) continue;
            const size_t i0 = pe ? pe->off : 0, i1 = pe ? pe->off + pe->n : n;
            const char *name = pe ? pe->name : "state";
            double d2 = 0.0, r2 = 0.0, e2 = 0.0, mt = 0.0;
            for (size_t i = i0; i < i1; i++) {
                d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
                r2 += (double)b[i] * b[i];
                if (q->base) e2 += ((double)q->base[i] - b[i]) * ((double)q->base[i] - b[i]);
                mt = fmax(mt, fabs(b[i]));
            }
            if (pass == 0) {
                top = fmax(top, sqrt(r2));
                continue;
            }
            const double ref = fmax(sqrt(r2), q->floor * top);
            const double allow = fmax(q->tol * ref, q->k_base * sqrt(e2)) + 1e-30, r = sqrt(d2) / allow;
            if (!(r <= worst)) { /* NaN too */
                worst = r;
                snprintf(msg, sizeof msg, "%s (family %d): |cuda - cpu| %.3g, |cpu| %.3g (rel %.3g, tol %g; baseline %.3g)",
                         name, (int)fam, sqrt(d2), sqrt(r2), sqrt(d2) / ref, q->tol, sqrt(e2));
            }
            for (size_t i = i0; q->elem > 0.0 && i < i1; i++) {
                const double d = fabs((double)a[i] - b[i]);
                const double e = d / (q->elem * (fabs(b[i]) + fmax(0.1 * mt, q->floor * mx)) + q->abs_floor + 1e-30);
                if (!(e <= ew)) {
                    ew = e;
                    snprintf(emsg, sizeof emsg, "%s element %zu: %.9g cuda, %.9g cpu (tensor's largest %.3g)", name,
                             i - i0, (double)a[i], (double)b[i], mt);
                }
            }
        }
    cr_assert(worst <= 1.0, "%s: %s: %.3g of the allowed", what, msg, worst);
    cr_assert(ew <= 1.0, "%s: %s: %.3g of the allowed", what, emsg, ew);
    if (elem_worst) *elem_worst = ew;
    return worst;
}

/* Family fam of the two executors close: per tensor in L2 norm within tol (floored at a thousandth of the
 * largest tensor's norm), and every element within 10·tol of itself or of a tenth of its tensor's largest or
 * a thousandth of the family's largest, whichever is more, plus abs_floor (the third GPU run: a BatchNorm bias
 * whose gradient is zero but for rounding, largest element 3e-6, differed by 5e-6). Elementwise relative alone
 * was too strict: an element that is a sum cancelling to near zero (a BatchNorm-fed gradient, a summed batch)
 * carries the summation order's rounding relative to its terms,
 * not to itself (the first GPU runs: 1.2e-3, then 2e-2 on single elements of the stem's weight gradient
 * under BatchNorm whose tensors agree far closer in norm). abs_floor: Adam's update is lr·g/(|g| + eps), so
 * a gradient element near eps moves its parameter by up to ~lr times the gradient's relative error — the
 * parameters' checks allow a thousandth of the largest step per step taken. */
static void assert_close_abs(struct executor *gpu, struct executor *cpu, enum tensor_family fam, double tol,
                             double abs_floor, const char *what)
{
    const size_t n = fam_n(cpu, fam);
    float *a = fam_get(gpu, fam), *b = fam_get(cpu, fam);
    const struct closeness q = {.tol = tol, .floor = 1e-3, .elem = 10.0 * tol, .abs_floor = abs_floor};
    double ew = 0.0;
    const double l2 = check_tensors(cpu->m, a, b, n, fam, &q, &ew, what);
    cr_log_info("%s: family %d within %.3g of the allowed per tensor (tol %g), %.3g per element", what, (int)fam, l2,
                tol, ew);
    free(a), free(b);
}

static void assert_close(struct executor *gpu, struct executor *cpu, enum tensor_family fam, double tol,
                         const char *what)
{
    assert_close_abs(gpu, cpu, fam, tol, 0.0, what);
}

static void assert_bitwise(struct executor *a, struct executor *b, enum tensor_family fam, const char *what)
{
    const size_t n = fam_n(a, fam);
    float *pa = fam_get(a, fam), *pb = fam_get(b, fam);
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&pa[i], &pb[i], sizeof(float)) == 0, "%s: family %d element %zu: %.9g vs %.9g", what,
                  (int)fam, i, (double)pa[i], (double)pb[i]);
    free(pa), free(pb);
}

static struct executor_pass pass(const struct fixture *f, int n, long step, int l0, int l1)
{
    return (struct executor_pass){.n = n, .n_global = n, .step = step, .x = f->ds.images, .y = f->y, .training = 1,
                                  .l0 = l0, .l1 = l1};
}

TestSuite(cuda, .timeout = 300);

/* Forward over the whole chain, then a backward over [k,L) for every k: each layer's backward (and the
 * ones after it) against the cpu's, with and without label smoothing. */
Test(cuda, dense_chain_ops_vs_cpu)
{
    need_gpu();
    for (int sm = 0; sm < 2; sm++) {
        struct fixture f;
        fixture_init(&f, N, sm ? 0.1f : 0.0f);
        const int L = f.m.n_layers;
        for (int k = 0; k < L; k++) {
            struct executor g, c;
            struct executor_config cg = config("cuda", N, OPTIM_ADAM), cc = config("cpu", N, OPTIM_ADAM);
            ex_init(&g, &f, &cg);
            ex_init(&c, &f, &cc);
            executor_zero_grads(&g), executor_zero_grads(&c);
            double lg, lc;
            const struct executor_pass fw = pass(&f, N, 1, 0, L), bw = pass(&f, N, 1, k, L);
            cr_assert_eq(executor_forward(&g, &fw, &lg), TB_OK, "%s", tb_error_get());
            cr_assert_eq(executor_forward(&c, &fw, &lc), TB_OK, "%s", tb_error_get());
            cr_assert(fabs(lg - lc) <= 1e-5 * fabs(lc), "loss %.9g cuda, %.9g cpu (smoothing %d)", lg, lc, sm);
            cr_assert_eq(executor_backward(&g, &bw), TB_OK, "%s", tb_error_get());
            cr_assert_eq(executor_backward(&c, &bw), TB_OK, "%s", tb_error_get());
            char what[96];
            snprintf(what, sizeof what, "backward over [%d,%d), smoothing %.1f", k, L, sm ? 0.1 : 0.0);
            assert_close(&g, &c, TF_GRADS, 1e-4, what);
            executor_destroy(&g), executor_destroy(&c);
        }
        fixture_free(&f);
    }
}

Test(cuda, mlp_train_step_vs_cpu)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    struct executor g, c;
    struct executor_config cg = config("cuda", N, OPTIM_ADAM), cc = config("cpu", N, OPTIM_ADAM);
    ex_init(&g, &f, &cg);
    ex_init(&c, &f, &cc);
    struct executor *both[2] = {&g, &c};
    double l[2];
    for (int e = 0; e < 2; e++) {
        const struct executor_pass p = pass(&f, N, 1, 0, 0);
        executor_zero_grads(both[e]);
        cr_assert_eq(executor_forward_backward(both[e], &p, &l[e]), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(both[e], 1), TB_OK, "%s", tb_error_get());
    }
    cr_assert(fabs(l[0] - l[1]) <= 1e-4 * fabs(l[1]), "loss %.9g cuda, %.9g cpu", l[0], l[1]);
    assert_close_abs(&g, &c, TF_PARAMS, 1e-5, 1e-3 * cg.optim.lr, "params after one Adam step");
    assert_close(&g, &c, TF_OPT, 1e-4, "Adam state after one step");
    executor_destroy(&g), executor_destroy(&c);
    fixture_free(&f);
}

/* optim.c's rules and schedules on the device: the same random gradients and state, update at step 7 of a
 * warm-up of 5 and a cosine decay, whole and in 3 parts (not LARS: trust ratios need whole tensors). */
Test(cuda, optimizers_vs_cpu)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, 4, 0.0f);
    const enum optim_kind kinds[4] = {OPTIM_SGD, OPTIM_ADAM, OPTIM_RMSPROP, OPTIM_LARS};
    for (int j = 0; j < 4; j++)
        for (int parts = 1; parts <= 3; parts += 2) {
            if (parts > 1 && kinds[j] == OPTIM_LARS) continue;
            struct executor_config cg = config("cuda", 4, kinds[j]), cc = config("cpu", 4, kinds[j]);
            cg.optim.weight_decay = cc.optim.weight_decay = 1e-3f;
            cg.optim.warmup_steps = cc.optim.warmup_steps = 5;
            cg.optim.schedule = cc.optim.schedule = LR_COSINE;
            struct executor g, c;
            ex_init(&g, &f, &cg);
            ex_init(&c, &f, &cc);
            const size_t np = f.m.n_params, no = fam_n(&g, TF_OPT);
            float *gr = tu_fvec(np), *o = tu_fvec(no);
            tu_fill_normal(gr, np, 11, 0.0f, 0.1f);
            tu_fill_uniform(o, no, 12, 0.0f, 0.01f);
            struct executor *both[2] = {&g, &c};
            for (int e = 0; e < 2; e++) {
                cr_assert_eq(executor_set_tensors(both[e], TF_GRADS, gr), TB_OK);
                cr_assert_eq(executor_set_tensors(both[e], TF_OPT, o), TB_OK);
                for (int p = 0; p < parts; p++)
                    cr_assert_eq(executor_update_part(both[e], 7, p, parts), TB_OK, "%s", tb_error_get());
            }
            char what[64];
            snprintf(what, sizeof what, "%s in %d part(s)", optim_name(kinds[j]), parts);
            assert_close(&g, &c, TF_PARAMS, 1e-5, what);
            assert_close(&g, &c, TF_OPT, 1e-5, what);
            free(gr), free(o);
            executor_destroy(&g), executor_destroy(&c);
        }
    fixture_free(&f);
}

Test(cuda, evaluate_vs_cpu)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, 40, 0.0f);
    struct executor g, c;
    struct executor_config cg = config("cuda", 8, OPTIM_ADAM), cc = config("cpu", 8, OPTIM_ADAM);
    cg.eval_batch = cc.eval_batch = 16; /* 40 samples: chunks of 16, 16, 8 */
    ex_init(&g, &f, &cg);
    ex_init(&c, &f, &cc);
    float *lg = tu_fvec(40 * 10), *lc = tu_fvec(40 * 10);
    struct eval_stats eg = {.logits = lg}, ec = {.logits = lc};
    cr_assert_eq(executor_evaluate(&g, f.ds.images, f.y, 40, &eg), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_evaluate(&c, f.ds.images, f.y, 40, &ec), TB_OK, "%s", tb_error_get());
    cr_assert_eq(eg.n, 40);
    cr_assert(fabs(eg.loss_sum - ec.loss_sum) <= 1e-5 * fabs(ec.loss_sum), "%.9g vs %.9g", eg.loss_sum, ec.loss_sum);
    cr_assert_eq(eg.correct, ec.correct);
    for (int i = 0; i < 400; i++) cr_assert(fabs(lg[i] - lc[i]) <= 1e-4 * (fabs(lc[i]) + 1e-2), "logit %d", i);
    free(lg), free(lc);
    executor_destroy(&g), executor_destroy(&c);
    fixture_free(&f);
}

/* Steps 1..n of the fixture, one executor_train_step (the fused step) a call: each loss bitwise want's. */
static void fused_steps_bitwise(struct executor *ex, const struct fixture *f, int n, const double *want)
{
    for (int s = 1; s <= n; s++) {
        struct executor_pass p = {.n = 1, .n_global = 1, .step = s, .x = f->ds.images + (size_t)(s - 1) * IMG * IMG,
                                  .y = f->y + s - 1, .training = 1};
        double l;
        cr_assert_eq(executor_train_step(ex, &p, &l), TB_OK, "%s", tb_error_get());
        cr_assert(memcmp(&l, &want[s - 1], sizeof l) == 0, "fused step %d: %.17g vs %.17g", s, l, want[s - 1]);
    }
}

/* The on-device loop: LOOP_STEPS steps of batch 1 replayed from the captured graph, against the same steps
 * run plainly on the device (bitwise) and on the cpu (within 1e-4). */
Test(cuda, graph_loop_vs_plain_steps)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, LOOP_STEPS, 0.0f);
    struct executor_config cl = config("cuda", 1, OPTIM_ADAM), cp = cl, cc = config("cpu", 1, OPTIM_ADAM);
    cp.no_fused_step = 1;
    struct executor loop, plain, cpu;
    setenv("TB_CUDA_LOOP", "graph", 1); /* the captured graph (the default is the persistent kernel: below) */
    ex_init(&loop, &f, &cl);
    ex_init(&plain, &f, &cp);
    ex_init(&cpu, &f, &cc);
    cr_assert(loop.loop_steps, "mnist-mlp at batch 1 with Adam has the captured step");
    cr_assert(!plain.loop_steps);
    double losses[LOOP_STEPS];
    cr_assert_eq(executor_stage_steps(&loop, 1, LOOP_STEPS, f.ds.images, f.y), TB_OK, "%s", tb_error_get());
    static const long runs[] = {1, 7, 20, 22}; /* from index 0 and from later indices of the staged table */
    for (long r = 0, at = 1; r < 4; at += runs[r++]) {
        long done = -1;
        cr_assert_eq(executor_run_steps(&loop, at, runs[r], losses + at - 1, &done), TB_OK, "%s", tb_error_get());
        cr_assert_eq(done, runs[r]);
    }
    const size_t per = (size_t)IMG * IMG;
    for (int s = 1; s <= LOOP_STEPS; s++) {
        struct executor_pass p = {.n = 1, .n_global = 1, .step = s, .x = f.ds.images + (size_t)(s - 1) * per,
                                  .y = f.y + s - 1, .training = 1};
        double lp, lc;
        executor_zero_grads(&plain);
        cr_assert_eq(executor_forward_backward(&plain, &p, &lp), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(&plain, s), TB_OK);
        executor_zero_grads(&cpu);
        cr_assert_eq(executor_forward_backward(&cpu, &p, &lc), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(&cpu, s), TB_OK);
        cr_assert(memcmp(&losses[s - 1], &lp, sizeof lp) == 0, "step %d: loss %.17g graph, %.17g plain", s,
                  losses[s - 1], lp);
        cr_assert(fabs(lp - lc) <= 1e-4 * fabs(lc), "step %d: loss %.9g cuda, %.9g cpu", s, lp, lc);
    }
    assert_bitwise(&loop, &plain, TF_PARAMS, "graph loop vs plain steps");
    assert_bitwise(&loop, &plain, TF_OPT, "graph loop vs plain steps");
    assert_close_abs(&plain, &cpu, TF_PARAMS, 1e-4, 1e-3 * cl.optim.lr * LOOP_STEPS, "50 cuda steps vs 50 cpu steps");
    /* The fused train step (the harness's per-step path) is the same captured step. */
    struct executor fused;
    ex_init(&fused, &f, &cl);
    unsetenv("TB_CUDA_LOOP");
    cr_assert(fused.fused_step);
    cr_assert(fused.step_what && strstr(fused.step_what, "graph"), "%s", fused.step_what ? fused.step_what : "");
    fused_steps_bitwise(&fused, &f, 5, losses);
    /* A fused step wrote the table's first slot: the staged steps are gone until staged again. */
    cr_assert_eq(executor_stage_steps(&fused, 6, 2, f.ds.images + 5 * (size_t)IMG * IMG, f.y + 5), TB_OK, "%s",
                 tb_error_get());
    struct executor_pass p7 = {.n = 1, .n_global = 1, .step = 6, .x = f.ds.images + 5 * (size_t)IMG * IMG,
                               .y = f.y + 5, .training = 1};
    double l6, l7;
    long done = -1;
    cr_assert_eq(executor_train_step(&fused, &p7, &l6), TB_OK, "%s", tb_error_get());
    cr_assert(memcmp(&l6, &losses[5], sizeof l6) == 0, "fused step 6: %.17g vs %.17g", l6, losses[5]);
    cr_assert_eq(executor_run_steps(&fused, 7, 1, &l7, &done), TB_EINVAL, "a run after a fused step is refused");
    cr_assert_eq(done, 0);
    executor_destroy(&fused);
    executor_destroy(&loop), executor_destroy(&plain), executor_destroy(&cpu);
    fixture_free(&f);
}

/* Runs of `runs` on a fresh executor (the staged table of LOOP_STEPS steps); the per-step losses into out. */
static void loop_runs(struct executor *ex, const struct fixture *f, const long *runs, int n_runs, double *out)
{
    cr_assert_eq(executor_stage_steps(ex, 1, LOOP_STEPS, f->ds.images, f->y), TB_OK, "%s", tb_error_get());
    for (long r = 0, at = 1; r < n_runs; at += runs[r++]) {
        long done = -1;
        cr_assert_eq(executor_run_steps(ex, at, runs[r], out + at - 1, &done), TB_OK, "%s", tb_error_get());
        cr_assert_eq(done, runs[r]);
    }
}

/* The persistent kernel (mlp_persist.cu, the default runs of batch-1 steps): 50 steps in runs of 1, 7, 20 and
 * 22 bitwise the same 50 in one run and a fused step's losses (its arithmetic does not depend on where a run
 * starts), and against the captured graph and the cpu: losses within 1e-4, parameters as assert_close_abs
 * with Adam's floor, moments within 1e-3 in norm (another summation order, 50 steps). */
Test(cuda, persistent_loop_vs_graph_and_cpu)
{
    need_cooperative_launch();
    struct fixture f;
    fixture_init(&f, LOOP_STEPS, 0.0f);
    struct executor_config cl = config("cuda", 1, OPTIM_ADAM), cc = config("cpu", 1, OPTIM_ADAM);
    struct executor split, whole, graph, cpu;
    unsetenv("TB_CUDA_LOOP");
    ex_init(&split, &f, &cl);
    ex_init(&whole, &f, &cl);
    cr_assert(split.step_what && strstr(split.step_what, "persistent"), "the persistent kernel runs mnist-mlp: %s",
              split.step_what ? split.step_what : "(nothing said)");
    ex_init_env(&graph, &f, &cl, "TB_CUDA_LOOP", "graph");
    ex_init(&cpu, &f, &cc);
    double ls[LOOP_STEPS], lw[LOOP_STEPS], lg[LOOP_STEPS];
#ifdef TB_CUDA_EMULATED
    /* Half the steps on the CPU emulation (its grid barriers made this test half of test_cuda_emu's time): the same
     * kernels, runs of 1 and of several, and the run boundaries all the same. */
    static const long runs[] = {1, 7, 9, 8}, one[] = {LOOP_STEPS / 2};
#else
    static const long runs[] = {1, 7, 20, 22}, one[] = {LOOP_STEPS};
#endif
    const int steps = (int)one[0];
    loop_runs(&split, &f, runs, 4, ls);
    loop_runs(&whole, &f, one, 1, lw);
    loop_runs(&graph, &f, one, 1, lg);
    const size_t per = (size_t)IMG * IMG;
    for (int s = 1; s <= steps; s++) {
        struct executor_pass p = {.n = 1, .n_global = 1, .step = s, .x = f.ds.images + (size_t)(s - 1) * per,
                                  .y = f.y + s - 1, .training = 1};
        double lc;
        executor_zero_grads(&cpu);
        cr_assert_eq(executor_forward_backward(&cpu, &p, &lc), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(&cpu, s), TB_OK);
        cr_assert(memcmp(&ls[s - 1], &lw[s - 1], sizeof lc) == 0, "step %d: loss %.17g in runs, %.17g in one run", s,
                  ls[s - 1], lw[s - 1]);
        cr_assert(fabs(ls[s - 1] - lg[s - 1]) <= 1e-4 * fabs(lg[s - 1]), "step %d: loss %.9g persistent, %.9g graph", s,
                  ls[s - 1], lg[s - 1]);
        cr_assert(fabs(ls[s - 1] - lc) <= 1e-4 * fabs(lc), "step %d: loss %.9g persistent, %.9g cpu", s, ls[s - 1], lc);
    }
    assert_bitwise(&split, &whole, TF_PARAMS, "persistent: runs vs one run");
    assert_bitwise(&split, &whole, TF_OPT, "persistent: runs vs one run");
    const double floor = 1e-3 * cl.optim.lr * steps;
    assert_close_abs(&split, &graph, TF_PARAMS, 1e-4, floor, "persistent vs graph, all steps");
    assert_close_abs(&split, &cpu, TF_PARAMS, 1e-4, floor, "persistent vs cpu, all steps");
    {
        const size_t n = fam_n(&cpu, TF_OPT);
        float *a = fam_get(&split, TF_OPT), *b = fam_get(&graph, TF_OPT);
        const struct closeness q = {.tol = 1e-3, .floor = 1e-3};
        cr_log_info("persistent vs graph: Adam moments within %.3g of the allowed",
                    check_tensors(cpu.m, a, b, n, TF_OPT, &q, NULL, "persistent vs graph: Adam moments"));
        free(a), free(b);
    }
    /* The fused step (the harness's per-step path) is a run of one: the same bits. */
    struct executor fused;
    ex_init(&fused, &f, &cl);
    fused_steps_bitwise(&fused, &f, 5, ls);
    executor_destroy(&fused), executor_destroy(&split), executor_destroy(&whole), executor_destroy(&graph);
    executor_destroy(&cpu);
    fixture_free(&f);
}

/* EfficientNet at 32×32 (3 channels, 10 classes) with its initial parameters; the input layer keeps its
 * training crop and flip (keyed like dropout, so both devices draw the same). */
/* An EfficientNet variant at res×res on n synthetic samples, dropout and drop-connect at drop (< 0: the
 * variant's rates). */
static void effnet_fixture_at(struct fixture *f, const char *name, const char *norm, int n, float drop, int res)
{
    memset(f, 0, sizeof *f);
    const struct workload *w = workload_find(name);
    cr_assert_not_null(w, "%s", name);
    struct workload_opts o = {.classes = 10, .in_h = res, .in_w = res, .in_c = 3, .resolution = res,
                              .dropout = drop, .drop_connect = drop};
    snprintf(o.norm, sizeof o.norm, "%s", norm);
    cr_assert_eq(w->build(&f->m, &o), TB_OK, "%s", tb_error_get());
    cr_assert_eq(dataset_synthetic(n, res, res, 3, 10, 7, 1, &f->ds), TB_OK, "%s", tb_error_get());
    f->y = malloc((size_t)n * sizeof *f->y);
    cr_assert_not_null(f->y);
    for (int i = 0; i < n; i++) f->y[i] = f->ds.labels[i];
    f->params = tu_fvec(f->m.n_params);
    f->buffers = tu_fvec(f->m.n_buffers);
    w->init(&f->m, f->params, f->buffers, 42);
}

/* effnet_fixture_at at EFF_RES. */
static void effnet_fixture_drop(struct fixture *f, const char *name, const char *norm, int n, float drop)
{
    effnet_fixture_at(f, name, norm, n, drop, EFF_RES);
}

/* effnet_fixture_drop with the variant's dropout and drop-connect rates. */
static void effnet_fixture(struct fixture *f, const char *name, const char *norm, int n)
{
    effnet_fixture_drop(f, name, norm, n, -1.0f);
}

static void ex_init_buffers(struct executor *ex, const struct fixture *f, const struct executor_config *c)
{
    ex_init(ex, f, c);
    if (f->m.n_buffers) cr_assert_eq(executor_set_tensors(ex, TF_BUFFERS, f->buffers), TB_OK, "%s", tb_error_get());
}

/* One training forward+backward (dropout and drop-connect active: the same keys, so the same masks) on
 * both devices: the loss within 1e-4 relative, every parameter gradient within 1e-3 relative (of the
 * element, or of a thousandth of the largest: assert_close), and the BatchNorm running statistics within
 * 1e-4. 1e-3, not 1e-4, for the gradients: ~80 layers of fp32 reductions summed in a different order
 * (chunked on the GPU, per-thread on the cpu, and the cpu's fused SE projection is not bitwise) compound. */
static void effnet_fwd_bwd(const char *name, const char *norm)
{
    struct fixture f;
    effnet_fixture(&f, name, norm, EFF_N);
    struct executor g, c;
    struct executor_config cg = config("cuda", EFF_N, OPTIM_SGD), cc = config("cpu", EFF_N, OPTIM_SGD);
    ex_init_buffers(&g, &f, &cg);
    ex_init_buffers(&c, &f, &cc);
    double lg, lc;
    const struct executor_pass p = pass(&f, EFF_N, 3, 0, 0);
    executor_zero_grads(&g), executor_zero_grads(&c);
    cr_assert_eq(executor_forward_backward(&g, &p, &lg), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_forward_backward(&c, &p, &lc), TB_OK, "%s", tb_error_get());
    cr_assert(fabs(lg - lc) <= 1e-4 * fabs(lc), "%s: loss %.9g cuda, %.9g cpu", name, lg, lc);
    assert_close(&g, &c, TF_GRADS, 1e-3, name);
    if (f.m.n_buffers) assert_close(&g, &c, TF_BUFFERS, 1e-4, name);
    /* One SGD step from those gradients: the parameters within 1e-4 (lr·g is small beside the weights). */
    cr_assert_eq(executor_update(&g, 3), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_update(&c, 3), TB_OK, "%s", tb_error_get());
    assert_close(&g, &c, TF_PARAMS, 1e-4, name);
    executor_destroy(&g), executor_destroy(&c);
    fixture_free(&f);
}

Test(cuda, effnet_b0_bn_step_vs_cpu)
{
    need_gpu();
    effnet_fwd_bwd("effnet-b0", "batch");
}

Test(cuda, effnet_b0_g16_gn_step_vs_cpu)
{
    need_gpu();
    effnet_fwd_bwd("effnet-b0-g16", "group");
}

/* Evaluation (BatchNorm on its running statistics, no dropout) after one training step, in chunks of the
 * eval batch: loss sum 1e-4, correct count equal. */
Test(cuda, effnet_b0_evaluate_vs_cpu)
{
    need_gpu();
    struct fixture f;
    effnet_fixture(&f, "effnet-b0", "batch", 2 * EFF_N + 4);
    struct executor g, c;
    struct executor_config cg = config("cuda", EFF_N, OPTIM_SGD), cc = config("cpu", EFF_N, OPTIM_SGD);
    cg.eval_batch = cc.eval_batch = EFF_N;
    ex_init_buffers(&g, &f, &cg);
    ex_init_buffers(&c, &f, &cc);
    struct executor *both[2] = {&g, &c};
    for (int e = 0; e < 2; e++) { /* running statistics that are not the initial ones */
        double l;
        const struct executor_pass p = pass(&f, EFF_N, 1, 0, 0);
        executor_zero_grads(both[e]);
        cr_assert_eq(executor_forward_backward(both[e], &p, &l), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(both[e], 1), TB_OK, "%s", tb_error_get());
    }
    struct eval_stats eg = {0}, ec = {0};
    cr_assert_eq(executor_evaluate(&g, f.ds.images, f.y, 2 * EFF_N + 4, &eg), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_evaluate(&c, f.ds.images, f.y, 2 * EFF_N + 4, &ec), TB_OK, "%s", tb_error_get());
    cr_assert_eq(eg.n, 2 * EFF_N + 4);
    cr_assert(fabs(eg.loss_sum - ec.loss_sum) <= 1e-4 * fabs(ec.loss_sum), "%.9g vs %.9g", eg.loss_sum, ec.loss_sum);
    cr_assert_eq(eg.correct, ec.correct);
    executor_destroy(&g), executor_destroy(&c);
    fixture_free(&f);
}

/* Every EfficientNet kind the device takes is accepted at create (B0 BatchNorm, B0-G16 GroupNorm, at
 * 16×16 from 28×28 grey pixels: the input's resampling and 1 → 3 channels), and freed cleanly. */
Test(cuda, accepts_efficientnet)
{
    need_gpu();
    const char *names[2] = {"effnet-b0", "effnet-b0-g16"}, *norms[2] = {"batch", "group"};
    for (int k = 0; k < 2; k++) {
        const struct workload *w = workload_find(names[k]);
        cr_assert_not_null(w);
        struct model m;
        struct workload_opts o = {.classes = 10, .in_h = 28, .in_w = 28, .in_c = 1, .resolution = 16,
                                  .dropout = -1, .drop_connect = -1};
        snprintf(o.norm, sizeof o.norm, "%s", norms[k]);
        cr_assert_eq(w->build(&m, &o), TB_OK, "%s", tb_error_get());
        struct executor ex;
        struct executor_config c = config("cuda", 4, OPTIM_RMSPROP);
        cr_assert_eq(executor_create(&ex, &m, &c), TB_OK, "%s: %s", names[k], tb_error_get());
        executor_destroy(&ex);
        model_free(&m);
    }
}

/* The device's facts (what rows record as machine.gpu) and its memory accounting (figures.gpu_mem_peak_mib):
 * an executor's allocations raise the count by at least its parameters, gradients and Adam state, the
 * high-water mark follows, and destroying it gives every byte back. */
Test(cuda, device_facts_and_memory_accounting)
{
    need_gpu();
    struct device_info d;
    cr_assert_eq(executor_device_info("cuda", &d), TB_OK, "%s", tb_error_get());
    cr_assert(d.name[0] && d.mem_gib > 0 && d.multiprocessors > 0, "%s", d.name);
    cr_assert(strchr(d.capability, '.') && strchr(d.runtime_version, '.') && strchr(d.driver_cuda, '.'),
              "%s %s %s", d.capability, d.runtime_version, d.driver_cuda);
    struct device_memory m0, m1, m2;
    cr_assert_eq(executor_device_memory("cuda", &m0, 1), TB_OK, "%s", tb_error_get());
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    struct executor ex;
    struct executor_config c = config("cuda", N, OPTIM_ADAM);
    ex_init(&ex, &f, &c);
    cr_assert_eq(executor_device_memory("cuda", &m1, 0), TB_OK, "%s", tb_error_get());
    const double state = 4.0 * 4.0 * (double)f.m.n_params; /* params, grads, Adam's two moments */
    cr_assert(m1.alloc_bytes - m0.alloc_bytes >= state, "%.0f bytes counted for %.0f of state",
              m1.alloc_bytes - m0.alloc_bytes, state);
    cr_assert(m1.alloc_peak_bytes >= m1.alloc_bytes);
    cr_assert(m1.used_bytes > 0 && m1.used_bytes <= m1.total_bytes);
    executor_destroy(&ex);
    cr_assert_eq(executor_device_memory("cuda", &m2, 0), TB_OK, "%s", tb_error_get());
    cr_assert_float_eq(m2.alloc_bytes, m0.alloc_bytes, 0.5, "every byte given back");
    cr_assert_float_eq(m2.alloc_peak_bytes, m1.alloc_peak_bytes, 0.5, "the mark stays until a reset");
    fixture_free(&f);
}

/* ---- mixed precision (--precision bf16) ---- */

/* How far bf16 may be from the cpu's fp32, per tensor: tol of the tensor's norm floored at a hundredth of the
 * largest tensor's (check_tensors), or K_BF16 times what rounding only the weights to bf16 moves the cpu's own
 * result (base: a cpu executor started from the bf16-rounded parameters), if that is more. The fixed
 * tolerance alone failed where the quantity cancels: the stem's weight gradient under BatchNorm (0.57 of its
 * norm on the first GPU run; within the baseline's allowance on the second), a BatchNorm bias whose gradient
 * is zero but for rounding (a 1×1 conv into BatchNorm sums it away: 0.085 against the cpu's 6e-6), the MLP's
 * gradients summed over a batch of random labels (0.063 to 0.083 of their norm, 20 times the weight-only
 * baseline: bf16 also rounds every activation and gradient). A wiring fault (a wrong tensor, offset or
 * missing accumulation) is off by its whole size, far outside these. */
enum { K_BF16 = 8 };
static void assert_close_bf16(struct executor *gpu, struct executor *cpu, struct executor *base,
                              enum tensor_family fam, double tol, const char *what)
{
    const size_t n = fam_n(cpu, fam);
    float *a = fam_get(gpu, fam), *b = fam_get(cpu, fam), *e = fam_get(base, fam);
    const struct closeness q = {.tol = tol, .floor = 1e-2, .base = e, .k_base = K_BF16};
    const double worst = check_tensors(cpu->m, a, b, n, fam, &q, NULL, what);
    cr_log_info("%s: family %d within %.3g of the allowed (tol %g, or %d x the bf16-weight baseline)", what,
                (int)fam, worst, tol, (int)K_BF16);
    free(a), free(b), free(e);
}

/* A cpu executor like c's config whose parameters are the fixture's rounded to prec (bf16 or fp16, nearest
 * even: stage_prec_round, the ipu stages' own rounding). */
static void ex_init_half_baseline(struct executor *ex, const struct fixture *f, const struct executor_config *c,
                                  enum stage_prec prec)
{
    ex_init_buffers(ex, f, c);
    float *r = tu_fdup(f->params, f->m.n_params);
    stage_prec_round(r, f->m.n_params, prec, 0, 0, 0, 0);
    cr_assert_eq(executor_set_tensors(ex, TF_PARAMS, r), TB_OK, "%s", tb_error_get());
    free(r);
}

/* A cuda executor config in mixed precision, bf16 or fp16 (fp16: the dynamic loss scale). */
static struct executor_config config_half(enum stage_prec prec, int n_max, enum optim_kind kind)
{
    struct executor_config c = config("cuda", n_max, kind);
    c.prec = prec;
    return c;
}

static struct executor_config config_bf16(int n_max, enum optim_kind kind)
{
    return config_half(STAGE_PREC_BF16, n_max, kind);
}

/* Runs without a GPU: the bf16 arena's tensors are disjoint, 256-byte aligned, each as large as its
 * elements (fp32 for the logits and BatchNorm's saved statistics, bf16 otherwise), and the arena about half
 * the fp32 one; both workloads are accepted by the bf16 check. */
Test(cuda, bf16_layout)
{
    struct fixture f[2];
    fixture_init(&f[0], 4, 0.0f);
    effnet_fixture(&f[1], "effnet-b0", "batch", 4);
    for (int k = 0; k < 2; k++) {
        const struct model *m = &f[k].m;
        const char *why = NULL;
        cr_assert(tb_cuda_bf16_model_ok(m, &why), "%s: %s", m->name, why ? why : "");
        size_t *off = malloc((size_t)m->n_tensors * sizeof *off);
        cr_assert_not_null(off);
        const int n_max = 8;
        const size_t bytes = tb_cuda_bf16_layout(m, n_max, off);
        int saved_fp32 = 0;
        for (int t = 0; t < m->n_tensors; t++) {
            const struct tensor *x = &m->tensors[t];
            int saved = 0;
            for (int i = 0; i < m->n_layers; i++) saved |= m->layers[i].save == t;
            const size_t elem = t == m->logits || saved ? 4 : 2, n = x->fixed ? x->fixed : x->per_sample * n_max;
            const size_t end = t + 1 < m->n_tensors ? off[t + 1] : bytes;
            cr_assert_eq(off[t] % 256, 0, "%s: tensor %d at %zu", m->name, t, off[t]);
            cr_assert(end >= off[t] + n * elem, "%s: tensor %d needs %zu bytes, has %zu", m->name, t, n * elem,
                      end - off[t]);
            saved_fp32 += saved;
        }
        cr_assert(k == 0 || saved_fp32 > 0, "effnet-b0 has BatchNorm statistics");
        const double fp32 = (double)model_act_floats(m, n_max) * 4.0;
        cr_assert(bytes < 0.6 * fp32, "%s: bf16 arena %zu bytes vs fp32 %.0f", m->name, bytes, fp32);
        free(off);
    }
    fixture_free(&f[0]), fixture_free(&f[1]);
}

/* The gradient arena (grad_layout.h), without a GPU: each gradient 256-byte aligned inside the arena, no two
 * gradients alive at one backward step sharing a byte, every layer's dout and din alive at its step, and the
 * arena under half the one-per-tensor layout on effnet-b0 (the point of sharing); fp32 and bf16 sizes. */
Test(cuda, grad_layout)
{
    struct fixture f[2];
    fixture_init(&f[0], 4, 0.0f);
    effnet_fixture(&f[1], "effnet-b0", "batch", 4);
    for (int k = 0; k < 2; k++)
        for (int bf16 = 0; bf16 <= 1; bf16++) {
            const struct model *m = &f[k].m;
            const int n_max = 8, nt = m->n_tensors;
            size_t *off = malloc((size_t)nt * sizeof *off), *len = calloc((size_t)nt, sizeof *len);
            int *a = malloc((size_t)nt * sizeof *a), *b = malloc((size_t)nt * sizeof *b);
            cr_assert(off && len && a && b);
            const size_t bytes = tb_cuda_grad_layout(m, n_max, bf16, off);
            cr_assert_gt(bytes, 0);
            for (int t = 0; t < nt; t++) {
                if (!tb_cuda_grad_life(m, t, &a[t], &b[t])) continue;
                len[t] = m->tensors[t].per_sample * (size_t)n_max * (bf16 && t != m->logits ? 2 : 4);
                cr_assert_eq(off[t] % 256, 0);
                cr_assert(off[t] + len[t] <= bytes, "%s: gradient %d past the arena", m->name, t);
                cr_assert(a[t] <= b[t]);
            }
            for (int t = 0; t < nt; t++)
                for (int u = t + 1; u < nt; u++) {
                    if (!len[t] || !len[u] || a[t] > b[u] || a[u] > b[t]) continue; /* not alive together */
                    cr_assert(off[t] + len[t] <= off[u] || off[u] + len[u] <= off[t],
                              "%s: gradients %d [%d,%d] and %d [%d,%d] alive together share bytes", m->name, t, a[t],
                              b[t], u, a[u], b[u]);
                }
            for (int i = 0; i < m->n_layers; i++) { /* a backward reads dout and writes din at its own step */
                const struct layer *l = &m->layers[i];
                const int step = m->n_layers - 1 - i;
                if (len[l->out]) cr_assert(a[l->out] <= step && step <= b[l->out], "%s: layer %d's dout", m->name, i);
                if (len[l->in]) cr_assert(a[l->in] <= step && step <= b[l->in], "%s: layer %d's din", m->name, i);
            }
            const double full = (double)model_act_floats(m, n_max) * (bf16 ? 2.0 : 4.0);
            cr_log_info("%s%s: gradient arena %.3f of the one-per-tensor layout", m->name, bf16 ? " bf16" : "",
                        (double)bytes / full);
            if (k == 1)
                cr_assert(bytes < 0.5 * full, "effnet-b0: gradient arena %zu bytes, all tensors %.0f", bytes, full);
            free(off), free(len), free(a), free(b);
        }
    fixture_free(&f[0]), fixture_free(&f[1]);
}

/* One mixed-precision training step (zero, forward/backward, SGD) against the cpu's fp32 one from the same
 * parameters, tensors within assert_close_bf16's allowance (the baseline: the same cpu step from weights
 * rounded to prec). fp16's gradients come out of the device unscaled (get_tensors divides by the loss scale
 * between a backward and its update), so they compare as bf16's do; fp16 rounds 8 times finer than bf16, so
 * bf16's allowances hold it with room. */
static void half_step_vs_cpu(struct fixture *f, int n, enum stage_prec prec, double loss_tol, double grad_tol,
                             float loss_scale)
{
    struct executor g, c, c16;
    struct executor_config cg = config_half(prec, n, OPTIM_SGD), cc = config("cpu", n, OPTIM_SGD);
    cg.loss_scale = loss_scale; /* fp16: static where the dynamic start (32768) overflows; 0: dynamic */
    ex_init_buffers(&g, f, &cg);
    ex_init_buffers(&c, f, &cc);
    ex_init_half_baseline(&c16, f, &cc, prec);
    double lg, lc, l16;
    const struct executor_pass p = pass(f, n, 3, 0, 0);
    executor_zero_grads(&g), executor_zero_grads(&c), executor_zero_grads(&c16);
    cr_assert_eq(executor_forward_backward(&g, &p, &lg), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_forward_backward(&c, &p, &lc), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_forward_backward(&c16, &p, &l16), TB_OK, "%s", tb_error_get());
    const char *pn = stage_prec_name(prec);
    cr_assert(fabs(lg - lc) <= fmax(loss_tol * fabs(lc), K_BF16 * fabs(l16 - lc)), "%s %s: loss %.9g cuda, %.9g cpu",
              f->m.name, pn, lg, lc);
    assert_close_bf16(&g, &c, &c16, TF_GRADS, grad_tol, prec == STAGE_PREC_FP16 ? "fp16 gradients" : "bf16 gradients");
    if (f->m.n_buffers)
        assert_close_bf16(&g, &c, &c16, TF_BUFFERS, 2e-2,
                          prec == STAGE_PREC_FP16 ? "fp16 running statistics" : "bf16 running statistics");
    /* The fp32 master weights' update from the device's own (bf16-computed, fp32-stored) gradients: the cpu's
     * SGD from the same gradients, within fp32 rounding (the update's arithmetic is the same expression). */
    float *gg = fam_get(&g, TF_GRADS);
    cr_assert_eq(executor_set_tensors(&c, TF_GRADS, gg), TB_OK, "%s", tb_error_get());
    free(gg);
    cr_assert_eq(executor_update(&g, 3), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_update(&c, 3), TB_OK, "%s", tb_error_get());
    assert_close(&g, &c, TF_PARAMS, 1e-5,
                 "mixed precision: fp32 master weights after one SGD step from the device's gradients");
    executor_destroy(&g), executor_destroy(&c), executor_destroy(&c16);
}

Test(cuda, mlp_bf16_step_vs_cpu)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    half_step_vs_cpu(&f, N, STAGE_PREC_BF16, 1e-2, 0.15, 0.0f);
    fixture_free(&f);
}

Test(cuda, effnet_b0_bf16_step_vs_cpu)
{
    need_gpu();
    struct fixture f;
    effnet_fixture(&f, "effnet-b0", "batch", EFF_N);
    half_step_vs_cpu(&f, EFF_N, STAGE_PREC_BF16, 2e-2, 0.1, 0.0f);
    fixture_free(&f);
}

/* Steps of Adam on one batch, bf16 or fp16 on the device and fp32 on the cpu: the device's loss falls (the
 * weights' 2-byte copy follows each update) and, with cmp_tol > 0, stays within cmp_tol of the cpu's at every
 * step. */
static void half_loss_falls(struct fixture *f, int n, enum stage_prec prec, int steps, double cmp_tol, float loss_scale)
{
    struct executor g, c;
    struct executor_config cg = config_half(prec, n, OPTIM_ADAM), cc = config("cpu", n, OPTIM_ADAM);
    cg.loss_scale = loss_scale;
    ex_init_buffers(&g, f, &cg);
    ex_init_buffers(&c, f, &cc);
    double first = 0.0, last = 0.0;
    for (int s = 1; s <= steps; s++) {
        double lg, lc;
        const struct executor_pass p = pass(f, n, 1, 0, 0); /* step 1's crop/flip every time: one function */
        executor_zero_grads(&g);
        cr_assert_eq(executor_forward_backward(&g, &p, &lg), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(&g, s), TB_OK, "%s", tb_error_get());
        if (cmp_tol > 0.0) {
            executor_zero_grads(&c);
            cr_assert_eq(executor_forward_backward(&c, &p, &lc), TB_OK, "%s", tb_error_get());
            cr_assert_eq(executor_update(&c, s), TB_OK, "%s", tb_error_get());
            cr_assert(fabs(lg - lc) <= cmp_tol * fabs(lc), "%s step %d: %s loss %.6g, cpu fp32 %.6g", f->m.name, s,
                      stage_prec_name(prec), lg, lc);
        }
        if (s == 1) first = lg;
        last = lg;
    }
    cr_assert(last < 0.9 * first, "%s: %s loss %.6g at step 1, %.6g at step %d", f->m.name, stage_prec_name(prec),
              first, last, steps);
    struct executor_stats es;
    cr_assert_eq(executor_stats(&g, &es), TB_OK, "%s", tb_error_get());
    cr_assert(!es.loss_scaling || es.loss_scaling->skipped == 0, "%s: %ld of %d fp16 steps skipped (scale now %g)",
              f->m.name, es.loss_scaling ? es.loss_scaling->skipped : 0L, steps,
              es.loss_scaling ? (double)es.loss_scaling->scale : 0.0);
    executor_destroy(&g), executor_destroy(&c);
}

Test(cuda, mlp_bf16_loss_falls)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    half_loss_falls(&f, N, STAGE_PREC_BF16, 12, 5e-2, 0.0f);
    fixture_free(&f);
}

Test(cuda, effnet_b0_bf16_loss_falls)
{
    need_gpu();
    struct fixture f;
    effnet_fixture_drop(&f, "effnet-b0", "batch", EFF_N, 0.0f); /* no dropout: the same function every step */
    half_loss_falls(&f, EFF_N, STAGE_PREC_BF16, 12, 0.0, 0.0f);
    fixture_free(&f);
}

/* ---- fp16 mixed precision: the bf16 tests' checks, and loss scaling (core/loss_scale.h on the device) ---- */

Test(cuda, mlp_fp16_step_vs_cpu)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    half_step_vs_cpu(&f, N, STAGE_PREC_FP16, 1e-2, 0.15, 0.0f);
    fixture_free(&f);
}

Test(cuda, effnet_b0_fp16_step_vs_cpu)
{
    need_gpu();
    struct fixture f;
    effnet_fixture(&f, "effnet-b0", "batch", EFF_N);
    /* static 256: at the dynamic start (32768) this net's activation gradients reach ~3e6 (a depthwise output
     * under BatchNorm over 8 rows: |dL/dx| ~100), inf in fp16; at 256 ~2.6e4 */
    half_step_vs_cpu(&f, EFF_N, STAGE_PREC_FP16, 2e-2, 0.1, 256.0f);
    fixture_free(&f);
}

Test(cuda, mlp_fp16_loss_falls)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    half_loss_falls(&f, N, STAGE_PREC_FP16, 12, 5e-2, 0.0f);
    fixture_free(&f);
}

Test(cuda, effnet_b0_fp16_loss_falls)
{
    need_gpu();
    struct fixture f;
    effnet_fixture_drop(&f, "effnet-b0", "batch", EFF_N, 0.0f);
    half_loss_falls(&f, EFF_N, STAGE_PREC_FP16, 12, 0.0, 256.0f);
    fixture_free(&f);
}

/* The device's loss scaler, as executor_stats shows it. */
static const struct loss_scaler *scaler_of(struct executor *ex)
{
    struct executor_stats st;
    cr_assert_eq(executor_stats(ex, &st), TB_OK, "%s", tb_error_get());
    cr_assert_not_null(st.loss_scaling, "an fp16 executor reports its loss scaling");
    return st.loss_scaling;
}

/* A step whose gradients overflow is skipped whole: at a static scale of 1e30 the loss gradient is inf in fp16
 * (its loss, fp32 from fp32 logits, is not). Each update leaves the weights as they were, counts the step and
 * keeps the scale; the tenth in a row ends the run as diverged, in one line naming --loss-scale. */
Test(cuda, fp16_overflow_skips_the_update)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    struct executor g;
    struct executor_config cg = config_half(STAGE_PREC_FP16, N, OPTIM_SGD);
    cg.loss_scale = 1e30f;
    ex_init_buffers(&g, &f, &cg);
    float *w0 = fam_get(&g, TF_PARAMS);
    for (int s = 1; s <= LOSS_SCALE_DIVERGED; s++) {
        double l;
        const struct executor_pass p = pass(&f, N, s, 0, 0);
        executor_zero_grads(&g);
        cr_assert_eq(executor_forward_backward(&g, &p, &l), TB_OK, "step %d: %s", s, tb_error_get());
        cr_assert(isfinite(l), "step %d: the loss is fp32 and finite (%g)", s, l);
        const int rc = executor_update(&g, s);
        const struct loss_scaler *ls = scaler_of(&g);
        cr_assert_eq(ls->skipped, s, "step %d skipped (%ld counted)", s, ls->skipped);
        cr_assert_eq(ls->scale, 1e30f, "a static scale stays");
        if (s < LOSS_SCALE_DIVERGED) {
            cr_assert_eq(rc, TB_OK, "step %d: %s", s, tb_error_get());
        } else {
            cr_assert_eq(rc, TB_EDIVERGED, "step %d: %d overflows in a row at a static scale diverge", s, s);
            cr_assert(strstr(tb_error_get(), "--loss-scale") && !strchr(tb_error_get(), '\n'), "%s", tb_error_get());
            tb_error_clear();
        }
    }
    float *w = fam_get(&g, TF_PARAMS);
    tu_assert_bitwise(w, w0, f.m.n_params, "fp16: the weights after ten skipped steps");
    free(w), free(w0);
    executor_destroy(&g);
    fixture_free(&f);
}

/* One fp16 step whose gradients overflow: step 1's backward, one gradient set to inf between it and the update
 * (set_tensors takes unscaled gradients: the update then checks them without unscaling), and the update. */
static void overflowed_step(struct executor *g, const struct fixture *f)
{
    double l;
    const struct executor_pass p = pass(f, N, 1, 0, 0);
    executor_zero_grads(g);
    cr_assert_eq(executor_forward_backward(g, &p, &l), TB_OK, "%s", tb_error_get());
    float *gr = fam_get(g, TF_GRADS);
    gr[f->m.n_params / 2] = INFINITY;
    cr_assert_eq(executor_set_tensors(g, TF_GRADS, gr), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_update(g, 1), TB_OK, "%s", tb_error_get());
    free(gr);
}

/* A dynamic scale halves on an overflowed step and the step is skipped; the next clean step updates at the
 * halved scale. */
Test(cuda, fp16_dynamic_scale_halves_on_an_overflow)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    struct executor g;
    struct executor_config cg = config_half(STAGE_PREC_FP16, N, OPTIM_SGD);
    ex_init_buffers(&g, &f, &cg);
    cr_assert_eq(scaler_of(&g)->scale, LOSS_SCALE_INIT);
    float *w0 = fam_get(&g, TF_PARAMS);
    overflowed_step(&g, &f);
    cr_assert_eq(scaler_of(&g)->scale, LOSS_SCALE_INIT / 2, "halved on the overflow");
    cr_assert_eq(scaler_of(&g)->skipped, 1);
    float *w = fam_get(&g, TF_PARAMS);
    tu_assert_bitwise(w, w0, f.m.n_params, "fp16: the weights after the skipped step");
    free(w);
    double l;
    const struct executor_pass p = pass(&f, N, 2, 0, 0);
    executor_zero_grads(&g);
    cr_assert_eq(executor_forward_backward(&g, &p, &l), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_update(&g, 2), TB_OK, "%s", tb_error_get());
    cr_assert_eq(scaler_of(&g)->skipped, 1, "a clean step is not skipped");
    cr_assert_eq(scaler_of(&g)->scale, LOSS_SCALE_INIT / 2);
    w = fam_get(&g, TF_PARAMS);
    cr_assert(memcmp(w, w0, f.m.n_params * sizeof *w) != 0, "the clean step updated the weights");
    free(w), free(w0);
    executor_destroy(&g);
    fixture_free(&f);
}

/* A fresh run on a prepared executor (--repeat, a tta seed) resets the optimizer state, TF_OPT from nothing: the
 * loss scaler restarts with it, at the configured scale with no skipped steps (it carried the last run's). */
Test(cuda, fp16_optimizer_reset_restarts_the_loss_scaler)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    struct executor g;
    struct executor_config cg = config_half(STAGE_PREC_FP16, N, OPTIM_SGD);
    ex_init_buffers(&g, &f, &cg);
    overflowed_step(&g, &f);
    cr_assert_eq(scaler_of(&g)->skipped, 1);
    cr_assert_eq(executor_set_tensors(&g, TF_OPT, NULL), TB_OK, "%s", tb_error_get());
    const struct loss_scaler *ls = scaler_of(&g);
    cr_assert_eq(ls->scale, LOSS_SCALE_INIT, "the scale restarts (%g)", ls->scale);
    cr_assert(ls->skipped == 0 && ls->clean_steps == 0 && ls->overflow_run == 0, "the counts restart");
    executor_destroy(&g);
    fixture_free(&f);
}

/* --plan tta's later seeds re-key a prepared executor (executor_set_seed): its dropout and drop-connect masks
 * are then those of an executor created with that seed, not the first seed's. */
Test(cuda, set_seed_rekeys_dropout)
{
    need_gpu();
    struct fixture f;
    effnet_fixture_at(&f, "effnet-b0", "batch", 2, 0.5f, EFF_RES); /* two samples: masks differ all the same */
    struct executor b, k;
    struct executor_config c1 = config("cuda", 2, OPTIM_SGD), c5 = c1;
    c5.seed = 5;
    ex_init_buffers(&b, &f, &c1);
    ex_init_buffers(&k, &f, &c5);
    const struct executor_pass p = pass(&f, 2, 3, 0, 0);
    /* No update between the passes: a training forward's loss depends on the weights and the masks only. */
    double la, lb, lk;
    executor_zero_grads(&b);
    cr_assert_eq(executor_forward_backward(&b, &p, &la), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_set_seed(&b, 5), TB_OK, "%s", tb_error_get());
    executor_zero_grads(&b), executor_zero_grads(&k);
    cr_assert_eq(executor_forward_backward(&b, &p, &lb), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_forward_backward(&k, &p, &lk), TB_OK, "%s", tb_error_get());
    /* Re-keyed: other masks than seed 1's, and seed 5's from the start (the same weights and step). */
    cr_assert(la != lb, "set_seed(5) kept seed 1's dropout masks: loss %.17g both times", la);
    cr_assert(lb == lk, "set_seed(5): loss %.17g, a seed-5 executor's %.17g", lb, lk);
    executor_destroy(&b), executor_destroy(&k);
    fixture_free(&f);
}

/* Evaluation in bf16 (BatchNorm on running statistics, fp32 logits copied out) after one step: the loss sum
 * within 2e-2 of the cpu's fp32 evaluation, the logits within 2e-2 of the largest. */
Test(cuda, effnet_b0_bf16_evaluate_vs_cpu)
{
    need_gpu();
    struct fixture f;
    effnet_fixture(&f, "effnet-b0", "batch", 2 * EFF_N + 4);
    struct executor g, c, c16;
    struct executor_config cg = config_bf16(EFF_N, OPTIM_SGD), cc = config("cpu", EFF_N, OPTIM_SGD);
    cg.eval_batch = cc.eval_batch = EFF_N;
    ex_init_buffers(&g, &f, &cg);
    ex_init_buffers(&c, &f, &cc);
    ex_init_half_baseline(&c16, &f, &cc, STAGE_PREC_BF16);
    struct executor *all[3] = {&g, &c, &c16};
    for (int e = 0; e < 3; e++) {
        double l;
        const struct executor_pass p = pass(&f, EFF_N, 1, 0, 0);
        executor_zero_grads(all[e]);
        cr_assert_eq(executor_forward_backward(all[e], &p, &l), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_update(all[e], 1), TB_OK, "%s", tb_error_get());
    }
    const int n = 2 * EFF_N + 4;
    const size_t nl = (size_t)n * 10;
    float *lg = tu_fvec(nl), *lc = tu_fvec(nl), *l16 = tu_fvec(nl);
    struct eval_stats eg = {.logits = lg}, ec = {.logits = lc}, e16 = {.logits = l16};
    cr_assert_eq(executor_evaluate(&g, f.ds.images, f.y, n, &eg), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_evaluate(&c, f.ds.images, f.y, n, &ec), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_evaluate(&c16, f.ds.images, f.y, n, &e16), TB_OK, "%s", tb_error_get());
    cr_assert_eq(eg.n, n);
    cr_assert(fabs(eg.loss_sum - ec.loss_sum) <= fmax(2e-2 * fabs(ec.loss_sum), K_BF16 * fabs(e16.loss_sum - ec.loss_sum)),
              "%.9g vs %.9g (bf16-weight baseline %.9g)", eg.loss_sum, ec.loss_sum, e16.loss_sum);
    /* The logits as one vector: ‖cuda − cpu‖ within 2e-2 of ‖cpu‖ or K_BF16 times the baseline's distance. */
    double d2 = 0.0, r2 = 0.0, b2 = 0.0;
    for (size_t i = 0; i < nl; i++) {
        d2 += ((double)lg[i] - lc[i]) * ((double)lg[i] - lc[i]);
        b2 += ((double)l16[i] - lc[i]) * ((double)l16[i] - lc[i]);
        r2 += (double)lc[i] * lc[i];
    }
    const double allow = fmax(2e-2 * sqrt(r2), K_BF16 * sqrt(b2));
    cr_log_info("bf16 evaluation logits: |cuda - cpu| %.3g, |cpu| %.3g, bf16-weight baseline %.3g (%.3g of the allowed)",
                sqrt(d2), sqrt(r2), sqrt(b2), sqrt(d2) / allow);
    cr_assert(sqrt(d2) <= allow, "bf16 evaluation logits: |cuda - cpu| %.3g, |cpu| %.3g, bf16-weight baseline %.3g",
              sqrt(d2), sqrt(r2), sqrt(b2));
    free(lg), free(lc), free(l16);
    executor_destroy(&g), executor_destroy(&c), executor_destroy(&c16);
    fixture_free(&f);
}

/* Runs of 1, 7, 20 and 22 steps on a and b (fresh executors of the same fixture): the same losses, parameters and
 * Adam moments bit for bit. */
static void runs_bitwise(struct executor *a, struct executor *b, const struct fixture *f, const char *what)
{
    double la[LOOP_STEPS], lb[LOOP_STEPS];
    static const long runs[] = {1, 7, 20, 22};
    loop_runs(a, f, runs, 4, la);
    loop_runs(b, f, runs, 4, lb);
    for (int s = 0; s < LOOP_STEPS; s++)
        cr_assert(memcmp(&la[s], &lb[s], sizeof la[s]) == 0, "%s: step %d: loss %.17g, %.17g", what, s + 1, la[s], lb[s]);
    assert_bitwise(a, b, TF_PARAMS, what);
    assert_bitwise(a, b, TF_OPT, what);
}

/* The persistent kernel's blocks as one thread-block cluster (TB_CUDA_MLP_SYNC=cluster: hardware cluster
 * barriers) against the same 16 chunks with grid barriers (TB_CUDA_MLP_ROWS=49 for both): the same arithmetic,
 * so the same losses, parameters and Adam moments bit for bit, over runs of 1, 7, 20 and 22 steps. */
Test(cuda, persistent_cluster_vs_grid_barriers)
{
    need_cooperative_launch();
    struct fixture f;
    fixture_init(&f, LOOP_STEPS, 0.0f);
    struct executor_config cl = config("cuda", 1, OPTIM_ADAM);
    struct executor grid, cluster;
    unsetenv("TB_CUDA_LOOP");
    cr_assert_eq(setenv("TB_CUDA_MLP_ROWS", "49", 1), 0);
    ex_init(&grid, &f, &cl);
    cr_assert_eq(setenv("TB_CUDA_MLP_SYNC", "cluster", 1), 0);
    ex_init(&cluster, &f, &cl);
    unsetenv("TB_CUDA_MLP_SYNC"), unsetenv("TB_CUDA_MLP_ROWS");
    cr_assert(cluster.step_what, "the persistent kernel was not chosen");
    if (!strstr(cluster.step_what, "cluster")) { /* a device (or slice of one) without room for the cluster */
        const char *what = cluster.step_what;
        executor_destroy(&grid), executor_destroy(&cluster);
        fixture_free(&f);
        cr_skip_test("the device refused the 16-block cluster (%s); stderr says why", what);
    }
    runs_bitwise(&grid, &cluster, &f, "cluster vs grid barriers");
    executor_destroy(&grid), executor_destroy(&cluster);
    fixture_free(&f);
}

/* The persistent kernel's last layer in every block (the default for mnist-mlp's 128x10: two grid barriers a
 * step fewer) against that layer's chunks on their owners (TB_CUDA_MLP_LAST=apart): every block forms the
 * chunks' partial products and sums them in the owners' order, so the same losses, parameters and Adam moments
 * bit for bit, over runs of 1, 7, 20 and 22 steps. */
Test(cuda, persistent_last_layer_in_every_block_vs_apart)
{
    need_cooperative_launch();
    struct fixture f;
    fixture_init(&f, LOOP_STEPS, 0.0f);
    struct executor_config cl = config("cuda", 1, OPTIM_ADAM);
    struct executor every, apart;
    unsetenv("TB_CUDA_LOOP");
    ex_init(&every, &f, &cl);
    ex_init_env(&apart, &f, &cl, "TB_CUDA_MLP_LAST", "apart");
    cr_assert(every.step_what && strstr(every.step_what, "last layer in every block"), "%s",
              every.step_what ? every.step_what : "(the persistent kernel was not chosen)");
    cr_assert(apart.step_what && strstr(apart.step_what, "persistent") && !strstr(apart.step_what, "every block"),
              "%s", apart.step_what ? apart.step_what : "(the persistent kernel was not chosen)");
    runs_bitwise(&every, &apart, &f, "last layer in every block vs apart");
    executor_destroy(&every), executor_destroy(&apart);
    fixture_free(&f);
}

/* One training step on both executors — a (the defaults), b (zeroing and accumulating, TB_CUDA_GRAD_ZERO=memset) —
 * and its loss equal and every parameter gradient equal (±0 alike), or, where cuBLAS chose otherwise (below),
 * within 1e-6 in norm (bf16, whose stored gradients round a last-bit change to 2⁻⁸: 1e-2). */
static void same_step(struct executor *a, struct executor *b, const struct fixture *f, long step, int bf16,
                      const char *what)
{
    const struct executor_pass p = pass(f, EFF_N, step, 0, 0);
    double la, lb;
    executor_zero_grads(a), executor_zero_grads(b);
    cr_assert_eq(executor_forward_backward(a, &p, &la), TB_OK, "%s", tb_error_get());
    cr_assert_eq(setenv("TB_CUDA_GRAD_ZERO", "memset", 1), 0);
    const int st = executor_forward_backward(b, &p, &lb);
    unsetenv("TB_CUDA_GRAD_ZERO");
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(la == lb, "%s, step %ld: loss %.17g overwriting, %.17g zeroing", what, step, la, lb);
    const size_t n = fam_n(a, TF_GRADS);
    float *ga = fam_get(a, TF_GRADS), *gb = fam_get(b, TF_GRADS);
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (ga[i] != gb[i] && !differ++) first = i;
    if (differ) {
        /* Our kernels give the same bits either way (0 + v and fma(a, b, 0) round as v and a·b); cuBLAS's 1×1
         * backward-data at a last reader runs with beta 0 on one side and beta 1 on the other, and may pick
         * another kernel for it. A clobbered arena would be far off; last bits from cuBLAS's choice are not. */
        fprintf(stderr, "%s, step %ld: %zu of %zu gradients differ in their last bits (first %zu: %.9g vs %.9g); "
                        "checked within a tolerance instead\n", what, step, differ, n, first, (double)ga[first],
                (double)gb[first]);
        const struct closeness q = {.tol = bf16 ? 1e-2 : 1e-6, .floor = 1e-3, .elem = bf16 ? 0.0 : 1e-5};
        check_tensors(b->m, ga, gb, n, TF_GRADS, &q, NULL, what);
        /* b takes a's gradients, so the update, the evaluation and the next forward still compare bit for bit */
        cr_assert_eq(executor_set_tensors(b, TF_GRADS, ga), TB_OK, "%s", tb_error_get());
    }
    free(ga), free(gb);
}

static void overwrite_same_values(const char *name, const char *norm, int bf16)
{
    struct fixture f;
    effnet_fixture(&f, name, norm, EFF_N);
    struct executor a, b;
    const struct executor_config c = bf16 ? config_bf16(EFF_N, OPTIM_SGD) : config("cuda", EFF_N, OPTIM_SGD);
    ex_init_buffers(&a, &f, &c);
    cr_assert_eq(setenv("TB_CUDA_GRAD_LAYOUT", "full", 1), 0);
    cr_assert_eq(setenv("TB_CUDA_EVAL_ARENA", "own", 1), 0);
    ex_init_buffers(&b, &f, &c);
    unsetenv("TB_CUDA_GRAD_LAYOUT"), unsetenv("TB_CUDA_EVAL_ARENA");
    char what[64];
    snprintf(what, sizeof what, "%s%s", name, bf16 ? " bf16" : "");
    same_step(&a, &b, &f, 3, bf16, what);
    /* an evaluation between steps (a's in the training arena, b's in its own), then the next step */
    struct eval_stats ea = {0}, eb = {0};
    cr_assert_eq(executor_update(&a, 3), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_update(&b, 3), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_evaluate(&a, f.ds.images, f.y, EFF_N, &ea), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_evaluate(&b, f.ds.images, f.y, EFF_N, &eb), TB_OK, "%s", tb_error_get());
    cr_assert(ea.loss_sum == eb.loss_sum && ea.correct == eb.correct, "%s: evaluation %.17g vs %.17g", what,
              ea.loss_sum, eb.loss_sum);
    same_step(&a, &b, &f, 4, bf16, what);
    executor_destroy(&a), executor_destroy(&b);
    fixture_free(&f);
}

/* The 1×1 weight gradients split over row chunks (the default: one strided-batched GEMM into parts summed in
 * chunk order) against the one GEMM (TB_CUDA_WGRAD=gemm, read at each call), in whole steps: at 64×64 batch 8
 * the 32×32 layers have 8,192 rows, so they split in two (the executor tests at 32×32 never split). Same
 * executor, same inputs, the gradients only summed in another order: every parameter gradient within 1e-5 in
 * norm (1e-4 an element, of the tensor's scale), fp32 and bf16; the loss equal (the forward is the same). */
static void wgrad_split_vs_gemm(int bf16)
{
    enum { RES = 64 };
    struct fixture f;
    effnet_fixture_at(&f, "effnet-b0", "batch", EFF_N, 0.0f, RES);
    const struct executor_config c = bf16 ? config_bf16(EFF_N, OPTIM_SGD) : config("cuda", EFF_N, OPTIM_SGD);
    struct executor ex;
    ex_init_buffers(&ex, &f, &c);
    const struct executor_pass p = pass(&f, EFF_N, 3, 0, 0);
    double ls, lg;
    executor_zero_grads(&ex);
    cr_assert_eq(executor_forward_backward(&ex, &p, &ls), TB_OK, "%s", tb_error_get());
    float *gs = fam_get(&ex, TF_GRADS);
    executor_zero_grads(&ex);
    cr_assert_eq(setenv("TB_CUDA_WGRAD", "gemm", 1), 0);
    const int st = executor_forward_backward(&ex, &p, &lg);
    unsetenv("TB_CUDA_WGRAD");
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert(ls == lg, "%s: loss %.17g split, %.17g one GEMM", bf16 ? "bf16" : "fp32", ls, lg);
    float *gg = fam_get(&ex, TF_GRADS);
    const struct closeness q = {.tol = 1e-5, .floor = 1e-3, .elem = 1e-4};
    check_tensors(&f.m, gs, gg, fam_n(&ex, TF_GRADS), TF_GRADS, &q, NULL, bf16 ? "wgrad split bf16" : "wgrad split");
    free(gs), free(gg);
    executor_destroy(&ex);
    fixture_free(&f);
}

Test(cuda, effnet_wgrad_split_vs_one_gemm)
{
    need_gpu();
    wgrad_split_vs_gemm(0);
    wgrad_split_vs_gemm(1);
}

/* The parameter gradients of one training step of ex over the layers [0, L): the forward in two passes cut at
 * fcut (0: one pass), the backward in two cut at bcut (from the loss down; 0: one pass). */
static float *step_in_passes(struct executor *ex, const struct fixture *f, int L, int fcut, int bcut, double *loss)
{
    executor_zero_grads(ex);
    const struct executor_pass f0 = pass(f, EFF_N, 3, 0, fcut), f1 = pass(f, EFF_N, 3, fcut, L);
    const struct executor_pass b1 = pass(f, EFF_N, 3, bcut, L), b0 = pass(f, EFF_N, 3, 0, bcut);
    double unused;
    if (fcut) cr_assert_eq(executor_forward(ex, &f0, &unused), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_forward(ex, &f1, loss), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_backward(ex, &b1), TB_OK, "%s", tb_error_get());
    if (bcut) cr_assert_eq(executor_backward(ex, &b0), TB_OK, "%s", tb_error_get());
    return fam_get(ex, TF_GRADS);
}

/* BatchNorm applied in its depthwise reader's loads (the default: the normalised tensor never written) against
 * the two apart (TB_CUDA_BN_DW=apart at create): the same maths, the depthwise's loads doing the apply pass's. fp32:
 * the loss and every parameter gradient within 1e-6 (norm; 1e-5 an element). bf16: apart, the normalised tensor is
 * rounded to bf16 on its way through memory, and what cancels moves by its size with it (an SE block's gradients;
 * this fixture's loss, 4 % from fp32's in bf16, moves 3 % when one pair runs apart), so the loss and each tensor
 * within twice bf16's own distance from an fp32 executor's (2·|fp32 − apart|). Then the fused
 * executor's step with its forward cut between a BatchNorm and its depthwise (the BatchNorm writes its output,
 * the depthwise reads it: as apart) and with its backward cut there (the depthwise's backward still reads through
 * the BatchNorm its forward left unwritten: the whole step's bits). */
static void bn_dw_vs_apart(int bf16)
{
    struct fixture f;
    effnet_fixture(&f, "effnet-b0", "batch", EFF_N);
    const int L = f.m.n_layers;
    int cut = -1; /* a depthwise whose input is a BatchNorm's output */
    for (int d = 1; d < L && cut < 0; d++)
        if (f.m.layers[d].op == OP_DWCONV && f.m.layers[d - 1].op == OP_BN && f.m.layers[d - 1].out == f.m.layers[d].in)
            cut = d;
    cr_assert(cut > 0, "effnet-b0 has a BatchNorm -> depthwise pair");
    int *pair = malloc((size_t)L * sizeof *pair);
    cr_assert_not_null(pair);
    /* the stem's and the 15 expansions': every depthwise of effnet-b0 reads a BatchNorm that nothing else reads */
    cr_assert_eq(tb_cuda_bn_dw_pairs(&f.m, pair), 16, "BatchNorm -> depthwise pairs fused in effnet-b0");
    cr_assert_eq(pair[cut - 1], cut, "the cut's pair is one of them");
    free(pair);
    const struct executor_config c32 = config("cuda", EFF_N, OPTIM_SGD);
    const struct executor_config c = bf16 ? config_bf16(EFF_N, OPTIM_SGD) : c32;
    struct executor a, b;
    ex_init_buffers(&a, &f, &c);
    cr_assert_eq(setenv("TB_CUDA_BN_DW", "apart", 1), 0);
    ex_init_buffers(&b, &f, &c);
    unsetenv("TB_CUDA_BN_DW");
    double la, lb, lf, lk, l32 = 0.0;
    float *ga = step_in_passes(&a, &f, L, 0, 0, &la), *gb = step_in_passes(&b, &f, L, 0, 0, &lb), *g32 = NULL;
    if (bf16) {
        struct executor r;
        ex_init_buffers(&r, &f, &c32);
        g32 = step_in_passes(&r, &f, L, 0, 0, &l32);
        executor_destroy(&r);
    }
    const char *what = bf16 ? "BatchNorm on the depthwise's load, bf16" : "BatchNorm on the depthwise's load";
    const struct closeness q = bf16 ? (struct closeness){.tol = 1e-2, .floor = 1e-3, .base = g32, .k_base = 2}
                                    : (struct closeness){.tol = 1e-6, .floor = 1e-3, .elem = 1e-5};
    const double ltol = bf16 ? 2.0 * fabs(l32 - lb) : 1e-6 * fabs(lb);
    cr_assert(fabs(la - lb) <= ltol, "%s: loss %.17g fused, %.17g apart", what, la, lb);
    check_tensors(&f.m, ga, gb, fam_n(&a, TF_GRADS), TF_GRADS, &q, NULL, what);
    float *gf = step_in_passes(&a, &f, L, cut, 0, &lf), *gk = step_in_passes(&a, &f, L, 0, cut, &lk);
    cr_assert(fabs(lf - la) <= ltol && lk == la, "%s: loss %.17g whole, %.17g forward cut, %.17g backward cut", what, la,
              lf, lk);
    check_tensors(&f.m, ga, gf, fam_n(&a, TF_GRADS), TF_GRADS, &q, NULL, "forward cut at the depthwise");
    const size_t n = fam_n(&a, TF_GRADS);
    for (size_t i = 0; i < n; i++)
        cr_assert(ga[i] == gk[i], "%s: backward cut at the depthwise, gradient %zu: %.9g whole, %.9g cut", what, i,
                  (double)ga[i], (double)gk[i]);
    free(ga), free(gb), free(gf), free(gk), free(g32);
    executor_destroy(&a), executor_destroy(&b);
    fixture_free(&f);
}

Test(cuda, effnet_bn_in_depthwise_vs_apart)
{
    need_gpu();
    bn_dw_vs_apart(0);
    bn_dw_vs_apart(1);
}

/* The overwrite-instead-of-zero shortcut (a gradient written with acc = 0 by its last reader) in the shared
 * gradient arena, evaluation in the training arena, against zeroing and accumulating (TB_CUDA_GRAD_ZERO=memset)
 * in one slot per tensor and evaluation in its own arena (TB_CUDA_GRAD_LAYOUT=full TB_CUDA_EVAL_ARENA=own at
 * create): v and 0 + v are the same number, and nothing may be clobbered by what shares its bytes, so the
 * losses, every parameter gradient and an evaluation between two steps are equal (±0 alike), fp32 and bf16,
 * BatchNorm and G16 GroupNorm, drop-connect on. */
Test(cuda, effnet_gradient_arena_and_overwrite_same_values)
{
    need_gpu();
    overwrite_same_values("effnet-b0", "batch", 0);
    overwrite_same_values("effnet-b0-g16", "group", 0);
    overwrite_same_values("effnet-b0", "batch", 1);
}

/* --no-fuse (executor_config.no_fuse) runs the BatchNorm -> depthwise pairs apart, as TB_CUDA_BN_DW=apart does:
 * bf16, where apart rounds the normalised tensor to bf16 in memory and so moves the loss, the no-fuse training
 * forward's loss is the apart one's bits, not the fused one's. The device had ignored it (the fused bits) while
 * the row recorded no_fuse: true. A forward alone at 8x8, batch 2: the emulation's second each. */
Test(cuda, effnet_no_fuse_runs_bn_and_depthwise_apart)
{
    need_gpu();
    enum { NF_N = 2, NF_RES = 8 };
    struct fixture f;
    effnet_fixture_at(&f, "effnet-b0", "batch", NF_N, -1.0f, NF_RES);
    struct executor_config c = config_bf16(NF_N, OPTIM_SGD);
    struct executor ex[3]; /* fused (the default), TB_CUDA_BN_DW=apart, --no-fuse */
    ex_init_buffers(&ex[0], &f, &c);
    cr_assert_eq(setenv("TB_CUDA_BN_DW", "apart", 1), 0);
    ex_init_buffers(&ex[1], &f, &c);
    unsetenv("TB_CUDA_BN_DW");
    c.no_fuse = 1;
    ex_init_buffers(&ex[2], &f, &c);
    const struct executor_pass p = pass(&f, NF_N, 3, 0, 0);
    double loss[3];
    for (int k = 0; k < 3; k++) cr_assert_eq(executor_forward(&ex[k], &p, &loss[k]), TB_OK, "%s", tb_error_get());
    cr_assert(loss[0] != loss[1], "bf16's fused and apart losses differ (%.17g), else this test tells nothing",
              loss[0]);
    cr_assert(memcmp(&loss[2], &loss[1], sizeof loss[1]) == 0, "loss %.17g --no-fuse, %.17g apart (%.17g fused)",
              loss[2], loss[1], loss[0]);
    for (int k = 0; k < 3; k++) executor_destroy(&ex[k]);
    fixture_free(&f);
}

/* A stage executor's forward through the loss layer copies its logits back (executor_pass.logits: the ipu
 * schedule's --plan evaluate asks for them on the last stage): two cuda stages [0,k) [k,L), the boundary
 * exported and imported in fp32, give the cpu's evaluation's loss, correct count and logits. The device had
 * refused the pass, so `--backend ipu --device cuda --plan evaluate` always failed at run time. */
Test(cuda, stage_forward_returns_the_logits)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    const int L = f.m.n_layers, k = 2, K = 10;
    struct executor st[2], cpu;
    const struct executor_config cg = config("cuda", N, OPTIM_ADAM), cc = config("cpu", N, OPTIM_ADAM);
    for (int s = 0; s < 2; s++) {
        struct executor_config sc = cg;
        sc.l0 = s ? k : 0, sc.l1 = s ? L : k;
        ex_init(&st[s], &f, &sc);
    }
    ex_init(&cpu, &f, &cc);
    float *lg = tu_fvec((size_t)N * K), *lc = tu_fvec((size_t)N * K);
    struct eval_stats ec = {.logits = lc};
    cr_assert_eq(executor_evaluate(&cpu, f.ds.images, f.y, N, &ec), TB_OK, "%s", tb_error_get());
    const struct executor_pass a = {.n = N, .n_global = N, .x = f.ds.images, .y = f.y, .l0 = 0, .l1 = k};
    double l0, l1;
    cr_assert_eq(executor_forward(&st[0], &a, &l0), TB_OK, "%s", tb_error_get());
    float *acts = tu_fvec(model_boundary_floats(&f.m, k, N, 0) + 16);
    cr_assert_eq(executor_export_boundary(&st[0], 0, 0, acts, N, STAGE_PREC_FP32, 1.0f), 0);
    cr_assert_eq(executor_import_boundary(&st[1], 0, acts, N, STAGE_PREC_FP32, 1.0f), 0);
    long correct = 0;
    const struct executor_pass b = {.n = N, .n_global = N, .y = f.y, .l0 = k, .l1 = L, .logits = lg,
                                    .n_correct = &correct};
    cr_assert_eq(executor_forward(&st[1], &b, &l1), TB_OK, "%s", tb_error_get());
    cr_assert(fabs(l1 - ec.loss_sum) <= 1e-5 * fabs(ec.loss_sum), "loss %.9g stages, %.9g cpu", l1, ec.loss_sum);
    cr_assert_eq(correct, ec.correct);
    for (int i = 0; i < N * K; i++)
        cr_assert(fabs(lg[i] - lc[i]) <= 1e-4 * (fabs(lc[i]) + 1e-2), "logit %d: %.9g stages, %.9g cpu", i,
                  (double)lg[i], (double)lc[i]);
    free(lg), free(lc), free(acts);
    executor_destroy(&st[0]), executor_destroy(&st[1]), executor_destroy(&cpu);
    fixture_free(&f);
}

/* The profile's forward and backward seconds summed over layers [l0,l1). */
static void profile_sums(struct executor *ex, int l0, int l1, double *fwd, double *bwd)
{
    struct executor_stats s;
    cr_assert_eq(executor_stats(ex, &s), TB_OK);
    cr_assert_not_null(s.profile, "--profile asked for, no profile kept");
    *fwd = *bwd = 0.0;
    for (int i = l0; i < l1; i++) *fwd += s.profile[2 * i], *bwd += s.profile[2 * i + 1];
}

/* --profile and --trace at batch 1 with Adam (where the fused step would run: the persistent kernel, or the graph
 * under TB_CUDA_LOOP=graph) take the per-layer path, whose events time each layer: the harness's run of steps gives
 * a profile and a trace of its layers. The fused step had been chosen anyway and recorded zeros as per-layer times
 * and no trace event. */
Test(cuda, batch1_profile_and_trace_time_each_layer)
{
    need_gpu();
    enum { STEPS = 3 };
    struct fixture f;
    fixture_init(&f, STEPS, 0.0f);
    const int L = f.m.n_layers;
    for (int graph = 0; graph <= 1; graph++)
        for (int what = 0; what < 2; what++) { /* --profile, --trace */
            struct executor_config c = config("cuda", 1, OPTIM_ADAM);
            c.profile = what == 0, c.trace = what == 1;
            struct executor ex;
            if (graph) ex_init_env(&ex, &f, &c, "TB_CUDA_LOOP", "graph");
            else ex_init(&ex, &f, &c);
            cr_assert(!ex.fused_step && !ex.loop_steps, "%s%s: the fused batch-1 step (%s) has no layers to time",
                      what ? "--trace" : "--profile", graph ? ", TB_CUDA_LOOP=graph" : "",
                      ex.step_what ? ex.step_what : "?");
            double losses[STEPS];
            long done = -1;
            cr_assert_eq(executor_stage_steps(&ex, 1, STEPS, f.ds.images, f.y), TB_OK, "%s", tb_error_get());
            cr_assert_eq(executor_run_steps(&ex, 1, STEPS, losses, &done), TB_OK, "%s", tb_error_get());
            cr_assert_eq(done, STEPS);
            struct executor_stats s;
            cr_assert_eq(executor_stats(&ex, &s), TB_OK);
            if (c.profile) {
                double fwd, bwd;
                profile_sums(&ex, 0, L, &fwd, &bwd);
                cr_assert(fwd > 0.0 && bwd > 0.0, "profile: %g s forward, %g s backward", fwd, bwd);
            } else {
                int F = 0, B = 0;
                for (int e = 0; e < s.n_trace; e++) F += s.trace[e].phase == 'F', B += s.trace[e].phase == 'B';
                cr_assert(F == L && B == L, "the last step's trace: %d forward, %d backward events of %d layers", F, B,
                          L);
            }
            executor_destroy(&ex);
        }
    fixture_free(&f);
}

/* --profile on stage executors (the ipu schedule on the cuda device): each stage times its own layers, at the
 * model's layer indices, as the cpu's stages do; the ipu backend puts the stages' rows together. Stages had kept
 * no profile, and the row's per-layer times were all zeros. */
Test(cuda, stage_profile_times_its_layers)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    const int L = f.m.n_layers, k = 2;
    struct executor st[2];
    for (int s = 0; s < 2; s++) {
        struct executor_config sc = config("cuda", N, OPTIM_ADAM);
        sc.profile = 1;
        sc.l0 = s ? k : 0, sc.l1 = s ? L : k;
        ex_init(&st[s], &f, &sc);
    }
    const struct executor_pass a = {.n = N, .n_global = N, .step = 1, .x = f.ds.images, .l0 = 0, .l1 = k,
                                    .training = 1};
    const struct executor_pass b = {.n = N, .n_global = N, .step = 1, .y = f.y, .l0 = k, .l1 = L, .training = 1};
    double l0, l1;
    executor_zero_grads(&st[0]), executor_zero_grads(&st[1]);
    cr_assert_eq(executor_forward(&st[0], &a, &l0), TB_OK, "%s", tb_error_get());
    float *acts = tu_fvec(model_boundary_floats(&f.m, k, N, 0) + 16);
    float *grads = tu_fvec(model_boundary_floats(&f.m, k, N, 1) + 16);
    cr_assert_eq(executor_export_boundary(&st[0], 0, 0, acts, N, STAGE_PREC_FP32, 1.0f), 0);
    cr_assert_eq(executor_import_boundary(&st[1], 0, acts, N, STAGE_PREC_FP32, 1.0f), 0);
    cr_assert_eq(executor_forward_backward(&st[1], &b, &l1), TB_OK, "%s", tb_error_get());
    cr_assert_eq(executor_export_boundary(&st[1], 1, 0, grads, N, STAGE_PREC_FP32, 1.0f), 0);
    cr_assert_eq(executor_import_boundary(&st[0], 1, grads, N, STAGE_PREC_FP32, 1.0f), 0);
    cr_assert_eq(executor_backward(&st[0], &a), TB_OK, "%s", tb_error_get());
    for (int s = 0; s < 2; s++) {
        double fwd, bwd;
        profile_sums(&st[s], s ? k : 0, s ? L : k, &fwd, &bwd);
        cr_assert(fwd > 0.0 && bwd > 0.0, "stage %d: %g s forward, %g s backward", s, fwd, bwd);
    }
    free(acts), free(grads);
    executor_destroy(&st[0]), executor_destroy(&st[1]);
    fixture_free(&f);
}

/* --trace: the step's events end with the update ('U', layer -1, after the last backward), whole or in parts (one
 * interval a part), as the cpu executor's do. The cuda trace had stopped at the backward. */
Test(cuda, trace_ends_with_the_update)
{
    need_gpu();
    struct fixture f;
    fixture_init(&f, N, 0.0f);
    struct executor_config c = config("cuda", N, OPTIM_ADAM);
    c.trace = 1;
    struct executor ex;
    ex_init(&ex, &f, &c);
    for (int parts = 1; parts <= 2; parts++) {
        executor_trace_begin(&ex, 100.0);
        executor_zero_grads(&ex);
        const struct executor_pass p = pass(&f, N, parts, 0, 0);
        double loss;
        cr_assert_eq(executor_forward_backward(&ex, &p, &loss), TB_OK, "%s", tb_error_get());
        for (int k = 0; k < parts; k++)
            cr_assert_eq(executor_update_part(&ex, parts, k, parts), TB_OK, "%s", tb_error_get());
        struct executor_stats s;
        cr_assert_eq(executor_stats(&ex, &s), TB_OK);
        cr_assert_geq(s.n_trace, parts + 2);
        double last_b = -1.0;
        int U = 0;
        for (int e = 0; e < s.n_trace; e++) {
            const struct exec_trace_event *ev = &s.trace[e];
            if (ev->phase == 'B') last_b = fmax(last_b, ev->t1);
            if (ev->phase != 'U') continue;
            U++;
            cr_assert_eq(ev->layer, -1);
            cr_assert(ev->t0 >= 0.0 && ev->t1 >= ev->t0, "update event %d: %g..%g s", U, ev->t0, ev->t1);
            cr_assert(ev->t0 >= last_b - 1e-6, "update event %d starts at %g s, before the backward's end %g s", U,
                      ev->t0, last_b);
        }
        cr_assert_eq(U, parts, "%d update events for %d update parts", U, parts);
        cr_assert_eq(s.trace[s.n_trace - 1].phase, 'U', "the step's trace ends with its update");
    }
    executor_destroy(&ex);
    fixture_free(&f);
}

/* bench --list's line for the cuda backend names what batch 1 runs by default, the persistent kernel (the captured
 * graph is TB_CUDA_LOOP=graph's, or a chain's that does not fit). It described the graph. */
Test(cuda, list_names_the_persistent_kernel)
{
    const struct backend_entry *e = backend_find("cuda");
    cr_assert_not_null(e, "a cuda build lists the cuda backend");
    cr_assert(strstr(e->summary, "persistent kernel") && !strstr(e->summary, "captured"), "%s", e->summary);
}
