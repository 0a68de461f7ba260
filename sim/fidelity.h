/* How faithful a selection policy's sparse attention is to dense attention
 * on a recorded trace: the paper's Fig. 4 statistic.
 *
 * Every decode row of the trace is replayed through the scheduler with the
 * policy (everything on the GPU tier: placement plays no part). The dense
 * attention at a step is the trace's row over its stored mass (a sparse
 * trace row leaves out tiny weights); the policy's is that row restricted to
 * the attended tokens and renormalised (exactly the softmax over the
 * attended set, the logits being the same). Per layer, both are averaged per token position over the decode
 * steps that see that position (over all sequences), and the two average
 * distributions are compared by Spearman rank correlation (GSL); the
 * attention mass kept is the mean over decode steps of the dense weight on
 * the attended tokens.
 */
#ifndef ALISA_FIDELITY_H
#define ALISA_FIDELITY_H

#include <stdint.h>

#include "err.h"
#include "selection.h"

struct fidelity_layer {
    double spearman;  /* rank correlation of the average distributions, [-1, 1] */
    double mass_kept; /* mean dense attention mass on the attended tokens, [0, 1] */
    uint32_t positions; /* token positions compared */
};

struct fidelity_result {
    uint32_t n_layers;
    uint64_t decode_steps;         /* stream-steps replayed */
    double attended_share;         /* attended tokens / context tokens over those steps */
    struct fidelity_layer *layers; /* (n_layers), owned */
};

/* Replays trace `path` under the selection into *out (release with
 * fidelity_result_free). Errors: the trace's (file, byte offset), the
 * parameters', a trace without decode steps. */
int fidelity_trace(const char *path, const struct selection_ops *sel, const struct sel_params *p,
                   struct fidelity_result *out, struct alisa_err *e);

void fidelity_result_free(struct fidelity_result *r); /* accepts a zeroed result */

#endif
