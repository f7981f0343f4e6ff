/* plan_project.h — `--project-device` inside bench: the device projection of the session's model
 * (plan_project, nothing trained) and its validation beside a run's measured stage times. See
 * plan_project.c for how the configuration is filled in. Threading: the session's thread.
 */
#ifndef TB_PLAN_PROJECT_H
#define TB_PLAN_PROJECT_H

#include "calibrate.h"
#include "devmodel.h"

#include <stdio.h>

struct session;

/* Loads spec name (a devices/ name, a path, or "cpu-this" from cal when have_cal) and applies
 * device_set overrides. */
int project_device_spec(const char *name, const char *device_set, const char *calibration, const struct calibration *cal,
                        int have_cal, struct dev_spec *d);
/* 1 when p's configuration is this one (workload, resolution, classes, stages, micro-batch, split, precision,
 * recomputation). */
int project_device_matches(const struct dev_published *p, const struct model *m, int stages, int micro_batch,
                           const char *split, int prec, int recompute);
/* Prints the projection (and the published figures where they apply). */
int plan_project(struct session *s);
/* Prints the model's per-stage times beside the measured ones (seconds per micro-batch). */
void plan_project_validate(const struct session *s, const double *t_fwd, const double *t_bwd, int stages, int micro_batch,
                           FILE *f);

#endif
