/* The CPU backend's operations on activations: GEMMs through CBLAS
 * (OpenBLAS), RMSNorm, RoPE, SwiGLU, softmax and attention over gathered
 * K/V rows, in llama2.c's formulas. The CPU forward pass is built from them,
 * and they are the oracle every CUDA kernel is tested against.
 *
 * Stateless; nothing here allocates or can fail.
 */
#ifndef ALISA_CPU_OPS_H
#define ALISA_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Sets the calling thread to flush subnormal floats to zero, as results
 * (FTZ) and as inputs (DAZ), as inference engines run: a softmax over a
 * long, peaked row underflows to subnormals, and each operation on one
 * takes a microcode assist (seen: attention 30% slower on some inputs).
 * x86 with SSE; elsewhere it does nothing. The CPU forward pass calls it
 * on entry. */
void cpu_flush_subnormals(void);

/* Sets the threads of the CPU forward pass: OpenMP's (qmat.h's products and
 * the other operations) and OpenBLAS's, the same count. n > 0 is taken as
 * given; 0 means ALISA_THREADS, else OMP_NUM_THREADS, else (automatic) the
 * CPUs this process may run on (its affinity mask), which cpu_threads_fit
 * may lower. Call before a forward pass, not during one. Cannot fail. */
void cpu_threads_set(uint32_t n);

/* Parameters a thread must have to itself before another thread pays:
 * below it a decode step's fork and join cost more than the split saves
 * (issue 41: stories260K, 0.26M parameters, decoded 2x slower on 2 threads
 * than on 1, eval 3.5x). */
#define CPU_PARAMS_PER_THREAD ((uint64_t)8 << 20)

/* Values of row-wise work (norms, SwiGLU, the activations' 8-bit
 * quantisation, K/V rows copied into the cache) below which it stays on the
 * calling thread under passive waits (RoPE's rows stay there below it
 * whatever the waits: cpu_layers.c): a decode step's few rows are
 * microseconds of work, and a parallel region wakes a sleeping thread, which
 * costs more and, on a shared host, swings with the host's other tenants (a
 * two-row serving iteration of SmolLM2 took 2.3x a one-row one when each of
 * them opened a region: experiments/measurements.md, 2026-11-29). */
#define CPU_ROWS_PARALLEL_MIN 32768u

/* Multiply-adds of a call's attention rows below which they are attended on
 * the calling thread under passive waits, by the same reasoning: about
 * 100 us of work, what a contended wake-up was seen to cost (2026-11-29:
 * 33 ms more for a two-row SmolLM2 iteration's some 400 more regions). */
#define CPU_ATTEND_PARALLEL_MIN ((size_t)1 << 19)

/* Whether work over n rows (work: values, or multiply-adds, against min)
 * takes the threads: with spinning waits (OMP_WAIT_POLICY=ACTIVE, alisa's
 * ALISA_WAIT=spin), whose regions cost about a microsecond, from two rows;
 * with passive waits (alisa's default) or OMP_WAIT_POLICY unset, from two
 * rows and min. Cannot fail. */
int cpu_rows_parallel(size_t n, size_t work, size_t min);

/* Whether OpenMP's idle threads spin (OMP_WAIT_POLICY=ACTIVE, which
 * alisa's ALISA_WAIT=spin sets) rather than sleep; read once. Cannot
 * fail. */
int cpu_waits_spin(void);

/* The work (against CPU_ATTEND_PARALLEL_MIN's units: multiply-adds) from
 * which a dense-cache attention call of two rows or more takes more than
 * one thread: CPU_ATTEND_PARALLEL_MIN under passive waits with two threads
 * or more, else 0 (every call of two rows or more runs as one rule: across
 * spinning threads, or on the one thread there is). What calibration
 * records for the cost model (catalog.h dense_attn_parallel_min). Cannot
 * fail. */
size_t cpu_attend_parallel_min(void);

/* Caps an automatic thread count at one thread per CPU_PARAMS_PER_THREAD
 * parameters of the model (at least 1); a count given (--threads,
 * ALISA_THREADS, OMP_NUM_THREADS) is kept. Cannot fail. */
void cpu_threads_fit(uint64_t params);

/* The threads cpu_threads_set (and cpu_threads_fit) chose. */
uint32_t cpu_threads(void);

/* The calling thread's number in the current parallel region (0 outside
 * one), below cpu_threads(). */
uint32_t cpu_thread_id(void);

/* C (M, N) = alpha A (M, K) B, B being (K, N), or (N, K) used transposed
 * when transb; row-major with leading dimensions lda, ldb, ldc.
 * ALISA_REFERENCE_GEMM=1 in the environment makes it a plain loop (the
 * benchmark's reference point, experiments/bench/exec.sh). */
void cpu_matmul(int transb, uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A,
                uint32_t lda, const float *B, uint32_t ldb, float *C, uint32_t ldc);

/* y (R, out) = x (R, in) W^T, W (out, in). */
void cpu_gemm(float *y, const float *x, const float *w, uint32_t R, uint32_t out, uint32_t in);

/* o (n) = w (n) * x / sqrt(mean(x^2) + eps); o may be x. */
void cpu_rmsnorm(float *o, const float *x, const float *w, uint32_t n, float eps);

/* o (n) = w (n) * (x - mean(x)) / sqrt(var(x) + eps) + b (n): LayerNorm as
 * torch.nn.LayerNorm computes it (biased variance); o may be x. */
void cpu_layernorm(float *o, const float *x, const float *w, const float *b, uint32_t n,
                   float eps);

/* y (R, n) += b (n) on each row. */
void cpu_add_bias(float *y, const float *b, uint32_t R, uint32_t n);

/* Rotates vec (n) in place, pairs of each head_dim-channel head by the
 * angles cs/sn (head_dim / 2) of one position. head_dim is even and at
 * least 2 and divides n (llm_config_validate holds every model to it). */
void cpu_rope(float *vec, uint32_t n, uint32_t head_dim, const float *cs, const float *sn);

/* hb (n) = silu(hb) * hb2. */
void cpu_swiglu(float *hb, const float *hb2, size_t n);

/* h (n) = max(h, 0). */
void cpu_relu(float *h, size_t n);

/* Softmax of a (n) in place. */
void cpu_softmax(float *a, uint32_t n);

/* Attention of one query q (H * hs) over n rows of K and V (stride kv_dim,
 * contiguous): per query head, scores against its KV head's keys, a
 * softmax, the weighted sum of the values (loops, no BLAS: safe on any
 * thread). out must not alias q. att (H, ld) is scratch (ld >= n); out
 * (H * hs) gets the output, w (n) the heads' mean weights. */
void cpu_attend(const float *q, const float *K, const float *V, uint32_t n, uint32_t kv_dim,
                uint32_t hs, uint32_t group, uint32_t H, float *att, uint32_t ld, float *w,
                float *out);

/* Quest's page estimate of one query q (H * hs) over n keys K (stride
 * kv_dim; query head h reads KV head h / group): per page of page tokens
 * (the last may be short) and query head, the page's bound key (channel by
 * channel the page's largest key where q is positive, else its smallest:
 * q . bound is the most q . k can be in the page) into kb (pages, H * hs);
 * then cpu_attend over those bound keys: w (pages) gets the heads' mean
 * softmax weights over pages. att (H, ld >= pages) and out (H * hs) are
 * scratch. With page 1 w is cpu_attend's w over K, bit for bit. */
void cpu_page_bounds(const float *q, const float *K, uint32_t n, uint32_t kv_dim, uint32_t hs,
                     uint32_t group, uint32_t H, uint32_t page, float *kb, float *att, uint32_t ld,
                     float *w, float *out);


#endif
