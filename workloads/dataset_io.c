/* dataset_io.c — what every dataset reader sits on: the shared plain/gzip file reader (dataset_io.h),
 * the probe the readers find their files with, and dataset_free (a reader releases a half-built
 * dataset with it).
 *
 * The bottom of the dataset files: it calls no reader and not the front end (dataset.c), which sit
 * above it. Every function here is reentrant; error messages go to the calling thread's status buffer.
 * A dataset owns its two arrays; dataset_free releases them.
 */
#include "dataset_io.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "regular_file.h"
#include "status.h"

/* Deflate's best case is about 1032:1 (a long run encoded as length/distance pairs), so a gzip file
 * of B bytes never inflates to more than this; anything above is a lying header, not a big file. */
#define DSIO_MAX_INFLATE_RATIO 1032u
/* zlib takes unsigned lengths: read in chunks well below UINT_MAX (and INT_MAX). */
#define DSIO_CHUNK (1u << 30)
/* Input buffer: fewer, larger reads (gzread's 8 KiB default had made the 26 MB Fashion-MNIST file load ~2x slower). */
#define DSIO_IN_BYTES (1u << 17)

typedef unsigned long long ull;

/* The private half of a dsio_file. For plain files z.next_in/avail_in hold the bytes read ahead to
 * look for gzip's magic; for gzip files, the compressed input not yet inflated. */
struct dsio_stream {
    int fd;
    int eof;          /* read() has returned 0 */
    int member_end;   /* inflate finished a gzip member: another member or the end of the file must follow */
    int ended;        /* the stream ended cleanly: no more bytes */
    int truncated;    /* the file ended inside a gzip member (header, data or trailer) */
    int z_live;       /* inflateInit2 succeeded: inflateEnd is owed */
    uint64_t in_off;  /* file offset of in[0] */
    z_stream z;
    uint8_t in[DSIO_IN_BYTES];
};

enum dsio_presence dsio_probe_file(const char *path, const char **why)
{
    struct stat st;
    *why = NULL;
    if (stat(path, &st) == 0) {
        if (S_ISREG(st.st_mode)) return DSIO_REGULAR;
        /* The same words as regular_open, which would refuse it when opened. */
        *why = S_ISDIR(st.st_mode) ? "is a directory, not a regular file"
                                   : "not a regular file (a FIFO, socket or device)";
        return DSIO_UNUSABLE;
    }
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
        /* A link whose target is gone is a file the user meant to be there, not an absent name. */
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
            *why = "dangling symbolic link: its target does not exist";
            return DSIO_UNUSABLE;
        }
        return DSIO_ABSENT;
    }
    *why = strerror(e); /* ELOOP, EACCES, ENAMETOOLONG, EIO, ...: there may be a file, but not for us */
    return DSIO_UNUSABLE;
}

/* Moves the input not yet used to the front of the buffer and reads more after it (eof set at the end). */
static int dsio_refill(struct dsio_file *f)
{
    struct dsio_stream *s = f->stream;
    size_t used = (size_t)(s->z.next_in - s->in);
    if (s->z.avail_in && used) memmove(s->in, s->in + used, s->z.avail_in);
    s->in_off += used;
    s->z.next_in = s->in;
    for (;;) {
        ssize_t r = read(s->fd, s->in + s->z.avail_in, sizeof s->in - s->z.avail_in);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tb_error_set(TB_EIO, "%s: read error: %s", f->path, strerror(errno));
        if (r == 0) s->eof = 1;
        s->z.avail_in += (uInt)r;
        return TB_OK;
    }
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
    struct dsio_stream *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return tb_error_set(TB_ENOMEM, "%s: cannot open: out of memory", path);
    }
    s->fd = fd;
    s->z.next_in = s->in;
    f->stream = s;
    f->file_bytes = (uint64_t)st.st_size;
    int rc;
    while (s->z.avail_in < 2 && !s->eof)
        if ((rc = dsio_refill(f)) != TB_OK) goto fail;
    /* gzip's magic decides, as zlib's gzread did: a file named .gz that is not gzip is read plain. */
    f->direct = !(s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b);
    if (!f->direct) {
        /* 15 + 16: gzip wrapper only, 32 KiB window (any deflate stream). */
        if (inflateInit2(&s->z, 15 + 16) != Z_OK) {
            rc = tb_error_set(TB_ENOMEM, "%s: cannot open: out of memory", path);
            goto fail;
        }
        s->z_live = 1;
    }
    return TB_OK;
fail:
    dsio_close_file(f);
    return rc;
}

void dsio_close_file(struct dsio_file *f)
{
    struct dsio_stream *s = f->stream;
    if (!s) return;
    if (s->z_live) inflateEnd(&s->z);
    close(s->fd);
    free(s);
    f->stream = NULL;
}

/* Plain file: the bytes read ahead first, then straight from the descriptor into buf. */
static int dsio_pull_direct(struct dsio_file *f, uint8_t *buf, size_t n, size_t *got)
{
    struct dsio_stream *s = f->stream;
    size_t k = s->z.avail_in < n ? s->z.avail_in : n;
    if (k) memcpy(buf, s->z.next_in, k);
    s->z.next_in += k;
    s->z.avail_in -= (uInt)k;
    while (k < n && !s->eof) {
        ssize_t r = read(s->fd, buf + k, n - k);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            *got = k;
            return tb_error_set(TB_EIO, "%s: read error: %s", f->path, strerror(errno));
        }
        if (r == 0) s->eof = 1;
        k += (size_t)r;
    }
    *got = k;
    return TB_OK;
}

/* Delivers up to n (<= DSIO_CHUNK) bytes of the stream into buf, *got of them: fewer than n only where it
 * ends (s->truncated then says whether it ended inside a gzip member). A status on a read error, a corrupt
 * stream, or bytes after a gzip member that start no other member: gzread ignored those silently. */
static int dsio_pull(struct dsio_file *f, uint8_t *buf, size_t n, size_t *got)
{
    struct dsio_stream *s = f->stream;
    if (f->direct) return dsio_pull_direct(f, buf, n, got);
    s->z.next_out = buf;
    s->z.avail_out = (uInt)n;
    int st = TB_OK;
    while (s->z.avail_out > 0 && !s->ended && !s->truncated) {
        if (s->member_end) {
            if (s->z.avail_in < 2 && !s->eof) {
                if ((st = dsio_refill(f)) != TB_OK) break;
                continue;
            }
            if (s->z.avail_in == 0) {
                s->ended = 1;
                break;
            }
            if (s->z.avail_in >= 2 && s->z.next_in[0] == 0x1f && s->z.next_in[1] == 0x8b) {
                inflateReset(&s->z); /* concatenated members are one gzip file (gzip -c a >f; gzip -c b >>f) */
                s->member_end = 0;
                continue;
            }
            uint64_t at = s->in_off + (uint64_t)(s->z.next_in - s->in);
            uint64_t extra = f->file_bytes > at ? f->file_bytes - at : s->z.avail_in;
            st = tb_error_set(TB_EFORMAT,
                              "%s: trailing data after the gzip stream: %llu byte%s at offset %llu that start%s no gzip member",
                              f->path, (ull)extra, extra == 1 ? "" : "s", (ull)at, extra == 1 ? "s" : "");
            break;
        }
        if (s->z.avail_in == 0) {
            if (s->eof) {
                s->truncated = 1;
                break;
            }
            if ((st = dsio_refill(f)) != TB_OK) break;
            continue;
        }
        int r = inflate(&s->z, Z_NO_FLUSH);
        if (r == Z_STREAM_END) {
            s->member_end = 1;
        } else if (r == Z_DATA_ERROR) {
            st = tb_error_set(TB_EFORMAT, "%s: corrupt gzip stream: %s", f->path,
                              s->z.msg ? s->z.msg : "compressed data error");
            break;
        } else if (r == Z_MEM_ERROR) {
            st = tb_error_set(TB_ENOMEM, "%s: out of memory inflating gzip stream", f->path);
            break;
        } else if (r != Z_OK) {
            /* Z_BUF_ERROR cannot happen with input and output space left; Z_NEED_DICT not in a gzip member. */
            st = tb_error_set(TB_EFORMAT, "%s: corrupt gzip stream: inflate returned %d", f->path, r);
            break;
        }
    }
    *got = n - s->z.avail_out;
    return st;
}

/* Turns a read that ended early into "truncated". */
static int dsio_fail_short(struct dsio_file *f, uint64_t expected, uint64_t got, const char *what)
{
    const struct dsio_stream *s = f->stream;
    return tb_error_set(TB_EIO, "%s: truncated: expected %llu %s, got %llu%s", f->path, (ull)expected, what,
                        (ull)got, s->truncated ? " (gzip stream ends early)" : "");
}

/* Reads exactly n bytes into buf; expected/got_before only shape the message of a short read. */
static int dsio_read_span(struct dsio_file *f, uint8_t *buf, uint64_t n, const char *what, uint64_t expected,
                          uint64_t got_before)
{
    uint64_t got = 0;
    while (got < n) {
        uint64_t want = n - got;
        if (want > DSIO_CHUNK) want = DSIO_CHUNK;
        size_t r = 0;
        int st = dsio_pull(f, buf + got, (size_t)want, &r);
        got += r;
        f->consumed += r;
        if (st) return st;
        if (r < want) return dsio_fail_short(f, expected, got_before + got, what);
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
        size_t r = 0;
        st = dsio_pull(f, buf + got, (size_t)want, &r);
        got += r;
        f->consumed += r;
        if (st) goto fail;
        if (r < want) break; /* the end of the stream */
    }
    if (((struct dsio_stream *)f->stream)->truncated) {
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
    size_t r = 0;
    int st = dsio_pull(f, &b, 1, &r);
    if (st) return st;
    if (r > 0 && !f->direct) {
        /* Inflate the rest before blaming its length: a corrupt stream often decodes to too many bytes
         * before zlib sees the damage, and "corrupt" is then the fault to name. */
        uint8_t sink[1u << 14];
        size_t k;
        do {
            if ((st = dsio_pull(f, sink, sizeof sink, &k)) != TB_OK) return st;
        } while (k == sizeof sink);
    }
    if (((struct dsio_stream *)f->stream)->truncated)
        return tb_error_set(TB_EIO, "%s: truncated: gzip stream ends before its trailer", f->path);
    if (r > 0)
        return tb_error_set(TB_EFORMAT, "%s: trailing data after %llu %s", f->path, (ull)f->consumed, what);
    return TB_OK;
}

void dataset_free(struct dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
