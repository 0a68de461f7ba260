/* The cache-like placement policies: gpu-only, alisa-cache, lru, hot-buffer,
 * block-lru, block-score, fifo, lfu, lfu-aged, slru, arc, cost-aware,
 * belady and oracle-cost. Each is a victim
 * rule (plus load-or-recompute and keep-a-copy rules where it has them)
 * over a shared per-stream bookkeeping state; the engine in placement.c
 * moves the tokens. Ties always go to the lowest token id, so every rule is
 * deterministic.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

struct cache_state {
    struct place_params p;
    uint32_t max_len;
    uint32_t *last_use;    /* (max_len) last step attended or produced */
    uint32_t *admitted_at; /* (max_len) step the token last entered the GPU */
    uint32_t *freq;        /* (max_len) times attended */
    uint32_t *cursor;      /* (max_len) belady: index of the next use in fut->steps */
    const struct kv_future *fut; /* belady only */
    double *prio;          /* (max_len) lfu-aged, cost-aware: the priority set at the last use */
    double age;            /* lfu-aged, cost-aware: the priority of the last GPU victim (L) */
    uint8_t *list;         /* (max_len) slru: its segment; arc: its list (enum below) */
    uint64_t *stamp;       /* (max_len) slru, arc: when it entered its list's newest end */
    uint64_t clock;        /* slru, arc: the event counter stamps come from */
    double target;         /* arc: p, the target size of T1 */
    uint32_t incoming;     /* arc: the token the next victim makes room for */
    int drop_next;         /* arc: the next victim leaves no ghost (T1 holds the whole cache) */
    uint32_t *block_use;   /* (blocks) block-lru: the last step any of its tokens was used;
                              block-score: that step + 1, set by observe */
    double *block_score;   /* (blocks) block-score: its decayed attention score */
};

/* slru's segments and arc's lists (Megiddo and Modha, FAST 2003: T1 seen
 * once recently, T2 at least twice, B1 and B2 their ghosts: tokens evicted
 * from them, remembered but off the GPU) */
enum { L_NONE = 0, L_PROB, L_PROT, L_T1, L_T2, L_B1, L_B2 };

static void cache_destroy(void *state)
{
    struct cache_state *c = state;
    if (!c)
        return;
    free(c->last_use);
    free(c->admitted_at);
    free(c->freq);
    free(c->cursor);
    free(c->prio);
    free(c->list);
    free(c->stamp);
    free(c->block_use);
    free(c->block_score);
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
        !(c->freq = calloc(n, sizeof(uint32_t))) || !(c->cursor = calloc(n, sizeof(uint32_t))) ||
        !(c->prio = calloc(n, sizeof(double))) || !(c->list = calloc(n, 1)) ||
        !(c->stamp = calloc(n, sizeof(uint64_t))) ||
        !(c->block_use = calloc(n, sizeof(uint32_t))) ||
        !(c->block_score = calloc(n, sizeof(double)))) {
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

/* ---- lfu-aged and cost-aware: priorities that age ----
 * LFU with dynamic ageing (LFU-DA: Arlitt, Cherkasova, Dilley, Friedrich
 * and Jin, 2000; Squid's heap LFUDA, src/repl/heap/store_heap_replacement.cc,
 * HeapKeyGen_StoreEntry_LFUDA): a token's priority, set at each use, is its
 * use count plus the cache's age L, and L becomes the priority of each GPU
 * victim, so counts earned long ago stop protecting a token. cost-aware is
 * GreedyDual-Size-Frequency (Cherkasova, HP Labs HPL-98-69, 1998; Squid's
 * HeapKeyGen_StoreEntry_GDSF) with a token's cost: L plus its uses times
 * what bringing it back costs (the cheaper of a load and a recomputation),
 * plus, at eviction, the offload a token without a CPU copy costs when a
 * copy is worth keeping (loading cheaper than recomputing). */

/* The lowest priority among unpinned GPU tokens (ties: least recently used,
 * then lowest id), extra(t) added; the cache's age becomes the victim's. */
static uint32_t min_prio_gpu(struct cache_state *c, const struct kv_stream *s,
                             double (*extra)(const struct cache_state *, const struct kv_stream *,
                                             uint32_t))
{
    uint32_t best = UINT32_MAX;
    double best_key = 0;
    for (uint32_t t = 0; t < s->max_len; t++) {
        uint8_t f = s->flags[t];
        if (!(f & KV_GPU) || (f & KV_PIN))
            continue;
        double k = c->prio[t] + (extra ? extra(c, s, t) : 0);
        if (best == UINT32_MAX || k < best_key ||
            (k == best_key && c->last_use[t] < c->last_use[best])) {
            best = t;
            best_key = k;
        }
    }
    if (best != UINT32_MAX)
        c->age = best_key;
    return best;
}

static void lfu_aged_touch(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_touch(c, t, now);
    c->prio[t] = c->freq[t] + c->age;
}

static uint32_t lfu_aged_victim_gpu(void *state, const struct kv_stream *s, uint32_t now)
{
    (void)now;
    return min_prio_gpu(state, s, NULL);
}

/* the cheaper way back for an evicted token */
static double reload_ns(const struct cache_state *c)
{
    return c->p.load_ns < c->p.recompute_ns ? c->p.load_ns : c->p.recompute_ns;
}

static void cost_aware_touch(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_touch(c, t, now);
    c->prio[t] = c->age + c->freq[t] * reload_ns(c);
}

/* evicting a token without a CPU copy costs its offload when a copy is kept
 * (a host tier, and alisa_cache_keep_copy: loading beats recomputing) */
static double offload_extra(const struct cache_state *c, const struct kv_stream *s, uint32_t t)
{
    return !(s->flags[t] & KV_CPU) && s->cpu_cap > 0 && c->p.load_ns <= c->p.recompute_ns
               ? c->p.load_ns
               : 0;
}

static uint32_t cost_aware_victim_gpu(void *state, const struct kv_stream *s, uint32_t now)
{
    (void)now;
    return min_prio_gpu(state, s, offload_extra);
}

/* ---- slru and arc: lists ordered by stamps ---- */

/* The oldest (least stamped) token in list l, unpinned when unpinned_only,
 * among tokens not retired; UINT32_MAX when none. */
static uint32_t oldest_in(const struct cache_state *c, const struct kv_stream *s, uint8_t l,
                          int unpinned_only)
{
    uint32_t best = UINT32_MAX;
    for (uint32_t t = 0; t < s->max_len; t++) {
        uint8_t f = s->flags[t];
        if (c->list[t] != l || (f & KV_GONE) || (unpinned_only && (f & KV_PIN)))
            continue;
        if (best == UINT32_MAX || c->stamp[t] < c->stamp[best])
            best = t;
    }
    return best;
}

/* How many tokens (not retired) list l holds; for the GPU's lists, only
 * those on the GPU. */
static uint32_t count_in(const struct cache_state *c, const struct kv_stream *s, uint8_t l)
{
    uint32_t n = 0;
    for (uint32_t t = 0; t < s->max_len; t++)
        n += c->list[t] == l && !(s->flags[t] & KV_GONE) &&
             ((l != L_PROB && l != L_PROT && l != L_T1 && l != L_T2) || (s->flags[t] & KV_GPU));
    return n;
}

static void put(struct cache_state *c, uint32_t t, uint8_t l)
{
    c->list[t] = l;
    c->stamp[t] = ++c->clock;
}

/* Segmented LRU (Karedla, Love and Wherry, IEEE Computer 1994): a token
 * enters the probationary segment; used again on the GPU it moves to the
 * protected one, which keeps at most 80% of the tier (Caffeine's
 * PERCENT_MAIN_PROTECTED, BoundedLocalCache.java), its oldest demoted back
 * to the probationary segment's newest end; victims are the probationary
 * segment's oldest. Demotion happens when a victim is needed. */
static void slru_admit(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_admit(c, t, now);
    put(c, t, L_PROB);
}

static void slru_touch(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_touch(c, t, now);
    if (c->admitted_at[t] != now) /* a hit: it was on the GPU before this step */
        put(c, t, L_PROT);
}

static uint32_t slru_victim_gpu(void *state, const struct kv_stream *s, uint32_t now)
{
    struct cache_state *c = state;
    (void)now;
    uint32_t cap = s->gpu_cap * 4 / 5, prot = count_in(c, s, L_PROT);
    for (; prot > cap; prot--)
        put(c, oldest_in(c, s, L_PROT, 0), L_PROB);
    uint32_t v = oldest_in(c, s, L_PROB, 1);
    if (v == UINT32_MAX)
        v = oldest_in(c, s, L_PROT, 1);
    if (v != UINT32_MAX)
        c->list[v] = L_NONE;
    return v;
}

/* ARC (Megiddo and Modha, FAST 2003, Fig. 4), c = the GPU tier's tokens: a
 * miss on a B1 ghost grows the target p of T1 by max(|B2|/|B1|, 1), one on
 * a B2 ghost shrinks it by max(|B1|/|B2|, 1), and both enter T2; a new token
 * enters T1, the directory first trimmed (the oldest B1 ghost when T1 and B1
 * hold c, T1's oldest leaving without a ghost when T1 alone does; the
 * oldest B2 ghost when all four hold 2c); a hit moves a token to T2's
 * newest end. REPLACE evicts T1's oldest (to B1) when |T1| > p, or |T1| = p
 * for a B2 miss, else T2's oldest (to B2). Pinned tokens (attended this
 * step) are passed over. */
static void arc_miss(void *state, const struct kv_stream *s, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    (void)now;
    const double cap = s->gpu_cap;
    double b1 = count_in(c, s, L_B1), b2 = count_in(c, s, L_B2);
    c->incoming = t;
    c->drop_next = 0;
    if (c->list[t] == L_B1) {
        c->target = fmin(cap, c->target + fmax(b2 / b1, 1));
    } else if (c->list[t] == L_B2) {
        c->target = fmax(0, c->target - fmax(b1 / b2, 1));
    } else {
        double t1 = count_in(c, s, L_T1), t2 = count_in(c, s, L_T2);
        if (t1 + b1 >= cap) {
            if (t1 < cap)
                c->list[oldest_in(c, s, L_B1, 0)] = L_NONE;
            else
                c->drop_next = 1;
        } else if (t1 + t2 + b1 + b2 >= 2 * cap && b2 > 0) {
            c->list[oldest_in(c, s, L_B2, 0)] = L_NONE;
        }
    }
}

static void arc_admit(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_admit(c, t, now);
    put(c, t, c->list[t] == L_B1 || c->list[t] == L_B2 ? L_T2 : L_T1);
}

static void arc_touch(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_touch(c, t, now);
    if (c->admitted_at[t] != now) /* a hit */
        put(c, t, L_T2);
}

static uint32_t arc_victim_gpu(void *state, const struct kv_stream *s, uint32_t now)
{
    struct cache_state *c = state;
    (void)now;
    double t1 = count_in(c, s, L_T1);
    int in_b2 = c->list[c->incoming] == L_B2;
    int from_t1 = t1 >= 1 && (t1 > c->target || (in_b2 && t1 == c->target));
    uint32_t v = oldest_in(c, s, from_t1 ? L_T1 : L_T2, 1);
    if (v == UINT32_MAX) { /* the other list, every token of this one pinned */
        from_t1 = !from_t1;
        v = oldest_in(c, s, from_t1 ? L_T1 : L_T2, 1);
    }
    if (v != UINT32_MAX && c->drop_next && from_t1)
        c->list[v] = L_NONE;
    else if (v != UINT32_MAX) /* its ghost, newest in B1 or B2 */
        put(c, v, from_t1 ? L_B1 : L_B2);
    c->drop_next = 0;
    return v;
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

/* HiSparse's hot buffer (sgl-project/sglang,
 * python/sglang/srt/managers/hisparse_coordinator.py HiSparseCoordinator:
 * the whole KV in a host pool of one-token pages, a device buffer per
 * request and layer with exact LRU slots, load_cache_to_device_buffer_kernel
 * in python/sglang/jit_kernel/csrc/hisparse.cuh moving hits to the MRU end
 * and copying misses in at the LRU end; _eager_backup_previous_token copies
 * each new token's KV to the host, a step after it is written; vLLM has a
 * port): an eviction only forgets the device copy. lru's victims with the
 * engine's write-through, in the token's own step (a step earlier than
 * SGLang's, the same traffic). */
const struct placement_ops place_hot_buffer_ops = {
    .name = "hot-buffer",
    .host_tier = 1,
    .write_through = 1,
    .summary = "HiSparse's hot buffer: LRU on the GPU over a host tier that gets every new "
               "token as it is written (eager write-back), so evicting moves nothing",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = lru_victim_gpu,
    .victim_cpu = lru_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
};

/* ---- block-lru and block-score: InfLLM's GPU cache of memory blocks ----
 * InfLLM (thunlp/InfLLM, inf_llm/attention/context_manager.py) keeps its
 * memory blocks on the host and caches up to max_cached_block of them on
 * the GPU (32 in config/mistral-inf-llm.yaml); _append loads the step's
 * top blocks whole and, when the cache overflows, remove_lru_blocks
 * offloads whole blocks, lowest key first, never one the step selected.
 * The key: with cache_strategy "lru", the load counter when the block was
 * last selected; with "lru-s", a score: _append zeroes each selected
 * block's, then update_block_score multiplies every cached block's by
 * score_decay (0.1 in config/mistral-inf-llm-12k.yaml) and adds the
 * attention the block received (summed over its tokens and heads). A
 * block here is the selection's unit (infllm's block, quest's page;
 * place_params.unit_tokens, tiled from unit_origin: infllm's first block
 * starts after its initial tokens); the engine takes a victim's unit-mates
 * with it (whole_units), as far as the host has room. InfLLM's initial and local
 * tokens live outside its cache; here they are blocks like the others,
 * pinned while attended. */

static void block_touch(void *state, uint32_t t, uint32_t now)
{
    struct cache_state *c = state;
    cache_touch(c, t, now);
    c->block_use[place_unit_index(&c->p, t)] = now;
}

static uint64_t key_block_use(const struct cache_state *c, uint32_t t, uint32_t now)
{
    (void)now;
    return c->block_use[place_unit_index(&c->p, t)];
}

/* a score as an ordered key: non-negative doubles order as their bits */
static uint64_t key_block_score(const struct cache_state *c, uint32_t t, uint32_t now)
{
    (void)now;
    double x = c->block_score[place_unit_index(&c->p, t)];
    uint64_t k;
    memcpy(&k, &x, sizeof k);
    return k;
}

GPU_VICTIM(block_lru_victim_gpu, key_block_use)
CPU_VICTIM(block_lru_victim_cpu, key_block_use)
GPU_VICTIM(block_score_victim_gpu, key_block_score)
CPU_VICTIM(block_score_victim_cpu, key_block_score)

/* InfLLM's score_decay. */
#define BLOCK_SCORE_DECAY 0.1

/* lru-s at step now: a block attended now scores the weight its tokens got
 * (zeroed, then added to), every other block's score decays. block_use
 * marks the blocks attended now (now + 1). */
static void block_score_observe(void *state, const uint32_t *ids, const float *w, uint32_t n,
                                uint32_t now)
{
    struct cache_state *c = state;
    uint32_t blocks = place_unit_index(&c->p, now) + 1;
    for (uint32_t i = 0; i < n; i++)
        c->block_use[place_unit_index(&c->p, ids[i])] = now + 1;
    for (uint32_t b = 0; b < blocks; b++)
        c->block_score[b] = c->block_use[b] == now + 1 ? 0 : c->block_score[b] * BLOCK_SCORE_DECAY;
    for (uint32_t i = 0; i < n; i++)
        c->block_score[place_unit_index(&c->p, ids[i])] += w[i];
}

const struct placement_ops place_block_lru_ops = {
    .name = "block-lru",
    .host_tier = 1,
    .whole_units = 1,
    .summary = "InfLLM's GPU block cache (cache_strategy lru): whole blocks of the selection's "
               "unit, the least recently attended block offloaded whole",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = block_lru_victim_gpu,
    .victim_cpu = block_lru_victim_cpu,
    .touch = block_touch,
    .admit = cache_admit,
};

const struct placement_ops place_block_score_ops = {
    .name = "block-score",
    .host_tier = 1,
    .whole_units = 1,
    .summary = "InfLLM's GPU block cache (cache_strategy lru-s): whole blocks, the one with the "
               "lowest decayed attention score offloaded whole",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = block_score_victim_gpu,
    .victim_cpu = block_score_victim_cpu,
    .touch = cache_touch,
    .admit = cache_admit,
    .observe = block_score_observe,
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

const struct placement_ops place_lfu_aged_ops = {
    .name = "lfu-aged",
    .host_tier = 1,
    .summary = "LFU with dynamic ageing (LFU-DA): evict the lowest use count plus the cache's "
               "age at the last use; the age is the last victim's, so old counts fade",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = lfu_aged_victim_gpu,
    .victim_cpu = lfu_victim_cpu,
    .touch = lfu_aged_touch,
    .admit = cache_admit,
};

const struct placement_ops place_slru_ops = {
    .name = "slru",
    .host_tier = 1,
    .summary = "segmented LRU: new tokens probationary, tokens used again on the GPU "
               "protected (at most 80% of the tier); evict the oldest probationary token",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = slru_victim_gpu,
    .victim_cpu = lru_victim_cpu,
    .touch = slru_touch,
    .admit = slru_admit,
};

const struct placement_ops place_arc_ops = {
    .name = "arc",
    .host_tier = 1,
    .summary = "ARC: recency (T1) and frequency (T2) lists sized by ghost hits of recent "
               "victims; the CPU tier drops the least recently used",
    .params = "gpu_bytes, cpu_bytes",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = arc_victim_gpu,
    .victim_cpu = lru_victim_cpu,
    .touch = arc_touch,
    .admit = arc_admit,
    .miss = arc_miss,
};

const struct placement_ops place_cost_aware_ops = {
    .name = "cost-aware",
    .host_tier = 1,
    .summary = "GreedyDual-Size-Frequency by reload cost: evict the lowest uses x the cheaper "
               "of load and recompute plus the cache's age (and the offload a token without "
               "a CPU copy costs); copies kept and fetches made as alisa-cache's",
    .params = "gpu_bytes, cpu_bytes, load_ns, recompute_ns",
    .create = cache_create,
    .destroy = cache_destroy,
    .victim_gpu = cost_aware_victim_gpu,
    .victim_cpu = lfu_victim_cpu,
    .touch = cost_aware_touch,
    .admit = cache_admit,
    .prefer_recompute = alisa_prefer_recompute,
    .keep_copy = alisa_cache_keep_copy,
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
