/* ipu_precision.h — half-precision storage for the ipu backend: bf16 and fp16 conversions of the
 * tensors that cross the exchange, and rounding of weights onto a half-precision grid (to nearest, or
 * stochastically with counter-based randomness so every replica rounds identically).
 *
 * Storage only: every kernel still computes in fp32. The ipu backend keeps weights, stored
 * activations and the exchange in 2-byte values and decodes them around each layer; rounding to
 * nearest first puts a value on the grid, so packing it is then lossless. Pure functions on
 * caller-owned buffers; thread-safe.
 */
#ifndef TB_IPU_PRECISION_H
#define TB_IPU_PRECISION_H

#include <stddef.h>
#include <stdint.h>

enum ipu_prec { IPU_PREC_FP32, IPU_PREC_BF16, IPU_PREC_FP16 };

/* Bytes per stored value (4 or 2). */
size_t ipu_prec_bytes(enum ipu_prec p);
/* Name ("fp32", "bf16", "fp16"). */
const char *ipu_prec_name(enum ipu_prec p);
/* dst (n values of p) = src (n) · scale, rounded to nearest even; fp16 overflows become ±inf. Returns
 * how many stored values are not finite (fp32 at scale 1 is a plain copy and counts none). */
size_t ipu_prec_pack(void *dst, const float *src, size_t n, enum ipu_prec p, float scale);
/* dst (n) = src (n values of p) · inv_scale; returns how many values were not finite (fp16 overflow). */
size_t ipu_prec_unpack(float *dst, const void *src, size_t n, enum ipu_prec p, float inv_scale);
/* Rounds x (n) in place onto p's grid: to nearest even, or stochastically (round up with probability
 * equal to the distance from the value below, in ulps) with randomness keyed by (seed, step,
 * first_index + i), so the result depends on a value's global position, never on who rounds it. */
void ipu_prec_round(float *x, size_t n, enum ipu_prec p, int stochastic, uint64_t seed, long step,
                    size_t first_index);

#endif
