/* `alisa search`: ALISA's offline schedule search (alpha, beta, p1, p2) for a
 * model, hardware profile and workload; prints the paper's greedy choice and
 * the exhaustive grid's, with their modelled times.
 */
#include <getopt.h>
#include <jansson.h>
#include <string.h>

#include "alisa_search.h"
#include "catalog.h"
#include "cli.h"
#include "cmds.h"
#include "simulate.h"

void cmd_search_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa search --model NAME --hardware NAME --batch B [options]\n"
            "\n"
            "Chooses ALISA's three-phase schedule offline: from decode step p1 a share alpha\n"
            "of the KV lives on the CPU, from p2 a share beta of that is deleted and\n"
            "recomputed when selected. Prints the paper's greedy choice (phase II when the\n"
            "GPU cannot hold the step's KV; phase III from the step where recomputing the\n"
            "oldest CPU tokens gets cheaper than loading them, beta by the total time) and\n"
            "the exhaustive grid's best, with the modelled time split into compute,\n"
            "transfer and recompute (roofline terms from the hardware catalog; weights stay\n"
            "on the GPU). Counted in whole tokens per (sequence, layer) stream as placement\n"
            "alisa runs the rule (alisa sim --system alisa runs the greedy schedule,\n"
            "--search grid the grid's); here each step's global tokens are taken as spread\n"
            "evenly over the tokens before the local window (alisa sim places them as its\n"
            "trace's selection does, and prints the search's price beside the simulated).\n"
            "\n"
            "  --model NAME        model shape (alisa catalog models)\n"
            "  --hardware NAME     hardware profile (alisa catalog hardware)\n"
            "  --batch B           sequences decoded together\n"
            "  --prompt-len S      prompt tokens (default 128)\n"
            "  --gen-len N         generated tokens (default 512)\n"
            "  --sparsity S        SWA KV sparsity (default 0.8)\n"
            "  --budget-tokens K   attend K tokens per step instead\n"
            "  --kv-int8           INT8 KV\n"
            "  --grid G            grid resolution: alpha, beta in steps of 1/G, p1, p2 in steps\n"
            "                      of gen-len/G (default 20)\n"
            "  --overlap MODE      prefetch (default, as alisa sim --system alisa: a step lasts\n"
            "                      the larger of the GPU's work and the link's) or none (the\n"
            "                      paper's sum Tc + Tm + Tr)\n"
            "  --software NAME     host costs (alisa catalog software): Tc_j is at least the\n"
            "                      layers' launches on the host, and loads from a pageable\n"
            "                      CPU cache are staged by the host first (default alisa, as\n"
            "                      alisa sim --system alisa; alisa-pinned: no staging; none:\n"
            "                      neither priced)\n"
            "  --json              print JSON\n"
            "  --catalog DIR       catalog directory\n"
            "  --profile FILE      hardware profiles added to the catalog (alisa calibrate)\n"
            "  -h, --help          this text\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa search --model facebook/opt-30b --hardware H100-80GB --batch 64\n");
}

static json_t *schedule_json(const struct alisa_schedule *s, uint32_t batch, uint32_t gen_len)
{
    double tput = s->total_ns > 0 ? (double)batch * gen_len / (s->total_ns * 1e-9) : 0;
    return json_pack("{s:f, s:f, s:i, s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I}",
                     "alpha", s->alpha, "beta", s->beta, "p1", s->p1, "p2", s->p2, "feasible",
                     s->feasible, "total_s", s->total_ns * 1e-9, "compute_s",
                     s->compute_ns * 1e-9, "transfer_s", s->transfer_ns * 1e-9, "recompute_s",
                     s->recompute_ns * 1e-9, "throughput_tok_s", tput, "peak_gpu_bytes",
                     s->peak_gpu_bytes, "peak_cpu_bytes", s->peak_cpu_bytes, "evaluated",
                     (json_int_t)s->evaluated);
}

static void print_schedule(const char *name, const struct alisa_schedule *s, uint32_t batch,
                           uint32_t gen_len)
{
    if (!s->feasible) {
        printf("%-7s infeasible: the weights and KV fit neither tier at some step "
               "(peak GPU %.1f GB)\n", name, s->peak_gpu_bytes / 1e9);
        return;
    }
    char p1[16] = "never", p2[16] = "never";
    if (s->p1 < gen_len)
        snprintf(p1, sizeof p1, "%u", s->p1);
    if (s->p2 < gen_len)
        snprintf(p2, sizeof p2, "%u", s->p2);
    printf("%-7s alpha %.3f  beta %.3f  p1 %5s  p2 %5s  total %8.3f s  (compute %.3f, "
           "transfer %.3f, recompute %.3f)  %8.1f tok/s  [%llu schedule%s]\n",
           name, s->alpha, s->beta, p1, p2, s->total_ns * 1e-9, s->compute_ns * 1e-9,
           s->transfer_ns * 1e-9, s->recompute_ns * 1e-9,
           (double)batch * gen_len / (s->total_ns * 1e-9), (unsigned long long)s->evaluated,
           s->evaluated == 1 ? "" : "s");
}

int cmd_search(int argc, char **argv)
{
    enum { O_MODEL = 1000, O_HW, O_BATCH, O_PROMPT, O_GEN, O_SPARSITY, O_BUDGET, O_INT8, O_GRID,
           O_JSON, O_CATALOG, O_PROFILE, O_SOFTWARE, O_OVERLAP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},     {"hardware", required_argument, 0, O_HW},
        {"batch", required_argument, 0, O_BATCH},     {"prompt-len", required_argument, 0, O_PROMPT},
        {"gen-len", required_argument, 0, O_GEN},     {"sparsity", required_argument, 0, O_SPARSITY},
        {"budget-tokens", required_argument, 0, O_BUDGET}, {"kv-int8", no_argument, 0, O_INT8},
        {"grid", required_argument, 0, O_GRID},       {"json", no_argument, 0, O_JSON},
        {"catalog", required_argument, 0, O_CATALOG},
        {"profile", required_argument, 0, O_PROFILE}, {"software", required_argument, 0, O_SOFTWARE},
        {"overlap", required_argument, 0, O_OVERLAP},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    cli_list_options(opts);
    const char *model = NULL, *hw_name = NULL, *dir = catalog_default_dir(), *profile = NULL;
    const char *software = NULL;
    struct search_workload w = {.prompt_len = 128, .gen_len = 512, .sel = {.sparsity = 0.8},
                                .overlap = 1};
    uint32_t grid = 20;
    int json = 0, bad = 0, batch_given = 0;
    struct alisa_err e = {{0}};
    cli_reset_getopt();
    int ch;
    int li = -1;
    while (!bad && (ch = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        const char *opt = cli_opt_name(opts, li, ch, argv[optind - 1]);
        li = -1;
        switch (ch) {
        case O_MODEL: model = optarg; break;
        case O_HW: hw_name = optarg; break;
        case O_CATALOG: dir = optarg; break;
        case O_PROFILE: profile = optarg; break;
        case O_SOFTWARE: software = optarg; break;
        case O_INT8: w.precision = KV_INT8; break;
        case O_JSON: json = 1; break;
        case O_BATCH: batch_given = 1; bad = cli_parse_u32(opt, optarg, &w.batch, &e); break;
        case O_PROMPT: bad = cli_parse_u32(opt, optarg, &w.prompt_len, &e); break;
        case O_GEN: bad = cli_parse_u32(opt, optarg, &w.gen_len, &e); break;
        case O_SPARSITY: bad = cli_parse_double(opt, optarg, &w.sel.sparsity, &e); break;
        case O_BUDGET: bad = cli_parse_u32(opt, optarg, &w.sel.budget_tokens, &e); break;
        case O_GRID: bad = cli_parse_u32(opt, optarg, &grid, &e); break;
        case O_OVERLAP:
            if (strcmp(optarg, "prefetch") == 0 || strcmp(optarg, "none") == 0)
                w.overlap = strcmp(optarg, "prefetch") == 0;
            else
                bad = err_set(&e, ALISA_EINVAL, "%s %s: expected prefetch or none", opt, optarg);
            break;
        default: return cli_option_end(ch, opt, cmd_search_usage);
        }
    }
    if (bad)
        return cli_usage_error(cmd_search_usage, "%s", e.msg);
    if (optind < argc)
        return cli_usage_error(cmd_search_usage, "unexpected argument '%s'", argv[optind]);
    int req = cli_require(3, "--model", model != NULL, "--hardware", hw_name != NULL, "--batch",
                          w.batch > 0 || batch_given);
    if (req)
        return req;
    if (!w.batch || w.batch > CLI_MAX_BATCH)
        return cli_usage_error(cmd_search_usage, "--batch %u: expected 1..%u sequences", w.batch,
                               CLI_MAX_BATCH);
    if (!w.gen_len)
        return cli_usage_error(cmd_search_usage, "--gen-len 0: at least 1 token");
    if (grid == 0 || grid > 1024)
        return cli_usage_error(cmd_search_usage, "--grid %u: between 1 and 1024 points", grid);
    if (sel_params_validate(&w.sel, &sel_swa_ops, &e))
        return cli_usage_error(cmd_search_usage, "%s", e.msg);
    struct catalog c;
    if (cli_catalog_load(&c, dir, profile, &e))
        return cli_fail(&e);
    int rc = 0;
    w.model = catalog_model(&c, model);
    w.hw = catalog_hw(&c, hw_name);
    if (!w.model)
        rc = catalog_model_not_found(&c, "--model", model, &e);
    else if (!w.model->available)
        rc = err_set(&e, ALISA_ENOTFOUND, "--model %s: unavailable: %s", model, w.model->note);
    else if (!w.hw)
        rc = catalog_hw_not_found(&c, "--hardware", hw_name, &e);
    else if ((uint64_t)w.prompt_len + w.gen_len > w.model->max_seq && w.model->max_seq > 0) {
        /* a bad option value, refused before any work */
        uint32_t max_seq = w.model->max_seq;
        char name[64];
        snprintf(name, sizeof name, "%s", w.model->name);
        catalog_deinit(&c);
        return cli_usage_error(NULL, "--prompt-len %u + --gen-len %u: over %s's context of %u "
                               "tokens", w.prompt_len, w.gen_len, name, max_seq);
    }
    const struct sw_profile *sw = NULL;
    if (!rc && !(rc = cli_software(&c, software, sim_system_find("alisa")->software, &sw, &e))) {
        w.layer_host_ns = cost_layer_host_ns(sw, "swa");
        w.pageable_relay = sw && sw->pageable_relay;
    }
    struct alisa_schedule greedy, best;
    if (!rc)
        rc = alisa_search_greedy(&w, &greedy, &e);
    if (!rc)
        rc = alisa_search_grid(&w, grid, &best, &e);
    if (rc) {
        catalog_deinit(&c);
        return cli_fail_status(rc, &e);
    }
    if (json) {
        json_t *root = json_pack("{s:s, s:s, s:i, s:i, s:i, s:f, s:i, s:s, s:i}", "model",
                                 w.model->name, "hardware", w.hw->name, "batch", w.batch,
                                 "prompt_len", w.prompt_len, "gen_len", w.gen_len, "sparsity",
                                 w.sel.sparsity, "budget_tokens", w.sel.budget_tokens,
                                 "kv_precision", kv_precision_name(w.precision),
                                 "grid", grid);
        json_object_set_new(root, "software", json_string(sw ? sw->name : "none"));
        json_object_set_new(root, "overlap", json_string(w.overlap ? "prefetch" : "none"));
        json_object_set_new(root, "greedy", schedule_json(&greedy, w.batch, w.gen_len));
        json_object_set_new(root, "grid_best", schedule_json(&best, w.batch, w.gen_len));
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
        printf("\n");
        json_decref(root);
    } else {
        printf("%s on %s, batch %u, %u + %u tokens, %s KV, %s, software %s, overlap %s\n",
               w.model->name, w.hw->name, w.batch, w.prompt_len, w.gen_len,
               w.precision == KV_INT8 ? "INT8" : "FP16",
               w.sel.budget_tokens ? "token budget" : "SWA sparsity", sw ? sw->name : "none",
               w.overlap ? "prefetch" : "none");
        print_schedule("greedy", &greedy, w.batch, w.gen_len);
        print_schedule("grid", &best, w.batch, w.gen_len);
    }
    catalog_deinit(&c);
    return 0;
}
