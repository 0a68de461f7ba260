/* Selection policies that need no attention history: dense, local, strided
 * and streaming (StreamingLLM), plus the budget rule and the policy table.
 *
 * Retirement: the local window's start s(n) = n - B(n) can step back by one
 * token when a sparsity budget grows by 2, but never by two in a row
 * (B grows by at most 2 per step and r < 1), so tokens below s(n) - 1 are
 * never attended again and are retired. strided retires nothing (its derived
 * stride changes with n).
 */
#include "selection.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t sel_budget(const struct sel_params *p, uint32_t n)
{
    uint64_t b;
    if (p->budget_tokens > 0)
        b = p->budget_tokens;
    else
        b = 2 * (uint64_t)lround((double)n * (1.0 - p->sparsity) / 2.0);
    if (b < 1)
        b = 1;
    return b > n ? n : (uint32_t)b;
}

uint32_t sel_local_share(uint32_t budget) { return budget - budget / 2; }

int sel_params_validate(const struct sel_params *p, const struct selection_ops *s,
                        struct alisa_err *e)
{
    if (p->budget_tokens == 0 && !(p->sparsity >= 0.0 && p->sparsity < 1.0))
        return err_set(e, ALISA_EINVAL, "--sparsity %g not in [0, 1)", p->sparsity);
    for (uint32_t i = 0; s && i < SEL_KNOBS_MAX; i++) {
        double v = p->knob[i];
        if (v == 0)
            continue;
        if (i >= s->n_knobs)
            return err_set(e, ALISA_EINVAL, "selection %s has %u parameter%s of its own; a value "
                           "%g was given for parameter %u", s->name, s->n_knobs,
                           s->n_knobs == 1 ? "" : "s", v, i + 1);
        const struct sel_knob *k = &s->knobs[i];
        if (!(v >= k->min && v <= k->max) || (k->whole && v != floor(v))) {
            char range[64];
            if (k->max >= SEL_KNOB_UNBOUNDED)
                snprintf(range, sizeof range, "of at least %g", k->min);
            else
                snprintf(range, sizeof range, "in [%g, %g]", k->min, k->max);
            return err_set(e, ALISA_EINVAL, "--%s %g: selection %s takes %s %s", k->name, v,
                           s->name, k->whole ? "a whole number" : "a value", range);
        }
    }
    return 0;
}

int sel_knob_find(const struct selection_ops *s, const char *name)
{
    for (uint32_t i = 0; i < s->n_knobs; i++)
        if (strcmp(s->knobs[i].name, name) == 0)
            return (int)i;
    return -1;
}

double sel_knob_value(const struct sel_params *p, uint32_t i, double def_value)
{
    return p->knob[i] != 0 ? p->knob[i] : def_value;
}

void sel_estimate_of(const struct selection_ops *s, const struct sel_params *p,
                     struct sel_estimate *out)
{
    *out = (struct sel_estimate){SEL_ESTIMATE_EXACT, 0, 0, NULL};
    if (s->needs_present && s->estimate)
        s->estimate(p, out);
}

struct static_state {
    struct sel_params p;
    uint32_t retired_below; /* every token below this is already retired */
    uint32_t sinks;         /* streaming: leading tokens kept (its knob, default 4) */
    uint32_t stride;        /* strided: every stride-th older token (its knob; 0 = derived
                               from the budget) */
};

static int static_create(void **state, const struct sel_params *p, uint32_t max_len,
                         struct alisa_err *e)
{
    struct static_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory for selection state");
    s->p = *p;
    return 0;
}

static int streaming_create(void **state, const struct sel_params *p, uint32_t max_len,
                            struct alisa_err *e)
{
    int rc = static_create(state, p, max_len, e);
    if (!rc)
        ((struct static_state *)*state)->sinks = (uint32_t)sel_knob_value(p, 0, 4);
    return rc;
}

static int strided_create(void **state, const struct sel_params *p, uint32_t max_len,
                          struct alisa_err *e)
{
    int rc = static_create(state, p, max_len, e);
    if (!rc)
        ((struct static_state *)*state)->stride = (uint32_t)sel_knob_value(p, 0, 0);
    return rc;
}

static void static_destroy(void *state) { free(state); }

/* Retires [retired_below, limit) except tokens below keep_from (sinks). */
static uint32_t retire_range(struct static_state *s, uint32_t keep_from, uint32_t limit,
                             uint32_t *retired)
{
    uint32_t n = 0;
    uint32_t from = s->retired_below > keep_from ? s->retired_below : keep_from;
    for (uint32_t t = from; t < limit; t++)
        retired[n++] = t;
    if (limit > s->retired_below)
        s->retired_below = limit;
    return n;
}

static uint32_t dense_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                             uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    (void)present;
    (void)state;
    (void)retired;
    for (uint32_t t = 0; t <= pos; t++)
        out[t] = t;
    *n_retired = 0;
    *local_tokens = pos + 1;
    return pos + 1;
}

static uint32_t local_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                             uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    (void)present;
    struct static_state *s = state;
    uint32_t n = pos + 1, b = sel_budget(&s->p, n), start = n - b;
    for (uint32_t t = start; t < n; t++)
        out[t - start] = t;
    *n_retired = start > 1 ? retire_range(s, 0, start - 1, retired) : 0;
    *local_tokens = b;
    return b;
}

static uint32_t streaming_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                                 uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    (void)present;
    struct static_state *s = state;
    uint32_t n = pos + 1, b = sel_budget(&s->p, n);
    uint32_t sinks = s->sinks < b ? s->sinks : b - 1; /* pos itself always fits */
    uint32_t recent = b - sinks, start = n - recent, c = 0;
    for (uint32_t t = 0; t < sinks && t < start; t++)
        out[c++] = t;
    for (uint32_t t = start; t < n; t++)
        out[c++] = t;
    /* The configured sinks are never retired, even at steps whose budget is
     * too small to attend them all. */
    *n_retired = start > s->sinks + 1 ? retire_range(s, s->sinks, start - 1, retired) : 0;
    *local_tokens = recent;
    return c;
}

static uint32_t strided_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                               uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    (void)present;
    struct static_state *s = state;
    (void)retired;
    uint32_t n = pos + 1, b = sel_budget(&s->p, n);
    uint32_t local = sel_local_share(b), global = b - local, start = n - local, c = 0;
    uint32_t stride = s->stride;
    if (stride == 0 && global > 0)
        stride = (start + global - 1) / global; /* ceil: at most `global` multiples */
    if (global > 0 && stride > 0)
        for (uint32_t t = 0; t < start; t += stride)
            out[c++] = t;
    for (uint32_t t = start; t < n; t++)
        out[c++] = t;
    *n_retired = 0;
    *local_tokens = local;
    return c;
}

const struct selection_ops sel_dense_ops = {
    .name = "dense",
    .gathers = 0,
    .summary = "every token (no sparsity)",
    .create = static_create,
    .destroy = static_destroy,
    .select = dense_select,
};

const struct selection_ops sel_local_ops = {
    .name = "local",
    .budgeted = 1,
    .gathers = 1,
    .summary = "the B most recent tokens (sliding window); older tokens retired",
    .create = static_create,
    .destroy = static_destroy,
    .select = local_select,
};

const struct selection_ops sel_strided_ops = {
    .name = "strided",
    .budgeted = 1,
    .gathers = 1,
    .summary = "recent ceil(B/2) tokens plus every stride-th older token (Sparse Transformer)",
    .knobs = (const struct sel_knob[]){{"stride", 1, 1, SEL_KNOB_UNBOUNDED,
                                        "ceil(older / floor(B/2))",
                                        "keep every stride-th token before the recent ones"}},
    .n_knobs = 1,
    .create = strided_create,
    .destroy = static_destroy,
    .select = strided_select,
};

const struct selection_ops sel_streaming_ops = {
    .name = "streaming",
    .budgeted = 1,
    .gathers = 1,
    .summary = "StreamingLLM: `sinks` first tokens plus the B - sinks most recent; rest retired",
    .knobs = (const struct sel_knob[]){{"sinks", 1, 1, SEL_KNOB_UNBOUNDED, "4",
                                        "leading (attention sink) tokens always attended"}},
    .n_knobs = 1,
    .create = streaming_create,
    .destroy = static_destroy,
    .select = streaming_select,
};

const struct selection_ops *const selection_policies[SELECTION_N + 1] = {
    &sel_dense_ops, &sel_local_ops, &sel_strided_ops, &sel_streaming_ops,
    &sel_h2o_ops,   &sel_swa_ops,   &sel_topk_ops,      &sel_quest_ops,
    &sel_infinigen_ops, &sel_infllm_ops, NULL,
};

const struct selection_ops *selection_find(const char *name)
{
    for (size_t i = 0; selection_policies[i]; i++)
        if (strcmp(selection_policies[i]->name, name) == 0)
            return selection_policies[i];
    return NULL;
}
