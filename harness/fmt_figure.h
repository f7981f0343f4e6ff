/* fmt_figure.h — figures as the run's summary prints them: small values keep their digits.
 *
 * A fixed "%.1f ms" or "%.2f s" printed 0.0 for an exchange of 0.031 ms and 0.00 s for a 5 ms evaluation that the
 * row records; these keep three significant digits below the fixed format's range and the fixed format above it.
 * Each writes into buf (n bytes) and returns buf, for use inside one printf's arguments.
 */
#ifndef TB_FMT_FIGURE_H
#define TB_FMT_FIGURE_H

#include <stddef.h>

/* seconds as milliseconds, without the unit: "%.1f" from 10 ms, else three significant digits ("0.0312"). */
const char *fmt_ms(char *buf, size_t n, double seconds);
/* seconds, without the unit: "%.2f" from 1 s, else three significant digits ("0.00473"). */
const char *fmt_s(char *buf, size_t n, double seconds);
/* bytes with their unit: "%.1f MiB" from 0.1 MiB, else "%.1f KiB" ("42.8 KiB"). */
const char *fmt_mib(char *buf, size_t n, double bytes);

#endif
