/* ipu_plan.c — configuration, split points, schedules and stage plans for the ipu backend. */
#include "ipu_plan.h"

#include "executor.h"
#include "layout.h"
#include "model_range.h"
#include "status.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ipu_schedule_name(enum ipu_schedule s) { return s == IPU_SCHED_GPIPE ? "gpipe" : "1f1b"; }

/* Parses "5,12" into strictly increasing block indices in 1..nb-1; returns the count or -1. */
static int parse_split(const char *s, int nb, int *out, int max)
{
    int n = 0, prev = 0;
    const char *c = s;
    while (*c) {
        while (isspace((unsigned char)*c)) c++;
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || errno) return -1;
        if (v <= prev || v >= nb || n >= max) return -1;
        out[n++] = (int)v;
        prev = (int)v;
        c = end;
        while (isspace((unsigned char)*c)) c++;
        if (*c == ',') {
            c++;
            if (!*c) return -1;
        } else if (*c) {
            return -1;
        }
    }
    return n;
}

int ipu_plan_resolve(struct ipu_plan *p, const struct model *m, const struct run_config *cfg)
{
    memset(p, 0, sizeof *p);
    const int nb = m->n_blocks;
    if (!cfg->ipu.schedule[0] || strcmp(cfg->ipu.schedule, "1f1b") == 0 || strcmp(cfg->ipu.schedule, "interleaved") == 0)
        p->sched = IPU_SCHED_1F1B;
    else if (strcmp(cfg->ipu.schedule, "gpipe") == 0 || strcmp(cfg->ipu.schedule, "grouped") == 0)
        p->sched = IPU_SCHED_GPIPE;
    else
        return tb_error_set(TB_EINVAL, "ipu: unknown --schedule '%s' (valid: gpipe, 1f1b)", cfg->ipu.schedule);

    const char *pr = cfg->ipu.precision;
    if (stage_prec_parse(pr, &p->prec, &p->master) != 0)
        return tb_error_set(TB_EINVAL, "ipu: unknown --precision '%s' (valid: fp32, bf16, fp16; bf16m, fp16m keep "
                                       "fp32 master weights)", pr);

    int split[IPU_MAX_STAGES], ns = 0;
    if (cfg->ipu.split[0]) {
        ns = parse_split(cfg->ipu.split, nb, split, IPU_MAX_STAGES - 1);
        if (ns < 0)
            return tb_error_set(TB_EINVAL, "ipu: --split '%s': split points must be strictly increasing block indices "
                                           "in 1..%d, comma-separated (%s has %d blocks)", cfg->ipu.split, nb - 1, m->name, nb);
        p->split_given = 1;
    }
    if (cfg->ipu.stages < 0) return tb_error_set(TB_EINVAL, "ipu: --stages must be at least 1 (got %d)", cfg->ipu.stages);
    int S = cfg->ipu.stages > 0 ? cfg->ipu.stages : p->split_given ? ns + 1 : (nb < 2 ? nb : 2);
    if (S > nb)
        return tb_error_set(TB_EINVAL, "ipu: --stages %d is more than the %d blocks of %s (stages split at block "
                                       "boundaries)", S, nb, m->name);
    if (S > IPU_MAX_STAGES) return tb_error_set(TB_EINVAL, "ipu: --stages %d is more than %d", S, IPU_MAX_STAGES);
    if (p->split_given && ns != S - 1)
        return tb_error_set(TB_EINVAL, "ipu: --split '%s' gives %d split points but --stages %d needs %d", cfg->ipu.split,
                            ns, S, S - 1);
    p->S = S;

    if (cfg->ipu.replicas < 0 || cfg->ipu.micro_batch < 0 || cfg->ipu.ga < 0)
        return tb_error_set(TB_EINVAL, "ipu: --replicas, --micro-batch and --ga must be positive (got %d, %d, %d)",
                            cfg->ipu.replicas, cfg->ipu.micro_batch, cfg->ipu.ga);
    const int N = cfg->batch;
    const int unit = S == 1 ? 1 : p->sched == IPU_SCHED_GPIPE ? 2 * S : S;
    int R = cfg->ipu.replicas, B = cfg->ipu.micro_batch, G = cfg->ipu.ga;
    if (R == 0) {
        if (B > 0 && G > 0) {
            if (N % (B * G))
                return tb_error_set(TB_EINVAL, "ipu: --batch %d is not a multiple of --micro-batch %d × --ga %d", N, B, G);
            R = N / (B * G);
        } else {
            R = 1;
        }
    }
    if (B == 0 && G == 0) {
        if (N % R)
            return tb_error_set(TB_EINVAL, "ipu: --batch %d does not split evenly over %d replicas", N, R);
        const int per = N / R;
        /* The automatic choice gives a pipeline at least 2·S micro-batches, a rule for speed, not a legal
         * minimum: fill and drain idle the stages (S-1)/(G+S-1) of a step, which 1f1b at G = S (legal with --ga)
         * makes a third to a half, and 2·S a fifth to a third (gpipe's unit is 2·S already). */
        const int gmin = S == 1 ? 1 : 2 * S;
        /* The smallest legal G (largest micro-batch: the kernels' best case) whose activations fit in
         * a third of the machine's memory (it is shared): about three copies of the whole model's
         * activations for B samples (the slots stages hold in flight plus their gradients, or the tuning
         * instance at prepare). */
        double budget = executor_host_mem_total() / 3.0;
        /* ... and in what is available now, when other processes hold more than two thirds of it. */
        const double avail = executor_host_mem_available();
        if (avail > 0.0 && 0.9 * avail < budget) budget = 0.9 * avail;
        const double per_sample = 3.0 * 4.0 * (double)m->unit_floats * (double)R;
        int g_first = 0; /* the pipeline's own least accumulation: anything more was memory's choice */
        for (int g = gmin; g <= per; g += unit) {
            if (per % g) continue;
            if (!g_first) g_first = g;
            G = g;
            if ((double)(per / g) * per_sample <= budget) break;
        }
        if (G == 0) {
            /* The least accumulation --ga accepts (at least S, a multiple of unit) that divides the batch: the
             * run the user can still ask for, as the explicit check below would take it. */
            int g_legal = 0;
            for (int g = unit; g < gmin && g <= per && !g_legal; g += unit)
                if (g >= S && per % g == 0) g_legal = g;
            /* "each of the 1 replicas" where --replicas is 1 (the default): the one replica is "the replica". */
            char each[48];
            if (R == 1) snprintf(each, sizeof each, "the replica");
            else snprintf(each, sizeof each, "each of the %d replicas", R);
            if (g_legal)
                return tb_error_set(TB_EINVAL, "ipu: global batch %d: the automatic micro-batching gives %s at least "
                                               "2 x %d stages = %d micro-batches (fewer leave the pipeline idle for a "
                                               "larger share of a step), and no such count divides its %d samples; "
                                               "--micro-batch %d --ga %d runs it, or --stages 1",
                                    N, each, S, gmin, per, per / g_legal, g_legal);
            return tb_error_set(TB_EINVAL, "ipu: global batch %d cannot be cut into micro-batches for %d stages: %s "
                                           "needs a multiple of %d micro-batches (%s) dividing its %d sample%s, as "
                                           "--micro-batch and --ga do; or --stages 1", N, S, each, unit,
                                ipu_schedule_name(p->sched), per, per == 1 ? "" : "s");
        }
        B = per / G;
        p->mb_chosen = G > g_first ? 2 : 1;
    } else if (G == 0) {
        if (N % (B * R))
            return tb_error_set(TB_EINVAL, "ipu: --batch %d is not a multiple of --micro-batch %d × %d replica%s", N, B,
                                R, R == 1 ? "" : "s");
        G = N / (B * R);
    } else if (B == 0) {
        if (N % (G * R))
            return tb_error_set(TB_EINVAL, "ipu: --batch %d is not a multiple of --ga %d × %d replica%s", N, G, R,
                                R == 1 ? "" : "s");
        B = N / (G * R);
    }
    if ((long)B * G * R != N)
        return tb_error_set(TB_EINVAL, "ipu: micro-batch %d × GA %d × %d replica%s = %ld sample%s, but the global "
                                       "batch (--batch) is %d", B, G, R, R == 1 ? "" : "s", (long)B * G * R,
                            (long)B * G * R == 1 ? "" : "s", N);
    if (S > 1 && G < S)
        return tb_error_set(TB_EINVAL, "ipu: --ga %d is less than the %d stages: the pipeline would never fill", G, S);
    if (G % unit)
        return tb_error_set(TB_EINVAL, "ipu: --ga %d is not divisible by %d, as the %s schedule needs with %d stages "
                                       "(gpipe: a multiple of 2×stages, 1f1b: of stages)", G, unit,
                            ipu_schedule_name(p->sched), S);
    if (cfg->n_devices > 0 && S * R > cfg->n_devices)
        return tb_error_set(TB_EINVAL, "ipu: %d stage%s × %d replica%s need %d devices, but --devices is %d", S,
                            S == 1 ? "" : "s", R, R == 1 ? "" : "s", S * R, cfg->n_devices);
    if (S * R > 1024) return tb_error_set(TB_EINVAL, "ipu: %d devices is more than 1024", S * R);
    p->R = R, p->G = G, p->B = B;
    p->recompute = cfg->ipu.recompute != 0;
    /* A static fp16 loss scale (0 = dynamic); recorded whatever the precision, used only by fp16. */
    const float ls = cfg->ipu.loss_scale;
    if (!(ls == 0.0f || (ls >= (float)RUN_LOSS_SCALE_MIN && ls <= (float)RUN_LOSS_SCALE_MAX)))
        return tb_error_set(TB_EINVAL, "ipu: --loss-scale %g is outside [%g, %g] (or 0 for dynamic)",
                            (double)cfg->ipu.loss_scale, RUN_LOSS_SCALE_MIN, RUN_LOSS_SCALE_MAX);
    p->loss_scale = cfg->ipu.loss_scale;
    p->prefetch = cfg->ipu.prefetch == 0 ? 3 : cfg->ipu.prefetch < 0 ? 0 : cfg->ipu.prefetch;

    p->first_block[0] = 0;
    for (int s = 1; s < S; s++) p->first_block[s] = p->split_given ? split[s - 1] : (int)((long)nb * s / S);
    p->first_block[S] = nb;
    ipu_plan_set_layers(p, m);
    return TB_OK;
}

void ipu_plan_set_layers(struct ipu_plan *p, const struct model *m)
{
    int l = 0;
    for (int s = 0; s < p->S; s++) {
        while (l < m->n_layers && m->layers[l].block < p->first_block[s]) l++;
        p->l0[s] = l;
    }
    p->l0[0] = 0;
    p->l0[p->S] = m->n_layers;
}

void ipu_plan_balance(struct ipu_plan *p, const struct model *m, const double *t_fwd, const double *t_bwd)
{
    const int nb = m->n_blocks, S = p->S;
    double *w = calloc((size_t)nb + 1, sizeof *w), *f = calloc((size_t)nb + 1, sizeof *f);
    double *dp = malloc(sizeof(double) * (size_t)(S + 1) * (size_t)(nb + 1));
    int *arg = malloc(sizeof(int) * (size_t)(S + 1) * (size_t)(nb + 1));
    TB_ASSERT(w && f && dp && arg);
    /* Prefix sums over blocks: w = forward + backward, f = forward (paid twice with recompute: every
     * stage recomputes its segments, the last one all but its last segment, ignored here). */
    for (int i = 0; i < m->n_layers; i++) {
        w[m->layers[i].block + 1] += t_fwd[i] + t_bwd[i];
        f[m->layers[i].block + 1] += t_fwd[i];
    }
    for (int k = 0; k < nb; k++) w[k + 1] += w[k], f[k + 1] += f[k];
#define DP(j, k) dp[(size_t)(j) * (size_t)(nb + 1) + (size_t)(k)]
#define ARG(j, k) arg[(size_t)(j) * (size_t)(nb + 1) + (size_t)(k)]
    for (int j = 0; j <= S; j++)
        for (int k = 0; k <= nb; k++) DP(j, k) = 1e300, ARG(j, k) = -1;
    DP(0, 0) = 0.0;
    /* DP(j, k): the smallest possible slowest stage when stages 0..j-1 cover blocks [0,k). */
    for (int j = 0; j < S; j++)
        for (int a = j; a < nb; a++) {
            if (DP(j, a) >= 1e300) continue;
            for (int b = a + 1; b <= nb - (S - 1 - j); b++) {
                double cost = w[b] - w[a];
                if (p->recompute) cost += f[b] - f[a];
                double v = DP(j, a) > cost ? DP(j, a) : cost;
                if (v < DP(j + 1, b)) DP(j + 1, b) = v, ARG(j + 1, b) = a;
            }
        }
    int k = nb;
    for (int j = S; j > 0; j--) {
        p->first_block[j] = k;
        k = ARG(j, k);
        TB_ASSERT(k >= 0);
    }
    p->first_block[0] = 0;
#undef DP
#undef ARG
    free(w), free(f), free(dp), free(arg);
    ipu_plan_set_layers(p, m);
}

int ipu_plan_ops(const struct ipu_plan *p, int s, struct ipu_op *ops)
{
    const int G = p->G;
    int n = 0;
    if (s == p->S - 1) {
        for (int i = 0; i < G; i++) ops[n++] = (struct ipu_op){1, i}, ops[n++] = (struct ipu_op){0, i};
        return n;
    }
    if (p->sched == IPU_SCHED_GPIPE) {
        for (int i = 0; i < G; i++) ops[n++] = (struct ipu_op){1, i};
        for (int i = 0; i < G; i++) ops[n++] = (struct ipu_op){0, i};
        return n;
    }
    /* 1F1B: warm up with S−1−s forwards, then alternate one forward and one backward, then drain. */
    int warm = p->S - 1 - s;
    if (warm > G) warm = G;
    for (int i = 0; i < warm; i++) ops[n++] = (struct ipu_op){1, i};
    for (int i = 0; i < G - warm; i++) ops[n++] = (struct ipu_op){1, warm + i}, ops[n++] = (struct ipu_op){0, i};
    for (int i = G - warm; i < G; i++) ops[n++] = (struct ipu_op){0, i};
    return n;
}

int ipu_plan_in_flight(const struct ipu_plan *p, int s)
{
    struct ipu_op *ops = malloc(sizeof *ops * 2 * (size_t)p->G);
    TB_ASSERT(ops);
    const int n = ipu_plan_ops(p, s, ops);
    int cur = 0, peak = 0;
    for (int i = 0; i < n; i++) {
        cur += ops[i].fwd ? 1 : -1;
        if (cur > peak) peak = cur;
    }
    free(ops);
    return peak;
}

int ipu_plan_queue_depth(const struct ipu_plan *p)
{
    /* gpipe: the last stage returns gradients while earlier stages are still forwarding, so a queue
     * may hold all G messages. 1f1b: stage s runs at most S−s micro-batches ahead of its backward. */
    if (p->sched == IPU_SCHED_GPIPE) return p->G;
    return p->S + 1 < p->G ? p->S + 1 : p->G;
}

double ipu_plan_ideal_bubble(const struct ipu_plan *p)
{
    return (double)(p->S - 1) / (double)(p->G + p->S - 1);
}

size_t ipu_plan_first_offset(const struct model *m, int split, int buffers)
{
    return model_range_first_offset(m, split, buffers);
}

size_t ipu_plan_range_act_floats(const struct model *m, int l0, int l1, int n, char *work)
{
    return model_range_act_floats(m, l0, l1, n, work);
}

int ipu_plan_block_segments(const struct ipu_plan *p, const struct model *m, int s, int *cuts)
{
    /* The first layer of each block of the stage (blocks without layers merge). */
    int k = 0;
    cuts[k++] = p->l0[s];
    for (int i = p->l0[s]; i < p->l0[s + 1]; i++)
        if (m->layers[i].block != m->layers[cuts[k - 1]].block && i > cuts[k - 1]) cuts[k++] = i;
    cuts[k] = p->l0[s + 1];
    return k;
}

int ipu_plan_segments(const struct ipu_plan *p, const struct model *m, int s, int *cuts)
{
    const int b0 = p->first_block[s], b1 = p->first_block[s + 1];
    /* Candidate cuts: one segment per block. */
    int *pos = malloc(sizeof *pos * (size_t)(b1 - b0 + 1));
    TB_ASSERT(pos);
    const int nb = ipu_plan_block_segments(p, m, s, pos); /* boundaries pos[0..nb] */
    const size_t nn = (size_t)(nb + 1);
    double *act = calloc(nn * nn, sizeof *act), *ck = calloc(nn, sizeof *ck), *best = malloc(sizeof(double) * nn);
    int *from = malloc(sizeof(int) * nn), *bfrom = malloc(sizeof(int) * nn);
    char *work = malloc((size_t)m->n_tensors + 1);
    TB_ASSERT(act && ck && best && from && bfrom && work);
    for (int a = 0; a < nb; a++)
        for (int b = a + 1; b <= nb; b++)
            act[(size_t)a * nn + (size_t)b] = (double)ipu_plan_range_act_floats(m, pos[a], pos[b], p->B, work);
    for (int a = 1; a < nb; a++) ck[a] = (double)model_boundary_floats(m, pos[a], p->B, 0);
    const double held = (double)ipu_plan_in_flight(p, s);
    /* Peak floats with segments of at most `cap` floats: the working slot and its gradients (2·cap)
     * plus the checkpoints of every micro-batch held. For each candidate cap the fewest checkpoint
     * floats come from a shortest path over block boundaries; the best cap wins (fewer segments on a
     * tie: fewer boundary copies). */
    double best_score = 1e300;
    int best_k = 0;
    for (int ca = 0; ca < nb; ca++)
        for (int cb = ca + 1; cb <= nb; cb++) {
            const double cap = act[(size_t)ca * nn + (size_t)cb];
            for (int b = 0; b <= nb; b++) best[b] = 1e300, from[b] = -1;
            best[0] = 0.0;
            for (int b = 1; b <= nb; b++)
                for (int a = 0; a < b; a++) {
                    if (best[a] >= 1e300 || act[(size_t)a * nn + (size_t)b] > cap) continue;
                    const double v = best[a] + ck[a];
                    if (v < best[b]) best[b] = v, from[b] = a;
                }
            if (best[nb] >= 1e300) continue;
            int k = 0;
            for (int b = nb; b > 0; b = from[b]) k++;
            const double score = 2.0 * cap + held * best[nb];
            if (score < best_score || (score == best_score && k < best_k)) {
                best_score = score, best_k = k;
                memcpy(bfrom, from, sizeof(int) * nn);
            }
        }
    TB_ASSERT(best_k >= 1);
    int k = best_k;
    cuts[k] = pos[nb];
    for (int b = nb; b > 0; b = bfrom[b]) cuts[--k] = pos[bfrom[b]];
    TB_ASSERT(k == 0 && cuts[0] == p->l0[s]);
    free(pos), free(act), free(ck), free(best), free(from), free(bfrom), free(work);
    return best_k;
}

int ipu_stage_model_init(struct ipu_stage_model *sm, const struct model *src, int l0, int l1)
{
    return model_range_init(&sm->m, src, l0, l1);
}

void ipu_stage_model_free(struct ipu_stage_model *sm) { model_range_free(&sm->m); }
