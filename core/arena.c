/* arena.c — aligned, huge-page-advised, pre-faulted float arenas. */
#include "arena.h"

#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

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

/* What a limit on the process's address space (ulimit -v, RLIMIT_AS) leaves of it, in bytes; -1 where there is none.
 * Under one a run the machine's memory holds failed midway at an allocation ("cannot allocate activations", exit 1)
 * where the plan's check would have refused it at once with its figures. */
static double address_space_left(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return -1.0;
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0;
    const int got = f && fscanf(f, "%ld", &pages) == 1;
    if (f) fclose(f);
    if (!got) return -1.0;
    const double left = (double)r.rlim_cur - (double)pages * (double)sysconf(_SC_PAGESIZE);
    return left > 0.0 ? left : 0.0;
}

double arena_mem_available(void)
{
    const double o = arena_mem_override();
    if (o > 0.0) return o;
    FILE *f = fopen("/proc/meminfo", "r");
    double kb = 0.0;
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
        fclose(f);
    }
    double avail = kb * 1024.0;
    const double left = address_space_left();
    if (left >= 0.0 && (avail <= 0.0 || left < avail)) avail = left > 1.0 ? left : 1.0; /* 1: known, and nothing */
    return avail;
}
