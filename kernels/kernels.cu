/* CUDA kernels of the executor's CUDA backend (contract in kernels.h).
 * Plain and readable rather than tuned: one block per row for reductions
 * (RMSNorm, softmax, INT8 ranges), one thread per output element elsewhere;
 * the two reads a decode step is made of, the few-row products (kern_gemv)
 * and the attention's K and V, keep many loads in flight.
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

/* The norms: a block a row. A row of n floats, n a multiple of 4 and at
 * most NORM_VEC x 4 x BLOCK (8,192), is read once with 16-byte loads, all
 * of a thread's in flight, and kept in registers for the reductions and the
 * output; other rows take the plain loops (each pass over x from memory).
 * With o16 the output is also written narrowed to FP16 (what the next
 * product's cuBLAS path reads), as kern_f32_to_f16 of o would. */
#define NORM_VEC 8u

__device__ static inline void norm_store4(float *o, __half *o16, uint32_t j, float4 v)
{
    *(float4 *)(o + j) = v;
    if (o16) {
        union {
            __half2 h[2];
            uint2 u;
        } p;
        p.h[0] = __floats2half2_rn(v.x, v.y);
        p.h[1] = __floats2half2_rn(v.z, v.w);
        *(uint2 *)(o16 + j) = p.u;
    }
}

/* x, o and w (and b) 16-byte aligned, o16 8-byte aligned or NULL */
__device__ static inline int norm_in_registers(uint32_t n, const void *x, const void *o,
                                               const void *w, const void *o16)
{
    return n % 4 == 0 && n <= NORM_VEC * 4 * blockDim.x && (uintptr_t)x % 16 == 0 &&
           (uintptr_t)o % 16 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)o16 % 8 == 0;
}

__global__ static void rmsnorm(float *o, __half *o16, const float *x, const float *w, uint32_t n,
                               float eps)
{
    const float *xr = x + (size_t)blockIdx.x * n;
    float *orow = o + (size_t)blockIdx.x * n;
    __half *h = o16 ? o16 + (size_t)blockIdx.x * n : NULL;
    float ss = 0.0f;
    if (norm_in_registers(n, xr, orow, w, h)) {
        float4 v[NORM_VEC];
#pragma unroll
        for (uint32_t k = 0; k < NORM_VEC; k++) {
            const uint32_t j = (k * blockDim.x + threadIdx.x) * 4;
            v[k] = j < n ? *(const float4 *)(xr + j) : make_float4(0, 0, 0, 0);
            ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
        }
        const float inv = 1.0f / sqrtf(block_sum(ss) / (float)n + eps);
#pragma unroll
        for (uint32_t k = 0; k < NORM_VEC; k++) {
            const uint32_t j = (k * blockDim.x + threadIdx.x) * 4;
            if (j < n) {
                const float4 g = *(const float4 *)(w + j);
                norm_store4(orow, h, j, make_float4(g.x * (inv * v[k].x), g.y * (inv * v[k].y),
                                                    g.z * (inv * v[k].z), g.w * (inv * v[k].w)));
            }
        }
        return;
    }
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        ss += xr[j] * xr[j];
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float r = w[j] * (inv * xr[j]);
        orow[j] = r;
        if (h)
            h[j] = __float2half_rn(r);
    }
}

cudaError_t kern_rmsnorm(float *o, uint16_t *o16, const float *x, const float *w, uint32_t R,
                         uint32_t n, float eps, cudaStream_t stream)
{
    if (R)
        rmsnorm<<<R, BLOCK, 0, stream>>>(o, (__half *)o16, x, w, n, eps);
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

/* As cpu_layernorm: the mean, then the variance about it, both over n
 * (the row in registers where it fits, as rmsnorm). */
__global__ static void layernorm(float *o, __half *o16, const float *x, const float *w,
                                 const float *b, uint32_t n, float eps)
{
    const float *xr = x + (size_t)blockIdx.x * n;
    float *orow = o + (size_t)blockIdx.x * n;
    __half *h = o16 ? o16 + (size_t)blockIdx.x * n : NULL;
    float sum = 0.0f, var = 0.0f;
    if (norm_in_registers(n, xr, orow, w, h) && (uintptr_t)b % 16 == 0) {
        float4 v[NORM_VEC];
#pragma unroll
        for (uint32_t k = 0; k < NORM_VEC; k++) {
            const uint32_t j = (k * blockDim.x + threadIdx.x) * 4;
            v[k] = j < n ? *(const float4 *)(xr + j) : make_float4(0, 0, 0, 0);
            sum += v[k].x + v[k].y + v[k].z + v[k].w;
        }
        const float mean = block_sum(sum) / (float)n;
#pragma unroll
        for (uint32_t k = 0; k < NORM_VEC; k++) {
            const uint32_t j = (k * blockDim.x + threadIdx.x) * 4;
            if (j < n) {
                const float a = v[k].x - mean, c = v[k].y - mean, d = v[k].z - mean,
                            f = v[k].w - mean;
                var += a * a + c * c + d * d + f * f;
            }
        }
        const float inv = 1.0f / sqrtf(block_sum(var) / (float)n + eps);
#pragma unroll
        for (uint32_t k = 0; k < NORM_VEC; k++) {
            const uint32_t j = (k * blockDim.x + threadIdx.x) * 4;
            if (j < n) {
                const float4 g = *(const float4 *)(w + j), bb = *(const float4 *)(b + j);
                norm_store4(orow, h, j,
                            make_float4(g.x * ((v[k].x - mean) * inv) + bb.x,
                                        g.y * ((v[k].y - mean) * inv) + bb.y,
                                        g.z * ((v[k].z - mean) * inv) + bb.z,
                                        g.w * ((v[k].w - mean) * inv) + bb.w));
            }
        }
        return;
    }
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        sum += xr[j];
    float mean = block_sum(sum) / (float)n;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        var += (xr[j] - mean) * (xr[j] - mean);
    float inv = 1.0f / sqrtf(block_sum(var) / (float)n + eps);
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float r = w[j] * ((xr[j] - mean) * inv) + b[j];
        orow[j] = r;
        if (h)
            h[j] = __float2half_rn(r);
    }
}

cudaError_t kern_layernorm(float *o, uint16_t *o16, const float *x, const float *w, const float *b,
                           uint32_t R, uint32_t n, float eps, cudaStream_t stream)
{
    if (R)
        layernorm<<<R, BLOCK, 0, stream>>>(o, (__half *)o16, x, w, b, n, eps);
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

__global__ static void swiglu(float *hb, __half *h16, const float *hb2, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = hb[i], r = g / (1.0f + expf(-g)) * hb2[i];
        hb[i] = r;
        if (h16)
            h16[i] = __float2half_rn(r);
    }
}

cudaError_t kern_swiglu(float *hb, uint16_t *h16, const float *hb2, size_t n, cudaStream_t stream)
{
    if (n)
        swiglu<<<blocks(n), BLOCK, 0, stream>>>(hb, (__half *)h16, hb2, n);
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

/* A warp computes OUT outputs of every row r: its lanes stride the input
 * eight channels at a time (16-byte loads of W, two float4 of x a row,
 * reused across the warp's outputs), then sum across the warp. A few-row
 * product is a read of W: what matters is many loads in flight
 * (GEMV_WARPS warps a block, OUT rows of W a lane, the loop unrolled
 * twice), not arithmetic. OUT is 2 up to four rows and 4 beyond, so the
 * x a lane reads from cache stays within four times the W it reads from
 * memory. */
#define GEMV_WARPS 4u
template <int R, uint32_t OUT>
__global__ static void gemv(float *y, size_t y_stride, const float *x, const __half *W,
                            size_t w_stride, uint32_t out, uint32_t in, int accumulate)
{
    const uint32_t lane = threadIdx.x & 31;
    const uint32_t o0 = (blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * OUT;
    if (o0 >= out)
        return;
    W += blockIdx.y * w_stride;
    y += blockIdx.y * y_stride;
    const uint32_t no = out - o0 < OUT ? out - o0 : OUT;
    float acc[OUT][R];
#pragma unroll
    for (uint32_t j = 0; j < OUT; j++)
#pragma unroll
        for (int r = 0; r < R; r++)
            acc[j][r] = 0.0f;
#pragma unroll 2
    for (uint32_t c = lane * 8; c < in; c += 256) {
        float xv[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float4 a = __ldg((const float4 *)(x + (size_t)r * in + c));
            const float4 b = __ldg((const float4 *)(x + (size_t)r * in + c + 4));
            const float2 p[4] = {{a.x, a.y}, {a.z, a.w}, {b.x, b.y}, {b.z, b.w}};
#pragma unroll
            for (int i = 0; i < 4; i++) { /* narrowed to FP16 as the cuBLAS path's input */
                const float2 f = __half22float2(__float22half2_rn(p[i]));
                xv[r][2 * i] = f.x, xv[r][2 * i + 1] = f.y;
            }
        }
#pragma unroll
        for (uint32_t j = 0; j < OUT; j++) {
            if (j >= no)
                break;
            uint4 u = __ldg((const uint4 *)(W + (size_t)(o0 + j) * in + c));
            const __half2 *h = (const __half2 *)&u;
            float w[8];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float2 f = __half22float2(h[i]);
                w[2 * i] = f.x, w[2 * i + 1] = f.y;
            }
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    acc[j][r] += w[i] * xv[r][i];
        }
    }
#pragma unroll
    for (uint32_t j = 0; j < OUT; j++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            float v = acc[j][r];
            for (int o = 16; o > 0; o >>= 1)
                v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 && j < no) {
                float *dst = y + (size_t)r * out + o0 + j;
                *dst = accumulate ? *dst + v : v;
            }
        }
}

int kern_gemv_fits(uint32_t R, uint32_t in, const float *x, const uint16_t *W, size_t w_stride)
{
    return R >= 1 && R <= KERN_GEMV_ROWS && in % 8 == 0 && w_stride % 8 == 0 &&
           (uintptr_t)x % 16 == 0 && (uintptr_t)W % 16 == 0;
}

cudaError_t kern_gemv(float *y, size_t y_stride, const float *x, const uint16_t *W,
                      size_t w_stride, uint32_t count, uint32_t R, uint32_t out, uint32_t in,
                      int accumulate, cudaStream_t stream)
{
    if (!kern_gemv_fits(R, in, x, W, w_stride) || count > 65535)
        return cudaErrorInvalidValue;
    if (!count || !out || !in)
        return cudaGetLastError();
    const uint32_t per = GEMV_WARPS * (R <= 4 ? 2 : 4);
    const dim3 grid((out + per - 1) / per, count), block(32 * GEMV_WARPS);
    const __half *w = (const __half *)W;
#define GEMV_CASE(n, o) \
    case n: gemv<n, o><<<grid, block, 0, stream>>>(y, y_stride, x, w, w_stride, out, in, accumulate); break
    switch (R) {
    GEMV_CASE(1, 2); GEMV_CASE(2, 2); GEMV_CASE(3, 2); GEMV_CASE(4, 2);
    GEMV_CASE(5, 4); GEMV_CASE(6, 4); GEMV_CASE(7, 4); GEMV_CASE(8, 4);
    }
#undef GEMV_CASE
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

/* The same with warps: a block takes one (row, head) over a chunk of its
 * tokens; each warp ATT_UNROLL tokens at a time (their K rows' loads all in
 * flight at once), the lanes reading a row's channels four at a time
 * (coalesced 8-byte loads) with the query's four held in registers, summed
 * across the warp. The chunk splits a row's tokens over blocks only when
 * rows x heads are fewer than ATT_BLOCKS, so a decode step's grid is as
 * large as the device wants and no larger: blocks past a row's count exit
 * at once. The grid depends on ld, never on the counts (a captured graph
 * replays it as later steps' counts grow). For hs a multiple of 4 (every
 * real model's; the pointers are then 8-byte aligned). */
#define ATT_WARPS 8u
#define ATT_UNROLL 4u
#define ATT_BLOCKS 1024u
template <typename T>
__global__ static void attn_scores_warp(float *scores, const float *q, const T *K,
                                        struct kern_rows rw, uint32_t H, uint32_t KVH, uint32_t hs,
                                        float scale, uint32_t chunk)
{
    const uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, h = blockIdx.y, r = blockIdx.z;
    const uint32_t n = rw.count[r], t0 = blockIdx.x * chunk;
    const uint32_t t1 = n < t0 + chunk ? n : t0 + chunk;
    const uint32_t g = h / (H / KVH), kvd = KVH * hs;
    const float *qh = q + ((size_t)r * H + h) * hs;
    float *row = scores + ((size_t)r * H + h) * rw.ld;
    for (uint32_t t = t0 + w * ATT_UNROLL; t < t1; t += ATT_WARPS * ATT_UNROLL) {
        float acc[ATT_UNROLL];
#pragma unroll
        for (uint32_t u = 0; u < ATT_UNROLL; u++)
            acc[u] = 0.0f;
        for (uint32_t j = lane * 4; j < hs; j += 128) {
            const float4 a = *(const float4 *)(qh + j);
            float4 b[ATT_UNROLL];
#pragma unroll
            for (uint32_t u = 0; u < ATT_UNROLL; u++)
                b[u] = t + u < t1 ? ld4(K + (size_t)kv_row(rw, r, t + u) * kvd + (size_t)g * hs + j)
                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (uint32_t u = 0; u < ATT_UNROLL; u++)
                acc[u] += a.x * b[u].x + a.y * b[u].y + a.z * b[u].z + a.w * b[u].w;
        }
#pragma unroll
        for (uint32_t u = 0; u < ATT_UNROLL; u++) {
            for (int o = 16; o > 0; o >>= 1)
                acc[u] += __shfl_xor_sync(0xffffffffu, acc[u], o);
            if (lane == 0 && t + u < t1)
                row[t + u] = scale * acc[u];
        }
    }
}

template <typename T>
static cudaError_t attn_scores_any(float *scores, const float *q, const T *K, struct kern_rows rows,
                                  uint32_t R, uint32_t H, uint32_t KVH, uint32_t hs, float scale,
                                  cudaStream_t stream)
{
    if (!R || !rows.ld)
        return cudaGetLastError();
    if (hs % 4 == 0) {
        const uint32_t step = ATT_WARPS * ATT_UNROLL, most = (rows.ld + step - 1) / step;
        uint32_t split = (ATT_BLOCKS + R * H - 1) / (R * H);
        split = split > most ? most : split;
        uint32_t chunk = (rows.ld + split - 1) / split;
        chunk = (chunk + step - 1) / step * step;
        attn_scores_warp<<<dim3((rows.ld + chunk - 1) / chunk, H, R), 32 * ATT_WARPS, 0,
                           stream>>>(scores, q, K, rows, H, KVH, hs, scale, chunk);
    } else
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
 * four channels (8-byte loads of a V row), ATT_UNROLL tokens a warp in
 * flight at once, the warps' partial sums added in shared memory. For hs a
 * multiple of 4 up to 128. A block takes tokens [z chunk, (z + 1) chunk)
 * of its (row, head), z = blockIdx.z: with one chunk it writes out, with
 * several its share into partial (z, R, H, hs), zeros where the chunk
 * lies past the row's count, for attn_output_sum. */
template <typename T>
__global__ static void attn_output_warp(float *out, float *partial, const float *p, const T *V,
                                        struct kern_rows rw, uint32_t H, uint32_t KVH, uint32_t hs,
                                        uint32_t chunk)
{
    __shared__ float4 part[ATT_WARPS][32];
    uint32_t h = blockIdx.x, r = blockIdx.y, g = h / (H / KVH), kvd = KVH * hs;
    uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5, j = lane * 4;
    const float *ph = p + ((size_t)r * H + h) * rw.ld;
    const uint32_t n = rw.count[r], t0 = blockIdx.z * chunk;
    const uint32_t t1 = n < t0 + chunk ? n : t0 + chunk;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (j < hs)
        for (uint32_t t = t0 + w; t < t1; t += ATT_WARPS * ATT_UNROLL) {
            float pt[ATT_UNROLL];
            float4 v[ATT_UNROLL];
#pragma unroll
            for (uint32_t u = 0; u < ATT_UNROLL; u++) { /* every load in flight at once */
                const uint32_t tt = t + u * ATT_WARPS;
                pt[u] = tt < t1 ? ph[tt] : 0.0f;
                v[u] = tt < t1 ? ld4(V + (size_t)kv_row(rw, r, tt) * kvd + (size_t)g * hs + j)
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (uint32_t u = 0; u < ATT_UNROLL; u++)
                acc.x += pt[u] * v[u].x, acc.y += pt[u] * v[u].y, acc.z += pt[u] * v[u].z,
                    acc.w += pt[u] * v[u].w;
        }
    part[w][lane] = acc;
    __syncthreads();
    if (w == 0 && j < hs) {
        float4 sum = part[0][lane];
        for (uint32_t i = 1; i < ATT_WARPS; i++) {
            float4 a = part[i][lane];
            sum.x += a.x, sum.y += a.y, sum.z += a.z, sum.w += a.w;
        }
        float *dst = gridDim.z > 1 ? partial + (((size_t)blockIdx.z * gridDim.y + r) * H + h) * hs
                                   : out + ((size_t)r * H + h) * hs;
        *(float4 *)(dst + j) = sum;
    }
}

/* out (rows, hs) = the sum over z in order of partial (splits, rows, hs):
 * the chunks' shares, in an order that does not vary from run to run. */
__global__ static void attn_output_sum(float *out, const float *partial, uint32_t rows,
                                       uint32_t hs, uint32_t splits)
{
    const size_t i = blockIdx.x;
    for (uint32_t j = threadIdx.x; j < hs; j += blockDim.x) {
        float sum = 0.0f;
        for (uint32_t z = 0; z < splits; z++)
            sum += partial[((size_t)z * rows + i) * hs + j];
        out[i * hs + j] = sum;
    }
}

/* Chunks of a row's tokens for the output pass: one when rows x heads
 * fill ATT_BLOCKS blocks, else as many as fill them, each at least
 * ATT_CHUNK_MIN tokens. Depends on ld, never on the counts. */
#define ATT_CHUNK_MIN 256u
static uint32_t output_splits(uint32_t R, uint32_t H, uint32_t ld)
{
    const uint32_t most = (ld + ATT_CHUNK_MIN - 1) / ATT_CHUNK_MIN;
    const uint32_t want = (ATT_BLOCKS + R * H - 1) / (R * H);
    const uint32_t s = want < most ? want : most;
    return s ? s : 1;
}

size_t kern_attn_partial_floats(uint32_t hs)
{
    /* more than one split only when R H < ATT_BLOCKS: then splits x R H <
     * ATT_BLOCKS + R H < 2 ATT_BLOCKS */
    return (size_t)2 * ATT_BLOCKS * hs;
}

template <typename T>
static cudaError_t attn_output_any(float *out, float *partial, const float *p, const T *V,
                                   struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                                   uint32_t hs, cudaStream_t stream)
{
    unsigned threads = hs < 32 ? 32 : hs > 1024 ? 1024 : hs;
    if (!R)
        return cudaGetLastError();
    if (hs % 4 == 0 && hs <= 128) {
        const uint32_t splits = partial && rows.ld ? output_splits(R, H, rows.ld) : 1;
        const uint32_t chunk = splits > 1 ? (rows.ld + splits - 1) / splits : rows.ld;
        attn_output_warp<<<dim3(H, R, splits), 32 * ATT_WARPS, 0, stream>>>(
            out, partial, p, V, rows, H, KVH, hs, chunk ? chunk : 1);
        if (splits > 1)
            attn_output_sum<<<R * H, threads, 0, stream>>>(out, partial, R * H, hs, splits);
    } else
        attn_output<<<dim3(H, R), threads, 0, stream>>>(out, p, V, rows, H, KVH, hs);
    return cudaGetLastError();
}

cudaError_t kern_attn_scores16(float *scores, const float *q, const uint16_t *K,
                               struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                               uint32_t hs, float scale, cudaStream_t stream)
{
    return attn_scores_any(scores, q, (const __half *)K, rows, R, H, KVH, hs, scale, stream);
}

cudaError_t kern_attn_output16(float *out, float *partial, const float *p, const uint16_t *V,
                               struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                               uint32_t hs, cudaStream_t stream)
{
    return attn_output_any(out, partial, p, (const __half *)V, rows, R, H, KVH, hs, stream);
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
