/* Synthetic attention traces with the structure the paper reports: attention
 * sinks, persistent power-law heavy hitters, recency, per-layer sparsity.
 *
 * Owns the generative model and its parameters; writes through trace.h.
 * Bit-for-bit reproducible: one GSL mt19937 stream seeded with params.seed,
 * draws taken in a fixed order.
 */
#ifndef ALISA_TRACE_GEN_H
#define ALISA_TRACE_GEN_H

#include <stdint.h>

#include "err.h"

#define TRACE_GEN_PROFILE_MAX 64 /* knots of a sparsity profile */

/* The logit of key token t for the query at position p, layer l, is
 *   z_t = sink_logit * [t < n_sinks]
 *       + hh_scale * g_t                      (g_t = log of a Pareto(hh_alpha) draw,
 *                                              then a random walk of step hh_drift)
 *       + recency_logit * exp(-(p - t) / recency_tokens)
 *       + noise * N(0, 1)
 * and the row is softmax(beta * z), with beta chosen per row so that the
 * share of weights below 1% of the row max equals the row's target: the
 * layer's target plus N(0, sparsity_jitter). The layer's target is linear
 * from sparsity_first at layer 0 to sparsity_last at the last layer, or,
 * with a profile (n_profile knots, as `alisa trace fit` measures one from
 * recorded traces), the profile at the layer's depth l / (n_layers - 1),
 * linear between knots spaced evenly over depth 0..1, so a profile fitted
 * on one model's layer count maps onto any other's. With per_head, each head draws
 * its own noise and target and the stored head-mean row is their average
 * (so it is less sparse than the per-head target). */
struct trace_gen_params {
    char model[64];          /* name written into the trace header */
    uint32_t n_layers;       /* layers to generate */
    uint32_t n_heads;        /* query heads */
    uint32_t n_kv_heads;     /* key/value heads */
    uint32_t hidden;         /* model width */
    uint32_t vocab;          /* token ids are drawn uniformly below this */
    uint32_t n_seqs;         /* sequences */
    uint32_t prompt_len;     /* tokens per prompt */
    uint32_t gen_len;        /* generated tokens per sequence */
    uint32_t prompt_rows;    /* recorded prompt rows, counted back from the prompt's end */
    uint64_t seed;           /* GSL mt19937 seed */
    uint32_t n_sinks;        /* leading "attention sink" tokens */
    double sink_logit;       /* extra logit of sink tokens */
    double hh_alpha;         /* Pareto shape of token importance (smaller = heavier tail) */
    double hh_scale;         /* weight of log-importance in the logit */
    double hh_drift;         /* per-step s.d. of the importance random walk */
    double recency_logit;    /* logit boost of the newest token */
    double recency_tokens;   /* e-folding distance of the recency boost, tokens */
    double noise;            /* per-step logit noise s.d. */
    double sparsity_first;   /* target sparsity of layer 0, in [0, 1) */
    double sparsity_last;    /* target sparsity of the last layer, in [0, 1) */
    double sparsity_jitter;  /* per-row s.d. of the target */
    uint32_t n_profile;      /* knots of the sparsity profile (0: first/last's line) */
    double profile[TRACE_GEN_PROFILE_MAX]; /* target sparsity at depth k / (n_profile - 1) */
    int per_head;            /* also store per-head rows */
    float threshold;         /* sparse-row cutoff relative to row max, [0, 0.01] */
    /* called after each generated position (done of total over all
     * sequences), for a progress display; NULL for none */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
};

/* Fills p with the documented defaults (80-95% sparsity, 4 sinks, ...) and a
 * small shape (4 layers, 8 heads); callers set the model shape. Cannot fail. */
void trace_gen_defaults(struct trace_gen_params *p);

/* Checks p for impossible values; the message names the parameter and value. */
int trace_gen_validate(const struct trace_gen_params *p, struct alisa_err *e);

/* The sparsity target of layer l of p (profile or line; trace_gen_params).
 * Cannot fail. */
double trace_gen_layer_target(const struct trace_gen_params *p, uint32_t l);

/* Generates the trace described by p into path (atomically: nothing appears
 * under path unless the whole trace was written). */
int trace_gen_write(const struct trace_gen_params *p, const char *path, struct alisa_err *e);

/* The bytes trace_gen_write writes for p (p valid), from below: every SEQ
 * and STEP chunk's fixed bytes and each row's smaller encoding, a sparse row
 * keeping the (1 - sparsity target) share of its weights that its layer's
 * target leaves above 1% of the row max (exact for the rows when
 * p->threshold is 0: every row dense; per-row jitter of the target ignored);
 * the header and end chunks are not counted. Grows with the square of the
 * length, as the file does. Saturates at UINT64_MAX. Cannot fail. */
uint64_t trace_gen_min_bytes(const struct trace_gen_params *p);

/* A synthetic row source for one (sequence, layer) stream, for extending a
 * trace past its end: the same model as trace_gen_write (head-mean rows only),
 * with its own GSL stream seeded with `seed`. Rows must be asked for in
 * increasing positions (the importance random walk advances per call). */
struct gen_stream;

/* p gives the model parameters and n_layers (for the layer's target); layer
 * picks the target; max_len bounds the positions. */
int gen_stream_create(struct gen_stream **out, const struct trace_gen_params *p, uint32_t layer,
                      uint32_t max_len, uint64_t seed, struct alisa_err *e);

/* Advances the importance random walk as if rows 0..pos-1 had been drawn
 * (one Gaussian per token, same distribution), so rows can start at pos.
 * Cannot fail. */
void gen_stream_skip_to(struct gen_stream *gs, uint32_t pos);

/* Writes the pos + 1 weights of the query at pos into row. Cannot fail. */
void gen_stream_row(struct gen_stream *gs, uint32_t pos, float *row);

/* Frees gs. Accepts NULL. */
void gen_stream_destroy(struct gen_stream *gs);

#endif
