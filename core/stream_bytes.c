/* stream_bytes.c — from what size an output goes out with non-temporal stores (layout.h's
 * tb_stream_bytes).
 *
 * A plain store to a line not in cache first reads it (the read for ownership), so a pass writing a tensor
 * that leaves the caches before its reader comes moves it twice. Where that happens depends on the cache:
 *  - Intel Xeon (2 MB L2 a core, a non-inclusive L3 behind it): from half the L2. The twenty-seventh
 *    session (family 6 model 207) timed every layer of effnet-b0 32×32 batch 128 one thread with the
 *    threshold at 256 KiB, 1, 2, 4 and 16 MiB (`TB_STREAM_KB`, alternating rounds): 1 MiB fastest, 16 MiB
 *    (the old constant) 10 % slower in the layers' sum, 256 KiB 6 % slower (outputs read from L2 again).
 *  - Elsewhere (AMD Zen: its L3 is a victim cache that keeps what L2 evicts; the 32 MB L3 of the machines
 *    measured): 16 MB, where whole steps measured 8 MB as neutral (the twenty-second session).
 * Decided once a process, never by thread count: where the stores stream changes no value. */
#include "stream_bytes.h"

#include "layout.h"

#include <stdlib.h>
#include <unistd.h>

enum { STREAM_DEFAULT = 16 << 20, STREAM_INTEL_NO_L2 = 1 << 20 };

size_t tb_stream_bytes_choose(const char *env, int intel, long l2)
{
    char *end = NULL;
    const long kb = env ? strtol(env, &end, 10) : 0;
    if (env && end != env && *end == '\0' && kb > 0 && kb <= (1L << 30)) return (size_t)kb << 10;
    if (intel) return l2 > 0 ? (size_t)l2 / 2 : (size_t)STREAM_INTEL_NO_L2;
    return STREAM_DEFAULT;
}

size_t tb_stream_bytes(void)
{
    static _Atomic size_t bytes;
    size_t b = bytes;
    if (!b) {
        int intel = 0;
#if defined(__x86_64__) || defined(__i386__)
        intel = __builtin_cpu_is("intel");
#endif
        b = tb_stream_bytes_choose(getenv("TB_STREAM_KB"), intel, sysconf(_SC_LEVEL2_CACHE_SIZE));
        bytes = b;
    }
    return b;
}
