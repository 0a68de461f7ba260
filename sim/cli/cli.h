/* Helpers shared by the alisa subcommands: option-value parsing, usage
 * errors, and the one place an error status becomes a message and exit code.
 *
 * Exit codes: 0 success, 1 a failure (bad input file, impossible config),
 * 2 a usage error (unknown command or option, bad option value).
 */
#ifndef ALISA_CLI_H
#define ALISA_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* The most sequences a simulated batch may hold (issue 48: --batch
 * 2147483647 took 11.8 GB): far above any batch one GPU serves (HiSparse
 * reports 256 concurrent requests), so the per-sequence state stays
 * bounded. */
#define CLI_MAX_BATCH (1u << 16)
/* Not an exit status: a parse helper's "the help was printed, stop here";
 * cli_run_command turns it into exit 0. */
#define CLI_HELP_SHOWN (-1)

/* One subcommand: name, one-line summary, entry point, usage printer. */
struct cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);   /* argv[0] is the command name */
    void (*usage)(FILE *out);
};

/* Prints "alisa: error: <msg>" on stderr and returns CLI_EXIT_FAIL. */
int cli_fail(const struct alisa_err *e);

/* cli_fail for a status: ALISA_ENOTFOUND (a name the catalog or a registry
 * does not hold: a bad value the user typed) gives CLI_EXIT_USAGE, the
 * README's exit 2 for a bad value; anything else CLI_EXIT_FAIL. */
int cli_fail_status(int status, const struct alisa_err *e);

/* A name not among names[n] (systems, policies, commands): a usage error
 * "OPT NAME: unknown; did you mean 'X'? (LISTER shows them)" with the
 * nearest name when one is close (lister may be NULL: the command's --help,
 * which every usage error names, lists them). Returns CLI_EXIT_USAGE. */
int cli_unknown_name(void (*usage)(FILE *), const char *opt, const char *name,
                     const char *const *names, size_t n, const char *lister);

/* cli_unknown_name over the selection policies (opt "--selection") or the
 * placement policies (any other opt, "--placement"). */
int cli_unknown_policy(void (*usage)(FILE *), const char *opt, const char *name);

/* The command being run ("sim", "trace gen"): what usage errors name.
 * cli_run_command sets it; a command with subcommands sets it again. */
void cli_set_command(const char *name);

/* A usage error (a bad, missing or unknown option or value): prints one
 * line on stderr, "alisa CMD: <what> (alisa CMD --help for the options)",
 * and returns CLI_EXIT_USAGE. Without a command yet (the command itself is
 * missing or unknown) it prints `usage` (the list of commands) after it. */
int cli_usage_error(void (*usage)(FILE *), const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The first of n (name, given) pairs whose `given` is 0, as a usage error
 * "NAME is required" (CLI_EXIT_USAGE); 0 when all were given. Arguments:
 * const char *name, int given, n times. */
int cli_require(int n, ...);

/* The option getopt_long just returned, as the user knows it: "--name" for
 * a long option (li its index in opts, -1 when none), "-c" for a short one;
 * for an unknown option or a missing value, what was typed (typed). Valid
 * until the next call. */
struct option;
const char *cli_opt_name(const struct option *opts, int li, int ch, const char *typed);

/* Every command calls this with its option table before parsing: with
 * ALISA_LIST_OPTIONS=1 in the environment it prints the table's long names,
 * one "--name" a line, and exits 0, so tests/help_options_test.sh can hold
 * each --help text against the table the parser really uses. Otherwise
 * does nothing. */
void cli_list_options(const struct option *opts);

/* Strict number parsing for option values: the whole string must be a
 * number in range. On failure e says "--opt: 'value' is not ...". */
int cli_parse_u32(const char *opt, const char *s, uint32_t *out, struct alisa_err *e);
int cli_parse_u64(const char *opt, const char *s, uint64_t *out, struct alisa_err *e);
int cli_parse_double(const char *opt, const char *s, double *out, struct alisa_err *e);

/* A byte count: an integer or decimal with an optional unit, k M G T (1e3
 * steps) or Ki Mi Gi Ti (1024 steps), with or without a trailing B:
 * "4096", "2.5G", "512MiB". */
int cli_parse_bytes(const char *opt, const char *s, uint64_t *out, struct alisa_err *e);

/* The shared end of a subcommand's getopt switch, for what is not one of its
 * own options: 'h' prints the usage on stdout and gives CLI_HELP_SHOWN
 * (return it as it is: the caller must not go on); ':' (a missing
 * value) and anything else (an unknown option) print the usage on stderr and
 * give CLI_EXIT_USAGE. opt is the option as typed. */
int cli_option_end(int ch, const char *opt, void (*usage)(FILE *));

/* The catalog of dir (models and hardware) plus, when profile is non-NULL,
 * the hardware profiles in that file (alisa calibrate's output, the
 * catalog's format; at least one, the last in c->hw). On failure c is empty
 * and e names the file and line. */
struct catalog;
int cli_catalog_load(struct catalog *c, const char *dir, const char *profile, struct alisa_err *e);

/* The software profile a run prices (--software): `given` when set ("none":
 * *out NULL, else its catalog entry or ALISA_ENOTFOUND naming --software),
 * else `fallback` (a system's), NULL when fallback is NULL or the catalog
 * has no software profiles at all; a catalog with profiles but without the
 * fallback is ALISA_EINVAL. */
struct sw_profile;
int cli_software(const struct catalog *c, const char *given, const char *fallback,
                 const struct sw_profile **out, struct alisa_err *e);

/* A pricing rule's hardware profile (--rule NAME; issue 44): hardware HW
 * runs as HW-NAME, which the catalog must have (else ALISA_ENOTFOUND naming
 * --rule and the missing profile); the name into hw_out, n bytes. */
int cli_rule_hw(const struct catalog *c, const char *rule, const char *hw, char *hw_out,
                size_t n, struct alisa_err *e);

/* A run's profile names under --rule `rule` (NULL: all unchanged): *hw
 * becomes its HW-rule profile (an unknown *hw named as --hardware's, as
 * catalog_hw_not_found does; then cli_rule_hw); *sw, when set, else
 * *fallback (a system's), becomes SW-rule where the catalog has that
 * software profile, else stays (a runtime not measured under the rule
 * keeps its own costs; NULL and "none" stay). hw_buf and sw_buf, n bytes
 * each, hold the names made. 0 or a status, e set. */
int cli_rule_names(const struct catalog *c, const char *rule, const char **hw, const char **sw,
                   const char **fallback, char *hw_buf, char *sw_buf, size_t n,
                   struct alisa_err *e);

/* getopt_long needs a reset between subcommands (glibc: optind = 0). */
void cli_reset_getopt(void);

/* Seconds on the monotonic clock. */
double cli_now_s(void);

/* ---- the selections' own parameters as options ----
 * Every knob a selection declares (selection.h, sel_knob) is an option
 * --NAME of every command that takes a selection, found by walking the
 * registry: a command joins them to its getopt table, takes them while
 * parsing, and applies them once its selection is known (a knob the
 * selection does not declare is a usage error naming it). */
#define CLI_KNOB_CODE 1900 /* getopt code of knob option i: CLI_KNOB_CODE + i */
#define CLI_KNOBS_MAX 16   /* distinct knob names over every selection */
#define CLI_OPTS_MAX 96    /* a command's whole getopt table, the knobs joined */

struct cli_knobs {
    uint32_t n;
    const char *name[CLI_KNOBS_MAX]; /* as declared (static strings) */
    double value[CLI_KNOBS_MAX];
};

struct option;
/* out = base's options followed by one per knob name, NULL-terminated;
 * out has room for cap entries (asserted). Cannot fail. */
void cli_join_knobs(struct option *out, size_t cap, const struct option *base);

/* Takes getopt code ch when it is a knob option: arg parsed as a number
 * into k (a repeat replaces the earlier value). Returns 1 when taken, 0
 * when ch is not a knob option, -1 on a malformed value (e names opt). */
int cli_knob_take(struct cli_knobs *k, int ch, const char *opt, const char *arg,
                  struct alisa_err *e);

/* Sets p's knobs from k under selection s and validates p against s
 * (sel_params_validate). ALISA_EINVAL, e naming the option, when s does not
 * declare one given. */
struct selection_ops;
struct sel_params;
int cli_knobs_apply(const struct cli_knobs *k, const struct selection_ops *s,
                    struct sel_params *p, struct alisa_err *e);

/* s's knobs as a JSON object, {"NAME": value given, or null for the
 * default}: what --json reports of the selection's own parameters. New
 * reference. */
typedef struct json_t json_t;
json_t *cli_knobs_json(const struct selection_ops *s, const struct sel_params *p);

/* Sets root's attention_head_recall_mean and _min (replay_totals'): null
 * where not measured (NAN). What plan's and sim's --json report alike. */
void cli_head_recall_json(json_t *root, double mean, double min);

/* The knob options' help lines, each option name padded to col. */
void cli_knobs_help(FILE *f, int col);

#endif
