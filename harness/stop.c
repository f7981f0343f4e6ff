/* stop.c — stopping on a signal (see run.h). The first SIGINT/SIGTERM is remembered and the run stops
 * after its current step; the flag stays set (the process is on its way out: a suite's later runs stop
 * before their first step). A second signal restores the default action and re-raises it: kill now, no
 * checkpoint. The step loops read the flag through bench_stop_signal().
 */
#include "run.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;
/* Under MPI, a stop another rank was sent, which this rank agreed to (bench_stop_agree): kept apart from
 * stop_signal, so that this rank's own first signal (a launcher signalling every rank, ms apart) is its first, not
 * a second that kills it before its checkpoint and row. */
static volatile sig_atomic_t agreed_signal;

void bench_request_stop(int signo)
{
    if (stop_signal) {
        signal(signo, SIG_DFL);
        raise(signo);
        return;
    }
    stop_signal = signo;
    static const char msg[] = "\nbench: stopping after the current step (signal again to quit at once)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

int bench_stop_signal(void)
{
    return stop_signal ? (int)stop_signal : (int)agreed_signal;
}

int bench_stop_agreed(void) { return agreed_signal != 0; }

void bench_stop_agree(int signo)
{
    if (!agreed_signal) agreed_signal = signo;
}

const char *bench_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

void bench_stop_handlers_install(struct bench_stop_handlers *h)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    memset(h, 0, sizeof *h);
    sa.sa_handler = bench_request_stop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
        h->have_int = sigaction(SIGINT, &sa, &h->old_int) == 0;
    if (sigaction(SIGTERM, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
        h->have_term = sigaction(SIGTERM, &sa, &h->old_term) == 0;
}

void bench_stop_handlers_restore(const struct bench_stop_handlers *h)
{
    if (h->have_int) sigaction(SIGINT, &h->old_int, NULL);
    if (h->have_term) sigaction(SIGTERM, &h->old_term, NULL);
}
