/* Continuous batching (issue 46): which requests each iteration runs and how
 * many of their tokens, by vLLM V1's rules (vllm/v1/core/sched/scheduler.py,
 * Scheduler.schedule). Part of the scheduler core, shared by the serving
 * simulator and an executor that serves: no clock, no I/O; the shell says
 * when a request arrives and when an iteration has run, and answers, through
 * struct batcher_memory, whether a request's KV can grow.
 *
 * A request of prompt P and output O has positions 0 .. P + O - 2: the
 * prompt, then one decode step per output token after the first (the
 * prefill produces the first). It knows P + generated tokens and has
 * computed the KV of some of them; an iteration that computes its last
 * known token produces its next one.
 *
 * Each iteration has a budget of max_batched_tokens token rows. Running
 * requests come first, in order: each asks for its tokens not yet computed
 * (1 when decoding, the rest of its prompt while prefilling), capped by the
 * budget left; when its KV cannot grow to them, the last running request is
 * preempted (running.pop() under FCFS), again until it fits or the request
 * itself was the one preempted, which ends the running pass. A preempted
 * request loses its KV and its computed tokens (_preempt_request) and goes
 * to the head of the waiting queue; it then runs its prompt and the tokens
 * it had generated as one prompt. Waiting requests are admitted, in order,
 * only when nothing was preempted this iteration, while fewer than
 * max_num_seqs run and budget is left: a prompt longer than the budget left
 * is cut to it, or without chunked prefill waits; a request whose KV does
 * not fit stops the admissions.
 */
#ifndef ALISA_BATCHER_H
#define ALISA_BATCHER_H

#include <stdint.h>

#include "err.h"

struct batcher_config {
    uint32_t max_num_seqs;       /* running requests at most, >= 1 */
    uint32_t max_batched_tokens; /* token rows per iteration, >= 1 */
    int no_chunked_prefill;      /* 1: a prompt runs whole in one iteration */
};

/* What an iteration runs of one request: positions first .. first + n - 1. */
struct batcher_item {
    uint32_t id, first, n;
    int samples;     /* the iteration computes its last known token: it produces one */
    /* set by batcher_done: */
    int first_token; /* that token was its first */
    int finished;    /* that token was its last: the request is done, its KV released */
};

/* The shell's KV memory, asked by request and last position. */
struct batcher_memory {
    void *user;
    /* 1 when request id's KV can grow to hold positions 0 .. last, 0 when
     * it cannot; a negative status stops the plan (batcher_plan returns it) */
    int (*fits)(void *user, uint32_t id, uint32_t last);
    void (*take)(void *user, uint32_t id, uint32_t last); /* it grows to them */
    void (*release)(void *user, uint32_t id);             /* its KV is freed */
};

struct batcher;

/* A batcher for n requests of the given prompt and output lengths (each
 * >= 1; copied). ALISA_EINVAL names a bad value, ALISA_ENOMEM. */
int batcher_create(struct batcher **out, const struct batcher_config *c, uint32_t n,
                   const uint32_t *prompt_len, const uint32_t *output_len, struct alisa_err *e);

void batcher_destroy(struct batcher *b); /* accepts NULL */

/* Request id has arrived: to the back of the waiting queue. Each request
 * arrives once. Cannot fail. */
void batcher_arrive(struct batcher *b, uint32_t id);

/* The next iteration into items (room for max_num_seqs), their count in
 * *n_items. *preempted counts this iteration's preemptions; 0 items with
 * preemptions: plan again. *stuck, when nothing runs and the waiting
 * head cannot fit alone: that request's id, else UINT32_MAX (it can never
 * run: the shell reports it). Returns 0 or the memory's negative status. */
int batcher_plan(struct batcher *b, const struct batcher_memory *mem, struct batcher_item *items,
                 uint32_t *n_items, uint32_t *preempted, uint32_t *stuck);

/* The iteration planned in items has run: each request's tokens are
 * computed, those that sample produce one (first_token, finished set),
 * finished ones leave and their KV is released. Cannot fail. */
void batcher_done(struct batcher *b, const struct batcher_memory *mem, struct batcher_item *items,
                  uint32_t n_items);

uint32_t batcher_running(const struct batcher *b); /* cannot fail */
uint32_t batcher_waiting(const struct batcher *b);
uint32_t batcher_generated(const struct batcher *b, uint32_t id); /* output tokens so far */
uint32_t batcher_preemptions(const struct batcher *b, uint32_t id);
uint64_t batcher_lost_tokens(const struct batcher *b); /* computed tokens preemption threw away */

#endif
