/* A decoder-only model in memory, of the LLaMA family (RMSNorm, RoPE,
 * SwiGLU; Qwen2 adds biases on q, k and v) or OPT (LayerNorm with bias,
 * learned positions offset by 2, ReLU MLP, biases on every projection),
 * each described as data (llm_arch_info): configuration and weights, loaded from
 * a llama2.c version-0 checkpoint, a GGUF file (dequantised at load, or kept
 * quantised in the file's mapping) or a Hugging Face safetensors checkpoint
 * with its config.json.
 *
 * Owns one FP32 allocation carved into named tensors, the per-layer qmats,
 * and for native GGUF weights the file's mapping; row-major [out][in]
 * matrices as llama2.c stores them. Validates the file
 * against its header (llama2c.h) before reading a byte of weights.
 */
#ifndef ALISA_MODEL_H
#define ALISA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "err.h"
#include "qmat.h"

struct gguf;

enum llm_arch { LLM_ARCH_LLAMA, LLM_ARCH_OPT, LLM_ARCH_QWEN2, LLM_ARCH_MISTRAL };

/* An architecture as data: everything the layer sequence (layers.h) and the
 * backends read of it; nothing outside model.c tests which architecture a
 * model is (tests/layering_test.sh). Tied embeddings (llm_weights.wcls)
 * and a sliding window (llm_config.window) are a checkpoint's choice, not
 * an architecture's. */
enum llm_norm_kind { LLM_NORM_RMS, LLM_NORM_LAYER };  /* RMSNorm; LayerNorm with a bias */
enum llm_pos_kind { LLM_POS_ROPE, LLM_POS_LEARNED };  /* q and k rotated; a row added to the input */
enum llm_act_kind { LLM_ACT_SWIGLU, LLM_ACT_RELU };   /* gated w1, w3 then w2; fc1, ReLU, fc2 */
struct llm_arch_info {
    const char *name;            /* "llama", "opt", "qwen2", "mistral" */
    enum llm_norm_kind norm;
    enum llm_pos_kind positions;
    uint32_t pos_offset;         /* learned positions: token at pos reads row pos + offset */
    int qkv_bias;                /* the q, k and v projections carry biases */
    int out_bias;                /* the attention's output projection carries one */
    int ffn_bias;                /* both FFN matrices carry biases (ReLU requires them: it
                                  * is applied with fc1's, test_layers) */
    enum llm_act_kind act;
};

/* The description of architecture a (never NULL; cannot fail). LLaMA:
 * llama2.c's forward; OPT: Hugging Face's modeling_opt.py (OPTDecoderLayer
 * with do_layer_norm_before, OPTLearnedPositionalEmbedding's offset of 2);
 * Qwen2: modeling_qwen2.py (LLaMA's layer with biases on q, k and v only,
 * Qwen2Attention's q_proj/k_proj/v_proj bias=True, o_proj bias=False);
 * Mistral: modeling_mistral.py (LLaMA's layer; its sliding window is the
 * checkpoint's, llm_config.window). */
const struct llm_arch_info *llm_arch_info(enum llm_arch a);

struct llm_config {
    enum llm_arch arch;
    uint32_t dim;         /* model width */
    uint32_t hidden_dim;  /* FFN inner width */
    uint32_t n_layers;
    uint32_t n_heads;     /* query heads */
    uint32_t n_kv_heads;  /* key/value heads */
    uint32_t vocab;
    uint32_t seq_len;     /* maximum context */
    uint32_t head_dim;    /* dim / n_heads */
    uint32_t kv_dim;      /* head_dim * n_kv_heads */
    float rope_theta;     /* 10000 for llama2.c checkpoints (LLaMA only) */
    float norm_eps;       /* RMSNorm / LayerNorm epsilon, 1e-5 for llama2.c and OPT */
    uint32_t window;      /* sliding window: a query at position p attends only
                           * positions p - window + 1 .. p (Mistral's sliding_window,
                           * HF's mask kv_idx > q_idx - window); 0: every earlier one */
};

/* The largest shape a model may have (llm_config_validate). With these,
 * every weight count and buffer the loaders and backends size from a
 * config stays far inside size_t: the largest matrix family, 3 L hd d
 * floats, is 3 x 2^10 x 2^24 x 2^16 = 3 x 2^50. */
#define LLM_MAX_DIM (1u << 16)
#define LLM_MAX_HEADS 1024u
#define LLM_MAX_LAYERS 1024u
#define LLM_MAX_HIDDEN (1u << 24)
#define LLM_MAX_VOCAB (1u << 24)
#define LLM_MAX_SEQ (1u << 24)

/* Checks c's shape against what the forward pass assumes, and derives
 * head_dim and kv_dim from it: every size from 1 to its LLM_MAX_ bound
 * (kv heads to LLM_MAX_HEADS), the heads dividing dim into heads of an even
 * size of at least 2 (RoPE rotates pairs within a head, from tables of
 * head_dim / 2 angles), the kv heads dividing the heads, a LLaMA's rope
 * theta positive and finite, the norm epsilon finite and not negative.
 * Every loader calls it before allocating anything for the model. Returns
 * 0, or ALISA_ECORRUPT with e naming path, the size and its value; c's
 * other fields are not changed. */
int llm_config_validate(struct llm_config *c, const char *path, struct alisa_err *e);

/* The first position a query attends among its n = pos + 1 (a sliding
 * window's start; 0 without one). Cannot fail. */
static inline uint32_t llm_attend_first(const struct llm_config *c, uint32_t n)
{
    return c->window && n > c->window ? n - c->window : 0;
}

/* RoPE's one formula: cs and sn (max_len, head_dim / 2) get the cosine and
 * sine of position p times theta^(-2i / head_dim) (llama2.c), the tables
 * every backend and the kvstore's recomputation rotate by. */
void llm_rope_tables(const struct llm_config *c, uint32_t max_len, float *cs, float *sn);

/* Weight matrices as qmats (qmat.h): FP32 in the model's one allocation,
 * or, for a GGUF loaded with its own types, the file's blocks in its
 * mapping. Norm weights are always FP32. */
struct llm_weights {
    struct qmat token_embedding; /* (vocab, dim) */
    struct qmat *wq;        /* (n_layers) of (dim, dim) */
    struct qmat *wk;        /* (n_layers) of (kv_dim, dim) */
    struct qmat *wv;        /* (n_layers) of (kv_dim, dim) */
    struct qmat *wo;        /* (n_layers) of (dim, dim) */
    struct qmat *w1;        /* (n_layers) of (hidden_dim, dim) gate; OPT's fc1 */
    struct qmat *w2;        /* (n_layers) of (dim, hidden_dim) down; OPT's fc2 */
    struct qmat *w3;        /* (n_layers) of (hidden_dim, dim) up; none (0 rows) in OPT */
    struct qmat wcls;       /* (vocab, dim); the token embedding's data when tied */
    float *rms_att;         /* (n_layers, dim) attention norm's weight */
    float *rms_ffn;         /* (n_layers, dim) FFN norm's weight */
    float *rms_final;       /* (dim) */
    /* as the architecture has them (llm_arch_info; NULL otherwise):
     * LayerNorm biases, projection biases (Qwen2: bq, bk, bv only), and
     * the learned positions (max positions + 2 rows: OPT's offset of 2) */
    float *ln_att_b, *ln_ffn_b; /* (n_layers, dim) */
    float *ln_final_b;          /* (dim) */
    float *bq, *bo;             /* (n_layers, dim) */
    float *bk, *bv;             /* (n_layers, kv_dim) */
    float *b1;                  /* (n_layers, hidden_dim) fc1 */
    float *b2;                  /* (n_layers, dim) fc2 */
    struct qmat pos_embedding;  /* (seq_len + 2, dim) */
};

/* How a GGUF's weights are held: dequantised to FP32 at load (the oracle
 * path, and what llama2.c checkpoints always get), or as the file stores
 * them, mapped from it. */
enum llm_weight_mode { LLM_WEIGHTS_F32, LLM_WEIGHTS_NATIVE };

struct llm_model {
    struct llm_config c;
    struct llm_weights w;
    enum llm_weight_mode mode;
    float *data;            /* FP32 weights (all of them, or only the norms) */
    struct qmat *mats;      /* the 7 x n_layers per-layer qmats behind w */
    struct gguf *file;      /* the mapped GGUF behind native weights, or NULL */
    void *blocks;           /* synthetic weights' Q8_0 blocks, or NULL */
    uint64_t synth_seed;    /* synthetic weights: their seed */
    int synth_tied;         /* synthetic weights: the output head is the embedding */
    int synth_drawn;        /* synthetic weights drawn here (llm_load_synthetic) */
    int synth_lazy;         /* synthetic shapes only, matrices' data NULL
                             * (llm_shape_synthetic): drawn by the backend */
    char name[64];          /* file name without directory */
    char sha256[65];        /* hex SHA-256 of the file */
};

/* Loads a llama2.c checkpoint. On failure *out is NULL and e names the file,
 * byte offset or field and value. */
int llm_load_llama2c(struct llm_model **out, const char *path, struct alisa_err *e);

/* Loads a GGUF file of architecture "llama": hyper-parameters from its
 * metadata (heads, KV heads, rope theta, norm epsilon, context); the
 * matrices dequantised to F32 (LLM_WEIGHTS_F32) or kept in the file's
 * types, mapped (LLM_WEIGHTS_NATIVE). The output head is output.weight, or
 * the token embedding when absent (tied). On failure e names the file and
 * the tensor or key at fault. */
int llm_load_gguf(struct llm_model **out, const char *path, enum llm_weight_mode mode,
                  struct alisa_err *e);

/* A Hugging Face checkpoint: path is a .safetensors file (one shard), or a
 * sharded checkpoint's model.safetensors.index.json, with config.json in
 * its directory, or that directory (model.safetensors in it, else the
 * index). model_type "opt" (OPT-125m to OPT-66b: pre-LayerNorm, no projection
 * of the embeddings), "llama" or "qwen2" (without use_sliding_window; q and
 * k rows, and Qwen2's q and k biases, permuted from Hugging Face's
 * rotate-half RoPE to the interleaved pairs the forward pass rotates, as
 * llama.cpp's convert_hf_to_gguf.py permute does). F32, F16 and BF16
 * tensors, held as FP32. On failure e names the file and the tensor or
 * key. */
int llm_load_hf(struct llm_model **out, const char *path, struct alisa_err *e);

/* A model of shape s (a catalog entry: family opt or llama) with weights
 * drawn, not read: every matrix uniform with HF's initial standard
 * deviation of 0.02 (modeling_opt.py and modeling_llama.py _init_weights:
 * init_std / initializer_range), as Q8_0 blocks (8-bit codes uniform in
 * [-127, 127], scale 0.02 sqrt(3) / 127) where the input width is a whole
 * number of 32-weight blocks and FP32 otherwise; norm weights 1, biases 0.
 * Deterministic in seed, whatever the threads. Throughput is that of the
 * real shape; the text is noise. ALISA_ENOMEM, with the sizes, when the
 * weights would not fit this machine's memory. */
int llm_load_synthetic(struct llm_model **out, const struct model_shape *s, uint64_t seed,
                       struct alisa_err *e);

/* As llm_load_synthetic, but the matrices are not drawn: their qmats have
 * their types and sizes and NULL data, for a backend that draws them where
 * it holds them (the CUDA backend draws them on the GPU, the same numbers
 * rounded to FP16: kernels/synth.h). Norms and biases are on the host as
 * above. The CPU backend refuses such a model. */
int llm_shape_synthetic(struct llm_model **out, const struct model_shape *s, uint64_t seed,
                        struct alisa_err *e);

/* The id of matrix q of a synthetic model m (its stream in kernels/synth.h),
 * or -1 when m is not synthetic or q is not one of its matrices (a tied
 * output head is the embedding: pass &m->w.token_embedding). */
int64_t llm_synthetic_id(const struct llm_model *m, const struct qmat *q);

/* Any of the loaders: a directory, a .safetensors file or a sharded
 * checkpoint's model.safetensors.index.json is a Hugging Face
 * checkpoint, otherwise by the file's first bytes ("GGUF" or a llama2.c
 * header); mode applies to GGUF files. */
int llm_load(struct llm_model **out, const char *path, enum llm_weight_mode mode,
             struct alisa_err *e);

/* m's shape as the simulator's catalog describes a model (name from the
 * file, family "llama", SwiGLU, parameters counted from the tensors, FP16
 * bytes twice that). Cannot fail. */
void llm_model_shape(const struct llm_model *m, struct model_shape *out);

/* Bytes per weight of the decode's matrices as m holds them (every layer's
 * seven and the output head): 4 for FP32, 0.625 for Q4_1 blocks, mixed
 * types averaged over the weights. Cannot fail. */
double llm_bytes_per_weight(const struct llm_model *m);

/* Frees m. Accepts NULL. */
void llm_free(struct llm_model *m);

/* Hex SHA-256 of a whole file into out[65]. */
int llm_file_sha256(const char *path, char out[65], struct alisa_err *e);

#endif
