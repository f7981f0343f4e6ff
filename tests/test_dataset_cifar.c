/* test_dataset_cifar.c — the CIFAR-10 binary reader on generated good and bad batches (plain and
 * gzip), dataset_load_dir's detection of CIFAR, and the synthetic dataset (determinism, label
 * range, and that a nearest-class-mean classifier learns it).
 *
 * Each cifar test works in its own mkdtemp directory, removed in the fini hook. Every bad case
 * checks the status, that the message names the file and the fault, and that the output is zeroed.
 */
#include "test_dataset_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "status.h"

#define REC 3073

static void dir_make(void) { td_dir_make("test_cifar"); }

TestSuite(cifar, .init = dir_make, .fini = td_dir_remove);
TestSuite(synthetic);

/* Channel ch of pixel p of global record r: distinct per (r, ch, p), pseudo-random for gzip. */
static uint8_t val(int r, int ch, int p) { return (uint8_t)(((unsigned)(r * 3 + ch) * 1031u + (unsigned)p * 2654435761u) >> 7); }

static int label_of(int r) { return (r * 3 + 1) % 10; }

/* n records starting at global record r0, in the on-disk layout (label, R plane, G plane, B plane). */
static uint8_t *make_batch(int r0, int n)
{
    uint8_t *b = malloc((size_t)n * REC);
    for (int r = 0; r < n; r++) {
        uint8_t *rec = b + (size_t)r * REC;
        rec[0] = (uint8_t)label_of(r0 + r);
        for (int ch = 0; ch < 3; ch++)
            for (int p = 0; p < 1024; p++) rec[1 + ch * 1024 + p] = val(r0 + r, ch, p);
    }
    return b;
}

/* Plain, or gzip at level 6: the corrupt and truncated cases cut streams made at this level. */
static void write_file(const char *path, const uint8_t *b, size_t len, int gz)
{
    td_write(path, b, len, gz ? "wb6" : NULL);
}

static void write_batch(const char *name, int r0, int n, int gz)
{
    uint8_t *b = make_batch(r0, n);
    write_file(td_path(name), b, (size_t)n * REC, gz);
    free(b);
}

static void expect_fail(int train, int st, const char *named, const char *fault)
{
    struct dataset ds;
    memset(&ds, 0xab, sizeof ds);
    tb_error_clear();
    int r = cifar10_load_dir(td_dir, train, &ds);
    td_assert_failed(r, st, &ds, named, fault);
}

/* Checks records [0, n) against the generator, in HWC. */
static void check_records(const struct dataset *ds, int n)
{
    cr_assert_eq(ds->n, n);
    cr_assert_eq(ds->h, 32);
    cr_assert_eq(ds->w, 32);
    cr_assert_eq(ds->c, 3);
    cr_assert_eq(ds->n_classes, 10);
    cr_assert_str_eq(ds->name, "cifar10");
    for (int r = 0; r < n; r++) {
        cr_assert_eq(ds->labels[r], label_of(r), "label of record %d", r);
        const uint8_t *img = ds->images + (size_t)r * 3072; // (32,32,3)
        for (int p = 0; p < 1024; p++)
            for (int ch = 0; ch < 3; ch++)
                cr_assert_eq(img[3 * p + ch], val(r, ch, p), "record %d pixel %d channel %d", r, p, ch);
    }
}

Test(cifar, good_test_split_plain)
{
    write_batch("test_batch.bin", 0, 3, 0);
    struct dataset ds;
    cr_assert_eq(cifar10_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    check_records(&ds, 3);
    cr_assert_str_eq(ds.source, td_dir);
    dataset_free(&ds);
}

Test(cifar, good_train_split_mixed_gzip)
{
    int sizes[5] = {4, 1, 7, 2, 5}, r0 = 0;
    char name[64];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "data_batch_%d.bin%s", i + 1, i % 2 ? ".gz" : "");
        write_batch(name, r0, sizes[i], i % 2);
        r0 += sizes[i];
    }
    struct dataset ds;
    cr_assert_eq(cifar10_load_dir(td_dir, 1, &ds), TB_OK, "%s", tb_error_get());
    check_records(&ds, r0);
    dataset_free(&ds);
    /* dataset_load_dir recognises it; the test split is missing there. */
    cr_assert_eq(dataset_load_dir(td_dir, 1, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(ds.name, "cifar10");
    cr_assert_eq(ds.n, r0);
    dataset_free(&ds);
    expect_fail(0, TB_EIO, "test_batch.bin", "cannot open: No such file");
}

Test(cifar, batches_subdirectory)
{
    cr_assert_eq(mkdir(td_path("cifar-10-batches-bin"), 0700), 0);
    write_batch("cifar-10-batches-bin/test_batch.bin.gz", 0, 2, 1);
    struct dataset ds;
    cr_assert_eq(dataset_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    check_records(&ds, 2);
    cr_assert(strstr(ds.source, "cifar-10-batches-bin") != NULL, "%s", ds.source);
    dataset_free(&ds);
}

Test(cifar, missing_batch)
{
    write_batch("data_batch_1.bin", 0, 1, 0);
    write_batch("data_batch_2.bin", 1, 1, 0);
    write_batch("data_batch_4.bin", 2, 1, 0);
    write_batch("data_batch_5.bin", 3, 1, 0);
    expect_fail(1, TB_EIO, "data_batch_3.bin", "cannot open: No such file");
}

Test(cifar, truncated_plain)
{
    uint8_t *b = make_batch(0, 3);
    write_file(td_path("test_batch.bin"), b, 2 * REC + 100, 0);
    expect_fail(0, TB_EIO, "test_batch.bin", "not whole records (truncated, or bytes added): 6246 bytes is 2 whole 3073-byte records plus 100 bytes");
    write_file(td_path("test_batch.bin"), b, 10, 0);
    expect_fail(0, TB_EIO, "test_batch.bin", "(truncated, or bytes added): 10 bytes is 0 whole");
    free(b);
}

Test(cifar, truncated_gzip)
{
    write_batch("test_batch.bin.gz", 0, 4, 1);
    long sz = td_file_size(td_path("test_batch.bin.gz"));
    cr_assert_eq(truncate(td_path("test_batch.bin.gz"), sz / 2), 0);
    expect_fail(0, TB_EIO, "test_batch.bin.gz", "truncated: gzip stream ends early");
    write_batch("test_batch.bin.gz", 0, 4, 1);
    cr_assert_eq(truncate(td_path("test_batch.bin.gz"), sz - 2), 0);
    expect_fail(0, TB_EIO, "test_batch.bin.gz", "truncated");
}

Test(cifar, corrupt_gzip)
{
    for (int k = 0; k < 6; k++) {
        write_batch("test_batch.bin.gz", 0, 4, 1);
        long sz = td_file_size(td_path("test_batch.bin.gz"));
        FILE *f = fopen(td_path("test_batch.bin.gz"), "r+b");
        cr_assert_not_null(f);
        long at = sz / 4 + k * (sz / 12);
        uint8_t buf[4];
        fseek(f, at, SEEK_SET);
        cr_assert_eq(fread(buf, 1, 4, f), 4u);
        for (int i = 0; i < 4; i++) buf[i] ^= 0xff;
        fseek(f, at, SEEK_SET);
        fwrite(buf, 1, 4, f);
        fclose(f);
        expect_fail(0, TB_EFORMAT, "test_batch.bin.gz", "corrupt gzip stream");
    }
}

Test(cifar, label_out_of_range)
{
    uint8_t *b = make_batch(0, 3);
    b[REC] = 10; /* record 1 */
    write_file(td_path("test_batch.bin"), b, 3 * REC, 0);
    expect_fail(0, TB_EFORMAT, "test_batch.bin", "label 10 in record 1 out of range [0,10)");
    free(b);
}

Test(cifar, empty_file)
{
    write_file(td_path("test_batch.bin"), NULL, 0, 0);
    expect_fail(0, TB_EFORMAT, "test_batch.bin", "empty file");
    unlink(td_path("test_batch.bin"));
    write_file(td_path("test_batch.bin.gz"), NULL, 0, 1);
    expect_fail(0, TB_EFORMAT, "test_batch.bin.gz", "empty file");
}

/* Non-gzip bytes after a batch's gzip stream were dropped in silence (zlib's gzread stops there): now an
 * error naming the file. Concatenated members are one file: their records in order. */
Test(cifar, gzip_trailing_garbage_and_members)
{
    write_batch("test_batch.bin.gz", 0, 2, 1);
    long at = td_file_size(td_path("test_batch.bin.gz"));
    FILE *f = fopen(td_path("test_batch.bin.gz"), "ab");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite("JUNKJUNK", 1, 8, f), 8u);
    fclose(f);
    char want[96];
    snprintf(want, sizeof want, "trailing data after the gzip stream: 8 bytes at offset %ld", at);
    expect_fail(0, TB_EFORMAT, "test_batch.bin.gz", want);
    /* Records 0..1 in one member, 2..4 in a second, the cut inside record 2. */
    uint8_t *b = make_batch(0, 5);
    write_file(td_path("test_batch.bin.gz"), b, 2 * REC + 100, 1);
    gzFile g = gzopen(td_path("test_batch.bin.gz"), "ab6");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, b + 2 * REC + 100, 3 * REC - 100), 3 * REC - 100);
    cr_assert_eq(gzclose(g), Z_OK);
    struct dataset ds;
    cr_assert_eq(cifar10_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    check_records(&ds, 5);
    dataset_free(&ds);
    free(b);
}

/* A .bin.gz beside a differing .bin was read without a word (the IDX reader says which spelling it read):
 * the plain file is read and the note says so, naming the batches that had a choice. */
Test(cifar, plain_beside_gzip_says_which_was_read)
{
    write_batch("test_batch.bin", 0, 3, 0);
    write_batch("test_batch.bin.gz", 7, 2, 1);
    struct dataset ds;
    cr_assert_eq(cifar10_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    check_records(&ds, 3);
    cr_assert(strstr(ds.note, td_dir) && strstr(ds.note, "read test_batch.bin;") &&
                  strstr(ds.note, "1 other spelling of it left unread"),
              "%s", ds.note);
    dataset_free(&ds);
    int r0 = 0;
    char name[64];
    for (int i = 0; i < 5; i++, r0 += 2) {
        snprintf(name, sizeof name, "data_batch_%d.bin", i + 1);
        write_batch(name, r0, 2, 0);
    }
    write_batch("data_batch_2.bin.gz", 0, 1, 1);
    write_batch("data_batch_5.bin.gz", 0, 1, 1);
    cr_assert_eq(dataset_load_dir(td_dir, 1, &ds), TB_OK, "%s", tb_error_get());
    check_records(&ds, 10);
    cr_assert(strstr(ds.note, "read data_batch_2.bin, data_batch_5.bin; 2 other spellings of them left unread"), "%s",
              ds.note);
    dataset_free(&ds);
    /* One spelling only: no note. */
    cr_assert_eq(unlink(td_path("test_batch.bin.gz")), 0);
    cr_assert_eq(cifar10_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(ds.note, "");
    dataset_free(&ds);
}

/* A batch that is there but cannot be read (a directory, a FIFO, a link loop) is named with its fault, not
 * reported missing ("No such file", or "no dataset found" from dataset_load_dir). */
Test(cifar, unusable_batch_says_why)
{
    write_batch("data_batch_1.bin", 0, 1, 0);
    cr_assert_eq(mkdir(td_path("test_batch.bin"), 0700), 0);
    expect_fail(0, TB_EIO, "test_batch.bin", "cannot open: is a directory");
    cr_assert_eq(rmdir(td_path("test_batch.bin")), 0);
    cr_assert_eq(mkfifo(td_path("test_batch.bin.gz"), 0600), 0);
    expect_fail(0, TB_EIO, "test_batch.bin.gz", "cannot open: not a regular file");
    cr_assert_eq(unlink(td_path("data_batch_1.bin")), 0);
    cr_assert_eq(symlink("data_batch_1.bin", td_path("data_batch_1.bin")), 0);
    struct dataset ds;
    memset(&ds, 0xab, sizeof ds);
    td_assert_failed(dataset_load_dir(td_dir, 1, &ds), TB_EIO, &ds, "data_batch_1.bin",
                     "Too many levels of symbolic links");
}

Test(cifar, resize_to_grey)
{
    write_batch("test_batch.bin", 0, 2, 0);
    struct dataset ds, grey;
    cr_assert_eq(cifar10_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_eq(dataset_resize(&ds, 32, 32, 1, &grey), TB_OK, "%s", tb_error_get());
    for (int r = 0; r < 2; r++)
        for (int p = 0; p < 1024; p++) {
            int mean = (val(r, 0, p) + val(r, 1, p) + val(r, 2, p));
            int got = grey.images[r * 1024 + p] * 3;
            cr_assert_leq(abs(got - mean), 2, "record %d pixel %d", r, p);
        }
    dataset_free(&grey);
    dataset_free(&ds);
}

/* -------- synthetic -------- */

Test(synthetic, deterministic_and_prefix_stable)
{
    struct dataset a, b, c, t;
    cr_assert_eq(dataset_synthetic(100, 12, 10, 3, 10, 42, 1, &a), TB_OK, "%s", tb_error_get());
    cr_assert_eq(dataset_synthetic(100, 12, 10, 3, 10, 42, 1, &b), TB_OK);
    cr_assert_eq(memcmp(a.images, b.images, 100 * 360), 0);
    cr_assert_eq(memcmp(a.labels, b.labels, 100 * sizeof *a.labels), 0);
    cr_assert_str_eq(a.name, "synthetic");
    dataset_free(&b);
    /* Sample i does not depend on n. */
    cr_assert_eq(dataset_synthetic(37, 12, 10, 3, 10, 42, 1, &c), TB_OK);
    cr_assert_eq(memcmp(a.images, c.images, 37 * 360), 0);
    cr_assert_eq(memcmp(a.labels, c.labels, 37 * sizeof *a.labels), 0);
    dataset_free(&c);
    /* Another seed and the other split differ. */
    cr_assert_eq(dataset_synthetic(100, 12, 10, 3, 10, 43, 1, &c), TB_OK);
    cr_assert_neq(memcmp(a.images, c.images, 100 * 360), 0);
    cr_assert_eq(dataset_synthetic(100, 12, 10, 3, 10, 42, 0, &t), TB_OK);
    cr_assert_neq(memcmp(a.images, t.images, 100 * 360), 0);
    dataset_free(&c);
    dataset_free(&t);
    dataset_free(&a);
}

Test(synthetic, labels_cover_range)
{
    struct dataset a;
    cr_assert_eq(dataset_synthetic(2000, 4, 4, 1, 7, 1, 1, &a), TB_OK);
    int count[7] = {0};
    for (int i = 0; i < a.n; i++) {
        cr_assert_lt(a.labels[i], 7);
        count[a.labels[i]]++;
    }
    for (int k = 0; k < 7; k++) cr_assert_gt(count[k], 200, "class %d has %d samples", k, count[k]);
    dataset_free(&a);
}

/* Learnable: class means estimated on train classify the test split well. */
Test(synthetic, nearest_class_mean_learns_it)
{
    struct dataset tr, te;
    const int h = 28, w = 28, per = h * w, K = 10;
    cr_assert_eq(dataset_synthetic(2000, h, w, 1, K, 7, 1, &tr), TB_OK);
    cr_assert_eq(dataset_synthetic(500, h, w, 1, K, 7, 0, &te), TB_OK);
    double *mean = calloc((size_t)K * per, sizeof(double));
    int count[10] = {0};
    for (int i = 0; i < tr.n; i++) {
        count[tr.labels[i]]++;
        for (int p = 0; p < per; p++) mean[tr.labels[i] * per + p] += tr.images[i * per + p];
    }
    for (int k = 0; k < K; k++)
        for (int p = 0; p < per; p++) mean[k * per + p] /= count[k] ? count[k] : 1;
    int correct = 0;
    for (int i = 0; i < te.n; i++) {
        int best = 0;
        double bd = 1e300;
        for (int k = 0; k < K; k++) {
            double d = 0;
            for (int p = 0; p < per; p++) {
                double e = te.images[i * per + p] - mean[k * per + p];
                d += e * e;
            }
            if (d < bd) bd = d, best = k;
        }
        correct += best == te.labels[i];
    }
    cr_assert_gt(correct, 450, "nearest-mean accuracy %d/500", correct);
    free(mean);
    dataset_free(&tr);
    dataset_free(&te);
}

Test(synthetic, rejects_bad_arguments)
{
    struct dataset a;
    memset(&a, 0xab, sizeof a);
    cr_assert_eq(dataset_synthetic(0, 4, 4, 1, 10, 1, 1, &a), TB_EINVAL);
    td_assert_zeroed(&a);
    cr_assert_eq(dataset_synthetic(10, 4, 4, 1, 0, 1, 1, &a), TB_EINVAL);
    cr_assert_eq(dataset_synthetic(10, 4, 4, 1, DATASET_MAX_CLASSES + 1, 1, 1, &a), TB_EINVAL); /* labels are int32 now: 300 is fine */
    cr_assert_eq(dataset_synthetic(10, 1 << 20, 1 << 20, 3, 10, 1, 1, &a), TB_ENOMEM);
    td_assert_zeroed(&a);
}
