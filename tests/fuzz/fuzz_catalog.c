/* The INI catalogs and calibrated profiles (--profile FILE): the first
 * byte picks models (odd), software (bit 1 set) or hardware, the rest is
 * the file. */
#include "catalog.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *path = fuzz_file(data + 1, size - 1, ".ini");
    struct catalog c = {0};
    struct alisa_err e;
    if (data[0] & 1) {
        if (catalog_load_models(&c, path, "/nonexistent-models-dir", &e) == 0)
            catalog_deinit(&c);
    } else if (data[0] & 2) {
        if (catalog_load_software(&c, path, &e) == 0)
            catalog_deinit(&c);
    } else if (catalog_load_hardware(&c, path, &e) == 0) {
        catalog_deinit(&c);
    }
    return 0;
}
