/* stream_bytes.c — from what size an output goes out with non-temporal stores (layout.h's
 * tb_stream_bytes, tb_stream_bytes_for).
 *
 * A plain store to a line not in cache first reads it (the read for ownership), so a pass writing a tensor
 * that leaves the caches before its reader comes moves it twice. Where that happens depends on the cache:
 *  - Intel Xeon (2 MB L2 a core, a non-inclusive L3 behind it): from half the L2 of each thread writing.
 *    The twenty-seventh session (family 6 model 207, 2 vCPUs) timed every layer of effnet-b0 32×32 batch 128
 *    with the whole output's threshold at 256 KiB, 1, 2, 4 and 16 MiB (`TB_STREAM_KB`, alternating rounds):
 *    one thread fastest at 1 MiB (16 MiB, the old constant, 10 % slower in the layers' sum, 256 KiB 6 %
 *    slower: those outputs were read from L2 again), two threads 7 % faster at 1 MiB than at 16. Per
 *    thread, because a thread's rows of an output are what stays in its own L2 for the next layer's same
 *    rows: at 16 threads the rule gives 16 × 1 MiB, where the old constant had it.
 *  - Elsewhere (AMD Zen: its L3 is a victim cache that keeps what L2 evicts; the 32 MB L3 of the machines
 *    measured): 16 MB for the whole output, where whole steps measured 8 MB as neutral (the twenty-second
 *    session).
 * Decided once a process, never by thread count alone: where the stores stream changes no value. */
#include "stream_bytes.h"

#include "layout.h"

#include <stdlib.h>
#include <unistd.h>

enum { STREAM_DEFAULT = 16 << 20, STREAM_INTEL_NO_L2 = 1 << 20 };

size_t tb_stream_bytes_choose(const char *env, int intel, long l2, int *per_thread)
{
    char *end = NULL;
    const long kb = env ? strtol(env, &end, 10) : 0;
    *per_thread = 0;
    if (env && end != env && *end == '\0' && kb > 0 && kb <= (1L << 30)) return (size_t)kb << 10;
    if (!intel) return STREAM_DEFAULT;
    *per_thread = 1;
    return l2 > 0 ? (size_t)l2 / 2 : (size_t)STREAM_INTEL_NO_L2;
}

size_t tb_stream_bytes_here(const char *env, int *per_thread)
{
    int intel = 0;
#if defined(__x86_64__) || defined(__i386__)
    intel = __builtin_cpu_is("intel");
#endif
    return tb_stream_bytes_choose(env, intel, sysconf(_SC_LEVEL2_CACHE_SIZE), per_thread);
}

static _Atomic size_t stream_bytes;
static _Atomic int stream_per_thread;

size_t tb_stream_bytes(void)
{
    size_t b = stream_bytes;
    if (!b) {
        int per = 0;
        b = tb_stream_bytes_here(getenv("TB_STREAM_KB"), &per);
        stream_per_thread = per;
        stream_bytes = b;
    }
    return b;
}

size_t tb_stream_bytes_for(int nth)
{
    const size_t b = tb_stream_bytes();
    return stream_per_thread && nth > 1 ? b * (size_t)nth : b;
}
