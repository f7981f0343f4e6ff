/* fuzz_suite.c — libFuzzer target for the suite-file reader (suite_load: tokenising, option lookup,
 * list expansion into the cartesian product, per-run validation through bench_config_set/finish,
 * checkpoint-directory clashes).
 *
 * Input: the whole content of a suite file, written to a per-process file under /dev/shm (removed at
 * exit). Besides sanitizer findings, the target traps on a broken contract: a failure must be
 * TB_EINVAL, TB_EIO or TB_ENOMEM with a message naming the file and leave an empty suite; a success
 * must hold at least one run or skipped optional line, every run with its 1-based line in range.
 * Nothing runs. Built and run by tools/fuzz/run.sh; not part of the library.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "status.h"
#include "suite.h"

static char g_path[128];

static void fuzz_cleanup(void) { unlink(g_path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        snprintf(g_path, sizeof g_path, "/dev/shm/tb_fuzz_suite_%d.suite", (int)getpid());
        atexit(fuzz_cleanup);
        ready = 1;
    }
    FILE *f = fopen(g_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    int lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';

    struct bench_config base;
    bench_config_defaults(&base);
    struct suite s;
    tb_error_clear();
    int st = suite_load(g_path, &base, &s);
    if (st != TB_OK) {
        if (st != TB_EINVAL && st != TB_EIO && st != TB_ENOMEM) __builtin_trap();
        if (!strstr(tb_error_get(), g_path)) __builtin_trap();
        if (s.runs || s.n_runs) __builtin_trap();
        return 0;
    }
    if (s.n_runs + s.n_skipped <= 0 || s.n_runs > SUITE_MAX_RUNS) __builtin_trap();
    for (int i = 0; i < s.n_runs; i++)
        if (s.runs[i].line < 1 || s.runs[i].line > lines || !s.runs[i].c.finished) __builtin_trap();
    suite_free(&s);
    return 0;
}
