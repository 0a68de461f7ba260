/* llama2.c legacy checkpoints (version 0: 7 x int32 header, fp32 weights):
 * header parsing and file-size validation.
 *
 * Owns the layout arithmetic of the format (which tensors, in which order,
 * how many floats). Does not load weights; the executor does, using
 * llama2c_layout() to find each tensor.
 */
#ifndef ALISA_LLAMA2C_H
#define ALISA_LLAMA2C_H

#include <stdint.h>

#include "err.h"

struct llama2c_header {
    uint32_t dim;         /* model width */
    uint32_t hidden_dim;  /* FFN inner width */
    uint32_t n_layers;
    uint32_t n_heads;     /* query heads */
    uint32_t n_kv_heads;  /* key/value heads */
    uint32_t vocab;       /* vocabulary size */
    uint32_t seq_len;     /* maximum context, tokens */
    int shared_classifier; /* 1 when the file's vocab_size was positive */
    uint64_t n_params;    /* weight parameters, excluding the stored RoPE tables */
    uint64_t file_bytes;  /* expected (and, after a successful read, actual) size */
};

/* Reads and validates the header of path: positive dimensions, heads dividing
 * dim, kv heads dividing heads, and the file size equal to the size the
 * header implies. On failure e names the file, the field and the value. */
int llama2c_read_header(const char *path, struct llama2c_header *out, struct alisa_err *e);

/* Fills the parameter count and expected file size of a header whose shape
 * fields are set. Returns ALISA_EINVAL for an impossible shape. */
int llama2c_layout(struct llama2c_header *h, struct alisa_err *e);

#endif
