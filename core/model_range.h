/* model_range.h — a contiguous range of a model's layers as a plan of its own: the tensors crossing a
 * split placed before a layer (what a pipeline stage imports and exports, packed), and a copy of the
 * model whose tensor table gives activation offsets only to the tensors a layer range touches, so that
 * an activation slot of a stage or a recomputation segment holds just that range.
 *
 * Pure planning on the model's tables: no kernels, no threads; the copies share the source's layers and
 * parameter table (read-only) and own only their tensor table.
 */
#ifndef TB_MODEL_RANGE_H
#define TB_MODEL_RANGE_H

#include "model.h"

#include <stddef.h>

/* Tensors crossing a split placed before layer `split` (produced before it, read at or after it; never
 * the uint8 input), in ascending id order: writes up to max_ids ids, returns the count. */
int model_boundary_tensors(const struct model *m, int split, int *ids, int max_ids);
/* Floats of a packed boundary buffer for n samples at `split` (each tensor n·per_sample floats at a
 * 16-float-aligned offset); grads = 1 counts only the tensors that need a gradient. */
size_t model_boundary_floats(const struct model *m, int split, int n, int grads);
/* First parameter (buffers = 0) or buffer (buffers = 1) offset owned by a layer ≥ split; the family's
 * size when none: where a range's slice of the canonical layout ends. TB_ASSERTs the table is in layer
 * order (model_add_param follows model_add_layer). */
size_t model_range_first_offset(const struct model *m, int split, int buffers);
/* [*a,*b): the slice of the canonical parameters (buffers = 0) or buffers (buffers = 1) that layers
 * [l0,l1) own, what a stage executor of that range holds. */
void model_range_slice(const struct model *m, int l0, int l1, int buffers, size_t *a, size_t *b);
/* Activation floats a range plan of layers [l0,l1) needs for n samples (what model_range_init gives);
 * work is scratch of m->n_tensors bytes. */
size_t model_range_act_floats(const struct model *m, int l0, int l1, int n, char *work);
/* Makes dst a copy of src whose tensor table places only the tensors layers [l0,l1) touch (outputs,
 * inputs, saved data, the tensors crossing either end); TB_ENOMEM with a message on failure. */
int model_range_init(struct model *dst, const struct model *src, int l0, int l1);
/* Frees what model_range_init made (safe on a zeroed copy). */
void model_range_free(struct model *m);

#endif
