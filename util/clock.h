/* clock.h — the one clock every timer in trainbench reads: CLOCK_MONOTONIC in seconds, so step times,
 * per-layer profiles, timelines and traces taken in different modules share a time base.
 * Not wall-clock time (rows' timestamps come from harness/machine.c). Thread-safe.
 */
#ifndef TB_CLOCK_H
#define TB_CLOCK_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double tb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds of CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID): work, not time descheduled,
 * so a pool's per-thread work can be told apart even with more threads than cores. */
static inline double tb_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
