/* projection.c — the analytical POD-scale model described in projection.h. */
#include "projection.h"

void proj_links_default(struct proj_links *l)
{
    /* Stated assumptions (override with --link-bw etc.): an IPU-Link-class exchange of 32 GB/s with
     * 5 µs per transfer between adjacent stages, and a scale-out all-reduce of 12.5 GB/s (100 Gb/s)
     * per device with 10 µs per ring step. */
    l->exchange_bw = 32e9;
    l->exchange_lat = 5e-6;
    l->allreduce_bw = 12.5e9;
    l->allreduce_lat = 10e-6;
    l->pod_devices = 0;
    l->scaleout_bw = 0.0;
    l->scaleout_lat = 0.0;
}

double proj_allreduce_s(const struct proj_links *l, double bytes, int R, int S)
{
    if (R <= 1) return 0.0;
    const int r = l->pod_devices >= S && S > 0 ? l->pod_devices / S : 0;
    if (r < 1 || R <= r || l->scaleout_bw <= 0.0)
        return 2.0 * (R - 1) / R * bytes / l->allreduce_bw + 2.0 * (R - 1) * l->allreduce_lat;
    const int P = (R + r - 1) / r;
    double t = 0.0;
    if (r > 1) t += 2.0 * (r - 1) / r * bytes / l->allreduce_bw + 2.0 * (r - 1) * l->allreduce_lat;
    t += 2.0 * (P - 1) / P * (bytes / r) / l->scaleout_bw + 2.0 * (P - 1) * l->scaleout_lat;
    return t;
}

void proj_project(const struct proj_measured *m, const struct proj_links *l, struct proj_row *r)
{
    const int S = m->stages, G = r->ga, R = r->replicas;
    double slowest = 0.0, busy = 0.0, ar = 0.0, up = 0.0;
    for (int s = 0; s < S; s++) {
        const double x = s > 0 ? m->exchange_bytes[s] / l->exchange_bw + 2.0 * l->exchange_lat : 0.0;
        const double t = m->t_fwd[s] + m->t_bwd[s] + x;
        if (t > slowest) slowest = t;
        busy += m->t_fwd[s] + m->t_bwd[s];
        const double a = proj_allreduce_s(l, m->param_bytes[s], R, S);
        if (a > ar) ar = a;
        if (m->t_update[s] > up) up = m->t_update[s];
    }
    r->devices = S * R;
    r->local_batch = m->micro_batch;
    r->global_batch = m->micro_batch * G * R;
    r->pipe_s = (G + S - 1) * slowest;
    r->allreduce_s = ar;
    r->update_s = up;
    r->step_s = r->pipe_s + r->allreduce_s + r->update_s;
    r->images_per_s = r->step_s > 0.0 ? (double)r->global_batch / r->step_s : 0.0;
    r->utilisation = r->step_s > 0.0 ? (double)G * busy / (S * r->step_s) : 0.0;
}

void proj_table(const struct proj_measured *m, const struct proj_links *l, struct proj_row *rows, int n)
{
    for (int i = 0; i < n; i++) proj_project(m, l, &rows[i]);
    for (int i = 0; i < n; i++) {
        const double base = rows[0].images_per_s / rows[0].devices;
        rows[i].efficiency = base > 0.0 ? rows[i].images_per_s / rows[i].devices / base : 0.0;
    }
}

int proj_row_fits(int devices, int stages, int micro_batch, int global_batch, char *why, size_t why_size)
{
    if (devices % stages) {
        snprintf(why, why_size, "%d devices do not divide into %d stages", devices, stages);
        return 0;
    }
    const int R = devices / stages;
    if (global_batch % (micro_batch * R)) {
        snprintf(why, why_size, "%d replicas of micro-batch %d do not divide global batch %d", R, micro_batch,
                 global_batch);
        return 0;
    }
    if (global_batch / (micro_batch * R) < stages) { /* a pipeline needs at least S micro-batches in flight */
        snprintf(why, why_size, "%d replicas leave %d micro-batch%s a step for %d stages (global batch %d)", R,
                 global_batch / (micro_batch * R), global_batch / (micro_batch * R) == 1 ? "" : "es", stages,
                 global_batch);
        return 0;
    }
    return 1;
}

int proj_default_rows(const int *devices, int n_devices, int stages, int micro_batch, int global_batch,
                      struct proj_row *rows)
{
    int k = 0;
    char why[160];
    for (int i = 0; i < n_devices; i++) {
        if (!proj_row_fits(devices[i], stages, micro_batch, global_batch, why, sizeof why)) continue;
        rows[k].replicas = devices[i] / stages;
        rows[k].ga = global_batch / (micro_batch * rows[k].replicas);
        k++;
    }
    return k;
}

void proj_notes_left_out(const int *devices, int n_devices, int stages, int micro_batch, int global_batch,
                         const char *what, FILE *f)
{
    char why[160];
    for (int i = 0; i < n_devices; i++)
        if (!proj_row_fits(devices[i], stages, micro_batch, global_batch, why, sizeof why))
            fprintf(f, "bench: note: %s %d left out: %s\n", what, devices[i], why);
}

void proj_print(const struct proj_measured *m, const struct proj_links *l, const struct proj_row *rows, int n,
                FILE *f)
{
    fprintf(f, "POD-scale projection (projected, from this machine's measured per-stage times)\n");
    fprintf(f, "  link model: exchange %.1f GB/s + %.1f us, all-reduce %.1f GB/s + %.1f us per ring step\n",
            l->exchange_bw * 1e-9, l->exchange_lat * 1e6, l->allreduce_bw * 1e-9, l->allreduce_lat * 1e6);
    for (int s = 0; s < m->stages; s++)
        fprintf(f, "  stage %d (measured): fwd %.2f ms, bwd %.2f ms per micro-batch, %.2f MB in, %.2f MB params\n", s,
                m->t_fwd[s] * 1e3, m->t_bwd[s] * 1e3, m->exchange_bytes[s] * 1e-6, m->param_bytes[s] * 1e-6);
    fprintf(f, "  %7s %11s %6s %8s %12s %12s %22s %12s %11s\n", "devices", "local batch", "stages", "replicas",
            "accumulation", "global batch", "images/s (projected)", "utilisation", "efficiency");
    for (int i = 0; i < n; i++)
        fprintf(f, "  %7d %11d %6d %8d %12d %12d %22.1f %11.1f%% %10.1f%%\n", rows[i].devices, rows[i].local_batch,
                m->stages, rows[i].replicas, rows[i].ga, rows[i].global_batch, rows[i].images_per_s,
                100.0 * rows[i].utilisation, 100.0 * rows[i].efficiency);
}
