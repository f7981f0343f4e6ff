/* cachesim.c — callgrind counter dumps at layer boundaries (see cachesim.h). */
#include "cachesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TB_HAVE_CALLGRIND 1
#endif
#endif

static int cachesim_state = -1; /* −1 undecided, 0 off, 1 on; decided by the first caller (thread 0) */

int cachesim_on(void)
{
    if (cachesim_state < 0) {
#ifdef TB_HAVE_CALLGRIND
        const char *e = getenv("TB_CACHESIM");
        cachesim_state = RUNNING_ON_VALGRIND && e && strcmp(e, "1") == 0;
        /* The script starts callgrind with --instr-atstart=no: setup runs uninstrumented (several times
         * faster), the cache model starts at the first profiled pass. */
        if (cachesim_state) CALLGRIND_START_INSTRUMENTATION;
#else
        cachesim_state = 0;
#endif
    }
    return cachesim_state;
}

void cachesim_mark(int layer, char phase)
{
    if (!cachesim_on()) return;
#ifdef TB_HAVE_CALLGRIND
    char name[32];
    snprintf(name, sizeof name, "L%d %c", layer, phase);
    CALLGRIND_DUMP_STATS_AT(name);
#else
    (void)layer, (void)phase;
#endif
}
