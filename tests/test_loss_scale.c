/* test_loss_scale.c — fp16's loss scaling policy (core/loss_scale.c), which the ipu stages and the cuda
 * device's mixed precision share: the dynamic scale's start, halving on an overflowed step, doubling after
 * LOSS_SCALE_GROW clean steps up to its ceiling; a static scale that never moves; skipped steps counted; and
 * the diverged rule (LOSS_SCALE_DIVERGED overflows in a row, counted only at the lowest scale), with its
 * one-line reason; the state's text a checkpoint keeps, and what restoring it takes and refuses; and that
 * reason, not the harness's generic one, ending an ipu fp16 run whose static scale always overflows; and a
 * throughput run that skipped every step ends diverged with no rate, as train's does.
 */
#include "test_util.h"

#include "loss_scale.h"
#include "run.h"
#include "status.h"
#include "test_harness_util.h"

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

/* A checkpoint's text of the scaler (--resume): the state comes back whole into a fresh dynamic scaler; a
 * static one keeps the run's own scale and takes the counts; text no run leaves is refused, the scaler as it was. */
Test(loss_scale, state_text_round_trips_and_refuses_what_no_run_leaves)
{
    struct loss_scaler a, b;
    loss_scaler_init(&a, 0.0f);
    for (int k = 0; k < 5; k++) loss_scaler_after_step(&a, 1);
    for (int k = 0; k < 17; k++) loss_scaler_after_step(&a, 0);
    char text[128];
    loss_scaler_format(&a, text, sizeof text);
    cr_assert_str_eq(text, "scale=1024 clean_steps=17 skipped=5 overflow_run=0");
    loss_scaler_init(&b, 0.0f);
    cr_assert_eq(loss_scaler_restore(&b, text), TB_OK, "%s", tb_error_get());
    cr_assert(b.scale == a.scale && b.fixed == 0.0f && b.clean_steps == 17 && b.skipped == 5 && b.overflow_run == 0);
    /* The restored scaler goes on as the first would have. */
    for (int k = 17; k < LOSS_SCALE_GROW; k++) loss_scaler_after_step(&a, 0), loss_scaler_after_step(&b, 0);
    cr_assert(a.scale == 2048 && b.scale == 2048);

    loss_scaler_init(&b, 1000.0f);
    cr_assert_eq(loss_scaler_restore(&b, "scale=1000 clean_steps=0 skipped=3 overflow_run=2"), TB_OK);
    cr_assert(b.scale == 1000.0f && b.fixed == 1000.0f && b.skipped == 3 && b.overflow_run == 2);

    static const char *const bad[] = {
        "",
        "scale=1000 clean_steps=0 skipped=0 overflow_run=0",   /* a dynamic scale is a power of two */
        "scale=0.5 clean_steps=0 skipped=0 overflow_run=0",    /* at least 1 */
        "scale=33554432 clean_steps=0 skipped=0 overflow_run=0", /* at most 2^24 */
        "scale=1024 clean_steps=2000 skipped=0 overflow_run=0",  /* the scale would have doubled */
        "scale=1024 clean_steps=0 skipped=-1 overflow_run=0",
        "scale=1 clean_steps=0 skipped=10 overflow_run=10",      /* the run would have diverged */
        "scale=1024 clean_steps=0 skipped=0 overflow_run=0 x",
        "scale=nan clean_steps=0 skipped=0 overflow_run=0",
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        loss_scaler_init(&b, 0.0f);
        cr_assert_eq(loss_scaler_restore(&b, bad[k]), TB_EFORMAT, "'%s' accepted", bad[k]);
        cr_assert(b.scale == LOSS_SCALE_INIT && b.skipped == 0 && b.clean_steps == 0, "'%s' changed the scaler", bad[k]);
        tb_error_clear();
    }
}

/* A static scale that overflows every step ends an ipu fp16 run with the scaler's own reason (the static
 * scale, and --loss-scale as a remedy): the harness had replaced it with "non-finite gradients ... (lower
 * --lr?)", which hides that the scale is the cause. */
Test(loss_scale, a_static_scale_that_always_overflows_ends_the_run_with_its_own_reason, .init = th_setup,
     .fini = th_teardown, .timeout = 60)
{
    struct bench_config c;
    bench_config_defaults(&c);
    static const char *const opt[][2] = {
        {"plan", "train"}, {"backend", "ipu"}, {"precision", "fp16"}, {"loss-scale", "1e30"}, {"batch", "8"},
        {"steps", "30"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(&c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_EDIVERGED, "%s", tb_error_get());
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "ipu/mnist-mlp: diverged: fp16 gradients overflowed on 10 steps in a row at the static "
                          "loss scale 1e+30 (step 10): lower --lr or --loss-scale") != NULL, "%s", msg);
    cr_assert_null(strstr(msg, "non-finite gradients"), "%s", msg);
    cr_assert_null(strstr(msg, "(lower --lr?)"), "%s", msg);
    char p[192];
    char *rows = th_read(th_path(p, sizeof p, "rows.jsonl"));
    cr_assert(strstr(rows, "\"status\":\"diverged\"") && strstr(rows, "\"diverged_at_step\":10,"), "%s", rows);
    cr_assert(strstr(rows, "static loss scale 1e+30"), "the row's reason too: %s", rows);
    free(rows);
}

/* Fewer steps than the diverged rule needs, every one overflowing at a static scale: no update applied, and
 * the advice is the static scale's (it was "run more steps so a dynamic scale can come down"); the row's
 * diverged_at_step is the plan's last step, not one past it (it said 6 of 5). */
Test(loss_scale, a_static_scale_that_applied_no_update_says_so_within_the_plan, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    struct bench_config c;
    bench_config_defaults(&c);
    static const char *const opt[][2] = {
        {"plan", "train"}, {"backend", "ipu"}, {"precision", "fp16"}, {"loss-scale", "1e30"}, {"batch", "8"},
        {"steps", "5"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(&c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_EDIVERGED, "%s", tb_error_get());
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "no update applied") && strstr(msg, "static loss scale 1e+30; lower --lr or --loss-scale"),
              "%s", msg);
    cr_assert_null(strstr(msg, "dynamic"), "%s", msg);
    char p[192];
    char *rows = th_read(th_path(p, sizeof p, "rows.jsonl"));
    cr_assert(strstr(rows, "\"planned_steps\":5,") && strstr(rows, "\"diverged_at_step\":5,"), "%s", rows);
    free(rows);
}

/* Throughput follows train's rule: every step skipped (a static 1e30 overflows each one) applied no update,
 * so the run is diverged (exit 1) with no rate, not an ok row whose images/s timed steps that never ran the
 * optimizer (it was "status":"ok" with a rate and "6 steps skipped" of 6). Two repeats: the skips count over
 * all of them. */
Test(loss_scale, a_throughput_run_that_applied_no_update_reports_no_rate, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    struct bench_config c;
    bench_config_defaults(&c);
    static const char *const opt[][2] = {
        {"plan", "throughput"}, {"backend", "ipu"}, {"precision", "fp16"}, {"loss-scale", "1e30"}, {"batch", "8"},
        {"steps", "3"}, {"warmup", "1"}, {"repeat", "2"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(&c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_EDIVERGED, "%s", tb_error_get());
    const char *msg = tb_error_get();
    cr_assert(strstr(msg, "ipu/mnist-mlp: no update applied: fp16 gradients overflowed on all 8 steps (static loss "
                          "scale 1e+30; lower --lr or --loss-scale)") != NULL, "%s", msg);
    char p[192];
    char *rows = th_read(th_path(p, sizeof p, "rows.jsonl"));
    cr_assert(strstr(rows, "\"status\":\"diverged\"") && strstr(rows, "\"planned_steps\":8,") &&
              strstr(rows, "\"completed_steps\":8,") && strstr(rows, "\"diverged_at_step\":8,"), "%s", rows);
    cr_assert_null(strstr(rows, "images_per_s"), "no rate: %s", rows);
    free(rows);
}

/* A scale that lets the steps through: throughput's ok row with its rate, and no step skipped. */
Test(loss_scale, a_throughput_run_whose_updates_applied_keeps_its_rate, .init = th_setup, .fini = th_teardown,
     .timeout = 60)
{
    struct bench_config c;
    bench_config_defaults(&c);
    static const char *const opt[][2] = {
        {"plan", "throughput"}, {"backend", "ipu"}, {"precision", "fp16"}, {"loss-scale", "1"}, {"batch", "8"},
        {"steps", "3"}, {"warmup", "1"},
    };
    for (size_t k = 0; k < sizeof opt / sizeof *opt; k++)
        cr_assert_eq(bench_config_set(&c, opt[k][0], opt[k][1]), TB_OK, "%s: %s", opt[k][0], tb_error_get());
    th_bench_quiet(&c, 256, 64);
    cr_assert_eq(bench_run(&c), TB_OK, "%s", tb_error_get());
    char p[192];
    char *rows = th_read(th_path(p, sizeof p, "rows.jsonl"));
    cr_assert(strstr(rows, "\"status\":\"ok\"") && strstr(rows, "\"images_per_s\":"), "%s", rows);
    free(rows);
}
