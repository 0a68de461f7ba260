/* ALISA's offline choice of alpha, beta, p1, p2 (ALISA.md sections 2-3): the
 * paper's three-phase schedule priced analytically, and two searches, the
 * paper's greedy rule and an exhaustive grid, so they can be compared.
 *
 * The schedule is the one placement `alisa` runs (placement.h, struct
 * alisa_sched), counted the same way in whole tokens per (sequence, layer)
 * stream with the simulator's per-stream capacities, so a schedule the
 * search calls feasible never runs out of memory in `alisa sim`. Over
 * decode steps j = 0..gen_len-1 (position P + j, context c_j = P + j + 1):
 *  - j < p1 (phase I): all KV on the GPU;
 *  - p1 <= j (phase II): the oldest ceil(alpha c_j) positions, at most those
 *    before the local window, on the CPU: a bulk offload at p1, then each
 *    step's new share;
 *  - p2 <= j (phase III): the oldest ceil(beta n_off) of those deleted, their
 *    layer inputs kept on the host.
 * Each step attends sel_budget(c_j) tokens; the SWA global half of them
 * falls on the tokens before the window as the trace's selection places its
 * picks (pick_cdf) or, without one, evenly, so in expectation the share of
 * it on the CPU is loaded and the share deleted is recomputed, for the step
 * only. Per layer the step pays what the simulator prices for a layer with
 * those moves: compute (costmodel.h), the loads and recompute inputs over
 * the link, the recompute on the GPU (one GEMM of the recomputed tokens'
 * inputs, cost_recompute_gpu_ns), the offloads. T_j sums them (the paper's
 * Tc + Tm + Tr, section V-A), or with overlap, as the simulator's prefetch
 * runs a layer's copies beside the previous layer's compute, T_j is the
 * larger of the GPU's work (Tc + Tr) and the link's (Tm). Feasible when, at
 * every position, the GPU tier holds its tokens and the CPU tier its tokens
 * plus the deleted tokens' inputs.
 */
#ifndef ALISA_ALISA_SEARCH_H
#define ALISA_ALISA_SEARCH_H

#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "placement.h"
#include "selection.h"

struct search_workload {
    const struct model_shape *model;
    const struct hw_profile *hw;
    uint32_t batch;          /* sequences */
    uint32_t prompt_len;     /* tokens */
    uint32_t gen_len;        /* decode steps */
    struct sel_params sel;   /* the selection budget (SWA) */
    enum kv_precision precision;
    int tiers_given;         /* 1: the tiers' KV bytes below (the simulator's); 0: the
                                profile's GPU memory minus the weights, and its host DRAM */
    double gpu_kv_bytes, cpu_kv_bytes; /* the whole batch's, split evenly over its streams */
    int inputs_outside;      /* deleted tokens' layer inputs kept outside the CPU tier (the
                                executor); 0: they take its bytes */
    double layer_host_ns;    /* the host's launches of one decode layer (cost_layer_host_ns):
                                Tc_j is at least the layers times this; 0: not priced */
    int overlap;             /* 1: T_j = max(Tc + Tr, Tm), copies beside compute (the
                                simulator's prefetch, FlexGen's loop); 0: Tc + Tm + Tr */
    const double *pick_cdf;  /* (pick_layers, pick_bins + 1): [t][k] the share of a step's
                                global picks in trace layer t whose position is below k /
                                pick_bins of the query position, as the trace's selection
                                picks them (selstats_replay); model layer l follows trace
                                layer floor(l x pick_layers / n_layers); NULL: spread evenly
                                over the tokens before the local window */
    uint32_t pick_bins, pick_layers;
    int pageable_relay;      /* 1: the KV loads are staged by the host from pageable memory
                                first (cost_pageable_relay_ns, the software's pageable_relay) */
};

struct alisa_schedule {
    double alpha;            /* share of KV on the CPU from p1, [0, 1] */
    double beta;             /* share of the CPU part deleted from p2, [0, 1] */
    uint32_t p1, p2;         /* decode steps; p1 <= p2 <= gen_len (gen_len: never); 0 also
                                stands for a phase that begins within the prompt */
    int at_given;            /* 1: `at` is the schedule (the greedy rule's, which may begin
                                within the prompt); 0: it follows from p1, p2 */
    struct alisa_sched at;   /* in positions, as placement alisa runs it */
    double loads, recomputes; /* tokens, whole batch and every layer, expected */
    double bytes_h2d, bytes_d2h;
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

/* The paper's greedy search (section V-A, Algorithm 2's p1, alpha, p2,
 * beta), pricing time:
 *  - phase II when the GPU cannot hold the step's KV: p1 = the first such
 *    step, alpha = the smallest share that makes the last step fit
 *    (place_alisa_greedy on one stream's capacities; more alpha only loads
 *    and offloads more, so the smallest feasible share is also the cheapest);
 *  - phase III where recomputing the oldest CPU tokens becomes cheaper than
 *    retrieving them (Fig. 7b: "recomputing partial KV tensors is faster than
 *    retrieving them from CPU memory"): for each beta in 1/20 steps (and the
 *    least share the CPU tier needs, if it overflows), p2 = the first step
 *    whose price with the oldest ceil(beta n_off) CPU tokens deleted is below
 *    its price with them loaded (never, if no step is), no later than the
 *    step where the CPU tier overflows; the beta whose schedule costs least
 *    is kept. No phase III when no beta makes any step cheaper and the CPU
 *    tier holds everything.
 * Infeasible (s->feasible 0) when even then nothing fits. */
int alisa_search_greedy(const struct search_workload *w, struct alisa_schedule *s,
                        struct alisa_err *e);

/* Exhaustive search over alpha, beta in steps of 1/grid, p1, p2 in steps of
 * gen_len/grid, plus the greedy point; returns the feasible schedule with the
 * least modelled time (never worse than greedy's). grid >= 1. */
int alisa_search_grid(const struct search_workload *w, uint32_t grid, struct alisa_schedule *s,
                      struct alisa_err *e);

/* The schedule in positions, as placement `alisa` takes it: s->at when
 * given, else step j is position prompt_len + j and gen_len (never) is
 * UINT32_MAX. Cannot fail. */
struct alisa_sched alisa_schedule_positions(const struct search_workload *w,
                                            const struct alisa_schedule *s);

#endif
