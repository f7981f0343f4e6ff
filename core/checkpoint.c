/* checkpoint.c — safetensors checkpoints in torchvision's layouts (see checkpoint.h).
 *
 * Bytes are encoded and decoded explicitly as little-endian, so the files are the same on any host.
 * Loading reads the header once, validates every tensor record before touching the arenas' data,
 * then reads each expected tensor with one seek + read and transposes it into our layout.
 */
#define _GNU_SOURCE /* mkstemp, fsync, fileno, fseeko */

#include "checkpoint.h"

#include "json.h"
#include "regular_file.h"
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CK_MAX_HEADER (100u << 20) /* the reference implementation's limit */
#define CK_COUNTER_SUFFIX ".num_batches_tracked"
#define CK_OPT_PREFIX "__optimizer__."
#define CK_DIR_SUFFIX ".safetensors"

/* How a tensor's torchvision layout relates to ours. */
enum ck_layout {
    CK_SAME,    /* identical element order */
    CK_CONV,    /* ours (KH,KW,CG,OC), torch (OC,CG,KH,KW) */
    CK_DW,      /* ours (KH,KW,C), torch (C,1,KH,KW) */
    CK_DENSE_T, /* ours (IN,OUT), torch (OUT,IN) or (OUT,IN,1,1) */
};

struct ck_spec {
    enum ck_layout lay;
    int ndim;
    long long dims[4]; /* torch's shape */
    int i64;           /* stored as I64 (counters) instead of F32 */
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_buffer(const struct param_entry *e) { return e->kind == PARAM_BUFFER || e->kind == PARAM_COUNTER; }

/* The name of copy k of the optimizer state of trainable entry e: "__optimizer__.<name>.<k>". */
static void opt_name(const struct param_entry *e, int k, char *out, size_t n)
{
    snprintf(out, n, "%s%s.%d", CK_OPT_PREFIX, e->name, k);
}

/* torch's shape and the layout map of entry e. */
static void spec_of(const struct model *m, const struct param_entry *e, struct ck_spec *s)
{
    const enum op_kind op = m->layers[e->layer].op;
    const int *d = e->dims;
    memset(s, 0, sizeof *s);
    s->lay = CK_SAME;
    s->ndim = e->ndim;
    for (int i = 0; i < e->ndim; i++) s->dims[i] = d[i];
    s->i64 = e->kind == PARAM_COUNTER;
    if (e->kind != PARAM_WEIGHT) return;
    if (op == OP_CONV && e->ndim == 4) {
        s->lay = CK_CONV;
        s->dims[0] = d[3], s->dims[1] = d[2], s->dims[2] = d[0], s->dims[3] = d[1];
    } else if (op == OP_DWCONV && e->ndim == 3) {
        s->lay = CK_DW;
        s->ndim = 4;
        s->dims[0] = d[2], s->dims[1] = 1, s->dims[2] = d[0], s->dims[3] = d[1];
    } else if (op == OP_DENSE && e->ndim == 2 && ends_with(e->name, ".weight")) {
        /* nn.Linear, or a 1×1 Conv2d where the model says so (torchvision's SqueezeExcitation). */
        s->lay = CK_DENSE_T;
        s->dims[0] = d[1], s->dims[1] = d[0];
        if (e->torch_conv1x1) {
            s->ndim = 4;
            s->dims[2] = s->dims[3] = 1;
        }
    }
}

/* Copies one tensor between our layout and torch's (dst and src do not alias): each element's index in
 * both layouts is computed once, and `to_torch` picks the direction. */
static void convert_layout(float *dst, const float *src, const struct param_entry *e, const struct ck_spec *s,
                           int to_torch)
{
    const int *d = e->dims;
#define CK_MOVE(ours, torch)                                  \
    do {                                                      \
        const size_t io_ = (ours), it_ = (torch);             \
        if (to_torch) dst[it_] = src[io_];                    \
        else dst[io_] = src[it_];                             \
    } while (0)
    switch (s->lay) {
    case CK_CONV: { /* ours (KH,KW,C/G,OC), torch (OC,C/G,KH,KW) */
        const int KH = d[0], KW = d[1], CG = d[2], OC = d[3];
        for (int kh = 0; kh < KH; kh++)
            for (int kw = 0; kw < KW; kw++)
                for (int ci = 0; ci < CG; ci++)
                    for (int oc = 0; oc < OC; oc++)
                        CK_MOVE((((size_t)kh * KW + kw) * CG + ci) * OC + oc, (((size_t)oc * CG + ci) * KH + kh) * KW + kw);
        break;
    }
    case CK_DW: { /* ours (KH,KW,C), torch (C,1,KH,KW) */
        const int KH = d[0], KW = d[1], C = d[2];
        for (int kh = 0; kh < KH; kh++)
            for (int kw = 0; kw < KW; kw++)
                for (int c = 0; c < C; c++) CK_MOVE(((size_t)kh * KW + kw) * C + c, ((size_t)c * KH + kh) * KW + kw);
        break;
    }
    case CK_DENSE_T: { /* ours (IN,OUT), torch (OUT,IN) */
        const int IN = d[0], OUT = d[1];
        for (int i = 0; i < IN; i++)
            for (int o = 0; o < OUT; o++) CK_MOVE((size_t)i * OUT + o, (size_t)o * IN + i);
        break;
    }
    case CK_SAME: memcpy(dst, src, e->n * sizeof *dst); break;
    }
#undef CK_MOVE
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_f32(uint8_t *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static float get_f32(const uint8_t *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/* The name of the counter torch keeps beside BatchNorm entry e (its running_mean), or 0 if none. */
static int counter_name(const struct model *m, const struct param_entry *e, char *out, size_t n)
{
    if (e->kind != PARAM_BUFFER || m->layers[e->layer].op != OP_BN || !ends_with(e->name, ".running_mean")) return 0;
    /* A model that tracks the counter itself has a PARAM_COUNTER entry for the layer: no synthetic one. */
    for (int k = 0; k < m->n_entries; k++)
        if (m->params[k].kind == PARAM_COUNTER && m->params[k].layer == e->layer) return 0;
    size_t stem = strlen(e->name) - strlen(".running_mean");
    if (stem + sizeof CK_COUNTER_SUFFIX > n) return 0;
    memcpy(out, e->name, stem);
    memcpy(out + stem, CK_COUNTER_SUFFIX, sizeof CK_COUNTER_SUFFIX);
    return 1;
}

static void key_tensor(struct json_buf *b, const char *name, const char *dtype, int ndim, const long long *dims,
                       uint64_t a, uint64_t z)
{
    json_key_object(b, name);
    json_key_str(b, "dtype", dtype);
    json_key_array(b, "shape");
    for (int i = 0; i < ndim; i++) json_int(b, dims[i]);
    json_end_array(b);
    json_key_array(b, "data_offsets");
    json_int(b, (long long)a);
    json_int(b, (long long)z);
    json_end_array(b);
    json_end_object(b);
}

/* Writes meta_json's members as string values (safetensors' metadata is str → str), plus format=pt and,
 * for a model with BatchNorm, bn_eps: a model trained with another eps than the reader's default (e.g.
 * --bn-eps) computes the same function only with it. */
static int write_meta(struct json_buf *b, const char *path, const struct model *m, const char *meta_json)
{
    struct json_value *meta = NULL;
    int has_format = 0, has_eps = 0;
    json_key_object(b, "__metadata__");
    if (meta_json && meta_json[0]) {
        if (json_parse(meta_json, strlen(meta_json), &meta) != TB_OK || meta->type != JSON_OBJECT) {
            json_value_free(meta);
            return tb_error_set(TB_EINVAL, "checkpoint %s: metadata must be a JSON object (got '%.60s')", path,
                                meta_json);
        }
        for (int i = 0; i < meta->n; i++) {
            const struct json_value *v = &meta->items[i];
            if (strcmp(meta->keys[i], "format") == 0) has_format = 1;
            if (strcmp(meta->keys[i], "bn_eps") == 0) has_eps = 1;
            if (v->type == JSON_STRING) {
                json_key_str(b, meta->keys[i], v->str);
            } else {
                struct json_buf t;
                json_buf_init(&t);
                json_write_value(&t, v);
                json_key_str(b, meta->keys[i], json_buf_str(&t));
                json_buf_free(&t);
            }
        }
        json_value_free(meta);
    }
    if (!has_format) json_key_str(b, "format", "pt");
    /* GroupNorm's group count: the tensors' shapes do not show it, and another count is another function. */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].op == OP_GN) {
            char v[32];
            snprintf(v, sizeof v, "%d", m->layers[i].a.norm.groups);
            json_key_str(b, "gn_groups", v);
            break;
        }
    for (int i = 0; i < m->n_layers && !has_eps; i++)
        if (m->layers[i].op == OP_BN) {
            char v[32];
            snprintf(v, sizeof v, "%.9g", (double)m->layers[i].a.norm.eps);
            json_key_str(b, "bn_eps", v);
            has_eps = 1;
        }
    json_end_object(b);
    return TB_OK;
}

static size_t max_entry_floats(const struct model *m)
{
    size_t mx = 1;
    for (int k = 0; k < m->n_entries; k++)
        if (m->params[k].n > mx) mx = m->params[k].n;
    return mx;
}

/* Writes the tensors' bytes in header order (model entries, then the n_opt optimizer copies of each
 * trainable entry); returns 0 on success, -1 on a write error. */
static int write_data(FILE *f, const struct model *m, const float *params, const float *buffers, const float *opt,
                      int n_opt, float *tmp, uint8_t *bytes)
{
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        struct ck_spec s;
        spec_of(m, e, &s);
        const float *src = (is_buffer(e) ? buffers : params) + e->off;
        size_t nb;
        if (s.i64) {
            for (size_t i = 0; i < e->n; i++) put_u64(bytes + 8 * i, (uint64_t)(int64_t)llround(src[i]));
            nb = 8 * e->n;
        } else {
            convert_layout(tmp, src, e, &s, 1);
            for (size_t i = 0; i < e->n; i++) put_f32(bytes + 4 * i, tmp[i]);
            nb = 4 * e->n;
        }
        if (fwrite(bytes, 1, nb, f) != nb) return -1;
        char cn[96];
        if (counter_name(m, e, cn, sizeof cn)) {
            uint8_t zero[8] = {0};
            if (fwrite(zero, 1, 8, f) != 8) return -1;
        }
    }
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (is_buffer(e)) continue;
        for (int j = 0; j < n_opt; j++) {
            const float *src = opt + (size_t)j * m->n_params + e->off;
            for (size_t i = 0; i < e->n; i++) put_f32(bytes + 4 * i, src[i]);
            if (fwrite(bytes, 1, 4 * e->n, f) != 4 * e->n) return -1;
        }
    }
    return 0;
}

/* fsync the directory holding path, so the rename itself is durable (best effort). */
static void sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* checkpoint_save and checkpoint_save_state: n_opt optimizer copies in opt (n_opt = 0: none). */
static int save_impl(const char *path, const struct model *m, const float *params, const float *buffers,
                     const float *opt, int n_opt, const char *meta_json)
{
    int st = TB_OK;
    struct json_buf b;
    json_buf_init(&b);
    float *tmp = NULL;
    uint8_t *bytes = NULL;
    char *tmp_path = NULL;
    FILE *f = NULL;
    int fd = -1;

    for (int i = 0; i < m->n_entries; i++)
        for (int j = i + 1; j < m->n_entries; j++)
            if (strcmp(m->params[i].name, m->params[j].name) == 0) {
                st = tb_error_set(TB_EINVAL, "checkpoint %s: model %s has two tensors named %s", path, m->name,
                                  m->params[i].name);
                goto fail;
            }

    /* Header: tensors in entry order, data packed back to back in the same order. */
    json_begin_object(&b);
    uint64_t cur = 0;
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        struct ck_spec s;
        spec_of(m, e, &s);
        const uint64_t nb = (uint64_t)e->n * (s.i64 ? 8u : 4u);
        key_tensor(&b, e->name, s.i64 ? "I64" : "F32", s.ndim, s.dims, cur, cur + nb);
        cur += nb;
        char cn[96];
        if (counter_name(m, e, cn, sizeof cn)) {
            key_tensor(&b, cn, "I64", 0, NULL, cur, cur + 8);
            cur += 8;
        }
    }
    /* Optimizer state in our layout, flat: only trainbench reads it back (a resume). */
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (is_buffer(e)) continue;
        for (int j = 0; j < n_opt; j++) {
            char on[160];
            opt_name(e, j, on, sizeof on);
            const long long dim = (long long)e->n;
            key_tensor(&b, on, "F32", 1, &dim, cur, cur + 4 * (uint64_t)e->n);
            cur += 4 * (uint64_t)e->n;
        }
    }
    if ((st = write_meta(&b, path, m, meta_json)) != TB_OK) goto fail;
    json_end_object(&b);
    if ((st = json_buf_status(&b)) != TB_OK) {
        st = tb_error_set(st, "checkpoint %s: cannot build the header (%s)", path, tb_status_name(st));
        goto fail;
    }
    /* Pad with spaces so the data starts 8-byte aligned, as the reference writer does. */
    size_t hlen = b.len;
    while (hlen % 8) hlen++;

    const size_t mx = max_entry_floats(m);
    tmp = malloc(mx * sizeof *tmp);
    bytes = malloc(mx * 8);
    tmp_path = malloc(strlen(path) + 16);
    if (!tmp || !bytes || !tmp_path) {
        st = tb_error_set(TB_ENOMEM, "checkpoint %s: out of memory", path);
        goto fail;
    }
    sprintf(tmp_path, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp_path);
    if (fd < 0) {
        st = tb_error_set(TB_EIO, "checkpoint %s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(tmp_path);
        tmp_path = NULL;
        goto fail;
    }
    (void)fchmod(fd, 0644);
    f = fdopen(fd, "wb");
    if (!f) {
        st = tb_error_set(TB_EIO, "checkpoint %s: fdopen: %s", path, strerror(errno));
        goto fail;
    }
    fd = -1;
    uint8_t len8[8];
    put_u64(len8, hlen);
    int bad = fwrite(len8, 1, 8, f) != 8 || fwrite(b.data, 1, b.len, f) != b.len;
    for (size_t i = b.len; i < hlen && !bad; i++) bad = fputc(' ', f) == EOF;
    if (!bad) bad = write_data(f, m, params, buffers, opt, n_opt, tmp, bytes) != 0;
    if (!bad) bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (bad) {
        st = tb_error_set(TB_EIO, "checkpoint %s: write failed: %s", path, strerror(errno));
        goto fail;
    }
    int cr = fclose(f);
    f = NULL;
    if (cr != 0) {
        st = tb_error_set(TB_EIO, "checkpoint %s: close failed: %s", path, strerror(errno));
        goto fail;
    }
    if (rename(tmp_path, path) != 0) {
        st = tb_error_set(TB_EIO, "checkpoint %s: cannot rename %s into place: %s", path, tmp_path, strerror(errno));
        goto fail;
    }
    free(tmp_path);
    tmp_path = NULL;
    sync_dir(path);
fail:
    if (f) fclose(f);
    if (fd >= 0) close(fd);
    if (tmp_path) {
        unlink(tmp_path);
        free(tmp_path);
    }
    free(tmp);
    free(bytes);
    json_buf_free(&b);
    return st;
}

int checkpoint_save(const char *path, const struct model *m, const float *params, const float *buffers,
                    const char *meta_json)
{
    return save_impl(path, m, params, buffers, NULL, 0, meta_json);
}

int checkpoint_save_state(const char *path, const struct model *m, const float *params, const float *buffers,
                          const float *opt, int n_opt, const char *meta_json)
{
    if (n_opt < 0 || (n_opt > 0 && !opt))
        return tb_error_set(TB_EINVAL, "checkpoint %s: %d optimizer state copies without data", path, n_opt);
    return save_impl(path, m, params, buffers, opt, n_opt, meta_json);
}

/* ---- reading ---- */

/* One validated tensor record of a header. */
struct ck_rec {
    const char *name;
    const char *dtype;
    int ndim;
    long long dims[8];
    uint64_t a, z; /* data_offsets */
    int used;
};

struct ck_file {
    const char *path;
    FILE *f;
    uint64_t size, data_start;
    struct json_value *root;
    struct ck_rec *recs;
    int n_recs;
};

static void ck_close(struct ck_file *c)
{
    if (c->f) fclose(c->f);
    json_value_free(c->root);
    free(c->recs);
    memset(c, 0, sizeof *c);
}

static int as_count(const struct json_value *v, uint64_t *out)
{
    if (!v || v->type != JSON_NUMBER || !(v->number >= 0.0) || v->number > 9007199254740992.0 ||
        v->number != floor(v->number))
        return 0;
    *out = (uint64_t)v->number;
    return 1;
}

static int dtype_bytes(const char *dt)
{
    static const struct { const char *n; int b; } t[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
        {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (strcmp(dt, t[i].n) == 0) return t[i].b;
    return 0;
}

static int cmp_rec_off(const void *x, const void *y)
{
    const struct ck_rec *const *a = x, *const *b = y;
    return (*a)->a < (*b)->a ? -1 : (*a)->a > (*b)->a ? 1 : ((*a)->z > (*b)->z) - ((*a)->z < (*b)->z);
}

static int cmp_rec_name(const void *x, const void *y)
{
    const struct ck_rec *const *a = x, *const *b = y;
    return strcmp((*a)->name, (*b)->name);
}

/* Opens path, reads and parses the header, validates every tensor record against the file. */
static int ck_open(struct ck_file *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->path = path;
    char *hdr = NULL;
    struct ck_rec **order = NULL;
    int st = TB_OK;
    const char *why = NULL;
    c->f = regular_fopen(path, &why);
    if (!c->f) return tb_error_set(TB_EIO, "checkpoint %s: cannot open: %s", path, why);
    struct stat sb;
    if (fstat(fileno(c->f), &sb) != 0) {
        st = tb_error_set(TB_EIO, "checkpoint %s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    c->size = (uint64_t)sb.st_size;
    if (c->size < 8) {
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: file is %llu bytes, too short for the 8-byte header length",
                          path, (unsigned long long)c->size);
        goto fail;
    }
    uint8_t len8[8];
    if (fread(len8, 1, 8, c->f) != 8) {
        st = tb_error_set(TB_EIO, "checkpoint %s: short read of the header length", path);
        goto fail;
    }
    const uint64_t hlen = get_u64(len8);
    if (hlen > c->size - 8) {
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: header length %llu exceeds the file's %llu bytes after it",
                          path, (unsigned long long)hlen, (unsigned long long)(c->size - 8));
        goto fail;
    }
    if (hlen < 2 || hlen > CK_MAX_HEADER) {
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: header length %llu is not in [2, %u]", path,
                          (unsigned long long)hlen, CK_MAX_HEADER);
        goto fail;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        st = tb_error_set(TB_ENOMEM, "checkpoint %s: out of memory for a %llu-byte header", path,
                          (unsigned long long)hlen);
        goto fail;
    }
    if (fread(hdr, 1, hlen, c->f) != hlen) {
        st = tb_error_set(TB_EIO, "checkpoint %s: short read of the header", path);
        goto fail;
    }
    hdr[hlen] = '\0';
    c->data_start = 8 + hlen;
    const uint64_t data_size = c->size - c->data_start;
    if ((st = json_parse(hdr, hlen, &c->root)) != TB_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", tb_error_get());
        st = tb_error_set(st == TB_ENOMEM ? TB_ENOMEM : TB_EFORMAT, "checkpoint %s: header is not valid JSON (%s)",
                          path, why);
        goto fail;
    }
    if (c->root->type != JSON_OBJECT) {
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: header is not a JSON object", path);
        goto fail;
    }
    c->recs = calloc((size_t)c->root->n + 1, sizeof *c->recs);
    order = calloc((size_t)c->root->n + 1, sizeof *order);
    if (!c->recs || !order) {
        st = tb_error_set(TB_ENOMEM, "checkpoint %s: out of memory", path);
        goto fail;
    }
    for (int i = 0; i < c->root->n; i++) {
        const char *name = c->root->keys[i];
        const struct json_value *v = &c->root->items[i];
        if (strcmp(name, "__metadata__") == 0) {
            if (v->type != JSON_OBJECT) {
                st = tb_error_set(TB_EFORMAT, "checkpoint %s: __metadata__ is not an object", path);
                goto fail;
            }
            continue;
        }
        struct ck_rec *r = &c->recs[c->n_recs];
        r->name = name;
        const int obj = v->type == JSON_OBJECT;
        const struct json_value *dt = obj ? json_get(v, "dtype") : NULL, *sh = obj ? json_get(v, "shape") : NULL,
                                *of = obj ? json_get(v, "data_offsets") : NULL;
        if (!dt || dt->type != JSON_STRING || !sh || sh->type != JSON_ARRAY || !of ||
            of->type != JSON_ARRAY) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s needs dtype, shape and data_offsets", path, name);
            goto fail;
        }
        r->dtype = dt->str;
        const int eb = dtype_bytes(r->dtype);
        if (!eb) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s has unknown dtype '%.16s'", path, name, r->dtype);
            goto fail;
        }
        if (sh->n > 8) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s has %d dimensions (at most 8)", path, name, sh->n);
            goto fail;
        }
        r->ndim = sh->n;
        uint64_t count = 1;
        for (int d = 0; d < sh->n; d++) {
            uint64_t k;
            if (!as_count(&sh->items[d], &k) || k > (1ull << 40)) {
                st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s has a bad dimension %d", path, name, d);
                goto fail;
            }
            r->dims[d] = (long long)k;
            count = k == 0 ? 0 : (count > (1ull << 50) / k ? (1ull << 50) : count * k);
        }
        if (of->n != 2 || !as_count(&of->items[0], &r->a) || !as_count(&of->items[1], &r->z) || r->a > r->z) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s: data_offsets must be two integers [begin, end]",
                              path, name);
            goto fail;
        }
        if (r->z > data_size) {
            st = tb_error_set(TB_EFORMAT,
                              "checkpoint %s: tensor %s: data_offsets [%llu, %llu] out of range (%llu data bytes)",
                              path, name, (unsigned long long)r->a, (unsigned long long)r->z,
                              (unsigned long long)data_size);
            goto fail;
        }
        if (r->z - r->a != count * (uint64_t)eb) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s: %llu data bytes for %llu elements of %s", path,
                              name, (unsigned long long)(r->z - r->a), (unsigned long long)count, r->dtype);
            goto fail;
        }
        order[c->n_recs] = r;
        c->n_recs++;
    }
    /* Names first: a key repeated with the same offsets is a duplicate, not an overlap. */
    qsort(order, (size_t)c->n_recs, sizeof *order, cmp_rec_name);
    for (int i = 1; i < c->n_recs; i++)
        if (strcmp(order[i]->name, order[i - 1]->name) == 0) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: duplicate tensor name: %s appears twice in the header", path,
                              order[i]->name);
            goto fail;
        }
    /* Data ranges must be disjoint (empty tensors occupy nothing). */
    qsort(order, (size_t)c->n_recs, sizeof *order, cmp_rec_off);
    for (int i = 1; i < c->n_recs; i++)
        if (order[i]->a < order[i - 1]->z && order[i]->a < order[i]->z) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensors %s [%llu, %llu] and %s [%llu, %llu] overlap", path,
                              order[i - 1]->name, (unsigned long long)order[i - 1]->a,
                              (unsigned long long)order[i - 1]->z, order[i]->name, (unsigned long long)order[i]->a,
                              (unsigned long long)order[i]->z);
            goto fail;
        }
    free(hdr);
    free(order);
    return TB_OK;
fail:
    free(hdr);
    free(order);
    ck_close(c);
    return st;
}

static struct ck_rec *ck_find(struct ck_file *c, const char *name)
{
    for (int i = 0; i < c->n_recs; i++)
        if (strcmp(c->recs[i].name, name) == 0) return &c->recs[i];
    return NULL;
}

static void fmt_shape(char *buf, size_t n, int ndim, const long long *dims)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", dims[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
}

/* Reads record r's data into bytes; TB_EIO (message set) on a short read. */
static int ck_read_tensor(struct ck_file *c, const struct ck_rec *r, uint8_t *bytes)
{
    const size_t nb = (size_t)(r->z - r->a);
    if (fseeko(c->f, (off_t)(c->data_start + r->a), SEEK_SET) != 0 || fread(bytes, 1, nb, c->f) != nb)
        return tb_error_set(TB_EIO, "checkpoint %s: short read of tensor %s", c->path, r->name);
    return TB_OK;
}

/* Weights or optimizer state with a NaN or Inf cannot train: every step would carry them on (a NaN
 * bias behind a ReLU even keeps the loss finite), and a --save would write them back. TB_EFORMAT
 * naming the tensor and the first bad index. */
static int ck_check_finite(const struct ck_file *c, const char *name, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s holds %s at index %zu: not weights to train from",
                                c->path, name, isnan(v[i]) ? "NaN" : "Inf", i);
    return TB_OK;
}

/* opt NULL: checks the n_opt optimizer copies of every trainable entry (present, F32 of shape (n)) and marks
 * them used; else reads them into opt (n_opt, n_params). One walk, so the read takes exactly what was checked. */
static int ck_load_opt_state(struct ck_file *c, const struct model *m, int n_opt, float *opt, uint8_t *bytes)
{
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        if (is_buffer(e)) continue;
        for (int j = 0; j < n_opt; j++) {
            char on[160];
            opt_name(e, j, on, sizeof on);
            struct ck_rec *r = ck_find(c, on);
            if (!opt) {
                if (!r)
                    return tb_error_set(TB_EFORMAT, "checkpoint %s: optimizer state %s missing (%d copies per "
                                        "parameter expected: not a resumable checkpoint of this optimizer)",
                                        c->path, on, n_opt);
                if (strcmp(r->dtype, "F32") != 0 || r->ndim != 1 || r->dims[0] != (long long)e->n)
                    return tb_error_set(TB_EFORMAT, "checkpoint %s: optimizer state %s is not F32 of shape (%zu)",
                                        c->path, on, e->n);
                r->used = 1;
                continue;
            }
            int st2 = ck_read_tensor(c, r, bytes);
            if (st2 != TB_OK) return st2;
            float *dst = opt + (size_t)j * m->n_params + e->off;
            for (size_t i = 0; i < e->n; i++) dst[i] = get_f32(bytes + 4 * i);
            if ((st2 = ck_check_finite(c, on, dst, e->n)) != TB_OK) return st2;
        }
    }
    return TB_OK;
}

/* checkpoint_load (n_opt < 0: optimizer tensors are ignored) and checkpoint_load_state (exactly n_opt
 * optimizer copies per trainable entry, read into opt). */
static int load_impl(const char *path, const struct model *m, float *params, float *buffers, float *opt, int n_opt)
{
    struct ck_file c;
    int st = ck_open(&c, path);
    if (st != TB_OK) return st;
    float *tmp = NULL;
    uint8_t *bytes = NULL;
    /* Pass 1: every expected tensor present with the right dtype and shape. */
    int missing = 0;
    const char *first_missing = NULL;
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        struct ck_spec s;
        spec_of(m, e, &s);
        struct ck_rec *r = ck_find(&c, e->name);
        if (!r) {
            if (!missing++) first_missing = e->name;
            continue;
        }
        r->used = 1;
        const char *want = s.i64 ? "I64" : "F32";
        if (strcmp(r->dtype, want) != 0) {
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s has dtype %s, expected %s", path, e->name,
                              r->dtype, want);
            goto fail;
        }
        int same = r->ndim == s.ndim;
        for (int d = 0; same && d < s.ndim; d++) same = r->dims[d] == s.dims[d];
        if (!same) {
            char got[96], exp[96];
            fmt_shape(got, sizeof got, r->ndim, r->dims);
            fmt_shape(exp, sizeof exp, s.ndim, s.dims);
            st = tb_error_set(TB_EFORMAT, "checkpoint %s: tensor %s has shape %s, expected %s for model %s", path,
                              e->name, got, exp, m->name);
            goto fail;
        }
    }
    if (missing) {
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: %d tensor(s) of model %s missing, first %s", path, missing,
                          m->name, first_missing);
        goto fail;
    }
    if (n_opt > 0 && (st = ck_load_opt_state(&c, m, n_opt, NULL, NULL)) != TB_OK) goto fail;
    int extra = 0;
    const char *first_extra = NULL;
    for (int i = 0; i < c.n_recs; i++)
        if (!c.recs[i].used && !ends_with(c.recs[i].name, CK_COUNTER_SUFFIX) &&
            !(n_opt < 0 && strncmp(c.recs[i].name, CK_OPT_PREFIX, strlen(CK_OPT_PREFIX)) == 0))
            if (!extra++) first_extra = c.recs[i].name;
    if (extra) {
        st = tb_error_set(TB_EFORMAT, "checkpoint %s: %d tensor(s) not in model %s, first %s", path, extra, m->name,
                          first_extra);
        goto fail;
    }
    /* Pass 2: read and convert. */
    const size_t mx = max_entry_floats(m);
    tmp = malloc(mx * sizeof *tmp);
    bytes = malloc(mx * 8);
    if (!tmp || !bytes) {
        st = tb_error_set(TB_ENOMEM, "checkpoint %s: out of memory", path);
        goto fail;
    }
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        struct ck_spec s;
        spec_of(m, e, &s);
        if ((st = ck_read_tensor(&c, ck_find(&c, e->name), bytes)) != TB_OK) goto fail;
        float *dst = (is_buffer(e) ? buffers : params) + e->off;
        if (s.i64) {
            for (size_t i = 0; i < e->n; i++) dst[i] = (float)(int64_t)get_u64(bytes + 8 * i);
        } else {
            for (size_t i = 0; i < e->n; i++) tmp[i] = get_f32(bytes + 4 * i);
            if ((st = ck_check_finite(&c, e->name, tmp, e->n)) != TB_OK) goto fail;
            convert_layout(dst, tmp, e, &s, 0);
        }
    }
    if (n_opt > 0) st = ck_load_opt_state(&c, m, n_opt, opt, bytes);
fail:
    free(tmp);
    free(bytes);
    ck_close(&c);
    return st;
}

int checkpoint_load(const char *path, const struct model *m, float *params, float *buffers)
{
    return load_impl(path, m, params, buffers, NULL, -1);
}

int checkpoint_load_state(const char *path, const struct model *m, float *params, float *buffers, float *opt,
                          int n_opt)
{
    if (n_opt < 0 || (n_opt > 0 && !opt))
        return tb_error_set(TB_EINVAL, "checkpoint %s: %d optimizer state copies without a destination", path, n_opt);
    return load_impl(path, m, params, buffers, opt, n_opt);
}

int checkpoint_read_meta(const char *path, const char *key, char *out, size_t out_size)
{
    struct ck_file c;
    int st = ck_open(&c, path);
    if (st != TB_OK) return st;
    st = tb_error_set(TB_EINVAL, "checkpoint %s: no metadata key '%s'", path, key);
    for (int i = 0; i < c.root->n; i++) {
        if (strcmp(c.root->keys[i], "__metadata__") != 0) continue;
        const struct json_value *meta = &c.root->items[i];
        for (int j = 0; j < meta->n; j++)
            if (strcmp(meta->keys[j], key) == 0) {
                if (meta->items[j].type != JSON_STRING) {
                    st = tb_error_set(TB_EFORMAT, "checkpoint %s: metadata '%s' is not a string", path, key);
                } else {
                    if (out_size) snprintf(out, out_size, "%s", meta->items[j].str);
                    tb_error_clear();
                    st = TB_OK;
                }
                break;
            }
        break;
    }
    ck_close(&c);
    return st;
}

/* ---- checkpoint directories ---- */

void checkpoint_dir_path(const char *dir, long step, char *out, size_t n)
{
    snprintf(out, n, "%s/" CHECKPOINT_NAME_PREFIX "%010ld" CK_DIR_SUFFIX, dir, step);
}

/* The step of a complete checkpoint's file name, or -1 (other files, and the temporary files of a save:
 * "ckpt-<step>.safetensors.tmp.XXXXXX"). */
long checkpoint_name_step(const char *name)
{
    const size_t np = strlen(CHECKPOINT_NAME_PREFIX), ns = strlen(CK_DIR_SUFFIX), n = strlen(name);
    if (n <= np + ns || strncmp(name, CHECKPOINT_NAME_PREFIX, np) != 0 || strcmp(name + n - ns, CK_DIR_SUFFIX) != 0)
        return -1;
    long step = 0;
    for (size_t i = np; i < n - ns; i++) {
        if (name[i] < '0' || name[i] > '9' || step > (1L << 50)) return -1;
        step = step * 10 + (name[i] - '0');
    }
    return step;
}

static int cmp_long_desc(const void *x, const void *y)
{
    const long a = *(const long *)x, b = *(const long *)y;
    return (a < b) - (a > b);
}

int checkpoint_dir_list(const char *dir, long *steps, int max, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return tb_error_set(TB_EIO, "checkpoint directory %s: cannot open: %s", dir, strerror(errno));
    long *all = NULL;
    size_t cnt = 0, cap = 0;
    int st = TB_OK;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const long step = checkpoint_name_step(de->d_name);
        if (step < 0) continue;
        if (cnt == cap) {
            cap = cap ? 2 * cap : 64;
            long *p = realloc(all, cap * sizeof *all);
            if (!p) {
                st = tb_error_set(TB_ENOMEM, "checkpoint directory %s: out of memory listing it", dir);
                break;
            }
            all = p;
        }
        all[cnt++] = step;
    }
    closedir(d);
    if (st == TB_OK) {
        if (cnt) qsort(all, cnt, sizeof *all, cmp_long_desc);
        for (size_t i = 0; i < cnt && (int)i < max; i++) steps[(*n)++] = all[i];
    }
    free(all);
    return st;
}

int checkpoint_dir_prune(const char *dir, int keep)
{
    long *steps = malloc((size_t)(keep > 0 ? keep : 1) * sizeof *steps);
    if (!steps) return tb_error_set(TB_ENOMEM, "checkpoint directory %s: out of memory", dir);
    int n = 0, st = checkpoint_dir_list(dir, steps, keep, &n);
    const long oldest_kept = n == keep && n > 0 ? steps[n - 1] : -1;
    free(steps);
    if (st != TB_OK) return st;
    DIR *d = opendir(dir);
    if (!d) return tb_error_set(TB_EIO, "checkpoint directory %s: cannot open: %s", dir, strerror(errno));
    char path[4096];
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const char *name = de->d_name;
        const long step = checkpoint_name_step(name);
        /* A temporary file here is a save that was killed: the directory belongs to one run at a time,
         * and this run's own save has been renamed into place already. */
        const int stale_tmp = strncmp(name, CHECKPOINT_NAME_PREFIX, strlen(CHECKPOINT_NAME_PREFIX)) == 0 &&
                              strstr(name, CK_DIR_SUFFIX ".tmp.") != NULL;
        if (!stale_tmp && !(step >= 0 && oldest_kept >= 0 && step < oldest_kept)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (unlink(path) != 0 && errno != ENOENT) {
            st = tb_error_set(TB_EIO, "checkpoint directory %s: cannot remove %s: %s", dir, name, strerror(errno));
            break;
        }
    }
    closedir(d);
    return st;
}

int checkpoint_dir_create(const char *dir)
{
    char p[4096];
    if (!dir[0]) return tb_error_set(TB_EINVAL, "checkpoint directory: empty path");
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return tb_error_set(TB_EINVAL, "checkpoint directory %.60s...: path too long", dir);
    for (char *q = p + 1;; q++) {
        const char c = *q;
        if (c != '/' && c != '\0') continue;
        *q = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return tb_error_set(TB_EIO, "checkpoint directory %s: cannot create %s: %s", dir, p, strerror(errno));
        *q = c;
        if (!c) break;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tb_error_set(TB_EIO, "checkpoint directory %s: not a directory", dir);
    return TB_OK;
}

int checkpoint_dir_lock(const char *dir, int *fd_out)
{
    *fd_out = -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" CHECKPOINT_LOCK_NAME, dir);
    /* A folder we may not write in (a resume from read-only media) cannot be locked, nor written by another run. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC); /* another user's lock file: flock works on a read-only fd */
    if (fd < 0) return TB_OK;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char pid[32] = "";
        const ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        if (n > 0) pid[n] = '\0', pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e != EWOULDBLOCK) return TB_OK; /* a file system without locks: as before */
        return tb_error_set(TB_EIO, "%s is in use by another bench process%s%s%s: two runs in one checkpoint folder "
                                    "mix or replace each other's checkpoints and rows; wait for it, or give another "
                                    "folder", dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
    }
    /* Who holds it, for the message another run gets. */
    if (ftruncate(fd, 0) == 0) {
        char pid[32];
        const int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (pwrite(fd, pid, (size_t)n, 0) != n) { /* the message then names no pid */ }
    }
    *fd_out = fd;
    return TB_OK;
}
