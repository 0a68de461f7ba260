/* H2O selection (Zhang et al. 2023): a cache of B tokens, the recent
 * ceil(B/2) protected, the rest the heavy hitters by attention accumulated
 * over all history (prefill rows included).
 *
 * When the cache exceeds B the token with the smallest accumulated score
 * outside the recent window is evicted (ties: the oldest) and retired for
 * good, as in H2O. Scores only grow for tokens in the cache. One excess
 * token (every step but the first) costs one scan; the first decode step's
 * many go by one sort of the candidates, not a scan each.
 */
#include <stdlib.h>

#include "selection.h"

/* An eviction candidate: its score, then its position. */
struct h2o_cand {
    double score;
    uint32_t t;
};

struct h2o_state {
    struct sel_params p;
    uint32_t max_len;
    uint8_t *in_cache;      /* (max_len) 1 while the token is cached */
    double *score;          /* (max_len) accumulated attention */
    struct h2o_cand *cand;  /* (max_len) scratch for a many-token eviction */
    uint32_t size;          /* tokens in the cache */
};

static void h2o_destroy(void *state)
{
    struct h2o_state *s = state;
    if (!s)
        return;
    free(s->in_cache);
    free(s->score);
    free(s->cand);
    free(s);
}

static int h2o_create(void **state, const struct sel_params *p, uint32_t max_len,
                      struct alisa_err *e)
{
    struct h2o_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s || !(s->in_cache = calloc(max_len, 1)) ||
        !(s->score = calloc(max_len, sizeof *s->score)) ||
        !(s->cand = malloc(max_len * sizeof *s->cand))) {
        h2o_destroy(s);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for h2o state (%u tokens)", max_len);
    }
    s->p = *p;
    s->max_len = max_len;
    return 0;
}

static void h2o_admit(struct h2o_state *s, uint32_t pos)
{
    ALISA_ASSERT(pos < s->max_len);
    /* Prompt tokens enter the cache as the prefill produces them. */
    for (uint32_t t = 0; t <= pos; t++)
        if (!s->in_cache[t] && s->score[t] >= 0) {
            s->in_cache[t] = 1;
            s->size++;
        }
}

static void h2o_observe_prefill(void *state, uint32_t pos, const float *row, uint32_t prompt_len)
{
    struct h2o_state *s = state;
    (void)prompt_len;
    h2o_admit(s, pos);
    for (uint32_t t = 0; t <= pos; t++)
        if (s->in_cache[t])
            s->score[t] += row[t];
}

/* Lowest score first; among equal scores the oldest. */
static int by_score_then_oldest(const void *a, const void *b)
{
    const struct h2o_cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

static void h2o_evict(struct h2o_state *s, uint32_t t, uint32_t *retired, uint32_t *nr)
{
    s->in_cache[t] = 0;
    s->score[t] = -1.0; /* marks "evicted": never admitted again */
    s->size--;
    retired[(*nr)++] = t;
}

static uint32_t h2o_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                           uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    (void)present;
    struct h2o_state *s = state;
    uint32_t n = pos + 1, b = sel_budget(&s->p, n), local = sel_local_share(b);
    h2o_admit(s, pos);
    uint32_t nr = 0;
    if (s->size == b + 1) { /* the usual step: one scan for the lowest */
        uint32_t victim = UINT32_MAX;
        for (uint32_t t = 0; t + local < n; t++)
            if (s->in_cache[t] && (victim == UINT32_MAX || s->score[t] < s->score[victim]))
                victim = t;
        ALISA_ASSERT(victim != UINT32_MAX);
        h2o_evict(s, victim, retired, &nr);
    } else if (s->size > b) { /* many at once: the candidates sorted */
        uint32_t m = 0, excess = s->size - b;
        for (uint32_t t = 0; t + local < n; t++)
            if (s->in_cache[t])
                s->cand[m++] = (struct h2o_cand){s->score[t], t};
        ALISA_ASSERT(m >= excess);
        qsort(s->cand, m, sizeof *s->cand, by_score_then_oldest);
        for (uint32_t i = 0; i < excess; i++)
            h2o_evict(s, s->cand[i].t, retired, &nr);
    }
    uint32_t c = 0;
    for (uint32_t t = 0; t < n; t++)
        if (s->in_cache[t])
            out[c++] = t;
    *n_retired = nr;
    *local_tokens = local;
    return c;
}

static void h2o_observe(void *state, uint32_t pos, const uint32_t *ids, const float *w,
                        uint32_t count)
{
    struct h2o_state *s = state;
    (void)pos;
    for (uint32_t i = 0; i < count; i++)
        if (s->in_cache[ids[i]])
            s->score[ids[i]] += w[i];
}

const struct selection_ops sel_h2o_ops = {
    .name = "h2o",
    .budgeted = 1,
    .gathers = 1,
    .summary = "H2O: recent ceil(B/2) + heavy hitters by attention summed over all history; "
               "evicted tokens retired",
    .create = h2o_create,
    .destroy = h2o_destroy,
    .observe_prefill = h2o_observe_prefill,
    .select = h2o_select,
    .observe = h2o_observe,
};
