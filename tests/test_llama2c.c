/* llama2.c checkpoint headers: the real stories260K file, the layout
 * arithmetic, and truncated or implausible files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "llama2c.h"
#include "testutil.h"

static const char *real_model(void)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", tu_models_dir());
    if (access(path, R_OK) != 0) {
        if (tu_ci())
            fail_msg("CI=true and the model %s is missing", path);
        return NULL;
    }
    return path;
}

static void test_llama2c_reads_stories260k_header_and_size(void **state)
{
    (void)state;
    const char *path = real_model();
    if (!path)
        tu_skip();
    struct llama2c_header h;
    struct alisa_err e = {{0}};
    if (llama2c_read_header(path, &h, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(h.dim, 64);
    assert_int_equal(h.hidden_dim, 172);
    assert_int_equal(h.n_layers, 5);
    assert_int_equal(h.n_heads, 8);
    assert_int_equal(h.n_kv_heads, 4);
    assert_int_equal(h.vocab, 512);
    assert_int_equal(h.seq_len, 512);
    assert_true(h.shared_classifier);
    assert_int_equal(h.file_bytes, 1056540); /* SOURCES.md */
}

static void test_llama2c_truncated_or_implausible_files_are_rejected(void **state)
{
    (void)state;
    const char *path = real_model();
    if (!path)
        tu_skip();
    char *dir = tu_mkdtemp();
    const char *cut = tu_path(dir, "cut.bin");
    struct llama2c_header h;
    struct alisa_err e = {{0}};
    tu_copy(path, cut, 1056540 - 4);
    assert_int_equal(llama2c_read_header(cut, &h, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "file is 1056536 bytes, its header implies 1056540"));
    tu_copy(path, cut, 10);
    assert_int_equal(llama2c_read_header(cut, &h, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "too short for the 28-byte llama2.c header"));
    /* n_heads (byte 12) = 0 */
    tu_copy(path, cut, SIZE_MAX);
    size_t len;
    uint8_t *b = tu_read(cut, &len);
    memset(b + 12, 0, 4);
    tu_write(cut, b, len);
    assert_int_equal(llama2c_read_header(cut, &h, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "byte 12: header field n_heads = 0"));
    /* n_heads = 7 does not divide dim 64 */
    b[12] = 7;
    tu_write(cut, b, len);
    assert_int_equal(llama2c_read_header(cut, &h, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "dim 64 is not a multiple of n_heads 7"));
    free(b);
    assert_int_equal(llama2c_read_header(tu_path(dir, "none.bin"), &h, &e), ALISA_EIO);
    tu_rmdir(dir);
    free(dir);
}

static void test_llama2c_layout_counts_an_unshared_classifier(void **state)
{
    (void)state;
    struct llama2c_header h = {.dim = 8, .hidden_dim = 16, .n_layers = 1, .n_heads = 2,
                               .n_kv_heads = 1, .vocab = 10, .seq_len = 4,
                               .shared_classifier = 1};
    struct alisa_err e = {{0}};
    assert_int_equal(llama2c_layout(&h, &e), 0);
    /* emb 80, rms 8, wq 64, wk+wv 2*8*4, wo 64, rms 8, ffn 3*8*16, final 8 */
    uint64_t shared = 80 + 8 + 64 + 64 + 64 + 8 + 384 + 8;
    assert_int_equal(h.n_params, shared);
    assert_int_equal(h.file_bytes, 28 + 4 * (shared + 4 * 4));
    h.shared_classifier = 0;
    assert_int_equal(llama2c_layout(&h, &e), 0);
    assert_int_equal(h.n_params, shared + 80);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_reads_stories260k_header_and_size),
        cmocka_unit_test(test_llama2c_truncated_or_implausible_files_are_rejected),
        cmocka_unit_test(test_llama2c_layout_counts_an_unshared_classifier),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
