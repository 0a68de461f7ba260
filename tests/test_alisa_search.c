/* ALISA's cost terms on a toy shape with round hardware numbers (every
 * figure worked by hand), the schedule evaluation, and the searches: greedy
 * keeps everything on the GPU when it fits, finds phase II when it does
 * not and phase III where recomputing gets cheaper than loading (worked by
 * hand), the grid is never worse than greedy. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alisa_search.h"
#include "testutil.h"


static void test_cost_terms_match_hand_computation(void **state)
{
    (void)state;
    /* weights: 2*16 + 2*4*4 + 2*4*8 + 10*4 = 168 params: 336 FLOPs (batch 1)
     * and 336 bytes; attention over 3 tokens of 16 bytes (K+V, fp16) = 48 */
    assert_true(fabs(cost_step_compute_ns(&tu_toy, &tu_unit_hw, 1, 3, 3, KV_FP16, 0) - 384) < 1e-9);
    /* sparse: gather reads and writes the 48 bytes again, local sum 3*2*4*2 */
    assert_true(fabs(cost_step_compute_ns(&tu_toy, &tu_unit_hw, 1, 3, 3, KV_FP16, 1) - 528) < 1e-9);
    /* batch 4: 1344 FLOPs take longer than reading 336 bytes, so compute-bound */
    assert_true(fabs(cost_step_compute_ns(&tu_toy, &tu_unit_hw, 4, 3, 3, KV_FP16, 0) - (1344 + 192)) < 1e-9);
    /* half the GEMM efficiency doubles the compute-bound GEMM (1344 -> 2688),
     * half the HBM efficiency the attention read (192 -> 384) */
    struct hw_profile half = tu_unit_hw;
    half.gemm_efficiency = 0.5;
    half.hbm_efficiency = 0.5;
    assert_true(fabs(cost_step_compute_ns(&tu_toy, &half, 4, 3, 3, KV_FP16, 0) - (2688 + 384)) < 1e-9);
    assert_true(fabs(cost_transfer_ns(&tu_unit_hw, 100, 2) - 102) < 1e-9);
    assert_true(cost_transfer_ns(&tu_unit_hw, 0, 5) == 0);
    /* recompute 2 tokens: 2*2*2*4*4 = 128 FLOPs, inputs 2*2*4 = 16 bytes */
    assert_true(fabs(cost_recompute_all_ns(&tu_toy, &tu_unit_hw, 2, KV_FP16) - 144) < 1e-9);
    struct kv_shape k = kv_shape_of(&tu_toy, KV_INT8);
    assert_int_equal(cost_kv_bytes(&k), 8);
    assert_int_equal(cost_kv_fixed_bytes(&k), 32);
    assert_true(fabs(cost_load_ns(&k, &tu_unit_hw) - 8) < 1e-9);
}

static void test_schedule_that_fits_is_all_compute(void **state)
{
    (void)state;
    struct search_workload w = {.model = &tu_toy, .hw = &tu_unit_hw, .batch = 1, .prompt_len = 4,
                                .gen_len = 3, .sel = {.sparsity = 0.0}};
    struct alisa_schedule s;
    struct alisa_err e = {{0}};
    assert_int_equal(alisa_search_greedy(&w, &s, &e), 0);
    assert_true(s.feasible);
    assert_int_equal(s.p1, 3);
    assert_true(s.alpha == 0);
    /* SWA at sparsity 0 attends every token, with its gather (the 16 KV
     * bytes read again and written) and local sum (2 heads x 4 bytes x 2):
     * contexts 5, 6, 7 -> 336 + 64 * c each */
    assert_true(fabs(s.total_ns - (3 * 336 + 64 * 18)) < 1e-9);
    assert_true(s.transfer_ns == 0 && s.recompute_ns == 0);
    /* 700 ns of launches a layer: step 0 (656 ns of GPU work) waits for
     * them, steps 1 and 2 (720, 784) do not */
    w.layer_host_ns = 700;
    assert_int_equal(alisa_search_greedy(&w, &s, &e), 0);
    assert_true(fabs(s.total_ns - (700 + 720 + 784)) < 1e-9);
    w.layer_host_ns = 0;
    struct alisa_schedule bad = {.alpha = 1.5, .p1 = 0, .p2 = 3};
    assert_int_equal(alisa_schedule_eval(&w, &bad, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "alpha 1.5"));
}

static void test_greedy_enters_phase_two_when_kv_outgrows_the_gpu(void **state)
{
    (void)state;
    struct catalog c;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&c, catalog_default_dir(), tu_models_dir(), &e), 0);
    /* OPT-30B, batch 64, 128 + 512 on H100-80GB: 60 GB of weights leave ~26 GB,
     * the KV reaches 56 GB. */
    struct search_workload w = {.model = catalog_model(&c, "OPT-30B"),
                                .hw = catalog_hw(&c, "H100-80GB"), .batch = 64,
                                .prompt_len = 128, .gen_len = 512, .sel = {.sparsity = 0.8}};
    struct alisa_schedule s;
    assert_int_equal(alisa_search_greedy(&w, &s, &e), 0);
    assert_true(s.feasible);
    assert_true(s.p1 > 0 && s.p1 < 512);
    assert_true(s.alpha > 0.4 && s.alpha < 0.7);
    /* 128 GiB of host memory hold every offloaded token, yet recomputing
     * beats loading (a 14 KB input and a GEMM against 28 KB of K and V once
     * enough tokens a step share the GEMM's weight read): phase III by cost */
    assert_true(s.p2 >= s.p1 && s.p2 < 512 && s.beta > 0);
    assert_true(s.transfer_ns > 0 && s.recompute_ns > 0);
    assert_true(s.peak_gpu_bytes <= 80 * 1073741824.0);
    struct alisa_schedule phase2 = {.alpha = s.alpha, .p1 = s.p1, .p2 = 512};
    assert_int_equal(alisa_schedule_eval(&w, &phase2, &e), 0);
    assert_true(phase2.feasible && s.total_ns < phase2.total_ns);
    catalog_deinit(&c);
}

/* Phase III where recomputing becomes cheaper than loading, worked by hand.
 * The toy (1 layer, K and V 16 bytes a token, the layer input 8) at batch
 * 4, 8 + 24 tokens, 16 tokens of GPU tier a stream: p1 = position 16
 * (step 8), alpha = 16 / 32. SWA at sparsity 0 picks every token before
 * its window (floor(c / 2) of c), so step j loads every CPU token; the
 * oldest floor(c / 2) are off the GPU: 8 before step 9, 9 before step 10.
 * Without overlap, loading n tokens (the batch's) costs 16 n + 1 ns (1
 * byte/ns and 1 ns a copy); recomputing them 8 n + 1 ns for their inputs
 * plus one GEMM by W_k, W_v (32 weights, 64 bytes): at 1000 FLOP/ns its
 * 64 n FLOPs take under 3 ns, so reading the weights decides, 64 bytes at
 * the HBM rate. Recompute wins once 8 n exceeds that read:
 *   HBM 0.5 B/ns (128 ns): n = 32 at step 9 (256 > 128) -> p2 = 9;
 *   HBM 0.25 (256 ns): step 9 ties (256), step 10's n = 36 wins -> p2 = 10;
 *   HBM 0.125 (512 ns): n needs to pass 64, but at most 15 a stream are
 *   ever off the GPU (60) -> no phase III.
 * Deleting every CPU token (beta 1) is then the cheapest share. */
static void test_phase_three_begins_where_recomputing_gets_cheaper(void **state)
{
    (void)state;
    struct hw_profile hw = tu_unit_hw;
    hw.fp16_tflops = 1; /* 1000 FLOP/ns */
    struct search_workload w = {.model = &tu_toy, .hw = &hw, .batch = 4, .prompt_len = 8,
                                .gen_len = 24, .sel = {.sparsity = 0.0}, .tiers_given = 1,
                                .gpu_kv_bytes = 4 * 16 * 16, .cpu_kv_bytes = 1e6};
    const double hbm[3] = {0.5, 0.25, 0.125};
    const uint32_t p2[3] = {9, 10, 24};
    for (int i = 0; i < 3; i++) {
        hw.hbm_gbps = hbm[i];
        struct alisa_schedule s;
        struct alisa_err e = {{0}};
        assert_int_equal(alisa_search_greedy(&w, &s, &e), 0);
        print_message("HBM %.3f B/ns: p1 %u alpha %.3f p2 %u beta %.2f\n", hbm[i], s.p1, s.alpha,
                      s.p2, s.beta);
        assert_true(s.feasible);
        assert_int_equal(s.p1, 8);
        assert_true(s.alpha == 0.5);
        assert_int_equal(s.p2, p2[i]);
        assert_true(s.beta == (p2[i] < 24 ? 1.0 : 0.0));
    }
}

static void test_grid_is_never_worse_than_greedy(void **state)
{
    (void)state;
    struct catalog c;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&c, catalog_default_dir(), tu_models_dir(), &e), 0);
    const char *models[] = {"OPT-6.7B", "OPT-30B", "LLaMA-33B", "Pythia-12B"};
    const char *hws[] = {"V100-32GB", "H100-80GB"};
    const uint32_t batches[] = {8, 64, 256};
    int compared = 0, improved = 0;
    for (size_t mi = 0; mi < 4; mi++)
        for (size_t hi = 0; hi < 2; hi++)
            for (size_t bi = 0; bi < 3; bi++)
                for (int int8 = 0; int8 < 2; int8++) {
                    struct search_workload w = {.model = catalog_model(&c, models[mi]),
                                                .hw = catalog_hw(&c, hws[hi]),
                                                .batch = batches[bi], .prompt_len = 128,
                                                .gen_len = 96, .sel = {.sparsity = 0.8},
                                                .precision = int8 ? KV_INT8 : KV_FP16};
                    struct alisa_schedule g, best;
                    assert_int_equal(alisa_search_greedy(&w, &g, &e), 0);
                    assert_int_equal(alisa_search_grid(&w, 6, &best, &e), 0);
                    if (!g.feasible)
                        continue;
                    compared++;
                    assert_true(best.feasible);
                    if (best.total_ns > g.total_ns)
                        fail_msg("%s %s b%u: grid %.6g s > greedy %.6g s", models[mi], hws[hi],
                                 batches[bi], best.total_ns * 1e-9, g.total_ns * 1e-9);
                    improved += best.total_ns < g.total_ns;
                }
    assert_true(compared >= 10);
    /* never-worse holds by construction (the greedy point is a grid
     * candidate); what can fail is that the grid finds nothing better
     * anywhere in this sweep */
    print_message("grid strictly better than greedy on %d of %d workloads\n", improved, compared);
    assert_true(improved >= 1);
    catalog_deinit(&c);
}

/* OPT-30B on an H100 at batch 64, FP16, 128 + 512 tokens. Its KV outgrows
 * the GPU, and with full multi-head attention recomputing a token's K and
 * V (its 14 KB layer input over the link plus its rows of a GEMM) is
 * cheaper than loading its 28 KB of K and V. The capacity rule, which
 * deleted only when the CPU tier overflowed, loaded over PCIe for most of
 * the decode; the search pricing time must delete (beta > 0), be at least
 * 10% faster than that rule, and come within 5% of the exhaustive grid. */
static void test_greedy_deletes_where_recompute_is_cheaper_than_loading(void **state)
{
    (void)state;
    struct catalog c;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&c, catalog_default_dir(), tu_models_dir(), &e), 0);
    struct search_workload w = {.model = catalog_model(&c, "OPT-30B"),
                                .hw = catalog_hw(&c, "H100-80GB"), .batch = 64, .prompt_len = 128,
                                .gen_len = 512, .sel = {.sparsity = 0.8}, .precision = KV_FP16};
    struct kv_shape k = kv_shape_of(w.model, KV_FP16);
    assert_true(cost_recompute_ns(&k, w.hw) < cost_load_ns(&k, w.hw)); /* the premise */
    struct alisa_schedule g, best;
    assert_int_equal(alisa_search_greedy(&w, &g, &e), 0);
    assert_int_equal(alisa_search_grid(&w, 10, &best, &e), 0);
    assert_true(g.feasible && best.feasible);
    struct alisa_schedule capacity = {.alpha = g.alpha, .p1 = g.p1, .p2 = 512};
    assert_int_equal(alisa_schedule_eval(&w, &capacity, &e), 0);
    print_message("greedy %.2f s (beta %.2f, p2 %u), grid %.2f s (beta %.2f), capacity rule "
                  "%.2f s\n", g.total_ns * 1e-9, g.beta, g.p2, best.total_ns * 1e-9, best.beta,
                  capacity.total_ns * 1e-9);
    assert_true(g.beta > 0 && g.p2 < 512);
    assert_true(g.total_ns < 0.9 * capacity.total_ns);
    assert_true(g.total_ns <= 1.05 * best.total_ns);
    catalog_deinit(&c);
}

/* The search sizes a stream's tiers as the replay and the executor do
 * (cost_tiers; issue 40: it had its own rule, which under INT8 KV took the
 * scales out of the executor's GPU tier). The toy in INT8: 8 bytes of K and
 * V a token, 32 bytes of scales a stream. A 96-byte GPU tier (one stream:
 * batch 1, one layer) holds (96 - 32) / 8 = 8 tokens in the paper's system,
 * which keeps the scales in the tier, and 96 / 8 = 12 in the executor's,
 * which keeps them beside the arena: phase II begins at position 8 and 12
 * of 32. */
static void test_search_sizes_tiers_as_the_replay_does_under_int8(void **state)
{
    (void)state;
    struct search_workload w = {.model = &tu_toy, .hw = &tu_unit_hw, .batch = 1, .prompt_len = 4,
                                .gen_len = 28, .sel = {.sparsity = 0.5}, .precision = KV_INT8,
                                .tiers_given = 1, .gpu_kv_bytes = 96, .cpu_kv_bytes = 1 << 20};
    struct alisa_schedule s;
    struct alisa_err e = {{0}};
    for (int outside = 0; outside <= 1; outside++) {
        w.inputs_outside = outside;
        assert_int_equal(alisa_search_greedy(&w, &s, &e), 0);
        assert_true(s.at_given);
        assert_int_equal(s.at.p1, outside ? 12 : 8);
        struct place_params pp = {0};
        struct tier_storage store = {kv_shape_of(&tu_toy, KV_INT8), outside, 1};
        cost_tiers(&store, &tu_unit_hw, 96, 1 << 20, 1, &pp);
        struct alisa_sched g;
        place_alisa_greedy(&pp, 32, &g);
        assert_int_equal(s.at.p1, g.p1);
        assert_true(s.at.alpha == g.alpha);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_terms_match_hand_computation),
        cmocka_unit_test(test_schedule_that_fits_is_all_compute),
        cmocka_unit_test(test_greedy_enters_phase_two_when_kv_outgrows_the_gpu),
        cmocka_unit_test(test_grid_is_never_worse_than_greedy),
        cmocka_unit_test(test_greedy_deletes_where_recompute_is_cheaper_than_loading),
        cmocka_unit_test(test_phase_three_begins_where_recomputing_gets_cheaper),
        cmocka_unit_test(test_search_sizes_tiers_as_the_replay_does_under_int8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
