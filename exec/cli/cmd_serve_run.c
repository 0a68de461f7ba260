/* `alisa serve-run`: the executor serves a request stream (issue 46, item
 * 4): the requests alisa serve simulates (the same stream from the same
 * options and seed, or the same CSV), admitted and batched by the same
 * scheduler-core batcher (batcher.h), each iteration one forward pass of
 * rows at their own positions (llm_forward_rows) on the CPU backend's dense
 * cache, prompts taken from a text, outputs greedy; every request's time to
 * first token, time per output token and latency measured on the wall
 * clock, reported as alisa serve reports them (serve_metrics).
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batcher.h"
#include "cli.h"
#include "cli_exec.h"
#include "cli_opts.h"
#include "cmds.h"
#include "outfile.h"
#include "serve.h"
#include "workload.h"

struct serve_run_opts {
    const char *model, *tokenizer, *text, *requests, *per_request, *timeline;
    struct kv_opts kvo; /* --weights and --threads */
    struct wl_params wl;
    uint32_t max_num_seqs, max_batched_tokens, block_tokens;
    uint64_t kv_bytes;
    int no_chunked_prefill, json;
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
    {"json", NULL, CLI_FLAG, SR(json), NULL, 0, "print JSON", 0},
    {0}};

static const struct cli_group serve_run_groups[] = {
    {serve_run_own, 0}, {cli_stream_opts, SR(wl)}, {exec_weights_table, SR(kvo)}};
static const struct cli_command_opts serve_run_command = {serve_run_groups, 3, 0, 0};
#undef SR

void cmd_serve_run_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa serve-run --model M --text FILE [options]\n"
            "\n"
            "Serves a stream of requests on the executor (CPU backend, every token's KV\n"
            "kept): the stream alisa serve simulates from the same options and seed (or\n"
            "the same CSV), batched by the same scheduler code (vLLM V1's rules: a token\n"
            "budget, decodes first, prompts chunked, preemption by recomputation when the\n"
            "KV pool is full), each iteration one forward pass over every running\n"
            "request's rows; prompts from the text, outputs greedy. Requests arrive on\n"
            "the wall clock; reports each one's time to first token, time per output\n"
            "token and latency (mean, P50, P90, P99), throughput and goodput.\n"
            "\n");
    cli_opts_help(out, &serve_run_command, 24);
    fprintf(out, "\nexamples (run as shown by tests/readme_test.sh):\n"
                 "  alisa serve-run --model stories260K --text "
                 "../shared/models/eval-text/tinystories_val_subset.txt --requests 12 --rate 200 "
                 "--prompt-len 16:48 --output-len 8:24\n");
}

/* The executor's KV pool in blocks, and which slot of the state each
 * running request holds (struct batcher_memory's user). */
struct pool_ctx {
    uint64_t blocks, used;
    uint32_t bt;
    uint64_t *held;      /* (n) blocks per request */
    uint32_t *slot;      /* (n) its slot, UINT32_MAX while it has none */
    uint32_t *free_slot; /* stack of free slots */
    uint32_t n_free;
};

static uint64_t blocks_of(const struct pool_ctx *c, uint32_t last)
{
    return ((uint64_t)last + 1 + c->bt - 1) / c->bt;
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

int cmd_serve_run(int argc, char **argv)
{
    struct serve_run_opts o = {.wl = CLI_STREAM_DEFAULTS, .max_num_seqs = 8,
                               .max_batched_tokens = 256, .block_tokens = 16,
                               .kvo = {.sel = {.sparsity = SEL_SPARSITY_DEFAULT}}};
    struct alisa_err e = {{0}};
    int rc = cli_opts_parse(argc, argv, &serve_run_command, &o, NULL, cmd_serve_run_usage, NULL);
    if (rc)
        return rc;
    if ((rc = cli_serve_check_batching(cmd_serve_run_usage, o.max_num_seqs, o.max_batched_tokens,
                                       o.block_tokens, o.slo_ttft, o.slo_tpot)))
        return rc;
    struct workload w;
    if (o.requests ? workload_read_csv(o.requests, &w, &e) : workload_generate(&o.wl, &w, &e))
        return o.requests ? cli_fail(&e) : cli_usage_error(cmd_serve_run_usage, "%s", e.msg);
    const uint32_t n = w.n;
    uint32_t max_len = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = w.req[i].prompt_len + w.req[i].output_len;
        max_len = len > max_len ? len : max_len;
        if (o.no_chunked_prefill && len - 1 > o.max_batched_tokens) {
            workload_free(&w);
            return cli_usage_error(cmd_serve_run_usage, "request %u: %u prompt + %u output tokens "
                                   "do not fit --max-batched-tokens %u without chunked prefill",
                                   i, w.req[i].prompt_len, w.req[i].output_len,
                                   o.max_batched_tokens);
        }
    }
    struct loaded l;
    if ((rc = load_model(&l, o.model, o.tokenizer, 1, &o.kvo, &e))) {
        workload_free(&w);
        return cli_fail_status(rc, &e);
    }
    if ((rc = loaded_context_check(&l, max_len, cmd_serve_run_usage,
                                   "the longest request (prompt + output)")) ||
        (rc = loaded_batch_check(&l, o.max_num_seqs, max_len, cmd_serve_run_usage))) {
        workload_free(&w);
        return rc;
    }
    const struct llm_config *c = &l.m->c;
    uint32_t *text = NULL, n_blocks = 0;
    size_t n_text = 0;
    struct llm_state *st = NULL;
    struct batcher *bt = NULL;
    struct serve_result r = {.n = n};
    uint32_t *toks = NULL, *plen = NULL, *olen = NULL, *rt = NULL, *rs = NULL, *rp = NULL;
    uint32_t *heads = NULL;
    struct batcher_item *items = NULL;
    double *scratch = NULL;
    struct pool_ctx pc = {.bt = o.block_tokens};
    /* the tokens the prompts read: request i's from offset i x 97 */
    rc = text_tokens(l.t, o.text, 0, (size_t)n * 97 + max_len + 1, &text, &n_text, &n_blocks, &e);
    if (!rc && n_text < 2)
        rc = err_set(&e, ALISA_EINVAL, "%s: %zu tokens, too few for prompts", o.text, n_text);
    r.req = calloc(n, sizeof *r.req);
    toks = malloc((size_t)n * max_len * sizeof *toks);
    plen = malloc(n * sizeof *plen);
    olen = malloc(n * sizeof *olen);
    items = malloc((size_t)o.max_num_seqs * sizeof *items);
    rt = malloc((size_t)o.max_batched_tokens * 3 * sizeof *rt);
    heads = malloc((size_t)o.max_num_seqs * sizeof *heads);
    scratch = malloc(n * sizeof *scratch);
    pc.held = calloc(n, sizeof *pc.held);
    pc.slot = malloc(n * sizeof *pc.slot);
    pc.free_slot = malloc((size_t)o.max_num_seqs * sizeof *pc.free_slot);
    if (!rc && (!r.req || !toks || !plen || !olen || !items || !rt || !heads || !scratch || !pc.held ||
                !pc.slot || !pc.free_slot))
        rc = err_set(&e, ALISA_ENOMEM, "out of memory for %u requests", n);
    if (!rc) {
        rs = rt + o.max_batched_tokens;
        rp = rs + o.max_batched_tokens;
        /* prompts: BOS, then the text from offset i x 97, wrapping */
        for (uint32_t i = 0; i < n; i++) {
            uint32_t *t = toks + (size_t)i * max_len;
            t[0] = 1;
            for (uint32_t p = 1; p < w.req[i].prompt_len; p++)
                t[p] = text[((size_t)i * 97 + p - 1) % n_text] % c->vocab;
            plen[i] = w.req[i].prompt_len;
            olen[i] = w.req[i].output_len;
            pc.slot[i] = UINT32_MAX;
            r.req[i] = (struct serve_request){.arrival_s = w.req[i].arrival_s,
                                              .prompt_len = plen[i], .output_len = olen[i]};
        }
        for (uint32_t s = 0; s < o.max_num_seqs; s++)
            pc.free_slot[pc.n_free++] = o.max_num_seqs - 1 - s;
        uint64_t bpr = (max_len + o.block_tokens - 1) / o.block_tokens;
        uint64_t block_bytes = (uint64_t)o.block_tokens * c->n_layers * c->kv_dim * 2 * 4;
        pc.blocks = o.kv_bytes ? o.kv_bytes / block_bytes : bpr * o.max_num_seqs;
        struct batcher_config bc = {o.max_num_seqs, o.max_batched_tokens, o.no_chunked_prefill};
        if (!(rc = batcher_create(&bt, &bc, n, plen, olen, &e)))
            rc = exec_state_create(&st, &o.kvo, l.m, o.max_num_seqs, max_len, &e);
    }
    const struct batcher_memory mem = {&pc, pool_fits, pool_take, pool_release};
    FILE *tl = NULL;
    char part[4200];
    if (!rc && o.timeline && !(tl = outfile_open(o.timeline, part, sizeof part, "timeline", &e)))
        rc = ALISA_EIO;
    if (tl)
        fprintf(tl, "iteration,start_s,end_s,running,waiting,tokens,prefill_tokens,"
                    "preemptions,gpu_kv_bytes,cpu_kv_bytes\n");
    const double block_bytes = (double)o.block_tokens * c->n_layers * c->kv_dim * 2 * 4;
    double t0 = cli_now_s(), running_sum = 0;
    uint32_t next = 0, done = 0;
    while (!rc && done < n) {
        double now = cli_now_s() - t0;
        while (next < n && w.req[next].arrival_s <= now)
            batcher_arrive(bt, next++);
        if (batcher_running(bt) == 0 && batcher_waiting(bt) == 0) {
            sleep_s(w.req[next].arrival_s - now);
            continue;
        }
        uint32_t n_it, preempted, stuck, R = 0;
        if ((rc = batcher_plan(bt, &mem, items, &n_it, &preempted, &stuck)))
            break;
        r.preemptions += preempted;
        if (stuck != UINT32_MAX) {
            rc = err_set(&e, ALISA_EINVAL, "request %u (%u + %u tokens) does not fit --kv-bytes "
                         "(%llu blocks of %u tokens) alone", stuck, plen[stuck], olen[stuck],
                         (unsigned long long)pc.blocks, o.block_tokens);
            break;
        }
        if (n_it == 0)
            continue;
        for (uint32_t k = 0; k < n_it; k++)
            for (uint32_t p = items[k].first; p < items[k].first + items[k].n; p++, R++) {
                rt[R] = toks[(size_t)items[k].id * max_len + p];
                rs[R] = pc.slot[items[k].id];
                rp[R] = p;
            }
        /* logits for each sampling request's last row only, as vLLM computes them */
        uint32_t n_head = 0;
        for (uint32_t k = 0, row = 0; k < n_it; row += items[k].n, k++)
            if (items[k].samples)
                heads[n_head++] = row + items[k].n - 1;
        double start = cli_now_s() - t0;
        const float *lg = llm_forward_rows(st, rt, rs, rp, R, heads, n_head);
        if (!lg) {
            rc = err_set(&e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
            break;
        }
        /* each sampling request's next token: the greedy pick */
        for (uint32_t k = 0, h = 0; k < n_it; k++)
            if (items[k].samples) {
                uint32_t id = items[k].id, g = batcher_generated(bt, id);
                const float *row = lg + (size_t)h++ * c->vocab;
                if (plen[id] + g < max_len)
                    toks[(size_t)id * max_len + plen[id] + g] = llm_argmax(row, c->vocab);
            }
        now = cli_now_s() - t0;
        if (tl) {
            uint32_t pre_tok = 0;
            for (uint32_t k = 0; k < n_it; k++)
                pre_tok += items[k].first < plen[items[k].id] ? items[k].n : 0;
            fprintf(tl, "%u,%.9f,%.9f,%u,%u,%u,%u,%u,%.0f,0\n", r.iterations, start, now,
                    batcher_running(bt), batcher_waiting(bt), R, pre_tok, preempted,
                    (double)pc.used * block_bytes);
        }
        r.iterations++;
        running_sum += batcher_running(bt);
        batcher_done(bt, &mem, items, n_it);
        for (uint32_t k = 0; k < n_it; k++) {
            if (items[k].first_token)
                r.req[items[k].id].first_token_s = now;
            if (items[k].finished) {
                r.req[items[k].id].finish_s = now;
                done++;
            }
        }
    }
    if (tl) { /* whole or not at all */
        int closed = outfile_close(tl, part, o.timeline, rc, &e);
        rc = rc ? rc : closed;
    }
    if (!rc) {
        for (uint32_t i = 0; i < n; i++)
            r.req[i].preemptions = batcher_preemptions(bt, i);
        r.repeated_prefill_tokens = (double)batcher_lost_tokens(bt);
        r.mean_running = r.iterations ? running_sum / r.iterations : 0;
        serve_metrics(&r, o.slo_ttft, o.slo_tpot, scratch);
        if (o.per_request)
            rc = cli_serve_write_per_request(o.per_request, &r, &e);
    }
    if (!rc && o.json) {
        json_t *root = cli_serve_latencies_json(&r);
        if (!root) {
            rc = err_set(&e, ALISA_EINVAL, "a figure of the run is not a finite number");
        } else {
            json_object_set_new(root, "model", json_string(l.model_path));
            json_object_set_new(root, "backend", json_string("cpu"));
            json_object_set_new(root, "max_num_seqs", json_integer(o.max_num_seqs));
            json_object_set_new(root, "max_batched_tokens", json_integer(o.max_batched_tokens));
            json_object_set_new(root, "kv_blocks", json_integer((json_int_t)pc.blocks));
            json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
            printf("\n");
            json_decref(root);
        }
    } else if (!rc) {
        printf("%s on the CPU executor, %u requests, %u at most running, %u tokens an "
               "iteration, %llu KV blocks of %u tokens\n", l.model_path, n, o.max_num_seqs,
               o.max_batched_tokens, (unsigned long long)pc.blocks, o.block_tokens);
        cli_serve_print_latencies(&r, o.slo_ttft, o.slo_tpot);
    }
    llm_state_free(st);
    batcher_destroy(bt);
    serve_result_free(&r);
    free(text);
    free(toks);
    free(plen);
    free(olen);
    free(items);
    free(rt);
    free(heads);
    free(scratch);
    free(pc.held);
    free(pc.slot);
    free(pc.free_slot);
    loaded_free(&l);
    workload_free(&w);
    return rc ? cli_fail_status(rc, &e) : 0;
}
