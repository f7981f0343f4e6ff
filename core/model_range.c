/* model_range.c — layer ranges as plans of their own (see model_range.h). */
#include "model_range.h"

#include "exec.h"
#include "layout.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

/* The crossing tensors are exec's: it copies packed boundaries into its slots (exec_step.in_act). */
int model_boundary_tensors(const struct model *m, int split, int *ids, int max_ids)
{
    return exec_boundary_tensors(m, split, ids, max_ids);
}

size_t model_boundary_floats(const struct model *m, int split, int n, int grads)
{
    return exec_boundary_floats(m, split, n, grads);
}

size_t model_range_first_offset(const struct model *m, int split, int buffers)
{
    size_t best = buffers ? m->n_buffers : m->n_params;
    int last_layer = -1;
    size_t last_off = 0;
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        const int is_buf = e->kind == PARAM_BUFFER || e->kind == PARAM_COUNTER;
        if (is_buf != buffers) continue;
        TB_ASSERT(e->layer >= last_layer && (last_layer < 0 || e->off >= last_off));
        last_layer = e->layer, last_off = e->off;
        if (e->layer >= split && e->off < best) best = e->off;
    }
    return best;
}

void model_range_slice(const struct model *m, int l0, int l1, int buffers, size_t *a, size_t *b)
{
    *a = l0 == 0 ? 0 : model_range_first_offset(m, l0, buffers);
    *b = l1 == m->n_layers ? (buffers ? m->n_buffers : m->n_params) : model_range_first_offset(m, l1, buffers);
}

/* Marks in touched (n_tensors) the tensors a plan of layers [l0,l1) of src holds: outputs, inputs,
 * saved data and the tensors crossing either end. */
static void range_touched(const struct model *src, int l0, int l1, char *touched)
{
    for (int i = l0; i < l1; i++) {
        const struct layer *l = &src->layers[i];
        touched[l->out] = 1;
        if (l->op != OP_INPUT) touched[l->in] = 1; /* the uint8 input is read from the batch, not a slot */
        if (l->in2 >= 0) touched[l->in2] = 1;
        if (l->save >= 0) touched[l->save] = 1;
    }
    int ids[64];
    const int splits[2] = {l0, l1};
    for (int k = 0; k < 2; k++) {
        const int n = exec_boundary_tensors(src, splits[k], ids, 64);
        TB_ASSERT(n <= 64);
        for (int j = 0; j < n; j++) touched[ids[j]] = 1;
    }
}

size_t model_range_act_floats(const struct model *m, int l0, int l1, int n, char *work)
{
    memset(work, 0, (size_t)m->n_tensors);
    range_touched(m, l0, l1, work);
    size_t unit = 0, fixed = 0;
    for (int t = 0; t < m->n_tensors; t++)
        if (work[t]) unit += tb_align16(m->tensors[t].per_sample), fixed += tb_align16(m->tensors[t].fixed);
    return unit * (size_t)n + fixed;
}

int model_range_init(struct model *dst, const struct model *src, int l0, int l1)
{
    memset(dst, 0, sizeof *dst);
    *dst = *src;
    dst->tensors = malloc(sizeof *src->tensors * (size_t)src->n_tensors);
    char *touched = calloc((size_t)src->n_tensors, 1);
    if (!dst->tensors || !touched) {
        free(dst->tensors), free(touched);
        memset(dst, 0, sizeof *dst);
        return tb_error_set(TB_ENOMEM, "out of memory planning layers %d..%d of %s", l0, l1 - 1, src->name);
    }
    memcpy(dst->tensors, src->tensors, sizeof *src->tensors * (size_t)src->n_tensors);
    dst->cap_tensors = src->n_tensors;
    range_touched(src, l0, l1, touched);
    size_t unit = 0, fixed = 0;
    for (int t = 0; t < src->n_tensors; t++) {
        struct tensor *x = &dst->tensors[t];
        x->unit_off = 0, x->fixed_off = 0;
        if (!touched[t]) continue;
        x->unit_off = unit;
        unit += tb_align16(x->per_sample);
        x->fixed_off = fixed;
        fixed += tb_align16(x->fixed);
    }
    dst->unit_floats = unit;
    dst->fixed_floats = fixed;
    free(touched);
    return TB_OK;
}

void model_range_free(struct model *m)
{
    free(m->tensors);
    memset(m, 0, sizeof *m);
}
