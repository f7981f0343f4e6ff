/* layer_profile.c — per-op-type aggregation of per-layer times. */
#include "layer_profile.h"

#include "fmt_figure.h"

#include <stdlib.h>
#include <string.h>

static int by_time_desc(const void *a, const void *b)
{
    const struct layer_type_row *x = a, *y = b;
    return (x->seconds < y->seconds) - (x->seconds > y->seconds);
}

int layer_profile_by_type(const struct model *m, const double *prof, const double *busy, int threads,
                          double samples, struct layer_type_row *rows)
{
    struct layer_type_row acc[OP_COUNT];
    memset(acc, 0, sizeof acc);
    for (int k = 0; k < OP_COUNT; k++) acc[k].busy = busy && threads > 0 ? 0.0 : -1.0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct layer *l = &m->layers[i];
        struct layer_type_row *r = &acc[l->op];
        r->op = model_op_name(l->op);
        r->layers++;
        r->seconds += prof[2 * i] + prof[2 * i + 1];
        if (r->busy >= 0) r->busy += (busy[2 * i] + busy[2 * i + 1]) / threads;
        /* forward, backward-data where the input needs it, backward-params where there are weights */
        double f = l->flops * (1.0 + (m->tensors[l->in].needs_grad ? 1.0 : 0.0) + (l->n_w ? 1.0 : 0.0));
        r->gflop += f * samples * 1e-9;
    }
    int n = 0;
    for (int k = 0; k < OP_COUNT; k++)
        if (acc[k].layers) rows[n++] = acc[k];
    qsort(rows, (size_t)n, sizeof *rows, by_time_desc);
    return n;
}

/* The share of a row's time a thread, on average, was not working in it (0 when it took no time). */
static double idle_share(const struct layer_type_row *r)
{
    return r->seconds > 0 ? 1.0 - r->busy / r->seconds : 0.0;
}

void layer_profile_print(const struct layer_type_row *rows, int n, double peak_gflops, const char *peak_name, FILE *f)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) total += rows[i].seconds;
    const int idle = n > 0 && rows[0].busy >= 0;
    fprintf(f, "  %-11s %6s %10s %7s %10s%s%s%s\n", "layer type", "layers", "time (s)", "share", "GFLOP/s",
            peak_gflops > 0 ? "  of " : "", peak_gflops > 0 ? peak_name : "", idle ? "   idle" : "");
    for (int i = 0; i < n; i++) {
        const double g = rows[i].seconds > 0 ? rows[i].gflop / rows[i].seconds : 0.0;
        char sec[32]; /* under a second with three digits: a 0.18 ms softmax printed 0.000 */
        fprintf(f, "  %-11s %6d %10s %6.1f%% %10.2f", rows[i].op, rows[i].layers, fmt_s(sec, sizeof sec, rows[i].seconds),
                total > 0 ? 100.0 * rows[i].seconds / total : 0.0, g);
        if (peak_gflops > 0) fprintf(f, "  %*.1f%%", (int)strlen(peak_name) + 2, 100.0 * g / peak_gflops);
        if (idle) fprintf(f, "  %5.0f%%", 100.0 * idle_share(&rows[i]));
        fprintf(f, "\n");
    }
    if (idle)
        fprintf(f, "  (idle: the share of those layers' time a thread, on average, did not work: waiting for the "
                   "others or for a layer run on one thread)\n");
}

void layer_profile_write_json(const struct layer_type_row *rows, int n, struct json_buf *b)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) total += rows[i].seconds;
    json_key_array(b, "layer_types");
    for (int i = 0; i < n; i++) {
        json_begin_object(b);
        json_key_str(b, "op", rows[i].op);
        json_key_int(b, "layers", rows[i].layers);
        json_key_double(b, "seconds", rows[i].seconds);
        json_key_double(b, "share", total > 0 ? rows[i].seconds / total : 0.0);
        json_key_double(b, "gflops_per_s", rows[i].seconds > 0 ? rows[i].gflop / rows[i].seconds : 0.0);
        if (rows[i].busy >= 0) json_key_double(b, "idle_share", idle_share(&rows[i]));
        json_end_object(b);
    }
    json_end_array(b);
}
