/* backend_mirrored.c — MirroredStrategy: R devices, each a full replica with its own arenas and a
 * worker pinned to its own core; the global batch splits evenly; gradients are summed in a ring
 * all-reduce's chunks and order over shared memory (each chunk by its owner in one pass: allreduce.h;
 * or across processes with --transport mpi: each rank holds --devices
 * replicas, default 1; the ring's reduce-scatter within the rank, MPI_Allreduce of each replica's complete
 * chunk between the ranks, the ring's all-gather within the rank — the hierarchical all-reduce NCCL uses
 * between nodes, so only 1/R of the gradients per replica crosses MPI); every replica then applies the
 * same update, so parameters stay identical without being broadcast.
 * With more than one replica in a process a training step shards the update instead (ZeRO stage 1): the ring's
 * reduce-scatter leaves each replica one complete chunk of the gradients, the replica updates that
 * chunk of the parameters and of the optimizer state. The replicas of a process read one copy of the
 * parameters (replica 0's; executor_config.params_from), so once every chunk is updated every replica has
 * them: no all-gather (a barrier and a copy of the model a replica), and one copy of the weights in the
 * caches instead of R. TB_SHARED_PARAMS=0 gives each replica its own copy and the all-gather of the
 * parameters after the update, as before (an A/B). Each replica updates 1/R of the model; an
 * element-wise update gives the same bits as the full one. get_tensors assembles gradients and optimizer state
 * from the chunks' owners.
 *
 * BatchNorm statistics are per replica, as MirroredStrategy computes them (--sync-bn makes them global:
 * partial sums all-reduced inside the forward and backward passes); the running statistics reported
 * (and checkpointed) are replica 0's. With one device the schedule is exactly cpu's.
 * Per step it records compute time (slowest replica) and all-reduce time.
 *
 * Each replica is an executor (executor.h) driven by its own device worker; the schedule touches a
 * replica only through executor_* calls, and the collectives work in place on the host buffers the
 * executors hand out (executor_buffer). The backend owns its executors, workers and buffers.
 *
 * Replicas whose tensors live off the host (the cuda device: replica r on GPU r mod the GPUs present)
 * are summed by the device's collective (executor_group_allreduce_grads: NCCL between GPUs, a kernel
 * in the ring's order between replicas of one GPU), issued by replica 0's worker once every backward is
 * in; every replica then updates everything (no sharded update: its parameters are not on the host).
 * A device without a collective for the arrangement (cuda built without NCCL, several GPUs), and MPI,
 * sum host copies instead: gradients copied out, the same ring (and MPI), copied back.
 */
#include "backend.h"

#include "allreduce.h"
#include "backend_executor.h"
#include "clock.h"
#include "env_switch.h"
#include "executor.h"
#include "layout.h"
#include "mpi_transport.h"
#include "status.h"
#include "tpool.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mir_ctx {
    int R;                    /* replicas in this process */
    int mpi, rank, world;     /* MPI: R replicas per rank, world ranks; replica r is global replica rank·R + r */
    int stop_offer, stop_seen; /* MPI: the stop signal this rank offers, the one any rank offered (last step) */
    int shard;                /* samples per replica */
    struct executor *dev;     /* (R) */
    float **grads;            /* (R) each replica's gradient buffer (host) */
    float **params;           /* (R) each replica's parameter buffer (host) */
    size_t n_params;
    struct tpool *pool;       /* R pinned workers (NULL when R == 1) */
    /* the step in flight */
    const struct batch *batch;
    long step;
    int do_update;
    double *loss;             /* (R) */
    double *t_compute, *t_allreduce, *t_idle; /* (R) */
    int *status;              /* (R) */
    /* sync BatchNorm */
    struct exec_collective *coll; /* (R) one per replica; NULL without --sync-bn or with one replica in all */
    int sync_bn_local;            /* --sync-bn over one replica: its own statistics, no collective */
    struct mir_replica *rep;      /* (R) */
    double *slots;                /* (R, max_c2) partial sums */
    size_t max_c2;
    struct backend_trace_buf trace; /* backend_stats' copy of the replicas' trace events */
    /* Replicas with device tensors (see the top of the file). */
    int offhost;
    int shared_params;            /* the replicas use replica 0's parameters (params[r] all equal): no all-gather */
    struct executor_group group;  /* the device's collective (group.n == 0: none, host copies) */
    float **stage;                /* (R) host copies of the gradients when summed on the host (else NULL) */
    char stage_why[160];          /* why host copies: the device's reason */
};

struct mir_replica {
    struct mir_ctx *c;
    int r;
};

static void mir_barrier(void *ctx)
{
    struct mir_ctx *c = ctx;
    if (c->pool) tpool_barrier(c->pool);
}

/* Sync BatchNorm's statistics: every replica sums all replicas' partial sums in replica order, so all
 * get the same bits. The second barrier keeps a fast replica from overwriting its slot early. */
static void shm_allreduce_f64(void *ctx, double *buf, size_t n)
{
    struct mir_replica *me = ctx;
    struct mir_ctx *c = me->c;
    TB_ASSERT(n <= c->max_c2);
    memcpy(c->slots + (size_t)me->r * c->max_c2, buf, n * sizeof(double));
    mir_barrier(c);
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (int r = 0; r < c->R; r++) s += c->slots[(size_t)r * c->max_c2 + i];
        buf[i] = s;
    }
    mir_barrier(c);
}

static void mpi_allreduce_f64_cb(void *ctx, double *buf, size_t n)
{
    (void)ctx;
    TB_ASSERT(mpi_transport_allreduce_f64(buf, n) == TB_OK);
}

static void run_all(struct mir_ctx *c, void (*fn)(void *, int, int))
{
    if (c->pool) tpool_run(c->pool, fn, c);
    else fn(c, 0, 1);
}

/* Whether a training step shards its update over the replicas (see the top of the file): more than one
 * replica in this process (the shards stay within a rank, so its checkpoint has every chunk), and not
 * LARS, whose trust ratios need whole tensors of the summed gradients. */
static int shards_update(const struct mir_ctx *c)
{
    return !c->offhost && c->R > 1 && c->dev[0].cfg.optim.kind != OPTIM_LARS;
}

/* The replica's index among all replicas of the run (every rank's). */
/* The ranks' stop offers travel as two counts summed over the ranks (SIGINT's, any other signal's): this rank's
 * votes, and the signal the summed votes give (SIGINT first; 0 where no rank offered one). */
static void stop_votes(const struct mir_ctx *c, int votes[2])
{
    votes[0] = c->stop_offer == SIGINT;
    votes[1] = c->stop_offer && c->stop_offer != SIGINT;
}
static int stop_of_votes(double sigint, double other) { return sigint > 0 ? SIGINT : other > 0 ? SIGTERM : 0; }

static int global_replica(const struct mir_ctx *c, int r) { return (c->mpi ? c->rank * c->R : 0) + r; }

/* --transport mpi, between the ring's halves: every replica's complete chunk (the rank's sum) summed over
 * the ranks, and the rank's loss sum with it (into loss[0], the others zeroed), and the ranks' stop offers
 * (how many offer SIGINT, how many another signal: a rank stopping alone would leave the others in the next
 * step's collective; in the loss's all-reduce it costs no extra message). MPI is called from
 * replica 0's thread only — the process's main thread, as MPI_THREAD_FUNNELED requires —, between two
 * barriers so that every chunk is complete before and no replica reads one early after. */
static void mpi_between_ranks(struct mir_ctx *c, int r)
{
    mir_barrier(c);
    if (r == 0) {
        double loss = 0.0;
        for (int q = 0; q < c->R; q++) {
            size_t lo, hi;
            tb_slice(c->n_params, allreduce_ring_owned(c->R, q), c->R, &lo, &hi);
            const int st = mpi_transport_allreduce(c->grads[q] + lo, hi - lo);
            if (st != TB_OK) c->status[0] = st;
            loss += c->loss[q];
            if (q > 0) c->loss[q] = 0.0;
        }
        int votes[2];
        stop_votes(c, votes);
        double sums[3] = {loss, votes[0], votes[1]};
        const int st = mpi_transport_allreduce_f64(sums, 3);
        if (st != TB_OK) c->status[0] = st;
        c->loss[0] = sums[0];
        c->stop_seen = stop_of_votes(sums[1], sums[2]);
    }
    mir_barrier(c);
}

/* Sums the replicas' gradients on the host: the ring over shared memory, with MPI between its halves
 * across processes; for device tensors through host copies (c->stage). The caller's barrier has seen
 * every backward. */
static int host_allreduce(struct mir_ctx *c, int r, int sharded)
{
    struct executor *e = &c->dev[r];
    int st, rc = TB_OK;
    if (c->stage && (st = executor_get_tensors(e, TF_GRADS, c->stage[r])) != TB_OK) rc = st;
    if (c->mpi) {
        reduce_scatter_ring(c->grads, c->n_params, c->R, r, mir_barrier, c);
        mpi_between_ranks(c, r);
        if (!sharded) allgather_ring(c->grads, c->n_params, c->R, r, mir_barrier, c);
    } else if (sharded) {
        reduce_scatter_ring(c->grads, c->n_params, c->R, r, mir_barrier, c);
    } else {
        allreduce_ring(c->grads, c->n_params, c->R, r, mir_barrier, c);
    }
    if (c->stage && rc == TB_OK && (st = executor_set_tensors(e, TF_GRADS, c->stage[r])) != TB_OK) rc = st;
    return rc;
}

/* The device's collective, issued by replica 0 between two barriers; each replica then waits for it on
 * its own stream, so its time is the all-reduce's and not the update's. */
static int device_allreduce(struct mir_ctx *c, int r)
{
    int rc = TB_OK;
    if (r == 0) rc = executor_group_allreduce_grads(&c->group);
    mir_barrier(c);
    const int st = executor_synchronize(&c->dev[r]);
    return rc != TB_OK ? rc : st;
}

/* Replica r's training pass over its shard of batch at step. */
static struct executor_pass shard_pass(const struct mir_ctx *c, int r, const struct batch *batch, long step)
{
    const struct executor *e = &c->dev[r];
    const size_t per = e->m->tensors[e->m->input].per_sample;
    const size_t off = (size_t)global_replica(c, r) * (size_t)c->shard;
    return (struct executor_pass){.n = c->shard, .n_global = batch->n, .first_index = (long)off, .step = step,
                                  .x = batch->x + off * per, .y = batch->y + off, .training = 1,
                                  .coll = c->coll ? &c->coll[r] : NULL};
}

/* One replica's share of a step: forward/backward on its shard, all-reduce, optional update. */
static void step_task(void *arg, int r, int nth)
{
    struct mir_ctx *c = arg;
    (void)nth;
    struct executor *e = &c->dev[r];
    const int sharded = c->do_update && shards_update(c);
    const double t0 = tb_now_s();
    executor_zero_grads(e);
    const struct executor_pass p = shard_pass(c, r, c->batch, c->step);
    c->status[r] = executor_forward_backward(e, &p, &c->loss[r]);
    const double t1 = tb_now_s();
    /* Waiting for the slowest replica is load imbalance, not all-reduce: time it apart (within the rank;
     * under MPI the other ranks' imbalance is inside the all-reduce). */
    mir_barrier(c);
    const double t1b = tb_now_s();
    if (c->mpi || c->R > 1) {
        const int st = c->group.n ? device_allreduce(c, r) : host_allreduce(c, r, sharded);
        if (st != TB_OK) c->status[r] = st;
    }
    const double t2 = tb_now_s();
    c->t_compute[r] = t1 - t0;
    c->t_idle[r] = t1b - t1;
    c->t_allreduce[r] = t2 - t1b;
    if (t1b > t1) executor_trace_add(e, 'W', t1, t1b);
    executor_trace_add(e, 'A', t1b, t2);
    if (sharded) {
        const int st = executor_update_part(e, c->step, allreduce_ring_owned(c->R, r), c->R);
        if (st != TB_OK) c->status[r] = st;
        if (!c->shared_params) {
            const double t3 = tb_now_s();
            allgather_ring(c->params, c->n_params, c->R, r, mir_barrier, c);
            const double t4 = tb_now_s();
            c->t_allreduce[r] += t4 - t3;
            executor_trace_add(e, 'A', t3, t4);
        }
    } else if (c->do_update) {
        const int st = executor_update(e, c->step);
        if (st != TB_OK) c->status[r] = st;
    }
}

/* --trace: every replica's event list starts at the same instant, so the lanes line up. */
static void trace_begin_all(struct mir_ctx *c)
{
    const double t0 = tb_now_s();
    for (int r = 0; r < c->R; r++) executor_trace_begin(&c->dev[r], t0);
}

/* Replicas with device tensors: the device's collective where it has one for this arrangement, else
 * host copies of the gradients for the ring (and MPI). Sync BatchNorm would need a device all-reduce of
 * the statistics inside the passes: refused. */
static int prepare_offhost(struct mir_ctx *c, const struct run_config *cfg)
{
    if (cfg->sync_bn)
        return tb_error_set(TB_EUNSUPPORTED, "mirrored: --sync-bn is not implemented on device %s yet (its "
                                             "statistics would need a device all-reduce inside the passes)",
                            c->dev[0].cfg.device);
    if (!c->mpi && c->R == 1) return TB_OK; /* nothing to sum */
    if (!c->mpi) {
        const int st = executor_group_init(&c->group, c->dev, c->R);
        if (st != TB_EUNSUPPORTED) return st;
        snprintf(c->stage_why, sizeof c->stage_why, "%s", tb_error_get());
        tb_error_clear();
    }
    c->stage = calloc((size_t)c->R, sizeof *c->stage);
    if (!c->stage) return tb_error_set(TB_ENOMEM, "mirrored: out of memory");
    for (int r = 0; r < c->R; r++) {
        if (!(c->stage[r] = malloc((c->n_params ? c->n_params : 1) * sizeof(float))))
            return tb_error_set(TB_ENOMEM, "mirrored: out of memory for host copies of the gradients");
        c->grads[r] = c->stage[r];
    }
    return TB_OK;
}

/* Over MPI: rank 0, its first replica created (root_ok: whether that worked), sends the convolution choices its
 * preparation timed or found; every other rank takes them before creating its own replicas, so that every rank
 * runs the same kernels (timed apart, two ranks could pick different ones where two algorithms time within the
 * machine's noise, and then no two runs of one command gave the same bits). A rank 0 that failed sends no
 * choices, and the others stop with it rather than wait for a collective it never reaches. */
static int mir_tune_share(const struct mir_ctx *c, int root_ok)
{
    long n = 0;
    if (c->rank == 0) n = root_ok ? (long)executor_choices_export(NULL, 0) : -1;
    int st = mpi_transport_bcast(&n, sizeof n);
    if (st != TB_OK || n == 0) return st;
    if (n < 0) return c->rank == 0 ? TB_OK : tb_error_set(TB_EIO, "mirrored: rank 0 could not prepare its replicas");
    void *buf = malloc((size_t)n);
    if (!buf) return tb_error_set(TB_ENOMEM, "mirrored: out of memory for rank 0's kernel choices");
    if (c->rank == 0) executor_choices_export(buf, (size_t)n);
    st = mpi_transport_bcast(buf, (size_t)n);
    if (st == TB_OK && c->rank != 0) st = executor_choices_import(buf, (size_t)n); /* over this rank's file's */
    free(buf);
    return st;
}

static int mir_prepare(struct backend *b, const struct model *m, const struct run_config *cfg)
{
    struct mir_ctx *c = b->ctx;
    const long cores = tpool_cpus();
    if (cfg->transport_mpi) {
        int st = mpi_transport_init(&c->rank, &c->world);
        if (st != TB_OK) return st;
        c->mpi = 1;
        /* Replicas per rank: --devices, else one (ranks started on one machine would share its cores). */
        c->R = cfg->n_devices > 0 ? cfg->n_devices : 1;
        const long G = (long)c->world * c->R;
        if (cfg->n_devices < 0 || c->R > 1024)
            return tb_error_set(TB_EINVAL, "--devices must be in 1..1024 (got %d)", cfg->n_devices);
        if (G > cfg->batch)
            return tb_error_set(TB_EINVAL, "%d MPI rank%s x %d device%s is more than the %d sample%s of a batch",
                                c->world, c->world == 1 ? "" : "s", c->R, c->R == 1 ? "" : "s", cfg->batch,
                                cfg->batch == 1 ? "" : "s");
        if (cfg->batch % G)
            return tb_error_set(TB_EINVAL, "--batch %d does not split evenly over %d MPI rank%s x %d device%s",
                                cfg->batch, c->world, c->world == 1 ? "" : "s", c->R, c->R == 1 ? "" : "s");
        if (cfg->sync_bn && c->R > 1)
            return tb_error_set(TB_EUNSUPPORTED, "--sync-bn over MPI takes one device per rank (--devices 1): its "
                                                 "collective runs inside each replica's pass");
        c->shard = (int)(cfg->batch / G);
    } else {
        /* Not told: one replica a GPU where the device counts its instances, else one a core. */
        const int count = executor_device_count(cfg->device[0] ? cfg->device : "cpu");
        int R = cfg->n_devices > 0 ? cfg->n_devices : count > 0 ? count : (cores > 0 ? (int)cores : 1);
        if (cfg->n_devices < 0 || R > 1024)
            return tb_error_set(TB_EINVAL, "--devices must be in 1..1024 (got %d)", cfg->n_devices);
        if (R > cfg->batch)
            return tb_error_set(TB_EINVAL, "--devices %d is more than the %d sample%s of a batch: each replica needs "
                                           "at least one sample (--batch is the global batch; --batch-per-replica B "
                                           "gives each replica B)", R, cfg->batch, cfg->batch == 1 ? "" : "s");
        if (cfg->batch % R)
            return tb_error_set(TB_EINVAL, "--batch %d does not split evenly over %d devices (choose a multiple of %d)",
                                cfg->batch, R, R);
        c->R = R;
        c->shard = cfg->batch / R;
    }
    c->dev = calloc((size_t)c->R, sizeof *c->dev);
    c->grads = calloc((size_t)c->R, sizeof *c->grads);
    c->params = calloc((size_t)c->R, sizeof *c->params);
    c->loss = calloc((size_t)c->R, sizeof *c->loss);
    c->t_compute = calloc((size_t)c->R, sizeof(double));
    c->t_allreduce = calloc((size_t)c->R, sizeof(double));
    c->t_idle = calloc((size_t)c->R, sizeof(double));
    c->status = calloc((size_t)c->R, sizeof(int));
    if (!c->dev || !c->grads || !c->params || !c->loss || !c->t_compute || !c->t_allreduce || !c->t_idle ||
        !c->status)
        return tb_error_set(TB_ENOMEM, "mirrored: out of memory");
    struct executor_config child;
    backend_executor_config(cfg, c->shard, 1, &child);
    child.no_fused_step = 1; /* the all-reduce sits between backward and update */
    /* A replica among several is a one-core device: its splits are cut as the fewest units any machine cuts
     * for, not for all the machine's cores, which its one thread would run one after another (on 16 cores:
     * 3.7 % more bytes a step, simulated). Its bits are then the same on every machine. One replica is cpu's
     * schedule and keeps cpu's cut (its bits). TB_REPLICA_CUT=0: the machine's cut (an A/B, exec_units). */
    child.par_units = tb_replica_units(c->mpi ? c->world * c->R : c->R);
    if (child.eval_batch > c->shard * 4) child.eval_batch = child.eval_batch / c->R > 0 ? child.eval_batch / c->R : 1;
    c->n_params = m->n_params;
    for (int r = 0; r < c->R; r++) {
        child.ordinal = r; /* cuda: replica r on GPU r mod the GPUs present */
        int st = r == 0 && c->mpi && c->rank != 0 ? mir_tune_share(c, 0) : TB_OK;
        if (st != TB_OK) return st;
        st = executor_create(&c->dev[r], m, &child);
        if (r == 0 && c->mpi && c->rank == 0) {
            const int shared = mir_tune_share(c, st == TB_OK);
            if (st == TB_OK) st = shared;
        }
        if (st != TB_OK) return st;
        /* The ring and MPI work on host memory in place; device memory goes through the device's
         * collective or host copies. */
        struct executor_buffer g, p;
        if ((st = executor_grad_buffer(&c->dev[r], &g)) != TB_OK || (st = executor_buffer(&c->dev[r], TF_PARAMS, &p)))
            return st;
        if (g.prec != STAGE_PREC_FP32)
            return tb_error_set(TB_EUNSUPPORTED, "mirrored: device %s stores 2-byte gradients", c->dev[r].cfg.device);
        c->offhost |= !g.host || !p.host;
        c->grads[r] = g.host ? g.data : NULL;
        c->params[r] = p.host ? p.data : NULL;
        /* One copy of the parameters for the process's replicas where every update is sharded (see the top of
         * the file): replica 0's, on the host; each later replica is checked to use them. */
        if (r == 0 && shards_update(c) && !tb_env_off("TB_SHARED_PARAMS")) child.params_from = c->params[0];
    }
    c->shared_params = child.params_from != NULL && !c->offhost;
    for (int r = 1; r < c->R && c->shared_params; r++) c->shared_params = c->params[r] == c->params[0];
    /* Replicas that took replica 0's parameters cannot each keep a copy again: only all or none share. */
    if (child.params_from && !c->shared_params)
        return tb_error_set(TB_EUNSUPPORTED, "mirrored: device %s's replicas did not all take one copy of the "
                                             "parameters (TB_SHARED_PARAMS=0 gives each its own)", c->dev[0].cfg.device);
    if (c->offhost) {
        const int st = prepare_offhost(c, cfg);
        if (st != TB_OK) return st;
    }
    /* One replica in all: the global batch is the local one, and the local statistics (cpu's float path) are
     * the exact sync ones; the f64 collective would round them another way and lose cpu's bits. */
    const int replicas_total = c->mpi ? c->world * c->R : c->R;
    c->sync_bn_local = cfg->sync_bn && replicas_total == 1;
    if (cfg->sync_bn && replicas_total > 1) {
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].op == OP_BN && 2 * (size_t)m->tensors[m->layers[i].in].c > c->max_c2)
                c->max_c2 = 2 * (size_t)m->tensors[m->layers[i].in].c;
        c->coll = calloc((size_t)c->R, sizeof *c->coll);
        c->rep = calloc((size_t)c->R, sizeof *c->rep);
        c->slots = calloc((size_t)c->R * (c->max_c2 ? c->max_c2 : 1), sizeof(double));
        if (!c->coll || !c->rep || !c->slots) return tb_error_set(TB_ENOMEM, "mirrored: out of memory");
        const int world = c->mpi ? c->world : c->R;
        for (int r = 0; r < c->R; r++) {
            c->rep[r] = (struct mir_replica){c, r};
            c->coll[r] = (struct exec_collective){c->mpi ? mpi_allreduce_f64_cb : shm_allreduce_f64, &c->rep[r],
                                                  (size_t)world};
        }
    }
    if (c->R > 1) {
        c->pool = tpool_create(c->R, 1);
        if (!c->pool) return tb_error_set(TB_ENOMEM, "mirrored: cannot start %d device workers", c->R);
    }
    return TB_OK;
}

/* Sums the losses and splits the step by the replicas' mean compute, idle and all-reduce seconds, as the ipu takes
 * its devices' means: every replica's compute + idle is the same span (they meet at the barrier), so the means add
 * up to it. The maximum of each apart added the slowest replica's compute to the fastest's wait: parts of 1.62 ms
 * in a 1.15 ms step. */
static int collect(struct mir_ctx *c, struct step_stats *st)
{
    double tc = 0, ta = 0, ti = 0, loss = 0;
    int rc = TB_OK;
    for (int r = 0; r < c->R; r++) {
        tc += c->t_compute[r], ta += c->t_allreduce[r], ti += c->t_idle[r];
        loss += c->loss[r];
        if (c->status[r] != TB_OK && rc == TB_OK) rc = c->status[r];
    }
    st->loss_sum = loss;
    st->stop_signal = c->stop_seen;
    st->t_compute = tc / c->R;
    st->t_allreduce = ta / c->R;
    st->t_idle = ti / c->R;
    if (!isfinite(loss)) {
        st->nonfinite = 1;
        return tb_error_set(TB_EDIVERGED, "loss is %g", loss);
    }
    return rc;
}

static int mir_forward_backward(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    struct mir_ctx *c = b->ctx;
    c->batch = batch, c->step = step, c->do_update = 0;
    trace_begin_all(c);
    run_all(c, step_task);
    return collect(c, st);
}

static void update_task(void *arg, int r, int nth)
{
    struct mir_ctx *c = arg;
    (void)nth;
    /* One copy of the parameters: each replica updates its chunk of them (and of its optimizer state, whose
     * chunks get_tensors reads from their owners), not all of it R times over. */
    if (c->shared_params)
        c->status[r] = executor_update_part(&c->dev[r], c->step, allreduce_ring_owned(c->R, r), c->R);
    else
        c->status[r] = executor_update(&c->dev[r], c->step);
}

static int mir_update(struct backend *b, long step, struct step_stats *st)
{
    struct mir_ctx *c = b->ctx;
    (void)st;
    c->step = step;
    run_all(c, update_task);
    for (int r = 0; r < c->R; r++)
        if (c->status[r] != TB_OK) return c->status[r];
    return TB_OK;
}

static int mir_train_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st)
{
    struct mir_ctx *c = b->ctx;
    c->batch = batch, c->step = step, c->do_update = 1;
    trace_begin_all(c);
    run_all(c, step_task);
    return collect(c, st);
}

/* Every replica takes as many batches ahead as its executor (they are configured alike). */
static int mir_prefetches(struct backend *b) { return executor_prefetches(&((struct mir_ctx *)b->ctx)->dev[0]); }

/* Each replica's shard of a later step, handed to its executor from this thread. */
static int mir_prefetch(struct backend *b, const struct batch *batch, long step)
{
    struct mir_ctx *c = b->ctx;
    for (int r = 0; r < c->R; r++) {
        const struct executor_pass p = shard_pass(c, r, batch, step);
        const int st = executor_prefetch(&c->dev[r], &p);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

/* Evaluation splits the batch over the replicas (parameters are identical) and sums the counts. */
static const struct batch *eval_batch;
static struct eval_stats *eval_parts;
static float *eval_logits;

static void eval_task(void *arg, int r, int nth)
{
    struct mir_ctx *c = arg;
    (void)nth;
    const int parts = c->mpi ? c->world * c->R : c->R, me = global_replica(c, r);
    const int n = eval_batch->n, lo = (int)((long)n * me / parts), hi = (int)((long)n * (me + 1) / parts);
    const size_t per = c->dev[r].m->tensors[c->dev[r].m->input].per_sample;
    memset(&eval_parts[r], 0, sizeof eval_parts[r]);
    if (eval_logits) { /* each replica writes its slice's rows */
        const struct model *m = c->dev[r].m;
        eval_parts[r].logits = eval_logits + (size_t)lo * m->tensors[m->layers[m->n_layers - 1].in].per_sample;
    }
    if (hi > lo)
        c->status[r] = executor_evaluate(&c->dev[r], eval_batch->x + (size_t)lo * per, eval_batch->y + lo, hi - lo,
                                         &eval_parts[r]);
}

static int mir_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev)
{
    struct mir_ctx *c = b->ctx;
    struct eval_stats parts[1024];
    /* Under MPI a rank holds only its slice of the logits; gathering them is not implemented. */
    if (ev->logits && c->mpi) return tb_error_set(TB_EUNSUPPORTED, "mirrored: logits are not gathered over MPI");
    eval_batch = batch, eval_parts = parts, eval_logits = ev->logits;
    for (int r = 0; r < c->R; r++) c->status[r] = TB_OK;
    run_all(c, eval_task);
    double loss = 0;
    long counts[2] = {0, 0};
    for (int r = 0; r < c->R; r++) {
        if (c->status[r] != TB_OK) return c->status[r];
        loss += parts[r].loss_sum, counts[0] += parts[r].correct, counts[1] += parts[r].n;
    }
    if (c->mpi) {
        /* The stop offers with the counts, as a step's loss carries them (mpi_between_ranks). */
        int votes[2];
        stop_votes(c, votes);
        long sums[4] = {counts[0], counts[1], votes[0], votes[1]};
        int st = mpi_transport_allreduce_f64(&loss, 1);
        if (st == TB_OK) st = mpi_transport_allreduce_long(sums, 4);
        if (st != TB_OK) return st;
        counts[0] = sums[0], counts[1] = sums[1];
        c->stop_seen = stop_of_votes((double)sums[2], (double)sums[3]);
        if (c->stop_seen) ev->stop_signal = c->stop_seen;
    }
    ev->loss_sum += loss, ev->correct += counts[0], ev->n += counts[1];
    return TB_OK;
}

static int mir_get(struct backend *b, enum tensor_family f, float *dst)
{
    struct mir_ctx *c = b->ctx;
    if (c->R == 1 || c->offhost || (f != TF_GRADS && f != TF_OPT)) /* offhost: never sharded */
        return executor_get_tensors(&c->dev[0], f, dst);
    /* After a sharded update only a chunk's owner has its summed gradients and its optimizer state
     * (after an all-reduce every replica has all of it, so this copies equal values). */
    const size_t np = c->n_params;
    for (int r = 0; r < c->R; r++) {
        struct executor_buffer own;
        int st = executor_buffer(&c->dev[r], f, &own);
        if (st != TB_OK) return st;
        size_t lo, hi;
        tb_slice(np, allreduce_ring_owned(c->R, r), c->R, &lo, &hi);
        for (size_t base = 0; base < own.n; base += np)
            memcpy(dst + base + lo, own.data + base + lo, (hi - lo) * sizeof(float));
    }
    return TB_OK;
}

static int mir_set(struct backend *b, enum tensor_family f, const float *src)
{
    struct mir_ctx *c = b->ctx;
    for (int r = 0; r < c->R; r++) {
        int st = executor_set_tensors(&c->dev[r], f, src);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

static void mir_describe(struct backend *b, char *buf, size_t n)
{
    struct mir_ctx *c = b->ctx;
    const char *copies = c->stage ? " of host copies of the gradients" : "";
    /* One device, rank or sample is said in the singular (--devices 1, mpirun -np 1, --batch-per-replica 1). */
    const char *ranks = c->world == 1 ? "" : "s", *devs = c->R == 1 ? "" : "s", *samples = c->shard == 1 ? "" : "s";
    if (c->mpi && c->R == 1)
        snprintf(buf, n, "mirrored: %d MPI rank%s, %d sample%s each, MPI_Allreduce%s", c->world, ranks, c->shard,
                 samples, copies);
    else if (c->mpi)
        snprintf(buf, n, "mirrored: %d MPI rank%s x %d devices, %d sample%s each, ring within a rank and "
                         "MPI_Allreduce of its chunks between ranks%s%s%s", c->world, ranks, c->R, c->shard, samples,
                 copies, shards_update(c) ? ", update sharded over a rank's devices" : "",
                 c->shared_params ? ", one copy of the parameters a rank" : "");
    else if (c->offhost) {
        char how[320];
        if (c->group.n) snprintf(how, sizeof how, "%s", c->group.how);
        else if (c->stage) snprintf(how, sizeof how, "ring all-reduce of host copies of the gradients (%s)", c->stage_why);
        else snprintf(how, sizeof how, "nothing to all-reduce");
        snprintf(buf, n, "mirrored: %d %s replica%s, %d sample%s each, %s", c->R, c->dev[0].cfg.device, devs,
                 c->shard, samples, how);
    } else
        snprintf(buf, n, "mirrored: %d device%s, %d sample%s each, ring all-reduce over shared memory%s%s%s", c->R,
                 devs, c->shard, samples, shards_update(c) ? ", update sharded over devices" : "",
                 c->shared_params ? ", one copy of the parameters" : "",
                 c->coll            ? ", sync BatchNorm"
                 : c->sync_bn_local ? ", sync BatchNorm over one replica (its own statistics)"
                                    : "");
}

static void mir_destroy(struct backend *b)
{
    struct mir_ctx *c = b->ctx;
    if (!c) return;
    tpool_destroy(c->pool);
    executor_group_free(&c->group); /* before its members */
    if (c->stage)
        for (int r = 0; r < c->R; r++) free(c->stage[r]);
    free(c->stage);
    if (c->dev)
        for (int r = 0; r < c->R; r++) executor_destroy(&c->dev[r]);
    free(c->dev);
    free(c->grads);
    free(c->params);
    free(c->loss);
    free(c->t_compute);
    free(c->t_allreduce);
    free(c->t_idle);
    free(c->status);
    free(c->coll);
    free(c->rep);
    free(c->slots);
    backend_trace_buf_free(&c->trace);
    free(c);
    b->ctx = NULL;
}

/* Replica 0's layer times (the replicas run the same layers on equal shards); --trace: one lane per replica
 * (under MPI, this rank's replicas as their global indices). */
static int mir_stats(struct backend *b, struct backend_stats *s)
{
    struct mir_ctx *c = b->ctx;
    struct executor_stats es;
    int rc = executor_stats(&c->dev[0], &es);
    if (rc != TB_OK) return rc;
    s->n_devices = c->mpi ? c->world * c->R : c->R;
    s->layer_profile = es.profile;
    s->conv_algos = es.conv_algos; /* replica 0's: every replica finds the same shapes in the one cache */
    if (c->pool) s->barriers = tpool_barriers(c->pool); /* the replicas' (ring steps, sync BatchNorm) */
    c->trace.n = 0;
    for (int r = 0; r < c->R && b->cfg.trace; r++)
        if ((rc = backend_executor_trace(&c->dev[r], global_replica(c, r), &c->trace)) != TB_OK) return rc;
    s->trace = c->trace.ev, s->n_trace = c->trace.n;
    return TB_OK;
}

static int mir_primary(struct backend *b)
{
    struct mir_ctx *c = b->ctx;
    return !c->mpi || c->rank == 0;
}

/* Over MPI the next step's loss all-reduce carries the offer to every rank (mpi_between_ranks). */
static int mir_offer_stop(struct backend *b, int signo)
{
    struct mir_ctx *c = b->ctx;
    if (!c->mpi || c->world < 2) return 0;
    c->stop_offer = signo;
    return 1;
}

/* The replicas share the seed (their dropout is keyed by the sample's global index). */
static int mir_set_seed(struct backend *b, uint64_t seed)
{
    struct mir_ctx *c = b->ctx;
    for (int r = 0; r < c->R; r++) {
        const int st = executor_set_seed(&c->dev[r], seed);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

static const struct backend_i mirrored_iface = {
    .name = "mirrored", .prepare = mir_prepare, .forward_backward = mir_forward_backward, .update = mir_update,
    .evaluate = mir_evaluate, .get_tensors = mir_get, .set_tensors = mir_set, .destroy = mir_destroy,
    .train_step = mir_train_step, .describe = mir_describe, .is_primary = mir_primary,
    .stats = mir_stats, .prefetches = mir_prefetches, .prefetch = mir_prefetch, .set_seed = mir_set_seed,
    .offer_stop = mir_offer_stop,
};

int backend_mirrored_create(struct backend *b)
{
    struct mir_ctx *c = calloc(1, sizeof *c);
    if (!c) return tb_error_set(TB_ENOMEM, "mirrored: out of memory");
    b->i = &mirrored_iface;
    b->ctx = c;
    return TB_OK;
}
