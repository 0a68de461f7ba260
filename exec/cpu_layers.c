/* The CPU's row operations (contract in cpu_layers.h). */
#include "cpu_layers.h"

#include <stddef.h>

#include "cpu_ops.h"
#include "qmat.h"

static const struct qmat *matrix(const struct llm_weights *w, enum lweight k, uint32_t l)
{
    switch (k) {
    case LW_Q: return &w->wq[l];
    case LW_K: return &w->wk[l];
    case LW_V: return &w->wv[l];
    case LW_O: return &w->wo[l];
    case LW_UP: return &w->w1[l];
    case LW_GATE: return &w->w3[l];
    case LW_DOWN: return &w->w2[l];
    default: return &w->wcls;
    }
}

static const float *bias_of(const struct llm_model *m, enum lweight k, uint32_t l)
{
    const struct llm_weights *w = &m->w;
    const size_t d = m->c.dim, kv = m->c.kv_dim, hd = m->c.hidden_dim;
    switch (k) {
    case LW_Q: return w->bq + l * d;
    case LW_K: return w->bk + l * kv;
    case LW_V: return w->bv + l * kv;
    case LW_O: return w->bo + l * d;
    case LW_UP: return w->b1 + l * hd;
    default: return w->b2 + l * d; /* LW_DOWN */
    }
}

static int embed(void *be, uint32_t n)
{
    struct cpu_rows *s = be;
    const uint32_t d = s->m->c.dim;
    for (uint32_t r = 0; r < n; r++)
        qmat_row(&s->m->w.token_embedding, s->tokens[r], s->buf[LB_X] + (size_t)r * d);
    return 0;
}

/* each row's position row, read into the first row of LB_XB and added */
static int embed_pos(void *be, uint32_t n, uint32_t offset)
{
    struct cpu_rows *s = be;
    const uint32_t d = s->m->c.dim;
    float *tmp = s->buf[LB_XB];
    for (uint32_t r = 0; r < n; r++) {
        float *x = s->buf[LB_X] + (size_t)r * d;
        qmat_row(&s->m->w.pos_embedding, s->pos[r] + offset, tmp);
        for (uint32_t j = 0; j < d; j++)
            x[j] += tmp[j];
    }
    return 0;
}

static int norm(void *be, enum lbuf o, enum lbuf x, enum lnorm which, uint32_t l, uint32_t n)
{
    struct cpu_rows *s = be;
    const struct llm_config *c = &s->m->c;
    const struct llm_weights *w = &s->m->w;
    const size_t d = c->dim;
    const float *g = which == LN_FINAL ? w->rms_final
                                       : (which == LN_ATT ? w->rms_att : w->rms_ffn) + l * d;
    const float *b = NULL;
    const int layer_norm = llm_arch_info(c->arch)->norm == LLM_NORM_LAYER;
    if (layer_norm)
        b = which == LN_FINAL ? w->ln_final_b
                              : (which == LN_ATT ? w->ln_att_b : w->ln_ffn_b) + l * d;
    float *out = s->buf[o];
    const float *in = s->buf[x];
#pragma omp parallel for schedule(static) \
    if (cpu_rows_parallel(n, (size_t)n * d, CPU_ROWS_PARALLEL_MIN))
    for (uint32_t r = 0; r < n; r++) {
        if (layer_norm)
            cpu_layernorm(out + r * d, in + r * d, g, b, (uint32_t)d, c->norm_eps);
        else
            cpu_rmsnorm(out + r * d, in + r * d, g, (uint32_t)d, c->norm_eps);
    }
    return 0;
}

static int linear(void *be, enum lbuf y, enum lbuf x, enum lweight w, uint32_t l, uint32_t n,
                  int again)
{
    struct cpu_rows *s = be;
    const struct qmat *q = matrix(&s->m->w, w, l);
    /* the previous product's quantised activations serve again when it read
     * the same rows of the same width (K and V after Q, gate after up) */
    const int reuse = again && s->quantised == s->buf[x] && s->quantised_rows == n &&
                      s->quantised_cols == q->cols;
    int quantised = qmat_gemm_again(s->buf[y], s->buf[x], q, n, s->scratch, reuse);
    s->quantised = quantised ? s->buf[x] : NULL;
    s->quantised_rows = n;
    s->quantised_cols = q->cols;
    return 0;
}

static int bias(void *be, enum lbuf y, enum lweight w, uint32_t l, uint32_t n, int relu)
{
    struct cpu_rows *s = be;
    const uint32_t wd = layers_width(&s->m->c, y);
    cpu_add_bias(s->buf[y], bias_of(s->m, w, l), n, wd);
    if (relu)
        cpu_relu(s->buf[y], (size_t)n * wd);
    return 0;
}

static int rope(void *be, enum lbuf y, uint32_t n)
{
    struct cpu_rows *s = be;
    const struct llm_config *c = &s->m->c;
    const uint32_t wd = layers_width(c, y), hs = c->head_dim, half = hs / 2;
    float *v = s->buf[y];
    if ((size_t)n * wd < CPU_ROWS_PARALLEL_MIN) { /* a decode step's rows */
        for (uint32_t r = 0; r < n; r++)
            cpu_rope(v + (size_t)r * wd, wd, hs, s->rope_cos + (size_t)s->pos[r] * half,
                     s->rope_sin + (size_t)s->pos[r] * half);
        return 0;
    }
#pragma omp parallel for schedule(static)
    for (uint32_t r = 0; r < n; r++)
        cpu_rope(v + (size_t)r * wd, wd, hs, s->rope_cos + (size_t)s->pos[r] * half,
                 s->rope_sin + (size_t)s->pos[r] * half);
    return 0;
}

static int glu(void *be, uint32_t n)
{
    struct cpu_rows *s = be;
    const size_t hd = s->m->c.hidden_dim;
    float *h = s->buf[LB_HB], *g = s->buf[LB_HB2];
#pragma omp parallel for schedule(static) \
    if (cpu_rows_parallel(n, (size_t)n * hd, CPU_ROWS_PARALLEL_MIN))
    for (uint32_t r = 0; r < n; r++)
        cpu_swiglu(h + r * hd, g + r * hd, hd);
    return 0;
}

static int residual(void *be, uint32_t n)
{
    struct cpu_rows *s = be;
    float *x = s->buf[LB_X];
    const float *y = s->buf[LB_XB2];
    for (size_t i = 0; i < (size_t)n * s->m->c.dim; i++)
        x[i] += y[i];
    return 0;
}

const struct layer_ops cpu_row_ops = {
    .embed = embed,
    .embed_pos = embed_pos,
    .norm = norm,
    .linear = linear,
    .bias = bias,
    .rope = rope,
    .glu = glu,
    .residual = residual,
};
