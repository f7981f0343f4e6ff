/* prefetch.h — a byte range prefetched a few cache lines per step of a compute loop, for the kernels
 * that read (or write) far ahead of what the hardware prefetchers follow: depthwise rows, gemm_rows'
 * next panel. Spreading the lines over the loop lets the misses overlap the arithmetic; a burst of them
 * stalls the loads behind it on the few miss buffers. Header-only; not a public API.
 */
#ifndef TB_PREFETCH_H
#define TB_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

/* Lines [p, end) still to prefetch, per of them a step. */
struct pf_span {
    const char *p, *end;
    int per;
};

/* The span [p, end) over nsteps steps (at least one line a step when the span is not empty): every line
 * holding one of its bytes, from the line p is in (from p itself, an unaligned span's last partial line
 * was left out). */
static inline struct pf_span pf_span_of(const void *p, const void *end, size_t nsteps)
{
    const char *e = end, *a = e > (const char *)p ? (const char *)p - ((uintptr_t)p & 63) : p;
    const size_t lines = e > a ? (size_t)(e - a + 63) / 64 : 0, n = nsteps ? nsteps : 1;
    return (struct pf_span){a, e, (int)((lines + n - 1) / n)};
}

/* Prefetches now every line holding one of the `bytes` bytes that start `ahead` bytes past p: for reading (rw 0)
 * or writing (rw 1), a constant at the call. The addresses are formed in integers: the lines ahead may lie
 * past the tensor (a prefetch does not fault). */
static inline __attribute__((always_inline)) void pf_lines(const void *p, size_t ahead, size_t bytes, const int rw)
{
#if defined(__GNUC__)
    const uintptr_t s = (uintptr_t)p + ahead, e = s + bytes;
    for (uintptr_t q = bytes ? s & ~(uintptr_t)63 : e; q < e; q += 64) {
        if (rw) __builtin_prefetch((const void *)q, 1, 3);
        else __builtin_prefetch((const void *)q, 0, 3);
    }
#else
    (void)p, (void)ahead, (void)bytes, (void)rw;
#endif
}

/* Prefetches the span's next per lines: for reading (rw 0) or writing (rw 1), a constant at the call. */
static inline __attribute__((always_inline)) void pf_span_step(struct pf_span *s, const int rw)
{
#if defined(__GNUC__)
    for (int q = 0; q < s->per && s->p < s->end; q++, s->p += 64) {
        if (rw) __builtin_prefetch(s->p, 1, 3);
        else __builtin_prefetch(s->p, 0, 3);
    }
#else
    (void)s, (void)rw;
#endif
}

#endif
