/* executor_cuda_stage.c — a cuda stage executor's plan, boundaries and figures (executor_cuda_stage.h); its
 * passes, update and tensors are executor_cuda.c's, on the slot the pass names and the slices planned here.
 * The packed layout is exec.c's (model_boundary_tensors in id order, each tensor n · per_sample floats at a
 * 16-float-aligned offset; gradients only for the tensors that need one), as the cpu stage packs it.
 */
#include "executor_cuda_stage.h"

#include "layout.h"
#include "model_range.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

int tb_cuda_stage_refuse(const struct executor_config *cfg)
{
    if (cfg->prec != STAGE_PREC_FP32)
        return tb_error_set(TB_EUNSUPPORTED, "cuda: stage executors are fp32 only: %s storage of a pipeline stage "
                                             "(ipu --precision %s%s) is not implemented on this device yet",
                            stage_prec_name(cfg->prec), stage_prec_name(cfg->prec), cfg->master ? "m" : "");
    if (cfg->recompute || cfg->n_seg > 0)
        return tb_error_set(TB_EUNSUPPORTED, "cuda: stage executors do not recompute activations or run as segments "
                                             "on this device yet (ipu --recompute)");
    return TB_OK;
}

int tb_cuda_stage_plan(struct cu_stage *st, const struct model *m, const struct executor_config *cfg)
{
    memset(st, 0, sizeof *st);
    st->l0 = cfg->l0, st->l1 = cfg->l1, st->B = cfg->n_max;
    st->n_slots = cfg->slots > 0 ? cfg->slots : 1;
    /* The slices as the cpu stage takes them (executor_cpu_stage.c). */
    model_range_slice(m, st->l0, st->l1, 0, &st->p0, &st->p1);
    model_range_slice(m, st->l0, st->l1, 1, &st->q0, &st->q1);
    st->n_in = model_boundary_tensors(m, st->l0, st->in_ids, TB_CUDA_STAGE_MAX_BOUNDARY);
    st->n_out = model_boundary_tensors(m, st->l1, st->out_ids, TB_CUDA_STAGE_MAX_BOUNDARY);
    if (st->n_in > TB_CUDA_STAGE_MAX_BOUNDARY || st->n_out > TB_CUDA_STAGE_MAX_BOUNDARY)
        return tb_error_set(TB_EINVAL, "cuda: more than %d tensors cross a split of %s", TB_CUDA_STAGE_MAX_BOUNDARY,
                            m->name);
    int rc = model_range_init(&st->sm, m, st->l0, st->l1);
    if (rc != TB_OK) return rc;
    st->act_floats = model_act_floats(&st->sm, st->B);
    st->in_floats = model_boundary_floats(m, st->l0, st->B, 0);
    st->out_grad_floats = model_boundary_floats(m, st->l1, st->B, 1);
    /* Host buffers for conversions: imports of either kind, and the larger of the two exports. */
    const size_t x_acts = model_boundary_floats(m, st->l1, st->B, 0), x_grads = model_boundary_floats(m, st->l0, st->B, 1);
    const size_t x = x_acts > x_grads ? x_acts : x_grads;
    st->slot = calloc((size_t)st->n_slots, sizeof *st->slot);
    if (!st->slot || (st->in_floats && !(st->conv[0] = malloc(st->in_floats * sizeof(float)))) ||
        (st->out_grad_floats && !(st->conv[1] = malloc(st->out_grad_floats * sizeof(float)))) ||
        (x && !(st->xbuf = malloc(x * sizeof(float)))))
        return tb_error_set(TB_ENOMEM, "cuda: out of memory planning the stage of layers %d..%d", st->l0, st->l1 - 1);
    for (int k = 0; k < st->n_slots; k++) st->slot[k].n_max = st->B;
    return TB_OK;
}

void tb_cuda_stage_free(struct cu_stage *st)
{
    for (int k = 0; st->slot && k < st->n_slots; k++)
        if (st->slot[k].acts) cudaFree(st->slot[k].acts);
    if (st->dacts) cudaFree(st->dacts);
    free(st->slot), free(st->conv[0]), free(st->conv[1]), free(st->xbuf);
    model_range_free(&st->sm);
    memset(st, 0, sizeof *st);
}

size_t tb_cuda_stage_import(struct cu_stage *st, int grads, const void *src, int n, enum stage_prec prec, float scale)
{
    TB_ASSERT(grads ? st->l1 < st->sm.n_layers : st->l0 > 0);
    st->pending_n[grads] = n;
    if (prec == STAGE_PREC_FP32 && scale == 1.0f) { /* read in place by the pass's copy */
        st->pending[grads] = src;
        return 0;
    }
    const int *ids = grads ? st->out_ids : st->in_ids, k = grads ? st->n_out : st->n_in;
    const size_t eb = stage_prec_bytes(prec);
    size_t off = 0, bad = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &st->sm.tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        bad += stage_prec_unpack(st->conv[grads] + off, (const char *)src + off * eb, len, prec, scale);
        off += tb_align16(len);
    }
    st->pending[grads] = st->conv[grads];
    return bad;
}

int tb_cuda_stage_feed(struct cu_stage *st, int grads, const struct cu_acts *a, int n, cudaStream_t s)
{
    if (!(grads ? st->out_grad_floats : st->in_floats)) return TB_OK; /* nothing crosses (that needs a gradient) */
    const float *src = st->pending[grads];
    const char *what = grads ? "gradients" : "activations";
    if (!src)
        return tb_error_set(TB_EINVAL, "cuda: a %s of stage layers %d..%d without imported %s (executor_import_boundary "
                                       "first)", grads ? "backward" : "forward", st->l0, st->l1 - 1, what);
    if (st->pending_n[grads] != n)
        return tb_error_set(TB_EINVAL, "cuda: %s imported for %d samples, but the pass of stage layers %d..%d has %d",
                            what, st->pending_n[grads], st->l0, st->l1 - 1, n);
    st->pending[grads] = NULL;
    const struct cu_env e = {.m = &st->sm};
    const int *ids = grads ? st->out_ids : st->in_ids, k = grads ? st->n_out : st->n_in;
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &st->sm.tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        void *dst = grads ? tb_cuda_dact(&e, a, ids[j]) : tb_cuda_act(&e, a, ids[j]);
        TB_CU(cudaMemcpyAsync(dst, src + off, len * sizeof(float), cudaMemcpyHostToDevice, s));
        off += tb_align16(len);
    }
    return TB_OK;
}

int tb_cuda_stage_export(struct cu_stage *st, int grads, int slot, void *dst, int n, enum stage_prec prec, float scale,
                         cudaStream_t s, size_t *bad)
{
    TB_ASSERT(grads ? st->l0 > 0 : st->l1 < st->sm.n_layers);
    *bad = 0;
    const int direct = prec == STAGE_PREC_FP32 && scale == 1.0f; /* straight into dst: nothing to convert */
    float *host = direct ? dst : st->xbuf;
    const struct cu_env e = {.m = &st->sm};
    /* Gradients: the shared arena, which the last backward left (whatever the slot). */
    const struct cu_acts a = {.n_max = st->B, .acts = st->slot[slot].acts, .dacts = st->dacts};
    const int *ids = grads ? st->in_ids : st->out_ids, k = grads ? st->n_in : st->n_out;
    size_t off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &st->sm.tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        const void *src = grads ? tb_cuda_dact(&e, &a, ids[j]) : tb_cuda_act(&e, &a, ids[j]);
        TB_CU(cudaMemcpyAsync(host + off, src, len * sizeof(float), cudaMemcpyDeviceToHost, s));
        off += tb_align16(len);
    }
    TB_CU(cudaStreamSynchronize(s));
    if (direct) return TB_OK;
    const size_t eb = stage_prec_bytes(prec);
    off = 0;
    for (int j = 0; j < k; j++) {
        const struct tensor *t = &st->sm.tensors[ids[j]];
        if (grads && !t->needs_grad) continue;
        const size_t len = (size_t)n * t->per_sample;
        *bad += stage_prec_pack((char *)dst + off * eb, st->xbuf + off, len, prec, scale);
        off += tb_align16(len);
    }
    return TB_OK;
}

void tb_cuda_stage_stats(const struct cu_stage *st, struct executor_stats *s)
{
    const double np = (double)(st->p1 - st->p0), act = 4.0 * (double)st->act_floats;
    s->t_recompute = 0.0;
    s->nonfinite_grads = 0; /* fp32 gradients: nothing overflows a 2-byte store */
    s->n_segments = 0;
    s->act_fixed_bytes = act; /* the gradient arena */
    s->act_slot_bytes = act;  /* a whole-stage slot per micro-batch held */
    s->grad_bytes = 4.0 * np;
    s->weight_bytes = 4.0 * np;
    s->window_bytes = 0.0;
}
