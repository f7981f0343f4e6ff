/* cachesim.c — callgrind counter dumps at layer boundaries (see cachesim.h). */
#include "cachesim.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TB_HAVE_CALLGRIND 1
#endif
#endif

/* −1 undecided, 0 off, 1 on: decided by the first caller; mirrored's replicas call at once (atomic: each may
 * decide, all decide alike). */
static atomic_int cachesim_state = -1;
static int forwards;            /* forward passes begun (marks of layer −1, 'F') */

int cachesim_on(void)
{
    int s = atomic_load_explicit(&cachesim_state, memory_order_relaxed);
    if (s < 0) {
#ifdef TB_HAVE_CALLGRIND
        const char *e = getenv("TB_CACHESIM");
        s = RUNNING_ON_VALGRIND && e && strcmp(e, "1") == 0;
#else
        s = 0;
#endif
        atomic_store_explicit(&cachesim_state, s, memory_order_relaxed);
    }
    return s;
}

/* The script starts callgrind with --instr-atstart=no and runs three steps: the first (algorithm tuning,
 * first touch of every page) runs uninstrumented, several times faster; the model's caches start at the
 * second step's forward, whose every layer is dumped, then the dump at the third's forward holds the
 * second's optimizer update (and the third's data), and instrumentation stops there. */
void cachesim_mark(int layer, char phase)
{
    if (!cachesim_on()) return;
#ifdef TB_HAVE_CALLGRIND
    if (layer < 0 && phase == 'F') {
        if (++forwards == 2) {
            CALLGRIND_START_INSTRUMENTATION;
            CALLGRIND_ZERO_STATS;
            return;
        }
    }
    if (forwards != 2 && !(forwards == 3 && layer < 0 && phase == 'F')) return;
    char name[32];
    snprintf(name, sizeof name, "L%d %c", layer, phase);
    CALLGRIND_DUMP_STATS_AT(name);
    if (forwards == 3) CALLGRIND_STOP_INSTRUMENTATION;
#else
    (void)layer, (void)phase, (void)forwards;
#endif
}
