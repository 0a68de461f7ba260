/* Selection policies: which past tokens one (sequence, layer) stream attends
 * at each decode step. Part of the scheduler core: no clock, no I/O, no exit.
 *
 * A policy sees only the attention of steps already taken (observe) and the
 * dense prompt rows (observe_prefill). Its budget is a KV sparsity (fraction
 * of the context NOT attended) or a token count; see sel_budget(). Policies
 * that can guarantee never to attend a token again report it as retired, so
 * placement can free its memory (H2O's evictions, StreamingLLM's window).
 * Adding a policy = one struct selection_ops instance + its tests.
 */
#ifndef ALISA_SELECTION_H
#define ALISA_SELECTION_H

#include <stdint.h>

#include "err.h"

struct sel_params {
    double sparsity;        /* fraction of the context not attended, [0, 1); used when
                               budget_tokens == 0 */
    uint32_t budget_tokens; /* tokens attended per step when > 0 (then sparsity is ignored) */
    uint32_t window_steps;  /* swa: steps summed into the local attention sum (w); 0 = k of
                               the current step, growing with the context (ALISA.md 1) */
    uint32_t sinks;         /* streaming: leading sink tokens kept (default 4) */
    uint32_t stride;        /* strided: keep every stride-th older token; 0 = derive from
                               the budget */
};

/* Tokens attended at context length n (positions 0..n-1, the newest n-1
 * included): sparsity mode 2 * round(n * (1 - sparsity) / 2), token mode
 * budget_tokens; at least 1, at most n. Cannot fail. */
uint32_t sel_budget(const struct sel_params *p, uint32_t n);

/* Local (recent) share of a budget B: ceil(B / 2); the global share is
 * floor(B / 2). With a sparsity budget both are k = round(n * r / 2). */
uint32_t sel_local_share(uint32_t budget);

struct selection_ops {
    const char *name;     /* "swa", "h2o", ... */
    const char *summary;  /* one line for `alisa policy list` */
    const char *params;   /* which sel_params fields it uses, one line */
    int gathers;          /* 1: attends a subset, gathered into dense K and V (what a cost
                             model prices as sparse attention); 0: every token, in place */

    /* Creates the state of one stream whose sequence has at most max_len
     * tokens. On failure *state is NULL and e says why. */
    int (*create)(void **state, const struct sel_params *p, uint32_t max_len,
                  struct alisa_err *e);
    void (*destroy)(void *state); /* accepts NULL */

    /* Feeds the dense attention row of prompt position pos (pos + 1 weights)
     * during prefill. prompt_len lets a policy keep only the last rows. May be
     * NULL when the policy needs no history. */
    void (*observe_prefill)(void *state, uint32_t pos, const float *row, uint32_t prompt_len);

    /* Chooses the attended set for the query at position pos among tokens
     * 0..pos; pos itself is always attended. Writes the ids ascending into
     * out (capacity pos + 1) and returns their count; writes tokens newly
     * retired (never attended again) into retired (capacity pos + 1) and
     * their count into *n_retired. *local_tokens gets the size of the recent
     * window the policy keeps (placement pins it). Cannot fail. */
    uint32_t (*select)(void *state, uint32_t pos, uint32_t *out, uint32_t *retired,
                       uint32_t *n_retired, uint32_t *local_tokens);

    /* The attention weights the attended ids received at step pos (w sums to
     * 1 over ids). May be NULL when the policy ignores weights. */
    void (*observe)(void *state, uint32_t pos, const uint32_t *ids, const float *w,
                    uint32_t count);

    /* 1 once an allocation in observe or observe_prefill failed, so the
     * policy's history is incomplete and its selections no longer what it
     * specifies; the scheduler then refuses the stream's next step (an
     * error, not a result). May be NULL: the policy's observes cannot fail. */
    int (*failed)(const void *state);
};

/* An attention weight in the fixed point SWA sums use (units of 2^-40), so
 * that adding a row and later subtracting it is exact and every shell gets
 * bit-identical sums whatever the order. Weights are in [0, 1]. Cannot fail. */
static inline int64_t sel_weight_fixed(float w)
{
    return (int64_t)((double)w * 1099511627776.0 + 0.5);
}

/* Every selection policy, NULL-terminated, in `alisa policy list` order. */
extern const struct selection_ops *const selection_policies[];

/* Policy by name, or NULL. Cannot fail. */
const struct selection_ops *selection_find(const char *name);

/* Validates params for the named policy; e names the bad field. */
int sel_params_validate(const struct sel_params *p, struct alisa_err *e);

/* The instances, for tests and tables. */
extern const struct selection_ops sel_dense_ops, sel_local_ops, sel_strided_ops,
    sel_streaming_ops, sel_h2o_ops, sel_swa_ops;

#endif
