/* dataset_idx.c — IDX reader (MNIST, Fashion-MNIST, ...): unsigned-byte images (magic 0x00000803,
 * dims N,rows,cols) and labels (magic 0x00000801, dim N), plain or gzip, read through dataset_io.h.
 *
 * Not a general IDX reader: only the ubyte type, 3-d images and 1-d labels. Every header field is
 * checked against the file before anything the size of the payload is allocated; on any failure the
 * output dataset is zeroed and nothing leaks. Reentrant; the dataset it builds is owned by the caller.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dataset.h"
#include "dataset_io.h"
#include "status.h"

#define IDX_MAGIC_IMAGES 0x00000803u /* 0x08 = unsigned byte, 3 dims */
#define IDX_MAGIC_LABELS 0x00000801u /* 0x08 = unsigned byte, 1 dim */
#define IDX_MAX_SIDE 65536u          /* larger images are a corrupt header, not a dataset */
#define IDX_PATH_MAX 4096
#define IDX_MAX_CLASSES 256    /* labels are bytes */
#define IDX_DEFAULT_CLASSES 10 /* MNIST's and Fashion-MNIST's; a directory's labels may raise it */

static uint32_t idx_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads and checks the magic and ndims dimensions of one IDX header into dims. */
static int idx_read_header(struct dsio_file *f, uint32_t magic, int ndims, uint32_t *dims)
{
    uint8_t hdr[16];
    /* The magic first, on its own: a swapped or wrong file is then "bad magic", not "truncated". */
    int st = dsio_read_bytes(f, hdr, 4, "bytes of IDX magic");
    if (st) return st;
    uint32_t m = idx_be32(hdr);
    if (m != magic)
        return tb_error_set(TB_EFORMAT, "%s: bad magic 0x%08x, expected 0x%08x (IDX unsigned-byte %s)", f->path, m,
                            magic, ndims == 3 ? "images" : "labels");
    if ((st = dsio_read_bytes(f, hdr + 4, 4 * (size_t)ndims, "bytes of IDX dimensions"))) return st;
    for (int i = 0; i < ndims; i++) dims[i] = idx_be32(hdr + 4 + 4 * i);
    for (int i = 0; i < ndims; i++)
        if (dims[i] == 0) {
            if (ndims == 3)
                return tb_error_set(TB_EFORMAT, "%s: zero-size dimension in header: %u x %u x %u images", f->path,
                                    dims[0], dims[1], dims[2]);
            return tb_error_set(TB_EFORMAT, "%s: zero-size dimension in header: 0 labels", f->path);
        }
    if (dims[0] > (uint32_t)INT_MAX || (ndims == 3 && (dims[1] > IDX_MAX_SIDE || dims[2] > IDX_MAX_SIDE))) {
        if (ndims == 3)
            return tb_error_set(TB_ENOMEM, "%s: absurd dimensions in header: %u x %u x %u images (limits %d images, %u per side)",
                                f->path, dims[0], dims[1], dims[2], INT_MAX, IDX_MAX_SIDE);
        return tb_error_set(TB_ENOMEM, "%s: absurd dimensions in header: %u labels (limit %d)", f->path, dims[0],
                            INT_MAX);
    }
    return TB_OK;
}

int idx_load(const char *images_path, const char *labels_path, int n_classes, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (!images_path || !labels_path) return tb_error_set(TB_EINVAL, "idx_load: missing file name");
    if (n_classes < 1 || n_classes > IDX_MAX_CLASSES)
        return tb_error_set(TB_EINVAL, "idx_load: n_classes %d outside [1,256] (labels are bytes)", n_classes);
    struct dsio_file fi, fl;
    memset(&fi, 0, sizeof fi);
    memset(&fl, 0, sizeof fl);
    uint8_t *pixels = NULL, *bytes = NULL;
    int32_t *labels = NULL;
    uint32_t di[3] = {0, 0, 0}, dl[1] = {0};
    int st = dsio_open_file(&fi, images_path);
    if (st) goto fail;
    if ((st = idx_read_header(&fi, IDX_MAGIC_IMAGES, 3, di))) goto fail;
    if ((st = dsio_open_file(&fl, labels_path))) goto fail;
    if ((st = idx_read_header(&fl, IDX_MAGIC_LABELS, 1, dl))) goto fail;
    if (dl[0] != di[0]) {
        st = tb_error_set(TB_EFORMAT, "%s: count mismatch: %u labels but %s holds %u images", labels_path, dl[0],
                          images_path, di[0]);
        goto fail;
    }
    uint64_t n_pix = (uint64_t)di[0] * di[1] * di[2];
    /* Check both files can hold what their headers claim before allocating either payload. */
    if ((st = dsio_check_size(&fi, n_pix, "bytes of pixels"))) goto fail;
    if ((st = dsio_check_size(&fl, dl[0], "bytes of labels"))) goto fail;
    if ((st = dsio_read_alloc(&fi, n_pix, "bytes of pixels", &pixels))) goto fail;
    if ((st = dsio_check_end(&fi, "pixels"))) goto fail;
    if ((st = dsio_read_alloc(&fl, dl[0], "bytes of labels", &bytes))) goto fail;
    if ((st = dsio_check_end(&fl, "labels"))) goto fail;
    /* The file's labels are bytes; in memory they widen to int32 like every dataset's. */
    if (!(labels = malloc(sizeof(int32_t) * (size_t)dl[0]))) {
        st = tb_error_set(TB_ENOMEM, "%s: cannot allocate %u labels", labels_path, dl[0]);
        goto fail;
    }
    for (uint32_t i = 0; i < dl[0]; i++) {
        if (bytes[i] >= n_classes) {
            st = tb_error_set(TB_EFORMAT, "%s: label %u at index %u out of range [0,%d)", labels_path, bytes[i], i,
                              n_classes);
            goto fail;
        }
        labels[i] = bytes[i];
    }
    free(bytes);
    bytes = NULL;
    dsio_close_file(&fi);
    dsio_close_file(&fl);
    out->n = (int)di[0];
    out->h = (int)di[1];
    out->w = (int)di[2];
    out->c = 1;
    out->n_classes = n_classes;
    out->images = pixels;
    out->labels = labels;
    snprintf(out->name, sizeof out->name, "idx");
    snprintf(out->source, sizeof out->source, "%s", images_path);
    return TB_OK;
fail:
    dsio_close_file(&fi);
    dsio_close_file(&fl);
    free(pixels);
    free(bytes);
    free(labels);
    memset(out, 0, sizeof *out);
    return st;
}

/* Looks for <prefix>-<kind>-idxN-ubyte[.gz] (also with "." before idxN) in dir. 1: path is the first
 * spelling that is a regular file (plain first: it is cheaper to read), and *others counts the other
 * spellings present (a plain copy beside its .gz, or both separators, leave a choice). -1: a spelling is
 * there but none can be read: path is the first such and *why its fault. 0: no spelling is there. */
static int idx_find_file(const char *dir, const char *prefix, const char *kind, int ndim, char *path, size_t cap,
                         int *others, const char **why)
{
    static const char *const seps[] = {"-", "."};  /* "train-images-idx3-ubyte", "train-images.idx3-ubyte" */
    static const char *const exts[] = {"", ".gz"}; /* plain first: it is cheaper to read */
    char bad[IDX_PATH_MAX] = "";
    const char *bad_why = NULL;
    int found = 0, n_present = 0;
    for (int s = 0; s < 2; s++)
        for (int e = 0; e < 2; e++) {
            char cand[IDX_PATH_MAX];
            const char *w = NULL;
            int k = snprintf(cand, sizeof cand, "%s/%s-%s%sidx%d-ubyte%s", dir, prefix, kind, seps[s], ndim, exts[e]);
            if (k <= 0 || (size_t)k >= sizeof cand || (size_t)k >= cap) continue;
            enum dsio_presence p = dsio_probe_file(cand, &w);
            if (p == DSIO_ABSENT) continue;
            n_present++;
            if (p == DSIO_UNUSABLE && !bad_why) {
                memcpy(bad, cand, (size_t)k + 1);
                bad_why = w;
            } else if (p == DSIO_REGULAR && !found) {
                memcpy(path, cand, (size_t)k + 1);
                found = 1;
            }
        }
    if (found) {
        *others += n_present - 1;
        return 1;
    }
    if (!bad_why) return 0;
    snprintf(path, cap, "%s", bad);
    *why = bad_why;
    return -1;
}

int idx_probe_dir(const char *dir)
{
    char p[IDX_PATH_MAX];
    const char *why;
    int others = 0;
    /* An unusable file of these names counts: the loader then says what is wrong with it. */
    return idx_find_file(dir, "train", "images", 3, p, sizeof p, &others, &why) != 0 ||
           idx_find_file(dir, "t10k", "images", 3, p, sizeof p, &others, &why) != 0;
}

/* The name of the set that was loaded, from its contents: the directory's name can be anything (Fashion-MNIST
 * copied to ~/mnist was recorded as "mnist", MNIST under a folder named "fashion" as "fashion-mnist"), and
 * both sets have the same file names. Fashion-MNIST: the CRC-32 of its label bytes in file order (split by
 * split, from Debian's dataset-fashion-mnist); MNIST: its class counts (a 28x28 split of MNIST's size with
 * exactly its counts in any order). Anything else is named by its format, "idx". */
static const char *idx_set_name(const struct dataset *d)
{
    static const int mnist_train[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    static const int mnist_test[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    if (d->h != 28 || d->w != 28 || d->c != 1 || (d->n != 60000 && d->n != 10000)) return "idx";
    int count[10] = {0};
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < d->n; i++) {
        if (d->labels[i] < 0 || d->labels[i] > 9) return "idx";
        count[d->labels[i]]++;
        const Bytef b = (Bytef)d->labels[i];
        crc = crc32(crc, &b, 1);
    }
    if ((uint32_t)crc == (d->n == 60000 ? 0x2ed6e46au : 0x242bc73fu)) return "fashion-mnist";
    return !memcmp(count, d->n == 60000 ? mnist_train : mnist_test, sizeof count) ? "mnist" : "idx";
}

int idx_load_dir(const char *dir, int train, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) return tb_error_set(TB_EINVAL, "idx_load_dir: empty directory name");
    if (strlen(dir) > IDX_PATH_MAX - 64) return tb_error_set(TB_EINVAL, "%s: directory name too long", dir);
    const char *prefix = train ? "train" : "t10k";
    char ip[IDX_PATH_MAX], lp[IDX_PATH_MAX];
    int others = 0;
    const char *why = NULL;
    static const char *const kinds[2] = {"images", "labels"};
    char *paths[2] = {ip, lp};
    for (int k = 0; k < 2; k++) {
        int r = idx_find_file(dir, prefix, kinds[k], k ? 1 : 3, paths[k], IDX_PATH_MAX, &others, &why);
        if (r < 0) return tb_error_set(TB_EIO, "%s: cannot open: %s", paths[k], why);
        if (r == 0)
            return tb_error_set(TB_EIO, "%s: no %s %s file (tried %s-%s-idx%d-ubyte[.gz], %s-%s.idx%d-ubyte[.gz])", dir,
                                train ? "train" : "test", kinds[k], prefix, kinds[k], k ? 1 : 3, prefix, kinds[k],
                                k ? 1 : 3);
    }
    /* Labels are bytes and the format records no class count: any byte is taken here, and the count is
     * MNIST's 10 unless the labels reach further (EMNIST: 26 to 62 classes). --classes, which the session
     * checks the labels against, may raise it. */
    int st = idx_load(ip, lp, IDX_MAX_CLASSES, out);
    if (st) return st;
    int top = -1;
    for (int i = 0; i < out->n; i++) top = out->labels[i] > top ? out->labels[i] : top;
    out->n_classes = top + 1 > IDX_DEFAULT_CLASSES ? top + 1 : IDX_DEFAULT_CLASSES;
    snprintf(out->name, sizeof out->name, "%s", idx_set_name(out));
    snprintf(out->source, sizeof out->source, "%s", dir);
    if (others) /* another copy (.gz beside plain, or another separator) was left: say which was read */
        snprintf(out->note, sizeof out->note, "%s: read %s and %s; %d other spelling%s of them left unread", dir,
                 strrchr(ip, '/') + 1, strrchr(lp, '/') + 1, others, others == 1 ? "" : "s");
    return TB_OK;
}
