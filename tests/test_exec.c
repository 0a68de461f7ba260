/* The CPU executor on the real stories260K checkpoint: loading and hashing,
 * the tokenizer (errors, round trip, byte fallback), greedy decoding against
 * the continuation recorded in ../shared/models/SOURCES.md by an independent
 * numpy forward pass, and batched decoding equal to single decoding.
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

#include "forward.h"
#include "model.h"
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

static void test_exec_loads_stories260k_with_its_hash(void **state)
{
    (void)state;
    if (!have_model())
        skip();
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load_llama2c(&m, model_path, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m->c.dim, 64);
    assert_int_equal(m->c.kv_dim, 32);
    assert_int_equal(m->c.head_dim, 8);
    assert_ptr_equal(m->w.wcls, m->w.token_embedding); /* tied head */
    /* SOURCES.md lists this sha256 for the upstream file */
    assert_string_equal(m->sha256,
                        "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696");
    llm_free(m);
}

static void test_exec_tokenizer_rejects_wrong_vocabularies_and_truncation(void **state)
{
    (void)state;
    if (!have_model())
        skip();
    struct tokenizer *t;
    struct alisa_err e = {{0}};
    assert_int_equal(tok_load(&t, tok_path, 1000, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "file ends at token 512 of 1000"));
    assert_int_equal(tok_load(&t, tok_path, 100, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "data after 100 tokens"));
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
        skip();
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

static void test_exec_greedy_continuation_matches_the_independent_reference(void **state)
{
    (void)state;
    if (!have_model())
        skip();
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

static void test_exec_batched_decoding_equals_one_sequence_at_a_time(void **state)
{
    (void)state;
    if (!have_model())
        skip();
    struct llm_model *m;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_load_llama2c(&m, model_path, &e), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_loads_stories260k_with_its_hash),
        cmocka_unit_test(test_exec_tokenizer_rejects_wrong_vocabularies_and_truncation),
        cmocka_unit_test(test_exec_tokenizer_round_trips_text_and_bytes),
        cmocka_unit_test(test_exec_greedy_continuation_matches_the_independent_reference),
        cmocka_unit_test(test_exec_batched_decoding_equals_one_sequence_at_a_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
