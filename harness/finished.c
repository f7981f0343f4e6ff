/* finished.c — the finished-run note of a checkpoint directory (see finished.h). */
#include "finished.h"

#include "json.h"
#include "regular_file.h"
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int finished_mark(const char *dir, long step, const char *run_id, const char *out)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/" FINISHED_NOTE_NAME, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_int(&b, "finished_step", step);
    json_key_str(&b, "run_id", run_id);
    json_key_str(&b, "out", out);
    json_end_object(&b);
    int st = json_buf_status(&b);
    FILE *f = st == TB_OK ? fopen(tmp, "w") : NULL;
    if (st == TB_OK && !f) st = tb_error_set(TB_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    if (f) {
        fprintf(f, "%s\n", json_buf_str(&b));
        /* The note must not claim a row that a crash could lose: the row was fsynced before this. */
        if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) st = tb_error_set(TB_EIO, "%s: write failed", tmp);
        if (fclose(f) != 0 && st == TB_OK) st = tb_error_set(TB_EIO, "%s: close failed", tmp);
        if (st == TB_OK && rename(tmp, path) != 0)
            st = tb_error_set(TB_EIO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        if (st != TB_OK) unlink(tmp);
    }
    json_buf_free(&b);
    return st;
}

int finished_read(const char *dir, long *step, char *note, size_t n)
{
    char path[4200], buf[8192];
    snprintf(path, sizeof path, "%s/" FINISHED_NOTE_NAME, dir);
    struct stat sb;
    if (lstat(path, &sb) != 0 && errno == ENOENT) return 0;
    const char *why = NULL;
    FILE *f = regular_fopen(path, &why);
    if (!f) return tb_error_set(TB_EIO, "%s", why ? why : "cannot be opened"), -1;
    const size_t len = fread(buf, 1, sizeof buf - 1, f);
    const int bad_read = ferror(f);
    fclose(f);
    if (bad_read) return tb_error_set(TB_EIO, "read failed"), -1;
    buf[len] = '\0';
    struct json_value *v = NULL;
    if (json_parse(buf, strcspn(buf, "\n"), &v) != TB_OK) {
        tb_error_set(TB_EFORMAT, "not JSON");
        return -1;
    }
    /* finished_mark writes a whole number of steps; anything else is not its note (the range first: casting 1e300
     * to long is undefined). */
    const struct json_value *fs = json_get(v, "finished_step");
    if (!fs || fs->type != JSON_NUMBER || !(fs->number >= 0 && fs->number < 0x1p62) ||
        fs->number != (double)(long)fs->number) {
        json_value_free(v);
        tb_error_set(TB_EFORMAT, "no whole finished_step");
        return -1;
    }
    *step = (long)fs->number;
    snprintf(note, n, "finished at step %ld; its row is in %s (run %s)", *step, json_get_str(v, "out", "?"),
             json_get_str(v, "run_id", "?"));
    json_value_free(v);
    return 1;
}

int finished_at(const char *dir, long step, char *note, size_t n)
{
    long at = -1;
    char mine[1200];
    const int r = finished_read(dir, &at, mine, sizeof mine);
    if (r <= 0) return r;
    if (at != step) return 0;
    snprintf(note, n, "%s", mine);
    return 1;
}

int finished_refuse(const char *dir, long step)
{
    char why[512], at[48] = "";
    snprintf(why, sizeof why, "%s", tb_error_get());
    if (step >= 0) snprintf(at, sizeof at, " at step %ld", step);
    /* finished_mark writes the note only after the row, and atomically: one there at all most likely means the row
     * exists, and resuming would append the same measurement again, which report and compare would count twice.
     * Refusing costs one rm; a duplicate row skews every summary made from the results. One line, as every error. */
    tb_error_set(TB_EIO, "--resume %s: %s/" FINISHED_NOTE_NAME " is not a note bench wrote (%s), so whether the run "
                         "finished%s and wrote its row cannot be told: look for its row in the results, then remove the "
                         "note to evaluate and write the row again", dir, dir, why, at);
    return -1;
}

int finished_check(const char *dir, long step, char *note, size_t n)
{
    const int done = finished_at(dir, step, note, n);
    return done >= 0 ? done : finished_refuse(dir, step);
}
