/* outputs.c — up-front checks of the run's output locations (see outputs.h). */
#include "outputs.h"

#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether a file can be created in the existing directory dir: a probe file made and removed at
 * once. access(W_OK) would not do: it says yes to root on a read-only mount's permissions and
 * cannot see quotas or a full inode table. */
static int dir_writable(const char *opt, const char *path, const char *dir)
{
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.bench-write-test-XXXXXX", dir) >= (int)sizeof probe)
        return tb_error_set(TB_EIO, "%s %s: path too long", opt, path);
    int fd = mkstemp(probe);
    if (fd < 0) {
        int e = errno;
        return tb_error_set(TB_EIO, "%s %s: cannot write in %s: %s", opt, path, dir, strerror(e));
    }
    close(fd);
    unlink(probe);
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
    char dir[PATH_MAX];
    int st = existing_parent(opt, path, dir, sizeof dir);
    return st != TB_OK ? st : dir_writable(opt, path, dir);
}

/* A file replaced by rename (--save, the calibration): an existing target must be a regular file, since
 * renaming over /dev/null would replace the device; its directory must exist (the --save writer does not
 * create it) and take a new file, or with make_dirs be creatable under its nearest existing ancestor. */
static int check_replaced_file(const char *opt, const char *path, int make_dirs)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return tb_error_set(TB_EIO, "%s %s: %s", opt, path, S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
    char dir[PATH_MAX];
    if (make_dirs) {
        const int st = existing_parent(opt, path, dir, sizeof dir);
        return st != TB_OK ? st : dir_writable(opt, path, dir);
    }
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return tb_error_set(TB_EIO, "%s %s: path too long", opt, path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tb_error_set(TB_EIO, "%s %s: directory %s does not exist", opt, path, dir);
    return dir_writable(opt, path, dir);
}

int outputs_check_replaced(const char *opt, const char *path, int make_dirs)
{
    return check_replaced_file(opt, path, make_dirs);
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

int outputs_check(const struct bench_config *c)
{
    int st = TB_OK;
    if (c->out[0]) st = check_append_file("--out", c->out);
    if (st == TB_OK && c->mllog_dir[0] && strcmp(c->mllog_dir, "none") != 0) st = check_dir("--mllog", c->mllog_dir);
    if (st == TB_OK && c->checkpoint_dir[0]) st = check_dir("--checkpoint-dir", c->checkpoint_dir);
    if (st == TB_OK && c->save[0]) st = check_replaced_file("--save", c->save, 0);
    /* A reused --run-id would meet its earlier run's event log; only a resume continues it. */
    if (st == TB_OK && c->run_id[0] && !c->resume[0] && c->mllog_dir[0] && strcmp(c->mllog_dir, "none") != 0) {
        char log[PATH_MAX];
        struct stat sb;
        if (snprintf(log, sizeof log, "%s/%s.log", c->mllog_dir, c->run_id) < (int)sizeof log && stat(log, &sb) == 0)
            st = tb_error_set(TB_EINVAL, "--run-id %s: %s holds an earlier run's event log; give another --run-id "
                                         "(only --resume continues a run under its id)", c->run_id, log);
    }
    return st;
}
