/* Weight matrices kept as their file stores them (F32, F16, ggml's Q4_0,
 * Q4_1, Q8_0 blocks of 32 and its Q4_K, Q6_K super-blocks of 256), and the
 * product of a batch of FP32 activation rows with one, as llama.cpp computes
 * it: the activations are quantised to 8 bits in blocks of 32 (ggml's Q8_0
 * for Q4_0 and Q8_0 weights, Q8_1 for Q4_1: ggml-quants.c
 * quantize_row_q8_0_ref / quantize_row_q8_1_ref, scales rounded to
 * binary16 as ggml stores them), and each block's dot product is an integer
 * sum scaled once (ggml-cpu's ggml_vec_dot_q4_0_q8_0, _q4_1_q8_1,
 * _q8_0_q8_0). The k-quants are dotted with the same 32-wide activation
 * blocks, one integer sum per 32 (Q4_K) or 16 (Q6_K) weights with their own
 * scale: finer than llama.cpp's Q8_K activations (one scale per 256), so
 * not its arithmetic to the bit. F16 rows are widened and dotted with the
 * FP32 activations; F32 matrices go to CBLAS (cpu_ops.h).
 *
 * The integer dot products have a scalar form (the reference), an AVX2 form
 * and an AVX-512 VNNI form, chosen at run time by what the CPU supports, so
 * one binary runs everywhere; each gives the same integer sums, so they
 * differ only by the order of the float accumulation. Products are spread
 * over output rows across the OpenMP threads (cpu_threads_set).
 *
 * A struct qmat points into memory it does not own (a mapped GGUF file, or
 * the model's FP32 allocation).
 */
#ifndef ALISA_QMAT_H
#define ALISA_QMAT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct qmat {
    uint32_t type;     /* ggml type id (gguf.h): GGML_F32, F16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K */
    uint32_t rows;     /* output features */
    uint32_t cols;     /* input features */
    size_t row_bytes;  /* bytes of one row as stored */
    const void *data;  /* rows x row_bytes */
};

/* Bytes of one row of `cols` weights of `type`; 0 when the type is not one
 * of the seven or cols is not a whole number of its blocks. Cannot fail. */
size_t qmat_row_bytes(uint32_t type, uint64_t cols);

/* Makes w describe `rows` x `cols` weights of `type` at data. Returns 0, or
 * ALISA_EINVAL when qmat_row_bytes is 0 for them. */
int qmat_init(struct qmat *w, uint32_t type, uint32_t rows, uint32_t cols, const void *data);

/* Dequantises n weights of `type` (a whole number of blocks) from src to
 * dst, as ggml's dequantize_row_* do. Cannot fail for a supported type. */
void qmat_dequant(uint32_t type, const void *src, float *dst, size_t n);

/* Weights in one block of `type`: 1 for F32 and F16, 32 for Q4_0, Q4_1 and
 * Q8_0, 256 for Q4_K and Q6_K; 0 for another type. Cannot fail. */
uint32_t qmat_block_weights(uint32_t type);

/* The index of the first block of n weights of `type` at src (a whole
 * number of blocks) whose binary16 scale is an infinity or a NaN (for Q4_1
 * and Q4_K, or whose minimum is), or for F32 and F16 of the first weight
 * that is; -1 when every one is finite, or for another type. Reads the
 * scales only, so a loader can refuse such a tensor cheaply: its weights
 * would make every activation they touch infinite or NaN (issue 48).
 * Cannot fail. */
int64_t qmat_first_nonfinite(uint32_t type, const void *src, size_t n);

/* Row r of w as FP32 (cols floats). Cannot fail. */
void qmat_row(const struct qmat *w, uint32_t r, float *out);

/* Scratch bytes qmat_gemm needs for R rows of `cols` activations:
 * QMAT_SCRATCH_PER_BLOCK for each 32 columns (rounded up) of each row. */
#define QMAT_SCRATCH_PER_BLOCK 40
size_t qmat_scratch_bytes(uint32_t cols, uint32_t R);

/* y (R, w->rows) = x (R, w->cols) w^T. scratch holds at least
 * qmat_scratch_bytes(w->cols, R) bytes (unused for F32 and F16). A block
 * of 32 activations holding a NaN or an infinity is quantised to codes 0
 * and a NaN scale, so the outputs of its row are NaN, as an FP32 product's
 * would be, never undefined behaviour (issue 48). Cannot fail. */
void qmat_gemm(float *y, const float *x, const struct qmat *w, uint32_t R, void *scratch);

/* qmat_gemm, where quantised non-zero says scratch already holds x's
 * activations as the previous call on the same x (R rows of w->cols)
 * quantised them, so they are not quantised again (the layer sequence's K
 * and V after Q, gate after up: layers.h's `again`). Returns 1 when scratch
 * holds x's quantised activations after the call, 0 for F32 and F16
 * matrices, which read x as it is. Cannot fail. */
int qmat_gemm_again(float *y, const float *x, const struct qmat *w, uint32_t R, void *scratch,
                    int quantised);

/* The instruction set the integer dot products use: "avx512vnni", "avx2"
 * or "scalar". */
const char *qmat_isa(void);

/* Chooses the instruction set by name ("scalar", "avx2", "avx512vnni", or
 * "auto" for the best the CPU has). ALISA_EINVAL, naming it, for an unknown
 * name or one this CPU lacks. The environment variable ALISA_CPU_ISA does
 * the same at the first product. */
int qmat_set_isa(const char *name, struct alisa_err *e);

#endif
