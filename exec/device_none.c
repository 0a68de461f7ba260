/* Device probe of a CPU-only build: there is never a device.
 *
 * Compiled instead of device_cuda.cu when CMake found no nvcc, so the rest of
 * the program has one probe to call either way.
 */
#include "device.h"

#include <stdio.h>
#include <string.h>

void device_probe(struct device_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->note, sizeof out->note, "built without CUDA (no nvcc at configure time)");
}
