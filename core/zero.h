/* zero.h — zeroing float spans of large tensors without reading them first.
 *
 * A plain memset of a span that is not in cache reads every line for ownership before writing it:
 * glibc's memset keeps regular stores up to a threshold set from the L3 size, which this VM reports as
 * 260 MB, so gradient buffers of 16–77 MB were zeroed at the write-with-RFO rate (8.9 GB/s on the Xeon
 * of the tenth session, 22 GB/s with non-temporal stores).
 */
#ifndef TB_ZERO_H
#define TB_ZERO_H

#include <stddef.h>

/* p[0, n) = 0; with non-temporal stores (then a fence) when the span belongs to a tensor of `total`
 * floats of 1 MB or more, else memset. */
void tb_zero_floats(float *p, size_t n, size_t total);

#endif
