/* progress.c — the one-line stderr progress display (see progress.h). */
#include "progress.h"

#include "clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PROGRESS_PERIOD_S 0.125 /* at most ~8 redraws a second */
#define PROGRESS_PLAIN_PERIOD_S 5.0 /* a plain line every few seconds: a log shows life, not a flood */

/* -1 automatic, 0 forced off, 1 forced on (redrawn line), 2 forced plain lines. Set by tests before
 * progress_init; not for threads. */
static int progress_override = -1;

void progress_force(int on)
{
    progress_override = on < 0 ? -1 : on > 2 ? 1 : on;
}

/* A terminal gets the redrawn line; anything else (a pipe, a log file, CI) plain lines every few seconds,
 * so a long run piped to tee or a file still shows it is alive. */
static int progress_auto_mode(void)
{
    if (!isatty(STDERR_FILENO))
        return PROGRESS_PLAIN;
    if (getenv("CI"))
        return PROGRESS_PLAIN;
    const char *term = getenv("TERM");
    if (term && strcmp(term, "dumb") == 0)
        return PROGRESS_PLAIN;
    return PROGRESS_TTY;
}

void progress_init(struct progress *p, long total_steps, const char *label)
{
    memset(p, 0, sizeof *p);
    p->enabled = progress_override >= 0 ? progress_override : progress_auto_mode();
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total_steps = total_steps;
    p->check_every = 1;
    p->t_start = tb_now_s();
    p->t_last_check = p->t_start;
}

void progress_silence(struct progress *p) { p->enabled = 0; }

/* "12,345" — thousands separators make throughput readable at a glance. */
static void format_grouped(double v, char *out, size_t size)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

static void format_duration(double s, char *out, size_t size)
{
    if (!isfinite(s) || s < 0 || s > 99.0 * 3600.0) {
        snprintf(out, size, "--:--");
        return;
    }
    long t = lround(s);
    if (t >= 3600)
        snprintf(out, size, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else
        snprintf(out, size, "%ld:%02ld", t / 60, t % 60);
}

/* The width of the terminal stderr draws on: its window size, else $COLUMNS; 0 when neither says (no cut). Read at
 * each redraw (at most ~8 a second), so a resized window is followed. */
static int progress_columns(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    char *end;
    const long v = c ? strtol(c, &end, 10) : 0;
    return c && end != c && *end == '\0' && v > 0 && v <= 10000 ? (int)v : 0;
}

static void progress_draw(struct progress *p, long step, double loss, double images_per_s, double now)
{
    char body[200], line[256], num[32], eta[32];
    const int plain = p->enabled == PROGRESS_PLAIN;
    int n = snprintf(body, sizeof body, "step %ld", step);
    if (p->total_steps > 0)
        n += snprintf(body + n, sizeof body - (size_t)n, "/%ld", p->total_steps);
    if (!p->no_loss) n += snprintf(body + n, sizeof body - (size_t)n, "  loss %.4f", loss);
    if (images_per_s > 0 && isfinite(images_per_s) && images_per_s < 1e15) {
        format_grouped(images_per_s, num, sizeof num);
        n += snprintf(body + n, sizeof body - (size_t)n, "  %s img/s", num);
    }
    if (p->total_steps > 0) {
        double done = (double)(step - p->step_start), elapsed = now - p->t_start;
        double eta_s = done > 0 ? (double)(p->total_steps - step) * elapsed / done : NAN;
        format_duration(eta_s, eta, sizeof eta);
        n += snprintf(body + n, sizeof body - (size_t)n, "  ETA %s", eta);
    }
    if (plain) {
        fprintf(stderr, "%s %s\n", p->label, body); /* one call: stderr is unbuffered, a line is one write */
        p->t_last_draw = now;
        return;
    }
    /* A redrawn line wider than the terminal wraps, and '\r' returns to the start of its last row only: every
     * redraw left the rows above behind (a 20-column terminal filled with them). It is cut to the width less one
     * (a character in the last column wraps on some terminals), the label given up first. */
    const int cols = progress_columns();
    const size_t label_len = strlen(p->label);
    const int with_label = cols <= 0 || label_len + 1 + strlen(body) < (size_t)cols;
    n = snprintf(line, sizeof line, "\r%s%s%s", with_label ? p->label : "", with_label ? " " : "", body);
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    if (cols > 0 && n - 1 > cols - 1) {
        n = cols; /* '\r' and cols - 1 characters: the body is ASCII */
        line[n] = '\0';
    }
    int visible = n - 1; /* without the '\r' */
    /* Blank what a longer previous line left behind (within the width: a window made narrower rewraps anyway). */
    int pad = p->last_len - visible;
    while (pad-- > 0 && n + 1 < (int)sizeof line && (cols <= 0 || n < cols))
        line[n++] = ' ';
    line[n] = '\0';
    fputs(line, stderr); /* stderr is unbuffered: one call, one write, no flicker */
    p->last_len = visible;
    p->t_last_draw = now;
}

void progress_update(struct progress *p, long step, double loss, double images_per_s)
{
    if (!p->enabled)
        return;
    if (!p->has_start) {
        /* ETA from the first step seen, so a resumed run does not count steps done before. */
        p->has_start = 1;
        p->step_start = step;
        p->t_start = tb_now_s();
    }
    int last_step = p->total_steps > 0 && step >= p->total_steps;
    if (++p->n_calls < p->check_every && !last_step)
        return;
    p->n_calls = 0;
    double now = tb_now_s();
    double dt = now - p->t_last_check;
    p->t_last_check = now;
    /* Aim for a few clock reads per redraw period: fast steps read the clock rarely, slow ones
     * on every call. */
    if (dt < PROGRESS_PERIOD_S / 8 && p->check_every < (1L << 20))
        p->check_every *= 2;
    else if (dt > PROGRESS_PERIOD_S / 2 && p->check_every > 1)
        p->check_every /= 2;
    if (p->enabled == PROGRESS_PLAIN) {
        /* Plain lines: the first after the first step, then every few seconds; not the last step (the
         * summary follows it). */
        if (last_step || (p->t_last_draw > 0 && now - p->t_last_draw < PROGRESS_PLAIN_PERIOD_S))
            return;
    } else if (p->t_last_draw > 0 && now - p->t_last_draw < PROGRESS_PERIOD_S && !last_step) {
        return;
    }
    progress_draw(p, step, loss, images_per_s, now);
}

void progress_note(const struct progress *p, const char *msg)
{
    if (p->enabled) fprintf(stderr, "%s%s: %s\n", p->enabled == PROGRESS_TTY ? "\r" : "", p->label, msg);
}

void progress_finish(struct progress *p)
{
    if (p->enabled != PROGRESS_TTY || p->last_len == 0)
        return;
    char blank[256];
    int n = p->last_len < (int)sizeof blank - 3 ? p->last_len : (int)sizeof blank - 3;
    blank[0] = '\r';
    memset(blank + 1, ' ', (size_t)n);
    blank[n + 1] = '\r';
    blank[n + 2] = '\0';
    fputs(blank, stderr);
    p->last_len = 0;
}
