/* test_blas_buffers.c — OpenBLAS takes its packing buffers from core/blas_buffers.c: the executable exports the
 * allocator (mode "per-thread", or "shared" under TB_BLAS_BUFFERS=shared, which ctest runs as
 * test_blas_buffers_shared), sgemms from several threads at once give the bits one thread gives and go through
 * it, and its slots are reused by their thread, freed from any thread, and nested past the slots. */
#include "test_util.h"

#include <criterion/criterion.h>

#include "blas_buffers.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

static int shared_side(void)
{
    const char *e = getenv("TB_BLAS_BUFFERS");
    return e && strcmp(e, "shared") == 0;
}

Test(blas_buffers, the_executable_serves_openblas)
{
    cr_assert_str_eq(blas_buffers_mode(), shared_side() ? "shared" : "per-thread");
}

/* m·n·k past 100³: OpenBLAS's small-matrix kernels (SkylakeX) take no buffer. */
enum { M = 160, N = 72, K = 200, CALLS = 6, THREADS = 4 };

struct gemm_job {
    const float *a, *b;
    float c[CALLS][M * N];
    long allocs;
};

static void *run_gemms(void *p)
{
    struct gemm_job *j = p;
    long before = blas_buffers_thread_calls();
    for (int r = 0; r < CALLS; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, r % 2 ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, j->a, K, j->b,
                    r % 2 ? K : N, 0.0f, j->c[r], N);
    j->allocs = blas_buffers_thread_calls() - before;
    return NULL;
}

Test(blas_buffers, threads_at_once_give_one_threads_bits, .timeout = 60)
{
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    cr_assert(a && b);
    for (int i = 0; i < M * K; i++) a[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
    static struct gemm_job one, many[THREADS];
    one.a = a, one.b = b;
    run_gemms(&one);
    /* The reference: a plain triple loop in double, for the untransposed calls. */
    for (int i = 0; i < M; i += 17)
        for (int n = 0; n < N; n += 5) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * N + n];
            cr_assert_float_eq(one.c[0][i * N + n], s, 1e-3, "c[%d,%d]", i, n);
        }
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        many[t].a = a, many[t].b = b;
        cr_assert_eq(pthread_create(&tid[t], NULL, run_gemms, &many[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    for (int t = 0; t < THREADS; t++) {
        cr_assert_eq(memcmp(many[t].c, one.c, sizeof one.c), 0, "thread %d's products differ from one thread's", t);
        /* Every call asked this allocator for its buffer (the shared side forwards each to OpenBLAS's table). */
        cr_assert_eq(many[t].allocs, CALLS, "thread %d asked for %ld buffers", t, many[t].allocs);
    }
    free(a), free(b);
}

static void *alloc_one(void *p)
{
    *(void **)p = blas_memory_alloc(0);
    return NULL;
}

Test(blas_buffers, slots_reused_freed_anywhere_and_nested)
{
    if (shared_side()) cr_skip_test("OpenBLAS's own table serves these calls (TB_BLAS_BUFFERS=shared)");
    char *p = blas_memory_alloc(0);
    memset(p, 1, 1 << 20); /* a buffer is writable well past a page */
    blas_memory_free(p);
    cr_assert_eq(blas_memory_alloc(0), p, "a thread gets its own buffer back");
    /* Nested: more than the slots a thread keeps, all distinct and writable, all given back. */
    char *held[6];
    held[0] = p;
    for (int k = 1; k < 6; k++) {
        held[k] = blas_memory_alloc(0);
        for (int q = 0; q < k; q++) cr_assert_neq(held[k], held[q]);
        held[k][0] = held[k][4095] = (char)k;
    }
    for (int k = 5; k >= 0; k--) blas_memory_free(held[k]);
    cr_assert_eq(blas_memory_alloc(0), p, "the first slot again after the nest");
    blas_memory_free(p);
    /* A buffer another thread took and still held as it exited: this thread's free unmaps it, its own set untouched. */
    void *theirs = NULL;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_one, &theirs), 0);
    pthread_join(t, NULL);
    cr_assert(theirs && theirs != p);
    blas_memory_free(theirs);
    cr_assert_eq(blas_memory_alloc(0), p);
    blas_memory_free(p);
}
