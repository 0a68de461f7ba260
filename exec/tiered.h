/* The executor's tiered KV cache: the scheduler core and the arenas a run
 * asks for, attached to a forward pass. The executor's one set-up of the
 * scheduler (issue 40: it lived in the commands), for run, eval, record,
 * validate and calibration alike. A stream's tiers come from the one
 * derivation the replay uses (costmodel.h, cost_tiers, with the executor's
 * storage), so the decision logs of the two agree line for line.
 *
 * Does not parse options, load catalogs or print: the commands resolve
 * names and the hardware profile, and report what this returns.
 */
#ifndef ALISA_TIERED_H
#define ALISA_TIERED_H

#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "err.h"
#include "forward.h"
#include "kvstore.h"
#include "placement.h"
#include "scheduler.h"
#include "selection.h"

/* What a run asks of its KV cache. */
struct tiered_request {
    const struct selection_ops *sel;   /* NULL: dense (every token attended) */
    const struct placement_ops *place; /* NULL: gpu-only */
    struct sel_params sel_params;
    int int8;                          /* K and V stored in INT8 in the arenas */
    uint64_t gpu_bytes, cpu_bytes;     /* the arenas' bytes over all streams; 0: room for
                                          every token */
    const struct hw_profile *hw;       /* prices load against recompute; may be NULL only
                                          under a placement without a host tier (nothing is
                                          loaded or recomputed, so nothing is priced) */
};

/* A scheduler and the arenas it places tokens in. */
struct tiered {
    struct scheduler *sched;
    struct kvstore *ks;
    uint32_t gpu_seqs; /* a placement that splits by whole sequences (flexgen-static): those
                          whose KV lies wholly on the device; 0 otherwise */
};

/* 1 when the executor runs placement pl: every online placement
 * (flexgen-static in FlexGen's own form, place_flexgen_split), not the
 * offline bounds, which need a recorded run. Cannot fail. */
int tiered_runs(const struct placement_ops *pl);

/* How backend kind's arenas store K and V: INT8 when int8, else FP16 or
 * FP32 as the backend holds them (llm_backend_info's kv_bytes; a backend
 * this build lacks: FP32). Cannot fail. */
enum kv_precision tiered_precision(int int8, enum llm_backend kind);

/* The device and host arenas' bytes for `batch` sequences of max_len tokens
 * of a model of config c, K and V stored in precision p: gpu_bytes and
 * cpu_bytes, or room for every token where either is 0. Cannot fail. */
void tiered_capacity(uint64_t gpu_bytes, uint64_t cpu_bytes, const struct llm_config *c,
                     uint32_t batch, uint32_t max_len, enum kv_precision p, uint64_t *gpu_out,
                     uint64_t *cpu_out);

/* Attaches the cache r asks for to st (a state for `batch` sequences of
 * max_len tokens): every (sequence b, layer l) is stream b * n_layers + l,
 * positions below prompt_len are prefill. A placement without a host tier
 * gets no host arena. On failure t is empty and e says why (an unknown or
 * offline placement, prices missing, out of memory). */
int tiered_attach(struct tiered *t, const struct tiered_request *r, const struct llm_model *m,
                  struct llm_state *st, uint32_t batch, uint32_t max_len, uint32_t prompt_len,
                  struct alisa_err *e);

/* Frees t's scheduler and arenas; accepts an empty t. The state they were
 * attached to must not step again. */
void tiered_free(struct tiered *t);

#endif
