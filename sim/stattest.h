/* Tests of a simulator's predicted distribution against a measured one
 * (issue 49, item 3: errors as the field reports them, after LLMServingSim
 * 2.0's two-sample KS and TOST equivalence checks against a real engine).
 *
 * stattest_ks2: the two-sample Kolmogorov-Smirnov statistic D = the largest
 * gap between the samples' empirical CDFs (scipy.stats.ks_2samp's
 * statistic), and its asymptotic p-value, the limiting Kolmogorov
 * distribution's survival at sqrt(n m / (n + m)) D (scipy.stats.kstwobign;
 * ks_2samp(method="asymp") refines it with the finite-n distribution at n =
 * round(n m / (n + m)), which matters below a few dozen steps). A small p
 * says the step times are distributed differently.
 *
 * stattest_tost: Schuirmann's two one-sided tests for equivalence of means
 * with Welch's t (unequal variances, Welch-Satterthwaite degrees of
 * freedom, as statsmodels' ttost_ind(usevar="unequal")): H0 is mean(pred) -
 * mean(meas) <= -margin or >= +margin, margin = rel x mean(meas); the
 * p-value is the larger of the two one-sided tests'. A small p (below the
 * chosen alpha, 0.05 by convention) says the means are equivalent within
 * the margin.
 *
 * Both read their inputs only; KS sorts copies (memory: n + m doubles).
 * Errors: fewer than 2 values in a sample (1 for KS), a value not finite,
 * no memory. */
#ifndef ALISA_STATTEST_H
#define ALISA_STATTEST_H

#include <stddef.h>

#include "err.h"

int stattest_ks2(const double *a, size_t na, const double *b, size_t nb, double *d, double *p,
                 struct alisa_err *e);
/* The Kolmogorov distribution's survival function, P(K > x), x >= 0. */
double stattest_kolmogorov_q(double x);
int stattest_tost(const double *meas, size_t nm, const double *pred, size_t np, double rel,
                  double *p, struct alisa_err *e);

#endif
