/* Fig. 4's fidelity statistic (contract in fidelity.h). A replay_trace
 * callback adds each decode row into per-layer sums by token position:
 * dense weight, renormalised policy weight, steps seen, mass kept; the
 * averages are then ranked against each other by gsl_stats_spearman.
 */
#include "fidelity.h"

#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "placement.h"
#include "replay.h"
#include "trace.h"

struct acc {
    uint32_t n_layers, max_len;
    double *dense, *sparse; /* (n_layers, max_len) sums of weights by position */
    uint64_t *seen;         /* (n_layers, max_len) decode steps that saw the position */
    double *mass;           /* (n_layers) sum of kept mass */
    uint64_t *steps;        /* (n_layers) decode steps */
    uint64_t attended, context;
};

static void add_plan(void *user, const struct scheduler_plan *p, uint32_t seq, uint32_t layer,
                     const float *row)
{
    (void)seq;
    struct acc *a = user;
    if (p->prefill || p->place.oom || !row)
        return;
    uint32_t n = p->pos + 1 < a->max_len ? p->pos + 1 : a->max_len;
    size_t base = (size_t)layer * a->max_len;
    /* both sides over the stored mass: a sparse trace row's residual belongs
     * to unknown tokens (as in replay's recall) */
    double kept = 0, all = 0;
    for (uint32_t t = 0; t < n; t++)
        all += row[t];
    for (uint32_t t = 0; t < n; t++) {
        a->dense[base + t] += all > 0 ? row[t] / all : 0.0;
        a->seen[base + t]++;
    }
    for (uint32_t i = 0; i < p->n_attended; i++)
        kept += row[p->attended[i]];
    for (uint32_t i = 0; i < p->n_attended && kept > 0; i++) {
        uint32_t t = p->attended[i];
        if (t < n)
            a->sparse[base + t] += row[t] / kept;
    }
    a->mass[layer] += all > 0 ? kept / all : 1.0;
    a->steps[layer]++;
    a->attended += p->n_attended;
    a->context += n;
}

void fidelity_result_free(struct fidelity_result *r)
{
    free(r->layers);
    memset(r, 0, sizeof *r);
}

int fidelity_trace(const char *path, const struct selection_ops *sel, const struct sel_params *p,
                   struct fidelity_result *out, struct alisa_err *e)
{
    memset(out, 0, sizeof *out);
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    struct acc a = {.n_layers = trace_reader_header(r)->n_layers,
                    .max_len = trace_reader_max_len(r)};
    trace_reader_destroy(r);
    size_t cells = (size_t)a.n_layers * a.max_len;
    a.dense = calloc(cells, sizeof *a.dense);
    a.sparse = calloc(cells, sizeof *a.sparse);
    a.seen = calloc(cells, sizeof *a.seen);
    a.mass = calloc(a.n_layers, sizeof *a.mass);
    a.steps = calloc(a.n_layers, sizeof *a.steps);
    double *x = malloc(cells ? a.max_len * 4 * sizeof *x : 1); /* x, y, work (2n) */
    out->layers = calloc(a.n_layers, sizeof *out->layers);
    if (!a.dense || !a.sparse || !a.seen || !a.mass || !a.steps || !x || !out->layers)
        rc = err_set(e, ALISA_ENOMEM, "out of memory for %u layers x %u positions", a.n_layers,
                     a.max_len);
    /* placement plays no part: one unbounded GPU tier */
    struct hw_profile hw = {.link_gbps = 1, .fp16_tflops = 1};
    struct replay_config cfg = {.sel = sel, .sel_params = *p, .place = &place_gpu_only_ops,
                                .gpu_kv_bytes = UINT64_MAX / 4, .cpu_kv_bytes = UINT64_MAX / 4,
                                .hw = &hw, .gpu_fraction = -1};
    struct replay_totals tot;
    if (!rc && (rc = replay_trace(path, &cfg, &tot, add_plan, &a, e)) == 0)
        replay_totals_free(&tot);
    uint64_t steps = 0;
    for (uint32_t l = 0; l < a.n_layers && !rc; l++)
        steps += a.steps[l];
    if (!rc && steps == 0)
        rc = err_set(e, ALISA_EINVAL, "%s: no decode steps to compare (every position is prompt)",
                     path);
    for (uint32_t l = 0; l < a.n_layers && !rc; l++) {
        struct fidelity_layer *fl = &out->layers[l];
        size_t base = (size_t)l * a.max_len, n = 0;
        double *y = x + a.max_len;
        for (uint32_t t = 0; t < a.max_len; t++)
            if (a.seen[base + t]) {
                x[n] = a.dense[base + t] / (double)a.seen[base + t];
                y[n] = a.sparse[base + t] / (double)a.seen[base + t];
                n++;
            }
        fl->positions = (uint32_t)n;
        fl->spearman = n > 1 ? gsl_stats_spearman(x, 1, y, 1, n, y + a.max_len) : 1.0;
        /* a ranking with no spread (every weight equal) has no rank
         * correlation: an error, never a NaN passed on (issue 48) */
        if (!isfinite(fl->spearman))
            rc = err_set(e, ALISA_EINVAL, "%s: layer %u: Spearman's rank correlation is undefined: "
                         "the dense or the selected mean weights are all equal over its %zu "
                         "positions", path, l, n);
        fl->mass_kept = a.steps[l] ? a.mass[l] / (double)a.steps[l] : 1.0;
    }
    if (!rc) {
        out->n_layers = a.n_layers;
        out->decode_steps = steps;
        out->attended_share = a.context ? (double)a.attended / (double)a.context : 1.0;
    } else {
        fidelity_result_free(out);
    }
    free(a.dense);
    free(a.sparse);
    free(a.seen);
    free(a.mass);
    free(a.steps);
    free(x);
    return rc;
}
