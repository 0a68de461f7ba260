/* `alisa serve`: the serving simulator from the command line (serve.h): a
 * request stream drawn or read, served under a selection and placement
 * with continuous batching, latencies reported with their percentiles.
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "costmodel.h"
#include "outfile.h"
#include "serve.h"

struct serve_opts {
    struct serve_config cfg;
    struct wl_params wl;
    const char *model, *hw, *sel, *place, *dir, *profile, *software, *requests, *dump,
        *timeline, *per_request, *rule;
    uint64_t gpu_mem, cpu_mem, kv_pool;
    int json, int8, fp32;
    double search[2]; /* --search-rate LO:HI; 0: none */
    double attain;
};

/* --search-rate LO:HI requests/s */
static int read_rate_range(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    double *lh = field;
    char a[32];
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : 0;
    if (!colon || n >= sizeof a)
        return err_set(e, ALISA_EINVAL, "%s %s: expected LOW:HIGH requests/s", opt, arg);
    memcpy(a, arg, n);
    a[n] = 0;
    if (cli_parse_double(opt, a, &lh[0], e) || cli_parse_double(opt, colon + 1, &lh[1], e))
        return ALISA_EINVAL;
    if (!(lh[0] > 0 && lh[1] > lh[0] && isfinite(lh[1])))
        return err_set(e, ALISA_EINVAL, "%s %s: expected 0 < LOW < HIGH requests/s", opt, arg);
    return 0;
}

static int read_overlap(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    if (strcmp(arg, "prefetch") == 0 || strcmp(arg, "none") == 0)
        return *(int *)field = strcmp(arg, "none") == 0, 0;
    return err_set(e, ALISA_EINVAL, "%s %s: expected prefetch or none", opt, arg);
}

#define SO(f) offsetof(struct serve_opts, f)
static const struct cli_opt serve_workload_opts[] = {
    {"trace", "FILE", CLI_STR, SO(cfg.trace), NULL, 1,
     "attention trace the requests replay (request i reads sequence\n"
     "i mod S among those long enough)", 0},
    {"model", "NAME", CLI_STR, SO(model), NULL, 1, "model shape (alisa catalog models)", 0},
    {"hardware", "NAME", CLI_STR, SO(hw), NULL, 1, "hardware profile (alisa catalog hardware)", 0},
    {"requests-csv", "FILE", CLI_STR, SO(requests), NULL, 0,
     "read the stream instead: a header naming arrival_s,\n"
     "prompt_len and output_len, one request a line", 0},
    {"dump-requests", "FILE", CLI_STR, SO(dump), NULL, 0,
     "write the stream served as that CSV", 0},
    {0}};

static const struct cli_opt serve_run_opts[] = {
    {"selection", "NAME", CLI_STR, SO(sel), NULL, 0,
     "which tokens a step attends (default dense; alisa policy list)", 0},
    {"placement", "NAME", CLI_STR, SO(place), NULL, 0,
     "where each token's KV lives (default gpu-only: vLLM's paged KV;\n"
     "belady and oracle-cost read each request's own future)", 0},
    {"kv-int8", NULL, CLI_FLAG, SO(int8), NULL, 0, "INT8 KV", 0},
    {"kv-fp32", NULL, CLI_FLAG, SO(fp32), NULL, 0, "FP32 KV (the CPU executor's)", 0},
    {"gpu-mem", "BYTES", CLI_FN, SO(gpu_mem), cli_read_memory, 0,
     "GPU memory, > 0 (default: the profile's)", 0},
    {"cpu-mem", "BYTES", CLI_FN, SO(cpu_mem), cli_read_memory, 0,
     "host memory for KV, > 0 (default: the profile's)", 0},
    {"kv-pool", "BYTES", CLI_FN, SO(kv_pool), cli_read_memory, 0,
     "the GPU KV pool as given (an executor's), instead of sizing it\n"
     "from --gpu-mem as vLLM does", 0},
    {"gpu-mem-utilization", "U", CLI_DOUBLE, SO(cfg.gpu_mem_utilization), NULL, 0,
     "share of GPU memory for weights, activations and KV\n"
     "(default 0.9, vLLM's)", 0},
    {"max-num-seqs", "N", CLI_U32, SO(cfg.max_num_seqs), NULL, 0,
     "requests running at once, at most (default 256)", 0},
    {"max-batched-tokens", "N", CLI_U32, SO(cfg.max_batched_tokens), NULL, 0,
     "token rows per iteration (default 8192)", 0},
    {"no-chunked-prefill", NULL, CLI_FLAG, SO(cfg.no_chunked_prefill), NULL, 0,
     "a prompt runs whole in one iteration (default: cut to the budget)", 0},
    {"block-tokens", "N", CLI_U32, SO(cfg.block_tokens), NULL, 0,
     "tokens per KV block (default 16)", 0},
    {"dense-cache", NULL, CLI_FLAG, SO(cfg.dense_cache), NULL, 0,
     "the CPU executor's dense cache serves (alisa serve-run without\n"
     "--selection): attention priced from the profile's dense_attn_*\n"
     "figures, no scheduler (a selection that attends every token on\n"
     "the device only)", 0},
    {"gpu-tokens", "N", CLI_U32, SO(cfg.gpu_tokens), NULL, 0,
     "offloading placements: GPU tokens per request and layer (the\n"
     "hot buffer; default the KV pool's share over --max-num-seqs)", 0},
    {"overlap", "MODE", CLI_FN, SO(cfg.no_prefetch), read_overlap, 0,
     "prefetch (default: a layer's loads beside the previous layer's\n"
     "compute) or none", 0},
    {"extend", NULL, CLI_FLAG, SO(cfg.extend), NULL, 0,
     "continue trace sequences shorter than a request with synthetic\n"
     "rows (alisa sim --extend's model)", 0},
    {"software", "NAME", CLI_STR, SO(software), NULL, 0,
     "host costs priced (alisa catalog software; default none)", 0},
    {"rule", "NAME", CLI_STR, SO(rule), NULL, 0,
     "price by a rule's profiles, as alisa sim --rule: the\n"
     "hardware's HW-NAME and --software's SW-NAME where the\n"
     "catalog has one (h100: our H100's measured figures)", 0},
    {"slo-ttft", "S", CLI_DOUBLE, SO(cfg.slo_ttft_s), NULL, 0,
     "time-to-first-token objective, seconds (goodput)", 0},
    {"slo-tpot", "S", CLI_DOUBLE, SO(cfg.slo_tpot_s), NULL, 0,
     "time-per-output-token objective, seconds (goodput)", 0},
    {"search-rate", "LO:HI", CLI_FN, SO(search), read_rate_range, 0,
     "find the highest request rate in LO..HI at which --attain of\n"
     "the requests meet the objectives (DistServe's goodput), by\n"
     "bisection to 2%; reports the run at that rate", 0},
    {"attain", "A", CLI_DOUBLE, SO(attain), NULL, 0,
     "share of requests that must meet the objectives (default 0.9)", 0},
    {"timeline", "FILE", CLI_STR, SO(timeline), NULL, 0,
     "per-iteration CSV: times, running, waiting, tokens, KV", 0},
    {"per-request", "FILE", CLI_STR, SO(per_request), NULL, 0,
     "per-request CSV: arrival, lengths, TTFT, TPOT, latency", 0},
    {"json", NULL, CLI_FLAG, SO(json), NULL, 0, "print JSON", 0},
    {"catalog", "DIR", CLI_STR, SO(dir), NULL, 0, "catalog directory", 0},
    {"profile", "FILE", CLI_STR, SO(profile), NULL, 0,
     "hardware profiles added to the catalog (alisa calibrate)", 0},
    {0}};

static const struct cli_group serve_groups[] = {
    {serve_workload_opts, 0}, {cli_stream_opts, SO(wl)}, {cli_budget_opts, SO(cfg.sel_params)},
    {serve_run_opts, 0}};
static const struct cli_command_opts serve_command = {serve_groups, 4, 1, 0};
#undef SO

void cmd_serve_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa serve --trace FILE --model NAME --hardware NAME [options]\n"
            "\n"
            "Simulates serving a stream of requests that arrive over time (Poisson or Gamma\n"
            "arrivals, or a CSV) with continuous batching as vLLM V1 schedules it: a token\n"
            "budget per iteration, decodes first, prompts chunked into what is left,\n"
            "preemption by recomputation when KV runs out. Each request's KV is placed token\n"
            "by token by the scheduler core under the selection and placement given,\n"
            "replaying the trace's attention; an offloading placement keeps a GPU hot buffer\n"
            "per request and the rest in host memory. Reports time to first token, time per\n"
            "output token and end-to-end latency (mean, P50, P90, P99), throughput, and\n"
            "goodput under the objectives given.\n"
            "\n");
    cli_opts_help(out, &serve_command, 24);
    fprintf(out, "\nexamples (run as shown by tests/readme_test.sh):\n"
                 "  alisa serve --trace traces/synthetic-opt-8l-4s.trace --model OPT-13B "
                 "--hardware A100-80GB --rate 2 --requests 100 --prompt-len 128 "
                 "--output-len 64\n");
}

int cli_serve_check_batching(void (*usage)(FILE *), uint32_t max_num_seqs,
                             uint32_t max_batched_tokens, uint32_t block_tokens,
                             double slo_ttft_s, double slo_tpot_s)
{
    if (!max_num_seqs || max_num_seqs > CLI_MAX_BATCH)
        return cli_usage_error(usage, "--max-num-seqs %u: expected 1..%u", max_num_seqs,
                               CLI_MAX_BATCH);
    if (!max_batched_tokens || max_batched_tokens > WORKLOAD_MAX_TOKENS)
        return cli_usage_error(usage, "--max-batched-tokens %u: expected 1..%u",
                               max_batched_tokens, WORKLOAD_MAX_TOKENS);
    if (!block_tokens || block_tokens > 4096)
        return cli_usage_error(usage, "--block-tokens %u: expected 1..4096", block_tokens);
    if (!(slo_ttft_s >= 0) || !(slo_tpot_s >= 0))
        return cli_usage_error(usage, "--slo-ttft and --slo-tpot: seconds >= 0");
    return 0;
}

static json_t *stat_json(const struct serve_stat *s)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean", s->mean, "p50", s->p50, "p90", s->p90,
                     "p99", s->p99, "max", s->max);
}

static int report_json(const struct serve_opts *o, const struct workload *w,
                       const struct serve_result *r, json_t *search)
{
    const struct serve_config *cfg = &o->cfg;
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:f, s:s, s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:i, s:i}",
        "trace", cfg->trace, "model", cfg->model->name, "hardware", cfg->hw->name, "selection",
        cfg->sel->name, "placement", cfg->place->name, "sparsity", cfg->sel_params.sparsity,
        "kv_precision", kv_precision_name(cfg->precision), "requests", w->n, "oom", r->oom,
        "makespan_s", r->makespan_s, "throughput_tok_s", r->throughput_tok_s, "request_rate_s",
        r->request_rate_s, "goodput_req_s", r->goodput_req_s, "slo_attained", r->slo_attained,
        "iterations", r->iterations, "preemptions", r->preemptions);
    if (!root) { /* json_pack refuses a NaN or an infinity: no figure here should be one */
        json_decref(search);
        struct alisa_err e = {{0}};
        err_set(&e, ALISA_EINVAL, "a figure of the run is not a finite number; no JSON written");
        return cli_fail(&e);
    }
    json_object_set_new(root, "oom_reason", r->oom ? json_string(r->oom_reason) : json_null());
    json_object_set_new(root, "selection_params", cli_knobs_json(cfg->sel, &cfg->sel_params));
    json_object_set_new(root, "workload", cli_serve_workload_json(o->requests, &o->wl));
    json_object_set_new(root, "scheduler", json_pack(
        "{s:i, s:i, s:b, s:i, s:f}", "max_num_seqs", cfg->max_num_seqs, "max_batched_tokens",
        cfg->max_batched_tokens, "chunked_prefill", !cfg->no_chunked_prefill, "block_tokens",
        cfg->block_tokens, "gpu_mem_utilization", cfg->gpu_mem_utilization));
    if (!r->oom) {
        json_object_set_new(root, "ttft_s", stat_json(&r->ttft));
        json_object_set_new(root, "tpot_s", stat_json(&r->tpot));
        json_object_set_new(root, "e2e_s", stat_json(&r->e2e));
    }
    json_object_set_new(root, "slo", json_pack("{s:f, s:f}", "ttft_s", cfg->slo_ttft_s,
                                               "tpot_s", cfg->slo_tpot_s));
    json_object_set_new(root, "memory", json_pack(
        "{s:f, s:f, s:f, s:f, s:i}", "gpu_kv_capacity_bytes", r->gpu_kv_capacity_bytes,
        "cpu_kv_capacity_bytes", r->cpu_kv_capacity_bytes, "peak_gpu_kv_bytes",
        r->peak_gpu_kv_bytes, "peak_cpu_kv_bytes", r->peak_cpu_kv_bytes, "gpu_tokens_per_request",
        r->gpu_tokens));
    json_object_set_new(root, "traffic", json_pack(
        "{s:f, s:f, s:f, s:f}", "bytes_h2d", r->bytes_h2d, "bytes_d2h", r->bytes_d2h,
        "recomputed_tokens", r->recomputed_tokens, "repeated_prefill_tokens",
        r->repeated_prefill_tokens));
    json_object_set_new(root, "time", json_pack("{s:f, s:f, s:f, s:f}", "compute_s", r->compute_s,
                                                "transfer_s", r->transfer_s, "stall_s",
                                                r->stall_s, "mean_running", r->mean_running));
    json_object_set_new(root, "placement_replays", json_integer(r->replays));
    json_object_set_new(root, "rate_search", search ? search : json_null());
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    printf("\n");
    json_decref(root);
    return 0;
}

static void print_stat(const char *name, const struct serve_stat *s, double scale,
                       const char *unit)
{
    printf("%-12s mean %9.3f  P50 %9.3f  P90 %9.3f  P99 %9.3f  max %9.3f %s\n", name,
           s->mean * scale, s->p50 * scale, s->p90 * scale, s->p99 * scale, s->max * scale, unit);
}

void cli_serve_print_latencies(const struct serve_result *r, double slo_ttft_s, double slo_tpot_s)
{
    printf("served       %.1f output tokens/s, %.3f requests/s over %.3f s; %u iterations, "
           "%.1f running on average, %u preemptions\n", r->throughput_tok_s, r->request_rate_s,
           r->makespan_s, r->iterations, r->mean_running, r->preemptions);
    print_stat("TTFT", &r->ttft, 1e3, "ms");
    print_stat("TPOT", &r->tpot, 1e3, "ms");
    print_stat("latency", &r->e2e, 1.0, "s");
    if (slo_ttft_s > 0 || slo_tpot_s > 0)
        printf("goodput      %.3f requests/s: %.1f%% met TTFT <= %g s and TPOT <= %g s\n",
               r->goodput_req_s, 100 * r->slo_attained, slo_ttft_s, slo_tpot_s);
}

json_t *cli_serve_workload_json(const char *csv, const struct wl_params *wl)
{
    return csv ? json_pack("{s:s}", "csv", csv)
               : json_pack("{s:f, s:f, s:i, s:i, s:i, s:i, s:I}", "rate", wl->rate, "burstiness",
                           wl->burstiness, "prompt_min", wl->prompt_min, "prompt_max",
                           wl->prompt_max, "output_min", wl->output_min, "output_max",
                           wl->output_max, "seed", (json_int_t)wl->seed);
}

json_t *cli_serve_latencies_json(const struct serve_result *r)
{
    json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:f}", "requests", r->n,
                          "makespan_s", r->makespan_s, "throughput_tok_s", r->throughput_tok_s,
                          "request_rate_s", r->request_rate_s, "goodput_req_s", r->goodput_req_s,
                          "slo_attained", r->slo_attained, "iterations", r->iterations,
                          "preemptions", r->preemptions, "mean_running", r->mean_running);
    if (o) {
        json_object_set_new(o, "ttft_s", stat_json(&r->ttft));
        json_object_set_new(o, "tpot_s", stat_json(&r->tpot));
        json_object_set_new(o, "e2e_s", stat_json(&r->e2e));
    }
    return o;
}

static int report_text(const struct serve_opts *o, const struct workload *w,
                       const struct serve_result *r)
{
    const struct serve_config *cfg = &o->cfg;
    printf("%s on %s, %u requests, selection %s, placement %s, %s KV\n", cfg->model->name,
           cfg->hw->name, w->n, cfg->sel->name, cfg->place->name,
           cfg->precision == KV_INT8 ? "INT8" : cfg->precision == KV_FP32 ? "FP32" : "FP16");
    if (r->oom) {
        struct alisa_err e = {{0}};
        err_set(&e, ALISA_ENOMEM, "out of memory: %s (--json reports it as a result)",
                r->oom_reason);
        return cli_fail(&e);
    }
    cli_serve_print_latencies(r, cfg->slo_ttft_s, cfg->slo_tpot_s);
    printf("KV           GPU peak %.2f of %.2f GB, host peak %.2f of %.2f GB", 
           r->peak_gpu_kv_bytes / 1e9, r->gpu_kv_capacity_bytes / 1e9,
           r->peak_cpu_kv_bytes / 1e9, r->cpu_kv_capacity_bytes / 1e9);
    if (r->gpu_tokens)
        printf("; %u GPU tokens per request and layer", r->gpu_tokens);
    printf("\ntraffic      %.3f GB host->GPU, %.3f GB GPU->host; %.0f tokens recomputed by the "
           "placement, %.0f by preemption\n", r->bytes_h2d / 1e9, r->bytes_d2h / 1e9,
           r->recomputed_tokens, r->repeated_prefill_tokens);
    printf("time         GPU busy %.3f s, link busy %.3f s, GPU waiting %.3f s\n", r->compute_s,
           r->transfer_s, r->stall_s);
    return 0;
}

int cli_serve_write_per_request(const char *path, const struct serve_result *r,
                                struct alisa_err *e)
{
    char part[4200];
    FILE *f = outfile_open(path, part, sizeof part, "per-request table", e);
    if (!f)
        return ALISA_EIO;
    fprintf(f, "request,arrival_s,prompt_len,output_len,trace_seq,first_token_s,finish_s,"
               "ttft_s,tpot_s,e2e_s,preemptions\n");
    for (uint32_t i = 0; i < r->n; i++) {
        const struct serve_request *q = &r->req[i];
        fprintf(f, "%u,%.9f,%u,%u,%u,%.9f,%.9f,%.9f,%.9f,%.9f,%u\n", i, q->arrival_s,
                q->prompt_len, q->output_len, q->trace_seq, q->first_token_s, q->finish_s,
                q->ttft_s, q->tpot_s, q->e2e_s, q->preemptions);
    }
    return outfile_close(f, part, path, 0, e);
}

int cmd_serve(int argc, char **argv)
{
    struct serve_opts o = {
        .cfg = {.sel_params = {.sparsity = SEL_SPARSITY_DEFAULT},
                .max_num_seqs = SERVE_MAX_NUM_SEQS, .max_batched_tokens = SERVE_MAX_BATCHED_TOKENS,
                .block_tokens = SERVE_BLOCK_TOKENS,
                .gpu_mem_utilization = SERVE_GPU_MEM_UTILIZATION},
        .wl = CLI_STREAM_DEFAULTS,
        .sel = "dense", .place = "gpu-only", .dir = catalog_default_dir(), .attain = 0.9};
    struct cli_knobs knobs = {0};
    struct alisa_err e = {{0}};
    int rc = cli_opts_parse(argc, argv, &serve_command, &o, &knobs, cmd_serve_usage, NULL);
    if (rc)
        return rc;
    struct serve_config *cfg = &o.cfg;
    if (o.int8 && o.fp32)
        return cli_usage_error(cmd_serve_usage, "--kv-int8 and --kv-fp32: one precision");
    cfg->precision = o.int8 ? KV_INT8 : o.fp32 ? KV_FP32 : KV_FP16;
    cfg->gpu_mem_bytes = (double)o.gpu_mem;
    cfg->kv_pool_bytes = (double)o.kv_pool;
    cfg->cpu_mem_bytes = (double)o.cpu_mem;
    if (!(cfg->sel = selection_find(o.sel)))
        return cli_unknown_policy(cmd_serve_usage, "--selection", o.sel);
    if (!(cfg->place = placement_find(o.place)))
        return cli_unknown_policy(cmd_serve_usage, "--placement", o.place);
    if (cli_knobs_apply(&knobs, cfg->sel, &cfg->sel_params, &e))
        return cli_usage_error(cmd_serve_usage, "%s", e.msg);
    if (!(cfg->gpu_mem_utilization > 0 && cfg->gpu_mem_utilization <= 1))
        return cli_usage_error(cmd_serve_usage, "--gpu-mem-utilization %g: expected (0, 1]",
                               cfg->gpu_mem_utilization);
    if ((rc = cli_serve_check_batching(cmd_serve_usage, cfg->max_num_seqs,
                                       cfg->max_batched_tokens, cfg->block_tokens,
                                       cfg->slo_ttft_s, cfg->slo_tpot_s)))
        return rc;
    if (!(o.attain > 0 && o.attain <= 1))
        return cli_usage_error(cmd_serve_usage, "--attain %g: expected a share in (0, 1]",
                               o.attain);
    if (o.search[1] > 0 && !(cfg->slo_ttft_s > 0) && !(cfg->slo_tpot_s > 0))
        return cli_usage_error(cmd_serve_usage, "--search-rate needs an objective (--slo-ttft "
                               "or --slo-tpot)");
    if (o.search[1] > 0 && (o.requests || o.timeline || o.dump))
        return cli_usage_error(cmd_serve_usage, "--search-rate draws a stream at each rate: not "
                               "with --requests-csv, --timeline or --dump-requests");
    struct workload w;
    if (o.requests) {
        if ((rc = workload_read_csv(o.requests, &w, &e)))
            return cli_fail(&e);
    } else if ((rc = workload_generate(&o.wl, &w, &e))) {
        return cli_usage_error(cmd_serve_usage, "%s", e.msg);
    }
    struct catalog c;
    if (cli_catalog_load(&c, o.dir, o.profile, &e)) {
        workload_free(&w);
        return cli_fail(&e);
    }
    char hw_rule[300], sw_rule[300];
    const char *hw = o.hw, *sw = o.software ? o.software : "none";
    rc = cli_rule_names(&c, o.rule, &hw, &sw, NULL, hw_rule, sw_rule, sizeof hw_rule, &e);
    cfg->model = catalog_model(&c, o.model);
    cfg->hw = catalog_hw(&c, hw);
    if (!rc) {
        if (!cfg->model)
            rc = catalog_model_not_found(&c, "--model", o.model, &e);
        else if (!cfg->model->available)
            rc = err_set(&e, ALISA_ENOTFOUND, "--model %s: unavailable: %s", o.model,
                         cfg->model->note);
        else if (!cfg->hw)
            rc = catalog_hw_not_found(&c, "--hardware", o.hw, &e);
        else
            rc = cli_software(&c, sw, NULL, &cfg->sw, &e);
    }
    if (!rc && cfg->dense_cache && !cost_dense_cache_measured(cfg->hw))
        fprintf(stderr, "alisa serve: note: --dense-cache: hardware %s has no dense_attn_* "
                "figures (alisa calibrate writes them): priced as the scheduler's path\n",
                cfg->hw->name);
    if (!rc && o.dump)
        rc = workload_write_csv(o.dump, &w, &e);
    FILE *tl = NULL;
    char part[4200];
    if (!rc && o.timeline && !(tl = outfile_open(o.timeline, part, sizeof part, "timeline", &e)))
        rc = ALISA_EIO;
    struct serve_result r = {0};
    double found = 0;
    uint32_t runs = 0;
    if (!rc && o.search[1] > 0)
        rc = serve_search_rate(cfg, &o.wl, o.attain, o.search[0], o.search[1], SERVE_RATE_TOL,
                               &found, &runs, &r, &e);
    else if (!rc)
        rc = serve_run(cfg, &w, &r, tl, &e);
    if (tl) {
        int closed = outfile_close(tl, part, o.timeline, rc ? rc : r.oom ? ALISA_ENOMEM : 0, &e);
        if (!r.oom)
            rc = closed;
    }
    if (!rc && !r.oom && o.per_request)
        rc = cli_serve_write_per_request(o.per_request, &r, &e);
    if (rc) {
        serve_result_free(&r);
        workload_free(&w);
        catalog_deinit(&c);
        return cli_fail_status(rc, &e);
    }
    if (o.search[1] > 0) /* the run reported is the one at the rate found (or the lowest) */
        o.wl.rate = found > 0 ? found : o.search[0];
    if (o.search[1] > 0 && !o.json)
        printf("rate search  the highest rate in %g..%g requests/s at which %.0f%% of requests "
               "meet the objectives: %s%.3f (%u runs)%s\n", o.search[0], o.search[1],
               100 * o.attain, found == o.search[1] ? ">= " : "", found, runs,
               found > 0 ? "; the run at that rate:" : ": none (the run at the lowest rate below)");
    if (o.json)
        rc = report_json(&o, &w, &r, o.search[1] > 0 ? json_pack("{s:f, s:f, s:f, s:f, s:i, s:b}",
                    "low", o.search[0], "high", o.search[1], "attain", o.attain, "rate", found,
                    "runs", runs, "at_high_end", found == o.search[1]) : NULL);
    else
        rc = report_text(&o, &w, &r);
    serve_result_free(&r);
    workload_free(&w);
    catalog_deinit(&c);
    return rc;
}
