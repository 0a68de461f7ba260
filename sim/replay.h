/* Replaying a trace through the scheduler: the simulator shell's first half
 * (decisions and byte counts, no time yet).
 *
 * Each (sequence, layer) of the trace is one stream (id seq * n_layers +
 * layer), or with per_head each (sequence, layer, KV head) (id (seq *
 * n_layers + layer) * n_kv_heads + head), driven by its KV head's row: the
 * mean of the per-head rows of the query heads that share it (query head q
 * reads KV head q / (n_heads / n_kv_heads), as HF's repeat_kv and the
 * executor's cpu_attend group them). Prompt rows feed prefill, decode rows
 * drive scheduler_step and are fed back with scheduler_observe_dense. Offline placements (belady) get their
 * future from a first pass with the same selection: selection never depends
 * on placement. Capacities are totals, split evenly over the streams.
 */
#ifndef ALISA_REPLAY_H
#define ALISA_REPLAY_H

#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "scheduler.h"
#include "trace_gen.h"

struct replay_config {
    const struct selection_ops *sel;
    struct sel_params sel_params;
    const struct placement_ops *place;
    uint64_t gpu_kv_bytes;      /* GPU tier capacity for the whole trace, bytes */
    uint64_t cpu_kv_bytes;      /* CPU tier capacity for the whole trace, bytes */
    enum kv_precision precision;
    const struct hw_profile *hw; /* prices load vs recompute */
    double gpu_fraction;        /* flexgen-static share; < 0 = largest that fits */
    const struct kv_shape *shape; /* KV shape to price and size tokens with; NULL = the
                                   trace's model (the simulator passes the target model's) */
    uint64_t capacity_streams;  /* streams the capacities are split over; 0 = the trace's
                                   (the simulator passes batch x model layers) */
    int every_layer_selects;    /* 1: the selection runs in every trace layer, its dense
                                   leading layers (selection_ops.dense_layers) not taken as
                                   the trace's first ones (the simulator replays the model's
                                   dense layers apart, with the dense selection) */
    uint32_t positions;         /* replay only query positions below this; 0 = all */
    int cpu_attention;          /* flexgen-static: attend CPU shares on the CPU */
    int flexgen_whole;          /* flexgen-static: FlexGen's split by whole trace sequences
                                   (place_flexgen_split), as the executor runs it; 0: every
                                   stream holds the share, the split averaged (KV_SPLIT) */
    int inputs_outside;         /* the executor's storage (costmodel.h, struct tier_storage):
                                   layer inputs outside the CPU tier, INT8 scales outside the
                                   GPU tier; 0: the paper's system, where they take their bytes */
    const struct alisa_sched *sched; /* placement alisa: the schedule (positions); NULL = the
                                   greedy schedule of each stream's capacities */
    int per_head;               /* 1: one stream per (sequence, layer, KV head) on the
                                   trace's per-head rows (required), each holding that
                                   head's share of a token (tier_storage.heads): the
                                   selection and placement decide per (token, head), as
                                   Quest, InfiniGen and H2O select per head; plan counts
                                   are (token, head) units, bytes are bytes. Refused with
                                   extend, flexgen_whole's split, and a model shape (kv_dim,
                                   hidden, INT4 groups) that does not split into the trace's
                                   KV heads. 0: one stream per (sequence,
                                   layer) on the head-mean row */
    const struct trace_gen_params *extend; /* when non-NULL, sequences shorter than
                                   `positions` continue with synthetic rows from this model
                                   (one gen_stream per stream, seeded from the trace's seed) */
};

/* Sums over all streams at one query position. */
struct replay_pos {
    uint32_t streams;       /* streams that reached this position */
    uint64_t attended;      /* tokens attended */
    uint64_t gpu, cpu, dropped, gone; /* tokens by place after the step */
    uint64_t bytes_h2d, bytes_d2h;
    uint64_t loads, recomputed, offloads, drops, misses;
};

struct replay_totals {
    uint32_t n_streams;
    uint32_t heads;            /* streams a (sequence, layer) has: 1, or n_kv_heads per head */
    uint32_t max_len;          /* tokens per sequence, at most */
    uint64_t kv_bytes;         /* per token per layer (per head: a unit's) */
    uint64_t act_bytes;        /* per token per layer, recompute input (per head: a share) */
    uint32_t gpu_cap_tokens;   /* per stream */
    uint32_t cpu_cap_tokens;   /* per stream */
    double load_ns, recompute_ns; /* per token, from the cost model */
    uint64_t decode_steps;     /* stream-steps */
    uint64_t attended_tokens;
    uint64_t gpu_misses;       /* attended tokens not on the GPU at their step */
    uint64_t bytes_h2d, bytes_d2h;
    uint64_t loads, recomputed_tokens, offloads, drops, retired;
    uint64_t bytes_cpu_attend;  /* KV bytes attended on the CPU (flexgen-static delegation) */
    uint64_t peak_gpu_bytes, peak_cpu_bytes; /* all streams together */
    double fetch_cost_ns;      /* loads x load_ns + recomputations x recompute_ns + offloads
                                  x load_ns: oracle-cost's objective, for any placement
                                  (flexgen-static's partial loads count as whole) */
    int oom;
    int oom_cpu;               /* it was the CPU tier (a schedule that does not fit) */
    uint32_t oom_pos;          /* first position that ran out of memory */
    int64_t phase2_pos;        /* first position with an offload, -1 if none */
    int64_t phase3_pos;        /* first position with a drop, -1 if none */
    double recall_mean;        /* attended share of the trace's stored attention mass */
    double recall_min;
    double head_recall_mean;   /* the same over each KV head's row (its query group's mean
                                  per-head row), over every (step, KV head) of the trace's own
                                  rows (not the synthetic extension's): what a head-mean set
                                  keeps of what each head attends; per_head: the recall. NAN
                                  where the trace has no per-head rows */
    double head_recall_min;    /* the worst (step, KV head) */
    struct replay_pos *per_pos; /* (max_len), owned */
};

/* The same run under the offline bounds (issue 45: how far a placement is
 * from the best possible): Belady's MIN (the fewest GPU misses) and
 * oracle-cost (the least fetch cost when recomputing is no dearer than
 * loading, a heuristic otherwise), same trace, selection and tiers. */
struct replay_optimum {
    int compared;              /* 0: cfg's placement is no online cache (an offline bound
                                  itself, a step rule or a schedule): nothing run */
    int oom;                   /* a bound ran out of memory (the selection's need alone) */
    uint64_t belady_misses;
    double belady_fetch_ns, oracle_fetch_ns;
};

/* Replays path under cfg with belady and with oracle-cost in place of its
 * placement into *opt, when cfg's placement is an online cache. Errors as
 * replay_trace's. */
int replay_optimum(const char *path, const struct replay_config *cfg, struct replay_optimum *opt,
                   struct alisa_err *e);

/* Called with every plan, in trace order; may be NULL. row: the attention
 * row (plan->pos + 1 weights) that drove the step: the trace's (per_head:
 * its KV head's), or the synthetic extension's. With per_head a (seq,
 * layer) gets one plan per KV head, plan->stream % n_kv_heads the head. */
typedef void (*replay_plan_fn)(void *user, const struct scheduler_plan *plan, uint32_t seq,
                               uint32_t layer, const float *row);

/* Replays path under cfg into *tot (zeroed first; release with
 * replay_totals_free). Errors: the trace's (file, byte offset), or the
 * configuration's. Running out of GPU memory is a result (tot->oom), not an
 * error. */
int replay_trace(const char *path, const struct replay_config *cfg, struct replay_totals *tot,
                 replay_plan_fn fn, void *user, struct alisa_err *e);

void replay_totals_free(struct replay_totals *tot);

/* The future selection an offline placement reads (struct kv_future, one
 * per stream): the attended tokens of each stream's decode steps, recorded
 * from a pass under a placement that never evicts (selection never depends
 * on placement), then turned into each token's list of steps. */
struct kv_futures;

/* An empty record for n_streams streams. ALISA_ENOMEM. */
int kv_futures_create(struct kv_futures **out, uint32_t n_streams, struct alisa_err *e);

/* Records a decode plan's attended tokens for its stream; plans of a stream
 * must come in increasing positions. ALISA_ENOMEM. */
int kv_futures_record(struct kv_futures *f, const struct scheduler_plan *plan);

/* The futures (n_streams, owned by f) of tokens below max_len, once; NULL
 * with e set when out of memory. */
const struct kv_future *kv_futures_build(struct kv_futures *f, uint32_t max_len,
                                         struct alisa_err *e);

void kv_futures_free(struct kv_futures *f); /* accepts NULL */

/* The synthetic continuation of the trace at path (alisa sim --extend, and
 * serving's requests longer than the trace): the generator's model
 * (trace_gen.h) with the trace's shape, each layer's sparsity target that
 * layer's measured mean decode sparsity (a profile of a knot per layer;
 * a trace of one layer or more than TRACE_GEN_PROFILE_MAX layers: ramped
 * between the first and last layers'; capped at 0.999). Errors: the
 * trace's. */
int replay_extension_params(const char *path, struct trace_gen_params *ext, struct alisa_err *e);

#endif
