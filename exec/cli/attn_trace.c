/* Attention rows from a trace for the executor's selection (attn_trace.h):
 * the trace read once, the rows the run maps to kept as triangles.
 */
#include "attn_trace.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

struct attn_trace {
    uint32_t S, Su, Lt, Lm, len; /* trace sequences, those used, trace layers, model layers */
    float *rows;                 /* (Su, Lt, len (len + 1) / 2): row pos at pos (pos + 1) / 2 */
    uint8_t *have;               /* (Su, len): 1 where the trace recorded the position */
};

static size_t tri(size_t n) { return n * (n + 1) / 2; }

int attn_trace_load(struct attn_trace **out, const char *path, uint32_t n_layers, uint32_t batch,
                    uint32_t prompt_len, uint32_t len, struct alisa_err *e)
{
    *out = NULL;
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header *h = trace_reader_header(r);
    struct attn_trace *a = calloc(1, sizeof *a);
    if (!a) {
        trace_reader_destroy(r);
        return err_set(e, ALISA_ENOMEM, "out of memory");
    }
    a->S = h->n_seqs;
    a->Su = batch < a->S ? batch : a->S;
    a->Lt = h->n_layers;
    a->Lm = n_layers;
    a->len = len;
    for (uint32_t s = 0; s < a->Su && !rc; s++) {
        const struct trace_seq *q = trace_reader_seq(r, s);
        if (q->prompt_len != prompt_len)
            rc = err_set(e, ALISA_EINVAL, "%s: sequence %u: prompt_len %u, the run's prompt has %u "
                         "tokens (--prompt-tokens %u, or a trace recorded with --prompt-len %u)",
                         path, s, q->prompt_len, prompt_len, q->prompt_len, prompt_len);
        else if ((uint64_t)q->prompt_len + q->gen_len < len)
            rc = err_set(e, ALISA_EINVAL, "%s: sequence %u: %u tokens (prompt_len + gen_len), "
                         "the run needs %u", path, s, q->prompt_len + q->gen_len, len);
    }
    double need = 4.0 * (double)a->Su * a->Lt * (double)tri(len);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (!rc && pages > 0 && psize > 0 && need > 0.8 * (double)pages * psize)
        rc = err_set(e, ALISA_ENOMEM, "%s: the rows this run reads take %.1f GB, more than 80%% "
                     "of this machine's memory", path, need / 1e9);
    if (!rc && (!(a->rows = calloc((size_t)a->Su * a->Lt * tri(len), sizeof *a->rows)) ||
                !(a->have = calloc((size_t)a->Su * len, 1))))
        rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for %.1f GB of rows", path, need / 1e9);
    struct trace_step st;
    int got = 0;
    while (!rc && (got = trace_reader_next(r, &st, e)) > 0) {
        if (st.seq >= a->Su || st.pos >= len)
            continue;
        for (uint32_t t = 0; t < a->Lt; t++)
            memcpy(a->rows + ((size_t)st.seq * a->Lt + t) * tri(len) + tri(st.pos),
                   st.w + (size_t)t * st.n_ctx, st.n_ctx * sizeof *a->rows);
        a->have[(size_t)st.seq * len + st.pos] = 1;
    }
    if (!rc && got < 0)
        rc = got;
    trace_reader_destroy(r);
    if (rc) {
        attn_trace_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

const float *attn_trace_row(void *ctx, uint32_t seq, uint32_t layer, uint32_t pos)
{
    const struct attn_trace *a = ctx;
    uint32_t s = seq % a->S, t = (uint32_t)((uint64_t)layer * a->Lt / a->Lm);
    if (s >= a->Su || pos >= a->len || !a->have[(size_t)s * a->len + pos])
        return NULL;
    return a->rows + ((size_t)s * a->Lt + t) * tri(a->len) + tri(pos);
}

void attn_trace_free(struct attn_trace *a)
{
    if (!a)
        return;
    free(a->rows);
    free(a->have);
    free(a);
}
