/* membw.c — the memory floor of the batch-1 Adam update: each of `threads` pinned threads streams
 * its share of three float arrays (weights and Adam's two moments) through loads, a few FMAs and
 * stores, as the update does, with a barrier per pass (a training step). A pass takes as long as its
 * slowest thread; the best pass (the fastest such pass) is the fastest any update of that many
 * parameters could be on this machine.
 *
 * Not a measure of oversubscription: each thread needs a CPU of its own (threads beyond the CPUs this
 * process may use are refused), since time-sliced threads each get their passes alone and add up to
 * bandwidths no memory has. Arrays are allocated by main and first touched by the thread that streams
 * them; each thread writes only its own time slot of each pass.
 *
 *   make membw [PARAMS=167690] [THREADS=2]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { PASSES = 3000 };

struct arg {
    size_t n;     /* this thread's floats per array (a multiple of 8) */
    float *w;     /* (n) weights, 64-byte aligned */
    float *m;     /* (n) first moments */
    float *v;     /* (n) second moments */
    double *secs; /* (PASSES) this thread's time of each pass */
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
    float *w = a->w, *m = a->m, *v = a->v;
    for (size_t i = 0; i < a->n; i++) w[i] = 1.0f, m[i] = 0.1f, v[i] = 0.01f;
    const __m256 b1 = _mm256_set1_ps(0.9f), b2 = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
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
        a->secs[it] = now_s() - t0;
    }
    return NULL;
}

/* A whole decimal number in [lo, hi], nothing else (no sign, blanks or suffix); 0 when it is not one. */
static int parse_count(const char *s, long long lo, long long hi, long long *out)
{
    if (s[0] < '0' || s[0] > '9') return 0;
    char *end;
    errno = 0;
    const long long x = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0' || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

int main(int argc, char **argv)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        perror("membw: sched_getaffinity");
        return 1;
    }
    const int n_cpus = CPU_COUNT(&allowed);
    /* Three float arrays of PARAMS each must fit in this machine's memory (which also keeps every size
     * below from overflowing). */
    const long long phys = (long long)sysconf(_SC_PHYS_PAGES) * (long long)sysconf(_SC_PAGESIZE);
    const long long max_params = phys > 0 ? phys / 12 : (1LL << 30);
    if (argc > 3) {
        fprintf(stderr, "usage: membw [PARAMS in 8..%lld] [THREADS in 1..%d]\n", max_params, n_cpus);
        return 2;
    }
    long long params = 167690, nth = 2 < n_cpus ? 2 : n_cpus; /* mnist-mlp */
    if (argc > 1 && !parse_count(argv[1], 8, max_params, &params)) {
        fprintf(stderr, "membw: PARAMS '%s' is not a whole number in 8..%lld (three float arrays of it must fit "
                "in this machine's %.1f GiB)\n", argv[1], max_params, (double)phys / 1073741824.0);
        return 2;
    }
    if (argc > 2 && !parse_count(argv[2], 1, n_cpus, &nth)) {
        fprintf(stderr, "membw: THREADS '%s' is not a whole number in 1..%d, the CPUs this process may use "
                "(threads sharing a CPU each get their passes alone)\n", argv[2], n_cpus);
        return 2;
    }
    const size_t n = ((size_t)params / (size_t)nth + 7) & ~(size_t)7;
    const size_t n_bytes = (n * 4 + 63) & ~(size_t)63; /* C11's aligned_alloc takes whole multiples of 64 */
    pthread_t *th = calloc((size_t)nth, sizeof *th);
    struct arg *a = calloc((size_t)nth, sizeof *a);
    double *secs = calloc((size_t)nth * PASSES, sizeof *secs);
    if (!th || !a || !secs) {
        fprintf(stderr, "membw: out of memory\n");
        return 1;
    }
    for (long long i = 0; i < nth; i++) {
        a[i] = (struct arg){n, aligned_alloc(64, n_bytes), aligned_alloc(64, n_bytes), aligned_alloc(64, n_bytes),
                            secs + i * PASSES};
        if (!a[i].w || !a[i].m || !a[i].v) {
            fprintf(stderr, "membw: cannot allocate 3 x %zu floats for thread %lld\n", n, i);
            return 1;
        }
    }
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    /* Thread i on the i-th CPU this process may use (not CPU i: the allowed set need not start at 0). */
    int cpu = -1;
    for (long long i = 0; i < nth; i++) {
        do {
            cpu++;
        } while (!CPU_ISSET(cpu, &allowed));
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        int e = pthread_attr_setaffinity_np(&attr, sizeof one, &one);
        if (e == 0) e = pthread_create(&th[i], &attr, run, &a[i]);
        pthread_attr_destroy(&attr);
        if (e != 0) {
            /* The threads already started would wait at the barrier for ever: end the process here. */
            fprintf(stderr, "membw: cannot start thread %lld on CPU %d: error %d\n", i, cpu, e);
            return 1;
        }
    }
    for (long long i = 0; i < nth; i++) pthread_join(th[i], NULL);
    /* A pass is over when its slowest thread is: the best pass is the minimum over passes of that maximum,
     * never one thread's best pass set beside another's from a different pass. */
    double best = 1e30;
    for (int it = 0; it < PASSES; it++) {
        double slowest = 0.0;
        for (long long i = 0; i < nth; i++)
            if (secs[i * PASSES + it] > slowest) slowest = secs[i * PASSES + it];
        if (slowest < best) best = slowest;
    }
    const double bytes = 6.0 * 4.0 * (double)n * (double)nth; /* 3 arrays read and written */
    printf("membw: %lld parameters × (weight, m, v) on %lld thread%s: best pass %.1f µs (of %d passes, each as "
           "long as its slowest thread), %.0f GB/s read+write; %.2f s per 100,000 steps\n",
           params, nth, nth == 1 ? "" : "s", best * 1e6, PASSES, bytes / best / 1e9, best * 1e5);
    for (long long i = 0; i < nth; i++) free(a[i].w), free(a[i].m), free(a[i].v);
    free(th), free(a), free(secs);
    pthread_barrier_destroy(&bar);
    return 0;
}
