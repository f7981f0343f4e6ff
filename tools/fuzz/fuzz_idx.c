/* fuzz_idx.c — libFuzzer target for the IDX reader (idx_load) and dataset_resize.
 *
 * Input layout: byte 0 selects the mode, the rest is a file's content.
 *   bit 0: 0 = the rest is the images file (paired with a fixed good 3-label file),
 *          1 = the rest is the labels file (paired with a fixed good 3-image 4x4 file);
 *   bit 1: gzip-compress the rest before writing it, so fuzzed IDX content also goes through a
 *          valid gzip stream (raw fuzzed bytes already exercise corrupt and truncated gzip).
 * Seeds in tools/fuzz/corpus/idx/ start with this mode byte. Files live in a per-process
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

static char g_dir[128], g_good_images[192], g_good_labels[192], g_fuzz[192];

static void fuzz_cleanup(void)
{
    unlink(g_good_images);
    unlink(g_good_labels);
    unlink(g_fuzz);
    rmdir(g_dir);
}

static void fuzz_setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/dev/shm/tb_fuzz_idx_%d", (int)getpid());
    mkdir(g_dir, 0700);
    snprintf(g_good_images, sizeof g_good_images, "%s/good-images", g_dir);
    snprintf(g_good_labels, sizeof g_good_labels, "%s/good-labels", g_dir);
    snprintf(g_fuzz, sizeof g_fuzz, "%s/fuzz", g_dir);
    uint8_t img[16 + 3 * 16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4};
    for (int i = 0; i < 48; i++) img[16 + i] = (uint8_t)(i * 37);
    uint8_t lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 9, 4};
    fuzz_write(g_good_images, img, sizeof img, 0);
    fuzz_write(g_good_labels, lab, sizeof lab, 0);
    atexit(fuzz_cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        fuzz_setup();
        ready = 1;
    }
    if (size < 1) return 0;
    int mode = data[0];
    fuzz_write(g_fuzz, data + 1, size - 1, mode & 2);
    const char *images = mode & 1 ? g_good_images : g_fuzz;
    const char *labels = mode & 1 ? g_fuzz : g_good_labels;

    struct dataset ds;
    memset(&ds, 0xab, sizeof ds); /* garbage in: a failed load must zero it */
    tb_error_clear();
    int st = idx_load(images, labels, 10, &ds);
    if (fuzz_load_failed(st, &ds, g_dir)) return 0;
    if (ds.n <= 0 || ds.h <= 0 || ds.w <= 0 || ds.c != 1 || !ds.images || !ds.labels) __builtin_trap();
    for (int i = 0; i < ds.n; i++)
        if (ds.labels[i] >= 10) __builtin_trap();
    /* Touch every pixel (ASan sees an undersized buffer) and resample small sets. */
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)ds.n * (size_t)ds.h * (size_t)ds.w; i++) sum += ds.images[i];
    if ((size_t)ds.n * (size_t)ds.h * (size_t)ds.w <= (1u << 16)) {
        struct dataset rs;
        int oh = ds.h / 2 + 1, ow = ds.w * 3 / 2 + 1;
        if (dataset_resize(&ds, oh, ow, 3, &rs) == TB_OK) {
            for (size_t i = 0; i < (size_t)rs.n * (size_t)oh * (size_t)ow * 3; i++) sum += rs.images[i];
            dataset_free(&rs);
        }
    }
    dataset_free(&ds);
    return (int)(sum & 0);
}
