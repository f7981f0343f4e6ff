/* test_checkpoint.c — safetensors checkpoints: round trips, layouts, malformed files, and interop with
 * PyTorch both ways.
 *
 * A tiny never-executed model with one tensor of each layout kind checks the element maps into
 * torchvision's layouts and is the source of every malformed file (a good file's header edited as text).
 * effnet-b0 round-trips bitwise. With /usr/bin/python3 + torch + torchvision present (else skipped),
 * tools/ckpt_roundtrip.py loads our effnet-b0 checkpoint into torchvision's efficientnet_b0 with
 * strict=True, and makes a torchvision checkpoint we load; in both directions our eval logits must
 * match PyTorch's (float64) within 1e-4 of the largest logit — the end-to-end check of our B0 maths.
 * Single-threaded; a few seconds (most of it Python importing torch).
 */
#include "test_util.h"

#include "checkpoint.h"
#include "json.h"
#include "local_engine.h"
#include "status.h"
#include "workload.h"

#include <dirent.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

/* ---- the tiny model: one tensor per layout kind (shapes need not chain: it is never run) ---- */

static int tiny_layer(struct model *m, enum op_kind op, const char *name)
{
    return model_add_layer(m, op, name, m->n_tensors - 1, -1, 1, 1, 1);
}

static void tiny_build(struct model *m)
{
    model_init(m, "tiny", 4, 4, 3, 5);
    int l = tiny_layer(m, OP_CONV, "c");
    model_add_param(m, l, "c.weight", PARAM_WEIGHT, 4, (int[]){2, 3, 4, 5}); /* KH,KW,CG,OC */
    l = tiny_layer(m, OP_DWCONV, "dw");
    model_add_param(m, l, "dw.weight", PARAM_WEIGHT, 3, (int[]){2, 3, 4}); /* KH,KW,C */
    l = tiny_layer(m, OP_BN, "bn");
    model_add_param(m, l, "bn.weight", PARAM_NORM, 1, (int[]){4});
    model_add_param(m, l, "bn.bias", PARAM_NORM, 1, (int[]){4});
    model_add_param(m, l, "bn.running_mean", PARAM_BUFFER, 1, (int[]){4});
    model_add_param(m, l, "bn.running_var", PARAM_BUFFER, 1, (int[]){4});
    l = tiny_layer(m, OP_DENSE, "se.fc1");
    model_add_param(m, l, "se.fc1.weight", PARAM_WEIGHT, 2, (int[]){4, 2}); /* IN,OUT */
    m->params[m->n_entries - 1].torch_conv1x1 = 1; /* torch: a 1×1 Conv2d, (OUT,IN,1,1) */
    model_add_param(m, l, "se.fc1.bias", PARAM_BIAS, 1, (int[]){2});
    l = tiny_layer(m, OP_DENSE, "fc");
    model_add_param(m, l, "fc.weight", PARAM_WEIGHT, 2, (int[]){2, 5});
    model_add_param(m, l, "fc.bias", PARAM_BIAS, 1, (int[]){5});
    l = tiny_layer(m, OP_DENSE, "k");
    model_add_param(m, l, "k.kernel", PARAM_WEIGHT, 2, (int[]){3, 5});
    tiny_layer(m, OP_SOFTMAX_CE, "loss");
    cr_assert_eq(model_finalize(m), TB_OK, "%s", tb_error_get());
}

static const struct param_entry *entry(const struct model *m, const char *name)
{
    for (int k = 0; k < m->n_entries; k++)
        if (strcmp(m->params[k].name, name) == 0) return &m->params[k];
    cr_assert_fail("model %s has no entry %s", m->name, name);
    return NULL;
}

/* Fills params and buffers with distinct values (padding left zero). */
static void fill_entries(const struct model *m, float *params, float *buffers, uint64_t seed)
{
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        float *dst = (e->kind == PARAM_BUFFER ? buffers : params) + e->off;
        tu_fill_normal(dst, e->n, seed + (uint64_t)k, 0.0f, 1.0f);
    }
}

/* Asserts every entry of a and b (params and buffers) is bitwise equal. */
static void assert_entries_equal(const struct model *m, const float *pa, const float *ba, const float *pb,
                                 const float *bb)
{
    for (int k = 0; k < m->n_entries; k++) {
        const struct param_entry *e = &m->params[k];
        const int buf = e->kind == PARAM_BUFFER;
        tu_assert_bitwise((buf ? bb : pb) + e->off, (buf ? ba : pa) + e->off, e->n, e->name);
    }
}

/* ---- raw file surgery ---- */

struct stfile {
    char *hdr;      /* header text, NUL-terminated */
    uint8_t *data;  /* tensor bytes */
    size_t data_len;
};

static void st_read_raw(const char *path, struct stfile *f)
{
    size_t len;
    char *raw = tu_read_file(path, &len);
    cr_assert_not_null(raw, "cannot read %s", path);
    cr_assert_geq(len, 8);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h |= (uint64_t)(uint8_t)raw[i] << (8 * i);
    cr_assert_leq(h, len - 8);
    f->hdr = malloc(h + 1);
    memcpy(f->hdr, raw + 8, h);
    f->hdr[h] = '\0';
    f->data_len = len - 8 - h;
    f->data = malloc(f->data_len + 1);
    memcpy(f->data, raw + 8 + h, f->data_len);
    free(raw);
}

static void st_write_raw(const char *path, const char *hdr, const uint8_t *data, size_t data_len)
{
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    uint64_t h = strlen(hdr);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(h >> (8 * i));
    cr_assert_eq(fwrite(len8, 1, 8, fp), 8u);
    cr_assert_eq(fwrite(hdr, 1, h, fp), h);
    if (data_len) cr_assert_eq(fwrite(data, 1, data_len, fp), data_len);
    cr_assert_eq(fclose(fp), 0);
}

/* Returns a malloc'd copy of s with the first occurrence of old replaced by new (which must exist). */
static char *replace_once(const char *s, const char *old, const char *new_)
{
    const char *p = strstr(s, old);
    cr_assert_not_null(p, "header has no '%s': %s", old, s);
    size_t n = strlen(s) - strlen(old) + strlen(new_);
    char *r = malloc(n + 1);
    size_t k = (size_t)(p - s);
    memcpy(r, s, k);
    strcpy(r + k, new_);
    strcat(r, p + strlen(old));
    return r;
}

/* data_offsets of tensor name in header text. */
static void offsets_of(const char *hdr, const char *name, long long *a, long long *z)
{
    struct json_value *root = NULL;
    cr_assert_eq(json_parse(hdr, strlen(hdr), &root), TB_OK, "%s", tb_error_get());
    const struct json_value *rec = NULL;
    for (int i = 0; i < root->n; i++)
        if (strcmp(root->keys[i], name) == 0) rec = &root->items[i];
    cr_assert_not_null(rec, "no %s in header", name);
    for (int i = 0; i < rec->n; i++)
        if (strcmp(rec->keys[i], "data_offsets") == 0) {
            *a = (long long)rec->items[i].items[0].number;
            *z = (long long)rec->items[i].items[1].number;
        }
    json_value_free(root);
}

/* ---- tests: the tiny model ---- */

struct tiny {
    struct model m;
    float *p, *b, *p2, *b2;
    char *dir, path[512];
};

static void tiny_setup(struct tiny *t)
{
    tiny_build(&t->m);
    t->p = tu_fvec(t->m.n_params), t->b = tu_fvec(t->m.n_buffers);
    t->p2 = tu_fvec(t->m.n_params), t->b2 = tu_fvec(t->m.n_buffers);
    fill_entries(&t->m, t->p, t->b, 11);
    t->dir = tu_mkdtemp("ckpt");
    snprintf(t->path, sizeof t->path, "%s/good.safetensors", t->dir);
    int st = checkpoint_save(t->path, &t->m, t->p, t->b, "{\"workload\":\"tiny\",\"step\":42}");
    cr_assert_eq(st, TB_OK, "save: %s", tb_error_get());
}

static void tiny_teardown(struct tiny *t)
{
    tu_rm_rf(t->dir);
    free(t->dir), free(t->p), free(t->b), free(t->p2), free(t->b2);
    model_free(&t->m);
}

Test(checkpoint, tiny_round_trip_is_bitwise_and_atomic)
{
    struct tiny t;
    tiny_setup(&t);
    cr_assert_eq(checkpoint_load(t.path, &t.m, t.p2, t.b2), TB_OK, "load: %s", tb_error_get());
    assert_entries_equal(&t.m, t.p, t.b, t.p2, t.b2);
    /* Saving over an existing file replaces it and leaves no temporary file behind. */
    fill_entries(&t.m, t.p, t.b, 99);
    cr_assert_eq(checkpoint_save(t.path, &t.m, t.p, t.b, NULL), TB_OK, "%s", tb_error_get());
    cr_assert_eq(checkpoint_load(t.path, &t.m, t.p2, t.b2), TB_OK, "%s", tb_error_get());
    assert_entries_equal(&t.m, t.p, t.b, t.p2, t.b2);
    DIR *d = opendir(t.dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            n++;
            cr_assert_str_eq(de->d_name, "good.safetensors", "stray file %s after save", de->d_name);
        }
    closedir(d);
    cr_assert_eq(n, 1);
    tiny_teardown(&t);
}

Test(checkpoint, layouts_are_torchvisions)
{
    struct tiny t;
    tiny_setup(&t);
    struct stfile f;
    st_read_raw(t.path, &f);
    cr_assert_eq((8 + strlen(f.hdr)) % 8, 0u, "data must start 8-byte aligned");
    /* Shapes as torch's state_dict has them. */
    const char *want[] = {"\"c.weight\":{\"dtype\":\"F32\",\"shape\":[5,4,2,3]",
                          "\"dw.weight\":{\"dtype\":\"F32\",\"shape\":[4,1,2,3]",
                          "\"se.fc1.weight\":{\"dtype\":\"F32\",\"shape\":[2,4,1,1]",
                          "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[5,2]",
                          "\"k.kernel\":{\"dtype\":\"F32\",\"shape\":[3,5]",
                          "\"bn.running_var\":{\"dtype\":\"F32\",\"shape\":[4]",
                          "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[]"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert_not_null(strstr(f.hdr, want[i]), "header lacks %s: %s", want[i], f.hdr);
    /* Element maps: torch index → ours. */
    long long a, z;
    const float *pc = t.p + entry(&t.m, "c.weight")->off;
    offsets_of(f.hdr, "c.weight", &a, &z);
    for (int oc = 0; oc < 5; oc++)
        for (int ci = 0; ci < 4; ci++)
            for (int kh = 0; kh < 2; kh++)
                for (int kw = 0; kw < 3; kw++) {
                    float v;
                    memcpy(&v, f.data + a + 4 * (((oc * 4 + ci) * 2 + kh) * 3 + kw), 4);
                    cr_assert_eq(v, pc[((kh * 3 + kw) * 4 + ci) * 5 + oc], "c.weight[%d,%d,%d,%d]", oc, ci, kh, kw);
                }
    const float *pd = t.p + entry(&t.m, "dw.weight")->off;
    offsets_of(f.hdr, "dw.weight", &a, &z);
    for (int c = 0; c < 4; c++)
        for (int kh = 0; kh < 2; kh++)
            for (int kw = 0; kw < 3; kw++) {
                float v;
                memcpy(&v, f.data + a + 4 * ((c * 2 + kh) * 3 + kw), 4);
                cr_assert_eq(v, pd[(kh * 3 + kw) * 4 + c], "dw.weight[%d,0,%d,%d]", c, kh, kw);
            }
    const char *dense[] = {"se.fc1.weight", "fc.weight"};
    const int ins[] = {4, 2}, outs[] = {2, 5};
    for (int k = 0; k < 2; k++) {
        const float *pw = t.p + entry(&t.m, dense[k])->off;
        offsets_of(f.hdr, dense[k], &a, &z);
        for (int o = 0; o < outs[k]; o++)
            for (int i = 0; i < ins[k]; i++) {
                float v;
                memcpy(&v, f.data + a + 4 * (o * ins[k] + i), 4);
                cr_assert_eq(v, pw[i * outs[k] + o], "%s[%d,%d]", dense[k], o, i);
            }
    }
    const float *pk = t.p + entry(&t.m, "k.kernel")->off;
    offsets_of(f.hdr, "k.kernel", &a, &z);
    cr_assert_eq(memcmp(f.data + a, pk, 15 * sizeof(float)), 0, "k.kernel keeps (IN,OUT)");
    free(f.hdr), free(f.data);
    tiny_teardown(&t);
}

Test(checkpoint, metadata)
{
    struct tiny t;
    tiny_setup(&t);
    char v[64];
    cr_assert_eq(checkpoint_read_meta(t.path, "workload", v, sizeof v), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(v, "tiny");
    cr_assert_eq(checkpoint_read_meta(t.path, "step", v, sizeof v), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(v, "42");
    cr_assert_eq(checkpoint_read_meta(t.path, "format", v, sizeof v), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(v, "pt");
    cr_assert_eq(checkpoint_read_meta(t.path, "bn_eps", v, sizeof v), TB_OK, "%s", tb_error_get());
    cr_assert_eq(checkpoint_read_meta(t.path, "nope", v, sizeof v), TB_EINVAL);
    cr_assert_not_null(strstr(tb_error_get(), "nope"), "%s", tb_error_get());
    /* Metadata that is not an object is a usage error, and nothing is written. */
    char p2[600];
    snprintf(p2, sizeof p2, "%s/other.safetensors", t.dir);
    cr_assert_eq(checkpoint_save(p2, &t.m, t.p, t.b, "[1,2]"), TB_EINVAL);
    cr_assert_neq(access(p2, F_OK), 0, "a failed save must not create %s", p2);
    tiny_teardown(&t);
}

Test(checkpoint, save_to_missing_directory_is_an_io_error)
{
    struct tiny t;
    tiny_setup(&t);
    char p2[600];
    snprintf(p2, sizeof p2, "%s/no/such/dir/x.safetensors", t.dir);
    cr_assert_eq(checkpoint_save(p2, &t.m, t.p, t.b, NULL), TB_EIO);
    cr_assert_not_null(strstr(tb_error_get(), p2), "%s", tb_error_get());
    snprintf(p2, sizeof p2, "%s/absent.safetensors", t.dir);
    cr_assert_eq(checkpoint_load(p2, &t.m, t.p2, t.b2), TB_EIO);
    cr_assert_not_null(strstr(tb_error_get(), p2), "%s", tb_error_get());
    tiny_teardown(&t);
}

/* Writes hdr + data as a file, loads it into the tiny model, and expects TB_EFORMAT with a message
 * naming the file and containing `why`. */
static void expect_bad(struct tiny *t, const char *tag, const char *hdr, const uint8_t *data, size_t data_len,
                       const char *why)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s.safetensors", t->dir, tag);
    st_write_raw(p, hdr, data, data_len);
    tb_error_clear();
    int st = checkpoint_load(p, &t->m, t->p2, t->b2);
    cr_assert_eq(st, TB_EFORMAT, "%s: status %d (%s), want TB_EFORMAT", tag, st, tb_error_get());
    const char *msg = tb_error_get();
    cr_assert_not_null(strstr(msg, p), "%s: message does not name the file: %s", tag, msg);
    cr_assert_not_null(strstr(msg, why), "%s: message lacks '%s': %s", tag, why, msg);
    cr_assert_null(strchr(msg, '\n'), "%s: message must be one line: %s", tag, msg);
}

/* expect_bad on the good file f with the first `old` in its header replaced by `new_`. */
static void expect_bad_edit(struct tiny *t, const struct stfile *f, const char *tag, const char *old, const char *new_,
                            const char *why)
{
    char *e = replace_once(f->hdr, old, new_);
    expect_bad(t, tag, e, f->data, f->data_len, why);
    free(e);
}

/* Writes raw bytes as a file and expects TB_EFORMAT naming the file with `why`. */
static void expect_bad_bytes(struct tiny *t, const char *tag, const void *bytes, size_t n, const char *why)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s.safetensors", t->dir, tag);
    tu_write_file(p, bytes, n);
    int st = checkpoint_load(p, &t->m, t->p2, t->b2);
    cr_assert_eq(st, TB_EFORMAT, "%s: status %d (%s)", tag, st, tb_error_get());
    cr_assert_not_null(strstr(tb_error_get(), p), "%s: %s", tag, tb_error_get());
    cr_assert_not_null(strstr(tb_error_get(), why), "%s: message lacks '%s': %s", tag, why, tb_error_get());
}

Test(checkpoint, malformed_files_are_rejected)
{
    struct tiny t;
    tiny_setup(&t);
    struct stfile f;
    st_read_raw(t.path, &f);
    const char *h = f.hdr;
    char *e;

    expect_bad_bytes(&t, "empty", "", 0, "too short");
    expect_bad_bytes(&t, "short_len", "\x10\0\0\0\0", 5, "too short");
    {
        uint8_t b[64] = {0};
        b[0] = 0x00, b[1] = 0x10; /* 4096-byte header in a 64-byte file */
        expect_bad_bytes(&t, "len_past_end", b, sizeof b, "exceeds");
    }
    {
        uint8_t b[8] = {0}; /* zero-length header */
        expect_bad_bytes(&t, "len_zero", b, sizeof b, "header length 0");
    }
    /* The good header cut in half: its stated length runs past the end. */
    {
        size_t hl = strlen(h);
        uint8_t *b = malloc(8 + hl / 2);
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        memcpy(b + 8, h, hl / 2);
        expect_bad_bytes(&t, "truncated_header", b, 8 + hl / 2, "exceeds");
        free(b);
    }
    expect_bad(&t, "bad_json", "{\"c.weight\": {\"dtype\": ", f.data, f.data_len, "not valid JSON");
    expect_bad(&t, "not_object", "[1, 2, 3]", f.data, f.data_len, "not a JSON object");

    expect_bad_edit(&t, &f, "wrong_dtype", "\"c.weight\":{\"dtype\":\"F32\"", "\"c.weight\":{\"dtype\":\"I32\"",
                    "dtype I32, expected F32");
    expect_bad_edit(&t, &f, "unknown_dtype", "\"c.weight\":{\"dtype\":\"F32\"", "\"c.weight\":{\"dtype\":\"Q7\"",
                    "unknown dtype");
    expect_bad_edit(&t, &f, "wrong_shape", "\"shape\":[5,4,2,3]", "\"shape\":[5,4,3,2]",
                    "shape (5,4,3,2), expected (5,4,2,3)");
    expect_bad_edit(&t, &f, "missing", "\"fc.bias\":", "\"fc.bias_renamed\":", "missing, first fc.bias");
    expect_bad_edit(&t, &f, "extra", "{\"c.weight\":",
                    "{\"zzz.extra\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"c.weight\":",
                    "not in model tiny, first zzz.extra");
    expect_bad_edit(&t, &f, "duplicate", "{\"c.weight\":",
                    "{\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"c.weight\":",
                    "fc.bias appears twice");
    expect_bad_edit(&t, &f, "fractional_offset", "\"shape\":[5,4,2,3],\"data_offsets\":[0,",
                    "\"shape\":[5,4,2,3],\"data_offsets\":[0.5,", "two integers");
    expect_bad_edit(&t, &f, "negative_offset", "\"shape\":[5,4,2,3],\"data_offsets\":[0,",
                    "\"shape\":[5,4,2,3],\"data_offsets\":[-4,", "two integers");
    {
        long long a, z, fa, fz;
        offsets_of(h, "fc.bias", &a, &z);
        offsets_of(h, "fc.weight", &fa, &fz);
        char old[96], nw[96];
        snprintf(old, sizeof old, "\"data_offsets\":[%lld,%lld]", a, z);
        snprintf(nw, sizeof nw, "\"data_offsets\":[%lld,%lld]", fa, fa + (z - a));
        expect_bad_edit(&t, &f, "overlap", old, nw, "overlap");
        snprintf(nw, sizeof nw, "\"data_offsets\":[%lld,%lld]", a, z - 4);
        expect_bad_edit(&t, &f, "byte_count", old, nw, "data bytes for 5 elements");
        snprintf(nw, sizeof nw, "\"data_offsets\":[%lld,%lld]", (long long)f.data_len, (long long)f.data_len + 20);
        expect_bad_edit(&t, &f, "out_of_range", old, nw, "out of range");
    }
    /* The good header with its data cut short. */
    expect_bad(&t, "truncated_data", h, f.data, f.data_len - 4, "out of range");
    /* The good header and data still load (the surgery itself is sound). */
    char p[600];
    snprintf(p, sizeof p, "%s/rewritten.safetensors", t.dir);
    st_write_raw(p, h, f.data, f.data_len);
    cr_assert_eq(checkpoint_load(p, &t.m, t.p2, t.b2), TB_OK, "%s", tb_error_get());
    assert_entries_equal(&t.m, t.p, t.b, t.p2, t.b2);
    /* torch's num_batches_tracked is optional on load. */
    {
        long long a, z;
        offsets_of(h, "bn.num_batches_tracked", &a, &z);
        char rec[160];
        snprintf(rec, sizeof rec, "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[%lld,%lld]},",
                 a, z);
        e = replace_once(h, rec, "");
        snprintf(p, sizeof p, "%s/no_counter.safetensors", t.dir);
        st_write_raw(p, e, f.data, f.data_len);
        cr_assert_eq(checkpoint_load(p, &t.m, t.p2, t.b2), TB_OK, "%s", tb_error_get());
        free(e);
    }
    free(f.hdr), free(f.data);
    tiny_teardown(&t);
}

/* ---- effnet-b0 ---- */

struct effnet {
    struct model m;
    const struct workload *w;
    float *params, *buffers;
};

/* effnet-b0 for res×res×3 images; drop < 0: the default dropout and drop-connect rates. */
static void effnet_build(struct effnet *n, int res, int classes, float drop)
{
    memset(n, 0, sizeof *n);
    n->w = workload_find("effnet-b0");
    cr_assert_not_null(n->w, "%s", tb_error_get());
    /* BatchNorm ε 1e-3 (the default before issue 28, now torchvision's 1e-5) set explicitly here and in
     * run_py's --bn-eps: the calibrated statistics have near-zero variances, and at 1e-5 float32 meets
     * the 1e-4 tolerance only barely (1.3e-4 measured); test_golden_tv checks the 1e-5 default. */
    struct workload_opts o = {.classes = classes, .resolution = res, .in_h = res, .in_w = res, .in_c = 3,
                              .dropout = drop, .drop_connect = drop, .bn_eps = 1e-3f};
    cr_assert_eq(n->w->build(&n->m, &o), TB_OK, "effnet-b0 build: %s", tb_error_get());
    n->params = tu_fvec(n->m.n_params);
    n->buffers = tu_fvec(n->m.n_buffers);
    n->w->init(&n->m, n->params, n->buffers, 5);
}

static void effnet_free(struct effnet *n)
{
    free(n->params), free(n->buffers);
    model_free(&n->m);
}

/* Non-trivial BatchNorm state: γ ∈ [0.5,1.5), β ~ N(0,0.1), running mean ~ N(0,0.1), var ∈ [0.5,2). */
static void effnet_perturb_norms(struct effnet *n)
{
    for (int k = 0; k < n->m.n_entries; k++) {
        const struct param_entry *e = &n->m.params[k];
        if (e->kind == PARAM_NORM && strstr(e->name, ".weight")) tu_fill_uniform(n->params + e->off, e->n, 100 + k, 0.5f, 1.5f);
        if (e->kind == PARAM_NORM && strstr(e->name, ".bias")) tu_fill_normal(n->params + e->off, e->n, 100 + k, 0.0f, 0.1f);
        if (e->kind == PARAM_BUFFER && strstr(e->name, "running_mean"))
            tu_fill_normal(n->buffers + e->off, e->n, 100 + k, 0.0f, 0.1f);
        if (e->kind == PARAM_BUFFER && strstr(e->name, "running_var"))
            tu_fill_uniform(n->buffers + e->off, e->n, 100 + k, 0.5f, 2.0f);
    }
}

Test(checkpoint, effnet_b0_round_trip_is_bitwise)
{
    struct effnet a, b;
    effnet_build(&a, 32, 10, -1.0f);
    effnet_perturb_norms(&a);
    effnet_build(&b, 32, 10, -1.0f);
    char *dir = tu_mkdtemp("ckpt_b0");
    char path[512];
    snprintf(path, sizeof path, "%s/b0.safetensors", dir);
    cr_assert_eq(checkpoint_save(path, &a.m, a.params, a.buffers, "{\"workload\":\"effnet-b0\",\"step\":7}"), TB_OK,
                 "%s", tb_error_get());
    memset(b.params, 0, b.m.n_params * sizeof(float));
    memset(b.buffers, 0, b.m.n_buffers * sizeof(float));
    cr_assert_eq(checkpoint_load(path, &b.m, b.params, b.buffers), TB_OK, "%s", tb_error_get());
    assert_entries_equal(&a.m, a.params, a.buffers, b.params, b.buffers);
    /* A different model (other classes) rejects it with the offending tensor named. */
    struct effnet c;
    effnet_build(&c, 32, 7, -1.0f);
    cr_assert_eq(checkpoint_load(path, &c.m, c.params, c.buffers), TB_EFORMAT);
    cr_assert_not_null(strstr(tb_error_get(), "classifier.1.weight"), "%s", tb_error_get());
    effnet_free(&c);
    /* So does the GroupNorm variant (no running statistics). */
    struct model g = {0};
    struct workload_opts o = {.classes = 10, .resolution = 32, .in_h = 32, .in_w = 32, .in_c = 3, .dropout = -1,
                              .drop_connect = -1};
    snprintf(o.norm, sizeof o.norm, "group");
    cr_assert_eq(a.w->build(&g, &o), TB_OK, "%s", tb_error_get());
    float *gp = tu_fvec(g.n_params), *gb = tu_fvec(g.n_buffers);
    cr_assert_eq(checkpoint_load(path, &g, gp, gb), TB_EFORMAT);
    cr_assert_not_null(strstr(tb_error_get(), "running_"), "%s", tb_error_get());
    free(gp), free(gb);
    model_free(&g);
    tu_rm_rf(dir);
    free(dir);
    effnet_free(&a), effnet_free(&b);
}

/* ---- interop with PyTorch ---- */

#define IX_N 4
#define IX_RES 32
#define IX_CLASSES 10

static void skip_without_torch(void)
{
    if (access(PY, X_OK) != 0 || system(PY " -c 'import torch, torchvision' >/dev/null 2>&1") != 0)
        cr_skip_test("%s with torch and torchvision is not available", PY);
}

/* A cpu engine (nth = 1) for batches of IX_N images, holding n's parameters and buffers. */
static void ix_engine(struct local_engine *e, const struct effnet *n)
{
    struct run_config cfg = {0};
    cfg.batch = IX_N;
    cfg.eval_batch = IX_N;
    cfg.seed = 1;
    optim_config_defaults(&cfg.optim, OPTIM_ADAM);
    cr_assert_eq(local_engine_init(e, &n->m, &cfg, IX_N, 1), TB_OK, "%s", tb_error_get());
    memcpy(e->params, n->params, n->m.n_params * sizeof(float));
    memcpy(e->buffers, n->buffers, n->m.n_buffers * sizeof(float));
}

/* Our eval logits (IX_N, classes) for images x through the cpu engine (nth = 1). */
static void our_logits(const struct effnet *n, const uint8_t *x, double *logits)
{
    struct local_engine e;
    ix_engine(&e, n);
    int32_t y[IX_N] = {0};
    struct eval_stats ev = {0};
    cr_assert_eq(local_engine_evaluate(&e, x, y, IX_N, &ev), TB_OK, "%s", tb_error_get());
    const float *lg = exec_act(&e.eval, n->m.logits);
    for (int i = 0; i < IX_N * n->m.n_classes; i++) logits[i] = lg[i];
    local_engine_free(&e);
}

/* Running statistics of every BatchNorm ← the (unbiased) batch statistics of images x, as the PyTorch side
 * does for its checkpoint: one training forward with momentum 0 and no augmentation. Without it the
 * init's statistics (mean 0, var 1) let activations vanish through the blocks, and the logits would
 * hardly depend on anything but the last layers. */
static void effnet_calibrate(struct effnet *n, const uint8_t *x)
{
    struct model *m = &n->m;
    for (int i = 0; i < m->n_layers; i++) {
        struct layer *l = &m->layers[i];
        if (l->op == OP_BN) l->a.norm.momentum = 0.0f;
        if (l->op == OP_INPUT) l->a.input.pad = 0, l->a.input.flip = 0;
        cr_assert(!((l->op == OP_ADD || l->op == OP_DROPOUT) && l->a.drop.p > 0.0f), "%s: p = %g", l->name,
                  (double)l->a.drop.p);
    }
    struct local_engine e;
    ix_engine(&e, n);
    int32_t y[IX_N] = {0};
    double loss;
    cr_assert_eq(local_engine_forward_backward(&e, x, y, IX_N, 0, IX_N, 1, &loss), TB_OK, "%s", tb_error_get());
    memcpy(n->buffers, e.buffers, m->n_buffers * sizeof(float));
    local_engine_free(&e);
}

/* One comparison with torch: a fresh directory holding the checkpoint (ck), the images (img; also x),
 * torch's logits (out) and its log. */
struct py_files {
    char *dir, ck[512], img[512], out[512], log[512];
    uint8_t *x;
};

static void write_images(const char *path, uint8_t *x)
{
    for (size_t i = 0; i < (size_t)IX_N * IX_RES * IX_RES * 3; i++)
        x[i] = (uint8_t)(rng_uniform(77, 1, i) * 256.0f);
    tu_write_file(path, x, (size_t)IX_N * IX_RES * IX_RES * 3);
}

/* Makes f's directory and paths (the checkpoint named ck_name) and writes the images. */
static void py_files_make(struct py_files *f, const char *ck_name)
{
    f->dir = tu_mkdtemp("ckpt_py");
    snprintf(f->ck, sizeof f->ck, "%s/%s", f->dir, ck_name);
    snprintf(f->img, sizeof f->img, "%s/images.u8", f->dir);
    snprintf(f->out, sizeof f->out, "%s/logits.f64", f->dir);
    snprintf(f->log, sizeof f->log, "%s/py.log", f->dir);
    f->x = malloc((size_t)IX_N * IX_RES * IX_RES * 3);
    write_images(f->img, f->x);
}

/* Removes f's directory and frees it. */
static void py_files_free(struct py_files *f)
{
    free(f->x);
    tu_rm_rf(f->dir);
    free(f->dir);
}

static void run_py(const char *cmd, const struct py_files *f)
{
    char *line = NULL;
    cr_assert(asprintf(&line, "OMP_NUM_THREADS=1 %s %s/tools/ckpt_roundtrip.py %s '%s' --image '%s' --n %d --res %d "
                              "--classes %d --out '%s' --seed 3 --bn-eps 1e-3 >'%s' 2>&1",
                       PY, TB_SOURCE_DIR, cmd, f->ck, f->img, IX_N, IX_RES, IX_CLASSES, f->out, f->log) > 0);
    int rc = system(line);
    if (rc != 0) {
        char *txt = tu_read_file(f->log, NULL);
        cr_assert_fail("ckpt_roundtrip.py %s failed (status %d): %s", cmd, rc, txt ? txt : "(no output)");
    }
    free(line);
}

static void read_logits(const char *path, double *lg, size_t n)
{
    size_t len;
    char *raw = tu_read_file(path, &len);
    cr_assert_not_null(raw, "no logits at %s", path);
    cr_assert_eq(len, n * sizeof(double), "%s: %zu bytes, want %zu doubles", path, len, n);
    memcpy(lg, raw, len); /* little-endian float64, as on this host */
    free(raw);
}

/* max |ours − torch| ≤ 1e-4 · max |torch| over all logits. */
static void assert_logits_close(const double *ours, const double *torch, const char *what)
{
    double err = 0.0, mx = 0.0;
    int at = 0;
    for (int i = 0; i < IX_N * IX_CLASSES; i++) {
        mx = fmax(mx, fabs(torch[i]));
        if (fabs(ours[i] - torch[i]) > err) err = fabs(ours[i] - torch[i]), at = i;
    }
    cr_log_info("%s: max |ours - torch| = %.3g at logit %d, max |torch| = %.3g (relative %.3g)", what, err, at, mx,
                err / mx);
    cr_assert(mx > 1e-3, "%s: logits are all ~0 (max %.3g): the comparison would be vacuous", what, mx);
    /* The logits must depend on the image, or the comparison would test only the last layers. */
    double spread = 0.0;
    for (int i = IX_CLASSES; i < IX_N * IX_CLASSES; i++) spread = fmax(spread, fabs(torch[i] - torch[i % IX_CLASSES]));
    cr_assert(spread > 0.05 * mx, "%s: logits barely depend on the image (spread %.3g, max %.3g)", what, spread, mx);
    cr_assert(err <= 1e-4 * mx, "%s: logit %d (sample %d class %d) ours %.8g torch %.8g: error %.3g > 1e-4 x %.3g",
              what, at, at / IX_CLASSES, at % IX_CLASSES, ours[at], torch[at], err, mx);
}

/* Asserts our logits for f's images agree with torch's (in f->out). */
static void assert_agrees_with_torch(const struct py_files *f, const struct effnet *n, const char *what)
{
    double ours[IX_N * IX_CLASSES], torch[IX_N * IX_CLASSES];
    read_logits(f->out, torch, IX_N * IX_CLASSES);
    our_logits(n, f->x, ours);
    assert_logits_close(ours, torch, what);
}

Test(checkpoint, pytorch_loads_ours_strictly_and_agrees, .timeout = 120)
{
    skip_without_torch();
    struct effnet n;
    effnet_build(&n, IX_RES, IX_CLASSES, 0.0f);
    effnet_perturb_norms(&n);
    struct py_files f;
    py_files_make(&f, "ours.safetensors");
    effnet_calibrate(&n, f.x);
    cr_assert_eq(checkpoint_save(f.ck, &n.m, n.params, n.buffers, "{\"workload\":\"effnet-b0\"}"), TB_OK, "%s",
                 tb_error_get());
    run_py("load", &f);
    assert_agrees_with_torch(&f, &n, "our checkpoint in torchvision");
    py_files_free(&f);
    effnet_free(&n);
}

Test(checkpoint, pytorch_checkpoint_loads_here_and_agrees, .timeout = 120)
{
    skip_without_torch();
    struct effnet n;
    effnet_build(&n, IX_RES, IX_CLASSES, -1.0f);
    struct py_files f;
    py_files_make(&f, "torch.safetensors");
    run_py("make", &f);
    cr_assert_eq(checkpoint_load(f.ck, &n.m, n.params, n.buffers), TB_OK, "%s", tb_error_get());
    char src[96];
    cr_assert_eq(checkpoint_read_meta(f.ck, "source", src, sizeof src), TB_OK, "%s", tb_error_get());
    cr_assert_str_eq(src, "torchvision.models.efficientnet_b0");
    assert_agrees_with_torch(&f, &n, "torchvision's checkpoint here");
    py_files_free(&f);
    effnet_free(&n);
}
