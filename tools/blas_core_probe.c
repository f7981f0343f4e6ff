/* blas_core_probe.c — prints the OPENBLAS_CORETYPE that `bench --blas-core auto` sets on this machine,
 * nothing where OpenBLAS's own detection stands. CMake runs it when it configures, so that ctest's tests
 * load the kernels a user's run has (Debian's OpenBLAS 0.3.21 runs Prescott's on CPUs it does not know). */
#include "blas_core.h"

#include <stdio.h>

int main(void)
{
    const char *core = blas_core_auto_override();
    if (core) fputs(core, stdout);
    return 0;
}
