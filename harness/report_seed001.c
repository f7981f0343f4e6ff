/* report_seed001.c — the report's "### Seed 001" subsection (issue 30 item 2: EfficientNet-B4 on
 * IPU-PODs, a projection). A placeholder until its author fills it; report_seeds() calls it in its place
 * under "## Seeds". Threading: none. */
#include "report_seeds.h"

void report_seed001(const struct report_seeds_in *in)
{
    fprintf(in->md, "### Seed 001\n\n(projection: see issue 30 item 2)\n\n");
}
