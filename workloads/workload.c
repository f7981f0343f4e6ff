/* workload.c — the workload registry and shared initialisers. */
#include "workload.h"

#include "rng.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct workload *const registry[] = {
    &workload_mnist_mlp,
    &workload_effnet[0], &workload_effnet[1], &workload_effnet[2], &workload_effnet[3],
    &workload_effnet[4], &workload_effnet[5], &workload_effnet[6], &workload_effnet[7],
    &workload_effnet[8], &workload_effnet[9], &workload_effnet[10], &workload_effnet[11],
    &workload_effnet[12], &workload_effnet[13], &workload_effnet[14], &workload_effnet[15],
};

const struct workload *const *workload_registry(int *n)
{
    *n = (int)(sizeof registry / sizeof *registry);
    return registry;
}

const struct workload *workload_find(const char *name)
{
    int n = (int)(sizeof registry / sizeof *registry);
    for (int k = 0; k < n; k++)
        if (strcmp(registry[k]->name, name) == 0) return registry[k];
    char names[512] = "";
    for (int k = 0; k < n; k++) {
        strncat(names, k ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, registry[k]->name, sizeof names - strlen(names) - 1);
    }
    tb_error_set(TB_EINVAL, "unknown workload '%s' (valid: %s)", name, names);
    return NULL;
}

void workload_recipe_text(const struct workload *w, char *buf, size_t n)
{
    struct optim_config d;
    optim_config_defaults(&d, w->optimizer);
    const float lr = w->lr > 0.0f ? w->lr : d.lr;
    int k = snprintf(buf, n, "%s lr %g", optim_name(w->optimizer), (double)lr);
    if (w->lr_batch > 0) k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, " x batch/%d", w->lr_batch);
    k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, " (batch %d)", w->batch);
    if (w->warmup_steps > 0)
        k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, ", linear warm-up %ld steps", w->warmup_steps);
    if (w->schedule == LR_EXPONENTIAL)
        k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, ", exponential decay %g every %ld steps",
                      (double)w->decay_rate, w->decay_steps);
    else if (w->schedule == LR_POLYNOMIAL)
        k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, ", polynomial decay (power %g) to 0 at the last step",
                      (double)w->power);
    else if (w->schedule == LR_COSINE)
        k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, ", cosine decay to 0 at the last step");
    else k += snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, ", constant");
    if (w->norm && !strcmp(w->norm, "group"))
        snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, "; GroupNorm (%d groups)", w->norm_groups);
    else if (w->norm) snprintf(buf + k, n > (size_t)k ? n - (size_t)k : 0, "; BatchNorm");
}

void init_glorot_uniform(float *w, size_t n, int fan_in, int fan_out, uint64_t seed, uint64_t tensor)
{
    const float limit = sqrtf(6.0f / (float)(fan_in + fan_out));
    const uint64_t key = rng_key(seed, RNG_STREAM_INIT);
    for (size_t i = 0; i < n; i++) w[i] = (2.0f * rng_uniform_keyed(key, (tensor << 40) | i) - 1.0f) * limit;
}

void init_zero_non_weights(const struct model *m, float *params, float *buffers)
{
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (e->kind == PARAM_WEIGHT) continue;
        float *dst = (e->kind == PARAM_BUFFER || e->kind == PARAM_COUNTER) ? buffers + e->off : params + e->off;
        memset(dst, 0, e->n * sizeof(float));
    }
}

void init_default(const struct model *m, float *params, float *buffers, uint64_t seed)
{
    init_zero_non_weights(m, params, buffers);
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (e->kind != PARAM_WEIGHT) continue;
        /* fan_in = product of all dims but the last; fan_out = last dim (x·W layout). */
        const int fan_out = e->dims[e->ndim - 1];
        init_glorot_uniform(params + e->off, e->n, (int)(e->n / (size_t)fan_out), fan_out, seed, (uint64_t)k);
    }
}
