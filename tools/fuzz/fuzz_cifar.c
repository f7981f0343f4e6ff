/* fuzz_cifar.c — libFuzzer target for the CIFAR-10 binary reader, dataset_load_dir and dataset_resize.
 *
 * Input layout: byte 0 selects the mode, the rest is the content of test_batch.bin.
 *   bit 1: gzip-compress the rest before writing it (raw fuzzed bytes already exercise corrupt
 *          and truncated gzip streams, since the reader sniffs gzip by content, not by name);
 *   bit 2: load through dataset_load_dir (format detection) instead of cifar10_load_dir.
 * Seeds in tools/fuzz/corpus/cifar/ start with this mode byte. Files live in a per-process
 * directory under /dev/shm, removed at exit. Besides sanitizer findings, the target traps on a
 * broken contract: a failure must leave a zeroed dataset and a message naming the file; a success
 * must have labels in range. Built and run by tools/fuzz/run.sh; not part of the library.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "fuzz_dataset.h"
#include "status.h"

static char g_dir[128], g_fuzz[192];

static void fuzz_cleanup(void)
{
    unlink(g_fuzz);
    rmdir(g_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        snprintf(g_dir, sizeof g_dir, "/dev/shm/tb_fuzz_cifar_%d", (int)getpid());
        mkdir(g_dir, 0700);
        snprintf(g_fuzz, sizeof g_fuzz, "%s/test_batch.bin", g_dir);
        atexit(fuzz_cleanup);
        ready = 1;
    }
    if (size < 1) return 0;
    int mode = data[0];
    fuzz_write(g_fuzz, data + 1, size - 1, mode & 2);

    struct dataset ds;
    memset(&ds, 0xab, sizeof ds); /* garbage in: a failed load must zero it */
    tb_error_clear();
    int st = mode & 4 ? dataset_load_dir(g_dir, 0, &ds) : cifar10_load_dir(g_dir, 0, &ds);
    if (fuzz_load_failed(st, &ds, g_dir)) return 0;
    if (ds.n <= 0 || ds.h != 32 || ds.w != 32 || ds.c != 3 || !ds.images || !ds.labels) __builtin_trap();
    unsigned sum = 0;
    for (int i = 0; i < ds.n; i++) {
        if (ds.labels[i] >= 10) __builtin_trap();
        for (int p = 0; p < 3072; p++) sum += ds.images[(size_t)i * 3072 + p];
    }
    if (ds.n <= 8) {
        struct dataset rs;
        if (dataset_resize(&ds, 16, 20, 1, &rs) == TB_OK) {
            for (size_t i = 0; i < (size_t)rs.n * 16 * 20; i++) sum += rs.images[i];
            dataset_free(&rs);
        }
    }
    dataset_free(&ds);
    return (int)(sum & 0);
}
