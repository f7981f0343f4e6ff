/* compare.h — `bench compare OLD.jsonl NEW.jsonl`: benchstat for result rows.
 *
 * Rows are matched by configuration (plan, workload, backend, batch and every option that changes what
 * is measured, the model's classes and the data's CRC included, a row without the CRC matching only rows
 * without it; not the seed, the run id, the machine, nor how many repeats or seeds a row holds); --ignore
 * KEY[,KEY] leaves keys out of the match (--ignore backend compares cpu rows with threads rows
 * configuration by configuration, and each line says what the ignored keys were on each side). Rows whose
 * "status" is not "ok" (diverged, interrupted runs) are never matched, only counted on stderr. Per
 * configuration it takes the samples of each side — the per-repeat images/s of throughput, scaling and
 * inference rows (or a row's single figure), every seed's time to accuracy for tta rows, a seed that
 * missed its target counting as +inf (infinitely slow, as the tta plan's olympic mean counts it: a median
 * that is one prints "no score", and each line says how many seeds missed); rows of the same configuration
 * in one file pool their samples; a sample that is not a finite positive number below 1e15
 * (REPORT_FIGURE_MAX) is skipped and counted on stderr, and a configuration left without samples on a side
 * is listed as such — and reports both medians with the 95 % confidence interval of each median
 * (distribution-free, from order statistics, as benchstat's ±; it needs 6 samples a side, fewer print
 * ± ∞), the change in percent and a two-sided Mann–Whitney U test (stats.h): the change is printed when
 * p < alpha (0.05), "~" when not, as Go's benchstat does. With n1 and n2 samples no p is below
 * 2/C(n1 + n2, n1) (1 a side: 1; 2+2: 0.333; 4+4: 0.029), and the table notes the counts for which that
 * floor is not below alpha. It reads files; it never reruns anything; time linear in the rows. Threading:
 * none.
 */
#ifndef TB_COMPARE_H
#define TB_COMPARE_H

#include <stdio.h>

/* Confidence level of the interval printed after ± (benchstat's default). */
#define COMPARE_CI_LEVEL 0.95

struct compare_opts {
    double alpha;        /* significance level of the U test; 0 means 0.05 */
    const char *ignore;  /* comma-separated match keys to leave out ("backend,devices"), or NULL */
};

struct compare_line {
    char name[200];          /* "throughput mnist-mlp cpu b32" (b- for a batch no int holds), with the words of the
                              * key that tell namesakes apart (" lr=0.1", the data's " data_crc32=..." only where
                              * nothing else does); with --ignore "... [backend cpu → threads]"; where
                              * the rows ran other convolution algorithms, "... [conv_algos differ]" */
    char metric[24];         /* "images/s" or "tta s" */
    int higher_is_better;
    int n_old, n_new;        /* samples each side: finite positive ones below 1e15, and tta seeds that missed */
    int missed_old, missed_new; /* of those, tta seeds that missed their target (+inf samples) */
    int rows_old, rows_new;  /* rows each side (0: the configuration is missing there) */
    double old_median, new_median; /* +inf where the middle sample is a missed seed */
    double old_lo, old_hi;   /* 95 % CI of the old median (−∞, +∞ with fewer than 6 samples; hi +∞ at a miss) */
    double new_lo, new_hi;   /* the same for the new median */
    double delta_pct;        /* (new − old) / old · 100; NaN when either median is +inf */
    double u;                /* Mann–Whitney U: pairs with old > new, plus half the ties (NaN untested) */
    double p;                /* Mann–Whitney two-sided p, at least compare_min_p (1 when nothing differs) */
    int significant;         /* p < alpha */
};

/* Matches the rows of two results files. *lines (malloc'd, free with free()) receives one line per
 * configuration seen in either file, in order of first appearance. o may be NULL (alpha 0.05, nothing
 * ignored). Returns TB_OK, TB_EIO, TB_EFORMAT (a file without one usable row: empty, every line
 * malformed or of an unfinished run), TB_ENOMEM or TB_EINVAL (an --ignore key rows are not matched by). */
int compare_results(const char *old_path, const char *new_path, const struct compare_opts *o,
                    struct compare_line **lines, int *n_lines);
/* Prints the table (medians ± 95 % CI, change or ~), the configurations found on one side only, and
 * the geometric mean of the new/old ratios over matched lines; o as for compare_results. */
void compare_print(const struct compare_line *lines, int n, const struct compare_opts *o, const char *old_name,
                   const char *new_name, FILE *f);
/* Distribution-free confidence interval of the median of x[0..n) at level (0, 1): the innermost
 * symmetric pair of order statistics that still covers it; *lo = −∞, *hi = +∞ when n is too small (n < 6 at
 * 0.95). Returns TB_OK, TB_EINVAL or TB_ENOMEM. */
int compare_median_ci(const double *x, int n, double level, double *lo, double *hi);
/* Smallest two-sided p the exact Mann–Whitney test can give with n1 and n2 samples: 2/C(n1 + n2, n1), at most 1. */
double compare_min_p(int n1, int n2);
/* `bench compare` with its arguments (argv[0] = "compare"): --alpha, --ignore, --help. Returns the exit
 * status: 0 done (also for --help), 1 a file unreadable or without a usable row, 2 usage error. */
int compare_main(int argc, char **argv);

#endif
