/* Device probe and microbenchmarks of a CUDA build, through the CUDA
 * runtime and cuBLAS: the CUDA module's entry table (device.h's struct
 * device_module, opened by device_load.c). Timings are CUDA events around each call on one
 * stream, each repetition's time handed back (the caller takes the median).
 *
 * Every runtime call is checked; an error (no driver, no device, a driver
 * older than the runtime) becomes the note, never an abort.
 */
extern "C" {
#include "device.h"
#include "kernels.h"
extern const struct backend_ops backend_cuda; /* backend_cuda.c */
}

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The driver's version into out (n bytes): NVML's, opened for the call
 * (libnvidia-ml ships with the driver, not with CUDA), else the CUDA driver
 * API's number. Cannot fail. */
static void driver_version(char *out, size_t n)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        typedef int (*init_fn)(void);
        typedef int (*version_fn)(char *, unsigned);
        init_fn init = (init_fn)dlsym(h, "nvmlInit_v2");
        version_fn version = (version_fn)dlsym(h, "nvmlSystemGetDriverVersion");
        init_fn shutdown = (init_fn)dlsym(h, "nvmlShutdown");
        char v[80] = "";
        int ok = init && version && shutdown && init() == 0; /* NVML_SUCCESS */
        if (ok && version(v, sizeof v) == 0 && v[0])
            snprintf(out, n, "%s", v);
        if (ok)
            shutdown();
        dlclose(h);
        if (out[0])
            return;
    }
    int dv = 0;
    if (cudaDriverGetVersion(&dv) == cudaSuccess && dv > 0)
        snprintf(out, n, "CUDA driver API %d.%d", dv / 1000, dv % 1000 / 10);
}

static void cuda_probe(struct device_info *out)
{
    memset(out, 0, sizeof *out);
    out->cuda_built = 1;
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
        /* the runtime's words for a machine without a GPU name the driver */
        snprintf(out->note, sizeof out->note, "no CUDA device (%s)",
                 rc == cudaErrorNoDevice ? "none found"
                                         : "no NVIDIA driver, or one older than this build's "
                                           "CUDA runtime");
        cudaGetLastError();
        return;
    }
    if (rc != cudaSuccess) {
        snprintf(out->note, sizeof out->note, "no usable CUDA device: %s",
                 cudaGetErrorString(rc));
        cudaGetLastError(); /* clear the sticky error for later callers */
        return;
    }
    if (n == 0) {
        snprintf(out->note, sizeof out->note, "no CUDA device (none found)");
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
    driver_version(out->driver, sizeof out->driver);
}

/* A failed call's text into note; 1 when rc failed. */
static int failed(cudaError_t rc, const char *what, char *note, size_t n)
{
    if (rc == cudaSuccess)
        return 0;
    snprintf(note, n, "%s: %s", what, cudaGetErrorString(rc));
    cudaGetLastError();
    return 1;
}

/* Times fn(note, n) (non-zero: failed, note set) on stream s, reps times
 * after one warm-up: each call's ns in t[0..reps-1]. */
template <typename F>
static int time_calls(F fn, cudaStream_t s, int reps, double *t, char *note, size_t n)
{
    cudaEvent_t a = NULL, b = NULL;
    int rc = -1;
    if (failed(cudaEventCreate(&a), "cudaEventCreate", note, n) ||
        failed(cudaEventCreate(&b), "cudaEventCreate", note, n) || fn(note, n) ||
        failed(cudaStreamSynchronize(s), "cudaStreamSynchronize", note, n))
        goto out;
    for (int r = 0; r < reps; r++) {
        float ms = 0;
        if (failed(cudaEventRecord(a, s), "cudaEventRecord", note, n) || fn(note, n) ||
            failed(cudaEventRecord(b, s), "cudaEventRecord", note, n) ||
            failed(cudaEventSynchronize(b), "cudaEventSynchronize", note, n) ||
            failed(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime", note, n))
            goto out;
        t[r] = ms * 1e6;
    }
    rc = 0;
out:
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    return rc;
}

static int cuda_bench_gemm(unsigned rows, unsigned out, unsigned in, int few_rows, int reps,
                           double *ns, char *note, size_t n)
{
    __half *w = NULL, *x = NULL;
    float *y = NULL, *xf = NULL; /* xf: kern_gemv's FP32 input (zeros: its time does not
                                  * depend on the values) */
    cublasHandle_t h = NULL;
    cudaStream_t s = NULL;
    size_t nw = (size_t)out * in, nx = (size_t)rows * in;
    __half *hw = (__half *)malloc((nw > nx ? nw : nx) * sizeof *hw);
    int rc = -1;
    if (!hw) {
        snprintf(note, n, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < (nw > nx ? nw : nx); i++) /* values in [-1, 1) */
        hw[i] = __float2half((float)((i * 2654435761u) % 65536) / 32768.0f - 1.0f);
    if (failed(cudaStreamCreate(&s), "cudaStreamCreate", note, n) ||
        failed(cudaMalloc((void **)&w, nw * sizeof *w), "cudaMalloc", note, n) ||
        failed(cudaMalloc((void **)&x, nx * sizeof *x), "cudaMalloc", note, n) ||
        failed(cudaMalloc((void **)&y, (size_t)rows * out * sizeof *y), "cudaMalloc", note, n) ||
        failed(cudaMemcpy(w, hw, nw * sizeof *w, cudaMemcpyHostToDevice), "cudaMemcpy", note, n) ||
        failed(cudaMemcpy(x, hw, nx * sizeof *x, cudaMemcpyHostToDevice), "cudaMemcpy", note, n))
        goto out;
    if (few_rows && (failed(cudaMalloc((void **)&xf, nx * sizeof *xf), "cudaMalloc", note, n) ||
                     failed(cudaMemset(xf, 0, nx * sizeof *xf), "cudaMemset", note, n)))
        goto out;
    if (!few_rows &&
        (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)) {
        snprintf(note, n, "cublasCreate failed");
        goto out;
    }
    rc = time_calls(
        [&](char *nt, size_t nn) {
            if (few_rows)
                return failed(kern_gemv(y, 0, xf, (const uint16_t *)w, 0, 1, rows, out, in, 0, s),
                              "kern_gemv", nt, nn);
            const float one = 1.0f, zero = 0.0f;
            cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)rows,
                                             (int)in, &one, w, CUDA_R_16F, (int)in, x, CUDA_R_16F,
                                             (int)in, &zero, y, CUDA_R_32F, (int)out,
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (st == CUBLAS_STATUS_SUCCESS)
                return 0;
            snprintf(nt, nn, "cublasGemmEx: %s", cublasGetStatusString(st));
            return 1;
        },
        s, reps, ns, note, n);
out:
    if (h)
        cublasDestroy(h);
    cudaFree(w);
    cudaFree(x);
    cudaFree(xf);
    cudaFree(y);
    if (s)
        cudaStreamDestroy(s);
    free(hw);
    return rc;
}

static int cuda_bench_copy(size_t bytes, int to_device, int reps, double *ns, char *note,
                                 size_t n)
{
    void *host = NULL, *dev = NULL;
    cudaStream_t s = NULL;
    int rc = -1;
    if (failed(cudaStreamCreate(&s), "cudaStreamCreate", note, n) ||
        failed(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "cudaHostAlloc", note, n) ||
        failed(cudaMalloc(&dev, bytes), "cudaMalloc", note, n))
        goto out;
    memset(host, 1, bytes);
    rc = time_calls(
        [&](char *nt, size_t nn) {
            return failed(to_device ? cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s)
                                    : cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s),
                          "cudaMemcpyAsync", nt, nn);
        },
        s, reps, ns, note, n);
out:
    cudaFree(dev);
    cudaFreeHost(host);
    if (s)
        cudaStreamDestroy(s);
    return rc;
}

/* The module's one entry point (device.h); the backend is backend_cuda.c's. */
extern "C" __attribute__((visibility("default"))) const struct device_module alisa_cuda_module = {
    DEVICE_MODULE_ABI, cuda_probe, cuda_bench_gemm, cuda_bench_copy, &backend_cuda,
};
