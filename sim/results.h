/* The results database (SQLite): one row per sweep point run, written in a
 * transaction of its own in WAL mode, so a run killed at any moment leaves
 * whole rows only; merge and CSV export.
 *
 * Owns the schema and the named export queries. A row holds the point's
 * canonical config (JSON) and its hash (unique), the code version, the
 * command's JSON result, ok or error, and the wall time.
 */
#ifndef ALISA_RESULTS_H
#define ALISA_RESULTS_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

struct results;

struct result_row {
    const char *sweep;        /* sweep name */
    uint64_t point;           /* point index within the sweep */
    const char *config_hash;  /* unique key */
    const char *config;       /* canonical JSON */
    const char *code_version; /* git describe of the build */
    const char *result;       /* the command's JSON output, or "{}" on error */
    int ok;                   /* 1 when the command succeeded */
    int oom;                  /* ... and reported running out of memory: status 'oom' */
    const char *error;        /* its message when not ok, else NULL */
    double wall_s;            /* wall time of the run */
};

/* Opens (creating when needed) the database at path, in WAL mode with a busy
 * timeout, and ensures the schema. On failure *out is NULL and e names the
 * file and SQLite's message. */
int results_open(struct results **out, const char *path, struct alisa_err *e);

/* Opens an existing results database for reading only: never created,
 * never switched to WAL, never written (a read must not change a user's
 * file). On a read-only mount or directory, where SQLite cannot make a WAL
 * database's -shm file, it is read as immutable. A missing file ("no such
 * results database"), one without the runs table ("not a results
 * database") or one that cannot be read ("cannot read ...") is an error. */
int results_open_readonly(struct results **out, const char *path, struct alisa_err *e);

/* Closes r. Accepts NULL. */
void results_close(struct results *r);

/* *done = 1 when a successful row with this hash exists (status 'ok', or
 * 'oom': a deterministic result, not a failure to retry). */
int results_done(struct results *r, const char *config_hash, int *done, struct alisa_err *e);

/* Writes one row in its own transaction, replacing an earlier failed run of
 * the same point. */
int results_put(struct results *r, const struct result_row *row, struct alisa_err *e);

/* Copies every row of each input database into out (created when missing);
 * rows whose hash is already there are kept as they are, except that an ok
 * row replaces an error row of the same point (a point retried elsewhere).
 * *added counts the rows copied, *replaced the error rows replaced. Inputs
 * are opened read-only (never created, switched to WAL or written); a
 * missing or foreign input fails before out is touched. */
int results_merge(const char *out, const char *const *inputs, int n_inputs, uint64_t *added,
                  uint64_t *replaced, struct alisa_err *e);

/* Writes the named query's result as CSV with a header line (db opened
 * read-only: a read-only file or directory is fine, a missing one an error): "sim", "plan",
 * "eval", "fidelity", "validate", "run" (that command's configs and metrics), "peer"
 * (command = exec rows: a peer benchmark's system, model, device, driver, throughput), "serve"
 * (alisa serve's stream, scheduler and latency percentiles), "serve-validate"
 * (alisa serve-run --predict: measured and predicted latencies, errors,
 * spreads and tests), "runs" (every
 * row's bookkeeping). sweep, when non-NULL, keeps that sweep's rows only. Rows
 * come in sweep, point order. */
int results_export(const char *db, const char *query, const char *sweep, FILE *out,
                   struct alisa_err *e);

/* The names results_export knows, NULL-terminated. */
extern const char *const results_queries[];

#endif
