/* grad_layout.c — the cuda executor's gradient arena: gradients with disjoint lives share bytes
 * (grad_layout.h). Offsets are placed greedily, largest gradient first, each at the lowest 256-byte-aligned
 * offset clear of every placed gradient whose life overlaps its own (the usual interval-packing heuristic:
 * within a few percent of the most alive at once on EfficientNet, and never overlapping by construction). */
#include "grad_layout.h"

#include <stdlib.h>

#define ALIGN 256

int tb_cuda_grad_life(const struct model *m, int t, int *first, int *last)
{
    const struct tensor *x = &m->tensors[t];
    int producer = -1;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].out == t) producer = i;
    if (!x->needs_grad || x->last_reader < 0 || producer < 0) return 0;
    /* step k runs layer n_layers-1-k: the last reader writes first, the producer reads last */
    *first = m->n_layers - 1 - x->last_reader;
    *last = m->n_layers - 1 - producer;
    return 1;
}

struct item {
    int t, first, last;
    size_t bytes, off;
};

static int by_size(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->t - y->t; /* a fixed order: the same layout every run */
}

static int by_off(const void *a, const void *b)
{
    const struct item *const *x = a, *const *y = b;
    return (*x)->off < (*y)->off ? -1 : (*x)->off > (*y)->off;
}

size_t tb_cuda_grad_layout(const struct model *m, int n_max, int bf16, size_t *doff)
{
    struct item *it = calloc((size_t)m->n_tensors + 1, sizeof *it);
    const struct item **live = calloc((size_t)m->n_tensors + 1, sizeof *live);
    if (!it || !live) {
        free(it), free(live);
        return 0;
    }
    int n = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        doff[t] = 0; /* a tensor without a gradient: never read as one (any offset will do) */
        struct item *p = &it[n];
        if (!tb_cuda_grad_life(m, t, &p->first, &p->last)) continue;
        const size_t elem = bf16 && t != m->logits ? 2 : 4;
        p->t = t;
        p->bytes = (m->tensors[t].per_sample * (size_t)n_max * elem + ALIGN - 1) / ALIGN * ALIGN;
        n++;
    }
    qsort(it, (size_t)n, sizeof *it, by_size);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int j = 0; j < i; j++) /* placed gradients alive at some step of this one's life */
            if (it[j].first <= it[i].last && it[i].first <= it[j].last) live[k++] = &it[j];
        qsort(live, (size_t)k, sizeof *live, by_off);
        size_t off = 0;
        for (int j = 0; j < k; j++) { /* the lowest gap that holds it, walking up the overlapping ones */
            if (off + it[i].bytes <= live[j]->off) break;
            const size_t end = live[j]->off + live[j]->bytes;
            off = end > off ? end : off;
        }
        it[i].off = off;
        doff[it[i].t] = off;
        total = off + it[i].bytes > total ? off + it[i].bytes : total;
    }
    free(it), free(live);
    return total;
}
