/* test_resume_trace_checks.c — configuration checks a run makes before it trains, checked through `bench`
 * (TB_BENCH_EXE):
 * - --resume compares the samples each BatchNorm statistic is over with the checkpoint's (--devices, --micro-batch,
 *   --ga and --sync-bn decide it: BatchNorm over the global batch is another function than over each replica's);
 * - --resume takes an older checkpoint that names an IDX set by its folder where its data CRC is this run's;
 * - fp16's "no update applied" advice once the dynamic scale is at its floor (more steps cannot help there);
 * - --trace-step past the most steps a time-budgeted throughput run or a tta seed can take is refused, as train
 *   refuses one past --steps; one the budget did not reach leaves no trace and no figures.trace.
 * Every child runs in a fresh temp directory on a small synthetic set.
 */
#include "test_ckpt_meta.h"
#include "test_reliability_util.h"

TestSuite(resume_trace_checks, .timeout = 60);

#define SMALL "--data", "synthetic", "--synthetic-samples", "256,64", "--batch", "8", "--mllog", "none", \
              "--out", "results.jsonl", "--quiet", "--tuning", "none"
#define EFF_NET "--workload", "effnet-b0", "--resolution", "16", "--data", "synthetic", "--synthetic-samples", \
                "64,16", "--batch", "8", "--optimizer", "sgd", "--lr", "0.01", "--tuning", "none", "--mllog", "none", \
                "--no-eval", "--out", "results.jsonl"
#define EFF_LOUD EFF_NET, "--backend", "mirrored", "--devices", "2"
#define EFF EFF_LOUD, "--quiet"

/* A checkpoint made without --sync-bn resumed with it was accepted, and the row said sync_bn for a run whose first
 * steps had per-replica statistics: a usage error naming sync_bn. */
Test(resume_trace_checks, a_resume_with_sync_bn_refuses_a_checkpoint_without_it)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "plain", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "1", "--checkpoint-dir", "ck")),
                 0);
    cr_assert_eq(rb_run(dir, "on", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "2", "--sync-bn", "--resume", "ck")),
                 2);
    char *err = rb_stderr(dir, "on");
    cr_assert(strstr(err, "was made with another configuration (BatchNorm statistics over 4 samples in the checkpoint, "
                          "over 8 in this run: --devices, --micro-batch, --ga and --sync-bn decide it)\n"), "%s", err);
    free(err);
    tu_rm_rf(dir);
    free(dir);
}

/* The other way round: a --sync-bn checkpoint resumes with --sync-bn only. */
Test(resume_trace_checks, a_sync_bn_checkpoint_resumes_only_with_sync_bn)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "synced", RB_ARGS(EFF),
                        RB_ARGS("--plan", "train", "--steps", "1", "--sync-bn", "--checkpoint-dir", "ck")),
                 0);
    cr_assert_eq(rb_run(dir, "off", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "2", "--resume", "ck")), 2);
    char *err = rb_stderr(dir, "off");
    cr_assert(strstr(err, "(BatchNorm statistics over 8 samples in the checkpoint, over 4 in this run"), "%s", err);
    free(err);
    cr_assert_eq(rb_run(dir, "same", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "2", "--sync-bn", "--resume", "ck")),
                 0);
    rb_assert_resumed_from(dir, 1);
    tu_rm_rf(dir);
    free(dir);
}

/* BatchNorm's statistics over each replica's 4 samples (2 devices, batch 8) are another function than over 8 (one
 * device): --resume took a checkpoint of the one to the other. Now a usage error that says why; the same devices
 * resume, and a checkpoint of an older build (no bn_batch word) resumes with a note. */
Test(resume_trace_checks, a_bn_checkpoint_resumes_only_with_its_statistics_group)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "two", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "1", "--checkpoint-dir", "ck")), 0);
    char *ckd = rb_path(dir, "ck"), ck1[600];
    checkpoint_dir_path(ckd, 1, ck1, sizeof ck1);
    cr_assert_eq(rb_run(dir, "one", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "2", "--devices", "1", "--resume",
                                                          "ck")),
                 2);
    char *err = rb_stderr(dir, "one");
    cr_assert(strstr(err, "(BatchNorm statistics over 4 samples in the checkpoint, over 8 in this run: --devices, "
                          "--micro-batch, --ga and --sync-bn decide it)\n"), "%s", err);
    free(err);
    ckpt_rewrite_config(ck1, " bn_batch=4", "");
    cr_assert_eq(rb_run(dir, "old", RB_ARGS(EFF_LOUD), RB_ARGS("--plan", "train", "--steps", "2", "--resume", "ck")), 0);
    err = rb_stderr(dir, "old");
    cr_assert(strstr(err, "predates BatchNorm's statistics group in checkpoints") && strstr(err, "bn_batch=4"), "%s",
              err);
    free(err);
    rb_assert_resumed_from(dir, 1);
    free(ckd);
    tu_rm_rf(dir);
    free(dir);
}

/* What decides is the samples a statistic is over, not the flag: a cpu checkpoint (the whole batch of 8) continues
 * under mirrored --sync-bn on 2 devices (the whole batch again); and a checkpoint of the build that wrote --sync-bn
 * as its own word (" sync_bn=1" before the data's CRC, no bn_batch) reads as statistics over the whole batch. */
Test(resume_trace_checks, the_statistics_group_decides_not_the_sync_bn_flag)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "cpu", RB_ARGS(EFF_NET, "--quiet"),
                        RB_ARGS("--plan", "train", "--steps", "1", "--backend", "cpu", "--checkpoint-dir", "ck")),
                 0);
    cr_assert_eq(rb_run(dir, "sync", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "2", "--sync-bn", "--resume",
                                                           "ck")),
                 0, "a cpu checkpoint under mirrored --sync-bn: the same statistics");
    /* ck's step-2 checkpoint, rewritten as the older build wrote it: same length, so the tensors stay put. */
    char *ckd = rb_path(dir, "ck"), ck2[600];
    checkpoint_dir_path(ckd, 2, ck2, sizeof ck2);
    char crc[24];
    char *h = ckpt_header_crc(ck2, crc, sizeof crc);
    cr_assert(strncmp(strstr(h, crc) + 19, " bn_batch=8\"", 12) == 0, "%s", h);
    char now[40], then[40];
    snprintf(now, sizeof now, "%s bn_batch=8", crc);
    snprintf(then, sizeof then, "sync_bn=1 %s", crc);
    free(h);
    ckpt_rewrite_config(ck2, now, then);
    cr_assert_eq(rb_run(dir, "old_off", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "3", "--resume", "ck")), 2);
    char *err = rb_stderr(dir, "old_off");
    cr_assert(strstr(err, "(BatchNorm statistics over 8 samples in the checkpoint, over 4 in this run"), "%s", err);
    free(err);
    cr_assert_eq(rb_run(dir, "old_on", RB_ARGS(EFF), RB_ARGS("--plan", "train", "--steps", "3", "--sync-bn", "--resume",
                                                             "ck")),
                 0);
    rb_assert_resumed_from(dir, 2);
    free(ckd);
    tu_rm_rf(dir);
    free(dir);
}

/* An IDX split of n 28x28 images (pixels varied by sample and place) and labels i % 10 as dir/data/<prefix>-*. */
static void write_idx_split(const char *dir, const char *prefix, int n)
{
    const size_t px = 28u * 28u * (size_t)n;
    uint8_t *img = malloc(px);
    cr_assert_not_null(img);
    for (size_t i = 0; i < px; i++) img[i] = (uint8_t)(i * 7 + i / 784 * 13);
    char *data = rb_path(dir, "data");
    tu_write_idx(data, prefix, n, img, NULL);
    free(data), free(img);
}

/* Sets are named by their contents now ("idx" here); an older build named an IDX set by its folder ("mnist" for
 * any folder not named fashion), and its checkpoint of the very same data was refused as another data set. Where
 * the checkpoint's data CRC is this run's, it resumes, with a note; another CRC is still another data set. */
Test(resume_trace_checks, an_old_checkpoint_naming_an_idx_set_by_its_folder_resumes_on_the_same_data)
{
    char *dir = tu_mkdtemp("rtc"), *data = rb_path(dir, "data");
    cr_assert_eq(mkdir(data, 0700), 0);
    write_idx_split(dir, "train", 64);
    write_idx_split(dir, "t10k", 16);
#define IDX_RUN "--data", "data", "--batch", "8", "--mllog", "none", "--out", "results.jsonl", "--tuning", "none", \
                "--no-eval"
    cr_assert_eq(rb_run(dir, "first", RB_ARGS(IDX_RUN, "--quiet"), RB_ARGS("--steps", "1", "--checkpoint-dir", "ck")), 0);
    char *ckd = rb_path(dir, "ck"), ck1[600];
    checkpoint_dir_path(ckd, 1, ck1, sizeof ck1);
    char crc[24], other[24];
    char *h = ckpt_header_crc(ck1, crc, sizeof crc);
    cr_assert(strstr(h, " dataset=idx "), "%s", h);
    snprintf(other, sizeof other, "%s", crc);
    other[11] = other[11] == '0' ? '1' : '0'; /* another set's CRC */
    free(h);
    ckpt_rewrite_config(ck1, " dataset=idx ", " dataset=mnist ");
    ckpt_rewrite_config(ck1, crc, other);
    cr_assert_eq(rb_run(dir, "other", RB_ARGS(IDX_RUN), RB_ARGS("--steps", "2", "--resume", "ck")), 2);
    char *err = rb_stderr(dir, "other");
    cr_assert(strstr(err, "was made with another configuration (dataset=mnist in the checkpoint, dataset=idx in this "
                          "run)"), "%s", err);
    free(err);
    ckpt_rewrite_config(ck1, other, crc);
    cr_assert_eq(rb_run(dir, "same", RB_ARGS(IDX_RUN), RB_ARGS("--steps", "2", "--resume", "ck")), 0);
    err = rb_stderr(dir, "same");
    cr_assert(strstr(err, "names its data set by its folder (dataset=mnist, as older builds did); its data CRC is this "
                          "run's, so it resumes on this run's idx\n"), "%s", err);
    free(err);
    rb_assert_resumed_from(dir, 1);
#undef IDX_RUN
    free(ckd), free(data);
    tu_rm_rf(dir);
    free(dir);
}

/* EfficientNet-B0's BatchNorm over micro-batches of 2 overflows fp16 even unscaled: a throughput run halves its
 * dynamic scale from 32768 to 1 in 15 warm-up steps, and its last step overflows at 1 too. The advice was "lower
 * --lr, or run more --warmup steps so the dynamic scale can come down": neither can help there. */
Test(resume_trace_checks, no_update_applied_at_the_lowest_scale_advises_another_precision)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "tp", RB_ARGS("--workload", "effnet-b0", "--resolution", "16", "--data", "synthetic",
                                           "--synthetic-samples", "64,16", "--batch", "8", "--tuning", "none", "--mllog",
                                           "none", "--out", "results.jsonl", "--quiet"),
                        RB_ARGS("--plan", "throughput", "--backend", "ipu", "--devices", "1", "--stages", "1",
                                "--micro-batch", "2", "--ga", "4", "--precision", "fp16", "--warmup", "15", "--steps", "1")),
                 1);
    char *err = rb_stderr(dir, "tp");
    cr_assert(strstr(err, "bench: ipu/effnet-b0: no update applied: fp16 gradients overflowed on all 16 steps, the last "
                          "ones even at the lowest loss scale 1 (unscaled; more steps cannot help): use --precision "
                          "bf16 or fp32, or a larger --micro-batch: no rate to report\n"),
              "%s", err);
    free(err);
    struct json_value *r = rb_last_row(dir);
    cr_assert_str_eq(json_get_str(r, "status", ""), "diverged");
    json_value_free(r);
    tu_rm_rf(dir);
    free(dir);
}

/* A time budget runs its warm-up (10 by default) and at most 100 timed steps: a --trace-step past that was
 * accepted, and the run exited 0 with a warning and no trace. Refused (exit 2) before anything runs. */
Test(resume_trace_checks, a_trace_step_past_a_time_budgets_most_steps_is_refused)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "tb", RB_ARGS(SMALL), RB_ARGS("--plan", "throughput", "--time-budget", "0.01", "--trace",
                                                           "t.json", "--trace-step", "500")),
                 2);
    char *err = rb_stderr(dir, "tb");
    cr_assert(strstr(err, "bench: --trace-step 500: a --time-budget run has at most 110 steps (10 warm-up + up to 100 "
                          "timed)\n"), "%s", err);
    free(err);
    cr_assert_eq(rb_run(dir, "tb2", RB_ARGS(SMALL), RB_ARGS("--plan", "throughput", "--time-budget", "0.001", "--warmup",
                                                            "2", "--trace", "t.json", "--trace-step", "103")),
                 2);
    /* At the bound, but past what a budget of 1 ms runs (unless a step takes under 10 us): a warning, no trace
     * file and no figures.trace. */
    cr_assert_eq(rb_run(dir, "short", RB_ARGS(SMALL), RB_ARGS("--plan", "throughput", "--time-budget", "0.001",
                                                              "--warmup", "2", "--trace", "t.json", "--trace-step", "102")),
                 0);
    err = rb_stderr(dir, "short");
    cr_assert(strstr(err, "bench: warning: --trace t.json: step 102 never ran; no trace written"), "%s", err);
    free(err);
    char *t = rb_path(dir, "t.json");
    cr_assert_neq(access(t, F_OK), 0, "no trace file");
    free(t);
    struct json_value *r = rb_last_row(dir);
    cr_assert_null(json_get(r, "figures.trace"));
    json_value_free(r);
    tu_rm_rf(dir);
    free(dir);
}

/* A tta seed runs at most --max-epochs epochs: a --trace-step past them was accepted (exit 0, no trace), with
 * --steps-per-epoch and with the epoch the training set makes (256 / 8 = 32 steps). */
Test(resume_trace_checks, a_trace_step_past_a_tta_seeds_most_steps_is_refused)
{
    char *dir = tu_mkdtemp("rtc");
    cr_assert_eq(rb_run(dir, "spe", RB_ARGS(SMALL), RB_ARGS("--plan", "tta", "--max-epochs", "1", "--steps-per-epoch",
                                                            "4", "--target", "0.99", "--trace", "t.json", "--trace-step",
                                                            "5")),
                 2);
    char *err = rb_stderr(dir, "spe");
    cr_assert(strstr(err, "bench: --trace-step 5: a seed has at most 4 steps (--max-epochs 1, 4 steps an epoch)\n"), "%s", err);
    free(err);
    cr_assert_eq(rb_run(dir, "epoch", RB_ARGS(SMALL), RB_ARGS("--plan", "tta", "--max-epochs", "1", "--target", "0.99",
                                                              "--trace", "t.json", "--trace-step", "33")),
                 2);
    err = rb_stderr(dir, "epoch");
    cr_assert(strstr(err, "bench: --trace-step 33: a seed has at most 32 steps (--max-epochs 1, 32 steps an epoch)\n"), "%s", err);
    free(err);
    char *t = rb_path(dir, "t.json");
    cr_assert_neq(access(t, F_OK), 0, "no trace file");
    free(t);
    tu_rm_rf(dir);
    free(dir);
}
