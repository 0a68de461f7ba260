/* Event queue (contract in evq.h): a binary min-heap of struct evq_event
 * keyed by (time_ns, seq), and a bitmap of cancelled insertion numbers.
 *
 * Invariant: heap[i] is never later than its children; every live event is
 * in the heap exactly once; `live` counts heap entries not cancelled.
 */
#include "evq.h"

#include <stdlib.h>
#include <string.h>

struct evq {
    struct evq_event *heap; /* (cap) */
    size_t n, cap;
    uint64_t next_seq;      /* insertion number of the next push */
    uint64_t now;           /* time of the last pop */
    uint8_t *cancelled;     /* (cancel_cap) bitmap over insertion numbers */
    size_t cancel_cap;      /* bytes */
    size_t live;
};

int evq_create(struct evq **out, struct alisa_err *e)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : err_set(e, ALISA_ENOMEM, "out of memory for the event queue");
}

void evq_destroy(struct evq *q)
{
    if (!q)
        return;
    free(q->heap);
    free(q->cancelled);
    free(q);
}

static int earlier(const struct evq_event *a, const struct evq_event *b)
{
    return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->seq < b->seq);
}

static int is_cancelled(const struct evq *q, uint64_t seq)
{
    return seq / 8 < q->cancel_cap && (q->cancelled[seq / 8] >> (seq % 8) & 1);
}

int evq_push(struct evq *q, uint64_t time_ns, uint32_t kind, uint32_t id, uint64_t *handle,
             struct alisa_err *e)
{
    if (time_ns < q->now)
        return err_set(e, ALISA_EINVAL, "event (kind %u, id %u) scheduled at %llu ns, before now "
                       "(%llu ns)", kind, id, (unsigned long long)time_ns,
                       (unsigned long long)q->now);
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        struct evq_event *h = realloc(q->heap, cap * sizeof *h);
        if (!h)
            return err_set(e, ALISA_ENOMEM, "out of memory growing the event queue to %zu", cap);
        q->heap = h;
        q->cap = cap;
    }
    struct evq_event ev = {time_ns, q->next_seq++, kind, id};
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(&ev, &q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = ev;
    q->live++;
    if (handle)
        *handle = ev.seq;
    return 0;
}

static void pop_top(struct evq *q)
{
    struct evq_event last = q->heap[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct evq_event *best = &last;
        if (l < q->n && earlier(&q->heap[l], best)) {
            m = l;
            best = &q->heap[l];
        }
        if (r < q->n && earlier(&q->heap[r], best))
            m = r;
        if (m == i)
            break;
        q->heap[i] = q->heap[m];
        i = m;
    }
    if (q->n)
        q->heap[i] = last;
}

int evq_pop(struct evq *q, struct evq_event *out)
{
    while (q->n) {
        struct evq_event top = q->heap[0];
        pop_top(q);
        if (is_cancelled(q, top.seq))
            continue;
        q->live--;
        ALISA_ASSERT(top.time_ns >= q->now);
        q->now = top.time_ns;
        *out = top;
        return 1;
    }
    return 0;
}

int evq_cancel(struct evq *q, uint64_t handle, struct alisa_err *e)
{
    if (handle >= q->next_seq || is_cancelled(q, handle))
        return 0;
    /* Only a pending event counts: look for it (cancellation is rare). */
    size_t i;
    for (i = 0; i < q->n && q->heap[i].seq != handle; i++)
        ;
    if (i == q->n)
        return 0;
    if (handle / 8 >= q->cancel_cap) {
        size_t cap = q->cancel_cap ? q->cancel_cap : 64;
        while (cap <= handle / 8)
            cap *= 2;
        uint8_t *c = realloc(q->cancelled, cap);
        if (!c)
            return err_set(e, ALISA_ENOMEM, "out of memory for cancellations");
        memset(c + q->cancel_cap, 0, cap - q->cancel_cap);
        q->cancelled = c;
        q->cancel_cap = cap;
    }
    q->cancelled[handle / 8] |= (uint8_t)(1u << (handle % 8));
    q->live--;
    return 0;
}

uint64_t evq_now(const struct evq *q) { return q->now; }

size_t evq_size(const struct evq *q) { return q->live; }
