/* loss_scale.c — fp16's loss scaling policy (loss_scale.h). */
#include "loss_scale.h"

#include "status.h"

#include <math.h>
#include <stdio.h>

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

void loss_scaler_format(const struct loss_scaler *s, char *buf, size_t n)
{
    snprintf(buf, n, "scale=%.9g clean_steps=%ld skipped=%ld overflow_run=%d", (double)s->scale, s->clean_steps,
             s->skipped, s->overflow_run);
}

int loss_scaler_restore(struct loss_scaler *s, const char *text)
{
    double scale;
    long clean, skipped;
    int run, used = 0;
    /* A dynamic scale is a power of two in [1, 2^24] (halved from 2^15 down to 1, doubled up to 2^24). */
    const int dynamic = s->fixed == 0.0f;
    if (sscanf(text, "scale=%lg clean_steps=%ld skipped=%ld overflow_run=%d%n", &scale, &clean, &skipped, &run,
               &used) != 4 || text[used] != '\0' || clean < 0 || clean >= LOSS_SCALE_GROW || skipped < 0 || run < 0 ||
        run >= LOSS_SCALE_DIVERGED ||
        (dynamic && !(scale >= 1.0 && scale <= LOSS_SCALE_CEILING && scale == ldexp(1.0, ilogb(scale)))))
        return tb_error_set(TB_EFORMAT, "loss scaler state '%s' is not one a run leaves", text);
    if (dynamic) s->scale = (float)scale;
    s->clean_steps = clean, s->skipped = skipped, s->overflow_run = run;
    return TB_OK;
}
