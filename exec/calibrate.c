/* CPU calibration (contract in calibrate.h): microbenchmarks of the
 * machine, and in-situ measurements read from the executor's own timings on
 * synthetic tokens. Times are wall clock (CLOCK_MONOTONIC); each figure is a
 * median (or a fit) over several steps so one interruption does not move
 * it. Fits are gsl_fit_linear.
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

#include "backend.h"
#include "costmodel.h"
#include "fit.h"
#include "tiered.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The figures' names; the per-selection ranges' come from the registry
 * (calib_name). */
static const char *const names[CALIB_N] = {
    [CALIB_GEMM_GFLOPS] = "gemm_gflops", [CALIB_GEMV_GBPS] = "gemv_gbps",
    [CALIB_MEM_GBPS] = "mem_gbps", [CALIB_COPY_GBPS] = "copy_gbps",
    [CALIB_COPY_LATENCY_US] = "copy_latency_us", [CALIB_STREAM_GBPS] = "stream_gbps",
    [CALIB_STREAM_GFLOPS] = "stream_gflops", [CALIB_WGEMM_R1] = "wgemm_r1_ns_b",
    [CALIB_WGEMM_R2] = "wgemm_r2_ns_b", [CALIB_WGEMM_R4] = "wgemm_r4_ns_b",
    [CALIB_WGEMM_R8] = "wgemm_r8_ns_b", [CALIB_WGEMM_R16] = "wgemm_r16_ns_b",
    [CALIB_WGEMM_R32] = "wgemm_r32_ns_b", [CALIB_HEAD_R1] = "head_r1_ns_b",
    [CALIB_HEAD_R2] = "head_r2_ns_b", [CALIB_HEAD_R4] = "head_r4_ns_b",
    [CALIB_HEAD_R8] = "head_r8_ns_b", [CALIB_HEAD_R16] = "head_r16_ns_b",
    [CALIB_HEAD_R32] = "head_r32_ns_b", [CALIB_ATTN_NS_PER_TOKEN] = "attn_ns_per_token",
    [CALIB_ATTN_NS_FIXED] = "attn_ns_fixed", [CALIB_RECOMPUTE_NS] = "recompute_ns",
    [CALIB_KV_NS_PER_TOKEN] = "kv_ns_per_token", [CALIB_KV_NS_PER_LAYER] = "kv_ns_per_layer",
    [CALIB_WEIGHT_PROBE_GBPS] = "weight_probe_gbps",
    [CALIB_ATTN_BATCH_FIRST] = "attn_b1_ns_t", [CALIB_ATTN_BATCH_FIRST + 1] = "attn_b4_ns_t",
    [CALIB_ATTN_BATCH_FIRST + 2] = "attn_b8_ns_t", [CALIB_ATTN_BATCH_FIRST + 3] = "attn_b16_ns_t",
    [CALIB_ATTN_BATCH_FIRST + 4] = "attn_b32_ns_t", [CALIB_ATTN_BATCH_FIRST + 5] = "attn_b64_ns_t",
    [CALIB_ATTN_SPARSE_FIRST] = "attn_sparse_b1_ns_t",
    [CALIB_ATTN_SPARSE_FIRST + 1] = "attn_sparse_b4_ns_t",
    [CALIB_ATTN_SPARSE_FIRST + 2] = "attn_sparse_b8_ns_t",
    [CALIB_ATTN_SPARSE_FIRST + 3] = "attn_sparse_b16_ns_t",
    [CALIB_ATTN_SPARSE_FIRST + 4] = "attn_sparse_b32_ns_t",
    [CALIB_ATTN_SPARSE_FIRST + 5] = "attn_sparse_b64_ns_t", [CALIB_ATTN_NS_LAYER] = "attn_layer_ns",
    [CALIB_KV_NS_PER_STREAM] = "kv_ns_per_stream",
    [CALIB_DENSE_ATTN_LAYER] = "dense_attn_layer_ns", [CALIB_DENSE_ATTN_ROW] = "dense_attn_row_ns",
    [CALIB_DENSE_ATTN_PROMPT_PAIR] = "dense_attn_prompt_pair_ns",
    [CALIB_DENSE_ATTN_DECODE_PAIR] = "dense_attn_decode_token_ns",
    [CALIB_DENSE_ONE_LAYER] = "dense_attn_one_layer_ns",
    [CALIB_DENSE_ONE_TOKEN] = "dense_attn_one_token_ns",
    [CALIB_DENSE_PARALLEL_MIN] = "dense_attn_parallel_min"};
_Static_assert(CALIB_ATTN_N == 6, "a name for every attention batch");


const int calib_wgemm_rows[6] = {1, 2, 4, 8, 16, 32};

const uint32_t calib_sched_batch[CALIB_SCHED_RUNS] = {1, 16, 4, 4};

const uint32_t calib_sched_prompt[CALIB_SCHED_RUNS] = {48, 48, 144, 144};

const double calib_sched_sparsity[CALIB_SCHED_RUNS] = {0.8, 0.8, 0.8, CALIB_SCHED_SPARSITY_LOW};

const uint32_t calib_attn_batch[CALIB_ATTN_N] = {1, 4, 8, 16, 32, 64};

const uint32_t calib_dense_prompt[CALIB_DENSE_PROMPTS] = {16, 64, 128, 256, 384};

const uint32_t calib_dense_batch[CALIB_DENSE_DECODES] = {4, 16, 4};

const uint32_t calib_dense_context[CALIB_DENSE_DECODES] = {64, 64, 256};

const uint32_t calib_dense_one_context[CALIB_DENSE_ONES] = {64, 256};

const char *calib_name(enum calib_figure f)
{
    /* one figure per selection in five ranges, named after it */
    static char sched[5][SELECTION_N][sizeof "sched__attended_ns" + SEL_NAME_MAX];
    static const struct {
        int first;
        const char *fmt;
    } ranges[5] = {{CALIB_SCHED_FIRST, "sched_%s_ns_t"},
                   {CALIB_SCHED_LAYER_FIRST, "sched_%s_layer_ns"},
                   {CALIB_SCHED_STREAM_FIRST, "sched_%s_stream_ns"},
                   {CALIB_SCHED_RETIRED_FIRST, "sched_%s_retired_ns"},
                   {CALIB_SCHED_ATTENDED_FIRST, "sched_%s_attended_ns"}};
    for (int r = 0; r < 5; r++) {
        int i = (int)f - ranges[r].first;
        if (i >= 0 && i < SELECTION_N) {
            snprintf(sched[r][i], sizeof sched[r][i], ranges[r].fmt,
                     selection_policies[i]->name);
            return sched[r][i];
        }
    }
    /* the prompt runs' GEMMs, named by their rows */
    static char pgemm[CALIB_DENSE_PROMPTS][sizeof "pgemm_r9999_ns_b"];
    int pi = (int)f - CALIB_PGEMM_FIRST;
    if (pi >= 0 && pi < CALIB_DENSE_PROMPTS) {
        snprintf(pgemm[pi], sizeof pgemm[pi], "pgemm_r%u_ns_b", calib_dense_prompt[pi]);
        return pgemm[pi];
    }
    /* one figure per row count in two ranges */
    static char kern[2][CALIB_KGEMM_ROWS][sizeof "khead_r99_ns_b"];
    for (int r = 0; r < 2; r++) {
        int i = (int)f - (r ? CALIB_KHEAD_FIRST : CALIB_KGEMM_FIRST);
        if (i >= 0 && i < CALIB_KGEMM_ROWS) {
            snprintf(kern[r][i], sizeof kern[r][i], r ? "khead_r%d_ns_b" : "kgemm_r%d_ns_b",
                     i + 1);
            return kern[r][i];
        }
    }
    ALISA_ASSERT(names[f]);
    return names[f];
}
_Static_assert(CALIB_KGEMM_ROWS <= 99, "kernel figures' names");
_Static_assert(CALIB_PGEMM_LAST - CALIB_PGEMM_FIRST + 1 == CALIB_DENSE_PROMPTS,
               "a figure per prompt run");

int calib_kernel_loo(const double insitu[6], const double *kernel, double line_pct[4],
                     double kernel_pct[4], double *line_mean, double *kernel_mean)
{
    *line_mean = *kernel_mean = 0;
    _Static_assert(CALIB_KGEMM_ROWS >= 32 && CALIB_KGEMM_ROWS <= GEMM_TABLE_MAX,
                   "the kernel's rows cover the in-situ rows and fit a table");
    struct gemm_table k = {.n = CALIB_KGEMM_ROWS}, none = {0};
    for (int i = 0; i < CALIB_KGEMM_ROWS; i++) {
        if (!(kernel[i] > 0))
            return 0;
        k.rows[i] = i + 1;
        k.ns_per_byte[i] = kernel[i];
    }
    const int *rows = calib_wgemm_rows;
    for (int i = 1; i <= 4; i++) { /* in-situ row i from rows i - 1 and i + 1 */
        struct gemm_table t = {2, {rows[i - 1], rows[i + 1]}, {insitu[i - 1], insitu[i + 1]}};
        double line = cost_gemm_ns_per_byte(&t, &none, rows[i]);
        double kern = cost_gemm_ns_per_byte(&t, &k, rows[i]);
        line_pct[i - 1] = 100 * (line - insitu[i]) / insitu[i];
        kernel_pct[i - 1] = 100 * (kern - insitu[i]) / insitu[i];
        *line_mean += fabs(line_pct[i - 1]) / 4;
        *kernel_mean += fabs(kernel_pct[i - 1]) / 4;
    }
    return 4;
}

/* The layers' and head's weight GEMMs alone at every row count 1 ..
 * CALIB_KGEMM_ROWS (calibrate.h), ns per weight byte; NANs where the backend
 * has no bench_weights. */
static int bench_kernels(const struct llm_model *m, enum llm_backend kind,
                         const struct backend_ops *ops, double layers_ns_b[CALIB_KGEMM_ROWS],
                         double head_ns_b[CALIB_KGEMM_ROWS], struct alisa_err *e)
{
    if (!ops->bench_weights)
        return 0;
    double lb, hb;
    calib_weight_bytes(m, kind, &lb, &hb);
    uint32_t L = m->c.n_layers, n = 1;
    while (n < L && n * lb / L < 64.0 * 1024 * 1024)
        n++;
    double tl, th;
    int rc = ops->bench_weights(m, 1, n, 1, &tl, &th, e);
    for (uint32_t r = 1; !rc && r <= CALIB_KGEMM_ROWS; r++) {
        /* passes enough for 4 ms at this row count (a cache-resident
         * model's pass lasts microseconds), at least 5, at most 255 */
        double per = (tl + th) * r, want = 4e6 / (per > 1 ? per : 1);
        uint32_t passes = want < 5 ? 5 : want > 255 ? 255 : (uint32_t)want;
        if ((rc = ops->bench_weights(m, r, n, passes, &tl, &th, e)))
            return rc;
        layers_ns_b[r - 1] = tl / (n * lb / L);
        head_ns_b[r - 1] = th / hb;
        tl /= r, th /= r; /* per row: the next count's estimate */
    }
    return rc;
}

int calib_unquiet_wgemm(const double spread[CALIB_N])
{
    int worst = CALIB_WGEMM_R1;
    for (int f = CALIB_WGEMM_R1; f <= CALIB_WGEMM_R32; f++)
        worst = spread[f] > spread[worst] ? f : worst;
    return spread[worst] > CALIB_QUIET_SPREAD ? worst : -1;
}

double calib_bytes_per_weight(const struct llm_model *m, enum llm_backend kind)
{
    const struct backend_ops *ops;
    if (backend_of(kind, &ops, NULL))
        return 0.0; /* a backend this build lacks */
    return kind == LLM_BACKEND_CPU ? llm_bytes_per_weight(m) : (double)ops->weight_bytes;
}

/* GEMMs of the model's shapes as the backend runs them (its bench_gemm:
 * OpenBLAS FP32, or cuBLAS with FP16 inputs): best GFLOP/s, and the one-row
 * bandwidth over the weight bytes of all shapes together. */
static int bench_gemm(const struct llm_config *c, const struct backend_ops *ops, double *gflops,
                      double *gbps, struct alisa_err *e)
{
    const unsigned shapes[4][2] = {{c->dim, c->dim}, {c->kv_dim, c->dim},
                                   {c->hidden_dim, c->dim}, {c->dim, c->hidden_dim}};
    const unsigned rows[4] = {1, 8, 32, 256};
    double best = 0, one_row_ns = 0, one_row_bytes = 0;
    for (int s = 0; s < 4; s++)
        for (int r = 0; r < 4; r++) {
            unsigned out = shapes[s][0], in = shapes[s][1];
            double ns;
            int rc = ops->bench_gemm(rows[r], out, in, &ns, e);
            if (rc)
                return rc;
            double rate = 2.0 * rows[r] * out * in / ns; /* FLOP/ns = GFLOP/s */
            best = rate > best ? rate : best;
            if (rows[r] == 1) {
                one_row_ns += ns;
                one_row_bytes += (double)out * in * ops->weight_bytes;
            }
        }
    *gflops = best;
    *gbps = one_row_bytes / one_row_ns;
    return 0;
}

/* Weights of the decode's GEMMs: every layer's seven matrices and the head. */
static double model_weight_params(const struct llm_config *c)
{
    double d = c->dim, kv = c->kv_dim;
    return c->n_layers * (2 * d * d + 2 * d * kv + 3 * d * c->hidden_dim) + c->vocab * d;
}

double calib_profile_weight_rate(const struct llm_model *m, const struct hw_profile *hw)
{
    if (hw->weight_probe_gbps > 0)
        return hw->weight_probe_gbps;
    const struct llm_config *c = &m->c;
    double wb = hw->weight_bytes > 0 ? hw->weight_bytes : 4.0; /* the profile's bytes a weight */
    double head_b = (double)c->vocab * c->dim * wb;
    double layer_b = model_weight_params(c) * wb - head_b;
    double roof = 1.0 / hw->hbm_gbps + 2.0 / wb / (hw->fp16_tflops * 1e3); /* 2 FLOPs a weight */
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
    backend_bench_fill(a, n);
    double t[3];
    volatile float sink = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = now_ns();
        sink += cblas_sasum((int)n, a, 1);
        t[k] = now_ns() - t0;
    }
    (void)sink;
    *gbps = (double)n * sizeof *a / fit_median(t, 3);
    free(a);
    return 0;
}

void calib_fit_copy(const double *bytes, const double *ns, size_t n, double *gbps,
                    double *lat_us)
{
    double ws[16], c0 = 0, c1, cov00, cov01, cov11, chisq;
    ALISA_ASSERT(n >= 2 && n <= 16);
    for (size_t i = 0; i < n; i++)
        ws[i] = 1.0 / (ns[i] * ns[i]); /* relative errors: small copies count as much */
    gsl_fit_wlinear(bytes, 1, ws, 1, ns, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &chisq);
    if (c0 < 0) { /* a latency below 0 is noise: the best fit with none */
        c0 = 0;
        gsl_fit_wmul(bytes, 1, ws, 1, ns, 1, n, &c1, &cov11, &chisq);
    }
    *gbps = 1.0 / c1; /* bytes per ns */
    *lat_us = c0 * 1e-3;
}

/* Copies between the two arenas: time = latency + bytes / bandwidth, fitted
 * (calib_fit_copy) over sizes from one token's K and V up by fours (the
 * backend's bench_copy: memcpy between host allocations on the CPU; pinned
 * host memory and the device on the GPU). */
static int bench_copy(const struct llm_config *c, const struct backend_ops *ops, double *gbps,
                      double *lat_us, struct alisa_err *e)
{
    const size_t max = (size_t)16 << 20;
    double xs[16], ys[16];
    size_t n = 0;
    for (size_t bytes = 2 * c->kv_dim * sizeof(float); bytes <= max && n < 16; bytes *= 4) {
        int rc = ops->bench_copy(bytes, &ys[n], e);
        if (rc)
            return rc;
        xs[n++] = (double)bytes;
    }
    if (n < 2)
        return err_set(e, ALISA_EINVAL, "calibration: a token's K and V (%zu bytes) leave under "
                       "two copy sizes to fit", (size_t)(2 * c->kv_dim * sizeof(float)));
    calib_fit_copy(xs, ys, n, gbps, lat_us);
    return 0;
}

/* ---- in situ: the executor's own forward pass and its timings ---- */

/* A figure measured in situ repeats its run until INSITU_MIN_NS have passed
 * (at most INSITU_MAX_RUNS runs) and takes the median: a small model's runs
 * last milliseconds, and single runs of one figure were seen 35% apart. */
#define INSITU_MIN_NS 5e8
#define INSITU_MAX_RUNS 64

static const char *const insitu_keys[5] = {"gemm_us", "attention_us", "transfer_us",
                                           "recompute_us", "schedule_us"};

/* The executor's forward pass on tokens from tx (calib_run's run) with
 * timings: the decode steps' timings go to steps (room for N - P); *n their
 * count. */
static int executor_run(const struct llm_model *m, const struct calib_text *tx,
                        enum llm_backend kind, const struct calib_run *run,
                        struct calib_step *steps, size_t *n, struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    const char *sel = run->sel;
    const uint32_t budget = run->budget, B = run->B, P = run->P, N = run->N;
    /* the scheduler as a run sets it up (tiered.h), every token on the
     * device: nothing is loaded or recomputed, so nothing is priced */
    struct tiered_request req = {.sel = selection_find(sel),
                                 .sel_params = {.budget_tokens = budget,
                                                .sparsity = budget          ? 0
                                                            : run->sparsity > 0 ? run->sparsity
                                                                                : 0.8}};
    ALISA_ASSERT(req.sel && P >= 1 && P < N && N <= c->seq_len);
    struct llm_state *st = NULL;
    struct tiered tr = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    uint32_t *tok = malloc((size_t)B * P * sizeof *tok);
    int rc = tok ? llm_state_create_on(&st, kind, m, B, N, e)
                 : err_set(e, ALISA_ENOMEM, "out of memory");
    if (!rc && !run->dense_cache)
        rc = tiered_attach(&tr, &req, m, st, B, N, P, e);
    if (!rc && !(f = open_memstream(&buf, &len)))
        rc = err_set(e, ALISA_ENOMEM, "out of memory for timings");
    if (!rc)
        llm_state_timings(st, f);
    /* the text's tokens, each sequence its own window (wrapping); without a
     * text, ids spread over the vocabulary, different per sequence */
    for (uint32_t p = 0; p < N && !rc; p++) {
        uint32_t width = p ? 1 : P;
        if (p && p < P)
            continue;
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t i = 0; i < width; i++) {
                uint32_t q = p + i;
                tok[(size_t)b * width + i] =
                    tx ? tx->ids[((size_t)b * N + q) % tx->n]
                       : q ? 1 + (q * 7919u + b * 104729u) % (c->vocab - 1) : 1;
            }
        if (!llm_forward_chunk(st, tok, p, width, NULL))
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
    }
    if (f)
        fclose(f);
    llm_state_free(st);
    tiered_free(&tr);
    free(tok);
    *n = 0;
    /* by position: the prompt chunk's line is pos 0, the decode steps' P
     * on (a run without a scheduler knows no prompt: its "phase" says
     * decode throughout) */
    for (char *line = buf; !rc && line && *line && *n < (run->prompt ? 1 : N - P);) {
        char *nl = strchr(line, '\n');
        json_t *j = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        json_t *layers = j ? json_object_get(j, "layers") : NULL;
        json_t *at = j ? json_object_get(j, "pos") : NULL;
        json_int_t pos = json_is_integer(at) ? json_integer_value(at) : -1;
        if (layers && pos >= 0 && (run->prompt ? pos == 0 : pos >= (json_int_t)P)) {
            struct calib_step *s = &steps[(*n)++];
            memset(s, 0, sizeof *s);
            s->pos = (double)pos;
            s->head = json_number_value(json_object_get(j, "head_us")) * 1e3;
            for (size_t l = 0; l < json_array_size(layers); l++) {
                json_t *x = json_array_get(layers, l);
                for (int k = 0; k < 5; k++)
                    s->cat[k] += json_number_value(json_object_get(x, insitu_keys[k])) * 1e3;
                s->retired += json_number_value(json_object_get(x, "retired"));
                s->attended += json_number_value(json_object_get(x, "attended"));
            }
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    return rc;
}

static void (*progress_fn)(void *ctx, int stage, const char *what);
static void *progress_ctx;

void calib_set_progress(void (*fn)(void *ctx, int stage, const char *what), void *ctx)
{
    progress_fn = fn;
    progress_ctx = ctx;
}

/* calib_measure has reached stage i of CALIB_STAGES */
static void stage(int i, const char *what)
{
    if (progress_fn)
        progress_fn(progress_ctx, i, what);
}

static calib_source_fn source_fn;
static void *source_ctx;

void calib_set_source(calib_source_fn fn, void *ctx)
{
    source_fn = fn;
    source_ctx = ctx;
}

/* One in-situ run from the installed source, else the executor. */
static int insitu_run_as(const struct llm_model *m, const struct calib_text *tx,
                         enum llm_backend kind, const struct calib_run *run,
                         struct calib_step *steps, size_t *n, struct alisa_err *e)
{
    *n = 0;
    int rc = source_fn ? source_fn(source_ctx, m, run, steps, n, e)
                       : executor_run(m, tx, kind, run, steps, n, e);
    if (!rc && *n == 0)
        rc = err_set(e, ALISA_EINVAL, "calibration: no %s timings from the executor",
                     run->prompt ? "prompt" : "decode");
    return rc;
}

/* ... at the default sparsity (80%) */
static int insitu_run(const struct llm_model *m, const struct calib_text *tx,
                      enum llm_backend kind, const char *sel, uint32_t budget, uint32_t B,
                      uint32_t P, uint32_t N, struct calib_step *steps, size_t *n,
                      struct alisa_err *e)
{
    const struct calib_run run = {.sel = sel, .budget = budget, .B = B, .P = P, .N = N};
    return insitu_run_as(m, tx, kind, &run, steps, n, e);
}

void calib_weight_bytes(const struct llm_model *m, enum llm_backend kind, double *layers,
                        double *head)
{
    const struct llm_config *c = &m->c;
    double wb = calib_bytes_per_weight(m, kind);
    *head = (double)c->vocab * c->dim * wb;
    *layers = model_weight_params(c) * wb - *head;
}

/* The decode's weight GEMMs in situ (calibrate.h): for each row count R,
 * R sequences after a 4-token prompt, 12 decode steps; the median step's
 * layer GEMM time (with the element-wise work between the GEMMs, as the
 * executor counts it) per layer weight byte, and the head's per head byte.
 * Then the fit of the whole pass's time per byte against rows. */
static int bench_stream(const struct llm_model *m, const struct calib_text *tx,
                        enum llm_backend kind, double *gbps,
                        double *gflops,
                        double layers_ns_per_byte[6], double head_ns_per_byte[6],
                        struct alisa_err *e)
{
    const int *rows = calib_wgemm_rows;
    const uint32_t P = 4, G = 12;
    struct calib_step steps[12];
    double lb, hb, xs[6], ys[6], tl[12 * INSITU_MAX_RUNS], th[12 * INSITU_MAX_RUNS],
        tt[12 * INSITU_MAX_RUNS];
    calib_weight_bytes(m, kind, &lb, &hb);
    for (int i = 0; i < 6; i++) {
        size_t n = 0, all = 0;
        double t0 = now_ns();
        for (int r = 0; r < INSITU_MAX_RUNS && (r == 0 || now_ns() - t0 < INSITU_MIN_NS); r++) {
            int rc = insitu_run(m, tx, kind, "dense", 0, (uint32_t)rows[i], P, P + G, steps, &n, e);
            if (rc)
                return rc;
            for (size_t k = 0; k < n; k++, all++) {
                tl[all] = steps[k].cat[CALIB_CAT_GEMM];
                th[all] = steps[k].head;
                tt[all] = tl[all] + th[all];
            }
        }
        layers_ns_per_byte[i] = fit_median(tl, all) / lb;
        head_ns_per_byte[i] = fit_median(th, all) / hb;
        xs[i] = rows[i];
        ys[i] = fit_median(tt, all) / (lb + hb);
    }
    double c0, c1, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(xs, 1, ys, 1, 6, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    *gbps = c0 > 0 ? 1.0 / c0 : 0; /* 0: no memory term showed (weights in cache) */
    *gflops = c1 > 0 ? 1.0 / (2.0 * c1) : 0; /* 0: the arithmetic did not show */
    return 0;
}

double calib_weight_rate(const struct llm_model *m, enum llm_backend kind, double min_s)
{
    struct calib_step steps[2];
    double t[2 * INSITU_MAX_RUNS], lb, hb, t0 = now_ns();
    size_t n = 0, all = 0;
    struct alisa_err e;
    for (int r = 0; r < INSITU_MAX_RUNS && (r == 0 || now_ns() - t0 < min_s * 1e9); r++) {
        if (insitu_run(m, NULL, kind, "dense", 0, 1, 1, 3, steps, &n, &e))
            return NAN;
        for (size_t k = 0; k < n; k++)
            t[all++] = steps[k].cat[CALIB_CAT_GEMM] + steps[k].head;
    }
    calib_weight_bytes(m, kind, &lb, &hb);
    double med = fit_median(t, all);
    return med > 0 ? (lb + hb) / med : NAN;
}

/* Attention per attended token: the slope of a dense run's per-layer time
 * against the context (one sequence to 384 positions, or the model's
 * context; each position's median over the repeated runs); its fixed costs:
 * runs attending 16 tokens (local selection) of 1 and CALIB_ATTN_FIXED_BATCH
 * sequences, each the median step per layer less 16 tokens' worth a
 * sequence, = per layer + B x per sequence (calibrate.h). */
static int bench_attention(const struct llm_model *m, const struct calib_text *tx,
                           enum llm_backend kind,
                           double *ns_per_token, double *ns_fixed, double *ns_layer,
                           struct alisa_err *e)
{
    const uint32_t N = m->c.seq_len < 384 ? m->c.seq_len : 384, K = 16, L = m->c.n_layers;
    struct calib_step *steps = malloc(N * sizeof *steps);
    double *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys);
    double *per = malloc((size_t)N * INSITU_MAX_RUNS * sizeof *per), t0 = now_ns();
    size_t n = 0, n0 = 0, runs = 0;
    int rc = steps && xs && ys && per ? 0 : err_set(e, ALISA_ENOMEM, "out of memory for timings");
    /* the run repeated (a small model's lasts a tenth of a second, and
     * single runs were seen 30% apart): each position's median */
    for (; !rc && runs < INSITU_MAX_RUNS && (runs == 0 || now_ns() - t0 < INSITU_MIN_NS); runs++) {
        rc = insitu_run(m, tx, kind, "dense", 0, 1, 1, N, steps, &n, e);
        if (!rc && n <= 2)
            rc = err_set(e, ALISA_EINVAL, "calibration: %zu attention timings, too few to fit", n);
        if (!rc && runs > 0 && n != n0)
            rc = err_set(e, ALISA_EINVAL, "calibration: attention runs of %zu and %zu steps",
                         n0, n);
        for (size_t i = 0; !rc && i < n; i++) {
            xs[i] = steps[i].pos + 1;
            per[i * INSITU_MAX_RUNS + runs] = steps[i].cat[CALIB_CAT_ATTN] / L;
        }
        n0 = n;
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            ys[i] = fit_median(per + i * INSITU_MAX_RUNS, runs);
        double c0, c1, cov00, cov01, cov11, sumsq;
        gsl_fit_linear(xs, 1, ys, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        *ns_per_token = c1;
    }
    /* the fixed parts: runs attending K tokens, the median step per layer,
     * with one sequence and with CALIB_ATTN_FIXED_BATCH */
    const uint32_t batch[2] = {1, CALIB_ATTN_FIXED_BATCH};
    double fixed[2] = {0, 0};
    for (int w = 0; w < 2 && !rc; w++) {
        size_t all = 0;
        t0 = now_ns();
        for (size_t r = 0;
             !rc && r < INSITU_MAX_RUNS && (r == 0 || now_ns() - t0 < INSITU_MIN_NS); r++) {
            rc = insitu_run(m, tx, kind, "local", K, batch[w], K, N < 8 * K ? N : 8 * K, steps,
                            &n, e);
            for (size_t i = 0; !rc && i < n && all < (size_t)N * INSITU_MAX_RUNS; i++)
                per[all++] = steps[i].cat[CALIB_CAT_ATTN] / L;
        }
        if (!rc)
            fixed[w] = fit_median(per, all) - batch[w] * K * *ns_per_token;
    }
    if (!rc) { /* fixed[w] = layer + batch[w] x sequence */
        double seq = (fixed[1] - fixed[0]) / (batch[1] - batch[0]);
        *ns_fixed = seq > 0 ? seq : 0;
        *ns_layer = fixed[0] - *ns_fixed > 0 ? fixed[0] - *ns_fixed : 0;
    }
    free(steps);
    free(xs);
    free(ys);
    free(per);
    return rc;
}

#define ATTN_STEPS 8

/* One dense-cache point (calibrate.h): the run repeated, its steps' median
 * attention per layer into *t and median layer GEMM time into *gemm. */
static int dense_point(const struct llm_model *m, const struct calib_text *tx,
                       enum llm_backend kind, const struct calib_run *run, double *t,
                       double *gemm, struct alisa_err *e)
{
    struct calib_step steps[ATTN_STEPS];
    double per[ATTN_STEPS * INSITU_MAX_RUNS], g[ATTN_STEPS * INSITU_MAX_RUNS], t0 = now_ns();
    size_t all = 0, n = 0;
    for (int r = 0; r < INSITU_MAX_RUNS && (r == 0 || now_ns() - t0 < INSITU_MIN_NS); r++) {
        int rc = insitu_run_as(m, tx, kind, run, steps, &n, e);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++, all++) {
            per[all] = steps[i].cat[CALIB_CAT_ATTN] / m->c.n_layers;
            g[all] = steps[i].cat[CALIB_CAT_GEMM];
        }
    }
    *t = fit_median(per, all);
    *gemm = fit_median(g, all);
    return 0;
}

/* The dense cache's attention terms (calibrate.h, CALIB_DENSE_ATTN_*) into
 * x: layer, row, prompt pair, decode token; the prompt runs' layer GEMMs
 * per weight byte into pgemm (CALIB_PGEMM_*, 0 where not run); a one-row
 * call's fixed and per-token terms into one (CALIB_DENSE_ONE_*, 0 when
 * a context does not fit); the backend's parallel rule into *par_min
 * (CALIB_DENSE_PARALLEL_MIN). */
static int bench_dense_attention(const struct llm_model *m, const struct calib_text *tx,
                                 enum llm_backend kind, double x[4],
                                 double pgemm[CALIB_DENSE_PROMPTS], double one[2],
                                 double *par_min, struct alisa_err *e)
{
    double lb, hb, gemm;
    calib_weight_bytes(m, kind, &lb, &hb);
    struct llm_backend_info info;
    int rc = llm_backend_info(kind, &info, e);
    if (rc)
        return rc;
    /* a call's multiply-adds a query-key pair (backend_cpu.c dense_attend) */
    const double min = *par_min = info.attend_parallel_min, pair = 2.0 * m->c.dim;
    const uint32_t S = m->c.seq_len;
    enum { NP = CALIB_DENSE_PROMPTS + CALIB_DENSE_DECODES };
    double R[NP], pp[NP], dp[NP], t[NP];
    int above[NP];
    size_t np = 0, n_above = 0;
    for (int i = 0; !rc && i < CALIB_DENSE_PROMPTS; i++) {
        const uint32_t P = calib_dense_prompt[i];
        pgemm[i] = 0;
        if (P + 1 > S)
            continue;
        const struct calib_run run = {.sel = "dense", .B = 1, .P = P, .N = P + 1,
                                      .dense_cache = 1, .prompt = 1};
        R[np] = P;
        pp[np] = (double)P * (P + 1) / 2;
        dp[np] = 0;
        above[np] = pp[np] * pair >= min;
        n_above += above[np];
        if (!(rc = dense_point(m, tx, kind, &run, &t[np++], &gemm, e)))
            pgemm[i] = gemm / lb;
    }
    for (int i = 0; !rc && i < CALIB_DENSE_DECODES; i++) {
        uint32_t B = calib_dense_batch[i];
        const uint32_t P = calib_dense_context[i];
        if (P + ATTN_STEPS > S)
            continue;
        /* the executor applies the rule call by call: every step above it
         * from the first (P + 1 keys a sequence), as serving's larger calls */
        while (B * (P + 1.0) * pair < min && 2 * B <= CALIB_DENSE_MAX_BATCH)
            B *= 2;
        const struct calib_run run = {.sel = "dense", .B = B, .P = P, .N = P + ATTN_STEPS,
                                      .dense_cache = 1};
        R[np] = B;
        pp[np] = 0;
        dp[np] = B * (P + (ATTN_STEPS + 1) / 2.0); /* the steps' mean context */
        above[np] = B * (P + 1.0) * pair >= min;
        n_above += above[np];
        rc = dense_point(m, tx, kind, &run, &t[np++], &gemm, e);
    }
    x[0] = x[1] = x[2] = x[3] = 0;
    if (!rc && n_above >= 4 && n_above < np) { /* the points above the rule, first */
        size_t k = 0;
        for (size_t i = 0; i < np; i++)
            if (above[i]) {
                R[k] = R[i], pp[k] = pp[i], dp[k] = dp[i], t[k] = t[i];
                k++;
            }
        np = k;
    }
    if (!rc && np >= 4)
        fit_dense_attn_terms(np, R, pp, dp, t, x);
    /* one sequence decoding: the one-row call */
    double c1[CALIB_DENSE_ONES], t1[CALIB_DENSE_ONES];
    one[0] = one[1] = 0;
    if (calib_dense_one_context[CALIB_DENSE_ONES - 1] + ATTN_STEPS > S)
        return rc; /* the longer context does not fit: not measured */
    for (int i = 0; !rc && i < CALIB_DENSE_ONES; i++) {
        const uint32_t P = calib_dense_one_context[i];
        const struct calib_run run = {.sel = "dense", .B = 1, .P = P, .N = P + ATTN_STEPS,
                                      .dense_cache = 1};
        c1[i] = P + (ATTN_STEPS + 1) / 2.0; /* the steps' mean context */
        rc = dense_point(m, tx, kind, &run, &t1[i], &gemm, e);
    }
    _Static_assert(CALIB_DENSE_ONES == 2, "a line through two points");
    if (!rc)
        fit_two_terms(c1[0], t1[0], c1[1], t1[1], &one[0], &one[1]);
    return rc;
}

/* The prompt of the batch runs: CALIB_ATTN_PROMPT, or half a short context. */
static uint32_t attn_prompt(const struct llm_config *c)
{
    return c->seq_len >= 2 * CALIB_ATTN_PROMPT ? CALIB_ATTN_PROMPT : c->seq_len / 2;
}

double calib_attn_kv_bytes(const struct llm_config *c, uint32_t B)
{
    double context = attn_prompt(c) + (ATTN_STEPS + 1) / 2.0; /* step at pos attends pos + 1 */
    return (double)B * c->n_layers * context * 2.0 * c->kv_dim * sizeof(float);
}

/* Attention per attended token with more sequences, whose KV outgrows the
 * caches: for each calib_attn_batch count, runs of selection sel (dense, or
 * swa at 80% sparsity: scattered reads over a resident context five times
 * what they read) of ATTN_STEPS decode steps after an attn_prompt() prompt
 * (repeated for INSITU_MIN_NS), each step's attention less `layer` per
 * layer and `fixed` per sequence and layer, over the tokens it attended; the
 * median. */
static int bench_attention_batches(const struct llm_model *m, const struct calib_text *tx,
                                   enum llm_backend kind, const char *sel, double layer,
                                   double fixed, double out[CALIB_ATTN_N], struct alisa_err *e)
{
    const struct llm_config *c = &m->c;
    const uint32_t P = attn_prompt(c), L = c->n_layers;
    struct calib_step steps[ATTN_STEPS];
    double per[ATTN_STEPS * INSITU_MAX_RUNS];
    for (int i = 0; i < CALIB_ATTN_N; i++) {
        uint32_t B = calib_attn_batch[i];
        out[i] = 0;
        if (calib_attn_kv_bytes(c, B) > CALIB_ATTN_MAX_KV)
            continue;
        size_t n = 0, all = 0;
        double t0 = now_ns();
        for (int r = 0; r < INSITU_MAX_RUNS && (r == 0 || now_ns() - t0 < INSITU_MIN_NS); r++) {
            int rc = insitu_run(m, tx, kind, sel, 0, B, P, P + ATTN_STEPS, steps, &n, e);
            if (rc)
                return rc;
            for (size_t k = 0; k < n; k++) {
                if (!(steps[k].attended > 0))
                    return err_set(e, ALISA_EINVAL, "calibration: a %s step at position %.0f "
                                   "attended no tokens", sel, steps[k].pos);
                per[all++] = (steps[k].cat[CALIB_CAT_ATTN] - L * (layer + B * fixed)) /
                             steps[k].attended;
            }
        }
        out[i] = fit_median(per, all);
    }
    return 0;
}

/* One of the scheduler's runs, repeated (the medians over the repeats):
 * per layer and step after the first, the scheduler's and the arenas'
 * time, tokens retired, a stream's context and attended tokens; and the
 * first step's excess over them (time, retired, context, attended). */
struct sched_point {
    double B, t, tk, r, c, a;
    double t_first, r_first, c_first, a_first;
};

static int sched_point(const struct llm_model *m, const struct calib_text *tx,
                       enum llm_backend kind, const struct calib_run *run,
                       struct sched_point *o, struct alisa_err *e)
{
    const double L = m->c.n_layers, B = run->B;
    struct calib_step steps[12];
    double sched[INSITU_MAX_RUNS], kv[INSITU_MAX_RUNS], ret[INSITU_MAX_RUNS],
        extra[INSITU_MAX_RUNS], att[INSITU_MAX_RUNS], t0 = now_ns();
    ALISA_ASSERT(run->N - run->P <= 12);
    int runs = 0;
    for (; runs < INSITU_MAX_RUNS && (runs == 0 || now_ns() - t0 < INSITU_MIN_NS); runs++) {
        size_t n = 0;
        int rc = insitu_run_as(m, tx, kind, run, steps, &n, e);
        if (rc)
            return rc;
        if (n < 2)
            return err_set(e, ALISA_EINVAL, "calibration: %zu scheduler timings, too few to fit",
                           n);
        double t = 0, mv = 0, r = 0, a = 0, ctx = 0, k1 = (double)(n - 1);
        for (size_t k = 1; k < n; k++) {
            t += steps[k].cat[CALIB_CAT_SCHED];
            mv += steps[k].cat[CALIB_CAT_MOVE];
            r += steps[k].retired;
            a += steps[k].attended;
            ctx += steps[k].pos + 1;
        }
        att[runs] = a / (L * B * k1); /* a stream's, a layer's */
        sched[runs] = t / (L * k1);
        kv[runs] = mv / (L * k1);
        ret[runs] = r / (L * k1);
        extra[runs] = steps[0].cat[CALIB_CAT_SCHED] / L - sched[runs];
        o->c = ctx / k1;
        o->r_first = steps[0].retired / L;
        o->c_first = steps[0].pos + 1 - o->c;
        o->a_first = steps[0].attended / (L * B) - att[runs];
    }
    o->B = B;
    o->a = fit_median(att, (size_t)runs);
    o->t = fit_median(sched, (size_t)runs);
    o->tk = fit_median(kv, (size_t)runs);
    o->r = fit_median(ret, (size_t)runs);
    o->t_first = fit_median(extra, (size_t)runs);
    o->r_first -= o->r;
    return 0;
}

/* The scheduler's terms from its runs: the retired price from the first
 * steps' excess (pooled) less what their other terms explain, and the
 * four terms fitted to the later steps less their retired tokens' price;
 * alternated for 16 rounds, from no other terms (the first estimate is the
 * plain excess per retired token). Each round corrects the price by the
 * first step's few extra context and attended tokens over the many it
 * retires, so a few rounds settle it; test_calibrate's known workload is
 * recovered to 1e-6. x = {layer, stream, context token, attended token}. */
static void sched_solve(const struct sched_point *pt, int n, int attended, double x[4],
                        double *per_retired)
{
    double bs[CALIB_SCHED_RUNS], cs[CALIB_SCHED_RUNS], as[CALIB_SCHED_RUNS],
        ts[CALIB_SCHED_RUNS];
    x[0] = x[1] = x[2] = x[3] = 0;
    for (int it = 0; it < 16; it++) {
        double dt = 0, dr = 0;
        for (int w = 0; w < n; w++) {
            dt += pt[w].t_first - pt[w].B * (pt[w].c_first * x[2] + pt[w].a_first * x[3]);
            dr += pt[w].r_first;
        }
        *per_retired = dr > 0 && dt > 0 ? dt / dr : 0;
        for (int w = 0; w < n; w++) {
            bs[w] = pt[w].B, cs[w] = pt[w].c, as[w] = attended ? pt[w].a : pt[w].c;
            ts[w] = pt[w].t - *per_retired * pt[w].r;
        }
        fit_sched_terms((size_t)n, bs, cs, as, ts, x);
    }
}

/* The scheduler's own time (plans, and the attention rows rounded to FP16
 * and observed) and the arenas' bookkeeping, as the executor spends them:
 * for each selection, runs of calib_sched_batch[w] sequences after
 * calib_sched_prompt[w] prompt tokens (as one chunk; less for a short
 * context) at calib_sched_sparsity[w] and 12 decode steps, repeated (the
 * first three runs for a selection without a budget: dense has no
 * sparsity to vary). The first decode step retires in bulk what the
 * prompt left over the selection's budget, which prices a retired token
 * (sched_solve); the steps after it give fit_sched_terms its points; the
 * arenas' bookkeeping, from the dense runs, fit_three_terms the same
 * three. */
static int bench_schedule(const struct llm_model *m, const struct calib_text *tx,
                          enum llm_backend kind, double out[CALIB_N], struct alisa_err *e)
{
    const uint32_t G = 12;
    for (int i = 0; i < SELECTION_N; i++) {
        /* the CUDA pipeline runs no selection that reads the step's own row
         * (backend_cuda.c): its prices stay unmeasured (NAN, left out of the
         * profile, so a run of it on this profile is refused by name) */
        if (kind == LLM_BACKEND_CUDA && selection_policies[i]->needs_present)
            continue;
        int dense = !selection_policies[i]->budgeted;
        const int n = dense ? 3 : CALIB_SCHED_RUNS;
        struct sched_point pt[CALIB_SCHED_RUNS];
        for (int w = 0; w < n; w++) {
            const uint32_t P = m->c.seq_len >= calib_sched_prompt[w] + G ? calib_sched_prompt[w]
                                                                          : m->c.seq_len / 2;
            const struct calib_run run = {.sel = selection_policies[i]->name,
                                          .B = calib_sched_batch[w], .P = P, .N = P + G,
                                          .sparsity = calib_sched_sparsity[w]};
            int rc = sched_point(m, tx, kind, &run, &pt[w], e);
            if (rc)
                return rc;
        }
        double x[4];
        sched_solve(pt, n, !dense, x, &out[CALIB_SCHED_RETIRED_FIRST + i]);
        out[CALIB_SCHED_LAYER_FIRST + i] = x[0];
        out[CALIB_SCHED_STREAM_FIRST + i] = x[1];
        out[CALIB_SCHED_FIRST + i] = x[2];
        out[CALIB_SCHED_ATTENDED_FIRST + i] = x[3];
        if (dense) {
            const double bs[3] = {pt[0].B, pt[1].B, pt[2].B}, cs[3] = {pt[0].c, pt[1].c, pt[2].c},
                         tk[3] = {pt[0].tk, pt[1].tk, pt[2].tk};
            fit_three_terms(bs, cs, tk, &out[CALIB_KV_NS_PER_LAYER], &out[CALIB_KV_NS_PER_STREAM],
                            &out[CALIB_KV_NS_PER_TOKEN]);
        }
    }
    return 0;
}

int calib_measure(const struct llm_model *m, const struct calib_text *tx, enum llm_backend kind,
                  double out[CALIB_N], struct alisa_err *e)
{
    for (int i = 0; i < CALIB_N; i++)
        out[i] = NAN;
    const struct backend_ops *ops;
    int rc = backend_of(kind, &ops, e);
    stage(0, "GEMMs");
    if (!rc)
        rc = bench_gemm(&m->c, ops, &out[CALIB_GEMM_GFLOPS], &out[CALIB_GEMV_GBPS], e);
    stage(1, "memory");
    if (!rc && bench_mem(&out[CALIB_MEM_GBPS]))
        rc = err_set(e, ALISA_ENOMEM, "out of memory for the calibration buffers");
    stage(2, "copies");
    if (!rc)
        rc = bench_copy(&m->c, ops, &out[CALIB_COPY_GBPS], &out[CALIB_COPY_LATENCY_US], e);
    stage(3, "weight pass");
    if (!rc)
        rc = bench_stream(m, tx, kind, &out[CALIB_STREAM_GBPS], &out[CALIB_STREAM_GFLOPS],
                          &out[CALIB_WGEMM_R1], &out[CALIB_HEAD_R1], e);
    if (rc)
        return rc;
    if (!(out[CALIB_STREAM_GBPS] > 0)) /* no positive intercept: the one-row rate */
        out[CALIB_STREAM_GBPS] = 1.0 / out[CALIB_WGEMM_R1];
    if (out[CALIB_STREAM_GFLOPS] <= 0) /* cache-resident model: its best in-cache rate */
        out[CALIB_STREAM_GFLOPS] = out[CALIB_GEMM_GFLOPS];
    stage(4, "weight kernels");
    if ((rc = bench_kernels(m, kind, ops, &out[CALIB_KGEMM_FIRST], &out[CALIB_KHEAD_FIRST], e)))
        return rc;
    stage(5, "attention");
    if ((rc = bench_attention(m, tx, kind, &out[CALIB_ATTN_NS_PER_TOKEN], &out[CALIB_ATTN_NS_FIXED],
                              &out[CALIB_ATTN_NS_LAYER], e)) ||
        (stage(6, "scheduler"), rc = bench_schedule(m, tx, kind, out, e)))
        return rc;
    stage(7, "recomputation");
    out[CALIB_RECOMPUTE_NS] = ops->bench_recompute(m);
    if (isnan(out[CALIB_RECOMPUTE_NS]))
        return err_set(e, ALISA_EIO, "calibration: the recomputation benchmark failed");
    stage(8, "attention by batch");
    if ((rc = bench_attention_batches(m, tx, kind, "dense", out[CALIB_ATTN_NS_LAYER],
                                      out[CALIB_ATTN_NS_FIXED], &out[CALIB_ATTN_BATCH_FIRST],
                                      e)) ||
        (stage(9, "sparse attention by batch"),
         rc = bench_attention_batches(m, tx, kind, "swa", out[CALIB_ATTN_NS_LAYER],
                                      out[CALIB_ATTN_NS_FIXED], &out[CALIB_ATTN_SPARSE_FIRST],
                                      e)))
        return rc;
    stage(10, "dense-cache attention");
    if ((rc = bench_dense_attention(m, tx, kind, &out[CALIB_DENSE_ATTN_LAYER],
                                    &out[CALIB_PGEMM_FIRST], &out[CALIB_DENSE_ONE_LAYER],
                                    &out[CALIB_DENSE_PARALLEL_MIN], e)))
        return rc;
    stage(11, "weight probe");
    out[CALIB_WEIGHT_PROBE_GBPS] = calib_weight_rate(m, kind, 0.5);
    if (isnan(out[CALIB_WEIGHT_PROBE_GBPS]))
        return err_set(e, ALISA_ENOMEM, "out of memory for the weight-rate probe");
    stage(CALIB_STAGES, "done");
    return 0;
}
