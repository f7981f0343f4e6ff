/* devmodel.h — projecting a pipelined, replicated training run onto a described device: a device spec
 * (devices/<name>.spec), a roofline per layer from the model's counted FLOPs and bytes, and the same
 * schedule composition as projection.h (stages, micro-batches, accumulation, replicas, all-reduce).
 *
 * What it is: a stated analytical model whose every input is printed. A spec gives peak FLOP/s per
 * precision of the matrix unit (AMP, tensor cores, sgemm) and of the vector unit, the capacity and
 * bandwidth of each memory level, link and all-reduce bandwidth and latency, a per-kernel overhead and
 * the achieved fraction of each peak, each number with a "# source:" comment. Per layer and micro-batch:
 *     t = max(flops / rate, bytes / (bw · efficiency_memory)) + kernel_overhead · kernels
 * where rate is the matrix peak · efficiency_matrix · min(1, input channels per group /
 * matrix_min_channels) for convolutions and dense layers, and the vector peak · efficiency_vector for
 * everything else (norms, activations, depthwise, pooling, SE scale, add); bytes are the layer's
 * activations in and out plus its weights, at the run's storage width; bw is that of the first memory
 * level that holds the stage's footprint (weights, gradients, optimizer state, stashed activations).
 * Backward: one pass per gradient (data, weights) at the forward's cost; recomputation adds the
 * forward again. Stage times then go through proj_table (projection.h) with the spec's links.
 * What it is not: a simulator; it knows no tile mapping, no exchange schedule, no kernel fusion.
 * It never allocates the model's activations: it reads the model's layer table only.
 * Threading: pure functions, except dev_spec_load (reads a file).
 */
#ifndef TB_DEVMODEL_H
#define TB_DEVMODEL_H

#include "calibrate.h"
#include "model.h"
#include "projection.h"

#include <stdio.h>

#define DEV_MAX_LEVELS 4
#define DEV_DEFAULT_DIR "devices"

/* Where the shipped specs are: ./devices when it exists, else the one beside the build directory
 * (<dir of bench>/../devices), so that bench run from elsewhere still finds them; else "devices". */
const char *dev_default_dir(void);

enum dev_prec { DEV_PREC_FP32, DEV_PREC_FP16, DEV_PREC_COUNT };
enum dev_class { DEV_CLASS_MATRIX, DEV_CLASS_VECTOR };

struct dev_level {
    char name[24];
    double capacity_bytes;
    double bw; /* bytes/s */
};

struct dev_spec {
    char name[64], kind[16], title[160], path[512];
    char fitted[256];                   /* "" or what was fitted, on what (printed beside every projection) */
    double peak[DEV_PREC_COUNT];        /* matrix-unit FLOP/s (2 per multiply-add) */
    double vector_peak[DEV_PREC_COUNT]; /* FLOP/s off the matrix unit */
    double matrix_min_channels;         /* input channels per group the matrix unit needs for its full rate */
    double eff_matrix, eff_vector, eff_memory; /* achieved fractions of the peaks and of the bandwidth */
    double kernel_overhead_s;           /* per kernel (launch, BSP sync + exchange set-up, task dispatch) */
    int n_levels;
    struct dev_level level[DEV_MAX_LEVELS]; /* smallest (fastest) first */
    struct proj_links links;            /* stage-to-stage exchange, all-reduce within and across pods */
};

/* Parses a spec's text (key = value lines, '#' comments; every number must carry a "# source:"
 * comment). where names the text in messages ("devices/ipu-bow.spec"). TB_EINVAL with a one-line
 * message "where:LINE: ..." on an unknown key, a bad number, a number without a source, or "where: missing
 * key K". */
int dev_spec_parse(const char *text, const char *where, struct dev_spec *d);
/* Applies "key=value[,key=value]" overrides (--device-set) to a parsed spec; recorded in d->fitted. */
int dev_spec_override(struct dev_spec *d, const char *list);
/* Loads a spec by name (dir/<name>.spec) or path (contains '/' or ends in .spec). TB_EIO when missing
 * (the message lists the specs in dir), TB_EINVAL when malformed. */
int dev_spec_load(const char *name_or_path, const char *dir, struct dev_spec *d);
/* The "cpu-this" spec: one core of this machine (the ipu backend runs one stage per thread), from its
 * calibration: sgemm one-thread GFLOP/s as both peaks, the triad one-thread bandwidth as the memory
 * level's (its capacity the machine's MemTotal), per-kernel overhead and efficiencies stated in devmodel.c. */
void dev_spec_from_calibration(const struct calibration *c, struct dev_spec *d);
/* The same, naming the calibration file it was read from (the spec line's source). */
void dev_spec_from_calibration_file(const struct calibration *c, const char *path, struct dev_spec *d);
/* This machine's memory (/proc/meminfo's MemTotal) in bytes; 0 when unknown. */
double dev_mem_total_bytes(void);
/* "fp32" → DEV_PREC_FP32; "fp16", "bf16", "fp16m", "bf16m" → DEV_PREC_FP16 (16-bit compute); -1 else. */
int dev_prec_parse(const char *s);

/* One layer's modelled cost per micro-batch. */
struct dev_pass {
    double flops, bytes, t; /* t in seconds, overhead included */
    int kernels;
    int memory_bound;
};
struct dev_layer_cost {
    enum dev_class cls;
    double rate;            /* FLOP/s used for the layer */
    struct dev_pass fwd, bwd; /* bwd: data and weight gradients (no recomputation) */
};
/* Layer li of m for n samples at precision prec, with memory bandwidth bw (bytes/s, before efficiency). */
void dev_layer_cost(const struct dev_spec *d, const struct model *m, int li, int n, enum dev_prec prec, double bw,
                    struct dev_layer_cost *c);

/* What to project: the model, its split into stages, micro-batch, precision, recomputation. */
struct dev_config {
    const struct model *m;
    int stages, micro_batch;
    int first_block[PROJ_MAX_STAGES + 1]; /* stage s: blocks [first_block[s], first_block[s+1]) */
    enum dev_prec prec;
    int recompute;
    int in_flight;      /* micro-batches a stage stashes at once (1F1B: S; GPipe: G) */
    int opt_state;      /* optimizer state values per parameter (LARS, SGD momentum: 1; Adam: 2) */
};
/* Splits blocks 1.. of m into stages from a comma list of first blocks ("11"); "" = balanced on the
 * modelled stage times. TB_EINVAL on a bad list. */
int dev_config_split(struct dev_config *c, const struct dev_spec *d, const char *split);

/* Per stage, what the model says. */
struct dev_stage {
    int l0, l1;                         /* layers [l0, l1) */
    double fwd_flops, bwd_flops;        /* per micro-batch (bwd without recomputation) */
    double fwd_bytes, bwd_bytes;
    double t_fwd, t_bwd;                /* seconds per micro-batch; t_bwd includes recomputation */
    double t_overhead;                  /* of t_fwd + t_bwd: kernel overheads */
    double t_memory_bound;              /* of t_fwd + t_bwd: layers whose bytes bound them */
    int kernels;                        /* per micro-batch, fwd + bwd (+ recompute) */
    double params;                      /* trainable values */
    double footprint_bytes;             /* weights, grads, optimizer state, stashed and working activations */
    int level;                          /* memory level used (index into spec levels) */
    int fits;                           /* footprint ≤ that level's capacity */
};
/* Models every stage of c on d and fills pm (proj_measured: per-stage times, exchange and parameter
 * bytes, update time) for proj_table. */
void dev_project_stages(const struct dev_spec *d, const struct dev_config *c, struct dev_stage *st,
                        struct proj_measured *pm);

/* A whole projection: the configuration, its stages, what proj_table made of them. */
#define DEV_MAX_ROWS 32
struct dev_run {
    struct dev_config c;
    struct dev_stage st[PROJ_MAX_STAGES];
    struct proj_measured pm;
    struct proj_row rows[DEV_MAX_ROWS];
    int n;
};
/* Projects model m on d: stages and micro_batch, split ("" = balanced on the model), precision,
 * recomputation, gpipe (stash all G micro-batches) or 1F1B (S), opt_state values per parameter; rows
 * for each device count with Graphcore's rule (replicas = devices / S, accumulation = global batch /
 * (micro_batch · replicas); counts that do not divide are skipped). TB_EINVAL on a bad split. */
int dev_run_project(const struct dev_spec *d, const struct model *m, int stages, int micro_batch, const char *split,
                    enum dev_prec prec, int recompute, int gpipe, int opt_state, const int *devices, int n_devices,
                    int global_batch, struct dev_run *r);

/* Published figures to validate against (devices/seed001.published). */
#define DEV_MAX_POINTS 16
struct dev_published {
    char title[200], source[400], device[64], workload[64], split[64], precision[16], schedule[16];
    int resolution, classes, micro_batch, stages, recompute, global_batch, n;
    int devices[DEV_MAX_POINTS], replicas[DEV_MAX_POINTS], ga[DEV_MAX_POINTS];
    double images_per_s[DEV_MAX_POINTS];
};
/* Parses a published-figures file (key = value; "point = devices replicas ga images/s"). */
int dev_published_parse(const char *text, const char *where, struct dev_published *p);
int dev_published_load(const char *path, struct dev_published *p);

/* Prints the PROJECTED table with its inputs: spec, per-stage FLOPs, bytes, times, memory fit, the
 * link model, and, when pub is non-NULL, the published figure and the error per matching row. */
void dev_print(const struct dev_spec *d, const struct dev_config *c, const struct dev_stage *st,
               const struct proj_measured *pm, const struct proj_row *rows, int n, const struct dev_published *pub,
               FILE *f);
/* The published figure for a device count (NAN if none). */
double dev_published_at(const struct dev_published *p, int devices);
/* Prints the per-stage validation against measured per-micro-batch times (seconds): modelled, measured,
 * error %. */
void dev_print_stage_validation(const struct dev_spec *d, const struct dev_stage *st, int stages,
                                const double *meas_fwd, const double *meas_bwd, FILE *f);

#endif
