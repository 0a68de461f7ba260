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
#include "fp16.h"
#include "kvstore.h"
#include "trace_gen.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static const char *const names[CALIB_N] = {
    "gemm_gflops",   "gemv_gbps",     "mem_gbps",      "copy_gbps",       "copy_latency_us",
    "stream_gbps",   "stream_gflops", "wgemm_r1_ns_b", "wgemm_r2_ns_b",   "wgemm_r4_ns_b",
    "wgemm_r8_ns_b", "wgemm_r16_ns_b", "wgemm_r32_ns_b", "head_r1_ns_b",  "head_r2_ns_b",
    "head_r4_ns_b",  "head_r8_ns_b",  "head_r16_ns_b", "head_r32_ns_b", "attn_ns_per_token",
    "attn_ns_fixed", "recompute_ns",  "sched_dense_ns_t", "sched_local_ns_t",
    "sched_strided_ns_t", "sched_streaming_ns_t", "sched_swa_ns_t", "sched_h2o_ns_t"};

const char *const calib_sched_policies[6] = {"dense", "local", "strided", "streaming", "swa", "h2o"};

const int calib_wgemm_rows[6] = {1, 2, 4, 8, 16, 32};

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

/* y (R, out) = x (R, in) W^T as the forward pass calls it. */
static void gemm_rows(const float *x, const float *w, float *y, int R, int out, int in)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, w, in, 0.0f, y,
                out);
}

/* ns of y (R, out) = x (R, in) W^T, median of 5 after a warm-up. */
static double time_gemm(const float *x, const float *w, float *y, int R, int out, int in)
{
    double t[5];
    gemm_rows(x, w, y, R, out, in);
    for (int k = 0; k < 5; k++) {
        double t0 = now_ns();
        gemm_rows(x, w, y, R, out, in);
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

/* Weights of the decode's GEMMs: every layer's seven matrices and the head. */
static double model_weight_params(const struct llm_config *c)
{
    double d = c->dim, kv = c->kv_dim;
    return c->n_layers * (2 * d * d + 2 * d * kv + 3 * d * c->hidden_dim) + c->vocab * d;
}

/* One pass over the model's weight matrices with R rows, ns; the head's
 * share into *head_ns when non-NULL. */
static double weight_pass(const struct llm_model *m, const float *x, float *y, int R,
                          double *head_ns)
{
    const struct llm_config *c = &m->c;
    const struct llm_weights *w = &m->w;
    const int d = (int)c->dim, kv = (int)c->kv_dim, hd = (int)c->hidden_dim;
    double t0 = now_ns();
    for (uint32_t l = 0; l < c->n_layers; l++) {
        gemm_rows(x, w->wq + (size_t)l * d * d, y, R, d, d);
        gemm_rows(x, w->wk + (size_t)l * kv * d, y, R, kv, d);
        gemm_rows(x, w->wv + (size_t)l * kv * d, y, R, kv, d);
        gemm_rows(x, w->wo + (size_t)l * d * d, y, R, d, d);
        gemm_rows(x, w->w1 + (size_t)l * hd * d, y, R, hd, d);
        gemm_rows(x, w->w3 + (size_t)l * hd * d, y, R, hd, d);
        gemm_rows(x, w->w2 + (size_t)l * d * hd, y, R, d, hd);
    }
    double t1 = now_ns();
    gemm_rows(x, w->wcls, y, R, (int)c->vocab, d);
    double t2 = now_ns();
    if (head_ns)
        *head_ns = t2 - t1;
    return t2 - t0;
}

/* The decode's weight GEMMs over the model's own matrices (calibrate.h):
 * time / bytes = 1 / bandwidth + rows / (2 x FLOP rate), fitted over rows
 * 1..32 (median of 3 passes each). */
static int bench_stream(const struct llm_model *m, double *gbps, double *gflops,
                        double layers_ns_per_byte[6], double head_ns_per_byte[6])
{
    const struct llm_config *c = &m->c;
    const int *rows = calib_wgemm_rows;
    size_t wide = c->vocab > c->hidden_dim ? c->vocab : c->hidden_dim;
    float *x = malloc((size_t)32 * wide * sizeof *x), *y = malloc((size_t)32 * wide * sizeof *y);
    if (!x || !y) {
        free(x), free(y);
        return -1;
    }
    fill(x, (size_t)32 * wide);
    double bytes = model_weight_params(c) * sizeof(float), xs[6], ys[6];
    double head_bytes = (double)c->vocab * c->dim * sizeof(float);
    weight_pass(m, x, y, 1, NULL); /* warm-up */
    for (int i = 0; i < 6; i++) {
        double t[3], th[3], tl[3];
        for (int k = 0; k < 3; k++) {
            t[k] = weight_pass(m, x, y, rows[i], &th[k]);
            tl[k] = t[k] - th[k];
        }
        xs[i] = rows[i];
        ys[i] = median(t, 3) / bytes;
        layers_ns_per_byte[i] = median(tl, 3) / (bytes - head_bytes);
        head_ns_per_byte[i] = median(th, 3) / head_bytes;
    }
    double c0, c1, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(xs, 1, ys, 1, 6, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    *gbps = c0 > 0 ? 1.0 / c0 : 0; /* 0: no memory term showed (weights in cache) */
    *gflops = c1 > 0 ? 1.0 / (2.0 * c1) : 0; /* 0: the arithmetic did not show */
    free(x), free(y);
    return 0;
}

double calib_weight_rate(const struct llm_model *m)
{
    const struct llm_config *c = &m->c;
    size_t wide = c->vocab > c->hidden_dim ? c->vocab : c->hidden_dim;
    float *x = malloc(wide * sizeof *x), *y = malloc(wide * sizeof *y);
    if (!x || !y) {
        free(x), free(y);
        return NAN;
    }
    fill(x, wide);
    double t[3];
    weight_pass(m, x, y, 1, NULL);
    for (int k = 0; k < 3; k++)
        t[k] = weight_pass(m, x, y, 1, NULL);
    free(x), free(y);
    return model_weight_params(c) * sizeof(float) / median(t, 3);
}

double calib_profile_weight_rate(const struct llm_model *m, const struct hw_profile *hw)
{
    const struct llm_config *c = &m->c;
    double head_b = (double)c->vocab * c->dim * sizeof(float);
    double layer_b = model_weight_params(c) * sizeof(float) - head_b;
    double roof = 1.0 / hw->hbm_gbps + 0.5 / (hw->fp16_tflops * 1e3); /* FP32: 2 FLOPs a 4 bytes */
    double lt = hw->weight_gemm.n && hw->weight_gemm.rows[0] == 1 ? hw->weight_gemm.ns_per_byte[0]
                                                                   : roof;
    double ht = hw->head_gemm.n && hw->head_gemm.rows[0] == 1 ? hw->head_gemm.ns_per_byte[0] : lt;
    return (layer_b + head_b) / (layer_b * lt + head_b * ht);
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

/* The executor decoding one sequence to N positions under the scheduler as
 * validation runs it (the selection given, gpu-only placement, room for
 * every token), so the gather of the attended K and V is timed with the
 * attention: per decode step, the mean per-layer attention time into
 * ys[*n] (ns) and the context length into xs[*n]. */
static int attention_run(const struct llm_model *m, const char *selection, uint32_t budget,
                         uint32_t N, double *xs, double *ys, size_t *n, struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    struct scheduler_config sc = {.sel = selection_find(selection),
                                  .place = placement_find("gpu-only"),
                                  .n_streams = c->n_layers, .max_len = N,
                                  .sel_params = {.budget_tokens = budget}};
    ALISA_ASSERT(sc.sel && sc.place);
    sc.place_params.kv_bytes = 2ull * c->kv_dim * sizeof(float);
    sc.place_params.act_bytes = (uint64_t)c->dim * sizeof(float);
    sc.place_params.gpu_bytes = (uint64_t)N * sc.place_params.kv_bytes;
    sc.place_params.load_ns = sc.place_params.recompute_ns = 1;
    sc.place_params.gpu_fraction = -1;
    struct llm_state *st = NULL;
    struct scheduler *sched = NULL;
    struct kvstore *ks = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int rc = scheduler_create(&sched, &sc, NULL, e);
    if (!rc)
        rc = kvstore_create(&ks, c, c->n_layers, N, N, 0, 0, e);
    if (!rc)
        rc = llm_state_create(&st, m, 1, N, e);
    if (!rc && !(f = open_memstream(&buf, &len)))
        rc = err_set(e, ALISA_ENOMEM, "out of memory for timings");
    if (!rc) {
        llm_state_tiered(st, sched, ks, 1);
        llm_state_timings(st, f);
    }
    for (uint32_t p = 0; p < N && !rc; p++) {
        uint32_t tok = p ? 1 + (p * 7919u) % (m->c.vocab - 1) : 1;
        if (!llm_forward(st, &tok, p, NULL))
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
    }
    if (f)
        fclose(f);
    llm_state_free(st);
    scheduler_destroy(sched);
    kvstore_free(ks);
    *n = 0;
    for (char *line = buf; !rc && line && *line && *n < N;) {
        char *nl = strchr(line, '\n');
        json_t *j = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        json_t *layers = j ? json_object_get(j, "layers") : NULL;
        if (layers && json_array_size(layers) && json_integer_value(json_object_get(j, "pos")) > 0) {
            double sum = 0;
            for (size_t l = 0; l < json_array_size(layers); l++)
                sum += json_number_value(json_object_get(json_array_get(layers, l), "attention_us"));
            xs[*n] = (double)(json_integer_value(json_object_get(j, "pos")) + 1);
            ys[*n] = sum / (double)json_array_size(layers) * 1e3;
            (*n)++;
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    return rc;
}

/* Attention per attended token: the slope of a dense run's per-layer time
 * against the context (384 positions, or the model's context). Its fixed
 * cost per sequence and layer: a run attending 16 tokens (local selection)
 * from position 16 on, its mean time less 16 tokens at that slope. */
static int bench_attention(const struct llm_model *m, double *ns_per_token, double *ns_fixed,
                           struct alisa_err *e)
{
    const uint32_t N = m->c.seq_len < 384 ? m->c.seq_len : 384, K = 16;
    double *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys);
    size_t n = 0;
    int rc = xs && ys ? attention_run(m, "dense", 0, N, xs, ys, &n, e)
                      : err_set(e, ALISA_ENOMEM, "out of memory for timings");
    if (!rc && n <= 2)
        rc = err_set(e, ALISA_EINVAL, "calibration: %zu attention timings, too few to fit", n);
    if (!rc) {
        double c0, c1, cov00, cov01, cov11, sumsq;
        gsl_fit_linear(xs, 1, ys, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        *ns_per_token = c1;
        rc = attention_run(m, "local", K, N < 8 * K ? N : 8 * K, xs, ys, &n, e);
    }
    if (!rc) {
        double sum = 0, cnt = 0;
        for (size_t i = 0; i < n; i++)
            if (xs[i] >= K) {
                sum += ys[i];
                cnt++;
            }
        double fixed = cnt > 0 ? sum / cnt - K * *ns_per_token : 0;
        *ns_fixed = fixed > 0 ? fixed : 0;
    }
    free(xs);
    free(ys);
    return rc;
}

/* K and V of one token from its layer input (kvstore_recompute, the
 * executor's own), as the executor recomputes: a layer's tokens one after
 * another right after its own K/V projection, the layer's weights hot. Per
 * layer one warm-up call, then 16 tokens timed; the median over layers of
 * 5 rounds. */
static double bench_recompute(const struct llm_model *m)
{
    const struct llm_config *c = &m->c;
    float *act = malloc(c->dim * sizeof *act), *k = malloc(2 * c->kv_dim * sizeof *k);
    double *t = malloc((size_t)5 * c->n_layers * sizeof *t);
    if (!act || !k || !t) {
        free(act), free(k), free(t);
        return NAN;
    }
    fill(act, c->dim);
    size_t n = 0;
    for (int r = 0; r < 5; r++)
        for (uint32_t l = 0; l < c->n_layers; l++) {
            kvstore_recompute(m, l, act, 0, k, k + c->kv_dim);
            double t0 = now_ns();
            for (uint32_t tok = 1; tok <= 16; tok++)
                kvstore_recompute(m, l, act, tok, k, k + c->kv_dim);
            t[n++] = (now_ns() - t0) / 16;
        }
    double med = median(t, n);
    free(act), free(k), free(t);
    return med;
}

/* The scheduler alone as forward.c drives it per (stream, step): a plan,
 * then the attention row (weight on the attended tokens, rounded to FP16
 * as forward.c rounds it) observed. Streams interleaved, so each finds its
 * state as cold as in the executor. The weights are rows of trace_gen's
 * attention model (sinks, heavy hitters, recency; drawn before the clock
 * starts): like real attention they span many orders of magnitude, down to
 * FP16's subnormals, whose handling is part of the cost. ns per stream,
 * step and context token. */
static int bench_schedule(const char *selection, double *ns_per_token, struct alisa_err *e)
{
    const uint32_t S = 128, N = 256;
    struct scheduler_config sc = {.sel = selection_find(selection),
                                  .place = placement_find("gpu-only"), .n_streams = S,
                                  .max_len = N, .sel_params = {.sparsity = 0.8}};
    ALISA_ASSERT(sc.sel && sc.place);
    sc.place_params.kv_bytes = 1;
    sc.place_params.act_bytes = 1;
    sc.place_params.gpu_bytes = N;
    sc.place_params.load_ns = sc.place_params.recompute_ns = 1;
    sc.place_params.gpu_fraction = -1;
    struct scheduler *sched;
    int rc = scheduler_create(&sched, &sc, NULL, e);
    float *row = malloc(N * sizeof *row);
    if (!rc && !row)
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
    if (rc) {
        scheduler_destroy(sched);
        free(row);
        return rc;
    }
    /* rows 0..N-1 of one synthetic stream, row pos at pool + pos (pos + 1) / 2 */
    float *pool = malloc((size_t)N * (N + 1) / 2 * sizeof *pool);
    struct trace_gen_params gp;
    trace_gen_defaults(&gp);
    gp.n_layers = 1;
    struct gen_stream *gs = NULL;
    if (!pool || (rc = gen_stream_create(&gs, &gp, 0, N, 1, e))) {
        scheduler_destroy(sched);
        free(row), free(pool);
        return rc ? rc : err_set(e, ALISA_ENOMEM, "out of memory");
    }
    for (uint32_t pos = 0; pos < N; pos++)
        gen_stream_row(gs, pos, pool + (size_t)pos * (pos + 1) / 2);
    gen_stream_destroy(gs);
    struct scheduler_plan plan;
    for (uint32_t st = 0; st < S; st++) { /* position 0: a one-token prompt */
        scheduler_prefill(sched, st, 0, NULL, 1, 0, &plan);
        row[0] = 1.0f;
        scheduler_observe_prefill(sched, st, 0, row, 1);
    }
    double t0 = now_ns(), tokens = 0;
    for (uint32_t pos = 1; pos < N; pos++)
        for (uint32_t st = 0; st < S; st++) {
            scheduler_step(sched, st, pos, 0, &plan);
            uint32_t n = pos + 1;
            memset(row, 0, n * sizeof *row);
            const float *w = pool + (size_t)pos * (pos + 1) / 2;
            for (uint32_t a = 0; a < plan.n_attended; a++)
                row[plan.attended[a]] = fp16_to_float(fp16_from_float(w[plan.attended[a]]));
            scheduler_observe_dense(sched, st, row);
            tokens += n;
        }
    *ns_per_token = (now_ns() - t0) / tokens;
    scheduler_destroy(sched);
    free(row);
    free(pool);
    return 0;
}

int calib_measure(const struct llm_model *m, double out[CALIB_N], struct alisa_err *e)
{
    for (int i = 0; i < CALIB_N; i++)
        out[i] = NAN;
    if (bench_gemm(&m->c, &out[CALIB_GEMM_GFLOPS], &out[CALIB_GEMV_GBPS]) ||
        bench_mem(&out[CALIB_MEM_GBPS]) ||
        bench_copy(&m->c, &out[CALIB_COPY_GBPS], &out[CALIB_COPY_LATENCY_US]) ||
        bench_stream(m, &out[CALIB_STREAM_GBPS], &out[CALIB_STREAM_GFLOPS], &out[CALIB_WGEMM_R1],
                     &out[CALIB_HEAD_R1]))
        return err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers");
    if (!(out[CALIB_STREAM_GBPS] > 0)) /* no positive intercept: the one-row rate */
        out[CALIB_STREAM_GBPS] = 1.0 / out[CALIB_WGEMM_R1];
    if (out[CALIB_STREAM_GFLOPS] <= 0) /* cache-resident model: its best in-cache rate */
        out[CALIB_STREAM_GFLOPS] = out[CALIB_GEMM_GFLOPS];
    int rc = bench_attention(m, &out[CALIB_ATTN_NS_PER_TOKEN], &out[CALIB_ATTN_NS_FIXED], e);
    if (rc)
        return rc;
    for (int i = 0; i < 6 && !rc; i++)
        rc = bench_schedule(calib_sched_policies[i], &out[CALIB_SCHED_FIRST + i], e);
    if (rc)
        return rc;
    out[CALIB_RECOMPUTE_NS] = bench_recompute(m);
    if (isnan(out[CALIB_RECOMPUTE_NS]))
        return err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers");
    return 0;
}
