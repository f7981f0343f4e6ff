/* status.c — thread-local error message for recoverable failures. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char tb_msg[512];

int tb_error_set(int status, const char *fmt, ...)
{
    /* Formatted aside first, so an argument may be tb_error_get() itself (adding context to a message). */
    char buf[sizeof tb_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(tb_msg, buf, sizeof tb_msg);
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
