/* The host side of a GPU machine, as offloading systems meet it (issues 44
 * and 47): the host's memory bandwidth (a triad over all cores, the figure
 * FlexGen's CPU attention and a pageable copy's staging are bound by) and
 * host-device copy rates from pinned memory (cudaHostAlloc: FlexGen's
 * pinned weights, DeepSpeed's pin_memory) and from pageable memory (malloc:
 * HF Accelerate's offloaded weights, FlexGen's CPU cache), each direction.
 *
 * Built by CMake with the CUDA module (build/host_link), packed by
 * scripts/gpu-pack, run by `scripts/gpu-window host`. Prints a table and one
 * JSON line. Without a device it measures the triad only and exits 77.
 * Usage: host_link [MIB] (copy size, default 256; the triad uses 4x that per
 * array, at least 512 MiB in all).
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/* a[i] = b[i] + 3 c[i] over n doubles, split across threads; best of reps,
 * GB/s of the 3 arrays' bytes (STREAM's count: reads and the write). */
static double triad_gbps(size_t n, unsigned threads, int reps)
{
    std::vector<double> a(n), b(n, 1.0), c(n, 2.0);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < threads; t++)
            ts.emplace_back([&, t] {
                size_t lo = n * t / threads, hi = n * (t + 1) / threads;
                for (size_t i = lo; i < hi; i++)
                    a[i] = b[i] + 3.0 * c[i];
            });
        for (auto &th : ts)
            th.join();
        best = std::min(best, now_s() - t0);
    }
    return 3.0 * 8.0 * (double)n / best / 1e9;
}

/* One copy of bytes, best of reps, GB/s; -1 on a CUDA error. */
static double copy_gbps(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int reps)
{
    if (cudaMemcpy(dst, src, bytes, kind) != cudaSuccess) /* warm-up */
        return -1;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (cudaMemcpy(dst, src, bytes, kind) != cudaSuccess)
            return -1;
        best = std::min(best, now_s() - t0);
    }
    return (double)bytes / best / 1e9;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    if (mib < 1 || mib > 8192) {
        fprintf(stderr, "host_link: copy size %s MiB: expected 1..8192\n", argv[1]);
        return 2;
    }
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    size_t n = std::max<size_t>(mib * 4 << 20, (size_t)512 << 20) / 8 / 3;
    double triad = triad_gbps(n, threads, 5), triad1 = triad_gbps(n, 1, 3);
    printf("host triad: %.1f GB/s on %u threads, %.1f GB/s on one (3 x %.0f MiB)\n", triad,
           threads, triad1, n * 8.0 / (1 << 20));
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        printf("no CUDA device (%s): copies not measured\n",
               ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
        printf("{\"triad_gbps\": %.3f, \"triad_1thread_gbps\": %.3f, \"threads\": %u, "
               "\"device\": null}\n", triad, triad1, threads);
        return 77;
    }
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    size_t bytes = mib << 20;
    void *dev = NULL, *pinned = NULL;
    char *pageable = (char *)malloc(bytes);
    if (cudaMalloc(&dev, bytes) != cudaSuccess ||
        cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault) != cudaSuccess || !pageable) {
        fprintf(stderr, "host_link: cannot allocate %zu MiB on the device and the host\n", mib);
        return 1;
    }
    memset(pageable, 1, bytes); /* touched: no first-use page faults in the timing */
    memset(pinned, 1, bytes);
    double r[4] = {copy_gbps(dev, pinned, bytes, cudaMemcpyHostToDevice, 5),
                   copy_gbps(pinned, dev, bytes, cudaMemcpyDeviceToHost, 5),
                   copy_gbps(dev, pageable, bytes, cudaMemcpyHostToDevice, 5),
                   copy_gbps(pageable, dev, bytes, cudaMemcpyDeviceToHost, 5)};
    if (r[0] < 0 || r[1] < 0 || r[2] < 0 || r[3] < 0) {
        fprintf(stderr, "host_link: a copy failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    printf("device: %s; copies of %zu MiB, best of 5, GB/s\n", p.name, mib);
    printf("  pinned   host->device %.2f  device->host %.2f\n", r[0], r[1]);
    printf("  pageable host->device %.2f  device->host %.2f\n", r[2], r[3]);
    printf("{\"triad_gbps\": %.3f, \"triad_1thread_gbps\": %.3f, \"threads\": %u, "
           "\"device\": \"%s\", \"copy_mib\": %zu, \"pinned_h2d_gbps\": %.3f, "
           "\"pinned_d2h_gbps\": %.3f, \"pageable_h2d_gbps\": %.3f, \"pageable_d2h_gbps\": %.3f}\n",
           triad, triad1, threads, p.name, mib, r[0], r[1], r[2], r[3]);
    cudaFree(dev);
    cudaFreeHost(pinned);
    free(pageable);
    return 0;
}
