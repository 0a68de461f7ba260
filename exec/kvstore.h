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

/* Applies the plan of stream `stream` for step pos, in this order: free the
 * host copies the scheduler's flags no longer hold; copy the offloaded
 * tokens to the host; free the device copies it no longer holds; load
 * (host -> device) and recompute
 * (from the kept layer input, with RoPE at the token's position) the tokens
 * that now need a device copy; store the new token pos (k, v: (kv_dim),
 * act: (dim)) when the plan produced it. layer selects the weights for
 * recomputation. Returns 0, or ALISA_EINVAL when a move is impossible (a
 * bug: the scheduler's invariants make room). */
int kvstore_apply(struct kvstore *ks, const struct scheduler_plan *plan, const uint8_t *flags,
                  const struct llm_model *m, uint32_t layer, uint32_t pos, const float *k,
                  const float *v, const float *act, struct alisa_err *e);

/* K and V of token t of a stream from its device copy into k and v,
 * (kv_dim) each, dequantised when INT8. Returns 0, or -1 when the token has
 * no device copy. */
int kvstore_read(const struct kvstore *ks, uint32_t stream, uint32_t t, float *k, float *v);

/* K and V of token t wherever they are (device, host, or recomputed from its
 * layer input, then stored precision applied) into k and v: for prefill, when
 * the whole prompt is in flight at once. */
void kvstore_fetch(struct kvstore *ks, const struct llm_model *m, uint32_t stream, uint32_t layer,
                   uint32_t t, float *k, float *v);

/* K and V (kv_dim each) of a token at position t of layer `layer` from its
 * layer input act (dim): the forward pass's projections (one GEMV each) and
 * RoPE at t. What a recomputation does. Cannot fail. */
void kvstore_recompute(const struct llm_model *m, uint32_t layer, const float *act, uint32_t t,
                       float *k, float *v);

/* Moves so far (all streams): tokens copied device->host, host->device,
 * recomputed. Cannot fail. */
void kvstore_counts(const struct kvstore *ks, uint64_t *offloads, uint64_t *loads,
                    uint64_t *recomputes);

/* Wall time spent recomputing so far, ns (the rest of kvstore_apply is
 * copies). Cannot fail. */
uint64_t kvstore_recompute_ns(const struct kvstore *ks);

#endif
