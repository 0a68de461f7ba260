/* Structure-aware mutators for GGUF files and traces (contract in mutate.h).
 * Each walks the file's framing as its format documents it (GGUF v2/v3:
 * ggml's docs/gguf.md, as exec/gguf.c reads it; traces: traces/FORMAT.md),
 * collects the fields it may change, changes one, and rebuilds what the
 * change moved (a GGUF's data region re-aligned after a string resize, a
 * trace's CRCs). */
#include "mutate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* xorshift32: deterministic in the seed libFuzzer passes */
static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void wr(uint8_t *p, int n, uint64_t v)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* a boundary value for an unsigned field of n bytes, from the current one */
static uint64_t boundary_u(uint32_t *rng, uint64_t cur, int n)
{
    uint64_t max = n == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * n)) - 1;
    uint64_t v;
    switch (next_rand(rng) % 8) {
    case 0: v = next_rand(rng) % 4; break;                         /* 0..3 */
    case 1: v = (uint64_t)1 << (next_rand(rng) % (8 * n)); break;  /* a power of two */
    case 2: v = ((uint64_t)1 << (next_rand(rng) % (8 * n))) - 1; break;
    case 3: v = ((uint64_t)1 << (next_rand(rng) % (8 * n))) + 1; break;
    case 4: v = max - next_rand(rng) % 2; break;                   /* the maximum */
    case 5: v = max >> 1; break;                                   /* the signed maximum */
    case 6: v = cur * 2; break;
    default: v = cur + (next_rand(rng) % 2 ? 1 : -1); break;
    }
    return v & max;
}

static float boundary_f(uint32_t *rng, float cur)
{
    static const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-45f, 1e-38f, 3.4e38f, -3.4e38f,
                              65504.0f, 1e30f};
    switch (next_rand(rng) % 5) {
    case 0: return NAN;
    case 1: return next_rand(rng) % 2 ? INFINITY : -INFINITY;
    case 2: return cur * 2;
    case 3: return -cur;
    default: return v[next_rand(rng) % (sizeof v / sizeof v[0])];
    }
}

/* binary16 boundary values: NaN, infinities, the largest, subnormal, zero */
static uint16_t boundary_h(uint32_t *rng)
{
    static const uint16_t v[] = {0x7e00, 0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x0001, 0x0000, 0x8000,
                                 0x3c00};
    return v[next_rand(rng) % (sizeof v / sizeof v[0])];
}

/* ---- GGUF ---- */

enum { S_VALUE, S_KEY, S_STR, S_NAME, S_DIM, S_TTYPE, S_TOFF };

struct slot {
    uint8_t kind;
    uint8_t type; /* S_VALUE: the GGUF value type */
    size_t at;    /* the field's offset (a string's: its length prefix) */
};

struct tensor_ref {
    uint32_t type;
    uint64_t n_elems, offset;
};

#define MAX_SLOTS 4096
#define MAX_TENSORS 1024

struct gguf_walk {
    struct slot slot[MAX_SLOTS];
    size_t n_slots;
    struct tensor_ref t[MAX_TENSORS];
    size_t n_t;
    size_t header_end; /* after the last tensor info */
    uint64_t alignment;
};

static int value_size(uint32_t type)
{
    static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < 13 ? sz[type] : -1;
}

static void add_slot(struct gguf_walk *w, int kind, int type, size_t at)
{
    if (w->n_slots < MAX_SLOTS)
        w->slot[w->n_slots++] = (struct slot){(uint8_t)kind, (uint8_t)type, at};
}

/* Walks a string at *at; 0 when it runs past the end. */
static int walk_str(const uint8_t *d, size_t size, size_t *at)
{
    if (size - *at < 8)
        return 0;
    uint64_t n = rd(d + *at, 8);
    if (n > size - *at - 8)
        return 0;
    *at += 8 + (size_t)n;
    return 1;
}

static int walk_gguf(const uint8_t *d, size_t size, struct gguf_walk *w)
{
    w->n_slots = w->n_t = 0;
    w->alignment = 32;
    if (size < 24 || memcmp(d, "GGUF", 4) != 0)
        return 0;
    uint32_t version = (uint32_t)rd(d + 4, 4);
    if (version != 2 && version != 3)
        return 0;
    uint64_t n_t = rd(d + 8, 8), n_kv = rd(d + 16, 8);
    if (n_t > MAX_TENSORS || n_kv > size / 13)
        return 0;
    size_t at = 24;
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t key = at;
        if (!walk_str(d, size, &at) || size - at < 4)
            return 0;
        add_slot(w, S_KEY, 0, key);
        uint32_t type = (uint32_t)rd(d + at, 4);
        int is_align = rd(d + key, 8) == 17 && memcmp(d + key + 8, "general.alignment", 17) == 0;
        at += 4;
        if (type == 8) {
            size_t s = at;
            if (!walk_str(d, size, &at))
                return 0;
            add_slot(w, S_STR, 0, s);
        } else if (type == 9) {
            if (size - at < 12)
                return 0;
            uint32_t et = (uint32_t)rd(d + at, 4);
            uint64_t n = rd(d + at + 4, 8);
            at += 12;
            if (et == 8) {
                for (uint64_t j = 0; j < n; j++) {
                    size_t s = at;
                    if (!walk_str(d, size, &at))
                        return 0;
                    if (j < 64)
                        add_slot(w, S_STR, 0, s);
                }
            } else {
                int es = value_size(et);
                if (es <= 0 || n > (size - at) / (uint64_t)es)
                    return 0;
                for (uint64_t j = 0; j < n && j < 64; j++)
                    add_slot(w, S_VALUE, (int)et, at + (size_t)j * (size_t)es);
                at += (size_t)n * (size_t)es;
            }
        } else {
            int vs = value_size(type);
            if (vs <= 0 || size - at < (size_t)vs)
                return 0;
            if (is_align && type == 4)
                w->alignment = rd(d + at, 4);
            add_slot(w, S_VALUE, (int)type, at);
            at += (size_t)vs;
        }
    }
    for (uint64_t i = 0; i < n_t; i++) {
        size_t name = at;
        if (!walk_str(d, size, &at) || size - at < 4)
            return 0;
        add_slot(w, S_NAME, 0, name);
        uint32_t nd = (uint32_t)rd(d + at, 4);
        at += 4;
        if (nd == 0 || nd > 4 || size - at < 8 * (size_t)nd + 12)
            return 0;
        uint64_t ne = 1;
        for (uint32_t k = 0; k < nd; k++) {
            add_slot(w, S_DIM, 0, at);
            uint64_t dim = rd(d + at, 8);
            ne = dim && ne > UINT64_MAX / dim ? UINT64_MAX : ne * dim;
            at += 8;
        }
        add_slot(w, S_TTYPE, 0, at);
        add_slot(w, S_TOFF, 0, at + 4);
        w->t[w->n_t++] = (struct tensor_ref){(uint32_t)rd(d + at, 4), ne, rd(d + at + 4, 8)};
        at += 12;
    }
    if (w->alignment == 0 || w->alignment > 4096)
        w->alignment = 32;
    w->header_end = at;
    return 1;
}

/* names the loaders look up: a renamed key or tensor reaches them */
static const char *const gguf_names[] = {
    "general.architecture", "general.alignment", "llama.embedding_length",
    "llama.feed_forward_length", "llama.block_count", "llama.attention.head_count",
    "llama.attention.head_count_kv", "llama.context_length", "llama.rope.freq_base",
    "llama.attention.layer_norm_rms_epsilon", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.scores",
    "token_embd.weight", "output.weight", "output_norm.weight", "blk.0.attn_norm.weight",
    "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
    "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
    "blk.0.ffn_up.weight", "blk.0.ffn_down.weight", "blk.1.attn_q.weight", "llama",
};
#define N_GGUF_NAMES (sizeof gguf_names / sizeof gguf_names[0])

/* Replaces the string at s.at with n bytes of src (src may be NULL: the
 * old bytes repeated, or 'a'), moving the data region to the next aligned
 * offset after the header so every tensor keeps its bytes. Returns the new
 * size, or 0 when it would not fit max_size. */
static size_t resize_string(uint8_t *d, size_t size, size_t max_size, const struct gguf_walk *w,
                            size_t at, const char *src, size_t n)
{
    uint64_t old = rd(d + at, 8);
    size_t a = (size_t)w->alignment;
    size_t data0 = (w->header_end + a - 1) / a * a;
    if (data0 > size)
        data0 = size; /* a header with no data region after it */
    size_t end1 = w->header_end - (size_t)old + n;
    size_t data1 = (end1 + a - 1) / a * a;
    size_t size1 = data1 + (size - data0);
    if (size1 > max_size)
        return 0;
    uint8_t *out = malloc(size1 ? size1 : 1);
    if (!out)
        return 0;
    memcpy(out, d, at);
    wr(out + at, 8, n);
    for (size_t i = 0; i < n; i++)
        out[at + 8 + i] = src ? (uint8_t)src[i] : old ? d[at + 8 + i % old] : 'a';
    size_t rest = at + 8 + (size_t)old; /* the header after the string */
    memcpy(out + at + 8 + n, d + rest, w->header_end - rest);
    memset(out + end1, 0, data1 - end1);
    memcpy(out + data1, d + data0, size - data0);
    memcpy(d, out, size1);
    free(out);
    return size1;
}

size_t fuzz_mutate_gguf(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
    static struct gguf_walk w; /* 70 KB: one mutation at a time */
    uint32_t rng = seed * 2654435761u + 1;
    if (!walk_gguf(data, size, &w) || w.n_slots == 0)
        return 0;
    size_t a = (size_t)w.alignment;
    size_t data0 = (w.header_end + a - 1) / a * a;
    uint32_t op = next_rand(&rng) % 8;
    if (op == 7 && w.n_t && data0 < size) { /* a weight in the data: non-finite, extreme */
        const struct tensor_ref *t = &w.t[next_rand(&rng) % w.n_t];
        if (t->offset >= size - data0)
            return size;
        size_t base = data0 + (size_t)t->offset, room = size - base;
        uint64_t ne = t->n_elems;
        if (t->type == 0 && ne && room >= 4) { /* F32 */
            size_t i = (size_t)(next_rand(&rng) % (ne < room / 4 ? ne : room / 4));
            float f;
            memcpy(&f, data + base + 4 * i, 4);
            f = boundary_f(&rng, f);
            memcpy(data + base + 4 * i, &f, 4);
        } else if (t->type == 1 && ne && room >= 2) { /* F16 */
            size_t i = (size_t)(next_rand(&rng) % (ne < room / 2 ? ne : room / 2));
            wr(data + base + 2 * i, 2, boundary_h(&rng));
        } else if (t->type == 8 && room >= 34) { /* Q8_0: a block's binary16 scale */
            size_t blocks = (size_t)(ne / 32 < room / 34 ? ne / 32 : room / 34);
            if (blocks)
                wr(data + base + 34 * (next_rand(&rng) % blocks), 2, boundary_h(&rng));
        } else {
            data[base + next_rand(&rng) % room] ^= (uint8_t)(1u << (next_rand(&rng) % 8));
        }
        return size;
    }
    const struct slot *s = &w.slot[next_rand(&rng) % w.n_slots];
    switch (s->kind) {
    case S_VALUE: {
        int n = value_size(s->type);
        if (s->type == 6) {
            float f;
            memcpy(&f, data + s->at, 4);
            f = boundary_f(&rng, f);
            memcpy(data + s->at, &f, 4);
        } else if (s->type == 12) {
            double f;
            memcpy(&f, data + s->at, 8);
            f = boundary_f(&rng, (float)f);
            memcpy(data + s->at, &f, 8);
        } else {
            wr(data + s->at, n, boundary_u(&rng, rd(data + s->at, n), n));
        }
        return size;
    }
    case S_DIM:
        wr(data + s->at, 8, boundary_u(&rng, rd(data + s->at, 8), next_rand(&rng) % 2 ? 2 : 8));
        return size;
    case S_TTYPE: {
        static const uint32_t types[] = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 30,
                                         0xffffffffu};
        wr(data + s->at, 4, types[next_rand(&rng) % (sizeof types / sizeof types[0])]);
        return size;
    }
    case S_TOFF: {
        uint64_t off = rd(data + s->at, 8);
        switch (next_rand(&rng) % 3) {
        case 0: off = next_rand(&rng) % 2 ? off + a : off - a; break;
        case 1: off = w.n_t ? w.t[next_rand(&rng) % w.n_t].offset : 0; break; /* overlap */
        default: off = boundary_u(&rng, off, 8); break;
        }
        wr(data + s->at, 8, off);
        return size;
    }
    default: { /* a key, tensor name or string value: renamed or resized */
        uint64_t old = rd(data + s->at, 8);
        size_t r;
        if (s->kind != S_STR && next_rand(&rng) % 2) {
            const char *nm = gguf_names[next_rand(&rng) % N_GGUF_NAMES];
            r = resize_string(data, size, max_size, &w, s->at, nm, strlen(nm));
        } else {
            size_t n;
            switch (next_rand(&rng) % 4) {
            case 0: n = 0; break;
            case 1: n = (size_t)old / 2; break;
            case 2: n = (size_t)old * 2 + 1; break;
            default: n = (size_t)old + 1; break;
            }
            r = resize_string(data, size, max_size, &w, s->at, NULL, n > 4096 ? 4096 : n);
        }
        return r ? r : size;
    }
    }
}

/* ---- traces ---- */

#define TRACE_FILE_HEADER 16
#define MAX_CHUNKS 4096

struct chunk {
    size_t at;  /* the tag */
    uint32_t len;
};

static size_t walk_trace(const uint8_t *d, size_t size, struct chunk *c)
{
    if (size < TRACE_FILE_HEADER || memcmp(d, "ALISATRC", 8) != 0)
        return 0;
    size_t n = 0, at = TRACE_FILE_HEADER;
    while (n < MAX_CHUNKS && size - at >= 12) {
        uint32_t len = (uint32_t)rd(d + at + 4, 4);
        if (len > size - at - 12)
            break;
        c[n++] = (struct chunk){at, len};
        at += 12 + (size_t)len;
    }
    return n;
}

int fuzz_trace_fix_crc(uint8_t *data, size_t size)
{
    static struct chunk c[MAX_CHUNKS];
    size_t n = walk_trace(data, size, c);
    for (size_t i = 0; i < n; i++) {
        uLong crc = crc32(0L, Z_NULL, 0);
        crc = crc32(crc, data + c[i].at, 8 + c[i].len);
        wr(data + c[i].at + 8 + c[i].len, 4, (uint32_t)crc);
    }
    return (int)n;
}

size_t fuzz_mutate_trace(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
    static struct chunk c[MAX_CHUNKS];
    uint32_t rng = seed * 2654435761u + 7;
    size_t n = walk_trace(data, size, c);
    if (n == 0)
        return 0;
    size_t k = next_rand(&rng) % n;
    size_t at = c[k].at, whole = 12 + (size_t)c[k].len;
    uint8_t *p = data + at + 8;
    uint32_t len = c[k].len;
    switch (next_rand(&rng) % 8) {
    case 0: case 1: case 2: /* a field of the payload: a count, an index, a weight */
        if (len >= 4) {
            size_t off = (next_rand(&rng) % (len / 2)) * 2;
            if (off + 4 > len)
                off = len - 4;
            uint32_t r = next_rand(&rng) % 3;
            if (r == 0) {
                float f;
                memcpy(&f, p + off, 4);
                f = boundary_f(&rng, f);
                memcpy(p + off, &f, 4);
            } else if (r == 1) {
                wr(p + off, 2, boundary_h(&rng));
            } else {
                wr(p + off, 4, boundary_u(&rng, rd(p + off, 4), 4));
            }
        }
        break;
    case 3: /* a byte */
        if (len)
            p[next_rand(&rng) % len] ^= (uint8_t)(1u << (next_rand(&rng) % 8));
        break;
    case 4: /* dropped */
        memmove(data + at, data + at + whole, size - at - whole);
        size -= whole;
        break;
    case 5: /* duplicated */
        if (size + whole <= max_size) {
            memmove(data + at + whole, data + at, size - at);
            size += whole;
        }
        break;
    case 6: /* swapped with the next */
        if (k + 1 < n) {
            size_t w2 = 12 + (size_t)c[k + 1].len;
            uint8_t *tmp = malloc(whole);
            if (tmp) {
                memcpy(tmp, data + at, whole);
                memmove(data + at, data + at + whole, w2);
                memcpy(data + at + w2, tmp, whole);
                free(tmp);
            }
        }
        break;
    default: /* cut short */
        if (len) {
            uint32_t cut = 1 + next_rand(&rng) % len;
            memmove(p + len - cut, p + len, size - (at + 8 + len));
            size -= cut;
            wr(data + at + 4, 4, len - cut);
        }
        break;
    }
    fuzz_trace_fix_crc(data, size);
    return size;
}
