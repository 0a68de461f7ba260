/* Model-shape and hardware-profile catalogs (sim/model/catalog/ models.ini and
 * hardware.ini, parsed with inih).
 *
 * Owns the catalog entries and their validation; every figure's source is a
 * comment in the .ini file, not code. Checkpoint entries (a real model file
 * under the models directory) take their shape from the file's header; a
 * missing or bad file leaves the entry unavailable with a note, it does not
 * fail the load. Bad .ini content fails with file:line and what is wrong.
 */
#ifndef ALISA_CATALOG_H
#define ALISA_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "selection.h"

struct model_shape {
    char name[64];          /* section name, e.g. "OPT-30B" */
    char family[16];        /* opt | llama | pythia */
    uint32_t n_layers;      /* decoder blocks */
    uint32_t hidden;        /* model width */
    uint32_t n_heads;       /* query heads */
    uint32_t n_kv_heads;    /* key/value heads */
    uint32_t ffn;           /* FFN inner width */
    uint32_t ffn_matrices;  /* 2 (fc1, fc2) or 3 (SwiGLU) */
    uint32_t vocab;         /* vocabulary size */
    uint32_t tied_embeddings; /* 1 when the output head is the embedding */
    uint32_t max_seq;       /* maximum context, tokens */
    double params;          /* parameters */
    double weight_bytes_fp16; /* bytes of all weights in FP16 */
    char checkpoint[256];   /* file relative to the models dir, "" for shape-only */
    char format[16];        /* checkpoint format ("llama2c"), "" for shape-only */
    char tokenizer[256];    /* tokenizer file relative to the models dir, "" if none */
    char hf_id[96];         /* its Hugging Face id ("facebook/opt-30b"), "" if none: an alias */
    int available;          /* shape known (always for shape-only entries) */
    char note[512];         /* why a checkpoint entry is unavailable */
};

/* Measured weight-GEMM times: ns per weight byte at n row counts (rows
 * strictly increasing); between them linear, beyond the last the last two
 * points' line. Also the attention table, keyed by KiB (costmodel.c reads
 * it its own way). */
#define GEMM_TABLE_MAX 64
struct gemm_table {
    uint32_t n;
    double rows[GEMM_TABLE_MAX];
    double ns_per_byte[GEMM_TABLE_MAX];
};

/* Measured per-policy costs: NAME:VALUE pairs (sched_ns_per_token), room
 * for every selection in the registry twice over (issue 40: the cap was a
 * fixed 12 of 16 characters). */
#define NAMED_TABLE_MAX (2 * SELECTION_N)
struct named_table {
    uint32_t n;
    char name[NAMED_TABLE_MAX][SEL_NAME_MAX + 1];
    double value[NAMED_TABLE_MAX];
};

struct hw_profile {
    char name[64];          /* section name, e.g. "H100-80GB" */
    char gpu[64];           /* marketing name */
    double gpu_mem_gib;     /* device memory, GiB */
    double hbm_gbps;        /* device memory bandwidth, GB/s */
    double fp16_tflops;     /* dense FP16 tensor throughput, TFLOP/s */
    double host_dram_gib;   /* host memory for the CPU tier, GiB */
    double link_gbps;       /* CPU<->GPU bandwidth per direction, GB/s */
    double link_latency_us; /* fixed cost per copy, microseconds */
    double host_mem_gbps;   /* host DRAM bandwidth for CPU-side attention, GB/s */
    double gemm_efficiency; /* share of fp16_tflops a GEMM reaches, (0, 1] */
    double hbm_efficiency;  /* share of hbm_gbps a memory-bound kernel reaches, (0, 1] */
    double pageable_gbps;   /* optional: host-to-device copies from pageable memory, GB/s,
                               measured (build/host_link); 0: not measured, such copies
                               priced as pinned ones */
    double cpu_attn_traffic; /* optional: host bytes at host_mem_gbps that CPU attention
                                costs per FP16 KV byte attended, measured (experiments/
                                bench/cpu_attention.py); 0: CPU_ATTN_TRAFFIC_CODE */
    /* Optional keys, for profiles of alisa's executor (alisa calibrate, CPU or CUDA): */
    uint32_t serial;        /* 1: one processor runs compute, copies and recomputation in
                               turn (the executor waits for its copies), K and V copied
                               token by token unless batched_copies, and a weight GEMM's
                               memory and arithmetic times add; 0: GPU */
    uint32_t batched_copies; /* with serial: 1, a layer's moves go as one copy each way
                                (the CUDA executor gathers them); 0, two copies a token */
    double weight_bytes;    /* bytes per weight as the executor stores them (0: 2, FP16) */
    double attn_ns_per_token; /* attention per attended token per sequence and layer, ns
                                 (0: memory-bound over the KV bytes at hbm_gbps) */
    double attn_ns_fixed;   /* attention's fixed cost per sequence and layer, ns */
    double attn_ns_per_layer; /* ... and per layer and step whatever the batch (a GPU's
                                 kernel launches), ns */
    struct gemm_table attn_by_kv; /* attn_ns_per_token_by_kv = KIB:NS ...: attention per
                                     attended token, sequence and layer by the KV KiB a
                                     decode step reads in all (every layer and sequence):
                                     past the caches it costs more; n 0: attn_ns_per_token */
    struct gemm_table attn_sparse_by_kv; /* attn_sparse_ns_per_token_by_kv = KIB:NS ...: the
                                            same for a sparse step (a subset of the resident
                                            tokens attended, read scattered) by the KV KiB
                                            resident; n 0: as attn_by_kv */
    struct gemm_table weight_gemm; /* weight_gemm_ns_per_byte = ROWS:NS ...: the layers'
                                      weight GEMMs; n 0: roofline */
    struct gemm_table head_gemm;   /* head_gemm_ns_per_byte: the output head's (its own
                                      shape); n 0: as weight_gemm */
    struct gemm_table weight_kernel; /* weight_kernel_ns_per_byte = ROWS:NS ...: the layers'
                                        weight GEMMs alone at rows 1, 2, 3, ...: the kernel's
                                        shape between weight_gemm's rows (costmodel.h); n 0:
                                        straight lines between them */
    struct gemm_table head_kernel;   /* head_kernel_ns_per_byte: the same for the head's
                                        (with head_gemm) */
    struct named_table sched_ns; /* sched_ns_per_token = SELECTION:NS ...: the scheduler's
                                    own time per stream, step and context token, on the
                                    executor's processor (serial profiles) */
    struct named_table sched_layer_ns; /* sched_ns_per_layer = SELECTION:NS ...: its fixed
                                          time per layer and step */
    struct named_table sched_stream_ns; /* sched_ns_per_stream = SELECTION:NS ...: its fixed
                                           time per stream and step */
    struct named_table sched_retired_ns; /* sched_ns_per_retired = SELECTION:NS ...: its time
                                            per token a plan retires (a bulk eviction) */
    struct named_table sched_attended_ns; /* sched_ns_per_attended = SELECTION:NS ...: its
                                             time per stream, step and attended token
                                             (observing the row); none: 0 */
    double recompute_ns;    /* K and V of one token of one layer, ns (0: FLOPs at the
                               compute peak) */
    double kv_ns_per_token; /* the KV arenas' bookkeeping per stream, step and context
                               token (the plan applied: freed copies found, the new
                               token stored), ns; 0: not priced */
    double kv_ns_per_stream; /* ... its time per stream and step, ns */
    double kv_ns_per_layer; /* ... and its fixed time per layer and step, ns */
    double weight_probe_gbps; /* the one-row weight pass alisa validate samples the machine
                                 with, as calibration measured it, GB/s (0: not measured;
                                 validate then derives it from the weight tables) */
    double weight_probe_spread; /* its spread over the calibration's runs, (max - min) / mean:
                                   the profile's noise (0: not recorded) */
    /* the executor's dense cache (no scheduler: backend_cpu.c dense_attend,
     * rows across the threads, no gather), which the attn_* figures above
     * (the scheduler's path) do not describe: attention per layer and call =
     * dense_attn_ns_per_layer + rows x dense_attn_ns_per_row + prompt pairs x
     * dense_attn_ns_per_prompt_pair + decode rows' attended tokens x
     * dense_attn_ns_per_decode_token, ns (all 0: not measured; the dense
     * cache is then priced as the scheduler's path); a call whose rows do
     * less than dense_attn_parallel_min multiply-adds (2 x hidden a query-key
     * pair) runs its rows one after another on the calling thread, as a
     * one-row call does (exec/cpu_ops.h cpu_rows_parallel under passive
     * waits; 0: every call of two rows or more takes the terms above) */
    double dense_attn_ns_per_layer, dense_attn_ns_per_row, dense_attn_ns_per_prompt_pair,
        dense_attn_ns_per_decode_token;
    /* ... and of a call with one row (one sequence decoding), which the
     * executor attends on the calling thread without the parallel region:
     * dense_attn_one_ns_per_layer + attended tokens x
     * dense_attn_one_ns_per_token, ns, each row of a call below
     * dense_attn_parallel_min likewise (both 0: not measured; the terms
     * above then price them too) */
    double dense_attn_one_ns_per_layer, dense_attn_one_ns_per_token;
    double dense_attn_parallel_min;
};

/* The host-side costs of the software a system runs on (software.ini): what
 * the framework spends on the CPU to launch a decoder layer's GPU work each
 * decode step, and how it moves host memory. Every figure's source is a
 * comment in the .ini file. */
struct sw_profile {
    char name[64];            /* section name, e.g. "flexgen" */
    double op_host_us;        /* host time to dispatch one GPU operation, microseconds */
    uint32_t ops_per_layer;   /* GPU operations one decoder layer launches per decode step */
    struct named_table selection_ops; /* selection_ops_per_layer = SELECTION:N ...: the
                                         selection's own operations per layer (SWA's local
                                         sum, top-k, gathers) */
    uint32_t pageable_relay;  /* 1: host-resident KV lives in pageable memory and each
                                 copy to the GPU is first staged into pinned memory by
                                 the host (FlexGen's general_copy) */
};

struct catalog {
    struct model_shape *models; /* (n_models), owned */
    size_t n_models;
    struct hw_profile *hw;      /* (n_hw), owned */
    size_t n_hw;
    struct sw_profile *sw;      /* (n_sw), owned */
    size_t n_sw;
};

/* Directory of models.ini and hardware.ini: $ALISA_CATALOG, else the
 * sim/model/catalog directory of the source tree. Cannot fail. */
const char *catalog_default_dir(void);

/* The longest line inih reads whole (its INI_MAX_LINE, 200 bytes with the
 * newline and the terminator): a longer one is split and its tail parsed as
 * a line of its own, so every INI we read is checked first. */
#define INI_LINE_MAX 198

/* Returns 0, or ALISA_EINVAL naming the first line of path longer than
 * INI_LINE_MAX characters (ALISA_EIO when it cannot be read). */
int ini_check_lines(const char *path, struct alisa_err *e);

/* Directory of the real model files: $ALISA_MODELS, else ../shared/models
 * beside the source tree. Cannot fail. */
const char *catalog_models_dir(void);

/* Loads dir/models.ini, dir/hardware.ini and dir/software.ini into c (zeroed
 * by the call); a directory without software.ini has no software profiles.
 * models_dir resolves checkpoint entries. On failure c is left empty and e
 * says "file:line: what". */
int catalog_load(struct catalog *c, const char *dir, const char *models_dir, struct alisa_err *e);

/* The single-file loaders catalog_load() uses; each appends to c. */
int catalog_load_models(struct catalog *c, const char *path, const char *models_dir,
                        struct alisa_err *e);
int catalog_load_hardware(struct catalog *c, const char *path, struct alisa_err *e);
int catalog_load_software(struct catalog *c, const char *path, struct alisa_err *e);

/* Look-ups by name: the exact name first, then in any case, and for models
 * their Hugging Face id (hf_id, any case) as an alias. NULL when none.
 * Cannot fail. */
const struct model_shape *catalog_model(const struct catalog *c, const char *name);
const struct hw_profile *catalog_hw(const struct catalog *c, const char *name);
const struct sw_profile *catalog_sw(const struct catalog *c, const char *name);

/* ALISA_ENOTFOUND into e for a name the look-ups did not find, given as
 * option opt: "--model opt-3b: not in the catalog; did you mean
 * 'OPT-13B'? (alisa catalog models lists them)", the nearest name (edit
 * distance, any case, aliases too) suggested when it is close. */
int catalog_model_not_found(const struct catalog *c, const char *opt, const char *name,
                            struct alisa_err *e);
int catalog_hw_not_found(const struct catalog *c, const char *opt, const char *name,
                         struct alisa_err *e);
int catalog_sw_not_found(const struct catalog *c, const char *opt, const char *name,
                         struct alisa_err *e);

/* Parameter count implied by a shape: attention projections, FFN matrices and
 * embeddings (head untied or tied); biases, norms and position tables are
 * left out, so it is a slight underestimate. Cannot fail. */
double catalog_param_estimate(const struct model_shape *m);

/* KV-cache bytes per token in FP16 for the whole model: K and V, every layer,
 * n_kv_heads * head_dim values each. Cannot fail. */
double catalog_kv_bytes_per_token(const struct model_shape *m);

/* Frees the entries; c may be zeroed or half-loaded. */
void catalog_deinit(struct catalog *c);

#endif
