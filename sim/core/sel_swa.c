/* ALISA's Sparse Window Attention (ALISA.md section 1): the k_l most recent
 * tokens plus the k_g tokens with the largest local attention sum S over the
 * last w steps, excluding the recent ones (no duplicates).
 *
 * The window w is k of the current step (the paper's default, ALISA.md 1:
 * it grows with the context as k does), or its knob window-steps when given. S is
 * kept incrementally in fixed point (sel_weight_fixed): each observed row is
 * added and kept in a ring; before a selection the rows beyond the last w
 * are subtracted, exactly. k grows by at most one a step and each step adds
 * a row, so a row once out of the window is never needed again. Prefill
 * keeps the last w prompt rows, w taken at the first decode step. Tokens not
 * attended at a step get 0 for it. Ties in S go to the more recent token.
 * Retires nothing: any old token can come back through the global set.
 */
#include <stdlib.h>
#include <string.h>

#include "selection.h"

struct swa_row {
    uint32_t *ids;  /* (count) tokens with weight in this row */
    int64_t *w;     /* (count) their weights, fixed point */
    uint32_t count;
    uint32_t cap;
};

struct swa_state {
    struct sel_params p;
    uint32_t max_len;
    uint32_t cap;         /* ring slots: the largest window + 1 */
    int64_t *sum;         /* (max_len) local attention sum S, fixed point */
    struct swa_row *ring; /* (cap) rows, oldest at ring_head */
    uint32_t ring_len;    /* rows held */
    uint32_t ring_head;   /* oldest row */
    uint32_t *heap;       /* (max_len) top-k scratch */
    uint8_t *mark;        /* (max_len) scratch: selected */
    int oom;              /* an allocation in observe failed: S is incomplete */
};

static void swa_destroy(void *state)
{
    struct swa_state *s = state;
    if (!s)
        return;
    for (uint32_t i = 0; s->ring && i < s->cap; i++) {
        free(s->ring[i].ids);
        free(s->ring[i].w);
    }
    free(s->ring);
    free(s->sum);
    free(s->heap);
    free(s->mark);
    free(s);
}

static int swa_failed(const void *state) { return ((const struct swa_state *)state)->oom; }

/* The window at context length n: its knob window-steps, else k (ALISA.md 1). */
static uint32_t swa_window(const struct swa_state *s, uint32_t n)
{
    uint32_t w = (uint32_t)sel_knob_value(&s->p, 0, sel_local_share(sel_budget(&s->p, n)));
    return w ? w : 1;
}

static int swa_create(void **state, const struct sel_params *p, uint32_t max_len,
                      struct alisa_err *e)
{
    struct swa_state *s = calloc(1, sizeof *s);
    *state = s;
    if (s) {
        s->p = *p;
        s->max_len = max_len;
        uint32_t w = swa_window(s, max_len); /* k never shrinks as n grows */
        s->cap = (w < max_len ? w : max_len) + 1;
    }
    if (!s || !(s->sum = calloc(max_len, sizeof *s->sum)) ||
        !(s->heap = malloc(max_len * sizeof *s->heap)) || !(s->mark = calloc(max_len, 1)) ||
        !(s->ring = calloc(s->cap, sizeof *s->ring))) {
        swa_destroy(s);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for swa state (%u tokens)", max_len);
    }
    return 0;
}

/* Subtracts the oldest row from S and frees its slot. */
static void swa_pop(struct swa_state *s)
{
    struct swa_row *r = &s->ring[s->ring_head];
    for (uint32_t i = 0; i < r->count; i++)
        s->sum[r->ids[i]] -= r->w[i];
    r->count = 0;
    s->ring_head = (s->ring_head + 1) % s->cap;
    s->ring_len--;
}

/* Adds a row to S and the ring (the oldest goes when the ring is full). */
static void swa_push(struct swa_state *s, const uint32_t *ids, const float *w, const float *dense,
                     uint32_t count)
{
    if (s->ring_len == s->cap)
        swa_pop(s);
    struct swa_row *r = &s->ring[(s->ring_head + s->ring_len) % s->cap];
    s->ring_len++;
    uint32_t need = 0;
    for (uint32_t i = 0; i < count; i++)
        need += (dense ? dense[i] : w[i]) != 0.0f;
    if (need > r->cap) {
        uint32_t *ni = realloc(r->ids, need * sizeof *ni);
        if (ni)
            r->ids = ni;
        int64_t *nw = realloc(r->w, need * sizeof *nw);
        if (nw)
            r->w = nw;
        if (!ni || !nw) {
            s->oom = 1;
            r->count = 0;
            return;
        }
        r->cap = need;
    }
    r->count = 0;
    for (uint32_t i = 0; i < count; i++) {
        float x = dense ? dense[i] : w[i];
        uint32_t id = dense ? i : ids[i];
        if (x == 0.0f)
            continue;
        int64_t fx = sel_weight_fixed(x);
        r->ids[r->count] = id;
        r->w[r->count++] = fx;
        s->sum[id] += fx;
    }
}

static void swa_observe_prefill(void *state, uint32_t pos, const float *row, uint32_t prompt_len)
{
    struct swa_state *s = state;
    if (pos + swa_window(s, prompt_len + 1) < prompt_len) /* only the last w prompt rows */
        return;
    swa_push(s, NULL, NULL, row, pos + 1);
}

static void swa_observe(void *state, uint32_t pos, const uint32_t *ids, const float *w,
                        uint32_t count)
{
    struct swa_state *s = state;
    (void)pos;
    swa_push(s, ids, w, NULL, count);
}

/* a ranks below b: smaller S, or equal S and older. */
static int swa_below(const int64_t *sum, uint32_t a, uint32_t b)
{
    return sum[a] < sum[b] || (sum[a] == sum[b] && a < b);
}

static void heap_sift_down(uint32_t *h, uint32_t n, uint32_t i, const int64_t *sum)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && swa_below(sum, h[l], h[m]))
            m = l;
        if (r < n && swa_below(sum, h[r], h[m]))
            m = r;
        if (m == i)
            return;
        uint32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static uint32_t swa_select(void *state, uint32_t pos, const float *present, uint32_t *out,
                           uint32_t *retired, uint32_t *n_retired, uint32_t *local_tokens)
{
    (void)present;
    struct swa_state *s = state;
    (void)retired;
    uint32_t n = pos + 1, b = sel_budget(&s->p, n);
    uint32_t local = sel_local_share(b), global = b - local, start = n - local;
    for (uint32_t w = swa_window(s, n); s->ring_len > w;) /* S over the last w rows */
        swa_pop(s);
    /* Top-`global` of S among tokens 0..start-1: a min-heap of the best so
     * far. Newest first: a later (older) token with an equal S never beats
     * the heap top, so the many zero-sum tokens cost O(1) each. */
    uint32_t hn = 0;
    for (uint32_t t = start; t-- > 0 && global > 0;) {
        if (hn < global) {
            s->heap[hn++] = t;
            if (hn == global)
                for (uint32_t i = hn / 2 + 1; i-- > 0;)
                    heap_sift_down(s->heap, hn, i, s->sum);
        } else if (swa_below(s->sum, s->heap[0], t)) {
            s->heap[0] = t;
            heap_sift_down(s->heap, hn, 0, s->sum);
        }
    }
    for (uint32_t i = 0; i < hn; i++)
        s->mark[s->heap[i]] = 1;
    uint32_t c = 0;
    for (uint32_t t = 0; t < start; t++)
        if (s->mark[t]) {
            out[c++] = t;
            s->mark[t] = 0;
        }
    for (uint32_t t = start; t < n; t++)
        out[c++] = t;
    *n_retired = 0;
    *local_tokens = local;
    return c;
}

const struct selection_ops sel_swa_ops = {
    .name = "swa",
    .budgeted = 1,
    .failed = swa_failed,
    .gathers = 1,
    .summary = "ALISA SWA: recent k + top-k by attention summed over the last w steps "
               "(k = round(n*(1-sparsity)/2))",
    .knobs = (const struct sel_knob[]){{"window-steps", 1, 1, SEL_KNOB_UNBOUNDED,
                                        "k of the current step, growing with the context",
                                        "w: steps whose attention the local sum holds"}},
    .n_knobs = 1,
    .create = swa_create,
    .destroy = swa_destroy,
    .observe_prefill = swa_observe_prefill,
    .select = swa_select,
    .observe = swa_observe,
};
