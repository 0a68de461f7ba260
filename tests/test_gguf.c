/* GGUF reading on files written here: exact dequantisation of F32, F16,
 * Q8_0, Q4_0 and Q4_1 blocks, metadata look-ups, and every loader error
 * class (bad magic, unsupported version, truncated header, truncated tensor
 * data, unsupported tensor type, vocabulary mismatch), each with its file
 * and byte offset or name; shapes the forward pass cannot run (head sizes
 * of 1 and 3, kv heads not dividing the heads) refused by name, and a
 * whole tiny model whose block scales or norms are not finite refused
 * naming the tensor and the block. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fp16.h"
#include "gguf.h"
#include "model.h"
#include "testutil.h"

/* ---- a tiny GGUF writer ---- */
struct gbuf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct gbuf *b, const void *x, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}
static void u32(struct gbuf *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct gbuf *b, uint64_t v) { put(b, &v, 8); }
static void str(struct gbuf *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void kv_str(struct gbuf *b, const char *k, const char *v)
{
    str(b, k);
    u32(b, GGUF_STRING);
    str(b, v);
}
static void kv_u32(struct gbuf *b, const char *k, uint32_t v)
{
    str(b, k);
    u32(b, GGUF_U32);
    u32(b, v);
}
static void kv_tokens(struct gbuf *b, uint32_t n)
{
    str(b, "tokenizer.ggml.tokens");
    u32(b, GGUF_ARRAY);
    u32(b, GGUF_STRING);
    u64(b, n);
    for (uint32_t i = 0; i < n; i++) {
        char t[16];
        snprintf(t, sizeof t, "t%u", i);
        str(b, t);
    }
}
static void tensor_info(struct gbuf *b, const char *name, uint64_t ne0, uint64_t ne1, uint32_t type,
                        uint64_t off)
{
    str(b, name);
    u32(b, 2);
    u64(b, ne0);
    u64(b, ne1);
    u32(b, type);
    u64(b, off);
}
static void align32(struct gbuf *b)
{
    static const uint8_t zero[32] = {0};
    put(b, zero, (32 - b->n % 32) % 32);
}

/* Five tensors of 32 values, one per supported type; their expected values. */
static float expect[5][32];

static struct gbuf five_tensors(uint32_t version, uint32_t q_type_of_last)
{
    struct gbuf b = {0};
    put(&b, "GGUF", 4);
    u32(&b, version);
    u64(&b, 5); /* tensors */
    u64(&b, 2); /* keys */
    kv_str(&b, "general.architecture", "test");
    kv_u32(&b, "test.answer", 42);
    tensor_info(&b, "f32", 32, 1, GGML_F32, 0);
    tensor_info(&b, "f16", 32, 1, GGML_F16, 128);
    tensor_info(&b, "q8", 32, 1, GGML_Q8_0, 192);
    tensor_info(&b, "q40", 32, 1, GGML_Q4_0, 226);
    tensor_info(&b, "q41", 32, 1, q_type_of_last, 244);
    align32(&b);
    for (int i = 0; i < 32; i++) { /* F32 */
        float v = (float)i * 0.25f - 3.0f;
        put(&b, &v, 4);
        expect[0][i] = v;
    }
    for (int i = 0; i < 32; i++) { /* F16: exactly representable */
        uint16_t h = fp16_from_float((float)i * 0.5f);
        put(&b, &h, 2);
        expect[1][i] = (float)i * 0.5f;
    }
    uint16_t d = fp16_from_float(0.5f), m = fp16_from_float(-1.0f);
    put(&b, &d, 2); /* Q8_0: d = 0.5, q = i - 16 */
    for (int i = 0; i < 32; i++) {
        int8_t q = (int8_t)(i - 16);
        put(&b, &q, 1);
        expect[2][i] = 0.5f * (float)(i - 16);
    }
    put(&b, &d, 2); /* Q4_0: element j low nibble j % 16, high nibble 15 - j % 16 */
    for (int j = 0; j < 16; j++) {
        uint8_t q = (uint8_t)(j | (15 - j) << 4);
        put(&b, &q, 1);
        expect[3][j] = 0.5f * (float)(j - 8);
        expect[3][j + 16] = 0.5f * (float)(15 - j - 8);
    }
    put(&b, &d, 2); /* Q4_1: d = 0.5, m = -1 */
    put(&b, &m, 2);
    for (int j = 0; j < 16; j++) {
        uint8_t q = (uint8_t)(j | (15 - j) << 4);
        put(&b, &q, 1);
        expect[4][j] = 0.5f * (float)j - 1.0f;
        expect[4][j + 16] = 0.5f * (float)(15 - j) - 1.0f;
    }
    return b;
}

static void test_gguf_dequantises_every_supported_type_exactly(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.gguf");
    struct gbuf b = five_tensors(3, GGML_Q4_1);
    tu_write(path, b.p, b.n);
    struct gguf *g;
    struct alisa_err e = {{0}};
    if (gguf_open(&g, path, &e))
        fail_msg("%s", e.msg);
    const char *names[5] = {"f32", "f16", "q8", "q40", "q41"};
    for (int k = 0; k < 5; k++) {
        const struct gguf_tensor *t = gguf_find(g, names[k]);
        assert_non_null(t);
        float out[32];
        assert_int_equal(gguf_read_f32(g, t, out, &e), 0);
        for (int i = 0; i < 32; i++)
            if (out[i] != expect[k][i])
                fail_msg("%s[%d] = %g, expected %g", names[k], i, out[i], expect[k][i]);
    }
    uint64_t v;
    char s[32];
    assert_int_equal(gguf_get_u64(g, "test.answer", &v, &e), 0);
    assert_int_equal(v, 42);
    assert_int_equal(gguf_get_str(g, "general.architecture", s, sizeof s, &e), 0);
    assert_string_equal(s, "test");
    assert_int_equal(gguf_get_u64(g, "general.architecture", &v, &e), ALISA_EINVAL);
    assert_int_equal(gguf_get_u64(g, "nope", &v, &e), ALISA_ENOTFOUND);
    gguf_close(g);
    free(b.p);
    tu_rmdir(dir);
    free(dir);
}

static void expect_open_error(const char *path, const uint8_t *data, size_t n, const char *needle)
{
    tu_write(path, data, n);
    struct gguf *g;
    struct alisa_err e = {{0}};
    int rc = gguf_open(&g, path, &e);
    if (rc == 0 || !strstr(e.msg, needle) || !strstr(e.msg, path))
        fail_msg("expected '%s', got %d: %s", needle, rc, e.msg);
    assert_null(g);
}

static void test_gguf_every_loader_error_is_named(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "bad.gguf");
    struct gbuf b = five_tensors(3, GGML_Q4_1);
    uint8_t *copy = malloc(b.n);
    memcpy(copy, b.p, b.n);
    copy[0] = 'X';
    expect_open_error(path, copy, b.n, "byte 0: not a GGUF file (bad magic)");
    memcpy(copy, b.p, b.n);
    copy[4] = 7;
    expect_open_error(path, copy, b.n, "byte 4: unsupported GGUF version 7");
    /* 60 bytes cannot hold 5 tensor infos (32 bytes each at least) and 2
     * keys: refused on the counts, before anything is allocated */
    expect_open_error(path, b.p, 60, "tensor count 5 or metadata count 2 is more than the file's "
                                     "60 bytes can hold");
    /* cut inside the tensor infos, where the counts still fit */
    expect_open_error(path, b.p, 24 + 5 * 32 + 2 * 13 + 60, "file ends inside");
    /* counts past what the file can hold, on an otherwise whole file */
    memcpy(copy, b.p, b.n);
    copy[8] = 0xff, copy[9] = 0xff, copy[10] = 0x0f; /* about a million tensors */
    expect_open_error(path, copy, b.n, "is more than the file's");
    expect_open_error(path, b.p, b.n - 5, "tensor 'q41' data (20 bytes) runs past the end");
    free(copy);
    free(b.p);
    /* an unsupported tensor type opens, and is named when read */
    b = five_tensors(3, 10 /* Q2_K */);
    tu_write(path, b.p, b.n);
    struct gguf *g;
    struct alisa_err e = {{0}};
    assert_int_equal(gguf_open(&g, path, &e), 0);
    float out[32];
    assert_int_equal(gguf_read_f32(g, gguf_find(g, "q41"), out, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "tensor 'q41' has type 10 (Q2_K), unsupported"));
    gguf_close(g);
    free(b.p);
    /* a llama model whose tokenizer has more tokens than its embedding rows */
    struct gbuf m = {0};
    put(&m, "GGUF", 4);
    u32(&m, 3);
    u64(&m, 1);
    u64(&m, 7);
    kv_str(&m, "general.architecture", "llama");
    kv_u32(&m, "llama.embedding_length", 32);
    kv_u32(&m, "llama.feed_forward_length", 64);
    kv_u32(&m, "llama.block_count", 1);
    kv_u32(&m, "llama.attention.head_count", 4);
    kv_u32(&m, "llama.context_length", 16);
    kv_tokens(&m, 5);
    tensor_info(&m, "token_embd.weight", 32, 4, GGML_F32, 0);
    align32(&m);
    float zeros[128] = {0};
    put(&m, zeros, sizeof zeros);
    tu_write(path, m.p, m.n);
    struct llm_model *model;
    assert_int_equal(llm_load_gguf(&model, path, LLM_WEIGHTS_F32, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "vocabulary mismatch: 5 tokens in the tokenizer, 4 rows"));
    free(m.p);
    tu_rmdir(dir);
    free(dir);
}

/* A GGUF llama model's header: the shape's metadata and a token embedding
 * of 4 rows, nothing else (the shape is refused before any other tensor is
 * looked for). */
static struct gbuf llama_shape(uint32_t dim, uint32_t heads, uint32_t kv_heads)
{
    struct gbuf m = {0};
    put(&m, "GGUF", 4);
    u32(&m, 3);
    u64(&m, 1);
    u64(&m, 7);
    kv_str(&m, "general.architecture", "llama");
    kv_u32(&m, "llama.embedding_length", dim);
    kv_u32(&m, "llama.feed_forward_length", 2 * dim);
    kv_u32(&m, "llama.block_count", 1);
    kv_u32(&m, "llama.attention.head_count", heads);
    kv_u32(&m, "llama.attention.head_count_kv", kv_heads);
    kv_u32(&m, "llama.context_length", 16);
    tensor_info(&m, "token_embd.weight", dim, 4, GGML_F32, 0);
    align32(&m);
    static const float zeros[4 * 64] = {0};
    put(&m, zeros, 4 * (size_t)dim * sizeof(float));
    return m;
}

/* Issue 48: a head size of 1 left the RoPE tables empty (cpu_rope read past
 * them) and an odd one paired channels across heads; the GGUF loader took
 * both. llm_config_validate refuses them, naming the file and the sizes. */
static void test_gguf_refuses_a_shape_the_forward_pass_cannot_run(void **state)
{
    (void)state;
    static const struct {
        uint32_t dim, heads, kv_heads;
        const char *says;
    } rows[] = {
        {8, 8, 8, "bad.gguf: head size 1 (dim 8 / 8 heads): must be even and at least 2"},
        {12, 4, 4, "bad.gguf: head size 3 (dim 12 / 4 heads): must be even and at least 2"},
        {16, 4, 3, "bad.gguf: 3 kv heads do not divide 4 heads"},
        {16, 4, 0, "bad.gguf: kv heads 0: must be 1 to 1024"},
    };
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "bad.gguf");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct gbuf m = llama_shape(rows[i].dim, rows[i].heads, rows[i].kv_heads);
        tu_write(path, m.p, m.n);
        free(m.p);
        struct llm_model *model;
        struct alisa_err e = {{0}};
        assert_int_equal(llm_load_gguf(&model, path, LLM_WEIGHTS_F32, &e), ALISA_ECORRUPT);
        assert_null(model);
        if (!strstr(e.msg, rows[i].says))
            fail_msg("error '%s' does not say '%s'", e.msg, rows[i].says);
    }
    tu_rmdir(dir);
    free(dir);
}

/* A whole GGUF llama model of dim 32 (4 heads), 1 layer, FFN 32, 4 tokens,
 * tied output head: Q8_0 matrices (one block a row, scale 1/64, codes
 * j - 16) and F32 norms of 1. When bad_tensor names one of its tensors,
 * that tensor's block bad_block gets the binary16 scale bad_scale (a Q8_0
 * matrix) or the value bad_value (an F32 norm). */
static struct gbuf tiny_model(const char *bad_tensor, uint32_t bad_block, float bad_value)
{
    static const struct {
        const char *name;
        uint32_t rows; /* ne1; 1 for a norm (F32, 32 values) */
    } t[] = {
        {"token_embd.weight", 4},      {"output_norm.weight", 1},
        {"blk.0.attn_norm.weight", 1}, {"blk.0.attn_q.weight", 32},
        {"blk.0.attn_k.weight", 32},   {"blk.0.attn_v.weight", 32},
        {"blk.0.attn_output.weight", 32}, {"blk.0.ffn_norm.weight", 1},
        {"blk.0.ffn_gate.weight", 32}, {"blk.0.ffn_down.weight", 32},
        {"blk.0.ffn_up.weight", 32},
    };
    enum { N = sizeof t / sizeof t[0] };
    struct gbuf m = {0};
    put(&m, "GGUF", 4);
    u32(&m, 3);
    u64(&m, N);
    u64(&m, 6);
    kv_str(&m, "general.architecture", "llama");
    kv_u32(&m, "llama.embedding_length", 32);
    kv_u32(&m, "llama.feed_forward_length", 32);
    kv_u32(&m, "llama.block_count", 1);
    kv_u32(&m, "llama.attention.head_count", 4);
    kv_u32(&m, "llama.context_length", 16);
    uint64_t off = 0;
    for (int i = 0; i < N; i++) {
        const int norm = t[i].rows == 1;
        tensor_info(&m, t[i].name, 32, t[i].rows, norm ? GGML_F32 : GGML_Q8_0, off);
        off += (norm ? 128 : 34 * t[i].rows + 31) / 32 * 32;
    }
    align32(&m);
    for (int i = 0; i < N; i++) {
        const int bad = bad_tensor && strcmp(t[i].name, bad_tensor) == 0;
        if (t[i].rows == 1) {
            for (uint32_t j = 0; j < 32; j++) {
                float v = bad && j == bad_block ? bad_value : 1.0f;
                put(&m, &v, 4);
            }
        } else {
            for (uint32_t r = 0; r < t[i].rows; r++) {
                uint16_t d = fp16_from_float(bad && r == bad_block ? bad_value : 1.0f / 64);
                put(&m, &d, 2);
                for (int j = 0; j < 32; j++) {
                    int8_t q = (int8_t)(j - 16);
                    put(&m, &q, 1);
                }
            }
        }
        align32(&m);
    }
    return m;
}

/* Issue 48: a Q8_0 block whose scale is infinite or NaN (or an F32 norm
 * weight that is) loaded, and its NaNs reached quantize_row as
 * activations. The loader refuses such a tensor, naming the file, the
 * tensor and the block, whether the weights are dequantised or mapped; the
 * first row, the same model with finite scales, loads both ways. */
static void test_gguf_refuses_a_tensor_whose_scales_are_not_finite(void **state)
{
    (void)state;
    static const struct {
        const char *tensor;
        uint32_t block;
        float value;
        const char *says; /* NULL: loads */
    } rows[] = {
        {NULL, 0, 0, NULL},
        {"blk.0.attn_q.weight", 3, INFINITY,
         "bad.gguf: tensor 'blk.0.attn_q.weight': block 3 (weights 96 to 127) has a scale that is "
         "not finite"},
        {"token_embd.weight", 1, NAN, "bad.gguf: tensor 'token_embd.weight': block 1 "},
        {"blk.0.ffn_down.weight", 31, -INFINITY, "tensor 'blk.0.ffn_down.weight': block 31 "},
        {"blk.0.ffn_norm.weight", 5, NAN,
         "bad.gguf: tensor 'blk.0.ffn_norm.weight': weight 5 is not finite"},
        {"output_norm.weight", 31, INFINITY, "tensor 'output_norm.weight': weight 31 is not "},
    };
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "bad.gguf");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct gbuf m = tiny_model(rows[i].tensor, rows[i].block, rows[i].value);
        tu_write(path, m.p, m.n);
        free(m.p);
        for (int mode = 0; mode < 2; mode++) {
            struct llm_model *model;
            struct alisa_err e = {{0}};
            int rc = llm_load_gguf(&model, path, mode ? LLM_WEIGHTS_NATIVE : LLM_WEIGHTS_F32, &e);
            if (!rows[i].says) {
                if (rc)
                    fail_msg("%s", e.msg);
                llm_free(model);
                continue;
            }
            assert_int_equal(rc, ALISA_ECORRUPT);
            assert_null(model);
            if (!strstr(e.msg, rows[i].says))
                fail_msg("error '%s' does not say '%s'", e.msg, rows[i].says);
        }
    }
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_dequantises_every_supported_type_exactly),
        cmocka_unit_test(test_gguf_every_loader_error_is_named),
        cmocka_unit_test(test_gguf_refuses_a_shape_the_forward_pass_cannot_run),
        cmocka_unit_test(test_gguf_refuses_a_tensor_whose_scales_are_not_finite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
