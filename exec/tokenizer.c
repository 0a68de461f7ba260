/* llama2.c tokenizer (contract in tokenizer.h). Look-ups go through a
 * sorted copy of the vocabulary (qsort + bsearch, as run.c); merges scan the
 * id list for the best-scoring adjacent pair until none applies.
 */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tok_index {
    const char *str;
    uint32_t id;
};

struct tokenizer {
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
    free(t);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(((const struct tok_index *)a)->str, ((const struct tok_index *)b)->str);
}

int tok_load(struct tokenizer **out, const char *path, uint32_t vocab, struct alisa_err *e)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ALISA_EIO, "%s: cannot open tokenizer", path);
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

static int lookup(const struct tokenizer *t, const char *s)
{
    struct tok_index key = {s, 0};
    const struct tok_index *r = bsearch(&key, t->sorted, t->vocab, sizeof key, by_str);
    return r ? (int)r->id : -1;
}

int tok_encode(const struct tokenizer *t, const char *text, int bos, uint32_t *ids, size_t cap)
{
    size_t n = 0, tl = strlen(text);
    if (cap < tl + 3)
        return ALISA_EINVAL;
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

const char *tok_decode(const struct tokenizer *t, uint32_t prev, uint32_t id, size_t *len)
{
    const char *piece = t->pieces[id];
    if (prev == TOK_BOS && piece[0] == ' ')
        piece++;
    unsigned int byte;
    if (strlen(piece) == 6 && sscanf(piece, "<0x%02X>", &byte) == 1) {
        *len = 1;
        return (const char *)t->bytes[byte];
    }
    *len = strlen(piece);
    return piece;
}
