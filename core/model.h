/* model.h — a model as an ordered array of small layer descriptors over numbered tensors, and its plan.
 *
 * Workloads build a model with model_add_* calls (shapes are per sample; the batch size comes at
 * plan time). Parameters, buffers (BatchNorm running stats) and per-layer saved data get offsets into
 * flat arenas; activations get offsets that scale with the planned batch n_max. Offsets, not pointers:
 * the same model is instantiated once per replica or pipeline stage by adding base pointers (see
 * struct model_inst). A model knows nothing of backends or threads. Not thread-safe to build;
 * read-only afterwards.
 */
#ifndef TB_MODEL_H
#define TB_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum op_kind {
    OP_INPUT,      /* uint8 (N,H,W,C) → float: x·scale + shift[c], optional crop/flip augmentation */
    OP_DENSE,      /* (N,IN) → (N,OUT), optional fused activation */
    OP_RELU,
    OP_SILU,
    OP_SIGMOID,
    OP_CONV,       /* k×k or 1×1, groups; weights HWIO */
    OP_DWCONV,     /* depthwise k×k */
    OP_BN,         /* BatchNorm, optional fused SiLU */
    OP_GN,         /* GroupNorm, optional fused SiLU */
    OP_GAP,        /* global average pool (N,H,W,C) → (N,C) */
    OP_SE_SCALE,   /* y = x (N,H,W,C) · s (N,C) */
    OP_ADD,        /* y = a + drop_connect(b) */
    OP_DROPOUT,
    OP_SOFTMAX_CE, /* logits (N,K) + labels → loss; the model's last layer */
    OP_COUNT
};

enum act_kind { ACT_NONE, ACT_RELU, ACT_SILU };

struct tensor {
    int h, w, c;         /* per-sample shape */
    size_t per_sample;   /* h·w·c floats */
    size_t unit_off;     /* offset in floats per unit of n_max: activation offset = unit_off·n_max */
    size_t fixed, fixed_off; /* floats independent of n_max (saved per-channel data), after all
                                per-sample data: at unit_floats·n_max + fixed_off */
    int needs_grad;      /* gradient flows into it (false for the input and saved data) */
    int last_reader;     /* highest layer index that reads it: its grad is zeroed just before that
                            layer's backward, in cache, instead of a memset of the whole arena */
    int n_readers;       /* layers that read it (in or in2): with one, that layer may overwrite its grad */
};

struct layer {
    enum op_kind op;
    char name[64];
    int in, in2, out;    /* tensor ids; in2 = -1 when unused */
    int block;           /* block index for pipeline split points (0 = stem) */
    enum act_kind act;   /* activation fused after the op */
    size_t w_off, n_w;   /* params: weights (floats into the param arena) */
    size_t b_off, n_b;   /* params: bias or β (γ is the weight); n_b = 0 if none */
    size_t buf_off, n_buf; /* buffers: BN running mean then running var */
    int save;            /* tensor id of per-layer saved data (-1 if none) */
    int algo;            /* convolution algorithm chosen at prepare (enum conv_algo), -1 = auto */
    double flops;        /* forward FLOPs per sample (2 per multiply-add) */
    union {
        struct { int IN, OUT; } dense;
        struct { int KH, KW, stride, pad, groups; } conv;
        struct { int groups; float eps, momentum; } norm;
        struct { float p; uint32_t id; } drop; /* dropout / drop-connect rate and its rng layer id */
        struct { float scale, shift[3], std[3]; int pad, flip; } input;
        struct { float smoothing; } ce;
    } a;
};

/* One named parameter tensor (checkpoints, LARS segments, weight-decay exclusions). */
struct param_entry {
    char name[96];       /* torchvision state_dict key for EfficientNet, Keras-like for the MLP */
    size_t off, n;       /* floats into the param (or buffer) arena */
    int ndim, dims[4];   /* our layout's dims */
    int layer;           /* owning layer */
    int kind;            /* PARAM_WEIGHT, PARAM_BIAS, PARAM_NORM, PARAM_BUFFER */
    int torch_conv1x1;   /* a dense (IN,OUT) weight that torch holds as a 1×1 Conv2d, (OUT,IN,1,1), in
                          * checkpoints (EfficientNet's SE fc1/fc2); the workload sets it, 0 by default */
};
enum { PARAM_WEIGHT, PARAM_BIAS, PARAM_NORM, PARAM_BUFFER, PARAM_COUNTER };

struct model {
    char name[32];
    struct tensor *tensors;
    int n_tensors, cap_tensors;
    struct layer *layers;
    int n_layers, cap_layers;
    struct param_entry *params; /* trainable entries then buffer entries */
    int n_entries, cap_entries;
    size_t n_params;     /* floats in the param arena (64-byte aligned per tensor) */
    size_t n_buffers;    /* floats in the buffer arena */
    size_t unit_floats;  /* activation floats per unit of n_max (Σ aligned per-sample sizes) */
    size_t fixed_floats; /* activation floats independent of n_max (saved per-channel data) */
    int in_h, in_w, in_c, n_classes;
    int input, logits;   /* tensor ids */
    int n_blocks;
    int cur_block;       /* block that new layers join */
    double flops_per_sample; /* forward FLOPs per sample (2 per multiply-add) */
};

/* Starts an empty model with an input of per-sample shape (h,w,c) and n_classes outputs. */
int model_init(struct model *m, const char *name, int h, int w, int c, int n_classes);
/* Frees what model_init and the add calls allocated. */
void model_free(struct model *m);
/* Adds an activation tensor of per-sample shape (h,w,c); returns its id. */
int model_add_tensor(struct model *m, int h, int w, int c);
/* Adds a layer reading tensor in (and in2) and writing a new tensor of shape (h,w,c); returns the layer
 * index (its output id is m->layers[i].out). */
int model_add_layer(struct model *m, enum op_kind op, const char *name, int in, int in2, int h, int w, int c);
/* Reserves n floats of parameters for a layer under a canonical name and dims; returns the offset. */
size_t model_add_param(struct model *m, int layer, const char *name, int kind, int ndim, const int *dims);
/* Reserves a per-layer saved tensor (per_sample floats per sample plus fixed floats). */
void model_add_save(struct model *m, int layer, size_t per_sample, size_t fixed);
/* Begins a new block (pipeline split unit); later layers belong to it. */
void model_begin_block(struct model *m);
/* Finishes building: computes last readers, activation offsets, totals and checks invariants. */
int model_finalize(struct model *m);
/* Float offset of tensor t in an activation arena planned for n_max samples. */
static inline size_t model_act_off(const struct model *m, int t, int n_max)
{
    return m->tensors[t].unit_off * (size_t)n_max;
}
/* Activation arena size in floats for n_max samples. */
size_t model_act_floats(const struct model *m, int n_max);
/* Training FLOPs per sample: forward, backward-data where the input needs a gradient, and
 * backward-params where the layer has weights (each costing about the forward's FLOPs). */
double model_train_flops_per_sample(const struct model *m);
/* Name of an op ("conv", "dwconv", ...). */
const char *model_op_name(enum op_kind op);
/* Prints the per-layer table (op, output shape, params, forward FLOPs, activation bytes per sample,
 * and the conv algorithm when algos is non-NULL: one enum conv_algo per layer, -1 if none) and totals. */
void model_describe(const struct model *m, const int *algos, const char *const *algo_names, FILE *f);
/* Bytes one training instance of m needs at n_max samples: params, grads, optimizer state (state_floats
 * per parameter), buffers, activations and their gradients, evaluation activations (eval_n samples). */
double model_train_bytes(const struct model *m, int n_max, int state_floats, int eval_n);
/* Counts trainable parameters (sum of entries' n, without alignment padding). */
size_t model_count_params(const struct model *m);

/* Base pointers of one instance of a model: the plan's offsets are added to these. */
struct model_inst {
    const struct model *m;
    int n_max;          /* activations planned for this many samples */
    int par;            /* parallel units its work splits are cut for (0: the machine's, tb_par_units;
                         * executor_config.par_units) */
    float *params;      /* (n_params), or a window of canonical offsets from param_base on */
    size_t param_base;  /* canonical offset params[0] and grads[0] hold (0: the whole arenas) */
    float *grads;       /* (n_params), or a window like params */
    float *opt;         /* (state_per_param · n_params) */
    float *buffers;     /* (n_buffers) */
    float *acts;        /* (model_act_floats(n_max)) */
    float *dacts;       /* (model_act_floats(n_max)); NULL for an inference-only instance */
    float *losses;      /* (n_max) per-sample losses */
    uint8_t *correct;   /* (n_max) argmax == label */
    int32_t *labels;    /* (n_max) */
    float *scratch;     /* per-thread scratch: n_threads × scratch_floats */
    size_t scratch_floats;
    float *shared;      /* (shared_floats) partial sums all threads of a layer write, then reduce:
                         * BatchNorm's chunk sums, GEMM1X1's weight-gradient parts, a batch-1 dense
                         * forward's row-chunk sums (the deferred fused update) */
    size_t shared_floats;
    struct exec_layer_state *ls; /* (n_layers) per-instance layer state (conv algorithm, FFT plan) */
    double *prof;       /* (n_layers, 2) seconds of forward / backward per layer, summed; NULL = off */
    double *prof_busy;  /* (threads, n_layers, 2) each thread's seconds of work per layer and phase (its CPU
                         * time in the layer less its barrier spinning), summed: the pool's idle time per layer
                         * (imbalance, serial work) is the layer's time less these; NULL = off */
    int prof_busy_cpu;  /* prof_busy from each thread's CPU time (more threads than cores: the simulated
                         * split), else from the monotonic clock, 18× cheaper to read in a VM */
    int no_layer_fusion; /* --no-fuse: run fusable layer pairs unfused (what fusion buys) */
    int no_se_conv;      /* tests: every fusion but the SE scale's into the projection (the others are bitwise) */
    int no_dw_form_dout; /* TB_DW_FORM_DOUT=0 (read at prepare): the BatchNorm after a depthwise convolution writes
                          * its data gradient, not left to that convolution to form (exec.c's bn_bwd_in_dw); an
                          * A/B of the bytes it saves where memory bounds the step (the 16-core machine) */
    int no_se_chain;     /* TB_SE_CHAIN=0 (read at prepare): an SE block's fc1, SiLU, fc2 and sigmoid run as four
                          * layers with their barriers, not as one pass of row tiles (exec.c's se_chain_on); an
                          * A/B for the machine whose barriers and serial layers cost (16 cores); the same bits */
    int no_se_rows;      /* TB_SE_ROWS=0 (read at prepare): the SE scale writes its output where the projection
                          * could form it a tile at a time (exec.c's se_rows_fused); an A/B of the bytes; the
                          * same bits */
    int no_dw_params_fuse; /* tests: the depthwise weight gradient by its separate kernels, not inside its input
                            * BatchNorm's backward stream wherever that stream runs */
    float *ones;         /* (ones_floats) 1.0f: the SE scale the BatchNorm backward applies when the
                          * projection convolution applied it already */
    size_t ones_floats;
    float *bn_coef;      /* (3 · widest BatchNorm) a BatchNorm's data-gradient coefficients, for the
                          * convolution before it that applies them as it reads (exec's bn_bwd_in_conv) */
    uint8_t *pfirst;     /* (n_layers) or NULL: 1 where the layer's parameter gradients hold nothing yet and its
                          * backward writes them instead of adding (the local engine's lazy zeroing; set only
                          * where exec_params_first_write) */
    uint8_t *pwrote;     /* (n_layers) or NULL: thread 0 marks each layer whose backward wrote or added to its
                          * parameter gradients in a pass */
};

/* Per-instance state of one layer, chosen at prepare time. */
struct exec_layer_state {
    int algo;                     /* enum conv_algo for OP_CONV, -1 otherwise */
    struct conv_fft_plan *plan;   /* FFTW plans when algo is FFT */
    /* A BatchNorm+SiLU whose output only an SE scale and its global pool read: in the BatchNorm's
     * state the SE-scale and pool layers, in theirs the BatchNorm's; -1 otherwise (exec_se_fused). */
    int se_scale, se_pool, se_bn;
    /* A BatchNorm+SiLU whose output only a depthwise convolution reads: in the BatchNorm's state that
     * layer, in the depthwise's the BatchNorm; -1 otherwise (exec's dw_fused). */
    int bn_dw, dw_bn;
    /* A BatchNorm whose input the convolution just before it writes (bias-free, or depthwise) and only
     * it reads: in the BatchNorm's state that convolution, in the convolution's the BatchNorm; -1
     * otherwise (exec's conv_fused). */
    int bn_conv, conv_bn;
    /* An SE scale (after a fused BatchNorm, se_bn) whose output only the bias-free 1×1 convolution just
     * after it reads: in the scale's state that convolution, in the convolution's the scale; -1 otherwise
     * (exec's se_conv_fused). */
    int se_conv, conv_se;
    /* An SE block's fc1 → SiLU → fc2 → sigmoid, four adjacent layers each the only reader of the one
     * before it: in all four states the first's index (fc1), -1 otherwise (exec's se_chain_on). */
    int se_chain;
};

#endif
