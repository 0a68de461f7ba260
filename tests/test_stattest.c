/* stattest: KS and TOST against scipy 1.17.1 and statsmodels 0.15.0, run on
 * the same samples (values below: scipy.stats.ks_2samp(a, b).statistic,
 * scipy.stats.kstwobign.sf(x), statsmodels.stats.weightstats.ttost_ind(b,
 * a, -r m, r m, usevar="unequal")[0] with m = mean(a)), and the cases whose
 * answer is known without them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "stattest.h"

static void samples(double *a, double *b)
{
    for (int i = 0; i < 20; i++)
        a[i] = 1.0 + 0.05 * ((i * 7) % 11);
    for (int i = 0; i < 15; i++)
        b[i] = 1.1 + 0.04 * ((i * 5) % 13);
}

static void test_kolmogorov_survival_equals_scipys(void **state)
{
    (void)state;
    const double x[] = {0.3, 0.5, 0.9, 1.0, 1.2, 2.0};
    const double q[] = {0.9999906941986655, 0.9639452436648751, 0.3927307079406543,
                        0.26999967167735456, 0.11224966667072497, 0.0006709252557796953};
    for (int i = 0; i < 6; i++)
        assert_true(fabs(stattest_kolmogorov_q(x[i]) - q[i]) < 1e-12);
    assert_true(stattest_kolmogorov_q(0) == 1);
    assert_true(stattest_kolmogorov_q(10) < 1e-80);
}

static void test_ks_statistic_and_p_equal_scipys(void **state)
{
    (void)state;
    double a[20], b[15], d, p;
    struct alisa_err e = {0};
    samples(a, b);
    assert_int_equal(stattest_ks2(a, 20, b, 15, &d, &p, &e), 0);
    assert_true(fabs(d - 0.21666666666666673) < 1e-12);
    assert_true(fabs(p - 0.8158279374545471) < 1e-9);
    /* ties inside and across the samples: both CDFs pass every copy first */
    const double c[] = {1, 2, 2, 3, 4, 5}, g[] = {2, 3, 3, 6, 7};
    assert_int_equal(stattest_ks2(c, 6, g, 5, &d, &p, &e), 0);
    assert_true(fabs(d - 0.4) < 1e-12);
    assert_true(fabs(p - 0.7754489529545198) < 1e-9);
    /* a sample against itself, and two that do not overlap */
    assert_int_equal(stattest_ks2(a, 20, a, 20, &d, &p, &e), 0);
    assert_true(d == 0 && p == 1);
    const double lo[] = {1, 2, 3, 4, 5, 6, 7, 8}, hi[] = {11, 12, 13, 14, 15, 16, 17, 18};
    assert_int_equal(stattest_ks2(lo, 8, hi, 8, &d, &p, &e), 0);
    assert_true(d == 1 && p < 0.01);
}

static void test_tost_equals_statsmodels(void **state)
{
    (void)state;
    double a[20], b[15], p;
    struct alisa_err e = {0};
    samples(a, b);
    assert_int_equal(stattest_tost(a, 20, b, 15, 0.1, &p, &e), 0);
    assert_true(fabs(p - 0.19388825718657798) < 1e-9);
    assert_int_equal(stattest_tost(a, 20, b, 15, 0.05, &p, &e), 0);
    assert_true(fabs(p - 0.6002241950128058) < 1e-9);
    /* a sample against itself: equivalent at 10% (statsmodels: 0.01149...) */
    assert_int_equal(stattest_tost(a, 20, a, 20, 0.1, &p, &e), 0);
    assert_true(fabs(p - 0.011494880929594359) < 1e-9);
    /* constant samples: inside the margin or not */
    const double x[] = {2, 2, 2}, y[] = {2.1, 2.1, 2.1}, z[] = {2.5, 2.5, 2.5};
    assert_int_equal(stattest_tost(x, 3, y, 3, 0.1, &p, &e), 0);
    assert_true(p == 0);
    assert_int_equal(stattest_tost(x, 3, z, 3, 0.1, &p, &e), 0);
    assert_true(p == 1);
}

static void test_bad_samples_are_refused(void **state)
{
    (void)state;
    double d, p, one = 1, nan_[] = {1, NAN, 2}, ok[] = {1, 2, 3};
    struct alisa_err e = {0};
    assert_int_not_equal(stattest_ks2(ok, 3, ok, 0, &d, &p, &e), 0);
    assert_int_not_equal(stattest_ks2(nan_, 3, ok, 3, &d, &p, &e), 0);
    assert_non_null(strstr(e.msg, "not finite"));
    assert_int_not_equal(stattest_tost(&one, 1, ok, 3, 0.1, &p, &e), 0);
    assert_int_not_equal(stattest_tost(ok, 3, ok, 3, 0, &p, &e), 0);
    assert_int_not_equal(stattest_tost(ok, 3, nan_, 3, 0.1, &p, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kolmogorov_survival_equals_scipys),
        cmocka_unit_test(test_ks_statistic_and_p_equal_scipys),
        cmocka_unit_test(test_tost_equals_statsmodels),
        cmocka_unit_test(test_bad_samples_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
