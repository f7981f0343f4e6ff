/* run.h — one benchmark run under a plan: data, model, backend, measurement, summary, result row.
 *
 * Plans (--plan):
 *   train       the training run: --epochs/--steps steps over the data, then the test accuracy
 *               (what `bench --epochs 5` and `bench --steps N` mean; chosen automatically then)
 *   throughput  --warmup untimed steps, then --steps timed steps (without --steps: as many as --time-budget
 *               holds at the warm-up's step time), --repeat times; images/s as median,
 *               mean ± standard error and 1.4826·MAD jitter over the timed steps (the default plan;
 *               synthetic data unless --data is given, as tf_cnn_benchmarks does)
 *   tta         train until the test accuracy reaches --target; --seeds runs, olympic mean
 *   scaling     a throughput (or, with --epochs, a training) run per global batch in --batches
 *   inference   forward only: images/s at --batch, and p50/p90/p99 latency at batch 1
 * Every run records each step's time; every plan writes result rows through one writer (schema
 * version, configuration, machine, build, commit, figures with units in their names) and an
 * MLPerf-style :::MLLOG event log per run.
 *
 * The harness drives a backend only through backend.h and a workload only through workload.h. The
 * training clock covers the loop (batch assembly included) and excludes set-up; evaluation is timed
 * separately (and, for time-to-accuracy, also counted in, as MLPerf does). A run that fails writes
 * no result row, except that a run stopped by SIGINT/SIGTERM writes one with "status":"interrupted"
 * (figures for the part that ran, marked "partial") and a run whose loss became NaN/Inf writes one with
 * "status":"diverged" (no throughput or accuracy figure), and a training run whose final checkpoint could
 * not be written still writes its measured row (with "checkpoint_error") before it exits 1. Output
 * locations (--out, --mllog, --checkpoint-dir, --save) are checked before any work (outputs.h).
 * Checkpoints (train and tta plans): --checkpoint-dir DIR holds resumable safetensors checkpoints (params,
 * buffers, optimizer state, configuration, step, training seconds), written every --checkpoint-every
 * steps, after the last step and when a signal stops the run; --resume DIR continues from the newest,
 * reaching bitwise the same parameters as an uninterrupted run on cpu (a train or tta run that finished and wrote
 * its row has nothing left to resume: finished.h); --save/--load move plain weights.
 * Threading: bench_run is called from one thread; backends start their own workers. While it runs it
 * handles SIGINT and SIGTERM (previous handlers are restored when it returns).
 */
#ifndef TB_RUN_H
#define TB_RUN_H

#include "backend.h"
#include "workload.h"

#include <signal.h>
#include <stdint.h>

enum bench_plan { PLAN_AUTO, PLAN_TRAIN, PLAN_THROUGHPUT, PLAN_TTA, PLAN_SCALING, PLAN_INFERENCE, PLAN_EVALUATE };

#define BENCH_MAX_BATCHES 32
#define BENCH_MAX_OPTIONS 128 /* entries of the option table (bench_options) */
#define BENCH_MAX_POINTS 128 /* scaling: points of a sweep (batches × replicas × ga × micro-batch) */
/* The most steps whose times a run keeps (8 bytes each, 128 MiB): a measuring plan times no more (its statistics
 * need every step's time), a longer train or tta run gives the per-step statistics of its first this many. */
#define BENCH_MAX_TIMED_STEPS (1L << 24)

struct bench_config {
    char backend[32];
    char device[16];        /* where the kernels run: cpu (default), or another device built in (see --list) */
    char workload[48];
    char data[512];         /* "" = the plan's default (Fashion-MNIST to train, synthetic to time), "synthetic", a directory */
    char out[512];          /* results file (JSON Lines) */
    char mllog_dir[512];    /* "" = <directory of out>/mllog; "none" = no event log */
    char calibration[512];  /* calibration JSON (results/calibration.json) */
    char tuning[512];       /* --conv-algo auto's choices kept between runs (results/tuning.json; "none") */
    char run_id[64];        /* "" = generated */
    enum bench_plan plan;
    int epochs;             /* 0 = workload default (train), or: train the scaling points this long */
    long steps_per_epoch;   /* 0 = one pass over the training data */
    long steps;             /* train: total steps (overrides epochs); throughput/inference: timed steps */
    int eval_batch;
    int eval;               /* evaluate on the test set at the end of a training run (default 1) */
    /* plans */
    int warmup;             /* untimed steps before timing (default 10) */
    long steps_per_execution; /* training steps per backend call (0 = auto: 1, or timed runs on a device loop) */
    double time_budget;     /* --time-budget: seconds the timed steps may take without --steps (0 = default) */
    /* set by bench_config_finish: the steps / warm-up follow budget_s, the budget in force (default 60) */
    int budget_steps, budget_warmup;
    double budget_s;
    int repeat;             /* throughput / scaling / inference: measurements (default 1) */
    double target;          /* tta: accuracy to reach; 0 = the workload's tta_target */
    int batch_per_replica;  /* --batch-per-replica B: global batch = B x replicas (0 = not given) */
    long eval_every;        /* tta: evaluate every this many steps; 0 = every epoch */
    int seeds;              /* tta: runs with seeds seed, seed+1, ... (default 1) */
    int max_epochs;         /* tta: give up after this many epochs (default 15) */
    int batches[BENCH_MAX_BATCHES], n_batches; /* scaling: global batches */
    int batches_given;      /* --batches was given (n_batches may hold the default list) */
    /* scaling grid (--replicas-list, --ga-list, --micro-batch-list): ipu replicas × accumulation ×
     * micro-batch; mirrored replicas (= devices); 0 entries = not given */
    int replicas_list[BENCH_MAX_BATCHES], n_replicas_list;
    int ga_list[BENCH_MAX_BATCHES], n_ga_list;
    int micro_batch_list[BENCH_MAX_BATCHES], n_micro_batch_list;
    /* --trace FILE: a Chrome trace (JSON) of one training step per device; --trace-step N picks the step
     * (0 = the run's last; with --repeat, of the last repeat). Implies --profile. */
    char trace[512];
    long trace_step;
    char timeline[256];     /* --timeline FILE: every training step's pipeline intervals as CSV (ipu) */
    struct workload_opts wopts;
    struct run_config run;  /* backend settings: batch, seed, optimizer, threads, ... */
    /* optimizer as requested; bench_config_finish resolves it into run.optim */
    char optimizer[16];
    float lr, momentum, weight_decay; /* < 0: default */
    /* learning-rate schedule: warm-up then constant, exponential, polynomial or cosine decay */
    char lr_schedule[16];
    long lr_warmup, lr_decay_steps;
    float lr_decay_rate, lr_power, lr_final; /* < 0: default */
    int optimizer_set, lr_set;
    int quiet;              /* no summary on stdout */
    int compact;            /* one summary line per run (suites) */
    int describe;           /* print the model table instead of training */
    int synthetic_train, synthetic_test; /* sample counts of the synthetic set (0 = the plan's choice) */
    char progress_prefix[32]; /* "[3/12] " in suites */
    char variant[128];        /* suites: the listed options that vary ("lr=0.2 warmup=5"), for summaries */
    char suite[512];          /* suites: the suite file a run came from ("" on the command line), recorded */
    char transport[8];      /* shm | mpi */
    /* checkpoints: --save/--load FILE (weights), --checkpoint-dir/--resume DIR (resumable, train plan);
     * bench_config_finish makes checkpoint_dir default to resume */
    char save[512], load[512], checkpoint_dir[512], resume[512];
    char logits[512];       /* evaluate: write the test set's logits here (.npy, float32, (N, classes)) */
    long checkpoint_every;  /* 0 = only on a stop signal and at the end */
    /* pipelined backends: POD-scale projection (--project-devices) with its stated link model */
    int project_devices[BENCH_MAX_BATCHES], n_project;
    double link_bw_gbs, link_lat_us, allreduce_bw_gbs, allreduce_lat_us; /* <= 0: the model's default */
    /* --project-device NAME|PATH: the device model (devmodel.h) instead of this CPU's measured stage times;
     * without an explicit --plan nothing runs (project_only); --device-set KEY=VALUE,... overrides the spec */
    char project_device[512], device_set[512];
    int project_only;
    int finished;           /* bench_config_finish ran */
    /* given[k]: bench_options()[k] was set by bench_config_set (the command line or a suite line), so
     * that an option the chosen backend does not take is refused rather than recorded and ignored */
    unsigned char given[BENCH_MAX_OPTIONS];
};

/* Fills c with defaults (backend cpu, device cpu, workload mnist-mlp, seed 42, results/results.jsonl). */
void bench_config_defaults(struct bench_config *c);
/* Sets one option by its long name without dashes ("batch", "lr", "plan") from its text value (NULL
 * for flags). The single parser behind the command line and suite files. Returns TB_OK, or TB_EINVAL
 * with a message naming the option and the fault. */
int bench_config_set(struct bench_config *c, const char *name, const char *value);
/* 1 if option name (without dashes) was set on c by bench_config_set: the command line or a suite line. */
int bench_option_given(const struct bench_config *c, const char *name);
/* Resolves defaults that depend on the workload (optimizer, learning rate, plan) and validates names
 * and combinations, bench_config_check_backend's included. Call once after the last bench_config_set.
 * Returns TB_OK or TB_EINVAL. */
int bench_config_finish(struct bench_config *c);
/* 1 if c's plan only times steps (throughput, inference, an untrained scaling sweep). c's plan resolved. */
int bench_config_times_only(const struct bench_config *c);
/* 1 if the run's data are synthetic: --data synthetic, or no --data for the plans that only time steps
 * (throughput, inference, an untrained scaling sweep; tf_cnn_benchmarks' choice); the others read --data or the
 * default dataset. c's plan resolved (bench_config_finish). */
int bench_config_synthetic(const struct bench_config *c);
/* Bytes an element of the run's activations (*act) and parameters and their gradients (*param) is stored in:
 * 4 in fp32; --precision fp16/bf16 on the ipu stores both in 2; the m variants, and the cuda device's mixed
 * precision, keep fp32 parameters. For the estimated traffic of a step (measure.h). c resolved. */
void bench_config_storage_bytes(const struct bench_config *c, int *act, int *param);
/* --project-devices as given, "16,64,256" ("" without), into buf (n bytes); returns buf. */
const char *bench_config_project_list(const struct bench_config *c, char *buf, size_t n);
/* Sets run.optim.lr to the workload's recipe rate at `batch` samples a step (scaled from its lr_batch),
 * unless the user chose the rate or the optimizer: called again once a plan settles the batch. */
void bench_config_recipe_lr(struct bench_config *c, const struct workload *w, int batch);
/* TB_EINVAL, with one line naming the option and the backends that take it ("--stages is an option of
 * the ipu backend, not cpu"), when an option given to bench_config_set belongs to backends other than
 * c->backend (see struct backend_caps); TB_OK otherwise. */
int bench_config_check_backend(const struct bench_config *c);
/* Runs the configured plan (calls bench_config_finish if needed); prints the summary; appends the
 * result rows. Returns a status: TB_EINTR when a signal stopped it, TB_EDIVERGED on a NaN/Inf loss. */
int bench_run(const struct bench_config *c);
/* Asks the running plan to stop after its current step; a second call kills the process with signo's
 * default action. Async-signal-safe: bench_run's SIGINT/SIGTERM handler. Once asked, later bench_run
 * calls in the process return TB_EINTR at once. */
void bench_request_stop(int signo);
/* The signal that asked for a stop (SIGINT, SIGTERM), or 0: the CLI exits with 128 + it. */
int bench_stop_signal(void);
/* "SIGINT", "SIGTERM" or "a signal". */
const char *bench_signal_name(int sig);
/* SIGINT/SIGTERM handlers calling bench_request_stop, and what they replaced. */
struct bench_stop_handlers {
    struct sigaction old_int, old_term;
    int have_int, have_term;
};
/* Installs the stop handlers (a signal the parent set to be ignored, as nohup does, stays ignored). */
void bench_stop_handlers_install(struct bench_stop_handlers *h);
/* Puts back what bench_stop_handlers_install replaced. */
void bench_stop_handlers_restore(const struct bench_stop_handlers *h);
/* Under MPI: whether every rank knows of the stop (a step's collective carried it), so that all of them stop
 * after the same step; 0 without MPI. */
int bench_stop_agreed(void);
/* A stop every rank now knows of (a collective carried signo from the rank it was sent to): this rank stops too,
 * after the same step, as if sent signo itself where it was not. */
void bench_stop_agree(int signo);
/* Says a suite line's failed run (msg after `what`, "FILE:LINE: run K failed: ") as one "bench:" line; under MPI
 * once for a failure every rank reached, and a rank that failed alone ends the job with exit status code (ranks.c). */
void bench_fail_say(const char *what, const char *msg, int code);
/* The failure this process ends with is one every MPI rank reaches alike, from a collective's values (a divergence
 * of the ranks' summed loss, ranks given other options): bench_end then waits for the others without a limit (rank 0
 * may first wait for the results file's lock) instead of taking the failure for this rank's alone. */
void bench_fail_collective(void);
/* The process's end, once, with its exit status code and the failure's msg ("" where said already or none): said
 * as bench_fail_say says it; under MPI every rank meets the others here, a failed one for a few seconds, and
 * without a limit where it succeeded, every rank agreed to stop, or the failure is every rank's
 * (bench_fail_collective). */
void bench_end(int code, const char *msg);
/* The plan's name ("train", "throughput", ...). */
const char *bench_plan_name(enum bench_plan p);

/* One point of a scaling sweep: the global batch and what it overrides in run (0 = as configured, or
 * derived by the backend). */
struct bench_scaling_point {
    int batch;
    int replicas, ga, micro_batch; /* ipu */
    int devices;                   /* mirrored: replicas are devices */
};
/* The points of c's scaling sweep in order (--batches outermost, then replicas, ga, micro-batch, the last
 * varying fastest); writes at most cap into pts (NULL with cap 0 only counts). Without a grid option
 * they are --batches alone. An ipu grid with micro-batch and ga both given takes its global batches
 * from micro-batch × ga × replicas (then --batches must not be given). Returns the count, or TB_EINVAL
 * (negative) with a one-line message for a combination that cannot run. */
int bench_scaling_points(const struct bench_config *c, struct bench_scaling_point *pts, int cap);

/* One command-line option: long name, whether it takes a value, its metavariable and help line. */
struct bench_option {
    const char *name;
    int has_arg;
    const char *meta;
    const char *help;
    int list_valued;        /* its value is itself a comma list (not expanded by suites) */
};
/* The options bench_config_set understands, in help order; *n receives the count. */
const struct bench_option *bench_options(int *n);

#endif
