/* Hugging Face safetensors files: an 8-byte little-endian header length, a
 * JSON header naming each tensor's dtype, shape and byte range, then the
 * data. Read through a read-only mapping; every range is checked against
 * the file before any tensor is touched, so a truncated or inconsistent
 * file is an error naming the file, the tensor and the value.
 */
#ifndef ALISA_SAFETENSORS_H
#define ALISA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct st_tensor {
    char name[160];
    char dtype[8];      /* "F32", "F16", "BF16", ... as the file says */
    uint32_t n_dims;
    uint64_t shape[4];
    uint64_t n_elems;
    uint64_t begin;     /* byte offset in the data section */
};

struct st_file;

/* Maps and parses path. A path ending in ".index.json" is a sharded
 * checkpoint's index (Hugging Face's model.safetensors.index.json: a
 * weight_map from tensor names to shard files beside it): every shard it
 * names is opened and the result holds their tensors as one file. A shard
 * must be a .safetensors data file in the index's directory, never another
 * index. Only regular files are opened (a FIFO or a device is refused, not
 * waited on). On failure *out is NULL and e says why (the index, shard or
 * tensor named). */
int st_open(struct st_file **out, const char *path, struct alisa_err *e);

struct json_t; /* jansson's json_t */

/* The JSON object in path (a checkpoint's config.json or index), read from
 * a regular file only, as st_open reads; duplicate keys are refused. On
 * failure *out is NULL and e names the file and the parse error; else the
 * caller owns *out (json_decref). */
int st_load_json(const char *path, struct json_t **out, struct alisa_err *e);

/* Bytes of the file, or of every shard of an index. */
uint64_t st_file_bytes(const struct st_file *f);
void st_close(struct st_file *f); /* accepts NULL */

/* The tensors, in the header's order. */
size_t st_n_tensors(const struct st_file *f);
const struct st_tensor *st_tensor_at(const struct st_file *f, size_t i);

/* The tensor called name, or NULL. */
const struct st_tensor *st_find(const struct st_file *f, const char *name);

/* Tensor t into out (t->n_elems floats), widened from F16 or BF16.
 * ALISA_EINVAL naming the tensor for another dtype. */
int st_read_f32(const struct st_file *f, const struct st_tensor *t, float *out,
                struct alisa_err *e);

#endif
