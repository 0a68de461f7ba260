/* The generator fitted to recorded attention (contract in tracefit.h). */
#include "tracefit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selection.h"
#include "selstats.h"
#include "trace.h"
#include "trace_stats.h"

const char *const tracefit_moment_name[TRACEFIT_N] = {
    "kept_after_1", "kept_after_32", "pick_age_median", "picks_in_oldest_half",
    "picks_among_sinks", "sink_mass", "recent8_mass", "recent64_mass"};

#define FIT_FLOOR 0.05 /* a statistic's least scale in the distance */
#define FIT_SEQS_MAX 64 /* simulated sequences at most */
#define FIT_PARAMS 5   /* sink_logit, recency_logit, ln recency_tokens, ln noise, ln hh_drift */
#define TREND_FROM 6.7e9 /* the paper's trend: OPT-6.7B ... */
#define TREND_TO 30e9    /* ... to OPT-30B, */
#define TREND_DENSITY 3.0 /* ... about 3x less dense */

double tracefit_model_params(uint32_t n_layers, uint32_t hidden, uint32_t vocab)
{
    return 12.0 * n_layers * (double)hidden * hidden + (double)vocab * hidden;
}

/* The leading tokens holding sink mass (tracefit_summary.n_sinks). */
static uint32_t count_sinks(const double *mass)
{
    if (mass[0] < TRACEFIT_SINK_MIN)
        return 0;
    uint32_t n = 1;
    while (n < TRACEFIT_SINKS && mass[n] >= TRACEFIT_SINK_SHARE * mass[0])
        n++;
    return n;
}

/* Row mass and per-layer sparsity over the decode rows (a second pass;
 * selstats has the rest). */
static int summarise_rows(const char *path, struct tracefit_summary *out, struct alisa_err *e)
{
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header *h = trace_reader_header(r);
    const uint32_t L = h->n_layers;
    if (L > TRACE_GEN_PROFILE_MAX) {
        trace_reader_destroy(r);
        return err_set(e, ALISA_EINVAL, "%s: %u layers, more than the %u a profile holds", path,
                       L, TRACE_GEN_PROFILE_MAX);
    }
    const struct trace_seq *q0 = trace_reader_seq(r, 0);
    snprintf(out->model, sizeof out->model, "%s", h->model);
    out->n_layers = L;
    out->n_heads = h->n_heads;
    out->n_kv_heads = h->n_kv_heads;
    out->hidden = h->hidden;
    out->vocab = h->vocab;
    out->prompt_len = q0->prompt_len;
    out->gen_len = q0->gen_len;
    out->model_params = tracefit_model_params(L, h->hidden, h->vocab);
    double sum[TRACE_GEN_PROFILE_MAX] = {0}, sq[TRACE_GEN_PROFILE_MAX] = {0}, mass[3] = {0};
    uint64_t rows = 0;
    struct trace_step st;
    int got;
    while ((got = trace_reader_next(r, &st, e)) > 0) {
        if (st.pos < trace_reader_seq(r, st.seq)->prompt_len)
            continue;
        for (uint32_t l = 0; l < L; l++) {
            const float *w = st.w + (size_t)l * st.n_ctx;
            double s = stats_row_sparsity(w, st.n_ctx, 0.01);
            sum[l] += s;
            sq[l] += s * s;
            for (uint32_t t = 0; t < st.n_ctx && t < TRACEFIT_SINKS; t++)
                out->token_mass[t] += w[t];
            for (uint32_t t = 0; t < st.n_ctx; t++) {
                uint32_t age = st.n_ctx - 1 - t;
                mass[0] += t < TRACEFIT_SINKS ? w[t] : 0;
                mass[1] += age < 8 ? w[t] : 0;
                mass[2] += age < 64 ? w[t] : 0;
            }
        }
        rows++;
    }
    trace_reader_destroy(r);
    if (got < 0)
        return got;
    if (!rows)
        return err_set(e, ALISA_EINVAL, "%s: no decode rows to summarise", path);
    double var = 0;
    for (uint32_t l = 0; l < L; l++) {
        out->sparsity[l] = sum[l] / rows;
        var += sq[l] / rows - out->sparsity[l] * out->sparsity[l];
    }
    out->jitter = var > 0 ? sqrt(var / L) : 0;
    for (int t = 0; t < TRACEFIT_SINKS; t++)
        out->token_mass[t] /= (double)rows * L;
    out->n_sinks = count_sinks(out->token_mass);
    out->m[TRACEFIT_SINK_MASS] = mass[0] / ((double)rows * L);
    out->m[TRACEFIT_RECENT8] = mass[1] / ((double)rows * L);
    out->m[TRACEFIT_RECENT64] = mass[2] / ((double)rows * L);
    return 0;
}

int tracefit_summarise(const char *path, struct tracefit_summary *out, struct alisa_err *e)
{
    memset(out, 0, sizeof *out);
    int rc = summarise_rows(path, out, e);
    if (rc)
        return rc;
    const struct selection_ops *swa = selection_find("swa");
    ALISA_ASSERT(swa);
    struct sel_params sp = {.sparsity = 0.8};
    struct selstats_params p = {.alpha = 0.5, .sinks = TRACEFIT_SINKS};
    struct selstats *s;
    uint32_t L;
    if ((rc = selstats_replay_selection(path, swa, &sp, &p, &s, &L, e)))
        return rc;
    struct selstats_summary all;
    selstats_summary(s, UINT32_MAX, UINT32_MAX, &all);
    selstats_destroy(s);
    out->m[TRACEFIT_PERSIST1] = all.persist[0];
    out->m[TRACEFIT_PERSIST32] = all.persist[1];
    out->m[TRACEFIT_AGE] = all.age_median;
    out->m[TRACEFIT_OLD] = all.old_share;
    out->m[TRACEFIT_SINK_PICKS] = all.sink_share;
    for (int k = 0; k < TRACEFIT_N; k++)
        if (!isfinite(out->m[k]))
            return err_set(e, ALISA_EINVAL, "%s: %s cannot be measured (SWA at 80%% picks nothing "
                           "beyond its window, or fewer than %u decode steps)", path,
                           tracefit_moment_name[k], selstats_lag[SELSTATS_LAGS - 1] + 1);
    return 0;
}

double tracefit_distance(const struct tracefit_summary *a, const struct tracefit_summary *b)
{
    double d = 0;
    for (int k = 0; k < TRACEFIT_N; k++) {
        double scale = fabs(b->m[k]) > FIT_FLOOR ? fabs(b->m[k]) : FIT_FLOOR;
        double r = (a->m[k] - b->m[k]) / scale;
        d += r * r;
    }
    return d;
}

void tracefit_defaults(struct tracefit_options *o)
{
    memset(o, 0, sizeof *o);
    o->sim_layers = 8;
    o->sim_seqs = 1;
    o->seed = 1;
    o->max_iter = 150;
    const char *t = getenv("TMPDIR");
    o->tmpdir = t && *t ? t : "/tmp";
}

/* The search's coordinates and their box (outside it: the nearest point
 * of the box plus a penalty, so the simplex comes back). */
static const double box_lo[FIT_PARAMS] = {-5, -5, -0.7, -4.6, -9.2};
static const double box_hi[FIT_PARAMS] = {15, 15, 6.9, 2.3, 0};

static double to_params(const gsl_vector *x, struct trace_gen_params *p)
{
    double v[FIT_PARAMS], pen = 0;
    for (int i = 0; i < FIT_PARAMS; i++) {
        v[i] = gsl_vector_get(x, i);
        if (v[i] < box_lo[i]) {
            pen += (box_lo[i] - v[i]) * (box_lo[i] - v[i]);
            v[i] = box_lo[i];
        }
        if (v[i] > box_hi[i]) {
            pen += (v[i] - box_hi[i]) * (v[i] - box_hi[i]);
            v[i] = box_hi[i];
        }
    }
    p->sink_logit = v[0];
    p->recency_logit = v[1];
    p->recency_tokens = exp(v[2]);
    p->noise = exp(v[3]);
    p->hh_drift = exp(v[4]);
    return pen;
}

struct fit_ctx {
    struct trace_gen_params sim; /* the simulated traces' shape; the logits set per call */
    const struct tracefit_summary *target;
    struct tracefit_summary last;
    char path[4096];
    int rc;
    struct alisa_err *e;
};

/* Generates and summarises p into *out through the scratch path. */
static int simulate(struct fit_ctx *c, const struct trace_gen_params *p,
                    struct tracefit_summary *out)
{
    int rc = trace_gen_write(p, c->path, c->e);
    if (!rc)
        rc = tracefit_summarise(c->path, out, c->e);
    unlink(c->path);
    return rc;
}

static double objective(const gsl_vector *x, void *ctx)
{
    struct fit_ctx *c = ctx;
    if (c->rc)
        return GSL_POSINF;
    struct trace_gen_params p = c->sim;
    double pen = to_params(x, &p);
    if ((c->rc = simulate(c, &p, &c->last)))
        return GSL_POSINF;
    return tracefit_distance(&c->last, c->target) + pen;
}

/* The recorded traces' mean summary into r->target; their shape into p. */
static int fit_target(const char *const *paths, uint32_t n, struct tracefit_result *r,
                      struct alisa_err *e)
{
    struct tracefit_summary *t = &r->target;
    for (uint32_t i = 0; i < n; i++) {
        struct tracefit_summary s;
        int rc = tracefit_summarise(paths[i], &s, e);
        if (rc)
            return rc;
        if (i == 0) {
            *t = s;
            memset(t->m, 0, sizeof t->m);
            memset(t->sparsity, 0, sizeof t->sparsity);
            memset(t->token_mass, 0, sizeof t->token_mass);
            t->jitter = 0;
        } else if (s.n_layers != t->n_layers) {
            return err_set(e, ALISA_EINVAL, "%s: %u layers, %s has %u: traces fitted together "
                           "need one layer count", paths[i], s.n_layers, paths[0], t->n_layers);
        }
        for (int k = 0; k < TRACEFIT_N; k++)
            t->m[k] += s.m[k] / n;
        for (uint32_t l = 0; l < s.n_layers; l++)
            t->sparsity[l] += s.sparsity[l] / n;
        t->jitter += s.jitter / n;
        for (int k = 0; k < TRACEFIT_SINKS; k++)
            t->token_mass[k] += s.token_mass[k] / n;
    }
    t->n_sinks = count_sinks(t->token_mass); /* the mean's, by the same rule */
    return 0;
}

int tracefit_fit(const char *const *paths, uint32_t n, const struct tracefit_options *o,
                 struct tracefit_result *r, struct alisa_err *e)
{
    memset(r, 0, sizeof *r);
    if (!n)
        return err_set(e, ALISA_EINVAL, "no trace to fit");
    if (!o->sim_layers || !o->sim_seqs || !o->max_iter)
        return err_set(e, ALISA_EINVAL, "simulated layers %u, sequences %u and iterations %u "
                       "must be positive", o->sim_layers, o->sim_seqs, o->max_iter);
    if (o->sim_seqs > FIT_SEQS_MAX)
        return err_set(e, ALISA_EINVAL, "--sim-seqs %u: at most %u", o->sim_seqs, FIT_SEQS_MAX);
    int rc = fit_target(paths, n, r, e);
    if (rc)
        return rc;
    const struct tracefit_summary *t = &r->target; /* the first trace's shape */
    struct fit_ctx c = {.target = t, .e = e};
    struct trace_gen_params *p = &c.sim;
    trace_gen_defaults(p);
    snprintf(p->model, sizeof p->model, "fit:%.59s", t->model);
    p->n_heads = t->n_heads;
    p->n_kv_heads = t->n_kv_heads;
    p->hidden = t->hidden;
    p->vocab = t->vocab;
    p->prompt_len = r->target.prompt_len;
    p->gen_len = r->target.gen_len;
    p->n_profile = r->target.n_layers > 1 ? r->target.n_layers : 2;
    for (uint32_t l = 0; l < p->n_profile; l++)
        p->profile[l] = r->target.sparsity[l < r->target.n_layers ? l : 0];
    p->sparsity_jitter = r->target.jitter;
    p->n_sinks = r->target.n_sinks;
    p->threshold = 0.01f;
    p->seed = o->seed;
    p->n_seqs = o->sim_seqs;
    p->n_layers = o->sim_layers < r->target.n_layers ? o->sim_layers : r->target.n_layers;
    snprintf(c.path, sizeof c.path, "%s/alisa-fit-XXXXXX", o->tmpdir);
    int fd = mkstemp(c.path); /* a name of our own; the writer replaces the empty file */
    if (fd < 0)
        return err_set(e, ALISA_EIO, "%s: cannot create a scratch trace there", o->tmpdir);
    close(fd);

    /* the start: the generator's own defaults for the logit terms */
    struct trace_gen_params d;
    trace_gen_defaults(&d);
    gsl_error_handler_t *handler = gsl_set_error_handler_off(); /* statuses, not abort() */
    gsl_vector *x = gsl_vector_alloc(FIT_PARAMS), *step = gsl_vector_alloc(FIT_PARAMS);
    gsl_multimin_fminimizer *m =
        gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2, FIT_PARAMS);
    if (!x || !step || !m) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for the simplex");
        goto done;
    }
    const double x0[FIT_PARAMS] = {d.sink_logit, d.recency_logit, log(d.recency_tokens),
                                   log(d.noise), log(d.hh_drift)};
    for (int i = 0; i < FIT_PARAMS; i++) {
        gsl_vector_set(x, i, x0[i]);
        gsl_vector_set(step, i, i < 2 ? 1.0 : 0.7);
    }
    gsl_multimin_function f = {.f = objective, .n = FIT_PARAMS, .params = &c};
    r->objective_start = objective(x, &c);
    r->start = c.last;
    if ((rc = c.rc))
        goto done;
    int status = gsl_multimin_fminimizer_set(m, &f, x, step);
    if ((rc = c.rc))
        goto done;
    if (status) {
        rc = err_set(e, ALISA_EINVAL, "the simplex could not start: %s", gsl_strerror(status));
        goto done;
    }
    uint32_t it = 0;
    while (it < o->max_iter) {
        status = gsl_multimin_fminimizer_iterate(m);
        if ((rc = c.rc))
            goto done;
        it++;
        if (o->progress)
            o->progress(o->progress_ctx, it, o->max_iter, m->fval);
        if (status || /* no further progress: the best point stands */
            gsl_multimin_test_size(gsl_multimin_fminimizer_size(m), 1e-3) == GSL_SUCCESS)
            break;
    }
    r->iterations = it;
    r->p = c.sim;
    to_params(m->x, &r->p);
    r->objective = objective(m->x, &c); /* its summary, once more */
    r->fitted = c.last;
    rc = c.rc;
    /* the fitted generator at the recorded traces' own shape */
    r->p.n_layers = r->target.n_layers;
    r->p.seed = 1;
    r->p.n_seqs = 1;
done:
    gsl_set_error_handler(handler);
    gsl_multimin_fminimizer_free(m);
    gsl_vector_free(x);
    gsl_vector_free(step);
    unlink(c.path);
    return rc;
}

double tracefit_scale(struct trace_gen_params *p, double params_from, double params_to)
{
    double g = log(TREND_DENSITY) / log(TREND_TO / TREND_FROM);
    double from = params_from > TREND_FROM ? params_from : TREND_FROM;
    double to = params_to > TREND_FROM ? params_to : TREND_FROM;
    double f = to > from ? pow(to / from, -g) : 1.0; /* only ever sparser for a larger model */
    if (!p->n_profile) {
        p->n_profile = 2;
        p->profile[0] = p->sparsity_first;
        p->profile[1] = p->sparsity_last;
    }
    for (uint32_t k = 0; k < p->n_profile; k++)
        p->profile[k] = 1.0 - (1.0 - p->profile[k]) * f;
    return f;
}
