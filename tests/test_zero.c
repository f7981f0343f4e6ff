/* tb_zero_floats: every float of the span zeroed and nothing outside it, on every alignment, for spans
 * of tensors large enough to stream (1 MB and up) and small ones. */
#include "test_util.h"

#include <criterion/criterion.h>

#include "zero.h"

#include <stdlib.h>
#include <string.h>

Test(zero, spans_exact_on_every_alignment)
{
    enum { N = 300000 };
    float *buf = aligned_alloc(64, (N + 64) * sizeof(float));
    cr_assert(buf);
    static const size_t lens[] = {0, 1, 15, 63, 64, 65, 1000, 262145, N - 40};
    for (size_t total = 1000; total <= (size_t)N; total += N - 1000) /* plain, then streamed */
        for (int off = 0; off < 17; off++)
            for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
                const size_t n = lens[k];
                for (size_t i = 0; i < N + 64; i++) buf[i] = 1.0f;
                tb_zero_floats(buf + off, n, total);
                for (size_t i = 0; i < N + 64; i++) {
                    const float want = i >= (size_t)off && i < off + n ? 0.0f : 1.0f;
                    if (buf[i] != want)
                        cr_assert_fail("total %zu offset %d length %zu: buf[%zu] = %g, want %g", total, off, n, i,
                                       (double)buf[i], (double)want);
                }
            }
    free(buf);
}
