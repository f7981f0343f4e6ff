/* test_projection.c — the POD-scale model against hand-computed cases and Graphcore's default table. */
#include "projection.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void two_stages(struct proj_measured *m)
{
    *m = (struct proj_measured){.stages = 2, .micro_batch = 3};
    m->t_fwd[0] = 0.010, m->t_bwd[0] = 0.020;
    m->t_fwd[1] = 0.012, m->t_bwd[1] = 0.024;
    m->exchange_bytes[1] = 4e6;
    m->param_bytes[0] = 40e6, m->param_bytes[1] = 40e6;
}

Test(projection, graphcore_default_table_for_b4_g16)
{
    const int devices[] = {16, 32, 64, 128, 256};
    struct proj_row rows[8];
    int n = proj_default_rows(devices, 5, 2, 3, 6144, rows);
    cr_assert_eq(n, 5);
    const int R[] = {8, 16, 32, 64, 128}, G[] = {256, 128, 64, 32, 16};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(rows[i].replicas, R[i]);
        cr_assert_eq(rows[i].ga, G[i]);
    }
}

Test(projection, one_replica_hand_computed)
{
    struct proj_measured m;
    two_stages(&m);
    struct proj_links l = {.exchange_bw = 1e9, .exchange_lat = 0.0, .allreduce_bw = 1e9, .allreduce_lat = 0.0};
    struct proj_row r = {.replicas = 1, .ga = 8};
    proj_project(&m, &l, &r);
    /* slowest stage: 0.036 + 4e6/1e9 = 0.040 s; (8 + 1)·0.040 = 0.36 s; no all-reduce with one replica. */
    cr_assert_float_eq(r.pipe_s, 0.36, 1e-12);
    cr_assert_float_eq(r.allreduce_s, 0.0, 1e-15);
    cr_assert_float_eq(r.images_per_s, 24.0 / 0.36, 1e-9);
    cr_assert_float_eq(r.utilisation, 8 * 0.066 / (2 * 0.36), 1e-12);
}

Test(projection, allreduce_and_efficiency)
{
    struct proj_measured m;
    two_stages(&m);
    struct proj_links l = {.exchange_bw = 1e9, .exchange_lat = 0.0, .allreduce_bw = 1e9, .allreduce_lat = 1e-5};
    struct proj_row rows[2] = {{.replicas = 1, .ga = 8}, {.replicas = 4, .ga = 8}};
    proj_table(&m, &l, rows, 2);
    /* R = 4: 2·3/4·40e6/1e9 + 6·1e-5 = 0.06006 s per step. */
    cr_assert_float_eq(rows[1].allreduce_s, 0.06006, 1e-12);
    cr_assert_float_eq(rows[1].images_per_s, 96.0 / (0.36 + 0.06006), 1e-9);
    cr_assert_float_eq(rows[0].efficiency, 1.0, 1e-12);
    cr_assert(rows[1].efficiency < 1.0 && rows[1].efficiency > 0.8);
    /* More accumulation amortises the all-reduce: efficiency rises towards 1. */
    struct proj_row more[2] = {{.replicas = 1, .ga = 64}, {.replicas = 4, .ga = 64}};
    proj_table(&m, &l, more, 2);
    cr_assert(more[1].efficiency > rows[1].efficiency);
}

/* Runs a shell command; returns its stdout + stderr (malloc'd) and exit status. */
static char *run_cmd(const char *cmd, int *status)
{
    FILE *f = popen(cmd, "r");
    cr_assert(f != NULL);
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0)
        if ((n += k) + 1 >= cap) buf = realloc(buf, cap *= 2);
    buf[n] = '\0';
    const int st = pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

/* bench's output (both streams) for an ipu run of 2 stages, micro-batch 3, GA 4 (global batch 12) with
 * --project-devices list, its row into rows; *status its exit status. */
static char *run_projected(const char *list, const char *rows, int *status)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' --plan throughput --backend ipu --workload mnist-mlp --stages 2 --micro-batch 3 --ga 4 --batch 12 "
             "--steps 3 --warmup 1 --project-devices %s --out %s 2>&1",
             TB_BENCH_EXE, list, rows);
    return run_cmd(cmd, status);
}

/* --project-devices holds the run's own global batch (micro-batch 3 on 2 stages once meant 6144, said
 * nowhere), and checks the model against the measurement at the arrangement the run measured. */
Test(projection, project_devices_keeps_the_run_batch_and_validates, .timeout = 60)
{
    const char *rows = "/tmp/tb_test_projection_rows.jsonl";
    remove(rows);
    int status;
    char *out = run_projected("2,4", rows, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(!strstr(out, "6144"), "%s", out);
    int d, lb, st, r, g, gb;
    const char *row = strstr(out, "\n        2 ");
    cr_assert(row && sscanf(row, " %d %d %d %d %d %d", &d, &lb, &st, &r, &g, &gb) == 6, "%s", out);
    cr_assert(d == 2 && r == 1 && g == 4 && gb == 12, "%s", out);
    row = strstr(out, "\n        4 ");
    cr_assert(row && sscanf(row, " %d %d %d %d %d %d", &d, &lb, &st, &r, &g, &gb) == 6, "%s", out);
    cr_assert(d == 4 && r == 2 && g == 2 && gb == 12, "%s", out);
    cr_assert(strstr(out, "global batch 12 at every device count: this run's"), "%s", out);
    const char *v = strstr(out, "validation  at the measured arrangement (2 devices, 1 replica, accumulation 4): projected ");
    cr_assert(v, "%s", out);
    double proj, meas, gap;
    cr_assert_eq(sscanf(strstr(v, "projected ") + 10, "%lf images/s, measured %lf: %lf %%", &proj, &meas, &gap), 3, "%s", v);
    cr_assert(meas > 0 && fabs(gap - 100.0 * (proj / meas - 1.0)) < 0.2, "%s", v);
    free(out);
    /* The row carries both: the batch the table holds and the validation. */
    FILE *f = fopen(rows, "r");
    cr_assert(f != NULL);
    char line[1 << 16];
    cr_assert(fgets(line, sizeof line, f) != NULL);
    fclose(f);
    cr_assert(strstr(line, "\"global_batch\":12,\"validation\":{\"devices\":2,\"replicas\":1,\"ga\":4,"), "%s", line);
    cr_assert(strstr(line, "\"images_per_s_measured\":") && strstr(line, "\"gap\":"), "%s", line);
    cr_assert(strstr(line, "\"project_devices\":\"2,4\",\"project_device\":\"\""), "the config says what was asked: %s",
              line);
    remove(rows);
}

/* --project-devices none of whose counts fits the arrangement the backend chose is refused once the backend is
 * prepared, before a step (it was measured, then nothing projected, exit 0); one count that fits is enough. */
Test(projection, project_devices_none_fits_is_refused_before_a_step, .timeout = 60)
{
    const char *rows = "/tmp/tb_test_projection_nofit.jsonl";
    remove(rows);
    int status;
    char *out = run_projected("3,5", rows, &status);
    cr_assert_eq(status, 2, "%s", out);
    cr_assert(strstr(out, "bench: --project-devices 3,5: no count fits this run's 2 stages, micro-batch 3 and global "
                          "batch 12, so nothing would be projected (3 devices do not divide into 2 stages; 5 devices do not divide into "
                          "2 stages)\n"),
              "%s", out);
    cr_assert(!strstr(out, "images/s"), "a step was measured: %s", out);
    cr_assert(access(rows, F_OK) != 0, "a row was written");
    free(out);
    /* 3 still does not fit, 4 does: the run projects onto 4 alone and notes the other */
    out = run_projected("3,4", rows, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(strstr(out, "bench: note: --project-devices 3 left out: 3 devices do not divide into 2 stages"), "%s", out);
    cr_assert(strstr(out, "\n        4 "), "%s", out);
    free(out);
    remove(rows);
}

/* The link options are --project-devices' model: a latency of 0 (in their range) was taken for "not given" and the
 * defaults' 5 and 10 us used; given without --project-devices they changed nothing, unsaid. */
Test(projection, link_options_are_the_project_devices_model, .timeout = 60)
{
    const char *rows = "/tmp/tb_test_projection_links.jsonl";
    remove(rows);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' --plan throughput --backend ipu --workload mnist-mlp --stages 2 --micro-batch 3 --ga 4 --batch 12 "
             "--steps 3 --warmup 1 --project-devices 2,4 --link-latency 0 --allreduce-latency 0 --out %s 2>&1",
             TB_BENCH_EXE, rows);
    int status;
    char *out = run_cmd(cmd, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(strstr(out, "link model: exchange 32.0 GB/s + 0.0 us, all-reduce 12.5 GB/s + 0.0 us per ring step"), "%s",
              out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' --backend ipu --workload mnist-mlp --steps 1 --link-bw 10 --out %s 2>&1", TB_BENCH_EXE,
             rows);
    out = run_cmd(cmd, &status);
    cr_assert_eq(status, 2, "%s", out);
    cr_assert(strstr(out, "bench: --link-bw sets the link model of --project-devices, which is not given"), "%s", out);
    free(out);
    remove(rows);
}
