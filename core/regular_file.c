/* regular_file.c — read-only opens of regular files only (see regular_file.h). */
#include "regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *not_regular_why(mode_t mode)
{
    return S_ISDIR(mode) ? "is a directory, not a regular file" : "not a regular file (a FIFO, socket or device)";
}

const char *regular_target_why(const char *path)
{
    struct stat sb;
    return stat(path, &sb) != 0 || S_ISREG(sb.st_mode) ? NULL : not_regular_why(sb.st_mode);
}

int regular_open(const char *path, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        *why = not_regular_why(sb.st_mode);
        close(fd);
        return -1;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    return fd;
}

FILE *regular_fopen(const char *path, const char **why)
{
    int fd = regular_open(path, why);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        if (why) *why = strerror(errno);
        close(fd);
    }
    return f;
}
