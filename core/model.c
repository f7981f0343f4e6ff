/* model.c — building and planning a model: tensors, layers, parameter table, offsets. */
#include "model.h"

#include "layout.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

#define GROW(ptr, n, cap)                                                              \
    do {                                                                               \
        if ((n) == (cap)) {                                                            \
            int nc = (cap) ? 2 * (cap) : 64;                                           \
            void *np = realloc((ptr), (size_t)nc * sizeof *(ptr));                     \
            TB_ASSERT(np != NULL);                                                     \
            (ptr) = np;                                                                \
            (cap) = nc;                                                                \
        }                                                                              \
    } while (0)

int model_init(struct model *m, const char *name, int h, int w, int c, int n_classes)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->in_h = h, m->in_w = w, m->in_c = c, m->n_classes = n_classes;
    m->input = model_add_tensor(m, h, w, c);
    m->tensors[m->input].needs_grad = 0;
    m->logits = -1;
    m->n_blocks = 1;
    return TB_OK;
}

void model_free(struct model *m)
{
    free(m->tensors);
    free(m->layers);
    free(m->params);
    memset(m, 0, sizeof *m);
}

int model_add_tensor(struct model *m, int h, int w, int c)
{
    GROW(m->tensors, m->n_tensors, m->cap_tensors);
    struct tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->h = h, t->w = w, t->c = c;
    t->per_sample = (size_t)h * w * c;
    t->needs_grad = 1;
    t->last_reader = -1;
    return m->n_tensors++;
}

int model_add_layer(struct model *m, enum op_kind op, const char *name, int in, int in2, int h, int w, int c)
{
    TB_ASSERT(in >= 0 && in < m->n_tensors && in2 < m->n_tensors);
    int out = model_add_tensor(m, h, w, c);
    GROW(m->layers, m->n_layers, m->cap_layers);
    struct layer *l = &m->layers[m->n_layers];
    memset(l, 0, sizeof *l);
    l->op = op;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->in = in, l->in2 = in2, l->out = out;
    l->block = m->cur_block;
    l->save = -1;
    l->algo = -1;
    /* Nothing upstream of the input conversion is trainable: its output needs no gradient. */
    if (op == OP_INPUT) m->tensors[out].needs_grad = 0;
    return m->n_layers++;
}

size_t model_add_param(struct model *m, int layer, const char *name, int kind, int ndim, const int *dims)
{
    TB_ASSERT(ndim >= 0 && ndim <= 4);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)dims[i];
    GROW(m->params, m->n_entries, m->cap_entries);
    struct param_entry *e = &m->params[m->n_entries++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->n = n, e->ndim = ndim, e->layer = layer, e->kind = kind;
    for (int i = 0; i < ndim; i++) e->dims[i] = dims[i];
    /* Each tensor starts on a 64-byte boundary, so per-tensor kernels see aligned pointers. */
    if (kind == PARAM_BUFFER || kind == PARAM_COUNTER) {
        e->off = m->n_buffers;
        m->n_buffers += tb_align16(n);
    } else {
        e->off = m->n_params;
        m->n_params += tb_align16(n);
    }
    return e->off;
}

void model_add_save(struct model *m, int layer, size_t per_sample, size_t fixed)
{
    int t = model_add_tensor(m, 1, 1, 1);
    m->tensors[t].per_sample = per_sample;
    m->tensors[t].fixed = fixed;
    m->tensors[t].needs_grad = 0;
    m->layers[layer].save = t;
}

void model_begin_block(struct model *m)
{
    m->cur_block = m->n_blocks++;
}

int model_finalize(struct model *m)
{
    if (m->n_layers == 0 || m->layers[m->n_layers - 1].op != OP_SOFTMAX_CE)
        return tb_error_set(TB_EINVAL, "model %s: the last layer must be the softmax cross-entropy", m->name);
    size_t unit = 0, fixed = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        struct tensor *x = &m->tensors[t];
        x->unit_off = unit;
        unit += tb_align16(x->per_sample);
        x->fixed_off = fixed;
        fixed += tb_align16(x->fixed);
        x->last_reader = -1;
        x->n_readers = 0;
    }
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        m->tensors[l->in].last_reader = i;
        m->tensors[l->in].n_readers++;
        if (l->in2 >= 0) {
            m->tensors[l->in2].last_reader = i;
            m->tensors[l->in2].n_readers++;
        }
    }
    m->unit_floats = unit;
    m->fixed_floats = fixed;
    m->logits = m->layers[m->n_layers - 1].in;
    return TB_OK;
}

size_t model_act_floats(const struct model *m, int n_max)
{
    return m->unit_floats * (size_t)n_max + m->fixed_floats;
}

size_t model_count_params(const struct model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_entries; i++)
        if (m->params[i].kind != PARAM_BUFFER && m->params[i].kind != PARAM_COUNTER) n += m->params[i].n;
    return n;
}

double model_train_flops_per_sample(const struct model *m)
{
    double f = 0.0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        f += l->flops;
        if (m->tensors[l->in].needs_grad) f += l->flops;
        if (l->n_w) f += l->flops;
    }
    return f;
}

const char *model_op_name(enum op_kind op)
{
    static const char *const names[OP_COUNT] = {"input", "dense", "relu", "silu", "sigmoid", "conv", "dwconv",
                                                "batchnorm", "groupnorm", "avgpool", "se_scale", "add",
                                                "dropout", "softmax_ce"};
    return (unsigned)op < OP_COUNT ? names[op] : "?";
}

static void fmt_count(char *buf, size_t n, double v)
{
    if (v >= 1e9) snprintf(buf, n, "%.2fG", v * 1e-9);
    else if (v >= 1e6) snprintf(buf, n, "%.2fM", v * 1e-6);
    else if (v >= 1e3) snprintf(buf, n, "%.1fk", v * 1e-3);
    else snprintf(buf, n, "%.0f", v);
}

void model_describe(const struct model *m, const int *algos, const char *const *algo_names, FILE *f)
{
    fprintf(f, "%-4s %-30s %-10s %-16s %10s %10s %10s %s\n", "#", "layer", "op", "output (H,W,C)", "params",
            "fwd FLOPs", "act bytes", algos ? "algo" : "");
    double tp = 0, tf = 0, ta = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        const struct tensor *t = &m->tensors[l->out];
        char shape[32], p[16], fl[16], ab[16];
        snprintf(shape, sizeof shape, "%dx%dx%d", t->h, t->w, t->c);
        const double np = (double)(l->n_w + l->n_b);
        const double act = (double)t->per_sample * 4.0;
        fmt_count(p, sizeof p, np);
        fmt_count(fl, sizeof fl, l->flops);
        fmt_count(ab, sizeof ab, act);
        const char *an = "";
        if (algos && algos[i] >= 0 && algo_names) an = algo_names[algos[i]];
        fprintf(f, "%-4d %-30.30s %-10s %-16s %10s %10s %10s %s\n", i, l->name, model_op_name(l->op), shape, p, fl,
                ab, an);
        tp += np, tf += l->flops, ta += act;
    }
    char fl[16], ab[16], tr[16];
    fmt_count(fl, sizeof fl, tf);
    fmt_count(ab, sizeof ab, ta);
    fmt_count(tr, sizeof tr, model_train_flops_per_sample(m));
    fprintf(f, "total: %zu trainable parameters, %s forward FLOPs and %s training FLOPs per sample (2 FLOPs a "
               "multiply-add), %s activation bytes per sample, %d blocks\n",
            model_count_params(m), fl, tr, ab, m->n_blocks);
}

double model_train_bytes(const struct model *m, int n_max, int state_floats, int eval_n)
{
    const double params = (double)m->n_params * (2.0 + state_floats) + (double)m->n_buffers;
    const double acts = 2.0 * (double)model_act_floats(m, n_max) + (double)model_act_floats(m, eval_n);
    return 4.0 * (params + acts);
}
