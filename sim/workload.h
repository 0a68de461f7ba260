/* Request streams for serving (issue 46): when each request arrives and how
 * long its prompt and output are, drawn from distributions or read from a
 * CSV. Deterministic in the seed: the same parameters give the same stream
 * on every machine (GSL's mt19937, draws in a fixed order).
 *
 * Arrivals follow vLLM's serving benchmark (benchmarks/benchmark_serving.py,
 * get_request): the gap between two requests is Gamma-distributed with shape
 * `burstiness` and scale 1 / (rate x burstiness), so the mean rate is `rate`
 * whatever the burstiness; burstiness 1 is a Poisson process, below 1
 * burstier, above 1 more even. A rate of 0 (or infinity) sends every request
 * at time 0 (the benchmark's "inf": offline throughput).
 */
#ifndef ALISA_WORKLOAD_H
#define ALISA_WORKLOAD_H

#include <stdint.h>

#include "err.h"

/* The most requests a stream may hold: far above any serving benchmark
 * (vLLM's default is 1,000 prompts), so a stream's memory stays bounded. */
#define WORKLOAD_MAX_REQUESTS (1u << 22)
/* The longest line a request CSV may have, in bytes. */
#define WORKLOAD_LINE_MAX 65536
/* The longest prompt or output a request may have, in tokens. */
#define WORKLOAD_MAX_TOKENS (1u << 20)

struct wl_request {
    double arrival_s;     /* seconds from the stream's start, non-decreasing */
    uint32_t prompt_len;  /* tokens, at least 1 */
    uint32_t output_len;  /* tokens generated, at least 1 (the first from the prefill) */
};

struct workload {
    uint32_t n;
    struct wl_request *req; /* (n), owned */
};

/* A synthetic stream: n requests at `rate` per second (0: all at time 0),
 * Gamma gaps of shape `burstiness`; prompt and output lengths uniform on
 * [min, max] (equal bounds: fixed). */
struct wl_params {
    uint32_t n_requests;
    double rate;
    double burstiness;
    uint32_t prompt_min, prompt_max;
    uint32_t output_min, output_max;
    uint64_t seed;
};

/* Checks p (a one-line message naming the parameter and value on failure)
 * and draws the stream into *w (released with workload_free). */
int workload_generate(const struct wl_params *p, struct workload *w, struct alisa_err *e);

/* Reads a stream from a CSV file: a header line naming the columns
 * arrival_s, prompt_len and output_len (in any order; other columns are
 * ignored), then one request per line (blank lines skipped, quoting as
 * RFC 4180, a UTF-8 byte-order mark allowed). Arrival times must be plain
 * decimal numbers, finite, >= 0 and non-decreasing; lengths whole numbers in
 * 1..WORKLOAD_MAX_TOKENS; at most WORKLOAD_MAX_REQUESTS rows of at most
 * WORKLOAD_LINE_MAX bytes. On failure *w is empty and e names the file, its
 * line, the column and the value. */
int workload_read_csv(const char *path, struct workload *w, struct alisa_err *e);

/* Writes w as that CSV (arrival_s,prompt_len,output_len): what --dump-requests
 * writes, and what workload_read_csv reads back to the same stream. */
int workload_write_csv(const char *path, const struct workload *w, struct alisa_err *e);

/* Frees w's requests and empties it. Accepts an empty workload. */
void workload_free(struct workload *w);

#endif
