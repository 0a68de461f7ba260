/* Catalog loading: inih does the INI syntax; this file maps keys onto struct
 * fields through one descriptor table per entry kind.
 *
 * Unknown keys, duplicate sections, non-numeric or out-of-range values and
 * missing required keys are errors with file:line. Checkpoint entries are
 * resolved against the models directory through llama2c.h.
 */
#include "catalog.h"

#include "names.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "llama2c.h"

#ifndef ALISA_CATALOG_DIR
#define ALISA_CATALOG_DIR "sim/model/catalog"
#endif
#ifndef ALISA_DEFAULT_MODELS
#define ALISA_DEFAULT_MODELS "../shared/models"
#endif

const char *catalog_default_dir(void)
{
    const char *env = getenv("ALISA_CATALOG");
    return env && *env ? env : ALISA_CATALOG_DIR;
}

const char *catalog_models_dir(void)
{
    const char *env = getenv("ALISA_MODELS");
    return env && *env ? env : ALISA_DEFAULT_MODELS;
}

enum field_type { FIELD_U32, FIELD_DOUBLE, FIELD_STR, FIELD_GEMM_TABLE, FIELD_NAMED_TABLE };

struct field {
    const char *key;
    enum field_type type;
    size_t offset;
    size_t size;   /* bytes of a FIELD_STR buffer */
    int required;  /* for shape-only model entries and every profile */
};

#define MF(key, type, member, req) \
    {key, type, offsetof(struct model_shape, member), sizeof(((struct model_shape *)0)->member), req}
static const struct field model_fields[] = {
    MF("family", FIELD_STR, family, 1),
    MF("layers", FIELD_U32, n_layers, 1),
    MF("hidden", FIELD_U32, hidden, 1),
    MF("heads", FIELD_U32, n_heads, 1),
    MF("kv_heads", FIELD_U32, n_kv_heads, 1),
    MF("ffn", FIELD_U32, ffn, 1),
    MF("ffn_matrices", FIELD_U32, ffn_matrices, 1),
    MF("vocab", FIELD_U32, vocab, 1),
    MF("tied_embeddings", FIELD_U32, tied_embeddings, 1),
    MF("max_seq", FIELD_U32, max_seq, 1),
    MF("params", FIELD_DOUBLE, params, 1),
    MF("weight_bytes_fp16", FIELD_DOUBLE, weight_bytes_fp16, 1),
    MF("checkpoint", FIELD_STR, checkpoint, 0),
    MF("format", FIELD_STR, format, 0),
    MF("tokenizer", FIELD_STR, tokenizer, 0),
    MF("hf_id", FIELD_STR, hf_id, 0),
};
#define HF(key, type, member) \
    {key, type, offsetof(struct hw_profile, member), sizeof(((struct hw_profile *)0)->member), 1}
#define HFO(key, type, member) \
    {key, type, offsetof(struct hw_profile, member), sizeof(((struct hw_profile *)0)->member), 0}
static const struct field hw_fields[] = {
    HF("gpu", FIELD_STR, gpu),
    HF("gpu_mem_gib", FIELD_DOUBLE, gpu_mem_gib),
    HF("hbm_gbps", FIELD_DOUBLE, hbm_gbps),
    HF("fp16_tflops", FIELD_DOUBLE, fp16_tflops),
    HF("host_dram_gib", FIELD_DOUBLE, host_dram_gib),
    HF("link_gbps", FIELD_DOUBLE, link_gbps),
    HF("link_latency_us", FIELD_DOUBLE, link_latency_us),
    HF("host_mem_gbps", FIELD_DOUBLE, host_mem_gbps),
    HF("gemm_efficiency", FIELD_DOUBLE, gemm_efficiency),
    HF("hbm_efficiency", FIELD_DOUBLE, hbm_efficiency),
    HFO("cpu_attn_traffic", FIELD_DOUBLE, cpu_attn_traffic),
    HFO("pageable_gbps", FIELD_DOUBLE, pageable_gbps),
    HFO("serial", FIELD_U32, serial),
    HFO("batched_copies", FIELD_U32, batched_copies),
    HFO("weight_bytes", FIELD_DOUBLE, weight_bytes),
    HFO("attn_ns_per_token", FIELD_DOUBLE, attn_ns_per_token),
    HFO("attn_ns_fixed", FIELD_DOUBLE, attn_ns_fixed),
    HFO("attn_ns_per_layer", FIELD_DOUBLE, attn_ns_per_layer),
    HFO("attn_ns_per_token_by_kv", FIELD_GEMM_TABLE, attn_by_kv),
    HFO("attn_sparse_ns_per_token_by_kv", FIELD_GEMM_TABLE, attn_sparse_by_kv),
    HFO("recompute_ns", FIELD_DOUBLE, recompute_ns),
    HFO("weight_gemm_ns_per_byte", FIELD_GEMM_TABLE, weight_gemm),
    HFO("head_gemm_ns_per_byte", FIELD_GEMM_TABLE, head_gemm),
    HFO("weight_kernel_ns_per_byte", FIELD_GEMM_TABLE, weight_kernel),
    HFO("head_kernel_ns_per_byte", FIELD_GEMM_TABLE, head_kernel),
    HFO("sched_ns_per_token", FIELD_NAMED_TABLE, sched_ns),
    HFO("sched_ns_per_layer", FIELD_NAMED_TABLE, sched_layer_ns),
    HFO("sched_ns_per_stream", FIELD_NAMED_TABLE, sched_stream_ns),
    HFO("sched_ns_per_retired", FIELD_NAMED_TABLE, sched_retired_ns),
    HFO("sched_ns_per_attended", FIELD_NAMED_TABLE, sched_attended_ns),
    HFO("kv_ns_per_token", FIELD_DOUBLE, kv_ns_per_token),
    HFO("kv_ns_per_stream", FIELD_DOUBLE, kv_ns_per_stream),
    HFO("kv_ns_per_layer", FIELD_DOUBLE, kv_ns_per_layer),
    HFO("weight_probe_gbps", FIELD_DOUBLE, weight_probe_gbps),
    HFO("weight_probe_spread", FIELD_DOUBLE, weight_probe_spread),
    HFO("dense_attn_ns_per_layer", FIELD_DOUBLE, dense_attn_ns_per_layer),
    HFO("dense_attn_ns_per_row", FIELD_DOUBLE, dense_attn_ns_per_row),
    HFO("dense_attn_ns_per_prompt_pair", FIELD_DOUBLE, dense_attn_ns_per_prompt_pair),
    HFO("dense_attn_ns_per_decode_token", FIELD_DOUBLE, dense_attn_ns_per_decode_token),
    HFO("dense_attn_one_ns_per_layer", FIELD_DOUBLE, dense_attn_one_ns_per_layer),
    HFO("dense_attn_one_ns_per_token", FIELD_DOUBLE, dense_attn_one_ns_per_token),
    HFO("dense_attn_parallel_min", FIELD_DOUBLE, dense_attn_parallel_min),
};
#define SF(key, type, member, req) \
    {key, type, offsetof(struct sw_profile, member), sizeof(((struct sw_profile *)0)->member), req}
static const struct field sw_fields[] = {
    SF("op_host_us", FIELD_DOUBLE, op_host_us, 1),
    SF("ops_per_layer", FIELD_U32, ops_per_layer, 1),
    SF("selection_ops_per_layer", FIELD_NAMED_TABLE, selection_ops, 0),
    SF("pageable_relay", FIELD_U32, pageable_relay, 0),
};
#define N_MODEL_FIELDS (sizeof model_fields / sizeof model_fields[0])
#define N_SW_FIELDS (sizeof sw_fields / sizeof sw_fields[0])
#define N_HW_FIELDS (sizeof hw_fields / sizeof hw_fields[0])
_Static_assert(N_MODEL_FIELDS <= 64 && N_SW_FIELDS <= 64 && N_HW_FIELDS <= 64,
               "a field a bit of parse_ctx.seen");

/* State of one inih pass over one file. */
struct parse_ctx {
    const char *path;
    const struct field *fields;
    size_t n_fields;
    size_t entry_size;   /* sizeof the entry struct */
    size_t name_size;    /* the entry's name[] is its first member */
    void **entries;      /* (*count) entries of entry_size bytes */
    size_t *count;
    size_t first_new;    /* entries from this file start here */
    uint64_t *seen;      /* (*count) bitmask of keys set, bit i = fields[i] (at most
                            64 fields: asserted where each table is declared) */
    char msg[256];       /* first handler error */
    int oom;
    int last_field;      /* the field the previous line set, -1 none: an indented line
                            under a table continues it (inih hands it over under the
                            same name) */
};

/* Bounds of the model shapes, and physical bounds of the profile figures:
 * wide enough for any machine from a phone to a cluster node and for alisa
 * calibrate's CPU figures (a CPU "fp16_tflops" of 0.04), narrow enough to
 * refuse what no machine has (a bandwidth of 1e-300 GB/s that makes every
 * step last forever). Fields not listed: any finite non-negative number
 * (integers: up to 2^32 - 1). */
static const struct bound {
    const char *key;
    double min, max;
} bounds[] = {
    {"gpu_mem_gib", 1e-3, 1e6},     {"host_dram_gib", 1e-3, 1e8},
    {"hbm_gbps", 1e-3, 1e6},        {"fp16_tflops", 1e-6, 1e5},
    {"link_gbps", 1e-3, 1e5},       {"link_latency_us", 0, 1e6},
    {"host_mem_gbps", 1e-3, 1e6},   {"weight_bytes", 0, 8},
    {"attn_ns_per_token", 0, 1e9},  {"attn_ns_fixed", 0, 1e12},
    {"attn_ns_per_layer", 0, 1e12}, {"recompute_ns", 0, 1e12},
    {"kv_ns_per_token", 0, 1e9},    {"kv_ns_per_stream", 0, 1e12},
    {"kv_ns_per_layer", 0, 1e12},   {"weight_probe_gbps", 0, 1e6},   {"weight_probe_spread", 0, 10},
    {"op_host_us", 0, 1e6},
    {"dense_attn_ns_per_layer", 0, 1e12}, {"dense_attn_ns_per_row", 0, 1e12},
    {"dense_attn_ns_per_prompt_pair", 0, 1e9}, {"dense_attn_ns_per_decode_token", 0, 1e9},
    {"dense_attn_one_ns_per_layer", 0, 1e12}, {"dense_attn_one_ns_per_token", 0, 1e9},
    {"dense_attn_parallel_min", 0, 1e15},
    /* model shapes (issue 48: a catalog's layers = 4e9 grew without end):
     * wider than any published model (Llama 3.1 405B: 126 layers, hidden
     * 16384, ffn 53248; Gemma: vocabulary 256k; contexts of 1M), so every
     * buffer a shape sizes stays bounded */
    {"layers", 1, 1024},            {"hidden", 1, 131072},
    {"heads", 1, 4096},             {"kv_heads", 1, 4096},
    {"ffn", 1, 1048576},            {"ffn_matrices", 1, 3},
    {"vocab", 1, 4194304},          {"tied_embeddings", 0, 1},
    {"max_seq", 1, 4194304},
};

static int parse_value(const struct field *f, const char *value, void *dst, char *msg, size_t cap)
{
    char *end;
    errno = 0;
    switch (f->type) {
    case FIELD_U32: {
        unsigned long long v = strtoull(value, &end, 10);
        if (end == value || *end || errno || v > UINT32_MAX || value[0] == '-') {
            snprintf(msg, cap, "%s = '%s' is not a non-negative integer", f->key, value);
            return -1;
        }
        for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
            if (strcmp(bounds[i].key, f->key) == 0 && (v < bounds[i].min || v > bounds[i].max)) {
                snprintf(msg, cap, "%s = %s is outside [%.0f, %.0f]", f->key, value,
                         bounds[i].min, bounds[i].max);
                return -1;
            }
        *(uint32_t *)dst = (uint32_t)v;
        return 0;
    }
    case FIELD_DOUBLE: {
        double v = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(v) || v < 0) {
            snprintf(msg, cap, "%s = '%s' is not a non-negative number", f->key, value);
            return -1;
        }
        for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
            if (strcmp(bounds[i].key, f->key) == 0 && (v < bounds[i].min || v > bounds[i].max)) {
                snprintf(msg, cap, "%s = %s is outside the physical range [%g, %g]", f->key,
                         value, bounds[i].min, bounds[i].max);
                return -1;
            }
        *(double *)dst = v;
        return 0;
    }
    case FIELD_GEMM_TABLE: { /* "ROWS:NS ROWS:NS ...", rows increasing */
        struct gemm_table *t = dst;
        const char *q = value;
        t->n = 0;
        while (*q) {
            char *colon;
            double r = strtod(q, &colon), v;
            if (colon == q || *colon != ':' || !(r >= 1 && r <= 1e12) || r != floor(r) ||
                (t->n && r <= t->rows[t->n - 1])) {
                snprintf(msg, cap, "%s: '%s' at '%s': expected KEY:VALUE pairs with whole, "
                         "increasing keys (rows, KiB)", f->key, value, q);
                return -1;
            }
            v = strtod(colon + 1, &end);
            if (end == colon + 1 || !isfinite(v) || v <= 0 || v > 1e12 ||
                (*end && *end != ' ')) {
                snprintf(msg, cap, "%s: '%s' at '%s': each value (ns) must be a positive "
                         "number up to 1e12",
                         f->key, value, q);
                return -1;
            }
            if (t->n == GEMM_TABLE_MAX) {
                snprintf(msg, cap, "%s: more than %d points", f->key, GEMM_TABLE_MAX);
                return -1;
            }
            t->rows[t->n] = r;
            t->ns_per_byte[t->n++] = v;
            q = end;
            while (*q == ' ')
                q++;
        }
        if (t->n == 0) {
            snprintf(msg, cap, "%s: no points", f->key);
            return -1;
        }
        return 0;
    }
    case FIELD_NAMED_TABLE: { /* "NAME:VALUE NAME:VALUE ..." */
        struct named_table *t = dst;
        const char *q = value;
        t->n = 0;
        while (*q) {
            const char *colon = strchr(q, ':'), *sp = strchr(q, ' ');
            size_t len = colon ? (size_t)(colon - q) : 0;
            double v = colon && (!sp || colon < sp) ? strtod(colon + 1, &end) : -1;
            if (!len || len >= sizeof t->name[0] || (sp && sp < colon) || !isfinite(v) ||
                v < 0 || (*end && *end != ' ')) {
                snprintf(msg, cap, "%s: '%s' at '%s': expected NAME:VALUE pairs, values "
                         "non-negative", f->key, value, q);
                return -1;
            }
            if (t->n == NAMED_TABLE_MAX) {
                snprintf(msg, cap, "%s: more than %d pairs", f->key, NAMED_TABLE_MAX);
                return -1;
            }
            memcpy(t->name[t->n], q, len);
            t->name[t->n][len] = 0;
            t->value[t->n++] = v;
            q = end;
            while (*q == ' ')
                q++;
        }
        return 0;
    }
    case FIELD_STR:
        if (strlen(value) >= f->size) {
            snprintf(msg, cap, "%s: value of %zu characters is longer than %zu", f->key,
                     strlen(value), f->size - 1);
            return -1;
        }
        strcpy(dst, value);
        return 0;
    }
    return -1;
}

/* An indented line under a table's key: its pairs appended to the table,
 * rows still increasing. 0, or -1 with msg set. */
static int table_continues(const struct field *f, const char *value, void *dst, char *msg,
                           size_t cap)
{
    struct gemm_table *t = dst, more;
    if (parse_value(f, value, &more, msg, cap))
        return -1;
    if (more.rows[0] <= t->rows[t->n - 1]) {
        snprintf(msg, cap, "%s: continued at '%s': rows must keep increasing after %.0f", f->key,
                 value, t->rows[t->n - 1]);
        return -1;
    }
    if (t->n + more.n > GEMM_TABLE_MAX) {
        snprintf(msg, cap, "%s: more than %d points", f->key, GEMM_TABLE_MAX);
        return -1;
    }
    for (uint32_t i = 0; i < more.n; i++) {
        t->rows[t->n] = more.rows[i];
        t->ns_per_byte[t->n++] = more.ns_per_byte[i];
    }
    return 0;
}

static int catalog_ini_handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *p = user;
    if (p->msg[0])
        return 1; /* keep the first error only; inih reports its line */
    if (!section[0]) {
        snprintf(p->msg, sizeof p->msg, "key '%s' outside any [section]", name);
        return 0;
    }
    size_t n = *p->count;
    char *base = *p->entries;
    char *cur = n > p->first_new ? base + (n - 1) * p->entry_size : NULL;
    if (!cur || strcmp(cur, section) != 0) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(base + i * p->entry_size, section) == 0) {
                snprintf(p->msg, sizeof p->msg, "section [%s] appears twice", section);
                return 0;
            }
        if (strlen(section) >= p->name_size) {
            snprintf(p->msg, sizeof p->msg, "section name '%s' is too long", section);
            return 0;
        }
        char *grown = realloc(base, (n + 1) * p->entry_size);
        uint64_t *seen = realloc(p->seen, (n + 1) * sizeof *seen);
        if (grown)
            *p->entries = base = grown;
        if (seen)
            p->seen = seen;
        if (!grown || !seen) {
            p->oom = 1;
            snprintf(p->msg, sizeof p->msg, "out of memory");
            return 0;
        }
        cur = base + n * p->entry_size;
        memset(cur, 0, p->entry_size);
        strcpy(cur, section);
        p->seen[n] = 0;
        *p->count = ++n;
    }
    for (size_t i = 0; i < p->n_fields; i++) {
        const struct field *f = &p->fields[i];
        if (strcmp(f->key, name) != 0)
            continue;
        if (p->seen[n - 1] & (UINT64_C(1) << i)) {
            if (f->type == FIELD_GEMM_TABLE && p->last_field == (int)i)
                return table_continues(f, value, cur + f->offset, p->msg, sizeof p->msg) == 0;
            snprintf(p->msg, sizeof p->msg, "[%s]: key '%s' set twice", section, name);
            return 0;
        }
        if (parse_value(f, value, cur + f->offset, p->msg, sizeof p->msg))
            return 0;
        p->seen[n - 1] |= UINT64_C(1) << i;
        p->last_field = (int)i;
        return 1;
    }
    snprintf(p->msg, sizeof p->msg, "[%s]: unknown key '%s'", section, name);
    return 0;
}

/* Line of "[name]" in path, for errors found after parsing; 0 if not found. */
static int section_line(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512], want[128];
    snprintf(want, sizeof want, "[%s]", name);
    int no = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        no++;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        found = strncmp(s, want, strlen(want)) == 0;
    }
    fclose(f);
    return found ? no : 0;
}

int ini_check_lines(const char *path, struct alisa_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ALISA_EIO, "%s: cannot open", path);
    unsigned long line = 1, len = 0;
    int c, rc = 0;
    while ((c = getc(f)) != EOF && !rc) {
        if (c == '\n') {
            line++;
            len = 0;
        } else if (c != '\r' && ++len > INI_LINE_MAX) {
            rc = err_set(e, ALISA_EINVAL, "%s:%lu: line longer than %d characters (continue a "
                         "long value on indented lines)", path, line, INI_LINE_MAX);
        }
    }
    fclose(f);
    return rc;
}

static int parse_file(struct parse_ctx *p, struct alisa_err *e)
{
    p->first_new = *p->count;
    p->last_field = -1;
    int rc = ini_check_lines(p->path, e);
    if (rc)
        return rc == ALISA_EIO ? err_set(e, ALISA_EIO, "%s: cannot open catalog file", p->path)
                               : rc;
    int line = ini_parse(p->path, catalog_ini_handler, p);
    if (line == -1)
        return err_set(e, ALISA_EIO, "%s: cannot open catalog file", p->path);
    if (line == -2 || p->oom)
        return err_set(e, ALISA_ENOMEM, "%s: out of memory", p->path);
    if (line > 0)
        return err_set(e, ALISA_EINVAL, "%s:%d: %s", p->path, line,
                       p->msg[0] ? p->msg : "syntax error (expected [section] or key = value)");
    return 0;
}

/* Reports a missing key of entry i; returns nonzero when one is missing. */
static int check_required(const struct parse_ctx *p, size_t i, int shape_only, struct alisa_err *e)
{
    const char *name = (const char *)*p->entries + i * p->entry_size;
    for (size_t k = 0; k < p->n_fields; k++)
        if (p->fields[k].required && shape_only && !(p->seen[i] & (UINT64_C(1) << k)))
            return err_set(e, ALISA_EINVAL, "%s:%d: [%s]: missing key '%s'", p->path,
                           section_line(p->path, name), name, p->fields[k].key);
    return 0;
}

/* Fills a checkpoint entry's shape from its file, or marks it unavailable. */
static void resolve_checkpoint(struct model_shape *m, const char *models_dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", models_dir, m->checkpoint);
    struct llama2c_header h;
    struct alisa_err e = {{0}};
    if (llama2c_read_header(path, &h, &e)) {
        m->available = 0;
        snprintf(m->note, sizeof m->note, "%s", e.msg);
        return;
    }
    m->n_layers = h.n_layers;
    m->hidden = h.dim;
    m->n_heads = h.n_heads;
    m->n_kv_heads = h.n_kv_heads;
    m->ffn = h.hidden_dim;
    m->ffn_matrices = 3;
    m->vocab = h.vocab;
    m->tied_embeddings = (uint32_t)h.shared_classifier;
    m->max_seq = h.seq_len;
    m->params = (double)h.n_params;
    m->weight_bytes_fp16 = 2.0 * (double)h.n_params;
    m->available = 1;
}

int catalog_load_models(struct catalog *c, const char *path, const char *models_dir,
                        struct alisa_err *e)
{
    struct parse_ctx p = {.path = path, .fields = model_fields, .n_fields = N_MODEL_FIELDS,
                          .entry_size = sizeof(struct model_shape),
                          .name_size = sizeof c->models[0].name,
                          .entries = (void **)&c->models, .count = &c->n_models};
    int rc = parse_file(&p, e);
    for (size_t i = p.first_new; !rc && i < c->n_models; i++) {
        struct model_shape *m = &c->models[i];
        int shape_only = m->checkpoint[0] == 0;
        if ((rc = check_required(&p, i, shape_only, e)))
            break;
        if (shape_only) {
            if (m->n_heads == 0 || m->n_kv_heads == 0 || m->hidden % m->n_heads ||
                m->n_heads % m->n_kv_heads || m->n_layers == 0 ||
                (m->ffn_matrices != 2 && m->ffn_matrices != 3) || m->tied_embeddings > 1)
                rc = err_set(e, ALISA_EINVAL,
                             "%s:%d: [%s]: inconsistent shape (hidden %u, heads %u, kv_heads %u, "
                             "layers %u, ffn_matrices %u, tied_embeddings %u)",
                             path, section_line(path, m->name), m->name, m->hidden, m->n_heads,
                             m->n_kv_heads, m->n_layers, m->ffn_matrices, m->tied_embeddings);
            m->available = 1;
        } else if (strcmp(m->format, "llama2c") != 0) {
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: checkpoint format '%s' unknown (known: llama2c)",
                         path, section_line(path, m->name), m->name, m->format);
        } else {
            resolve_checkpoint(m, models_dir);
        }
    }
    free(p.seen);
    if (rc)
        catalog_deinit(c);
    return rc;
}

int catalog_load_hardware(struct catalog *c, const char *path, struct alisa_err *e)
{
    struct parse_ctx p = {.path = path, .fields = hw_fields, .n_fields = N_HW_FIELDS,
                          .entry_size = sizeof(struct hw_profile),
                          .name_size = sizeof c->hw[0].name,
                          .entries = (void **)&c->hw, .count = &c->n_hw};
    int rc = parse_file(&p, e);
    for (size_t i = p.first_new; !rc && i < c->n_hw; i++) {
        const struct hw_profile *h = &c->hw[i];
        if ((rc = check_required(&p, i, 1, e)))
            break;
        if (h->gpu_mem_gib <= 0 || h->hbm_gbps <= 0 || h->fp16_tflops <= 0 || h->link_gbps <= 0 ||
            h->host_mem_gbps <= 0)
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: memory, bandwidths and FLOP/s must be positive",
                         path, section_line(path, h->name), h->name);
        else if (!(h->gemm_efficiency > 0 && h->gemm_efficiency <= 1) ||
                 !(h->hbm_efficiency > 0 && h->hbm_efficiency <= 1))
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: efficiencies %g and %g must be in (0, 1]",
                         path, section_line(path, h->name), h->name, h->gemm_efficiency,
                         h->hbm_efficiency);
        else if (!(h->pageable_gbps >= 0 && h->pageable_gbps <= 1e4))
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: pageable_gbps = %g must be in [0, 10000]",
                         path, section_line(path, h->name), h->name, h->pageable_gbps);
        else if (!(h->cpu_attn_traffic >= 0 && h->cpu_attn_traffic <= 1000))
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: cpu_attn_traffic = %g must be in [0, 1000]",
                         path, section_line(path, h->name), h->name, h->cpu_attn_traffic);
        else if (h->serial > 1)
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: serial = %u must be 0 or 1", path,
                         section_line(path, h->name), h->name, h->serial);
    }
    free(p.seen);
    if (rc)
        catalog_deinit(c);
    return rc;
}

int catalog_load_software(struct catalog *c, const char *path, struct alisa_err *e)
{
    struct parse_ctx p = {.path = path, .fields = sw_fields, .n_fields = N_SW_FIELDS,
                          .entry_size = sizeof(struct sw_profile),
                          .name_size = sizeof c->sw[0].name,
                          .entries = (void **)&c->sw, .count = &c->n_sw};
    int rc = parse_file(&p, e);
    for (size_t i = p.first_new; !rc && i < c->n_sw; i++) {
        const struct sw_profile *s = &c->sw[i];
        if ((rc = check_required(&p, i, 1, e)))
            break;
        if (s->pageable_relay > 1)
            rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: pageable_relay = %u must be 0 or 1", path,
                         section_line(path, s->name), s->name, s->pageable_relay);
        for (uint32_t k = 0; !rc && k < s->selection_ops.n; k++)
            if (s->selection_ops.value[k] != floor(s->selection_ops.value[k]) ||
                s->selection_ops.value[k] > 1e4)
                rc = err_set(e, ALISA_EINVAL, "%s:%d: [%s]: selection_ops_per_layer %s:%g must be "
                             "a whole number of operations (0 to 10000)", path,
                             section_line(path, s->name), s->name, s->selection_ops.name[k],
                             s->selection_ops.value[k]);
    }
    free(p.seen);
    if (rc)
        catalog_deinit(c);
    return rc;
}

int catalog_load(struct catalog *c, const char *dir, const char *models_dir, struct alisa_err *e)
{
    memset(c, 0, sizeof *c);
    char path[600];
    snprintf(path, sizeof path, "%s/models.ini", dir);
    int rc = catalog_load_models(c, path, models_dir, e);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/hardware.ini", dir);
    if ((rc = catalog_load_hardware(c, path, e)))
        return rc;
    snprintf(path, sizeof path, "%s/software.ini", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* a catalog without software profiles: systems pay no host costs */
    fclose(f);
    return catalog_load_software(c, path, e);
}

const struct model_shape *catalog_model(const struct catalog *c, const char *name)
{
    for (size_t i = 0; i < c->n_models; i++) /* the exact name first */
        if (strcmp(c->models[i].name, name) == 0)
            return &c->models[i];
    for (size_t i = 0; i < c->n_models; i++)
        if (strcasecmp(c->models[i].name, name) == 0 ||
            (c->models[i].hf_id[0] && strcasecmp(c->models[i].hf_id, name) == 0))
            return &c->models[i];
    return NULL;
}

const struct hw_profile *catalog_hw(const struct catalog *c, const char *name)
{
    for (size_t i = 0; i < c->n_hw; i++) /* the exact name first */
        if (strcmp(c->hw[i].name, name) == 0)
            return &c->hw[i];
    for (size_t i = 0; i < c->n_hw; i++)
        if (strcasecmp(c->hw[i].name, name) == 0)
            return &c->hw[i];
    return NULL;
}

const struct sw_profile *catalog_sw(const struct catalog *c, const char *name)
{
    for (size_t i = 0; i < c->n_sw; i++)
        if (strcmp(c->sw[i].name, name) == 0)
            return &c->sw[i];
    for (size_t i = 0; i < c->n_sw; i++)
        if (strcasecmp(c->sw[i].name, name) == 0)
            return &c->sw[i];
    return NULL;
}

/* Keeps candidate when it is nearer to name than *best so far. */
static void nearer(const char *name, const char *candidate, const char *shown, size_t *best_d,
                   const char **best)
{
    size_t d = candidate[0] ? names_distance(name, candidate) : SIZE_MAX;
    if (d < *best_d) {
        *best_d = d;
        *best = shown;
    }
}

static int not_found(const char *opt, const char *name, const char *best, size_t d,
                     const char *list, struct alisa_err *e)
{
    if (best && names_close(name, d))
        return err_set(e, ALISA_ENOTFOUND, "%s %s: not in the catalog; did you mean '%s'? (%s "
                       "lists them)", opt, name, best, list);
    return err_set(e, ALISA_ENOTFOUND, "%s %s: not in the catalog (%s lists them)", opt, name,
                   list);
}

int catalog_model_not_found(const struct catalog *c, const char *opt, const char *name,
                            struct alisa_err *e)
{
    size_t d = SIZE_MAX;
    const char *best = NULL;
    for (size_t i = 0; i < c->n_models; i++) {
        nearer(name, c->models[i].name, c->models[i].name, &d, &best);
        nearer(name, c->models[i].hf_id, c->models[i].name, &d, &best);
    }
    return not_found(opt, name, best, d, "alisa catalog models", e);
}

int catalog_hw_not_found(const struct catalog *c, const char *opt, const char *name,
                         struct alisa_err *e)
{
    size_t d = SIZE_MAX;
    const char *best = NULL;
    for (size_t i = 0; i < c->n_hw; i++)
        nearer(name, c->hw[i].name, c->hw[i].name, &d, &best);
    return not_found(opt, name, best, d, "alisa catalog hardware", e);
}

int catalog_sw_not_found(const struct catalog *c, const char *opt, const char *name,
                         struct alisa_err *e)
{
    size_t d = SIZE_MAX;
    const char *best = NULL;
    for (size_t i = 0; i < c->n_sw; i++)
        nearer(name, c->sw[i].name, c->sw[i].name, &d, &best);
    return not_found(opt, name, best, d, "alisa catalog software", e);
}

double catalog_param_estimate(const struct model_shape *m)
{
    double h = m->hidden, kv = (double)m->n_kv_heads * (m->hidden / m->n_heads);
    double per_layer = 2 * h * h + 2 * h * kv + (double)m->ffn_matrices * h * m->ffn;
    return m->n_layers * per_layer + (double)m->vocab * h * (m->tied_embeddings ? 1 : 2);
}

double catalog_kv_bytes_per_token(const struct model_shape *m)
{
    double head_dim = (double)m->hidden / m->n_heads;
    return 2.0 /* K and V */ * m->n_layers * m->n_kv_heads * head_dim * 2.0 /* FP16 */;
}

void catalog_deinit(struct catalog *c)
{
    free(c->models);
    free(c->hw);
    free(c->sw);
    memset(c, 0, sizeof *c);
}
