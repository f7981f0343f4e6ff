/* loss_scale.h — fp16's loss scaling policy, shared by every schedule and device that trains in fp16 (the ipu
 * stages' half storage, the cuda device's mixed precision): the loss is multiplied by the scale before the
 * backward, so small gradients survive fp16's range (smallest normal 6.1e-5); a step whose gradients came out
 * inf or NaN is skipped; a dynamic scale halves on such a step and doubles after LOSS_SCALE_GROW clean ones
 * (PyTorch's GradScaler: init 65536, growth interval 2000; ours starts at 32768, the ipu engine's since
 * issue 5); a static one (--loss-scale N) stays. A scale that can go no lower (static, or dynamic at 1) and still
 * overflows LOSS_SCALE_DIVERGED steps in a row trains nothing: the run has diverged. Plain data, no device.
 */
#ifndef TB_LOSS_SCALE_H
#define TB_LOSS_SCALE_H

#define LOSS_SCALE_INIT 32768.0f  /* a dynamic scale's start */
#define LOSS_SCALE_GROW 2000      /* clean steps before a dynamic scale doubles */
#define LOSS_SCALE_DIVERGED 10    /* overflowed steps in a row at the lowest scale that end a run */
#define LOSS_SCALE_CEILING 16777216.0f /* a dynamic scale doubles no further (2^24) */

#include <stddef.h>

struct loss_scaler {
    float scale;       /* the loss scale now */
    float fixed;       /* > 0: static at this value; 0: dynamic */
    int overflow_run;  /* overflowed steps in a row with the scale at its floor */
    long clean_steps;  /* clean steps since the last change (dynamic) */
    long skipped;      /* steps skipped on an overflow */
};

/* Starts a scaler: static at `fixed` when > 0, else dynamic from LOSS_SCALE_INIT. */
void loss_scaler_init(struct loss_scaler *s, float fixed);
/* Records a step's gradient check (overflowed: some gradient inf or NaN; its update is the caller's to skip);
 * returns 1 when the scale changed (the caller rescales what it keeps scaled), else 0. */
int loss_scaler_after_step(struct loss_scaler *s, int overflowed);
/* Whether the overflows so far end the run (LOSS_SCALE_DIVERGED in a row at the lowest scale); if so, sets
 * TB_EDIVERGED with the one-line reason naming `step` and returns it, else TB_OK. */
int loss_scaler_check(const struct loss_scaler *s, long step);
/* Writes the scaler's state (scale, clean steps, skipped steps, overflows in a row) as one line of text for a
 * checkpoint's metadata: "scale=S clean_steps=C skipped=K overflow_run=R". */
void loss_scaler_format(const struct loss_scaler *s, char *buf, size_t n);
/* Puts back into s (started by loss_scaler_init for this run) the state text holds: a dynamic scale and every
 * count (a static scale stays the run's own); TB_EFORMAT if text is not loss_scaler_format's. */
int loss_scaler_restore(struct loss_scaler *s, const char *text);

#endif
