/* The Fig. 4 fidelity statistic on hand-made traces: dense is exactly
 * faithful (Spearman 1, all mass kept) on every layer; local attention with a
 * two-token budget keeps the mass a hand computation gives and ranks the
 * averages worse than dense; a prompt-only trace and a missing file are
 * errors that name the file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fidelity.h"
#include "trace.h"
#include "trace_gen.h"
#include "testutil.h"

/* Weight of token t at query position p: proportional to t + 1 (later tokens
 * weigh more). */
static float weight(uint32_t t, uint32_t p) { return (float)(t + 1) / ((p + 1) * (p + 2) / 2.0f); }

/* One sequence, one layer, prompt_len + gen_len positions of weight() rows. */
static void write_ramp(const char *path, uint32_t prompt_len, uint32_t gen_len)
{
    tu_write_toy_trace(path, prompt_len, gen_len, weight);
}

static void test_fidelity_dense_is_exact_on_every_layer(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "gen.trace");
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.n_layers = 3;
    p.prompt_len = 16;
    p.gen_len = 24;
    p.n_seqs = 2;
    struct alisa_err e = {{0}};
    if (trace_gen_write(&p, path, &e))
        fail_msg("%s", e.msg);
    struct fidelity_result r;
    struct sel_params sp = {.sparsity = 0.8};
    if (fidelity_trace(path, &sel_dense_ops, &sp, &r, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(r.n_layers, 3);
    assert_int_equal(r.decode_steps, 3 * 2 * 24);
    assert_true(fabs(r.attended_share - 1.0) < 1e-12);
    for (uint32_t l = 0; l < 3; l++) {
        assert_true(fabs(r.layers[l].spearman - 1.0) < 1e-12);
        assert_true(fabs(r.layers[l].mass_kept - 1.0) < 1e-12);
        assert_int_equal(r.layers[l].positions, 40);
    }
    fidelity_result_free(&r);
    /* a sparse policy on the same trace keeps less */
    if (fidelity_trace(path, &sel_swa_ops, &sp, &r, &e))
        fail_msg("%s", e.msg);
    assert_true(r.attended_share < 0.5);
    for (uint32_t l = 0; l < 3; l++)
        assert_true(r.layers[l].mass_kept < 1.0 && r.layers[l].mass_kept > 0.0);
    fidelity_result_free(&r);
    tu_rmdir(dir);
    free(dir);
}

static void test_fidelity_local_keeps_the_hand_computed_mass(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "ramp.trace");
    const uint32_t P = 4, G = 6;
    write_ramp(path, P, G);
    struct fidelity_result r;
    struct sel_params sp = {.budget_tokens = 2};
    struct alisa_err e = {{0}};
    if (fidelity_trace(path, &sel_local_ops, &sp, &r, &e))
        fail_msg("%s", e.msg);
    /* local with 2 tokens attends p - 1 and p: mass (p + p + 1) / sum(t + 1) */
    double want = 0;
    for (uint32_t p = P; p < P + G; p++)
        want += (weight(p - 1, p) + weight(p, p)) / (double)G;
    assert_int_equal(r.decode_steps, G);
    if (fabs(r.layers[0].mass_kept - want) > 1e-3) /* the trace stores weights in f16 */
        fail_msg("mass kept %.9f, by hand %.9f", r.layers[0].mass_kept, want);
    assert_true(fabs(r.attended_share - 2.0 * G / (double)(5 + 6 + 7 + 8 + 9 + 10)) < 1e-12);
    /* the old tokens all average 0 under local: ties, below a perfect rank */
    assert_true(r.layers[0].spearman < 0.999 && r.layers[0].spearman > 0.0);
    fidelity_result_free(&r);
    tu_rmdir(dir);
    free(dir);
}

static void test_fidelity_errors_name_the_file(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "prompt-only.trace");
    write_ramp(path, 5, 0);
    struct fidelity_result r;
    struct sel_params sp = {.sparsity = 0.5};
    struct alisa_err e = {{0}};
    assert_int_not_equal(fidelity_trace(path, &sel_swa_ops, &sp, &r, &e), 0);
    assert_non_null(strstr(e.msg, "prompt-only.trace"));
    assert_non_null(strstr(e.msg, "no decode steps"));
    assert_int_not_equal(fidelity_trace(tu_path(dir, "none.trace"), &sel_swa_ops, &sp, &r, &e), 0);
    assert_non_null(strstr(e.msg, "none.trace"));
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fidelity_dense_is_exact_on_every_layer),
        cmocka_unit_test(test_fidelity_local_keeps_the_hand_computed_mass),
        cmocka_unit_test(test_fidelity_errors_name_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
