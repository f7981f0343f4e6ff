/* optim.h — optimizers as flat loops over the parameter arena.
 *
 * The optimizer state has the same layout as the params (one or two copies), so an update is one loop
 * over contiguous floats, partitioned by (ith, nth): element-wise, hence bitwise the same for any nth.
 * Per-tensor work (LARS trust ratios, weight-decay exclusions) goes segment by segment using the
 * model's parameter table. Step numbering starts at 1 (Adam's bias correction).
 */
#ifndef TB_OPTIM_H
#define TB_OPTIM_H

#include <stddef.h>

enum optim_kind { OPTIM_ADAM, OPTIM_SGD, OPTIM_RMSPROP, OPTIM_LARS };

enum lr_schedule { LR_CONSTANT, LR_EXPONENTIAL, LR_POLYNOMIAL, LR_COSINE };

struct optim_config {
    enum optim_kind kind;
    float lr;           /* base learning rate */
    float beta1, beta2; /* Adam */
    float eps;          /* Adam 1e-7 (Keras), RMSProp 1e-3 */
    float momentum;     /* SGD / RMSProp / LARS */
    float rho;          /* RMSProp decay */
    float weight_decay; /* L2 added to the gradient (not on norm params or biases) */
    float lars_eta;     /* LARS trust coefficient */
    enum lr_schedule schedule;
    long warmup_steps;  /* linear warm-up from 0 to lr */
    long total_steps;   /* decay horizon */
    float decay_rate;   /* exponential: lr·rate^(step/decay_steps) */
    long decay_steps;
    float power;        /* polynomial */
    float final_lr;     /* polynomial / cosine floor */
};

/* Fills c with the defaults of kind (Keras Adam: lr 1e-3, β 0.9/0.999, ε 1e-7; SGD lr 0.01, momentum 0.9; ...). */
void optim_config_defaults(struct optim_config *c, enum optim_kind kind);
/* Returns "adam", "sgd", ... */
const char *optim_name(enum optim_kind kind);
/* Parses a name into kind; returns 0 on success, -1 if unknown. */
int optim_parse(const char *name, enum optim_kind *kind);
/* Number of state floats per parameter (Adam 2, SGD/RMSProp with momentum 1–2, ...). */
int optim_state_per_param(enum optim_kind kind);
/* Writes kind's initial optimizer state for n parameters into state (optim_state_per_param·n floats). */
void optim_state_init(enum optim_kind kind, float *state, size_t n);
/* Learning rate at a 1-based step under the config's warm-up and schedule. */
float optim_lr_at(const struct optim_config *c, long step);

/* One segment of the param arena that the update treats as a unit (a tensor). */
struct optim_segment {
    size_t off, n;  /* floats into params/grads */
    int no_decay;   /* norm γ/β and biases: no weight decay, no LARS adaptation */
};

/* LARS only, before optim_update: trust (n_segs) = η‖w‖/(‖g‖ + wd‖w‖) per segment (1 for no_decay
 * segments). Partitioned over segments; must complete (barrier) before any thread updates. */
void optim_lars_trust(const struct optim_config *c, const float *params, const float *grads,
                      const struct optim_segment *segs, int n_segs, float *trust, int ith, int nth);
/* Applies one update to params (n) from grads (n) with state (optim_state_per_param·n, consecutive
 * copies of the param layout) at 1-based step. segs may be NULL (one segment, decayed); trust_per_seg is
 * LARS's (else NULL). Partitioned over elements by (ith, nth). */
void optim_update(const struct optim_config *c, float *params, const float *grads, float *state, size_t n,
                  const struct optim_segment *segs, int n_segs, const float *trust_per_seg, long step, int ith,
                  int nth);

/* Adam's step size at a 1-based step: the scheduled rate with both bias corrections folded in. */
float optim_adam_alpha(const struct optim_config *c, long step);
/* Adam with step size alpha (optim_adam_alpha) on columns [c0,c1) of every row of a dense weight w
 * (rows, cols) whose gradient is the outer product x (rows) ⊗ dy (cols) of a batch of one, computed on
 * the fly instead of stored: no gradient arena to zero, write and re-read. m, v have w's layout. Bitwise
 * equal to dense_backward_params + optim_update. When xn is non-NULL it then adds xn[r]·w[r,o] with
 * the updated weights into y[o] for every row with xn[r] ≠ 0, in ascending r: a chunk of the next
 * step's batch-1 forward (dense_forward's arithmetic) in the update's one pass over w. */
void optim_adam_outer(const struct optim_config *c, float alpha, float *w, float *m, float *v, const float *x,
                      const float *dy, int rows, int cols, int c0, int c1, float wd, const float *xn, float *y);

#endif
