/* Request streams (alisa serve --requests-csv FILE): the CSV, and a stream
 * it accepts written back and read again to the same requests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct workload w, back;
    struct alisa_err e;
    const char *path = fuzz_file(data, size, ".csv");
    if (workload_read_csv(path, &w, &e) != 0)
        return 0;
    char copy[4200];
    snprintf(copy, sizeof copy, "%s.back.csv", path);
    if (workload_write_csv(copy, &w, &e) == 0 && workload_read_csv(copy, &back, &e) == 0) {
        if (back.n != w.n || memcmp(back.req, w.req, w.n * sizeof *w.req) != 0)
            abort(); /* a stream must read back as it was written */
        workload_free(&back);
    }
    remove(copy);
    workload_free(&w);
    return 0;
}
