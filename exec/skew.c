/* InfiniGen's skewing (skew.h): the right singular vectors of a head's
 * prompt queries as the eigenvectors of Q^T Q, ranked by how much of the
 * queries lies along each (snu-comparch/InfiniGen,
 * speedup/infinigen/infinigen/skewing_controller.py skew: W_q and W_k
 * rotated by the query's SVD basis; partial_weight_generation_controller.py
 * partial_weight_index_generation: the columns of largest absolute sum).
 */
#include "skew.h"

#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_matrix.h>

int cpu_skew_basis(const float *Q, uint32_t n, size_t ld, uint32_t hs, uint32_t m, float *A)
{
    gsl_error_handler_t *handler = gsl_set_error_handler_off(); /* an error is a return */
    gsl_matrix *G = gsl_matrix_calloc(hs, hs), *V = gsl_matrix_alloc(hs, hs);
    gsl_vector *ev = gsl_vector_alloc(hs);
    gsl_eigen_symmv_workspace *ws = gsl_eigen_symmv_alloc(hs);
    double *score = calloc(hs, sizeof *score);
    int rc = -1;
    if (G && V && ev && ws && score) {
        for (uint32_t t = 0; t < n; t++) {
            const float *q = Q + (size_t)t * ld;
            for (uint32_t i = 0; i < hs; i++)
                for (uint32_t j = i; j < hs; j++)
                    *gsl_matrix_ptr(G, i, j) += (double)q[i] * q[j];
        }
        for (uint32_t i = 0; i < hs; i++)
            for (uint32_t j = 0; j < i; j++)
                gsl_matrix_set(G, i, j, gsl_matrix_get(G, j, i));
        if (gsl_eigen_symmv(G, ev, V, ws))
            goto done;
        for (uint32_t c = 0; c < hs; c++)
            for (uint32_t t = 0; t < n; t++) {
                double x = 0;
                for (uint32_t i = 0; i < hs; i++)
                    x += gsl_matrix_get(V, i, c) * Q[(size_t)t * ld + i];
                score[c] += fabs(x);
            }
        for (uint32_t r = 0; r < m && r < hs; r++) { /* the m largest, in order */
            uint32_t best = hs;
            for (uint32_t c = 0; c < hs; c++)
                if (score[c] >= 0 && (best == hs || score[c] > score[best]))
                    best = c;
            for (uint32_t i = 0; i < hs; i++)
                A[(size_t)r * hs + i] = (float)gsl_matrix_get(V, i, best);
            score[best] = -1;
        }
        rc = 0;
    }
done:
    gsl_set_error_handler(handler);
    gsl_matrix_free(G);
    gsl_matrix_free(V);
    gsl_vector_free(ev);
    if (ws)
        gsl_eigen_symmv_free(ws);
    free(score);
    return rc;
}
