/* The layer sequence, once (contract in layers.h): LLaMA (llama2.c's
 * forward: RMSNorm, RoPE, SwiGLU) and OPT (modeling_opt.py's
 * OPTDecoderLayer, pre-LayerNorm, learned positions, ReLU, biases) are the
 * same sequence read with different llm_arch_info.
 */
#include "layers.h"

#define TRY(x)                 \
    do {                       \
        int rc_ = (x);         \
        if (rc_)               \
            return rc_;        \
    } while (0)

uint32_t layers_width(const struct llm_config *c, enum lbuf b)
{
    switch (b) {
    case LB_K: case LB_V: case LB_REC_K: case LB_REC_V:
        return c->kv_dim;
    case LB_HB: case LB_HB2:
        return c->hidden_dim;
    case LB_LOGITS:
        return c->vocab;
    default:
        return c->dim;
    }
}

static int mark(const struct layer_ops *o, void *be, uint32_t l, enum lmark m)
{
    return o->mark ? o->mark(be, l, m) : 0;
}

/* y[i] = x W_i^T for the group's matrices: one call where the backend has
 * linear_group, else one linear each. */
static int group(const struct layer_ops *o, void *be, const enum lbuf *y, enum lbuf x,
                 const enum lweight *w, uint32_t count, uint32_t l, uint32_t n, int again)
{
    if (o->linear_group)
        return o->linear_group(be, y, x, w, count, l, n, again);
    for (uint32_t i = 0; i < count; i++)
        TRY(o->linear(be, y[i], x, w[i], l, n, i ? 1 : again));
    return 0;
}

/* LB_X += LB_XB W^T (+ the matrix's bias): the output and down projections
 * with their residual adds. */
static int project_add(const struct layer_ops *o, void *be, enum lbuf x, enum lweight w,
                       int bias, uint32_t l, uint32_t n)
{
    if (o->linear_residual) {
        TRY(o->linear_residual(be, x, w, l, n));
        return bias ? o->bias(be, LB_X, w, l, n, 0) : 0;
    }
    TRY(o->linear(be, LB_XB2, x, w, l, n, 0));
    if (bias)
        TRY(o->bias(be, LB_XB2, w, l, n, 0));
    return o->residual(be, n);
}

/* K's and V's biases and K's positions, after their projections. */
static int kv_finish(const struct layer_ops *o, void *be, const struct llm_arch_info *a,
                     uint32_t l, uint32_t n, enum lbuf k, enum lbuf v)
{
    if (a->qkv_bias) {
        TRY(o->bias(be, k, LW_K, l, n, 0));
        TRY(o->bias(be, v, LW_V, l, n, 0));
    }
    if (a->positions == LLM_POS_ROPE)
        TRY(o->rope(be, k, n));
    return 0;
}

int layers_kv(const struct layer_ops *o, void *be, const struct llm_arch_info *a, uint32_t l,
              uint32_t n, enum lbuf in, enum lbuf k, enum lbuf v, int again)
{
    const enum lbuf y[2] = {k, v};
    const enum lweight w[2] = {LW_K, LW_V};
    TRY(group(o, be, y, in, w, 2, l, n, again));
    return kv_finish(o, be, a, l, n, k, v);
}

/* Layer l: attention then MLP, each behind its norm, each added back. */
static int layer(const struct layer_ops *o, void *be, const struct llm_arch_info *a, uint32_t l,
                 uint32_t n)
{
    TRY(mark(o, be, l, LM_START));
    TRY(o->norm(be, LB_XB, LB_X, LN_ATT, l, n));
    if (o->after_norm)
        TRY(o->after_norm(be, l, n));
    const enum lbuf qkv_y[3] = {LB_Q, LB_K, LB_V};
    const enum lweight qkv_w[3] = {LW_Q, LW_K, LW_V};
    TRY(group(o, be, qkv_y, LB_XB, qkv_w, 3, l, n, 0));
    TRY(kv_finish(o, be, a, l, n, LB_K, LB_V));
    if (a->qkv_bias)
        TRY(o->bias(be, LB_Q, LW_Q, l, n, 0));
    if (a->positions == LLM_POS_ROPE)
        TRY(o->rope(be, LB_Q, n));
    TRY(mark(o, be, l, LM_QKV));
    TRY(o->attend(be, l, n));
    TRY(mark(o, be, l, LM_ATTN));
    TRY(project_add(o, be, LB_XB, LW_O, a->out_bias, l, n));
    TRY(o->norm(be, LB_XB, LB_X, LN_FFN, l, n));
    if (a->act == LLM_ACT_SWIGLU) {
        const enum lbuf ffn_y[2] = {LB_HB, LB_HB2};
        const enum lweight ffn_w[2] = {LW_UP, LW_GATE};
        TRY(group(o, be, ffn_y, LB_XB, ffn_w, 2, l, n, 0));
        if (a->ffn_bias)
            TRY(o->bias(be, LB_HB, LW_UP, l, n, 0));
        TRY(o->glu(be, n));
    } else {
        TRY(o->linear(be, LB_HB, LB_XB, LW_UP, l, n, 0));
        if (a->ffn_bias)
            TRY(o->bias(be, LB_HB, LW_UP, l, n, a->act == LLM_ACT_RELU));
    }
    TRY(project_add(o, be, LB_HB, LW_DOWN, a->ffn_bias, l, n));
    return mark(o, be, l, LM_END);
}

int layers_forward(const struct layer_ops *o, void *be, const struct llm_config *c, uint32_t n,
                   int head)
{
    const struct llm_arch_info *a = llm_arch_info(c->arch);
    TRY(o->embed(be, n));
    if (a->positions == LLM_POS_LEARNED)
        TRY(o->embed_pos(be, n, a->pos_offset));
    for (uint32_t l = 0; l < c->n_layers; l++)
        TRY(layer(o, be, a, l, n));
    TRY(mark(o, be, c->n_layers, LM_START));
    if (head) {
        enum lbuf src = LB_X;
        uint32_t rows = n;
        if (o->head_rows)
            TRY(o->head_rows(be, n, &src, &rows));
        TRY(o->norm(be, LB_XB, src, LN_FINAL, 0, rows));
        TRY(o->linear(be, LB_LOGITS, LB_XB, LW_CLS, 0, rows, 0));
    }
    return mark(o, be, c->n_layers, LM_END);
}
