/* Fits of calibration figures to cost terms (contract in fit.h): a
 * two-point line by hand; three or four terms through as many points by
 * non-negative least squares, every subset of the terms fitted with GSL's SVD and the
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

/* Least squares of t (n points) over the columns of X (n x 4, row-major)
 * that `cols` selects (bit j: column j), by GSL's truncated SVD. Writes
 * the four terms (0 for the columns left out) and the sum of squared
 * residuals; returns 0, or -1 when those columns are rank-deficient (the
 * same context everywhere) or GSL fails. */
static int fit_columns(size_t n, const double *X, const double *t, unsigned cols, double x[4],
                       double *chisq)
{
    size_t p = 0, rank = 0, at[4];
    for (size_t j = 0; j < 4; j++)
        if (cols & (1u << j))
            at[p++] = j;
    if (p > n)
        return -1;
    gsl_matrix *A = gsl_matrix_alloc(n, p), *cov = gsl_matrix_alloc(p, p);
    gsl_vector *y = gsl_vector_alloc(n), *coef = gsl_vector_alloc(p);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, p);
    int rc = -1;
    gsl_error_handler_t *handler = gsl_set_error_handler_off(); /* an error is a return */
    if (A && cov && y && coef && w) {
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < p; k++)
                gsl_matrix_set(A, i, k, X[i * 4 + at[k]]);
            gsl_vector_set(y, i, t[i]);
        }
        if (!gsl_multifit_linear_tsvd(A, y, 1e-9, coef, cov, chisq, &rank, w) && rank == p) {
            x[0] = x[1] = x[2] = x[3] = 0;
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
    gsl_matrix_free(A);
    return rc;
}

/* Non-negative least squares by trying the subsets of terms in `order`
 * (bitmasks over X's four columns): the best fit whose terms are all >= 0;
 * on equal residuals the earlier subset wins (a term at 0 is a term left
 * out). All 0 when none fits. */
static void fit_nonneg(size_t n, const double *X, const double *t, const unsigned *order,
                       size_t n_order, double best[4])
{
    double best_chisq = INFINITY, scale = 0;
    best[0] = best[1] = best[2] = best[3] = 0;
    for (size_t i = 0; i < n; i++)
        scale += t[i] * t[i];
    for (size_t k = 0; k < n_order; k++) {
        double x[4], chisq;
        if (fit_columns(n, X, t, order[k], x, &chisq) || x[0] < 0 || x[1] < 0 || x[2] < 0 ||
            x[3] < 0)
            continue;
        if (chisq < best_chisq - 1e-12 * scale) {
            best_chisq = chisq;
            for (int j = 0; j < 4; j++)
                best[j] = x[j];
        }
    }
}

void fit_three_terms(const double B[3], const double c[3], const double t[3], double *a,
                     double *s, double *b)
{
    /* the whole model first; a, b before s, b before a, s */
    static const unsigned order[7] = {7, 5, 6, 3, 4, 2, 1};
    double X[3 * 4], x[4];
    for (size_t i = 0; i < 3; i++) {
        const double row[4] = {1, B[i], B[i] * c[i], 0};
        for (int j = 0; j < 4; j++)
            X[i * 4 + j] = row[j];
    }
    fit_nonneg(3, X, t, order, 7, x);
    *a = x[0], *s = x[1], *b = x[2];
}

/* fit_nonneg over the columns {1, x1, x2, x3} of n points (at most
 * FIT_SCHED_MAX), the subsets tried in `order` (15 of them). */
static void fit_ones_and_three(size_t n, const double *x1, const double *x2, const double *x3,
                               const double *t, const unsigned order[15], double x[4])
{
    double X[FIT_SCHED_MAX * 4];
    n = n < FIT_SCHED_MAX ? n : FIT_SCHED_MAX;
    for (size_t i = 0; i < n; i++) {
        const double row[4] = {1, x1[i], x2[i], x3[i]};
        for (int j = 0; j < 4; j++)
            X[i * 4 + j] = row[j];
    }
    fit_nonneg(n, X, t, order, 15, x);
}

void fit_sched_terms(size_t n, const double *B, const double *c, const double *k,
                     const double *t, double x[4])
{
    /* the whole model; then today's three terms, the per-context-token one
     * kept before the per-attended one where the runs cannot tell them
     * apart (a selection that attends its whole context) */
    static const unsigned order[15] = {15, 7, 13, 14, 11, 5, 6, 3, 12, 9, 10, 4, 2, 1, 8};
    double bc[FIT_SCHED_MAX], bk[FIT_SCHED_MAX];
    n = n < FIT_SCHED_MAX ? n : FIT_SCHED_MAX;
    for (size_t i = 0; i < n; i++) {
        bc[i] = B[i] * c[i];
        bk[i] = B[i] * k[i];
    }
    fit_ones_and_three(n, B, bc, bk, t, order, x);
}

void fit_dense_attn_terms(size_t n, const double *R, const double *pp, const double *dp,
                          const double *t, double x[4])
{
    /* every term first, then the subsets by size, a row's and a pair's
     * before the fixed part */
    static const unsigned order[15] = {15, 14, 13, 11, 7, 6, 12, 10, 5, 9, 3, 2, 4, 8, 1};
    fit_ones_and_three(n, R, pp, dp, t, order, x);
}

double fit_median(double *x, size_t n)
{
    gsl_sort(x, 1, n);
    return gsl_stats_median_from_sorted_data(x, 1, n);
}
