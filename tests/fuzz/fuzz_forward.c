/* A GGUF model and its tokenizer through the forward pass, as alisa run
 * does: model.gguf (+ tokenizer.bin, a llama2.c tokenizer; else the GGUF's
 * own) as a multi-file input (fuzz.h). The model loads both ways (weights
 * mapped in their types, and widened to F32); a model within the harness's
 * tiny shapes then runs a prompt and two decode steps on the CPU backend,
 * attention rows on, and every token is decoded and read as the CLI prints
 * it. With make fuzz the model file is mutated by structure (mutate.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "fuzz.h"
#include "model.h"
#include "mutate.h"
#include "tokenizer.h"

/* the shapes a forward step is run at: a few milliseconds each */
static int tiny(const struct llm_config *c)
{
    return c->dim <= 256 && c->n_layers <= 4 && c->vocab <= 4096 && c->hidden_dim <= 1024;
}

static void run(const struct llm_model *m, const char *tok_path)
{
    struct alisa_err e;
    struct tokenizer *t = NULL;
    struct llm_state *s = NULL;
    float *rows = NULL;
    if (tok_load(&t, tok_path, m->c.vocab, &e) != 0)
        return;
    uint32_t ids[16];
    int n = tok_encode(t, "Once upon a time", 1, ids, 8);
    uint32_t max_len = m->c.seq_len < 12 ? m->c.seq_len : 12;
    if (n < 1 || !tiny(&m->c) || (uint32_t)n + 2 > max_len)
        goto done;
    if (llm_state_create(&s, m, 1, max_len, &e) != 0)
        goto done;
    rows = malloc((size_t)m->c.n_layers * max_len * sizeof *rows);
    if (!rows)
        goto done;
    uint32_t tok = ids[0], next = 0;
    for (uint32_t pos = 0; pos < (uint32_t)n + 2; pos++) {
        if (pos < (uint32_t)n)
            tok = ids[pos];
        const float *logits = llm_forward(s, &tok, pos, rows);
        if (!logits)
            break;
        next = llm_argmax(logits, m->c.vocab);
        size_t len;
        const char *piece = tok_decode(t, tok, next, &len);
        fuzz_read(piece, len);
        tok = next;
    }
done:
    free(rows);
    llm_state_free(s);
    tok_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir(data, size);
    char model[600], tok[600];
    size_t at, len;
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    snprintf(tok, sizeof tok, "%s/%s", dir,
             fuzz_dir_find(data, size, "tokenizer.bin", &at, &len) ? "tokenizer.bin" : "model.gguf");
    struct alisa_err e;
    struct llm_model *m;
    if (llm_load_gguf(&m, model, LLM_WEIGHTS_NATIVE, &e) == 0) {
        run(m, tok);
        llm_free(m);
    }
    if (llm_load_gguf(&m, model, LLM_WEIGHTS_F32, &e) == 0) {
        run(m, tok);
        llm_free(m);
    }
    return 0;
}

#ifdef ALISA_FUZZING
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    size_t at, len;
    if (seed % 4 == 0 || !fuzz_dir_find(data, size, "model.gguf", &at, &len))
        return LLVMFuzzerMutate(data, size, max_size);
    /* the model file mutated by structure in place, the files after it moved */
    size_t tail = size - at - len;
    uint8_t *after = malloc(tail ? tail : 1);
    if (!after)
        return LLVMFuzzerMutate(data, size, max_size);
    memcpy(after, data + at + len, tail);
    size_t n = fuzz_mutate_gguf(data + at, len, max_size - at - tail, seed / 4);
    if (n == 0)
        n = len;
    memcpy(data + at + n, after, tail);
    free(after);
    return at + n + tail;
}
#endif
