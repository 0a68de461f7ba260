/* The cache-like placement policies: gpu-only, alisa-cache, lru, fifo, lfu,
 * belady and oracle-cost. Each is a victim rule (plus alisa-cache's
 * load-or-recompute and keep-a-copy rules) over a
 * shared per-stream bookkeeping state; the engine in placement.c moves the
 * tokens. Ties always go to the lowest token id, so every rule is
 * deterministic.
 */
#include <stdlib.h>

#include "placement.h"

struct cache_state {
    struct place_params p;
    uint32_t max_len;
    uint32_t *last_use;    /* (max_len) last step attended or produced */
    uint32_t *admitted_at; /* (max_len) step the token last entered the GPU */
    uint32_t *freq;        /* (max_len) times attended */
    uint32_t *cursor;      /* (max_len) belady: index of the next use in fut->steps */
    const struct kv_future *fut; /* belady only */
};

static void cache_destroy(void *state)
{
    struct cache_state *c = state;
    if (!c)
        return;
    free(c->last_use);
    free(c->admitted_at);
    free(c->freq);
    free(c->cursor);
    free(c);
}

static int cache_create(void **state, const struct place_params *p, uint32_t max_len,
                        const struct kv_future *fut, struct alisa_err *e)
{
    struct cache_state *c = calloc(1, sizeof *c);
    *state = c;
    size_t n = max_len ? max_len : 1;
    if (!c || !(c->last_use = calloc(n, sizeof(uint32_t))) ||
        !(c->admitted_at = calloc(n, sizeof(uint32_t))) ||
        !(c->freq = calloc(n, sizeof(uint32_t))) || !(c->cursor = calloc(n, sizeof(uint32_t)))) {
        cache_destroy(c);
        *state = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory for placement state (%u tokens)", max_len);
    }
    c->p = *p;
    c->max_len = max_len;
    c->fut = fut;
    if (fut)
        for (uint32_t t = 0; t < fut->n_tokens && t < max_len; t++)
            c->cursor[t] = fut->start[t];
    return 0;
}

static void cache_touch(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    c->last_use[t] = now;
    c->freq[t]++;
}

static void cache_admit(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    c->admitted_at[t] = now;
}

/* Lowest-key candidate with `need` flags set and none of `avoid`;
 * key(t) is compared lexicographically with the token id as the last key. */
typedef uint64_t (*key_fn)(const struct cache_state *c, uint32_t t, uint32_t now);

static uint32_t min_key(const struct cache_state *c, const struct kv_stream *s, uint8_t need,
                        uint8_t avoid, uint32_t end, key_fn key, uint32_t now)
{
    uint32_t best = UINT32_MAX;
    uint64_t best_key = 0;
    for (uint32_t t = 0; t < end; t++) {
        uint8_t f = s->flags[t];
        if ((f & need) != need || (f & avoid))
            continue;
        uint64_t k = key(c, t, now);
        if (best == UINT32_MAX || k < best_key) {
            best = t;
            best_key = k;
        }
    }
    return best;
}

static uint64_t key_last_use(const struct cache_state *c, uint32_t t, uint32_t now)
{
    (void)now;
    return c->last_use[t];
}

static uint64_t key_admitted(const struct cache_state *c, uint32_t t, uint32_t now)
{
    (void)now;
    return c->admitted_at[t];
}

static uint64_t key_freq(const struct cache_state *c, uint32_t t, uint32_t now)
{
    (void)now;
    return (uint64_t)c->freq[t] << 32 | c->last_use[t];
}

static uint64_t key_id(const struct cache_state *c, uint32_t t, uint32_t now)
{
    (void)c;
    (void)now;
    return t;
}

/* Belady: the next step after `now` at which t is attended (UINT32_MAX:
 * never); the smallest key is the farthest use, hence the inversion. */
static uint64_t key_next_use(const struct cache_state *c, uint32_t t, uint32_t now)
{
    uint32_t next = UINT32_MAX;
    if (t < c->fut->n_tokens) {
        uint32_t i = c->cursor[t], end = c->fut->start[t + 1];
        while (i < end && c->fut->steps[i] <= now)
            i++;
        ((struct cache_state *)c)->cursor[t] = i; /* uses before now never matter again */
        if (i < end)
            next = c->fut->steps[i];
    }
    return UINT32_MAX - (uint64_t)next;
}

#define GPU_VICTIM(name, key)                                                        \
    static uint32_t name(void *state, const struct kv_stream *s, uint32_t now)       \
    {                                                                                \
        return min_key(state, s, KV_GPU, KV_PIN, s->max_len, key, now);              \
    }
#define CPU_VICTIM(name, key)                                                        \
    static uint32_t name(void *state, const struct kv_stream *s, uint32_t now)       \
    {                                                                                \
        return min_key(state, s, KV_CPU, KV_PIN, s->max_len, key, now);              \
    }
GPU_VICTIM(lru_victim_gpu, key_last_use)
CPU_VICTIM(lru_victim_cpu, key_last_use)
GPU_VICTIM(fifo_victim_gpu, key_admitted)
CPU_VICTIM(fifo_victim_cpu, key_id)
GPU_VICTIM(lfu_victim_gpu, key_freq)
CPU_VICTIM(lfu_victim_cpu, key_freq)
GPU_VICTIM(belady_victim_gpu, key_next_use)
CPU_VICTIM(belady_victim_cpu, key_next_use)
CPU_VICTIM(alisa_cache_victim_cpu, key_id)

static uint32_t none_victim(void *state, const struct kv_stream *s, uint32_t now)
{
    (void)state;
    (void)s;
    (void)now;
    return UINT32_MAX;
}

/* alisa-cache, like the paper's phase II: the oldest GPU token outside the
 * local window goes; the window stays on the GPU unless nothing else can go. */
static uint32_t alisa_cache_victim_gpu(void *state, const struct kv_stream *s, uint32_t now)
{
    uint32_t v = min_key(state, s, KV_GPU, KV_PIN, s->local_start, key_id, now);
    return v != UINT32_MAX ? v : min_key(state, s, KV_GPU, KV_PIN, s->max_len, key_id, now);
}

/* ALISA section 3: per token, whichever the cost model says is cheaper now. */
static int alisa_prefer_recompute(void *state, uint32_t t, uint32_t now)
{
    const struct cache_state *c = state;
    (void)t;
    (void)now;
    return c->p.recompute_ns < c->p.load_ns;
}

/* alisa-cache: a CPU copy only of a token that would be loaded rather than
 * recomputed when attended again (else the offload is wasted traffic). */
static int alisa_cache_keep_copy(void *state, uint32_t t, uint32_t now)
{
    return !alisa_prefer_recompute(state, t, now);
}

const struct placement_ops place_gpu_only_ops = {
    .name = "gpu-only",
    .summary = "all KV on the GPU, nothing offloaded; out of memory when it does not fit",
    .params = "gpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = none_victim,
    .victim_cpu = none_victim,
};

const struct placement_ops place_alisa_cache_ops = {
    .name = "alisa-cache",
    .host_tier = 1,
    .summary = "BEYOND THE PAPER: ALISA's tiers as a cache: the oldest GPU tokens outside the "
               "local window leave first, a token fetched from the CPU (or recomputed) stays "
               "on the GPU, the oldest CPU tokens are dropped; an evicted token keeps a CPU "
               "copy only when loading beats recomputing, and an off-GPU token is loaded or "
               "recomputed, whichever the cost model says is cheaper",
    .params = "gpu_bytes, cpu_bytes, load_ns, recompute_ns",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = alisa_cache_victim_gpu,
    .victim_cpu = alisa_cache_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
    .prefer_recompute = alisa_prefer_recompute,
    .keep_copy = alisa_cache_keep_copy,
};

const struct placement_ops place_lru_ops = {
    .name = "lru",
    .host_tier = 1,
    .summary = "evict the least recently attended token (GPU to CPU, CPU to dropped)",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = lru_victim_gpu,
    .victim_cpu = lru_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
};

const struct placement_ops place_fifo_ops = {
    .name = "fifo",
    .host_tier = 1,
    .summary = "evict the token that entered the GPU first; CPU drops the oldest token",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = fifo_victim_gpu,
    .victim_cpu = fifo_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
};

const struct placement_ops place_lfu_ops = {
    .name = "lfu",
    .host_tier = 1,
    .summary = "evict the least often attended token (ties: least recently)",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = lfu_victim_gpu,
    .victim_cpu = lfu_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
};

const struct placement_ops place_belady_ops = {
    .name = "belady",
    .host_tier = 1,
    .summary = "OFFLINE BOUND: Belady's MIN, evict the token attended farthest in the "
               "future (fewest GPU misses possible)",
    .params = "gpu_bytes, cpu_bytes; needs the future selection sequence",
    .offline = 1,
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = belady_victim_gpu,
    .victim_cpu = belady_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
};

/* oracle-cost (offline). Objective, per stream: load_ns per load +
 * recompute_ns per recomputation + load_ns per offload (an offload moves the
 * same bytes over the same link as a load). Rule: evict by Belady's farthest
 * next use on both tiers; on eviction keep a CPU copy only of a token that
 * is used again and only when offload + load < recompute; fetch whichever of
 * load and recompute is cheaper. Provably optimal when recompute_ns <=
 * load_ns: copies are then useless, every miss costs recompute_ns, and MIN
 * has the fewest misses. Otherwise a heuristic, never below min(load,
 * recompute) x MIN's misses. */
static int oracle_keep_copy(void *state, uint32_t t, uint32_t now)
{
    const struct cache_state *c = state;
    if (key_next_use(c, t, now) == 0) /* never used again */
        return 0;
    return c->p.load_ns + c->p.load_ns < c->p.recompute_ns;
}

const struct placement_ops place_oracle_cost_ops = {
    .name = "oracle-cost",
    .host_tier = 1,
    .summary = "OFFLINE BOUND: Belady's eviction order, a CPU copy kept only when offload + "
               "load beats recompute for a token used again, cheaper fetch; optimal when "
               "recompute <= load, a heuristic otherwise",
    .params = "gpu_bytes, cpu_bytes, load_ns, recompute_ns; needs the future selection",
    .offline = 1,
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = belady_victim_gpu,
    .victim_cpu = belady_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
    .prefer_recompute = alisa_prefer_recompute,
    .keep_copy = oracle_keep_copy,
};
