/* test_dataset_util.h — the fixture the dataset reader suites share (test_dataset_idx.c,
 * test_dataset_cifar.c): a fresh temp directory per test, paths in it, writing a buffer plain or
 * gzip'd, and the contract every failed load is held to (its status, a message naming the file and
 * the fault, and a zeroed dataset).
 *
 * Not a test framework: every helper fails the calling test through Criterion's assertions. Static
 * functions only. Threading: none; Criterion runs each test in its own process.
 */
#ifndef TB_TEST_DATASET_UTIL_H
#define TB_TEST_DATASET_UTIL_H

#include "test_util.h"

#include <sys/stat.h>
#include <zlib.h>

#include "dataset.h"
#include "status.h"

/* The running test's directory: made by td_dir_make in the suite's .init, gone after td_dir_remove. */
static char *td_dir;

/* Makes td_dir, a fresh directory /tmp/tb_<tag>_XXXXXX. */
static inline void td_dir_make(const char *tag) { td_dir = tu_mkdtemp(tag); }

/* Criterion .fini: removes td_dir and everything in it. */
static inline void td_dir_remove(void)
{
    if (!td_dir) return; /* .init failed before making it */
    tu_rm_rf(td_dir);
    free(td_dir);
    td_dir = NULL;
}

/* Returns td_dir/name in one of four rotating buffers, so one call may take up to four such paths. */
static inline const char *td_path(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *p = bufs[k++ & 3];
    snprintf(p, 512, "%s/%s", td_dir, name);
    return p;
}

/* Writes len bytes of b to path: plain if gz_mode is NULL, else gzip'd with gzopen's mode gz_mode. */
static inline void td_write(const char *path, const uint8_t *b, size_t len, const char *gz_mode)
{
    if (gz_mode) {
        gzFile g = gzopen(path, gz_mode);
        cr_assert_not_null(g);
        if (len) cr_assert_eq(gzwrite(g, b, (unsigned)len), (int)len);
        cr_assert_eq(gzclose(g), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        if (len) cr_assert_eq(fwrite(b, 1, len, f), len);
        fclose(f);
    }
}

/* Returns the size of the file at path in bytes. */
static inline long td_file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    return (long)st.st_size;
}

/* Asserts every byte of *ds is zero, as a failed load or a rejected request must leave it. */
static inline void td_assert_zeroed(const struct dataset *ds)
{
    struct dataset z;
    memset(&z, 0, sizeof z);
    cr_assert(memcmp(ds, &z, sizeof z) == 0, "dataset not zeroed after a failed load");
}

/* Asserts a failed load into *ds: status r is st, and the message (tb_error_get) names
 * td_path(named) and holds fault, and *ds is zeroed. */
static inline void td_assert_failed(int r, int st, const struct dataset *ds, const char *named, const char *fault)
{
    const char *m = tb_error_get();
    cr_assert_eq(r, st, "status %d (%s), expected %d; message: %s", r, tb_status_name(r), st, m);
    cr_assert(strstr(m, td_path(named)) != NULL, "message does not name %s: %s", named, m);
    cr_assert(strstr(m, fault) != NULL, "message lacks '%s': %s", fault, m);
    td_assert_zeroed(ds);
}

#endif
