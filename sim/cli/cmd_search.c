/* `alisa search`: ALISA's offline schedule search (alpha, beta, p1, p2) for a
 * model, hardware profile and workload; prints the paper's greedy choice and
 * the exhaustive grid's, with their modelled times.
 */
#include <jansson.h>
#include <stddef.h>
#include <string.h>

#include "alisa_search.h"
#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "simulate.h"

struct search_opts {
    const char *model, *hw, *dir, *profile, *software;
    struct search_workload w;
    uint32_t grid;
    int json;
};

/* prefetch (1) or none (0) */
static int read_overlap(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    if (strcmp(arg, "prefetch") != 0 && strcmp(arg, "none") != 0)
        return err_set(e, ALISA_EINVAL, "%s %s: expected prefetch or none", opt, arg);
    *(int *)field = strcmp(arg, "prefetch") == 0;
    return 0;
}

#define SO(f) offsetof(struct search_opts, f)
static const struct cli_opt search_own_opts[] = {
    {"model", "NAME", CLI_STR, SO(model), NULL, 1, "model shape (alisa catalog models)", 0},
    {"hardware", "NAME", CLI_STR, SO(hw), NULL, 1, "hardware profile (alisa catalog hardware)", 0},
    {"batch", "B", CLI_U32, SO(w.batch), NULL, 1, "sequences decoded together", 0},
    {"prompt-len", "S", CLI_U32, SO(w.prompt_len), NULL, 0, "prompt tokens (default 128)", 0},
    {"gen-len", "N", CLI_U32, SO(w.gen_len), NULL, 0, "generated tokens (default 512)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_opt search_run_opts[] = {
    {"kv-int8", NULL, CLI_FN, SO(w.precision), cli_read_kv_int8, 0, "INT8 KV", 0},
    {"grid", "G", CLI_U32, SO(grid), NULL, 0,
     "grid resolution: alpha, beta in steps of 1/G, p1, p2 in steps\n"
     "of gen-len/G (default 20)", 0},
    {"overlap", "MODE", CLI_FN, SO(w.overlap), read_overlap, 0,
     "prefetch (default, as alisa sim --system alisa: a step lasts\n"
     "the larger of the GPU's work and the link's) or none (the\n"
     "paper's sum Tc + Tm + Tr)", 0},
    {"software", "NAME", CLI_STR, SO(software), NULL, 0,
     "host costs (alisa catalog software): Tc_j is at least the\n"
     "layers' launches on the host, and loads from a pageable\n"
     "CPU cache are staged by the host first (default alisa, as\n"
     "alisa sim --system alisa; alisa-pinned: no staging; none:\n"
     "neither priced)", 0},
    {"json", NULL, CLI_FLAG, SO(json), NULL, 0, "print JSON", 0},
    {"catalog", "DIR", CLI_STR, SO(dir), NULL, 0, "catalog directory", 0},
    {"profile", "FILE", CLI_STR, SO(profile), NULL, 0,
     "hardware profiles added to the catalog (alisa calibrate)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group search_groups[] = {
    {search_own_opts, 0}, {cli_budget_opts, SO(w.sel)}, {search_run_opts, 0}};
static const struct cli_command_opts search_command = {search_groups, 3, 0, 0};

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
            "\n");
    cli_opts_help(out, &search_command, 22);
    fprintf(out, "\n"
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
    struct search_opts o = {.dir = catalog_default_dir(), .grid = 20,
                            .w = {.prompt_len = 128, .gen_len = 512, .sel = {.sparsity = 0.8},
                                  .overlap = 1}};
    int req = cli_opts_parse(argc, argv, &search_command, &o, NULL, cmd_search_usage, NULL);
    if (req)
        return req;
    struct search_workload w = o.w;
    const char *model = o.model, *hw_name = o.hw, *dir = o.dir, *profile = o.profile;
    const char *software = o.software;
    uint32_t grid = o.grid;
    int json = o.json;
    struct alisa_err e = {{0}};
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
