/* The generator fitted to recorded attention (sim/tracefit.h): the row
 * statistics of a hand-made trace worked out here, the paper's trend worked
 * by hand, and a fit that must find the parameters a synthetic trace was
 * generated with. */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "trace.h"
#include "tracefit.h"

/* Half the mass on token 0, half on the newest token. */
static float sink_and_self(uint32_t t, uint32_t p)
{
    if (p == 0)
        return 1.0f;
    return t == 0 || t == p ? 0.5f : 0.0f;
}

static void test_summary_of_a_hand_made_trace(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "s.trace");
    tu_write_toy_trace(path, 8, 40, sink_and_self); /* decode rows at positions 8..47 */
    struct alisa_err e = {{0}};
    struct tracefit_summary s;
    if (tracefit_summarise(path, &s, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(s.n_layers, 1);
    assert_int_equal(s.prompt_len, 8);
    assert_int_equal(s.gen_len, 40);
    /* token 0 is never among the last 8 (ages 8..47) but always among the
     * last 64; the newest token is never a sink */
    assert_true(fabs(s.m[TRACEFIT_SINK_MASS] - 0.5) < 1e-6);
    assert_true(fabs(s.m[TRACEFIT_RECENT8] - 0.5) < 1e-6);
    assert_true(fabs(s.m[TRACEFIT_RECENT64] - 1.0) < 1e-6);
    assert_true(fabs(s.token_mass[0] - 0.5) < 1e-6 && s.token_mass[1] == 0);
    assert_int_equal(s.n_sinks, 1);
    /* a row at pos has pos + 1 weights, 2 of them not below 1% of the max */
    double mean = 0, sq = 0;
    for (uint32_t pos = 8; pos < 48; pos++) {
        double v = (double)(pos - 1) / (pos + 1);
        mean += v / 40;
        sq += v * v / 40;
    }
    assert_true(fabs(s.sparsity[0] - mean) < 1e-9);
    assert_true(fabs(s.jitter - sqrt(sq - mean * mean)) < 1e-6);
    /* the selection's statistics (selstats.h, tested there) are shares */
    for (int k = 0; k < TRACEFIT_SINK_MASS; k++)
        assert_true(s.m[k] >= 0 && s.m[k] <= 1);
    tu_rmdir(dir);
    free(dir);
}

/* Half on the newest token, half on the one before: no sink. */
static float recent_only(uint32_t t, uint32_t p)
{
    if (p == 0)
        return 1.0f;
    return t + 1 == p || t == p ? 0.5f : 0.0f;
}

static void test_no_mass_on_token_0_is_no_sink(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "r.trace");
    tu_write_toy_trace(path, 8, 40, recent_only);
    struct alisa_err e = {{0}};
    struct tracefit_summary s;
    if (tracefit_summarise(path, &s, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(s.n_sinks, 0);
    assert_true(s.m[TRACEFIT_SINK_MASS] == 0);
    assert_true(fabs(s.m[TRACEFIT_RECENT8] - 1.0) < 1e-6);
    tu_rmdir(dir);
    free(dir);
}

/* Two layers: the first as sink_and_self, the second uniform (no weight
 * below 1% of its max: sparsity 0 in every row). */
static void test_jitter_is_the_spread_about_each_layers_mean(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "two.trace");
    struct trace_header h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "two");
    h.n_layers = 2;
    h.n_heads = h.n_kv_heads = 2;
    h.hidden = 4;
    h.vocab = 10;
    h.n_seqs = 1;
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    assert_int_equal(trace_writer_open(&w, path, &h, &e), 0);
    uint32_t toks[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(trace_writer_seq(w, 0, 8, 40, 0, toks, &e), 0);
    float rows[2 * 48];
    for (uint32_t pos = 0; pos < 48; pos++) {
        for (uint32_t t = 0; t <= pos; t++) {
            rows[t] = sink_and_self(t, pos);
            rows[pos + 1 + t] = 1.0f / (pos + 1);
        }
        assert_int_equal(trace_writer_step(w, 0, pos, 1, rows, NULL, &e), 0);
    }
    assert_int_equal(trace_writer_close(w, &e), 0);
    struct tracefit_summary s;
    if (tracefit_summarise(path, &s, &e))
        fail_msg("%s", e.msg);
    double mean = 0, sq = 0;
    for (uint32_t pos = 8; pos < 48; pos++) {
        double v = (double)(pos - 1) / (pos + 1);
        mean += v / 40;
        sq += v * v / 40;
    }
    assert_true(fabs(s.sparsity[0] - mean) < 1e-9 && s.sparsity[1] == 0);
    /* the mean of the two layers' variances: layer 1's is 0 */
    assert_true(fabs(s.jitter - sqrt((sq - mean * mean) / 2)) < 1e-6);
    tu_rmdir(dir);
    free(dir);
}

static void test_a_trace_without_lag_32_is_refused_by_name(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "short.trace");
    tu_write_toy_trace(path, 8, 20, sink_and_self);
    struct alisa_err e = {{0}};
    struct tracefit_summary s;
    assert_int_not_equal(tracefit_summarise(path, &s, &e), 0);
    assert_non_null(strstr(e.msg, "short.trace"));
    assert_non_null(strstr(e.msg, "kept_after_32"));
    tu_rmdir(dir);
    free(dir);
}

static void test_the_papers_trend_by_hand(void **state)
{
    (void)state;
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.n_profile = 2;
    p.profile[0] = 0.85;
    p.profile[1] = 0.40;
    /* 6.7e9 to 30e9 is the trend itself: 3x less dense */
    assert_true(fabs(tracefit_scale(&p, 6.7e9, 30e9) - 1.0 / 3) < 1e-12);
    assert_true(fabs(p.profile[0] - 0.95) < 1e-12 && fabs(p.profile[1] - 0.80) < 1e-12);
    /* below 6.7e9 the fitted profile stands: 1e8 to 5e9 changes nothing,
     * 1e8 to 30e9 is as 6.7e9 to 30e9 */
    assert_true(tracefit_scale(&p, 1e8, 5e9) == 1.0);
    /* a target smaller than the fitted model: never denser */
    assert_true(tracefit_scale(&p, 1.75e11, 6.7e9) == 1.0);
    assert_true(fabs(p.profile[0] - 0.95) < 1e-12);
    struct trace_gen_params q;
    trace_gen_defaults(&q); /* the line 0.80 .. 0.95 becomes a 2-knot profile */
    assert_true(fabs(tracefit_scale(&q, 1e8, 30e9) - 1.0 / 3) < 1e-12);
    assert_int_equal(q.n_profile, 2);
    assert_true(fabs(q.profile[0] - (1 - 0.2 / 3)) < 1e-12);
    assert_true(fabs(q.profile[1] - (1 - 0.05 / 3)) < 1e-12);
    /* the profile is read by depth: layer 1 of 3 sits halfway */
    q.n_layers = 3;
    assert_true(fabs(trace_gen_layer_target(&q, 1) - (q.profile[0] + q.profile[1]) / 2) < 1e-12);
}

/* A trace generated with known parameters; the fit starts at the defaults
 * and must come back to them in the statistics and in the directly read
 * parameters. */
static void test_fit_finds_a_known_generator(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "known.trace");
    struct trace_gen_params k;
    trace_gen_defaults(&k);
    k.n_layers = 3;
    k.n_heads = k.n_kv_heads = 2;
    k.prompt_len = 16;
    k.gen_len = 96;
    k.n_seqs = 2;
    k.n_sinks = 1;
    k.sink_logit = 6;
    k.recency_logit = 4;
    k.recency_tokens = 4;
    k.noise = 1.0;
    k.hh_drift = 0.01;
    k.n_profile = 2;
    k.profile[0] = 0.5;
    k.profile[1] = 0.9;
    k.sparsity_jitter = 0.01;
    k.threshold = 0.01f;
    k.seed = 7;
    struct alisa_err e = {{0}};
    if (trace_gen_write(&k, path, &e))
        fail_msg("%s", e.msg);
    struct tracefit_options o;
    tracefit_defaults(&o);
    o.tmpdir = dir;
    o.max_iter = 60;
    o.sim_seqs = 2;
    struct tracefit_result r;
    const char *paths[] = {path};
    if (tracefit_fit(paths, 1, &o, &r, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(r.p.n_sinks, 1);
    assert_int_equal(r.p.n_layers, 3);
    assert_int_equal(r.p.n_profile, 3);
    for (uint32_t l = 0; l < 3; l++) /* the rows hit their targets up to discreteness */
        assert_true(fabs(r.p.profile[l] - trace_gen_layer_target(&k, l)) < 0.03);
    if (!(r.objective < 0.1 * r.objective_start))
        fail_msg("distance %g from %g at the defaults", r.objective, r.objective_start);
    for (int m = 0; m < TRACEFIT_N; m++)
        if (fabs(r.fitted.m[m] - r.target.m[m]) > 0.05)
            fail_msg("%s: fitted %g, recorded %g", tracefit_moment_name[m], r.fitted.m[m],
                     r.target.m[m]);
    /* the sinks' extra logit is found (well above the defaults' 3), and the
     * noise (the defaults' 0.5 is half of it) */
    if (!(r.p.sink_logit > 4.5 && r.p.sink_logit < 8))
        fail_msg("sink-logit %g, generated with 6", r.p.sink_logit);
    if (!(r.p.noise > 0.75 && r.p.noise < 1.33))
        fail_msg("noise %g, generated with 1", r.p.noise);
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_of_a_hand_made_trace),
        cmocka_unit_test(test_no_mass_on_token_0_is_no_sink),
        cmocka_unit_test(test_jitter_is_the_spread_about_each_layers_mean),
        cmocka_unit_test(test_a_trace_without_lag_32_is_refused_by_name),
        cmocka_unit_test(test_the_papers_trend_by_hand),
        cmocka_unit_test(test_fit_finds_a_known_generator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
