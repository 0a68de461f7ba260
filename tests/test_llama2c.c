/* llama2.c checkpoint headers: the real stories260K file, the layout
 * arithmetic, and truncated or implausible files; the loader (model.h) on
 * files written here, refusing shapes the forward pass cannot run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "llama2c.h"
#include "model.h"
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

/* A llama2.c checkpoint of shape h, every weight 0. */
static void write_checkpoint(const char *path, struct llama2c_header h)
{
    struct alisa_err e = {{0}};
    if (llama2c_layout(&h, &e))
        fail_msg("%s", e.msg);
    int32_t v[7] = {(int32_t)h.dim,     (int32_t)h.hidden_dim, (int32_t)h.n_layers,
                    (int32_t)h.n_heads, (int32_t)h.n_kv_heads,
                    h.shared_classifier ? (int32_t)h.vocab : -(int32_t)h.vocab,
                    (int32_t)h.seq_len};
    uint8_t *b = calloc(1, h.file_bytes);
    assert_non_null(b);
    memcpy(b, v, sizeof v);
    tu_write(path, b, h.file_bytes);
    free(b);
}

/* Issue 48: the llama2.c loader took a head size of 1 (empty RoPE tables,
 * which cpu_rope read past) and an odd one (pairs across heads); refused
 * now by llm_config_validate, naming the file and the sizes. The first row,
 * a shape that runs, shows the files written here load. */
static void test_llama2c_loader_refuses_a_shape_the_forward_pass_cannot_run(void **state)
{
    (void)state;
    static const struct {
        uint32_t dim, heads, kv_heads;
        const char *says; /* NULL: loads */
    } rows[] = {
        {8, 2, 1, NULL},
        {8, 8, 8, "bad.bin: head size 1 (dim 8 / 8 heads): must be even and at least 2"},
        {12, 4, 2, "bad.bin: head size 3 (dim 12 / 4 heads): must be even and at least 2"},
    };
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "bad.bin");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct llama2c_header h = {.dim = rows[i].dim, .hidden_dim = 16, .n_layers = 1,
                                   .n_heads = rows[i].heads, .n_kv_heads = rows[i].kv_heads,
                                   .vocab = 4, .seq_len = 4, .shared_classifier = 1};
        write_checkpoint(path, h);
        struct llm_model *m;
        struct alisa_err e = {{0}};
        int rc = llm_load_llama2c(&m, path, &e);
        if (!rows[i].says) {
            if (rc)
                fail_msg("%s", e.msg);
            llm_free(m);
            continue;
        }
        assert_int_equal(rc, ALISA_ECORRUPT);
        assert_null(m);
        if (!strstr(e.msg, rows[i].says))
            fail_msg("error '%s' does not say '%s'", e.msg, rows[i].says);
    }
    tu_rmdir(dir);
    free(dir);
}

/* Issue 48: a weight that is not finite is refused at load, naming its
 * byte and its index among the weights; the classifier's offset skips the
 * RoPE tables before it. */
static void test_llama2c_loader_refuses_a_weight_that_is_not_finite(void **state)
{
    (void)state;
    struct llama2c_header h = {.dim = 8, .hidden_dim = 16, .n_layers = 1, .n_heads = 2,
                               .n_kv_heads = 1, .vocab = 4, .seq_len = 4, .shared_classifier = 0};
    struct alisa_err e = {{0}};
    assert_int_equal(llama2c_layout(&h, &e), 0);
    /* the classifier: the file's last 4 x 8 floats, the last 32 weights */
    const struct {
        size_t byte;
        uint64_t weight;
        float value;
    } rows[] = {
        {28 + 4 * 9, 9, NAN},
        {28 + 4 * 40, 40, INFINITY},
        {(size_t)h.file_bytes - 4 * 32, h.n_params - 32, -INFINITY},
    };
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "bad.bin");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        write_checkpoint(path, h);
        size_t len;
        uint8_t *b = tu_read(path, &len);
        memcpy(b + rows[i].byte, &rows[i].value, 4);
        tu_write(path, b, len);
        free(b);
        struct llm_model *m;
        assert_int_equal(llm_load_llama2c(&m, path, &e), ALISA_ECORRUPT);
        assert_null(m);
        char says[96];
        snprintf(says, sizeof says, "bad.bin: byte %zu: weight %llu is not finite", rows[i].byte,
                 (unsigned long long)rows[i].weight);
        if (!strstr(e.msg, says))
            fail_msg("error '%s' does not say '%s'", e.msg, says);
    }
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_reads_stories260k_header_and_size),
        cmocka_unit_test(test_llama2c_truncated_or_implausible_files_are_rejected),
        cmocka_unit_test(test_llama2c_layout_counts_an_unshared_classifier),
        cmocka_unit_test(test_llama2c_loader_refuses_a_shape_the_forward_pass_cannot_run),
        cmocka_unit_test(test_llama2c_loader_refuses_a_weight_that_is_not_finite),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
