/* conv_tuning.c — the autotuner's choices kept in a file (conv_tuning.h says why). */
#define _GNU_SOURCE
#include "conv_tuning.h"

#include "exec.h"
#include "outputs.h"
#include "regular_file.h"
#include "session.h"
#include "status.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The ints of a conv_shape a file's entry lists, in the struct's order. */
enum { SHAPE_INTS = 13 };

struct build_id_find {
    char *out;
    size_t n;
};

/* dl_iterate_phdr's callback: the first object is the executable; its PT_NOTE segments hold the build ID. */
static int build_id_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct build_id_find *f = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh, *desc = name + ((nh->n_namesz + 3u) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t k = 0;
                for (unsigned j = 0; j < nh->n_descsz && k + 3 <= f->n; j++, k += 2)
                    snprintf(f->out + k, 3, "%02x", desc[j]);
                return 1;
            }
            p = desc + ((nh->n_descsz + 3u) & ~3u);
        }
    }
    return 1; /* only the executable's */
}

int conv_tuning_on(const struct bench_config *c)
{
    return (!c->run.conv_algo[0] || !strcmp(c->run.conv_algo, "auto")) && strcmp(c->tuning, "none") != 0 &&
           strcmp(c->device, "cuda") != 0;
}

const char *conv_tuning_build_id(char *out, size_t n)
{
    if (n) out[0] = '\0';
    struct build_id_find f = {out, n};
    if (n) dl_iterate_phdr(build_id_cb, &f);
    return out;
}

/* The section key of this run: the machine, the executable and the switches. */
struct tuning_key {
    const struct machine_info *mi;
    char build_id[96];
    char env[2048];
};

static void key_make(struct tuning_key *k, const struct machine_info *mi)
{
    k->mi = mi;
    conv_tuning_build_id(k->build_id, sizeof k->build_id);
    size_t n = 0, used = 0;
    const char **set = run_env_switches(&n);
    k->env[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const int w = snprintf(k->env + used, sizeof k->env - used, "%s%s", i ? " " : "", set[i]);
        if (w < 0 || (size_t)w >= sizeof k->env - used) break; /* longer environments compare on their start */
        used += (size_t)w;
    }
    free(set);
}

static int key_matches(const struct tuning_key *k, const struct json_value *sec)
{
    return !strcmp(json_get_str(sec, "cpu_model", ""), k->mi->cpu_model) &&
           json_get_number(sec, "cores", -1) == k->mi->n_cores &&
           !strcmp(json_get_str(sec, "blas_core", ""), k->mi->blas_core) &&
           !strcmp(json_get_str(sec, "build_id", ""), k->build_id) && !strcmp(json_get_str(sec, "env", "?"), k->env);
}

/* read_file's answer for a path with no file (not an error: the usual first run). */
enum { NO_FILE = 1 };

/* Reads path as a tuning file into *v. TB_OK; NO_FILE quietly when there is none (or an empty file); else an
 * error with its line (not regular, unreadable, not JSON, not a tuning file). */
static int read_file(const char *path, struct json_value **v)
{
    *v = NULL;
    struct stat sb;
    const int have = stat(path, &sb) == 0, stat_errno = have ? 0 : errno;
    if (!have && stat_errno == ENOENT) return NO_FILE;
    if (have && S_ISREG(sb.st_mode) && sb.st_size == 0) return NO_FILE; /* nothing there to read or to lose */
    const char *why = NULL;
    FILE *f = regular_fopen(path, &why);
    if (!f) return tb_error_set(TB_EIO, "%s", why);
    if (!have || sb.st_size > (64 << 20)) {
        fclose(f);
        return have ? tb_error_set(TB_EFORMAT, "%lld bytes: larger than a tuning file", (long long)sb.st_size)
                    : tb_error_set(TB_EIO, "cannot stat: %s", strerror(stat_errno));
    }
    char *text = malloc((size_t)sb.st_size + 1);
    const size_t len = text ? fread(text, 1, (size_t)sb.st_size, f) : 0;
    fclose(f);
    if (!text) return tb_error_set(TB_ENOMEM, "out of memory");
    int st = json_parse(text, len, v);
    free(text);
    if (st != TB_OK) return tb_error_set(TB_EFORMAT, "not JSON (%s)", tb_error_get());
    if (strcmp(json_get_str(*v, "kind", ""), "conv_tuning") != 0 || json_get_number(*v, "schema", 0) != 1) {
        json_value_free(*v);
        *v = NULL;
        return tb_error_set(TB_EFORMAT, "not a tuning file (no \"kind\": \"conv_tuning\", schema 1)");
    }
    return TB_OK;
}

/* One entry of a section as the cache's; 0 when a field is missing or not a whole number. */
static int entry_read(const struct json_value *e, struct exec_tune_entry *t)
{
    const struct json_value *sh = json_get(e, "shape");
    const char *algo = json_get_str(e, "algo", "");
    if (!sh || sh->type != JSON_ARRAY || sh->n != SHAPE_INTS) return 0;
    int v[SHAPE_INTS + 2];
    for (int i = 0; i < SHAPE_INTS + 2; i++) {
        const double d = i < SHAPE_INTS ? (sh->items[i].type == JSON_NUMBER ? sh->items[i].number : -1.0)
                                        : json_get_number(e, i == SHAPE_INTS ? "threads" : "data", -1.0);
        if (!(d >= 0.0 && d <= (double)(1 << 24)) || d != (double)(int)d) return 0;
        v[i] = (int)d;
    }
    *t = (struct exec_tune_entry){.s = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]},
                                  .nth = v[SHAPE_INTS], .data = v[SHAPE_INTS + 1], .algo = -1};
    for (int a = 0; a < CONV_ALGO_COUNT; a++)
        if (!strcmp(algo, exec_conv_algo_names[a])) t->algo = a;
    return t->algo >= 0;
}

/* The entries of tuning file v's section for key k into the process's cache, where the cache has no choice for their
 * shape already: how many were added, *bad those this engine cannot run (malformed, or an algorithm the shape does
 * not take). */
static int section_add(const struct tuning_key *k, const struct json_value *v, int *bad)
{
    const struct json_value *secs = json_get(v, "sections");
    int added = 0;
    for (int i = 0; secs && secs->type == JSON_ARRAY && i < secs->n; i++) {
        if (!key_matches(k, &secs->items[i])) continue;
        const struct json_value *es = json_get(&secs->items[i], "entries");
        for (int j = 0; es && es->type == JSON_ARRAY && j < es->n; j++) {
            struct exec_tune_entry t;
            if (entry_read(&es->items[j], &t) && exec_tune_add(&t, 0) == TB_OK) added++;
            else ++*bad;
        }
        break;
    }
    tb_error_clear();
    return added;
}

int conv_tuning_load(const char *path, const struct machine_info *mi)
{
    struct json_value *v = NULL;
    int st = read_file(path, &v);
    if (st == NO_FILE) return 0;
    if (st != TB_OK) {
        fprintf(stderr, "bench: warning: --tuning %s: %s; the convolutions are timed, and the file left as it is\n",
                path, tb_error_get());
        tb_error_clear();
        return -1;
    }
    struct tuning_key k;
    key_make(&k, mi);
    int bad = 0;
    const int added = section_add(&k, v, &bad);
    if (bad)
        fprintf(stderr, "bench: warning: --tuning %s: %d entr%s this engine cannot run, skipped (those shapes are timed "
                        "again)\n", path, bad, bad == 1 ? "y" : "ies");
    json_value_free(v);
    return added;
}

/* The section of key k holding the process-wide cache, into b. */
static void section_write(struct json_buf *b, const struct tuning_key *k)
{
    static struct exec_tune_entry es[EXEC_TUNE_MAX];
    const int n = exec_tune_entries(es, EXEC_TUNE_MAX);
    char ts[32];
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_begin_object(b);
    json_key_str(b, "cpu_model", k->mi->cpu_model);
    json_key_int(b, "cores", k->mi->n_cores);
    json_key_str(b, "blas_core", k->mi->blas_core);
    json_key_str(b, "build_id", k->build_id);
    json_key_str(b, "commit", k->mi->commit);
    json_key_str(b, "env", k->env);
    json_key_str(b, "written", ts);
    json_key_array(b, "entries");
    for (int i = 0; i < n && i < EXEC_TUNE_MAX; i++) {
        const struct conv_shape *s = &es[i].s;
        const int sh[SHAPE_INTS] = {s->N, s->H,  s->W,      s->C,   s->OH,     s->OW, s->OC,
                                    s->KH, s->KW, s->stride, s->pad, s->groups, s->par};
        json_begin_object(b);
        json_key_array(b, "shape");
        for (int j = 0; j < SHAPE_INTS; j++) json_int(b, sh[j]);
        json_end_array(b);
        json_key_int(b, "threads", es[i].nth);
        json_key_int(b, "data", es[i].data);
        json_key_str(b, "algo", exec_conv_algo_names[es[i].algo]);
        json_end_object(b);
    }
    json_end_array(b);
    json_end_object(b);
}

int conv_tuning_save(const char *path, const struct machine_info *mi)
{
    int st = outputs_check_replaced("--tuning", path, 1);
    if (st != TB_OK) return st;
    /* Bench processes saving into one tuning file at once each wrote its own choices over the other's (25 of 44
     * entries left); nothing else (a report writing the same folder) waits on this lock. */
    const int lock = outputs_lock_beside(path, NULL);
    struct json_value *old = NULL;
    st = read_file(path, &old);
    if (st != TB_OK && st != NO_FILE) {
        if (lock >= 0) close(lock);
        return tb_error_set(st, "--tuning %s: %s, so it is not replaced; give another path or remove it", path,
                            tb_error_get());
    }
    struct tuning_key k;
    key_make(&k, mi);
    /* What another process saved since this one read the file joins this one's choices (which it does not
     * replace): the section written is their union. */
    int bad = 0;
    if (old) (void)section_add(&k, old, &bad);
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "schema", 1);
    json_key_str(&b, "kind", "conv_tuning");
    json_key_array(&b, "sections");
    section_write(&b, &k); /* newest first */
    const struct json_value *secs = old ? json_get(old, "sections") : NULL;
    for (int i = 0, kept = 1; secs && secs->type == JSON_ARRAY && i < secs->n && kept < CONV_TUNING_SECTIONS; i++)
        if (secs->items[i].type == JSON_OBJECT && !key_matches(&k, &secs->items[i])) {
            json_write_value(&b, &secs->items[i]);
            kept++;
        }
    json_end_array(&b);
    json_end_object(&b);
    json_value_free(old);
    st = json_buf_status(&b);
    if (st == TB_OK) st = outputs_write_text(path, json_buf_str(&b));
    json_buf_free(&b);
    if (lock >= 0) close(lock);
    if (st != TB_OK) return tb_error_set(st, "--tuning %s: %s", path, tb_error_get());
    return TB_OK;
}
