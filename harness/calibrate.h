/* calibrate.h — the machine's measured ceilings: sgemm GFLOP/s and STREAM-like triad bandwidth.
 *
 * `bench --calibrate` measures them once and caches them in results/calibration.json (ignored by git: it
 * belongs to the machine that measured it); every result row of the same CPU model, core count and BLAS
 * kernel set then carries its achieved GFLOP/s as a share of the sgemm peak, and the report draws the
 * roofline under these ceilings. sgemm is OpenBLAS's (square n = 2048, single-threaded and on all
 * cores); the triad is a[i] = b[i] + s·c[i] over doubles, arrays four times the last-level cache,
 * 24 bytes per element counted as STREAM does (no write-allocate traffic), on one thread and on all.
 * Best of several repetitions, since a ceiling is what the machine can do, not what it usually does.
 * Not a tuning tool: it measures, it never changes OpenBLAS's or the backends' settings for later.
 * Threading: calibrate_measure starts and joins its own threads and restores OpenBLAS's thread
 * count; call it from one thread while nothing else runs.
 */
#ifndef TB_CALIBRATE_H
#define TB_CALIBRATE_H

#include <stddef.h>

#define CALIBRATION_DEFAULT_PATH "results/calibration.json"

struct calibration {
    int sgemm_n;
    double sgemm_1t_gflops;    /* OpenBLAS sgemm, one thread, GFLOP/s */
    double sgemm_all_gflops;   /* OpenBLAS sgemm, all_threads threads */
    int all_threads;
    double triad_1t_gbs;       /* GB/s (1e9 bytes/s), one thread */
    double triad_all_gbs;      /* GB/s, all_threads threads */
    long triad_elements;       /* per array */
    char cpu_model[128];
    int cores;                 /* online logical CPUs where it was measured */
    char blas_core[64];
    char timestamp[32];
};

/* Measures the ceilings (a few seconds). sgemm_n 0 = 2048. Returns TB_OK or TB_ENOMEM. */
int calibrate_measure(struct calibration *c, int sgemm_n);
/* Writes c as JSON to path (parent directories created). Returns TB_OK or TB_EIO. */
int calibrate_write(const struct calibration *c, const char *path);
/* Reads a calibration written by calibrate_write. Returns TB_OK, TB_EIO (missing) or TB_EFORMAT. */
int calibrate_read(const char *path, struct calibration *c);
/* 1 if c was measured on a machine with this CPU model, core count and OpenBLAS kernel set: a ceiling of
 * another machine says nothing of this one. Else 0, with the first difference in why (n bytes). */
int calibrate_matches(const struct calibration *c, const char *cpu_model, int cores, const char *blas_core,
                      char *why, size_t n);
/* Reads path and keeps it only if it matches the machine (cpu_model, cores, blas_core). Returns TB_OK;
 * TB_EIO when there is no file (silently: calibrating is optional); TB_EINVAL, after one warning line on
 * stderr (once per path per process), when the file is another machine's or unreadable. Not thread-safe. */
int calibrate_load_matching(const char *path, const char *cpu_model, int cores, const char *blas_core,
                            struct calibration *c);

#endif
