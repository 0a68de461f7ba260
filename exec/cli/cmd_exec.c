/* `alisa run`, `alisa eval` and `alisa record`: the CPU executor on real
 * checkpoints. A shell over exec/ (model, tokenizer, forward pass): model
 * resolution, text windows, sampling, NLL, and writing traces.
 */
#include <getopt.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "outfile.h"
#include "catalog.h"
#include "cli.h"
#include "attn_trace.h"
#include "cli_exec.h"
#include "cli_opts.h"
#include "progress.h"
#include "cmds.h"
#include "costmodel.h"
#include "forward.h"
#include "gguf.h"
#include "kvstore.h"
#include "model.h"
#include "scheduler.h"
#include "tokenizer.h"
#include "trace.h"

/* Positions per llm_forward_chunk call in prefill and eval: LLM_CHUNK
 * (forward.h), whose rows loaded_batch_check counts. */
#define CHUNK LLM_CHUNK

/* ---- alisa run ---- */

/* A count whose 0 is refused rather than taken as "not given". */
struct given_u32 {
    uint32_t v;
    int given;
};

static int read_given_u32(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    struct given_u32 *g = field;
    g->given = 1;
    return cli_parse_u32(opt, arg, &g->v, e);
}

/* What alisa run is asked; defaults in cmd_run's initializer. */
struct run_opts {
    const char *model, *tokenizer, *prompt, *timings, *attn;
    struct given_u32 ptoks;
    uint32_t n, batch;
    uint64_t seed;
    double temp;
    int json;
    struct kv_opts kvo;
};

#define RO(f) offsetof(struct run_opts, f)
static const struct cli_opt run_own_opts[] = {
    {"model", "M", CLI_STR, RO(model), NULL, 1,
     "catalog name (alisa catalog models), a fetched model's short\n"
     "name (SmolLM2-135M: make models), a llama2.c .bin, a GGUF\n"
     "file (F32, F16, Q8_0, Q4_0, Q4_1, Q4_K tensors) or a Hugging\n"
     "Face checkpoint: a directory with config.json and\n"
     "model.safetensors or model.safetensors.index.json and its\n"
     "shards (OPT or LLaMA; F32, F16, BF16)", 0},
    {"tokenizer", "T", CLI_STR, RO(tokenizer), NULL, 0,
     "tokenizer file (default: the catalog's for M)", 0},
    {"prompt", "TEXT", CLI_STR, RO(prompt), NULL, 0,
     "prompt text", 0},
    {"prompt-tokens", "N", CLI_FN, RO(ptoks), read_given_u32, 0,
     "instead of a text: N token ids drawn uniformly from the\n"
     "vocabulary (GSL mt19937 under --seed), no tokenizer needed;\n"
     "the output is token ids. For speed measurements of models\n"
     "without a tokenizer (--weights synthetic at catalog shapes)", 0},
    {"gen-tokens", "N", CLI_U32, RO(n), NULL, 1,
     "tokens to generate", 'n'},
    {"batch", "B", CLI_U32, RO(batch), NULL, 0,
     "sequences decoded together, same prompt (default 1)", 0},
    {"temperature", "T", CLI_DOUBLE, RO(temp), NULL, 0,
     "0 = greedy (default); > 0 samples from softmax(logits / T)", 0},
    {"seed", "S", CLI_U64, RO(seed), NULL, 0,
     "sampling seed (GSL mt19937, default 1)", 0},
    {"attention-from", "T", CLI_STR, RO(attn), NULL, 0,
     "the selection observes trace T's attention rows (recorded\n"
     "or synthetic; sequence b reads the trace's b % n_seqs,\n"
     "layer l its l x trace layers / layers, as alisa sim maps\n"
     "them) while the model attends the tokens selected with its\n"
     "own weights: for synthetic weights, whose attention is\n"
     "near uniform. Needs --selection; stderr says which rows\n"
     "came from where", 0},
    {"json", NULL, CLI_FLAG, RO(json), NULL, 0,
     "no text: one JSON object on stdout (model, weights, backend,\n"
     "device, batch, tokens, prefill and decode seconds and\n"
     "tokens/s, KV moves, attention source); what alisa sweep\n"
     "stores for command = run", 0},
    {"timings", "FILE", CLI_STR, RO(timings), NULL, 0,
     "one JSON line per forward call: first position, positions\n"
     "(chunk length), phase, batch, total, and per layer the\n"
     "GEMM, attention, KV transfer and recomputation time\n"
     "(microseconds, wall clock)", 0},
    {0}};
static const struct cli_group run_groups[] = {{run_own_opts, 0}, KV_GROUPS(struct run_opts, kvo)};
static const struct cli_command_opts run_command = {run_groups, 4, 1, 0};
#undef RO

void cmd_run_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa run --model M (--prompt TEXT | --prompt-tokens N) -n N [options]\n"
            "\n"
            "Generates N tokens after TEXT with the executor (--backend) and prints the prompt and\n"
            "its continuation on stdout (streamed as generated for one sequence; one block per\n"
            "sequence when --batch > 1), the decode speed and the KV moves on stderr. Under a\n"
            "placement the device arena (--gpu-kv-bytes) must hold the tokens a step attends.\n"
            "The prompt is encoded with BOS and prefilled in chunks\n"
            "of up to 32 positions (each chunk's projections and FFN one GEMM over its\n"
            "rows). Temperature 0 is greedy and deterministic.\n"
            "\n");
    cli_opts_help(out, &run_command, 21);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa run --model stories260K --prompt \"Once upon a time\" -n 32\n"
            "  alisa run --model OPT-125M --weights synthetic --prompt-tokens 16 -n 4\n");
}

static uint32_t sample(const float *logits, uint32_t n, double temp, gsl_rng *rng, double *scratch)
{
    double mx = logits[llm_argmax(logits, n)], sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += scratch[i] = exp((logits[i] - mx) / temp);
    double u = gsl_rng_uniform(rng) * sum, acc = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((acc += scratch[i]) >= u)
            return i;
    return n - 1;
}

/* Runs position pos of every sequence (tokens) and puts each one's next
 * token in next (which may be tokens): greedy (temp 0) where the backend
 * computes, only the ids coming back; otherwise sampled from the logits in
 * sequence order from one rng. 0, or -1 (llm_state_error says why). */
static int next_tokens(struct llm_state *st, uint32_t batch, uint32_t V, const uint32_t *tokens,
                       uint32_t pos, double temp, gsl_rng *rng, double *scratch, uint32_t *next)
{
    if (temp == 0)
        return llm_forward_greedy(st, tokens, pos, next);
    const float *lg = llm_forward(st, tokens, pos, NULL);
    if (!lg)
        return -1;
    for (uint32_t b = 0; b < batch; b++)
        next[b] = sample(lg + (size_t)b * V, V, temp, rng, scratch);
    return 0;
}

/* Writes the text of ids (n tokens) to stdout, each decoded after *prev
 * (which ends as the last); without a tokenizer, the ids. */
static void print_pieces(const struct tokenizer *t, uint32_t *prev, const uint32_t *ids,
                         uint32_t n)
{
    for (uint32_t i = 0; i < n && !t; i++)
        printf(" %u", ids[i]);
    for (uint32_t i = 0; i < n && t; i++) {
        size_t len;
        const char *piece = tok_decode(t, *prev, ids[i], &len);
        fwrite(piece, 1, len, stdout);
        *prev = ids[i];
    }
}

/* alisa run's option values checked before any work: 0, or a usage
 * error's exit code. */
static int run_check(struct run_opts *o)
{
    int req;
    if (o->attn && !o->kvo.selection)
        return cli_usage_error(cmd_run_usage, "--attention-from %s: needs --selection (it feeds "
                               "the selection)", o->attn);
    if (o->prompt && o->ptoks.given)
        return cli_usage_error(cmd_run_usage, "--prompt and --prompt-tokens: give one of them");
    if ((req = cli_require(1, "--prompt", o->prompt || o->ptoks.given)) ||
        (req = kv_opts_check(&o->kvo)))
        return req;
    if (o->ptoks.given && o->ptoks.v == 0)
        return cli_usage_error(cmd_run_usage, "--prompt-tokens 0: at least 1 token");
    if (o->batch == 0)
        return cli_usage_error(cmd_run_usage, "--batch 0: at least 1 sequence");
    if (o->temp < 0)
        return cli_usage_error(cmd_run_usage, "--temperature %g: at least 0 (0: greedy)", o->temp);
    return 0;
}

/* alisa run's figures: prefill and decode rates and the KV moves on
 * stderr, and with json the run's JSON object on stdout. */
static void run_report(const struct loaded *l, struct llm_state *st, const struct tiered *tr,
                       const struct kv_opts *kvo, const char *attn, uint32_t batch, int np,
                       uint32_t n, double prompt_s, double dt, int json)
{
    fprintf(stderr, "alisa: prompt of %d tokens x %u sequence%s in %.3f s: %.1f tokens/s "
            "(prefill)\n", np, batch, batch == 1 ? "" : "s", prompt_s,
            prompt_s > 0 ? (double)np * batch / prompt_s : 0.0);
    fprintf(stderr, "alisa: %u tokens x %u sequence%s in %.3f s: %.1f tokens/s (decode, %s)\n",
            n, batch, batch == 1 ? "" : "s", dt, dt > 0 ? (double)n * batch / dt : 0.0,
            llm_state_label(st));
    uint64_t fed = 0, computed = 0, off = 0, ld = 0, rcmp = 0;
    if (tr->ks) {
        kvstore_counts(tr->ks, &off, &ld, &rcmp);
        fprintf(stderr, "alisa: KV moves: %llu offloaded, %llu loaded, %llu recomputed\n",
                (unsigned long long)off, (unsigned long long)ld, (unsigned long long)rcmp);
    }
    if (tr->sched) {
        llm_state_attention_counts(st, &fed, &computed);
        fprintf(stderr, "alisa: attention the selection observed: %llu rows from %s, %llu "
                "computed by the model\n", (unsigned long long)fed, attn ? attn : "no trace",
                (unsigned long long)computed);
    }
    if (json) {
        struct llm_backend_info bi;
        struct alisa_err e2 = {{0}};
        if (llm_backend_info(llm_state_backend(st), &bi, &e2))
            snprintf(bi.device, sizeof bi.device, "unknown (%.200s)", e2.msg);
        json_t *root = json_pack(
            "{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:s, s:s, s:I, s:I, s:I, "
            "s:s, s:I, s:I, s:s}",
            "model", l->m->name, "weights", kvo->weights ? kvo->weights : "native", "backend",
            llm_state_label(st), "device", bi.device, "batch", (int)batch, "prompt_tokens", np,
            "gen_tokens", (int)n, "prefill_s", prompt_s, "prefill_tok_s",
            prompt_s > 0 ? (double)np * batch / prompt_s : 0.0, "decode_s", dt,
            "decode_tok_s", dt > 0 ? (double)n * batch / dt : 0.0, "selection",
            kvo->selection ? kvo->selection : "dense", "placement",
            tr->sched ? (kvo->placement ? kvo->placement : "gpu-only") : "none", "offloaded",
            (json_int_t)off, "loaded", (json_int_t)ld, "recomputed", (json_int_t)rcmp,
            "attention_source", attn ? attn : tr->sched ? "computed" : "none",
            "attention_rows_fed", (json_int_t)fed, "attention_rows_computed",
            (json_int_t)computed, "driver", bi.driver);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
        printf("\n");
        json_decref(root);
    }
}

/* The prompt but its last token, every sequence the same, in chunks of
 * CHUNK positions (no logits): the last token alone then gives (batch,
 * vocab) logits. */
static int run_prefill(struct llm_state *st, const uint32_t *ids, uint32_t np, uint32_t batch,
                       struct alisa_err *e)
{
    uint32_t *chunk = malloc((size_t)batch * CHUNK * sizeof *chunk);
    int rc = chunk ? 0 : err_set(e, ALISA_ENOMEM, "out of memory");
    for (uint32_t p = 0; p + 1 < np && !rc;) {
        uint32_t P = np - 1 - p < CHUNK ? np - 1 - p : CHUNK;
        for (uint32_t b = 0; b < batch; b++)
            memcpy(chunk + (size_t)b * P, ids + p, P * sizeof *chunk);
        if (llm_prefill_chunk(st, chunk, p, P))
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
        p += P;
    }
    free(chunk);
    return rc;
}

/* The prompt's token ids for alisa run into *ids (freed by the caller):
 * the text encoded, or --prompt-tokens ids drawn under --seed; their count
 * into *np (-1 when there are none). 0, or an error in e. */
static int run_prompt_ids(const struct run_opts *o, const struct loaded *l, gsl_rng *rng,
                          uint32_t **ids, int *np, struct alisa_err *e)
{
    size_t cap = o->prompt ? strlen(o->prompt) + 3 : o->ptoks.v;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids || !rng)
        return err_set(e, ALISA_ENOMEM, "out of memory for the prompt");
    *np = o->prompt ? tok_encode(l->t, o->prompt, 1, *ids, cap) : (int)o->ptoks.v;
    if (!o->prompt) { /* ids drawn, not encoded */
        gsl_rng_set(rng, o->seed);
        for (uint32_t i = 0; i < o->ptoks.v; i++)
            (*ids)[i] = (uint32_t)gsl_rng_uniform_int(rng, l->m->c.vocab);
    }
    return *np < 0 ? err_set(e, ALISA_EINVAL, "cannot encode the prompt") : 0;
}

/* alisa run's decode after a prompt of np tokens: cur holds each
 * sequence's first generated token; each of the -n steps records it into
 * gen and samples the next. One sequence streams its text (prev: the last
 * token printed). 0, or an error in e. */
static int run_decode(const struct run_opts *o, const struct loaded *l, struct llm_state *st,
                      uint32_t np, gsl_rng *rng, double *scratch, uint32_t *cur, uint32_t **gen,
                      uint32_t *prev, struct alisa_err *e)
{
    const uint32_t n = o->n, batch = o->batch;
    for (uint32_t j = 0; j < n; j++) {
        for (uint32_t b = 0; b < batch; b++)
            gen[b][j] = cur[b];
        if (batch == 1 && !o->json) {
            print_pieces(l->t, prev, &cur[0], 1);
            fflush(stdout);
        }
        if (j + 1 < n &&
            next_tokens(st, batch, l->m->c.vocab, cur, np + j, o->temp, rng, scratch, cur))
            return err_set(e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o = {.kvo = {.sel = {.sparsity = SEL_SPARSITY_DEFAULT}}, .batch = 1,
                         .seed = 1};
    struct alisa_err e = {{0}};
    int req = cli_opts_parse(argc, argv, &run_command, &o, &o.kvo.knobs, cmd_run_usage, NULL);
    if (req)
        return req;
    if ((req = run_check(&o)))
        return req;
    const char *model = o.model, *tokenizer = o.tokenizer, *prompt = o.prompt;
    const char *timings = o.timings, *attn = o.attn;
    struct kv_opts kvo = o.kvo;
    const uint32_t n = o.n, batch = o.batch, ptoks = o.ptoks.v;
    const uint64_t seed = o.seed;
    const double temp = o.temp;
    const int json = o.json;
    struct loaded l;
    int lrc = load_model(&l, model, tokenizer, prompt != NULL, &kvo, &e);
    if (lrc)
        return cli_fail_status(lrc, &e);
    if (!prompt) { /* bounded by the context before the ids are allocated */
        char what0[64];
        snprintf(what0, sizeof what0, "-n %u after a %u-token prompt", n, ptoks);
        int rc0 = loaded_context_check(&l, (uint64_t)ptoks + n, cmd_run_usage, what0);
        if (rc0)
            return rc0; /* l freed by the check */
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    uint32_t *ids = NULL;
    int np = -1, rc = run_prompt_ids(&o, &l, rng, &ids, &np, &e);
    char what[64];
    snprintf(what, sizeof what, "-n %u after a %d-token prompt", n, np);
    if (np >= 0 && ((rc = loaded_context_check(&l, (uint64_t)np + n, cmd_run_usage, what)) ||
                    (rc = loaded_batch_check(&l, batch, (uint64_t)np + n, cmd_run_usage)))) {
        free(ids);
        gsl_rng_free(rng);
        return rc;
    }
    struct llm_state *st = NULL;
    uint32_t *cur = malloc(batch * sizeof *cur), **gen = calloc(batch, sizeof *gen);
    double *scratch = malloc(l.m->c.vocab * sizeof *scratch);
    if (!rc && (!cur || !gen || !scratch || !rng))
        rc = err_set(&e, ALISA_ENOMEM, "out of memory");
    for (uint32_t b = 0; !rc && b < batch; b++)
        if (!(gen[b] = malloc((n + 1) * sizeof **gen)))
            rc = err_set(&e, ALISA_ENOMEM, "out of memory");
    struct tiered tr = {0};
    if (!rc)
        rc = exec_state_create(&st, &kvo, l.m, batch, (uint32_t)np + n, &e);
    if (!rc)
        rc = kv_opts_attach(&tr, &kvo, l.m, st, batch, (uint32_t)np + n, (uint32_t)np, &e);
    if (!rc && !tr.sched)
        llm_state_tiered(st, NULL, NULL, (uint32_t)np); /* dense: phases for the timings */
    struct attn_trace *at = NULL;
    if (!rc && attn &&
        !(rc = attn_trace_load(&at, attn, l.m->c.n_layers, batch, (uint32_t)np, (uint32_t)np + n,
                               &e)))
        llm_state_attention_from(st, attn_trace_row, at);
    FILE *tf = NULL;
    char tpart[1100];
    if (!rc && timings && !(tf = outfile_open(timings, tpart, sizeof tpart, "timings file", &e)))
        rc = ALISA_EIO;
    if (tf)
        llm_state_timings(st, tf);
    if (rng)
        gsl_rng_set(rng, seed);
    double t_prompt = cli_now_s();
    if (!rc)
        rc = run_prefill(st, ids, (uint32_t)np, batch, &e);
    for (uint32_t b = 0; b < batch && !rc; b++)
        cur[b] = ids[np - 1];
    if (!rc && next_tokens(st, batch, l.m->c.vocab, cur, (uint32_t)np - 1, temp, rng, scratch, cur))
        rc = err_set(&e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
    double prompt_s = cli_now_s() - t_prompt;
    /* one sequence streams its text as it is generated; several print
     * theirs one after another at the end */
    uint32_t prev = TOK_BOS;
    if (!rc && batch == 1 && !json) {
        print_pieces(l.t, &prev, ids + 1, (uint32_t)np - 1);
        fflush(stdout);
    }
    double t0 = cli_now_s();
    if (!rc)
        rc = run_decode(&o, &l, st, (uint32_t)np, rng, scratch, cur, gen, &prev, &e);
    double dt = cli_now_s() - t0;
    if (batch == 1 && np > 0 && !json)
        printf("\n");
    for (uint32_t b = 0; b < batch && batch > 1 && !rc && !json; b++) {
        printf("[%u] ", b);
        prev = TOK_BOS;
        print_pieces(l.t, &prev, ids + 1, (uint32_t)np - 1);
        print_pieces(l.t, &prev, gen[b], n);
        printf("\n");
    }
    if (!rc)
        run_report(&l, st, &tr, &kvo, attn, batch, np, n, prompt_s, dt, json);
    if (tf) /* whole or not at all */
        rc = outfile_close(tf, tpart, timings, rc, &e);
    tiered_free(&tr);
    llm_state_free(st);
    attn_trace_free(at);
    for (uint32_t b = 0; gen && b < batch; b++)
        free(gen[b]);
    free(gen);
    free(cur);
    free(ids);
    free(scratch);
    gsl_rng_free(rng);
    loaded_free(&l);
    return rc ? cli_fail(&e) : 0;
}

/* ---- alisa eval ---- */

/* What eval adds up over scored tokens. */
struct eval_acc {
    double nll, dense_nll;              /* all scored tokens */
    double nll_dec, dense_nll_dec, kl;  /* decoded positions, with a reference */
    uint64_t scored, decoded, agree;
};

/* log(sum exp(lg)) over n logits, and the argmax into *top. */
static double log_sum_exp(const float *lg, uint32_t n, uint32_t *top)
{
    *top = llm_argmax(lg, n);
    double mx = lg[*top], sum = 0;
    for (uint32_t v = 0; v < n; v++)
        sum += exp(lg[v] - mx);
    return mx + log(sum);
}

/* Scores the prediction of token next from logits lg (n of them); ref: the
 * dense run's logits for the same position (NULL: none), decoded: whether
 * the position decoded under the selection. */
static void eval_score(struct eval_acc *a, const float *lg, const float *ref, uint32_t n,
                       uint32_t next, int decoded)
{
    uint32_t top, ref_top;
    double lse = log_sum_exp(lg, n, &top), nll = lse - lg[next];
    a->nll += nll;
    a->scored++;
    if (!ref)
        return;
    double ref_lse = log_sum_exp(ref, n, &ref_top), ref_nll = ref_lse - ref[next];
    a->dense_nll += ref_nll;
    if (!decoded)
        return;
    double kl = 0;
    for (uint32_t v = 0; v < n; v++) {
        double lp = ref[v] - ref_lse, lq = lg[v] - lse;
        kl += exp(lp) * (lp - lq);
    }
    a->kl += kl;
    a->nll_dec += nll;
    a->dense_nll_dec += ref_nll;
    a->agree += top == ref_top;
    a->decoded++;
}

/* What alisa eval is asked; defaults in cmd_eval's initializer. */
struct eval_opts {
    const char *model, *tokenizer, *text;
    uint32_t ctx, blocks, max_tokens, batch, prefill;
    int json, no_ref;
    struct kv_opts kvo;
};

#define EO(f) offsetof(struct eval_opts, f)
static const struct cli_opt eval_own_opts[] = {
    {"model", "M", CLI_STR, EO(model), NULL, 1,
     "as alisa run --model: a catalog or short name, llama2.c .bin,\n"
     "GGUF file or Hugging Face checkpoint directory", 0},
    {"tokenizer", "T", CLI_STR, EO(tokenizer), NULL, 0,
     "tokenizer file (default: the catalog's)", 0},
    {"text", "FILE", CLI_STR, EO(text), NULL, 1,
     "text to score", 0},
    {"ctx", "N", CLI_U32, EO(ctx), NULL, 0,
     "window length in tokens (<= the model's context)", 0},
    {"blocks", "K", CLI_U32, EO(blocks), NULL, 0,
     "use only the first K blocks", 0},
    {"max-tokens", "K", CLI_U32, EO(max_tokens), NULL, 0,
     "stop after about K scored tokens", 0},
    {"batch", "B", CLI_U32, EO(batch), NULL, 0,
     "windows scored together (default 8)", 0},
    {"json", NULL, CLI_FLAG, EO(json), NULL, 0,
     "print JSON with the keys nll, ppl, tokens, windows (and\n"
     "with a reference: dense_nll, decode_tokens, nll_decode,\n"
     "dense_nll_decode, kl, top1)", 0},
    {"no-reference", NULL, CLI_FLAG, EO(no_ref), NULL, 0,
     "skip the dense reference run (NLL and perplexity only)", 0},
    {"prefill", "P", CLI_U32, EO(prefill), NULL, 0,
     "with --selection: the first P tokens of each window are a\n"
     "dense prefill, later ones decode under the selection\n"
     "(default 128, or the window when shorter)", 0},
    {0}};
static const struct cli_group eval_groups[] = {{eval_own_opts, 0},
                                               KV_GROUPS(struct eval_opts, kvo)};
static const struct cli_command_opts eval_command = {eval_groups, 4, 1, 0};
#undef EO

void cmd_eval_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa eval --model M --text FILE --ctx N [options]\n"
            "\n"
            "Mean negative log-likelihood (nats/token) and perplexity of a text under the\n"
            "model, dense attention. The text is split into blank-line blocks (lines, when\n"
            "it has no blank line); each block is encoded as BOS + its text with a dummy\n"
            "leading space; the blocks are concatenated and cut into non-overlapping\n"
            "windows of N tokens (the last partial window dropped), each window scored from\n"
            "its own start with nothing carried over: every token but a window's first is\n"
            "predicted. (This is the method of ../shared/models/SOURCES.md, so its figures\n"
            "can be compared.)\n"
            "\n"
            "With --selection, --placement or --kv-int8 each window is teacher-forced as in\n"
            "decoding: its first P tokens (--prefill) are a dense prefill, every later token\n"
            "attends only what the selection chooses, from the arenas. The same windows also\n"
            "run dense, and eval reports against that reference, over the decoded\n"
            "positions (the prefill's predictions are the dense ones by construction): their\n"
            "mean NLL under both, the mean KL divergence KL(dense || policy) of the\n"
            "next-token distributions, and the share of positions whose top-1 token\n"
            "agrees.\n"
            "\n"
            );
    cli_opts_help(out, &eval_command, 21);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa eval --model stories260K --text "
            "../shared/models/eval-text/tinystories_val_subset.txt --ctx 256 "
            "--blocks 4\n");
}

/* Scores windows w0 .. w0 + B - 1 of ids (ctx tokens each) into acc, the
 * dense reference beside when with_ref, the first pre positions a dense
 * prefill; cur (B x CHUNK) is scratch. Returns 0 or a negative status with
 * e set. */
static int eval_batch(const struct loaded *l, const struct kv_opts *kvo, const uint32_t *ids,
                      uint64_t w0, uint32_t B, uint32_t ctx, uint32_t pre, int with_ref,
                      uint32_t *cur, struct eval_acc *acc, struct progress *pg,
                      struct alisa_err *e)
{
    int rc;
    struct llm_state *st, *ref = NULL;
    if ((rc = exec_state_create(&st, kvo, l->m, B, ctx, e)))
        return rc;
    if (with_ref && (rc = exec_state_create(&ref, kvo, l->m, B, ctx, e))) {
        llm_state_free(st);
        return rc;
    }
    struct tiered tr;
    if ((rc = kv_opts_attach(&tr, kvo, l->m, st, B, ctx, pre, e))) {
        llm_state_free(ref);
        llm_state_free(st);
        return rc;
    }
    for (uint32_t p = 0; p + 1 < ctx && !rc;) {
        uint32_t P = ctx - 1 - p < CHUNK ? ctx - 1 - p : CHUNK;
        for (uint32_t b = 0; b < B; b++)
            memcpy(cur + (size_t)b * P, ids + (w0 + b) * ctx + p, P * sizeof *cur);
        const float *logits = llm_forward_chunk(st, cur, p, P, NULL);
        const float *rlogits = logits && ref ? llm_forward_chunk(ref, cur, p, P, NULL) : NULL;
        if (!logits || (ref && !rlogits)) {
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(logits ? ref : st)->msg);
            break;
        }
        size_t V = l->m->c.vocab;
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t i = 0; i < P; i++) {
                size_t row = ((size_t)b * P + i) * V;
                eval_score(acc, logits + row, rlogits ? rlogits + row : NULL, (uint32_t)V,
                           ids[(w0 + b) * ctx + p + i + 1], p + i >= pre);
            }
        p += P;
        progress_set(pg, w0 * (ctx - 1) + (uint64_t)B * p);
    }
    tiered_free(&tr);
    llm_state_free(ref);
    llm_state_free(st);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    struct eval_opts o = {.kvo = {.sel = {.sparsity = SEL_SPARSITY_DEFAULT}}, .batch = 8,
                          .prefill = 128};
    struct alisa_err e = {{0}};
    int req = cli_opts_parse(argc, argv, &eval_command, &o, &o.kvo.knobs, cmd_eval_usage, NULL);
    if (req)
        return req;
    const char *model = o.model, *tokenizer = o.tokenizer, *text = o.text;
    struct kv_opts kvo = o.kvo;
    uint32_t ctx = o.ctx, blocks = o.blocks, max_tokens = o.max_tokens, batch = o.batch;
    uint32_t prefill = o.prefill;
    const int json = o.json, no_ref = o.no_ref;
    if ((req = kv_opts_check(&kvo)))
        return req;
    if (ctx < 2)
        return cli_usage_error(cmd_eval_usage, "--ctx %u: at least 2 tokens", ctx);
    if (batch == 0)
        return cli_usage_error(cmd_eval_usage, "--batch 0: at least 1 window at a time");
    struct loaded l;
    int lrc = load_model(&l, model, tokenizer, 1, &kvo, &e);
    if (lrc)
        return cli_fail_status(lrc, &e);
    int rc = 0;
    char what[32];
    snprintf(what, sizeof what, "--ctx %u", ctx);
    if ((rc = loaded_context_check(&l, ctx, cmd_eval_usage, what)) ||
        (rc = loaded_batch_check(&l, batch, ctx, cmd_eval_usage)))
        return rc; /* each frees l when it refuses */
    uint32_t *ids = NULL, n_blocks = 0;
    size_t n_ids = 0;
    if (!rc)
        rc = text_tokens(l.t, text, blocks,
                         max_tokens ? ((size_t)max_tokens / (ctx - 1) + 2) * ctx : 0, &ids,
                         &n_ids, &n_blocks, &e);
    uint64_t windows = n_ids / ctx;
    if (!rc && windows == 0)
        rc = err_set(&e, ALISA_EINVAL, "%s: %zu tokens, fewer than one window of %u", text, n_ids,
                     ctx);
    if (!rc && max_tokens) {
        uint64_t want = (max_tokens + ctx - 2) / (ctx - 1);
        if (want < windows)
            windows = want;
    }
    struct eval_acc acc = {0};
    int with_ref = !no_ref && (kvo.selection || kvo.placement || kvo.int8);
    uint32_t pre = prefill < ctx ? prefill : ctx;
    double t0 = cli_now_s();
    uint32_t *cur = malloc((size_t)batch * CHUNK * sizeof *cur);
    if (!rc && !cur)
        rc = err_set(&e, ALISA_ENOMEM, "out of memory");
    struct progress pg;
    /* counted in positions scored, redrawn after every chunk: a batch of
     * windows takes many seconds, so counting windows showed nothing at first */
    progress_start(&pg, "eval", "positions", windows * (ctx - 1), json);
    for (uint64_t w0 = 0; !rc && w0 < windows; w0 += batch) {
        progress_set(&pg, w0 * (ctx - 1));
        uint32_t B = (uint32_t)(windows - w0 < batch ? windows - w0 : batch);
        rc = eval_batch(&l, &kvo, ids, w0, B, ctx, pre, with_ref, cur, &acc, &pg, &e);
    }
    progress_end(&pg);
    double dt = cli_now_s() - t0;
    free(cur);
    free(ids);
    loaded_free(&l);
    if (rc)
        return cli_fail(&e);
    double mean = acc.nll / (double)acc.scored, dn = acc.decoded ? (double)acc.decoded : 1.0;
    double tps = dt > 0 ? acc.scored / dt : 0.0;
    if (json) {
        json_t *root = json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:f, s:f, s:f}", "model",
                                 model, "text", text, "ctx", ctx, "blocks", (json_int_t)n_blocks,
                                 "windows", (json_int_t)windows, "tokens", (json_int_t)acc.scored,
                                 "nll", mean, "ppl", exp(mean), "tokens_per_s", tps);
        if (with_ref) {
            json_object_set_new(root, "prefill", json_integer(pre));
            json_object_set_new(root, "dense_nll", json_real(acc.dense_nll / (double)acc.scored));
            json_object_set_new(root, "decode_tokens", json_integer((json_int_t)acc.decoded));
            json_object_set_new(root, "nll_decode", json_real(acc.nll_dec / dn));
            json_object_set_new(root, "dense_nll_decode", json_real(acc.dense_nll_dec / dn));
            json_object_set_new(root, "kl", json_real(acc.kl / dn));
            json_object_set_new(root, "top1", json_real((double)acc.agree / dn));
        }
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
        printf("\n");
        json_decref(root);
    } else {
        printf("%s on %s: %llu windows of %u tokens from %u blocks, %llu tokens scored\n", model,
               text, (unsigned long long)windows, ctx, n_blocks, (unsigned long long)acc.scored);
        printf("mean NLL %.4f nats/token, perplexity %.3f (%.0f tokens/s)\n", mean, exp(mean), tps);
        if (with_ref)
            printf("decoded positions (%llu, after a dense prefill of %u): NLL %.4f, dense %.4f; "
                   "KL(dense || policy) %.5f nats; top-1 agreement %.4f\n",
                   (unsigned long long)acc.decoded, pre, acc.nll_dec / dn, acc.dense_nll_dec / dn,
                   acc.kl / dn, (double)acc.agree / dn);
    }
    return 0;
}

/* ---- alisa record ---- */

/* What alisa record is asked; defaults in cmd_record's initializer. */
struct record_opts {
    const char *model, *tokenizer, *text, *out, *log;
    uint32_t P, G, batch, offset;
    double threshold;
    int per_head;
    struct kv_opts kvo;
};

#define CO(f) offsetof(struct record_opts, f)
static const struct cli_opt record_own_opts[] = {
    {"model", "M", CLI_STR, CO(model), NULL, 1,
     "as alisa run --model: a catalog or short name, llama2.c\n"
     ".bin, GGUF file or Hugging Face checkpoint directory", 0},
    {"tokenizer", "T", CLI_STR, CO(tokenizer), NULL, 0,
     "tokenizer file (default: the catalog's)", 0},
    {"text", "FILE", CLI_STR, CO(text), NULL, 1,
     "text", 0},
    {"prompt-len", "P", CLI_U32, CO(P), NULL, 1,
     "prompt tokens per sequence", 0},
    {"gen-len", "G", CLI_U32, CO(G), NULL, 0,
     "generated (recorded decode) tokens per sequence", 0},
    {"batch", "B", CLI_U32, CO(batch), NULL, 0,
     "sequences (consecutive windows, default 1)", 0},
    {"offset", "K", CLI_U32, CO(offset), NULL, 0,
     "first token of the first window (default 0)", 0},
    {"threshold", "T", CLI_DOUBLE, CO(threshold), NULL, 0,
     "sparse-row cutoff relative to the row max (default 0.001;\n"
     "0 under a selection that reads each step's own row, so a\n"
     "replay ranks the same weights)", 0},
    {"output", "X", CLI_STR, CO(out), NULL, 1,
     "trace to write", 'o'},
    {"log", "FILE", CLI_STR, CO(log), NULL, 0,
     "decision log of the scheduler (planlog.h's lines)", 0},
    {"per-head", NULL, CLI_FLAG, CO(per_head), NULL, 0,
     "also each query head's row (the trace's per-head rows, for\n"
     "per-head policies; about n_heads + 1 times the size; dense\n"
     "attention on the CPU backend only)", 0},
    {0}};
static const struct cli_group record_groups[] = {{record_own_opts, 0},
                                                 KV_GROUPS(struct record_opts, kvo)};
static const struct cli_command_opts record_command = {record_groups, 4, 1, 0};
#undef CO

void cmd_record_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa record --model M --text FILE --prompt-len P --gen-len G -o X.trace\n"
            "                    [options]\n"
            "\n"
            "Records real attention into a trace: B windows of P + G consecutive tokens of\n"
            "the text (tokenised as alisa eval does), run teacher-forced (the sequence is\n"
            "the real text), with every position's head-mean attention row per layer\n"
            "written in the trace format, prompt rows included. The trace holds the\n"
            "model's SHA-256 and the text source and token offset.\n"
            "\n"
            "With --selection and/or --placement the decode runs under the scheduler (its\n"
            "rows then hold weight on the attended tokens only) and --log writes its\n"
            "decisions; `alisa plan` on the trace with the same options (and --kv-fp32,\n"
            "capacities in the same bytes, the trace written with --threshold 0) replays\n"
            "the same decisions: sort both logs and they are identical.\n"
            "\n"
            );
    cli_opts_help(out, &record_command, 21);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa record --model stories260K --text "
            "../shared/models/eval-text/tinystories_val_subset.txt --prompt-len 32 "
            "--gen-len 32 --batch 2 -o rec.trace\n");
}

int cmd_record(int argc, char **argv)
{
    struct record_opts o = {.kvo = {.sel = {.sparsity = SEL_SPARSITY_DEFAULT}}, .batch = 1,
                            .threshold = NAN};
    struct alisa_err e = {{0}};
    int req = cli_opts_parse(argc, argv, &record_command, &o, &o.kvo.knobs, cmd_record_usage,
                             NULL);
    if (req)
        return req;
    const char *model = o.model, *tokenizer = o.tokenizer, *text = o.text, *out = o.out;
    const char *log_path = o.log;
    struct kv_opts kvo = o.kvo;
    const uint32_t P = o.P, G = o.G, batch = o.batch, offset = o.offset;
    if ((req = kv_opts_check(&kvo)))
        return req;
    /* a selection that ranks the step's own row must find in the trace the
     * row it ranked: a cutoff would tie the small weights at 0 and the
     * replay would pick among them otherwise (issue 45) */
    const struct selection_ops *sel = kvo.selection ? selection_find(kvo.selection) : NULL;
    const double threshold =
        !isnan(o.threshold) ? o.threshold : sel && sel->needs_present ? 0 : 0.001;
    if (!P)
        return cli_usage_error(cmd_record_usage, "--prompt-len 0: at least 1 token");
    if (!batch)
        return cli_usage_error(cmd_record_usage, "--batch 0: at least 1 sequence");
    struct loaded l;
    int lrc = load_model(&l, model, tokenizer, 1, &kvo, &e);
    if (lrc)
        return cli_fail_status(lrc, &e);
    char what[64];
    snprintf(what, sizeof what, "--prompt-len %u + --gen-len %u", P, G);
    int rc = loaded_context_check(&l, (uint64_t)P + G, cmd_record_usage, what);
    if (rc || (rc = loaded_batch_check(&l, batch, (uint64_t)P + G, cmd_record_usage)))
        return rc;
    FILE *lf = NULL;
    char lpart[1100];
    if (log_path && !(lf = outfile_open(log_path, lpart, sizeof lpart, "decision log", &e)))
        rc = ALISA_EIO;
    struct record_job job = {.l = &l, .text = text, .out = out, .P = P, .G = G, .batch = batch,
                             .offset = offset, .threshold = threshold, .per_head = o.per_head,
                             .kv = kvo, .log = lf,
                             .progress = "record"};
    if (!rc)
        rc = record_trace(&job, &e);
    if (lf) /* whole or not at all: a failed record leaves no log */
        rc = outfile_close(lf, lpart, log_path, rc, &e);
    if (!rc)
        fprintf(stderr, "alisa: wrote %s (%s, %u sequence%s of %u + %u tokens)\n", out, l.m->name,
                batch, batch == 1 ? "" : "s", P, G);
    loaded_free(&l);
    return rc ? cli_fail(&e) : 0;
}

/* ---- alisa model ---- */

struct model_opts {
    int tensors;
};
static const struct cli_opt model_info_own[] = {
    {"tensors", NULL, CLI_FLAG, offsetof(struct model_opts, tensors), NULL, 0,
     "each tensor's name, type and shape too", 0},
    {0}};
static const struct cli_group model_info_groups[] = {{model_info_own, 0}};
static const struct cli_command_opts model_info_command = {model_info_groups, 1, 0, 1};

void cmd_model_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa model info FILE [--tensors]\n"
            "\n"
            "Prints a GGUF file's version, architecture hyper-parameters, tokenizer and\n"
            "tensor summary (tensors counted by ggml type), after checking that every\n"
            "tensor's data lies inside the file.\n"
            "\n");
    cli_opts_help(out, &model_info_command, 20);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh, after scripts/get-models):\n"
            "  alisa model info models-cache/SmolLM2-135M-Instruct.Q4_1.gguf\n");
}

int cmd_model(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        cmd_model_usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "info") != 0)
        return cli_usage_error(cmd_model_usage, "expected: info FILE [--tensors]");
    struct model_opts o = {0};
    int first;
    int rc = cli_opts_parse(argc - 1, argv + 1, &model_info_command, &o, NULL, cmd_model_usage,
                            &first);
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if (argc - 1 - first != 1)
        return cli_usage_error(cmd_model_usage, "expected: info FILE [--tensors]");
    const char *path = argv[1 + first];
    const int tensors = o.tensors;
    struct gguf *g;
    struct alisa_err e = {{0}};
    if (gguf_open(&g, path, &e))
        return cli_fail(&e);
    char arch[64] = "?", name[128] = "?", tok[64] = "?";
    gguf_get_str(g, "general.architecture", arch, sizeof arch, &e);
    gguf_get_str(g, "general.name", name, sizeof name, &e);
    gguf_get_str(g, "tokenizer.ggml.model", tok, sizeof tok, &e);
    printf("file:         %s\nname:         %s\narchitecture: %s\n", path, name, arch);
    static const char *keys[] = {"context_length", "embedding_length", "block_count",
                                 "feed_forward_length", "attention.head_count",
                                 "attention.head_count_kv", "rope.freq_base",
                                 "attention.layer_norm_rms_epsilon"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char k[128];
        double v;
        snprintf(k, sizeof k, "%s.%s", arch, keys[i]);
        if (gguf_get_f64(g, k, &v, &e) == 0)
            printf("  %-34s %g\n", keys[i], v);
    }
    uint64_t n_tokens = 0, n_merges = 0;
    gguf_get_str_array(g, "tokenizer.ggml.tokens", &n_tokens, &e);
    gguf_get_str_array(g, "tokenizer.ggml.merges", &n_merges, &e);
    printf("tokenizer:    %s, %llu tokens, %llu merges\n", tok, (unsigned long long)n_tokens,
           (unsigned long long)n_merges);
    uint64_t per_type[64] = {0}, elems = 0; /* the last counts ids past ggml's */
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(g, i);
        const char *tn = ggml_type_name(t->type);
        per_type[tn ? t->type : 63]++;
        elems += t->n_elems;
        if (tensors)
            printf("  %-32s %-8s [%llu, %llu]\n", t->name, tn ? tn : "unknown",
                   (unsigned long long)t->dims[0], (unsigned long long)(t->n_dims > 1 ? t->dims[1] : 1));
    }
    printf("tensors:      %llu, %.1f M elements; by type:", (unsigned long long)gguf_n_tensors(g),
           elems / 1e6);
    for (uint32_t ty = 0; ty < 64; ty++)
        if (per_type[ty])
            printf(" %s %llu", ty < 63 ? ggml_type_name(ty) : "unknown", (unsigned long long)per_type[ty]);
    printf("\n");
    gguf_close(g);
    return 0;
}
