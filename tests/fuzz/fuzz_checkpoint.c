/* A Hugging Face checkpoint directory, as alisa --model DIR loads it:
 * config.json, model.safetensors or model.safetensors.index.json with its
 * shards, any names, as a multi-file input (fuzz.h). The directory and the
 * index are loaded (an index naming itself, another index or a missing
 * shard must be refused, not recursed into); a model within the harness's
 * tiny shapes then runs three positions on the CPU backend, as alisa run
 * does, so a shape the loader lets through that the forward pass cannot
 * take is a sanitizer report. */
#include <stdio.h>

#include "forward.h"
#include "fuzz.h"
#include "model.h"

static void run(const struct llm_model *m)
{
    const struct llm_config *c = &m->c;
    if (c->dim > 256 || c->n_layers > 4 || c->vocab > 4096 || c->hidden_dim > 1024 ||
        c->seq_len < 3)
        return;
    struct alisa_err e;
    struct llm_state *s;
    if (llm_state_create(&s, m, 1, 3, &e) != 0)
        return;
    uint32_t tok = 1 % c->vocab, next;
    for (uint32_t pos = 0; pos < 3; pos++) {
        if (llm_forward_greedy(s, &tok, pos, &next) != 0)
            break;
        tok = next;
    }
    llm_state_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir(data, size);
    char index[600];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    struct alisa_err e;
    struct llm_model *m;
    if (llm_load_hf(&m, dir, &e) == 0) {
        run(m);
        llm_free(m);
    }
    size_t at, len;
    if (fuzz_dir_find(data, size, "model.safetensors.index.json", &at, &len) &&
        fuzz_dir_find(data, size, "model.safetensors", &at, &len) &&
        llm_load_hf(&m, index, &e) == 0) /* the index itself, when the directory took the file */
        llm_free(m);
    return 0;
}
