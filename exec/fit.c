/* Fits of calibration figures to cost terms (contract in fit.h): a
 * two-point line by hand; three terms through three points by non-negative
 * least squares, every subset of the terms fitted with GSL's SVD and the
 * best one whose terms are all >= 0 kept. Negative terms are noise on a
 * shared machine, never a real cost.
 */
#include "fit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>

void fit_two_terms(double x1, double t1, double x2, double t2, double *a, double *b)
{
    *b = (t2 - t1) / (x2 - x1);
    *a = t1 - x1 * *b;
    if (*a < 0 || *b < 0) {
        *a = 0;
        *b = t2 / x2;
    }
}

/* Least squares of t over the columns of [1, B, B c] that `cols` selects
 * (bit j: column j), by GSL's truncated SVD. Writes the three terms (0 for
 * the columns left out) and the sum of squared residuals; returns 0, or -1
 * when those columns are rank-deficient (the same context everywhere) or
 * GSL fails. */
static int fit_columns(const double B[3], const double c[3], const double t[3], unsigned cols,
                       double x[3], double *chisq)
{
    size_t p = 0, rank = 0, at[3];
    for (size_t j = 0; j < 3; j++)
        if (cols & (1u << j))
            at[p++] = j;
    gsl_matrix *X = gsl_matrix_alloc(3, p), *cov = gsl_matrix_alloc(p, p);
    gsl_vector *y = gsl_vector_alloc(3), *coef = gsl_vector_alloc(p);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(3, p);
    int rc = -1;
    gsl_error_handler_t *handler = gsl_set_error_handler_off(); /* an error is a return */
    if (X && cov && y && coef && w) {
        for (size_t i = 0; i < 3; i++) {
            const double col[3] = {1, B[i], B[i] * c[i]};
            for (size_t k = 0; k < p; k++)
                gsl_matrix_set(X, i, k, col[at[k]]);
            gsl_vector_set(y, i, t[i]);
        }
        if (!gsl_multifit_linear_tsvd(X, y, 1e-9, coef, cov, chisq, &rank, w) && rank == p) {
            x[0] = x[1] = x[2] = 0;
            for (size_t k = 0; k < p; k++)
                x[at[k]] = gsl_vector_get(coef, k);
            rc = 0;
        }
    }
    gsl_set_error_handler(handler);
    gsl_multifit_linear_free(w);
    gsl_vector_free(coef);
    gsl_vector_free(y);
    gsl_matrix_free(cov);
    gsl_matrix_free(X);
    return rc;
}

void fit_three_terms(const double B[3], const double c[3], const double t[3], double *a,
                     double *s, double *b)
{
    /* the subsets of terms, the whole model first; on equal residuals the
     * earlier wins (a term at 0 is a term left out) */
    static const unsigned subsets[7] = {7, 5, 6, 3, 4, 2, 1};
    double best[3] = {0, 0, 0}, best_chisq = INFINITY, scale = 0;
    for (int i = 0; i < 3; i++)
        scale += t[i] * t[i];
    for (int k = 0; k < 7; k++) {
        double x[3], chisq;
        if (fit_columns(B, c, t, subsets[k], x, &chisq) || x[0] < 0 || x[1] < 0 || x[2] < 0)
            continue;
        if (chisq < best_chisq - 1e-12 * scale) {
            best_chisq = chisq;
            best[0] = x[0], best[1] = x[1], best[2] = x[2];
        }
    }
    *a = best[0], *s = best[1], *b = best[2];
}

double fit_median(double *x, size_t n)
{
    gsl_sort(x, 1, n);
    return gsl_stats_median_from_sorted_data(x, 1, n);
}
