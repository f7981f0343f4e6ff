/* test_harness_stats.c — the statistics plumbing of the run plans: step times → throughput figures
 * (warm-up excluded, median/mean/s.e./jitter over per-step rates, percentiles), latency percentiles,
 * the olympic mean of time to accuracy, peak memory, the traffic estimate, the calibration file, and
 * MLPerf-style event lines. */
#include "test_harness_util.h"

#include "calibrate.h"
#include "json.h"
#include "measure.h"
#include "mllog.h"
#include "model.h"
#include "status.h"

#include <math.h>

Test(harness_stats, throughput_excludes_warmup_and_summarises_rates)
{
    /* 3 slow warm-up steps, then 8 steps at 1 ms and 2 at 2 ms, batch 10. */
    double t[13] = {1.0, 1.0, 1.0, 1e-3, 1e-3, 1e-3, 1e-3, 2e-3, 1e-3, 1e-3, 1e-3, 2e-3, 1e-3};
    struct measure_throughput m;
    cr_assert_eq(measure_throughput(t, 13, 3, 10, &m), TB_OK, "%s", tb_error_get());
    cr_assert_eq(m.n_steps, 10);
    cr_assert_float_eq(m.time_s, 12e-3, 1e-12);
    cr_assert_float_eq(m.images_per_s, 100.0 / 12e-3, 1e-6);   /* overall: samples / seconds */
    cr_assert_float_eq(m.rate.median, 10000.0, 1e-6);          /* 10 / 1 ms */
    cr_assert_float_eq(m.rate.mean, (8 * 10000.0 + 2 * 5000.0) / 10, 1e-6);
    cr_assert_float_eq(m.rate.mad_jitter, 0.0, 1e-9);          /* most steps equal: MAD 0 */
    cr_assert_float_eq(m.rate.min, 5000.0, 1e-6);
    cr_assert_float_eq(m.step.median, 1e-3, 1e-12);
    cr_assert(m.step_p90_s > 1e-3 && m.step_p90_s <= 2e-3);
    cr_assert_float_eq(m.step_p99_s, 2e-3, 1e-9);
    /* The s.e. is the sample sd over sqrt(n). */
    double sd = sqrt((8 * pow(10000.0 - m.rate.mean, 2) + 2 * pow(5000.0 - m.rate.mean, 2)) / 9.0);
    cr_assert_float_eq(m.rate.stderr_, sd / sqrt(10.0), 1e-6);
}

Test(harness_stats, throughput_jitter_is_1_4826_mad)
{
    double t[5] = {1.0 / 100, 1.0 / 110, 1.0 / 90, 1.0 / 130, 1.0 / 100}; /* rates 100,110,90,130,100 */
    struct measure_throughput m;
    cr_assert_eq(measure_throughput(t, 5, 0, 1, &m), TB_OK);
    cr_assert_float_eq(m.rate.median, 100.0, 1e-9);
    /* |x - 100| = 0,10,10,30,0 → median 10 */
    cr_assert_float_eq(m.rate.mad_jitter, 14.826, 1e-9);
}

Test(harness_stats, throughput_rejects_nothing_to_time)
{
    double t[3] = {1e-3, 1e-3, 0.0};
    struct measure_throughput m;
    cr_assert_eq(measure_throughput(t, 3, 3, 8, &m), TB_EINVAL);
    cr_assert_eq(measure_throughput(t, 3, 5, 8, &m), TB_EINVAL);
    cr_assert_eq(measure_throughput(t, 3, 0, 8, &m), TB_EINVAL); /* a zero step time */
    cr_assert(strstr(tb_error_get(), "step 3") != NULL, "%s", tb_error_get());
    cr_assert_eq(measure_throughput(t, 2, 0, 0, &m), TB_EINVAL);  /* batch 0 */
}

Test(harness_stats, latency_percentiles)
{
    double l[100];
    for (int i = 0; i < 100; i++) l[i] = (i + 1) * 1e-3; /* 1..100 ms */
    struct measure_latency m;
    cr_assert_eq(measure_latency(l, 100, &m), TB_OK);
    cr_assert_float_eq(m.p50_s, 50.5e-3, 1e-12);
    cr_assert_float_eq(m.p90_s, 90.1e-3, 1e-12);
    cr_assert_float_eq(m.p99_s, 99.01e-3, 1e-12);
    cr_assert_float_eq(m.min_s, 1e-3, 1e-15);
    cr_assert_float_eq(m.max_s, 100e-3, 1e-15);
    cr_assert_eq(measure_latency(l, 0, &m), TB_EINVAL);
}

Test(harness_stats, tta_olympic_mean_counts_misses_as_infinite)
{
    double t[5] = {10, 12, 11, 50, 13};
    int all[5] = {1, 1, 1, 1, 1}, one_miss[5] = {1, 1, 1, 0, 1}, two_miss[5] = {1, 0, 1, 0, 1};
    cr_assert_float_eq(tta_olympic_mean(t, all, 5), (12 + 11 + 13) / 3.0, 1e-12);
    /* The miss is the slowest, dropped; the fastest (10) too. */
    cr_assert_float_eq(tta_olympic_mean(t, one_miss, 5), (12 + 11 + 13) / 3.0, 1e-12);
    cr_assert(isnan(tta_olympic_mean(t, two_miss, 5)));
    cr_assert_float_eq(tta_olympic_mean(t, all, 2), 11.0, 1e-12); /* n < 3: plain mean */
    int miss1[1] = {0};
    cr_assert(isnan(tta_olympic_mean(t, miss1, 1)));
    cr_assert(isnan(tta_olympic_mean(t, all, 0)));
}

Test(harness_stats, peak_memory_and_traffic_estimate)
{
    (void)measure_peak_reset();
    double before = measure_peak_rss_mib();
    cr_assert(before > 0.0);
    char *big = malloc(64 << 20);
    cr_assert_not_null(big);
    memset(big, 1, 64 << 20);
    double after = measure_peak_rss_mib();
    cr_assert(after >= before + 60.0, "peak %.1f MiB after touching 64 MiB (was %.1f)", after, before);
    free(big);

    struct model m;
    memset(&m, 0, sizeof m);
    m.n_params = 1000, m.unit_floats = 100, m.in_h = 28, m.in_w = 28, m.in_c = 1;
    double b1 = measure_train_bytes_per_step(&m, 1, 2, 4, 4), b8 = measure_train_bytes_per_step(&m, 8, 2, 4, 4);
    cr_assert_float_eq(b1, 4.0 * (1000 * 10.0 + 400.0) + 784.0, 1e-9);
    cr_assert_float_eq(b8 - b1, 7 * (1600.0 + 784.0), 1e-9); /* activations and input scale with the batch */
    cr_assert_float_eq(measure_infer_bytes_per_step(&m, 2, 4, 4), 4.0 * (1000 + 400.0) + 2 * 784.0, 1e-9);
    /* 2-byte storage: activations (and, without fp32 masters, parameters and gradients) at half; the
     * optimizer's state stays fp32 (an fp16 run's roofline point sat at the fp32 run's intensity) */
    cr_assert_float_eq(measure_train_bytes_per_step(&m, 1, 2, 2, 4), 1000 * (6 * 4.0 + 16.0) + 400 * 2.0 + 784.0, 1e-9);
    cr_assert_float_eq(measure_train_bytes_per_step(&m, 1, 2, 2, 2), 1000 * (6 * 2.0 + 16.0) + 400 * 2.0 + 784.0, 1e-9);
    cr_assert_float_eq(measure_infer_bytes_per_step(&m, 2, 2, 2), 2.0 * (1000 + 400.0) + 2 * 784.0, 1e-9);
    /* which storage a configuration has */
    struct bench_config c;
    const char *const precs[] = {"", "fp32", "fp16", "bf16", "fp16m", "bf16m"};
    const int want[][2] = {{4, 4}, {4, 4}, {2, 2}, {2, 2}, {2, 4}, {2, 4}};
    for (int k = 0; k < 6; k++) {
        bench_config_defaults(&c);
        snprintf(c.run.ipu.precision, sizeof c.run.ipu.precision, "%s", precs[k]);
        int act = 0, param = 0;
        bench_config_storage_bytes(&c, &act, &param);
        cr_assert(act == want[k][0] && param == want[k][1], "'%s': %d, %d", precs[k], act, param);
        snprintf(c.device, sizeof c.device, "cuda"); /* mixed precision: fp32 parameters */
        bench_config_storage_bytes(&c, &act, &param);
        cr_assert(act == want[k][0] && param == 4, "cuda '%s': %d, %d", precs[k], act, param);
    }
}

Test(harness_stats, calibration_round_trip, .init = th_setup, .fini = th_teardown)
{
    struct calibration c = {0}, r;
    c.sgemm_n = 2048, c.sgemm_1t_gflops = 61.5, c.sgemm_all_gflops = 118.25, c.all_threads = 2, c.cores = 2;
    c.triad_1t_gbs = 12.5, c.triad_all_gbs = 19.75, c.triad_elements = 1 << 24;
    snprintf(c.cpu_model, sizeof c.cpu_model, "Test CPU");
    snprintf(c.timestamp, sizeof c.timestamp, "2024-01-01T00:00:00Z");
    char p[192];
    cr_assert_eq(calibrate_write(&c, th_path(p, sizeof p, "sub/dir/calibration.json")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
    cr_assert_float_eq(r.sgemm_all_gflops, 118.25, 1e-12);
    cr_assert_float_eq(r.triad_all_gbs, 19.75, 1e-12);
    cr_assert_eq(r.all_threads, 2);
    cr_assert_str_eq(r.cpu_model, "Test CPU");
    /* names bench prints, from a file: one line of text (a newline and a terminal escape split and coloured the
     * warning that names the CPU) */
    snprintf(c.cpu_model, sizeof c.cpu_model, "EVIL\n\x1b[31mRED");
    cr_assert_eq(calibrate_write(&c, p), TB_OK, "%s", tb_error_get());
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(r.cpu_model, "EVIL\n\x1b[31mRED", "compared as the file has it");
    char why[512];
    cr_assert_eq(calibrate_matches(&r, "Other CPU", 2, "Zen", why, sizeof why), 0);
    cr_assert_str_eq(why, "measured on \"EVIL\\x0a\\x1b[31mRED\", this is \"Other CPU\"");
    cr_assert_eq(calibrate_read(th_path(p, sizeof p, "missing.json"), &r), TB_EIO);
    th_write(th_path(p, sizeof p, "bad.json"), "{\"sgemm_1t_gflops\": ");
    cr_assert_eq(calibrate_read(p, &r), TB_EFORMAT);
    cr_assert(strstr(tb_error_get(), "bad.json") != NULL, "%s", tb_error_get());
    /* A probe's: negative, zero and absurd ceilings were taken (rows got negative or 1e301 peak shares), and a
     * file past 8 KB (padded) was cut and refused. */
    static const char *const bad[][2] = {
        {"\"sgemm_all_gflops\":-100", "sgemm_all_gflops"}, {"\"triad_1t_gbs\":0", "triad_1t_gbs"},
        {"\"sgemm_all_gflops\":1e-300", "sgemm_all_gflops"}, {"\"triad_1t_gbs\":\"x\"", "triad_1t_gbs"},
        {"\"cores\":0", "cores"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[512];
        snprintf(text, sizeof text, "{\"sgemm_1t_gflops\":60,\"triad_all_gbs\":20,\"all_threads\":2,%s}", bad[k][0]);
        th_write(th_path(p, sizeof p, "bad.json"), text);
        cr_assert_eq(calibrate_read(p, &r), TB_EFORMAT, "%s accepted", bad[k][0]);
        cr_assert(strstr(tb_error_get(), bad[k][1]) != NULL, "%s", tb_error_get());
    }
    char *padded = malloc(20000);
    cr_assert(padded);
    snprintf(padded, 20000, "{%*s\"kind\":\"calibration\",\"sgemm_1t_gflops\":60,\"sgemm_all_gflops\":115,"
             "\"triad_1t_gbs\":12,\"triad_all_gbs\":20}", 10000, "");
    th_write(th_path(p, sizeof p, "padded.json"), padded);
    free(padded);
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "a calibration past 8 KB: %s", tb_error_get());
    cr_assert_eq(calibrate_check_target(p), TB_OK, "--calibrate would not replace a calibration past 8 KB: %s",
                 tb_error_get());
    cr_assert_float_eq(r.triad_all_gbs, 20.0, 1e-12);
}

Test(harness_stats, mllog_lines_are_mlperf_events, .init = th_setup, .fini = th_teardown)
{
    struct mllog lg;
    char dir[192], p[192];
    cr_assert_eq(mllog_open(&lg, th_path(dir, sizeof dir, "logs/deep"), "run-1"), TB_OK, "%s", tb_error_get());
    mllog_event(&lg, MLLOG_START, "run_start", "null", -1, NULL);
    mllog_point_str(&lg, "opt_name", "adam");
    mllog_point_int(&lg, "global_batch_size", 32);
    mllog_event(&lg, MLLOG_POINT, "eval_accuracy", "0.88", 3, NULL);
    mllog_event(&lg, MLLOG_END, "run_stop", "null", -1, "success");
    cr_assert_eq(mllog_close(&lg, NULL, 0), TB_OK);
    char *text = th_read(th_path(p, sizeof p, "logs/deep/run-1.log"));
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), n++) {
        cr_assert(strncmp(line, ":::MLLOG {", 10) == 0, "line: %s", line);
        struct json_value *v = NULL;
        cr_assert_eq(json_parse(line + 9, strlen(line + 9), &v), TB_OK, "%s", tb_error_get());
        cr_assert(json_get_number(v, "time_ms", 0) > 1.6e12);
        const char *key = json_get_str(v, "key", "");
        if (!strcmp(key, "eval_accuracy")) {
            cr_assert_float_eq(json_get_number(v, "value", 0), 0.88, 1e-12);
            cr_assert_float_eq(json_get_number(v, "metadata.epoch_num", -1), 3, 0);
            cr_assert_str_eq(json_get_str(v, "event_type", ""), "POINT_IN_TIME");
        }
        if (!strcmp(key, "run_stop")) {
            cr_assert_str_eq(json_get_str(v, "metadata.status", ""), "success");
            cr_assert_str_eq(json_get_str(v, "event_type", ""), "INTERVAL_END");
        }
        if (!strcmp(key, "opt_name")) cr_assert_str_eq(json_get_str(v, "value", ""), "adam");
        json_value_free(v);
    }
    cr_assert_eq(n, 5);
    free(text);
    /* "none" disables the log: every call is a no-op. */
    cr_assert_eq(mllog_open(&lg, "none", "x"), TB_OK);
    cr_assert_null(lg.f);
    mllog_point_int(&lg, "seed", 1);
    cr_assert_eq(mllog_close(&lg, NULL, 0), TB_OK);
}
