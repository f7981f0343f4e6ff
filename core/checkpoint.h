/* checkpoint.h — model checkpoints as safetensors files that PyTorch reads and writes.
 *
 * Format (https://github.com/huggingface/safetensors): 8-byte little-endian header length L, an L-byte
 * JSON header {"name": {"dtype": "F32", "shape": [...], "data_offsets": [a, b]}, ...,
 * "__metadata__": {"key": "string", ...}} padded with spaces to a multiple of 8, then the raw
 * little-endian tensor bytes (offsets relative to the end of the header).
 *
 * Every param_entry of the model is stored under its name in torchvision's layout, so
 * torchvision.models.efficientnet_b0().load_state_dict(..., strict=True) accepts the file:
 *   conv (KH,KW,C/G,OC) → (OC,C/G,KH,KW); depthwise (KH,KW,C) → (C,1,KH,KW);
 *   dense "*.weight" marked torch_conv1x1 by its workload (IN,OUT) → (OUT,IN,1,1) (torchvision's SE
 *   uses 1×1 Conv2d for fc1/fc2);
 *   other dense "*.weight" (IN,OUT) → (OUT,IN) (nn.Linear); Keras-like "*.kernel" stays (IN,OUT);
 *   biases, norm γ/β and BatchNorm running statistics (C) as they are;
 *   every BatchNorm also gets "<prefix>.num_batches_tracked" (I64, shape [] = 0), which torch expects.
 * __metadata__ records "format": "pt" and, with BatchNorm, "bn_eps" (the model's: by default
 * torchvision's for the variant, 1e-5 for B0..B4, 1e-3 for B5..B7; a reader whose BatchNorm differs sets
 * it to compute the same function — tools/ckpt_roundtrip.py does; the harness's --load honours it).
 * The loader checks everything (sizes, JSON, names, dtypes, shapes, offsets in range and disjoint, no
 * missing or unknown tensors, no NaN or Inf in a float tensor) and converts back to our layouts.
 *
 * Resumable checkpoints (checkpoint_save_state) add the optimizer state as extra F32 tensors
 * "__optimizer__.<param name>.<k>" (copy k of optim_state_per_param, our layout, flat), in the same file
 * so one rename publishes a consistent snapshot. checkpoint_load ignores them (--load of a resume
 * checkpoint works); a PyTorch reader drops keys starting with "__" before load_state_dict.
 * A checkpoint directory holds ckpt-<step, 10 digits>.safetensors files of one run at a time.
 *
 * Not a general safetensors library: F32 tensors (plus I64 counters) only. No shared state; the
 * caller owns the arrays. Saving is atomic (temp file, fsync, rename), so a crash never leaves a
 * half-written checkpoint under the final name.
 */
#ifndef TB_CHECKPOINT_H
#define TB_CHECKPOINT_H

#include "model.h"

#include <stddef.h>

/* Writes params (m->n_params) and buffers (m->n_buffers) of m to path in torchvision's layouts, with
 * meta_json (a JSON object such as {"workload":"effnet-b0","step":100}, or NULL) as __metadata__
 * (non-string values are stored as their JSON text, as safetensors wants strings). Atomic. */
int checkpoint_save(const char *path, const struct model *m, const float *params, const float *buffers,
                    const char *meta_json);
/* Reads a checkpoint written by checkpoint_save or by PyTorch into params (m->n_params) and buffers
 * (m->n_buffers), in our layouts; TB_EIO / TB_EFORMAT with one line naming the file and the fault.
 * On failure params and buffers may be partly written. */
int checkpoint_load(const char *path, const struct model *m, float *params, float *buffers);
/* Copies the __metadata__ string under key into out (NUL-terminated, truncated to out_size);
 * TB_EINVAL if the file has no such key, TB_EIO / TB_EFORMAT if the file is unreadable or malformed. */
int checkpoint_read_meta(const char *path, const char *key, char *out, size_t out_size);

/* checkpoint_save plus the optimizer state opt (n_opt · m->n_params floats: n_opt consecutive copies of
 * the param layout, as TF_OPT holds it) stored as "__optimizer__.<name>.<k>" tensors. Atomic. */
int checkpoint_save_state(const char *path, const struct model *m, const float *params, const float *buffers,
                          const float *opt, int n_opt, const char *meta_json);
/* checkpoint_load plus exactly n_opt optimizer copies per trainable tensor into opt (n_opt · m->n_params;
 * padding between tensors is left as it was); TB_EFORMAT naming the first missing or misshapen one. */
int checkpoint_load_state(const char *path, const struct model *m, float *params, float *buffers, float *opt,
                          int n_opt);

/* The path of step's checkpoint in dir: "<dir>/ckpt-<step, 10 digits>.safetensors". */
void checkpoint_dir_path(const char *dir, long step, char *out, size_t n);
/* The prefix of every file name the checkpointer writes in its directory (checkpoints and their temporary files). */
#define CHECKPOINT_NAME_PREFIX "ckpt-"
/* The step of a file name (no directory) that is a checkpoint's, "ckpt-<digits>.safetensors", else -1. */
long checkpoint_name_step(const char *name);
/* The steps of the complete checkpoints in dir, newest first, at most max into steps; *n receives the
 * count. Temporary files of a save (ckpt-*.safetensors.tmp.*) and other names are ignored. TB_EIO if dir
 * cannot be read. */
int checkpoint_dir_list(const char *dir, long *steps, int max, int *n);
/* Removes all but the newest keep checkpoints of dir, and temporary files that killed saves left. */
int checkpoint_dir_prune(const char *dir, int keep);
/* The lock file a running bench holds in a checkpoint folder it writes or resumes from. */
#define CHECKPOINT_LOCK_NAME ".bench.lock"
/* Takes the folder's lock for this process (held until *fd_out is closed, or the process ends): TB_OK with the fd
 * (-1 where the folder cannot be locked: not writable, no locks there), or TB_EIO naming dir and the pid of the
 * bench process that holds it. */
int checkpoint_dir_lock(const char *dir, int *fd_out);
/* Creates dir and its missing parents (mkdir -p); TB_EIO if that fails or dir is not a directory. */
int checkpoint_dir_create(const char *dir);

#endif
