/* The simulator on hand-computable scenarios: a one-layer toy model on
 * hardware with 1 FLOP/ns and 1 byte/ns everywhere and 1 ns per copy, where
 * every task's start and end were worked out by hand; plus the overlap rule,
 * out-of-memory detection, the trace-length check and determinism. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "simulate.h"
#include "testutil.h"
#include "trace.h"
#include "trace_gen.h"
#include "trace_stats.h"
#include "replay.h"


/* One sequence, one layer, prompt 2, generated 2, uniform rows. */
static float uniform(uint32_t t, uint32_t p)
{
    (void)t;
    return 1.0f / (float)(p + 1);
}

/* The scheduler's price of one layer under a selection, as the simulator
 * asks it: the policy's prices looked up once, then the three terms. */
static double sched_ns(const struct hw_profile *hw, const char *sel, double streams,
                       double context, double attended, double retired)
{
    struct sched_prices p;
    struct alisa_err e = {{0}};
    assert_int_equal(cost_schedule_prices(hw, sel, &p, &e), 0);
    return cost_schedule_ns(&p, streams, context, attended, retired);
}

static void write_tiny(const char *path) { tu_write_toy_trace(path, 2, 2, uniform); }

/* A generated trace of the toy's shape (2 heads, hidden 4, vocab 10) with
 * n_layers layers, one sequence of prompt_len + gen_len positions. */
static void write_toy_gen(const char *path, uint32_t n_layers, uint32_t prompt_len,
                          uint32_t gen_len)
{
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.n_layers = n_layers;
    p.n_heads = tu_toy.n_heads;
    p.n_kv_heads = tu_toy.n_kv_heads;
    p.hidden = tu_toy.hidden;
    p.vocab = tu_toy.vocab;
    p.prompt_len = prompt_len;
    p.gen_len = gen_len;
    struct alisa_err e = {{0}};
    if (trace_gen_write(&p, path, &e))
        fail_msg("%s", e.msg);
}

/* A generated trace of the generator's default shape: n_layers layers,
 * n_seqs sequences of prompt_len + gen_len positions. */
static void write_gen(const char *path, uint32_t n_layers, uint32_t n_seqs, uint32_t prompt_len,
                      uint32_t gen_len)
{
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.n_layers = n_layers;
    p.n_seqs = n_seqs;
    p.prompt_len = prompt_len;
    p.gen_len = gen_len;
    struct alisa_err e = {{0}};
    assert_int_equal(trace_gen_write(&p, path, &e), 0);
}

static struct sim_config toy_config(const char *trace, const char *system, uint32_t gen_len)
{
    struct sim_config c = {.trace = trace, .model = &tu_toy, .hw = &tu_unit_hw,
                           .system = sim_system_find(system), .batch = 1, .prompt_len = 2,
                           .gen_len = gen_len, .sel_params = {.sparsity = 0.8}};
    struct alisa_err e = {{0}};
    assert_non_null(c.system);
    assert_int_equal(sim_resolve(&c, &e), 0);
    return c;
}

static void test_dense_gpu_time_is_prefill_plus_each_steps_compute(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_config c = toy_config(path, "dense-gpu", 2);
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    /* prefill: layer GEMM over 2 tokens max(512 FLOPs, 256 bytes) = 512, head
     * max(80, 80) = 80, causal attention 2*2*2*2/2*4 = 32 -> 624 ns.
     * step 0 attends 3 tokens: 256 + 80 + 3*16 = 384; step 1: 256 + 80 + 64 = 400. */
    assert_true(fabs(r.prefill_s - 624e-9) < 1e-15);
    assert_true(fabs(r.total_s - 1408e-9) < 1e-15);
    assert_true(fabs(r.compute_s - 784e-9) < 1e-15);
    /* by category (issue 45): the weights' 256 + 80 a step, the KV's 48 + 64 */
    assert_true(fabs(r.compute_weights_s - 672e-9) < 1e-15);
    assert_true(r.transfer_s == 0 && r.stall_s == 0 && r.bytes_h2d == 0);
    assert_true(fabs(r.throughput_tok_s - 2 / 1408e-9) < 1e-3);
    assert_true(r.gpu_hit_rate == 1.0);
    tu_rmdir(dir);
    free(dir);
}

static void test_accelerate_loads_every_step_with_exact_transfer_times(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_config c = toy_config(path, "accelerate", 2);
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    /* All KV on the CPU (16 bytes a token). prefill 0..624; its offload of 2
     * tokens 624..657 (1 + 32); LOAD(0) of 2 tokens 657..690; COMPUTE(0)
     * 690..1074; OFFLOAD(0) of the new token 1074..1091; LOAD(1) of 3 tokens
     * waits for it: 1091..1140; COMPUTE(1) 1140..1540; OFFLOAD(1) ..1557. */
    assert_true(fabs(r.total_s - 1557e-9) < 1e-15);
    assert_true(fabs(r.compute_s - 784e-9) < 1e-15);
    assert_true(fabs(r.transfer_s - (33 + 33 + 17 + 49 + 17) * 1e-9) < 1e-15);
    /* by direction: the loads up, the prompt's and each step's offload down */
    assert_true(fabs(r.transfer_h2d_s - (33 + 49) * 1e-9) < 1e-15);
    assert_true(fabs(r.transfer_d2h_s - (33 + 17 + 17) * 1e-9) < 1e-15);
    /* decode span 624..1540 = 916 ns, GPU busy 784 */
    assert_true(fabs(r.stall_s - 132e-9) < 1e-15);
    assert_true(fabs(r.bytes_h2d - 80) < 1e-9);      /* 2 + 3 tokens loaded */
    assert_true(fabs(r.bytes_d2h - 64) < 1e-9);      /* 2 prompt + 2 new tokens */
    assert_true(fabs(r.gpu_hit_rate - (1.0 - 5.0 / 7.0)) < 1e-12);
    tu_rmdir(dir);
    free(dir);
}

/* Software host costs: a layer lasts at least its launches. The dense-gpu
 * timeline above with 390 ns of launches a layer: step 0's GPU work (384 ns)
 * waits 6 ns for them, step 1's (400 ns) does not. */
static void test_host_launches_floor_each_layer(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    const struct sw_profile sw = {.name = "slow", .op_host_us = 0.13, .ops_per_layer = 3};
    struct sim_config c = toy_config(path, "dense-gpu", 2);
    c.sw = &sw;
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.total_s - (624 + 390 + 400) * 1e-9) < 1e-15);
    assert_true(fabs(r.host_s - 6e-9) < 1e-15);
    assert_true(fabs(r.compute_s - 784e-9) < 1e-15); /* the wait is not compute */
    assert_true(r.relay_s == 0);
    tu_rmdir(dir);
    free(dir);
}

/* FlexGen's pageable relay: each load is first staged by the host, its
 * bytes read and written at host_mem_gbps (1 byte/ns here), before the copy.
 * The accelerate timeline above with staging: LOAD(0) of 32 bytes 33 + 64 ns
 * 657..754; COMPUTE(0) 754..1138; OFFLOAD(0) ..1155; LOAD(1) of 48 bytes
 * 49 + 96 ns 1155..1300; COMPUTE(1) 1300..1700; OFFLOAD(1) ..1717. Offloads
 * are not staged. */
static void test_pageable_relay_stages_each_load_before_its_copy(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    const struct sw_profile sw = {.name = "pageable", .pageable_relay = 1};
    struct sim_config c = toy_config(path, "accelerate", 2);
    c.sw = &sw;
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.total_s - 1717e-9) < 1e-15);
    assert_true(fabs(r.relay_s - 160e-9) < 1e-15);
    assert_true(fabs(r.transfer_s - (33 + 97 + 17 + 145 + 17) * 1e-9) < 1e-15);
    assert_true(r.host_s == 0);
    tu_rmdir(dir);
    free(dir);
}

/* FlexGen's GPU batches: each layer computed once per GPU batch, its
 * weights read each time. The toy at batch 2 on hardware with 10 FLOP/ns
 * (so a 2-sequence GEMM is still memory-bound): one GPU batch of 2 runs step
 * 0 in 256 (layer) + 80 (head) + 2 x 3 x 16 (attention) = 432 ns, two GPU
 * batches of 1 in 2 x (256 + 80 + 48) = 768; step 1 464 against 800. */
static void test_flexgen_gpu_batches_read_the_weights_once_each(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct hw_profile fast = tu_unit_hw;
    fast.fp16_tflops = 1e-2;
    struct sim_config c = toy_config(path, "flexgen-default", 2);
    c.hw = &fast;
    c.batch = 2;
    struct sim_result one, two;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &one, NULL, &e), 0);
    assert_int_equal(one.gpu_batch_size, 2);
    c.flexgen_gpu_batch = 1;
    assert_int_equal(sim_run(&c, &two, NULL, &e), 0);
    assert_int_equal(two.gpu_batch_size, 1);
    assert_true(fabs(one.compute_s - (432 + 464) * 1e-9) < 1e-15);
    assert_true(fabs(two.compute_s - (768 + 800) * 1e-9) < 1e-15);
    assert_true(fabs(two.total_s - one.total_s - 672e-9) < 1e-15);
    /* the weights' reads too: 336 bytes (layer 256, head 80) a GPU batch
     * and step, 2 steps */
    assert_true(fabs(one.hbm_weight_bytes - 2 * 336) < 1e-9);
    assert_true(fabs(two.hbm_weight_bytes - 2 * 2 * 336) < 1e-9);
    assert_true(fabs(two.hbm_kv_bytes - one.hbm_kv_bytes) < 1e-9); /* the same tokens */
    c.flexgen_gpu_batch = 3; /* does not divide the batch */
    assert_int_equal(sim_run(&c, &two, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "GPU batch of 3 sequences does not divide the batch of 2"));
    tu_rmdir(dir);
    free(dir);
}

/* FlexGen's cache split is by whole sequences of a GPU batch, rounded down
 * (int(gbs x heads x percent) // heads rows of heads): the toy has 2 heads. */
static void test_flexgen_splits_the_cache_by_whole_sequences(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_config c = toy_config(path, "flexgen", 2);
    c.percent_given = 1;
    c.percent = (struct flexgen_policy){1, 0.5};
    struct sim_result r;
    struct alisa_err e = {{0}};
    /* batch 1: int(1 x 2 x 0.5) = 1 row, 0 whole sequences on the GPU */
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.policy.cache_gpu == 0);
    /* batch 2: 2 rows, 1 sequence of 2 */
    c.batch = 2;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.policy.cache_gpu == 0.5);
    /* batch 2 at 30%: int(1.2) = 1 row, no whole sequence */
    c.percent.cache_gpu = 0.3;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.policy.cache_gpu == 0);
    /* batch 4 at 30% in GPU batches of 2: each keeps 0 sequences; in one GPU
     * batch of 4: int(2.4) = 2 rows, 1 sequence of 4 */
    c.batch = 4;
    c.flexgen_gpu_batch = 2;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.policy.cache_gpu == 0);
    c.flexgen_gpu_batch = 0;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.policy.cache_gpu == 0.25);
    tu_rmdir(dir);
    free(dir);
}

/* Every system that names a software profile finds it in the shipped
 * catalog, and the ones whose runtime launches per operation pay for it. */
static void test_every_systems_software_is_in_the_catalog(void **state)
{
    (void)state;
    struct catalog cat;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&cat, catalog_default_dir(), tu_models_dir(), &e), 0);
    for (size_t i = 0; sim_systems[i].name; i++) {
        const char *sw = sim_systems[i].software;
        if (sw && !catalog_sw(&cat, sw))
            fail_msg("system %s: software '%s' not in software.ini", sim_systems[i].name, sw);
    }
    assert_true(cost_layer_host_ns(catalog_sw(&cat, sim_system_find("flexgen")->software),
                                   "dense") > 0);
    assert_true(catalog_sw(&cat, sim_system_find("flexgen-copy")->software)->pageable_relay);
    assert_null(sim_system_find("executor")->software); /* its profile prices its own */
    catalog_deinit(&cat);
}

/* INT4 KV (FlexGen's --compress-cache): on the roofline the layer reads
 * its packed KV and decompresses it (the bytes worked by hand in
 * test_measured_gemm_and_attention_terms_price_the_steps); refused where
 * the attention is measured on the executor, and under CPU attention. */
static void test_int4_kv_is_priced_where_flexgen_runs_it(void **state)
{
    (void)state;
    /* weights 128 x 2 bytes at 1 byte/ns against 256 FLOPs at 1/ns: 256;
     * attention over 10 tokens: 10 x 12 + 10 x 8 x 14.5 = 1280 bytes */
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &tu_unit_hw, 1, 10, 10, KV_INT4, 0, 0) -
                     (256 + 1280)) < 1e-9);
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    /* the toy's heads (2 values) are no whole group: refused; a toy with
     * heads of 64 runs, its cache on the CPU: each of the 2 sequences' 2
     * prompt and 2 new tokens writes 128 values at half a byte and 2 x 2
     * groups' 4 bytes, 144 bytes, to the host */
    struct sim_config c = toy_config(path, "flexgen-copy", 2);
    c.precision = KV_INT4;
    c.batch = 2;
    c.percent_given = 1;
    c.percent = (struct flexgen_policy){1, 0};
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "heads of 2 values are not whole groups of 64"));
    struct model_shape m64 = tu_toy;
    m64.hidden = 128;
    c.model = &m64;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(fabs(r.bytes_d2h - 2 * 4 * 144) < 1e-9);
    c.percent = (struct flexgen_policy){1, 1}; /* FlexGen's cache on the GPU */
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "of the cache on the GPU"));
    c.percent = (struct flexgen_policy){1, 0};
    c.sel = selection_find("h2o"); /* FlexGen's sparse attention refuses compression */
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "INT4 KV under selection h2o"));
    c.sel = selection_find("dense");
    struct hw_profile measured = tu_unit_hw;
    measured.attn_ns_per_token = 3;
    c.hw = &measured;
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "INT4 KV on profile unit: its attention is measured"));
    c = toy_config(path, "flexgen", 2);
    c.precision = KV_INT4;
    c.model = &m64;
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "INT4 KV under system flexgen:"));
    c = toy_config(path, "vllm", 2);
    c.precision = KV_INT4;
    c.model = &m64;
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "INT4 KV under system vllm:"));
    tu_rmdir(dir);
    free(dir);
}

/* FlexGen's CPU attention: 5 host bytes a KV byte counted from its code
 * unless the profile carries a measured cpu_attn_traffic, at the host's
 * bandwidth (costmodel.h). */
static void test_cpu_attention_prices_the_measured_traffic(void **state)
{
    (void)state;
    struct hw_profile hw = tu_unit_hw;
    hw.host_mem_gbps = 2; /* 2 bytes a ns */
    assert_true(fabs(cost_cpu_attention_ns(&hw, 100) - 100 * 5.0 / 2) < 1e-9);
    hw.cpu_attn_traffic = 13.7;
    assert_true(fabs(cost_cpu_attention_ns(&hw, 100) - 100 * 13.7 / 2) < 1e-9);
    assert_true(cost_cpu_attention_ns(&hw, 0) == 0);
}

/* A pageable copy at the profile's measured rate, capped by the link, plus
 * the link's latency; nothing where the profile measured none (costmodel.h).
 * Accelerate's offload streams pageable weights, DeepSpeed's pinned ones:
 * with a slow pageable rate only the first slows (simulate.c). */
static void test_pageable_copies_price_the_measured_rate(void **state)
{
    (void)state;
    struct hw_profile hw = tu_unit_hw; /* link 1 byte a ns, latency 1 ns */
    assert_true(cost_pageable_copy_ns(&hw, 100) == 0);
    hw.pageable_gbps = 0.5;
    assert_true(fabs(cost_pageable_copy_ns(&hw, 100) - (1 + 200)) < 1e-9);
    hw.pageable_gbps = 4; /* faster than the link: the link bounds it */
    assert_true(fabs(cost_pageable_copy_ns(&hw, 100) - (1 + 100)) < 1e-9);
    assert_true(sim_system_find("accelerate-offload")->weights_pageable == 1);
    assert_true(sim_system_find("deepspeed")->weights_pageable == 0);
    /* the toy run: Accelerate's streamed weights take longer at a pageable
     * rate of a quarter of the link, and they take every byte of it: the
     * run's transfer time grows, what it moves does not */
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_config c = toy_config(path, "accelerate-offload", 2);
    struct sim_result pinned, slow, ds;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &pinned, NULL, &e), 0);
    struct hw_profile hw4 = tu_unit_hw;
    hw4.pageable_gbps = 0.25;
    c.hw = &hw4;
    assert_int_equal(sim_run(&c, &slow, NULL, &e), 0);
    assert_true(slow.total_s > pinned.total_s);
    assert_true(slow.bytes_h2d == pinned.bytes_h2d);
    /* DeepSpeed's pinned weights do not see the pageable rate */
    struct sim_config d = toy_config(path, "deepspeed", 2);
    struct sim_result ds_pinned;
    assert_int_equal(sim_run(&d, &ds_pinned, NULL, &e), 0);
    d.hw = &hw4;
    assert_int_equal(sim_run(&d, &ds, NULL, &e), 0);
    assert_true(ds.total_s == ds_pinned.total_s);
    tu_rmdir(dir);
    free(dir);
}

/* A selection's estimate priced as its runtime computes it (issue 45):
 * InfiniGen's speculation at R = 0.5 and Quest's page bounds on the toy
 * (hidden 4, 2 heads of 2 values, kv_dim 4), counted by hand from their
 * code (costmodel.c). */
static void test_selection_estimate_is_priced_as_its_runtime_runs_it(void **state)
{
    (void)state;
    struct sel_estimate ig = {SEL_ESTIMATE_PARTIAL, 0, 0.5, "partial-ratio"},
                        qb = {SEL_ESTIMATE_PAGE_BOUNDS, 2, 0, "bounds"},
                        exact = {SEL_ESTIMATE_EXACT, 0, 0, NULL};
    double w, kv, per, fixed;
    /* InfiniGen: p_w_q is 0.5 x 4 x 4 FP16 weights, 16 bytes; a held token
     * costs its partial key (0.5 x 4 channels x 2 bytes) 3 times (the
     * bmm's read, torch.cat's read and write) and 12 passes over 2 heads'
     * FP16 scores: 12 + 48 = 60 bytes */
    cost_estimate_bytes(&tu_toy, &ig, 10, &w, &kv);
    assert_true(fabs(w - 16) < 1e-9 && fabs(kv - 600) < 1e-9);
    /* 600 bytes at 1 byte/ns, and the GEMM of 8 weights at 1 row: 16 FLOPs
     * at 1/ns against 16 bytes at 1 byte/ns, 16 ns */
    assert_true(fabs(cost_estimate_ns(&tu_toy, &tu_unit_hw, &ig, 1, 10) - 616) < 1e-9);
    cost_estimate_state_bytes(&tu_toy, &ig, &per, &fixed);
    assert_true(fabs(per - 4) < 1e-9 && fabs(fixed - 16) < 1e-9);
    assert_true(fabs(cost_estimate_gather_ns(&tu_unit_hw, &ig, 100) - 200) < 1e-9);
    /* Quest, pages of 2: a page's max and min keys (2 x 4 x 2 bytes) and 2
     * heads' scores written and read (2 x 2 x 2): 24 bytes a page, 12 a
     * token; its bounds hold 8 bytes a token; no host gather, no weights */
    cost_estimate_bytes(&tu_toy, &qb, 10, &w, &kv);
    assert_true(w == 0 && fabs(kv - 120) < 1e-9);
    cost_estimate_state_bytes(&tu_toy, &qb, &per, &fixed);
    assert_true(fabs(per - 8) < 1e-9 && fixed == 0);
    assert_true(cost_estimate_gather_ns(&tu_unit_hw, &qb, 100) == 0);
    assert_true(cost_estimate_ns(&tu_toy, &tu_unit_hw, &exact, 1, 10) == 0);

    /* in the run: FlexGen's cache on the CPU, infinigen selecting in the
     * toy's one layer (--every-layer 1), with and without its speculation */
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_config c = toy_config(path, "flexgen-copy", 2);
    c.sel = selection_find("infinigen");
    c.sel_params.budget_tokens = 2;
    c.sel_params.knob[2] = 1; /* every-layer */
    c.percent_given = 1;
    c.percent = (struct flexgen_policy){1, 0};
    struct sim_result base, r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &base, NULL, &e), 0);
    assert_true(base.estimate_s == 0 && base.gather_s == 0 && base.estimate_gpu_bytes == 0);
    c.sel_params.knob[1] = 0.5; /* partial-ratio */
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    /* the trace's exact row still selects: the same loads */
    assert_true(r.bytes_h2d == base.bytes_h2d && base.bytes_h2d > 0);
    /* steps at contexts 3 and 4: 3 x 60 + 16 and 4 x 60 + 16 ns */
    assert_true(fabs(r.estimate_s - (196 + 256) * 1e-9) < 1e-15);
    assert_true(fabs(r.compute_s - base.compute_s - (196 + 256) * 1e-9) < 1e-15);
    /* every loaded byte read and written once on the host at 1 byte/ns */
    assert_true(fabs(r.gather_s - 2 * r.bytes_h2d * 1e-9) < 1e-15);
    assert_true(r.total_s > base.total_s);
    /* p_w_q's 16 bytes and 4 bytes a token of 4 positions, out of the KV's room */
    assert_true(fabs(r.estimate_gpu_bytes - (16 + 4 * 4)) < 1e-9);
    assert_true(fabs(base.gpu_kv_capacity_bytes - r.gpu_kv_capacity_bytes - 32) < 1e-9);
    /* its first two layers dense (no --every-layer): the toy's one layer
     * pays nothing */
    c.sel_params.knob[2] = 0;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.estimate_s == 0 && r.gather_s == 0 && r.estimate_gpu_bytes == 0);
    /* refused where it is not priced */
    struct hw_profile measured = tu_unit_hw;
    measured.attn_ns_per_token = 3;
    c.hw = &measured;
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "selection infinigen --partial-ratio on profile unit"));
    c = toy_config(path, "vllm", 2);
    c.sel = selection_find("quest");
    c.sel_params.knob[1] = 1; /* bounds */
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "selection quest --bounds under system vllm"));
    tu_rmdir(dir);
    free(dir);
}

/* A selection's dense leading layers are the model's, whatever the trace's
 * layer count: a one-layer trace replayed for a 4-layer toy under
 * infinigen (budget 2, uniform rows: 2 tokens a step) attends every token
 * in model layers 0 and 1 and 2 in layers 2 and 3. GPU reads, FP16 KV of
 * 16 bytes a token: the dense layers 2 x (3 + 4) x 16 = 224 bytes over the
 * two steps (no gather); the selecting ones 2 x (2 + 2) tokens x (16 + the
 * gather's 2 x 16 + 2 heads x 4 x 2 bytes of local sums) = 512. */
static void test_dense_leading_layers_are_the_models(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct model_shape m4 = tu_toy;
    m4.n_layers = 4;
    struct sim_config c = toy_config(path, "dense-gpu", 2);
    c.model = &m4;
    c.sel = selection_find("infinigen");
    c.sel_params.budget_tokens = 2;
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(fabs(r.hbm_kv_bytes - (224 + 512)) < 1e-9);
    c.sel_params.knob[2] = 1; /* --every-layer 1: all four select */
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.hbm_kv_bytes - 2 * 512) < 1e-9);
    tu_rmdir(dir);
    free(dir);
}

static void test_flexgen_attends_its_cpu_share_on_the_cpu(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    /* Two sequences with KV room for 4 of their 8 tokens: FlexGen's LP puts
     * half the cache on the GPU, one whole sequence (its split is by
     * sequences). Step 0 attends tokens 0-2 of each: the CPU sequence's 0-2
     * (the new token too: FlexGen writes it into the CPU cache first; 48
     * bytes) go through the FP32 workspace, 5 bytes of host traffic each
     * (240 ns at 1 byte/ns); step 1 its 0-3 (320 ns). No KV
     * crosses the link except the CPU sequence's new tokens (16 bytes).
     * Beside weights and KV the GPU holds the prefill's activations, 400
     * bytes for 2 sequences of 2 tokens (eager_reserve: 2 x 4 tokens x 40
     * values + 4 x 2 x 10 logits, as test_vllm_kv_space_is_its_memory_formula
     * works them). */
    struct sim_config c = toy_config(path, "flexgen", 2);
    c.batch = 2;
    c.gpu_mem_bytes = 336 + 4 * 16 + 400;
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(r.policy.cache_gpu == 0.5);
    assert_true(fabs(r.cpu_attention_s - 560e-9) < 1e-15);
    assert_true(r.bytes_h2d == 0);
    assert_true(fabs(r.bytes_d2h - 4 * 16) < 1e-9); /* 2 prompt + 2 new tokens */
    /* prefill of 4 tokens: layer 1024 + head 160 + attention 64 = 1248; its
     * offload 1 + 32 (1248..1281); CPU_ATTN(0) 1248..1488; COMPUTE(0) 512 +
     * 160 + 16 a token the GPU attends (6 attended less the CPU's 3) = 720,
     * 1488..2208; OFFLOAD(0) ..2225; CPU_ATTN(1) 2208..2528; COMPUTE(1) 512 +
     * 160 + (8 - 4) x 16 = 736, 2528..3264; OFFLOAD(1) ..3281 */
    assert_true(fabs(r.total_s - 3281e-9) < 1e-15);
    /* the GPU's reads: the layer's 256 weight bytes and the head's 80 in
     * each of the 2 steps, and 3 + 4 attended tokens of 16 bytes */
    assert_true(fabs(r.hbm_weight_bytes - 2 * 336) < 1e-9);
    assert_true(fabs(r.hbm_kv_bytes - 7 * 16) < 1e-9);
    tu_rmdir(dir);
    free(dir);
}

/* A serial profile (the CPU executor's): accelerate's tasks all on one
 * processor, a GEMM's memory and arithmetic times added, each moved token
 * two copies, the scheduler and the arenas' bookkeeping priced per context
 * token and per layer. Hand-computed from the
 * accelerate case above. */
static void test_serial_profile_runs_every_task_in_turn(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct hw_profile hw = tu_unit_hw;
    hw.serial = 1;
    hw.sched_ns.n = 1;
    strcpy(hw.sched_ns.name[0], "dense");
    hw.sched_ns.value[0] = 2;
    struct sim_config c = toy_config(path, "accelerate", 2);
    c.hw = &hw;
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    /* GEMMs add: layer 256 FLOPs + 256 bytes = 512 a row, head 80 + 80.
     * prefill: 2 rows 512 + 256, head 160, attention 32 = 960; its offload
     * 33. step 0: 2 loads + 1 offload = 48 bytes + 6 copies = 54, scheduler
     * 3 tokens x 2 = 6, compute 512 + 160 + 3 x 16 = 720; step 1: 3 + 1
     * tokens = 64 bytes + 8 copies = 72, scheduler 8, compute 736. */
    assert_true(fabs(r.prefill_s - 960e-9) < 1e-15);
    assert_true(fabs(r.total_s - 2589e-9) < 1e-15);
    assert_true(fabs(r.compute_s - 1456e-9) < 1e-15);
    assert_true(fabs(r.schedule_s - 14e-9) < 1e-15);
    assert_true(fabs(r.transfer_s - (33 + 54 + 72) * 1e-9) < 1e-15);
    /* one processor: nothing overlaps */
    assert_true(fabs(r.total_s - r.prefill_s - 33e-9 - r.compute_s - r.schedule_s -
                     (54 + 72) * 1e-9) < 1e-15);
    /* batched copies (the CUDA executor's): a layer's moves one copy each
     * way: step 0 48 bytes + 2 copies, step 1 64 + 2 */
    hw.batched_copies = 1;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.transfer_s - (33 + 50 + 66) * 1e-9) < 1e-15);
    assert_true(fabs(r.total_s - 2579e-9) < 1e-15);
    hw.batched_copies = 0;
    /* the arenas' bookkeeping at 3 ns per context token joins the
     * transfers: 3 x 3 + 4 x 3 = 21 ns more */
    hw.kv_ns_per_token = 3;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.total_s - 2610e-9) < 1e-15);
    assert_true(fabs(r.transfer_s - (33 + 54 + 72 + 21) * 1e-9) < 1e-15);
    /* fixed parts per layer and step: the scheduler 5 ns, the arenas 4 */
    hw.sched_layer_ns = (struct named_table){1, {"dense"}, {5}};
    hw.kv_ns_per_layer = 4;
    /* the scheduler's three terms: streams x (per stream + context x per
     * token) + per layer; nothing without streams; each policy at its own
     * prices */
    struct hw_profile h3 = hw;
    h3.sched_ns = (struct named_table){2, {"dense", "h2o"}, {2, 1}};
    h3.sched_stream_ns = (struct named_table){2, {"dense", "h2o"}, {7, 0}};
    h3.sched_layer_ns = (struct named_table){2, {"dense", "h2o"}, {5, 0}};
    assert_true(fabs(sched_ns(&h3, "dense", 3, 10, 4, 0) - (3 * (7 + 10 * 2) + 5)) < 1e-12);
    assert_true(sched_ns(&h3, "dense", 0, 10, 4, 0) == 0);
    assert_true(fabs(sched_ns(&h3, "h2o", 3, 10, 4, 0) - 30) < 1e-12);
    /* a retired token at its policy's price (dense retires none) */
    h3.sched_retired_ns = (struct named_table){2, {"dense", "h2o"}, {0, 4}};
    assert_true(fabs(sched_ns(&h3, "h2o", 3, 10, 4, 5) - (30 + 5 * 4)) < 1e-12);
    assert_true(fabs(sched_ns(&h3, "dense", 3, 10, 4, 5) - (3 * (7 + 10 * 2) + 5)) < 1e-12);
    /* a stream's attended tokens at its policy's price (issue 49): 3
     * streams attending 4 each at 0.5 ns; none without streams */
    h3.sched_attended_ns = (struct named_table){2, {"dense", "h2o"}, {0, 0.5}};
    assert_true(fabs(sched_ns(&h3, "h2o", 3, 10, 4, 5) - (30 + 3 * 4 * 0.5 + 5 * 4)) < 1e-12);
    assert_true(sched_ns(&h3, "h2o", 0, 10, 4, 0) == 0);
    /* a profile that prices the scheduler but not this selection is an
     * error naming the key and the selection, in the lookup and the run
     * (issue 40: it was priced at 0 without a word); one that prices no
     * scheduler at all (a datasheet's) prices it at 0 */
    struct sched_prices sp;
    assert_int_equal(cost_schedule_prices(&h3, "swa", &sp, &e), ALISA_ENOTFOUND);
    assert_non_null(strstr(e.msg, "sched_ns_per_layer prices the scheduler for 2 selections "
                                  "but not for swa"));
    assert_int_equal(cost_schedule_prices(&tu_unit_hw, "swa", &sp, &e), 0);
    assert_true(sp.per_layer == 0 && sp.per_stream == 0 && sp.per_token == 0);
    struct hw_profile hm = hw;
    hm.sched_ns = (struct named_table){1, {"h2o"}, {1}};
    c.hw = &hm;
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_ENOTFOUND);
    assert_non_null(strstr(e.msg, "sched_ns_per_token prices the scheduler for 1 selections "
                                  "but not for dense"));
    c.hw = &hw;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.total_s - 2628e-9) < 1e-15);
    assert_true(fabs(r.schedule_s - 24e-9) < 1e-15);
    assert_true(fabs(r.transfer_s - (33 + 54 + 72 + 21 + 8) * 1e-9) < 1e-15);
    /* in the run: dense attends its whole context, 3 then 4 tokens, at 1 ns */
    struct hw_profile ha = hw;
    ha.sched_attended_ns = (struct named_table){1, {"dense"}, {1}};
    c.hw = &ha;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.schedule_s - 31e-9) < 1e-15);
    assert_true(fabs(r.total_s - 2635e-9) < 1e-15);
    c.hw = &hw;
    /* the arenas' three terms: streams x (per stream + context x per
     * token) + per layer; nothing without streams; in the run, 10 ns per
     * stream and step: one stream, two steps, 20 ns more */
    struct hw_profile hk = hw;
    hk.kv_ns_per_stream = 10;
    assert_true(fabs(cost_kvstore_ns(&hk, 3, 10) - (3 * (10 + 10 * 3) + 4)) < 1e-12);
    assert_true(cost_kvstore_ns(&hk, 0, 10) == 0);
    c.hw = &hk;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.transfer_s - (33 + 54 + 72 + 21 + 8 + 20) * 1e-9) < 1e-15);
    assert_true(fabs(r.total_s - 2648e-9) < 1e-15);
    tu_rmdir(dir);
    free(dir);
}

/* Measured tables replace the rooflines: weight GEMMs interpolated by rows,
 * attention per token plus a fixed cost per sequence and layer. */
static void test_measured_gemm_and_attention_terms_price_the_steps(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct hw_profile hw = tu_unit_hw;
    hw.weight_gemm = (struct gemm_table){2, {1, 3}, {0.5, 1.5}};
    hw.attn_ns_per_token = 10;
    hw.attn_ns_fixed = 5;
    struct sim_config c = toy_config(path, "dense-gpu", 2);
    c.hw = &hw;
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    /* layer 128 weights x 2 bytes x 0.5 ns = 128, head 40 x 2 x 0.5 = 40;
     * step 0 attends 3 tokens: 30 + 5; step 1: 40 + 5 -> 203 + 213. Prefill
     * over 2 rows: 0.5 + (1.5 - 0.5) / 2 = 1 ns a byte: 256, head 40, causal
     * attention FLOPs 32 -> 328. */
    assert_true(fabs(r.compute_s - 416e-9) < 1e-15);
    assert_true(fabs(r.prefill_s - 328e-9) < 1e-15);
    /* beyond the last point, the last two points' line: 8 rows, 4 ns a byte */
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 8, 0, 0, KV_FP16, 0, 0) -
                     (128 * 2 * 4.0 + 8 * 5)) < 1e-9);
    /* a fixed attention cost per layer (a GPU's launches) adds once, whatever
     * the batch: 8 rows attending 24 tokens, 8 x 5 per sequence + 7 */
    hw.attn_ns_per_layer = 7;
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 8, 24, 24, KV_FP16, 0, 0) -
                     (128 * 2 * 4.0 + 24 * 10 + 8 * 5 + 7)) < 1e-9);
    /* the bytes beside it: 128 weights (and the head's 40) at 2 bytes; 10
     * tokens of 16 bytes read, and sparse read again and written packed
     * (3 x 160) with 2 heads' FP32 sums read and written (10 x 2 x 8) */
    double wb, kvb;
    cost_layer_hbm_bytes(&tu_toy, &hw, 10, KV_FP16, 0, 0, &wb, &kvb);
    assert_true(wb == 256 && kvb == 160);
    cost_layer_hbm_bytes(&tu_toy, &hw, 10, KV_FP16, 1, 1, &wb, &kvb);
    assert_true(wb == 336 && kvb == 480 + 160);
    /* FlexGen's INT4: 8 values at half a byte and, per K and V, one group's
     * FP16 minimum and scale (4 bytes); OPT-13B's 5120 channels make 80
     * groups: 0.5625 bytes a value. Decompressed, each of the 8 values
     * costs 12.5 bytes more and is read as FP16 (2): 10 tokens read
     * 10 x 12 + 10 x 8 x 14.5 */
    struct kv_shape k4 = kv_shape_of(&tu_toy, KV_INT4), k13 = {5120, 5120, KV_INT4};
    assert_int_equal(cost_kv_bytes(&k4), 12);
    assert_int_equal(cost_kv_bytes(&k13), 2 * 5120 * 9 / 16);
    assert_string_equal(kv_precision_name(KV_INT4), "int4");
    cost_layer_hbm_bytes(&tu_toy, &hw, 10, KV_INT4, 0, 0, &wb, &kvb);
    assert_true(kvb == 10 * 12 + 10 * 8 * 14.5);
    tu_rmdir(dir);
    free(dir);
}

/* A serving iteration's prompt chunks (issue 46): on a profile measured on
 * the executor, each query-key pair costs a dense attended token by the KV
 * the chunks read (each key once) and each prompt row the per-row fixed
 * price (the executor attends a prompt row as a decode row); on a datasheet
 * profile, the pairs' FLOPs at peak. Worked by hand on toy (16 KV bytes a
 * token, one layer; hidden 4). */
static void test_iteration_prices_prompt_chunks_as_the_executor_attends(void **state)
{
    (void)state;
    struct hw_profile hw = tu_unit_hw;
    hw.weight_gemm = (struct gemm_table){1, {1}, {0.5}}; /* 128 weights x 2 bytes: 128 ns */
    hw.attn_ns_fixed = 5;
    hw.attn_ns_per_layer = 7;
    hw.attn_by_kv = (struct gemm_table){2, {1, 4}, {10, 30}};
    /* a chunk of 8 tokens after 248: 8 x 248 + 36 = 2020 pairs over 256
     * keys (4 KiB: the table's last point, 30), beside 2 decodes attending
     * 64 tokens (1 KiB, 10) */
    struct iteration_shape it = {.rows = 10, .decodes = 2, .sampled = 2, .attended = 64,
                                 .resident = 64, .prefill_pairs = 2020, .prefill_keys = 256};
    double decode = 64 * 10.0 + 2 * 5 + 7;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) -
                     (128 + decode + 2020 * 30.0 + 8 * 5)) < 1e-9);
    /* a chunk alone pays the layer's fixed part itself: 16 tokens after
     * 120, 2056 pairs over 136 keys (2.125 KiB: 10 + 20 x log2(2.125) / 2) */
    it = (struct iteration_shape){.rows = 16, .sampled = 1, .prefill_pairs = 16 * 120 + 136,
                                  .prefill_keys = 136};
    double per = 10 + 20 * log2(2.125) / 2;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) -
                     (128 + 2056 * per + 16 * 5 + 7)) < 1e-9);
    /* the single measured figure without a table */
    hw.attn_by_kv.n = 0;
    hw.attn_ns_per_token = 3;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) -
                     (128 + 2056 * 3.0 + 16 * 5 + 7)) < 1e-9);
    /* a datasheet profile: QK^T and AV FLOPs, 4 x 2056 x hidden at peak */
    hw.attn_ns_per_token = 0;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) -
                     (128 + 4.0 * 2056 * tu_toy.hidden / (hw.fp16_tflops * 1e3))) < 1e-9);
}

/* On the executor's dense cache (no scheduler) a profile that measured it
 * prices the iteration's attention from its four figures alone: per layer,
 * per row (decode and prompt alike), per prompt pair, per decode row's
 * attended token; the scheduler path's figures do not enter; a one-row
 * iteration from the one-row call's two figures where the profile has
 * them, and each row of a call below the profile's parallel rule likewise.
 * Without the figures the dense cache is priced as before. By hand on
 * toy. */
static void test_dense_cache_iteration_is_its_four_figures(void **state)
{
    (void)state;
    struct hw_profile hw = tu_unit_hw;
    hw.weight_gemm = (struct gemm_table){1, {1}, {0.5}}; /* 128 ns, as above */
    hw.attn_ns_fixed = 5;
    hw.attn_ns_per_layer = 7;
    hw.attn_by_kv = (struct gemm_table){2, {1, 4}, {10, 30}};
    struct iteration_shape it = {.rows = 10, .decodes = 2, .sampled = 2, .attended = 64,
                                 .resident = 64, .prefill_pairs = 2020, .prefill_keys = 256,
                                 .dense_cache = 1};
    double scheduler_path = cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0);
    assert_false(cost_dense_cache_measured(&hw));
    it.dense_cache = 0;
    assert_true(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) == scheduler_path);
    hw.dense_attn_ns_per_layer = 900;
    hw.dense_attn_ns_per_row = 40;
    hw.dense_attn_ns_per_prompt_pair = 1.5;
    hw.dense_attn_ns_per_decode_token = 2.5;
    assert_true(cost_dense_cache_measured(&hw));
    assert_true(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) == scheduler_path);
    it.dense_cache = 1;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) -
                     (128 + 900 + 10 * 40 + 2020 * 1.5 + 64 * 2.5)) < 1e-9);
    /* one decode row alone: the four terms until the one-row call is
     * measured, then its own two (one row's GEMM at the table's 0.5 ns a
     * byte: 128 ns) */
    struct iteration_shape one = {.rows = 1, .decodes = 1, .sampled = 1, .attended = 300,
                                  .resident = 300, .dense_cache = 1};
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &one, KV_FP16, 0, 0) -
                     (128 + 900 + 40 + 300 * 2.5)) < 1e-9);
    hw.dense_attn_one_ns_per_layer = 60;
    hw.dense_attn_one_ns_per_token = 4;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &one, KV_FP16, 0, 0) -
                     (128 + 60 + 300 * 4)) < 1e-9);
    /* a one-token prompt chunk at position 6 (7 keys) is one row too */
    struct iteration_shape chunk = {.rows = 1, .prefill_pairs = 7, .prefill_keys = 7,
                                    .dense_cache = 1};
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &chunk, KV_FP16, 0, 0) -
                     (128 + 60 + 7 * 4)) < 1e-9);
    /* two rows: the four terms (the one-entry GEMM table: 128 ns) */
    struct iteration_shape two = {.rows = 2, .decodes = 2, .sampled = 2, .attended = 300,
                                  .resident = 300, .dense_cache = 1};
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &two, KV_FP16, 0, 0) -
                     (128 + 900 + 2 * 40 + 300 * 2.5)) < 1e-9);
    /* below the profile's parallel rule (300 keys x 2 x hidden 4 = 2400
     * multiply-adds) the two rows run one after another, each a one-row
     * call; at the rule, the four terms again */
    hw.dense_attn_parallel_min = 2401;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &two, KV_FP16, 0, 0) -
                     (128 + 2 * 60 + 300 * 4)) < 1e-9);
    hw.dense_attn_parallel_min = 2400;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &two, KV_FP16, 0, 0) -
                     (128 + 900 + 2 * 40 + 300 * 2.5)) < 1e-9);
    /* a prompt chunk's rows count their pairs: 10 rows, 2020 pairs, 64
     * decode keys (2084 x 8 = 16672 multiply-adds) */
    hw.dense_attn_parallel_min = 16673;
    assert_true(fabs(cost_iteration_layer_ns(&tu_toy, &hw, &it, KV_FP16, 0, 0) -
                     (128 + 10 * 60 + 2084 * 4)) < 1e-9);
    hw.dense_attn_parallel_min = 0;
    /* off the dense cache: the scheduler's path, whatever the one-row figures */
    one.dense_cache = 0;
    double one_sched = cost_iteration_layer_ns(&tu_toy, &hw, &one, KV_FP16, 0, 0);
    hw.dense_attn_one_ns_per_layer = hw.dense_attn_one_ns_per_token = 0;
    assert_true(cost_iteration_layer_ns(&tu_toy, &hw, &one, KV_FP16, 0, 0) == one_sched);
    assert_true(fabs(one_sched - (128 + 60 + 300 * 4)) > 1);
}

/* Between two measured rows the kernel's own shape is added to the line
 * (issue 49): worked by hand on a table of rows 1, 4, 8 and a kernel timed
 * at rows 1 to 8. */
static void test_gemm_kernel_shape_between_measured_rows(void **state)
{
    (void)state;
    struct gemm_table t = {3, {1, 4, 8}, {1.0, 2.0, 3.0}}, none = {0};
    struct gemm_table k = {8, {1, 2, 3, 4, 5, 6, 7, 8}, {1.0, 1.2, 1.5, 1.6, 2.0, 2.2, 2.6, 2.4}};
    /* row 3: the line 1 + 1 x 2/3; the kernel's line 1 + 0.6 x 2/3 = 1.4,
     * its value 1.5, so 0.1 more */
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &none, 3) - (1 + 2.0 / 3)) < 1e-12);
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 3) - (1 + 2.0 / 3 + 0.1)) < 1e-12);
    /* row 7: the line 2 + 3/4; the kernel's 1.6 + 0.8 x 3/4 = 2.2, value 2.6 */
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 7) - (2.75 + 0.4)) < 1e-12);
    /* measured rows as measured; beyond them, and at a fractional row, the
     * line alone (past 8: the last two points' line, 3 + 1/4) */
    assert_true(cost_gemm_ns_per_byte(&t, &k, 4) == 2.0);
    assert_true(cost_gemm_ns_per_byte(&t, &k, 8) == 3.0);
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 9) - 3.25) < 1e-12);
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 2.5) - 1.5) < 1e-12);
    /* a kernel that lacks a row it needs (7 and 8 here): the line */
    k.n = 6;
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 7) - 2.75) < 1e-12);
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 3) - (1 + 2.0 / 3 + 0.1)) < 1e-12);
    /* a departure deeper than the line: the line */
    k = (struct gemm_table){4, {1, 2, 3, 4}, {5.0, 0.01, 5.0, 5.0}}; /* 1.33 - 4.99 */
    assert_true(fabs(cost_gemm_ns_per_byte(&t, &k, 2) - (1 + 1.0 / 3)) < 1e-12);
    /* the step prices through it: 3 rows of toy's 128 weights x 2 bytes */
    struct hw_profile hw = tu_unit_hw;
    hw.weight_gemm = t;
    hw.weight_kernel = (struct gemm_table){8, {1, 2, 3, 4, 5, 6, 7, 8},
                                           {1.0, 1.2, 1.5, 1.6, 2.0, 2.2, 2.6, 2.4}};
    hw.attn_ns_fixed = 0;
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 7, 0, 0, KV_FP16, 0, 0) - 256 * 3.15) <
                1e-9);
}

/* The attention table by the KV a step reads replaces the single per-token
 * figure: toy's KV is 16 bytes a token (FP16, one layer), so 64 attended
 * tokens read 1 KiB. Between points linear in log2(KiB); flat beyond. */
static void test_attention_priced_by_the_kv_a_step_reads(void **state)
{
    (void)state;
    struct hw_profile hw = tu_unit_hw;
    hw.weight_gemm = (struct gemm_table){1, {1}, {0.5}}; /* 128 weights x 2 bytes: 128 ns */
    hw.attn_ns_per_token = 1000;                          /* ignored beside the table */
    hw.attn_ns_fixed = 5;
    hw.attn_by_kv = (struct gemm_table){2, {1, 4}, {10, 30}};
    const double want[][2] = {{32, 10}, {64, 10}, {128, 20}, {256, 30}, {512, 30}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double got = cost_layer_compute_ns(&tu_toy, &hw, 1, want[i][0], want[i][0], KV_FP16, 0, 0);
        if (fabs(got - (128 + want[i][0] * want[i][1] + 5)) > 1e-9)
            fail_msg("%g tokens: %g ns, want %g", want[i][0], got,
                     128 + want[i][0] * want[i][1] + 5);
    }
    /* a sparse step without a sparse table: the dense one, by what it reads */
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 1, 64, 256, KV_FP16, 1, 0) -
                     (128 + 64 * 10.0 + 5)) < 1e-9);
    /* with one, by the KV resident (256 tokens: 4 KiB, 2 KiB between points);
     * a dense step, or a sparse one attending all it holds, keeps the dense
     * table */
    hw.attn_sparse_by_kv = (struct gemm_table){2, {2, 8}, {40, 80}};
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 1, 64, 256, KV_FP16, 1, 0) -
                     (128 + 64 * 60.0 + 5)) < 1e-9);
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 1, 64, 256, KV_FP16, 0, 0) -
                     (128 + 64 * 10.0 + 5)) < 1e-9);
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 1, 64, 64, KV_FP16, 1, 0) -
                     (128 + 64 * 10.0 + 5)) < 1e-9);
    /* without the tables, the single figure */
    hw.attn_by_kv.n = 0;
    hw.attn_sparse_by_kv.n = 0;
    assert_true(fabs(cost_layer_compute_ns(&tu_toy, &hw, 1, 64, 64, KV_FP16, 0, 0) -
                     (128 + 64 * 1000.0 + 5)) < 1e-9);
}

static void test_loads_overlap_the_previous_layers_compute(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_toy_gen(path, 2, 8, 8);
    struct alisa_err e = {{0}};
    struct model_shape two = tu_toy;
    two.n_layers = 4;
    struct sim_config c = toy_config(path, "accelerate", 8);
    c.model = &two;
    c.prompt_len = 8;
    struct sim_result r;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    /* With no overlap the decode would take compute + transfer; with loads of
     * layer g overlapping compute of g-1 it takes less. */
    double decode = r.total_s - r.prefill_s;
    assert_true(decode < r.compute_s + r.transfer_s - 1e-12);
    /* Never less than either alone: the GPU is one resource and decode
     * compute starts after prefill. The link is two (H2D and D2H run at
     * once, and transfer_s adds both), each starting after prefill: the
     * decode lasts at least each direction's bytes at the link's rate. */
    assert_true(decode >= r.compute_s - 1e-12);
    assert_true(r.bytes_h2d > 0);
    assert_true(decode >= r.bytes_h2d / tu_unit_hw.link_gbps * 1e-9 - 1e-12);
    assert_true(decode >= r.bytes_d2h / tu_unit_hw.link_gbps * 1e-9 - 1e-12);
    tu_rmdir(dir);
    free(dir);
}

/* The executor's stepwise prefill (validate's prediction) reads every earlier
 * token where it lies: with a device arena of 4 of the 8 prompt tokens under
 * fifo, positions 4..7 find 1, 2, 3, 4 tokens on the host, 10 loads of 16
 * bytes (toy FP16 KV, one layer) at 1 byte/ns plus one copy's 1 ns latency
 * (tu_unit_hw, not serial) over the same run with room for all. With no
 * host tier either, those 10 tokens are dropped and recomputed instead
 * (recompute_ns a token). The one-shot prefill prices neither. */
static void test_stepwise_prefill_loads_and_recomputes_what_was_moved(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_toy_gen(path, 1, 8, 2);
    struct alisa_err e = {{0}};
    struct hw_profile hw = tu_unit_hw;
    hw.recompute_ns = 7;
    struct sim_config c = toy_config(path, "executor", 2);
    c.hw = &hw;
    c.prompt_len = 8;
    c.place = &place_fifo_ops;
    c.sel = &sel_swa_ops; /* decode attends 2 tokens: they fit */
    c.sel_params.budget_tokens = 2;
    c.prefill_stepwise = 1;
    struct sim_result all, part, none, once;
    assert_int_equal(sim_run(&c, &all, NULL, &e), 0);
    c.gpu_kv_bytes = 4 * 16;
    assert_int_equal(sim_run(&c, &part, NULL, &e), 0);
    assert_false(all.oom || part.oom);
    assert_true(fabs(part.prefill_s - all.prefill_s - (10 * 16 + 1) * 1e-9) < 1e-15);
    c.cpu_mem_bytes = 1; /* no token fits: dropped */
    assert_int_equal(sim_run(&c, &none, NULL, &e), 0);
    assert_false(none.oom);
    assert_true(fabs(none.prefill_s - all.prefill_s - 10 * 7 * 1e-9) < 1e-15);
    c.prefill_stepwise = 0;
    c.cpu_mem_bytes = 0;
    c.gpu_kv_bytes = 0;
    assert_int_equal(sim_run(&c, &once, NULL, &e), 0);
    c.gpu_kv_bytes = 4 * 16;
    assert_int_equal(sim_run(&c, &part, NULL, &e), 0);
    assert_true(fabs(part.prefill_s - once.prefill_s) < 1e-15);
    tu_rmdir(dir);
    free(dir);
}

/* sim_optimum runs the same workload under belady and oracle-cost: each
 * bound's figures are its own run's (here Belady's moves no more over the
 * link than LRU's), and nothing is run for a placement that is no online
 * cache. */
static void test_optimum_runs_the_bounds_on_the_same_workload(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_toy_gen(path, 2, 8, 24);
    struct alisa_err e = {{0}};
    struct sim_config c = toy_config(path, "alisa-cache", 24);
    c.prompt_len = 8;
    c.batch = 2;
    c.place = &place_lru_ops;
    c.sel = &sel_strided_ops; /* old tokens come back as its stride changes */
    c.gpu_kv_bytes = 2 * 7 * 16; /* 7 tokens of 16 bytes a stream (2 streams): it misses */
    struct sim_result r, b;
    struct sim_optimum opt;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(r.gpu_hit_rate < 1);
    assert_int_equal(sim_optimum(&c, &opt, &e), 0);
    assert_true(opt.compared && !opt.oom);
    struct sim_config cb = c;
    cb.place = &place_belady_ops;
    assert_int_equal(sim_run(&cb, &b, NULL, &e), 0);
    assert_true(opt.belady_total_s == b.total_s && opt.belady_transfer_s == b.transfer_s);
    assert_true(opt.oracle_total_s > 0 && opt.belady_transfer_s <= r.transfer_s + 1e-12);
    c.place = &place_flexgen_ops; /* a step rule, not a cache */
    assert_int_equal(sim_optimum(&c, &opt, &e), 0);
    assert_false(opt.compared);
    tu_rmdir(dir);
    free(dir);
}

/* Per-head streams (sim_config.per_head) on a trace whose heads all hold
 * the head-mean row price exactly what the head-mean run prices: each KV
 * head's (token, head) units are its share of a token's bytes, attention
 * and recomputation, so the sum over heads is the token's. */
static void test_per_head_run_of_equal_heads_prices_the_head_mean_run(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *src = tu_path(dir, "t.trace");
    write_toy_gen(src, 2, 8, 24);
    const char *dst = tu_path(dir, "heads.trace");
    tu_copy_trace_with_equal_heads(src, dst);
    struct alisa_err e = {{0}};
    const char *systems[] = {"alisa-cache", "alisa"};
    for (int i = 0; i < 2; i++) {
        struct sim_config c = toy_config(dst, systems[i], 24);
        c.prompt_len = 8;
        c.batch = 2;
        if (i == 0) {
            c.place = &place_lru_ops;
            c.sel = &sel_strided_ops;
        }
        c.gpu_kv_bytes = 2 * 7 * 16; /* 7 tokens of 16 bytes a stream (2 streams): it moves */
        struct sim_result m, ph;
        assert_int_equal(sim_run(&c, &m, NULL, &e), 0);
        c.per_head = 1;
        assert_int_equal(sim_run(&c, &ph, NULL, &e), 0);
        assert_false(m.oom || ph.oom);
        assert_true(m.bytes_h2d + m.bytes_d2h > 0);
        assert_true(fabs(ph.total_s - m.total_s) <= 1e-12 * m.total_s);
        assert_true(ph.bytes_h2d == m.bytes_h2d && ph.bytes_d2h == m.bytes_d2h);
        assert_true(fabs(ph.compute_s - m.compute_s) <= 1e-12 * m.compute_s);
        assert_true(fabs(ph.recompute_s - m.recompute_s) <= 1e-12 * (m.recompute_s + 1e-9));
        assert_true(ph.recomputed_tokens == m.recomputed_tokens);
        assert_true(fabs(ph.gpu_hit_rate - m.gpu_hit_rate) < 1e-12);
        assert_true(ph.peak_gpu_kv_bytes == m.peak_gpu_kv_bytes);
    }
    tu_rmdir(dir);
    free(dir);
}

static void test_out_of_memory_is_a_result_with_its_reason(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_result r;
    struct alisa_err e = {{0}};
    /* GPU memory for the weights, the prefill's activations (200 bytes for
     * one sequence of 2 tokens) and two tokens of KV: decode position 2
     * needs a third. */
    struct sim_config c = toy_config(path, "dense-gpu", 2);
    c.gpu_mem_bytes = 336 + 200 + 2 * 16;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.oom);
    assert_non_null(strstr(r.oom_reason, "decode position 2"));
    /* weights alone do not fit */
    c.gpu_mem_bytes = 300;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.oom);
    assert_non_null(strstr(r.oom_reason, "weights"));
    /* deepspeed streams the weights: two layers of buffers (2 x 256 bytes),
     * the prefill's activations (200) and four tokens of KV fit in 776
     * bytes, though the weights (336), activations and KV would not fit in
     * 500 */
    struct sim_config d = toy_config(path, "deepspeed", 2);
    d.gpu_mem_bytes = 776;
    assert_int_equal(sim_run(&d, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(r.bytes_h2d >= 2 * 256); /* the layer's weights, every step */
    tu_rmdir(dir);
    free(dir);
}

static void test_trace_shorter_than_the_workload_is_refused(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "tiny.trace");
    write_tiny(path);
    struct sim_result r;
    struct alisa_err e = {{0}};
    struct sim_config c = toy_config(path, "dense-gpu", 3);
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "has 2 generated tokens, the workload needs 3"));
    c.gen_len = 2;
    c.prompt_len = 4;
    assert_int_equal(sim_run(&c, &r, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "2-token prompt, the workload needs 4"));
    tu_rmdir(dir);
    free(dir);
}

static void test_vllm_preempts_the_latest_sequence_and_recomputes_it(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_toy_gen(path, 1, 2, 20);
    struct alisa_err e = {{0}};
    /* Two sequences, 16-token blocks of 256 bytes, room for 3 blocks. Both run
     * 14 steps (lengths 2..15); at length 16 both need a second block: the
     * first gets the last free one, the second (admitted last) is preempted.
     * The first finishes alone in 6 steps (length 22, 20 generated), then the
     * second is re-admitted, its 16 tokens recomputed, and runs 6 steps. */
    struct sim_config c = toy_config(path, "vllm", 20);
    c.batch = 2;
    c.gpu_kv_bytes = 3 * 256;
    struct sim_result r;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_int_equal(r.preemptions, 1);
    assert_true(r.recomputed_tokens == 16);
    assert_int_equal(r.decode_steps, 26);
    assert_true(fabs(r.mean_batch - 40.0 / 26) < 1e-12);
    assert_true(r.recompute_s > 0);
    /* With room for 4 blocks nobody is preempted. */
    c.gpu_kv_bytes = 4 * 256;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_int_equal(r.preemptions, 0);
    assert_int_equal(r.decode_steps, 20);
    /* each step reads the layer's 256 weight bytes and the head's 80, and
     * both sequences' KV (16 bytes a token): lengths 2..21 attend 3..22 */
    assert_true(fabs(r.hbm_weight_bytes - 20 * 336) < 1e-9);
    assert_true(fabs(r.hbm_kv_bytes - 2 * (3 + 22) * 20 / 2 * 16) < 1e-9);
    /* With room for no prompt at all it cannot run. */
    c.gpu_kv_bytes = 100;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(r.oom);
    tu_rmdir(dir);
    free(dir);
}

/* vLLM's KV space from its memory formula, worked by hand for the toy
 * (hidden 4, 2 heads of 2 KV heads: kv width 4, ffn 8 x 2 matrices, vocab 10,
 * context under 2048): profiling prefill of 2048 tokens, 256 sequences.
 * Activations per token 3*4 + (4 + 2*4) + 8*2 = 40 values, FP16: 2 * 2048 *
 * 40 = 163840 bytes; logits 4 * 256 * 10 = 10240; weights 336. With 1 MiB of
 * GPU memory: 0.9 * 1048576 - 336 - 163840 - 10240 = 769302.4 bytes. */
static void test_vllm_kv_space_is_its_memory_formula(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_toy_gen(path, 1, 2, 4);
    struct alisa_err e = {{0}};
    struct sim_config c = toy_config(path, "vllm", 4);
    c.gpu_mem_bytes = 1048576;
    struct sim_result r;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.gpu_kv_capacity_bytes - 769302.4) < 1e-6);
    /* dense-gpu keeps the whole memory minus the weights and its own
     * prefill's activations: 2 tokens, 1 sequence: 2 * 2 * 40 + 4 * 10 = 200 */
    c = toy_config(path, "dense-gpu", 4);
    c.gpu_mem_bytes = 1048576;
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_true(fabs(r.gpu_kv_capacity_bytes - (1048576 - 336 - 200)) < 1e-6);
    tu_rmdir(dir);
    free(dir);
}

/* Without prefetch every layer's copy waits for the previous layer's
 * compute, so the decode is the plain sum of the two; with prefetch the
 * copies hide behind compute and the total is shorter (deepspeed streams a
 * layer's weights every step, so every layer copies). */
static void test_no_prefetch_serialises_copies_and_compute(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_toy_gen(path, 1, 2, 8);
    struct alisa_err e = {{0}};
    struct sim_config c = toy_config(path, "deepspeed", 8);
    struct model_shape toy4 = tu_toy; /* four layers, so a copy can run beside another's compute */
    toy4.n_layers = 4;
    c.model = &toy4;
    assert_true(c.system->no_prefetch);
    struct sim_result serial, overlapped;
    assert_int_equal(sim_run(&c, &serial, NULL, &e), 0);
    assert_false(serial.oom);
    assert_true(serial.transfer_s > 0 && serial.compute_s > 0);
    double sum = serial.prefill_s + serial.compute_s + serial.transfer_s;
    assert_true(fabs(serial.total_s - sum) < 1e-12 * sum);
    c.overlap = SIM_OVERLAP_PREFETCH;
    assert_int_equal(sim_run(&c, &overlapped, NULL, &e), 0);
    assert_true(fabs(overlapped.compute_s - serial.compute_s) < 1e-15);
    assert_true(fabs(overlapped.transfer_s - serial.transfer_s) < 1e-15);
    assert_true(overlapped.total_s < serial.total_s - 0.5 * fmin(serial.compute_s,
                                                                  serial.transfer_s));
    /* a selection that reads the step's own row (issue 45): its loads wait
     * for the layer's query, so prefetch asked for changes nothing */
    struct selection_ops present = sel_dense_ops;
    present.needs_present = 1;
    c.sel = &present;
    struct sim_result waited;
    assert_int_equal(sim_run(&c, &waited, NULL, &e), 0);
    assert_true(fabs(waited.total_s - serial.total_s) < 1e-12 * serial.total_s);
    /* one that speculates that row a layer ahead (InfiniGen) keeps its prefetch */
    present.present_ahead = 1;
    assert_int_equal(sim_run(&c, &waited, NULL, &e), 0);
    assert_true(fabs(waited.total_s - overlapped.total_s) < 1e-12 * overlapped.total_s);
    tu_rmdir(dir);
    free(dir);
}

/* The continuation takes each layer's own measured sparsity: a middle
 * layer far from the line between the first and the last keeps its own. */
static void test_extension_takes_each_layers_sparsity(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "three.trace");
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.n_layers = 3;
    p.prompt_len = 16;
    p.gen_len = 48;
    p.n_profile = 3;
    p.profile[0] = 0.5;
    p.profile[1] = 0.95;
    p.profile[2] = 0.6;
    struct alisa_err e = {{0}};
    assert_int_equal(trace_gen_write(&p, path, &e), 0);
    struct trace_gen_params ext;
    assert_int_equal(replay_extension_params(path, &ext, &e), 0);
    struct trace_stats *ts;
    assert_int_equal(trace_stats_from_file(path, &ts, NULL, &e), 0);
    assert_int_equal(ext.n_profile, 3);
    for (uint32_t l = 0; l < 3; l++) {
        struct sparsity_summary s;
        trace_stats_summary(ts, l, &s);
        assert_true(fabs(ext.profile[l] - s.mean) < 1e-12);
        assert_true(fabs(trace_gen_layer_target(&ext, l) - s.mean) < 1e-12);
    }
    trace_stats_destroy(ts);
    /* the middle layer, not the line's 0.55 */
    if (!(ext.profile[1] > 0.85))
        fail_msg("layer 1's target %g, generated at 0.95", ext.profile[1]);
    tu_rmdir(dir);
    free(dir);
}

static void test_extend_continues_a_short_trace_deterministically(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "short.trace");
    write_gen(path, 2, 2, 16, 8);
    struct alisa_err e = {{0}};
    struct catalog cat;
    assert_int_equal(catalog_load(&cat, catalog_default_dir(), tu_models_dir(), &e), 0);
    struct sim_config c = {.trace = path, .model = catalog_model(&cat, "OPT-6.7B"),
                           .hw = catalog_hw(&cat, "V100-32GB"), .system = sim_system_find("alisa"),
                           .batch = 4, .prompt_len = 16, .gen_len = 24,
                           .sel_params = {.sparsity = 0.8}};
    assert_int_equal(sim_resolve(&c, &e), 0);
    struct sim_result a, b;
    assert_int_equal(sim_run(&c, &a, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "pass --extend"));
    c.extend = 1;
    assert_int_equal(sim_run(&c, &a, NULL, &e), 0);
    assert_int_equal(a.extended_steps, 16);
    assert_int_equal(a.decode_steps, 24);
    assert_false(a.oom);
    assert_int_equal(sim_run(&c, &b, NULL, &e), 0);
    assert_memory_equal(&a, &b, sizeof a);
    /* a trace long enough is not touched by --extend */
    c.gen_len = 8;
    struct sim_result plain;
    assert_int_equal(sim_run(&c, &a, NULL, &e), 0);
    c.extend = 0;
    assert_int_equal(sim_run(&c, &plain, NULL, &e), 0);
    assert_int_equal(a.extended_steps, 0);
    assert_memory_equal(&a, &plain, sizeof a);
    catalog_deinit(&cat);
    tu_rmdir(dir);
    free(dir);
}

/* The paper's schedule in the simulator and in the search agree where the
 * search's expectation is exact: SWA at sparsity 0 attends every token (its
 * global half is all the tokens before the window), so each step loads
 * every CPU token and recomputes every deleted one, whatever the trace's
 * attention; alpha 1 puts every token before the window off the GPU, beta
 * 1 from p2 deletes them all. Bytes, compute and recompute then match the search's to
 * rounding; the link's busy time differs only by the prompt's offload
 * being its own copy per layer; and without overlap the simulated decode is
 * the search's sum less what offloads hide behind the next layers (they run
 * on their own link). */
static void test_sim_and_search_agree_on_a_schedule_they_price_alike(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_gen(path, 4, 2, 32, 24);
    struct alisa_err e = {{0}};
    struct catalog cat;
    assert_int_equal(catalog_load(&cat, catalog_default_dir(), tu_models_dir(), &e), 0);
    const struct alisa_schedule scheds[] = {{.alpha = 1, .beta = 0, .p1 = 4, .p2 = 24},
                                            {.alpha = 1, .beta = 1, .p1 = 4, .p2 = 10}};
    for (int k = 0; k < 2; k++) {
        struct sim_config c = {.trace = path, .model = catalog_model(&cat, "OPT-6.7B"),
                               .hw = catalog_hw(&cat, "H100-80GB"), .system = sim_system_find("alisa"),
                               .batch = 8, .prompt_len = 32, .gen_len = 24,
                               .sel_params = {.sparsity = 0}, .schedule_given = 1,
                               .schedule = scheds[k], .overlap = SIM_OVERLAP_NONE};
        assert_int_equal(sim_resolve(&c, &e), 0);
        struct sim_result r;
        assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
        assert_false(r.oom);
        assert_true(r.scheduled && r.schedule.feasible);
        const struct alisa_schedule *q = &r.schedule;
        double L = c.model->n_layers, steps = L * c.gen_len;
        if (k == 0)
            assert_true(r.bytes_h2d > 0 && r.recomputed_tokens == 0);
        else
            assert_true(r.recomputed_tokens > 0 && q->recomputes > 0);
        assert_true(fabs(r.bytes_h2d - q->bytes_h2d) <= 1e-9 * q->bytes_h2d);
        assert_true(fabs(r.bytes_d2h - q->bytes_d2h) <= 1e-9 * q->bytes_d2h);
        assert_true(fabs(r.recomputed_tokens - q->recomputes) <= 1e-6 * q->recomputes + 1e-9);
        double tick = 5 * steps * 1e-9; /* every task's duration rounds up to a ns */
        assert_true(fabs(r.compute_s - q->compute_ns * 1e-9) <= tick);
        assert_true(fabs(r.recompute_s - q->recompute_ns * 1e-9) <= tick);
        double latency = L * c.hw->link_latency_us * 1e-6;
        assert_true(fabs(r.transfer_s - q->transfer_ns * 1e-9) <= latency + tick);
        double offload_s = cost_transfer_ns(c.hw, q->bytes_d2h, steps + L) * 1e-9;
        double decode = r.total_s - r.prefill_s;
        print_message("schedule %d: simulated decode %.6f s, search %.6f s, offloads %.6f s\n",
                      k, decode, q->total_ns * 1e-9, offload_s);
        assert_true(decode <= q->total_ns * 1e-9 + latency + tick);
        assert_true(decode >= q->total_ns * 1e-9 - offload_s - tick);
    }
    catalog_deinit(&cat);
    tu_rmdir(dir);
    free(dir);
}

/* FlexGen's shares in the simulator: a weight share on the CPU is streamed
 * through two layers' buffers (the toy: a layer is 256 bytes, the weights
 * 336), so with half of them on the CPU the GPU keeps 168 bytes of weights
 * plus 256 of buffers, the host 168, and every decode step moves half a
 * layer (128 bytes) over the link; with all the KV on the GPU nothing else
 * moves. FlexGen's default (all on the GPU) runs out of memory once the KV
 * outgrows the GPU, and its LP chooses a policy the run reports. */
static void test_flexgen_shares_stream_weights_and_split_the_kv(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_tiny(path);
    struct sim_config c = toy_config(path, "flexgen-copy", 2);
    c.percent_given = 1;
    c.percent = (struct flexgen_policy){0.5, 1.0};
    struct sim_result r;
    struct alisa_err e = {{0}};
    assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(r.flexgen && r.policy.w_gpu == 0.5);
    assert_true(r.gpu_kv_capacity_bytes == c.gpu_mem_bytes - 168 - 256 - 200); /* activations */
    assert_true(r.cpu_kv_capacity_bytes == c.cpu_mem_bytes - 168);
    assert_true(r.bytes_h2d == 2 * 128.0);
    assert_true(r.bytes_d2h == 0);
    /* the default on a GPU of 336 + 200 + 40 bytes: the weights, the
     * prefill's activations and 2 tokens of KV (16 bytes each); the third
     * does not fit */
    struct sim_config d = toy_config(path, "flexgen-default", 2);
    d.gpu_mem_bytes = 336 + 200 + 40;
    assert_int_equal(sim_run(&d, &r, NULL, &e), 0);
    assert_true(r.oom);
    assert_true(r.flexgen && r.policy.cache_gpu == 1);
    /* the LP on the same GPU puts what does not fit on the CPU */
    struct sim_config l = toy_config(path, "flexgen", 2);
    l.gpu_mem_bytes = 336 + 200 + 40;
    assert_int_equal(sim_run(&l, &r, NULL, &e), 0);
    assert_false(r.oom);
    assert_true(r.flexgen && r.policy.cache_gpu < 1 && r.flexgen_lp_layer_ns > 0);
    tu_rmdir(dir);
    free(dir);
}

static void test_same_input_gives_the_same_result(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_gen(path, 3, 3, 32, 32);
    struct alisa_err e = {{0}};
    struct catalog cat;
    assert_int_equal(catalog_load(&cat, catalog_default_dir(), tu_models_dir(), &e), 0);
    const char *systems[] = {"alisa", "flexgen", "h2o", "accelerate", "vllm"};
    for (int k = 0; k < 5; k++) {
        struct sim_config c = {.trace = path, .model = catalog_model(&cat, "OPT-13B"),
                               .hw = catalog_hw(&cat, "V100-32GB"),
                               .system = sim_system_find(systems[k]), .batch = 16,
                               .prompt_len = 32, .gen_len = 32, .sel_params = {.sparsity = 0.8}};
        assert_int_equal(sim_resolve(&c, &e), 0);
        struct sim_result a, b;
        assert_int_equal(sim_run(&c, &a, NULL, &e), 0);
        assert_int_equal(sim_run(&c, &b, NULL, &e), 0);
        assert_memory_equal(&a, &b, sizeof a);
        assert_false(a.oom);
        if (strcmp(systems[k], "vllm") != 0)
            assert_int_equal(a.trace_streams, 9); /* 3 sequences x 3 trace layers */
    }
    catalog_deinit(&cat);
    tu_rmdir(dir);
    free(dir);
}

/* Issue 42: ALISA's search prices the schedule it picks as the simulator
 * runs it, on every trace family we ship (the synthetic one and the two
 * recorded ones, extended to 512 steps), within 10% of the simulated
 * decode at the paper's Fig. 12 point (OPT-30B, H100, batch 64, 128 +
 * 512), at 80% sparsity and at 90% on SmolLM2's trace; and phase III, when
 * there is one, never begins before phase II. */
static void test_search_prices_what_the_simulator_runs_on_every_trace(void **state)
{
    (void)state;
    struct catalog cat;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&cat, catalog_default_dir(), tu_models_dir(), &e), 0);
    const char *traces[] = {ALISA_TRACES_DIR "/synthetic-opt-8l-4s.trace",
                            ALISA_TRACES_DIR "/smollm2-135m-wikitext2.trace",
                            ALISA_TRACES_DIR "/stories260K-tinystories.trace"};
    const double sparsities[] = {0, 0.8, 0.9}; /* [1] everywhere, [2] on SmolLM2's trace */
    for (int t = 0; t < 3; t++)
        for (int k = 1; k < 3; k++) {
            if (k == 2 && t != 1) /* 90% on SmolLM2's trace only */
                continue;
            struct sim_config c = {.trace = traces[t], .model = catalog_model(&cat, "OPT-30B"),
                                   .hw = catalog_hw(&cat, "H100-80GB"),
                                   .system = sim_system_find("alisa"), .batch = 64,
                                   .prompt_len = 128, .gen_len = 512,
                                   .sel_params = {.sparsity = sparsities[k]}, .extend = 1};
            assert_int_equal(sim_resolve(&c, &e), 0);
            struct sim_result r;
            assert_int_equal(sim_run(&c, &r, NULL, &e), 0);
            assert_false(r.oom);
            assert_true(r.scheduled && r.schedule.feasible);
            double decode = r.total_s - r.prefill_s, search = r.schedule.total_ns * 1e-9;
            print_message("%s at %.1f: p1 %u p2 %u beta %.2f, search %.3f s, simulated %.3f s\n",
                          traces[t], sparsities[k], r.schedule.p1, r.schedule.p2,
                          r.schedule.beta, search, decode);
            if (fabs(search - decode) > 0.10 * decode)
                fail_msg("%s at sparsity %.1f: the search prices %.3f s, the simulator runs "
                         "%.3f s", traces[t], sparsities[k], search, decode);
            /* as the run went: no phase III, or phase II no later than it */
            assert_true(r.phase3_step < 0 || (r.phase2_step >= 0 && r.phase2_step <= r.phase3_step));
        }
    catalog_deinit(&cat);
}

/* --search sim: the candidates simulated, the fastest run kept; never
 * slower than the greedy's or the grid's schedule run as given. A 4-layer
 * trace, OPT-6.7B at batch 8 with a GPU tier of 40% of the KV, so phases
 * II and III are in play. */
static void test_simulated_search_is_never_slower_than_greedy_or_grid(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.trace");
    write_gen(path, 4, 2, 32, 24);
    struct alisa_err e = {{0}};
    struct catalog cat;
    assert_int_equal(catalog_load(&cat, catalog_default_dir(), tu_models_dir(), &e), 0);
    struct sim_config c = {.trace = path, .model = catalog_model(&cat, "OPT-6.7B"),
                           .hw = catalog_hw(&cat, "H100-80GB"), .system = sim_system_find("alisa"),
                           .batch = 8, .prompt_len = 32, .gen_len = 24,
                           .sel_params = {.sparsity = 0.5}};
    assert_int_equal(sim_resolve(&c, &e), 0);
    struct kv_shape k = kv_shape_of(c.model, KV_FP16);
    c.gpu_kv_bytes = 0.4 * 8 * 56 * (double)cost_kv_bytes(&k) * c.model->n_layers;
    struct sim_result greedy, grid, best;
    assert_int_equal(sim_run(&c, &greedy, NULL, &e), 0);
    c.search_grid = 10;
    assert_int_equal(sim_run(&c, &grid, NULL, &e), 0);
    c.search_grid = 0;
    c.search_sim = 2;
    assert_int_equal(sim_run(&c, &best, NULL, &e), 0);
    print_message("greedy %.1f tok/s (p2 %u), grid %.1f, simulated search %.1f (beta %.2f, p2 %u)\n",
                  greedy.throughput_tok_s, greedy.schedule.p2, grid.throughput_tok_s,
                  best.throughput_tok_s, best.schedule.beta, best.schedule.p2);
    assert_false(best.oom);
    assert_true(greedy.schedule.p1 < 24); /* phase II is in play */
    assert_true(best.throughput_tok_s >= greedy.throughput_tok_s * (1 - 1e-9));
    assert_true(best.throughput_tok_s >= grid.throughput_tok_s * (1 - 1e-9));
    catalog_deinit(&cat);
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_gpu_time_is_prefill_plus_each_steps_compute),
        cmocka_unit_test(test_stepwise_prefill_loads_and_recomputes_what_was_moved),
        cmocka_unit_test(test_accelerate_loads_every_step_with_exact_transfer_times),
        cmocka_unit_test(test_flexgen_attends_its_cpu_share_on_the_cpu),
        cmocka_unit_test(test_int4_kv_is_priced_where_flexgen_runs_it),
        cmocka_unit_test(test_cpu_attention_prices_the_measured_traffic),
        cmocka_unit_test(test_pageable_copies_price_the_measured_rate),
        cmocka_unit_test(test_selection_estimate_is_priced_as_its_runtime_runs_it),
        cmocka_unit_test(test_dense_leading_layers_are_the_models),
        cmocka_unit_test(test_serial_profile_runs_every_task_in_turn),
        cmocka_unit_test(test_measured_gemm_and_attention_terms_price_the_steps),
        cmocka_unit_test(test_gemm_kernel_shape_between_measured_rows),
        cmocka_unit_test(test_attention_priced_by_the_kv_a_step_reads),
        cmocka_unit_test(test_loads_overlap_the_previous_layers_compute),
        cmocka_unit_test(test_optimum_runs_the_bounds_on_the_same_workload),
        cmocka_unit_test(test_per_head_run_of_equal_heads_prices_the_head_mean_run),
        cmocka_unit_test(test_out_of_memory_is_a_result_with_its_reason),
        cmocka_unit_test(test_trace_shorter_than_the_workload_is_refused),
        cmocka_unit_test(test_vllm_preempts_the_latest_sequence_and_recomputes_it),
        cmocka_unit_test(test_vllm_kv_space_is_its_memory_formula),
        cmocka_unit_test(test_no_prefetch_serialises_copies_and_compute),
        cmocka_unit_test(test_extension_takes_each_layers_sparsity),
        cmocka_unit_test(test_extend_continues_a_short_trace_deterministically),
        cmocka_unit_test(test_same_input_gives_the_same_result),
        cmocka_unit_test(test_sim_and_search_agree_on_a_schedule_they_price_alike),
        cmocka_unit_test(test_search_prices_what_the_simulator_runs_on_every_trace),
        cmocka_unit_test(test_simulated_search_is_never_slower_than_greedy_or_grid),
        cmocka_unit_test(test_flexgen_shares_stream_weights_and_split_the_kv),
        cmocka_unit_test(test_iteration_prices_prompt_chunks_as_the_executor_attends),
        cmocka_unit_test(test_dense_cache_iteration_is_its_four_figures),
        cmocka_unit_test(test_host_launches_floor_each_layer),
        cmocka_unit_test(test_pageable_relay_stages_each_load_before_its_copy),
        cmocka_unit_test(test_every_systems_software_is_in_the_catalog),
        cmocka_unit_test(test_flexgen_gpu_batches_read_the_weights_once_each),
        cmocka_unit_test(test_flexgen_splits_the_cache_by_whole_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
