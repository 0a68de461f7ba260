/* The generator's option table and parameters file (trace_params.h). */
#include "trace_params.h"

#include <ini.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define GO(name, kind, member, fitted, line, help)                                             \
    {name, TRACE_OPT_##kind, offsetof(struct trace_gen_params, member), fitted, line, help}
const struct trace_gen_opt trace_gen_opts[TRACE_GEN_N_OPTS] = {
    GO("seqs", U32, n_seqs, 0, 0, "sequences (default 1)"),
    GO("prompt-len", U32, prompt_len, 0, 0, "prompt tokens per sequence (default 128)"),
    GO("gen-len", U32, gen_len, 0, 0, "generated tokens per sequence (default 512)"),
    GO("prompt-rows", U32, prompt_rows, 0, 0, "prompt rows to record, counted back from the "
                                              "prompt's end (default: all)"),
    GO("seed", U64, seed, 0, 0, "GSL mt19937 seed (default 1); same seed, same bytes"),
    GO("layers", U32, n_layers, 0, 0, "layers to record (default: the model's)"),
    GO("sinks", U32, n_sinks, 1, 0, "attention-sink tokens at the start (default 4)"),
    GO("sink-logit", DOUBLE, sink_logit, 1, 0, "extra logit of sink tokens (default 3)"),
    GO("hh-alpha", DOUBLE, hh_alpha, 1, 0, "Pareto shape of token importance; smaller = "
                                           "heavier heavy hitters (default 1.5)"),
    GO("hh-scale", DOUBLE, hh_scale, 1, 0, "weight of log-importance in the logit (default 1)"),
    GO("hh-drift", DOUBLE, hh_drift, 1, 0, "per-step s.d. of the importance random walk "
                                           "(default 0.02)"),
    GO("recency-logit", DOUBLE, recency_logit, 1, 0, "logit boost of the newest token "
                                                     "(default 2)"),
    GO("recency-tokens", DOUBLE, recency_tokens, 1, 0, "e-folding distance of the recency "
                                                       "boost, tokens (default 16)"),
    GO("noise", DOUBLE, noise, 1, 0, "per-step logit noise s.d. (default 0.5)"),
    GO("sparsity-first", DOUBLE, sparsity_first, 0, 1, "target sparsity of layer 0 (default "
                                                       "0.80)"),
    GO("sparsity-last", DOUBLE, sparsity_last, 0, 1, "target sparsity of the last layer "
                                                     "(default 0.95)"),
    GO("sparsity-jitter", DOUBLE, sparsity_jitter, 1, 0, "per-row s.d. of the target "
                                                         "(default 0.02)"),
    GO("threshold", FLOAT, threshold, 1, 0, "sparse-row cutoff relative to the row max, "
                                            "0..0.01 (default 0.001; 0 = all rows dense)"),
};
_Static_assert(sizeof trace_gen_opts / sizeof trace_gen_opts[0] == TRACE_GEN_N_OPTS,
               "TRACE_GEN_N_OPTS counts the table");

int trace_gen_opt_set(struct trace_gen_params *p, size_t i, const char *opt, const char *val,
                      struct alisa_err *e)
{
    void *dst = (char *)p + trace_gen_opts[i].offset;
    double d;
    int bad = 0;
    switch (trace_gen_opts[i].kind) {
    case TRACE_OPT_U32: bad = cli_parse_u32(opt, val, dst, e); break;
    case TRACE_OPT_U64: bad = cli_parse_u64(opt, val, dst, e); break;
    case TRACE_OPT_DOUBLE: bad = cli_parse_double(opt, val, dst, e); break;
    case TRACE_OPT_FLOAT:
        if (!(bad = cli_parse_double(opt, val, &d, e)))
            *(float *)dst = (float)d;
        break;
    }
    return bad;
}

#define PARAMS_SECTION "generator"
#define PARAMS_PROFILE "sparsity-profile"
#define PARAMS_FROM "fitted-model-params"
#define PARAMS_MODEL "fitted-model"

int trace_params_write(FILE *f, const struct trace_gen_params *p, const char *fitted_model,
                       double fitted_params)
{
    fprintf(f, "[" PARAMS_SECTION "]\n");
    for (size_t i = 0; i < TRACE_GEN_N_OPTS; i++) {
        const struct trace_gen_opt *o = &trace_gen_opts[i];
        const void *src = (const char *)p + o->offset;
        if (!o->fitted)
            continue;
        if (o->kind == TRACE_OPT_U32)
            fprintf(f, "%s = %u\n", o->name, *(const uint32_t *)src);
        else if (o->kind == TRACE_OPT_FLOAT)
            fprintf(f, "%s = %.6g\n", o->name, (double)*(const float *)src);
        else
            fprintf(f, "%s = %.6g\n", o->name, *(const double *)src);
    }
    fprintf(f, PARAMS_PROFILE " =");
    for (uint32_t k = 0; k < p->n_profile; k++) /* 10 a line: inih reads 200 characters */
        fprintf(f, "%s%s%.4f", k ? "," : "", k && k % 10 == 0 ? "\n   " : " ", p->profile[k]);
    fprintf(f, "\n" PARAMS_MODEL " = %s\n" PARAMS_FROM " = %.4g\n", fitted_model, fitted_params);
    return ferror(f) ? -1 : 0;
}

struct params_read {
    struct trace_gen_params *p;
    double *fitted_params;
    const char *path;
    struct alisa_err *e;
    int profile_seen;
};

static int params_profile(struct params_read *r, const char *opt, const char *val)
{
    char buf[1024];
    if (strlen(val) >= sizeof buf)
        return err_set(r->e, ALISA_EINVAL, "%s: longer than %zu characters", opt, sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", val);
    uint32_t n = r->p->n_profile; /* a continuation line appends (inih repeats the key) */
    for (char *save = NULL, *tok = strtok_r(buf, ", \t", &save); tok;
         tok = strtok_r(NULL, ", \t", &save)) {
        if (n == TRACE_GEN_PROFILE_MAX)
            return err_set(r->e, ALISA_EINVAL, "%s: more than %u knots", opt,
                           TRACE_GEN_PROFILE_MAX);
        if (cli_parse_double(opt, tok, &r->p->profile[n], r->e))
            return -1;
        n++;
    }
    if (!n)
        return err_set(r->e, ALISA_EINVAL, "%s: empty (expected 2 to %u knots)", opt,
                       TRACE_GEN_PROFILE_MAX);
    r->p->n_profile = n;
    return 0;
}

/* inih's handler: 1 on success, 0 on error (e says why; inih gives the
 * first bad line, so after one error the rest are passed over). */
static int params_key(void *user, const char *section, const char *name, const char *val)
{
    struct params_read *r = user;
    if (r->e->msg[0])
        return 1;
    char opt[300];
    snprintf(opt, sizeof opt, "%s: %s", r->path, name);
    if (strcmp(section, PARAMS_SECTION)) {
        err_set(r->e, ALISA_EINVAL, "%s: key in section [%s]; expected [" PARAMS_SECTION "]",
                opt, section);
        return 0;
    }
    if (!strcmp(name, PARAMS_PROFILE)) {
        if (!r->profile_seen)
            r->p->n_profile = 0;
        r->profile_seen = 1;
        return params_profile(r, opt, val) == 0;
    }
    if (!strcmp(name, PARAMS_FROM))
        return cli_parse_double(opt, val, r->fitted_params, r->e) == 0;
    if (!strcmp(name, PARAMS_MODEL))
        return 1;
    for (size_t i = 0; i < TRACE_GEN_N_OPTS; i++)
        if (!strcmp(trace_gen_opts[i].name, name))
            return trace_gen_opt_set(r->p, i, opt, val, r->e) == 0;
    err_set(r->e, ALISA_EINVAL, "%s: unknown key (alisa trace gen --help lists them)", opt);
    return 0;
}

int trace_params_read(const char *path, struct trace_gen_params *p, double *fitted_params,
                      struct alisa_err *e)
{
    *fitted_params = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(e, ALISA_EIO, "%s: cannot read it", path);
    if (!S_ISREG(st.st_mode))
        return err_set(e, ALISA_EIO, "%s: not a regular file", path);
    struct params_read r = {p, fitted_params, path, e, 0};
    e->msg[0] = 0;
    int line = ini_parse(path, params_key, &r);
    if (line < 0)
        return err_set(e, ALISA_EIO, "%s: cannot read it", path);
    if (line > 0) {
        char msg[sizeof e->msg];
        if (e->msg[0])
            snprintf(msg, sizeof msg, "%s", e->msg);
        else
            snprintf(msg, sizeof msg, "%s: not INI syntax, or a line over 200 characters", path);
        return err_set(e, ALISA_EINVAL, "%s (line %d)", msg, line);
    }
    if (*fitted_params < 0 || !isfinite(*fitted_params))
        return err_set(e, ALISA_EINVAL, "%s: " PARAMS_FROM " %g: expected a parameter count",
                       path, *fitted_params);
    struct alisa_err v = {{0}};
    if (trace_gen_validate(p, &v))
        return err_set(e, ALISA_EINVAL, "%s: %s", path, v.msg);
    return 0;
}
