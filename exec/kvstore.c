/* Token-level KV arenas (contract in kvstore.h). Slots come from per-stream
 * free lists; loc[] maps each token to its device and host slot (-1: none).
 * Recomputation is one GEMV per projection per token, with RoPE at the
 * token's own position, the same arithmetic as the forward pass.
 */
#include "kvstore.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct arena {
    uint32_t cap;
    float *k, *v;     /* (cap, kv_dim) */
    uint32_t *free;   /* (cap) free slot stack */
    uint32_t n_free;
};

struct kvstore {
    uint32_t n_streams, max_len, kv_dim, dim, head_dim;
    float rope_theta;
    struct arena *dev, *host; /* (n_streams) */
    int32_t *dev_slot;        /* (n_streams, max_len) */
    int32_t *host_slot;       /* (n_streams, max_len) */
    float *act;               /* (n_streams, max_len, dim) kept layer inputs */
    float *scratch;           /* (2, kv_dim) for kvstore_fetch */
    uint64_t offloads, loads, recomputes;
    uint64_t recompute_ns;    /* wall time in recomputation */
};

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int arena_init(struct arena *a, uint32_t cap, uint32_t kv_dim)
{
    a->cap = cap;
    a->k = malloc((size_t)(cap ? cap : 1) * kv_dim * sizeof(float));
    a->v = malloc((size_t)(cap ? cap : 1) * kv_dim * sizeof(float));
    a->free = malloc((cap ? cap : 1) * sizeof(uint32_t));
    if (!a->k || !a->v || !a->free)
        return -1;
    for (uint32_t i = 0; i < cap; i++)
        a->free[i] = cap - 1 - i;
    a->n_free = cap;
    return 0;
}

static void arena_deinit(struct arena *a)
{
    free(a->k);
    free(a->v);
    free(a->free);
}

void kvstore_free(struct kvstore *ks)
{
    if (!ks)
        return;
    for (uint32_t s = 0; s < ks->n_streams; s++) {
        if (ks->dev)
            arena_deinit(&ks->dev[s]);
        if (ks->host)
            arena_deinit(&ks->host[s]);
    }
    free(ks->dev);
    free(ks->host);
    free(ks->dev_slot);
    free(ks->host_slot);
    free(ks->act);
    free(ks->scratch);
    free(ks);
}

int kvstore_create(struct kvstore **out, const struct llm_config *c, uint32_t n_streams,
                   uint32_t max_len, uint32_t dev_cap, uint32_t host_cap, struct alisa_err *e)
{
    *out = NULL;
    struct kvstore *ks = calloc(1, sizeof *ks);
    if (!ks)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    ks->n_streams = n_streams;
    ks->max_len = max_len;
    ks->kv_dim = c->kv_dim;
    ks->dim = c->dim;
    ks->head_dim = c->head_dim;
    ks->rope_theta = c->rope_theta;
    size_t tokens = (size_t)n_streams * max_len;
    ks->dev = calloc(n_streams, sizeof *ks->dev);
    ks->host = calloc(n_streams, sizeof *ks->host);
    ks->dev_slot = malloc(tokens * sizeof *ks->dev_slot);
    ks->host_slot = malloc(tokens * sizeof *ks->host_slot);
    ks->act = malloc(tokens * c->dim * sizeof *ks->act);
    ks->scratch = malloc(2 * (size_t)c->kv_dim * sizeof *ks->scratch);
    int bad = !ks->dev || !ks->host || !ks->dev_slot || !ks->host_slot || !ks->act || !ks->scratch;
    for (uint32_t s = 0; !bad && s < n_streams; s++)
        bad = arena_init(&ks->dev[s], dev_cap, c->kv_dim) || arena_init(&ks->host[s], host_cap, c->kv_dim);
    if (bad) {
        kvstore_free(ks);
        return err_set(e, ALISA_ENOMEM, "out of memory for KV arenas of %u streams", n_streams);
    }
    for (size_t i = 0; i < tokens; i++)
        ks->dev_slot[i] = ks->host_slot[i] = -1;
    *out = ks;
    return 0;
}

static int take(struct arena *a)
{
    return a->n_free ? (int)a->free[--a->n_free] : -1;
}

static void give(struct arena *a, int32_t slot) { a->free[a->n_free++] = (uint32_t)slot; }

/* K, V of token t from its kept layer input: the forward pass's projections
 * and RoPE at position t. */
static void recompute(const struct kvstore *ks, const struct llm_model *m, uint32_t layer,
                      const float *act, uint32_t t, float *k, float *v)
{
    const struct llm_config *c = &m->c;
    size_t kv = c->kv_dim, d = c->dim;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)kv, (int)d, 1.0f,
                m->w.wk + (size_t)layer * kv * d, (int)d, act, 1, 0.0f, k, 1);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)kv, (int)d, 1.0f,
                m->w.wv + (size_t)layer * kv * d, (int)d, act, 1, 0.0f, v, 1);
    for (uint32_t i = 0; i < kv; i += 2) {
        uint32_t j = (i % ks->head_dim) / 2;
        float freq = 1.0f / powf(ks->rope_theta, (float)(2 * j) / (float)ks->head_dim);
        float val = (float)t * freq, cs = cosf(val), sn = sinf(val);
        float v0 = k[i], v1 = k[i + 1];
        k[i] = v0 * cs - v1 * sn;
        k[i + 1] = v0 * sn + v1 * cs;
    }
}

int kvstore_apply(struct kvstore *ks, const struct scheduler_plan *plan, const uint8_t *flags,
                  const struct llm_model *m, uint32_t layer, uint32_t pos, const float *k,
                  const float *v, const float *act, struct alisa_err *e)
{
    uint32_t s = plan->stream, kv = ks->kv_dim;
    struct arena *dev = &ks->dev[s], *host = &ks->host[s];
    int32_t *ds = ks->dev_slot + (size_t)s * ks->max_len, *hs = ks->host_slot + (size_t)s * ks->max_len;
    const struct place_result *r = &plan->place;
    uint32_t upto = pos + 1 < ks->max_len ? pos + 1 : ks->max_len;
    /* 1. host copies the scheduler deleted this step: their room may be what
     * the offloads below were given */
    for (uint32_t t = 0; t < upto; t++)
        if (hs[t] >= 0 && !(flags[t] & KV_CPU)) {
            give(host, hs[t]);
            hs[t] = -1;
        }
    /* 2. offloads, while the device copy still exists (a token offloaded and
     * deleted again within the step is not copied at all) */
    for (uint32_t i = 0; i < r->n_offload; i++) {
        uint32_t t = r->offload[i];
        if (!(flags[t] & KV_CPU) || hs[t] >= 0)
            continue;
        int slot = take(host);
        if (ds[t] < 0 || slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: cannot offload token %u", s, pos, t);
        memcpy(host->k + (size_t)slot * kv, dev->k + (size_t)ds[t] * kv, kv * sizeof(float));
        memcpy(host->v + (size_t)slot * kv, dev->v + (size_t)ds[t] * kv, kv * sizeof(float));
        hs[t] = slot;
        ks->offloads++;
    }
    /* then free the device copies the scheduler evicted */
    for (uint32_t t = 0; t < upto; t++)
        if (ds[t] >= 0 && !(flags[t] & KV_GPU)) {
            give(dev, ds[t]);
            ds[t] = -1;
        }
    /* 3. loads and recomputations into free device slots */
    for (uint32_t i = 0; i < r->n_load; i++) {
        uint32_t t = r->load[i];
        int slot = take(dev);
        if (hs[t] < 0 || slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: cannot load token %u", s, pos, t);
        memcpy(dev->k + (size_t)slot * kv, host->k + (size_t)hs[t] * kv, kv * sizeof(float));
        memcpy(dev->v + (size_t)slot * kv, host->v + (size_t)hs[t] * kv, kv * sizeof(float));
        ds[t] = slot;
        ks->loads++;
    }
    for (uint32_t i = 0; i < r->n_recompute; i++) {
        uint32_t t = r->recompute[i];
        int slot = take(dev);
        if (slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: no device slot to recompute %u", s,
                           pos, t);
        uint64_t t0 = mono_ns();
        recompute(ks, m, layer, ks->act + ((size_t)s * ks->max_len + t) * ks->dim, t,
                  dev->k + (size_t)slot * kv, dev->v + (size_t)slot * kv);
        ks->recompute_ns += mono_ns() - t0;
        ds[t] = slot;
        ks->recomputes++;
    }
    /* 4. the new token, computed on the device this step */
    if (pos < ks->max_len && (flags[pos] & KV_GPU) && ds[pos] < 0) {
        int slot = take(dev);
        if (slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: no device slot for the new token", s,
                           pos);
        memcpy(dev->k + (size_t)slot * kv, k, kv * sizeof(float));
        memcpy(dev->v + (size_t)slot * kv, v, kv * sizeof(float));
        memcpy(ks->act + ((size_t)s * ks->max_len + pos) * ks->dim, act, ks->dim * sizeof(float));
        ds[pos] = slot;
    }
    return 0;
}

const float *kvstore_k(const struct kvstore *ks, uint32_t stream, uint32_t t)
{
    int32_t slot = ks->dev_slot[(size_t)stream * ks->max_len + t];
    return slot < 0 ? NULL : ks->dev[stream].k + (size_t)slot * ks->kv_dim;
}

const float *kvstore_v(const struct kvstore *ks, uint32_t stream, uint32_t t)
{
    int32_t slot = ks->dev_slot[(size_t)stream * ks->max_len + t];
    return slot < 0 ? NULL : ks->dev[stream].v + (size_t)slot * ks->kv_dim;
}

void kvstore_fetch(struct kvstore *ks, const struct llm_model *m, uint32_t stream, uint32_t layer,
                   uint32_t t, const float **k, const float **v)
{
    size_t i = (size_t)stream * ks->max_len + t;
    if (ks->dev_slot[i] >= 0) {
        *k = ks->dev[stream].k + (size_t)ks->dev_slot[i] * ks->kv_dim;
        *v = ks->dev[stream].v + (size_t)ks->dev_slot[i] * ks->kv_dim;
    } else if (ks->host_slot[i] >= 0) {
        *k = ks->host[stream].k + (size_t)ks->host_slot[i] * ks->kv_dim;
        *v = ks->host[stream].v + (size_t)ks->host_slot[i] * ks->kv_dim;
    } else {
        recompute(ks, m, layer, ks->act + i * ks->dim, t, ks->scratch, ks->scratch + ks->kv_dim);
        *k = ks->scratch;
        *v = ks->scratch + ks->kv_dim;
    }
}

void kvstore_counts(const struct kvstore *ks, uint64_t *offloads, uint64_t *loads,
                    uint64_t *recomputes)
{
    *offloads = ks->offloads;
    *loads = ks->loads;
    *recomputes = ks->recomputes;
}

uint64_t kvstore_recompute_ns(const struct kvstore *ks) { return ks->recompute_ns; }
