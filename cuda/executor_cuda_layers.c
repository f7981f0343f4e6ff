/* executor_cuda_layers.c — the EfficientNet layer kinds on the cuda device: one ops_effnet.h launcher per
 * layer, forward and backward, mapped from core/exec.c's layer_forward / layer_backward; and the input layer.
 * Mixed precision (e->params16 set): the same mapping onto the _bf16 or _fp16 launchers (PICK), activations
 * and their gradients 2-byte at the byte offsets of tb_cuda_bf16_layout, the GEMM convs reading the weights'
 * 2-byte copy.
 *
 * One of the cpu's layer-pair fusions runs here: a training BatchNorm(+SiLU) whose only reader is a depthwise
 * takes its statistics alone, and the depthwise applies them as it loads its input (forward and weight
 * gradient), so the normalised tensor is never written or read (tb_cuda_bn_dw_pairs). The others (BN statistics
 * in the conv before, SE pool in the BN, SE scale in the projection, dwconv backward with the BN's) do not run
 * here yet. Backward takes exec.c's rule and its shortcut:
 * at an input gradient's last reader it is overwritten (acc 0) where the layer's kernel writes every element,
 * else zeroed there and accumulated into (tb_cuda_prepare_input_grads).
 * Errors: a positive launcher return is a cudaError_t (turned into a message here), a negative one is a
 * tb status already recorded (a failed tb_cublas_sgemm).
 */
#include "executor_cuda_layers.h"

#include "layout.h"
#include "ops_dense.h"
#include "ops_effnet.h"
#include "status.h"

#include <string.h>

/* Returns from the enclosing function when launcher call `r` failed, with its message. */
#define CK(r, what)                                                                            \
    do {                                                                                       \
        const int ck_ = (r);                                                                   \
        if (ck_ > 0) return tb_cuda_fail((cudaError_t)ck_, what, __FILE__, __LINE__);         \
        if (ck_ < 0) return ck_;                                                               \
    } while (0)

/* The fp32 launcher f, or its 2-byte twin (f_bf16, f_fp16) with the same arguments, by the executor's
 * precision. */
#define PICK(f, ...) (e->params16 ? TB_CU_HALF(e, f, __VA_ARGS__) : f(__VA_ARGS__))

void *tb_cuda_act(const struct cu_env *e, const struct cu_acts *a, int t)
{
    if (a->off) return (char *)a->acts + a->off[t];
    const struct tensor *x = &e->m->tensors[t];
    /* Saved per-channel data (BatchNorm's μ, rstd) lives after all per-sample data, as in the cpu arena. */
    if (x->fixed) return a->acts + e->m->unit_floats * (size_t)a->n_max + x->fixed_off;
    return a->acts + x->unit_off * (size_t)a->n_max;
}

void *tb_cuda_dact(const struct cu_env *e, const struct cu_acts *a, int t)
{
    if (a->doff) return (char *)a->dacts + a->doff[t];
    if (a->off) return (char *)a->dacts + a->off[t];
    return a->dacts + e->m->tensors[t].unit_off * (size_t)a->n_max;
}

int tb_cuda_input_layer(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n, int training,
                        long first_index, long step)
{
    const struct model *m = e->m;
    void *out = tb_cuda_act(e, a, l->out);
    const struct tensor *src = &m->tensors[l->in], *dst = &m->tensors[l->out];
    const int flat = dst->h == 1 && dst->w == 1 && dst->per_sample == src->per_sample;
    const int augment = training && (l->a.input.pad > 0 || l->a.input.flip);
    const int C = flat ? src->c : dst->c;
    float scale[4] = {0}, shift[4] = {0};
    for (int k = 0; k < C; k++) {
        scale[k] = l->a.input.scale / l->a.input.std[k]; /* input_affine (exec_priv.h) */
        shift[k] = -l->a.input.shift[k] / l->a.input.std[k];
    }
    if (flat || (dst->h == src->h && dst->w == src->w && dst->c == src->c && !augment)) {
        const size_t total = (size_t)n * src->per_sample;
        if (e->params16) TB_CU_HALF(e, tb_cuda_input_affine, out, e->x, total, src->c, scale, shift, e->s);
        else tb_cuda_input_affine(out, e->x, total, src->c, scale, shift, e->s);
        TB_CU_LAUNCHED("input");
        return TB_OK;
    }
    struct tb_cuda_input in = {.SH = src->h, .SW = src->w, .SC = src->c, .H = dst->h, .W = dst->w, .C = C,
                               .augment = augment, .pad = l->a.input.pad, .flip = l->a.input.flip,
                               .seed = e->seed, .step = (uint64_t)step, .g0 = (uint64_t)first_index};
    memcpy(in.scale, scale, sizeof scale), memcpy(in.shift, shift, sizeof shift);
    CK(PICK(tb_cuda_input_forward, out, e->x, n, &in, e->s), "tb_cuda_input_forward");
    return TB_OK;
}

/* exec.c's conv_shape_of. */
static struct conv_shape shape_of(const struct model *m, const struct layer *l, int n)
{
    const struct tensor *ti = &m->tensors[l->in], *to = &m->tensors[l->out];
    return (struct conv_shape){.N = n, .H = ti->h, .W = ti->w, .C = ti->c, .OH = to->h, .OW = to->w, .OC = to->c,
                               .KH = l->a.conv.KH, .KW = l->a.conv.KW, .stride = l->a.conv.stride,
                               .pad = l->a.conv.pad, .groups = l->a.conv.groups};
}

static int is_1x1(const struct conv_shape *s)
{
    return s->groups == 1 && s->KH == 1 && s->KW == 1 && s->stride == 1 && s->pad == 0;
}

/* The direct kernels take the stem (3×3, 1 or 3 input channels) unless TB_CUDA_CONV_ALGO=im2col asks
 * for the GEMM path (an A-B run on one binary). */
static int use_direct(const struct conv_shape *s)
{
    return tb_cuda_conv_direct_fits(s) && !tb_cuda_env_is("TB_CUDA_CONV_ALGO", "im2col");
}

/* exec.c's drop_args: the same seed, step and layer id, so the device drops the cpu's elements. */
static struct tb_cuda_drop drop_of(const struct cu_env *e, const struct layer *l, long step)
{
    return (struct tb_cuda_drop){.seed = e->seed, .step = (uint64_t)step, .layer = l->a.drop.id, .p = l->a.drop.p};
}

int tb_cuda_effnet_op(enum op_kind op)
{
    switch (op) {
    case OP_SILU: case OP_SIGMOID: case OP_CONV: case OP_DWCONV: case OP_BN: case OP_GN: case OP_GAP:
    case OP_SE_SCALE: case OP_ADD: case OP_DROPOUT: return 1;
    default: return 0;
    }
}

int tb_cuda_effnet_layer_ok(const struct model *m, const struct layer *l, const char **why)
{
    *why = NULL;
    if (!tb_cuda_effnet_op(l->op)) return 0;
    /* Only the norms fuse an activation (SiLU) on this device; the cpu's other kernels ignore l->act,
     * so a model that set one elsewhere would mean something neither device runs. */
    if (l->act != ACT_NONE && !((l->op == OP_BN || l->op == OP_GN) && l->act == ACT_SILU))
        *why = "a fused activation on this layer kind";
    else if (l->op == OP_DWCONV && l->a.conv.groups != m->tensors[l->in].c)
        *why = "depthwise with a channel multiplier";
    else if (l->op == OP_GN && (l->a.norm.groups < 1 || m->tensors[l->in].c % l->a.norm.groups))
        *why = "GroupNorm whose groups do not divide the channels";
    return *why == NULL;
}

int tb_cuda_bn_dw_pairs(const struct model *m, int *pair)
{
    for (int i = 0; i < m->n_layers; i++) pair[i] = -1;
    if (tb_cuda_env_is("TB_CUDA_BN_DW", "apart")) return 0;
    int pairs = 0;
    for (int d = 0; d < m->n_layers; d++) {
        const struct layer *ld = &m->layers[d];
        if (ld->op != OP_DWCONV || ld->in < 0) continue;
        int bn = -1, readers = 0;
        for (int i = 0; i < m->n_layers; i++) {
            const struct layer *l = &m->layers[i];
            readers += (l->in == ld->in) + (l->in2 >= 0 && l->in2 != l->in && l->in2 == ld->in);
            if (l->out == ld->in) bn = i;
        }
        /* The BatchNorm's one reader is this depthwise, whose launchers take a BatchNorm(+SiLU) on load. */
        if (bn < 0 || readers != 1 || m->layers[bn].op != OP_BN || !m->layers[bn].n_b ||
            !(m->layers[bn].act == ACT_NONE || m->layers[bn].act == ACT_SILU) || ld->act != ACT_NONE)
            continue;
        pair[bn] = d, pair[d] = bn, pairs++;
    }
    return pairs;
}

/* Whether BatchNorm li's training forward leaves its output to its depthwise reader: both in this pass. */
static int bn_leaves_output(const struct cu_env *e, int li)
{
    if (!e->bn_dw || e->fuse_l1 < 0) return 0;
    const int p = e->bn_dw[li];
    return p >= e->fuse_l0 && p < e->fuse_l1 && li >= e->fuse_l0 && li < e->fuse_l1;
}

/* The BatchNorm whose unwritten output depthwise li reads through it (its last training forward left it), or
 * -1: the depthwise reads its input as it is. */
static int dw_bn_on_load(const struct cu_env *e, int li)
{
    const int bn = e->bn_dw ? e->bn_dw[li] : -1;
    return bn >= 0 && e->bn_unwritten[bn] ? bn : -1;
}

/* The BatchNorm of layer bn as its depthwise reader applies it on load. */
static struct tb_cuda_bn_in bn_in_of(const struct cu_env *e, const struct cu_acts *a, const struct layer *bn)
{
    return (struct tb_cuda_bn_in){.save = tb_cuda_act(e, a, bn->save), .gamma = e->params + bn->w_off,
                                  .beta = e->params + bn->b_off, .silu = bn->act == ACT_SILU};
}

size_t tb_cuda_effnet_scratch_bytes(const struct model *m, int n)
{
    size_t need = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        const struct tensor *ti = &m->tensors[l->in];
        size_t b = 0;
        if (l->op == OP_CONV || l->op == OP_DWCONV) {
            const struct conv_shape s = shape_of(m, l, n);
            b = l->op == OP_DWCONV || s.groups > 1 ? tb_cuda_dwconv_scratch_bytes(&s)
                : is_1x1(&s)                      ? tb_cuda_conv1x1_scratch_bytes(&s)
                : use_direct(&s)                  ? tb_cuda_conv_direct_scratch_bytes(&s)
                                                  : tb_cuda_conv_im2col_scratch_bytes(&s);
            /* a direct conv whose input needs a gradient takes im2col's backward-data: its columns too; and
             * TB_CUDA_CONV_ALGO is read at each call, so a shape the direct kernels fit gets room for both */
            if (l->op == OP_CONV && !is_1x1(&s) && s.groups == 1 && tb_cuda_conv_direct_fits(&s)) {
                const size_t c = tb_cuda_conv_im2col_scratch_bytes(&s), d = tb_cuda_conv_direct_scratch_bytes(&s);
                b = c > b ? c : b;
                b = d > b ? d : b;
            }
        } else if (l->op == OP_BN) {
            b = tb_cuda_bn_scratch_bytes((size_t)n * ti->h * ti->w, ti->c);
        } else if (l->op == OP_GN) {
            b = tb_cuda_gn_scratch_bytes(n, (size_t)ti->h * ti->w, ti->c);
        }
        if (b > need) need = b;
    }
    return need;
}

int tb_cuda_effnet_forward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n,
                           long first_index, long step, int training)
{
    const struct model *m = e->m;
    const struct tensor *ti = &m->tensors[l->in], *to = &m->tensors[l->out];
    const void *in = tb_cuda_act(e, a, l->in);
    void *out = tb_cuda_act(e, a, l->out);
    const float *w = e->params + l->w_off, *b = l->n_b ? e->params + l->b_off : NULL;
    const void *w16 = e->params16 ? e->params16 + l->w_off : NULL; /* the GEMM convs' operand */
    const size_t total = (size_t)n * to->per_sample, HW = (size_t)ti->h * ti->w;
    void *st = e->s;
    switch (l->op) {
    case OP_SILU: CK(PICK(tb_cuda_silu_forward, out, in, total, st), "tb_cuda_silu_forward"); return TB_OK;
    case OP_SIGMOID: CK(PICK(tb_cuda_sigmoid_forward, out, in, total, st), "tb_cuda_sigmoid_forward"); return TB_OK;
    case OP_CONV: {
        const struct conv_shape s = shape_of(m, l, n);
        if (s.groups > 1) CK(PICK(tb_cuda_gconv_forward, out, in, w, b, &s, st), "tb_cuda_gconv_forward");
        else if (is_1x1(&s) && w16)
            CK(TB_CU_HALF(e, tb_cuda_conv1x1_forward, e->blas, out, in, w16, b, &s, st),
               "tb_cuda_conv1x1_forward (2-byte)");
        else if (is_1x1(&s)) CK(tb_cuda_conv1x1_forward(e->blas, out, in, w, b, &s, st), "tb_cuda_conv1x1_forward");
        else if (use_direct(&s) && w16)
            CK(TB_CU_HALF(e, tb_cuda_conv_direct_forward, out, in, w16, b, &s, st),
               "tb_cuda_conv_direct_forward (2-byte)");
        else if (use_direct(&s)) CK(tb_cuda_conv_direct_forward(out, in, w, b, &s, st), "tb_cuda_conv_direct_forward");
        else if (w16)
            CK(TB_CU_HALF(e, tb_cuda_conv_im2col_forward, e->blas, out, in, w16, b, &s, e->scratch, st),
               "tb_cuda_conv_im2col_forward (2-byte)");
        else CK(tb_cuda_conv_im2col_forward(e->blas, out, in, w, b, &s, e->scratch, st), "tb_cuda_conv_im2col_forward");
        return TB_OK;
    }
    case OP_DWCONV: {
        const struct conv_shape s = shape_of(m, l, n);
        const int bn = training ? dw_bn_on_load(e, (int)(l - m->layers)) : -1;
        if (bn >= 0) { /* its BatchNorm's input, normalised as it is loaded */
            const struct tb_cuda_bn_in bi = bn_in_of(e, a, &m->layers[bn]);
            CK(PICK(tb_cuda_dwconv_forward, out, tb_cuda_act(e, a, m->layers[bn].in), w, b, &bi, 0, &s, st),
               "tb_cuda_dwconv_forward (BatchNorm on load)");
        } else {
            CK(PICK(tb_cuda_dwconv_forward, out, in, w, b, NULL, 0, &s, st), "tb_cuda_dwconv_forward");
        }
        return TB_OK;
    }
    case OP_BN: {
        const size_t M = (size_t)n * HW;
        /* running_var is its own param_entry, starting on a 16-float boundary (exec.c's layout). */
        float *rm = e->buffers + l->buf_off, *rv = rm + tb_align16((size_t)ti->c);
        const int silu = l->act == ACT_SILU;
        /* fused with its depthwise reader: the statistics alone, the output never written */
        const int li = (int)(l - m->layers), leave = training && bn_leaves_output(e, li);
        void *y = leave ? NULL : out;
        if (training && e->bn_dw) e->bn_unwritten[li] = (unsigned char)leave;
        if (training)
            CK(PICK(tb_cuda_bn_forward_train, y, tb_cuda_act(e, a, l->save), rm, rv, in, w, b, M, ti->c,
                    l->a.norm.eps, l->a.norm.momentum, silu, e->scratch, st),
               "tb_cuda_bn_forward_train");
        else
            CK(PICK(tb_cuda_bn_forward_eval, out, in, rm, rv, w, b, M, ti->c, l->a.norm.eps, silu, st),
               "tb_cuda_bn_forward_eval");
        return TB_OK;
    }
    case OP_GN: /* no running statistics: the same in training and evaluation, as on the cpu */
        CK(PICK(tb_cuda_gn_forward, out, tb_cuda_act(e, a, l->save), in, w, b, n, HW, ti->c, l->a.norm.groups,
                l->a.norm.eps, l->act == ACT_SILU, st),
           "tb_cuda_gn_forward");
        return TB_OK;
    case OP_GAP: CK(PICK(tb_cuda_gap_forward, out, in, n, HW, ti->c, st), "tb_cuda_gap_forward"); return TB_OK;
    case OP_SE_SCALE:
        CK(PICK(tb_cuda_se_scale_forward, out, in, tb_cuda_act(e, a, l->in2), n, HW, ti->c, st),
           "tb_cuda_se_scale_forward");
        return TB_OK;
    case OP_ADD: /* drop-connect only in training, as exec.c: the identity key otherwise */
        if (training && l->a.drop.p > 0.0f) {
            const struct tb_cuda_drop d = drop_of(e, l, step);
            CK(PICK(tb_cuda_dropconnect_add_forward, out, in, tb_cuda_act(e, a, l->in2), n, to->per_sample,
                    (uint64_t)first_index, &d, st),
               "tb_cuda_dropconnect_add_forward");
        } else {
            CK(PICK(tb_cuda_add_forward, out, in, tb_cuda_act(e, a, l->in2), total, st), "tb_cuda_add_forward");
        }
        return TB_OK;
    case OP_DROPOUT:
        if (training && l->a.drop.p > 0.0f) {
            const struct tb_cuda_drop d = drop_of(e, l, step);
            CK(PICK(tb_cuda_dropout_forward, out, in, n, to->per_sample, (uint64_t)first_index, &d, st),
               "tb_cuda_dropout_forward");
        } else {
            const size_t elem = e->params16 ? 2 : sizeof(float);
            TB_CU(cudaMemcpyAsync(out, in, total * elem, cudaMemcpyDeviceToDevice, e->s));
        }
        return TB_OK;
    default:
        return tb_error_set(TB_EUNSUPPORTED, "cuda: layer kind %s is not implemented on this device yet",
                            model_op_name(l->op));
    }
}

/* exec.c's overwrite-instead-of-zero shortcut: a gradient's last reader (in forward order) runs the first
 * backward that writes it, so where that layer writes every element through a kernel's acc argument (or a
 * copy) it may write with acc = 0, and the memset before it and the read of zeros go. Bit 0: l->in, bit 1:
 * l->in2. The SE scale's gate gradient (N·C, always accumulated by its kernel) stays zeroed.
 * TB_CUDA_GRAD_ZERO=memset turns the shortcut off (an A-B run). */
static int overwrite_mask(const struct model *m, const struct layer *l, int li)
{
    if (tb_cuda_env_is("TB_CUDA_GRAD_ZERO", "memset") || l->in2 == l->in) return 0;
    const struct tensor *ti = &m->tensors[l->in], *t2 = l->in2 >= 0 ? &m->tensors[l->in2] : NULL;
    const int last = (ti->needs_grad && ti->last_reader == li ? 1 : 0) |
                     (t2 && t2->needs_grad && t2->last_reader == li ? 2 : 0);
    switch (l->op) {
    case OP_CONV: case OP_DWCONV: case OP_BN: case OP_GN: case OP_SE_SCALE: return last & 1;
    case OP_ADD: return last; /* the shortcut's by a copy, the branch's by a copy or drop-connect's acc 0 */
    default: return 0;
    }
}

int tb_cuda_prepare_input_grads(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int li, int n,
                                size_t elem)
{
    const struct model *m = e->m;
    const struct tensor *ti = &m->tensors[l->in];
    const int over = tb_cuda_effnet_op(l->op) ? overwrite_mask(m, l, li) : 0;
    if (ti->needs_grad && ti->last_reader == li && !(over & 1))
        TB_CU(cudaMemsetAsync(tb_cuda_dact(e, a, l->in), 0, (size_t)n * ti->per_sample * elem, e->s));
    if (l->in2 >= 0 && l->in2 != l->in) {
        const struct tensor *t2 = &m->tensors[l->in2];
        if (t2->needs_grad && t2->last_reader == li && !(over & 2))
            TB_CU(cudaMemsetAsync(tb_cuda_dact(e, a, l->in2), 0, (size_t)n * t2->per_sample * elem, e->s));
    }
    return over;
}

int tb_cuda_effnet_backward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n,
                            long first_index, long step, int over)
{
    const struct model *m = e->m;
    const struct tensor *ti = &m->tensors[l->in], *to = &m->tensors[l->out];
    const void *in = tb_cuda_act(e, a, l->in), *out = tb_cuda_act(e, a, l->out), *dout = tb_cuda_dact(e, a, l->out);
    void *din = ti->needs_grad ? tb_cuda_dact(e, a, l->in) : NULL;
    const float *w = e->params + l->w_off, *b = l->n_b ? e->params + l->b_off : NULL;
    const void *w16 = e->params16 ? e->params16 + l->w_off : NULL;
    float *dw = e->grads + l->w_off, *db = l->n_b ? e->grads + l->b_off : NULL;
    const size_t total = (size_t)n * to->per_sample, HW = (size_t)ti->h * ti->w;
    const size_t elem = e->params16 ? 2 : sizeof(float);
    const int acc = !(over & 1); /* l->in's gradient: accumulate, or overwrite (tb_cuda_prepare_input_grads) */
    void *st = e->s;
    switch (l->op) {
    case OP_SILU:
        if (din) CK(PICK(tb_cuda_silu_backward, din, dout, in, total, st), "tb_cuda_silu_backward");
        return TB_OK;
    case OP_SIGMOID:
        if (din) CK(PICK(tb_cuda_sigmoid_backward, din, dout, out, total, st), "tb_cuda_sigmoid_backward");
        return TB_OK;
    case OP_CONV: {
        const struct conv_shape s = shape_of(m, l, n);
        if (s.groups > 1) {
            if (din) CK(PICK(tb_cuda_gconv_backward_data, din, dout, w, &s, acc, st), "tb_cuda_gconv_backward_data");
            CK(PICK(tb_cuda_gconv_backward_params, dw, db, in, dout, &s, e->scratch, st),
               "tb_cuda_gconv_backward_params");
        } else if (is_1x1(&s) && w16) {
            if (din)
                CK(TB_CU_HALF(e, tb_cuda_conv1x1_backward_data, e->blas, din, dout, w16, &s, acc),
                   "tb_cuda_conv1x1_backward_data (2-byte)");
            CK(TB_CU_HALF(e, tb_cuda_conv1x1_backward_params, e->blas, dw, db, in, dout, &s, e->scratch, st),
               "tb_cuda_conv1x1_backward_params (2-byte)");
        } else if (is_1x1(&s)) {
            if (din) CK(tb_cuda_conv1x1_backward_data(e->blas, din, dout, w, &s, acc), "tb_cuda_conv1x1_backward_data");
            CK(tb_cuda_conv1x1_backward_params(e->blas, dw, db, in, dout, &s, e->scratch, st),
               "tb_cuda_conv1x1_backward_params");
        } else { /* k×k: backward-data by im2col's columns (the direct kernels have none; the stem needs none),
                  * then the weight gradient, direct or from the columns; both use the scratch, one stream orders
                  * them */
            if (din && w16)
                CK(TB_CU_HALF(e, tb_cuda_conv_im2col_backward_data, e->blas, din, dout, w16, &s, acc, e->scratch, st),
                   "tb_cuda_conv_im2col_backward_data (2-byte)");
            else if (din)
                CK(tb_cuda_conv_im2col_backward_data(e->blas, din, dout, w, &s, acc, e->scratch, st),
                   "tb_cuda_conv_im2col_backward_data");
            if (use_direct(&s))
                CK(PICK(tb_cuda_conv_direct_backward_params, dw, db, in, dout, &s, e->scratch, st),
                   "tb_cuda_conv_direct_backward_params");
            else if (w16)
                CK(TB_CU_HALF(e, tb_cuda_conv_im2col_backward_params, e->blas, dw, db, in, dout, &s, e->scratch, st),
                   "tb_cuda_conv_im2col_backward_params (2-byte)");
            else
                CK(tb_cuda_conv_im2col_backward_params(e->blas, dw, db, in, dout, &s, e->scratch, st),
                   "tb_cuda_conv_im2col_backward_params");
        }
        return TB_OK;
    }
    case OP_DWCONV: {
        const struct conv_shape s = shape_of(m, l, n);
        if (din) CK(PICK(tb_cuda_dwconv_backward_data, din, dout, w, &s, acc, st), "tb_cuda_dwconv_backward_data");
        const int bn = dw_bn_on_load(e, (int)(l - m->layers));
        if (bn >= 0) { /* the forward never wrote its input: recomputed from the BatchNorm's as it is loaded */
            const struct tb_cuda_bn_in bi = bn_in_of(e, a, &m->layers[bn]);
            CK(PICK(tb_cuda_dwconv_backward_params, dw, db, tb_cuda_act(e, a, m->layers[bn].in), dout, &bi, &s,
                    e->scratch, st),
               "tb_cuda_dwconv_backward_params (BatchNorm on load)");
        } else {
            CK(PICK(tb_cuda_dwconv_backward_params, dw, db, in, dout, NULL, &s, e->scratch, st),
               "tb_cuda_dwconv_backward_params");
        }
        return TB_OK;
    }
    case OP_BN:
        /* dz = dout·silu'(z) recomputed from x inside: dout stays as it is (the cpu overwrites it). */
        CK(PICK(tb_cuda_bn_backward, din, dw, db, dout, in, tb_cuda_act(e, a, l->save), w, b, (size_t)n * HW, ti->c,
                l->act == ACT_SILU, acc, e->scratch, st),
           "tb_cuda_bn_backward");
        return TB_OK;
    case OP_GN:
        CK(PICK(tb_cuda_gn_backward, din, dw, db, dout, in, tb_cuda_act(e, a, l->save), w, b, n, HW, ti->c,
                l->a.norm.groups, l->act == ACT_SILU, acc, e->scratch, st),
           "tb_cuda_gn_backward");
        return TB_OK;
    case OP_GAP:
        if (din) CK(PICK(tb_cuda_gap_backward, din, dout, n, HW, ti->c, st), "tb_cuda_gap_backward");
        return TB_OK;
    case OP_SE_SCALE: {
        void *dscale = m->tensors[l->in2].needs_grad ? tb_cuda_dact(e, a, l->in2) : NULL;
        if (din || dscale)
            CK(PICK(tb_cuda_se_scale_backward, din, dscale, dout, in, tb_cuda_act(e, a, l->in2), n, HW, ti->c, acc, st),
               "tb_cuda_se_scale_backward");
        return TB_OK;
    }
    case OP_ADD: {
        void *d2 = m->tensors[l->in2].needs_grad ? tb_cuda_dact(e, a, l->in2) : NULL;
        /* The shortcut (in) takes dout as is; the branch (in2) through the drop-connect mask, which the
         * cpu applies whenever p > 0 (a backward is always a training pass). */
        if (din && !acc) TB_CU(cudaMemcpyAsync(din, dout, total * elem, cudaMemcpyDeviceToDevice, e->s));
        else if (din) CK(PICK(tb_cuda_add_backward, din, NULL, dout, total, st), "tb_cuda_add_backward");
        if (d2 && l->a.drop.p > 0.0f) {
            const struct tb_cuda_drop d = drop_of(e, l, step);
            CK(PICK(tb_cuda_dropconnect_backward, d2, dout, n, to->per_sample, (uint64_t)first_index, &d,
                    !(over & 2), st),
               "tb_cuda_dropconnect_backward");
        } else if (d2 && (over & 2)) {
            TB_CU(cudaMemcpyAsync(d2, dout, total * elem, cudaMemcpyDeviceToDevice, e->s));
        } else if (d2) {
            CK(PICK(tb_cuda_add_backward, NULL, d2, dout, total, st), "tb_cuda_add_backward");
        }
        return TB_OK;
    }
    case OP_DROPOUT:
        if (!din) return TB_OK;
        if (l->a.drop.p > 0.0f) {
            const struct tb_cuda_drop d = drop_of(e, l, step);
            CK(PICK(tb_cuda_dropout_backward, din, dout, n, to->per_sample, (uint64_t)first_index, &d, st),
               "tb_cuda_dropout_backward");
        } else {
            CK(PICK(tb_cuda_add_backward, din, NULL, dout, total, st), "tb_cuda_add_backward");
        }
        return TB_OK;
    default:
        return tb_error_set(TB_EUNSUPPORTED, "cuda: layer kind %s is not implemented on this device yet",
                            model_op_name(l->op));
    }
}
