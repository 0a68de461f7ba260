/* qmat.h: the quantised weight products.
 * - Exact cases worked by hand: scales of 1 and activations that are
 *   integers with a largest magnitude of 127 quantise to themselves, so the
 *   product is an integer sum written out here.
 * - Random blocks against the FP32 product of the dequantised weights, within
 *   the error the 8-bit activations bring (half a quantisation step a weight,
 *   bounded by sum |w| max|x| / 254 a block, plus the binary16 scales).
 * - Every instruction set this CPU has gives the scalar form's result up to
 *   the float accumulation order, one row or many, on one thread or several.
 * - The k-quants (Q4_K, Q6_K) dequantise exactly as gguf-py, llama.cpp's
 *   own numpy reader, does (tests/golden/kquants.txt, with its script).
 * - Unsupported types and partial blocks are refused.
 * - A NaN or infinite activation makes its products NaN, never undefined
 *   behaviour; a scale that is not finite is found by block (issue 48). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_ops.h"
#include "fp16.h"
#include "gguf.h"
#include "qmat.h"

static const uint32_t types[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q8_0, GGML_Q4_K, GGML_Q6_K, GGML_F16};

static void put16(uint8_t *p, float v)
{
    uint16_t h = fp16_from_float(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

static uint32_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

static float rndf(uint64_t *s) { return (float)rnd(s) / 2147483648.0f - 1.0f; } /* [-1, 1) */

/* rows x cols random weights of type t into buf (rows * row_bytes). */
static void fill(uint32_t t, uint8_t *buf, uint32_t rows, uint32_t cols, uint64_t *s)
{
    size_t rb = qmat_row_bytes(t, cols);
    for (uint32_t r = 0; r < rows; r++) {
        uint8_t *p = buf + r * rb;
        if (t == GGML_F16) {
            for (uint32_t j = 0; j < cols; j++)
                put16(p + 2 * j, rndf(s));
            continue;
        }
        if (t == GGML_Q4_K || t == GGML_Q6_K) { /* random codes, plausible scales */
            for (size_t j = 0; j < rb; j++)
                p[j] = (uint8_t)rnd(s);
            for (uint32_t b = 0; b < cols / 256; b++) {
                uint8_t *blk = p + b * (t == GGML_Q4_K ? 144 : 210);
                if (t == GGML_Q4_K) {
                    put16(blk, 0.002f + 0.004f * (rndf(s) + 1.0f));
                    put16(blk + 2, 0.002f + 0.002f * (rndf(s) + 1.0f));
                } else {
                    put16(blk + 208, 0.0005f + 0.001f * (rndf(s) + 1.0f));
                }
            }
            continue;
        }
        size_t bb = t == GGML_Q4_0 ? 18 : t == GGML_Q4_1 ? 20 : 34;
        for (uint32_t b = 0; b < cols / 32; b++, p += bb) {
            put16(p, 0.01f + 0.05f * (rndf(s) + 1.0f));
            size_t at = 2;
            if (t == GGML_Q4_1) {
                put16(p + 2, 0.3f * rndf(s));
                at = 4;
            }
            for (size_t j = at; j < bb; j++)
                p[j] = (uint8_t)rnd(s);
        }
    }
}

static void set_isa(const char *name)
{
    struct alisa_err e = {{0}};
    assert_int_equal(qmat_set_isa(name, &e), 0);
}

/* The instruction sets this CPU has (scalar first). */
static int isas(const char **out)
{
    static const char *const all[] = {"scalar", "avx2", "avx512vnni"};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        struct alisa_err e = {{0}};
        if (qmat_set_isa(all[i], &e) == 0)
            out[n++] = all[i];
    }
    return n;
}

static void test_hand_worked_products_are_exact(void **state)
{
    (void)state;
    const char *names[3];
    int n_isa = isas(names);
    /* x: 64 integers, max |x| = 127 in each block of 32, so d = 1 and the
     * codes are x itself */
    float x[64];
    for (int j = 0; j < 64; j++)
        x[j] = (float)((j * 37) % 255 - 127);
    x[5] = 127.0f;
    x[40] = -127.0f;
    uint8_t q40[2][18], q41[2][20], q80[2][34];
    double want40 = 0, want41 = 0, want80 = 0;
    for (int b = 0; b < 2; b++) {
        put16(q40[b], 1.0f);
        put16(q41[b], 0.5f);      /* d = 0.5, m = -2 */
        put16(q41[b] + 2, -2.0f);
        put16(q80[b], 1.0f);
        for (int j = 0; j < 16; j++) {
            int lo = (j * 5 + b) % 16, hi = (j * 11 + 3) % 16;
            q40[b][2 + j] = q41[b][4 + j] = (uint8_t)(lo | hi << 4);
            want40 += (lo - 8) * x[b * 32 + j] + (hi - 8) * x[b * 32 + j + 16];
            want41 += (0.5 * lo - 2) * x[b * 32 + j] + (0.5 * hi - 2) * x[b * 32 + j + 16];
        }
        for (int j = 0; j < 32; j++) {
            int v = (j * 29 + b * 7) % 255 - 127;
            q80[b][2 + j] = (uint8_t)(int8_t)v;
            want80 += v * x[b * 32 + j];
        }
    }
    /* activations off the grid round to the nearest code (ggml's roundf):
     * x + 0.6 becomes x + 1 for 0 <= x < 126, the block maxima stay */
    float xr[64];
    double want_round = 0;
    for (int j = 0; j < 64; j++) {
        int up = x[j] >= 0 && x[j] < 126;
        xr[j] = up ? x[j] + 0.6f : x[j];
        want_round += (double)(int8_t)q80[j / 32][2 + j % 32] * (up ? x[j] + 1 : x[j]);
    }
    /* exact halves round away from zero, as roundf does: x + 0.5 becomes
     * x + 1 for 0 <= x < 126 and x - 0.5 becomes x - 1 for -126 < x < 0 */
    float xt[64];
    double want_tie = 0;
    for (int j = 0; j < 64; j++) {
        int up = x[j] >= 0 && x[j] < 126, down = x[j] < 0 && x[j] > -126;
        xt[j] = up ? x[j] + 0.5f : down ? x[j] - 0.5f : x[j];
        want_tie += (double)(int8_t)q80[j / 32][2 + j % 32] * (up ? x[j] + 1 : down ? x[j] - 1 : x[j]);
    }
    unsigned char scratch[2 * QMAT_SCRATCH_PER_BLOCK];
    for (int i = 0; i < n_isa; i++) {
        set_isa(names[i]);
        struct qmat w;
        float y;
        assert_int_equal(qmat_init(&w, GGML_Q4_0, 1, 64, q40), 0);
        qmat_gemm(&y, x, &w, 1, scratch);
        assert_float_equal(y, want40, 0.0);
        assert_int_equal(qmat_init(&w, GGML_Q4_1, 1, 64, q41), 0);
        qmat_gemm(&y, x, &w, 1, scratch);
        assert_float_equal(y, want41, 0.0);
        assert_int_equal(qmat_init(&w, GGML_Q8_0, 1, 64, q80), 0);
        qmat_gemm(&y, x, &w, 1, scratch);
        assert_float_equal(y, want80, 0.0);
        qmat_gemm(&y, xr, &w, 1, scratch);
        assert_float_equal(y, want_round, 0.0);
        qmat_gemm(&y, xt, &w, 1, scratch);
        assert_float_equal(y, want_tie, 0.0);
    }
    set_isa("auto");
}

/* y (R, rows) by every ISA; first against the dequantised FP32 product
 * within the activation quantisation's bound, then each ISA against
 * scalar. */
static void check_type(uint32_t t, uint32_t rows, uint32_t cols, uint32_t R, uint64_t seed)
{
    uint64_t s = seed;
    size_t rb = qmat_row_bytes(t, cols);
    uint8_t *buf = malloc(rows * rb);
    float *x = malloc((size_t)R * cols * sizeof *x), *wf = malloc((size_t)rows * cols * sizeof *wf);
    float *y = malloc((size_t)R * rows * sizeof *y), *y0 = malloc((size_t)R * rows * sizeof *y0);
    void *scratch = malloc(qmat_scratch_bytes(cols, R));
    assert_true(buf && x && wf && y && y0 && scratch);
    fill(t, buf, rows, cols, &s);
    for (size_t i = 0; i < (size_t)R * cols; i++)
        x[i] = 3.0f * rndf(&s);
    struct qmat w;
    assert_int_equal(qmat_init(&w, t, rows, cols, buf), 0);
    for (uint32_t r = 0; r < rows; r++)
        qmat_row(&w, r, wf + (size_t)r * cols);
    const char *names[3];
    int n_isa = isas(names);
    float *y_avx2 = malloc((size_t)R * rows * sizeof *y_avx2);
    assert_non_null(y_avx2);
    for (int i = 0; i < n_isa; i++) {
        set_isa(names[i]);
        qmat_gemm(i ? y : y0, x, &w, R, scratch);
        /* the 512-bit VNNI products of the 32-weight blocks sum the same
         * integers and scale them in the same order as AVX2's: equal bits */
        if (strcmp(names[i], "avx2") == 0)
            memcpy(y_avx2, y, (size_t)R * rows * sizeof *y);
        if (strcmp(names[i], "avx512vnni") == 0 && i == 2 && t != GGML_Q4_K && t != GGML_Q6_K &&
            t != GGML_F16 && memcmp(y, y_avx2, (size_t)R * rows * sizeof *y) != 0)
            fail_msg("%s: avx512vnni differs from avx2 in its bits", ggml_type_name(t));
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t o = 0; o < rows; o++) {
                const float *xr = x + (size_t)r * cols, *wr = wf + (size_t)o * cols;
                double exact = 0, bound = 0, mag = 0;
                const uint32_t nblk = t == GGML_F16 ? 1 : cols / 32;
                for (uint32_t b = 0; b < nblk; b++) {
                    uint32_t n = t == GGML_F16 ? cols : 32, j0 = b * 32;
                    double amax = 0, sw = 0, sx = 0;
                    for (uint32_t j = j0; j < j0 + n; j++) {
                        exact += (double)wr[j] * xr[j];
                        mag += fabs((double)wr[j] * xr[j]);
                        amax = fmax(amax, fabs(xr[j]));
                        sw += fabs(wr[j]);
                        sx += fabs(xr[j]);
                    }
                    double wmax = 0;
                    for (uint32_t j = j0; j < j0 + n; j++)
                        wmax = fmax(wmax, fabs(wr[j]));
                    if (t != GGML_F16) /* half a step, the binary16 d and s (the min terms) */
                        bound += sw * amax / 254 * (1 + 1e-3) + sw * amax * 2e-3 +
                                 (t == GGML_Q4_1 ? 0.3 : 2 * wmax) * sx * 2e-3;
                }
                bound += 1e-5 * mag; /* float accumulation */
                float got = (i ? y : y0)[(size_t)r * rows + o];
                if (fabs(got - exact) > bound)
                    fail_msg("%s (%s) row %u col %u: %.6g, FP32 %.6g, bound %.3g",
                             ggml_type_name(t), names[i], r, o, got, exact, bound);
                if (i && fabs(got - y0[(size_t)r * rows + o]) > 1e-5 * mag + 1e-6)
                    fail_msg("%s: %s %.8g against scalar %.8g", ggml_type_name(t), names[i], got,
                             y0[(size_t)r * rows + o]);
            }
    }
    set_isa("auto");
    free(buf), free(x), free(wf), free(y), free(y0), free(scratch), free(y_avx2);
}

static void test_random_blocks_within_quantisation_error_every_isa(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_type(types[i], 7, 512, 1, 11 + i);  /* one row: below the parallel cut */
        check_type(types[i], 130, 256, 5, 23 + i); /* a batch, on every thread (> 2^17 MACs) */
        check_type(types[i], 40, 512, 13, 37 + i); /* tiles of 8, 4 and 1 rows */
        check_type(types[i], 40, 256, 7, 41 + i);  /* and of 4, 2 and 1 */
        /* a batch in tiles of 4 weight rows by 8 activation rows, with 3
         * activation rows and 2 weight rows left over */
        check_type(types[i], 42, 256, 19, 43 + i);
    }
}

static void test_threads_give_the_same_product(void **state)
{
    (void)state;
    uint64_t s = 5;
    const uint32_t rows = 600, cols = 128, R = 3; /* 230,400 MACs: above qmat's parallel cut */
    size_t rb = qmat_row_bytes(GGML_Q4_1, cols);
    uint8_t *buf = malloc(rows * rb);
    float x[3 * 128], y1[3 * 600], y2[3 * 600];
    unsigned char scratch[3 * 4 * QMAT_SCRATCH_PER_BLOCK];
    fill(GGML_Q4_1, buf, rows, cols, &s);
    for (int i = 0; i < 3 * 128; i++)
        x[i] = rndf(&s);
    struct qmat w;
    assert_int_equal(qmat_init(&w, GGML_Q4_1, rows, cols, buf), 0);
    cpu_threads_set(1);
    qmat_gemm(y1, x, &w, R, scratch);
    cpu_threads_set(4);
    qmat_gemm(y2, x, &w, R, scratch);
    cpu_threads_set(0);
    assert_memory_equal(y1, y2, sizeof y1); /* each output is one thread's sum */
    free(buf);
}

/* qmat_gemm_again: a second product on the same activations reuses their
 * quantisation (the layer sequence's K and V after Q) and equals the
 * product quantised afresh, bit for bit; when told the scratch holds them
 * while it holds another input's, it computes with those (so the flag, not
 * a check, decides); an F32 matrix reads x as it is and says the scratch
 * holds nothing (0). */
static void test_gemm_again_reuses_the_quantised_activations(void **state)
{
    (void)state;
    uint64_t s = 9;
    const uint32_t rows = 40, cols = 128, R = 3;
    size_t rb = qmat_row_bytes(GGML_Q4_1, cols);
    uint8_t *b1 = malloc(rows * rb), *b2 = malloc(rows * rb);
    float x[3 * 128], other[3 * 128], f32[40 * 128], fresh[3 * 40], again[3 * 40], stale[3 * 40];
    unsigned char scratch[3 * 4 * QMAT_SCRATCH_PER_BLOCK];
    fill(GGML_Q4_1, b1, rows, cols, &s);
    fill(GGML_Q4_1, b2, rows, cols, &s);
    for (int i = 0; i < 3 * 128; i++) {
        x[i] = rndf(&s);
        other[i] = rndf(&s);
    }
    for (int i = 0; i < 40 * 128; i++)
        f32[i] = rndf(&s);
    struct qmat q, k, wf;
    assert_int_equal(qmat_init(&q, GGML_Q4_1, rows, cols, b1), 0);
    assert_int_equal(qmat_init(&k, GGML_Q4_1, rows, cols, b2), 0);
    assert_int_equal(qmat_init(&wf, GGML_F32, rows, cols, f32), 0);
    qmat_gemm(fresh, x, &k, R, scratch);
    assert_int_equal(qmat_gemm_again(again, x, &q, R, scratch, 0), 1);
    assert_int_equal(qmat_gemm_again(again, x, &k, R, scratch, 1), 1);
    assert_memory_equal(again, fresh, sizeof fresh);
    /* the scratch still holds x's: `other` is not read */
    assert_int_equal(qmat_gemm_again(stale, other, &k, R, scratch, 1), 1);
    assert_memory_equal(stale, fresh, sizeof fresh);
    assert_int_equal(qmat_gemm_again(stale, x, &wf, R, scratch, 0), 0);
    free(b1);
    free(b2);
}

static uint8_t hexval(char c) { return (uint8_t)(c <= '9' ? c - '0' : c - 'a' + 10); }

static void test_kquants_dequantise_as_gguf_py(void **state)
{
    (void)state;
    FILE *f = fopen(ALISA_GOLDEN_DIR "/kquants.txt", "r");
    assert_non_null(f);
    static char line[16384];
    uint8_t blk[256];
    float want[256], got[256];
    int blocks[2] = {0, 0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char name[8];
        assert_int_equal(sscanf(line, "%7s", name), 1);
        uint32_t t = strcmp(name, "Q4_K") == 0 ? GGML_Q4_K : GGML_Q6_K;
        size_t size = t == GGML_Q4_K ? 144 : 210;
        const char *hex = line + 5;
        for (size_t i = 0; i < size; i++)
            blk[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
        assert_non_null(fgets(line, sizeof line, f));
        char *p = line, *end;
        for (int i = 0; i < 256; i++, p = end)
            want[i] = strtof(p, &end);
        qmat_dequant(t, blk, got, 256);
        for (int i = 0; i < 256; i++)
            if (got[i] != want[i])
                fail_msg("%s block %d weight %d: %.9g, gguf-py %.9g", name,
                         blocks[t == GGML_Q6_K], i, got[i], want[i]);
        blocks[t == GGML_Q6_K]++;
    }
    fclose(f);
    assert_int_equal(blocks[0], 3);
    assert_int_equal(blocks[1], 3);
}

static void test_refuses_types_and_partial_blocks(void **state)
{
    (void)state;
    struct qmat w;
    char buf[64] = {0};
    assert_int_equal(qmat_init(&w, 13 /* Q5_K */, 1, 256, buf), ALISA_EINVAL);
    assert_int_equal(qmat_init(&w, GGML_Q4_K, 1, 128, buf), ALISA_EINVAL);
    assert_int_equal(qmat_init(&w, GGML_Q4_1, 1, 48, buf), ALISA_EINVAL);
    assert_int_equal(qmat_init(&w, GGML_Q4_1, 0, 32, buf), ALISA_EINVAL);
    assert_int_equal(qmat_init(&w, GGML_F16, 1, 3, buf), 0); /* no blocks */
    assert_int_equal(qmat_row_bytes(GGML_Q4_1, 64), 40);
    assert_int_equal(qmat_row_bytes(GGML_Q8_0, 64), 68);
    struct alisa_err e = {{0}};
    assert_int_equal(qmat_set_isa("sse9", &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "sse9"));
}

/* Issue 48: a NaN activation reached (int) in quantize_row (undefined),
 * then an overflowing integer sum, and the product came out as a finite
 * number. Now a block holding a NaN or an infinity makes every product it
 * enters NaN, as FP32 arithmetic would; the other rows of the batch are
 * untouched; activations so small that their binary16 scale is 0 (1e-38,
 * where 1 / d overflowed to infinity) give 0. Every type, every ISA. */
static void test_nonfinite_activations_give_nan_products_not_undefined_behaviour(void **state)
{
    (void)state;
    const char *names[3];
    int n_isa = isas(names);
    enum { ROWS = 5, COLS = 256, R = 4 };
    static uint8_t buf[ROWS * 210 * COLS / 256 + ROWS * 34 * COLS / 32];
    float x[R * COLS], y[R * ROWS], y0[ROWS];
    static unsigned char scratch[R * COLS / 32 * QMAT_SCRATCH_PER_BLOCK];
    for (size_t k = 0; k + 1 < sizeof types / sizeof types[0]; k++) { /* not F16: no blocks */
        uint64_t s = 3 + k;
        fill(types[k], buf, ROWS, COLS, &s);
        struct qmat w;
        assert_int_equal(qmat_init(&w, types[k], ROWS, COLS, buf), 0);
        for (int j = 0; j < COLS; j++) {
            x[j] = x[COLS + j] = x[2 * COLS + j] = rndf(&s);
            x[3 * COLS + j] = 1e-38f;
        }
        x[COLS + 5] = NAN;
        x[2 * COLS + 200] = INFINITY;
        for (int i = 0; i < n_isa; i++) {
            set_isa(names[i]);
            qmat_gemm(y0, x, &w, 1, scratch);
            qmat_gemm(y, x, &w, R, scratch);
            for (int o = 0; o < ROWS; o++) {
                const char *t = ggml_type_name(types[k]);
                if (fabsf(y[o] - y0[o]) > 1e-5f * fabsf(y0[o]) + 1e-6f)
                    fail_msg("%s (%s) output %d: %g beside the bad rows, %g alone", t, names[i],
                             o, y[o], y0[o]);
                if (!isnan(y[ROWS + o]) || !isnan(y[2 * ROWS + o]))
                    fail_msg("%s (%s) output %d: %g after a NaN, %g after an infinity (NaN "
                             "expected)", t, names[i], o, y[ROWS + o], y[2 * ROWS + o]);
                if (y[3 * ROWS + o] != 0.0f)
                    fail_msg("%s (%s) output %d: %g from activations of 1e-38", t, names[i], o,
                             y[3 * ROWS + o]);
            }
        }
    }
    set_isa("auto");
}

/* qmat_first_nonfinite finds the first block whose binary16 scale (or the
 * Q4_1 and Q4_K minimum) is an infinity or a NaN, and for F32 and F16 the
 * first such weight, reading the layouts of ggml-common.h. */
static void test_first_nonfinite_names_the_block_whose_scale_is_not_finite(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        size_t block_bytes, block_weights, at[2]; /* the scales' offsets (at[1] 0: none) */
    } rows[] = {
        {GGML_F32, 4, 1, {0, 0}},     {GGML_F16, 2, 1, {0, 0}},
        {GGML_Q4_0, 18, 32, {0, 0}},  {GGML_Q4_1, 20, 32, {0, 2}},
        {GGML_Q8_0, 34, 32, {0, 0}},  {GGML_Q4_K, 144, 256, {0, 2}},
        {GGML_Q6_K, 210, 256, {208, 0}},
    };
    enum { COLS = 1024 };
    static uint8_t buf[COLS * 4];
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const uint32_t t = rows[k].type;
        uint64_t s = 17 + k;
        if (t == GGML_F32)
            for (int j = 0; j < COLS; j++) {
                float v = rndf(&s);
                memcpy(buf + 4 * j, &v, 4);
            }
        else
            fill(t, buf, 1, COLS, &s);
        assert_int_equal(qmat_block_weights(t), rows[k].block_weights);
        assert_int_equal(qmat_first_nonfinite(t, buf, COLS), -1);
        for (int a = 0; a < 2 && (a == 0 || rows[k].at[1]); a++)
            for (int inf = 0; inf < 2; inf++) {
                uint8_t *p = buf + 2 * rows[k].block_bytes + rows[k].at[a], keep[4];
                memcpy(keep, p, 4);
                if (t == GGML_F32) {
                    float v = inf ? -INFINITY : NAN;
                    memcpy(p, &v, 4);
                } else {
                    put16(p, inf ? INFINITY : NAN);
                }
                if (qmat_first_nonfinite(t, buf, COLS) != 2)
                    fail_msg("%s: scale %d set to %s, found at block %lld, not 2",
                             ggml_type_name(t), a, inf ? "inf" : "nan",
                             (long long)qmat_first_nonfinite(t, buf, COLS));
                memcpy(p, keep, 4);
            }
    }
    assert_int_equal(qmat_first_nonfinite(13 /* Q5_K */, buf, 256), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked_products_are_exact),
        cmocka_unit_test(test_random_blocks_within_quantisation_error_every_isa),
        cmocka_unit_test(test_threads_give_the_same_product),
        cmocka_unit_test(test_gemm_again_reuses_the_quantised_activations),
        cmocka_unit_test(test_kquants_dequantise_as_gguf_py),
        cmocka_unit_test(test_refuses_types_and_partial_blocks),
        cmocka_unit_test(test_nonfinite_activations_give_nan_products_not_undefined_behaviour),
        cmocka_unit_test(test_first_nonfinite_names_the_block_whose_scale_is_not_finite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
