/* Selection policies: which past tokens one (sequence, layer) stream attends
 * at each decode step. Part of the scheduler core: no clock, no I/O, no exit.
 *
 * A policy sees the attention of steps already taken (observe) and the
 * dense prompt rows (observe_prefill); one that declares needs_present also
 * sees the current step's row (select's present: the query's attention
 * over every token, what an indexer or query-aware policy reads before it
 * picks; the shells supply it and order the step's loads after it). Its budget is a KV sparsity (fraction
 * of the context NOT attended) or a token count; see sel_budget(). Policies
 * that can guarantee never to attend a token again report it as retired, so
 * placement can free its memory (H2O's evictions, StreamingLLM's window).
 * Adding a policy = one struct selection_ops instance + its tests.
 */
#ifndef ALISA_SELECTION_H
#define ALISA_SELECTION_H

#include <stdint.h>

#include "err.h"

/* The KV sparsity a command runs when none is given (the paper's Fig. 9
 * and 12 setting, ALISA.md). */
#define SEL_SPARSITY_DEFAULT 0.8

/* The most parameters a selection may declare of its own (sel_knob). */
#define SEL_KNOBS_MAX 4

struct sel_params {
    double sparsity;        /* fraction of the context not attended, [0, 1); used when
                               budget_tokens == 0 */
    uint32_t budget_tokens; /* tokens attended per step when > 0 (then sparsity is ignored) */
    double knob[SEL_KNOBS_MAX]; /* the selection's own parameters, in the order its
                                   ops' knobs declare them; 0: not given (the knob's
                                   default) */
};

/* A knob's max that means "no upper bound" (a count as large as a context). */
#define SEL_KNOB_UNBOUNDED 1e9

/* A parameter a selection declares (its ops' knobs): the shells, the CLI,
 * sweep specs and JSON output walk the declarations, so a new policy's
 * parameter is a line in its own file, not a field of a shared struct. */
struct sel_knob {
    const char *name;    /* the option --NAME, the sweep key NAME, the JSON key */
    int whole;           /* 1: a whole number */
    double min, max;     /* the range a given value must lie in */
    const char *def;     /* what not giving it (0) means, one phrase */
    const char *help;    /* one line */
};

/* Tokens attended at context length n (positions 0..n-1, the newest n-1
 * included): sparsity mode 2 * round(n * (1 - sparsity) / 2), token mode
 * budget_tokens; at least 1, at most n. Cannot fail. */
uint32_t sel_budget(const struct sel_params *p, uint32_t n);

/* Local (recent) share of a budget B: ceil(B / 2); the global share is
 * floor(B / 2). With a sparsity budget both are k = round(n * r / 2). */
uint32_t sel_local_share(uint32_t budget);

/* What a shell holding the keys (the executor) computes in place of the
 * exact present row, when a selection's real form estimates it (its ops'
 * estimate, given its parameters): the exact row (the upper bound a trace
 * gives), Quest's per-page bounds, or InfiniGen's partial-channel scores. */
enum sel_estimate_kind { SEL_ESTIMATE_EXACT = 0, SEL_ESTIMATE_PAGE_BOUNDS, SEL_ESTIMATE_PARTIAL };

struct sel_estimate {
    enum sel_estimate_kind kind;
    uint32_t page;   /* PAGE_BOUNDS: tokens a page */
    double ratio;    /* PARTIAL: share of each head's channels scored, (0, 1] */
    const char *knob; /* not EXACT: the knob that asked for it (messages) */
};

struct selection_ops {
    const char *name;     /* "swa", "h2o", ... */
    const char *summary;  /* one line for `alisa policy list` */
    const struct sel_knob *knobs; /* (n_knobs) its own parameters: sel_params.knob[i] is
                                     knobs[i]'s value */
    uint32_t n_knobs;     /* at most SEL_KNOBS_MAX */
    int budgeted;         /* 1: attends a budget (sel_params' sparsity or budget_tokens);
                             0: every token */
    int gathers;          /* 1: attends a subset, gathered into dense K and V (what a cost
                             model prices as sparse attention); 0: every token, in place */
    int needs_present;    /* 1: select reads the current step's row (present); the
                             shells compute or read it before the step's selection, and
                             its loads wait for it (no prefetch ahead of the layer) */
    int above_budget;     /* 1: may attend more tokens than its budget (quest's three
                             pages at least, infllm's initial tokens and remainder): a
                             step's staging is sized for every token */
    int below_budget;     /* 1: may attend fewer tokens than its budget, even with the
                             whole context as budget (sparsity 0): infinigen's threshold,
                             quest's whole pages (floor(B / page) of them) */
    int present_ahead;    /* with needs_present, 1: the policy's real form estimates the
                             row a layer early (InfiniGen's speculation), so its loads keep
                             their prefetch */
    /* With needs_present, what the real form computes instead of the exact
     * row under params p (out->kind EXACT when p asks for the upper bound);
     * NULL: always the exact row. A shell without keys (a trace's replay)
     * refuses a selection whose estimate is not EXACT (scheduler_create).
     * Cannot fail. */
    void (*estimate)(const struct sel_params *p, struct sel_estimate *out);
    /* Tokens of the unit it picks whole under p (quest's page, infllm's
     * block), and into *origin a token where one starts: what a placement
     * that moves blocks (block-lru, block-score) groups by. NULL: a token.
     * Cannot fail. */
    uint32_t (*unit)(const struct sel_params *p, uint32_t *origin);
    /* The leading layers the method attends densely under p, as its own
     * code does (Quest's and InfiniGen's first two): the scheduler runs the
     * dense selection on those layers' streams when the shell numbers its
     * streams by layer (scheduler_config.layers). NULL: none. Cannot fail. */
    uint32_t (*dense_layers)(const struct sel_params *p);

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
     * 0..pos; pos itself is always attended. present: the query's attention
     * weights over tokens 0..pos (pos + 1 of them, summing to about 1) when
     * the policy declares needs_present, else NULL. Writes the ids ascending into
     * out (capacity pos + 1) and returns their count; writes tokens newly
     * retired (never attended again) into retired (capacity pos + 1) and
     * their count into *n_retired. *local_tokens gets the size of the recent
     * window the policy keeps (placement pins it). Cannot fail. */
    uint32_t (*select)(void *state, uint32_t pos, const float *present, uint32_t *out,
                       uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens);

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

/* The longest a policy's name may be (what tables keyed by it hold). */
#define SEL_NAME_MAX 31

/* How many selection policies there are: what a table with one entry per
 * policy (calibration's figures) is sized by. test_selection checks the
 * registry holds exactly this many. */
#define SELECTION_N 10

/* Every selection policy, NULL-terminated, in `alisa policy list` order. */
extern const struct selection_ops *const selection_policies[SELECTION_N + 1];

/* Policy by name, or NULL. Cannot fail. */
const struct selection_ops *selection_find(const char *name);

/* Validates params: the budget, and when s is non-NULL each of s's knobs
 * that is given (non-zero) against its declared range, and no value given
 * for a knob s does not declare; e names the option and the value. */
int sel_params_validate(const struct sel_params *p, const struct selection_ops *s,
                        struct alisa_err *e);

/* The index of s's knob called name, or -1. Cannot fail. */
int sel_knob_find(const struct selection_ops *s, const char *name);

/* Knob i of p under s: its value, or def_value when not given. i < s->n_knobs.
 * Cannot fail. */
double sel_knob_value(const struct sel_params *p, uint32_t i, double def_value);

/* What s under p reads as its present row (s->estimate's answer; EXACT for
 * a selection without one). Cannot fail. */
void sel_estimate_of(const struct selection_ops *s, const struct sel_params *p,
                     struct sel_estimate *out);

/* The instances, for tests and tables. */
extern const struct selection_ops sel_dense_ops, sel_local_ops, sel_strided_ops,
    sel_streaming_ops, sel_h2o_ops, sel_swa_ops, sel_topk_ops, sel_quest_ops, sel_infinigen_ops,
    sel_infllm_ops;

#endif
