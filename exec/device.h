/* Probing for an accelerator: what the build has and what the machine has,
 * and the two microbenchmarks of device 0 that the CUDA calibration cannot
 * read from the executor's timings (cuBLAS GEMMs alone, copies over the
 * host link).
 *
 * The probe never aborts and never fails: a build without CUDA, a machine
 * without a driver or without a device are all ordinary answers, reported in
 * struct device_info. The benchmarks own their buffers for the call only.
 *
 * The CUDA code (this probe's CUDA half, the CUDA backend and kernels/) is a
 * shared module, libalisa_cuda.so, opened on first use (device_load.c): a
 * command that never asks for a GPU never maps the CUDA runtime or cuBLAS
 * (about 200 MB resident), and a machine without them runs every CPU
 * command. The module is looked for at $ALISA_CUDA_MODULE when set, else
 * beside the executable, else where the build wrote it. A module that cannot
 * be opened is reported as the probe's note, like a missing driver.
 */
#ifndef ALISA_DEVICE_H
#define ALISA_DEVICE_H

#include <stddef.h>

struct backend_ops;

struct device_info {
    int cuda_built;        /* 1 when this binary was compiled with nvcc */
    int n_devices;         /* CUDA devices visible, 0 when none or not built */
    char name[256];        /* name of device 0, "" when none */
    size_t mem_bytes;      /* global memory of device 0, bytes */
    int cc_major, cc_minor; /* compute capability of device 0 */
    char driver[96];       /* the NVIDIA driver's version (NVML, as nvidia-smi prints it), else
                              the CUDA driver API's; "" when there is no device */
    char note[256];        /* why there is no device, "" when there is one */
};

/* Fills *out. Cannot fail. */
void device_probe(struct device_info *out);

/* Time of one GEMM as the CUDA backend runs its projections: y (rows, out)
 * = x (rows, in) W^T, FP16 weights, FP32 accumulation and output: with
 * few_rows by kern_gemv over an FP32 x (the backend's few-row products;
 * rows and in as kern_gemv_fits takes them), else by cuBLAS over an FP16
 * x; timed `reps` times after a warm-up: each time, ns, in ns[0..reps-1]
 * (the caller takes the median). Returns 0, or -1 with the reason in note
 * (n bytes) when there is no device or a call fails. */
int device_bench_gemm(unsigned rows, unsigned out, unsigned in, int few_rows, int reps,
                      double *ns, char *note, size_t n);

/* Time of one copy of `bytes` between pinned host memory and the device,
 * host to device (to_device 1) or back, each synchronised, timed `reps`
 * times after a warm-up: each time, ns, in ns[0..reps-1]. Returns 0, or -1
 * with the reason in note. */
int device_bench_copy(size_t bytes, int to_device, int reps, double *ns, char *note, size_t n);

/* The CUDA backend's ops from the module into *out: 0, or -1 with the
 * reason in why (n bytes) when this build has no CUDA or the module cannot
 * be opened. Opens the module once per process; thread-safe. */
int device_cuda_backend(const struct backend_ops **out, char *why, size_t n);

/* What the module exports, under the name DEVICE_MODULE_SYMBOL: the CUDA
 * halves of the calls above. abi must equal DEVICE_MODULE_ABI (a module
 * from another build is refused). */
#define DEVICE_MODULE_SYMBOL "alisa_cuda_module"
#define DEVICE_MODULE_ABI 3
struct device_module {
    int abi;
    void (*probe)(struct device_info *out);
    int (*bench_gemm)(unsigned rows, unsigned out, unsigned in, int few_rows, int reps,
                      double *ns, char *note, size_t n);
    int (*bench_copy)(size_t bytes, int to_device, int reps, double *ns, char *note, size_t n);
    const struct backend_ops *backend;
};

#endif
