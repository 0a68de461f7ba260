/* The trace reader and validator (alisa trace check). With make fuzz, a
 * structure-aware mutator (mutate.h) changes fields and chunks and keeps
 * every CRC valid, so most inputs get past the framing to the rows. */
#include "fuzz.h"
#include "mutate.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct alisa_err e;
    uint64_t steps;
    trace_check(fuzz_file(data, size, ".trace"), &steps, &e);
    return 0;
}

#ifdef ALISA_FUZZING
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    switch (seed % 8) {
    case 0: /* bytes, CRCs as they fall: the checksum check stays fuzzed */
        return LLVMFuzzerMutate(data, size, max_size);
    case 1: case 2: { /* bytes, then CRCs made valid */
        size_t n = LLVMFuzzerMutate(data, size, max_size);
        fuzz_trace_fix_crc(data, n);
        return n;
    }
    default: {
        size_t n = fuzz_mutate_trace(data, size, max_size, seed / 8);
        return n ? n : LLVMFuzzerMutate(data, size, max_size);
    }
    }
}
#endif
