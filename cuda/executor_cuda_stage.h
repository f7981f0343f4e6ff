/* executor_cuda_stage.h — the cuda device's stage executors (executor_config.l1 > 0, the ipu schedule's
 * devices on GPUs; issue 26 item 2), fp32 only: what a stage adds to a whole-model cuda executor. Its plan
 * (the layer range as a model of its own, model_range_init, so each activation slot holds just the tensors
 * the range touches; the parameter and buffer slices), its slots (one activation arena per micro-batch in
 * flight, one gradient arena shared by the backwards, as core/stage_run.c's), and the packed boundaries:
 * an import is recorded (fp32 at scale 1: the caller's buffer; else converted on the host into a buffer of
 * the stage's) and copied host to device at the start of the pass that reads it; an export copies device
 * to host and waits for the stream, then converts on the host. Precision and scale conversions are
 * core/stage_precision.h's, so the packed bytes and the counts of non-finite values are the cpu stage's.
 *
 * Refused (tb_cuda_stage_refuse): 2-byte storage (cfg.prec bf16 | fp16 on a stage; the cuda device's own
 * bf16 is mixed precision, a different thing) and recomputation or segments (cfg.recompute, cfg.cuts).
 * Private to cuda/executor_cuda*.c; one thread drives a stage (the executor's contract). Ran on an H200
 * (test_executor's stage tests; mnist-mlp through ipu on --device cuda within 1e-7 of the cpu device).
 */
#ifndef TB_EXECUTOR_CUDA_STAGE_H
#define TB_EXECUTOR_CUDA_STAGE_H

#include "executor.h"
#include "executor_cuda_layers.h"

#include <stddef.h>

#define TB_CUDA_STAGE_MAX_BOUNDARY 32 /* tensors crossing one split (the cpu stage's STAGE_MAX_BOUNDARY) */

struct cu_stage {
    int l0, l1;                  /* layers [l0,l1) */
    int n_slots, B;              /* activation slots; samples a pass holds at most (cfg.n_max) */
    struct model sm;             /* the range plan: the model's tables, activation offsets for the range only */
    size_t p0, p1, q0, q1;       /* its parameter and buffer slices of the canonical layout */
    size_t act_floats;           /* floats of one slot and of the gradient arena: model_act_floats(&sm, B) */
    struct cu_acts *slot;        /* (n_slots) each its own activations (device), dacts = the shared arena */
    float *dacts;                /* device (act_floats): the gradients of one backward at a time */
    int in_ids[TB_CUDA_STAGE_MAX_BOUNDARY], n_in;   /* tensors crossing the split before l0 */
    int out_ids[TB_CUDA_STAGE_MAX_BOUNDARY], n_out; /* tensors crossing the split before l1 */
    size_t in_floats, out_grad_floats; /* packed floats at B: activations in, gradients in */
    const float *pending[2];     /* host, fp32 packed: imported activations (0), gradients (1) not yet copied */
    int pending_n[2];            /* their samples */
    float *conv[2];              /* host: an import converted to fp32 (another precision or scale) */
    float *xbuf;                 /* host: an export copied out before its conversion */
};

/* TB_OK when the device runs a stage of cfg, else TB_EUNSUPPORTED with a one-line reason (2-byte
 * storage, recomputation or segments). Needs no GPU. */
int tb_cuda_stage_refuse(const struct executor_config *cfg);
/* Plans st for layers [cfg->l0, cfg->l1) of m: the range plan, slices, boundary tensors, host buffers and
 * the slot table (the device arenas are the executor's to allocate: slot[k].acts and dacts, act_floats
 * each). TB_OK, TB_ENOMEM or TB_EINVAL, with a message. */
int tb_cuda_stage_plan(struct cu_stage *st, const struct model *m, const struct executor_config *cfg);
/* Frees what the plan allocated and the device arenas (cudaFree; the executor gives its accounting back);
 * safe on a zeroed or partly built st. */
void tb_cuda_stage_free(struct cu_stage *st);
/* executor_import_boundary: records n samples of the packed tensors crossing l0 (grads = 0) or l1 (grads = 1)
 * for the next pass; returns the count of non-finite values the conversion met (fp32 at scale 1: read in
 * place, none counted, as the cpu stage). */
size_t tb_cuda_stage_import(struct cu_stage *st, int grads, const void *src, int n, enum stage_prec prec,
                            float scale);
/* Enqueues on s the copies of the recorded import (grads = 0: into slot a's activations, before a forward;
 * 1: into the gradient arena, before a backward) and forgets it. TB_OK also when nothing crosses; TB_EINVAL
 * when something does but nothing (or another n) was imported; a CUDA failure's status. */
int tb_cuda_stage_feed(struct cu_stage *st, int grads, const struct cu_acts *a, int n, cudaStream_t s);
/* executor_export_boundary: packs into dst the activations crossing l1 that slot's forward left (grads = 0)
 * or the gradients crossing l0 of the last backward (grads = 1), waiting for stream s; *bad = the count of
 * non-finite packed values (stage_prec_pack's: fp32 at scale 1 is a copy and counts none). */
int tb_cuda_stage_export(struct cu_stage *st, int grads, int slot, void *dst, int n, enum stage_prec prec, float scale,
                         cudaStream_t s, size_t *bad);
/* executor_stats' stage figures: fp32 slices, whole-stage slots, no segments, no recomputation. */
void tb_cuda_stage_stats(const struct cu_stage *st, struct executor_stats *s);

#endif
