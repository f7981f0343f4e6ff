/* perfctl.h — lets perf record or count only a run's timed steps.
 *
 * `perf record|stat --delay=-1 --control fifo:CTL,ACK -- bench ...` starts with its events disabled and
 * listens on the fifo CTL; with TB_PERF_CTL=CTL,ACK in its environment bench writes "enable\n" there
 * when the timed steps of a throughput measurement (or of an untrained scaling point) start and
 * "disable\n" when they end, once per --repeat, and after each waits (at most 10 s) for perf's "ack\n"
 * on ACK (without ",ACK" it does not wait). Data generation, model set-up, weight initialisation and
 * the row writing stay out of the samples. tools/profile.sh sets it all up. Without TB_PERF_CTL both
 * calls do nothing; when the fifo has no reader (perf is not listening), or a path is not a FIFO at all
 * (a regular file or a device is never opened for writing: it would be written over), the first call
 * warns once on stderr and later ones do nothing (an ack path that is not a FIFO: no waiting for acks). Threading: main thread only (the fifos are opened once and kept).
 */
#ifndef TB_PERFCTL_H
#define TB_PERFCTL_H

/* Environment variable naming perf's control fifo and, after a comma, its ack fifo. */
#define PERFCTL_ENV "TB_PERF_CTL"

/* Tells perf to start counting: "enable" on the control fifo, then waits for its ack. */
void perfctl_enable(void);
/* Tells perf to stop counting: "disable" on the control fifo, then waits for its ack. */
void perfctl_disable(void);

#endif
