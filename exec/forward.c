/* CPU forward pass (contract in forward.h). Matrices are [out][in]
 * row-major, so y = x W^T is one cblas_sgemm per projection for the whole
 * batch. RoPE tables are precomputed with run.c's float formula so results
 * track llama2.c's.
 */
#include "forward.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp16.h"
#include "planlog.h"

struct llm_state {
    const struct llm_model *m;
    uint32_t batch, max_len;
    uint32_t rows_cap;     /* rows the activation block holds (batch x positions) */
    float *x, *xb, *xb2;   /* (rows, dim), one block from x */
    float *q;              /* (rows, dim) */
    float *k, *v;          /* (rows, kv_dim) */
    float *hb, *hb2;       /* (rows, hidden_dim) */
    float *logits;         /* (rows, vocab) */
    float *att;            /* (n_heads, max_len) scores of one sequence */
    float *key_cache;      /* (n_layers, batch, max_len, kv_dim) */
    float *value_cache;    /* (n_layers, batch, max_len, kv_dim) */
    float *rope_cos, *rope_sin; /* (max_len, head_dim / 2) */
    const float *K, *V;    /* (n, kv_dim) rows of K and V one sequence attends, contiguous */
    uint32_t *ids;         /* (max_len) their token ids */
    float *w;              /* (max_len) head-mean weights over them */
    struct scheduler *sched; /* tiered mode when non-NULL (borrowed) */
    struct kvstore *ks;
    uint32_t prompt_len;
    struct alisa_err err;
    FILE *timings;         /* JSON lines, borrowed; NULL: off */
    FILE *plan_log;        /* decision log (planlog.h), borrowed; NULL: off */
    double *t_layer;       /* (n_layers, T_N) ns per category */
};

/* Timing categories of a layer: weight GEMMs (and the element-wise work
 * between them), attention (the gather of the attended K and V included),
 * KV moves between the arenas, recomputation, and the scheduler's decisions
 * and observations. */
enum { T_GEMM, T_ATTN, T_MOVE, T_RECOMP, T_SCHED, T_N };

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void llm_state_free(struct llm_state *s)
{
    if (!s)
        return;
    free(s->x);
    free(s->att);
    free(s->key_cache);
    free(s->value_cache);
    free(s->rope_cos);
    free(s->ids);
    free(s->w);
    free(s->t_layer);
    free(s);
}

/* Grows the activation block to `rows` rows (batch x positions). Returns 0 or
 * ALISA_ENOMEM (the old block stays). */
static int ensure_rows(struct llm_state *s, uint32_t rows)
{
    if (rows <= s->rows_cap)
        return 0;
    const struct llm_config *c = &s->m->c;
    size_t R = rows, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    float *p = malloc((4 * R * d + 2 * R * kv + 2 * R * hd + R * c->vocab) * sizeof(float));
    if (!p)
        return ALISA_ENOMEM;
    free(s->x);
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
    return 0;
}

int llm_state_create(struct llm_state **out, const struct llm_model *m, uint32_t batch,
                     uint32_t max_len, struct alisa_err *e)
{
    *out = NULL;
    const struct llm_config *c = &m->c;
    if (!batch || !max_len || max_len > c->seq_len)
        return err_set(e, ALISA_EINVAL, "batch %u and length %u must be positive, the length at "
                       "most the model's context %u", batch, max_len, c->seq_len);
    struct llm_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    s->m = m;
    s->batch = batch;
    s->max_len = max_len;
    size_t B = batch, kv = c->kv_dim;
    size_t cache = (size_t)c->n_layers * B * max_len * kv;
    size_t half = c->head_dim / 2;
    s->att = malloc((size_t)c->n_heads * max_len * sizeof(float));
    s->key_cache = malloc(cache * sizeof(float));
    s->value_cache = malloc(cache * sizeof(float));
    s->rope_cos = malloc(2 * (size_t)max_len * half * sizeof(float));
    s->ids = malloc(max_len * sizeof *s->ids);
    s->w = malloc(max_len * sizeof *s->w);
    s->t_layer = calloc((size_t)c->n_layers * T_N, sizeof *s->t_layer);
    if (!s->t_layer || !s->att || !s->key_cache || !s->value_cache || !s->rope_cos ||
        !s->ids || !s->w || ensure_rows(s, batch)) {
        llm_state_free(s);
        return err_set(e, ALISA_ENOMEM, "out of memory for %u sequences of %u tokens", batch,
                       max_len);
    }
    /* zeroed by writing, so every page is faulted in now and no timed step
     * pays for its first touch */
    memset(s->key_cache, 0, cache * sizeof(float));
    memset(s->value_cache, 0, cache * sizeof(float));
    s->rope_sin = s->rope_cos + (size_t)max_len * half;
    for (uint32_t pos = 0; pos < max_len; pos++)
        for (uint32_t i = 0; i < half; i++) {
            float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
            float val = (float)pos * freq;
            s->rope_cos[(size_t)pos * half + i] = cosf(val);
            s->rope_sin[(size_t)pos * half + i] = sinf(val);
        }
    *out = s;
    return 0;
}

static void rmsnorm(float *o, const float *x, const float *w, uint32_t n, float eps)
{
    float ss = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss = 1.0f / sqrtf(ss / (float)n + eps);
    for (uint32_t j = 0; j < n; j++)
        o[j] = w[j] * (ss * x[j]);
}

/* ALISA_REFERENCE_GEMM=1 makes every matrix product (projections and
 * attention) a plain loop, as a single-file llama2.c-style forward pass
 * does: the benchmark's reference point (experiments/bench/exec.sh), never
 * the default. */
static int reference_gemm = -1;

/* C (M, N) = alpha A (M, K) B, B being (K, N), or (N, K) used transposed
 * when transb; row-major with leading dimensions lda, ldb, ldc. */
static void matmul(int transb, uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A,
                   uint32_t lda, const float *B, uint32_t ldb, float *C, uint32_t ldc)
{
    if (reference_gemm < 0) {
        const char *env = getenv("ALISA_REFERENCE_GEMM");
        reference_gemm = env && strcmp(env, "1") == 0;
    }
    if (reference_gemm) {
        for (uint32_t i = 0; i < M; i++)
            for (uint32_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (uint32_t k = 0; k < K; k++)
                    acc += A[(size_t)i * lda + k] *
                           (transb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                C[(size_t)i * ldc + j] = alpha * acc;
            }
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}

/* y (B, out) = x (B, in) W^T, W (out, in). */
static void gemm(float *y, const float *x, const float *w, uint32_t B, uint32_t out, uint32_t in)
{
    matmul(1, B, out, in, 1.0f, x, in, w, in, y, out);
}

static void rope(float *vec, uint32_t n, uint32_t head_dim, const float *cs, const float *sn)
{
    for (uint32_t i = 0; i < n; i += 2) {
        uint32_t j = (i % head_dim) / 2;
        float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * cs[j] - v1 * sn[j];
        vec[i + 1] = v0 * sn[j] + v1 * cs[j];
    }
}

/* Attention of one sequence over the n rows of s->K/s->V (stride kv_dim):
 * per KV head, its group of query heads as two GEMMs (scores Q K^T, output
 * softmax(scores) V) with a softmax per head between them; output into out
 * (dim), head-mean weights into s->w. */
static void attend(struct llm_state *s, const float *q, uint32_t n, uint32_t hs, uint32_t group,
                   uint32_t H, float *out)
{
    const float scale = 1.0f / sqrtf((float)hs);
    const uint32_t kv = s->m->c.kv_dim, ld = s->max_len;
    memset(s->w, 0, n * sizeof *s->w);
    for (uint32_t g = 0; g < H / group; g++) {
        size_t koff = (size_t)g * hs;
        float *att = s->att + (size_t)g * group * s->max_len;
        matmul(1, group, n, hs, scale, q + koff * group, hs, s->K + koff, kv, att, ld);
        for (uint32_t h = 0; h < group; h++) {
            float *a = att + (size_t)h * s->max_len, mx = -INFINITY, sum = 0.0f;
            for (uint32_t t = 0; t < n; t++)
                mx = a[t] > mx ? a[t] : mx;
            for (uint32_t t = 0; t < n; t++) {
                a[t] = expf(a[t] - mx);
                sum += a[t];
            }
            for (uint32_t t = 0; t < n; t++) {
                a[t] /= sum;
                s->w[t] += a[t] / (float)H;
            }
        }
        matmul(0, group, hs, n, 1.0f, att, ld, s->V + koff, kv, out + koff * group, hs);
    }
}

/* Tiered mode: asks the scheduler for this (sequence, layer)'s step, applies
 * the moves to the arenas, and points s->K/s->V at what to attend. Returns
 * the count, 0 on failure (s->err set). */
static uint32_t tiered_gather(struct llm_state *s, uint32_t b, uint32_t l, uint32_t pos,
                              const float *k, const float *v, const float *act, double *tl)
{
    const struct llm_model *m = s->m;
    uint32_t stream = b * m->c.n_layers + l;
    struct scheduler_plan plan;
    uint64_t t0 = mono_ns();
    if (pos < s->prompt_len)
        scheduler_prefill(s->sched, stream, pos, NULL, s->prompt_len, 0, &plan);
    else
        scheduler_step(s->sched, stream, pos, 0, &plan);
    if (s->plan_log)
        planlog_write(s->plan_log, &plan, b, l);
    uint64_t t1 = mono_ns(), r0 = kvstore_recompute_ns(s->ks);
    tl[T_SCHED] += (double)(t1 - t0);
    if (plan.place.oom) {
        err_set(&s->err, ALISA_EINVAL, "sequence %u layer %u position %u: the device KV arena "
                "(%u tokens) cannot hold the step's tokens", b, l, pos,
                scheduler_stream_gpu_cap(s->sched, stream));
        return 0;
    }
    int bad = kvstore_apply(s->ks, &plan, scheduler_stream_flags(s->sched, stream), m, l, pos, k, v,
                            act, &s->err);
    double rec = (double)(kvstore_recompute_ns(s->ks) - r0);
    tl[T_MOVE] += (double)(mono_ns() - t1) - rec;
    tl[T_RECOMP] += rec;
    if (bad)
        return 0;
    /* K and V are read into this sequence's rows of the dense cache (unused in
     * tiered mode): row i is the i-th attended token */
    const uint32_t kv = m->c.kv_dim;
    float *ck = s->key_cache + (size_t)b * s->max_len * kv, *cv = s->value_cache + (size_t)b * s->max_len * kv;
    if (pos < s->prompt_len) { /* prefill: the whole prompt so far, wherever it lies */
        for (uint32_t t = 0; t <= pos; t++) {
            kvstore_fetch(s->ks, m, stream, l, t, ck + (size_t)t * kv, cv + (size_t)t * kv);
            s->ids[t] = t;
        }
        s->K = ck;
        s->V = cv;
        return pos + 1;
    }
    for (uint32_t i = 0; i < plan.n_attended; i++) {
        uint32_t t = plan.attended[i];
        s->ids[i] = t;
        if (kvstore_read(s->ks, stream, t, ck + (size_t)i * kv, cv + (size_t)i * kv)) {
            err_set(&s->err, ALISA_EINVAL, "stream %u position %u: attended token %u is not on the "
                    "device", stream, pos, t);
            return 0;
        }
    }
    s->K = ck;
    s->V = cv;
    return plan.n_attended;
}

void llm_state_tiered(struct llm_state *s, struct scheduler *sched, struct kvstore *ks,
                      uint32_t prompt_len)
{
    s->sched = sched;
    s->ks = sched ? ks : NULL;
    s->prompt_len = prompt_len;
}

const struct alisa_err *llm_state_error(const struct llm_state *s) { return &s->err; }

void llm_state_timings(struct llm_state *s, FILE *f) { s->timings = f; }

void llm_state_plan_log(struct llm_state *s, FILE *f) { s->plan_log = f; }

const float *llm_forward_chunk(struct llm_state *s, const uint32_t *tokens, uint32_t pos0,
                              uint32_t P, float *rows)
{
    const struct llm_config *c = &s->m->c;
    const struct llm_weights *w = &s->m->w;
    const uint32_t B = s->batch, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    const uint32_t H = c->n_heads, hs = c->head_dim, group = c->n_heads / c->n_kv_heads;
    const uint32_t half = hs / 2, R = B * P;
    ALISA_ASSERT(P >= 1 && pos0 + P <= s->max_len && (!rows || P == 1));
    if (ensure_rows(s, R)) {
        err_set(&s->err, ALISA_ENOMEM, "out of memory for %u x %u activation rows", B, P);
        return NULL;
    }
    /* row r = b * P + i holds sequence b at position pos0 + i */
    for (uint32_t r = 0; r < R; r++) {
        ALISA_ASSERT(tokens[r] < c->vocab);
        memcpy(s->x + (size_t)r * d, w->token_embedding + (size_t)tokens[r] * d, d * sizeof(float));
    }
    uint64_t t_start = mono_ns(), t0;
    memset(s->t_layer, 0, (size_t)c->n_layers * T_N * sizeof *s->t_layer);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        double *tl = s->t_layer + (size_t)l * T_N;
        t0 = mono_ns();
        for (uint32_t r = 0; r < R; r++)
            rmsnorm(s->xb + (size_t)r * d, s->x + (size_t)r * d, w->rms_att + (size_t)l * d, d,
                    c->norm_eps);
        gemm(s->q, s->xb, w->wq + (size_t)l * d * d, R, d, d);
        gemm(s->k, s->xb, w->wk + (size_t)l * kv * d, R, kv, d);
        gemm(s->v, s->xb, w->wv + (size_t)l * kv * d, R, kv, d);
        tl[T_GEMM] += (double)(mono_ns() - t0);
        t0 = mono_ns();
        /* positions in order: position p attends keys written at p' <= p */
        for (uint32_t i = 0; i < P; i++) {
            uint32_t pos = pos0 + i, n = pos + 1;
            const float *cs = s->rope_cos + (size_t)pos * half, *sn = s->rope_sin + (size_t)pos * half;
            for (uint32_t b = 0; b < B; b++) {
                size_t r = (size_t)b * P + i;
                float *q = s->q + r * d, *kb = s->k + r * kv, *vb = s->v + r * kv;
                rope(q, d, hs, cs, sn);
                rope(kb, kv, hs, cs, sn);
                float *act = s->xb + r * d; /* this layer's normed input, kept for recompute */
                float *row = rows ? rows + ((size_t)b * c->n_layers + l) * n : NULL;
                uint32_t n_att = 0;
                if (!s->sched) {
                    size_t base = (((size_t)l * B + b) * s->max_len) * kv;
                    memcpy(s->key_cache + base + (size_t)pos * kv, kb, kv * sizeof(float));
                    memcpy(s->value_cache + base + (size_t)pos * kv, vb, kv * sizeof(float));
                    for (uint32_t t = 0; t < n; t++)
                        s->ids[t] = t;
                    s->K = s->key_cache + base;
                    s->V = s->value_cache + base;
                    n_att = n;
                } else {
                    double before = tl[T_MOVE] + tl[T_RECOMP] + tl[T_SCHED];
                    n_att = tiered_gather(s, b, l, pos, kb, vb, act, tl);
                    /* counted below with the attention: take the other
                     * categories out again */
                    tl[T_ATTN] -= tl[T_MOVE] + tl[T_RECOMP] + tl[T_SCHED] - before;
                    if (n_att == 0)
                        return NULL;
                }
                attend(s, q, n_att, hs, group, H, act); /* output replaces the normed input */
                if (row) {
                    memset(row, 0, n * sizeof *row);
                    for (uint32_t a = 0; a < n_att; a++)
                        row[s->ids[a]] = s->w[a];
                }
                if (s->sched) {
                    /* the selection sees the row as a trace stores it
                     * (FP16 weights), so replaying the recorded trace feeds
                     * it exactly the same */
                    uint64_t o0 = mono_ns();
                    uint32_t stream = b * c->n_layers + l;
                    float *dense = s->att; /* scratch, (n) */
                    memset(dense, 0, n * sizeof *dense);
                    for (uint32_t a = 0; a < n_att; a++)
                        dense[s->ids[a]] = fp16_to_float(fp16_from_float(s->w[a]));
                    if (pos < s->prompt_len)
                        scheduler_observe_prefill(s->sched, stream, pos, dense, s->prompt_len);
                    else
                        scheduler_observe_dense(s->sched, stream, dense);
                    double obs = (double)(mono_ns() - o0);
                    tl[T_SCHED] += obs;
                    tl[T_ATTN] -= obs;
                }
            }
        }
        tl[T_ATTN] += (double)(mono_ns() - t0);
        t0 = mono_ns();
        gemm(s->xb2, s->xb, w->wo + (size_t)l * d * d, R, d, d);
        for (size_t i = 0; i < (size_t)R * d; i++)
            s->x[i] += s->xb2[i];
        for (uint32_t r = 0; r < R; r++)
            rmsnorm(s->xb + (size_t)r * d, s->x + (size_t)r * d, w->rms_ffn + (size_t)l * d, d,
                    c->norm_eps);
        gemm(s->hb, s->xb, w->w1 + (size_t)l * hd * d, R, hd, d);
        gemm(s->hb2, s->xb, w->w3 + (size_t)l * hd * d, R, hd, d);
        for (size_t i = 0; i < (size_t)R * hd; i++) {
            float g = s->hb[i];
            s->hb[i] = g / (1.0f + expf(-g)) * s->hb2[i]; /* SwiGLU */
        }
        gemm(s->xb2, s->hb, w->w2 + (size_t)l * d * hd, R, d, hd);
        for (size_t i = 0; i < (size_t)R * d; i++)
            s->x[i] += s->xb2[i];
        tl[T_GEMM] += (double)(mono_ns() - t0);
    }
    t0 = mono_ns();
    for (uint32_t r = 0; r < R; r++)
        rmsnorm(s->xb + (size_t)r * d, s->x + (size_t)r * d, w->rms_final, d, c->norm_eps);
    gemm(s->logits, s->xb, w->wcls, R, c->vocab, d);
    if (s->timings) {
        uint64_t end = mono_ns();
        fprintf(s->timings, "{\"pos\": %u, \"positions\": %u, \"phase\": \"%s\", \"batch\": %u, "
                "\"total_us\": %.3f, \"head_us\": %.3f, \"layers\": [", pos0, P,
                pos0 < s->prompt_len ? "prefill" : "decode", B, (end - t_start) * 1e-3,
                (end - t0) * 1e-3);
        for (uint32_t l = 0; l < c->n_layers; l++) {
            const double *tl = s->t_layer + (size_t)l * T_N;
            fprintf(s->timings, "%s{\"gemm_us\": %.3f, \"attention_us\": %.3f, \"transfer_us\": "
                    "%.3f, \"recompute_us\": %.3f, \"schedule_us\": %.3f}", l ? ", " : "",
                    tl[T_GEMM] * 1e-3, tl[T_ATTN] * 1e-3, tl[T_MOVE] * 1e-3, tl[T_RECOMP] * 1e-3,
                    tl[T_SCHED] * 1e-3);
        }
        fprintf(s->timings, "]}\n");
    }
    return s->logits;
}

const float *llm_forward(struct llm_state *s, const uint32_t *tokens, uint32_t pos, float *rows)
{
    return llm_forward_chunk(s, tokens, pos, 1, rows);
}
