/* What a selection picks on a trace (contract in selstats.h). */
#include "selstats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "trace_stats.h"

const uint32_t selstats_lag[SELSTATS_LAGS] = {1, 32};
#define RING 33 /* the last 33 steps' picks of a stream: lag 32 reaches back 32 */

/* One (layer, bin) cell's sums. */
struct cell {
    uint64_t rows, picks, old, sink;
    double sparsity;
    uint64_t age[SELSTATS_AGE_BINS];
    double persist[SELSTATS_LAGS];
    uint64_t persist_n[SELSTATS_LAGS];
};

struct stream {
    uint64_t *ring;           /* RING bitsets of `words` words */
    int64_t ring_pos[RING];   /* the query position each slot holds, -1: none */
};

struct selstats {
    struct selstats_params p;
    uint32_t n_seqs, n_layers, max_len, words;
    struct stream *streams;   /* (n_seqs x n_layers) */
    struct cell *cells;       /* (n_layers x SELSTATS_BINS) */
};

int selstats_create(struct selstats **out, uint32_t n_seqs, uint32_t n_layers, uint32_t max_len,
                    const struct selstats_params *p, struct alisa_err *e)
{
    *out = NULL;
    if (!(p->alpha > 0 && p->alpha <= 1))
        return err_set(e, ALISA_EINVAL, "alpha %g: expected a share in (0, 1]", p->alpha);
    if (!n_seqs || !n_layers || !max_len)
        return err_set(e, ALISA_EINVAL, "selection statistics of an empty trace");
    struct selstats *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory for the selection statistics");
    s->p = *p;
    s->n_seqs = n_seqs;
    s->n_layers = n_layers;
    s->max_len = max_len;
    s->words = (max_len + 63) / 64;
    size_t n_streams = (size_t)n_seqs * n_layers;
    s->streams = calloc(n_streams, sizeof *s->streams);
    s->cells = calloc((size_t)n_layers * SELSTATS_BINS, sizeof *s->cells);
    int ok = s->streams && s->cells;
    for (size_t i = 0; ok && i < n_streams; i++) {
        ok = (s->streams[i].ring = calloc((size_t)RING * s->words, sizeof(uint64_t))) != NULL;
        for (int k = 0; k < RING; k++)
            s->streams[i].ring_pos[k] = -1;
    }
    if (!ok) {
        selstats_destroy(s);
        return err_set(e, ALISA_ENOMEM, "out of memory for the selection statistics of %u "
                       "streams of %u tokens", (unsigned)n_streams, max_len);
    }
    *out = s;
    return 0;
}

void selstats_destroy(struct selstats *s)
{
    if (!s)
        return;
    if (s->streams)
        for (size_t i = 0; i < (size_t)s->n_seqs * s->n_layers; i++)
            free(s->streams[i].ring);
    free(s->streams);
    free(s->cells);
    free(s);
}

void selstats_add(struct selstats *s, uint32_t seq, uint32_t layer, uint32_t pos,
                  uint32_t prompt_len, uint32_t gen_len, const uint32_t *ids, uint32_t n_ids,
                  uint32_t local_tokens, const float *row)
{
    if (seq >= s->n_seqs || layer >= s->n_layers || pos == 0 || pos >= s->max_len)
        return;
    uint32_t step = pos >= prompt_len ? pos - prompt_len : 0;
    uint32_t bin = gen_len ? (uint32_t)((uint64_t)step * SELSTATS_BINS / gen_len) : 0;
    if (bin >= SELSTATS_BINS)
        bin = SELSTATS_BINS - 1;
    struct cell *c = &s->cells[(size_t)layer * SELSTATS_BINS + bin];
    c->rows++;
    c->sparsity += stats_row_sparsity(row, pos + 1, TRACE_SPARSITY_REL);
    /* the global picks: older than the local window */
    uint32_t bound = local_tokens <= pos + 1 ? pos + 1 - local_tokens : 0;
    struct stream *st = &s->streams[(size_t)seq * s->n_layers + layer];
    uint64_t *g = st->ring + (size_t)(pos % RING) * s->words;
    memset(g, 0, s->words * sizeof *g);
    st->ring_pos[pos % RING] = pos;
    double old_bound = s->p.alpha * (pos + 1);
    for (uint32_t i = 0; i < n_ids; i++) {
        uint32_t id = ids[i];
        if (id >= bound || id > pos)
            continue;
        g[id / 64] |= 1ull << (id % 64);
        c->picks++;
        c->old += id < old_bound;
        c->sink += id < s->p.sinks;
        uint32_t a = (uint32_t)((double)(pos - id) / pos * SELSTATS_AGE_BINS);
        c->age[a < SELSTATS_AGE_BINS ? a : SELSTATS_AGE_BINS - 1]++;
    }
    for (int k = 0; k < SELSTATS_LAGS; k++) {
        uint32_t d = selstats_lag[k];
        if (pos < d || st->ring_pos[(pos - d) % RING] != (int64_t)(pos - d))
            continue;
        const uint64_t *h = st->ring + (size_t)((pos - d) % RING) * s->words;
        uint64_t was = 0, kept = 0;
        for (uint32_t w = 0; w < s->words; w++) {
            was += (uint64_t)__builtin_popcountll(h[w]);
            kept += (uint64_t)__builtin_popcountll(h[w] & g[w]);
        }
        if (was) {
            c->persist[k] += (double)kept / was;
            c->persist_n[k]++;
        }
    }
}

void selstats_summary(const struct selstats *s, uint32_t layer, uint32_t bin,
                      struct selstats_summary *out)
{
    memset(out, 0, sizeof *out);
    uint64_t age[SELSTATS_AGE_BINS] = {0}, old = 0, sink = 0;
    double sparsity = 0, persist[SELSTATS_LAGS] = {0};
    for (uint32_t l = 0; l < s->n_layers; l++) {
        if (layer != UINT32_MAX && l != layer)
            continue;
        for (uint32_t b = 0; b < SELSTATS_BINS; b++) {
            if (bin != UINT32_MAX && b != bin)
                continue;
            const struct cell *c = &s->cells[(size_t)l * SELSTATS_BINS + b];
            out->rows += c->rows;
            out->picks += c->picks;
            sparsity += c->sparsity;
            old += c->old;
            sink += c->sink;
            for (int a = 0; a < SELSTATS_AGE_BINS; a++)
                age[a] += c->age[a];
            for (int k = 0; k < SELSTATS_LAGS; k++) {
                persist[k] += c->persist[k];
                out->persist_n[k] += c->persist_n[k];
            }
        }
    }
    out->sparsity = out->rows ? sparsity / out->rows : NAN;
    out->picks_per_row = out->rows ? (double)out->picks / out->rows : NAN;
    out->old_share = out->picks ? (double)old / out->picks : NAN;
    out->sink_share = out->picks ? (double)sink / out->picks : NAN;
    out->age_median = NAN;
    if (out->picks) {
        uint64_t cum = 0;
        for (int a = 0; a < SELSTATS_AGE_BINS; a++) {
            cum += age[a];
            if (2 * cum >= out->picks) {
                out->age_median = (a + 0.5) / SELSTATS_AGE_BINS;
                break;
            }
        }
    }
    for (int k = 0; k < SELSTATS_LAGS; k++)
        out->persist[k] = out->persist_n[k] ? persist[k] / out->persist_n[k] : NAN;
    /* id below x pos <=> age (pos - id) / pos above 1 - x: the oldest bins */
    uint64_t cum = 0;
    for (int k = 1; k <= SELSTATS_AGE_BINS; k++) {
        cum += age[SELSTATS_AGE_BINS - k];
        out->pick_cdf[k] = out->picks ? (double)cum / out->picks : 0;
    }
}

struct replay_ctx {
    struct selstats *st;
    uint32_t *prompt, *gen;
};

static void replay_plan(void *user, const struct scheduler_plan *plan, uint32_t seq,
                        uint32_t layer, const float *row)
{
    struct replay_ctx *c = user;
    if (plan->prefill || !row)
        return;
    selstats_add(c->st, seq, layer, plan->pos, c->prompt[seq], c->gen[seq], plan->attended,
                 plan->n_attended, plan->local_tokens, row);
}

int selstats_replay(const char *path, const struct replay_config *cfg,
                    const struct selstats_params *p, struct selstats **out, uint32_t *n_layers,
                    struct alisa_err *e)
{
    *out = NULL;
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header *h = trace_reader_header(r);
    uint32_t n_seqs = h->n_seqs, max_len = trace_reader_max_len(r);
    if (cfg->positions > max_len) /* an extended replay runs past the trace's rows */
        max_len = cfg->positions;
    *n_layers = h->n_layers;
    struct replay_ctx c = {0};
    c.prompt = calloc(n_seqs ? n_seqs : 1, sizeof *c.prompt);
    c.gen = calloc(n_seqs ? n_seqs : 1, sizeof *c.gen);
    if (!c.prompt || !c.gen)
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < n_seqs; i++) {
        const struct trace_seq *q = trace_reader_seq(r, i);
        c.prompt[i] = q->prompt_len;
        c.gen[i] = q->gen_len;
    }
    trace_reader_destroy(r);
    if (!rc)
        rc = selstats_create(&c.st, n_seqs, *n_layers, max_len, p, e);
    struct replay_totals t;
    if (!rc && !(rc = replay_trace(path, cfg, &t, replay_plan, &c, e)))
        replay_totals_free(&t);
    free(c.prompt);
    free(c.gen);
    if (rc) {
        selstats_destroy(c.st);
        return rc;
    }
    *out = c.st;
    return 0;
}

int selstats_replay_selection(const char *path, const struct selection_ops *sel,
                              const struct sel_params *sp, const struct selstats_params *p,
                              struct selstats **out, uint32_t *n_layers, struct alisa_err *e)
{
    struct hw_profile hw = {.link_gbps = 1, .hbm_gbps = 1, .fp16_tflops = 1};
    struct replay_config cfg = {.sel = sel, .sel_params = *sp, .place = &place_gpu_only_ops,
                                .gpu_kv_bytes = UINT64_MAX / 4, .hw = &hw, .gpu_fraction = -1};
    return selstats_replay(path, &cfg, p, out, n_layers, e);
}
