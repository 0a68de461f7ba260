/* safetensors files: the header length, the JSON header, every tensor's
 * dtype, shape and byte range, and reading each tensor that is small enough
 * (the loader of alisa --model DIR or FILE.safetensors). */
#include <stdlib.h>

#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct alisa_err e;
    struct st_file *f;
    if (st_open(&f, fuzz_file(data, size, ".safetensors"), &e) != 0)
        return 0;
    for (size_t i = 0; i < st_n_tensors(f); i++) {
        const struct st_tensor *t = st_tensor_at(f, i);
        if (t->n_elems > ((size_t)1 << 20))
            continue;
        float *out = malloc(t->n_elems ? t->n_elems * sizeof *out : 1);
        if (out)
            st_read_f32(f, t, out, &e);
        free(out);
    }
    st_close(f);
    return 0;
}
