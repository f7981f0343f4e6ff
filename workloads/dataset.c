/* dataset.c — format detection, bilinear resize, dataset_free, and the shared plain/gzip reader
 * (dataset_io.h) that the IDX and CIFAR readers sit on.
 *
 * Not a decoder of any particular format (see dataset_idx.c, dataset_cifar.c) and not augmentation.
 * Every function here is reentrant; error messages go to the calling thread's status buffer.
 * A dataset owns its two arrays; dataset_free releases them.
 */
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset_io.h"
#include "regular_file.h"
#include "status.h"

/* Deflate's best case is about 1032:1 (a long run encoded as length/distance pairs), so a gzip file
 * of B bytes never inflates to more than this; anything above is a lying header, not a big file. */
#define DSIO_MAX_INFLATE_RATIO 1032u
/* gzread takes an unsigned length and returns an int: read in chunks well below INT_MAX. */
#define DSIO_CHUNK (1u << 30)

typedef unsigned long long ull;

int dsio_file_exists(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int dsio_open_file(struct dsio_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    /* Regular files only, checked on the open descriptor: a FIFO would block the open, a device never end. */
    const char *why = NULL;
    int fd = regular_open(path, &why);
    if (fd < 0) return tb_error_set(TB_EIO, "%s: cannot open: %s", path, why);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tb_error_set(TB_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return tb_error_set(TB_ENOMEM, "%s: cannot open: out of memory", path);
    }
    gzbuffer(gz, 1u << 17); /* fewer, larger reads: the 26 MB Fashion-MNIST file loads ~2x faster */
    f->gz = gz;
    f->file_bytes = (uint64_t)st.st_size;
    f->direct = gzdirect(gz);
    return TB_OK;
}

void dsio_close_file(struct dsio_file *f)
{
    if (f->gz) gzclose_r((gzFile)f->gz);
    f->gz = NULL;
}

/* zlib prefixes its messages with "<path>: " (or "<fd:N>: "); we add the path ourselves, so drop it. */
static const char *dsio_zlib_message(struct dsio_file *f, int *errnum)
{
    const char *m = gzerror((gzFile)f->gz, errnum);
    size_t lp = strlen(f->path);
    if (m && strncmp(m, f->path, lp) == 0 && m[lp] == ':' && m[lp + 1] == ' ') m += lp + 2;
    /* Opened by descriptor (gzdopen), zlib names the file "<fd:N>". */
    if (m && strncmp(m, "<fd:", 4) == 0) {
        const char *e = strstr(m, ">: ");
        if (e) m = e + 3;
    }
    return m ? m : "unknown zlib error";
}

/* Turns a failed gzread (it returned -1) into a status. */
static int dsio_fail_stream(struct dsio_file *f)
{
    int errnum = Z_OK;
    int e = errno;
    const char *m = dsio_zlib_message(f, &errnum);
    if (errnum == Z_ERRNO) return tb_error_set(TB_EIO, "%s: read error: %s", f->path, strerror(e));
    if (errnum == Z_MEM_ERROR) return tb_error_set(TB_ENOMEM, "%s: out of memory inflating gzip stream", f->path);
    return tb_error_set(TB_EFORMAT, "%s: corrupt gzip stream: %s", f->path, m);
}

/* Turns a read that ended early (gzread returned 0) into "truncated". */
static int dsio_fail_short(struct dsio_file *f, uint64_t expected, uint64_t got, const char *what)
{
    int errnum = Z_OK;
    (void)dsio_zlib_message(f, &errnum);
    return tb_error_set(TB_EIO, "%s: truncated: expected %llu %s, got %llu%s", f->path, (ull)expected, what,
                        (ull)got, errnum == Z_BUF_ERROR ? " (gzip stream ends early)" : "");
}

/* Reads exactly n bytes into buf; expected/got_before only shape the message of a short read. */
static int dsio_read_span(struct dsio_file *f, uint8_t *buf, uint64_t n, const char *what, uint64_t expected,
                          uint64_t got_before)
{
    uint64_t got = 0;
    while (got < n) {
        uint64_t want = n - got;
        if (want > DSIO_CHUNK) want = DSIO_CHUNK;
        int r = gzread((gzFile)f->gz, buf + got, (unsigned)want);
        if (r < 0) return dsio_fail_stream(f);
        if (r == 0) return dsio_fail_short(f, expected, got_before + got, what);
        got += (uint64_t)r;
        f->consumed += (uint64_t)r;
    }
    return TB_OK;
}

int dsio_read_bytes(struct dsio_file *f, void *buf, size_t n, const char *what)
{
    return dsio_read_span(f, buf, n, what, n, 0);
}

int dsio_check_size(struct dsio_file *f, uint64_t n, const char *what)
{
    if (f->direct) {
        uint64_t left = f->file_bytes > f->consumed ? f->file_bytes - f->consumed : 0;
        if (n > left)
            return tb_error_set(TB_EIO, "%s: truncated: expected %llu %s, got %llu", f->path, (ull)n, what,
                                (ull)left);
        return TB_OK;
    }
    uint64_t max = f->file_bytes * DSIO_MAX_INFLATE_RATIO + 1024;
    if (n > max || n > (uint64_t)SIZE_MAX / 2)
        return tb_error_set(TB_ENOMEM,
                            "%s: absurd size: header claims %llu %s but a %llu-byte gzip file inflates to at most %llu",
                            f->path, (ull)n, what, (ull)f->file_bytes, (ull)max);
    return TB_OK;
}

/* First buffer size for a gzip payload: enough for typical compression ratios, grown if needed. */
static uint64_t dsio_initial_capacity(const struct dsio_file *f, uint64_t n)
{
    if (f->direct) return n;
    uint64_t guess = 8 * f->file_bytes + (1u << 20);
    return n < guess ? n : guess;
}

int dsio_read_alloc(struct dsio_file *f, uint64_t n, const char *what, uint8_t **out)
{
    *out = NULL;
    int st = dsio_check_size(f, n, what);
    if (st) return st;
    uint64_t cap = dsio_initial_capacity(f, n), got = 0;
    uint8_t *buf = malloc(cap ? (size_t)cap : 1);
    if (!buf) return tb_error_set(TB_ENOMEM, "%s: cannot allocate %llu %s", f->path, (ull)cap, what);
    for (;;) {
        st = dsio_read_span(f, buf + got, cap - got, what, n, got);
        if (st) goto fail;
        got = cap;
        if (got == n) break;
        uint64_t ncap = cap * 2 < n ? cap * 2 : n;
        uint8_t *nb = realloc(buf, (size_t)ncap);
        if (!nb) {
            st = tb_error_set(TB_ENOMEM, "%s: cannot allocate %llu %s", f->path, (ull)ncap, what);
            goto fail;
        }
        buf = nb;
        cap = ncap;
    }
    *out = buf;
    return TB_OK;
fail:
    free(buf);
    return st;
}

int dsio_read_rest(struct dsio_file *f, const char *what, uint8_t **out, uint64_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    uint64_t left = f->file_bytes > f->consumed ? f->file_bytes - f->consumed : 0;
    uint64_t cap = f->direct ? left + 1 : 8 * f->file_bytes + (1u << 20), got = 0;
    int st = TB_OK;
    uint8_t *buf = malloc((size_t)cap);
    if (!buf) return tb_error_set(TB_ENOMEM, "%s: cannot allocate %llu %s", f->path, (ull)cap, what);
    for (;;) {
        if (got == cap) {
            uint8_t *nb = cap < (uint64_t)SIZE_MAX / 4 ? realloc(buf, (size_t)(cap * 2)) : NULL;
            if (!nb) {
                st = tb_error_set(TB_ENOMEM, "%s: cannot allocate %llu %s", f->path, (ull)cap * 2, what);
                goto fail;
            }
            buf = nb;
            cap *= 2;
        }
        uint64_t want = cap - got;
        if (want > DSIO_CHUNK) want = DSIO_CHUNK;
        int r = gzread((gzFile)f->gz, buf + got, (unsigned)want);
        if (r < 0) {
            st = dsio_fail_stream(f);
            goto fail;
        }
        if (r == 0) break;
        got += (uint64_t)r;
        f->consumed += (uint64_t)r;
    }
    int errnum = Z_OK;
    (void)dsio_zlib_message(f, &errnum);
    if (errnum == Z_BUF_ERROR) {
        st = tb_error_set(TB_EIO, "%s: truncated: gzip stream ends early after %llu %s", f->path, (ull)got, what);
        goto fail;
    }
    *out = buf;
    *n_out = got;
    return TB_OK;
fail:
    free(buf);
    return st;
}

int dsio_check_end(struct dsio_file *f, const char *what)
{
    uint8_t b;
    int r = gzread((gzFile)f->gz, &b, 1);
    if (r < 0) return dsio_fail_stream(f);
    if (r > 0)
        return tb_error_set(TB_EFORMAT, "%s: trailing data after %llu %s", f->path, (ull)f->consumed, what);
    int errnum = Z_OK;
    (void)dsio_zlib_message(f, &errnum);
    if (errnum == Z_BUF_ERROR)
        return tb_error_set(TB_EIO, "%s: truncated: gzip stream ends before its trailer", f->path);
    return TB_OK;
}

int dataset_load_dir(const char *dir, int train, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) return tb_error_set(TB_EINVAL, "dataset_load_dir: empty directory name");
    struct stat st;
    if (stat(dir, &st) != 0) return tb_error_set(TB_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tb_error_set(TB_EIO, "%s: not a directory", dir);
    if (idx_probe_dir(dir)) return idx_load_dir(dir, train, out);
    if (cifar10_probe_dir(dir)) return cifar10_load_dir(dir, train, out);
    return tb_error_set(TB_EIO,
                        "%s: no dataset found: neither an IDX set (train-images-idx3-ubyte[.gz], ...) "
                        "nor CIFAR-10 binary (data_batch_1.bin, test_batch.bin)",
                        dir);
}

int dataset_check_pair(const struct dataset *train, const struct dataset *test)
{
    /* Everything downstream (the model's input layer, the evaluation batches) takes the training
     * geometry; a test set of another shape would be read out of bounds or as garbage. */
    if (test->h != train->h || test->w != train->w || test->c != train->c)
        return tb_error_set(TB_EFORMAT, "%s: test images are %dx%dx%d but training images are %dx%dx%d (HxWxC)",
                            test->source[0] ? test->source : test->name, test->h, test->w, test->c, train->h,
                            train->w, train->c);
    if (test->n_classes != train->n_classes)
        return tb_error_set(TB_EFORMAT, "%s: test set has %d classes but the training set %d",
                            test->source[0] ? test->source : test->name, test->n_classes, train->n_classes);
    return TB_OK;
}

/* PyTorch's align_corners=False source index and weight for one output coordinate
 * (upsample_bilinear2d: clamp the source below at 0, the second tap at the last pixel). */
static void resize_taps(int in, int out, int o, int *i0, int *i1, float *l1)
{
    float scale = (float)in / (float)out;
    float src = scale * ((float)o + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    int a = (int)src;
    if (a > in - 1) a = in - 1;
    *i0 = a;
    *i1 = a + (a < in - 1 ? 1 : 0);
    float l = src - (float)a;
    *l1 = l < 0 ? 0 : l > 1 ? 1 : l;
}

static uint8_t resize_round(float v)
{
    v = floorf(v + 0.5f);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int dataset_resize(const struct dataset *in, int h, int w, int c, struct dataset *out)
{
    int st;
    struct dataset r;
    memset(&r, 0, sizeof r);
    int *y0 = NULL, *y1 = NULL, *x0 = NULL, *x1 = NULL;
    float *ly = NULL, *lx = NULL;
    if (!in || !in->images || !in->labels || in->n <= 0 || in->h <= 0 || in->w <= 0 || in->c <= 0) {
        st = tb_error_set(TB_EINVAL, "dataset_resize: input dataset is empty");
        goto fail;
    }
    if (h <= 0 || w <= 0 || c <= 0) {
        st = tb_error_set(TB_EINVAL, "dataset_resize: bad target shape %dx%dx%d", h, w, c);
        goto fail;
    }
    if (!(c == in->c || (in->c == 1 && c == 3) || (in->c == 3 && c == 1))) {
        st = tb_error_set(TB_EINVAL, "dataset_resize: cannot convert %d channels to %d (only equal, 1->3, 3->1)",
                          in->c, c);
        goto fail;
    }
    uint64_t per = (uint64_t)h * (uint64_t)w * (uint64_t)c;
    uint64_t total = per * (uint64_t)in->n;
    if ((uint64_t)h * (uint64_t)w > (uint64_t)INT_MAX || per > (uint64_t)INT_MAX || total > (uint64_t)SIZE_MAX / 2) {
        st = tb_error_set(TB_ENOMEM, "dataset_resize: %d images of %dx%dx%d is too large", in->n, h, w, c);
        goto fail;
    }
    r = *in;
    r.images = malloc((size_t)total);
    r.labels = malloc((size_t)in->n);
    y0 = malloc(sizeof(int) * (size_t)h);
    y1 = malloc(sizeof(int) * (size_t)h);
    x0 = malloc(sizeof(int) * (size_t)w);
    x1 = malloc(sizeof(int) * (size_t)w);
    ly = malloc(sizeof(float) * (size_t)h);
    lx = malloc(sizeof(float) * (size_t)w);
    if (!r.images || !r.labels || !y0 || !y1 || !x0 || !x1 || !ly || !lx) {
        st = tb_error_set(TB_ENOMEM, "dataset_resize: cannot allocate %llu bytes", (ull)total);
        goto fail;
    }
    r.h = h;
    r.w = w;
    r.c = c;
    memcpy(r.labels, in->labels, (size_t)in->n);
    for (int oy = 0; oy < h; oy++) resize_taps(in->h, h, oy, &y0[oy], &y1[oy], &ly[oy]);
    for (int ox = 0; ox < w; ox++) resize_taps(in->w, w, ox, &x0[ox], &x1[ox], &lx[ox]);

    size_t in_per = (size_t)in->h * (size_t)in->w * (size_t)in->c;
    size_t in_row = (size_t)in->w * (size_t)in->c;
    int ic = in->c;
    for (int i = 0; i < in->n; i++) {
        const uint8_t *src = in->images + (size_t)i * in_per; // (H,W,C)
        uint8_t *dst = r.images + (size_t)i * (size_t)per;    // (h,w,c)
        for (int oy = 0; oy < h; oy++) {
            const uint8_t *ra = src + (size_t)y0[oy] * in_row, *rb = src + (size_t)y1[oy] * in_row;
            float wb = ly[oy], wa = 1.0f - wb;
            for (int ox = 0; ox < w; ox++) {
                size_t xa = (size_t)x0[ox] * (size_t)ic, xb = (size_t)x1[ox] * (size_t)ic;
                float vb = lx[ox], va = 1.0f - vb;
                float v[3] = {0, 0, 0};
                int nc = ic < 3 ? ic : 3;
                /* Same association order as PyTorch: rows first weighted by the column weights. */
                for (int ch = 0; ch < ic; ch++) {
                    float t = wa * (va * ra[xa + ch] + vb * ra[xb + ch]) + wb * (va * rb[xa + ch] + vb * rb[xb + ch]);
                    if (ic == c) {
                        *dst++ = resize_round(t);
                    } else if (ch < nc) {
                        v[ch] = t;
                    }
                }
                if (ic == c) continue;
                if (ic == 1) { /* 1 -> 3: replicate the grey value */
                    uint8_t g = resize_round(v[0]);
                    *dst++ = g;
                    *dst++ = g;
                    *dst++ = g;
                } else { /* 3 -> 1: plain channel mean */
                    *dst++ = resize_round((v[0] + v[1] + v[2]) * (1.0f / 3.0f));
                }
            }
        }
    }
    free(y0);
    free(y1);
    free(x0);
    free(x1);
    free(ly);
    free(lx);
    if (out == in) dataset_free(out); /* in place: replace the old arrays */
    *out = r;
    return TB_OK;
fail:
    free(y0);
    free(y1);
    free(x0);
    free(x1);
    free(ly);
    free(lx);
    free(r.images); /* r is either zeroed or holds only arrays allocated here */
    free(r.labels);
    if (out != in) memset(out, 0, sizeof *out);
    return st;
}

void dataset_free(struct dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
