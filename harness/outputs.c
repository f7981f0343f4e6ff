/* outputs.c — up-front checks of the run's output locations (see outputs.h). */
#include "outputs.h"

#include "checkpoint.h"
#include "conv_tuning.h"
#include "dataset.h"
#include "finished.h"
#include "json.h"
#include "regular_file.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A probe file made and removed at once. access(W_OK) would not do: it says yes to root on a read-only mount's
 * permissions and cannot see quotas or a full inode table. */
int outputs_dir_writable(const char *dir)
{
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.bench-write-test-XXXXXX", dir) >= (int)sizeof probe)
        return tb_error_set(TB_EIO, "path too long");
    int fd = mkstemp(probe);
    if (fd < 0) {
        int e = errno;
        return tb_error_set(TB_EIO, "cannot write in %s: %s", dir, strerror(e));
    }
    close(fd);
    unlink(probe);
    return TB_OK;
}

/* outputs_dir_writable for the directory of opt's path, the message naming both. */
static int dir_writable(const char *opt, const char *path, const char *dir)
{
    const int st = outputs_dir_writable(dir);
    if (st == TB_OK) return TB_OK;
    char why[PATH_MAX + 64];
    snprintf(why, sizeof why, "%s", tb_error_get());
    return tb_error_set(st, "%s %s: %s", opt, path, why);
}

/* Whether every name path adds below dir (its nearest existing directory, a prefix of path or ".") fits dir's file
 * system, the last with extra bytes more (a writer's temporary suffix): a name too long would pass the
 * directory's probe and fail only when the run, done, writes its file. Existing names are not judged. */
static int names_fit(const char *opt, const char *path, const char *dir, size_t extra)
{
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0) name_max = NAME_MAX;
    const size_t skip = strcmp(dir, ".") && !strncmp(path, dir, strlen(dir)) ? strlen(dir) : 0;
    for (const char *p = path + skip; *p;) {
        while (*p == '/') p++;
        const size_t len = strcspn(p, "/");
        const int last = p[len] == '\0' || p[len + strspn(p + len, "/")] == '\0';
        if (len + (last ? extra : 0) > (size_t)name_max) {
            if (last && extra)
                return tb_error_set(TB_EIO, "%s %s: a name of %zu bytes, %zu with the temporary file's suffix; the file "
                                            "system takes %ld", opt, path, len, len + extra, name_max);
            return tb_error_set(TB_EIO, "%s %s: a name of %zu bytes; the file system takes %ld", opt, path, len, name_max);
        }
        p += len;
    }
    return TB_OK;
}

/* The nearest existing ancestor of path (path itself excluded) into out: "." for a relative name
 * without a slash. TB_EIO if that ancestor is not a directory. */
static int existing_parent(const char *opt, const char *path, char *out, size_t n)
{
    if (snprintf(out, n, "%s", path) >= (int)n) return tb_error_set(TB_EIO, "%s %s: path too long", opt, path);
    for (;;) {
        size_t len = strlen(out);
        while (len > 1 && out[len - 1] == '/') out[--len] = '\0'; /* "a/b/" is "a/b" */
        char *slash = strrchr(out, '/');
        if (!slash) {
            snprintf(out, n, ".");
        } else if (slash == out) {
            out[1] = '\0'; /* "/" */
        } else {
            *slash = '\0';
        }
        struct stat sb;
        if (stat(out, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode)) return tb_error_set(TB_EIO, "%s %s: %s is not a directory", opt, path, out);
            return TB_OK;
        }
        if (errno != ENOENT) {
            int e = errno;
            return tb_error_set(TB_EIO, "%s %s: %s: %s", opt, path, out, strerror(e));
        }
        if (strcmp(out, ".") == 0 || strcmp(out, "/") == 0)
            return tb_error_set(TB_EIO, "%s %s: no existing directory above it", opt, path);
    }
}

/* A file appended to (--out): an existing one must open for appending (a device such as /dev/null
 * is fine: the writer skips fsync there); a missing one must be creatable where its directories will be. */
static int check_append_file(const char *opt, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return tb_error_set(TB_EIO, "%s %s: is a directory", opt, path);
        /* O_NONBLOCK: a FIFO without a reader must not hang the check. */
        int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            return tb_error_set(TB_EIO, "%s %s: cannot open for writing: %s", opt, path, strerror(e));
        }
        close(fd);
        return TB_OK;
    }
    /* A missing path whose last name is "." or "..", or that ends in a slash, names a directory once made. */
    const size_t len = strlen(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (len > 0 && (path[len - 1] == '/' || !strcmp(base, ".") || !strcmp(base, "..")))
        return tb_error_set(TB_EIO, "%s %s: names a directory, not a file", opt, path);
    char dir[PATH_MAX];
    int st = existing_parent(opt, path, dir, sizeof dir);
    if (st == TB_OK) st = names_fit(opt, path, dir, 0);
    return st != TB_OK ? st : dir_writable(opt, path, dir);
}

/* A file replaced by rename (--save, the calibration): an existing target must be a regular file, since
 * renaming over /dev/null would replace the device; its directory must exist (the --save writer does not
 * create it) and take a new file, or with make_dirs be creatable under its nearest existing ancestor. */
int outputs_check_replaced(const char *opt, const char *path, int make_dirs)
{
    const char *why = regular_target_why(path);
    if (why) return tb_error_set(TB_EIO, "%s %s: %s", opt, path, why);
    char dir[PATH_MAX];
    if (make_dirs) {
        int st = existing_parent(opt, path, dir, sizeof dir);
        if (st == TB_OK) st = names_fit(opt, path, dir, OUTPUTS_TMP_SUFFIX);
        return st != TB_OK ? st : dir_writable(opt, path, dir);
    }
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return tb_error_set(TB_EIO, "%s %s: path too long", opt, path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return tb_error_set(TB_EIO, "%s %s: directory %s does not exist", opt, path, dir);
    if (!S_ISDIR(sb.st_mode)) return tb_error_set(TB_EIO, "%s %s: %s is not a directory", opt, path, dir);
    const int st = names_fit(opt, path, dir, OUTPUTS_TMP_SUFFIX);
    return st != TB_OK ? st : dir_writable(opt, path, dir);
}

/* Whether the regular file at path begins with a result row (a JSON object holding schema_version, kind and
 * config on its first line): someone's measurements. */
static int is_results_file(const char *path)
{
    enum { ROW_MAX = 4 << 20 }; /* a row with per-layer figures is some 100 KB; read no more than this of any file */
    const char *why;
    FILE *f = regular_fopen(path, &why);
    if (!f) return 0;
    char *buf = fgetc(f) == '{' ? malloc(ROW_MAX) : NULL;
    size_t n = 0;
    const char *nl = NULL;
    if (buf) {
        buf[0] = '{';
        n = 1;
        /* The first line only, in 64 KiB reads: a results file of many rows is not read 4 MiB at a time. */
        while (!nl && n < ROW_MAX) {
            const size_t want = ROW_MAX - n < (64 << 10) ? ROW_MAX - n : (64 << 10), got = fread(buf + n, 1, want, f);
            nl = memchr(buf + n, '\n', got);
            n += got;
            if (got < want) break;
        }
    }
    fclose(f);
    struct json_value *v = NULL;
    const int rows = nl && json_parse(buf, (size_t)(nl - buf), &v) == TB_OK && v->type == JSON_OBJECT &&
                     json_get(v, "schema_version") && json_get(v, "kind") && json_get(v, "config");
    json_value_free(v);
    free(buf);
    tb_error_clear();
    return rows;
}

int outputs_check_kind(const char *opt, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) return TB_OK; /* nothing there to lose */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* The checkpointer's exact names only: a user's own "ckpt-best.safetensors" is theirs to replace. */
    if (!strcmp(base, FINISHED_NOTE_NAME) || checkpoint_name_step(base) >= 0)
        return tb_error_set(TB_EINVAL, "%s %s: an existing file named as a run's checkpoints are (" FINISHED_NOTE_NAME
                                       ", " CHECKPOINT_NAME_PREFIX "<step>.safetensors), which this output would "
                                       "replace; give another path", opt, path);
    if (is_results_file(path))
        return tb_error_set(TB_EINVAL, "%s %s: an existing results file (rows of bench runs), which this output "
                                       "would replace whole; give another path", opt, path);
    return TB_OK;
}

/* A directory written into (--mllog, --checkpoint-dir): an existing one must take a new file; a
 * missing one must be creatable under its nearest existing ancestor. */
static int check_dir(const char *opt, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return tb_error_set(TB_EIO, "%s %s: not a directory", opt, path);
        return dir_writable(opt, path, path);
    }
    char dir[PATH_MAX];
    int st = existing_parent(opt, path, dir, sizeof dir);
    return st != TB_OK ? st : dir_writable(opt, path, dir);
}

/* ---- outputs that are one file ---- */

/* A place the run writes or reads, as the user named it, and what it is now: an existing one by
 * (st_dev, st_ino), one that does not exist yet by its normalised absolute path. */
struct place {
    const char *opt;     /* "--out", ... */
    char path[PATH_MAX]; /* as given (a sidecar or a data file: as the run will spell it) */
    int output, dir;     /* written (else read); a directory of files (else a file) */
    int exists, sink;    /* sink: an existing character device (/dev/null): it keeps nothing to destroy */
    dev_t dev;
    ino_t ino;
    char norm[PATH_MAX];
};

/* path made absolute, its existing leading directories resolved (realpath) and the rest cleaned
 * lexically (".", "..", "//"), so that two spellings of a file not made yet compare equal. */
static void normalise(const char *path, char *out, size_t n)
{
    char abs[PATH_MAX], head[PATH_MAX], cwd[PATH_MAX];
    const int k = path[0] == '/' || !getcwd(cwd, sizeof cwd) ? snprintf(abs, sizeof abs, "%s", path)
                                                             : snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    if (k < 0 || k >= (int)sizeof abs) { /* too long to open: compared as given */
        snprintf(out, n, "%s", path);
        return;
    }
    size_t cut = strlen(abs);
    for (;;) { /* the longest leading part that exists */
        memcpy(head, abs, cut);
        head[cut] = '\0';
        if (cut == 0 || realpath(head, out)) break;
        while (cut > 0 && abs[cut - 1] != '/') cut--;
        while (cut > 0 && abs[cut - 1] == '/') cut--;
    }
    if (cut == 0) snprintf(out, n, "/");
    char *save = NULL;
    for (char *comp = strtok_r(abs + cut, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
        size_t len = strlen(out);
        if (!strcmp(comp, ".")) continue;
        if (!strcmp(comp, "..")) {
            char *slash = strrchr(out, '/');
            if (slash && slash != out) *slash = '\0';
            else snprintf(out, n, "/");
            continue;
        }
        snprintf(out + len, n - len, "%s%s", len > 1 ? "/" : "", comp);
    }
}

/* Appends a place; fmt names its path (a sidecar is "%s.devices.csv"). Places past max are dropped. */
static void add_place(struct place *pl, int *n, int max, const char *opt, int output, int dir, const char *fmt,
                      const char *path)
{
    if (!path[0] || *n >= max) return;
    struct place *p = &pl[(*n)++];
    memset(p, 0, sizeof *p);
    p->opt = opt, p->output = output, p->dir = dir;
    snprintf(p->path, sizeof p->path, fmt, path);
    struct stat sb;
    if (stat(p->path, &sb) == 0) {
        p->exists = 1, p->sink = S_ISCHR(sb.st_mode);
        p->dev = sb.st_dev, p->ino = sb.st_ino;
    } else {
        normalise(p->path, p->norm, sizeof p->norm);
    }
}

/* The files of a dataset directory that its readers open (dataset.h): IDX under either spelling, plain
 * or gzip, and CIFAR-10's batches, there or in cifar-10-batches-bin/; only those that exist. */
static void add_data_files(struct place *pl, int *n, int max, const char *dir)
{
    static const char *const idx[] = {"train-images", "train-labels", "t10k-images", "t10k-labels"};
    static const char *const cifar[] = {"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                                        "data_batch_5", "test_batch"};
    for (int sub = 0; sub < 2; sub++) {
        char base[PATH_MAX], f[PATH_MAX + 64];
        snprintf(base, sizeof base, "%s%s", dir, sub ? "/cifar-10-batches-bin" : "");
        for (int k = 0; k < 4 * 2 * 2 + 6 * 2; k++) {
            const char *gz = k % 2 ? ".gz" : "";
            if (k < 16) /* "train-images-idx3-ubyte", "train-images.idx3-ubyte" */
                snprintf(f, sizeof f, "%s/%s%sidx%d-ubyte%s", base, idx[k / 4], (k / 2) % 2 ? "." : "-",
                         strstr(idx[k / 4], "images") ? 3 : 1, gz);
            else
                snprintf(f, sizeof f, "%s/%s.bin%s", base, cifar[(k - 16) / 2], gz);
            struct stat sb;
            if (stat(f, &sb) == 0) add_place(pl, n, max, "--data", 0, 0, "%s", f);
        }
    }
}

/* Every output must be its own file, apart from the other outputs and from every input: --trace on the
 * --out file replaced the result rows, --logits on --load's file the weights. Directories may be shared
 * (--mllog's and --checkpoint-dir's files are named apart; --checkpoint-dir defaults to --resume's), and a
 * character device such as /dev/null may take any number of outputs. TB_EINVAL naming both options. */
int outputs_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char na[PATH_MAX], nb[PATH_MAX];
    normalise(a, na, sizeof na), normalise(b, nb, sizeof nb);
    return !strcmp(na, nb);
}

/* The event logs a run under --run-id writes: <id>.log, or tta with several seeds one a seed, <id>-seed<S>.log
 * (plan_tta.c). Returns how many; the k-th's path into log (the length snprintf gave: >= n if cut). */
static int run_log_count(const struct bench_config *c) { return c->plan == PLAN_TTA && c->seeds > 1 ? c->seeds : 1; }
static int run_log_path(const struct bench_config *c, int k, char *log, size_t n)
{
    return run_log_count(c) > 1 ? snprintf(log, n, "%s/%s-seed%llu.log", c->mllog_dir, c->run_id,
                                           (unsigned long long)c->run.seed + (unsigned long long)k)
                                : snprintf(log, n, "%s/%s.log", c->mllog_dir, c->run_id);
}

/* Whether path's directory is dir (both may not exist yet). */
static int parent_is(const char *path, const char *dir)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    else snprintf(parent, sizeof parent, ".");
    if (!parent[0]) snprintf(parent, sizeof parent, "/");
    struct stat a, b;
    if (stat(parent, &a) == 0 && stat(dir, &b) == 0) return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    char na[PATH_MAX], nb[PATH_MAX];
    normalise(parent, na, sizeof na), normalise(dir, nb, sizeof nb);
    return !strcmp(na, nb);
}

int outputs_checkpoint_name(const char *path, const char *dir)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return dir[0] && (!strcmp(base, FINISHED_NOTE_NAME) || !strncmp(base, CHECKPOINT_NAME_PREFIX, strlen(CHECKPOINT_NAME_PREFIX))) &&
           parent_is(path, dir);
}

int outputs_checkpoint_dirs(const struct bench_config *c, const char **dirs, int *is_resume)
{
    int n = 0;
    /* A finished configuration's --checkpoint-dir is --resume's where only --resume was given. */
    if (c->checkpoint_dir[0]) dirs[n] = c->checkpoint_dir, is_resume[n++] = 0;
    if (c->resume[0] && !(n && outputs_same_file(c->checkpoint_dir, c->resume))) dirs[n] = c->resume, is_resume[n++] = 1;
    return n;
}

int outputs_check_kinds(const struct bench_config *c, const char *dashes)
{
    const char *const paths[5] = {c->save, c->trace, c->logits, c->timeline, c->timeline};
    static const char *const names[5] = {"save", "trace", "logits", "timeline", "timeline"};
    for (int k = 0; k < 5; k++) {
        if (!paths[k][0] || (k == 0 && c->load[0] && outputs_same_file(c->save, c->load))) continue; /* in place */
        char path[PATH_MAX + 16], opt[32];
        snprintf(path, sizeof path, k == 4 ? "%s.devices.csv" : "%s", paths[k]);
        snprintf(opt, sizeof opt, "%s%s", dashes, names[k]);
        const int st = outputs_check_kind(opt, path);
        if (st != TB_OK) return st;
    }
    return TB_OK;
}

/* The checkpointer's own files (finished.json, ckpt-*) in the directory it writes, and in --resume's where that
 * is another: an output named like one would be replaced by the checkpointer, appended onto a checkpoint, or
 * written over the checkpoint the run resumes from (--trace over it, with --checkpoint-dir elsewhere). */
static int check_checkpoint_names(const struct bench_config *c, const struct place *pl, int n)
{
    const char *dirs[2];
    int resumed[2];
    const int nd = outputs_checkpoint_dirs(c, dirs, resumed);
    for (int d = 0; d < nd; d++) {
        for (int i = 0; i < n; i++) {
            const struct place *p = &pl[i];
            if (!p->output || p->dir || p->sink) continue;
            if (outputs_checkpoint_name(p->path, dirs[d]))
                return tb_error_set(TB_EINVAL, "%s %s: a name the checkpoints in %s use (" FINISHED_NOTE_NAME ", " CHECKPOINT_NAME_PREFIX "*), "
                                               "which the run %s there; give another path", p->opt, p->path, dirs[d],
                                    resumed[d] ? "resumes from" : "writes");
        }
    }
    return TB_OK;
}

static int check_distinct(const struct bench_config *c)
{
    enum { MAX_PLACES = 96 };
    struct place *pl = calloc(MAX_PLACES, sizeof *pl);
    if (!pl) return tb_error_set(TB_ENOMEM, "out of memory checking the output paths");
    int n = 0;
    const int mllog = c->mllog_dir[0] && strcmp(c->mllog_dir, "none") != 0;
    add_place(pl, &n, MAX_PLACES, "--out", 1, 0, "%s", c->out);
    if (mllog) add_place(pl, &n, MAX_PLACES, "--mllog", 1, 1, "%s", c->mllog_dir);
    if (mllog && c->run_id[0]) {
        char log[PATH_MAX];
        for (int k = 0; k < run_log_count(c) && n < MAX_PLACES - 40; k++) {
            run_log_path(c, k, log, sizeof log);
            add_place(pl, &n, MAX_PLACES, "--mllog", 1, 0, "%s", log);
        }
    }
    add_place(pl, &n, MAX_PLACES, "--save", 1, 0, "%s", c->save);
    add_place(pl, &n, MAX_PLACES, "--trace", 1, 0, "%s", c->trace);
    add_place(pl, &n, MAX_PLACES, "--logits", 1, 0, "%s", c->logits);
    add_place(pl, &n, MAX_PLACES, "--timeline", 1, 0, "%s", c->timeline);
    if (c->timeline[0]) add_place(pl, &n, MAX_PLACES, "--timeline", 1, 0, "%s.devices.csv", c->timeline);
    add_place(pl, &n, MAX_PLACES, "--checkpoint-dir", 1, 1, "%s", c->checkpoint_dir);
    add_place(pl, &n, MAX_PLACES, "--load", 0, 0, "%s", c->load);
    add_place(pl, &n, MAX_PLACES, "--resume", 0, 1, "%s", c->resume);
    add_place(pl, &n, MAX_PLACES, "--suite", 0, 0, "%s", c->suite);
    add_place(pl, &n, MAX_PLACES, "--calibration", 0, 0, "%s", c->calibration);
    if (conv_tuning_on(c)) add_place(pl, &n, MAX_PLACES, "--tuning", 1, 0, "%s", c->tuning);
    const size_t pdl = strlen(c->project_device);
    if (strchr(c->project_device, '/') || (pdl > 5 && !strcmp(c->project_device + pdl - 5, ".spec")))
        add_place(pl, &n, MAX_PLACES, "--project-device", 0, 0, "%s", c->project_device); /* a path, not a name */
    /* The data the run reads: none where they are synthetic, else --data or the default dataset. */
    const char *data = bench_config_synthetic(c) ? NULL : c->data[0] ? c->data : DATASET_DEFAULT_DIR;
    if (data) {
        add_place(pl, &n, MAX_PLACES, "--data", 0, 1, "%s", data);
        add_data_files(pl, &n, MAX_PLACES, data);
    }
    int st = check_checkpoint_names(c, pl, n);
    for (int i = 0; i < n && st == TB_OK; i++) {
        for (int j = i + 1; j < n && st == TB_OK; j++) {
            const struct place *a = &pl[i], *b = &pl[j];
            if (!a->output && !b->output) continue;
            if (a->opt == b->opt || (a->dir && b->dir) || a->exists != b->exists) continue;
            const int same = a->exists ? a->dev == b->dev && a->ino == b->ino : !strcmp(a->norm, b->norm);
            if (!same || a->sink) continue;
            /* --save over --load's file: the weights were read before the run, and the save renames a complete
             * new file over them only at its end, so training in place loses nothing. */
            if ((!strcmp(a->opt, "--save") && !strcmp(b->opt, "--load")) ||
                (!strcmp(a->opt, "--load") && !strcmp(b->opt, "--save")))
                continue;
            /* Name the output that was listed later first: outputs come before inputs in pl. */
            const struct place *w = b->output ? b : a, *o = b->output ? a : b;
            st = tb_error_set(TB_EINVAL, "%s %s: the same %s as %s %s, which the run %s; give each its own path",
                              w->opt, w->path, a->dir || b->dir ? "path" : "file", o->opt, o->path,
                              o->output ? "writes too (one would destroy the other)" : "reads (writing would destroy it)");
        }
    }
    /* Outputs written whole over what is someone's data, results rows or another run's checkpoint (after the
     * collisions, which name both options). */
    if (st == TB_OK) st = outputs_check_kinds(c, "--");
    free(pl);
    return st;
}

int outputs_check(const struct bench_config *c)
{
    /* Two outputs on one path first: a usage error (exit 2) whatever the path holds, not the I/O error of one of
     * them finding the other's file there ("--mllog x: not a directory" where x is --out's). */
    int st = check_distinct(c);
    if (st == TB_OK && c->out[0]) st = check_append_file("--out", c->out);
    if (st == TB_OK && c->mllog_dir[0] && strcmp(c->mllog_dir, "none") != 0) st = check_dir("--mllog", c->mllog_dir);
    /* --checkpoint-dir defaults to --resume's directory: a bad one is named by the option the user gave. */
    if (st == TB_OK && c->checkpoint_dir[0])
        st = check_dir(bench_option_given(c, "checkpoint-dir") || !c->resume[0] ? "--checkpoint-dir" : "--resume",
                       c->checkpoint_dir);
    if (st == TB_OK && c->save[0]) st = outputs_check_replaced("--save", c->save, 0);
    /* A reused --run-id would meet its earlier run's event log; only a resume continues it. */
    if (st == TB_OK && c->run_id[0] && !c->resume[0] && c->mllog_dir[0] && strcmp(c->mllog_dir, "none") != 0) {
        char log[PATH_MAX];
        struct stat sb;
        for (int k = 0; st == TB_OK && k < run_log_count(c); k++) {
            if (run_log_path(c, k, log, sizeof log) < (int)sizeof log && stat(log, &sb) == 0)
                st = tb_error_set(TB_EINVAL, "--run-id %s: %s holds an earlier run's event log; give another --run-id "
                                             "(only --resume continues a run under its id)", c->run_id, log);
        }
    }
    return st;
}

int outputs_replace_begin(struct outputs_replace *r, const char *path)
{
    memset(r, 0, sizeof *r);
    struct stat sb;
    /* A link to a file: the file is replaced, the link kept (as a write through it did). */
    const char *target = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) && realpath(path, r->path) ? r->path : path;
    if (target == path && snprintf(r->path, sizeof r->path, "%s", path) >= (int)sizeof r->path)
        return tb_error_set(TB_EIO, "cannot write %s: the path is too long", path);
    /* A device or FIFO (/dev/null, /dev/stdout) is written in place: a rename would replace the node with a file. */
    if (regular_target_why(r->path)) {
        if (!(r->f = fopen(r->path, "w"))) return tb_error_set(TB_EIO, "cannot write %s: %s", r->path, strerror(errno));
        return TB_OK;
    }
    snprintf(r->tmp, sizeof r->tmp, "%s.tmp%ld", r->path, (long)getpid());
    if (!(r->f = fopen(r->tmp, "w"))) return tb_error_set(TB_EIO, "cannot write %s: %s", r->tmp, strerror(errno));
    return TB_OK;
}

void outputs_replace_write(struct outputs_replace *r, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, r->f) != n && !r->err) r->err = errno ? errno : EIO;
}

int outputs_replace_end(struct outputs_replace *r)
{
    /* Synced before the rename, so a crash cannot leave an empty file where the old one was. */
    int err = r->err;
    if (!err && r->tmp[0] && (fflush(r->f) != 0 || fsync(fileno(r->f)) != 0)) err = errno ? errno : EIO;
    const int close_err = tb_fclose_errno(r->f);
    r->f = NULL;
    if (!err) err = close_err;
    if (!err && r->tmp[0] && rename(r->tmp, r->path) != 0) err = errno;
    if (err && r->tmp[0]) remove(r->tmp);
    if (!err) return TB_OK;
    return tb_error_set(TB_EIO, "cannot write %s: %s", r->path, strerror(err));
}

int outputs_write_text(const char *path, const char *text)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) { /* mkdir -p the parent */
        *slash = '\0';
        for (char *p = dir + 1;; p++) {
            if (*p != '/' && *p != '\0') continue;
            const char saved = *p;
            *p = '\0';
            mkdir(dir, 0777);
            *p = saved;
            if (!saved) break;
        }
    }
    struct outputs_replace r;
    const int st = outputs_replace_begin(&r, path);
    if (st != TB_OK) return st;
    outputs_replace_write(&r, text, strlen(text));
    outputs_replace_write(&r, "\n", 1);
    return outputs_replace_end(&r);
}

int outputs_lock_beside(const char *path, const char *what)
{
    char lock[PATH_MAX + 8];
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock) return -1;
    const int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno == EWOULDBLOCK && what) fprintf(stderr, "bench: waiting for another bench %s %s\n", what, path);
    if (flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}
