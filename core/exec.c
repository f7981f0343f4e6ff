/* exec.c — the shared sequential schedule: layer by layer, kernels on thread slices, barriers between
 * dependent phases. Gradients of activations are zeroed just before the first backward that
 * accumulates into them (the tensor's last reader), where the data is about to be touched anyway.
 */
#include "exec.h"
#include "exec_priv.h"

#include "arena.h"
#include "clock.h"
#include "env_switch.h"
#include "layout.h"
#include "op_act.h"
#include "op_conv.h"
#include "op_conv_se.h"
#include "op_dense.h"
#include "op_dropout.h"
#include "op_dwconv.h"
#include "op_norm.h"
#include "op_pool.h"
#include "op_se.h"
#include "op_loss.h"
#include "optim.h"
#include "rng.h"
#include "simd.h"
#include "status.h"
#include "zero.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

float *exec_act(const struct model_inst *mi, int t)
{
    const struct tensor *x = &mi->m->tensors[t];
    return mi->acts + x->unit_off * (size_t)mi->n_max;
}

float *exec_dact(const struct model_inst *mi, int t)
{
    const struct tensor *x = &mi->m->tensors[t];
    return mi->dacts + x->unit_off * (size_t)mi->n_max;
}

/* Bilinear interpolation of channel c between source rows r0, r1 (SC channels a pixel) at columns x0, x1. */
static inline float bilerp_u8(const uint8_t *r0, const uint8_t *r1, int x0, int x1, int SC, int c, float wy, float wx)
{
    const float v00 = r0[x0 * SC + c], v01 = r0[x1 * SC + c], v10 = r1[x0 * SC + c], v11 = r1[x1 * SC + c];
    return (1.0f - wy) * ((1.0f - wx) * v00 + wx * v01) + wy * ((1.0f - wx) * v10 + wx * v11);
}

/* uint8 → float with per-channel normalisation. The output may be the source's flattening (MLP) or a
 * resize of it to the model's resolution with channels expanded 1 → 3 (EfficientNet on Fashion-MNIST,
 * bilinear, align_corners = False like PyTorch): pixels cross to the device small and are converted
 * there. Training adds the counter-based crop (zero padding) and flip, keyed by (step, position in
 * the global batch), so every backend draws the same augmentation. */
static void input_forward(const struct layer *l, const struct tensor *src, const struct tensor *dstt, float *out,
                          const struct exec_step *st, int ith, int nth)
{
    const int SH = src->h, SW = src->w, SC = src->c;
    const int flat = dstt->h == 1 && dstt->w == 1 && dstt->per_sample == src->per_sample;
    const int H = flat ? SH : dstt->h, W = flat ? SW : dstt->w, C = flat ? SC : dstt->c;
    const size_t per_src = src->per_sample, per = dstt->per_sample;
    size_t lo, hi;
    tb_slice((size_t)st->n, ith, nth, &lo, &hi);
    float scale[4], shift[4];
    TB_ASSERT(C >= 1 && C <= 4 && (SC == C || SC == 1));
    input_affine(l, C, scale, shift);
    const int augment = st->training && (l->a.input.pad > 0 || l->a.input.flip);
    if (C == SC && H == SH && W == SW && !augment) {
        if (C == 1) { /* the MLP's path: one flat, vectorisable loop */
            input_grey(l, st->x, out, lo * per_src, hi * per_src);
        } else {
            for (size_t p = lo * (size_t)H * W; p < hi * (size_t)H * W; p++)
                for (int c = 0; c < C; c++) out[p * C + c] = (float)st->x[p * C + c] * scale[c] + shift[c];
        }
        return;
    }
    const float ry = (float)SH / (float)H, rx = (float)SW / (float)W;
    /* No resampling (the augmented crop and flip at the source's size): every bilinear weight is 0, so the
     * pixel itself is the interpolated value, bit for bit, without the per-pixel coordinate arithmetic. */
    const int same = SH == H && SW == W && SC == C;
    for (size_t n = lo; n < hi; n++) {
        const uint8_t *s = st->x + n * per_src;
        float *d = out + n * per;
        int dy = 0, dx = 0, flip = 0;
        if (augment) {
            uint64_t key = ((uint64_t)st->step << 32) | (uint64_t)(st->first_index + (long)n);
            uint64_t r = rng_hash(st->seed, RNG_STREAM_AUGMENT, key);
            int p = l->a.input.pad, span = 2 * p + 1;
            if (p > 0) dy = (int)(r % (uint64_t)span) - p, dx = (int)((r >> 16) % (uint64_t)span) - p;
            flip = l->a.input.flip ? (int)((r >> 40) & 1) : 0;
        }
        for (int y = 0; y < H; y++) {
            const int oy = y + dy;
            if (same) {
                float *dr = d + (size_t)y * W * C;
                if (oy < 0 || oy >= H) { /* a padding row */
                    for (int x = 0; x < W; x++)
                        for (int c = 0; c < C; c++) dr[(size_t)x * C + c] = shift[c];
                    continue;
                }
                const uint8_t *sr = s + (size_t)oy * SW * SC;
                for (int x = 0; x < W; x++) {
                    const int ox = (flip ? W - 1 - x : x) + dx;
                    for (int c = 0; c < C; c++) {
                        if (ox < 0 || ox >= W) dr[(size_t)x * C + c] = shift[c];
                        else dr[(size_t)x * C + c] = (float)sr[(size_t)ox * SC + c] * scale[c] + shift[c];
                    }
                }
                continue;
            }
            float fy = ((float)oy + 0.5f) * ry - 0.5f;
            if (fy < 0.0f) fy = 0.0f;
            int y0 = (int)fy;
            if (y0 > SH - 1) y0 = SH - 1;
            const int y1 = y0 + 1 < SH ? y0 + 1 : SH - 1;
            const float wy = fy - (float)y0;
            for (int x = 0; x < W; x++) {
                const int ox = (flip ? W - 1 - x : x) + dx;
                float *dp = d + ((size_t)y * W + x) * C;
                if (oy < 0 || oy >= H || ox < 0 || ox >= W) {
                    for (int c = 0; c < C; c++) dp[c] = shift[c]; /* zero padding = pixel value 0 */
                    continue;
                }
                float fx = ((float)ox + 0.5f) * rx - 0.5f;
                if (fx < 0.0f) fx = 0.0f;
                int x0 = (int)fx;
                if (x0 > SW - 1) x0 = SW - 1;
                const int x1 = x0 + 1 < SW ? x0 + 1 : SW - 1;
                const float wx = fx - (float)x0;
                const uint8_t *r0 = s + (size_t)y0 * SW * SC, *r1 = s + (size_t)y1 * SW * SC;
                /* A grey source (SC = 1) is interpolated once per pixel and copied to the C channels. */
                const float grey = SC == 1 ? bilerp_u8(r0, r1, x0, x1, 1, 0, wy, wx) : 0.0f;
                for (int c = 0; c < C; c++) {
                    const float v = SC == 1 ? grey : bilerp_u8(r0, r1, x0, x1, SC, c, wy, wx);
                    dp[c] = v * scale[c] + shift[c];
                }
            }
        }
    }
}

/* dy ← dy·[y > 0] on a flat slice. */
static void relu_mask(float *dy, const float *y, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void dense_fwd(const struct model_inst *mi, const struct layer *l, int n, int ith, int nth)
{
    const struct dense_shape s = {n, l->a.dense.IN, l->a.dense.OUT, mi->par};
    dense_forward(exec_act(mi, l->out), exec_act(mi, l->in), exec_param(mi, l->w_off),
                  l->n_b ? exec_param(mi, l->b_off) : NULL, &s, l->act == ACT_RELU, ith, nth);
}

/* Offset of dense layer l's input within exec_save_dense_inputs' copy. */
static size_t dense_in_offset(const struct model *m, const struct layer *l)
{
    size_t off = 0;
    for (const struct layer *k = m->layers; k < l; k++)
        if (k->op == OP_DENSE) off += (size_t)k->a.dense.IN;
    return off;
}

size_t exec_dense_inputs_floats(const struct model *m)
{
    return dense_in_offset(m, m->layers + m->n_layers);
}

void exec_save_dense_inputs(const struct model_inst *mi, float *dst)
{
    const struct model *m = mi->m;
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        if (l->op != OP_DENSE) continue;
        memcpy(dst, exec_act(mi, l->in), (size_t)l->a.dense.IN * sizeof(float));
        dst += l->a.dense.IN;
    }
}

void exec_dense1_rows(const struct model_inst *mi, const struct layer *l, const struct optim_config *c, float alpha,
                      const float *x_old, const float *xn, float *part, int r0, int r1, int ith)
{
    static const float one = 1.0f;
    const size_t np = mi->m->n_params;
    const int OUT = l->a.dense.OUT;
    const float *dy = exec_dact(mi, l->out);
    float *w = exec_param(mi, l->w_off), *wm = mi->opt + l->w_off, *wv = mi->opt + np + l->w_off;
    if (c && l->n_b && ith == 0)
        optim_adam_outer(c, alpha, exec_param(mi, l->b_off), mi->opt + l->b_off, mi->opt + np + l->b_off, &one, dy, 1,
                         OUT, 0, OUT, 0.0f, NULL, NULL);
    for (int c0 = r0; c0 < r1; c0 += DENSE1_ROW_CHUNK) {
        const int c1 = r1 - c0 < DENSE1_ROW_CHUNK ? r1 : c0 + DENSE1_ROW_CHUNK;
        float *pk = part ? part + (size_t)(c0 / DENSE1_ROW_CHUNK) * OUT : NULL;
        if (pk) memset(pk, 0, (size_t)OUT * sizeof(float));
        const size_t off = (size_t)c0 * OUT;
        if (c)
            optim_adam_outer(c, alpha, w + off, wm + off, wv + off, x_old + c0, dy, c1 - c0, OUT, 0, OUT,
                             c->weight_decay, pk ? xn + c0 : NULL, pk);
        else if (pk) /* no update pending: dense_forward's chunk sum */
            for (int i = c0; i < c1; i++)
                if (xn[i] != 0.0f) simd_axpy(pk, xn[i], w + (size_t)i * OUT, OUT);
    }
}

/* Dense layer l's deferred Adam step (step size alpha), partitioned over dense_forward's batch-1 row
 * chunks (rows, not columns: two threads writing alternate 256-byte pieces of every row of w, m and v
 * took 67–92 µs for the MLP's update against 29 µs by rows, their cores pulling each other's lines).
 * With out, the forward of the new input xn as well: each chunk's sum from the updated rows into the
 * shared buffer, then, after a barrier, out = b + the chunk sums in order (and ReLU): dense_forward's
 * arithmetic, bitwise, for any nth. */
static void dense_adam(const struct model_inst *mi, const struct layer *l, const struct optim_config *c, float alpha,
                       const float *x_old, const float *xn, float *out, int ith, int nth,
                       const struct exec_sync *sync)
{
    const int IN = l->a.dense.IN, OUT = l->a.dense.OUT;
    TB_ASSERT(!out || mi->shared_floats >= (size_t)dense1_chunks(IN) * OUT);
    int r0, r1;
    dense1_own_rows(IN, ith, nth, &r0, &r1);
    exec_dense1_rows(mi, l, c, alpha, x_old, xn, out ? mi->shared : NULL, r0, r1, ith);
    if (!out) return;
    sync_barrier(sync, nth);
    dense1_combine(out, mi->shared, l->n_b ? exec_param(mi, l->b_off) : NULL, IN, OUT, l->act == ACT_RELU, ith, nth);
}

static void softmax_fwd(const struct model_inst *mi, const struct layer *l, const struct exec_step *st, int ith,
                        int nth)
{
    const struct softmax_ce_shape s = {st->n, mi->m->tensors[l->in].c, l->a.ce.smoothing};
    float *dlogits = NULL;
    if (st->training) {
        /* Zero this thread's rows of dlogits (same sample partition as the kernel): no barrier needed. */
        size_t lo, hi;
        tb_slice((size_t)st->n, ith, nth, &lo, &hi);
        dlogits = exec_dact(mi, l->in);
        memset(dlogits + lo * s.K, 0, (hi - lo) * (size_t)s.K * sizeof(float));
    }
    softmax_ce_forward_backward(mi->losses, dlogits, mi->correct, exec_act(mi, l->in), st->y,
                                1.0f / (float)st->n_global, &s, ith, nth);
}

/* Layer l's convolution shape at n samples, its splits cut for the instance's units (model_inst.par). */
static void conv_shape_of(const struct model_inst *mi, const struct layer *l, int n, struct conv_shape *s)
{
    const struct tensor *ti = &mi->m->tensors[l->in], *to = &mi->m->tensors[l->out];
    *s = (struct conv_shape){.N = n, .H = ti->h, .W = ti->w, .C = ti->c, .OH = to->h, .OW = to->w, .OC = to->c,
                             .KH = l->a.conv.KH, .KW = l->a.conv.KW, .stride = l->a.conv.stride,
                             .pad = l->a.conv.pad, .groups = l->a.conv.groups, .par = mi->par};
}

static inline enum norm_act norm_act_of(const struct layer *l)
{
    return l->act == ACT_SILU ? NORM_ACT_SILU : NORM_ACT_NONE;
}

static inline struct dropout_args drop_args(const struct layer *l, const struct exec_step *st)
{
    return (struct dropout_args){.seed = st->seed, .step = (uint64_t)st->step, .layer = l->a.drop.id,
                                 .p = l->a.drop.p};
}

static float *save_of(const struct model_inst *mi, const struct layer *l)
{
    const struct tensor *t = &mi->m->tensors[l->save];
    if (t->fixed) return mi->acts + mi->m->unit_floats * (size_t)mi->n_max + t->fixed_off;
    return exec_act(mi, l->save);
}

static void copy_slice(float *dst, const float *src, size_t n, int ith, int nth)
{
    size_t lo, hi;
    tb_slice(n, ith, nth, &lo, &hi);
    memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
}

/* BatchNorm's per-chunk sums (bn_chunk_doubles), shared by the threads of this instance. */
static inline double *bn_part_of(const struct model_inst *mi, size_t M, int C)
{
    TB_ASSERT(mi->shared && mi->shared_floats * sizeof(float) >= bn_chunk_doubles(M, C) * sizeof(double));
    return (double *)mi->shared;
}

/* Whether a depthwise convolution of shape cs whose backward runs its input BatchNorm's stream
 * (dw_fused) takes its weight gradient from the rows that stream recomputes (dwconv_backward_data_bn), so
 * that the BatchNorm's output is never stored (bn_apply_in_dw). Every shape: an 8 MB gate (a layer's input
 * from 6 MB ran 1.41 → 1.47 ms in a one-thread harness) left effnet-b0 32×32 batch 128 storing and reading
 * back 84 MB a step more (make cachesim: 973.0 → 888.6 MB), and whole steps gained without it (tools/ab.sh,
 * 5 rounds: cpu 1.020, threads 1.047, mirrored 2 devices 1.039 at that shape; threads at batch 32 1.029;
 * cpu 224×224 batch 16 1.010). Changes those layers' weight-gradient summation order, the same for any
 * thread count. */
static int dw_params_in_bn(const struct model_inst *mi) { return !mi->no_dw_params_fuse; }

/* Where dwconv_backward_data_bn's weight-gradient parts start in the shared buffer: after the BatchNorm's
 * chunk sums (2 doubles a channel and chunk). */
static size_t dw_part_off(const struct conv_shape *cs)
{
    return tb_align16(2 * bn_chunk_doubles((size_t)cs->N * cs->H * cs->W, cs->C));
}

/* A depthwise layer's weight-gradient parts of n floats (dwconv_backward_data_bn's, or the row-chunk parts of
 * dwconv_backward_params_chunks): in the shared buffer after the BatchNorm's sums. */
static float *dw_part_of(const struct model_inst *mi, const struct conv_shape *cs, size_t n)
{
    TB_ASSERT(mi->shared_floats >= dw_part_off(cs) + n);
    return mi->shared + dw_part_off(cs);
}

/* Whether this step may run fused layer pairs at all: prepared (the pairs are marked then), a training
 * step without sync BN (the fused kernels take local batch statistics), fusion not turned off. */
static int fusion_on(const struct model_inst *mi, const struct exec_step *st)
{
    return mi->ls && !mi->no_layer_fusion && st->training && !st->coll;
}

/* Whether BatchNorm layer bn runs its SE pool in this step: the pool's forward in its apply pass
 * (bn_forward_train_finish_pool), and the SE scale's and pool's data gradients in its own first
 * backward pass (bn_backward_chunks_se). Marked at prepare; fusion_on, and all three layers inside the
 * step's range. The pool's forward and backward then do
 * nothing, and the SE scale's backward computes only the scale's gradient. */
static int se_fused(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    if (bn < 0 || !fusion_on(mi, st)) return 0;
    const struct exec_layer_state *s = &mi->ls[bn];
    return s->se_scale >= 0 && bn >= st->l0 && s->se_scale < st->l1;
}

/* The BatchNorm an SE scale or pool layer l may fold into (exec_layer_state.se_bn), or -1. */
static int se_bn_of(const struct model_inst *mi, const struct layer *l)
{
    return mi->ls ? mi->ls[l - mi->m->layers].se_bn : -1;
}

/* Whether the fused kernels whose threads take whole BatchNorm row chunks of M rows keep the machine's
 * cores busy: the K chunks fill at least 2/3 of the rounds of the units (tb_units) they take. Too few
 * chunks (EfficientNet's 7×7 layers at batch 16: 7 of 16 cores; 1×1 at 32×32 batch 128: 1 chunk, one
 * thread) and the unfused kernels, split over rows and (chunk, channel group) items, lose less than the
 * idle cores do (the simulated 16-core split, BENCHMARKS.md). Decided by the shape and the machine, never
 * by nth, like every work split here; the forward's bits are the same either way. */
static int chunks_fill_cores(const struct model_inst *mi, size_t M)
{
    const int K = bn_row_chunks(M), U = tb_units(mi->par);
    return 3 * K >= 2 * U * ((K + U - 1) / U);
}

/* Whether BatchNorm layer bn's statistics are taken by the convolution that writes its input, in this
 * step (conv_forward_gemm1x1_bn, dwconv_forward_bn): marked at prepare, fusion_on, both layers in the
 * step's range, and a 1×1 convolution running GEMM1X1 on
 * gemm_rows or a depthwise one whose shape dwconv_forward_bn_fusable takes, with chunks enough for the
 * machine (chunks_fill_cores). The BatchNorm then goes straight to its apply pass. */
static int conv_fused(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    if (bn < 0 || !fusion_on(mi, st)) return 0;
    const int c = mi->ls[bn].bn_conv;
    if (c < 0 || c < st->l0 || bn >= st->l1) return 0;
    struct conv_shape cs;
    conv_shape_of(mi, &mi->m->layers[c], st->n, &cs);
    if (!chunks_fill_cores(mi, (size_t)cs.N * cs.OH * cs.OW)) return 0;
    if (mi->m->layers[c].op == OP_DWCONV) return dwconv_forward_bn_fusable(&cs);
    return mi->ls[c].algo == CONV_ALGO_GEMM1X1 && conv_gemm1x1_bn_fusable(&cs);
}

/* Whether convolution layer c reads its SE scale's input and applies the scale itself in this step
 * (op_conv_se.h): marked at prepare, the scale's BatchNorm SE-fused in this step (se_fused: fusion on, the
 * BatchNorm to the scale in the step's range), the convolution in the range too, and GEMM1X1 on a shape
 * conv_se_pays takes. The SE scale's forward and backward then do nothing but its dscale (from the
 * convolution's per-sample weight-gradient parts), and its BatchNorm applies a scale of ones. */
static int se_conv_fused(const struct model_inst *mi, const struct exec_step *st, int c)
{
    if (c < 0 || !mi->ls || mi->no_se_conv) return 0;
    const int se = mi->ls[c].conv_se;
    if (se < 0 || c >= st->l1 || !se_fused(mi, st, mi->ls[se].se_bn)) return 0;
    struct conv_shape cs;
    conv_shape_of(mi, &mi->m->layers[c], st->n, &cs);
    return mi->ls[c].algo == CONV_ALGO_GEMM1X1 && conv_se_pays(&cs);
}

/* Whether convolution layer c forms its input rows from the SE scale before it, a tile at a time, in this
 * step (conv_forward_gemm1x1_bn_se), where the scale does not fold into its weights (se_conv_fused): the
 * scale's BatchNorm SE-fused, the convolution's statistics taken by it (conv_fused: GEMM1X1 on gemm_rows),
 * and its one-pass backward running the shape with each sample's rows in one chunk, so it sums the scale's
 * dscale too. The scale's forward and backward then do nothing; its output, a tensor the size of the
 * block's widest, is neither written nor read, and the scale's backward pass over that tensor and its input
 * is gone. The same bits (op_conv.h). At 32×32 this is effnet-b0's blocks 2 and 3. */
static int se_rows_fused(const struct model_inst *mi, const struct exec_step *st, int c)
{
    if (c < 0 || !mi->ls || mi->no_se_rows || mi->no_se_conv) return 0;
    const int se = mi->ls[c].conv_se;
    if (se < 0 || c >= st->l1 || se_conv_fused(mi, st, c) || !se_fused(mi, st, mi->ls[se].se_bn)) return 0;
    if (!conv_fused(mi, st, mi->ls[c].conv_bn) || !mi->m->tensors[mi->m->layers[se].in].needs_grad) return 0;
    struct conv_shape cs;
    conv_shape_of(mi, &mi->m->layers[c], st->n, &cs);
    return conv_se_rows_aligned(&cs, (size_t)cs.H * cs.W);
}

/* The SE scale's input, factors and factor gradient as conv c reads them (se_rows_fused). */
static struct conv_se_rows se_rows_of(const struct model_inst *mi, int c)
{
    const struct layer *se = &mi->m->layers[mi->ls[c].conv_se];
    const struct tensor *x = &mi->m->tensors[se->in];
    return (struct conv_se_rows){exec_act(mi, se->in), exec_act(mi, se->in2),
                                 mi->m->tensors[se->in2].needs_grad ? exec_dact(mi, se->in2) : NULL,
                                 (size_t)x->h * x->w};
}

/* The convolution SE scale layer l may fold into (exec_layer_state.se_conv), or -1. */
static int se_conv_of(const struct model_inst *mi, const struct layer *l)
{
    return mi->ls ? mi->ls[l - mi->m->layers].se_conv : -1;
}

/* The row tile both dense layers of the SE chain from layer h split a batch of n into, or 0 where they split
 * differently (dense_row_tile). */
static int se_chain_tile(const struct model_inst *mi, int h, int n)
{
    const struct layer *f1 = &mi->m->layers[h], *f2 = &mi->m->layers[h + 2];
    const struct dense_shape s1 = {n, f1->a.dense.IN, f1->a.dense.OUT, mi->par},
                             s2 = {n, f2->a.dense.IN, f2->a.dense.OUT, mi->par};
    const int t = dense_row_tile(&s1);
    return t == dense_row_tile(&s2) ? t : 0;
}

/* Whether the SE chain that starts at layer h (exec_layer_state.se_chain: fc1, SiLU, fc2, sigmoid) runs as one
 * pass in this step: prepared, fusion not turned off, the four layers in the step's range, and dense layers
 * that split whole rows at this batch (dense_row_tile). Each thread then carries its row tiles through all
 * four layers — forward in fc1's slot, backward in the sigmoid's, where the weight gradients follow one
 * barrier — instead of four layers with a barrier each (and a barrier after each backward's zeroing),
 * and no chain is left to thread 0 alone for being small (layer_serial): the simulated 16-core split at
 * 32×32 batch 128 had thread 0 run every SE block's chain while the others waited. The same bits: each
 * tile is the one dense_forward and dense_backward_data compute, and the rest is per element. */
static int se_chain_on(const struct model_inst *mi, const struct exec_step *st, int h)
{
    return h >= 0 && mi->ls && !mi->no_layer_fusion && !mi->no_se_chain && h >= st->l0 && h + 3 < st->l1 &&
           !st->optim && !st->defer_dense_params && se_chain_tile(mi, h, st->n) > 0;
}

/* The first layer of the SE chain layer l belongs to (exec_layer_state.se_chain), or -1. */
static int se_chain_of(const struct model_inst *mi, const struct layer *l)
{
    return mi->ls ? mi->ls[l - mi->m->layers].se_chain : -1;
}

/* Whether layer l's forward (backward: !fwd) is the one that runs its SE chain in this step. */
static int se_chain_runs_at(const struct model_inst *mi, const struct exec_step *st, const struct layer *l, int fwd)
{
    const int h = se_chain_of(mi, l);
    return h >= 0 && (int)(l - mi->m->layers) == (fwd ? h : h + 3) && se_chain_on(mi, st, h);
}

/* Whether layer l is in an SE chain that runs in this step, at another layer's slot for this direction. */
static int se_chain_elsewhere(const struct model_inst *mi, const struct exec_step *st, const struct layer *l, int fwd)
{
    const int h = se_chain_of(mi, l);
    return h >= 0 && (int)(l - mi->m->layers) != (fwd ? h : h + 3) && se_chain_on(mi, st, h);
}

/* Thread ith's row tiles [*k0,*k1) of a batch of n for the SE chain from layer h, *th rows a tile. */
static void se_chain_tiles(const struct model_inst *mi, int h, int n, int ith, int nth, int *th, size_t *k0,
                           size_t *k1)
{
    *th = se_chain_tile(mi, h, n);
    tb_slice(((size_t)n + (size_t)*th - 1) / (size_t)*th, ith, nth, k0, k1);
}

/* The SE chain from layer h forward, thread ith's row tiles: fc1, SiLU, fc2, sigmoid. */
static void se_chain_forward(const struct model_inst *mi, const struct exec_step *st, int h, int ith, int nth)
{
    const struct layer *f1 = &mi->m->layers[h], *f2 = &mi->m->layers[h + 2];
    const int n = st->n, C1 = f1->a.dense.OUT, C2 = f2->a.dense.OUT;
    const struct dense_shape s1 = {n, f1->a.dense.IN, C1, mi->par}, s2 = {n, f2->a.dense.IN, C2, mi->par};
    float *y1 = exec_act(mi, f1->out), *a1 = exec_act(mi, f2->in), *y2 = exec_act(mi, f2->out);
    float *a2 = exec_act(mi, mi->m->layers[h + 3].out);
    int th;
    size_t k0, k1;
    se_chain_tiles(mi, h, n, ith, nth, &th, &k0, &k1);
    for (size_t k = k0; k < k1; k++) {
        const int r0 = (int)k * th, r1 = r0 + th < n ? r0 + th : n;
        const size_t o1 = (size_t)r0 * C1, n1 = (size_t)(r1 - r0) * C1;
        const size_t o2 = (size_t)r0 * C2, n2 = (size_t)(r1 - r0) * C2;
        dense_forward_rows(y1, exec_act(mi, f1->in), exec_param(mi, f1->w_off),
                           f1->n_b ? exec_param(mi, f1->b_off) : NULL, &s1, 0, r0, r1);
        silu_forward(a1 + o1, y1 + o1, n1, 0, 1);
        dense_forward_rows(y2, a1, exec_param(mi, f2->w_off), f2->n_b ? exec_param(mi, f2->b_off) : NULL, &s2, 0,
                           r0, r1);
        sigmoid_forward(a2 + o2, y2 + o2, n2, 0, 1);
    }
}

/* Whether layer li's backward adds to its parameter gradients; 0 where mi->pfirst says they hold nothing yet
 * (the local engine's lazy zeroing: exec_params_first_write), and it writes them. */
static int params_acc(const struct model_inst *mi, int li) { return !(mi->pfirst && mi->pfirst[li]); }

int exec_params_first_write(const struct model_inst *mi, int li)
{
    const struct layer *l = &mi->m->layers[li];
    if (!l->n_w) return 0;
    /* Every path of these layers' backward takes params_acc; the other kernels only add. */
    return l->op == OP_DENSE || (l->op == OP_CONV && mi->ls && mi->ls[li].algo == CONV_ALGO_GEMM1X1);
}

/* The SE chain from layer h backward: thread ith's row tiles through the sigmoid, fc2's data gradient,
 * the SiLU and fc1's data gradient (each input gradient zeroed on those rows first, as the layers'
 * own backward does before accumulating: its tensor's only reader), then, after a barrier, both layers'
 * weight gradients over all rows. */
static void se_chain_backward(const struct model_inst *mi, const struct exec_step *st, int h, int ith, int nth,
                              const struct exec_sync *sync)
{
    const struct layer *f1 = &mi->m->layers[h], *f2 = &mi->m->layers[h + 2], *sg = &mi->m->layers[h + 3];
    const int n = st->n, IN = f1->a.dense.IN, C1 = f1->a.dense.OUT, C2 = f2->a.dense.OUT;
    const struct dense_shape s1 = {n, IN, C1, mi->par}, s2 = {n, f2->a.dense.IN, C2, mi->par}; /* fc2's IN is C1 */
    float *d_in = exec_dact(mi, f1->in), *d_y1 = exec_dact(mi, f1->out), *d_a1 = exec_dact(mi, f2->in);
    float *d_y2 = exec_dact(mi, f2->out);
    const float *d_a2 = exec_dact(mi, sg->out), *a2 = exec_act(mi, sg->out), *y1 = exec_act(mi, f1->out);
    const float *w1 = exec_param(mi, f1->w_off), *w2 = exec_param(mi, f2->w_off);
    int th;
    size_t k0, k1;
    se_chain_tiles(mi, h, n, ith, nth, &th, &k0, &k1);
    for (size_t k = k0; k < k1; k++) {
        const int r0 = (int)k * th, r1 = r0 + th < n ? r0 + th : n;
        const size_t rows = (size_t)(r1 - r0), o1 = (size_t)r0 * C1, o2 = (size_t)r0 * C2;
        memset(d_y2 + o2, 0, rows * C2 * sizeof(float));
        sigmoid_backward(d_y2 + o2, d_a2 + o2, a2 + o2, rows * C2, 0, 1);
        memset(d_a1 + o1, 0, rows * C1 * sizeof(float));
        dense_backward_data_rows(d_a1, d_y2, w2, &s2, r0, r1);
        memset(d_y1 + o1, 0, rows * C1 * sizeof(float));
        silu_backward(d_y1 + o1, d_a1 + o1, y1 + o1, rows * C1, 0, 1);
        memset(d_in + (size_t)r0 * IN, 0, rows * IN * sizeof(float));
        dense_backward_data_rows(d_in, d_y1, w1, &s1, r0, r1);
    }
    sync_barrier(sync, nth);
    dense_backward_params(exec_grad(mi, f2->w_off), f2->n_b ? exec_grad(mi, f2->b_off) : NULL, exec_act(mi, f2->in),
                          d_y2, &s2, params_acc(mi, h + 2), ith, nth);
    dense_backward_params(exec_grad(mi, f1->w_off), f1->n_b ? exec_grad(mi, f1->b_off) : NULL, exec_act(mi, f1->in),
                          d_y1, &s1, params_acc(mi, h), ith, nth);
}

/* dw_fused but for the step's range: whether a step holding both layers would fuse them. */
static int dw_fused_anywhere(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    if (bn < 0 || !fusion_on(mi, st)) return 0;
    const int d = mi->ls[bn].bn_dw;
    if (d < 0 || !mi->m->tensors[mi->m->layers[bn].out].needs_grad) return 0;
    struct conv_shape cs;
    conv_shape_of(mi, &mi->m->layers[d], st->n, &cs);
    return dwconv_bn_fusable(&cs) && chunks_fill_cores(mi, (size_t)cs.N * cs.H * cs.W);
}

/* Whether BatchNorm layer bn's first backward pass runs inside the backward data pass of the depthwise
 * convolution that reads its output, in this step (dwconv_backward_data_bn): marked at prepare,
 * fusion_on, both layers in the step's range, and a shape dwconv_bn_fusable takes at this batch, with
 * chunks enough for the machine (chunks_fill_cores). The BatchNorm then goes straight to its second pass. */
static int dw_fused(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    return dw_fused_anywhere(mi, st, bn) && bn >= st->l0 && mi->ls[bn].bn_dw < st->l1;
}

/* Whether the depthwise layer reading BatchNorm bn, which lies outside this step's range (an ipu stage
 * boundary between them: effnet's stem and block 1), takes its weight gradient in the parts and order of the
 * fused pass a step holding both runs (dw_fused with dw_params_in_bn: dwconv_bn_params_parts), so that where
 * a split falls does not change the bits. */
static int dw_params_as_fused(const struct model_inst *mi, const struct exec_step *st, int bn, int has_db)
{
    return !has_db && dw_params_in_bn(mi) && dw_fused_anywhere(mi, st, bn) && !dw_fused(mi, st, bn);
}

/* Whether BatchNorm layer bn leaves its output to the depthwise convolution after it, in this step
 * (dwconv_forward_bn_in): its backward runs in that convolution's (dw_fused), which takes its weight
 * gradient from the rows it recomputes there (dw_params_in_bn, bias-free), so the output tensor is read
 * by nothing but that convolution's forward, which forms each input row as it reaches it. */
static int bn_apply_in_dw(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    if (!dw_fused(mi, st, bn)) return 0;
    const struct layer *d = &mi->m->layers[mi->ls[bn].bn_dw];
    struct conv_shape cs;
    conv_shape_of(mi, d, st->n, &cs);
    return !d->n_b && dw_params_in_bn(mi) && dwconv_forward_bn_in_fusable(&cs);
}

/* sync: the barrier between a kernel's dependent phases (BatchNorm's chunk sums and their use); only
 * called when nth > 1, so a layer run serially on thread 0 passes nth = 1. */
static void layer_forward(const struct model_inst *mi, const struct layer *l, const struct exec_step *st, int ith,
                          int nth, const struct exec_sync *sync)
{
    const struct model *m = mi->m;
    const int n = st->n;
    const struct tensor *ti = &m->tensors[l->in], *to = &m->tensors[l->out];
    const float *in = l->op == OP_INPUT ? NULL : exec_act(mi, l->in);
    float *out = exec_act(mi, l->out);
    const float *w = exec_param(mi, l->w_off), *b = l->n_b ? exec_param(mi, l->b_off) : NULL;
    switch (l->op) {
    case OP_INPUT: input_forward(l, ti, to, out, st, ith, nth); break;
    case OP_DENSE:
        if (st->optim)
            dense_adam(mi, l, st->optim, st->pending_alpha, st->pending_in + dense_in_offset(m, l), in, out, ith, nth,
                       sync);
        else
            dense_fwd(mi, l, n, ith, nth);
        break;
    case OP_RELU: relu_forward(out, in, (size_t)n * to->per_sample, ith, nth); break;
    case OP_SILU: silu_forward(out, in, (size_t)n * to->per_sample, ith, nth); break;
    case OP_SIGMOID: sigmoid_forward(out, in, (size_t)n * to->per_sample, ith, nth); break;
    case OP_CONV: {
        struct conv_shape cs;
        conv_shape_of(mi, l, n, &cs);
        const struct exec_layer_state *ls = &mi->ls[l - m->layers];
        if (se_rows_fused(mi, st, (int)(l - m->layers))) { /* (x·s[n]) tile by tile, and the statistics */
            const struct conv_se_rows se = se_rows_of(mi, (int)(l - m->layers));
            conv_forward_gemm1x1_bn_se(out, &se, w, &cs, bn_part_of(mi, (size_t)n * cs.OH * cs.OW, cs.OC),
                                       scratch_of(mi, ith), ith, nth);
        } else if (se_conv_fused(mi, st, (int)(l - m->layers))) { /* x·(diag(s[n])·w), and maybe the statistics */
            const struct layer *se = &m->layers[ls->conv_se];
            conv_se_forward(out, exec_act(mi, se->in), exec_act(mi, se->in2), w, &cs,
                            conv_fused(mi, st, ls->conv_bn) ? bn_part_of(mi, (size_t)n * cs.OH * cs.OW, cs.OC) : NULL,
                            scratch_of(mi, ith), ith, nth);
        } else if (conv_fused(mi, st, ls->conv_bn)) /* and its BatchNorm's statistics */
            conv_forward_gemm1x1_bn(out, in, w, &cs, bn_part_of(mi, (size_t)n * cs.OH * cs.OW, cs.OC), ith, nth);
        else
            conv_forward((enum conv_algo)ls->algo, out, in, w, b, &cs, ls->plan, scratch_of(mi, ith), ith, nth);
        break;
    }
    case OP_DWCONV: {
        struct conv_shape cs;
        conv_shape_of(mi, l, n, &cs);
        const int fb = conv_fused(mi, st, mi->ls ? mi->ls[l - m->layers].conv_bn : -1);
        const int ib = mi->ls ? mi->ls[l - m->layers].dw_bn : -1;
        if (ib >= 0 && bn_apply_in_dw(mi, st, ib)) { /* the input BatchNorm's apply pass too */
            const struct layer *bl = &m->layers[ib];
            dwconv_forward_bn_in(out, exec_act(mi, bl->in), save_of(mi, bl), exec_param(mi, bl->w_off),
                                 exec_param(mi, bl->b_off), w, b, &cs,
                                 fb ? bn_part_of(mi, (size_t)n * cs.OH * cs.OW, cs.C) : NULL, scratch_of(mi, ith), ith,
                                 nth);
        } else if (fb) /* and its BatchNorm's statistics */
            dwconv_forward_bn(out, in, w, b, &cs, bn_part_of(mi, (size_t)n * cs.OH * cs.OW, cs.C), ith, nth);
        else
            dwconv_forward(out, in, w, b, &cs, ith, nth);
        break;
    }
    case OP_BN: {
        const size_t M = (size_t)n * ti->h * ti->w;
        /* running_var is its own param_entry, which model_add_param starts on a 64-byte boundary. */
        float *rm = mi->buffers + l->buf_off, *rv = rm + tb_align16((size_t)ti->c);
        if (st->training && st->coll) {
            /* Sync BN: partial sums here, summed over replicas, then the global statistics. */
            TB_ASSERT(nth == 1);
            double *sums = (double *)mi->shared;
            TB_ASSERT(mi->shared_floats >= 4 * (size_t)ti->c);
            float *save = save_of(mi, l);
            bn_stats_partial(sums, in, M, ti->c, 0, 1);
            st->coll->allreduce_f64(st->coll->ctx, sums, 2 * (size_t)ti->c);
            bn_stats_finalize(save, st->no_stats_update ? NULL : rm, st->no_stats_update ? NULL : rv, sums,
                              M * st->coll->m_total_factor, ti->c, l->a.norm.eps, l->a.norm.momentum, 0, 1);
            bn_forward_apply(out, in, save, w, b, M, ti->c, norm_act_of(l), 0, 1);
        } else if (st->training) {
            /* Row chunks over every thread, then (after the barrier) rows: bitwise bn_forward_train. */
            double *part = bn_part_of(mi, M, ti->c);
            const int li = (int)(l - m->layers);
            if (!conv_fused(mi, st, li)) { /* else the convolution before took the sums */
                bn_forward_train_chunks(part, in, M, ti->c, ith, nth);
                sync_barrier(sync, nth);
            }
            if (se_fused(mi, st, li))
                bn_forward_train_finish_pool(out, exec_act(mi, m->layers[mi->ls[li].se_pool].out), save_of(mi, l),
                                             st->no_stats_update ? NULL : rm, st->no_stats_update ? NULL : rv, in, w,
                                             b, part, M, (size_t)ti->h * ti->w, ti->c, l->a.norm.eps,
                                             l->a.norm.momentum, ith, nth);
            else /* the output, unless the depthwise convolution after forms it as it reads */
                bn_forward_train_finish(bn_apply_in_dw(mi, st, li) ? NULL : out, save_of(mi, l),
                                        st->no_stats_update ? NULL : rm,
                                        st->no_stats_update ? NULL : rv, in, w, b, part, M, ti->c, l->a.norm.eps,
                                        l->a.norm.momentum, norm_act_of(l), ith, nth);
        } else
            bn_forward_eval(out, in, rm, rv, w, b, M, ti->c, l->a.norm.eps, norm_act_of(l), ith, nth);
        break;
    }
    case OP_GN:
        gn_forward(out, save_of(mi, l), in, w, b, n, (size_t)ti->h * ti->w, ti->c, l->a.norm.groups, l->a.norm.eps,
                   norm_act_of(l), ith, nth);
        break;
    /* A pool or scale fused into a neighbour never gets here: exec_forward passes over it (forward_idle). */
    case OP_GAP: global_avgpool_forward(out, in, n, (size_t)ti->h * ti->w, ti->c, ith, nth); break;
    case OP_SE_SCALE: se_scale_forward(out, in, exec_act(mi, l->in2), n, (size_t)ti->h * ti->w, ti->c, ith, nth); break;
    case OP_ADD: {
        const struct dropout_args a = drop_args(l, st);
        if (st->training && l->a.drop.p > 0.0f) {
            dropconnect_add_forward(out, in, exec_act(mi, l->in2), n, to->per_sample, (uint64_t)st->first_index, &a,
                                    ith, nth);
        } else {
            const struct dropout_args id = {0};
            dropconnect_add_forward(out, in, exec_act(mi, l->in2), n, to->per_sample, 0, &id, ith, nth);
        }
        break;
    }
    case OP_DROPOUT: {
        const struct dropout_args a = drop_args(l, st);
        if (st->training && l->a.drop.p > 0.0f)
            dropout_forward(out, in, n, to->per_sample, (uint64_t)st->first_index, &a, ith, nth);
        else
            copy_slice(out, in, (size_t)n * to->per_sample, ith, nth);
        break;
    }
    case OP_SOFTMAX_CE: softmax_fwd(mi, l, st, ith, nth); break;
    case OP_COUNT: TB_ASSERT(!"bad op");
    }
}

/* Work below which a layer runs on thread 0 alone: splitting a few microseconds of work costs more in
 * barriers than it saves (the batch-1 MLP). Matrix ops count their FLOPs; the others are memory-bound
 * (a few FLOPs per element, but each element read and written in forward and backward), so they count
 * the larger of their FLOPs (global pooling: its input) and 8 per output element — without that,
 * EfficientNet's late SE and pooling layers at 32×32 (~150k elements) ran on one thread and cost
 * threads 10 % of its step. BatchNorm and GroupNorm count 4× that: two passes forward and two
 * backward, with SiLU's sigmoid in each (a 2×2×240 BatchNorm at batch 128 takes 0.37 ms a step on one
 * thread). Serial execution is the nth = 1 partition, so results stay bitwise the same. */
#define EXEC_SERIAL_WORK 2.5e5
#define EXEC_ELEMENT_WORK 8.0
#define EXEC_NORM_ELEMENT_WORK 32.0

static int layer_serial(const struct model *m, const struct layer *l, int n, int nth)
{
    if (nth == 1) return 0;
    const int matrix = l->op == OP_DENSE || l->op == OP_CONV || l->op == OP_DWCONV;
    const int norm = l->op == OP_BN || l->op == OP_GN;
    const double elems = (norm ? EXEC_NORM_ELEMENT_WORK : EXEC_ELEMENT_WORK) * (double)m->tensors[l->out].per_sample;
    const double work = matrix || l->flops > elems ? l->flops : elems; /* pooling: FLOPs count its input */
    return work * n < EXEC_SERIAL_WORK;
}

/* layer_serial for the forward: a dense layer that applies a deferred update runs on every thread, and so
 * does an SE chain. */
static int forward_serial(const struct model_inst *mi, const struct layer *l, const struct exec_step *st, int nth)
{
    return !(st->optim && l->op == OP_DENSE) && !se_chain_runs_at(mi, st, l, 1) && layer_serial(mi->m, l, st->n, nth);
}

/* layer_serial for the backward: with the deferred batch-1 update, a dense layer's backward runs on every
 * thread too, over the weight rows each thread updates (dense_backward_data splits rows as dense_adam's
 * chunks do). On thread 0 alone it read the rows the other thread owns every step, and those rows
 * crossed between the cores' caches twice a step: mnist-mlp batch 1 on two threads took 102 µs a step
 * against 67 µs on one. */
static int backward_serial(const struct model_inst *mi, const struct layer *l, const struct exec_step *st, int nth)
{
    return !(st->defer_dense_params && l->op == OP_DENSE) && !se_chain_runs_at(mi, st, l, 0) &&
           layer_serial(mi->m, l, st->n, nth);
}

static int has_backward(const struct layer *l)
{
    return l->op != OP_SOFTMAX_CE && l->op != OP_INPUT; /* seeded in forward / no gradient */
}

/* Whether layer l's forward does nothing in this step, its work fused into a neighbour's: the SE pool
 * (in its BatchNorm's apply) and the SE scale (in the projection after it). The schedule passes over
 * such a layer without a barrier: with runs_backward's, 34 of EfficientNet-B0's 527 barriers a step (32×32,
 * batch 128) waited on nothing. */
static int forward_idle(const struct model_inst *mi, const struct exec_step *st, const struct layer *l)
{
    const int c = l->op == OP_SE_SCALE ? se_conv_of(mi, l) : -1;
    return (l->op == OP_GAP && se_fused(mi, st, se_bn_of(mi, l))) ||
           (c >= 0 && (se_conv_fused(mi, st, c) || se_rows_fused(mi, st, c))) || se_chain_elsewhere(mi, st, l, 1);
}

/* has_backward, less a layer whose backward does nothing in this step: the SE pool whose gradient its
 * BatchNorm's first backward pass forms (it zeroes nothing: the SE scale after it reads its input last), and
 * the SE scale whose dscale the projection after it wrote (se_rows_fused: its phase A must not zero it). */
static int runs_backward(const struct model_inst *mi, const struct exec_step *st, const struct layer *l)
{
    return has_backward(l) && !(l->op == OP_GAP && se_fused(mi, st, se_bn_of(mi, l))) &&
           !(l->op == OP_SE_SCALE && se_rows_fused(mi, st, se_conv_of(mi, l))) && !se_chain_elsewhere(mi, st, l, 0);
}

/* At most this many tensors cross one split (EfficientNet and the MLP: one). */
#define EXEC_MAX_BOUNDARY 32

int exec_boundary_tensors(const struct model *m, int split, int *ids, int max_ids)
{
    if (split <= 0 || split >= m->n_layers) return 0;
    /* Tensor ids follow creation order, so everything made before layer `split` has a smaller id than
     * its output; a tensor crosses when some layer at or after the split still reads it. */
    const int first_new = m->layers[split].out;
    int n = 0;
    for (int t = 0; t < first_new; t++) {
        if (t == m->input || m->tensors[t].last_reader < split) continue;
        if (n < max_ids) ids[n] = t;
        n++;
    }
    return n;
}

size_t exec_boundary_floats(const struct model *m, int split, int n, int grads)
{
    int ids[EXEC_MAX_BOUNDARY];
    const int k = exec_boundary_tensors(m, split, ids, EXEC_MAX_BOUNDARY);
    TB_ASSERT(k <= EXEC_MAX_BOUNDARY);
    size_t total = 0;
    for (int j = 0; j < k; j++)
        if (!grads || m->tensors[ids[j]].needs_grad) total += tb_align16((size_t)n * m->tensors[ids[j]].per_sample);
    return total;
}

/* Copies a packed boundary buffer into the activation (grads = 0) or gradient (grads = 1) slots of
 * the tensors crossing `split`, partitioned over threads. */
static void boundary_unpack(const struct model_inst *mi, int split, const float *packed, int grads, int n, int ith,
                            int nth)
{
    int ids[EXEC_MAX_BOUNDARY];
    const int k = exec_boundary_tensors(mi->m, split, ids, EXEC_MAX_BOUNDARY);
    TB_ASSERT(k <= EXEC_MAX_BOUNDARY);
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *x = &mi->m->tensors[ids[j]];
        if (grads && !x->needs_grad) continue;
        const size_t len = (size_t)n * x->per_sample;
        size_t lo, hi;
        tb_slice(len, ith, nth, &lo, &hi);
        float *dst = grads ? exec_dact(mi, ids[j]) : exec_act(mi, ids[j]);
        memcpy(dst + lo, packed + off + lo, (hi - lo) * sizeof(float));
        off += tb_align16(len);
    }
}

/* Below, beside the backward's phase A it asks about. */
static int runs_serial(const struct model_inst *mi, const struct exec_step *st, int i, int nth, int fwd);

_Thread_local double *exec_busy_slot;
_Thread_local int exec_busy_cpu;

void exec_forward(const struct model_inst *mi, const struct exec_step *st, int ith, int nth,
                  const struct exec_sync *sync)
{
    const struct model *m = mi->m;
    if (st->in_act) {
        boundary_unpack(mi, st->l0, st->in_act, 0, st->n, ith, nth);
        sync_barrier(sync, nth);
    }
    const int clocked = (mi->prof || st->trace) && ith == 0;
    if (clocked) cachesim_mark(-1, 'F');
    double t_prev = clocked ? tb_now_s() : 0.0;
    double t_busy = 0.0;
    for (int i = st->l0; i < st->l1; i++) {
        if (forward_idle(mi, st, &m->layers[i])) { /* an empty event: the trace keeps one a layer */
            if (clocked) clock_layer(mi, st, i, 'F', &t_prev);
            continue;
        }
        busy_clock(mi, ith, i, 'F', &t_busy);
        const int ser = runs_serial(mi, st, i, nth, 1);
        if (se_chain_runs_at(mi, st, &m->layers[i], 1)) se_chain_forward(mi, st, i, ith, nth);
        else if (!ser) layer_forward(mi, &m->layers[i], st, ith, nth, sync);
        else if (ith == 0) layer_forward(mi, &m->layers[i], st, 0, 1, sync);
        int next = i + 1;
        while (next < st->l1 && forward_idle(mi, st, &m->layers[next])) next++;
        /* Consecutive serial layers all run on thread 0: nothing to wait for between them. */
        if (!(ser && next < st->l1 && runs_serial(mi, st, next, nth, 1))) sync_barrier(sync, nth);
        if (clocked) clock_layer(mi, st, i, 'F', &t_prev);
    }
    busy_clock(mi, ith, -1, 'F', &t_busy);
}

/* Whether layer l writes (rather than adds) the gradient of its input l->in: it is that tensor's last
 * reader, so its backward runs before any other reader's, and its kernel can overwrite. That saves a
 * memset and a read of the gradient per step: at 224×224 nearly every BatchNorm output (the inputs of
 * depthwise, SE-scale and 1×1 convolutions) was zeroed in a separate pass before being accumulated into. */
static int overwrites_in_grad(const struct model_inst *mi, const struct layer *l)
{
    const struct model *m = mi->m;
    if (m->tensors[l->in].last_reader != (int)(l - m->layers)) return 0;
    switch (l->op) {
    case OP_BN:
    case OP_GN:
    case OP_DWCONV:
    case OP_SE_SCALE:
    case OP_ADD: return 1;
    case OP_CONV: {
        const int algo = mi->ls ? mi->ls[l - m->layers].algo : -1;
        return algo >= 0 && conv_algos[algo].backward_data_overwrite != NULL;
    }
    default: return 0;
    }
}

/* Whether layer li's backward starts by zeroing the gradient of its input k (0: in, 1: in2): it is that
 * tensor's last reader and accumulates into it. */
static int zeroes_input_grad(const struct model_inst *mi, const struct layer *l, int li, int k)
{
    const int t = k ? l->in2 : l->in;
    if (t < 0 || (k == 0 && overwrites_in_grad(mi, l))) return 0;
    const struct tensor *x = &mi->m->tensors[t];
    return x->needs_grad && x->last_reader == li;
}

static void zero_input_grads(const struct model_inst *mi, const struct layer *l, int li, int n, int ith, int nth)
{
    for (int k = 0; k < 2; k++) {
        if (!zeroes_input_grad(mi, l, li, k)) continue;
        const struct tensor *x = &mi->m->tensors[k ? l->in2 : l->in];
        size_t lo, hi;
        tb_slice((size_t)n * x->per_sample, ith, nth, &lo, &hi);
        tb_zero_floats(exec_dact(mi, k ? l->in2 : l->in) + lo, hi - lo, (size_t)n * x->per_sample);
    }
}

/* Whether layer li's backward phase A writes (zeroes an input gradient it accumulates into, or masks a
 * fused ReLU), so that split over threads it takes a barrier before its kernel. */
static int backward_phase_a(const struct model_inst *mi, const struct layer *l, int li)
{
    return l->act == ACT_RELU || zeroes_input_grad(mi, l, li, 0) || zeroes_input_grad(mi, l, li, 1);
}

/* Whether layer i runs on thread 0 alone in this step's forward (backward: !fwd): it is small
 * (forward_serial / backward_serial) and so is the layer that runs before or after it, so the barrier
 * between them goes. A small layer between two split ones waits at a barrier on each side anyway, and alone
 * on thread 0 it only idled the others: at 32×32 batch 128 the late residual adds and the large SE blocks'
 * SiLU (the simulated 16-core split: 2.4 and 1.9 of 25 core-ms lost a step). A backward whose phase A
 * writes stays serial: split, it would take one barrier more. The same bits either way: serial is the
 * nth = 1 partition. */
static int runs_serial(const struct model_inst *mi, const struct exec_step *st, int i, int nth, int fwd)
{
    const struct model *m = mi->m;
    if (!(fwd ? forward_serial(mi, &m->layers[i], st, nth) : backward_serial(mi, &m->layers[i], st, nth))) return 0;
    if (!fwd && backward_phase_a(mi, &m->layers[i], i)) return 1; /* split, it would wait once more */
    for (int dir = -1; dir <= 1; dir += 2) {
        int j = i + dir;
        while (j >= st->l0 && j < st->l1 &&
               (fwd ? forward_idle(mi, st, &m->layers[j]) : !runs_backward(mi, st, &m->layers[j])))
            j += dir;
        if (j >= st->l0 && j < st->l1 &&
            (fwd ? forward_serial(mi, &m->layers[j], st, nth) : backward_serial(mi, &m->layers[j], st, nth)))
            return 1;
    }
    return 0;
}

/* Phase A of a layer's backward (before the barrier): turn dout into the gradient before the fused
 * activation, in place; dout is complete because every reader of the output ran its backward already. */
static void act_bwd(const struct model_inst *mi, const struct layer *l, int n, int ith, int nth)
{
    if (l->act != ACT_RELU) return;
    const size_t total = (size_t)n * mi->m->tensors[l->out].per_sample;
    size_t lo, hi;
    tb_slice(total, ith, nth, &lo, &hi);
    relu_mask(exec_dact(mi, l->out), exec_act(mi, l->out), lo, hi);
}

/* pacc: params_acc of the layer (layer_backward's). */
static void dense_bwd(const struct model_inst *mi, const struct layer *l, int n, int defer_params, int pacc, int ith,
                      int nth)
{
    const struct dense_shape s = {n, l->a.dense.IN, l->a.dense.OUT, mi->par};
    float *dout = exec_dact(mi, l->out);
    if (mi->m->tensors[l->in].needs_grad)
        dense_backward_data(exec_dact(mi, l->in), dout, exec_param(mi, l->w_off), &s, ith, nth);
    if (!defer_params)
        dense_backward_params(exec_grad(mi, l->w_off), l->n_b ? exec_grad(mi, l->b_off) : NULL, exec_act(mi, l->in),
                              dout, &s, pacc, ith, nth);
}

/* A convolution's backward as the step runs it, shared with the autotuner so it times the same kernels:
 * din (if non-NULL) overwritten (overwrite: the algorithm must have backward_data_overwrite) or
 * accumulated; then the weight gradient, GEMM1X1's in row-chunk parts (part, conv_params_part_floats)
 * added after a barrier when the shape has them and part is non-NULL, else in one call; pacc 0 (GEMM1X1
 * only: exec_params_first_write): written, not added to. */
static void conv_bwd(enum conv_algo algo, const struct conv_fft_plan *plan, float *din, int overwrite, float *dw,
                     float *db, int pacc, const float *in, const float *dout, const float *w,
                     const struct conv_shape *cs, float *part, float *scratch, const struct exec_sync *sync, int ith,
                     int nth)
{
    TB_ASSERT(pacc || algo == CONV_ALGO_GEMM1X1);
    if (algo == CONV_ALGO_GEMM1X1 && part && din && conv_backward_gemm1x1_fusable(cs, !overwrite)) {
        /* Both from one pass over dout. */
        conv_backward_gemm1x1_fused_chunks(din, !overwrite, part, in, dout, NULL, NULL, w, cs, scratch, ith, nth);
        sync_barrier(sync, nth);
        conv_backward_params_gemm1x1_finish(dw, db, part, dout, cs, pacc, ith, nth);
        return;
    }
    if (din && overwrite) conv_algos[algo].backward_data_overwrite(din, dout, w, cs, scratch, ith, nth);
    else if (din)
        conv_backward_data(algo, din, dout, w, cs, plan, scratch, ith, nth);
    if (algo == CONV_ALGO_GEMM1X1 && part && conv_params_row_chunks(cs)) {
        conv_backward_params_gemm1x1_chunks(part, in, dout, cs, ith, nth);
        sync_barrier(sync, nth);
        conv_backward_params_gemm1x1_finish(dw, db, part, dout, cs, pacc, ith, nth);
    } else if (algo == CONV_ALGO_DIRECT && part && !db && conv_direct_params_row_chunks(cs)) {
        conv_backward_params_direct_chunks(part, in, dout, cs, ith, nth);
        sync_barrier(sync, nth);
        conv_backward_params_direct_finish(dw, part, cs, ith, nth);
    } else if (algo == CONV_ALGO_GEMM1X1) {
        conv_backward_params_gemm1x1_acc(dw, db, in, dout, cs, pacc, ith, nth);
    } else {
        conv_backward_params(algo, dw, db, in, dout, cs, plan, scratch, ith, nth);
    }
}


/* Whether BatchNorm layer bn leaves its data gradient to the 1×1 convolution before it, in this step: the
 * BatchNorm's first pass ran in the depthwise backward after it (dw_fused, so dz is over its output
 * gradient), and the convolution's one-pass backward (conv_backward_gemm1x1_fused_chunks) runs its shape,
 * forming each piece of its dout from dz, x and the BatchNorm's coefficients as it reads them. The
 * BatchNorm then computes only its parameter gradients and those coefficients; its input gradient, a whole
 * tensor, is neither written nor read. Same bits. */
static int bn_bwd_in_conv(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    if (bn < 0 || !dw_fused(mi, st, bn)) return 0;
    const int c = mi->ls[bn].bn_conv;
    if (c < 0 || c < st->l0) return 0;
    const struct layer *cl = &mi->m->layers[c];
    if (cl->op != OP_CONV || mi->ls[c].algo != CONV_ALGO_GEMM1X1 || !mi->m->tensors[cl->in].needs_grad) return 0;
    struct conv_shape cs;
    conv_shape_of(mi, cl, st->n, &cs);
    return conv_backward_gemm1x1_fusable(&cs, !overwrites_in_grad(mi, cl));
}

/* Whether BatchNorm layer bn leaves its data gradient to the depthwise convolution before it, in this step:
 * that convolution's backward data pass runs fused with its input BatchNorm's (dw_fused) and takes its
 * bias-free weight gradient from the rows that pass recomputes (dw_params_in_bn), so nothing else reads its
 * dout, which it forms a few rows at a time from dz, x and the BatchNorm's coefficients as its input rows
 * reach them (dwconv_backward_data_bn with a conv_bn_dout). The BatchNorm computes only its parameter
 * gradients and those coefficients. Same bits. A write and a read of every depthwise output fewer: effnet-b0
 * 32×32 batch 128, 888.6 → 846.3 MB a step (make cachesim); whole steps within noise on 2 cores (BENCHMARKS.md,
 * twenty-sixth session), where a kernel's prefetch hid the read it saves; TB_DW_FORM_DOUT=0 turns it off. */
static int bn_bwd_in_dw(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    if (bn < 0 || !mi->ls || bn >= st->l1 || mi->no_dw_form_dout) return 0;
    const int d = mi->ls[bn].bn_conv;
    if (d < 0 || d < st->l0 || mi->m->layers[d].op != OP_DWCONV) return 0;
    const struct layer *dl = &mi->m->layers[d];
    if (dl->n_b || !mi->m->tensors[dl->in].needs_grad || !dw_fused(mi, st, mi->ls[d].dw_bn)) return 0;
    return dw_params_in_bn(mi);
}

/* Where BatchNorm layer bn's backward leaves dz: over the SE scale's output gradient when SE-fused in this
 * step, else over its own output gradient. */
static float *bn_dz_of(const struct model_inst *mi, const struct exec_step *st, int bn)
{
    const struct layer *l = &mi->m->layers[bn];
    return exec_dact(mi, se_fused(mi, st, bn) ? mi->m->layers[mi->ls[bn].se_scale].out : l->out);
}

/* A thread's scratch for dwconv_backward_data_bn: the SiLU rows, then (with a conv_bn_dout) the dout ring. */
static size_t dw_bn_ring_off(const struct conv_shape *cs) { return tb_align16(dwconv_bn_params_scratch_floats(cs)); }

static void layer_backward(const struct model_inst *mi, const struct layer *l, const struct exec_step *st, int ith,
                           int nth, const struct exec_sync *sync)
{
    const struct model *m = mi->m;
    const int n = st->n;
    const struct tensor *ti = &m->tensors[l->in], *to = &m->tensors[l->out];
    const int need_in = ti->needs_grad;
    const float *in = exec_act(mi, l->in), *out = exec_act(mi, l->out), *dout = exec_dact(mi, l->out);
    float *din = need_in ? exec_dact(mi, l->in) : NULL;
    const float *w = exec_param(mi, l->w_off), *b = l->n_b ? exec_param(mi, l->b_off) : NULL;
    float *dw = exec_grad(mi, l->w_off), *db = l->n_b ? exec_grad(mi, l->b_off) : NULL;
    const size_t total = (size_t)n * to->per_sample;
    const int acc = !overwrites_in_grad(mi, l), pacc = params_acc(mi, (int)(l - m->layers));
    switch (l->op) {
    case OP_DENSE: dense_bwd(mi, l, n, st->defer_dense_params, pacc, ith, nth); break;
    case OP_RELU: if (din) relu_backward(din, dout, out, total, ith, nth); break;
    case OP_SILU: if (din) silu_backward(din, dout, in, total, ith, nth); break;
    case OP_SIGMOID: if (din) sigmoid_backward(din, dout, out, total, ith, nth); break;
    case OP_CONV: {
        struct conv_shape cs;
        conv_shape_of(mi, l, n, &cs);
        const struct exec_layer_state *ls = &mi->ls[l - m->layers];
        if (se_conv_fused(mi, st, (int)(l - m->layers))) {
            /* The SE scale's input gradient through s[n] (BatchNorm reads it with a scale of ones), and
             * the per-sample weight-gradient parts, which the SE scale's backward reads for dscale. */
            const struct layer *se = &m->layers[ls->conv_se];
            const float *sc = exec_act(mi, se->in2);
            TB_ASSERT(!din || !acc);
            if (din) conv_se_backward_data(din, dout, w, sc, &cs, scratch_of(mi, ith), ith, nth);
            conv_se_backward_params_chunks(mi->shared, exec_act(mi, se->in), dout, &cs, ith, nth);
            sync_barrier(sync, nth);
            conv_se_backward_params_finish(dw, mi->shared, sc, &cs, pacc, ith, nth);
            break;
        }
        const int ser = se_rows_fused(mi, st, (int)(l - m->layers)), bbc = bn_bwd_in_conv(mi, st, ls->conv_bn);
        if (ser || bbc) { /* input rows from the SE scale's / dout from the BatchNorm's, as they are read */
            const struct layer *bl = &m->layers[ls->conv_bn];
            const struct conv_bn_dout bd = bbc ? (struct conv_bn_dout){exec_dact(mi, bl->out), exec_act(mi, bl->in),
                                                                       save_of(mi, bl), mi->bn_coef}
                                               : (struct conv_bn_dout){0};
            const struct conv_se_rows se = ser ? se_rows_of(mi, (int)(l - m->layers)) : (struct conv_se_rows){0};
            TB_ASSERT(!ser || (din && !acc));
            conv_backward_gemm1x1_fused_chunks(din, acc, mi->shared, ser ? NULL : in, bbc ? NULL : dout,
                                               bbc ? &bd : NULL, ser ? &se : NULL, w, &cs, scratch_of(mi, ith), ith,
                                               nth);
            sync_barrier(sync, nth);
            conv_backward_params_gemm1x1_finish(dw, db, mi->shared, NULL, &cs, pacc, ith, nth);
            break;
        }
        conv_bwd((enum conv_algo)ls->algo, ls->plan, din, !acc, dw, db, pacc, in, dout, w, &cs, mi->shared,
                 scratch_of(mi, ith), sync, ith, nth);
        break;
    }
    case OP_DWCONV: {
        struct conv_shape cs;
        conv_shape_of(mi, l, n, &cs);
        const int bn = mi->ls ? mi->ls[l - m->layers].dw_bn : -1;
        if (din && dw_fused(mi, st, bn)) {
            /* The input's BatchNorm's first backward pass too: dz over din, its chunk sums in part; and
             * where dw_params_in_bn says so, the weight gradient from the rows that pass recomputes. */
            const struct layer *bl = &m->layers[bn];
            const size_t M = (size_t)n * cs.H * cs.W;
            const int pin = !db && dw_params_in_bn(mi), ob = mi->ls[l - m->layers].conv_bn;
            float *dwpart = pin ? dw_part_of(mi, &cs, dwconv_bn_params_part_floats(&cs)) : NULL;
            TB_ASSERT(!acc);
            /* dout formed from the BatchNorm after this layer as it is read (bn_bwd_in_dw) */
            const int form = bn_bwd_in_dw(mi, st, ob);
            const struct conv_bn_dout bd = form ? (struct conv_bn_dout){bn_dz_of(mi, st, ob), out,
                                                                        save_of(mi, &m->layers[ob]), mi->bn_coef}
                                                : (struct conv_bn_dout){0};
            dwconv_backward_data_bn(din, form ? NULL : dout, w, &cs, bn_part_of(mi, M, cs.C), exec_act(mi, bl->in),
                                    save_of(mi, bl), exec_param(mi, bl->w_off), exec_param(mi, bl->b_off), dwpart,
                                    pin ? scratch_of(mi, ith) : NULL, form ? &bd : NULL,
                                    form ? scratch_of(mi, ith) + dw_bn_ring_off(&cs) : NULL, ith, nth);
            if (pin) {
                sync_barrier(sync, nth);
                dwconv_bn_params_finish(dw, dwpart, &cs, ith, nth);
                break;
            }
        } else if (din) {
            dwconv_backward_data(din, dout, w, &cs, acc, ith, nth);
        }
        if (dw_params_as_fused(mi, st, bn, db != NULL)) {
            float *dwpart = dw_part_of(mi, &cs, dwconv_bn_params_part_floats(&cs));
            dwconv_bn_params_parts(dwpart, in, dout, &cs, ith, nth);
            sync_barrier(sync, nth);
            dwconv_bn_params_finish(dw, dwpart, &cs, ith, nth);
            break;
        }
        if (dwconv_params_row_chunks(&cs)) { /* more cores than channel blocks: row chunks too */
            float *part = dw_part_of(mi, &cs, dwconv_params_part_floats(&cs));
            dwconv_backward_params_chunks(part, db != NULL, in, dout, &cs, ith, nth);
            sync_barrier(sync, nth);
            dwconv_backward_params_finish(dw, db, part, &cs, ith, nth);
            break;
        }
        dwconv_backward_params(dw, db, in, dout, &cs, ith, nth);
        break;
    }
    case OP_BN:
        TB_ASSERT(din != NULL);
        /* dout is complete (every reader of the output ran its backward), so the kernel may overwrite
         * it with the pre-activation gradient. */
        if (st->coll) {
            TB_ASSERT(nth == 1);
            const size_t M = (size_t)n * ti->h * ti->w;
            double *sums = (double *)mi->shared;
            bn_backward_partial(sums, (float *)dout, in, save_of(mi, l), w, b, M, ti->c, norm_act_of(l), 0, 1);
            bn_backward_params_apply(dw, db, sums, ti->c, 0, 1); /* local: the gradient all-reduce sums them */
            st->coll->allreduce_f64(st->coll->ctx, sums, 2 * (size_t)ti->c);
            bn_backward_data_apply(din, dout, in, save_of(mi, l), w, sums, M, M * st->coll->m_total_factor, ti->c,
                                   acc, 0, 1);
            break;
        }
        {
            /* Row chunks, then rows after the barrier (dz left in dout by then): bitwise bn_backward. */
            const size_t M = (size_t)n * ti->h * ti->w;
            double *part = bn_part_of(mi, M, ti->c);
            const int li = (int)(l - m->layers), in_dw = dw_fused(mi, st, li);
            if (in_dw) {
                /* The depthwise backward left dz in dout and the chunk sums in part. */
            } else if (se_fused(mi, st, li)) {
                /* dz goes over the SE scale's output gradient; y's own was never formed. */
                const struct layer *se = &m->layers[mi->ls[li].se_scale];
                float *dse = exec_dact(mi, se->out);
                /* With the SE scale in the projection, dse holds its input's gradient: a scale of ones. */
                const float *sc = se_conv_fused(mi, st, mi->ls[mi->ls[li].se_scale].se_conv) ? mi->ones
                                                                                              : exec_act(mi, se->in2);
                bn_backward_chunks_se(part, dse, sc, exec_dact(mi, m->layers[mi->ls[li].se_pool].out),
                                      (size_t)ti->h * ti->w, in, save_of(mi, l), w, b, M, ti->c, ith, nth);
                dout = dse;
            } else {
                bn_backward_chunks(part, (float *)dout, in, save_of(mi, l), w, b, M, ti->c, norm_act_of(l), ith, nth);
            }
            if (!in_dw) sync_barrier(sync, nth);
            const int form_in_dw = bn_bwd_in_dw(mi, st, li);
            if (form_in_dw) TB_ASSERT(!acc && dout == bn_dz_of(mi, st, li));
            if (form_in_dw || bn_bwd_in_conv(mi, st, li)) /* the convolution before applies them */
                bn_backward_coefs(mi->bn_coef, dw, db, save_of(mi, l), w, part, M, ti->c, ith, nth);
            else
                bn_backward_finish(din, dw, db, dout, in, save_of(mi, l), w, part, M, ti->c, acc, ith, nth);
        }
        break;
    case OP_GN: {
        const size_t HW = (size_t)ti->h * ti->w;
        if (din)
            gn_backward_data(din, dout, in, save_of(mi, l), w, b, n, HW, ti->c, l->a.norm.groups, norm_act_of(l), acc,
                             ith, nth);
        gn_backward_params(dw, db, dout, in, save_of(mi, l), w, b, n, HW, ti->c, l->a.norm.groups, norm_act_of(l),
                           ith, nth);
        break;
    }
    case OP_GAP: /* not an SE-fused pool: exec_backward passes over it (runs_backward) */
        if (din) global_avgpool_backward(din, dout, n, (size_t)ti->h * ti->w, ti->c, ith, nth);
        break;
    case OP_SE_SCALE: {
        const int need_s = m->tensors[l->in2].needs_grad;
        const int c = se_conv_of(mi, l);
        if (se_conv_fused(mi, st, c)) { /* dscale from the convolution's parts, still in shared */
            struct conv_shape cs;
            conv_shape_of(mi, &m->layers[c], n, &cs);
            if (need_s)
                conv_se_dscale(exec_dact(mi, l->in2), mi->shared, exec_param(mi, m->layers[c].w_off), &cs, ith, nth);
            break;
        }
        se_scale_backward(se_fused(mi, st, se_bn_of(mi, l)) ? NULL : din,
                          need_s ? exec_dact(mi, l->in2) : NULL, dout, in, exec_act(mi, l->in2), n,
                          (size_t)ti->h * ti->w, ti->c, acc, ith, nth);
        break;
    }
    case OP_ADD: {
        size_t lo, hi;
        tb_slice(total, ith, nth, &lo, &hi);
        if (din && acc)
            for (size_t i = lo; i < hi; i++) din[i] += dout[i];
        else if (din)
            memcpy(din + lo, dout + lo, (hi - lo) * sizeof(float));
        if (m->tensors[l->in2].needs_grad) {
            float *d2 = exec_dact(mi, l->in2);
            if (l->a.drop.p > 0.0f) {
                const struct dropout_args a = drop_args(l, st);
                dropconnect_backward(d2, dout, n, to->per_sample, (uint64_t)st->first_index, &a, ith, nth);
            } else {
                for (size_t i = lo; i < hi; i++) d2[i] += dout[i];
            }
        }
        break;
    }
    case OP_DROPOUT: {
        if (!din) break;
        if (l->a.drop.p > 0.0f) {
            const struct dropout_args a = drop_args(l, st);
            dropout_backward(din, dout, n, to->per_sample, (uint64_t)st->first_index, &a, ith, nth);
        } else {
            size_t lo, hi;
            tb_slice(total, ith, nth, &lo, &hi);
            for (size_t i = lo; i < hi; i++) din[i] += dout[i];
        }
        break;
    }
    case OP_INPUT:
    case OP_SOFTMAX_CE:
    case OP_COUNT: break;
    }
}

/* Thread 0, after layer i's backward (or the SE chain's ending there): mi->pwrote for the layers whose
 * parameter gradients it wrote or added to. */
static void mark_params_written(const struct model_inst *mi, const struct exec_step *st, int i)
{
    const struct layer *l = &mi->m->layers[i];
    if (se_chain_runs_at(mi, st, l, 0)) {
        const int h = se_chain_of(mi, l);
        mi->pwrote[h] = mi->pwrote[h + 2] = 1;
    } else if (!(l->op == OP_DENSE && st->defer_dense_params)) {
        mi->pwrote[i] = 1;
    }
}

void exec_backward(const struct model_inst *mi, const struct exec_step *st, int ith, int nth,
                   const struct exec_sync *sync)
{
    const struct model *m = mi->m;
    if (st->out_dact) {
        boundary_unpack(mi, st->l1, st->out_dact, 1, st->n, ith, nth);
        sync_barrier(sync, nth);
    }
    const int clocked = (mi->prof || st->trace) && ith == 0;
    if (clocked) cachesim_mark(-1, 'B');
    double t_prev = clocked ? tb_now_s() : 0.0;
    double t_busy = 0.0;
    for (int i = st->l1 - 1; i >= st->l0; i--) {
        const struct layer *l = &m->layers[i];
        if (!runs_backward(mi, st, l)) { /* an empty event for a layer fused away, as in the forward */
            if (clocked && has_backward(l)) clock_layer(mi, st, i, 'B', &t_prev);
            continue;
        }
        busy_clock(mi, ith, i, 'B', &t_busy);
        const int ser = runs_serial(mi, st, i, nth, 0);
        if (se_chain_runs_at(mi, st, l, 0)) {
            se_chain_backward(mi, st, se_chain_of(mi, l), ith, nth, sync);
        } else if (ser) {
            if (ith == 0) {
                zero_input_grads(mi, l, i, st->n, 0, 1);
                act_bwd(mi, l, st->n, 0, 1);
                layer_backward(mi, l, st, 0, 1, sync);
            }
        } else {
            zero_input_grads(mi, l, i, st->n, ith, nth);
            act_bwd(mi, l, st->n, ith, nth);
            /* Phase A's slices are not the kernel's: wait only when it wrote something (112 of
             * EfficientNet-B0's 639 barriers a step at 32×32 batch 128 followed an empty phase A). */
            if (backward_phase_a(mi, l, i)) sync_barrier(sync, nth);
            layer_backward(mi, l, st, ith, nth, sync);
        }
        if (ith == 0 && mi->pwrote) mark_params_written(mi, st, i);
        int next = i - 1;
        while (next >= st->l0 && !runs_backward(mi, st, &m->layers[next])) next--;
        if (!(ser && next >= st->l0 && runs_serial(mi, st, next, nth, 0))) sync_barrier(sync, nth);
        if (clocked) clock_layer(mi, st, i, 'B', &t_prev);
    }
    busy_clock(mi, ith, -1, 'B', &t_busy);
}

double exec_loss_sum(const struct model_inst *mi, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += mi->losses[i];
    return s;
}

int exec_correct_count(const struct model_inst *mi, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += mi->correct[i];
    return c;
}

void exec_logits_copy(const struct model_inst *mi, int n, float *dst)
{
    const struct model *m = mi->m;
    const struct layer *loss = &m->layers[m->n_layers - 1];
    TB_ASSERT(loss->op == OP_SOFTMAX_CE);
    memcpy(dst, exec_act(mi, loss->in), (size_t)n * m->tensors[loss->in].per_sample * sizeof(float));
}

int exec_can_fuse_update(const struct model *m, int n, const struct optim_config *c)
{
    if (n != 1 || c->kind != OPTIM_ADAM) return 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].n_w && m->layers[i].op != OP_DENSE) return 0;
    return 1;
}

void exec_update_fused(const struct model_inst *mi, const struct optim_config *c, long step, const float *in,
                       int ith, int nth)
{
    const struct model *m = mi->m;
    const float alpha = optim_adam_alpha(c, step);
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        if (l->op == OP_DENSE) dense_adam(mi, l, c, alpha, in + dense_in_offset(m, l), NULL, NULL, ith, nth, NULL);
    }
}

/* ---- Preparation: convolution algorithms (forced or autotuned), FFT plans, scratch. ---- */

#define TUNE_PRUNE 3.0
/* A 1×1 layer at 32×32 batch 128 timed 4.75 ms on gemm1x1 and 5.11 on im2col: the choice flipped between
 * runs of one binary under the machine's noise, and with it the bits of the run. */
#define TUNE_MARGIN 0.05

/* Process-wide cache: one measurement per (shape, threads), shared by replicas and instances; entries
 * come from timing (tune_measured of them) or from a tuning file (exec_tune_add). */
static struct exec_tune_entry tune_cache[EXEC_TUNE_MAX];
static int tune_n, tune_measured;
static pthread_mutex_t tune_lock = PTHREAD_MUTEX_INITIALIZER;

int exec_tune_entries(struct exec_tune_entry *out, int cap)
{
    pthread_mutex_lock(&tune_lock);
    const int n = tune_n;
    if (out && cap > 0) memcpy(out, tune_cache, (size_t)(n < cap ? n : cap) * sizeof *out);
    pthread_mutex_unlock(&tune_lock);
    return n;
}

int exec_tune_measured(void)
{
    pthread_mutex_lock(&tune_lock);
    const int n = tune_measured;
    pthread_mutex_unlock(&tune_lock);
    return n;
}

/* The cache's entry for a key, the latest where two replicas timed one shape at once; -1 if none. Call with
 * tune_lock held. */
static int tune_find(const struct conv_shape *s, int nth, int data)
{
    for (int i = tune_n - 1; i >= 0; i--)
        if (tune_cache[i].nth == nth && tune_cache[i].data == data && memcmp(&tune_cache[i].s, s, sizeof *s) == 0)
            return i;
    return -1;
}

static int tune_lookup(const struct conv_shape *s, int nth, int data)
{
    pthread_mutex_lock(&tune_lock);
    const int i = tune_find(s, nth, data), algo = i >= 0 ? tune_cache[i].algo : -1;
    pthread_mutex_unlock(&tune_lock);
    return algo;
}

static void tune_store(const struct conv_shape *s, int nth, int data, int algo)
{
    pthread_mutex_lock(&tune_lock);
    if (tune_n < EXEC_TUNE_MAX) {
        tune_cache[tune_n++] = (struct exec_tune_entry){*s, nth, data, algo};
        tune_measured++;
    }
    pthread_mutex_unlock(&tune_lock);
}

int exec_tune_add(const struct exec_tune_entry *e, int replace)
{
    /* A file's shape is checked as a layer's would be (the kernels trust it only through the lookup, but an
     * entry that names an algorithm the shape cannot run must never be taken). */
    struct conv_shape s = e->s;
    const int dims[] = {s.N, s.H, s.W, s.C, s.OC, s.KH, s.KW, s.stride, s.pad, s.groups, s.par};
    int ok_fields = e->nth >= 1 && e->nth <= 4096 && e->data >= 0 && e->data <= 3 && e->algo >= 0 &&
                    e->algo < CONV_ALGO_COUNT;
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) ok_fields &= dims[k] >= 0 && dims[k] <= (1 << 24);
    if (!ok_fields || conv_shape_fill(&s) != TB_OK || s.OH != e->s.OH || s.OW != e->s.OW ||
        !conv_algo_supported((enum conv_algo)e->algo, &s)) {
        tb_error_clear();
        return tb_error_set(TB_EINVAL, "not a convolution shape and algorithm this engine runs");
    }
    pthread_mutex_lock(&tune_lock);
    const int i = tune_find(&s, e->nth, e->data);
    if (i >= 0) {
        if (replace) tune_cache[i].algo = e->algo;
    } else if (tune_n < EXEC_TUNE_MAX) {
        tune_cache[tune_n++] = (struct exec_tune_entry){s, e->nth, e->data, e->algo};
    }
    pthread_mutex_unlock(&tune_lock);
    return TB_OK;
}

struct tune_task {
    const struct model_inst *mi;
    const struct layer *l;
    struct conv_shape s;
    enum conv_algo algo;
    const struct conv_fft_plan *plan;
    float *scratch;
    size_t scratch_floats;
    float *part;   /* two-phase weight-gradient parts (conv_params_parts_floats of the algorithm), or NULL */
    int overwrite; /* the step overwrites dinp (the layer is its input's last reader) */
    struct exec_sync sync; /* the runner's barrier */
};

static void tune_run(void *arg, int ith, int nth)
{
    struct tune_task *t = arg;
    float *scr = t->scratch + (size_t)ith * t->scratch_floats;
    const float *w = exec_param(t->mi, t->l->w_off);
    float *in = exec_act(t->mi, t->l->in), *out = exec_act(t->mi, t->l->out);
    float *din = exec_dact(t->mi, t->l->in), *dout = exec_dact(t->mi, t->l->out);
    conv_forward(t->algo, out, in, w, NULL, &t->s, t->plan, scr, ith, nth);
    sync_barrier(&t->sync, nth);
    /* Only the passes a step runs count: the stem's input (the image) has no gradient, and direct's
     * slow backward-data there made tuning pick im2col, 1.6× slower on the two passes it does run. */
    /* The kernels layer_backward runs for this algorithm (conv_bwd), not their generic forms: GEMM1X1's
     * overwriting backward-data and two-phase weight gradient beat what the generic calls measured
     * (a 112×112 32 → 16 layer tuned to direct, whose weight gradient has one 16-channel unit and so
     * runs on one thread: 7.3 ms a step against 5.3 with GEMM1X1 on one thread, 4.1 against 1.9 on two). */
    conv_bwd(t->algo, t->plan, t->mi->m->tensors[t->l->in].needs_grad ? din : NULL,
             t->overwrite && conv_algos[t->algo].backward_data_overwrite, exec_grad(t->mi, t->l->w_off), NULL, 1,
             in, dout, w, &t->s, t->part, scr, &t->sync, ith, nth);
}

void exec_trace_add(struct exec_trace *tr, int layer, char phase, double t0_abs, double t1_abs)
{
    if (!tr) return;
    if (tr->n >= tr->cap) {
        tr->dropped++;
        return;
    }
    tr->ev[tr->n++] = (struct exec_trace_event){layer, tr->micro_batch, phase, t0_abs - tr->t0, t1_abs - tr->t0};
}

static size_t scratch_need(enum conv_algo a, const struct conv_shape *s, int nth)
{
    size_t need = 0;
    for (int p = 0; p < 3; p++) {
        size_t k = conv_scratch_floats(a, (enum conv_pass)p, s, nth);
        if (k > need) need = k;
    }
    return need;
}

const char *const exec_conv_algo_names[] = {"im2col", "direct", "fft", "gemm1x1"};

/* Marks BatchNorm layer i (with SiLU) in ls when its output is read by exactly an SE scale (as its x)
 * and a global average pool: the pattern of every MBConv block's depthwise BatchNorm. */
static void se_fusion_find(const struct model *m, int i, struct exec_layer_state *ls)
{
    const struct layer *l = &m->layers[i];
    if (l->op != OP_BN || l->act != ACT_SILU || m->tensors[l->out].n_readers != 2) return;
    int se = -1, gap = -1;
    for (int j = i + 1; j < m->n_layers; j++) {
        const struct layer *r = &m->layers[j];
        if (r->in != l->out && r->in2 != l->out) continue;
        if (r->op == OP_SE_SCALE && r->in == l->out && r->in2 != l->out) se = j;
        else if (r->op == OP_GAP && r->in == l->out) gap = j;
        else return;
    }
    if (se < 0 || gap < 0 || !m->tensors[m->layers[gap].out].needs_grad) return;
    ls[i].se_scale = se, ls[i].se_pool = gap;
    ls[se].se_bn = ls[gap].se_bn = i;
}

/* Marks BatchNorm layer i (with SiLU) in ls when a depthwise convolution is the only reader of its
 * output: the expansion BatchNorm of every MBConv block with an expansion. */
static void dw_fusion_find(const struct model *m, int i, struct exec_layer_state *ls)
{
    const struct layer *l = &m->layers[i];
    if (l->op != OP_BN || l->act != ACT_SILU || m->tensors[l->out].n_readers != 1) return;
    for (int j = i + 1; j < m->n_layers; j++) {
        const struct layer *r = &m->layers[j];
        if (r->in2 == l->out) return;
        if (r->in != l->out) continue;
        if (r->op == OP_DWCONV) ls[i].bn_dw = j, ls[j].dw_bn = i;
        return;
    }
}

/* Marks BatchNorm layer i in ls when its input is the output of the convolution just before it (a
 * bias-free dense one, or a depthwise one), which nothing else reads: every BatchNorm of EfficientNet. */
static void conv_fusion_find(const struct model *m, int i, struct exec_layer_state *ls)
{
    const struct layer *l = &m->layers[i];
    if (l->op != OP_BN || i == 0 || m->tensors[l->in].n_readers != 1) return;
    /* Adjacent, so no other layer's sums can overwrite the shared part buffer in between. */
    const struct layer *p = &m->layers[i - 1];
    if (p->out == l->in && ((p->op == OP_CONV && p->n_b == 0) || p->op == OP_DWCONV))
        ls[i].bn_conv = i - 1, ls[i - 1].conv_bn = i;
}

/* Marks SE scale layer i in ls when its BatchNorm is SE-fused (se_bn) and its output is read only by the
 * bias-free convolution just after it: every MBConv block's projection. */
static void se_conv_fusion_find(const struct model *m, int i, struct exec_layer_state *ls)
{
    const struct layer *l = &m->layers[i];
    if (l->op != OP_SE_SCALE || ls[i].se_bn < 0 || i + 1 >= m->n_layers || m->tensors[l->out].n_readers != 1) return;
    const struct layer *c = &m->layers[i + 1];
    if (c->op == OP_CONV && c->in == l->out && c->n_b == 0) ls[i].se_conv = i + 1, ls[i + 1].conv_se = i;
}

/* Marks layers i..i+3 in ls when they are an SE block's excitation: dense (fc1), SiLU, dense (fc2), sigmoid,
 * no fused activations, each the only reader of the tensor before it (fc1 of its input too), every input
 * needing its gradient (exec's se_chain_on). */
static void se_chain_find(const struct model *m, int i, struct exec_layer_state *ls)
{
    static const enum op_kind want[4] = {OP_DENSE, OP_SILU, OP_DENSE, OP_SIGMOID};
    if (i + 3 >= m->n_layers) return;
    for (int k = 0; k < 4; k++) {
        const struct layer *c = &m->layers[i + k];
        const struct tensor *x = &m->tensors[c->in];
        if (c->op != want[k] || c->act != ACT_NONE || c->in2 >= 0 || !x->needs_grad || x->n_readers != 1) return;
        if (k > 0 && c->in != m->layers[i + k - 1].out) return;
    }
    for (int k = 0; k < 4; k++) ls[i + k].se_chain = i;
}

int exec_units(int par_units) { return tb_env_off("TB_REPLICA_CUT") ? 0 : par_units; }

int exec_prepare(struct model_inst *mi, const struct exec_runner *r, const char *algo_name,
                 const struct model_inst *tune_from)
{
    const struct model *m = mi->m;
    int forced = -1;
    if (algo_name && algo_name[0] && strcmp(algo_name, "auto") != 0) {
        for (int a = 0; a < CONV_ALGO_COUNT; a++)
            if (strcmp(algo_name, exec_conv_algo_names[a]) == 0) forced = a;
        if (forced < 0)
            return tb_error_set(TB_EINVAL, "--conv-algo must be auto, im2col, direct, fft or gemm1x1 (got '%s')",
                                algo_name);
    }
    mi->no_dw_form_dout = tb_env_off("TB_DW_FORM_DOUT");
    mi->no_se_chain = tb_env_off("TB_SE_CHAIN");
    mi->no_se_rows = tb_env_off("TB_SE_ROWS");
    mi->ls = calloc((size_t)m->n_layers, sizeof *mi->ls);
    if (!mi->ls) return tb_error_set(TB_ENOMEM, "exec_prepare: out of memory");
    size_t need = 16, shared = 16, tune_cap = 0, part_cap = 0;
    float *tune_scr = NULL, *tune_part = NULL;
    for (int i = 0; i < m->n_layers; i++) {
        struct exec_layer_state *s = &mi->ls[i];
        s->se_scale = s->se_pool = s->se_bn = s->bn_dw = s->dw_bn = s->bn_conv = s->conv_bn = -1;
        s->se_conv = s->conv_se = s->se_chain = -1;
    }
    for (int i = 0; i < m->n_layers; i++)
        se_fusion_find(m, i, mi->ls), dw_fusion_find(m, i, mi->ls), conv_fusion_find(m, i, mi->ls),
            se_chain_find(m, i, mi->ls);
    for (int i = 0; i < m->n_layers; i++) se_conv_fusion_find(m, i, mi->ls); /* after se_bn is marked */
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        mi->ls[i].algo = -1;
        if (l->op != OP_CONV) continue;
        struct conv_shape s;
        conv_shape_of(mi, l, mi->n_max, &s);
        int algo = tune_from ? tune_from->ls[i].algo : -1;
        if (algo < 0 && forced >= 0 && conv_algo_supported((enum conv_algo)forced, &s)) algo = forced;
        /* What the step's backward runs depends on both (see tune_run): part of the tuning key. */
        const int overwrite = m->tensors[l->in].last_reader == i;
        const int data = m->tensors[l->in].needs_grad + 2 * overwrite;
        if (algo < 0) algo = tune_lookup(&s, r->nth, data);
        if (algo < 0) {
            /* Measure every supported algorithm (after a warm-up call) on this instance's buffers; the
             * usual winner first, and one whose warm-up alone takes TUNE_PRUNE× the best so far is not
             * timed again (FFT and direct on EfficientNet's 112×112 1×1 layers: most of the 40 s that
             * tuning effnet-b0 at 224×224 took). */
            static const int order[CONV_ALGO_COUNT] = {CONV_ALGO_GEMM1X1, CONV_ALGO_IM2COL, CONV_ALGO_DIRECT,
                                                       CONV_ALGO_FFT};
            double best = 1e30;
            for (int oi = 0; oi < CONV_ALGO_COUNT; oi++) {
                const int a = order[oi];
                if (!conv_algo_supported((enum conv_algo)a, &s)) continue;
                /* A 1×1 convolution is a GEMM; its FFT form is that GEMM plus transforms (still forceable). */
                if (a == CONV_ALGO_FFT && s.KH * s.KW == 1) continue;
                struct tune_task t = {.mi = mi, .l = l, .s = s, .algo = (enum conv_algo)a, .overwrite = overwrite,
                                      .sync = {r->barrier, r->ctx}};
                const size_t parts = conv_params_parts_floats((enum conv_algo)a, &s);
                if (parts > part_cap) {
                    arena_free(tune_part);
                    part_cap = parts;
                    tune_part = arena_alloc(part_cap);
                    if (!tune_part) part_cap = 0;
                }
                t.part = parts ? tune_part : NULL;
                struct conv_fft_plan *plan = NULL;
                if (conv_algos[a].needs_plan && conv_fft_plan_create(&plan, &s) != TB_OK) continue;
                t.plan = plan;
                t.scratch_floats = scratch_need((enum conv_algo)a, &s, r->nth);
                if (t.scratch_floats * (size_t)r->nth > tune_cap) { /* one growing buffer: no fresh pages per try */
                    arena_free(tune_scr);
                    tune_cap = t.scratch_floats * (size_t)r->nth;
                    tune_scr = arena_alloc(tune_cap);
                    if (!tune_scr) tune_cap = 0;
                }
                t.scratch = tune_scr;
                if (t.scratch) {
                    /* One warm-up call, then the best of three: shared machines are noisy. */
                    const double w0 = tb_now_s();
                    r->run(r->ctx, tune_run, &t);
                    const int reps = tb_now_s() - w0 > TUNE_PRUNE * best ? 0 : 3;
                    double mine = 1e30;
                    for (int rep = 0; rep < reps; rep++) {
                        double t0 = tb_now_s();
                        r->run(r->ctx, tune_run, &t);
                        double dt = tb_now_s() - t0;
                        if (dt < mine) mine = dt;
                    }
                    /* The first one timed, or one TUNE_MARGIN faster than the best so far: where two time
                     * within noise, the earlier in `order` keeps the layer, so one binary picks the same
                     * algorithm (and gives the same bits) run after run. */
                    if (reps && (algo < 0 || mine * (1.0 + TUNE_MARGIN) < best)) best = mine, algo = a;
                }
                conv_fft_plan_destroy(plan);
            }
            TB_ASSERT(algo >= 0);
            tune_store(&s, r->nth, data, algo);
        }
        mi->ls[i].algo = algo;
        if (conv_algos[algo].needs_plan) {
            int st = conv_fft_plan_create(&mi->ls[i].plan, &s);
            if (st != TB_OK) {
                arena_free(tune_scr);
                arena_free(tune_part);
                return st;
            }
        }
        const size_t k = scratch_need((enum conv_algo)algo, &s, r->nth);
        if (k > need) need = k;
        if (conv_params_parts_floats((enum conv_algo)algo, &s) > shared)
            shared = conv_params_parts_floats((enum conv_algo)algo, &s);
    }
    arena_free(tune_scr);
    arena_free(tune_part);
    size_t ones = 0, coef = 16;
    for (int i = 0; i < m->n_layers; i++) { /* one-pass GEMM1X1 backward: wᵀ and a piece of dout */
        const struct layer *l = &m->layers[i];
        if (l->op == OP_BN && 3 * (size_t)m->tensors[l->in].c > coef) coef = 3 * (size_t)m->tensors[l->in].c;
        if (l->op != OP_CONV || mi->ls[i].algo != CONV_ALGO_GEMM1X1) continue;
        struct conv_shape s;
        conv_shape_of(mi, l, mi->n_max, &s);
        if (!conv_backward_gemm1x1_fusable(&s, 0) && !conv_backward_gemm1x1_fusable(&s, 1)) continue;
        /* With an SE scale before it, maybe its rows too (se_rows_fused: decided per step, sized here). */
        const int se = mi->ls[i].conv_se >= 0;
        const size_t k = conv_backward_gemm1x1_fused_scratch_floats(&s, se);
        if (k > need) need = k;
        if (se && conv_forward_se_rows_scratch_floats(&s) > need) /* its forward: gemm_rows, as the backward */
            need = conv_forward_se_rows_scratch_floats(&s);
    }
    for (int i = 0; i < m->n_layers; i++) { /* the SE-scaled convolutions' weights, parts and ones */
        const struct layer *l = &m->layers[i];
        if (l->op != OP_CONV || mi->ls[i].conv_se < 0) continue;
        struct conv_shape s;
        conv_shape_of(mi, l, mi->n_max, &s);
        if (!conv_se_pays(&s)) continue;
        if (conv_se_scratch_floats(&s) > need) need = conv_se_scratch_floats(&s);
        if (conv_se_part_floats(&s) > shared) shared = conv_se_part_floats(&s);
        if ((size_t)mi->n_max * s.C > ones) ones = (size_t)mi->n_max * s.C;
    }
    for (int i = 0; i < m->n_layers; i++) { /* a batch-1 dense forward's chunk sums (the fused update) */
        const struct layer *l = &m->layers[i];
        if (l->op != OP_DENSE || mi->n_max != 1) continue;
        const size_t k = (size_t)dense1_chunks(l->a.dense.IN) * l->a.dense.OUT;
        if (k > shared) shared = k;
    }
    if (mi->n_max == 1 && exec_dense1_chain(m)) { /* exec_dense1_step's chunk sums and loss copies */
        if (exec_dense1_shared_floats(m) > shared) shared = exec_dense1_shared_floats(m);
        if (exec_dense1_scratch_floats(m) > need) need = exec_dense1_scratch_floats(m);
    }
    for (int i = 0; i < m->n_layers; i++) { /* a depthwise weight gradient in its BatchNorm's stream */
        const struct layer *l = &m->layers[i];
        if (l->op != OP_DWCONV) continue;
        struct conv_shape s;
        conv_shape_of(mi, l, mi->n_max, &s);
        /* Or in row-chunk parts: a smaller batch has no more chunks (the same channel blocks, fewer rows). */
        if (dwconv_params_row_chunks(&s) && dw_part_off(&s) + dwconv_params_part_floats(&s) > shared)
            shared = dw_part_off(&s) + dwconv_params_part_floats(&s);
        if (!dwconv_bn_fusable(&s)) continue;
        const size_t k = dw_part_off(&s) + dwconv_bn_params_part_floats(&s);
        if (k > shared) shared = k;
        const size_t ring_end = dw_bn_ring_off(&s) + dwconv_bn_dout_ring_floats(&s);
        if (ring_end > need) need = ring_end;
        if (dwconv_forward_bn_in_scratch_floats(&s) > need) need = dwconv_forward_bn_in_scratch_floats(&s);
    }
    for (int i = 0; i < m->n_layers; i++) { /* BatchNorm's chunk sums (sync BN's 2·C sums fit in them) */
        const struct tensor *t = &m->tensors[m->layers[i].in];
        if (m->layers[i].op != OP_BN) continue;
        const size_t k = 2 * bn_chunk_doubles((size_t)mi->n_max * t->h * t->w, t->c);
        if (k > shared) shared = k;
    }
    mi->scratch_floats = tb_align16(need);
    mi->scratch = arena_alloc(mi->scratch_floats * (size_t)r->nth);
    mi->shared_floats = tb_align16(shared);
    mi->shared = arena_alloc(mi->shared_floats);
    mi->ones_floats = tb_align16(ones ? ones : 1);
    mi->ones = arena_alloc(mi->ones_floats);
    mi->bn_coef = arena_alloc(coef);
    if (!mi->scratch || !mi->shared || !mi->ones || !mi->bn_coef) return TB_ENOMEM;
    for (size_t i = 0; i < mi->ones_floats; i++) mi->ones[i] = 1.0f;
    /* Tuning wrote garbage into the gradients: start clean. */
    if (mi->grads && !tune_from) memset(mi->grads, 0, m->n_params * sizeof(float));
    return TB_OK;
}

void exec_release(struct model_inst *mi)
{
    if (mi->ls)
        for (int i = 0; i < mi->m->n_layers; i++) conv_fft_plan_destroy(mi->ls[i].plan);
    free(mi->ls);
    mi->ls = NULL;
    arena_free(mi->scratch);
    mi->scratch = NULL;
    arena_free(mi->shared);
    mi->shared = NULL;
    arena_free(mi->ones);
    mi->ones = NULL;
    arena_free(mi->bn_coef);
    mi->bn_coef = NULL;
}

void exec_share_prepared(struct model_inst *dst, const struct model_inst *src)
{
    dst->scratch = src->scratch;
    dst->scratch_floats = src->scratch_floats;
    dst->shared = src->shared;
    dst->shared_floats = src->shared_floats;
    dst->ones = src->ones;
    dst->ones_floats = src->ones_floats;
    dst->bn_coef = src->bn_coef;
    dst->ls = src->ls;
}

void exec_algos(const struct model_inst *mi, int *algos)
{
    for (int i = 0; i < mi->m->n_layers; i++) algos[i] = mi->ls ? mi->ls[i].algo : -1;
}
