/* loss_watch.c — the finite-loss divergence rule (see loss_watch.h). */
#include "loss_watch.h"

#include "status.h"

#include <math.h>
#include <string.h>

void loss_watch_reset(struct loss_watch *w)
{
    memset(w, 0, sizeof *w);
}

int loss_watch_feed(struct loss_watch *w, long step, double loss, int n_classes)
{
    if (w->ref <= 0.0) {
        const double chance = n_classes > 1 ? log((double)n_classes) : 0.0;
        w->ref = loss > chance ? loss : chance;
        if (!(w->ref > 0.0)) w->ref = 1.0; /* one class and a zero first loss: any scale will do */
    }
    if (!(loss > LOSS_WATCH_FACTOR * w->ref)) {
        w->over = 0;
        return TB_OK;
    }
    if (w->over++ == 0) w->since = step, w->peak = loss;
    if (loss > w->peak) w->peak = loss;
    if (w->over < LOSS_WATCH_STEPS) return TB_OK;
    return tb_error_set(TB_EDIVERGED,
                        "the loss stayed above %g x %.4g (the first step's loss or a uniform guess's, the larger) "
                        "for %d steps from step %ld, up to %.4g",
                        LOSS_WATCH_FACTOR, w->ref, LOSS_WATCH_STEPS, w->since, w->peak);
}
