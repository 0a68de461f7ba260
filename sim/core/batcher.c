/* Continuous batching (contract in batcher.h): the running list and the
 * waiting queue as ring buffers of request ids, each request's computed and
 * generated tokens, and vLLM V1's planning pass over them.
 */
#include "batcher.h"

#include <stdlib.h>
#include <string.h>

enum { RQ_FUTURE, RQ_WAITING, RQ_RUNNING, RQ_DONE };

struct breq {
    uint32_t prompt, output;
    uint32_t computed, generated, preemptions;
    uint8_t state;
};

/* a ring buffer of ids */
struct ring {
    uint32_t *id;
    uint32_t head, n, cap;
};

struct batcher {
    struct batcher_config c;
    uint32_t n;
    struct breq *r;
    struct ring run, wait;
    uint64_t lost;
};

static uint32_t at(const struct ring *q, uint32_t k) { return q->id[(q->head + k) % q->cap]; }
static void push_back(struct ring *q, uint32_t id) { q->id[(q->head + q->n++) % q->cap] = id; }
static void push_front(struct ring *q, uint32_t id)
{
    q->head = (q->head + q->cap - 1) % q->cap;
    q->id[q->head] = id;
    q->n++;
}
static uint32_t pop_front(struct ring *q)
{
    uint32_t id = q->id[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return id;
}
static uint32_t pop_back(struct ring *q) { return q->id[(q->head + --q->n) % q->cap]; }

void batcher_destroy(struct batcher *b)
{
    if (!b)
        return;
    free(b->r);
    free(b->run.id);
    free(b->wait.id);
    free(b);
}

int batcher_create(struct batcher **out, const struct batcher_config *c, uint32_t n,
                   const uint32_t *prompt_len, const uint32_t *output_len, struct alisa_err *e)
{
    *out = NULL;
    if (c->max_num_seqs == 0 || c->max_batched_tokens == 0)
        return err_set(e, ALISA_EINVAL, "batcher: max_num_seqs %u and max_batched_tokens %u must "
                       "be at least 1", c->max_num_seqs, c->max_batched_tokens);
    for (uint32_t i = 0; i < n; i++)
        if (prompt_len[i] == 0 || output_len[i] == 0)
            return err_set(e, ALISA_EINVAL, "batcher: request %u has a prompt of %u and an output "
                           "of %u tokens (at least 1 each)", i, prompt_len[i], output_len[i]);
    struct batcher *b = calloc(1, sizeof *b);
    if (b) {
        b->c = *c;
        b->n = n;
        b->r = calloc(n ? n : 1, sizeof *b->r);
        b->run.cap = b->wait.cap = n + 1;
        b->run.id = malloc((size_t)(n + 1) * sizeof *b->run.id);
        b->wait.id = malloc((size_t)(n + 1) * sizeof *b->wait.id);
    }
    if (!b || !b->r || !b->run.id || !b->wait.id) {
        batcher_destroy(b);
        return err_set(e, ALISA_ENOMEM, "out of memory for %u requests", n);
    }
    for (uint32_t i = 0; i < n; i++)
        b->r[i] = (struct breq){.prompt = prompt_len[i], .output = output_len[i]};
    *out = b;
    return 0;
}

void batcher_arrive(struct batcher *b, uint32_t id)
{
    ALISA_ASSERT(id < b->n && b->r[id].state == RQ_FUTURE);
    b->r[id].state = RQ_WAITING;
    push_back(&b->wait, id);
}

/* The last running request loses its KV and goes to the head of the
 * waiting queue (vLLM V1's _preempt_request). */
static uint32_t preempt_last(struct batcher *b, const struct batcher_memory *mem)
{
    uint32_t v = pop_back(&b->run);
    struct breq *p = &b->r[v];
    mem->release(mem->user, v);
    b->lost += p->computed;
    p->computed = 0;
    p->preemptions++;
    p->state = RQ_WAITING;
    push_front(&b->wait, v);
    return v;
}

int batcher_plan(struct batcher *b, const struct batcher_memory *mem, struct batcher_item *items,
                 uint32_t *n_items, uint32_t *preempted, uint32_t *stuck)
{
    uint32_t budget = b->c.max_batched_tokens, n = 0;
    *preempted = 0;
    *stuck = UINT32_MAX;
    /* running requests first, in order */
    for (uint32_t k = 0; k < b->run.n && budget > 0;) {
        uint32_t id = at(&b->run, k);
        struct breq *q = &b->r[id];
        uint32_t want = q->prompt + q->generated - q->computed;
        uint32_t take = want < budget ? want : budget, last = q->computed + take - 1;
        int fit, self = 0;
        while ((fit = mem->fits(mem->user, id, last)) == 0) {
            self = preempt_last(b, mem) == id;
            ++*preempted;
            if (self)
                break;
        }
        if (fit < 0)
            return fit;
        if (self)
            break;
        mem->take(mem->user, id, last);
        items[n++] = (struct batcher_item){id, q->computed, take, take == want, 0, 0};
        budget -= take;
        k++;
    }
    /* then waiting requests, when nothing was preempted */
    while (!*preempted && b->wait.n && b->run.n < b->c.max_num_seqs && budget > 0) {
        uint32_t id = at(&b->wait, 0);
        struct breq *q = &b->r[id];
        uint32_t want = q->prompt + q->generated - q->computed;
        if (want > budget && b->c.no_chunked_prefill)
            break;
        uint32_t take = want < budget ? want : budget, last = q->computed + take - 1;
        int fit = mem->fits(mem->user, id, last);
        if (fit < 0)
            return fit;
        if (!fit) {
            if (b->run.n == 0)
                *stuck = id;
            break;
        }
        pop_front(&b->wait);
        push_back(&b->run, id);
        q->state = RQ_RUNNING;
        mem->take(mem->user, id, last);
        items[n++] = (struct batcher_item){id, q->computed, take, take == want, 0, 0};
        budget -= take;
    }
    *n_items = n;
    return 0;
}

void batcher_done(struct batcher *b, const struct batcher_memory *mem, struct batcher_item *items,
                  uint32_t n_items)
{
    for (uint32_t k = 0; k < n_items; k++) {
        struct batcher_item *it = &items[k];
        struct breq *q = &b->r[it->id];
        q->computed += it->n;
        it->first_token = it->finished = 0;
        if (!it->samples)
            continue;
        it->first_token = ++q->generated == 1;
        if (q->generated == q->output) {
            it->finished = 1;
            q->state = RQ_DONE;
            mem->release(mem->user, it->id);
        }
    }
    /* finished requests leave the running list; the rest keep their order */
    uint32_t keep = 0, total = b->run.n;
    for (uint32_t k = 0; k < total; k++) {
        uint32_t id = at(&b->run, k);
        if (b->r[id].state != RQ_DONE)
            b->run.id[(b->run.head + keep++) % b->run.cap] = id;
    }
    b->run.n = keep;
}

uint32_t batcher_running(const struct batcher *b) { return b->run.n; }
uint32_t batcher_waiting(const struct batcher *b) { return b->wait.n; }
uint32_t batcher_generated(const struct batcher *b, uint32_t id) { return b->r[id].generated; }
uint32_t batcher_preemptions(const struct batcher *b, uint32_t id) { return b->r[id].preemptions; }
uint64_t batcher_lost_tokens(const struct batcher *b) { return b->lost; }
