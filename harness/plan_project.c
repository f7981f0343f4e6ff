/* plan_project.c — `--project-device`: the device model (devmodel.h) on the session's model, without
 * training (project_only), and its validation beside a pipelined run's measured stage times.
 *
 * The configuration is the run's: --stages (default: the published seed's when the workload is its, else
 * 2), --micro-batch (same, else 1), --split (same, else balanced on the model), --precision, --recompute,
 * --schedule, the optimizer's state per parameter; device counts from --project-devices (default: the
 * published points, else 16,64,256); the global batch from --ga (micro-batch · ga · the first row's
 * replicas), else the published one, else micro-batch · 4S · the last row's replicas. The published
 * figures (devices/seed001.published) are shown beside the rows when the device and the whole
 * configuration are theirs. Nothing here allocates activations: the model's layer table is enough.
 * Threading: the session's thread.
 */
#include "devmodel.h"
#include "optim.h"
#include "plan_project.h"
#include "report_seed001.h"
#include "session.h"
#include "status.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>


int project_device_spec(const char *name, const char *device_set, const char *calibration, const struct calibration *cal,
                        int have_cal, struct dev_spec *d)
{
    int st;
    if (!strcmp(name, "cpu-this")) {
        if (!have_cal)
            return tb_error_set(TB_EINVAL, "--project-device cpu-this needs %s measured on this machine: run bench --calibrate "
                                "(or give --calibration FILE)", calibration);
        dev_spec_from_calibration_file(cal, calibration, d);
        st = TB_OK;
    } else {
        st = dev_spec_load(name, NULL, d);
        if (st == TB_EIO) st = TB_EINVAL; /* a device name that is not there is a usage error (exit 2) */
    }
    if (st == TB_OK && device_set && device_set[0]) st = dev_spec_override(d, device_set);
    return st;
}

/* The input resolution the model was built for (its input layer's output). */
static int model_resolution(const struct model *m)
{
    return m->n_layers > 0 && m->layers[0].op == OP_INPUT ? m->tensors[m->layers[0].out].h : m->in_h;
}

int project_device_matches(const struct dev_published *p, const struct model *m, int stages, int micro_batch,
                           const char *split, int prec, int recompute)
{
    return !strcmp(p->workload, m->name) && p->resolution == model_resolution(m) &&
           (p->classes == 0 || p->classes == m->n_classes) && p->stages == stages &&
           p->micro_batch == micro_batch && !strcmp(p->split, split) && dev_prec_parse(p->precision) == prec &&
           p->recompute == recompute;
}

/* The session's configuration as a projection; pub is filled when the seed file loads. notes: say which
 * device counts are left out (once a run: the roofline variant configures again). */
static int configure(const struct session *s, const struct dev_spec *d, struct dev_run *r, struct dev_published *pub,
                     int *have_pub, int *matches, int notes)
{
    const struct bench_config *c = &s->c;
    char pub_path[PATH_MAX + 32];
    snprintf(pub_path, sizeof pub_path, "%s/seed001.published", dev_default_dir());
    *have_pub = dev_published_load(pub_path, pub) == TB_OK;
    tb_error_clear();
    const int same_wl = *have_pub && !strcmp(pub->workload, s->m.name);
    const int S = c->run.ipu.stages > 0 ? c->run.ipu.stages : same_wl ? pub->stages : 2;
    const int B = c->run.ipu.micro_batch > 0 ? c->run.ipu.micro_batch : same_wl ? pub->micro_batch : 1;
    const char *split = c->run.ipu.split[0] ? c->run.ipu.split : same_wl && S == pub->stages ? pub->split : "";
    const int prec = dev_prec_parse(c->run.ipu.precision);
    if (prec < 0) return tb_error_set(TB_EINVAL, "--precision %s: no device model for it", c->run.ipu.precision);
    const int gpipe = !strcmp(c->run.ipu.schedule, "gpipe") || !strcmp(c->run.ipu.schedule, "grouped");
    *matches = *have_pub && project_device_matches(pub, &s->m, S, B, split, prec, c->run.ipu.recompute);
    int devices[BENCH_MAX_BATCHES], n = 0;
    if (c->n_project > 0) {
        for (int i = 0; i < c->n_project; i++) devices[n++] = c->project_devices[i];
    } else if (*matches) {
        for (int i = 0; i < pub->n && n < BENCH_MAX_BATCHES; i++) devices[n++] = pub->devices[i];
    } else {
        const int def[] = {16, 64, 256};
        for (int i = 0; i < 3; i++) devices[n++] = def[i];
    }
    int global;
    if (c->run.ipu.ga > 0) global = B * c->run.ipu.ga * (devices[0] / S > 0 ? devices[0] / S : 1);
    else if (*matches) global = pub->global_batch;
    else global = B * 4 * S * (devices[n - 1] / S > 0 ? devices[n - 1] / S : 1);
    int st = dev_run_project(d, &s->m, S, B, split, (enum dev_prec)prec, c->run.ipu.recompute, gpipe,
                             optim_state_per_param(c->run.optim.kind), devices, n, global, r);
    if (notes && st == TB_OK && r->n > 0 && r->n < n)
        proj_notes_left_out(devices, n, S, B, global, c->n_project > 0 ? "--project-devices" : "default device count",
                            stderr);
    if (st == TB_OK && r->n == 0)
        st = tb_error_set(TB_EINVAL, "%s: no device count divides into %d stages with global batch %d "
                                     "(micro-batch %d, accumulation >= stages)",
                          c->n_project > 0 ? "--project-devices" : "the default device counts", S, global, B);
    return st;
}

int plan_project(struct session *s)
{
    struct dev_spec d;
    int st = project_device_spec(s->c.project_device, s->c.device_set, s->c.calibration, &s->cal, s->have_cal, &d);
    if (st != TB_OK) return st;
    static struct dev_run r;
    struct dev_published pub;
    int have_pub = 0, matches = 0;
    if ((st = configure(s, &d, &r, &pub, &have_pub, &matches, 1)) != TB_OK) return st;
    dev_print(&d, &r.c, r.st, &r.pm, r.rows, r.n, matches ? &pub : NULL, stdout);
    if (d.kernel_overhead_s > 0.0) {
        /* What the per-kernel overhead is worth: the same projection as a plain roofline. */
        struct dev_spec raw = d;
        raw.kernel_overhead_s = 0.0;
        static struct dev_run rr;
        struct dev_published p2;
        int hp = 0, m2 = 0;
        if (configure(s, &raw, &rr, &p2, &hp, &m2, 0) == TB_OK) {
            printf("  roofline    without the %.3g us per kernel (PROJECTED):", d.kernel_overhead_s * 1e6);
            for (int i = 0; i < rr.n; i++) printf(" %.0f%s", rr.rows[i].images_per_s, i + 1 < rr.n ? " /" : "");
            printf(" images/s at");
            for (int i = 0; i < rr.n; i++) printf(" %d%s", rr.rows[i].devices, i + 1 < rr.n ? " /" : "");
            printf(" devices\n");
        }
        tb_error_clear();
    }
    if (have_pub && !matches && !strcmp(pub.device, d.name))
        printf("  published   not compared: %s's published configuration is %s at %d with %d classes, %d stages split "
               "at %s, micro-batch %d, %s, recompute %s\n",
               d.name, pub.workload, pub.resolution, pub.classes, pub.stages, pub.split, pub.micro_batch, pub.precision,
               pub.recompute ? "on" : "off");
    /* Beside every projection, the model's record on this machine: the newest measured ipu run in the rows. */
    static struct seed001_cpu v;
    st = seed001_cpu_load(s->c.out, &v);
    if (st == TB_OK) {
        printf("  this machine (%s, run %s: %s at %dx%d, %d stages split at %s, micro-batch %d):\n", v.cpu, v.run_id, v.m.name,
               v.in_h, v.in_w, v.stages, v.split, v.micro_batch);
        dev_print_stage_validation(&v.d, v.r.st, v.stages, v.meas_fwd, v.meas_bwd, stdout);
    } else {
        printf("  this machine: %s; validate the model here with --plan throughput --project-device cpu-this --stages 2 "
               "--split 11 (see README)\n", tb_error_get());
    }
    tb_error_clear();
    seed001_cpu_free(&v);
    return TB_OK;
}

void plan_project_validate(const struct session *s, const double *t_fwd, const double *t_bwd, int stages, int micro_batch,
                           FILE *f)
{
    struct dev_spec d;
    if (project_device_spec(s->c.project_device, s->c.device_set, s->c.calibration, &s->cal, s->have_cal, &d) != TB_OK) {
        fprintf(f, "  device model: %s\n", tb_error_get());
        tb_error_clear();
        return;
    }
    if (!s->c.run.ipu.split[0]) {
        fprintf(f, "  device model: give --split to compare stage by stage (the balanced split is not reported)\n");
        return;
    }
    static struct dev_run r;
    const int prec = dev_prec_parse(s->c.run.ipu.precision);
    const int dev[1] = {stages};
    if (prec < 0 || dev_run_project(&d, &s->m, stages, micro_batch, s->c.run.ipu.split, (enum dev_prec)prec,
                                    s->c.run.ipu.recompute, 0, optim_state_per_param(s->c.run.optim.kind), dev, 1,
                                    micro_batch * stages, &r) != TB_OK) {
        fprintf(f, "  device model: %s\n", tb_error_get());
        tb_error_clear();
        return;
    }
    dev_print(&d, &r.c, r.st, &r.pm, r.rows, 0, NULL, f);
    dev_print_stage_validation(&d, r.st, stages, t_fwd, t_bwd, f);
}
