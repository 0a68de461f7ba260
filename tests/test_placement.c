/* Placement engine and policies on scripted access sequences whose moves
 * (loads, recomputes, offloads, drops, misses) were worked out by hand.
 * kv_bytes = act_bytes = 1, so byte counts equal token counts, and kept
 * layer inputs take no room (input_bytes 0) unless a test says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "placement.h"

#define MAXT 16
#define NONE 99 /* list terminator in the tables */

struct fixture {
    const struct placement_ops *ops;
    void *st;
    struct kv_stream s;
    struct place_params p;
    uint32_t bufs[4][MAXT];
};

static void fx_init(struct fixture *f, const struct placement_ops *ops, uint32_t gpu, uint32_t cpu,
                    const struct kv_future *fut)
{
    memset(f, 0, sizeof *f);
    f->ops = ops;
    f->p = (struct place_params){.gpu_bytes = gpu, .cpu_bytes = cpu, .kv_bytes = 1,
                                 .act_bytes = 1, .load_ns = 2, .recompute_ns = 1,
                                 .gpu_fraction = -1};
    struct alisa_err e = {{0}};
    assert_int_equal(kv_stream_init(&f->s, &f->p, MAXT, &e), 0);
    assert_int_equal(ops->create(&f->st, &f->p, MAXT, fut, &e), 0);
}

static void fx_deinit(struct fixture *f)
{
    f->ops->destroy(f->st);
    kv_stream_deinit(&f->s);
}

/* Rebuilds the stream and the policy state after a test edited f->p. */
static void fx_apply(struct fixture *f)
{
    struct alisa_err e = {{0}};
    f->ops->destroy(f->st);
    kv_stream_deinit(&f->s);
    assert_int_equal(kv_stream_init(&f->s, &f->p, MAXT, &e), 0);
    assert_int_equal(f->ops->create(&f->st, &f->p, MAXT, NULL, &e), 0);
}

/* One scripted decode step: attended set (NONE-terminated, pos last) and
 * the expected moves, each NONE-terminated. */
struct step_case {
    uint32_t pos;
    uint32_t local_start;
    uint32_t att[MAXT];
    uint32_t load[MAXT], recompute[MAXT], offload[MAXT], drop[MAXT];
    uint32_t misses;
    int oom; /* 1: the GPU tier, 2: the CPU tier */
};

static uint32_t list_len(const uint32_t *l)
{
    uint32_t n = 0;
    while (n < MAXT && l[n] != NONE)
        n++;
    return n;
}

static void expect_list(const char *what, uint32_t pos, const uint32_t *got, uint32_t n_got,
                        const uint32_t *want)
{
    uint32_t n = list_len(want);
    if (n != n_got || memcmp(got, want, n * sizeof *got) != 0) {
        char g[128] = "";
        for (uint32_t i = 0; i < n_got; i++)
            snprintf(g + strlen(g), sizeof g - strlen(g), "%u ", got[i]);
        fail_msg("pos %u: %s = {%s}, expected %u entries", pos, what, g, n);
    }
}

static void run_steps(struct fixture *f, const struct step_case *steps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct step_case *c = &steps[i];
        struct place_result r = {.load = f->bufs[0], .recompute = f->bufs[1],
                                 .offload = f->bufs[2], .drop = f->bufs[3]};
        uint32_t n_att = list_len(c->att);
        place_step(f->ops, f->st, &f->s, &f->p, c->att, n_att, NULL, 0, c->local_start, c->pos,
                   &r);
        assert_int_equal(r.oom, c->oom != 0);
        assert_int_equal(r.oom_cpu, c->oom == 2);
        if (c->oom)
            return;
        expect_list("load", c->pos, r.load, r.n_load, c->load);
        expect_list("recompute", c->pos, r.recompute, r.n_recompute, c->recompute);
        expect_list("offload", c->pos, r.offload, r.n_offload, c->offload);
        expect_list("drop", c->pos, r.drop, r.n_drop, c->drop);
        assert_int_equal(r.gpu_misses, c->misses);
        assert_int_equal(r.bytes_h2d, r.n_load * f->p.kv_bytes + r.n_recompute * f->p.act_bytes);
        assert_int_equal(r.bytes_d2h, r.n_offload * f->p.kv_bytes);
        struct alisa_err e = {{0}};
        if (kv_stream_check(&f->s, &f->p, c->pos, c->att, n_att, NULL, &e))
            fail_msg("pos %u: %s", c->pos, e.msg);
    }
}

#define L(...) {__VA_ARGS__, NONE}
#define E {NONE}

static void test_lru_cascade_matches_hand_worked_moves(void **state)
{
    (void)state;
    /* GPU 3 tokens, CPU 2. Worked by hand:
     * pos3 {0,3}: GPU {0,1,2} full; LRU of unpinned {1 (used 2), 2 (used 2)}: 1 -> CPU.
     * pos4 {1,4}: 1 misses; GPU victim among {0 (3), 2 (2), 3 (3)}: 2 -> CPU {1,2};
     *   load 1; admit 4: victim among {0, 3}: 0, no CPU copy; CPU full, victim
     *   among unpinned CPU {2}: 2 dropped; 0 -> CPU {1,0}.
     * pos5 {2,5}: 2 dropped -> miss; GPU victim among {3 (3), 1 (4), 4 (4)}: 3,
     *   CPU full, victim among {1 (4), 0 (3)}: 0 dropped; 3 -> CPU; recompute 2;
     *   admit 5: victim among {1, 4}: 1, which has a CPU copy: free. */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(1, 2), E, E, E, E, 0, 0},
        {3, 0, L(0, 3), E, E, L(1), E, 0, 0},
        {4, 0, L(1, 4), L(1), E, L(2, 0), L(2), 1, 0},
        {5, 0, L(2, 5), E, L(2), L(3), L(0), 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_lru_ops, 3, 2, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    assert_int_equal(kv_place_of(&f.s, 0), KV_PLACE_DROPPED);
    assert_int_equal(kv_place_of(&f.s, 1), KV_PLACE_CPU);
    assert_int_equal(kv_place_of(&f.s, 5), KV_PLACE_GPU);
    fx_deinit(&f);
}

static void test_hot_buffer_writes_every_new_token_through_so_evictions_move_nothing(void **state)
{
    (void)state;
    /* lru's accesses of the test above, GPU 3 tokens, a CPU tier that holds
     * everything (10). Every produced token is offloaded in its own step;
     * the victims are lru's (pos3: 1, pos4: 2 then 0, pos5: 3 then 1), each
     * already copied, so nothing else moves and nothing is dropped; the
     * misses are loads. */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, L(0), E, 0, 0},
        {1, 0, L(0, 1), E, E, L(1), E, 0, 0},
        {2, 0, L(1, 2), E, E, L(2), E, 0, 0},
        {3, 0, L(0, 3), E, E, L(3), E, 0, 0},
        {4, 0, L(1, 4), L(1), E, L(4), E, 1, 0},
        {5, 0, L(2, 5), L(2), E, L(5), E, 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_hot_buffer_ops, 3, 10, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    assert_int_equal(kv_place_of(&f.s, 0), KV_PLACE_CPU);
    assert_int_equal(kv_place_of(&f.s, 3), KV_PLACE_CPU);
    assert_int_equal(kv_place_of(&f.s, 2), KV_PLACE_GPU);
    assert_int_equal(f.s.cpu_tokens, 6);
    fx_deinit(&f);
    /* a CPU tier of 4: tokens 4 and 5 find no free room and are not copied
     * (no other copy is deleted for them); the victims are the same, all
     * copied already */
    const struct step_case small[] = {
        {0, 0, L(0), E, E, L(0), E, 0, 0},
        {1, 0, L(0, 1), E, E, L(1), E, 0, 0},
        {2, 0, L(1, 2), E, E, L(2), E, 0, 0},
        {3, 0, L(0, 3), E, E, L(3), E, 0, 0},
        {4, 0, L(1, 4), L(1), E, E, E, 1, 0},
        {5, 0, L(2, 5), L(2), E, E, E, 1, 0},
    };
    fx_init(&f, &place_hot_buffer_ops, 3, 4, NULL);
    run_steps(&f, small, sizeof small / sizeof small[0]);
    assert_int_equal(f.s.cpu_tokens, 4);
    assert_true((f.s.flags[5] & KV_CPU) == 0);
    fx_deinit(&f);
}

/* InfLLM's block caches, blocks of 2 tokens, a GPU of 6: both evict whole
 * blocks; block-lru the block used longest ago, block-score the block with
 * the lowest score (a block attended at a step scores the weight it got
 * then, the others' scores decay by 0.1 a step). Worked by hand, with the
 * weights below fed after each step: after pos 5 block 0 was last used at 4
 * and scores 0.09, block 1 used at 5 scores 0.05, block 2 used at 5 scores
 * 0.95. At pos 6 (attending 4, 6) block-lru offloads block 0 (tokens 0, 1),
 * block-score block 1 (tokens 2, 3). */
static void test_block_caches_evict_whole_blocks_by_use_or_by_score(void **state)
{
    (void)state;
    static const uint32_t att[7][3] = {{0, NONE}, {0, 1, NONE}, {0, 1, 2}, {0, 3, NONE},
                                       {0, 4, NONE}, {2, 5, NONE}, {4, 6, NONE}};
    static const float w[7][3] = {{1}, {.5f, .5f}, {.45f, .45f, .1f}, {.9f, .1f}, {.9f, .1f},
                                  {.05f, .95f}, {.5f, .5f}};
    /* run 2: block-lru again, pos 5 attending 0 and 5: block 1 is now the
     * one used longest ago (at 3), so it goes, not the lowest block */
    for (int run = 0; run < 3; run++) {
        const int by_score = run == 1;
        struct fixture f;
        fx_init(&f, by_score ? &place_block_score_ops : &place_block_lru_ops, 6, 10, NULL);
        f.p.unit_tokens = 2;
        fx_apply(&f);
        for (uint32_t pos = 0; pos < 7; pos++) {
            struct step_case c = {pos, 0, {NONE}, E, E, E, E, 0, 0};
            uint32_t n = 0;
            while (n < 3 && att[pos][n] != NONE) {
                c.att[n] = run == 2 && pos == 5 && n == 0 ? 0 : att[pos][n];
                n++;
            }
            c.att[n] = NONE;
            if (pos == 6) {
                uint32_t lru[] = L(0, 1), score[] = L(2, 3);
                memcpy(c.offload, run ? score : lru, sizeof lru);
            }
            run_steps(&f, &c, 1);
            if (f.ops->observe)
                f.ops->observe(f.st, c.att, w[pos], n, pos);
        }
        assert_int_equal(f.s.gpu_tokens, 5);
        fx_deinit(&f);
    }
}

/* Blocks tile from the selection's origin (infllm's first block starts
 * after its initial tokens): with blocks of 4 from token 6, tokens 0-1,
 * 2-5, 6-9 are blocks 0, 1, 2. With blocks of 2 from token 1 ({0}, {1, 2},
 * {3, 4}) and a GPU of 3, block-lru at pos 3 (attending 0 and 3) evicts
 * token 1 (the unpinned tokens 1 and 2 share block {1, 2}, last used at 2;
 * the lower id goes first) and takes its mate 2 with it; tiled from 0 the
 * mate would be the pinned token 0 and only 1 would go. */
static void test_blocks_tile_from_the_selections_origin(void **state)
{
    (void)state;
    struct place_params q = {.unit_tokens = 4, .unit_origin = 6};
    const uint32_t idx[10] = {0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, first[10] = {0, 0, 2, 2, 2, 2, 6, 6, 6, 6};
    for (uint32_t t = 0; t < 10; t++) {
        assert_int_equal(place_unit_index(&q, t), idx[t]);
        assert_int_equal(place_unit_first(&q, t), first[t]);
    }
    for (uint32_t origin = 0; origin < 2; origin++) {
        struct fixture f;
        fx_init(&f, &place_block_lru_ops, 3, 10, NULL);
        f.p.unit_tokens = 2;
        f.p.unit_origin = origin;
        fx_apply(&f);
        struct step_case steps[] = {
            {0, 0, L(0), E, E, E, E, 0, 0},
            {1, 0, L(0, 1), E, E, E, E, 0, 0},
            {2, 0, L(0, 2), E, E, E, E, 0, 0},
            {3, 0, L(0, 3), E, E, L(1), E, 0, 0},
        };
        if (origin == 1) {
            uint32_t two[] = L(1, 2);
            memcpy(steps[3].offload, two, sizeof two);
        }
        run_steps(&f, steps, 4);
        fx_deinit(&f);
    }
}

static void test_fifo_evicts_by_gpu_arrival_not_by_use(void **state)
{
    (void)state;
    /* GPU 2. pos2 {0,2}: 0 pinned, 1 goes. pos3 {1,3}: 1 misses; arrivals
     * 0 (step 0) and 2 (step 2): 0 goes although it was just used; 1 is
     * loaded (arrives at 3); admitting 3 pushes out 2. */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 2), E, E, L(1), E, 0, 0},
        {3, 0, L(1, 3), L(1), E, L(0, 2), E, 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_fifo_ops, 2, 10, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
}

static void test_lfu_evicts_the_least_used_where_lru_would_not(void **state)
{
    (void)state;
    /* GPU 3. Uses: 0 at 0, 1, 2 (3 times); 1 at 1; 2 at 2; 3 at 3.
     * pos3 {3}: fewest uses 1 and 2 (once each), older last use: 1 goes.
     * pos4 {4}: among 0 (3 uses), 2 (1), 3 (1, used later): 2 goes; LRU would
     * evict 0 (last used at 2, tied with 2, lower id). */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 2), E, E, E, E, 0, 0},
        {3, 0, L(3), E, E, L(1), E, 0, 0},
        {4, 0, L(4), E, E, L(2), E, 0, 0},
    };
    struct fixture f;
    fx_init(&f, &place_lfu_ops, 3, 10, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
    const struct step_case lru_steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 2), E, E, E, E, 0, 0},
        {3, 0, L(3), E, E, L(1), E, 0, 0},
        {4, 0, L(4), E, E, L(0), E, 0, 0},
    };
    fx_init(&f, &place_lru_ops, 3, 10, NULL);
    run_steps(&f, lru_steps, sizeof lru_steps / sizeof lru_steps[0]);
    fx_deinit(&f);
}

static void test_lfu_aged_lets_old_counts_fade_where_lfu_keeps_them(void **state)
{
    (void)state;
    /* GPU 2. A token's priority is its uses plus the age at its last use;
     * the age becomes each victim's priority.
     * pos0 {0}: 0 at 1.  pos1 {0, 1}: 1 at 1, 0 used twice: 2.
     * pos2 {2}: victim 1 (priority 1), age 1; 2 enters at 1 + 1 = 2.
     * pos3 {3}: 0 and 2 both at 2, the less recently used (0) goes. LFU
     * evicts 2 there (one use against two). */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, L(1), E, 0, 0},
        {3, 0, L(3), E, E, L(0), E, 0, 0},
    };
    struct fixture f;
    fx_init(&f, &place_lfu_aged_ops, 2, 10, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
    const struct step_case lfu_steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, L(1), E, 0, 0},
        {3, 0, L(3), E, E, L(2), E, 0, 0},
    };
    fx_init(&f, &place_lfu_ops, 2, 10, NULL);
    run_steps(&f, lfu_steps, sizeof lfu_steps / sizeof lfu_steps[0]);
    fx_deinit(&f);
}

static void test_slru_protects_tokens_used_again(void **state)
{
    (void)state;
    /* GPU 3, the protected segment at most 2 (80%).
     * pos0 {0}: 0 probationary.  pos1 {0, 1}: 1 probationary, 0 protected.
     * pos2 {0, 1, 2}: 2 probationary; 0 and 1 protected (0 older).
     * pos3 {3}: the probationary 2 goes, though all three were last used at
     * step 2 (LRU's tie goes to 0).
     * pos4 {3, 4}: 3 is pinned, the only probationary one: the protected
     * segment's oldest (0) goes. */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 1, 2), E, E, E, E, 0, 0},
        {3, 0, L(3), E, E, L(2), E, 0, 0},
        {4, 0, L(3, 4), E, E, L(0), E, 0, 0},
    };
    struct fixture f;
    fx_init(&f, &place_slru_ops, 3, 10, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
}

static void test_arc_adapts_its_target_on_ghost_hits(void **state)
{
    (void)state;
    /* GPU 2 (c = 2), target p = 0.
     * pos0 {0}: 0 to T1.  pos1 {0, 1}: 1 to T1, 0 hit: T2.
     * pos2 {2}: |T1| = 1 > p: T1's oldest (1) goes, ghost in B1; 2 to T1.
     * pos3 {1, 3}: 1 is a B1 ghost: p = 0 + max(|B2|/|B1|, 1) = 1; |T1| =
     *   1 = p, so T2's oldest (0) goes (to B2) and 1 enters T2; then 3: T2
     *   holds only the pinned 1, so T1's 2 goes (to B1); 3 to T1.
     * pos4 {0, 4}: 0 is a B2 ghost: p = 1 - max(|B1|/|B2|, 1) = 0; |T1| = 1
     *   > p: 3 goes (B1), 0 enters T2; then 4 is new and T1 + B1 = c with
     *   T1 empty: B1's oldest ghost (2) is forgotten; |T1| = 0, so T2's
     *   oldest unpinned (1) goes, free (its CPU copy stays). */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, L(1), E, 0, 0},
        {3, 0, L(1, 3), L(1), E, L(0, 2), E, 1, 0},
        {4, 0, L(0, 4), L(0), E, L(3), E, 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_arc_ops, 2, 10, NULL);
    f.p.recompute_ns = 10; /* loads, so the CPU copies are used */
    fx_apply(&f);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
}

static void test_cost_aware_evicts_by_uses_times_reload_cost(void **state)
{
    (void)state;
    /* GPU 2; loading (1 ns) beats recomputing (10 ns): copies are kept and
     * an eviction without one costs its offload (1). Priority at a use: the
     * age plus uses x 1.
     * pos0 {0}: 0 at 1.  pos1 {0, 1}: 1 at 1, 0 at 2.
     * pos2 {2}: keys 0: 2 + 1, 1: 1 + 1: 1 goes (age 2), offloaded; 2 at 3.
     * pos3 {1, 3}: 1 loaded: keys 0: 3, 2: 4: 0 goes (age 3); then 3: 2
     *   goes, 1 pinned. */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, L(1), E, 0, 0},
        {3, 0, L(1, 3), L(1), E, L(0, 2), E, 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_cost_aware_ops, 2, 10, NULL);
    f.p.load_ns = 1;
    f.p.recompute_ns = 10;
    fx_apply(&f);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
    /* recomputing cheaper (load 2, recompute 1): no copies, drops instead,
     * and an attended dropped token is recomputed */
    const struct step_case drop_steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, E, L(1), 0, 0},
        {3, 0, L(1, 3), E, L(1), E, L(0, 2), 1, 0},
    };
    fx_init(&f, &place_cost_aware_ops, 2, 10, NULL);
    run_steps(&f, drop_steps, sizeof drop_steps / sizeof drop_steps[0]);
    fx_deinit(&f);
}

static void test_gpu_only_runs_out_of_memory_instead_of_evicting(void **state)
{
    (void)state;
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(1, 2), E, E, E, E, 0, 1},
    };
    struct fixture f;
    fx_init(&f, &place_gpu_only_ops, 2, 100, NULL);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
}

/* A dropped token's layer input stays in the CPU tier until it is retired.
 * LRU with K and V of 2 bytes, an input of 1 byte, GPU 3 tokens, CPU 5
 * bytes (ties go to the lowest id). Worked by hand:
 * pos3 {0,3}: GPU {0,1,2} full; LRU of {1 (2), 2 (2)}: 1 -> CPU (2 bytes).
 * pos4 {1,4}: 1 misses; victim among {0 (3), 2 (2), 3 (3)}: 2 -> CPU (4);
 *   load 1; admit 4: victim 0; CPU 4 + 2 > 5: delete 2's copy (not on the
 *   GPU: dropped, input kept: 2 + 1 = 3); 0 -> CPU (5).
 * pos5 {2,5}: 2 dropped, misses; victim among {1 (4), 3 (3), 4 (4)}: 3; CPU
 *   5 + 2 > 5: delete 0 (dropped: 2 + 2 inputs = 4), still 6 > 5: delete
 *   1's copy (on the GPU: nothing dropped; 2); 3 -> CPU (4); recompute 2;
 *   admit 5: victim 1 (4, tie with 4); CPU 6 > 5: delete 3 (dropped: 3
 *   inputs); 1 -> CPU (5).
 * pos6 {6}: victim 4 (4); CPU full: delete 1 (dropped: 4 inputs = 4); no
 *   CPU token left, so 4 is dropped, its input taking the last byte (5).
 * pos7 {7}: victim 2 (5, tie with 5): no CPU room, but its input is
 *   already kept (dropped before): dropped with no new room.
 * pos8 {8}: victim 5: no room for a copy or for its input: out of memory on
 *   the CPU tier. */
static void test_dropped_tokens_keep_their_inputs_in_the_cpu_tier(void **state)
{
    (void)state;
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(1, 2), E, E, E, E, 0, 0},
        {3, 0, L(0, 3), E, E, L(1), E, 0, 0},
        {4, 0, L(1, 4), L(1), E, L(2, 0), L(2), 1, 0},
        {5, 0, L(2, 5), E, L(2), L(3, 1), L(0, 3), 1, 0},
        {6, 0, L(6), E, E, E, L(1, 4), 0, 0},
        {7, 0, L(7), E, E, E, L(2), 0, 0},
        {8, 0, L(8), E, E, E, E, 0, 2},
    };
    struct fixture f;
    fx_init(&f, &place_lru_ops, 6, 5, NULL);
    f.p.kv_bytes = 2;
    f.p.input_bytes = 1;
    fx_apply(&f);
    struct alisa_err e = {{0}};
    assert_int_equal(f.s.gpu_cap, 3);
    run_steps(&f, steps, 8);
    struct kv_census c;
    assert_int_equal(kv_stream_check(&f.s, &f.p, 7, steps[7].att, 1, &c, &e), 0);
    assert_int_equal(f.s.inputs, 5);  /* 0, 1, 2, 3, 4 */
    assert_int_equal(f.s.cpu_bytes, 5);
    assert_int_equal(c.dropped, 5);
    run_steps(&f, steps + 8, 1);
    fx_deinit(&f);
}

static void test_alisa_cache_keeps_the_window_and_copies_only_what_it_will_load(void **state)
{
    (void)state;
    /* GPU 4, CPU 2, loading (0.5 ns) cheaper than recomputing (1 ns): an
     * evicted token keeps a CPU copy.
     * pos4 {0,3,4}, window starts at 3: GPU {0..3} full; oldest unpinned outside
     *   the window: 1 -> CPU.
     * pos5 {1,4,5}, window 4: 1 misses and is loaded; first a victim: oldest
     *   unpinned < 4 among {0, 2, 3}: 0 -> CPU {1, 0}; admit 5: victim among
     *   {2, 3}: 2, CPU full: oldest unpinned CPU token 0 dropped (1 is pinned);
     *   2 -> CPU. */
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 1, 2), E, E, E, E, 0, 0},
        {3, 0, L(0, 1, 2, 3), E, E, E, E, 0, 0},
        {4, 3, L(0, 3, 4), E, E, L(1), E, 0, 0},
        {5, 4, L(1, 4, 5), L(1), E, L(0, 2), L(0), 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_alisa_cache_ops, 4, 2, NULL);
    f.p.load_ns = 0.5;
    fx_apply(&f);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
    /* Recomputing cheaper (1 ns against 2): a copy would never be read, so
     * evicted tokens are dropped and no byte goes to the CPU.
     * pos4: victim 1, dropped. pos5: 1 misses and is recomputed; victim 0
     *   dropped; admit 5: victim 2 dropped. */
    const struct step_case drops[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 1, 2), E, E, E, E, 0, 0},
        {3, 0, L(0, 1, 2, 3), E, E, E, E, 0, 0},
        {4, 3, L(0, 3, 4), E, E, E, L(1), 0, 0},
        {5, 4, L(1, 4, 5), E, L(1), E, L(0, 2), 1, 0},
    };
    struct fixture g;
    fx_init(&g, &place_alisa_cache_ops, 4, 2, NULL);
    run_steps(&g, drops, sizeof drops / sizeof drops[0]);
    fx_deinit(&g);
}

/* The paper's rule with a given schedule, tiers large enough: alpha 0.5 from
 * position 4, beta 0.5 from position 6, local window the last 2 tokens.
 * Worked by hand (n_off = min(ceil(0.5 (pos + 1)), window start), n_del =
 * ceil(0.5 n_off)):
 * pos0-3: all on the GPU (prefill-like steps attend everything).
 * pos4 {0,3,4}, window 3: n_off = min(3, 3) = 3: 0, 1, 2 -> CPU; 0 was
 *   attended from the GPU and stays there for this step only. GPU {3, 4}.
 * pos5 {1,4,5}, window 4: 1 on the CPU: loaded for the step, not kept;
 *   n_off = min(3, 4) = 3: nothing moves. GPU {3, 4, 5}.
 * pos6 {0,1,5,6}, window 5: 0, 1 loaded (the step's reads come first);
 *   n_off = min(4, 5) = 4: 3 -> CPU; n_del = 2: 0, 1 deleted (their inputs
 *   kept). GPU {4, 5, 6}.
 * pos7 {0,2,6,7}, window 6: 0 deleted: recomputed; 2 on the CPU: loaded;
 *   n_off = min(4, 6) = 4, n_del = 2: nothing moves. */
static void test_alisa_runs_the_papers_three_phases_by_age(void **state)
{
    (void)state;
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 0, L(0, 1, 2), E, E, E, E, 0, 0},
        {3, 0, L(0, 1, 2, 3), E, E, E, E, 0, 0},
        {4, 3, L(0, 3, 4), E, E, L(0, 1, 2), E, 0, 0},
        {5, 4, L(1, 4, 5), L(1), E, E, E, 1, 0},
        {6, 5, L(0, 1, 5, 6), L(0, 1), E, L(3), L(0, 1), 2, 0},
        {7, 6, L(0, 2, 6, 7), L(2), L(0), E, E, 2, 0},
    };
    struct fixture f;
    fx_init(&f, &place_alisa_ops, 8, 8, NULL);
    f.p.input_bytes = 1; /* a deleted token's input takes a byte of the CPU tier */
    f.p.sched = (struct alisa_sched){0.5, 0.5, 4, 6};
    f.p.scheduled = 1;
    fx_apply(&f);
    struct alisa_err e = {{0}};
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    struct kv_census c;
    assert_int_equal(kv_stream_check(&f.s, &f.p, 7, steps[7].att, 4, &c, &e), 0);
    /* GPU {4, 5, 6, 7}, CPU {2, 3}, deleted {0, 1}: 2 KV + 2 inputs */
    assert_int_equal(c.gpu, 4);
    assert_int_equal(c.cpu, 2);
    assert_int_equal(c.dropped, 2);
    assert_int_equal(f.s.cpu_bytes, 4);
    /* a loaded token is not the tier's: GPU bytes count residents only */
    assert_int_equal(f.s.gpu_bytes, 4);
    assert_int_equal(f.s.visits, 2);
    fx_deinit(&f);
}

/* The greedy schedule of a stream's own capacities, by hand: 16 positions,
 * GPU 6 tokens, CPU 7 bytes, KV 2 bytes a token, layer input 1 byte.
 * GPU: p1 = 3 (tokens 0..2 fit in 6 bytes), alpha = 13/16: at position 15,
 * 16 - ceil(13) = 3 tokens stay. CPU: n_off = ceil(13/16 (pos + 1)) tokens
 * of 2 bytes pass 7 bytes at n_off = 4, first at pos 4 (ceil(65/16) = 5 > 3
 * holds from pos 3: ceil(52/16) = 4 > 3.5): p2 = 3. At the last position
 * n_off = 13: 26 bytes, 19 over, each deletion saves 1: 19 deleted, more
 * than 13, so beta = 1. A CPU of 20 bytes and an input of 2 bytes (deleting
 * saves nothing): beta = 1; of 0 bytes: 3 deletions. A stream that fits:
 * never. And the counts cap at the window start. */
static void test_alisa_greedy_schedule_of_a_stream(void **state)
{
    (void)state;
    struct place_params p = {.gpu_bytes = 6, .cpu_bytes = 7, .kv_bytes = 2, .act_bytes = 1,
                             .input_bytes = 1};
    struct alisa_sched g;
    place_alisa_greedy(&p, 16, &g);
    assert_int_equal(g.p1, 3);
    assert_true(g.alpha == 13.0 / 16);
    assert_int_equal(g.p2, 3);
    assert_true(g.beta == 1.0);
    /* a CPU of 20 bytes: p2 where ceil(13/16 (pos + 1)) > 10, first at pos
     * 12 (ceil(169/16) = 11); at the end 26 - 20 = 6 over: 6 deletions of
     * the 13, beta = 6/13 */
    p.cpu_bytes = 20;
    place_alisa_greedy(&p, 16, &g);
    assert_int_equal(g.p2, 12);
    assert_true(g.beta == 6.0 / 13);
    uint32_t off, del;
    place_alisa_counts(&g, 15, 15, &off, &del);
    assert_int_equal(off, 13);
    assert_int_equal(del, 6);
    assert_true((off - del) * 2 + del * 1 <= 20 && 16 - off <= 3);
    place_alisa_counts(&g, 15, 10, &off, &del); /* the window starts at 10 */
    assert_int_equal(off, 10);
    assert_int_equal(del, 5);
    place_alisa_counts(&g, 2, 2, &off, &del); /* before p1 */
    assert_int_equal(off, 0);
    p.input_bytes = 2; /* deleting saves nothing */
    place_alisa_greedy(&p, 16, &g);
    assert_true(g.beta == 1.0);
    p.input_bytes = 0; /* inputs kept outside the tier: 6 over, 2 saved each, 3 of 13 */
    place_alisa_greedy(&p, 16, &g);
    assert_true(g.beta == 3.0 / 13);
    p.gpu_bytes = 32;
    place_alisa_greedy(&p, 16, &g);
    assert_int_equal(g.p1, UINT32_MAX);
    assert_int_equal(g.p2, UINT32_MAX);
}

/* A schedule that does not fit is out of memory, on the tier that
 * overflows: alpha 0.25 from position 2 with a GPU of 3 tokens: n_off =
 * ceil(0.25 (pos + 1)) is 1 at pos 2 and 3 (0 leaves), 2 at pos 4 (1
 * leaves), still 2 at pos 5, where the GPU holds 2, 3, 4 and the new token
 * makes 4. Alpha 1 with a CPU of 1 token overflows the CPU at the first
 * offload. */
static void test_alisa_schedule_that_does_not_fit_runs_out_of_memory(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f, &place_alisa_ops, 3, 8, NULL);
    f.p.sched = (struct alisa_sched){0.25, 0, 2, UINT32_MAX};
    f.p.scheduled = 1;
    fx_apply(&f);
    struct alisa_err e = {{0}};
    const struct step_case gpu_full[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(0, 1), E, E, E, E, 0, 0},
        {2, 2, L(2), E, E, L(0), E, 0, 0},
        {3, 3, L(3), E, E, E, E, 0, 0},
        {4, 4, L(4), E, E, L(1), E, 0, 0},
        {5, 5, L(5), E, E, E, E, 0, 1},
    };
    run_steps(&f, gpu_full, 6);
    fx_deinit(&f);
    fx_init(&f, &place_alisa_ops, 8, 1, NULL);
    f.p.input_bytes = 1;
    f.p.sched = (struct alisa_sched){1, 0, 2, UINT32_MAX};
    f.p.scheduled = 1;
    fx_apply(&f);
    struct place_result r = {.load = f.bufs[0], .recompute = f.bufs[1], .offload = f.bufs[2],
                             .drop = f.bufs[3]};
    uint32_t att[3] = {0, 1, 2};
    place_step(f.ops, f.st, &f.s, &f.p, att, 1, NULL, 0, 0, 0, &r);
    place_step(f.ops, f.st, &f.s, &f.p, att, 2, NULL, 0, 0, 1, &r);
    assert_int_equal(r.oom, 0);
    place_step(f.ops, f.st, &f.s, &f.p, att + 2, 1, NULL, 0, 2, 2, &r);
    assert_int_equal(r.oom, 1);
    assert_int_equal(r.oom_cpu, 1);
    fx_deinit(&f);
    /* out-of-range schedules are refused */
    struct place_params bad = {.gpu_bytes = 4, .kv_bytes = 1, .scheduled = 1,
                               .sched = {1.5, 0, 0, UINT32_MAX}};
    void *st = NULL;
    assert_int_equal(place_alisa_ops.create(&st, &bad, MAXT, NULL, &e), ALISA_EINVAL);
    assert_null(st);
}

static void test_belady_evicts_the_token_used_farthest_in_the_future(void **state)
{
    (void)state;
    /* Future uses (decode steps): token 0 at 4, token 1 at 6, token 2 never.
     * pos3 {3}: GPU {0,1,2} full, victim = farthest next use = 2 (never). */
    static const uint32_t start[MAXT + 1] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    static const uint32_t steps_of[2] = {4, 6};
    struct kv_future fut = {MAXT, start, steps_of};
    const struct step_case steps[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, E, E, 0, 0},
        {3, 0, L(3), E, E, L(2), E, 0, 0},
        /* pos4 {0,4}: victim among {1 (6), 3 (never)}: 3 */
        {4, 0, L(0, 4), E, E, L(3), E, 0, 0},
    };
    struct fixture f;
    fx_init(&f, &place_belady_ops, 3, 10, &fut);
    run_steps(&f, steps, sizeof steps / sizeof steps[0]);
    fx_deinit(&f);
}

static void test_oracle_cost_keeps_copies_only_when_they_pay(void **state)
{
    (void)state;
    /* Future: token 0 at step 4, token 1 at step 3; nothing else. GPU 2.
     * pos2 {2}: victim = farthest next use = 0 (4, vs 1 at 3). With load 1 and
     *   recompute 5 (offload + load < recompute) 0 is offloaded; pos3 {1,3}: 2
     *   (never used) dropped; pos4 {0,4}: 0 loaded, 1 and 3 dropped.
     * With load 2, recompute 1 the copy never pays: 0 dropped and recomputed. */
    static const uint32_t start[MAXT + 1] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    static const uint32_t steps_of[2] = {4, 3};
    struct kv_future fut = {MAXT, start, steps_of};
    const struct step_case copy_pays[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, L(0), E, 0, 0},
        {3, 0, L(1, 3), E, E, E, L(2), 0, 0},
        {4, 0, L(0, 4), L(0), E, E, L(1, 3), 1, 0},
    };
    struct fixture f;
    fx_init(&f, &place_oracle_cost_ops, 2, 10, &fut);
    f.ops->destroy(f.st);
    f.p.load_ns = 1;
    f.p.recompute_ns = 5;
    struct alisa_err e = {{0}};
    assert_int_equal(f.ops->create(&f.st, &f.p, MAXT, &fut, &e), 0);
    run_steps(&f, copy_pays, sizeof copy_pays / sizeof copy_pays[0]);
    fx_deinit(&f);
    const struct step_case copy_useless[] = {
        {0, 0, L(0), E, E, E, E, 0, 0},
        {1, 0, L(1), E, E, E, E, 0, 0},
        {2, 0, L(2), E, E, E, L(0), 0, 0},
        {3, 0, L(1, 3), E, E, E, L(2), 0, 0},
        {4, 0, L(0, 4), E, L(0), E, L(1, 3), 1, 0},
    };
    fx_init(&f, &place_oracle_cost_ops, 2, 10, &fut); /* load 2, recompute 1 */
    run_steps(&f, copy_useless, sizeof copy_useless / sizeof copy_useless[0]);
    fx_deinit(&f);
}

static void test_flexgen_static_loads_every_attended_share_and_never_caches(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f, &place_flexgen_ops, 0, 0, NULL);
    f.ops->destroy(f.st);
    /* kv 10 bytes, 40% on the GPU: 4 + 6 per token; room for 4 tokens */
    f.p = (struct place_params){.gpu_bytes = 16, .cpu_bytes = 24, .kv_bytes = 10, .act_bytes = 1,
                                .gpu_fraction = 0.4};
    struct alisa_err e = {{0}};
    assert_int_equal(f.ops->create(&f.st, &f.p, MAXT, NULL, &e), 0);
    uint32_t att[3][3] = {{0}, {0, 1}, {0, 1, 2}};
    for (uint32_t pos = 0; pos < 3; pos++) {
        struct place_result r = {.load = f.bufs[0], .recompute = f.bufs[1],
                                 .offload = f.bufs[2], .drop = f.bufs[3]};
        place_step(f.ops, f.st, &f.s, &f.p, att[pos], pos + 1, NULL, 0, 0, pos, &r);
        assert_int_equal(r.oom, 0);
        assert_int_equal(r.n_load, pos); /* every earlier token, every step */
        assert_int_equal(r.bytes_h2d, 6 * pos);
        assert_int_equal(r.bytes_d2h, 6);
        assert_int_equal(f.s.gpu_bytes, 4 * (pos + 1));
        assert_int_equal(kv_place_of(&f.s, pos), KV_PLACE_SPLIT);
        assert_int_equal(kv_stream_check(&f.s, &f.p, pos, att[pos], pos + 1, NULL, &e), 0);
    }
    uint32_t four[4] = {0, 1, 2, 3}, five[5] = {0, 1, 2, 3, 4};
    struct place_result r = {.load = f.bufs[0], .recompute = f.bufs[1], .offload = f.bufs[2],
                             .drop = f.bufs[3]};
    place_step(f.ops, f.st, &f.s, &f.p, four, 4, NULL, 0, 0, 3, &r);
    assert_int_equal(r.oom, 0);
    memset(&r, 0, sizeof r);
    r.load = f.bufs[0];
    r.offload = f.bufs[2];
    place_step(f.ops, f.st, &f.s, &f.p, five, 5, NULL, 0, 0, 4, &r);
    assert_int_equal(r.oom, 1); /* a fifth token's share does not fit */
    fx_deinit(&f);
}

/* FlexGen's own split is by whole sequences (TorchMixedDevice.
 * init_cache_one_gpu_batch), so a stream's share is 1 or 0; then tokens
 * keep the engine's places, which an executor can carry out: f = 1, every
 * token KV_GPU and nothing moves; f = 0, every token KV_CPU, on the GPU only
 * for the step that attends it (KV_VISIT: loaded, or the new one computed
 * there and written through), the visits gone at the next step; bytes as
 * the split form's (kv 10: all of it each way). */
static void test_flexgen_whole_shares_keep_whole_token_places(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    for (int share = 1; share >= 0; share--) {
        struct fixture f;
        fx_init(&f, &place_flexgen_ops, 0, 0, NULL);
        f.p = (struct place_params){.gpu_bytes = share ? 30 : 0, .cpu_bytes = share ? 0 : 30,
                                    .kv_bytes = 10, .act_bytes = 1, .gpu_fraction = share};
        fx_apply(&f);
        uint32_t att[4][4] = {{0}, {0, 1}, {0, 1, 2}, {1, 2, 3}}, n_att[4] = {1, 2, 3, 3};
        for (uint32_t pos = 0; pos < 4; pos++) {
            struct place_result r = {.load = f.bufs[0], .recompute = f.bufs[1],
                                     .offload = f.bufs[2], .drop = f.bufs[3]};
            uint32_t gone = 0; /* step 3 retires token 0 */
            place_step(f.ops, f.st, &f.s, &f.p, att[pos], n_att[pos], pos == 3 ? &gone : NULL,
                       pos == 3, 0, pos, &r);
            assert_int_equal(r.oom, 0);
            assert_int_equal(kv_stream_check(&f.s, &f.p, pos, att[pos], n_att[pos], NULL, &e), 0);
            if (share) {
                assert_int_equal(r.n_load + r.n_offload, 0);
                assert_int_equal(kv_place_of(&f.s, pos), KV_PLACE_GPU);
                assert_int_equal(f.s.gpu_bytes, 10 * (pos < 3 ? pos + 1 : 3));
                continue;
            }
            assert_int_equal(r.n_load, n_att[pos] - 1); /* every earlier attended token */
            assert_int_equal(r.bytes_h2d, 10 * (n_att[pos] - 1));
            assert_int_equal(r.n_offload, 1); /* the new token, written through */
            assert_int_equal(f.bufs[2][0], pos);
            assert_int_equal(r.bytes_d2h, 10);
            assert_int_equal(kv_place_of(&f.s, pos), KV_PLACE_CPU);
            assert_int_equal(f.s.visits, n_att[pos]);
            for (uint32_t i = 0; i < n_att[pos]; i++)
                assert_true(f.s.flags[att[pos][i]] & KV_VISIT);
            if (pos == 3) { /* token 0: retired, no visit left; 1-3 visiting, CPU-placed */
                assert_int_equal(kv_place_of(&f.s, 0), KV_PLACE_GONE);
                assert_int_equal(f.s.cpu_tokens, 3);
                assert_int_equal(f.s.cpu_bytes, 30);
            }
        }
        fx_deinit(&f);
    }
}

static void test_retired_tokens_free_their_memory(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f, &place_gpu_only_ops, 2, 0, NULL);
    uint32_t a0[1] = {0}, a1[2] = {0, 1}, a2[2] = {1, 2}, ret[1] = {0};
    struct place_result r = {.load = f.bufs[0], .recompute = f.bufs[1], .offload = f.bufs[2],
                             .drop = f.bufs[3]};
    place_step(f.ops, f.st, &f.s, &f.p, a0, 1, NULL, 0, 0, 0, &r);
    place_step(f.ops, f.st, &f.s, &f.p, a1, 2, NULL, 0, 0, 1, &r);
    /* gpu-only with 2 slots fits a third token only because 0 is retired */
    place_step(f.ops, f.st, &f.s, &f.p, a2, 2, ret, 1, 1, 2, &r);
    assert_int_equal(r.oom, 0);
    assert_int_equal(kv_place_of(&f.s, 0), KV_PLACE_GONE);
    struct alisa_err e = {{0}};
    assert_int_equal(kv_stream_check(&f.s, &f.p, 2, a2, 2, NULL, &e), 0);
    fx_deinit(&f);
}

static void test_stream_check_reports_a_broken_invariant(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f, &place_lru_ops, 2, 2, NULL);
    uint32_t a0[1] = {0};
    struct place_result r = {.load = f.bufs[0], .recompute = f.bufs[1], .offload = f.bufs[2],
                             .drop = f.bufs[3]};
    place_step(f.ops, f.st, &f.s, &f.p, a0, 1, NULL, 0, 0, 0, &r);
    struct alisa_err e = {{0}};
    assert_int_equal(kv_stream_check(&f.s, &f.p, 0, a0, 1, NULL, &e), 0);
    f.s.flags[0] &= (uint8_t)~KV_GPU; /* corrupt: counts now disagree */
    assert_int_equal(kv_stream_check(&f.s, &f.p, 0, a0, 1, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "disagree"));
    f.s.flags[0] |= KV_GPU | KV_GONE;
    assert_int_equal(kv_stream_check(&f.s, &f.p, 0, a0, 1, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "retired token 0 still holds memory"));
    f.s.flags[0] &= (uint8_t)~KV_GONE;
    fx_deinit(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_cascade_matches_hand_worked_moves),
        cmocka_unit_test(test_hot_buffer_writes_every_new_token_through_so_evictions_move_nothing),
        cmocka_unit_test(test_block_caches_evict_whole_blocks_by_use_or_by_score),
        cmocka_unit_test(test_blocks_tile_from_the_selections_origin),
        cmocka_unit_test(test_fifo_evicts_by_gpu_arrival_not_by_use),
        cmocka_unit_test(test_lfu_evicts_the_least_used_where_lru_would_not),
        cmocka_unit_test(test_lfu_aged_lets_old_counts_fade_where_lfu_keeps_them),
        cmocka_unit_test(test_slru_protects_tokens_used_again),
        cmocka_unit_test(test_arc_adapts_its_target_on_ghost_hits),
        cmocka_unit_test(test_cost_aware_evicts_by_uses_times_reload_cost),
        cmocka_unit_test(test_gpu_only_runs_out_of_memory_instead_of_evicting),
        cmocka_unit_test(test_dropped_tokens_keep_their_inputs_in_the_cpu_tier),
        cmocka_unit_test(test_alisa_cache_keeps_the_window_and_copies_only_what_it_will_load),
        cmocka_unit_test(test_alisa_runs_the_papers_three_phases_by_age),
        cmocka_unit_test(test_alisa_greedy_schedule_of_a_stream),
        cmocka_unit_test(test_alisa_schedule_that_does_not_fit_runs_out_of_memory),
        cmocka_unit_test(test_belady_evicts_the_token_used_farthest_in_the_future),
        cmocka_unit_test(test_oracle_cost_keeps_copies_only_when_they_pay),
        cmocka_unit_test(test_flexgen_static_loads_every_attended_share_and_never_caches),
        cmocka_unit_test(test_flexgen_whole_shares_keep_whole_token_places),
        cmocka_unit_test(test_retired_tokens_free_their_memory),
        cmocka_unit_test(test_stream_check_reports_a_broken_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
