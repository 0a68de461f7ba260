/* Sweep spec parsing and point enumeration (contract in sweep_spec.h).
 *
 * Points are numbered like an odometer over [vary] in file order, the last
 * key fastest, so a spec's point k is the same on every machine; the hash
 * covers the sweep name, the command and every parameter, so a database
 * row identifies one run of one sweep.
 */
#include "sweep_spec.h"

#include "catalog.h"

#include <errno.h>
#include <ini.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* inih keeps a continued key's name in a 50-byte buffer. */
#define INIH_NAME_CUT 49

/* The commands a sweep may run: alisa's with --json, or exec (a peer's
 * program). */
static const char *const sweep_commands[] = {"sim", "plan",  "eval",      "fidelity", "validate",
                                             "run", "serve", "serve-run", "exec",     NULL};
#define SWEEP_COMMAND_LIST "sim, plan, eval, fidelity, validate, run, serve, serve-run or exec"

struct spec_ctx {
    struct sweep_spec *s;
    char dir[PATH_MAX]; /* directory of the spec, for relative paths */
    char msg[256];   /* first error */
    int oom;
};

/* 1: the key's values are paths (relative ones are to the spec's
 * directory); 2: paths when they hold a '/' (a model is a catalog name or a
 * file). */
static int is_path_key(const char *key)
{
    if (strcmp(key, "model") == 0)
        return 2;
    return strcmp(key, "trace") == 0 || strcmp(key, "timeline") == 0 || strcmp(key, "log") == 0 ||
           strcmp(key, "text") == 0 || strcmp(key, "tokenizer") == 0 ||
           strcmp(key, "profile") == 0 || strcmp(key, "steps") == 0 ||
           strcmp(key, "attention-from") == 0 || strcmp(key, "timings") == 0 ||
           strcmp(key, "requests-csv") == 0 || strcmp(key, "per-request") == 0 ||
           strcmp(key, "dump-requests") == 0;
}

/* Splits value on whitespace into p->values. */
static int split_values(struct sweep_param *p, const char *value, const char *dir, int path_key)
{
    char *copy = strdup(value);
    if (!copy)
        return -1;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char **v = realloc(p->values, (p->n_values + 1) * sizeof *v);
        if (!v) {
            free(copy);
            return -1;
        }
        p->values = v;
        char buf[1100];
        if (path_key && tok[0] != '/' && (path_key == 1 || strchr(tok, '/')))
            snprintf(buf, sizeof buf, "%s/%s", dir, tok);
        else
            snprintf(buf, sizeof buf, "%s", tok);
        if (!(p->values[p->n_values] = strdup(buf))) {
            free(copy);
            return -1;
        }
        p->n_values++;
    }
    free(copy);
    return 0;
}

static struct sweep_param *find_param(struct sweep_param *arr, uint32_t n, const char *key)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(arr[i].key, key) == 0)
            return &arr[i];
    return NULL;
}

/* One key of the [sweep] section (name, command, program, timeout) into
 * c's spec: 1, or 0 with c->msg saying why (inih's handler convention). */
static int sweep_key(struct spec_ctx *c, const char *name, const char *value)
{
    struct sweep_spec *s = c->s;
    if (strcmp(name, "name") == 0) {
        if (!value[0] || strlen(value) >= sizeof s->name || strchr(value, ' ')) {
            snprintf(c->msg, sizeof c->msg, "name '%s' must be one word under %zu characters",
                     value, sizeof s->name);
            return 0;
        }
        strcpy(s->name, value);
        return 1;
    }
    if (strcmp(name, "command") == 0) {
        int known = 0;
        for (size_t i = 0; sweep_commands[i] && !known; i++)
            known = strcmp(value, sweep_commands[i]) == 0;
        if (!known) {
            snprintf(c->msg, sizeof c->msg, "command '%s' unknown (" SWEEP_COMMAND_LIST ")",
                     value);
            return 0;
        }
        strcpy(s->command, value);
        return 1;
    }
    if (strcmp(name, "program") == 0) {
        int n = value[0] == '/' ? snprintf(s->program, sizeof s->program, "%s", value)
                                : snprintf(s->program, sizeof s->program, "%s/%s", c->dir,
                                           value);
        if (!value[0] || n < 0 || (size_t)n >= sizeof s->program) {
            snprintf(c->msg, sizeof c->msg, "program '%.200s': empty or too long", value);
            return 0;
        }
        return 1;
    }
    if (strcmp(name, "timeout") == 0) {
        char *end = NULL;
        errno = 0;
        unsigned long long t = strtoull(value, &end, 10);
        if (errno || end == value || *end || value[0] == '-' || t > 7 * 86400) {
            snprintf(c->msg, sizeof c->msg, "timeout '%.60s': expected seconds in 0..%d",
                     value, 7 * 86400);
            return 0;
        }
        s->timeout_s = (uint32_t)t;
        return 1;
    }
    snprintf(c->msg, sizeof c->msg,
             "[sweep]: unknown key '%s' (name, command, program, timeout)", name);
    return 0;
}

static int spec_handler(void *user, const char *section, const char *name, const char *value)
{
    struct spec_ctx *c = user;
    struct sweep_spec *s = c->s;
    if (c->msg[0])
        return 1;
    if (strcmp(section, "sweep") == 0)
        return sweep_key(c, name, value);
    int fixed = strcmp(section, "fixed") == 0, vary = strcmp(section, "vary") == 0;
    if (!fixed && !vary) {
        snprintf(c->msg, sizeof c->msg, "unknown section [%s] (sweep, fixed, vary)",
                 section[0] ? section : "");
        return 0;
    }
    if (!name[0]) {
        snprintf(c->msg, sizeof c->msg, "[%s]: a parameter with an empty name", section);
        return 0;
    }
    /* an indented line under a [vary] key continues its list (inih hands it
     * over under the same name, cut to its 49-character name buffer, which
     * may end on a comma): the values append */
    uint32_t first = 0;
    struct sweep_param *p = NULL;
    const char *last = s->n_vary ? s->vary[s->n_vary - 1].key : "";
    int cont = vary && s->n_vary &&
               (strcmp(last, name) == 0 ||
                (strlen(name) == INIH_NAME_CUT && strlen(last) > INIH_NAME_CUT &&
                 strncmp(last, name, INIH_NAME_CUT) == 0));
    if (!cont && (strlen(name) >= sizeof s->fixed[0].key || strcmp(name, "json") == 0 ||
                  strcmp(name, "help") == 0 || name[0] == ',' || name[strlen(name) - 1] == ',')) {
        snprintf(c->msg, sizeof c->msg, "parameter '%s' is not allowed", name);
        return 0;
    }
    if (cont) {
        p = &s->vary[s->n_vary - 1];
        first = p->n_values;
    } else if (find_param(s->fixed, s->n_fixed, name) || find_param(s->vary, s->n_vary, name)) {
        snprintf(c->msg, sizeof c->msg, "parameter '%s' given twice", name);
        return 0;
    } else {
        struct sweep_param **arr = fixed ? &s->fixed : &s->vary;
        uint32_t *n = fixed ? &s->n_fixed : &s->n_vary;
        struct sweep_param *grown = realloc(*arr, (*n + 1) * sizeof **arr);
        if (!grown) {
            c->oom = 1;
            snprintf(c->msg, sizeof c->msg, "out of memory");
            return 0;
        }
        *arr = grown;
        p = &grown[(*n)++];
        memset(p, 0, sizeof *p);
        strcpy(p->key, name);
    }
    name = p->key; /* the whole key: a continuation line's name comes cut to 49 characters */
    if (split_values(p, value, c->dir, is_path_key(name))) {
        c->oom = 1;
        snprintf(c->msg, sizeof c->msg, "out of memory");
        return 0;
    }
    if (p->n_values == 0 || (fixed && p->n_values != 1)) {
        snprintf(c->msg, sizeof c->msg, "%s '%s' needs %s, got %u values", section, name,
                 fixed ? "exactly one value" : "at least one value", p->n_values);
        return 0;
    }
    /* linked parameters: "a,b = x1,y1 x2,y2" vary together */
    size_t arity = 1;
    for (const char *k = name; *k; k++)
        arity += *k == ',';
    if (arity > 1 && fixed) {
        snprintf(c->msg, sizeof c->msg, "linked parameters '%s' belong in [vary]", name);
        return 0;
    }
    for (uint32_t i = first; i < p->n_values; i++) {
        size_t commas = 1;
        for (const char *v = p->values[i]; *v; v++)
            commas += *v == ',';
        if (commas != arity) {
            snprintf(c->msg, sizeof c->msg, "'%s' links %zu parameters but value '%s' has %zu",
                     name, arity, p->values[i], commas);
            return 0;
        }
    }
    return 1;
}

void sweep_spec_free(struct sweep_spec *s)
{
    for (uint32_t i = 0; i < s->n_fixed; i++) {
        for (uint32_t j = 0; j < s->fixed[i].n_values; j++)
            free(s->fixed[i].values[j]);
        free(s->fixed[i].values);
    }
    for (uint32_t i = 0; i < s->n_vary; i++) {
        for (uint32_t j = 0; j < s->vary[i].n_values; j++)
            free(s->vary[i].values[j]);
        free(s->vary[i].values);
    }
    free(s->fixed);
    free(s->vary);
    memset(s, 0, sizeof *s);
}

int sweep_spec_load(struct sweep_spec *s, const char *path, struct alisa_err *e)
{
    memset(s, 0, sizeof *s);
    struct spec_ctx c = {.s = s};
    snprintf(s->path, sizeof s->path, "%s", path);
    char resolved[PATH_MAX];
    if (!realpath(path, resolved))
        return err_set(e, ALISA_EIO, "%s: cannot open sweep spec", path);
    snprintf(c.dir, sizeof c.dir, "%s", resolved);
    char *slash = strrchr(c.dir, '/');
    if (slash)
        *slash = 0;
    int rc = ini_check_lines(path, e);
    if (rc)
        return rc;
    int line = ini_parse(path, spec_handler, &c);
    if (line == -1)
        rc = err_set(e, ALISA_EIO, "%s: cannot open sweep spec", path);
    else if (line == -2 || c.oom)
        rc = err_set(e, ALISA_ENOMEM, "%s: out of memory", path);
    else if (line > 0)
        rc = err_set(e, ALISA_EINVAL, "%s:%d: %s", path, line,
                     c.msg[0] ? c.msg : "syntax error (expected [section] or key = value)");
    else if (!s->name[0] || !s->command[0])
        rc = err_set(e, ALISA_EINVAL, "%s: [sweep] needs a name and a command ("
                     SWEEP_COMMAND_LIST ")", path);
    else if ((strcmp(s->command, "exec") == 0) != (s->program[0] != 0))
        rc = err_set(e, ALISA_EINVAL, "%s: [sweep] %s", path,
                     s->program[0] ? "program is for command = exec only"
                                   : "command = exec needs a program");
    if (rc) {
        sweep_spec_free(s);
        return rc;
    }
    s->n_points = 1;
    for (uint32_t i = 0; i < s->n_vary; i++) {
        s->n_points *= s->vary[i].n_values;
        if (s->n_points > 10000000) {
            sweep_spec_free(s);
            return err_set(e, ALISA_EINVAL, "%s: [vary] makes more than 10 million points", path);
        }
    }
    return 0;
}

void sweep_point_free(struct sweep_point *p)
{
    if (p->argv)
        for (int i = 0; i < p->argc; i++)
            free(p->argv[i]);
    free(p->argv);
    free(p->config);
    memset(p, 0, sizeof *p);
}

/* Appends "--key" [value] for one parameter (flags: "true" adds the bare
 * option, "false" nothing). */
static int push_one(struct sweep_point *p, const char *key, const char *value)
{
    if (strcmp(value, "false") == 0)
        return 0;
    char opt[sizeof ((struct sweep_param *)0)->key + 2]; /* "--" and a key */
    snprintf(opt, sizeof opt, "--%s", key);
    if (!(p->argv[p->argc] = strdup(opt)))
        return -1;
    p->argc++;
    if (strcmp(value, "true") == 0)
        return 0;
    if (!(p->argv[p->argc] = strdup(value)))
        return -1;
    p->argc++;
    return 0;
}

/* push_one for each (key, value) pair of a possibly linked parameter, and
 * records them in the canonical params object. */
static int push_opt(struct sweep_point *p, json_t *params, const char *key, const char *value)
{
    char k[256], v[1100];
    snprintf(k, sizeof k, "%s", key);
    snprintf(v, sizeof v, "%s", value);
    char *ks = NULL, *vs = NULL;
    char *kt = strtok_r(k, ",", &ks), *vt = strtok_r(v, ",", &vs);
    for (; kt && vt; kt = strtok_r(NULL, ",", &ks), vt = strtok_r(NULL, ",", &vs)) {
        if (push_one(p, kt, vt))
            return -1;
        json_object_set_new(params, kt, json_string(vt));
    }
    return 0;
}

void sweep_hash(const char *text, char out[SWEEP_HASH_LEN + 1])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        h ^= *c;
        h *= 1099511628211ull;
    }
    snprintf(out, SWEEP_HASH_LEN + 1, "%016llx", (unsigned long long)h);
}

int sweep_point_make(const struct sweep_spec *s, uint64_t k, struct sweep_point *p,
                     struct alisa_err *e)
{
    memset(p, 0, sizeof *p);
    if (k >= s->n_points)
        return err_set(e, ALISA_EINVAL, "%s: point %llu out of range (0..%llu)", s->path,
                       (unsigned long long)k, (unsigned long long)s->n_points - 1);
    p->index = k;
    size_t n_params = s->n_fixed;
    for (uint32_t i = 0; i < s->n_vary; i++)
        for (const char *c = s->vary[i].key; *c; c++)
            n_params += *c == ',';
    n_params += s->n_vary;
    p->argv = calloc(2 * n_params + 3, sizeof *p->argv);
    json_t *params = json_object(), *root = NULL;
    int exec = strcmp(s->command, "exec") == 0;
    if (!p->argv || !params || !(p->argv[p->argc++] = strdup(exec ? s->program : s->command)))
        goto oom;
    for (uint32_t i = 0; i < s->n_fixed; i++) {
        if (push_opt(p, params, s->fixed[i].key, s->fixed[i].values[0]))
            goto oom;
    }
    /* odometer: the last [vary] key turns fastest */
    const char **chosen = calloc(s->n_vary ? s->n_vary : 1, sizeof *chosen);
    if (!chosen)
        goto oom;
    uint64_t rest = k;
    for (uint32_t i = s->n_vary; i-- > 0;) {
        chosen[i] = s->vary[i].values[rest % s->vary[i].n_values];
        rest /= s->vary[i].n_values;
    }
    for (uint32_t i = 0; i < s->n_vary; i++) {
        if (push_opt(p, params, s->vary[i].key, chosen[i])) {
            free(chosen);
            goto oom;
        }
    }
    free(chosen);
    if (!(p->argv[p->argc++] = strdup("--json")))
        goto oom;
    root = exec ? json_pack("{s:s, s:s, s:s, s:o}", "sweep", s->name, "command", s->command,
                            "program", s->program, "params", params)
                : json_pack("{s:s, s:s, s:o}", "sweep", s->name, "command", s->command, "params",
                            params);
    params = NULL;
    if (!root || !(p->config = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT)))
        goto oom;
    json_decref(root);
    sweep_hash(p->config, p->hash);
    return 0;
oom:
    json_decref(params);
    json_decref(root);
    sweep_point_free(p);
    return err_set(e, ALISA_ENOMEM, "out of memory building point %llu", (unsigned long long)k);
}

/* Replaces *slot with a copy of v; -1 when out of memory (slot unchanged). */
static int replace_str(char **slot, const char *v)
{
    char *c = strdup(v);
    if (!c)
        return -1;
    free(*slot);
    *slot = c;
    return 0;
}

/* value with component idx of a linked value (commas) replaced by v, newly
 * allocated; NULL when out of memory. */
static char *with_component(const char *linked, size_t idx, const char *v)
{
    size_t cap = strlen(linked) + strlen(v) + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = 0;
    size_t i = 0;
    for (const char *p = linked;; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        size_t used = strlen(out);
        if (i == idx)
            snprintf(out + used, cap - used, "%s%s", i ? "," : "", v);
        else
            snprintf(out + used, cap - used, "%s%.*s", i ? "," : "", (int)len, p);
        if (!comma)
            break;
        p = comma + 1;
    }
    return out;
}

/* Position of key among a linked key's names, or -1. */
static long linked_index(const char *linked, const char *key)
{
    size_t n = strlen(key);
    long i = 0;
    for (const char *p = linked;; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, key, n) == 0)
            return i;
        if (!comma)
            return -1;
        p = comma + 1;
    }
}

int sweep_spec_set(struct sweep_spec *s, const char *key, const char *value, struct alisa_err *e)
{
    if (!key[0] || strlen(key) >= sizeof s->fixed[0].key || strchr(key, ',') ||
        strcmp(key, "json") == 0 || strcmp(key, "help") == 0)
        return err_set(e, ALISA_EINVAL, "--set '%s': parameter not allowed", key);
    if (!value[0] || strpbrk(value, " \t\n,"))
        return err_set(e, ALISA_EINVAL, "--set %s='%.100s': expected one word without commas",
                       key, value);
    char buf[1100], cwd[PATH_MAX];
    const char *v = value;
    int path_key = strcmp(key, "program") == 0 ? 1 : is_path_key(key);
    if (path_key && value[0] != '/' && (path_key == 1 || strchr(value, '/'))) {
        if (!getcwd(cwd, sizeof cwd))
            return err_set(e, ALISA_EIO, "--set %s: cannot read the working directory", key);
        int n = snprintf(buf, sizeof buf, "%s/%s", cwd, value);
        if (n < 0 || (size_t)n >= sizeof buf)
            return err_set(e, ALISA_EINVAL, "--set %s: path too long", key);
        v = buf;
    }
    if (strcmp(key, "program") == 0) {
        if (strcmp(s->command, "exec") != 0)
            return err_set(e, ALISA_EINVAL, "--set program: %s is not a command = exec sweep",
                           s->path);
        size_t n = strlen(v);
        if (n >= sizeof s->program)
            return err_set(e, ALISA_EINVAL, "--set program: path too long");
        memcpy(s->program, v, n + 1);
        return 0;
    }
    struct sweep_param *p = find_param(s->fixed, s->n_fixed, key);
    if (p)
        return replace_str(&p->values[0], v) ? err_set(e, ALISA_ENOMEM, "out of memory") : 0;
    for (uint32_t i = 0; i < s->n_vary; i++) {
        long idx = linked_index(s->vary[i].key, key);
        if (idx < 0)
            continue;
        /* build every new value first, so a failure leaves s as it was */
        char **fresh = calloc(s->vary[i].n_values, sizeof *fresh);
        for (uint32_t j = 0; fresh && j < s->vary[i].n_values; j++)
            if (!(fresh[j] = with_component(s->vary[i].values[j], (size_t)idx, v))) {
                for (uint32_t k = 0; k < j; k++)
                    free(fresh[k]);
                free(fresh);
                fresh = NULL;
            }
        if (!fresh)
            return err_set(e, ALISA_ENOMEM, "out of memory");
        for (uint32_t j = 0; j < s->vary[i].n_values; j++) {
            free(s->vary[i].values[j]);
            s->vary[i].values[j] = fresh[j];
        }
        free(fresh);
        return 0;
    }
    struct sweep_param *grown = realloc(s->fixed, (s->n_fixed + 1) * sizeof *grown);
    if (!grown)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    s->fixed = grown;
    p = &grown[s->n_fixed];
    memset(p, 0, sizeof *p);
    snprintf(p->key, sizeof p->key, "%s", key);
    if (!(p->values = malloc(sizeof *p->values)) || !(p->values[0] = strdup(v))) {
        free(p->values);
        p->values = NULL;
        return err_set(e, ALISA_ENOMEM, "out of memory");
    }
    p->n_values = 1;
    s->n_fixed++;
    return 0;
}

void sweep_shell_quote(FILE *f, const char *arg)
{
    fputc('\'', f);
    for (const char *c = arg; *c; c++) {
        if (*c == '\'')
            fputs("'\\''", f);
        else
            fputc(*c, f);
    }
    fputc('\'', f);
}
