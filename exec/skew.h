/* InfiniGen's skewing of one attention head (its speculation's basis),
 * computed from the prompt's queries with GSL's symmetric eigensolver. Kept
 * apart from cpu_ops.c: GSL's CBLAS header and OpenBLAS's do not mix in one
 * translation unit.
 */
#ifndef ALISA_SKEW_H
#define ALISA_SKEW_H

#include <stddef.h>
#include <stdint.h>

/* InfiniGen's skewed partial channels of one head: from the n prompt
 * queries Q (hs channels each, rows ld floats apart), the orthonormal basis
 * of Q's right singular vectors (eigenvectors of Q^T Q, GSL), of which the m
 * along which the queries' absolute projections sum largest (ties: the
 * lower index) become A's rows (m, hs): a query's or key's partial
 * channels are A x. Skewing rotates W_q and W_k alike, so q . k is kept;
 * InfiniGen then scores with those m channels. Returns 0, or -1 when GSL
 * could not allocate its workspace or the eigensolver failed (GSL's error
 * handler is off meanwhile: an error is a return, not an abort). */
int cpu_skew_basis(const float *Q, uint32_t n, size_t ld, uint32_t hs, uint32_t m, float *A);

#endif
