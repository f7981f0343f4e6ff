/* zero.c — see zero.h. */
#include "zero.h"

#include "layout.h"
#include "simd_vec.h"

#include <stdint.h>
#include <string.h>

/* A zeroed buffer is accumulated into much later (gradients: after the whole forward), by when even
 * a few MB have left the caches: stream from 1 MB, not from tb_stream_bytes(). */
enum { ZERO_STREAM_FLOATS = 1 << 18 };

void tb_zero_floats(float *p, size_t n, size_t total)
{
    if (!VL_NATIVE || total < ZERO_STREAM_FLOATS || n < 4 * VL) {
        memset(p, 0, n * sizeof(float));
        return;
    }
    /* A plain head up to the first vector-aligned float, streamed whole vectors, a plain tail. */
    size_t h = (size_t)((VL * sizeof(float) - (uintptr_t)p % (VL * sizeof(float))) % (VL * sizeof(float)));
    if (h % sizeof(float)) { /* not float-aligned: cannot align the stores */
        memset(p, 0, n * sizeof(float));
        return;
    }
    h /= sizeof(float);
    memset(p, 0, h * sizeof(float));
    const vf z = VZERO();
    size_t i = h;
    for (; i + VL <= n; i += VL) VST_NT(p + i, z);
    memset(p + i, 0, (n - i) * sizeof(float));
    VFENCE_NT();
}
