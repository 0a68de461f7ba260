/* Shared CLI helpers (contract in cli.h).
 *
 * Keeps number parsing strict (no trailing junk, no silent wrap) so that a
 * typo in a sweep script fails loudly instead of running the wrong point.
 */
#include "cli.h"

#include "names.h"
#include "placement.h"
#include "selection.h"

#include "catalog.h"

#include <errno.h>
#include <jansson.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_fail(const struct alisa_err *e)
{
    fprintf(stderr, "alisa: error: %s\n", e->msg[0] ? e->msg : "unknown failure");
    return CLI_EXIT_FAIL;
}

int cli_fail_status(int status, const struct alisa_err *e)
{
    cli_fail(e);
    return status == ALISA_ENOTFOUND ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

int cli_unknown_policy(void (*usage)(FILE *), const char *opt, const char *name)
{
    const char *names[64];
    size_t n = 0;
    int sel = strcmp(opt, "--selection") == 0;
    for (size_t i = 0; n < 64 && (sel ? selection_policies[i] != NULL : placement_policies[i] != NULL);
         i++)
        names[n++] = sel ? selection_policies[i]->name : placement_policies[i]->name;
    return cli_unknown_name(usage, opt, name, names, n, "alisa policy list");
}

int cli_unknown_name(void (*usage)(FILE *), const char *opt, const char *name,
                     const char *const *names, size_t n, const char *lister)
{
    const char *near = names_nearest(name, names, n);
    char list[128] = "";
    if (lister)
        snprintf(list, sizeof list, " (%s shows them)", lister);
    if (near)
        return cli_usage_error(usage, "%s %s: unknown; did you mean '%s'?%s", opt, name, near,
                               list);
    return cli_usage_error(usage, "%s %s: unknown%s", opt, name, list);
}

static char command[32];

void cli_set_command(const char *name) { snprintf(command, sizeof command, "%s", name); }

int cli_usage_error(void (*usage)(FILE *), const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, command[0] ? "alisa %s: " : "alisa: ", command);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (command[0])
        fprintf(stderr, " (alisa %s --help for the options)\n", command);
    else {
        fprintf(stderr, "\n");
        if (usage)
            usage(stderr);
    }
    return CLI_EXIT_USAGE;
}

int cli_require(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    const char *missing = NULL;
    for (int i = 0; i < n && !missing; i++) {
        const char *name = va_arg(ap, const char *);
        if (!va_arg(ap, int))
            missing = name;
    }
    va_end(ap);
    return missing ? cli_usage_error(NULL, "%s is required", missing) : 0;
}

void cli_list_options(const struct option *opts)
{
    const char *v = getenv("ALISA_LIST_OPTIONS");
    if (!v || strcmp(v, "1") != 0)
        return;
    for (; opts->name; opts++)
        printf("--%s\n", opts->name);
    exit(0);
}

const char *cli_opt_name(const struct option *opts, int li, int ch, const char *typed)
{
    static char name[80];
    if (ch == '?' || ch == ':' || (li < 0 && (ch < 0 || ch > 127)))
        return typed;
    if (li >= 0)
        snprintf(name, sizeof name, "--%s", opts[li].name);
    else
        snprintf(name, sizeof name, "-%c", ch);
    return name;
}

int cli_parse_u64(const char *opt, const char *s, uint64_t *out, struct alisa_err *e)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return err_set(e, ALISA_EINVAL, "%s: '%s' is not a non-negative integer", opt, s);
    *out = v;
    return 0;
}

int cli_parse_u32(const char *opt, const char *s, uint32_t *out, struct alisa_err *e)
{
    uint64_t v;
    int rc = cli_parse_u64(opt, s, &v, e);
    if (rc)
        return rc;
    if (v > UINT32_MAX)
        return err_set(e, ALISA_EINVAL, "%s: %s is too large (max %u)", opt, s, UINT32_MAX);
    *out = (uint32_t)v;
    return 0;
}

int cli_parse_double(const char *opt, const char *s, double *out, struct alisa_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return err_set(e, ALISA_EINVAL, "%s: '%s' is not a finite number", opt, s);
    *out = v;
    return 0;
}

int cli_parse_bytes(const char *opt, const char *s, uint64_t *out, struct alisa_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || s[0] == '-')
        return err_set(e, ALISA_EINVAL, "%s: '%s' is not a byte count (e.g. 4096, 2.5G, 512MiB)",
                       opt, s);
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},           {"B", 1},          {"k", 1e3},       {"kB", 1e3},
                 {"K", 1e3},        {"KB", 1e3},       {"M", 1e6},       {"MB", 1e6},
                 {"G", 1e9},        {"GB", 1e9},       {"T", 1e12},      {"TB", 1e12},
                 {"Ki", 1024.0},    {"KiB", 1024.0},   {"Mi", 1048576.0}, {"MiB", 1048576.0},
                 {"Gi", 1073741824.0}, {"GiB", 1073741824.0}, {"Ti", 1099511627776.0},
                 {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0) {
            double b = v * units[i].mult;
            if (b > 1.8e19)
                return err_set(e, ALISA_EINVAL, "%s: %s is too large", opt, s);
            *out = (uint64_t)b;
            return 0;
        }
    return err_set(e, ALISA_EINVAL, "%s: unknown unit '%s' in '%s' (k M G T, Ki Mi Gi Ti)", opt,
                   end, s);
}

int cli_option_end(int ch, const char *opt, void (*usage)(FILE *))
{
    if (ch == 'h') {
        usage(stdout);
        return CLI_HELP_SHOWN;
    }
    if (ch == ':')
        return cli_usage_error(usage, "option '%s' needs a value", opt);
    return cli_usage_error(usage, "unrecognized option '%s'", opt);
}

void cli_reset_getopt(void)
{
    optind = 0;
    opterr = 0;
}

int cli_catalog_load(struct catalog *c, const char *dir, const char *profile, struct alisa_err *e)
{
    int rc = catalog_load(c, dir, catalog_models_dir(), e);
    size_t before = c->n_hw;
    if (!rc && profile && (rc = catalog_load_hardware(c, profile, e)))
        catalog_deinit(c);
    else if (!rc && profile && c->n_hw == before) {
        catalog_deinit(c);
        rc = err_set(e, ALISA_EINVAL, "%s: no [section] with a hardware profile", profile);
    }
    return rc;
}

int cli_software(const struct catalog *c, const char *given, const char *fallback,
                 const struct sw_profile **out, struct alisa_err *e)
{
    *out = NULL;
    if (given && strcmp(given, "none") == 0)
        return 0;
    if (given)
        return (*out = catalog_sw(c, given)) ? 0 : catalog_sw_not_found(c, "--software", given, e);
    if (!fallback || c->n_sw == 0)
        return 0;
    if (!(*out = catalog_sw(c, fallback)))
        return err_set(e, ALISA_EINVAL, "software.ini has no [%s] profile (the system's; "
                       "--software none prices no host costs)", fallback);
    return 0;
}

int cli_rule_hw(const struct catalog *c, const char *rule, const char *hw, char *hw_out,
                size_t n, struct alisa_err *e)
{
    if ((size_t)snprintf(hw_out, n, "%s-%s", hw, rule) >= n)
        return err_set(e, ALISA_EINVAL, "--rule %s: hardware name %s-%s too long", rule, hw, rule);
    if (!catalog_hw(c, hw_out))
        return err_set(e, ALISA_ENOTFOUND, "--rule %s: hardware %s has no profile %s (alisa "
                       "catalog hardware lists them)", rule, hw, hw_out);
    return 0;
}

/* sw's profile under rule (cli_rule_names): SW-rule in sw_out where the
 * catalog has it, else sw */
static const char *rule_sw(const struct catalog *c, const char *rule, const char *sw,
                           char *sw_out, size_t n)
{
    if (!sw || !strcmp(sw, "none") || (size_t)snprintf(sw_out, n, "%s-%s", sw, rule) >= n)
        return sw;
    return catalog_sw(c, sw_out) ? sw_out : sw;
}

int cli_rule_names(const struct catalog *c, const char *rule, const char **hw, const char **sw,
                   const char **fallback, char *hw_buf, char *sw_buf, size_t n,
                   struct alisa_err *e)
{
    if (!rule)
        return 0;
    if (!catalog_hw(c, *hw))
        return catalog_hw_not_found(c, "--hardware", *hw, e);
    int rc = cli_rule_hw(c, rule, *hw, hw_buf, n, e);
    if (rc)
        return rc;
    *hw = hw_buf;
    if (*sw)
        *sw = rule_sw(c, rule, *sw, sw_buf, n);
    else if (fallback)
        *fallback = rule_sw(c, rule, *fallback, sw_buf, n);
    return 0;
}

double cli_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}


/* Every knob name any selection declares, once each, in registry order. */
static uint32_t knob_names(const struct sel_knob *out[CLI_KNOBS_MAX],
                           const struct selection_ops *owner[CLI_KNOBS_MAX])
{
    uint32_t n = 0;
    for (size_t i = 0; selection_policies[i]; i++)
        for (uint32_t j = 0; j < selection_policies[i]->n_knobs; j++) {
            const struct sel_knob *k = &selection_policies[i]->knobs[j];
            uint32_t x = 0;
            while (x < n && strcmp(out[x]->name, k->name) != 0)
                x++;
            if (x < n)
                continue;
            ALISA_ASSERT(n < CLI_KNOBS_MAX);
            owner[n] = selection_policies[i];
            out[n++] = k;
        }
    return n;
}

void cli_join_knobs(struct option *out, size_t cap, const struct option *base)
{
    const struct sel_knob *k[CLI_KNOBS_MAX];
    const struct selection_ops *owner[CLI_KNOBS_MAX];
    uint32_t n = knob_names(k, owner);
    size_t i = 0;
    for (; base[i].name; i++) {
        ALISA_ASSERT(i + 1 < cap);
        out[i] = base[i];
    }
    for (uint32_t j = 0; j < n; j++, i++) {
        ALISA_ASSERT(i + 1 < cap);
        out[i] = (struct option){k[j]->name, required_argument, 0, CLI_KNOB_CODE + (int)j};
    }
    out[i] = (struct option){0, 0, 0, 0};
}

int cli_knob_take(struct cli_knobs *kn, int ch, const char *opt, const char *arg,
                  struct alisa_err *e)
{
    const struct sel_knob *k[CLI_KNOBS_MAX];
    const struct selection_ops *owner[CLI_KNOBS_MAX];
    uint32_t n = knob_names(k, owner);
    if (ch < CLI_KNOB_CODE || ch >= CLI_KNOB_CODE + (int)n)
        return 0;
    const char *name = k[ch - CLI_KNOB_CODE]->name;
    double v;
    if (cli_parse_double(opt, arg, &v, e))
        return -1;
    uint32_t x = 0;
    while (x < kn->n && strcmp(kn->name[x], name) != 0)
        x++;
    kn->name[x] = name;
    kn->value[x] = v;
    kn->n += x == kn->n;
    return 1;
}

int cli_knobs_apply(const struct cli_knobs *kn, const struct selection_ops *s,
                    struct sel_params *p, struct alisa_err *e)
{
    for (uint32_t i = 0; i < kn->n; i++) {
        int x = sel_knob_find(s, kn->name[i]);
        if (x < 0) {
            char own[200] = "";
            for (uint32_t j = 0; j < s->n_knobs; j++)
                snprintf(own + strlen(own), sizeof own - strlen(own), "%s--%s", j ? ", " : "",
                         s->knobs[j].name);
            return err_set(e, ALISA_EINVAL, "--%s: selection %s has no such parameter (%s%s)",
                           kn->name[i], s->name, s->n_knobs ? "its own: " : "it has none of its own",
                           own);
        }
        if (kn->value[i] == 0)
            return err_set(e, ALISA_EINVAL, "--%s 0: selection %s takes a value of at least %g "
                           "(leave it out for the default: %s)", kn->name[i], s->name,
                           s->knobs[x].min, s->knobs[x].def);
        p->knob[x] = kn->value[i];
    }
    return sel_params_validate(p, s, e);
}

void cli_head_recall_json(json_t *root, double mean, double min)
{
    json_object_set_new(root, "attention_head_recall_mean",
                        isnan(mean) ? json_null() : json_real(mean));
    json_object_set_new(root, "attention_head_recall_min", isnan(min) ? json_null() : json_real(min));
}

json_t *cli_knobs_json(const struct selection_ops *s, const struct sel_params *p)
{
    json_t *o = json_object();
    for (uint32_t i = 0; s && i < s->n_knobs; i++)
        json_object_set_new(o, s->knobs[i].name,
                            p->knob[i] != 0 ? json_real(p->knob[i]) : json_null());
    return o;
}

void cli_knobs_help(FILE *f, int col)
{
    const struct sel_knob *k[CLI_KNOBS_MAX];
    const struct selection_ops *owner[CLI_KNOBS_MAX];
    uint32_t n = knob_names(k, owner);
    for (uint32_t j = 0; j < n; j++) {
        char opt[64], text[400];
        snprintf(opt, sizeof opt, "--%s %s", k[j]->name, k[j]->whole ? "N" : "X");
        snprintf(text, sizeof text, "%s: %s (default: %s)", owner[j]->name, k[j]->help,
                 k[j]->def);
        /* the text wrapped at 80 columns, continued under its first word */
        fprintf(f, "  %-*s", col - 2, opt);
        const char *w = text;
        int at = col;
        while (*w) {
            size_t len = strcspn(w, " ");
            if (at > col && at + 1 + (int)len > 80) {
                fprintf(f, "\n%*s", col, "");
                at = col;
            }
            fprintf(f, "%s%.*s", at > col ? " " : "", (int)len, w);
            at += (at > col) + (int)len;
            w += len;
            w += *w == ' ';
        }
        fputc('\n', f);
    }
}
