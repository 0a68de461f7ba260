/* Per-layer attention sparsity of recorded or synthetic traces.
 *
 * Keeps every decode row's sparsity value (one double per row and layer) so
 * that exact quartiles can be taken with GSL; memory is 8 bytes per row.
 * Does not weigh rows by length: each decode step counts once, as in the
 * paper's per-step figures.
 */
#include "trace_stats.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <stdlib.h>
#include <string.h>

struct layer_values {
    double *v;  /* (n) sparsity of each decode row */
    size_t n;
    size_t cap;
    int sorted;
};

struct trace_stats {
    uint32_t n_layers;
    struct layer_values *layers; /* (n_layers) */
    struct layer_values all;     /* every row of every layer */
};

double stats_row_sparsity(const float *row, uint32_t n, double rel)
{
    if (n == 0)
        return 0.0;
    float mx = row[0];
    for (uint32_t i = 1; i < n; i++)
        if (row[i] > mx)
            mx = row[i];
    /* float arithmetic, as the stored weights are: a weight of exactly 1%
     * of the max is not "below" it. */
    float cut = (float)rel * mx;
    uint32_t below = 0;
    for (uint32_t i = 0; i < n; i++)
        below += row[i] < cut;
    return (double)below / n;
}

static int values_push(struct layer_values *lv, double x)
{
    if (lv->n == lv->cap) {
        size_t cap = lv->cap ? 2 * lv->cap : 1024;
        double *v = realloc(lv->v, cap * sizeof *v);
        if (!v)
            return ALISA_ENOMEM;
        lv->v = v;
        lv->cap = cap;
    }
    lv->v[lv->n++] = x;
    lv->sorted = 0;
    return 0;
}

int trace_stats_create(struct trace_stats **out, uint32_t n_layers, struct alisa_err *e)
{
    *out = NULL;
    struct trace_stats *s = calloc(1, sizeof *s);
    if (!s || !(s->layers = calloc(n_layers ? n_layers : 1, sizeof *s->layers))) {
        free(s);
        return err_set(e, ALISA_ENOMEM, "out of memory for statistics of %u layers", n_layers);
    }
    s->n_layers = n_layers;
    *out = s;
    return 0;
}

int trace_stats_add(struct trace_stats *s, const struct trace_step *st, uint32_t prompt_len,
                    struct alisa_err *e)
{
    if (st->pos < prompt_len)
        return 0;
    for (uint32_t l = 0; l < s->n_layers; l++) {
        double x = stats_row_sparsity(st->w + (size_t)l * st->n_ctx, st->n_ctx, TRACE_SPARSITY_REL);
        if (values_push(&s->layers[l], x) || values_push(&s->all, x))
            return err_set(e, ALISA_ENOMEM, "out of memory for row statistics");
    }
    return 0;
}

static void summarize(struct layer_values *lv, struct sparsity_summary *out)
{
    memset(out, 0, sizeof *out);
    if (lv->n == 0)
        return;
    if (!lv->sorted) {
        gsl_sort(lv->v, 1, lv->n);
        lv->sorted = 1;
    }
    out->rows = lv->n;
    out->mean = gsl_stats_mean(lv->v, 1, lv->n);
    out->min = lv->v[0];
    out->max = lv->v[lv->n - 1];
    out->q25 = gsl_stats_quantile_from_sorted_data(lv->v, 1, lv->n, 0.25);
    out->median = gsl_stats_quantile_from_sorted_data(lv->v, 1, lv->n, 0.5);
    out->q75 = gsl_stats_quantile_from_sorted_data(lv->v, 1, lv->n, 0.75);
}

void trace_stats_summary(struct trace_stats *s, uint32_t layer, struct sparsity_summary *out)
{
    if (layer == UINT32_MAX) {
        summarize(&s->all, out);
        return;
    }
    ALISA_ASSERT(layer < s->n_layers);
    summarize(&s->layers[layer], out);
}

uint32_t trace_stats_layers(const struct trace_stats *s) { return s->n_layers; }

int trace_stats_from_file(const char *path, struct trace_stats **out, uint64_t enc_rows[3],
                          struct alisa_err *e)
{
    *out = NULL;
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header *h = trace_reader_header(r);
    struct trace_stats *s;
    if ((rc = trace_stats_create(&s, h->n_layers, e))) {
        trace_reader_destroy(r);
        return rc;
    }
    if (enc_rows)
        memset(enc_rows, 0, 3 * sizeof *enc_rows);
    struct trace_step st;
    while ((rc = trace_reader_next(r, &st, e)) == 1) {
        const struct trace_seq *q = trace_reader_seq(r, st.seq);
        if ((rc = trace_stats_add(s, &st, q->prompt_len, e)))
            break;
        for (uint32_t l = 0; enc_rows && l < h->n_layers; l++)
            if (st.enc[l] < 3)
                enc_rows[st.enc[l]]++;
    }
    trace_reader_destroy(r);
    if (rc < 0) {
        trace_stats_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

void trace_stats_destroy(struct trace_stats *s)
{
    if (!s)
        return;
    for (uint32_t l = 0; l < s->n_layers; l++)
        free(s->layers[l].v);
    free(s->layers);
    free(s->all.v);
    free(s);
}
