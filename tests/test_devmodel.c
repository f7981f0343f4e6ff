/* test_devmodel.c — the device model: spec files (good and bad), the roofline of one layer against a hand
 * computation, the composition through proj_project, the hierarchical all-reduce, the published-figures
 * file, and bench's seed-001 projection printed with its labels and errors (TB_BENCH_EXE). */
#include "devmodel.h"
#include "model.h"
#include "projection.h"
#include "report_seed001.h"
#include "status.h"
#include "workload.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(devmodel, .timeout = 60);

static const char *const good_spec =
    "# a test device\n"
    "name = testdev\n"
    "kind = gpu\n"
    "title = a device for tests\n"
    "peak_fp32_tflops = 1        # source: test\n"
    "peak_fp16_tflops = 2        # source: test\n"
    "vector_fp32_tflops = 0.5    # source: test\n"
    "vector_fp16_tflops = 1      # source: test\n"
    "matrix_min_channels = 32    # source: test\n"
    "efficiency_matrix = 0.5     # source: test\n"
    "efficiency_vector = 1       # source: test\n"
    "efficiency_memory = 1       # source: test\n"
    "kernel_overhead_us = 1      # source: test\n"
    "mem1_name = fast\n"
    "mem1_capacity_gb = 0.001    # source: test\n"
    "mem1_bandwidth_gbs = 1      # source: test\n"
    "mem2_name = slow\n"
    "mem2_capacity_gb = 100      # source: test\n"
    "mem2_bandwidth_gbs = 0.5    # source: test\n"
    "link_bw_gbs = 10            # source: test\n"
    "link_latency_us = 1         # source: test\n"
    "allreduce_bw_gbs = 10       # source: test\n"
    "allreduce_latency_us = 2    # source: test\n";

static void parse_good(struct dev_spec *d)
{
    int st = dev_spec_parse(good_spec, "good.spec", d);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
}

Test(devmodel, good_spec_parses_with_units)
{
    struct dev_spec d;
    parse_good(&d);
    cr_assert_str_eq(d.name, "testdev");
    cr_assert_str_eq(d.kind, "gpu");
    cr_assert_float_eq(d.peak[DEV_PREC_FP32], 1e12, 1.0);
    cr_assert_float_eq(d.peak[DEV_PREC_FP16], 2e12, 1.0);
    cr_assert_float_eq(d.kernel_overhead_s, 1e-6, 1e-15);
    cr_assert_eq(d.n_levels, 2);
    cr_assert_str_eq(d.level[1].name, "slow");
    cr_assert_float_eq(d.level[0].capacity_bytes, 1e6, 1e-6);
    cr_assert_float_eq(d.level[1].bw, 0.5e9, 1e-3);
    cr_assert_float_eq(d.links.allreduce_lat, 2e-6, 1e-15);
    cr_assert_eq(d.links.pod_devices, 0);
    cr_assert_str_eq(d.fitted, "");
}

/* good_spec with line `from` (a prefix of a line) replaced by `to` ("" drops the line). */
static int parse_edited(const char *from, const char *to, struct dev_spec *d)
{
    static char text[4096];
    const char *p = strstr(good_spec, from);
    cr_assert(p != NULL, "test edit: '%s' not in the spec", from);
    const char *eol = strchr(p, '\n');
    snprintf(text, sizeof text, "%.*s%s%s", (int)(p - good_spec), good_spec, to, eol + 1);
    return dev_spec_parse(text, "bad.spec", d);
}

static void expect_bad(const char *from, const char *to, const char *needle)
{
    struct dev_spec d;
    int st = parse_edited(from, to, &d);
    cr_assert_eq(st, TB_EINVAL, "accepted a bad spec (%s -> %s)", from, to);
    cr_assert(strstr(tb_error_get(), needle), "message '%s' lacks '%s'", tb_error_get(), needle);
    cr_assert(strchr(tb_error_get(), '\n') == NULL, "one line: '%s'", tb_error_get());
}

Test(devmodel, bad_specs_name_the_fault)
{
    expect_bad("title", "colour = blue\n", "bad.spec:4: unknown key 'colour'");
    expect_bad("peak_fp16", "peak_fp16_tflops = fast # source: test\n", "bad.spec:6: peak_fp16_tflops: expected a number");
    expect_bad("peak_fp16", "peak_fp16_tflops = -3 # source: test\n", "peak_fp16_tflops: expected a number");
    expect_bad("peak_fp16", "", "bad.spec: missing key peak_fp16_tflops");
    expect_bad("peak_fp16", "peak_fp16_tflops = 2\n", "bad.spec:6: peak_fp16_tflops has no '# source:' comment");
    expect_bad("efficiency_matrix", "efficiency_matrix = 1.5 # source: test\n", "efficiency_matrix: expected a number in");
    expect_bad("kind", "kind = fpga\n", "kind must be ipu, gpu or cpu");
    expect_bad("mem1_bandwidth", "", "missing key mem1_bandwidth_gbs");
    /* memory numbers no device has: 300-digit step times, "inf GB" */
    expect_bad("mem1_bandwidth", "mem1_bandwidth_gbs = 1e-300 # source: test\n",
               "bad.spec:16: mem1_bandwidth_gbs: expected a number in [1e-09, 1e+07], got '1e-300'");
    expect_bad("mem1_capacity", "mem1_capacity_gb = 1e300 # source: test\n",
               "mem1_capacity_gb: expected a number in [1e-09, 1e+06], got '1e300'");
    expect_bad("name", "", "missing key name");
    expect_bad("title", "just words\n", "bad.spec:4: expected 'key = value'");
}

/* A spec path that is there but cannot be followed (a link loop) said "not found"; a NUL byte hid the rest of the
 * file ("missing key kind"). Each now says what it is. */
Test(devmodel, unreadable_spec_paths_say_why)
{
    char dir[] = "/tmp/tb_devmodel_XXXXXX", loop[64], nul[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(loop, sizeof loop, "%s/loop.spec", dir);
    snprintf(nul, sizeof nul, "%s/nul.spec", dir);
    cr_assert_eq(symlink("loop.spec", loop), 0);
    FILE *f = fopen(nul, "wb");
    cr_assert(f && fwrite("name = x\0y\nkind = ipu\n", 1, 22, f) == 22 && fclose(f) == 0);
    struct dev_spec d;
    cr_assert_eq(dev_spec_load(loop, NULL, &d), TB_EIO);
    cr_assert(strstr(tb_error_get(), "loop.spec: Too many levels of symbolic links"), "%s", tb_error_get());
    cr_assert_eq(dev_spec_load(nul, NULL, &d), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "nul.spec: a NUL byte at offset 8: not a text file"), "%s", tb_error_get());
    remove(loop), remove(nul), rmdir(dir);
    tb_error_clear();
}

Test(devmodel, overrides_are_recorded)
{
    struct dev_spec d;
    parse_good(&d);
    cr_assert_eq(dev_spec_override(&d, "kernel_overhead_us=3,efficiency_matrix=0.25"), TB_OK, "%s", tb_error_get());
    cr_assert_float_eq(d.kernel_overhead_s, 3e-6, 1e-15);
    cr_assert_float_eq(d.eff_matrix, 0.25, 1e-15);
    cr_assert(strstr(d.fitted, "kernel_overhead_us = 3 (--device-set)"));
    cr_assert_eq(dev_spec_override(&d, "bogus=1"), TB_EINVAL);
    cr_assert_eq(dev_spec_override(&d, "mem1_bandwidth_gbs=1"), TB_EINVAL);
}

Test(devmodel, shipped_specs_parse_and_cite)
{
    const char *names[] = {"ipu-bow", "ipu-mk2", "a100", "h100", "h200"};
    for (int i = 0; i < 5; i++) {
        struct dev_spec d;
        int st = dev_spec_load(names[i], TB_SOURCE_DIR "/devices", &d);
        cr_assert_eq(st, TB_OK, "%s: %s", names[i], tb_error_get());
        cr_assert_str_eq(d.name, names[i]);
        cr_assert(d.peak[DEV_PREC_FP16] > 0 && d.level[0].bw > 0);
    }
    struct dev_spec d;
    cr_assert_eq(dev_spec_load("no-such-device", TB_SOURCE_DIR "/devices", &d), TB_EIO);
    cr_assert(strstr(tb_error_get(), "ipu-bow"), "lists the specs: %s", tb_error_get());
}

Test(devmodel, cpu_this_from_calibration)
{
    struct calibration c = {.sgemm_1t_gflops = 100.0, .triad_1t_gbs = 20.0, .cores = 2};
    snprintf(c.cpu_model, sizeof c.cpu_model, "Test CPU");
    struct dev_spec d;
    dev_spec_from_calibration(&c, &d);
    cr_assert_str_eq(d.name, "cpu-this");
    cr_assert_float_eq(d.peak[DEV_PREC_FP32], 100e9, 1.0);
    cr_assert_float_eq(d.level[0].bw, 20e9, 1.0);
}

/* A one-layer model: input (4,4,16) → 3×3 convolution to 8 channels with `groups` groups. */
static int tiny_conv(struct model *m, int groups)
{
    model_init(m, "tiny", 4, 4, 16, 10);
    int li = model_add_layer(m, OP_CONV, "conv", m->input, -1, 4, 4, 8);
    struct layer *l = &m->layers[li];
    l->a.conv.KH = l->a.conv.KW = 3, l->a.conv.stride = 1, l->a.conv.pad = 1, l->a.conv.groups = groups;
    l->n_w = (size_t)3 * 3 * (16 / groups) * 8;
    l->flops = 2.0 * 4 * 4 * (double)l->n_w;
    return li;
}

Test(devmodel, roofline_of_one_layer_by_hand)
{
    struct dev_spec d;
    parse_good(&d);
    struct model m;
    int li = tiny_conv(&m, 1);
    struct dev_layer_cost c;
    /* n = 2, fp32, 1 GB/s: flops 2·16·1152·2 = 73,728; rate 1e12 · 0.5 · min(1, 16/32) = 0.25e12 → 0.295 us;
     * bytes (256 + 128)·2·4 + 1152·4 = 7,680 → 7.68 us: memory-bound; + 1 us overhead. */
    dev_layer_cost(&d, &m, li, 2, DEV_PREC_FP32, 1e9, &c);
    cr_assert_eq(c.cls, DEV_CLASS_MATRIX);
    cr_assert_float_eq(c.rate, 0.25e12, 1.0);
    cr_assert_float_eq(c.fwd.flops, 73728.0, 1e-9);
    cr_assert_float_eq(c.fwd.bytes, 7680.0, 1e-9);
    cr_assert(c.fwd.memory_bound);
    cr_assert_float_eq(c.fwd.t, 7.68e-6 + 1e-6, 1e-15);
    /* The input needs no gradient: one backward pass (weights), same FLOPs and bytes. */
    cr_assert_eq(c.bwd.kernels, 1);
    cr_assert_float_eq(c.bwd.t, 7.68e-6 + 1e-6, 1e-15);
    /* At 1 TB/s it is compute-bound: 73,728 / 0.25e12 + 1 us; fp16 halves the bytes and doubles the peak. */
    dev_layer_cost(&d, &m, li, 2, DEV_PREC_FP32, 1e12, &c);
    cr_assert(!c.fwd.memory_bound);
    cr_assert_float_eq(c.fwd.t, 73728.0 / 0.25e12 + 1e-6, 1e-15);
    dev_layer_cost(&d, &m, li, 2, DEV_PREC_FP16, 1e12, &c);
    cr_assert_float_eq(c.fwd.bytes, 3840.0, 1e-9);
    cr_assert_float_eq(c.fwd.t, 73728.0 / 0.5e12 + 1e-6, 1e-15);
    model_free(&m);
    /* Groups of 4 channels: a quarter of the FLOPs at 4/32 of the matrix rate. */
    li = tiny_conv(&m, 4);
    dev_layer_cost(&d, &m, li, 2, DEV_PREC_FP32, 1e12, &c);
    cr_assert_float_eq(c.rate, 1e12 * 0.5 * 4.0 / 32.0, 1.0);
    cr_assert_float_eq(c.fwd.flops, 73728.0 / 4, 1e-9);
    model_free(&m);
}

static void build_b0_g16(struct model *m, int res)
{
    const struct workload *w = workload_find("effnet-b0-g16");
    cr_assert(w != NULL);
    struct workload_opts o = {.resolution = res, .in_h = res, .in_w = res, .in_c = 3, .norm_groups = 4,
                              .dropout = -1.0f, .drop_connect = -1.0f};
    snprintf(o.norm, sizeof o.norm, "group");
    cr_assert_eq(w->build(m, &o), TB_OK, "%s", tb_error_get());
}

Test(devmodel, composition_is_proj_project_over_layer_sums)
{
    struct dev_spec d;
    parse_good(&d);
    struct model m;
    build_b0_g16(&m, 32);
    static struct dev_run r;
    const int devices[] = {2, 8};
    cr_assert_eq(dev_run_project(&d, &m, 2, 3, "5", DEV_PREC_FP16, 1, 0, 1, devices, 2, 48, &r), TB_OK, "%s",
                 tb_error_get());
    cr_assert_eq(r.n, 2);
    /* Stage 1 starts at block 5's first layer; its times are the sums of its layers' (recompute: + fwd). */
    int l0 = 0;
    while (m.layers[l0].block < 5) l0++;
    cr_assert_eq(r.st[1].l0, l0);
    cr_assert_eq(r.st[0].l1, l0);
    double f = 0, b = 0;
    for (int i = l0; i < m.n_layers; i++) {
        struct dev_layer_cost c;
        dev_layer_cost(&d, &m, i, 3, DEV_PREC_FP16, d.level[r.st[1].level].bw, &c);
        f += c.fwd.t, b += c.bwd.t + c.fwd.t;
    }
    cr_assert_float_eq(r.pm.t_fwd[1], f, 1e-12);
    cr_assert_float_eq(r.pm.t_bwd[1], b, 1e-12);
    /* The rows are proj_project's on those stage times with the spec's links. */
    for (int i = 0; i < r.n; i++) {
        struct proj_row row = {.replicas = r.rows[i].replicas, .ga = r.rows[i].ga};
        proj_project(&r.pm, &d.links, &row);
        cr_assert_float_eq(row.images_per_s, r.rows[i].images_per_s, 1e-9);
        cr_assert_eq(row.global_batch, 48);
    }
    /* A balanced split ("") never makes the slowest stage slower than the given one. */
    static struct dev_run bal;
    cr_assert_eq(dev_run_project(&d, &m, 2, 3, "", DEV_PREC_FP16, 1, 0, 1, devices, 2, 48, &bal), TB_OK);
    const double sg = fmax(r.st[0].t_fwd + r.st[0].t_bwd, r.st[1].t_fwd + r.st[1].t_bwd);
    const double sb = fmax(bal.st[0].t_fwd + bal.st[0].t_bwd, bal.st[1].t_fwd + bal.st[1].t_bwd);
    cr_assert(sb <= sg * 1.0001, "balanced %g > given %g", sb, sg);
    cr_assert_eq(dev_run_project(&d, &m, 2, 3, "0", DEV_PREC_FP16, 1, 0, 1, devices, 2, 48, &bal), TB_EINVAL);
    cr_assert_eq(dev_run_project(&d, &m, 3, 3, "5", DEV_PREC_FP16, 1, 0, 1, devices, 2, 48, &bal), TB_EINVAL);
    model_free(&m);
}

/* The cpu-this spec names the calibration file it read, holds this machine's memory (MemTotal), and
 * prints its matrix peak to the vector peak's precision (141.4 GFLOP/s is not "0.1 TFLOP/s"). */
Test(devmodel, cpu_this_names_its_file_and_machine_memory)
{
    struct calibration c = {.sgemm_1t_gflops = 141.4, .triad_1t_gbs = 20.0, .cores = 2};
    snprintf(c.cpu_model, sizeof c.cpu_model, "Test CPU");
    struct dev_spec d;
    dev_spec_from_calibration_file(&c, "/tmp/elsewhere/cal.json", &d);
    cr_assert(strstr(d.path, "/tmp/elsewhere/cal.json"), "%s", d.path);
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        double kb = 0;
        cr_assert_eq(fscanf(f, "MemTotal: %lf kB", &kb), 1);
        fclose(f);
        cr_assert_float_eq(d.level[0].capacity_bytes, kb * 1024.0, 1.0);
    }
    struct model m;
    build_b0_g16(&m, 32);
    static struct dev_run r;
    const int devices[] = {1};
    cr_assert_eq(dev_run_project(&d, &m, 1, 2, "", DEV_PREC_FP32, 0, 0, 1, devices, 1, 2, &r), TB_OK, "%s", tb_error_get());
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    dev_print(&d, &r.c, r.st, &r.pm, r.rows, r.n, NULL, out);
    fclose(out);
    cr_assert(strstr(text, "spec        /tmp/elsewhere/cal.json (bench --calibrate)"), "%s", text);
    cr_assert(strstr(text, "matrix 0.14 TFLOP/s") && strstr(text, "vector 0.14 TFLOP/s"), "%s", text);
    free(text);
    model_free(&m);
}

Test(devmodel, stage_footprint_picks_the_memory_level)
{
    struct dev_spec d;
    parse_good(&d); /* level 0 holds 1 MB: B0 at 32×32 does not fit it, level 1 does */
    struct model m;
    build_b0_g16(&m, 32);
    static struct dev_run r;
    const int devices[] = {1};
    cr_assert_eq(dev_run_project(&d, &m, 1, 2, "", DEV_PREC_FP32, 0, 0, 1, devices, 1, 2, &r), TB_OK, "%s", tb_error_get());
    cr_assert_eq(r.st[0].level, 1);
    cr_assert(r.st[0].fits);
    model_free(&m);
}

Test(devmodel, hierarchical_allreduce_by_hand)
{
    struct proj_links l = {.allreduce_bw = 1e9, .allreduce_lat = 1e-6, .pod_devices = 16, .scaleout_bw = 1e8,
                           .scaleout_lat = 1e-5};
    /* 2 stages, 32 replicas: 8 per pod, 4 pods. In a pod: 2·7/8·8e6/1e9 + 14·1e-6; between pods:
     * 2·3/4·(8e6/8)/1e8 + 6·1e-5. */
    const double want = 2.0 * 7 / 8 * 8e6 / 1e9 + 14e-6 + 2.0 * 3 / 4 * 1e6 / 1e8 + 6e-5;
    cr_assert_float_eq(proj_allreduce_s(&l, 8e6, 32, 2), want, 1e-12);
    /* Within one pod it is the flat ring. */
    cr_assert_float_eq(proj_allreduce_s(&l, 8e6, 8, 2), 2.0 * 7 / 8 * 8e6 / 1e9 + 14e-6, 1e-12);
    l.pod_devices = 0;
    cr_assert_float_eq(proj_allreduce_s(&l, 8e6, 32, 2), 2.0 * 31 / 32 * 8e6 / 1e9 + 62e-6, 1e-12);
    cr_assert_float_eq(proj_allreduce_s(&l, 8e6, 1, 2), 0.0, 0.0);
}

Test(devmodel, published_file)
{
    struct dev_published p;
    int st = dev_published_load(TB_SOURCE_DIR "/devices/seed001.published", &p);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    cr_assert_eq(p.n, 3);
    cr_assert_float_eq(dev_published_at(&p, 64), 34943.0, 1e-9);
    cr_assert(isnan(dev_published_at(&p, 32)));
    cr_assert_eq(p.global_batch, 6144);
    cr_assert(strstr(p.source, "graphcore"));
    cr_assert_eq(dev_published_parse("source = x\ndevice = d\nworkload = w\npoint = 16 8\n", "p", &p), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "p:4: point"), "%s", tb_error_get());
    cr_assert_eq(dev_published_parse("source = x\ndevice = d\nworkload = w\npoint = 16 8 256 inf\n", "p", &p), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "p:4: point"), "an infinite rate: %s", tb_error_get());
    cr_assert_eq(dev_published_parse("device = d\nworkload = w\npoint = 16 8 256 1\n", "p", &p), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "missing key source"));
}

/* Runs a shell command; returns its stdout + stderr (malloc'd) and exit status. */
static char *run_cmd(const char *cmd, int *status)
{
    FILE *f = popen(cmd, "r");
    cr_assert(f != NULL);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int st = pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

Test(devmodel, seed001_projection_is_labelled_and_validated)
{
    int status;
    char *out = run_cmd("cd '" TB_SOURCE_DIR "' && '" TB_BENCH_EXE "' --backend ipu --workload effnet-b4-g16 "
                        "--classes 1000 --project-device ipu-bow --precision fp16 --recompute 2>&1",
                        &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(strstr(out, "PROJECTED (device model, not a measurement)"), "%s", out);
    cr_assert(strstr(out, "images/s (PROJECTED)"));
    cr_assert(strstr(out, "images/s published"));
    cr_assert(strstr(out, "fitted      kernel_overhead_us fitted on Bow Pod16"), "%s", out);
    cr_assert(strstr(out, "Pod64 and Pod256 are out-of-sample"));
    cr_assert(strstr(out, "devices/ipu-bow.spec"));
    /* Each published point's row: projected, published, error within ±30 %. */
    const int dev[] = {16, 64, 256};
    const double pub[] = {8936, 34943, 117641};
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "\n  %7d ", dev[i]);
        const char *row = strstr(out, key);
        cr_assert(row != NULL, "no row for %d devices:\n%s", dev[i], out);
        int d, r, g, gb;
        double step, ar, up, proj, p, err;
        cr_assert_eq(sscanf(row, " %d %d %d %d %lf %lf %lf %lf %lf %lf%%", &d, &r, &g, &gb, &step, &ar, &up, &proj, &p, &err),
                     10, "row: %.160s", row);
        cr_assert_float_eq(p, pub[i], 0.5);
        cr_assert_float_eq(err, 100.0 * (proj - p) / p, 0.06);
        cr_assert(fabs(err) <= 30.0, "%d devices: %.1f %% off the published figure", dev[i], err);
    }
    free(out);
    /* Another configuration is projected but not compared. */
    out = run_cmd("cd '" TB_SOURCE_DIR "' && '" TB_BENCH_EXE "' --backend ipu --workload effnet-b4-g16 "
                  "--classes 1000 --project-device ipu-bow --precision fp16 --micro-batch 2 2>&1",
                  &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(strstr(out, "published   not compared"), "%s", out);
    cr_assert(!strstr(out, "images/s published"));
    free(out);
    out = run_cmd("cd '" TB_SOURCE_DIR "' && '" TB_BENCH_EXE "' --backend ipu --workload effnet-b4-g16 "
                  "--project-device tpu-v9 2>&1",
                  &status);
    cr_assert_eq(status, 2, "%s", out);
    cr_assert(strstr(out, "devices/tpu-v9.spec not found") && strstr(out, "h200"), "%s", out);
    free(out);
}

/* Device counts left out of a --project-device table are noted once (not again for the roofline variant),
 * and counts the user did not give are called defaults. */
Test(devmodel, left_out_counts_noted_once_as_defaults)
{
    int status;
    char *out = run_cmd("cd '" TB_SOURCE_DIR "' && '" TB_BENCH_EXE "' --backend ipu --workload effnet-b0 --resolution 32 "
                        "--stages 2 --micro-batch 2 --ga 4 --batch 8 --project-device ipu-bow 2>&1 >/dev/null",
                        &status);
    cr_assert_eq(status, 0, "%s", out);
    int notes = 0;
    for (const char *p = out; (p = strstr(p, "left out")) != NULL; p++) notes++;
    cr_assert_eq(notes, 2, "%s", out);
    cr_assert(strstr(out, "bench: note: default device count 64 left out") &&
                  strstr(out, "bench: note: default device count 256 left out") && !strstr(out, "--project-devices"),
              "%s", out);
    free(out);
}

static const char *const seed_row =
    "{\"status\":\"ok\",\"run_id\":\"fixture-ipu\",\"machine\":{\"cpu_model\":\"Test CPU\",\"n_cores\":2},"
    "\"calibration\":{\"sgemm_1t_gflops\":67.0,\"triad_1t_gbs\":21.0,\"cpu_model\":\"Test CPU\",\"timestamp\":\"T0\"},"
    "\"config\":{\"backend\":\"ipu\",\"workload\":\"effnet-b4-g16\",\"stages\":2,\"split\":\"11\",\"micro_batch\":2,"
    "\"resolution\":64,\"input_h\":64,\"input_w\":64,\"input_c\":3,\"classes\":10,\"norm\":\"group\",\"norm_groups\":4,"
    "\"precision\":\"fp32\",\"recompute\":false},"
    "\"figures\":{\"pipeline\":{\"per_stage\":[{\"fwd_s_per_micro_batch\":0.020,\"bwd_s_per_micro_batch\":0.050},"
    "{\"fwd_s_per_micro_batch\":0.038,\"bwd_s_per_micro_batch\":0.093}]}}}\n";

static char *report_text(const char *gnuplot, const char *rows, const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/charts'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    char *text = NULL;
    size_t n = 0;
    FILE *md = open_memstream(&text, &n);
    char charts[400];
    snprintf(charts, sizeof charts, "%s/charts", dir);
    int drawn = 0;
    int st = report_seed001(md, charts, TB_SOURCE_DIR "/plots", TB_SOURCE_DIR "/devices", rows, gnuplot, &drawn);
    fclose(md);
    cr_assert_eq(st, TB_OK, "%s", tb_error_get());
    /* The count the report's "with N charts" adds up: every chart the Markdown shows, no more. */
    int shown = 0;
    for (const char *p = text; (p = strstr(p, "![")) != NULL; p += 2) shown++;
    cr_assert_eq(drawn, shown, "%d charts counted, %d shown", drawn, shown);
    return text;
}

Test(devmodel, report_seed001_tables_are_labelled)
{
    const char *dir = "/tmp/tb_test_seed001";
    char rows[200];
    snprintf(rows, sizeof rows, "%s.jsonl", dir);
    FILE *f = fopen(rows, "w");
    cr_assert(f != NULL);
    fputs(seed_row, f);
    fclose(f);
    char *md = report_text("/nonexistent/gnuplot", rows, dir);
    cr_assert(strstr(md, "### Seed 001 — EfficientNet-B4 G16 on IPU-PODs"), "%s", md);
    cr_assert(strstr(md, "| 16 | 8 × 256 | 8936 |"), "%s", md);
    cr_assert(strstr(md, "(fitted)") && strstr(md, "(out-of-sample)"));
    cr_assert(strstr(md, "images/s PROJECTED") && strstr(md, "images/s published"));
    cr_assert(strstr(md, "h200 images/s PROJECTED"));
    cr_assert(strstr(md, "Machine: **Test CPU**, 2 cores"), "%s", md);
    cr_assert(strstr(md, "| 0 | 0–125 (input … features.3.3.add) | 20.00 |"), "%s", md);
    cr_assert(strstr(md, "chart seed001_pods not rendered: gnuplot not found"));
    free(md);
    /* No measured run: the section says how to make one. */
    md = report_text("/nonexistent/gnuplot", NULL, dir);
    cr_assert(strstr(md, "No measured ipu run") && strstr(md, "--project-device cpu-this"), "%s", md);
    free(md);
    /* With gnuplot both charts are drawn and counted (the report's "with N charts" once left them out). */
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        md = report_text(NULL, rows, dir);
        cr_assert(strstr(md, "![") && !strstr(md, "not rendered"), "%s", md);
        free(md);
    }
    remove(rows);
}
