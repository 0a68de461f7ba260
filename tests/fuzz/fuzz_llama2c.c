/* llama2.c checkpoints: the header, the size check and the weight carving
 * (alisa run --model FILE.bin). */
#include "fuzz.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct alisa_err e;
    struct llm_model *m;
    if (llm_load_llama2c(&m, fuzz_file(data, size, ".bin"), &e) == 0)
        llm_free(m);
    return 0;
}
