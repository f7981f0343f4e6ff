/* dataset.c — the dataset front end: format detection (dataset_load_dir picks the IDX or CIFAR-10
 * reader) and bilinear resize.
 *
 * Sits above the readers (dataset_idx.c, dataset_cifar.c), which sit on the shared plain/gzip reader
 * and dataset_free (dataset_io.c); nothing below calls back up here. Not a decoder of any particular
 * format and not augmentation. Every function here is reentrant; error messages go to the calling
 * thread's status buffer.
 */
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"

typedef unsigned long long ull;

int dataset_load_dir(const char *dir, int train, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) return tb_error_set(TB_EINVAL, "dataset_load_dir: empty directory name");
    struct stat st;
    /* A folder that is not there is most often a data set not yet fetched: say what one holds. */
    if (stat(dir, &st) != 0 && errno == ENOENT)
        return tb_error_set(TB_EIO, "%s: no such directory (a data set is a folder of IDX files, "
                                    "train-images-idx3-ubyte[.gz] ..., or of CIFAR-10 binary batches, data_batch_1.bin "
                                    "... test_batch.bin)", dir);
    if (stat(dir, &st) != 0) return tb_error_set(TB_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tb_error_set(TB_EIO, "%s: not a directory", dir);
    /* Without search permission every file in it looks absent: "no dataset found" would hide the cause. */
    if (access(dir, X_OK) != 0) return tb_error_set(TB_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    /* Two data sets in one directory: which one the user meant is not ours to guess. */
    if (idx_probe_dir(dir) && cifar10_probe_dir(dir))
        return tb_error_set(TB_EINVAL, "%s holds both an IDX set and CIFAR-10 batches: give a directory with one", dir);
    if (idx_probe_dir(dir)) return idx_load_dir(dir, train, out);
    if (cifar10_probe_dir(dir)) return cifar10_load_dir(dir, train, out);
    return tb_error_set(TB_EIO,
                        "%s: no dataset found: neither an IDX set (train-images-idx3-ubyte[.gz], ...) "
                        "nor CIFAR-10 binary (data_batch_1.bin, test_batch.bin)",
                        dir);
}

int dataset_check_pair(struct dataset *train, struct dataset *test)
{
    /* Everything downstream (the model's input layer, the evaluation batches) takes the training
     * geometry; a test set of another shape would be read out of bounds or as garbage. */
    if (test->h != train->h || test->w != train->w || test->c != train->c)
        return tb_error_set(TB_EFORMAT, "%s: test images are %dx%dx%d but training images are %dx%dx%d (HxWxC)",
                            test->source[0] ? test->source : test->name, test->h, test->w, test->c, train->h,
                            train->w, train->c);
    /* A count read off the labels (IDX records none) differs between splits when one lacks the top
     * classes; the model needs them all, so both take the larger. Fixed counts (CIFAR-10) agree anyway. */
    int k = train->n_classes > test->n_classes ? train->n_classes : test->n_classes;
    train->n_classes = test->n_classes = k;
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
    r.labels = malloc(sizeof(int32_t) * (size_t)in->n);
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
    memcpy(r.labels, in->labels, sizeof(int32_t) * (size_t)in->n);
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
