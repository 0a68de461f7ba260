/* CPU calibration microbenchmarks (contract in calibrate.h). Times are wall
 * clock (CLOCK_MONOTONIC); each measurement is the median of several runs so
 * one interruption does not move it. Fits are gsl_fit_linear.
 */
#include "calibrate.h"

#include <cblas.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forward.h"
#include "kvstore.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static const char *const names[CALIB_N] = {"gemm_gflops",      "gemv_gbps",
                                           "mem_gbps",         "copy_gbps",
                                           "copy_latency_us",  "attn_ns_per_token",
                                           "recompute_ns"};

const char *calib_name(enum calib_figure f) { return names[f]; }

static double median(double *x, size_t n)
{
    gsl_sort(x, 1, n);
    return gsl_stats_median_from_sorted_data(x, 1, n);
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

/* ns of y (R, out) = x (R, in) W^T, median of 5 after a warm-up. */
static double time_gemm(const float *x, const float *w, float *y, int R, int out, int in)
{
    double t[5];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, w, in, 0.0f, y,
                out);
    for (int k = 0; k < 5; k++) {
        double t0 = now_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, w, in, 0.0f,
                    y, out);
        t[k] = now_ns() - t0;
    }
    return median(t, 5);
}

/* GEMMs of the model's shapes: best GFLOP/s, and the one-row bandwidth over
 * the weight bytes of all shapes together. */
static int bench_gemm(const struct llm_config *c, double *gflops, double *gbps)
{
    const int shapes[4][2] = {{(int)c->dim, (int)c->dim}, {(int)c->kv_dim, (int)c->dim},
                              {(int)c->hidden_dim, (int)c->dim}, {(int)c->dim, (int)c->hidden_dim}};
    const int rows[4] = {1, 8, 32, 256};
    size_t wmax = (size_t)c->hidden_dim * c->dim, xmax = (size_t)256 * c->hidden_dim;
    float *w = malloc(wmax * sizeof *w), *x = malloc(xmax * sizeof *x), *y = malloc(xmax * sizeof *y);
    if (!w || !x || !y) {
        free(w), free(x), free(y);
        return -1;
    }
    fill(w, wmax);
    fill(x, xmax);
    double best = 0, one_row_ns = 0, one_row_bytes = 0;
    for (int s = 0; s < 4; s++)
        for (int r = 0; r < 4; r++) {
            int out = shapes[s][0], in = shapes[s][1];
            double ns = time_gemm(x, w, y, rows[r], out, in);
            double rate = 2.0 * rows[r] * out * in / ns; /* FLOP/ns = GFLOP/s */
            best = rate > best ? rate : best;
            if (rows[r] == 1) {
                one_row_ns += ns;
                one_row_bytes += (double)out * in * sizeof(float);
            }
        }
    *gflops = best;
    *gbps = one_row_bytes / one_row_ns;
    free(w), free(x), free(y);
    return 0;
}

/* Streaming read of 256 MiB (cblas_sasum, vectorised), GB/s (median of 3). */
static int bench_mem(double *gbps)
{
    size_t n = (size_t)64 << 20; /* floats */
    float *a = malloc(n * sizeof *a);
    if (!a)
        return -1;
    fill(a, n);
    double t[3];
    volatile float sink = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = now_ns();
        sink += cblas_sasum((int)n, a, 1);
        t[k] = now_ns() - t0;
    }
    (void)sink;
    *gbps = (double)n * sizeof *a / median(t, 3);
    free(a);
    return 0;
}

/* Copies between two arenas: time = latency + bytes / bandwidth. */
static int bench_copy(const struct llm_config *c, double *gbps, double *lat_us)
{
    size_t max = (size_t)16 << 20;
    unsigned char *src = malloc(max), *dst = malloc(max);
    if (!src || !dst) {
        free(src), free(dst);
        return -1;
    }
    memset(src, 1, max);
    memset(dst, 2, max);
    double xs[16], ys[16], ws[16];
    size_t n = 0;
    for (size_t bytes = 2 * c->kv_dim * sizeof(float); bytes <= max && n < 16; bytes *= 4) {
        int reps = bytes < 65536 ? 2000 : bytes < (1u << 22) ? 50 : 5;
        double t[5];
        for (int k = 0; k < 5; k++) {
            double t0 = now_ns();
            for (int r = 0; r < reps; r++) {
                /* a different offset each time: no copy is from a hot line alone */
                size_t off = ((size_t)r * 4096) % (max - bytes + 1);
                memcpy(dst + off, src + off, bytes);
            }
            t[k] = (now_ns() - t0) / reps;
        }
        xs[n] = (double)bytes;
        ys[n] = median(t, 5);
        ws[n] = 1.0 / (ys[n] * ys[n]); /* relative errors: small copies count as much */
        n++;
    }
    double c0, c1, cov00, cov01, cov11, chisq;
    gsl_fit_wlinear(xs, 1, ws, 1, ys, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &chisq);
    *gbps = 1.0 / c1; /* bytes per ns */
    *lat_us = c0 * 1e-3;
    free(src), free(dst);
    return 0;
}

/* The executor decoding one sequence to 512 positions (or the model's
 * context): the mean per-layer attention time of each step against its
 * context length, fitted; the slope is ns per attended token. */
static int bench_attention(const struct llm_model *m, double *ns_per_token, struct alisa_err *e)
{
    uint32_t N = m->c.seq_len < 512 ? m->c.seq_len : 512;
    struct llm_state *st;
    int rc = llm_state_create(&st, m, 1, N, e);
    if (rc)
        return rc;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        llm_state_free(st);
        return err_set(e, ALISA_ENOMEM, "out of memory for timings");
    }
    llm_state_timings(st, f);
    for (uint32_t p = 0; p < N && !rc; p++) {
        uint32_t tok = p ? 1 + (p * 7919u) % (m->c.vocab - 1) : 1;
        if (!llm_forward(st, &tok, p, NULL))
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
    }
    fclose(f);
    llm_state_free(st);
    double *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys);
    size_t n = 0;
    for (char *line = buf; !rc && line && *line && xs && ys && n < N;) {
        char *nl = strchr(line, '\n');
        json_t *j = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        json_t *layers = j ? json_object_get(j, "layers") : NULL;
        if (layers && json_array_size(layers)) {
            double sum = 0;
            for (size_t l = 0; l < json_array_size(layers); l++)
                sum += json_number_value(json_object_get(json_array_get(layers, l), "attention_us"));
            xs[n] = (double)(json_integer_value(json_object_get(j, "pos")) + 1);
            ys[n] = sum / (double)json_array_size(layers) * 1e3;
            n++;
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    if (!rc && n > 2) {
        double c0, c1, cov00, cov01, cov11, sumsq;
        gsl_fit_linear(xs, 1, ys, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        *ns_per_token = c1;
    } else if (!rc) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for timings");
    }
    free(xs);
    free(ys);
    free(buf);
    return rc;
}

/* K and V of one token from its layer input (kvstore_recompute, the
 * executor's own), layers in turn, median of 5 x 2,000 tokens. */
static double bench_recompute(const struct llm_model *m)
{
    const struct llm_config *c = &m->c;
    float *act = malloc(c->dim * sizeof *act), *k = malloc(2 * c->kv_dim * sizeof *k);
    if (!act || !k) {
        free(act), free(k);
        return NAN;
    }
    fill(act, c->dim);
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_ns();
        for (uint32_t tok = 0; tok < 2000; tok++)
            kvstore_recompute(m, tok % c->n_layers, act, tok, k, k + c->kv_dim);
        t[r] = (now_ns() - t0) / 2000;
    }
    free(act), free(k);
    return median(t, 5);
}

int calib_measure(const struct llm_model *m, double out[CALIB_N], struct alisa_err *e)
{
    for (int i = 0; i < CALIB_N; i++)
        out[i] = NAN;
    if (bench_gemm(&m->c, &out[CALIB_GEMM_GFLOPS], &out[CALIB_GEMV_GBPS]) ||
        bench_mem(&out[CALIB_MEM_GBPS]) ||
        bench_copy(&m->c, &out[CALIB_COPY_GBPS], &out[CALIB_COPY_LATENCY_US]))
        return err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers");
    int rc = bench_attention(m, &out[CALIB_ATTN_NS_PER_TOKEN], e);
    if (rc)
        return rc;
    out[CALIB_RECOMPUTE_NS] = bench_recompute(m);
    if (isnan(out[CALIB_RECOMPUTE_NS]))
        return err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers");
    return 0;
}
