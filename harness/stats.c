/* stats.c — summaries and the Mann–Whitney U test on GSL (see stats.h). */
#include "stats.h"

#include "status.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Returns a sorted malloc'd copy of x[0..n), or NULL on allocation failure. */
static double *sorted_copy(const double *x, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, x, (size_t)n * sizeof *s);
    gsl_sort(s, 1, (size_t)n);
    return s;
}

static int all_finite(const double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

int stats_summarize(const double *x, int n, struct stats_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!x || n < 1)
        return tb_error_set(TB_EINVAL, "stats_summarize: need at least one sample (n = %d)", n);
    if (!all_finite(x, n))
        return tb_error_set(TB_EINVAL, "stats_summarize: a sample is NaN or Inf");
    double *s = sorted_copy(x, n);
    if (!s)
        return tb_error_set(TB_ENOMEM, "stats_summarize: out of memory for %d samples", n);
    size_t un = (size_t)n;
    out->n = n;
    out->mean = gsl_stats_mean(s, 1, un);
    out->median = gsl_stats_median_from_sorted_data(s, 1, un);
    out->stddev = n > 1 ? gsl_stats_sd_m(s, 1, un, out->mean) : 0.0;
    out->stderr_ = out->stddev / sqrt((double)n);
    out->min = s[0];
    out->max = s[n - 1];
    /* MAD: median of absolute deviations from the median; 1.4826 = 1/Φ⁻¹(3/4) makes it estimate σ
     * for normal data while a few slow outliers (a noisy neighbour) barely move it. */
    for (int i = 0; i < n; i++)
        s[i] = fabs(s[i] - out->median);
    gsl_sort(s, 1, un);
    out->mad_jitter = 1.4826 * gsl_stats_median_from_sorted_data(s, 1, un);
    free(s);
    return TB_OK;
}

double stats_olympic_mean(const double *x, int n)
{
    if (!x || n < 1)
        return NAN;
    if (n < 3)
        return gsl_stats_mean(x, 1, (size_t)n);
    double sum = 0.0, lo = x[0], hi = x[0];
    for (int i = 0; i < n; i++) {
        sum += x[i];
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    return (sum - lo - hi) / (double)(n - 2);
}

double stats_ci95_halfwidth(const struct stats_summary *s)
{
    if (s->n < 2) return NAN;
    return gsl_cdf_tdist_Pinv(0.975, (double)(s->n - 1)) * s->stderr_;
}

double stats_percentile(const double *x, int n, double p)
{
    if (!x || n < 1 || isnan(p))
        return NAN;
    double *s = sorted_copy(x, n);
    if (!s)
        return NAN;
    double f = p < 0.0 ? 0.0 : p > 100.0 ? 1.0 : p / 100.0;
    double q = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, f);
    free(s);
    return q;
}

/* P(U ≤ u_max) under H0 for sample sizes (na, nb) without ties, by the recurrence on who owns the
 * largest of the na+nb values:  P(i,j,u) = i/(i+j)·P(i−1,j,u−j) + j/(i+j)·P(i,j−1,u).
 * Probabilities rather than counts, so nothing overflows at 50 + 50 (C(100,50) ≈ 1e29).
 * Returns NAN on allocation failure. */
static double mwu_exact_cdf(int na, int nb, int u_max)
{
    int umax_all = na * nb;
    size_t stride = (size_t)umax_all + 1;
    /* prev/cur hold layer i (and i−1) for every j: [j][u]. */
    double *prev = calloc((size_t)(nb + 1) * stride, sizeof *prev);
    double *cur = calloc((size_t)(nb + 1) * stride, sizeof *cur);
    if (!prev || !cur) {
        free(prev);
        free(cur);
        return NAN;
    }
    for (int j = 0; j <= nb; j++)
        prev[(size_t)j * stride] = 1.0; /* i = 0: U = 0 surely */
    for (int i = 1; i <= na; i++) {
        cur[0] = 1.0; /* j = 0: U = 0 surely */
        for (int j = 1; j <= nb; j++) {
            double *c = cur + (size_t)j * stride;
            const double *left = prev + (size_t)j * stride; /* (i−1, j) */
            const double *down = cur + (size_t)(j - 1) * stride; /* (i, j−1) */
            double wa = (double)i / (i + j), wb = (double)j / (i + j);
            for (int u = 0; u <= i * j; u++) {
                double v = 0.0;
                if (u >= j && u - j <= (i - 1) * j)
                    v += wa * left[u - j];
                if (u <= i * (j - 1))
                    v += wb * down[u];
                c[u] = v;
            }
        }
        double *t = prev;
        prev = cur;
        cur = t;
    }
    const double *dist = prev + (size_t)nb * stride;
    double cdf = 0.0;
    for (int u = 0; u <= u_max && u <= umax_all; u++)
        cdf += dist[u];
    free(prev);
    free(cur);
    return cdf;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int stats_mann_whitney_u(const double *a, int na, const double *b, int nb, double *u, double *p)
{
    if (!a || !b || na < 1 || nb < 1)
        return tb_error_set(TB_EINVAL, "stats_mann_whitney_u: both samples need values (na = %d, nb = %d)",
                            na, nb);
    if (!all_finite(a, na) || !all_finite(b, nb))
        return tb_error_set(TB_EINVAL, "stats_mann_whitney_u: a sample is NaN or Inf");
    int n = na + nb;
    /* Merge with labels: value, then 1 for sample a, sorted by value. */
    double (*m)[2] = malloc((size_t)n * sizeof *m);
    if (!m)
        return tb_error_set(TB_ENOMEM, "stats_mann_whitney_u: out of memory");
    for (int i = 0; i < na; i++) {
        m[i][0] = a[i];
        m[i][1] = 1.0;
    }
    for (int j = 0; j < nb; j++) {
        m[na + j][0] = b[j];
        m[na + j][1] = 0.0;
    }
    qsort(m, (size_t)n, sizeof *m, cmp_double);

    /* Rank sum of a with mid-ranks for ties, and the tie correction Σ(t³ − t). */
    double r1 = 0.0, tie_sum = 0.0;
    int n_groups = 0;
    for (int i = 0; i < n;) {
        int k = i, from_a = 0;
        while (k < n && m[k][0] == m[i][0]) {
            from_a += m[k][1] != 0.0;
            k++;
        }
        double t = (double)(k - i);
        r1 += from_a * ((double)(i + 1) + (double)k) / 2.0; /* mid-rank of ranks i+1..k */
        tie_sum += t * t * t - t;
        n_groups++;
        i = k;
    }
    free(m);
    double u1 = r1 - (double)na * (na + 1) / 2.0;
    double u2 = (double)na * nb - u1;
    *u = u1;

    if (n_groups == 1) {
        *p = 1.0; /* every value equal: no evidence of any difference */
        return TB_OK;
    }
    if (tie_sum == 0.0 && na <= STATS_MWU_EXACT_LIMIT && nb <= STATS_MWU_EXACT_LIMIT) {
        if (u1 == u2) {
            /* The median of a symmetric discrete distribution: doubling CDF would count the
             * mass at the centre twice. */
            *p = 1.0;
            return TB_OK;
        }
        double cdf = mwu_exact_cdf(na, nb, (int)fmin(u1, u2));
        if (isnan(cdf))
            return tb_error_set(TB_ENOMEM, "stats_mann_whitney_u: out of memory for the exact table");
        *p = fmin(1.0, 2.0 * cdf);
        return TB_OK;
    }
    double N = (double)n;
    double mu = (double)na * nb / 2.0;
    double sigma = sqrt((double)na * nb * ((N + 1.0) - tie_sum / (N * (N - 1.0))) / 12.0);
    if (!(sigma > 0.0)) {
        *p = 1.0;
        return TB_OK;
    }
    double d = u1 - mu;
    d -= d > 0 ? 0.5 : d < 0 ? -0.5 : 0.0; /* continuity correction towards the centre */
    *p = fmin(1.0, 2.0 * gsl_cdf_ugaussian_Q(fabs(d) / sigma));
    return TB_OK;
}
