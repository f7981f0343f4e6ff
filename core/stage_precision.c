/* stage_precision.c — bf16 by bit manipulation, fp16 through the compiler's _Float16 (F16C when the
 * target has it); stochastic rounding with rng_hash (see stage_precision.h). */
#include "stage_precision.h"

#include "rng.h"

#include <float.h>
#include <math.h>
#include <string.h>

#ifndef __FLT16_MAX__
#error "stage_precision.c needs the compiler's _Float16 (gcc >= 12 on x86-64)"
#endif

size_t stage_prec_bytes(enum stage_prec p) { return p == STAGE_PREC_FP32 ? 4 : 2; }

const char *stage_prec_name(enum stage_prec p)
{
    return p == STAGE_PREC_BF16 ? "bf16" : p == STAGE_PREC_FP16 ? "fp16" : "fp32";
}

int stage_prec_parse(const char *s, enum stage_prec *p, int *master)
{
    static const struct {
        const char *name;
        enum stage_prec p;
        int master;
    } names[] = {{"", STAGE_PREC_FP32, 0},    {"fp32", STAGE_PREC_FP32, 0}, {"bf16", STAGE_PREC_BF16, 0},
                 {"bf16m", STAGE_PREC_BF16, 1}, {"fp16", STAGE_PREC_FP16, 0}, {"fp16m", STAGE_PREC_FP16, 1}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (strcmp(s, names[k].name) == 0) {
            *p = names[k].p, *master = names[k].master;
            return 0;
        }
    return -1;
}

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Branch-free (a select, not a jump) so the loops over activations vectorise. */
static inline uint16_t bf16_rne(float f)
{
    const uint32_t u = f2u(f);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r); /* NaN stays a quiet NaN */
}

/* One chunk of stage_prec_pack (n < 2^32): the count is 32-bit so that it stays in the vector lanes. */
static unsigned pack_chunk(void *dst, const float *src, size_t n, enum stage_prec p, float scale)
{
    /* Non-finite results counted by a compare, not a branch, so the loops vectorise. */
    const float max = p == STAGE_PREC_FP16 ? 65504.0f : FLT_MAX;
    unsigned bad = 0;
    switch (p) {
    case STAGE_PREC_FP32: {
        float *d = dst;
        if (scale == 1.0f) { /* checkpoints and the fp32 exchange: a copy, the values as they are */
            memcpy(d, src, n * sizeof(float));
            break;
        }
        for (size_t i = 0; i < n; i++) {
            d[i] = src[i] * scale;
            bad += !(fabsf(d[i]) <= max);
        }
        break;
    }
    case STAGE_PREC_BF16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) {
            d[i] = bf16_rne(src[i] * scale);
            bad += (d[i] & 0x7f80u) == 0x7f80u; /* an all-ones exponent: inf or NaN */
        }
        break;
    }
    case STAGE_PREC_FP16: {
        _Float16 *d = dst;
        for (size_t i = 0; i < n; i++) {
            d[i] = (_Float16)(src[i] * scale);
            bad += !(fabsf((float)d[i]) <= max); /* only what became inf (or was NaN) counts */
        }
        break;
    }
    }
    return bad;
}

/* One chunk of stage_prec_unpack (n < 2^32). */
static unsigned unpack_chunk(float *dst, const void *src, size_t n, enum stage_prec p, float inv_scale)
{
    unsigned bad = 0;
    switch (p) {
    case STAGE_PREC_FP32: {
        const float *s = src;
        for (size_t i = 0; i < n; i++) {
            dst[i] = s[i] * inv_scale;
            bad += !(fabsf(dst[i]) <= FLT_MAX);
        }
        break;
    }
    case STAGE_PREC_BF16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) {
            dst[i] = u2f((uint32_t)s[i] << 16) * inv_scale;
            bad += !(fabsf(dst[i]) <= FLT_MAX);
        }
        break;
    }
    case STAGE_PREC_FP16: {
        const _Float16 *s = src;
        for (size_t i = 0; i < n; i++) {
            dst[i] = (float)s[i] * inv_scale;
            bad += !(fabsf(dst[i]) <= FLT_MAX);
        }
        break;
    }
    }
    return bad;
}

#define CHUNK ((size_t)1 << 30)

size_t stage_prec_pack(void *dst, const float *src, size_t n, enum stage_prec p, float scale)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i += CHUNK)
        bad += pack_chunk((char *)dst + i * stage_prec_bytes(p), src + i, n - i < CHUNK ? n - i : CHUNK, p, scale);
    return bad;
}

size_t stage_prec_unpack(float *dst, const void *src, size_t n, enum stage_prec p, float inv_scale)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i += CHUNK)
        bad += unpack_chunk(dst + i, (const char *)src + i * stage_prec_bytes(p), n - i < CHUNK ? n - i : CHUNK, p,
                            inv_scale);
    return bad;
}

/* Stochastic rounding of a finite x onto fp16's grid: the spacing at |x| is 2^(e-11) for normals
 * (|x| = m·2^e, m in [0.5,1)) and 2^-24 below 2^-14; the value below is exact in fp32. */
static float fp16_sr(float x, uint64_t r)
{
    const float a = fabsf(x);
    int e;
    frexpf(a, &e);
    const float ulp = e - 1 < -14 ? 0x1p-24f : ldexpf(1.0f, e - 11);
    const float q = a / ulp, lo = floorf(q);
    const float u = (float)(r >> 40) * (1.0f / 16777216.0f);
    float v = (lo + (u < q - lo ? 1.0f : 0.0f)) * ulp;
    if (v > 65504.0f) v = INFINITY;
    return copysignf(v, x);
}

void stage_prec_round(float *x, size_t n, enum stage_prec p, int stochastic, uint64_t seed, long step,
                    size_t first_index)
{
    if (p == STAGE_PREC_FP32) return;
    if (!stochastic) { /* every activation goes through here: keep the loops branch-free */
        if (p == STAGE_PREC_BF16)
            for (size_t i = 0; i < n; i++) x[i] = u2f((uint32_t)bf16_rne(x[i]) << 16);
        else
            for (size_t i = 0; i < n; i++) x[i] = (float)(_Float16)x[i];
        return;
    }
    /* Counter: the step in the high bits, the value's global index in the low 36. */
    const uint64_t base = (uint64_t)step << 36, key = rng_key(seed, RNG_STREAM_ROUNDING);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        const uint64_t r = rng_hash_keyed(key, base + first_index + i);
        if (p == STAGE_PREC_BF16) {
            /* Adding 16 random bits below the kept mantissa then truncating rounds up with
             * probability equal to the dropped fraction. */
            uint32_t u = f2u(x[i]) + (uint32_t)(r & 0xffffu);
            x[i] = u2f(u & 0xffff0000u);
        } else {
            x[i] = fp16_sr(x[i], r);
        }
    }
}
