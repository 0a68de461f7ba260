/* The CUDA backend's kernels, behind C launchers: element-wise and row
 * operations of the forward pass, attention over a gathered list of KV rows
 * with grouped-query heads, token-level gather/scatter between KV arenas and
 * packed staging buffers, INT8 KV quantisation and the SWA local-sum update.
 *
 * Every pointer is device memory unless its comment says host. Every
 * launcher enqueues on `stream` and returns the launch's cudaError_t (0 when
 * it was queued); errors inside a kernel surface at the next synchronising
 * call. Half-precision data is passed as uint16_t bit patterns so C callers
 * need no half type. The CPU oracles are exec/cpu_ops.h (forward pass),
 * kvstore.h (INT8) and selection.h (sel_weight_fixed, SWA).
 */
#ifndef ALISA_KERNELS_H
#define ALISA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst (n) FP16 = src (n) FP32, round to nearest even. */
cudaError_t kern_f32_to_f16(uint16_t *dst, const float *src, size_t n, cudaStream_t stream);

/* x (R, d) FP32 = rows tokens[r] of the FP16 embedding emb (vocab, d). */
cudaError_t kern_embed(float *x, const uint16_t *emb, const uint32_t *tokens, uint32_t R,
                       uint32_t d, cudaStream_t stream);

/* x (R, d) += rows pos[r] + offset of the FP16 learned positions pe (OPT's,
 * offset 2). */
cudaError_t kern_embed_pos(float *x, const uint16_t *pe, const uint32_t *pos, uint32_t offset,
                           uint32_t R, uint32_t d, cudaStream_t stream);

/* o (R, n) = w * (x - mean) / sqrt(var + eps) + b, row by row (OPT's
 * LayerNorm; cpu_layernorm); o may be x. With o16 (not NULL) o is also
 * written narrowed to FP16 there, as kern_f32_to_f16 of o would be. */
cudaError_t kern_layernorm(float *o, uint16_t *o16, const float *x, const float *w, const float *b,
                           uint32_t R, uint32_t n, float eps, cudaStream_t stream);

/* y (R, n) += b (n) per row, then ReLU when relu is non-zero. */
cudaError_t kern_bias(float *y, const float *b, uint32_t R, uint32_t n, int relu,
                      cudaStream_t stream);

/* dst (rows, cols) FP16 = matrix id of a synthetic model under seed
 * (kernels/synth.h): Q8_0 codes times scale (the block scale as FP16
 * holds it, as a float) when q8, else the FP32 draws; rounded to nearest
 * even, as the host's dequantised weights would be. */
cudaError_t kern_synth_f16(uint16_t *dst, int q8, uint32_t rows, uint32_t cols, uint64_t seed,
                           uint64_t id, float scale, cudaStream_t stream);

/* o (R, n) = w (n) * x / sqrt(mean(x^2) + eps), row by row; o may be x;
 * with o16, o narrowed to FP16 there too (as kern_layernorm). */
cudaError_t kern_rmsnorm(float *o, uint16_t *o16, const float *x, const float *w, uint32_t R,
                         uint32_t n, float eps, cudaStream_t stream);

/* Rotates x (R, n) in place: row r at position pos[r], pairs (2i, 2i+1) of
 * each head of head_dim channels by the angle in cos_t/sin_t
 * (max_pos, head_dim / 2). */
cudaError_t kern_rope(float *x, uint32_t R, uint32_t n, uint32_t head_dim, const uint32_t *pos,
                      const float *cos_t, const float *sin_t, cudaStream_t stream);

/* hb (n) = silu(hb) * hb2; with h16, hb narrowed to FP16 there too. */
cudaError_t kern_swiglu(float *hb, uint16_t *h16, const float *hb2, size_t n, cudaStream_t stream);

/* x (n) += y (n). */
cudaError_t kern_add(float *x, const float *y, size_t n, cudaStream_t stream);

/* Softmax in place of each row i of x (rows, ld) over its first
 * count[i / per] entries (count NULL: all ld). */
cudaError_t kern_softmax(float *x, uint32_t rows, uint32_t ld, const uint32_t *count, uint32_t per,
                         cudaStream_t stream);

/* out (R) = the greedy token of each row of x (R, n): the first index of
 * the row's largest value that is not a NaN (0 for a row of NaNs);
 * exec/forward.h llm_argmax is the oracle, matched exactly. */
cudaError_t kern_argmax_rows(uint32_t *out, const float *x, uint32_t R, uint32_t n,
                             cudaStream_t stream);

/* Few-row products, the decode step's projections: for m in [0, count),
 * y_m (R, out) = x (R, in) W_m^T, or y_m += that with accumulate (a
 * residual add folded in); W_m = W + m * w_stride halves, each FP16 (out,
 * in) row-major, y_m = y + m * y_stride floats, x FP32 (R, in) shared by
 * all (so a layer's Q, K and V, or its up and gate matrices, are one
 * launch). x is rounded to FP16 as it is read, as the cuBLAS path narrows
 * its input, so a row's product does not depend on which path its call's
 * row count takes but for the order of the FP32 sums. Serves what
 * kern_gemv_fits accepts; anything else returns cudaErrorInvalidValue
 * without launching. */
#define KERN_GEMV_ROWS 8u
cudaError_t kern_gemv(float *y, size_t y_stride, const float *x, const uint16_t *W,
                      size_t w_stride, uint32_t count, uint32_t R, uint32_t out, uint32_t in,
                      int accumulate, cudaStream_t stream);
/* Non-zero when kern_gemv serves R rows of width in over x and W (and W's
 * stride, in halves): 1 <= R <= KERN_GEMV_ROWS, in a multiple of 8, x and
 * W 16-byte aligned, w_stride a multiple of 8 (16-byte loads). Host code;
 * cannot fail. */
int kern_gemv_fits(uint32_t R, uint32_t in, const float *x, const uint16_t *W, size_t w_stride);

/* Where query row r's attended K/V rows lie: the t-th is row idx[r * ld + t]
 * of K and V (kv_dim floats a row), or base[r] + t when idx is NULL; count[r]
 * of them. */
struct kern_rows {
    const int32_t *idx;    /* (R, ld) or NULL */
    const int32_t *base;   /* (R), used when idx is NULL */
    const uint32_t *count; /* (R) */
    uint32_t ld;           /* row stride of idx and of the scores, >= every count */
};

/* scores (R, H, ld) = scale * q . K for each query row r (q: (R, H * hs)),
 * head h against KV head h / (H / KVH), over FP16 K (the dense cache or the
 * tiered arenas), the products in FP32. */
cudaError_t kern_attn_scores16(float *scores, const float *q, const uint16_t *K,
                               struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                               uint32_t hs, float scale, cudaStream_t stream);
/* out (R, H * hs) = p (R, H, ld, softmaxed) . V, grouped as the scores,
 * over FP16 V. With partial (kern_attn_partial_floats(hs) floats, or NULL)
 * a row's tokens are split over blocks when rows x heads are too few to
 * fill the device (a small batch, a long context: flash-decoding's split),
 * each chunk's share summed afterwards in a fixed order (a second launch);
 * without it one block a row and head. The grid depends on ld, never on
 * the counts. */
cudaError_t kern_attn_output16(float *out, float *partial, const float *p, const uint16_t *V,
                               struct kern_rows rows, uint32_t R, uint32_t H, uint32_t KVH,
                               uint32_t hs, cudaStream_t stream);
/* Floats the output pass's partial sums take for head size hs. Cannot
 * fail. */
size_t kern_attn_partial_floats(uint32_t hs);

/* w (R, ld) = the heads' mean of p (R, H, ld) over each row's count, summed
 * head by head in order as the CPU backend does. */
cudaError_t kern_head_mean(float *w, const float *p, const uint32_t *count, uint32_t R,
                           uint32_t H, uint32_t ld, cudaStream_t stream);

/* dst (n, width) = src rows rows[i]. */
cudaError_t kern_gather_rows(float *dst, const float *src, const int32_t *rows, uint32_t n,
                             uint32_t width, cudaStream_t stream);

/* Row rows[i] of dst (row_bytes a row) = the row_bytes at src[i], for
 * i < n, where src (device memory) lists pointers into pinned host memory
 * (cudaHostAlloc's: under unified addressing the device reads it at the
 * host's address, over the link, with no copy staged on the host). Rows
 * and addresses 4-byte aligned, 16-byte words used where a row and both
 * its ends allow; row_bytes not a multiple of 4: cudaErrorInvalidValue. */
cudaError_t kern_rows_from_host(void *dst, const int32_t *rows, const void *const *src,
                                uint32_t n, uint32_t row_bytes, cudaStream_t stream);

/* dst rows rows[i] = src (n, width). */
cudaError_t kern_scatter_rows(float *dst, const int32_t *rows, const float *src, uint32_t n,
                              uint32_t width, cudaStream_t stream);

/* dst rows rows[i] (FP16) = src (n, width) rounded to nearest even. */
cudaError_t kern_scatter_rows16(uint16_t *dst, const int32_t *rows, const float *src, uint32_t n,
                                uint32_t width, cudaStream_t stream);

/* Channel-wise INT8 parameters of x (n, kv) into p (2, kv): scale, then zero
 * point (kvstore.h's formula). */
cudaError_t kern_quant_params(float *p, const float *x, uint32_t n, uint32_t kv,
                              cudaStream_t stream);

/* q (n, kv) codes of x (n, kv) under p (2, kv). */
cudaError_t kern_quantise(uint8_t *q, const float *x, const float *p, uint32_t n, uint32_t kv,
                          cudaStream_t stream);

/* x (n, kv) = (q - zero) * scale under p (2, kv). */
cudaError_t kern_dequantise(float *x, const uint8_t *q, const float *p, uint32_t n, uint32_t kv,
                            cudaStream_t stream);

/* SWA's local attention sum S (ALISA.md 1), fixed point: sum[ids[i]] +=
 * fixed(w[i]) for the row entering the window, sum[old_ids[j]] -= old_w[j]
 * for the row leaving it (n_old may be 0). Integer, so the order of the
 * atomic adds does not matter. */
cudaError_t kern_swa_sum_update(int64_t *sum, const uint32_t *ids, const float *w, uint32_t n,
                                const uint32_t *old_ids, const int64_t *old_w, uint32_t n_old,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
