/* The CPU backend (backend.h's ops; contract in forward.h): activations in
 * host memory, weight products over the whole batch (qmat.h: a GGUF's
 * quantised blocks, or FP32 through CBLAS), the row-wise operations and
 * dense attention across OpenMP threads (cpu_ops.h), the KV arenas in host
 * memory (kvstore.h); the tiered cache's attention runs sequence by
 * sequence, in the scheduler's order. Owns the activations and a dense KV
 * cache; in tiered mode the dense cache's rows of a sequence hold the K and
 * V it attends, read out of the device arena. The oracle of the CUDA backend.
 */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_layers.h"
#include "cpu_ops.h"
#include "fp16.h"
#include "fit.h"
#include "skew.h"

struct cpu_state {
    struct cpu_rows rows;  /* first: the row operations' context (cpu_layers.h), the
                              buffers below by name */
    const struct llm_model *m;
    uint32_t batch, max_len;
    uint32_t rows_cap;     /* rows the activation block holds (batch x positions) */
    float *x, *xb, *xb2;   /* (rows, dim), one block from x */
    float *q;              /* (rows, dim) */
    float *k, *v;          /* (rows, kv_dim) */
    float *hb, *hb2;       /* (rows, hidden_dim) */
    float *logits;         /* (rows, vocab) */
    void *qscratch;        /* qmat_gemm's activation blocks for rows_cap rows */
    uint32_t *slot, *pos;  /* (rows_cap) each row's sequence and position (lockstep calls) */
    uint32_t *order;       /* (rows_cap) rows by position, then sequence: the tiered pass;
                              then (max_len + 1) counts to sort them */
    uint32_t nt;           /* threads the dense attention runs on */
    float *att;            /* (nt, n_heads, max_len) scores of one sequence a thread */
    float *key_cache;      /* (n_layers, batch, max_len, kv_dim) */
    float *value_cache;    /* (n_layers, batch, max_len, kv_dim) */
    float *rope_cos, *rope_sin; /* (max_len, head_dim / 2) */
    const float *K, *V;    /* (n, kv_dim) rows of K and V one sequence attends, contiguous */
    uint32_t *ids;         /* (max_len) their token ids */
    float *w;              /* (nt, max_len) head-mean weights over them, a thread */
    float *present;        /* (max_len) the step's own head-mean row over every token, FP16
                              weights: what a selection that needs the present reads */
    float *kb;             /* (max_len, dim) a selection's estimate's scratch (Quest's page
                              bound keys), made at its first use; NULL until then */
    /* InfiniGen's speculation (a PARTIAL estimate), made at its first use: */
    uint32_t ig_m;         /* partial channels a head */
    float *ig_q;           /* (batch, n_layers, ig_qlen, dim) the prompt's queries, until
                              every stream's directions are made */
    uint32_t ig_qlen;      /* the prompt length ig_q holds */
    float *ig_a;           /* (batch, n_layers, n_heads, ig_m, head_dim) skewed directions */
    float *ig_k;           /* (batch, n_layers, max_len, n_heads, ig_m) partial keys */
    uint8_t *ig_ready;     /* (batch, n_layers) 1: ig_a and the prompt's ig_k are made */
    float *ig_prev;        /* (ig_rows, dim) each row's normed input to the layer before */
    float *ig_qs;          /* (ig_rows, dim) each row's speculated query: this layer's Wq
                              times ig_prev (InfiniGen speculates a layer ahead) */
    uint32_t ig_rows;      /* rows ig_prev and ig_qs hold */
    /* the call in flight (cpu_forward_rows), read by the layer ops */
    struct backend_common *cm;
    const uint32_t *cslot; /* (R) each row's sequence */
    float *out_rows;       /* attention rows asked for, or NULL */
    struct sel_estimate est; /* the run's estimate, asked once a call */
    int speculate;         /* InfiniGen's speculation runs this call */
    const uint32_t *head_rows; /* the rows the head reads, or NULL: all */
    uint32_t n_head;
    uint64_t t0;           /* the current timing segment's start */
    double head_ns;        /* the head's time this call */
};

static void ig_free(struct cpu_state *s);

static void cpu_destroy(void *be)
{
    struct cpu_state *s = be;
    if (!s)
        return;
    free(s->x);
    free(s->qscratch);
    free(s->slot); /* slot, pos and order: one block */
    free(s->att);
    free(s->key_cache);
    free(s->value_cache);
    free(s->rope_cos);
    free(s->ids);
    free(s->w);
    free(s->kb);
    ig_free(s);
    free(s->present);
    free(s);
}

/* Grows the activation block to `rows` rows (batch x positions). Returns 0 or
 * ALISA_ENOMEM (the old block stays). */
static int ensure_rows(struct cpu_state *s, uint32_t rows)
{
    if (rows <= s->rows_cap)
        return 0;
    const struct llm_config *c = &s->m->c;
    size_t R = rows, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    float *p = malloc((4 * R * d + 2 * R * kv + 2 * R * hd + R * c->vocab) * sizeof(float));
    void *qs = malloc(qmat_scratch_bytes(d > hd ? (uint32_t)d : (uint32_t)hd, rows));
    uint32_t *ix = malloc((3 * R + s->max_len + 1) * sizeof *ix);
    if (!p || !qs || !ix) {
        free(p), free(qs), free(ix);
        return ALISA_ENOMEM;
    }
    free(s->x);
    free(s->qscratch);
    free(s->slot); /* one block: slot, pos, order */
    s->qscratch = qs;
    s->slot = ix;
    s->pos = ix + R;
    s->order = ix + 2 * R;
    s->x = p; p += R * d;
    s->xb = p; p += R * d;
    s->xb2 = p; p += R * d;
    s->q = p; p += R * d;
    s->k = p; p += R * kv;
    s->v = p; p += R * kv;
    s->hb = p; p += R * hd;
    s->hb2 = p; p += R * hd;
    s->logits = p;
    s->rows_cap = rows;
    float *named[LB_N] = {[LB_X] = s->x, [LB_XB] = s->xb, [LB_XB2] = s->xb2, [LB_Q] = s->q,
                          [LB_K] = s->k, [LB_V] = s->v, [LB_HB] = s->hb, [LB_HB2] = s->hb2,
                          [LB_LOGITS] = s->logits};
    memcpy(s->rows.buf, named, sizeof named);
    s->rows.scratch = s->qscratch;
    s->rows.quantised = NULL; /* its buffer is gone */
    return 0;
}

static int cpu_create(void **be, const struct backend_common *cm, struct alisa_err *e)
{
    *be = NULL;
    const struct llm_config *c = &cm->m->c;
    if (cm->m->synth_lazy)
        return err_set(e, ALISA_EINVAL, "%s: synthetic weights not drawn on the host (drawn on "
                       "the GPU for --backend cuda)", cm->m->name);
    struct cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    s->m = cm->m;
    s->batch = cm->batch;
    s->max_len = cm->max_len;
    size_t B = s->batch, kv = c->kv_dim, max_len = s->max_len;
    size_t cache = (size_t)c->n_layers * B * max_len * kv;
    size_t half = c->head_dim / 2;
    s->nt = cpu_threads();
    s->att = malloc((size_t)s->nt * c->n_heads * max_len * sizeof(float));
    s->key_cache = malloc(cache * sizeof(float));
    s->value_cache = malloc(cache * sizeof(float));
    s->rope_cos = malloc(2 * max_len * half * sizeof(float));
    s->ids = malloc(max_len * sizeof *s->ids);
    s->w = malloc(s->nt * max_len * sizeof *s->w);
    s->present = malloc(max_len * sizeof *s->present);
    if (!s->att || !s->key_cache || !s->value_cache || !s->rope_cos || !s->ids || !s->w ||
        !s->present ||
        ensure_rows(s, s->batch)) {
        cpu_destroy(s); /* frees s: the figures come from cm */
        return err_set(e, ALISA_ENOMEM, "out of memory for %u sequences of %u tokens", cm->batch,
                       cm->max_len);
    }
    /* zeroed by writing, so every page is faulted in now and no timed step
     * pays for its first touch */
    memset(s->key_cache, 0, cache * sizeof(float));
    memset(s->value_cache, 0, cache * sizeof(float));
    s->rope_sin = s->rope_cos + max_len * half;
    llm_rope_tables(c, s->max_len, s->rope_cos, s->rope_sin);
    s->rows.m = s->m;
    s->rows.rope_cos = s->rope_cos;
    s->rows.rope_sin = s->rope_sin;
    *be = s;
    return 0;
}

static int cpu_kvstore(void *be, uint32_t n_streams, uint32_t max_len, uint32_t dev_cap,
                       uint32_t host_cap, int int8, struct kvstore **out, struct alisa_err *e)
{
    struct cpu_state *s = be;
    return kvstore_create(out, &s->m->c, n_streams, max_len, dev_cap, host_cap, int8, e);
}

static void ig_free(struct cpu_state *s)
{
    free(s->ig_q);
    free(s->ig_a);
    free(s->ig_k);
    free(s->ig_ready);
    free(s->ig_prev);
    free(s->ig_qs);
    s->ig_q = s->ig_a = s->ig_k = s->ig_prev = s->ig_qs = NULL;
    s->ig_ready = NULL;
    s->ig_rows = 0;
}

/* InfiniGen speculates layer l's attention from the layer before: its
 * normed attention input times layer l's query weights (InfiniGen's
 * modeling_llama_ours.py LlamaAttention.forward, `previous_hidden_states`
 * @ q_proj, the layers passing theirs on in LlamaModel.forward;
 * flex_opt.py computes the same a layer early to prefetch). Called with
 * layer l's normed input in s->xb (R rows): the speculated queries of
 * layer l >= 1 into s->ig_qs from the rows' layer l - 1 inputs, then
 * layer l's kept for layer l + 1. Layer 0 has no layer before: under
 * --every-layer 1 it scores from its own query (by default InfiniGen's
 * first two layers are dense: selection_ops.dense_layers, and a dense
 * layer's own query is not speculated: `selects` 0, its input only kept).
 * The caller runs it in calls with a decode row only. Returns 0, or -1
 * with cm->err set. */
static int ig_speculate(struct cpu_state *s, struct backend_common *cm, uint32_t l, uint32_t R,
                        int selects)
{
    const struct llm_config *c = &s->m->c;
    const struct llm_weights *w = &s->m->w;
    const uint32_t d = c->dim;
    if (R > s->ig_rows) {
        float *p = realloc(s->ig_prev, (size_t)R * d * sizeof *p);
        if (p)
            s->ig_prev = p;
        float *q = p ? realloc(s->ig_qs, (size_t)R * d * sizeof *q) : NULL;
        if (!q) {
            err_set(&cm->err, ALISA_ENOMEM, "out of memory for InfiniGen's speculation (%u rows)",
                    R);
            return -1;
        }
        s->ig_qs = q;
        s->ig_rows = R;
    }
    if (l > 0 && selects) {
        qmat_gemm(s->ig_qs, s->ig_prev, &w->wq[l], R, s->qscratch);
        s->rows.quantised = NULL; /* scratch holds another buffer's now */
        if (llm_arch_info(c->arch)->qkv_bias)
            cpu_add_bias(s->ig_qs, w->bq + (size_t)l * d, R, d);
    }
    memcpy(s->ig_prev, s->xb, (size_t)R * d * sizeof *s->xb);
    return 0;
}

/* InfiniGen's state for ratio r, made at its first use: the skewed
 * directions, partial keys and readiness; and the prompt's queries, for
 * cm->prompt_len tokens, made again when a prompt comes after they were
 * dropped (ig_present drops them once every stream is ready) or has
 * another length. A run without a prompt has nothing to skew by: refused.
 * Returns 0, or -1 with cm->err set (and nothing kept). */
static int ig_alloc(struct cpu_state *s, struct backend_common *cm, double r)
{
    const struct llm_config *c = &s->m->c;
    const size_t streams = (size_t)s->batch * c->n_layers, P = cm->prompt_len;
    if (P == 0) {
        err_set(&cm->err, ALISA_EINVAL, "InfiniGen's speculation (--partial-ratio) skews by the "
                "prompt's queries: it needs a prompt of at least one token");
        return -1;
    }
    if (!s->ig_ready) {
        uint32_t m = (uint32_t)(c->head_dim * r);
        s->ig_m = m ? m : 1;
        if (!(s->ig_a = malloc(streams * c->n_heads * s->ig_m * c->head_dim * sizeof *s->ig_a)) ||
            !(s->ig_k = malloc(streams * s->max_len * c->n_heads * s->ig_m * sizeof *s->ig_k)) ||
            !(s->ig_ready = calloc(streams, 1)))
            goto oom;
    }
    if (s->ig_q && s->ig_qlen != P) {
        free(s->ig_q);
        s->ig_q = NULL;
    }
    if (!s->ig_q && !(s->ig_q = malloc(streams * P * c->dim * sizeof *s->ig_q)))
        goto oom;
    s->ig_qlen = (uint32_t)P;
    return 0;
oom:
    ig_free(s);
    err_set(&cm->err, ALISA_ENOMEM, "out of memory for InfiniGen's partial keys (%u tokens)",
            s->max_len);
    return -1;
}

/* Partial keys of token t of stream (b, l): each head's m skewed channels
 * of its KV head's key k. */
static void ig_key(struct cpu_state *s, size_t st, uint32_t t, const float *k)
{
    const struct llm_config *c = &s->m->c;
    const uint32_t H = c->n_heads, hs = c->head_dim, m = s->ig_m, group = H / c->n_kv_heads;
    float *out = s->ig_k + ((st * s->max_len + t) * H) * m;
    for (uint32_t h = 0; h < H; h++) {
        const float *a = s->ig_a + (st * H + h) * m * hs, *kh = k + (size_t)(h / group) * hs;
        for (uint32_t r = 0; r < m; r++) {
            float x = 0;
            for (uint32_t i = 0; i < hs; i++)
                x += a[(size_t)r * hs + i] * kh[i];
            out[(size_t)h * m + r] = x;
        }
    }
}

/* InfiniGen's speculated row at pos into s->w: at the stream's first decode
 * step each head's skewed directions from the prompt's queries
 * (cpu_skew_basis) and the prompt's partial keys from the keys as stored
 * (INT8 ones dequantised), each later token's from its key as computed
 * (InfiniGen writes its partial key cache from the fresh key); then the
 * query's m channels against every token's, scaled, softmaxed per head, the
 * heads averaged. Returns 0, or -1 with cm->err set. */
static int ig_present(struct cpu_state *s, struct backend_common *cm, uint32_t b, uint32_t l,
                      uint32_t pos, const float *q, const float *k)
{
    const struct llm_model *m = s->m;
    const struct llm_config *c = &m->c;
    const uint32_t H = c->n_heads, hs = c->head_dim, M = s->ig_m, kv = c->kv_dim;
    const size_t st = (size_t)b * c->n_layers + l;
    if (!s->ig_ready[st]) {
        const uint32_t P = cm->prompt_len < pos ? cm->prompt_len : pos;
        if (!s->ig_q || P == 0) {
            err_set(&cm->err, ALISA_EINVAL, "InfiniGen's speculation at position %u of stream %zu: "
                    "no prompt queries to skew by", pos, st);
            return -1;
        }
        const float *Q = s->ig_q + st * s->ig_qlen * c->dim;
        for (uint32_t h = 0; h < H; h++)
            if (cpu_skew_basis(Q + (size_t)h * hs, P, c->dim, hs, M,
                               s->ig_a + (st * H + h) * M * hs)) {
                err_set(&cm->err, ALISA_ENOMEM, "out of memory for InfiniGen's skewing");
                return -1;
            }
        float *ck = s->key_cache + (size_t)b * s->max_len * kv;
        float *cv = s->value_cache + (size_t)b * s->max_len * kv;
        for (uint32_t t = 0; t < pos; t++) {
            kvstore_fetch(cm->ks, m, (uint32_t)st, l, t, ck + (size_t)t * kv, cv + (size_t)t * kv);
            ig_key(s, st, t, ck + (size_t)t * kv);
        }
        s->ig_ready[st] = 1;
        size_t ready = 0, streams = (size_t)s->batch * c->n_layers;
        while (ready < streams &&
               (s->ig_ready[ready] || !scheduler_stream_needs_present(cm->sched, (uint32_t)ready)))
            ready++;
        if (ready == streams) { /* every stream skewed: the prompt's queries are done with */
            free(s->ig_q);
            s->ig_q = NULL;
        }
    }
    ig_key(s, st, pos, k);
    const float scale = 1.0f / sqrtf((float)hs), inv_h = 1.0f / (float)H;
    float *qp = s->xb2; /* scratch until the output projection; M <= head_dim floats */
    memset(s->w, 0, (pos + 1) * sizeof *s->w);
    for (uint32_t h = 0; h < H; h++) {
        const float *a = s->ig_a + (st * H + h) * M * hs, *qh = q + (size_t)h * hs;
        for (uint32_t r = 0; r < M; r++) {
            float x = 0;
            for (uint32_t i = 0; i < hs; i++)
                x += a[(size_t)r * hs + i] * qh[i];
            qp[r] = x;
        }
        float *att = s->att + (size_t)h * s->max_len;
        for (uint32_t t = 0; t <= pos; t++) {
            const float *kp = s->ig_k + ((st * s->max_len + t) * H + h) * M;
            float x = 0;
            for (uint32_t r = 0; r < M; r++)
                x += qp[r] * kp[r];
            att[t] = scale * x;
        }
        cpu_softmax(att, pos + 1);
        for (uint32_t t = 0; t <= pos; t++)
            s->w[t] += att[t] * inv_h;
    }
    return 0;
}

/* The step's row a selection that needs the present reads before it picks,
 * into s->present as a trace stores it (FP16 weights), its time the
 * selection's: the query's own attention over every token 0..pos, head-mean
 * (a recorded row under --attention-from), or, when the selection runs as
 * its real estimate (scheduler_present_estimate), that estimate, computed
 * from this run's keys whatever --attention-from gives: Quest's page bounds
 * give each token its page's weight; InfiniGen's speculation (ig_present)
 * reads its partial keys. The exact row and Quest's bounds fetch every
 * earlier token's K and V wherever they lie (kvstore_fetch) into the
 * sequence's dense rows, the new token's beside them. qe: the query
 * InfiniGen's speculation reads (ig_speculate's, or q at layer 0). Returns
 * 0, or -1 with cm->err set. */
static int cpu_present(struct cpu_state *s, struct backend_common *cm,
                       const struct sel_estimate *e, uint32_t b, uint32_t l, uint32_t pos,
                       const float *q, const float *qe, const float *k, const float *v,
                       double *tl)
{
    const struct llm_model *m = s->m;
    const uint32_t kv = m->c.kv_dim, stream = b * m->c.n_layers + l;
    const uint32_t H = m->c.n_heads, group = H / m->c.n_kv_heads, hs = m->c.head_dim;
    uint64_t t0 = backend_mono_ns();
    const struct sel_estimate est = *e;
    const float *src = cm->attn_row && est.kind == SEL_ESTIMATE_EXACT
                           ? cm->attn_row(cm->attn_ctx, b, l, pos) : NULL;
    if (est.kind == SEL_ESTIMATE_PAGE_BOUNDS && !s->kb &&
        !(s->kb = malloc((size_t)s->max_len * m->c.dim * sizeof *s->kb))) {
        err_set(&cm->err, ALISA_ENOMEM, "out of memory for the selection's estimate (%u tokens)",
                s->max_len);
        return -1;
    }
    if (est.kind == SEL_ESTIMATE_PARTIAL) {
        if ((!s->ig_ready && ig_alloc(s, cm, est.ratio)) || ig_present(s, cm, b, l, pos, qe, k))
            return -1;
        for (uint32_t t = 0; t <= pos; t++)
            s->present[t] = fp16_to_float(fp16_from_float(s->w[t]));
    } else if (src) {
        memcpy(s->present, src, (pos + 1) * sizeof *s->present);
    } else {
        float *ck = s->key_cache + (size_t)b * s->max_len * kv;
        float *cv = s->value_cache + (size_t)b * s->max_len * kv;
        for (uint32_t t = 0; t < pos; t++)
            kvstore_fetch(cm->ks, m, stream, l, t, ck + (size_t)t * kv, cv + (size_t)t * kv);
        memcpy(ck + (size_t)pos * kv, k, kv * sizeof *k);
        memcpy(cv + (size_t)pos * kv, v, kv * sizeof *v);
        /* the output goes to scratch: xb2 is free until the output projection */
        uint32_t per = 1;
        if (est.kind == SEL_ESTIMATE_PAGE_BOUNDS) {
            per = est.page;
            cpu_page_bounds(q, ck, pos + 1, kv, hs, group, H, per, s->kb, s->att, s->max_len,
                            s->w, s->xb2);
        } else {
            cpu_attend(q, ck, cv, pos + 1, kv, hs, group, H, s->att, s->max_len, s->w, s->xb2);
        }
        for (uint32_t t = 0; t <= pos; t++)
            s->present[t] = fp16_to_float(fp16_from_float(s->w[t / per]));
    }
    tl[T_SCHED] += (double)(backend_mono_ns() - t0);
    return 0;
}

/* Tiered mode: asks the scheduler for this (sequence, layer)'s step (the
 * present row computed first when the selection reads it, as est, the
 * run's scheduler_present_estimate, says), applies the moves to the arenas,
 * and points s->K/s->V at what to attend. Returns the count, 0 on failure
 * (cm->err set). */
static uint32_t tiered_gather(struct cpu_state *s, struct backend_common *cm,
                              const struct sel_estimate *est, uint32_t b, uint32_t l,
                              uint32_t pos, const float *q, const float *qe, const float *k,
                              const float *v, const float *act, double *tl)
{
    const struct llm_model *m = s->m;
    uint32_t stream = b * m->c.n_layers + l;
    struct scheduler_plan plan;
    const float *present = NULL;
    const uint32_t prompt = backend_prompt(cm, b);
    if (pos < prompt && est->kind == SEL_ESTIMATE_PARTIAL) {
        /* InfiniGen skews by the prompt's queries: kept for the first decode step */
        if (ig_alloc(s, cm, est->ratio))
            return 0;
        const size_t st = (size_t)b * m->c.n_layers + l;
        if (pos == 0)
            s->ig_ready[st] = 0; /* a new sequence in this slot */
        memcpy(s->ig_q + (st * s->ig_qlen + pos) * m->c.dim, q, m->c.dim * sizeof *q);
    }
    if (pos >= prompt && scheduler_stream_needs_present(cm->sched, stream)) {
        if (cpu_present(s, cm, est, b, l, pos, q, qe, k, v, tl))
            return 0;
        present = s->present;
    }
    if (backend_plan(cm, b, l, pos, present, &plan, tl))
        return 0;
    uint64_t t1 = backend_mono_ns(), r0 = kvstore_recompute_ns(cm->ks);
    int bad = kvstore_apply(cm->ks, &plan, scheduler_stream_flags(cm->sched, stream), m, l, pos, k,
                            v, act, &cm->err);
    double rec = (double)(kvstore_recompute_ns(cm->ks) - r0);
    tl[T_MOVE] += (double)(backend_mono_ns() - t1) - rec;
    tl[T_RECOMP] += rec;
    if (bad)
        return 0;
    /* K and V are read into this sequence's rows of the dense cache (unused in
     * tiered mode): row i is the i-th attended token */
    const uint32_t kv = m->c.kv_dim;
    float *ck = s->key_cache + (size_t)b * s->max_len * kv;
    float *cv = s->value_cache + (size_t)b * s->max_len * kv;
    s->K = ck;
    s->V = cv;
    if (pos < prompt) { /* prefill: the whole prompt so far, wherever it lies */
        for (uint32_t t = 0; t <= pos; t++) {
            kvstore_fetch(cm->ks, m, stream, l, t, ck + (size_t)t * kv, cv + (size_t)t * kv);
            s->ids[t] = t;
        }
        return pos + 1;
    }
    for (uint32_t i = 0; i < plan.n_attended; i++) {
        uint32_t t = plan.attended[i];
        s->ids[i] = t;
        if (kvstore_read(cm->ks, stream, t, ck + (size_t)i * kv, cv + (size_t)i * kv)) {
            err_set(&cm->err, ALISA_EINVAL, "stream %u position %u: attended token %u is not on "
                    "the device", stream, pos, t);
            return 0;
        }
    }
    return plan.n_attended;
}

/* Layer l's attention of the R rows (q, k, v in s after the projections,
 * RoPE applied) on the dense cache: every row's keys written, then every row attends,
 * across the threads (on the calling thread, row after row, where
 * cpu_rows_parallel says so: under passive waits below
 * CPU_ATTEND_PARALLEL_MIN); rows (when given: one position a call) get the
 * head-mean weights, cm->attn_heads each head's. The output replaces the
 * normed input (s->xb). */
static void dense_attend(struct cpu_state *s, struct backend_common *cm, uint32_t l,
                         const uint32_t *slot, const uint32_t *pos_of, uint32_t R, float *rows)
{
    const struct llm_config *c = &s->m->c;
    const uint32_t B = s->batch, d = c->dim, kv = c->kv_dim, H = c->n_heads, hs = c->head_dim;
    const uint32_t group = H / c->n_kv_heads;
    size_t work = 0; /* multiply-adds of the rows' attention, about */
    for (uint32_t r = 0; r < R; r++)
        work += (size_t)(pos_of[r] + 1 - llm_attend_first(c, pos_of[r] + 1)) * d * 2;
#pragma omp parallel for schedule(static) num_threads(s->nt) \
    if (cpu_rows_parallel(R, (size_t)R * kv * 2, CPU_ROWS_PARALLEL_MIN))
    for (uint32_t r = 0; r < R; r++) {
        uint32_t b = slot[r], pos = pos_of[r];
        size_t base = (((size_t)l * B + b) * s->max_len + pos) * kv;
        memcpy(s->key_cache + base, s->k + (size_t)r * kv, kv * sizeof(float));
        memcpy(s->value_cache + base, s->v + (size_t)r * kv, kv * sizeof(float));
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->nt) \
    if (cpu_rows_parallel(R, work, CPU_ATTEND_PARALLEL_MIN))
    for (uint32_t r = 0; r < R; r++) {
        uint32_t b = slot[r], pos = pos_of[r], n = pos + 1, tid = cpu_thread_id();
        uint32_t first = llm_attend_first(c, n), m = n - first; /* a sliding window's */
        size_t base = ((((size_t)l * B + b) * s->max_len) + first) * kv;
        float *wt = s->w + (size_t)tid * s->max_len;
        cpu_attend(s->q + (size_t)r * d, s->key_cache + base, s->value_cache + base, m, kv, hs,
                   group, H, s->att + (size_t)tid * H * s->max_len, s->max_len, wt,
                   s->xb + (size_t)r * d);
        if (rows) { /* positions outside the window get weight 0 */
            float *row = rows + ((size_t)b * c->n_layers + l) * n;
            memset(row, 0, first * sizeof *row);
            memcpy(row + first, wt, m * sizeof *wt);
        }
        for (uint32_t h = 0; rows && cm->attn_heads && h < H; h++) { /* cpu_attend's rows */
            float *row = cm->attn_heads + (((size_t)b * c->n_layers + l) * H + h) * n;
            memset(row, 0, first * sizeof *row);
            memcpy(row + first, s->att + ((size_t)tid * H + h) * s->max_len, m * sizeof(float));
        }
    }
}

/* Layer l's attention of the R rows under the scheduler: positions in
 * order (s->order), position p attending keys written at p' <= p; each row
 * asks for its step (tiered_gather), attends what it gathered, records
 * the row the trace keeps (the present row the selection read, else the
 * attended tokens' weights: an estimate is not attention) and feeds the
 * scheduler the same, so a replay reads and observes what this run did.
 * tl's attention excludes the moves, recomputation and scheduling counted
 * apart. e: the run's estimate (scheduler_present_estimate, asked once by
 * the caller). Returns 0, or -1 with cm->err set. */
static int tiered_attend(struct cpu_state *s, struct backend_common *cm,
                         const struct sel_estimate *e, uint32_t l, const uint32_t *slot,
                         const uint32_t *pos_of, uint32_t R, float *rows, double *tl)
{
    const struct llm_config *c = &s->m->c;
    const uint32_t d = c->dim, kv = c->kv_dim, H = c->n_heads, hs = c->head_dim;
    const uint32_t group = H / c->n_kv_heads, half = hs / 2;
    const int rope = llm_arch_info(c->arch)->positions == LLM_POS_ROPE;
    const struct sel_estimate est = *e;
    for (uint32_t k = 0; k < R; k++) {
        const uint32_t r = s->order[k], b = slot[r], pos = pos_of[r], n = pos + 1;
        const float *cs = s->rope_cos + (size_t)pos * half, *sn = s->rope_sin + (size_t)pos * half;
        float *q = s->q + r * d, *kb = s->k + r * kv, *vb = s->v + r * kv; /* rotated */
        const uint32_t prompt = backend_prompt(cm, b);
        /* whether this stream selects (not one of the dense leading layers) */
        const int sel_layer = scheduler_stream_needs_present(cm->sched, b * c->n_layers + l);
        /* InfiniGen's speculated query (ig_speculate), rotated as q is */
        float *qe = q;
        if (est.kind == SEL_ESTIMATE_PARTIAL && sel_layer && l > 0 && pos >= prompt) {
            qe = s->ig_qs + (size_t)r * d;
            if (rope)
                cpu_rope(qe, d, hs, cs, sn);
        }
        float *act = s->xb + r * d; /* this layer's normed input, kept for recompute */
        float *row = rows ? rows + ((size_t)b * c->n_layers + l) * n : NULL;
        double before = tl[T_MOVE] + tl[T_RECOMP] + tl[T_SCHED];
        uint32_t n_att = tiered_gather(s, cm, &est, b, l, pos, q, qe, kb, vb, act, tl);
        tl[T_ATTN] -= tl[T_MOVE] + tl[T_RECOMP] + tl[T_SCHED] - before;
        if (n_att == 0)
            return -1;
        /* output replaces the normed input */
        cpu_attend(q, s->K, s->V, n_att, kv, hs, group, H, s->att, s->max_len, s->w, act);
        const float *present =
            pos >= prompt && sel_layer && est.kind == SEL_ESTIMATE_EXACT ? s->present : NULL;
        if (row && present) {
            memcpy(row, present, n * sizeof *row);
        } else if (row) {
            memset(row, 0, n * sizeof *row);
            for (uint32_t a = 0; a < n_att; a++)
                row[s->ids[a]] = s->w[a];
        }
        tl[T_ATTN] -= backend_observe(cm, b, l, pos, s->ids, s->w, n_att, present, s->att, tl);
    }
    return 0;
}

/* ---- the layer sequence's backend operations (layers.h) beyond the row
 * operations of cpu_layers.h, on the call in flight ---- */

static int cpu_attend_op(void *be, uint32_t l, uint32_t R)
{
    struct cpu_state *s = be;
    struct backend_common *cm = s->cm;
    if (!cm->sched) {
        dense_attend(s, cm, l, s->cslot, s->rows.pos, R, s->out_rows);
        return 0;
    }
    return tiered_attend(s, cm, &s->est, l, s->cslot, s->rows.pos, R, s->out_rows,
                         cm->t_layer + (size_t)l * T_N);
}

/* InfiniGen's speculation, from the attention norm's output, as the
 * selection's time (taken out of the layer's GEMM segment) */
static int cpu_after_norm(void *be, uint32_t l, uint32_t R)
{
    struct cpu_state *s = be;
    struct backend_common *cm = s->cm;
    if (!s->speculate)
        return 0;
    uint64_t t1 = backend_mono_ns();
    /* a layer's streams are all dense or all selecting */
    if (ig_speculate(s, cm, l, R,
                     scheduler_stream_needs_present(cm->sched, s->cslot[0] * s->m->c.n_layers + l)))
        return -1;
    double spec = (double)(backend_mono_ns() - t1);
    cm->t_layer[(size_t)l * T_N + T_SCHED] += spec;
    s->t0 += (uint64_t)spec;
    return 0;
}

/* A layer's time on the host clock: its projections and MLP as GEMM (the
 * norms, biases, RoPE and element-wise work with them), its attention
 * apart; the head's time for the timings line. */
static int cpu_mark(void *be, uint32_t l, enum lmark m)
{
    struct cpu_state *s = be;
    uint64_t now = backend_mono_ns();
    if (l == s->m->c.n_layers) {
        if (m == LM_END)
            s->head_ns = (double)(now - s->t0);
        else
            s->t0 = now;
        return 0;
    }
    double *tl = s->cm->t_layer + (size_t)l * T_N;
    if (m != LM_START)
        tl[m == LM_ATTN ? T_ATTN : T_GEMM] += (double)(now - s->t0);
    s->t0 = now;
    return 0;
}

/* The rows asked for (head_rows), gathered into LB_XB2 first. */
static int cpu_head_rows(void *be, uint32_t R, enum lbuf *src, uint32_t *rows)
{
    struct cpu_state *s = be;
    if (!s->head_rows)
        return 0;
    const uint32_t d = s->m->c.dim;
    (void)R;
    for (uint32_t k = 0; k < s->n_head; k++)
        memcpy(s->xb2 + (size_t)k * d, s->x + (size_t)s->head_rows[k] * d, d * sizeof *s->x);
    *src = LB_XB2;
    *rows = s->n_head;
    return 0;
}

/* The forward pass over R rows, row r being sequence slot[r]'s token at
 * position pos[r] (a sequence's rows in increasing positions, its earlier
 * positions computed before): the lockstep call's rows (cpu_forward) or a
 * serving iteration's (llm_forward_rows), through the one layer sequence
 * (layers_forward). The head runs over every row, or, with head_rows, over
 * those n_head rows only (the logits then (n_head, vocab)). tpos0 and tP
 * are what the timings line reports. */
static const float *cpu_forward_rows(struct cpu_state *s, struct backend_common *cm,
                                     const uint32_t *tokens, const uint32_t *slot,
                                     const uint32_t *pos_of, uint32_t R, float *rows,
                                     const uint32_t *head_rows, uint32_t n_head, uint32_t tpos0,
                                     uint32_t tP)
{
    const struct llm_config *c = &s->m->c;
    cpu_flush_subnormals();
    if (ensure_rows(s, R)) {
        err_set(&cm->err, ALISA_ENOMEM, "out of memory for %u activation rows", R);
        return NULL;
    }
    if (cm->sched) { /* the tiered pass visits rows by position, then sequence */
        uint32_t *count = s->order + R; /* (max_len + 1), part of the index block */
        memset(count, 0, ((size_t)s->max_len + 1) * sizeof *count);
        for (uint32_t r = 0; r < R; r++)
            count[pos_of[r] + 1]++;
        for (uint32_t p = 0; p < s->max_len; p++)
            count[p + 1] += count[p];
        for (uint32_t r = 0; r < R; r++) /* rows of a position stay in sequence order */
            s->order[count[pos_of[r]]++] = r;
    }
    memset(&s->est, 0, sizeof s->est); /* asked once a call (tiered_attend's too) */
    if (cm->sched)
        scheduler_present_estimate(cm->sched, &s->est);
    s->speculate = 0; /* InfiniGen's, in a call with a decode row */
    for (uint32_t r = 0; s->est.kind == SEL_ESTIMATE_PARTIAL && r < R && !s->speculate; r++)
        s->speculate = pos_of[r] >= backend_prompt(cm, slot[r]);
    s->cm = cm;
    s->cslot = slot;
    s->out_rows = rows;
    s->head_rows = head_rows;
    s->n_head = n_head;
    s->rows.tokens = tokens;
    s->rows.pos = pos_of;
    struct layer_ops o = cpu_row_ops;
    o.attend = cpu_attend_op;
    o.after_norm = cpu_after_norm;
    o.mark = cpu_mark;
    o.head_rows = cpu_head_rows;
    uint64_t t_start = backend_mono_ns();
    int rc = layers_forward(&o, s, c, R, !cm->no_head);
    s->cm = NULL;
    if (rc)
        return NULL;
    uint64_t end = backend_mono_ns();
    backend_write_timings(cm, tpos0, tP, (double)(end - t_start), s->head_ns);
    return s->logits;
}

/* llm_forward_chunk: row r = b * P + i is sequence b at position pos0 + i. */
static const float *cpu_forward(void *be, struct backend_common *cm, const uint32_t *tokens,
                                uint32_t pos0, uint32_t P, float *rows)
{
    struct cpu_state *s = be;
    const uint32_t R = s->batch * P;
    if (ensure_rows(s, R)) {
        err_set(&cm->err, ALISA_ENOMEM, "out of memory for %u x %u activation rows", s->batch, P);
        return NULL;
    }
    for (uint32_t r = 0; r < R; r++) {
        s->slot[r] = r / P;
        s->pos[r] = pos0 + r % P;
    }
    return cpu_forward_rows(s, cm, tokens, s->slot, s->pos, R, rows, NULL, 0, pos0, P);
}

static const float *cpu_forward_ragged(void *be, struct backend_common *cm,
                                       const uint32_t *tokens, const uint32_t *slot,
                                       const uint32_t *pos, uint32_t R, const uint32_t *head_rows,
                                       uint32_t n_head)
{
    return cpu_forward_rows(be, cm, tokens, slot, pos, R, NULL, head_rows, n_head, pos[0], R);
}

/* ---- calibration's microbenchmarks (backend.h) ---- */

static void cpu_describe(struct llm_backend_info *out)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    out->mem_gib = pages > 0 && size > 0 ? (double)pages * (double)size / 1073741824.0 : 0.0;
    snprintf(out->device, sizeof out->device, "unknown CPU");
    out->note[0] = 0;
    out->attend_parallel_min = (double)cpu_attend_parallel_min();
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(out->device, sizeof out->device, "%s", strchr(line, ':') + 2);
            out->device[strcspn(out->device, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

static int cpu_bench_gemm(unsigned rows, unsigned out, unsigned in, double *ns,
                          struct alisa_err *e)
{
    float *w = malloc((size_t)out * in * sizeof *w), *x = malloc((size_t)rows * in * sizeof *x),
          *y = malloc((size_t)rows * out * sizeof *y);
    if (!w || !x || !y) {
        free(w), free(x), free(y);
        return err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers");
    }
    backend_bench_fill(w, (size_t)out * in);
    backend_bench_fill(x, (size_t)rows * in);
    double t[5];
    cpu_gemm(y, x, w, rows, out, in);
    for (int k = 0; k < 5; k++) {
        uint64_t t0 = backend_mono_ns();
        cpu_gemm(y, x, w, rows, out, in);
        t[k] = (double)(backend_mono_ns() - t0);
    }
    *ns = fit_median(t, 5);
    free(w), free(x), free(y);
    return 0;
}

/* Two host allocations (the arenas are host memory), memcpy at a different
 * offset each time so no copy is from hot lines alone. */
#define CPU_COPY_SPAN ((size_t)16 << 20)
static int cpu_bench_copy(size_t bytes, double *ns, struct alisa_err *e)
{
    unsigned char *src = bytes <= CPU_COPY_SPAN ? malloc(CPU_COPY_SPAN) : NULL,
                  *dst = src ? malloc(CPU_COPY_SPAN) : NULL;
    if (!src || !dst) {
        free(src), free(dst);
        return err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers (%zu bytes)",
                       bytes);
    }
    memset(src, 1, CPU_COPY_SPAN);
    memset(dst, 2, CPU_COPY_SPAN);
    int reps = bytes < 65536 ? 2000 : bytes < (1u << 22) ? 50 : 5;
    double t[5];
    for (int k = 0; k < 5; k++) {
        uint64_t t0 = backend_mono_ns();
        for (int r = 0; r < reps; r++) {
            size_t off = ((size_t)r * 4096) % (CPU_COPY_SPAN - bytes + 1);
            memcpy(dst + off, src + off, bytes);
        }
        t[k] = (double)(backend_mono_ns() - t0) / reps;
    }
    *ns = fit_median(t, 5);
    free(src), free(dst);
    return 0;
}

/* K and V of one token from its layer input (kvstore_recompute, the
 * executor's own), as the executor recomputes: a layer's tokens one after
 * another right after its own K/V projection, the layer's weights hot. Per
 * layer one warm-up call, then 16 tokens timed; the median over layers of 5
 * rounds. */
static double cpu_bench_recompute(const struct llm_model *m)
{
    const struct llm_config *c = &m->c;
    const size_t half = c->head_dim / 2, P = 17;
    float *act = malloc(c->dim * sizeof *act), *k = malloc(2 * c->kv_dim * sizeof *k);
    float *tab = malloc(2 * P * half * sizeof *tab); /* RoPE's tables for tokens 0..16 */
    double *t = malloc((size_t)5 * c->n_layers * sizeof *t);
    if (!act || !k || !tab || !t) {
        free(act), free(k), free(tab), free(t);
        return NAN;
    }
    const int rope = llm_arch_info(c->arch)->positions == LLM_POS_ROPE;
    if (rope)
        llm_rope_tables(c, (uint32_t)P, tab, tab + P * half);
    backend_bench_fill(act, c->dim);
    size_t n = 0;
    for (int r = 0; r < 5; r++)
        for (uint32_t l = 0; l < c->n_layers; l++) {
            uint64_t t0 = 0;
            for (uint32_t tok = 0; tok < P; tok++) { /* token 0 warms up */
                if (tok == 1)
                    t0 = backend_mono_ns();
                kvstore_recompute(m, l, act, rope ? tab + tok * half : NULL,
                                  rope ? tab + (P + tok) * half : NULL, k, k + c->kv_dim);
            }
            t[n++] = (double)(backend_mono_ns() - t0) / 16;
        }
    double med = fit_median(t, n);
    free(act), free(k), free(tab), free(t);
    return med;
}

/* The forward pass's weight GEMMs alone (backend.h): qmat_gemm over each
 * layer's matrices as cpu_forward runs them (w3 only in a gated FFN; K, V
 * and the gate reuse the quantised activations of the product before, as
 * the layer sequence's `again` lets them), then the head, on activations in
 * [-0.5, 0.5). */
static int cpu_bench_weights(const struct llm_model *m, uint32_t rows, uint32_t layers,
                             uint32_t passes, double *layers_ns, double *head_ns,
                             struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    const struct llm_weights *w = &m->w;
    const int gated = llm_arch_info(c->arch)->act == LLM_ACT_SWIGLU;
    size_t wide = c->hidden_dim > c->dim ? c->hidden_dim : c->dim;
    size_t out = wide > c->vocab ? wide : c->vocab;
    if (layers > c->n_layers)
        layers = c->n_layers;
    if (passes < 1 || passes > 255)
        return err_set(e, ALISA_EINVAL, "bench_weights: %u passes (1 to 255)", passes);
    float *x = malloc((size_t)rows * wide * sizeof *x), *y = malloc((size_t)rows * out * sizeof *y);
    void *scratch = malloc(qmat_scratch_bytes((uint32_t)wide, rows));
    if (!x || !y || !scratch) {
        free(x), free(y), free(scratch);
        return err_set(e, ALISA_ENOMEM, "out of memory for the weight-kernel buffers (%u rows)",
                       rows);
    }
    backend_bench_fill(x, (size_t)rows * wide);
    double tl[256], th[256];
    for (uint32_t p = 0; p <= passes; p++) { /* pass 0 warms up */
        uint64_t t0 = backend_mono_ns();
        for (uint32_t l = 0; l < layers; l++) {
            const struct qmat *mats[7] = {&w->wq[l], &w->wk[l], &w->wv[l], &w->wo[l],
                                          &w->w1[l], gated ? &w->w3[l] : NULL, &w->w2[l]};
            int held = 0; /* scratch holds x quantised at the previous product's width */
            for (int k = 0; k < 7; k++) {
                if (!mats[k])
                    continue;
                int again = (k == 1 || k == 2 || k == 5) && held && mats[k - 1] &&
                            mats[k - 1]->cols == mats[k]->cols;
                held = qmat_gemm_again(y, x, mats[k], rows, scratch, again);
            }
        }
        uint64_t t1 = backend_mono_ns();
        qmat_gemm(y, x, &w->wcls, rows, scratch);
        tl[p] = (double)(t1 - t0);
        th[p] = (double)(backend_mono_ns() - t1);
    }
    *layers_ns = fit_median(tl + 1, passes);
    *head_ns = fit_median(th + 1, passes);
    free(x), free(y), free(scratch);
    return 0;
}

const struct backend_ops backend_cpu = {
    .name = "cpu",
    .label = "CPU",
    .computes = "OpenMP threads; FP32 weights, or a GGUF's blocks times 8-bit activations",
    .weight_bytes = 4,
    .kv_bytes = 4,
    .batched_copies = 0,
    .attn_heads_out = 1,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .kvstore = cpu_kvstore,
    .forward = cpu_forward,
    .forward_rows = cpu_forward_ragged,
    .describe = cpu_describe,
    .bench_gemm = cpu_bench_gemm,
    .bench_copy = cpu_bench_copy,
    .bench_recompute = cpu_bench_recompute,
    .bench_weights = cpu_bench_weights,
};
