/* executor_cuda_bf16.c — the cuda executor's mixed precision: the 2-byte activation layout and the dense chain's
 * layers on bf16 or fp16 activations (see executor_cuda_bf16.h). GEMMs go through tb_cublas_gemm_ex: 2-byte
 * weights (e->params16) and activations, fp32 accumulation, 2-byte outputs except the logits (fp32, which the
 * loss reads as autocast's fp32 cross-entropy does) and the weight gradients (fp32, straight into e->grads). */
#include "executor_cuda_bf16.h"

#include "ops_dense.h"
#include "status.h"

/* Whether tensor t is some layer's saved data (BatchNorm's μ/rstd, GroupNorm's statistics): fp32. */
static int is_saved(const struct model *m, int t)
{
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].save == t) return 1;
    return 0;
}

int tb_cuda_bf16_model_ok(const struct model *m, const char **why)
{
    *why = NULL;
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        /* The logits stay fp32: a dense layer writes them from its fp32 accumulator. */
        if (l->out == m->logits && (l->op != OP_DENSE || l->act != ACT_NONE))
            *why = "the logits must come from a dense layer without an activation";
    }
    return *why == NULL;
}

size_t tb_cuda_bf16_layout(const struct model *m, int n_max, size_t *off)
{
    size_t bytes = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        const struct tensor *x = &m->tensors[t];
        const size_t elem = t == m->logits || is_saved(m, t) ? sizeof(float) : sizeof(uint16_t);
        const size_t n = x->fixed ? x->fixed : x->per_sample * (size_t)n_max; /* as tb_cuda_act reads it */
        off[t] = bytes;
        bytes += (n * elem + 255) & ~(size_t)255; /* aligned for cuBLAS's tensor-core kernels */
    }
    return bytes;
}

/* The dense GEMMs' operand types: bf16 or fp16 A and B; C fp32 (f32c: the logits, the weight gradients) or
 * the same 2-byte type. */
static enum tb_gemm_prec gemm_type(const struct cu_env *e, int f32c)
{
    if (e->fp16) return f32c ? TB_GEMM_FP16_F32C : TB_GEMM_FP16;
    return f32c ? TB_GEMM_BF16_F32C : TB_GEMM_BF16;
}

static int dense_forward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n)
{
    const int IN = l->a.dense.IN, OUT = l->a.dense.OUT, logits = l->out == e->m->logits;
    void *y = tb_cuda_act(e, a, l->out);
    /* Row-major y (n,OUT) = x (n,IN) · W (IN,OUT) as column-major yᵀ = Wᵀ xᵀ (executor_cuda.c's mapping). */
    const int st = tb_cublas_gemm_ex(e->blas, gemm_type(e, logits), 0, 0, OUT, n, IN, 1.0f,
                                     e->params16 + l->w_off, OUT, tb_cuda_act(e, a, l->in), IN, 0.0f, y, OUT);
    if (st != TB_OK) return st;
    const float *b = l->n_b ? e->params + l->b_off : NULL;
    const int relu = l->act == ACT_RELU;
    if (!b && !relu) return TB_OK;
    if (logits) tb_cuda_bias_act(y, b, n, OUT, relu, e->s);
    else TB_CU_HALF(e, tb_cuda_bias_act, y, b, n, OUT, relu, e->s);
    TB_CU_LAUNCHED("dense bias");
    return TB_OK;
}

static int dense_backward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n, void *din)
{
    const int IN = l->a.dense.IN, OUT = l->a.dense.OUT;
    void *dout = tb_cuda_dact(e, a, l->out);
    if (l->act == ACT_RELU) { /* never on the logits (tb_cuda_bf16_model_ok): y is bf16 */
        TB_CU_HALF(e, tb_cuda_relu_mask, dout, tb_cuda_act(e, a, l->out), (size_t)n * OUT, e->s);
        TB_CU_LAUNCHED("relu mask");
    }
    int st;
    /* din (n,IN) += dout (n,OUT) · Wᵀ; dW (IN,OUT) += xᵀ · dout in fp32 (executor_cuda.c's mappings). */
    if (din && (st = tb_cublas_gemm_ex(e->blas, gemm_type(e, 0), 1, 0, IN, n, OUT, 1.0f, e->params16 + l->w_off, OUT,
                                       dout, OUT, 1.0f, din, IN)) != TB_OK)
        return st;
    if ((st = tb_cublas_gemm_ex(e->blas, gemm_type(e, 1), 0, 1, OUT, IN, n, 1.0f, dout, OUT,
                                tb_cuda_act(e, a, l->in), IN, 1.0f, e->grads + l->w_off, OUT)) != TB_OK)
        return st;
    if (l->n_b) {
        TB_CU_HALF(e, tb_cuda_bias_grad, e->grads + l->b_off, dout, n, OUT, e->s);
        TB_CU_LAUNCHED("bias gradient");
    }
    return TB_OK;
}

int tb_cuda_bf16_forward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int n, int n_global,
                         int training, long first_index, long step)
{
    const struct model *m = e->m;
    switch (l->op) {
    case OP_INPUT: return tb_cuda_input_layer(e, a, l, n, training, first_index, step);
    case OP_DENSE: return dense_forward(e, a, l, n);
    case OP_RELU:
        TB_CU_HALF(e, tb_cuda_relu_forward, tb_cuda_act(e, a, l->out), tb_cuda_act(e, a, l->in),
                   (size_t)n * m->tensors[l->out].per_sample, e->s);
        TB_CU_LAUNCHED("relu");
        return TB_OK;
    case OP_SOFTMAX_CE:
        /* The loss gradient times the loss scale (fp16; 1 for bf16): its 2-byte values, and every gradient
         * after them, out of fp16's underflow; the update's check unscales the fp32 gradients. */
        TB_CU_HALF(e, tb_cuda_softmax_ce, e->losses, training ? tb_cuda_dact(e, a, l->in) : NULL, e->correct,
                   tb_cuda_act(e, a, l->in), e->labels, e->loss_scale / (float)n_global, n, m->tensors[l->in].c,
                   l->a.ce.smoothing, e->s);
        TB_CU_LAUNCHED("softmax_ce");
        return TB_OK;
    default: return tb_cuda_effnet_forward(e, a, l, n, first_index, step, training);
    }
}

int tb_cuda_bf16_backward(const struct cu_env *e, const struct cu_acts *a, const struct layer *l, int li, int n,
                          long first_index, long step)
{
    const struct model *m = e->m;
    if (l->op == OP_INPUT || l->op == OP_SOFTMAX_CE) return TB_OK; /* no gradient / seeded in the forward */
    const struct tensor *ti = &m->tensors[l->in];
    void *din = ti->needs_grad ? tb_cuda_dact(e, a, l->in) : NULL;
    /* Each input's gradient (2-byte elements) is overwritten or zeroed at its last reader, as the fp32 path. */
    const int over = tb_cuda_prepare_input_grads(e, a, l, li, n, 2);
    if (over < 0) return over;
    switch (l->op) {
    case OP_DENSE: return dense_backward(e, a, l, n, din);
    case OP_RELU:
        if (din) {
            TB_CU_HALF(e, tb_cuda_relu_backward, din, tb_cuda_dact(e, a, l->out), tb_cuda_act(e, a, l->out),
                       (size_t)n * m->tensors[l->out].per_sample, e->s);
            TB_CU_LAUNCHED("relu backward");
        }
        return TB_OK;
    default: return tb_cuda_effnet_backward(e, a, l, n, first_index, step, over);
    }
}
