/* compare.h — `bench compare OLD.jsonl NEW.jsonl`: benchstat for result rows.
 *
 * Rows are matched by configuration (plan, workload, backend, batch and every option that changes what
 * is measured; not the seed, the run id or the machine); --ignore KEY[,KEY] leaves keys out of the
 * match (--ignore backend compares cpu rows with threads rows configuration by configuration, and each
 * line says what the ignored keys were on each side). Rows whose "status" is not "ok" (diverged,
 * interrupted runs) are never matched, only counted on stderr. Per configuration it takes the samples
 * of each side — the per-repeat images/s of throughput, scaling and inference rows (or a row's single
 * figure), the time to accuracy of every run that reached its target for tta rows; rows of the same
 * configuration in one file pool their samples; a sample that is not a finite positive number is skipped
 * and counted on stderr, and a configuration left without samples on a side is listed as such — and reports both medians with the 95 % confidence
 * interval of each median (distribution-free, from order statistics, as benchstat's ±; it needs 6
 * samples a side, fewer print ± ∞), the change in percent and a two-sided Mann–Whitney U test
 * (stats.h): the change is printed when p < alpha (0.05), "~" when not, as Go's benchstat does. With
 * one sample a side no change can be significant: run --repeat 5. It reads files; it never reruns
 * anything. Threading: none.
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
    char name[200];          /* "throughput mnist-mlp cpu b32"; with --ignore "... [backend cpu → threads]"; where
                              * the rows ran other convolution algorithms, "... [conv_algos differ]" */
    char metric[24];         /* "images/s" or "tta s" */
    int higher_is_better;
    int n_old, n_new;        /* finite positive samples each side */
    int rows_old, rows_new;  /* rows each side (0: the configuration is missing there) */
    double old_median, new_median;
    double old_lo, old_hi;   /* 95 % CI of the old median (−∞, +∞ with fewer than 6 samples) */
    double new_lo, new_hi;   /* the same for the new median */
    double delta_pct;        /* (new − old) / old · 100 */
    double p;                /* Mann–Whitney two-sided p (1 when either side has no spread to test) */
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
/* `bench compare` with its arguments (argv[0] = "compare"): --alpha, --ignore, --help. Returns the exit
 * status: 0 done (also for --help), 1 a file unreadable or without a usable row, 2 usage error. */
int compare_main(int argc, char **argv);

#endif
