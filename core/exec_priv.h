/* exec_priv.h — small helpers the executor's files share (exec.c, exec_dense1.c); not a public API. */
#ifndef TB_EXEC_PRIV_H
#define TB_EXEC_PRIV_H

#include "exec.h"

/* Parameters and their gradients at canonical offset off: mi->params and mi->grads hold offsets from
 * mi->param_base on (a window of one layer's, decoded from half precision, or the whole arena when
 * param_base is 0). */
static inline float *exec_param(const struct model_inst *mi, size_t off) { return mi->params + (off - mi->param_base); }
static inline float *exec_grad(const struct model_inst *mi, size_t off) { return mi->grads + (off - mi->param_base); }

/* Waits for all nth threads (nothing to do alone). */
static inline void sync_barrier(const struct exec_sync *s, int nth)
{
    if (nth > 1 && s && s->barrier) s->barrier(s->ctx);
}

/* Thread ith's piece of the per-thread scratch (NULL when the instance has none). */
static inline float *scratch_of(const struct model_inst *mi, int ith)
{
    return mi->scratch ? mi->scratch + (size_t)ith * mi->scratch_floats : NULL;
}

#endif
