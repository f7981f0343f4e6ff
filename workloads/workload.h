/* workload.h — what to train: a model builder, its initialisation, its data and its defaults.
 *
 * Workloads know nothing of backends. The registry maps names to descriptors; `bench --list` prints
 * it and the tests iterate it.
 */
#ifndef TB_WORKLOAD_H
#define TB_WORKLOAD_H

#include "dataset.h"
#include "model.h"
#include "optim.h"

#include <stdint.h>

/* Options a user may set that shape the model. 0 / "" mean the workload's default. */
struct workload_opts {
    int classes;         /* output classes (default: the dataset's) */
    int resolution;      /* input size (EfficientNet) */
    int in_h, in_w, in_c;/* the dataset's sample shape, filled by the harness */
    char norm[16];       /* "batch" or "group" */
    int norm_groups;
    float dropout;       /* < 0: default */
    float drop_connect;  /* < 0: default */
    float label_smoothing; /* ε of the cross-entropy target (0 = none) */
    float bn_eps;        /* BatchNorm ε; 0: torchvision's for the variant (EfficientNet) */
};

struct workload {
    const char *name;
    const char *summary;
    /* Builds the model for the options (shape of the data, classes, variants). */
    int (*build)(struct model *m, const struct workload_opts *o);
    /* Writes the seeded initial parameters and buffers (canonical layout). */
    void (*init)(const struct model *m, float *params, float *buffers, uint64_t seed);
    /* Defaults for a run of this workload. */
    int batch, epochs, steps_per_epoch; /* steps_per_epoch 0 = a full pass over the data */
    enum optim_kind optimizer;
    float lr;                           /* 0 = the optimizer's default */
    /* The rest of the training recipe, applied when the run keeps the workload's optimizer and lr (an
     * --optimizer or --lr of the user's replaces the whole recipe, so its schedule is then constant unless
     * --lr-schedule / --lr-warmup say otherwise). lr is the rate at lr_batch samples per step, scaled
     * linearly to the run's batch (0 = not scaled): the references state their rates that way, and an
     * unscaled RMSProp rate of batch 256 diverges at batch 16. */
    int lr_batch;
    long warmup_steps;                  /* linear warm-up from 0 over this many steps */
    enum lr_schedule schedule;          /* decay after the warm-up */
    float decay_rate;                   /* exponential: lr·rate^(step/decay_steps) */
    long decay_steps;
    float power;                        /* polynomial: (1 − t/T)^power towards 0 */
    const char *norm;                   /* default normalisation ("group", "batch"; NULL = the builder's) */
    int norm_groups;                    /* GroupNorm's group count when norm is "group" */
    int resolution;                     /* input size the model expects (0 = the dataset's) */
    int channels;                       /* channels the model expects (0 = the dataset's) */
    float tta_target;                   /* default time-to-accuracy target */
    int arg;                            /* builder-specific (EfficientNet: variant index + 16·G16) */
    unsigned opts;                      /* WL_OPT_*: the workload_opts the builder applies; the harness refuses
                                           the others, so a row never records a setting the run ignored */
};

/* struct workload.opts. */
enum { WL_OPT_RESOLUTION = 1u, WL_OPT_NORM = 2u, WL_OPT_DROPOUT = 4u, WL_OPT_BN_EPS = 8u };

/* The registered workloads; *n receives the count. */
const struct workload *const *workload_registry(int *n);
/* Finds a workload by name; NULL and a message listing the valid names if unknown. */
const struct workload *workload_find(const char *name);

/* The workload's default recipe in words (optimizer, rate and its batch scaling, warm-up, decay, norm) into
 * buf (n bytes), for --list. */
void workload_recipe_text(const struct workload *w, char *buf, size_t n);

/* Keras's Glorot-uniform init of a (fan_in, fan_out) weight, keyed by (seed, tensor index). */
void init_glorot_uniform(float *w, size_t n, int fan_in, int fan_out, uint64_t seed, uint64_t tensor);
/* Zeroes every entry of m but its weights: biases, norm parameters, buffers, counters. */
void init_zero_non_weights(const struct model *m, float *params, float *buffers);
/* Default init for every entry of m: Glorot-uniform weights, every other entry zero. */
void init_default(const struct model *m, float *params, float *buffers, uint64_t seed);

/* Workload descriptors (one per workload file). */
extern const struct workload workload_mnist_mlp;
/* EfficientNet B0..B7 (index 0..7) then their G16 variants (8..15). */
extern const struct workload workload_effnet[16];

#endif
