/* ALISA's schedule search (contract in alisa_search.h).
 *
 * The evaluation is closed-form per step, so the grid is cheap: O(grid^4 *
 * gen_len) step evaluations. Byte counts are for the whole batch and every
 * layer. The greedy point is always a grid candidate, which is what makes
 * "grid never worse than greedy" hold.
 */
#include "alisa_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

/* Compute time of each decode step: independent of alpha, beta, p1, p2. */
static double step_compute_ns(const struct search_workload *w, uint32_t j)
{
    uint32_t c = w->prompt_len + j + 1;
    int sparse = w->sel.budget_tokens > 0 || w->sel.sparsity > 0;
    return cost_step_compute_ns(w->model, w->hw, w->batch, sel_budget(&w->sel, c), c,
                                w->precision, sparse);
}

/* alisa_schedule_eval with the step compute times given (tc: (gen_len), or
 * NULL to compute them). */
static int eval_with(const struct search_workload *w, const double *tc, struct alisa_schedule *s,
                     struct alisa_err *e);

int alisa_schedule_eval(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e)
{
    return eval_with(w, NULL, s, e);
}

static int eval_with(const struct search_workload *w, const double *tc_cache,
                     struct alisa_schedule *s, struct alisa_err *e)
{
    if (!(s->alpha >= 0 && s->alpha <= 1 && s->beta >= 0 && s->beta <= 1) || s->p1 > s->p2 ||
        s->p2 > w->gen_len)
        return err_set(e, ALISA_EINVAL, "schedule alpha %g beta %g p1 %u p2 %u out of range "
                       "(0 <= alpha, beta <= 1, p1 <= p2 <= %u)", s->alpha, s->beta, s->p1,
                       s->p2, w->gen_len);
    const struct model_shape *m = w->model;
    struct kv_shape k = kv_shape_of(m, w->precision);
    double per_token = (double)w->batch * m->n_layers * (double)cost_kv_bytes(&k);
    double fixed = (double)w->batch * m->n_layers * (double)cost_kv_fixed_bytes(&k);
    /* a deleted token keeps its layer input on the host for recomputation */
    double act_ratio = (double)cost_act_bytes(&k) / (double)cost_kv_bytes(&k);
    double gpu_cap = w->hw->gpu_mem_gib * GIB, cpu_cap = w->hw->host_dram_gib * GIB;
    double weights = m->weight_bytes_fp16;
    s->feasible = 1;
    s->total_ns = s->compute_ns = s->transfer_ns = s->recompute_ns = 0;
    s->peak_gpu_bytes = s->peak_cpu_bytes = 0;
    for (uint32_t j = 0; j < w->gen_len; j++) {
        double c = (double)w->prompt_len + j + 1;
        double kv = c * per_token;
        double on_cpu = j >= s->p1 ? s->alpha : 0;             /* share of all KV */
        double deleted = j >= s->p2 ? on_cpu * s->beta : 0;    /* share of all KV */
        double gpu = weights + fixed + (1 - on_cpu) * kv;
        double cpu = (on_cpu - deleted) * kv + deleted * kv * act_ratio;
        if (gpu > s->peak_gpu_bytes)
            s->peak_gpu_bytes = gpu;
        if (cpu > s->peak_cpu_bytes)
            s->peak_cpu_bytes = cpu;
        if (gpu > gpu_cap || cpu > cpu_cap)
            s->feasible = 0;
        uint32_t b = sel_budget(&w->sel, (uint32_t)c);
        double local = sel_local_share(b), global = b - local;
        /* the CPU holds the oldest tokens, all older than the local window */
        double old = c - local, off_share = old > 0 ? on_cpu * c / old : 0;
        if (off_share > 1)
            off_share = 1;
        double del_share = old > 0 && on_cpu > 0 ? off_share * (deleted / on_cpu) : 0;
        double loads = global * (off_share - del_share), recomputes = global * del_share;
        double moved = loads * per_token;
        double copies = loads > 0 ? m->n_layers : 0;
        if (j == s->p1 && on_cpu > 0) {
            moved += on_cpu * kv; /* the bulk offload entering phase II */
            copies += m->n_layers;
        } else if (j > s->p1 && on_cpu > 0) {
            moved += on_cpu * per_token; /* the new token's share */
            copies += m->n_layers;
        }
        double tc = tc_cache ? tc_cache[j] : step_compute_ns(w, j);
        double tm = cost_transfer_ns(w->hw, moved, copies);
        double tr = cost_recompute_all_ns(m, w->hw, recomputes * w->batch, w->precision);
        s->compute_ns += tc;
        s->transfer_ns += tm;
        s->recompute_ns += tr;
    }
    s->total_ns = s->compute_ns + s->transfer_ns + s->recompute_ns;
    return 0;
}

int alisa_search_greedy(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e)
{
    memset(s, 0, sizeof *s);
    const struct model_shape *m = w->model;
    struct kv_shape k = kv_shape_of(m, w->precision);
    double per_token = (double)w->batch * m->n_layers * (double)cost_kv_bytes(&k);
    double fixed = (double)w->batch * m->n_layers * (double)cost_kv_fixed_bytes(&k);
    double gpu_room = w->hw->gpu_mem_gib * GIB - m->weight_bytes_fp16 - fixed;
    double cpu_room = w->hw->host_dram_gib * GIB;
    double kv_last = ((double)w->prompt_len + w->gen_len) * per_token;
    s->p1 = s->p2 = w->gen_len;
    for (uint32_t j = 0; j < w->gen_len; j++)
        if (((double)w->prompt_len + j + 1) * per_token > gpu_room) {
            s->p1 = j;
            break;
        }
    if (s->p1 < w->gen_len) {
        s->alpha = gpu_room > 0 ? 1 - gpu_room / kv_last : 1;
        for (uint32_t j = s->p1; j < w->gen_len; j++)
            if (s->alpha * ((double)w->prompt_len + j + 1) * per_token > cpu_room) {
                s->p2 = j;
                break;
            }
        if (s->p2 < w->gen_len)
            s->beta = 1 - cpu_room / (s->alpha * kv_last);
    }
    /* a bulk offload at p1 must already fit the GPU at p1 with this alpha */
    int rc = alisa_schedule_eval(w, s, e);
    s->evaluated = 1;
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
    double *tc = malloc((size_t)w->gen_len * sizeof *tc);
    if (!tc)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u step costs", w->gen_len);
    for (uint32_t j = 0; j < w->gen_len; j++)
        tc[j] = step_compute_ns(w, j);
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
                    if (eval_with(w, tc, &c, e))
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
