/* What a selection picks on a trace (issue 43, item 1): the statistics that
 * decide how an age-based placement (ALISA's) fares on it.
 *
 * Fed one decode step of one (sequence, layer) stream at a time (replay's
 * plan callback: the attended ids, the selection's local window, the row):
 *   - sparsity: the row's share of weights below 1% of its maximum (the
 *     paper's count, trace_stats.h);
 *   - the step's global picks: attended ids older than the local window
 *     (ids < pos + 1 - local_tokens), i.e. the heavy hitters the selection
 *     keeps; their persistence after d steps: |G_t & G_t+d| / |G_t|, for d
 *     = 1 and 32 (SELSTATS_LAGS), over steps whose G_t is not empty;
 *   - the age of each pick as a share of the context, (pos - id) / pos: its
 *     median (from a histogram of SELSTATS_AGE_BINS bins over [0, 1]);
 *   - the share of picks in the oldest alpha of the context (id < alpha x
 *     (pos + 1): what ALISA's placement moves to the CPU first), and among
 *     the first `sinks` tokens (attention sinks).
 * Each is kept per layer and per context bin (SELSTATS_BINS equal bins of a
 * sequence's decode steps, first to last), and summarised over any of them.
 *
 * Owns its accumulators (memory: streams x 33 bitsets of max_len bits, plus
 * fixed-size tables). selstats_replay fills one from a trace replayed under
 * a selection (`alisa trace stats`; ALISA's schedule search prices its
 * loads from the picks' positions, sim/simulate.c).
 */
#ifndef ALISA_SELSTATS_H
#define ALISA_SELSTATS_H

#include <stdint.h>

#include "err.h"
#include "replay.h"

#define SELSTATS_BINS 4
#define SELSTATS_AGE_BINS 1000
#define SELSTATS_LAGS 2
extern const uint32_t selstats_lag[SELSTATS_LAGS]; /* 1, 32 */

struct selstats_params {
    double alpha;      /* the oldest share of the context counted apart, (0, 1] */
    uint32_t sinks;    /* leading tokens counted as sinks */
};

/* A summary over some layers and bins. Shares are NAN when nothing was
 * counted (no picks, no step pairs). */
struct selstats_summary {
    uint64_t rows;            /* decode rows */
    double sparsity;          /* mean row sparsity */
    uint64_t picks;           /* global picks */
    double picks_per_row;
    double age_median;        /* share of the context, 0..1 */
    double old_share;         /* picks in the oldest alpha */
    double sink_share;        /* picks among the sinks */
    double persist[SELSTATS_LAGS]; /* mean kept share after each lag */
    uint64_t persist_n[SELSTATS_LAGS]; /* step pairs counted */
    double pick_cdf[SELSTATS_AGE_BINS + 1]; /* [k]: the share of picks whose id is below
                                               about k / SELSTATS_AGE_BINS of the query
                                               position (age over 1 - k / bins); 0 .. 1,
                                               all 0 without picks */
};

struct selstats;

/* For n_seqs x n_layers streams of at most max_len tokens. */
int selstats_create(struct selstats **out, uint32_t n_seqs, uint32_t n_layers, uint32_t max_len,
                    const struct selstats_params *p, struct alisa_err *e);

/* One decode step: stream (seq, layer), query pos (> 0), its sequence's
 * prompt_len and gen_len (for the context bin), the attended ids (ascending,
 * pos included), the local window, and the row (pos + 1 weights). Steps of
 * one stream must come in order of pos; a gap breaks the persistence pairs
 * across it. Cannot fail. */
void selstats_add(struct selstats *s, uint32_t seq, uint32_t layer, uint32_t pos,
                  uint32_t prompt_len, uint32_t gen_len, const uint32_t *ids, uint32_t n_ids,
                  uint32_t local_tokens, const float *row);

/* Summary of one layer (or all: UINT32_MAX) and one context bin (or all:
 * UINT32_MAX). Cannot fail. */
void selstats_summary(const struct selstats *s, uint32_t layer, uint32_t bin,
                      struct selstats_summary *out);

void selstats_destroy(struct selstats *s); /* accepts NULL */

/* Replays the trace at path under cfg (its selection; the caller's
 * placement and capacities, usually every token on the GPU so that the
 * selection alone decides) into a new *out, every decode row counted, each
 * sequence's context bins from its trace lengths. *n_layers gets the
 * trace's layers. */
int selstats_replay(const char *path, const struct replay_config *cfg,
                    const struct selstats_params *p, struct selstats **out, uint32_t *n_layers,
                    struct alisa_err *e);

/* selstats_replay with every token on the GPU, so that the selection sel
 * (with sp) alone decides what is picked (nothing moves; no prices
 * matter): what `alisa trace stats` and `alisa trace fit` measure. */
int selstats_replay_selection(const char *path, const struct selection_ops *sel,
                              const struct sel_params *sp, const struct selstats_params *p,
                              struct selstats **out, uint32_t *n_layers, struct alisa_err *e);

#endif
