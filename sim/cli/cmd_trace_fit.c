/* `alisa trace fit`: the generator fitted to recorded traces (tracefit.h),
 * its statistics beside the recording's, the parameters written for
 * `alisa trace gen --params`. A thin shell: parses, calls, prints.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "outfile.h"
#include "progress.h"
#include "trace_params.h"
#include "tracefit.h"

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
            "\n"
            "  -o, --output F     parameters file to write (alisa trace gen --params F)\n"
            "  --sim-layers N     layers of each simulated trace (default 8; the profile\n"
            "                     is sampled at their depths)\n"
            "  --sim-seqs N       its sequences (default 1)\n"
            "  --seed N           its seed (default 1)\n"
            "  --max-iter N       simplex iterations (default 150)\n"
            "  --json             print JSON instead of the table\n"
            "  -h, --help         this text\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace fit traces/stories260K-tinystories.trace --max-iter 3 -o fit.ini\n",
            TRACEFIT_SINKS);
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
    enum { O_LAYERS = 1000, O_SEQS, O_SEED, O_ITER, O_JSON };
    static const struct option opts[] = {{"sim-layers", required_argument, 0, O_LAYERS},
                                         {"sim-seqs", required_argument, 0, O_SEQS},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"max-iter", required_argument, 0, O_ITER},
                                         {"json", no_argument, 0, O_JSON},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_list_options(opts);
    struct tracefit_options o;
    tracefit_defaults(&o);
    const char *out = NULL;
    int json = 0, bad = 0;
    struct alisa_err e = {{0}};
    cli_reset_getopt();
    int ch, li = -1;
    while (!bad && (ch = getopt_long(argc, argv, ":ho:", opts, &li)) != -1) {
        const char *opt = cli_opt_name(opts, li, ch, argv[optind - 1]);
        li = -1;
        switch (ch) {
        case O_LAYERS: bad = cli_parse_u32(opt, optarg, &o.sim_layers, &e); break;
        case O_SEQS: bad = cli_parse_u32(opt, optarg, &o.sim_seqs, &e); break;
        case O_SEED: bad = cli_parse_u64(opt, optarg, &o.seed, &e); break;
        case O_ITER: bad = cli_parse_u32(opt, optarg, &o.max_iter, &e); break;
        case O_JSON: json = 1; break;
        case 'o': out = optarg; break;
        default: return cli_option_end(ch, opt, trace_fit_usage);
        }
    }
    if (bad)
        return cli_usage_error(trace_fit_usage, "%s", e.msg);
    if (optind >= argc)
        return cli_usage_error(trace_fit_usage, "missing RECORDED trace");
    if (!out)
        return cli_usage_error(trace_fit_usage, "-o PARAMS.ini is required");
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
