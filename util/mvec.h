/* mvec.h — glibc's libmvec, the vector log and cosine the normal draws take four at a time (x86-64 with GCC
 * or clang; the callers check AVX2 and FMA at run time and keep a scalar path). Within 4 ulp: never the scalar
 * functions' bits, so every caller keeps the exact draw where a result could differ (util/rng.c,
 * workloads/dataset_synthetic.c). */
#ifndef TB_MVEC_H
#define TB_MVEC_H

#if defined(__x86_64__) && defined(__GNUC__)
#define TB_HAVE_MVEC 1
#include <immintrin.h>
/* Four natural logarithms. */
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_log(__m256d x);
/* Four cosines. */
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_cos(__m256d x);
#endif

#endif
