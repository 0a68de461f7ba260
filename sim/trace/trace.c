/* Trace format v1 reader and writer (layout in traces/FORMAT.md).
 *
 * Owns the byte layout: chunk framing, CRC-32 (zlib), row encodings, ordering
 * rules. Does not interpret the attention (statistics live in trace_stats.c).
 * Invariant: the reader never hands out a step that failed a structural check,
 * and every error names the file, the chunk's byte offset and the bad value.
 */
#include "trace.h"

#include "outfile.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fp16.h"

#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define TAG_HEAD TAG('H', 'E', 'A', 'D')
#define TAG_SEQ TAG('S', 'E', 'Q', ' ')
#define TAG_STEP TAG('S', 'T', 'E', 'P')
#define TAG_END TAG('E', 'N', 'D', ' ')

static const char trace_magic[8] = {'A', 'L', 'I', 'S', 'A', 'T', 'R', 'C'};
/* A chunk larger than this is taken as corruption, not a huge allocation. */
#define TRACE_MAX_CHUNK_BYTES (1u << 30)

/* ---- growable byte buffer for payloads ---- */

struct buf {
    uint8_t *p;  /* (cap) bytes */
    size_t len;  /* bytes used */
    size_t cap;  /* bytes allocated */
};

static int buf_reserve(struct buf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return ALISA_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

static void put_u8(struct buf *b, uint8_t v) { b->p[b->len++] = v; }
static void put_u16(struct buf *b, uint16_t v)
{
    b->p[b->len++] = (uint8_t)v;
    b->p[b->len++] = (uint8_t)(v >> 8);
}
static void put_u32(struct buf *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[b->len++] = (uint8_t)(v >> (8 * i));
}
static void put_u64(struct buf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[b->len++] = (uint8_t)(v >> (8 * i));
}
static void put_f32(struct buf *b, float f)
{
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    put_u32(b, v);
}
static int put_str(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT16_MAX)
        return ALISA_EINVAL;
    if (buf_reserve(b, 2 + n))
        return ALISA_ENOMEM;
    put_u16(b, (uint16_t)n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }
static float get_f32(const uint8_t *p)
{
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

static uint32_t chunk_crc(uint32_t tag, uint32_t len, const uint8_t *payload)
{
    uint8_t hdr[8];
    for (int i = 0; i < 4; i++) {
        hdr[i] = (uint8_t)(tag >> (8 * i));
        hdr[4 + i] = (uint8_t)(len >> (8 * i));
    }
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, hdr, 8);
    if (len)
        c = crc32(c, payload, len);
    return (uint32_t)c;
}

static void tag_name(uint32_t tag, char out[5])
{
    for (int i = 0; i < 4; i++) {
        char ch = (char)(tag >> (8 * i));
        out[i] = (ch >= 32 && ch < 127) ? ch : '?';
    }
    out[4] = 0;
}

/* ---- writer ---- */

struct writer_seq {
    uint32_t total;    /* prompt_len + gen_len */
    uint32_t next_pos; /* next position to be written */
};

struct trace_writer {
    FILE *f;
    char *path;      /* final name */
    char *part;      /* "<path>.part" */
    struct trace_header h;
    struct writer_seq *seqs; /* (h.n_seqs) */
    uint32_t n_declared;     /* SEQ chunks written */
    uint64_t n_steps;        /* STEP chunks written */
    struct buf payload;
    int write_failed;
};

static int writer_chunk(struct trace_writer *w, uint32_t tag, struct alisa_err *e)
{
    uint32_t len = (uint32_t)w->payload.len;
    uint8_t hdr[8];
    for (int i = 0; i < 4; i++) {
        hdr[i] = (uint8_t)(tag >> (8 * i));
        hdr[4 + i] = (uint8_t)(len >> (8 * i));
    }
    uint32_t crc = chunk_crc(tag, len, w->payload.p);
    uint8_t tail[4];
    for (int i = 0; i < 4; i++)
        tail[i] = (uint8_t)(crc >> (8 * i));
    if (fwrite(hdr, 1, 8, w->f) != 8 || (len && fwrite(w->payload.p, 1, len, w->f) != len) ||
        fwrite(tail, 1, 4, w->f) != 4) {
        w->write_failed = 1;
        return err_set(e, ALISA_EIO, "%s: write failed (disk full?)", w->part);
    }
    w->payload.len = 0;
    return 0;
}

void trace_writer_destroy(struct trace_writer *w)
{
    if (!w)
        return;
    if (w->f) {
        fclose(w->f);
        remove(w->part);
    }
    free(w->path);
    free(w->part);
    free(w->seqs);
    free(w->payload.p);
    free(w);
}

int trace_writer_open(struct trace_writer **out, const char *path,
                      const struct trace_header *h, struct alisa_err *e)
{
    *out = NULL;
    int rc = ALISA_ENOMEM;
    if (!(h->threshold >= 0.0f && h->threshold <= TRACE_MAX_THRESHOLD))
        return err_set(e, ALISA_EINVAL, "%s: threshold %g out of range [0, %g]", path,
                       (double)h->threshold, (double)TRACE_MAX_THRESHOLD);
    if (h->n_layers == 0 || h->n_seqs == 0 || h->n_heads == 0)
        return err_set(e, ALISA_EINVAL, "%s: trace needs at least one layer, head and sequence",
                       path);
    if (h->flags & ~TRACE_FLAG_PER_HEAD)
        return err_set(e, ALISA_EINVAL, "%s: unknown flags 0x%x", path, h->flags);
    struct trace_writer *w = calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->h = *h;
    w->path = strdup(path);
    w->part = malloc(strlen(path) + 6);
    w->seqs = calloc(h->n_seqs, sizeof *w->seqs);
    if (!w->path || !w->part || !w->seqs)
        goto fail;
    if (strcmp(path, "-") == 0) {
        rc = err_set(e, ALISA_EINVAL, "-: a trace is written to a file, not standard output");
        goto fail;
    }
    /* never through a link, never over a FIFO or device (outfile.h) */
    if (!(w->f = outfile_open(path, w->part, strlen(path) + 6, "trace", e))) {
        rc = ALISA_EIO;
        goto fail;
    }
    uint8_t pre[16] = {0};
    memcpy(pre, trace_magic, 8);
    pre[8] = TRACE_VERSION;
    if (fwrite(pre, 1, 16, w->f) != 16) {
        rc = err_set(e, ALISA_EIO, "%s: write failed", w->part);
        goto fail;
    }
    struct buf *b = &w->payload;
    if (buf_reserve(b, 64))
        goto fail;
    if (put_str(b, h->model))
        goto fail;
    if (buf_reserve(b, 48))
        goto fail;
    put_u32(b, h->n_layers);
    put_u32(b, h->n_heads);
    put_u32(b, h->n_kv_heads);
    put_u32(b, h->hidden);
    put_u32(b, h->vocab);
    put_u32(b, h->n_seqs);
    put_u32(b, h->flags);
    put_f32(b, h->threshold);
    put_u64(b, h->seed);
    if (put_str(b, h->source) || put_str(b, h->model_sha256) || put_str(b, h->text) ||
        put_str(b, h->generator))
        goto fail;
    rc = writer_chunk(w, TAG_HEAD, e);
    if (rc)
        goto fail;
    *out = w;
    return 0;
fail:
    if (rc == ALISA_ENOMEM)
        err_set(e, rc, "%s: out of memory opening trace", path);
    trace_writer_destroy(w);
    return rc;
}

int trace_writer_seq(struct trace_writer *w, uint32_t seq, uint32_t prompt_len,
                     uint32_t gen_len, uint32_t row_start, const uint32_t *tokens,
                     struct alisa_err *e)
{
    if (seq != w->n_declared || seq >= w->h.n_seqs)
        return err_set(e, ALISA_EINVAL, "%s: sequence %u declared out of order (expected %u of %u)",
                       w->part, seq, w->n_declared, w->h.n_seqs);
    if (row_start > prompt_len || prompt_len + (uint64_t)gen_len == 0 ||
        prompt_len + (uint64_t)gen_len > UINT32_MAX / 2)
        return err_set(e, ALISA_EINVAL, "%s: sequence %u: bad lengths prompt %u gen %u row_start %u",
                       w->part, seq, prompt_len, gen_len, row_start);
    struct buf *b = &w->payload;
    if (buf_reserve(b, 16 + 4 * (size_t)prompt_len))
        return err_set(e, ALISA_ENOMEM, "%s: out of memory", w->part);
    put_u32(b, seq);
    put_u32(b, prompt_len);
    put_u32(b, gen_len);
    put_u32(b, row_start);
    for (uint32_t i = 0; i < prompt_len; i++)
        put_u32(b, tokens[i]);
    int rc = writer_chunk(w, TAG_SEQ, e);
    if (rc)
        return rc;
    w->seqs[seq].total = prompt_len + gen_len;
    w->seqs[seq].next_pos = row_start;
    w->n_declared++;
    return 0;
}

/* Appends one row of n weights in the smaller of the dense and sparse forms. */
static int put_row(struct buf *b, const float *row, uint32_t n, float threshold)
{
    float mx = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        if (row[i] > mx)
            mx = row[i];
    float cut = threshold * mx;
    uint32_t m = 0;
    if (threshold > 0.0f)
        for (uint32_t i = 0; i < n; i++)
            m += row[i] >= cut;
    size_t dense_bytes = 1 + 2 * (size_t)n;
    int wide = n > 65536;
    size_t sparse_bytes = 9 + (size_t)m * (wide ? 6 : 4);
    if (threshold <= 0.0f || dense_bytes <= sparse_bytes) {
        if (buf_reserve(b, dense_bytes))
            return ALISA_ENOMEM;
        put_u8(b, TRACE_ROW_DENSE);
        for (uint32_t i = 0; i < n; i++)
            put_u16(b, fp16_from_float(row[i]));
        return 0;
    }
    if (buf_reserve(b, sparse_bytes))
        return ALISA_ENOMEM;
    double residual = 0.0;
    for (uint32_t i = 0; i < n; i++)
        if (row[i] < cut)
            residual += row[i];
    put_u8(b, wide ? TRACE_ROW_SPARSE32 : TRACE_ROW_SPARSE16);
    put_u32(b, m);
    put_f32(b, (float)residual);
    for (uint32_t i = 0; i < n; i++)
        if (row[i] >= cut) {
            if (wide)
                put_u32(b, i);
            else
                put_u16(b, (uint16_t)i);
        }
    for (uint32_t i = 0; i < n; i++)
        if (row[i] >= cut)
            put_u16(b, fp16_from_float(row[i]));
    return 0;
}

int trace_writer_step(struct trace_writer *w, uint32_t seq, uint32_t pos, uint32_t token,
                      const float *rows, const float *head_rows, struct alisa_err *e)
{
    if (w->n_declared != w->h.n_seqs)
        return err_set(e, ALISA_EINVAL, "%s: step written before all %u sequences were declared",
                       w->part, w->h.n_seqs);
    if (seq >= w->h.n_seqs)
        return err_set(e, ALISA_EINVAL, "%s: step for sequence %u, trace has %u", w->part, seq,
                       w->h.n_seqs);
    struct writer_seq *s = &w->seqs[seq];
    if (pos != s->next_pos || pos >= s->total)
        return err_set(e, ALISA_EINVAL, "%s: sequence %u: position %u written, expected %u (length %u)",
                       w->part, seq, pos, s->next_pos, s->total);
    int per_head = (w->h.flags & TRACE_FLAG_PER_HEAD) != 0;
    if (per_head != (head_rows != NULL))
        return err_set(e, ALISA_EINVAL, "%s: per-head rows %s but the header says %s", w->part,
                       head_rows ? "given" : "missing", per_head ? "present" : "absent");
    uint32_t n = pos + 1;
    struct buf *b = &w->payload;
    if (buf_reserve(b, 12))
        return err_set(e, ALISA_ENOMEM, "%s: out of memory", w->part);
    put_u32(b, seq);
    put_u32(b, pos);
    put_u32(b, token);
    for (uint32_t l = 0; l < w->h.n_layers; l++) {
        int bad = put_row(b, rows + (size_t)l * n, n, w->h.threshold);
        for (uint32_t hd = 0; per_head && hd < w->h.n_heads && !bad; hd++)
            bad = put_row(b, head_rows + ((size_t)l * w->h.n_heads + hd) * n, n, w->h.threshold);
        if (bad) {
            b->len = 0;
            return err_set(e, ALISA_ENOMEM, "%s: out of memory", w->part);
        }
    }
    if (b->len > TRACE_MAX_CHUNK_BYTES) {
        size_t bytes = b->len;
        b->len = 0;
        return err_set(e, ALISA_EINVAL, "%s: step chunk of %zu bytes exceeds the format's limit",
                       w->part, bytes);
    }
    int rc = writer_chunk(w, TAG_STEP, e);
    if (rc)
        return rc;
    s->next_pos++;
    w->n_steps++;
    return 0;
}

int trace_writer_close(struct trace_writer *w, struct alisa_err *e)
{
    int rc = 0;
    for (uint32_t s = 0; s < w->h.n_seqs && !rc; s++)
        if (s >= w->n_declared || w->seqs[s].next_pos != w->seqs[s].total)
            rc = err_set(e, ALISA_EINVAL, "%s: sequence %u incomplete at close (%u of %u positions)",
                         w->part, s, s < w->n_declared ? w->seqs[s].next_pos : 0,
                         s < w->n_declared ? w->seqs[s].total : 0);
    if (!rc) {
        if (buf_reserve(&w->payload, 12)) {
            rc = err_set(e, ALISA_ENOMEM, "%s: out of memory", w->part);
        } else {
            put_u64(&w->payload, w->n_steps);
            put_u32(&w->payload, w->h.n_seqs);
            rc = writer_chunk(w, TAG_END, e);
        }
    }
    if (!rc) {
        rc = outfile_close(w->f, w->part, w->path, 0, e);
        w->f = NULL;
    }
    trace_writer_destroy(w);
    return rc;
}

/* ---- reader ---- */

struct reader_seq {
    struct trace_seq s;
    uint32_t next_pos; /* next position expected */
};

struct trace_reader {
    FILE *f;
    char *path;
    uint64_t file_bytes;
    uint64_t offset;         /* byte offset of the next chunk */
    struct trace_header h;
    struct reader_seq *seqs; /* (h.n_seqs) */
    uint32_t max_len;        /* longest sequence, tokens */
    uint64_t claimed_steps;  /* STEP chunks the SEQ chunks so far promise */
    uint64_t n_steps;        /* STEP chunks read */
    int done;                /* END was read */
    struct buf payload;
    float *w;                /* (n_layers, max_len) */
    float *residual;         /* (n_layers) */
    uint8_t *enc;            /* (n_layers) */
    float *w_head;           /* (n_layers, n_heads, max_len) or NULL */
    float *residual_head;    /* (n_layers, n_heads) or NULL */
};

void trace_reader_destroy(struct trace_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    if (r->seqs)
        for (uint32_t i = 0; i < r->h.n_seqs; i++)
            free(r->seqs[i].s.tokens);
    free(r->seqs);
    free(r->path);
    free(r->payload.p);
    free(r->w);
    free(r->residual);
    free(r->enc);
    free(r->w_head);
    free(r->residual_head);
    free(r);
}

/* Reads the next chunk into r->payload. *tag_out gets its tag, *at its offset. */
static int read_chunk(struct trace_reader *r, uint32_t *tag_out, uint64_t *at, struct alisa_err *e)
{
    *at = r->offset;
    uint8_t hdr[8];
    size_t got = fread(hdr, 1, 8, r->f);
    if (got == 0 && feof(r->f))
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: file ends before the END chunk (truncated)",
                       r->path, (unsigned long long)*at);
    if (got != 8)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: truncated chunk header (%zu of 8 bytes)",
                       r->path, (unsigned long long)*at, got);
    uint32_t tag = get_u32(hdr), len = get_u32(hdr + 4);
    char name[5];
    tag_name(tag, name);
    if (tag != TAG_HEAD && tag != TAG_SEQ && tag != TAG_STEP && tag != TAG_END)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: unknown chunk tag '%s' (0x%08x)", r->path,
                       (unsigned long long)*at, name, tag);
    if (len > TRACE_MAX_CHUNK_BYTES || *at + 12 + (uint64_t)len > r->file_bytes)
        return err_set(e, ALISA_ECORRUPT,
                       "%s: byte %llu: chunk '%s' of %u bytes runs past the end of the file "
                       "(%llu bytes; truncated?)",
                       r->path, (unsigned long long)*at, name, len,
                       (unsigned long long)r->file_bytes);
    r->payload.len = 0;
    if (buf_reserve(&r->payload, (size_t)len + 4))
        return err_set(e, ALISA_ENOMEM, "%s: byte %llu: out of memory for a %u-byte chunk",
                       r->path, (unsigned long long)*at, len);
    if (fread(r->payload.p, 1, (size_t)len + 4, r->f) != (size_t)len + 4)
        return err_set(e, ALISA_EIO, "%s: byte %llu: read failed", r->path,
                       (unsigned long long)*at);
    uint32_t stored = get_u32(r->payload.p + len);
    uint32_t computed = chunk_crc(tag, len, r->payload.p);
    if (stored != computed)
        return err_set(e, ALISA_ECORRUPT,
                       "%s: byte %llu: chunk '%s' checksum mismatch (stored 0x%08x, computed 0x%08x)",
                       r->path, (unsigned long long)*at, name, stored, computed);
    r->payload.len = len;
    r->offset += 12 + (uint64_t)len;
    *tag_out = tag;
    return 0;
}

/* Bounds-checked cursor over a chunk payload. */
struct cursor {
    const uint8_t *p;
    size_t left;
    int short_read; /* set when a read ran past the payload */
};

static const uint8_t *cur_take(struct cursor *c, size_t n)
{
    if (c->short_read || n > c->left) {
        c->short_read = 1;
        return NULL;
    }
    const uint8_t *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}
static uint32_t cur_u32(struct cursor *c)
{
    const uint8_t *p = cur_take(c, 4);
    return p ? get_u32(p) : 0;
}
static void cur_str(struct cursor *c, char *dst, size_t cap)
{
    const uint8_t *p = cur_take(c, 2);
    size_t n = p ? get_u16(p) : 0;
    const uint8_t *s = cur_take(c, n);
    size_t k = (s && n < cap) ? n : (s ? cap - 1 : 0);
    if (s)
        memcpy(dst, s, k);
    dst[k] = 0;
}

static int parse_head(struct trace_reader *r, uint64_t at, struct alisa_err *e)
{
    struct cursor c = {r->payload.p, r->payload.len, 0};
    struct trace_header *h = &r->h;
    cur_str(&c, h->model, sizeof h->model);
    const uint8_t *p = cur_take(&c, 40);
    if (p) {
        h->n_layers = get_u32(p);
        h->n_heads = get_u32(p + 4);
        h->n_kv_heads = get_u32(p + 8);
        h->hidden = get_u32(p + 12);
        h->vocab = get_u32(p + 16);
        h->n_seqs = get_u32(p + 20);
        h->flags = get_u32(p + 24);
        h->threshold = get_f32(p + 28);
        h->seed = get_u64(p + 32);
    }
    cur_str(&c, h->source, sizeof h->source);
    cur_str(&c, h->model_sha256, sizeof h->model_sha256);
    cur_str(&c, h->text, sizeof h->text);
    cur_str(&c, h->generator, sizeof h->generator);
    if (c.short_read || c.left)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: HEAD payload of %zu bytes does not match its fields",
                       r->path, (unsigned long long)at, r->payload.len);
    if (h->n_layers == 0 || h->n_layers > 4096 || h->n_heads == 0 || h->n_heads > 4096)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: HEAD: implausible shape (%u layers, %u heads)",
                       r->path, (unsigned long long)at, h->n_layers, h->n_heads);
    /* each sequence needs a SEQ chunk of at least 28 bytes */
    if (h->n_seqs == 0 || h->n_seqs > (1u << 20) || h->n_seqs > r->file_bytes / 28)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: HEAD: n_seqs = %u: implausible, or "
                       "more SEQ chunks than the file's %llu bytes can hold", r->path,
                       (unsigned long long)at, h->n_seqs, (unsigned long long)r->file_bytes);
    if (h->flags & ~TRACE_FLAG_PER_HEAD)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: HEAD: unknown flags 0x%x", r->path,
                       (unsigned long long)at, h->flags);
    if (!(h->threshold >= 0.0f && h->threshold <= TRACE_MAX_THRESHOLD))
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: HEAD: threshold %g out of range [0, %g]",
                       r->path, (unsigned long long)at, (double)h->threshold,
                       (double)TRACE_MAX_THRESHOLD);
    return 0;
}

static int parse_seq(struct trace_reader *r, uint32_t expect, uint64_t at, struct alisa_err *e)
{
    struct cursor c = {r->payload.p, r->payload.len, 0};
    uint32_t seq = cur_u32(&c), prompt = cur_u32(&c), gen = cur_u32(&c), start = cur_u32(&c);
    if (c.short_read)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: SEQ payload too short (%zu bytes)",
                       r->path, (unsigned long long)at, r->payload.len);
    if (seq != expect)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: SEQ for sequence %u, expected %u",
                       r->path, (unsigned long long)at, seq, expect);
    uint64_t total = (uint64_t)prompt + gen;
    if (total == 0 || total > (1u << 24) || start > prompt)
        return err_set(e, ALISA_ECORRUPT,
                       "%s: byte %llu: SEQ %u: bad lengths (prompt %u, gen %u, row_start %u)",
                       r->path, (unsigned long long)at, seq, prompt, gen, start);
    if (c.left != 4 * (size_t)prompt)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: SEQ %u: %zu token bytes for %u prompt tokens",
                       r->path, (unsigned long long)at, seq, c.left, prompt);
    /* memory in proportion to the file: every recorded position must arrive
     * as a STEP chunk of at least 24 bytes (chunk header and CRC, seq, pos,
     * token) plus 3 per row (a one-byte encoding and one fp16 weight), so
     * lengths the rest of the file cannot hold are refused before the
     * tokens are allocated */
    const struct trace_header *h = &r->h;
    uint64_t rows = (uint64_t)h->n_layers * (h->flags & TRACE_FLAG_PER_HEAD ? 1u + h->n_heads : 1u);
    r->claimed_steps += total - start;
    if (r->claimed_steps > r->file_bytes / (24 + 3 * rows))
        return err_set(e, ALISA_ECORRUPT,
                       "%s: byte %llu: SEQ %u: prompt %u + gen %u positions (from %u) of %llu rows "
                       "each: more than the file's %llu bytes can hold", r->path,
                       (unsigned long long)at, seq, prompt, gen, start, (unsigned long long)rows,
                       (unsigned long long)r->file_bytes);
    struct reader_seq *s = &r->seqs[seq];
    s->s.prompt_len = prompt;
    s->s.gen_len = gen;
    s->s.row_start = start;
    s->next_pos = start;
    s->s.tokens = calloc(total, sizeof *s->s.tokens);
    if (!s->s.tokens)
        return err_set(e, ALISA_ENOMEM, "%s: out of memory", r->path);
    for (uint32_t i = 0; i < prompt; i++)
        s->s.tokens[i] = cur_u32(&c);
    if (total > r->max_len)
        r->max_len = (uint32_t)total;
    return 0;
}

int trace_reader_open(struct trace_reader **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    int rc = ALISA_ENOMEM;
    struct trace_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path)))
        goto fail;
    /* a regular file only, opened without blocking: a FIFO's open would
     * wait for a writer (issue 48; the executor's inputs: exec/infile.h) */
    struct stat st;
    int fd = stat(path, &st) == 0 && !S_ISREG(st.st_mode) ? -2
                                                         : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -2;
    }
    if (fd >= 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        r->f = fdopen(fd, "rb");
        if (!r->f)
            close(fd);
    }
    if (!r->f) {
        rc = fd == -2 ? err_set(e, ALISA_EIO, "%s: not a regular file", path)
                      : err_set(e, ALISA_EIO, "%s: cannot open trace (missing file?)", path);
        goto fail;
    }
    r->file_bytes = (uint64_t)st.st_size;
    uint8_t pre[16];
    size_t got = fread(pre, 1, 16, r->f);
    if (got < 8 || memcmp(pre, trace_magic, 8) != 0) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte 0: not an alisa trace (bad magic)", path);
        goto fail;
    }
    if (got < 16) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte %zu: truncated preamble", path, got);
        goto fail;
    }
    uint32_t version = get_u32(pre + 8);
    if (version != TRACE_VERSION) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte 8: unsupported trace version %u (this build reads %u)",
                     path, version, TRACE_VERSION);
        goto fail;
    }
    r->offset = 16;
    uint32_t tag;
    uint64_t at;
    if ((rc = read_chunk(r, &tag, &at, e)))
        goto fail;
    if (tag != TAG_HEAD) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte %llu: expected the HEAD chunk first", path,
                     (unsigned long long)at);
        goto fail;
    }
    if ((rc = parse_head(r, at, e)))
        goto fail;
    rc = ALISA_ENOMEM;
    r->seqs = calloc(r->h.n_seqs, sizeof *r->seqs);
    if (!r->seqs)
        goto fail;
    for (uint32_t s = 0; s < r->h.n_seqs; s++) {
        if ((rc = read_chunk(r, &tag, &at, e)))
            goto fail;
        if (tag != TAG_SEQ) {
            char name[5];
            tag_name(tag, name);
            rc = err_set(e, ALISA_ECORRUPT, "%s: byte %llu: chunk '%s' where SEQ %u of %u was expected",
                         path, (unsigned long long)at, name, s, r->h.n_seqs);
            goto fail;
        }
        if ((rc = parse_seq(r, s, at, e)))
            goto fail;
    }
    rc = ALISA_ENOMEM;
    size_t L = r->h.n_layers, H = r->h.n_heads, N = r->max_len;
    r->w = malloc(L * N * sizeof *r->w);
    r->residual = malloc(L * sizeof *r->residual);
    r->enc = malloc(L);
    if (!r->w || !r->residual || !r->enc)
        goto fail;
    if (r->h.flags & TRACE_FLAG_PER_HEAD) {
        r->w_head = malloc(L * H * N * sizeof *r->w_head);
        r->residual_head = malloc(L * H * sizeof *r->residual_head);
        if (!r->w_head || !r->residual_head)
            goto fail;
    }
    *out = r;
    return 0;
fail:
    if (rc == ALISA_ENOMEM)
        err_set(e, rc, "%s: out of memory opening trace", path);
    trace_reader_destroy(r);
    return rc;
}

const struct trace_header *trace_reader_header(const struct trace_reader *r) { return &r->h; }

const struct trace_seq *trace_reader_seq(const struct trace_reader *r, uint32_t seq)
{
    ALISA_ASSERT(seq < r->h.n_seqs);
    return &r->seqs[seq].s;
}

uint32_t trace_reader_max_len(const struct trace_reader *r) { return r->max_len; }

uint64_t trace_reader_file_bytes(const struct trace_reader *r) { return r->file_bytes; }

/* Decodes one row of n entries into out (zero-filled), *res gets the residual. */
static int parse_row(struct trace_reader *r, struct cursor *c, uint32_t n, float *out,
                     float *res, uint8_t *enc_out, uint64_t at, const char *where,
                     struct alisa_err *e)
{
    const uint8_t *p = cur_take(c, 1);
    if (!p)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: payload ends inside the row",
                       r->path, (unsigned long long)at, where);
    uint8_t enc = *p;
    if (enc_out)
        *enc_out = enc;
    if (enc == TRACE_ROW_DENSE) {
        const uint8_t *d = cur_take(c, 2 * (size_t)n);
        if (!d)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: payload ends inside a dense row of %u",
                           r->path, (unsigned long long)at, where, n);
        for (uint32_t i = 0; i < n; i++)
            out[i] = fp16_to_float(get_u16(d + 2 * i));
        *res = 0.0f;
        return 0;
    }
    if (enc != TRACE_ROW_SPARSE16 && enc != TRACE_ROW_SPARSE32)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: unknown row encoding %u", r->path,
                       (unsigned long long)at, where, enc);
    uint32_t m = cur_u32(c);
    const uint8_t *rp = cur_take(c, 4);
    size_t isz = enc == TRACE_ROW_SPARSE16 ? 2 : 4;
    const uint8_t *idx = m <= n ? cur_take(c, isz * m) : NULL;
    const uint8_t *val = idx ? cur_take(c, 2 * (size_t)m) : NULL;
    if (m > n)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: sparse row claims %u entries of %u",
                       r->path, (unsigned long long)at, where, m, n);
    if (!rp || !val)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: payload ends inside a sparse row",
                       r->path, (unsigned long long)at, where);
    *res = get_f32(rp);
    memset(out, 0, n * sizeof *out);
    int64_t prev = -1;
    for (uint32_t j = 0; j < m; j++) {
        uint32_t i = isz == 2 ? get_u16(idx + 2 * j) : get_u32(idx + 4 * j);
        if (i >= n)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: entry %u: index %u out of range (row has %u)",
                           r->path, (unsigned long long)at, where, j, i, n);
        if ((int64_t)i <= prev)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %s: entry %u: index %u not increasing (after %lld)",
                           r->path, (unsigned long long)at, where, j, i, (long long)prev);
        prev = i;
        out[i] = fp16_to_float(get_u16(val + 2 * j));
    }
    return 0;
}

static int check_row(const char *path, const struct trace_step *st, const float *row, float res,
                     const char *what, uint32_t l, struct alisa_err *e)
{
    double sum = res;
    for (uint32_t i = 0; i < st->n_ctx; i++) {
        if (!isfinite(row[i]) || row[i] < 0.0f)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: seq %u pos %u layer %u%s: weight %u is %g",
                           path, (unsigned long long)st->offset, st->seq, st->pos, l, what, i,
                           (double)row[i]);
        sum += row[i];
    }
    if (!isfinite(res) || res < 0.0f || fabs(sum - 1.0) > TRACE_SUM_TOLERANCE)
        return err_set(e, ALISA_ECORRUPT,
                       "%s: byte %llu: seq %u pos %u layer %u%s: weight row sums to %.4f (expected 1)",
                       path, (unsigned long long)st->offset, st->seq, st->pos, l, what, sum);
    return 0;
}

/* Every row of a step (layer means and any per-head rows) finite,
 * non-negative and summing to 1 with its residual, and the token in the
 * vocabulary: checked by every reader, not only `trace check` (issue 48). */
static int check_step(const struct trace_reader *r, const struct trace_step *st,
                      struct alisa_err *e)
{
    const struct trace_header *h = &r->h;
    if (st->token >= h->vocab)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: seq %u pos %u: token id %u >= vocab %u",
                       r->path, (unsigned long long)st->offset, st->seq, st->pos, st->token,
                       h->vocab);
    for (uint32_t l = 0; l < h->n_layers; l++) {
        int rc = check_row(r->path, st, st->w + (size_t)l * st->n_ctx, st->residual[l], "", l, e);
        for (uint32_t hd = 0; !rc && st->w_head && hd < h->n_heads; hd++) {
            char what[32];
            snprintf(what, sizeof what, " head %u", hd);
            rc = check_row(r->path, st, st->w_head + ((size_t)l * h->n_heads + hd) * st->n_ctx,
                           st->residual_head[(size_t)l * h->n_heads + hd], what, l, e);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int trace_reader_next(struct trace_reader *r, struct trace_step *step, struct alisa_err *e)
{
    if (r->done)
        return 0;
    uint32_t tag;
    uint64_t at;
    int rc = read_chunk(r, &tag, &at, e);
    if (rc)
        return rc;
    if (tag == TAG_END) {
        struct cursor c = {r->payload.p, r->payload.len, 0};
        const uint8_t *p = cur_take(&c, 12);
        if (!p || c.left)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: END payload of %zu bytes (expected 12)",
                           r->path, (unsigned long long)at, r->payload.len);
        uint64_t n_steps = get_u64(p);
        if (n_steps != r->n_steps || get_u32(p + 8) != r->h.n_seqs)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: END counts %llu steps, %llu were read",
                           r->path, (unsigned long long)at, (unsigned long long)n_steps,
                           (unsigned long long)r->n_steps);
        for (uint32_t s = 0; s < r->h.n_seqs; s++) {
            const struct reader_seq *q = &r->seqs[s];
            if (q->next_pos != q->s.prompt_len + q->s.gen_len)
                return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: END before sequence %u is complete (%u of %u positions)",
                               r->path, (unsigned long long)at, s, q->next_pos,
                               q->s.prompt_len + q->s.gen_len);
        }
        if (r->offset != r->file_bytes)
            return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: %llu unexpected bytes after the END chunk",
                           r->path, (unsigned long long)r->offset,
                           (unsigned long long)(r->file_bytes - r->offset));
        r->done = 1;
        return 0;
    }
    if (tag != TAG_STEP) {
        char name[5];
        tag_name(tag, name);
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: chunk '%s' where a STEP or END was expected",
                       r->path, (unsigned long long)at, name);
    }
    struct cursor c = {r->payload.p, r->payload.len, 0};
    uint32_t seq = cur_u32(&c), pos = cur_u32(&c), token = cur_u32(&c);
    if (c.short_read)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: STEP payload too short", r->path,
                       (unsigned long long)at);
    if (seq >= r->h.n_seqs)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: STEP for sequence %u, trace has %u",
                       r->path, (unsigned long long)at, seq, r->h.n_seqs);
    struct reader_seq *s = &r->seqs[seq];
    if (pos != s->next_pos)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: sequence %u: position %u, expected %u",
                       r->path, (unsigned long long)at, seq, pos, s->next_pos);
    if (pos >= s->s.prompt_len + s->s.gen_len)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: sequence %u: position %u beyond its length %u",
                       r->path, (unsigned long long)at, seq, pos,
                       s->s.prompt_len + s->s.gen_len);
    uint32_t n = pos + 1, H = r->h.n_heads;
    int per_head = (r->h.flags & TRACE_FLAG_PER_HEAD) != 0;
    for (uint32_t l = 0; l < r->h.n_layers; l++) {
        char where[96];
        snprintf(where, sizeof where, "seq %u pos %u layer %u", seq, pos, l);
        rc = parse_row(r, &c, n, r->w + (size_t)l * n, &r->residual[l], &r->enc[l], at, where, e);
        if (rc)
            return rc;
        for (uint32_t h = 0; per_head && h < H; h++) {
            snprintf(where, sizeof where, "seq %u pos %u layer %u head %u", seq, pos, l, h);
            rc = parse_row(r, &c, n, r->w_head + ((size_t)l * H + h) * n,
                           &r->residual_head[(size_t)l * H + h], NULL, at, where, e);
            if (rc)
                return rc;
        }
    }
    if (c.left)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: STEP seq %u pos %u: %zu bytes left over after the rows",
                       r->path, (unsigned long long)at, seq, pos, c.left);
    if (pos < s->s.prompt_len && s->s.tokens[pos] != token)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %llu: sequence %u position %u: token %u differs from the prompt's %u",
                       r->path, (unsigned long long)at, seq, pos, token, s->s.tokens[pos]);
    s->s.tokens[pos] = token;
    s->next_pos++;
    r->n_steps++;
    step->seq = seq;
    step->pos = pos;
    step->token = token;
    step->n_ctx = n;
    step->w = r->w;
    step->residual = r->residual;
    step->enc = r->enc;
    step->w_head = per_head ? r->w_head : NULL;
    step->residual_head = per_head ? r->residual_head : NULL;
    step->offset = at;
    rc = check_step(r, step, e);
    return rc ? rc : 1;
}

int trace_check(const char *path, uint64_t *n_steps, struct alisa_err *e)
{
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header *h = &r->h;
    for (uint32_t s = 0; s < h->n_seqs && !rc; s++)
        for (uint32_t i = 0; i < r->seqs[s].s.prompt_len && !rc; i++)
            if (r->seqs[s].s.tokens[i] >= h->vocab)
                rc = err_set(e, ALISA_ECORRUPT, "%s: sequence %u prompt token %u: id %u >= vocab %u",
                             path, s, i, r->seqs[s].s.tokens[i], h->vocab);
    struct trace_step st;
    uint64_t count = 0;
    while (!rc && (rc = trace_reader_next(r, &st, e)) == 1) {
        /* the reader checked the step's rows and token */
        rc = 0;
        count++;
    }
    trace_reader_destroy(r);
    if (rc < 0)
        return rc;
    if (n_steps)
        *n_steps = count;
    return 0;
}
