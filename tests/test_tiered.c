/* The executor's tiered cache set-up (exec/tiered.h) on stories260K: a
 * stream's tiers are cost_tiers's with the executor's storage (worked by
 * hand below), a placement without a host tier gets no host arena and needs
 * no prices, FlexGen's split falls by whole sequences, and what the executor
 * cannot run is refused with a reason. The decision-log parity against the
 * replay is tests/exec_test.sh's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"
#include "model.h"
#include "testexec.h"
#include "testutil.h"
#include "tiered.h"

/* stories260K: dim 64, 8 heads, 4 KV heads (kv_dim 32), 5 layers.
 * 1 GB/s link, 1 TFLOP/s: prices in round numbers */
static const struct hw_profile unit_hw = {.name = "unit", .gpu_mem_gib = 1, .hbm_gbps = 1,
                                          .fp16_tflops = 1, .host_dram_gib = 1, .link_gbps = 1,
                                          .link_latency_us = 0, .host_mem_gbps = 1};

static void test_tiers_are_cost_tiers_with_the_executors_storage(void **state)
{
    (void)state;
    struct llm_model *m = tu_model_or_skip(tu_stories260k(), LLM_WEIGHTS_NATIVE);
    const struct llm_config *c = &m->c;
    assert_int_equal(c->kv_dim, 32);
    struct llm_state *st;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_state_create(&st, m, 2, 40, &e), 0);
    /* INT8 on the CPU: K and V 2 x 32 bytes a token; 2 sequences x 5 layers
     * = 10 streams; 6,400 device bytes = 640 a stream = 10 tokens (the
     * scales beside the arena, not in it); 2,000 host bytes = 200 a stream
     * = 3 tokens (the layer inputs beside the host arena) */
    struct tiered_request r = {.sel = selection_find("swa"), .place = placement_find("lru"),
                               .sel_params = {.sparsity = 0.8}, .int8 = 1, .gpu_bytes = 6400,
                               .cpu_bytes = 2000, .hw = &unit_hw};
    struct tiered t;
    assert_int_equal(tiered_attach(&t, &r, m, st, 2, 40, 8, &e), 0);
    for (uint32_t i = 0; i < 10; i++) {
        assert_int_equal(scheduler_stream_gpu_cap(t.sched, i), 10);
        assert_int_equal(scheduler_stream_cpu_cap(t.sched, i), 3);
    }
    assert_int_equal(t.gpu_seqs, 0);
    tiered_free(&t);
    assert_null(t.sched);
    tiered_free(&t); /* an empty t */
    llm_state_free(st);
    llm_free(m);
}

static void test_gpu_only_gets_no_host_arena_and_needs_no_prices(void **state)
{
    (void)state;
    struct llm_model *m = tu_model_or_skip(tu_stories260k(), LLM_WEIGHTS_NATIVE);
    struct llm_state *st;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_state_create(&st, m, 1, 24, &e), 0);
    struct tiered_request r = {.sel = selection_find("h2o"), .sel_params = {.sparsity = 0.5}};
    struct tiered t;
    assert_int_equal(tiered_attach(&t, &r, m, st, 1, 24, 4, &e), 0);
    for (uint32_t i = 0; i < m->c.n_layers; i++) {
        assert_int_equal(scheduler_stream_gpu_cap(t.sched, i), 24); /* room for all */
        assert_int_equal(scheduler_stream_host_slots(t.sched, i), 0);
    }
    /* and it runs: the prompt, then decode steps the scheduler plans */
    uint32_t tok = 1;
    for (uint32_t p = 0; p < 12; p++)
        assert_non_null(llm_forward(st, &tok, p, NULL));
    tiered_free(&t);
    llm_state_free(st);
    llm_free(m);
}

static void test_flexgen_splits_whole_sequences(void **state)
{
    (void)state;
    struct llm_model *m = tu_model_or_skip(tu_stories260k(), LLM_WEIGHTS_NATIVE);
    struct llm_state *st;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_state_create(&st, m, 4, 16, &e), 0);
    /* FP32 on the CPU: 256 bytes a token; all KV = 4 x 5 x 16 x 256 =
     * 81,920 bytes; half of it on the device = 2 of 4 sequences */
    struct tiered_request r = {.place = placement_find("flexgen-static"), .gpu_bytes = 40960,
                               .hw = &unit_hw};
    struct tiered t;
    assert_int_equal(tiered_attach(&t, &r, m, st, 4, 16, 4, &e), 0);
    assert_int_equal(t.gpu_seqs, 2);
    tiered_free(&t);
    llm_state_free(st);
    /* exactly one sequence's KV of three (5 x 16 x 256 = 20,480 bytes): one
     * on the device, though 20,480 / 15 streams rounds each stream's budget
     * down (the split counts the run's total, not the rounded stream's) */
    assert_int_equal(llm_state_create(&st, m, 3, 16, &e), 0);
    r.gpu_bytes = 20480;
    assert_int_equal(tiered_attach(&t, &r, m, st, 3, 16, 4, &e), 0);
    assert_int_equal(t.gpu_seqs, 1);
    tiered_free(&t);
    llm_state_free(st);
    llm_free(m);
}

static void test_what_the_executor_cannot_run_is_refused(void **state)
{
    (void)state;
    struct llm_model *m = tu_model_or_skip(tu_stories260k(), LLM_WEIGHTS_NATIVE);
    struct llm_state *st;
    struct alisa_err e = {{0}};
    assert_int_equal(llm_state_create(&st, m, 1, 16, &e), 0);
    struct tiered t;
    struct tiered_request r = {.place = placement_find("belady"), .hw = &unit_hw};
    assert_int_equal(tiered_attach(&t, &r, m, st, 1, 16, 4, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "'belady' is not supported by the executor"));
    assert_null(t.sched);
    struct tiered_request unpriced = {.place = placement_find("alisa-cache")};
    assert_int_equal(tiered_attach(&t, &unpriced, m, st, 1, 16, 4, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "'alisa-cache' prices load against recompute"));
    assert_null(t.ks);
    /* a sliding window (Mistral's) runs without the scheduler only */
    m->c.window = 4;
    struct tiered_request lru = {.place = placement_find("lru"), .hw = &unit_hw};
    assert_int_equal(tiered_attach(&t, &lru, m, st, 1, 16, 4, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "sliding window of 4 tokens runs without the scheduler"));
    assert_null(t.sched);
    llm_state_free(st);
    llm_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiers_are_cost_tiers_with_the_executors_storage),
        cmocka_unit_test(test_gpu_only_gets_no_host_arena_and_needs_no_prices),
        cmocka_unit_test(test_flexgen_splits_whole_sequences),
        cmocka_unit_test(test_what_the_executor_cannot_run_is_refused),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
