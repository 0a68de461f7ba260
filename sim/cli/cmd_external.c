/* `alisa validate-external`: the simulator against published measurements of
 * real systems (issue 44). A suite file (experiments/external/README.md) holds
 * one section per published point: its source, the published tokens per
 * second, whether it is held out, in sample or excluded (with the reason),
 * and the `alisa sim` options that place it. Each point not excluded runs as
 * `alisa sim ... --json` would (a forked child, as a sweep runs a point),
 * on a synthetic trace of the point's lengths made here (the dense systems
 * the published points run read no attention; a point may name its own
 * trace); the table gives published, predicted and the error, and the
 * held-out mean absolute error. With --db each point is a row of the
 * results database (`alisa db export --query external`).
 */
#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "git_version.h"
#include "progress.h"
#include "results.h"
#include "simulate.h"
#include "sweep_spec.h"
#include "trace_gen.h"

struct external_opts {
    const char *db, *catalog, *rule;
    int json, peak;
};

#define EO(f) offsetof(struct external_opts, f)
static const struct cli_opt external_opts[] = {
    {"rule", "NAME", CLI_STR, EO(rule), NULL, 0,
     "price every point by another rule: the hardware profile\n"
     "HW-NAME instead of HW (an error if the catalog lacks it),\n"
     "and the software SW-NAME instead of SW where the catalog\n"
     "has it (SW: the point's software, else its system's)", 0},
    {"peak", NULL, CLI_FLAG, EO(peak), NULL, 0,
     "--rule peak: every point on its machine's datasheet peaks\n"
     "(the convention before measured efficiencies)", 0},
    {"db", "FILE", CLI_STR, EO(db), NULL, 0,
     "also write each point as a row of this results database\n"
     "(sweep \"external\"; alisa db export --query external)", 0},
    {"json", NULL, CLI_FLAG, EO(json), NULL, 0, "print JSON", 0},
    {"catalog", "DIR", CLI_STR, EO(catalog), NULL, 0, "catalog directory (passed to every point)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group external_groups[] = {{external_opts, 0}};
static const struct cli_command_opts external_command = {external_groups, 1, 0, 1};

void cmd_external_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa validate-external SUITE [--rule NAME | --peak] [--db FILE] [--json]\n"
            "                                [--catalog DIR]\n"
            "\n"
            "The simulator against published throughput of real systems: each point of\n"
            "SUITE (format: experiments/external/README.md) names its source, the published\n"
            "tokens/s, its set (held-out, in-sample or excluded, with the reason) and the\n"
            "`alisa sim` options that place it. Each point not excluded is simulated as\n"
            "`alisa sim OPTIONS --json` (a synthetic trace of the point's lengths unless it\n"
            "names a trace) and its throughput compared in the point's metric (generated\n"
            "tokens, or prompt and generated tokens, over the whole time); prints\n"
            "published, predicted and error per point, the mean\n"
            "absolute error over the held-out points (the headline) and over the in-sample\n"
            "ones apart, and the excluded points with their reasons. A point that fails to\n"
            "simulate is reported and makes the exit status 1.\n"
            "\n");
    cli_opts_help(out, &external_command, 22);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa validate-external experiments/external/suite.ini\n");
}

/* The keys a point holds for itself; every other key is an `alisa sim` option. */
static const char *const meta_keys[] = {"source", "set", "reason", "published_tok_s", "note",
                                        "metric", NULL};

#define EXT_MAX_POINTS 256
#define EXT_MAX_KEYS 24

struct ext_point {
    char id[64];
    char *source, *set, *reason, *note, *metric;
    double published;                /* tok/s; NAN: not given */
    char *key[EXT_MAX_KEYS], *value[EXT_MAX_KEYS]; /* sim options */
    int n_keys;
    /* results */
    int ran, failed, oom;
    double predicted, error_pct;
    char why[600];
};

struct ext_suite {
    const char *path;
    struct ext_point *p;
    int n;
    struct alisa_err *e;
    int bad;
};

static int is_meta(const char *k)
{
    for (int i = 0; meta_keys[i]; i++)
        if (strcmp(meta_keys[i], k) == 0)
            return 1;
    return 0;
}

static int suite_handler(void *user, const char *section, const char *name, const char *value)
{
    struct ext_suite *s = user;
    if (s->bad)
        return 0;
    if (!*section) {
        s->bad = err_set(s->e, ALISA_EINVAL, "%s: key '%s' outside a point's [section]",
                         s->path, name ? name : "");
        return 0;
    }
    struct ext_point *p = s->n ? &s->p[s->n - 1] : NULL;
    if (!p || strcmp(p->id, section) != 0) {
        for (int i = 0; i < s->n; i++)
            if (strcmp(s->p[i].id, section) == 0) {
                s->bad = err_set(s->e, ALISA_EINVAL, "%s: point [%s] given twice", s->path,
                                 section);
                return 0;
            }
        if (s->n == EXT_MAX_POINTS) {
            s->bad = err_set(s->e, ALISA_EINVAL, "%s: more than %d points", s->path,
                             EXT_MAX_POINTS);
            return 0;
        }
        if (strlen(section) >= sizeof p->id) {
            s->bad = err_set(s->e, ALISA_EINVAL, "%s: point name '%.40s...' over %zu "
                             "characters", s->path, section, sizeof p->id - 1);
            return 0;
        }
        p = &s->p[s->n++];
        memset(p, 0, sizeof *p);
        snprintf(p->id, sizeof p->id, "%s", section);
        p->published = NAN;
    }
    if (!name) /* a section without keys (inih's INI_CALL_HANDLER_ON_NEW_SECTION) */
        return 1;
    char **slot = strcmp(name, "source") == 0 ? &p->source
                  : strcmp(name, "set") == 0  ? &p->set
                  : strcmp(name, "reason") == 0 ? &p->reason
                  : strcmp(name, "note") == 0   ? &p->note
                  : strcmp(name, "metric") == 0 ? &p->metric
                                                : NULL;
    if (strcmp(name, "published_tok_s") == 0) {
        char *end;
        errno = 0;
        p->published = strtod(value, &end);
        if (errno || end == value || *end || !(p->published > 0) || !isfinite(p->published)) {
            s->bad = err_set(s->e, ALISA_EINVAL, "%s: [%s] published_tok_s '%s': expected a "
                             "positive number", s->path, p->id, value);
            return 0;
        }
        return 1;
    }
    if (slot) {
        if (*slot) {
            s->bad = err_set(s->e, ALISA_EINVAL, "%s: [%s] %s given twice", s->path, p->id,
                             name);
            return 0;
        }
        if (!(*slot = strdup(value)))
            s->bad = err_set(s->e, ALISA_ENOMEM, "out of memory reading %s", s->path);
        return !s->bad;
    }
    for (int i = 0; i < p->n_keys; i++)
        if (strcmp(p->key[i], name) == 0) {
            s->bad = err_set(s->e, ALISA_EINVAL, "%s: [%s] %s given twice", s->path, p->id,
                             name);
            return 0;
        }
    if (p->n_keys == EXT_MAX_KEYS || strchr(name, ',') || !*value || strpbrk(value, " \t,")) {
        s->bad = err_set(s->e, ALISA_EINVAL, "%s: [%s] %s = '%s': %s", s->path, p->id,
                         name, value, p->n_keys == EXT_MAX_KEYS ? "too many options"
                                                                : "one word expected");
        return 0;
    }
    if (!(p->key[p->n_keys] = strdup(name)) || !(p->value[p->n_keys] = strdup(value))) {
        free(p->key[p->n_keys]);
        p->key[p->n_keys] = NULL;
        s->bad = err_set(s->e, ALISA_ENOMEM, "out of memory reading %s", s->path);
        return 0;
    }
    p->n_keys++;
    return 1;
}

static const char *point_opt(const struct ext_point *p, const char *key)
{
    for (int i = 0; i < p->n_keys; i++)
        if (strcmp(p->key[i], key) == 0)
            return p->value[i];
    return NULL;
}

static void suite_free(struct ext_suite *s)
{
    for (int i = 0; i < s->n; i++) {
        struct ext_point *p = &s->p[i];
        free(p->source);
        free(p->set);
        free(p->reason);
        free(p->note);
        free(p->metric);
        for (int k = 0; k < p->n_keys; k++) {
            free(p->key[k]);
            free(p->value[k]);
        }
    }
    free(s->p);
    s->p = NULL;
    s->n = 0;
}

/* Reads and checks the suite: every point has a source, a set, a published
 * figure; an excluded one a reason; the others model, hardware, system and
 * batch. */
static int suite_load(struct ext_suite *s, const char *path, struct alisa_err *e)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->e = e;
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(e, ALISA_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(e, ALISA_EINVAL, "%s: not a regular file", path);
    if (!(s->p = calloc(EXT_MAX_POINTS, sizeof *s->p)))
        return err_set(e, ALISA_ENOMEM, "out of memory reading %s", path);
    int line = ini_parse(path, suite_handler, s);
    if (s->bad)
        return s->bad;
    if (line < 0)
        return err_set(e, ALISA_EIO, "%s: cannot read", path);
    if (line > 0)
        return err_set(e, ALISA_EINVAL, "%s:%d: not INI (a [point] section or key = value)", path,
                       line);
    if (!s->n)
        return err_set(e, ALISA_EINVAL, "%s: no points", path);
    for (int i = 0; i < s->n; i++) {
        struct ext_point *p = &s->p[i];
        const char *miss = !p->source ? "source" : !p->set ? "set"
                           : isnan(p->published) ? "published_tok_s" : NULL;
        if (miss)
            return err_set(e, ALISA_EINVAL, "%s: [%s] has no %s", path, p->id, miss);
        if (p->metric && strcmp(p->metric, "generated") && strcmp(p->metric, "prompt+generated"))
            return err_set(e, ALISA_EINVAL, "%s: [%s] metric '%s': expected generated or "
                           "prompt+generated", path, p->id, p->metric);
        if (strcmp(p->set, "held-out") && strcmp(p->set, "in-sample") && strcmp(p->set, "excluded"))
            return err_set(e, ALISA_EINVAL, "%s: [%s] set '%s': expected held-out, in-sample "
                           "or excluded", path, p->id, p->set);
        if (!strcmp(p->set, "excluded")) {
            if (!p->reason)
                return err_set(e, ALISA_EINVAL, "%s: [%s] is excluded without a reason", path,
                               p->id);
            continue;
        }
        const char *need[] = {"model", "hardware", "system", "batch", NULL};
        for (int k = 0; need[k]; k++)
            if (!point_opt(p, need[k]))
                return err_set(e, ALISA_EINVAL, "%s: [%s] has no %s (an alisa sim option)",
                               path, p->id, need[k]);
        for (int k = 0; k < p->n_keys; k++)
            if (is_meta(p->key[k]) || !strcmp(p->key[k], "json") || !strcmp(p->key[k], "catalog"))
                return err_set(e, ALISA_EINVAL, "%s: [%s] %s: set by the command", path,
                               p->id, p->key[k]);
    }
    return 0;
}

/* A synthetic trace of prompt + gen tokens in dir (made once per length). */
static int ensure_trace(const char *dir, uint32_t prompt, uint32_t gen, char *path, size_t n,
                        struct alisa_err *e)
{
    snprintf(path, n, "%s/synthetic-%u-%u.trace", dir, prompt, gen);
    if (access(path, R_OK) == 0)
        return 0;
    struct trace_gen_params g;
    trace_gen_defaults(&g);
    snprintf(g.model, sizeof g.model, "validate-external");
    g.n_layers = 2;
    g.n_seqs = 1;
    g.prompt_len = prompt;
    g.gen_len = gen;
    g.seed = 1;
    int rc = trace_gen_validate(&g, e);
    return rc ? rc : trace_gen_write(&g, path, e);
}

/* Reads the whole of f (rewound) into a string; NULL when out of memory. */
static char *slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0)
        return NULL;
    char *b = malloc((size_t)n + 1);
    if (!b)
        return NULL;
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    return b;
}

/* Runs argv as `alisa ARGV` in a child; its stdout and stderr returned
 * (caller frees); *status its exit status (-1: it did not exit). */
static int run_child(int argc, char **argv, char **out, char **err, int *status)
{
    FILE *fo = tmpfile(), *fe = tmpfile();
    *out = *err = NULL;
    if (!fo || !fe) {
        if (fo)
            fclose(fo);
        if (fe)
            fclose(fe);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fclose(fo);
        fclose(fe);
        return -1;
    }
    if (pid == 0) {
        dup2(fileno(fo), STDOUT_FILENO);
        dup2(fileno(fe), STDERR_FILENO);
        int code = cli_run_command(argc, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(code);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    fseek(fo, 0, SEEK_END);
    fseek(fe, 0, SEEK_END);
    *out = slurp(fo);
    *err = slurp(fe);
    fclose(fo);
    fclose(fe);
    return *out && *err ? 0 : -1;
}

/* The last non-empty line of s, trimmed, into buf. */
static void last_line(const char *s, char *buf, size_t n)
{
    const char *end = s + strlen(s);
    while (end > s && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > s && start[-1] != '\n')
        start--;
    snprintf(buf, n, "%.*s", (int)(end - start), start);
}

/* Under `rule`, every point not excluded has its hardware's HW-rule
 * profile in the catalog (loaded into cat), or e names the suite, the point
 * and the profile. */
static int rule_check(const struct ext_suite *s, struct catalog *cat, const char *catalog,
                      const char *rule, struct alisa_err *e)
{
    int rc = cli_catalog_load(cat, catalog ? catalog : catalog_default_dir(), NULL, e);
    for (int i = 0; i < s->n && !rc; i++) {
        const char *hw = point_opt(&s->p[i], "hardware");
        char name[300];
        if (strcmp(s->p[i].set, "excluded") && hw &&
            (rc = cli_rule_hw(cat, rule, hw, name, sizeof name, e)))
            err_prefix(e, rc, "%s: [%s]", s->path, s->p[i].id);
    }
    return rc;
}

/* p's row in db: the simulation's JSON (res, NULL when it failed) with the
 * published figure and the error under "external", keyed by the point's
 * options (config) and its id. */
static int store_row(struct results *db, const struct ext_point *p, int index, json_t *res,
                     const char *config_json, double wall, struct alisa_err *e)
{
    int rc = 0;
    json_t *ext = json_pack("{s:s, s:s, s:s, s:f}", "id", p->id, "source", p->source, "set",
                            p->set, "published_tok_s", p->published);
    if (ext && !p->failed && !p->oom) {
        json_object_set_new(ext, "predicted_tok_s", json_real(p->predicted));
        json_object_set_new(ext, "error_pct", json_real(p->error_pct));
    }
    json_t *root = res ? json_deep_copy(res) : json_object();
    char *result = NULL, *config = NULL;
    char hash[SWEEP_HASH_LEN + 1];
    /* the point's identity: its options and its id (two published figures
     * may share a simulated setting) */
    json_t *cj = json_loads(config_json, 0, NULL);
    if (cj)
        json_object_set_new(cj, "external_id", json_string(p->id));
    if (root && ext && cj) {
        json_object_set_new(root, "external", ext);
        ext = NULL;
        result = json_dumps(root, JSON_COMPACT);
        config = json_dumps(cj, JSON_SORT_KEYS | JSON_COMPACT);
    }
    if (!result || !config)
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
    else {
        sweep_hash(config, hash);
        struct result_row row = {.sweep = "external", .point = (uint64_t)index,
                                 .config_hash = hash, .config = config,
                                 .code_version = ALISA_GIT_VERSION, .result = result,
                                 .ok = !p->failed, .oom = p->oom,
                                 .error = p->failed ? p->why : NULL, .wall_s = wall};
        rc = results_put(db, &row, e);
    }
    free(result);
    free(config);
    json_decref(cj);
    json_decref(ext);
    json_decref(root);
    return rc;
}

/* Simulates p; fills its results; the row into db when db is non-NULL. */
static int run_point(struct ext_point *p, int index, const char *trace_dir, const char *suite_dir,
                     const char *catalog, const char *rule, struct results *db,
                     struct alisa_err *e)
{
    struct sweep_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.name, sizeof spec.name, "external");
    snprintf(spec.command, sizeof spec.command, "sim");
    snprintf(spec.path, sizeof spec.path, "%s", p->id);
    spec.n_points = 1;
    int rc = 0;
    char trace[1400];
    const char *given = point_opt(p, "trace");
    if (given && given[0] != '/')
        snprintf(trace, sizeof trace, "%s/%s", suite_dir, given);
    else if (given)
        snprintf(trace, sizeof trace, "%s", given);
    else {
        uint32_t pl = 128, gl = 512;
        const char *ps = point_opt(p, "prompt-len"), *gs = point_opt(p, "gen-len");
        if ((ps && cli_parse_u32("prompt-len", ps, &pl, e)) ||
            (gs && cli_parse_u32("gen-len", gs, &gl, e)) ||
            ensure_trace(trace_dir, pl, gl, trace, sizeof trace, e)) {
            snprintf(p->why, sizeof p->why, "%s", e->msg);
            p->failed = 1;
            return 0;
        }
    }
    /* the point's options as a one-point spec's [fixed] (sweep_spec_set, as
     * `alisa sweep --set` adds them): the trace made or named above, and
     * the rule, which alisa sim resolves (cli_rule_names) */
    for (int k = 0; k < p->n_keys && !rc; k++)
        if (strcmp(p->key[k], "trace"))
            rc = sweep_spec_set(&spec, p->key[k], p->value[k], e);
    if (!rc && rule)
        rc = sweep_spec_set(&spec, "rule", rule, e);
    if (!rc)
        rc = sweep_spec_set(&spec, "trace", trace, e);
    if (!rc && catalog)
        rc = sweep_spec_set(&spec, "catalog", catalog, e);
    struct sweep_point pt;
    memset(&pt, 0, sizeof pt);
    if (!rc)
        rc = sweep_point_make(&spec, 0, &pt, e);
    char *out = NULL, *err = NULL;
    int status = -1;
    double t0 = cli_now_s();
    if (!rc && run_child(pt.argc, pt.argv, &out, &err, &status))
        rc = err_set(e, ALISA_EIO, "[%s]: cannot run the simulation (fork or temporary files)",
                     p->id);
    double wall = cli_now_s() - t0;
    json_t *res = NULL;
    if (!rc) {
        p->ran = 1;
        res = status == 0 ? json_loads(out, 0, NULL) : NULL;
        json_t *tp = res ? json_object_get(res, "throughput_tok_s") : NULL;
        if (status != 0 || !res) {
            p->failed = 1;
            last_line(err && *err ? err : out, p->why, sizeof p->why);
        } else if (json_is_true(json_object_get(res, "oom"))) {
            p->oom = 1;
            const char *r = json_string_value(json_object_get(res, "oom_reason"));
            snprintf(p->why, sizeof p->why, "out of memory: %s", r ? r : "?");
        } else if (!json_is_number(tp) || !(json_number_value(tp) > 0)) {
            p->failed = 1;
            snprintf(p->why, sizeof p->why, "no throughput in the simulation's output");
        } else {
            p->predicted = json_number_value(tp);
            /* tokens over the whole time, the prompt's counted too: the
             * generated tokens' rate times (prompt + generated) / generated */
            json_t *pl = json_object_get(res, "prompt_len"), *gl = json_object_get(res, "gen_len");
            if (p->metric && !strcmp(p->metric, "prompt+generated") && json_integer_value(gl) > 0)
                p->predicted *= (double)(json_integer_value(pl) + json_integer_value(gl)) /
                                (double)json_integer_value(gl);
            p->error_pct = 100 * (p->predicted - p->published) / p->published;
        }
    }
    if (!rc && db)
        rc = store_row(db, p, index, res, pt.config, wall, e);
    json_decref(res);
    free(out);
    free(err);
    sweep_point_free(&pt);
    sweep_spec_free(&spec);
    return rc;
}

/* Mean absolute error (%) over the points of one set that ran; worst in *worst. */
static double set_mae(const struct ext_suite *s, const char *set, int *n, int *worst)
{
    double sum = 0;
    *n = 0;
    *worst = -1;
    for (int i = 0; i < s->n; i++) {
        const struct ext_point *p = &s->p[i];
        if (strcmp(p->set, set) || !p->ran || p->failed || p->oom)
            continue;
        sum += fabs(p->error_pct);
        (*n)++;
        if (*worst < 0 || fabs(p->error_pct) > fabs(s->p[*worst].error_pct))
            *worst = i;
    }
    return *n ? sum / *n : NAN;
}

static void report_text(const struct ext_suite *s, const char *rule)
{
    if (rule)
        printf("rule %s: hardware HW-%s, software SW-%s where the catalog has it\n", rule, rule,
               rule);
    printf("%-34s %-10s %-16s %-10s %10s %10s %8s\n", "point", "set", "system", "model",
           "published", "predicted", "error");
    for (int i = 0; i < s->n; i++) {
        const struct ext_point *p = &s->p[i];
        if (!strcmp(p->set, "excluded"))
            continue;
        printf("%-34s %-10s %-16s %-10s %10.4g ", p->id, p->set, point_opt(p, "system"),
               point_opt(p, "model"), p->published);
        if (p->failed || p->oom)
            printf("%10s %8s  %s\n", "-", "-", p->why);
        else
            printf("%10.4g %+7.1f%%\n", p->predicted, p->error_pct);
    }
    const char *sets[] = {"held-out", "in-sample"};
    for (int k = 0; k < 2; k++) {
        int n, w;
        double mae = set_mae(s, sets[k], &n, &w);
        if (n)
            printf("%s: mean absolute error %.1f%% over %d point%s (worst %s, %+.1f%%)\n", sets[k],
                   mae, n, n == 1 ? "" : "s", s->p[w].id, s->p[w].error_pct);
        else
            printf("%s: no points\n", sets[k]);
    }
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->p[i].set, "excluded"))
            printf("excluded %s: %s\n", s->p[i].id, s->p[i].reason);
}

static void report_json(const struct ext_suite *s, const char *rule)
{
    json_t *root = json_object(), *pts = json_array();
    json_object_set_new(root, "rule", rule ? json_string(rule) : json_null());
    for (int i = 0; i < s->n; i++) {
        const struct ext_point *p = &s->p[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:f}", "id", p->id, "set", p->set, "source",
                              p->source, "published_tok_s", p->published);
        if (!o)
            continue;
        if (p->reason)
            json_object_set_new(o, "reason", json_string(p->reason));
        if (p->ran && !p->failed && !p->oom) {
            json_object_set_new(o, "predicted_tok_s", json_real(p->predicted));
            json_object_set_new(o, "error_pct", json_real(p->error_pct));
        } else if (p->ran) {
            json_object_set_new(o, p->oom ? "oom" : "error", json_string(p->why));
        }
        json_array_append_new(pts, o);
    }
    json_object_set_new(root, "points", pts);
    const char *sets[] = {"held-out", "in-sample"};
    for (int k = 0; k < 2; k++) {
        int n, w;
        double mae = set_mae(s, sets[k], &n, &w);
        json_object_set_new(root, sets[k],
                            n ? json_pack("{s:f, s:i, s:s, s:f}", "mean_abs_error_pct", mae,
                                          "points", n, "worst", s->p[w].id, "worst_error_pct",
                                          s->p[w].error_pct)
                              : json_pack("{s:i}", "points", 0));
    }
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    printf("\n");
    json_decref(root);
}

int cmd_external(int argc, char **argv)
{
    struct external_opts o = {0};
    int first = 0;
    int req = cli_opts_parse(argc, argv, &external_command, &o, NULL, cmd_external_usage, &first);
    if (req)
        return req;
    const char *db_path = o.db, *catalog = o.catalog, *rule = o.rule;
    int json = o.json;
    if (o.peak && rule)
        return cli_usage_error(cmd_external_usage, "--peak is --rule peak: give one of them");
    if (o.peak)
        rule = "peak";
    if (rule && (!*rule || strlen(rule) > 40))
        return cli_usage_error(cmd_external_usage, "--rule '%s': a name of 1-40 characters", rule);
    if (first >= argc)
        return cli_usage_error(cmd_external_usage, "SUITE is required");
    if (first + 1 < argc)
        return cli_usage_error(cmd_external_usage, "unexpected argument '%s'", argv[first + 1]);
    const char *path = argv[first];
    struct alisa_err e = {{0}};
    struct ext_suite s;
    struct catalog cat;
    memset(&cat, 0, sizeof cat);
    int rc = suite_load(&s, path, &e);
    if (!rc && rule)
        rc = rule_check(&s, &cat, catalog, rule, &e);
    if (rc) {
        catalog_deinit(&cat);
        suite_free(&s);
        return cli_fail(&e);
    }
    char suite_dir[1024];
    snprintf(suite_dir, sizeof suite_dir, "%s", path);
    char *slash = strrchr(suite_dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(suite_dir, sizeof suite_dir, ".");
    const char *tmp = getenv("TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/alisa-external-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    struct results *db = NULL;
    if (!mkdtemp(dir))
        rc = err_set(&e, ALISA_EIO, "cannot make a temporary directory under %s: %s",
                     tmp && *tmp ? tmp : "/tmp", strerror(errno));
    else if (db_path)
        rc = results_open(&db, db_path, &e);
    int failed = 0;
    struct progress pg;
    progress_start(&pg, "validate-external", "points", (uint64_t)s.n, json);
    for (int i = 0; i < s.n && !rc; i++) {
        if (strcmp(s.p[i].set, "excluded") != 0) {
            rc = run_point(&s.p[i], i, dir, suite_dir, catalog, rule, db, &e);
            failed += s.p[i].failed;
        }
        progress_set(&pg, (uint64_t)i + 1);
    }
    progress_end(&pg);
    results_close(db);
    DIR *d = strstr(dir, "XXXXXX") ? NULL : opendir(dir);
    if (d) { /* the traces made here, and the directory */
        struct dirent *de;
        while ((de = readdir(d)))
            if (strncmp(de->d_name, "synthetic-", 10) == 0) {
                char t[1400];
                snprintf(t, sizeof t, "%s/%s", dir, de->d_name);
                unlink(t);
            }
        closedir(d);
        rmdir(dir);
    }
    catalog_deinit(&cat);
    if (rc) {
        suite_free(&s);
        return cli_fail(&e);
    }
    if (json)
        report_json(&s, rule);
    else
        report_text(&s, rule);
    suite_free(&s);
    if (failed) {
        fprintf(stderr, "alisa: error: %d point%s failed to simulate (above)\n", failed,
                failed == 1 ? "" : "s");
        return CLI_EXIT_FAIL;
    }
    return 0;
}
