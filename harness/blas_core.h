/* blas_core.h — which OpenBLAS kernel set a run uses (OPENBLAS_CORETYPE), chosen before OpenBLAS is used. */
#ifndef TB_BLAS_CORE_H
#define TB_BLAS_CORE_H

/* Vector ISA level of an OpenBLAS core name (case-insensitive): 3 AVX-512, 2 AVX2+FMA, 1 AVX, 0 older
 * or unknown. */
int blas_core_isa_level(const char *core);

/* The same level for this CPU, as the OS exposes it (cpuid and XCR0 through __builtin_cpu_supports). */
int cpu_isa_level(void);

/* OpenBLAS's own: the name of the kernel set it runs. */
char *openblas_get_corename(void);

/* OpenBLAS core name whose kernels use ISA level `level` (NULL for 0: nothing to force). */
const char *blas_core_for_level(int level);

/* The kernel set auto replaces OpenBLAS's own choice with (the loaded one's level is below the CPU's), or
 * NULL where OpenBLAS's detection stands. */
const char *blas_core_auto_override(void);

/* Whether MODE is a --blas-core value: auto, env, or (on x86-64) one of OpenBLAS's kernel set names,
 * case-insensitive. OpenBLAS ignores an OPENBLAS_CORETYPE it does not know, so a typo would run its
 * default kernels unnoticed. names receives the accepted names for a message (may be NULL). */
int blas_core_known(const char *mode, const char **names);

/* Applies --blas-core MODE (auto | env | NAME) by re-executing exe with argv and the environment changed:
 * OPENBLAS_CORETYPE when the running kernel set is not the chosen one, and (auto and NAME)
 * OPENBLAS_NUM_THREADS=1 at load. auto: OpenBLAS's own detection, unless that picks kernels below the
 * CPU's ISA level (a CPU newer than the OpenBLAS build knows: Prescott kernels on an AVX-512 Xeon),
 * then the best set for the CPU's level. Returns only when no re-exec is needed or it failed (the run
 * then records the kernel set it has). */
void blas_core_apply(const char *mode, const char *exe, char **argv);

#endif
