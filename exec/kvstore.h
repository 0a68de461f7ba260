/* The executor's token-level KV cache: for every (sequence, layer) stream, a
 * bounded device arena and a host arena of K/V slots, and every token's
 * layer input (the normalised activation) so a dropped token's K and V can be
 * recomputed exactly (our reading of the paper's phase III; ALISA.md 2).
 *
 * Owns the slots and the token -> slot maps; decides nothing: the scheduler
 * core's plan says what moves (kvstore_apply). On the CPU backend both
 * arenas are host memory, but they are separate allocations with separate
 * capacities, and every move is a real copy, so the CUDA backend can put the
 * device arena on the GPU without changing the moves.
 *
 * INT8 storage (ALISA.md 4): K and V are stored channel-wise asymmetric,
 * q = clamp(round(x / scale) + z, 0, 255), x' = (q - z) * scale, with
 * scale = (max - min) / 255 and z = -round(min / scale) per channel. A cache
 * grows one token at a time, so the channel ranges are taken per group of
 * KVSTORE_INT8_GROUP consecutive tokens of a stream: a group's tokens stay
 * exact (FP32, in a small per-stream residual) until its last token arrives,
 * then the group is quantised wherever its tokens lie (our decision, the
 * scheme of KIVI; the paper does not say how it handles a growing cache).
 * The slots then hold 1 byte per channel; the group parameters are kept
 * beside the maps.
 */
#ifndef ALISA_KVSTORE_H
#define ALISA_KVSTORE_H

#include <stdint.h>

#include "err.h"
#include "model.h"
#include "scheduler.h"

struct kvstore;

#define KVSTORE_INT8_GROUP 32u

/* Arenas for n_streams streams of up to max_len tokens; each stream's device
 * arena holds dev_cap tokens and its host arena host_cap; K and V in FP32,
 * or in INT8 when int8 is non-zero (a slot's bytes: cost_kv_bytes with
 * KV_FP32 or KV_INT8). */
int kvstore_create(struct kvstore **out, const struct llm_config *c, uint32_t n_streams,
                   uint32_t max_len, uint32_t dev_cap, uint32_t host_cap, int int8,
                   struct alisa_err *e);
void kvstore_free(struct kvstore *ks); /* accepts NULL */

/* Where the device arena's bytes live when they are not host memory (the
 * CUDA backend: STYLE.md's tier ops). The kvstore keeps the bookkeeping
 * (slots, token maps, free lists, the host arena's bytes) and calls these for
 * every access to a device slot; it keeps no layer inputs of its own then
 * (store receives them, recompute finds them). Calls may be queued until the
 * backend synchronises, but it must carry them out so that every offload
 * reads its slot before a load, recompute or store queued with it writes
 * one, every write-through (`through`) reads its slot after the store
 * queued before it, and finish writing the offloaded and written-through
 * host bytes before the next kvstore_apply. */
struct kv_tier_ops {
    void *ctx; /* the backend's, passed to every call */
    /* bytes of one token's K (or V) as the device arena stores it, and so
     * a host slot's: kv_dim * 2 for FP16 (the CUDA backend); 0 = FP32. The
     * kvstore only copies these bytes, never reads them */
    size_t row_bytes;
    /* host arena bytes (pinned memory); NULL when out of memory */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    /* device slot's K and V into host bytes hk, hv (a slot's row each) */
    void (*offload)(void *ctx, uint32_t stream, uint32_t dev_slot, void *hk, void *hv);
    /* host bytes hk, hv into the device slot */
    void (*load)(void *ctx, uint32_t stream, const void *hk, const void *hv, uint32_t dev_slot);
    /* token t's K and V recomputed from its layer input into the slot */
    void (*recompute)(void *ctx, uint32_t stream, uint32_t layer, uint32_t t, uint32_t dev_slot);
    /* the new token pos: k, v (kv_dim) into the slot, act (dim) kept; the
     * pointers are what the backend passed to kvstore_apply */
    void (*store)(void *ctx, uint32_t stream, uint32_t pos, uint32_t dev_slot, const float *k,
                  const float *v, const float *act);
    /* after the store queued just before it: that device slot's K and V
     * into host bytes hk, hv, written like an offload's by the next
     * kvstore_apply (a new token written through to its host copy:
     * flexgen-static's host sequences). NULL: not built, and a plan that
     * writes through fails */
    void (*through)(void *ctx, uint32_t stream, uint32_t dev_slot, void *hk, void *hv);
};

/* kvstore_create with the device arena behind ops (K and V in ops's
 * row_bytes; INT8 is not built for it). ops is copied. */
int kvstore_create_tiered(struct kvstore **out, const struct llm_config *c, uint32_t n_streams,
                          uint32_t max_len, uint32_t dev_cap, uint32_t host_cap,
                          const struct kv_tier_ops *ops, struct alisa_err *e);

/* Empties a stream for a new sequence (a serving slot's next request):
 * every slot of its arenas free, no token placed, INT8 groups open again.
 * Cannot fail. */
void kvstore_stream_reset(struct kvstore *ks, uint32_t stream);

/* The device slot of token t of a stream, -1 when it has no device copy.
 * Cannot fail. */
int32_t kvstore_dev_slot(const struct kvstore *ks, uint32_t stream, uint32_t t);

/* The host copy's K and V bytes of token t of a stream into *k, *v; returns
 * 0, or -1 when it has none. Cannot fail. */
int kvstore_host_row(const struct kvstore *ks, uint32_t stream, uint32_t t, const void **k,
                     const void **v);

/* Applies the plan of stream `stream` for step pos, in this order: free the
 * host copies the scheduler's flags no longer hold (but for tokens the
 * plan loads: after the load); copy the offloaded
 * tokens to the host; free the device copies it no longer holds (neither
 * KV_GPU nor KV_VISIT: a token visiting for one step keeps its slot until
 * the next); load (host -> device) and recompute
 * (from the kept layer input, with RoPE at the token's position) the tokens
 * that now need a device copy; store the new token pos (k, v: (kv_dim),
 * act: (dim)) when the plan produced it. layer selects the weights for
 * recomputation. Returns 0, or ALISA_EINVAL when a move is impossible (a
 * bug: the scheduler's invariants make room). */
int kvstore_apply(struct kvstore *ks, const struct scheduler_plan *plan, const uint8_t *flags,
                  const struct llm_model *m, uint32_t layer, uint32_t pos, const float *k,
                  const float *v, const float *act, struct alisa_err *e);

/* Not for a kvstore_create_tiered store (its device bytes are not here):
 * K and V of token t of a stream from its device copy into k and v,
 * (kv_dim) each, dequantised when INT8. Returns 0, or -1 when the token has
 * no device copy. */
int kvstore_read(const struct kvstore *ks, uint32_t stream, uint32_t t, float *k, float *v);

/* K and V of token t wherever they are (device, host, or recomputed from its
 * layer input, then stored precision applied) into k and v: for prefill, when
 * the whole prompt is in flight at once. */
void kvstore_fetch(struct kvstore *ks, const struct llm_model *m, uint32_t stream, uint32_t layer,
                   uint32_t t, float *k, float *v);

/* K and V (kv_dim each) of a token of layer `layer` from its layer input
 * act (dim): the forward pass's own step (layers_kv: the projections, one
 * GEMV each, their biases, RoPE), rotated by cs and sn, the token
 * position's row of llm_rope_tables (head_dim / 2 each; NULL for learned
 * positions). What a recomputation does. Cannot fail. */
void kvstore_recompute(const struct llm_model *m, uint32_t layer, const float *act,
                       const float *cs, const float *sn, float *k, float *v);

/* INT8 storage's arithmetic, exposed as the oracle of the CUDA kernels:
 * channel-wise scale and zero point of n rows x (kv) into p (2, kv); codes q
 * (kv) of one row x (a code that would be NaN is 0); one row x back from
 * its codes. Cannot fail. */
void kvstore_quant_params(float *p, const float *x, uint32_t n, uint32_t kv);
void kvstore_quantise(unsigned char *q, const float *x, const float *p, uint32_t kv);
void kvstore_dequantise(float *x, const unsigned char *q, const float *p, uint32_t kv);

/* Moves so far (all streams): tokens copied device->host, host->device,
 * recomputed. Cannot fail. */
void kvstore_counts(const struct kvstore *ks, uint64_t *offloads, uint64_t *loads,
                    uint64_t *recomputes);

/* Wall time spent recomputing so far, ns (the rest of kvstore_apply is
 * copies). Cannot fail. */
uint64_t kvstore_recompute_ns(const struct kvstore *ks);

#endif
