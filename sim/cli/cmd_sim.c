/* `alisa sim`: the discrete-event simulator from the command line. A thin
 * shell over simulate.h: option parsing, catalog look-ups, printing.
 */
#include <stddef.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "outfile.h"
#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "simulate.h"

/* What alisa sim is asked: the simulator's configuration and the names
 * the catalog resolves. Its defaults are sim_defaults's. */
struct sim_opts {
    struct sim_config cfg;
    const char *model, *hw, *system, *sel, *place, *timeline, *dir, *profile, *software, *rule;
    uint64_t gpu_mem, cpu_mem; /* 0: the profile's */
    int json, int8, int4;
};

static int read_overlap(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    static const char *const modes[] = {[SIM_OVERLAP_SYSTEM] = "system",
                                        [SIM_OVERLAP_PREFETCH] = "prefetch",
                                        [SIM_OVERLAP_NONE] = "none"};
    for (int i = 0; i < 3; i++)
        if (strcmp(arg, modes[i]) == 0)
            return *(int *)field = i, 0;
    return err_set(e, ALISA_EINVAL, "%s %s: expected system, prefetch or none", opt, arg);
}

/* --search into the configuration's search_grid and search_sim */
static int read_search(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    struct sim_config *cfg = field;
    cfg->search_sim = cfg->search_grid = 0;
    if (strcmp(arg, "greedy") == 0)
        return 0;
    if (strcmp(arg, "sim") == 0)
        return cfg->search_sim = 4, 0;
    if (strcmp(arg, "grid") == 0)
        return cfg->search_grid = 10, 0;
    int sim = strncmp(arg, "sim:", 4) == 0, grid = strncmp(arg, "grid:", 5) == 0;
    uint32_t *g = sim ? &cfg->search_sim : &cfg->search_grid, max = sim ? 16 : 64;
    if (!sim && !grid)
        return err_set(e, ALISA_EINVAL, "%s %s: expected greedy, grid, grid:G, sim or sim:G", opt,
                       arg);
    if (cli_parse_u32(opt, arg + (sim ? 4 : 5), g, e))
        return ALISA_EINVAL;
    if (*g < 1 || *g > max)
        return err_set(e, ALISA_EINVAL, "%s %s: %s 1 to %u %s", opt, arg,
                       sim ? "the simulated search takes" : "the grid is", max,
                       sim ? "steps" : "points");
    return 0;
}

static int read_schedule(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    struct sim_config *cfg = field;
    struct alisa_schedule *q = &cfg->schedule;
    int n = -1;
    cfg->schedule_given = 1;
    if (sscanf(arg, "%lf,%lf,%u,%u%n", &q->alpha, &q->beta, &q->p1, &q->p2, &n) != 4 ||
        n != (int)strlen(arg) || !(q->alpha >= 0 && q->alpha <= 1) ||
        !(q->beta >= 0 && q->beta <= 1) || q->p1 > q->p2)
        return err_set(e, ALISA_EINVAL, "%s %s: expected ALPHA,BETA,P1,P2 with alpha, beta in "
                       "[0, 1] and p1 <= p2 (decode steps)", opt, arg);
    return 0;
}

/* FlexGen's --percent: WG,WC,CG,CC[,HG,HC] (or colons, for sweep specs);
 * activations on the GPU unless given */
static int read_percent(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    struct sim_config *cfg = field;
    double wg = 0, wc = 0, cg = 0, cc = 0, hg = 100, hc = 0;
    int n = -1, got = 0;
    char v[64];
    snprintf(v, sizeof v, "%s", arg);
    for (char *q = v; *q; q++)
        *q = *q == ':' ? ',' : *q;
    if (strlen(arg) < sizeof v) {
        got = sscanf(v, "%lf,%lf,%lf,%lf%n", &wg, &wc, &cg, &cc, &n);
        int m = -1; /* HG,HC after them */
        if (got == 4 && n != (int)strlen(v) && sscanf(v + n, ",%lf,%lf%n", &hg, &hc, &m) == 2 &&
            m > 0)
            n += m;
    }
    if (got != 4 || n != (int)strlen(v) ||
        !(wg >= 0 && wc >= 0 && cg >= 0 && cc >= 0 && hg >= 0 && hc >= 0) ||
        fabs(wg + wc - 100) > 1e-9 || fabs(cg + cc - 100) > 1e-9 || fabs(hg + hc - 100) > 1e-9)
        return err_set(e, ALISA_EINVAL, "%s %s: expected WG,WC,CG,CC[,HG,HC] percentages with "
                       "WG + WC = CG + CC = HG + HC = 100 (disk is not modelled)", opt, arg);
    cfg->percent_given = 1;
    cfg->percent = (struct flexgen_policy){wg / 100, cg / 100};
    cfg->percent_act_cpu = hc / 100;
    return 0;
}

static int read_positive_u32(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    if (cli_parse_u32(opt, arg, field, e))
        return ALISA_EINVAL;
    return *(uint32_t *)field ? 0 : err_set(e, ALISA_EINVAL, "%s 0: at least 1 sequence", opt);
}

#define SO(f) offsetof(struct sim_opts, f)
static const struct cli_opt sim_workload_opts[] = {
    {"trace", "FILE", CLI_STR, SO(cfg.trace), NULL, 1,
     "attention trace (alisa trace gen / a recorded one)", 0},
    {"model", "NAME", CLI_STR, SO(model), NULL, 1, "model shape (alisa catalog models)", 0},
    {"hardware", "NAME", CLI_STR, SO(hw), NULL, 1, "hardware profile (alisa catalog hardware)", 0},
    {"batch", "B", CLI_U32, SO(cfg.batch), NULL, 1, "sequences decoded together", 0},
    {"prompt-len", "S", CLI_U32, SO(cfg.prompt_len), NULL, 0, "prompt tokens (default 128)", 0},
    {"gen-len", "N", CLI_U32, SO(cfg.gen_len), NULL, 0, "generated tokens (default 512)", 0},
    {"system", "NAME", CLI_STR, SO(system), NULL, 1, "preset (below)", 0},
    {0}};

static const struct cli_opt sim_run_opts[] = {
    {"selection", "NAME", CLI_STR, SO(sel), NULL, 0,
     "override the system's selection (alisa policy list)", 0},
    {"placement", "NAME", CLI_STR, SO(place), NULL, 0,
     "override the system's placement (alisa policy list)", 0},
    {"kv-int8", NULL, CLI_FLAG, SO(int8), NULL, 0, "INT8 KV", 0},
    {"kv-int4", NULL, CLI_FLAG, SO(int4), NULL, 0,
     "FlexGen's 4-bit KV (its compress-cache: groups of 64\n"
     "channels with an FP16 minimum and scale, decompressed on the\n"
     "GPU before attention); datasheet profiles only", 0},
    {"gpu-mem", "BYTES", CLI_FN, SO(gpu_mem), cli_read_memory, 0,
     "GPU memory, > 0 (default: the profile's)", 0},
    {"cpu-mem", "BYTES", CLI_FN, SO(cpu_mem), cli_read_memory, 0,
     "host memory for KV, > 0 (default: the profile's)", 0},
    {"timeline", "FILE", CLI_STR, SO(timeline), NULL, 0,
     "per-step CSV: end time, compute, recompute, transfer, KV per tier", 0},
    {"overlap", "MODE", CLI_FN, SO(cfg.overlap), read_overlap, 0,
     "how a layer's host-device copies overlap compute: system\n"
     "(default: the system's, below), prefetch (the next layer's\n"
     "copies beside this layer's compute, FlexGen's loop) or none\n"
     "(each layer's copies wait for the previous layer's compute,\n"
     "Accelerate's hooks); for sensitivity studies", 0},
    {"search", "MODE", CLI_FN, SO(cfg), read_search, 0,
     "placement alisa's schedule search: greedy (the paper's rule,\n"
     "default), grid[:G] (exhaustive over the search's prices, alpha,\n"
     "beta in steps of 1/G, p1, p2 in steps of gen-len/G; G default\n"
     "10) or sim[:G] (candidates simulated, the fastest run kept:\n"
     "greedy's, grid's, and greedy's alpha and p1 with beta in 1/G\n"
     "steps and p2 at G + 1 points from p1, or never; G default 4)", 0},
    {"schedule", "A,B,P1,P2", CLI_FN, SO(cfg), read_schedule, 0,
     "run this schedule instead of searching: alpha, beta in\n"
     "[0, 1], p1 <= p2 decode steps (gen-len = never)", 0},
    {"flexgen-percent", "WG,WC,CG,CC[,HG,HC]", CLI_FN, SO(cfg), read_percent, 0,
     "FlexGen's --percent (or with colons):\n"
     "weights on the GPU and CPU, KV on the GPU and CPU, and\n"
     "optionally the activations (default 100,0: the prefill's\n"
     "are held on the GPU), each pair summing to 100 (no disk);\n"
     "replaces the flexgen systems' LP policy", 0},
    {"software", "NAME", CLI_STR, SO(software), NULL, 0,
     "the host costs priced (alisa catalog software): a decode\n"
     "layer lasts at least its launches on the host, and FlexGen's\n"
     "pageable KV is staged into pinned memory before each copy;\n"
     "default: the system's (below), none: no host costs", 0},
    {"rule", "NAME", CLI_STR, SO(rule), NULL, 0,
     "price by a rule's profiles (alisa catalog): the hardware's\n"
     "HW-NAME (required) and the software's SW-NAME where the\n"
     "catalog has one; h100: our H100's measured figures (on\n"
     "H100-80GB all of them, on the T4 and A6000 its shares;\n"
     "hardware.ini), peak: datasheet peaks (T4, A6000)", 0},
    {"flexgen-gpu-batch", "G", CLI_FN, SO(cfg.flexgen_gpu_batch), read_positive_u32, 0,
     "FlexGen's gpu_batch_size, dividing --batch (the quotient\n"
     "its num_gpu_batches): each layer computed and launched once\n"
     "per GPU batch (default: the whole batch, one GPU batch)", 0},
    {"extend", NULL, CLI_FLAG, SO(cfg.extend), NULL, 0,
     "continue a trace with fewer than --gen-len generated tokens\n"
     "with synthetic rows (alisa trace gen's model, each trace layer's\n"
     "target its measured mean sparsity; the importance of the\n"
     "trace's tokens is drawn afresh, not inferred)", 0},
    {"per-head", NULL, CLI_FLAG, SO(cfg.per_head), NULL, 0,
     "select and place per (token, KV head): one stream per KV\n"
     "head, on the trace's per-head rows (alisa record --per-head),\n"
     "each query group's mean row driving its KV head; ALISA's\n"
     "schedule search still reads the head-mean picks (default:\n"
     "per token, on the head-mean row)", 0},
    {"json", NULL, CLI_FLAG, SO(json), NULL, 0, "print JSON", 0},
    {"catalog", "DIR", CLI_STR, SO(dir), NULL, 0, "catalog directory", 0},
    {"profile", "FILE", CLI_STR, SO(profile), NULL, 0,
     "hardware profiles added to the catalog (alisa calibrate)", 0},
    {0}};

static const struct cli_group sim_groups[] = {
    {sim_workload_opts, 0}, {cli_budget_opts, SO(cfg.sel_params)}, {sim_run_opts, 0}};
static const struct cli_command_opts sim_command = {sim_groups, 3, 1, 0};
#undef SO

void cmd_sim_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa sim --trace FILE --model NAME --hardware NAME --batch B --system NAME\n"
            "                 [options]\n"
            "\n"
            "Simulates a batched decode of a catalog model on a hardware profile under a\n"
            "system, with the attention of a recorded or synthetic trace, and reports\n"
            "throughput, time split into compute / transfer / recompute / stall and the\n"
            "part that dominates the decode (for a stall, what the GPU waits on), bytes moved\n"
            "over the link and read from GPU memory (weights, KV),\n"
            "KV per tier, GPU hit rate, recomputed tokens, phase switches and the share of\n"
            "the trace's attention mass the selection kept; for an online cache placement\n"
            "the same run under the offline bounds (belady, oracle-cost) beside it.\n"
            "Model layer l replays trace layer floor(l * trace_layers / model_layers); batch\n"
            "slot i replays trace sequence i mod sequences. The trace's prompt length must\n"
            "equal --prompt-len and it must hold at least --gen-len generated tokens.\n"
            "\n");
    cli_opts_help(out, &sim_command, 22);
    fprintf(out, "\nsystems:\n");
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

/* The options parsed and checked against each other and the registries
 * (the catalog's names are checked when it is loaded). 0, CLI_HELP_SHOWN
 * or a usage error's code. */
static int sim_parse(int argc, char **argv, struct sim_opts *o)
{
    struct cli_knobs knobs = {0};
    struct alisa_err e = {{0}};
    struct sim_config *cfg = &o->cfg;
    int rc = cli_opts_parse(argc, argv, &sim_command, o, &knobs, cmd_sim_usage, NULL);
    if (rc)
        return rc;
    if (o->int8 && o->int4)
        return cli_usage_error(cmd_sim_usage, "--kv-int8 and --kv-int4: one precision");
    cfg->precision = o->int8 ? KV_INT8 : o->int4 ? KV_INT4 : KV_FP16;
    if (!cfg->batch || cfg->batch > CLI_MAX_BATCH)
        return cli_usage_error(cmd_sim_usage, "--batch %u: expected 1..%u sequences", cfg->batch,
                               CLI_MAX_BATCH);
    if (!(cfg->system = sim_system_find(o->system))) {
        const char *names[64];
        size_t n = 0;
        for (; sim_systems[n].name && n < 64; n++)
            names[n] = sim_systems[n].name;
        return cli_unknown_name(cmd_sim_usage, "--system", o->system, names, n, NULL);
    }
    if (cfg->flexgen_gpu_batch && cfg->batch % cfg->flexgen_gpu_batch)
        return cli_usage_error(cmd_sim_usage, "--flexgen-gpu-batch %u: does not divide --batch %u",
                               cfg->flexgen_gpu_batch, cfg->batch);
    if (cfg->flexgen_gpu_batch && !cfg->system->flexgen_policy)
        return cli_usage_error(cmd_sim_usage, "--flexgen-gpu-batch: system %s is not FlexGen's "
                               "(flexgen, flexgen-copy, flexgen-default)", o->system);
    if (o->sel && !(cfg->sel = selection_find(o->sel)))
        return cli_unknown_policy(cmd_sim_usage, "--selection", o->sel);
    if (o->place && !(cfg->place = placement_find(o->place)))
        return cli_unknown_policy(cmd_sim_usage, "--placement", o->place);
    /* the selection's own parameters, the system's selection where none is
     * given */
    const struct selection_ops *run_sel = cfg->sel ? cfg->sel : selection_find(cfg->system->selection);
    ALISA_ASSERT(run_sel);
    if (cli_knobs_apply(&knobs, run_sel, &cfg->sel_params, &e))
        return cli_usage_error(cmd_sim_usage, "%s", e.msg);
    if (cfg->schedule_given && cfg->schedule.p2 > cfg->gen_len)
        return cli_usage_error(cmd_sim_usage, "--schedule: p2 %u is past --gen-len %u (gen-len "
                               "means never)", cfg->schedule.p2, cfg->gen_len);
    cfg->gpu_mem_bytes = (double)o->gpu_mem;
    cfg->cpu_mem_bytes = (double)o->cpu_mem;
    return 0;
}

/* The catalog's model, hardware and software for o, then the run (its
 * timeline written whole or not at all). 0 or a status, e set. */
static int sim_execute(struct sim_opts *o, const struct catalog *c, struct sim_result *r,
                       struct alisa_err *e)
{
    struct sim_config *cfg = &o->cfg;
    int rc = 0;
    char hw_rule[300], sw_rule[300];
    const char *hw = o->hw, *sw = o->software, *sw_fallback = cfg->system->software;
    if ((rc = cli_rule_names(c, o->rule, &hw, &sw, &sw_fallback, hw_rule, sw_rule,
                             sizeof hw_rule, e)))
        return rc;
    cfg->model = catalog_model(c, o->model);
    cfg->hw = catalog_hw(c, hw);
    if (!cfg->model)
        rc = catalog_model_not_found(c, "--model", o->model, e);
    else if (!cfg->model->available)
        rc = err_set(e, ALISA_ENOTFOUND, "--model %s: unavailable: %s", o->model, cfg->model->note);
    else if ((uint64_t)cfg->prompt_len + cfg->gen_len > cfg->model->max_seq)
        rc = err_set(e, ALISA_EINVAL, "--prompt-len %u + --gen-len %u: %llu tokens, over %s's "
                     "context of %u", cfg->prompt_len, cfg->gen_len,
                     (unsigned long long)cfg->prompt_len + cfg->gen_len, o->model,
                     cfg->model->max_seq);
    else if (!cfg->hw)
        rc = catalog_hw_not_found(c, "--hardware", o->hw, e);
    else if (!(rc = cli_software(c, sw, sw_fallback, &cfg->sw, e)))
        rc = sim_resolve(cfg, e);
    FILE *tl = NULL;
    char part[1100];
    if (!rc && o->timeline && !(tl = outfile_open(o->timeline, part, sizeof part, "timeline", e)))
        rc = ALISA_EIO;
    if (!rc)
        rc = sim_run(cfg, r, tl, e);
    if (tl) { /* whole or not at all; a text run out of memory fails (sim_report_text) */
        int oom_fails = !rc && r->oom && !o->json;
        int closed = outfile_close(tl, part, o->timeline, rc ? rc : oom_fails ? ALISA_ENOMEM : 0,
                                   e);
        if (!oom_fails)
            rc = closed;
    }
    return rc;
}

/* What the better of the two bounds saves on total_s, at least 0 (neither
 * bound minimises time: either may be slower than the run). */
static double optimum_saving_s(const struct sim_optimum *opt, double total_s)
{
    double best = opt->oracle_total_s < opt->belady_total_s ? opt->oracle_total_s
                                                            : opt->belady_total_s;
    return total_s > best ? total_s - best : 0;
}

/* Where most of the decode went (issue 45, item 3): the largest of the GPU's
 * work on weights, its work on KV, recomputation, host work and the GPU's
 * stall (these add up to the decode), into *s; for a stall, *waiting names
 * the busiest of what the GPU waits on (the link up, the link down, the
 * CPU's attention), else NULL. Returns the category's name. */
static const char *sim_dominant(const struct sim_result *r, double *s, const char **waiting)
{
    const struct { const char *name; double s; } c[] = {
        {"compute on weights", r->compute_weights_s},
        {"compute on KV", r->compute_s - r->compute_weights_s},
        {"recompute", r->recompute_s},
        {"host", r->host_s},
        {"GPU stall", r->stall_s},
    };
    size_t best = 0;
    for (size_t i = 1; i < sizeof c / sizeof c[0]; i++)
        if (c[i].s > c[best].s)
            best = i;
    *s = c[best].s;
    *waiting = NULL;
    if (best == 4) {
        double up = r->transfer_h2d_s, down = r->transfer_d2h_s, cpu = r->cpu_attention_s;
        *waiting = cpu >= up && cpu >= down ? "CPU attention" : up >= down ? "link up" : "link down";
    }
    return c[best].name;
}

static void sim_report_json(const struct sim_opts *o, const struct sim_result *res,
                            const struct sim_optimum *opt)
{
    const struct sim_config *cfg = &o->cfg;
    const struct sim_result r = *res;
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:s, s:b, s:f, s:f, s:f, s:f, "
        "s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:i}",
        "trace", cfg->trace, "model", cfg->model->name, "hardware", cfg->hw->name, "system",
        cfg->system->name, "selection", cfg->sel->name, "placement", cfg->place->name, "batch",
        cfg->batch, "prompt_len", cfg->prompt_len, "gen_len", cfg->gen_len, "sparsity",
        cfg->sel_params.sparsity, "kv_precision", kv_precision_name(cfg->precision),
        "oom", r.oom, "throughput_tok_s", r.throughput_tok_s, "total_s", r.total_s,
        "prefill_s", r.prefill_s, "compute_s", r.compute_s, "transfer_s", r.transfer_s,
        "recompute_s", r.recompute_s, "stall_s", r.stall_s, "bytes_h2d", r.bytes_h2d,
        "bytes_d2h", r.bytes_d2h, "gpu_hit_rate", r.gpu_hit_rate, "recomputed_tokens",
        r.recomputed_tokens, "peak_gpu_kv_bytes", r.peak_gpu_kv_bytes, "peak_cpu_kv_bytes",
        r.peak_cpu_kv_bytes, "attention_recall_mean", r.recall_mean, "attention_recall_min",
        r.recall_min, "gpu_kv_capacity_bytes", r.gpu_kv_capacity_bytes,
        "cpu_kv_capacity_bytes", r.cpu_kv_capacity_bytes, "events", (json_int_t)r.events,
        "trace_streams", r.trace_streams);
    json_object_set_new(root, "software", json_string(cfg->sw ? cfg->sw->name : "none"));
    json_object_set_new(root, "compute_weights_s", json_real(r.compute_weights_s));
    json_object_set_new(root, "compute_kv_s", json_real(r.compute_s - r.compute_weights_s));
    json_object_set_new(root, "hbm_weight_bytes", json_real(r.hbm_weight_bytes));
    json_object_set_new(root, "hbm_kv_bytes", json_real(r.hbm_kv_bytes));
    json_object_set_new(root, "transfer_h2d_s", json_real(r.transfer_h2d_s));
    json_object_set_new(root, "transfer_d2h_s", json_real(r.transfer_d2h_s));
    json_object_set_new(root, "host_s", json_real(r.host_s));
    json_object_set_new(root, "relay_s", json_real(r.relay_s));
    json_object_set_new(root, "estimate_s", json_real(r.estimate_s));
    json_object_set_new(root, "gather_s", json_real(r.gather_s));
    json_object_set_new(root, "estimate_gpu_bytes", json_real(r.estimate_gpu_bytes));
    double dom_s;
    const char *waiting;
    json_object_set_new(root, "dominant", json_string(sim_dominant(&r, &dom_s, &waiting)));
    json_object_set_new(root, "dominant_s", json_real(dom_s));
    json_object_set_new(root, "dominant_waiting", waiting ? json_string(waiting) : json_null());
    json_object_set_new(root, "preemptions", json_integer(r.preemptions));
    json_object_set_new(root, "cpu_attention_s", json_real(r.cpu_attention_s));
    json_object_set_new(root, "extended_steps", json_integer(r.extended_steps));
    json_object_set_new(root, "per_head", json_boolean(cfg->per_head));
    cli_head_recall_json(root, r.head_recall_mean, r.head_recall_min);
    json_object_set_new(root, "mean_batch", json_real(r.mean_batch));
    json_object_set_new(root, "decode_steps", json_integer(r.decode_steps));
    json_object_set_new(root, "oom_reason", r.oom ? json_string(r.oom_reason) : json_null());
    json_object_set_new(root, "phase2_step", r.phase2_step >= 0 ? json_integer(r.phase2_step) : json_null());
    json_object_set_new(root, "selection_params", cli_knobs_json(cfg->sel, &cfg->sel_params));
    json_object_set_new(root, "phase3_step", r.phase3_step >= 0 ? json_integer(r.phase3_step) : json_null());
    if (r.flexgen)
        json_object_set_new(root, "flexgen_policy", json_pack(
            "{s:f, s:i, s:i, s:f, s:s, s:f}", "weights_gpu_percent", 100 * r.policy.w_gpu,
            "gpu_batch_size", r.gpu_batch_size, "num_gpu_batches",
            r.gpu_batch_size ? cfg->batch / r.gpu_batch_size : 0,
            "cache_gpu_percent", 100 * r.policy.cache_gpu, "source",
            cfg->percent_given ? "given" : cfg->system->flexgen_policy == SIM_FLEXGEN_LP ? "lp"
                                                                                    : "default",
            "lp_layer_ns", r.flexgen_lp_layer_ns));
    if (r.scheduled) {
        const struct alisa_schedule *q = &r.schedule;
        json_object_set_new(root, "schedule", json_pack(
            "{s:f, s:f, s:i, s:i, s:s, s:b, s:f, s:f, s:f, s:f, s:f, s:f}", "alpha", q->alpha,
            "beta", q->beta, "p1", q->p1, "p2", q->p2, "source", cfg->schedule_given ? "given" :
            cfg->search_sim ? "sim" : cfg->search_grid ? "grid" : "greedy", "feasible", q->feasible, "search_decode_s",
            q->total_ns * 1e-9, "search_transfer_s", q->transfer_ns * 1e-9,
            "search_recompute_s", q->recompute_ns * 1e-9, "search_loads", q->loads,
            "search_recomputes", q->recomputes, "search_bytes_h2d", q->bytes_h2d));
    }
    json_object_set_new(root, "optimum",
                        !opt->compared || opt->oom || r.oom
                            ? json_null()
                            : json_pack("{s:f, s:f, s:f, s:f, s:f}", "belady_total_s",
                                        opt->belady_total_s, "belady_transfer_s",
                                        opt->belady_transfer_s, "oracle_cost_total_s",
                                        opt->oracle_total_s, "oracle_cost_transfer_s",
                                        opt->oracle_transfer_s, "removable_s",
                                        optimum_saving_s(opt, r.total_s)));
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    printf("\n");
    json_decref(root);
}

/* The run in words; a run out of memory is a failure here (--json
 * reports it as a result). 0 or CLI_EXIT_FAIL. */
static int sim_report_text(const struct sim_opts *o, const struct sim_result *res,
                           const struct sim_optimum *opt)
{
    const struct sim_config *cfg = &o->cfg;
    const struct sim_result r = *res;
    struct alisa_err e = {{0}};
    printf("%s on %s, batch %u, %u + %u tokens, system %s (selection %s, placement %s, %s KV)\n",
           cfg->model->name, cfg->hw->name, cfg->batch, cfg->prompt_len, cfg->gen_len,
           cfg->system->name, cfg->sel->name, cfg->place->name,
           cfg->precision == KV_INT8 ? "INT8" : cfg->precision == KV_INT4 ? "INT4" : "FP16");
    if (r.oom) {
        /* a failure, not figures: --json (and sweeps) record it as a result */
        err_set(&e, ALISA_ENOMEM, "out of memory: %s (--json reports it as a result)",
                r.oom_reason);
        return cli_fail(&e);
    }
    printf("throughput   %10.1f tokens/s   total %.3f s (prefill %.3f s)\n",
           r.throughput_tok_s, r.total_s, r.prefill_s);
    printf("time         compute %.3f s (weights %.3f, KV %.3f), recompute %.3f s, transfer "
           "%.3f s (link busy: up %.3f, down %.3f), CPU attention %.3f s, GPU stall %.3f s\n",
           r.compute_s, r.compute_weights_s, r.compute_s - r.compute_weights_s, r.recompute_s,
           r.transfer_s, r.transfer_h2d_s, r.transfer_d2h_s, r.cpu_attention_s, r.stall_s);
    if (cfg->sw)
        printf("host         software %s: %.3f s waiting for launches (%.0f us a layer), "
               "%.3f s staging pageable KV\n", cfg->sw->name, r.host_s,
               cost_layer_host_ns(cfg->sw, cfg->sel->name) * 1e-3, r.relay_s);
    double dom_s, decode_s = r.total_s - r.prefill_s;
    const char *waiting, *dom = sim_dominant(&r, &dom_s, &waiting);
    printf("dominant     %s %.3f s (%.0f%% of the decode)%s%s\n", dom, dom_s,
           decode_s > 0 ? 100 * dom_s / decode_s : 0, waiting ? ", waiting on the " : "",
           waiting ? waiting : "");
    struct sel_estimate est;
    sel_estimate_of(cfg->sel, &cfg->sel_params, &est);
    if (est.kind != SEL_ESTIMATE_EXACT)
        printf("estimate     %s --%s, priced as its runtime computes it (the trace's exact "
               "row selects): %.3f s on the GPU (in compute), %.3f s gathering on the host (in "
               "transfer), %.2f GB of GPU memory beside the KV\n", cfg->sel->name,
               est.knob, r.estimate_s, r.gather_s, r.estimate_gpu_bytes / 1e9);
    printf("traffic      %.3f GB host->GPU, %.3f GB GPU->host; %.0f tokens recomputed\n",
           r.bytes_h2d / 1e9, r.bytes_d2h / 1e9, r.recomputed_tokens);
    printf("GPU memory   the decode reads %.3f GB of weights and %.3f GB of KV (the CPU's "
           "attention not included)\n", r.hbm_weight_bytes / 1e9, r.hbm_kv_bytes / 1e9);
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
               cfg->percent_given ? "given" : cfg->system->flexgen_policy == SIM_FLEXGEN_LP
                                                ? "its LP's choice"
                                                : "its default",
               r.gpu_batch_size, r.gpu_batch_size ? cfg->batch / r.gpu_batch_size : 0);
    if (r.scheduled) {
        const struct alisa_schedule *q = &r.schedule;
        char s1[32] = "never", s2[32] = "never";
        if (q->p1 < cfg->gen_len)
            snprintf(s1, sizeof s1, "%u", q->p1);
        if (q->p2 < cfg->gen_len)
            snprintf(s2, sizeof s2, "%u", q->p2);
        printf("schedule     alpha %.3f, beta %.3f, p1 %s, p2 %s (%s); the search prices "
               "the decode at %.3f s, simulated %.3f s\n", q->alpha, q->beta, s1, s2,
               cfg->schedule_given ? "given"
               : cfg->search_sim   ? "simulated search"
               : cfg->search_grid  ? "grid search"
                                  : "greedy search",
               q->total_ns * 1e-9, r.total_s - r.prefill_s);
    }
    printf("selection    attention recall mean %.4f, worst %.4f", r.recall_mean, r.recall_min);
    if (!isnan(r.head_recall_mean))
        printf("; per KV head mean %.4f, worst %.4f", r.head_recall_mean, r.head_recall_min);
    printf("%s\n", cfg->per_head ? " (selected per KV head)" : "");
    if (r.extended_steps)
        printf("extended     the last %u decode steps use synthetic rows (--extend)\n",
               r.extended_steps);
    if (cfg->system->block_tokens)
        printf("vllm         %u preemptions, mean running batch %.1f over %u steps\n",
               r.preemptions, r.mean_batch, r.decode_steps);
    if (opt->compared && !opt->oom)
        printf("optimum      belady %.3f s (transfer %.3f s), oracle-cost %.3f s (%.3f s): a "
               "better placement could save %.3f s of this run's %.3f\n", opt->belady_total_s,
               opt->belady_transfer_s, opt->oracle_total_s, opt->oracle_transfer_s,
               optimum_saving_s(opt, r.total_s), r.total_s);
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    struct sim_opts o = {.cfg = {.prompt_len = 128, .gen_len = 512,
                                 .sel_params = {.sparsity = SEL_SPARSITY_DEFAULT}},
                         .dir = catalog_default_dir()};
    int rc = sim_parse(argc, argv, &o);
    if (rc)
        return rc;
    struct catalog c;
    struct alisa_err e = {{0}};
    if (cli_catalog_load(&c, o.dir, o.profile, &e))
        return cli_fail(&e);
    struct sim_result r;
    struct sim_optimum opt = {0};
    if (!(rc = sim_execute(&o, &c, &r, &e)) && !r.oom) /* against the offline bounds */
        rc = sim_optimum(&o.cfg, &opt, &e);
    if (rc) {
        catalog_deinit(&c);
        return cli_fail_status(rc, &e);
    }
    if (o.json)
        sim_report_json(&o, &r, &opt);
    else
        rc = sim_report_text(&o, &r, &opt);
    catalog_deinit(&c);
    return rc;
}
