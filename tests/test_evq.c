/* Event queue: time order, insertion order on equal times, no scheduling in
 * the past, lazy cancellation, and a randomized check against sorting. */
#include <gsl/gsl_rng.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "evq.h"

static void test_evq_pops_in_time_order(void **state)
{
    (void)state;
    struct evq *q;
    struct alisa_err e = {{0}};
    assert_int_equal(evq_create(&q, &e), 0);
    const uint64_t times[] = {50, 10, 40, 20, 30};
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(evq_push(q, times[i], 0, i, NULL, &e), 0);
    assert_int_equal(evq_size(q), 5);
    struct evq_event ev;
    const uint32_t order[] = {1, 3, 4, 2, 0};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(evq_pop(q, &ev), 1);
        assert_int_equal(ev.id, order[i]);
        assert_int_equal(evq_now(q), ev.time_ns);
    }
    assert_int_equal(evq_pop(q, &ev), 0);
    evq_destroy(q);
}

static void test_evq_equal_times_pop_in_insertion_order(void **state)
{
    (void)state;
    struct evq *q;
    struct alisa_err e = {{0}};
    assert_int_equal(evq_create(&q, &e), 0);
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(evq_push(q, 7, 0, i, NULL, &e), 0);
    struct evq_event ev;
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(evq_pop(q, &ev), 1);
        assert_int_equal(ev.id, i);
    }
    evq_destroy(q);
}

static void test_evq_refuses_to_schedule_in_the_past(void **state)
{
    (void)state;
    struct evq *q;
    struct alisa_err e = {{0}};
    assert_int_equal(evq_create(&q, &e), 0);
    assert_int_equal(evq_push(q, 100, 1, 9, NULL, &e), 0);
    struct evq_event ev;
    assert_int_equal(evq_pop(q, &ev), 1);
    assert_int_equal(evq_push(q, 99, 2, 3, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "scheduled at 99 ns, before now (100 ns)"));
    assert_int_equal(evq_push(q, 100, 2, 3, NULL, &e), 0); /* now itself is fine */
    evq_destroy(q);
}

static void test_evq_cancelled_events_are_skipped(void **state)
{
    (void)state;
    struct evq *q;
    struct alisa_err e = {{0}};
    assert_int_equal(evq_create(&q, &e), 0);
    uint64_t h[4];
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(evq_push(q, 10 * (i + 1), 0, i, &h[i], &e), 0);
    assert_int_equal(evq_cancel(q, h[0], &e), 0);
    assert_int_equal(evq_cancel(q, h[2], &e), 0);
    assert_int_equal(evq_cancel(q, h[2], &e), 0); /* twice is harmless */
    assert_int_equal(evq_cancel(q, 999, &e), 0);  /* unknown is harmless */
    assert_int_equal(evq_size(q), 2);
    struct evq_event ev;
    assert_int_equal(evq_pop(q, &ev), 1);
    assert_int_equal(ev.id, 1);
    assert_int_equal(evq_cancel(q, h[1], &e), 0); /* already popped: no effect */
    assert_int_equal(evq_size(q), 1);
    assert_int_equal(evq_pop(q, &ev), 1);
    assert_int_equal(ev.id, 3);
    assert_int_equal(evq_pop(q, &ev), 0);
    evq_destroy(q);
}

static int by_time_seq(const void *a, const void *b)
{
    const struct evq_event *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void test_evq_matches_a_sort_with_interleaved_pushes_and_cancels(void **state)
{
    (void)state;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    struct evq *q;
    struct alisa_err e = {{0}};
    assert_int_equal(evq_create(&q, &e), 0);
    enum { N = 5000 };
    static struct evq_event ref[N];
    static int dead[N];
    size_t n_ref = 0;
    uint64_t now = 0;
    struct evq_event ev;
    for (int round = 0; round < N; round++) {
        uint64_t t = now + gsl_rng_uniform_int(r, 50);
        uint64_t hd;
        assert_int_equal(evq_push(q, t, 0, (uint32_t)n_ref, &hd, &e), 0);
        ref[n_ref] = (struct evq_event){t, hd, 0, (uint32_t)n_ref};
        n_ref++;
        if (gsl_rng_uniform(r) < 0.1) {
            /* cancel a random event; popped or cancelled ones are no-ops */
            size_t victim = gsl_rng_uniform_int(r, n_ref);
            size_t before = evq_size(q);
            assert_int_equal(evq_cancel(q, ref[victim].seq, &e), 0);
            assert_int_equal(evq_size(q), before - (dead[victim] ? 0 : 1));
            dead[victim] = 1;
        }
        if (gsl_rng_uniform(r) < 0.4 && evq_pop(q, &ev)) {
            /* the popped event is the earliest live one */
            struct evq_event best = {UINT64_MAX, UINT64_MAX, 0, 0};
            for (size_t k = 0; k < n_ref; k++)
                if (!dead[k] && by_time_seq(&ref[k], &best) < 0)
                    best = ref[k];
            assert_int_equal(ev.seq, best.seq);
            dead[ev.id] = 1;
            now = ev.time_ns;
        }
    }
    while (evq_pop(q, &ev)) {
        assert_false(dead[ev.id]);
        dead[ev.id] = 1;
        assert_true(ev.time_ns >= now);
        now = ev.time_ns;
    }
    for (size_t k = 0; k < n_ref; k++)
        assert_true(dead[k]);
    evq_destroy(q);
    gsl_rng_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evq_pops_in_time_order),
        cmocka_unit_test(test_evq_equal_times_pop_in_insertion_order),
        cmocka_unit_test(test_evq_refuses_to_schedule_in_the_past),
        cmocka_unit_test(test_evq_cancelled_events_are_skipped),
        cmocka_unit_test(test_evq_matches_a_sort_with_interleaved_pushes_and_cancels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
