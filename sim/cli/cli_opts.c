/* Declared options (contract in cli_opts.h): the tables become one
 * getopt_long table (option i of all groups is code CLI_OPTS_CODE + i, the
 * knobs after them, -h last), each value is read into its field as its type
 * says, and the help is printed from the same entries.
 */
#include "cli_opts.h"

#include "workload.h"

#include <ctype.h>
#include <getopt.h>
#include <string.h>

#include "costmodel.h"
#include "selection.h"

#define CLI_OPTS_CODE 2000
#define CLI_STRINGIFY_(x) #x
#define CLI_STRINGIFY(x) CLI_STRINGIFY_(x)

const struct cli_opt cli_budget_opts[] = {
    {"sparsity", "S", CLI_DOUBLE, offsetof(struct sel_params, sparsity), NULL, 0,
     "KV sparsity: the share of the context not attended\n"
     "(default " CLI_STRINGIFY(SEL_SPARSITY_DEFAULT) ")", 0},
    {"budget-tokens", "N", CLI_U32, offsetof(struct sel_params, budget_tokens), NULL, 0,
     "attend N tokens per step instead (overrides --sparsity)", 0},
    {0}};

/* --prompt-len A or A:B (uniform on [A, B]) into a (min, max) pair */
static int read_len_range(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    uint32_t *mm = field;
    char a[32];
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (n >= sizeof a)
        return err_set(e, ALISA_EINVAL, "%s %s: expected N or MIN:MAX tokens", opt, arg);
    memcpy(a, arg, n);
    a[n] = 0;
    if (cli_parse_u32(opt, a, &mm[0], e) || cli_parse_u32(opt, colon ? colon + 1 : a, &mm[1], e))
        return ALISA_EINVAL;
    if (mm[0] == 0 || mm[0] > mm[1])
        return err_set(e, ALISA_EINVAL, "%s %s: expected 1 <= MIN <= MAX tokens", opt, arg);
    return 0;
}

const struct cli_opt cli_stream_opts[] = {
    {"requests", "N", CLI_U32, offsetof(struct wl_params, n_requests), NULL, 0,
     "requests drawn (default 200)", 0},
    {"rate", "R", CLI_DOUBLE, offsetof(struct wl_params, rate), NULL, 0,
     "requests per second (default 4; 0: all at once)", 0},
    {"burstiness", "K", CLI_DOUBLE, offsetof(struct wl_params, burstiness), NULL, 0,
     "Gamma shape of the gaps (default 1: Poisson; < 1 burstier)", 0},
    {"prompt-len", "N[:M]", CLI_FN, offsetof(struct wl_params, prompt_min), read_len_range, 0,
     "prompt tokens, or uniform on N..M (default 128)", 0},
    {"output-len", "N[:M]", CLI_FN, offsetof(struct wl_params, output_min), read_len_range, 0,
     "output tokens, the first from the prefill (default 128)", 0},
    {"seed", "S", CLI_U64, offsetof(struct wl_params, seed), NULL, 0,
     "seed of the stream (default 1)", 0},
    {0}};

int cli_read_kv_int8(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    (void)opt, (void)arg, (void)e;
    *(enum kv_precision *)field = KV_INT8;
    return 0;
}

int cli_read_memory(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    if (cli_parse_bytes(opt, arg, field, e))
        return ALISA_EINVAL;
    return *(uint64_t *)field ? 0 : err_set(e, ALISA_EINVAL, "%s 0: must be positive (leave it "
                                            "out for the profile's memory)", opt);
}

/* Entry i over all of c's groups, and its field in o. */
static const struct cli_opt *entry(const struct cli_command_opts *c, size_t i, void *o,
                                   void **field)
{
    for (size_t g = 0; g < c->n_groups; g++) {
        size_t n = 0;
        while (c->groups[g].opts[n].name)
            n++;
        if (i < n) {
            const struct cli_opt *x = &c->groups[g].opts[i];
            if (field)
                *field = (char *)o + c->groups[g].base + x->offset;
            return x;
        }
        i -= n;
    }
    return NULL;
}

/* Reads arg into field as x's type says. */
static int take(const struct cli_opt *x, void *field, const char *opt, const char *arg,
                struct alisa_err *e)
{
    switch (x->type) {
    case CLI_FLAG: *(int *)field = 1; return 0;
    case CLI_STR: *(const char **)field = arg; return 0;
    case CLI_U32: return cli_parse_u32(opt, arg, field, e);
    case CLI_U64: return cli_parse_u64(opt, arg, field, e);
    case CLI_DOUBLE: return cli_parse_double(opt, arg, field, e);
    case CLI_BYTES: return cli_parse_bytes(opt, arg, field, e);
    case CLI_FN: return x->fn(field, opt, arg, e);
    }
    return err_set(e, ALISA_EINVAL, "%s: unknown option type", opt);
}

int cli_opts_parse(int argc, char **argv, const struct cli_command_opts *c, void *o,
                   struct cli_knobs *knobs, void (*usage)(FILE *), int *next)
{
    struct option base[CLI_OPTS_MAX], opts[CLI_OPTS_MAX];
    unsigned char given[CLI_OPTS_MAX] = {0};
    char shorts[3 * CLI_OPTS_MAX] = ":h"; /* getopt's short options: -h and the declared */
    size_t n = 0;
    for (const struct cli_opt *x; (x = entry(c, n, o, NULL)); n++) {
        ALISA_ASSERT(n + 2 < CLI_OPTS_MAX);
        base[n] = (struct option){x->name, x->value ? required_argument : no_argument, 0,
                                  CLI_OPTS_CODE + (int)n};
        /* a table's mistakes, caught the first time the command runs */
        ALISA_ASSERT(x->help && (!x->short_name || (isalnum((unsigned char)x->short_name) &&
                                                    x->short_name != 'h')));
        if (x->short_name)
            snprintf(shorts + strlen(shorts), sizeof shorts - strlen(shorts), "%c%s",
                     x->short_name, x->value ? ":" : "");
    }
    base[n] = (struct option){"help", no_argument, 0, 'h'};
    base[n + 1] = (struct option){0, 0, 0, 0};
    if (c->knobs)
        cli_join_knobs(opts, CLI_OPTS_MAX, base);
    else
        memcpy(opts, base, sizeof base);
    cli_list_options(opts);
    struct alisa_err e = {{0}};
    cli_reset_getopt();
    int ch, li = -1, bad = 0;
    while (!bad && (ch = getopt_long(argc, argv, shorts, opts, &li)) != -1) {
        const char *opt = cli_opt_name(opts, li, ch, argv[optind - 1]);
        li = -1;
        for (size_t i = 0; ch > 0 && ch < 128 && ch != 'h' && ch != ':' && ch != '?' && i < n;
             i++)
            if (entry(c, i, o, NULL)->short_name == ch)
                ch = CLI_OPTS_CODE + (int)i; /* -C is its --NAME */
        void *field;
        const struct cli_opt *x = ch >= CLI_OPTS_CODE ? entry(c, (size_t)(ch - CLI_OPTS_CODE),
                                                              o, &field)
                                                      : NULL;
        if (x) {
            given[ch - CLI_OPTS_CODE] = 1;
            bad = take(x, field, opt, optarg, &e) != 0;
            continue;
        }
        int k = c->knobs ? cli_knob_take(knobs, ch, opt, optarg, &e) : 0;
        if (!k)
            return cli_option_end(ch, opt, usage);
        bad = k < 0;
    }
    if (bad)
        return cli_usage_error(usage, "%s", e.msg);
    if (optind < argc && !c->positionals)
        return cli_usage_error(usage, "unexpected argument '%s'", argv[optind]);
    for (size_t i = 0; i < n; i++) {
        const struct cli_opt *x = entry(c, i, o, NULL);
        if (x->required && !given[i]) {
            if (x->short_name) /* named as users type it */
                return cli_usage_error(NULL, "-%c is required", x->short_name);
            return cli_usage_error(NULL, "--%s is required", x->name);
        }
    }
    if (next)
        *next = optind;
    return 0;
}

/* "  OPT" padded to col, then text's lines, each continuation at col. */
static void help_entry(FILE *f, const char *opt, const char *text, int col)
{
    int w = fprintf(f, "  %s", opt);
    fprintf(f, "%*s", w < col ? col - w : 2, "");
    if (!*text)
        fputc('\n', f);
    for (const char *t = text; *t;) {
        size_t len = strcspn(t, "\n");
        fprintf(f, "%.*s\n", (int)len, t);
        t += len;
        if (*t == '\n' && *++t)
            fprintf(f, "%*s", col, "");
    }
}

void cli_opts_help(FILE *f, const struct cli_command_opts *c, int col)
{
    const struct cli_opt *x;
    for (size_t i = 0; (x = entry(c, i, NULL, NULL)); i++) {
        char opt[96], sh[8] = "";
        if (x->short_name)
            snprintf(sh, sizeof sh, "-%c, ", x->short_name);
        snprintf(opt, sizeof opt, "%s--%s%s%s", sh, x->name, x->value ? " " : "",
                 x->value ? x->value : "");
        help_entry(f, opt, x->help, col);
    }
    if (c->knobs)
        cli_knobs_help(f, col);
    help_entry(f, "-h, --help", "this text", col);
}
