/* FlexGen's policy LP (sim/model/flexgen_policy.h) on toy shapes with round
 * hardware numbers, each optimum worked out by hand: the CPU-attention path
 * keeps the weights on the GPU and gives the KV what is left; a GPU too
 * small for the weights streams the share of them that buys the most time
 * per byte; no policy fitting is reported, not solved around. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "flexgen_policy.h"

/* hidden 4, 2 heads (K and V 16 bytes a token in FP16), FFN 8 with 2
 * matrices (a layer: 128 parameters, 256 bytes), vocab 10 (head 80 bytes) */
static const struct model_shape toy1 = {.name = "toy1", .n_layers = 1, .hidden = 4, .n_heads = 2,
                                        .n_kv_heads = 2, .ffn = 8, .ffn_matrices = 2,
                                        .vocab = 10, .weight_bytes_fp16 = 336};
static const struct model_shape toy4 = {.name = "toy4", .n_layers = 4, .hidden = 4, .n_heads = 2,
                                        .n_kv_heads = 2, .ffn = 8, .ffn_matrices = 2,
                                        .vocab = 10, .weight_bytes_fp16 = 1104};
/* 1 FLOP/ns, 1 byte/ns on the GPU and the link, 0.5 byte/ns on the host */
static const struct hw_profile unit_hw = {.name = "unit", .gpu_mem_gib = 1, .hbm_gbps = 1,
                                          .fp16_tflops = 1e-3, .host_dram_gib = 1,
                                          .link_gbps = 1, .link_latency_us = 0,
                                          .host_mem_gbps = 0.5};

/* CPU attention, 1 layer, batch 1, 4 + 4 tokens: the KV peaks at 8 x 16 =
 * 128 bytes; a GPU of 336 + 64 bytes holds the weights and half of it.
 * Streaming weights would need two layers' buffers (512 bytes) for 336
 * freed, so w = 1, c = 0.5. Per layer at the mean context (6 tokens, 96
 * bytes): GEMMs 256 ns, attention over the GPU half 48 ns, over the CPU half
 * through the FP32 workspace 5 x 48 bytes at 0.5 byte/ns, 480 ns: 784 ns;
 * the offload (8 ns) runs beside it. */
static void test_cpu_attention_keeps_weights_and_fills_the_gpu_with_kv(void **state)
{
    (void)state;
    struct flexgen_workload w = {&toy1, &unit_hw, 1, 4, 4, KV_FP16, 1, 336 + 64, 1e6};
    struct flexgen_policy p;
    int feasible;
    double ns;
    struct alisa_err e = {{0}};
    assert_int_equal(flexgen_policy_lp(&w, &p, &feasible, &ns, &e), 0);
    assert_true(feasible);
    assert_true(fabs(p.w_gpu - 1) < 1e-9);
    assert_true(fabs(p.cache_gpu - 0.5) < 1e-6);
    assert_true(fabs(ns - 784) < 1e-4);
    assert_true(fabs(flexgen_policy_layer_ns(&w, &p) - 784) < 1e-4);
    /* the default policy wants all 128 bytes of KV on the GPU */
    assert_true(flexgen_default_policy.w_gpu == 1 && flexgen_default_policy.cache_gpu == 1);
}

/* The copy path, 4 layers (weights 1,104 bytes, a layer 256), KV peak 4 x 8
 * x 16 = 512 bytes, GPU 900 bytes: 592 w + 512 c <= 900 - 512 = 388. The
 * time is 256 (1 - w) streamed + 96 (1 - c) copied + 352 of compute (the
 * offload, at most 16, hides beside it): a GPU byte buys 256 / 592 ns as
 * weights against 96 / 512 as KV, so w = 388 / 592, c = 0, and T = 256 x
 * 204 / 592 + 96 + 352. */
static void test_copy_path_streams_the_weights_that_buy_the_most_time(void **state)
{
    (void)state;
    struct flexgen_workload w = {&toy4, &unit_hw, 1, 4, 4, KV_FP16, 0, 900, 1e6};
    struct flexgen_policy p;
    int feasible;
    double ns;
    struct alisa_err e = {{0}};
    assert_int_equal(flexgen_policy_lp(&w, &p, &feasible, &ns, &e), 0);
    assert_true(feasible);
    assert_true(fabs(p.w_gpu - 388.0 / 592) < 1e-6);
    assert_true(fabs(p.cache_gpu) < 1e-9);
    double want = 256.0 * 204 / 592 + 96 + 352;
    assert_true(fabs(ns - want) < 1e-4);
    assert_true(fabs(flexgen_policy_layer_ns(&w, &p) - want) < 1e-4);
}

/* A GPU smaller than two layers' buffers with a CPU too small for the rest:
 * no shares fit, said as such. */
static void test_no_policy_fits_is_reported(void **state)
{
    (void)state;
    struct flexgen_workload w = {&toy4, &unit_hw, 1, 4, 4, KV_FP16, 1, 400, 100};
    struct flexgen_policy p;
    int feasible = 1;
    double ns;
    struct alisa_err e = {{0}};
    assert_int_equal(flexgen_policy_lp(&w, &p, &feasible, &ns, &e), 0);
    assert_false(feasible);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_attention_keeps_weights_and_fills_the_gpu_with_kv),
        cmocka_unit_test(test_copy_path_streams_the_weights_that_buy_the_most_time),
        cmocka_unit_test(test_no_policy_fits_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
