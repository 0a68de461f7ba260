/* `alisa sim`: the discrete-event simulator from the command line. A thin
 * shell over simulate.h: option parsing, catalog look-ups, printing.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "outfile.h"
#include "catalog.h"
#include "cli.h"
#include "cmds.h"
#include "simulate.h"

void cmd_sim_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa sim --trace FILE --model NAME --hardware NAME --batch B --system NAME\n"
            "                 [options]\n"
            "\n"
            "Simulates a batched decode of a catalog model on a hardware profile under a\n"
            "system, with the attention of a recorded or synthetic trace, and reports\n"
            "throughput, time split into compute / transfer / recompute / stall, bytes moved,\n"
            "KV per tier, GPU hit rate, recomputed tokens, phase switches and the share of\n"
            "the trace's attention mass the selection kept.\n"
            "Model layer l replays trace layer floor(l * trace_layers / model_layers); batch\n"
            "slot i replays trace sequence i mod sequences. The trace's prompt length must\n"
            "equal --prompt-len and it must hold at least --gen-len generated tokens.\n"
            "\n"
            "  --trace FILE        attention trace (alisa trace gen / a recorded one)\n"
            "  --model NAME        model shape (alisa catalog models)\n"
            "  --hardware NAME     hardware profile (alisa catalog hardware)\n"
            "  --batch B           sequences decoded together\n"
            "  --prompt-len S      prompt tokens (default 128)\n"
            "  --gen-len N         generated tokens (default 512)\n"
            "  --system NAME       preset (below)\n"
            "  --sparsity S        KV sparsity of sparse selections (default 0.8)\n"
            "  --budget-tokens K   attend K tokens per step instead\n"
            );
    cli_knobs_help(out, 22);
    fprintf(out,
            "  --selection NAME    override the system's selection (alisa policy list)\n"
            "  --placement NAME    override the system's placement (alisa policy list)\n"
            "  --kv-int8           INT8 KV\n"
            "  --gpu-mem BYTES     GPU memory, > 0 (default: the profile's)\n"
            "  --cpu-mem BYTES     host memory for KV, > 0 (default: the profile's)\n"
            "  --timeline FILE     per-step CSV: end time, compute, recompute, transfer, KV per tier\n"
            "  --overlap MODE      how a layer's host-device copies overlap compute: system\n"
            "                      (default: the system's, below), prefetch (the next layer's\n"
            "                      copies beside this layer's compute, FlexGen's loop) or none\n"
            "                      (each layer's copies wait for the previous layer's compute,\n"
            "                      Accelerate's hooks); for sensitivity studies\n"
            "  --search MODE       placement alisa's schedule search: greedy (the paper's rule,\n"
            "                      default), grid[:G] (exhaustive over the search's prices, alpha,\n"
            "                      beta in steps of 1/G, p1, p2 in steps of gen-len/G; G default\n"
            "                      10) or sim[:G] (candidates simulated, the fastest run kept:\n"
            "                      greedy's, grid's, and greedy's alpha and p1 with beta in 1/G\n"
            "                      steps and p2 at G + 1 points from p1, or never; G default 4)\n"
            "  --schedule A,B,P1,P2  run this schedule instead of searching: alpha, beta in\n"
            "                      [0, 1], p1 <= p2 decode steps (gen-len = never)\n"
            "  --flexgen-percent WG,WC,CG,CC[,HG,HC]  FlexGen's --percent (or with colons):\n"
            "                      weights on the GPU and CPU, KV on the GPU and CPU, and\n"
            "                      optionally the activations (default 100,0: the prefill's\n"
            "                      are held on the GPU), each pair summing to 100 (no disk);\n"
            "                      replaces the flexgen systems' LP policy\n"
            "  --software NAME     the host costs priced (alisa catalog software): a decode\n"
            "                      layer lasts at least its launches on the host, and FlexGen's\n"
            "                      pageable KV is staged into pinned memory before each copy;\n"
            "                      default: the system's (below), none: no host costs\n"
            "  --flexgen-gpu-batch G  FlexGen's gpu_batch_size, dividing --batch (the quotient\n"
            "                      its num_gpu_batches): each layer computed and launched once\n"
            "                      per GPU batch (default: the whole batch, one GPU batch)\n"
            "  --extend            continue a trace with fewer than --gen-len generated tokens\n"
            "                      with synthetic rows (alisa trace gen's model, each trace layer's\n"
            "                      target its measured mean sparsity; the importance of the\n"
            "                      trace's tokens is drawn afresh, not inferred)\n"
            "  --json              print JSON\n"
            "  --catalog DIR       catalog directory\n"
            "  --profile FILE      hardware profiles added to the catalog (alisa calibrate)\n"
            "  -h, --help          this text\n"
            "\n"
            "systems:\n");
    for (size_t i = 0; sim_systems[i].name; i++)
        fprintf(out, "  %-11s %s; software %s\n", sim_systems[i].name, sim_systems[i].summary,
                sim_systems[i].software ? sim_systems[i].software : "none");
    fprintf(out, "\nvllm is modelled per sequence (its block manager), not per token: it ignores\n"
                 "the trace's attention.\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa sim --trace traces/synthetic-opt-8l-4s.trace --model OPT-30B "
            "--hardware H100-80GB --batch 64 --system alisa\n");
}

int cmd_sim(int argc, char **argv)
{
    enum { O_TRACE = 1000, O_MODEL, O_HW, O_BATCH, O_PROMPT, O_GEN, O_SYSTEM, O_SPARSITY,
           O_BUDGET, O_SEL, O_PLACE, O_INT8, O_GPUMEM, O_CPUMEM, O_TIMELINE, O_JSON, O_CATALOG,
           O_PROFILE, O_EXTEND, O_OVERLAP, O_SEARCH, O_SCHEDULE, O_PERCENT, O_SOFTWARE,
           O_GPU_BATCH };
    static const struct option base[] = {
        {"trace", required_argument, 0, O_TRACE},     {"model", required_argument, 0, O_MODEL},
        {"hardware", required_argument, 0, O_HW},     {"batch", required_argument, 0, O_BATCH},
        {"prompt-len", required_argument, 0, O_PROMPT}, {"gen-len", required_argument, 0, O_GEN},
        {"system", required_argument, 0, O_SYSTEM},   {"sparsity", required_argument, 0, O_SPARSITY},
        {"budget-tokens", required_argument, 0, O_BUDGET}, {"selection", required_argument, 0, O_SEL},
        {"placement", required_argument, 0, O_PLACE}, {"kv-int8", no_argument, 0, O_INT8},
        {"gpu-mem", required_argument, 0, O_GPUMEM},  {"cpu-mem", required_argument, 0, O_CPUMEM},
        {"timeline", required_argument, 0, O_TIMELINE}, {"json", no_argument, 0, O_JSON},
        {"catalog", required_argument, 0, O_CATALOG},
        {"profile", required_argument, 0, O_PROFILE}, {"extend", no_argument, 0, O_EXTEND},
        {"overlap", required_argument, 0, O_OVERLAP}, {"search", required_argument, 0, O_SEARCH},
        {"schedule", required_argument, 0, O_SCHEDULE},
        {"flexgen-percent", required_argument, 0, O_PERCENT},
        {"software", required_argument, 0, O_SOFTWARE},
        {"flexgen-gpu-batch", required_argument, 0, O_GPU_BATCH},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    struct option opts[CLI_OPTS_MAX];
    cli_join_knobs(opts, CLI_OPTS_MAX, base);
    cli_list_options(opts);
    struct cli_knobs knobs = {0};
    const char *model = NULL, *hw_name = NULL, *system = NULL, *sel = NULL, *place = NULL;
    const char *timeline_path = NULL, *dir = catalog_default_dir(), *profile = NULL;
    const char *software = NULL;
    struct sim_config cfg = {.prompt_len = 128, .gen_len = 512, .sel_params = {.sparsity = 0.8}};
    uint64_t gpu_mem = 0, cpu_mem = 0;
    int json = 0, bad = 0, batch_given = 0;
    struct alisa_err e = {{0}};
    cli_reset_getopt();
    int ch;
    int li = -1;
    while (!bad && (ch = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        const char *opt = cli_opt_name(opts, li, ch, argv[optind - 1]);
        li = -1;
        switch (ch) {
        case O_TRACE: cfg.trace = optarg; break;
        case O_MODEL: model = optarg; break;
        case O_HW: hw_name = optarg; break;
        case O_SYSTEM: system = optarg; break;
        case O_SEL: sel = optarg; break;
        case O_PLACE: place = optarg; break;
        case O_TIMELINE: timeline_path = optarg; break;
        case O_CATALOG: dir = optarg; break;
        case O_PROFILE: profile = optarg; break;
        case O_SOFTWARE: software = optarg; break;
        case O_INT8: cfg.precision = KV_INT8; break;
        case O_JSON: json = 1; break;
        case O_EXTEND: cfg.extend = 1; break;
        case O_OVERLAP:
            if (strcmp(optarg, "system") == 0)
                cfg.overlap = SIM_OVERLAP_SYSTEM;
            else if (strcmp(optarg, "prefetch") == 0)
                cfg.overlap = SIM_OVERLAP_PREFETCH;
            else if (strcmp(optarg, "none") == 0)
                cfg.overlap = SIM_OVERLAP_NONE;
            else
                bad = err_set(&e, ALISA_EINVAL, "%s %s: expected system, prefetch or none", opt,
                              optarg);
            break;
        case O_SEARCH:
            cfg.search_sim = 0;
            if (strcmp(optarg, "greedy") == 0)
                cfg.search_grid = 0;
            else if (strcmp(optarg, "sim") == 0)
                cfg.search_sim = 4;
            else if (strncmp(optarg, "sim:", 4) == 0) {
                if (!(bad = cli_parse_u32(opt, optarg + 4, &cfg.search_sim, &e)) &&
                    (cfg.search_sim < 1 || cfg.search_sim > 16))
                    bad = err_set(&e, ALISA_EINVAL, "%s %s: the simulated search takes 1 to 16 "
                                  "steps", opt, optarg);
            } else if (strcmp(optarg, "grid") == 0)
                cfg.search_grid = 10;
            else if (strncmp(optarg, "grid:", 5) == 0) {
                if (!(bad = cli_parse_u32(opt, optarg + 5, &cfg.search_grid, &e)) &&
                    (cfg.search_grid < 1 || cfg.search_grid > 64))
                    bad = err_set(&e, ALISA_EINVAL, "%s %s: the grid is 1 to 64 points", opt,
                                  optarg);
            } else
                bad = err_set(&e, ALISA_EINVAL, "%s %s: expected greedy, grid, grid:G, sim or "
                              "sim:G", opt, optarg);
            break;
        case O_SCHEDULE: {
            struct alisa_schedule *q = &cfg.schedule;
            int n = -1;
            if (sscanf(optarg, "%lf,%lf,%u,%u%n", &q->alpha, &q->beta, &q->p1, &q->p2, &n) != 4 ||
                n != (int)strlen(optarg) || !(q->alpha >= 0 && q->alpha <= 1) ||
                !(q->beta >= 0 && q->beta <= 1) || q->p1 > q->p2)
                bad = err_set(&e, ALISA_EINVAL, "%s %s: expected ALPHA,BETA,P1,P2 with alpha, "
                              "beta in [0, 1] and p1 <= p2 (decode steps)", opt, optarg);
            cfg.schedule_given = 1;
            break;
        }
        case O_PERCENT: {
            /* read below even when sscanf fails; activations on the GPU unless given */
            double wg = 0, wc = 0, cg = 0, cc = 0, hg = 100, hc = 0;
            int n = -1, got = 0;
            char v[64];
            snprintf(v, sizeof v, "%s", optarg);
            for (char *q = v; *q; q++) /* WG:WC:CG:CC as well, for sweep specs */
                *q = *q == ':' ? ',' : *q;
            if (strlen(optarg) < sizeof v) {
                got = sscanf(v, "%lf,%lf,%lf,%lf%n", &wg, &wc, &cg, &cc, &n);
                int m = -1; /* HG,HC after them */
                if (got == 4 && n != (int)strlen(v) &&
                    sscanf(v + n, ",%lf,%lf%n", &hg, &hc, &m) == 2 && m > 0)
                    n += m;
            }
            if (got != 4 || n != (int)strlen(v) ||
                !(wg >= 0 && wc >= 0 && cg >= 0 && cc >= 0 && hg >= 0 && hc >= 0) ||
                fabs(wg + wc - 100) > 1e-9 || fabs(cg + cc - 100) > 1e-9 ||
                fabs(hg + hc - 100) > 1e-9)
                bad = err_set(&e, ALISA_EINVAL, "%s %s: expected WG,WC,CG,CC[,HG,HC] percentages "
                              "with WG + WC = CG + CC = HG + HC = 100 (disk is not modelled)", opt,
                              optarg);
            cfg.percent_given = 1;
            cfg.percent = (struct flexgen_policy){wg / 100, cg / 100};
            cfg.percent_act_cpu = hc / 100;
            break;
        }
        case O_GPU_BATCH:
            if (!(bad = cli_parse_u32(opt, optarg, &cfg.flexgen_gpu_batch, &e)) &&
                !cfg.flexgen_gpu_batch)
                bad = err_set(&e, ALISA_EINVAL, "%s 0: at least 1 sequence", opt);
            break;
        case O_BATCH: batch_given = 1; bad = cli_parse_u32(opt, optarg, &cfg.batch, &e); break;
        case O_PROMPT: bad = cli_parse_u32(opt, optarg, &cfg.prompt_len, &e); break;
        case O_GEN: bad = cli_parse_u32(opt, optarg, &cfg.gen_len, &e); break;
        case O_SPARSITY: bad = cli_parse_double(opt, optarg, &cfg.sel_params.sparsity, &e); break;
        case O_BUDGET: bad = cli_parse_u32(opt, optarg, &cfg.sel_params.budget_tokens, &e); break;
        case O_GPUMEM:
        case O_CPUMEM: {
            uint64_t *b = ch == O_GPUMEM ? &gpu_mem : &cpu_mem;
            if (!(bad = cli_parse_bytes(opt, optarg, b, &e)) && *b == 0)
                bad = err_set(&e, ALISA_EINVAL, "%s 0: must be positive (leave it out for the "
                              "profile's memory)", opt);
            break;
        }
        default: {
            int k = cli_knob_take(&knobs, ch, opt, optarg, &e);
            if (!k)
                return cli_option_end(ch, opt, cmd_sim_usage);
            bad = k < 0;
        }
        }
    }
    if (bad)
        return cli_usage_error(cmd_sim_usage, "%s", e.msg);
    if (optind < argc)
        return cli_usage_error(cmd_sim_usage, "unexpected argument '%s'", argv[optind]);
    int req = cli_require(5, "--trace", cfg.trace != NULL, "--model", model != NULL, "--hardware",
                          hw_name != NULL, "--batch", cfg.batch > 0 || batch_given, "--system",
                          system != NULL);
    if (req)
        return req;
    if (!cfg.batch || cfg.batch > CLI_MAX_BATCH)
        return cli_usage_error(cmd_sim_usage, "--batch %u: expected 1..%u sequences", cfg.batch,
                               CLI_MAX_BATCH);
    if (!(cfg.system = sim_system_find(system))) {
        const char *names[64];
        size_t n = 0;
        for (; sim_systems[n].name && n < 64; n++)
            names[n] = sim_systems[n].name;
        return cli_unknown_name(cmd_sim_usage, "--system", system, names, n, NULL);
    }
    if (cfg.flexgen_gpu_batch && cfg.batch % cfg.flexgen_gpu_batch)
        return cli_usage_error(cmd_sim_usage, "--flexgen-gpu-batch %u: does not divide --batch %u",
                               cfg.flexgen_gpu_batch, cfg.batch);
    if (cfg.flexgen_gpu_batch && !cfg.system->flexgen_policy)
        return cli_usage_error(cmd_sim_usage, "--flexgen-gpu-batch: system %s is not FlexGen's "
                               "(flexgen, flexgen-copy, flexgen-default)", system);
    if (sel && !(cfg.sel = selection_find(sel)))
        return cli_unknown_policy(cmd_sim_usage, "--selection", sel);
    if (place && !(cfg.place = placement_find(place)))
        return cli_unknown_policy(cmd_sim_usage, "--placement", place);
    /* the selection's own parameters, the system's selection where none is
     * given */
    const struct selection_ops *run_sel = cfg.sel ? cfg.sel : selection_find(cfg.system->selection);
    ALISA_ASSERT(run_sel);
    if (cli_knobs_apply(&knobs, run_sel, &cfg.sel_params, &e))
        return cli_usage_error(cmd_sim_usage, "%s", e.msg);
    if (cfg.schedule_given && cfg.schedule.p2 > cfg.gen_len)
        return cli_usage_error(cmd_sim_usage, "--schedule: p2 %u is past --gen-len %u (gen-len "
                               "means never)", cfg.schedule.p2, cfg.gen_len);
    cfg.gpu_mem_bytes = (double)gpu_mem;
    cfg.cpu_mem_bytes = (double)cpu_mem;

    struct catalog c;
    if (cli_catalog_load(&c, dir, profile, &e))
        return cli_fail(&e);
    int rc = 0;
    cfg.model = catalog_model(&c, model);
    cfg.hw = catalog_hw(&c, hw_name);
    if (!cfg.model)
        rc = catalog_model_not_found(&c, "--model", model, &e);
    else if (!cfg.model->available)
        rc = err_set(&e, ALISA_ENOTFOUND, "--model %s: unavailable: %s", model, cfg.model->note);
    else if ((uint64_t)cfg.prompt_len + cfg.gen_len > cfg.model->max_seq)
        rc = err_set(&e, ALISA_EINVAL, "--prompt-len %u + --gen-len %u: %llu tokens, over %s's "
                     "context of %u", cfg.prompt_len, cfg.gen_len,
                     (unsigned long long)cfg.prompt_len + cfg.gen_len, model, cfg.model->max_seq);
    else if (!cfg.hw)
        rc = catalog_hw_not_found(&c, "--hardware", hw_name, &e);
    else if (!(rc = cli_software(&c, software, cfg.system->software, &cfg.sw, &e)))
        rc = sim_resolve(&cfg, &e);
    FILE *tl = NULL;
    char part[1100];
    if (!rc && timeline_path && !(tl = outfile_open(timeline_path, part, sizeof part, "timeline", &e)))
        rc = ALISA_EIO;
    struct sim_result r;
    if (!rc)
        rc = sim_run(&cfg, &r, tl, &e);
    if (tl) { /* whole or not at all; a text run out of memory fails (below) */
        int oom_fails = !rc && r.oom && !json;
        int closed = outfile_close(tl, part, timeline_path, rc ? rc : oom_fails ? ALISA_ENOMEM : 0,
                                    &e);
        if (!oom_fails)
            rc = closed;
    }
    if (rc) {
        catalog_deinit(&c);
        return cli_fail_status(rc, &e);
    }
    if (json) {
        json_t *root = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:s, s:b, s:f, s:f, s:f, s:f, "
            "s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:i}",
            "trace", cfg.trace, "model", cfg.model->name, "hardware", cfg.hw->name, "system",
            cfg.system->name, "selection", cfg.sel->name, "placement", cfg.place->name, "batch",
            cfg.batch, "prompt_len", cfg.prompt_len, "gen_len", cfg.gen_len, "sparsity",
            cfg.sel_params.sparsity, "kv_precision", kv_precision_name(cfg.precision),
            "oom", r.oom, "throughput_tok_s", r.throughput_tok_s, "total_s", r.total_s,
            "prefill_s", r.prefill_s, "compute_s", r.compute_s, "transfer_s", r.transfer_s,
            "recompute_s", r.recompute_s, "stall_s", r.stall_s, "bytes_h2d", r.bytes_h2d,
            "bytes_d2h", r.bytes_d2h, "gpu_hit_rate", r.gpu_hit_rate, "recomputed_tokens",
            r.recomputed_tokens, "peak_gpu_kv_bytes", r.peak_gpu_kv_bytes, "peak_cpu_kv_bytes",
            r.peak_cpu_kv_bytes, "attention_recall_mean", r.recall_mean, "attention_recall_min",
            r.recall_min, "gpu_kv_capacity_bytes", r.gpu_kv_capacity_bytes,
            "cpu_kv_capacity_bytes", r.cpu_kv_capacity_bytes, "events", (json_int_t)r.events,
            "trace_streams", r.trace_streams);
        json_object_set_new(root, "software", json_string(cfg.sw ? cfg.sw->name : "none"));
        json_object_set_new(root, "host_s", json_real(r.host_s));
        json_object_set_new(root, "relay_s", json_real(r.relay_s));
        json_object_set_new(root, "preemptions", json_integer(r.preemptions));
        json_object_set_new(root, "cpu_attention_s", json_real(r.cpu_attention_s));
        json_object_set_new(root, "extended_steps", json_integer(r.extended_steps));
        json_object_set_new(root, "mean_batch", json_real(r.mean_batch));
        json_object_set_new(root, "decode_steps", json_integer(r.decode_steps));
        json_object_set_new(root, "oom_reason", r.oom ? json_string(r.oom_reason) : json_null());
        json_object_set_new(root, "phase2_step", r.phase2_step >= 0 ? json_integer(r.phase2_step) : json_null());
        json_object_set_new(root, "selection_params", cli_knobs_json(cfg.sel, &cfg.sel_params));
        json_object_set_new(root, "phase3_step", r.phase3_step >= 0 ? json_integer(r.phase3_step) : json_null());
        if (r.flexgen)
            json_object_set_new(root, "flexgen_policy", json_pack(
                "{s:f, s:i, s:i, s:f, s:s, s:f}", "weights_gpu_percent", 100 * r.policy.w_gpu,
                "gpu_batch_size", r.gpu_batch_size, "num_gpu_batches",
                r.gpu_batch_size ? cfg.batch / r.gpu_batch_size : 0,
                "cache_gpu_percent", 100 * r.policy.cache_gpu, "source",
                cfg.percent_given ? "given" : cfg.system->flexgen_policy == SIM_FLEXGEN_LP ? "lp"
                                                                                        : "default",
                "lp_layer_ns", r.flexgen_lp_layer_ns));
        if (r.scheduled) {
            const struct alisa_schedule *q = &r.schedule;
            json_object_set_new(root, "schedule", json_pack(
                "{s:f, s:f, s:i, s:i, s:s, s:b, s:f, s:f, s:f, s:f, s:f, s:f}", "alpha", q->alpha,
                "beta", q->beta, "p1", q->p1, "p2", q->p2, "source", cfg.schedule_given ? "given" :
                cfg.search_sim ? "sim" : cfg.search_grid ? "grid" : "greedy", "feasible", q->feasible, "search_decode_s",
                q->total_ns * 1e-9, "search_transfer_s", q->transfer_ns * 1e-9,
                "search_recompute_s", q->recompute_ns * 1e-9, "search_loads", q->loads,
                "search_recomputes", q->recomputes, "search_bytes_h2d", q->bytes_h2d));
        }
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
        printf("\n");
        json_decref(root);
    } else {
        printf("%s on %s, batch %u, %u + %u tokens, system %s (selection %s, placement %s, %s KV)\n",
               cfg.model->name, cfg.hw->name, cfg.batch, cfg.prompt_len, cfg.gen_len,
               cfg.system->name, cfg.sel->name, cfg.place->name,
               cfg.precision == KV_INT8 ? "INT8" : "FP16");
        if (r.oom) {
            /* a failure, not figures: --json (and sweeps) record it as a result */
            err_set(&e, ALISA_ENOMEM, "out of memory: %s (--json reports it as a result)",
                    r.oom_reason);
            catalog_deinit(&c);
            return cli_fail(&e);
        } else {
            printf("throughput   %10.1f tokens/s   total %.3f s (prefill %.3f s)\n",
                   r.throughput_tok_s, r.total_s, r.prefill_s);
            printf("time         compute %.3f s, recompute %.3f s, transfer %.3f s (link busy), "
                   "CPU attention %.3f s, GPU stall %.3f s\n", r.compute_s, r.recompute_s,
                   r.transfer_s, r.cpu_attention_s, r.stall_s);
            if (cfg.sw)
                printf("host         software %s: %.3f s waiting for launches (%.0f us a layer), "
                       "%.3f s staging pageable KV\n", cfg.sw->name, r.host_s,
                       cost_layer_host_ns(cfg.sw, cfg.sel->name) * 1e-3, r.relay_s);
            printf("traffic      %.3f GB host->GPU, %.3f GB GPU->host; %.0f tokens recomputed\n",
                   r.bytes_h2d / 1e9, r.bytes_d2h / 1e9, r.recomputed_tokens);
            printf("KV           GPU peak %.2f of %.2f GB, CPU peak %.2f of %.2f GB; GPU hit rate "
                   "%.4f\n", r.peak_gpu_kv_bytes / 1e9, r.gpu_kv_capacity_bytes / 1e9,
                   r.peak_cpu_kv_bytes / 1e9, r.cpu_kv_capacity_bytes / 1e9, r.gpu_hit_rate);
            char p2[32] = "never", p3[32] = "never";
            if (r.phase2_step >= 0)
                snprintf(p2, sizeof p2, "from step %lld", (long long)r.phase2_step);
            if (r.phase3_step >= 0)
                snprintf(p3, sizeof p3, "from step %lld", (long long)r.phase3_step);
            printf("phases       II (KV offloaded) %s, III (KV dropped) %s\n", p2, p3);
            if (r.flexgen)
                printf("policy       FlexGen --percent %.0f %.0f %.4g %.4g (%s; KV split by whole "
                       "sequences), --gpu-batch-size %u --num-gpu-batches %u\n",
                       100 * r.policy.w_gpu, 100 - 100 * r.policy.w_gpu, 100 * r.policy.cache_gpu,
                       100 - 100 * r.policy.cache_gpu,
                       cfg.percent_given ? "given" : cfg.system->flexgen_policy == SIM_FLEXGEN_LP
                                                        ? "its LP's choice"
                                                        : "its default",
                       r.gpu_batch_size, r.gpu_batch_size ? cfg.batch / r.gpu_batch_size : 0);
            if (r.scheduled) {
                const struct alisa_schedule *q = &r.schedule;
                char s1[32] = "never", s2[32] = "never";
                if (q->p1 < cfg.gen_len)
                    snprintf(s1, sizeof s1, "%u", q->p1);
                if (q->p2 < cfg.gen_len)
                    snprintf(s2, sizeof s2, "%u", q->p2);
                printf("schedule     alpha %.3f, beta %.3f, p1 %s, p2 %s (%s); the search prices "
                       "the decode at %.3f s, simulated %.3f s\n", q->alpha, q->beta, s1, s2,
                       cfg.schedule_given ? "given"
                       : cfg.search_sim   ? "simulated search"
                       : cfg.search_grid  ? "grid search"
                                          : "greedy search",
                       q->total_ns * 1e-9, r.total_s - r.prefill_s);
            }
            printf("selection    attention recall mean %.4f, worst %.4f\n", r.recall_mean,
                   r.recall_min);
            if (r.extended_steps)
                printf("extended     the last %u decode steps use synthetic rows (--extend)\n",
                       r.extended_steps);
            if (cfg.system->block_tokens)
                printf("vllm         %u preemptions, mean running batch %.1f over %u steps\n",
                       r.preemptions, r.mean_batch, r.decode_steps);
        }
    }
    catalog_deinit(&c);
    return 0;
}
