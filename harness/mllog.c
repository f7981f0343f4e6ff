/* mllog.c — MLPerf-style ":::MLLOG" event lines (see mllog.h). */
#define _GNU_SOURCE
#include "mllog.h"

#include "json.h"
#include "status.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* mkdir -p dir. */
static int make_dirs(const char *dir)
{
    char buf[640];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = saved;
        if (!saved) break;
    }
    return 0;
}

int mllog_open(struct mllog *l, const char *dir, const char *run_id)
{
    return mllog_open_for(l, dir, run_id, 0);
}

int mllog_open_for(struct mllog *l, const char *dir, const char *run_id, int append)
{
    memset(l, 0, sizeof *l);
    if (!dir || !*dir || strcmp(dir, "none") == 0) return TB_OK;
    if (snprintf(l->path, sizeof l->path, "%s/%s.log", dir, run_id) >= (int)sizeof l->path)
        return tb_error_set(TB_EIO, "--mllog: path %s/%s.log is too long", dir, run_id);
    if (make_dirs(dir) != 0)
        return tb_error_set(TB_EIO, "--mllog: cannot create directory %s: %s", dir, strerror(errno));
    l->f = fopen(l->path, append ? "a" : "wx");
    if (!l->f && errno == EEXIST)
        return tb_error_set(TB_EIO, "--mllog: %s exists (an earlier run with this run id): not overwritten, no log",
                            l->path);
    if (!l->f) return tb_error_set(TB_EIO, "--mllog: cannot create %s: %s", l->path, strerror(errno));
    return TB_OK;
}

void mllog_event(struct mllog *l, enum mllog_type type, const char *key, const char *value_json, long epoch_num,
                 const char *status)
{
    if (!l->f) return;
    static const char *const names[] = {"POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct json_buf b;
    json_buf_init(&b);
    json_begin_object(&b);
    json_key_str(&b, "namespace", "");
    json_key_int(&b, "time_ms", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    json_key_str(&b, "event_type", names[type]);
    json_key_str(&b, "key", key);
    json_key_raw(&b, "value", value_json ? value_json : "null");
    json_key_object(&b, "metadata");
    json_key_str(&b, "file", "harness/run.c");
    if (epoch_num >= 0) json_key_int(&b, "epoch_num", epoch_num);
    if (status) json_key_str(&b, "status", status);
    json_end_object(&b);
    json_end_object(&b);
    if (json_buf_status(&b) == TB_OK) fprintf(l->f, ":::MLLOG %s\n", json_buf_str(&b));
    json_buf_free(&b);
}

void mllog_point_num(struct mllog *l, const char *key, double v)
{
    char t[40];
    json_format_double(v, t, sizeof t);
    mllog_event(l, MLLOG_POINT, key, t, -1, NULL);
}

void mllog_point_int(struct mllog *l, const char *key, long long v)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", v);
    mllog_event(l, MLLOG_POINT, key, t, -1, NULL);
}

void mllog_point_str(struct mllog *l, const char *key, const char *s)
{
    if (!l->f) return;
    struct json_buf b;
    json_buf_init(&b);
    json_str(&b, s);
    if (json_buf_status(&b) == TB_OK) mllog_event(l, MLLOG_POINT, key, json_buf_str(&b), -1, NULL);
    json_buf_free(&b);
}

void mllog_close(struct mllog *l)
{
    if (l->f) fclose(l->f);
    l->f = NULL;
}
