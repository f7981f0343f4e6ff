/* stats.h — summary statistics of repeated measurements and the Mann–Whitney U test.
 *
 * What the harness reports for N repetitions of a benchmark: mean, median, standard error,
 * standard deviation, a robust jitter (1.4826·MAD, which estimates σ for normal data but ignores
 * a few outliers from a noisy neighbour), min, max; the olympic mean; percentiles for latency;
 * and, for `bench compare`, a two-sided Mann–Whitney U test as Go's benchstat does it (exact
 * distribution for small samples without ties, normal approximation with tie and continuity
 * correction otherwise). Built on GSL; pure functions that never modify their inputs.
 * Threading: no shared state; allocations are temporary and freed before return.
 */
#ifndef TB_STATS_H
#define TB_STATS_H

/* Largest sample size (each side) for which the exact U distribution is used when there are no
 * ties; the dynamic programme costs O(na²·nb²), a few ms at 50. Same limit as benchstat. */
#define STATS_MWU_EXACT_LIMIT 50

struct stats_summary {
    int n;
    double mean;
    double median;
    double stderr_;    /* stddev / sqrt(n); 0 for n = 1 */
    double stddev;     /* sample standard deviation (n − 1); 0 for n = 1 */
    double mad_jitter; /* 1.4826 · median(|x − median|) */
    double min;
    double max;
};

/* Summarises x[0..n). Returns TB_OK, or TB_EINVAL if n < 1 or a value is NaN/Inf. */
int stats_summarize(const double *x, int n, struct stats_summary *out);

/* Mean after dropping one smallest and one largest value when n ≥ 3; plain mean otherwise; NaN
 * if n < 1. */
double stats_olympic_mean(const double *x, int n);

/* Half-width of the two-sided 95 % confidence interval of the mean from a summary (Student's t with
 * n − 1 degrees of freedom times the standard error); NaN for n < 2. */
double stats_ci95_halfwidth(const struct stats_summary *s);
/* The p-th percentile (p in [0,100], clamped) of x[0..n) by linear interpolation between order
 * statistics (R type 7, numpy's default); NaN if n < 1. */
double stats_percentile(const double *x, int n, double p);

/* Two-sided Mann–Whitney U test of a[0..na) against b[0..nb). *u = number of pairs with a > b
 * plus half the tied pairs (0..na·nb); *p = two-sided p-value (1 when all values are equal).
 * Returns TB_OK, or TB_EINVAL for an empty sample or a NaN/Inf value, or TB_ENOMEM. */
int stats_mann_whitney_u(const double *a, int na, const double *b, int nb, double *u, double *p);

#endif
