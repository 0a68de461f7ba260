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

int layers_kv(const struct layer_ops *o, void *be, const struct llm_arch_info *a, uint32_t l,
              uint32_t n, enum lbuf in, enum lbuf k, enum lbuf v, int again)
{
    TRY(o->linear(be, k, in, LW_K, l, n, again));
    TRY(o->linear(be, v, in, LW_V, l, n, 1));
    if (a->qkv_bias) {
        TRY(o->bias(be, k, LW_K, l, n, 0));
        TRY(o->bias(be, v, LW_V, l, n, 0));
    }
    if (a->positions == LLM_POS_ROPE)
        TRY(o->rope(be, k, n));
    return 0;
}

/* Layer l: attention then MLP, each behind its norm, each added back. */
static int layer(const struct layer_ops *o, void *be, const struct llm_arch_info *a, uint32_t l,
                 uint32_t n)
{
    TRY(mark(o, be, l, LM_START));
    TRY(o->norm(be, LB_XB, LB_X, LN_ATT, l, n));
    if (o->after_norm)
        TRY(o->after_norm(be, l, n));
    TRY(o->linear(be, LB_Q, LB_XB, LW_Q, l, n, 0));
    TRY(layers_kv(o, be, a, l, n, LB_XB, LB_K, LB_V, 1));
    if (a->qkv_bias)
        TRY(o->bias(be, LB_Q, LW_Q, l, n, 0));
    if (a->positions == LLM_POS_ROPE)
        TRY(o->rope(be, LB_Q, n));
    TRY(mark(o, be, l, LM_QKV));
    TRY(o->attend(be, l, n));
    TRY(mark(o, be, l, LM_ATTN));
    TRY(o->linear(be, LB_XB2, LB_XB, LW_O, l, n, 0));
    if (a->out_bias)
        TRY(o->bias(be, LB_XB2, LW_O, l, n, 0));
    TRY(o->residual(be, n));
    TRY(o->norm(be, LB_XB, LB_X, LN_FFN, l, n));
    TRY(o->linear(be, LB_HB, LB_XB, LW_UP, l, n, 0));
    if (a->ffn_bias)
        TRY(o->bias(be, LB_HB, LW_UP, l, n, a->act == LLM_ACT_RELU));
    if (a->act == LLM_ACT_SWIGLU) {
        TRY(o->linear(be, LB_HB2, LB_XB, LW_GATE, l, n, 1));
        TRY(o->glu(be, n));
    }
    TRY(o->linear(be, LB_XB2, LB_HB, LW_DOWN, l, n, 0));
    if (a->ffn_bias)
        TRY(o->bias(be, LB_XB2, LW_DOWN, l, n, 0));
    TRY(o->residual(be, n));
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
