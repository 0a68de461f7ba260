/* Per-token cost terms (contract in costmodel.h). Units: bytes, ns; the
 * catalog gives GB/s (1e9 bytes/s) and TFLOP/s (1e12 FLOP/s).
 */
#include "costmodel.h"

uint64_t cost_kv_bytes(const struct kv_shape *k)
{
    return 2ull * k->kv_dim * (k->precision == KV_INT8 ? 1 : 2);
}

uint64_t cost_kv_fixed_bytes(const struct kv_shape *k)
{
    return k->precision == KV_INT8 ? 2ull * k->kv_dim * 2 * 2 : 0;
}

uint64_t cost_act_bytes(const struct kv_shape *k) { return 2ull * k->hidden; }

double cost_load_ns(const struct kv_shape *k, const struct hw_profile *hw)
{
    return (double)cost_kv_bytes(k) / hw->link_gbps; /* bytes / (GB/s) = ns */
}

double cost_recompute_ns(const struct kv_shape *k, const struct hw_profile *hw)
{
    double flops = 2.0 * 2.0 * k->hidden * k->kv_dim;
    return flops / (hw->fp16_tflops * 1e3) + (double)cost_act_bytes(k) / hw->link_gbps;
}
