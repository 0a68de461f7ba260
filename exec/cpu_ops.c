/* CPU operations of the forward pass (contract in cpu_ops.h). Matrices are
 * [out][in] row-major, so y = x W^T is one cblas_sgemm for a whole batch,
 * and one cblas_sgemv for a single row (OpenBLAS's matrix-vector kernel
 * streams the weights at 2.3x the rate its GEMM does on a 1-row product:
 * SmolLM2 decode at batch 1, 29 -> 65 tokens/s on the 2-core machine).
 * The reductions are in FP32, sequential as llama2.c's run.c writes them
 * but softmax's (vector lanes, libmvec's expf); the CUDA kernels'
 * block-wide sums differ from them by rounding only.
 */
#include "cpu_ops.h"

#include <sched.h>
#include <unistd.h>

#include <cblas.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

/* glibc's vector expf (libmvec, which libm.so pulls in as needed): declared
 * SIMD so that the loops below call its 4-, 8- or 16-lane variant (for the
 * baseline, AVX2 and AVX-512 clones) instead of the scalar expf one element
 * at a time; at most 1 ulp from expf (glibc's libm-test-ulps). VEC_CLONES
 * builds a function's loops for AVX-512, AVX2 and the baseline, picked at
 * load time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(_OPENMP)
float expf(float) __attribute__((simd("notinbranch")));
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

void cpu_flush_subnormals(void)
{
#if defined(__SSE2__)
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}

static uint32_t n_threads;
static int threads_given; /* by the caller, ALISA_THREADS or OMP_NUM_THREADS: never capped */

/* A positive count from the environment variable name, else 0. */
static uint32_t env_threads(const char *name)
{
    const char *v = getenv(name);
    char *end;
    unsigned long n = v && *v ? strtoul(v, &end, 10) : 0;
    return v && *v && !*end && n > 0 && n <= 4096 ? (uint32_t)n : 0;
}

/* The CPUs this process may run on (its affinity mask: a container's or
 * taskset's share, not every core of the machine), at least 1. */
static uint32_t affinity_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

static void apply_threads(uint32_t n)
{
    n_threads = n;
#ifdef _OPENMP
    omp_set_num_threads((int)n);
#endif
    openblas_set_num_threads((int)n);
}

void cpu_threads_set(uint32_t n)
{
    threads_given = 1;
    if (!n)
        n = env_threads("ALISA_THREADS");
    if (!n)
        n = env_threads("OMP_NUM_THREADS");
    if (!n) {
        threads_given = 0;
        n = affinity_cpus();
    }
    apply_threads(n);
}

void cpu_threads_fit(uint64_t params)
{
    if (!n_threads)
        cpu_threads_set(0);
    if (threads_given)
        return;
    uint64_t cap = params / CPU_PARAMS_PER_THREAD;
    if (cap < 1)
        cap = 1;
    if (n_threads > cap)
        apply_threads((uint32_t)cap);
}

uint32_t cpu_threads(void)
{
    if (!n_threads)
        cpu_threads_set(0);
    return n_threads;
}

int cpu_waits_spin(void)
{
    static int spin = -1; /* set once: the policy cannot change after OpenMP starts */
    if (spin < 0) {
        const char *p = getenv("OMP_WAIT_POLICY");
        spin = p && strcasecmp(p, "active") == 0;
    }
    return spin;
}

int cpu_rows_parallel(size_t n, size_t work, size_t min)
{
    return n > 1 && (cpu_waits_spin() || work >= min);
}

size_t cpu_attend_parallel_min(void)
{
    return cpu_threads() > 1 && !cpu_waits_spin() ? CPU_ATTEND_PARALLEL_MIN : 0;
}

uint32_t cpu_thread_id(void)
{
#ifdef _OPENMP
    return (uint32_t)omp_get_thread_num();
#else
    return 0;
#endif
}

static int reference_gemm = -1;

void cpu_matmul(int transb, uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A,
                uint32_t lda, const float *B, uint32_t ldb, float *C, uint32_t ldc)
{
    if (reference_gemm < 0) {
        const char *env = getenv("ALISA_REFERENCE_GEMM");
        reference_gemm = env && strcmp(env, "1") == 0;
    }
    if (reference_gemm) {
        for (uint32_t i = 0; i < M; i++)
            for (uint32_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (uint32_t k = 0; k < K; k++)
                    acc += A[(size_t)i * lda + k] *
                           (transb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                C[(size_t)i * ldc + j] = alpha * acc;
            }
        return;
    }
    if (M == 1) { /* C = A B^T = B A (transb), or A B = B^T A */
        cblas_sgemv(CblasRowMajor, transb ? CblasNoTrans : CblasTrans, transb ? (int)N : (int)K,
                    transb ? (int)K : (int)N, alpha, B, (int)ldb, A, 1, 0.0f, C, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}

void cpu_gemm(float *y, const float *x, const float *w, uint32_t R, uint32_t out, uint32_t in)
{
    cpu_matmul(1, R, out, in, 1.0f, x, in, w, in, y, out);
}

void cpu_rmsnorm(float *o, const float *x, const float *w, uint32_t n, float eps)
{
    float ss = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss = 1.0f / sqrtf(ss / (float)n + eps);
    for (uint32_t j = 0; j < n; j++)
        o[j] = w[j] * (ss * x[j]);
}

void cpu_layernorm(float *o, const float *x, const float *w, const float *b, uint32_t n,
                   float eps)
{
    float mean = 0.0f, var = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        mean += x[j];
    mean /= (float)n;
    for (uint32_t j = 0; j < n; j++)
        var += (x[j] - mean) * (x[j] - mean);
    float inv = 1.0f / sqrtf(var / (float)n + eps);
    for (uint32_t j = 0; j < n; j++)
        o[j] = w[j] * ((x[j] - mean) * inv) + b[j];
}

void cpu_add_bias(float *y, const float *b, uint32_t R, uint32_t n)
{
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t j = 0; j < n; j++)
            y[(size_t)r * n + j] += b[j];
}

void cpu_relu(float *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = h[i] > 0.0f ? h[i] : 0.0f;
}

void cpu_rope(float *vec, uint32_t n, uint32_t head_dim, const float *cs, const float *sn)
{
    for (uint32_t i = 0; i < n; i += 2) {
        uint32_t j = (i % head_dim) / 2;
        float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * cs[j] - v1 * sn[j];
        vec[i + 1] = v0 * sn[j] + v1 * cs[j];
    }
}

VEC_CLONES void cpu_swiglu(float *hb, const float *hb2, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = hb[i];
        hb[i] = g / (1.0f + expf(-g)) * hb2[i];
    }
}

VEC_CLONES void cpu_softmax(float *a, uint32_t n)
{
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (uint32_t t = 0; t < n; t++)
        mx = a[t] > mx ? a[t] : mx;
#pragma omp simd reduction(+ : sum)
    for (uint32_t t = 0; t < n; t++) {
        a[t] = expf(a[t] - mx);
        sum += a[t];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (uint32_t t = 0; t < n; t++)
        a[t] *= inv;
}

VEC_CLONES void cpu_attend(const float *q, const float *K, const float *V, uint32_t n,
                            uint32_t kv_dim, uint32_t hs, uint32_t group, uint32_t H, float *att,
                            uint32_t ld, float *w, float *out)
{
    /* plain loops, not BLAS: the forward pass runs sequences on parallel
     * threads, and these products are too small for a BLAS call to pay */
    const float scale = 1.0f / sqrtf((float)hs), inv_h = 1.0f / (float)H;
    memset(w, 0, n * sizeof *w);
    for (uint32_t h = 0; h < H; h++) {
        const float *qh = q + (size_t)h * hs;
        const size_t koff = (size_t)(h / group) * hs;
        float *a = att + (size_t)h * ld, *o = out + (size_t)h * hs;
        if (hs % 8 == 0 && hs <= 16) {
            /* small heads: eight lanes at a time, the partial sums in
             * registers (a short output row summed in memory waits on its
             * own stores: stories260K, head size 8, 11.0k -> 16.2k tok/s);
             * for wide heads the loops below are faster (SmolLM2, head size
             * 64: a 572-token prefill 339 tok/s against 277 this way) */
            for (uint32_t t = 0; t < n; t++) {
                const float *k = K + (size_t)t * kv_dim + koff;
                float p[8] = {0};
                for (uint32_t j0 = 0; j0 < hs; j0 += 8)
                    _Pragma("GCC unroll 8") for (int jj = 0; jj < 8; jj++)
                        p[jj] += qh[j0 + jj] * k[j0 + jj];
                a[t] = scale * (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])));
            }
            cpu_softmax(a, n);
            for (uint32_t j0 = 0; j0 < hs; j0 += 8) {
                float acc[8] = {0};
                for (uint32_t t = 0; t < n; t++) {
                    const float *v = V + (size_t)t * kv_dim + koff + j0;
                    const float at = a[t];
                    _Pragma("GCC unroll 8") for (int jj = 0; jj < 8; jj++)
                        acc[jj] += at * v[jj];
                }
                memcpy(o + j0, acc, sizeof acc);
            }
        } else {
            for (uint32_t t = 0; t < n; t++) {
                const float *k = K + (size_t)t * kv_dim + koff;
                float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                for (uint32_t j = 0; j < hs; j++)
                    acc += qh[j] * k[j];
                a[t] = scale * acc;
            }
            cpu_softmax(a, n);
            memset(o, 0, hs * sizeof *o);
            for (uint32_t t = 0; t < n; t++) {
                const float *v = V + (size_t)t * kv_dim + koff;
                const float at = a[t];
#pragma omp simd
                for (uint32_t j = 0; j < hs; j++)
                    o[j] += at * v[j];
            }
        }
#pragma omp simd
        for (uint32_t t = 0; t < n; t++)
            w[t] += a[t] * inv_h;
    }
}

void cpu_page_bounds(const float *q, const float *K, uint32_t n, uint32_t kv_dim, uint32_t hs,
                     uint32_t group, uint32_t H, uint32_t page, float *kb, float *att, uint32_t ld,
                     float *w, float *out)
{
    const uint32_t pages = (n + page - 1) / page, dim = H * hs;
    for (uint32_t g = 0; g < pages; g++) {
        const uint32_t t0 = g * page, t1 = t0 + page < n ? t0 + page : n;
        for (uint32_t h = 0; h < H; h++) {
            const float *qh = q + (size_t)h * hs;
            const size_t koff = (size_t)(h / group) * hs;
            float *b = kb + (size_t)g * dim + (size_t)h * hs;
            for (uint32_t j = 0; j < hs; j++) {
                float x = K[(size_t)t0 * kv_dim + koff + j];
                for (uint32_t t = t0 + 1; t < t1; t++) {
                    float y = K[(size_t)t * kv_dim + koff + j];
                    x = qh[j] > 0 ? (y > x ? y : x) : (y < x ? y : x);
                }
                b[j] = x;
            }
        }
    }
    cpu_attend(q, kb, kb, pages, dim, hs, 1, H, att, ld, w, out);
}
