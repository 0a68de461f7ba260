/* The simulator's event queue: an array binary heap ordered by (time in
 * integer ns, insertion number), so equal times pop in insertion order and a
 * run is deterministic (ns-3's rule).
 *
 * Events carry ids, never pointers. Nothing may be scheduled before the
 * current time (the time of the last popped event). Cancellation is lazy:
 * a cancelled event stays in the heap and is skipped when it surfaces.
 */
#ifndef ALISA_EVQ_H
#define ALISA_EVQ_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct evq_event {
    uint64_t time_ns; /* when it happens */
    uint64_t seq;     /* insertion number: the handle, unique per queue */
    uint32_t kind;    /* caller's event type */
    uint32_t id;      /* caller's object id */
};

struct evq;

/* Creates an empty queue at time 0. */
int evq_create(struct evq **out, struct alisa_err *e);

/* Frees q. Accepts NULL. */
void evq_destroy(struct evq *q);

/* Schedules an event; *handle (may be NULL) gets its insertion number for
 * evq_cancel. Returns ALISA_EINVAL when time_ns is before evq_now(),
 * ALISA_ENOMEM when the heap cannot grow. */
int evq_push(struct evq *q, uint64_t time_ns, uint32_t kind, uint32_t id, uint64_t *handle,
             struct alisa_err *e);

/* Pops the earliest live event into *out and advances the clock to it.
 * Returns 1, or 0 when no live event is left. Cannot fail. */
int evq_pop(struct evq *q, struct evq_event *out);

/* Cancels a pending event by handle; cancelling an unknown, popped or
 * already-cancelled handle does nothing. Returns ALISA_ENOMEM only when the
 * cancellation set cannot grow. */
int evq_cancel(struct evq *q, uint64_t handle, struct alisa_err *e);

/* Time of the last popped event (0 before the first). Cannot fail. */
uint64_t evq_now(const struct evq *q);

/* Live (pushed, not popped, not cancelled) events. Cannot fail. */
size_t evq_size(const struct evq *q);

#endif
