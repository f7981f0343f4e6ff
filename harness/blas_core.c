/* blas_core.c — choosing OpenBLAS's kernel set and its thread count at load. OpenBLAS reads
 * OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS once, when it loads, so choosing means re-executing
 * ourselves with the environment changed; TB_BLAS_REEXEC counts the re-execs (at most two: set the
 * environment, then correct a fallback kernel set) so it cannot loop. */
#define _GNU_SOURCE
#include "blas_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int blas_core_isa_level(const char *core)
{
    static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    static const char *const avx2[] = {"haswell", "zen", "excavator"};
    static const char *const avx[] = {"sandybridge", "bulldozer", "piledriver", "steamroller"};
    if (!core) return 0;
    for (size_t k = 0; k < sizeof avx512 / sizeof *avx512; k++)
        if (strcasecmp(core, avx512[k]) == 0) return 3;
    for (size_t k = 0; k < sizeof avx2 / sizeof *avx2; k++)
        if (strcasecmp(core, avx2[k]) == 0) return 2;
    for (size_t k = 0; k < sizeof avx / sizeof *avx; k++)
        if (strcasecmp(core, avx[k]) == 0) return 1;
    return 0;
}

int cpu_isa_level(void)
{
    __builtin_cpu_init();
    /* OpenBLAS's SkylakeX kernels use F, BW, VL and DQ. */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return 3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
    if (__builtin_cpu_supports("avx")) return 1;
    return 0;
}

const char *blas_core_for_level(int level)
{
    return level >= 3 ? "SkylakeX" : level == 2 ? "Haswell" : level == 1 ? "Sandybridge" : NULL;
}

int blas_core_known(const char *mode, const char **names)
{
    /* OpenBLAS's DYNAMIC_ARCH x86-64 kernel sets (driver/others/dynamic.c, corename[]). */
    static const char *const x86[] = {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2",
                                      "Penryn", "Dunnington", "Nehalem", "Athlon", "Opteron", "Opteron_SSE3",
                                      "Barcelona", "Nano", "Sandybridge", "Bobcat", "Bulldozer", "Piledriver",
                                      "Haswell", "Steamroller", "Excavator", "Zen", "SkylakeX", "Cooperlake",
                                      "SapphireRapids"};
    if (names)
        *names = "Prescott, Core2, Nehalem, Sandybridge, Haswell, Zen, SkylakeX, Cooperlake, SapphireRapids, ...";
    if (!mode || !*mode) return 0;
    if (strcasecmp(mode, "auto") == 0 || strcasecmp(mode, "env") == 0) return 1;
#if defined(__x86_64__)
    for (size_t k = 0; k < sizeof x86 / sizeof *x86; k++)
        if (strcasecmp(mode, x86[k]) == 0) return 1;
    return 0;
#else
    (void)x86;
    return 1; /* other architectures' names are not listed here: OpenBLAS decides */
#endif
}

static void reexec(const char *exe, char **argv, int count)
{
    char n[8];
    snprintf(n, sizeof n, "%d", count);
    setenv("TB_BLAS_REEXEC", n, 1);
    execv(exe, argv);
}

void blas_core_apply(const char *mode, const char *exe, char **argv)
{
    const char *env = getenv("TB_BLAS_REEXEC");
    const int count = env ? atoi(env) : 0;
    const char *cur = getenv("OPENBLAS_CORETYPE");
    if (strcasecmp(mode, "env") == 0 || count >= 2) return;
    int change = 0;
    if (count == 0) {
        /* OpenBLAS loaded with its own threads serialises concurrent callers even after
         * openblas_set_num_threads(1): 512³ sgemms on two threads at once ran 0.98–1.25× one thread,
         * 1.90× when it loaded with one (it can still raise its count later: --calibrate does). */
        const char *t = getenv("OPENBLAS_NUM_THREADS");
        if (!t || strcmp(t, "1") != 0) setenv("OPENBLAS_NUM_THREADS", "1", 1), change = 1;
        if (strcasecmp(mode, "auto") != 0) {
            if (!cur || strcasecmp(cur, mode) != 0) setenv("OPENBLAS_CORETYPE", mode, 1), change = 1;
            if (change) reexec(exe, argv, 2);
            return;
        }
        if (cur) unsetenv("OPENBLAS_CORETYPE"), change = 1;
        if (change) {
            reexec(exe, argv, 1);
            return;
        }
    }
    if (cur) return; /* our own correction from the step below */
    const char *fix = blas_core_auto_override();
    if (fix) {
        setenv("OPENBLAS_CORETYPE", fix, 1);
        reexec(exe, argv, 2);
    }
}

const char *blas_core_auto_override(void)
{
    const int want = cpu_isa_level();
    return blas_core_isa_level(openblas_get_corename()) < want ? blas_core_for_level(want) : NULL;
}
