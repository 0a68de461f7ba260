/* Selections that read the current step's own attention row (issue 45):
 * each ranks tokens by the row the query produces, so given the true row (a
 * trace's, or the CPU executor's exact scores) each is the upper bound of
 * the method it stands for, whose real form ranks by an estimate.
 *
 * - topk: the B heaviest tokens (HiSparse's indexer, DeepSeek's DSA: a
 *   lightweight scorer picks the top tokens each step).
 * - quest: pages of page-size tokens ranked by their heaviest token, the top
 *   max(3, B / page-size) kept (Quest, mit-han-lab/Quest,
 *   evaluation/quest_attention.py, local_heavy_hitter_mask: pages ranked by
 *   the largest upper bound of q.k within them), the query's own page always
 *   (Quest does not force it); Quest's first two layers run dense, which a
 *   per-stream selection cannot see.
 * - infinigen: the tokens within alpha of the row's largest logit, at most
 *   B - 1 of them, the heaviest first (InfiniGen, snu-comparch/InfiniGen,
 *   speedup/infinigen/infinigen/kv_selection_controller.py,
 *   speculate_attention: count above max - alpha, then top-k capped at
 *   max_num_kv), speculated a layer ahead, so its loads keep their prefetch.
 *   InfiniGen thresholds each head's logits and takes each head's top-k of
 *   the heads' mean count; a head-mean row (a trace's) makes it one
 *   threshold on the mean weights, exact for one head only.
 * - infllm: the init-tokens first tokens, a local window of ceil(B / 2) and
 *   the memory blocks of block-size tokens between them that fit the rest of
 *   B, ranked by their repr-tokens heaviest tokens' weight in the row (InfLLM,
 *   thunlp/InfLLM, inf_llm/attention/context_manager.py: calc_block_topk
 *   ranks blocks by the query against the mean of representative keys that
 *   get_block_k chose by the local score when the block formed; here the
 *   representatives are the block's heaviest in the current row, an upper
 *   bound; the tokens past the local window not yet in a whole block are
 *   always attended, as get_global_hidden_and_mask's remainder). InfLLM's
 *   local window is a fixed n_local (4096), here half the budget, so the
 *   budget alone scales it. Defaults are its Mistral configuration's
 *   (block_size 128, n_init 128, repr_topk 4; config/mistral-inf-llm.yaml).
 *
 * None keeps history or retires a token: any token may be picked again.
 * Ties go to the more recent token (page), so a choice is a function of the row.
 */
#include <math.h>
#include <stdlib.h>

#include "selection.h"

/* A candidate: its weight in the present row, then its position (a token's,
 * or a page's first token). */
struct present_cand {
    float w;
    uint32_t t;
};

struct present_state {
    struct sel_params p;
    uint32_t max_len;
    double knob;              /* quest: page size, tokens; infinigen: alpha, nats; infllm:
                                 block size, tokens */
    uint32_t repr, init;      /* infllm: representative tokens a block, initial tokens */
    float *scratch;           /* (max_len) infllm: one block's weights, sorted */
    struct present_cand *cand; /* (max_len) scratch: the step's candidates */
    uint8_t *pick;            /* (max_len) scratch: 1 for a picked token */
};

static void present_destroy(void *state)
{
    struct present_state *s = state;
    if (!s)
        return;
    free(s->cand);
    free(s->pick);
    free(s->scratch);
    free(s);
}

static int present_create(void **state, const struct sel_params *p, uint32_t max_len,
                          double knob, struct alisa_err *e)
{
    struct present_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s || !(s->cand = malloc(max_len * sizeof *s->cand)) || !(s->pick = calloc(max_len, 1))) {
        present_destroy(s);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for a selection's state (%u tokens)",
                       max_len);
    }
    s->p = *p;
    s->max_len = max_len;
    s->knob = knob;
    return 0;
}

static int topk_create(void **state, const struct sel_params *p, uint32_t max_len,
                       struct alisa_err *e)
{
    return present_create(state, p, max_len, 0, e);
}

static int quest_create(void **state, const struct sel_params *p, uint32_t max_len,
                        struct alisa_err *e)
{
    return present_create(state, p, max_len, sel_knob_value(p, 0, 16), e);
}

static int infinigen_create(void **state, const struct sel_params *p, uint32_t max_len,
                            struct alisa_err *e)
{
    return present_create(state, p, max_len, sel_knob_value(p, 0, 4), e);
}

/* Heavier first; among equal weights the newer first. */
static int by_weight_then_newest(const void *a, const void *b)
{
    const struct present_cand *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return x->t < y->t ? 1 : x->t > y->t ? -1 : 0;
}

/* A row's weight as ranked: a NaN (never from a checked row) ranks last. */
static float ranked(float w) { return isnan(w) ? -INFINITY : w; }

/* Sorts tokens 0..n-1 of row into s->cand, heaviest first. */
static void rank_tokens(struct present_state *s, const float *row, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++)
        s->cand[t] = (struct present_cand){ranked(row[t]), t};
    qsort(s->cand, n, sizeof *s->cand, by_weight_then_newest);
}

/* Writes the picked tokens 0..pos ascending into out, clears the marks,
 * returns the count. */
static uint32_t emit_picks(struct present_state *s, uint32_t pos, uint32_t *out)
{
    uint32_t c = 0;
    for (uint32_t t = 0; t <= pos; t++)
        if (s->pick[t]) {
            out[c++] = t;
            s->pick[t] = 0;
        }
    return c;
}

static uint32_t topk_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                            uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    struct present_state *s = state;
    (void)retired;
    ALISA_ASSERT(present && pos < s->max_len);
    uint32_t b = sel_budget(&s->p, pos + 1);
    rank_tokens(s, present, pos);
    for (uint32_t i = 0; i + 1 < b; i++)
        s->pick[s->cand[i].t] = 1;
    s->pick[pos] = 1;
    *n_retired = 0;
    *local_tokens = 1;
    return emit_picks(s, pos, out);
}

static uint32_t quest_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                             uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    struct present_state *s = state;
    (void)retired;
    ALISA_ASSERT(present && pos < s->max_len);
    uint32_t n = pos + 1, b = sel_budget(&s->p, n), page = (uint32_t)s->knob;
    uint32_t pages = (n + page - 1) / page, own = pos / page;
    uint32_t keep = b / page > 3 ? b / page : 3;
    if (keep > pages)
        keep = pages;
    /* every page but the query's own, by its heaviest token */
    uint32_t m = 0;
    for (uint32_t g = 0; g < pages; g++) {
        if (g == own)
            continue;
        float w = -INFINITY;
        for (uint32_t t = g * page; t < (g + 1) * page && t < n; t++)
            w = fmaxf(w, ranked(present[t]));
        s->cand[m++] = (struct present_cand){w, g * page};
    }
    qsort(s->cand, m, sizeof *s->cand, by_weight_then_newest);
    for (uint32_t i = 0; i + 1 < keep; i++)
        for (uint32_t t = s->cand[i].t; t < s->cand[i].t + page && t < n; t++)
            s->pick[t] = 1;
    for (uint32_t t = own * page; t <= pos; t++)
        s->pick[t] = 1;
    *n_retired = 0;
    *local_tokens = pos - own * page + 1;
    return emit_picks(s, pos, out);
}

static int infllm_create(void **state, const struct sel_params *p, uint32_t max_len,
                         struct alisa_err *e)
{
    int rc = present_create(state, p, max_len, sel_knob_value(p, 0, 128), e);
    struct present_state *s = *state;
    if (!rc && !(s->scratch = malloc(max_len * sizeof *s->scratch))) {
        present_destroy(s);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for infllm's state (%u tokens)", max_len);
    }
    if (!rc) {
        s->repr = (uint32_t)sel_knob_value(p, 1, 4);
        s->init = (uint32_t)sel_knob_value(p, 2, 128);
    }
    return rc;
}

static int by_weight_descending(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

static uint32_t infllm_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                              uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    struct present_state *s = state;
    (void)retired;
    ALISA_ASSERT(present && pos < s->max_len);
    uint32_t n = pos + 1, b = sel_budget(&s->p, n), bs = (uint32_t)s->knob;
    uint32_t local = sel_local_share(b), start = n - local; /* the local window */
    uint32_t init = s->init < start ? s->init : start;
    uint32_t blocks = (start - init) / bs, rem = init + blocks * bs; /* remainder from rem */
    uint32_t fixed = init + (start - rem) + local;
    uint32_t keep = b > fixed ? (b - fixed) / bs : 0;
    for (uint32_t g = 0; g < blocks; g++) { /* a block's weight: its repr heaviest tokens */
        uint32_t first = init + g * bs;
        for (uint32_t i = 0; i < bs; i++)
            s->scratch[i] = ranked(present[first + i]);
        qsort(s->scratch, bs, sizeof *s->scratch, by_weight_descending);
        double w = 0;
        for (uint32_t i = 0; i < s->repr && i < bs; i++)
            w += s->scratch[i];
        s->cand[g] = (struct present_cand){(float)w, first};
    }
    qsort(s->cand, blocks, sizeof *s->cand, by_weight_then_newest);
    for (uint32_t i = 0; i < keep && i < blocks; i++)
        for (uint32_t t = s->cand[i].t; t < s->cand[i].t + bs; t++)
            s->pick[t] = 1;
    for (uint32_t t = 0; t < init; t++)
        s->pick[t] = 1;
    for (uint32_t t = rem; t < n; t++) /* the remainder and the local window */
        s->pick[t] = 1;
    *n_retired = 0;
    *local_tokens = local;
    return emit_picks(s, pos, out);
}

static uint32_t infinigen_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                                 uint32_t *retired, uint32_t *n_retired,
                                 uint32_t *local_tokens)
{
    struct present_state *s = state;
    (void)retired;
    ALISA_ASSERT(present && pos < s->max_len);
    uint32_t b = sel_budget(&s->p, pos + 1);
    rank_tokens(s, present, pos);
    /* w_t = exp(logit_t) / Z, so logit_t > max - alpha is w_t > w_max e^-alpha */
    uint32_t count = 0;
    if (pos > 0) {
        float thr = s->cand[0].w * (float)exp(-s->knob);
        while (count < pos && s->cand[count].w > thr)
            count++;
    }
    for (uint32_t i = 0; i < count && i + 1 < b; i++)
        s->pick[s->cand[i].t] = 1;
    s->pick[pos] = 1;
    *n_retired = 0;
    *local_tokens = 1;
    return emit_picks(s, pos, out);
}

const struct selection_ops sel_topk_ops = {
    .name = "topk",
    .budgeted = 1,
    .gathers = 1,
    .needs_present = 1,
    .summary = "the B heaviest tokens of the step's own attention row (exact top-k: "
               "HiSparse's indexer at its upper bound)",
    .create = topk_create,
    .destroy = present_destroy,
    .select = topk_select,
};

static const struct sel_knob quest_knobs[] = {
    {"page-size", 1, 1, 4096, "16", "tokens a page (ranked whole by its heaviest token)"},
    {"bounds", 1, 1, 1, "the exact row, Quest's upper bound",
     "1: pages ranked by Quest's own estimate, each page's min/max keys against the query "
     "(the executor computes it; alisa sim prices it, the trace's exact row selecting)"},
    {"every-layer", 1, 1, 1, "its first two layers dense, as its code runs them",
     "1: select in every layer, the first two too"},
};

/* The first two layers dense unless --every-layer 1 (knob 2 of both): Quest's
 * evaluation/quest_attention.py (`q_len > 1 or self.layer_id < 2`: full
 * attention) and quest/models/llama.py (`_quest_skip_layer = 2`);
 * InfiniGen's flex_opt.py (`partial_weight_ratio` and the prefetch buffer
 * only for layer_id > 1) and modeling_llama_ours.py (inputs passed on from
 * layer 1, so layer 2 is the first speculated). */
static uint32_t first_two_dense(const struct sel_params *p)
{
    return sel_knob_value(p, 2, 0) == 1 ? 0 : 2;
}

/* Quest's estimate (--bounds 1): each page's upper bound of q.k, channel by
 * channel the page's largest key where the query is positive and its
 * smallest elsewhere (mit-han-lab/Quest, quest/tests/test_estimate.py,
 * _ref_cpu_estimate, the reference of the decode_estimate kernel that
 * quest/models/QuestAttention.py calls before decode_topk). Quest takes
 * each head's top pages by the raw bound; one set per layer here, so the
 * executor scales each head's bounds as logits, softmaxes them over pages
 * and averages the heads (with one-token pages, exactly the present row). */
static void quest_estimate(const struct sel_params *p, struct sel_estimate *out)
{
    if (sel_knob_value(p, 1, 0) == 1)
        *out = (struct sel_estimate){SEL_ESTIMATE_PAGE_BOUNDS, (uint32_t)sel_knob_value(p, 0, 16),
                                     0, "bounds"};
}

/* The unit quest picks whole: a page. */
static uint32_t quest_unit(const struct sel_params *p, uint32_t *origin)
{
    *origin = 0;
    return (uint32_t)sel_knob_value(p, 0, 16);
}

const struct selection_ops sel_quest_ops = {
    .name = "quest",
    .budgeted = 1,
    .gathers = 1,
    .needs_present = 1,
    .above_budget = 1,
    .below_budget = 1,
    .summary = "Quest: the max(3, B / page) pages of the step's own row with the heaviest "
               "token, the query's page always (upper bound: exact scores)",
    .knobs = quest_knobs,
    .n_knobs = 3,
    .estimate = quest_estimate,
    .unit = quest_unit,
    .dense_layers = first_two_dense,
    .create = quest_create,
    .destroy = present_destroy,
    .select = quest_select,
};

static const struct sel_knob infinigen_knobs[] = {
    {"alpha", 0, 0.01, 50, "4",
     "keep tokens within alpha of the row's largest logit (at most B)"},
    {"partial-ratio", 0, 0.01, 1, "the exact row, InfiniGen's upper bound",
     "score with InfiniGen's own speculation: this share of each head's channels (0.2 in its "
     "scripts) after skewing by the prompt's queries, the query speculated from the layer "
     "before's input (the executor computes it; alisa sim prices it, the trace's exact row "
     "selecting)"},
    {"every-layer", 1, 1, 1, "its first two layers dense, as its code runs them",
     "1: select in every layer, the first two too"},
};

/* InfiniGen's estimate (--partial-ratio R): each head's scores from R of its
 * channels, in the basis that skews the prompt's queries
 * (snu-comparch/InfiniGen, speedup/infinigen/infinigen/skewing_controller.py
 * skew, partial_weight_generation_controller.py
 * partial_weight_index_generation, kv_selection_controller.py
 * speculate_attention), the query speculated from the layer before's
 * normed input (modeling_llama_ours.py, previous_hidden_states); the
 * executor computes it (cpu_skew_basis, backend_cpu.c ig_speculate). */
static void infinigen_estimate(const struct sel_params *p, struct sel_estimate *out)
{
    double r = sel_knob_value(p, 1, 0);
    if (r > 0)
        *out = (struct sel_estimate){SEL_ESTIMATE_PARTIAL, 0, r, "partial-ratio"};
}

const struct selection_ops sel_infinigen_ops = {
    .name = "infinigen",
    .budgeted = 1,
    .gathers = 1,
    .needs_present = 1,
    .present_ahead = 1,
    .below_budget = 1,
    .summary = "InfiniGen: tokens within alpha of the row's largest logit, at most B, "
               "speculated a layer ahead (upper bound: the exact row)",
    .knobs = infinigen_knobs,
    .n_knobs = 3,
    .estimate = infinigen_estimate,
    .dense_layers = first_two_dense,
    .create = infinigen_create,
    .destroy = present_destroy,
    .select = infinigen_select,
};

/* The unit infllm picks whole: a memory block, the first starting after the
 * initial tokens. */
static uint32_t infllm_unit(const struct sel_params *p, uint32_t *origin)
{
    *origin = (uint32_t)sel_knob_value(p, 2, 128);
    return (uint32_t)sel_knob_value(p, 0, 128);
}

static const struct sel_knob infllm_knobs[] = {
    {"block-size", 1, 1, 65536, "128", "tokens a memory block"},
    {"repr-tokens", 1, 1, 65536, "4", "a block's representative tokens (its heaviest)"},
    {"init-tokens", 1, 1, SEL_KNOB_UNBOUNDED, "128", "initial tokens always attended"},
};

const struct selection_ops sel_infllm_ops = {
    .name = "infllm",
    .budgeted = 1,
    .gathers = 1,
    .needs_present = 1,
    .above_budget = 1,
    .summary = "InfLLM: initial tokens, a local window of ceil(B/2) and the memory blocks "
               "whose representative tokens weigh most (upper bound: exact scores)",
    .knobs = infllm_knobs,
    .n_knobs = 3,
    .unit = infllm_unit,
    .create = infllm_create,
    .destroy = present_destroy,
    .select = infllm_select,
};
