/* `alisa trace fit`: the generator fitted to recorded traces (tracefit.h),
 * its statistics beside the recording's, the parameters written for
 * `alisa trace gen --params`. A thin shell: parses, calls, prints.
 */
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "outfile.h"
#include "progress.h"
#include "trace_params.h"
#include "tracefit.h"

/* What alisa trace fit is asked; defaults in trace_fit_cmd's initializer. */
struct fit_opts {
    struct tracefit_options fit;
    const char *out;
    int json;
};

#define FO(f) offsetof(struct fit_opts, f)
static const struct cli_opt fit_own_opts[] = {
    {"output", "F", CLI_STR, FO(out), NULL, 1,
     "parameters file to write (alisa trace gen --params F)", 'o'},
    {"sim-layers", "N", CLI_U32, FO(fit.sim_layers), NULL, 0,
     "layers of each simulated trace (default 8; the profile\n"
     "is sampled at their depths)", 0},
    {"sim-seqs", "N", CLI_U32, FO(fit.sim_seqs), NULL, 0,
     "its sequences (default 1, at most 64)", 0},
    {"seed", "N", CLI_U64, FO(fit.seed), NULL, 0,
     "its seed (default 1)", 0},
    {"max-iter", "N", CLI_U32, FO(fit.max_iter), NULL, 0,
     "simplex iterations (default 150)", 0},
    {"json", NULL, CLI_FLAG, FO(json), NULL, 0,
     "print JSON instead of the table", 0},
    {0}};
static const struct cli_group fit_groups[] = {{fit_own_opts, 0}};
static const struct cli_command_opts fit_command = {fit_groups, 1, 0, 1};
#undef FO

static void trace_fit_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa trace fit RECORDED... -o PARAMS.ini [options]\n"
            "\n"
            "Fits the synthetic generator (alisa trace gen) to recorded traces, so that a\n"
            "trace generated at any catalog shape behaves like the recorded attention:\n"
            "  - the per-layer sparsity (share of weights below 1%% of the row max) becomes\n"
            "    the generator's profile by depth, and the rows' spread about their\n"
            "    layer's mean its jitter;\n"
            "  - sink-logit, recency-logit, recency-tokens, noise and hh-drift are found by\n"
            "    simulated moments: traces generated at the recorded lengths (fixed seed)\n"
            "    are summarised as the recorded ones are, and a Nelder-Mead simplex (GSL)\n"
            "    minimises the squared relative distance of the statistics: under SWA at\n"
            "    80%% the picks kept 1 and 32 steps later, their median age, their shares\n"
            "    in the oldest half and among the first %d tokens; and a decode row's mass\n"
            "    on those tokens, on its last 8 and on its last 64.\n"
            "Prints each statistic recorded, under the generator's defaults and fitted.\n"
            "Traces fitted together must have one layer count; the target is their mean.\n"
            "\n",
            TRACEFIT_SINKS);
    cli_opts_help(out, &fit_command, 21);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace fit traces/stories260K-tinystories.trace --max-iter 3 -o fit.ini\n");
}

static void fit_progress(void *ctx, uint32_t iter, uint32_t max_iter, double objective)
{
    (void)objective;
    progress_set(ctx, iter);
    (void)max_iter;
}

static void print_table(const struct tracefit_result *r)
{
    printf("%-22s %10s %10s %10s\n", "statistic", "recorded", "defaults", "fitted");
    for (int k = 0; k < TRACEFIT_N; k++)
        printf("%-22s %10.3f %10.3f %10.3f\n", tracefit_moment_name[k], r->target.m[k],
               r->start.m[k], r->fitted.m[k]);
    printf("%-22s %10s %10.3f %10.3f\n", "distance", "", r->objective_start, r->objective);
    const struct trace_gen_params *p = &r->p;
    printf("mass on tokens 0-%d: recorded", TRACEFIT_SINKS - 1);
    for (int t = 0; t < TRACEFIT_SINKS; t++)
        printf(" %.3f", r->target.token_mass[t]);
    printf(", fitted");
    for (int t = 0; t < TRACEFIT_SINKS; t++)
        printf(" %.3f", r->fitted.token_mass[t]);
    printf(" (sinks %u)\n", r->p.n_sinks);
    printf("fitted in %u iterations: sink-logit %.3g, recency-logit %.3g, recency-tokens %.3g, "
           "noise %.3g, hh-drift %.3g, sparsity-jitter %.3g; profile over %u layers, %.3f to "
           "%.3f\n", r->iterations, p->sink_logit, p->recency_logit, p->recency_tokens, p->noise,
           p->hh_drift, p->sparsity_jitter, p->n_profile, p->profile[0],
           p->profile[p->n_profile - 1]);
}

static json_t *summary_json(const struct tracefit_summary *s)
{
    json_t *o = json_object();
    for (int k = 0; k < TRACEFIT_N; k++)
        json_object_set_new(o, tracefit_moment_name[k], json_real(s->m[k]));
    return o;
}

static json_t *result_json(const struct tracefit_result *r)
{
    const struct trace_gen_params *p = &r->p;
    json_t *profile = json_array();
    for (uint32_t k = 0; k < p->n_profile; k++)
        json_array_append_new(profile, json_real(p->profile[k]));
    return json_pack("{s:o, s:o, s:o, s:f, s:f, s:i, s:{s:f, s:f, s:f, s:f, s:f, s:f, s:o}}",
                     "recorded", summary_json(&r->target), "defaults", summary_json(&r->start),
                     "fitted", summary_json(&r->fitted), "distance_defaults", r->objective_start,
                     "distance", r->objective, "iterations", (int)r->iterations, "params",
                     "sink_logit", p->sink_logit, "recency_logit", p->recency_logit,
                     "recency_tokens", p->recency_tokens, "noise", p->noise, "hh_drift",
                     p->hh_drift, "sparsity_jitter", p->sparsity_jitter, "sparsity_profile",
                     profile);
}

int trace_fit_cmd(int argc, char **argv)
{
    struct fit_opts fo = {0};
    tracefit_defaults(&fo.fit);
    int next = 0;
    int req = cli_opts_parse(argc, argv, &fit_command, &fo, NULL, trace_fit_usage, &next);
    if (req)
        return req;
    struct tracefit_options o = fo.fit;
    const char *out = fo.out;
    const int json = fo.json, optind = next;
    struct alisa_err e = {{0}};
    if (optind >= argc)
        return cli_usage_error(trace_fit_usage, "missing RECORDED trace");
    if (!o.sim_layers || !o.sim_seqs || !o.max_iter)
        return cli_usage_error(trace_fit_usage, "--sim-layers, --sim-seqs and --max-iter must "
                               "be positive");
    char part[4200]; /* opened first: a bad -o is said before minutes of fitting */
    FILE *f = outfile_open(out, part, sizeof part, "parameters", &e);
    if (!f)
        return cli_fail(&e);
    struct progress pg;
    progress_start(&pg, "trace fit", "iterations", o.max_iter, 0);
    o.progress = fit_progress;
    o.progress_ctx = &pg;
    struct tracefit_result r;
    int rc = tracefit_fit((const char *const *)argv + optind, (uint32_t)(argc - optind), &o, &r,
                          &e);
    progress_end(&pg);
    if (rc) {
        struct alisa_err ignored = {{0}};
        outfile_close(f, part, out, rc, &ignored); /* removes the part */
        return cli_fail(&e);
    }
    fprintf(f, "# alisa trace fit: the generator fitted to");
    for (int i = optind; i < argc; i++)
        fprintf(f, " %s", argv[i]);
    fprintf(f, "\n# (alisa trace gen --params this file). Statistic, recorded, fitted:\n");
    for (int k = 0; k < TRACEFIT_N; k++)
        fprintf(f, "#   %-22s %.3f %.3f\n", tracefit_moment_name[k], r.target.m[k],
                r.fitted.m[k]);
    int failed = trace_params_write(f, &r.p, r.target.model, r.target.model_params);
    if (outfile_close(f, part, out, failed, &e))
        return cli_fail(&e);
    if (json) {
        json_t *root = result_json(&r);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        printf("\n");
        json_decref(root);
    } else {
        print_table(&r);
    }
    fprintf(stderr, "alisa: wrote %s\n", out);
    return 0;
}
