/* Continuous batching on its own, against a memory of whole tokens: each
 * iteration's plan worked out by hand from vLLM V1's rules (batcher.h):
 * running first, chunks cut to the budget, admissions in order up to
 * max_num_seqs, the last running request preempted and put first in line,
 * no admissions in an iteration that preempted, a prompt over the budget
 * waiting without chunked prefill, and a request that cannot fit alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "batcher.h"

/* Tokens of KV: a request holds last + 1 of them, capacity in all. */
struct tokens {
    uint32_t cap, used, held[8];
};

static int fits(void *user, uint32_t id, uint32_t last)
{
    struct tokens *t = user;
    return t->used - t->held[id] + last + 1 <= t->cap;
}
static void take(void *user, uint32_t id, uint32_t last)
{
    struct tokens *t = user;
    t->used += last + 1 - t->held[id];
    t->held[id] = last + 1;
}
static void release(void *user, uint32_t id)
{
    struct tokens *t = user;
    t->used -= t->held[id];
    t->held[id] = 0;
}

static struct batcher *make(uint32_t seqs, uint32_t budget, int no_chunk, uint32_t n,
                            const uint32_t *P, const uint32_t *O)
{
    struct batcher *b;
    struct alisa_err e = {{0}};
    struct batcher_config c = {seqs, budget, no_chunk};
    assert_int_equal(batcher_create(&b, &c, n, P, O, &e), 0);
    return b;
}

/* plans one iteration and checks it is exactly the items (id, first, n) */
static uint32_t plan(struct batcher *b, const struct batcher_memory *m, struct batcher_item *it,
                     uint32_t expect_n, const uint32_t (*expect)[3], uint32_t *preempted)
{
    uint32_t n, stuck;
    assert_int_equal(batcher_plan(b, m, it, &n, preempted, &stuck), 0);
    assert_int_equal(n, expect_n);
    for (uint32_t k = 0; k < n; k++) {
        assert_int_equal(it[k].id, expect[k][0]);
        assert_int_equal(it[k].first, expect[k][1]);
        assert_int_equal(it[k].n, expect[k][2]);
    }
    return n;
}

static void test_chunks_decodes_and_admission_order(void **state)
{
    (void)state;
    /* prompts 5, 3, 2; outputs 2, 1, 3; budget 6 tokens, 2 running at most */
    const uint32_t P[] = {5, 3, 2}, O[] = {2, 1, 3};
    struct batcher *b = make(2, 6, 0, 3, P, O);
    struct tokens t = {.cap = 100};
    struct batcher_memory m = {&t, fits, take, release};
    struct batcher_item it[4];
    uint32_t pre;
    for (uint32_t i = 0; i < 3; i++)
        batcher_arrive(b, i);
    /* 0's prompt whole (5), 1's cut to the 1 left */
    uint32_t n = plan(b, &m, it, 2, (const uint32_t[][3]){{0, 0, 5}, {1, 0, 1}}, &pre);
    assert_true(it[0].samples && !it[1].samples);
    batcher_done(b, &m, it, n);
    assert_true(it[0].first_token && !it[0].finished);
    /* 0 decodes (position 5), 1's prompt's rest (2); 2 waits: 2 running */
    n = plan(b, &m, it, 2, (const uint32_t[][3]){{0, 5, 1}, {1, 1, 2}}, &pre);
    batcher_done(b, &m, it, n);
    assert_true(it[0].finished && it[1].first_token && it[1].finished); /* 1's output is 1 */
    assert_int_equal(batcher_running(b), 0);
    assert_int_equal(t.used, 0); /* both released */
    n = plan(b, &m, it, 1, (const uint32_t[][3]){{2, 0, 2}}, &pre);
    batcher_done(b, &m, it, n);
    assert_int_equal(batcher_generated(b, 2), 1);
    batcher_destroy(b);
}

static void test_without_chunking_a_long_prompt_waits(void **state)
{
    (void)state;
    const uint32_t P[] = {2, 5}, O[] = {3, 1};
    struct batcher *b = make(4, 5, 1, 2, P, O);
    struct tokens t = {.cap = 100};
    struct batcher_memory m = {&t, fits, take, release};
    struct batcher_item it[4];
    uint32_t pre;
    batcher_arrive(b, 0);
    batcher_arrive(b, 1);
    /* 0's prompt (2) leaves 3: 1's 5 waits (no chunking) */
    uint32_t n = plan(b, &m, it, 1, (const uint32_t[][3]){{0, 0, 2}}, &pre);
    batcher_done(b, &m, it, n);
    /* 0 decodes (1) and 1's prompt still does not fit in the 4 left */
    n = plan(b, &m, it, 1, (const uint32_t[][3]){{0, 2, 1}}, &pre);
    batcher_done(b, &m, it, n);
    n = plan(b, &m, it, 1, (const uint32_t[][3]){{0, 3, 1}}, &pre);
    batcher_done(b, &m, it, n);
    assert_true(it[0].finished);
    n = plan(b, &m, it, 1, (const uint32_t[][3]){{1, 0, 5}}, &pre);
    batcher_destroy(b);
}

/* 6 tokens of KV, two requests of prompt 2 and output 3: both prefill (4),
 * both decode (6), then 0's next token finds no room: 1, the last running,
 * is preempted (its 3 tokens lost), nothing is admitted that iteration; 0
 * finishes; then 1 runs its prompt and 2 generated tokens as one chunk. */
static void test_the_last_running_is_preempted_and_requeued_first(void **state)
{
    (void)state;
    const uint32_t P[] = {2, 2, 1}, O[] = {3, 3, 1};
    struct batcher *b = make(4, 64, 0, 3, P, O);
    struct tokens t = {.cap = 6};
    struct batcher_memory m = {&t, fits, take, release};
    struct batcher_item it[4];
    uint32_t pre;
    batcher_arrive(b, 0);
    batcher_arrive(b, 1);
    uint32_t n = plan(b, &m, it, 2, (const uint32_t[][3]){{0, 0, 2}, {1, 0, 2}}, &pre);
    batcher_done(b, &m, it, n);
    n = plan(b, &m, it, 2, (const uint32_t[][3]){{0, 2, 1}, {1, 2, 1}}, &pre);
    batcher_done(b, &m, it, n);
    batcher_arrive(b, 2); /* behind 1 once 1 is put first in line */
    n = plan(b, &m, it, 1, (const uint32_t[][3]){{0, 3, 1}}, &pre);
    assert_int_equal(pre, 1);
    assert_int_equal(batcher_preemptions(b, 1), 1);
    assert_int_equal(batcher_lost_tokens(b), 3);
    assert_int_equal(batcher_waiting(b), 2);
    batcher_done(b, &m, it, n);
    assert_true(it[0].finished);
    /* 1 first (2 + 2 tokens as one prompt), then 2 */
    n = plan(b, &m, it, 2, (const uint32_t[][3]){{1, 0, 4}, {2, 0, 1}}, &pre);
    assert_true(it[0].samples);
    batcher_done(b, &m, it, n);
    assert_true(it[0].finished && !it[0].first_token); /* its first token came long before */
    batcher_destroy(b);
}

/* A request that preempts itself ends the running pass; with nothing
 * running, a waiting head that cannot fit alone is reported. */
static void test_a_request_that_cannot_fit_alone_is_stuck(void **state)
{
    (void)state;
    const uint32_t P[] = {4}, O[] = {2};
    struct batcher *b = make(4, 64, 0, 1, P, O);
    struct tokens t = {.cap = 3};
    struct batcher_memory m = {&t, fits, take, release};
    struct batcher_item it[4];
    uint32_t n, pre, stuck;
    batcher_arrive(b, 0);
    assert_int_equal(batcher_plan(b, &m, it, &n, &pre, &stuck), 0);
    assert_int_equal(n, 0);
    assert_int_equal(stuck, 0);
    batcher_destroy(b);
    struct alisa_err e = {{0}};
    struct batcher_config c = {0, 1, 0};
    assert_int_equal(batcher_create(&b, &c, 1, P, O, &e), ALISA_EINVAL);
    assert_null(b);
    batcher_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks_decodes_and_admission_order),
        cmocka_unit_test(test_without_chunking_a_long_prompt_waits),
        cmocka_unit_test(test_the_last_running_is_preempted_and_requeued_first),
        cmocka_unit_test(test_a_request_that_cannot_fit_alone_is_stuck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
