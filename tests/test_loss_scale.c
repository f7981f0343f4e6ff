/* test_loss_scale.c — fp16's loss scaling policy (core/loss_scale.c), which the ipu stages and the cuda
 * device's mixed precision share: the dynamic scale's start, halving on an overflowed step, doubling after
 * LOSS_SCALE_GROW clean steps up to its ceiling; a static scale that never moves; skipped steps counted; and
 * the diverged rule (LOSS_SCALE_DIVERGED overflows in a row, counted only at the lowest scale), with its
 * one-line reason.
 */
#include "test_util.h"

#include "loss_scale.h"
#include "status.h"

#include <string.h>

Test(loss_scale, dynamic_halves_on_overflow_and_doubles_after_clean_steps)
{
    struct loss_scaler s;
    loss_scaler_init(&s, 0.0f);
    cr_assert_eq(s.scale, LOSS_SCALE_INIT);
    cr_assert_eq(s.fixed, 0.0f);
    cr_assert_eq(loss_scaler_after_step(&s, 1), 1, "an overflow changes a dynamic scale");
    cr_assert_eq(s.scale, LOSS_SCALE_INIT / 2);
    cr_assert_eq(s.skipped, 1);
    cr_assert_eq(s.overflow_run, 0, "an overflow above the floor does not count towards divergence");
    for (int k = 1; k < LOSS_SCALE_GROW; k++) cr_assert_eq(loss_scaler_after_step(&s, 0), 0, "clean step %d", k);
    cr_assert_eq(s.scale, LOSS_SCALE_INIT / 2, "not doubled before %d clean steps", LOSS_SCALE_GROW);
    cr_assert_eq(loss_scaler_after_step(&s, 0), 1);
    cr_assert_eq(s.scale, LOSS_SCALE_INIT, "doubled after %d clean steps", LOSS_SCALE_GROW);
    cr_assert_eq(s.skipped, 1, "clean steps are not skipped");
    /* An overflow restarts the count of clean steps. */
    for (int k = 0; k < LOSS_SCALE_GROW - 1; k++) loss_scaler_after_step(&s, 0);
    loss_scaler_after_step(&s, 1);
    cr_assert_eq(s.scale, LOSS_SCALE_INIT / 2);
    for (int k = 0; k < LOSS_SCALE_GROW - 1; k++) loss_scaler_after_step(&s, 0);
    cr_assert_eq(s.scale, LOSS_SCALE_INIT / 2, "the clean steps before the overflow did not count");
    cr_assert_eq(loss_scaler_check(&s, 9), TB_OK);
}

Test(loss_scale, dynamic_stops_at_its_ceiling)
{
    struct loss_scaler s;
    loss_scaler_init(&s, 0.0f);
    for (int k = 0; k < 64 * LOSS_SCALE_GROW; k++) loss_scaler_after_step(&s, 0);
    cr_assert_eq(s.scale, LOSS_SCALE_CEILING);
}

Test(loss_scale, static_never_moves_and_diverges_after_a_run_of_overflows)
{
    struct loss_scaler s;
    loss_scaler_init(&s, 128.0f);
    cr_assert_eq(s.scale, 128.0f);
    for (int k = 0; k < 3 * LOSS_SCALE_GROW; k++) cr_assert_eq(loss_scaler_after_step(&s, 0), 0);
    cr_assert_eq(s.scale, 128.0f, "a static scale does not grow");
    for (int k = 1; k < LOSS_SCALE_DIVERGED; k++) {
        cr_assert_eq(loss_scaler_after_step(&s, 1), 0, "a static scale does not shrink");
        cr_assert_eq(loss_scaler_check(&s, k), TB_OK, "%d overflows in a row are not yet a divergence", k);
    }
    cr_assert_eq(s.scale, 128.0f);
    loss_scaler_after_step(&s, 0); /* a clean step ends the run */
    cr_assert_eq(s.overflow_run, 0);
    for (int k = 0; k < LOSS_SCALE_DIVERGED; k++) loss_scaler_after_step(&s, 1);
    cr_assert_eq(loss_scaler_check(&s, 77), TB_EDIVERGED);
    cr_assert(strstr(tb_error_get(), "10 steps in a row at the static loss scale 128 (step 77)"), "%s", tb_error_get());
    cr_assert(strstr(tb_error_get(), "--loss-scale"), "%s", tb_error_get());
    cr_assert_eq(s.skipped, 2 * LOSS_SCALE_DIVERGED - 1);
    tb_error_clear();
}

Test(loss_scale, dynamic_diverges_only_at_scale_one)
{
    struct loss_scaler s;
    loss_scaler_init(&s, 0.0f);
    int halvings = 0;
    while (s.scale > 1.0f) {
        cr_assert_eq(loss_scaler_after_step(&s, 1), 1);
        cr_assert_eq(loss_scaler_check(&s, halvings), TB_OK, "no divergence while the scale can come down");
        halvings++;
    }
    cr_assert_eq(halvings, 15, "32768 = 2^15 halvings to 1");
    for (int k = 0; k < LOSS_SCALE_DIVERGED - 1; k++) cr_assert_eq(loss_scaler_after_step(&s, 1), 0, "at the floor");
    cr_assert_eq(loss_scaler_check(&s, 1), TB_OK);
    loss_scaler_after_step(&s, 1);
    cr_assert_eq(loss_scaler_check(&s, 30), TB_EDIVERGED);
    cr_assert(strstr(tb_error_get(), "at the lowest loss scale 1 (step 30): lower --lr"), "%s", tb_error_get());
    tb_error_clear();
}
