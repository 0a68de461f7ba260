/* Serving (issue 46): requests that arrive over time, scheduled iteration by
 * iteration with continuous batching, each request's KV placed token by
 * token by the scheduler core under any selection and placement policy,
 * priced by the cost model; per-request latencies and their percentiles.
 *
 * Scheduling is the scheduler core's batcher (batcher.h): vLLM V1's rules
 * (vllm/v1/core/sched/scheduler.py, Scheduler.schedule) over a budget of
 * max_batched_tokens token rows an iteration, running requests first,
 * prompts chunked to the budget, the last running request preempted by
 * recomputation when KV runs out. A request produces a token in the
 * iteration that computes its last known token: its first when the prompt
 * is done (the time to first token), one per decode iteration after. A
 * request whose peak footprint no pool holds makes the run out of memory
 * (r->oom) rather than preempt itself for ever.
 *
 * Memory: the GPU's KV pool (its memory times gpu_mem_utilization, less the
 * weights and the activations of a max_batched_tokens prefill, as vLLM's
 * profiling run sizes it; simulate.c, run_capacities; or kv_pool_bytes as
 * given) in blocks of block_tokens tokens per layer, and the host's KV
 * memory. Each request's
 * streams (one per trace layer, weighted by the model layers that read it,
 * as alisa sim maps layers) run through the scheduler core alone, with a
 * GPU tier of gpu_tokens tokens per layer under an offloading placement
 * (the hot buffer; default the pool's even share over max_num_seqs
 * requests) or the whole request under gpu-only; the core's census after
 * each position gives the request's footprint on each tier, the GPU's
 * rounded up to whole blocks per layer. A request's placement is a replay
 * of its trace sequence: it does not depend on the other requests, so it is
 * computed once per (sequence, prompt and output length) and shared. A
 * selection whose method attends its leading model layers densely (Quest's
 * and InfiniGen's first two, selection_ops.dense_layers) has those layers'
 * streams replayed again under the dense selection with the same placement,
 * as alisa sim does, whatever the trace's layer count. A preempted
 * request is recomputed as a prompt of its prompt and generated tokens, and
 * its KV is taken to return to the places its replay had given it.
 *
 * Trace mapping: request i reads trace sequence i mod S among the sequences
 * long enough for it (prompt plus output) whose rows start by its prompt's
 * end, or, when none is long enough and extend is set, among those, its
 * positions past the sequence's end continuing with synthetic rows (alisa
 * sim --extend's model); else it is an error naming the request. Positions below the request's prompt feed prefill; the rest
 * are decode steps whose rows are the trace's rows at the same positions.
 * A prompt chunk (the prompt, or a preempted request's tokens computed
 * again) loads nothing and offloads what the replay had offloaded by then.
 *
 * Time: an iteration's layers run as alisa sim runs a decode step's
 * (simulate.h): the layer's loads on the host-to-device link (the next
 * layer's while this one computes, with prefetch), recomputation then
 * compute on the GPU (at least the host's launches, cost_layer_host_ns),
 * offloads on the device-to-host link; the iteration ends when its last
 * layer's compute and offload have. The next iteration starts then, or at
 * the next arrival when nothing is left to run.
 */
#ifndef ALISA_SERVE_H
#define ALISA_SERVE_H

#include <stdint.h>
#include <stdio.h>

#include "catalog.h"
#include "costmodel.h"
#include "placement.h"
#include "selection.h"
#include "workload.h"

/* The defaults (vLLM V1 for a GPU under 70 GiB or an A100, the LLM class:
 * vllm/engine/arg_utils.py, EngineArgs._set_default_args; block size 16:
 * vllm/platforms/cuda.py; gpu_memory_utilization 0.9). */
#define SERVE_MAX_NUM_SEQS 256
#define SERVE_MAX_BATCHED_TOKENS 8192
#define SERVE_BLOCK_TOKENS 16
#define SERVE_GPU_MEM_UTILIZATION 0.9
/* serve_search_rate's bracket, relative, where alisa serve stops */
#define SERVE_RATE_TOL 0.02

/* The per-iteration timeline's header line, for the simulator's rows and
 * an executor's (alisa serve-run --timeline) alike. */
#define SERVE_TIMELINE_HEADER                                                                 \
    "iteration,start_s,end_s,running,waiting,tokens,prefill_tokens,preemptions,gpu_kv_bytes," \
    "cpu_kv_bytes\n"

struct serve_config {
    const char *trace;                 /* attention trace the requests replay */
    const struct model_shape *model;
    const struct hw_profile *hw;
    const struct sw_profile *sw;       /* host launch costs; NULL: none */
    const struct selection_ops *sel;
    struct sel_params sel_params;
    const struct placement_ops *place; /* any; an offline bound (belady, oracle-cost) reads
                                          each request's own future from its trace sequence */
    enum kv_precision precision;
    double gpu_mem_bytes;              /* 0: the profile's */
    double cpu_mem_bytes;              /* host memory for KV; 0: the profile's */
    double gpu_mem_utilization;        /* vLLM's share of GPU memory (0: the default) */
    double kv_pool_bytes;              /* the GPU KV pool, bytes, as given (an executor's own
                                          pool); 0: sized from memory as vLLM sizes it */
    uint32_t max_num_seqs;             /* running requests at most (0: the default) */
    uint32_t max_batched_tokens;       /* token rows per iteration (0: the default) */
    int no_chunked_prefill;            /* 1: a prompt runs whole in one iteration */
    int dense_cache;                   /* 1: the executor's dense cache serves it (no
                                          scheduler; dense and gpu-only only): priced from
                                          the profile's dense_attn_* figures where it has them */
    uint32_t block_tokens;             /* 0: the default */
    uint32_t gpu_tokens;               /* offloading placements: GPU tokens per request and
                                          layer (0: the pool's share over max_num_seqs) */
    int no_prefetch;                   /* a layer's loads wait for the previous layer */
    int extend;                        /* requests past the trace continue synthetically */
    double slo_ttft_s, slo_tpot_s;     /* objectives for goodput (0: none) */
};

/* One request's outcome; times in seconds from the stream's start. */
struct serve_request {
    double arrival_s, first_token_s, finish_s;
    double ttft_s, tpot_s, e2e_s;      /* tpot: (e2e - ttft) / (output - 1); 0 for output 1 */
    uint32_t prompt_len, output_len, preemptions;
    uint32_t trace_seq;
};

struct serve_stat {
    double mean, p50, p90, p99, max;
};

struct serve_result {
    int oom;                        /* a request can never fit: nothing ran to the end */
    char oom_reason[200];
    uint32_t n;
    struct serve_request *req;      /* (n), owned */
    double makespan_s;              /* first arrival to last token */
    double throughput_tok_s;        /* output tokens / makespan */
    double request_rate_s;          /* requests completed / makespan */
    struct serve_stat ttft, tpot, e2e;
    double slo_attained;            /* share of requests meeting both objectives (1 without) */
    double goodput_req_s;           /* those requests / makespan */
    uint32_t iterations, preemptions;
    double mean_running;            /* requests per iteration */
    double gpu_kv_capacity_bytes, cpu_kv_capacity_bytes;
    double peak_gpu_kv_bytes, peak_cpu_kv_bytes;
    double bytes_h2d, bytes_d2h;
    double recomputed_tokens;       /* by the placement (dropped KV brought back) */
    double repeated_prefill_tokens; /* by preemption */
    double compute_s, transfer_s, stall_s; /* GPU busy, link busy, GPU idle waiting */
    uint32_t gpu_tokens;            /* per request and layer (offloading placements) */
    uint32_t replays;               /* (sequence, prompt) placements replayed */
};

/* Serves w under cfg into *r (release with serve_result_free). A request
 * that can never fit (alone in the pool) makes r->oom a result, not an
 * error; errors are bad traces or configurations (e names the option or
 * file). timeline, when non-NULL, receives a CSV row per iteration. */
int serve_run(const struct serve_config *cfg, const struct workload *w, struct serve_result *r,
              FILE *timeline, struct alisa_err *e);

void serve_result_free(struct serve_result *r);

/* From each request's arrival, first token and finish (r->req, r->n): its
 * TTFT, TPOT and latency, their statistics, the makespan (first arrival to
 * last token), throughput, SLO attainment and goodput, as vLLM's serving
 * benchmark defines them (vllm/benchmarks/serve.py, calculate_metrics);
 * what the simulator and an executor that serves report alike. scratch:
 * (n) doubles. Cannot fail. */
void serve_metrics(struct serve_result *r, double slo_ttft_s, double slo_tpot_s, double *scratch);

/* The highest request rate whose SLO attainment (r->slo_attained: the share
 * of requests meeting both objectives) is at least `attain`: DistServe's
 * goodput (its largest rate meeting the objectives for a target share of
 * requests, 90% in its evaluation). Bisection over [lo, hi] until the
 * bracket is within tol of its lower end, each rate a fresh stream drawn
 * from p at that rate (same seed: the same draws, the gaps scaled by
 * 1 / rate), so attainment is assumed to fall as the rate rises (a stream
 * where it does not can make the answer one of several). *rate gets the
 * rate found, hi when hi attains, 0 when even lo does not; *r the run at
 * *rate (at lo when 0); *runs the runs made. cfg needs an objective. */
int serve_search_rate(const struct serve_config *cfg, const struct wl_params *p, double attain,
                      double lo, double hi, double tol, double *rate, uint32_t *runs,
                      struct serve_result *r, struct alisa_err *e);

#endif
