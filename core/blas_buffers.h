/* blas_buffers.h — OpenBLAS's GEMM packing buffers kept per thread, with no process-wide lock.
 *
 * OpenBLAS built without USE_TLS (Debian's 0.3.21 is) takes every level-3 call's packing buffer from one
 * table under one pthread mutex. Our kernels call cblas_sgemm a tile at a time from every pool thread and
 * every replica at once, so at many cores the threads queue on that mutex after each barrier. blas_buffers.c
 * defines OpenBLAS's own allocator entry points (blas_memory_alloc / blas_memory_free), which the library
 * calls through its PLT, so the executable's definitions serve the whole process. Every executable linking
 * tb_core gets them (CMake links it with -u blas_memory_alloc). TB_BLAS_BUFFERS=shared forwards every call to
 * OpenBLAS's own allocator: the measured A/B. */
#ifndef TB_BLAS_BUFFERS_H
#define TB_BLAS_BUFFERS_H

/* "per-thread" when this process's OpenBLAS takes its buffers from here; "shared" when TB_BLAS_BUFFERS=shared
 * (or the library has no blas_memory_alloc_nolock to size them by) forwards to OpenBLAS's own table; "not
 * interposed" when OpenBLAS never calls them (seen with one sgemm on the first call, which it costs). */
const char *blas_buffers_mode(void);

/* Buffers the calling thread has asked this allocator for since it started, in either mode: a test's proof
 * that its GEMMs came through here. */
long blas_buffers_thread_calls(void);

#endif
