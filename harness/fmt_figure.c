/* fmt_figure.c — figures as the run's summary prints them (fmt_figure.h). */
#include "fmt_figure.h"

#include <math.h>
#include <stdio.h>

static const char *fmt_small(char *buf, size_t n, double v, double fixed_from, const char *fixed)
{
    /* 0 and what is not a number print as the fixed format does ("0.0", "nan"): no digits to keep. */
    if (!isfinite(v) || v == 0.0 || fabs(v) >= fixed_from) snprintf(buf, n, fixed, v);
    else snprintf(buf, n, "%.3g", v);
    return buf;
}

const char *fmt_ms(char *buf, size_t n, double seconds) { return fmt_small(buf, n, 1e3 * seconds, 10.0, "%.1f"); }

const char *fmt_s(char *buf, size_t n, double seconds) { return fmt_small(buf, n, seconds, 1.0, "%.2f"); }

const char *fmt_mib(char *buf, size_t n, double bytes)
{
    const double mib = bytes / 1048576.0;
    if (isfinite(mib) && mib != 0.0 && fabs(mib) < 0.1) snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, n, "%.1f MiB", mib);
    return buf;
}
