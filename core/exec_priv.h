/* exec_priv.h — small helpers the executor's files share (exec.c, exec_dense1.c, exec_dense1_shape.c); not
 * a public API. Declarations here point one way: exec_dense1.c uses exec.c's, never the reverse. */
#ifndef TB_EXEC_PRIV_H
#define TB_EXEC_PRIV_H

#include "cachesim.h"
#include "clock.h"
#include "exec.h"
#include "layout.h"
#include "op_dense.h"

/* Parameters and their gradients at canonical offset off: mi->params and mi->grads hold offsets from
 * mi->param_base on (a window of one layer's, decoded from half precision, or the whole arena when
 * param_base is 0). */
static inline float *exec_param(const struct model_inst *mi, size_t off) { return mi->params + (off - mi->param_base); }
static inline float *exec_grad(const struct model_inst *mi, size_t off) { return mi->grads + (off - mi->param_base); }

/* --profile: the calling thread's busy-time slot for the layer it runs (an element of model_inst.prof_busy),
 * NULL when not profiling. Thread-local, so every barrier a kernel reaches through sync_barrier takes its
 * wait off its layer's busy time without a pointer threaded through the kernels. */
extern _Thread_local double *exec_busy_slot;
/* Whether that slot counts CPU time (model_inst.prof_busy_cpu), for the barrier waits taken off it. */
extern _Thread_local int exec_busy_cpu;

/* The busy clock: the calling thread's CPU time, or the monotonic clock. */
static inline double exec_busy_now(int cpu) { return cpu ? tb_thread_cpu_s() : tb_now_s(); }

/* Waits for all nth threads (nothing to do alone); takes the wait off exec_busy_slot when set. */
static inline void sync_barrier(const struct exec_sync *s, int nth)
{
    if (!(nth > 1 && s && s->barrier)) return;
    double *slot = exec_busy_slot;
    if (!slot) {
        s->barrier(s->ctx);
        return;
    }
    const double t0 = exec_busy_now(exec_busy_cpu);
    s->barrier(s->ctx);
    *slot -= exec_busy_now(exec_busy_cpu) - t0;
}

/* --profile, every thread: ends the layer this thread was in (its time since *t_prev goes to its busy
 * slot, which the time of its barrier waits — the spinning — has been taken off) and points the slot at
 * layer li's forward ('F') or backward ('B'); li < 0 ends without a next layer. With more threads than
 * cores CPU time, so that a thread descheduled by another is not counted as working; else the monotonic
 * clock: a thread's CPU time is a system call in a VM (361 ns against 20 on the twenty-fifth session's
 * machine), and reading it at every layer and barrier put µs on layers of a few µs. Nothing when the
 * instance keeps no busy profile. */
static inline void busy_clock(const struct model_inst *mi, int ith, int li, char phase, double *t_prev)
{
    if (!mi->prof_busy) return;
    exec_busy_cpu = mi->prof_busy_cpu;
    const double t = exec_busy_now(exec_busy_cpu);
    if (exec_busy_slot) *exec_busy_slot += t - *t_prev;
    *t_prev = t;
    exec_busy_slot = li < 0 ? NULL
                            : &mi->prof_busy[((size_t)ith * (size_t)mi->m->n_layers + (size_t)li) * 2 + (phase == 'B')];
}

/* Thread ith's piece of the per-thread scratch (NULL when the instance has none). */
static inline float *scratch_of(const struct model_inst *mi, int ith)
{
    return mi->scratch ? mi->scratch + (size_t)ith * mi->scratch_floats : NULL;
}

/* The rows [r0,r1) of a batch-1 dense layer of IN inputs that thread ith of nth owns: whole chunks of
 * DENSE1_ROW_CHUNK, the same in the deferred update, its forward and the backward's wᵀ·dy. */
static inline void dense1_own_rows(int IN, int ith, int nth, int *r0, int *r1)
{
    size_t k0, k1;
    tb_slice((size_t)dense1_chunks(IN), ith, nth, &k0, &k1);
    *r0 = (int)k0 * DENSE1_ROW_CHUNK < IN ? (int)k0 * DENSE1_ROW_CHUNK : IN;
    *r1 = (int)k1 * DENSE1_ROW_CHUNK < IN ? (int)k1 * DENSE1_ROW_CHUNK : IN;
}

/* exec_dense1_step's chunk sums of dense layer l (batch 1), each layer's at its own offset of the shared
 * buffer: a layer's are still being read (combined) while the next layer's are written. */
static inline size_t dense1_part_floats(const struct layer *l)
{
    return tb_align16((size_t)dense1_chunks(l->a.dense.IN) * (size_t)l->a.dense.OUT);
}

/* The input layer's per-channel affine map of 8-bit pixels: x = pixel·scale[c] + shift[c]. */
static inline void input_affine(const struct layer *l, int C, float *scale, float *shift)
{
    for (int c = 0; c < C; c++) {
        scale[c] = l->a.input.scale / l->a.input.std[c];
        shift[c] = -l->a.input.shift[c] / l->a.input.std[c];
    }
}

/* Elements [i0,i1) of a grey (one-channel) input at its own size, from its pixels: x = pixel·scale +
 * shift (input_affine's channel 0). */
static inline void input_grey(const struct layer *l, const uint8_t *px, float *x, size_t i0, size_t i1)
{
    float a, b;
    input_affine(l, 1, &a, &b);
    for (size_t i = i0; i < i1; i++) x[i] = (float)px[i] * a + b;
}

/* Thread 0's clock of a layer: adds the interval since *t_prev to layer li's forward ('F') or backward
 * ('B') profile slot and to the trace, barrier waits included. */
static inline void clock_layer(const struct model_inst *mi, const struct exec_step *st, int li, char phase,
                               double *t_prev)
{
    const double t = tb_now_s();
    if (mi->prof) mi->prof[2 * li + (phase == 'B')] += t - *t_prev;
    exec_trace_add(st->trace, li, phase, *t_prev, t);
    cachesim_mark(li, phase);
    *t_prev = t;
}

/* Dense layer l's batch-1 rows [r0,r1) (whole chunks): with c, the deferred Adam step of step size alpha
 * from inputs x_old and the output gradient (the bias too, on thread 0); with part, each chunk's sum
 * of the forward of the new input xn from the updated rows (from the rows as they are without c), at
 * part + chunk·OUT. */
void exec_dense1_rows(const struct model_inst *mi, const struct layer *l, const struct optim_config *c, float alpha,
                      const float *x_old, const float *xn, float *part, int r0, int r1, int ith);

#endif
