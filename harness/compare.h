/* compare.h — `bench compare OLD.jsonl NEW.jsonl`: benchstat for result rows.
 *
 * Rows are matched by configuration (plan, workload, backend, batch and every option that changes what
 * is measured; not the seed, the run id or the machine); rows whose "status" is not "ok" (diverged,
 * interrupted runs) are never matched, only counted on stderr. Per configuration it takes the samples of
 * each side — the per-repeat images/s of throughput, scaling and inference rows (or a row's single
 * figure), the time to accuracy of every run that reached its target for tta rows; rows of the same
 * configuration in one file pool their samples — and reports both medians, the change in percent and
 * a two-sided Mann–Whitney U test (stats.h): the change is printed when p < alpha (0.05), "~" when
 * not, as Go's benchstat does. With one sample a side no change can be significant: run --repeat 5.
 * It reads files; it never reruns anything. Threading: none.
 */
#ifndef TB_COMPARE_H
#define TB_COMPARE_H

#include <stdio.h>

struct compare_line {
    char name[200];          /* "throughput mnist-mlp cpu b32" */
    char metric[24];         /* "images/s" or "tta s" */
    int higher_is_better;
    int n_old, n_new;        /* samples each side (0: the configuration is missing there) */
    double old_median, new_median;
    double old_jitter, new_jitter; /* 1.4826·MAD, 0 for one sample */
    double delta_pct;        /* (new − old) / old · 100 */
    double p;                /* Mann–Whitney two-sided p (1 when either side has no spread to test) */
    int significant;         /* p < alpha */
};

/* Matches the rows of two results files. *lines (malloc'd, free with free()) receives one line per
 * configuration seen in either file, in order of first appearance. Returns TB_OK, TB_EIO or TB_ENOMEM. */
int compare_results(const char *old_path, const char *new_path, double alpha, struct compare_line **lines, int *n_lines);
/* Prints the table, the configurations found on one side only, and the geometric mean of the
 * new/old ratios over matched lines. */
void compare_print(const struct compare_line *lines, int n, double alpha, const char *old_name, const char *new_name,
                   FILE *f);

#endif
