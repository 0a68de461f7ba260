/* The CPU executor on the real stories260K checkpoint: loading and hashing,
 * the one validation of a model's shape (by hand),
 * the tokenizer (errors, round trip, byte fallback, byte pieces parsed
 * strictly on a tokenizer written here), greedy decoding against
 * the continuation recorded in ../shared/models/SOURCES.md by an independent
 * numpy forward pass, batched decoding equal to single decoding, and
 * chunked (prefill-as-GEMM) runs equal to position-by-position runs, and
 * INT8 KV storage (error bound, open group exact, placement invariance),
 * the kvstore's tier ops behind a fake device tier that defers its work as
 * the CUDA backend does, and the backend choice without a device.
 * Under CI=true a missing model fails instead of skipping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpu_ops.h"
#include "forward.h"
#include "gguf.h"
#include "kvstore.h"
#include "model.h"
#include "scheduler.h"
#include "skew.h"
#include "testexec.h"
#include "testutil.h"
#include "tokenizer.h"

static char model_path[600], tok_path[600];

static int have_model(void)
{
    snprintf(model_path, sizeof model_path, "%s/stories260K/stories260K.bin", tu_models_dir());
    snprintf(tok_path, sizeof tok_path, "%s/stories260K/tok512.bin", tu_models_dir());
    if (access(model_path, R_OK) == 0 && access(tok_path, R_OK) == 0)
        return 1;
    if (tu_ci())
        fail_msg("CI=true and %s or %s is missing", model_path, tok_path);
    return 0;
}

/* The stories260K model, or a skip when it is absent (a failure under CI). */
static struct llm_model *load_model_or_skip(void)
{
    if (!have_model())
        tu_skip();
    return tu_model_or_skip(model_path, LLM_WEIGHTS_NATIVE);
}

/* INT8 codes stay in 0..255 whatever the input: out of range is clamped,
 * a NaN (0/0, a non-finite activation) is code 0, never an undefined
 * conversion (the sanitizer build checks float-to-integer casts) */
static void test_exec_int8_codes_of_non_finite_input_are_defined(void **state)
{
    (void)state;
    const float x[4] = {1e30f, -1e30f, NAN, 0.0f};
    const float p[8] = {1.0f, 1.0f, 1.0f, 0.0f, 128.0f, 128.0f, 128.0f, 0.0f};
    unsigned char q[4];
    kvstore_quantise(q, x, p, 4);
    assert_int_equal(q[0], 255);
    assert_int_equal(q[1], 0);
    assert_int_equal(q[2], 0);
    assert_int_equal(q[3], 0); /* 0 / 0 + 0 */
}

static void test_exec_loads_stories260k_with_its_hash(void **state)
{
    (void)state;
    if (!have_model())
        tu_skip();
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load_llama2c(&m, model_path, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m->c.dim, 64);
    assert_int_equal(m->c.kv_dim, 32);
    assert_int_equal(m->c.head_dim, 8);
    assert_ptr_equal(m->w.wcls.data, m->w.token_embedding.data); /* tied head */
    /* SOURCES.md lists this sha256 for the upstream file */
    assert_string_equal(m->sha256,
                        "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696");
    llm_free(m);
}

/* llm_config_validate, the one check of a shape every loader makes (issue
 * 48): stories260K's shape passes and gets its head size and KV width; each
 * row changes one size of it and is refused naming the size and value. */
static void test_exec_config_validation_names_the_size_at_fault(void **state)
{
    (void)state;
    const struct llm_config good = {.arch = LLM_ARCH_LLAMA, .dim = 64, .hidden_dim = 172,
                                    .n_layers = 5, .n_heads = 8, .n_kv_heads = 4, .vocab = 512,
                                    .seq_len = 512, .rope_theta = 10000.0f, .norm_eps = 1e-5f};
    static const struct {
        size_t field; /* offset of a uint32_t of struct llm_config */
        uint32_t value;
        const char *says; /* NULL: valid */
    } rows[] = {
        {offsetof(struct llm_config, dim), 0, "m.bin: dim 0: must be 1 to 65536"},
        {offsetof(struct llm_config, dim), 1u << 17, "m.bin: dim 131072: must be 1 to 65536"},
        {offsetof(struct llm_config, n_heads), 0, "m.bin: heads 0: must be 1 to 1024"},
        {offsetof(struct llm_config, n_heads), 3, "m.bin: dim 64 does not split into 3 heads"},
        {offsetof(struct llm_config, n_heads), 32, NULL}, /* head size 2 */
        {offsetof(struct llm_config, n_heads), 64,
         "m.bin: head size 1 (dim 64 / 64 heads): must be even and at least 2"},
        {offsetof(struct llm_config, n_kv_heads), 3, "m.bin: 3 kv heads do not divide 8 heads"},
        {offsetof(struct llm_config, n_kv_heads), 16, "m.bin: 16 kv heads do not divide 8 heads"},
        {offsetof(struct llm_config, hidden_dim), 0, "m.bin: hidden dim 0: must be 1 to 16777216"},
        {offsetof(struct llm_config, hidden_dim), (1u << 24) + 1,
         "m.bin: hidden dim 16777217: must be 1 to 16777216"},
        {offsetof(struct llm_config, n_layers), 1025, "m.bin: layers 1025: must be 1 to 1024"},
        {offsetof(struct llm_config, vocab), 0, "m.bin: vocabulary 0: must be 1 to 16777216"},
        {offsetof(struct llm_config, seq_len), 0, "m.bin: context 0: must be 1 to 16777216"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct llm_config c = good;
        memcpy((char *)&c + rows[i].field, &rows[i].value, sizeof rows[i].value);
        struct alisa_err e = {{0}};
        int rc = llm_config_validate(&c, "m.bin", &e);
        if (!rows[i].says) {
            assert_int_equal(rc, 0);
            continue;
        }
        assert_int_equal(rc, ALISA_ECORRUPT);
        if (strcmp(e.msg, rows[i].says) != 0)
            fail_msg("row %zu: '%s', expected '%s'", i, e.msg, rows[i].says);
    }
    struct llm_config c = good;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_config_validate(&c, "m.bin", &e), 0);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.kv_dim, 32);
    c.rope_theta = 0.0f;
    assert_int_equal(llm_config_validate(&c, "m.bin", &e), ALISA_ECORRUPT);
    assert_string_equal(e.msg, "m.bin: rope theta 0: must be positive and finite");
    c = good;
    c.norm_eps = NAN;
    assert_int_equal(llm_config_validate(&c, "m.bin", &e), ALISA_ECORRUPT);
    assert_string_equal(e.msg, "m.bin: norm epsilon nan: must be finite and not negative");
}

static void test_exec_tokenizer_rejects_wrong_vocabularies_and_truncation(void **state)
{
    (void)state;
    if (!have_model())
        tu_skip();
    struct tokenizer *t;
    struct alisa_err e = {{0}};
    assert_int_equal(tok_load(&t, tok_path, 1000, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "file ends at token 512 of 1000"));
    assert_int_equal(tok_load(&t, tok_path, 300, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "data after 300 tokens"));
    /* below the 259 ids llama2.c's encoding always uses (the byte fallback
     * reads ids up to 258 whatever the vocabulary) */
    assert_int_equal(tok_load(&t, tok_path, 100, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "vocabulary of 100 tokens: a llama2.c tokenizer needs at least 259"));
    char *dir = tu_mkdtemp();
    const char *cut = tu_path(dir, "cut.bin");
    tu_copy(tok_path, cut, 3000);
    assert_int_equal(tok_load(&t, cut, 512, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "cut.bin: byte "));
    assert_int_equal(tok_load(&t, tu_path(dir, "none.bin"), 512, &e), ALISA_EIO);
    tu_rmdir(dir);
    free(dir);
}

static void test_exec_tokenizer_round_trips_text_and_bytes(void **state)
{
    (void)state;
    if (!have_model())
        tu_skip();
    struct tokenizer *t;
    struct alisa_err e = {{0}};
    assert_int_equal(tok_load(&t, tok_path, 512, &e), 0);
    const char *texts[] = {"Once upon a time, there was a cat.", "Zo\xc3\xab ate 42 \xe2\x82\xac!"};
    for (int k = 0; k < 2; k++) {
        uint32_t ids[128];
        int n = tok_encode(t, texts[k], 1, ids, 128);
        assert_true(n > 2);
        assert_int_equal(ids[0], TOK_BOS);
        char out[256] = "";
        size_t used = 0;
        for (int i = 1; i < n; i++) {
            size_t len;
            const char *s = tok_decode(t, ids[i - 1], ids[i], &len);
            memcpy(out + used, s, len);
            used += len;
        }
        out[used] = 0;
        assert_string_equal(out, texts[k]);
    }
    uint32_t small[4];
    assert_int_equal(tok_encode(t, "too long for this", 1, small, 4), ALISA_EINVAL);
    tok_free(t);
}

/* A llama2.c tokenizer file of TOK_BYTE_FALLBACK_END tokens: the special
 * three, then <0x00>..<0xFF>, except that token 3 + k holds odd[k] for each
 * k < n_odd. */
static void write_byte_tokenizer(const char *path, const char *const *odd, int n_odd)
{
    uint8_t buf[8192];
    size_t n = 0;
    int32_t max_len = 16;
    memcpy(buf, &max_len, 4), n += 4;
    for (uint32_t id = 0; id < TOK_BYTE_FALLBACK_END; id++) {
        char piece[17];
        if (id < 3)
            snprintf(piece, sizeof piece, "%s", id == 0 ? "<unk>" : id == 1 ? "<s>" : "</s>");
        else if (id - 3 < (uint32_t)n_odd)
            snprintf(piece, sizeof piece, "%s", odd[id - 3]);
        else
            snprintf(piece, sizeof piece, "<0x%02X>", id - 3);
        float score = 0.0f;
        int32_t len = (int32_t)strlen(piece);
        memcpy(buf + n, &score, 4), n += 4;
        memcpy(buf + n, &len, 4), n += 4;
        memcpy(buf + n, piece, (size_t)len), n += (size_t)len;
    }
    tu_write(path, buf, n);
}

/* Issue 48: "<0x-F>" passed sscanf's "%02X" (a sign is accepted), became
 * byte -15 and tok_decode read t->bytes[-15]. A byte piece is exactly <0x,
 * two hex digits and >; anything else is decoded as the text it is. */
static void test_exec_tokenizer_reads_only_strict_byte_pieces_as_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *piece;
        const char *text; /* what it decodes to */
        size_t len;
    } rows[] = {
        {"<0x-F>", "<0x-F>", 6}, {"<0x+F>", "<0x+F>", 6}, {"<0x F>", "<0x F>", 6},
        {"<0x4G>", "<0x4G>", 6}, {"<0x41)", "<0x41)", 6}, {"<0X41>", "<0X41>", 6},
        {"<0x41>", "A", 1},      {"<0xfe>", "\xfe", 1},   {"<0x00>", "", 1},
    };
    const int n = (int)(sizeof rows / sizeof rows[0]);
    const char *odd[sizeof rows / sizeof rows[0]];
    for (int k = 0; k < n; k++)
        odd[k] = rows[k].piece;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tok.bin");
    write_byte_tokenizer(path, odd, n);
    struct tokenizer *t;
    struct alisa_err e = {{0}};
    if (tok_load(&t, path, TOK_BYTE_FALLBACK_END, &e))
        fail_msg("%s", e.msg);
    for (int k = 0; k < n; k++) {
        size_t len = 99;
        const char *s = tok_decode(t, 0, (uint32_t)(3 + k), &len);
        if (len != rows[k].len || memcmp(s, rows[k].text, len) != 0)
            fail_msg("piece '%s' decodes to %zu bytes '%.*s', expected %zu bytes '%s'",
                     rows[k].piece, len, (int)len, s, rows[k].len, rows[k].text);
    }
    tok_free(t);
    tu_rmdir(dir);
    free(dir);
}

static void test_exec_greedy_continuation_matches_the_independent_reference(void **state)
{
    (void)state;
    if (!have_model())
        tu_skip();
    struct llm_model *m;
    struct tokenizer *t;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_load_llama2c(&m, model_path, &e), 0);
    assert_int_equal(tok_load(&t, tok_path, 512, &e), 0);
    uint32_t ids[64];
    int np = tok_encode(t, "Once upon a time", 1, ids, 64);
    struct llm_state *s;
    assert_int_equal(llm_state_create(&s, m, 1, 128, &e), 0);
    const float *logits = NULL;
    for (int p = 0; p < np; p++)
        logits = llm_forward(s, &ids[p], (uint32_t)p, NULL);
    char out[1024] = "";
    size_t used = 0;
    uint32_t prev = ids[np - 1];
    for (int j = 0; j < 48; j++) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < m->c.vocab; i++)
            if (logits[i] > logits[best])
                best = i;
        size_t len;
        const char *piece = tok_decode(t, prev, best, &len);
        memcpy(out + used, piece, len);
        used += len;
        prev = best;
        logits = llm_forward(s, &best, (uint32_t)(np + j), NULL);
    }
    out[used] = 0;
    /* SOURCES.md: "...there was a little girl named Lily. She loved to play
     * outside in the park. One day, she saw a big, red ball..." */
    if (!strstr(out, ", there was a little girl named Lily. She loved to play outside in the "
                     "park. One day, she saw a big, red ball"))
        fail_msg("continuation differs: '%s'", out);
    llm_state_free(s);
    tok_free(t);
    llm_free(m);
}

/* llm_argmax, the greedy rule every backend follows (worked by hand): the
 * first of equal maxima, a NaN never wins (first or not; a row of NaNs
 * gives 0), all -inf gives 0, zeros of either sign the first, a maximum at
 * the end of a row longer than a vector. */
static void test_exec_argmax_takes_the_first_largest_and_never_a_nan(void **state)
{
    (void)state;
    const float a[] = {1, 3, 3, 2}, b[] = {NAN, 5, 7}, c[] = {2, NAN, 9, 9, NAN};
    const float nan2[] = {NAN, NAN}, mixed[] = {NAN, -INFINITY, NAN, -INFINITY};
    const float d[] = {-INFINITY, -INFINITY}, z[] = {-0.0f, 0.0f, 0.0f}, f[] = {-1, -2};
    assert_int_equal(llm_argmax(a, 4), 1);
    assert_int_equal(llm_argmax(b, 3), 2);
    assert_int_equal(llm_argmax(nan2, 2), 0);
    assert_int_equal(llm_argmax(mixed, 4), 1);
    assert_int_equal(llm_argmax(c, 5), 2);
    assert_int_equal(llm_argmax(d, 2), 0);
    assert_int_equal(llm_argmax(z, 3), 0);
    assert_int_equal(llm_argmax(f, 2), 0);
    float g[37];
    for (int i = 0; i < 37; i++)
        g[i] = (float)(i % 5);
    g[36] = 4.5f;
    assert_int_equal(llm_argmax(g, 37), 36);
    assert_int_equal(llm_argmax(g, 36), 4);
}

/* llm_forward_greedy gives, sequence by sequence, the argmax of the logits
 * llm_forward gives a twin state, over a batch's decode. */
static void test_exec_greedy_forward_equals_the_argmax_of_the_logits(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const uint32_t B = 3, V = m->c.vocab;
    struct llm_state *a, *b;
    assert_int_equal(llm_state_create(&a, m, B, 40, &e), 0);
    assert_int_equal(llm_state_create(&b, m, B, 40, &e), 0);
    uint32_t cur[3] = {1, 7, 300}, next[3];
    int differ = 0;
    for (uint32_t p = 0; p < 32; p++) {
        const float *lg = llm_forward(a, cur, p, NULL);
        assert_non_null(lg);
        assert_int_equal(llm_forward_greedy(b, cur, p, next), 0);
        for (uint32_t s = 0; s < B; s++) {
            assert_int_equal(next[s], llm_argmax(lg + (size_t)s * V, V));
            differ |= next[s] != next[0];
            cur[s] = next[s];
        }
    }
    assert_true(differ); /* the sequences' rows are not one row copied */
    llm_state_free(a);
    llm_state_free(b);
    llm_free(m);
}

/* A prefill chunk that skips the output head leaves the next logits as a
 * chunk that computes them: the head changes nothing but the logits. */
static void test_exec_prefill_without_logits_gives_the_same_next_logits(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const uint32_t B = 2, P = 7, V = m->c.vocab;
    uint32_t tokens[2 * 7], last[2] = {33, 44};
    for (uint32_t i = 0; i < B * P; i++)
        tokens[i] = 1 + (i * 37) % (V - 1);
    struct llm_state *a, *b;
    assert_int_equal(llm_state_create(&a, m, B, 16, &e), 0);
    assert_int_equal(llm_state_create(&b, m, B, 16, &e), 0);
    assert_non_null(llm_forward_chunk(a, tokens, 0, P, NULL));
    assert_int_equal(llm_prefill_chunk(b, tokens, 0, P), 0);
    const float *la = llm_forward(a, last, P, NULL);
    float *keep = malloc((size_t)B * V * sizeof *keep);
    assert_non_null(la);
    memcpy(keep, la, (size_t)B * V * sizeof *keep);
    const float *lb = llm_forward(b, last, P, NULL);
    assert_non_null(lb);
    assert_memory_equal(keep, lb, (size_t)B * V * sizeof *keep);
    free(keep);
    llm_state_free(a);
    llm_state_free(b);
    llm_free(m);
}

/* Synthetic weights: the shape's matrices drawn with std 0.02 (Q8_0 where
 * the width allows, FP32 otherwise), the same bytes for the same seed on 1
 * or 2 threads, other bytes for another seed; the forward pass runs on
 * them; shapes beyond memory or without a forward pass are refused. */
static void test_exec_synthetic_weights(void **state)
{
    (void)state;
    struct model_shape opt = {.name = "tiny-opt", .family = "opt", .n_layers = 2, .hidden = 64,
                              .n_heads = 4, .n_kv_heads = 4, .ffn = 96, .vocab = 100,
                              .max_seq = 32, .tied_embeddings = 1};
    struct model_shape llama = {.name = "tiny-llama", .family = "llama", .n_layers = 2,
                                .hidden = 64, .n_heads = 4, .n_kv_heads = 2, .ffn = 172,
                                .vocab = 100, .max_seq = 32};
    struct alisa_err e = {{0}};
    struct llm_model *a, *b, *c;
    cpu_threads_set(1);
    assert_int_equal(llm_load_synthetic(&a, &opt, 5, &e), 0);
    cpu_threads_set(2);
    assert_int_equal(llm_load_synthetic(&b, &opt, 5, &e), 0);
    assert_int_equal(llm_load_synthetic(&c, &opt, 6, &e), 0);
    cpu_threads_set(0);
    assert_int_equal(a->c.arch, LLM_ARCH_OPT);
    const struct qmat *wa = &a->w.w1[1], *wb = &b->w.w1[1], *wc = &c->w.w1[1];
    assert_int_equal(wa->type, GGML_Q8_0);
    size_t bytes = (size_t)wa->rows * wa->row_bytes;
    assert_memory_equal(wa->data, wb->data, bytes);
    assert_memory_not_equal(wa->data, wc->data, bytes);
    /* the standard deviation of every matrix's weights */
    float row[256];
    double sum = 0, sq = 0, n = 0;
    for (uint32_t r = 0; r < wa->rows; r++) {
        qmat_row(wa, r, row);
        for (uint32_t j = 0; j < wa->cols; j++, n++)
            sum += row[j], sq += (double)row[j] * row[j];
    }
    double sd = sqrt(sq / n - (sum / n) * (sum / n));
    if (fabs(sd - 0.02) > 0.0006)
        fail_msg("synthetic weights' standard deviation %.5f, expected 0.02", sd);
    struct llm_state *st;
    assert_int_equal(llm_state_create(&st, a, 1, 8, &e), 0);
    uint32_t tok[8] = {1, 5, 9, 13, 17, 21, 25, 29};
    const float *lg = llm_forward_chunk(st, tok, 0, 8, NULL);
    assert_non_null(lg);
    for (uint32_t i = 0; i < 8 * a->c.vocab; i++)
        assert_true(isfinite(lg[i]));
    llm_state_free(st);
    llm_free(a);
    llm_free(b);
    llm_free(c);
    /* 172 columns are no whole number of blocks: FP32 there */
    assert_int_equal(llm_load_synthetic(&a, &llama, 1, &e), 0);
    assert_int_equal(a->w.w2[0].type, GGML_F32);
    assert_int_equal(a->w.w1[0].type, GGML_Q8_0);
    assert_int_equal(a->c.n_kv_heads, 2);
    llm_free(a);
    struct model_shape big = opt;
    big.n_layers = 1000, big.hidden = 65536, big.n_heads = 64, big.n_kv_heads = 64,
    big.ffn = 262144;
    assert_int_equal(llm_load_synthetic(&a, &big, 1, &e), ALISA_ENOMEM);
    assert_non_null(strstr(e.msg, "synthetic weights take"));
    struct model_shape pythia = opt;
    snprintf(pythia.family, sizeof pythia.family, "pythia");
    assert_int_equal(llm_load_synthetic(&a, &pythia, 1, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "family 'pythia'"));
}

static void test_exec_batched_decoding_equals_one_sequence_at_a_time(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const uint32_t seqs[3][6] = {{1, 30, 40, 50, 60, 70}, {1, 100, 200, 300, 400, 500},
                                 {1, 7, 8, 9, 10, 11}};
    struct llm_state *batch, *one;
    assert_int_equal(llm_state_create(&batch, m, 3, 16, &e), 0);
    float rows_b[3 * 5 * 6], rows_1[5 * 6];
    float *lb = malloc(3 * m->c.vocab * sizeof *lb);
    for (uint32_t p = 0; p < 6; p++) {
        uint32_t cur[3] = {seqs[0][p], seqs[1][p], seqs[2][p]};
        memcpy(lb, llm_forward(batch, cur, p, rows_b), 3 * m->c.vocab * sizeof *lb);
    }
    for (int b = 0; b < 3; b++) {
        assert_int_equal(llm_state_create(&one, m, 1, 16, &e), 0);
        const float *l1 = NULL;
        for (uint32_t p = 0; p < 6; p++)
            l1 = llm_forward(one, &seqs[b][p], p, rows_1);
        for (uint32_t i = 0; i < m->c.vocab; i++) {
            float ref = l1[i], got = lb[(size_t)b * m->c.vocab + i];
            if (fabsf(got - ref) > 1e-4f + 1e-4f * fabsf(ref))
                fail_msg("seq %d logit %u: batched %g, single %g", b, i, got, ref);
        }
        /* the attention rows at the last position sum to 1 per layer */
        for (int l = 0; l < 5; l++) {
            double sum = 0;
            for (int t = 0; t < 6; t++) {
                sum += rows_1[l * 6 + t];
                assert_true(fabsf(rows_b[(b * 5 + l) * 6 + t] - rows_1[l * 6 + t]) < 1e-5f);
            }
            assert_true(fabs(sum - 1.0) < 1e-5);
        }
        llm_state_free(one);
    }
    free(lb);
    llm_state_free(batch);
    assert_int_equal(llm_state_create(&batch, m, 1, 100000, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "context 512"));
    llm_free(m);
}

/* Attaches a selection over tiers of dev device and host host token slots
 * per stream (one byte a token, FP32 or INT8 storage) to st, prompt_len
 * positions of prefill. */
static void attach_sel(struct llm_state *st, const struct llm_config *c, uint32_t B, uint32_t N,
                       uint32_t prompt_len, const struct selection_ops *sel, struct sel_params sp,
                       const struct placement_ops *place, uint32_t dev, uint32_t host,
                       uint64_t recompute_ns, int int8, struct scheduler **sched,
                       struct kvstore **ks)
{
    struct alisa_err e = {{0}};
    struct scheduler_config sc = {.sel = sel, .sel_params = sp, .place = place,
                                  .n_streams = B * c->n_layers, .max_len = N};
    sc.place_params = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = dev,
                                            .cpu_bytes = host, .load_ns = 2,
                                            .recompute_ns = recompute_ns, .gpu_fraction = -1};
    if (place == &place_alisa_ops) { /* the paper's rule: a schedule with all three phases */
        sc.place_params.sched = (struct alisa_sched){0.5, 0.5, N / 3, N / 2};
        sc.place_params.scheduled = 1;
    }
    if (scheduler_create(sched, &sc, NULL, &e) ||
        kvstore_create(ks, c, sc.n_streams, N, scheduler_stream_dev_slots(*sched, 0),
                       scheduler_stream_host_slots(*sched, 0), int8, &e))
        fail_msg("%s", e.msg);
    llm_state_tiered(st, *sched, *ks, prompt_len);
}

/* FlexGen's split by whole sequences (the executor's flexgen-static,
 * exec/cli's flexgen_split): sequence 0's KV all on the device, sequence
 * 1's all on the host, loaded for every step that attends it and each new
 * token written through; SWA at 50%, FP32. Arenas as large as the largest
 * stream's. */
static void attach_flexgen(struct llm_state *st, const struct llm_config *c, uint32_t N,
                           uint32_t prompt_len, struct scheduler **sched, struct kvstore **ks)
{
    struct alisa_err e = {{0}};
    const uint32_t B = 2, n = B * c->n_layers;
    struct place_params *pp = calloc(n, sizeof *pp);
    assert_non_null(pp);
    for (uint32_t i = 0; i < n; i++) {
        int gpu = i < c->n_layers; /* stream b * n_layers + l: sequence 0 */
        pp[i] = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = gpu ? N : 0,
                                      .cpu_bytes = gpu ? 0 : N, .gpu_fraction = gpu};
    }
    struct scheduler_config sc = {.sel = &sel_swa_ops, .sel_params = {.sparsity = 0.5},
                                  .place = &place_flexgen_ops, .stream_params = pp,
                                  .n_streams = n, .max_len = N};
    if (scheduler_create(sched, &sc, NULL, &e))
        fail_msg("%s", e.msg);
    free(pp);
    uint32_t dev = 0, host = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d = scheduler_stream_dev_slots(*sched, i), h = scheduler_stream_host_slots(*sched, i);
        dev = d > dev ? d : dev;
        host = h > host ? h : host;
    }
    if (kvstore_create(ks, c, n, N, dev, host, 0, &e))
        fail_msg("%s", e.msg);
    llm_state_tiered(st, *sched, *ks, prompt_len);
}

/* SWA at 50% sparsity, FP32. */
static void attach_tiers(struct llm_state *st, const struct llm_config *c, uint32_t B, uint32_t N,
                         uint32_t prompt_len, const struct placement_ops *place, uint32_t dev,
                         uint32_t host, uint64_t recompute_ns, struct scheduler **sched,
                         struct kvstore **ks)
{
    attach_sel(st, c, B, N, prompt_len, &sel_swa_ops, (struct sel_params){.sparsity = 0.5}, place,
               dev, host, recompute_ns, 0, sched, ks);
}

/* The tokens at position p of the two test sequences: a prompt of P
 * positions, then a decode. */
static void two_sequences(uint32_t cur[2], uint32_t p, uint32_t P, uint32_t vocab)
{
    cur[0] = p < P ? (uint32_t)(1 + 40 * p) % vocab : (60 + p % 200) % vocab;
    cur[1] = p < P ? (uint32_t)(1 + 17 * p) % vocab : (300 + p % 150) % vocab;
}

/* Placement moves KV between arenas (offload, load, recompute) but must
 * never change what the model computes: the same selection with tiny tiers
 * gives the logits of the untiered run at every step. */
/* Every placement (three caches, the paper's rule, which loads CPU tokens
 * and recomputes deleted ones, and FlexGen's split by sequences) leaves m's
 * logits as the untiered run gives them; frees m. */
static void tiered_outputs_unchanged(struct llm_model *m)
{
    struct alisa_err e = {{0}};
    const struct llm_config *c = &m->c;
    const uint32_t B = 2, N = 110, P = 6;
    const struct placement_ops *places[] = {&place_alisa_cache_ops, &place_lru_ops,
                                            &place_fifo_ops, &place_alisa_ops};
    float *ref = malloc((size_t)N * B * c->vocab * sizeof *ref);
    uint64_t fetched = 0;
    for (int run = 0; run < 6; run++) {
        struct llm_state *st;
        assert_int_equal(llm_state_create(&st, m, B, N, &e), 0);
        struct scheduler *sched = NULL;
        struct kvstore *ks = NULL;
        /* run 0: SWA with every token on the device; runs 1-3: 72 device and
         * 16 host slots per stream under three caches; run 4: the paper's
         * rule, alpha = beta = 0.5 from positions 36 and 55 (55 tokens at
         * most on the device, 55 on the host with the deleted ones' inputs) */
        if (run == 5) /* FlexGen's split: sequence 0 on the device, 1 on the host */
            attach_flexgen(st, c, N, P, &sched, &ks);
        else
            attach_tiers(st, c, B, N, P, run ? places[run - 1] : &place_gpu_only_ops,
                         run ? 72 : N, run == 4 ? 60 : run ? 16 : N, 3, &sched, &ks);
        uint32_t cur[2];
        for (uint32_t p = 0; p < N; p++) {
            two_sequences(cur, p, P, c->vocab);
            const float *logits = llm_forward(st, cur, p, NULL);
            if (!logits)
                fail_msg("run %d position %u: %s", run, p, llm_state_error(st)->msg);
            float *r = ref + (size_t)p * B * c->vocab;
            for (uint32_t i = 0; i < B * c->vocab; i++) {
                if (run == 0)
                    r[i] = logits[i];
                else if (fabsf(logits[i] - r[i]) > 1e-4f + 1e-4f * fabsf(r[i]))
                    fail_msg("run %d position %u logit %u: %g, untiered %g", run, p, i, logits[i],
                             r[i]);
            }
        }
        uint64_t off, ld, rc;
        kvstore_counts(ks, &off, &ld, &rc);
        if (run) /* the tiers were really used */
            assert_true(off > 0);
        if (run == 4) /* the paper's rule loads CPU tokens and recomputes deleted ones */
            assert_true(ld > 0 && rc > 0);
        if (run == 5) /* every token of sequence 1 written through, then loaded when attended */
            assert_true(off == (uint64_t)N * c->n_layers && ld > off && rc == 0);
        fetched += ld + rc;
        kvstore_free(ks);
        scheduler_destroy(sched);
        llm_state_free(st);
    }
    assert_true(fetched > 0); /* some run loaded or recomputed evicted tokens */
    free(ref);
    llm_free(m);
}

static void test_exec_tiered_placement_leaves_the_outputs_unchanged(void **state)
{
    (void)state;
    tiered_outputs_unchanged(load_model_or_skip());
}

/* The same on OPT (tests/golden/tiny-opt: learned positions, biases, no
 * RoPE), whose recomputation adds the K and V biases and rotates nothing. */
static void test_exec_tiered_placement_leaves_opt_outputs_unchanged(void **state)
{
    (void)state;
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load(&m, ALISA_GOLDEN_DIR "/tiny-opt", LLM_WEIGHTS_F32, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m->c.arch, LLM_ARCH_OPT);
    tiered_outputs_unchanged(m);
}

/* The same on Qwen2 (tests/golden/tiny-qwen2: RoPE and biases on q, k and
 * v), whose recomputation adds the K bias before it rotates. */
static void test_exec_tiered_placement_leaves_qwen2_outputs_unchanged(void **state)
{
    (void)state;
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load(&m, ALISA_GOLDEN_DIR "/tiny-qwen2", LLM_WEIGHTS_F32, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m->c.arch, LLM_ARCH_QWEN2);
    tiered_outputs_unchanged(m);
}

/* A sliding-window model (tests/golden/tiny-mistral) under the scheduler
 * set up directly, not through tiered_attach (which refuses it first): the
 * forward pass says why it stops, on its first position. */
static void test_exec_sliding_window_under_the_scheduler_is_refused(void **state)
{
    (void)state;
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load(&m, ALISA_GOLDEN_DIR "/tiny-mistral", LLM_WEIGHTS_F32, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m->c.window, 3);
    struct llm_state *st;
    assert_int_equal(llm_state_create(&st, m, 2, 16, &e), 0);
    struct scheduler *sched = NULL;
    struct kvstore *ks = NULL;
    attach_tiers(st, &m->c, 2, 16, 4, &place_lru_ops, 8, 8, 3, &sched, &ks);
    uint32_t cur[2] = {1, 2};
    assert_null(llm_forward(st, cur, 0, NULL));
    assert_non_null(strstr(llm_state_error(st)->msg, "sliding-window model runs without the "
                                                     "scheduler only"));
    kvstore_free(ks);
    scheduler_destroy(sched);
    llm_state_free(st);
    llm_free(m);
}

/* Running a prompt as one chunk (GEMMs over batch x P rows) computes what
 * running it position by position computes, dense and tiered: chunks of
 * uneven sizes, one crossing the prefill/decode boundary, match the
 * position-by-position logits at every position. */
static void test_exec_chunked_forward_equals_position_by_position(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const struct llm_config *c = &m->c;
    const uint32_t B = 2, N = 64, P = 20;
    const uint32_t chunks[] = {13, 1, 9, 16, 25}; /* 13+1 | 9 crosses P=20 | ... = 64 */
    uint32_t *tok = malloc((size_t)B * N * sizeof *tok), *ct = malloc((size_t)B * N * sizeof *ct);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t p = 0; p < N; p++)
            tok[b * N + p] = p == 0 ? 1 : (uint32_t)(7 + 31 * p + 101 * b) % c->vocab;
    float *ref = malloc((size_t)N * B * c->vocab * sizeof *ref);
    for (int tiered = 0; tiered < 2; tiered++) {
        for (int chunked = 0; chunked < 2; chunked++) {
            struct llm_state *st;
            struct scheduler *sched = NULL;
            struct kvstore *ks = NULL;
            assert_int_equal(llm_state_create(&st, m, B, N, &e), 0);
            if (tiered)
                attach_tiers(st, c, B, N, P, &place_alisa_cache_ops, 40, 12, 3, &sched, &ks);
            uint32_t pos = 0;
            for (size_t k = 0; pos < N; k++) {
                uint32_t n = chunked ? chunks[k] : 1;
                for (uint32_t b = 0; b < B; b++)
                    memcpy(ct + b * n, tok + b * N + pos, n * sizeof *ct);
                const float *lg = llm_forward_chunk(st, ct, pos, n, NULL);
                if (!lg)
                    fail_msg("tiered %d chunked %d position %u: %s", tiered, chunked, pos,
                             llm_state_error(st)->msg);
                for (uint32_t b = 0; b < B; b++)
                    for (uint32_t i = 0; i < n; i++) {
                        const float *got = lg + ((size_t)b * n + i) * c->vocab;
                        float *r = ref + ((size_t)(pos + i) * B + b) * c->vocab;
                        for (uint32_t v = 0; v < c->vocab; v++) {
                            if (!chunked)
                                r[v] = got[v];
                            else if (fabsf(got[v] - r[v]) > 1e-4f + 1e-4f * fabsf(r[v]))
                                fail_msg("tiered %d sequence %u position %u logit %u: chunked "
                                         "%g, one by one %g", tiered, b, pos + i, v, got[v], r[v]);
                        }
                    }
                pos += n;
            }
            if (tiered) {
                uint64_t off, ld, rc;
                kvstore_counts(ks, &off, &ld, &rc);
                assert_true(off > 0); /* the tiers were really used */
            }
            kvstore_free(ks);
            scheduler_destroy(sched);
            llm_state_free(st);
        }
    }
    free(ref);
    free(ct);
    free(tok);
    llm_free(m);
}

/* Rows at their own positions (a serving iteration) give each sequence
 * what it gets run alone: three sequences of 24 tokens on 3 slots, fed in
 * ragged iterations (a prompt chunk of one beside single decode tokens of
 * the others, a sequence starting late, one left out), each row's logits
 * equal to the same sequence's run position by position. */
static void test_exec_rows_at_their_own_positions_equal_each_sequence_alone(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const struct llm_config *c = &m->c;
    enum { S = 3, N = 24 };
    uint32_t tok[S][N];
    for (uint32_t b = 0; b < S; b++)
        for (uint32_t p = 0; p < N; p++)
            tok[b][p] = p == 0 ? 1 : (uint32_t)(5 + 37 * p + 211 * b) % c->vocab;
    float *ref = malloc((size_t)S * N * c->vocab * sizeof *ref);
    for (uint32_t b = 0; b < S; b++) {
        struct llm_state *one;
        assert_int_equal(llm_state_create(&one, m, 1, N, &e), 0);
        for (uint32_t p = 0; p < N; p++)
            memcpy(ref + ((size_t)b * N + p) * c->vocab, llm_forward(one, &tok[b][p], p, NULL),
                   c->vocab * sizeof *ref);
        llm_state_free(one);
    }
    struct llm_state *st;
    assert_int_equal(llm_state_create(&st, m, S, N, &e), 0);
    uint32_t done[S] = {0}, it = 0;
    while (done[0] < N || done[1] < N || done[2] < N) {
        uint32_t tk[3 * N], sl[3 * N], ps[3 * N], R = 0;
        for (uint32_t b = 0; b < S; b++) {
            /* slot 1 starts at iteration 3; slot 2 sits out every third;
             * slot 0 takes chunks of 7 */
            uint32_t n = b == 0 ? 7 : 1;
            if ((b == 1 && it < 3) || (b == 2 && it % 3 == 2))
                n = 0;
            for (uint32_t k = 0; k < n && done[b] < N; k++, R++) {
                tk[R] = tok[b][done[b]];
                sl[R] = b;
                ps[R] = done[b]++;
            }
        }
        it++;
        if (R == 0)
            continue;
        /* every row's logits on even iterations, the last row of each
         * sequence's only on odd ones (what a serving iteration samples) */
        uint32_t heads[3 * N], n_head = 0;
        for (uint32_t r = 0; r < R; r++)
            if (r + 1 == R || sl[r + 1] != sl[r])
                heads[n_head++] = r;
        const int all = it % 2 == 0;
        const float *lg = llm_forward_rows(st, tk, sl, ps, R, all ? NULL : heads, n_head);
        if (!lg)
            fail_msg("%s", llm_state_error(st)->msg);
        for (uint32_t k = 0; k < (all ? R : n_head); k++) {
            uint32_t r = all ? k : heads[k];
            const float *want = ref + ((size_t)sl[r] * N + ps[r]) * c->vocab;
            for (uint32_t v = 0; v < c->vocab; v++)
                if (fabsf(lg[(size_t)k * c->vocab + v] - want[v]) > 1e-4f + 1e-4f * fabsf(want[v]))
                    fail_msg("slot %u position %u logit %u: rows %g, alone %g", sl[r], ps[r], v,
                             lg[(size_t)k * c->vocab + v], want[v]);
        }
    }
    llm_state_free(st);
    free(ref);
    llm_free(m);
}

/* The executor attends exactly what the selection chooses: on a tiny window
 * (prefill 3, decode to 16) local with 4 tokens attends pos-3..pos and
 * streaming with 6 tokens and 2 sinks attends 0, 1 and pos-3..pos, on every
 * layer of every sequence; the attention row has weight there and nowhere
 * else. During the prefill every earlier token has weight. */
static void test_exec_attends_exactly_the_selected_tokens(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const struct llm_config *c = &m->c;
    const uint32_t B = 2, N = 16, P = 3;
    float *rows = malloc((size_t)B * c->n_layers * N * sizeof *rows);
    for (int policy = 0; policy < 2; policy++) {
        struct llm_state *st;
        struct scheduler *sched = NULL;
        struct kvstore *ks = NULL;
        assert_int_equal(llm_state_create(&st, m, B, N, &e), 0);
        struct sel_params sp = {.budget_tokens = policy ? 6 : 4, .knob = {policy ? 2 : 0}}; /* sinks */
        attach_sel(st, c, B, N, P, policy ? &sel_streaming_ops : &sel_local_ops, sp,
                   &place_gpu_only_ops, N, N, 1, 0, &sched, &ks);
        for (uint32_t p = 0; p < N; p++) {
            uint32_t cur[2] = {p ? 100 + p : 1, p ? 200 + 3 * p : 1};
            if (!llm_forward(st, cur, p, rows))
                fail_msg("position %u: %s", p, llm_state_error(st)->msg);
            for (uint32_t b = 0; b < B; b++)
                for (uint32_t l = 0; l < c->n_layers; l++) {
                    const float *row = rows + ((size_t)b * c->n_layers + l) * (p + 1);
                    for (uint32_t t = 0; t <= p; t++) {
                        int want = p < P || t + 4 > p || (policy && t < 2);
                        if ((row[t] > 0) != want)
                            fail_msg("%s sequence %u layer %u position %u token %u: weight %g, "
                                     "%s", policy ? "streaming" : "local", b, l, p, t, row[t],
                                     want ? "should be attended" : "should not be");
                    }
                }
        }
        kvstore_free(ks);
        scheduler_destroy(sched);
        llm_state_free(st);
    }
    free(rows);
    llm_free(m);
}

/* A synthetic K or V value: channel c of token t, each channel with its own
 * range and offset. */
static float synth(uint32_t t, uint32_t c, float phase)
{
    return (float)(c + 1) * sinf(0.37f * (float)t + (float)c + phase) + 0.5f * (float)c - 3.0f;
}

/* INT8 storage is channel-wise asymmetric per group of 32 tokens: every
 * read-back value of a closed group is within half a quantisation step
 * ((max - min) / 255 of its channel over the group) of the stored one, some
 * are not exact (it really quantises), and the open group reads back
 * exactly; the same when a 12-slot device arena makes LRU offload tokens of
 * a group before it closes (the host copies are quantised at the close). */
static void test_exec_int8_kv_is_within_half_a_step_per_channel_and_group(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    const uint32_t N = 80, KV = 8, G = KVSTORE_INT8_GROUP;
    struct llm_config c = {.dim = 8, .kv_dim = KV, .head_dim = 4, .rope_theta = 10000.0f};
    for (int tiered = 0; tiered < 2; tiered++) {
        uint32_t dev = tiered ? 12 : N;
        struct scheduler_config sc = {.sel = &sel_dense_ops,
                                      .place = tiered ? &place_lru_ops : &place_gpu_only_ops,
                                      .n_streams = 1, .max_len = N};
        sc.place_params = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = dev,
                                                .cpu_bytes = N, .load_ns = 1,
                                                .recompute_ns = 1000, .gpu_fraction = -1};
        struct scheduler *sched;
        struct kvstore *ks;
        if (scheduler_create(&sched, &sc, NULL, &e) ||
            kvstore_create(&ks, &c, 1, N, dev, N, 1, &e))
            fail_msg("%s", e.msg);
        float k[8], v[8], act[8] = {0};
        for (uint32_t p = 0; p < N; p++) {
            for (uint32_t i = 0; i < KV; i++) {
                k[i] = synth(p, i, 0.0f);
                v[i] = synth(p, i, 1.3f);
            }
            struct scheduler_plan plan;
            scheduler_prefill(sched, 0, p, NULL, N, &plan);
            if (kvstore_apply(ks, &plan, scheduler_stream_flags(sched, 0), NULL, 0, p, k, v, act,
                              &e))
                fail_msg("%s", e.msg);
        }
        uint64_t off, ld, rc;
        kvstore_counts(ks, &off, &ld, &rc);
        assert_true(tiered ? off >= N - dev : off == 0);
        uint32_t inexact = 0;
        for (uint32_t t = 0; t < N; t++) {
            kvstore_fetch(ks, NULL, 0, 0, t, k, v); /* nothing dropped: no recomputation */
            for (uint32_t i = 0; i < KV; i++) {
                for (int which = 0; which < 2; which++) {
                    float phase = which ? 1.3f : 0.0f, got = which ? v[i] : k[i];
                    float want = synth(t, i, phase);
                    if (t >= 2 * G) { /* group 2 is still open */
                        if (got != want)
                            fail_msg("open group: token %u channel %u: %g, stored %g", t, i, got,
                                     want);
                        continue;
                    }
                    float lo = INFINITY, hi = -INFINITY;
                    for (uint32_t u = t / G * G; u < t / G * G + G; u++) {
                        lo = fminf(lo, synth(u, i, phase));
                        hi = fmaxf(hi, synth(u, i, phase));
                    }
                    float half = 0.5f * (hi - lo) / 255.0f;
                    if (fabsf(got - want) > half * 1.001f + 1e-6f)
                        fail_msg("tiered %d token %u channel %u %s: %g, stored %g, half a step %g",
                                 tiered, t, i, which ? "V" : "K", got, want, half);
                    inexact += got != want;
                }
            }
        }
        assert_true(inexact > KV * G); /* most of the closed values are rounded */
        kvstore_free(ks);
        scheduler_destroy(sched);
    }
}

/* INT8 on the real model: while a sequence's first group of 32 tokens is
 * open the logits are those of FP32 storage; after, they move, but little;
 * and placement under tiny tiers (offload, load, recompute of INT8 slots)
 * gives the logits of INT8 with everything on the device. */
static void test_exec_int8_kv_tracks_fp32_and_is_placement_invariant(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    struct alisa_err e = {{0}};
    const struct llm_config *c = &m->c;
    const uint32_t B = 2, N = 110, P = 6;
    float *ref = malloc((size_t)N * B * c->vocab * sizeof *ref);
    float *q = malloc((size_t)N * B * c->vocab * sizeof *q);
    uint64_t fetched = 0;
    /* FP32, INT8 on the device, INT8 tiered, INT8 written through to a host
     * tier that holds everything (hot-buffer: a group closes on tokens
     * already copied) */
    for (int run = 0; run < 4; run++) {
        struct llm_state *st;
        struct scheduler *sched = NULL;
        struct kvstore *ks = NULL;
        assert_int_equal(llm_state_create(&st, m, B, N, &e), 0);
        attach_sel(st, c, B, N, P, &sel_swa_ops, (struct sel_params){.sparsity = 0.5},
                   run == 2 ? &place_alisa_cache_ops : run == 3 ? &place_hot_buffer_ops
                                                                : &place_gpu_only_ops,
                   run == 2 ? 72 : run == 3 ? 56 : N, run == 2 ? 16 : N, 3, run > 0, &sched,
                   &ks);
        uint32_t cur[2];
        for (uint32_t p = 0; p < N; p++) {
            two_sequences(cur, p, P, c->vocab);
            const float *logits = llm_forward(st, cur, p, NULL);
            if (!logits)
                fail_msg("run %d position %u: %s", run, p, llm_state_error(st)->msg);
            memcpy((run == 0 ? ref : q) + (size_t)p * B * c->vocab, logits,
                   (size_t)B * c->vocab * sizeof *logits);
        }
        if (run == 1) {
            float moved = 0.0f;
            for (size_t i = 0; i < (size_t)N * B * c->vocab; i++) {
                float d = fabsf(q[i] - ref[i]);
                if (i < (size_t)(KVSTORE_INT8_GROUP - 1) * B * c->vocab && d > 1e-5f)
                    fail_msg("logit %zu of the open first group: INT8 %g, FP32 %g", i, q[i], ref[i]);
                moved = fmaxf(moved, d);
            }
            assert_true(moved > 1e-4f && moved < 0.5f);
            memcpy(ref, q, (size_t)N * B * c->vocab * sizeof *q);
        } else if (run >= 2) {
            for (size_t i = 0; i < (size_t)N * B * c->vocab; i++)
                if (fabsf(q[i] - ref[i]) > 1e-3f + 1e-3f * fabsf(ref[i]))
                    fail_msg("logit %zu: INT8 tiered %g, INT8 on the device %g", i, q[i], ref[i]);
            uint64_t off, ld, rc;
            kvstore_counts(ks, &off, &ld, &rc);
            assert_true(off > 0 && ld + rc > 0); /* each tiered run fetched */
            fetched += ld + rc;
        }
        kvstore_free(ks);
        scheduler_destroy(sched);
        llm_state_free(st);
    }
    assert_true(fetched > 0);
    free(q);
    free(ref);
    llm_free(m);
}

/* A device tier in host memory that defers its work as the CUDA backend does
 * (kvstore.h's tier-op contract): ops are queued during an apply and carried
 * out at flush in the contract's order (offloads read first; the rest,
 * write-throughs included, in order), and the offloads' and write-throughs'
 * host bytes are written only at finish, before the next apply. */
struct fake_tier {
    const struct llm_model *m;
    uint32_t dev_cap, max_len, kv, dim;
    float *dk, *dv;      /* (streams * dev_cap, kv) the "device" arena */
    float *act;          /* (streams * max_len, dim) kept layer inputs */
    float *pend;         /* (2 * 4096, kv) offloaded rows waiting for finish */
    void *pend_dst[2 * 4096];
    uint32_t n_pend;
    struct fake_op { int kind; uint32_t stream, slot, t, layer; const void *hk, *hv; void *dk, *dv;
                     const float *k, *v, *a; } ops[4096];
    uint32_t n_ops;
    int hosts;           /* host_alloc calls minus host_free calls */
};

static void *fake_host_alloc(void *ctx, size_t bytes)
{
    ((struct fake_tier *)ctx)->hosts++;
    return malloc(bytes);
}

static void fake_host_free(void *ctx, void *p)
{
    ((struct fake_tier *)ctx)->hosts--;
    free(p);
}

static struct fake_op *fake_push(struct fake_tier *f, int kind, uint32_t stream, uint32_t slot)
{
    assert_true(f->n_ops < 4096);
    struct fake_op *o = &f->ops[f->n_ops++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->stream = stream;
    o->slot = slot;
    return o;
}

static void fake_offload(void *ctx, uint32_t stream, uint32_t slot, void *hk, void *hv)
{
    struct fake_op *o = fake_push(ctx, 0, stream, slot);
    o->dk = hk;
    o->dv = hv;
}

static void fake_load(void *ctx, uint32_t stream, const void *hk, const void *hv, uint32_t slot)
{
    struct fake_op *o = fake_push(ctx, 1, stream, slot);
    o->hk = hk;
    o->hv = hv;
}

static void fake_recompute(void *ctx, uint32_t stream, uint32_t layer, uint32_t t, uint32_t slot)
{
    struct fake_op *o = fake_push(ctx, 2, stream, slot);
    o->t = t;
    o->layer = layer;
}

static void fake_store(void *ctx, uint32_t stream, uint32_t pos, uint32_t slot, const float *k,
                       const float *v, const float *act)
{
    struct fake_tier *f = ctx;
    struct fake_op *o = fake_push(f, 3, stream, slot);
    o->t = pos;
    o->k = k; /* the caller's rows stay valid until flush, as the forward's do */
    o->v = v;
    o->a = act;
}

static void fake_through(void *ctx, uint32_t stream, uint32_t slot, void *hk, void *hv)
{
    struct fake_op *o = fake_push(ctx, 4, stream, slot);
    o->dk = hk;
    o->dv = hv;
}

/* A device row to the host bytes of o, written at finish. */
static void fake_pend(struct fake_tier *f, const struct fake_op *o)
{
    size_t r = (size_t)o->stream * f->dev_cap + o->slot, row = f->kv * sizeof(float);
    assert_true(f->n_pend < 4096);
    memcpy(f->pend + (size_t)(2 * f->n_pend) * f->kv, f->dk + r * f->kv, row);
    memcpy(f->pend + (size_t)(2 * f->n_pend + 1) * f->kv, f->dv + r * f->kv, row);
    f->pend_dst[2 * f->n_pend] = o->dk;
    f->pend_dst[2 * f->n_pend++ + 1] = o->dv;
}

/* kvstore_recompute at position t, RoPE's row from llm_rope_tables. */
static void recompute_at(const struct llm_model *m, uint32_t layer, const float *act, uint32_t t,
                         float *k, float *v)
{
    const size_t half = m->c.head_dim / 2, n = ((size_t)t + 1) * half;
    float *tab = malloc(2 * n * sizeof *tab);
    assert_non_null(tab);
    llm_rope_tables(&m->c, t + 1, tab, tab + n);
    const int rope = llm_arch_info(m->c.arch)->positions == LLM_POS_ROPE;
    kvstore_recompute(m, layer, act, rope ? tab + t * half : NULL, rope ? tab + n + t * half : NULL,
                      k, v);
    free(tab);
}

static void fake_flush(struct fake_tier *f)
{
    size_t row = f->kv * sizeof(float);
    for (uint32_t i = 0; i < f->n_ops; i++) /* offloads first: their slots may be reused */
        if (f->ops[i].kind == 0)
            fake_pend(f, &f->ops[i]);
    for (uint32_t i = 0; i < f->n_ops; i++) {
        struct fake_op *o = &f->ops[i];
        size_t r = (size_t)o->stream * f->dev_cap + o->slot;
        float *k = f->dk + r * f->kv, *v = f->dv + r * f->kv;
        if (o->kind == 1) {
            memcpy(k, o->hk, row);
            memcpy(v, o->hv, row);
        } else if (o->kind == 2) {
            recompute_at(f->m, o->layer, f->act + ((size_t)o->stream * f->max_len + o->t) * f->dim,
                         o->t, k, v);
        } else if (o->kind == 3) {
            memcpy(k, o->k, row);
            memcpy(v, o->v, row);
            memcpy(f->act + ((size_t)o->stream * f->max_len + o->t) * f->dim, o->a,
                   f->dim * sizeof(float));
        } else if (o->kind == 4) {
            fake_pend(f, o);
        }
    }
    f->n_ops = 0;
}

static void fake_finish(struct fake_tier *f)
{
    for (uint32_t i = 0; i < 2 * f->n_pend; i++)
        memcpy(f->pend_dst[i], f->pend + (size_t)i * f->kv, f->kv * sizeof(float));
    f->n_pend = 0;
}

/* Applies the plans of the scheduler sc makes (S streams, N positions, a
 * P-token prompt; arenas of dev and host slots a stream) to a plain kvstore
 * and to one whose device arena is the fake tier, checking after every
 * apply that both hold the same bookkeeping and the same K and V in every
 * device and host copy; the tiered store's move counts into moves (3). */
static void tier_ops_match(struct llm_model *m, const struct scheduler_config *sc, uint32_t P,
                           uint32_t dev, uint32_t host, uint64_t moves[3])
{
    struct alisa_err e = {{0}};
    const struct llm_config *c = &m->c;
    const uint32_t S = sc->n_streams, N = sc->max_len;
    struct fake_tier *f = calloc(1, sizeof *f);
    f->m = m;
    f->dev_cap = dev;
    f->max_len = N;
    f->kv = c->kv_dim;
    f->dim = c->dim;
    f->dk = calloc((size_t)S * dev * c->kv_dim, sizeof(float));
    f->dv = calloc((size_t)S * dev * c->kv_dim, sizeof(float));
    f->act = calloc((size_t)S * N * c->dim, sizeof(float));
    f->pend = calloc((size_t)2 * 4096 * c->kv_dim, sizeof(float));
    struct kv_tier_ops ops = {.ctx = f, .host_alloc = fake_host_alloc, .host_free = fake_host_free,
                              .offload = fake_offload, .load = fake_load,
                              .recompute = fake_recompute, .store = fake_store,
                              .through = fake_through};
    struct scheduler *sched;
    struct kvstore *plain, *tiered;
    if (scheduler_create(&sched, sc, NULL, &e) ||
        kvstore_create(&plain, c, S, N, dev, host, 0, &e) ||
        kvstore_create_tiered(&tiered, c, S, N, dev, host, &ops, &e))
        fail_msg("%s", e.msg);
    for (uint32_t s = 0; s < S; s++) {
        assert_true(scheduler_stream_dev_slots(sched, s) <= dev);
        assert_true(scheduler_stream_host_slots(sched, s) <= host);
    }
    assert_int_equal(f->hosts, 2 * (int)S);
    float *k = malloc(c->kv_dim * sizeof *k), *v = malloc(c->kv_dim * sizeof *v);
    float *a = malloc(c->dim * sizeof *a), *row = malloc(N * sizeof *row);
    float *pk = malloc(c->kv_dim * sizeof *pk), *pv = malloc(c->kv_dim * sizeof *pv);
    uint32_t seed = 12345;
    for (uint32_t pos = 0; pos < N; pos++)
        for (uint32_t s = 0; s < S; s++) {
            struct scheduler_plan plan;
            if (pos < P)
                scheduler_prefill(sched, s, pos, NULL, P, &plan);
            else
                scheduler_step(sched, s, pos, NULL, &plan);
            assert_false(plan.place.oom);
            for (uint32_t i = 0; i < c->dim; i++) {
                seed = seed * 1103515245u + 12345u;
                a[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
            }
            recompute_at(m, 0, a, pos, k, v); /* a token's K and V follow from its input */
            const uint8_t *flags = scheduler_stream_flags(sched, s);
            fake_finish(f);
            if (kvstore_apply(plain, &plan, flags, m, 0, pos, k, v, a, &e) ||
                kvstore_apply(tiered, &plan, flags, m, 0, pos, k, v, a, &e))
                fail_msg("position %u stream %u: %s", pos, s, e.msg);
            fake_flush(f);
            fake_finish(f);
            for (uint32_t t = 0; t <= pos; t++) {
                int32_t slot = kvstore_dev_slot(tiered, s, t);
                int on_dev = kvstore_read(plain, s, t, pk, pv) == 0;
                assert_int_equal(on_dev, slot >= 0);
                if (on_dev) {
                    size_t r = ((size_t)s * dev + (uint32_t)slot) * c->kv_dim;
                    if (memcmp(pk, f->dk + r, c->kv_dim * sizeof(float)) ||
                        memcmp(pv, f->dv + r, c->kv_dim * sizeof(float)))
                        fail_msg("position %u stream %u: token %u's device copy differs", pos, s, t);
                }
                const void *hk, *hv, *qk, *qv;
                int h_plain = kvstore_host_row(plain, s, t, &qk, &qv) == 0;
                assert_int_equal(h_plain, kvstore_host_row(tiered, s, t, &hk, &hv) == 0);
                if (h_plain && (memcmp(hk, qk, c->kv_dim * sizeof(float)) ||
                                memcmp(hv, qv, c->kv_dim * sizeof(float))))
                    fail_msg("position %u stream %u: token %u's host copy differs", pos, s, t);
            }
            /* attention favouring a set of old tokens that changes every
             * few steps, so SWA's global set reaches back to offloaded ones */
            uint32_t hot = pos > 30 ? (pos / 5 * 17) % (pos - 20) : 0;
            for (uint32_t t = 0; t <= pos; t++)
                row[t] = (t == hot ? 30.0f : 1.0f) / (float)(pos + 30);
            if (pos < P)
                scheduler_observe_prefill(sched, s, pos, row, P);
            else
                scheduler_observe_dense(sched, s, row);
        }
    kvstore_counts(tiered, &moves[0], &moves[1], &moves[2]);
    print_message("%s: offloads %llu loads %llu recomputes %llu\n", sc->place->name,
                  (unsigned long long)moves[0], (unsigned long long)moves[1],
                  (unsigned long long)moves[2]);
    kvstore_free(tiered);
    assert_int_equal(f->hosts, 0);
    kvstore_free(plain);
    scheduler_destroy(sched);
    free(k); free(v); free(a); free(row); free(pk); free(pv);
    free(f->dk); free(f->dv); free(f->act); free(f->pend); free(f);
}

/* The same plans applied to a plain kvstore and to one whose device arena is
 * the fake tier leave the same bookkeeping and the same K and V in every
 * device and host copy, through prefill and decode (strided over 12 tokens:
 * old tokens come back as the stride changes). Under the paper's ALISA
 * rule (alpha 0.8 from position 20, beta 0.5 from 50: at most 20 tokens in
 * the device tier, 72 on the host, and a step's 12 attended tokens visiting
 * the device beside the tier): offloads, loads and recomputations. Under
 * FlexGen's split by sequences (stream 0 wholly on the device, stream 1
 * wholly on the host): loads, and new tokens written through. */
static void test_exec_tier_ops_carry_out_the_plans_of_a_plain_kvstore(void **state)
{
    (void)state;
    struct llm_model *m = load_model_or_skip();
    const uint32_t N = 90, P = 8, tier = 20, dev = tier + 12, cpu = 72, host = cpu + 12;
    struct scheduler_config sc = {.sel = &sel_strided_ops, .sel_params = {.budget_tokens = 12},
                                  .place = &place_alisa_ops, .n_streams = 2, .max_len = N};
    sc.place_params = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = tier,
                                            .cpu_bytes = cpu, .load_ns = 2, .recompute_ns = 5,
                                            .gpu_fraction = -1, .scheduled = 1,
                                            .sched = {0.8, 0.5, 20, 50}};
    uint64_t moves[3];
    tier_ops_match(m, &sc, P, dev, host, moves);
    assert_true(moves[0] > 0 && moves[1] > 0 && moves[2] > 0); /* every kind of move happened */

    struct place_params pp[2];
    for (int i = 0; i < 2; i++)
        pp[i] = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = i ? 0 : N,
                                      .cpu_bytes = i ? N : 0, .gpu_fraction = !i};
    sc.place = &place_flexgen_ops;
    sc.stream_params = pp;
    tier_ops_match(m, &sc, P, N, N, moves);
    /* stream 1: every decode step loads its attended tokens and writes its
     * new one through (N - P tokens); prefill tokens are written through too */
    assert_int_equal(moves[0], N);
    assert_true(moves[1] > 0);
    assert_int_equal(moves[2], 0);
    llm_free(m);
}

/* Asking for a backend: names are checked; without a device (or without
 * CUDA in the build) auto takes the CPU and says why, cuda fails saying
 * why, and a CUDA state cannot be made. Runs on any machine: with a device
 * present the CUDA answers are the other branch. */
static void test_exec_backend_choice_says_why_without_a_device(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    enum llm_backend kind;
    char said[320];
    assert_int_equal(llm_backend_choose("gpu", &kind, said, sizeof said, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "expected cpu, cuda or auto"));
    assert_int_equal(llm_backend_choose("cpu", &kind, said, sizeof said, &e), 0);
    assert_int_equal(kind, LLM_BACKEND_CPU);
    assert_int_equal(llm_backend_choose("auto", &kind, said, sizeof said, &e), 0);
    if (kind == LLM_BACKEND_CUDA) {
        assert_non_null(strstr(said, "cuda ("));
        return;
    }
    assert_non_null(strstr(said, "cpu (auto: "));
    e.msg[0] = 0;
    assert_int_equal(llm_backend_choose("cuda", &kind, said, sizeof said, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "--backend cuda: "));
    struct llm_model *m = load_model_or_skip();
    struct llm_state *st = NULL;
    assert_true(llm_state_create_on(&st, LLM_BACKEND_CUDA, m, 1, 16, &e) < 0);
    assert_null(st);
    assert_true(e.msg[0] != 0);
    llm_free(m);
}

/* Quest's page bounds (cpu_page_bounds) against a brute force written
 * another way: per head and page, the sum over channels of the largest
 * product q_j k_j over the page's tokens (not the sign rule), scaled and
 * softmaxed over pages in double, the heads averaged; every token's own
 * score lies under its page's bound; with one-token pages the weights are
 * cpu_attend's, bit for bit. Both head-size paths, grouped queries, a short
 * last page. */
static void test_exec_quest_page_bounds_match_a_brute_force(void **state)
{
    (void)state;
    enum { H = 4, KVH = 2, N = 37, HS_MAX = 12 };
    uint32_t seed = 12345;
    float q[H * HS_MAX], K[N * KVH * HS_MAX], kb[N * H * HS_MAX], att[H * N], w[N], w1[N],
        out[H * HS_MAX];
    for (uint32_t hs = 8; hs <= HS_MAX; hs += 4) {
        const uint32_t kvd = KVH * hs, group = H / KVH;
        for (uint32_t i = 0; i < H * hs; i++)
            q[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f * 2 - 1;
        for (uint32_t i = 0; i < N * kvd; i++)
            K[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f * 4 - 2;
        for (uint32_t page = 1; page <= 8; page += 3) {
            const uint32_t pages = (N + page - 1) / page;
            cpu_page_bounds(q, K, N, kvd, hs, group, H, page, kb, att, N, w, out);
            double ref[N] = {0};
            for (uint32_t h = 0; h < H; h++) {
                double u[N], mx = -INFINITY, z = 0;
                for (uint32_t g = 0; g < pages; g++) {
                    u[g] = 0;
                    for (uint32_t j = 0; j < hs; j++) {
                        double best = -INFINITY;
                        for (uint32_t t = g * page; t < (g + 1) * page && t < N; t++)
                            best = fmax(best, (double)q[h * hs + j] * K[t * kvd + (h / group) * hs + j]);
                        u[g] += best;
                    }
                    for (uint32_t t = g * page; t < (g + 1) * page && t < N; t++) {
                        double dot = 0;
                        for (uint32_t j = 0; j < hs; j++)
                            dot += (double)q[h * hs + j] * K[t * kvd + (h / group) * hs + j];
                        assert_true(dot <= u[g] + 1e-5);
                    }
                    u[g] /= sqrt((double)hs);
                    mx = fmax(mx, u[g]);
                }
                for (uint32_t g = 0; g < pages; g++)
                    z += exp(u[g] - mx);
                for (uint32_t g = 0; g < pages; g++)
                    ref[g] += exp(u[g] - mx) / z / H;
            }
            for (uint32_t g = 0; g < pages; g++)
                assert_true(fabs(w[g] - ref[g]) < 1e-5);
            if (page == 1) {
                cpu_attend(q, K, K, N, kvd, hs, group, H, att, N, w1, out);
                assert_memory_equal(w, w1, N * sizeof *w);
            }
        }
    }
}

/* InfiniGen's skewing basis (cpu_skew_basis): queries lying near a plane
 * spanned by two orthonormal directions give two rows within that plane,
 * orthonormal; with every channel kept the basis is a rotation, so q . k
 * is kept (what lets the executor's speculation with every channel decide
 * as the exact row). */
static void test_exec_skew_basis_finds_the_queries_directions(void **state)
{
    (void)state;
    enum { HS = 8, N = 40 };
    uint32_t seed = 99;
#define RND() ((float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f * 2 - 1)
    float u[2][HS], Q[N * HS], A[HS * HS], k[HS], q[HS];
    for (int d = 0; d < 2; d++) { /* Gram-Schmidt on two random vectors */
        double norm = 0;
        for (int i = 0; i < HS; i++)
            u[d][i] = RND();
        if (d == 1) {
            double dot = 0;
            for (int i = 0; i < HS; i++)
                dot += u[0][i] * u[1][i];
            for (int i = 0; i < HS; i++)
                u[1][i] -= (float)dot * u[0][i];
        }
        for (int i = 0; i < HS; i++)
            norm += u[d][i] * u[d][i];
        for (int i = 0; i < HS; i++)
            u[d][i] /= (float)sqrt(norm);
    }
    for (int t = 0; t < N; t++) {
        float a = 3 * RND(), b = 2 * RND();
        for (int i = 0; i < HS; i++)
            Q[t * HS + i] = a * u[0][i] + b * u[1][i] + 0.01f * RND();
    }
    assert_int_equal(cpu_skew_basis(Q, N, HS, HS, 2, A), 0);
    for (int r = 0; r < 2; r++) {
        double in = 0, norm = 0, cross = 0;
        for (int d = 0; d < 2; d++) {
            double dot = 0;
            for (int i = 0; i < HS; i++)
                dot += A[r * HS + i] * u[d][i];
            in += dot * dot;
        }
        for (int i = 0; i < HS; i++) {
            norm += A[r * HS + i] * A[r * HS + i];
            cross += A[i] * A[HS + i];
        }
        assert_true(fabs(in - 1) < 1e-3 && fabs(norm - 1) < 1e-5 && fabs(cross) < 1e-5);
    }
    assert_int_equal(cpu_skew_basis(Q, N, HS, HS, HS, A), 0);
    for (int i = 0; i < HS; i++) {
        k[i] = RND();
        q[i] = RND();
    }
    double exact = 0, rotated = 0;
    for (int i = 0; i < HS; i++)
        exact += q[i] * k[i];
    for (int r = 0; r < HS; r++) {
        double qr = 0, kr = 0;
        for (int i = 0; i < HS; i++) {
            qr += A[r * HS + i] * q[i];
            kr += A[r * HS + i] * k[i];
        }
        rotated += qr * kr;
    }
    assert_true(fabs(exact - rotated) < 1e-5);
#undef RND
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_int8_codes_of_non_finite_input_are_defined),
        cmocka_unit_test(test_exec_loads_stories260k_with_its_hash),
        cmocka_unit_test(test_exec_config_validation_names_the_size_at_fault),
        cmocka_unit_test(test_exec_tokenizer_rejects_wrong_vocabularies_and_truncation),
        cmocka_unit_test(test_exec_tokenizer_round_trips_text_and_bytes),
        cmocka_unit_test(test_exec_tokenizer_reads_only_strict_byte_pieces_as_bytes),
        cmocka_unit_test(test_exec_greedy_continuation_matches_the_independent_reference),
        cmocka_unit_test(test_exec_prefill_without_logits_gives_the_same_next_logits),
        cmocka_unit_test(test_exec_argmax_takes_the_first_largest_and_never_a_nan),
        cmocka_unit_test(test_exec_greedy_forward_equals_the_argmax_of_the_logits),
        cmocka_unit_test(test_exec_synthetic_weights),
        cmocka_unit_test(test_exec_batched_decoding_equals_one_sequence_at_a_time),
        cmocka_unit_test(test_exec_tiered_placement_leaves_the_outputs_unchanged),
        cmocka_unit_test(test_exec_tiered_placement_leaves_opt_outputs_unchanged),
        cmocka_unit_test(test_exec_tiered_placement_leaves_qwen2_outputs_unchanged),
        cmocka_unit_test(test_exec_sliding_window_under_the_scheduler_is_refused),
        cmocka_unit_test(test_exec_chunked_forward_equals_position_by_position),
        cmocka_unit_test(test_exec_rows_at_their_own_positions_equal_each_sequence_alone),
        cmocka_unit_test(test_exec_attends_exactly_the_selected_tokens),
        cmocka_unit_test(test_exec_int8_kv_is_within_half_a_step_per_channel_and_group),
        cmocka_unit_test(test_exec_int8_kv_tracks_fp32_and_is_placement_invariant),
        cmocka_unit_test(test_exec_tier_ops_carry_out_the_plans_of_a_plain_kvstore),
        cmocka_unit_test(test_exec_backend_choice_says_why_without_a_device),
        cmocka_unit_test(test_exec_quest_page_bounds_match_a_brute_force),
        cmocka_unit_test(test_exec_skew_basis_finds_the_queries_directions),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
