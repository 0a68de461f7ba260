/* The decision log: one deterministic text line per scheduler plan, written
 * the same way by every shell (alisa plan replaying a trace, the executor
 * running a model), so two runs of one configuration can be diffed line by
 * line.
 *
 * A line: "seq layer pos prefill|decode" then, unless the step ran out of
 * GPU memory (" oom"), " attend=" " retire=" " load=" " recompute="
 * " offload=" " drop=" each with comma-separated token ids. Shells visit
 * plans in different orders (trace order; layer-major in the executor), so
 * compare sorted logs (`sort -n -k1,1 -k3,3 -k2,2`).
 */
#ifndef ALISA_PLANLOG_H
#define ALISA_PLANLOG_H

#include <stdint.h>
#include <stdio.h>

#include "scheduler.h"

/* Writes plan p of sequence seq, layer layer to f. Write errors show in
 * ferror(f). */
void planlog_write(FILE *f, const struct scheduler_plan *p, uint32_t seq, uint32_t layer);

#endif
