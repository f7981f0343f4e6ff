/* dataset_io.h — private file-reading helpers shared by the dataset readers (idx, cifar).
 *
 * One reader for plain and gzip files (gzip if the file starts with gzip's magic bytes; inflated here
 * with zlib's inflate, member by member, so that bytes after the last member are seen), which turns
 * every way a read can go wrong into a status and a "<path>: <fault>" message: missing/unreadable
 * file and short reads are TB_EIO ("truncated: ..."), a corrupt gzip stream (bad block, CRC or length
 * check) and bytes after the last gzip member that are no gzip member are TB_EFORMAT, sizes no file of
 * this size could hold are TB_ENOMEM. Implemented in dataset_io.c, below the readers; the front end
 * (dataset.c) does not use it. Not a public API: only the readers (workloads/dataset_*.c) include it.
 * A struct dsio_file belongs to one thread; close it on every path.
 */
#ifndef TB_DATASET_IO_H
#define TB_DATASET_IO_H

#include <stddef.h>
#include <stdint.h>

struct dsio_file {
    void *stream;        /* the descriptor, input buffer and inflate state (private to dataset_io.c) */
    const char *path;    /* borrowed; used in every message */
    uint64_t file_bytes; /* on-disk size (compressed size for gzip) */
    int direct;          /* 1 if plain (not gzip): sizes can then be checked exactly up front */
    uint64_t consumed;   /* decompressed bytes read so far */
};

/* What dsio_probe_file found at a path. */
enum dsio_presence {
    DSIO_UNUSABLE = -1, /* something is there but cannot be read as a file: *why says what */
    DSIO_ABSENT = 0,    /* nothing by that name */
    DSIO_REGULAR = 1,   /* a regular file (or a link to one) */
};

/* Opens path (plain or gzip) for reading; TB_EIO naming the file if missing, not regular, unreadable. */
int dsio_open_file(struct dsio_file *f, const char *path);
/* Closes f (safe on a zeroed or already-closed file). */
void dsio_close_file(struct dsio_file *f);
/* Reads exactly n bytes into buf; `what` names them in messages ("bytes of pixels"). */
int dsio_read_bytes(struct dsio_file *f, void *buf, size_t n, const char *what);
/* Checks that n more bytes could come from this file before allocating them: TB_EIO "truncated"
 * for a plain file that is too short, TB_ENOMEM for a gzip file that could not inflate to n. */
int dsio_check_size(struct dsio_file *f, uint64_t n, const char *what);
/* Allocates and reads exactly n bytes (growing the buffer as data arrives for gzip, so a lying
 * header never costs more memory than the stream really holds); *out is NULL on failure. */
int dsio_read_alloc(struct dsio_file *f, uint64_t n, const char *what, uint8_t **out);
/* Reads the rest of the stream into a malloc'd buffer (*out, *n_out); for headerless formats. */
int dsio_read_rest(struct dsio_file *f, const char *what, uint8_t **out, uint64_t *n_out);
/* Checks that the stream ends here: trailing data (or non-gzip bytes after the last gzip member) is
 * TB_EFORMAT; reading to the end also verifies the gzip CRC and length, so corruption inside
 * already-read data is caught. */
int dsio_check_end(struct dsio_file *f, const char *what);
/* Whether path names a regular file, nothing, or something unusable (a directory, FIFO, symlink loop
 * or dangling link, a path denied to us): then *why is the fault in regular_open's words or strerror's. */
enum dsio_presence dsio_probe_file(const char *path, const char **why);

#endif
