/* alisa placement: the paper's three-phase rule (ALISA section V-A and
 * Algorithm 2; ALISA.md 2 and our decisions there), as a whole-step rule.
 *
 * A stream's tokens leave the GPU strictly by age: at position pos the
 * oldest n_off positions are off the GPU and the oldest n_del of those are
 * deleted (place_alisa_counts); neither count ever shrinks. A token leaving
 * the GPU is copied to the CPU, or, when it is deleted at once, not copied
 * at all; a deleted token's KV is freed and its layer input kept on the host
 * (input_bytes of the CPU tier, KV_INPUT). An attended token off the GPU is brought for
 * this step only (KV_VISIT): loaded when on the CPU, recomputed when
 * deleted; it is not kept. The local window never leaves. Order within a
 * step: serve the attended tokens from where they are (the transfers happen
 * before the step's attention), move the oldest tokens to reach the counts
 * for pos + 1 positions (the paper's offload after the step: a token the
 * step attends leaves the tier but stays on the GPU for the step,
 * KV_VISIT), then produce pos on the GPU (ordered so the tier never holds
 * more than its share, even for a moment). A tier that cannot hold its share is out of memory: the
 * schedule does not fit. Retired tokens (a selection that retires) still
 * count as positions; they hold nothing.
 */
#include <math.h>
#include <stdlib.h>

#include "placement.h"

/* ceil, forgiving the last bits of a share computed in floating point */
static uint32_t ceil_tokens(double x)
{
    return x <= 0 ? 0 : (uint32_t)ceil(x - 1e-9);
}

void place_alisa_counts(const struct alisa_sched *sc, uint32_t pos, uint32_t local_start,
                        uint32_t *n_off, uint32_t *n_del)
{
    uint32_t off = 0, del = 0;
    if (sc->p1 != UINT32_MAX && pos >= sc->p1) {
        off = ceil_tokens(sc->alpha * ((double)pos + 1));
        if (off > local_start)
            off = local_start;
        if (sc->p2 != UINT32_MAX && pos >= sc->p2)
            del = ceil_tokens(sc->beta * off);
        if (del > off)
            del = off;
    }
    *n_off = off;
    *n_del = del;
}

void place_alisa_greedy(const struct place_params *p, uint32_t max_len, struct alisa_sched *out)
{
    *out = (struct alisa_sched){0, 0, UINT32_MAX, UINT32_MAX};
    uint64_t g = p->gpu_bytes / p->kv_bytes;
    if (g >= max_len)
        return;
    out->p1 = (uint32_t)g; /* tokens 0..g-1 fit; position g is one too many */
    out->alpha = (double)(max_len - g) / max_len;
    for (uint32_t pos = out->p1; pos < max_len; pos++)
        if ((uint64_t)ceil_tokens(out->alpha * ((double)pos + 1)) * p->kv_bytes > p->cpu_bytes) {
            out->p2 = pos;
            break;
        }
    if (out->p2 == UINT32_MAX)
        return;
    /* at the last position, (off - del) kv + del act <= cpu_bytes */
    uint64_t off = ceil_tokens(out->alpha * max_len);
    if (p->input_bytes >= p->kv_bytes || off == 0) {
        out->beta = 1;
        return;
    }
    uint64_t over = off * p->kv_bytes - p->cpu_bytes, saved = p->kv_bytes - p->input_bytes;
    uint64_t del = (over + saved - 1) / saved;
    out->beta = del >= off ? 1.0 : (double)del / (double)off;
}

struct alisa_state {
    struct alisa_sched sc;
    uint32_t off;     /* positions [0, off) have left the GPU */
    uint32_t del;     /* positions [0, del) are deleted */
    uint32_t *visit;  /* (max_len) the tokens brought in by the last step */
    uint32_t n_visit;
};

static void alisa_destroy(void *state)
{
    struct alisa_state *a = state;
    if (!a)
        return;
    free(a->visit);
    free(a);
}

static int alisa_create(void **state, const struct place_params *p, uint32_t max_len,
                        const struct kv_future *fut, struct alisa_err *e)
{
    (void)fut;
    struct alisa_state *a = calloc(1, sizeof *a);
    *state = a;
    if (!a || !(a->visit = malloc((max_len ? max_len : 1) * sizeof *a->visit))) {
        alisa_destroy(a);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for alisa state (%u tokens)", max_len);
    }
    if (p->scheduled) {
        const struct alisa_sched *s = &p->sched;
        if (!(s->alpha >= 0 && s->alpha <= 1 && s->beta >= 0 && s->beta <= 1) ||
            (s->p2 != UINT32_MAX && (s->p1 == UINT32_MAX || s->p2 < s->p1))) {
            alisa_destroy(a);
            *state = NULL;
            return err_set(e, ALISA_EINVAL, "alisa schedule alpha %g beta %g p1 %u p2 %u: "
                           "shares in [0, 1] and p1 <= p2", s->alpha, s->beta, s->p1, s->p2);
        }
        a->sc = *s;
    } else {
        place_alisa_greedy(p, max_len, &a->sc);
    }
    return 0;
}


/* Moves the oldest positions until n_off are off the GPU and n_del deleted.
 * Returns -1 when the CPU tier cannot hold what it must. */
static int alisa_move(struct alisa_state *a, struct kv_stream *s, const struct place_params *p,
                      uint32_t n_off, uint32_t n_del, struct place_result *out)
{
    if (n_off < a->off)
        n_off = a->off;
    if (n_del < a->del)
        n_del = a->del;
    if (n_del > n_off)
        n_del = n_off;
    /* phase III first: CPU tokens deleted (their room may be what the
     * offloads below need) */
    for (uint32_t t = a->del; t < n_del && t < a->off; t++) {
        if (!(s->flags[t] & KV_CPU))
            continue; /* retired */
        s->flags[t] &= (uint8_t)~KV_CPU;
        s->cpu_tokens--;
        kv_stream_keep_input(s, p, t);
        out->drop[out->n_drop++] = t;
    }
    for (uint32_t t = a->off; t < n_off; t++) {
        if (!(s->flags[t] & KV_GPU))
            continue; /* retired */
        s->flags[t] &= (uint8_t)~KV_GPU;
        s->gpu_tokens--;
        if (s->flags[t] & KV_PIN) { /* attended now: on the GPU for this step still */
            s->flags[t] |= KV_VISIT;
            a->visit[a->n_visit++] = t;
        }
        if (t < n_del) { /* deleted as it leaves: no copy */
            kv_stream_keep_input(s, p, t);
            out->drop[out->n_drop++] = t;
        } else {
            s->flags[t] |= KV_CPU;
            s->cpu_tokens++;
            out->bytes_d2h += p->kv_bytes;
            out->offload[out->n_offload++] = t;
        }
    }
    a->off = n_off;
    a->del = n_del;
    s->gpu_bytes = (uint64_t)s->gpu_tokens * p->kv_bytes;
    kv_stream_cpu_bytes(s, p);
    return s->cpu_bytes <= p->cpu_bytes ? 0 : -1;
}

static void alisa_step(void *state, struct kv_stream *s, const struct place_params *p,
                       const uint32_t *attended, uint32_t n_att, const uint32_t *retired,
                       uint32_t n_retired, uint32_t pos, struct place_result *out)
{
    struct alisa_state *a = state;
    for (uint32_t i = 0; i < a->n_visit; i++)
        s->flags[a->visit[i]] &= (uint8_t)~KV_VISIT;
    a->n_visit = 0;
    s->visits = 0;
    for (uint32_t i = 0; i < n_retired; i++) {
        uint32_t t = retired[i];
        uint8_t f = s->flags[t];
        ALISA_ASSERT(t < pos && (f & KV_EXISTS) && !(f & KV_GONE));
        if (f & KV_GPU)
            s->gpu_tokens--;
        else if (f & KV_CPU)
            s->cpu_tokens--;
        if (f & KV_INPUT)
            s->inputs--; /* deleted: its kept input goes too */
        s->flags[t] = KV_EXISTS | KV_GONE;
    }
    s->gpu_bytes = (uint64_t)s->gpu_tokens * p->kv_bytes;
    kv_stream_cpu_bytes(s, p);
    for (uint32_t i = 0; i < n_att; i++) {
        uint32_t t = attended[i];
        uint8_t f = s->flags[t];
        if (t == pos)
            continue;
        if (f & KV_GPU) {
            s->flags[t] |= KV_PIN; /* for alisa_move: attended from the tier */
            continue;
        }
        ALISA_ASSERT((f & KV_EXISTS) && !(f & KV_GONE));
        out->gpu_misses++;
        if (f & KV_CPU) {
            out->bytes_h2d += p->kv_bytes;
            out->load[out->n_load++] = t;
        } else {
            out->bytes_h2d += p->act_bytes;
            out->recompute[out->n_recompute++] = t;
        }
        s->flags[t] |= KV_VISIT;
        a->visit[a->n_visit++] = t;
    }
    uint32_t n_off, n_del;
    place_alisa_counts(&a->sc, pos, s->local_start, &n_off, &n_del);
    int moved = alisa_move(a, s, p, n_off, n_del, out);
    for (uint32_t i = 0; i < n_att; i++)
        s->flags[attended[i]] &= (uint8_t)~KV_PIN;
    s->visits = a->n_visit;
    if (moved < 0) {
        out->oom = out->oom_cpu = 1;
        return;
    }
    if (s->gpu_tokens >= s->gpu_cap) {
        out->oom = 1;
        return;
    }
    s->flags[pos] |= KV_EXISTS | KV_GPU;
    s->gpu_tokens++;
    s->gpu_bytes = (uint64_t)s->gpu_tokens * p->kv_bytes;
}

const struct placement_ops place_alisa_ops = {
    .name = "alisa",
    .host_tier = 1,
    .scheduled = 1,
    .visits = 1,
    .summary = "ALISA's three phases as the paper specifies them: from p1 the oldest share "
               "alpha of each stream's tokens on the CPU (the local window stays on the GPU), "
               "from p2 the oldest share beta of those deleted (layer input kept); an attended "
               "CPU token is loaded for the step, a deleted one recomputed, neither kept",
    .params = "gpu_bytes, cpu_bytes, alpha, beta, p1, p2 (default: the greedy schedule of "
              "the stream's capacities)",
    .create = alisa_create,
    .destroy = alisa_destroy,
    .step = alisa_step,
};
