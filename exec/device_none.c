/* Device probe of a CPU-only build: there is never a device, and the
 * device benchmarks say so.
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

int device_bench_gemm(unsigned rows, unsigned out, unsigned in, int few_rows, int reps,
                      double *ns, char *note, size_t n)
{
    snprintf(note, n, "built without CUDA (no nvcc at configure time)");
    return -1;
}

int device_bench_copy(size_t bytes, int to_device, int reps, double *ns, char *note, size_t n)
{
    snprintf(note, n, "built without CUDA (no nvcc at configure time)");
    return -1;
}

int device_cuda_backend(const struct backend_ops **out, char *why, size_t n)
{
    *out = NULL;
    snprintf(why, n, "this binary was built without CUDA (no nvcc at configure time)");
    return -1;
}
