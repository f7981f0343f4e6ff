/* loss_watch.h — when a finite training loss counts as diverged.
 *
 * A NaN or Inf loss stops a run at once (run.c). A finite loss can diverge too: Adam at --lr 1 on
 * mnist-mlp takes the loss from 2.3 to 9e6 in one step, then, its ReLUs dead, back to a uniform guess
 * (2.3, 10 % accuracy), all of it finite. The rule: a run has diverged when its loss stays above
 * LOSS_WATCH_FACTOR times a reference for LOSS_WATCH_STEPS consecutive steps. The reference is the
 * larger of the run's first step's loss and ln(classes), the loss of a uniform guess, so a resumed run
 * whose loss is already small does not trip on a few noisy batches. 10x a uniform guess for 10 steps
 * in a row means predicting the wrong class with near certainty batch after batch (23 nats for 10
 * classes: the right class gets probability e^-23). Measured on mnist-mlp with Adam: --lr 0.03 spikes
 * above the limit for 1 step and trains on (70 % on Fashion-MNIST), --lr 0.1 for 5 (and ends near
 * chance: a bad run, not counted as diverged), --lr 1 for 17 and --lr 1000 for good.
 * Threading: a watch belongs to one run; no shared state.
 */
#ifndef TB_LOSS_WATCH_H
#define TB_LOSS_WATCH_H

#define LOSS_WATCH_FACTOR 10.0
#define LOSS_WATCH_STEPS 10

struct loss_watch {
    double ref;  /* the reference level; 0 until the first step is fed */
    double peak; /* the highest loss of the current streak */
    long over;   /* consecutive steps above LOSS_WATCH_FACTOR · ref */
    long since;  /* the streak's first step */
};

/* Forgets everything: the next step fed is the run's first. A zeroed watch is reset too. */
void loss_watch_reset(struct loss_watch *w);

/* Feeds step's (finite) mean loss of a model with n_classes outputs: TB_OK, or TB_EDIVERGED with a
 * message saying since when and by how much the loss has stayed above the limit. */
int loss_watch_feed(struct loss_watch *w, long step, double loss, int n_classes);

#endif
