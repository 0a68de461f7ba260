/* The trace reader and validator (alisa trace check). */
#include "fuzz.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct alisa_err e;
    uint64_t steps;
    trace_check(fuzz_file(data, size, ".trace"), &steps, &e);
    return 0;
}
