/* The synthetic generator fitted to recorded attention (issue 43, item 3).
 *
 * A recorded trace is summarised by the statistics that decide how a
 * sparse selection and an age-based placement fare on it (selstats.h's,
 * under SWA at 80% with every token on the GPU), by where a decode row puts
 * its mass (on the first TRACEFIT_SINKS tokens, on the last 8 and the last
 * 64), and by its per-layer sparsity (share of weights below 1% of the row
 * max, the paper's count) with the rows' spread about their layer's mean.
 *
 * Fitting (tracefit_fit): the per-layer sparsity becomes the generator's
 * profile and the spread its jitter, and the tokens holding sink mass its
 * sink count, all read off directly; the logit
 * terms (sink_logit, recency_logit, recency_tokens, noise, hh_drift) are
 * found by the method of simulated moments: a trace generated at the
 * recorded lengths with fixed seeds (common random numbers, so the
 * objective is deterministic) is summarised the same way, and GSL's
 * Nelder-Mead simplex minimises the squared relative distance between the
 * two summaries. hh_alpha and hh_scale stay at the generator's defaults:
 * the generator solves each row's temperature for its sparsity target, so
 * the logits' common scale is not identifiable, and log Pareto(alpha)
 * draws are exponential with rate alpha, so only hh_scale / hh_alpha
 * would be (the fitted hh_drift is in those units: a parameters file whose
 * hh-alpha is edited describes another model). The jitter is the rows'
 * whole spread about their layer's mean, a trend of sparsity with the
 * context included, which the generator draws as independent noise.
 *
 * Owns the summaries and the search; writes and deletes its scratch traces
 * in the directory it is given.
 */
#ifndef ALISA_TRACEFIT_H
#define ALISA_TRACEFIT_H

#include <stdint.h>

#include "err.h"
#include "trace_gen.h"

#define TRACEFIT_SINKS 4 /* leading tokens counted as sinks */
#define TRACEFIT_SINK_SHARE 0.25
#define TRACEFIT_SINK_MIN 0.01

/* The matched statistics, in this order (tracefit_moment_name). */
enum {
    TRACEFIT_PERSIST1,   /* SWA's global picks still picked 1 step later */
    TRACEFIT_PERSIST32,  /* ... 32 steps later */
    TRACEFIT_AGE,        /* median age of a pick, share of the context */
    TRACEFIT_OLD,        /* picks in the oldest half of the context */
    TRACEFIT_SINK_PICKS, /* picks among the first TRACEFIT_SINKS tokens */
    TRACEFIT_SINK_MASS,  /* a decode row's mass on the first TRACEFIT_SINKS tokens */
    TRACEFIT_RECENT8,    /* ... on its last 8 tokens (itself included) */
    TRACEFIT_RECENT64,   /* ... on its last 64 */
    TRACEFIT_N
};
extern const char *const tracefit_moment_name[TRACEFIT_N];

/* What a trace is summarised by. */
struct tracefit_summary {
    char model[64];
    uint32_t n_layers, n_heads, n_kv_heads, hidden, vocab; /* its header's shape */
    uint32_t prompt_len, gen_len;           /* lengths of its first sequence */
    double model_params;                    /* tracefit_model_params of its shape */
    double m[TRACEFIT_N];
    double sparsity[TRACE_GEN_PROFILE_MAX]; /* mean decode-row sparsity per layer */
    double jitter;                          /* rows' s.d. about their layer's mean */
    double token_mass[TRACEFIT_SINKS];      /* a decode row's mean mass on token t */
    uint32_t n_sinks;                       /* the leading tokens whose mass is at least
                                               TRACEFIT_SINK_SHARE of token 0's (those
                                               before the first that is not); 0 when
                                               token 0 holds under TRACEFIT_SINK_MIN */
};

/* Summarises the trace at path (decode rows: query position >= prompt
 * length). A trace of more than TRACE_GEN_PROFILE_MAX layers, or without
 * decode rows, is refused naming the file. */
int tracefit_summarise(const char *path, struct tracefit_summary *out, struct alisa_err *e);

/* The generator's parameter count of a shape, 12 L h^2 + V h (the
 * transformer blocks' weights and the embedding), as the scaling rule
 * compares models. Cannot fail. */
double tracefit_model_params(uint32_t n_layers, uint32_t hidden, uint32_t vocab);

struct tracefit_options {
    uint32_t sim_layers;  /* layers of each simulated trace (the profile sampled) */
    uint32_t sim_seqs;    /* its sequences */
    uint64_t seed;        /* its seed */
    uint32_t max_iter;    /* simplex iterations */
    const char *tmpdir;   /* where scratch traces go */
    /* called after each iteration, for a progress display; NULL for none */
    void (*progress)(void *ctx, uint32_t iter, uint32_t max_iter, double objective);
    void *progress_ctx;
};

/* Defaults: 8 layers, 1 sequence (at most 64), seed 1, 150 iterations,
 * $TMPDIR or /tmp. */
void tracefit_defaults(struct tracefit_options *o);

struct tracefit_result {
    struct trace_gen_params p;      /* fitted: the recorded traces' shape and lengths */
    struct tracefit_summary target; /* the recorded traces' mean */
    struct tracefit_summary start;  /* the generator's defaults, with the profile */
    struct tracefit_summary fitted; /* the fitted parameters */
    double objective_start, objective;
    uint32_t iterations;
};

/* The distance tracefit_fit minimises between two summaries: the sum over
 * the statistics of ((a - b) / max(|b|, 0.05))^2. Cannot fail. */
double tracefit_distance(const struct tracefit_summary *a, const struct tracefit_summary *b);

/* Fits the generator to the n traces at paths (all of one layer count;
 * the target is their mean summary; the simulated traces take the first's
 * lengths). Returns 0 with *r filled, or an error (e says why; *r is then
 * not a result); its scratch trace is removed either way. */
int tracefit_fit(const char *const *paths, uint32_t n, const struct tracefit_options *o,
                 struct tracefit_result *r, struct alisa_err *e);

/* The paper's trend (section 1 of ../shared/ALISA.md, its Fig. 3: OPT-30B
 * about 3x less dense than OPT-6.7B) as a rule: each knot's density
 * (1 - sparsity) times (P_to / P_from)^-g, g = ln 3 / ln(30 / 6.7), with P
 * the parameter counts floored at 6.7e9, the smallest model the trend was
 * measured on (below it the fitted profile is used as it is; a target no
 * larger than the fitted model leaves it as it is too). Turns the
 * first/last line into a 2-knot profile. Returns the density factor.
 * Cannot fail. */
double tracefit_scale(struct trace_gen_params *p, double params_from, double params_to);

#endif
