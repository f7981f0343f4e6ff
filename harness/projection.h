/* projection.h — POD-scale projection of a pipelined, replicated run from measured per-stage figures.
 *
 * What it is: a stated analytical model, not a simulation. Inputs are what one measured run on this
 * machine produced (per-stage forward and backward time per micro-batch, bytes crossing each stage
 * boundary per micro-batch, parameter bytes per stage) plus a link model (bandwidth and latency of
 * the stage-to-stage exchange and of the replica all-reduce). Per step, under a fill–drain (GPipe)
 * or 1F1B schedule, every stage waits for the slowest one:
 *     t_pipe = (G + S − 1) · max_s (f_s + b_s + exchange_s)
 *     t_ar   = max_s [ 2 (R−1)/R · param_bytes_s / bw_ar + 2 (R−1) · latency_ar ]     (ring all-reduce)
 *     images/s = B · G · R / (t_pipe + t_ar + max_s t_update_s)
 * With pod_devices > 0 and more devices than a pod holds, the all-reduce is hierarchical: a ring over the
 * r = pod_devices/S replicas of a pod (reduce-scatter + all-gather at bw_ar), and between the P pods a
 * ring over each device's 1/r shard at the scale-out link's bandwidth and latency:
 *     t_ar = 2 (r−1)/r · bytes / bw_ar + 2 (r−1) · lat_ar + 2 (P−1)/P · (bytes/r) / bw_out + 2 (P−1) · lat_out.
 * Utilisation = Σ_s G (f_s + b_s) / (S · (t_pipe + t_ar)); scaling efficiency = per-device throughput
 * relative to the first row. Every figure it produces is labelled "projected" by the caller.
 * Threading: pure functions.
 */
#ifndef TB_PROJECTION_H
#define TB_PROJECTION_H

#include <stdio.h>

#define PROJ_MAX_STAGES 64

/* What one measured run provides. Times in seconds per micro-batch, bytes per micro-batch. */
struct proj_measured {
    int stages;                         /* S */
    int micro_batch;                    /* B */
    double t_fwd[PROJ_MAX_STAGES];      /* forward time per micro-batch, per stage */
    double t_bwd[PROJ_MAX_STAGES];      /* backward (incl. recomputation) per micro-batch, per stage */
    double exchange_bytes[PROJ_MAX_STAGES]; /* bytes entering stage s per micro-batch (fwd + bwd) */
    double param_bytes[PROJ_MAX_STAGES];    /* gradient bytes all-reduced by stage s per step */
    double t_update[PROJ_MAX_STAGES];       /* weight update per step (0 = not modelled: measured runs) */
};

/* The link model: stated, with defaults the user can override. */
struct proj_links {
    double exchange_bw;   /* bytes/s between adjacent stages */
    double exchange_lat;  /* s per transfer */
    double allreduce_bw;  /* bytes/s per device in the ring */
    double allreduce_lat; /* s per ring step */
    int pod_devices;      /* devices joined by the all-reduce links above (0 = one flat ring) */
    double scaleout_bw;   /* bytes/s per device between pods */
    double scaleout_lat;  /* s per ring step between pods */
};

/* One configuration to project and its result. */
struct proj_row {
    int replicas, ga;                /* inputs */
    int devices, local_batch, global_batch;
    double step_s, pipe_s, allreduce_s, update_s, images_per_s, utilisation, efficiency;
};

/* Fills l with the default link model (IPU-Link-like exchange, Pod-scale all-reduce; see projection.c). */
void proj_links_default(struct proj_links *l);
/* The all-reduce time of bytes over R replicas of an S-stage pipeline under l (flat or hierarchical). */
double proj_allreduce_s(const struct proj_links *l, double bytes, int R, int S);
/* Projects one configuration (replicas, ga) into row. */
void proj_project(const struct proj_measured *m, const struct proj_links *l, struct proj_row *row);
/* Projects rows[0..n) (replicas and ga filled in) and computes scaling efficiency against rows[0]. */
void proj_table(const struct proj_measured *m, const struct proj_links *l, struct proj_row *rows, int n);
/* Graphcore's default table for a global batch: replicas devices/S for each device count, accumulation
 * so that B·G·R = global batch; rows with non-integral G or G < S are skipped. Returns rows written. */
/* 1 when `devices` split into `stages` stages tiles global_batch in micro-batches with at least S of
 * them a step; else 0 and the reason in why. */
int proj_row_fits(int devices, int stages, int micro_batch, int global_batch, char *why, size_t why_size);
/* Writes one note line to f for each device count proj_default_rows leaves out, saying why; what names
 * where the counts came from ("--project-devices", or "default device count" when the user gave none). */
void proj_notes_left_out(const int *devices, int n_devices, int stages, int micro_batch, int global_batch,
                         const char *what, FILE *f);
int proj_default_rows(const int *devices, int n_devices, int stages, int micro_batch, int global_batch,
                      struct proj_row *rows);
/* Prints the batch-size table (local batch, stages, replicas, accumulation, global batch, images/s,
 * utilisation, efficiency), every figure marked projected, with the link model stated. */
void proj_print(const struct proj_measured *m, const struct proj_links *l, const struct proj_row *rows, int n,
                FILE *f);

#endif
