/* Model loading (contract in model.h): llama2.c checkpoints (the tensor
 * order is llama2c.c's; the RoPE tables stored after rms_final are skipped,
 * RoPE is computed from rope_theta), GGUF files, and Hugging Face
 * safetensors checkpoints (tensor names as transformers' modeling_opt.py and
 * modeling_llama.py save them). The file hash uses OpenSSL's SHA-256.
 */
#include "model.h"

#include "infile.h"

#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp16.h"
#include "synth.h"
#include "gguf.h"
#include "safetensors.h"
#include "llama2c.h"

int llm_file_sha256(const char *path, char out[65], struct alisa_err *e)
{
    FILE *f = infile_fopen(path, "a file to hash", e);
    if (!f)
        return ALISA_EIO;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = 0;
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        rc = err_set(e, ALISA_ENOMEM, "%s: cannot start SHA-256", path);
    } else {
        unsigned char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            EVP_DigestUpdate(ctx, buf, n);
        if (ferror(f))
            rc = err_set(e, ALISA_EIO, "%s: read failed", path);
        unsigned char md[32];
        unsigned int len = 0;
        if (!rc && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32)
            for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        else if (!rc)
            rc = err_set(e, ALISA_EIO, "%s: SHA-256 failed", path);
    }
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return rc;
}

/* v from 1 to max, else an error naming it. */
static int in_range(const char *path, const char *name, uint32_t v, uint32_t max,
                    struct alisa_err *e)
{
    if (v >= 1 && v <= max)
        return 0;
    return err_set(e, ALISA_ECORRUPT, "%s: %s %u: must be 1 to %u", path, name, v, max);
}

int llm_config_validate(struct llm_config *c, const char *path, struct alisa_err *e)
{
    int rc;
    if ((rc = in_range(path, "dim", c->dim, LLM_MAX_DIM, e)) ||
        (rc = in_range(path, "heads", c->n_heads, LLM_MAX_HEADS, e)) ||
        (rc = in_range(path, "kv heads", c->n_kv_heads, LLM_MAX_HEADS, e)) ||
        (rc = in_range(path, "hidden dim", c->hidden_dim, LLM_MAX_HIDDEN, e)) ||
        (rc = in_range(path, "layers", c->n_layers, LLM_MAX_LAYERS, e)) ||
        (rc = in_range(path, "vocabulary", c->vocab, LLM_MAX_VOCAB, e)) ||
        (rc = in_range(path, "context", c->seq_len, LLM_MAX_SEQ, e)))
        return rc;
    if (c->dim % c->n_heads)
        return err_set(e, ALISA_ECORRUPT, "%s: dim %u does not split into %u heads", path, c->dim,
                       c->n_heads);
    const uint32_t hs = c->dim / c->n_heads;
    if (hs < 2 || hs % 2)
        return err_set(e, ALISA_ECORRUPT, "%s: head size %u (dim %u / %u heads): must be even "
                       "and at least 2", path, hs, c->dim, c->n_heads);
    if (c->n_heads % c->n_kv_heads)
        return err_set(e, ALISA_ECORRUPT, "%s: %u kv heads do not divide %u heads", path,
                       c->n_kv_heads, c->n_heads);
    /* OPT has no RoPE: its theta is not read */
    if (llm_arch_info(c->arch)->positions == LLM_POS_ROPE && !(isfinite(c->rope_theta) && c->rope_theta > 0))
        return err_set(e, ALISA_ECORRUPT, "%s: rope theta %g: must be positive and finite", path,
                       (double)c->rope_theta);
    if (!(isfinite(c->norm_eps) && c->norm_eps >= 0))
        return err_set(e, ALISA_ECORRUPT, "%s: norm epsilon %g: must be finite and not negative",
                       path, (double)c->norm_eps);
    c->head_dim = hs;
    c->kv_dim = hs * c->n_kv_heads;
    return 0;
}

const struct llm_arch_info *llm_arch_info(enum llm_arch a)
{
    static const struct llm_arch_info llama = {
        .name = "llama", .norm = LLM_NORM_RMS, .positions = LLM_POS_ROPE, .act = LLM_ACT_SWIGLU};
    static const struct llm_arch_info opt = {
        .name = "opt", .norm = LLM_NORM_LAYER, .positions = LLM_POS_LEARNED, .pos_offset = 2,
        .qkv_bias = 1, .out_bias = 1, .ffn_bias = 1, .act = LLM_ACT_RELU};
    static const struct llm_arch_info qwen2 = {
        .name = "qwen2", .norm = LLM_NORM_RMS, .positions = LLM_POS_ROPE, .qkv_bias = 1,
        .act = LLM_ACT_SWIGLU};
    static const struct llm_arch_info mistral = {
        .name = "mistral", .norm = LLM_NORM_RMS, .positions = LLM_POS_ROPE,
        .act = LLM_ACT_SWIGLU};
    switch (a) {
    case LLM_ARCH_OPT: return &opt;
    case LLM_ARCH_QWEN2: return &qwen2;
    case LLM_ARCH_MISTRAL: return &mistral;
    default: return &llama;
    }
}

void llm_rope_tables(const struct llm_config *c, uint32_t max_len, float *cs, float *sn)
{
    uint32_t half = c->head_dim / 2;
    for (uint32_t pos = 0; pos < max_len; pos++)
        for (uint32_t i = 0; i < half; i++) {
            float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
            float val = (float)pos * freq;
            cs[(size_t)pos * half + i] = cosf(val);
            sn[(size_t)pos * half + i] = sinf(val);
        }
}

void llm_free(struct llm_model *m)
{
    if (!m)
        return;
    free(m->data);
    free(m->mats);
    free(m->blocks);
    gguf_close(m->file);
    free(m);
}

/* Refuses tensor `name` of path, n weights of `type` at data, when a block's
 * binary16 scale or an F32 or F16 weight is an infinity or a NaN: every
 * activation it touched would be NaN, silently (issue 48). Reads the scales
 * only. */
static int check_finite(const char *path, const char *name, uint32_t type, const void *data,
                        uint64_t n, struct alisa_err *e)
{
    const int64_t b = qmat_first_nonfinite(type, data, n);
    if (b < 0)
        return 0;
    const uint64_t bw = qmat_block_weights(type), first = (uint64_t)b * bw;
    if (bw == 1)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': weight %llu is not finite", path,
                       name, (unsigned long long)first);
    return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': block %lld (weights %llu to %llu) has a "
                   "scale that is not finite", path, name, (long long)b,
                   (unsigned long long)first, (unsigned long long)(first + bw - 1));
}

/* Floats of every weight of a model of shape c, in the order llama2.c
 * stores them (the classifier last, only when not tied). */
static size_t weight_floats(const struct llm_config *c, int tied)
{
    size_t L = c->n_layers, d = c->dim, hd = c->hidden_dim, kv = c->kv_dim, V = c->vocab;
    return V * d + L * d + L * d * d + 2 * L * kv * d + L * d * d + L * d + 3 * L * hd * d + d +
           (tied ? 0 : V * d);
}

/* The per-layer qmat arrays of m (7 x n_layers). Returns 0 or ALISA_ENOMEM. */
static int alloc_mats(struct llm_model *m)
{
    size_t L = m->c.n_layers;
    if (!(m->mats = calloc(7 * L, sizeof *m->mats)))
        return ALISA_ENOMEM;
    struct llm_weights *w = &m->w;
    w->wq = m->mats;
    w->wk = w->wq + L;
    w->wv = w->wk + L;
    w->wo = w->wv + L;
    w->w1 = w->wo + L;
    w->w2 = w->w1 + L;
    w->w3 = w->w2 + L;
    return 0;
}

/* An FP32 qmat of rows x cols at *p, advancing *p. The loaders bound the
 * shape first, so it cannot fail. */
static void f32_mat(struct qmat *q, uint32_t rows, uint32_t cols, float **p)
{
    int rc = qmat_init(q, GGML_F32, rows, cols, *p);
    ALISA_ASSERT(rc == 0);
    *p += (size_t)rows * cols;
}

/* Carves m->data (weight_floats(c, tied) floats) into the named tensors, in
 * llama2.c's order, after alloc_mats. Cannot fail. */
static void carve_weights(struct llm_model *m, int tied)
{
    const struct llm_config *c = &m->c;
    uint32_t L = c->n_layers, d = c->dim, hd = c->hidden_dim, kv = c->kv_dim, V = c->vocab;
    struct llm_weights *w = &m->w;
    float *p = m->data;
    f32_mat(&w->token_embedding, V, d, &p);
    w->rms_att = p; p += (size_t)L * d;
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->wq[l], d, d, &p);
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->wk[l], kv, d, &p);
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->wv[l], kv, d, &p);
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->wo[l], d, d, &p);
    w->rms_ffn = p; p += (size_t)L * d;
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->w1[l], hd, d, &p);
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->w2[l], d, hd, &p);
    for (uint32_t l = 0; l < L; l++) f32_mat(&w->w3[l], hd, d, &p);
    w->rms_final = p; p += d;
    if (tied)
        w->wcls = w->token_embedding;
    else
        f32_mat(&w->wcls, V, d, &p);
}

int llm_load_llama2c(struct llm_model **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    struct llama2c_header h;
    int rc = llama2c_read_header(path, &h, e);
    if (rc)
        return rc;
    struct llm_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    struct llm_config *c = &m->c;
    c->dim = h.dim;
    c->hidden_dim = h.hidden_dim;
    c->n_layers = h.n_layers;
    c->n_heads = h.n_heads;
    c->n_kv_heads = h.n_kv_heads;
    c->vocab = h.vocab;
    c->seq_len = h.seq_len;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    const char *slash = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", slash ? slash + 1 : path);
    if ((rc = llm_config_validate(c, path, e)) || (rc = llm_file_sha256(path, m->sha256, e))) {
        llm_free(m);
        return rc;
    }
    /* weights without the RoPE tables: n_params floats, read in two parts */
    size_t n = weight_floats(c, h.shared_classifier);
    ALISA_ASSERT(n == h.n_params);
    m->data = malloc(n * sizeof(float));
    if (m->data && alloc_mats(m)) {
        free(m->data);
        m->data = NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!m->data || !f) {
        int status = m->data ? ALISA_EIO : ALISA_ENOMEM;
        if (f)
            fclose(f);
        llm_free(m);
        return err_set(e, status, "%s: cannot read weights", path);
    }
    uint64_t L = c->n_layers, d = c->dim, hd = c->hidden_dim, kv = c->kv_dim, V = c->vocab;
    size_t before_rope = V * d + L * d + L * d * d + 2 * L * d * kv + L * d * d + L * d +
                         3 * L * d * hd + d;
    size_t rope = (size_t)c->seq_len * c->head_dim;
    int ok = fseek(f, 28, SEEK_SET) == 0 &&
             fread(m->data, sizeof(float), before_rope, f) == before_rope;
    if (ok && !h.shared_classifier)
        ok = fseek(f, (long)(rope * sizeof(float)), SEEK_CUR) == 0 &&
             fread(m->data + before_rope, sizeof(float), V * d, f) == V * d;
    fclose(f);
    if (!ok) {
        llm_free(m);
        return err_set(e, ALISA_ECORRUPT, "%s: weights could not be read (truncated?)", path);
    }
    /* one pass: the format names no tensors, the byte offset says where */
    const int64_t bad = qmat_first_nonfinite(GGML_F32, m->data, n);
    if (bad >= 0) {
        uint64_t at = (uint64_t)bad < before_rope ? (uint64_t)bad : (uint64_t)bad + rope;
        llm_free(m);
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: weight %lld is not finite", path,
                       (unsigned long long)(28 + 4 * at), (long long)bad);
    }
    carve_weights(m, h.shared_classifier);
    *out = m;
    return 0;
}

/* Tensor `name` with the expected shape (ne0 = in, ne1 = out): dequantised
 * into dst, or, when dst is NULL, described in place by q (its own type). */
static int load_tensor(const struct gguf *g, const char *path, const char *name, uint64_t ne0,
                       uint64_t ne1, float *dst, struct qmat *q, struct alisa_err *e)
{
    const struct gguf_tensor *t = gguf_find(g, name);
    if (!t)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s' missing", path, name);
    uint64_t d1 = t->n_dims > 1 ? t->dims[1] : 1;
    if (t->dims[0] != ne0 || d1 != ne1 || t->n_elems != ne0 * ne1)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s' is [%llu, %llu], expected [%llu, %llu]",
                       path, name, (unsigned long long)t->dims[0], (unsigned long long)d1,
                       (unsigned long long)ne0, (unsigned long long)ne1);
    const void *data = gguf_tensor_data(g, t);
    int rc = data ? check_finite(path, name, t->type, data, t->n_elems, e) : 0;
    if (rc)
        return rc;
    if (dst)
        return gguf_read_f32(g, t, dst, e);
    if (!data || qmat_init(q, t->type, (uint32_t)ne1, (uint32_t)ne0, data))
        return err_set(e, ALISA_EINVAL, "%s: tensor '%s' has type %u (%s), which the native "
                       "weights do not read (F32, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K in whole rows of "
                       "blocks)", path, name, t->type,
                       ggml_type_name(t->type) ? ggml_type_name(t->type) : "unknown to ggml");
    return 0;
}

/* A llama GGUF's shape and RoPE and norm constants into c: every size
 * refused by its key when it does not fit 32 bits, the vocabulary checked
 * against the tokenizer's. Returns 0 or a negative status with e set. */
static int gguf_config(struct gguf *g, const char *path, struct llm_config *c,
                       struct alisa_err *e)
{
    int rc;
    char arch[32] = "";
    uint64_t dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, ctx = 0, vocab = 0;
    double theta = 10000, eps = 1e-5;
    if ((rc = gguf_get_str(g, "general.architecture", arch, sizeof arch, e)))
        return rc;
    if (strcmp(arch, "llama") != 0)
        return err_set(e, ALISA_EINVAL, "%s: architecture '%s' is not supported (llama is)", path,
                       arch);
    if ((rc = gguf_get_u64(g, "llama.embedding_length", &dim, e)) ||
        (rc = gguf_get_u64(g, "llama.feed_forward_length", &hidden, e)) ||
        (rc = gguf_get_u64(g, "llama.block_count", &layers, e)) ||
        (rc = gguf_get_u64(g, "llama.attention.head_count", &heads, e)) ||
        (rc = gguf_get_u64(g, "llama.context_length", &ctx, e)))
        return rc;
    if (gguf_get_u64(g, "llama.attention.head_count_kv", &kv_heads, e))
        kv_heads = heads;
    gguf_get_f64(g, "llama.rope.freq_base", &theta, e);
    gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &eps, e);
    const struct gguf_tensor *emb = gguf_find(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor 'token_embd.weight' missing or not 2-D",
                       path);
    vocab = emb->dims[1];
    uint64_t n_tok = 0;
    if (gguf_get_str_array(g, "tokenizer.ggml.tokens", &n_tok, e) == 0 && n_tok != vocab) {
        return err_set(e, ALISA_ECORRUPT, "%s: vocabulary mismatch: %llu tokens in the tokenizer, "
                     "%llu rows in token_embd.weight", path, (unsigned long long)n_tok,
                     (unsigned long long)vocab);
    }
    /* the config keeps 32-bit sizes: what does not fit is refused by its
     * key before it is narrowed (the shape's bounds are llm_config_validate's) */
    static const char *const keys[7] = {
        "llama.embedding_length", "llama.feed_forward_length", "llama.block_count",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length",
        "token_embd.weight's rows (vocabulary)"};
    const uint64_t vals[7] = {dim, hidden, layers, heads, kv_heads, ctx, vocab};
    for (int k = 0; k < 7; k++)
        if (vals[k] > UINT32_MAX) {
            return err_set(e, ALISA_ECORRUPT, "%s: %s = %llu does not fit 32 bits", path, keys[k],
                         (unsigned long long)vals[k]);
        }
    c->dim = (uint32_t)dim;
    c->hidden_dim = (uint32_t)hidden;
    c->n_layers = (uint32_t)layers;
    c->n_heads = (uint32_t)heads;
    c->n_kv_heads = (uint32_t)kv_heads;
    c->vocab = (uint32_t)vocab;
    c->seq_len = (uint32_t)ctx;
    c->rope_theta = (float)theta;
    c->norm_eps = (float)eps;
    return llm_config_validate(c, path, e);
}

/* Layer l's tensors into m (FP32 copies under LLM_WEIGHTS_F32, else views
 * of the mapping; the norms always FP32). Returns 0 or a negative status. */
static int gguf_layer(struct gguf *g, const char *path, struct llm_model *m, uint64_t l,
                      struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    const uint64_t d = c->dim, hd = c->hidden_dim, kv = c->kv_dim;
    const int f32 = m->mode == LLM_WEIGHTS_F32;
    struct llm_weights *w = &m->w;
    int rc = 0;
#define F32_AT(q) (f32 ? (float *)(uintptr_t)(q).data : NULL)
    char nm[96];
#define LOAD(suffix, ne0, ne1, dst)                                                \
    if (!rc) {                                                                     \
        snprintf(nm, sizeof nm, "blk.%llu.%s", (unsigned long long)l, suffix);     \
        rc = load_tensor(g, path, nm, ne0, ne1, dst, NULL, e);                     \
    }
#define LOADM(suffix, ne0, ne1, q)                                                 \
    if (!rc) {                                                                     \
        snprintf(nm, sizeof nm, "blk.%llu.%s", (unsigned long long)l, suffix);     \
        rc = load_tensor(g, path, nm, ne0, ne1, F32_AT(q), &(q), e);               \
    }
    LOAD("attn_norm.weight", d, 1, w->rms_att + l * d)
    LOADM("attn_q.weight", d, d, w->wq[l])
    LOADM("attn_k.weight", d, kv, w->wk[l])
    LOADM("attn_v.weight", d, kv, w->wv[l])
    LOADM("attn_output.weight", d, d, w->wo[l])
    LOAD("ffn_norm.weight", d, 1, w->rms_ffn + l * d)
    LOADM("ffn_gate.weight", d, hd, w->w1[l])
    LOADM("ffn_down.weight", hd, d, w->w2[l])
    LOADM("ffn_up.weight", d, hd, w->w3[l])
#undef LOAD
#undef LOADM
#undef F32_AT
    return rc;
}

int llm_load_gguf(struct llm_model **out, const char *path, enum llm_weight_mode mode,
                  struct alisa_err *e)
{
    *out = NULL;
    struct gguf *g;
    int rc = gguf_open(&g, path, e);
    if (rc)
        return rc;
    struct llm_model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        return err_set(e, ALISA_ENOMEM, "out of memory");
    }
    if ((rc = gguf_config(g, path, &m->c, e)))
        goto done;
    const struct llm_config *c = &m->c;
    const uint64_t dim = c->dim, hidden = c->hidden_dim, layers = c->n_layers, vocab = c->vocab;
    int tied = gguf_find(g, "output.weight") == NULL;
    uint64_t L = layers, d = dim, V = vocab;
    size_t n = weight_floats(c, tied);
    /* no allocation the file cannot justify: its most compact tensors
     * (Q4_0) hold 32 weights in 18 bytes */
    if ((uint64_t)n / 32 * 18 > gguf_file_bytes(g)) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: the shape (dim %llu, feed_forward_length %llu, "
                     "layers %llu, vocabulary %llu) needs %zu weights, more than the file's %llu "
                     "bytes can hold", path, (unsigned long long)dim, (unsigned long long)hidden,
                     (unsigned long long)layers, (unsigned long long)vocab, n,
                     (unsigned long long)gguf_file_bytes(g));
        goto done;
    }
    /* native weights: only the norms are FP32 */
    size_t nf = mode == LLM_WEIGHTS_F32 ? n : (2 * L + 1) * d;
    if (!(m->data = malloc(nf * sizeof(float))) || alloc_mats(m)) {
        rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for %zu weights", path, nf);
        goto done;
    }
    m->mode = mode;
    struct llm_weights *w = &m->w;
    const int f32 = mode == LLM_WEIGHTS_F32;
    if (f32) {
        carve_weights(m, tied);
    } else {
        w->rms_att = m->data;
        w->rms_ffn = m->data + L * d;
        w->rms_final = m->data + 2 * L * d;
    }
#define F32_AT(q) (f32 ? (float *)(uintptr_t)(q).data : NULL)
    if ((rc = load_tensor(g, path, "token_embd.weight", d, V, F32_AT(w->token_embedding),
                          &w->token_embedding, e)) ||
        (rc = load_tensor(g, path, "output_norm.weight", d, 1, w->rms_final, NULL, e)) ||
        (!tied && (rc = load_tensor(g, path, "output.weight", d, V, F32_AT(w->wcls), &w->wcls, e))))
        goto done;
    if (tied)
        w->wcls = w->token_embedding;
    for (uint64_t l = 0; l < L && !rc; l++)
        rc = gguf_layer(g, path, m, l, e);
#undef F32_AT
    if (rc)
        goto done;
    const char *slash = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", slash ? slash + 1 : path);
    rc = llm_file_sha256(path, m->sha256, e);
done:
    if (!rc && mode == LLM_WEIGHTS_NATIVE)
        m->file = g; /* the weights live in its mapping */
    else
        gguf_close(g);
    if (rc) {
        llm_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int llm_load(struct llm_model **out, const char *path, enum llm_weight_mode mode,
             struct alisa_err *e)
{
    struct stat sb;
    size_t len = strlen(path);
    if ((stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) ||
        (len > 12 && strcmp(path + len - 12, ".safetensors") == 0) ||
        (len > 11 && strcmp(path + len - 11, ".index.json") == 0))
        return llm_load_hf(out, path, e);
    FILE *f = infile_fopen(path, "checkpoint (missing file?)", e);
    if (!f)
        return ALISA_EIO;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0)
        return llm_load_gguf(out, path, mode, e);
    return llm_load_llama2c(out, path, e);
}

/* Weights (FP32 values) of a model of config c: matrices, norms, the
 * biases and learned positions its architecture has (positions for
 * seq_len + offset rows). */
static size_t llm_param_count(const struct llm_config *c, int tied)
{
    const struct llm_arch_info *a = llm_arch_info(c->arch);
    const size_t d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    const size_t ln = a->norm == LLM_NORM_LAYER; /* a bias beside each norm's weight */
    size_t layer = 2 * d * d + 2 * kv * d + (a->act == LLM_ACT_SWIGLU ? 3 : 2) * hd * d +
                   2 * d * (1 + ln) + (a->qkv_bias ? d + 2 * kv : 0) + (a->out_bias ? d : 0) +
                   (a->ffn_bias ? hd + d : 0);
    return (size_t)c->vocab * d * (tied ? 1 : 2) + c->n_layers * layer + d * (1 + ln) +
           (a->positions == LLM_POS_LEARNED ? ((size_t)c->seq_len + a->pos_offset) * d : 0);
}

void llm_model_shape(const struct llm_model *m, struct model_shape *out)
{
    const struct llm_config *c = &m->c;
    const struct llm_arch_info *a = llm_arch_info(c->arch);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", m->name);
    snprintf(out->family, sizeof out->family, "%s", a->name);
    out->n_layers = c->n_layers;
    out->hidden = c->dim;
    out->n_heads = c->n_heads;
    out->n_kv_heads = c->n_kv_heads;
    out->ffn = c->hidden_dim;
    out->ffn_matrices = a->act == LLM_ACT_SWIGLU ? 3 : 2;
    out->vocab = c->vocab;
    out->tied_embeddings = m->w.wcls.data == m->w.token_embedding.data;
    out->max_seq = c->seq_len;
    out->params = (double)llm_param_count(c, out->tied_embeddings);
    out->weight_bytes_fp16 = 2 * out->params;
    out->available = 1;
}

double llm_bytes_per_weight(const struct llm_model *m)
{
    const struct llm_weights *w = &m->w;
    double bytes = (double)w->wcls.rows * w->wcls.row_bytes, n = (double)w->wcls.rows * w->wcls.cols;
    for (size_t i = 0; i < 7 * (size_t)m->c.n_layers; i++) {
        bytes += (double)m->mats[i].rows * m->mats[i].row_bytes;
        n += (double)m->mats[i].rows * m->mats[i].cols;
    }
    return bytes / n;
}

/* ---- Hugging Face checkpoints (safetensors + config.json) ---- */

/* An integer key of config.json (def when absent and def >= 0), from 1 to
 * 2^32 - 1: the shape's own bounds are llm_config_validate's. */
static int cfg_u32(json_t *cfg, const char *cpath, const char *key, int64_t def, uint32_t *out,
                   struct alisa_err *e)
{
    json_t *v = json_object_get(cfg, key);
    if (!v && def >= 0) {
        *out = (uint32_t)def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX)
        return err_set(e, ALISA_ECORRUPT, "%s: '%s' is %s (an integer from 1 to %u is needed)",
                       cpath, key, v ? "out of range or not an integer" : "missing", UINT32_MAX);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* A floats cursor over m->data. */
static float *take_f(float **p, size_t n)
{
    float *r = *p;
    *p += n;
    return r;
}

/* Tensor name of shape (rows, cols) (cols 0: a vector of rows) into dst;
 * refused when a weight is not finite. */
static int hf_tensor(const struct st_file *f, const char *path, const char *name, uint64_t rows,
                     uint64_t cols, float *dst, struct alisa_err *e)
{
    const struct st_tensor *t = st_find(f, name);
    if (!t)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s' missing", path, name);
    int ok = cols ? t->n_dims == 2 && t->shape[0] == rows && t->shape[1] == cols
                  : t->n_dims == 1 && t->shape[0] == rows;
    if (!ok)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s' has %u dimensions (%llu, %llu), "
                       "expected (%llu%s%llu)", path, name, t->n_dims,
                       (unsigned long long)t->shape[0],
                       (unsigned long long)(t->n_dims > 1 ? t->shape[1] : 0),
                       (unsigned long long)rows, cols ? ", " : "",
                       (unsigned long long)(cols ? cols : 0));
    int rc = st_read_f32(f, t, dst, e);
    return rc ? rc : check_finite(path, name, GGML_F32, dst, t->n_elems, e);
}

/* Rows of a q or k projection (heads of hd rows, cols each) from Hugging
 * Face's rotate-half order to interleaved pairs: row 2j + a of a head is
 * its row a hd/2 + j (convert_hf_to_gguf.py permute). tmp holds hd x cols. */
static void unpermute_rows(float *w, uint32_t heads, uint32_t hd, uint32_t cols, float *tmp)
{
    for (uint32_t h = 0; h < heads; h++) {
        float *head = w + (size_t)h * hd * cols;
        memcpy(tmp, head, (size_t)hd * cols * sizeof *tmp);
        for (uint32_t j = 0; j < hd / 2; j++)
            for (uint32_t a = 0; a < 2; a++)
                memcpy(head + (size_t)(2 * j + a) * cols, tmp + (size_t)(a * hd / 2 + j) * cols,
                       cols * sizeof *tmp);
    }
}

/* One tensor of a layer: a matrix (q) or a vector (vec). */
struct hf_part {
    const char *name; /* after the layer's prefix */
    struct qmat *q;
    size_t rows, cols;
    float *vec;
};

/* A checkpoint's files from the path given: a directory (model.safetensors,
 * or a sharded checkpoint's index) or a file, and config.json beside it. */
static void hf_paths(const char *path, char *file, size_t nf, char *dir, size_t nd, char *cpath,
                     size_t nc)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(dir, nd, "%s", path);
        snprintf(file, nf, "%s/model.safetensors", path);
        if (access(file, F_OK) != 0) /* a sharded checkpoint */
            snprintf(file, nf, "%s/model.safetensors.index.json", path);
    } else {
        snprintf(file, nf, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(dir, nd, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    }
    snprintf(cpath, nc, "%s/config.json", dir);
}

/* The architecture and shape config.json (at cpath) describes: OPT (pre-norm,
 * ReLU, no projection of the embeddings), LLaMA, Qwen2 (without its
 * per-layer sliding window) or Mistral (with its window); *max_pos its
 * positions.
 * Returns 0 or a negative status with e naming the file and key. */
static int hf_config(json_t *cfg, const char *cpath, struct llm_config *c, uint32_t *max_pos,
                     struct alisa_err *e)
{
    json_t *mt = json_object_get(cfg, "model_type");
    const char *type = json_is_string(mt) ? json_string_value(mt) : "";
    int rc;
    if (strcmp(type, "opt") == 0) {
        c->arch = LLM_ARCH_OPT;
        uint32_t proj = 0;
        if ((rc = cfg_u32(cfg, cpath, "hidden_size", -1, &c->dim, e)) ||
            (rc = cfg_u32(cfg, cpath, "num_attention_heads", -1, &c->n_heads, e)) ||
            (rc = cfg_u32(cfg, cpath, "num_hidden_layers", -1, &c->n_layers, e)) ||
            (rc = cfg_u32(cfg, cpath, "ffn_dim", -1, &c->hidden_dim, e)) ||
            (rc = cfg_u32(cfg, cpath, "vocab_size", -1, &c->vocab, e)) ||
            (rc = cfg_u32(cfg, cpath, "max_position_embeddings", -1, max_pos, e)) ||
            (rc = cfg_u32(cfg, cpath, "word_embed_proj_dim", c->dim, &proj, e)))
            return rc;
        json_t *pre = json_object_get(cfg, "do_layer_norm_before");
        json_t *act = json_object_get(cfg, "activation_function");
        if (proj != c->dim || json_is_false(pre) ||
            (act && (!json_is_string(act) || strcmp(json_string_value(act), "relu") != 0)))
            return err_set(e, ALISA_EINVAL, "%s: an OPT variant not read here (word_embed_proj_dim "
                           "%u against hidden_size %u, do_layer_norm_before, or an activation "
                           "but relu: OPT-350m's layout)", cpath, proj, c->dim);
        c->n_kv_heads = c->n_heads;
        c->norm_eps = 1e-5f; /* torch.nn.LayerNorm's default, as modeling_opt.py builds it */
    } else if (strcmp(type, "llama") == 0 || strcmp(type, "qwen2") == 0 ||
               strcmp(type, "mistral") == 0) {
        c->arch = strcmp(type, "qwen2") == 0     ? LLM_ARCH_QWEN2
                  : strcmp(type, "mistral") == 0 ? LLM_ARCH_MISTRAL
                                                 : LLM_ARCH_LLAMA;
        /* Qwen2's window covers only the layers from max_window_layers on:
         * not run here */
        if (c->arch == LLM_ARCH_QWEN2 && json_is_true(json_object_get(cfg, "use_sliding_window")))
            return err_set(e, ALISA_EINVAL, "%s: use_sliding_window true: Qwen2's per-layer "
                           "sliding window is not run here", cpath);
        /* Mistral's window: null for none; absent, MistralConfig's default
         * of 4096 (transformers configuration_mistral.py) */
        json_t *win = json_object_get(cfg, "sliding_window");
        if (c->arch == LLM_ARCH_MISTRAL && !json_is_null(win) &&
            (rc = cfg_u32(cfg, cpath, "sliding_window", 4096, &c->window, e)))
            return rc;
        if ((rc = cfg_u32(cfg, cpath, "hidden_size", -1, &c->dim, e)) ||
            (rc = cfg_u32(cfg, cpath, "num_attention_heads", -1, &c->n_heads, e)) ||
            (rc = cfg_u32(cfg, cpath, "num_key_value_heads", c->n_heads, &c->n_kv_heads,
                          e)) ||
            (rc = cfg_u32(cfg, cpath, "num_hidden_layers", -1, &c->n_layers, e)) ||
            (rc = cfg_u32(cfg, cpath, "intermediate_size", -1, &c->hidden_dim, e)) ||
            (rc = cfg_u32(cfg, cpath, "vocab_size", -1, &c->vocab, e)) ||
            (rc = cfg_u32(cfg, cpath, "max_position_embeddings", -1, max_pos, e)))
            return rc;
        json_t *eps = json_object_get(cfg, "rms_norm_eps"), *th = json_object_get(cfg, "rope_theta");
        c->norm_eps = json_is_number(eps) ? (float)json_number_value(eps) : 1e-6f;
        c->rope_theta = json_is_number(th) ? (float)json_number_value(th) : 10000.0f;
    } else {
        return err_set(e, ALISA_EINVAL, "%s: model_type '%s' is not read (opt, llama, qwen2 "
                       "and mistral are)", cpath, type);
    }
    c->seq_len = *max_pos;
    return llm_config_validate(c, cpath, e);
}

/* The tensors outside the layers into m's weights from *p on: the token
 * embedding, lm_head unless tied, the final norm, and the learned positions
 * and biases the architecture has (the per-layer vectors' room taken here
 * too). */
static int hf_globals(struct st_file *f, const char *file, struct llm_model *m, uint32_t max_pos,
                      int tied, float **p, struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    const struct llm_arch_info *a = llm_arch_info(c->arch);
    const int opt = c->arch == LLM_ARCH_OPT; /* OPT's tensor names: model.decoder. */
    const size_t L = c->n_layers, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim, V = c->vocab;
    struct llm_weights *w = &m->w;
    char nm[200];
    int rc;
    snprintf(nm, sizeof nm, "%sembed_tokens.weight", opt ? "model.decoder." : "model.");
    f32_mat(&w->token_embedding, (uint32_t)V, (uint32_t)d, p);
    if ((rc = hf_tensor(f, file, nm, V, d, (float *)(uintptr_t)w->token_embedding.data, e)))
        return rc;
    if (tied) {
        w->wcls = w->token_embedding;
    } else {
        f32_mat(&w->wcls, (uint32_t)V, (uint32_t)d, p);
        if ((rc = hf_tensor(f, file, "lm_head.weight", V, d, (float *)(uintptr_t)w->wcls.data, e)))
            return rc;
    }
    w->rms_att = take_f(p, L * d);
    w->rms_ffn = take_f(p, L * d);
    w->rms_final = take_f(p, d);
    if (a->qkv_bias) {
        w->bq = take_f(p, L * d);
        w->bk = take_f(p, L * kv);
        w->bv = take_f(p, L * kv);
    }
    if (a->out_bias)
        w->bo = take_f(p, L * d);
    if (a->ffn_bias) {
        w->b1 = take_f(p, L * hd);
        w->b2 = take_f(p, L * d);
    }
    if (!opt)
        return hf_tensor(f, file, "model.norm.weight", d, 0, w->rms_final, e);
    f32_mat(&w->pos_embedding, max_pos + a->pos_offset, (uint32_t)d, p);
    w->ln_att_b = take_f(p, L * d);
    w->ln_ffn_b = take_f(p, L * d);
    w->ln_final_b = take_f(p, d);
    if ((rc = hf_tensor(f, file, "model.decoder.embed_positions.weight", max_pos + a->pos_offset,
                        d, (float *)(uintptr_t)w->pos_embedding.data, e)) ||
        (rc = hf_tensor(f, file, "model.decoder.final_layer_norm.weight", d, 0, w->rms_final,
                        e)))
        return rc;
    return hf_tensor(f, file, "model.decoder.final_layer_norm.bias", d, 0, w->ln_final_b, e);
}

/* Layer l's tensors into m's weights from *p on (its matrices; its vectors'
 * room was taken by hf_globals); a rotated model's q and k rows (and
 * Qwen2's q and k biases, added before the rotation) from rotate-half to
 * interleaved pairs (tmp: head_dim x dim scratch). */
static int hf_layer(struct st_file *f, const char *file, struct llm_model *m, size_t l, float **p,
                    float *tmp, struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    const struct llm_arch_info *a = llm_arch_info(c->arch);
    const int opt = c->arch == LLM_ARCH_OPT; /* OPT's tensor names */
    const size_t d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    struct llm_weights *w = &m->w;
    struct hf_part t[16];
    int nt = 0, rc = 0;
#define MAT(nme, qq, r, cc) t[nt++] = (struct hf_part){nme, qq, r, cc, NULL}
#define VEC(nme, v, r) t[nt++] = (struct hf_part){nme, NULL, r, 0, v}
    MAT("self_attn.q_proj.weight", &w->wq[l], d, d);
    MAT("self_attn.k_proj.weight", &w->wk[l], kv, d);
    MAT("self_attn.v_proj.weight", &w->wv[l], kv, d);
    if (opt) {
        MAT("self_attn.out_proj.weight", &w->wo[l], d, d);
        MAT("fc1.weight", &w->w1[l], hd, d);
        MAT("fc2.weight", &w->w2[l], d, hd);
        VEC("self_attn_layer_norm.weight", w->rms_att + l * d, d);
        VEC("self_attn_layer_norm.bias", w->ln_att_b + l * d, d);
        VEC("final_layer_norm.weight", w->rms_ffn + l * d, d);
        VEC("final_layer_norm.bias", w->ln_ffn_b + l * d, d);
        VEC("self_attn.q_proj.bias", w->bq + l * d, d);
        VEC("self_attn.k_proj.bias", w->bk + l * kv, kv);
        VEC("self_attn.v_proj.bias", w->bv + l * kv, kv);
        VEC("self_attn.out_proj.bias", w->bo + l * d, d);
        VEC("fc1.bias", w->b1 + l * hd, hd);
        VEC("fc2.bias", w->b2 + l * d, d);
    } else {
        MAT("self_attn.o_proj.weight", &w->wo[l], d, d);
        MAT("mlp.gate_proj.weight", &w->w1[l], hd, d);
        MAT("mlp.down_proj.weight", &w->w2[l], d, hd);
        MAT("mlp.up_proj.weight", &w->w3[l], hd, d);
        VEC("input_layernorm.weight", w->rms_att + l * d, d);
        VEC("post_attention_layernorm.weight", w->rms_ffn + l * d, d);
        if (a->qkv_bias) {
            VEC("self_attn.q_proj.bias", w->bq + l * d, d);
            VEC("self_attn.k_proj.bias", w->bk + l * kv, kv);
            VEC("self_attn.v_proj.bias", w->bv + l * kv, kv);
        }
    }
#undef MAT
#undef VEC
    for (int i = 0; i < nt && !rc; i++) {
        char nm[200];
        snprintf(nm, sizeof nm, "%slayers.%zu.%s", opt ? "model.decoder." : "model.", l,
                 t[i].name);
        float *dst = t[i].vec;
        if (t[i].q) {
            f32_mat(t[i].q, (uint32_t)t[i].rows, (uint32_t)t[i].cols, p);
            dst = (float *)(uintptr_t)t[i].q->data;
        }
        rc = hf_tensor(f, file, nm, t[i].rows, t[i].cols, dst, e);
    }
    if (!rc && a->positions == LLM_POS_ROPE) { /* rotate-half rows to interleaved pairs */
        unpermute_rows((float *)(uintptr_t)w->wq[l].data, c->n_heads, c->head_dim, c->dim, tmp);
        unpermute_rows((float *)(uintptr_t)w->wk[l].data, c->n_kv_heads, c->head_dim, c->dim, tmp);
        if (a->qkv_bias) {
            unpermute_rows(w->bq + l * d, c->n_heads, c->head_dim, 1, tmp);
            unpermute_rows(w->bk + l * kv, c->n_kv_heads, c->head_dim, 1, tmp);
        }
    }
    return rc;
}

int llm_load_hf(struct llm_model **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    char file[1024], dir[1024], cpath[1100];
    hf_paths(path, file, sizeof file, dir, sizeof dir, cpath, sizeof cpath);
    json_t *cfg;
    int rc = st_load_json(cpath, &cfg, e);
    if (rc)
        return rc;
    struct st_file *f = NULL;
    struct llm_model *m = calloc(1, sizeof *m);
    uint32_t max_pos = 0;
    rc = m ? st_open(&f, file, e) : err_set(e, ALISA_ENOMEM, "out of memory");
    if (rc || (rc = hf_config(cfg, cpath, &m->c, &max_pos, e)))
        goto done;
    const struct llm_config *c = &m->c;
    int tied = st_find(f, "lm_head.weight") == NULL;
    size_t L = c->n_layers, d = c->dim;
    size_t n = llm_param_count(c, tied); /* seq_len is max_pos */
    /* no allocation the file cannot justify: its smallest tensors hold 2 bytes a weight */
    if ((uint64_t)n * 2 > st_file_bytes(f)) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: config.json's shape needs %zu weights, more than "
                     "%s's %llu bytes hold", cpath, n, file,
                     (unsigned long long)st_file_bytes(f));
        goto done;
    }
    if (!(m->data = malloc(n * sizeof(float))) || alloc_mats(m)) {
        rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for %zu weights", file, n);
        goto done;
    }
    float *p = m->data;
    if ((rc = hf_globals(f, file, m, max_pos, tied, &p, e)))
        goto done;
    float *tmp = malloc((size_t)c->head_dim * d * sizeof *tmp);
    if (!tmp) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t l = 0; l < L && !rc; l++)
        rc = hf_layer(f, file, m, l, &p, tmp, e);
    free(tmp);
    if (rc)
        goto done;
    ALISA_ASSERT((size_t)(p - m->data) == n);
    const char *slash = strrchr(dir, '/');
    snprintf(m->name, sizeof m->name, "%.63s", slash ? slash + 1 : dir);
    rc = llm_file_sha256(file, m->sha256, e);
done:
    st_close(f);
    json_decref(cfg);
    if (rc) {
        llm_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* ---- synthetic weights ---- */

/* Row r of matrix `id`: cols weights as Q8_0 blocks (cols % 32 == 0) or
 * FP32, from the stream of (seed, id, r) (kernels/synth.h). */
static void synth_row(void *dst, uint32_t type, uint32_t cols, uint64_t seed, uint64_t id,
                      uint64_t r)
{
    uint64_t st = synth_row_state(seed, id, r), bits = 0;
    if (type == GGML_F32) {
        float *w = dst;
        for (uint32_t j = 0; j < cols; j++)
            w[j] = synth_f32(&st);
        return;
    }
    uint8_t *p = dst;
    const uint16_t d = fp16_from_float(SYNTH_A / 127.0f);
    for (uint32_t b = 0; b < cols / 32; b++, p += 34) {
        p[0] = (uint8_t)d;
        p[1] = (uint8_t)(d >> 8);
        for (int j = 0; j < 32; j++) {
            if (j % 8 == 0)
                bits = synth_next(&st);
            p[2 + j] = (uint8_t)(int8_t)synth_code(bits);
            bits >>= 8;
        }
    }
}

struct synth_mat {
    struct qmat *q;
    uint32_t rows, cols;
};

/* The synthetic model's matrices in drawing order (their ids), into mat
 * (7 n_layers + 3 entries); returns how many. */
static size_t synth_list(struct llm_model *m, struct synth_mat *mat)
{
    const struct llm_config *c = &m->c;
    const int opt = c->arch == LLM_ARCH_OPT;
    const uint32_t L = c->n_layers, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim, V = c->vocab;
    size_t nm = 0;
    mat[nm++] = (struct synth_mat){&m->w.token_embedding, V, d};
    if (!m->synth_tied)
        mat[nm++] = (struct synth_mat){&m->w.wcls, V, d};
    if (opt)
        mat[nm++] = (struct synth_mat){&m->w.pos_embedding, c->seq_len + 2, d};
    for (uint32_t l = 0; l < L; l++) {
        mat[nm++] = (struct synth_mat){&m->w.wq[l], d, d};
        mat[nm++] = (struct synth_mat){&m->w.wk[l], kv, d};
        mat[nm++] = (struct synth_mat){&m->w.wv[l], kv, d};
        mat[nm++] = (struct synth_mat){&m->w.wo[l], d, d};
        mat[nm++] = (struct synth_mat){&m->w.w1[l], hd, d};
        mat[nm++] = (struct synth_mat){&m->w.w2[l], d, hd};
        if (!opt)
            mat[nm++] = (struct synth_mat){&m->w.w3[l], hd, d};
    }
    return nm;
}

int64_t llm_synthetic_id(const struct llm_model *m, const struct qmat *q)
{
    if (!m->synth_drawn && !m->synth_lazy)
        return -1;
    struct synth_mat *mat = malloc((7 * (size_t)m->c.n_layers + 3) * sizeof *mat);
    if (!mat)
        return -1;
    size_t nm = synth_list((struct llm_model *)(uintptr_t)m, mat);
    int64_t id = -1;
    for (size_t i = 0; i < nm && id < 0; i++)
        if (mat[i].q == q)
            id = (int64_t)i;
    free(mat);
    return id;
}

static int synthetic(struct llm_model **out, const struct model_shape *s, uint64_t seed, int draw,
                     struct alisa_err *e)
{
    *out = NULL;
    int opt = strcmp(s->family, "opt") == 0;
    if (!opt && strcmp(s->family, "llama") != 0)
        return err_set(e, ALISA_EINVAL, "%s: family '%s' has no forward pass here (opt and llama "
                       "do)", s->name, s->family);
    struct llm_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    struct llm_config *c = &m->c;
    c->arch = opt ? LLM_ARCH_OPT : LLM_ARCH_LLAMA;
    c->dim = s->hidden;
    c->hidden_dim = s->ffn;
    c->n_layers = s->n_layers;
    c->n_heads = s->n_heads;
    c->n_kv_heads = opt ? s->n_heads : s->n_kv_heads;
    c->vocab = s->vocab;
    c->seq_len = s->max_seq;
    c->rope_theta = 10000.0f;
    c->norm_eps = opt ? 1e-5f : 1e-6f;
    struct synth_mat *mat = NULL;
    size_t nm = 0, qbytes = 0, fl = 0;
    /* a catalog's shape is an argument, not a file: invalid, not corrupt */
    int rc = llm_config_validate(c, s->name, e) ? ALISA_EINVAL : 0;
    if (rc)
        goto done;
    const int tied = opt || s->tied_embeddings;
    m->synth_tied = tied;
    m->synth_seed = seed;
    const uint32_t L = c->n_layers, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    /* the matrices: (rows, cols) of each, in one list */
    mat = malloc((7 * (size_t)L + 3) * sizeof *mat);
    if (!mat || alloc_mats(m)) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
        goto done;
    }
    nm = synth_list(m, mat);
    for (size_t i = 0; i < nm && draw; i++)
        if (mat[i].cols % 32 == 0)
            qbytes += (size_t)mat[i].rows * qmat_row_bytes(GGML_Q8_0, mat[i].cols);
        else
            fl += (size_t)mat[i].rows * mat[i].cols;
    /* norms (and OPT's biases) in FP32 */
    size_t vec = 2 * (size_t)L * d + d + (opt ? 2 * (size_t)L * d + d + 2 * (size_t)L * d +
                                                2 * (size_t)L * kv + (size_t)L * hd + (size_t)L * d
                                          : 0);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double need = (double)qbytes + 4.0 * (double)(fl + vec), have = (double)pages * psize;
    /* qbytes and fl are 0 when the matrices are drawn elsewhere */
    if (pages > 0 && psize > 0 && need > 0.8 * have) {
        rc = err_set(e, ALISA_ENOMEM, "%s: synthetic weights take %.1f GB (Q8_0), more than 80%% "
                     "of this machine's %.1f GB", s->name, need / 1e9, have / 1e9);
        goto done;
    }
    m->blocks = malloc(qbytes ? qbytes : 1);
    m->data = malloc((fl + vec) * sizeof(float));
    if (!m->blocks || !m->data) {
        rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for %.1f GB of synthetic weights",
                     s->name, need / 1e9);
        goto done;
    }
    uint8_t *qb = m->blocks;
    float *p = m->data;
    for (size_t i = 0; i < nm; i++) {
        uint32_t type = mat[i].cols % 32 == 0 ? GGML_Q8_0 : GGML_F32;
        void *at = !draw ? NULL : type == GGML_F32 ? (void *)p : (void *)qb;
        rc = qmat_init(mat[i].q, type, mat[i].rows, mat[i].cols, at);
        ALISA_ASSERT(rc == 0);
        if (!draw)
            continue; /* drawn where they are used (the CUDA backend) */
        if (type == GGML_F32)
            p += (size_t)mat[i].rows * mat[i].cols;
        else
            qb += (size_t)mat[i].rows * mat[i].q->row_bytes;
        const struct qmat *q = mat[i].q;
#pragma omp parallel for schedule(static)
        for (uint32_t r = 0; r < q->rows; r++)
            synth_row((uint8_t *)(uintptr_t)q->data + (size_t)r * q->row_bytes, q->type, q->cols,
                      seed, i, r);
    }
    if (tied)
        m->w.wcls = m->w.token_embedding;
    struct llm_weights *w = &m->w;
    w->rms_att = take_f(&p, (size_t)L * d);
    w->rms_ffn = take_f(&p, (size_t)L * d);
    w->rms_final = take_f(&p, d);
    for (float *x = w->rms_att; x < p; x++)
        *x = 1.0f;
    if (opt) {
        float *b0 = p;
        w->ln_att_b = take_f(&p, (size_t)L * d);
        w->ln_ffn_b = take_f(&p, (size_t)L * d);
        w->ln_final_b = take_f(&p, d);
        w->bq = take_f(&p, (size_t)L * d);
        w->bo = take_f(&p, (size_t)L * d);
        w->bk = take_f(&p, (size_t)L * kv);
        w->bv = take_f(&p, (size_t)L * kv);
        w->b1 = take_f(&p, (size_t)L * hd);
        w->b2 = take_f(&p, (size_t)L * d);
        memset(b0, 0, (size_t)(p - b0) * sizeof *p);
    }
    ALISA_ASSERT((size_t)(p - m->data) == fl + vec);
    m->mode = LLM_WEIGHTS_NATIVE;
    m->synth_drawn = draw;
    m->synth_lazy = !draw;
    snprintf(m->name, sizeof m->name, "%.40s (synthetic:%llu)", s->name, (unsigned long long)seed);
    snprintf(m->sha256, sizeof m->sha256, "synthetic");
done:
    free(mat);
    if (rc) {
        llm_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int llm_load_synthetic(struct llm_model **out, const struct model_shape *s, uint64_t seed,
                       struct alisa_err *e)
{
    return synthetic(out, s, seed, 1, e);
}

int llm_shape_synthetic(struct llm_model **out, const struct model_shape *s, uint64_t seed,
                        struct alisa_err *e)
{
    return synthetic(out, s, seed, 0, e);
}
