/* The simulator shell (contract and model in simulate.h): resolves a system
 * preset, replays the trace through the scheduler core for the model's
 * streams, turns the per-step decisions into a task graph and runs it on
 * modelled resources with the event queue.
 *
 * Owns pricing (through costmodel.h) and ordering; decides nothing about
 * tokens. Every duration is an integer number of ns, rounded up.
 */
#include "simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alisa_search.h"
#include "selstats.h"
#include "evq.h"
#include "replay.h"
#include "trace.h"
#include "trace_gen.h"

#define GIB 1073741824.0

/* Fields a system leaves out are 0: no weight streaming, no search, not
 * paged, no CPU attention; gpu_fraction is set by every system that uses
 * flexgen-static and is -1 (largest that fits) where it does not matter. */
const struct sim_system sim_systems[] = {
    {.name = "alisa",
     .summary = "ALISA as the paper specifies it: swa selection, alisa placement running the "
                "schedule (alpha, beta, p1, p2) ALISA's search finds for the workload (greedy, "
                "or --search grid, or --schedule): the oldest tokens to the CPU by age, the "
                "oldest of those deleted and recomputed when attended, CPU tokens loaded for "
                "the step only; weights on the GPU",
     .selection = "swa", .placement = "alisa", .gpu_fraction = -1, .software = "alisa"},
    {.name = "alisa-cache",
     .summary = "Beyond the paper: ALISA's tiers as a cache (alisa-cache placement: fetched "
                "tokens stay on the GPU, the oldest leave first, a CPU copy only when loading "
                "beats recomputing), swa selection; weights on the GPU",
     .selection = "swa", .placement = "alisa-cache", .gpu_fraction = -1, .software = "alisa"},
    /* FlexGen's Policy (flexgen/flex_opt.py) chosen by its LP
     * (flexgen/experimental/cost_model.py, solve_lp) over our cost terms */
    {.name = "flexgen",
     .summary = "FlexGen with --cpu-cache-compute: dense attention, the weight and KV shares "
                "on the GPU that FlexGen's policy LP picks (flexgen-static placement: a fixed "
                "share of every token's KV on the GPU; streamed weights cross the link every "
                "step), attention over the KV's CPU share computed by the CPU where it lies",
     .selection = "dense", .placement = "flexgen-static", .gpu_fraction = -1,
     .cpu_attention = 1, .flexgen_policy = SIM_FLEXGEN_LP, .software = "flexgen"},
    /* FlexGen's default cache path: --cpu-cache-compute is off unless given
     * (flexgen/flex_opt.py, add_parser_arguments), so the CPU share of a
     * layer's KV is copied to the GPU every step */
    {.name = "flexgen-copy",
     .summary = "FlexGen with its default cache path (--cpu-cache-compute off) and its LP's "
                "policy: as flexgen, but the CPU share of each layer's KV is copied to the GPU "
                "every step and attended there, staged by the host from pageable into pinned "
                "memory first (FlexGen's general_copy)",
     .selection = "dense", .placement = "flexgen-static", .gpu_fraction = -1,
     .flexgen_policy = SIM_FLEXGEN_LP, .software = "flexgen"},
    /* FlexGen run as it starts: --percent 100 0 100 0 100 0 and no
     * --cpu-cache-compute (flex_opt.py, add_parser_arguments) */
    {.name = "flexgen-default",
     .summary = "FlexGen with its default policy (--percent 100 0 100 0 100 0: weights and "
                "KV on the GPU) and cache path: out of memory once the KV outgrows the GPU",
     .selection = "dense", .placement = "flexgen-static", .gpu_fraction = 1,
     .flexgen_policy = SIM_FLEXGEN_DEFAULT, .software = "flexgen"},
    /* Accelerate's hooks move a layer's tensors in its pre-forward hook, so
     * no copy runs ahead of compute (accelerate/hooks.py, AlignDevicesHook) */
    {.name = "accelerate",
     .summary = "HF Accelerate as the ALISA paper describes it: dense attention, the whole KV "
                "on the CPU and loaded every step (flexgen-static with a GPU share of 0), no "
                "prefetch (each layer's copy waits for the previous layer); weights on the GPU",
     .selection = "dense", .placement = "flexgen-static", .gpu_fraction = 0, .no_prefetch = 1,
     .software = "hf-eager"},
    /* FlexGen's baseline script, benchmark/hf_ds/hf_opt.py get_hf_opt_model
     * with --cpu-offload: the decoder layers on "cpu", embeddings and head on
     * the GPU; generate's KV stays on the GPU. Each layer's weights go up in
     * its pre-forward hook (accelerate/hooks.py, AlignDevicesHook.pre_forward:
     * set_module_tensor_to_device from the CPU state dict, ordinary pageable
     * tensors), so the copy is a pageable one (weights_pageable) */
    {.name = "accelerate-offload",
     .summary = "HF Accelerate as FlexGen's baseline script runs it: dense attention, KV on the "
                "GPU (gpu-only), the decoder layers' weights on the CPU copied to the GPU layer "
                "by layer every step, no prefetch",
     .selection = "dense", .placement = "gpu-only", .weights_cpu_share = 1, .gpu_fraction = -1,
     .no_prefetch = 1, .weights_pageable = 1, .software = "hf-eager"},
    /* as FlexGen's baseline script configures ZeRO-3 (benchmark/hf_ds/hf_opt.py
     * get_ds_opt_model: offload_param to the CPU, stage3_prefetch_bucket_size 0) */
    {.name = "deepspeed",
     .summary = "DeepSpeed-ZeRO inference: dense attention, KV on the GPU (gpu-only: out of "
                "memory when it does not fit), weights on the CPU streamed layer by layer every "
                "step without prefetch (stage3_prefetch_bucket_size 0, as FlexGen's benchmark)",
     .selection = "dense", .placement = "gpu-only", .weights_cpu_share = 1, .gpu_fraction = -1,
     .no_prefetch = 1, .software = "hf-eager"},
    {.name = "h2o",
     .summary = "H2O: h2o selection (evicted tokens freed for good), gpu-only placement",
     .selection = "h2o", .placement = "gpu-only", .gpu_fraction = -1, .software = "hf-eager"},
    {.name = "dense-gpu",
     .summary = "Dense attention with everything on the GPU: the ideal when it fits",
     .selection = "dense", .placement = "gpu-only", .gpu_fraction = -1},
    /* vLLM's defaults: 16-token blocks, gpu_memory_utilization 0.9 and
     * max_num_seqs 256 (vllm/engine/arg_utils.py, EngineArgs); KV space =
     * total x utilization - the profiling run's peak, whose prefill is
     * max_num_batched_tokens = max(max_model_len, 2048) tokens without
     * chunked prefill (vllm/config.py, SchedulerConfig; vllm/worker/worker.py,
     * Worker.determine_num_available_blocks) */
    {.name = "vllm",
     .summary = "vLLM: dense attention, KV on the GPU in 16-token blocks, its space 0.9 of "
                "GPU memory minus the weights and a modelled peak of its profiling run; when "
                "blocks run out the most recently admitted sequence is preempted and later "
                "recomputed (prefill over its tokens), so the effective batch shrinks instead "
                "of running out of memory; weights on the GPU",
     .selection = "dense", .placement = "gpu-only", .gpu_fraction = -1, .block_tokens = 16,
     .gpu_mem_utilization = 0.9, .profile_seqs = 256, .software = "vllm"},
    {.name = "executor",
     .summary = "alisa's executor as it runs: the selection and placement given (default dense, "
                "gpu-only), no schedule search, no CPU attention, flexgen-static by whole "
                "sequences as FlexGen's code splits them; with a serial profile (alisa "
                "calibrate) every task runs on one processor. What alisa validate simulates",
     .selection = "dense", .placement = "gpu-only", .gpu_fraction = -1, .inputs_outside = 1,
     .flexgen_whole = 1},
    {.name = NULL},
};

const struct sim_system *sim_system_find(const char *name)
{
    for (size_t i = 0; sim_systems[i].name; i++)
        if (strcmp(sim_systems[i].name, name) == 0)
            return &sim_systems[i];
    return NULL;
}

int sim_resolve(struct sim_config *cfg, struct alisa_err *e)
{
    if (!cfg->sel && !(cfg->sel = selection_find(cfg->system->selection)))
        return err_set(e, ALISA_ENOTFOUND, "system %s: unknown selection '%s'", cfg->system->name,
                       cfg->system->selection);
    if (!cfg->place && !(cfg->place = placement_find(cfg->system->placement)))
        return err_set(e, ALISA_ENOTFOUND, "system %s: unknown placement '%s'", cfg->system->name,
                       cfg->system->placement);
    if (cfg->gpu_mem_bytes <= 0)
        cfg->gpu_mem_bytes = cfg->hw->gpu_mem_gib * GIB;
    if (cfg->cpu_mem_bytes <= 0)
        cfg->cpu_mem_bytes = cfg->hw->host_dram_gib * GIB;
    return 0;
}

/* Decisions of one trace stream at one decode step. */
struct stream_step {
    float attended;
    float misses;
    float recomputed;
    float moved;     /* tokens (per head: (token, head) units) loaded plus offloaded: a
                        serial profile's copies, two each */
    float retired;   /* tokens the plan retired for good */
    double gpu_bytes; /* KV bytes on the GPU tier after the step */
    double h2d, d2h; /* bytes */
    double cpu_attend; /* KV bytes attended on the CPU */
};

/* One trace stream's prefill, summed over its prompt positions. */
struct prefill_stream {
    double d2h;     /* bytes the placement offloaded */
    double host;    /* tokens on the host only after each position: the
                     * executor's stepwise prefill reads every earlier token
                     * where it lies (backend_cpu.c, tiered_gather's prefill
                     * branch, kvstore_fetch), so it loads these */
    double dropped; /* tokens dropped after each position: kvstore_fetch
                     * recomputes these from their kept inputs */
};

struct collect {
    uint32_t n_seqs, trace_layers, prompt_len, gen_len;
    uint32_t heads;              /* plans a trace stream gets a step: one per KV head with
                                    sim_config.per_head, else 1 */
    const double *mult;          /* (n_seqs * trace_layers) model streams per trace stream */
    struct stream_step *steps;   /* (gen_len, trace_layers, n_seqs) */
    struct prefill_stream *prefill; /* (trace_layers * n_seqs) */
    double *gpu_at, *cpu_at;     /* (gen_len) weighted KV bytes after each step */
};

static void collect_plan(void *user, const struct scheduler_plan *p, uint32_t seq, uint32_t layer,
                         const float *row)
{
    (void)row;
    struct collect *c = user;
    if (p->place.oom)
        return;
    /* a (sequence, layer)'s plans summed over its KV heads: counts of
     * (token, head) units as tokens' worth (a head's unit is 1/heads of a
     * token's K and V, of its attention and of its recomputation), bytes as
     * bytes, moves as the copies they are */
    const double k = 1.0 / (c->heads ? c->heads : 1);
    size_t stream = (size_t)layer * c->n_seqs + seq;
    if (p->prefill) {
        c->prefill[stream].d2h += (double)p->place.bytes_d2h;
        c->prefill[stream].host += k * p->census.cpu;
        c->prefill[stream].dropped += k * p->census.dropped;
        return;
    }
    uint32_t j = p->pos - c->prompt_len;
    if (j >= c->gen_len)
        return;
    struct stream_step *s = &c->steps[((size_t)j * c->trace_layers + layer) * c->n_seqs + seq];
    s->attended += (float)(k * p->n_attended);
    s->misses += (float)(k * p->place.gpu_misses);
    s->recomputed += (float)(k * p->place.n_recompute);
    s->moved += (float)(p->place.n_load + p->place.n_offload);
    s->retired += (float)(k * p->n_retired);
    s->gpu_bytes += (double)p->gpu_bytes;
    s->h2d += (double)p->place.bytes_h2d;
    s->d2h += (double)p->place.bytes_d2h;
    s->cpu_attend += (double)p->place.bytes_cpu_attend;
    double m = c->mult[seq * c->trace_layers + layer];
    c->gpu_at[j] += m * (double)p->gpu_bytes;
    c->cpu_at[j] += m * (double)p->cpu_bytes;
}

enum sim_res { RES_GPU, RES_H2D, RES_D2H, RES_CPU, N_RES };

struct task {
    uint64_t dur_ns;
    uint64_t start_ns, end_ns;
    uint32_t deps_left;
    uint8_t res;
};

struct engine {
    struct task *t;        /* (n) */
    uint32_t n;
    uint32_t *succ_start;  /* (n + 1) CSR of successors */
    uint32_t *succ;
    uint32_t *queue[N_RES]; /* FIFO of ready tasks per resource, (n) each */
    uint32_t head[N_RES], tail[N_RES];
    int busy[N_RES];
    struct evq *q;
    uint64_t events;
};

static uint64_t ns_of(double ns) { return ns <= 0 ? 0 : (uint64_t)ceil(ns); }

static int start_next(struct engine *g, int res, struct alisa_err *e)
{
    if (g->busy[res] || g->head[res] == g->tail[res])
        return 0;
    uint32_t id = g->queue[res][g->head[res]++];
    g->busy[res] = 1;
    g->t[id].start_ns = evq_now(g->q);
    return evq_push(g->q, evq_now(g->q) + g->t[id].dur_ns, 0, id, NULL, e);
}

static int make_ready(struct engine *g, uint32_t id, struct alisa_err *e)
{
    struct task *t = &g->t[id];
    if (t->dur_ns == 0) { /* nothing to move or compute: done at once, no resource */
        t->start_ns = evq_now(g->q);
        return evq_push(g->q, evq_now(g->q), 0, id, NULL, e);
    }
    g->queue[t->res][g->tail[t->res]++] = id;
    return start_next(g, t->res, e);
}

static int engine_run(struct engine *g, struct alisa_err *e)
{
    int rc = 0;
    for (uint32_t i = 0; i < g->n && !rc; i++)
        if (g->t[i].deps_left == 0)
            rc = make_ready(g, i, e);
    struct evq_event ev;
    while (!rc && evq_pop(g->q, &ev)) {
        g->events++;
        struct task *t = &g->t[ev.id];
        t->end_ns = ev.time_ns;
        if (t->dur_ns > 0) {
            g->busy[t->res] = 0;
            rc = start_next(g, t->res, e);
        }
        for (uint32_t k = g->succ_start[ev.id]; k < g->succ_start[ev.id + 1] && !rc; k++) {
            struct task *s = &g->t[g->succ[k]];
            ALISA_ASSERT(s->deps_left > 0);
            if (--s->deps_left == 0)
                rc = make_ready(g, g->succ[k], e);
        }
    }
    for (uint32_t i = 0; i < g->n && !rc; i++)
        ALISA_ASSERT(g->t[i].deps_left == 0 && g->t[i].end_ns >= g->t[i].start_ns);
    return rc;
}

/* Task ids: 0 prefill, 1 prefill offload, then five per global layer g. */
#define T_PREFILL 0u
#define T_PREFILL_OFF 1u
#define T_PER_LAYER 5u
#define T_LOAD(g) (2u + T_PER_LAYER * (g))
#define T_RECOMP(g) (3u + T_PER_LAYER * (g))
#define T_CPU_ATTN(g) (4u + T_PER_LAYER * (g))
#define T_COMPUTE(g) (5u + T_PER_LAYER * (g))
#define T_OFFLOAD(g) (6u + T_PER_LAYER * (g))

struct edge {
    uint32_t from, to;
};

/* prefetch: layer x+1's copies may run beside layer x's compute (they wait
 * for layer x-1's), FlexGen's generation loop (flexgen/flex_opt.py,
 * OptLM.generation_loop_overlap_single_batch: load layer j+1, compute layer
 * j, sync); without it they wait for layer x's compute. */
static int build_edges(struct engine *g, uint32_t layers, uint32_t steps, int prefetch)
{
    uint32_t G = layers * steps;
    size_t cap = 5 + (size_t)G * 8 + layers, n = 0;
    struct edge *ed = malloc(cap * sizeof *ed);
    if (!ed)
        return ALISA_ENOMEM;
#define EDGE(a, b) (ed[n++] = (struct edge){(a), (b)})
    EDGE(T_PREFILL, T_PREFILL_OFF);
    EDGE(T_PREFILL, T_COMPUTE(0));
    EDGE(T_PREFILL, T_CPU_ATTN(0));
    EDGE(T_PREFILL, T_LOAD(0));
    if (G > 1 && prefetch)
        EDGE(T_PREFILL, T_LOAD(1));
    for (uint32_t l = 0; l < layers && l < G; l++)
        EDGE(T_PREFILL_OFF, T_LOAD(l));
    for (uint32_t x = 0; x < G; x++) {
        EDGE(T_LOAD(x), T_RECOMP(x));
        EDGE(T_RECOMP(x), T_COMPUTE(x));
        EDGE(T_CPU_ATTN(x), T_COMPUTE(x));
        EDGE(T_COMPUTE(x), T_OFFLOAD(x));
        if (x + 1 < G) {
            EDGE(T_COMPUTE(x), T_COMPUTE(x + 1));
            EDGE(T_COMPUTE(x), T_CPU_ATTN(x + 1));
        }
        if (x + 2 < G && prefetch)
            EDGE(T_COMPUTE(x), T_LOAD(x + 2));
        if (x + 1 < G && !prefetch)
            EDGE(T_COMPUTE(x), T_LOAD(x + 1));
        if (x + layers < G)
            EDGE(T_OFFLOAD(x), T_LOAD(x + layers));
    }
#undef EDGE
    ALISA_ASSERT(n <= cap);
    g->succ_start = calloc((size_t)g->n + 1, sizeof *g->succ_start);
    g->succ = malloc((n ? n : 1) * sizeof *g->succ);
    if (!g->succ_start || !g->succ) {
        free(ed);
        return ALISA_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        g->succ_start[ed[i].from + 1]++;
        g->t[ed[i].to].deps_left++;
    }
    for (uint32_t i = 0; i < g->n; i++)
        g->succ_start[i + 1] += g->succ_start[i];
    uint32_t *fill = calloc(g->n, sizeof *fill);
    if (!fill) {
        free(ed);
        return ALISA_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        g->succ[g->succ_start[ed[i].from] + fill[ed[i].from]++] = ed[i].to;
    free(fill);
    free(ed);
    return 0;
}

static void engine_free(struct engine *g)
{
    free(g->t);
    free(g->succ_start);
    free(g->succ);
    for (int r = 0; r < N_RES; r++)
        free(g->queue[r]);
    evq_destroy(g->q);
}

/* Checks the trace covers the workload: same prompt, enough generated tokens. */
static int check_trace(const struct sim_config *cfg, uint32_t *n_seqs, uint32_t *layers,
                       uint32_t *shortest_gen, struct trace_header *hdr, struct alisa_err *e)
{
    struct trace_reader *r;
    int rc = trace_reader_open(&r, cfg->trace, e);
    if (rc)
        return rc;
    const struct trace_header *h = trace_reader_header(r);
    *n_seqs = h->n_seqs;
    *layers = h->n_layers;
    *hdr = *h;
    *shortest_gen = UINT32_MAX;
    for (uint32_t s = 0; s < h->n_seqs && !rc; s++) {
        const struct trace_seq *q = trace_reader_seq(r, s);
        if (q->prompt_len != cfg->prompt_len)
            rc = err_set(e, ALISA_EINVAL, "%s: sequence %u has a %u-token prompt, the workload "
                         "needs %u (make a matching trace: alisa trace gen --prompt-len %u ...)",
                         cfg->trace, s, q->prompt_len, cfg->prompt_len, cfg->prompt_len);
        else if (q->gen_len < cfg->gen_len && !cfg->extend)
            rc = err_set(e, ALISA_EINVAL, "%s: sequence %u has %u generated tokens, the workload "
                         "needs %u (pass --extend to continue it with synthetic rows, or make a "
                         "longer trace: alisa trace gen --gen-len %u ...)",
                         cfg->trace, s, q->gen_len, cfg->gen_len, cfg->gen_len);
        if (q->gen_len < *shortest_gen)
            *shortest_gen = q->gen_len;
    }
    trace_reader_destroy(r);
    return rc;
}

/* One decode step of vLLM's n_run running sequences attending `attended`
 * tokens in all: every layer's compute (at least its launches on the host),
 * its parts and reads added into r. ns. */
static double vllm_step_ns(const struct sim_config *cfg, uint32_t n_run, double attended,
                           struct sim_result *r)
{
    const struct model_shape *m = cfg->model;
    double step = 0, host = cost_layer_host_ns(cfg->sw, cfg->sel->name), waited = 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const int last = l == m->n_layers - 1;
        double gpu = cost_layer_compute_ns(m, cfg->hw, n_run, attended, attended, cfg->precision,
                                           0, last);
        r->compute_weights_s +=
            cost_layer_compute_ns(m, cfg->hw, n_run, 0, 0, cfg->precision, 0, last) * 1e-9;
        double wb, kvb;
        cost_layer_hbm_bytes(m, cfg->hw, attended, cfg->precision, 0, last, &wb, &kvb);
        r->hbm_weight_bytes += wb;
        r->hbm_kv_bytes += kvb;
        step += gpu;
        if (host > gpu)
            waited += host - gpu;
    }
    r->compute_s += step * 1e-9;
    r->host_s += waited * 1e-9;
    return step + waited;
}

/* vLLM's block manager at sequence granularity: the blocks in use of
 * total, per sequence its tokens with KV, the running and the waiting;
 * run_vllm's state. */
struct vllm {
    uint64_t used, total;
    uint32_t bt, n_run, n_wait;
    uint32_t *len;     /* tokens with KV, per sequence */
    uint32_t *order;   /* running, in admission order */
    uint32_t *waiting; /* preempted, oldest first */
};

static uint64_t vllm_blocks(const struct vllm *v, uint32_t tokens)
{
    return ((uint64_t)tokens + v->bt - 1) / v->bt;
}

static void vllm_admit(struct vllm *v, uint32_t i)
{
    v->used += vllm_blocks(v, v->len[i]);
    v->order[v->n_run++] = i;
}

/* Re-admits the waiting sequences that fit with one block to grow, oldest
 * first, each prefilled alone (a preempted one's KV recomputed); ns. */
static double vllm_readmit(const struct sim_config *cfg, struct vllm *v, struct sim_result *r)
{
    double t = 0;
    while (v->n_wait && v->used + vllm_blocks(v, v->len[v->waiting[0]] + 1) <= v->total) {
        uint32_t i = v->waiting[0];
        memmove(v->waiting, v->waiting + 1, (--v->n_wait) * sizeof *v->waiting);
        vllm_admit(v, i);
        double pf = cost_prefill_ns(cfg->model, cfg->hw, 1, v->len[i]);
        t += pf;
        if (v->len[i] > cfg->prompt_len) { /* preempted earlier: its KV is recomputed */
            r->recomputed_tokens += v->len[i];
            r->recompute_s += pf * 1e-9;
        } else { /* first admission of a prompt that did not fit at the start */
            r->prefill_s += pf * 1e-9;
        }
    }
    return t;
}

/* Each running sequence writes one token; crossing into a new block needs
 * a free one, else the most recently admitted is preempted. */
static void vllm_grow(struct vllm *v, struct sim_result *r)
{
    for (uint32_t k = 0; k < v->n_run;) {
        uint32_t i = v->order[k];
        uint64_t more = vllm_blocks(v, v->len[i] + 1) - vllm_blocks(v, v->len[i]);
        if (more == 0 || v->used < v->total) {
            v->used += more;
            k++;
            continue;
        }
        uint32_t o = v->order[--v->n_run]; /* preempt the latest admitted */
        v->used -= vllm_blocks(v, v->len[o]);
        v->waiting[v->n_wait++] = o;
        r->preemptions++;
        /* o == i: k now indexes past the end */
    }
}

/* One token for every running sequence; the finished free their blocks.
 * Returns how many finished. */
static uint32_t vllm_advance(const struct sim_config *cfg, struct vllm *v)
{
    uint32_t done = 0;
    for (uint32_t k = 0; k < v->n_run;) {
        uint32_t i = v->order[k];
        if (++v->len[i] - cfg->prompt_len == cfg->gen_len) {
            v->used -= vllm_blocks(v, v->len[i]);
            done++;
            memmove(v->order + k, v->order + k + 1, (--v->n_run - k) * sizeof *v->order);
        } else {
            k++;
        }
    }
    return done;
}

/* vLLM's block manager and scheduler at sequence granularity (simulate.h). */
static int run_vllm(const struct sim_config *cfg, double gpu_kv, struct sim_result *r,
                    FILE *timeline, struct alisa_err *e)
{
    const struct model_shape *m = cfg->model;
    const uint32_t B = cfg->batch, N = cfg->gen_len, P = cfg->prompt_len;
    struct kv_shape ks = kv_shape_of(m, cfg->precision);
    struct vllm v = {.bt = cfg->system->block_tokens};
    double block_bytes = (double)v.bt * m->n_layers * (double)cost_kv_bytes(&ks);
    v.total = (uint64_t)(gpu_kv / block_bytes);
    v.len = malloc(B * sizeof *v.len);
    v.order = malloc(B * sizeof *v.order);
    v.waiting = malloc(B * sizeof *v.waiting);
    int rc = 0;
    if (!v.len || !v.order || !v.waiting) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for %u sequences", B);
        goto out;
    }
    uint32_t done = 0;
    double t = 0;
    /* Initial admission: prefill as many prompts as fit, in slot order. */
    for (uint32_t i = 0; i < B; i++) {
        v.len[i] = P;
        if (v.used + vllm_blocks(&v, P + 1) <= v.total)
            vllm_admit(&v, i);
        else
            v.waiting[v.n_wait++] = i;
    }
    if (v.n_run == 0) {
        r->oom = 1;
        snprintf(r->oom_reason, sizeof r->oom_reason,
                 "the GPU KV space (%.2f GB, %llu blocks) cannot hold one prompt", gpu_kv / 1e9,
                 (unsigned long long)v.total);
        goto out;
    }
    t += cost_prefill_ns(m, cfg->hw, v.n_run, P);
    r->prefill_s = t * 1e-9;
    if (timeline)
        fprintf(timeline, "step,end_ms,running,waiting,preemptions,gpu_kv_bytes\n");
    double batch_sum = 0;
    while (done < B) {
        t += vllm_readmit(cfg, &v, r);
        if (v.n_run == 0) {
            r->oom = 1;
            snprintf(r->oom_reason, sizeof r->oom_reason,
                     "the GPU KV space (%.2f GB) cannot hold one sequence of %u tokens",
                     gpu_kv / 1e9, v.len[v.waiting[0]] + 1);
            goto out;
        }
        vllm_grow(&v, r);
        double attended = 0;
        for (uint32_t k = 0; k < v.n_run; k++)
            attended += v.len[v.order[k]] + 1;
        t += vllm_step_ns(cfg, v.n_run, attended, r);
        batch_sum += v.n_run;
        r->decode_steps++;
        done += vllm_advance(cfg, &v);
        double kv_now = (double)v.used * block_bytes;
        if (kv_now > r->peak_gpu_kv_bytes)
            r->peak_gpu_kv_bytes = kv_now;
        if (timeline)
            fprintf(timeline, "%u,%.6f,%u,%u,%u,%.0f\n", r->decode_steps - 1, t * 1e-6, v.n_run,
                    v.n_wait, r->preemptions, kv_now);
    }
    r->total_s = t * 1e-9;
    r->throughput_tok_s = (double)B * N / r->total_s;
    r->mean_batch = batch_sum / r->decode_steps;
    r->gpu_hit_rate = 1.0;
    r->recall_mean = r->recall_min = 1.0;
out:
    free(v.len);
    free(v.order);
    free(v.waiting);
    return rc;
}

/* One run of the trace-driven simulation, step by step: the state sim_run's
 * steps share. Owns every array; run_free releases them. */
struct run {
    const struct sim_config *cfg;
    const struct model_shape *m;
    struct sim_result *r;
    uint32_t S, Lt;              /* trace sequences and layers */
    uint32_t Lm, B, N;           /* model layers, batch, decode steps */
    uint32_t shortest;           /* fewest generated tokens of a trace sequence */
    struct trace_header th;
    struct kv_shape ks;
    double gpu_kv, cpu_kv;       /* the tiers' KV bytes */
    double *mult;                /* (S * Lt) model streams per trace stream (selecting
                                    layers' when dense_m > 0) */
    uint32_t *tl_of;             /* (Lm) trace layer of each model layer */
    double *slots_of;            /* (S) batch slots reading each trace sequence */
    struct collect c;            /* the plans, per trace stream and step */
    struct replay_totals tot;
    /* a selection's dense leading model layers (dense_m of them: Quest's and
     * InfiniGen's first two) replayed apart with the dense selection, so
     * they are the model's layers whatever the trace's count; the main
     * replay then selects in every trace layer */
    uint32_t dense_m;
    double *mult_d;              /* (S * Lt) dense model streams per trace stream */
    struct collect cd;           /* their plans (gpu_at and cpu_at shared with c) */
    struct replay_totals tot_d;
    struct engine g;             /* the task graph */
    uint64_t *sched;             /* (Lm * N) the scheduler's ns within each COMPUTE task */
    struct alisa_sched alisa;    /* placement alisa: the schedule, in positions */
    double w_cpu;                /* share of the weights streamed from the CPU every step */
    double host_ns;              /* the host's launches of one decode layer (cfg->sw) */
    uint32_t ngb;                /* FlexGen's num_gpu_batches: each layer computed once per
                                    GPU batch (1 for every other system) */
    double gpu_fraction;         /* flexgen-static: share of every token's KV on the GPU */
    int extend;                  /* sequences shorter than the run continue with ext's rows */
    struct trace_gen_params ext;
    double attended_all, misses_all;
    struct sel_estimate est;     /* the selection's estimate, priced (cost_estimate_ns) */
    struct sel_params selp;      /* the selection's parameters as replayed: the exact row in
                                    the estimate's place (a trace holds no keys) */
};

/* Whether model layer l selects (it is past the selection's dense leading
 * layers), so pays its estimate. */
static int selecting_layer(const struct run *u, uint32_t l)
{
    return l >= u->dense_m;
}

/* What a PyTorch runtime (every system here but vLLM) holds on the GPU
 * beside weights and KV: the prefill's activations for a GPU batch of G
 * sequences, which its caching allocator keeps once they have peaked
 * (FlexGen's own run report, flex_opt.py, prints that peak above its
 * weights and cache). vLLM sizes its reservation by its profiling run
 * instead (run_capacities). */
static double eager_reserve(const struct run *u, uint32_t G)
{
    /* FlexGen's policy may put the activations on the CPU (its --percent's
     * last pair: the benchmark's offloading runs give 0 100) */
    double on_gpu = u->cfg->percent_given ? 1 - u->cfg->percent_act_cpu : 1;
    return on_gpu * cost_prefill_peak_act_bytes(u->m, G * u->cfg->prompt_len, G);
}

/* The estimate's own state on the GPU (InfiniGen's partial key cache and
 * query weights, Quest's page bounds) in every selecting layer at the
 * longest context, into r->estimate_gpu_bytes: out of the KV's room, and
 * of the memory FlexGen's LP plans with. Cannot fail. */
static void run_estimate_state(struct run *u)
{
    const struct sim_config *cfg = u->cfg;
    double per_token, fixed, layers = 0;
    cost_estimate_state_bytes(u->m, &u->est, &per_token, &fixed);
    for (uint32_t l = 0; l < u->Lm; l++)
        layers += selecting_layer(u, l);
    u->r->estimate_gpu_bytes =
        layers * (fixed + per_token * u->B * ((double)cfg->prompt_len + cfg->gen_len));
}

/* FlexGen's shares, where the system or the user sets them: its LP's
 * (flexgen_policy.h) over this workload and these memories, its default, or
 * the given ones. Cannot fail but for GLPK. */
static int run_flexgen_policy(struct run *u, struct alisa_err *e)
{
    const struct sim_config *cfg = u->cfg;
    u->w_cpu = cfg->system->weights_cpu_share;
    u->gpu_fraction = cfg->system->gpu_fraction;
    struct flexgen_policy p;
    if (cfg->percent_given) {
        p = cfg->percent;
    } else if (cfg->system->flexgen_policy == SIM_FLEXGEN_DEFAULT) {
        p = flexgen_default_policy;
    } else if (cfg->system->flexgen_policy == SIM_FLEXGEN_LP) {
        uint32_t G = cfg->flexgen_gpu_batch ? cfg->flexgen_gpu_batch : u->B;
        struct flexgen_workload w = {u->m, cfg->hw, u->B, cfg->prompt_len, u->N, cfg->precision,
                                     cfg->system->cpu_attention,
                                     cfg->gpu_mem_bytes - eager_reserve(u, G) -
                                         u->r->estimate_gpu_bytes,
                                     cfg->cpu_mem_bytes};
        int feasible;
        int rc = flexgen_policy_lp(&w, &p, &feasible, &u->r->flexgen_lp_layer_ns, e);
        if (rc)
            return rc;
    } else {
        return 0;
    }
    /* FlexGen splits each GPU batch's cache by sequences: the first
     * int(gbs x heads x percent) // heads x heads of its gbs x heads rows
     * (pytorch_backend.py, TorchMixedDevice.init_cache_one_gpu_batch), so
     * the GPU share is whole sequences, rounded down */
    uint32_t G = cfg->flexgen_gpu_batch ? cfg->flexgen_gpu_batch : u->B;
    double rows = floor((double)G * u->m->n_heads * p.cache_gpu + 1e-9);
    p.cache_gpu = floor(rows / u->m->n_heads) / G;
    u->ngb = u->B / G;
    u->r->flexgen = 1;
    u->r->policy = p;
    u->r->gpu_batch_size = G;
    u->w_cpu = 1 - p.w_gpu;
    u->gpu_fraction = p.cache_gpu;
    return 0;
}

/* Memory: the weights' GPU share stays there; their CPU share lives on the
 * host and is streamed through two layers' buffers on the GPU (FlexGen's
 * double buffer, DeepSpeed's); the prefill's activations are held
 * (eager_reserve; vLLM: its own formula); the executor's arenas are given
 * directly. Sets r->oom when no KV fits. Cannot fail. */
static void run_capacities(struct run *u)
{
    const struct sim_config *cfg = u->cfg;
    double weights = u->m->weight_bytes_fp16;
    double buffers = u->w_cpu > 0 ? 2 * cost_layer_weight_bytes(u->m) * u->w_cpu : 0;
    u->gpu_kv = cfg->gpu_mem_bytes - weights * (1 - u->w_cpu) - buffers -
                eager_reserve(u, u->B / u->ngb);
    if (cfg->system->gpu_mem_utilization > 0) {
        uint32_t tokens = u->m->max_seq > 2048 ? u->m->max_seq : 2048;
        u->gpu_kv = cfg->system->gpu_mem_utilization * cfg->gpu_mem_bytes - weights -
                    cost_prefill_peak_act_bytes(u->m, tokens, cfg->system->profile_seqs);
    }
    u->cpu_kv = cfg->cpu_mem_bytes - weights * u->w_cpu;
    u->gpu_kv -= u->r->estimate_gpu_bytes; /* run_estimate_state */
    if (cfg->gpu_kv_bytes > 0)
        u->gpu_kv = cfg->gpu_kv_bytes;
    if (u->gpu_kv <= 0 || u->cpu_kv < 0) {
        u->r->oom = 1;
        if (u->gpu_kv <= 0)
            snprintf(u->r->oom_reason, sizeof u->r->oom_reason,
                     "the weights (%.1f GB), the runtime's activations (%.1f GB) and the "
                     "selection's estimate (%.1f GB) leave no room for KV in %.1f GB of GPU "
                     "memory", weights * (1 - u->w_cpu) / 1e9,
                     (cfg->system->gpu_mem_utilization > 0 ? 0 : eager_reserve(u, u->B / u->ngb)) /
                         1e9, u->r->estimate_gpu_bytes / 1e9, cfg->gpu_mem_bytes / 1e9);
        else
            snprintf(u->r->oom_reason, sizeof u->r->oom_reason,
                     "the weights (%.1f GB) leave no room for KV in %.1f GB of host memory",
                     weights * u->w_cpu / 1e9, cfg->cpu_mem_bytes / 1e9);
    }
}

/* Whether a layer's copies run beside the previous layer's compute: the
 * --overlap asked for, else the system's; never under a selection that reads
 * the step's own row (issue 45): its loads wait for the layer's query, so
 * they start when the previous layer ends, as without prefetch (the graph
 * has one load task a layer, so streamed weights lose their prefetch too),
 * unless the policy speculates that row a layer ahead (present_ahead). */
static int prefetches(const struct sim_config *cfg)
{
    if (cfg->sel && cfg->sel->needs_present && !cfg->sel->present_ahead)
        return 0;
    return cfg->overlap ? cfg->overlap == SIM_OVERLAP_PREFETCH : !cfg->system->no_prefetch;
}

/* Placement alisa runs a schedule: the given one, or what ALISA's search
 * finds for this workload and these tiers, pricing steps with the overlap
 * this run has; the search also prices it analytically (r->schedule), so
 * the two can be compared. */
static int run_search(struct run *u, struct alisa_err *e)
{
    const struct sim_config *cfg = u->cfg;
    if (!cfg->place->scheduled)
        return 0;
    /* where the selection's picks fall on this trace, replayed as the run
     * replays it with every token on the GPU: the search's loads */
    struct replay_config rcfg = {.sel = cfg->sel, .sel_params = u->selp,
                                 .place = &place_gpu_only_ops, .gpu_kv_bytes = UINT64_MAX / 4,
                                 .precision = cfg->precision, .hw = cfg->hw,
                                 .gpu_fraction = -1, .shape = &u->ks,
                                 .positions = cfg->prompt_len + u->N,
                                 .extend = u->extend ? &u->ext : NULL,
                                 .every_layer_selects = u->dense_m > 0};
    const struct selstats_params sp = {.alpha = 0.5, .sinks = 4};
    struct selstats *st;
    uint32_t layers;
    int rc = selstats_replay(cfg->trace, &rcfg, &sp, &st, &layers, e);
    if (rc)
        return rc;
    /* each trace layer's picks: model layers follow trace layers as the
     * replay maps them */
    const size_t bins = SELSTATS_AGE_BINS + 1;
    struct selstats_summary *sum = malloc(sizeof *sum);
    double *picks = malloc((size_t)layers * bins * sizeof *picks);
    uint64_t counted = 0;
    if (!sum || !picks) {
        free(sum);
        free(picks);
        selstats_destroy(st);
        return err_set(e, ALISA_ENOMEM, "out of memory for %u layers' pick positions", layers);
    }
    for (uint32_t t = 0; t < layers; t++) {
        selstats_summary(st, t, UINT32_MAX, sum);
        memcpy(picks + t * bins, sum->pick_cdf, bins * sizeof *picks);
        counted += sum->picks;
    }
    free(sum);
    selstats_destroy(st);
    struct search_workload w = {u->m, cfg->hw, u->B, cfg->prompt_len, u->N, u->selp,
                                cfg->precision, 1, u->gpu_kv, u->cpu_kv,
                                cfg->system->inputs_outside, u->host_ns, prefetches(cfg),
                                counted ? picks : NULL, SELSTATS_AGE_BINS, layers,
                                cfg->sw && cfg->sw->pageable_relay};
    struct alisa_schedule *s = &u->r->schedule;
    if (cfg->schedule_given) {
        *s = cfg->schedule;
        rc = alisa_schedule_eval(&w, s, e);
    } else {
        rc = cfg->search_grid ? alisa_search_grid(&w, cfg->search_grid, s, e)
                              : alisa_search_greedy(&w, s, e);
    }
    free(picks);
    if (rc)
        return rc;
    u->r->scheduled = 1;
    u->alisa = alisa_schedule_positions(&w, s);
    return 0;
}

/* Multiplicities: which trace stream each model stream reads, and how many
 * model streams each trace stream stands for. */
static int run_map_streams(struct run *u, struct alisa_err *e)
{
    const uint32_t S = u->S, Lt = u->Lt, N = u->N;
    u->mult = calloc((size_t)S * Lt, sizeof *u->mult);
    const uint32_t heads = u->cfg->per_head ? u->th.n_kv_heads : 1;
    u->c = (struct collect){S, Lt, u->cfg->prompt_len, N, heads, u->mult, NULL, NULL, NULL, NULL};
    u->c.steps = calloc((size_t)N * Lt * S, sizeof *u->c.steps);
    u->c.prefill = calloc((size_t)Lt * S, sizeof *u->c.prefill);
    u->c.gpu_at = calloc(N, sizeof *u->c.gpu_at);
    u->c.cpu_at = calloc(N, sizeof *u->c.cpu_at);
    if (u->dense_m) {
        u->mult_d = calloc((size_t)S * Lt, sizeof *u->mult_d);
        u->cd = u->c;
        u->cd.mult = u->mult_d;
        u->cd.steps = calloc((size_t)N * Lt * S, sizeof *u->cd.steps);
        u->cd.prefill = calloc((size_t)Lt * S, sizeof *u->cd.prefill);
        if (!u->mult_d || !u->cd.steps || !u->cd.prefill)
            return err_set(e, ALISA_ENOMEM, "out of memory for the dense layers' %u steps x %u "
                           "layers x %u sequences", N, Lt, S);
    }
    u->tl_of = malloc(u->Lm * sizeof *u->tl_of);
    u->slots_of = calloc(S, sizeof *u->slots_of);
    if (!u->mult || !u->c.steps || !u->c.prefill || !u->c.gpu_at || !u->c.cpu_at ||
        !u->tl_of || !u->slots_of)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u steps x %u layers x %u sequences",
                       N, Lt, S);
    for (uint32_t l = 0; l < u->Lm; l++)
        u->tl_of[l] = (uint32_t)((uint64_t)l * Lt / u->Lm);
    for (uint32_t i = 0; i < u->B; i++)
        u->slots_of[i % S] += 1;
    for (uint32_t l = 0; l < u->Lm; l++)
        for (uint32_t s = 0; s < S; s++)
            (l < u->dense_m ? u->mult_d : u->mult)[s * Lt + u->tl_of[l]] += u->slots_of[s];
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t t = 0; t < Lt; t++)
            u->r->trace_streams +=
                u->mult[s * Lt + t] > 0 || (u->dense_m && u->mult_d[s * Lt + t] > 0);
    return 0;
}

/* The synthetic continuation (replay_extension_params). */
static int run_extension(struct run *u, struct trace_gen_params *ext, struct alisa_err *e)
{
    int rc = replay_extension_params(u->cfg->trace, ext, e);
    if (!rc)
        u->r->extended_steps = u->N - u->shortest;
    return rc;
}

/* The scheduler core over the trace: every trace stream's plans into u->c.
 * Running out of GPU KV is a result (r->oom). */
static int run_replay(struct run *u, struct alisa_err *e)
{
    const struct sim_config *cfg = u->cfg;
    struct sim_result *r = u->r;
    int rc;
    struct replay_config rcfg = {.sel = cfg->sel, .sel_params = u->selp,
                                 .place = cfg->place, .gpu_kv_bytes = (uint64_t)u->gpu_kv,
                                 .cpu_kv_bytes = (uint64_t)u->cpu_kv, .precision = cfg->precision,
                                 .hw = cfg->hw, .gpu_fraction = u->gpu_fraction,
                                 .shape = &u->ks, .capacity_streams = (uint64_t)u->B * u->Lm,
                                 .positions = cfg->prompt_len + u->N,
                                 .cpu_attention = cfg->system->cpu_attention,
                                 .flexgen_whole = cfg->system->flexgen_whole,
                                 .inputs_outside = cfg->system->inputs_outside,
                                 .extend = u->extend ? &u->ext : NULL,
                                 .sched = u->r->scheduled ? &u->alisa : NULL,
                                 .every_layer_selects = u->dense_m > 0,
                                 .per_head = cfg->per_head};
    if ((rc = replay_trace(cfg->trace, &rcfg, &u->tot, collect_plan, &u->c, e)))
        return rc;
    if (u->dense_m) { /* the model's dense leading layers, every token attended */
        struct replay_config d = rcfg;
        d.sel = &sel_dense_ops;
        d.sel_params = (struct sel_params){0};
        if ((rc = replay_trace(cfg->trace, &d, &u->tot_d, collect_plan, &u->cd, e)))
            return rc;
        if (u->tot_d.oom && (!u->tot.oom || u->tot_d.oom_pos < u->tot.oom_pos)) {
            u->tot.oom = 1;
            u->tot.oom_cpu = u->tot_d.oom_cpu;
            u->tot.oom_pos = u->tot_d.oom_pos;
            u->tot.gpu_cap_tokens = u->tot_d.gpu_cap_tokens;
        }
        if (u->tot_d.phase2_pos >= 0 &&
            (u->tot.phase2_pos < 0 || u->tot_d.phase2_pos < u->tot.phase2_pos))
            u->tot.phase2_pos = u->tot_d.phase2_pos;
        if (u->tot_d.phase3_pos >= 0 &&
            (u->tot.phase3_pos < 0 || u->tot_d.phase3_pos < u->tot.phase3_pos))
            u->tot.phase3_pos = u->tot_d.phase3_pos;
    }
    r->recall_mean = u->tot.recall_mean;
    r->recall_min = u->tot.recall_min;
    r->head_recall_mean = u->tot.head_recall_mean;
    r->head_recall_min = u->tot.head_recall_min;
    if (u->tot.oom) {
        r->oom = 1;
        if (u->tot.oom_cpu)
            snprintf(r->oom_reason, sizeof r->oom_reason,
                     "the CPU KV tier (%.2f GB) cannot hold what the schedule puts there at %s "
                     "position %u", u->cpu_kv / 1e9,
                     u->tot.oom_pos < cfg->prompt_len ? "prompt" : "decode", u->tot.oom_pos);
        else
            snprintf(r->oom_reason, sizeof r->oom_reason,
                     "the GPU KV tier (%.2f GB, %u tokens per stream) cannot hold the tokens of "
                     "%s position %u", u->gpu_kv / 1e9, u->tot.gpu_cap_tokens,
                     u->tot.oom_pos < cfg->prompt_len ? "prompt" : "decode", u->tot.oom_pos);
        return 0;
    }
    if (u->tot.phase2_pos >= 0)
        r->phase2_step = u->tot.phase2_pos < cfg->prompt_len ? 0
                                                              : u->tot.phase2_pos - cfg->prompt_len;
    if (u->tot.phase3_pos >= 0)
        r->phase3_step = u->tot.phase3_pos < cfg->prompt_len ? 0
                                                              : u->tot.phase3_pos - cfg->prompt_len;
    return 0;
}

/* The copy of `bytes` of streamed weights where the system keeps them in
 * pageable memory and the profile measured that rate (cost_pageable_copy_ns);
 * 0 where they go as pinned copies (the caller prices those). */
static double weights_pageable_ns(const struct sim_config *cfg, double bytes)
{
    return cfg->system->weights_pageable ? cost_pageable_copy_ns(cfg->hw, bytes) : 0;
}

/* One decode step j's model layer l: the five tasks of global layer x,
 * priced from the plans of the trace stream it reads, weighted by slots. */
static void price_layer(struct run *u, uint32_t j, uint32_t l, const struct sched_prices *sp,
                        const uint8_t res[N_RES])
{
    const struct sim_config *cfg = u->cfg;
    const struct hw_profile *hw = cfg->hw;
    struct sim_result *r = u->r;
    const uint32_t x = j * u->Lm + l, S = u->S;
    const double kv_bytes = (double)cost_kv_bytes(&u->ks); /* a token's, on the GPU tier */
    double att = 0, miss = 0, rec = 0, h2d = 0, d2h = 0, cpu = 0, moved = 0, ret = 0,
           resident = 0;
    const struct collect *c = l < u->dense_m ? &u->cd : &u->c;
    const struct stream_step *row = &c->steps[((size_t)j * u->Lt + u->tl_of[l]) * S];
    for (uint32_t s = 0; s < S; s++) {
        const double w = u->slots_of[s];
        att += w * row[s].attended;
        miss += w * row[s].misses;
        rec += w * row[s].recomputed;
        h2d += w * row[s].h2d;
        d2h += w * row[s].d2h;
        cpu += w * row[s].cpu_attend;
        moved += w * row[s].moved;
        ret += w * row[s].retired;
        resident += w * row[s].gpu_bytes / kv_bytes;
    }
    u->attended_all += att;
    u->misses_all += miss;
    r->recomputed_tokens += rec;
    r->bytes_h2d += h2d;
    r->bytes_d2h += d2h;
    double copies = h2d > 0, copies_d2h = d2h > 0;
    const double kv_h2d = h2d; /* the KV's loads, before any streamed weights */
    if (hw->serial) { /* offloads and loads in one task; K and V per token, or a
                       * layer's moves gathered into one copy each way */
        copies = hw->batched_copies ? copies + copies_d2h : 2 * moved;
        copies_d2h = 0;
        h2d += d2h;
        d2h = 0;
    }
    double pageable = 0; /* the weights' copy from pageable memory, where it is one */
    if (u->w_cpu > 0) { /* the weights' CPU share, streamed for this layer */
        double layer_weights = cost_layer_weight_bytes(u->m) * u->w_cpu;
        r->bytes_h2d += layer_weights;
        if (!(pageable = weights_pageable_ns(cfg, layer_weights))) {
            h2d += layer_weights;
            copies += 1;
        }
    }
    const double context = (double)cfg->prompt_len + j + 1;
    struct task *t = u->g.t;
    /* the arenas' own bookkeeping, where the profile prices it, goes with
     * the copies; pageable KV is staged by the host before its copy */
    double relay = cfg->sw && cfg->sw->pageable_relay ? cost_pageable_relay_ns(hw, kv_h2d) : 0;
    /* InfiniGen's runtime gathers the speculated rows on the host first,
     * into a pinned buffer (flex_opt.py: prefetch_kv, pin_memory=True), so
     * no pageable staging then; its dense layers copy whole (load_cache) */
    double gather = selecting_layer(u, l) ? cost_estimate_gather_ns(hw, &u->est, kv_h2d) : 0;
    if (gather > 0)
        relay = 0;
    r->relay_s += relay * 1e-9;
    r->gather_s += gather * 1e-9;
    t[T_LOAD(x)] = (struct task){.res = res[RES_H2D],
                                 .dur_ns = ns_of(cost_transfer_ns(hw, h2d, copies) + relay +
                                                 pageable + gather +
                                                 cost_kvstore_ns(hw, u->B, context))};
    t[T_RECOMP(x)] = (struct task){
        .res = RES_GPU, .dur_ns = ns_of(cost_recompute_gpu_ns(u->m, hw, rec, cfg->precision))};
    t[T_CPU_ATTN(x)] = (struct task){.res = res[RES_CPU],
                                     .dur_ns = ns_of(cost_cpu_attention_ns(hw, cpu))};
    /* the scheduler's own time, where the profile prices it, runs before
     * the layer on the same processor */
    /* per head, each KV head's stream runs its own selection: heads times
     * the streams, each attending (in units) what a token's-worth does,
     * retiring units */
    const double hd = c->heads ? c->heads : 1;
    u->sched[x] = ns_of(cost_schedule_ns(sp, u->B * hd, context, u->B > 0 ? att / u->B : 0,
                                         ret * hd));
    /* FlexGen computes the layer once per GPU batch (its weights read each
     * time; flex_opt.py, generation_loop_overlap_single_batch's loop over
     * num_gpu_batches); the layer lasts at least its launches on the host */
    const double ngb = u->ngb;
    /* the GPU attends what the CPU does not: under --cpu-cache-compute
     * FlexGen attends a cache where it lives (pytorch_backend.py,
     * TorchDevice.mha_gen: on the CPU unless k.is_cuda;
     * _mixed_device_attention: each part of a split cache on its device) */
    double gpu_att = att - cpu / kv_bytes;
    if (gpu_att < 0)
        gpu_att = 0;
    /* a selection's dense leading layers attend whole, gathering nothing */
    const int gathers = cfg->sel->gathers && selecting_layer(u, l);
    double gpu = ngb * cost_layer_compute_ns(u->m, hw, u->B / u->ngb, gpu_att / ngb,
                                             resident / ngb, cfg->precision, gathers,
                                             l == u->Lm - 1);
    double wb, kvb;
    cost_layer_hbm_bytes(u->m, hw, gpu_att, cfg->precision, gathers, l == u->Lm - 1, &wb, &kvb);
    r->hbm_weight_bytes += ngb * wb;
    r->hbm_kv_bytes += kvb;
    if (u->est.kind != SEL_ESTIMATE_EXACT && selecting_layer(u, l)) {
        /* the estimate scores every token the sequences hold, wherever its
         * K and V live, once per GPU batch */
        double est = ngb * cost_estimate_ns(u->m, hw, &u->est, u->B / u->ngb,
                                            u->B / u->ngb * context);
        cost_estimate_bytes(u->m, &u->est, u->B * context, &wb, &kvb);
        r->hbm_weight_bytes += ngb * wb;
        r->hbm_kv_bytes += kvb;
        r->estimate_s += est * 1e-9;
        gpu += est;
    }
    const double host = ngb * u->host_ns;
    if (host > gpu) {
        r->host_s += (host - gpu) * 1e-9;
        gpu = host;
    }
    t[T_COMPUTE(x)] = (struct task){.res = RES_GPU, .dur_ns = ns_of(gpu) + u->sched[x]};
    t[T_OFFLOAD(x)] = (struct task){.res = res[RES_D2H],
                                    .dur_ns = ns_of(cost_transfer_ns(hw, d2h, copies_d2h))};
}

/* The task graph: prefill, its offload, and five tasks per decode step and
 * model layer, each priced; then its dependencies. */
static int run_price(struct run *u, struct alisa_err *e)
{
    const struct sim_config *cfg = u->cfg;
    struct engine *g = &u->g;
    const uint32_t S = u->S, Lt = u->Lt;
    g->n = 2 + T_PER_LAYER * u->Lm * u->N;
    g->t = calloc(g->n, sizeof *g->t);
    for (int res = 0; res < N_RES; res++)
        g->queue[res] = malloc((size_t)g->n * sizeof *g->queue[res]);
    u->sched = calloc((size_t)u->Lm * u->N, sizeof *u->sched);
    if (!g->t || !g->queue[RES_GPU] || !g->queue[RES_H2D] || !g->queue[RES_D2H] ||
        !g->queue[RES_CPU] || !u->sched || evq_create(&g->q, e))
        return err_set(e, ALISA_ENOMEM, "out of memory for %u tasks", g->n);
    struct prefill_stream pf = {0}; /* over the model's streams */
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t t = 0; t < Lt; t++) {
            const size_t i = (size_t)t * S + s;
            const double m = u->mult[s * Lt + t], md = u->dense_m ? u->mult_d[s * Lt + t] : 0;
            const struct prefill_stream *a = &u->c.prefill[i],
                                        *b = u->dense_m ? &u->cd.prefill[i] : a;
            pf.d2h += m * a->d2h + md * b->d2h;
            pf.host += m * a->host + md * b->host;
            pf.dropped += m * a->dropped + md * b->dropped;
        }
    const double prefill_d2h = pf.d2h;
    double prefill_ns = 0;
    if (cfg->prefill_stepwise) { /* position p attends p + 1 tokens, dense */
        for (uint32_t p = 0; p < cfg->prompt_len; p++)
            prefill_ns += cost_step_compute_ns(u->m, cfg->hw, u->B, p + 1.0, p + 1.0,
                                               cfg->precision, 0) +
                          u->Lm * cost_kvstore_ns(cfg->hw, u->B, p + 1.0);
        /* and reads what the placement moved off the device by then */
        prefill_ns += cost_prompt_fetch_ns(u->m, cfg->hw, pf.host, pf.dropped, cfg->precision);
    } else
        prefill_ns = cost_prefill_ns(u->m, cfg->hw, u->B, cfg->prompt_len);
    g->t[T_PREFILL] = (struct task){.res = RES_GPU, .dur_ns = ns_of(prefill_ns)};
    if (u->w_cpu > 0) { /* the weights' CPU share crosses the link once for prefill */
        const double wb = u->m->weight_bytes_fp16 * u->w_cpu;
        const double pageable = weights_pageable_ns(cfg, wb);
        g->t[T_PREFILL].dur_ns += ns_of(pageable ? pageable : cost_transfer_ns(cfg->hw, wb, u->Lm));
    }
    /* one processor, no copy engine: every task queues on it, and each
     * token's K and V are two copies */
    const int serial = cfg->hw->serial != 0;
    const uint8_t res[N_RES] = {[RES_GPU] = RES_GPU, [RES_H2D] = serial ? RES_GPU : RES_H2D,
                                [RES_D2H] = serial ? RES_GPU : RES_D2H,
                                [RES_CPU] = serial ? RES_GPU : RES_CPU};
    g->t[T_PREFILL_OFF] = (struct task){
        .res = res[RES_D2H], .dur_ns = ns_of(cost_transfer_ns(cfg->hw, prefill_d2h, u->Lm))};
    u->r->bytes_d2h = prefill_d2h;
    struct sched_prices sp;
    int rc = cost_schedule_prices(cfg->hw, cfg->sel->name, &sp, e);
    if (rc)
        return rc;
    for (uint32_t j = 0; j < u->N; j++)
        for (uint32_t l = 0; l < u->Lm; l++)
            price_layer(u, j, l, &sp, res);
    if (build_edges(g, u->Lm, u->N, prefetches(cfg))) /* counts each task's dependencies */
        return err_set(e, ALISA_ENOMEM, "out of memory for the dependencies of %u tasks", g->n);
    return 0;
}

/* Totals, busy times and peaks from the finished task graph. */
static void run_summarise(struct run *u)
{
    struct sim_result *r = u->r;
    const struct task *t = u->g.t;
    const uint32_t Gn = u->Lm * u->N;
    r->events = u->g.events;
    uint64_t end = t[T_COMPUTE(Gn - 1)].end_ns;
    for (uint32_t i = 0; i < u->g.n; i++)
        if (t[i].end_ns > end)
            end = t[i].end_ns;
    r->total_s = end * 1e-9;
    r->prefill_s = t[T_PREFILL].end_ns * 1e-9;
    double gpu_busy = 0;
    for (uint32_t x = 0; x < Gn; x++) {
        r->compute_s += (t[T_COMPUTE(x)].dur_ns - u->sched[x]) * 1e-9;
        r->schedule_s += u->sched[x] * 1e-9;
        r->recompute_s += t[T_RECOMP(x)].dur_ns * 1e-9;
        r->cpu_attention_s += t[T_CPU_ATTN(x)].dur_ns * 1e-9;
        r->transfer_h2d_s += t[T_LOAD(x)].dur_ns * 1e-9;
        r->transfer_d2h_s += t[T_OFFLOAD(x)].dur_ns * 1e-9;
        gpu_busy += (t[T_COMPUTE(x)].dur_ns + t[T_RECOMP(x)].dur_ns) * 1e-9;
    }
    r->transfer_d2h_s += t[T_PREFILL_OFF].dur_ns * 1e-9;
    r->transfer_s = r->transfer_h2d_s + r->transfer_d2h_s;
    /* of compute, the layers priced with nothing attended (alike in every
     * step; the last one adds the head), once per GPU batch as price_layer */
    const struct sim_config *cfg = u->cfg;
    double w_mid = cost_layer_compute_ns(u->m, cfg->hw, u->B / u->ngb, 0, 0, cfg->precision,
                                         cfg->sel->gathers, 0),
           w_last = cost_layer_compute_ns(u->m, cfg->hw, u->B / u->ngb, 0, 0, cfg->precision,
                                          cfg->sel->gathers, 1);
    r->compute_weights_s = (double)u->N * u->ngb * ((u->Lm - 1) * w_mid + w_last) * 1e-9;
    r->compute_s -= r->host_s; /* the launches' wait is reported apart */
    double decode_span = (t[T_COMPUTE(Gn - 1)].end_ns - t[T_PREFILL].end_ns) * 1e-9;
    r->stall_s = decode_span - gpu_busy > 0 ? decode_span - gpu_busy : 0;
    r->throughput_tok_s = r->total_s > 0 ? (double)u->B * u->N / r->total_s : 0;
    r->gpu_hit_rate = u->attended_all > 0 ? 1.0 - u->misses_all / u->attended_all : 1.0;
    r->decode_steps = u->N;
    r->mean_batch = u->B;
    for (uint32_t j = 0; j < u->N; j++) {
        if (u->c.gpu_at[j] > r->peak_gpu_kv_bytes)
            r->peak_gpu_kv_bytes = u->c.gpu_at[j];
        if (u->c.cpu_at[j] > r->peak_cpu_kv_bytes)
            r->peak_cpu_kv_bytes = u->c.cpu_at[j];
    }
}

/* The per-step CSV (simulate.h). */
static int run_timeline(const struct run *u, FILE *timeline, struct alisa_err *e)
{
    const struct task *t = u->g.t;
    const uint32_t Lm = u->Lm;
    fprintf(timeline, "step,end_ms,compute_ms,recompute_ms,transfer_ms,gpu_kv_bytes,"
                      "cpu_kv_bytes,schedule_ms\n");
    for (uint32_t j = 0; j < u->N; j++) {
        double cm = 0, rm = 0, tm = 0, sm = 0;
        for (uint32_t l = 0; l < Lm; l++) {
            uint32_t x = j * Lm + l;
            cm += (t[T_COMPUTE(x)].dur_ns - u->sched[x]) * 1e-6;
            sm += u->sched[x] * 1e-6;
            rm += t[T_RECOMP(x)].dur_ns * 1e-6;
            tm += (t[T_LOAD(x)].dur_ns + t[T_OFFLOAD(x)].dur_ns) * 1e-6;
        }
        fprintf(timeline, "%u,%.6f,%.6f,%.6f,%.6f,%.0f,%.0f,%.6f\n", j,
                t[T_COMPUTE(j * Lm + Lm - 1)].end_ns * 1e-6, cm, rm, tm, u->c.gpu_at[j],
                u->c.cpu_at[j], sm);
    }
    return ferror(timeline) ? err_set(e, ALISA_EIO, "timeline: write failed") : 0;
}

static void run_free(struct run *u)
{
    free(u->sched);
    replay_totals_free(&u->tot);
    engine_free(&u->g);
    free(u->mult);
    free(u->c.steps);
    free(u->c.prefill);
    free(u->c.gpu_at);
    free(u->c.cpu_at);
    replay_totals_free(&u->tot_d);
    free(u->mult_d);
    free(u->cd.steps);
    free(u->cd.prefill);
    free(u->tl_of);
    free(u->slots_of);
}

/* A selection's estimate (--partial-ratio, --bounds): priced as its own
 * runtime computes it, while the replay selects from the trace's exact row
 * (a trace holds no keys; the estimate's upper bound), so the knob is
 * cleared in the parameters replayed. Refused where it is not priced. */
static int estimate_check(struct run *u, struct alisa_err *e)
{
    const struct sim_config *cfg = u->cfg;
    const struct hw_profile *hw = cfg->hw;
    if (cost_executor_profile(hw))
        return err_set(e, ALISA_EINVAL, "selection %s --%s on profile %s: its attention is "
                       "measured on the executor, whose estimate calibration does not price; "
                       "run the executor itself (alisa run, validate)", cfg->sel->name,
                       u->est.knob, hw->name);
    if (cfg->system->block_tokens)
        return err_set(e, ALISA_EINVAL, "selection %s --%s under system %s: its blocks are "
                       "priced without a selection's estimate", cfg->sel->name, u->est.knob,
                       cfg->system->name);
    int i = sel_knob_find(cfg->sel, u->est.knob);
    if (i >= 0)
        u->selp.knob[i] = 0;
    return 0;
}

static int sim_run_one(const struct sim_config *cfg, struct sim_result *r, FILE *timeline,
                       struct alisa_err *e);

/* --search sim: every candidate schedule simulated, the fastest kept
 * (sim_config.search_sim); r is its run, its timeline written. */
static int sim_run_search_sim(const struct sim_config *cfg, struct sim_result *r,
                              FILE *timeline, struct alisa_err *e)
{
    struct sim_config c = *cfg;
    c.search_sim = 0;
    struct sim_result *tmp = malloc(sizeof *tmp);
    struct alisa_schedule *cand = malloc((size_t)(cfg->search_sim + 2) * (cfg->search_sim + 2) *
                                         sizeof *cand);
    int rc = 0, n = 0;
    if (!tmp || !cand) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for the candidate schedules");
        goto done;
    }
    /* the paper's greedy and the analytic grid's best: their schedules */
    for (int k = 0; k < 2 && !rc; k++) {
        c.search_grid = k ? 10 : 0;
        if (!(rc = sim_run_one(&c, tmp, NULL, e)) && tmp->scheduled && tmp->schedule.feasible)
            cand[n++] = tmp->schedule;
    }
    if (!rc && n) { /* the greedy's alpha and p1, phase III swept */
        const struct alisa_schedule g = cand[0];
        uint32_t G = cfg->search_sim;
        for (uint32_t b = 1; b <= G && g.alpha > 0; b++)
            for (uint32_t i = 0; i <= G; i++) {
                struct alisa_schedule s = {.alpha = g.alpha, .beta = (double)b / G, .p1 = g.p1};
                s.p2 = g.p1 + (uint32_t)((uint64_t)(cfg->gen_len - g.p1) * i / (G + 1));
                cand[n++] = s;
            }
        if (g.alpha > 0) /* and phase II alone */
            cand[n++] = (struct alisa_schedule){.alpha = g.alpha, .p1 = g.p1, .p2 = cfg->gen_len};
    }
    double best = -1;
    int pick = -1;
    for (int k = 0; k < n && !rc; k++) {
        c.search_grid = 0;
        c.schedule_given = 1;
        c.schedule = (struct alisa_schedule){.alpha = cand[k].alpha, .beta = cand[k].beta,
                                             .p1 = cand[k].p1, .p2 = cand[k].p2};
        if ((rc = sim_run_one(&c, tmp, NULL, e)))
            break;
        if (!tmp->oom && tmp->throughput_tok_s > best) {
            best = tmp->throughput_tok_s;
            pick = k;
        }
    }
    if (!rc) {
        c = *cfg;
        c.search_sim = 0;
        if (pick >= 0) {
            c.schedule_given = 1;
            c.schedule = (struct alisa_schedule){.alpha = cand[pick].alpha,
                                                 .beta = cand[pick].beta, .p1 = cand[pick].p1,
                                                 .p2 = cand[pick].p2};
        }
        rc = sim_run_one(&c, r, timeline, e);
    }
done:
    free(tmp);
    free(cand);
    return rc;
}

int sim_run(const struct sim_config *cfg, struct sim_result *r, FILE *timeline,
            struct alisa_err *e)
{
    if (cfg->search_sim && !cfg->schedule_given && cfg->place && cfg->place->scheduled)
        return sim_run_search_sim(cfg, r, timeline, e);
    return sim_run_one(cfg, r, timeline, e);
}

/* FlexGen's 4-bit cache only where FlexGen runs it (flex_opt.py): its own
 * systems attending on the GPU (with --compress-cache load_cache takes its
 * GPU path even under --cpu-cache-compute), dense attention (`assert not
 * (args.compress_cache and args.attn_sparsity < 1.0)`), heads of whole
 * 64-value groups (cost_kv_bytes does not pad), a profile that prices
 * attention from bytes. 0, or EINVAL naming what differs. */
static int int4_check(const struct sim_config *cfg, struct alisa_err *e)
{
    const struct hw_profile *hw = cfg->hw;
    const struct model_shape *m = cfg->model;
    if (cost_executor_profile(hw))
        return err_set(e, ALISA_EINVAL, "INT4 KV on profile %s: its attention is measured on the "
                       "executor, which stores no INT4 (a datasheet profile prices FlexGen's "
                       "decompression)", hw->name);
    if (!cfg->system->flexgen_policy || cfg->system->cpu_attention)
        return err_set(e, ALISA_EINVAL, "INT4 KV under system %s: FlexGen's compressed cache is "
                       "simulated as FlexGen runs it, attended on the GPU (flexgen-copy or "
                       "flexgen-default)", cfg->system->name);
    if (cfg->sel->budgeted)
        return err_set(e, ALISA_EINVAL, "INT4 KV under selection %s: FlexGen compresses a dense "
                       "cache only (its sparse attention refuses --compress-cache)",
                       cfg->sel->name);
    if ((m->hidden / m->n_heads) % KV_INT4_GROUP)
        return err_set(e, ALISA_EINVAL, "INT4 KV on %s: heads of %u values are not whole groups "
                       "of %d (FlexGen pads each; not priced)", m->name, m->hidden / m->n_heads,
                       KV_INT4_GROUP);
    return 0;
}

static int sim_run_one(const struct sim_config *cfg, struct sim_result *r, FILE *timeline,
                       struct alisa_err *e)
{
    int rc;
    memset(r, 0, sizeof *r);
    r->phase2_step = r->phase3_step = -1;
    r->head_recall_mean = r->head_recall_min = NAN; /* measured by a replay only */
    if (!cfg->batch || !cfg->gen_len || !cfg->prompt_len)
        return err_set(e, ALISA_EINVAL, "batch %u, prompt %u and generated %u tokens must be positive",
                       cfg->batch, cfg->prompt_len, cfg->gen_len);
    if (cfg->flexgen_gpu_batch && cfg->batch % cfg->flexgen_gpu_batch)
        return err_set(e, ALISA_EINVAL, "FlexGen's GPU batch of %u sequences does not divide the "
                       "batch of %u", cfg->flexgen_gpu_batch, cfg->batch);
    if (cfg->precision == KV_INT4 && (rc = int4_check(cfg, e)))
        return rc;
    if (cfg->per_head && cfg->system->block_tokens)
        return err_set(e, ALISA_EINVAL, "--per-head with system %s: it is modelled per sequence "
                       "(its block manager) and selects nothing", cfg->system->name);
    struct run u = {.cfg = cfg, .m = cfg->model, .r = r, .Lm = cfg->model->n_layers,
                    .B = cfg->batch, .N = cfg->gen_len,
                    .ks = kv_shape_of(cfg->model, cfg->precision),
                    .host_ns = cost_layer_host_ns(cfg->sw, cfg->sel->name), .ngb = 1};
    if ((rc = check_trace(cfg, &u.S, &u.Lt, &u.shortest, &u.th, e)))
        return rc;
    u.selp = cfg->sel_params;
    sel_estimate_of(cfg->sel, &cfg->sel_params, &u.est);
    if (u.est.kind != SEL_ESTIMATE_EXACT && (rc = estimate_check(&u, e)))
        return rc;
    u.dense_m = cfg->sel->dense_layers ? cfg->sel->dense_layers(&u.selp) : 0;
    if (u.dense_m > u.Lm)
        u.dense_m = u.Lm;
    run_estimate_state(&u);
    if ((rc = run_flexgen_policy(&u, e)))
        return rc;
    if (cfg->precision == KV_INT4 && r->policy.cache_gpu != 0)
        return err_set(e, ALISA_EINVAL, "INT4 KV with %.4g%% of the cache on the GPU: FlexGen "
                       "keeps a compressed cache on one device (init_cache_one_gpu_batch) and "
                       "decompresses a GPU one whole each step, which is not priced; give "
                       "--flexgen-percent with the cache on the CPU", 100 * r->policy.cache_gpu);
    run_capacities(&u);
    u.extend = cfg->extend && u.shortest < u.N;
    if (u.extend && (rc = run_extension(&u, &u.ext, e)))
        return rc;
    if (r->oom || (rc = run_search(&u, e)))
        return rc;
    r->gpu_kv_capacity_bytes = u.gpu_kv;
    r->cpu_kv_capacity_bytes = u.cpu_kv;
    if (cfg->system->block_tokens)
        return run_vllm(cfg, u.gpu_kv, r, timeline, e);
    if (!(rc = run_map_streams(&u, e)) && !(rc = run_replay(&u, e)) && !r->oom &&
        !(rc = run_price(&u, e)) && !(rc = engine_run(&u.g, e))) {
        run_summarise(&u);
        if (timeline)
            rc = run_timeline(&u, timeline, e);
    }
    run_free(&u);
    return rc;
}

int sim_optimum(const struct sim_config *cfg, struct sim_optimum *opt, struct alisa_err *e)
{
    memset(opt, 0, sizeof *opt);
    /* a system modelled per sequence (vllm's blocks) ignores the placement */
    if (!placement_online_cache(cfg->place) || cfg->system->block_tokens)
        return 0;
    const struct placement_ops *bound[2] = {&place_belady_ops, &place_oracle_cost_ops};
    for (int i = 0; i < 2; i++) {
        struct sim_config c = *cfg;
        struct sim_result r;
        c.place = bound[i];
        int rc = sim_run(&c, &r, NULL, e);
        if (rc)
            return rc;
        opt->oom |= r.oom;
        *(i ? &opt->oracle_total_s : &opt->belady_total_s) = r.total_s;
        *(i ? &opt->oracle_transfer_s : &opt->belady_transfer_s) = r.transfer_s;
    }
    opt->compared = 1;
    return 0;
}
