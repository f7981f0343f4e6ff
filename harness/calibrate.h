/* calibrate.h — the machine's measured ceilings: sgemm GFLOP/s and STREAM-like triad bandwidth.
 *
 * `bench --calibrate` measures them once and caches them in results/calibration.json (ignored by git: it
 * belongs to the machine that measured it); every result row of the same CPU model, core count and BLAS
 * kernel set then carries its achieved GFLOP/s as a share of the sgemm peak, and the report draws the
 * roofline under these ceilings. sgemm is OpenBLAS's (square n = 2048, single-threaded and on all
 * cores); the triad is a[i] = b[i] + s·c[i] over doubles, arrays four times the last-level cache,
 * 24 bytes per element counted as STREAM does (no write-allocate traffic), on one thread and on all.
 * Best of several repetitions, since a ceiling is what the machine can do, not what it usually does.
 * The GPU (the cuda device, when built and present) is measured beside them by the device itself
 * (executor_device_calibrate: cuBLAS fp32 with TF32 off, TF32 and bf16 GEMMs, device-to-device copy) and
 * recorded in the same file with its facts; a machine without one records why (absent: the runtime's
 * reason; not built), never a zero ceiling (calibrate_gpu.c).
 * Not a tuning tool: it measures, it never changes OpenBLAS's or the backends' settings for later.
 * Threading: calibrate_measure starts and joins its own threads and restores OpenBLAS's thread
 * count; call it from one thread while nothing else runs.
 */
#ifndef TB_CALIBRATE_H
#define TB_CALIBRATE_H

#include "device_info.h"
#include "json.h"

#include <stddef.h>

#define CALIBRATION_DEFAULT_PATH "results/calibration.json"
/* The registry's device whose ceilings a calibration holds as the GPU's. */
#define CALIBRATION_GPU_DEVICE "cuda"

/* What a calibration says of the GPU. */
enum calibration_gpu_state {
    CAL_GPU_UNKNOWN,   /* nothing: a file written before GPUs were calibrated */
    CAL_GPU_MEASURED,  /* facts and ceilings measured */
    CAL_GPU_ABSENT,    /* the cuda device is built but no GPU answered (why: the runtime's reason) */
    CAL_GPU_NOT_BUILT, /* this bench has no cuda device */
    CAL_GPU_FAILED,    /* a GPU answered but a measurement failed (why) */
};

struct calibration_gpu {
    enum calibration_gpu_state state;
    char why[256];             /* absent, not built, failed: the one-line reason */
    struct device_info info;   /* measured: the GPU's facts */
    struct device_ceilings c;  /* measured: its ceilings (all > 0) */
};

struct calibration {
    int sgemm_n;
    double sgemm_1t_gflops;    /* OpenBLAS sgemm, one thread, GFLOP/s */
    double sgemm_all_gflops;   /* OpenBLAS sgemm, all_threads threads */
    int all_threads;
    double triad_1t_gbs;       /* GB/s (1e9 bytes/s), one thread */
    double triad_all_gbs;      /* GB/s, all_threads threads */
    long triad_elements;       /* per array */
    double barrier_all_us;     /* one barrier of a pinned pool of all_threads threads (the threads backend's), µs;
                                  0: not measured (one core, or a file from before it was) */
    char cpu_model[128];
    int cores;                 /* online logical CPUs where it was measured */
    int usable_cores;          /* of them, the ones the measuring process could run on (its CPU affinity: taskset,
                                  a cpuset); 0: a file from before it was recorded */
    char blas_core[64];
    char timestamp[32];
    struct calibration_gpu gpu;
};

/* Measures the CPU ceilings (a few seconds; c->gpu left unknown). sgemm_n 0 = 2048. Returns TB_OK or TB_ENOMEM. */
int calibrate_measure(struct calibration *c, int sgemm_n);
/* Measures the GPU into g (gemm_n 0: the device's default size); a missing, unbuilt or failing GPU is a
 * state with its reason, not an error. Returns g->state. */
enum calibration_gpu_state calibrate_measure_gpu(struct calibration_gpu *g, int gemm_n);
/* What this machine has now, without measuring: state MEASURED with the facts when a GPU answers, else
 * ABSENT or NOT_BUILT with why. Returns g->state. */
enum calibration_gpu_state calibrate_gpu_probe(struct calibration_gpu *g);
/* "measured", "absent", "not built", "failed" or "unknown". */
const char *calibrate_gpu_state_name(enum calibration_gpu_state s);
/* 1 when g holds ceilings measured on a GPU named gpu_name, else 0. */
int calibrate_gpu_matches(const struct calibration_gpu *g, const char *gpu_name);
/* The better of g's two copy ceilings, GB/s: the memory roof of the GPU's roofline. */
double calibrate_gpu_copy_gbs(const struct calibration_gpu *g);
/* Writes member "gpu" of a calibration file into the object open in b (nothing for UNKNOWN). */
void calibrate_gpu_write_json(const struct calibration_gpu *g, struct json_buf *b);
/* Reads member "gpu" of a parsed calibration file (UNKNOWN when there is none). TB_OK, or TB_EFORMAT for
 * a measured GPU without a positive ceiling. */
int calibrate_gpu_read_json(const struct json_value *file, struct calibration_gpu *g);
/* Whether a calibration may be written to path: TB_OK when nothing is there, the file is empty or holds a
 * calibration (any machine's); TB_EIO with one line when it is not a regular file (the rename would
 * replace a device or FIFO) or is another file (results rows would be lost), or its directory cannot be made. */
int calibrate_check_target(const char *path);
/* Writes c as JSON to path (parent directories created; calibrate_check_target first). Returns TB_OK or TB_EIO. */
int calibrate_write(const struct calibration *c, const char *path);
/* key's number in v when it lies in [lo, hi], else 0 (absent, or a count a hand-edited file made too large
 * for the int or long it is converted to: no undefined conversion). */
double calibrate_json_in_range(const struct json_value *v, const char *key, double lo, double hi);
/* Reads a calibration written by calibrate_write. Returns TB_OK, TB_EIO (missing) or TB_EFORMAT: among others
 * for a file without "kind": "calibration" or without one of the four ceilings (rows divide by each). */
int calibrate_read(const char *path, struct calibration *c);
/* 1 if c was measured on a machine with this CPU model, core count and OpenBLAS kernel set: a ceiling of
 * another machine says nothing of this one. Else 0, with the first difference in why (n bytes). */
int calibrate_matches(const struct calibration *c, const char *cpu_model, int cores, const char *blas_core,
                      char *why, size_t n);
/* c's own sanity check: 1, or 0 with why (n bytes) where its all-thread figures barely beat one thread's
 * (sgemm under 1.2×, triad under 1×): measured while other processes held the other cores. */
int calibrate_sane(const struct calibration *c, char *why, size_t n);
/* Whether path needs no new measurement (--calibrate-if-needed): TB_OK when it is a calibration of this
 * machine (calibrate_matches), passes calibrate_sane, was measured on no fewer cores than this process may use and, where gpu_name is not NULL (a GPU answers now),
 * holds that GPU's ceilings; TB_EIO when there is no file; else TB_EINVAL with why (n bytes). Prints nothing. */
int calibrate_check_current(const char *path, const char *cpu_model, int cores, const char *blas_core,
                            const char *gpu_name, struct calibration *c, char *why, size_t n);
/* Reads path and keeps it only if it matches the machine (cpu_model, cores, blas_core). Returns TB_OK;
 * TB_EIO when there is no file (silently: calibrating is optional); TB_EINVAL, after one warning line on
 * stderr (once per path per process), when the file is another machine's or unreadable. A file that fails
 * calibrate_sane, or measured on fewer cores than this process may use, is kept, with one warning line (once per
 * path per process). Not thread-safe. */
int calibrate_load_matching(const char *path, const char *cpu_model, int cores, const char *blas_core,
                            struct calibration *c);

#endif
