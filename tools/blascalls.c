/* blascalls.c — what OpenBLAS's buffer allocator costs threads that call cblas_sgemm at once, as our kernels
 * do: T threads each run one single-threaded sgemm on a private tile, then meet at a spinning barrier, PHASES
 * times over. Each round runs the same phases in two child processes, TB_BLAS_BUFFERS=shared (OpenBLAS's
 * table under one mutex) then the default per-thread buffers (core/blas_buffers.c), and prints µs a phase
 * for each and their ratio; medians over rounds at the end. Shapes are tiles of the size a 16-core cut of
 * effnet-b0 hands its threads (larger than 100³ flops/2: OpenBLAS's small-matrix path takes no buffer).
 *
 *   make bench-blascalls                 (or build/blascalls [ROUNDS [THREADS...]]; threads default 1 and all cores)
 */
#define _GNU_SOURCE
#include "blas_buffers.h"
#include "blas_core.h"
#include "clock.h"
#include "stats.h"

#include <cblas.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PHASES = 2000 };

static const int shapes[][3] = {{128, 48, 192}, {256, 64, 144}, {512, 96, 576}}; /* m, n, k: m·n·k > 100³, past OpenBLAS's small-matrix path */

struct spin_barrier {
    atomic_int arrived;
    atomic_int generation;
    int n;
};

static void spin_wait(struct spin_barrier *b)
{
    int gen = atomic_load(&b->generation);
    if (atomic_fetch_add(&b->arrived, 1) == b->n - 1) {
        atomic_store(&b->arrived, 0);
        atomic_fetch_add(&b->generation, 1);
        return;
    }
    while (atomic_load(&b->generation) == gen) __builtin_ia32_pause();
}

struct worker {
    pthread_t tid;
    struct spin_barrier *bar;
    int m, n, k, phases;
    long allocs;
};

static void *work(void *p)
{
    struct worker *w = p;
    float *a = malloc(sizeof(float) * (size_t)w->m * (size_t)w->k);
    float *b = malloc(sizeof(float) * (size_t)w->k * (size_t)w->n);
    float *c = malloc(sizeof(float) * (size_t)w->m * (size_t)w->n);
    if (!a || !b || !c) {
        fprintf(stderr, "blascalls: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < (size_t)w->m * (size_t)w->k; i++) a[i] = (float)(i % 7) * 0.25f;
    for (size_t i = 0; i < (size_t)w->k * (size_t)w->n; i++) b[i] = (float)(i % 5) * 0.5f;
    for (int ph = 0; ph < w->phases; ph++) {
        spin_wait(w->bar);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, w->m, w->n, w->k, 1.0f, a, w->k, b, w->n, 0.0f, c, w->n);
    }
    spin_wait(w->bar);
    w->allocs = blas_buffers_thread_calls();
    free(a), free(b), free(c);
    return NULL;
}

/* One process, one mode: µs a phase for each shape on T threads, printed as one line. */
static int child(int threads)
{
    struct worker *w = calloc((size_t)threads, sizeof *w);
    if (!w) return 1;
    printf("%s %s", blas_buffers_mode(), openblas_get_corename());
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        struct spin_barrier bar = {0, 0, threads};
        int phases = PHASES / (q + 1) / (q + 1);
        for (int t = 0; t < threads; t++) {
            w[t] = (struct worker){.bar = &bar, .m = shapes[q][0], .n = shapes[q][1], .k = shapes[q][2], .phases = phases};
            if (t && pthread_create(&w[t].tid, NULL, work, &w[t]) != 0) {
                fprintf(stderr, "blascalls: cannot start a thread\n");
                return 1;
            }
        }
        long before = blas_buffers_thread_calls();
        double t0 = tb_now_s();
        work(&w[0]);
        double dt = tb_now_s() - t0;
        for (int t = 1; t < threads; t++) pthread_join(w[t].tid, NULL);
        if (w[0].allocs - before < phases) {
            fprintf(stderr, "blascalls: %dx%dx%d took %ld buffers in %d calls: not the path measured\n", shapes[q][0],
                    shapes[q][1], shapes[q][2], w[0].allocs - before, phases);
            return 1;
        }
        printf(" %.3f", 1e6 * dt / phases);
    }
    printf("\n");
    free(w);
    return 0;
}

static int run_side(const char *self, int threads, int shared, double *us)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        if (shared)
            setenv("TB_BLAS_BUFFERS", "shared", 1);
        else
            unsetenv("TB_BLAS_BUFFERS");
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        /* OpenBLAS falls back to Prescott kernels on CPUs it does not know; bench's --blas-core auto picks this. */
        const char *core = blas_core_for_level(cpu_isa_level());
        if (core) setenv("OPENBLAS_CORETYPE", core, 0);
        char tn[16];
        snprintf(tn, sizeof tn, "%d", threads);
        execl(self, self, "--child", tn, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char line[256] = {0};
    FILE *f = fdopen(fd[0], "r");
    int ok = f && fgets(line, sizeof line, f) != NULL;
    if (f) fclose(f);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    char mode[32], core[64];
    int got = sscanf(line, "%31s %63s %lf %lf %lf", mode, core, &us[0], &us[1], &us[2]);
    static int told;
    if (!told++) printf("OpenBLAS runs its %s kernels\n", core);
    if (got != 5 || strcmp(mode, shared ? "shared" : "per-thread") != 0) {
        fprintf(stderr, "blascalls: the %s side ran as '%s'\n", shared ? "shared" : "per-thread", mode);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(atoi(argv[2]));
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    if (rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: blascalls [ROUNDS 1-100 [THREADS...]]\n");
        return 2;
    }
    int tlist[16], nt = 0;
    for (int i = 2; i < argc && nt < 16; i++) {
        tlist[nt] = atoi(argv[i]);
        if (tlist[nt] < 1 || tlist[nt] > 1024) {
            fprintf(stderr, "blascalls: '%s' is not a thread count (1-1024)\n", argv[i]);
            return 2;
        }
        nt++;
    }
    if (!nt) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        tlist[nt++] = 1;
        if (cores > 1) tlist[nt++] = (int)cores;
    }
    const int NS = sizeof shapes / sizeof *shapes;
    printf("µs a phase (T threads, one sgemm each, then a barrier); A: TB_BLAS_BUFFERS=shared, B: per-thread\n"
           "children run with OPENBLAS_NUM_THREADS=1 and the kernel set bench's --blas-core auto picks\n");
    for (int ti = 0; ti < nt; ti++) {
        double *ratio = calloc((size_t)rounds * NS, sizeof *ratio);
        double *a_us = calloc((size_t)rounds * NS, sizeof *a_us), *b_us = calloc((size_t)rounds * NS, sizeof *b_us);
        if (!ratio || !a_us || !b_us) return 1;
        for (int r = 0; r < rounds; r++) {
            double a[3], b[3];
            if (run_side("/proc/self/exe", tlist[ti], 1, a) || run_side("/proc/self/exe", tlist[ti], 0, b)) {
                fprintf(stderr, "blascalls: a child failed\n");
                return 1;
            }
            printf("T=%-3d round %d", tlist[ti], r + 1);
            for (int q = 0; q < NS; q++) {
                printf("  %dx%dx%d A %8.2f B %8.2f", shapes[q][0], shapes[q][1], shapes[q][2], a[q], b[q]);
                a_us[q * rounds + r] = a[q], b_us[q * rounds + r] = b[q], ratio[q * rounds + r] = b[q] / a[q];
            }
            printf("\n");
        }
        for (int q = 0; q < NS; q++) {
            printf("T=%-3d %dx%dx%d median µs a phase: shared %.2f, per-thread %.2f, B/A %.3f\n", tlist[ti], shapes[q][0],
                   shapes[q][1], shapes[q][2], stats_percentile(a_us + q * rounds, rounds, 50),
                   stats_percentile(b_us + q * rounds, rounds, 50), stats_percentile(ratio + q * rounds, rounds, 50));
        }
        free(ratio), free(a_us), free(b_us);
    }
    return 0;
}
