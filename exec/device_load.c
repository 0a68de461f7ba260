/* The CUDA module (device.h), opened on first use: device.h's probe and
 * benchmarks and the CUDA backend's ops, each forwarded to the module's
 * entry table. Built instead of device_none.c when CMake found nvcc.
 *
 * The module is opened once (pthread_once) with RTLD_NOW, so a module that
 * lacks a symbol, or a machine that lacks the CUDA runtime or cuBLAS, is
 * reported at the first probe, in the probe's note, never later.
 */
#include "device.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULE_FILE "libalisa_cuda.so"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct device_module *mod;
static char why[256]; /* as struct device_info.note */

/* Tries path; 1 when the module is open and its table accepted, else 0
 * with the reason in why. */
static int try_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *d = dlerror();
        snprintf(why, sizeof why, "the CUDA module could not be opened: %s", d ? d : path);
        return 0;
    }
    const struct device_module *m = dlsym(h, DEVICE_MODULE_SYMBOL);
    if (!m || m->abi != DEVICE_MODULE_ABI) {
        snprintf(why, sizeof why, "%s: %s", path,
                 m ? "a CUDA module from another build (interface version differs)"
                   : "not an alisa CUDA module (no " DEVICE_MODULE_SYMBOL ")");
        dlclose(h);
        return 0;
    }
    mod = m;
    return 1;
}

static void load(void)
{
    const char *env = getenv("ALISA_CUDA_MODULE");
    if (env && *env) {
        try_open(env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char path[PATH_MAX + sizeof MODULE_FILE + 1];
        snprintf(path, sizeof path, "%s/%s", dirname(exe), MODULE_FILE);
        if (access(path, F_OK) == 0 && try_open(path))
            return;
    }
#ifdef ALISA_CUDA_MODULE_PATH
    if (try_open(ALISA_CUDA_MODULE_PATH))
        return;
#endif
    if (!why[0])
        snprintf(why, sizeof why, "the CUDA module (%s) was not found beside the executable",
                 MODULE_FILE);
}

static const struct device_module *module(void)
{
    pthread_once(&once, load);
    return mod;
}

void device_probe(struct device_info *out)
{
    const struct device_module *m = module();
    if (m) {
        m->probe(out);
        return;
    }
    memset(out, 0, sizeof *out);
    out->cuda_built = 1;
    snprintf(out->note, sizeof out->note, "%s", why);
}

int device_bench_gemm(unsigned rows, unsigned out, unsigned in, int few_rows, int reps,
                      double *ns, char *note, size_t n)
{
    const struct device_module *m = module();
    if (m)
        return m->bench_gemm(rows, out, in, few_rows, reps, ns, note, n);
    snprintf(note, n, "%s", why);
    return -1;
}

int device_bench_copy(size_t bytes, int to_device, int reps, double *ns, char *note, size_t n)
{
    const struct device_module *m = module();
    if (m)
        return m->bench_copy(bytes, to_device, reps, ns, note, n);
    snprintf(note, n, "%s", why);
    return -1;
}

int device_cuda_backend(const struct backend_ops **out, char *reason, size_t n)
{
    const struct device_module *m = module();
    *out = m ? m->backend : NULL;
    if (!m)
        snprintf(reason, n, "%s", why);
    return m ? 0 : -1;
}
