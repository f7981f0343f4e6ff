/* devmodel.c — device specs, the per-layer roofline and its composition into a pipeline (devmodel.h). */
#include "devmodel.h"

#include "regular_file.h"
#include "repo_dir.h"

#include "status.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- spec files ---- */

struct num_key {
    const char *key;
    size_t off;   /* offset of a double in struct dev_spec */
    double scale; /* file unit → SI */
    int required;
    double lo, hi; /* accepted range in file units */
};

#define SPEC_OFF(f) offsetof(struct dev_spec, f)
static const struct num_key num_keys[] = {
    {"peak_fp32_tflops", SPEC_OFF(peak[DEV_PREC_FP32]), 1e12, 1, 1e-6, 1e6},
    {"peak_fp16_tflops", SPEC_OFF(peak[DEV_PREC_FP16]), 1e12, 1, 1e-6, 1e6},
    {"vector_fp32_tflops", SPEC_OFF(vector_peak[DEV_PREC_FP32]), 1e12, 1, 1e-6, 1e6},
    {"vector_fp16_tflops", SPEC_OFF(vector_peak[DEV_PREC_FP16]), 1e12, 1, 1e-6, 1e6},
    {"matrix_min_channels", SPEC_OFF(matrix_min_channels), 1.0, 1, 1.0, 4096.0},
    {"efficiency_matrix", SPEC_OFF(eff_matrix), 1.0, 1, 1e-4, 1.0},
    {"efficiency_vector", SPEC_OFF(eff_vector), 1.0, 1, 1e-4, 1.0},
    {"efficiency_memory", SPEC_OFF(eff_memory), 1.0, 1, 1e-4, 1.0},
    {"kernel_overhead_us", SPEC_OFF(kernel_overhead_s), 1e-6, 1, 0.0, 1e6},
    {"link_bw_gbs", SPEC_OFF(links.exchange_bw), 1e9, 1, 1e-6, 1e9},
    {"link_latency_us", SPEC_OFF(links.exchange_lat), 1e-6, 1, 0.0, 1e9},
    {"allreduce_bw_gbs", SPEC_OFF(links.allreduce_bw), 1e9, 1, 1e-6, 1e9},
    {"allreduce_latency_us", SPEC_OFF(links.allreduce_lat), 1e-6, 1, 0.0, 1e9},
    {"scaleout_bw_gbs", SPEC_OFF(links.scaleout_bw), 1e9, 0, 1e-6, 1e9},
    {"scaleout_latency_us", SPEC_OFF(links.scaleout_lat), 1e-6, 0, 0.0, 1e9},
};
#define N_NUM_KEYS (int)(sizeof num_keys / sizeof num_keys[0])

/* Copies the next line of *p (without its newline) into buf and advances *p: 1, 0 at the end of the text,
 * or TB_EINVAL for a line longer than buf (message names where and the line). */
static int next_line(const char **p, char *buf, size_t cap, const char *where, int *line)
{
    if (!**p) return 0;
    ++*line;
    const char *nl = strchr(*p, '\n');
    const size_t len = nl ? (size_t)(nl - *p) : strlen(*p);
    if (len >= cap) return tb_error_set(TB_EINVAL, "%s:%d: line too long", where, *line);
    memcpy(buf, *p, len);
    buf[len] = '\0';
    *p = nl ? nl + 1 : *p + len;
    return 1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

static int parse_number(const char *v, double *x)
{
    char *end = NULL;
    errno = 0;
    *x = strtod(v, &end);
    return !(errno || end == v || *end != '\0' || !isfinite(*x));
}

/* Sets one key; where/line name the place in messages. seen: bitmask of numeric keys, lv: level keys. */
static int spec_set(struct dev_spec *d, const char *key, const char *val, int has_source, const char *where, int line,
                    unsigned long *seen, unsigned *lv_seen, int *seen_str)
{
    /* The names printed (a table's header, stdout) as one line of text, whatever bytes the file holds. */
    if (!strcmp(key, "name")) return tb_text_clean(d->name, sizeof d->name, val), seen_str[0] = 1, TB_OK;
    if (!strcmp(key, "kind")) {
        if (strcmp(val, "ipu") && strcmp(val, "gpu") && strcmp(val, "cpu"))
            return tb_error_set(TB_EINVAL, "%s:%d: kind must be ipu, gpu or cpu, got '%s'", where, line, val);
        return snprintf(d->kind, sizeof d->kind, "%s", val), seen_str[1] = 1, TB_OK;
    }
    if (!strcmp(key, "title")) return tb_text_clean(d->title, sizeof d->title, val), TB_OK;
    if (!strcmp(key, "fitted")) return tb_text_clean(d->fitted, sizeof d->fitted, val), TB_OK;
    int li = 0;
    char field[32];
    if (sscanf(key, "mem%d_%31s", &li, field) == 2 && li >= 1 && li <= DEV_MAX_LEVELS) {
        struct dev_level *L = &d->level[li - 1];
        if (!strcmp(field, "name")) {
            snprintf(L->name, sizeof L->name, "%s", val);
            *lv_seen |= 1u << (3 * (li - 1));
            return TB_OK;
        }
        const int cap = !strcmp(field, "capacity_gb"), bw = !strcmp(field, "bandwidth_gbs");
        if (cap || bw) {
            double x;
            /* As the other numbers, a range no device has is refused: 1e-300 GB/s printed 300-digit step times, a
             * capacity of 1e300 GB "inf GB". A byte to a petabyte; a byte a second to 10 PB/s. */
            const double lo = 1e-9, hi = cap ? 1e6 : 1e7;
            if (!parse_number(val, &x) || x < lo || x > hi)
                return tb_error_set(TB_EINVAL, "%s:%d: %s: expected a number in [%g, %g], got '%s'", where, line, key, lo,
                                    hi, val);
            if (!has_source)
                return tb_error_set(TB_EINVAL, "%s:%d: %s has no '# source:' comment (every number cites its source)",
                                    where, line, key);
            if (cap) L->capacity_bytes = x * 1e9;
            else L->bw = x * 1e9;
            *lv_seen |= 1u << (3 * (li - 1) + (cap ? 1 : 2));
            return TB_OK;
        }
    }
    if (!strcmp(key, "pod_devices")) {
        double x;
        if (!parse_number(val, &x) || x < 0 || x > 1e6 || x != floor(x))
            return tb_error_set(TB_EINVAL, "%s:%d: pod_devices: expected a whole number, got '%s'", where, line, val);
        if (!has_source)
            return tb_error_set(TB_EINVAL, "%s:%d: pod_devices has no '# source:' comment (every number cites its source)",
                                where, line);
        d->links.pod_devices = (int)x;
        return TB_OK;
    }
    for (int k = 0; k < N_NUM_KEYS; k++) {
        if (strcmp(key, num_keys[k].key)) continue;
        double x;
        if (!parse_number(val, &x) || x < num_keys[k].lo || x > num_keys[k].hi)
            return tb_error_set(TB_EINVAL, "%s:%d: %s: expected a number in [%g, %g], got '%s'", where, line, key,
                                num_keys[k].lo, num_keys[k].hi, val);
        if (!has_source)
            return tb_error_set(TB_EINVAL, "%s:%d: %s has no '# source:' comment (every number cites its source)", where,
                                line, key);
        *(double *)((char *)d + num_keys[k].off) = x * num_keys[k].scale;
        *seen |= 1ul << k;
        return TB_OK;
    }
    return tb_error_set(TB_EINVAL, "%s:%d: unknown key '%s'", where, line, key);
}

static int spec_check(struct dev_spec *d, const char *where, unsigned long seen, unsigned lv_seen, const int *seen_str)
{
    if (!seen_str[0]) return tb_error_set(TB_EINVAL, "%s: missing key name", where);
    if (!seen_str[1]) return tb_error_set(TB_EINVAL, "%s: missing key kind", where);
    for (int k = 0; k < N_NUM_KEYS; k++)
        if (num_keys[k].required && !(seen & (1ul << k)))
            return tb_error_set(TB_EINVAL, "%s: missing key %s", where, num_keys[k].key);
    d->n_levels = 0;
    for (int i = 0; i < DEV_MAX_LEVELS; i++) {
        const unsigned bits = (lv_seen >> (3 * i)) & 7u;
        if (bits == 0) break;
        if (bits != 7u) {
            static const char *const f[3] = {"name", "capacity_gb", "bandwidth_gbs"};
            for (int j = 0; j < 3; j++)
                if (!(bits & (1u << j))) return tb_error_set(TB_EINVAL, "%s: missing key mem%d_%s", where, i + 1, f[j]);
        }
        d->n_levels = i + 1;
    }
    if (d->n_levels == 0) return tb_error_set(TB_EINVAL, "%s: missing key mem1_name (at least one memory level)", where);
    for (int i = d->n_levels; i < DEV_MAX_LEVELS; i++)
        if ((lv_seen >> (3 * i)) & 7u)
            return tb_error_set(TB_EINVAL, "%s: mem%d_* given without mem%d_* (levels are numbered from 1)", where, i + 1,
                                d->n_levels + 1);
    return TB_OK;
}

static int spec_parse_lines(const char *text, const char *where, struct dev_spec *d, int require_source)
{
    unsigned long seen = 0;
    unsigned lv_seen = 0;
    int seen_str[2] = {0, 0};
    int line = 0;
    const char *p = text;
    char buf[1024];
    int st;
    while ((st = next_line(&p, buf, sizeof buf, where, &line)) > 0) {
        char *hash = strchr(buf, '#');
        int has_source = !require_source;
        if (hash) {
            if (strstr(hash, "source:")) has_source = 1;
            *hash = '\0';
        }
        char *s = trim(buf);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) return tb_error_set(TB_EINVAL, "%s:%d: expected 'key = value', got '%s'", where, line, s);
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        if (!*val) return tb_error_set(TB_EINVAL, "%s:%d: %s has no value", where, line, key);
        if ((st = spec_set(d, key, val, has_source, where, line, &seen, &lv_seen, seen_str)) != TB_OK) return st;
    }
    if (st < 0) return st;
    return spec_check(d, where, seen, lv_seen, seen_str);
}

int dev_spec_parse(const char *text, const char *where, struct dev_spec *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", where);
    return spec_parse_lines(text, where, d, 1);
}

int dev_spec_override(struct dev_spec *d, const char *list)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    unsigned long seen = 0;
    unsigned lv = 0;
    int ss[2] = {1, 1};
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return tb_error_set(TB_EINVAL, "--device-set: expected key=value, got '%s'", tok);
        *eq = '\0';
        char *key = trim(tok), *val = trim(eq + 1);
        if (!strcmp(key, "name") || !strcmp(key, "kind") || !strncmp(key, "mem", 3))
            return tb_error_set(TB_EINVAL, "--device-set: %s cannot be overridden (edit a copy of the spec)", key);
        int st = spec_set(d, key, val, 1, "--device-set", 1, &seen, &lv, ss);
        if (st != TB_OK) return st;
        size_t n = strlen(d->fitted);
        snprintf(d->fitted + n, sizeof d->fitted - n, "%s%s = %s (--device-set)", n ? "; " : "", key, val);
    }
    return TB_OK;
}

const char *dev_default_dir(void)
{
    static char dir[4096];
    return repo_dir(DEV_DEFAULT_DIR, dir, sizeof dir);
}

int dev_spec_load(const char *name_or_path, const char *dir, struct dev_spec *d)
{
    char path[512];
    const size_t nl = strlen(name_or_path);
    const int is_path = strchr(name_or_path, '/') || (nl > 5 && !strcmp(name_or_path + nl - 5, ".spec"));
    if (is_path) snprintf(path, sizeof path, "%s", name_or_path);
    else snprintf(path, sizeof path, "%s/%s.spec", dir ? dir : dev_default_dir(), name_or_path);
    /* Regular files only: a FIFO would block the open forever, a directory reads as garbage. */
    const char *why = NULL;
    FILE *f = regular_fopen(path, &why);
    struct stat sb;
    if (!f && stat(path, &sb) == 0) return tb_error_set(TB_EIO, "device spec %s: %s", path, why);
    /* There but not to be followed (a link loop, a dangling link, a path through a file): said, not "not found". */
    const int e = errno;
    if (!f && lstat(path, &sb) == 0)
        return tb_error_set(TB_EIO, "device spec %s: %s", path, why ? why : strerror(e));
    if (!f) {
        char names[400] = "";
        DIR *dd = opendir(dir ? dir : dev_default_dir());
        if (dd) {
            struct dirent *e;
            while ((e = readdir(dd))) {
                const size_t k = strlen(e->d_name);
                if (k > 5 && !strcmp(e->d_name + k - 5, ".spec")) {
                    size_t n = strlen(names);
                    snprintf(names + n, sizeof names - n, "%s%.*s", n ? ", " : "", (int)(k - 5), e->d_name);
                }
            }
            closedir(dd);
        }
        return tb_error_set(TB_EIO, "device spec %s not found (devices: %s, cpu-this)", path, names[0] ? names : "none");
    }
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    const int big = !feof(f);
    fclose(f);
    if (big) return tb_error_set(TB_EINVAL, "%s: larger than %zu bytes", path, sizeof text - 1);
    /* The parser reads text up to a NUL: one inside hid the rest ("missing key kind"). */
    const char *nul = memchr(text, '\0', n);
    if (nul) return tb_error_set(TB_EINVAL, "%s: a NUL byte at offset %zu: not a text file", path, (size_t)(nul - text));
    text[n] = '\0';
    return dev_spec_parse(text, path, d);
}

double dev_mem_total_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0.0;
    char line[256];
    double kb = 0.0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "MemTotal:", 9)) {
            kb = strtod(line + 9, NULL);
            break;
        }
    fclose(f);
    return kb * 1024.0; /* /proc/meminfo's kB are KiB */
}

void dev_spec_from_calibration(const struct calibration *c, struct dev_spec *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "cpu-this");
    snprintf(d->kind, sizeof d->kind, "cpu");
    snprintf(d->title, sizeof d->title, "one core of this machine (%.60s), from its calibration of %.31s", c->cpu_model,
             c->timestamp);
    /* No file named here: the calibration may be --calibration's or a row's (dev_spec_from_calibration_file). */
    snprintf(d->path, sizeof d->path, "calibration (bench --calibrate)");
    /* One core: the ipu backend runs one thread per device (stage × replica). The matrix peak is the
     * measured OpenBLAS sgemm; the vector peak is the same FMA units (elementwise layers are bounded by
     * the triad bandwidth long before); there is no 16-bit arithmetic here (fp16 storage is decoded to
     * fp32), so both precisions get the fp32 figures. */
    const double g = c->sgemm_1t_gflops * 1e9;
    d->peak[DEV_PREC_FP32] = d->peak[DEV_PREC_FP16] = g;
    d->vector_peak[DEV_PREC_FP32] = d->vector_peak[DEV_PREC_FP16] = g;
    /* The backend's convolutions are im2col/direct/1×1 GEMMs over (KH·KW·C/groups): a group of 16
     * channels gives a 144-deep reduction for 3×3, enough for a vector FMA; no channel floor. */
    d->matrix_min_channels = 1.0;
    /* Stated, not fitted: sgemm at n = 2048 is the ceiling; a convolution's GEMMs are small and skinny
     * (M = H·W·N, K = 9·16, N = 16 per group) and reach a fraction of it; 0.5 is the assumption. The
     * triad is what a streaming kernel reaches, so memory efficiency is 1. */
    d->eff_matrix = 0.5;
    d->eff_vector = 0.25;
    d->eff_memory = 1.0;
    d->kernel_overhead_s = 2e-6; /* a layer call: dispatch and a pass over its arguments (stated) */
    d->n_levels = 1;
    snprintf(d->level[0].name, sizeof d->level[0].name, "dram");
    /* This machine's memory as the kernel reports it; unknown (no /proc/meminfo): no capacity check. */
    const double mem = dev_mem_total_bytes();
    d->level[0].capacity_bytes = mem > 0.0 ? mem : INFINITY;
    d->level[0].bw = c->triad_1t_gbs * 1e9;
    /* Stages exchange through shared memory: a copy at the triad's rate. */
    d->links.exchange_bw = c->triad_1t_gbs * 1e9;
    d->links.exchange_lat = 2e-6;
    d->links.allreduce_bw = c->triad_1t_gbs * 1e9;
    d->links.allreduce_lat = 2e-6;
}

void dev_spec_from_calibration_file(const struct calibration *c, const char *path, struct dev_spec *d)
{
    dev_spec_from_calibration(c, d);
    snprintf(d->path, sizeof d->path, "%s (bench --calibrate)", path);
}

int dev_prec_parse(const char *s)
{
    if (!s || !*s || !strcmp(s, "fp32")) return DEV_PREC_FP32;
    if (!strcmp(s, "fp16") || !strcmp(s, "bf16") || !strcmp(s, "fp16m") || !strcmp(s, "bf16m")) return DEV_PREC_FP16;
    return -1;
}

/* ---- the roofline per layer ---- */

static double elem_bytes(enum dev_prec p) { return p == DEV_PREC_FP16 ? 2.0 : 4.0; }

static void pass_time(const struct dev_spec *d, struct dev_pass *p, double rate, double bw)
{
    if (p->kernels == 0) {
        p->t = 0.0;
        return;
    }
    const double tc = rate > 0.0 ? p->flops / rate : 0.0;
    const double tm = bw > 0.0 ? p->bytes / (bw * d->eff_memory) : 0.0;
    p->memory_bound = tm > tc;
    p->t = (tm > tc ? tm : tc) + d->kernel_overhead_s * p->kernels;
}

void dev_layer_cost(const struct dev_spec *d, const struct model *m, int li, int n, enum dev_prec prec, double bw,
                    struct dev_layer_cost *c)
{
    const struct layer *l = &m->layers[li];
    const double e = elem_bytes(prec);
    const double in = (double)m->tensors[l->in].per_sample;
    const double in2 = l->in2 >= 0 ? (double)m->tensors[l->in2].per_sample : 0.0;
    const double out = (double)m->tensors[l->out].per_sample;
    const double w = (double)(l->n_w + l->n_b) * e;
    memset(c, 0, sizeof *c);
    c->cls = DEV_CLASS_VECTOR;
    c->rate = d->vector_peak[prec] * d->eff_vector;
    if (l->op == OP_CONV || l->op == OP_DENSE) {
        const double cpg = l->op == OP_CONV ? (double)m->tensors[l->in].c / (l->a.conv.groups > 0 ? l->a.conv.groups : 1)
                                            : (double)l->a.dense.IN;
        const double depth = cpg / d->matrix_min_channels;
        c->cls = DEV_CLASS_MATRIX;
        c->rate = d->peak[prec] * d->eff_matrix * (depth < 1.0 ? depth : 1.0);
    }
    /* Normalisation reads its input twice (statistics, then the normalised output) and its backward reads
     * input and output gradient twice (the two reductions, then the data gradient): the algorithm's
     * passes, whatever the device. */
    const double passes = l->op == OP_GN || l->op == OP_BN ? 2.0 : 1.0;
    c->fwd.flops = l->flops * n;
    c->fwd.bytes = (passes * in + in2 + out) * n * e + w;
    c->fwd.kernels = 1;
    const int need_in = l->op != OP_INPUT && (m->tensors[l->in].needs_grad || (l->in2 >= 0 && m->tensors[l->in2].needs_grad));
    const int has_w = l->n_w > 0;
    c->bwd.kernels = need_in + has_w;
    c->bwd.flops = l->flops * n * (need_in + has_w);
    c->bwd.bytes = need_in * ((passes * (out + in) + in + in2) * n * e + w) + has_w * ((in + out) * n * e + w);
    pass_time(d, &c->fwd, c->rate, bw);
    pass_time(d, &c->bwd, c->rate, bw);
}

/* ---- stages ---- */

/* Layers [l0, l1) of the stage of first blocks fb. */
static void stage_layers(const struct model *m, const int *fb, int s, int *l0, int *l1)
{
    int a = 0;
    while (a < m->n_layers && m->layers[a].block < fb[s]) a++;
    int b = a;
    while (b < m->n_layers && m->layers[b].block < fb[s + 1]) b++;
    *l0 = s == 0 ? 0 : a;
    *l1 = b;
}

/* Modelled fwd + bwd (+ recompute) seconds of each block at level 0's bandwidth, for balancing. */
static void block_costs(const struct dev_spec *d, const struct dev_config *c, double *t)
{
    for (int b = 0; b < c->m->n_blocks; b++) t[b] = 0.0;
    for (int i = 0; i < c->m->n_layers; i++) {
        struct dev_layer_cost lc;
        dev_layer_cost(d, c->m, i, c->micro_batch, c->prec, d->level[0].bw, &lc);
        t[c->m->layers[i].block] += lc.fwd.t * (c->recompute ? 2.0 : 1.0) + lc.bwd.t;
    }
}

int dev_config_split(struct dev_config *c, const struct dev_spec *d, const char *split)
{
    const int S = c->stages, nb = c->m->n_blocks;
    if (S < 1 || S > PROJ_MAX_STAGES) return tb_error_set(TB_EINVAL, "--stages: 1..%d for a projection, got %d", PROJ_MAX_STAGES, S);
    if (S > nb) return tb_error_set(TB_EINVAL, "--stages %d: %s has only %d blocks", S, c->m->name, nb);
    c->first_block[0] = 0;
    c->first_block[S] = nb;
    if (split && *split) {
        int k = 1;
        const char *p = split;
        while (*p) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || (*end && *end != ','))
                return tb_error_set(TB_EINVAL, "--split: expected block indices like 11 or 5,11,20, got '%s'", split);
            if (k >= S) return tb_error_set(TB_EINVAL, "--split '%s': %d stages take %d split points", split, S, S - 1);
            if (v <= c->first_block[k - 1] || v >= nb)
                return tb_error_set(TB_EINVAL, "--split '%s': block indices must increase within 1..%d", split, nb - 1);
            c->first_block[k++] = (int)v;
            p = *end ? end + 1 : end;
        }
        if (k != S) return tb_error_set(TB_EINVAL, "--split '%s': %d stages take %d split points", split, S, S - 1);
        return TB_OK;
    }
    /* Balanced on the modelled times: contiguous blocks into S stages minimising the slowest (DP). */
    double *t = malloc((size_t)nb * sizeof *t), *pre = malloc((size_t)(nb + 1) * sizeof *pre);
    /* best[s·(nb+1) + b]: the slowest stage when stages 0..s-1 hold blocks [0, b); cut: its last stage's start. */
    double *best = malloc((size_t)(S + 1) * (nb + 1) * sizeof *best);
    int *cut = malloc((size_t)(S + 1) * (nb + 1) * sizeof *cut);
    TB_ASSERT(t && pre && best && cut);
    const int W = nb + 1;
    block_costs(d, c, t);
    pre[0] = 0.0;
    for (int b = 0; b < nb; b++) pre[b + 1] = pre[b] + t[b];
    for (int b = 0; b <= nb; b++) best[1 * W + b] = pre[b], cut[1 * W + b] = 0;
    for (int s = 2; s <= S; s++)
        for (int b = s; b <= nb; b++) {
            best[s * W + b] = INFINITY;
            for (int a = s - 1; a < b; a++) {
                const double last = pre[b] - pre[a], v = best[(s - 1) * W + a] > last ? best[(s - 1) * W + a] : last;
                if (v < best[s * W + b]) best[s * W + b] = v, cut[s * W + b] = a;
            }
        }
    for (int s = S, b = nb; s >= 2; s--) {
        c->first_block[s - 1] = cut[s * W + b];
        b = cut[s * W + b];
    }
    free(t), free(pre), free(best), free(cut);
    return TB_OK;
}

void dev_project_stages(const struct dev_spec *d, const struct dev_config *c, struct dev_stage *st,
                        struct proj_measured *pm)
{
    const struct model *m = c->m;
    const int S = c->stages, B = c->micro_batch;
    const double e = elem_bytes(c->prec);
    memset(pm, 0, sizeof *pm);
    pm->stages = S;
    pm->micro_batch = B;
    int *producer = malloc((size_t)m->n_tensors * sizeof *producer);
    TB_ASSERT(producer != NULL);
    for (int t = 0; t < m->n_tensors; t++) producer[t] = -1;
    for (int i = 0; i < m->n_layers; i++) producer[m->layers[i].out] = i;
    for (int s = 0; s < S; s++) {
        struct dev_stage *x = &st[s];
        memset(x, 0, sizeof *x);
        stage_layers(m, c->first_block, s, &x->l0, &x->l1);
        /* Boundary: tensors made before the stage (not the raw input) that it reads. */
        double boundary = 0.0, acts = 0.0;
        for (int t = 0; t < m->n_tensors; t++) {
            if (producer[t] < 0 || producer[t] >= x->l0) continue;
            for (int i = x->l0; i < x->l1; i++)
                if (m->layers[i].in == t || m->layers[i].in2 == t) {
                    boundary += (double)m->tensors[t].per_sample;
                    break;
                }
        }
        for (int i = x->l0; i < x->l1; i++) {
            acts += (double)m->tensors[m->layers[i].out].per_sample;
            x->params += (double)(m->layers[i].n_w + m->layers[i].n_b);
        }
        /* Footprint: weights, gradients and optimizer state at the storage width; the activations of
         * one micro-batch (and their gradients) being worked on; and what the schedule stashes: the
         * stage's input per micro-batch in flight with recomputation, all its activations without. */
        const double stash = c->recompute ? boundary : acts;
        x->footprint_bytes = x->params * e * (2.0 + c->opt_state) + 2.0 * acts * B * e + c->in_flight * stash * B * e;
        x->level = d->n_levels - 1;
        for (int k = 0; k < d->n_levels; k++)
            if (x->footprint_bytes <= d->level[k].capacity_bytes) {
                x->level = k;
                break;
            }
        x->fits = x->footprint_bytes <= d->level[x->level].capacity_bytes;
        const double bw = d->level[x->level].bw;
        double t_over = 0.0, t_mem = 0.0;
        for (int i = x->l0; i < x->l1; i++) {
            struct dev_layer_cost lc;
            dev_layer_cost(d, m, i, B, c->prec, bw, &lc);
            const int rec = c->recompute ? 1 : 0;
            x->fwd_flops += lc.fwd.flops, x->bwd_flops += lc.bwd.flops;
            x->fwd_bytes += lc.fwd.bytes, x->bwd_bytes += lc.bwd.bytes;
            x->t_fwd += lc.fwd.t;
            x->t_bwd += lc.bwd.t + rec * lc.fwd.t;
            x->kernels += lc.fwd.kernels * (1 + rec) + lc.bwd.kernels;
            t_over += d->kernel_overhead_s * (lc.fwd.kernels * (1 + rec) + lc.bwd.kernels);
            t_mem += (lc.fwd.memory_bound ? (lc.fwd.t - d->kernel_overhead_s * lc.fwd.kernels) * (1 + rec) : 0.0) +
                     (lc.bwd.memory_bound ? lc.bwd.t - d->kernel_overhead_s * lc.bwd.kernels : 0.0);
        }
        x->t_overhead = t_over;
        x->t_memory_bound = t_mem;
        pm->t_fwd[s] = x->t_fwd;
        pm->t_bwd[s] = x->t_bwd;
        pm->exchange_bytes[s] = s > 0 ? 2.0 * boundary * B * e : 0.0;
        pm->param_bytes[s] = x->params * e;
        /* The update reads weights, gradients and state and writes weights and state: one pass. */
        pm->t_update[s] = x->params * e * (3.0 + 2.0 * c->opt_state) / (bw * d->eff_memory);
    }
    free(producer);
}

int dev_run_project(const struct dev_spec *d, const struct model *m, int stages, int micro_batch, const char *split,
                    enum dev_prec prec, int recompute, int gpipe, int opt_state, const int *devices, int n_devices,
                    int global_batch, struct dev_run *r)
{
    memset(r, 0, sizeof *r);
    r->c.m = m;
    r->c.stages = stages;
    r->c.micro_batch = micro_batch;
    r->c.prec = prec;
    r->c.recompute = recompute;
    r->c.opt_state = opt_state;
    r->c.in_flight = stages; /* 1F1B; GPipe's G is set per row below only for the stash note */
    int st = dev_config_split(&r->c, d, split);
    if (st != TB_OK) return st;
    int n = proj_default_rows(devices, n_devices < DEV_MAX_ROWS ? n_devices : DEV_MAX_ROWS, stages, micro_batch,
                              global_batch, r->rows);
    if (gpipe && n > 0) r->c.in_flight = r->rows[0].ga; /* the largest accumulation stashes the most */
    dev_project_stages(d, &r->c, r->st, &r->pm);
    struct proj_links l = d->links;
    proj_table(&r->pm, &l, r->rows, n);
    r->n = n;
    return TB_OK;
}

/* ---- published figures ---- */

int dev_published_parse(const char *text, const char *where, struct dev_published *p)
{
    memset(p, 0, sizeof *p);
    int line = 0;
    const char *q = text;
    char buf[1024];
    int st;
    while ((st = next_line(&q, buf, sizeof buf, where, &line)) > 0) {
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *s = trim(buf);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) return tb_error_set(TB_EINVAL, "%s:%d: expected 'key = value', got '%s'", where, line, s);
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        int iv = 0;
        if (!strcmp(key, "title")) snprintf(p->title, sizeof p->title, "%s", val);
        else if (!strcmp(key, "source")) snprintf(p->source, sizeof p->source, "%s", val);
        else if (!strcmp(key, "device")) snprintf(p->device, sizeof p->device, "%s", val);
        else if (!strcmp(key, "workload")) snprintf(p->workload, sizeof p->workload, "%s", val);
        else if (!strcmp(key, "split")) snprintf(p->split, sizeof p->split, "%s", val);
        else if (!strcmp(key, "precision")) snprintf(p->precision, sizeof p->precision, "%s", val);
        else if (!strcmp(key, "schedule")) snprintf(p->schedule, sizeof p->schedule, "%s", val);
        else if (!strcmp(key, "point")) {
            if (p->n >= DEV_MAX_POINTS) return tb_error_set(TB_EINVAL, "%s:%d: more than %d points", where, line, DEV_MAX_POINTS);
            char extra;
            if (sscanf(val, "%d %d %d %lf %c", &p->devices[p->n], &p->replicas[p->n], &p->ga[p->n], &p->images_per_s[p->n],
                       &extra) != 4 || p->devices[p->n] < 1 || !(p->images_per_s[p->n] > 0) ||
                !(p->images_per_s[p->n] < 1e12)) /* inf put "inf" and "-nan %" in the report */
                return tb_error_set(TB_EINVAL, "%s:%d: point: expected 'devices replicas ga images/s', got '%s'", where, line, val);
            p->n++;
        } else if (sscanf(val, "%d", &iv) == 1 &&
                   (!strcmp(key, "resolution") || !strcmp(key, "classes") || !strcmp(key, "micro_batch") || !strcmp(key, "stages") ||
                    !strcmp(key, "recompute") || !strcmp(key, "global_batch"))) {
            if (!strcmp(key, "resolution")) p->resolution = iv;
            else if (!strcmp(key, "classes")) p->classes = iv;
            else if (!strcmp(key, "micro_batch")) p->micro_batch = iv;
            else if (!strcmp(key, "stages")) p->stages = iv;
            else if (!strcmp(key, "recompute")) p->recompute = iv;
            else p->global_batch = iv;
        } else {
            return tb_error_set(TB_EINVAL, "%s:%d: unknown key or bad value '%s = %s'", where, line, key, val);
        }
    }
    if (st < 0) return st;
    if (!p->source[0]) return tb_error_set(TB_EINVAL, "%s: missing key source (published figures cite where from)", where);
    if (!p->device[0] || !p->workload[0] || p->n == 0)
        return tb_error_set(TB_EINVAL, "%s: needs device, workload and at least one point", where);
    return TB_OK;
}

int dev_published_load(const char *path, struct dev_published *p)
{
    const char *why = NULL;
    FILE *f = regular_fopen(path, &why); /* not a FIFO: its open would wait for a writer */
    struct stat sb;
    if (!f) return tb_error_set(TB_EIO, "published figures %s: %s", path, stat(path, &sb) == 0 ? why : "not found");
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return dev_published_parse(text, path, p);
}

double dev_published_at(const struct dev_published *p, int devices)
{
    if (!p) return NAN;
    for (int i = 0; i < p->n; i++)
        if (p->devices[i] == devices) return p->images_per_s[i];
    return NAN;
}

/* ---- printing ---- */

static const char *layer_name(const struct model *m, int i) { return i >= 0 && i < m->n_layers ? m->layers[i].name : "-"; }

void dev_print(const struct dev_spec *d, const struct dev_config *c, const struct dev_stage *st,
               const struct proj_measured *pm, const struct proj_row *rows, int n, const struct dev_published *pub,
               FILE *f)
{
    const char *pn = c->prec == DEV_PREC_FP16 ? "fp16" : "fp32";
    fprintf(f, "PROJECTED (device model, not a measurement): %s, %dx%d input, on %s\n", c->m->name, c->m->layers[0].op == OP_INPUT ? c->m->tensors[c->m->layers[0].out].h : c->m->in_h,
            c->m->layers[0].op == OP_INPUT ? c->m->tensors[c->m->layers[0].out].w : c->m->in_w, d->name);
    fprintf(f, "  spec        %s: %s\n", d->path, d->title[0] ? d->title : d->name);
    fprintf(f, "  peaks       matrix %.2f TFLOP/s %s (full rate from %.0f input channels per group), vector %.2f TFLOP/s\n",
            d->peak[c->prec] * 1e-12, pn, d->matrix_min_channels, d->vector_peak[c->prec] * 1e-12);
    fprintf(f, "  efficiency  matrix %.3f, vector %.3f, memory %.2f of peak; kernel overhead %.2f us\n", d->eff_matrix,
            d->eff_vector, d->eff_memory, d->kernel_overhead_s * 1e6);
    fprintf(f, "  memory     ");
    for (int k = 0; k < d->n_levels; k++)
        fprintf(f, " %s %.3g GB at %.0f GB/s%s", d->level[k].name, d->level[k].capacity_bytes * 1e-9, d->level[k].bw * 1e-9,
                k + 1 < d->n_levels ? ";" : "\n");
    fprintf(f, "  links       stage exchange %.1f GB/s + %.2f us; all-reduce %.1f GB/s + %.2f us per ring step", d->links.exchange_bw * 1e-9,
            d->links.exchange_lat * 1e6, d->links.allreduce_bw * 1e-9, d->links.allreduce_lat * 1e6);
    if (d->links.pod_devices > 0 && d->links.scaleout_bw > 0)
        fprintf(f, " within %d devices, %.2f GB/s + %.1f us per device between them", d->links.pod_devices,
                d->links.scaleout_bw * 1e-9, d->links.scaleout_lat * 1e6);
    fprintf(f, "\n");
    fprintf(f, "  fitted      %s\n", d->fitted[0] ? d->fitted : "nothing: every number is from the spec's sources or stated assumptions");
    fprintf(f, "  config      micro-batch %d, %d stage%s (first blocks", c->micro_batch, c->stages, c->stages == 1 ? "" : "s");
    for (int s = 0; s < c->stages; s++) fprintf(f, " %d", c->first_block[s]);
    fprintf(f, "), %s storage and arithmetic, recomputation %s, %d micro-batch%s stashed per stage\n", pn,
            c->recompute ? "on" : "off", c->in_flight, c->in_flight == 1 ? "" : "es");
    for (int s = 0; s < c->stages; s++) {
        const struct dev_stage *x = &st[s];
        const double t = x->t_fwd + x->t_bwd;
        fprintf(f, "  stage %d     layers %d-%d (%s .. %s): fwd %.2f GFLOP %.1f MB, bwd %.2f GFLOP %.1f MB per micro-batch; "
                   "modelled fwd %.3f ms, bwd%s %.3f ms (%d kernels: overhead %.0f %%, memory-bound %.0f %%); %.2f M params; "
                   "footprint %.0f MB in %s (%s)\n",
                s, x->l0, x->l1 - 1, layer_name(c->m, x->l0), layer_name(c->m, x->l1 - 1), x->fwd_flops * 1e-9,
                x->fwd_bytes * 1e-6, x->bwd_flops * 1e-9, x->bwd_bytes * 1e-6, x->t_fwd * 1e3,
                c->recompute ? "+recompute" : "", x->t_bwd * 1e3, x->kernels, t > 0 ? 100.0 * x->t_overhead / t : 0.0,
                t > 0 ? 100.0 * x->t_memory_bound / t : 0.0, x->params * 1e-6, x->footprint_bytes * 1e-6,
                d->level[x->level].name, x->fits ? "fits" : "DOES NOT FIT: the projection assumes it would");
        (void)pm;
    }
    const int show_pub = pub && !strcmp(pub->device, d->name);
    if (n <= 0) return;
    fprintf(f, "  %7s %8s %12s %12s %9s %13s %10s %21s", "devices", "replicas", "accumulation", "global batch", "step ms",
            "all-reduce ms", "update ms", "images/s (PROJECTED)");
    if (show_pub) fprintf(f, " %19s %8s", "images/s published", "error");
    fprintf(f, " %11s\n", "efficiency");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %7d %8d %12d %12d %9.2f %13.3f %10.3f %21.1f", rows[i].devices, rows[i].replicas, rows[i].ga,
                rows[i].global_batch, rows[i].step_s * 1e3, rows[i].allreduce_s * 1e3, rows[i].update_s * 1e3,
                rows[i].images_per_s);
        if (show_pub) {
            const double p = dev_published_at(pub, rows[i].devices);
            if (isnan(p)) fprintf(f, " %19s %8s", "-", "-");
            else fprintf(f, " %19.0f %+7.1f%%", p, 100.0 * (rows[i].images_per_s - p) / p);
        }
        fprintf(f, " %10.1f%%\n", 100.0 * rows[i].efficiency);
    }
    if (show_pub) fprintf(f, "  published   %s [%s]\n", pub->title, pub->source);
    else if (pub) fprintf(f, "  published   figures exist for %s only; none for %s\n", pub->device, d->name);
}

void dev_print_stage_validation(const struct dev_spec *d, const struct dev_stage *st, int stages,
                                const double *meas_fwd, const double *meas_bwd, FILE *f)
{
    fprintf(f, "Validation on this machine: %s's modelled per-stage times (PROJECTED) against the run's measured ones\n",
            d->name);
    fprintf(f, "  %5s %14s %14s %8s %14s %14s %8s %14s %8s\n", "stage", "fwd model ms", "fwd measured", "error",
            "bwd model ms", "bwd measured", "error", "fwd+bwd error", "");
    for (int s = 0; s < stages; s++) {
        const double mf = meas_fwd[s], mb = meas_bwd[s];
        const double ef = mf > 0 ? 100.0 * (st[s].t_fwd - mf) / mf : NAN;
        const double eb = mb > 0 ? 100.0 * (st[s].t_bwd - mb) / mb : NAN;
        const double et = mf + mb > 0 ? 100.0 * (st[s].t_fwd + st[s].t_bwd - mf - mb) / (mf + mb) : NAN;
        fprintf(f, "  %5d %14.3f %14.3f %+7.1f%% %14.3f %14.3f %+7.1f%% %+13.1f%%\n", s, st[s].t_fwd * 1e3, mf * 1e3, ef,
                st[s].t_bwd * 1e3, mb * 1e3, eb, et);
    }
}
