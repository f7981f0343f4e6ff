/* rng.h — counter-based randomness.
 *
 * Every random number is a pure function of (seed, stream, counter): no generator state crosses
 * threads, devices, or steps, so a backend that splits a batch differently draws the same numbers
 * for the same sample. Used for init, shuffling, dropout, drop-connect, augmentation, stochastic
 * rounding and synthetic data.
 */
#ifndef TB_RNG_H
#define TB_RNG_H

#include <stddef.h>
#include <stdint.h>

/* SplitMix64's finaliser. */
static inline uint64_t rng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* Returns a 64-bit hash of (seed, stream, counter); a strong mixer (SplitMix64 finaliser, chained). */
uint64_t rng_hash(uint64_t seed, uint64_t stream, uint64_t counter);
/* The (seed, stream) half of rng_hash, for loops that draw many counters of one stream. */
uint64_t rng_key(uint64_t seed, uint64_t stream);
/* rng_hash(seed, stream, counter) from key = rng_key(seed, stream): the same bits for one mix instead
 * of three, inline so that per-element loops (stochastic rounding, dropout) stay in registers. */
static inline uint64_t rng_hash_keyed(uint64_t key, uint64_t counter)
{
    return rng_mix64(key ^ (counter * 0xd1b54a32d192ed03ULL + 0x8cb92ba72f3d8dd7ULL));
}
/* rng_uniform from a key (see rng_hash_keyed). */
static inline float rng_uniform_keyed(uint64_t key, uint64_t counter)
{
    return (float)(rng_hash_keyed(key, counter) >> 40) * (1.0f / 16777216.0f);
}
/* Returns a uniform float in [0,1) with 24 random bits for (seed, stream, counter). */
float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);
/* Box–Muller's two uniforms for draw `counter` of a key: u1 in (0,1], u2 in [0,1). */
static inline void rng_box_muller_uniforms(uint64_t key, uint64_t counter, double *u1, double *u2)
{
    *u1 = ((double)(rng_hash_keyed(key, 2 * counter) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    *u2 = (double)(rng_hash_keyed(key, 2 * counter + 1) >> 11) * (1.0 / 9007199254740992.0);
}
/* Returns a standard normal double (Box–Muller) for (seed, stream, counter). */
double rng_normal(uint64_t seed, uint64_t stream, uint64_t counter);
/* rng_normal from a key (see rng_hash_keyed): the same bits, without re-deriving the key each draw. */
double rng_normal_keyed(uint64_t key, uint64_t counter);
/* dst[i] = (float)(scale · rng_normal_keyed(key, counter0 + i)) for i < n, bit for bit, several draws a
 * call where the CPU has AVX2 (libmvec's log and cosine, the exact draw wherever the float could differ). */
void rng_normal_fill(uint64_t key, uint64_t counter0, double scale, float *dst, size_t n);
/* Returns a uniform integer in [0, n) for (seed, stream, counter), without modulo bias. */
uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n);
/* Fills perm[0..n) with a permutation of 0..n-1 determined by (seed, stream) (Fisher–Yates). */
void rng_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t stream);

/* Named streams, so independent uses never collide. */
enum rng_stream {
    RNG_STREAM_INIT = 1,
    RNG_STREAM_SHUFFLE = 2,
    RNG_STREAM_DROPOUT = 3,
    RNG_STREAM_DROPCONNECT = 4,
    RNG_STREAM_AUGMENT = 5,
    RNG_STREAM_ROUNDING = 6,
    RNG_STREAM_SYNTHETIC = 7,
};

#endif
