/* test_dataset_idx.c — the IDX reader on generated good and bad files (plain and gzip), the
 * directory loader's file-name variants, dataset_resize on tiny known images, and (when Debian's
 * dataset-fashion-mnist is installed) the real Fashion-MNIST files.
 *
 * Each test works in its own mkdtemp directory, removed in the fini hook. Every bad case checks the
 * status, that the message names the file and the fault, and that the dataset came back zeroed.
 */
#include "test_dataset_util.h"

#include <criterion/criterion.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataset.h"
#include "status.h"

static void dir_make(void) { td_dir_make("test_idx"); }

TestSuite(idx, .init = dir_make, .fini = td_dir_remove);
TestSuite(resize);

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Pixel i of the generated images: pseudo-random so gzip cannot shrink it to nothing. */
static uint8_t pix(size_t i) { return (uint8_t)((i * 2654435761u) >> 13); }

/* An IDX image file image in memory: header (magic, n, h, w) then n*h*w pixels (only if small). */
static uint8_t *make_images(uint32_t magic, uint32_t n, uint32_t h, uint32_t w, size_t *len)
{
    uint64_t np = (uint64_t)n * h * w;
    if (np > (1u << 24)) np = 0; /* absurd headers get no payload */
    *len = 16 + (size_t)np;
    uint8_t *b = malloc(*len);
    put_be32(b, magic);
    put_be32(b + 4, n);
    put_be32(b + 8, h);
    put_be32(b + 12, w);
    for (size_t i = 0; i < np; i++) b[16 + i] = pix(i);
    return b;
}

static uint8_t *make_labels(uint32_t magic, uint32_t n, int n_classes, size_t *len)
{
    *len = 8 + n;
    uint8_t *b = malloc(*len);
    put_be32(b, magic);
    put_be32(b + 4, n);
    for (uint32_t i = 0; i < n; i++) b[8 + i] = (uint8_t)((i * 7 + 3) % (uint32_t)n_classes);
    return b;
}

/* Plain, or gzip at level 9: the corrupt and truncated cases cut streams made at this level. */
static void write_file(const char *path, const uint8_t *b, size_t len, int gz)
{
    td_write(path, b, len, gz ? "wb9" : NULL);
}

/* XORs 0xff into n bytes of path starting at offset. */
static void flip_bytes(const char *path, long offset, int n)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    for (int i = 0; i < n; i++) {
        fseek(f, offset + i, SEEK_SET);
        int c = fgetc(f);
        fseek(f, offset + i, SEEK_SET);
        fputc(c ^ 0xff, f);
    }
    fclose(f);
}

/* Writes a good pair (n images of h x w, n labels) under the given names. */
static void write_pair(const char *img, const char *lab, uint32_t n, uint32_t h, uint32_t w, int gz)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, n, h, w, &li), *bl = make_labels(0x801, n, 10, &ll);
    write_file(td_path(img), bi, li, gz);
    write_file(td_path(lab), bl, ll, gz);
    free(bi);
    free(bl);
}

/* Loads and expects failure with status st and a message containing the path and `fault`. */
static void expect_fail(const char *img, const char *lab, int st, const char *named, const char *fault)
{
    struct dataset ds;
    memset(&ds, 0xab, sizeof ds); /* garbage in: the reader must zero it */
    tb_error_clear();
    int r = idx_load(td_path(img), td_path(lab), 10, &ds);
    td_assert_failed(r, st, &ds, named, fault);
}

static void check_good(const struct dataset *ds, uint32_t n, uint32_t h, uint32_t w)
{
    cr_assert_eq(ds->n, (int)n);
    cr_assert_eq(ds->h, (int)h);
    cr_assert_eq(ds->w, (int)w);
    cr_assert_eq(ds->c, 1);
    cr_assert_eq(ds->n_classes, 10);
    for (size_t i = 0; i < (size_t)n * h * w; i++) cr_assert_eq(ds->images[i], pix(i), "pixel %zu", i);
    for (uint32_t i = 0; i < n; i++) cr_assert_eq(ds->labels[i], (i * 7 + 3) % 10);
}

Test(idx, good_plain)
{
    write_pair("a-images", "a-labels", 7, 5, 6, 0);
    struct dataset ds;
    cr_assert_eq(idx_load(td_path("a-images"), td_path("a-labels"), 10, &ds), TB_OK, "%s", tb_error_get());
    check_good(&ds, 7, 5, 6);
    cr_assert_str_eq(ds.name, "idx");
    dataset_free(&ds);
    td_assert_zeroed(&ds);
    dataset_free(&ds); /* safe twice */
}

Test(idx, good_gzip_large)
{
    /* Larger than the reader's first buffer guess would be for a tiny file: exercises growth. */
    write_pair("a-images.gz", "a-labels.gz", 3000, 28, 28, 1);
    struct dataset ds;
    cr_assert_eq(idx_load(td_path("a-images.gz"), td_path("a-labels.gz"), 10, &ds), TB_OK, "%s", tb_error_get());
    check_good(&ds, 3000, 28, 28);
    dataset_free(&ds);
}

Test(idx, gzip_of_constant_data_grows_buffer)
{
    /* All-zero pixels compress ~1000:1, far past the first buffer guess (8x file + 1 MiB). */
    uint32_t n = 20000, h = 28, w = 28;
    size_t len = 16 + (size_t)n * h * w, ll;
    uint8_t *b = calloc(len, 1), *bl = make_labels(0x801, n, 10, &ll);
    put_be32(b, 0x803);
    put_be32(b + 4, n);
    put_be32(b + 8, h);
    put_be32(b + 12, w);
    write_file(td_path("z-images.gz"), b, len, 1);
    write_file(td_path("z-labels"), bl, ll, 0);
    cr_assert_lt(td_file_size(td_path("z-images.gz")) * 8 + (1 << 20), (long)len - 16);
    struct dataset ds;
    cr_assert_eq(idx_load(td_path("z-images.gz"), td_path("z-labels"), 10, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_eq(ds.n, (int)n);
    for (size_t i = 0; i < len - 16; i++) cr_assert_eq(ds.images[i], 0);
    dataset_free(&ds);
    free(b);
    free(bl);
}

Test(idx, load_dir_name_variants)
{
    write_pair("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 9, 4, 4, 1);
    write_pair("t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte", 5, 4, 4, 0);
    struct dataset ds;
    cr_assert_eq(idx_load_dir(td_dir, 1, &ds), TB_OK, "%s", tb_error_get());
    check_good(&ds, 9, 4, 4);
    cr_assert_str_eq(ds.name, "idx"); /* neither MNIST nor Fashion-MNIST: the format's name */
    cr_assert_str_eq(ds.source, td_dir);
    dataset_free(&ds);
    cr_assert_eq(idx_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    check_good(&ds, 5, 4, 4);
    dataset_free(&ds);
    cr_assert_eq(dataset_load_dir(td_dir, 0, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_eq(ds.n, 5);
    dataset_free(&ds);
}

/* A directory that leaves a choice: a plain copy beside its .gz is read (plain first) and the dataset's note says
 * which files were read and that others were left; an IDX set beside CIFAR-10 batches is refused. */
Test(idx, load_dir_with_a_choice_says_so_or_refuses)
{
    write_pair("train-images-idx3-ubyte", "train-labels-idx1-ubyte", 9, 4, 4, 0);
    write_pair("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 5, 4, 4, 1);
    struct dataset ds;
    cr_assert_eq(idx_load_dir(td_dir, 1, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_eq(ds.n, 9, "the plain copy is read");
    cr_assert(strstr(ds.note, "train-images-idx3-ubyte") && strstr(ds.note, "2 other spellings"), "%s", ds.note);
    dataset_free(&ds);
    write_file(td_path("data_batch_1.bin"), (const uint8_t *)"x", 1, 0);
    cr_assert_eq(dataset_load_dir(td_dir, 1, &ds), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "both an IDX set and CIFAR-10"), "%s", tb_error_get());
}

/* The name is the contents', not the folder's (test_small_refusals.c has the recognised sets). */
Test(idx, load_dir_fashion_name)
{
    char sub[512];
    snprintf(sub, sizeof sub, "%s/My-Fashion-set", td_dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    write_pair("My-Fashion-set/t10k-images-idx3-ubyte", "My-Fashion-set/t10k-labels-idx1-ubyte", 3, 2, 2, 0);
    struct dataset ds;
    cr_assert_eq(idx_load_dir(sub, 0, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(ds.name, "idx");
    dataset_free(&ds);
}

Test(idx, load_dir_missing_files)
{
    struct dataset ds;
    memset(&ds, 0xab, sizeof ds);
    cr_assert_eq(idx_load_dir(td_dir, 1, &ds), TB_EIO);
    cr_assert(strstr(tb_error_get(), td_dir) && strstr(tb_error_get(), "no train images file"), "%s", tb_error_get());
    td_assert_zeroed(&ds);
    write_pair("t10k-images-idx3-ubyte", "unrelated", 3, 2, 2, 0);
    cr_assert_eq(idx_load_dir(td_dir, 0, &ds), TB_EIO);
    cr_assert(strstr(tb_error_get(), "no test labels file"), "%s", tb_error_get());
    td_assert_zeroed(&ds);
}

Test(idx, load_dir_neither_format)
{
    struct dataset ds;
    memset(&ds, 0xab, sizeof ds);
    cr_assert_eq(dataset_load_dir(td_dir, 1, &ds), TB_EIO);
    cr_assert(strstr(tb_error_get(), td_dir) && strstr(tb_error_get(), "no dataset found"), "%s", tb_error_get());
    td_assert_zeroed(&ds);
    /* A folder that is not there (a data set not yet fetched): said so, with what a data set folder holds. */
    cr_assert_eq(dataset_load_dir(td_path("nope"), 1, &ds), TB_EIO);
    cr_assert(strstr(tb_error_get(), "nope: no such directory") && strstr(tb_error_get(), "train-images-idx3-ubyte") &&
                  strstr(tb_error_get(), "data_batch_1.bin"),
              "%s", tb_error_get());
}

Test(idx, missing_file)
{
    write_pair("img", "lab", 3, 2, 2, 0);
    expect_fail("nope", "lab", TB_EIO, "nope", "cannot open: No such file");
    expect_fail("img", "nope.gz", TB_EIO, "nope.gz", "cannot open: No such file");
}

Test(idx, not_a_regular_file)
{
    write_pair("img", "lab", 3, 2, 2, 0);
    cr_assert_eq(mkdir(td_path("adir"), 0700), 0);
    expect_fail("adir", "lab", TB_EIO, "adir", "not a regular file");
}

Test(idx, wrong_magic)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x802, 3, 2, 2, &li), *bl = make_labels(0x801, 3, 10, &ll);
    write_file(td_path("img.gz"), bi, li, 1);
    write_file(td_path("lab"), bl, ll, 0);
    expect_fail("img.gz", "lab", TB_EFORMAT, "img.gz", "bad magic 0x00000802, expected 0x00000803");
    /* Swapped arguments: a labels file where images are expected. */
    expect_fail("lab", "img.gz", TB_EFORMAT, "lab", "bad magic 0x00000801");
    free(bi);
    bi = make_images(0x803, 3, 2, 2, &li);
    write_file(td_path("img"), bi, li, 0);
    put_be32(bl, 0x00000d01); /* float labels */
    write_file(td_path("lab"), bl, ll, 0);
    expect_fail("img", "lab", TB_EFORMAT, "lab", "bad magic 0x00000d01");
    free(bi);
    free(bl);
}

Test(idx, truncated_plain)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 100, 28, 28, &li), *bl = make_labels(0x801, 100, 10, &ll);
    write_file(td_path("img"), bi, 16 + 1200, 0);
    write_file(td_path("lab"), bl, ll, 0);
    expect_fail("img", "lab", TB_EIO, "img", "truncated: expected 78400 bytes of pixels, got 1200");
    write_file(td_path("img"), bi, li, 0);
    write_file(td_path("lab"), bl, ll - 1, 0);
    expect_fail("img", "lab", TB_EIO, "lab", "truncated: expected 100 bytes of labels, got 99");
    write_file(td_path("img"), bi, 3, 0); /* not even a magic */
    expect_fail("img", "lab", TB_EIO, "img", "truncated: expected 4 bytes of IDX magic, got 3");
    write_file(td_path("img"), bi, 0, 0); /* empty */
    expect_fail("img", "lab", TB_EIO, "img", "truncated: expected 4 bytes of IDX magic, got 0");
    write_file(td_path("img"), bi, 10, 0);
    expect_fail("img", "lab", TB_EIO, "img", "truncated: expected 12 bytes of IDX dimensions, got 6");
    free(bi);
    free(bl);
}

Test(idx, truncated_gzip)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 100, 28, 28, &li), *bl = make_labels(0x801, 100, 10, &ll);
    write_file(td_path("img.gz"), bi, li, 1);
    write_file(td_path("lab"), bl, ll, 0);
    long sz = td_file_size(td_path("img.gz"));
    cr_assert_eq(truncate(td_path("img.gz"), sz / 2), 0);
    expect_fail("img.gz", "lab", TB_EIO, "img.gz", "truncated: expected 78400 bytes of pixels, got");
    cr_assert(strstr(tb_error_get(), "gzip stream ends early"), "%s", tb_error_get());
    /* Cut inside the 8-byte trailer: every pixel inflates, but the CRC cannot be checked. */
    write_file(td_path("img.gz"), bi, li, 1);
    cr_assert_eq(truncate(td_path("img.gz"), sz - 3), 0);
    expect_fail("img.gz", "lab", TB_EIO, "img.gz", "truncated: gzip stream ends before its trailer");
    /* A gzip file cut inside its 10-byte gzip header. */
    write_file(td_path("img.gz"), bi, li, 1);
    cr_assert_eq(truncate(td_path("img.gz"), 5), 0);
    expect_fail("img.gz", "lab", TB_EIO, "img.gz", "truncated");
    free(bi);
    free(bl);
}

Test(idx, corrupt_gzip)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 100, 28, 28, &li), *bl = make_labels(0x801, 100, 10, &ll);
    write_file(td_path("lab"), bl, ll, 0);
    /* Flip bytes at several places in the middle of the deflate stream; every one must be caught
     * (bad block data, or a CRC/length mismatch when the stream is read to its end). */
    for (int k = 0; k < 8; k++) {
        write_file(td_path("img.gz"), bi, li, 1);
        long sz = td_file_size(td_path("img.gz"));
        flip_bytes(td_path("img.gz"), sz / 4 + k * (sz / 16), 4);
        expect_fail("img.gz", "lab", TB_EFORMAT, "img.gz", "corrupt gzip stream");
    }
    /* A single flipped bit changes decoded bytes but not the structure: only the CRC sees it. */
    write_file(td_path("img.gz"), bi, li, 1);
    long sz = td_file_size(td_path("img.gz"));
    flip_bytes(td_path("img.gz"), sz - 8, 1); /* first CRC byte of the trailer */
    expect_fail("img.gz", "lab", TB_EFORMAT, "img.gz", "corrupt gzip stream: incorrect data check");
    free(bi);
    free(bl);
}

Test(idx, count_mismatch)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 5, 3, 3, &li), *bl = make_labels(0x801, 4, 10, &ll);
    write_file(td_path("img"), bi, li, 0);
    write_file(td_path("lab"), bl, ll, 0);
    expect_fail("img", "lab", TB_EFORMAT, "lab", "count mismatch: 4 labels but");
    cr_assert(strstr(tb_error_get(), "holds 5 images"), "%s", tb_error_get());
    free(bi);
    free(bl);
}

Test(idx, label_out_of_range)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 5, 3, 3, &li), *bl = make_labels(0x801, 5, 10, &ll);
    bl[8 + 3] = 10;
    write_file(td_path("img"), bi, li, 0);
    write_file(td_path("lab.gz"), bl, ll, 1);
    expect_fail("img", "lab.gz", TB_EFORMAT, "lab.gz", "label 10 at index 3 out of range [0,10)");
    bl[8 + 3] = 255;
    write_file(td_path("lab.gz"), bl, ll, 1);
    expect_fail("img", "lab.gz", TB_EFORMAT, "lab.gz", "label 255 at index 3");
    free(bi);
    free(bl);
}

Test(idx, zero_size_dims)
{
    size_t li, ll;
    uint8_t *bl = make_labels(0x801, 5, 10, &ll);
    write_file(td_path("lab"), bl, ll, 0);
    uint32_t dims[3][3] = {{0, 3, 3}, {5, 0, 3}, {5, 3, 0}};
    for (int k = 0; k < 3; k++) {
        uint8_t *bi = make_images(0x803, dims[k][0], dims[k][1], dims[k][2], &li);
        write_file(td_path("img"), bi, li, k == 1);
        expect_fail("img", "lab", TB_EFORMAT, "img", "zero-size dimension");
        free(bi);
    }
    size_t lz;
    uint8_t *bz = make_labels(0x801, 0, 10, &lz), *bi = make_images(0x803, 5, 3, 3, &li);
    write_file(td_path("img"), bi, li, 0);
    write_file(td_path("lab"), bz, lz, 0);
    expect_fail("img", "lab", TB_EFORMAT, "lab", "zero-size dimension");
    free(bi);
    free(bz);
    free(bl);
}

Test(idx, absurd_dims)
{
    size_t li, ll;
    uint8_t *bl = make_labels(0x801, 5, 10, &ll);
    write_file(td_path("lab"), bl, ll, 0);
    /* 2^31 rows: over every limit; rejected from the header alone, plain or gzip. */
    for (int gz = 0; gz < 2; gz++) {
        uint8_t *bi = make_images(0x803, 5, 0x80000000u, 28, &li);
        write_file(td_path("img"), bi, li, gz);
        expect_fail("img", "lab", TB_ENOMEM, "img", "absurd dimensions in header: 5 x 2147483648 x 28");
        free(bi);
    }
    /* 2^31 images. */
    uint8_t *bi = make_images(0x803, 0x80000000u, 28, 28, &li);
    write_file(td_path("img"), bi, li, 0);
    expect_fail("img", "lab", TB_ENOMEM, "img", "absurd dimensions");
    free(bi);
    /* Within the per-field limits but ~3 GB of pixels claimed by a gzip file of a few dozen bytes:
     * refused before allocating, by comparing with what the file could inflate to. */
    size_t lb;
    uint8_t *bigl = make_labels(0x801, 4000000, 10, &lb);
    write_file(td_path("lab"), bigl, lb, 1);
    bi = make_images(0x803, 4000000, 28, 28, &li);
    write_file(td_path("img.gz"), bi, li, 1);
    expect_fail("img.gz", "lab", TB_ENOMEM, "img.gz", "absurd size: header claims 3136000000 bytes of pixels");
    /* The same header in a plain file is simply a truncated file. */
    write_file(td_path("img"), bi, li, 0);
    expect_fail("img", "lab", TB_EIO, "img", "truncated: expected 3136000000 bytes of pixels, got 0");
    free(bi);
    free(bigl);
    free(bl);
}

Test(idx, trailing_data)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 5, 3, 3, &li), *bl = make_labels(0x801, 4, 10, &ll);
    put_be32(bi + 4, 4); /* header says 4 images, payload holds 5 */
    write_file(td_path("img.gz"), bi, li, 1);
    write_file(td_path("lab"), bl, ll, 0);
    expect_fail("img.gz", "lab", TB_EFORMAT, "img.gz", "trailing data after");
    free(bi);
    free(bl);
}

/* An IDX set with labels past 9 (EMNIST: 26 to 62 classes) was refused by the directory loader, which
 * passed a fixed 10: any byte label loads, the class count is the largest label + 1 (10 if the labels
 * stay below), and a pair of splits whose labels reach different heights gets the larger count. */
Test(idx, load_dir_more_than_ten_classes)
{
    const uint32_t n_train = 130, n_test = 40, top = 61;
    size_t li, ll;
    uint8_t *bi = make_images(0x803, n_train, 3, 3, &li), *bl = make_labels(0x801, n_train, 10, &ll);
    for (uint32_t i = 0; i < n_train; i++) bl[8 + i] = (uint8_t)(i % (top + 1));
    write_file(td_path("train-images-idx3-ubyte"), bi, li, 0);
    write_file(td_path("train-labels-idx1-ubyte.gz"), bl, ll, 1);
    put_be32(bi + 4, n_test); /* the test split: labels 0..39 */
    put_be32(bl + 4, n_test);
    write_file(td_path("t10k-images-idx3-ubyte"), bi, 16 + (size_t)n_test * 9, 0);
    write_file(td_path("t10k-labels-idx1-ubyte"), bl, 8 + n_test, 0);
    struct dataset tr, te;
    cr_assert_eq(dataset_load_dir(td_dir, 1, &tr), TB_OK, "%s", tb_error_get());
    cr_assert_eq(tr.n_classes, (int)top + 1);
    for (uint32_t i = 0; i < n_train; i++) cr_assert_eq(tr.labels[i], (int32_t)(i % (top + 1)));
    cr_assert_eq(dataset_load_dir(td_dir, 0, &te), TB_OK, "%s", tb_error_get());
    cr_assert_eq(te.n_classes, (int)n_test);
    cr_assert_eq(dataset_check_pair(&tr, &te), TB_OK, "%s", tb_error_get());
    cr_assert_eq(tr.n_classes, (int)top + 1);
    cr_assert_eq(te.n_classes, (int)top + 1, "the test split takes the training split's larger count");
    dataset_free(&tr);
    dataset_free(&te);
    /* The largest byte: 256 classes. */
    put_be32(bl + 4, n_train);
    bl[8 + 5] = 255;
    write_file(td_path("train-labels-idx1-ubyte.gz"), bl, ll, 1);
    cr_assert_eq(idx_load_dir(td_dir, 1, &tr), TB_OK, "%s", tb_error_get());
    cr_assert_eq(tr.n_classes, 256);
    cr_assert_eq(tr.labels[5], 255);
    dataset_free(&tr);
    /* Below 10 the count stays MNIST's 10, so a subset that lacks the top classes is no other model. */
    put_be32(bl + 4, n_test);
    for (uint32_t i = 0; i < n_test; i++) bl[8 + i] = (uint8_t)(i % 4);
    write_file(td_path("t10k-labels-idx1-ubyte"), bl, 8 + n_test, 0);
    cr_assert_eq(idx_load_dir(td_dir, 0, &te), TB_OK, "%s", tb_error_get());
    cr_assert_eq(te.n_classes, 10);
    dataset_free(&te);
    free(bi);
    free(bl);
}

/* Appends n raw bytes to path. */
static void append_raw(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "ab");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Non-gzip bytes after a gzip stream were dropped in silence (zlib's gzread stops there), while the same
 * bytes after a plain file are refused: now an error naming the file, in the images and the labels file,
 * whatever the bytes (zero padding, a lone byte, a lone 0x1f). Concatenated members are still one file. */
Test(idx, gzip_trailing_garbage)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 6, 5, 5, &li), *bl = make_labels(0x801, 6, 10, &ll);
    static const struct {
        const char *bytes;
        size_t n;
    } junk[] = {{"JUNKJUNK", 8}, {"\0\0\0\0\0\0\0\0\0\0\0\0", 12}, {"x", 1}, {"\x1f", 1}, {"\x1f\x8a\x08", 3}};
    for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++)
        for (int lab = 0; lab < 2; lab++) {
            write_file(td_path("img.gz"), bi, li, 1);
            write_file(td_path("lab.gz"), bl, ll, 1);
            const char *bad = lab ? "lab.gz" : "img.gz";
            long at = td_file_size(td_path(bad));
            append_raw(td_path(bad), junk[k].bytes, junk[k].n);
            char want[96];
            snprintf(want, sizeof want, "trailing data after the gzip stream: %zu byte%s at offset %ld", junk[k].n,
                     junk[k].n == 1 ? "" : "s", at);
            expect_fail("img.gz", "lab.gz", TB_EFORMAT, bad, want);
        }
    free(bi);
    free(bl);
}

/* gzip -c a > f; gzip -c b >> f is one gzip file: the members' bytes in order, an empty member too; junk
 * after the last member is refused as after the first. */
Test(idx, gzip_concatenated_members)
{
    size_t li, ll;
    uint8_t *bi = make_images(0x803, 40, 7, 9, &li), *bl = make_labels(0x801, 40, 10, &ll);
    write_file(td_path("img.gz"), bi, 10, 1); /* inside the header: the split point is arbitrary */
    gzFile g = gzopen(td_path("img.gz"), "ab9");
    cr_assert_not_null(g);
    cr_assert_eq(gzclose(g), Z_OK); /* an empty member */
    g = gzopen(td_path("img.gz"), "ab1");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, bi + 10, (unsigned)(li - 10)), (int)(li - 10));
    cr_assert_eq(gzclose(g), Z_OK);
    write_file(td_path("lab"), bl, ll, 0);
    struct dataset ds;
    cr_assert_eq(idx_load(td_path("img.gz"), td_path("lab"), 10, &ds), TB_OK, "%s", tb_error_get());
    check_good(&ds, 40, 7, 9);
    dataset_free(&ds);
    append_raw(td_path("img.gz"), "JUNK", 4);
    expect_fail("img.gz", "lab", TB_EFORMAT, "img.gz", "trailing data after the gzip stream: 4 bytes");
    free(bi);
    free(bl);
}

/* A data file that is there but cannot be read was reported as missing ("no train images file"):
 * now its name and its fault, from idx_load_dir and dataset_load_dir alike (not "no dataset found"). */
Test(idx, load_dir_unusable_file_says_why)
{
    write_pair("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 3, 2, 2, 0);
    const char *name = "train-images-idx3-ubyte";
    static const char *const faults[] = {"is a directory", "not a regular file", "Too many levels of symbolic links",
                                         "dangling symbolic link"};
    for (int k = 0; k < 4; k++) {
        unlink(td_path(name));
        rmdir(td_path(name));
        if (k == 0) cr_assert_eq(mkdir(td_path(name), 0700), 0);
        if (k == 1) cr_assert_eq(mkfifo(td_path(name), 0600), 0);
        if (k == 2) cr_assert_eq(symlink(name, td_path(name)), 0); /* a link to itself */
        if (k == 3) cr_assert_eq(symlink("nowhere", td_path(name)), 0);
        write_file(td_path("train-labels-idx1-ubyte"), (const uint8_t *)"x", 1, 0);
        struct dataset ds;
        memset(&ds, 0xab, sizeof ds);
        td_assert_failed(idx_load_dir(td_dir, 1, &ds), TB_EIO, &ds, name, faults[k]);
        memset(&ds, 0xab, sizeof ds);
        td_assert_failed(dataset_load_dir(td_dir, 1, &ds), TB_EIO, &ds, name, faults[k]);
    }
    /* A readable spelling beside the unusable one is read, and the note counts the other. */
    write_pair("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte", 4, 2, 2, 1);
    struct dataset ds;
    cr_assert_eq(dataset_load_dir(td_dir, 1, &ds), TB_OK, "%s", tb_error_get());
    cr_assert_eq(ds.n, 4);
    cr_assert(strstr(ds.note, "train-images-idx3-ubyte.gz") && strstr(ds.note, "1 other spelling "), "%s", ds.note);
    dataset_free(&ds);
}

/* Runs dataset_load_dir(dir, 1) as an unprivileged user (a child process that drops root, as root cannot
 * see EACCES) and returns its status, with its message in msg. */
static int load_dir_unprivileged(const char *dir, char *msg, size_t cap)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        /* root's supplementary groups dropped too; and the directory's parent must be reachable as that user
         * (a TMPDIR under a 0700 directory is not), else the test would pass or fail for another reason */
        if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) _exit(100);
        char parent[1024];
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) *slash = '\0';
        struct stat sb;
        if (stat(parent, &sb) != 0) _exit(100);
        struct dataset ds;
        int st = dataset_load_dir(dir, 1, &ds);
        const char *m = tb_error_get();
        if (write(fds[1], m, strlen(m)) < 0) _exit(101);
        _exit(st == TB_OK ? 0 : st == TB_EIO ? 1 : 2);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], msg, cap - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws));
    if (WEXITSTATUS(ws) == 100) cr_skip_test("cannot drop root here, or its temporary directory is out of an unprivileged user's reach: no EACCES to see");
    return WEXITSTATUS(ws) == 0 ? TB_OK : WEXITSTATUS(ws) == 1 ? TB_EIO : TB_EINVAL;
}

/* A data directory we may not search (chmod 000) looked empty: "no dataset found". Now "Permission denied"
 * naming it; a data file behind such a directory (a link into it) names the file. */
Test(idx, load_dir_permission_denied)
{
    cr_assert_eq(chmod(td_dir, 0755), 0); /* the child must reach the directory under test */
    char sub[512];
    snprintf(sub, sizeof sub, "%s/set", td_dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    write_pair("set/train-images-idx3-ubyte", "set/train-labels-idx1-ubyte", 3, 2, 2, 0);
    cr_assert_eq(chmod(sub, 0), 0);
    char msg[1024];
    int st = load_dir_unprivileged(sub, msg, sizeof msg);
    cr_assert_eq(chmod(sub, 0755), 0);
    cr_assert_eq(st, TB_EIO, "%s", msg);
    cr_assert(strstr(msg, sub) && strstr(msg, "Permission denied"), "%s", msg);
    cr_assert_eq(mkdir(td_path("closed"), 0), 0);
    unlink(td_path("set/train-images-idx3-ubyte"));
    cr_assert_eq(symlink("../closed/x", td_path("set/train-images-idx3-ubyte")), 0);
    st = load_dir_unprivileged(sub, msg, sizeof msg);
    cr_assert_eq(st, TB_EIO, "%s", msg);
    cr_assert(strstr(msg, "set/train-images-idx3-ubyte: cannot open: Permission denied"), "%s", msg);
}

Test(idx, bad_arguments)
{
    struct dataset ds;
    cr_assert_eq(idx_load("a", "b", 0, &ds), TB_EINVAL);
    cr_assert_eq(idx_load("a", "b", 257, &ds), TB_EINVAL);
    cr_assert_eq(idx_load(NULL, "b", 10, &ds), TB_EINVAL);
    cr_assert_eq(idx_load_dir("", 1, &ds), TB_EINVAL);
    td_assert_zeroed(&ds);
}

Test(idx, debian_fashion_mnist, .timeout = 60)
{
    struct stat st;
    if (stat(DATASET_DEFAULT_DIR, &st) != 0) cr_skip_test("%s not installed (dataset-fashion-mnist)", DATASET_DEFAULT_DIR);
    struct dataset ds;
    int n_expected[2] = {10000, 60000};
    for (int train = 0; train < 2; train++) {
        cr_assert_eq(idx_load_dir(DATASET_DEFAULT_DIR, train, &ds), TB_OK, "%s", tb_error_get());
        cr_assert_eq(ds.n, n_expected[train]);
        cr_assert_eq(ds.h, 28);
        cr_assert_eq(ds.w, 28);
        cr_assert_eq(ds.c, 1);
        cr_assert_eq(ds.n_classes, 10);
        cr_assert_str_eq(ds.name, "fashion-mnist");
        /* Fashion-MNIST is balanced: 6000 / 1000 of each class. */
        int count[10] = {0};
        for (int i = 0; i < ds.n; i++) count[ds.labels[i]]++;
        for (int k = 0; k < 10; k++) cr_assert_eq(count[k], ds.n / 10, "class %d has %d samples", k, count[k]);
        dataset_free(&ds);
    }
}

/* -------- dataset_resize -------- */

static struct dataset tiny(int n, int h, int w, int c, const uint8_t *px)
{
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n = n;
    ds.h = h;
    ds.w = w;
    ds.c = c;
    ds.n_classes = 10;
    ds.images = malloc((size_t)n * h * w * c);
    ds.labels = malloc((size_t)n * sizeof *ds.labels);
    memcpy(ds.images, px, (size_t)n * h * w * c);
    for (int i = 0; i < n; i++) ds.labels[i] = i % 10;
    snprintf(ds.name, sizeof ds.name, "tiny");
    return ds;
}

/* Reference values from torch.nn.functional.interpolate(mode="bilinear", align_corners=False) on
 * float tensors, rounded half up; allow 1 for values that sit exactly on .5 in float. */
Test(resize, upsample_matches_pytorch)
{
    const uint8_t px[6] = {0, 100, 37, 200, 255, 9};
    const uint8_t want[20] = {0,   40,  100, 62,  37, 50,  86,  139, 73,  30,
                              150, 177, 216, 96,  16, 200, 222, 255, 107, 9};
    struct dataset in = tiny(1, 2, 3, 1, px), out;
    cr_assert_eq(dataset_resize(&in, 4, 5, 1, &out), TB_OK, "%s", tb_error_get());
    cr_assert_eq(out.h, 4);
    cr_assert_eq(out.w, 5);
    cr_assert_eq(out.c, 1);
    cr_assert_str_eq(out.name, "tiny");
    for (int i = 0; i < 20; i++) cr_assert_leq(abs((int)out.images[i] - (int)want[i]), 1, "pixel %d: %d vs %d", i, out.images[i], want[i]);
    cr_assert_eq(out.images[0], 0);
    cr_assert_eq(out.images[4], 37);
    cr_assert_eq(out.images[15], 200);
    cr_assert_eq(out.images[19], 9);
    cr_assert_eq(out.images[2], 100);
    dataset_free(&in);
    dataset_free(&out);
}

Test(resize, downsample_matches_pytorch)
{
    const uint8_t px[20] = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 250};
    const uint8_t want[6] = {26, 51, 93, 118, 159, 195};
    struct dataset in = tiny(1, 4, 5, 1, px), out;
    cr_assert_eq(dataset_resize(&in, 3, 2, 1, &out), TB_OK, "%s", tb_error_get());
    for (int i = 0; i < 6; i++) cr_assert_leq(abs((int)out.images[i] - (int)want[i]), 1, "pixel %d: %d vs %d", i, out.images[i], want[i]);
    cr_assert_eq(out.images[0], 26);
    cr_assert_eq(out.images[5], 195);
    dataset_free(&in);
    dataset_free(&out);
}

Test(resize, channels_and_identity)
{
    const uint8_t px[8] = {1, 2, 3, 4, 50, 60, 70, 80}; /* two 2x2 grey images */
    struct dataset in = tiny(2, 2, 2, 1, px), out, back;
    cr_assert_eq(dataset_resize(&in, 2, 2, 1, &out), TB_OK);
    cr_assert_arr_eq(out.images, px, 8, "same size must be an exact copy");
    dataset_free(&out);
    cr_assert_eq(dataset_resize(&in, 2, 2, 3, &out), TB_OK);
    cr_assert_eq(out.c, 3);
    for (int i = 0; i < 8; i++)
        for (int ch = 0; ch < 3; ch++) cr_assert_eq(out.images[3 * i + ch], px[i]);
    cr_assert_eq(out.labels[1], 1);
    cr_assert_eq(dataset_resize(&out, 2, 2, 1, &back), TB_OK);
    cr_assert_arr_eq(back.images, px, 8, "3 -> 1 of replicated grey is the grey");
    dataset_free(&back);
    dataset_free(&out);
    /* In place: replaces the arrays. */
    cr_assert_eq(dataset_resize(&in, 4, 4, 3, &in), TB_OK);
    cr_assert_eq(in.h, 4);
    cr_assert_eq(in.c, 3);
    cr_assert_eq(in.n, 2);
    dataset_free(&in);
}

Test(resize, rejects_bad_requests)
{
    const uint8_t px[4] = {1, 2, 3, 4};
    struct dataset in = tiny(1, 2, 2, 1, px), out;
    memset(&out, 0xab, sizeof out);
    cr_assert_eq(dataset_resize(&in, 0, 2, 1, &out), TB_EINVAL);
    td_assert_zeroed(&out);
    cr_assert_eq(dataset_resize(&in, 2, 2, 2, &out), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "cannot convert 1 channels to 2"), "%s", tb_error_get());
    cr_assert_eq(dataset_resize(&in, 1 << 20, 1 << 20, 3, &out), TB_ENOMEM);
    struct dataset empty;
    memset(&empty, 0, sizeof empty);
    cr_assert_eq(dataset_resize(&empty, 2, 2, 1, &out), TB_EINVAL);
    dataset_free(&in);
}
