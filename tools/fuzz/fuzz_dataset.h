/* fuzz_dataset.h — what the dataset reader fuzz targets (fuzz_idx.c, fuzz_cifar.c) share: writing
 * an input to a file, plain or gzip'd, and the contract every failed load is held to. A broken
 * contract traps (a finding); a failed write aborts (the target's own fault, not the reader's).
 * Static functions, one copy per target. Built by tools/fuzz/run.sh; not part of the library.
 */
#ifndef TB_FUZZ_DATASET_H
#define TB_FUZZ_DATASET_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dataset.h"
#include "status.h"

/* Writes size bytes of data to path, gzip'd at level 1 if gz (fast: only the content matters). */
static void fuzz_write(const char *path, const uint8_t *data, size_t size, int gz)
{
    if (gz) {
        gzFile g = gzopen(path, "wb1");
        if (!g) abort();
        if (size && gzwrite(g, data, (unsigned)size) != (int)size) abort();
        if (gzclose(g) != Z_OK) abort();
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}

/* Returns whether a load with status st failed, trapping unless the failure kept the contract: a
 * known status, *ds zeroed and a message naming dir. */
static int fuzz_load_failed(int st, const struct dataset *ds, const char *dir)
{
    if (st == TB_OK) return 0;
    struct dataset zero;
    memset(&zero, 0, sizeof zero);
    if (st != TB_EIO && st != TB_EFORMAT && st != TB_ENOMEM) __builtin_trap();
    if (memcmp(ds, &zero, sizeof *ds) != 0) __builtin_trap();
    if (!strstr(tb_error_get(), dir)) __builtin_trap();
    return 1;
}

#endif
