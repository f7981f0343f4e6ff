/* exec_dense1_shape.c — which models exec_dense1_step runs (a dense chain) and the buffers it needs: pure
 * functions of the model, shared by exec_prepare (exec.c), which sizes the instance's buffers, and the
 * step itself (exec_dense1.c), so neither of those files calls the other's back. No state.
 */
#include "exec.h"
#include "exec_priv.h"

int exec_dense1_chain(const struct model *m)
{
    const int L = m->n_layers;
    if (L < 3) return 0;
    const struct layer *in = &m->layers[0], *ce = &m->layers[L - 1];
    if (in->op != OP_INPUT || in->in != m->input || ce->op != OP_SOFTMAX_CE) return 0;
    const struct tensor *src = &m->tensors[in->in], *dst = &m->tensors[in->out];
    if (dst->h != 1 || dst->w != 1 || dst->per_sample != src->per_sample || src->c != 1) return 0;
    if (in->a.input.pad > 0 || in->a.input.flip) return 0;
    int prev = in->out;
    for (int i = 1; i < L - 1; i++) {
        const struct layer *l = &m->layers[i];
        if (l->op != OP_DENSE || l->in != prev || (l->act != ACT_RELU && l->act != ACT_NONE)) return 0;
        prev = l->out;
    }
    return ce->in == prev && m->layers[L - 2].act == ACT_NONE;
}

size_t exec_dense1_shared_floats(const struct model *m)
{
    size_t n = 0;
    for (int i = 1; i < m->n_layers - 1; i++) n += dense1_part_floats(&m->layers[i]);
    return n;
}

size_t exec_dense1_scratch_floats(const struct model *m)
{
    return 2 * tb_align16((size_t)m->layers[m->n_layers - 2].a.dense.OUT) + 16;
}
