/* ALISA's offline choice of alpha, beta, p1, p2 (ALISA.md sections 2-3): an
 * analytical three-phase schedule, its modelled time, and two searches, the
 * paper's greedy rule and an exhaustive grid, so they can be compared.
 *
 * Schedule over decode steps j = 0..gen_len-1 (context c_j = prompt + j + 1):
 *  - j < p1 (phase I): all KV on the GPU;
 *  - p1 <= j < p2 (phase II): a share alpha of the KV on the CPU (the oldest
 *    tokens; the local window stays on the GPU), offloaded in bulk at p1
 *    and one new token's share per step after;
 *  - j >= p2 (phase III): a share beta of the CPU part deleted.
 * Each step attends sel_budget(c_j) tokens; of its global half, the share
 * living on the CPU is loaded and the share deleted is recomputed.
 * T_j = compute + transfer + recompute (costmodel.h). Feasible when the GPU
 * holds the weights plus its KV share and the CPU its share, plus the layer
 * inputs of deleted tokens, at every step.
 */
#ifndef ALISA_ALISA_SEARCH_H
#define ALISA_ALISA_SEARCH_H

#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "selection.h"

struct search_workload {
    const struct model_shape *model;
    const struct hw_profile *hw;
    uint32_t batch;          /* sequences */
    uint32_t prompt_len;     /* tokens */
    uint32_t gen_len;        /* decode steps */
    struct sel_params sel;   /* the selection budget (SWA) */
    enum kv_precision precision;
};

struct alisa_schedule {
    double alpha;            /* share of KV on the CPU from p1, [0, 1] */
    double beta;             /* share of the CPU part deleted from p2, [0, 1] */
    uint32_t p1, p2;         /* decode steps; p1 <= p2 <= gen_len (gen_len: never) */
    int feasible;            /* fits both tiers at every step */
    double total_ns;         /* sum of T_j */
    double compute_ns, transfer_ns, recompute_ns;
    double peak_gpu_bytes;   /* weights + GPU KV, at the worst step */
    double peak_cpu_bytes;
    uint64_t evaluated;      /* schedules the search evaluated */
};

/* Fills s's time, peaks and feasibility from its alpha, beta, p1, p2.
 * Returns ALISA_EINVAL for out-of-range parameters. */
int alisa_schedule_eval(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e);

/* The greedy rule: every tier as full as it can be, as long as it can be.
 * p1 = the first step whose KV no longer fits the GPU, alpha = the smallest
 * share that makes the last step fit; p2 and beta likewise for the CPU.
 * Infeasible (s->feasible 0) when even then nothing fits. */
int alisa_search_greedy(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e);

/* Exhaustive search over alpha, beta in steps of 1/grid, p1, p2 in steps of
 * gen_len/grid, plus the greedy point; returns the feasible schedule with the
 * least modelled time (never worse than greedy's). grid >= 1. */
int alisa_search_grid(const struct search_workload *w, uint32_t grid, struct alisa_schedule *s,
                      struct alisa_err *e);

#endif
