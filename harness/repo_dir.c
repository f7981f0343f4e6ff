/* repo_dir.c — the repository's data folders, found from the working directory or the executable. */
#include "repo_dir.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

const char *repo_dir(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s", name);
    if (is_dir(buf)) return buf;
    char exe[4096];
    const ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = k > 0 ? (exe[k] = '\0', strrchr(exe, '/')) : NULL;
    if (slash) {
        *slash = '\0';
        /* build/bench → <repo>/name */
        snprintf(buf, n, "%s/../%s", exe, name);
        if (is_dir(buf)) return buf;
    }
    snprintf(buf, n, "%s", name);
    return buf;
}
