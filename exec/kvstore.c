/* Token-level KV arenas (contract in kvstore.h). Slots come from per-stream
 * free lists; loc[] maps each token to its device and host slot (-1: none).
 * Recomputation is the forward pass's own K/V step (layers_kv on the CPU's
 * row operations), one token at a time, RoPE from the store's tables at the
 * token's own position. INT8 slots
 * hold bytes; a stream's open token group lives in FP32 in its residual
 * until the group closes and is quantised into the slots its tokens hold.
 * With tier ops (the CUDA backend) the device arenas are only free lists and
 * every device access is an op.
 */
#include "kvstore.h"
#include "cpu_layers.h"
#include "gguf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct arena {
    uint32_t cap;
    unsigned char *k, *v; /* (cap, row) bytes: kv_dim floats or kv_dim INT8 codes; NULL for
                           * a device arena behind tier ops */
    uint32_t *free;       /* (cap) free slot stack */
    uint32_t n_free;
};

struct kvstore {
    uint32_t n_streams, max_len, kv_dim, dim;
    int int8;
    size_t row;               /* bytes of one token's K (or V) in a slot */
    struct arena *dev, *host; /* (n_streams) */
    int32_t *dev_slot;        /* (n_streams, max_len) */
    int32_t *host_slot;       /* (n_streams, max_len) */
    float *act;               /* (n_streams, max_len, dim) kept layer inputs */
    float *scratch;           /* (2, kv_dim) */
    float *rope_cos, *rope_sin; /* llm_rope_tables (max_len, head_dim / 2), one block; NULL
                                 * behind tier ops or without RoPE */
    uint32_t rope_half;       /* head_dim / 2 */
    /* INT8 only */
    uint32_t n_groups;        /* groups per stream */
    uint32_t *n_closed;       /* (n_streams) groups quantised so far */
    float *qk, *qv;           /* (n_streams, n_groups, 2, kv_dim): scale then zero */
    float *res_k, *res_v;     /* (n_streams, GROUP, kv_dim) the open group, exact */
    uint64_t offloads, loads, recomputes;
    uint64_t recompute_ns;    /* wall time in recomputation */
    const struct kv_tier_ops *ops; /* &tier when the device arena is behind ops, else NULL */
    struct kv_tier_ops tier;
};

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Every slot of a free, slot 0 on top of the stack. */
static void arena_free_all(struct arena *a)
{
    for (uint32_t i = 0; i < a->cap; i++)
        a->free[i] = a->cap - 1 - i;
    a->n_free = a->cap;
}

/* bytes: 0 for a device arena behind ops (slots only); ops: pinned host
 * memory from the tier, else malloc */
static int arena_init(struct arena *a, uint32_t cap, size_t row, int bytes,
                      const struct kv_tier_ops *ops)
{
    size_t n = (size_t)(cap ? cap : 1) * row;
    a->cap = cap;
    a->free = malloc((cap ? cap : 1) * sizeof(uint32_t));
    if (!a->free)
        return -1;
    if (bytes) {
        a->k = ops ? ops->host_alloc(ops->ctx, n) : malloc(n);
        a->v = ops ? ops->host_alloc(ops->ctx, n) : malloc(n);
        if (!a->k || !a->v)
            return -1;
        /* backed now, as a cudaMalloc'd or pinned arena is: no page is first
         * touched (and faulted in) inside a timed step */
        memset(a->k, 0, (size_t)cap * row);
        memset(a->v, 0, (size_t)cap * row);
    }
    arena_free_all(a);
    return 0;
}

static void arena_deinit(struct arena *a, const struct kv_tier_ops *ops)
{
    if (ops) {
        if (a->k)
            ops->host_free(ops->ctx, a->k);
        if (a->v)
            ops->host_free(ops->ctx, a->v);
    } else {
        free(a->k);
        free(a->v);
    }
    free(a->free);
}

void kvstore_free(struct kvstore *ks)
{
    if (!ks)
        return;
    for (uint32_t s = 0; s < ks->n_streams; s++) {
        if (ks->dev)
            arena_deinit(&ks->dev[s], NULL);
        if (ks->host)
            arena_deinit(&ks->host[s], ks->ops);
    }
    free(ks->dev);
    free(ks->host);
    free(ks->dev_slot);
    free(ks->host_slot);
    free(ks->act);
    free(ks->scratch);
    free(ks->rope_cos);
    free(ks->n_closed);
    free(ks->qk);
    free(ks->qv);
    free(ks->res_k);
    free(ks->res_v);
    free(ks);
}

/* Either kind: ops NULL (both arenas here) or the device arena behind ops. */
static int create(struct kvstore **out, const struct llm_config *c, uint32_t n_streams,
                  uint32_t max_len, uint32_t dev_cap, uint32_t host_cap, int int8,
                  const struct kv_tier_ops *ops, struct alisa_err *e)
{
    *out = NULL;
    struct kvstore *ks = calloc(1, sizeof *ks);
    if (!ks)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    if (ops) {
        ks->tier = *ops;
        ks->ops = &ks->tier;
    }
    ks->n_streams = n_streams;
    ks->max_len = max_len;
    ks->kv_dim = c->kv_dim;
    ks->dim = c->dim;
    ks->int8 = int8 != 0;
    ks->row = ops && ops->row_bytes ? ops->row_bytes
              : int8                ? c->kv_dim
                                    : c->kv_dim * sizeof(float);
    size_t tokens = (size_t)n_streams * max_len;
    ks->dev = calloc(n_streams, sizeof *ks->dev);
    ks->host = calloc(n_streams, sizeof *ks->host);
    ks->dev_slot = malloc(tokens * sizeof *ks->dev_slot);
    ks->host_slot = malloc(tokens * sizeof *ks->host_slot);
    ks->act = ops ? NULL : malloc(tokens * c->dim * sizeof *ks->act);
    ks->scratch = malloc(2 * (size_t)c->kv_dim * sizeof *ks->scratch);
    int bad = !ks->dev || !ks->host || !ks->dev_slot || !ks->host_slot || (!ops && !ks->act) ||
              !ks->scratch;
    ks->rope_half = c->head_dim / 2;
    if (!bad && !ops && llm_arch_info(c->arch)->positions == LLM_POS_ROPE) {
        size_t n = (size_t)max_len * ks->rope_half;
        bad = !(ks->rope_cos = malloc(2 * n * sizeof *ks->rope_cos));
        if (!bad) {
            ks->rope_sin = ks->rope_cos + n;
            llm_rope_tables(c, max_len, ks->rope_cos, ks->rope_sin);
        }
    }
    if (!bad && ks->int8) {
        ks->n_groups = (max_len + KVSTORE_INT8_GROUP - 1) / KVSTORE_INT8_GROUP;
        size_t params = (size_t)n_streams * ks->n_groups * 2 * c->kv_dim;
        size_t res = (size_t)n_streams * KVSTORE_INT8_GROUP * c->kv_dim;
        ks->n_closed = calloc(n_streams, sizeof *ks->n_closed);
        ks->qk = malloc(params * sizeof *ks->qk);
        ks->qv = malloc(params * sizeof *ks->qv);
        ks->res_k = malloc(res * sizeof *ks->res_k);
        ks->res_v = malloc(res * sizeof *ks->res_v);
        bad = !ks->n_closed || !ks->qk || !ks->qv || !ks->res_k || !ks->res_v;
    }
    for (uint32_t s = 0; !bad && s < n_streams; s++)
        bad = arena_init(&ks->dev[s], dev_cap, ks->row, !ops, NULL) ||
              arena_init(&ks->host[s], host_cap, ks->row, 1, ks->ops);
    if (bad) {
        kvstore_free(ks);
        return err_set(e, ALISA_ENOMEM, "out of memory for KV arenas of %u streams", n_streams);
    }
    for (size_t i = 0; i < tokens; i++)
        ks->dev_slot[i] = ks->host_slot[i] = -1;
    if (ks->act)
        memset(ks->act, 0, tokens * c->dim * sizeof *ks->act); /* backed now, as the arenas */
    *out = ks;
    return 0;
}

int kvstore_create(struct kvstore **out, const struct llm_config *c, uint32_t n_streams,
                   uint32_t max_len, uint32_t dev_cap, uint32_t host_cap, int int8,
                   struct alisa_err *e)
{
    return create(out, c, n_streams, max_len, dev_cap, host_cap, int8, NULL, e);
}

int kvstore_create_tiered(struct kvstore **out, const struct llm_config *c, uint32_t n_streams,
                          uint32_t max_len, uint32_t dev_cap, uint32_t host_cap,
                          const struct kv_tier_ops *ops, struct alisa_err *e)
{
    return create(out, c, n_streams, max_len, dev_cap, host_cap, 0, ops, e);
}

void kvstore_stream_reset(struct kvstore *ks, uint32_t stream)
{
    arena_free_all(&ks->dev[stream]);
    arena_free_all(&ks->host[stream]);
    for (size_t t = (size_t)stream * ks->max_len; t < (size_t)(stream + 1) * ks->max_len; t++)
        ks->dev_slot[t] = ks->host_slot[t] = -1;
    if (ks->int8)
        ks->n_closed[stream] = 0;
}

int32_t kvstore_dev_slot(const struct kvstore *ks, uint32_t stream, uint32_t t)
{
    return ks->dev_slot[(size_t)stream * ks->max_len + t];
}

int kvstore_host_row(const struct kvstore *ks, uint32_t stream, uint32_t t, const void **k,
                     const void **v)
{
    int32_t slot = ks->host_slot[(size_t)stream * ks->max_len + t];
    if (slot < 0)
        return -1;
    *k = ks->host[stream].k + (size_t)slot * ks->row;
    *v = ks->host[stream].v + (size_t)slot * ks->row;
    return 0;
}

static int take(struct arena *a)
{
    return a->n_free ? (int)a->free[--a->n_free] : -1;
}

static void give(struct arena *a, int32_t slot) { a->free[a->n_free++] = (uint32_t)slot; }

void kvstore_recompute(const struct llm_model *m, uint32_t layer, const float *act,
                       const float *cs, const float *sn, float *k, float *v)
{
    /* the activation blocks of one row, for quantised weights (the GGUF
     * loader bounds dim by 2^16; FP32 weights need none) */
    _Alignas(64) unsigned char scratch[(65536 / 32) * QMAT_SCRATCH_PER_BLOCK];
    ALISA_ASSERT(m->w.wk[layer].type == GGML_F32 || qmat_scratch_bytes(m->c.dim, 1) <= sizeof scratch);
    static const uint32_t row0 = 0; /* cs and sn are the position's own row */
    struct cpu_rows r = {.m = m, .pos = &row0, .rope_cos = cs, .rope_sin = sn, .scratch = scratch};
    r.buf[LB_REC_IN] = (float *)(uintptr_t)act; /* read only */
    r.buf[LB_REC_K] = k;
    r.buf[LB_REC_V] = v;
    layers_kv(&cpu_row_ops, &r, llm_arch_info(m->c.arch), layer, 1, LB_REC_IN, LB_REC_K, LB_REC_V,
              0); /* the CPU's row operations cannot fail */
}

/* Token t's row of the store's RoPE tables (NULL without RoPE). */
static void rope_row(const struct kvstore *ks, uint32_t t, const float **cs, const float **sn)
{
    size_t at = (size_t)t * ks->rope_half;
    *cs = ks->rope_cos ? ks->rope_cos + at : NULL;
    *sn = ks->rope_sin ? ks->rope_sin + at : NULL;
}

/* ---- INT8 ---- */

static float *group_params(const struct kvstore *ks, float *base, uint32_t s, uint32_t g)
{
    return base + ((size_t)s * ks->n_groups + g) * 2 * ks->kv_dim;
}

/* Channel-wise scale and zero point of n rows x (kv_dim) into p. */
void kvstore_quant_params(float *p, const float *x, uint32_t n, uint32_t kv)
{
    for (uint32_t c = 0; c < kv; c++) {
        float lo = x[c], hi = x[c];
        for (uint32_t r = 1; r < n; r++) {
            float y = x[(size_t)r * kv + c];
            lo = y < lo ? y : lo;
            hi = y > hi ? y : hi;
        }
        float scale = (hi - lo) / 255.0f;
        if (!(scale > 1e-30f)) /* a constant channel: put it at code 0 */
            scale = fmaxf(fabsf(lo), 1e-30f) / 255.0f;
        p[c] = scale;
        p[kv + c] = -roundf(lo / scale);
    }
}

void kvstore_quantise(unsigned char *q, const float *x, const float *p, uint32_t kv)
{
    for (uint32_t c = 0; c < kv; c++) {
        float y = roundf(x[c] / p[c]) + p[kv + c];
        /* a NaN (a non-finite activation, or a zero scale over zero) becomes
         * code 0: converting it to unsigned char is undefined behaviour */
        q[c] = (unsigned char)(!(y > 0.0f) ? 0.0f : y > 255.0f ? 255.0f : y);
    }
}

void kvstore_dequantise(float *x, const unsigned char *q, const float *p, uint32_t kv)
{
    for (uint32_t c = 0; c < kv; c++)
        x[c] = ((float)q[c] - p[kv + c]) * p[c];
}

static int closed(const struct kvstore *ks, uint32_t s, uint32_t t)
{
    return t / KVSTORE_INT8_GROUP < ks->n_closed[s];
}

/* Stores K, V of token t into slot bytes: FP32 as is; INT8 quantised with its
 * group's parameters when the group is closed (an open group's slot bytes
 * are written when it closes). */
static void store(const struct kvstore *ks, uint32_t s, uint32_t t, unsigned char *qk,
                  unsigned char *qv, const float *k, const float *v)
{
    if (!ks->int8) {
        memcpy(qk, k, ks->row);
        memcpy(qv, v, ks->row);
    } else if (closed(ks, s, t)) {
        uint32_t g = t / KVSTORE_INT8_GROUP;
        kvstore_quantise(qk, k, group_params(ks, ks->qk, s, g), ks->kv_dim);
        kvstore_quantise(qv, v, group_params(ks, ks->qv, s, g), ks->kv_dim);
    }
}

/* K, V of token t from slot bytes (or the open group's residual). */
static void load(const struct kvstore *ks, uint32_t s, uint32_t t, const unsigned char *qk,
                 const unsigned char *qv, float *k, float *v)
{
    uint32_t kv = ks->kv_dim, g = t / KVSTORE_INT8_GROUP;
    if (!ks->int8) {
        memcpy(k, qk, ks->row);
        memcpy(v, qv, ks->row);
    } else if (closed(ks, s, t)) {
        kvstore_dequantise(k, qk, group_params(ks, ks->qk, s, g), kv);
        kvstore_dequantise(v, qv, group_params(ks, ks->qv, s, g), kv);
    } else {
        size_t r = ((size_t)s * KVSTORE_INT8_GROUP + t % KVSTORE_INT8_GROUP) * kv;
        memcpy(k, ks->res_k + r, kv * sizeof(float));
        memcpy(v, ks->res_v + r, kv * sizeof(float));
    }
}

/* Token t (exact K, v) joins its stream's open group; the group's last token
 * closes it: parameters from the residual, every token quantised into the
 * slots it holds. */
static void int8_add(struct kvstore *ks, uint32_t s, uint32_t t, const float *k, const float *v)
{
    const uint32_t G = KVSTORE_INT8_GROUP, kv = ks->kv_dim, g = t / G;
    float *rk = ks->res_k + (size_t)s * G * kv, *rv = ks->res_v + (size_t)s * G * kv;
    memcpy(rk + (size_t)(t % G) * kv, k, kv * sizeof(float));
    memcpy(rv + (size_t)(t % G) * kv, v, kv * sizeof(float));
    if (t % G != G - 1)
        return;
    kvstore_quant_params(group_params(ks, ks->qk, s, g), rk, G, kv);
    kvstore_quant_params(group_params(ks, ks->qv, s, g), rv, G, kv);
    ks->n_closed[s] = g + 1;
    const int32_t *ds = ks->dev_slot + (size_t)s * ks->max_len;
    const int32_t *hs = ks->host_slot + (size_t)s * ks->max_len;
    for (uint32_t u = g * G; u <= t; u++) {
        const float *ku = rk + (size_t)(u % G) * kv, *vu = rv + (size_t)(u % G) * kv;
        if (ds[u] >= 0)
            store(ks, s, u, ks->dev[s].k + (size_t)ds[u] * ks->row,
                  ks->dev[s].v + (size_t)ds[u] * ks->row, ku, vu);
        if (hs[u] >= 0)
            store(ks, s, u, ks->host[s].k + (size_t)hs[u] * ks->row,
                  ks->host[s].v + (size_t)hs[u] * ks->row, ku, vu);
    }
}

/* kvstore_apply's recomputations of stream s at layer and step pos into
 * free device slots (or the slot a visiting token still holds). */
static int apply_recomputes(struct kvstore *ks, const struct place_result *r, uint32_t s,
                            const struct llm_model *m, uint32_t layer, uint32_t pos,
                            struct alisa_err *e)
{
    size_t row = ks->row;
    struct arena *dev = &ks->dev[s];
    int32_t *ds = ks->dev_slot + (size_t)s * ks->max_len;
    for (uint32_t i = 0; i < r->n_recompute; i++) {
        uint32_t t = r->recompute[i];
        int slot = ds[t] >= 0 ? ds[t] : take(dev);
        if (slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: no device slot to recompute %u", s,
                           pos, t);
        if (ks->ops) {
            ks->ops->recompute(ks->ops->ctx, s, layer, t, (uint32_t)slot);
            ds[t] = slot;
            ks->recomputes++;
            continue;
        }
        uint64_t t0 = mono_ns();
        float *rk = ks->scratch, *rv = ks->scratch + ks->kv_dim;
        const float *cs, *sn;
        rope_row(ks, t, &cs, &sn);
        kvstore_recompute(m, layer, ks->act + ((size_t)s * ks->max_len + t) * ks->dim, cs, sn, rk,
                          rv);
        store(ks, s, t, dev->k + (size_t)slot * row, dev->v + (size_t)slot * row, rk, rv);
        ks->recompute_ns += mono_ns() - t0;
        ds[t] = slot;
        ks->recomputes++;
    }
    return 0;
}

int kvstore_apply(struct kvstore *ks, const struct scheduler_plan *plan, const uint8_t *flags,
                  const struct llm_model *m, uint32_t layer, uint32_t pos, const float *k,
                  const float *v, const float *act, struct alisa_err *e)
{
    uint32_t s = plan->stream;
    size_t row = ks->row;
    struct arena *dev = &ks->dev[s], *host = &ks->host[s];
    int32_t *ds = ks->dev_slot + (size_t)s * ks->max_len, *hs = ks->host_slot + (size_t)s * ks->max_len;
    const struct place_result *r = &plan->place;
    uint32_t upto = pos + 1 < ks->max_len ? pos + 1 : ks->max_len;
    /* 1. host copies the scheduler deleted this step: their room may be what
     * the offloads below were given (a token loaded for this step and then
     * deleted keeps its copy until the load below has read it) */
    for (uint32_t t = 0; t < upto; t++)
        if (hs[t] >= 0 && !(flags[t] & (KV_CPU | KV_VISIT))) {
            give(host, hs[t]);
            hs[t] = -1;
        }
    /* 2. offloads, while the device copy still exists (a token offloaded and
     * deleted again within the step is not copied at all) */
    for (uint32_t i = 0; i < r->n_offload; i++) {
        uint32_t t = r->offload[i];
        if (!(flags[t] & KV_CPU) || hs[t] >= 0 || (t == pos && ds[t] < 0))
            continue; /* the last: a new token produced to the CPU, written through in 4. */
        int slot = take(host);
        if (ds[t] < 0 || slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: cannot offload token %u", s, pos, t);
        if (ks->ops) {
            ks->ops->offload(ks->ops->ctx, s, (uint32_t)ds[t], host->k + (size_t)slot * row,
                             host->v + (size_t)slot * row);
        } else {
            memcpy(host->k + (size_t)slot * row, dev->k + (size_t)ds[t] * row, row);
            memcpy(host->v + (size_t)slot * row, dev->v + (size_t)ds[t] * row, row);
        }
        hs[t] = slot;
        ks->offloads++;
    }
    /* then free the device copies the scheduler evicted (a token visiting
     * the GPU for this step only keeps its slot until the next step) */
    for (uint32_t t = 0; t < upto; t++)
        if (ds[t] >= 0 && !(flags[t] & (KV_GPU | KV_VISIT))) {
            give(dev, ds[t]);
            ds[t] = -1;
        }
    /* 3. loads and recomputations into free device slots */
    for (uint32_t i = 0; i < r->n_load; i++) {
        uint32_t t = r->load[i];
        int slot = ds[t] >= 0 ? ds[t] : take(dev); /* visiting again: its slot is still held */
        if (hs[t] < 0 || slot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: cannot load token %u", s, pos, t);
        if (ks->ops) {
            ks->ops->load(ks->ops->ctx, s, host->k + (size_t)hs[t] * row,
                          host->v + (size_t)hs[t] * row, (uint32_t)slot);
        } else {
            memcpy(dev->k + (size_t)slot * row, host->k + (size_t)hs[t] * row, row);
            memcpy(dev->v + (size_t)slot * row, host->v + (size_t)hs[t] * row, row);
        }
        ds[t] = slot;
        ks->loads++;
    }
    int rc = apply_recomputes(ks, r, s, m, layer, pos, e);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < r->n_load; i++) { /* loaded, then deleted */
        uint32_t t = r->load[i];
        if (hs[t] >= 0 && !(flags[t] & KV_CPU)) {
            give(host, hs[t]);
            hs[t] = -1;
        }
    }
    /* 4. the new token, computed on the device this step: kept there, or
     * there for this step only and written through to its host copy */
    if (pos < ks->max_len && (flags[pos] & (KV_GPU | KV_VISIT)) && ds[pos] < 0) {
        int through = (flags[pos] & KV_CPU) && hs[pos] < 0;
        if (through && ks->ops && !ks->ops->through)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: a new token produced straight to "
                           "the host arena is not built for these tier ops", s, pos);
        int slot = take(dev), hslot = through ? take(host) : 0;
        if (slot < 0 || hslot < 0)
            return err_set(e, ALISA_EINVAL, "stream %u step %u: no %s slot for the new token", s,
                           pos, slot < 0 ? "device" : "host");
        ds[pos] = slot;
        if (through) /* before an INT8 group closes: it writes every slot its tokens hold */
            hs[pos] = hslot;
        void *hk = through ? host->k + (size_t)hslot * row : NULL;
        void *hv = through ? host->v + (size_t)hslot * row : NULL;
        if (ks->ops) {
            ks->ops->store(ks->ops->ctx, s, pos, (uint32_t)slot, k, v, act);
            if (through)
                ks->ops->through(ks->ops->ctx, s, (uint32_t)slot, hk, hv);
        } else {
            memcpy(ks->act + ((size_t)s * ks->max_len + pos) * ks->dim, act,
                   ks->dim * sizeof(float));
            if (ks->int8)
                int8_add(ks, s, pos, k, v); /* may close the group, these slots included */
            store(ks, s, pos, dev->k + (size_t)slot * row, dev->v + (size_t)slot * row, k, v);
            if (through) {
                memcpy(hk, dev->k + (size_t)slot * row, row);
                memcpy(hv, dev->v + (size_t)slot * row, row);
            }
        }
        if (through)
            ks->offloads++;
    }
    return 0;
}

int kvstore_read(const struct kvstore *ks, uint32_t stream, uint32_t t, float *k, float *v)
{
    ALISA_ASSERT(!ks->ops);
    int32_t slot = ks->dev_slot[(size_t)stream * ks->max_len + t];
    if (slot < 0)
        return -1;
    const struct arena *a = &ks->dev[stream];
    load(ks, stream, t, a->k + (size_t)slot * ks->row, a->v + (size_t)slot * ks->row, k, v);
    return 0;
}

void kvstore_fetch(struct kvstore *ks, const struct llm_model *m, uint32_t stream, uint32_t layer,
                   uint32_t t, float *k, float *v)
{
    ALISA_ASSERT(!ks->ops);
    size_t i = (size_t)stream * ks->max_len + t;
    const struct arena *a = ks->dev_slot[i] >= 0 ? &ks->dev[stream] : &ks->host[stream];
    int32_t slot = ks->dev_slot[i] >= 0 ? ks->dev_slot[i] : ks->host_slot[i];
    if (slot >= 0) {
        load(ks, stream, t, a->k + (size_t)slot * ks->row, a->v + (size_t)slot * ks->row, k, v);
        return;
    }
    const float *cs, *sn;
    rope_row(ks, t, &cs, &sn);
    kvstore_recompute(m, layer, ks->act + i * ks->dim, cs, sn, k, v);
    if (ks->int8 && closed(ks, stream, t)) { /* what a stored copy would read back */
        unsigned char *qk = (unsigned char *)ks->scratch, *qv = qk + ks->kv_dim;
        store(ks, stream, t, qk, qv, k, v);
        load(ks, stream, t, qk, qv, k, v);
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
