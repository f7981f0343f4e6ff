/* status.c — thread-local error message for recoverable failures. */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char tb_msg[512];

/* The length of the well-formed UTF-8 sequence of a multi-byte character at s (2-4), or 0. */
static int utf8_len(const unsigned char *s)
{
    const int n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return n;
}

void tb_text_clean(char *dst, size_t n, const char *src)
{
    if (n == 0) return;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 1 < n;) {
        int k = *p >= 0x80 ? utf8_len(p) : *p >= 0x20 && *p != 0x7f ? 1 : 0;
        /* Well-formed but not text to pass to a terminal: C1 controls (U+0080-009F; U+009B starts an escape
         * sequence) and the bidirectional overrides and isolates (U+202A-202E, U+2066-2069), shown byte by byte. */
        if ((k == 2 && p[0] == 0xc2 && p[1] < 0xa0) ||
            (k == 3 && p[0] == 0xe2 && ((p[1] == 0x80 && p[2] >= 0xaa && p[2] <= 0xae) ||
                                        (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9))))
            k = 0;
        if (k > 0 && o + (size_t)k < n) {
            memmove(dst + o, p, (size_t)k), o += (size_t)k, p += k;
        } else if (k == 0 && o + 4 < n) {
            char esc[5];
            snprintf(esc, sizeof esc, "\\x%02x", *p), memcpy(dst + o, esc, 4), o += 4, p++;
        } else {
            break; /* no escape or character split at the end */
        }
    }
    dst[o] = '\0';
}

/* Optimal string alignment distance of a and b (each at most 63 bytes; longer: a large number). */
static int text_distance(const char *a, const char *b)
{
    enum { L = 64 };
    const int na = (int)strlen(a), nb = (int)strlen(b);
    if (na >= L || nb >= L) return 1 << 20;
    int d[L][L];
    for (int i = 0; i <= na; i++) d[i][0] = i;
    for (int j = 0; j <= nb; j++) d[0][j] = j;
    for (int i = 1; i <= na; i++)
        for (int j = 1; j <= nb; j++) {
            const int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

const char *tb_text_nearest(const char *word, const char *const *names, int n)
{
    /* The one name word begins (a suite key cut short: "steps-per-exec"), as getopt takes a unique prefix. */
    const size_t len = strlen(word);
    const char *prefixed = NULL;
    int n_prefixed = 0;
    for (int k = 0; k < n && len > 0; k++)
        if (!strncmp(names[k], word, len)) prefixed = names[k], n_prefixed++;
    if (n_prefixed == 1) return prefixed;
    /* Else up to a third of the word and at most 2 edits: "stpes" (a swap) is a typo; a three-letter word is not,
     * as "gpu" is no "cpu" mistyped; and a long word 3 edits away is another option ("lr-final-rate" is no
     * "lr-decay-rate"). */
    int limit = ((int)len - 1) / 3;
    if (limit > 2) limit = 2;
    int best_d = 1 << 20;
    const char *best = NULL;
    for (int k = 0; k < n; k++) {
        const int dk = text_distance(word, names[k]);
        if (dk < best_d) best_d = dk, best = names[k];
    }
    return best_d <= limit ? best : NULL;
}

int tb_error_set(int status, const char *fmt, ...)
{
    /* Formatted aside first, so an argument may be tb_error_get() itself (adding context to a message). */
    char buf[sizeof tb_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* A message is one line of text whatever its arguments hold: bytes from a file (a newline or a terminal escape
     * in a calibration's CPU name, a tensor name that is not UTF-8) are shown as \xNN, not passed to the terminal. */
    tb_text_clean(tb_msg, sizeof tb_msg, buf);
    return status;
}

const char *tb_error_get(void) { return tb_msg; }

void tb_error_clear(void) { tb_msg[0] = '\0'; }

const char *tb_status_name(int status)
{
    switch (status) {
    case TB_OK: return "ok";
    case TB_EINVAL: return "invalid argument";
    case TB_EIO: return "i/o error";
    case TB_EFORMAT: return "bad format";
    case TB_ENOMEM: return "out of memory";
    case TB_EDIVERGED: return "diverged";
    case TB_EINTR: return "interrupted";
    case TB_EUNSUPPORTED: return "unsupported";
    }
    return "unknown error";
}

int tb_fclose_errno(FILE *f)
{
    errno = 0;
    const int bad = fflush(f) != 0 || ferror(f);
    int err = bad ? errno : 0;
    if (fclose(f) != 0 && !bad) err = errno;
    return bad || err ? (err ? err : EIO) : 0;
}
