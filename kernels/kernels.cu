/* CUDA kernels of the executor's CUDA backend (contract in kernels.h).
 * Plain and readable rather than tuned: one block per row for reductions
 * (RMSNorm, softmax, INT8 ranges), one thread per output element elsewhere.
 * Attention is three passes over the gathered rows (scores, softmax, output)
 * so each pass has its own CPU oracle. Reductions use block-wide sums in
 * FP32; they differ from the CPU's sequential sums by rounding only.
 */
#include "kernels.h"
#include "synth.h"

#include <cuda_fp16.h>
#include <math.h>

/* Dimensions, declared once: R query rows, H query heads, KVH key/value
 * heads, hs channels a head, ld the row stride of scores and index lists. */
#define BLOCK 256u

static unsigned blocks(size_t n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024). */
__device__ static float block_sum(float v)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0.0f;
    for (unsigned i = 0; i < blockDim.x / 32; i++)
        s += part[i];
    __syncthreads();
    return s;
}

__device__ static float block_max(float v)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    float m = -INFINITY;
    for (unsigned i = 0; i < blockDim.x / 32; i++)
        m = fmaxf(m, part[i]);
    __syncthreads();
    return m;
}

__device__ static float block_min(float v) { return -block_max(-v); }

__global__ static void f32_to_f16(__half *dst, const float *src, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = __float2half_rn(src[i]);
}

cudaError_t kern_f32_to_f16(uint16_t *dst, const float *src, size_t n, cudaStream_t stream)
{
    if (n)
        f32_to_f16<<<blocks(n), BLOCK, 0, stream>>>((__half *)dst, src, n);
    return cudaGetLastError();
}

__global__ static void embed(float *x, const __half *emb, const uint32_t *tokens, uint32_t d)
{
    uint32_t r = blockIdx.y;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < d; j += gridDim.x * blockDim.x)
        x[(size_t)r * d + j] = __half2float(emb[(size_t)tokens[r] * d + j]);
}

cudaError_t kern_embed(float *x, const uint16_t *emb, const uint32_t *tokens, uint32_t R,
                       uint32_t d, cudaStream_t stream)
{
    if (R)
        embed<<<dim3(blocks(d), R), BLOCK, 0, stream>>>(x, (const __half *)emb, tokens, d);
    return cudaGetLastError();
}

__global__ static void rmsnorm(float *o, const float *x, const float *w, uint32_t n, float eps)
{
    const float *xr = x + (size_t)blockIdx.x * n;
    float *orow = o + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        ss += xr[j] * xr[j];
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        orow[j] = w[j] * (inv * xr[j]);
}

cudaError_t kern_rmsnorm(float *o, const float *x, const float *w, uint32_t R, uint32_t n,
                         float eps, cudaStream_t stream)
{
    if (R)
        rmsnorm<<<R, BLOCK, 0, stream>>>(o, x, w, n, eps);
    return cudaGetLastError();
}

__global__ static void embed_pos(float *x, const __half *pe, const uint32_t *pos, uint32_t d,
                                 uint32_t offset)
{
    uint32_t r = blockIdx.y;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < d; j += gridDim.x * blockDim.x)
        x[(size_t)r * d + j] += __half2float(pe[(size_t)(pos[r] + offset) * d + j]);
}

cudaError_t kern_embed_pos(float *x, const uint16_t *pe, const uint32_t *pos, uint32_t offset,
                           uint32_t R, uint32_t d, cudaStream_t stream)
{
    if (R)
        embed_pos<<<dim3(blocks(d), R), BLOCK, 0, stream>>>(x, (const __half *)pe, pos, d, offset);
    return cudaGetLastError();
}

/* As cpu_layernorm: the mean, then the variance about it, both over n. */
__global__ static void layernorm(float *o, const float *x, const float *w, const float *b,
                                 uint32_t n, float eps)
{
    const float *xr = x + (size_t)blockIdx.x * n;
    float *orow = o + (size_t)blockIdx.x * n;
    float sum = 0.0f;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        sum += xr[j];
    float mean = block_sum(sum) / (float)n, var = 0.0f;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        var += (xr[j] - mean) * (xr[j] - mean);
    float inv = 1.0f / sqrtf(block_sum(var) / (float)n + eps);
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        orow[j] = w[j] * ((xr[j] - mean) * inv) + b[j];
}

cudaError_t kern_layernorm(float *o, const float *x, const float *w, const float *b, uint32_t R,
                           uint32_t n, float eps, cudaStream_t stream)
{
    if (R)
        layernorm<<<R, BLOCK, 0, stream>>>(o, x, w, b, n, eps);
    return cudaGetLastError();
}

__global__ static void bias_act(float *y, const float *b, size_t total, uint32_t n, int relu)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    float v = y[i] + b[i % n];
    y[i] = relu && v < 0.0f ? 0.0f : v;
}

cudaError_t kern_bias(float *y, const float *b, uint32_t R, uint32_t n, int relu,
                      cudaStream_t stream)
{
    size_t total = (size_t)R * n;
    if (total)
        bias_act<<<blocks(total), BLOCK, 0, stream>>>(y, b, total, n, relu);
    return cudaGetLastError();
}

/* One thread a row: the row's stream is sequential (kernels/synth.h). */
__global__ static void synth_f16(__half *dst, int q8, uint32_t rows, uint32_t cols, uint64_t seed,
                                 uint64_t id, float scale)
{
    uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    uint64_t st = synth_row_state(seed, id, r), bits = 0;
    __half *row = dst + (size_t)r * cols;
    for (uint32_t j = 0; j < cols; j++) {
        float v;
        if (q8) {
            if (j % 8 == 0)
                bits = synth_next(&st);
            v = __fmul_rn(scale, (float)synth_code(bits));
            bits >>= 8;
        } else {
            v = synth_f32(&st);
        }
        row[j] = __float2half_rn(v);
    }
}

cudaError_t kern_synth_f16(uint16_t *dst, int q8, uint32_t rows, uint32_t cols, uint64_t seed,
                           uint64_t id, float scale, cudaStream_t stream)
{
    if (rows && cols)
        synth_f16<<<(rows + 127) / 128, 128, 0, stream>>>((__half *)dst, q8, rows, cols, seed, id,
                                                          scale);
    return cudaGetLastError();
}

__global__ static void rope(float *x, uint32_t R, uint32_t n, uint32_t hd, const uint32_t *pos,
                            const float *cs, const float *sn)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* pair index */
    uint32_t pairs = n / 2;
    if (i >= (size_t)R * pairs)
        return;
    uint32_t r = (uint32_t)(i / pairs), c = (uint32_t)(i % pairs) * 2;
    uint32_t j = (c % hd) / 2, half = hd / 2;
    float *v = x + (size_t)r * n + c;
    float c0 = cs[(size_t)pos[r] * half + j], s0 = sn[(size_t)pos[r] * half + j];
    float v0 = v[0], v1 = v[1];
    v[0] = v0 * c0 - v1 * s0;
    v[1] = v0 * s0 + v1 * c0;
}

cudaError_t kern_rope(float *x, uint32_t R, uint32_t n, uint32_t head_dim, const uint32_t *pos,
                      const float *cos_t, const float *sin_t, cudaStream_t stream)
{
    size_t pairs = (size_t)R * (n / 2);
    if (pairs)
        rope<<<blocks(pairs), BLOCK, 0, stream>>>(x, R, n, head_dim, pos, cos_t, sin_t);
    return cudaGetLastError();
}

__global__ static void swiglu(float *hb, const float *hb2, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = hb[i];
        hb[i] = g / (1.0f + expf(-g)) * hb2[i];
    }
}

cudaError_t kern_swiglu(float *hb, const float *hb2, size_t n, cudaStream_t stream)
{
    if (n)
        swiglu<<<blocks(n), BLOCK, 0, stream>>>(hb, hb2, n);
    return cudaGetLastError();
}

__global__ static void add(float *x, const float *y, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += y[i];
}

cudaError_t kern_add(float *x, const float *y, size_t n, cudaStream_t stream)
{
    if (n)
        add<<<blocks(n), BLOCK, 0, stream>>>(x, y, n);
    return cudaGetLastError();
}

__global__ static void softmax(float *x, uint32_t ld, const uint32_t *count, uint32_t per)
{
    float *row = x + (size_t)blockIdx.x * ld;
    uint32_t n = count ? count[blockIdx.x / per] : ld;
    float mx = -INFINITY;
    for (uint32_t t = threadIdx.x; t < n; t += blockDim.x)
        mx = fmaxf(mx, row[t]);
    mx = block_max(mx);
    float sum = 0.0f;
    for (uint32_t t = threadIdx.x; t < n; t += blockDim.x) {
        float e = expf(row[t] - mx);
        row[t] = e;
        sum += e;
    }
    sum = block_sum(sum);
    for (uint32_t t = threadIdx.x; t < n; t += blockDim.x)
        row[t] /= sum;
}

cudaError_t kern_softmax(float *x, uint32_t rows, uint32_t ld, const uint32_t *count, uint32_t per,
                         cudaStream_t stream)
{
    if (rows)
        softmax<<<rows, BLOCK, 0, stream>>>(x, ld, count, per ? per : 1);
    return cudaGetLastError();
}

/* (v, i) beats (bv, bi): larger, or as large and earlier; a NaN never beats
 * anything (llm_argmax's rule). */
__device__ static inline bool beats(float v, uint32_t i, float bv, uint32_t bi)
{
    return v > bv || (v == bv && i < bi);
}

/* One block a row: every thread scans its stride from (-inf, none), then a
 * shuffle and a shared-memory reduction keep the best pair; none left (a
 * row of NaNs) gives 0. */
__global__ static void argmax_rows(uint32_t *out, const float *x, uint32_t n)
{
    __shared__ float sv[BLOCK / 32];
    __shared__ uint32_t si[BLOCK / 32];
    const float *row = x + (size_t)blockIdx.x * n;
    float bv = -INFINITY;
    uint32_t bi = UINT32_MAX;
    for (uint32_t t = threadIdx.x; t < n; t += blockDim.x)
        if (beats(row[t], t, bv, bi)) {
            bv = row[t];
            bi = t;
        }
    for (int o = 16; o; o >>= 1) {
        float v = __shfl_down_sync(0xffffffffu, bv, o);
        uint32_t i = __shfl_down_sync(0xffffffffu, bi, o);
        if (beats(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    if ((threadIdx.x & 31) == 0) {
        sv[threadIdx.x / 32] = bv;
        si[threadIdx.x / 32] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (uint32_t w = 1; w < blockDim.x / 32; w++)
            if (beats(sv[w], si[w], bv, bi)) {
                bv = sv[w];
                bi = si[w];
            }
        out[blockIdx.x] = bi == UINT32_MAX ? 0 : bi;
    }
}

cudaError_t kern_argmax_rows(uint32_t *out, const float *x, uint32_t R, uint32_t n,
                             cudaStream_t stream)
{
    if (R && n)
        argmax_rows<<<R, BLOCK, 0, stream>>>(out, x, n);
    return cudaGetLastError();
}

__device__ static int32_t kv_row(const struct kern_rows &rw, uint32_t r, uint32_t t)
{
    return rw.idx ? rw.idx[(size_t)r * rw.ld + t] : rw.base[r] + (int32_t)t;
}

/* FP16 K and V elements (the dense cache, the tiered arenas) as floats. */
__device__ static inline float ld1(const __half *p) { return __half2float(*p); }
__device__ static inline float4 ld4(const __half *p)
{
    uint2 u = *(const uint2 *)p; /* 8-byte aligned when hs and kv_dim are multiples of 4 */
    float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}

/* grid (token blocks, H, R): one thread per (r, h, t). */
template <typename T>
__global__ static void attn_scores(float *scores, const float *q, const T *K,
                                   struct kern_rows rw, uint32_t H, uint32_t KVH, uint32_t hs,
                                   float scale)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, r = blockIdx.z;
    if (t >= rw.count[r])
        return;
    uint32_t g = h / (H / KVH), kvd = KVH * hs;
    const float *qh = q + ((size_t)r * H + h) * hs;
    const T *k = K + (size_t)kv_row(rw, r, t) * kvd + (size_t)g * hs;
    float acc = 0.0f;
    for (uint32_t j = 0; j < hs; j++)
        acc += qh[j] * ld1(k + j);
    scores[((size_t)r * H + h) * rw.ld + t] = scale * acc;
}

/* The same, a warp per token: the lanes read a K row's channels four at a
 * time (coalesced 16-byte loads) and sum across the warp. For hs a multiple
 * of 4 (every real model's; the pointers are then 16-byte aligned). */
#define ATT_WARPS 8u
template <typename T>
__global__ static void attn_scores_warp(float *scores, const float *q, const T *K,
                                        struct kern_rows rw, uint32_t H, uint32_t KVH, uint32_t hs,
                                        float scale)
{
    uint32_t lane = threadIdx.x & 31, t = blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    uint32_t h = blockIdx.y, r = blockIdx.z;
    if (t >= rw.count[r])
        return;
    uint32_t g = h / (H / KVH), kvd = KVH * hs;
    const float *qh = q + ((size_t)r * H + h) * hs;
    const T *k = K + (size_t)kv_row(rw, r, t) * kvd + (size_t)g * hs;
    float acc = 0.0f;
    for (uint32_t j = lane * 4; j < hs; j += 128) {
        float4 a = *(const float4 *)(qh + j), b = ld4(k + j);
        acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0)
        scores[((size_t)r * H + h) * rw.ld + t] = scale * acc;
}

template <typename T>
static cudaError_t attn_scores_any(float *scores, const float *q, const T *K, struct kern_rows rows,
                                  uint32_t R, uint32_t H, uint32_t KVH, uint32_t hs, float scale,
                                  cudaStream_t stream)
{
    if (!R || !rows.ld)
        return cudaGetLastError();
    if (hs % 4 == 0)
        attn_scores_warp<<<dim3((rows.ld + ATT_WARPS - 1) / ATT_WARPS, H, R), 32 * ATT_WARPS, 0,
                           stream>>>(scores, q, K, rows, H, KVH, hs, scale);
    else
        attn_scores<<<dim3(blocks(rows.ld), H, R), BLOCK, 0, stream>>>(scores, q, K, rows, H, KVH,
                                                                       hs, scale);
    return cudaGetLastError();
}

/* grid (H, R), one thread per output channel of the head. */
template <typename T>
__global__ static void attn_output(float *out, const float *p, const T *V,
                                   struct kern_rows rw, uint32_t H, uint32_t KVH, uint32_t hs)
{
    uint32_t h = blockIdx.x, r = blockIdx.y, g = h / (H / KVH), kvd = KVH * hs;
    const float *ph = p + ((size_t)r * H + h) * rw.ld;
    for (uint32_t j = threadIdx.x; j < hs; j += blockDim.x) {
        float acc = 0.0f;
        for (uint32_t t = 0; t < rw.count[r]; t++)
            acc += ph[t] * ld1(V + (size_t)kv_row(rw, r, t) * kvd + (size_t)g * hs + j);
        out[((size_t)r * H + h) * hs + j] = acc;
    }
}

/* The same with the tokens split over ATT_WARPS warps, each lane holding
 * four channels (16-byte loads of a V row), the warps' partial sums added in
 * shared memory. For hs a multiple of 4 up to 128. */
template <typename T>
__global__ static void attn_output_warp(float *out, const float *p, const T *V,
                                        struct kern_rows rw, uint32_t H, uint32_t KVH, uint32_t hs)
{
    __shared__ float4 part[ATT_WARPS][32];
    uint32_t h = blockIdx.x, r = blockIdx.y, g = h / (H / KVH), kvd = KVH * hs;
    uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, j = lane * 4;
    const float *ph = p + ((size_t)r * H + h) * rw.ld;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (j < hs)
        for (uint32_t t = w; t < rw.count[r]; t += ATT_WARPS) {
            float pt = ph[t];
            float4 v = ld4(V + (size_t)kv_row(rw, r, t) * kvd + (size_t)g * hs + j);
            acc.x += pt * v.x, acc.y += pt * v.y, acc.z += pt * v.z, acc.w += pt * v.w;
        }
    part[w][lane] = acc;
    __syncthreads();
    if (w == 0 && j < hs) {
        float4 sum = part[0][lane];
        for (uint32_t i = 1; i < ATT_WARPS; i++) {
            float4 a = part[i][lane];
            sum.x += a.x, sum.y += a.y, sum.z += a.z, sum.w += a.w;
        }
        *(float4 *)(out + ((size_t)r * H + h) * hs + j) = sum;
    }
}

template <typename T>
static cudaError_t attn_output_any(float *out, const float *p, const T *V, struct kern_rows rows,
                                   uint32_t R, uint32_t H, uint32_t KVH, uint32_t hs,
                                   cudaStream_t stream)
{
    unsigned threads = hs < 32 ? 32 : hs > 1024 ? 1024 : hs;
    if (!R)
        return cudaGetLastError();
    if (hs % 4 == 0 && hs <= 128)
        attn_output_warp<<<dim3(H, R), 32 * ATT_WARPS, 0, stream>>>(out, p, V, rows, H, KVH, hs);
    else
        attn_output<<<dim3(H, R), threads, 0, stream>>>(out, p, V, rows, H, KVH, hs);
    return cudaGetLastError();
}

cudaError_t kern_attn_scores16(float *scores, const float *q, const uint16_t *K,
                               struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                               uint32_t hs, float scale, cudaStream_t stream)
{
    return attn_scores_any(scores, q, (const __half *)K, rows, R, H, KVH, hs, scale, stream);
}

cudaError_t kern_attn_output16(float *out, const float *p, const uint16_t *V,
                               struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                               uint32_t hs, cudaStream_t stream)
{
    return attn_output_any(out, p, (const __half *)V, rows, R, H, KVH, hs, stream);
}

__global__ static void head_mean(float *w, const float *p, const uint32_t *count, uint32_t H,
                                 uint32_t ld)
{
    uint32_t r = blockIdx.y, t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count[r])
        return;
    float acc = 0.0f;
    for (uint32_t h = 0; h < H; h++)
        acc += p[((size_t)r * H + h) * ld + t] / (float)H;
    w[(size_t)r * ld + t] = acc;
}

cudaError_t kern_head_mean(float *w, const float *p, const uint32_t *count, uint32_t R,
                           uint32_t H, uint32_t ld, cudaStream_t stream)
{
    if (R && ld)
        head_mean<<<dim3(blocks(ld), R), BLOCK, 0, stream>>>(w, p, count, H, ld);
    return cudaGetLastError();
}

__global__ static void gather_rows(float *dst, const float *src, const int32_t *rows,
                                   uint32_t n, uint32_t width)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * width)
        return;
    size_t r = i / width, c = i % width;
    dst[i] = src[(size_t)rows[r] * width + c];
}

cudaError_t kern_gather_rows(float *dst, const float *src, const int32_t *rows, uint32_t n,
                             uint32_t width, cudaStream_t stream)
{
    size_t total = (size_t)n * width;
    if (total)
        gather_rows<<<blocks(total), BLOCK, 0, stream>>>(dst, src, rows, n, width);
    return cudaGetLastError();
}

/* A block a row: 16-byte words where the row and both ends allow, else
 * 4-byte ones (uniform across the block, so no thread diverges). */
__global__ static void rows_from_host(char *dst, const int32_t *rows, const void *const *src,
                                      uint32_t row_bytes)
{
    const char *from = (const char *)src[blockIdx.x];
    char *to = dst + (size_t)rows[blockIdx.x] * row_bytes;
    if (!(((uintptr_t)from | (uintptr_t)to | row_bytes) & 15)) {
        const uint4 *f = (const uint4 *)from;
        uint4 *t = (uint4 *)to;
        for (uint32_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x)
            t[i] = f[i];
    } else {
        const uint32_t *f = (const uint32_t *)from;
        uint32_t *t = (uint32_t *)to;
        for (uint32_t i = threadIdx.x; i < row_bytes / 4; i += blockDim.x)
            t[i] = f[i];
    }
}

cudaError_t kern_rows_from_host(void *dst, const int32_t *rows, const void *const *src,
                                uint32_t n, uint32_t row_bytes, cudaStream_t stream)
{
    if (row_bytes % 4)
        return cudaErrorInvalidValue;
    if (n) /* a grid's x goes to 2^31 - 1 blocks */
        rows_from_host<<<n, BLOCK, 0, stream>>>((char *)dst, rows, src, row_bytes);
    return cudaGetLastError();
}

/* An FP32 value stored as the destination holds it: as is, or rounded to
 * FP16 (nearest even). */
__device__ static inline void st1(float *p, float v) { *p = v; }
__device__ static inline void st1(__half *p, float v) { *p = __float2half_rn(v); }

template <typename T>
__global__ static void scatter_rows(T *dst, const int32_t *rows, const float *src, uint32_t n,
                                    uint32_t width)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * width)
        return;
    size_t r = i / width, c = i % width;
    st1(dst + (size_t)rows[r] * width + c, src[i]);
}

cudaError_t kern_scatter_rows16(uint16_t *dst, const int32_t *rows, const float *src, uint32_t n,
                                uint32_t width, cudaStream_t stream)
{
    size_t total = (size_t)n * width;
    if (total)
        scatter_rows<<<blocks(total), BLOCK, 0, stream>>>((__half *)dst, rows, src, n, width);
    return cudaGetLastError();
}

cudaError_t kern_scatter_rows(float *dst, const int32_t *rows, const float *src, uint32_t n,
                              uint32_t width, cudaStream_t stream)
{
    size_t total = (size_t)n * width;
    if (total)
        scatter_rows<<<blocks(total), BLOCK, 0, stream>>>(dst, rows, src, n, width);
    return cudaGetLastError();
}

/* one block per channel: its range over the n rows */
__global__ static void quant_params(float *p, const float *x, uint32_t n, uint32_t kv)
{
    uint32_t c = blockIdx.x;
    float lo = INFINITY, hi = -INFINITY;
    for (uint32_t r = threadIdx.x; r < n; r += blockDim.x) {
        float y = x[(size_t)r * kv + c];
        lo = fminf(lo, y);
        hi = fmaxf(hi, y);
    }
    lo = block_min(lo);
    hi = block_max(hi);
    if (threadIdx.x == 0) {
        float scale = (hi - lo) / 255.0f;
        if (!(scale > 1e-30f)) /* a constant channel: put it at code 0 */
            scale = fmaxf(fabsf(lo), 1e-30f) / 255.0f;
        p[c] = scale;
        p[kv + c] = -roundf(lo / scale);
    }
}

cudaError_t kern_quant_params(float *p, const float *x, uint32_t n, uint32_t kv,
                              cudaStream_t stream)
{
    if (n && kv)
        quant_params<<<kv, BLOCK, 0, stream>>>(p, x, n, kv);
    return cudaGetLastError();
}

__global__ static void quantise(uint8_t *q, const float *x, const float *p, uint32_t n, uint32_t kv)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * kv)
        return;
    uint32_t c = (uint32_t)(i % kv);
    float y = roundf(x[i] / p[c]) + p[kv + c];
    q[i] = (uint8_t)(y < 0.0f ? 0.0f : y > 255.0f ? 255.0f : y);
}

cudaError_t kern_quantise(uint8_t *q, const float *x, const float *p, uint32_t n, uint32_t kv,
                          cudaStream_t stream)
{
    size_t total = (size_t)n * kv;
    if (total)
        quantise<<<blocks(total), BLOCK, 0, stream>>>(q, x, p, n, kv);
    return cudaGetLastError();
}

__global__ static void dequantise(float *x, const uint8_t *q, const float *p, uint32_t n,
                                  uint32_t kv)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * kv)
        return;
    uint32_t c = (uint32_t)(i % kv);
    x[i] = ((float)q[i] - p[kv + c]) * p[c];
}

cudaError_t kern_dequantise(float *x, const uint8_t *q, const float *p, uint32_t n, uint32_t kv,
                            cudaStream_t stream)
{
    size_t total = (size_t)n * kv;
    if (total)
        dequantise<<<blocks(total), BLOCK, 0, stream>>>(x, q, p, n, kv);
    return cudaGetLastError();
}

__global__ static void swa_sum_update(int64_t *sum, const uint32_t *ids, const float *w,
                                      uint32_t n, const uint32_t *old_ids, const int64_t *old_w,
                                      uint32_t n_old)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && w[i] != 0.0f) { /* selection.h's sel_weight_fixed */
        int64_t fx = (int64_t)((double)w[i] * 1099511627776.0 + 0.5);
        atomicAdd((unsigned long long *)&sum[ids[i]], (unsigned long long)fx);
    }
    if (i < n_old)
        atomicAdd((unsigned long long *)&sum[old_ids[i]], (unsigned long long)(-old_w[i]));
}

cudaError_t kern_swa_sum_update(int64_t *sum, const uint32_t *ids, const float *w, uint32_t n,
                                const uint32_t *old_ids, const int64_t *old_w, uint32_t n_old,
                                cudaStream_t stream)
{
    uint32_t m = n > n_old ? n : n_old;
    if (m)
        swa_sum_update<<<blocks(m), BLOCK, 0, stream>>>(sum, ids, w, n, old_ids, old_w, n_old);
    return cudaGetLastError();
}
