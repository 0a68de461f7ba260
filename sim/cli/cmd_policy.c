/* `alisa policy list`: every selection and placement policy with its
 * parameters, straight from the ops tables (a selection's own, its declared
 * knobs), so the list cannot go stale.
 */
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "placement.h"
#include "selection.h"

void cmd_policy_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa policy list\n"
            "\n"
            "Lists the selection policies (which tokens each layer attends: sparsity) and\n"
            "the placement policies (where each token's KV lives: GPU, CPU, dropped) with\n"
            "their parameters. Any selection combines with any placement. Policies marked\n"
            "OFFLINE BOUND read the future selection sequence (from the trace): they are\n"
            "bounds to compare against, not policies a real system could run.\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa policy list\n");
}

int cmd_policy(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        cmd_policy_usage(stdout);
        return 0;
    }
    if (argc < 2)
        return cli_usage_error(cmd_policy_usage, "missing policy command");
    if (argc > 2 || strcmp(argv[1], "list") != 0)
        return cli_usage_error(cmd_policy_usage, "unknown policy command '%s'", argv[argc - 1]);
    printf("selection policies (budget B: --sparsity S gives B = 2*round(n*(1-S)/2) of n "
           "tokens; --budget-tokens fixes B):\n");
    for (size_t i = 0; selection_policies[i]; i++) {
        const struct selection_ops *s = selection_policies[i];
        printf("  %-10s %s\n  %-10s   params: %s", s->name, s->summary, "",
               s->budgeted ? "--sparsity | --budget-tokens" : "none");
        for (uint32_t k = 0; k < s->n_knobs; k++)
            printf(", --%s %s (%s; default: %s)", s->knobs[k].name, s->knobs[k].whole ? "N" : "X",
                   s->knobs[k].help, s->knobs[k].def);
        printf("\n");
    }
    printf("\nplacement policies (capacities: --gpu-kv-bytes, --cpu-kv-bytes):\n");
    for (size_t i = 0; placement_policies[i]; i++)
        printf("  %-15s %s\n  %-15s   params: %s\n", placement_policies[i]->name,
               placement_policies[i]->summary, "", placement_policies[i]->params);
    return 0;
}
