/* test_calibrate_gpu.c — the GPU part of a calibration: the file round-trips the GPU's facts and ceilings
 * and the reason there are none (absent, not built, failed), rejects a "measured" GPU without a positive
 * ceiling, reads an older file without a GPU as saying nothing; GPU ceilings match a GPU by name; and on
 * this machine `bench --calibrate` records the GPU it has — measured where a GPU answers (every ceiling
 * positive), else absent with the runtime's reason (a cuda build) or not built, in one line of its output,
 * exit 0 and no zero ceiling in the file. Runs without a GPU. */
#include "test_harness_util.h"

#include "calibrate.h"
#include "executor.h"
#include "json.h"

#include <unistd.h>

/* A calibration with CPU figures, as calibrate_measure leaves it. */
static struct calibration cpu_calibration(void)
{
    struct calibration c = {0};
    c.sgemm_n = 2048, c.sgemm_1t_gflops = 61.5, c.sgemm_all_gflops = 118.25, c.all_threads = 2;
    c.triad_1t_gbs = 12.5, c.triad_all_gbs = 19.75, c.triad_elements = 1 << 24, c.cores = 2;
    snprintf(c.cpu_model, sizeof c.cpu_model, "Test CPU");
    snprintf(c.blas_core, sizeof c.blas_core, "Zen");
    snprintf(c.timestamp, sizeof c.timestamp, "2024-01-01T00:00:00Z");
    return c;
}

Test(calibrate_gpu, measured_gpu_round_trips, .init = th_setup, .fini = th_teardown)
{
    struct calibration c = cpu_calibration(), r;
    struct calibration_gpu *g = &c.gpu;
    g->state = CAL_GPU_MEASURED;
    snprintf(g->info.name, sizeof g->info.name, "NVIDIA H200");
    snprintf(g->info.driver_version, sizeof g->info.driver_version, "580.65.06");
    snprintf(g->info.driver_cuda, sizeof g->info.driver_cuda, "13.0");
    snprintf(g->info.runtime_version, sizeof g->info.runtime_version, "13.0");
    snprintf(g->info.capability, sizeof g->info.capability, "9.0");
    g->info.mem_gib = 139.8, g->info.multiprocessors = 132;
    g->c = (struct device_ceilings){.gemm_n = 8192, .reps = 5, .fp32_tflops = 51.25, .tf32_tflops = 378.5,
                                    .bf16_tflops = 712.75, .copy_bytes = 1073741824.0, .memcpy_gbs = 3900.5,
                                    .copy_kernel_gbs = 4100.25};
    char p[192];
    cr_assert_eq(calibrate_write(&c, th_path(p, sizeof p, "calibration.json")), TB_OK, "%s", tb_error_get());
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
    cr_assert_eq(r.gpu.state, CAL_GPU_MEASURED);
    cr_assert_str_eq(r.gpu.info.name, "NVIDIA H200");
    cr_assert_str_eq(r.gpu.info.driver_version, "580.65.06");
    cr_assert_str_eq(r.gpu.info.driver_cuda, "13.0");
    cr_assert_str_eq(r.gpu.info.runtime_version, "13.0");
    cr_assert_str_eq(r.gpu.info.capability, "9.0");
    cr_assert_float_eq(r.gpu.info.mem_gib, 139.8, 1e-12);
    cr_assert_eq(r.gpu.info.multiprocessors, 132);
    cr_assert_eq(r.gpu.c.gemm_n, 8192);
    cr_assert_eq(r.gpu.c.reps, 5);
    cr_assert_float_eq(r.gpu.c.fp32_tflops, 51.25, 1e-12);
    cr_assert_float_eq(r.gpu.c.tf32_tflops, 378.5, 1e-12);
    cr_assert_float_eq(r.gpu.c.bf16_tflops, 712.75, 1e-12);
    cr_assert_float_eq(r.gpu.c.copy_bytes, 1073741824.0, 1e-3);
    cr_assert_float_eq(r.gpu.c.memcpy_gbs, 3900.5, 1e-12);
    cr_assert_float_eq(r.gpu.c.copy_kernel_gbs, 4100.25, 1e-12);
    cr_assert_float_eq(calibrate_gpu_copy_gbs(&r.gpu), 4100.25, 1e-12);
    /* The CPU part is untouched by the GPU's. */
    cr_assert_float_eq(r.sgemm_all_gflops, 118.25, 1e-12);
    cr_assert_str_eq(r.cpu_model, "Test CPU");
    /* Ceilings belong to the GPU they were measured on. */
    cr_assert(calibrate_gpu_matches(&r.gpu, "NVIDIA H200"));
    cr_assert(!calibrate_gpu_matches(&r.gpu, "NVIDIA H100 80GB HBM3"));
    cr_assert(!calibrate_gpu_matches(&r.gpu, NULL));
}

Test(calibrate_gpu, absent_and_not_built_keep_their_reason_and_no_ceiling, .init = th_setup, .fini = th_teardown)
{
    const enum calibration_gpu_state states[] = {CAL_GPU_ABSENT, CAL_GPU_NOT_BUILT, CAL_GPU_FAILED};
    const char *const names[] = {"absent", "not built", "failed"};
    for (int k = 0; k < 3; k++) {
        struct calibration c = cpu_calibration(), r;
        c.gpu.state = states[k];
        snprintf(c.gpu.why, sizeof c.gpu.why, "cuda: no CUDA device (cudaGetDeviceCount: reason %d)", k);
        char p[192], want[64];
        cr_assert_eq(calibrate_write(&c, th_path(p, sizeof p, "calibration.json")), TB_OK, "%s", tb_error_get());
        char *text = th_read(p);
        snprintf(want, sizeof want, "\"gpu\":{\"status\":\"%s\"", names[k]);
        cr_assert(strstr(text, want) != NULL, "%s", text);
        cr_assert(strstr(text, "tflops") == NULL && strstr(text, "_gbs\":0") == NULL, "no ceiling, zero or other: %s",
                  text);
        free(text);
        cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
        cr_assert_eq(r.gpu.state, states[k]);
        cr_assert(strstr(r.gpu.why, "reason") != NULL, "%s", r.gpu.why);
        cr_assert_eq(r.gpu.c.fp32_tflops, 0.0);
        cr_assert(!calibrate_gpu_matches(&r.gpu, ""));
        cr_assert_str_eq(calibrate_gpu_state_name(r.gpu.state), names[k]);
    }
}

Test(calibrate_gpu, older_and_broken_files, .init = th_setup, .fini = th_teardown)
{
    static const char cpu[] = "{\"schema\":1,\"kind\":\"calibration\",\"timestamp\":\"T\",\"cpu_model\":\"C\","
                              "\"cores\":2,\"blas_core\":\"Zen\",\"sgemm_n\":2048,\"sgemm_1t_gflops\":60,"
                              "\"sgemm_all_gflops\":115,\"all_threads\":2,\"triad_1t_gbs\":12,\"triad_all_gbs\":18";
    char p[192], text[1024];
    struct calibration r;
    /* Written before GPUs were calibrated: the CPU ceilings stand, the GPU is unknown. */
    snprintf(text, sizeof text, "%s}\n", cpu);
    th_write(th_path(p, sizeof p, "old.json"), text);
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
    cr_assert_eq(r.gpu.state, CAL_GPU_UNKNOWN);
    /* A "measured" GPU must carry every ceiling, positive. */
    snprintf(text, sizeof text,
             "%s,\"gpu\":{\"status\":\"measured\",\"name\":\"G\",\"fp32_tflops\":0,\"tf32_tflops\":1,"
             "\"bf16_tflops\":1,\"memcpy_d2d_gbs\":1,\"copy_kernel_gbs\":1}}\n", cpu);
    th_write(th_path(p, sizeof p, "zero.json"), text);
    cr_assert_eq(calibrate_read(p, &r), TB_EFORMAT);
    cr_assert(strstr(tb_error_get(), "zero.json") && strstr(tb_error_get(), "gpu"), "%s", tb_error_get());
    snprintf(text, sizeof text, "%s,\"gpu\":{\"status\":\"sideways\"}}\n", cpu);
    th_write(th_path(p, sizeof p, "status.json"), text);
    cr_assert_eq(calibrate_read(p, &r), TB_EFORMAT);
    tb_error_clear();
}

/* What this machine has: a GPU measured, or why there is none, never a zero ceiling. */
Test(calibrate_gpu, this_machine_measures_or_says_why, .init = th_setup, .fini = th_teardown, .timeout = 120)
{
    struct calibration_gpu g;
    const enum calibration_gpu_state st = calibrate_measure_gpu(&g, 2048);
    const int gpu = executor_device_probe("cuda") == TB_OK;
    tb_error_clear();
    if (gpu) {
        cr_assert_eq(st, CAL_GPU_MEASURED, "%s: %s", calibrate_gpu_state_name(st), g.why);
        cr_assert(g.info.name[0] && g.info.capability[0] && g.info.mem_gib > 0 && g.info.multiprocessors > 0);
        cr_assert(g.c.fp32_tflops > 0 && g.c.tf32_tflops > 0 && g.c.bf16_tflops > 0);
        cr_assert(g.c.memcpy_gbs > 0 && g.c.copy_kernel_gbs > 0 && g.c.copy_bytes > 0);
        cr_assert_eq(g.c.gemm_n, 2048);
        return;
    }
#ifdef TB_HAVE_CUDA
    cr_assert_eq(st, CAL_GPU_ABSENT, "%s", calibrate_gpu_state_name(st));
    cr_assert(strstr(g.why, "no CUDA device") != NULL, "the runtime's reason: %s", g.why);
#else
    cr_assert_eq(st, CAL_GPU_NOT_BUILT, "%s", calibrate_gpu_state_name(st));
    cr_assert(strstr(g.why, "built without") != NULL, "%s", g.why);
#endif
    cr_assert_eq(g.c.fp32_tflops, 0.0);
    cr_assert_eq(g.c.memcpy_gbs, 0.0);
}

/* The bench to run: the one beside this test (a build tree, or tools/gpu_session.sh's pack, which moves both to
 * another machine), else the build's own path. */
static const char *bench_exe(char *buf, size_t cap)
{
    const ssize_t k = readlink("/proc/self/exe", buf, cap - 1);
    if (k > 0) {
        buf[k] = '\0';
        char *slash = strrchr(buf, '/');
        if (slash && (size_t)(slash - buf) + sizeof "/bench" <= cap) {
            strcpy(slash, "/bench");
            if (access(buf, X_OK) == 0) return buf;
        }
    }
    snprintf(buf, cap, "%s", TB_BENCH_EXE);
    return buf;
}

/* `bench --calibrate` succeeds for the CPU and says the GPU's state in its output and the file. */
Test(calibrate_gpu, bench_calibrate_records_the_gpu, .init = th_setup, .fini = th_teardown, .timeout = 120)
{
    char cmd[4608], p[192], exe[4096];
    snprintf(cmd, sizeof cmd, "'%s' --calibrate --calibration '%s' 2>&1", bench_exe(exe, sizeof exe),
             th_path(p, sizeof p, "calibration.json"));
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char line[1024], out[8192] = "";
    int gpu_lines = 0, state_lines = 0;
    while (fgets(line, sizeof line, f)) {
        strncat(out, line, sizeof out - strlen(out) - 1);
        gpu_lines += !strncmp(line, "  gpu ", 6);
        state_lines += !strncmp(line, "  gpu         absent: ", 22) || !strncmp(line, "  gpu         not built: ", 25);
    }
    cr_assert_eq(pclose(f), 0, "bench --calibrate failed:\n%s", out);
    struct calibration r;
    cr_assert_eq(calibrate_read(p, &r), TB_OK, "%s", tb_error_get());
    if (r.gpu.state == CAL_GPU_MEASURED) {
        cr_assert_eq(gpu_lines, 3, "facts, GEMMs, copy:\n%s", out);
        cr_assert(strstr(out, "TF32 off") && strstr(out, "bf16") && strstr(out, "cudaMemcpy"), "%s", out);
        return;
    }
    cr_assert(r.gpu.state == CAL_GPU_ABSENT || r.gpu.state == CAL_GPU_NOT_BUILT, "%s",
              calibrate_gpu_state_name(r.gpu.state));
    cr_assert_eq(gpu_lines, 1, "one line for a machine without a GPU:\n%s", out);
    cr_assert_eq(state_lines, 1, "%s", out);
    cr_assert(strstr(out, r.gpu.why) != NULL, "the line gives the recorded reason:\n%s", out);
    char *text = th_read(p);
    cr_assert(strstr(text, "tflops") == NULL && strstr(text, "gbs\":0") == NULL, "%s", text);
    free(text);
}
