/* Selection policies: the budget rule, hand-worked attended and retired sets
 * for every policy, and SWA and H2O against brute-force references on random
 * small inputs (fixed GSL seed). */
#include <gsl/gsl_rng.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "selection.h"

#define MAXN 64

static void test_budget_rounds_half_k_and_stays_in_range(void **state)
{
    (void)state;
    struct sel_params p = {.sparsity = 0.8};
    assert_int_equal(sel_budget(&p, 10), 2);   /* 2 * round(1.0) */
    assert_int_equal(sel_budget(&p, 640), 128); /* 2 * round(64) */
    assert_int_equal(sel_budget(&p, 7), 2);    /* 2 * round(0.7) */
    assert_int_equal(sel_budget(&p, 2), 1);    /* 2 * round(0.2) = 0, at least 1 */
    p.sparsity = 0.5;
    assert_int_equal(sel_budget(&p, 10), 6);   /* 2 * round(2.5), half away from zero */
    p.sparsity = 0.0;
    assert_int_equal(sel_budget(&p, 9), 9);    /* 2 * round(4.5) = 10, at most n */
    p.budget_tokens = 5;
    assert_int_equal(sel_budget(&p, 100), 5);
    assert_int_equal(sel_budget(&p, 3), 3);
    assert_int_equal(sel_local_share(5), 3);
    assert_int_equal(sel_local_share(4), 2);
    struct alisa_err e = {{0}};
    struct sel_params bad = {.sparsity = 1.0};
    assert_int_equal(sel_params_validate(&bad, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "--sparsity 1"));
}

/* One hand-worked case: a policy, its params, the query position, and the
 * expected attended and retired sets written out by hand. */
struct sel_case {
    const char *what;
    const struct selection_ops *ops;
    struct sel_params p;
    uint32_t pos;
    uint32_t want[MAXN];
    uint32_t n_want;
    uint32_t retired[MAXN];
    uint32_t n_retired;
};

static void run_case(const struct sel_case *c)
{
    void *st;
    struct alisa_err e = {{0}};
    assert_int_equal(c->ops->create(&st, &c->p, MAXN, &e), 0);
    uint32_t out[MAXN], ret[MAXN], n_ret, local;
    uint32_t n = c->ops->select(st, c->pos, NULL, out, ret, &n_ret, &local);
    if (n != c->n_want || memcmp(out, c->want, n * sizeof *out) != 0) {
        char got[256] = "";
        for (uint32_t i = 0; i < n; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%u ", out[i]);
        fail_msg("%s: attended {%s}", c->what, got);
    }
    if (n_ret != c->n_retired || memcmp(ret, c->retired, n_ret * sizeof *ret) != 0)
        fail_msg("%s: %u retired, expected %u", c->what, n_ret, c->n_retired);
    c->ops->destroy(st);
}

static void test_static_policies_match_hand_worked_sets(void **state)
{
    (void)state;
    const struct sel_case cases[] = {
        {"dense", &sel_dense_ops, {.sparsity = 0}, 4, {0, 1, 2, 3, 4}, 5, {0}, 0},
        {"local B=3", &sel_local_ops, {.budget_tokens = 3}, 5, {3, 4, 5}, 3, {0, 1}, 2},
        {"local sparsity 0.8 n=10", &sel_local_ops, {.sparsity = 0.8}, 9, {8, 9}, 2,
         {0, 1, 2, 3, 4, 5, 6}, 7},
        {"streaming B=4 sinks 2", &sel_streaming_ops, {.budget_tokens = 4, .knob = {2}} /* sinks */, 9,
         {0, 1, 8, 9}, 4, {2, 3, 4, 5, 6}, 5},
        {"streaming window covers sinks", &sel_streaming_ops, {.budget_tokens = 4, .knob = {2}} /* sinks */,
         2, {0, 1, 2}, 3, {0}, 0},
        /* n=10, B=4: recent 8,9; 2 global slots; stride ceil(8/2) = 4 */
        {"strided derived", &sel_strided_ops, {.budget_tokens = 4}, 9, {0, 4, 8, 9}, 4, {0}, 0},
        {"strided stride 3", &sel_strided_ops, {.budget_tokens = 4, .knob = {3}} /* stride */, 9,
         {0, 3, 6, 8, 9}, 5, {0}, 0},
        /* no history: S is all zero, ties go to the most recent candidates */
        {"swa without history", &sel_swa_ops, {.budget_tokens = 4}, 9, {6, 7, 8, 9}, 4, {0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

static uint32_t do_select(const struct selection_ops *ops, void *st, uint32_t pos, uint32_t *out,
                          uint32_t *ret, uint32_t *n_ret)
{
    uint32_t local;
    return ops->select(st, pos, NULL, out, ret, n_ret, &local);
}

static void test_swa_hand_worked_window_of_two_steps(void **state)
{
    (void)state;
    struct sel_params p = {.budget_tokens = 4, .knob = {2}}; /* window-steps 2 */
    void *st;
    struct alisa_err e = {{0}};
    assert_int_equal(sel_swa_ops.create(&st, &p, MAXN, &e), 0);
    /* Prompt of 6: only the rows of positions 4 and 5 enter S (w = 2). */
    const float r3[4] = {0.9f, 0.05f, 0.03f, 0.02f};
    const float r4[5] = {0.1f, 0.6f, 0.1f, 0.1f, 0.1f};
    const float r5[6] = {0.05f, 0.05f, 0.5f, 0.1f, 0.1f, 0.2f};
    sel_swa_ops.observe_prefill(st, 3, r3, 6);
    sel_swa_ops.observe_prefill(st, 4, r4, 6);
    sel_swa_ops.observe_prefill(st, 5, r5, 6);
    /* S = 0.15 0.65 0.60 0.20 0.20 0.20: recent {5, 6}, top-2 of 0..4 = {1, 2} */
    uint32_t out[MAXN], ret[MAXN], n_ret;
    uint32_t n = do_select(&sel_swa_ops, st, 6, out, ret, &n_ret);
    uint32_t want6[] = {1, 2, 5, 6};
    assert_int_equal(n, 4);
    assert_memory_equal(out, want6, sizeof want6);
    const float w6[4] = {0.1f, 0.1f, 0.1f, 0.7f};
    sel_swa_ops.observe(st, 6, out, w6, 4);
    /* Row 4 leaves the window: S = 0.05 0.15 0.60 0.10 0.10 0.30 0.70;
     * recent {6, 7}, top-2 of 0..5 = {2, 5} */
    n = do_select(&sel_swa_ops, st, 7, out, ret, &n_ret);
    uint32_t want7[] = {2, 5, 6, 7};
    assert_int_equal(n, 4);
    assert_memory_equal(out, want7, sizeof want7);
    assert_int_equal(n_ret, 0);
    sel_swa_ops.destroy(st);
}

static void test_h2o_hand_worked_evictions_are_permanent(void **state)
{
    (void)state;
    struct sel_params p = {.budget_tokens = 4};
    void *st;
    struct alisa_err e = {{0}};
    assert_int_equal(sel_h2o_ops.create(&st, &p, MAXN, &e), 0);
    const float r0[1] = {1.0f}, r1[2] = {0.5f, 0.5f}, r2[3] = {0.2f, 0.2f, 0.6f},
                r3[4] = {0.1f, 0.6f, 0.1f, 0.2f};
    sel_h2o_ops.observe_prefill(st, 0, r0, 4);
    sel_h2o_ops.observe_prefill(st, 1, r1, 4);
    sel_h2o_ops.observe_prefill(st, 2, r2, 4);
    sel_h2o_ops.observe_prefill(st, 3, r3, 4);
    /* scores 1.8 1.3 0.7 0.2; cache of 5 > 4: evict the lowest of 0..2 -> 2 */
    uint32_t out[MAXN], ret[MAXN], n_ret;
    uint32_t n = do_select(&sel_h2o_ops, st, 4, out, ret, &n_ret);
    uint32_t want4[] = {0, 1, 3, 4};
    assert_int_equal(n, 4);
    assert_memory_equal(out, want4, sizeof want4);
    assert_int_equal(n_ret, 1);
    assert_int_equal(ret[0], 2);
    const float w4[4] = {0.1f, 0.1f, 0.4f, 0.4f};
    sel_h2o_ops.observe(st, 4, out, w4, 4);
    /* scores 1.9 1.4 - 0.6 0.4; evict the lowest of {0, 1, 3} -> 3 */
    n = do_select(&sel_h2o_ops, st, 5, out, ret, &n_ret);
    uint32_t want5[] = {0, 1, 4, 5};
    assert_int_equal(n, 4);
    assert_memory_equal(out, want5, sizeof want5);
    assert_int_equal(n_ret, 1);
    assert_int_equal(ret[0], 3);
    sel_h2o_ops.destroy(st);
}

/* ---- brute-force references ---- */

/* Random row of n weights summing to 1, with a few large entries. */
static void random_row(gsl_rng *r, float *row, uint32_t n)
{
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        double x = gsl_rng_uniform(r);
        x = x * x * x * x; /* heavy-tailed */
        row[i] = (float)x;
        sum += x;
    }
    for (uint32_t i = 0; i < n; i++)
        row[i] = (float)(row[i] / sum);
}

/* Weights of 0, 1/4 or 1/2: sums of them are exact, so scores tie often. */
static void quantised_row(gsl_rng *r, float *row, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        row[i] = 0.25f * (float)gsl_rng_uniform_int(r, 3);
}

struct ranked {
    double s; /* exact for the fixed-point sums (below 2^53) */
    uint32_t t;
};

static int by_score_then_recent(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->t > y->t ? -1 : 1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* SWA from scratch: S[t] is the sum of the last w observed rows (dense
 * arrays, 0 where not attended); the global set is the top of a full sort. */
static uint32_t swa_reference(float hist[][MAXN], uint32_t n_hist, uint32_t w,
                              const struct sel_params *p, uint32_t pos, uint32_t *out)
{
    uint32_t n = pos + 1, b = sel_budget(p, n), local = sel_local_share(b), global = b - local;
    uint32_t start = n - local;
    struct ranked cand[MAXN];
    for (uint32_t t = 0; t < start; t++) {
        int64_t s = 0;
        for (uint32_t h = n_hist > w ? n_hist - w : 0; h < n_hist; h++)
            s += sel_weight_fixed(hist[h][t]);
        cand[t] = (struct ranked){(double)s, t};
    }
    qsort(cand, start, sizeof *cand, by_score_then_recent);
    uint32_t c = 0;
    for (uint32_t i = 0; i < global && i < start; i++)
        out[c++] = cand[i].t;
    for (uint32_t t = start; t < n; t++)
        out[c++] = t;
    qsort(out, c, sizeof *out, cmp_u32);
    return c;
}

/* The window the reference sums at context n: window-steps (knob 0), else k of that
 * step (the paper's default, growing with the context). */
static uint32_t ref_window(const struct sel_params *p, uint32_t n)
{
    uint32_t w = p->knob[0] ? (uint32_t)p->knob[0] : sel_local_share(sel_budget(p, n));
    return w ? w : 1;
}

/* Trials 0-39 with a fixed window-steps, 40-79 with the default (0): the
 * window is k at each step, so S sums more rows as the context grows. */
static void test_swa_matches_brute_force_on_random_inputs(void **state)
{
    (void)state;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 20240611);
    static float hist[200][MAXN];
    uint32_t grown = 0; /* default-window trials whose window grew */
    for (int trial = 0; trial < 80; trial++) {
        uint32_t prompt = 4 + (uint32_t)gsl_rng_uniform_int(r, 12);
        uint32_t fixed_w = 1 + (uint32_t)gsl_rng_uniform_int(r, 6);
        struct sel_params p = {.knob = {trial < 40 ? fixed_w : 0}}; /* window-steps */
        uint32_t w = ref_window(&p, prompt + 1); /* prefill keeps this many rows */
        if (trial % 2)
            p.budget_tokens = 2 + (uint32_t)gsl_rng_uniform_int(r, 10);
        else
            p.sparsity = 0.3 + 0.6 * gsl_rng_uniform(r);
        void *st;
        struct alisa_err e = {{0}};
        assert_int_equal(sel_swa_ops.create(&st, &p, MAXN, &e), 0);
        uint32_t n_hist = 0;
        float row[MAXN];
        for (uint32_t pos = 0; pos < prompt; pos++) {
            random_row(r, row, pos + 1);
            sel_swa_ops.observe_prefill(st, pos, row, prompt);
            if (pos + w >= prompt) {
                memset(hist[n_hist], 0, sizeof hist[0]);
                memcpy(hist[n_hist++], row, (pos + 1) * sizeof *row);
            }
        }
        for (uint32_t pos = prompt; pos < MAXN; pos++) {
            uint32_t out[MAXN], ref[MAXN], ret[MAXN], n_ret;
            uint32_t n = do_select(&sel_swa_ops, st, pos, out, ret, &n_ret);
            uint32_t nr = swa_reference(hist, n_hist, ref_window(&p, pos + 1), &p, pos, ref);
            grown += !p.knob[0] && pos == MAXN - 1 && ref_window(&p, pos + 1) > w;
            if (n != nr || memcmp(out, ref, n * sizeof *out) != 0)
                fail_msg("trial %d pos %u: swa and reference differ (%u vs %u tokens)", trial,
                         pos, n, nr);
            /* weights over the attended set, then both sides observe them */
            float w_att[MAXN];
            random_row(r, w_att, n);
            sel_swa_ops.observe(st, pos, out, w_att, n);
            memset(hist[n_hist], 0, sizeof hist[0]);
            for (uint32_t i = 0; i < n; i++)
                hist[n_hist][out[i]] = w_att[i];
            n_hist++;
        }
        sel_swa_ops.destroy(st);
    }
    gsl_rng_free(r);
    assert_true(grown >= 10); /* the default path was exercised with a growing window */
}

static void test_h2o_matches_brute_force_on_random_inputs(void **state)
{
    (void)state;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    for (int trial = 0; trial < 80; trial++) {
        /* long prompts: the first step evicts many at once; every other
         * pair of trials with tied scores */
        uint32_t prompt = 2 + (uint32_t)gsl_rng_uniform_int(r, trial < 40 ? 12 : 40);
        void (*fill)(gsl_rng *, float *, uint32_t) = trial % 4 >= 2 ? quantised_row : random_row;
        struct sel_params p = {0};
        if (trial % 2)
            p.budget_tokens = 2 + (uint32_t)gsl_rng_uniform_int(r, 10);
        else
            p.sparsity = 0.3 + 0.6 * gsl_rng_uniform(r);
        void *st;
        struct alisa_err e = {{0}};
        assert_int_equal(sel_h2o_ops.create(&st, &p, MAXN, &e), 0);
        /* Reference: explicit cache membership and scores. */
        int cached[MAXN] = {0}, evicted[MAXN] = {0};
        double score[MAXN] = {0};
        float row[MAXN];
        for (uint32_t pos = 0; pos < prompt; pos++) {
            fill(r, row, pos + 1);
            sel_h2o_ops.observe_prefill(st, pos, row, prompt);
            cached[pos] = 1;
            for (uint32_t t = 0; t <= pos; t++)
                score[t] += row[t];
        }
        for (uint32_t pos = prompt; pos < MAXN; pos++) {
            uint32_t out[MAXN], ret[MAXN], n_ret;
            uint32_t n = do_select(&sel_h2o_ops, st, pos, out, ret, &n_ret);
            cached[pos] = 1;
            uint32_t nn = pos + 1, b = sel_budget(&p, nn), local = sel_local_share(b);
            uint32_t size = 0;
            for (uint32_t t = 0; t <= pos; t++)
                size += cached[t];
            while (size > b) {
                /* lowest score among cached tokens older than the recent window */
                struct ranked cand[MAXN];
                uint32_t m = 0;
                for (uint32_t t = 0; t + local < nn; t++)
                    if (cached[t])
                        cand[m++] = (struct ranked){score[t], t};
                qsort(cand, m, sizeof *cand, by_score_then_recent);
                /* the last entry is the lowest score; among equal scores the oldest */
                uint32_t v = cand[m - 1].t;
                cached[v] = 0;
                evicted[v] = 1;
                size--;
            }
            uint32_t ref[MAXN], c = 0;
            for (uint32_t t = 0; t <= pos; t++)
                if (cached[t])
                    ref[c++] = t;
            if (n != c || memcmp(out, ref, n * sizeof *out) != 0)
                fail_msg("trial %d pos %u: h2o and reference differ", trial, pos);
            for (uint32_t i = 0; i < n_ret; i++)
                assert_true(evicted[ret[i]]);
            float w_att[MAXN];
            fill(r, w_att, n);
            sel_h2o_ops.observe(st, pos, out, w_att, n);
            for (uint32_t i = 0; i < n; i++)
                score[out[i]] += w_att[i];
        }
        sel_h2o_ops.destroy(st);
    }
    gsl_rng_free(r);
}

/* Retired tokens must never be attended again, for every policy that retires. */
static void test_retired_tokens_are_never_attended_again(void **state)
{
    (void)state;
    const struct selection_ops *ops[] = {&sel_local_ops, &sel_streaming_ops, &sel_h2o_ops};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 99);
    for (size_t k = 0; k < 3; k++)
        for (int trial = 0; trial < 10; trial++) {
            /* knob 0: streaming's sinks (the others have none) */
            struct sel_params p = {.sparsity = 0.5 + 0.4 * gsl_rng_uniform(r), .knob = {2}};
            void *st;
            struct alisa_err e = {{0}};
            assert_int_equal(ops[k]->create(&st, &p, MAXN, &e), 0);
            int gone[MAXN] = {0};
            for (uint32_t pos = 1; pos < MAXN; pos++) {
                uint32_t out[MAXN], ret[MAXN], n_ret;
                uint32_t n = do_select(ops[k], st, pos, out, ret, &n_ret);
                for (uint32_t i = 0; i < n_ret; i++) {
                    assert_false(gone[ret[i]]);
                    gone[ret[i]] = 1;
                }
                for (uint32_t i = 0; i < n; i++)
                    if (gone[out[i]])
                        fail_msg("%s: token %u attended at %u after retirement", ops[k]->name,
                                 out[i], pos);
                assert_int_equal(out[n - 1], pos);
                if (ops[k]->observe) {
                    float w[MAXN];
                    random_row(r, w, n);
                    ops[k]->observe(st, pos, out, w, n);
                }
            }
            ops[k]->destroy(st);
        }
    gsl_rng_free(r);
}

/* topk: a hand-worked step, then against a brute force on random rows with
 * many ties (weights in eighths): token t < pos is picked iff fewer than
 * B - 1 earlier tokens beat it (heavier, or as heavy and newer); pos always;
 * nothing retired; the same row picks the same set whatever came before. */
static void test_topk_picks_the_heaviest_of_the_present_row(void **state)
{
    (void)state;
    struct sel_params p = {.budget_tokens = 3};
    void *st;
    struct alisa_err e = {{0}};
    assert_int_equal(sel_topk_ops.create(&st, &p, MAXN, &e), 0);
    assert_true(sel_topk_ops.needs_present && sel_topk_ops.gathers && sel_topk_ops.budgeted);
    /* weights of tokens 0..5: 3 and 1 tie at 0.2, the newer (3) wins */
    const float row[6] = {0.1f, 0.2f, 0.05f, 0.2f, 0.05f, 0.4f};
    uint32_t out[MAXN], ret[MAXN], n_ret = 9, local = 0;
    uint32_t n = sel_topk_ops.select(st, 5, row, out, ret, &n_ret, &local);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 3);
    assert_int_equal(out[2], 5);
    assert_int_equal(n_ret, 0);
    assert_int_equal(local, 1);
    sel_topk_ops.destroy(st);

    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 45);
    float w[MAXN];
    for (int trial = 0; trial < 300; trial++) {
        struct sel_params q = {.sparsity = gsl_rng_uniform(r) * 0.95};
        if (trial % 3 == 0)
            q = (struct sel_params){.budget_tokens = 1 + (uint32_t)gsl_rng_uniform_int(r, 20)};
        assert_int_equal(sel_topk_ops.create(&st, &q, MAXN, &e), 0);
        for (int step = 0; step < 4; step++) {
            uint32_t pos = (uint32_t)gsl_rng_uniform_int(r, MAXN);
            for (uint32_t t = 0; t <= pos; t++)
                w[t] = (float)gsl_rng_uniform_int(r, 8) / 8.0f;
            uint32_t b = sel_budget(&q, pos + 1);
            n = sel_topk_ops.select(st, pos, w, out, ret, &n_ret, &local);
            assert_int_equal(n, b);
            assert_int_equal(n_ret, 0);
            assert_int_equal(out[n - 1], pos);
            uint32_t c = 0;
            for (uint32_t t = 0; t < pos; t++) {
                uint32_t beaten = 0;
                for (uint32_t u = 0; u < pos; u++)
                    beaten += w[u] > w[t] || (w[u] == w[t] && u > t);
                if (beaten + 1 < b) {
                    assert_true(c < n);
                    assert_int_equal(out[c], t); /* ascending, and exactly these */
                    c++;
                }
            }
            assert_int_equal(c + 1, n);
        }
        sel_topk_ops.destroy(st);
    }
    gsl_rng_free(r);
}

/* How many tokens among 0..n-1 beat token t in row w: heavier, or as heavy
 * and newer (the present selections' order). */
static uint32_t beaten_by(const float *w, uint32_t n, uint32_t t)
{
    uint32_t c = 0;
    for (uint32_t u = 0; u < n; u++)
        c += w[u] > w[t] || (w[u] == w[t] && u > t);
    return c;
}

/* quest: pages ranked by their heaviest token, max(3, B / page) of them, the
 * query's own page always; a hand-worked step, then a brute force over pages
 * on random rows with ties. */
static void test_quest_keeps_the_pages_with_the_heaviest_tokens(void **state)
{
    (void)state;
    struct sel_params p = {.budget_tokens = 8, .knob = {2}}; /* pages of 2: max(3, 4) = 4 */
    void *st;
    struct alisa_err e = {{0}};
    assert_int_equal(sel_quest_ops.create(&st, &p, MAXN, &e), 0);
    assert_true(sel_quest_ops.needs_present && !sel_quest_ops.present_ahead);
    /* tokens 0..10, pages {0,1} {2,3} {4,5} {6,7} {8,9} {10}: page maxima 0.3,
     * 0.1, 0.2, 0.05, 0.2; 4 and 8 tie at 0.2, the newer (8) first; own page {10} */
    const float row[11] = {0.3f, 0.0f, 0.1f, 0.0f, 0.2f, 0.0f, 0.05f, 0.0f, 0.0f, 0.2f, 0.15f};
    uint32_t out[MAXN], ret[MAXN], n_ret = 9, local = 0;
    uint32_t n = sel_quest_ops.select(st, 10, row, out, ret, &n_ret, &local);
    const uint32_t want[] = {0, 1, 4, 5, 8, 9, 10};
    assert_int_equal(n, 7);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(out[i], want[i]);
    assert_int_equal(n_ret, 0);
    assert_int_equal(local, 1);
    sel_quest_ops.destroy(st);

    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 46);
    float w[MAXN], pmax[MAXN];
    for (int trial = 0; trial < 300; trial++) {
        uint32_t page = 1 + (uint32_t)gsl_rng_uniform_int(r, 8);
        struct sel_params q = {.sparsity = gsl_rng_uniform(r) * 0.95, .knob = {page}};
        assert_int_equal(sel_quest_ops.create(&st, &q, MAXN, &e), 0);
        uint32_t pos = (uint32_t)gsl_rng_uniform_int(r, MAXN), own = pos / page;
        uint32_t pages = pos / page + 1, b = sel_budget(&q, pos + 1);
        for (uint32_t t = 0; t <= pos; t++)
            w[t] = (float)gsl_rng_uniform_int(r, 8) / 8.0f;
        for (uint32_t g = 0; g < pages; g++) {
            pmax[g] = -1; /* the own page takes no part in the ranking */
            for (uint32_t t = g * page; g != own && t < (g + 1) * page && t <= pos; t++)
                pmax[g] = w[t] > pmax[g] ? w[t] : pmax[g];
        }
        uint32_t keep = b / page > 3 ? b / page : 3;
        keep = keep < pages ? keep : pages;
        n = sel_quest_ops.select(st, pos, w, out, ret, &n_ret, &local);
        uint32_t c = 0;
        for (uint32_t t = 0; t <= pos; t++) {
            uint32_t g = t / page;
            if (g == own || beaten_by(pmax, pages, g) + 1 < keep) {
                assert_true(c < n);
                assert_int_equal(out[c], t);
                c++;
            }
        }
        assert_int_equal(c, n);
        assert_int_equal(local, pos - own * page + 1);
        sel_quest_ops.destroy(st);
    }
    gsl_rng_free(r);
}

/* infinigen: the tokens within alpha of the largest logit (w > w_max e^-alpha),
 * at most B - 1 of them plus the query, heaviest first; a hand-worked step,
 * then a brute force on random rows with ties and random alpha. */
static void test_infinigen_keeps_the_tokens_within_alpha_of_the_largest(void **state)
{
    (void)state;
    struct sel_params p = {.budget_tokens = 10, .knob = {1.0}}; /* e^-1 = 0.368 */
    void *st;
    struct alisa_err e = {{0}};
    assert_int_equal(sel_infinigen_ops.create(&st, &p, MAXN, &e), 0);
    assert_true(sel_infinigen_ops.needs_present && sel_infinigen_ops.present_ahead);
    /* max 0.4: threshold 0.147; 0.4, 0.2, 0.15 pass, 0.1 and 0.05 do not */
    const float row[6] = {0.2f, 0.1f, 0.4f, 0.05f, 0.15f, 0.1f};
    uint32_t out[MAXN], ret[MAXN], n_ret = 9, local = 0;
    uint32_t n = sel_infinigen_ops.select(st, 5, row, out, ret, &n_ret, &local);
    assert_int_equal(n, 4);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 4);
    assert_int_equal(out[3], 5);
    sel_infinigen_ops.destroy(st);
    p.budget_tokens = 3; /* capped: the two heaviest and the query */
    assert_int_equal(sel_infinigen_ops.create(&st, &p, MAXN, &e), 0);
    n = sel_infinigen_ops.select(st, 5, row, out, ret, &n_ret, &local);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 5);
    sel_infinigen_ops.destroy(st);

    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 47);
    float w[MAXN];
    for (int trial = 0; trial < 300; trial++) {
        double alpha = 0.05 + 3 * gsl_rng_uniform(r);
        struct sel_params q = {.sparsity = gsl_rng_uniform(r) * 0.95, .knob = {alpha}};
        assert_int_equal(sel_infinigen_ops.create(&st, &q, MAXN, &e), 0);
        uint32_t pos = (uint32_t)gsl_rng_uniform_int(r, MAXN), b = sel_budget(&q, pos + 1);
        float mx = 0;
        for (uint32_t t = 0; t <= pos; t++) {
            w[t] = (float)(1 + gsl_rng_uniform_int(r, 8)) / 8.0f;
            mx = t < pos && w[t] > mx ? w[t] : mx;
        }
        float thr = mx * (float)exp(-alpha);
        uint32_t above = 0;
        for (uint32_t t = 0; t < pos; t++)
            above += w[t] > thr;
        uint32_t k = above < b - 1 ? above : b - 1;
        n = sel_infinigen_ops.select(st, pos, w, out, ret, &n_ret, &local);
        assert_int_equal(n, k + 1);
        uint32_t c = 0;
        for (uint32_t t = 0; t < pos; t++)
            if (beaten_by(w, pos, t) < k) {
                assert_int_equal(out[c], t);
                c++;
            }
        assert_int_equal(out[c], pos);
        sel_infinigen_ops.destroy(st);
    }
    gsl_rng_free(r);
}

/* infllm: the initial tokens, a local window of ceil(B / 2), the remainder
 * past it not yet in a whole block, and the blocks whose repr heaviest
 * tokens weigh most, as many as fit the rest of B; hand-worked steps (one
 * and two representative tokens pick different blocks), then a brute force. */
static void test_infllm_keeps_the_blocks_whose_representatives_weigh_most(void **state)
{
    (void)state;
    /* blocks of 2 after 1 initial token: {1,2} {3,4} {5,6}; 7 the remainder;
     * window {8..11}; 8 - (1 + 1 + 4) leaves room for one block */
    const float row[12] = {0.01f, 0.1f, 0.05f, 0.3f, 0.0f, 0.2f, 0.2f, 0.0f, 0, 0, 0, 0.1f};
    uint32_t out[MAXN], ret[MAXN], n_ret = 9, local = 0;
    void *st;
    struct alisa_err e = {{0}};
    const uint32_t want1[] = {0, 3, 4, 7, 8, 9, 10, 11}, want2[] = {0, 5, 6, 7, 8, 9, 10, 11};
    for (uint32_t repr = 1; repr <= 2; repr++) {
        struct sel_params p = {.budget_tokens = 8, .knob = {2, repr, 1}};
        assert_int_equal(sel_infllm_ops.create(&st, &p, MAXN, &e), 0);
        uint32_t n = sel_infllm_ops.select(st, 11, row, out, ret, &n_ret, &local);
        assert_int_equal(n, 8);
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(out[i], (repr == 1 ? want1 : want2)[i]);
        assert_int_equal(local, 4);
        assert_int_equal(n_ret, 0);
        sel_infllm_ops.destroy(st);
    }

    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 48);
    float w[MAXN], bw[MAXN];
    for (int trial = 0; trial < 300; trial++) {
        uint32_t bs = 1 + (uint32_t)gsl_rng_uniform_int(r, 6), rp = 1 + (uint32_t)gsl_rng_uniform_int(r, 4);
        uint32_t in = 1 + (uint32_t)gsl_rng_uniform_int(r, 6);
        struct sel_params q = {.sparsity = gsl_rng_uniform(r) * 0.95, .knob = {bs, rp, in}};
        assert_int_equal(sel_infllm_ops.create(&st, &q, MAXN, &e), 0);
        uint32_t pos = (uint32_t)gsl_rng_uniform_int(r, MAXN), n = pos + 1;
        for (uint32_t t = 0; t < n; t++)
            w[t] = (float)gsl_rng_uniform_int(r, 8) / 8.0f;
        uint32_t b = sel_budget(&q, n), loc = (b + 1) / 2, start = n - loc;
        uint32_t init = in < start ? in : start, nb = (start - init) / bs, rem = init + nb * bs;
        uint32_t fixed = init + (start - rem) + loc, keep = b > fixed ? (b - fixed) / bs : 0;
        for (uint32_t g = 0; g < nb; g++) { /* the repr heaviest by repeated maxima */
            uint8_t used[MAXN] = {0};
            bw[g] = 0;
            for (uint32_t k = 0; k < rp && k < bs; k++) {
                uint32_t best = UINT32_MAX;
                for (uint32_t t = init + g * bs; t < init + (g + 1) * bs; t++)
                    if (!used[t] && (best == UINT32_MAX || w[t] > w[best]))
                        best = t;
                used[best] = 1;
                bw[g] += w[best];
            }
        }
        uint32_t got = sel_infllm_ops.select(st, pos, w, out, ret, &n_ret, &local);
        uint32_t c = 0;
        for (uint32_t t = 0; t < n; t++) {
            int in_block = t >= init && t < rem;
            if (!in_block || beaten_by(bw, nb, (t - init) / bs) < keep) {
                assert_true(c < got);
                assert_int_equal(out[c], t);
                c++;
            }
        }
        assert_int_equal(c, got);
        assert_int_equal(local, loc);
        sel_infllm_ops.destroy(st);
    }
    gsl_rng_free(r);
}

/* The registry holds SELECTION_N policies (what per-selection tables are
 * sized by), each with its knobs declared in range and named uniquely. */
static void test_registry_holds_selection_n_policies_with_declared_knobs(void **state)
{
    (void)state;
    for (int i = 0; i < SELECTION_N; i++) {
        const struct selection_ops *s = selection_policies[i];
        assert_non_null(s);
        assert_true(strlen(s->name) <= SEL_NAME_MAX);
        assert_true(s->n_knobs <= SEL_KNOBS_MAX);
        for (uint32_t k = 0; k < s->n_knobs; k++) {
            assert_true(s->knobs[k].min > 0 && s->knobs[k].min <= s->knobs[k].max);
            assert_non_null(s->knobs[k].help);
            assert_int_equal(sel_knob_find(s, s->knobs[k].name), (int)k);
        }
    }
    assert_null(selection_policies[SELECTION_N]);
    /* a knob given to a selection that declares none, or out of range */
    struct alisa_err e = {{0}};
    struct sel_params p = {.sparsity = 0.5, .knob = {3}};
    assert_int_equal(sel_params_validate(&p, &sel_streaming_ops, &e), 0);
    assert_int_equal(sel_params_validate(&p, &sel_h2o_ops, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "selection h2o has 0 parameters of its own"));
    p.knob[0] = 2.5;
    assert_int_equal(sel_params_validate(&p, &sel_swa_ops, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "--window-steps 2.5: selection swa takes a whole number"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_rounds_half_k_and_stays_in_range),
        cmocka_unit_test(test_registry_holds_selection_n_policies_with_declared_knobs),
        cmocka_unit_test(test_static_policies_match_hand_worked_sets),
        cmocka_unit_test(test_swa_hand_worked_window_of_two_steps),
        cmocka_unit_test(test_h2o_hand_worked_evictions_are_permanent),
        cmocka_unit_test(test_swa_matches_brute_force_on_random_inputs),
        cmocka_unit_test(test_h2o_matches_brute_force_on_random_inputs),
        cmocka_unit_test(test_topk_picks_the_heaviest_of_the_present_row),
        cmocka_unit_test(test_quest_keeps_the_pages_with_the_heaviest_tokens),
        cmocka_unit_test(test_infinigen_keeps_the_tokens_within_alpha_of_the_largest),
        cmocka_unit_test(test_infllm_keeps_the_blocks_whose_representatives_weigh_most),
        cmocka_unit_test(test_retired_tokens_are_never_attended_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
