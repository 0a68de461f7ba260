/* Sweep specs (alisa sweep FILE): the spec, then its first points. */
#include "fuzz.h"
#include "sweep_spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sweep_spec s;
    struct alisa_err e;
    if (sweep_spec_load(&s, fuzz_file(data, size, ".sweep"), &e) == 0) {
        for (uint64_t k = 0; k < s.n_points && k < 8; k++) {
            struct sweep_point p;
            if (sweep_point_make(&s, k, &p, &e) == 0)
                sweep_point_free(&p);
        }
        sweep_spec_free(&s);
    }
    return 0;
}
