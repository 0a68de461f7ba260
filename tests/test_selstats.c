/* Selection statistics (sim/selstats.h) on hand-made steps whose global
 * picks, persistence, ages, old and sink shares are worked out here. */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "selstats.h"

/* a row of pos + 1 weights: 1 at the ids, 0 elsewhere */
static void row_of(float *row, uint32_t pos, const uint32_t *ids, uint32_t n)
{
    memset(row, 0, (pos + 1) * sizeof *row);
    for (uint32_t i = 0; i < n; i++)
        row[ids[i]] = 1.0f;
}

static void near(double a, double b)
{
    if (!(fabs(a - b) < 1e-9))
        fail_msg("%.12g != %.12g", a, b);
}

static void test_picks_persistence_ages_and_shares(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct selstats *s;
    const struct selstats_params p = {.alpha = 0.5, .sinks = 2};
    assert_int_equal(selstats_create(&s, 1, 1, 64, &p, &e), 0);
    float row[64];
    /* prompt 8, gen 40: position 10 is decode step 2, bin 0 (2 * 4 / 40);
     * local window 2 -> globals are ids below 9: {0, 3, 7} */
    const uint32_t a[] = {0, 3, 7, 9, 10};
    row_of(row, 10, a, 5);
    selstats_add(s, 0, 0, 10, 8, 40, a, 5, 2, row);
    /* position 11: globals below 10: {0, 7}; kept after 1 step: 2 of 3 */
    const uint32_t b[] = {0, 7, 10, 11};
    row_of(row, 11, b, 4);
    selstats_add(s, 0, 0, 11, 8, 40, b, 4, 2, row);
    /* position 42 (step 34, bin 3): globals below 41: {3}; 32 steps after
     * position 10: 1 of 3 kept; no step 41, so no 1-step pair */
    const uint32_t c[] = {3, 41, 42};
    row_of(row, 42, c, 3);
    selstats_add(s, 0, 0, 42, 8, 40, c, 3, 2, row);

    struct selstats_summary all, b0, b3, none;
    selstats_summary(s, UINT32_MAX, UINT32_MAX, &all);
    assert_int_equal(all.rows, 3);
    assert_int_equal(all.picks, 6);
    near(all.picks_per_row, 2.0);
    assert_int_equal(all.persist_n[0], 1);
    near(all.persist[0], 2.0 / 3);
    assert_int_equal(all.persist_n[1], 1);
    near(all.persist[1], 1.0 / 3);
    /* sparsity: 6 of 11, 8 of 12 and 40 of 43 weights are 0 */
    near(all.sparsity, (6.0 / 11 + 8.0 / 12 + 40.0 / 43) / 3);
    /* oldest half: ids below 5.5, 6 and 21.5: {0, 3}, {0}, {3}: 4 of 6;
     * sinks (ids 0, 1): 2 of 6 */
    near(all.old_share, 4.0 / 6);
    near(all.sink_share, 2.0 / 6);
    /* ages: 1.0, 0.7, 0.3 | 1.0, 4/11 | 39/42; sorted 0.3, 0.364, 0.7,
     * 0.929, 1, 1: the 3rd of 6 (bins of 0.001, the bin's middle) */
    near(all.age_median, 0.7005);

    selstats_summary(s, 0, 0, &b0);
    assert_int_equal(b0.rows, 2);
    assert_int_equal(b0.picks, 5);
    selstats_summary(s, UINT32_MAX, 3, &b3);
    assert_int_equal(b3.rows, 1);
    near(b3.sink_share, 0.0);
    near(b3.persist[1], 1.0 / 3);
    assert_true(isnan(b3.persist[0]));
    selstats_summary(s, UINT32_MAX, 1, &none);
    assert_int_equal(none.rows, 0);
    assert_true(isnan(none.sparsity) && isnan(none.age_median) && isnan(none.old_share));
    selstats_destroy(s);
}

static void test_steps_without_globals_pair_with_nothing(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct selstats *s;
    const struct selstats_params p = {.alpha = 1, .sinks = 0};
    assert_int_equal(selstats_create(&s, 2, 1, 16, &p, &e), 0);
    float row[16];
    const uint32_t ids[] = {4, 5};
    row_of(row, 5, ids, 2);
    /* everything attended is local: no picks; the next step's pair has an
     * empty start and is not counted */
    selstats_add(s, 1, 0, 5, 4, 8, ids, 2, 2, row);
    const uint32_t ids2[] = {0, 5, 6};
    row_of(row, 6, ids2, 3);
    selstats_add(s, 1, 0, 6, 4, 8, ids2, 3, 2, row);
    struct selstats_summary all;
    selstats_summary(s, UINT32_MAX, UINT32_MAX, &all);
    assert_int_equal(all.picks, 1);
    assert_int_equal(all.persist_n[0], 0);
    near(all.old_share, 1.0); /* alpha 1: the whole context */
    /* out of range and position 0 are ignored */
    selstats_add(s, 2, 0, 6, 4, 8, ids2, 3, 2, row);
    selstats_add(s, 0, 0, 0, 4, 8, ids2, 0, 0, row);
    selstats_summary(s, UINT32_MAX, UINT32_MAX, &all);
    assert_int_equal(all.rows, 2);
    selstats_destroy(s);
}

static void test_bad_parameters_are_refused(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct selstats *s = (struct selstats *)1;
    const struct selstats_params p = {.alpha = 0, .sinks = 4};
    assert_int_not_equal(selstats_create(&s, 1, 1, 8, &p, &e), 0);
    assert_null(s);
    assert_non_null(strstr(e.msg, "alpha 0"));
    const struct selstats_params q = {.alpha = 0.5, .sinks = 4};
    assert_int_not_equal(selstats_create(&s, 0, 1, 8, &q, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_picks_persistence_ages_and_shares),
        cmocka_unit_test(test_steps_without_globals_pair_with_nothing),
        cmocka_unit_test(test_bad_parameters_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
