/* Exact top-k selection (issue 45): at each step the B tokens with the
 * largest weights in the current query's own attention row (present), the
 * query's position always among them. What HiSparse's indexer approximates
 * (SGLang's sparse attention, DeepSeek's DSA: a lightweight scorer picks
 * the top-2,048 tokens each step); given the true row, as a trace stores
 * it, this is the upper bound of every such indexer at the same budget.
 *
 * Keeps no history and retires nothing: any token may be picked again.
 * Ties go to the more recent token, so the choice is a function of the row.
 */
#include <math.h>
#include <stdlib.h>

#include "selection.h"

/* A candidate: its weight in the present row, then its position. */
struct topk_cand {
    float w;
    uint32_t t;
};

struct topk_state {
    struct sel_params p;
    uint32_t max_len;
    struct topk_cand *cand; /* (max_len) scratch: the step's candidates */
    uint8_t *pick;          /* (max_len) scratch: 1 for a picked token */
};

static void topk_destroy(void *state)
{
    struct topk_state *s = state;
    if (!s)
        return;
    free(s->cand);
    free(s->pick);
    free(s);
}

static int topk_create(void **state, const struct sel_params *p, uint32_t max_len,
                       struct alisa_err *e)
{
    struct topk_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s || !(s->cand = malloc(max_len * sizeof *s->cand)) || !(s->pick = calloc(max_len, 1))) {
        topk_destroy(s);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for topk state (%u tokens)", max_len);
    }
    s->p = *p;
    s->max_len = max_len;
    return 0;
}

/* Heavier first; among equal weights the newer token first. */
static int by_weight_then_newest(const void *a, const void *b)
{
    const struct topk_cand *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return x->t < y->t ? 1 : x->t > y->t ? -1 : 0;
}

static uint32_t topk_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                            uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    struct topk_state *s = state;
    (void)retired;
    ALISA_ASSERT(present && pos < s->max_len);
    uint32_t n = pos + 1, b = sel_budget(&s->p, n);
    for (uint32_t t = 0; t < pos; t++) /* a NaN weight (never from a checked row) ranks last */
        s->cand[t] = (struct topk_cand){isnan(present[t]) ? -INFINITY : present[t], t};
    qsort(s->cand, pos, sizeof *s->cand, by_weight_then_newest);
    for (uint32_t i = 0; i + 1 < b; i++)
        s->pick[s->cand[i].t] = 1;
    s->pick[pos] = 1;
    uint32_t c = 0;
    for (uint32_t t = 0; t < n; t++)
        if (s->pick[t]) {
            out[c++] = t;
            s->pick[t] = 0;
        }
    *n_retired = 0;
    *local_tokens = 1;
    return c;
}

const struct selection_ops sel_topk_ops = {
    .name = "topk",
    .budgeted = 1,
    .gathers = 1,
    .needs_present = 1,
    .summary = "the B heaviest tokens of the step's own attention row (exact top-k: "
               "HiSparse's indexer at its upper bound)",
    .create = topk_create,
    .destroy = topk_destroy,
    .select = topk_select,
};
