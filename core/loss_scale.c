/* loss_scale.c — fp16's loss scaling policy (loss_scale.h). */
#include "loss_scale.h"

#include "status.h"

void loss_scaler_init(struct loss_scaler *s, float fixed)
{
    *s = (struct loss_scaler){.scale = fixed > 0.0f ? fixed : LOSS_SCALE_INIT, .fixed = fixed > 0.0f ? fixed : 0.0f};
}

int loss_scaler_after_step(struct loss_scaler *s, int overflowed)
{
    if (overflowed) {
        s->skipped++;
        s->clean_steps = 0;
        const int floor = s->fixed > 0.0f || s->scale <= 1.0f;
        s->overflow_run = floor ? s->overflow_run + 1 : 0;
        if (s->fixed == 0.0f && s->scale > 1.0f) return s->scale *= 0.5f, 1;
        return 0;
    }
    s->overflow_run = 0;
    if (s->fixed == 0.0f && ++s->clean_steps >= LOSS_SCALE_GROW) {
        s->clean_steps = 0;
        if (s->scale < LOSS_SCALE_CEILING) return s->scale *= 2.0f, 1;
    }
    return 0;
}

int loss_scaler_check(const struct loss_scaler *s, long step)
{
    if (s->overflow_run < LOSS_SCALE_DIVERGED) return TB_OK;
    return tb_error_set(TB_EDIVERGED, "fp16 gradients overflowed on %d steps in a row at %s loss scale %g (step %ld): "
                                      "lower --lr%s",
                        s->overflow_run, s->fixed > 0.0f ? "the static" : "the lowest", (double)s->scale, step,
                        s->fixed > 0.0f ? " or --loss-scale" : "");
}
