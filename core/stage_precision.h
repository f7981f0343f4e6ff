/* stage_precision.h — half-precision storage for stage executors (executor_config.prec) and the
 * exchanges between them: bf16 and fp16 conversions of the tensors that cross a split, and rounding of
 * weights onto a half-precision grid (to nearest, or stochastically with counter-based randomness so
 * every replica rounds identically).
 *
 * Storage only: every kernel still computes in fp32. A half-precision stage executor keeps weights,
 * gradients and stored activations in 2-byte values and decodes them around each layer; rounding to
 * nearest first puts a value on the grid, so packing it is then lossless. Pure functions on
 * caller-owned buffers; thread-safe.
 */
#ifndef TB_STAGE_PRECISION_H
#define TB_STAGE_PRECISION_H

#include <stddef.h>
#include <stdint.h>

enum stage_prec { STAGE_PREC_FP32, STAGE_PREC_BF16, STAGE_PREC_FP16 };

/* Bytes per stored value (4 or 2). */
size_t stage_prec_bytes(enum stage_prec p);
/* Name ("fp32", "bf16", "fp16"). */
const char *stage_prec_name(enum stage_prec p);
/* Parses --precision: "fp32" or "" (fp32), "bf16", "fp16", and "bf16m", "fp16m" (*master = 1: fp32 master
 * weights); 0, or -1 for any other string (p and master untouched). */
int stage_prec_parse(const char *s, enum stage_prec *p, int *master);
/* dst (n values of p) = src (n) · scale, rounded to nearest even; fp16 overflows become ±inf. Returns
 * how many stored values are not finite (fp32 at scale 1 is a plain copy and counts none). */
size_t stage_prec_pack(void *dst, const float *src, size_t n, enum stage_prec p, float scale);
/* dst (n) = src (n values of p) · inv_scale; returns how many values were not finite (fp16 overflow). */
size_t stage_prec_unpack(float *dst, const void *src, size_t n, enum stage_prec p, float inv_scale);
/* Rounds x (n) in place onto p's grid: to nearest even, or stochastically (round up with probability
 * equal to the distance from the value below, in ulps) with randomness keyed by (seed, step,
 * first_index + i), so the result depends on a value's global position, never on who rounds it. */
void stage_prec_round(float *x, size_t n, enum stage_prec p, int stochastic, uint64_t seed, long step,
                    size_t first_index);

#endif
