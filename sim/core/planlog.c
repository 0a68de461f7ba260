/* Decision-log lines (contract in planlog.h): the plan's id lists in a
 * fixed order, nothing that depends on timing or on the shell.
 */
#include "planlog.h"

static void ids(FILE *f, const char *name, const uint32_t *id, uint32_t n)
{
    fprintf(f, " %s=", name);
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, i ? ",%u" : "%u", id[i]);
}

void planlog_write(FILE *f, const struct scheduler_plan *p, uint32_t seq, uint32_t layer)
{
    fprintf(f, "%u %u %u %s", seq, layer, p->pos, p->prefill ? "prefill" : "decode");
    if (p->place.oom) {
        fprintf(f, " oom\n");
        return;
    }
    ids(f, "attend", p->attended, p->n_attended);
    ids(f, "retire", p->retired, p->n_retired);
    ids(f, "load", p->place.load, p->place.n_load);
    ids(f, "recompute", p->place.recompute, p->place.n_recompute);
    ids(f, "offload", p->place.offload, p->place.n_offload);
    ids(f, "drop", p->place.drop, p->place.n_drop);
    fprintf(f, "\n");
}
