/* GGUF reader (contract in gguf.h), format version 2 and 3: little-endian,
 * u64 counts, strings as u64 length + bytes, tensor data aligned to
 * general.alignment (default 32) after the tensor infos.
 */
#include "gguf.h"

#include "infile.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checked.h"
#include "qmat.h"

struct gguf_kv {
    char key[128];
    uint32_t type;       /* enum gguf_value_type */
    uint64_t at;         /* file offset of the value */
    uint32_t arr_type;   /* for arrays */
    uint64_t arr_n;
    uint64_t *arr_off;   /* string arrays: offset of each item's length */
};

struct gguf {
    char path[512];
    const uint8_t *map;
    uint64_t size;
    uint32_t version;
    struct gguf_kv *kv;
    uint64_t n_kv;
    struct gguf_tensor *t;
    uint64_t n_t;
    uint64_t data;       /* file offset of the data section */
};

struct cur {
    const struct gguf *g;
    uint64_t at;
    int bad;
    char what[96];       /* what was being read when it ran out */
};

static const uint8_t *take(struct cur *c, uint64_t n, const char *what)
{
    if (c->bad || n > c->g->size || c->at > c->g->size - n) {
        if (!c->bad)
            snprintf(c->what, sizeof c->what, "%s", what);
        c->bad = 1;
        return NULL;
    }
    const uint8_t *p = c->g->map + c->at;
    c->at += n;
    return p;
}

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t take_u(struct cur *c, int n, const char *what)
{
    const uint8_t *p = take(c, (uint64_t)n, what);
    return p ? rd(p, n) : 0;
}

static const int value_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Skips one value of type `type` (strings and nested arrays included). */
static void skip_value(struct cur *c, uint32_t type, int depth)
{
    if (type == GGUF_STRING) {
        uint64_t n = take_u(c, 8, "a string length");
        take(c, n, "string bytes");
    } else if (type == GGUF_ARRAY && depth < 4) {
        uint32_t at = (uint32_t)take_u(c, 4, "an array type");
        uint64_t n = take_u(c, 8, "an array length");
        for (uint64_t i = 0; i < n && !c->bad; i++)
            skip_value(c, at, depth + 1);
    } else if (type < 13 && value_size[type]) {
        take(c, (uint64_t)value_size[type], "a value");
    } else {
        c->bad = 2;
    }
}

void gguf_close(struct gguf *g)
{
    if (!g)
        return;
    if (g->map)
        munmap((void *)g->map, g->size);
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
        free(g->kv[i].arr_off);
    free(g->kv);
    free(g->t);
    free(g);
}

/* Bytes of n elements of a supported type; *ok 0 for another type or a
 * block type's n not a multiple of 32; *over set when the size passes 64
 * bits. */
static uint64_t type_bytes(uint32_t type, uint64_t n, int *ok, int *over)
{
    *ok = 1;
    switch (type) {
    case GGML_F32: return checked_mul(4, n, over);
    case GGML_F16: return checked_mul(2, n, over);
    case GGML_Q8_0: return n % 32 ? (*ok = 0) : checked_mul(n / 32, 34, over);
    case GGML_Q4_K: return n % 256 ? (*ok = 0) : checked_mul(n / 256, 144, over);
    case GGML_Q6_K: return n % 256 ? (*ok = 0) : checked_mul(n / 256, 210, over);
    case GGML_Q4_0: return n % 32 ? (*ok = 0) : checked_mul(n / 32, 18, over);
    case GGML_Q4_1: return n % 32 ? (*ok = 0) : checked_mul(n / 32, 20, over);
    }
    *ok = 0;
    return 0;
}

/* Maps path into g (size, map), checks the magic and version, reads the
 * counts (refused when the file cannot hold them) and allocates the tables.
 * c is left after the counts. Returns 0 or a negative status with e set. */
static int gguf_map(struct gguf *g, const char *path, struct cur *c, struct alisa_err *e)
{
    struct stat st;
    int fd = infile_open(path, "GGUF file", &st, e);
    if (fd < 0)
        return ALISA_EIO;
    g->size = (uint64_t)st.st_size;
    if (g->size < 24) {
        close(fd);
        return err_set(e, ALISA_ECORRUPT, "%s: %llu bytes, too short for a GGUF header", path,
                       (unsigned long long)g->size);
    }
    void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return err_set(e, ALISA_EIO, "%s: cannot map the file", path);
    g->map = m;
    if (memcmp(g->map, "GGUF", 4) != 0)
        return err_set(e, ALISA_ECORRUPT, "%s: byte 0: not a GGUF file (bad magic)", path);
    *c = (struct cur){.g = g, .at = 4};
    g->version = (uint32_t)take_u(c, 4, "the version");
    if (g->version != 2 && g->version != 3)
        return err_set(e, ALISA_ECORRUPT, "%s: byte 4: unsupported GGUF version %u (2 and 3 are "
                       "read)", path, g->version);
    g->n_t = take_u(c, 8, "the tensor count");
    g->n_kv = take_u(c, 8, "the metadata count");
    /* each key takes at least 13 bytes (length, type, a byte of value) and
     * each tensor info 32 (name length, rank, a dimension, type, offset):
     * counts the file cannot hold are refused before anything is allocated */
    if (g->n_t > (1u << 20) || g->n_kv > (1u << 20) || g->n_kv > (g->size - c->at) / 13 ||
        g->n_t > (g->size - c->at) / 32)
        return err_set(e, ALISA_ECORRUPT, "%s: byte 8: tensor count %llu or metadata count %llu "
                       "is more than the file's %llu bytes can hold", path,
                       (unsigned long long)g->n_t, (unsigned long long)g->n_kv,
                       (unsigned long long)g->size);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->t = calloc(g->n_t ? g->n_t : 1, sizeof *g->t);
    if (!g->kv || !g->t)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    return 0;
}

/* The metadata keys from c on; *alignment gets general.alignment when the
 * file gives it. A truncation leaves c->bad for the caller to report.
 * Returns 0 or a negative status with e set. */
static int gguf_read_kvs(struct gguf *g, struct cur *c, uint64_t *alignment, struct alisa_err *e)
{
    for (uint64_t i = 0; i < g->n_kv && !c->bad; i++) {
        struct gguf_kv *kv = &g->kv[i];
        uint64_t at = c->at;
        uint64_t klen = take_u(c, 8, "a key length");
        const uint8_t *k = take(c, klen, "a key");
        if (k) {
            size_t n = klen < sizeof kv->key ? (size_t)klen : sizeof kv->key - 1;
            memcpy(kv->key, k, n);
        }
        kv->type = (uint32_t)take_u(c, 4, "a value type");
        if (kv->type > GGUF_F64)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: key '%s' has unknown value type %u",
                           g->path, (unsigned long long)at, kv->key, kv->type);
        kv->at = c->at;
        if (kv->type == GGUF_ARRAY) {
            kv->arr_type = (uint32_t)take_u(c, 4, "an array type");
            kv->arr_n = take_u(c, 8, "an array length");
            /* a string takes at least its 8-byte length: no more offsets
             * than the rest of the file can hold */
            if (kv->arr_type == GGUF_STRING && !c->bad && kv->arr_n <= (g->size - c->at) / 8) {
                kv->arr_off = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof *kv->arr_off);
                if (!kv->arr_off)
                    return err_set(e, ALISA_ENOMEM, "out of memory");
                for (uint64_t j = 0; j < kv->arr_n && !c->bad; j++) {
                    kv->arr_off[j] = c->at;
                    skip_value(c, GGUF_STRING, 1);
                }
            } else {
                for (uint64_t j = 0; j < kv->arr_n && !c->bad; j++)
                    skip_value(c, kv->arr_type, 1);
            }
        } else {
            skip_value(c, kv->type, 0);
        }
        if (!c->bad && strcmp(kv->key, "general.alignment") == 0 && kv->type == GGUF_U32)
            *alignment = rd(g->map + kv->at, 4); /* skip_value checked its 4 bytes */
    }
    return 0;
}

/* The tensor infos from c on (names, ranks, dimensions, types, offsets). A
 * truncation leaves c->bad for the caller to report. Returns 0 or a
 * negative status with e set. */
static int gguf_read_tensors(struct gguf *g, struct cur *c, struct alisa_err *e)
{
    for (uint64_t i = 0; i < g->n_t && !c->bad; i++) {
        struct gguf_tensor *t = &g->t[i];
        uint64_t nlen = take_u(c, 8, "a tensor name length");
        const uint8_t *nm = take(c, nlen, "a tensor name");
        if (nm) {
            size_t n = nlen < sizeof t->name ? (size_t)nlen : sizeof t->name - 1;
            memcpy(t->name, nm, n);
        }
        t->n_dims = (uint32_t)take_u(c, 4, "a tensor rank");
        if (c->bad) /* reported as the truncation it is */
            break;
        if (t->n_dims == 0 || t->n_dims > 4)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: tensor '%s' has rank %u", g->path,
                           (unsigned long long)c->at, t->name, t->n_dims);
        t->n_elems = 1;
        int over = 0;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            t->dims[d] = take_u(c, 8, "a tensor dimension");
            t->n_elems = checked_mul(t->n_elems, t->dims[d], &over);
        }
        if (over)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: tensor '%s': dimensions [%llu, "
                           "%llu, %llu, %llu] overflow 64 bits", g->path,
                           (unsigned long long)c->at, t->name, (unsigned long long)t->dims[0],
                           (unsigned long long)t->dims[1], (unsigned long long)t->dims[2],
                           (unsigned long long)t->dims[3]);
        t->type = (uint32_t)take_u(c, 4, "a tensor type");
        t->offset = take_u(c, 8, "a tensor offset");
    }
    return 0;
}

/* Every tensor's data lies inside the file (from g->data). Returns 0 or a
 * negative status with e set. */
static int gguf_check_extents(const struct gguf *g, struct alisa_err *e)
{
    for (uint64_t i = 0; i < g->n_t; i++) {
        const struct gguf_tensor *t = &g->t[i];
        int ok, over = 0;
        uint64_t bytes = type_bytes(t->type, t->n_elems, &ok, &over);
        uint64_t start = checked_add(g->data, t->offset, &over);
        if (over)
            return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': %llu elements of type %u at "
                           "offset %llu: its size overflows 64 bits", g->path, t->name,
                           (unsigned long long)t->n_elems, t->type,
                           (unsigned long long)t->offset);
        if (ok && (start > g->size || bytes > g->size - start))
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: tensor '%s' data (%llu bytes) runs "
                           "past the end of the file (%llu bytes; truncated?)", g->path,
                           (unsigned long long)start, t->name, (unsigned long long)bytes,
                           (unsigned long long)g->size);
    }
    return 0;
}

int gguf_open(struct gguf **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    struct gguf *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    snprintf(g->path, sizeof g->path, "%s", path);
    struct cur c;
    uint64_t alignment = 32;
    int rc = gguf_map(g, path, &c, e);
    if (!rc)
        rc = gguf_read_kvs(g, &c, &alignment, e);
    if (!rc)
        rc = gguf_read_tensors(g, &c, e);
    if (!rc && c.bad)
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte %llu: file ends inside %s (truncated?)", path,
                     (unsigned long long)c.at, c.what[0] ? c.what : "the header");
    if (!rc) {
        if (alignment == 0 || alignment > 4096)
            alignment = 32;
        g->data = (c.at + alignment - 1) / alignment * alignment;
        rc = gguf_check_extents(g, e);
    }
    if (rc) {
        gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

static const struct gguf_kv *find_kv(const struct gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0)
            return &g->kv[i];
    return NULL;
}

int gguf_get_f64(const struct gguf *g, const char *key, double *out, struct alisa_err *e)
{
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv)
        return err_set(e, ALISA_ENOTFOUND, "%s: metadata key '%s' missing", g->path, key);
    const uint8_t *p = g->map + kv->at;
    switch (kv->type) {
    case GGUF_U8: *out = p[0]; return 0;
    case GGUF_I8: *out = (int8_t)p[0]; return 0;
    case GGUF_U16: *out = (double)rd(p, 2); return 0;
    case GGUF_I16: *out = (int16_t)rd(p, 2); return 0;
    case GGUF_U32: *out = (double)rd(p, 4); return 0;
    case GGUF_I32: *out = (int32_t)rd(p, 4); return 0;
    case GGUF_U64: *out = (double)rd(p, 8); return 0;
    case GGUF_I64: *out = (double)(int64_t)rd(p, 8); return 0;
    case GGUF_BOOL: *out = p[0] != 0; return 0;
    case GGUF_F32: {
        uint32_t v = (uint32_t)rd(p, 4);
        float f;
        memcpy(&f, &v, 4);
        *out = f;
        return 0;
    }
    case GGUF_F64: {
        uint64_t v = rd(p, 8);
        memcpy(out, &v, 8);
        return 0;
    }
    }
    return err_set(e, ALISA_EINVAL, "%s: metadata '%s' is not a number", g->path, key);
}

int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out, struct alisa_err *e)
{
    double d;
    int rc = gguf_get_f64(g, key, &d, e);
    if (rc)
        return rc;
    /* range first: casting a double at or past 2^64 to uint64 is undefined */
    if (!(d >= 0 && d < 18446744073709551616.0) || d != floor(d))
        return err_set(e, ALISA_EINVAL, "%s: metadata '%s' = %g is not a count", g->path, key, d);
    *out = (uint64_t)d;
    return 0;
}

int gguf_get_str(const struct gguf *g, const char *key, char *buf, size_t cap, struct alisa_err *e)
{
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv)
        return err_set(e, ALISA_ENOTFOUND, "%s: metadata key '%s' missing", g->path, key);
    if (kv->type != GGUF_STRING)
        return err_set(e, ALISA_EINVAL, "%s: metadata '%s' is not a string", g->path, key);
    uint64_t n = rd(g->map + kv->at, 8);
    size_t k = n < cap ? (size_t)n : cap - 1;
    memcpy(buf, g->map + kv->at + 8, k);
    buf[k] = 0;
    return 0;
}

int gguf_get_str_array(const struct gguf *g, const char *key, uint64_t *n, struct alisa_err *e)
{
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv)
        return err_set(e, ALISA_ENOTFOUND, "%s: metadata key '%s' missing", g->path, key);
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING || !kv->arr_off)
        return err_set(e, ALISA_EINVAL, "%s: metadata '%s' is not an array of strings", g->path, key);
    *n = kv->arr_n;
    return 0;
}

const char *gguf_array_str(const struct gguf *g, const char *key, uint64_t i, size_t *len)
{
    const struct gguf_kv *kv = find_kv(g, key);
    ALISA_ASSERT(kv && kv->arr_off && i < kv->arr_n);
    *len = (size_t)rd(g->map + kv->arr_off[i], 8);
    return (const char *)g->map + kv->arr_off[i] + 8;
}

uint64_t gguf_file_bytes(const struct gguf *g) { return g->size; }

uint64_t gguf_n_tensors(const struct gguf *g) { return g->n_t; }

const struct gguf_tensor *gguf_tensor_at(const struct gguf *g, uint64_t i)
{
    ALISA_ASSERT(i < g->n_t);
    return &g->t[i];
}

const struct gguf_tensor *gguf_find(const struct gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_t; i++)
        if (strcmp(g->t[i].name, name) == 0)
            return &g->t[i];
    return NULL;
}

const char *ggml_type_name(uint32_t type)
{
    /* ggml.h's enum ggml_type (llama.cpp); 4, 5 and 31-33 were removed */
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [6] = "Q5_0",
        [7] = "Q5_1",     [8] = "Q8_0",    [9] = "Q8_1",    [10] = "Q2_K",   [11] = "Q3_K",
        [12] = "Q4_K",    [13] = "Q5_K",   [14] = "Q6_K",   [15] = "Q8_K",   [16] = "IQ2_XXS",
        [17] = "IQ2_XS",  [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
        [22] = "IQ2_S",   [23] = "IQ4_XS", [24] = "I8",     [25] = "I16",    [26] = "I32",
        [27] = "I64",     [28] = "F64",    [29] = "IQ1_M",  [30] = "BF16",   [34] = "TQ1_0",
        [35] = "TQ2_0",   [39] = "MXFP4",
    };
    return type < sizeof names / sizeof names[0] && names[type] ? names[type] : NULL;
}

int gguf_read_f32(const struct gguf *g, const struct gguf_tensor *t, float *out,
                  struct alisa_err *e)
{
    uint64_t n = t->n_elems;
    int ok, over = 0;
    type_bytes(t->type, n, &ok, &over); /* over was refused at open */
    if (!ok)
        return err_set(e, ALISA_EINVAL, "%s: tensor '%s' has type %u (%s), unsupported (F32, F16, "
                       "Q8_0, Q4_0, Q4_1, Q4_K, Q6_K are read)", g->path, t->name, t->type,
                       ggml_type_name(t->type) ? ggml_type_name(t->type) : "unknown to ggml");
    /* only now: a supported tensor's data was checked to lie in the file
     * at open; another type's offset may be anything */
    qmat_dequant(t->type, g->map + g->data + t->offset, out, n);
    return 0;
}

const void *gguf_tensor_data(const struct gguf *g, const struct gguf_tensor *t)
{
    int ok, over = 0;
    type_bytes(t->type, t->n_elems, &ok, &over);
    return ok ? g->map + g->data + t->offset : NULL;
}
