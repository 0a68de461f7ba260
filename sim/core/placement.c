/* The placement engine: moves tokens between the GPU tier, the CPU tier and
 * "dropped" as a policy's victim choices dictate, and records what moved.
 *
 * Eviction cascades: a GPU victim without a CPU copy is offloaded, which may
 * first need CPU victims deleted; with no CPU tier (or no CPU victim) it is
 * dropped, which needs room for its layer input, made the same way. Attended
 * tokens are pinned for the step, so a victim is never a token the step
 * needs. Owns no policy logic.
 */
#include "placement.h"

#include <stdlib.h>
#include <string.h>

int kv_stream_init(struct kv_stream *s, const struct place_params *p, uint32_t max_len,
                   struct alisa_err *e)
{
    memset(s, 0, sizeof *s);
    if (p->kv_bytes == 0)
        return err_set(e, ALISA_EINVAL, "KV bytes per token must be positive");
    s->flags = calloc(max_len ? max_len : 1, 1);
    if (!s->flags)
        return err_set(e, ALISA_ENOMEM, "out of memory for a stream of %u tokens", max_len);
    s->max_len = max_len;
    uint64_t g = p->gpu_bytes / p->kv_bytes, c = p->cpu_bytes / p->kv_bytes;
    s->gpu_cap = g > max_len ? max_len : (uint32_t)g;
    s->cpu_cap = c > max_len ? max_len : (uint32_t)c;
    return 0;
}

void kv_stream_deinit(struct kv_stream *s)
{
    free(s->flags);
    memset(s, 0, sizeof *s);
}

static void set_gpu(struct kv_stream *s, const struct place_params *p, uint32_t t, int on)
{
    ALISA_ASSERT(((s->flags[t] & KV_GPU) != 0) != on);
    s->flags[t] ^= KV_GPU;
    s->gpu_tokens += on ? 1 : -1;
    s->gpu_bytes = (uint64_t)s->gpu_tokens * p->kv_bytes;
}

void kv_stream_cpu_bytes(struct kv_stream *s, const struct place_params *p)
{
    s->cpu_bytes = (uint64_t)s->cpu_tokens * p->kv_bytes + (uint64_t)s->inputs * p->input_bytes;
}

void kv_stream_keep_input(struct kv_stream *s, const struct place_params *p, uint32_t t)
{
    if (s->flags[t] & KV_INPUT)
        return;
    s->flags[t] |= KV_INPUT;
    s->inputs++;
    kv_stream_cpu_bytes(s, p);
}

static void set_cpu(struct kv_stream *s, const struct place_params *p, uint32_t t, int on)
{
    ALISA_ASSERT(((s->flags[t] & KV_CPU) != 0) != on);
    s->flags[t] ^= KV_CPU;
    s->cpu_tokens += on ? 1 : -1;
    kv_stream_cpu_bytes(s, p);
}

/* Makes room for `need` more bytes in the CPU tier, deleting CPU copies as
 * the policy names them (a copy whose token is not on the GPU leaves it
 * dropped, its input kept). Returns -1 when the policy names no victim. */
static int cpu_room(const struct placement_ops *ops, void *st, struct kv_stream *s,
                    const struct place_params *p, uint64_t need, uint32_t now,
                    struct place_result *out)
{
    while (s->cpu_bytes + need > p->cpu_bytes) {
        uint32_t v = ops->victim_cpu && s->cpu_tokens ? ops->victim_cpu(st, s, now) : UINT32_MAX;
        if (v == UINT32_MAX)
            return -1;
        ALISA_ASSERT(v < s->max_len && (s->flags[v] & KV_CPU) && !(s->flags[v] & KV_PIN));
        set_cpu(s, p, v, 0);
        if (!(s->flags[v] & KV_GPU)) {
            out->drop[out->n_drop++] = v;
            kv_stream_keep_input(s, p, v);
        }
    }
    return 0;
}

/* Takes GPU token v off the GPU: offloaded when it has no CPU copy and the
 * policy keeps one, else dropped (its input kept). Returns -1 when the host
 * has no room even for its layer input. */
static int evict_gpu(const struct placement_ops *ops, void *st, struct kv_stream *s,
                     const struct place_params *p, uint32_t v, uint32_t now,
                     struct place_result *out)
{
    ALISA_ASSERT(v < s->max_len && (s->flags[v] & KV_GPU) && !(s->flags[v] & KV_PIN));
    if (!(s->flags[v] & KV_CPU)) {
        int keep = !ops->keep_copy || ops->keep_copy(st, v, now);
        if (keep && s->cpu_cap > 0 && cpu_room(ops, st, s, p, p->kv_bytes, now, out) == 0) {
            set_cpu(s, p, v, 1);
            out->bytes_d2h += p->kv_bytes;
            out->offload[out->n_offload++] = v;
        } else if ((s->flags[v] & KV_INPUT) ||
                   cpu_room(ops, st, s, p, p->input_bytes, now, out) == 0) {
            out->drop[out->n_drop++] = v;
            kv_stream_keep_input(s, p, v);
        } else { /* no host room even for its layer input */
            out->oom_cpu = 1;
            return -1;
        }
    }
    set_gpu(s, p, v, 0);
    return 0;
}

/* Frees one GPU slot if the tier is full; a policy that evicts whole units
 * takes the victim's unpinned unit-mates off with it, as far as the host
 * has room (a mate that cannot go stays: the slot is already free).
 * Returns -1 when nothing may go. */
static int gpu_room(const struct placement_ops *ops, void *st, struct kv_stream *s,
                    const struct place_params *p, uint32_t now, struct place_result *out)
{
    while (s->gpu_tokens >= s->gpu_cap) {
        uint32_t v = ops->victim_gpu(st, s, now);
        if (v == UINT32_MAX || evict_gpu(ops, st, s, p, v, now, out))
            return -1;
        uint32_t u = ops->whole_units && p->unit_tokens > 1 ? p->unit_tokens : 1;
        uint32_t first = place_unit_first(p, v);
        for (uint32_t t = first; u > 1 && place_unit_index(p, t) == place_unit_index(p, v) &&
                                 t < s->max_len; t++)
            if ((s->flags[t] & KV_GPU) && !(s->flags[t] & KV_PIN) &&
                evict_gpu(ops, st, s, p, t, now, out)) {
                out->oom_cpu = 0; /* not this step's failure: the mate stays */
                break;
            }
    }
    return 0;
}

void place_admit(const struct placement_ops *ops, void *state, struct kv_stream *s,
                 const struct place_params *p, uint32_t pos, struct place_result *out)
{
    ALISA_ASSERT(pos < s->max_len && !(s->flags[pos] & KV_EXISTS));
    if (ops->step) {
        s->local_start = pos; /* a prompt token: no local window but itself */
        ops->step(state, s, p, NULL, 0, NULL, 0, pos, out);
        return;
    }
    if (ops->miss)
        ops->miss(state, s, pos, pos);
    if (gpu_room(ops, state, s, p, pos, out) < 0) {
        out->oom = 1;
        return;
    }
    s->flags[pos] |= KV_EXISTS;
    set_gpu(s, p, pos, 1);
    /* written through into free host room only: deleting another token's
     * copy for it could drop a token that lives nowhere else */
    if (ops->write_through && s->cpu_bytes + p->kv_bytes <= p->cpu_bytes) {
        set_cpu(s, p, pos, 1);
        out->bytes_d2h += p->kv_bytes;
        out->offload[out->n_offload++] = pos;
    }
    if (ops->admit)
        ops->admit(state, pos, pos);
    if (ops->touch)
        ops->touch(state, pos, pos);
}

void place_step(const struct placement_ops *ops, void *state, struct kv_stream *s,
                const struct place_params *p, const uint32_t *attended, uint32_t n_att,
                const uint32_t *retired, uint32_t n_retired, uint32_t local_start, uint32_t pos,
                struct place_result *out)
{
    s->local_start = local_start;
    if (ops->step) {
        ops->step(state, s, p, attended, n_att, retired, n_retired, pos, out);
        return;
    }
    for (uint32_t i = 0; i < n_retired; i++) {
        uint32_t t = retired[i];
        ALISA_ASSERT(t < pos && !(s->flags[t] & KV_GONE));
        if (s->flags[t] & KV_GPU)
            set_gpu(s, p, t, 0);
        if (s->flags[t] & KV_CPU)
            set_cpu(s, p, t, 0);
        if (s->flags[t] & KV_INPUT) {
            s->flags[t] &= (uint8_t)~KV_INPUT;
            s->inputs--;
            kv_stream_cpu_bytes(s, p);
        }
        s->flags[t] |= KV_GONE;
    }
    for (uint32_t i = 0; i < n_att; i++)
        s->flags[attended[i]] |= KV_PIN;
    for (uint32_t i = 0; i < n_att && !out->oom; i++) {
        uint32_t t = attended[i];
        if (t == pos)
            continue;
        ALISA_ASSERT((s->flags[t] & KV_EXISTS) && !(s->flags[t] & KV_GONE));
        if (s->flags[t] & KV_GPU)
            continue;
        out->gpu_misses++;
        if (ops->miss)
            ops->miss(state, s, t, pos);
        if (gpu_room(ops, state, s, p, pos, out) < 0) {
            out->oom = 1;
            break;
        }
        if ((s->flags[t] & KV_CPU) && !(ops->prefer_recompute && ops->prefer_recompute(state, t, pos))) {
            out->bytes_h2d += p->kv_bytes;
            out->load[out->n_load++] = t;
        } else {
            out->bytes_h2d += p->act_bytes;
            out->recompute[out->n_recompute++] = t;
        }
        set_gpu(s, p, t, 1);
        if (ops->admit)
            ops->admit(state, t, pos);
    }
    if (!out->oom)
        place_admit(ops, state, s, p, pos, out);
    for (uint32_t i = 0; i < n_att; i++) {
        s->flags[attended[i]] &= (uint8_t)~KV_PIN;
        if (ops->touch && attended[i] != pos)
            ops->touch(state, attended[i], pos);
    }
}

enum kv_place kv_place_of(const struct kv_stream *s, uint32_t t)
{
    uint8_t f = s->flags[t];
    if (!(f & KV_EXISTS))
        return KV_PLACE_NONE;
    if (f & KV_GONE)
        return KV_PLACE_GONE;
    if (f & KV_SPLIT)
        return KV_PLACE_SPLIT;
    if (f & KV_GPU)
        return KV_PLACE_GPU;
    if (f & KV_CPU)
        return KV_PLACE_CPU;
    return KV_PLACE_DROPPED;
}

/* Per flag byte: 1 when the combination can never be valid after a step. */
static uint8_t bad_flags[256];

__attribute__((constructor)) static void fill_bad_flags(void)
{
    for (int f = 0; f < 256; f++)
        bad_flags[f] = ((f & KV_GONE) && (f & (KV_GPU | KV_CPU | KV_SPLIT | KV_VISIT | KV_INPUT))) ||
                       ((f & KV_SPLIT) && (f & (KV_GPU | KV_CPU))) || (f & KV_PIN) ||
                       ((f & KV_VISIT) && (f & (KV_GPU | KV_SPLIT))) ||
                       ((f & ~KV_EXISTS) && !(f & KV_EXISTS));
}

int kv_stream_check(const struct kv_stream *s, const struct place_params *p, uint32_t pos,
                    const uint32_t *attended, uint32_t n_att, struct kv_census *census,
                    struct alisa_err *e)
{
    uint32_t gpu = 0, cpu = 0, split = 0, cpu_only = 0, dropped = 0, gone = 0, visits = 0,
             inputs = 0, lost = 0;
    uint32_t n = pos + 1 < s->max_len ? pos + 1 : s->max_len;
    uint32_t missing = 0, bad = 0;
    /* Branch-free census of the produced tokens; the slow loop below runs
     * only to name the first offender. */
    for (uint32_t t = 0; t < n; t++) {
        uint8_t f = s->flags[t];
        missing += !(f & KV_EXISTS);
        bad += bad_flags[f];
        gpu += (f >> 1) & 1;
        cpu += (f >> 2) & 1;
        gone += (f >> 3) & 1;
        split += (f >> 5) & 1;
        visits += (f >> 6) & 1;
        inputs += (f >> 7) & 1;
        cpu_only += (f & (KV_CPU | KV_GPU)) == KV_CPU;
        dropped += (f & (KV_EXISTS | KV_GPU | KV_CPU | KV_GONE | KV_SPLIT)) == KV_EXISTS;
        lost += (f & (KV_EXISTS | KV_GPU | KV_CPU | KV_GONE | KV_SPLIT | KV_INPUT)) == KV_EXISTS;
    }
    uint32_t later = 0;
    for (uint32_t t = n; t < s->max_len; t++)
        later |= s->flags[t];
    if (missing || bad || later) {
        for (uint32_t t = 0; t < s->max_len; t++) {
            uint8_t f = s->flags[t];
            if (t <= pos && !(f & KV_EXISTS))
                return err_set(e, ALISA_EINVAL, "token %u of %u was never produced", t, pos + 1);
            if (t > pos && f)
                return err_set(e, ALISA_EINVAL, "token %u exists before its step (now %u)", t, pos);
            if ((f & KV_GONE) && (f & (KV_GPU | KV_CPU | KV_SPLIT | KV_INPUT)))
                return err_set(e, ALISA_EINVAL, "retired token %u still holds memory", t);
            if ((f & KV_SPLIT) && (f & (KV_GPU | KV_CPU)))
                return err_set(e, ALISA_EINVAL, "split token %u also has a whole copy", t);
            if (f & KV_PIN)
                return err_set(e, ALISA_EINVAL, "token %u still pinned after the step", t);
            if ((f & KV_VISIT) && (f & (KV_GPU | KV_SPLIT | KV_GONE)))
                return err_set(e, ALISA_EINVAL, "visiting token %u also has a place on the GPU "
                               "or is retired", t);
        }
        return err_set(e, ALISA_EINVAL, "invalid token flags at step %u", pos);
    }
    if (census)
        *census = (struct kv_census){gpu, cpu_only, dropped, gone, split};
    if (gpu != s->gpu_tokens || cpu != s->cpu_tokens || visits != s->visits ||
        inputs != s->inputs)
        return err_set(e, ALISA_EINVAL, "tier counts %u/%u/%u/%u disagree with flags %u/%u/%u/%u",
                       s->gpu_tokens, s->cpu_tokens, s->visits, s->inputs, gpu, cpu, visits,
                       inputs);
    if (lost)
        return err_set(e, ALISA_EINVAL, "%u dropped tokens without a kept layer input", lost);
    if (split == 0 && (s->gpu_bytes != (uint64_t)gpu * p->kv_bytes ||
                       s->cpu_bytes != (uint64_t)cpu * p->kv_bytes +
                                           (uint64_t)inputs * p->input_bytes))
        return err_set(e, ALISA_EINVAL, "tier bytes disagree with token counts");
    if (gpu > s->gpu_cap || cpu > s->cpu_cap)
        return err_set(e, ALISA_EINVAL, "tier over capacity: GPU %u/%u CPU %u/%u tokens", gpu,
                       s->gpu_cap, cpu, s->cpu_cap);
    if (s->gpu_bytes > p->gpu_bytes || s->cpu_bytes > p->cpu_bytes)
        return err_set(e, ALISA_EINVAL, "tier over capacity: GPU %llu/%llu CPU %llu/%llu bytes",
                       (unsigned long long)s->gpu_bytes, (unsigned long long)p->gpu_bytes,
                       (unsigned long long)s->cpu_bytes, (unsigned long long)p->cpu_bytes);
    for (uint32_t i = 0; i < n_att; i++) {
        uint8_t f = s->flags[attended[i]];
        if (!(f & (KV_GPU | KV_SPLIT | KV_VISIT)) || (f & KV_GONE))
            return err_set(e, ALISA_EINVAL, "attended token %u is not on the GPU at step %u",
                           attended[i], pos);
    }
    return 0;
}

const struct placement_ops *const placement_policies[] = {
    &place_gpu_only_ops, &place_alisa_ops,      &place_alisa_cache_ops, &place_lru_ops,
    &place_fifo_ops,     &place_lfu_ops,       &place_lfu_aged_ops,    &place_slru_ops,
    &place_arc_ops,      &place_cost_aware_ops, &place_hot_buffer_ops, &place_block_lru_ops,
    &place_block_score_ops, &place_flexgen_ops, &place_belady_ops,  &place_oracle_cost_ops,
    NULL,
};

int placement_online_cache(const struct placement_ops *pl)
{
    return pl->host_tier && !pl->offline && !pl->step && !pl->scheduled;
}

const struct placement_ops *placement_find(const char *name)
{
    for (size_t i = 0; placement_policies[i]; i++)
        if (strcmp(placement_policies[i]->name, name) == 0)
            return placement_policies[i];
    return NULL;
}
