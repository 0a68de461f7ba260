/* Small fits of calibration figures to their cost terms: a time
 * measured at two or three operating points split into the fixed and
 * proportional parts the cost model prices. Kept apart from calibrate.c
 * because GSL's linear algebra brings its own CBLAS declarations, which
 * clash with OpenBLAS's cblas.h.
 *
 * Also the median every calibration figure is taken as.
 *
 * Stateless; nothing here can fail (a degenerate or noisy system falls back
 * as each function says).
 */
#ifndef ALISA_FIT_H
#define ALISA_FIT_H

#include <stddef.h>

/* t = a + x b through (x1, t1) and (x2, t2): a the fixed part, b the slope.
 * When noise makes either negative: a = 0 and b = t2 / x2. */
void fit_two_terms(double x1, double t1, double x2, double t2, double *a, double *b);

/* t = a + B s + B c b through three points (B[i], c[i], t[i]): a per layer,
 * s per stream, b per stream and context token, each >= 0: the
 * non-negative least-squares solution (exact when the exact solve's terms
 * are all >= 0; otherwise the best fit of the terms that stay, the rest 0).
 * When the points cannot separate two terms (the same context everywhere)
 * the per-token one is kept. All 0 if nothing fits (GSL failed). */
void fit_three_terms(const double B[3], const double c[3], const double t[3], double *a,
                     double *s, double *b);

/* The scheduler's four terms through n points (at most FIT_SCHED_MAX):
 * t = a + B s + B c b + B k d, with a per layer, s per stream, b per stream
 * and context token, d per stream and attended token (x = {a, s, b, d}),
 * each >= 0, by non-negative least squares as fit_three_terms. Where the
 * points cannot tell context from attended tokens (a selection that
 * attends everything) d is 0 and the three terms are fitted. Cannot fail
 * (all 0 if nothing fits). */
#define FIT_SCHED_MAX 8
void fit_sched_terms(size_t n, const double *B, const double *c, const double *k,
                     const double *t, double x[4]);

/* The dense cache's attention terms through n points (at most
 * FIT_SCHED_MAX): t = a + R r + pp p + dp d, with a per layer, r per row,
 * p per prompt pair, d per decode row's attended token (x = {a, r, p, d}),
 * each >= 0, by non-negative least squares as fit_three_terms. Cannot fail
 * (all 0 if nothing fits). */
void fit_dense_attn_terms(size_t n, const double *R, const double *pp, const double *dp,
                          const double *t, double x[4]);

/* The median of x (n > 0), sorting x in place (GSL). Cannot fail. */
double fit_median(double *x, size_t n);

#endif
