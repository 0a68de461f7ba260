/* llama2.c tokenizer (contract in tokenizer.h). Look-ups go through a
 * sorted copy of the vocabulary (qsort + bsearch, as run.c); merges scan the
 * id list for the best-scoring adjacent pair until none applies.
 */
#include "tokenizer.h"

#include "infile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

struct tok_index {
    const char *str;
    uint32_t id;
};

struct tokenizer {
    int bpe;                /* 1: GGUF byte-level BPE, 0: llama2.c */
    uint32_t bos;           /* beginning-of-sequence id */
    struct tok_index *merges; /* (n_merges) "a b" -> rank (in .id), sorted */
    uint32_t n_merges;
    char byte_cp[256][4];   /* GPT-2 byte -> code point, UTF-8 */
    uint8_t cp_byte[512];   /* code point (< 512) -> byte */
    char *out;              /* (max_len + 1) decode buffer */
    uint32_t vocab;
    uint32_t max_len;       /* longest token in bytes */
    char **pieces;          /* (vocab) NUL-terminated */
    float *scores;          /* (vocab) merge scores */
    struct tok_index *sorted; /* (vocab) by str */
    unsigned char bytes[256][2]; /* single-byte strings for byte tokens */
};

void tok_free(struct tokenizer *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; t->pieces && i < t->vocab; i++)
        free(t->pieces[i]);
    free(t->pieces);
    free(t->scores);
    free(t->sorted);
    for (uint32_t i = 0; t->merges && i < t->n_merges; i++)
        free((char *)t->merges[i].str);
    free(t->merges);
    free(t->out);
    free(t);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(((const struct tok_index *)a)->str, ((const struct tok_index *)b)->str);
}

static int tok_load_gguf(struct tokenizer **out, const char *path, uint32_t vocab,
                         struct alisa_err *e);

int tok_load(struct tokenizer **out, const char *path, uint32_t vocab, struct alisa_err *e)
{
    *out = NULL;
    FILE *f = infile_fopen(path, "tokenizer", e);
    if (!f)
        return ALISA_EIO;
    char magic[4] = {0};
    if (fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0) {
        fclose(f);
        return tok_load_gguf(out, path, vocab, e);
    }
    rewind(f);
    /* llama2.c's encoding uses ids 0-2 (unk, BOS, EOS) and the byte-fallback
     * tokens 3-258 whatever the text: a smaller vocabulary cannot hold them */
    if (vocab < TOK_BYTE_FALLBACK_END) {
        fclose(f);
        return err_set(e, ALISA_ECORRUPT, "%s: vocabulary of %u tokens: a llama2.c tokenizer needs "
                       "at least %u (ids 0-2 special, 3-258 byte fallback)", path, vocab,
                       TOK_BYTE_FALLBACK_END);
    }
    struct tokenizer *t = calloc(1, sizeof *t);
    int rc = 0;
    if (!t || !(t->pieces = calloc(vocab, sizeof *t->pieces)) ||
        !(t->scores = malloc(vocab * sizeof *t->scores)) ||
        !(t->sorted = malloc(vocab * sizeof *t->sorted))) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for %u tokens", vocab);
        goto done;
    }
    t->vocab = vocab;
    int32_t max_len;
    if (fread(&max_len, 4, 1, f) != 1 || max_len <= 0 || max_len > 1024) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte 0: bad max_token_length", path);
        goto done;
    }
    t->max_len = (uint32_t)max_len;
    long off = 4;
    for (uint32_t i = 0; i < vocab; i++) {
        int32_t len;
        if (fread(&t->scores[i], 4, 1, f) != 1 || fread(&len, 4, 1, f) != 1) {
            rc = err_set(e, ALISA_ECORRUPT, "%s: byte %ld: file ends at token %u of %u (tokenizer "
                         "for a smaller vocabulary?)", path, off, i, vocab);
            goto done;
        }
        if (len < 0 || len > max_len) {
            rc = err_set(e, ALISA_ECORRUPT, "%s: byte %ld: token %u has length %d (max %d)", path,
                         off + 4, i, len, max_len);
            goto done;
        }
        if (!(t->pieces[i] = malloc((size_t)len + 1)) ||
            fread(t->pieces[i], 1, (size_t)len, f) != (size_t)len) {
            rc = err_set(e, ALISA_ECORRUPT, "%s: byte %ld: token %u truncated", path, off + 8, i);
            goto done;
        }
        t->pieces[i][len] = 0;
        t->sorted[i] = (struct tok_index){t->pieces[i], i};
        off += 8 + len;
    }
    if (fgetc(f) != EOF) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: byte %ld: data after %u tokens (tokenizer for a "
                     "larger vocabulary than the model's?)", path, off, vocab);
        goto done;
    }
    qsort(t->sorted, vocab, sizeof *t->sorted, by_str);
    t->bos = TOK_BOS;
    for (int b = 0; b < 256; b++) {
        t->bytes[b][0] = (unsigned char)b;
        t->bytes[b][1] = 0;
    }
done:
    fclose(f);
    if (rc) {
        tok_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

uint32_t tok_vocab(const struct tokenizer *t) { return t->vocab; }

uint32_t tok_bos(const struct tokenizer *t) { return t->bos; }

static int lookup(const struct tokenizer *t, const char *s)
{
    struct tok_index key = {s, 0};
    const struct tok_index *r = bsearch(&key, t->sorted, t->vocab, sizeof key, by_str);
    return r ? (int)r->id : -1;
}

static int bpe_encode(const struct tokenizer *t, const char *text, int bos, uint32_t *ids,
                      size_t cap);
static const char *bpe_decode(const struct tokenizer *t, uint32_t id, size_t *len);

int tok_encode(const struct tokenizer *t, const char *text, int bos, uint32_t *ids, size_t cap)
{
    size_t n = 0, tl = strlen(text);
    if (cap < tl + 3)
        return ALISA_EINVAL;
    if (t->bpe)
        return bpe_encode(t, text, bos, ids, cap);
    if (bos)
        ids[n++] = TOK_BOS;
    if (text[0]) {
        int sp = lookup(t, " ");
        if (sp >= 0)
            ids[n++] = (uint32_t)sp;
    }
    char buf[8];
    for (const unsigned char *c = (const unsigned char *)text; *c;) {
        /* one UTF-8 code point: a lead byte and its continuation bytes */
        size_t len = 1;
        while (len < 4 && (c[len] & 0xC0) == 0x80)
            len++;
        memcpy(buf, c, len);
        buf[len] = 0;
        int id = lookup(t, buf);
        if (id >= 0) {
            ids[n++] = (uint32_t)id;
        } else {
            for (size_t i = 0; i < len; i++)
                ids[n++] = (uint32_t)c[i] + 3; /* byte fallback: <0x00> is id 3 */
        }
        c += len;
    }
    /* merge the best-scoring adjacent pair until no pair is a token */
    char *pair = malloc(2 * (size_t)t->max_len + 1);
    if (!pair)
        return ALISA_ENOMEM;
    for (;;) {
        float best = -1e30f;
        int best_id = -1;
        size_t best_at = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            size_t a = strlen(t->pieces[ids[i]]), b = strlen(t->pieces[ids[i + 1]]);
            memcpy(pair, t->pieces[ids[i]], a);
            memcpy(pair + a, t->pieces[ids[i + 1]], b + 1);
            int id = lookup(t, pair);
            if (id >= 0 && t->scores[id] > best) {
                best = t->scores[id];
                best_id = id;
                best_at = i;
            }
        }
        if (best_id < 0)
            break;
        ids[best_at] = (uint32_t)best_id;
        memmove(ids + best_at + 1, ids + best_at + 2, (n - best_at - 2) * sizeof *ids);
        n--;
    }
    free(pair);
    return (int)n;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The byte a piece stands for (0-255) when it is exactly "<0x", two hex
 * digits and ">", else -1: an ordinary piece. Not sscanf's "%02X", which
 * takes a sign and spaces ("<0x-F>" was byte -15, read as t->bytes[-15]:
 * issue 48) and ignores what follows the number. */
static int byte_piece(const char *p)
{
    /* in order, so no byte past the piece's terminator is read */
    int hi, lo;
    if (strncmp(p, "<0x", 3) != 0 || (hi = hex_digit(p[3])) < 0 || (lo = hex_digit(p[4])) < 0 ||
        p[5] != '>' || p[6] != 0)
        return -1;
    return hi << 4 | lo;
}

const char *tok_decode(const struct tokenizer *t, uint32_t prev, uint32_t id, size_t *len)
{
    if (t->bpe)
        return id == t->bos ? (*len = 0, "") : bpe_decode(t, id, len);
    const char *piece = t->pieces[id];
    if (prev == TOK_BOS && piece[0] == ' ')
        piece++;
    int byte = byte_piece(piece);
    if (byte >= 0) {
        *len = 1;
        return (const char *)t->bytes[byte];
    }
    *len = strlen(piece);
    return piece;
}

/* ---- GGUF byte-level BPE ---- */

static void put_utf8(char *dst, uint32_t cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        dst[1] = 0;
    } else {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        dst[2] = 0;
    }
}

static int tok_load_gguf(struct tokenizer **out, const char *path, uint32_t vocab,
                         struct alisa_err *e)
{
    struct gguf *g;
    int rc = gguf_open(&g, path, e);
    if (rc)
        return rc;
    uint64_t n = 0, n_merges = 0, bos = 1;
    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        gguf_close(g);
        return err_set(e, ALISA_ENOMEM, "out of memory");
    }
    if ((rc = gguf_get_str_array(g, "tokenizer.ggml.tokens", &n, e)) ||
        (rc = gguf_get_str_array(g, "tokenizer.ggml.merges", &n_merges, e)))
        goto done;
    if (n != vocab) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: vocabulary mismatch: the tokenizer has %llu tokens, "
                     "the model %u", path, (unsigned long long)n, vocab);
        goto done;
    }
    gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &bos, e);
    if (bos >= vocab) {
        rc = err_set(e, ALISA_ECORRUPT, "%s: tokenizer.ggml.bos_token_id = %llu is not below the "
                     "vocabulary's %u tokens", path, (unsigned long long)bos, vocab);
        goto done;
    }
    t->bpe = 1;
    t->bos = (uint32_t)bos;
    t->vocab = vocab;
    t->n_merges = (uint32_t)n_merges;
    if (!(t->pieces = calloc(vocab, sizeof *t->pieces)) ||
        !(t->sorted = malloc(vocab * sizeof *t->sorted)) ||
        !(t->scores = calloc(vocab, sizeof *t->scores)) ||
        !(t->merges = calloc(n_merges ? n_merges : 1, sizeof *t->merges))) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for %u tokens", vocab);
        goto done;
    }
    for (uint32_t i = 0; i < vocab; i++) {
        size_t len;
        const char *s = gguf_array_str(g, "tokenizer.ggml.tokens", i, &len);
        if (!(t->pieces[i] = malloc(len + 1))) {
            rc = err_set(e, ALISA_ENOMEM, "out of memory");
            goto done;
        }
        memcpy(t->pieces[i], s, len);
        t->pieces[i][len] = 0;
        t->sorted[i] = (struct tok_index){t->pieces[i], i};
        if (len > t->max_len)
            t->max_len = (uint32_t)len;
    }
    for (uint32_t i = 0; i < n_merges; i++) {
        size_t len;
        const char *s = gguf_array_str(g, "tokenizer.ggml.merges", i, &len);
        char *m = malloc(len + 1);
        if (!m) {
            rc = err_set(e, ALISA_ENOMEM, "out of memory");
            goto done;
        }
        memcpy(m, s, len);
        m[len] = 0;
        t->merges[i] = (struct tok_index){m, i};
    }
    qsort(t->sorted, vocab, sizeof *t->sorted, by_str);
    qsort(t->merges, n_merges, sizeof *t->merges, by_str);
    /* GPT-2's byte <-> code point map: printable bytes map to themselves,
     * the rest to 256, 257, ... in byte order */
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = printable ? (uint32_t)b : next++;
        put_utf8(t->byte_cp[b], cp);
        t->cp_byte[cp] = (uint8_t)b;
        t->bytes[b][0] = (unsigned char)b;
        t->bytes[b][1] = 0;
    }
    t->out = malloc((size_t)t->max_len + 1);
    if (!t->out)
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
done:
    gguf_close(g);
    if (rc) {
        tok_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

static int is_letter(unsigned char c) { return (unsigned)((c | 32) - 'a') < 26u || c >= 0x80; }
static int is_digit(unsigned char c) { return (unsigned)(c - '0') < 10u; }
static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Length of the next pre-token at p (GPT-2's pattern, digits singly). */
static size_t pretoken(const unsigned char *p)
{
    static const char *contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (size_t i = 0; i < sizeof contr / sizeof contr[0]; i++)
        if (strncmp((const char *)p, contr[i], strlen(contr[i])) == 0)
            return strlen(contr[i]);
    size_t n = 0;
    const unsigned char *q = p[0] == ' ' && p[1] && !is_space(p[1]) ? p + 1 : p;
    size_t lead = (size_t)(q - p);
    if (is_letter(q[0])) {
        while (is_letter(q[n]))
            n++;
        return lead + n;
    }
    if (is_digit(q[0]))
        return lead + 1;
    if (!is_space(q[0])) {
        while (q[n] && !is_space(q[n]) && !is_letter(q[n]) && !is_digit(q[n]))
            n++;
        return lead + n;
    }
    /* whitespace: \s+(?!\S) takes a run but its last character when text
     * follows (a space then joins the next word; any other whitespace is a
     * pre-token of its own); \s+ takes a lone one */
    while (is_space(p[n]))
        n++;
    if (p[n] && n > 1)
        n--;
    return n;
}

static int merge_rank(const struct tokenizer *t, const char *a, const char *b, char *buf)
{
    size_t la = strlen(a), lb = strlen(b);
    memcpy(buf, a, la);
    buf[la] = ' ';
    memcpy(buf + la + 1, b, lb + 1);
    struct tok_index key = {buf, 0};
    const struct tok_index *r = bsearch(&key, t->merges, t->n_merges, sizeof key, by_str);
    return r ? (int)r->id : -1;
}

static int bpe_encode(const struct tokenizer *t, const char *text, int bos, uint32_t *ids,
                      size_t cap)
{
    size_t n = 0;
    if (bos)
        ids[n++] = t->bos;
    size_t sym_cap = 2 * (size_t)t->max_len + 64;
    char *buf = malloc(2 * sym_cap);
    for (const unsigned char *p = (const unsigned char *)text; *p && buf;) {
        size_t len = pretoken(p);
        /* symbols: one mapped code point per byte */
        char **sym = malloc(len * sizeof *sym);
        size_t ns = 0;
        for (size_t i = 0; sym && i < len; i++)
            sym[ns++] = strdup(t->byte_cp[p[i]]);
        for (;;) {
            int best = -1;
            size_t at = 0;
            for (size_t i = 0; i + 1 < ns; i++) {
                if (strlen(sym[i]) + strlen(sym[i + 1]) + 2 > 2 * sym_cap)
                    continue;
                int r = merge_rank(t, sym[i], sym[i + 1], buf);
                if (r >= 0 && (best < 0 || r < best)) {
                    best = r;
                    at = i;
                }
            }
            if (best < 0)
                break;
            size_t la = strlen(sym[at]), lb = strlen(sym[at + 1]);
            char *m = malloc(la + lb + 1);
            memcpy(m, sym[at], la);
            memcpy(m + la, sym[at + 1], lb + 1);
            free(sym[at]);
            free(sym[at + 1]);
            sym[at] = m;
            memmove(sym + at + 1, sym + at + 2, (ns - at - 2) * sizeof *sym);
            ns--;
        }
        for (size_t i = 0; i < ns; i++) {
            int id = lookup(t, sym[i]);
            if (n < cap && id >= 0)
                ids[n++] = (uint32_t)id;
            free(sym[i]);
        }
        free(sym);
        p += len;
    }
    free(buf);
    return (int)n;
}

static const char *bpe_decode(const struct tokenizer *t, uint32_t id, size_t *len)
{
    const unsigned char *s = (const unsigned char *)t->pieces[id];
    size_t n = 0;
    while (*s) {
        uint32_t cp;
        if (s[0] < 0x80) {
            cp = s[0];
            s += 1;
        } else if ((s[0] & 0xE0) == 0xC0 && s[1]) {
            cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
            s += 2;
        } else { /* not a byte-level code point: copy as is */
            t->out[n++] = (char)*s++;
            continue;
        }
        t->out[n++] = cp < 512 ? (char)t->cp_byte[cp] : '?';
    }
    t->out[n] = 0;
    *len = n;
    return t->out;
}
