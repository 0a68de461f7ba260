/* Results databases (alisa db export, and db merge's inputs): every query
 * over the file, opened read-only, output discarded. */
#include <stdio.h>

#include "fuzz.h"
#include "results.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".db");
    FILE *out = fopen("/dev/null", "w");
    struct alisa_err e;
    for (int i = 0; out && results_queries[i]; i++)
        results_export(path, results_queries[i], NULL, out, &e);
    if (out)
        fclose(out);
    return 0;
}
