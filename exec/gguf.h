/* GGUF files (the format of llama.cpp and local-LLM users): header, typed
 * metadata, tensor infos, and tensors dequantised to F32 on read.
 *
 * Owns a read-only mapping of the file. Every structure is bounds-checked
 * against the file size as it is parsed, so a truncated or corrupt file is
 * reported with the byte offset and never read past. Supported tensor types:
 * F32, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K (others are named in the error).
 */
#ifndef ALISA_GGUF_H
#define ALISA_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum gguf_value_type {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12
};

enum ggml_type {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q8_0 = 8, GGML_Q4_K = 12,
    GGML_Q6_K = 14
};

struct gguf_tensor {
    char name[96];
    uint32_t n_dims;
    uint64_t dims[4];   /* ne0 (contiguous) first */
    uint32_t type;      /* enum ggml_type */
    uint64_t offset;    /* from the start of the data section */
    uint64_t n_elems;
};

struct gguf;

/* Maps and parses path. On failure *out is NULL and e names the file, byte
 * offset and value. */
int gguf_open(struct gguf **out, const char *path, struct alisa_err *e);
void gguf_close(struct gguf *g); /* accepts NULL */

/* Metadata by key. Numbers convert to the asked type when the stored one is
 * numeric; ALISA_ENOTFOUND when absent, ALISA_EINVAL when of another kind. */
int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out, struct alisa_err *e);
int gguf_get_f64(const struct gguf *g, const char *key, double *out, struct alisa_err *e);
/* A string value, NUL-terminated copy into buf. */
int gguf_get_str(const struct gguf *g, const char *key, char *buf, size_t cap, struct alisa_err *e);
/* An array of strings: *n gets its length; gguf_array_str returns item i
 * (pointer into the mapping, *len bytes, not terminated). */
int gguf_get_str_array(const struct gguf *g, const char *key, uint64_t *n, struct alisa_err *e);
const char *gguf_array_str(const struct gguf *g, const char *key, uint64_t i, size_t *len);

/* The file's size, bytes. Cannot fail. */
uint64_t gguf_file_bytes(const struct gguf *g);

/* Tensors. */
uint64_t gguf_n_tensors(const struct gguf *g);
const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, uint64_t i);
const struct gguf_tensor *gguf_find(const struct gguf *g, const char *name);

/* ggml's name of a tensor type ("Q4_K"), NULL for an id ggml does not
 * define. Cannot fail. */
const char *ggml_type_name(uint32_t type);

/* Dequantises tensor t into out (t->n_elems floats). ALISA_EINVAL with the
 * tensor's name for an unsupported type. */
int gguf_read_f32(const struct gguf *g, const struct gguf_tensor *t, float *out,
                  struct alisa_err *e);

/* Tensor t's bytes in the mapping, as stored (valid until gguf_close);
 * NULL for an unsupported type. */
const void *gguf_tensor_data(const struct gguf *g, const struct gguf_tensor *t);

#endif
