/* Calibration of the CPU backend: microbenchmarks that measure what the
 * simulator's cost model needs to price the executor's work on this
 * machine (issue 9), each repeated so the spread shows.
 *
 * - GEMM throughput of the model's projection shapes (batch x positions rows
 *   of 1, 8, 32 and 256) through OpenBLAS: the best rate is the profile's
 *   compute peak; one row is memory-bound, its weight bytes over time the
 *   profile's memory bandwidth.
 * - Host memory read bandwidth (cblas_sasum over a 256 MiB array).
 * - Copy between two separately allocated arenas (the executor's offload and
 *   load) for sizes from one token's K and V to 16 MiB: weighted
 *   least-squares fit (GSL, relative errors) of time = latency + bytes /
 *   bandwidth.
 * - Attention: the executor's own forward pass decoding to 512 positions,
 *   per-layer attention time from its timings, fitted against the context
 *   length: ns per attended token.
 * - Recomputation of one token's K and V (two GEMVs and RoPE), ns.
 */
#ifndef ALISA_CALIBRATE_H
#define ALISA_CALIBRATE_H

#include <stdint.h>

#include "err.h"
#include "model.h"

enum calib_figure {
    CALIB_GEMM_GFLOPS,       /* best GEMM rate over the shapes, GFLOP/s */
    CALIB_GEMV_GBPS,         /* one-row GEMM: weight bytes / time, GB/s */
    CALIB_MEM_GBPS,          /* streaming read, GB/s */
    CALIB_COPY_GBPS,         /* arena-to-arena copy bandwidth (fit slope), GB/s */
    CALIB_COPY_LATENCY_US,   /* fixed cost of one copy (fit intercept), us */
    CALIB_ATTN_NS_PER_TOKEN, /* attention, per layer, per attended token, ns */
    CALIB_RECOMPUTE_NS,      /* K and V of one token of one layer, ns */
    CALIB_N
};

/* Name of a figure, as in the JSON output ("gemm_gflops", ...). */
const char *calib_name(enum calib_figure f);

/* Runs every microbenchmark once for the shapes of model m (which must be
 * loaded: the attention benchmark runs it) and writes the figures into
 * out[CALIB_N]. Returns 0, or ALISA_ENOMEM. */
int calib_measure(const struct llm_model *m, double out[CALIB_N], struct alisa_err *e);

#endif
