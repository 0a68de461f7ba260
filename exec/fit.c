/* Exact fits of calibration figures to cost terms (contract in fit.h): a
 * two-point line by hand, a three-term system by GSL's LU decomposition.
 * Negative terms are noise on a shared machine, never a real cost, so they
 * fall back to the simpler model rather than being clamped one by one.
 */
#include "fit.h"

#include <gsl/gsl_linalg.h>
#include <math.h>
#include <gsl/gsl_permutation.h>

void fit_two_terms(double x1, double t1, double x2, double t2, double *a, double *b)
{
    *b = (t2 - t1) / (x2 - x1);
    *a = t1 - x1 * *b;
    if (*a < 0 || *b < 0) {
        *a = 0;
        *b = t2 / x2;
    }
}

void fit_three_terms(const double B[3], const double c[3], const double t[3], double *a,
                     double *s, double *b)
{
    double m[9], x[3], rhs[3] = {t[0], t[1], t[2]}, norm[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        m[3 * i] = 1;
        m[3 * i + 1] = B[i];
        m[3 * i + 2] = B[i] * c[i];
        for (int j = 0; j < 3; j++)
            norm[j] += m[3 * i + j] * m[3 * i + j];
    }
    /* Hadamard's bound: |det| <= the columns' norms' product; far below it
     * the system is singular up to rounding (the same context everywhere) */
    double bound = sqrt(norm[0] * norm[1] * norm[2]);
    gsl_matrix_view mv = gsl_matrix_view_array(m, 3, 3);
    gsl_vector_view tv = gsl_vector_view_array(rhs, 3);
    gsl_vector_view xv = gsl_vector_view_array(x, 3);
    gsl_permutation *p = gsl_permutation_alloc(3);
    int sign = 0;
    int ok = p && !gsl_linalg_LU_decomp(&mv.matrix, p, &sign) &&
             fabs(gsl_linalg_LU_det(&mv.matrix, sign)) > 1e-9 * bound &&
             !gsl_linalg_LU_solve(&mv.matrix, p, &tv.vector, &xv.vector);
    if (p)
        gsl_permutation_free(p);
    if (ok && x[0] >= 0 && x[1] >= 0 && x[2] >= 0) {
        *a = x[0], *s = x[1], *b = x[2];
        return;
    }
    *s = 0;
    fit_two_terms(B[0] * c[0], t[0], B[1] * c[1], t[1], a, b);
}
