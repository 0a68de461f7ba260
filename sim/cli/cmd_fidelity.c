/* `alisa fidelity`: the paper's Fig. 4 statistic on a recorded trace, per
 * layer: Spearman rank correlation between a selection policy's average
 * attention distribution and the dense one, and the attention mass the
 * selection keeps. A shell over fidelity.h: options, printing.
 */
#include <stddef.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "fidelity.h"

/* What alisa fidelity is asked; defaults in cmd_fidelity's initializer. */
struct fidelity_opts {
    const char *trace, *sel;
    struct sel_params sp;
    int json;
};

#define FO(f) offsetof(struct fidelity_opts, f)
static const struct cli_opt fidelity_own_opts[] = {
    {"trace", "FILE", CLI_STR, FO(trace), NULL, 1, "recorded trace (required)", 0},
    {"selection", "NAME", CLI_STR, FO(sel), NULL, 1,
     "selection policy (required; alisa policy list)", 0},
    {"json", NULL, CLI_FLAG, FO(json), NULL, 0,
     "print JSON: the options, decode_steps, attended_share,\n"
     "spearman_mean, mass_kept_mean, and per layer spearman,\n"
     "mass_kept, positions", 0},
    {0}};
static const struct cli_group fidelity_groups[] = {{fidelity_own_opts, 0},
                                                   {cli_budget_opts, FO(sp)}};
static const struct cli_command_opts fidelity_command = {fidelity_groups, 2, 1, 0};
#undef FO

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
            "\n");
    cli_opts_help(out, &fidelity_command, 24);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa fidelity --trace traces/stories260K-tinystories.trace --selection swa\n");
}

int cmd_fidelity(int argc, char **argv)
{
    struct fidelity_opts o = {.sp = {.sparsity = SEL_SPARSITY_DEFAULT}};
    struct cli_knobs knobs = {0};
    struct alisa_err e = {{0}};
    int rc = cli_opts_parse(argc, argv, &fidelity_command, &o, &knobs, cmd_fidelity_usage, NULL);
    if (rc)
        return rc;
    const char *trace = o.trace;
    struct sel_params sp = o.sp;
    const int json = o.json;
    const struct selection_ops *sel = selection_find(o.sel);
    if (!sel)
        return cli_unknown_policy(cmd_fidelity_usage, "--selection", o.sel);
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
