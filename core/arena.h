/* arena.h — one 64-byte-aligned allocation per tensor family (params, grads, optimizer state,
 * activations, activation grads, buffers, scratch).
 *
 * Arenas are allocated once per engine instance and reused every step; a fresh page's first touch
 * costs ~10 µs here, so large arenas ask for transparent huge pages and are pre-faulted at init
 * (zeroed), never in the step loop. Not thread-safe; owned by whoever called arena_alloc.
 */
#ifndef TB_ARENA_H
#define TB_ARENA_H

#include <stddef.h>

/* Allocates n_floats floats, 64-byte aligned, zeroed and pre-faulted; NULL on failure (message set). */
float *arena_alloc(size_t n_floats);
/* Frees an arena from arena_alloc (NULL is fine). */
void arena_free(float *p);
/* MemAvailable from /proc/meminfo in bytes (0 if unknown), or less where a limit on the address space (ulimit -v)
 * leaves less: what engines check an arena plan against before allocating it. */
double arena_mem_available(void);
/* TB_MEM_AVAILABLE's bytes when set (K/M/G suffix allowed), else 0: a stand-in for the machine's memory. */
double arena_mem_override(void);

#endif
