/* Placement policies: where each token's KV lives for one (sequence, layer)
 * stream (GPU tier, CPU tier, dropped, gone) and what moves at each step.
 * Part of the scheduler core: no clock, no I/O, no exit.
 *
 * KV never changes once computed, so a token loaded from the CPU keeps its
 * CPU copy and evicting it from the GPU later is free; only a token without
 * a CPU copy costs a GPU->CPU offload. A dropped token (no KV anywhere) keeps
 * its layer input on the host and is recomputed on the GPU when attended;
 * from its first drop until it is retired that input takes input_bytes of
 * the CPU tier (KV_INPUT), so deleting a CPU copy frees kv_bytes -
 * input_bytes, and a drop with no room for the input is out of memory.
 * Cache-like policies only choose victims (and load vs recompute); the
 * engine in placement.c moves tokens. A policy with its own step rule
 * (flexgen-static, and alisa: the paper's three phases, place_alisa.c)
 * supplies `step` instead.
 */
#ifndef ALISA_PLACEMENT_H
#define ALISA_PLACEMENT_H

#include <stdint.h>

#include "err.h"

/* Token flags in struct kv_stream.flags. */
#define KV_EXISTS 0x01u  /* the token has been produced (prefill or decode) */
#define KV_GPU 0x02u     /* a full copy is in the GPU tier */
#define KV_CPU 0x04u     /* a full copy is in the CPU tier */
#define KV_GONE 0x08u    /* retired by selection: never attended again, memory freed */
#define KV_PIN 0x10u     /* attended at the current step: may not be evicted */
#define KV_SPLIT 0x20u   /* flexgen-static: a fixed share on each tier */
#define KV_VISIT 0x40u   /* alisa: brought to the GPU for this step only (loaded from the CPU
                            or recomputed) and not kept; its place is still the CPU or dropped */
#define KV_INPUT 0x80u   /* its layer input is kept in the CPU tier (dropped once) */

/* Where a token is, for the "exactly one place" invariant. */
enum kv_place { KV_PLACE_NONE, KV_PLACE_GPU, KV_PLACE_CPU, KV_PLACE_DROPPED, KV_PLACE_GONE,
                KV_PLACE_SPLIT };

/* The future accesses of one stream (offline policies): for token t, the
 * decode steps (query positions) at which it is attended, ascending:
 * steps[start[t]] .. steps[start[t+1]-1]. */
struct kv_future {
    uint32_t n_tokens;
    const uint32_t *start; /* (n_tokens + 1) */
    const uint32_t *steps; /* (start[n_tokens]) */
};

/* The paper's schedule (ALISA.md 2; paper section V-A): from position p1
 * on, the oldest share alpha of a stream's positions has left the GPU; from
 * p2 on, the oldest share beta of those is deleted (its layer input kept on
 * the host). Positions are token indices; UINT32_MAX = never. */
struct alisa_sched {
    double alpha, beta;
    uint32_t p1, p2;
};

struct place_params {
    uint64_t gpu_bytes;       /* GPU tier capacity of this stream, bytes */
    uint64_t cpu_bytes;       /* CPU tier capacity of this stream, bytes */
    uint64_t kv_bytes;        /* KV bytes of one token of this stream (K and V, one layer) */
    uint64_t act_bytes;       /* layer-input bytes moved host->GPU to recompute one token */
    uint64_t input_bytes;     /* CPU-tier bytes a dropped token's kept input takes: act_bytes
                                 where the tier is all host memory (the simulator); 0 where
                                 inputs live outside the tier (the executor keeps every
                                 token's input beside its arenas) */
    double load_ns;           /* modelled cost of loading one token's KV CPU->GPU */
    double recompute_ns;      /* modelled cost of recomputing one token's KV on the GPU */
    double gpu_fraction;      /* flexgen-static: share of every token on the GPU; < 0 = the
                                 largest that fits the whole sequence */
    int cpu_attention;        /* flexgen-static: attend the CPU shares on the CPU (FlexGen's
                                 CPU delegation) instead of loading them */
    struct alisa_sched sched; /* alisa: the schedule to run, when `scheduled` */
    int scheduled;            /* alisa: 0 = the greedy schedule of the stream's own capacities
                                 (place_alisa_greedy) */
    uint32_t unit_tokens;     /* block-lru, block-score: tokens a block, the selection's unit
                                 (selection_ops.unit; scheduler_create sets it); 0: a token */
    uint32_t unit_origin;     /* a token where a block starts (infllm's: after its initial
                                 tokens); blocks tile the positions from there both ways */
};

/* The block token t lies in under p (place_params.unit_*), counted from 0.
 * Cannot fail. */
static inline uint32_t place_unit_index(const struct place_params *p, uint32_t t)
{
    uint32_t u = p->unit_tokens > 1 ? p->unit_tokens : 1;
    return (t + (u - p->unit_origin % u) % u) / u;
}

/* The first token of t's block (the first block may be short). Cannot fail. */
static inline uint32_t place_unit_first(const struct place_params *p, uint32_t t)
{
    uint32_t u = p->unit_tokens > 1 ? p->unit_tokens : 1, shift = (u - p->unit_origin % u) % u;
    uint32_t start = place_unit_index(p, t) * u;
    return start >= shift ? start - shift : 0;
}

/* The state of one stream, shared by the engine and the policies. */
struct kv_stream {
    uint32_t max_len;     /* tokens */
    uint8_t *flags;       /* (max_len) KV_* bits */
    uint32_t gpu_tokens;  /* tokens with KV_GPU */
    uint32_t cpu_tokens;  /* tokens with KV_CPU */
    uint32_t gpu_cap;     /* GPU capacity, whole tokens */
    uint32_t cpu_cap;     /* CPU capacity, whole tokens */
    uint32_t local_start; /* first token of the current local window (kept on the GPU by
                             alisa and alisa-cache) */
    uint32_t inputs;      /* tokens with KV_INPUT */
    uint32_t visits;      /* tokens with KV_VISIT (on the GPU for this step only) */
    uint64_t gpu_bytes;   /* bytes used now (KV_VISIT tokens are not the tier's) */
    uint64_t cpu_bytes;   /* KV plus the kept layer inputs */
};

/* What one step did; the arrays are owned by the scheduler and valid until
 * its next call. Byte counts are for this stream. */
struct place_result {
    uint32_t *load;       /* (n_load) tokens loaded CPU->GPU */
    uint32_t *recompute;  /* (n_recompute) tokens recomputed on the GPU */
    uint32_t *offload;    /* (n_offload) tokens copied GPU->CPU */
    uint32_t *drop;       /* (n_drop) tokens whose last KV copy was deleted */
    uint32_t n_load, n_recompute, n_offload, n_drop;
    uint32_t gpu_misses;  /* attended tokens not on the GPU when the step began */
    uint32_t n_cpu_attend; /* attended tokens whose CPU share is attended on the CPU */
    uint64_t bytes_cpu_attend; /* KV bytes the CPU reads for that */
    uint64_t bytes_h2d;   /* KV loads + recompute inputs */
    uint64_t bytes_d2h;   /* offloads */
    int oom;              /* a tier could not hold the step's tokens */
    int oom_cpu;          /* with oom: it was the CPU tier */
};

struct placement_ops {
    const char *name;
    const char *summary;
    const char *params;
    int offline;          /* needs struct kv_future (an offline bound, not a real policy) */
    int scheduled;        /* runs struct alisa_sched: a shell that knows the workload gives
                             it the schedule ALISA's search chose (alisa_search.h) */
    int visits;           /* serves off-GPU tokens for one step only (KV_VISIT): a shell
                             needs a staging area of one step's attended tokens beside the
                             GPU tier */
    int host_tier;        /* may keep tokens in the CPU tier: a shell sizes a host arena
                             (0: everything stays on the GPU or the run fails, gpu-only) */
    int whole_units;      /* 1: a GPU victim takes the unpinned rest of its unit
                             (place_params.unit_tokens) off the GPU with it: InfLLM's
                             cache offloads whole memory blocks */
    int write_through;    /* 1: every token produced is copied to the CPU tier at once (an
                             offload of the new token in the step that makes it, where the
                             tier has free room), so a later eviction moves nothing:
                             HiSparse's eager write-back; its copies take host room another
                             cache would not, so it can run out of host memory first */

    /* Policy state for one stream; fut is non-NULL iff offline. */
    int (*create)(void **state, const struct place_params *p, uint32_t max_len,
                  const struct kv_future *fut, struct alisa_err *e);
    void (*destroy)(void *state); /* accepts NULL */

    /* A GPU token (KV_GPU, not KV_PIN) to evict at step `now`, or UINT32_MAX
     * when the policy evicts nothing (gpu-only: out of memory). */
    uint32_t (*victim_gpu)(void *state, const struct kv_stream *s, uint32_t now);
    /* A CPU token (KV_CPU, not KV_PIN) to delete to make CPU room, or
     * UINT32_MAX. */
    uint32_t (*victim_cpu)(void *state, const struct kv_stream *s, uint32_t now);
    /* The token was attended (or produced) at step now. May be NULL. */
    void (*touch)(void *state, uint32_t token, uint32_t now);
    /* The token, not on the GPU, is about to enter it at step now (attended
     * from the CPU or dropped, or produced), before the engine makes room
     * for it: a policy that adapts on its misses (arc) learns which token
     * the next victim makes room for. May be NULL. */
    void (*miss)(void *state, const struct kv_stream *s, uint32_t token, uint32_t now);
    /* The weights w (n, summing to 1) the step at now gave the attended ids
     * (ascending): what a policy that ranks by attention (block-score)
     * learns from. May be NULL. */
    void (*observe)(void *state, const uint32_t *ids, const float *w, uint32_t n, uint32_t now);
    /* The token entered the GPU tier at step now. May be NULL. */
    void (*admit)(void *state, uint32_t token, uint32_t now);
    /* 1 to recompute an attended CPU token instead of loading it. May be NULL
     * (= always load). */
    int (*prefer_recompute)(void *state, uint32_t token, uint32_t now);
    /* 1 to offload an evicted GPU token that has no CPU copy, 0 to drop it.
     * May be NULL (= always offload when the CPU tier exists). */
    int (*keep_copy)(void *state, uint32_t token, uint32_t now);

    /* A whole-step rule replacing the engine (flexgen-static); NULL for
     * cache-like policies. It retires `retired`, serves attended (n_att,
     * ascending, pos among them) and produces token pos. Called with n_att 0
     * for a prefill token. */
    /* Divides a run's streams by whole sequences, as the policy's own code
     * does (flexgen-static: FlexGen's split, place_flexgen_split): the
     * device takes `share` of the run's KV (< 0: the policy's own share of
     * one stream's base, place_flexgen_share; a shell that knows the run's
     * total passes the total's exact share, which a per-stream budget
     * rounded down can miss by a sequence). Fills out (n_seqs x n_layers,
     * stream seq x n_layers + layer) and returns the sequences placed
     * wholly on the GPU. NULL: every stream alike (a shell asks, never
     * names the policy). */
    uint32_t (*split_sequences)(const struct place_params *base, uint32_t n_seqs,
                                uint32_t n_layers, uint32_t max_len, double share,
                                struct place_params *out);

    void (*step)(void *state, struct kv_stream *s, const struct place_params *p,
                 const uint32_t *attended, uint32_t n_att, const uint32_t *retired,
                 uint32_t n_retired, uint32_t pos, struct place_result *out);
};

/* Every placement policy, NULL-terminated, in `alisa policy list` order. */
extern const struct placement_ops *const placement_policies[];

/* Policy by name, or NULL. Cannot fail. */
const struct placement_ops *placement_find(const char *name);

/* 1 when pl is an online cache: a host tier, victims chosen by the engine
 * (no step rule of its own), no future, no schedule; what the offline
 * bounds (belady, oracle-cost) are compared with. Cannot fail. */
int placement_online_cache(const struct placement_ops *pl);

extern const struct placement_ops place_gpu_only_ops, place_alisa_ops, place_alisa_cache_ops,
    place_lru_ops, place_fifo_ops, place_lfu_ops, place_lfu_aged_ops, place_slru_ops,
    place_arc_ops, place_cost_aware_ops, place_hot_buffer_ops, place_block_lru_ops,
    place_block_score_ops, place_flexgen_ops, place_belady_ops, place_oracle_cost_ops;

/* ---- FlexGen's split as its code makes it (place_flexgen.c) ---- */

/* FlexGen cuts its cache along the batch x heads dimension at
 * int(B x heads x share) rounded down to whole heads
 * (flexgen/pytorch_backend.py, TorchMixedDevice.init_cache_one_gpu_batch),
 * so the first floor(n_seqs x share) sequences' KV lies wholly on the GPU
 * and the others' wholly on the CPU. Fills pp (n_seqs x n_layers, stream
 * seq x n_layers + layer) from base: gpu_fraction 1 and room for max_len
 * tokens on the GPU tier, or 0 and that room on the CPU tier. Returns the
 * sequences on the GPU. Cannot fail. */
uint32_t place_flexgen_split(const struct place_params *base, uint32_t n_seqs, uint32_t n_layers,
                             uint32_t max_len, double share, struct place_params *pp);

/* The share of every token a flexgen-static stream of max_len tokens keeps
 * on the GPU under p: p->gpu_fraction, or when that is < 0 the largest its
 * GPU tier holds; at most 1. Cannot fail. */
double place_flexgen_share(const struct place_params *p, uint32_t max_len);

/* ---- the paper's rule in whole tokens (place_alisa.c), shared with the search ---- */

/* At position pos, with the local window starting at local_start: how many
 * of the stream's oldest positions the schedule has off the GPU (n_off =
 * min(ceil(alpha (pos + 1)), local_start) from p1 on, else 0) and how many
 * of those are deleted (n_del = ceil(beta n_off) from p2 on, else 0).
 * Cannot fail. */
void place_alisa_counts(const struct alisa_sched *sc, uint32_t pos, uint32_t local_start,
                        uint32_t *n_off, uint32_t *n_del);

/* The greedy schedule of one stream (ALISA.md 3: every tier as full as it
 * can be, as long as it can be), for max_len positions and p's capacities:
 * p1 = the first position the GPU tier cannot hold, alpha = the smallest
 * share that lets it hold the last; p2 and beta likewise for the CPU tier,
 * counting a deleted token's layer input (input_bytes). beta is 1 (and the
 * run will not fit) when deleting frees nothing (input_bytes >= kv_bytes).
 * Cannot fail. */
void place_alisa_greedy(const struct place_params *p, uint32_t max_len, struct alisa_sched *out);

/* ---- the engine (placement.c) ---- */

/* Allocates s->flags for max_len tokens and sets the capacities from p.
 * On failure e says why. */
int kv_stream_init(struct kv_stream *s, const struct place_params *p, uint32_t max_len,
                   struct alisa_err *e);
void kv_stream_deinit(struct kv_stream *s); /* accepts a zeroed or half-built stream */

/* Produces token pos (prefill or decode): it is computed on the GPU, so it
 * enters the GPU tier, evicting as the policy says. out accumulates. */
void place_admit(const struct placement_ops *ops, void *state, struct kv_stream *s,
                 const struct place_params *p, uint32_t pos, struct place_result *out);

/* One decode step: retires `retired`, makes every attended token
 * GPU-resident (load or recompute), then admits pos. local_start is the
 * first token of the selection's recent window. out accumulates. */
void place_step(const struct placement_ops *ops, void *state, struct kv_stream *s,
                const struct place_params *p, const uint32_t *attended, uint32_t n_att,
                const uint32_t *retired, uint32_t n_retired, uint32_t local_start, uint32_t pos,
                struct place_result *out);

/* s->cpu_bytes from its KV and kept inputs. Cannot fail. */
void kv_stream_cpu_bytes(struct kv_stream *s, const struct place_params *p);

/* Token t's layer input is kept in the CPU tier from now on (KV_INPUT; no
 * effect when it already is). Cannot fail. */
void kv_stream_keep_input(struct kv_stream *s, const struct place_params *p, uint32_t t);

/* The place of token t. Cannot fail. */
enum kv_place kv_place_of(const struct kv_stream *s, uint32_t t);

/* Tokens of a stream by place (struct kv_stream_check's census). */
struct kv_census {
    uint32_t gpu;      /* whole copy on the GPU (possibly also on the CPU) */
    uint32_t cpu;      /* on the CPU only */
    uint32_t dropped;  /* no KV anywhere; recomputable */
    uint32_t gone;     /* retired */
    uint32_t split;    /* flexgen-static shares */
};

/* Checks the stream's invariants after a step at pos: every produced token
 * in exactly one place, counts and bytes match the flags, capacities held,
 * every attended token on the GPU (or visiting it); fills *census (may be NULL). Returns 0,
 * or ALISA_EINVAL with the first violation in e. */
int kv_stream_check(const struct kv_stream *s, const struct place_params *p, uint32_t pos,
                    const uint32_t *attended, uint32_t n_att, struct kv_census *census,
                    struct alisa_err *e);

#endif
