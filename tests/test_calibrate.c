/* The CPU calibration microbenchmarks on the real stories260K model: every
 * figure is finite, and the rates and costs are positive and below physical
 * bounds (no 2-core machine sustains 10 TFLOP/s or 10 TB/s), so a unit or
 * sign slip shows. Repeatability is printed by `alisa calibrate`, not
 * asserted (timings are benchmarks, not tests). Under CI=true a missing
 * model fails instead of skipping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "calibrate.h"
#include "fit.h"
#include "model.h"
#include "testutil.h"

static void test_calibrate_figures_are_finite_and_plausible(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", tu_models_dir());
    if (access(path, R_OK) != 0) {
        if (tu_ci())
            fail_msg("CI=true and %s is missing", path);
        tu_skip();
    }
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load(&m, path, &e))
        fail_msg("%s", e.msg);
    double f[CALIB_N];
    if (calib_measure(m, NULL, LLM_BACKEND_CPU, f, &e))
        fail_msg("%s", e.msg);
    for (int i = 0; i < CALIB_N; i++) {
        print_message("%s = %g\n", calib_name(i), f[i]);
        if (!isfinite(f[i]))
            fail_msg("%s is %g", calib_name(i), f[i]);
    }
    assert_true(f[CALIB_GEMM_GFLOPS] > 0 && f[CALIB_GEMM_GFLOPS] < 1e4);
    assert_true(f[CALIB_GEMV_GBPS] > 0 && f[CALIB_GEMV_GBPS] < 1e4);
    assert_true(f[CALIB_MEM_GBPS] > 0 && f[CALIB_MEM_GBPS] < 1e4);
    assert_true(f[CALIB_COPY_GBPS] > 0 && f[CALIB_COPY_GBPS] < 1e4);
    assert_true(fabs(f[CALIB_COPY_LATENCY_US]) < 1e3);
    assert_true(f[CALIB_ATTN_NS_PER_TOKEN] > 0 && f[CALIB_ATTN_NS_PER_TOKEN] < 1e6);
    assert_true(f[CALIB_RECOMPUTE_NS] > 0 && f[CALIB_RECOMPUTE_NS] < 1e7);
    assert_true(f[CALIB_STREAM_GBPS] > 0 && f[CALIB_STREAM_GBPS] < 1e4);
    assert_true(f[CALIB_STREAM_GFLOPS] > 0 && f[CALIB_STREAM_GFLOPS] < 1e4);
    assert_true(f[CALIB_ATTN_NS_FIXED] >= 0 && f[CALIB_ATTN_NS_FIXED] < 1e7);
    assert_true(f[CALIB_ATTN_NS_LAYER] >= 0 && f[CALIB_ATTN_NS_LAYER] < 1e7);
    /* ns per weight byte: above 1e-4 (10 TB/s), below 1e3 (1 MB/s) */
    for (int i = CALIB_WGEMM_R1; i <= CALIB_HEAD_R32; i++)
        if (!(f[i] > 1e-4 && f[i] < 1e3))
            fail_msg("%s = %g ns per byte", calib_name(i), f[i]);
    /* the scheduler's three terms by selection: none negative (a term the
     * runs do not show is left at 0), not all 0 */
    for (int i = CALIB_SCHED_FIRST; i <= CALIB_SCHED_LAST; i++) {
        if (!(f[i] >= 0 && f[i] < 1e6))
            fail_msg("%s = %g ns per token", calib_name(i), f[i]);
        int k = i - CALIB_SCHED_FIRST;
        if (!(f[i] + f[CALIB_SCHED_LAYER_FIRST + k] + f[CALIB_SCHED_STREAM_FIRST + k] > 0))
            fail_msg("%s: no scheduler time", calib_sched_policies[k]);
    }
    /* fixed parts per layer and step: never negative, under a millisecond */
    for (int i = CALIB_SCHED_LAYER_FIRST; i <= CALIB_SCHED_LAYER_LAST; i++)
        if (!(f[i] >= 0 && f[i] < 1e6))
            fail_msg("%s = %g ns per layer", calib_name(i), f[i]);
    for (int i = CALIB_SCHED_STREAM_FIRST; i <= CALIB_SCHED_STREAM_LAST; i++)
        if (!(f[i] >= 0 && f[i] < 1e6))
            fail_msg("%s = %g ns per stream", calib_name(i), f[i]);
    /* a retired token: dense retires none, h2o's first step evicts most of
     * the prompt, which shows */
    for (int i = CALIB_SCHED_RETIRED_FIRST; i <= CALIB_SCHED_RETIRED_LAST; i++)
        if (!(f[i] >= 0 && f[i] < 1e6))
            fail_msg("%s = %g ns per retired token", calib_name(i), f[i]);
    assert_true(f[CALIB_SCHED_RETIRED_FIRST] == 0);
    assert_true(f[CALIB_SCHED_RETIRED_FIRST + 5] > 0);
    /* attention per attended token by batch, dense and SWA's scattered
     * reads: one sequence's KV always fits the bound, so batch 1 ran */
    for (int i = 0; i < CALIB_ATTN_N; i++)
        if (!(f[CALIB_ATTN_BATCH_FIRST + i] < 1e6 && f[CALIB_ATTN_SPARSE_FIRST + i] < 1e6))
            fail_msg("batch %u: %g and %g ns per attended token", calib_attn_batch[i],
                     f[CALIB_ATTN_BATCH_FIRST + i], f[CALIB_ATTN_SPARSE_FIRST + i]);
    assert_true(f[CALIB_ATTN_BATCH_FIRST] > 0 && f[CALIB_ATTN_SPARSE_FIRST] > 0);
    /* the arenas' three terms: none negative (the fit leaves a term out at
     * 0 when the runs show none of it), not all 0 (the bookkeeping takes
     * time) */
    assert_true(f[CALIB_KV_NS_PER_TOKEN] >= 0 && f[CALIB_KV_NS_PER_TOKEN] < 1e5);
    assert_true(f[CALIB_KV_NS_PER_LAYER] >= 0 && f[CALIB_KV_NS_PER_LAYER] < 1e6);
    assert_true(f[CALIB_KV_NS_PER_STREAM] >= 0 && f[CALIB_KV_NS_PER_STREAM] < 1e6);
    assert_true(f[CALIB_KV_NS_PER_TOKEN] + f[CALIB_KV_NS_PER_STREAM] + f[CALIB_KV_NS_PER_LAYER] > 0);
    llm_free(m);
}

/* The fits recover known terms exactly, and fall back as fit.h says. */
static void test_fits_recover_known_terms(void **state)
{
    (void)state;
    double a, s, b;
    /* t = 300 + 16 ns x: two points */
    fit_two_terms(10, 460, 100, 1900, &a, &b);
    assert_true(fabs(a - 300) < 1e-9 && fabs(b - 16) < 1e-9);
    /* a negative intercept: all of it per unit, through the second point */
    fit_two_terms(10, 100, 100, 1900, &a, &b);
    assert_true(a == 0 && fabs(b - 19) < 1e-9);
    /* t = 40 + B (2000 + 5 c), the scheduler's three runs */
    const double B[3] = {1, 16, 4}, c[3] = {54.5, 54.5, 150.5};
    double t[3];
    for (int i = 0; i < 3; i++)
        t[i] = 40 + B[i] * (2000 + 5 * c[i]);
    fit_three_terms(B, c, t, &a, &s, &b);
    assert_true(fabs(a - 40) < 1e-6 && fabs(s - 2000) < 1e-6 && fabs(b - 5) < 1e-9);
    /* a per-stream cost that would come out negative: none; the other two
     * terms fitted to all three points, no worse than the old fallback (the
     * two-point line through the first two) */
    for (int i = 0; i < 3; i++)
        t[i] = 40 + B[i] * (-500 + 30 * c[i]);
    fit_three_terms(B, c, t, &a, &s, &b);
    double a2, b2, r = 0, r2 = 0;
    fit_two_terms(B[0] * c[0], t[0], B[1] * c[1], t[1], &a2, &b2);
    for (int i = 0; i < 3; i++) {
        r += pow(t[i] - (a + B[i] * (s + c[i] * b)), 2);
        r2 += pow(t[i] - (a2 + B[i] * c[i] * b2), 2);
    }
    assert_true(s == 0 && a >= 0 && b > 0);
    if (!(r < r2))
        fail_msg("residual %g, the two-point line's %g", r, r2);
    /* no fixed part, and the 16-sequence point 2% high (the arenas'
     * bookkeeping as SmolLM2 measured it: per stream 1.8 us, per token 4.3
     * ns): the exact solve gives a fixed part of -43 ns; the fit sets it to
     * 0 and keeps the other two near (least squares: 1864 and 3.9; the old
     * fallback, the two-point line, put it all per token: 38 ns) */
    for (int i = 0; i < 3; i++)
        t[i] = B[i] * (1800 + 4.3 * c[i]) * (i == 1 ? 1.02 : 1);
    fit_three_terms(B, c, t, &a, &s, &b);
    if (!(a == 0 && fabs(s - 1800) < 0.05 * 1800 && fabs(b - 4.3) < 0.15 * 4.3))
        fail_msg("a %g, s %g, b %g", a, s, b);
    /* singular: the same context everywhere */
    const double same[3] = {54.5, 54.5, 54.5};
    for (int i = 0; i < 3; i++)
        t[i] = 40 + B[i] * 5 * same[i];
    fit_three_terms(B, same, t, &a, &s, &b);
    assert_true(s == 0 && fabs(a - 40) < 1e-6 && fabs(b - 5) < 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fits_recover_known_terms),
        cmocka_unit_test(test_calibrate_figures_are_finite_and_plausible),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
