/* conv_tuning.h — the convolution algorithms `--conv-algo auto` measured, kept in a file (--tuning,
 * results/tuning.json) as FFTW keeps its wisdom. A later run on the same machine, with the same executable
 * and the same switches (TB_*, OPENBLAS_*, OMP_* variables), takes the file's choices instead of timing the
 * shapes again, so it runs the same kernels and gives the same bits: timing alone, where two algorithms time
 * within the machine's noise, changed 1 to 3 of effnet-b0's 33 convolutions (32×32 batch 64, cpu) from run to
 * run of one command, and its final loss took six values in ten runs.
 *
 * The file holds sections, one for each (CPU model, cores, OpenBLAS kernel set, executable's GNU build ID,
 * switches), newest first, at most CONV_TUNING_SECTIONS; a rebuilt executable has another build ID, so its
 * kernels are timed afresh. Nothing here ever fails a run: a file that cannot be read is one warning and the
 * shapes are timed; a file that is not a tuning file is never replaced.
 * Threading: call from the thread that prepares backends (the cache itself is locked, core/exec.h). */
#ifndef TB_CONV_TUNING_H
#define TB_CONV_TUNING_H

#include "machine.h"
#include "run.h"

#define CONV_TUNING_DEFAULT_PATH "results/tuning.json"
#define CONV_TUNING_SECTIONS 8

/* Whether run c reads and writes its --tuning file: --conv-algo auto on the host's executor (the cuda device
 * chooses no algorithms), --tuning not "none". */
int conv_tuning_on(const struct bench_config *c);
/* This executable's GNU build ID in hex into out ("" when the linker wrote none); returns out. */
const char *conv_tuning_build_id(char *out, size_t n);
/* Adds path's choices for this machine, executable and environment to the process-wide cache; returns how
 * many it added (0 when the file is missing or holds no section for this key; entries this engine cannot
 * run are skipped, with one warning line), or -1 with one warning line when the file cannot be read or is
 * not a tuning file (then it must not be saved over). */
int conv_tuning_load(const char *path, const struct machine_info *mi);
/* Writes the process-wide cache as path's section for this machine, executable and environment, keeping the
 * other sections (at most CONV_TUNING_SECTIONS in all), through a temporary file renamed into place. TB_OK,
 * or an error with one line (a file that is not a tuning file is left as it is). */
int conv_tuning_save(const char *path, const struct machine_info *mi);

#endif
