/* The discrete-event simulator: replays a trace's attention for a batched
 * decode of a catalog model on a hardware profile, under a system (a
 * selection, a placement and execution rules), and reports time, throughput
 * and traffic. The scheduler core decides; this shell prices and orders.
 *
 * Workload mapping: model layer l reads trace layer floor(l * Lt / Lm);
 * batch slot i reads trace sequence i mod S (slots beyond the trace's
 * sequences reuse them round-robin). Streams that map to the same trace
 * stream make the same decisions, so each trace stream is scheduled once and
 * weighted by how many model streams map to it. Capacities are split evenly
 * over the batch x model-layer streams.
 *
 * Timing: per decode step and model layer, five tasks on four resources:
 * LOAD (host-to-device link: the layer's loads and recompute inputs, and
 * streamed weights), RECOMPUTE and COMPUTE (the GPU stream, in that order),
 * CPU_ATTN (the CPU: FlexGen's attention over CPU-resident KV, through its
 * FP32 workspace: cost_cpu_attention_ns), OFFLOAD
 * (device-to-host link). Dependencies: COMPUTE(g) after COMPUTE(g-1),
 * LOAD(g), RECOMPUTE(g) and CPU_ATTN(g); CPU_ATTN(g) after COMPUTE(g-1) (it
 * needs the layer's query; serial with the GPU, a conservative choice);
 * RECOMPUTE(g) after LOAD(g); LOAD(g) after
 * COMPUTE(g-2) (double buffering: layer g loads while g-1 computes, since
 * the selection of every layer of a step depends only on earlier steps;
 * after COMPUTE(g-1) without prefetch, and always under a selection that
 * reads the step's own row, whose picks wait for layer g's query) and
 * after OFFLOAD of the same layer one step earlier; OFFLOAD(g) after
 * COMPUTE(g). g counts layers across steps. Prefill runs first on the GPU.
 *
 * vLLM (block_tokens > 0) is modelled at sequence granularity instead: dense
 * attention, all KV on the GPU in blocks; when a running sequence needs a
 * block and none is free, the most recently admitted running sequence is
 * preempted (its blocks freed); waiting sequences are re-admitted, oldest
 * preemption first, when their blocks plus one fit, and pay a prefill over
 * their prompt and generated tokens (recomputation). Every step runs on the
 * GPU alone, so the time is the sum of the steps' prefill and decode costs.
 *
 * Software (sim_config.sw, the system's entry in software.ini): a decode
 * layer's COMPUTE lasts at least the host's time to launch it
 * (cost_layer_host_ns: the GPU cannot run ahead of the launches; FlexGen
 * syncs after every layer, so no layer's launches run ahead of the previous
 * layer's end, and for an eager runtime without that sync the per-layer
 * maximum is the same when the layers are alike); with pageable_relay each
 * layer's KV loads are first staged by the host into pinned memory
 * (cost_pageable_relay_ns, in series before the copy, on LOAD). Prefill is
 * priced without host costs (its GEMMs outlast the launches).
 *
 * FlexGen (a flexgen_policy system) runs the batch as num_gpu_batches GPU
 * batches of flexgen_gpu_batch sequences: each decode layer is computed, and
 * launched, once per GPU batch, its weights read each time; its cache's GPU
 * share is whole sequences of each GPU batch, rounded down.
 *
 * A serial profile (hw->serial, alisa's CPU executor) runs every task on one
 * resource in the order above, and copies each moved token's K and V
 * separately (two copies per token, each paying link_latency_us).
 */
#ifndef ALISA_SIMULATE_H
#define ALISA_SIMULATE_H

#include <stdint.h>
#include <stdio.h>

#include "alisa_search.h"
#include "catalog.h"
#include "costmodel.h"
#include "flexgen_policy.h"
#include "placement.h"
#include "selection.h"

/* A system preset: the paper's baselines as policy combinations plus
 * execution rules. */
struct sim_system {
    const char *name;
    const char *summary;       /* selection, placement and execution, one paragraph */
    const char *selection;     /* default selection policy */
    const char *placement;     /* default placement policy */
    double weights_cpu_share;  /* share of the weights on the CPU, streamed to the GPU layer by
                                  layer every step (DeepSpeed-ZeRO, Accelerate's offload: 1) */
    int flexgen_policy;        /* FlexGen's shares: SIM_FLEXGEN_LP (its policy search) or
                                  SIM_FLEXGEN_DEFAULT (--percent 100 0 100 0); 0: none */
    double gpu_fraction;       /* flexgen-static share (< 0: largest that fits) */
    uint32_t block_tokens;     /* vLLM: paged KV in blocks of this many tokens; 0 = not paged */
    double gpu_mem_utilization; /* vLLM: the share of GPU memory it may use, KV space being
                                  that share minus its profiling run's peak (weights and
                                  activations); 0 = the whole memory minus the weights */
    uint32_t profile_seqs;     /* vLLM: sequences of that profiling run (max_num_seqs) */
    int cpu_attention;         /* FlexGen: attention over CPU-resident KV runs on the CPU */
    int inputs_outside;        /* the executor: dropped tokens' layer inputs are kept beside
                                  the host KV arena, not in it */
    int flexgen_whole;         /* the executor: flexgen-static splits whole sequences as
                                  FlexGen's code does (replay.h); 0: the split averaged */
    int no_prefetch;           /* a layer's copies start only when the previous layer's
                                  compute has ended (Accelerate's hooks; DeepSpeed as FlexGen's
                                  benchmark runs it); 0: they overlap it (FlexGen's loop) */
    int weights_pageable;      /* the streamed weights live in pageable host memory: each
                                  copy at the profile's measured pageable rate where it has
                                  one (cost_pageable_copy_ns); 0: pinned */
    const char *software;      /* its software.ini entry (host costs); NULL: none */
};

extern const struct sim_system sim_systems[]; /* terminated by a NULL name */
const struct sim_system *sim_system_find(const char *name);

struct sim_config {
    const char *trace;                 /* trace file */
    const struct model_shape *model;   /* target model */
    const struct hw_profile *hw;
    const struct sim_system *system;
    uint32_t batch, prompt_len, gen_len;
    const struct selection_ops *sel;   /* resolved: the system's or an override */
    struct sel_params sel_params;
    const struct placement_ops *place;
    const struct sw_profile *sw;       /* host costs of the software (the system's
                                          software.ini entry or --software); NULL: none */
    enum kv_precision precision;
    double gpu_mem_bytes;              /* GPU memory (default: the profile's) */
    double cpu_mem_bytes;              /* host memory for KV (default: the profile's) */
    double gpu_kv_bytes;               /* > 0: the GPU KV tier's bytes, given directly (the
                                          executor's device arena; weights not counted) */
    int overlap;                       /* 0: the system's; SIM_OVERLAP_PREFETCH or
                                          SIM_OVERLAP_NONE override it (sensitivity) */
    int per_head;                      /* 1: select and place per (token, KV head), one
                                          stream per KV head on the trace's per-head rows
                                          (replay_config.per_head) */
    int extend;                        /* continue a trace shorter than gen_len with synthetic
                                          rows (trace_gen's model; each trace layer's target is
                                          its measured mean sparsity) */
    /* placement alisa (the paper's rule) runs a schedule: the given one, or
     * the one ALISA's search finds for this workload and these tiers */
    int schedule_given;                /* 1: run `schedule` (alpha, beta, p1, p2) */
    struct alisa_schedule schedule;
    uint32_t search_grid;              /* 0: the paper's greedy search; G: the grid (1/G) */
    uint32_t search_sim;               /* G > 0: candidate schedules simulated, the fastest run
                                          (sim_run: the greedy's, the grid's, and the greedy's
                                          alpha and p1 with beta in 1/G steps and p2 at p1 + i
                                          (gen_len - p1) / (G + 1), or never) */
    int percent_given;                 /* 1: run `percent` (FlexGen's weight and cache shares)
                                          instead of the system's */
    struct flexgen_policy percent;
    double percent_act_cpu;            /* with percent: FlexGen's share of the activations on the
                                          CPU (its --percent's last pair; 0: on the GPU) */
    uint32_t flexgen_gpu_batch;        /* FlexGen's gpu_batch_size, dividing batch (the rest is
                                          num_gpu_batches); 0: the whole batch, one GPU batch */
    int prefill_stepwise;              /* 1: the prompt runs position by position, as alisa
                                          validate's executor records its rows: priced as
                                          prompt_len one-token steps of the batch, each a decode
                                          step's compute and arena bookkeeping over the context
                                          so far; 0: one batched pass (cost_prefill_ns) */
};

/* sim_system.flexgen_policy */
enum { SIM_FLEXGEN_NONE = 0, SIM_FLEXGEN_LP = 1, SIM_FLEXGEN_DEFAULT = 2 };

/* sim_config.overlap: how a layer's host-device copies overlap compute. */
enum { SIM_OVERLAP_SYSTEM = 0, SIM_OVERLAP_PREFETCH = 1, SIM_OVERLAP_NONE = 2 };

struct sim_result {
    int oom;                    /* the system cannot run this workload */
    char oom_reason[160];
    double total_s;             /* prefill + decode */
    double prefill_s;
    double throughput_tok_s;    /* batch * gen_len / total_s */
    double compute_s;           /* GPU busy with layer compute */
    double compute_weights_s;   /* of compute_s, the layers priced as if no KV were attended
                                   (the weight GEMMs, the head, fixed per-layer work); the
                                   rest of compute_s is attention over KV (issue 45) */
    double recompute_s;         /* GPU busy recomputing K and V */
    double transfer_s;          /* link busy, both directions */
    double transfer_h2d_s, transfer_d2h_s; /* transfer_s by direction */
    double cpu_attention_s;     /* CPU busy with attention (FlexGen's delegation) */
    double schedule_s;          /* the scheduler's own time, where the profile prices it
                                   (serial profiles: on the processor, before each layer) */
    double stall_s;             /* GPU idle during decode, waiting for transfers or the CPU */
    double host_s;              /* decode time the GPU waited for the host's launches (layers
                                   whose launches outlast their GPU work; in compute_s's
                                   place, not in it) */
    double relay_s;             /* host staging of pageable KV before its copies (in
                                   transfer_s) */
    double estimate_s;          /* of compute_s, the selection's estimate of the step's row
                                   as its runtime computes it on the GPU (cost_estimate_ns:
                                   InfiniGen's speculation, Quest's page bounds) */
    double gather_s;            /* the host's gather of speculated KV before its copies (in
                                   transfer_s; cost_estimate_gather_ns) */
    double estimate_gpu_bytes;  /* GPU memory the estimate holds beside the KV, at the
                                   longest context (out of the KV's share) */
    double bytes_h2d, bytes_d2h;
    double hbm_weight_bytes;    /* decode: device memory read for the weights (and the
                                   head), once per GPU batch (cost_layer_hbm_bytes) */
    double hbm_kv_bytes;        /* decode: device memory read (and, sparse, gathered) for
                                   the KV the GPU attends; the CPU's share is not here */
    double gpu_kv_capacity_bytes, cpu_kv_capacity_bytes;
    double peak_gpu_kv_bytes, peak_cpu_kv_bytes;
    double gpu_hit_rate;        /* attended tokens found on the GPU */
    double recomputed_tokens;
    int64_t phase2_step;        /* first decode step with an offload, -1 if none */
    int64_t phase3_step;        /* first decode step with a drop, -1 if none */
    double recall_mean, recall_min; /* share of the trace's attention mass attended */
    double head_recall_mean, head_recall_min; /* the same over each KV head's row
                                   (replay_totals'); NAN without per-head rows */
    uint64_t events;            /* events the engine processed */
    uint32_t preemptions;       /* vLLM: sequences preempted for lack of KV blocks */
    double mean_batch;          /* sequences decoding per step, on average */
    uint32_t decode_steps;      /* batched decode steps run */
    uint32_t trace_streams;     /* unique (sequence, layer) streams scheduled */
    uint32_t extended_steps;    /* decode steps past the trace's end (synthetic rows) */
    int flexgen;                /* FlexGen's shares were used: */
    struct flexgen_policy policy;
    double flexgen_lp_layer_ns; /* the LP's per-layer time for them (SIM_FLEXGEN_LP) */
    uint32_t gpu_batch_size;    /* FlexGen's, the batch / num_gpu_batches it ran */
    int scheduled;              /* placement alisa ran `schedule` */
    struct alisa_schedule schedule; /* with the search's analytic pricing of it */
};

/* Resolves the system's defaults into cfg (selection, placement) unless
 * already set. Returns ALISA_ENOTFOUND for an unknown policy name. */
int sim_resolve(struct sim_config *cfg, struct alisa_err *e);

/* The same run under the offline bounds (issue 45: where the time went,
 * against the best placement): cfg with belady and with oracle-cost in
 * place of its placement. */
struct sim_optimum {
    int compared;            /* 0: cfg's placement is no online cache: nothing run */
    int oom;                 /* a bound ran out of memory */
    double belady_total_s, belady_transfer_s;
    double oracle_total_s, oracle_transfer_s;
};

/* Runs cfg (resolved) under both bounds into *opt when its placement is an
 * online cache (a host tier, victims chosen by the engine, no future, no
 * schedule) and the system models placement per token. Belady minimises
 * misses, not time, and oracle-cost is a heuristic where recomputing costs
 * more than loading: a bound may be slower than the run. Errors as
 * sim_run's. */
int sim_optimum(const struct sim_config *cfg, struct sim_optimum *opt, struct alisa_err *e);

/* Runs the simulation. Running out of memory is a result (r->oom), not an
 * error; errors are bad traces or impossible configurations. timeline, when
 * non-NULL, receives a per-step CSV. */
int sim_run(const struct sim_config *cfg, struct sim_result *r, FILE *timeline,
            struct alisa_err *e);

#endif
