/* The synthetic generator's options, one table for `alisa trace gen`'s
 * command line and for its parameters file, which `alisa trace fit -o`
 * writes and `alisa trace gen --params` reads:
 *
 *   [generator]
 *   sink-logit = 2.1              any trace gen option, as typed after --
 *   sparsity-profile = 0.1, 0.9   the target by depth (trace_gen.h); inih
 *      0.95, 0.97                 reads 200 characters a line, so a long
 *                                 profile goes on indented continuation lines
 *   fitted-model = NAME           what the parameters were fitted on
 *   fitted-model-params = 1.5e8   its parameters, for the scaling rule
 */
#ifndef ALISA_TRACE_PARAMS_H
#define ALISA_TRACE_PARAMS_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"
#include "trace_gen.h"

enum trace_opt_kind { TRACE_OPT_U32, TRACE_OPT_U64, TRACE_OPT_DOUBLE, TRACE_OPT_FLOAT };

struct trace_gen_opt {
    const char *name;   /* long option and file key */
    enum trace_opt_kind kind;
    size_t offset;      /* into struct trace_gen_params */
    int fitted;         /* 1: a term `alisa trace fit` writes */
    int line;           /* 1: sets the first/last line, replacing a profile */
    const char *help;
};

#define TRACE_GEN_N_OPTS 18
extern const struct trace_gen_opt trace_gen_opts[TRACE_GEN_N_OPTS];

/* Parses option i's value val into p; opt names it in messages. */
int trace_gen_opt_set(struct trace_gen_params *p, size_t i, const char *opt, const char *val,
                      struct alisa_err *e);

/* Writes p's fitted terms (the options marked fitted, the threshold the fit
 * simulated at, the profile) and the fitted model's name and parameters as
 * the file above. Returns 0, or -1 when a write failed. */
int trace_params_write(FILE *f, const struct trace_gen_params *p, const char *fitted_model,
                       double fitted_params);

/* Applies the regular file path's keys to p (whose shape is set), then
 * checks the result as trace_gen_validate does; *fitted_params gets
 * fitted-model-params (0 when absent). A key outside [generator], an
 * unknown key, a bad or out-of-range value or an empty profile is an error
 * naming the file, the key, the value and the first bad line. A repeated
 * sparsity-profile key continues the profile, as its continuation lines do
 * (inih passes both alike). */
int trace_params_read(const char *path, struct trace_gen_params *p, double *fitted_params,
                      struct alisa_err *e);

#endif
