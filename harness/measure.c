/* measure.c — step statistics, latency, time-to-accuracy tracking, peak memory (see measure.h). */
#define _GNU_SOURCE
#include "measure.h"

#include "model.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int measure_throughput(const double *step_times, long n, long warmup, int batch, struct measure_throughput *out)
{
    memset(out, 0, sizeof *out);
    if (warmup < 0) warmup = 0;
    const long timed = n - warmup;
    if (!step_times || timed < 1 || batch < 1)
        return tb_error_set(TB_EINVAL, "measure_throughput: %ld steps after %ld warm-up steps, batch %d: nothing to time",
                            n, warmup, batch);
    if (timed > (1L << 30)) return tb_error_set(TB_EINVAL, "measure_throughput: too many steps (%ld)", timed);
    double *rate = malloc((size_t)timed * sizeof *rate);
    if (!rate) return tb_error_set(TB_ENOMEM, "measure_throughput: out of memory for %ld steps", timed);
    const double *t = step_times + warmup;
    double sum = 0.0;
    for (long i = 0; i < timed; i++) {
        if (!(t[i] > 0.0) || !isfinite(t[i])) {
            free(rate);
            return tb_error_set(TB_EINVAL, "measure_throughput: step %ld took %g s", warmup + i + 1, t[i]);
        }
        sum += t[i];
        rate[i] = (double)batch / t[i];
    }
    int st = stats_summarize(rate, (int)timed, &out->rate);
    if (st == TB_OK) st = stats_summarize(t, (int)timed, &out->step);
    if (st == TB_OK) {
        out->step_p90_s = stats_percentile(t, (int)timed, 90.0);
        out->step_p99_s = stats_percentile(t, (int)timed, 99.0);
        out->n_steps = timed;
        out->time_s = sum;
        out->images_per_s = (double)timed * batch / sum;
    }
    free(rate);
    return st;
}

int measure_latency(const double *latencies, int n, struct measure_latency *out)
{
    memset(out, 0, sizeof *out);
    struct stats_summary s;
    int st = stats_summarize(latencies, n, &s);
    if (st != TB_OK) return st;
    out->n = n;
    out->p50_s = stats_percentile(latencies, n, 50.0);
    out->p90_s = stats_percentile(latencies, n, 90.0);
    out->p99_s = stats_percentile(latencies, n, 99.0);
    out->mean_s = s.mean, out->min_s = s.min, out->max_s = s.max;
    return TB_OK;
}

int tta_tracker_init(struct tta_tracker *t, double target)
{
    memset(t, 0, sizeof *t);
    t->reached_at = -1;
    t->best = NAN;
    if (!(target > 0.0 && target <= 1.0))
        return tb_error_set(TB_EINVAL, "time-to-accuracy target must be in (0, 1], got %g", target);
    t->target = target;
    return TB_OK;
}

int tta_tracker_add(struct tta_tracker *t, const struct tta_point *p)
{
    if (t->n_points == t->cap_points) {
        int cap = t->cap_points ? 2 * t->cap_points : 16;
        struct tta_point *np = realloc(t->points, (size_t)cap * sizeof *np);
        if (!np) return tb_error_set(TB_ENOMEM, "tta: out of memory for the accuracy curve");
        t->points = np, t->cap_points = cap;
    }
    t->points[t->n_points++] = *p;
    if (isnan(t->best) || p->accuracy > t->best) t->best = p->accuracy;
    /* ≥ as MLPerf compares: reaching the target exactly counts. A NaN accuracy never does. */
    if (!t->reached && p->accuracy >= t->target) {
        t->reached = 1;
        t->reached_at = t->n_points - 1;
    }
    return t->reached;
}

void tta_tracker_free(struct tta_tracker *t)
{
    free(t->points);
    memset(t, 0, sizeof *t);
    t->reached_at = -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tta_olympic_mean(const double *tta_s, const int *reached, int n)
{
    if (n < 1) return NAN;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) return NAN;
    for (int i = 0; i < n; i++) v[i] = reached[i] ? tta_s[i] : INFINITY;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int lo = 0, hi = n;
    if (n >= 3) lo = 1, hi = n - 1;
    double sum = 0.0;
    for (int i = lo; i < hi; i++) sum += v[i];
    free(v);
    return isfinite(sum) ? sum / (double)(hi - lo) : NAN;
}

int measure_peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok;
}

double measure_peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            long kb;
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) {
                fclose(f);
                return (double)kb / 1024.0;
            }
        }
        fclose(f);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) return (double)ru.ru_maxrss / 1024.0;
    return NAN;
}

double measure_train_bytes_per_step(const struct model *m, int batch, int opt_state_per_param, int act_bytes,
                                    int param_bytes)
{
    /* params: read forward, read backward-data, read + write in the update (4); grads: written by
     * backward, read by the update (2), each at param_bytes; optimizer state: read + written (2 per copy), fp32. */
    const double param_bytes_all = (double)m->n_params * (6.0 * param_bytes + 4.0 * 2.0 * opt_state_per_param);
    /* activations: written forward, read backward; their gradients: written, read (4 elements). */
    const double act_bytes_all = 4.0 * act_bytes * (double)m->unit_floats * batch;
    const double input_bytes = (double)m->in_h * m->in_w * m->in_c * batch;
    return param_bytes_all + act_bytes_all + input_bytes;
}

double measure_infer_bytes_per_step(const struct model *m, int batch, int act_bytes, int param_bytes)
{
    /* params read once per batch; activations written once and read once. */
    return (double)param_bytes * m->n_params + 2.0 * act_bytes * (double)m->unit_floats * batch +
           (double)m->in_h * m->in_w * m->in_c * batch;
}
