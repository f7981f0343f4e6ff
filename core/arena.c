/* arena.c — aligned, huge-page-advised, pre-faulted float arenas. */
#include "arena.h"

#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_HUGE (2u << 20)

float *arena_alloc(size_t n_floats)
{
    size_t bytes = n_floats * sizeof(float);
    if (bytes == 0) bytes = 64;
    /* Big arenas: align to 2 MiB so THP can back them; small ones: a cache line is enough. */
    size_t align = bytes >= ARENA_HUGE ? ARENA_HUGE : 64;
    bytes = (bytes + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, bytes) != 0) {
        tb_error_set(TB_ENOMEM, "arena_alloc: cannot allocate %zu bytes", bytes);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (align == ARENA_HUGE) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes); /* pre-fault now, not in the first step */
    return p;
}

void arena_free(float *p) { free(p); }

double arena_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0.0;
    char line[128];
    double kb = 0.0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024.0;
}
