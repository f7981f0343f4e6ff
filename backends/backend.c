/* backend.c — the registry (each backend with the options it takes), the devices known, and the public
 * wrappers that check, default and time backend calls. */
#include "backend.h"

#include "pipeline_report.h"

#include "clock.h"
#include "status.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Each entry names the options its backend reads from run_config (see struct backend_caps): --threads is
 * the threads backend's pool, --devices the mirrored replicas or the ipu's device budget, --prefetch the
 * ipu's infeed depth or the batches the executor schedules hand a device that copies its inputs ahead,
 * the pipeline, projection and grid options are the ipu's, and --precision the ipu's (storage) and cuda's
 * (mixed precision). */
static const struct backend_entry registry[] = {
    {"cpu", "single thread, the reference schedule", backend_cpu_create, {"prefetch", 0, 1, 1, NULL}},
    {"threads", "one model, every op split over all cores (persistent pinned pool)", backend_threads_create,
     {"threads", 0, 0, 0, NULL}},
    {"mirrored", "N devices, each a full replica; gradients all-reduced (ring, MPI across processes, or on GPUs)",
     backend_mirrored_create, {"devices transport sync-bn replicas-list prefetch", 1, 0, 0, NULL}},
    {"ipu", "S pipeline stages x R replicas on pinned device workers; micro-batches, gpipe/1f1b, exchange queues",
     backend_ipu_create,
     {"devices stages split micro-batch ga replicas schedule recompute precision loss-scale prefetch timeline "
      "replicas-list ga-list micro-batch-list project-devices project-device device-set link-bw link-latency allreduce-bw allreduce-latency",
      0, 0, 0, NULL}},
#ifdef TB_HAVE_CUDA
    /* The reference schedule on one GPU: --backend cpu --device cuda under its own name. */
    {"cuda", "one GPU, the reference schedule on the cuda device (batch 1: runs of steps in one persistent "
             "kernel)",
     backend_cuda_create, {"prefetch precision loss-scale", 0, 0, 1, "cuda"}},
#endif
};

const struct backend_entry *backend_registry(int *n)
{
    *n = (int)(sizeof registry / sizeof *registry);
    return registry;
}

const struct backend_entry *backend_find(const char *name)
{
    for (size_t k = 0; k < sizeof registry / sizeof *registry; k++)
        if (strcmp(registry[k].name, name) == 0) return &registry[k];
    return NULL;
}

/* Whether the space-separated list names word. */
static int names_word(const char *list, const char *word)
{
    const size_t len = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += len)
        if ((p == list || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return 1;
    return 0;
}

/* How many entries name option. */
static int n_takers(const char *option)
{
    int count = 0;
    for (size_t k = 0; k < sizeof registry / sizeof *registry; k++)
        count += names_word(registry[k].caps.options, option);
    return count;
}

int backend_option_takers(const char *option, char *buf, size_t n)
{
    const int total = n_takers(option);
    int count = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof registry / sizeof *registry; k++) {
        if (!names_word(registry[k].caps.options, option)) continue;
        const char *sep = count == 0 ? "" : count == total - 1 ? " and " : ", ";
        const size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s", sep, registry[k].name);
        count++;
    }
    return total;
}

int backend_takes_option(const char *name, const char *option)
{
    if (n_takers(option) == 0) return 1;
    const struct backend_entry *e = backend_find(name);
    return e && names_word(e->caps.options, option);
}

const char *backend_reference(void)
{
    for (size_t k = 0; k < sizeof registry / sizeof *registry; k++)
        if (registry[k].caps.reference) return registry[k].name;
    return NULL;
}

/* The devices bench knows: every executor device registered in core (built), then the ones this binary
 * was built without, so that asking for one says it is not built rather than unknown. */
static const char *const known_devices[][2] = {{"cuda", "NVIDIA GPUs"}};

const struct device_entry *device_registry(int *n)
{
    enum { MAX_DEVICES = 8 };
    static struct device_entry devices[MAX_DEVICES];
    int nb, k = 0;
    const struct executor_device *built = executor_devices(&nb);
    for (int i = 0; i < nb && k < MAX_DEVICES; i++) devices[k++] = (struct device_entry){built[i].name, built[i].summary, 1};
    for (size_t j = 0; j < sizeof known_devices / sizeof *known_devices && k < MAX_DEVICES; j++) {
        int have = 0;
        for (int i = 0; i < nb; i++) have |= strcmp(built[i].name, known_devices[j][0]) == 0;
        if (!have) devices[k++] = (struct device_entry){known_devices[j][0], known_devices[j][1], 0};
    }
    *n = k;
    return devices;
}

int backend_create(struct backend *b, const char *name)
{
    memset(b, 0, sizeof *b);
    int n;
    const struct backend_entry *r = backend_registry(&n), *e = backend_find(name);
    if (e) {
        int st = e->create(b);
        if (st != TB_OK) return st;
        TB_ASSERT(b->i && b->i->prepare && b->i->forward_backward && b->i->update && b->i->evaluate &&
                  b->i->get_tensors && b->i->set_tensors && b->i->destroy);
        return TB_OK;
    }
    char names[256] = "";
    for (int k = 0; k < n; k++) {
        strncat(names, k ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, r[k].name, sizeof names - strlen(names) - 1);
    }
    /* "gpu" is the name a first run guesses: the GPU is a device, reached by the cuda backend or --device cuda. */
    if (!strcasecmp(name, "gpu"))
        return tb_error_set(TB_EINVAL, "unknown backend '%s' (valid: %s; %s)", name, names,
                            backend_find("cuda") ? "on a GPU: --backend cuda, or --device cuda under another schedule"
                                                 : "this build has no cuda device (configured with -DTB_CUDA=OFF, or "
                                                   "without nvcc)");
    return tb_error_set(TB_EINVAL, "unknown backend '%s' (valid: %s)", name, names);
}

extern void openblas_set_num_threads(int);

int backend_prepare(struct backend *b, const struct model *m, const struct run_config *cfg)
{
    /* The engines own the threads: every backend partitions its sgemm calls itself, so OpenBLAS runs
     * single-threaded (blas_threads > 1 reproduces the uncoordinated arrangement, for comparison).
     * Set here, for every backend, before any engine is planned. */
    openblas_set_num_threads(cfg->blas_threads > 1 ? cfg->blas_threads : 1);
    if (cfg->batch < 1) return tb_error_set(TB_EINVAL, "batch must be at least 1 (got %d)", cfg->batch);
    b->m = m;
    b->cfg = *cfg;
    if (b->cfg.eval_batch < 1) b->cfg.eval_batch = cfg->batch;
    int st = b->i->prepare(b, m, &b->cfg);
    if (st == TB_OK) b->prepared = 1;
    return st;
}

/* Runs fn (the backend's forward_backward or train_step) on a batch of the prepared size, timed into st. */
static int timed_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st,
                      int (*fn)(struct backend *, const struct batch *, long, struct step_stats *))
{
    if (batch->n != b->cfg.batch)
        return tb_error_set(TB_EINVAL, "batch of %d samples, but the backend was prepared for %d", batch->n,
                            b->cfg.batch);
    memset(st, 0, sizeof *st);
    double t0 = tb_now_s();
    int rc = fn(b, batch, step, st);
    st->t_forward_backward = tb_now_s() - t0;
    st->n = batch->n;
    return rc;
}

int backend_forward_backward(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    TB_ASSERT(b->prepared);
    return timed_step(b, batch, step, st, b->i->forward_backward);
}

int backend_train_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    TB_ASSERT(b->prepared);
    if (b->i->train_step) return timed_step(b, batch, step, st, b->i->train_step);
    int rc = backend_forward_backward(b, batch, step, st);
    return rc != TB_OK ? rc : backend_update(b, step, st);
}

int backend_prefetches(struct backend *b)
{
    TB_ASSERT(b->prepared);
    return b->i->prefetches && b->i->prefetch ? b->i->prefetches(b) : -1;
}

int backend_prefetch(struct backend *b, const struct batch *batch, long step)
{
    TB_ASSERT(b->prepared && batch->n == b->cfg.batch);
    return backend_prefetches(b) > 0 ? b->i->prefetch(b, batch, step) : TB_OK;
}

int backend_stage_steps(struct backend *b, long first_step, long n_steps, const struct batch *all)
{
    TB_ASSERT(b->prepared && first_step >= 1 && n_steps >= 1 && !b->i->stage_steps == !b->i->run_steps);
    if (all->n != n_steps * (long)b->cfg.batch)
        return tb_error_set(TB_EINVAL, "%ld samples for %ld steps of batch %d", (long)all->n, n_steps, b->cfg.batch);
    b->staged = *all, b->staged_first = first_step, b->staged_n = n_steps;
    if (!b->i->stage_steps) return TB_OK;
    const int rc = b->i->stage_steps(b, first_step, n_steps, all);
    if (rc != TB_OK) b->staged_n = 0;
    return rc;
}

/* The default run of steps: backend_train_step on each staged batch, as the harness's per-step loop does. */
static int run_steps_each(struct backend *b, long step, long n_steps, struct step_stats *st, long *done)
{
    const size_t per = b->m->tensors[b->m->input].per_sample, batch = (size_t)b->cfg.batch;
    for (long j = 0; j < n_steps; j++) {
        const size_t k = (size_t)(step + j - b->staged_first);
        const struct batch bt = {b->cfg.batch, b->staged.x + k * batch * per, b->staged.y + k * batch};
        const int rc = backend_train_step(b, &bt, step + j, &st[j]);
        if (rc != TB_OK) {
            *done = j;
            return rc;
        }
    }
    *done = n_steps;
    return TB_OK;
}

int backend_run_steps(struct backend *b, long step, long n_steps, struct step_stats *st, long *done)
{
    TB_ASSERT(b->prepared && n_steps >= 1 && b->staged_n > 0 && step >= b->staged_first &&
              step + n_steps <= b->staged_first + b->staged_n);
    *done = 0;
    memset(st, 0, (size_t)n_steps * sizeof *st);
    if (!b->i->run_steps) return run_steps_each(b, step, n_steps, st, done);
    const int rc = b->i->run_steps(b, step, n_steps, st, done);
    for (long j = 0; j < n_steps; j++) st[j].n = b->cfg.batch;
    return rc;
}

int backend_loops_on_device(const struct backend *b) { return b->prepared && b->device_loop; }

int backend_finish(struct backend *b)
{
    TB_ASSERT(b->prepared);
    return b->i->finish ? b->i->finish(b) : TB_OK;
}

int backend_update(struct backend *b, long step, struct step_stats *st)
{
    TB_ASSERT(b->prepared);
    double t0 = tb_now_s();
    int rc = b->i->update(b, step, st);
    st->t_update = tb_now_s() - t0;
    return rc;
}

int backend_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev)
{
    TB_ASSERT(b->prepared);
    return b->i->evaluate(b, batch, ev);
}

int backend_get_tensors(struct backend *b, enum tensor_family f, float *dst)
{
    TB_ASSERT(b->prepared);
    return b->i->get_tensors(b, f, dst);
}

int backend_set_tensors(struct backend *b, enum tensor_family f, const float *src)
{
    TB_ASSERT(b->prepared && (src || f == TF_OPT));
    return b->i->set_tensors(b, f, src);
}

int backend_set_seed(struct backend *b, uint64_t seed)
{
    TB_ASSERT(b->prepared);
    if (!b->i->set_seed) return tb_error_set(TB_EUNSUPPORTED, "backend %s cannot change its seed once prepared", b->i->name);
    return b->i->set_seed(b, seed);
}

void backend_count_steps(struct backend *b, int timed)
{
    TB_ASSERT(b->prepared);
    if (b->i->count_steps) b->i->count_steps(b, timed);
}

void backend_describe(struct backend *b, char *buf, size_t n)
{
    if (b->i && b->i->describe) b->i->describe(b, buf, n);
    else snprintf(buf, n, "%s", b->i ? b->i->name : "?");
}

int backend_stats(struct backend *b, struct backend_stats *s)
{
    TB_ASSERT(b->prepared);
    memset(s, 0, sizeof *s);
    int rc = b->i->stats ? b->i->stats(b, s) : TB_OK;
    if (rc != TB_OK) memset(s, 0, sizeof *s);
    if (s->n_devices < 1) s->n_devices = 1;
    return rc;
}

int backend_restore_loss_scaling(struct backend *b, const char *state)
{
    TB_ASSERT(b->prepared);
    return b->i->restore_loss_scaling ? b->i->restore_loss_scaling(b, state) : TB_OK;
}

int backend_conv_algos(struct backend *b, int *algos)
{
    struct backend_stats s;
    int rc = backend_stats(b, &s);
    if (rc != TB_OK) return rc;
    if (!s.conv_algos) return tb_error_set(TB_EUNSUPPORTED, "backend %s does not report algorithms", b->i->name);
    memcpy(algos, s.conv_algos, (size_t)b->m->n_layers * sizeof *algos);
    return TB_OK;
}

int backend_n_devices(struct backend *b)
{
    struct backend_stats s;
    backend_stats(b, &s);
    return s.n_devices;
}

int backend_pipeline_report(struct backend *b, struct pipeline_report *r)
{
    struct backend_stats s;
    int rc = backend_stats(b, &s);
    if (rc != TB_OK) return rc;
    if (!s.pipeline) return tb_error_set(TB_EUNSUPPORTED, "backend %s has no pipeline report", b->i->name);
    *r = *s.pipeline;
    return TB_OK;
}

int backend_layer_profile(struct backend *b, double *prof, int *busy_threads)
{
    struct backend_stats s;
    int rc = b->cfg.profile ? backend_stats(b, &s) : TB_OK;
    if (rc != TB_OK) return rc;
    if (!b->cfg.profile || !s.layer_profile)
        return tb_error_set(TB_EUNSUPPORTED, "backend %s has no per-layer profile (run with --profile)", b->i->name);
    const size_t n2 = 2 * (size_t)b->m->n_layers;
    memcpy(prof, s.layer_profile, n2 * sizeof *prof);
    if (s.layer_busy && s.layer_busy_max) {
        memcpy(prof + n2, s.layer_busy, n2 * sizeof *prof);
        memcpy(prof + 2 * n2, s.layer_busy_max, n2 * sizeof *prof);
    } else {
        memset(prof + n2, 0, 2 * n2 * sizeof *prof);
    }
    *busy_threads = s.layer_busy && s.layer_busy_max ? s.busy_threads : 0;
    prof[3 * n2] = (double)s.barriers;
    return TB_OK;
}

int backend_timeline(struct backend *b, struct timeline_event *ev, int cap)
{
    TB_ASSERT(b->prepared && cap >= 0 && (ev || cap == 0));
    struct backend_stats s;
    if (backend_stats(b, &s) != TB_OK) return 0;
    const int n = cap < s.n_timeline ? cap : s.n_timeline;
    if (n > 0) memcpy(ev, s.timeline, (size_t)n * sizeof *ev);
    return s.n_timeline;
}

int backend_trace_events(struct backend *b, struct trace_event *ev, int cap)
{
    TB_ASSERT(b->prepared && cap >= 0 && (ev || cap == 0));
    struct backend_stats s;
    if (!b->cfg.trace || backend_stats(b, &s) != TB_OK) return 0;
    const int n = cap < s.n_trace ? cap : s.n_trace;
    if (n > 0) memcpy(ev, s.trace, (size_t)n * sizeof *ev);
    return s.n_trace;
}

int backend_is_primary(struct backend *b)
{
    return !(b->i && b->i->is_primary && b->prepared) || b->i->is_primary(b);
}

int backend_offer_stop(struct backend *b, int signo)
{
    return b->i && b->i->offer_stop && b->prepared ? b->i->offer_stop(b, signo) : 0;
}

void backend_destroy(struct backend *b)
{
    if (b->i && b->i->destroy) b->i->destroy(b);
    memset(b, 0, sizeof *b);
}
