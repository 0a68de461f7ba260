/* A LLaMA-family model in memory: configuration and FP32 weights, loaded from
 * a llama2.c version-0 checkpoint or a GGUF file (dequantised at load).
 *
 * Owns one allocation holding every weight, carved into named pointers;
 * row-major [out][in] matrices as llama2.c stores them. Validates the file
 * against its header (llama2c.h) before reading a byte of weights.
 */
#ifndef ALISA_MODEL_H
#define ALISA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "err.h"

struct llm_config {
    uint32_t dim;         /* model width */
    uint32_t hidden_dim;  /* FFN inner width */
    uint32_t n_layers;
    uint32_t n_heads;     /* query heads */
    uint32_t n_kv_heads;  /* key/value heads */
    uint32_t vocab;
    uint32_t seq_len;     /* maximum context */
    uint32_t head_dim;    /* dim / n_heads */
    uint32_t kv_dim;      /* head_dim * n_kv_heads */
    float rope_theta;     /* 10000 for llama2.c checkpoints */
    float norm_eps;       /* RMSNorm epsilon, 1e-5 for llama2.c */
};

struct llm_weights {
    float *token_embedding; /* (vocab, dim) */
    float *rms_att;         /* (n_layers, dim) */
    float *wq;              /* (n_layers, dim, dim) */
    float *wk;              /* (n_layers, kv_dim, dim) */
    float *wv;              /* (n_layers, kv_dim, dim) */
    float *wo;              /* (n_layers, dim, dim) */
    float *rms_ffn;         /* (n_layers, dim) */
    float *w1;              /* (n_layers, hidden_dim, dim) gate */
    float *w2;              /* (n_layers, dim, hidden_dim) down */
    float *w3;              /* (n_layers, hidden_dim, dim) up */
    float *rms_final;       /* (dim) */
    float *wcls;            /* (vocab, dim); aliases token_embedding when tied */
};

struct llm_model {
    struct llm_config c;
    struct llm_weights w;
    float *data;            /* the one allocation behind w */
    char name[64];          /* file name without directory */
    char sha256[65];        /* hex SHA-256 of the file */
};

/* Loads a llama2.c checkpoint. On failure *out is NULL and e names the file,
 * byte offset or field and value. */
int llm_load_llama2c(struct llm_model **out, const char *path, struct alisa_err *e);

/* Loads a GGUF file of architecture "llama": hyper-parameters from its
 * metadata (heads, KV heads, rope theta, norm epsilon, context), every
 * tensor dequantised to F32. The output head is output.weight, or the token
 * embedding when absent (tied). On failure e names the file and the tensor or
 * key at fault. */
int llm_load_gguf(struct llm_model **out, const char *path, struct alisa_err *e);

/* Either loader, by the file's first bytes ("GGUF" or a llama2.c header). */
int llm_load(struct llm_model **out, const char *path, struct alisa_err *e);

/* m's shape as the simulator's catalog describes a model (name from the
 * file, family "llama", SwiGLU, parameters counted from the tensors, FP16
 * bytes twice that). Cannot fail. */
void llm_model_shape(const struct llm_model *m, struct model_shape *out);

/* Frees m. Accepts NULL. */
void llm_free(struct llm_model *m);

/* Hex SHA-256 of a whole file into out[65]. */
int llm_file_sha256(const char *path, char out[65], struct alisa_err *e);

#endif
