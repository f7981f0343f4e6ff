/* test_op_dense.c — the dense layer kernels (core/op_dense.c).
 *
 * Forward against a double reference; dense_backward_data and dense_backward_params (weights and
 * bias) against central differences in double of L = Σ R·y on odd shapes (N ∈ {1, 3, 17, 128}, IN and OUT
 * odd and not multiples of 8, a third of the inputs exactly zero so the N = 1 zero-skipping paths
 * run); the optimised kernels against their *_ref twins; the accumulate contract (two calls = 2×,
 * pre-filled gradients kept and added to; acc 0 writes the bits of adding to zeros); and thread partitions (nth ∈ {1,2,3,7}, every slice run
 * one after another) bitwise equal to nth = 1.
 */
#include "test_util.h"

#include "op_dense.h"

struct dense_case {
    int N, IN, OUT;
};

/* Odd shapes, none a multiple of the vector width; N covers the vector path (1), the column-split
 * sgemm path (3, 17) and the row-split one (128: forward and backward_data split rows from N ≥ 128,
 * split_rows; dw splits by IN, under 128 here, so in columns). */
static const struct dense_case GRAD_CASES[] = {
    {1, 13, 11}, {1, 37, 29}, {3, 13, 11}, {3, 37, 29}, {17, 13, 11}, {17, 37, 29}, {17, 5, 3}, {128, 13, 11},
};
#define N_GRAD_CASES ((int)(sizeof GRAD_CASES / sizeof GRAD_CASES[0]))

/* Inputs, weights, bias and an upstream gradient R for one shape. */
struct dense_data {
    struct dense_shape s;
    float *x, *w, *b, *r; /* x (N,IN), w (IN,OUT), b (OUT), r (N,OUT) = dL/dy */
};

static void data_init(struct dense_data *d, int N, int IN, int OUT, uint64_t seed)
{
    d->s = (struct dense_shape){.N = N, .IN = IN, .OUT = OUT};
    d->x = tu_fvec((size_t)N * IN);
    d->w = tu_fvec((size_t)IN * OUT);
    d->b = tu_fvec((size_t)OUT);
    d->r = tu_fvec((size_t)N * OUT);
    tu_fill_normal(d->x, (size_t)N * IN, seed, 0.0f, 1.0f);
    tu_fill_normal(d->w, (size_t)IN * OUT, seed + 1, 0.0f, 0.3f);
    tu_fill_normal(d->b, (size_t)OUT, seed + 2, 0.0f, 0.5f);
    tu_fill_normal(d->r, (size_t)N * OUT, seed + 3, 0.0f, 1.0f);
    /* Zero inputs (dead ReLUs, blank pixels) take the skip branches of the N = 1 kernels. */
    for (size_t i = 0; i < (size_t)N * IN; i++)
        if (i % 3 == 1) d->x[i] = 0.0f;
}

static void data_free(struct dense_data *d)
{
    free(d->x), free(d->w), free(d->b), free(d->r);
}

/* The loss L = Σ R·(x·W + b) in double, over double copies the finite differences perturb. */
struct dense_loss_ctx {
    int N, IN, OUT;
    double *x, *w, *b, *r;
};

static void forward_d(double *y, const struct dense_loss_ctx *c)
{
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OUT; o++) {
            double acc = c->b[o];
            for (int i = 0; i < c->IN; i++) acc += c->x[(size_t)n * c->IN + i] * c->w[(size_t)i * c->OUT + o];
            y[(size_t)n * c->OUT + o] = acc;
        }
}

static double dense_loss(void *ctx)
{
    const struct dense_loss_ctx *c = ctx;
    double L = 0.0;
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OUT; o++) {
            double acc = c->b[o];
            for (int i = 0; i < c->IN; i++) acc += c->x[(size_t)n * c->IN + i] * c->w[(size_t)i * c->OUT + o];
            L += c->r[(size_t)n * c->OUT + o] * acc;
        }
    return L;
}

static struct dense_loss_ctx loss_ctx(const struct dense_data *d)
{
    const size_t N = d->s.N, IN = d->s.IN, OUT = d->s.OUT;
    return (struct dense_loss_ctx){d->s.N, d->s.IN, d->s.OUT, tu_to_d(d->x, N * IN), tu_to_d(d->w, IN * OUT),
                                   tu_to_d(d->b, OUT), tu_to_d(d->r, N * OUT)};
}

static void loss_ctx_free(struct dense_loss_ctx *c)
{
    free(c->x), free(c->w), free(c->b), free(c->r);
}

TestSuite(dense);

Test(dense, forward_matches_double)
{
    for (int k = 0; k < N_GRAD_CASES; k++) {
        const struct dense_case *tc = &GRAD_CASES[k];
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 100 + k);
        struct dense_loss_ctx c = loss_ctx(&d);
        const size_t ny = (size_t)tc->N * tc->OUT;
        double *want = tu_dvec(ny);
        forward_d(want, &c);
        float *y = tu_fvec(ny), *yb = tu_fvec(ny);
        char what[96];
        snprintf(what, sizeof what, "forward N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        dense_forward(y, d.x, d.w, d.b, &d.s, 0, 0, 1);
        tu_assert_close(y, want, ny, 1e-5, 1e-6, what);
        /* b = NULL: no bias (and the output's old contents must not leak in). */
        for (size_t i = 0; i < ny; i++) yb[i] = 1e3f;
        dense_forward(yb, d.x, d.w, NULL, &d.s, 0, 0, 1);
        for (size_t i = 0; i < ny; i++) want[i] -= d.b[i % tc->OUT];
        snprintf(what, sizeof what, "forward no-bias N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close(yb, want, ny, 1e-5, 1e-6, what);
        free(want), free(y), free(yb);
        loss_ctx_free(&c);
        data_free(&d);
    }
}

Test(dense, backward_data_matches_central_differences)
{
    for (int k = 0; k < N_GRAD_CASES; k++) {
        const struct dense_case *tc = &GRAD_CASES[k];
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 200 + k);
        struct dense_loss_ctx c = loss_ctx(&d);
        const size_t nx = (size_t)tc->N * tc->IN;
        double *fd = tu_dvec(nx);
        tu_fd_grad(fd, c.x, nx, dense_loss, &c, 1e-3);
        float *dx = tu_fvec(nx);
        dense_backward_data(dx, d.r, d.w, &d.s, 0, 1);
        char what[96];
        snprintf(what, sizeof what, "dinp N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close(dx, fd, nx, 1e-5, 1e-5, what);
        free(fd), free(dx);
        loss_ctx_free(&c);
        data_free(&d);
    }
}

Test(dense, backward_params_matches_central_differences)
{
    for (int k = 0; k < N_GRAD_CASES; k++) {
        const struct dense_case *tc = &GRAD_CASES[k];
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 300 + k);
        struct dense_loss_ctx c = loss_ctx(&d);
        const size_t nw = (size_t)tc->IN * tc->OUT, nb = (size_t)tc->OUT;
        double *fdw = tu_dvec(nw), *fdb = tu_dvec(nb);
        tu_fd_grad(fdw, c.w, nw, dense_loss, &c, 1e-3);
        tu_fd_grad(fdb, c.b, nb, dense_loss, &c, 1e-3);
        float *dw = tu_fvec(nw), *db = tu_fvec(nb);
        dense_backward_params(dw, db, d.x, d.r, &d.s, 1, 0, 1);
        char what[96];
        snprintf(what, sizeof what, "dw N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close(dw, fdw, nw, 1e-5, 1e-5, what);
        snprintf(what, sizeof what, "db N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close(db, fdb, nb, 1e-5, 1e-5, what);
        /* db = NULL: the weight gradient alone, unchanged. */
        float *dw2 = tu_fvec(nw);
        dense_backward_params(dw2, NULL, d.x, d.r, &d.s, 1, 0, 1);
        tu_assert_bitwise(dw2, dw, nw, "dw with db = NULL");
        free(fdw), free(fdb), free(dw), free(db), free(dw2);
        loss_ctx_free(&c);
        data_free(&d);
    }
}

/* N = 128 and 200 take the row-split path of forward and backward_data (split_rows: N ≥ 128) at this
 * machine's own tiling; IN = 129 that of dw, whose split goes by IN. */
Test(dense, optimised_matches_ref)
{
    const struct dense_case cases[] = {{1, 13, 11},   {3, 37, 29},   {17, 37, 29},  {64, 100, 130},
                                       {1, 784, 128}, {128, 37, 29}, {200, 129, 257}};
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        const struct dense_case *tc = &cases[k];
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 400 + k);
        const size_t ny = (size_t)tc->N * tc->OUT, nx = (size_t)tc->N * tc->IN, nw = (size_t)tc->IN * tc->OUT;
        float *y = tu_fvec(ny), *yr = tu_fvec(ny);
        dense_forward(y, d.x, d.w, d.b, &d.s, 0, 0, 1);
        dense_forward_ref(yr, d.x, d.w, d.b, &d.s);
        char what[96];
        snprintf(what, sizeof what, "forward vs ref N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close_f(y, yr, ny, 1e-5, 1e-6, what);
        /* backward into identical pre-filled buffers: both accumulate */
        float *dx = tu_fvec(nx), *dxr = tu_fvec(nx), *dw = tu_fvec(nw), *dwr = tu_fvec(nw);
        float *db = tu_fvec(tc->OUT), *dbr = tu_fvec(tc->OUT);
        tu_fill_normal(dx, nx, 7, 0.0f, 1.0f), memcpy(dxr, dx, nx * sizeof *dx);
        tu_fill_normal(dw, nw, 8, 0.0f, 1.0f), memcpy(dwr, dw, nw * sizeof *dw);
        tu_fill_normal(db, tc->OUT, 9, 0.0f, 1.0f), memcpy(dbr, db, tc->OUT * sizeof *db);
        dense_backward_data(dx, d.r, d.w, &d.s, 0, 1);
        dense_backward_data_ref(dxr, d.r, d.w, &d.s);
        dense_backward_params(dw, db, d.x, d.r, &d.s, 1, 0, 1);
        dense_backward_params_ref(dwr, dbr, d.x, d.r, &d.s);
        snprintf(what, sizeof what, "dinp vs ref N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close_f(dx, dxr, nx, 1e-5, 1e-6, what);
        snprintf(what, sizeof what, "dw vs ref N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close_f(dw, dwr, nw, 1e-5, 1e-6, what);
        snprintf(what, sizeof what, "db vs ref N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close_f(db, dbr, tc->OUT, 1e-5, 1e-6, what);
        free(y), free(yr), free(dx), free(dxr), free(dw), free(dwr), free(db), free(dbr);
        data_free(&d);
    }
}

Test(dense, backward_accumulates)
{
    for (int k = 0; k < N_GRAD_CASES; k++) {
        const struct dense_case *tc = &GRAD_CASES[k];
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 500 + k);
        const size_t nx = (size_t)tc->N * tc->IN, nw = (size_t)tc->IN * tc->OUT, nb = (size_t)tc->OUT;
        /* one call into zeros: the gradient G */
        float *gx = tu_fvec(nx), *gw = tu_fvec(nw), *gb = tu_fvec(nb);
        dense_backward_data(gx, d.r, d.w, &d.s, 0, 1);
        dense_backward_params(gw, gb, d.x, d.r, &d.s, 1, 0, 1);
        /* two calls into zeros: 2G */
        float *x2 = tu_fvec(nx), *w2 = tu_fvec(nw), *b2 = tu_fvec(nb);
        for (int rep = 0; rep < 2; rep++) {
            dense_backward_data(x2, d.r, d.w, &d.s, 0, 1);
            dense_backward_params(w2, b2, d.x, d.r, &d.s, 1, 0, 1);
        }
        double *want = tu_dvec(nw > nx ? nw : nx);
        char what[96];
        for (size_t i = 0; i < nx; i++) want[i] = 2.0 * gx[i];
        snprintf(what, sizeof what, "2x dinp N=%d", tc->N);
        tu_assert_close(x2, want, nx, 1e-6, 1e-7, what);
        for (size_t i = 0; i < nw; i++) want[i] = 2.0 * gw[i];
        snprintf(what, sizeof what, "2x dw N=%d", tc->N);
        tu_assert_close(w2, want, nw, 1e-6, 1e-7, what);
        for (size_t i = 0; i < nb; i++) want[i] = 2.0 * gb[i];
        snprintf(what, sizeof what, "2x db N=%d", tc->N);
        tu_assert_close(b2, want, nb, 1e-6, 1e-7, what);
        /* pre-filled buffers P: P + G, P kept */
        float *px = tu_fvec(nx), *pw = tu_fvec(nw), *pb = tu_fvec(nb);
        tu_fill_normal(px, nx, 11, 3.0f, 1.0f);
        tu_fill_normal(pw, nw, 12, -3.0f, 1.0f);
        tu_fill_normal(pb, nb, 13, 5.0f, 1.0f);
        float *ax = tu_fdup(px, nx), *aw = tu_fdup(pw, nw), *ab = tu_fdup(pb, nb);
        dense_backward_data(ax, d.r, d.w, &d.s, 0, 1);
        dense_backward_params(aw, ab, d.x, d.r, &d.s, 1, 0, 1);
        for (size_t i = 0; i < nx; i++) want[i] = (double)px[i] + gx[i];
        snprintf(what, sizeof what, "P + dinp N=%d", tc->N);
        tu_assert_close(ax, want, nx, 1e-6, 1e-7, what);
        for (size_t i = 0; i < nw; i++) want[i] = (double)pw[i] + gw[i];
        snprintf(what, sizeof what, "P + dw N=%d", tc->N);
        tu_assert_close(aw, want, nw, 1e-6, 1e-7, what);
        for (size_t i = 0; i < nb; i++) want[i] = (double)pb[i] + gb[i];
        snprintf(what, sizeof what, "P + db N=%d", tc->N);
        tu_assert_close(ab, want, nb, 1e-6, 1e-7, what);
        free(gx), free(gw), free(gb), free(x2), free(w2), free(b2), free(want);
        free(px), free(pw), free(pb), free(ax), free(aw), free(ab);
        data_free(&d);
    }
}

/* ------------------------------------------------------------------------------------------------
 * Partitions: for each nth, all nth slices run one after another must give nth = 1's bits.
 */
enum { K_FORWARD, K_BACKWARD_DATA, K_BACKWARD_PARAMS };

static void run_kernel(int kind, const struct dense_data *d, float *out, float *out2, int ith, int nth)
{
    switch (kind) {
    case K_FORWARD: dense_forward(out, d->x, d->w, d->b, &d->s, 0, ith, nth); break;
    case K_BACKWARD_DATA: dense_backward_data(out, d->r, d->w, &d->s, ith, nth); break;
    case K_BACKWARD_PARAMS: dense_backward_params(out, out2, d->x, d->r, &d->s, 1, ith, nth); break;
    }
}

static void check_partition(int kind, int N, int IN, int OUT)
{
    static const char *const names[] = {"forward", "backward_data", "backward_params"};
    struct dense_data d;
    data_init(&d, N, IN, OUT, 600 + (uint64_t)kind);
    const size_t n1 = kind == K_FORWARD ? (size_t)N * OUT : kind == K_BACKWARD_DATA ? (size_t)N * IN : (size_t)IN * OUT;
    const size_t n2 = kind == K_BACKWARD_PARAMS ? (size_t)OUT : 0;
    /* Pre-filled so the accumulating kernels also show they add to what is there. */
    float *init1 = tu_fvec(n1), *init2 = tu_fvec(n2);
    tu_fill_normal(init1, n1, 21, 0.0f, 1.0f);
    tu_fill_normal(init2, n2, 22, 0.0f, 1.0f);
    float *ref1 = tu_fdup(init1, n1), *ref2 = tu_fdup(init2, n2);
    run_kernel(kind, &d, ref1, n2 ? ref2 : NULL, 0, 1);
    for (int t = 1; t < TU_N_NTHS; t++) {
        const int nth = TU_NTHS[t];
        float *o1 = tu_fdup(init1, n1), *o2 = tu_fdup(init2, n2);
        for (int ith = 0; ith < nth; ith++) run_kernel(kind, &d, o1, n2 ? o2 : NULL, ith, nth);
        char what[128];
        snprintf(what, sizeof what, "%s N=%d IN=%d OUT=%d nth=%d", names[kind], N, IN, OUT, nth);
        tu_assert_bitwise(o1, ref1, n1, what);
        if (n2) {
            snprintf(what, sizeof what, "%s db N=%d IN=%d OUT=%d nth=%d", names[kind], N, IN, OUT, nth);
            tu_assert_bitwise(o2, ref2, n2, what);
        }
        free(o1), free(o2);
    }
    free(init1), free(init2), free(ref1), free(ref2);
    data_free(&d);
}

/* Batch 1: the vector kernels (slices of OUT for forward, of IN for the backward kernels). */
Test(dense, partition_forward_n1_bitwise)
{
    check_partition(K_FORWARD, 1, 37, 29);
    check_partition(K_FORWARD, 1, 784, 128);
}

Test(dense, partition_backward_data_n1_bitwise)
{
    check_partition(K_BACKWARD_DATA, 1, 37, 29);
    check_partition(K_BACKWARD_DATA, 1, 128, 256);
}

Test(dense, partition_backward_params_n1_bitwise)
{
    check_partition(K_BACKWARD_PARAMS, 1, 37, 29);
    check_partition(K_BACKWARD_PARAMS, 1, 784, 128);
}

/* Batch 64: the sgemm paths split along columns of the output (split_rows is N ≥ 128); dw splits by its
 * rows, IN, so in rows at IN = 129 and in columns at 37 and 48. */
Test(dense, partition_forward_n64_bitwise)
{
    check_partition(K_FORWARD, 64, 37, 29);
    check_partition(K_FORWARD, 64, 129, 257);
}

Test(dense, partition_backward_data_n64_bitwise)
{
    check_partition(K_BACKWARD_DATA, 64, 37, 29);
    check_partition(K_BACKWARD_DATA, 64, 129, 257);
}

Test(dense, partition_backward_params_n64_bitwise)
{
    check_partition(K_BACKWARD_PARAMS, 64, 37, 29);
    check_partition(K_BACKWARD_PARAMS, 64, 129, 257);
    check_partition(K_BACKWARD_PARAMS, 64, 48, 301); /* few dw rows: 32-column tiles, the last short */
}

/* Batch 128 and 200: forward and backward_data split along rows of the output, in this machine's tiles
 * (TB_PAR_UNITS left alone: 64-row tiles where they are at least as many as the cores); 200 ends on a
 * short tile. dw splits by IN whatever N (rows at 129, columns at 37), here with K = N = 128 and 200. */
Test(dense, partition_forward_rows_bitwise)
{
    check_partition(K_FORWARD, 128, 37, 29);
    check_partition(K_FORWARD, 200, 129, 257);
}

Test(dense, partition_backward_data_rows_bitwise)
{
    check_partition(K_BACKWARD_DATA, 128, 37, 29);
    check_partition(K_BACKWARD_DATA, 200, 129, 257);
}

Test(dense, partition_backward_params_rows_bitwise)
{
    check_partition(K_BACKWARD_PARAMS, 128, 37, 29);
    check_partition(K_BACKWARD_PARAMS, 200, 129, 257);
}

/* The work split of a 16-core machine (TB_PAR_UNITS, read once a process: each Criterion test is one): the
 * batched passes whose 64-row tiles are fewer than cores are cut in columns and shorter rows too. Against
 * the reference and bitwise for any nth: SE layers at batch 128 (1152 → 48, 48 → 1152) and odd sizes. */
Test(dense, many_core_tiles_match_ref_and_are_bitwise, .timeout = 60)
{
    setenv("TB_PAR_UNITS", "16", 1);
    const struct dense_case cases[] = {{128, 1152, 48}, {128, 48, 1152}, {200, 37, 29},  {136, 100, 130},
                                       {128, 144, 6},   {128, 6, 144},   {128, 480, 20}};
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        const struct dense_case *tc = &cases[k];
        check_partition(K_FORWARD, tc->N, tc->IN, tc->OUT);
        check_partition(K_BACKWARD_DATA, tc->N, tc->IN, tc->OUT);
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 700 + k);
        const size_t ny = (size_t)tc->N * tc->OUT, nx = (size_t)tc->N * tc->IN;
        float *y = tu_fvec(ny), *yr = tu_fvec(ny), *dx = tu_fvec(nx), *dxr = tu_fvec(nx);
        memset(y, 0xFF, ny * sizeof *y); /* NaN: every element is written */
        dense_forward(y, d.x, d.w, d.b, &d.s, 1, 0, 1);
        dense_forward_ref(yr, d.x, d.w, d.b, &d.s);
        for (size_t i = 0; i < ny; i++) yr[i] = yr[i] > 0.0f ? yr[i] : 0.0f;
        char what[96];
        snprintf(what, sizeof what, "forward+relu vs ref N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close_f(y, yr, ny, 1e-5, 1e-6, what);
        dense_backward_data(dx, d.r, d.w, &d.s, 0, 1);
        dense_backward_data_ref(dxr, d.r, d.w, &d.s);
        snprintf(what, sizeof what, "dinp vs ref N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        tu_assert_close_f(dx, dxr, nx, 1e-5, 1e-6, what);
        free(y), free(yr), free(dx), free(dxr);
        data_free(&d);
    }
}

/* The row tiles an SE chain carries through its layers (dense_row_tile), on a 16-core split: 8 rows at batch
 * 128 where the weights fit L1 (144 → 6, 480 → 20 and back), none where they do not (1152 → 48: columns)
 * or the batch is under the row split (16 rows at batch 256); dense_forward_rows and dense_backward_data_rows over those tiles
 * give dense_forward's and dense_backward_data's bits. */
Test(dense, row_tiles_are_the_passes_tiles, .timeout = 60)
{
    setenv("TB_PAR_UNITS", "16", 1);
    const struct dense_case cases[] = {{128, 144, 6}, {128, 6, 144}, {128, 480, 20}, {128, 20, 480}, {256, 144, 6}};
    const int want[] = {8, 8, 8, 8, 16};
    const struct dense_shape big = {.N = 128, .IN = 1152, .OUT = 48}, small_batch = {.N = 64, .IN = 144, .OUT = 6};
    cr_assert_eq(dense_row_tile(&big), 0, "1152 -> 48 at batch 128 splits columns on 16 cores");
    cr_assert_eq(dense_row_tile(&small_batch), 0, "batch 64 is under the row split");
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        const struct dense_case *tc = &cases[k];
        struct dense_data d;
        data_init(&d, tc->N, tc->IN, tc->OUT, 900 + k);
        const int th = dense_row_tile(&d.s);
        cr_assert_eq(th, want[k], "N=%d IN=%d OUT=%d: row tile %d", tc->N, tc->IN, tc->OUT, th);
        const size_t ny = (size_t)tc->N * tc->OUT, nx = (size_t)tc->N * tc->IN;
        float *y = tu_fvec(ny), *yr = tu_fvec(ny), *dx = tu_fvec(nx), *dxr = tu_fvec(nx);
        memset(y, 0xFF, ny * sizeof *y);
        memset(yr, 0xFF, ny * sizeof *yr);
        dense_forward(y, d.x, d.w, d.b, &d.s, 0, 0, 1);
        memset(dx, 0, nx * sizeof *dx);
        memset(dxr, 0, nx * sizeof *dxr);
        dense_backward_data(dx, d.r, d.w, &d.s, 0, 1);
        for (int r0 = tc->N - (tc->N - 1) % th - 1; r0 >= 0; r0 -= th) { /* last tile first: any order */
            const int r1 = r0 + th < tc->N ? r0 + th : tc->N;
            dense_forward_rows(yr, d.x, d.w, d.b, &d.s, 0, r0, r1);
            dense_backward_data_rows(dxr, d.r, d.w, &d.s, r0, r1);
        }
        cr_assert(memcmp(y, yr, ny * sizeof *y) == 0, "forward rows N=%d IN=%d OUT=%d", tc->N, tc->IN, tc->OUT);
        cr_assert(memcmp(dx, dxr, nx * sizeof *dx) == 0, "backward data rows N=%d IN=%d OUT=%d", tc->N, tc->IN,
                  tc->OUT);
        free(y), free(yr), free(dx), free(dxr);
        data_free(&d);
    }
}

/* Fewer output columns (or dw rows) than threads: some slices are empty. */
Test(dense, partition_small_bitwise)
{
    check_partition(K_FORWARD, 3, 9, 5);
    check_partition(K_BACKWARD_DATA, 3, 5, 9);
    check_partition(K_BACKWARD_PARAMS, 3, 5, 9);
}

/* acc 0 (the executor's first write into a layer's gradients, which it no longer zeroes): dw and db are
 * written, never read — filled with NaN first — and hold the bits of acc 1 over zeros, on every path (batch 1
 * with zero inputs skipped, the column- and row-split sgemms) and thread partition. */
Test(dense, backward_params_written_are_the_bits_added_to_zeros)
{
    static const struct dense_case cases[] = {{1, 37, 29}, {1, 784, 128}, {17, 37, 29}, {64, 129, 257}, {3, 48, 1152}};
    static const int nths[] = {1, 3};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct dense_data d;
        data_init(&d, cases[k].N, cases[k].IN, cases[k].OUT, 900 + k);
        const size_t nw = (size_t)d.s.IN * d.s.OUT, nb = (size_t)d.s.OUT;
        float *w0 = tu_fvec(nw), *b0 = tu_fvec(nb), *w1 = tu_fvec(nw), *b1 = tu_fvec(nb);
        for (size_t t = 0; t < sizeof nths / sizeof *nths; t++) {
            const int nth = nths[t];
            memset(w0, 0, nw * sizeof(float)), memset(b0, 0, nb * sizeof(float));
            memset(w1, 0xff, nw * sizeof(float)), memset(b1, 0xff, nb * sizeof(float)); /* NaN: must be written */
            for (int ith = 0; ith < nth; ith++) dense_backward_params(w0, b0, d.x, d.r, &d.s, 1, ith, nth);
            for (int ith = 0; ith < nth; ith++) dense_backward_params(w1, b1, d.x, d.r, &d.s, 0, ith, nth);
            char what[96];
            snprintf(what, sizeof what, "dw N=%d IN=%d OUT=%d nth %d", d.s.N, d.s.IN, d.s.OUT, nth);
            tu_assert_bitwise(w1, w0, nw, what);
            snprintf(what, sizeof what, "db N=%d IN=%d OUT=%d nth %d", d.s.N, d.s.IN, d.s.OUT, nth);
            tu_assert_bitwise(b1, b0, nb, what);
        }
        free(w0), free(b0), free(w1), free(b1);
        data_free(&d);
    }
}
