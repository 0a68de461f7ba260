/* GGUF: the container (every key and tensor read back), then the model
 * loader and its tokenizer, as alisa model info and alisa run do. With
 * make fuzz, a structure-aware mutator (mutate.h) changes values, names,
 * shapes and weights and keeps the file's framing valid. */
#include <stdlib.h>

#include "fuzz.h"
#include "gguf.h"
#include "model.h"
#include "mutate.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".gguf");
    struct alisa_err e;
    struct gguf *g;
    if (gguf_open(&g, path, &e) == 0) {
        uint64_t n, u;
        double d;
        char s[64];
        gguf_get_u64(g, "llama.context_length", &u, &e);
        gguf_get_f64(g, "llama.rope.freq_base", &d, &e);
        gguf_get_str(g, "general.architecture", s, sizeof s, &e);
        if (gguf_get_str_array(g, "tokenizer.ggml.tokens", &n, &e) == 0)
            for (uint64_t i = 0; i < n && i < 64; i++) {
                size_t len;
                gguf_array_str(g, "tokenizer.ggml.tokens", i, &len);
            }
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(g, i);
            /* reading back is bounded by the file: only tensors it holds */
            if (t->n_elems <= ((uint64_t)1 << 20)) {
                float *out = malloc(t->n_elems ? t->n_elems * sizeof *out : 1);
                if (out)
                    gguf_read_f32(g, t, out, &e);
                free(out);
            }
        }
        gguf_close(g);
    }
    struct llm_model *m;
    if (llm_load_gguf(&m, path, LLM_WEIGHTS_NATIVE, &e) == 0) { /* the mapped blocks: one row */
        float row[256];
        if (m->c.dim <= 256)
            qmat_row(&m->w.token_embedding, 0, row);
        llm_free(m);
    }
    if (llm_load_gguf(&m, path, LLM_WEIGHTS_F32, &e) == 0) {
        struct tokenizer *t;
        if (tok_load(&t, path, m->c.vocab, &e) == 0) {
            uint32_t ids[64];
            int k = tok_encode(t, "Once upon a time", 1, ids, 64);
            for (int i = 1; i < k; i++) {
                size_t len;
                const char *piece = tok_decode(t, ids[i - 1], ids[i], &len);
                fuzz_read(piece, len);
            }
            tok_free(t);
        }
        llm_free(m);
    }
    return 0;
}

#ifdef ALISA_FUZZING
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    if (seed % 4 == 0) /* bytes: the framing's own checks stay fuzzed */
        return LLVMFuzzerMutate(data, size, max_size);
    size_t n = fuzz_mutate_gguf(data, size, max_size, seed / 4);
    return n ? n : LLVMFuzzerMutate(data, size, max_size);
}
#endif
