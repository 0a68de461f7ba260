/* `alisa serve-run`: the executor serves a request stream (issue 46, item
 * 4): the requests alisa serve simulates (the same stream from the same
 * options and seed, or the same CSV), admitted and batched by the same
 * scheduler-core batcher (batcher.h), each iteration one forward pass of
 * rows at their own positions (llm_forward_rows) on the CPU backend's dense
 * cache, prompts taken from a text, outputs greedy; every request's time to
 * first token, time per output token and latency measured on the wall
 * clock, reported as alisa serve reports them (serve_metrics). With
 * --repeat the stream is served several times and the run of median
 * makespan reported; with --predict the serving simulator (serve.h) runs
 * the same stream with the same batching on the executor's own KV pool and
 * a calibrated profile, and each metric's error is reported beside the
 * repeats' spread, with two-sample KS and TOST tests (stattest.h) of the
 * per-request latencies (issue 46, item 4).
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batcher.h"
#include "calibrate.h"
#include "cli.h"
#include "cli_exec.h"
#include "cli_opts.h"
#include "cmds.h"
#include "catalog.h"
#include "costmodel.h"
#include "cpu_ops.h"
#include "model.h"
#include "outfile.h"
#include "serve.h"
#include "stattest.h"
#include "workload.h"

struct serve_run_opts {
    const char *model, *tokenizer, *text, *requests, *per_request, *timeline, *outputs;
    const char *trace, *pred_timeline; /* --predict's */
    struct kv_opts kvo; /* --weights and --threads; --predict's --profile and --hardware */
    struct wl_params wl;
    uint32_t max_num_seqs, max_batched_tokens, block_tokens, repeat;
    uint64_t kv_bytes;
    int no_chunked_prefill, json, predict;
    double slo_ttft, slo_tpot;
};

#define SR(f) offsetof(struct serve_run_opts, f)
static const struct cli_opt serve_run_own[] = {
    {"model", "M", CLI_STR, SR(model), NULL, 1,
     "as alisa run --model: a catalog or short name, llama2.c\n"
     ".bin, GGUF file or Hugging Face checkpoint directory", 0},
    {"tokenizer", "T", CLI_STR, SR(tokenizer), NULL, 0,
     "tokenizer file (default: the catalog's or the GGUF's)", 0},
    {"text", "FILE", CLI_STR, SR(text), NULL, 1,
     "the prompts: request i reads its prompt from the text's tokens\n"
     "at offset i x 97 (wrapping), after a BOS", 0},
    {"requests-csv", "FILE", CLI_STR, SR(requests), NULL, 0,
     "read the stream instead (alisa serve --requests-csv's format)", 0},
    {"max-num-seqs", "N", CLI_U32, SR(max_num_seqs), NULL, 0,
     "requests running at once, at most (default 8)", 0},
    {"max-batched-tokens", "N", CLI_U32, SR(max_batched_tokens), NULL, 0,
     "token rows per iteration (default 256)", 0},
    {"no-chunked-prefill", NULL, CLI_FLAG, SR(no_chunked_prefill), NULL, 0,
     "a prompt runs whole in one iteration", 0},
    {"block-tokens", "N", CLI_U32, SR(block_tokens), NULL, 0,
     "tokens per KV block (default 16)", 0},
    {"kv-bytes", "BYTES", CLI_FN, SR(kv_bytes), cli_read_memory, 0,
     "the KV pool (FP32 K and V of every layer, in blocks; default:\n"
     "room for --max-num-seqs requests of the longest length)", 0},
    {"slo-ttft", "S", CLI_DOUBLE, SR(slo_ttft), NULL, 0,
     "time-to-first-token objective, seconds (goodput)", 0},
    {"slo-tpot", "S", CLI_DOUBLE, SR(slo_tpot), NULL, 0,
     "time-per-output-token objective, seconds (goodput)", 0},
    {"per-request", "FILE", CLI_STR, SR(per_request), NULL, 0,
     "per-request CSV, as alisa serve writes it", 0},
    {"timeline", "FILE", CLI_STR, SR(timeline), NULL, 0,
     "per-iteration CSV, alisa serve --timeline's columns, measured", 0},
    {"repeat", "R", CLI_U32, SR(repeat), NULL, 0,
     "serve the stream R times (1 to 31, default 1): the run with the\n"
     "median makespan is reported, the runs' spread beside it", 0},
    {"predict", NULL, CLI_FLAG, SR(predict), NULL, 0,
     "also simulate the same stream (alisa serve, dense, on the\n"
     "executor's own KV pool) on --profile, and report each metric's\n"
     "error and the latency distributions' KS and TOST tests", 0},
    {"profile", "FILE", CLI_STR, SR(kvo.profile), NULL, 0,
     "calibrated hardware profile (alisa calibrate -o): --predict's,\n"
     "and a placement's prices of load against recompute (--hardware\n"
     "picks its section; default its last)", 0},
    {"outputs", "FILE", CLI_STR, SR(outputs), NULL, 0,
     "each request's generated token ids, one line a request (id, then\n"
     "the ids), from the last run", 0},
    {"trace", "FILE", CLI_STR, SR(trace), NULL, 0,
     "--predict: attention trace the simulated requests replay", 0},
    {"predicted-timeline", "FILE", CLI_STR, SR(pred_timeline), NULL, 0,
     "--predict: the simulator's per-iteration CSV (--timeline's\n"
     "columns): with arrivals at once it plans the same iterations,\n"
     "so the two compare row by row", 0},
    {"json", NULL, CLI_FLAG, SR(json), NULL, 0, "print JSON", 0},
    {0}};

static const struct cli_group serve_run_groups[] = {
    {serve_run_own, 0}, {cli_stream_opts, SR(wl)}, KV_GROUPS(struct serve_run_opts, kvo)};
static const struct cli_command_opts serve_run_command = {serve_run_groups, 5, 1, 0};
#undef SR

void cmd_serve_run_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa serve-run --model M --text FILE [options]\n"
            "\n"
            "Serves a stream of requests on the executor (CPU backend; every token's KV in\n"
            "one dense cache, or under --selection and --placement each request's KV\n"
            "placed token by token in its slot's device and host arenas by the scheduler\n"
            "core, as alisa run places it): the stream alisa serve simulates from the same\n"
            "options and seed (or the same CSV), batched by the same scheduler code\n"
            "(vLLM V1's rules: a token\n"
            "budget, decodes first, prompts chunked, preemption by recomputation when the\n"
            "KV pool is full), each iteration one forward pass over every running\n"
            "request's rows; prompts from the text, outputs greedy. Requests arrive on\n"
            "the wall clock; reports each one's time to first token, time per output\n"
            "token and latency (mean, P50, P90, P99), throughput and goodput. With\n"
            "--predict, the serving simulator (alisa serve) runs the same stream with the\n"
            "same batching, selection and placement on this run's KV pool and arenas and a\n"
            "calibrated profile, and each\n"
            "metric's error is reported with KS and TOST tests of the per-request latencies\n"
            "(experiments/serve-validate runs it over fixed held-out streams). The machine's\n"
            "weight rate is sampled before and after each run (alisa validate's probe, 0.5\n"
            "s), and each error is also given normalised: the prediction scaled by the\n"
            "profile's rate over the machine's during the reported run, the machine's\n"
            "drift since calibration taken out.\n"
            "\n");
    cli_opts_help(out, &serve_run_command, 24);
    fprintf(out, "\nexamples (run as shown by tests/readme_test.sh):\n"
                 "  alisa serve-run --model stories260K --text "
                 "../shared/models/eval-text/tinystories_val_subset.txt --requests 12 --rate 200 "
                 "--prompt-len 16:48 --output-len 8:24\n"
                 "  alisa serve-run --model stories260K --text "
                 "../shared/models/eval-text/tinystories_val_subset.txt --requests 12 --rate 200 "
                 "--prompt-len 16:48 --output-len 8:24 --max-num-seqs 4 --selection h2o "
                 "--placement lru --gpu-kv-bytes 120k\n");
}

/* The executor's KV pool in blocks, and which slot of the state each
 * running request holds (struct batcher_memory's user). */
struct pool_ctx {
    uint64_t blocks, used;
    uint32_t bt;
    /* the tiered cache's slots begin a sequence when taken (NULL: dense) */
    struct llm_state *st;
    const struct batcher *batcher;
    const uint32_t *plen;
    int rc;              /* llm_state_slot_begin's failure, else 0 */
    uint32_t cap_tokens; /* a host-tier placement's device arena, tokens a slot and layer;
                            0: every token is charged */
    uint64_t *held;      /* (n) blocks per request */
    uint32_t *slot;      /* (n) its slot, UINT32_MAX while it has none */
    uint32_t *free_slot; /* stack of free slots */
    uint32_t n_free;
};

/* The blocks a request holds through position last: every token's, or
 * under a placement with a host tier only what its slot's device arena
 * can hold (the pool is device memory; the rest lies on the host), as the
 * serving simulator charges a request's GPU-resident tokens. */
static uint64_t blocks_of(const struct pool_ctx *c, uint32_t last)
{
    uint64_t tokens = (uint64_t)last + 1;
    if (c->cap_tokens && tokens > c->cap_tokens)
        tokens = c->cap_tokens;
    return (tokens + c->bt - 1) / c->bt;
}

static int pool_fits(void *user, uint32_t id, uint32_t last)
{
    struct pool_ctx *c = user;
    return c->used - c->held[id] + blocks_of(c, last) <= c->blocks;
}

static void pool_take(void *user, uint32_t id, uint32_t last)
{
    struct pool_ctx *c = user;
    if (c->slot[id] == UINT32_MAX) { /* running requests never outnumber the slots */
        ALISA_ASSERT(c->n_free > 0);
        c->slot[id] = c->free_slot[--c->n_free];
        /* a request (again, after preemption: its prompt and what it had
         * generated, recomputed as one prompt) begins in the slot */
        if (c->st && !c->rc)
            c->rc = llm_state_slot_begin(c->st, c->slot[id],
                                         c->plen[id] + batcher_generated(c->batcher, id));
    }
    c->used += blocks_of(c, last) - c->held[id];
    c->held[id] = blocks_of(c, last);
}

static void pool_release(void *user, uint32_t id)
{
    struct pool_ctx *c = user;
    c->used -= c->held[id];
    c->held[id] = 0;
    if (c->slot[id] != UINT32_MAX)
        c->free_slot[c->n_free++] = c->slot[id];
    c->slot[id] = UINT32_MAX;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* One stream served on the executor: what every run of it shares. */
struct exec_stream {
    const struct serve_run_opts *o;
    const struct workload *w;
    const struct llm_config *c;
    struct llm_state *st;
    uint32_t n, max_len;
    uint32_t *toks, *plen, *olen, *rt, *rs, *rp, *heads; /* rt, rs, rp: one block */
    struct batcher_item *items;
    double *scratch;
    struct pool_ctx pc;
    double block_bytes; /* a block's FP32 K and V over every layer */
    struct tiered tr;   /* under --selection or --placement: the scheduler and arenas */
    uint32_t arena_tokens; /* --gpu-kv-bytes's share of a slot and layer, FP32 tokens;
                              0 without it */
    const char *sel, *place; /* the selection and placement served (dense, gpu-only: the
                                dense cache) */
    const struct llm_model *m;
    double *rate; /* (repeat + 1) with --predict: the machine's weight rate before run 0
                     and after each run (calib_weight_rate, GB/s; 0 where it failed) */
};

static void stream_free(struct exec_stream *x)
{
    free(x->rate);
    llm_state_free(x->st);
    tiered_free(&x->tr);
    free(x->toks);
    free(x->plen);
    free(x->olen);
    free(x->rt);
    free(x->heads);
    free(x->items);
    free(x->scratch);
    free(x->pc.held);
    free(x->pc.slot);
    free(x->pc.free_slot);
    memset(x, 0, sizeof *x);
}

/* The prompts (request i's: BOS, then the text from offset i x 97,
 * wrapping), the buffers, the KV pool and the executor's state. */
static int stream_setup(struct exec_stream *x, const struct loaded *l, const struct workload *w,
                        uint32_t max_len, const struct serve_run_opts *o, struct alisa_err *e)
{
    const uint32_t n = w->n;
    *x = (struct exec_stream){.o = o, .w = w, .c = &l->m->c, .n = n, .max_len = max_len,
                              .pc = {.bt = o->block_tokens}, .m = l->m};
    uint32_t *text = NULL, n_blocks = 0;
    size_t n_text = 0;
    int rc = text_tokens(l->t, o->text, 0, (size_t)n * 97 + max_len + 1, &text, &n_text,
                         &n_blocks, e);
    if (!rc && n_text < 2)
        rc = err_set(e, ALISA_EINVAL, "%s: %zu tokens, too few for prompts", o->text, n_text);
    x->toks = malloc((size_t)n * max_len * sizeof *x->toks);
    x->plen = malloc(n * sizeof *x->plen);
    x->olen = malloc(n * sizeof *x->olen);
    x->items = malloc((size_t)o->max_num_seqs * sizeof *x->items);
    x->rt = malloc((size_t)o->max_batched_tokens * 3 * sizeof *x->rt);
    x->heads = malloc((size_t)o->max_num_seqs * sizeof *x->heads);
    x->scratch = malloc(n * sizeof *x->scratch);
    x->pc.held = calloc(n, sizeof *x->pc.held);
    x->pc.slot = malloc(n * sizeof *x->pc.slot);
    x->pc.free_slot = malloc((size_t)o->max_num_seqs * sizeof *x->pc.free_slot);
    if (!rc && (!x->toks || !x->plen || !x->olen || !x->items || !x->rt || !x->heads ||
                !x->scratch || !x->pc.held || !x->pc.slot || !x->pc.free_slot))
        rc = err_set(e, ALISA_ENOMEM, "out of memory for %u requests", n);
    if (!rc) {
        x->rs = x->rt + o->max_batched_tokens;
        x->rp = x->rs + o->max_batched_tokens;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t *t = x->toks + (size_t)i * max_len;
            t[0] = 1;
            for (uint32_t p = 1; p < w->req[i].prompt_len; p++)
                t[p] = text[((size_t)i * 97 + p - 1) % n_text] % x->c->vocab;
            x->plen[i] = w->req[i].prompt_len;
            x->olen[i] = w->req[i].output_len;
        }
        uint64_t bpr = (max_len + o->block_tokens - 1) / o->block_tokens;
        x->block_bytes = (double)o->block_tokens * x->c->n_layers * x->c->kv_dim * 2 * 4;
        x->pc.blocks = o->kv_bytes ? o->kv_bytes / (uint64_t)x->block_bytes
                                   : bpr * o->max_num_seqs;
        rc = exec_state_create(&x->st, &o->kvo, l->m, o->max_num_seqs, max_len, e);
    }
    if (!rc)
        rc = kv_opts_attach(&x->tr, &o->kvo, l->m, x->st, o->max_num_seqs, max_len, max_len, e);
    x->sel = o->kvo.selection ? o->kvo.selection : "dense";
    x->place = o->kvo.placement ? o->kvo.placement : "gpu-only";
    if (!rc && x->tr.sched) {
        x->pc.st = x->st;
        x->pc.plen = x->plen;
        x->arena_tokens = (uint32_t)(o->kvo.gpu_bytes / ((uint64_t)o->max_num_seqs *
                                                         x->c->n_layers * x->c->kv_dim * 2 * 4));
        if (placement_find(x->place)->host_tier)
            x->pc.cap_tokens = x->arena_tokens;
    }
    free(text);
    return rc;
}

/* One iteration's rows into x->rt/rs/rp (*R of them) and the sampling
 * rows into x->heads (*n_head): logits for each sampling request's last
 * row only, as vLLM computes them. */
static void stream_rows(struct exec_stream *x, uint32_t n_it, uint32_t *R, uint32_t *n_head)
{
    *R = *n_head = 0;
    for (uint32_t k = 0; k < n_it; k++) {
        const struct batcher_item *it = &x->items[k];
        for (uint32_t p = it->first; p < it->first + it->n; p++, (*R)++) {
            x->rt[*R] = x->toks[(size_t)it->id * x->max_len + p];
            x->rs[*R] = x->pc.slot[it->id];
            x->rp[*R] = p;
        }
        if (it->samples)
            x->heads[(*n_head)++] = *R - 1;
    }
}

/* Each sampling request's next token: the greedy pick. */
static void stream_sample(struct exec_stream *x, const struct batcher *bt, uint32_t n_it,
                          const float *lg)
{
    for (uint32_t k = 0, h = 0; k < n_it; k++)
        if (x->items[k].samples) {
            uint32_t id = x->items[k].id, g = batcher_generated(bt, id);
            const float *row = lg + (size_t)h++ * x->c->vocab;
            if (x->plen[id] + g < x->max_len)
                x->toks[(size_t)id * x->max_len + x->plen[id] + g] = llm_argmax(row, x->c->vocab);
        }
}

/* Serves the stream once, from an empty pool, into *r (its req allocated
 * here; release with serve_result_free); tl, when non-NULL, gets the
 * timeline's rows. */
static int stream_serve(struct exec_stream *x, FILE *tl, struct serve_result *r,
                        struct alisa_err *e)
{
    const struct serve_run_opts *o = x->o;
    const uint32_t n = x->n;
    struct batcher *bt = NULL;
    *r = (struct serve_result){.n = n, .req = calloc(n, sizeof *r->req)};
    if (!r->req)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u requests", n);
    x->pc.used = 0;
    x->pc.n_free = 0;
    for (uint32_t i = 0; i < n; i++) {
        x->pc.held[i] = 0;
        x->pc.slot[i] = UINT32_MAX;
        r->req[i] = (struct serve_request){.arrival_s = x->w->req[i].arrival_s,
                                           .prompt_len = x->plen[i], .output_len = x->olen[i]};
    }
    for (uint32_t s = 0; s < o->max_num_seqs; s++)
        x->pc.free_slot[x->pc.n_free++] = o->max_num_seqs - 1 - s;
    struct batcher_config bc = {o->max_num_seqs, o->max_batched_tokens, o->no_chunked_prefill};
    int rc = batcher_create(&bt, &bc, n, x->plen, x->olen, e);
    x->pc.batcher = bt;
    x->pc.rc = 0;
    const struct batcher_memory mem = {&x->pc, pool_fits, pool_take, pool_release};
    double t0 = cli_now_s(), running_sum = 0;
    uint32_t next = 0, done = 0;
    while (!rc && done < n) {
        double now = cli_now_s() - t0;
        while (next < n && x->w->req[next].arrival_s <= now)
            batcher_arrive(bt, next++);
        if (batcher_running(bt) == 0 && batcher_waiting(bt) == 0) {
            sleep_s(x->w->req[next].arrival_s - now);
            continue;
        }
        uint32_t n_it, preempted, stuck, R, n_head;
        if ((rc = batcher_plan(bt, &mem, x->items, &n_it, &preempted, &stuck)))
            break;
        r->preemptions += preempted;
        if (x->pc.rc) {
            rc = err_set(e, x->pc.rc, "%s", llm_state_error(x->st)->msg);
            break;
        }
        if (stuck != UINT32_MAX) {
            rc = err_set(e, ALISA_EINVAL, "request %u (%u + %u tokens) does not fit --kv-bytes "
                         "(%llu blocks of %u tokens) alone", stuck, x->plen[stuck],
                         x->olen[stuck], (unsigned long long)x->pc.blocks, o->block_tokens);
            break;
        }
        if (n_it == 0)
            continue;
        stream_rows(x, n_it, &R, &n_head);
        double start = cli_now_s() - t0;
        const float *lg = llm_forward_rows(x->st, x->rt, x->rs, x->rp, R, x->heads, n_head);
        if (!lg) {
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(x->st)->msg);
            break;
        }
        stream_sample(x, bt, n_it, lg);
        now = cli_now_s() - t0;
        uint32_t pre_tok = 0;
        for (uint32_t k = 0; tl && k < n_it; k++)
            pre_tok += x->items[k].first < x->plen[x->items[k].id] ? x->items[k].n : 0;
        r->iterations++;
        running_sum += batcher_running(bt);
        batcher_done(bt, &mem, x->items, n_it);
        if (tl) /* after the iteration, as the simulator's rows (serve.c) */
            fprintf(tl, "%u,%.9f,%.9f,%u,%u,%u,%u,%u,%.0f,0\n", r->iterations - 1, start, now,
                    batcher_running(bt), batcher_waiting(bt), R, pre_tok, preempted,
                    (double)x->pc.used * x->block_bytes);
        for (uint32_t k = 0; k < n_it; k++) {
            if (x->items[k].first_token)
                r->req[x->items[k].id].first_token_s = now;
            if (x->items[k].finished) {
                r->req[x->items[k].id].finish_s = now;
                done++;
            }
        }
    }
    if (!rc) {
        for (uint32_t i = 0; i < n; i++)
            r->req[i].preemptions = batcher_preemptions(bt, i);
        r->repeated_prefill_tokens = (double)batcher_lost_tokens(bt);
        r->mean_running = r->iterations ? running_sum / r->iterations : 0;
        serve_metrics(r, o->slo_ttft, o->slo_tpot, x->scratch);
    }
    batcher_destroy(bt);
    return rc;
}

/* The figures a serving run is judged by, measured against predicted. */
enum { M_MAKESPAN, M_THROUGHPUT, M_TTFT, M_TPOT = M_TTFT + 4, M_E2E = M_TPOT + 4, M_N = M_E2E + 4 };
static const char *const metric_name[M_N] = {
    "makespan", "throughput", "ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", "tpot_mean",
    "tpot_p50", "tpot_p90", "tpot_p99", "e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99"};

static void metrics_of(const struct serve_result *r, double v[M_N])
{
    const struct serve_stat *st[3] = {&r->ttft, &r->tpot, &r->e2e};
    v[M_MAKESPAN] = r->makespan_s;
    v[M_THROUGHPUT] = r->throughput_tok_s;
    for (int k = 0; k < 3; k++) {
        v[M_TTFT + 4 * k] = st[k]->mean;
        v[M_TTFT + 4 * k + 1] = st[k]->p50;
        v[M_TTFT + 4 * k + 2] = st[k]->p90;
        v[M_TTFT + 4 * k + 3] = st[k]->p99;
    }
}

static double rel_pct(double pred, double meas)
{
    return meas != 0 ? 100.0 * (pred - meas) / meas : 0;
}

/* The comparison: each metric's error, the repeats' spread, and per
 * latency the two-sample KS test and TOST at +-10% of the per-request
 * values (measured run's against the simulator's); and, as alisa validate
 * normalises a decode, each error with the machine's drift since
 * calibration taken out: the prediction's times scaled by the profile's
 * weight rate over the machine's during the reported run (the mean of the
 * samples before and after it), its throughput by the inverse. */
struct serve_check {
    double meas[M_N], pred[M_N], err[M_N], spread[M_N]; /* spread: -1 with one run */
    double ks_d[3], ks_p[3], tost_p[3];                   /* ttft, tpot, e2e */
    double rate_profile, rate_run; /* GB/s; rate_run 0: not sampled (no normalised error) */
    double norm_err[M_N];
};
#define SERVE_TOST_MARGIN 0.10

static int serve_compare(const struct serve_result *runs, uint32_t n_runs, uint32_t pick,
                         const struct serve_result *pred, struct serve_check *k, double *scratch,
                         struct alisa_err *e)
{
    double lo[M_N], hi[M_N];
    metrics_of(&runs[pick], k->meas);
    metrics_of(pred, k->pred);
    memcpy(lo, k->meas, sizeof lo);
    memcpy(hi, k->meas, sizeof hi);
    for (uint32_t i = 0; i < n_runs; i++) {
        double v[M_N];
        metrics_of(&runs[i], v);
        for (int m = 0; m < M_N; m++) {
            lo[m] = v[m] < lo[m] ? v[m] : lo[m];
            hi[m] = v[m] > hi[m] ? v[m] : hi[m];
        }
    }
    const double scale = k->rate_run > 0 ? k->rate_profile / k->rate_run : 0;
    for (int m = 0; m < M_N; m++) {
        k->err[m] = rel_pct(k->pred[m], k->meas[m]);
        k->spread[m] = n_runs < 2 ? -1 : k->meas[m] != 0 ? 100.0 * (hi[m] - lo[m]) / k->meas[m] : 0;
        double pn = m == M_THROUGHPUT ? k->pred[m] / scale : k->pred[m] * scale;
        k->norm_err[m] = scale > 0 ? rel_pct(pn, k->meas[m]) : 0;
    }
    const uint32_t n = pred->n;
    double *a = scratch, *b = scratch + n;
    for (int s = 0; s < 3; s++) {
        for (uint32_t i = 0; i < n; i++) {
            const struct serve_request *q = &runs[pick].req[i], *p = &pred->req[i];
            a[i] = s == 0 ? q->ttft_s : s == 1 ? q->tpot_s : q->e2e_s;
            b[i] = s == 0 ? p->ttft_s : s == 1 ? p->tpot_s : p->e2e_s;
        }
        int rc = stattest_ks2(a, n, b, n, &k->ks_d[s], &k->ks_p[s], e);
        if (!rc && n >= 2)
            rc = stattest_tost(a, n, b, n, SERVE_TOST_MARGIN, &k->tost_p[s], e);
        else
            k->tost_p[s] = NAN;
        if (rc)
            return rc;
    }
    return 0;
}

/* The simulator on the same stream: the run's selection and placement
 * (dense and gpu-only for the executor's dense cache), FP32 KV, the same
 * batching, the executor's own pool and its device arena's tokens per
 * request and layer, on the profile's hardware. */
static int serve_predict(const struct exec_stream *x, struct serve_result *pred,
                         char *hw_name, size_t hw_size,
                         double *rate_profile, struct alisa_err *e)
{
    const struct serve_run_opts *o = x->o;
    struct catalog cat;
    const struct hw_profile *hw;
    int rc = kv_opts_catalog(&o->kvo, &cat, &hw, e);
    if (rc)
        return rc;
    struct model_shape shape;
    llm_model_shape(x->m, &shape);
    struct serve_config cfg = {
        .trace = o->trace, .model = &shape, .hw = hw, .sel = selection_find(x->sel),
        .sel_params = o->kvo.sel, .place = placement_find(x->place),
        .cpu_mem_bytes = (double)o->kvo.cpu_bytes, .gpu_tokens = x->arena_tokens,
        .precision = KV_FP32, .kv_pool_bytes = (double)x->pc.blocks * x->block_bytes,
        .max_num_seqs = o->max_num_seqs, .max_batched_tokens = o->max_batched_tokens,
        .no_chunked_prefill = o->no_chunked_prefill, .block_tokens = o->block_tokens,
        .dense_cache = !x->tr.sched,
        .slo_ttft_s = o->slo_ttft, .slo_tpot_s = o->slo_tpot};
    ALISA_ASSERT(cfg.sel && cfg.place);
    /* serve-run serves on the CPU: its rule is the CPU backend's */
    const double rule = (double)cpu_attend_parallel_min();
    if (cfg.dense_cache && cost_dense_cache_measured(hw) && rule != hw->dense_attn_parallel_min)
        fprintf(stderr, "alisa serve-run: warning: %s: dense_attn_parallel_min %.0f, this "
                "run's executor attends a call's rows on one thread below %.0f "
                "multiply-adds (its threads or ALISA_WAIT differ from the calibration's): "
                "small calls are priced by the other rule\n",
                o->kvo.profile ? o->kvo.profile : hw->name, hw->dense_attn_parallel_min, rule);
    char part[4200];
    FILE *tl = NULL;
    if (o->pred_timeline &&
        !(tl = outfile_open(o->pred_timeline, part, sizeof part, "predicted timeline", e))) {
        catalog_deinit(&cat);
        return ALISA_EIO;
    }
    rc = serve_run(&cfg, x->w, pred, tl, e);
    if (tl) /* kept only when the run succeeded */
        rc = outfile_close(tl, part, o->pred_timeline, rc, e);
    if (!rc && pred->oom)
        rc = err_set(e, ALISA_EINVAL, "the simulator ran out of memory where the executor did "
                     "not: %s", pred->oom_reason);
    if (!rc)
        snprintf(hw_name, hw_size, "%s", hw->name);
    /* the machine's speed at calibration (alisa validate's rule) */
    *rate_profile = calib_profile_weight_rate(x->m, hw);
    catalog_deinit(&cat);
    return rc;
}

static json_t *check_json(const struct serve_check *k, const char *profile, const char *hw,
                          const char *trace, const struct serve_result *pred)
{
    json_t *p = cli_serve_latencies_json(pred), *err = json_object(), *spread = json_object(),
           *tests = json_object();
    static const char *const lat[3] = {"ttft", "tpot", "e2e"};
    if (!p || !err || !spread || !tests)
        goto fail;
    json_object_set_new(p, "profile", json_string(profile));
    json_object_set_new(p, "hardware", json_string(hw));
    json_object_set_new(p, "trace", json_string(trace));
    for (int m = 0; m < M_N; m++) {
        json_object_set_new(err, metric_name[m], json_real(k->err[m]));
        json_object_set_new(spread, metric_name[m],
                            k->spread[m] >= 0 ? json_real(k->spread[m]) : json_null());
    }
    for (int s = 0; s < 3; s++)
        json_object_set_new(tests, lat[s], json_pack("{s:f, s:f, s:o}", "ks_d", k->ks_d[s],
                                                     "ks_p", k->ks_p[s], "tost_p",
                                                     isfinite(k->tost_p[s])
                                                         ? json_real(k->tost_p[s])
                                                         : json_null()));
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:f}", "predicted", p, "error_pct", err,
                          "repeat_spread_pct", spread, "tests", tests, "tost_margin",
                          SERVE_TOST_MARGIN);
    if (o && k->rate_run > 0) {
        json_t *norm = json_object();
        for (int m = 0; norm && m < M_N; m++)
            json_object_set_new(norm, metric_name[m], json_real(k->norm_err[m]));
        json_object_set_new(o, "normalised_error_pct", norm ? norm : json_null());
    }
    if (o)
        json_object_set_new(o, "machine", json_pack("{s:f, s:o}", "rate_profile_gbps",
                                                     k->rate_profile, "rate_gbps",
                                                     k->rate_run > 0 ? json_real(k->rate_run)
                                                                     : json_null()));
    if (o)
        return o;
    return NULL; /* json_pack stole the references */
fail:
    json_decref(p);
    json_decref(err);
    json_decref(spread);
    json_decref(tests);
    return NULL;
}

static void check_print(const struct serve_check *k, const char *hw, const struct serve_result *pred,
                        const struct exec_stream *x)
{
    const struct serve_run_opts *o = x->o;
    printf("\npredicted on %s (alisa serve, %s / %s, the executor's pool and arenas; trace %s):\n",
           hw, x->sel, x->place, o->trace);
    cli_serve_print_latencies(pred, o->slo_ttft, o->slo_tpot);
    printf("\nerror, predicted against measured (the repeats' spread in brackets):\n");
    printf("  makespan %+.1f%%%s, throughput %+.1f%%\n", k->err[M_MAKESPAN],
           k->spread[M_MAKESPAN] >= 0 ? "" : " (one run)", k->err[M_THROUGHPUT]);
    static const char *const lat[3] = {"TTFT", "TPOT", "latency"};
    for (int s = 0; s < 3; s++) {
        printf("  %-8s", lat[s]);
        for (int q = 0; q < 4; q++) {
            int m = M_TTFT + 4 * s + q;
            printf("  %s %+.1f%%", q == 0 ? "mean" : q == 1 ? "P50" : q == 2 ? "P90" : "P99",
                   k->err[m]);
            if (k->spread[m] >= 0)
                printf(" [%.1f%%]", k->spread[m]);
        }
        printf("\n");
    }
    printf("  per-request distributions: ");
    for (int s = 0; s < 3; s++)
        printf("%s KS D %.3f p %.3g, TOST +-%.0f%% p %.3g%s", lat[s], k->ks_d[s], k->ks_p[s],
               100 * SERVE_TOST_MARGIN, k->tost_p[s], s < 2 ? "; " : "\n");
    if (k->rate_run > 0)
        printf("  normalised (the prediction x the profile's weight rate %.3g GB/s / the "
               "machine's %.3g GB/s during the run): makespan %+.1f%%, TTFT mean %+.1f%%, TPOT "
               "mean %+.1f%%, latency mean %+.1f%%\n", k->rate_profile, k->rate_run,
               k->norm_err[M_MAKESPAN], k->norm_err[M_TTFT], k->norm_err[M_TPOT],
               k->norm_err[M_E2E]);
}

/* The run with the median makespan (the lower of the middle two). */
static uint32_t median_run(const struct serve_result *runs, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t below = 0;
        for (uint32_t j = 0; j < n; j++)
            below += runs[j].makespan_s < runs[i].makespan_s ||
                     (runs[j].makespan_s == runs[i].makespan_s && j < i);
        if (below == (n - 1) / 2)
            best = i;
    }
    return best;
}

static int report(const struct exec_stream *x, const char *model, const struct serve_result *r,
                  uint32_t n_runs, const struct serve_check *k, const char *hw,
                  const struct serve_result *pred)
{
    const struct serve_run_opts *o = x->o;
    /* the tiered cache's moves, a run's (every run serves the same stream) */
    uint64_t moves[3] = {0, 0, 0};
    if (x->tr.ks)
        kvstore_counts(x->tr.ks, &moves[0], &moves[1], &moves[2]);
    if (!o->json) {
        printf("%s on the CPU executor, %u requests, %u at most running, %u tokens an "
               "iteration, %llu KV blocks of %u tokens%s\n", model, x->n, o->max_num_seqs,
               o->max_batched_tokens, (unsigned long long)x->pc.blocks, o->block_tokens,
               n_runs > 1 ? "; the median of the runs" : "");
        if (x->tr.sched)
            printf("KV           %s / %s in each slot's arenas: a run offloads %.0f tokens, "
                   "loads %.0f, recomputes %.0f\n", x->sel, x->place, (double)moves[0] / n_runs,
                   (double)moves[1] / n_runs, (double)moves[2] / n_runs);
        cli_serve_print_latencies(r, o->slo_ttft, o->slo_tpot);
        if (k)
            check_print(k, hw, pred, x);
        return 0;
    }
    json_t *root = cli_serve_latencies_json(r);
    json_t *check = k ? check_json(k, o->kvo.profile, hw, o->trace, pred) : NULL;
    if (!root || (k && !check)) {
        json_decref(root);
        json_decref(check);
        struct alisa_err e = {{0}};
        err_set(&e, ALISA_EINVAL, "a figure of the run is not a finite number; no JSON written");
        return cli_fail(&e);
    }
    json_object_set_new(root, "model", json_string(model));
    json_object_set_new(root, "backend", json_string("cpu"));
    json_object_set_new(root, "max_num_seqs", json_integer(o->max_num_seqs));
    json_object_set_new(root, "max_batched_tokens", json_integer(o->max_batched_tokens));
    json_object_set_new(root, "chunked_prefill", json_boolean(!o->no_chunked_prefill));
    json_object_set_new(root, "kv_blocks", json_integer((json_int_t)x->pc.blocks));
    json_object_set_new(root, "selection", json_string(x->sel));
    json_object_set_new(root, "placement", json_string(x->place));
    json_object_set_new(root, "kv_offloads", json_real((double)moves[0] / n_runs));
    json_object_set_new(root, "kv_loads", json_real((double)moves[1] / n_runs));
    json_object_set_new(root, "kv_recomputes", json_real((double)moves[2] / n_runs));
    json_object_set_new(root, "repeat", json_integer(n_runs));
    json_object_set_new(root, "workload", cli_serve_workload_json(o->requests, &o->wl));
    if (check)
        json_object_update(root, check);
    json_decref(check);
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    printf("\n");
    json_decref(root);
    return 0;
}

/* Options checked before the model loads; 0 or a usage error's code. */
static int serve_run_check(struct serve_run_opts *o)
{
    int rc = cli_serve_check_batching(cmd_serve_run_usage, o->max_num_seqs, o->max_batched_tokens,
                                      o->block_tokens, o->slo_ttft, o->slo_tpot);
    if (rc)
        return rc;
    if (o->repeat < 1 || o->repeat > 31)
        return cli_usage_error(cmd_serve_run_usage, "--repeat %u: expected 1..31", o->repeat);
    if (o->predict && (!o->kvo.profile || !o->trace))
        return cli_usage_error(cmd_serve_run_usage, "--predict needs --profile and --trace");
    if (!o->predict && (o->trace || o->pred_timeline))
        return cli_usage_error(cmd_serve_run_usage, "--trace and --predicted-timeline are "
                               "--predict's");
    if (!o->predict && !o->kvo.placement && (o->kvo.profile || o->kvo.hardware))
        return cli_usage_error(cmd_serve_run_usage, "--profile and --hardware are --predict's "
                               "and a placement's");
    if ((rc = kv_opts_check(&o->kvo)))
        return rc;
    if (o->kvo.int8 || o->kvo.pipeline || (o->kvo.backend && strcmp(o->kvo.backend, "cpu")))
        return cli_usage_error(cmd_serve_run_usage, "--kv-int8, --backend and --cuda-pipeline: "
                               "the CPU backend serves FP32 KV only");
    struct sel_estimate est;
    const struct selection_ops *sel = o->kvo.selection ? selection_find(o->kvo.selection) : NULL;
    if (sel && (sel_estimate_of(sel, &o->kvo.sel, &est), est.kind == SEL_ESTIMATE_PARTIAL))
        return cli_usage_error(cmd_serve_run_usage, "--%s: InfiniGen's speculation skews by one "
                               "prompt for every sequence; not served", est.knob);
    if (sel && o->predict && est.kind != SEL_ESTIMATE_EXACT)
        return cli_usage_error(cmd_serve_run_usage, "--%s with --predict: the serving simulator "
                               "replays the exact row and prices no estimate", est.knob);
    return 0;
}

/* The longest request, or a usage error's code in *rc when a prompt
 * cannot run whole without chunked prefill. */
static uint32_t stream_max_len(const struct workload *w, const struct serve_run_opts *o, int *rc)
{
    uint32_t max_len = 0;
    *rc = 0;
    for (uint32_t i = 0; i < w->n && !*rc; i++) {
        uint32_t len = w->req[i].prompt_len + w->req[i].output_len;
        max_len = len > max_len ? len : max_len;
        if (o->no_chunked_prefill && len - 1 > o->max_batched_tokens)
            *rc = cli_usage_error(cmd_serve_run_usage, "request %u: %u prompt + %u output tokens "
                                  "do not fit --max-batched-tokens %u without chunked prefill",
                                  i, w->req[i].prompt_len, w->req[i].output_len,
                                  o->max_batched_tokens);
    }
    return max_len;
}

/* Each request's generated tokens (the last run's) into o->outputs: its id,
 * then the ids, one line a request. */
static int write_outputs(const struct exec_stream *x, struct alisa_err *e)
{
    char part[4200];
    FILE *f = outfile_open(x->o->outputs, part, sizeof part, "outputs", e);
    if (!f)
        return ALISA_EIO;
    for (uint32_t i = 0; i < x->n; i++) {
        fprintf(f, "%u", i);
        for (uint32_t g = 0; g < x->olen[i]; g++)
            fprintf(f, " %u", x->toks[(size_t)i * x->max_len + x->plen[i] + g]);
        fputc('\n', f);
    }
    return outfile_close(f, part, x->o->outputs, 0, e);
}

/* The machine's weight rate now (alisa validate's probe, 0.5 s), GB/s; 0
 * when it failed. */
static double machine_rate(const struct exec_stream *x)
{
    double r = calib_weight_rate(x->m, LLM_BACKEND_CPU, 0.5);
    return r > 0 ? r : 0; /* NAN: failed */
}

/* The runs, each timeline in memory; the median run's written to
 * o->timeline; with --predict the machine's rate sampled around each. */
static int serve_runs(struct exec_stream *x, struct serve_result *runs, uint32_t *pick,
                      struct alisa_err *e)
{
    const struct serve_run_opts *o = x->o;
    char **buf = calloc(o->repeat, sizeof *buf);
    size_t *len = calloc(o->repeat, sizeof *len);
    int rc = !buf || !len ? err_set(e, ALISA_ENOMEM, "out of memory for %u timelines", o->repeat) : 0;
    if (!rc && x->rate)
        x->rate[0] = machine_rate(x);
    for (uint32_t i = 0; !rc && i < o->repeat; i++) {
        FILE *tl = o->timeline ? open_memstream(&buf[i], &len[i]) : NULL;
        if (o->timeline && !tl)
            rc = err_set(e, ALISA_ENOMEM, "out of memory for the timeline");
        if (!rc)
            rc = stream_serve(x, tl, &runs[i], e);
        if (tl)
            fclose(tl);
        if (!rc && x->rate)
            x->rate[i + 1] = machine_rate(x);
    }
    *pick = rc ? 0 : median_run(runs, o->repeat);
    char part[4200];
    FILE *f = NULL;
    if (!rc && o->timeline && !(f = outfile_open(o->timeline, part, sizeof part, "timeline", e)))
        rc = ALISA_EIO;
    if (f) {
        fputs(SERVE_TIMELINE_HEADER, f);
        fwrite(buf[*pick], 1, len[*pick], f);
        rc = outfile_close(f, part, o->timeline, 0, e);
    }
    for (uint32_t i = 0; buf && i < o->repeat; i++)
        free(buf[i]);
    free(buf);
    free(len);
    if (!rc && o->per_request)
        rc = cli_serve_write_per_request(o->per_request, &runs[*pick], e);
    if (!rc && o->outputs)
        rc = write_outputs(x, e);
    return rc;
}

int cmd_serve_run(int argc, char **argv)
{
    struct serve_run_opts o = {.wl = CLI_STREAM_DEFAULTS, .max_num_seqs = 8,
                               .max_batched_tokens = 256, .block_tokens = 16, .repeat = 1,
                               .kvo = {.sel = {.sparsity = SEL_SPARSITY_DEFAULT}}};
    struct alisa_err e = {{0}};
    int rc = cli_opts_parse(argc, argv, &serve_run_command, &o, &o.kvo.knobs, cmd_serve_run_usage,
                            NULL);
    if (rc || (rc = serve_run_check(&o)))
        return rc;
    struct workload w;
    if (o.requests ? workload_read_csv(o.requests, &w, &e) : workload_generate(&o.wl, &w, &e))
        return o.requests ? cli_fail(&e) : cli_usage_error(cmd_serve_run_usage, "%s", e.msg);
    uint32_t max_len = stream_max_len(&w, &o, &rc);
    struct loaded l;
    if (!rc && (rc = load_model(&l, o.model, o.tokenizer, 1, &o.kvo, &e)))
        rc = cli_fail_status(rc, &e);
    if (!rc && !(rc = loaded_context_check(&l, max_len, cmd_serve_run_usage,
                                           "the longest request (prompt + output)")))
        rc = loaded_batch_check(&l, o.max_num_seqs, max_len, cmd_serve_run_usage);
    if (rc) { /* l empty, or freed by the check */
        workload_free(&w);
        return rc;
    }
    struct exec_stream x;
    struct serve_result *runs = calloc(o.repeat, sizeof *runs), pred = {0};
    struct serve_check k;
    char hw[128] = "";
    uint32_t pick = 0;
    rc = stream_setup(&x, &l, &w, max_len, &o, &e);
    if (!rc && !runs)
        rc = err_set(&e, ALISA_ENOMEM, "out of memory for %u runs", o.repeat);
    /* the prediction first: a bad profile or a short trace is said before
     * the executor's minutes */
    memset(&k, 0, sizeof k);
    if (!rc && o.predict)
        rc = serve_predict(&x, &pred, hw, sizeof hw, &k.rate_profile, &e);
    if (!rc && o.predict && !(x.rate = calloc(o.repeat + 1, sizeof *x.rate)))
        rc = err_set(&e, ALISA_ENOMEM, "out of memory for %u machine samples", o.repeat + 1);
    if (!rc)
        rc = serve_runs(&x, runs, &pick, &e);
    if (!rc && o.predict) {
        /* the reported run's rate: the mean of the samples either side */
        const double *r = x.rate + pick;
        k.rate_run = r[0] > 0 && r[1] > 0 ? 0.5 * (r[0] + r[1]) : 0;
        double *scratch = malloc(2 * (size_t)w.n * sizeof *scratch);
        rc = scratch ? serve_compare(runs, o.repeat, pick, &pred, &k, scratch, &e)
                     : err_set(&e, ALISA_ENOMEM, "out of memory for the tests");
        free(scratch);
    }
    if (!rc)
        rc = report(&x, l.model_path, &runs[pick], o.repeat, o.predict ? &k : NULL, hw, &pred);
    else
        rc = cli_fail_status(rc, &e);
    for (uint32_t i = 0; runs && i < o.repeat; i++)
        serve_result_free(&runs[i]);
    free(runs);
    serve_result_free(&pred);
    stream_free(&x);
    loaded_free(&l);
    workload_free(&w);
    return rc;
}
