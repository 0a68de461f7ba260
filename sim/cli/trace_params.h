/* The generator's parameters file, shared by `alisa trace gen --params` and
 * `alisa trace fit -o` (both in sim/cli; the keys are trace gen's option
 * names, from the one option table in cmd_trace.c).
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

#include <stdio.h>

#include "err.h"
#include "trace_gen.h"

/* Writes p's fitted terms (sinks, the logit terms, the jitter, the profile)
 * and the fitted model's name and parameters as the file above. Returns 0,
 * or -1 when a write failed. */
int trace_params_write(FILE *f, const struct trace_gen_params *p, const char *fitted_model,
                       double fitted_params);

/* Applies path's keys to p; *fitted_params gets fitted-model-params (0
 * when absent). A key outside [generator], an unknown key or a bad value is
 * an error naming the file, key, value and line. */
int trace_params_read(const char *path, struct trace_gen_params *p, double *fitted_params,
                      struct alisa_err *e);

/* `alisa trace fit` (cmd_trace_fit.c). */
int trace_fit_cmd(int argc, char **argv);
void trace_fit_usage(FILE *out);

#endif
