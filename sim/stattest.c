/* Two-sample KS and Welch TOST for measured against predicted step times
 * (stattest.h). GSL gives the sorting, the moments and Student's t; it has
 * no Kolmogorov distribution, so its two series are summed here. */
#include "stattest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

static int finite_all(const double *x, size_t n, const char *what, struct alisa_err *e)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return err_set(e, ALISA_EINVAL, "%s value %zu is not finite", what, i);
    return 0;
}

/* P(K > x) for Kolmogorov's limiting distribution: 2 sum (-1)^(k-1)
 * exp(-2 k^2 x^2) where it converges fast (x >= 1), else 1 minus the CDF's
 * Jacobi-theta form sqrt(2 pi) / x sum exp(-(2k-1)^2 pi^2 / (8 x^2)). */
double stattest_kolmogorov_q(double x)
{
    if (!(x > 0))
        return 1;
    if (x < 1) {
        double s = 0, c = -M_PI * M_PI / (8 * x * x);
        for (int k = 1; k <= 20; k++)
            s += exp(c * (2 * k - 1) * (2 * k - 1));
        double q = 1 - sqrt(2 * M_PI) / x * s;
        return q < 0 ? 0 : q > 1 ? 1 : q;
    }
    double s = 0;
    for (int k = 1; k <= 100; k++) {
        double t = exp(-2.0 * k * k * x * x);
        s += (k % 2 ? t : -t);
        if (t < 1e-17)
            break;
    }
    double q = 2 * s;
    return q < 0 ? 0 : q > 1 ? 1 : q;
}

int stattest_ks2(const double *a, size_t na, const double *b, size_t nb, double *d, double *p,
                 struct alisa_err *e)
{
    if (na < 1 || nb < 1)
        return err_set(e, ALISA_EINVAL, "KS test: an empty sample (%zu and %zu values)", na, nb);
    if (finite_all(a, na, "KS test: first sample", e) || finite_all(b, nb, "KS test: second sample", e))
        return -1;
    double *x = malloc((na + nb) * sizeof *x);
    if (!x)
        return err_set(e, ALISA_ENOMEM, "KS test: out of memory for %zu values", na + nb);
    double *y = x + na;
    memcpy(x, a, na * sizeof *x);
    memcpy(y, b, nb * sizeof *y);
    gsl_sort(x, 1, na);
    gsl_sort(y, 1, nb);
    /* walk both sorted samples; at each distinct value both CDFs jump past
     * every copy of it before the gap is read */
    size_t i = 0, j = 0;
    double best = 0;
    while (i < na && j < nb) {
        double v = x[i] < y[j] ? x[i] : y[j];
        while (i < na && x[i] == v)
            i++;
        while (j < nb && y[j] == v)
            j++;
        double gap = fabs((double)i / (double)na - (double)j / (double)nb);
        best = gap > best ? gap : best;
    }
    free(x);
    double en = (double)na * (double)nb / (double)(na + nb);
    *d = best;
    *p = stattest_kolmogorov_q(sqrt(en) * best);
    return 0;
}

int stattest_tost(const double *meas, size_t nm, const double *pred, size_t np, double rel,
                  double *p, struct alisa_err *e)
{
    if (nm < 2 || np < 2)
        return err_set(e, ALISA_EINVAL, "TOST: fewer than 2 values in a sample (%zu and %zu)", nm, np);
    if (!(rel > 0) || !isfinite(rel))
        return err_set(e, ALISA_EINVAL, "TOST: margin %g is not a positive share", rel);
    if (finite_all(meas, nm, "TOST: measured", e) || finite_all(pred, np, "TOST: predicted", e))
        return -1;
    double m1 = gsl_stats_mean(meas, 1, nm), m2 = gsl_stats_mean(pred, 1, np);
    double v1 = gsl_stats_variance_m(meas, 1, nm, m1) / (double)nm;
    double v2 = gsl_stats_variance_m(pred, 1, np, m2) / (double)np;
    double se = sqrt(v1 + v2), margin = rel * fabs(m1), diff = m2 - m1;
    if (!(se > 0)) { /* two constant samples: equivalent exactly when inside */
        *p = fabs(diff) < margin ? 0 : 1;
        return 0;
    }
    double df = (v1 + v2) * (v1 + v2) /
                (v1 * v1 / (double)(nm - 1) + v2 * v2 / (double)(np - 1));
    double p_low = gsl_cdf_tdist_Q((diff + margin) / se, df);  /* H0: diff <= -margin */
    double p_high = gsl_cdf_tdist_P((diff - margin) / se, df); /* H0: diff >= +margin */
    *p = p_low > p_high ? p_low : p_high;
    return 0;
}
