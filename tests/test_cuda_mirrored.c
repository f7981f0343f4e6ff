/* test_cuda_mirrored.c — mirrored replicas and --prefetch on the cuda device (issue 26 item 2; built only
 * with TB_CUDA; needs a GPU to run: each test reports itself skipped with the runtime's reason where none
 * is present). Ran on an H200 (one GPU: the NCCL test skips, it needs two).
 *
 * On a GPU:
 *   - placement: an executor of ordinal r runs on GPU r mod the GPUs present;
 *   - the group collective on one GPU (2, 3 and 4 executors, a stream and memory each) leaves every
 *     member the sum in the host ring's order, bitwise (the order test_mirrored_offhost.c checks
 *     against backends/allreduce.c's ring), and twice over the same bits;
 *   - on two or more GPUs (one executor a GPU, then two a GPU): NCCL's sum within 1e-6 relative of the
 *     double-precision sum, the same bits twice (skipped on one GPU, saying so);
 *   - mirrored on cuda with one replica is bitwise the cuda backend (the reference schedule on the GPU);
 *     with 2 replicas (on one GPU, or two) each step from the cuda backend's state gives its loss and
 *     summed gradients within 1e-5 relative and, from the same gradients, its update;
 *   - --prefetch (inputs copied ahead on a copy stream) leaves the bits of the plain upload, on the cuda
 *     backend and on mirrored;
 *   - --trace: every replica's step ends with its update event;
 *   - bench at batch 1: --profile and --trace record real per-layer times and events, and say the steps ran layer
 *     by layer; --prefetch's note says the device loop stages its own samples.
 */
#include "test_util.h"

#include "test_reliability_util.h"

#include "backend.h"
#include "dataset.h"
#include "executor.h"
#include "executor_cuda.h"
#include "layout.h"
#include "status.h"
#include "workload.h"

enum { IMG = 28, STEPS = 6 };

static void need_gpu(void)
{
    if (executor_cuda_probe() == TB_OK) return;
    const char *msg = tb_error_get(), *why = strchr(msg, '(');
    cr_skip_test("no CUDA device: %s", why ? why : msg);
}

TestSuite(cuda_mirrored, .timeout = 300);

static void build_mlp(struct model *m)
{
    struct workload_opts o = {.classes = 10, .in_h = IMG, .in_w = IMG, .in_c = 1, .dropout = -1, .drop_connect = -1};
    cr_assert_eq(workload_mnist_mlp.build(m, &o), TB_OK, "%s", tb_error_get());
}

/* Deterministic values in [-1, 1) with a spread of exponents, so that the summation order shows. */
static void fill(float *p, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = ((float)(s >> 8) / 16777216.0f * 2.0f - 1.0f) * (float)(1 << (s & 7));
    }
}

/* k cuda executors of mnist-mlp at ordinals ord[0..k), gradients set to distinct values, one collective:
 * every member's gradients into got[r] (k × n_params). */
static void group_sum(int k, const int *ord, float *const *in, float **got, char *how, size_t how_n)
{
    struct model m;
    build_mlp(&m);
    struct executor *ex = calloc((size_t)k, sizeof *ex);
    cr_assert_not_null(ex);
    for (int r = 0; r < k; r++) {
        struct executor_config c = {.device = "cuda", .threads = 1, .n_max = 4, .seed = 42, .ordinal = ord[r]};
        optim_config_defaults(&c.optim, OPTIM_SGD);
        cr_assert_eq(executor_create(&ex[r], &m, &c), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_cuda_gpu(&ex[r]), ord[r] % executor_cuda_count(), "ordinal %d's GPU", ord[r]);
        cr_assert_eq(executor_set_tensors(&ex[r], TF_GRADS, in[r]), TB_OK, "%s", tb_error_get());
    }
    struct executor_group g;
    cr_assert_eq(executor_group_init(&g, ex, k), TB_OK, "%s", tb_error_get());
    snprintf(how, how_n, "%s", g.how);
    cr_assert_eq(executor_group_allreduce_grads(&g), TB_OK, "%s", tb_error_get());
    for (int r = 0; r < k; r++) {
        cr_assert_eq(executor_synchronize(&ex[r]), TB_OK, "%s", tb_error_get());
        cr_assert_eq(executor_get_tensors(&ex[r], TF_GRADS, got[r]), TB_OK, "%s", tb_error_get());
    }
    executor_group_free(&g);
    for (int r = 0; r < k; r++) executor_destroy(&ex[r]);
    free(ex);
    model_free(&m);
}

static size_t mlp_params(void)
{
    struct model m;
    build_mlp(&m);
    const size_t n = m.n_params;
    model_free(&m);
    return n;
}

Test(cuda_mirrored, one_gpu_group_sum_is_the_ring_order_bitwise)
{
    need_gpu();
    const size_t n = mlp_params();
    for (int k = 2; k <= 4; k++) {
        float *in[4], *got[4], *again[4];
        int ord[4] = {0};
        for (int r = 0; r < k; r++) {
            in[r] = tu_fvec(n), got[r] = tu_fvec(n), again[r] = tu_fvec(n);
            fill(in[r], n, (uint32_t)(r + 1));
        }
        char how[128];
        group_sum(k, ord, in, got, how, sizeof how);
        cr_assert(strstr(how, "1 GPU") != NULL, "%s", how);
        group_sum(k, ord, in, again, how, sizeof how);
        float *want = tu_fvec(n);
        for (int c = 0; c < k; c++) { /* backends/allreduce.c's ring: chunk c from replica c on */
            size_t lo, hi;
            tb_slice(n, c, k, &lo, &hi);
            for (size_t i = lo; i < hi; i++) {
                float s = in[c][i];
                for (int j = 1; j < k; j++) s = s + in[(c + j) % k][i];
                want[i] = s;
            }
        }
        for (int r = 0; r < k; r++) {
            char what[64];
            snprintf(what, sizeof what, "%d executors on one GPU, member %d", k, r);
            tu_assert_bitwise(got[r], want, n, what);
            tu_assert_bitwise(again[r], got[r], n, what);
            free(in[r]), free(got[r]), free(again[r]);
        }
        free(want);
    }
}

Test(cuda_mirrored, several_gpus_nccl_sum)
{
    need_gpu();
    const int G = executor_cuda_count();
    if (G < 2) cr_skip_test("one GPU here: the NCCL path needs two");
    const size_t n = mlp_params();
    for (int per = 1; per <= 2; per++) {
        const int k = G * per > 8 ? 8 : G * per;
        float *in[8], *got[8], *again[8];
        int ord[8];
        for (int r = 0; r < k; r++) {
            ord[r] = r;
            in[r] = tu_fvec(n), got[r] = tu_fvec(n), again[r] = tu_fvec(n);
            fill(in[r], n, (uint32_t)(r + 1));
        }
        char how[128];
        group_sum(k, ord, in, got, how, sizeof how);
        cr_assert(strstr(how, "NCCL") != NULL, "%s", how);
        group_sum(k, ord, in, again, how, sizeof how);
        for (size_t i = 0; i < n; i++) {
            double s = 0.0, mag = 0.0;
            for (int r = 0; r < k; r++) s += in[r][i], mag += fabs(in[r][i]);
            for (int r = 0; r < k; r++)
                cr_assert(fabs(got[r][i] - s) <= 1e-6 * mag + 1e-30, "member %d element %zu: %.9g vs %.9g", r, i,
                          (double)got[r][i], s);
        }
        for (int r = 0; r < k; r++) {
            tu_assert_bitwise(again[r], got[r], n, "NCCL twice");
            free(in[r]), free(got[r]), free(again[r]);
        }
    }
}

/* ---- backends ---- */

struct run {
    struct model m;
    struct dataset ds;
    int32_t *y;
    struct backend b;
    int batch;
};

/* run_init's backend, --trace on (each step's per-layer events kept) when trace. */
static void run_init_traced(struct run *R, const char *backend, int devices, int batch, int prefetch, int trace)
{
    memset(R, 0, sizeof *R);
    R->batch = batch;
    build_mlp(&R->m);
    cr_assert_eq(dataset_synthetic((STEPS + 1) * batch, IMG, IMG, 1, 10, 7, 1, &R->ds), TB_OK, "%s", tb_error_get());
    R->y = malloc((size_t)R->ds.n * sizeof *R->y);
    cr_assert_not_null(R->y);
    for (int i = 0; i < R->ds.n; i++) R->y[i] = R->ds.labels[i];
    cr_assert_eq(backend_create(&R->b, backend), TB_OK, "%s", tb_error_get());
    struct run_config cfg = {.batch = batch, .eval_batch = batch, .seed = 42, .n_devices = devices};
    optim_config_defaults(&cfg.optim, OPTIM_ADAM);
    cfg.optim.lr = workload_mnist_mlp.lr;
    cfg.optim.total_steps = STEPS;
    cfg.ipu.prefetch = prefetch;
    cfg.trace = trace;
    snprintf(cfg.device, sizeof cfg.device, "cuda");
    cr_assert_eq(backend_prepare(&R->b, &R->m, &cfg), TB_OK, "%s: %s", backend, tb_error_get());
    float *p = tu_fvec(R->m.n_params), *bu = tu_fvec(R->m.n_buffers);
    workload_mnist_mlp.init(&R->m, p, bu, 42);
    cr_assert_eq(backend_set_tensors(&R->b, TF_PARAMS, p), TB_OK, "%s", tb_error_get());
    free(p), free(bu);
}

static void run_init(struct run *R, const char *backend, int devices, int batch, int prefetch)
{
    run_init_traced(R, backend, devices, batch, prefetch, 0);
}

static void run_free(struct run *R)
{
    backend_destroy(&R->b);
    free(R->y);
    dataset_free(&R->ds);
    model_free(&R->m);
}

static struct batch batch_at(const struct run *R, long s)
{
    const size_t per = (size_t)IMG * IMG;
    return (struct batch){R->batch, R->ds.images + (size_t)(s - 1) * R->batch * per,
                          R->y + (size_t)(s - 1) * R->batch};
}

/* STEPS training steps, handing each step's batch over one step ahead when the backend takes it. */
static void train(struct run *R, double *losses)
{
    const int ahead = backend_prefetches(&R->b) > 0;
    for (long s = 1; s <= STEPS; s++) {
        if (ahead && s < STEPS) {
            const struct batch next = batch_at(R, s + 1);
            cr_assert_eq(backend_prefetch(&R->b, &next, s + 1), TB_OK, "%s", tb_error_get());
        }
        const struct batch b = batch_at(R, s);
        struct step_stats st = {0};
        cr_assert_eq(backend_train_step(&R->b, &b, s, &st), TB_OK, "%s", tb_error_get());
        losses[s - 1] = st.loss_sum;
    }
    cr_assert_eq(backend_finish(&R->b), TB_OK, "%s", tb_error_get());
}

static void assert_same_run(struct run *A, struct run *B, const double *la, const double *lb, const char *what)
{
    tu_assert_bitwise_d(la, lb, STEPS, what);
    const size_t n = A->m.n_params * 2;
    float *a = tu_fvec(n), *b = tu_fvec(n);
    cr_assert_eq(backend_get_tensors(&A->b, TF_PARAMS, a), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_get_tensors(&B->b, TF_PARAMS, b), TB_OK, "%s", tb_error_get());
    tu_assert_bitwise(a, b, A->m.n_params, what);
    cr_assert_eq(backend_get_tensors(&A->b, TF_OPT, a), TB_OK, "%s", tb_error_get());
    cr_assert_eq(backend_get_tensors(&B->b, TF_OPT, b), TB_OK, "%s", tb_error_get());
    tu_assert_bitwise(a, b, n, what);
    free(a), free(b);
}

Test(cuda_mirrored, one_replica_is_the_cuda_backend_bitwise)
{
    need_gpu();
    struct run A, B;
    double la[STEPS], lb[STEPS];
    run_init(&A, "cuda", 0, 16, -1);
    run_init(&B, "mirrored", 1, 16, -1);
    train(&A, la), train(&B, lb);
    assert_same_run(&A, &B, la, lb, "mirrored (1 cuda replica) vs cuda");
    run_free(&A), run_free(&B);
}

/* From the cuda backend's state each step: two replicas' loss within 1e-5 relative and summed gradients within
 * 1e-5 in norm (another summation order), and the update from the cuda backend's gradients its bits. */
Test(cuda_mirrored, two_replicas_step_by_step_vs_cuda)
{
    need_gpu();
    struct run A, B;
    run_init(&A, "cuda", 0, 16, -1);
    run_init(&B, "mirrored", 2, 16, -1);
    char d[512];
    backend_describe(&B.b, d, sizeof d);
    cr_log_info("%s", d);
    const size_t np = A.m.n_params, no = 2 * np;
    float *p = tu_fvec(no), *o = tu_fvec(no), *ga = tu_fvec(np), *gb = tu_fvec(np), *pa = tu_fvec(np), *pb = tu_fvec(np);
    for (long s = 1; s <= STEPS; s++) {
        cr_assert_eq(backend_get_tensors(&A.b, TF_PARAMS, p), TB_OK);
        cr_assert_eq(backend_get_tensors(&A.b, TF_OPT, o), TB_OK);
        cr_assert_eq(backend_set_tensors(&B.b, TF_PARAMS, p), TB_OK);
        cr_assert_eq(backend_set_tensors(&B.b, TF_OPT, o), TB_OK);
        const struct batch b = batch_at(&A, s);
        struct step_stats sa = {0}, sb = {0};
        cr_assert_eq(backend_forward_backward(&A.b, &b, s, &sa), TB_OK, "%s", tb_error_get());
        cr_assert_eq(backend_forward_backward(&B.b, &b, s, &sb), TB_OK, "%s", tb_error_get());
        cr_assert(fabs(sa.loss_sum - sb.loss_sum) <= 1e-5 * fabs(sa.loss_sum), "step %ld: loss %.9g vs %.9g", s,
                  sb.loss_sum, sa.loss_sum);
        cr_assert_eq(backend_get_tensors(&A.b, TF_GRADS, ga), TB_OK);
        cr_assert_eq(backend_get_tensors(&B.b, TF_GRADS, gb), TB_OK);
        /* Normwise 1e-5, each element 1e-3: an element summing to near zero keeps the order's rounding of its
         * terms (the first GPU run: 1.0e-4 of one such element). */
        double mx = 0.0, d2 = 0.0, r2 = 0.0;
        for (size_t i = 0; i < np; i++) {
            mx = fmax(mx, fabs(ga[i]));
            d2 += ((double)ga[i] - gb[i]) * ((double)ga[i] - gb[i]), r2 += (double)ga[i] * ga[i];
        }
        cr_assert(sqrt(d2) <= 1e-5 * sqrt(r2), "step %ld: |replicas - cuda| %.3g, |cuda| %.3g", s, sqrt(d2), sqrt(r2));
        for (size_t i = 0; i < np; i++)
            cr_assert(fabs(ga[i] - gb[i]) <= 1e-3 * (fabs(ga[i]) + 1e-3 * mx), "step %ld gradient %zu: %.9g vs %.9g",
                      s, i, (double)gb[i], (double)ga[i]);
        cr_assert_eq(backend_set_tensors(&B.b, TF_GRADS, ga), TB_OK); /* every replica gets cuda's sum */
        cr_assert_eq(backend_update(&A.b, s, &sa), TB_OK, "%s", tb_error_get());
        cr_assert_eq(backend_update(&B.b, s, &sb), TB_OK, "%s", tb_error_get());
        cr_assert_eq(backend_get_tensors(&A.b, TF_PARAMS, pa), TB_OK);
        cr_assert_eq(backend_get_tensors(&B.b, TF_PARAMS, pb), TB_OK);
        tu_assert_bitwise(pb, pa, np, "the update from the same gradients");
    }
    free(p), free(o), free(ga), free(gb), free(pa), free(pb);
    run_free(&A), run_free(&B);
}

/* Inputs copied ahead on the copy stream are the inputs uploaded in the pass: the same bits. */
Test(cuda_mirrored, prefetch_is_bitwise_neutral)
{
    need_gpu();
    const char *backends[2] = {"cuda", "mirrored"};
    for (int k = 0; k < 2; k++) {
        struct run A, B;
        double la[STEPS], lb[STEPS];
        run_init(&A, backends[k], 2, 16, -1);
        run_init(&B, backends[k], 2, 16, 2);
        cr_assert_eq(backend_prefetches(&A.b), 0, "--prefetch 0 takes nothing ahead");
        cr_assert_eq(backend_prefetches(&B.b), 2, "--prefetch 2 on %s", backends[k]);
        train(&A, la), train(&B, lb);
        assert_same_run(&A, &B, la, lb, backends[k]);
        run_free(&A), run_free(&B);
    }
}

/* --trace on mirrored replicas: each replica's lane has its update ('U', layer -1), as on the cpu device; the cuda
 * backend's one device too. The cuda device's trace had stopped before the update. */
Test(cuda_mirrored, trace_has_every_replica_update)
{
    need_gpu();
    for (int k = 0; k < 2; k++) {
        const char *backend = k == 0 ? "cuda" : "mirrored";
        const int R = k + 1;
        struct run A;
        double l[STEPS];
        run_init_traced(&A, backend, R, 16, -1, 1);
        train(&A, l);
        struct backend_stats st;
        memset(&st, 0, sizeof st);
        cr_assert_eq(backend_stats(&A.b, &st), TB_OK, "%s", tb_error_get());
        int U[2] = {0, 0}, F[2] = {0, 0};
        for (int e = 0; e < st.n_trace; e++) {
            const struct trace_event *ev = &st.trace[e];
            cr_assert(ev->device >= 0 && ev->device < R, "event on device %d", ev->device);
            F[ev->device] += ev->phase == 'F';
            if (ev->phase != 'U') continue;
            U[ev->device]++;
            cr_assert_eq(ev->layer, -1);
            cr_assert(ev->end_s >= ev->start_s, "update %g..%g s", ev->start_s, ev->end_s);
        }
        for (int r = 0; r < R; r++)
            cr_assert(F[r] > 0 && U[r] == 1, "%s, device %d: %d forward events, %d update events (want 1)", backend,
                      r, F[r], U[r]);
        run_free(&A);
    }
}

/* bench on the cuda device at batch 1 (the persistent kernel's runs by default): --profile and --trace run the
 * steps layer by layer, say so, and record real per-layer times and events (they had recorded zeros and an empty
 * trace); an explicit --prefetch says that the loop stages its samples on the device (the note had said the device
 * reads each batch in host memory). Runs bench (TB_BENCH_EXE: bench_emu in test_cuda_mirrored_emu). */
Test(cuda_mirrored, bench_batch1_profile_trace_and_prefetch_notes, .timeout = 120)
{
    need_gpu();
    static const char *const base[] = {"--backend", "cuda", "--workload", "mnist-mlp", "--data", "synthetic",
                                       "--synthetic-samples", "40,20", "--batch", "1", "--no-eval", "--mllog", "none",
                                       "--out", "results.jsonl", NULL};
    char *dir = tu_mkdtemp("cuda_mirrored");
    int code = rb_run(dir, "p", base, RB_ARGS("--steps", "4", "--profile", "--trace", "t.json", "--quiet"));
    char *err = rb_stderr(dir, "p");
    cr_assert_eq(code, 0, "%s", err);
    struct json_value *row = rb_last_row(dir);
    const struct json_value *lt = json_get(row, "figures.layer_times");
    cr_assert(lt && lt->type == JSON_ARRAY && lt->n >= 3, "no figures.layer_times");
    for (int i = 0; i < lt->n; i++) {
        const char *op = json_get_str(&lt->items[i], "op", "?");
        const double f = json_get_number(&lt->items[i], "forward_s", -1.0),
                     b = json_get_number(&lt->items[i], "backward_s", -1.0);
        if (strcmp(op, "dense") == 0)
            cr_assert(f > 0.0 && b > 0.0, "layer %d (dense): forward %g s, backward %g s", i, f, b);
    }
    cr_assert_geq(json_get_number(row, "figures.trace.events", 0.0), 2.0 * lt->n + 1, "the trace's events");
    cr_assert_eq(json_get_number(row, "figures.trace.lanes", 0.0), 1.0);
    json_value_free(row);
    cr_assert(strstr(err, "--trace on the cuda device: batch-1 steps run layer by layer"), "%s", err);
    free(err);
    /* The captured graph's loop (on the emulation the persistent kernel takes seconds a step): the note comes at
     * preparation either way. */
    cr_assert_eq(setenv("TB_CUDA_LOOP", "graph", 1), 0);
    code = rb_run(dir, "f", base, RB_ARGS("--steps", "1", "--prefetch", "2"));
    unsetenv("TB_CUDA_LOOP");
    err = rb_stderr(dir, "f");
    cr_assert_eq(code, 0, "%s", err);
    cr_assert(strstr(err, "--prefetch 2: nothing is copied ahead") && strstr(err, "staged there once") &&
                  !strstr(err, "host memory"),
              "%s", err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}
