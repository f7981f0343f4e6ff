/* backend.h — the execution-backend interface and its registry.
 *
 * A backend is a schedule: how one training step (one optimizer update over the global batch) is
 * spread over threads, devices, replicas and pipeline stages. Every backend runs the same kernels
 * (core/) on the same model plan and the same data; the harness drives it only through the public
 * wrappers below, which check required members, supply defaults and time the phases.
 *
 * A backend implementation is a `struct backend_i` of function pointers plus a private context;
 * each backend file exposes one constructor, registered by name in backend.c.
 */
#ifndef TB_BACKEND_H
#define TB_BACKEND_H

#include "executor.h" /* enum tensor_family, struct eval_stats */
#include "model.h"
#include "optim.h"

#include <stddef.h>
#include <stdint.h>

/* The ipu backend's own options (pipeline, precision; precision is cuda's too); the others ignore them.
 * 0 / "" = the default. */
struct ipu_options {
    /* prefetch is also the executor schedules' (cpu, mirrored, cuda): batches handed to devices that copy
     * their inputs (backend_prefetches) ahead of the step that reads them (0 = 1; negative = none). */
    int stages, micro_batch, ga, replicas, recompute, prefetch;
    char schedule[16], precision[8], split[64];
    float loss_scale;      /* fp16: static loss scale in [RUN_LOSS_SCALE_MIN, RUN_LOSS_SCALE_MAX];
                              0 = dynamic (halved on overflow, doubled after a run of clean steps) */
};

/* Everything a backend may need to plan a run; the harness fills it from the CLI. */
struct run_config {
    int batch;             /* global batch: samples per optimizer step */
    int eval_batch;        /* samples per evaluation forward (per device) */
    uint64_t seed;
    struct optim_config optim;
    int n_threads;         /* threads: worker threads (0 = all cores) */
    int n_devices;         /* mirrored / ipu: devices (0 = all cores) */
    int sync_bn;           /* mirrored: global BatchNorm statistics */
    int transport_mpi;     /* mirrored: gradients over MPI */
    int profile;           /* record per-layer times */
    int trace;             /* record each training step's per-layer events for backend_trace_events */
    int no_fuse;           /* disable fused kernels (for before/after measurements) */
    char device[16];       /* executor device the schedule places its work on ("" = cpu) */
    char conv_algo[16];    /* "auto" (or "") = measured per shape; im2col | direct | fft force one */
    int blas_threads;      /* OpenBLAS's own threads (0 = 1: the engine partitions every sgemm itself);
                              > 1 reproduces the uncoordinated arrangement, for comparison */
    struct ipu_options ipu;
};
#define RUN_LOSS_SCALE_MIN 1.0
#define RUN_LOSS_SCALE_MAX 1e30

/* A global batch as the harness hands it over: pixels stay uint8 until a device converts them. */
struct batch {
    int n;
    const uint8_t *x;   /* (n,H,W,C) */
    const int32_t *y;   /* (n) */
};

/* What one step measured. Times in seconds. */
struct step_stats {
    double loss_sum;       /* Σ per-sample loss over the global batch */
    int n;
    double t_forward_backward, t_update;
    double t_compute, t_allreduce, t_exchange, t_idle; /* backends that can tell them apart */
    int nonfinite;         /* NaN/Inf seen in loss or gradients */
    int stop_signal;       /* over MPI: the stop signal (SIGINT, SIGTERM) some rank offered to this step
                              (backend_offer_stop), which every rank learns from its collective; 0 none */
};

/* One interval of the last completed training step on device `device` (--trace): a layer's forward or
 * backward (layer ≥ 0, an index into model->layers) or a whole-step phase (layer −1: 'A' all-reduce,
 * 'U' update, 'W' waiting for the other devices), start_s..end_s seconds after the step began (measured;
 * layer times are the device's thread 0 clock, barrier waits included). */
struct trace_event {
    int device;
    int layer;
    int micro_batch;       /* −1 when the schedule has none */
    char phase;            /* 'F' forward, 'B' backward, or a whole-step phase */
    double start_s, end_s;
};

struct backend;
struct pipeline_report; /* pipeline_report.h: what pipelined backends report */
struct timeline_event;
struct device_step;

/* What a backend recorded, as views into its own memory, valid until its next call. A member it does not
 * record stays NULL / 0. Pipelined backends fill the last group (types in pipeline_report.h). */
struct backend_stats {
    int n_devices;                         /* cores/devices the schedule uses (0: one) */
    const double *layer_profile;           /* --profile: (n_layers, 2) forward, backward seconds summed over
                                              the steps so far */
    const double *layer_busy;              /* --profile: (n_layers, 2) seconds the device's threads worked per
                                              layer (less barrier waits), summed over them (NULL: no pool) */
    const double *layer_busy_max;          /* --profile: (n_layers, 2) the busiest thread's work per layer */
    int busy_threads;                      /* threads layer_busy sums over */
    unsigned barriers;                     /* barriers the schedule's threads completed together, mod 2^32 (0:
                                              none, or one thread) */
    const int *conv_algos;                 /* (n_layers) enum conv_algo per layer (-1: none) */
    const struct trace_event *trace;       /* --trace: the last completed training step's per-layer events */
    int n_trace;
    const struct loss_scaler *loss_scaling; /* fp16 (ipu stages, cuda): the loss scale now and the steps skipped
                                               on an overflow (loss_scale.h); NULL: no loss scaling */
    const struct pipeline_report *pipeline; /* the run's per-stage accounting */
    long step;                             /* the last completed training step (0: none yet) */
    const struct timeline_event *timeline; /* that step's intervals, in device order */
    int n_timeline;
    const struct device_step *devices;     /* that step per device, in device order */
    int n_device_steps;
};

struct backend_i {
    const char *name;
    /* required */
    int (*prepare)(struct backend *b, const struct model *m, const struct run_config *cfg);
    int (*forward_backward)(struct backend *b, const struct batch *batch, long step, struct step_stats *st);
    int (*update)(struct backend *b, long step, struct step_stats *st);
    int (*evaluate)(struct backend *b, const struct batch *batch, struct eval_stats *ev);
    int (*get_tensors)(struct backend *b, enum tensor_family f, float *dst);
    int (*set_tensors)(struct backend *b, enum tensor_family f, const float *src);
    void (*destroy)(struct backend *b);
    /* optional */
    int (*train_step)(struct backend *b, const struct batch *batch, long step, struct step_stats *st);
    /* Completes work train_step deferred to the next step (the batch-1 fused update). */
    int (*finish)(struct backend *b);
    void (*describe)(struct backend *b, char *buf, size_t n); /* one line: threads, devices, ... */
    int (*is_primary)(struct backend *b); /* MPI: only rank 0 prints and writes results */
    /* Everything the backend reports (s arrives zeroed): profile, algorithms, events, pipeline figures. */
    int (*stats)(struct backend *b, struct backend_stats *s);
    /* How many batches ahead prefetch takes (0: none; its devices read host memory in place). */
    int (*prefetches)(struct backend *b);
    /* Starts copying step `step`'s batch to the devices, overlapping the steps before it. */
    int (*prefetch)(struct backend *b, const struct batch *batch, long step);
    /* Runs of steps (both or neither; without them backend.c loops train_step over the staged batches):
     * see backend_stage_steps and backend_run_steps. */
    int (*stage_steps)(struct backend *b, long first_step, long n_steps, const struct batch *all);
    int (*run_steps)(struct backend *b, long step, long n_steps, struct step_stats *st, long *done);
    /* --resume: puts back the fp16 loss scaler's state a checkpoint kept (loss_scaler_format's text). */
    int (*restore_loss_scaling)(struct backend *b, const char *state);
    /* Every executor's seed (executor_set_seed): see backend_set_seed. */
    int (*set_seed)(struct backend *b, uint64_t seed);
    /* Whether the steps that follow are timed or warm-up: see backend_count_steps. */
    void (*count_steps)(struct backend *b, int timed);
    /* See backend_offer_stop. */
    int (*offer_stop)(struct backend *b, int signo);
};

struct backend {
    const struct backend_i *i;
    void *ctx;                  /* the backend's private state */
    const struct model *m;
    struct run_config cfg;
    int prepared;
    int device_loop;            /* run_steps keeps a run of steps on its device, no host round trip a step
                                   (set by prepare; backend_loops_on_device) */
    struct batch staged;        /* what backend_stage_steps was last given (the default reads it in place) */
    long staged_first, staged_n;
};

/* What the harness needs to know of a backend before it creates one: the options it takes and how it
 * spreads a batch, so that no caller compares backend names. */
struct backend_caps {
    /* The command-line options (long names without dashes, space-separated) this backend takes beyond
     * those every backend takes. An option that some entry names belongs to the backends that name it:
     * the harness refuses it for the others instead of recording a setting that changed nothing. */
    const char *options;
    int replicas_are_devices; /* its data-parallel replicas are its --devices: a global batch splits over them */
    int reference;            /* the single-thread reference schedule that speed-ups are measured against */
    int threads;              /* the threads it computes with when not told (0: all cores) */
    const char *device;       /* the executor device it always places its work on (NULL: --device's) */
};

/* A registry entry: name → constructor, and what the backend takes. */
struct backend_entry {
    const char *name;
    const char *summary;
    int (*create)(struct backend *b);
    struct backend_caps caps;
};

/* The registered backends, in display order; *n receives the count. */
const struct backend_entry *backend_registry(int *n);
/* The registry entry of backend `name`, or NULL if none is registered under it. */
const struct backend_entry *backend_find(const char *name);
/* Whether backend `name` takes `option` (a long option name without dashes): every backend takes the
 * options no entry names; of the others, those its entry names (an unknown backend takes none). */
int backend_takes_option(const char *name, const char *option);
/* Writes the backends that name `option` into buf (n > 0 bytes: "ipu", "mirrored and ipu", "a, b and c")
 * and returns how many there are (0: an option every backend takes). */
int backend_option_takers(const char *option, char *buf, size_t n);
/* The reference backend (caps.reference) that speed-ups are measured against, or NULL. */
const char *backend_reference(void);

/* A kind of device the kernels can run on, and whether this binary was built with it. */
struct device_entry {
    const char *name;
    const char *summary;
    int built;
};

/* The devices bench knows, built into this binary or not, in display order; *n receives the count. */
const struct device_entry *device_registry(int *n);
/* Creates backend `name` into b; TB_EINVAL with the valid names listed if unknown. */
int backend_create(struct backend *b, const char *name);
/* Plans and allocates for model m under cfg (validates the configuration; errors here, never later). */
int backend_prepare(struct backend *b, const struct model *m, const struct run_config *cfg);
/* One optimizer step over the global batch: forward_backward then update (or the fused train_step). */
int backend_train_step(struct backend *b, const struct batch *batch, long step, struct step_stats *st);
/* How many batches ahead the devices copy (backend_prefetch) while earlier steps run: 0 where they read
 * host memory in place (cpu) or --prefetch 0 said none; -1 for a backend with its own infeed (ipu). */
int backend_prefetches(struct backend *b);
/* Starts copying step `step`'s batch to the devices (a no-op unless backend_prefetches); the batch must
 * stay unchanged until backend_train_step runs that step. */
int backend_prefetch(struct backend *b, const struct batch *batch, long step);
/* Completes any work earlier train steps deferred (a no-op for most backends): the harness calls it
 * inside the last timed step of a run of steps, so no step's work falls outside the training clock. */
int backend_finish(struct backend *b);
/* Hands over the global batches of steps first_step .. first_step + n_steps − 1 (all->n = n_steps × the
 * prepared batch samples, step by step) for backend_run_steps. all's arrays stay the caller's and must stay
 * valid until the next stage call; a backend that loops on its device copies them there once, here. */
int backend_stage_steps(struct backend *b, long first_step, long n_steps, const struct batch *all);
/* Runs staged steps step .. step + n_steps − 1, bitwise n_steps backend_train_step calls on their batches:
 * st[j] gets step + j's statistics (the loss; times are the caller's to take), *done the steps completed
 * (on a failure, step + *done failed and st[*done] holds what it reported). Work the last step deferred
 * stays deferred (backend_finish). Where backend_loops_on_device, no host round trip per step. */
int backend_run_steps(struct backend *b, long step, long n_steps, struct step_stats *st, long *done);
/* True when the prepared backend runs backend_run_steps on its device without the host per step (the cuda
 * device's captured batch-1 step): the harness then hands it runs of steps instead of one at a time. */
int backend_loops_on_device(const struct backend *b);
/* Forward/backward only, leaving summed gradients (tests, gradient checks). */
int backend_forward_backward(struct backend *b, const struct batch *batch, long step, struct step_stats *st);
/* One optimizer update from the gradients the last forward_backward left (tests, gradient checks). */
int backend_update(struct backend *b, long step, struct step_stats *st);
/* Evaluates a batch of any size (the backend chunks it); adds to ev. */
int backend_evaluate(struct backend *b, const struct batch *batch, struct eval_stats *ev);
/* Copies a tensor family out in the canonical layout. */
int backend_get_tensors(struct backend *b, enum tensor_family f, float *dst);
/* Copies a tensor family in from the canonical layout (every replica/stage receives it); src NULL with
 * TF_OPT restores the optimizer's initial state, which each executor writes at creation. */
int backend_set_tensors(struct backend *b, enum tensor_family f, const float *src);
/* Re-keys the run's randomness (dropout, drop-connect, augmentation, stochastic rounding) from the next step
 * on, as a backend prepared with run_config.seed = seed would key it: --plan tta's seeds share one backend.
 * TB_EUNSUPPORTED when the backend or its device cannot. */
int backend_set_seed(struct backend *b, uint64_t seed);
/* Says whether the training steps of the calls that follow are timed (1) or warm-up (0), as the harness counts
 * them: a backend that sums figures over steps (the ipu's per-stage figures and bubble) then sums the timed
 * steps only, as the per-step split does, and the warm-up ones only until a timed step has run (a run no longer
 * than its warm-up). A no-op for backends without such sums. */
void backend_count_steps(struct backend *b, int timed);
/* Writes a one-line description of the backend's arrangement into buf. */
void backend_describe(struct backend *b, char *buf, size_t n);
/* Writes the convolution algorithm each layer uses (enum conv_algo, -1 if none) into algos (n_layers);
 * TB_EUNSUPPORTED for backends that cannot tell. */
int backend_conv_algos(struct backend *b, int *algos);
/* Number of cores/devices the prepared backend's schedule uses: threads, replicas, or stages × replicas. */
int backend_n_devices(struct backend *b);
/* Fills r with what a pipelined backend measured; TB_EUNSUPPORTED for backends without pipelines. */
int backend_pipeline_report(struct backend *b, struct pipeline_report *r);
/* Copies the per-layer profile into prof (6·n_layers + 1): (n_layers, 2) forward, backward seconds summed over
 * steps, then (n_layers, 2) work seconds summed over the device's threads, then (n_layers, 2) the busiest
 * thread's (zeros without a pool; the thread count in *busy_threads, 0 then), then the barriers the threads
 * have completed so far (mod 2^32; 0 without a pool); TB_EUNSUPPORTED if the backend was not prepared with
 * profile = 1 or cannot profile. */
int backend_layer_profile(struct backend *b, double *prof, int *busy_threads);
/* Copies at most cap events of the last completed training step into ev (cap 0: ev may be NULL) and
 * returns the number the step has (as snprintf does), 0 when the backend keeps no timeline. */
int backend_timeline(struct backend *b, struct timeline_event *ev, int cap);
/* Copies at most cap per-layer events of the last completed training step into ev (cap 0: ev may be
 * NULL) and returns how many the step has; 0 unless prepared with trace = 1 by a backend that records
 * them (ipu keeps its micro-batch phases in backend_timeline instead). */
int backend_trace_events(struct backend *b, struct trace_event *ev, int cap);
/* Fills s with what the prepared backend reports (views valid until its next call; zeroed members for
 * what it does not record). The wrappers above read it; the harness may call it directly. */
int backend_stats(struct backend *b, struct backend_stats *s);
/* --resume: hands the fp16 loss scaler's state from a checkpoint (loss_scaler_format's text) to a backend that
 * scales its loss (backend_stats' loss_scaling); TB_OK where it has no scaler; TB_EFORMAT for a bad state. */
int backend_restore_loss_scaling(struct backend *b, const char *state);
/* True unless this process is a non-zero MPI rank: only the primary prints and writes results. */
int backend_is_primary(struct backend *b);
/* A stop signal this process was sent: 1 when the run spans other processes (MPI ranks), which then learn it
 * from the next training step's collective (its step_stats.stop_signal), so that every rank stops after the
 * same step rather than one leaving the others in a collective; 0 when this process is the whole run and
 * stops at once. */
int backend_offer_stop(struct backend *b, int signo);
/* Releases everything the backend holds (safe on a created-but-unprepared backend). */
void backend_destroy(struct backend *b);

/* Constructors (one per backend file). */
int backend_cpu_create(struct backend *b);
int backend_threads_create(struct backend *b);
int backend_mirrored_create(struct backend *b);
int backend_ipu_create(struct backend *b);
/* The cpu schedule on the cuda device (backend_local.c; registered when built with TB_HAVE_CUDA). */
int backend_cuda_create(struct backend *b);

#endif
