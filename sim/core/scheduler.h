/* The scheduler core: one selection policy and one placement policy per
 * (sequence, layer) stream, driven step by step by a shell (the simulator
 * with a trace, the executor with a real model). Never reads a clock, sleeps,
 * does I/O or exits: every entry point takes the stream and its position,
 * the only clock its policies use (LRU's recency, Belady's next use are in
 * steps), and returns a plan.
 *
 * Per stream and step the order is: scheduler_step (select, then place: the plan
 * says which tokens to attend, load, recompute, offload, drop), the shell
 * computes attention, then scheduler_observe* feeds the weights back. Invariants
 * (one place per token, capacities, attended tokens on the GPU) are checked
 * after every step; a violation is an internal error (ALISA_ASSERT).
 */
#ifndef ALISA_SCHEDULER_H
#define ALISA_SCHEDULER_H

#include <stdint.h>

#include "err.h"
#include "placement.h"
#include "selection.h"

struct scheduler_config {
    const struct selection_ops *sel;
    struct sel_params sel_params;
    const struct placement_ops *place;
    struct place_params place_params; /* per stream: capacities are one stream's share */
    const struct place_params *stream_params; /* (n_streams) each stream's own instead, or
                                                 NULL (copied at creation): FlexGen's split
                                                 by whole sequences in the executor */
    uint32_t n_streams;               /* sequences x layers */
    uint32_t layers;                  /* layers a sequence has, its streams numbered
                                         sequence * layers + layer (every shell's rule), so
                                         a selection's dense leading layers
                                         (selection_ops.dense_layers) run the dense
                                         selection; 0: streams not numbered by layer */
    uint32_t heads;                   /* with layers, streams a layer has: a shell that runs
                                         one stream per (sequence, layer, KV head) numbers
                                         them (sequence * layers + layer) * heads + head;
                                         0 or 1: one stream a layer */
    uint32_t max_len;                 /* tokens per sequence, at most */
    int keys;                         /* 1: the shell holds every key and query (the
                                         executor) and computes a selection's estimate of
                                         its present row (scheduler_present_estimate);
                                         0: it has a trace's rows only, and a selection
                                         run as its real estimate is refused */
};

/* What one call decided for one stream; arrays are owned by the scheduler
 * and valid until the next call on any stream. */
struct scheduler_plan {
    uint32_t stream;          /* stream id */
    uint32_t pos;             /* query position (decode) or produced token (prefill) */
    int prefill;              /* 1: prompt token produced, nothing attended by the plan */
    const uint32_t *attended; /* (n_attended) ascending, pos included */
    uint32_t n_attended;
    uint32_t local_tokens;    /* the selection's recent window */
    const uint32_t *retired;  /* (n_retired) freed for good */
    uint32_t n_retired;
    struct place_result place; /* moves, bytes, misses, oom */
    struct kv_census census;  /* tokens by place after the step */
    uint64_t gpu_bytes;       /* stream's tier bytes after the step */
    uint64_t cpu_bytes;
};

struct scheduler;

/* Creates the scheduler. futures: (n_streams) future access sequences,
 * required iff cfg->place->offline, else NULL; they must outlive the
 * scheduler. On failure *out is NULL and e says why. */
int scheduler_create(struct scheduler **out, const struct scheduler_config *cfg,
                 const struct kv_future *futures, struct alisa_err *e);

/* Frees s. Accepts NULL. */
void scheduler_destroy(struct scheduler *s);

/* Prefill: produces prompt tokens up to and including pos on the GPU
 * (evicting as the placement says) and, when row is non-NULL, feeds the
 * dense attention row of pos (pos + 1 weights) to the selection. Returns 0;
 * an out-of-memory shows as plan->place.oom. */
int scheduler_prefill(struct scheduler *s, uint32_t stream, uint32_t pos, const float *row,
                  uint32_t prompt_len, struct scheduler_plan *plan);

/* Decode step of the query at pos (tokens before pos must be produced):
 * selects, retires, places. present: the query's attention row over tokens
 * 0..pos (pos + 1 weights), required (non-NULL) when the stream's selection
 * needs it (scheduler_stream_needs_present), else ignored. Once a stream ran
 * out of memory every later call returns oom again and changes nothing.
 * Returns 0, or ALISA_ENOMEM (plan not made) when the selection's own state
 * is incomplete because an allocation in its observe failed: the shell
 * stops with an error. */
int scheduler_step(struct scheduler *s, uint32_t stream, uint32_t pos, const float *present,
                   struct scheduler_plan *plan);

/* Starts stream over for a new sequence (a serving shell's slot taken by
 * the next request): its selection, placement and token places made anew,
 * as scheduler_create made them, nothing produced. Refused for an offline
 * placement (its future is one sequence's). On failure the stream is left
 * out of memory (every later step says so) and e says why. */
int scheduler_stream_reset(struct scheduler *s, uint32_t stream, struct alisa_err *e);

/* 1 when the run's selection reads the current step's row (its ops'
 * needs_present): the shell computes or reads that row before each
 * scheduler_step and prices the step's loads after it. Cannot fail. */
int scheduler_needs_present(const struct scheduler *s);

/* 1 when this stream's selection reads the current step's row: the run's
 * selection on a stream it selects in, 0 on a stream its dense leading
 * layers attend whole (selection_ops.dense_layers), whose step the shell
 * need not compute a row for. Cannot fail. */
int scheduler_stream_needs_present(const struct scheduler *s, uint32_t stream);

/* What that row is (sel_estimate_of): the exact row, or the estimate the
 * selection's real form computes from keys, which the shell then computes
 * in its place. Cannot fail. */
void scheduler_present_estimate(const struct scheduler *s, struct sel_estimate *out);

/* Feeds back the weights of the last scheduler_step of this stream: w holds the
 * weights of the attended tokens, in plan order, summing to 1. */
void scheduler_observe(struct scheduler *s, uint32_t stream, const float *w);

/* The same from a dense row (pos + 1 weights, e.g. a trace row): restricted
 * to the attended tokens and renormalised, which is exactly the softmax over
 * the attended set when the logits are the same. */
void scheduler_observe_dense(struct scheduler *s, uint32_t stream, const float *row);

/* Feeds the dense attention row of prompt position pos to the selection
 * (what scheduler_prefill does when given a row), for shells that admit a
 * token before computing its attention. */
void scheduler_observe_prefill(struct scheduler *s, uint32_t stream, uint32_t pos, const float *row,
                               uint32_t prompt_len);

/* The token places of a stream after its last call (KV_* flags, (max_len)),
 * and its tier capacities in tokens: what an executor mirrors. Cannot fail. */
const uint8_t *scheduler_stream_flags(const struct scheduler *s, uint32_t stream);
uint32_t scheduler_stream_gpu_cap(const struct scheduler *s, uint32_t stream);
uint32_t scheduler_stream_cpu_cap(const struct scheduler *s, uint32_t stream);

/* Device KV slots a shell needs for a stream: its GPU tier, plus, under a
 * placement that serves off-GPU tokens for one step only (placement_ops
 * visits: alisa), room for one step's attended tokens, at most the
 * selection's budget at the longest context (the gather buffer the paper's
 * kernels fill). Cannot fail. */
uint32_t scheduler_stream_dev_slots(const struct scheduler *s, uint32_t stream);

/* Host KV slots likewise: the CPU tier, plus under such a placement room
 * for the tokens a step loads and then deletes (the copy is read before it
 * is freed), at most the selection's budget. Cannot fail. */
uint32_t scheduler_stream_host_slots(const struct scheduler *s, uint32_t stream);

/* 1 once the stream ran out of GPU memory. Cannot fail. */
int scheduler_stream_oom(const struct scheduler *s, uint32_t stream);

#endif
