/* llama2.c tokenizers (alisa run --tokenizer FILE): the first two bytes
 * are the model's vocabulary size, the rest the tokenizer file; a loaded
 * tokenizer encodes and decodes a fixed text. */
#include "fuzz.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint32_t vocab = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    struct alisa_err e;
    struct tokenizer *t;
    if (tok_load(&t, fuzz_file(data + 2, size - 2, ".bin"), vocab, &e) == 0) {
        uint32_t ids[96];
        int k = tok_encode(t, "Once upon a time \xc3\xa9\xe2\x82\xac\x01\xff", 1, ids, 96);
        for (int i = 1; i < k; i++) {
            size_t len;
            const char *piece = tok_decode(t, ids[i - 1], ids[i], &len);
            fuzz_read(piece, len);
        }
        tok_free(t);
    }
    return 0;
}
