/* rng.c — counter-based hashing (SplitMix64 finaliser chained over the key). */
#include "rng.h"

#include <math.h>

uint64_t rng_key(uint64_t seed, uint64_t stream)
{
    return rng_mix64(rng_mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (stream + 0x632be59bd9b4e019ULL));
}

uint64_t rng_hash(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_hash_keyed(rng_key(seed, stream), counter);
}

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_uniform_keyed(rng_key(seed, stream), counter);
}

double rng_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_normal_keyed(rng_key(seed, stream), counter);
}

double rng_normal_keyed(uint64_t key, uint64_t counter)
{
    uint64_t h1 = rng_hash_keyed(key, 2 * counter);
    uint64_t h2 = rng_hash_keyed(key, 2 * counter + 1);
    double u1 = ((double)(h1 >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0,1] */
    double u2 = (double)(h2 >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n)
{
    /* Lemire's multiply-shift with rejection; re-draws use a derived counter. */
    uint64_t x = rng_hash(seed, stream, counter);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        uint64_t k = 1;
        while (l < t) {
            x = rng_hash(seed ^ (k++ * 0x9e3779b97f4a7c15ULL), stream, counter);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

void rng_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t stream)
{
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)rng_below(seed, stream, i, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}
