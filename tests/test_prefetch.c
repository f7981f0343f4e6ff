/* test_prefetch.c — core/prefetch.h's spans: which cache lines a span walks, and in how many steps.
 *
 * A prefetch changes no value, so the kernels' own tests cannot see a span that misses a line; here the
 * walk itself is checked: for every offset within a line and lengths under, at and over a line, the span
 * starts at the line holding its first byte, steps 64 bytes at a time, and reaches the end of its last
 * byte's line within the steps it was given.
 */
#include "test_util.h"

#include "prefetch.h"

Test(prefetch, span_walks_every_line_of_its_bytes)
{
    static _Alignas(64) char buf[4096];
    const size_t lens[] = {1, 4, 8, 60, 64, 65, 127, 130, 1000};
    const size_t steps[] = {1, 3, 16, 100};
    for (size_t off = 0; off < 64; off++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++) {
                const char *p = buf + 128 + off, *end = p + lens[li];
                struct pf_span s = pf_span_of(p, end, steps[si]);
                const char *first = buf + 128; /* the line p is in */
                const size_t lines = (off + lens[li] + 63) / 64;
                cr_assert_eq(s.p, first, "off %zu len %zu: the span starts %td bytes from its first line", off,
                             lens[li], s.p - first);
                for (size_t k = 0; k < steps[si]; k++) pf_span_step(&s, 0);
                cr_assert_eq((size_t)(s.p - first), 64 * lines,
                             "off %zu len %zu steps %zu: %td bytes walked for %zu lines", off, lens[li], steps[si],
                             s.p - first, lines);
            }
    struct pf_span e = pf_span_of(buf + 70, buf + 70, 4); /* empty: nothing to walk */
    pf_span_step(&e, 0);
    cr_assert_eq(e.p, buf + 70);
}
