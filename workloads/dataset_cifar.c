/* dataset_cifar.c — CIFAR-10 binary reader: records of 1 label byte + 3072 pixel bytes stored as
 * three 32x32 planes (R, G, B), converted to NHWC; data_batch_1..5.bin is train, test_batch.bin test
 * (each also accepted gzip-compressed as .bin.gz, and inside a cifar-10-batches-bin/ subdirectory).
 *
 * Not CIFAR-100 (two label bytes) and not the Python pickle format. The format has no header, so the
 * checks are: whole records only, labels < 10, a clean gzip stream. Reentrant; on failure the
 * output is zeroed and nothing leaks; the dataset it builds is owned by the caller.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "dataset_io.h"
#include "status.h"

#define CIFAR_SIDE 32
#define CIFAR_PLANE (CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_PIXELS (3 * CIFAR_PLANE)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10
#define CIFAR_PATH_MAX 4096

/* Looks for dir/name and dir/name.gz. 1: path is the first that is a regular file (plain first: it is
 * cheaper to read), and *others counts the other spelling if it is there too. -1: a spelling is there
 * but none can be read: path is the first such and *why its fault. 0: neither is there: path holds the
 * plain spelling, so that the "cannot open" message names the expected file. */
static int cifar_find_file(const char *dir, const char *name, char *path, size_t cap, int *others, const char **why)
{
    enum dsio_presence p[2] = {DSIO_ABSENT, DSIO_ABSENT};
    const char *w[2] = {NULL, NULL};
    for (int e = 0; e < 2; e++) {
        int k = snprintf(path, cap, "%s/%s%s", dir, name, e ? ".gz" : "");
        if (k > 0 && (size_t)k < cap) p[e] = dsio_probe_file(path, &w[e]);
    }
    int pick = -1; /* a regular file over an unusable one; plain over .gz between equals */
    for (int e = 1; e >= 0; e--)
        if (p[e] == DSIO_UNUSABLE) pick = e;
    for (int e = 1; e >= 0; e--)
        if (p[e] == DSIO_REGULAR) pick = e;
    snprintf(path, cap, "%s/%s%s", dir, name, pick == 1 ? ".gz" : "");
    if (pick < 0) return 0;
    if (p[pick] == DSIO_UNUSABLE) {
        *why = w[pick];
        return -1;
    }
    *others += p[1 - pick] != DSIO_ABSENT;
    return 1;
}

static int cifar_has_files(const char *dir)
{
    char p[CIFAR_PATH_MAX];
    const char *why;
    int others = 0;
    /* An unusable file of these names counts: the loader then says what is wrong with it. */
    return cifar_find_file(dir, "data_batch_1.bin", p, sizeof p, &others, &why) != 0 ||
           cifar_find_file(dir, "test_batch.bin", p, sizeof p, &others, &why) != 0;
}

/* The directory holding the batches: dir itself, or the cifar-10-batches-bin/ the tarball unpacks to. */
static int cifar_resolve_dir(const char *dir, char *base, size_t cap)
{
    if (cifar_has_files(dir)) {
        snprintf(base, cap, "%s", dir);
        return 1;
    }
    int k = snprintf(base, cap, "%s/cifar-10-batches-bin", dir);
    return k > 0 && (size_t)k < cap && cifar_has_files(base);
}

int cifar10_probe_dir(const char *dir)
{
    char base[CIFAR_PATH_MAX];
    return cifar_resolve_dir(dir, base, sizeof base);
}

/* Reads one batch file and appends its records to ds (labels checked, CHW planes -> HWC). */
static int cifar_append_file(const char *path, struct dataset *ds)
{
    struct dsio_file f;
    uint8_t *raw = NULL;
    uint64_t n_bytes = 0;
    int st = dsio_open_file(&f, path);
    if (st) return st;
    st = dsio_read_rest(&f, "bytes of records", &raw, &n_bytes);
    dsio_close_file(&f);
    if (st) return st;
    if (n_bytes == 0) {
        st = tb_error_set(TB_EFORMAT, "%s: empty file: no %d-byte records", path, CIFAR_RECORD);
        goto done;
    }
    if (n_bytes % CIFAR_RECORD) {
        st = tb_error_set(TB_EIO, "%s: not whole records (truncated, or bytes added): %llu bytes is %llu whole %d-byte "
                                  "records plus %llu bytes", path,
                          (unsigned long long)n_bytes, (unsigned long long)(n_bytes / CIFAR_RECORD), CIFAR_RECORD,
                          (unsigned long long)(n_bytes % CIFAR_RECORD));
        goto done;
    }
    uint64_t k = n_bytes / CIFAR_RECORD;
    if ((uint64_t)ds->n + k > (uint64_t)INT_MAX) {
        st = tb_error_set(TB_ENOMEM, "%s: too many records (%llu after %d)", path, (unsigned long long)k, ds->n);
        goto done;
    }
    for (uint64_t r = 0; r < k; r++) {
        uint8_t lab = raw[r * CIFAR_RECORD];
        if (lab >= CIFAR_CLASSES) {
            st = tb_error_set(TB_EFORMAT, "%s: label %u in record %llu out of range [0,%d)", path, lab,
                              (unsigned long long)r, CIFAR_CLASSES);
            goto done;
        }
    }
    size_t n_new = (size_t)ds->n + (size_t)k;
    uint8_t *im = realloc(ds->images, n_new * CIFAR_PIXELS);
    if (!im) {
        st = tb_error_set(TB_ENOMEM, "%s: cannot allocate %zu images", path, n_new);
        goto done;
    }
    ds->images = im;
    int32_t *lb = realloc(ds->labels, n_new * sizeof(int32_t));
    if (!lb) {
        st = tb_error_set(TB_ENOMEM, "%s: cannot allocate %zu labels", path, n_new);
        goto done;
    }
    ds->labels = lb;
    for (uint64_t r = 0; r < k; r++) {
        const uint8_t *rec = raw + r * CIFAR_RECORD;                    // label, then (3,32,32) CHW
        uint8_t *dst = ds->images + ((size_t)ds->n + r) * CIFAR_PIXELS; // (32,32,3) HWC
        ds->labels[ds->n + r] = rec[0];
        for (int p = 0; p < CIFAR_PLANE; p++) {
            dst[3 * p + 0] = rec[1 + p];
            dst[3 * p + 1] = rec[1 + CIFAR_PLANE + p];
            dst[3 * p + 2] = rec[1 + 2 * CIFAR_PLANE + p];
        }
    }
    ds->n = (int)n_new;
done:
    free(raw);
    return st;
}

int cifar10_load_dir(const char *dir, int train, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) return tb_error_set(TB_EINVAL, "cifar10_load_dir: empty directory name");
    if (strlen(dir) > CIFAR_PATH_MAX - 64) return tb_error_set(TB_EINVAL, "%s: directory name too long", dir);
    char base[CIFAR_PATH_MAX], path[CIFAR_PATH_MAX], name[32];
    if (!cifar_resolve_dir(dir, base, sizeof base)) snprintf(base, sizeof base, "%s", dir);
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    int n_files = train ? 5 : 1, st = TB_OK, others = 0, n_chosen = 0;
    char chosen[128] = ""; /* the files read that had another spelling beside them (5 at most), for the note */
    for (int i = 0; i < n_files; i++) {
        if (train)
            snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        else
            snprintf(name, sizeof name, "test_batch.bin");
        const char *why = NULL;
        int had = others;
        int r = cifar_find_file(base, name, path, sizeof path, &others, &why); /* missing: open names the .bin */
        if (r < 0) {
            dataset_free(&ds);
            return tb_error_set(TB_EIO, "%s: cannot open: %s", path, why);
        }
        if (others > had) {
            size_t used = strlen(chosen);
            snprintf(chosen + used, sizeof chosen - used, "%s%s", n_chosen++ ? ", " : "", strrchr(path, '/') + 1);
        }
        if ((st = cifar_append_file(path, &ds))) {
            dataset_free(&ds);
            return st;
        }
    }
    ds.h = CIFAR_SIDE;
    ds.w = CIFAR_SIDE;
    ds.c = 3;
    ds.n_classes = CIFAR_CLASSES;
    snprintf(ds.name, sizeof ds.name, "cifar10");
    snprintf(ds.source, sizeof ds.source, "%.*s", (int)sizeof ds.source - 1, base);
    /* A .bin.gz beside its .bin (or the reverse) was left: say which was read, as the IDX reader does (a long
     * directory name is cut, so that the file names and the words after them stay). */
    if (others)
        snprintf(ds.note, sizeof ds.note, "%.*s: read %s; %d other spelling%s of %s left unread",
                 (int)(sizeof ds.note - sizeof chosen - 64), base, chosen, others, others == 1 ? "" : "s",
                 n_chosen == 1 ? "it" : "them");
    *out = ds;
    return TB_OK;
}
