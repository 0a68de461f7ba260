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

struct llm_state {
    const struct llm_model *m;
    uint32_t batch, max_len;
    float *x, *xb, *xb2;   /* (batch, dim) */
    float *q;              /* (batch, dim) */
    float *k, *v;          /* (batch, kv_dim) */
    float *hb, *hb2;       /* (batch, hidden_dim) */
    float *att;            /* (n_heads, max_len) scores of one sequence */
    float *logits;         /* (batch, vocab) */
    float *key_cache;      /* (n_layers, batch, max_len, kv_dim) */
    float *value_cache;    /* (n_layers, batch, max_len, kv_dim) */
    float *rope_cos, *rope_sin; /* (max_len, head_dim / 2) */
};

void llm_state_free(struct llm_state *s)
{
    if (!s)
        return;
    free(s->x);
    free(s->key_cache);
    free(s->value_cache);
    free(s->rope_cos);
    free(s);
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
    size_t B = batch, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    /* one allocation for the activations, carved below */
    size_t n = 4 * B * d + 2 * B * kv + 2 * B * hd + (size_t)c->n_heads * max_len + B * c->vocab;
    size_t cache = (size_t)c->n_layers * B * max_len * kv;
    size_t half = c->head_dim / 2;
    s->x = malloc(n * sizeof(float));
    s->key_cache = calloc(cache, sizeof(float));
    s->value_cache = calloc(cache, sizeof(float));
    s->rope_cos = malloc(2 * (size_t)max_len * half * sizeof(float));
    if (!s->x || !s->key_cache || !s->value_cache || !s->rope_cos) {
        llm_state_free(s);
        return err_set(e, ALISA_ENOMEM, "out of memory for %u sequences of %u tokens", batch,
                       max_len);
    }
    float *p = s->x + B * d;
    s->xb = p; p += B * d;
    s->xb2 = p; p += B * d;
    s->q = p; p += B * d;
    s->k = p; p += B * kv;
    s->v = p; p += B * kv;
    s->hb = p; p += B * hd;
    s->hb2 = p; p += B * hd;
    s->att = p; p += (size_t)c->n_heads * max_len;
    s->logits = p;
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

/* y (B, out) = x (B, in) W^T, W (out, in). */
static void gemm(float *y, const float *x, const float *w, uint32_t B, uint32_t out, uint32_t in)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)out, (int)in, 1.0f, x,
                (int)in, w, (int)in, 0.0f, y, (int)out);
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

const float *llm_forward(struct llm_state *s, const uint32_t *tokens, uint32_t pos, float *rows)
{
    const struct llm_config *c = &s->m->c;
    const struct llm_weights *w = &s->m->w;
    const uint32_t B = s->batch, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    const uint32_t H = c->n_heads, hs = c->head_dim, group = c->n_heads / c->n_kv_heads;
    const uint32_t n = pos + 1, half = hs / 2;
    ALISA_ASSERT(pos < s->max_len);
    const float *cs = s->rope_cos + (size_t)pos * half, *sn = s->rope_sin + (size_t)pos * half;
    for (uint32_t b = 0; b < B; b++) {
        ALISA_ASSERT(tokens[b] < c->vocab);
        memcpy(s->x + (size_t)b * d, w->token_embedding + (size_t)tokens[b] * d, d * sizeof(float));
    }
    const float scale = 1.0f / sqrtf((float)hs);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        for (uint32_t b = 0; b < B; b++)
            rmsnorm(s->xb + (size_t)b * d, s->x + (size_t)b * d, w->rms_att + (size_t)l * d, d,
                    c->norm_eps);
        gemm(s->q, s->xb, w->wq + (size_t)l * d * d, B, d, d);
        gemm(s->k, s->xb, w->wk + (size_t)l * kv * d, B, kv, d);
        gemm(s->v, s->xb, w->wv + (size_t)l * kv * d, B, kv, d);
        for (uint32_t b = 0; b < B; b++) {
            float *q = s->q + (size_t)b * d;
            rope(q, d, hs, cs, sn);
            rope(s->k + (size_t)b * kv, kv, hs, cs, sn);
            size_t base = (((size_t)l * B + b) * s->max_len) * kv;
            memcpy(s->key_cache + base + (size_t)pos * kv, s->k + (size_t)b * kv, kv * sizeof(float));
            memcpy(s->value_cache + base + (size_t)pos * kv, s->v + (size_t)b * kv,
                   kv * sizeof(float));
            float *out = s->xb + (size_t)b * d; /* attention output replaces the normed input */
            float *row = rows ? rows + ((size_t)b * c->n_layers + l) * n : NULL;
            if (row)
                memset(row, 0, n * sizeof *row);
            for (uint32_t h = 0; h < H; h++) {
                const float *qh = q + (size_t)h * hs;
                float *att = s->att + (size_t)h * s->max_len;
                size_t koff = (size_t)(h / group) * hs;
                float mx = -INFINITY;
                for (uint32_t t = 0; t < n; t++) {
                    const float *kt = s->key_cache + base + (size_t)t * kv + koff;
                    float dot = 0.0f;
                    for (uint32_t i = 0; i < hs; i++)
                        dot += qh[i] * kt[i];
                    att[t] = dot * scale;
                    if (att[t] > mx)
                        mx = att[t];
                }
                float sum = 0.0f;
                for (uint32_t t = 0; t < n; t++) {
                    att[t] = expf(att[t] - mx);
                    sum += att[t];
                }
                float *oh = out + (size_t)h * hs;
                memset(oh, 0, hs * sizeof(float));
                for (uint32_t t = 0; t < n; t++) {
                    att[t] /= sum;
                    const float *vt = s->value_cache + base + (size_t)t * kv + koff;
                    for (uint32_t i = 0; i < hs; i++)
                        oh[i] += att[t] * vt[i];
                    if (row)
                        row[t] += att[t] / (float)H;
                }
            }
        }
        gemm(s->xb2, s->xb, w->wo + (size_t)l * d * d, B, d, d);
        for (size_t i = 0; i < (size_t)B * d; i++)
            s->x[i] += s->xb2[i];
        for (uint32_t b = 0; b < B; b++)
            rmsnorm(s->xb + (size_t)b * d, s->x + (size_t)b * d, w->rms_ffn + (size_t)l * d, d,
                    c->norm_eps);
        gemm(s->hb, s->xb, w->w1 + (size_t)l * hd * d, B, hd, d);
        gemm(s->hb2, s->xb, w->w3 + (size_t)l * hd * d, B, hd, d);
        for (size_t i = 0; i < (size_t)B * hd; i++) {
            float g = s->hb[i];
            s->hb[i] = g / (1.0f + expf(-g)) * s->hb2[i]; /* SwiGLU */
        }
        gemm(s->xb2, s->hb, w->w2 + (size_t)l * d * hd, B, d, hd);
        for (size_t i = 0; i < (size_t)B * d; i++)
            s->x[i] += s->xb2[i];
    }
    for (uint32_t b = 0; b < B; b++)
        rmsnorm(s->xb + (size_t)b * d, s->x + (size_t)b * d, w->rms_final, d, c->norm_eps);
    gemm(s->logits, s->xb, w->wcls, B, c->vocab, d);
    return s->logits;
}
