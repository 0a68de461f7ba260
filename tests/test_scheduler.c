/* Scheduler properties over synthetic traces with fixed seeds: every
 * selection x placement pair runs with its invariants checked at every step
 * (inside the scheduler), the byte accounting adds up, Belady never has more
 * GPU misses than an online placement on the same accesses and capacity,
 * and the decision log is the same on every run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "placement.h"
#include "replay.h"
#include "scheduler.h"
#include "selection.h"
#include "testutil.h"
#include "trace.h"
#include "trace_gen.h"

static const struct hw_profile test_hw = {.name = "test", .gpu_mem_gib = 80, .hbm_gbps = 3350,
                                          .fp16_tflops = 989, .host_dram_gib = 128,
                                          .link_gbps = 20, .link_latency_us = 10,
                                          .host_mem_gbps = 100};

struct env {
    char *dir;
    char paths[3][600];
};

static int setup(void **state)
{
    struct env *v = calloc(1, sizeof *v);
    v->dir = tu_mkdtemp();
    for (int i = 0; i < 3; i++) {
        struct trace_gen_params p;
        trace_gen_defaults(&p);
        p.n_layers = 3;
        p.n_heads = 4;
        p.n_kv_heads = 4;
        p.hidden = 64;
        p.vocab = 100;
        p.n_seqs = 2;
        p.prompt_len = 16 + 8 * (uint32_t)i;
        p.gen_len = 48;
        p.seed = 100 + (uint64_t)i;
        p.sparsity_first = 0.5;
        p.sparsity_last = 0.9;
        snprintf(v->paths[i], sizeof v->paths[i], "%s/t%d.trace", v->dir, i);
        struct alisa_err e = {{0}};
        if (trace_gen_write(&p, v->paths[i], &e))
            fail_msg("%s", e.msg);
    }
    *state = v;
    return 0;
}

static int teardown(void **state)
{
    struct env *v = *state;
    tu_rmdir(v->dir);
    free(v->dir);
    free(v);
    return 0;
}

/* KV bytes per token per layer of the test traces: 2 * 64 * 2. */
#define KVB 256u
#define STREAMS 6u

static int replay_prec(const char *path, const struct selection_ops *sel, double sparsity,
                       const struct placement_ops *place, uint32_t gpu_tokens,
                       uint32_t cpu_tokens, enum kv_precision prec, struct replay_totals *t,
                       replay_plan_fn fn, void *user)
{
    struct replay_config cfg = {.sel = sel, .sel_params = {.sparsity = sparsity},
                                .place = place, .precision = prec,
                                .gpu_kv_bytes = (uint64_t)gpu_tokens * KVB * STREAMS,
                                .cpu_kv_bytes = (uint64_t)cpu_tokens * KVB * STREAMS,
                                .hw = &test_hw, .gpu_fraction = -1};
    struct alisa_err e = {{0}};
    int rc = replay_trace(path, &cfg, t, fn, user, &e);
    if (rc)
        fail_msg("%s %s/%s: %s", path, sel->name, place->name, e.msg);
    return rc;
}

static int replay(const char *path, const struct selection_ops *sel, double sparsity,
                  const struct placement_ops *place, uint32_t gpu_tokens, uint32_t cpu_tokens,
                  struct replay_totals *t, replay_plan_fn fn, void *user)
{
    return replay_prec(path, sel, sparsity, place, gpu_tokens, cpu_tokens, KV_FP16, t, fn, user);
}

static void test_every_selection_and_placement_keeps_the_invariants(void **state)
{
    struct env *v = *state;
    const double sparsities[] = {0.0, 0.5, 0.8};
    const uint32_t gpu_caps[] = {24, 40, 1000}, cpu_caps[] = {4, 16, 1000};
    int runs = 0, ooms = 0;
    uint64_t every[3]; /* tokens a dense decode attends on each trace */
    for (int ti = 0; ti < 3; ti++) {
        struct replay_totals d;
        assert_int_equal(replay(v->paths[ti], &sel_dense_ops, 0, &place_gpu_only_ops, 1000, 1000,
                                &d, NULL, NULL), 0);
        assert_false(d.oom);
        every[ti] = d.attended_tokens;
        replay_totals_free(&d);
    }
    for (int ti = 0; ti < 3; ti++)
        for (size_t si = 0; selection_policies[si]; si++)
            for (size_t pi = 0; placement_policies[pi]; pi++)
                for (size_t k = 0; k < 3; k++)
                    for (size_t c = 0; c < 3; c++) {
                        struct replay_totals t;
                        replay(v->paths[ti], selection_policies[si], sparsities[k],
                               placement_policies[pi], gpu_caps[c], cpu_caps[c], &t, NULL, NULL);
                        runs++;
                        ooms += t.oom;
                        if (!t.oom && !placement_policies[pi]->step) {
                            /* cache-like: every miss is one load or one recompute */
                            assert_int_equal(t.gpu_misses, t.loads + t.recomputed_tokens);
                            assert_int_equal(t.bytes_h2d, t.loads * KVB + t.recomputed_tokens * 128);
                            assert_int_equal(t.bytes_d2h, t.offloads * KVB);
                            assert_true(fabs(t.fetch_cost_ns - ((t.loads + t.offloads) * t.load_ns +
                                                                t.recomputed_tokens * t.recompute_ns)) < 1e-6);
                            assert_true(t.peak_gpu_bytes <= (uint64_t)gpu_caps[c] * KVB * STREAMS);
                            assert_true(t.peak_cpu_bytes <= (uint64_t)cpu_caps[c] * KVB * STREAMS);
                        }
                        if (!t.oom && c == 2 && placement_policies[pi] != &place_flexgen_ops)
                            assert_int_equal(t.gpu_misses, 0); /* everything fits */
                        /* sparsity 0 attends everything (but for a selection
                         * that may stay below its budget), and everything
                         * keeps all mass */
                        if (!t.oom && k == 0 && !selection_policies[si]->below_budget)
                            assert_int_equal(t.attended_tokens, every[ti]);
                        if (!t.oom && t.attended_tokens == every[ti])
                            assert_true(t.recall_min > 0.999);
                        replay_totals_free(&t);
                    }
    /* the small capacities must really exercise out-of-memory, the large never */
    assert_true(ooms > 0 && ooms < runs);
}

/* The registry's online caches (placement_online_cache), walked so every
 * new one is compared (alisa's paper rule serves from a staging area beside
 * the tier, so a cache's bound does not apply to it). Returns their count. */
static size_t online_caches(const struct placement_ops *out[16])
{
    size_t n = 0;
    for (size_t i = 0; placement_policies[i]; i++) {
        if (placement_online_cache(placement_policies[i])) {
            assert_true(n < 16);
            out[n++] = placement_policies[i];
        }
    }
    assert_true(n >= 8); /* lru, fifo, lfu, lfu-aged, slru, arc, cost-aware, alisa-cache */
    return n;
}

static void test_belady_never_misses_more_than_an_online_placement(void **state)
{
    struct env *v = *state;
    const struct placement_ops *online[16];
    const size_t n_online = online_caches(online);
    const uint32_t gpu_caps[] = {20, 28, 36};
    int compared = 0;
    for (int ti = 0; ti < 3; ti++)
        for (size_t si = 0; selection_policies[si]; si++)
            for (size_t c = 0; c < 3; c++) {
                struct replay_totals b;
                replay(v->paths[ti], selection_policies[si], 0.6, &place_belady_ops, gpu_caps[c],
                       8, &b, NULL, NULL);
                for (size_t k = 0; k < n_online; k++) {
                    struct replay_totals t;
                    replay(v->paths[ti], selection_policies[si], 0.6, online[k], gpu_caps[c], 8, &t,
                           NULL, NULL);
                    if (!t.oom && !b.oom) {
                        compared++;
                        if (b.gpu_misses > t.gpu_misses)
                            fail_msg("%s, %s, GPU %u: belady %llu misses > %s %llu", v->paths[ti],
                                     selection_policies[si]->name, gpu_caps[c],
                                     (unsigned long long)b.gpu_misses, online[k]->name,
                                     (unsigned long long)t.gpu_misses);
                    }
                    if (!online[k]->write_through) /* its copies take host room */
                        assert_int_equal(t.oom, b.oom); /* OOM depends on the selection only */
                    replay_totals_free(&t);
                }
                replay_totals_free(&b);
            }
    assert_true(compared > 100);
}

/* oracle-cost: optimal under its own cost when recompute <= load (FP16 on
 * these shapes), and every placement's cost is at least min(load,
 * recompute) times MIN's misses (INT8 too, where load < recompute). */
static void test_oracle_cost_is_optimal_when_recompute_is_cheaper_and_bounds_hold(void **state)
{
    struct env *v = *state;
    const struct placement_ops *others[17];
    size_t n_others = online_caches(others);
    others[n_others++] = &place_belady_ops;
    const uint32_t gpu_caps[] = {20, 30}, cpu_caps[] = {6, 1000};
    int compared = 0;
    for (int ti = 0; ti < 3; ti++)
        for (size_t si = 0; selection_policies[si]; si++)
            for (size_t c = 0; c < 2; c++)
                for (int prec = 0; prec < 2; prec++) {
                    enum kv_precision kp = prec ? KV_INT8 : KV_FP16;
                    struct replay_totals o, b;
                    replay_prec(v->paths[ti], selection_policies[si], 0.6, &place_oracle_cost_ops,
                                gpu_caps[c], cpu_caps[c], kp, &o, NULL, NULL);
                    replay_prec(v->paths[ti], selection_policies[si], 0.6, &place_belady_ops,
                                gpu_caps[c], cpu_caps[c], kp, &b, NULL, NULL);
                    if (o.oom) {
                        replay_totals_free(&o);
                        replay_totals_free(&b);
                        continue;
                    }
                    double unit = o.load_ns < o.recompute_ns ? o.load_ns : o.recompute_ns;
                    double bound = unit * (double)b.gpu_misses;
                    assert_int_equal(o.gpu_misses, b.gpu_misses); /* same eviction order */
                    if (!prec)
                        assert_true(o.recompute_ns <= o.load_ns); /* the provable regime */
                    for (size_t k = 0; k < n_others; k++) {
                        struct replay_totals t;
                        replay_prec(v->paths[ti], selection_policies[si], 0.6, others[k],
                                    gpu_caps[c], cpu_caps[c], kp, &t, NULL, NULL);
                        if (t.fetch_cost_ns < bound - 1e-6)
                            fail_msg("%s below the lower bound", others[k]->name);
                        if (!prec && o.fetch_cost_ns > t.fetch_cost_ns + 1e-6)
                            fail_msg("%s %s: oracle %.1f ns > %s %.1f ns", v->paths[ti],
                                     selection_policies[si]->name, o.fetch_cost_ns,
                                     others[k]->name, t.fetch_cost_ns);
                        compared++;
                        replay_totals_free(&t);
                    }
                    assert_true(o.fetch_cost_ns >= bound - 1e-6);
                    replay_totals_free(&o);
                    replay_totals_free(&b);
                }
    assert_true(compared > 100);
}

/* replay_optimum runs the bounds on the same run: Belady's misses are its
 * own replay's and at most the cache's; oracle-cost's fetch cost is its own
 * replay's and, recompute being no dearer than load here, at most the
 * cache's; nothing is compared for a placement that is no online cache. */
static void test_optimum_replays_the_bounds_on_the_same_run(void **state)
{
    struct env *v = *state;
    struct replay_config cfg = {.sel = &sel_swa_ops, .sel_params = {.sparsity = 0.6},
                                .place = &place_arc_ops, .gpu_kv_bytes = 26ull * KVB * STREAMS,
                                .cpu_kv_bytes = 1000ull * KVB * STREAMS, .hw = &test_hw,
                                .gpu_fraction = -1};
    struct replay_totals t, b, o;
    struct replay_optimum opt;
    struct alisa_err e = {{0}};
    assert_int_equal(replay_trace(v->paths[0], &cfg, &t, NULL, NULL, &e), 0);
    assert_int_equal(replay_optimum(v->paths[0], &cfg, &opt, &e), 0);
    replay(v->paths[0], &sel_swa_ops, 0.6, &place_belady_ops, 26, 1000, &b, NULL, NULL);
    replay(v->paths[0], &sel_swa_ops, 0.6, &place_oracle_cost_ops, 26, 1000, &o, NULL, NULL);
    assert_false(t.oom);
    assert_true(opt.compared && !opt.oom);
    assert_true(t.gpu_misses > 0); /* the tier is small enough to miss */
    assert_int_equal(opt.belady_misses, b.gpu_misses);
    assert_true(opt.belady_misses <= t.gpu_misses);
    assert_true(fabs(opt.oracle_fetch_ns - o.fetch_cost_ns) < 1e-6);
    assert_true(o.recompute_ns <= o.load_ns && opt.oracle_fetch_ns <= t.fetch_cost_ns + 1e-6);
    replay_totals_free(&t);
    replay_totals_free(&b);
    replay_totals_free(&o);
    cfg.place = &place_alisa_ops; /* a schedule, not a cache */
    assert_int_equal(replay_optimum(v->paths[0], &cfg, &opt, &e), 0);
    assert_false(opt.compared);
    cfg.place = &place_belady_ops;
    assert_int_equal(replay_optimum(v->paths[0], &cfg, &opt, &e), 0);
    assert_false(opt.compared);
}

static void hash_plan(void *user, const struct scheduler_plan *p, uint32_t seq, uint32_t layer,
                      const float *row)
{
    (void)row;
    uLong *h = user;
    uint32_t head[6] = {seq, layer, p->pos, p->n_attended, p->place.n_load, p->place.n_drop};
    *h = crc32(*h, (const Bytef *)head, sizeof head);
    *h = crc32(*h, (const Bytef *)p->attended, p->n_attended * sizeof *p->attended);
    *h = crc32(*h, (const Bytef *)p->place.load, p->place.n_load * sizeof(uint32_t));
    *h = crc32(*h, (const Bytef *)p->place.recompute, p->place.n_recompute * sizeof(uint32_t));
    *h = crc32(*h, (const Bytef *)p->place.offload, p->place.n_offload * sizeof(uint32_t));
    *h = crc32(*h, (const Bytef *)p->place.drop, p->place.n_drop * sizeof(uint32_t));
}

static void test_decision_log_is_deterministic(void **state)
{
    struct env *v = *state;
    uLong h1 = crc32(0L, Z_NULL, 0), h2 = h1, h3 = h1;
    struct replay_totals t;
    replay(v->paths[1], &sel_swa_ops, 0.8, &place_alisa_ops, 20, 40, &t, hash_plan, &h1);
    assert_false(t.oom);
    replay_totals_free(&t);
    replay(v->paths[1], &sel_swa_ops, 0.8, &place_alisa_ops, 20, 40, &t, hash_plan, &h2);
    replay_totals_free(&t);
    assert_int_equal(h1, h2);
    /* and a different configuration gives a different log */
    replay(v->paths[1], &sel_swa_ops, 0.8, &place_lru_ops, 20, 40, &t, hash_plan, &h3);
    assert_false(t.oom);
    replay_totals_free(&t);
    assert_int_not_equal(h1, h3);
}

/* alisa-cache: keeps a CPU copy only of what it would load. FP16 on this
 * shape makes recomputing cheaper (a 128-byte input against 256 bytes of
 * K and V), so a short GPU sends nothing to the CPU: evicted tokens are
 * dropped and every miss is recomputed. INT8 KV (128 bytes, and the same
 * input) makes loading cheaper: evicted tokens are offloaded and misses
 * loaded (a GPU of 15 FP16 tokens' bytes holds about 30 INT8 ones). */
static void test_alisa_cache_copies_to_the_cpu_only_what_it_will_load(void **state)
{
    struct env *v = *state;
    struct replay_totals t;
    replay(v->paths[2], &sel_swa_ops, 0.8, &place_alisa_cache_ops, 1000, 1000, &t, NULL, NULL);
    assert_int_equal(t.phase2_pos, -1);
    assert_int_equal(t.phase3_pos, -1);
    replay_totals_free(&t);
    replay(v->paths[2], &sel_swa_ops, 0.8, &place_alisa_cache_ops, 30, 1000, &t, NULL, NULL);
    assert_true(t.load_ns > t.recompute_ns);
    assert_int_equal(t.offloads, 0);
    assert_int_equal(t.loads, 0);
    assert_true(t.drops > 0 && t.gpu_misses > 0);
    assert_int_equal(t.recomputed_tokens, t.gpu_misses);
    replay_totals_free(&t);
    replay_prec(v->paths[2], &sel_swa_ops, 0.8, &place_alisa_cache_ops, 15, 1000, KV_INT8, &t,
                NULL, NULL);
    assert_true(t.load_ns < t.recompute_ns);
    assert_true(t.offloads > 0 && t.loads > 0);
    assert_int_equal(t.recomputed_tokens, 0);
    assert_int_equal(t.loads, t.gpu_misses);
    replay_totals_free(&t);
}

/* alisa, the paper's rule, with each stream's greedy schedule (trace 2: 32
 * + 48 = 80 positions, 6 streams, KV 256 bytes a token, layer input 128).
 * Worked by hand: GPU 30 tokens gives p1 = 30, alpha = 50/80; at the last
 * position n_off = 50 (the window starts at 72), so each stream offloads 50
 * tokens once and never takes one back, and every miss is a load of a CPU
 * token for its step. A CPU of 30 tokens (7680 bytes): n_off passes 30 at
 * position 48 (ceil(0.625 x 49) = 31): p2 = 48; at the end 50 x 256 - 7680
 * = 5120 bytes over, 128 saved per deletion: 40 deleted (beta 0.8), all of
 * them offloaded first (n_del = ceil(0.8 n_off) stays below the token just
 * leaving), so 300 offloads and 240 drops, and misses are loads or
 * recomputations. */
static void test_alisa_runs_its_greedy_schedule_through_three_phases(void **state)
{
    struct env *v = *state;
    struct replay_totals t;
    replay(v->paths[2], &sel_swa_ops, 0.8, &place_alisa_ops, 1000, 1000, &t, NULL, NULL);
    assert_int_equal(t.phase2_pos, -1);
    assert_int_equal(t.gpu_misses, 0);
    replay_totals_free(&t);
    replay(v->paths[2], &sel_swa_ops, 0.8, &place_alisa_ops, 30, 1000, &t, NULL, NULL);
    assert_int_equal(t.phase2_pos, 30);
    assert_int_equal(t.phase3_pos, -1);
    assert_int_equal(t.offloads, STREAMS * 50);
    assert_int_equal(t.drops, 0);
    assert_true(t.loads > 0);
    assert_int_equal(t.loads, t.gpu_misses);
    replay_totals_free(&t);
    replay(v->paths[2], &sel_swa_ops, 0.8, &place_alisa_ops, 30, 30, &t, NULL, NULL);
    assert_false(t.oom);
    assert_int_equal(t.phase2_pos, 30);
    assert_int_equal(t.phase3_pos, 48);
    assert_int_equal(t.offloads, STREAMS * 50);
    assert_int_equal(t.drops, STREAMS * 40);
    assert_true(t.recomputed_tokens > 0 && t.loads > 0);
    assert_int_equal(t.loads + t.recomputed_tokens, t.gpu_misses);
    replay_totals_free(&t);
}

/* A selection whose history is lost (an allocation in its observe failed:
 * swa's `failed` says so) must stop the stream with an error, not go on
 * choosing tokens from a partial sum. The double is swa with `failed`
 * reporting the loss from the first step. */
static int always_failed(const void *state)
{
    (void)state;
    return 1;
}

static void test_a_selection_that_lost_its_state_stops_the_step(void **state)
{
    (void)state;
    struct selection_ops broken = sel_swa_ops;
    broken.failed = always_failed;
    struct scheduler_config sc = {.sel = &broken, .sel_params = {.sparsity = 0.5},
                                  .place = &place_gpu_only_ops,
                                  .place_params = {.gpu_bytes = 64, .cpu_bytes = 0, .kv_bytes = 1},
                                  .n_streams = 1, .max_len = 16};
    struct scheduler *s;
    struct alisa_err e = {{0}};
    assert_int_equal(scheduler_create(&s, &sc, NULL, &e), 0);
    struct scheduler_plan plan;
    for (uint32_t pos = 0; pos < 4; pos++)
        assert_int_equal(scheduler_prefill(s, 0, pos, NULL, 4, &plan), 0);
    assert_int_equal(scheduler_step(s, 0, 4, NULL, &plan), ALISA_ENOMEM);
    /* and the real swa, whose observes succeeded, steps */
    sc.sel = &sel_swa_ops;
    struct scheduler *ok;
    assert_int_equal(scheduler_create(&ok, &sc, NULL, &e), 0);
    for (uint32_t pos = 0; pos < 4; pos++)
        assert_int_equal(scheduler_prefill(ok, 0, pos, NULL, 4, &plan), 0);
    assert_int_equal(scheduler_step(ok, 0, 4, NULL, &plan), 0);
    assert_true(plan.n_attended >= 1);
    scheduler_destroy(s);
    scheduler_destroy(ok);
}

/* Quest and InfiniGen attend their first two layers densely, as their code
 * does (selection_ops.dense_layers): with streams numbered sequence *
 * layers + layer, layers 0 and 1 of each sequence attend every token
 * (and need no present row: scheduler_stream_needs_present),
 * layers 2 and 3 their method's picks; --every-layer 1
 * (knob 2) selects in every layer; a shell that does not number its streams
 * by layer (layers 0) gets no dense streams. */
static void test_quest_and_infinigen_attend_their_first_two_layers_densely(void **state)
{
    (void)state;
    const struct selection_ops *sels[] = {&sel_quest_ops, &sel_infinigen_ops};
    float row[65]; /* one heavy token in each 16-token page, summing to about 1 */
    for (uint32_t t = 0; t <= 64; t++)
        row[t] = t % 16 == 3 ? 0.15f : 0.006f;
    for (size_t k = 0; k < 2; k++)
        for (int every = 0; every <= 2; every++) {
            struct scheduler_config sc = {
                .sel = sels[k], .sel_params = {.sparsity = 0.8},
                .place = &place_lru_ops,
                .place_params = {.gpu_bytes = 80, .cpu_bytes = 80, .kv_bytes = 1},
                .n_streams = 8, .layers = every == 2 ? 0 : 4, .max_len = 80};
            sc.sel_params.knob[2] = every == 1;
            struct scheduler *s;
            struct alisa_err e = {{0}};
            assert_int_equal(scheduler_create(&s, &sc, NULL, &e), 0);
            struct scheduler_plan plan;
            for (uint32_t st = 0; st < 8; st++) {
                for (uint32_t pos = 0; pos < 64; pos++)
                    assert_int_equal(scheduler_prefill(s, st, pos, NULL, 64, &plan), 0);
                int dense = every == 0 && st % 4 < 2;
                /* a dense stream needs no row: the shell computes none */
                assert_int_equal(scheduler_stream_needs_present(s, st), !dense);
                assert_int_equal(scheduler_step(s, st, 64, dense ? NULL : row, &plan), 0);
                assert_false(plan.place.oom);
                assert_true(scheduler_needs_present(s));
                if (dense ? plan.n_attended != 65 : plan.n_attended >= 65)
                    fail_msg("%s, every-layer %d, stream %u: %u attended", sels[k]->name,
                             every, st, plan.n_attended);
            }
            scheduler_destroy(s);
        }
}

/* Each stream's own placement parameters (FlexGen's split by sequences in
 * the executor): stream 0 keeps every token on the GPU, stream 1 every token
 * on the CPU, under the same dense selection; the second loads each earlier
 * token every step and needs a step's worth of staging slots (dense: every
 * token), the first none. The parameters are copied: the caller's array
 * may go at once. */
/* A stream begun again (a serving slot's next request) decides as a fresh
 * scheduler's stream: H2O under LRU with a small device tier over 40
 * positions, then reset and run again: the same attended sets, moves and
 * retirements at every step. An offline placement is refused. */
static void test_a_reset_stream_decides_as_a_fresh_one(void **state)
{
    (void)state;
    float row[41];
    struct scheduler_config sc = {
        .sel = &sel_h2o_ops, .sel_params = {.sparsity = 0.6}, .place = &place_lru_ops,
        .place_params = {.gpu_bytes = 20, .cpu_bytes = 64, .kv_bytes = 1},
        .n_streams = 1, .max_len = 64};
    struct scheduler *s;
    struct alisa_err e = {{0}};
    assert_int_equal(scheduler_create(&s, &sc, NULL, &e), 0);
    uint32_t first[41][41], n_first[41], moves[41];
    for (int pass = 0; pass < 2; pass++) {
        if (pass)
            assert_int_equal(scheduler_stream_reset(s, 0, &e), 0);
        struct scheduler_plan plan;
        for (uint32_t pos = 0; pos <= 40; pos++) {
            for (uint32_t t = 0; t <= pos; t++) /* heavier on a few old tokens */
                row[t] = (t % 7 == 1 ? 5.0f : 1.0f) / (float)(pos + 1);
            if (pos < 16) {
                assert_int_equal(scheduler_prefill(s, 0, pos, row, 16, &plan), 0);
                scheduler_observe_prefill(s, 0, pos, row, 16);
                continue;
            }
            assert_int_equal(scheduler_step(s, 0, pos, NULL, &plan), 0);
            assert_false(plan.place.oom);
            uint32_t m = plan.place.n_load + plan.place.n_offload + plan.n_retired;
            if (!pass) {
                n_first[pos] = plan.n_attended;
                moves[pos] = m;
                memcpy(first[pos], plan.attended, plan.n_attended * sizeof *plan.attended);
            } else {
                assert_int_equal(plan.n_attended, n_first[pos]);
                assert_int_equal(m, moves[pos]);
                assert_memory_equal(plan.attended, first[pos],
                                    plan.n_attended * sizeof *plan.attended);
            }
            scheduler_observe_dense(s, 0, row);
        }
    }
    scheduler_destroy(s);
    struct kv_future fut = {0};
    sc.place = &place_belady_ops;
    sc.sel = &sel_dense_ops;
    assert_int_equal(scheduler_create(&s, &sc, &fut, &e), 0);
    assert_int_equal(scheduler_stream_reset(s, 0, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "offline bound"));
    scheduler_destroy(s);
}

static void test_streams_take_their_own_placement_parameters(void **state)
{
    (void)state;
    struct place_params *pp = malloc(2 * sizeof *pp);
    assert_non_null(pp);
    pp[0] = (struct place_params){.gpu_bytes = 16, .cpu_bytes = 0, .kv_bytes = 1,
                                  .act_bytes = 1, .gpu_fraction = 1};
    pp[1] = (struct place_params){.gpu_bytes = 0, .cpu_bytes = 16, .kv_bytes = 1,
                                  .act_bytes = 1, .gpu_fraction = 0};
    /* a sparsity dense ignores: the staging must still hold every token */
    struct scheduler_config sc = {.sel = &sel_dense_ops, .sel_params = {.sparsity = 0.5},
                                  .place = &place_flexgen_ops, .stream_params = pp,
                                  .n_streams = 2, .max_len = 16};
    struct scheduler *s;
    struct alisa_err e = {{0}};
    assert_int_equal(scheduler_create(&s, &sc, NULL, &e), 0);
    free(pp);
    assert_int_equal(scheduler_stream_gpu_cap(s, 0), 16);
    assert_int_equal(scheduler_stream_cpu_cap(s, 0), 0);
    assert_int_equal(scheduler_stream_gpu_cap(s, 1), 0);
    assert_int_equal(scheduler_stream_cpu_cap(s, 1), 16);
    assert_int_equal(scheduler_stream_dev_slots(s, 1), 16);
    struct scheduler_plan plan;
    for (uint32_t st = 0; st < 2; st++) {
        for (uint32_t pos = 0; pos < 4; pos++)
            assert_int_equal(scheduler_prefill(s, st, pos, NULL, 4, &plan), 0);
        for (uint32_t pos = 4; pos < 8; pos++) {
            assert_int_equal(scheduler_step(s, st, pos, NULL, &plan), 0);
            assert_false(plan.place.oom);
            assert_int_equal(plan.place.n_load, st ? pos : 0);
            assert_int_equal(plan.place.n_offload, st ? 1 : 0);
        }
        assert_int_equal(plan.census.gpu, st ? 0 : 8);
    }
    scheduler_destroy(s);
}

/* FlexGen's split by whole sequences (place_flexgen_split): floor(n x
 * share) sequences' streams wholly on the GPU, the rest wholly on the CPU,
 * each with room for every token on its tier. */
static void test_flexgen_split_puts_whole_sequences_on_each_tier(void **state)
{
    (void)state;
    struct place_params base = {.kv_bytes = 4, .act_bytes = 2, .gpu_bytes = 7, .cpu_bytes = 9,
                                .gpu_fraction = -1, .load_ns = 3}, pp[8];
    const double shares[] = {0.6, 0.74, 0.75, 1.5, 0.0, 0.24};
    const uint32_t on_gpu[] = {2, 2, 3, 4, 0, 0};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(place_flexgen_split(&base, 4, 2, 10, shares[i], pp), on_gpu[i]);
        for (uint32_t b = 0; b < 4; b++)
            for (uint32_t l = 0; l < 2; l++) {
                const struct place_params *p = &pp[b * 2 + l];
                int gpu = b < on_gpu[i];
                assert_true(p->gpu_fraction == (gpu ? 1.0 : 0.0));
                assert_int_equal(p->gpu_bytes, gpu ? 40 : 0);
                assert_int_equal(p->cpu_bytes, gpu ? 0 : 40);
                assert_true(p->load_ns == 3 && p->kv_bytes == 4 && p->act_bytes == 2);
            }
    }
}

/* The replay of flexgen-static by whole sequences (the executor's form)
 * against the split averaged over every stream: with the GPU holding half
 * of the KV of 2 sequences, the same bytes cross the link both ways, but
 * only sequence 1's tokens move, whole, so half as many tokens are loaded
 * and offloaded. With a quarter no whole sequence fits: everything moves
 * whole, a third more bytes than the averaged quarter-on-GPU split. */
static void test_flexgen_by_whole_sequences_moves_whole_tokens_of_the_cpu_sequences(void **state)
{
    struct env *v = *state;
    struct replay_totals avg, whole;
    struct alisa_err e = {{0}};
    const uint32_t max_len = 64; /* t0: 16 + 48 positions, 2 sequences of 3 layers */
    for (int quarter = 0; quarter < 2; quarter++) {
        uint32_t gpu_tokens = quarter ? max_len / 4 : max_len / 2;
        struct replay_config cfg = {.sel = &sel_dense_ops, .place = &place_flexgen_ops,
                                    .precision = KV_FP16,
                                    .gpu_kv_bytes = (uint64_t)gpu_tokens * KVB * STREAMS,
                                    .cpu_kv_bytes = (uint64_t)max_len * KVB * STREAMS,
                                    .hw = &test_hw, .gpu_fraction = -1};
        if (replay_trace(v->paths[0], &cfg, &avg, NULL, NULL, &e))
            fail_msg("%s", e.msg);
        cfg.flexgen_whole = 1;
        if (replay_trace(v->paths[0], &cfg, &whole, NULL, NULL, &e))
            fail_msg("%s", e.msg);
        assert_false(avg.oom || whole.oom);
        assert_true(avg.loads > 0);
        if (!quarter) {
            assert_int_equal(whole.bytes_h2d, avg.bytes_h2d);
            assert_int_equal(whole.bytes_d2h, avg.bytes_d2h);
            assert_int_equal(2 * whole.loads, avg.loads);
            assert_int_equal(whole.offloads, 3 * max_len); /* sequence 1's every token */
            assert_int_equal(avg.offloads, STREAMS * max_len);
        } else {
            assert_int_equal(whole.loads, avg.loads);
            assert_int_equal(3 * whole.bytes_h2d, 4 * avg.bytes_h2d);
            assert_int_equal(whole.offloads, STREAMS * max_len);
        }
        replay_totals_free(&avg);
        replay_totals_free(&whole);
    }
}

/* A per-head trace for the per-head tests: 3 layers, 4 query heads over 2
 * KV heads (pairs share one), n_seqs sequences of 12 + 28. */
static void write_heads(const char *path, int per_head, uint32_t n_seqs)
{
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.n_layers = 3;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.hidden = 64;
    p.vocab = 100;
    p.prompt_len = 12;
    p.gen_len = 28;
    p.seed = 7;
    p.n_seqs = n_seqs;
    p.per_head = per_head;
    struct alisa_err e = {{0}};
    if (trace_gen_write(&p, path, &e))
        fail_msg("%s", e.msg);
}

/* What the per-head replay's plans are checked against: every stored
 * per-head row, read straight from the file. */
struct head_check {
    float *rows;          /* (pos, layer, head, token) */
    uint32_t L, H, G, N;
    uint32_t plans, decode_plans, dense_plans;
    const struct selection_ops *sel;
    struct sel_params sp;
};

static void check_head_plan(void *user, const struct scheduler_plan *p, uint32_t seq,
                            uint32_t layer, const float *row)
{
    struct head_check *c = user;
    assert_int_equal(seq, 0);
    const uint32_t g = p->stream % c->G, group = c->H / c->G;
    assert_int_equal(p->stream / c->G, layer);
    c->plans++;
    /* the row is the mean of the two query heads that share KV head g */
    for (uint32_t t = 0; t <= p->pos; t++) {
        const float *q = c->rows + (((size_t)p->pos * c->L + layer) * c->H + g * group) * c->N;
        float want = (q[t] + q[c->N + t]) / 2;
        assert_true(row[t] == want);
    }
    if (p->prefill)
        return;
    c->decode_plans++;
    if (c->sel->dense_layers && layer < c->sel->dense_layers(&c->sp)) {
        assert_int_equal(p->n_attended, p->pos + 1);
        c->dense_plans++;
        return;
    }
    if (c->sel != &sel_topk_ops)
        return;
    /* brute-force top-k of this head's row: the query itself, then the
     * b - 1 heaviest earlier tokens, the newer first among equals */
    uint32_t b = sel_budget(&c->sp, p->pos + 1), n = 0;
    for (uint32_t t = 0; t <= p->pos; t++) {
        uint32_t heavier = 0;
        for (uint32_t u = 0; u < p->pos; u++)
            heavier += row[u] > row[t] || (row[u] == row[t] && u > t);
        if (t == p->pos || heavier < b - 1) {
            assert_true(n < p->n_attended);
            assert_int_equal(p->attended[n], t);
            n++;
        }
    }
    assert_int_equal(n, p->n_attended);
}

/* A head-mean run's recall per KV head, by brute force from the stored
 * per-head rows: every decode plan's set over each KV head's row. */
struct head_recall {
    const struct head_check *c;
    double sum, min;
    uint64_t n;
};

static void sum_head_recall(void *user, const struct scheduler_plan *p, uint32_t seq,
                            uint32_t layer, const float *row)
{
    (void)seq, (void)row;
    struct head_recall *a = user;
    const struct head_check *c = a->c;
    if (p->prefill)
        return;
    for (uint32_t g = 0; g < c->G; g++) {
        const float *q = c->rows + (((size_t)p->pos * c->L + layer) * c->H + 2 * g) * c->N;
        double all = 0, kept = 0;
        for (uint32_t t = 0; t <= p->pos; t++)
            all += (q[t] + q[c->N + t]) / 2;
        for (uint32_t i = 0; i < p->n_attended; i++)
            kept += (q[p->attended[i]] + q[c->N + p->attended[i]]) / 2;
        double r = all > 0 ? kept / all : 1.0;
        a->sum += r;
        a->min = r < a->min ? r : a->min;
        a->n++;
    }
}

/* Per-head streams (replay_config.per_head): each (layer, KV head) stream
 * is driven by the mean of its query heads' stored rows and selects on it
 * alone (topk checked by brute force; quest's first two layers dense on
 * every head). */
static void test_per_head_streams_select_on_their_kv_heads_rows(void **state)
{
    struct env *v = *state;
    char path[700];
    snprintf(path, sizeof path, "%s/heads.trace", v->dir);
    write_heads(path, 1, 1);
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    assert_int_equal(trace_reader_open(&r, path, &e), 0);
    const struct trace_header *h = trace_reader_header(r);
    struct head_check c = {.L = h->n_layers, .H = h->n_heads, .G = h->n_kv_heads,
                           .N = trace_reader_max_len(r)};
    c.rows = calloc((size_t)c.N * c.L * c.H * c.N, sizeof *c.rows);
    assert_non_null(c.rows);
    struct trace_step st;
    while (trace_reader_next(r, &st, &e) == 1)
        for (uint32_t i = 0; i < c.L * c.H; i++)
            memcpy(c.rows + ((size_t)st.pos * c.L * c.H + i) * c.N, st.w_head + (size_t)i * st.n_ctx,
                   st.n_ctx * sizeof *c.rows);
    trace_reader_destroy(r);
    const struct selection_ops *sels[] = {&sel_topk_ops, &sel_quest_ops, &sel_h2o_ops};
    for (int i = 0; i < 3; i++) {
        c.sel = sels[i];
        c.sp = (struct sel_params){.sparsity = 0.6};
        c.plans = c.decode_plans = c.dense_plans = 0;
        struct replay_config cfg = {.sel = c.sel, .sel_params = c.sp, .place = &place_lru_ops,
                                    .gpu_kv_bytes = UINT64_MAX / 4, .cpu_kv_bytes = UINT64_MAX / 4,
                                    .hw = &test_hw, .gpu_fraction = -1, .per_head = 1};
        struct replay_totals t;
        assert_int_equal(replay_trace(path, &cfg, &t, check_head_plan, &c, &e), 0);
        assert_int_equal(t.n_streams, c.L * c.G);
        assert_int_equal(t.heads, c.G);
        assert_int_equal(c.plans, c.N * c.L * c.G);
        assert_int_equal(c.decode_plans, 28 * c.L * c.G);
        assert_int_equal(t.kv_bytes, 2 * 32 * 2 / 2); /* one KV head's K and V */
        assert_int_equal(c.dense_plans, c.sel == &sel_quest_ops ? 28 * 2 * c.G : 0);
        /* the head-mean run's recall per KV head is its sets over each KV
         * head's row */
        struct replay_totals m;
        struct head_recall a = {.c = &c, .min = 1};
        cfg.per_head = 0;
        assert_int_equal(replay_trace(path, &cfg, &m, sum_head_recall, &a, &e), 0);
        assert_int_equal(a.n, 28 * c.L * c.G);
        assert_true(fabs(m.head_recall_mean - a.sum / a.n) < 1e-12);
        assert_true(fabs(m.head_recall_min - a.min) < 1e-12);
        if (c.sel == &sel_topk_ops) {
            /* each head's own top-k keeps at least what the head-mean top-k
             * keeps of that head's row, step by step, so on average and at
             * worst */
            assert_true(m.head_recall_mean < t.head_recall_mean);
            assert_true(m.head_recall_min <= t.head_recall_min);
        }
        replay_totals_free(&m);
        replay_totals_free(&t);
    }
    free(c.rows);
}

/* Per-head streams on a trace whose every head's row is the head-mean row
 * decide per head what the head-mean replay decides per token: the same
 * bytes and peaks, every count G times over, under an online cache, an
 * offline bound and ALISA's schedule, FP16 and INT8. */
static void test_per_head_streams_of_equal_heads_are_the_head_mean_replay(void **state)
{
    struct env *v = *state;
    char src[700], dst[700];
    snprintf(src, sizeof src, "%s/mean.trace", v->dir);
    snprintf(dst, sizeof dst, "%s/equal-heads.trace", v->dir);
    write_heads(src, 0, 2);
    tu_copy_trace_with_equal_heads(src, dst);
    const struct placement_ops *places[] = {&place_lru_ops, &place_belady_ops, &place_alisa_ops};
    const struct selection_ops *sels[] = {&sel_swa_ops, &sel_topk_ops, &sel_h2o_ops};
    const enum kv_precision precs[] = {KV_FP16, KV_INT8};
    const uint64_t kvb = 2 * 32 * 2, streams = 6; /* K and V of 2 KV heads of 16; 2 x 3 */
    struct alisa_err e = {{0}};
    for (int k = 0; k < 3; k++)
        for (int pr = 0; pr < 2; pr++) {
            struct replay_config cfg = {.sel = sels[k], .sel_params = {.sparsity = 0.5},
                                        .place = places[k], .precision = precs[pr],
                                        .gpu_kv_bytes = pr ? (24 * kvb / 2 + 2 * 32 * 2 * 2) * streams
                                                           : 24 * kvb * streams,
                                        .cpu_kv_bytes = 40 * kvb * streams * 2,
                                        .hw = &test_hw, .gpu_fraction = -1};
            struct replay_totals m, ph;
            assert_int_equal(replay_trace(dst, &cfg, &m, NULL, NULL, &e), 0);
            cfg.per_head = 1;
            assert_int_equal(replay_trace(dst, &cfg, &ph, NULL, NULL, &e), 0);
            if (m.oom || ph.oom || !(m.bytes_h2d > 0 || m.bytes_d2h > 0))
                fail_msg("%s/%s %s: oom %d/%d, %llu B up (the tier should be small enough to "
                         "move and large enough to run)", sels[k]->name, places[k]->name,
                         kv_precision_name(precs[pr]), m.oom, ph.oom,
                         (unsigned long long)m.bytes_h2d);
            assert_int_equal(ph.heads, 2);
            assert_int_equal(ph.bytes_h2d, m.bytes_h2d);
            assert_int_equal(ph.bytes_d2h, m.bytes_d2h);
            assert_int_equal(ph.peak_gpu_bytes, m.peak_gpu_bytes);
            assert_int_equal(ph.peak_cpu_bytes, m.peak_cpu_bytes);
            assert_int_equal(ph.decode_steps, 2 * m.decode_steps);
            assert_int_equal(ph.attended_tokens, 2 * m.attended_tokens);
            assert_int_equal(ph.gpu_misses, 2 * m.gpu_misses);
            assert_int_equal(ph.loads, 2 * m.loads);
            assert_int_equal(ph.offloads, 2 * m.offloads);
            assert_int_equal(ph.recomputed_tokens, 2 * m.recomputed_tokens);
            assert_int_equal(ph.drops, 2 * m.drops);
            assert_int_equal(ph.phase2_pos, m.phase2_pos);
            assert_int_equal(ph.phase3_pos, m.phase3_pos);
            assert_true(fabs(ph.fetch_cost_ns - m.fetch_cost_ns) < 1e-6 * (1 + m.fetch_cost_ns));
            /* each step's recall counted twice, so summed in another order */
            assert_true(fabs(ph.recall_mean - m.recall_mean) < 1e-12 &&
                        ph.recall_min == m.recall_min);
            replay_totals_free(&m);
            replay_totals_free(&ph);
        }
}

/* Per-head streams need per-head rows, and refuse what numbers streams by
 * layer or has no per-head rows: one-line errors naming the trace. */
static void test_per_head_streams_refuse_what_they_cannot_replay(void **state)
{
    struct env *v = *state;
    struct replay_config cfg = {.sel = &sel_swa_ops, .sel_params = {.sparsity = 0.5},
                                .place = &place_lru_ops, .gpu_kv_bytes = UINT64_MAX / 4,
                                .cpu_kv_bytes = UINT64_MAX / 4, .hw = &test_hw,
                                .gpu_fraction = -1, .per_head = 1};
    struct replay_totals t;
    struct alisa_err e = {{0}};
    assert_int_equal(replay_trace(v->paths[0], &cfg, &t, NULL, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, v->paths[0]));
    assert_non_null(strstr(e.msg, "per-head rows"));
    char path[700];
    snprintf(path, sizeof path, "%s/heads2.trace", v->dir);
    write_heads(path, 1, 1);
    struct trace_gen_params ext;
    trace_gen_defaults(&ext);
    cfg.extend = &ext;
    cfg.positions = 60;
    e = (struct alisa_err){{0}};
    assert_int_equal(replay_trace(path, &cfg, &t, NULL, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "extension"));
    cfg.extend = NULL;
    cfg.positions = 0;
    cfg.place = &place_flexgen_ops;
    cfg.flexgen_whole = 1;
    e = (struct alisa_err){{0}};
    assert_int_equal(replay_trace(path, &cfg, &t, NULL, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "whole"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_selection_that_lost_its_state_stops_the_step),
        cmocka_unit_test(test_per_head_streams_select_on_their_kv_heads_rows),
        cmocka_unit_test(test_per_head_streams_of_equal_heads_are_the_head_mean_replay),
        cmocka_unit_test(test_per_head_streams_refuse_what_they_cannot_replay),
        cmocka_unit_test(test_quest_and_infinigen_attend_their_first_two_layers_densely),
        cmocka_unit_test(test_streams_take_their_own_placement_parameters),
        cmocka_unit_test(test_a_reset_stream_decides_as_a_fresh_one),
        cmocka_unit_test(test_flexgen_split_puts_whole_sequences_on_each_tier),
        cmocka_unit_test(test_flexgen_by_whole_sequences_moves_whole_tokens_of_the_cpu_sequences),
        cmocka_unit_test(test_every_selection_and_placement_keeps_the_invariants),
        cmocka_unit_test(test_belady_never_misses_more_than_an_online_placement),
        cmocka_unit_test(test_optimum_replays_the_bounds_on_the_same_run),
        cmocka_unit_test(test_oracle_cost_is_optimal_when_recompute_is_cheaper_and_bounds_hold),
        cmocka_unit_test(test_decision_log_is_deterministic),
        cmocka_unit_test(test_alisa_cache_copies_to_the_cpu_only_what_it_will_load),
        cmocka_unit_test(test_alisa_runs_its_greedy_schedule_through_three_phases),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
