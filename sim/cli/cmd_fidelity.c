/* `alisa fidelity`: the paper's Fig. 4 statistic on a recorded trace, per
 * layer: Spearman rank correlation between a selection policy's average
 * attention distribution and the dense one, and the attention mass the
 * selection keeps. A shell over fidelity.h: options, printing.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "fidelity.h"

void cmd_fidelity_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa fidelity --trace FILE --selection NAME [options]\n"
            "\n"
            "Replays every decode row of a recorded trace under a selection policy and\n"
            "compares the policy's attention with the dense attention the trace recorded\n"
            "(the paper's Fig. 4). At each step the policy's attention is the dense row\n"
            "restricted to the attended tokens and renormalised (what a softmax over the\n"
            "attended set gives). Per layer, both are averaged per token position over the\n"
            "decode steps that see it (all sequences together); printed are the Spearman\n"
            "rank correlation of the two averages (GSL) and the mean dense attention mass\n"
            "on the attended tokens. Placement plays no part.\n"
            "\n"
            "  --trace FILE          recorded trace (required)\n"
            "  --selection NAME      selection policy (required; alisa policy list)\n"
            "  --sparsity S          KV sparsity: share of the context not attended (default 0.8)\n"
            "  --budget-tokens N     attend N tokens per step instead (overrides --sparsity)\n"
            );
    cli_knobs_help(out, 24);
    fprintf(out,
            "  --json                print JSON: the options, decode_steps, attended_share,\n"
            "                        spearman_mean, mass_kept_mean, and per layer spearman,\n"
            "                        mass_kept, positions\n"
            "  -h, --help            this text\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa fidelity --trace traces/stories260K-tinystories.trace --selection swa\n");
}

int cmd_fidelity(int argc, char **argv)
{
    enum { O_TRACE = 1000, O_SEL, O_SPARSITY, O_BUDGET, O_JSON };
    static const struct option base[] = {
        {"trace", required_argument, 0, O_TRACE},     {"selection", required_argument, 0, O_SEL},
        {"sparsity", required_argument, 0, O_SPARSITY}, {"budget-tokens", required_argument, 0, O_BUDGET},
        {"json", no_argument, 0, O_JSON},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    struct option opts[CLI_OPTS_MAX];
    cli_join_knobs(opts, CLI_OPTS_MAX, base);
    cli_list_options(opts);
    struct cli_knobs knobs = {0};
    const char *trace = NULL, *sel_name = NULL;
    struct sel_params sp = {.sparsity = 0.8};
    int json = 0, bad = 0, ch;
    struct alisa_err e = {{0}};
    cli_reset_getopt();
    int li = -1;
    while (!bad && (ch = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        const char *opt = cli_opt_name(opts, li, ch, argv[optind - 1]);
        li = -1;
        switch (ch) {
        case O_TRACE: trace = optarg; break;
        case O_SEL: sel_name = optarg; break;
        case O_JSON: json = 1; break;
        case O_SPARSITY: bad = cli_parse_double(opt, optarg, &sp.sparsity, &e); break;
        case O_BUDGET: bad = cli_parse_u32(opt, optarg, &sp.budget_tokens, &e); break;
        default: {
            int k = cli_knob_take(&knobs, ch, opt, optarg, &e);
            if (!k)
                return cli_option_end(ch, opt, cmd_fidelity_usage);
            bad = k < 0;
        }
        }
    }
    if (bad)
        return cli_usage_error(cmd_fidelity_usage, "%s", e.msg);
    if (optind < argc)
        return cli_usage_error(cmd_fidelity_usage, "unexpected argument '%s'", argv[optind]);
    int req = cli_require(2, "--trace", trace != NULL, "--selection", sel_name != NULL);
    if (req)
        return req;
    const struct selection_ops *sel = selection_find(sel_name);
    if (!sel)
        return cli_unknown_policy(cmd_fidelity_usage, "--selection", sel_name);
    if (cli_knobs_apply(&knobs, sel, &sp, &e))
        return cli_usage_error(cmd_fidelity_usage, "%s", e.msg);
    struct fidelity_result r;
    if (fidelity_trace(trace, sel, &sp, &r, &e))
        return cli_fail(&e);
    double rho = 0, mass = 0;
    for (uint32_t l = 0; l < r.n_layers; l++) {
        rho += r.layers[l].spearman / r.n_layers;
        mass += r.layers[l].mass_kept / r.n_layers;
    }
    if (json) {
        json_t *layers = json_array();
        for (uint32_t l = 0; l < r.n_layers; l++)
            json_array_append_new(layers, json_pack("{s:i, s:f, s:f, s:i}", "layer", l,
                                                    "spearman", r.layers[l].spearman,
                                                    "mass_kept", r.layers[l].mass_kept,
                                                    "positions", r.layers[l].positions));
        json_t *root = json_pack("{s:s, s:s, s:f, s:i, s:I, s:f, s:f, s:f, s:o}", "trace", trace,
                                 "selection", sel->name, "sparsity", sp.sparsity,
                                 "budget_tokens", sp.budget_tokens, "decode_steps",
                                 (json_int_t)r.decode_steps, "attended_share", r.attended_share,
                                 "spearman_mean", rho, "mass_kept_mean", mass, "layers", layers);
        if (!root || json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6))) {
            json_decref(root);
            fidelity_result_free(&r);
            err_set(&e, ALISA_EINVAL, "%s: the result could not be written as JSON (a value "
                    "that is not a finite number?)", trace);
            return cli_fail(&e);
        }
        printf("\n");
        json_decref(root);
    } else {
        printf("%s under %s", trace, sel->name);
        if (sp.budget_tokens)
            printf(" (budget %u tokens)", sp.budget_tokens);
        else
            printf(" (sparsity %g)", sp.sparsity);
        printf(": %llu decode stream-steps, %.1f%% of the context attended\n",
               (unsigned long long)r.decode_steps, 100.0 * r.attended_share);
        printf("layer  spearman  mass kept  positions\n");
        for (uint32_t l = 0; l < r.n_layers; l++)
            printf("%5u  %8.4f  %9.4f  %9u\n", l, r.layers[l].spearman, r.layers[l].mass_kept,
                   r.layers[l].positions);
        printf(" mean  %8.4f  %9.4f\n", rho, mass);
    }
    fidelity_result_free(&r);
    return 0;
}
