/* Calibration of an executor backend, CPU or CUDA: microbenchmarks that
 * measure what the simulator's cost model needs to price the executor's
 * work on this machine (issue 9), each repeated so the spread shows. The
 * in-situ figures run the chosen backend's own forward pass and read its
 * timings (CUDA events on the GPU); where a figure differs by backend, the
 * item below says how the CUDA one is taken. Weight bytes are the
 * backend's: 4 (FP32) on the CPU, 2 (FP16) on the GPU.
 *
 * - GEMM throughput of the model's projection shapes (batch x positions rows
 *   of 1, 8, 32 and 256) through OpenBLAS, each matrix hot in cache (CUDA:
 *   device_bench_gemm, as the backend runs them: kern_gemv for a few rows,
 *   else cuBLAS over FP16 inputs): the best rate, and one row's
 *   weight bytes over time (both reported).
 * - The decode's weight GEMMs in situ: the executor's own forward pass
 *   decoding R sequences (R = 1, 2, 4, 8, 16 and 32) of synthetic tokens,
 *   12 steps after a 4-token prompt, its timings read back: the median
 *   step's layer GEMM time (with the element-wise work between the GEMMs,
 *   as the executor counts it) per layer weight byte, and the output head's
 *   (a shape of its own) per head byte (the profile's
 *   weight_gemm_ns_per_byte and head_gemm_ns_per_byte tables; the cost model
 *   interpolates them), and a fit (GSL) of the whole pass's time / weight
 *   bytes = 1 / bandwidth + rows / (2 x FLOP rate), reported and written as
 *   hbm_gbps and fp16_tflops (when the fit shows no memory term or no
 *   arithmetic term, as with weights that stay in cache: the one-row rate,
 *   the best in-cache GEMM rate). In situ, because the same GEMMs timed
 *   alone ran up to 30% slower than inside the executor (issue 9).
 * - The same weight GEMMs alone, at every row count from 1 to
 *   CALIB_KGEMM_ROWS (the backend's bench_weights: its own kernels on the
 *   model's matrices, the layers' and the head's apart; enough layers for
 *   64 MiB of weights, so they stream from memory as in the decode): the
 *   kernel's shape between the in-situ rows (issue 49: the CPU's quantised
 *   kernels take rows in pairs and tiles of 8, so 7 rows cost more than
 *   8). The profile's weight_kernel_ns_per_byte and
 *   head_kernel_ns_per_byte; the cost model adds the kernel's departure
 *   from its own straight line between two in-situ rows to the in-situ
 *   line (costmodel.h), and calib_kernel_loo checks that rule by leave-
 *   one-out over the in-situ rows. Not on CUDA yet (no bench_weights).
 * - Host memory read bandwidth (cblas_sasum over a 256 MiB array).
 * - Copy between two separately allocated arenas (the executor's offload and
 *   load; CUDA: pinned host memory and the device, the mean of the two
 *   directions) for sizes from one token's K and V to 16 MiB: weighted
 *   least-squares fit (GSL, relative errors) of time = latency + bytes /
 *   bandwidth.
 * - Attention: the executor's own forward pass decoding to 384 positions
 *   under the scheduler (dense selection, gpu-only placement: the gather of
 *   the attended K and V included), per-layer attention time from its
 *   timings, fitted against the context length: ns per attended token
 *   (slope); then runs attending 16 tokens (local selection) with 1 and
 *   with CALIB_ATTN_FIXED_BATCH sequences: per layer, their medians less 16
 *   tokens' worth a sequence are a + B x b, solved for the fixed cost per
 *   layer (a: on a GPU the kernel launches, whatever the batch) and per
 *   sequence and layer (b; each clamped at 0).
 *   Then, by batch (calib_attn_batch), 8 decode steps after a
 *   CALIB_ATTN_PROMPT prompt: dense runs and SWA runs at 80% sparsity
 *   (every token resident, a fifth read scattered), each step's attention
 *   less the fixed costs (a + B x b per layer), per token it attended: the two tables the cost
 *   model keys by the KV a dense step reads and the KV a sparse one holds.
 * - Recomputation of one token's K and V (two GEMVs and RoPE), ns, as the
 *   executor runs it: a layer's tokens in a row, its weights hot (CUDA: the
 *   K and V GEMM of 16 tokens at once, per token).
 * - The scheduler's own time as the executor spends it (a plan, then the
 *   attention row rounded to FP16 and observed), in situ: for each
 *   selection at 80% sparsity (gpu-only placement), three runs of 12 decode
 *   steps (calib_sched_batch, calib_sched_prompt), and for a selection that
 *   takes a budget a fourth at 50% (calib_sched_sparsity). The first decode step
 *   retires in bulk what the prompt left over the budget (h2o evicts most
 *   of it): its time over the later steps', per token retired over theirs,
 *   is the price of a retired token (sched_ns_per_retired). The later
 *   steps, less that, per layer and step, are taken as
 *   a + B x (s + context x b + attended x d): solved through the runs for
 *   d, ns per stream, step and attended token (observing the row: 0 for a
 *   selection that attends everything), b, ns per
 *   stream, step and context token, s, ns per stream and step, and a, the
 *   fixed ns per layer and step (the scheduler's shared state brought back
 *   after the layer's GEMMs have pushed it out of the caches: large beside
 *   a model whose weights stream from memory, small beside one that stays
 *   in cache). Timed alone, the scheduler ran at a half to a third of this.
 * - The KV arenas' bookkeeping in the same dense runs (the plan applied:
 *   freed copies found, the new token stored), the same three terms: each
 *   stream's slot and flag arrays are scanned over its context, after
 *   being brought back into the caches (a part per stream beside the part
 *   per token).
 */
#ifndef ALISA_CALIBRATE_H
#define ALISA_CALIBRATE_H

#include <stdint.h>

#include "err.h"
#include "forward.h"
#include "model.h"
#include "selection.h"

/* The weight probe's spread over runs (or its drift from a profile) that a
 * quiet machine stays within; beyond it calibrate and validate warn that
 * other work shares the cores (issue 41: a probe read 0.011 GB/s under load
 * against a profile's 21.4). */
#define CALIB_QUIET_SPREAD 0.10

/* Batches the attention tables are measured at (calib_attn_batch). */
#define CALIB_ATTN_N 6

/* Row counts the weight kernels are timed at alone: every one from 1 to
 * this (issue 49: the executor's kernels work in tiles of rows, so the
 * cost between the in-situ rows 1, 2, 4, ..., 32 is not a straight line). */
#define CALIB_KGEMM_ROWS 32

enum calib_figure {
    CALIB_GEMM_GFLOPS,       /* best GEMM rate over the shapes, GFLOP/s */
    CALIB_GEMV_GBPS,         /* one-row GEMM: weight bytes / time, GB/s */
    CALIB_MEM_GBPS,          /* streaming read, GB/s */
    CALIB_COPY_GBPS,         /* arena-to-arena copy bandwidth (fit slope), GB/s */
    CALIB_COPY_LATENCY_US,   /* fixed cost of one copy (fit intercept), us */
    CALIB_STREAM_GBPS,       /* weight GEMMs over the model, memory term (fit), GB/s */
    CALIB_STREAM_GFLOPS,     /* weight GEMMs over the model, arithmetic term (fit), GFLOP/s */
    CALIB_WGEMM_R1,          /* weight GEMMs over the model, ns per weight byte, 1 row; */
    CALIB_WGEMM_R2,          /* ... 2, 4, 8, 16 and 32 rows (calib_wgemm_rows) */
    CALIB_WGEMM_R4,
    CALIB_WGEMM_R8,
    CALIB_WGEMM_R16,
    CALIB_WGEMM_R32,
    CALIB_HEAD_R1,           /* the output head alone, ns per weight byte, 1 row; */
    CALIB_HEAD_R2,           /* ... 2, 4, 8, 16 and 32 rows */
    CALIB_HEAD_R4,
    CALIB_HEAD_R8,
    CALIB_HEAD_R16,
    CALIB_HEAD_R32,
    CALIB_ATTN_NS_PER_TOKEN, /* attention, per layer, per attended token, ns */
    CALIB_ATTN_NS_FIXED,     /* attention, per layer and sequence, fixed, ns (beside
                                CALIB_ATTN_NS_LAYER) */
    CALIB_RECOMPUTE_NS,      /* K and V of one token of one layer, ns */
    CALIB_SCHED_FIRST,       /* the scheduler's own time per stream, step and context
                                token, ns, one figure per selection policy (selection_policies[i]) */
    CALIB_SCHED_LAST = CALIB_SCHED_FIRST + SELECTION_N - 1,
    CALIB_SCHED_LAYER_FIRST, /* ... and its fixed time per layer and step, ns */
    CALIB_SCHED_LAYER_LAST = CALIB_SCHED_LAYER_FIRST + SELECTION_N - 1,
    CALIB_KV_NS_PER_TOKEN,   /* the arenas' bookkeeping per stream, step and context token, ns */
    CALIB_KV_NS_PER_LAYER,   /* ... and its fixed time per layer and step, ns */
    CALIB_WEIGHT_PROBE_GBPS, /* calib_weight_rate for 0.5 s: the machine's speed now, in the
                                units alisa validate samples it in */
    CALIB_ATTN_BATCH_FIRST,  /* attention per attended token, sequence and layer, ns, with
                                calib_attn_batch[i] sequences decoding after
                                CALIB_ATTN_PROMPT tokens: one figure per batch (0: not
                                run, its KV past CALIB_ATTN_MAX_KV) */
    CALIB_ATTN_BATCH_LAST = CALIB_ATTN_BATCH_FIRST + CALIB_ATTN_N - 1,
    CALIB_SCHED_STREAM_FIRST, /* the scheduler's fixed time per stream and step, ns, one
                                 figure per selection policy (with
                                 CALIB_SCHED_FIRST + i and CALIB_SCHED_LAYER_FIRST + i:
                                 layer + streams x (this + context x per token)) */
    CALIB_SCHED_STREAM_LAST = CALIB_SCHED_STREAM_FIRST + SELECTION_N - 1,
    CALIB_SCHED_RETIRED_FIRST, /* the scheduler's time per token a plan retires, ns, one
                                  figure per selection policy (0: the policy
                                  retires none in bulk): the first decode step's bulk
                                  retirement over the steps after it */
    CALIB_SCHED_RETIRED_LAST = CALIB_SCHED_RETIRED_FIRST + SELECTION_N - 1,
    CALIB_ATTN_SPARSE_FIRST, /* as CALIB_ATTN_BATCH_FIRST + i, for sparse attention: SWA
                                attending 20% of the context (80% sparsity), which stays
                                resident, per attended token */
    CALIB_ATTN_SPARSE_LAST = CALIB_ATTN_SPARSE_FIRST + CALIB_ATTN_N - 1,
    CALIB_ATTN_NS_LAYER,     /* attention, per layer and step whatever the batch, fixed, ns
                                (a GPU's kernel launches; CALIB_ATTN_NS_FIXED is per
                                sequence beside it) */
    CALIB_KV_NS_PER_STREAM,  /* the arenas' bookkeeping per stream and step, ns (with
                                CALIB_KV_NS_PER_LAYER and CALIB_KV_NS_PER_TOKEN: layer +
                                streams x (this + context x per token)) */
    CALIB_SCHED_ATTENDED_FIRST, /* the scheduler's time per stream, step and attended token,
                                   ns, one figure per selection policy (0: the runs show
                                   none, or the selection attends its whole context): from
                                   a fourth run at CALIB_SCHED_SPARSITY_LOW */
    CALIB_SCHED_ATTENDED_LAST = CALIB_SCHED_ATTENDED_FIRST + SELECTION_N - 1,
    CALIB_KGEMM_FIRST,       /* the layers' weight GEMMs alone (the backend's bench_weights:
                                its kernels on the model's own matrices), ns per weight byte
                                at 1, 2, ..., CALIB_KGEMM_ROWS rows (NAN: the backend has no
                                such benchmark) */
    CALIB_KGEMM_LAST = CALIB_KGEMM_FIRST + CALIB_KGEMM_ROWS - 1,
    CALIB_KHEAD_FIRST,       /* ... the output head's, ns per head weight byte */
    CALIB_KHEAD_LAST = CALIB_KHEAD_FIRST + CALIB_KGEMM_ROWS - 1,
    CALIB_DENSE_ATTN_LAYER,  /* (these four in this order: bench_dense_attention's)
                                the dense cache's attention (no scheduler: backend_cpu.c
                                dense_attend, rows across the threads), per layer and
                                call, fixed, ns; */
    CALIB_DENSE_ATTN_ROW,    /* ... per row, ns; */
    CALIB_DENSE_ATTN_PROMPT_PAIR, /* ... per query-key pair of a prompt chunk's rows (one
                                     sequence's rows sharing its keys), ns; */
    CALIB_DENSE_ATTN_DECODE_PAIR, /* ... per attended token of a decode row, ns
                                     (calib_dense_prompt and the rest below) */
    CALIB_PGEMM_FIRST,       /* the layers' weight GEMMs in the dense prompt runs (one
                                sequence's prompt as one chunk of calib_dense_prompt[i] rows:
                                what serving's prompt chunks run), ns per layer weight byte
                                (0: not run, past the context) */
    CALIB_PGEMM_LAST = CALIB_PGEMM_FIRST + 4,
    CALIB_DENSE_ONE_LAYER,   /* the dense cache's attention of a one-row call (one sequence
                                decoding: backend_cpu.c dense_attend attends it on the
                                calling thread, no parallel region), per layer, fixed, ns;
                                (0 with the next: not run) */
    CALIB_DENSE_ONE_TOKEN,   /* ... per attended token, ns (calib_dense_one_context) */
    CALIB_DENSE_PARALLEL_MIN, /* the multiply-adds below which the backend attends a dense
                                 call's rows one after another on the calling thread
                                 (llm_backend_info attend_parallel_min; 0: one rule), which
                                 the four CALIB_DENSE_ATTN_* terms were fitted above */
    CALIB_N
};

/* Sequences, prompt tokens and KV sparsity of the scheduler's runs per
 * selection (12 decode steps each): two batches at one context, one batch
 * at a longer context, which separate the per-layer, per-stream and
 * per-token terms, all at 80% sparsity; and, for a selection that takes a
 * budget, the third run again at CALIB_SCHED_SPARSITY_LOW, which separates
 * the tokens it attends from its context (issue 49: at 50% sparsity the
 * scheduler's time ran 30-45% over a price fitted at 80% alone). */
#define CALIB_SCHED_RUNS 4
#define CALIB_SCHED_SPARSITY_LOW 0.5
extern const uint32_t calib_sched_batch[CALIB_SCHED_RUNS];
extern const uint32_t calib_sched_prompt[CALIB_SCHED_RUNS];
extern const double calib_sched_sparsity[CALIB_SCHED_RUNS];

/* Sequences of CALIB_ATTN_BATCH_FIRST + i; those runs decode positions
 * CALIB_ATTN_PROMPT .. + 7, and a batch runs only while the KV it reads in a
 * step stays under CALIB_ATTN_MAX_KV bytes. */
extern const uint32_t calib_attn_batch[CALIB_ATTN_N];
#define CALIB_ATTN_PROMPT 128
#define CALIB_ATTN_FIXED_BATCH 8
#define CALIB_ATTN_MAX_KV (256.0 * 1024 * 1024)

/* The KV bytes resident in one decode step of batch B in those runs (every
 * layer, FP32 K and V, at their mean context; what a dense step reads):
 * what the profile's attention tables are keyed by. Cannot fail. */
double calib_attn_kv_bytes(const struct llm_config *c, uint32_t B);

/* The dense cache's attention runs (CALIB_DENSE_ATTN_*; issue 46: the
 * profile's other attention figures are the scheduler's path, which
 * gathers and runs its rows on one thread, and priced the dense cache's
 * serving iterations up to 1.6x too slow): one sequence's prompt as one
 * chunk of calib_dense_prompt[i] rows from position 0 (those that fit the
 * context), and calib_dense_batch[j] sequences decoding 8 steps after
 * calib_dense_context[j] tokens; each run's median step per layer, then
 * layer + rows x row + prompt pairs x prompt_pair + attended x decode_pair
 * by non-negative least squares (fit_dense_attn_terms). No point of those
 * runs one row: the executor attends a single row on the calling thread,
 * without the threads' parallel region, so one sequence decoding 8 steps
 * after each calib_dense_one_context[k] tokens gives a one-row call's own
 * two terms, fixed and per attended token (fit_two_terms). Where the
 * backend attends a call's rows on the calling thread below a size
 * (CALIB_DENSE_PARALLEL_MIN), the four terms are fitted over the points
 * above it only (a call below runs as one-row calls do): a decode point
 * below it is run with its sequences doubled until it is above (at most
 * CALIB_DENSE_MAX_BATCH), a prompt point below it times its GEMMs only;
 * with fewer than four points above it, the terms are fitted over all. */
#define CALIB_DENSE_PROMPTS 5 /* = CALIB_PGEMM_LAST - CALIB_PGEMM_FIRST + 1 */
#define CALIB_DENSE_DECODES 3
extern const uint32_t calib_dense_prompt[CALIB_DENSE_PROMPTS];
extern const uint32_t calib_dense_batch[CALIB_DENSE_DECODES];
extern const uint32_t calib_dense_context[CALIB_DENSE_DECODES];
#define CALIB_DENSE_MAX_BATCH 64
#define CALIB_DENSE_ONES 2
extern const uint32_t calib_dense_one_context[CALIB_DENSE_ONES];

/* Rows of CALIB_WGEMM_R1 + i. */
extern const int calib_wgemm_rows[6];

/* The kernel's shape between the in-situ rows, checked by leave-one-out
 * over them: for each in-situ row but the first and last (2, 4, 8 and 16),
 * its figure predicted from its two neighbours, by a straight line
 * (line_pct) and by the line plus the kernel's own departure from its
 * straight line between the same rows (kernel_pct, the cost model's rule:
 * costmodel.h), as percent errors against the measured figure; the means
 * of their absolute values. insitu: the six in-situ figures
 * (calib_wgemm_rows); kernel: CALIB_KGEMM_ROWS figures, rows 1 up. Returns
 * the points compared (0 when the kernel's figures are missing). Cannot
 * fail. */
int calib_kernel_loo(const double insitu[6], const double *kernel, double line_pct[4],
                     double kernel_pct[4], double *line_mean, double *kernel_mean);

/* Name of a figure, as in the JSON output ("gemm_gflops", ...). */
const char *calib_name(enum calib_figure f);
/* Of the decode's in-situ weight GEMM figures (CALIB_WGEMM_R1 to R32), the
 * one whose repeats lie furthest apart when that spread ((max - min) /
 * mean, spread[f]) passes CALIB_QUIET_SPREAD, else -1: a profile priced
 * from runs that disagree (calibrate warns). Cannot fail. */
int calib_unquiet_wgemm(const double spread[CALIB_N]);

/* Token ids the in-situ runs feed the model: sequence b of a run to N
 * positions reads ids[(b N + q) % n] at position q. The scheduler's and
 * attention's costs depend on the attention the tokens produce, so a real
 * text gives the figures a real text will see. */
struct calib_text {
    const uint32_t *ids;
    size_t n; /* at least 1 */
};

/* One decode step of an in-situ run as the executor's timings report it:
 * its position, each timing category summed over the layers (backend.h's
 * order, CALIB_CAT_*) and the head, ns; the tokens its plans retired and
 * attended, summed over the layers and sequences. */
enum { CALIB_CAT_GEMM, CALIB_CAT_ATTN, CALIB_CAT_MOVE, CALIB_CAT_RECOMP, CALIB_CAT_SCHED };
struct calib_step {
    double pos;
    double cat[5];
    double head;
    double retired;
    double attended;
};

/* What one in-situ run is: selection sel (budget tokens when non-zero, else
 * `sparsity`, 80% when 0), B sequences, a P-token prompt as one chunk, decode steps
 * at positions P .. N - 1, gpu-only placement with room for every token.
 * With dense_cache: no scheduler, the executor's dense cache (sel
 * "dense"). With prompt: the run's one step is its prompt chunk (pos 0,
 * the B x P rows' timings), not its decode steps. */
struct calib_run {
    const char *sel;
    uint32_t budget, B, P, N;
    double sparsity; /* without a budget: the KV sparsity (0: 80%) */
    int dense_cache, prompt;
};

/* Where the in-situ runs' steps come from: by default the executor's own
 * forward pass with timings (backend kind, tokens from tx). A source fills
 * steps (room for N - P) and *n, or returns an error. Tests install one
 * with known costs to check that the figures calib_measure derives from the
 * runs recover them (calib_set_source(NULL, NULL) restores the executor).
 * The microbenchmarks outside the runs (GEMM, memory, copies,
 * recomputation) are not affected. */
typedef int (*calib_source_fn)(void *ctx, const struct llm_model *m, const struct calib_run *run,
                               struct calib_step *steps, size_t *n, struct alisa_err *e);
void calib_set_source(calib_source_fn fn, void *ctx);

/* The copy figures from n (2 to 16) timed copies of bytes[i] taking ns[i]:
 * ns = latency + bytes / rate by least squares weighted for relative error,
 * the latency held at 0 when the free fit puts it below. *gbps in bytes per
 * ns (= GB/s), *lat_us in us. Cannot fail. */
void calib_fit_copy(const double *bytes, const double *ns, size_t n, double *gbps,
                    double *lat_us);

/* Reports calib_measure's progress: fn(ctx, i, what) as it starts stage i
 * of CALIB_STAGES (the GEMMs, memory, copies, ...), and once more with i =
 * CALIB_STAGES when it ends. NULL: none. For a progress display. */
#define CALIB_STAGES 12
void calib_set_progress(void (*fn)(void *ctx, int stage, const char *what), void *ctx);

/* Bytes of the decode's layer weights and of its head as backend kind
 * holds m's weights (CUDA: FP16; CPU: as loaded, llm_bytes_per_weight,
 * averaged over layers and head so that the profile's one weight_bytes
 * prices both): what the wgemm and head figures are per. Cannot fail. */
double calib_bytes_per_weight(const struct llm_model *m, enum llm_backend kind);
void calib_weight_bytes(const struct llm_model *m, enum llm_backend kind, double *layers,
                        double *head);

/* Runs every microbenchmark once for the shapes of model m (which must be
 * loaded: the attention benchmark runs it) on backend kind and writes the
 * figures into out[CALIB_N]. The in-situ runs read their tokens from tx;
 * NULL: ids spread over the vocabulary (synthetic; calib_weight_rate always
 * uses them). Returns 0, or an error (out of memory, a failed executor run,
 * a device call that failed). */
int calib_measure(const struct llm_model *m, const struct calib_text *tx, enum llm_backend kind,
                  double out[CALIB_N], struct alisa_err *e);

/* The decode's weight pass in situ with one sequence (the layer GEMMs and
 * head of the decode steps of runs of one prompt token and two decode
 * steps, as bench_stream times them, repeated until min_s seconds have
 * passed; the median step) on backend kind: weight bytes / time, GB/s. The machine's state
 * now, to set beside a profile measured earlier; alisa validate samples it
 * before, during and after its run. Returns NAN when the run fails (never
 * zero, negative or infinite otherwise). */
double calib_weight_rate(const struct llm_model *m, enum llm_backend kind, double min_s);

/* The rate calib_weight_rate gave, or would give, on the machine profile hw
 * describes, GB/s: its weight_probe_gbps (the same probe, at calibration)
 * where it has one; else the pass's layers and head at the profile's
 * one-row costs (its tables; the roofline's time per byte where it has
 * none). What alisa validate and serve-run set the machine's samples
 * beside. Cannot fail. */
double calib_profile_weight_rate(const struct llm_model *m, const struct hw_profile *hw);

#endif
