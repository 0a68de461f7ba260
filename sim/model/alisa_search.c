/* ALISA's schedule search (contract in alisa_search.h).
 *
 * The evaluation is closed-form per step, so the grid is cheap: O(grid^4 *
 * gen_len) step evaluations. Token counts are one stream's, from the rule
 * placement `alisa` runs (place_alisa_counts); bytes and times are for the
 * whole batch and every layer. The greedy point is always a grid
 * candidate, so the grid's best is never worse than greedy's.
 */
#include "alisa_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

/* One stream's capacities and token sizes, by the one derivation the
 * simulator's replay and the executor use (cost_tiers; issue 40). */
static void stream_params(const struct search_workload *w, struct place_params *pp)
{
    const struct model_shape *m = w->model;
    /* as the simulator sizes an eager runtime's tier: less the weights and
     * the prefill's activations (sim/simulate.c, eager_reserve) */
    double gpu_kv = w->tiers_given ? w->gpu_kv_bytes
                                   : w->hw->gpu_mem_gib * GIB - m->weight_bytes_fp16 -
                                         cost_prefill_peak_act_bytes(m, w->batch * w->prompt_len,
                                                                     w->batch);
    double cpu_kv = w->tiers_given ? w->cpu_kv_bytes : w->hw->host_dram_gib * GIB;
    struct tier_storage store = {kv_shape_of(m, w->precision), w->inputs_outside, 1};
    memset(pp, 0, sizeof *pp);
    cost_tiers(&store, w->hw, gpu_kv > 0 ? (uint64_t)gpu_kv : 0, cpu_kv > 0 ? (uint64_t)cpu_kv : 0,
               (uint64_t)w->batch * m->n_layers, pp);
}

struct alisa_sched alisa_schedule_positions(const struct search_workload *w,
                                            const struct alisa_schedule *s)
{
    if (s->at_given)
        return s->at;
    struct alisa_sched p = {s->alpha, s->beta, UINT32_MAX, UINT32_MAX};
    if (s->p1 < w->gen_len)
        p.p1 = w->prompt_len + s->p1;
    if (s->p2 < w->gen_len)
        p.p2 = w->prompt_len + s->p2;
    return p;
}

/* Compute time of decode step j with `resident` tokens of each stream on
 * the GPU. */
static double step_compute_ns(const struct search_workload *w, uint32_t j, double resident)
{
    uint32_t c = w->prompt_len + j + 1;
    /* SWA's gather and local-sum kernels run at any sparsity; the GPU cannot
     * run ahead of the host's launches */
    double gpu = cost_step_compute_ns(w->model, w->hw, w->batch, sel_budget(&w->sel, c), resident,
                                      w->precision, 1);
    double host = w->model->n_layers * w->layer_host_ns;
    return gpu > host ? gpu : host;
}

/* The share of a step's `global` picks below position n (the first n
 * tokens): from the trace's pick positions relative to the query position
 * pos, or spread evenly over the `old` tokens before the local window (also
 * when the picks are all of them: then exactly n of them). */
static double picks_below(const struct search_workload *w, const double *cdf, double n,
                          uint32_t pos, double old, double global)
{
    if (n <= 0 || old <= 0)
        return 0;
    if (!cdf || !w->pick_bins || pos == 0 || global >= old)
        return n >= old ? 1 : n / old;
    /* cdf[k]: picks with id <= k pos / bins (selstats_summary); here id < n */
    double x = (n - 1) / pos * w->pick_bins;
    if (x >= w->pick_bins)
        return cdf[w->pick_bins];
    uint32_t k = (uint32_t)x;
    return cdf[k] + (x - k) * (cdf[k + 1] - cdf[k]);
}

/* n[t] = the model layers whose picks follow pick layer t, t < P (model
 * layer l follows pick layer floor(l x P / n_layers), as the simulator maps
 * model layers onto trace layers; P = 1: every layer follows the one). */
static void layers_following(const struct search_workload *w, uint32_t P, uint32_t *n)
{
    uint32_t L = w->model->n_layers;
    memset(n, 0, P * sizeof *n);
    for (uint32_t l = 0; l < L; l++)
        n[(uint64_t)l * P / L]++;
}

/* The rule's counts for one stream after a position (placement alisa's
 * alisa_move): n_off, n_del never shrink. */
struct rule_state {
    uint32_t off, del;
};

/* Advances st to position pos; returns the tokens copied to the CPU (those
 * leaving the GPU that are not deleted at once). */
static double rule_advance(const struct alisa_sched *sc, uint32_t pos, uint32_t local_start,
                           struct rule_state *st)
{
    uint32_t n_off, n_del;
    place_alisa_counts(sc, pos, local_start, &n_off, &n_del);
    n_off = n_off > st->off ? n_off : st->off;
    n_del = n_del > st->del ? n_del : st->del;
    n_del = n_del < n_off ? n_del : n_off;
    uint32_t from = st->off > n_del ? st->off : n_del;
    double copied = n_off > from ? n_off - from : 0;
    st->off = n_off;
    st->del = n_del;
    return copied;
}

/* c positions fit: the GPU tier their share, the CPU its KV and the deleted
 * tokens' inputs. */
static int fits(const struct rule_state *st, uint32_t c, uint64_t gpu_cap,
                const struct place_params *pp)
{
    return c - st->off <= gpu_cap &&
           (double)(st->off - st->del) * pp->kv_bytes + (double)st->del * pp->input_bytes <=
               (double)pp->cpu_bytes;
}

/* One decode step as the evaluation priced it. */
struct step_view {
    double d2h;           /* bytes offloaded, the whole batch, one layer */
    double price;         /* T_j, ns */
    double price_ref;     /* T_j with the reference offloads instead (eval_with's ref) */
};

/* One layer's link and recompute time and its price from its terms, each
 * for the whole batch: tc + tm + tr, or with overlap the larger of the
 * GPU's work (tc + tr) and the link's (tm). */
static double layer_price(const struct search_workload *w, double tc, double h2d, double d2h,
                          double rec_tokens, double *tm_out, double *tr_out)
{
    double relay = w->pageable_relay ? cost_pageable_relay_ns(w->hw, h2d) : 0;
    double tm = cost_transfer_ns(w->hw, h2d, h2d > 0) + relay +
                cost_transfer_ns(w->hw, d2h, d2h > 0);
    double tr = cost_recompute_gpu_ns(w->model, w->hw, rec_tokens, w->precision);
    if (tm_out)
        *tm_out = tm;
    if (tr_out)
        *tr_out = tr;
    return w->overlap ? (tc + tr > tm ? tc + tr : tm) : tc + tm + tr;
}

/* alisa_schedule_eval with the steps' compute times given when they do not
 * depend on the GPU-resident KV (tc: (gen_len), or NULL); view (gen_len),
 * when not NULL, gets each step's offloads and price, and with ref (gen_len
 * views) its price were its offloads ref's. */
static int eval_with(const struct search_workload *w, const double *tc, struct alisa_schedule *s,
                     struct step_view *view, const struct step_view *ref, struct alisa_err *e)
{
    if (!(s->alpha >= 0 && s->alpha <= 1 && s->beta >= 0 && s->beta <= 1) || s->p1 > s->p2 ||
        s->p2 > w->gen_len)
        return err_set(e, ALISA_EINVAL, "schedule alpha %g beta %g p1 %u p2 %u out of range "
                       "(0 <= alpha, beta <= 1, p1 <= p2 <= %u)", s->alpha, s->beta, s->p1,
                       s->p2, w->gen_len);
    const struct model_shape *m = w->model;
    struct place_params pp;
    stream_params(w, &pp);
    const struct alisa_sched sc = alisa_schedule_positions(w, s);
    const double B = w->batch, L = m->n_layers, streams = B * L;
    const uint32_t P = w->pick_cdf && w->pick_layers ? w->pick_layers : 1;
    uint32_t *following = malloc(P * sizeof *following);
    if (!following)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u layers", P);
    layers_following(w, P, following);
    const uint64_t gpu_cap = pp.gpu_bytes / pp.kv_bytes;
    struct kv_shape k = kv_shape_of(m, w->precision);
    const double fixed_all = streams * (double)cost_kv_fixed_bytes(&k);
    s->total_ns = s->compute_ns = s->transfer_ns = s->recompute_ns = 0;
    s->loads = s->recomputes = s->bytes_h2d = s->bytes_d2h = 0;
    s->peak_gpu_bytes = s->peak_cpu_bytes = 0;
    s->feasible = 1;
    /* the prompt's KV is computed on the GPU, position by position, and a
     * phase may begin within it (before p1 the last prompt position is the
     * fullest); its offloads are counted with step 0's */
    struct rule_state st = {0, 0};
    double copies = 0;
    uint32_t from = sc.p1 < w->prompt_len || w->prompt_len == 0 ? 0 : w->prompt_len - 1;
    for (uint32_t pos = from; pos < w->prompt_len; pos++) {
        copies += rule_advance(&sc, pos, pos, &st);
        if (!fits(&st, pos + 1, gpu_cap, &pp))
            s->feasible = 0;
    }
    for (uint32_t j = 0; j < w->gen_len; j++) {
        uint32_t pos = w->prompt_len + j, c = pos + 1;
        uint32_t b = sel_budget(&w->sel, c), local = sel_local_share(b);
        /* the step reads before it moves (the paper's order: load, compute,
         * store, offload): its loads see the previous step's places */
        const struct rule_state before = st;
        copies += rule_advance(&sc, pos, c - local, &st);
        if (!fits(&st, c, gpu_cap, &pp))
            s->feasible = 0;
        double gpu_tok = c - st.off;
        double cpu_bytes = (double)(st.off - st.del) * pp.kv_bytes + (double)st.del * pp.input_bytes;
        double gpu = m->weight_bytes_fp16 + fixed_all + streams * gpu_tok * pp.kv_bytes;
        if (gpu > s->peak_gpu_bytes)
            s->peak_gpu_bytes = gpu;
        if (streams * cpu_bytes > s->peak_cpu_bytes)
            s->peak_cpu_bytes = streams * cpu_bytes;
        /* the global half, over the tokens before the window as each
         * layer's picks fall in the trace (or evenly): the CPU's share
         * loaded, the deleted one recomputed; each layer priced alone, as
         * the simulator's layers are */
        double old = c - local, global = b - local < old ? b - local : old;
        double d2h = B * copies * pp.kv_bytes;
        copies = 0;
        double tcj = tc ? tc[j] : step_compute_ns(w, j, gpu_tok), tcl = tcj / L;
        double step = 0, step_ref = 0;
        for (uint32_t t = 0; t < P; t++) {
            double nl = following[t];
            if (nl == 0)
                continue;
            const double *cdf = w->pick_cdf ? w->pick_cdf + (size_t)t * (w->pick_bins + 1) : NULL;
            double on_cpu = picks_below(w, cdf, before.off, pos, old, global);
            double deleted = picks_below(w, cdf, before.del, pos, old, global);
            double loads = global * (on_cpu - deleted), recomputes = global * deleted;
            double h2d = B * (loads * pp.kv_bytes + recomputes * pp.act_bytes), tm, tr;
            step += nl * layer_price(w, tcl, h2d, d2h, B * recomputes, &tm, &tr);
            if (ref)
                step_ref += nl * layer_price(w, tcl, h2d, ref[j].d2h, B * recomputes, NULL, NULL);
            s->transfer_ns += nl * tm;
            s->recompute_ns += nl * tr;
            s->loads += nl * B * loads;
            s->recomputes += nl * B * recomputes;
            s->bytes_h2d += nl * h2d;
        }
        if (view)
            view[j] = (struct step_view){d2h, step, step_ref};
        s->total_ns += step;
        s->compute_ns += tcj;
        s->bytes_d2h += L * d2h;
    }
    free(following);
    return 0;
}

int alisa_schedule_eval(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e)
{
    return eval_with(w, NULL, s, NULL, NULL, e);
}

/* The schedule in positions from the greedy rule's p1 and alpha (which may
 * begin within the prompt), with phase III from decode step p2 (gen_len:
 * never) at share beta. */
static void greedy_at(const struct search_workload *w, const struct alisa_sched *g, double beta,
                      uint32_t p2, struct alisa_schedule *s)
{
    memset(s, 0, sizeof *s);
    s->at_given = 1;
    s->at = *g;
    s->alpha = g->alpha;
    s->p1 = g->p1 == UINT32_MAX ? w->gen_len : g->p1 > w->prompt_len ? g->p1 - w->prompt_len : 0;
    s->p2 = p2 < s->p1 ? s->p1 : p2;
    s->beta = s->p2 < w->gen_len ? beta : 0;
    s->at.beta = s->beta;
    /* phase III with phase II begins where phase II does, in the prompt too
     * (a CPU tier that overflows within the prompt needs it there) */
    s->at.p2 = s->p2 >= w->gen_len ? UINT32_MAX
               : s->p2 == s->p1   ? s->at.p1
                                  : w->prompt_len + s->p2;
}

int alisa_search_greedy(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e)
{
    memset(s, 0, sizeof *s);
    struct place_params pp;
    stream_params(w, &pp);
    struct alisa_sched g;
    place_alisa_greedy(&pp, w->prompt_len + w->gen_len, &g);
    /* where the CPU tier overflows, phase III cannot begin later nor delete
     * less */
    uint32_t p2_cap = w->gen_len;
    double beta_min = 0;
    if (g.p2 != UINT32_MAX) {
        p2_cap = g.p2 > w->prompt_len ? g.p2 - w->prompt_len : 0;
        beta_min = g.beta;
    }
    struct alisa_sched phase2 = g;
    phase2.beta = 0;
    phase2.p2 = UINT32_MAX;
    greedy_at(w, &phase2, 0, w->gen_len, s);
    int rc;
    if (g.p1 == UINT32_MAX || g.alpha <= 0) { /* phase I throughout */
        rc = alisa_schedule_eval(w, s, e);
        s->evaluated = 1;
        return rc;
    }
    struct step_view *keep = malloc((size_t)w->gen_len * 2 * sizeof *keep), *del = keep + w->gen_len;
    if (!keep)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u step prices", w->gen_len);
    uint64_t evaluated = 1;
    /* each step with the CPU tokens loaded when picked (phase II alone) */
    struct alisa_schedule best = *s, c;
    if ((rc = eval_with(w, NULL, &best, keep, NULL, e)))
        goto done;
    int have = best.feasible; /* phase II alone, where the CPU tier holds it */
    /* from beta 1 down, so of two shares deleting the same whole tokens the
     * larger is reported */
    for (int k = 20; k >= 1; k--) {
        double beta = k / 20.0;
        if (beta < beta_min) {
            if (k < 20 && (k + 1) / 20.0 > beta_min)
                beta = beta_min; /* the least share the CPU tier needs */
            else
                continue;
        }
        /* the same steps with the oldest ceil(beta n_off) deleted: a step's
         * picks among them recomputed instead of loaded. Phase III from the
         * first step where that is cheaper (its offloads as phase II's: the
         * choice is between two ways to reach the same tokens) */
        greedy_at(w, &phase2, beta, 0, &c);
        if ((rc = eval_with(w, NULL, &c, del, keep, e)))
            goto done;
        evaluated++;
        uint32_t p2 = w->gen_len;
        for (uint32_t j = c.p1; j < w->gen_len && p2 == w->gen_len; j++)
            if (del[j].price_ref < keep[j].price)
                p2 = j;
        if (p2 > p2_cap)
            p2 = p2_cap;
        if (p2 >= w->gen_len)
            continue; /* never cheaper, and the CPU tier holds it all */
        greedy_at(w, &phase2, beta, p2, &c);
        if ((rc = eval_with(w, NULL, &c, NULL, NULL, e)))
            goto done;
        evaluated++;
        if (c.feasible && (!have || c.total_ns < best.total_ns)) {
            best = c;
            have = 1;
        }
    }
    if (!have) { /* nothing fits: the capacity rule's schedule, reported infeasible */
        greedy_at(w, &g, g.beta, p2_cap, &best);
        if ((rc = alisa_schedule_eval(w, &best, e)))
            goto done;
        evaluated++;
    }
    *s = best;
    s->evaluated = evaluated;
done:
    free(keep);
    return rc;
}

int alisa_search_grid(const struct search_workload *w, uint32_t grid, struct alisa_schedule *s,
                      struct alisa_err *e)
{
    if (grid == 0)
        return err_set(e, ALISA_EINVAL, "grid must be at least 1");
    struct alisa_schedule greedy;
    int rc = alisa_search_greedy(w, &greedy, e);
    if (rc)
        return rc;
    struct alisa_schedule best = greedy;
    uint64_t evaluated = 1;
    /* a profile without a sparse attention table prices compute by the
     * attended tokens alone: the same for every schedule */
    double *tc = NULL;
    if (!w->hw->attn_sparse_by_kv.n) {
        if (!(tc = malloc((size_t)w->gen_len * sizeof *tc)))
            return err_set(e, ALISA_ENOMEM, "out of memory for %u step costs", w->gen_len);
        for (uint32_t j = 0; j < w->gen_len; j++)
            tc[j] = step_compute_ns(w, j, w->prompt_len + j + 1);
    }
    /* candidate values: the grid plus the greedy point */
    double shares[1026];
    uint32_t steps[1026];
    uint32_t n_shares = 0, n_steps = 0;
    if (grid > 1024)
        grid = 1024;
    for (uint32_t i = 0; i <= grid; i++) {
        shares[n_shares++] = (double)i / grid;
        steps[n_steps++] = (uint32_t)((uint64_t)w->gen_len * i / grid);
    }
    double greedy_shares[2] = {greedy.alpha, greedy.beta};
    uint32_t greedy_steps[2] = {greedy.p1, greedy.p2};
    for (int i = 0; i < 2; i++) {
        shares[n_shares++] = greedy_shares[i];
        steps[n_steps++] = greedy_steps[i];
    }
    for (uint32_t a = 0; a < n_shares; a++)
        for (uint32_t b = 0; b < n_shares; b++)
            for (uint32_t i = 0; i < n_steps; i++)
                for (uint32_t j = 0; j < n_steps; j++) {
                    struct alisa_schedule c = {.alpha = shares[a], .beta = shares[b],
                                               .p1 = steps[i], .p2 = steps[j]};
                    if (c.p1 > c.p2)
                        continue;
                    /* alpha 0 makes p1 and beta meaningless; beta 0 makes p2 so */
                    if ((c.alpha == 0 && (c.p1 != w->gen_len || c.beta != 0)) ||
                        (c.beta == 0 && c.p2 != w->gen_len))
                        continue;
                    if (eval_with(w, tc, &c, NULL, NULL, e))
                        continue;
                    evaluated++;
                    if (c.feasible && (!best.feasible || c.total_ns < best.total_ns))
                        best = c;
                }
    free(tc);
    best.evaluated = evaluated;
    *s = best;
    return 0;
}
