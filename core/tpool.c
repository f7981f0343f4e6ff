/* tpool.c — persistent pinned worker pool: generation counter + futex wake, sense-reversing barrier. */
#define _GNU_SOURCE
#include "tpool.h"

#include "fpenv.h"
#include "status.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Spins this many pauses before sleeping: a barrier between kernels is usually crossed within
 * microseconds, but when another process holds a core the peer may be descheduled for a whole time
 * slice, and spinning (or sched_yield, which CFS barely honours) then burns the core the peer needs. */
#define BARRIER_SPIN 20000
/* With more threads than cores a waiter's peer is often not running at all: spinning then only
 * delays it, so an oversubscribed pool spins this little before it sleeps or yields. */
#define BARRIER_SPIN_OVERSUBSCRIBED 64

struct worker {
    struct tpool *p;
    int ith;
    pthread_t th;
};

struct tpool {
    int n;
    struct worker *w;
    void (*fn)(void *, int, int);
    void *arg;
    _Atomic unsigned gen;      /* bumped to start a task; futex word */
    _Atomic int pending;       /* workers still running the task */
    _Atomic int stop;
    struct tpool_barrier bar;
    int spin;                  /* pauses before sleeping: BARRIER_SPIN, less when oversubscribed */
    int pinned;                /* the creator was pinned: its mask before, put back by tpool_destroy */
    pthread_t creator;
    cpu_set_t creator_mask;
};

/* The cores this process may run on, in order: read once, before any pool pins its caller (whose own mask
 * then shrinks to one core). */
static int cpu_list[CPU_SETSIZE];
static int n_cpu_list;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void cpu_list_read(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpu_list[n_cpu_list++] = c;
    if (n_cpu_list == 0) {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (online > 0 ? online : 1) && c < CPU_SETSIZE; c++) cpu_list[n_cpu_list++] = (int)c;
    }
}

int tpool_cpus(void)
{
    pthread_once(&cpu_once, cpu_list_read);
    return n_cpu_list;
}

/* Pauses a waiter spins before it sleeps or yields, with `threads` threads sharing the cores. */
static int spin_for(int threads)
{
    return threads > tpool_cpus() ? BARRIER_SPIN_OVERSUBSCRIBED : BARRIER_SPIN;
}

/* Pins thread th to the ith core of the process's mask. */
static void pin_thread(pthread_t th, int ith)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu_list[ith % tpool_cpus()], &set);
    pthread_setaffinity_np(th, sizeof set, &set);
}

static void futex_wait(_Atomic unsigned *addr, unsigned val)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic unsigned *addr)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct tpool *p = w->p;
    unsigned seen = 0;
    fpenv_set();
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < p->spin) cpu_relax();
            else futex_wait(&p->gen, seen);
        }
        seen = g;
        if (atomic_load(&p->stop)) break;
        p->fn(p->arg, w->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
    return NULL;
}

struct tpool *tpool_create(int n_threads, int pin)
{
    TB_ASSERT(n_threads >= 1);
    struct tpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    p->spin = spin_for(n_threads);
    tpool_barrier_init(&p->bar, n_threads, n_threads);
    p->w = calloc((size_t)n_threads, sizeof *p->w);
    if (!p->w) goto fail;
    if (pin) {
        p->creator = pthread_self();
        p->pinned = pthread_getaffinity_np(p->creator, sizeof p->creator_mask, &p->creator_mask) == 0;
        pin_thread(p->creator, 0);
    }
    for (int i = 1; i < n_threads; i++) {
        p->w[i].p = p;
        p->w[i].ith = i;
        if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0) {
            p->n = i; /* destroy joins the ones that started */
            tpool_destroy(p);
            return NULL;
        }
        if (pin) pin_thread(p->w[i].th, i);
    }
    return p;
fail:
    free(p->w);
    free(p);
    return NULL;
}

void tpool_run(struct tpool *p, void (*fn)(void *, int, int), void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    futex_wake_all(&p->gen);
    fn(arg, 0, p->n);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0;)
        if (++spins < p->spin) cpu_relax();
        else sched_yield(); /* a descheduled worker needs this core more than we do */
}

void tpool_barrier_init(struct tpool_barrier *b, int n, int threads)
{
    atomic_store(&b->count, 0);
    atomic_store(&b->gen, 0u);
    atomic_store(&b->sleepers, 0);
    b->n = n;
    b->spin = spin_for(threads);
}

void tpool_barrier_wait(struct tpool_barrier *b)
{
    if (b->n <= 1) return;
    unsigned g = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == b->n - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        /* seq_cst bump, then seq_cst read of the sleepers (Dekker with the waiter below): either we see
         * its registration and wake it, or its futex_wait sees the new generation and returns. */
        atomic_fetch_add_explicit(&b->gen, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst) > 0) futex_wake_all(&b->gen);
    } else {
        int spins = 0;
        while (atomic_load_explicit(&b->gen, memory_order_acquire) == g) {
            if (++spins < b->spin) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&b->gen, memory_order_seq_cst) == g) futex_wait(&b->gen, g);
            atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_seq_cst);
        }
    }
}

void tpool_barrier(struct tpool *p) { tpool_barrier_wait(&p->bar); }

int tpool_size(const struct tpool *p) { return p->n; }

unsigned tpool_barriers(const struct tpool *p) { return atomic_load_explicit(&p->bar.gen, memory_order_relaxed); }

void tpool_destroy(struct tpool *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    futex_wake_all(&p->gen);
    for (int i = 1; i < p->n; i++) pthread_join(p->w[i].th, NULL);
    /* The creator runs on after its pool (evaluation, the next run of a suite, another test in the
     * process) on the cores it had: left on core 0, every test process of a ctest -j run crowded there. */
    if (p->pinned && pthread_equal(p->creator, pthread_self()))
        pthread_setaffinity_np(p->creator, sizeof p->creator_mask, &p->creator_mask);
    free(p->w);
    free(p);
}
