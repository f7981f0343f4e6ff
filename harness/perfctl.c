/* perfctl.c — perf's control-fifo protocol around the timed steps (see perfctl.h). */
#define _GNU_SOURCE
#include "perfctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int opened;              /* 0 before the first call, 1 once tried */
static int ctl_fd = -1, ack_fd = -1;

/* Opens path (flags | O_NONBLOCK) only if it is a FIFO: a regular file or a device named by mistake would
 * be written over (or read) at offset 0. stat before the open, since opening some devices acts; fstat
 * after it, against a swap in between. Returns the descriptor, or -1 with *why set (and errno, for ENXIO). */
static int fifo_open(const char *path, int flags, const char **why)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        *why = strerror(errno);
        return -1;
    }
    const int fd = S_ISFIFO(sb.st_mode) ? open(path, flags | O_NONBLOCK | O_CLOEXEC) : -1;
    if (fd < 0 && S_ISFIFO(sb.st_mode)) {
        *why = strerror(errno); /* ENXIO: no reader */
        return -1;
    }
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISFIFO(sb.st_mode)) return fd;
    if (fd >= 0) close(fd);
    errno = 0;
    *why = "not a FIFO, so left alone (perf --control fifo:CTL,ACK makes FIFOs)";
    return -1;
}

/* Opens the fifos named by TB_PERF_CTL on the first call; returns 1 when there is a control fifo. */
static int perfctl_open(void)
{
    if (opened) return ctl_fd >= 0;
    opened = 1;
    const char *env = getenv(PERFCTL_ENV);
    if (!env || !*env) return 0;
    char ctl[512];
    snprintf(ctl, sizeof ctl, "%s", env);
    char *ack = strchr(ctl, ',');
    if (ack) *ack++ = '\0';
    /* Non-blocking: with no reader (perf not listening) the open fails with ENXIO instead of hanging. */
    const char *why = NULL;
    ctl_fd = fifo_open(ctl, O_WRONLY, &why);
    if (ctl_fd < 0) {
        fprintf(stderr, "bench: warning: %s=%s: cannot open the control fifo %s: %s%s\n", PERFCTL_ENV, env, ctl, why,
                errno == ENXIO ? " (no reader: is perf running with --control?)" : "");
        return 0;
    }
    if (ack && *ack && (ack_fd = fifo_open(ack, O_RDONLY, &why)) < 0)
        fprintf(stderr, "bench: warning: %s: cannot open the ack fifo %s: %s; not waiting for acks\n", PERFCTL_ENV, ack,
                why);
    return 1;
}

/* Writes cmd to the control fifo and waits for "ack\n" on the ack fifo (10 s at most). */
static void perfctl_send(const char *cmd)
{
    if (!perfctl_open()) return;
    const size_t len = strlen(cmd);
    ssize_t w;
    do w = write(ctl_fd, cmd, len);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)len) {
        fprintf(stderr, "bench: warning: %s: writing '%.*s' to the control fifo failed: %s\n", PERFCTL_ENV,
                (int)len - 1, cmd, w < 0 ? strerror(errno) : "short write");
        return;
    }
    char got[8];
    size_t n = 0;
    while (ack_fd >= 0 && n < 4) { /* "ack\n" */
        struct pollfd p = {ack_fd, POLLIN, 0};
        const int r = poll(&p, 1, 10000);
        if (r < 0 && errno == EINTR) continue;
        const ssize_t k = r > 0 ? read(ack_fd, got + n, 4 - n) : 0;
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k <= 0) {
            fprintf(stderr, "bench: warning: %s: no ack from perf after '%.*s'%s\n", PERFCTL_ENV, (int)len - 1, cmd,
                    r == 0 ? " within 10 s" : "; not waiting for acks any more");
            if (r != 0) close(ack_fd), ack_fd = -1; /* perf closed it: every later wait would fail too */
            return;
        }
        n += (size_t)k;
    }
}

void perfctl_enable(void)
{
    perfctl_send("enable\n");
}

void perfctl_disable(void)
{
    perfctl_send("disable\n");
}
