/* Synthetic trace generator (model in trace_gen.h).
 *
 * Owns the random attention model only; the file layout is trace.c's. The
 * per-row temperature is solved in closed form from a quantile of the logit
 * gaps (GSL), so each row hits its sparsity target up to discreteness.
 * Deliberately simple: a few interpretable terms, whose values `alisa trace
 * fit` (sim/tracefit.h) estimates from recorded attention.
 */
#include "trace_gen.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define GEN_BETA_MIN 0.05
#define GEN_BETA_MAX 50.0
#define GEN_TERM_MAX 1e3 /* largest magnitude of a logit term (rows stay finite) */

void trace_gen_defaults(struct trace_gen_params *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->model, sizeof p->model, "synthetic");
    p->n_layers = 4;
    p->n_heads = 8;
    p->n_kv_heads = 8;
    p->hidden = 512;
    p->vocab = 32000;
    p->n_seqs = 1;
    p->prompt_len = 128;
    p->gen_len = 512;
    p->prompt_rows = UINT32_MAX; /* all of them */
    p->seed = 1;
    p->n_sinks = 4;
    p->sink_logit = 3.0;
    p->hh_alpha = 1.5;
    p->hh_scale = 1.0;
    p->hh_drift = 0.02;
    p->recency_logit = 2.0;
    p->recency_tokens = 16.0;
    p->noise = 0.5;
    p->sparsity_first = 0.80;
    p->sparsity_last = 0.95;
    p->sparsity_jitter = 0.02;
    p->per_head = 0;
    p->threshold = 0.001f;
}

int trace_gen_validate(const struct trace_gen_params *p, struct alisa_err *e)
{
    if (p->n_layers == 0 || p->n_heads == 0 || p->n_kv_heads == 0 || p->vocab == 0)
        return err_set(e, ALISA_EINVAL, "model shape: layers %u heads %u kv heads %u vocab %u must all be positive",
                       p->n_layers, p->n_heads, p->n_kv_heads, p->vocab);
    if (p->n_heads % p->n_kv_heads)
        return err_set(e, ALISA_EINVAL, "heads %u not a multiple of kv heads %u", p->n_heads,
                       p->n_kv_heads);
    if (p->n_seqs == 0)
        return err_set(e, ALISA_EINVAL, "--seqs 0: need at least one sequence");
    if (p->prompt_len == 0)
        return err_set(e, ALISA_EINVAL, "--prompt-len 0: need at least one prompt token");
    if ((uint64_t)p->prompt_len + p->gen_len > (1u << 20))
        return err_set(e, ALISA_EINVAL, "--prompt-len %u + --gen-len %u exceeds %u tokens",
                       p->prompt_len, p->gen_len, 1u << 20);
    if (!(p->sparsity_first >= 0 && p->sparsity_first < 1))
        return err_set(e, ALISA_EINVAL, "--sparsity-first %g not in [0, 1)", p->sparsity_first);
    if (!(p->sparsity_last >= 0 && p->sparsity_last < 1))
        return err_set(e, ALISA_EINVAL, "--sparsity-last %g not in [0, 1)", p->sparsity_last);
    if (p->n_profile == 1 || p->n_profile > TRACE_GEN_PROFILE_MAX)
        return err_set(e, ALISA_EINVAL, "sparsity profile of %u knots: expected 2 to %u",
                       p->n_profile, TRACE_GEN_PROFILE_MAX);
    for (uint32_t k = 0; k < p->n_profile; k++)
        if (!(p->profile[k] >= 0 && p->profile[k] < 1))
            return err_set(e, ALISA_EINVAL, "sparsity profile knot %u: %g not in [0, 1)", k,
                           p->profile[k]);
    if (!(p->sparsity_jitter >= 0 && p->sparsity_jitter < 1))
        return err_set(e, ALISA_EINVAL, "--sparsity-jitter %g not in [0, 1)", p->sparsity_jitter);
    if (!(p->hh_alpha > 0))
        return err_set(e, ALISA_EINVAL, "--hh-alpha %g must be positive", p->hh_alpha);
    if (!(p->recency_tokens > 0))
        return err_set(e, ALISA_EINVAL, "--recency-tokens %g must be positive", p->recency_tokens);
    if (!(p->noise >= 0) || !(p->hh_drift >= 0) || !isfinite(p->sink_logit) ||
        !isfinite(p->hh_scale) || !isfinite(p->recency_logit))
        return err_set(e, ALISA_EINVAL, "noise %g and drift %g must be >= 0 and logits finite",
                       p->noise, p->hh_drift);
    if (fabs(p->sink_logit) > GEN_TERM_MAX || fabs(p->hh_scale) > GEN_TERM_MAX ||
        fabs(p->recency_logit) > GEN_TERM_MAX || p->noise > GEN_TERM_MAX ||
        p->hh_drift > GEN_TERM_MAX || !(p->recency_tokens <= 1e9))
        return err_set(e, ALISA_EINVAL, "sink-logit %g, hh-scale %g, recency-logit %g, noise %g, "
                       "hh-drift %g: each within +-%g; recency-tokens %g at most 1e9",
                       p->sink_logit, p->hh_scale, p->recency_logit, p->noise, p->hh_drift,
                       GEN_TERM_MAX, p->recency_tokens);
    if (!(p->threshold >= 0 && p->threshold <= TRACE_MAX_THRESHOLD))
        return err_set(e, ALISA_EINVAL, "--threshold %g not in [0, %g]", (double)p->threshold,
                       (double)TRACE_MAX_THRESHOLD);
    return 0;
}

/* Writes softmax(beta * z) into out, beta solving the row's sparsity target. */
static void gen_row(const double *z, uint32_t n, double target, double *gap, float *out)
{
    double zmax = z[0];
    for (uint32_t i = 1; i < n; i++)
        if (z[i] > zmax)
            zmax = z[i];
    for (uint32_t i = 0; i < n; i++)
        gap[i] = zmax - z[i];
    gsl_sort(gap, 1, n);
    /* Weight t is below 1% of the max iff beta * gap_t > ln(100): the cut
     * gap is the (1 - target) quantile of the gaps. */
    double q = gsl_stats_quantile_from_sorted_data(gap, 1, n, 1.0 - target);
    double beta = q > 0 ? log(100.0) / q : GEN_BETA_MAX;
    if (beta > GEN_BETA_MAX)
        beta = GEN_BETA_MAX;
    if (beta < GEN_BETA_MIN)
        beta = GEN_BETA_MIN;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += exp(beta * (z[i] - zmax));
    for (uint32_t i = 0; i < n; i++)
        out[i] = (float)(exp(beta * (z[i] - zmax)) / sum);
}

double trace_gen_layer_target(const struct trace_gen_params *p, uint32_t l)
{
    double depth = p->n_layers > 1 ? (double)l / (p->n_layers - 1) : 0;
    if (!p->n_profile)
        return p->sparsity_first + (p->sparsity_last - p->sparsity_first) * depth;
    double x = depth * (p->n_profile - 1);
    uint32_t k = (uint32_t)x;
    if (k >= p->n_profile - 1)
        return p->profile[p->n_profile - 1];
    return p->profile[k] + (x - k) * (p->profile[k + 1] - p->profile[k]);
}

/* One importance random-walk step for tokens 0..pos-1. */
static void gen_drift(const struct trace_gen_params *p, gsl_rng *rng, double *g, uint32_t pos)
{
    if (p->hh_drift > 0)
        for (uint32_t t = 0; t < pos; t++)
            g[t] += gsl_ran_gaussian(rng, p->hh_drift);
}

/* One head's row for the query at pos: the logits of trace_gen.h (noise
 * drawn per token), then the row's jittered target, then softmax(beta z).
 * z and gap are (pos + 1) scratch. The draw order is fixed. */
static void gen_head_row(const struct trace_gen_params *p, gsl_rng *rng, const double *g,
                         uint32_t pos, double target_l, double *z, double *gap, float *out)
{
    uint32_t n = pos + 1;
    for (uint32_t t = 0; t < n; t++) {
        double dist = (double)(pos - t);
        z[t] = (t < p->n_sinks ? p->sink_logit : 0.0) + p->hh_scale * g[t] +
               p->recency_logit * exp(-dist / p->recency_tokens);
        if (p->noise > 0)
            z[t] += gsl_ran_gaussian(rng, p->noise);
    }
    double target = target_l;
    if (p->sparsity_jitter > 0)
        target += gsl_ran_gaussian(rng, p->sparsity_jitter);
    if (target < 0)
        target = 0;
    if (target > 0.999)
        target = 0.999;
    gen_row(z, n, target, gap, out);
}

static void format_params(const struct trace_gen_params *p, char *buf, size_t cap)
{
    int n = snprintf(buf, cap,
             "alisa-trace-gen layers=%u heads=%u kv_heads=%u prompt_len=%u gen_len=%u "
             "prompt_rows=%u seed=%llu sinks=%u sink_logit=%g hh_alpha=%g hh_scale=%g "
             "hh_drift=%g recency_logit=%g recency_tokens=%g noise=%g sparsity_first=%g "
             "sparsity_last=%g sparsity_jitter=%g per_head=%d threshold=%g",
             p->n_layers, p->n_heads, p->n_kv_heads, p->prompt_len, p->gen_len,
             p->prompt_rows < p->prompt_len ? p->prompt_rows : p->prompt_len,
             (unsigned long long)p->seed, p->n_sinks, p->sink_logit, p->hh_alpha, p->hh_scale,
             p->hh_drift, p->recency_logit, p->recency_tokens, p->noise, p->sparsity_first,
             p->sparsity_last, p->sparsity_jitter, p->per_head, (double)p->threshold);
    for (uint32_t k = 0; k < p->n_profile && n > 0 && (size_t)n < cap; k++)
        n += snprintf(buf + n, cap - n, "%s%.3g", k ? "," : " profile=", p->profile[k]);
    if (n > 0 && (size_t)n >= cap && cap > 4) /* cut: say so */
        memcpy(buf + cap - 4, "...", 4);
}

int trace_gen_write(const struct trace_gen_params *p, const char *path, struct alisa_err *e)
{
    int rc = trace_gen_validate(p, e);
    if (rc)
        return rc;
    struct trace_header h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "%s", p->model);
    h.n_layers = p->n_layers;
    h.n_heads = p->n_heads;
    h.n_kv_heads = p->n_kv_heads;
    h.hidden = p->hidden;
    h.vocab = p->vocab;
    h.n_seqs = p->n_seqs;
    h.flags = p->per_head ? TRACE_FLAG_PER_HEAD : 0;
    h.threshold = p->threshold;
    h.seed = p->seed;
    snprintf(h.source, sizeof h.source, "synthetic");
    format_params(p, h.generator, sizeof h.generator);

    const uint32_t L = p->n_layers, H = p->n_heads;
    const uint32_t N = p->prompt_len + p->gen_len;
    const uint32_t row_start = p->prompt_rows < p->prompt_len ? p->prompt_len - p->prompt_rows : 0;
    struct trace_writer *w = NULL;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    uint32_t *tokens = malloc((size_t)N * sizeof *tokens);
    double *imp = malloc((size_t)L * N * sizeof *imp);       /* (L, N) log-importance */
    double *scratch = malloc(2 * (size_t)N * sizeof *scratch); /* z and gap */
    float *rows = malloc((size_t)L * N * sizeof *rows);      /* (L, n) head-mean rows */
    float *head_rows = p->per_head ? malloc((size_t)L * H * N * sizeof *head_rows) : NULL;
    /* The tokens are drawn for every sequence first (the SEQ chunks all
     * precede the steps); a copy of the generator replays those draws
     * sequence by sequence for the steps, so memory stays O(N). */
    gsl_rng *tok_rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng || !tokens || !imp || !scratch || !rows || !tok_rng ||
        (p->per_head && !head_rows)) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory generating %u x %u x %u rows", L, H, N);
        gsl_rng_free(tok_rng);
        goto done;
    }
    gsl_rng_set(rng, p->seed);
    gsl_rng_memcpy(tok_rng, rng);
    if ((rc = trace_writer_open(&w, path, &h, e))) {
        gsl_rng_free(tok_rng);
        goto done;
    }
    for (uint32_t s = 0; s < p->n_seqs && !rc; s++) {
        for (uint32_t t = 0; t < N; t++)
            tokens[t] = (uint32_t)gsl_rng_uniform_int(rng, p->vocab);
        rc = trace_writer_seq(w, s, p->prompt_len, p->gen_len, row_start, tokens, e);
    }
    double *z = scratch, *gap = scratch + N;
    for (uint32_t s = 0; s < p->n_seqs && !rc; s++) {
        for (uint32_t t = 0; t < N; t++)
            tokens[t] = (uint32_t)gsl_rng_uniform_int(tok_rng, p->vocab);
        for (size_t i = 0; i < (size_t)L * N; i++)
            imp[i] = log(gsl_ran_pareto(rng, p->hh_alpha, 1.0));
        for (uint32_t pos = row_start; pos < N && !rc; pos++) {
            if (p->progress)
                p->progress(p->progress_ctx, (uint64_t)s * (N - row_start) + (pos - row_start),
                            (uint64_t)p->n_seqs * (N - row_start));
            uint32_t n = pos + 1;
            for (uint32_t l = 0; l < L; l++) {
                double *g = imp + (size_t)l * N;
                gen_drift(p, rng, g, pos);
                double target_l = trace_gen_layer_target(p, l);
                float *mean = rows + (size_t)l * n;
                if (!p->per_head) {
                    gen_head_row(p, rng, g, pos, target_l, z, gap, mean);
                    continue;
                }
                memset(mean, 0, n * sizeof *mean);
                for (uint32_t hd = 0; hd < H; hd++) {
                    float *hr = head_rows + ((size_t)l * H + hd) * n;
                    gen_head_row(p, rng, g, pos, target_l, z, gap, hr);
                    for (uint32_t t = 0; t < n; t++)
                        mean[t] += hr[t] / (float)H;
                }
            }
            rc = trace_writer_step(w, s, pos, tokens[pos], rows, head_rows, e);
        }
    }
    gsl_rng_free(tok_rng);
    if (!rc) {
        rc = trace_writer_close(w, e);
        w = NULL;
    }
done:
    trace_writer_destroy(w);
    gsl_rng_free(rng);
    free(tokens);
    free(imp);
    free(scratch);
    free(rows);
    free(head_rows);
    return rc;
}

uint64_t trace_gen_min_bytes(const struct trace_gen_params *p)
{
    /* trace.c's encoding: a chunk is 8 bytes of tag and length, its payload
     * and a 4-byte CRC; SEQ's payload 16 bytes and the prompt's tokens;
     * STEP's 12 bytes and, per layer (and head with per_head), a row of n
     * weights: dense 1 + 2n bytes, sparse 9 + 4 per kept weight; the smaller
     * is written. A row keeps every weight at or above threshold x its max,
     * and threshold <= 1%: at least the (1 - sparsity target) share the
     * generator solves each layer's row for, so a sparse row grows with n
     * and the file with the square of the length (issue 48) */
    const double N = (double)p->prompt_len + p->gen_len;
    const uint32_t row_start = p->prompt_rows < p->prompt_len ? p->prompt_len - p->prompt_rows : 0;
    const double heads = p->per_head ? 1.0 + p->n_heads : 1.0;
    double kept_share = 0; /* mean over layers of the share a row keeps */
    for (uint32_t l = 0; l < p->n_layers; l++)
        kept_share += (1.0 - trace_gen_layer_target(p, l)) / p->n_layers;
    double bytes = (double)p->n_seqs * (12.0 + 16.0 + 4.0 * p->prompt_len);
    double per_seq = 0;
    for (double pos = row_start; pos < N; pos++) {
        double n = pos + 1, dense = 1 + 2 * n, kept = kept_share * n < 1 ? 1 : kept_share * n;
        double sparse = 9 + 4 * kept;
        double row = p->threshold <= 0.0f || dense < sparse ? dense : sparse;
        per_seq += 12.0 + 12.0 + p->n_layers * heads * row;
    }
    bytes += (double)p->n_seqs * per_seq;
    return bytes >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)bytes;
}

struct gen_stream {
    struct trace_gen_params p;
    uint32_t layer;
    uint32_t max_len;
    gsl_rng *rng;
    double *g;    /* (max_len) log-importance */
    double *z;    /* (max_len) scratch */
    double *gap;  /* (max_len) scratch */
};

void gen_stream_destroy(struct gen_stream *gs)
{
    if (!gs)
        return;
    gsl_rng_free(gs->rng);
    free(gs->g);
    free(gs->z);
    free(gs->gap);
    free(gs);
}

int gen_stream_create(struct gen_stream **out, const struct trace_gen_params *p, uint32_t layer,
                      uint32_t max_len, uint64_t seed, struct alisa_err *e)
{
    *out = NULL;
    int rc = trace_gen_validate(p, e);
    if (rc)
        return rc;
    struct gen_stream *gs = calloc(1, sizeof *gs);
    if (!gs || !(gs->rng = gsl_rng_alloc(gsl_rng_mt19937)) ||
        !(gs->g = malloc(max_len * sizeof *gs->g)) || !(gs->z = malloc(max_len * sizeof *gs->z)) ||
        !(gs->gap = malloc(max_len * sizeof *gs->gap))) {
        gen_stream_destroy(gs);
        return err_set(e, ALISA_ENOMEM, "out of memory for a synthetic stream of %u tokens", max_len);
    }
    gs->p = *p;
    gs->layer = layer;
    gs->max_len = max_len;
    gsl_rng_set(gs->rng, seed);
    for (uint32_t t = 0; t < max_len; t++)
        gs->g[t] = log(gsl_ran_pareto(gs->rng, p->hh_alpha, 1.0));
    *out = gs;
    return 0;
}

void gen_stream_skip_to(struct gen_stream *gs, uint32_t pos)
{
    /* Token t has drifted at every step after it up to pos - 1: the sum of
     * those Gaussian steps is one Gaussian of variance (pos - 1 - t) drift^2. */
    if (gs->p.hh_drift > 0)
        for (uint32_t t = 0; t + 1 < pos; t++)
            gs->g[t] += gsl_ran_gaussian(gs->rng, gs->p.hh_drift * sqrt((double)(pos - 1 - t)));
}

void gen_stream_row(struct gen_stream *gs, uint32_t pos, float *row)
{
    ALISA_ASSERT(pos < gs->max_len);
    gen_drift(&gs->p, gs->rng, gs->g, pos);
    gen_head_row(&gs->p, gs->rng, gs->g, pos, trace_gen_layer_target(&gs->p, gs->layer), gs->z,
                 gs->gap, row);
}
