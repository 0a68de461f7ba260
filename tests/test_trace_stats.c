/* Sparsity statistics on hand-built rows and a hand-built trace whose
 * per-row sparsities, means and quartiles are known in advance. */
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
#include "trace_stats.h"

static void test_row_sparsity_counts_weights_strictly_below_the_cutoff(void **state)
{
    (void)state;
    const float row[] = {1.0f, 0.005f, 0.02f, 0.0f, 0.01f};
    /* cutoff 0.01: 0.005 and 0 are below, 0.01 itself is not */
    assert_true(stats_row_sparsity(row, 5, 0.01) == 2.0 / 5);
    assert_true(stats_row_sparsity(row, 1, 0.01) == 0.0);
    assert_true(stats_row_sparsity(row, 0, 0.01) == 0.0);
    const float flat[] = {0.25f, 0.25f, 0.25f, 0.25f};
    assert_true(stats_row_sparsity(flat, 4, 0.01) == 0.0);
}

/* A trace of one layer and one sequence, prompt 4, generated 4: decode rows
 * at positions 4..7 (n = 5..8) with exactly k(pos) tiny weights each. */
static const uint32_t tiny_count[4] = {1, 2, 4, 6}; /* sparsities 1/5 2/6 4/7 6/8 */

static void write_known(const char *path)
{
    struct trace_header h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "known");
    h.n_layers = 1;
    h.n_heads = 1;
    h.n_kv_heads = 1;
    h.vocab = 10;
    h.n_seqs = 1;
    h.threshold = 0;
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    assert_int_equal(trace_writer_open(&w, path, &h, &e), 0);
    uint32_t toks[4] = {1, 2, 3, 4};
    assert_int_equal(trace_writer_seq(w, 0, 4, 4, 2, toks, &e), 0);
    float row[8];
    for (uint32_t pos = 2; pos < 8; pos++) {
        uint32_t n = pos + 1;
        /* prompt rows (pos 2, 3) are all tiny but one: they must be ignored */
        uint32_t k = pos < 4 ? n - 1 : tiny_count[pos - 4];
        for (uint32_t i = 0; i < n; i++)
            row[i] = i < k ? 1e-4f : 0.0f;
        float big = (1.0f - 1e-4f * k) / (n - k);
        for (uint32_t i = k; i < n; i++)
            row[i] = big;
        uint32_t tok = pos < 4 ? toks[pos] : 1;
        assert_int_equal(trace_writer_step(w, 0, pos, tok, row, NULL, &e), 0);
    }
    assert_int_equal(trace_writer_close(w, &e), 0);
}

static void test_stats_summary_of_a_known_trace_matches_hand_computation(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "k.trace");
    write_known(path);
    struct alisa_err e = {{0}};
    struct trace_stats *st;
    uint64_t enc[3];
    if (trace_stats_from_file(path, &st, enc, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(enc[TRACE_ROW_DENSE], 6);
    double v[4] = {1.0 / 5, 2.0 / 6, 4.0 / 7, 6.0 / 8}; /* sorted already */
    struct sparsity_summary s;
    trace_stats_summary(st, 0, &s);
    assert_int_equal(s.rows, 4);
    assert_true(fabs(s.mean - (v[0] + v[1] + v[2] + v[3]) / 4) < 1e-12);
    assert_true(fabs(s.min - v[0]) < 1e-12 && fabs(s.max - v[3]) < 1e-12);
    /* GSL quantiles interpolate at (n-1)*q: 0.75, 1.5, 2.25 */
    assert_true(fabs(s.q25 - (v[0] + 0.75 * (v[1] - v[0]))) < 1e-12);
    assert_true(fabs(s.median - (v[1] + v[2]) / 2) < 1e-12);
    assert_true(fabs(s.q75 - (v[2] + 0.25 * (v[3] - v[2]))) < 1e-12);
    struct sparsity_summary all;
    trace_stats_summary(st, UINT32_MAX, &all);
    assert_true(all.mean == s.mean && all.rows == 4);
    trace_stats_destroy(st);
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_sparsity_counts_weights_strictly_below_the_cutoff),
        cmocka_unit_test(test_stats_summary_of_a_known_trace_matches_hand_computation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
