/* progress.h — a one-line progress display on stderr for interactive runs.
 *
 *   "\r<label> step 1234/100000  loss 0.4321  12,345 img/s  ETA 0:42"
 *
 * Redrawn in place only when stderr is a terminal, CI is unset and TERM is not "dumb", so logs and CI
 * output never fill with carriage returns; anywhere else it is a plain line every few seconds (the
 * first after the first step), so a piped run still shows it is alive; progress_force() overrides that
 * for tests. The redrawn line is cut to the terminal's width less one (its window size, else $COLUMNS), the label
 * given up first, so that it never wraps. When disabled each
 * call is a single branch; when enabled the monotonic clock is read only every `check_every`
 * calls (adapted so it is read a few times per redraw period) and the line is redrawn at most
 * ~8 times a second. It never measures anything that goes into results.
 * Threading: one struct per display, driven by one thread (the one running the training loop).
 */
#ifndef TB_PROGRESS_H
#define TB_PROGRESS_H

enum { PROGRESS_OFF, PROGRESS_TTY, PROGRESS_PLAIN };

struct progress {
    int enabled;        /* PROGRESS_OFF, PROGRESS_TTY (redrawn line) or PROGRESS_PLAIN (lines) */
    char label[48];
    long total_steps;   /* 0 or less: unknown, no ETA */
    long n_calls;       /* progress_update calls since the last clock read */
    long check_every;   /* read the clock every this many calls */
    double t_start;     /* seconds (CLOCK_MONOTONIC) at init */
    double t_last_check;
    double t_last_draw;
    long step_start;    /* first step seen, so the ETA ignores steps done before a resume */
    int has_start;
    int last_len;       /* characters drawn last time, to blank a shorter redraw */
    int no_loss;        /* the steps have no loss (inference): the line shows none, rather than "loss nan" */
};

/* Forces the display off (0), redrawn (1) or plain lines (2) regardless of the terminal, or back to
 * automatic (-1). */
void progress_force(int on);
/* Starts a display for total_steps steps; decides once whether it is enabled. */
void progress_init(struct progress *p, long total_steps, const char *label);
/* Turns a display off (--quiet: nothing on stderr but warnings and errors). */
void progress_silence(struct progress *p);
/* Reports that `step` steps are done; redraws at most ~8 times a second. images_per_s <= 0 or
 * NaN omits the rate; loss is not shown when p->no_loss (a NaN loss of a training step is). */
void progress_update(struct progress *p, long step, double loss, double images_per_s);
/* Writes one line "<label>: msg" on stderr when the display is enabled (what a long phase is doing). */
void progress_note(const struct progress *p, const char *msg);
/* Clears the line (if anything was drawn) so the next output starts clean; mid-run too, before a warning (the
 * next update draws the line again). */
void progress_finish(struct progress *p);

#endif
