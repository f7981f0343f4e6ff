/* outputs.h — checks, before a run does any work, that every place it will write can be written.
 *
 * A run learns that its results file, event log, checkpoint directory or --save file cannot be
 * written only when it writes them, which is after the training: minutes lost, and the measurement
 * with them. outputs_check() answers up front without leaving anything behind: missing directories
 * are not created (the writers create them later), a probe file in the nearest existing directory is
 * removed at once, and an existing file is opened for appending without being changed.
 * Threading: stateless; error messages go to the calling thread's status buffer.
 */
#ifndef TB_OUTPUTS_H
#define TB_OUTPUTS_H

#include "run.h"

#include <limits.h>
#include <stdio.h>

/* Checks --out, --mllog (unless "none"), --checkpoint-dir and --save of a finished configuration;
 * TB_OK, or TB_EIO with one line naming the option, the path and the reason; TB_EINVAL for a --run-id
 * whose event log exists already (unless the run is a --resume), and for two outputs that are one file
 * or an output that is an input (--load, --resume, --data's files, --suite, --calibration,
 * --project-device's file), naming both options: existing files compared by device and inode, others
 * by normalised path. Directories may be shared, and a character device such as /dev/null. */
int outputs_check(const struct bench_config *c);

/* The longest suffix a replacing writer adds to its file's name for the temporary it renames: --save's
 * ".tmp.XXXXXX" (core/checkpoint.c), outputs_write_text's ".tmp" and a pid (up to 7 digits). */
#define OUTPUTS_TMP_SUFFIX 11

/* The check of a file that a writer replaces by renaming a new one over it (--save, the calibration): an
 * existing path must be a regular file, not a device, FIFO or directory the rename would replace; its
 * directory must exist and take a new file (make_dirs: or be creatable, for a writer that makes it).
 * TB_OK, or TB_EIO with one line "OPT PATH: why". */
int outputs_check_replaced(const char *opt, const char *path, int make_dirs);
/* An output written whole that replaces an earlier file only once it is complete (outputs_replace_begin/_end). */
struct outputs_replace {
    FILE *f;                 /* where to write */
    char path[PATH_MAX];     /* the file replaced: the path given, or the file a link there names */
    char tmp[PATH_MAX + 32]; /* the temporary renamed over it; "" where path is a device or FIFO, written in place */
    int err;                 /* the first failed write's errno, 0 while none failed */
};
/* Opens r->f for an output written whole as path: a temporary beside it (a device or FIFO such as /dev/null in
 * place). TB_OK, or TB_EIO with one line. */
int outputs_replace_begin(struct outputs_replace *r, const char *path);
/* Writes n bytes of data to r->f, keeping the errno of the first that fails for outputs_replace_end's message. */
void outputs_replace_write(struct outputs_replace *r, const void *data, size_t n);
/* Ends r: flushed, synced, closed and renamed over its path, so a reader sees the old file or the whole new one; on
 * any failure (a full disk) the temporary is removed and the old file left as it was. TB_OK, or TB_EIO "cannot write
 * PATH: why" (the failed write's reason). */
int outputs_replace_end(struct outputs_replace *r);
/* Writes text and a newline as the file path: its parent directories made as needed, a temporary beside it
 * renamed into place, so a reader never sees half a file. TB_OK, or TB_EIO with one line. */
int outputs_write_text(const char *path, const char *text);
/* Whether a file can be created in the existing directory dir (tried, not judged from mode bits): TB_OK, or TB_EIO
 * "cannot write in DIR: why". */
int outputs_dir_writable(const char *dir);
/* Whether two paths name one file: by inode where both exist, else as their normalised spellings. */
int outputs_same_file(const char *a, const char *b);
/* TB_EINVAL (naming opt) where an output written whole would replace someone's data at path: an existing results
 * file, or a file named like a run's checkpoint (finished.json, ckpt-*); TB_OK for anything else, or nothing. */
int outputs_check_kind(const char *opt, const char *path);
/* outputs_check_kind for each output c writes whole (--save, unless over --load's file: training in place; --trace,
 * --logits, --timeline and its .devices.csv), the options named with dashes before them ("--", or "" in a suite). */
int outputs_check_kinds(const struct bench_config *c, const char *dashes);
/* An exclusive lock for a writer of the file path that replaces it by rename (whose own inode cannot serialise two
 * writers): "<path>.lock" beside it, waited for (with a line on stderr naming what, where another bench holds it
 * and what is not NULL). The fd to close at the end, or -1 where none can be had (a read-only folder: unlocked). */
int outputs_lock_beside(const char *path, const char *what);
/* The checkpoint folders of a finished configuration c, in dirs (2): --checkpoint-dir, then --resume's where it is
 * another folder; is_resume[k] says which. Returns how many (0 to 2). */
int outputs_checkpoint_dirs(const struct bench_config *c, const char **dirs, int *is_resume);
/* 1 if path is named like a checkpointer's own file (finished.json, ckpt-*) in directory dir ("" = none). */
int outputs_checkpoint_name(const char *path, const char *dir);

#endif
