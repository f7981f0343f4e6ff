/* exec_dense1.c — the fused batch-1 training step of a dense chain (the MNIST MLP) with one barrier a
 * layer.
 *
 * The general schedule (exec_forward/exec_backward with the deferred update) spent 19 barriers a step
 * on the MLP, and the serial input and loss layers made the other thread wait: 46–48 µs a step on two
 * threads of this kind of machine against 39–42 µs this way. Here each thread owns the same rows of every
 * weight in the forward (the deferred Adam step and the chunk sums of the new forward, as dense_adam
 * runs them) and in the backward (its rows of wᵀ·dy), so what crosses between threads is only each
 * layer's chunk sums and output gradient:
 *   - forward, per layer: update the own rows and form their chunk sums, barrier, then combine the
 *     sums of just the outputs that are this thread's rows of the next layer (its input), or all the
 *     logits after the last layer; every thread then runs the loss on its own copy of the logits;
 *   - backward, per layer but the first: its own rows of wᵀ·dy, ReLU-masked (rows the mask zeroes
 *     are skipped), barrier.
 * The arithmetic of every element is the general path's, so the bits are the same for any nth (the
 * backend tests hold it against the unfused step).
 *
 * Dependencies run one way: this file calls exec.c (exec_dense1_rows, exec_act, the trace) and
 * exec_dense1_shape.c (which models it runs, the buffers it needs); exec.c calls neither this file
 * nor anything that calls back into it, and sizes its buffers from exec_dense1_shape.c alone.
 */
#include "exec.h"
#include "exec_priv.h"

#include "layout.h"
#include "op_dense.h"
#include "op_loss.h"
#include "simd.h"

#include <string.h>

void exec_dense1_step(const struct model_inst *mi, const struct exec_step *st, float *pending_in, int ith, int nth,
                      const struct exec_sync *sync)
{
    const struct model *m = mi->m;
    const int D = m->n_layers - 2; /* dense layers 1..D */
    const struct layer *ce = &m->layers[D + 1];
    const int K = m->layers[D].a.dense.OUT;
    const int clocked = (mi->prof || st->trace) && ith == 0;
    double t_prev = clocked ? tb_now_s() : 0.0, t_busy = 0.0;
    /* Thread 0 runs the loss into the instance's tensors; the others into their own copies. */
    float *scr = scratch_of(mi, ith);
    float *logits = ith == 0 ? exec_act(mi, ce->in) : scr;
    float *dlogits = ith == 0 ? exec_dact(mi, ce->in) : scr + tb_align16((size_t)K);
    float *loss = ith == 0 ? mi->losses : scr + 2 * tb_align16((size_t)K);

    float *part = mi->shared;
    size_t in_off = 0;
    for (int k = 1; k <= D; k++) {
        const struct layer *l = &m->layers[k];
        const int IN = l->a.dense.IN, OUT = l->a.dense.OUT;
        int r0, r1;
        busy_clock(mi, ith, k, 'F', &t_busy);
        dense1_own_rows(IN, ith, nth, &r0, &r1);
        float *x = exec_act(mi, l->in); /* rows [r0,r1) are this thread's, from the input or the combine */
        if (k == 1) input_grey(&m->layers[0], st->x, x, (size_t)r0, (size_t)r1);
        exec_dense1_rows(mi, l, st->optim, st->pending_alpha, pending_in + in_off, x, part, r0, r1, ith);
        memcpy(pending_in + in_off + r0, x + r0, (size_t)(r1 - r0) * sizeof(float)); /* the next update's */
        sync_barrier(sync, nth);
        const float *b = l->n_b ? exec_param(mi, l->b_off) : NULL;
        if (k < D) {
            int q0, q1;
            dense1_own_rows(OUT, ith, nth, &q0, &q1);
            dense1_combine_range(exec_act(mi, l->out), part, b, IN, OUT, l->act == ACT_RELU, q0, q1);
        } else {
            dense1_combine_range(logits, part, b, IN, OUT, 0, 0, OUT);
        }
        if (clocked) clock_layer(mi, st, k, 'F', &t_prev);
        part += dense1_part_floats(l);
        in_off += (size_t)IN;
    }
    busy_clock(mi, ith, D + 1, 'F', &t_busy);
    memset(dlogits, 0, (size_t)K * sizeof(float));
    const struct softmax_ce_shape cs = {1, K, ce->a.ce.smoothing};
    softmax_ce_forward_backward(loss, dlogits, ith == 0 ? mi->correct : NULL, logits, st->y,
                                1.0f / (float)st->n_global, &cs, 0, 1);
    if (clocked) clock_layer(mi, st, D + 1, 'F', &t_prev);

    const float *dy = dlogits;
    for (int k = D; k >= 2; k--) {
        const struct layer *l = &m->layers[k];
        const int IN = l->a.dense.IN, OUT = l->a.dense.OUT, relu = m->layers[k - 1].act == ACT_RELU;
        int r0, r1;
        busy_clock(mi, ith, k, 'B', &t_busy);
        dense1_own_rows(IN, ith, nth, &r0, &r1);
        const float *w = exec_param(mi, l->w_off), *a = exec_act(mi, l->in);
        float *din = exec_dact(mi, l->in);
        /* zeroed gradient + wᵀ·dy, then the ReLU's mask: the general path's bits */
        for (int i = r0; i < r1; i++)
            din[i] = relu && !(a[i] > 0.0f) ? 0.0f : 0.0f + simd_dot(w + (size_t)i * OUT, dy, OUT);
        if (k > 2) sync_barrier(sync, nth); /* after the last, the pool's join: the step ends */
        dy = din;
        if (clocked) clock_layer(mi, st, k, 'B', &t_prev);
    }
    busy_clock(mi, ith, -1, 'B', &t_busy);
}
