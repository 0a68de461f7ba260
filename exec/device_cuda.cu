/* Device probe of a CUDA build, through the CUDA runtime.
 *
 * Every runtime call is checked; an error (no driver, no device, a driver
 * older than the runtime) becomes the note, never an abort.
 */
extern "C" {
#include "device.h"
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" void device_probe(struct device_info *out)
{
    memset(out, 0, sizeof *out);
    out->cuda_built = 1;
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        snprintf(out->note, sizeof out->note, "no usable CUDA device: %s",
                 cudaGetErrorString(rc));
        cudaGetLastError(); /* clear the sticky error for later callers */
        return;
    }
    if (n == 0) {
        snprintf(out->note, sizeof out->note, "no CUDA device found");
        return;
    }
    cudaDeviceProp prop;
    rc = cudaGetDeviceProperties(&prop, 0);
    if (rc != cudaSuccess) {
        snprintf(out->note, sizeof out->note, "device 0 unreadable: %s", cudaGetErrorString(rc));
        return;
    }
    out->n_devices = n;
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->mem_bytes = prop.totalGlobalMem;
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
}
