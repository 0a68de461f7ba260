/* Probing for an accelerator: what the build has and what the machine has.
 *
 * Owns nothing but the probe. It never aborts and never fails: a build
 * without CUDA, a machine without a driver or without a device are all
 * ordinary answers, reported in struct device_info.
 */
#ifndef ALISA_DEVICE_H
#define ALISA_DEVICE_H

#include <stddef.h>

struct device_info {
    int cuda_built;        /* 1 when this binary was compiled with nvcc */
    int n_devices;         /* CUDA devices visible, 0 when none or not built */
    char name[256];        /* name of device 0, "" when none */
    size_t mem_bytes;      /* global memory of device 0, bytes */
    int cc_major, cc_minor; /* compute capability of device 0 */
    char note[256];        /* why there is no device, "" when there is one */
};

/* Fills *out. Cannot fail. */
void device_probe(struct device_info *out);

#endif
