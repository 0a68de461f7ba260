/* Attention sparsity statistics of traces, as the paper counts them (Fig. 3):
 * the share of a row's weights below 1% of that row's maximum.
 *
 * Owns per-layer accumulation of row sparsity over decode rows (query
 * position >= prompt length) and their summaries (mean, quartiles via GSL).
 * Does not read files except through trace_stats_from_file().
 */
#ifndef ALISA_TRACE_STATS_H
#define ALISA_TRACE_STATS_H

#include <stdint.h>

#include "err.h"
#include "trace.h"

#define TRACE_SPARSITY_REL 0.01 /* "below 1% of the row max" (ALISA.md section 1) */

struct sparsity_summary {
    uint64_t rows;  /* decode rows counted */
    double mean;    /* share of weights below the cutoff, 0..1 */
    double min;
    double q25;
    double median;
    double q75;
    double max;
};

struct trace_stats;

/* Share of the n entries of row below rel * max(row); 0 for n == 0.
 * Cannot fail. */
double stats_row_sparsity(const float *row, uint32_t n, double rel);

/* Creates an empty accumulator for n_layers layers. */
int trace_stats_create(struct trace_stats **out, uint32_t n_layers, struct alisa_err *e);

/* Adds the head-mean rows of one step if it is a decode row
 * (st->pos >= prompt_len); prompt rows are ignored. */
int trace_stats_add(struct trace_stats *s, const struct trace_step *st, uint32_t prompt_len,
                    struct alisa_err *e);

/* Summary of one layer (layer < n_layers), or of all layers together when
 * layer == UINT32_MAX. Zero rows give an all-zero summary. Cannot fail. */
void trace_stats_summary(struct trace_stats *s, uint32_t layer, struct sparsity_summary *out);

uint32_t trace_stats_layers(const struct trace_stats *s);

/* Reads a whole trace and accumulates its statistics into a new *out; also
 * counts rows per encoding (dense, sparse) into enc_rows[3] when non-NULL.
 * The caller destroys *out. */
int trace_stats_from_file(const char *path, struct trace_stats **out, uint64_t enc_rows[3],
                          struct alisa_err *e);

/* Frees s. Accepts NULL. */
void trace_stats_destroy(struct trace_stats *s);

#endif
