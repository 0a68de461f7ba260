/* The cost model's per-token terms (ALISA.md section 3), from a model shape
 * and a hardware profile: KV bytes per token, the marginal cost of loading a
 * token's KV over the CPU-GPU link, and of recomputing it on the GPU.
 *
 * Roofline figures from the catalog until calibration (issue 9) measures
 * them. The marginal recompute cost assumes the recomputed tokens ride along
 * with the step's own K/V projection (the weights are read once anyway).
 * The per-step time model and ALISA's alpha/beta/p1/p2 search are not here
 * yet.
 */
#ifndef ALISA_COSTMODEL_H
#define ALISA_COSTMODEL_H

#include <stdint.h>

#include "catalog.h"

enum kv_precision { KV_FP16 = 0, KV_INT8 = 1 };

struct kv_shape {
    uint32_t hidden;      /* model width */
    uint32_t kv_dim;      /* n_kv_heads * head_dim */
    enum kv_precision precision;
};

/* K and V of one token in one layer: 2 * kv_dim * (2 bytes FP16, 1 INT8).
 * Cannot fail. */
uint64_t cost_kv_bytes(const struct kv_shape *k);

/* Fixed per-stream bytes of INT8 KV: per-channel scale and zero point (FP16
 * each) for K and V; 0 for FP16. Cannot fail. */
uint64_t cost_kv_fixed_bytes(const struct kv_shape *k);

/* Bytes of one token's layer input (FP16 hidden state) moved host->GPU to
 * recompute its K and V. Cannot fail. */
uint64_t cost_act_bytes(const struct kv_shape *k);

/* Marginal ns to load one token's KV: bytes / link bandwidth. Cannot fail. */
double cost_load_ns(const struct kv_shape *k, const struct hw_profile *hw);

/* Marginal ns to recompute one token's K and V: its input over the link plus
 * 2 * 2 * hidden * kv_dim FLOPs at the FP16 tensor peak. Cannot fail. */
double cost_recompute_ns(const struct kv_shape *k, const struct hw_profile *hw);

#endif
