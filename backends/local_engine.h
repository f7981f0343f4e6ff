/* local_engine.h — the CPU executor (core/executor_cpu.h) planned from a backend's run configuration,
 * under its old name: what the white-box tests (gradient checks, golden blocks, checkpoint round trips)
 * drive directly. Nothing else: schedules create executors through executor.h. Ownership and threading
 * as executor_cpu.h.
 */
#ifndef TB_LOCAL_ENGINE_H
#define TB_LOCAL_ENGINE_H

#include "backend.h"
#include "backend_executor.h"
#include "executor_cpu.h"

/* Plans and allocates a CPU engine for m with n_max training samples per pass and nth threads (a pinned
 * pool when nth > 1), from cfg as a backend would plan it. */
static inline int local_engine_init(struct local_engine *e, const struct model *m, const struct run_config *cfg,
                                    int n_max, int nth)
{
    struct executor_config ec;
    backend_executor_config(cfg, n_max, nth, &ec);
    return local_engine_create(e, m, &ec);
}

#endif
