/* status.h — recoverable errors and always-on invariants.
 *
 * Library code returns an `int` status (TB_OK = 0, negative on failure) and records a one-line
 * message with tb_error_set(); only the CLI's main() turns a status into an exit code.
 * Library code never calls exit(). The message buffer is thread-local, so workers can fail
 * independently; the caller that receives the status reads tb_error_get() on the same thread.
 */
#ifndef TB_STATUS_H
#define TB_STATUS_H

#include <stdio.h>
#include <stdlib.h>

enum tb_status {
    TB_OK = 0,
    TB_EINVAL = -1,   /* bad argument or configuration (a usage error: exit 2) */
    TB_EIO = -2,      /* file missing, unreadable, short read, write failure */
    TB_EFORMAT = -3,  /* file readable but malformed (magic, counts, ranges, corrupt stream) */
    TB_ENOMEM = -4,   /* allocation failed or a configuration would not fit */
    TB_EDIVERGED = -5,/* NaN/Inf in loss or gradients */
    TB_EINTR = -6,    /* interrupted by a signal */
    TB_EUNSUPPORTED = -7,
};

/* Records a printf-style one-line message for the current thread; returns `status` for chaining. An
 * argument may be tb_error_get(): the message is formatted before it replaces the old one. */
int tb_error_set(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the current thread's last message ("" if none). */
const char *tb_error_get(void);
/* Clears the current thread's message. */
void tb_error_clear(void);
/* Copies src into dst (n bytes, NUL-terminated) as one line of text: control bytes and malformed UTF-8 as \xNN,
 * well-formed UTF-8 as itself, cut at a whole character; for text from files that bench prints. */
void tb_text_clean(char *dst, size_t n, const char *src);
/* For a "did you mean" beside an unknown name: the one name among names[0..n) that word begins, else the nearest
 * (optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours) within
 * (length - 1) / 3 edits and at most 2, else NULL. */
const char *tb_text_nearest(const char *word, const char *const *names, int n);
/* Flushes and closes an output stream f: 0, or the errno of the write that failed (a full disk: stdio keeps what was
 * refused, and the flush's retry names it), EIO where no errno was left. */
int tb_fclose_errno(FILE *f);
/* Returns a short name for a status code ("invalid argument", ...). */
const char *tb_status_name(int status);

/* Always-on invariant check: prints file:line and aborts. Not for input validation. */
#define TB_ASSERT(cond)                                                                   \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#endif
