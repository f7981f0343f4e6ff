/* run.c — bench_run: opens a session and dispatches to the configured plan (see run.h).
 *
 * The run is spread over files named for what they hold: stop.c (signals), session.c (data stream,
 * model, backend, the timed step loop), row.c (the row writer), resume.c (checkpoints, resume, rows of
 * runs that stopped early) and plan_train.c, plan_throughput.c (with scaling), plan_tta.c,
 * plan_inference.c; session.h is their private header.
 *
 * Data order is a continuous stream over the training set: the sample at stream position p is
 * perm_e[p mod n] with e = p div n and perm_e a counter-based permutation per data epoch. A training
 * "epoch" is steps_per_epoch steps of that stream (Keras's steps_per_epoch on a repeated dataset), so
 * any batch size and step count is reproducible and identical on every backend.
 *
 * Every step is timed on its own (batch assembly included); the plans turn those times into
 * statistics with measure.h. Rows are written by one function, row_begin/row_end, whatever the plan.
 *
 * Reliability: SIGINT/SIGTERM only set a flag (a second one kills at once); the step loop checks it
 * between steps, so a run stops on a step boundary, writes a resumable checkpoint (--checkpoint-dir)
 * and a row with "status":"interrupted". Because the data stream and every random draw are pure
 * functions of (seed, step, sample), a checkpoint of params, buffers and optimizer state at step k is
 * all a resumed run needs to take the same steps k+1.. as an uninterrupted one; time to accuracy also
 * keeps its evaluations so far and its finished seeds in the checkpoint ("tta_state"). The measuring
 * plans (throughput, scaling, inference) have nothing to resume: a signal gives them a partial row. A
 * non-finite loss stops a run with a "status":"diverged" row that carries no throughput or accuracy figure.
 */
#define _GNU_SOURCE
#include "session.h"

#include "exec.h"
#include "plan_project.h"
#include "status.h"

#include <stdio.h>

int bench_run(const struct bench_config *cfg)
{
    if (bench_stop_signal())
        return tb_error_set(TB_EINTR, "interrupted by %s before the run started",
                            bench_signal_name(bench_stop_signal()));
    /* A device that needs hardware (cuda) and has none: one line and exit 1 before any data is read or
     * any row written. */
    if (cfg->device[0] && !cfg->describe && !cfg->project_only) {
        const int dst = executor_device_probe(cfg->device);
        if (dst != TB_OK) return dst;
    }
    struct bench_stop_handlers h;
    bench_stop_handlers_install(&h);
    struct session s;
    int st = session_open(&s, cfg);
    if (st != TB_OK) {
        session_close(&s);
        bench_stop_handlers_restore(&h);
        return st;
    }
    if (s.c.describe) {
        printf("%s (%s input %dx%dx%d, %d classes)\n", s.m.name, s.train.name, s.m.in_h, s.m.in_w, s.m.in_c,
               s.m.n_classes);
        /* No backend: preparing one allocates activations and autotunes (minutes and 18 GB for
         * effnet-b0-g16); the table is the model's graph, so the algorithm column is left out. */
        model_describe(&s.m, NULL, exec_conv_algo_names, stdout);
        session_close(&s);
        bench_stop_handlers_restore(&h);
        return TB_OK;
    }
    if (s.c.project_only) {
        /* No backend either: the projection reads the model's layer table only. */
        st = plan_project(&s);
        session_close(&s);
        bench_stop_handlers_restore(&h);
        return st;
    }
    switch (s.c.plan) {
    case PLAN_THROUGHPUT: st = plan_throughput_at(&s, s.c.run.batch, s.run_base, NULL, NULL); break;
    case PLAN_TTA: st = plan_tta(&s); break;
    case PLAN_SCALING: st = plan_scaling(&s); break;
    case PLAN_INFERENCE: st = plan_inference(&s); break;
    case PLAN_EVALUATE: st = plan_evaluate(&s); break;
    default: st = plan_train(&s, s.c.run.batch, s.run_base, NULL, NULL); break;
    }
    /* The run measured and its row stands, but an output it was asked for is missing: not a success. */
    if (st == TB_OK && s.output_err[0]) st = tb_error_set(TB_EIO, "%s (the result row was written)", s.output_err);
    session_close(&s);
    bench_stop_handlers_restore(&h);
    return st;
}
