/* tpool.h — a persistent pool of pinned worker threads running fn(arg, ith, nth), with a barrier: the
 * cpu executor's threads (executor_cpu.c), and the device workers of the mirrored and ipu schedules.
 *
 * Created once per engine; tpool_run wakes every worker (the caller is thread 0), runs the task and
 * returns when all are done. Workers spin briefly on a generation counter, then sleep on a futex, so
 * back-to-back tasks cost well under a microsecond while an idle pool burns no CPU. tpool_barrier may
 * be called from inside a task (by all nth threads) to separate dependent phases. One task at a time.
 */
#ifndef TB_TPOOL_H
#define TB_TPOOL_H

struct tpool;

/* A generation barrier for n threads — the pool's own, or any fixed subset of a pool's threads (the
 * replicas of one pipeline stage): spins briefly, then sleeps on a futex. Set up by
 * tpool_barrier_init before any thread waits; reusable at once. */
struct tpool_barrier {
    _Atomic int count;
    _Atomic unsigned gen;      /* futex word */
    _Atomic int sleepers;      /* threads asleep (or about to sleep) on gen */
    int n;
    int spin;                  /* pauses before sleeping */
};

/* Sets up b for n waiters among `threads` threads sharing the cores (more than the cores: spin less). */
void tpool_barrier_init(struct tpool_barrier *b, int n, int threads);
/* Waits until all n threads reach b. */
void tpool_barrier_wait(struct tpool_barrier *b);

/* Cores this process may run on: its affinity mask when first asked (taskset, mpirun's --bind-to/PE=,
 * a cgroup's cpuset), else the online cores. The default thread and device counts. */
int tpool_cpus(void);
/* Creates a pool of n_threads (≥ 1) threads, the caller included; when pin, thread i runs on the
 * (i mod tpool_cpus())-th core of that mask, so ranks bound to disjoint cores keep their pools apart. */
struct tpool *tpool_create(int n_threads, int pin);
/* Runs fn(arg, ith, nth) on every thread and waits for all. */
void tpool_run(struct tpool *p, void (*fn)(void *arg, int ith, int nth), void *arg);
/* Waits until all nth threads of the running task reach it. */
void tpool_barrier(struct tpool *p);
/* Number of threads, the caller included. */
int tpool_size(const struct tpool *p);
/* Barriers the pool's threads have completed together (tpool_barrier), mod 2^32: a difference of two reads
 * counts those between them. */
unsigned tpool_barriers(const struct tpool *p);
/* Stops and joins the workers (NULL is fine); called by the thread that created a pinned pool, puts back
 * that thread's former affinity mask. */
void tpool_destroy(struct tpool *p);

#endif
