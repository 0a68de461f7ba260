/* The alisa binary: git-style dispatch to subcommands.
 *
 * Owns the command table, `alisa help`, and the exit-code convention (0 ok,
 * 1 failure, 2 usage). It knows the executor's commands (exec/cli/) only by
 * their prototypes in cmds.h, never by an executor header. Each subcommand parses its own
 * options with getopt_long and prints its own --help.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmds.h"
#include "names.h"

static int cmd_help(int argc, char **argv);
static void cmd_help_usage(FILE *out);

static const struct cli_cmd commands[] = {
    {"help", "show the commands, or one command's help", cmd_help, cmd_help_usage},
    {"version", "print the version, build options and accelerator found", cmd_version,
     cmd_version_usage},
    {"catalog", "list model shapes and hardware profiles", cmd_catalog, cmd_catalog_usage},
    {"trace", "inspect, validate, generate and dump attention traces", cmd_trace,
     cmd_trace_usage},
    {"policy", "list the selection and placement policies and their parameters", cmd_policy,
     cmd_policy_usage},
    {"plan", "replay a trace through the scheduler: per-step decisions and bytes moved",
     cmd_plan, cmd_plan_usage},
    {"fidelity", "how close a selection's attention stays to dense on a trace (Fig. 4)",
     cmd_fidelity, cmd_fidelity_usage},
    {"sim", "simulate a batched decode of a model on a machine under a system, from a trace",
     cmd_sim, cmd_sim_usage},
    {"serve", "simulate serving a stream of arriving requests with continuous batching",
     cmd_serve, cmd_serve_usage},
    {"serve-run", "serve a stream of arriving requests on the executor, measuring latencies",
     cmd_serve_run, cmd_serve_run_usage},
    {"search", "choose ALISA's alpha, beta, p1, p2 offline: greedy and exhaustive grid",
     cmd_search, cmd_search_usage},
    {"run", "generate text with a real model on the executor (CPU, or a GPU)", cmd_run, cmd_run_usage},
    {"eval", "perplexity of a text under a real model on the executor", cmd_eval, cmd_eval_usage},
    {"record", "record real attention from a model on text into a trace", cmd_record,
     cmd_record_usage},
    {"calibrate", "measure this machine (CPU, or a GPU) as the executor uses it: a profile",
     cmd_calibrate, cmd_calibrate_usage},
    {"validate", "the simulator's predicted decode time against the executor's, measured",
     cmd_validate, cmd_validate_usage},
    {"validate-external", "the simulator against published throughput of real systems",
     cmd_external, cmd_external_usage},
    {"model", "inspect a GGUF model file: metadata, tokenizer, tensors", cmd_model,
     cmd_model_usage},
    {"sweep", "run every point of a sweep spec into a SQLite results database", cmd_sweep,
     cmd_sweep_usage},
    {"db", "merge results databases and export query results as CSV", cmd_db, cmd_db_usage},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void main_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa <command> [options]\n"
            "\n"
            "alisa: sparsity-aware KV caching (ALISA, ISCA 2024) as a trace-driven\n"
            "simulator plus a reference executor.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-17s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'alisa <command> --help' explains a command and all its options.\n");
}

static const struct cli_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void cmd_help_usage(FILE *out)
{
    fprintf(out, "usage: alisa help [COMMAND]\n\nWithout COMMAND, lists the commands; with "
                 "one, prints its help.\n");
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        main_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        cmd_help_usage(stdout);
        return 0;
    }
    const struct cli_cmd *c = find_command(argv[1]);
    if (!c)
        return cli_usage_error(main_usage, "unknown command '%s'", argv[1]);
    c->usage(stdout);
    return 0;
}

int cli_run_command(int argc, char **argv)
{
    if (argc < 1)
        return cli_usage_error(main_usage, "missing command");
    if (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        main_usage(stdout);
        return 0;
    }
    cli_set_command("");
    /* the spelling every other tool takes */
    const struct cli_cmd *c = find_command(strcmp(argv[0], "--version") == 0 ? "version" : argv[0]);
    if (!c) {
        const char *names[sizeof commands / sizeof commands[0]];
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            names[i] = commands[i].name;
        const char *near = names_nearest(argv[0], names, sizeof commands / sizeof commands[0]);
        if (near)
            return cli_usage_error(main_usage, "unknown command '%s'; did you mean '%s'?", argv[0],
                                   near);
        return cli_usage_error(main_usage, "unknown command '%s'", argv[0]);
    }
    cli_set_command(c->name);
    int rc = c->run(argc, argv);
    return rc == CLI_HELP_SHOWN ? 0 : rc;
}

/* OpenMP (libgomp) and OpenBLAS read how their idle threads wait when they
 * load, before main: by default they spin, and on a machine whose cores are
 * busy with other work a spinning thread holds the core its partner needs
 * (issue 41: stories260K decoded at 12 tok/s beside two busy loops against
 * 5,000 with passive waiting). So alisa sets OMP_WAIT_POLICY=PASSIVE and
 * OPENBLAS_THREAD_TIMEOUT=4 (the shortest spin OpenBLAS allows) where the
 * user has not, and runs itself again once to have them read;
 * ALISA_WAIT_SET names what it set, so a peer's benchmark started by a
 * sweep gets the environment the user gave (sim/cli/cmd_sweep.c).
 * ALISA_WAIT=spin asks for the other trade on a machine of one's own:
 * OMP_WAIT_POLICY=ACTIVE, whose threads meet at each parallel region
 * without a sleeping thread's wake-up (on this project's 2-CPU VM, quiet:
 * SmolLM2 decodes 2.6x as fast at batch 1, 2.8x at batch 8; beside two busy
 * loops it collapses: experiments/cpu-speed.md). Returns 0, or 2 after one
 * line naming a bad ALISA_WAIT. */
static int wait_policy(char **argv)
{
    static const char *const passive[][2] = {{"OMP_WAIT_POLICY", "PASSIVE"},
                                             {"OPENBLAS_THREAD_TIMEOUT", "4"},
                                             {NULL, NULL}};
    static const char *const spin[][2] = {{"OMP_WAIT_POLICY", "ACTIVE"}, {NULL, NULL}};
    const char *w = getenv("ALISA_WAIT");
    int spinning = w && strcmp(w, "spin") == 0;
    if (w && *w && !spinning && strcmp(w, "passive") != 0) {
        fprintf(stderr, "alisa: error: ALISA_WAIT: '%s': expected passive (the default) or "
                        "spin\n", w);
        return 2;
    }
    if (getenv("ALISA_WAIT_SET"))
        return 0; /* the second start, or a user who asked for none */
    const char *const(*vars)[2] = spinning ? spin : passive;
    char set[128] = "";
    for (size_t i = 0; vars[i][0]; i++)
        if (!getenv(vars[i][0]) && setenv(vars[i][0], vars[i][1], 1) == 0)
            snprintf(set + strlen(set), sizeof set - strlen(set), "%s%s", set[0] ? " " : "",
                     vars[i][0]);
    if (!set[0] || setenv("ALISA_WAIT_SET", set, 1) != 0)
        return 0;
    execv("/proc/self/exe", argv);
    return 0; /* no exec: run on with the libraries' defaults */
}

int main(int argc, char **argv)
{
    int rc = wait_policy(argv);
    return rc ? rc : cli_run_command(argc - 1, argv + 1);
}
