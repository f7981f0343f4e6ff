/* membw.c — the memory floor of the batch-1 Adam update: each of `threads` pinned threads streams
 * its share of three float arrays (weights and Adam's two moments) through loads, a few FMAs and
 * stores, as the update does, with a barrier per pass (a training step). The best pass is the
 * fastest any update of that many parameters could be on this machine.
 *
 *   make membw [PARAMS=167690] [THREADS=2]
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { PASSES = 3000 };

struct arg {
    int ith;
    size_t n; /* this thread's floats per array (a multiple of 8) */
    double best;
};

static pthread_barrier_t bar;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *run(void *p)
{
    struct arg *a = p;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(a->ith, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    float *w = aligned_alloc(64, a->n * 4), *m = aligned_alloc(64, a->n * 4), *v = aligned_alloc(64, a->n * 4);
    if (!w || !m || !v) abort();
    for (size_t i = 0; i < a->n; i++) w[i] = 1.0f, m[i] = 0.1f, v[i] = 0.01f;
    const __m256 b1 = _mm256_set1_ps(0.9f), b2 = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    a->best = 1e30;
    for (int it = 0; it < PASSES; it++) {
        pthread_barrier_wait(&bar);
        const double t0 = now_s();
        for (size_t i = 0; i < a->n; i += 8) {
            __m256 wi = _mm256_load_ps(w + i), mi = _mm256_load_ps(m + i), vi = _mm256_load_ps(v + i);
            mi = _mm256_fmadd_ps(mi, b1, c);
            vi = _mm256_fmadd_ps(vi, b2, c);
            wi = _mm256_fmadd_ps(mi, vi, wi);
            _mm256_store_ps(w + i, wi);
            _mm256_store_ps(m + i, mi);
            _mm256_store_ps(v + i, vi);
        }
        const double t = now_s() - t0;
        if (t < a->best) a->best = t;
    }
    free(w), free(m), free(v);
    return NULL;
}

int main(int argc, char **argv)
{
    const long params = argc > 1 ? atol(argv[1]) : 167690; /* mnist-mlp */
    const int nth = argc > 2 ? atoi(argv[2]) : 2;
    if (params < 8 || nth < 1 || nth > 256) {
        fprintf(stderr, "usage: membw [PARAMS ≥ 8] [THREADS in 1..256]\n");
        return 2;
    }
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    pthread_t th[256];
    struct arg a[256];
    for (int i = 0; i < nth; i++) {
        a[i] = (struct arg){i, ((size_t)params / (size_t)nth + 7) & ~(size_t)7, 0.0};
        pthread_create(&th[i], NULL, run, &a[i]);
    }
    double worst = 0.0;
    for (int i = 0; i < nth; i++) {
        pthread_join(th[i], NULL);
        if (a[i].best > worst) worst = a[i].best;
    }
    const double bytes = 6.0 * 4.0 * (double)a[0].n * nth; /* 3 arrays read and written */
    printf("membw: %ld parameters × (weight, m, v) on %d threads: best pass %.1f µs (slowest thread), "
           "%.0f GB/s read+write; %.2f s per 100,000 steps\n",
           params, nth, worst * 1e6, bytes / worst / 1e9, worst * 1e5);
    return 0;
}
