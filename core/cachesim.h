/* cachesim.h — per-layer marks for a cache-simulated run (tools/cachesim.sh).
 *
 * The machines these sessions get expose no hardware counters (perf: <not supported>), and the 16-core
 * machine where issue 31's steps are bound by memory is lent rarely, so the bytes a layer moves are
 * simulated: the script runs one step of `bench --profile` under callgrind's cache model, and each mark
 * below dumps callgrind's counters since the previous mark, named after the layer. Marks are made on
 * profiled runs only (--profile, --trace); outside valgrind, or without TB_CACHESIM=1, one costs a call.
 */
#ifndef TB_CACHESIM_H
#define TB_CACHESIM_H

/* Nonzero when marks dump counters: running under valgrind with TB_CACHESIM=1 (decided once). */
int cachesim_on(void);

/* Dumps the counters since the last mark as "L<layer> <phase>" (phase 'F' or 'B'; layer −1: the start of
 * a pass, so its dump holds the work between passes: data, optimizer), for the second training step only. */
void cachesim_mark(int layer, char phase);

#endif
