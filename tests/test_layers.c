/* The layer sequence written once (exec/layers.h), on an ops table that
 * records each call: LLaMA's order is llama2.c's forward (run.c: rmsnorm,
 * q k v matmuls, RoPE on q and k, attention, wo, residual, rmsnorm, w1 and
 * w3, SwiGLU, w2, residual; then the final rmsnorm and the classifier), and
 * OPT's is modeling_opt.py's OPTDecoderLayer with do_layer_norm_before
 * (LayerNorm, q k v with biases, attention, out_proj with bias, residual,
 * LayerNorm, fc1 with bias, ReLU, fc2 with bias, residual; positions from
 * OPTLearnedPositionalEmbedding, offset 2), written out below by hand. A
 * failing operation stops the sequence with its status; every architecture's
 * description is one the sequence runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "layers.h"

struct rec {
    char log[8192];
    int fail_at;  /* the call number that fails (status 7), or -1 */
    int calls;
};

static const char *bn(enum lbuf b)
{
    static const char *n[LB_N] = {"x", "xb", "xb2", "q", "k", "v", "hb", "hb2", "logits",
                                  "rin", "rk", "rv"};
    return n[b];
}

static const char *wn(enum lweight w)
{
    static const char *n[] = {"wq", "wk", "wv", "wo", "up", "gate", "down", "cls"};
    return n[w];
}

static int say(struct rec *r, const char *fmt, ...)
{
    char one[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    size_t used = strlen(r->log);
    snprintf(r->log + used, sizeof r->log - used, "%s%s", used ? "; " : "", one);
    return r->calls++ == r->fail_at ? 7 : 0;
}

static int embed(void *be, uint32_t n) { return say(be, "embed %u", n); }
static int embed_pos(void *be, uint32_t n, uint32_t off) { return say(be, "pos+%u", off); }
static int norm(void *be, enum lbuf o, enum lbuf x, enum lnorm w, uint32_t l, uint32_t n)
{
    return say(be, "norm%d.%u %s<-%s", (int)w, l, bn(o), bn(x));
}
static int linear(void *be, enum lbuf y, enum lbuf x, enum lweight w, uint32_t l, uint32_t n,
                  int again)
{
    return say(be, "%s<-%s%s.%u%s", bn(y), bn(x), wn(w), l, again ? " again" : "");
}
static int bias(void *be, enum lbuf y, enum lweight w, uint32_t l, uint32_t n, int relu)
{
    return say(be, "%s+b%s%s", bn(y), wn(w), relu ? " relu" : "");
}
static int rope(void *be, enum lbuf y, uint32_t n) { return say(be, "rope %s", bn(y)); }
static int glu(void *be, uint32_t n) { return say(be, "swiglu"); }
static int residual(void *be, uint32_t n) { return say(be, "x+=xb2"); }
static int attend(void *be, uint32_t l, uint32_t n) { return say(be, "attend.%u", l); }

static const struct layer_ops ops = {.embed = embed, .embed_pos = embed_pos, .norm = norm,
                                     .linear = linear, .bias = bias, .rope = rope, .glu = glu,
                                     .residual = residual, .attend = attend};

static struct llm_config one_layer(enum llm_arch a)
{
    struct llm_config c = {.arch = a, .dim = 8, .hidden_dim = 16, .n_layers = 1, .n_heads = 2,
                           .n_kv_heads = 2, .vocab = 10, .seq_len = 8, .head_dim = 4,
                           .kv_dim = 8};
    return c;
}

static void test_llama_is_llama2c_forward(void **state)
{
    (void)state;
    struct rec r = {.fail_at = -1};
    struct llm_config c = one_layer(LLM_ARCH_LLAMA);
    assert_int_equal(layers_forward(&ops, &r, &c, 3, 1), 0);
    assert_string_equal(r.log,
        "embed 3; norm0.0 xb<-x; q<-xbwq.0; k<-xbwk.0 again; v<-xbwv.0 again; rope k; rope q; "
        "attend.0; xb2<-xbwo.0; x+=xb2; norm1.0 xb<-x; hb<-xbup.0; hb2<-xbgate.0 again; swiglu; "
        "xb2<-hbdown.0; x+=xb2; norm2.0 xb<-x; logits<-xbcls.0");
}

static void test_opt_is_modeling_opt(void **state)
{
    (void)state;
    struct rec r = {.fail_at = -1};
    struct llm_config c = one_layer(LLM_ARCH_OPT);
    assert_int_equal(layers_forward(&ops, &r, &c, 2, 0), 0); /* no head */
    assert_string_equal(r.log,
        "embed 2; pos+2; norm0.0 xb<-x; q<-xbwq.0; k<-xbwk.0 again; v<-xbwv.0 again; k+bwk; "
        "v+bwv; q+bwq; attend.0; xb2<-xbwo.0; xb2+bwo; x+=xb2; norm1.0 xb<-x; hb<-xbup.0; "
        "hb+bup relu; xb2<-hbdown.0; xb2+bdown; x+=xb2");
}

/* a recomputation is the forward's own K/V step on other buffers */
static void test_kv_step_is_the_forwards(void **state)
{
    (void)state;
    struct rec r = {.fail_at = -1};
    assert_int_equal(layers_kv(&ops, &r, llm_arch_info(LLM_ARCH_LLAMA), 3, 5, LB_REC_IN,
                               LB_REC_K, LB_REC_V, 0), 0);
    assert_string_equal(r.log, "rk<-rinwk.3; rv<-rinwv.3 again; rope rk");
    memset(&r, 0, sizeof r);
    r.fail_at = -1;
    assert_int_equal(layers_kv(&ops, &r, llm_arch_info(LLM_ARCH_OPT), 3, 5, LB_REC_IN,
                               LB_REC_K, LB_REC_V, 0), 0);
    assert_string_equal(r.log, "rk<-rinwk.3; rv<-rinwv.3 again; rk+bwk; rv+bwv");
}

static int group(void *be, const enum lbuf *y, enum lbuf x, const enum lweight *w, uint32_t count,
                 uint32_t l, uint32_t n, int again)
{
    char ys[48] = "", wsn[48] = "";
    for (uint32_t i = 0; i < count; i++) {
        snprintf(ys + strlen(ys), sizeof ys - strlen(ys), "%s%s", i ? "," : "", bn(y[i]));
        snprintf(wsn + strlen(wsn), sizeof wsn - strlen(wsn), "%s%s", i ? "," : "", wn(w[i]));
    }
    return say(be, "[%s]<-%s[%s].%u%s", ys, bn(x), wsn, l, again ? " again" : "");
}
static int linear_residual(void *be, enum lbuf x, enum lweight w, uint32_t l, uint32_t n)
{
    return say(be, "x+=%s%s.%u", bn(x), wn(w), l);
}

/* A backend with grouped products and residual-adding products (the CUDA
 * backend's) gets the same sequence with them: Q, K and V one group (K and
 * V in a recomputation), up and gate one, the output and down projections
 * adding into x, each bias after its product (x + (W xb + b) summed in
 * another order), and no separate residual add. */
static void test_grouped_and_residual_products_keep_the_order(void **state)
{
    (void)state;
    struct layer_ops fused = ops;
    fused.linear_group = group;
    fused.linear_residual = linear_residual;
    struct rec r = {.fail_at = -1};
    struct llm_config c = one_layer(LLM_ARCH_LLAMA);
    assert_int_equal(layers_forward(&fused, &r, &c, 3, 1), 0);
    assert_string_equal(r.log,
        "embed 3; norm0.0 xb<-x; [q,k,v]<-xb[wq,wk,wv].0; rope k; rope q; attend.0; "
        "x+=xbwo.0; norm1.0 xb<-x; [hb,hb2]<-xb[up,gate].0; swiglu; x+=hbdown.0; "
        "norm2.0 xb<-x; logits<-xbcls.0");
    memset(&r, 0, sizeof r);
    r.fail_at = -1;
    c = one_layer(LLM_ARCH_OPT);
    assert_int_equal(layers_forward(&fused, &r, &c, 2, 0), 0);
    assert_string_equal(r.log,
        "embed 2; pos+2; norm0.0 xb<-x; [q,k,v]<-xb[wq,wk,wv].0; k+bwk; v+bwv; q+bwq; "
        "attend.0; x+=xbwo.0; x+bwo; norm1.0 xb<-x; hb<-xbup.0; hb+bup relu; x+=hbdown.0; "
        "x+bdown");
    memset(&r, 0, sizeof r);
    r.fail_at = -1;
    assert_int_equal(layers_kv(&fused, &r, llm_arch_info(LLM_ARCH_LLAMA), 3, 5, LB_REC_IN,
                               LB_REC_K, LB_REC_V, 1), 0);
    assert_string_equal(r.log, "[rk,rv]<-rin[wk,wv].3 again; rope rk");
}

static void test_a_failing_operation_stops_the_sequence(void **state)
{
    (void)state;
    struct rec r = {.fail_at = 3}; /* the fourth call: k's projection */
    struct llm_config c = one_layer(LLM_ARCH_LLAMA);
    c.n_layers = 4;
    assert_int_equal(layers_forward(&ops, &r, &c, 1, 1), 7);
    assert_string_equal(r.log, "embed 1; norm0.0 xb<-x; q<-xbwq.0; k<-xbwk.0 again");
}

/* What the sequence assumes of a description: ReLU comes with FFN biases
 * (it is applied with fc1's bias, as OPT's is), learned positions have an
 * embedding offset only then, and each architecture has its name. */
static void test_every_architecture_is_a_description_the_sequence_runs(void **state)
{
    (void)state;
    for (int k = LLM_ARCH_LLAMA; k <= LLM_ARCH_MISTRAL; k++) {
        const struct llm_arch_info *a = llm_arch_info((enum llm_arch)k);
        assert_non_null(a->name);
        if (a->act == LLM_ACT_RELU)
            assert_true(a->ffn_bias);
        if (a->positions == LLM_POS_ROPE)
            assert_int_equal(a->pos_offset, 0);
    }
    assert_string_equal(llm_arch_info(LLM_ARCH_QWEN2)->name, "qwen2");
    assert_true(llm_arch_info(LLM_ARCH_QWEN2)->qkv_bias && !llm_arch_info(LLM_ARCH_QWEN2)->out_bias);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_is_llama2c_forward),
        cmocka_unit_test(test_opt_is_modeling_opt),
        cmocka_unit_test(test_kv_step_is_the_forwards),
        cmocka_unit_test(test_grouped_and_residual_products_keep_the_order),
        cmocka_unit_test(test_a_failing_operation_stops_the_sequence),
        cmocka_unit_test(test_every_architecture_is_a_description_the_sequence_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
