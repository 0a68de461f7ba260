/* The cost model's per-token terms (ALISA.md section 3), from a model shape
 * and a hardware profile: KV bytes per token, the marginal cost of loading a
 * token's KV over the CPU-GPU link, and of recomputing it on the GPU.
 *
 * Roofline figures from the catalog until calibration (issue 9) measures
 * them. The marginal recompute cost assumes the recomputed tokens ride along
 * with the step's own K/V projection (the weights are read once anyway).
 * The per-step terms are rooflines at the catalog's peaks times the
 * profile's gemm_efficiency and hbm_efficiency (1.0 in the shipped catalog,
 * measured by calibration later); none is tuned.
 */
#ifndef ALISA_COSTMODEL_H
#define ALISA_COSTMODEL_H

#include <stdint.h>

#include "catalog.h"
#include "placement.h"
#include "selection.h"

/* FP32 is what the CPU executor stores, for replaying its runs exactly.
 * INT4 is FlexGen's --compress-cache, simulated only (no executor stores
 * it): 4-bit values in groups of KV_INT4_GROUP channels along a head, each
 * group with an FP16 minimum and scale (flexllmgen/compression.py,
 * TorchCompressedDevice.allocate; flex_opt.py's CompressionConfig(num_bits=4,
 * group_size=64, group_dim=2) for the cache), decompressed on the GPU
 * before attention. */
enum kv_precision { KV_FP16 = 0, KV_INT8 = 1, KV_FP32 = 2, KV_INT4 = 3 };
#define KV_INT4_GROUP 64

/* The device memory traffic of decompressing one INT4 K or V value, bytes,
 * beyond reading its packed half byte once (cost_kv_bytes) and before
 * attention reads it as FP16: TorchCompressedDevice.decompress's PyTorch
 * passes over the packed bytes (a right shift and a mask, each reading 0.5
 * and writing 0.5, each result copied into half the FP16 values: read 0.5,
 * written 1) and over the FP16 values (div_ by the scale, add_ the minimum:
 * each read 2 and written 2): 13, less the one packed read. */
#define KV_INT4_DECOMPRESS_BYTES 12.5

/* "fp16", "int8", "fp32" or "int4". Cannot fail. */
const char *kv_precision_name(enum kv_precision p);

struct kv_shape {
    uint32_t hidden;      /* model width */
    uint32_t kv_dim;      /* n_kv_heads * head_dim */
    enum kv_precision precision;
};

/* K and V of one token in one layer: 2 * kv_dim * (2 bytes FP16, 1 INT8,
 * 4 FP32, 0.5 INT4) and, INT4, 4 bytes of minimum and scale a group of
 * KV_INT4_GROUP channels (kv_dim rounded up to whole groups; FlexGen pads
 * each head, so the simulator runs INT4 only on heads of whole groups).
 * Cannot fail. */
uint64_t cost_kv_bytes(const struct kv_shape *k);

/* Fixed per-stream bytes of INT8 KV: per-channel scale and zero point (FP16
 * each) for K and V; 0 for FP16. Cannot fail. */
uint64_t cost_kv_fixed_bytes(const struct kv_shape *k);

/* Bytes of one token's layer input (FP16 hidden state; FP32 with FP32 KV)
 * moved host->GPU to recompute its K and V. Cannot fail. */
uint64_t cost_act_bytes(const struct kv_shape *k);

/* How a run stores what its tiers hold: the one description the replay,
 * the simulator and the executor derive a stream's tiers from (issue 40:
 * four derivations drifted under INT8 KV). */
struct tier_storage {
    struct kv_shape kv; /* K and V as stored (precision included) */
    int executor;       /* 1: the executor's kvstore (exec/kvstore.c): a token's layer input
                           kept beside the host arena, never in the CPU tier; INT8 scales
                           beside the device arena, never in the GPU tier; inputs FP16 beside
                           FP16 KV (a GPU), else FP32. 0: the paper's system (section III-C):
                           a dropped token's input takes CPU-tier bytes, INT8's per-channel
                           scales take GPU-tier bytes, inputs FP32 only beside FP32 KV */
    uint32_t heads;     /* units a token's KV splits into, one stream each (a shell that runs
                           one stream per KV head: replay_config.per_head): each unit holds
                           one KV head's K and V (and scales) and a 1/heads share of the
                           token's layer input and of its recomputation; 0 or 1: the whole
                           token */
};

/* A stream's tiers and prices from the run's budgets (gpu_kv_bytes and
 * cpu_kv_bytes over all streams, split evenly among `streams`), per token
 * or, with s->heads, per (token, KV head) unit: sets
 * pp's kv_bytes, act_bytes, input_bytes, gpu_bytes, cpu_bytes, load_ns and
 * recompute_ns, leaving its other fields. streams > 0. Cannot fail. */
void cost_tiers(const struct tier_storage *s, const struct hw_profile *hw, uint64_t gpu_kv_bytes,
                uint64_t cpu_kv_bytes, uint64_t streams, struct place_params *pp);

/* Marginal ns to load one token's KV: bytes / link bandwidth. Cannot fail. */
double cost_load_ns(const struct kv_shape *k, const struct hw_profile *hw);

/* Marginal ns to recompute one token's K and V: its input over the link plus
 * 2 * 2 * hidden * kv_dim FLOPs at the FP16 tensor peak. Cannot fail. */
double cost_recompute_ns(const struct kv_shape *k, const struct hw_profile *hw);

/* The shape of a KV cache of model m at a precision. Cannot fail. */
struct kv_shape kv_shape_of(const struct model_shape *m, enum kv_precision precision);

/* Decode compute of one step for `batch` sequences attending `attended`
 * of `resident` tokens each, in every layer: the weight GEMMs as max(FLOPs
 * / peak, weight bytes / HBM bandwidth), plus attention, memory-bound over
 * the attended KV bytes, plus, when sparse, SWA's gather (the attended KV
 * read once more and written packed) and its local-sum update. ns. Cannot
 * fail. */
double cost_step_compute_ns(const struct model_shape *m, const struct hw_profile *hw,
                            uint32_t batch, double attended, double resident,
                            enum kv_precision precision, int sparse);

/* One layer of one decode step for `batch` sequences attending
 * `attended_total` tokens in all (summed over the batch) out of
 * `resident_total` on the device: the layer's weight GEMMs as a roofline,
 * attention memory-bound over the attended KV, SWA's overhead when sparse;
 * with_head adds the output head (the last layer). A profile's measured
 * attention prices a token from its dense table by the KV the step reads,
 * or, when the step is sparse and attends fewer tokens than are resident
 * (reads scattered over them), from its sparse table by the KV resident.
 * Summing it over the layers gives cost_step_compute_ns. ns. */
double cost_layer_compute_ns(const struct model_shape *m, const struct hw_profile *hw,
                             uint32_t batch, double attended_total, double resident_total,
                             enum kv_precision precision, int sparse, int with_head);

/* The device memory one layer of one decode step reads, by the roofline
 * cost_layer_compute_ns prices on a datasheet profile (issue 45, item 3:
 * bytes beside the time; a profile with measured tables prices time from
 * them, not from these bytes):
 * *weights the layer's weights once (the head's too when with_head) at the
 * profile's bytes per weight; *kv the attended K and V, and when sparse
 * the gather's second read, its packed write and the local sum's FP32
 * updates. attended_total is summed over the batch; a step computed once
 * per GPU batch reads the weights once per GPU batch (the caller
 * multiplies). Bytes. Cannot fail. */
void cost_layer_hbm_bytes(const struct model_shape *m, const struct hw_profile *hw,
                          double attended_total, enum kv_precision precision, int sparse,
                          int with_head, double *weights, double *kv);

/* A selection's estimate of the step's row (sel_estimate: Quest's page
 * bounds, InfiniGen's partial-channel speculation) as its own runtime runs
 * it on the GPU, in one selecting layer of one decode step for `batch`
 * sequences holding resident_total tokens in all (issue 45); EXACT costs
 * nothing (the upper bound a trace gives). Bytes, counted from each
 * method's code (costmodel.c names the lines):
 * *weights the partial query weights it reads (InfiniGen: R of Wq's
 * rows, its output channels); *kv what it reads and writes per resident token (InfiniGen:
 * the partial key cache read by the scoring bmm and copied whole by the
 * step's torch.cat, and the scores' passes; Quest: each page's min and max
 * keys and its per-head score). Cannot fail. */
void cost_estimate_bytes(const struct model_shape *m, const struct sel_estimate *est,
                         double resident_total, double *weights, double *kv);

/* The same estimate's device time: the partial query GEMM (the profile's
 * GEMM price for that many weights at `batch` rows) plus *kv at the
 * profile's HBM rate. ns. Cannot fail. */
double cost_estimate_ns(const struct model_shape *m, const struct hw_profile *hw,
                        const struct sel_estimate *est, uint32_t batch, double resident_total);

/* What the estimate keeps on the GPU in one selecting layer beside the KV:
 * *per_token bytes a held token adds (InfiniGen's partial key cache, Quest's
 * page bounds), *fixed the layer's partial query weights. Bytes. Cannot
 * fail. */
void cost_estimate_state_bytes(const struct model_shape *m, const struct sel_estimate *est,
                               double *per_token, double *fixed);

/* The host's gather of `bytes` of speculated K and V into the pinned
 * staging buffer before their copy, where the estimate's runtime gathers on
 * the host (InfiniGen: select_kv over the CPU's cache, flex_opt.py
 * prefetch_cache): each byte read and written once at host_mem_gbps; 0
 * for any other estimate. ns. Cannot fail. */
double cost_estimate_gather_ns(const struct hw_profile *hw, const struct sel_estimate *est,
                               double bytes);

/* Whether hw measured the executor's dense cache (dense_attn_ns_per_*):
 * then a dense-cache iteration is priced from those figures, with no
 * scheduler or arena bookkeeping (it has neither). */
int cost_dense_cache_measured(const struct hw_profile *hw);

/* One serving iteration (issue 46) in one layer: `rows` token rows through
 * the weight GEMMs (one per decoding request plus every prompt token of the
 * chunks scheduled), the decoding requests' attention (`decodes` requests
 * attending `attended` of `resident` tokens in all), the prompt chunks'
 * causal attention (prefill_pairs query-key pairs: a chunk of c tokens
 * after s computed ones has c s + c (c + 1) / 2; prefill_keys the distinct
 * keys they read, s + c), and the output head for the `sampled` requests
 * that produce a token. */
struct iteration_shape {
    uint32_t rows, decodes, sampled;
    double attended, resident, prefill_pairs, prefill_keys;
    int dense_cache; /* the executor's dense cache runs it (no scheduler) */
};

/* The iteration's layer priced as cost_layer_compute_ns prices a decode
 * step's (it is that function for an iteration of decodes alone, every
 * request sampled) plus the chunks' attention: on a profile whose attention
 * was measured on the executor, each query-key pair at the dense table's
 * price by the KV the chunks read (prefill_keys: a chunk's rows read the
 * same keys) and each prompt row at the per-row fixed price (the executor
 * attends a prompt row as a decode row); else the pairs' FLOPs at peak.
 * With dense_cache, on a profile that measured the dense cache
 * (dense_attn_ns_per_*: catalog.h), the whole iteration's attention is
 * that: per layer, per row, per prompt pair and per decode row's attended
 * token; an iteration of one row alone (a decode's, or a one-token prompt
 * chunk's), or of rows doing fewer multiply-adds (2 x hidden a query-key
 * pair) than the profile's dense_attn_parallel_min, where the profile
 * measured the one-row call (dense_attn_one_ns_*), per row and attended
 * key. ns. Cannot fail. */
double cost_iteration_layer_ns(const struct model_shape *m, const struct hw_profile *hw,
                               const struct iteration_shape *it, enum kv_precision precision,
                               int sparse, int with_head);

/* A weight GEMM's ns per weight byte at `rows` rows from a measured table
 * t (weight_gemm_ns_per_byte: in situ, at a few row counts): linear
 * between its rows, the first row's value below them, beyond them the
 * line through the last two unless it falls (then the last value); plus,
 * when `kernel` holds the same GEMMs timed alone at every whole row
 * (weight_kernel_ns_per_byte; n 0: none), the kernel's departure at `rows`
 * from its own straight line between the same two rows of t (issue 49: a
 * kernel that takes rows in tiles costs more at 7 rows than at 8). No
 * departure at t's rows, beyond them or at fractional rows; the line alone
 * if the sum would not be positive. Cannot fail. */
double cost_gemm_ns_per_byte(const struct gemm_table *t, const struct gemm_table *kernel,
                             double rows);

/* Prefill of `batch` prompts of `prompt_len` tokens: the weight GEMMs over
 * batch x prompt_len tokens as a roofline plus causal attention FLOPs. ns. */
double cost_prefill_ns(const struct model_shape *m, const struct hw_profile *hw, uint32_t batch,
                       uint32_t prompt_len);

/* Whether hw's attention was measured on the executor (its tables, or a
 * price per token): a profile alisa calibrate wrote, whose calibration
 * prices neither INT4 KV nor a selection's estimate. */
int cost_executor_profile(const struct hw_profile *hw);

/* What the executor's prompt rows read off the device (issue 49): a prompt
 * position fetches every earlier token where it lies (backend_cpu.c,
 * tiered_gather's prefill branch; kvstore_fetch), `host` tokens loaded from
 * the host arena (K and V a copy each on a serial profile, as a decode
 * step's moves are priced) and `dropped` ones recomputed from their kept
 * inputs; counts summed over positions and streams. ns. */
double cost_prompt_fetch_ns(const struct model_shape *m, const struct hw_profile *hw, double host,
                            double dropped, enum kv_precision precision);

/* The GPU part of recomputing `tokens` tokens' K and V in one layer (their
 * inputs' transfer is priced with the layer's loads): the executor's
 * measured price per token where the profile has one (recompute_ns), else
 * one GEMM of the tokens' layer inputs by W_k and W_v priced as every weight
 * GEMM here (the profile's measured table, or a roofline that reads the two
 * matrices once whatever the token count: a step recomputing a few tokens
 * pays for the weights it reads). 0 for no tokens. ns. */
double cost_recompute_gpu_ns(const struct model_shape *m, const struct hw_profile *hw,
                             double tokens, enum kv_precision precision);

/* Peak activation bytes (FP16, FP32 logits) of a prefill of `tokens` tokens
 * over `seqs` sequences, one layer at a time: the residual, the normalised
 * input and the attention output (3 x tokens x hidden), the fused QKV output
 * (tokens x (hidden + 2 x kv width)), the FFN's fused up projection and its
 * activation (tokens x ffn x ffn_matrices), and the sampler's logits (seqs x
 * vocab, FP32). Our estimate of what vLLM's profiling run peaks at
 * (vllm/worker/worker.py, Worker.determine_num_available_blocks), and of
 * what an eager PyTorch runtime's prefill of its GPU batch leaves held by
 * the caching allocator; not a measurement: allocator slack, cuBLAS
 * workspaces and the CUDA context are left out. Cannot fail. */
double cost_prefill_peak_act_bytes(const struct model_shape *m, uint32_t tokens, uint32_t seqs);

/* Weight bytes of one layer in FP16 (what DeepSpeed-style offloading streams
 * each step). Cannot fail. */
double cost_layer_weight_bytes(const struct model_shape *m);

/* Host-memory bytes FlexGen's CPU attention moves per byte of FP16 KV it
 * attends, counted from its code: every step it copies the CPU share of the
 * cache into an FP32 workspace (flexgen/flex_opt.py, SelfAttention.
 * load_cache, "Copy to CPU temporary workspace"; pytorch_backend.py,
 * TorchDevice.init_attention_compute_workspace allocates it in float32) and
 * attends that: 1 byte read, 2 written, 2 read again. A profile's
 * cpu_attn_traffic, measured, replaces it. */
#define CPU_ATTN_TRAFFIC_CODE 5.0

/* Attention computed by the CPU over `kv_bytes` of host-resident FP16 KV:
 * memory-bound at the host DRAM bandwidth, hw->cpu_attn_traffic host bytes
 * a KV byte (0: CPU_ATTN_TRAFFIC_CODE); the query and the partial result
 * that cross the link are a few KB and left out. ns. Cannot fail. */
double cost_cpu_attention_ns(const struct hw_profile *hw, double kv_bytes);

/* Host time one decoder layer's launches take each decode step under the
 * software sw running `selection`: (ops_per_layer + the selection's own
 * operations) x op_host_us. The GPU cannot finish the layer sooner, so a
 * layer lasts max(this, its GPU time). 0 for sw NULL. ns. Cannot fail. */
double cost_layer_host_ns(const struct sw_profile *sw, const char *selection);

/* A host-to-device copy of `bytes` from pageable memory at the profile's
 * measured pageable rate, capped by the link (0 where the profile has no
 * pageable_gbps: callers price such copies as pinned then). ns. Cannot
 * fail. */
double cost_pageable_copy_ns(const struct hw_profile *hw, double bytes);

/* The host staging `bytes` of pageable memory into pinned memory before a
 * copy to the GPU (FlexGen's general_copy: src.pin_memory(), then the copy):
 * read and written once at host_mem_gbps, before the DMA. ns. Cannot fail. */
double cost_pageable_relay_ns(const struct hw_profile *hw, double bytes);

/* Moving `bytes` over the CPU-GPU link in `copies` copies: per-copy latency
 * plus bytes / bandwidth (ALISA.md section 3: Tm = bytes / B). ns. */
double cost_transfer_ns(const struct hw_profile *hw, double bytes, double copies);

/* Recomputing `tokens` tokens' K and V in every layer of m, inputs moved
 * over the link. ns. Cannot fail. */
double cost_recompute_all_ns(const struct model_shape *m, const struct hw_profile *hw,
                             double tokens, enum kv_precision precision);

/* A selection policy's scheduler prices in a profile: its entries in the
 * four sched_* tables (a profile keys them by policy name, so a shell looks
 * them up once per run, not per step). A profile whose tables are all
 * empty prices no scheduler (0: a datasheet profile, where the host
 * schedules while the GPU computes); one that prices the scheduler must
 * price this selection in every table it fills (issue 40: a policy missing
 * from a calibrated profile was priced at 0 without a word). */
struct sched_prices {
    double per_layer;   /* sched_ns_per_layer: fixed ns per layer (the scheduler's shared state
                           brought back after the layer's other work) */
    double per_stream;  /* sched_ns_per_stream: ns per stream */
    double per_token;   /* sched_ns_per_token: ns per stream and context token */
    double per_retired; /* sched_ns_per_retired: ns per token a plan retires */
    double per_attended; /* sched_ns_per_attended: ns per stream and attended token */
};
/* Fills *out; ALISA_ENOTFOUND naming the profile, the key and the
 * selection when a table the profile fills lacks it. */
int cost_schedule_prices(const struct hw_profile *hw, const char *selection,
                         struct sched_prices *out, struct alisa_err *e);

/* The scheduler's own time for one layer's `streams` (sequence, layer)
 * streams deciding one step over `context` tokens each and attending
 * `attended` each (the mean), their plans retiring `retired` tokens in all:
 * per_layer + streams x (per_stream + context x per_token + attended x
 * per_attended) + retired x per_retired; 0 when the profile prices none (on
 * a GPU system the host schedules while the GPU computes). ns. Cannot
 * fail. */
double cost_schedule_ns(const struct sched_prices *p, double streams, double context,
                        double attended, double retired);

/* The KV arenas' bookkeeping for one layer's `streams` streams applying one
 * step's plan over `context` tokens each: streams x (kv_ns_per_stream +
 * context x kv_ns_per_token) + kv_ns_per_layer, the profile's (0 when it
 * has none of them). Part of the transfer time. ns. Cannot fail. */
double cost_kvstore_ns(const struct hw_profile *hw, double streams, double context);

#endif
