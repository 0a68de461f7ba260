/* Per-token cost terms (contract in costmodel.h). Units: bytes, ns; the
 * catalog gives GB/s (1e9 bytes/s) and TFLOP/s (1e12 FLOP/s).
 */
#include "costmodel.h"

#include <math.h>

#include <string.h>

const char *kv_precision_name(enum kv_precision p)
{
    return p == KV_INT8 ? "int8" : p == KV_FP32 ? "fp32" : p == KV_INT4 ? "int4" : "fp16";
}

uint64_t cost_kv_bytes(const struct kv_shape *k)
{
    if (k->precision == KV_INT4)
        return k->kv_dim + 2ull * ((k->kv_dim + KV_INT4_GROUP - 1) / KV_INT4_GROUP) * 4;
    return 2ull * k->kv_dim * (k->precision == KV_INT8 ? 1 : k->precision == KV_FP32 ? 4 : 2);
}

uint64_t cost_kv_fixed_bytes(const struct kv_shape *k)
{
    return k->precision == KV_INT8 ? 2ull * k->kv_dim * 2 * 2 : 0;
}

uint64_t cost_act_bytes(const struct kv_shape *k)
{
    return (k->precision == KV_FP32 ? 4ull : 2ull) * k->hidden;
}

double cost_load_ns(const struct kv_shape *k, const struct hw_profile *hw)
{
    return (double)cost_kv_bytes(k) / hw->link_gbps; /* bytes / (GB/s) = ns */
}

double cost_recompute_ns(const struct kv_shape *k, const struct hw_profile *hw)
{
    if (hw->recompute_ns > 0) /* measured on the executor: its input is already in memory */
        return hw->recompute_ns;
    double flops = 2.0 * 2.0 * k->hidden * k->kv_dim;
    return flops / (hw->fp16_tflops * 1e3) + (double)cost_act_bytes(k) / hw->link_gbps;
}

void cost_tiers(const struct tier_storage *s, const struct hw_profile *hw, uint64_t gpu_kv_bytes,
                uint64_t cpu_kv_bytes, uint64_t streams, struct place_params *pp)
{
    /* the layer input as kept: the executor holds FP16 only on a GPU (FP16
     * KV), the CPU's FP32 beside FP32 or INT8 KV; the paper's system FP16
     * unless the KV itself is FP32 */
    struct kv_shape act = s->kv;
    if (s->executor)
        act.precision = s->kv.precision == KV_FP16 ? KV_FP16 : KV_FP32;
    /* a unit: one KV head's K and V with their own channels' scales; its
     * share of the input every head of the token is recomputed from */
    const uint32_t heads = s->heads > 1 ? s->heads : 1;
    struct kv_shape unit = s->kv;
    unit.kv_dim /= heads;
    pp->kv_bytes = cost_kv_bytes(&unit);
    pp->act_bytes = cost_act_bytes(&act) / heads;
    pp->input_bytes = s->executor ? 0 : pp->act_bytes;
    uint64_t fixed = s->executor ? 0 : cost_kv_fixed_bytes(&unit);
    uint64_t g = gpu_kv_bytes / streams;
    pp->gpu_bytes = g > fixed ? g - fixed : 0;
    pp->cpu_bytes = cpu_kv_bytes / streams;
    pp->load_ns = cost_load_ns(&unit, hw);
    pp->recompute_ns = cost_recompute_ns(&act, hw) / heads;
}

struct kv_shape kv_shape_of(const struct model_shape *m, enum kv_precision precision)
{
    struct kv_shape k = {m->hidden, m->hidden / m->n_heads * m->n_kv_heads, precision};
    return k;
}

/* FLOP/ns and bytes/ns a profile reaches: its peaks times its efficiencies
 * (an efficiency of 0, as in a profile built in code, means 1). */
static double eff(double x) { return x > 0 ? x : 1.0; }
static double peak_flops_per_ns(const struct hw_profile *hw)
{
    return hw->fp16_tflops * 1e3 * eff(hw->gemm_efficiency);
}
static double hbm_bytes_per_ns(const struct hw_profile *hw)
{
    return hw->hbm_gbps * eff(hw->hbm_efficiency);
}

static double layer_params(const struct model_shape *m, const struct kv_shape *k)
{
    double h = m->hidden, kvd = k->kv_dim;
    /* Q and O (h x h), K and V (h x kvd), the FFN matrices */
    return 2 * h * h + 2 * h * kvd + (double)m->ffn_matrices * h * m->ffn;
}

/* ns per weight byte at `rows` rows from a measured table: linear between
 * points, the first point's below it, the last two points' line beyond. */
static double table_ns_per_byte(const struct gemm_table *t, double rows)
{
    if (t->n == 1 || rows <= t->rows[0])
        return t->ns_per_byte[0];
    uint32_t i = 1;
    while (i + 1 < t->n && rows > t->rows[i])
        i++;
    double x0 = t->rows[i - 1], x1 = t->rows[i], y0 = t->ns_per_byte[i - 1], y1 = t->ns_per_byte[i];
    if (rows > x1 && y1 < y0) /* never extrapolate a falling line */
        return y1;
    return y0 + (y1 - y0) * (rows - x0) / (x1 - x0);
}

/* Row r's value in a kernel table of whole rows 1, 2, 3, ... (k), or -1
 * when the table does not hold that row. */
static double kernel_at(const struct gemm_table *k, double r)
{
    uint32_t i = (uint32_t)r - 1;
    return r >= 1 && i < k->n && k->rows[i] == r ? k->ns_per_byte[i] : -1;
}

/* The kernel's departure at `rows` from its own straight line between the
 * two measured rows around it (those table_ns_per_byte interpolates
 * between), ns per byte: 0 at a measured row, beyond the measured rows, at
 * a fractional row, and where the kernel table lacks a row needed
 * (issue 49: the executor's kernels take rows in tiles, so the cost between
 * two calibrated batches is not a straight line). */
static double kernel_departure(const struct gemm_table *t, const struct gemm_table *k,
                               double rows)
{
    if (!k->n || t->n < 2 || rows <= t->rows[0] || rows > t->rows[t->n - 1] ||
        rows != floor(rows))
        return 0;
    uint32_t i = 1;
    while (rows > t->rows[i])
        i++;
    double x0 = t->rows[i - 1], x1 = t->rows[i];
    double k0 = kernel_at(k, x0), k1 = kernel_at(k, x1), kr = kernel_at(k, rows);
    if (k0 < 0 || k1 < 0 || kr < 0)
        return 0;
    return kr - (k0 + (k1 - k0) * (rows - x0) / (x1 - x0));
}

/* A weight GEMM for `batch` tokens: from the profile's measured table when
 * it has one (cost_gemm_ns_per_byte); else a roofline, every weight read once at the
 * profile's bytes per weight, where on a serial profile (one CPU) the
 * memory and arithmetic times add instead of overlapping. */
double cost_gemm_ns_per_byte(const struct gemm_table *t, const struct gemm_table *kernel,
                             double rows)
{
    double line = table_ns_per_byte(t, rows), per = line + kernel_departure(t, kernel, rows);
    return per > 0 ? per : line; /* a departure deeper than the line: the line */
}

static double gemm_table_ns(const struct hw_profile *hw, const struct gemm_table *t,
                            const struct gemm_table *kernel, double params, double tokens)
{
    return params * (hw->weight_bytes > 0 ? hw->weight_bytes : 2.0) *
           cost_gemm_ns_per_byte(t, kernel, tokens);
}

static double gemm_ns(const struct hw_profile *hw, double params, double tokens)
{
    if (hw->weight_gemm.n)
        return gemm_table_ns(hw, &hw->weight_gemm, &hw->weight_kernel, params, tokens);
    double flops_ns = 2.0 * tokens * params / peak_flops_per_ns(hw);
    double bytes_ns = params * (hw->weight_bytes > 0 ? hw->weight_bytes : 2.0) / hbm_bytes_per_ns(hw);
    if (hw->serial)
        return flops_ns + bytes_ns;
    return flops_ns > bytes_ns ? flops_ns : bytes_ns;
}

/* The output head's GEMM: its own measured table when the profile has one. */
static double head_ns(const struct hw_profile *hw, const struct model_shape *m, double tokens)
{
    double params = (double)m->vocab * m->hidden;
    return hw->head_gemm.n ? gemm_table_ns(hw, &hw->head_gemm, &hw->head_kernel, params, tokens)
                           : gemm_ns(hw, params, tokens);
}

/* Attention per attended token from the profile's table by the KV KiB the
 * step reads: linear in log2(KiB) between points (the caches between them
 * fill gradually), the end points' values beyond them. */
static double attn_table_ns(const struct gemm_table *t, double kib)
{
    if (t->n == 1 || kib <= t->rows[0])
        return t->ns_per_byte[0];
    for (uint32_t i = 1; i < t->n; i++)
        if (kib <= t->rows[i]) {
            double w = log2(kib / t->rows[i - 1]) / log2(t->rows[i] / t->rows[i - 1]);
            return t->ns_per_byte[i - 1] + w * (t->ns_per_byte[i] - t->ns_per_byte[i - 1]);
        }
    return t->ns_per_byte[t->n - 1];
}

/* A measured attended token's price from `table` by the KV (KiB over every
 * layer) that `keyed` tokens make, else the single measured figure; 0 when
 * the profile measured neither. */
static double measured_attn_ns(const struct model_shape *m, const struct hw_profile *hw,
                               const struct kv_shape *k, const struct gemm_table *table,
                               double keyed)
{
    if (table->n)
        return attn_table_ns(table, keyed * m->n_layers * (double)cost_kv_bytes(k) / 1024.0);
    return hw->attn_ns_per_token;
}

/* The device memory FlexGen's INT4 cache takes, beyond one read of its
 * packed bytes, to decompress `tokens` tokens' K and V into FP16 and read
 * them so for attention (0 for any other precision). */
static double int4_decompress_bytes(const struct kv_shape *k, double tokens)
{
    return k->precision == KV_INT4 ? tokens * 2.0 * k->kv_dim * (KV_INT4_DECOMPRESS_BYTES + 2)
                                   : 0;
}

/* The device memory a roofline decode step's attention over attended_total
 * tokens reads: the attended K and V (INT4: decompressed first), returned;
 * and, when sparse, into *gather the gather's second read and packed write
 * and the local sum's FP32 update per attended token and head (else 0).
 * Bytes. Both decode_attention_ns and cost_layer_hbm_bytes count so. */
static double attn_read_bytes(const struct model_shape *m, const struct kv_shape *k,
                              double attended_total, int sparse, double *gather)
{
    double kv_read = attended_total * (double)cost_kv_bytes(k);
    *gather = sparse ? 2.0 * kv_read + attended_total * m->n_heads * 4.0 * 2 : 0;
    return kv_read + int4_decompress_bytes(k, attended_total);
}

/* A decode step's attention in one layer for `batch` sequences attending
 * attended_total of resident_total tokens (cost_layer_compute_ns's). */
static double decode_attention_ns(const struct model_shape *m, const struct hw_profile *hw,
                                  const struct kv_shape *k, uint32_t batch, double attended_total,
                                  double resident_total, int sparse)
{
    /* measured on the executor, its gather included: by the KV (KiB over
     * every layer) a dense step reads, or a sparse one holds */
    const struct gemm_table *table = &hw->attn_by_kv;
    double keyed = attended_total;
    if (sparse && hw->attn_sparse_by_kv.n && resident_total > attended_total) {
        table = &hw->attn_sparse_by_kv;
        keyed = resident_total;
    }
    double fixed = hw->attn_ns_per_layer + batch * hw->attn_ns_fixed;
    if (table->n || hw->attn_ns_per_token > 0) /* measured on the executor, its gather included */
        return attended_total * measured_attn_ns(m, hw, k, table, keyed) + fixed;
    double gather, t = attn_read_bytes(m, k, attended_total, sparse, &gather) /
                       hbm_bytes_per_ns(hw);
    if (sparse)
        t += gather / hbm_bytes_per_ns(hw);
    return t;
}

double cost_layer_compute_ns(const struct model_shape *m, const struct hw_profile *hw,
                             uint32_t batch, double attended_total, double resident_total,
                             enum kv_precision precision, int sparse, int with_head)
{
    struct kv_shape k = kv_shape_of(m, precision);
    double t = gemm_ns(hw, layer_params(m, &k), batch);
    if (with_head)
        t += head_ns(hw, m, batch);
    return t + decode_attention_ns(m, hw, &k, batch, attended_total, resident_total, sparse);
}

void cost_layer_hbm_bytes(const struct model_shape *m, const struct hw_profile *hw,
                          double attended_total, enum kv_precision precision, int sparse,
                          int with_head, double *weights, double *kv)
{
    struct kv_shape k = kv_shape_of(m, precision);
    double per_weight = hw->weight_bytes > 0 ? hw->weight_bytes : 2.0;
    *weights = (layer_params(m, &k) + (with_head ? (double)m->vocab * m->hidden : 0)) * per_weight;
    double gather;
    *kv = attn_read_bytes(m, &k, attended_total, sparse, &gather) + gather;
}

/* InfiniGen's speculation (snu-comparch/InfiniGen, speedup/flexgen/
 * infinigen): kv_selection_controller.py speculate_attention runs p_q =
 * F.linear(hidden, p_w_q), p_w_q R of Wq's rows (FP16), then
 * torch.bmm(p_q, p_k_c) over the partial key cache (R of each token's key
 * channels, FP16), and over the scores (FP16, one a head and token): the
 * bmm's write, max's read, repeat's write of the threshold, where's reads
 * of both and of the ones_like and zeros_like it writes, its write, sum's
 * read and topk's: 12 passes of 2 bytes. flex_opt.py (OptLM's layer,
 * around prev_partial_cache_read_buf) extends the partial key cache each
 * step by torch.cat, reading and writing it whole. */
#define IG_SCORE_PASSES 12.0
/* Quest (mit-han-lab/Quest, quest/models/QuestAttention.py): decode_estimate
 * reads each page's metadata, its channels' max and min keys (FP16, kept in
 * a paged cache of their own, quest/utils/controller.py), and writes a
 * score a head and page (q's dtype, quest/utils/__init__.py), which
 * decode_topk reads. */

void cost_estimate_bytes(const struct model_shape *m, const struct sel_estimate *est,
                         double resident_total, double *weights, double *kv)
{
    /* what it keeps (cost_estimate_state_bytes) is what it reads: p_w_q
     * once; InfiniGen's partial keys three times (the bmm, torch.cat's read
     * and write), Quest's bounds once; then the scores */
    double per_token, scores = 0;
    cost_estimate_state_bytes(m, est, &per_token, weights);
    if (est->kind == SEL_ESTIMATE_PARTIAL) {
        per_token *= 3.0;
        scores = IG_SCORE_PASSES * 2.0 * m->n_heads;
    } else if (est->kind == SEL_ESTIMATE_PAGE_BOUNDS && est->page > 0) {
        scores = 2.0 * 2.0 * m->n_heads / est->page;
    }
    *kv = resident_total * (per_token + scores);
}

double cost_estimate_ns(const struct model_shape *m, const struct hw_profile *hw,
                        const struct sel_estimate *est, uint32_t batch, double resident_total)
{
    double w, kv;
    cost_estimate_bytes(m, est, resident_total, &w, &kv);
    double t = kv / hbm_bytes_per_ns(hw);
    if (w > 0) /* p_w_q's GEMM: R x hidden x hidden weights (2 bytes each) */
        t += gemm_ns(hw, w / 2.0, batch);
    return t;
}

void cost_estimate_state_bytes(const struct model_shape *m, const struct sel_estimate *est,
                               double *per_token, double *fixed)
{
    struct kv_shape k = kv_shape_of(m, KV_FP16);
    *per_token = *fixed = 0;
    if (est->kind == SEL_ESTIMATE_PARTIAL) {
        *per_token = est->ratio * k.kv_dim * 2.0;
        *fixed = est->ratio * m->hidden * (double)m->hidden * 2.0;
    } else if (est->kind == SEL_ESTIMATE_PAGE_BOUNDS && est->page > 0) {
        *per_token = 2.0 * k.kv_dim * 2.0 / est->page;
    }
}

double cost_estimate_gather_ns(const struct hw_profile *hw, const struct sel_estimate *est,
                               double bytes)
{
    /* select_kv: F.embedding over the CPU's K and V into the pinned
     * prefetch_kv buffer, on the host, before the copy is issued: each byte
     * read and written once, as the pageable relay's */
    return est->kind == SEL_ESTIMATE_PARTIAL ? cost_pageable_relay_ns(hw, bytes) : 0;
}

int cost_dense_cache_measured(const struct hw_profile *hw)
{
    return hw->dense_attn_ns_per_layer + hw->dense_attn_ns_per_row +
               hw->dense_attn_ns_per_prompt_pair + hw->dense_attn_ns_per_decode_token >
           0;
}

double cost_iteration_layer_ns(const struct model_shape *m, const struct hw_profile *hw,
                               const struct iteration_shape *it, enum kv_precision precision,
                               int sparse, int with_head)
{
    struct kv_shape k = kv_shape_of(m, precision);
    double t = gemm_ns(hw, layer_params(m, &k), it->rows);
    if (with_head && it->sampled > 0)
        t += head_ns(hw, m, it->sampled);
    if (it->dense_cache && cost_dense_cache_measured(hw)) {
        /* one row (a decode's, or a one-token prompt chunk's: its pairs are
         * the keys it attends) is attended on the calling thread, no
         * parallel region, as calibration measured a decoding sequence; so
         * are a call's rows one after another when they do less than the
         * profile's dense_attn_parallel_min multiply-adds (backend_cpu.c
         * dense_attend: cpu_rows_parallel under passive waits), each as a
         * one-row call */
        double keys = it->attended + it->prefill_pairs;
        if (hw->dense_attn_one_ns_per_layer + hw->dense_attn_one_ns_per_token > 0 &&
            (it->rows == 1 || keys * 2.0 * m->hidden < hw->dense_attn_parallel_min))
            return t + it->rows * hw->dense_attn_one_ns_per_layer +
                   keys * hw->dense_attn_one_ns_per_token;
        /* every row attends its sequence's keys in place, the rows across
         * the threads, as calibration measured (its points above the
         * profile's dense_attn_parallel_min) */
        return t + hw->dense_attn_ns_per_layer + it->rows * hw->dense_attn_ns_per_row +
               it->prefill_pairs * hw->dense_attn_ns_per_prompt_pair +
               it->attended * hw->dense_attn_ns_per_decode_token;
    }
    if (it->decodes > 0)
        t += decode_attention_ns(m, hw, &k, it->decodes, it->attended, it->resident, sparse);
    if (!(it->prefill_pairs > 0))
        return t;
    if (hw->attn_by_kv.n || hw->attn_ns_per_token > 0) {
        /* a profile measured on the executor: it attends a prompt row's keys
         * as a decode row's (backend_cpu.c, cpu_forward_rows: one attention
         * call a row), so each pair costs what a dense decode step's attended
         * token costs, by the KV the chunks read (each key once: a chunk's
         * rows share them), and each row its fixed part; as alisa sim prices
         * the executor's prefill (prefill_stepwise: one step a position) */
        uint32_t prompt_rows = it->rows > it->decodes ? it->rows - it->decodes : 0;
        double per = measured_attn_ns(m, hw, &k, &hw->attn_by_kv, it->prefill_keys);
        return t + it->prefill_pairs * per + prompt_rows * hw->attn_ns_fixed +
               (it->decodes > 0 ? 0 : hw->attn_ns_per_layer);
    }
    /* the prompt chunks' causal attention: QK^T and AV over each query's
     * keys, as cost_prefill_ns prices a prompt's */
    return t + 2.0 * 2.0 * it->prefill_pairs * m->hidden / peak_flops_per_ns(hw);
}

double cost_step_compute_ns(const struct model_shape *m, const struct hw_profile *hw,
                            uint32_t batch, double attended, double resident,
                            enum kv_precision precision, int sparse)
{
    double per_layer = cost_layer_compute_ns(m, hw, batch, attended * batch, resident * batch,
                                             precision, sparse, 0);
    return m->n_layers * per_layer +
           cost_layer_compute_ns(m, hw, batch, 0, 0, precision, 0, 1) -
           cost_layer_compute_ns(m, hw, batch, 0, 0, precision, 0, 0);
}

double cost_prefill_ns(const struct model_shape *m, const struct hw_profile *hw, uint32_t batch,
                       uint32_t prompt_len)
{
    struct kv_shape k = kv_shape_of(m, KV_FP16);
    double tokens = (double)batch * prompt_len;
    double t = m->n_layers * gemm_ns(hw, layer_params(m, &k), tokens) +
               head_ns(hw, m, batch);
    /* causal attention: QK^T and AV, half the square */
    double attn_flops = 2.0 * 2.0 * batch * (double)prompt_len * prompt_len / 2 * m->hidden *
                        m->n_layers;
    return t + attn_flops / peak_flops_per_ns(hw);
}

double cost_recompute_gpu_ns(const struct model_shape *m, const struct hw_profile *hw,
                             double tokens, enum kv_precision precision)
{
    if (tokens <= 0)
        return 0;
    struct kv_shape k = kv_shape_of(m, precision);
    if (hw->recompute_ns > 0)
        return tokens * hw->recompute_ns;
    return gemm_ns(hw, 2.0 * k.hidden * k.kv_dim, tokens);
}

int cost_executor_profile(const struct hw_profile *hw)
{
    return hw->attn_by_kv.n || hw->attn_sparse_by_kv.n || hw->attn_ns_per_token > 0;
}

double cost_prompt_fetch_ns(const struct model_shape *m, const struct hw_profile *hw, double host,
                            double dropped, enum kv_precision precision)
{
    struct kv_shape k = kv_shape_of(m, precision);
    const double copies = hw->serial && !hw->batched_copies ? 2 * host : host > 0;
    return cost_transfer_ns(hw, host * (double)cost_kv_bytes(&k), copies) +
           cost_recompute_gpu_ns(m, hw, dropped, precision);
}

double cost_prefill_peak_act_bytes(const struct model_shape *m, uint32_t tokens, uint32_t seqs)
{
    double h = m->hidden, kv = kv_shape_of(m, KV_FP16).kv_dim;
    double per_token = 3 * h + (h + 2 * kv) + (double)m->ffn * m->ffn_matrices;
    return 2.0 * tokens * per_token + 4.0 * seqs * m->vocab;
}

double cost_layer_weight_bytes(const struct model_shape *m)
{
    struct kv_shape k = kv_shape_of(m, KV_FP16);
    return layer_params(m, &k) * 2.0;
}

double cost_cpu_attention_ns(const struct hw_profile *hw, double kv_bytes)
{
    double traffic = hw->cpu_attn_traffic > 0 ? hw->cpu_attn_traffic : CPU_ATTN_TRAFFIC_CODE;
    return kv_bytes > 0 ? kv_bytes * traffic / hw->host_mem_gbps : 0;
}

double cost_layer_host_ns(const struct sw_profile *sw, const char *selection)
{
    if (!sw)
        return 0;
    double ops = sw->ops_per_layer;
    for (uint32_t i = 0; i < sw->selection_ops.n; i++)
        if (strcmp(sw->selection_ops.name[i], selection) == 0)
            ops += sw->selection_ops.value[i];
    return ops * sw->op_host_us * 1e3;
}

double cost_pageable_copy_ns(const struct hw_profile *hw, double bytes)
{
    if (bytes <= 0 || hw->pageable_gbps <= 0)
        return 0;
    const double gbps = hw->pageable_gbps < hw->link_gbps ? hw->pageable_gbps : hw->link_gbps;
    return hw->link_latency_us * 1e3 + bytes / gbps;
}

double cost_pageable_relay_ns(const struct hw_profile *hw, double bytes)
{
    return bytes > 0 ? 2.0 * bytes / hw->host_mem_gbps : 0;
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

/* The named table's value for name into *v: 0 when found or the table is
 * empty (*v 0), -1 when the table has entries but not name. */
static int named(const struct named_table *t, const char *name, double *v)
{
    *v = 0;
    for (uint32_t i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) {
            *v = t->value[i];
            return 0;
        }
    return t->n ? -1 : 0;
}

/* The three terms calibration fits (fit_three_terms) for a layer's
 * `streams` streams of `context` tokens: per layer + streams x (per stream
 * + context x per token); nothing without streams. */
static double layer_stream_token_ns(double streams, double context, double per_layer,
                                    double per_stream, double per_token)
{
    return streams > 0 ? per_layer + streams * (per_stream + context * per_token) : 0;
}

int cost_schedule_prices(const struct hw_profile *hw, const char *selection,
                         struct sched_prices *out, struct alisa_err *e)
{
    const struct {
        const struct named_table *t;
        const char *key;
        double *v;
    } tables[] = {{&hw->sched_layer_ns, "sched_ns_per_layer", &out->per_layer},
                  {&hw->sched_stream_ns, "sched_ns_per_stream", &out->per_stream},
                  {&hw->sched_ns, "sched_ns_per_token", &out->per_token},
                  {&hw->sched_retired_ns, "sched_ns_per_retired", &out->per_retired},
                  {&hw->sched_attended_ns, "sched_ns_per_attended", &out->per_attended}};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (named(tables[i].t, selection, tables[i].v))
            return err_set(e, ALISA_ENOTFOUND, "hardware profile %s: %s prices the scheduler "
                           "for %u selections but not for %s (calibrate with it: alisa "
                           "calibrate measures every selection)", hw->name, tables[i].key,
                           tables[i].t->n, selection);
    return 0;
}

double cost_schedule_ns(const struct sched_prices *p, double streams, double context,
                        double attended, double retired)
{
    return layer_stream_token_ns(streams, context, p->per_layer, p->per_stream, p->per_token) +
           (streams > 0 ? streams * attended * p->per_attended : 0) + retired * p->per_retired;
}

double cost_kvstore_ns(const struct hw_profile *hw, double streams, double context)
{
    return layer_stream_token_ns(streams, context, hw->kv_ns_per_layer, hw->kv_ns_per_stream,
                                 hw->kv_ns_per_token);
}
