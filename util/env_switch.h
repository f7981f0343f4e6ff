/* env_switch.h — the one test every A/B switch takes (docs/DESIGN.md, "Environment variables"): a switch is
 * off only at =0, so one binary runs a change's measured path and, beside it, the path it replaced. */
#ifndef TB_ENV_SWITCH_H
#define TB_ENV_SWITCH_H

#include <stdlib.h>
#include <string.h>

/* Whether the A/B switch `name` (TB_SE_ROWS, TB_GRAD_FIRST_WRITE, ...) is set to 0: its measured path turned off
 * for this process's runs. */
static inline int tb_env_off(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}

#endif
