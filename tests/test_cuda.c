/* The CUDA backend against the CPU backend as oracle (STYLE.md): every
 * kernel on random data against cpu_ops.h, kvstore.h's INT8 arithmetic and
 * selection.h's fixed point (tolerance atol + rtol |ref|, the first
 * mismatches printed), then whole models: greedy decoding on stories260K and
 * SmolLM2-135M picks the CPU backend's tokens for 64 steps (bar near ties of
 * the CPU's own logits) with logits within tolerance, dense and tiered
 * (strided selection under ALISA placement with a device arena small enough
 * for phases II and III), attention rows included, the prompt run position by position and as
 * one chunk, and chunks after the prompt; rows read by the device from
 * pinned host memory (the tiered loads) byte for byte; the pipelined step (llm_state_pipeline: CUDA graph,
 * layers planned ahead) bitwise equal to the eager one, plans included;
 * and the greedy tokens taken on the device (llm_forward_greedy) equal to
 * the host's argmax of the same logits.
 *
 * Every test but the first (the CUDA module opens) skips when there is no CUDA device (this program is built
 * whenever nvcc is, so the CUDA code always compiles); with a device and
 * CI=true a missing model fails.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "cpu_ops.h"
#include "device.h"
#include "fp16.h"
#include "kernels.h"
#include "kvstore.h"
#include "model.h"
#include "selection.h"
#include "testexec.h"
#include "testutil.h"

static void need_device(void)
{
    struct device_info d;
    device_probe(&d);
    if (d.n_devices > 0)
        return;
    print_message("skipped: %s\n", d.note);
    tu_skip();
}

/* Runs on every machine: the CUDA module (device.h) opens and hands over
 * the backend, so a missing symbol or a stale module fails here, not as a
 * "no device" skip on a machine that has one. */
static void test_cuda_module_opens_and_gives_the_backend(void **state)
{
    (void)state;
    struct device_info d;
    device_probe(&d);
    assert_int_equal(d.cuda_built, 1);
    assert_null(strstr(d.note, "module"));
    const struct backend_ops *ops = NULL;
    char why[256] = "";
    assert_int_equal(device_cuda_backend(&ops, why, sizeof why), 0);
    assert_ptr_equal(ops, &backend_cuda);
    assert_string_equal(ops->name, "cuda");
}

static uint32_t seed = 2024;

static float rnd(void) /* uniform in [-1, 1) */
{
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 8388608.0f - 1.0f;
}

static float *rnd_vec(size_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * rnd();
    return x;
}

static void *up(const void *h, size_t bytes)
{
    void *d = NULL;
    assert_int_equal(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    if (h && bytes)
        assert_int_equal(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void down(void *h, const void *d, size_t bytes)
{
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Fails naming the first mismatches when any |got - ref| > atol + rtol |ref|. */
static void check_close(const char *what, const float *got, const float *ref, size_t n, float atol,
                        float rtol)
{
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        worst = d > worst ? d : worst;
        if (!(d <= atol + rtol * fabs(ref[i]))) {
            if (bad < 5)
                print_message("%s[%zu]: cuda %.9g, cpu %.9g\n", what, i, got[i], ref[i]);
            bad++;
        }
    }
    if (bad)
        fail_msg("%s: %zu of %zu values off (largest difference %g)", what, bad, n, worst);
}

static void test_cuda_fp16_narrowing_and_embedding_equal_the_cpu(void **state)
{
    (void)state;
    need_device();
    const uint32_t V = 50, d = 96, R = 4, toks[4] = {3, 49, 0, 3};
    float *emb = rnd_vec((size_t)V * d, 4.0f);
    uint16_t *h16 = malloc((size_t)V * d * sizeof *h16), *ref16 = malloc((size_t)V * d * sizeof *ref16);
    float *d_emb = up(emb, (size_t)V * d * sizeof(float));
    uint16_t *d16 = up(NULL, (size_t)V * d * sizeof *d16);
    assert_int_equal(kern_f32_to_f16(d16, d_emb, (size_t)V * d, 0), cudaSuccess);
    down(h16, d16, (size_t)V * d * sizeof *h16);
    for (size_t i = 0; i < (size_t)V * d; i++)
        ref16[i] = fp16_from_float(emb[i]);
    assert_memory_equal(h16, ref16, (size_t)V * d * sizeof *h16);
    uint32_t *d_tok = up(toks, sizeof toks);
    float *d_x = up(NULL, (size_t)R * d * sizeof(float)), *x = malloc((size_t)R * d * sizeof *x);
    assert_int_equal(kern_embed(d_x, d16, d_tok, R, d, 0), cudaSuccess);
    down(x, d_x, (size_t)R * d * sizeof *x);
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t j = 0; j < d; j++)
            assert_true(x[r * d + j] == fp16_to_float(ref16[(size_t)toks[r] * d + j]));
    cudaFree(d_emb); cudaFree(d16); cudaFree(d_tok); cudaFree(d_x);
    free(emb); free(h16); free(ref16); free(x);
}

/* An FP16 output a kernel wrote beside its FP32 one equals the FP32 one
 * narrowed (kern_f32_to_f16's rounding, fp16_from_float on the host). */
static void narrowed_equal(const char *what, const uint16_t *d16, const float *f, size_t n)
{
    uint16_t *h = malloc(n * sizeof *h);
    down(h, d16, n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        if (h[i] != fp16_from_float(f[i]))
            fail_msg("%s: element %zu is 0x%04x, %g narrowed is 0x%04x", what, i, h[i], f[i],
                     fp16_from_float(f[i]));
    free(h);
}

/* RMSNorm and LayerNorm of R rows of n against the CPU, FP32 and FP16. */
static void norm_rows_equal_the_cpu(uint32_t n, uint32_t R)
{
    float *x = rnd_vec((size_t)R * n, 3.0f), *w = rnd_vec(n, 1.0f), *b = rnd_vec(n, 0.5f);
    float *ref = malloc((size_t)R * n * sizeof *ref), *got = malloc((size_t)R * n * sizeof *got);
    float *d_x = up(x, (size_t)R * n * sizeof(float)), *d_w = up(w, n * sizeof(float));
    float *d_b = up(b, n * sizeof(float)), *d_o = up(NULL, (size_t)R * n * sizeof(float));
    uint16_t *d_o16 = up(NULL, (size_t)R * n * sizeof(uint16_t));
    assert_int_equal(kern_rmsnorm(d_o, d_o16, d_x, d_w, R, n, 1e-5f, 0), cudaSuccess);
    down(got, d_o, (size_t)R * n * sizeof *got);
    for (uint32_t r = 0; r < R; r++)
        cpu_rmsnorm(ref + (size_t)r * n, x + (size_t)r * n, w, n, 1e-5f);
    check_close("rmsnorm", got, ref, (size_t)R * n, 1e-5f, 1e-5f);
    narrowed_equal("rmsnorm's FP16 output", d_o16, got, (size_t)R * n);
    assert_int_equal(kern_layernorm(d_o, d_o16, d_x, d_w, d_b, R, n, 1e-5f, 0), cudaSuccess);
    down(got, d_o, (size_t)R * n * sizeof *got);
    for (uint32_t r = 0; r < R; r++)
        cpu_layernorm(ref + (size_t)r * n, x + (size_t)r * n, w, b, n, 1e-5f);
    check_close("layernorm", got, ref, (size_t)R * n, 1e-5f, 1e-5f);
    narrowed_equal("layernorm's FP16 output", d_o16, got, (size_t)R * n);
    /* in place, without the FP16 output (o is x) */
    assert_int_equal(kern_layernorm(d_x, NULL, d_x, d_w, d_b, R, n, 1e-5f, 0), cudaSuccess);
    down(got, d_x, (size_t)R * n * sizeof *got);
    check_close("layernorm in place", got, ref, (size_t)R * n, 1e-5f, 1e-5f);
    cudaFree(d_x); cudaFree(d_w); cudaFree(d_b); cudaFree(d_o); cudaFree(d_o16);
    free(x); free(w); free(b); free(ref); free(got);
}

static void test_cuda_rmsnorm_rope_swiglu_add_equal_the_cpu(void **state)
{
    (void)state;
    need_device();
    const uint32_t R = 4, n = 576, hd = 64, half = hd / 2, L = 400;
    const uint32_t pos[4] = {0, 5, 77, 399};
    struct llm_config c = {.head_dim = hd, .rope_theta = 10000.0f};
    float *x = rnd_vec((size_t)R * n, 3.0f), *y = rnd_vec((size_t)R * n, 2.0f);
    float *tab = malloc(2 * (size_t)L * half * sizeof *tab);
    llm_rope_tables(&c, L, tab, tab + (size_t)L * half);
    float *ref = malloc((size_t)R * n * sizeof *ref), *got = malloc((size_t)R * n * sizeof *got);
    float *d_x = up(x, (size_t)R * n * sizeof(float));
    float *d_y = up(y, (size_t)R * n * sizeof(float)), *d_tab = up(tab, 2 * (size_t)L * half * sizeof(float));
    uint32_t *d_pos = up(pos, sizeof pos);
    /* the norms: rows kept in registers (576, and OPT-30B's 7,168), one
     * too long for them (n > 8,192) and one not a multiple of 4, which take
     * the plain loops */
    norm_rows_equal_the_cpu(n, R);
    norm_rows_equal_the_cpu(8200, 3);
    norm_rows_equal_the_cpu(90, 2);
    norm_rows_equal_the_cpu(7168, 2);
    uint16_t *d_o16 = up(NULL, (size_t)R * n * sizeof(uint16_t));
    /* RoPE, each row at its own position */
    assert_int_equal(kern_rope(d_x, R, n, hd, d_pos, d_tab, d_tab + (size_t)L * half, 0), cudaSuccess);
    down(got, d_x, (size_t)R * n * sizeof *got);
    memcpy(ref, x, (size_t)R * n * sizeof *ref);
    for (uint32_t r = 0; r < R; r++)
        cpu_rope(ref + (size_t)r * n, n, hd, tab + (size_t)pos[r] * half,
                 tab + (size_t)L * half + (size_t)pos[r] * half);
    check_close("rope", got, ref, (size_t)R * n, 1e-6f, 1e-6f);
    /* SwiGLU, then the residual add, over the rotated rows */
    memcpy(ref, got, (size_t)R * n * sizeof *ref);
    assert_int_equal(kern_swiglu(d_x, d_o16, d_y, (size_t)R * n, 0), cudaSuccess);
    down(got, d_x, (size_t)R * n * sizeof *got);
    narrowed_equal("swiglu's FP16 output", d_o16, got, (size_t)R * n);
    assert_int_equal(kern_add(d_x, d_y, (size_t)R * n, 0), cudaSuccess);
    down(got, d_x, (size_t)R * n * sizeof *got);
    cpu_swiglu(ref, y, (size_t)R * n);
    for (size_t i = 0; i < (size_t)R * n; i++)
        ref[i] += y[i];
    check_close("swiglu+add", got, ref, (size_t)R * n, 1e-6f, 1e-5f);
    cudaFree(d_x); cudaFree(d_y); cudaFree(d_tab); cudaFree(d_pos); cudaFree(d_o16);
    free(x); free(y); free(tab); free(ref); free(got);
}

static void test_cuda_softmax_over_each_rows_count_equals_the_cpu(void **state)
{
    (void)state;
    need_device();
    const uint32_t rows = 6, ld = 300, per = 2, count[3] = {1, 77, 300};
    float *x = rnd_vec((size_t)rows * ld, 8.0f), *got = malloc((size_t)rows * ld * sizeof *got);
    float *d_x = up(x, (size_t)rows * ld * sizeof(float));
    uint32_t *d_c = up(count, sizeof count);
    assert_int_equal(kern_softmax(d_x, rows, ld, d_c, per, 0), cudaSuccess);
    down(got, d_x, (size_t)rows * ld * sizeof *got);
    for (uint32_t i = 0; i < rows; i++) {
        uint32_t n = count[i / per];
        cpu_softmax(x + (size_t)i * ld, n);
        check_close("softmax", got + (size_t)i * ld, x + (size_t)i * ld, n, 1e-7f, 1e-5f);
    }
    cudaFree(d_x); cudaFree(d_c);
    free(x); free(got);
}

/* The few-row products (kern_gemv) against sums in double over the same
 * FP16-rounded matrices and inputs (the kernel narrows x as it reads it):
 * one to eight rows (two outputs a warp, then four), widths that are and
 * are not a multiple of its 256-channel stride, output counts that split a
 * warp's outputs, several matrices a launch (strided weights and outputs,
 * one input), with and without accumulating; and the shapes it refuses,
 * refused without a launch. */
static void test_cuda_gemv_few_rows_equal_the_cpu(void **state)
{
    (void)state;
    need_device();
    const struct { uint32_t R, out, in, count; } shape[] = {
        {1, 5, 8, 1},     {2, 37, 264, 3}, {3, 130, 1000, 2}, {4, 64, 2048, 1},
        {1, 4097, 4096, 2}, {5, 19, 264, 2}, {6, 130, 520, 3}, {7, 33, 8, 1},
        {8, 4099, 1024, 2}};
    for (size_t k = 0; k < sizeof shape / sizeof shape[0]; k++) {
        const uint32_t R = shape[k].R, O = shape[k].out, I = shape[k].in, C = shape[k].count;
        const size_t ws = (size_t)O * I + 8, ys = (size_t)R * O + 3; /* gaps between them */
        uint16_t *w16 = malloc(C * ws * sizeof *w16);
        float *x = rnd_vec((size_t)R * I, 1.0f), *y0 = rnd_vec(C * ys, 2.0f);
        float *got = malloc(C * ys * sizeof *got), *ref = malloc(C * ys * sizeof *ref);
        for (size_t i = 0; i < C * ws; i++)
            w16[i] = fp16_from_float(rnd());
        uint16_t *d_w = up(w16, C * ws * sizeof *w16);
        float *d_x = up(x, (size_t)R * I * sizeof *x);
        for (int acc = 0; acc <= 1; acc++) {
            float *d_y = up(y0, C * ys * sizeof *y0);
            assert_true(kern_gemv_fits(R, I, d_x, d_w, ws));
            assert_int_equal(kern_gemv(d_y, ys, d_x, d_w, ws, C, R, O, I, acc, 0), cudaSuccess);
            down(got, d_y, C * ys * sizeof *got);
            memcpy(ref, y0, C * ys * sizeof *ref); /* the gaps stay as they were */
            for (uint32_t m = 0; m < C; m++)
                for (uint32_t r = 0; r < R; r++)
                    for (uint32_t o = 0; o < O; o++) {
                        double sum = 0;
                        for (uint32_t i = 0; i < I; i++)
                            sum += (double)fp16_to_float(w16[m * ws + (size_t)o * I + i]) *
                                   fp16_to_float(fp16_from_float(x[(size_t)r * I + i]));
                        float *dst = ref + m * ys + (size_t)r * O + o;
                        *dst = (float)(acc ? *dst + sum : sum);
                    }
            char what[64];
            snprintf(what, sizeof what, "gemv %u x %u x %u (%u)%s", R, O, I, C,
                     acc ? " accumulating" : "");
            check_close(what, got, ref, C * ys, 1e-4f, 1e-4f);
            cudaFree(d_y);
        }
        cudaFree(d_w); cudaFree(d_x);
        free(w16); free(x); free(y0); free(got); free(ref);
    }
    float *d_x = up(NULL, 4096 * sizeof(float)), *d_y = up(NULL, 4096 * sizeof(float));
    uint16_t *d_w = up(NULL, 4096 * sizeof(uint16_t));
    assert_false(kern_gemv_fits(0, 64, d_x, d_w, 0));
    assert_false(kern_gemv_fits(KERN_GEMV_ROWS + 1, 64, d_x, d_w, 0));
    assert_false(kern_gemv_fits(1, 60, d_x, d_w, 0));
    assert_false(kern_gemv_fits(1, 64, d_x + 1, d_w, 0));
    assert_false(kern_gemv_fits(1, 64, d_x, d_w + 4, 0));
    assert_false(kern_gemv_fits(1, 64, d_x, d_w, 12));
    assert_int_equal(kern_gemv(d_y, 0, d_x, d_w, 0, 1, KERN_GEMV_ROWS + 1, 8, 64, 0, 0),
                     cudaErrorInvalidValue);
    assert_int_equal(kern_gemv(d_y, 0, d_x, d_w, 0, 1, 1, 8, 60, 0, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* nothing was launched */
    cudaFree(d_x); cudaFree(d_y); cudaFree(d_w);
}

/* The device argmax (kern_argmax_rows) picks llm_argmax's token in every
 * row: random rows of a width that is no multiple of the block, a maximum
 * twice (the first wins), a NaN first (skipped), NaNs before the maximum
 * at the end, all -inf (0), zeros of both signs (the first), all NaNs (0). */
static void test_cuda_argmax_rows_equals_the_hosts(void **state)
{
    (void)state;
    need_device();
    const uint32_t R = 8, n = 1001;
    float *x = rnd_vec((size_t)R * n, 4.0f);
    float *r1 = x + n, *r2 = x + 2 * n, *r3 = x + 3 * n, *r4 = x + 4 * n, *r5 = x + 5 * n;
    float *r7 = x + 7 * n;
    r1[17] = r1[900] = 9.0f;
    r2[0] = NAN;
    r2[5] = 9.0f;
    for (uint32_t i = 0; i < n; i += 3)
        r3[i + 1] = NAN;
    r3[n - 1] = 9.0f;
    for (uint32_t i = 0; i < n; i++) {
        r4[i] = -INFINITY;
        r5[i] = i % 2 ? 0.0f : -0.0f;
        r7[i] = NAN;
    }
    float *d_x = up(x, (size_t)R * n * sizeof *x);
    uint32_t *d_o = up(NULL, R * sizeof(uint32_t)), got[8];
    assert_int_equal(kern_argmax_rows(d_o, d_x, R, n, 0), cudaSuccess);
    down(got, d_o, sizeof got);
    const uint32_t want[8] = {llm_argmax(x, n), 17, 5, n - 1, 0, 0, llm_argmax(x + 6 * n, n), 0};
    for (uint32_t r = 0; r < R; r++) {
        assert_int_equal(llm_argmax(x + (size_t)r * n, n), want[r]);
        if (got[r] != want[r])
            fail_msg("row %u: device argmax %u, host %u", r, got[r], want[r]);
    }
    cudaFree(d_x);
    cudaFree(d_o);
    free(x);
}

/* Gathered grouped-query attention (SmolLM2's heads: 9 query over 3 KV heads
 * of 64) over arena rows listed per query row, and over contiguous rows
 * from a base: output and head-mean weights equal cpu_attend's over the
 * same rows copied out. */
static void attention_case(uint32_t hs, uint32_t ld)
{
    const uint32_t H = 9, KVH = 3, kvd = KVH * hs, A = ld + 56, R = 3;
    const uint32_t count[3] = {1, ld / 4 + 1, ld};
    float *K = rnd_vec((size_t)A * kvd, 1.0f), *V = rnd_vec((size_t)A * kvd, 1.0f);
    float *q = rnd_vec((size_t)R * H * hs, 1.0f);
    /* FP16 copies (the kernels read FP16 K and V), and the values they hold */
    uint16_t *Kh = malloc((size_t)A * kvd * sizeof *Kh), *Vh = malloc((size_t)A * kvd * sizeof *Vh);
    float *Kq = malloc((size_t)A * kvd * sizeof *Kq), *Vq = malloc((size_t)A * kvd * sizeof *Vq);
    for (size_t i = 0; i < (size_t)A * kvd; i++) {
        Kh[i] = fp16_from_float(K[i]), Vh[i] = fp16_from_float(V[i]);
        Kq[i] = fp16_to_float(Kh[i]), Vq[i] = fp16_to_float(Vh[i]);
    }
    for (int mode = 0; mode < 2; mode++) { /* mode 1: base rows, else listed rows */
        const float *Ko = Kq, *Vo = Vq;
        int32_t *idx = malloc((size_t)R * ld * sizeof *idx), base[3] = {0, 30, 56};
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t t = 0; t < ld; t++) /* distinct rows, out of order */
                idx[r * ld + t] = (int32_t)((t * 37 + r * 11) % A);
        uint16_t *d_Kh = up(Kh, (size_t)A * kvd * 2), *d_Vh = up(Vh, (size_t)A * kvd * 2);
        float *d_q = up(q, (size_t)R * H * hs * sizeof(float));
        int32_t *d_idx = up(idx, (size_t)R * ld * sizeof *idx), *d_base = up(base, sizeof base);
        uint32_t *d_c = up(count, sizeof count);
        float *d_s = up(NULL, (size_t)R * H * ld * sizeof(float));
        /* listed rows with the output's chunks (split at ld 640), base rows without */
        float *d_part = mode ? NULL : up(NULL, kern_attn_partial_floats(hs) * sizeof(float));
        float *d_out = up(NULL, (size_t)R * H * hs * sizeof(float)), *d_w = up(NULL, (size_t)R * ld * sizeof(float));
        struct kern_rows rw = {.idx = mode ? NULL : d_idx, .base = d_base, .count = d_c, .ld = ld};
        float sc = 1.0f / sqrtf((float)hs);
        assert_int_equal(kern_attn_scores16(d_s, d_q, d_Kh, rw, R, H, KVH, hs, sc, 0), cudaSuccess);
        assert_int_equal(kern_softmax(d_s, R * H, ld, d_c, H, 0), cudaSuccess);
        assert_int_equal(kern_attn_output16(d_out, d_part, d_s, d_Vh, rw, R, H, KVH, hs, 0),
                         cudaSuccess);
        assert_int_equal(kern_head_mean(d_w, d_s, d_c, R, H, ld, 0), cudaSuccess);
        float *out = malloc((size_t)R * H * hs * sizeof *out), *w = malloc((size_t)R * ld * sizeof *w);
        down(out, d_out, (size_t)R * H * hs * sizeof *out);
        down(w, d_w, (size_t)R * ld * sizeof *w);
        float *Kr = malloc((size_t)ld * kvd * sizeof *Kr), *Vr = malloc((size_t)ld * kvd * sizeof *Vr);
        float *att = malloc((size_t)H * ld * sizeof *att), *wr = malloc(ld * sizeof *wr);
        float *outr = malloc((size_t)H * hs * sizeof *outr);
        for (uint32_t r = 0; r < R; r++) {
            for (uint32_t t = 0; t < count[r]; t++) {
                int32_t row = mode ? base[r] + (int32_t)t : idx[r * ld + t];
                memcpy(Kr + (size_t)t * kvd, Ko + (size_t)row * kvd, kvd * sizeof(float));
                memcpy(Vr + (size_t)t * kvd, Vo + (size_t)row * kvd, kvd * sizeof(float));
            }
            cpu_attend(q + (size_t)r * H * hs, Kr, Vr, count[r], kvd, hs, H / KVH, H, att, ld, wr, outr);
            check_close(mode ? "attention output (base)" : "attention output (gathered)",
                        out + (size_t)r * H * hs, outr, (size_t)H * hs, 1e-5f, 1e-4f);
            check_close("head-mean weights", w + (size_t)r * ld, wr, count[r], 1e-6f, 1e-4f);
        }
        cudaFree(d_Kh); cudaFree(d_Vh); cudaFree(d_q); cudaFree(d_idx); cudaFree(d_base);
        cudaFree(d_c); cudaFree(d_s); cudaFree(d_out); cudaFree(d_w); cudaFree(d_part);
        free(out); free(w); free(Kr); free(Vr); free(att); free(wr); free(outr); free(idx);
    }
    free(K); free(V); free(q); free(Kh); free(Vh); free(Kq); free(Vq);
}

/* Head sizes taking each kernel's paths: 64 and 128 the warp forms, 10
 * the thread-per-token ones (not a multiple of 4; 12, the size here until
 * 2026-11-29, is one and took the warp forms), 160 warp scores over two
 * strides of 128 channels and the thread-per-channel output; 64 rows (a
 * row's tokens in one or two blocks' chunks) and 640 (the scores split
 * over 20 blocks, the output over 3 chunks summed afterwards, counts that
 * leave a chunk, an unrolled pass and the warps' strides part-filled:
 * A = ld + 56 arena rows, gcd(37, A) = 1 so the listed rows are
 * distinct). */
static void test_cuda_gathered_attention_equals_the_cpu(void **state)
{
    (void)state;
    need_device();
    attention_case(64, 64);
    attention_case(10, 64);
    attention_case(160, 64);
    attention_case(128, 640);
    attention_case(64, 640);
}

static void test_cuda_gather_and_scatter_move_rows_exactly(void **state)
{
    (void)state;
    need_device();
    const uint32_t A = 40, width = 192, n = 7;
    const int32_t rows[7] = {39, 0, 12, 13, 5, 30, 21};
    float *arena = rnd_vec((size_t)A * width, 1.0f), *packed = malloc((size_t)n * width * sizeof *packed);
    float *d_a = up(arena, (size_t)A * width * sizeof(float)), *d_p = up(NULL, (size_t)n * width * sizeof(float));
    int32_t *d_r = up(rows, sizeof rows);
    assert_int_equal(kern_gather_rows(d_p, d_a, d_r, n, width, 0), cudaSuccess);
    down(packed, d_p, (size_t)n * width * sizeof *packed);
    for (uint32_t i = 0; i < n; i++)
        assert_memory_equal(packed + (size_t)i * width, arena + (size_t)rows[i] * width, width * sizeof(float));
    float *fresh = rnd_vec((size_t)n * width, 5.0f), *after = malloc((size_t)A * width * sizeof *after);
    float *d_f = up(fresh, (size_t)n * width * sizeof(float));
    assert_int_equal(kern_scatter_rows(d_a, d_r, d_f, n, width, 0), cudaSuccess);
    down(after, d_a, (size_t)A * width * sizeof *after);
    for (uint32_t i = 0; i < n; i++)
        memcpy(arena + (size_t)rows[i] * width, fresh + (size_t)i * width, width * sizeof(float));
    assert_memory_equal(after, arena, (size_t)A * width * sizeof(float));
    /* into the FP16 dense cache: each value rounded as fp16_from_float does */
    uint16_t *h16 = calloc((size_t)A * width, 2), *want = calloc((size_t)A * width, 2);
    uint16_t *d_h = up(h16, (size_t)A * width * 2);
    assert_int_equal(kern_scatter_rows16(d_h, d_r, d_f, n, width, 0), cudaSuccess);
    down(h16, d_h, (size_t)A * width * 2);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < width; j++)
            want[(size_t)rows[i] * width + j] = fp16_from_float(fresh[(size_t)i * width + j]);
    assert_memory_equal(h16, want, (size_t)A * width * 2);
    cudaFree(d_h);
    free(h16); free(want);
    cudaFree(d_a); cudaFree(d_p); cudaFree(d_r); cudaFree(d_f);
    free(arena); free(packed); free(fresh); free(after);
}

/* kern_rows_from_host: the device reads rows straight from pinned host
 * memory at listed addresses into listed rows of a device arena, byte for
 * byte: rows of 14,336 bytes (OPT-30B's FP16 K row) at 16-byte aligned
 * addresses (the 16-byte path) and 4 bytes off them (the 4-byte path, as
 * rows of 12 bytes always are), and 70,000 rows of 4 bytes (more blocks
 * than a grid's y may have); a row width that is no whole number of 4-byte
 * words is refused. */
static void rows_from_host_case(uint32_t A, uint32_t n, uint32_t rb, uint32_t off)
{
    unsigned char *host = NULL, *want = calloc((size_t)A, rb), *got = malloc((size_t)A * rb);
    const void **src = malloc(n * sizeof *src);
    int32_t *rows = malloc(n * sizeof *rows);
    const size_t bytes = (size_t)n * rb + off;
    assert_int_equal(cudaHostAlloc((void **)&host, bytes, 0), cudaSuccess);
    for (size_t i = 0; i < bytes; i++)
        host[i] = (unsigned char)(i * 131 + 7);
    for (uint32_t i = 0; i < n; i++) { /* the arena's rows in another order than the host's */
        rows[i] = (int32_t)((i * 7 + 3) % A);
        src[i] = host + off + (size_t)((i * 3) % n) * rb;
        memcpy(want + (size_t)rows[i] * rb, src[i], rb);
    }
    unsigned char *d_a = up(NULL, (size_t)A * rb);
    int32_t *d_r = up(rows, n * sizeof *rows);
    const void **d_s = up(src, n * sizeof *src);
    assert_int_equal(cudaMemset(d_a, 0, (size_t)A * rb), cudaSuccess);
    assert_int_equal(kern_rows_from_host(d_a, d_r, d_s, n, rb, 0), cudaSuccess);
    down(got, d_a, (size_t)A * rb);
    assert_memory_equal(got, want, (size_t)A * rb);
    cudaFree(d_a); cudaFree(d_r); cudaFree((void *)d_s);
    cudaFreeHost(host);
    free(want); free(got); free(src); free(rows);
}

static void test_cuda_rows_from_pinned_host_memory_land_exactly(void **state)
{
    (void)state;
    need_device();
    rows_from_host_case(40, 7, 14336, 0);
    rows_from_host_case(40, 7, 14336, 4);
    rows_from_host_case(40, 7, 12, 0);
    rows_from_host_case(70001, 70000, 4, 0); /* 7 and A coprime: distinct rows */
    assert_int_equal(kern_rows_from_host(NULL, NULL, NULL, 1, 6, 0), cudaErrorInvalidValue);
}

static void test_cuda_int8_quantisation_equals_the_kvstore(void **state)
{
    (void)state;
    need_device();
    const uint32_t n = KVSTORE_INT8_GROUP, kv = 192;
    float *x = rnd_vec((size_t)n * kv, 3.0f);
    for (uint32_t r = 0; r < n; r++)
        x[(size_t)r * kv + 5] = 0.25f; /* a constant channel */
    float p_ref[2 * 192], p[2 * 192];
    kvstore_quant_params(p_ref, x, n, kv);
    float *d_x = up(x, (size_t)n * kv * sizeof(float)), *d_p = up(NULL, sizeof p);
    uint8_t *d_q = up(NULL, (size_t)n * kv);
    assert_int_equal(kern_quant_params(d_p, d_x, n, kv, 0), cudaSuccess);
    down(p, d_p, sizeof p);
    assert_memory_equal(p, p_ref, sizeof p);
    assert_int_equal(kern_quantise(d_q, d_x, d_p, n, kv, 0), cudaSuccess);
    uint8_t *q = malloc((size_t)n * kv), *q_ref = malloc((size_t)n * kv);
    down(q, d_q, (size_t)n * kv);
    for (uint32_t r = 0; r < n; r++)
        kvstore_quantise(q_ref + (size_t)r * kv, x + (size_t)r * kv, p_ref, kv);
    assert_memory_equal(q, q_ref, (size_t)n * kv);
    float *y = malloc((size_t)n * kv * sizeof *y), *y_ref = malloc((size_t)n * kv * sizeof *y_ref);
    assert_int_equal(kern_dequantise(d_x, d_q, d_p, n, kv, 0), cudaSuccess);
    down(y, d_x, (size_t)n * kv * sizeof *y);
    for (uint32_t r = 0; r < n; r++)
        kvstore_dequantise(y_ref + (size_t)r * kv, q_ref + (size_t)r * kv, p_ref, kv);
    check_close("dequantised", y, y_ref, (size_t)n * kv, 0.0f, 1e-6f);
    cudaFree(d_x); cudaFree(d_p); cudaFree(d_q);
    free(x); free(q); free(q_ref); free(y); free(y_ref);
}

static void test_cuda_swa_sum_update_equals_the_fixed_point_sum(void **state)
{
    (void)state;
    need_device();
    const uint32_t N = 500, n = 300, n_old = 200;
    int64_t *sum = calloc(N, sizeof *sum), *ref = calloc(N, sizeof *ref);
    uint32_t ids[300], old_ids[200];
    float w[300];
    int64_t old_w[200];
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = (i * 7) % N;
        w[i] = i % 9 == 0 ? 0.0f : fabsf(rnd()) / (float)n;
    }
    for (uint32_t j = 0; j < n_old; j++) {
        old_ids[j] = (j * 13) % N;
        old_w[j] = sel_weight_fixed(fabsf(rnd()) / (float)n);
        sum[old_ids[j]] += old_w[j]; /* what the leaving row once added */
    }
    memcpy(ref, sum, N * sizeof *ref);
    for (uint32_t i = 0; i < n; i++)
        if (w[i] != 0.0f)
            ref[ids[i]] += sel_weight_fixed(w[i]);
    for (uint32_t j = 0; j < n_old; j++)
        ref[old_ids[j]] -= old_w[j];
    int64_t *d_sum = up(sum, N * sizeof *sum), *d_ow = up(old_w, sizeof old_w);
    uint32_t *d_ids = up(ids, sizeof ids), *d_oids = up(old_ids, sizeof old_ids);
    float *d_w = up(w, sizeof w);
    assert_int_equal(kern_swa_sum_update(d_sum, d_ids, d_w, n, d_oids, d_ow, n_old, 0), cudaSuccess);
    down(sum, d_sum, N * sizeof *sum);
    assert_memory_equal(sum, ref, N * sizeof *sum);
    cudaFree(d_sum); cudaFree(d_ow); cudaFree(d_ids); cudaFree(d_oids); cudaFree(d_w);
    free(sum); free(ref);
}

/* ---- whole models ---- */

/* A tiered cache on st: strided selection over 12 tokens (old tokens come
 * back as the stride changes) under alisa-cache placement with dev device and dev
 * host slots per stream (phases II and III when 2 dev is less than the run),
 * a load priced 2 and a recomputation recompute_ns, made by the state's own
 * backend. Strided, not SWA: its plans depend on positions alone, so both
 * backends carry out the same plans. SWA's depend on the attention weights,
 * and FP16 rounding flips its near ties (seen on an H100: one token kept on
 * one side, another on the other, and from then on that sequence's logits
 * differ by more than rounding). */
static void tiers(struct llm_state *st, const struct llm_model *m, uint32_t B, uint32_t N,
                  uint32_t P, uint32_t dev, uint64_t recompute_ns, struct scheduler **sched,
                  struct kvstore **ks)
{
    struct alisa_err e = {{0}};
    struct scheduler_config sc = {.sel = &sel_strided_ops, .sel_params = {.budget_tokens = 12},
                                  .place = &place_alisa_cache_ops, .n_streams = B * m->c.n_layers,
                                  .max_len = N};
    sc.place_params = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = dev,
                                            .cpu_bytes = dev, .load_ns = 2,
                                            .recompute_ns = recompute_ns, .gpu_fraction = -1};
    if (scheduler_create(sched, &sc, NULL, &e) ||
        llm_state_kvstore(st, sc.n_streams, N, dev, dev, 0, ks, &e))
        fail_msg("%s", e.msg);
    llm_state_tiered(st, *sched, *ks, P);
}

/* FlexGen's split by whole sequences on st (the executor's flexgen-static,
 * exec/cli's flexgen_split), strided over 12 tokens: sequence 0's KV wholly
 * on the device, the others' wholly on the host, loaded for every step that
 * attends them, each new token written through (the tier ops' `through`);
 * arenas of N slots a stream. */
static void split_tiers(struct llm_state *st, const struct llm_model *m, uint32_t B, uint32_t N,
                        uint32_t P, struct scheduler **sched, struct kvstore **ks)
{
    struct alisa_err e = {{0}};
    const uint32_t n = B * m->c.n_layers;
    struct place_params *pp = calloc(n, sizeof *pp);
    assert_non_null(pp);
    for (uint32_t i = 0; i < n; i++) {
        int gpu = i < m->c.n_layers; /* stream b * n_layers + l: sequence 0 */
        pp[i] = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = gpu ? N : 0,
                                      .cpu_bytes = gpu ? 0 : N, .gpu_fraction = gpu};
    }
    struct scheduler_config sc = {.sel = &sel_strided_ops, .sel_params = {.budget_tokens = 12},
                                  .place = &place_flexgen_ops, .stream_params = pp,
                                  .n_streams = n, .max_len = N};
    if (scheduler_create(sched, &sc, NULL, &e) ||
        llm_state_kvstore(st, n, N, N, N, 0, ks, &e))
        fail_msg("%s", e.msg);
    free(pp);
    llm_state_tiered(st, *sched, *ks, P);
}

/* greedy_models's dev for split_tiers instead of tiers */
#define SPLIT UINT32_MAX

/* Logits (n rows of V) within atol + rtol x the row's largest |logit| of
 * the CPU's: FP16 weights and GEMM inputs err in proportion to the dot
 * products' terms, not to each result (a logit near 0 is the cancellation of
 * large terms), so the tolerance scales with the row. */
#define LOGIT_ATOL 0.05f
#define LOGIT_RTOL 0.01f

static float logit_tol(const float *ref, size_t V)
{
    float big = 0.0f;
    for (size_t v = 0; v < V; v++)
        big = fabsf(ref[v]) > big ? fabsf(ref[v]) : big;
    return LOGIT_ATOL + LOGIT_RTOL * big;
}

static void check_logits(const char *what, const float *got, const float *ref, size_t n, size_t V)
{
    size_t bad = 0;
    double worst = 0;
    for (size_t r = 0; r < n; r++) {
        float tol = logit_tol(ref + r * V, V);
        for (size_t v = 0; v < V; v++) {
            double d = fabs((double)got[r * V + v] - ref[r * V + v]);
            worst = d > worst ? d : worst;
            if (!(d <= tol) && bad++ < 5)
                print_message("%s[%zu][%zu]: cuda %.9g, cpu %.9g (tolerance %g)\n", what, r, v,
                              got[r * V + v], ref[r * V + v], tol);
        }
    }
    if (bad)
        fail_msg("%s: %zu of %zu values off (largest difference %g)", what, bad, n * V, worst);
}

/* Compares one position's logits (B, V) of the two backends (check_logits)
 * and writes each sequence's next token: the CPU's argmax. The CUDA backend
 * must pick the same token, except where the CPU's own logits put its pick
 * within the tolerance of the best (FP16 weights may reorder a near tie);
 * those are counted in *ties and printed. */
static void compare_pick(const char *what, const float *g, const float *lc, uint32_t B,
                         uint32_t V, uint32_t pos, uint32_t *next, uint32_t *ties)
{
    check_logits(what, g, lc, B, V);
    for (uint32_t b = 0; b < B; b++) {
        const float *c = lc + (size_t)b * V, *x = g + (size_t)b * V;
        uint32_t best = 0, gbest = 0;
        for (uint32_t v = 1; v < V; v++) {
            best = c[v] > c[best] ? v : best;
            gbest = x[v] > x[gbest] ? v : gbest;
        }
        if (best != gbest) {
            if (c[best] - c[gbest] > logit_tol(c, V))
                fail_msg("sequence %u position %u: cpu chose %u, cuda %u (cpu logits %g vs %g)",
                         b, pos, best, gbest, c[best], c[gbest]);
            print_message("sequence %u position %u: near tie, cpu %u, cuda %u (cpu logits %g "
                          "vs %g)\n", b, pos, best, gbest, c[best], c[gbest]);
            (*ties)++;
        }
        next[b] = best;
    }
}

/* The CPU backend (the oracle) on m beside the CUDA backend on mg, B
 * sequences of N positions after a P-token prompt, each with its own
 * scheduler and kvstore: dense (dev 0), FlexGen's split (SPLIT, split_tiers)
 * or tiered over dev slots a stream (tiers). */
struct both {
    struct llm_state *cpu, *gpu;
    struct scheduler *s_cpu, *s_gpu;
    struct kvstore *k_cpu, *k_gpu;
};

static void both_open(struct both *t, const struct llm_model *m, const struct llm_model *mg,
                      uint32_t B, uint32_t N, uint32_t P, uint32_t dev, uint64_t recompute_ns)
{
    struct alisa_err e = {{0}};
    *t = (struct both){0};
    if (llm_state_create_on(&t->cpu, LLM_BACKEND_CPU, m, B, N, &e) ||
        llm_state_create_on(&t->gpu, LLM_BACKEND_CUDA, mg, B, N, &e))
        fail_msg("%s", e.msg);
    if (dev == SPLIT) {
        split_tiers(t->cpu, m, B, N, P, &t->s_cpu, &t->k_cpu);
        split_tiers(t->gpu, m, B, N, P, &t->s_gpu, &t->k_gpu);
    } else if (dev) {
        tiers(t->cpu, m, B, N, P, dev, recompute_ns, &t->s_cpu, &t->k_cpu);
        tiers(t->gpu, m, B, N, P, dev, recompute_ns, &t->s_gpu, &t->k_gpu);
    }
}

/* The CUDA side's moves, said, and that they happened: phase II and III:
 * with loads cheaper than recomputation (recompute_ns > 2) evicted tokens
 * are offloaded and loaded back; with recomputation cheaper alisa-cache
 * keeps no CPU copy of them (placement.h) and recomputes; split: the host
 * sequences' tokens written through and loaded. Nothing for dense. */
static void both_moved(const struct both *t, uint32_t dev, uint64_t recompute_ns)
{
    if (!dev)
        return;
    uint64_t off, ld, rcp;
    kvstore_counts(t->k_gpu, &off, &ld, &rcp);
    print_message("cuda tiers: %llu offloads, %llu loads, %llu recomputes\n",
                  (unsigned long long)off, (unsigned long long)ld, (unsigned long long)rcp);
    if (dev == SPLIT)
        assert_true(off > 0 && ld > 0 && rcp == 0);
    else
        assert_true(recompute_ns > 2 ? off > 0 && ld > 0 : rcp > 0);
}

static void both_close(struct both *t)
{
    llm_state_free(t->gpu);
    llm_state_free(t->cpu);
    kvstore_free(t->k_gpu);
    kvstore_free(t->k_cpu);
    scheduler_destroy(t->s_gpu);
    scheduler_destroy(t->s_cpu);
}

/* Greedy decoding of B sequences for N positions (a P-token prompt of fixed
 * tokens, then each sequence's CPU argmax, fed to both) on the CPU and the
 * CUDA backend in lockstep: logits and attention rows within tolerance (FP16
 * weights and GEMM inputs against FP32) and the same argmax (compare_pick).
 * chunk: the prompt runs as one llm_forward_chunk call of P positions, as
 * `alisa run` does, else position by position. dev 0: dense; SPLIT:
 * FlexGen's split (split_tiers); else tiered, evicted tokens coming back by
 * load when recompute_ns is 3 and by recomputation when it is 1 (measured
 * on the CPU: both happen). */
static void greedy_models(const char *path, struct llm_model *m, struct llm_model *mg, uint32_t B,
                          uint32_t N, uint32_t P, uint32_t dev, uint64_t recompute_ns, int chunk)
{
    const struct llm_config *c = &m->c;
    struct both t;
    both_open(&t, m, mg, B, N, P, dev, recompute_ns);
    struct llm_state *cpu = t.cpu, *gpu = t.gpu;
    const size_t V = c->vocab;
    uint32_t *cur = malloc((size_t)B * P * sizeof *cur), ties = 0;
    float *lc = malloc((size_t)B * P * V * sizeof *lc);
    float *rc = malloc((size_t)B * c->n_layers * N * sizeof *rc);
    float *rg = malloc((size_t)B * c->n_layers * N * sizeof *rg);
    char what[64];
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t i = 0; i < P; i++)
            cur[(size_t)b * P + i] = i ? (uint32_t)(1 + 37 * i + 11 * b) % c->vocab : 1;
    uint32_t p = 0;
    if (chunk) {
        const float *a = llm_forward_chunk(cpu, cur, 0, P, NULL);
        if (!a)
            fail_msg("cpu prompt: %s", llm_state_error(cpu)->msg);
        memcpy(lc, a, (size_t)B * P * V * sizeof *lc);
        const float *g = llm_forward_chunk(gpu, cur, 0, P, NULL);
        if (!g)
            fail_msg("cuda prompt: %s", llm_state_error(gpu)->msg);
        check_logits("prompt logits", g, lc, (size_t)B * P, V);
        float *lg = malloc((size_t)B * V * sizeof *lg), *ll = malloc((size_t)B * V * sizeof *ll);
        for (uint32_t b = 0; b < B; b++) { /* each sequence's last prompt position */
            memcpy(ll + b * V, lc + ((size_t)b * P + P - 1) * V, V * sizeof *ll);
            memcpy(lg + b * V, g + ((size_t)b * P + P - 1) * V, V * sizeof *lg);
        }
        compare_pick("logits at the prompt's end", lg, ll, B, (uint32_t)V, P - 1, cur, &ties);
        free(lg);
        free(ll);
        p = P;
    } else {
        for (uint32_t b = 0; b < B; b++) /* position 0's token of every sequence first */
            cur[b] = cur[(size_t)b * P];
    }
    for (; p + 1 < N; p++) {
        const float *a = llm_forward(cpu, cur, p, rc);
        if (!a)
            fail_msg("cpu position %u: %s", p, llm_state_error(cpu)->msg);
        memcpy(lc, a, (size_t)B * V * sizeof *lc);
        const float *g = llm_forward(gpu, cur, p, rg);
        if (!g)
            fail_msg("cuda position %u: %s", p, llm_state_error(gpu)->msg);
        snprintf(what, sizeof what, "attention rows at position %u", p);
        check_close(what, rg, rc, (size_t)B * c->n_layers * (p + 1), 5e-3f, 0.05f);
        snprintf(what, sizeof what, "logits at position %u", p);
        compare_pick(what, g, lc, B, (uint32_t)V, p, cur, &ties);
        if (p + 1 < P) /* still in the prompt: its next token, not the argmax */
            for (uint32_t b = 0; b < B; b++)
                cur[b] = (uint32_t)(1 + 37 * (p + 1) + 11 * b) % c->vocab;
    }
    print_message("%s: B %u, %s prompt, %s: %u near ties\n", path, B, chunk ? "chunked" : "stepped",
                  dev == SPLIT ? "split by sequences" : dev ? "tiered" : "dense", ties);
    both_moved(&t, dev, recompute_ns);
    both_close(&t);
    free(cur); free(lc); free(rc); free(rg);
}

/* Teacher-forced chunks past the prompt under the scheduler (alisa eval's
 * calls: 32 positions a call over its whole window): a P-token prompt
 * chunk, then chunks of 5 positions up to N, on the CPU and the CUDA
 * backend, the CUDA one eager or with llm_state_pipeline (which pipelines
 * one-position decode steps only, never a chunk): every chunk's logits
 * within tolerance of the CPU's, tokens moving both ways. */
static void chunks_after_prompt(const char *path, uint32_t B, uint32_t N, uint32_t P,
                                uint32_t dev, uint64_t recompute_ns, int pipelined)
{
    need_device();
    struct llm_model *m = tu_model_or_skip(path, LLM_WEIGHTS_F32);
    struct both t;
    both_open(&t, m, m, B, N, P, dev, recompute_ns);
    struct llm_state *cpu = t.cpu, *gpu = t.gpu;
    llm_state_pipeline(gpu, pipelined);
    const size_t V = m->c.vocab;
    uint32_t *cur = malloc((size_t)B * N * sizeof *cur);
    float *lc = malloc((size_t)B * N * V * sizeof *lc);
    char what[96];
    for (uint32_t p0 = 0, n; p0 + 1 < N; p0 += n) {
        n = p0 ? (N - 1 - p0 < 5 ? N - 1 - p0 : 5) : P;
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t i = 0; i < n; i++)
                cur[(size_t)b * n + i] = (uint32_t)(1 + 37 * (p0 + i) + 11 * b) % m->c.vocab;
        const float *a = llm_forward_chunk(cpu, cur, p0, n, NULL);
        if (!a)
            fail_msg("cpu positions %u..%u: %s", p0, p0 + n - 1, llm_state_error(cpu)->msg);
        memcpy(lc, a, (size_t)B * n * V * sizeof *lc);
        const float *g = llm_forward_chunk(gpu, cur, p0, n, NULL);
        if (!g)
            fail_msg("cuda positions %u..%u: %s", p0, p0 + n - 1, llm_state_error(gpu)->msg);
        snprintf(what, sizeof what, "logits of positions %u..%u%s", p0, p0 + n - 1,
                 pipelined ? ", pipelined" : "");
        check_logits(what, g, lc, (size_t)B * n, V);
    }
    print_message("%s: chunks after a %u-token prompt%s\n", path, P,
                  pipelined ? ", pipelined" : "");
    both_moved(&t, dev, recompute_ns);
    both_close(&t);
    free(cur);
    free(lc);
    llm_free(m);
}

/* greedy_models with the checkpoint at path on both backends. */
static void greedy_both(const char *path, uint32_t B, uint32_t N, uint32_t P, uint32_t dev,
                        uint64_t recompute_ns, int chunk)
{
    need_device();
    struct llm_model *m = tu_model_or_skip(path, LLM_WEIGHTS_F32);
    greedy_models(path, m, m, B, N, P, dev, recompute_ns, chunk);
    llm_free(m);
}

static char stories[600], smollm2[600], tiny_opt[600], tiny_qwen2[600], tiny_mistral[600];

/* OPT (LayerNorm with bias, learned positions at offset 2, biases, ReLU) on
 * the GPU: the tiny random checkpoint test_hf checks against numpy. */
static void test_cuda_opt_greedy_equals_the_cpu_dense_and_tiered(void **state)
{
    (void)state;
    greedy_both(tiny_opt, 3, 40, 8, 0, 0, 0);
    greedy_both(tiny_opt, 3, 40, 8, 16, 3, 0);
    greedy_both(tiny_opt, 3, 40, 8, 16, 1, 0);
    greedy_both(tiny_opt, 3, 40, 8, 16, 3, 1);
    greedy_both(tiny_opt, 3, 40, 8, SPLIT, 0, 0);
}

/* Qwen2 (q, k and v biases before RoPE, a tied head), described as data
 * and run by the same layer sequence: the checkpoint test_hf checks against
 * numpy, dense and tiered (its recomputation adds the K bias, then rotates). */
static void test_cuda_qwen2_greedy_equals_the_cpu_dense_and_tiered(void **state)
{
    (void)state;
    greedy_both(tiny_qwen2, 3, 40, 8, 0, 0, 0);
    greedy_both(tiny_qwen2, 3, 40, 8, 16, 1, 0);
    greedy_both(tiny_qwen2, 3, 40, 8, 16, 3, 1);
}

/* Mistral's sliding window (3 positions) on the GPU: the dense cache's row
 * lists start at the window (h_base, h_count), the attention rows place
 * their weights at the window's positions; a prompt chunk, then decode. */
/* Teardown: a skip or failure inside a test that sets ALISA_CUDA_FUSE
 * leaves the tests after it with the default. */
static int unset_fuse(void **state)
{
    (void)state;
    return unsetenv("ALISA_CUDA_FUSE");
}

/* The projections both ways against the CPU: fused (the default: few-row
 * decode products by kern_gemv, Q/K/V and up/gate as one product, the
 * residual added by the product) at four and six rows and at ten (one
 * strided batched cuBLAS call a group, as a prompt chunk's rows), and with ALISA_CUDA_FUSE=0 (a cuBLAS GEMM a
 * matrix, a separate add), on a grouped-query model (K and V one group, Q
 * alone) and an equal-head one (Q, K and V one group); a value other than 0
 * or 1 refused by name. One run of 512 positions at one row splits the
 * attention's output pass (kern_attn_output16's chunks). */
static void test_cuda_fused_and_unfused_projections_equal_the_cpu(void **state)
{
    (void)state;
    need_device();
    struct llm_model *m = tu_model_or_skip(stories, LLM_WEIGHTS_F32);
    greedy_both(tiny_qwen2, 4, 24, 8, 0, 0, 0);
    greedy_both(tiny_qwen2, 6, 24, 8, 0, 0, 1);
    greedy_both(tiny_qwen2, 10, 24, 8, 0, 0, 0);
    greedy_both(tiny_opt, 6, 24, 8, 0, 0, 0);
    greedy_both(tiny_opt, 10, 24, 8, 0, 0, 0);
    greedy_both(stories, 6, 48, 8, 24, 3, 0);
    greedy_both(stories, 1, 512, 8, 0, 0, 1); /* 512 positions: the output pass split in two */
    assert_int_equal(setenv("ALISA_CUDA_FUSE", "0", 1), 0);
    greedy_both(tiny_qwen2, 4, 24, 8, 0, 0, 0);
    greedy_both(stories, 3, 48, 8, 24, 3, 1);
    assert_int_equal(setenv("ALISA_CUDA_FUSE", "2", 1), 0);
    struct llm_state *st = NULL;
    struct alisa_err e = {{0}};
    assert_int_not_equal(llm_state_create_on(&st, LLM_BACKEND_CUDA, m, 1, 8, &e), 0);
    assert_non_null(strstr(e.msg, "ALISA_CUDA_FUSE: '2'"));
    assert_int_equal(unsetenv("ALISA_CUDA_FUSE"), 0);
    llm_free(m);
}

static void test_cuda_mistral_window_greedy_equals_the_cpu(void **state)
{
    (void)state;
    greedy_both(tiny_mistral, 3, 40, 8, 0, 0, 0);
    greedy_both(tiny_mistral, 3, 40, 8, 0, 0, 1);
}

/* Synthetic weights drawn on the GPU (llm_shape_synthetic, kern_synth_f16)
 * are the host's (llm_load_synthetic) rounded to FP16: a LLaMA shape (Q8_0
 * streams) and an OPT shape whose width is no whole number of blocks (FP32
 * streams) decode as the host's model does, and one forward's logits agree
 * far inside what other weights would give (2% of the largest). */
static void test_cuda_synthetic_weights_drawn_on_the_gpu_equal_the_hosts(void **state)
{
    (void)state;
    need_device();
    const struct model_shape shapes[2] = {
        {.name = "tiny-llama", .family = "llama", .n_layers = 2, .hidden = 64, .n_heads = 4,
         .n_kv_heads = 2, .ffn = 128, .vocab = 256, .max_seq = 128},
        {.name = "tiny-opt", .family = "opt", .n_layers = 2, .hidden = 48, .n_heads = 4,
         .n_kv_heads = 4, .ffn = 96, .vocab = 250, .max_seq = 128},
    };
    for (int i = 0; i < 2; i++) {
        struct llm_model *host, *lazy;
        struct alisa_err e = {{0}};
        if (llm_load_synthetic(&host, &shapes[i], 7, &e) ||
            llm_shape_synthetic(&lazy, &shapes[i], 7, &e))
            fail_msg("%s", e.msg);
        assert_null(lazy->w.wq[0].data); /* nothing drawn on the host */
        greedy_models(shapes[i].name, host, lazy, 2, 24, 4, 0, 0, 0);
        greedy_models(shapes[i].name, host, lazy, 2, 40, 4, 16, 3, 1);
        struct llm_state *cpu, *gpu;
        if (llm_state_create_on(&cpu, LLM_BACKEND_CPU, host, 1, 8, &e) ||
            llm_state_create_on(&gpu, LLM_BACKEND_CUDA, lazy, 1, 8, &e))
            fail_msg("%s", e.msg);
        uint32_t tok = 5;
        const float *a = llm_forward(cpu, &tok, 0, NULL), *g = llm_forward(gpu, &tok, 0, NULL);
        assert_non_null(a);
        assert_non_null(g);
        float big = 0.0f, worst = 0.0f;
        for (uint32_t v = 0; v < host->c.vocab; v++) {
            big = fabsf(a[v]) > big ? fabsf(a[v]) : big;
            worst = fabsf(a[v] - g[v]) > worst ? fabsf(a[v] - g[v]) : worst;
        }
        print_message("%s: logits up to %g, cpu and gpu apart by %g at most\n", shapes[i].name,
                      big, worst);
        assert_true(big > 0.0f && worst <= 0.02f * big);
        /* the CPU backend refuses weights it does not hold */
        struct llm_state *no;
        assert_int_not_equal(llm_state_create_on(&no, LLM_BACKEND_CPU, lazy, 1, 8, &e), 0);
        assert_non_null(strstr(e.msg, "not drawn on the host"));
        llm_state_free(gpu);
        llm_state_free(cpu);
        llm_free(lazy);
        llm_free(host);
    }
}

static void test_cuda_stories260k_greedy_equals_the_cpu_dense_and_tiered(void **state)
{
    (void)state;
    greedy_both(stories, 3, 72, 8, 0, 0, 0);
    greedy_both(stories, 3, 72, 8, 24, 3, 0);
    greedy_both(stories, 3, 72, 8, 24, 1, 0);
    greedy_both(stories, 3, 72, 8, 0, 0, 1);
    greedy_both(stories, 3, 72, 8, 24, 3, 1);
    greedy_both(stories, 3, 72, 8, SPLIT, 0, 0);
    greedy_both(stories, 3, 72, 8, SPLIT, 0, 1);
}

/* Chunks on the tiered cache (chunks_after_prompt): after an 8-token
 * prompt, with loads and with recomputations, the pipelined state taking
 * its chunks eagerly (tiny-opt's last call, one position, pipelined); and a
 * 32-token prompt over a 24-slot arena, whose chunk offloads, loads or
 * recomputes its own tokens between its positions. */
static void test_cuda_tiered_chunks_after_the_prompt_equal_the_cpu(void **state)
{
    (void)state;
    chunks_after_prompt(stories, 3, 72, 8, 24, 3, 0);
    chunks_after_prompt(stories, 3, 72, 8, 24, 3, 1);
    chunks_after_prompt(stories, 3, 72, 8, 24, 1, 1);
    chunks_after_prompt(tiny_opt, 3, 40, 8, 16, 3, 1);
    chunks_after_prompt(stories, 3, 72, 32, 24, 3, 0);
    chunks_after_prompt(stories, 3, 72, 32, 24, 1, 0);
}

static void test_cuda_smollm2_greedy_equals_the_cpu_dense_and_tiered(void **state)
{
    (void)state;
    greedy_both(smollm2, 2, 72, 8, 0, 0, 0);
    greedy_both(smollm2, 2, 72, 8, 24, 3, 0);
    greedy_both(smollm2, 2, 72, 8, 24, 1, 0);
    greedy_both(smollm2, 2, 72, 8, 0, 0, 1);
    greedy_both(smollm2, 2, 72, 8, 24, 3, 1);
}

/* One run for pipelined_equals_eager: B sequences of a fixed P-token prompt
 * run position by position, then each sequence's own argmax, N positions in
 * all, without attention rows for the caller (the pipelined forms take only
 * such calls). Tiered: SWA at 50% under alisa-cache with dev slots a stream,
 * a load priced 2 and a recomputation recompute_ns, its plans written to
 * *log. Returns the logits of every position, (N - 1,
 * B, V). */
static float *run_cuda(const struct llm_model *m, uint32_t B, uint32_t N, uint32_t P,
                       uint32_t dev, uint64_t recompute_ns, int pipelined, char **log)
{
    struct alisa_err e = {{0}};
    struct llm_state *st;
    struct scheduler *sched = NULL;
    struct kvstore *ks = NULL;
    size_t V = m->c.vocab, log_n = 0;
    FILE *f = NULL;
    if (llm_state_create_on(&st, LLM_BACKEND_CUDA, m, B, N, &e))
        fail_msg("%s", e.msg);
    llm_state_pipeline(st, pipelined);
    if (dev) {
        struct scheduler_config sc = {.sel = &sel_swa_ops, .sel_params = {.sparsity = 0.5},
                                      .place = &place_alisa_cache_ops,
                                      .n_streams = B * m->c.n_layers, .max_len = N};
        sc.place_params = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = dev,
                                                .cpu_bytes = dev, .load_ns = 2,
                                                .recompute_ns = recompute_ns,
                                                .gpu_fraction = -1};
        if (scheduler_create(&sched, &sc, NULL, &e) ||
            llm_state_kvstore(st, sc.n_streams, N, dev, dev, 0, &ks, &e))
            fail_msg("%s", e.msg);
        llm_state_tiered(st, sched, ks, P);
        assert_non_null(f = open_memstream(log, &log_n));
        llm_state_plan_log(st, f);
    }
    float *out = malloc((size_t)(N - 1) * B * V * sizeof *out);
    uint32_t *cur = malloc(B * sizeof *cur);
    assert_non_null(out);
    assert_non_null(cur);
    for (uint32_t b = 0; b < B; b++)
        cur[b] = 1;
    for (uint32_t p = 0; p + 1 < N; p++) {
        const float *lg = llm_forward(st, cur, p, NULL);
        if (!lg)
            fail_msg("%s position %u: %s", pipelined ? "pipelined" : "eager", p,
                     llm_state_error(st)->msg);
        memcpy(out + (size_t)p * B * V, lg, (size_t)B * V * sizeof *out);
        for (uint32_t b = 0; b < B; b++) {
            const float *x = lg + (size_t)b * V;
            uint32_t best = 0;
            for (uint32_t v = 1; v < V; v++)
                best = x[v] > x[best] ? v : best;
            cur[b] = p + 1 < P ? (uint32_t)(1 + 37 * (p + 1) + 11 * b) % (uint32_t)V : best;
        }
    }
    if (dev) {
        uint64_t off, ld, rcp;
        kvstore_counts(ks, &off, &ld, &rcp);
        print_message("%s: %llu offloads, %llu loads, %llu recomputes\n",
                      pipelined ? "pipelined" : "eager", (unsigned long long)off,
                      (unsigned long long)ld, (unsigned long long)rcp);
        /* the handoff between layers had moves to carry (seen on the CPU
         * backend with these settings: loads when loading is cheaper,
         * recomputations when recomputing is) */
        assert_true(recompute_ns > 2 ? off > 0 && ld > 0 : rcp > 0);
    }
    llm_state_free(st);
    if (f)
        fclose(f);
    kvstore_free(ks);
    scheduler_destroy(sched);
    free(cur);
    return out;
}

/* llm_state_pipeline (a dense step replayed as a CUDA graph; a tiered
 * step whose host plans layer l + 1 while the GPU runs layer l and whose
 * attention rows the scheduler observes at the step's end) computes what
 * the eager, layer-by-layer path computes: the same kernels on the same
 * data in the same order, so logits bitwise equal at every position, and
 * under SWA, whose plans follow the attention weights, the same decision
 * log (a row observed late, or a host buffer reused before the GPU read
 * it, changes the plans or the logits). */
static void pipelined_equals_eager(const char *path, uint32_t B, uint32_t N, uint32_t P,
                                   uint32_t dev, uint64_t recompute_ns)
{
    need_device();
    struct llm_model *m = tu_model_or_skip(path, LLM_WEIGHTS_F32);
    char *log_e = NULL, *log_p = NULL;
    float *eager = run_cuda(m, B, N, P, dev, recompute_ns, 0, &log_e);
    float *piped = run_cuda(m, B, N, P, dev, recompute_ns, 1, &log_p);
    size_t n = (size_t)(N - 1) * B * m->c.vocab, bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&eager[i], &piped[i], sizeof *eager)) {
            double dd = fabs((double)eager[i] - piped[i]);
            worst = dd > worst ? dd : worst;
            if (bad++ < 5)
                print_message("logit %zu (position %zu): eager %.9g, pipelined %.9g\n", i,
                              i / ((size_t)B * m->c.vocab), eager[i], piped[i]);
        }
    if (bad)
        fail_msg("%s, %s: %zu of %zu logits differ (largest %g)", path, dev ? "tiered" : "dense",
                 bad, n, worst);
    if (dev) {
        assert_non_null(log_e);
        assert_non_null(log_p);
        assert_true(strlen(log_e) > 0);
        assert_string_equal(log_e, log_p);
    }
    print_message("%s, %s: pipelined equals eager over %u positions\n", path,
                  dev ? "tiered" : "dense", N - 1);
    free(log_e);
    free(log_p);
    free(eager);
    free(piped);
    llm_free(m);
}

static void test_cuda_pipelined_step_equals_the_eager_one(void **state)
{
    (void)state;
    pipelined_equals_eager(stories, 3, 72, 8, 0, 0);
    pipelined_equals_eager(stories, 1, 512, 8, 0, 0); /* the output pass split, replayed */
    pipelined_equals_eager(stories, 3, 72, 8, 40, 3);
    pipelined_equals_eager(stories, 3, 72, 8, 40, 1);
    pipelined_equals_eager(tiny_opt, 3, 40, 8, 0, 0);
    pipelined_equals_eager(tiny_opt, 3, 40, 8, 24, 3);
}

/* SmolLM2's case on its own: it skips where the GGUF did not travel (a GPU
 * window's pack), and the cases above still report PASS. */
static void test_cuda_pipelined_smollm2_step_equals_the_eager_one(void **state)
{
    (void)state;
    pipelined_equals_eager(smollm2, 2, 72, 8, 40, 3);
}

/* llm_forward_greedy on the GPU (the argmax taken on the device, only ids
 * copied down) picks at every position the token llm_argmax picks from the
 * same backend's logits, eager and pipelined (its own graph), dense and
 * tiered: the two states run the same kernels on the same tokens, so any
 * difference is the device argmax's or its copy's. */
static void device_greedy_case(const char *path, uint32_t B, uint32_t N, uint32_t dev,
                               int pipelined)
{
    need_device();
    struct llm_model *m = tu_model_or_skip(path, LLM_WEIGHTS_F32);
    struct alisa_err e = {{0}};
    struct llm_state *st[2];
    struct scheduler *sched[2] = {NULL, NULL};
    struct kvstore *ks[2] = {NULL, NULL};
    const uint32_t V = m->c.vocab, P = 8;
    for (int k = 0; k < 2; k++) {
        if (llm_state_create_on(&st[k], LLM_BACKEND_CUDA, m, B, N, &e))
            fail_msg("%s", e.msg);
        llm_state_pipeline(st[k], pipelined);
        if (!dev)
            continue;
        struct scheduler_config sc = {.sel = &sel_swa_ops, .sel_params = {.sparsity = 0.5},
                                      .place = &place_alisa_cache_ops,
                                      .n_streams = B * m->c.n_layers, .max_len = N};
        sc.place_params = (struct place_params){.kv_bytes = 1, .act_bytes = 1, .gpu_bytes = dev,
                                                .cpu_bytes = dev, .load_ns = 2,
                                                .recompute_ns = 3, .gpu_fraction = -1};
        if (scheduler_create(&sched[k], &sc, NULL, &e) ||
            llm_state_kvstore(st[k], sc.n_streams, N, dev, dev, 0, &ks[k], &e))
            fail_msg("%s", e.msg);
        llm_state_tiered(st[k], sched[k], ks[k], P);
    }
    uint32_t *cur = malloc(B * sizeof *cur), *host = malloc(B * sizeof *host);
    uint32_t *gpu = malloc(B * sizeof *gpu);
    for (uint32_t b = 0; b < B; b++)
        cur[b] = 1 + 5 * b;
    for (uint32_t p = 0; p + 1 < N; p++) {
        const float *lg = llm_forward(st[0], cur, p, NULL);
        if (!lg || llm_forward_greedy(st[1], cur, p, gpu))
            fail_msg("position %u: %s", p, llm_state_error(lg ? st[1] : st[0])->msg);
        for (uint32_t b = 0; b < B; b++) {
            host[b] = llm_argmax(lg + (size_t)b * V, V);
            if (host[b] != gpu[b])
                fail_msg("%s, %s%s, position %u, sequence %u: device argmax %u, host %u", path,
                         dev ? "tiered" : "dense", pipelined ? ", pipelined" : "", p, b, gpu[b],
                         host[b]);
            cur[b] = p + 1 < P ? (uint32_t)(1 + 37 * (p + 1) + 11 * b) % V : host[b];
        }
    }
    for (int k = 0; k < 2; k++) {
        llm_state_free(st[k]);
        kvstore_free(ks[k]);
        scheduler_destroy(sched[k]);
    }
    free(cur);
    free(host);
    free(gpu);
    llm_free(m);
}

static void test_cuda_device_greedy_equals_the_host_argmax(void **state)
{
    (void)state;
    device_greedy_case(stories, 3, 40, 0, 0);
    device_greedy_case(stories, 3, 40, 0, 1);
    device_greedy_case(stories, 3, 40, 24, 0);
    device_greedy_case(stories, 3, 40, 24, 1);
    device_greedy_case(tiny_opt, 2, 24, 0, 1);
}

int main(void)
{
    snprintf(stories, sizeof stories, "%s/stories260K/stories260K.bin", tu_models_dir());
    /* the paths compiled in, unless the environment moves them (a packed
     * copy on a GPU machine: scripts/gpu-pack's setup.sh) */
    const char *gguf = getenv("ALISA_SMOLLM2_GGUF"), *golden = getenv("ALISA_GOLDEN_DIR");
    snprintf(smollm2, sizeof smollm2, "%s", gguf && *gguf ? gguf : ALISA_SMOLLM2_GGUF);
    snprintf(tiny_opt, sizeof tiny_opt, "%s/tiny-opt", golden && *golden ? golden : ALISA_GOLDEN_DIR);
    snprintf(tiny_qwen2, sizeof tiny_qwen2, "%s/tiny-qwen2",
             golden && *golden ? golden : ALISA_GOLDEN_DIR);
    snprintf(tiny_mistral, sizeof tiny_mistral, "%s/tiny-mistral",
             golden && *golden ? golden : ALISA_GOLDEN_DIR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_module_opens_and_gives_the_backend),
        cmocka_unit_test(test_cuda_fp16_narrowing_and_embedding_equal_the_cpu),
        cmocka_unit_test(test_cuda_rmsnorm_rope_swiglu_add_equal_the_cpu),
        cmocka_unit_test(test_cuda_softmax_over_each_rows_count_equals_the_cpu),
        cmocka_unit_test(test_cuda_gemv_few_rows_equal_the_cpu),
        cmocka_unit_test(test_cuda_argmax_rows_equals_the_hosts),
        cmocka_unit_test(test_cuda_gathered_attention_equals_the_cpu),
        cmocka_unit_test(test_cuda_gather_and_scatter_move_rows_exactly),
        cmocka_unit_test(test_cuda_rows_from_pinned_host_memory_land_exactly),
        cmocka_unit_test(test_cuda_int8_quantisation_equals_the_kvstore),
        cmocka_unit_test(test_cuda_swa_sum_update_equals_the_fixed_point_sum),
        cmocka_unit_test(test_cuda_stories260k_greedy_equals_the_cpu_dense_and_tiered),
        cmocka_unit_test(test_cuda_smollm2_greedy_equals_the_cpu_dense_and_tiered),
        cmocka_unit_test(test_cuda_tiered_chunks_after_the_prompt_equal_the_cpu),
        cmocka_unit_test(test_cuda_opt_greedy_equals_the_cpu_dense_and_tiered),
        cmocka_unit_test(test_cuda_qwen2_greedy_equals_the_cpu_dense_and_tiered),
        cmocka_unit_test(test_cuda_mistral_window_greedy_equals_the_cpu),
        cmocka_unit_test_teardown(test_cuda_fused_and_unfused_projections_equal_the_cpu,
                                  unset_fuse),
        cmocka_unit_test(test_cuda_synthetic_weights_drawn_on_the_gpu_equal_the_hosts),
        cmocka_unit_test(test_cuda_pipelined_step_equals_the_eager_one),
        cmocka_unit_test(test_cuda_pipelined_smollm2_step_equals_the_eager_one),
        cmocka_unit_test(test_cuda_device_greedy_equals_the_host_argmax),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
