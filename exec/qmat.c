/* Quantised weight products (contract in qmat.h). Block layouts are
 * ggml's (ggml-common.h): Q4_0 {f16 d; u8 qs[16]}, weight j = (nibble - 8) d,
 * low nibbles holding weights 0-15 and high nibbles 16-31; Q4_1 {f16 d;
 * f16 m; u8 qs[16]}, weight = nibble d + m; Q8_0 {f16 d; i8 qs[32]}.
 * Activations become struct qa blocks: ggml's Q8_0/Q8_1 values (d and
 * s = d x sum(q) rounded to binary16 as ggml stores them) held as floats.
 * Per block, with integer sum S of weight codes times activation codes:
 * Q4_0 and Q8_0 add d_w d_a S; Q4_1 adds d_w d_a S + m_w s_a.
 */
#include "qmat.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define QMAT_X86 1
#endif

#include "cpu_ops.h"
#include "fp16.h"
#include "gguf.h"

#define QK 32    /* the 32-weight blocks, and our activation blocks */
#define QKK 256  /* the k-quants' super-blocks */

struct qa {
    float d;         /* scale, a binary16 value */
    float s;         /* d x sum of q, a binary16 value (Q8_1's s) */
    int8_t q[QK];
};

_Static_assert(sizeof(struct qa) == QMAT_SCRATCH_PER_BLOCK, "qmat.h's scratch size");

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline float h2f(const uint8_t *p) { return fp16_to_float(rd16(p)); }
static inline float round_h(float x) { return fp16_to_float(fp16_from_float(x)); }

/* Q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]} (144 bytes, 256
 * weights): sub-block j of 32 has scale d sc_j and min dmin m_j, 6-bit
 * numbers packed as ggml-quants.c get_scale_min_k4 reads them; its codes
 * are the low (j even) or high (j odd) nibbles of qs[32 (j / 2) ..]. */
static inline void k4_scale(const uint8_t *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
static inline int k4_code(const uint8_t *blk, int j, int l)
{
    return (blk[16 + (j / 2) * 32 + l] >> (4 * (j & 1))) & 0xF;
}

/* Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} (210 bytes, 256
 * weights), as ggml-quants.c dequantize_row_q6_K reads it: in each half of
 * 128 weights, 32-weight group g takes its low 4 bits from ql (bytes l or
 * l + 32, low or high nibble) and its top 2 bits from qh bits 2g; code - 32
 * times d times the scale of its 16 weights. */
static inline int k6_code(const uint8_t *blk, int g, int l)
{
    const uint8_t *ql = blk + 64 * (g / 4), *qh = blk + 128 + 32 * (g / 4);
    int gg = g % 4;
    int lo = (ql[l + 32 * (gg & 1)] >> (4 * (gg >> 1))) & 0xF;
    return (lo | ((qh[l] >> (2 * gg)) & 3) << 4) - 32;
}
static inline int k6_scale(int g, int l) /* index into scales[16] */
{
    return 8 * (g / 4) + 2 * (g % 4) + (l >= 16);
}

size_t qmat_row_bytes(uint32_t type, uint64_t cols)
{
    if (cols == 0 || cols > (1u << 24))
        return 0;
    switch (type) {
    case GGML_F32: return (size_t)cols * 4;
    case GGML_F16: return (size_t)cols * 2;
    case GGML_Q4_0: return cols % QK ? 0 : (size_t)cols / QK * 18;
    case GGML_Q4_1: return cols % QK ? 0 : (size_t)cols / QK * 20;
    case GGML_Q8_0: return cols % QK ? 0 : (size_t)cols / QK * 34;
    case GGML_Q4_K: return cols % QKK ? 0 : (size_t)cols / QKK * 144;
    case GGML_Q6_K: return cols % QKK ? 0 : (size_t)cols / QKK * 210;
    }
    return 0;
}

int qmat_init(struct qmat *w, uint32_t type, uint32_t rows, uint32_t cols, const void *data)
{
    size_t rb = qmat_row_bytes(type, cols);
    if (!rb || !rows)
        return ALISA_EINVAL;
    *w = (struct qmat){type, rows, cols, rb, data};
    return 0;
}

void qmat_dequant(uint32_t type, const void *src, float *out, size_t n)
{
    const uint8_t *p = src;
    switch (type) {
    case GGML_F32:
        memcpy(out, p, n * 4);
        break;
    case GGML_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = fp16_to_float(rd16(p + 2 * i));
        break;
    case GGML_Q8_0:
        for (size_t b = 0; b < n / QK; b++, p += 34) {
            float d = h2f(p);
            for (int j = 0; j < QK; j++)
                out[b * QK + j] = d * (float)(int8_t)p[2 + j];
        }
        break;
    case GGML_Q4_0:
        for (size_t b = 0; b < n / QK; b++, p += 18) {
            float d = h2f(p);
            for (int j = 0; j < 16; j++) {
                out[b * QK + j] = d * (float)((p[2 + j] & 0x0F) - 8);
                out[b * QK + j + 16] = d * (float)((p[2 + j] >> 4) - 8);
            }
        }
        break;
    case GGML_Q4_1:
        for (size_t b = 0; b < n / QK; b++, p += 20) {
            float d = h2f(p), m = h2f(p + 2);
            for (int j = 0; j < 16; j++) {
                out[b * QK + j] = d * (float)(p[4 + j] & 0x0F) + m;
                out[b * QK + j + 16] = d * (float)(p[4 + j] >> 4) + m;
            }
        }
        break;
    case GGML_Q4_K:
        for (size_t b = 0; b < n / QKK; b++, p += 144) {
            float d = h2f(p), dmin = h2f(p + 2);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                k4_scale(p + 4, j, &sc, &m);
                const float dj = d * (float)sc, mj = dmin * (float)m;
                for (int l = 0; l < QK; l++)
                    *out++ = dj * (float)k4_code(p, j, l) - mj;
            }
        }
        break;
    case GGML_Q6_K:
        for (size_t b = 0; b < n / QKK; b++, p += 210) {
            const float d = h2f(p + 208);
            for (int g = 0; g < 8; g++)
                for (int l = 0; l < QK; l++)
                    *out++ = d * (float)(int8_t)p[192 + k6_scale(g, l)] * (float)k6_code(p, g, l);
        }
        break;
    }
}

uint32_t qmat_block_weights(uint32_t type)
{
    switch (type) {
    case GGML_F32:
    case GGML_F16: return 1;
    case GGML_Q4_0:
    case GGML_Q4_1:
    case GGML_Q8_0: return QK;
    case GGML_Q4_K:
    case GGML_Q6_K: return QKK;
    }
    return 0;
}

/* a binary16 or binary32 bit pattern with every exponent bit set: inf or NaN */
static int h_nonfinite(const uint8_t *p) { return (rd16(p) & 0x7C00) == 0x7C00; }
static int f_nonfinite(const uint8_t *p) { return (rd16(p + 2) & 0x7F80) == 0x7F80; }

int64_t qmat_first_nonfinite(uint32_t type, const void *src, size_t n)
{
    /* each block's bytes and the offsets of its scales (ggml-common.h) */
    size_t bytes = 0, at[2] = {0, 0}, n_at = 1;
    switch (type) {
    case GGML_F32: bytes = 4; break;
    case GGML_F16: bytes = 2; break;
    case GGML_Q4_0: bytes = 18; break;
    case GGML_Q8_0: bytes = 34; break;
    case GGML_Q4_1: bytes = 20, at[1] = 2, n_at = 2; break;
    case GGML_Q4_K: bytes = 144, at[1] = 2, n_at = 2; break; /* d, dmin */
    case GGML_Q6_K: bytes = 210, at[0] = 208; break;
    default: return -1;
    }
    const uint8_t *p = src;
    const size_t nb = n / qmat_block_weights(type);
    for (size_t b = 0; b < nb; b++, p += bytes)
        for (size_t k = 0; k < n_at; k++)
            if (type == GGML_F32 ? f_nonfinite(p + at[k]) : h_nonfinite(p + at[k]))
                return (int64_t)b;
    return -1;
}

void qmat_row(const struct qmat *w, uint32_t r, float *out)
{
    qmat_dequant(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, out, w->cols);
}

size_t qmat_scratch_bytes(uint32_t cols, uint32_t R)
{
    return (size_t)R * ((cols + QK - 1) / QK) * sizeof(struct qa);
}

/* roundf (half away from zero) for |y| <= 127, without the library call:
 * the truncation and the remainder y - t are exact in this range. */
static inline int round_small(float y)
{
    int t = (int)y;
    float r = y - (float)t;
    return t + (r >= 0.5f) - (r <= -0.5f);
}

/* One row of activations into blocks (ggml's quantize_row_q8_1_ref: d =
 * max |x| / 127, q = round(x / d)). Built for AVX-512 and AVX2 beside the
 * baseline, chosen at load (a prompt quantises every row it multiplies).
 * Only finite numbers reach the conversion to int (issue 48): a block with
 * a NaN or an infinity gets codes 0 and scale NaN (qmat.h), and below
 * FLT_MIN 1 / d may overflow to infinity (0 x inf is NaN) while such a d
 * rounds to a binary16 scale of 0 anyway, so its codes are 0 too. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void quantize_row(const float *x, struct qa *b, uint32_t nb)
{
    for (uint32_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f;
        int finite = 1;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(x[j]);
            finite &= a <= FLT_MAX; /* false for an infinity and a NaN */
            amax = a > amax ? a : amax;
        }
        if (!finite) {
            memset(b[i].q, 0, sizeof b[i].q);
            b[i].d = b[i].s = NAN;
            continue;
        }
        float d = amax / 127.0f, id = d >= FLT_MIN ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            int v = round_small(x[j] * id);
            b[i].q[j] = (int8_t)v;
            sum += v;
        }
        b[i].d = round_h(d);
        b[i].s = round_h((float)sum * d);
    }
}

/* ---- the dot products: one weight row (nb blocks) with one activation row ---- */

/* out[k * ostride] = weight row w (nb blocks) . activation row k, for k <
 * n <= 8, the rows `stride` blocks apart from a */
typedef void (*dots_fn)(const uint8_t *w, const struct qa *a, size_t stride, uint32_t nb,
                        uint32_t n, float *out, size_t ostride);

static float dot_q4_0_scalar(const uint8_t *w, const struct qa *a, uint32_t nb)
{
    float acc = 0.0f;
    for (uint32_t i = 0; i < nb; i++, w += 18) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += ((w[2 + j] & 0x0F) - 8) * a[i].q[j] + ((w[2 + j] >> 4) - 8) * a[i].q[j + 16];
        acc += h2f(w) * a[i].d * (float)s;
    }
    return acc;
}

static float dot_q4_1_scalar(const uint8_t *w, const struct qa *a, uint32_t nb)
{
    float acc = 0.0f;
    for (uint32_t i = 0; i < nb; i++, w += 20) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += (w[4 + j] & 0x0F) * a[i].q[j] + (w[4 + j] >> 4) * a[i].q[j + 16];
        acc += h2f(w) * a[i].d * (float)s + h2f(w + 2) * a[i].s;
    }
    return acc;
}

static float dot_q8_0_scalar(const uint8_t *w, const struct qa *a, uint32_t nb)
{
    float acc = 0.0f;
    for (uint32_t i = 0; i < nb; i++, w += 34) {
        int s = 0;
        for (int j = 0; j < QK; j++)
            s += (int8_t)w[2 + j] * a[i].q[j];
        acc += h2f(w) * a[i].d * (float)s;
    }
    return acc;
}

static float dot_q4_k_scalar(const uint8_t *w, const struct qa *a, uint32_t nb)
{
    float acc = 0.0f;
    for (uint32_t i = 0; i < nb / 8; i++, w += 144) {
        const float d = h2f(w), dmin = h2f(w + 2);
        for (int j = 0; j < 8; j++) {
            const struct qa *x = a + i * 8 + j;
            int sc, m, sum = 0;
            k4_scale(w + 4, j, &sc, &m);
            for (int l = 0; l < QK; l++)
                sum += k4_code(w, j, l) * x->q[l];
            acc += d * (float)sc * x->d * (float)sum - dmin * (float)m * x->s;
        }
    }
    return acc;
}

static float dot_q6_k_scalar(const uint8_t *w, const struct qa *a, uint32_t nb)
{
    float acc = 0.0f;
    for (uint32_t i = 0; i < nb / 8; i++, w += 210) {
        const float d = h2f(w + 208);
        for (int g = 0; g < 8; g++) {
            const struct qa *x = a + i * 8 + g;
            int sum[2] = {0, 0};
            for (int l = 0; l < QK; l++)
                sum[l >= 16] += k6_code(w, g, l) * x->q[l];
            acc += d * x->d * (float)((int8_t)w[192 + k6_scale(g, 0)] * sum[0] +
                                      (int8_t)w[192 + k6_scale(g, 16)] * sum[1]);
        }
    }
    return acc;
}

#define DEFINE_SCALAR_DOTS(T)                                                             \
    static void dots_##T##_scalar(const uint8_t *w, const struct qa *a, size_t stride,     \
                                  uint32_t nb, uint32_t n, float *out, size_t ostride)      \
    {                                                                                      \
        for (uint32_t k = 0; k < n; k++)                                                   \
            out[k * ostride] = dot_##T##_scalar(w, a + k * stride, nb);                    \
    }
DEFINE_SCALAR_DOTS(q4_0)
DEFINE_SCALAR_DOTS(q4_1)
DEFINE_SCALAR_DOTS(q8_0)
DEFINE_SCALAR_DOTS(q4_k)
DEFINE_SCALAR_DOTS(q6_k)

static float dot_f16_scalar(const uint8_t *w, const float *x, uint32_t n)
{
    float acc = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        acc += fp16_to_float(rd16(w + 2 * j)) * x[j];
    return acc;
}

#ifdef QMAT_X86
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512vnni")))

/* A binary16 widened by the F16C instruction: exact, as fp16_to_float's
 * table, without the table's 256 KiB competing with the weights for the
 * cache */
AVX2 static inline float h2f_hw(const uint8_t *p) { return _cvtsh_ss(rd16(p)); }

AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 nibbles of qs (16 bytes) as bytes 0..15 low, 16..31 high */
AVX2 static inline __m256i nibbles(const uint8_t *qs)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* Bytes of one 32-weight block of type (Q4_0, Q4_1 or Q8_0). */
static inline size_t block32_bytes(uint32_t type)
{
    return type == GGML_Q4_0 ? 18 : type == GGML_Q4_1 ? 20 : 34;
}

/* One 32-weight block unpacked for SUM(u, s): x its codes as signed bytes,
 * u their magnitudes (Q4_1's codes are unsigned already, so both); *dw its
 * scale and *mw its min (Q4_1; 0 otherwise). */
AVX2 static inline __attribute__((always_inline)) void block32_codes(
    uint32_t type, const uint8_t *w, __m256i *u, __m256i *x, float *dw, float *mw)
{
    *dw = h2f_hw(w);
    *mw = 0.0f;
    if (type == GGML_Q4_1) {
        *u = *x = nibbles(w + 4); /* unsigned codes: no sign to move */
        *mw = h2f_hw(w + 2);
    } else {
        *x = type == GGML_Q4_0 ? _mm256_sub_epi8(nibbles(w + 2), _mm256_set1_epi8(8))
                               : _mm256_loadu_si256((const __m256i *)(w + 2));
        *u = _mm256_sign_epi8(*x, *x);
    }
}

/* eight partial sums of u (unsigned bytes) times s (signed bytes) */
AVX2 static inline __m256i sum_us_avx2(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
VNNI static inline __m256i sum_us_vnni(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

/* A dots_fn for one weight type from an always-inlined CORE: TILE rows at
 * once with the accumulators in registers (8 for the 32-weight blocks, 4 for
 * the k-quants, whose unpacked super-block already fills the registers),
 * then four, then one by one. */
#define DOTS_WRAPPER(NAME, CORE, TYPE, ATTR, TILE)                                             \
    ATTR static void NAME(const uint8_t *w, const struct qa *a, size_t stride, uint32_t nb,    \
                          uint32_t n, float *out, size_t ostride)                              \
    {                                                                                          \
        uint32_t k = 0;                                                                        \
        for (; k + (TILE) <= n; k += (TILE))                                                   \
            CORE(TYPE, w, a + k * stride, stride, nb, (TILE), out + k * ostride, ostride);     \
        if ((TILE) > 4 && k + 4 <= n) {                                                        \
            CORE(TYPE, w, a + k * stride, stride, nb, 4, out + k * ostride, ostride);          \
            k += 4;                                                                            \
        }                                                                                      \
        for (; k < n; k++)                                                                     \
            CORE(TYPE, w, a + k * stride, stride, nb, 1, out + k * ostride, ostride);          \
    }

/* The dot products of one weight row with n <= 8 activation rows (rows
 * `stride` blocks apart), for each instruction set: each weight block is
 * unpacked once for the n rows into codes x (signed bytes) and u (unsigned
 * bytes for SUM(u, s), an unsigned-times-signed byte sum): Q4_1's codes are
 * unsigned already; otherwise u = |x| and x's sign moves onto the
 * activations (the sign trick). */
#define DEFINE_DOTS(ISA, ATTR, SUM)                                                            \
    ATTR static inline __attribute__((always_inline)) void dots_##ISA(                         \
        uint32_t type, const uint8_t *w, const struct qa *a, size_t stride, uint32_t nb,       \
        uint32_t n, float *out, size_t ostride)                                                \
    {                                                                                          \
        __m256 acc[8];                                                                         \
        float mins[8];                                                                         \
        for (int k = 0; k < 8; k++)                                                            \
            acc[k] = _mm256_setzero_ps(), mins[k] = 0.0f;                                      \
        const size_t bb = block32_bytes(type);                                                 \
        for (uint32_t i = 0; i < nb; i++, w += bb) {                                           \
            __m256i u, x;                                                                      \
            float dw, mw;                                                                      \
            block32_codes(type, w, &u, &x, &dw, &mw);                                          \
            _Pragma("GCC unroll 8")                                                            \
            for (uint32_t k = 0; k < n; k++) {                                                 \
                const struct qa *ak = a + k * stride + i;                                      \
                __m256i y = _mm256_loadu_si256((const __m256i *)ak->q);                        \
                if (type != GGML_Q4_1)                                                         \
                    y = _mm256_sign_epi8(y, x);                                                \
                __m256 f = _mm256_cvtepi32_ps(SUM(u, y));                                      \
                acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * ak->d), f, acc[k]);               \
                mins[k] += mw * ak->s;                                                         \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8")                                                                \
        for (uint32_t k = 0; k < n; k++)                                                       \
            out[k * ostride] = hsum8(acc[k]) + mins[k];                                        \
    }

/* The k-quants the same way: a super-block's scales decoded once, each
 * 32-weight group's codes unpacked once for the n activation rows. */
#define DEFINE_KDOTS(ISA, ATTR, SUM)                                                           \
    ATTR static inline __attribute__((always_inline)) void kdots_##ISA(                        \
        uint32_t type, const uint8_t *w, const struct qa *a, size_t stride, uint32_t nb,       \
        uint32_t n, float *out, size_t ostride)                                                \
    {                                                                                          \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),        \
                         _mm256_setzero_ps()};                                                 \
        float mins[4] = {0, 0, 0, 0};                                                          \
        const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);               \
        for (uint32_t i = 0; i < nb / 8; i++, w += type == GGML_Q4_K ? 144 : 210) {            \
            __m256i u[8], x[8];                                                                \
            __m256 scale[8];                                                                   \
            float mn[8] = {0};                                                                 \
            if (type == GGML_Q4_K) {                                                           \
                const float d = h2f_hw(w), dmin = h2f_hw(w + 2);                                     \
                for (int p = 0; p < 4; p++) {                                                  \
                    __m256i b = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * p));        \
                    u[2 * p] = _mm256_and_si256(b, m4);                                        \
                    u[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);              \
                }                                                                              \
                for (int j = 0; j < 8; j++) {                                                  \
                    int sc, m;                                                                 \
                    k4_scale(w + 4, j, &sc, &m);                                               \
                    scale[j] = _mm256_set1_ps(d * (float)sc);                                  \
                    mn[j] = dmin * (float)m;                                                   \
                }                                                                              \
            } else {                                                                           \
                const float d = h2f_hw(w + 208);                                                  \
                for (int h = 0; h < 2; h++) {                                                  \
                    const uint8_t *ql = w + 64 * h, *qhp = w + 128 + 32 * h;                   \
                    __m256i la = _mm256_loadu_si256((const __m256i *)ql);                      \
                    __m256i lb = _mm256_loadu_si256((const __m256i *)(ql + 32));               \
                    __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);                     \
                    __m256i c[4] = {                                                           \
                        _mm256_or_si256(_mm256_and_si256(la, m4),                              \
                                        _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),      \
                        _mm256_or_si256(_mm256_and_si256(lb, m4),                              \
                                        _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),      \
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4),        \
                                        _mm256_and_si256(qh, m30)),                            \
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),        \
                                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30))};     \
                    for (int g = 0; g < 4; g++) {                                              \
                        x[4 * h + g] = _mm256_sub_epi8(c[g], _mm256_set1_epi8(32));            \
                        u[4 * h + g] = _mm256_sign_epi8(x[4 * h + g], x[4 * h + g]);           \
                        float s0 = d * (float)(int8_t)w[192 + k6_scale(4 * h + g, 0)];         \
                        float s1 = d * (float)(int8_t)w[192 + k6_scale(4 * h + g, 16)];        \
                        scale[4 * h + g] = _mm256_setr_ps(s0, s0, s0, s0, s1, s1, s1, s1);     \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            _Pragma("GCC unroll 4")                                                            \
            for (uint32_t k = 0; k < n; k++) {                                                 \
                const struct qa *ak = a + k * stride + 8 * i;                                  \
                for (int j = 0; j < 8; j++) {                                                  \
                    __m256i y = _mm256_loadu_si256((const __m256i *)ak[j].q);                  \
                    if (type == GGML_Q6_K)                                                     \
                        y = _mm256_sign_epi8(y, x[j]);                                         \
                    __m256 f = _mm256_cvtepi32_ps(SUM(u[j], y));                               \
                    acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(scale[j], _mm256_set1_ps(ak[j].d)), \
                                             f, acc[k]);                                       \
                    mins[k] += mn[j] * ak[j].s;                                                \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4")                                                                \
        for (uint32_t k = 0; k < n; k++)                                                       \
            out[k * ostride] = hsum8(acc[k]) - mins[k];                                        \
    }                                                                                  \
    DOTS_WRAPPER(dots_q4_k_##ISA, kdots_##ISA, GGML_Q4_K, ATTR, 4)                             \
    DOTS_WRAPPER(dots_q6_k_##ISA, kdots_##ISA, GGML_Q6_K, ATTR, 4)

DEFINE_DOTS(avx2, AVX2, sum_us_avx2)
DOTS_WRAPPER(dots_q4_0_avx2, dots_avx2, GGML_Q4_0, AVX2, 8)
DOTS_WRAPPER(dots_q4_1_avx2, dots_avx2, GGML_Q4_1, AVX2, 8)
DOTS_WRAPPER(dots_q8_0_avx2, dots_avx2, GGML_Q8_0, AVX2, 8)
DEFINE_KDOTS(avx2, AVX2, sum_us_avx2)
DEFINE_KDOTS(vnni, VNNI, sum_us_vnni)
DEFINE_DOTS(vnni, VNNI, sum_us_vnni)

/* The 32-weight blocks with AVX-512 VNNI at full width: two activation rows
 * share a 512-bit register (row 2p in the low half, 2p + 1 in the high),
 * against the unpacked weight block broadcast to both halves; the sign
 * trick's _mm256_sign_epi8, which has no 512-bit form, becomes a masked
 * negation (the lanes where x is 0 have u = 0). Every lane computes what
 * dots_vnni's does, in the same order, and each half is summed by hsum8:
 * the results are dots_vnni's, bit for bit, in half the instructions. n
 * even; an odd row goes to dots_vnni. */
VNNI static inline __attribute__((always_inline)) void dots2_vnni(
    uint32_t type, const uint8_t *w, const struct qa *a, size_t stride, uint32_t nb, uint32_t n,
    float *out, size_t ostride)
{
    __m512 acc[4];
    float mins[8];
    for (int k = 0; k < 4; k++)
        acc[k] = _mm512_setzero_ps();
    for (int k = 0; k < 8; k++)
        mins[k] = 0.0f;
    const size_t bb = block32_bytes(type);
    for (uint32_t i = 0; i < nb; i++, w += bb) {
        __m256i u, x;
        float dw, mw;
        block32_codes(type, w, &u, &x, &dw, &mw);
        const __m512i uu = _mm512_broadcast_i64x4(u);
        const __mmask64 neg = _mm512_movepi8_mask(_mm512_broadcast_i64x4(x));
        _Pragma("GCC unroll 4")
        for (uint32_t p = 0; p < n / 2; p++) {
            const struct qa *a0 = a + 2 * p * stride + i, *a1 = a0 + stride;
            __m512i y = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a0->q)),
                _mm256_loadu_si256((const __m256i *)a1->q), 1);
            if (type != GGML_Q4_1)
                y = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
            __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), uu, y));
            __m512 sc = _mm512_insertf32x8(_mm512_set1_ps(dw * a0->d),
                                           _mm256_set1_ps(dw * a1->d), 1);
            acc[p] = _mm512_fmadd_ps(sc, f, acc[p]);
            mins[2 * p] += mw * a0->s;
            mins[2 * p + 1] += mw * a1->s;
        }
    }
    _Pragma("GCC unroll 4")
    for (uint32_t p = 0; p < n / 2; p++) {
        out[2 * p * ostride] = hsum8(_mm512_castps512_ps256(acc[p])) + mins[2 * p];
        out[(2 * p + 1) * ostride] = hsum8(_mm512_extractf32x8_ps(acc[p], 1)) + mins[2 * p + 1];
    }
}

/* dots_fn wrappers: eight rows as four pairs, then a pair of pairs, then a
 * pair, then the odd row by dots_vnni */
#define DOTS2_WRAPPER(NAME, TYPE)                                                              \
    VNNI static void NAME(const uint8_t *w, const struct qa *a, size_t stride, uint32_t nb,    \
                          uint32_t n, float *out, size_t ostride)                              \
    {                                                                                          \
        uint32_t k = 0;                                                                        \
        for (; k + 8 <= n; k += 8)                                                             \
            dots2_vnni(TYPE, w, a + k * stride, stride, nb, 8, out + k * ostride, ostride);    \
        if (k + 4 <= n) {                                                                      \
            dots2_vnni(TYPE, w, a + k * stride, stride, nb, 4, out + k * ostride, ostride);    \
            k += 4;                                                                            \
        }                                                                                      \
        if (k + 2 <= n) {                                                                      \
            dots2_vnni(TYPE, w, a + k * stride, stride, nb, 2, out + k * ostride, ostride);    \
            k += 2;                                                                            \
        }                                                                                      \
        if (k < n)                                                                             \
            dots_vnni(TYPE, w, a + k * stride, stride, nb, 1, out + k * ostride, ostride);     \
    }
DOTS2_WRAPPER(dots2_q4_0_vnni, GGML_Q4_0)
DOTS2_WRAPPER(dots2_q4_1_vnni, GGML_Q4_1)
DOTS2_WRAPPER(dots2_q8_0_vnni, GGML_Q8_0)

/* Four weight rows (rb bytes apart) times eight activation rows at once, the
 * tile a batch's products spend their time in: each block's activations
 * (four row pairs) and their scales are loaded once for the four weight
 * rows, each weight block unpacked once for the eight activation rows. Per
 * lane the arithmetic of dots2_vnni (the scale dw x d, then one fma), so the
 * results are its bits. out[w + k * ostride] for weight row w, activation
 * row k. */
enum { TILE_W = 4 }; /* weight rows a tile (3 and 2 measured slower at batch 32) */
VNNI static void tile4x8_vnni(uint32_t type, const uint8_t *w, size_t rb, const struct qa *a,
                              size_t stride, uint32_t nb, float *out, size_t ostride)
{
    __m512 acc[TILE_W][4];
    __m256 mins[TILE_W];
    for (int r = 0; r < TILE_W; r++) {
        mins[r] = _mm256_setzero_ps();
        for (int p = 0; p < 4; p++)
            acc[r][p] = _mm512_setzero_ps();
    }
    const size_t bb = block32_bytes(type);
    for (uint32_t i = 0; i < nb; i++) {
        __m512i y[4];
        __m512 d[4];
        for (int p = 0; p < 4; p++) {
            const struct qa *a0 = a + 2 * p * stride + i, *a1 = a0 + stride;
            y[p] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a0->q)),
                _mm256_loadu_si256((const __m256i *)a1->q), 1);
            d[p] = _mm512_insertf32x8(_mm512_set1_ps(a0->d), _mm256_set1_ps(a1->d), 1);
        }
        const struct qa *ai = a + i;
        const __m256 s8 = type == GGML_Q4_1
                              ? _mm256_setr_ps(ai[0].s, ai[stride].s, ai[2 * stride].s,
                                               ai[3 * stride].s, ai[4 * stride].s,
                                               ai[5 * stride].s, ai[6 * stride].s,
                                               ai[7 * stride].s)
                              : _mm256_setzero_ps();
        _Pragma("GCC unroll 4")
        for (int r = 0; r < TILE_W; r++) {
            __m256i u, x;
            float dws, mw;
            block32_codes(type, w + r * rb + i * bb, &u, &x, &dws, &mw);
            const __m512 dw = _mm512_set1_ps(dws);
            if (type == GGML_Q4_1)
                mins[r] = _mm256_fmadd_ps(_mm256_set1_ps(mw), s8, mins[r]);
            const __m512i uu = _mm512_broadcast_i64x4(u);
            const __mmask64 neg = _mm512_movepi8_mask(_mm512_broadcast_i64x4(x));
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++) {
                __m512i yy = type == GGML_Q4_1
                                 ? y[p]
                                 : _mm512_mask_sub_epi8(y[p], neg, _mm512_setzero_si512(), y[p]);
                __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), uu, yy));
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, d[p]), f, acc[r][p]);
            }
        }
    }
    for (int r = 0; r < TILE_W; r++) {
        float m[8];
        _mm256_storeu_ps(m, mins[r]);
        for (int p = 0; p < 4; p++) {
            out[r + 2 * p * ostride] = hsum8(_mm512_castps512_ps256(acc[r][p])) + m[2 * p];
            out[r + (2 * p + 1) * ostride] =
                hsum8(_mm512_extractf32x8_ps(acc[r][p], 1)) + m[2 * p + 1];
        }
    }
}

AVX2 static float dot_f16_avx2(const uint8_t *w, const float *x, uint32_t n)
{
    __m256 acc = _mm256_setzero_ps();
    uint32_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 wf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * j)));
        acc = _mm256_fmadd_ps(wf, _mm256_loadu_ps(x + j), acc);
    }
    float s = hsum8(acc);
    for (; j < n; j++)
        s += fp16_to_float(rd16(w + 2 * j)) * x[j];
    return s;
}
#endif

enum isa { ISA_SCALAR, ISA_AVX2, ISA_VNNI, ISA_AUTO };
static const char *const isa_names[] = {"scalar", "avx2", "avx512vnni", "auto"};
static int isa = -1; /* chosen at the first product */

static int cpu_has(enum isa i)
{
#ifdef QMAT_X86
    __builtin_cpu_init();
    if (i == ISA_AVX2) { /* F16C from CPUID leaf 1 (clang 14 has no "f16c" to ask for) */
        unsigned a, b, c, d;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    }
    if (i == ISA_VNNI)
        return cpu_has(ISA_AVX2) && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return i == ISA_SCALAR;
}

int qmat_set_isa(const char *name, struct alisa_err *e)
{
    for (int i = 0; i <= ISA_AUTO; i++) {
        if (strcmp(name, isa_names[i]) != 0)
            continue;
        if (i == ISA_AUTO) {
            isa = cpu_has(ISA_VNNI) ? ISA_VNNI : cpu_has(ISA_AVX2) ? ISA_AVX2 : ISA_SCALAR;
            return 0;
        }
        if (!cpu_has((enum isa)i))
            return err_set(e, ALISA_EINVAL, "instruction set '%s': this CPU does not have it",
                           name);
        isa = i;
        return 0;
    }
    return err_set(e, ALISA_EINVAL, "instruction set '%s': unknown (scalar, avx2, avx512vnni, "
                   "auto)", name);
}

static void isa_pick(void)
{
    if (isa >= 0)
        return;
    const char *env = getenv("ALISA_CPU_ISA");
    struct alisa_err e = {{0}};
    if (!env || qmat_set_isa(env, &e))
        qmat_set_isa("auto", &e); /* a bad variable falls back to the best */
}

const char *qmat_isa(void)
{
    isa_pick();
    return isa_names[isa];
}

static dots_fn dots_for(uint32_t type)
{
#ifdef QMAT_X86
    if (type == GGML_Q4_K || type == GGML_Q6_K) {
        if (isa == ISA_VNNI)
            return type == GGML_Q4_K ? dots_q4_k_vnni : dots_q6_k_vnni;
        if (isa == ISA_AVX2)
            return type == GGML_Q4_K ? dots_q4_k_avx2 : dots_q6_k_avx2;
    }
    if (isa == ISA_VNNI)
        return type == GGML_Q4_0 ? dots2_q4_0_vnni : type == GGML_Q4_1 ? dots2_q4_1_vnni
                                                                       : dots2_q8_0_vnni;
    if (isa == ISA_AVX2)
        return type == GGML_Q4_0 ? dots_q4_0_avx2 : type == GGML_Q4_1 ? dots_q4_1_avx2
                                                                      : dots_q8_0_avx2;
#endif
    return type == GGML_Q4_0   ? dots_q4_0_scalar
           : type == GGML_Q4_1 ? dots_q4_1_scalar
           : type == GGML_Q8_0 ? dots_q8_0_scalar
           : type == GGML_Q4_K ? dots_q4_k_scalar
                               : dots_q6_k_scalar;
}

/* products below this many multiply-adds stay on one thread: a parallel
 * region costs microseconds, and waking OpenMP's threads between OpenBLAS
 * calls on small FP32 matrices makes the two pools fight over the cores */
#define PAR_MIN_MACS (1u << 17)

void qmat_gemm(float *y, const float *x, const struct qmat *w, uint32_t R, void *scratch)
{
    qmat_gemm_again(y, x, w, R, scratch, 0);
}

int qmat_gemm_again(float *y, const float *x, const struct qmat *w, uint32_t R, void *scratch,
                    int quantised)
{
    const uint32_t rows = w->rows, cols = w->cols;
    if (w->type == GGML_F32) {
        cpu_gemm(y, x, w->data, R, rows, cols);
        return 0;
    }
    isa_pick();
    const uint8_t *base = w->data;
    const size_t rb = w->row_bytes;
    const int par = (uint64_t)rows * R * cols >= PAR_MIN_MACS;
    if (w->type == GGML_F16) {
        float (*dot)(const uint8_t *, const float *, uint32_t) = dot_f16_scalar;
#ifdef QMAT_X86
        if (isa != ISA_SCALAR)
            dot = dot_f16_avx2;
#endif
#pragma omp parallel for schedule(static) if (par)
        for (uint32_t o = 0; o < rows; o++)
            for (uint32_t r = 0; r < R; r++)
                y[(size_t)r * rows + o] = dot(base + o * rb, x + (size_t)r * cols, cols);
        return 0;
    }
    const uint32_t nb = cols / QK;
    struct qa *xa = scratch;
    if (!quantised) {
#pragma omp parallel for schedule(static) \
    if (par && cpu_rows_parallel(R, (size_t)R * cols, CPU_ROWS_PARALLEL_MIN))
        for (uint32_t r = 0; r < R; r++)
            quantize_row(x + (size_t)r * cols, xa + (size_t)r * nb, nb);
    }
    const dots_fn dots = dots_for(w->type);
#ifdef QMAT_X86
    /* a batch's 32-weight blocks with AVX-512 VNNI: tiles of four weight
     * rows by eight activation rows, the rest row by row; from 16 rows on
     * (at 8 the row-by-row products measured faster: 297 against 277 tok/s
     * at batch 8, 305 against 337 at batch 32, SmolLM2, one thread) */
    if (isa == ISA_VNNI && R >= 16 &&
        (w->type == GGML_Q4_0 || w->type == GGML_Q4_1 || w->type == GGML_Q8_0)) {
        const uint32_t R8 = R / 8 * 8;
#pragma omp parallel for schedule(static) if (par)
        for (uint32_t o = 0; o < rows / TILE_W * TILE_W; o += TILE_W) {
            for (uint32_t r = 0; r < R8; r += 8)
                tile4x8_vnni(w->type, base + o * rb, rb, xa + (size_t)r * nb, nb, nb,
                             y + (size_t)r * rows + o, rows);
            for (uint32_t k = 0; k < TILE_W && R8 < R; k++)
                dots(base + (o + k) * rb, xa + (size_t)R8 * nb, nb, nb, R - R8,
                     y + (size_t)R8 * rows + o + k, rows);
        }
        for (uint32_t o = rows / TILE_W * TILE_W; o < rows; o++)
            for (uint32_t r = 0; r < R; r += 8)
                dots(base + o * rb, xa + (size_t)r * nb, nb, nb, R - r < 8 ? R - r : 8,
                     y + (size_t)r * rows + o, rows);
        return 1;
    }
#endif
#pragma omp parallel for schedule(static) if (par)
    for (uint32_t o = 0; o < rows; o++)
        for (uint32_t r = 0; r < R; r += 8)
            dots(base + o * rb, xa + (size_t)r * nb, nb, nb, R - r < 8 ? R - r : 8,
                 y + (size_t)r * rows + o, rows);
    return 1;
}
