/* report_rows.h — what `bench report` and `bench compare` share about result rows: an index of
 * configuration keys, and the range checks that read a row's numbers without undefined behaviour.
 *
 * The index (a string → id hash table) lets both match rows to configurations in time linear in the
 * rows: a results file that collects thousands of configurations made their old linear searches
 * quadratic. The range checks exist because rows are text a person may edit: a batch of 1e30 cast to int
 * is undefined, and an images/s of 1e308, −5 or an accuracy of 5.0 is no measurement.
 * Threading: none; an index belongs to its caller, the checks are pure functions.
 */
#ifndef TB_REPORT_ROWS_H
#define TB_REPORT_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* No figure of a run reaches this in its unit (images/s, seconds, MiB, GFLOP/s, FLOP/byte): such a value
 * was written by hand or by a bug, and printed with %.0f it is a number hundreds of digits long. */
#define REPORT_FIGURE_MAX 1e15

/* Distinct keys, each with the id it was added under (0, 1, ... in order of addition). */
struct report_index {
    struct report_index_slot *slots; /* (cap) open addressing; key NULL: empty */
    size_t cap;                      /* a power of two, 0 before the first key */
    int n;                           /* keys held */
};

struct report_index_slot {
    uint64_t hash;
    char *key; /* owned copy */
    int id;
};

/* An empty index (no allocation until the first key). */
void report_index_init(struct report_index *ix);
/* The id of key, or -1 when the index does not hold it. */
int report_index_find(const struct report_index *ix, const char *key);
/* The id of key in *id, adding it (id ix->n before the call) when new; *added (may be NULL) says which.
 * Returns TB_OK or TB_ENOMEM (the index is unchanged then). */
int report_index_add(struct report_index *ix, const char *key, int *id, int *added);
/* Frees the keys and the table; ix is empty (and usable) after. */
void report_index_free(struct report_index *ix);
/* The index's hash of key (FNV-1a, 64 bits): the same text gives the same value in every run and build. */
uint64_t report_key_hash(const char *key);

/* (int)v when v is finite and within [lo, hi] (truncated toward zero, as the cast would), else fallback:
 * a double outside int's range cast to int is undefined behaviour. */
int report_int(double v, int lo, int hi, int fallback);
/* v when it is a value the figure named field (the last part of its path: "images_per_s", "tta_s",
 * "accuracy") can take, else NAN: rates and times above 0, counts, sizes and spreads at least 0, accuracies
 * in [0, 1], and every figure below REPORT_FIGURE_MAX in magnitude. A figure outside its range is shown
 * as the empty-cell mark and drawn nowhere, as a missing or non-finite one is. */
double report_figure(const char *field, double v);
/* Whether report_figure knows a range for field (beyond the magnitude every figure stays under). */
int report_figure_known(const char *field);

struct json_value;
/* Writes into row's config the values its run had where the row records an option as not given, so that a row of
 * the default and one of the same value typed out are one configuration: the threads backend's threads (0: the
 * cores the process could use, machine.usable_cores, else machine.n_cores in rows from before it), the ipu's
 * schedule ("": 1f1b) and prefetch (0: the backend's default, 3 on the ipu and 1 elsewhere; -1: 0 given). Returns 1
 * for a threads-backend row of the default --threads (its cores written in where the row says them), else 0. */
int report_row_effective(struct json_value *row);

#endif
