/* stream_bytes.h — the rule behind layout.h's tb_stream_bytes (core/stream_bytes.c says why), pure for tests. */
#ifndef TB_STREAM_BYTES_H
#define TB_STREAM_BYTES_H

#include <stddef.h>

/* The non-temporal store threshold in bytes: env (TB_STREAM_KB's text, KiB, or NULL) when it is a whole number
 * in [1, 2^30], for the whole output (*per_thread = 0); else on an Intel CPU half of l2 (a core's L2 in bytes;
 * 1 MiB when l2 <= 0) for each writing thread (*per_thread = 1); else 16 MiB for the whole output. */
size_t tb_stream_bytes_choose(const char *env, int intel, long l2, int *per_thread);
/* tb_stream_bytes_choose with this machine's CPU vendor and L2 (what tb_stream_bytes decides once). */
size_t tb_stream_bytes_here(const char *env, int *per_thread);

#endif
