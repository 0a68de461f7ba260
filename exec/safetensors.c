/* safetensors reader (contract in safetensors.h). The header is JSON
 * (parsed by jansson): {"NAME": {"dtype": "F16", "shape": [r, c],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {...}}; offsets count
 * from the end of the header. Each tensor's range must lie in the file and
 * hold exactly its shape's elements.
 */
#include "safetensors.h"

#include "infile.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checked.h"
#include "fp16.h"

/* headers larger than this are refused (Hugging Face's own limit is 100 MB) */
#define ST_MAX_HEADER (100u << 20)

/* an index names data files, which name nothing: deeper is a loop (issue 48) */
#define ST_MAX_DEPTH 1

struct st_file {
    char path[512];
    const uint8_t *map;
    uint64_t size;
    const uint8_t *data;  /* after the header */
    uint64_t data_bytes;
    struct st_tensor *t;
    size_t n_t;
    /* a sharded checkpoint (an index): its shards, and which holds each of t */
    struct st_file **parts;
    size_t n_parts;
    uint32_t *part_of;    /* (n_t) */
};

void st_close(struct st_file *f)
{
    if (!f)
        return;
    if (f->map)
        munmap((void *)f->map, f->size);
    for (size_t i = 0; i < f->n_parts; i++)
        st_close(f->parts[i]);
    free(f->parts);
    free(f->part_of);
    free(f->t);
    free(f);
}

static unsigned dtype_bytes(const char *dt)
{
    return strcmp(dt, "F32") == 0 || strcmp(dt, "I32") == 0   ? 4
           : strcmp(dt, "F16") == 0 || strcmp(dt, "BF16") == 0 ? 2
           : strcmp(dt, "F64") == 0 || strcmp(dt, "I64") == 0  ? 8
           : strcmp(dt, "I8") == 0 || strcmp(dt, "U8") == 0 || strcmp(dt, "BOOL") == 0 ? 1
                                                                                       : 0;
}

/* One header entry into t; 0, or ALISA_ECORRUPT naming the field. */
static int parse_tensor(struct st_file *f, const char *name, json_t *v, struct st_tensor *t,
                        struct alisa_err *e)
{
    const char *p = f->path;
    if (strlen(name) >= sizeof t->name)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor name '%.40s...' longer than %zu bytes", p,
                       name, sizeof t->name - 1);
    snprintf(t->name, sizeof t->name, "%s", name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
        json_array_size(off) != 2)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': dtype, shape or data_offsets missing "
                       "or malformed", p, name);
    snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dt));
    unsigned eb = dtype_bytes(t->dtype);
    if (!eb)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': dtype '%s' unknown", p, name,
                       json_string_value(dt));
    if (json_array_size(sh) > 4)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': %zu dimensions (at most 4 are read)",
                       p, name, json_array_size(sh));
    t->n_dims = (uint32_t)json_array_size(sh);
    int over = 0;
    t->n_elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        json_t *x = json_array_get(sh, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': shape[%u] is not a size", p, name,
                           d);
        t->shape[d] = (uint64_t)json_integer_value(x);
        t->n_elems = checked_mul(t->n_elems, t->shape[d], &over);
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': data_offsets are not a range", p,
                       name);
    t->begin = (uint64_t)json_integer_value(b);
    uint64_t end = (uint64_t)json_integer_value(en), want = checked_mul(t->n_elems, eb, &over);
    if (over || end > f->data_bytes || end - t->begin != want)
        return err_set(e, ALISA_ECORRUPT, "%s: tensor '%s': bytes %llu to %llu, but its shape "
                       "needs %llu bytes and the data section holds %llu", p, name,
                       (unsigned long long)t->begin, (unsigned long long)end,
                       over ? 0ULL : (unsigned long long)want, (unsigned long long)f->data_bytes);
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n > t && strcmp(s + n - t, tail) == 0;
}

int st_load_json(const char *path, struct json_t **out, struct alisa_err *e)
{
    *out = NULL;
    struct stat sb;
    int fd = infile_open(path, "a JSON file", &sb, e);
    if (fd < 0)
        return fd;
    json_error_t je;
    json_t *root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
    close(fd);
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, ALISA_ECORRUPT, "%s: not a JSON object (%s)", path,
                       root ? "another value" : je.text);
    }
    *out = root;
    return 0;
}

static int open_index(struct st_file **out, const char *path, int depth, struct alisa_err *e);

/* One safetensors data file (not an index) into *out. */
static int open_data(struct st_file **out, const char *path, struct alisa_err *e)
{
    struct st_file *f = calloc(1, sizeof *f);
    if (!f)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    struct stat sb;
    int fd = infile_open(path, "a safetensors file", &sb, e), rc = 0;
    json_t *root = NULL;
    if (fd < 0) {
        rc = fd;
        goto done;
    }
    f->size = (uint64_t)sb.st_size;
    if (f->size < 10) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: %llu bytes, too short for a safetensors header",
                     path, (unsigned long long)f->size);
        goto done;
    }
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        rc = err_set(e, ALISA_EIO, "%s: cannot map the file", path);
        goto done;
    }
    f->map = m;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | f->map[i];
    if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > f->size - 8) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte 0: header length %llu does not fit the file's "
                     "%llu bytes (or passes %u)", path, (unsigned long long)hlen,
                     (unsigned long long)f->size, ST_MAX_HEADER);
        goto done;
    }
    f->data = f->map + 8 + hlen;
    f->data_bytes = f->size - 8 - hlen;
    json_error_t je;
    root = json_loadb((const char *)f->map + 8, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root)) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: header is not a JSON object (%s, byte %d)", path,
                     root ? "another value" : je.text, root ? 0 : je.position + 8);
        goto done;
    }
    f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
    if (!f->t) {
        rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for %zu tensors", path,
                     json_object_size(root));
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        if ((rc = parse_tensor(f, key, v, &f->t[f->n_t], e)))
            goto done;
        f->n_t++;
    }
done:
    if (fd >= 0)
        close(fd);
    json_decref(root);
    if (rc) {
        st_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* path at the given depth of indexes: an index only at the top, since the
 * data files an index names name nothing (the shard names are checked
 * first; this bound is the second guard against a loop). */
static int open_at(struct st_file **out, const char *path, int depth, struct alisa_err *e)
{
    *out = NULL;
    if (!ends_with(path, ".index.json"))
        return open_data(out, path, e);
    if (depth >= ST_MAX_DEPTH)
        return err_set(e, ALISA_ECORRUPT, "%s: an index inside an index (depth %d): refused",
                       path, depth);
    return open_index(out, path, depth, e);
}

int st_open(struct st_file **out, const char *path, struct alisa_err *e)
{
    return open_at(out, path, 0, e);
}

/* A sharded checkpoint: {"metadata": {...}, "weight_map": {"TENSOR":
 * "SHARD.safetensors", ...}} beside its shards. Each shard named is opened
 * once, and must be a .safetensors data file: never an index, so no index
 * is read twice in a load (one naming itself recursed without end: issue
 * 48). Every tensor the map names must be in its shard, and no tensor may
 * be in two. */
static int open_index(struct st_file **out, const char *path, int depth, struct alisa_err *e)
{
    json_t *root;
    int rc = st_load_json(path, &root, e);
    if (rc)
        return rc;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        json_decref(root);
        return err_set(e, ALISA_ECORRUPT, "%s: weight_map: missing or not an object", path);
    }
    struct st_file *f = calloc(1, sizeof *f);
    size_t n_map = json_object_size(map);
    if (!f || !(f->parts = calloc(n_map + 1, sizeof *f->parts))) {
        free(f);
        json_decref(root);
        return err_set(e, ALISA_ENOMEM, "out of memory");
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    const char *key;
    json_t *v;
    size_t total = 0;
    json_object_foreach(map, key, v)
    {
        const char *shard = json_is_string(v) ? json_string_value(v) : NULL;
        if (!shard || !shard[0] || strchr(shard, '/') || strlen(shard) > 200) {
            rc = err_set(e, ALISA_ECORRUPT, "%s: weight_map[\"%.80s\"]: not a shard file name "
                         "in this directory", path, key);
            break;
        }
        if (!ends_with(shard, ".safetensors")) {
            rc = err_set(e, ALISA_ECORRUPT, "%s: weight_map[\"%.80s\"]: shard '%s' is not a "
                         ".safetensors data file", path, key, shard);
            break;
        }
        size_t i = 0;
        char sp[1100];
        snprintf(sp, sizeof sp, "%.*s/%s", dl, dir, shard);
        while (i < f->n_parts && strcmp(f->parts[i]->path, sp) != 0)
            i++;
        if (i == f->n_parts) {
            if ((rc = open_at(&f->parts[i], sp, depth + 1, e)))
                break;
            f->n_parts++;
            total += f->parts[i]->n_t;
        }
        if (!st_find(f->parts[i], key)) {
            rc = err_set(e, ALISA_ECORRUPT, "%s: weight_map[\"%.80s\"]: not in %s", path, key,
                         shard);
            break;
        }
    }
    if (!rc && (!(f->t = calloc(total + 1, sizeof *f->t)) ||
                !(f->part_of = calloc(total + 1, sizeof *f->part_of))))
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < f->n_parts; i++)
        for (size_t j = 0; !rc && j < f->parts[i]->n_t; j++) {
            const struct st_tensor *t = &f->parts[i]->t[j];
            if (st_find(f, t->name))
                rc = err_set(e, ALISA_ECORRUPT, "%s: tensor '%s' in two shards (the second %s)",
                             path, t->name, f->parts[i]->path);
            f->t[f->n_t] = *t;
            f->part_of[f->n_t++] = (uint32_t)i;
        }
    json_decref(root);
    if (rc) {
        st_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

uint64_t st_file_bytes(const struct st_file *f)
{
    uint64_t n = f->size;
    for (size_t i = 0; i < f->n_parts; i++)
        n += f->parts[i]->size;
    return n;
}

size_t st_n_tensors(const struct st_file *f) { return f->n_t; }

const struct st_tensor *st_tensor_at(const struct st_file *f, size_t i)
{
    ALISA_ASSERT(i < f->n_t);
    return &f->t[i];
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_t; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}

int st_read_f32(const struct st_file *f, const struct st_tensor *t, float *out,
                struct alisa_err *e)
{
    if (f->n_parts) { /* an index: the tensor's own shard */
        size_t i = (size_t)(t - f->t);
        ALISA_ASSERT(i < f->n_t);
        const struct st_file *part = f->parts[f->part_of[i]];
        return st_read_f32(part, st_find(part, t->name), out, e);
    }
    const uint8_t *p = f->data + t->begin;
    if (strcmp(t->dtype, "F32") == 0) {
        memcpy(out, p, t->n_elems * 4);
    } else if (strcmp(t->dtype, "F16") == 0) {
        for (uint64_t i = 0; i < t->n_elems; i++)
            out[i] = fp16_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    } else if (strcmp(t->dtype, "BF16") == 0) {
        for (uint64_t i = 0; i < t->n_elems; i++) {
            uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &bits, 4);
        }
    } else {
        return err_set(e, ALISA_EINVAL, "%s: tensor '%s' has dtype %s (F32, F16 and BF16 are "
                       "read)", f->path, t->name, t->dtype);
    }
    return 0;
}
