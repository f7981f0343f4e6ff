/* timeline_csv.c — the --timeline CSV files from the backend's stats (see timeline_csv.h). */
#include "timeline_csv.h"

#include "pipeline_report.h"
#include "status.h"

#include <stdio.h>
#include <string.h>

int timeline_csv_open(struct timeline_csv *t, const char *path)
{
    memset(t, 0, sizeof *t);
    if (!(t->events = fopen(path, "w"))) return tb_error_set(TB_EIO, "cannot create the timeline file '%s'", path);
    fprintf(t->events, "step,device,stage,replica,microbatch,phase,start_s,end_s\n");
    char dpath[600];
    snprintf(dpath, sizeof dpath, "%s.devices.csv", path);
    if (!(t->devices = fopen(dpath, "w"))) {
        timeline_csv_close(t);
        return tb_error_set(TB_EIO, "cannot create the device log '%s'", dpath);
    }
    fprintf(t->devices, "step,device,stage,replica,span_s,compute_s,exchange_s,wait_s,idle_s,allreduce_s,update_s,"
                        "bytes_out,slots_peak\n");
    return TB_OK;
}

int timeline_csv_step(struct timeline_csv *t, struct backend *be, long step)
{
    struct backend_stats s;
    if (!t->events || backend_stats(be, &s) != TB_OK || s.step != step || step <= 0) return TB_OK;
    for (int k = 0; k < s.n_timeline; k++) {
        const struct timeline_event *e = &s.timeline[k];
        fprintf(t->events, "%ld,%d,%d,%d,%d,%c,%.9f,%.9f\n", step, e->device, e->stage, e->replica, e->micro_batch,
                e->phase, e->start_s, e->end_s);
    }
    for (int j = 0; j < s.n_device_steps; j++) {
        const struct device_step *d = &s.devices[j];
        fprintf(t->devices, "%ld,%d,%d,%d,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.0f,%d\n", step, d->device, d->stage,
                d->replica, d->span_s, d->compute_s, d->exchange_s, d->wait_s, d->idle_s, d->allreduce_s, d->update_s,
                d->bytes_out, d->slots_peak);
    }
    if (fflush(t->events) != 0 || fflush(t->devices) != 0 || ferror(t->events) || ferror(t->devices))
        return tb_error_set(TB_EIO, "cannot write the timeline files");
    return TB_OK;
}

void timeline_csv_close(struct timeline_csv *t)
{
    if (t->events) fclose(t->events);
    if (t->devices) fclose(t->devices);
    memset(t, 0, sizeof *t);
}
