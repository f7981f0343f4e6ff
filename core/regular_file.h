/* regular_file.h — opening a user's input file for reading only if it is a regular file, and checking that
 * an output's existing target is one.
 *
 * A FIFO given as --load, named like a checkpoint under --resume, or as --suite would block open()
 * forever (no writer), and a device such as /dev/zero would be read forever. These open with
 * O_NONBLOCK (a FIFO's open then returns at once), check fstat's S_ISREG on the open descriptor (no
 * race between a check and the open), and only then switch back to blocking reads.
 * Threading: stateless and reentrant.
 */
#ifndef TB_REGULAR_FILE_H
#define TB_REGULAR_FILE_H

#include <stdio.h>

/* Opens path read-only (close-on-exec) if it is a regular file: its descriptor, or -1 with *why a
 * short reason ("is a directory, not a regular file", "not a regular file (a FIFO, socket or device)", or strerror). */
int regular_open(const char *path, const char **why);

/* regular_open as a FILE in mode "rb": the stream, or NULL with *why set. */
FILE *regular_fopen(const char *path, const char **why);

/* For an output replaced by rename or truncated: NULL if path is missing or a regular file, else the
 * reason in regular_open's words (renaming over /dev/null would replace the device with a file; a FIFO
 * opened for writing without a reader blocks forever). */
const char *regular_target_why(const char *path);

#endif
