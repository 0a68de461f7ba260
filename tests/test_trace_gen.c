/* Synthetic generator: bit-for-bit determinism, per-layer sparsity targets
 * met, valid output (trace_check), and clear errors for impossible params. */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "trace.h"
#include "trace_gen.h"
#include "trace_stats.h"

static void small_params(struct trace_gen_params *p)
{
    trace_gen_defaults(p);
    p->n_layers = 3;
    p->n_heads = 4;
    p->n_kv_heads = 2;
    p->vocab = 500;
    p->n_seqs = 2;
    p->prompt_len = 64;
    p->gen_len = 128;
    p->seed = 11;
}

static int same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    uint8_t *x = tu_read(a, &la), *y = tu_read(b, &lb);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static void test_gen_same_seed_gives_identical_bytes_other_seed_differs(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    struct trace_gen_params p;
    small_params(&p);
    struct alisa_err e = {{0}};
    assert_int_equal(trace_gen_write(&p, tu_path(dir, "a"), &e), 0);
    assert_int_equal(trace_gen_write(&p, tu_path(dir, "b"), &e), 0);
    assert_true(same_bytes(tu_path(dir, "a"), tu_path(dir, "b")));
    p.seed = 12;
    assert_int_equal(trace_gen_write(&p, tu_path(dir, "c"), &e), 0);
    assert_false(same_bytes(tu_path(dir, "a"), tu_path(dir, "c")));
    tu_rmdir(dir);
    free(dir);
}

/* A step's token at a prompt position is the SEQ chunk's token there: the
 * steps replay the tokens drawn for the SEQ chunks (trace_gen.c keeps one
 * sequence's tokens, not every sequence's). */
static void test_gen_steps_carry_the_declared_prompt_tokens(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    struct trace_gen_params p;
    small_params(&p);
    p.n_seqs = 3;
    p.prompt_rows = p.prompt_len; /* rows from position 0 */
    struct alisa_err e = {{0}};
    assert_int_equal(trace_gen_write(&p, tu_path(dir, "t"), &e), 0);
    struct trace_reader *r;
    assert_int_equal(trace_reader_open(&r, tu_path(dir, "t"), &e), 0);
    uint32_t *declared = malloc((size_t)p.n_seqs * p.prompt_len * sizeof *declared);
    for (uint32_t s = 0; s < p.n_seqs; s++)
        memcpy(declared + (size_t)s * p.prompt_len, trace_reader_seq(r, s)->tokens,
               p.prompt_len * sizeof *declared);
    /* the sequences' prompts differ: the draws are not one sequence's repeated */
    assert_memory_not_equal(declared, declared + p.prompt_len, p.prompt_len * sizeof *declared);
    struct trace_step st;
    uint32_t checked = 0;
    int rc;
    while ((rc = trace_reader_next(r, &st, &e)) == 1)
        if (st.pos < p.prompt_len) {
            assert_int_equal(st.token, declared[(size_t)st.seq * p.prompt_len + st.pos]);
            checked++;
        }
    assert_int_equal(rc, 0);
    assert_int_equal(checked, p.n_seqs * p.prompt_len);
    free(declared);
    trace_reader_destroy(r);
    tu_rmdir(dir);
    free(dir);
}

/* trace_gen_min_bytes is a lower bound on the file, and with every row
 * dense (threshold 0) exact but for the magic, HEAD and END chunks. */
static void test_gen_min_bytes_bounds_the_file(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    struct trace_gen_params p;
    small_params(&p);
    struct alisa_err e = {{0}};
    for (int dense = 0; dense < 2; dense++)
        for (int per_head = 0; per_head < 2; per_head++) {
            p.threshold = dense ? 0.0f : 0.01f;
            p.per_head = per_head;
            assert_int_equal(trace_gen_write(&p, tu_path(dir, "t"), &e), 0);
            size_t len;
            free(tu_read(tu_path(dir, "t"), &len));
            uint64_t lo = trace_gen_min_bytes(&p);
            assert_true(lo <= len);
            if (dense)
                assert_true(len - lo < 2048); /* the preamble, HEAD and END */
            else /* not a vacuous bound: the rows' kept share, not one weight */
                assert_true(lo > len / 3);
        }
    /* the sparse rows grow with the context: 4x the positions, about 16x
     * the bytes (issue 48: --gen-len 1000000 passed a linear bound) */
    p.threshold = 0.01f;
    p.per_head = 0;
    uint64_t one = trace_gen_min_bytes(&p);
    p.gen_len *= 4;
    p.prompt_len *= 4;
    uint64_t four = trace_gen_min_bytes(&p);
    assert_true(four > 10 * one);
    p.n_seqs = 4000000000u;
    p.gen_len = 1u << 19;
    assert_true(trace_gen_min_bytes(&p) > (uint64_t)1e15);
    tu_rmdir(dir);
    free(dir);
}

static void test_gen_meets_per_layer_sparsity_targets(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    struct trace_gen_params p;
    small_params(&p);
    p.sparsity_first = 0.70;
    p.sparsity_last = 0.90;
    struct alisa_err e = {{0}};
    const char *path = tu_path(dir, "t");
    assert_int_equal(trace_gen_write(&p, path, &e), 0);
    uint64_t n_steps;
    assert_int_equal(trace_check(path, &n_steps, &e), 0);
    assert_int_equal(n_steps, 2 * 192);
    struct trace_stats *st;
    uint64_t enc[3];
    assert_int_equal(trace_stats_from_file(path, &st, enc, &e), 0);
    const double targets[3] = {0.70, 0.80, 0.90};
    for (uint32_t l = 0; l < 3; l++) {
        struct sparsity_summary s;
        trace_stats_summary(st, l, &s);
        assert_int_equal(s.rows, 2 * 128); /* decode rows only */
        if (!(s.mean > targets[l] - 0.02 && s.mean < targets[l] + 0.02))
            fail_msg("layer %u: mean sparsity %.4f, target %.2f", l, s.mean, targets[l]);
    }
    trace_stats_destroy(st);
    tu_rmdir(dir);
    free(dir);
}

static void test_gen_per_head_rows_average_to_the_stored_mean(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    struct trace_gen_params p;
    small_params(&p);
    p.per_head = 1;
    p.gen_len = 16;
    p.threshold = 0; /* dense: compare exactly up to fp16 */
    struct alisa_err e = {{0}};
    const char *path = tu_path(dir, "t");
    assert_int_equal(trace_gen_write(&p, path, &e), 0);
    assert_int_equal(trace_check(path, NULL, &e), 0);
    struct trace_reader *r;
    assert_int_equal(trace_reader_open(&r, path, &e), 0);
    struct trace_step st;
    int steps = 0;
    while (trace_reader_next(r, &st, &e) == 1) {
        assert_non_null(st.w_head);
        for (uint32_t l = 0; l < p.n_layers; l++)
            for (uint32_t i = 0; i < st.n_ctx; i++) {
                double mean = 0;
                for (uint32_t h = 0; h < p.n_heads; h++)
                    mean += st.w_head[((size_t)l * p.n_heads + h) * st.n_ctx + i];
                mean /= p.n_heads;
                double got = st.w[(size_t)l * st.n_ctx + i];
                assert_true(fabs(got - mean) <= 1e-3 * mean + 1e-7);
            }
        steps++;
    }
    assert_int_equal(steps, 2 * 80);
    trace_reader_destroy(r);
    tu_rmdir(dir);
    free(dir);
}

struct bad_case {
    const char *what;
    void (*apply)(struct trace_gen_params *p);
    const char *needle;
};

static void bad_sparsity(struct trace_gen_params *p) { p->sparsity_last = 1.0; }
static void bad_seqs(struct trace_gen_params *p) { p->n_seqs = 0; }
static void bad_threshold(struct trace_gen_params *p) { p->threshold = 0.02f; }
static void bad_heads(struct trace_gen_params *p) { p->n_kv_heads = 3; }
static void bad_alpha(struct trace_gen_params *p) { p->hh_alpha = 0; }

static void test_gen_rejects_impossible_parameters_by_name(void **state)
{
    (void)state;
    const struct bad_case cases[] = {
        {"sparsity 1", bad_sparsity, "--sparsity-last 1 not in [0, 1)"},
        {"no sequences", bad_seqs, "--seqs 0"},
        {"threshold", bad_threshold, "--threshold 0.02"},
        {"heads", bad_heads, "heads 4 not a multiple of kv heads 3"},
        {"alpha", bad_alpha, "--hh-alpha 0"},
    };
    char *dir = tu_mkdtemp();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct trace_gen_params p;
        small_params(&p);
        cases[i].apply(&p);
        struct alisa_err e = {{0}};
        assert_int_equal(trace_gen_write(&p, tu_path(dir, "x"), &e), ALISA_EINVAL);
        if (!strstr(e.msg, cases[i].needle))
            fail_msg("%s: message '%s' lacks '%s'", cases[i].what, e.msg, cases[i].needle);
    }
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gen_same_seed_gives_identical_bytes_other_seed_differs),
        cmocka_unit_test(test_gen_steps_carry_the_declared_prompt_tokens),
        cmocka_unit_test(test_gen_min_bytes_bounds_the_file),
        cmocka_unit_test(test_gen_meets_per_layer_sparsity_targets),
        cmocka_unit_test(test_gen_per_head_rows_average_to_the_stored_mean),
        cmocka_unit_test(test_gen_rejects_impossible_parameters_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
