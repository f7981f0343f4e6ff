/* executor.c — the device registry and the public wrappers that check the executor contract and supply
 * defaults for optional members. Stateless: everything lives in struct executor and its device context.
 */
#include "executor.h"

#include "arena.h"
#include "clock.h"
#include "exec.h"
#include "status.h"

#include <string.h>
#include <unistd.h>

/* The built-in devices, then room for the doubles a test registers (executor_device_register). */
enum { N_REGISTERED_MAX = 4 };
static struct executor_device registry[] = {
    /* The cpu: always present, no facts or ceilings of its own (the harness measures the host). */
    {.name = "cpu", .summary = "host cores: arenas in host memory, kernels on a pinned pool of `threads` workers",
     .create = executor_cpu_create},
#ifdef TB_HAVE_CUDA
    {.name = "cuda", .summary = "NVIDIA GPUs: device memory, CUDA kernels and cuBLAS on a stream per executor",
     .create = executor_cuda_create, .probe = executor_cuda_probe, .info = executor_cuda_info,
     .calibrate = executor_cuda_calibrate, .memory = executor_cuda_memory, .count = executor_cuda_count},
#endif
    {0}, {0}, {0}, {0},
};
static int n_registry = (int)(sizeof registry / sizeof *registry) - N_REGISTERED_MAX;

const struct executor_device *executor_devices(int *n)
{
    *n = n_registry;
    return registry;
}

int executor_device_register(const struct executor_device *d)
{
    if (n_registry >= (int)(sizeof registry / sizeof *registry))
        return tb_error_set(TB_EINVAL, "executor: no room to register device %s", d->name);
    for (int k = 0; k < n_registry; k++)
        if (strcmp(registry[k].name, d->name) == 0)
            return tb_error_set(TB_EINVAL, "executor: device %s is already registered", d->name);
    TB_ASSERT(d->name && d->create);
    registry[n_registry++] = *d;
    return TB_OK;
}

/* The registry entry of name, or NULL. */
static const struct executor_device *device_find(const char *name)
{
    int n;
    const struct executor_device *d = executor_devices(&n);
    for (int k = 0; k < n; k++)
        if (strcmp(d[k].name, name) == 0) return &d[k];
    return NULL;
}

/* The registry entry of name, or NULL after TB_EINVAL's message. */
static const struct executor_device *device_named(const char *name)
{
    const struct executor_device *d = device_find(name);
    if (!d) tb_error_set(TB_EINVAL, "unknown device '%s'", name);
    return d;
}

int executor_device_count(const char *name)
{
    const struct executor_device *d = device_find(name);
    return d && d->count ? d->count() : 0;
}

int executor_device_probe(const char *name)
{
    const struct executor_device *d = device_named(name);
    if (!d) return TB_EINVAL;
    return d->probe ? d->probe() : TB_OK;
}

/* A device's optional member is present and its hardware answers (the probe's reason otherwise). */
static int device_ready(const struct executor_device *d, int has_member, const char *what)
{
    if (!d) return TB_EINVAL;
    if (!has_member) return tb_error_set(TB_EUNSUPPORTED, "device %s keeps no %s", d->name, what);
    return d->probe ? d->probe() : TB_OK;
}

int executor_device_info(const char *name, struct device_info *out)
{
    const struct executor_device *d = device_named(name);
    const int st = device_ready(d, d && d->info, "facts");
    return st != TB_OK ? st : d->info(out);
}

int executor_device_calibrate(const char *name, struct device_ceilings *c, int gemm_n)
{
    const struct executor_device *d = device_named(name);
    const int st = device_ready(d, d && d->calibrate, "ceilings");
    return st != TB_OK ? st : d->calibrate(c, gemm_n);
}

int executor_device_memory(const char *name, struct device_memory *m, int reset)
{
    const struct executor_device *d = device_named(name);
    const int st = device_ready(d, d && d->memory, "memory accounting");
    return st != TB_OK ? st : d->memory(m, reset);
}

int executor_device_own_memory(const char *name)
{
    const struct executor_device *d = device_find(name);
    return d && d->memory;
}

size_t tensor_family_floats(const struct model *m, enum optim_kind k, enum tensor_family f)
{
    switch (f) {
    case TF_PARAMS:
    case TF_GRADS: return m->n_params;
    case TF_OPT: return m->n_params * (size_t)optim_state_per_param(k);
    case TF_BUFFERS: return m->n_buffers;
    }
    return 0;
}

int executor_create(struct executor *ex, const struct model *m, const struct executor_config *cfg)
{
    memset(ex, 0, sizeof *ex);
    const char *name = cfg->device && cfg->device[0] ? cfg->device : "cpu";
    int n;
    const struct executor_device *d = executor_devices(&n);
    int k = 0;
    while (k < n && strcmp(d[k].name, name) != 0) k++;
    if (k == n) {
        char names[256] = "";
        for (int j = 0; j < n; j++) {
            strncat(names, j ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, d[j].name, sizeof names - strlen(names) - 1);
        }
        return tb_error_set(TB_EINVAL, "unknown device '%s' (valid: %s)", name, names);
    }
    if (cfg->threads < 1 || cfg->n_max < 1)
        return tb_error_set(TB_EINVAL, "executor: threads (%d) and n_max (%d) must be at least 1", cfg->threads,
                            cfg->n_max);
    if (cfg->l1 && (cfg->l0 < 0 || cfg->l0 >= cfg->l1 || cfg->l1 > m->n_layers || cfg->threads != 1))
        return tb_error_set(TB_EINVAL, "executor: stage layers [%d,%d) of %s on %d threads (one thread a stage)",
                            cfg->l0, cfg->l1, m->name, cfg->threads);
    ex->m = m;
    ex->cfg = *cfg;
    ex->cfg.device = d[k].name;
    if (ex->cfg.l1 && ex->cfg.slots < 1) ex->cfg.slots = 1;
    if (ex->cfg.eval_batch < 1) ex->cfg.eval_batch = cfg->n_max;
    int st = d[k].create(ex);
    if (st != TB_OK) {
        executor_destroy(ex);
        return st;
    }
    TB_ASSERT(ex->i && ex->i->destroy && ex->i->compute && ex->i->zero_grads && ex->i->update && ex->i->get_tensors &&
              ex->i->set_tensors && ex->i->buffer && ex->i->supports);
    TB_ASSERT(!ex->fused_step || ex->i->train_step);
    TB_ASSERT(!ex->cfg.l1 || (ex->i->import_boundary && ex->i->export_boundary));
    TB_ASSERT(!ex->loop_steps || (ex->i->stage_steps && ex->i->run_steps));
    return TB_OK;
}

void executor_destroy(struct executor *ex)
{
    if (ex->i) ex->i->destroy(ex);
    memset(ex, 0, sizeof *ex);
}

/* The pass's range checked against the model, l1 = 0 resolved to the last layer. */
static struct executor_pass pass_checked(const struct executor *ex, const struct executor_pass *p, int what)
{
    struct executor_pass q = *p;
    if (q.l1 == 0) q.l1 = ex->m->n_layers;
    TB_ASSERT(q.n >= 1 && q.n <= ex->cfg.n_max && q.n_global >= q.n);
    TB_ASSERT(q.l0 >= 0 && q.l0 < q.l1 && q.l1 <= ex->m->n_layers);
    TB_ASSERT(!ex->cfg.l1 || (q.l0 == ex->cfg.l0 && q.l1 == ex->cfg.l1 && q.slot >= 0 && q.slot < ex->cfg.slots));
    TB_ASSERT(!(what & EXECUTOR_BACKWARD) || q.training);
    TB_ASSERT(!((what & EXECUTOR_FORWARD) && q.l0 == 0) || q.x);
    return q;
}

int executor_forward(struct executor *ex, const struct executor_pass *p, double *loss_sum)
{
    const struct executor_pass q = pass_checked(ex, p, EXECUTOR_FORWARD);
    return ex->i->compute(ex, &q, EXECUTOR_FORWARD, loss_sum);
}

int executor_backward(struct executor *ex, const struct executor_pass *p)
{
    const struct executor_pass q = pass_checked(ex, p, EXECUTOR_BACKWARD);
    double unused;
    return ex->i->compute(ex, &q, EXECUTOR_BACKWARD, &unused);
}

int executor_forward_backward(struct executor *ex, const struct executor_pass *p, double *loss_sum)
{
    const struct executor_pass q = pass_checked(ex, p, EXECUTOR_FORWARD | EXECUTOR_BACKWARD);
    return ex->i->compute(ex, &q, EXECUTOR_FORWARD | EXECUTOR_BACKWARD, loss_sum);
}

void executor_zero_grads(struct executor *ex) { ex->i->zero_grads(ex); }

int executor_update(struct executor *ex, long step) { return ex->i->update(ex, step, 0, 1); }

int executor_update_part(struct executor *ex, long step, int part, int parts)
{
    TB_ASSERT(parts >= 1 && part >= 0 && part < parts);
    TB_ASSERT(parts == 1 || ex->cfg.optim.kind != OPTIM_LARS); /* trust ratios need whole tensors */
    return ex->i->update(ex, step, part, parts);
}

int executor_get_tensors(struct executor *ex, enum tensor_family f, float *dst)
{
    return ex->i->get_tensors(ex, f, dst);
}

int executor_set_tensors(struct executor *ex, enum tensor_family f, const float *src)
{
    TB_ASSERT(src || f == TF_OPT);
    return ex->i->set_tensors(ex, f, src);
}

int executor_buffer(struct executor *ex, enum tensor_family f, struct executor_buffer *b)
{
    memset(b, 0, sizeof *b);
    return ex->i->buffer(ex, f, b);
}

int executor_grad_buffer(struct executor *ex, struct executor_buffer *b) { return executor_buffer(ex, TF_GRADS, b); }

int executor_synchronize(struct executor *ex) { return ex->i->synchronize ? ex->i->synchronize(ex) : TB_OK; }

int executor_supports(const struct executor *ex, enum op_kind op)
{
    return op >= 0 && op < OP_COUNT && ex->i->supports(ex, op);
}

int executor_train_step(struct executor *ex, const struct executor_pass *p, double *loss_sum)
{
    TB_ASSERT(ex->fused_step && p->n == ex->cfg.n_max);
    return ex->i->train_step(ex, p, loss_sum);
}

int executor_step(struct executor *ex, const struct executor_pass *p, double *loss_sum)
{
    if (ex->fused_step) return executor_train_step(ex, p, loss_sum);
    executor_zero_grads(ex);
    const int st = executor_forward_backward(ex, p, loss_sum);
    return st != TB_OK ? st : executor_update(ex, p->step);
}

int executor_stage_steps(struct executor *ex, long first, long n, const uint8_t *x, const int32_t *y)
{
    TB_ASSERT(first >= 1 && n >= 1 && x && y && !ex->cfg.l1);
    ex->staged = (struct executor_staged){x, y, first, n};
    if (!ex->loop_steps) return TB_OK;
    const int st = ex->i->stage_steps(ex, &ex->staged);
    if (st != TB_OK) ex->staged.n = 0;
    return st;
}

/* The default run of steps: executor_step on each staged step's samples, as a schedule's step would. */
static int run_steps_each(struct executor *ex, long step, long n, double *loss_sums, long *done)
{
    const int b = ex->cfg.n_max;
    const size_t per = ex->m->tensors[ex->m->input].per_sample;
    for (long j = 0; j < n; j++) {
        const long k = step + j - ex->staged.first;
        const struct executor_pass p = {.n = b, .n_global = b, .step = step + j,
                                        .x = ex->staged.x + (size_t)k * (size_t)b * per,
                                        .y = ex->staged.y + (size_t)k * (size_t)b, .training = 1};
        executor_trace_begin(ex, tb_now_s());
        const int st = executor_step(ex, &p, &loss_sums[j]);
        if (st != TB_OK) {
            *done = j;
            return st;
        }
    }
    *done = n;
    return TB_OK;
}

int executor_run_steps(struct executor *ex, long step, long n, double *loss_sums, long *done)
{
    TB_ASSERT(n >= 1 && ex->staged.n > 0 && step >= ex->staged.first &&
              step + n <= ex->staged.first + ex->staged.n);
    *done = 0;
    if (ex->loop_steps) return ex->i->run_steps(ex, step, n, loss_sums, done);
    return run_steps_each(ex, step, n, loss_sums, done);
}

void executor_finish(struct executor *ex)
{
    if (ex->i->finish) ex->i->finish(ex);
}

int executor_evaluate(struct executor *ex, const uint8_t *x, const int32_t *y, int n, struct eval_stats *ev)
{
    if (!ex->i->evaluate) return tb_error_set(TB_EUNSUPPORTED, "device %s cannot evaluate", ex->cfg.device);
    return ex->i->evaluate(ex, x, y, n, ev);
}

int executor_stats(struct executor *ex, struct executor_stats *s)
{
    memset(s, 0, sizeof *s);
    return ex->i->stats ? ex->i->stats(ex, s) : TB_OK;
}

void executor_trace_begin(struct executor *ex, double t0)
{
    if (ex->cfg.trace && ex->i->trace) ex->i->trace(ex, 0, t0, t0);
}

void executor_trace_add(struct executor *ex, char phase, double t0, double t1)
{
    TB_ASSERT(phase != 0);
    if (ex->cfg.trace && ex->i->trace) ex->i->trace(ex, phase, t0, t1);
}

size_t executor_import_boundary(struct executor *ex, int grads, const void *src, int n, enum stage_prec prec,
                                float scale)
{
    TB_ASSERT(ex->cfg.l1 && n >= 1 && n <= ex->cfg.n_max);
    return ex->i->import_boundary(ex, grads, src, n, prec, scale);
}

size_t executor_export_boundary(struct executor *ex, int grads, int slot, void *dst, int n, enum stage_prec prec,
                                float scale)
{
    TB_ASSERT(ex->cfg.l1 && n >= 1 && n <= ex->cfg.n_max && slot >= 0 && slot < ex->cfg.slots);
    return ex->i->export_boundary(ex, grads, slot, dst, n, prec, scale);
}

void executor_set_grad_scale(struct executor *ex, float scale)
{
    if (ex->i->set_grad_scale) ex->i->set_grad_scale(ex, scale);
}

int executor_restore_loss_scaling(struct executor *ex, const char *state)
{
    return ex->i->restore_loss_scaling ? ex->i->restore_loss_scaling(ex, state) : TB_OK;
}

int executor_set_seed(struct executor *ex, uint64_t seed)
{
    if (seed == ex->cfg.seed) return TB_OK;
    if (!ex->i->set_seed)
        return tb_error_set(TB_EUNSUPPORTED, "device %s cannot change its seed once created", ex->cfg.device);
    ex->i->set_seed(ex, seed);
    ex->cfg.seed = seed;
    return TB_OK;
}

int executor_group_init(struct executor_group *g, struct executor *ex, int n)
{
    memset(g, 0, sizeof *g);
    TB_ASSERT(n >= 1 && ex[0].i);
    for (int k = 1; k < n; k++) TB_ASSERT(ex[k].i == ex[0].i); /* one device */
    if (!ex[0].i->group_init || !ex[0].i->allreduce_grads)
        return tb_error_set(TB_EUNSUPPORTED, "device %s has no gradient collective", ex[0].cfg.device);
    g->ex = ex, g->n = n;
    const int st = ex[0].i->group_init(g);
    if (st != TB_OK) executor_group_free(g);
    return st;
}

int executor_group_allreduce_grads(struct executor_group *g)
{
    TB_ASSERT(g->n >= 1);
    return g->ex[0].i->allreduce_grads(g);
}

void executor_group_free(struct executor_group *g)
{
    if (g->release) g->release(g);
    memset(g, 0, sizeof *g);
}

int executor_prefetch(struct executor *ex, const struct executor_pass *p)
{
    TB_ASSERT(p->n >= 1 && p->n <= ex->cfg.n_max);
    return executor_prefetches(ex) > 0 ? ex->i->prefetch(ex, p) : TB_OK;
}

/* A fused step (executor_train_step) stages its own inputs: a copy made ahead would never be read. */
int executor_prefetches(const struct executor *ex)
{
    return ex->i->prefetch && !ex->fused_step && ex->cfg.prefetch > 0 ? ex->cfg.prefetch : 0;
}

double executor_host_mem_available(void) { return arena_mem_available(); }

double executor_host_mem_total(void)
{
    const double o = arena_mem_override();
    if (o > 0.0) return o;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 8.0 * 1024 * 1024 * 1024;
}

size_t executor_choices_export(void *buf, size_t cap)
{
    const size_t one = sizeof(struct exec_tune_entry);
    return (size_t)exec_tune_entries(buf, (int)(cap / one)) * one;
}

int executor_choices_import(const void *buf, size_t n)
{
    if (n % sizeof(struct exec_tune_entry))
        return tb_error_set(TB_EINVAL, "executor_choices_import: %zu bytes are not whole choices", n);
    for (size_t i = 0; i < n / sizeof(struct exec_tune_entry); i++) {
        struct exec_tune_entry e;
        memcpy(&e, (const char *)buf + i * sizeof e, sizeof e);
        if (exec_tune_add(&e, 1) != TB_OK) tb_error_clear();
    }
    return TB_OK;
}
