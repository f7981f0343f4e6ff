/* suite.h — suite files: a list of runs, one per line, expanded and validated before any runs.
 *
 *   # the default suite
 *   plan=throughput backend=* workload=mnist-mlp batch=32 repeat=3
 *   plan=tta backend=cpu workload=mnist-mlp seeds=3 lr=0.001,0.002
 *   ? plan=throughput backend=* workload=effnet-b0 resolution=32 steps=20
 *
 * A line is whitespace-separated `option=value` words (bench's long options without the dashes; a
 * flag may stand alone); `#` starts a comment. A comma list expands to the cartesian product of the
 * line's lists (`lr=0.1,0.2 warmup=2,5` is four runs), except for options whose value is itself a list
 * (batches, split). `backend=*` means every registered backend that takes the line's options: an option
 * only some backends take (stages=2) leaves the others out, with a note, and a line none of them can run
 * is an error, as is an option given with a named backend that does not take it. A line starting with
 * `?` is optional: it is skipped, with a note, when its workload or backend is not registered in this
 * build. Every run starts from the command line's configuration, so `bench --suite F --out X` sends all
 * rows to X; a line's own option replaces the command line's for that line's runs (out= too), with a note.
 * Errors name file:line and the option, and nothing runs until the whole file is valid. The file must
 * be a regular file of at most SUITE_MAX_BYTES with lines of at most SUITE_MAX_LINE bytes.
 * Threading: none; a suite is owned by its caller.
 */
#ifndef TB_SUITE_H
#define TB_SUITE_H

#include "run.h"

#define SUITE_MAX_RUNS 4096
/* A suite is a short hand-written file: anything longer is a wrong path (a log, an image), refused
 * with a clear error instead of read into memory without end. */
#define SUITE_MAX_LINE 65536
#define SUITE_MAX_BYTES (4 << 20)

struct suite_run {
    struct bench_config c;  /* resolved (bench_config_finish has run) */
    int line;               /* 1-based line in the file */
};

struct suite {
    char path[512];
    struct suite_run *runs;
    int n_runs, cap_runs;
    int n_skipped;          /* optional lines skipped (workload/backend not registered) */
};

/* Reads and expands path on top of base. Returns TB_OK, TB_EIO (cannot read), TB_EINVAL (a bad line:
 * the message is "FILE:LINE: ...") or TB_ENOMEM. Notes about skipped optional lines go to stderr. */
int suite_load(const char *path, const struct bench_config *base, struct suite *out);
/* Runs every run in order under one numbered progress display, one summary line per run; a failing
 * run is reported (file:line) and the rest still run. A SIGINT/SIGTERM stops the suite after the current
 * run: returns TB_EINTR then, else TB_OK or the first failure's status. */
int suite_run(const struct suite *s);
/* Frees the runs. */
void suite_free(struct suite *s);

#endif
