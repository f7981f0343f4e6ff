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

/* TB_MEM_AVAILABLE=BYTES (a plain count, or with a K/M/G suffix) plans as if the machine had that much:
 * what a user sizing a run for a smaller machine wants, and how the tests reach the memory-driven
 * choices (micro-batch, recomputation) without filling this machine. 0 when unset or malformed. */
double arena_mem_override(void)
{
    const char *e = getenv("TB_MEM_AVAILABLE");
    if (!e || !*e) return 0.0;
    char *end;
    double v = strtod(e, &end);
    if (end == e || v <= 0.0) return 0.0;
    switch (*end) {
    case 'k': case 'K': v *= 1024.0, end++; break;
    case 'm': case 'M': v *= 1048576.0, end++; break;
    case 'g': case 'G': v *= 1073741824.0, end++; break;
    default: break;
    }
    return *end ? 0.0 : v;
}

double arena_mem_available(void)
{
    const double o = arena_mem_override();
    if (o > 0.0) return o;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0.0;
    char line[128];
    double kb = 0.0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024.0;
}
