/* test_stats.c — summaries, percentiles and the Mann–Whitney U test against known values.
 *
 * Reference values: summaries and percentiles checked with numpy; the exact U p-values by full
 * enumeration (Python, and a brute-force enumerator below), two by hand (3 vs 3 samples), two
 * published in HypothesisTests.jl's test suite (0.0232, 0.0068); the tie-corrected normal
 * approximation against ClickHouse's mannWhitneyUTest test (U = 223, p = 0.5426959774289482).
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stats.h"
#include "status.h"

#define EPS 1e-12

static void assert_close(double got, double want, double tol, const char *what)
{
    cr_assert(fabs(got - want) <= tol, "%s: got %.17g, want %.17g (tol %g)", what, got, want, tol);
}

Test(stats, summary_known_values)
{
    const double x[] = {9, 4, 5, 4, 2, 7, 4, 5}; /* unsorted on purpose */
    struct stats_summary s;
    cr_assert_eq(stats_summarize(x, 8, &s), TB_OK);
    cr_assert_eq(s.n, 8);
    assert_close(s.mean, 5.0, EPS, "mean");
    assert_close(s.median, 4.5, EPS, "median");
    assert_close(s.stddev, 2.138089935299395, 1e-12, "stddev");
    assert_close(s.stderr_, 0.7559289460184544, 1e-12, "stderr");
    assert_close(s.mad_jitter, 1.4826 * 0.5, EPS, "mad");
    assert_close(s.min, 2.0, 0, "min");
    assert_close(s.max, 9.0, 0, "max");
    cr_assert_eq(x[0], 9.0, "input must not be modified");
}

Test(stats, summary_single_and_odd)
{
    struct stats_summary s;
    const double one[] = {3.5};
    cr_assert_eq(stats_summarize(one, 1, &s), TB_OK);
    assert_close(s.mean, 3.5, 0, "mean");
    assert_close(s.median, 3.5, 0, "median");
    assert_close(s.stddev, 0.0, 0, "stddev");
    assert_close(s.stderr_, 0.0, 0, "stderr");
    assert_close(s.mad_jitter, 0.0, 0, "mad");

    /* median of odd count; MAD = median(|x-3|) = median{2,1,0,1,97} = 1 */
    const double odd[] = {1, 2, 3, 4, 100};
    cr_assert_eq(stats_summarize(odd, 5, &s), TB_OK);
    assert_close(s.median, 3.0, 0, "median");
    assert_close(s.mad_jitter, 1.4826, EPS, "mad robust to the outlier");
}

Test(stats, summary_rejects_bad_input)
{
    struct stats_summary s;
    const double bad[] = {1.0, NAN, 2.0};
    cr_assert_eq(stats_summarize(bad, 0, &s), TB_EINVAL);
    cr_assert_eq(stats_summarize(bad, 3, &s), TB_EINVAL);
    cr_assert(strstr(tb_error_get(), "stats_summarize") != NULL);
    const double inf[] = {INFINITY};
    cr_assert_eq(stats_summarize(inf, 1, &s), TB_EINVAL);
}

Test(stats, olympic_mean)
{
    const double x[] = {9, 4, 5, 4, 2, 7, 4, 5};
    assert_close(stats_olympic_mean(x, 8), 29.0 / 6.0, EPS, "drops one 2 and one 9");
    const double two[] = {1, 4};
    assert_close(stats_olympic_mean(two, 2), 2.5, EPS, "plain mean for n=2");
    const double three[] = {10, 1, 5};
    assert_close(stats_olympic_mean(three, 3), 5.0, EPS, "middle value for n=3");
    const double ties[] = {3, 3, 3, 3};
    assert_close(stats_olympic_mean(ties, 4), 3.0, EPS, "drops only one of each tied extreme");
    cr_assert(isnan(stats_olympic_mean(x, 0)));
}

Test(stats, percentile_linear_interpolation)
{
    const double x[] = {5, 1, 4, 2, 3};
    assert_close(stats_percentile(x, 5, 50), 3.0, EPS, "p50");
    assert_close(stats_percentile(x, 5, 90), 4.6, EPS, "p90");
    assert_close(stats_percentile(x, 5, 99), 4.96, EPS, "p99");
    const double y[] = {3, 1, 10, 7};
    assert_close(stats_percentile(y, 4, 25), 2.5, EPS, "p25");
    assert_close(stats_percentile(y, 4, 75), 7.75, EPS, "p75");
    assert_close(stats_percentile(y, 4, 0), 1.0, EPS, "p0 = min");
    assert_close(stats_percentile(y, 4, 100), 10.0, EPS, "p100 = max");
    assert_close(stats_percentile(y, 4, 250), 10.0, EPS, "clamped");
    cr_assert(isnan(stats_percentile(y, 0, 50)));
}

Test(stats, mwu_exact_hand_checked)
{
    double u, p;
    /* Complete separation, 3 vs 3: P(U=0) = 1/C(6,3) = 1/20, two-sided 0.1. */
    const double a[] = {1, 2, 3}, b[] = {4, 5, 6};
    cr_assert_eq(stats_mann_whitney_u(a, 3, b, 3, &u, &p), TB_OK);
    assert_close(u, 0.0, 0, "U");
    assert_close(p, 0.1, EPS, "p");
    /* U = 1 (only 4 > 3): P(U<=1) = 2/20, two-sided 0.2. */
    const double c[] = {1, 2, 4}, d[] = {3, 5, 6};
    cr_assert_eq(stats_mann_whitney_u(c, 3, d, 3, &u, &p), TB_OK);
    assert_close(u, 1.0, 0, "U");
    assert_close(p, 0.2, EPS, "p");
    /* Swapping the samples mirrors U and keeps p. */
    cr_assert_eq(stats_mann_whitney_u(d, 3, c, 3, &u, &p), TB_OK);
    assert_close(u, 8.0, 0, "mirrored U");
    assert_close(p, 0.2, EPS, "p");
    /* 5 vs 4, U = 1: 2 of C(9,4) = 126 arrangements have U <= 1, p = 4/126. */
    const double e[] = {0.3, 1.7, 2.2, 5.1, 3.3}, f[] = {4.4, 6.0, 7.5, 5.9};
    cr_assert_eq(stats_mann_whitney_u(e, 5, f, 4, &u, &p), TB_OK);
    assert_close(u, 1.0, 0, "U");
    assert_close(p, 4.0 / 126.0, EPS, "p");
}

Test(stats, mwu_exact_published_values)
{
    double a[10], b[10], c[10], u, p;
    for (int i = 0; i < 10; i++) {
        a[i] = 1 + i;
        b[i] = 2.1 + 2 * i;
        c[i] = 1.5 + 10 * i;
    }
    cr_assert_eq(stats_mann_whitney_u(a, 10, b, 10, &u, &p), TB_OK);
    assert_close(u, 20.0, 0, "U");
    assert_close(p, 0.023230639329710537, 1e-12, "p (HypothesisTests.jl: 0.0232)");
    cr_assert_eq(stats_mann_whitney_u(c, 10, b, 10, &u, &p), TB_OK);
    assert_close(u, 85.0, 0, "U");
    assert_close(p, 0.006841455757864426, 1e-12, "p (HypothesisTests.jl: 0.0068)");
}

/* Two-sided exact p by enumerating every split of the pooled ranks (no ties): independent of the
 * dynamic programme in stats.c. */
static double brute_force_p(int na, int nb, double u_obs)
{
    int n = na + nb;
    double us = fmin(u_obs, (double)na * nb - u_obs);
    long total = 0, hit = 0;
    for (uint32_t mask = 0; mask < (1u << n); mask++) {
        if (__builtin_popcount(mask) != na)
            continue;
        long uu = 0; /* pairs (a in mask) > (b not in mask), ranks = bit positions */
        for (int i = 0; i < n; i++)
            if (mask >> i & 1)
                for (int j = 0; j < i; j++)
                    uu += !(mask >> j & 1);
        total++;
        hit += uu <= us;
    }
    double p = 2.0 * (double)hit / (double)total;
    return p > 1.0 ? 1.0 : p;
}

Test(stats, mwu_exact_matches_enumeration)
{
    const int sizes[][2] = {{4, 5}, {6, 3}, {7, 7}, {1, 6}, {2, 9}};
    uint64_t s = 12345;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int na = sizes[k][0], nb = sizes[k][1];
        double a[16], b[16], u, p;
        for (int trial = 0; trial < 5; trial++) {
            for (int i = 0; i < na + nb; i++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                double v = (double)(s >> 11) * 0x1p-53 + (i < na ? 0.3 * trial : 0.0);
                if (i < na)
                    a[i] = v;
                else
                    b[i - na] = v;
            }
            cr_assert_eq(stats_mann_whitney_u(a, na, b, nb, &u, &p), TB_OK);
            if (u == (double)na * nb / 2.0)
                continue; /* centre: p = 1 by definition */
            assert_close(p, brute_force_p(na, nb, u), 1e-12, "exact p vs enumeration");
        }
    }
}

Test(stats, mwu_ties_normal_approximation)
{
    /* ClickHouse tests/queries/0_stateless/01560_mann_whitney.sql: ties (111, 180, 261, 530) force
     * the tie-corrected normal approximation with continuity correction. */
    const double a[] = {310, 195, 530, 155, 530, 245, 385, 450, 465, 545,
                        170, 180, 125, 180, 230, 75,  430, 480, 495, 295};
    const double b[] = {116, 171, 176, 421, 111, 326, 481, 111, 346, 441,
                        261, 411, 206, 521, 456, 446, 296, 51,  426, 261};
    double u, p;
    cr_assert_eq(stats_mann_whitney_u(a, 20, b, 20, &u, &p), TB_OK);
    assert_close(u, 223.0, 0, "U");
    assert_close(p, 0.5426959774289482, 1e-12, "p");
}

/* Deterministic normal samples (LCG + Box–Muller), so these tests cannot flake. */
static void normal_sample(double *x, int n, double shift, uint64_t seed)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u1 = ((double)(s >> 11) + 1.0) * 0x1p-53;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u2 = (double)(s >> 11) * 0x1p-53;
        x[i] = shift + sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    }
}

Test(stats, mwu_detects_shift_and_not_noise)
{
    double a[80], b[80], u, p;
    const int sizes[] = {10, 30, 80}; /* exact, exact, normal approximation */
    for (int k = 0; k < 3; k++) {
        int n = sizes[k];
        normal_sample(a, n, 0.0, 1 + k);
        normal_sample(b, n, 1.5, 100 + k);
        cr_assert_eq(stats_mann_whitney_u(a, n, b, n, &u, &p), TB_OK);
        cr_assert_lt(p, 0.05, "n=%d: a shift of 1.5 sigma must be significant (p=%g)", n, p);
        cr_assert_lt(u, n * n / 2.0, "a is the smaller sample");
        normal_sample(b, n, 0.0, 200 + k);
        cr_assert_eq(stats_mann_whitney_u(a, n, b, n, &u, &p), TB_OK);
        cr_assert_gt(p, 0.05, "n=%d: same distribution must not be significant (p=%g)", n, p);
    }
}

Test(stats, mwu_degenerate_inputs)
{
    double u, p;
    const double same[] = {2, 2, 2}, same2[] = {2, 2};
    cr_assert_eq(stats_mann_whitney_u(same, 3, same2, 2, &u, &p), TB_OK);
    assert_close(p, 1.0, 0, "all equal");
    assert_close(u, 3.0, 0, "all pairs tied: U = na*nb/2");
    const double a[] = {1, 2, 3, 4}, b[] = {1, 2, 3, 4};
    cr_assert_eq(stats_mann_whitney_u(a, 4, b, 4, &u, &p), TB_OK);
    cr_assert_gt(p, 0.9);
    cr_assert_eq(stats_mann_whitney_u(a, 0, b, 4, &u, &p), TB_EINVAL);
    const double nan[] = {1, NAN};
    cr_assert_eq(stats_mann_whitney_u(a, 4, nan, 2, &u, &p), TB_EINVAL);
}

/* 1..5: s.e. = sqrt(2.5/5); t(0.975, 4) = 2.7764451 (tables); one value has no interval. */
Test(stats, ci95_halfwidth_student_t)
{
    const double x[] = {1, 2, 3, 4, 5};
    struct stats_summary s;
    cr_assert_eq(stats_summarize(x, 5, &s), TB_OK);
    cr_assert_float_eq(stats_ci95_halfwidth(&s), 2.7764451 * sqrt(0.5), 1e-6);
    cr_assert_eq(stats_summarize(x, 1, &s), TB_OK);
    cr_assert(isnan(stats_ci95_halfwidth(&s)));
}
