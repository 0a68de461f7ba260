/* `alisa plan`: replays a trace through the scheduler and prints what it
 * decided step by step (attended tokens, tokens per tier, bytes moved,
 * recomputed tokens), the totals, and optionally a decision log.
 *
 * A shell over replay.h: option parsing, catalog look-up, printing. No time
 * model yet; `alisa sim` (issue 5) adds it.
 */
#include <math.h>
#include <stddef.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "planlog.h"
#include "replay.h"

/* What alisa plan is asked; defaults in cmd_plan's initializer. */
struct plan_opts {
    struct replay_config cfg;
    const char *trace, *sel, *place, *hw, *log, *dir, *profile;
    uint32_t every;
    int json;
};

/* FP32 KV is the CPU executor's, so its storage too */
static int read_fp32(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    (void)opt, (void)arg, (void)e;
    ((struct replay_config *)field)->precision = KV_FP32;
    ((struct replay_config *)field)->inputs_outside = 1;
    return 0;
}

static int read_fraction(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    if (cli_parse_double(opt, arg, field, e))
        return ALISA_EINVAL;
    double f = *(double *)field;
    return f <= 1 ? 0 : err_set(e, ALISA_EINVAL, "%s %g is above 1", opt, f);
}

#define PO(f) offsetof(struct plan_opts, f)
static const struct cli_opt plan_trace_opts[] = {
    {"trace", "FILE", CLI_STR, PO(trace), NULL, 1, "trace to replay (required)", 0},
    {"selection", "NAME", CLI_STR, PO(sel), NULL, 0,
     "selection policy (default swa; see alisa policy list)", 0},
    {0}};
static const struct cli_opt plan_tier_opts[] = {
    {"placement", "NAME", CLI_STR, PO(place), NULL, 0,
     "placement policy (default alisa). belady and oracle-cost\n"
     "are OFFLINE BOUNDS: they read the future selection from\n"
     "the trace (a first pass with the same selection)", 0},
    {"gpu-kv-bytes", "N", CLI_BYTES, PO(cfg.gpu_kv_bytes), NULL, 0,
     "GPU KV capacity, bytes (k M G, Ki Mi Gi; default: unlimited)", 0},
    {"cpu-kv-bytes", "N", CLI_BYTES, PO(cfg.cpu_kv_bytes), NULL, 0,
     "CPU KV capacity, bytes (default: unlimited)", 0},
    {"kv-int8", NULL, CLI_FN, PO(cfg.precision), cli_read_kv_int8, 0,
     "INT8 KV (1 byte per value plus per-channel scale and zero\n"
     "point) instead of FP16", 0},
    {"kv-fp32", NULL, CLI_FN, PO(cfg), read_fp32, 0,
     "FP32 KV, stored as the CPU executor stores it (implies\n"
     "--as-executor)", 0},
    {"as-executor", NULL, CLI_FLAG, PO(cfg.inputs_outside), NULL, 0,
     "the executor's storage (costmodel.h, tier_storage): layer\n"
     "inputs beside the host arena and INT8 scales beside the\n"
     "device arena, in neither tier; FP32 inputs unless the KV\n"
     "is FP16. To replay an executor run's decisions exactly:\n"
     "alisa record --kv-int8 ... against alisa plan --kv-int8\n"
     "--as-executor ... (default: the paper's system, section\n"
     "III-C, where both take their tier's bytes)", 0},
    {"hardware", "NAME", CLI_STR, PO(hw), NULL, 0,
     "hardware profile pricing load vs recompute (default\n"
     "H100-80GB; see alisa catalog hardware)", 0},
    {"gpu-fraction", "F", CLI_FN, PO(cfg.gpu_fraction), read_fraction, 0,
     "flexgen-static: share of every token on the GPU (default:\n"
     "the largest that fits)", 0},
    {"per-head", NULL, CLI_FLAG, PO(cfg.per_head), NULL, 0,
     "select and place per (token, KV head): one stream per KV\n"
     "head, on the trace's per-head rows (alisa record --per-head),\n"
     "each query group's mean row driving its KV head; counts are\n"
     "(token, head) units (default: per token, head-mean rows)", 0},
    {"every", "N", CLI_U32, PO(every), NULL, 0,
     "print every N-th position (default 1; 0 = totals only)", 0},
    {"log", "FILE", CLI_STR, PO(log), NULL, 0,
     "write the decision log: one line per stream and step", 0},
    {"json", NULL, CLI_FLAG, PO(json), NULL, 0, "print the configuration and totals as JSON", 0},
    {"catalog", "DIR", CLI_STR, PO(dir), NULL, 0, "catalog directory", 0},
    {"profile", "FILE", CLI_STR, PO(profile), NULL, 0,
     "hardware profiles added to the catalog (alisa calibrate)", 0},
    {0}};
static const struct cli_group plan_groups[] = {
    {plan_trace_opts, 0}, {cli_budget_opts, PO(cfg.sel_params)}, {plan_tier_opts, 0}};
static const struct cli_command_opts plan_command = {plan_groups, 3, 1, 0};
#undef PO

void cmd_plan_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa plan --trace FILE [options]\n"
            "\n"
            "Replays a trace through the scheduler core (the same code the executor runs)\n"
            "and prints, per decode position, totals over all (sequence, layer) streams:\n"
            "tokens attended, tokens per tier after the step (GPU, CPU only, dropped,\n"
            "retired), bytes moved each way, loads, recomputations and GPU misses\n"
            "(attended tokens not on the GPU when the step began); then the run's totals,\n"
            "and for an online cache the same run under the offline bounds (belady's\n"
            "misses, oracle-cost's fetch cost): how much a better placement could save.\n"
            "Capacities are for the whole trace and are split evenly over its streams.\n"
            "\n");
    cli_opts_help(out, &plan_command, 24);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa plan --trace traces/stories260K-tinystories.trace --selection "
            "swa --placement lru --gpu-kv-bytes 300KiB --cpu-kv-bytes 1MiB\n");
}

/* Decision log (planlog.h): one deterministic line per plan, for diffs
 * between runs and against the executor. */
struct plan_log {
    FILE *f;
};

static void log_plan(void *user, const struct scheduler_plan *p, uint32_t seq, uint32_t layer,
                     const float *row)
{
    (void)row;
    planlog_write(((struct plan_log *)user)->f, p, seq, layer);
}

/* The hit rate of attended tokens on the GPU tier. Cannot fail. */
static double plan_hit_rate(const struct replay_totals *t)
{
    return t->attended_tokens ? 1.0 - (double)t->gpu_misses / (double)t->attended_tokens : 1.0;
}

/* What the better bound saves on the run's fetch cost, at least 0
 * (oracle-cost is a heuristic where recomputing costs more than loading). */
static double optimum_saving_ns(const struct replay_totals *t, const struct replay_optimum *o)
{
    double best = o->oracle_fetch_ns < o->belady_fetch_ns ? o->oracle_fetch_ns : o->belady_fetch_ns;
    return t->fetch_cost_ns > best ? t->fetch_cost_ns - best : 0;
}

/* The run against the offline bounds, as JSON: null when not compared. */
static json_t *optimum_json(const struct replay_totals *t, const struct replay_optimum *o)
{
    if (!o->compared || o->oom || t->oom)
        return json_null();
    return json_pack("{s:I, s:f, s:f, s:f}", "belady_misses", (json_int_t)o->belady_misses,
                     "belady_fetch_cost_ns", o->belady_fetch_ns, "oracle_cost_fetch_cost_ns",
                     o->oracle_fetch_ns, "removable_fetch_cost_ns", optimum_saving_ns(t, o));
}

static void plan_report_json(const char *trace, const struct replay_config *cfg,
                             const char *hw_name, const struct replay_totals *t,
                             const struct replay_optimum *opt)
{
    double hit = plan_hit_rate(t);
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:f, s:i, s:s, s:s, s:b, s:i, s:i, s:I, s:I, s:f, s:f, s:b, s:I, "
        "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f}",
        "trace", trace, "selection", cfg->sel->name, "placement", cfg->place->name, "sparsity",
        cfg->sel_params.sparsity, "budget_tokens", cfg->sel_params.budget_tokens, "hardware",
        hw_name, "kv_precision", kv_precision_name(cfg->precision),
        "offline_bound", cfg->place->offline, "streams", t->n_streams, "max_len", t->max_len,
        "kv_bytes_per_token_layer", (json_int_t)t->kv_bytes, "act_bytes_per_token_layer",
        (json_int_t)t->act_bytes, "load_ns_per_token", t->load_ns, "recompute_ns_per_token",
        t->recompute_ns, "oom", t->oom, "decode_steps", (json_int_t)t->decode_steps,
        "attended_tokens", (json_int_t)t->attended_tokens, "gpu_misses",
        (json_int_t)t->gpu_misses, "bytes_h2d", (json_int_t)t->bytes_h2d, "bytes_d2h",
        (json_int_t)t->bytes_d2h, "loads", (json_int_t)t->loads, "recomputed_tokens",
        (json_int_t)t->recomputed_tokens, "offloads", (json_int_t)t->offloads, "drops",
        (json_int_t)t->drops, "peak_gpu_bytes", (json_int_t)t->peak_gpu_bytes,
        "peak_cpu_bytes", (json_int_t)t->peak_cpu_bytes, "gpu_hit_rate", hit,
        "attention_recall_mean", t->recall_mean, "attention_recall_min", t->recall_min);
    json_object_set_new(root, "fetch_cost_ns", json_real(t->fetch_cost_ns));
    json_object_set_new(root, "per_head", json_boolean(cfg->per_head));
    cli_head_recall_json(root, t->head_recall_mean, t->head_recall_min);
    json_object_set_new(root, "units_per_token", json_integer(t->heads));
    json_object_set_new(root, "selection_params", cli_knobs_json(cfg->sel, &cfg->sel_params));
    json_object_set_new(root, "gpu_kv_bytes", cfg->gpu_kv_bytes >= UINT64_MAX / 2 ? json_null()
                                              : json_integer((json_int_t)cfg->gpu_kv_bytes));
    json_object_set_new(root, "cpu_kv_bytes", cfg->cpu_kv_bytes >= UINT64_MAX / 2 ? json_null()
                                              : json_integer((json_int_t)cfg->cpu_kv_bytes));
    json_object_set_new(root, "oom_pos", t->oom ? json_integer(t->oom_pos) : json_null());
    json_object_set_new(root, "phase2_pos", t->phase2_pos >= 0 ? json_integer(t->phase2_pos) : json_null());
    json_object_set_new(root, "phase3_pos", t->phase3_pos >= 0 ? json_integer(t->phase3_pos) : json_null());
    json_object_set_new(root, "optimum", optimum_json(t, opt));
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    printf("\n");
    json_decref(root);
}

/* Per position every `every` shown positions (0: none), then the totals. */
static void plan_report_text(const char *trace, const struct replay_config *cfg,
                             const char *hw_name, const struct replay_totals *t, uint32_t every,
                             const struct replay_optimum *opt)
{
    double hit = plan_hit_rate(t);
    if (t->heads > 1)
        printf("plan: %s: %u streams (sequences x layers x %u KV heads), up to %u tokens each; "
               "token counts are (token, head) units\n", trace, t->n_streams, t->heads, t->max_len);
    else
        printf("plan: %s: %u streams (sequences x layers), up to %u tokens each\n", trace,
               t->n_streams, t->max_len);
    printf("selection %s, placement %s%s; KV %s, %llu B per %s per layer\n", cfg->sel->name,
           cfg->place->name, cfg->place->offline ? " (OFFLINE BOUND)" : "",
           kv_precision_name(cfg->precision), (unsigned long long)t->kv_bytes,
           t->heads > 1 ? "(token, KV head)" : "token");
    printf("capacity per stream: GPU %u tokens, CPU %u tokens; cost per token on %s: load %.2f ns, "
           "recompute %.2f ns\n",
           t->gpu_cap_tokens, t->cpu_cap_tokens, hw_name, t->load_ns, t->recompute_ns);
    if (every) {
        printf("%6s %7s %9s %9s %9s %8s %8s %10s %10s %8s %8s %8s\n", "pos", "streams", "attended",
               "gpu", "cpu", "dropped", "retired", "h2d_MB", "d2h_MB", "loads", "recomp", "misses");
        uint32_t shown = 0;
        for (uint32_t pos = 0; pos < t->max_len; pos++) {
            const struct replay_pos *p = &t->per_pos[pos];
            if (!p->streams || (shown++ % every))
                continue;
            printf("%6u %7u %9llu %9llu %9llu %8llu %8llu %10.3f %10.3f %8llu %8llu %8llu\n", pos,
                   p->streams, (unsigned long long)p->attended, (unsigned long long)p->gpu,
                   (unsigned long long)p->cpu, (unsigned long long)p->dropped,
                   (unsigned long long)p->gone, p->bytes_h2d / 1e6, p->bytes_d2h / 1e6,
                   (unsigned long long)p->loads, (unsigned long long)p->recomputed,
                   (unsigned long long)p->misses);
        }
    }
    printf("totals: %llu decode steps, %llu tokens attended, GPU hit rate %.4f (%llu misses)\n",
           (unsigned long long)t->decode_steps, (unsigned long long)t->attended_tokens, hit,
           (unsigned long long)t->gpu_misses);
    printf("        moved %.3f MB host->GPU (%llu loads, %llu recomputed), %.3f MB GPU->host "
           "(%llu offloads), %llu dropped, %llu retired\n",
           t->bytes_h2d / 1e6, (unsigned long long)t->loads, (unsigned long long)t->recomputed_tokens,
           t->bytes_d2h / 1e6, (unsigned long long)t->offloads, (unsigned long long)t->drops,
           (unsigned long long)t->retired);
    printf("        peak KV: GPU %.3f MB, CPU %.3f MB; attention recall mean %.4f, worst %.4f",
           t->peak_gpu_bytes / 1e6, t->peak_cpu_bytes / 1e6, t->recall_mean, t->recall_min);
    if (!isnan(t->head_recall_mean))
        printf("; per KV head mean %.4f, worst %.4f", t->head_recall_mean, t->head_recall_min);
    printf("\n");
    printf("        fetch cost %.3f ms (loads and offloads x %.2f ns, recomputations x %.2f ns)\n",
           t->fetch_cost_ns * 1e-6, t->load_ns, t->recompute_ns);
    if (t->phase2_pos >= 0 || t->phase3_pos >= 0)
        printf("        phase II (first offload) at position %lld, phase III (first drop) at %lld\n",
               (long long)t->phase2_pos, (long long)t->phase3_pos);
    if (opt->compared && !opt->oom) {
        double save = optimum_saving_ns(t, opt);
        printf("optimum: belady %llu misses, fetch cost %.3f ms; oracle-cost %.3f ms: a better "
               "placement could save %.3f ms of this run's %.3f (%.0f%%)\n",
               (unsigned long long)opt->belady_misses, opt->belady_fetch_ns * 1e-6,
               opt->oracle_fetch_ns * 1e-6, save * 1e-6, t->fetch_cost_ns * 1e-6,
               t->fetch_cost_ns > 0 ? 100 * save / t->fetch_cost_ns : 0.0);
    }
}

int cmd_plan(int argc, char **argv)
{
    struct plan_opts o = {.cfg = {.sel_params = {.sparsity = SEL_SPARSITY_DEFAULT},
                                  .gpu_kv_bytes = UINT64_MAX / 2, .cpu_kv_bytes = UINT64_MAX / 2,
                                  .gpu_fraction = -1},
                          .sel = "swa", .place = "alisa", .hw = "H100-80GB",
                          .dir = catalog_default_dir(), .every = 1};
    struct cli_knobs knobs = {0};
    struct alisa_err e = {{0}};
    int rc = cli_opts_parse(argc, argv, &plan_command, &o, &knobs, cmd_plan_usage, NULL);
    if (rc)
        return rc;
    struct replay_config cfg = o.cfg;
    const char *trace = o.trace, *hw_name = o.hw, *log_path = o.log;
    const uint32_t every = o.every;
    const int json = o.json;
    if (!(cfg.sel = selection_find(o.sel)))
        return cli_unknown_policy(cmd_plan_usage, "--selection", o.sel);
    if (!(cfg.place = placement_find(o.place)))
        return cli_unknown_policy(cmd_plan_usage, "--placement", o.place);
    if (cli_knobs_apply(&knobs, cfg.sel, &cfg.sel_params, &e))
        return cli_usage_error(cmd_plan_usage, "%s", e.msg);

    struct catalog c;
    if (cli_catalog_load(&c, o.dir, o.profile, &e))
        return cli_fail(&e);
    const struct hw_profile *hw = catalog_hw(&c, hw_name);
    if (!hw) {
        rc = catalog_hw_not_found(&c, "--hardware", hw_name, &e);
        catalog_deinit(&c);
        return cli_fail_status(rc, &e);
    }
    struct hw_profile hw_copy = *hw;
    catalog_deinit(&c);
    cfg.hw = &hw_copy;

    if (cfg.per_head && log_path)
        return cli_usage_error(cmd_plan_usage, "--log with --per-head: the decision log has a "
                               "line per (sequence, layer) step, not per KV head");
    struct plan_log lg = {0};
    char part[1100];
    if (log_path && !(lg.f = outfile_open(log_path, part, sizeof part, "decision log", &e)))
        return cli_fail(&e);
    struct replay_totals t;
    rc = replay_trace(trace, &cfg, &t, lg.f ? log_plan : NULL, &lg, &e);
    if (lg.f) { /* whole or not at all: a failed replay (or a text one out of memory) leaves
                 * no log */
        int oom_fails = !rc && t.oom && !json;
        int closed = outfile_close(lg.f, part, log_path, rc ? rc : oom_fails ? ALISA_ENOMEM : 0,
                                    &e);
        if (!oom_fails)
            rc = closed;
    }
    /* the same run under the offline bounds: how far from the best */
    struct replay_optimum opt = {0};
    if (!rc && !t.oom)
        rc = replay_optimum(trace, &cfg, &opt, &e);
    if (rc) {
        replay_totals_free(&t);
        return cli_fail(&e);
    }

    if (json) {
        plan_report_json(trace, &cfg, hw_copy.name, &t, &opt);
    } else if (t.oom) { /* a failure, not figures: --json reports it as a result */
        rc = t.oom_cpu
                 ? err_set(&e, ALISA_ENOMEM, "out of memory at position %u: the CPU tier cannot "
                           "hold what the GPU tier gives up, nor its layer inputs "
                           "(--cpu-kv-bytes; --json reports the run up to there)", t.oom_pos)
                 : err_set(&e, ALISA_ENOMEM, "out of memory at position %u: the GPU tier cannot "
                           "hold the step's tokens (--gpu-kv-bytes; --json reports the run up "
                           "to there)", t.oom_pos);
    } else {
        plan_report_text(trace, &cfg, hw_copy.name, &t, every, &opt);
    }
    replay_totals_free(&t);
    return rc ? cli_fail(&e) : 0;
}
