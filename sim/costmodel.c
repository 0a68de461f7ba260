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

struct kv_shape kv_shape_of(const struct model_shape *m, enum kv_precision precision)
{
    struct kv_shape k = {m->hidden, m->hidden / m->n_heads * m->n_kv_heads, precision};
    return k;
}

/* FLOP/s and bytes/ns of a profile at its peaks. */
static double peak_flops_per_ns(const struct hw_profile *hw) { return hw->fp16_tflops * 1e3; }
static double hbm_bytes_per_ns(const struct hw_profile *hw) { return hw->hbm_gbps; }

double cost_step_compute_ns(const struct model_shape *m, const struct hw_profile *hw,
                            uint32_t batch, double attended, enum kv_precision precision,
                            int sparse)
{
    struct kv_shape k = kv_shape_of(m, precision);
    double h = m->hidden, kvd = k.kv_dim, L = m->n_layers;
    /* Weight GEMMs of one decode step: Q and O (h x h), K and V (h x kvd), the
     * FFN matrices, the output head. Every weight is read once per step. */
    double layer_params = 2 * h * h + 2 * h * kvd + (double)m->ffn_matrices * h * m->ffn;
    double params = L * layer_params + (double)m->vocab * h;
    double gemm_flops = 2.0 * batch * params;
    double gemm_ns = gemm_flops / peak_flops_per_ns(hw);
    double weight_ns = params * 2.0 / hbm_bytes_per_ns(hw);
    double gemm = gemm_ns > weight_ns ? gemm_ns : weight_ns;
    /* Attention: read the attended K and V of every layer. */
    double kv_read = (double)batch * L * attended * (double)cost_kv_bytes(&k);
    double attn = kv_read / hbm_bytes_per_ns(hw);
    if (sparse) {
        /* gather: read again and write packed; local sum: one fp32 update per
         * attended token and head */
        double sum_bytes = (double)batch * L * attended * m->n_heads * 4.0 * 2;
        attn += (2.0 * kv_read + sum_bytes) / hbm_bytes_per_ns(hw);
    }
    return gemm + attn;
}

double cost_transfer_ns(const struct hw_profile *hw, double bytes, double copies)
{
    if (bytes <= 0)
        return 0;
    return copies * hw->link_latency_us * 1e3 + bytes / hw->link_gbps;
}

double cost_recompute_all_ns(const struct model_shape *m, const struct hw_profile *hw,
                             double tokens, enum kv_precision precision)
{
    if (tokens <= 0)
        return 0;
    struct kv_shape k = kv_shape_of(m, precision);
    return tokens * m->n_layers * cost_recompute_ns(&k, hw);
}
