/* Declared options (issue 40, item 4): a command's options as tables, each
 * entry a name, the value's placeholder, where the value goes and how it is
 * read, whether it is required, and its help. One table drives the parser
 * (getopt_long underneath), the --help text and ALISA_LIST_OPTIONS, so the
 * three cannot drift; shared groups (the selection's budget, below) are
 * written once and joined by every command that takes them. Defaults live
 * in one place: the command's initializer of its options struct.
 *
 * Does not check what depends on several options or on a catalog: the
 * command does that after parsing.
 */
#ifndef ALISA_CLI_OPTS_H
#define ALISA_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

#include "cli.h"
#include "err.h"

enum cli_type {
    CLI_FLAG,   /* int, set to 1 */
    CLI_STR,    /* const char *, the argument itself */
    CLI_U32,    /* uint32_t (cli_parse_u32) */
    CLI_U64,    /* uint64_t (cli_parse_u64) */
    CLI_DOUBLE, /* double (cli_parse_double) */
    CLI_BYTES,  /* uint64_t (cli_parse_bytes: k M G, Ki Mi Gi) */
    CLI_FN      /* read by fn */
};

struct cli_opt {
    const char *name;  /* --NAME; NULL ends a table */
    const char *value; /* the value's placeholder in the help ("FILE"); NULL for a flag */
    enum cli_type type;
    size_t offset;     /* the field, from its group's base */
    /* CLI_FN: reads arg into field; 0, or nonzero with e naming opt and arg */
    int (*fn)(void *field, const char *opt, const char *arg, struct alisa_err *e);
    int required;      /* 1: a usage error when not given */
    const char *help;  /* lines joined by '\n' */
    char short_name;   /* -C as well as --NAME, or 0 */
};

/* A table and where its fields lie in the command's options struct. */
struct cli_group {
    const struct cli_opt *opts;
    size_t base; /* offsetof(the command's struct, the group's struct) */
};

/* A command's whole set of options. */
struct cli_command_opts {
    const struct cli_group *groups;
    size_t n_groups;
    int knobs;       /* 1: the selections' own parameters too (cli_join_knobs) */
    int positionals; /* 1: arguments may follow the options */
};

/* The selection's budget, a group over struct sel_params: --sparsity and
 * --budget-tokens. */
extern const struct cli_opt cli_budget_opts[];

/* A request stream (serving, issue 46), a group over struct wl_params:
 * --requests, --rate, --burstiness, --prompt-len N[:M], --output-len N[:M],
 * --seed; its defaults are CLI_STREAM_DEFAULTS. */
extern const struct cli_opt cli_stream_opts[];
#define CLI_STREAM_DEFAULTS                                                                        \
    {.n_requests = 200, .rate = 4, .burstiness = 1, .prompt_min = 128, .prompt_max = 128,         \
     .output_min = 128, .output_max = 128, .seed = 1}

/* A CLI_FN reader of a positive byte count (cli_parse_bytes) into a
 * uint64_t: --gpu-mem, --cpu-mem, where 0 would mean "the profile's" and
 * leaving the option out says that. */
int cli_read_memory(void *field, const char *opt, const char *arg, struct alisa_err *e);

/* A CLI_FN reader of a flag that sets an enum kv_precision field to KV_INT8
 * (--kv-int8 of plan and search). Cannot fail. */
int cli_read_kv_int8(void *field, const char *opt, const char *arg, struct alisa_err *e);

/* Parses argv (argv[0] the command) into o, whose defaults the caller has
 * set; the knobs given go to knobs (when c->knobs). Returns 0 with *next
 * the first argument after the options (NULL next: none may follow),
 * CLI_HELP_SHOWN after printing usage on stdout for -h or --help, or a
 * usage error's code (one line naming the option: a bad or missing value,
 * an unknown option, a required one missing, an argument where none may
 * be). With ALISA_LIST_OPTIONS=1 lists the options and exits 0
 * (cli_list_options). */
int cli_opts_parse(int argc, char **argv, const struct cli_command_opts *c, void *o,
                   struct cli_knobs *knobs, void (*usage)(FILE *), int *next);

/* The options' help: each "  --NAME VALUE" padded to col, its help after
 * it, continuation lines indented to col; the knobs when c->knobs; then
 * "-h, --help". */
void cli_opts_help(FILE *f, const struct cli_command_opts *c, int col);

#endif
