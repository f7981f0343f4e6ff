/* layer_profile.h — turns a backend's per-layer times into the per-layer-type breakdown users read:
 * share of step time, achieved GFLOP/s, and the share of the machine's sgemm peak, per op type.
 * Reads figures, computes nothing about the model it does not already state (layer FLOPs). */
#ifndef TB_LAYER_PROFILE_H
#define TB_LAYER_PROFILE_H

#include "json.h"
#include "model.h"

#include <stdio.h>

struct layer_type_row {
    const char *op;     /* model_op_name */
    int layers;
    double seconds;     /* forward + backward, summed over steps */
    double gflop;       /* training FLOPs of those layers over the steps */
    double busy;        /* a thread's mean work in those layers (seconds); < 0: not measured */
};

/* Aggregates prof (n_layers, 2) over `samples` training samples into rows by op type (at most OP_COUNT),
 * with busy (n_layers, 2: work seconds summed over `threads` threads; NULL: not measured); returns the
 * number of rows, sorted by time, largest first. */
int layer_profile_by_type(const struct model *m, const double *prof, const double *busy, int threads,
                          double samples, struct layer_type_row *rows);
/* Prints the breakdown with each type's share of peak_gflops (a column headed "of " peak_name; omitted when
 * peak_gflops <= 0), and the idle column where rows carry work times. */
void layer_profile_print(const struct layer_type_row *rows, int n, double peak_gflops, const char *peak_name, FILE *f);
/* Writes "layer_types": [{op, layers, seconds, share, gflops_per_s[, idle_share]}] into the object open in b. */
void layer_profile_write_json(const struct layer_type_row *rows, int n, struct json_buf *b);

#endif
