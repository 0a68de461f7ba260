/* Attention-trace files, format v1 (traces/FORMAT.md): streaming writer and
 * reader.
 *
 * The writer writes to "<path>.part" and renames on close, so a crashed or
 * failed run never leaves a half trace under the final name. The reader holds
 * one step in memory at a time and validates structure (checksums, order,
 * index ranges) as it goes; trace_check() adds the numeric checks.
 */
#ifndef ALISA_TRACE_H
#define ALISA_TRACE_H

#include <stdint.h>

#include "err.h"

#define TRACE_VERSION 1u
#define TRACE_FLAG_PER_HEAD 1u
#define TRACE_MAX_THRESHOLD 0.01f
#define TRACE_SUM_TOLERANCE 0.02

enum trace_row_enc {
    TRACE_ROW_DENSE = 0,
    TRACE_ROW_SPARSE16 = 1,
    TRACE_ROW_SPARSE32 = 2
};

struct trace_header {
    char model[64];         /* catalog or checkpoint name */
    uint32_t n_layers;      /* layers recorded */
    uint32_t n_heads;       /* query heads */
    uint32_t n_kv_heads;    /* key/value heads */
    uint32_t hidden;        /* model width */
    uint32_t vocab;         /* token ids are below this */
    uint32_t n_seqs;        /* sequences */
    uint32_t flags;         /* TRACE_FLAG_* */
    float threshold;        /* sparse cutoff, relative to row max, in [0, 0.01] */
    uint64_t seed;          /* seed of the run */
    char source[16];        /* "synthetic" or "model" */
    char model_sha256[65];  /* hex digest of the model file, "" if synthetic */
    char text[256];         /* text origin, "" if none */
    char generator[512];    /* key=value parameters that produced the trace */
};

struct trace_seq {
    uint32_t prompt_len; /* tokens */
    uint32_t gen_len;    /* tokens */
    uint32_t row_start;  /* first recorded query position, <= prompt_len */
    uint32_t *tokens;    /* (prompt_len + gen_len) ids; generated ones filled as read */
};

/* One recorded query position, all layers. Owned by the reader, valid until
 * the next trace_reader_next() call. */
struct trace_step {
    uint32_t seq;             /* sequence id */
    uint32_t pos;             /* query position */
    uint32_t token;           /* token id at pos */
    uint32_t n_ctx;           /* pos + 1: entries per row */
    const float *w;           /* (n_layers, n_ctx) head-mean weights; dropped entries 0 */
    const float *residual;    /* (n_layers) mass of dropped entries (0 for dense rows) */
    const uint8_t *enc;       /* (n_layers) enum trace_row_enc of each head-mean row */
    const float *w_head;      /* (n_layers, n_heads, n_ctx), or NULL without per-head rows */
    const float *residual_head; /* (n_layers, n_heads), or NULL */
    uint64_t offset;          /* byte offset of this STEP chunk in the file */
};

struct trace_writer;
struct trace_reader;

/* Creates "<path>.part" and writes the magic and HEAD chunk. On success *out
 * owns the open file; on failure *out is NULL and e says why. h->threshold
 * must be in [0, TRACE_MAX_THRESHOLD]. */
int trace_writer_open(struct trace_writer **out, const char *path,
                      const struct trace_header *h, struct alisa_err *e);

/* Writes sequence seq's SEQ chunk. Sequences must be declared in order
 * 0..n_seqs-1, all before the first step. tokens: (prompt_len) ids. */
int trace_writer_seq(struct trace_writer *w, uint32_t seq, uint32_t prompt_len,
                     uint32_t gen_len, uint32_t row_start, const uint32_t *tokens,
                     struct alisa_err *e);

/* Writes the rows of position pos of sequence seq, which must be that
 * sequence's next position. rows: (n_layers, pos+1) head-mean weights;
 * head_rows: (n_layers, n_heads, pos+1), required iff the per-head flag is
 * set, else NULL. Each row is stored dense or sparse, whichever is smaller. */
int trace_writer_step(struct trace_writer *w, uint32_t seq, uint32_t pos, uint32_t token,
                      const float *rows, const float *head_rows, struct alisa_err *e);

/* Checks every sequence is complete, writes END, flushes, closes and renames
 * "<path>.part" to path. Frees w in every case. On failure the .part file is
 * removed. */
int trace_writer_close(struct trace_writer *w, struct alisa_err *e);

/* Abandons a trace: closes and removes the .part file, frees w. Accepts NULL. */
void trace_writer_destroy(struct trace_writer *w);

/* Opens path and reads the preamble, HEAD and SEQ chunks. On failure *out is
 * NULL and e names the file, byte offset and value at fault. */
int trace_reader_open(struct trace_reader **out, const char *path, struct alisa_err *e);

/* Header and sequences of an open reader; owned by the reader. Cannot fail. */
const struct trace_header *trace_reader_header(const struct trace_reader *r);
const struct trace_seq *trace_reader_seq(const struct trace_reader *r, uint32_t seq);

/* Longest sequence (prompt_len + gen_len) in tokens. Cannot fail. */
uint32_t trace_reader_max_len(const struct trace_reader *r);

/* Reads the next STEP into *step. Returns 1 when a step was read, 0 at a valid
 * END (all sequences complete, nothing after it), negative on error: among
 * them a step whose token is outside the vocabulary or any of whose rows
 * (layer means, per-head rows) holds a NaN, an infinity or a negative weight,
 * or does not sum to 1 with its residual ("file: byte N: seq S pos P layer
 * L: ..."), so no reader computes on such a row. */
int trace_reader_next(struct trace_reader *r, struct trace_step *step, struct alisa_err *e);

/* Total file size in bytes. Cannot fail. */
uint64_t trace_reader_file_bytes(const struct trace_reader *r);

/* Closes the file and frees r. Accepts NULL. */
void trace_reader_destroy(struct trace_reader *r);

/* Full validation of a trace file: everything the reader checks, plus row sums
 * within TRACE_SUM_TOLERANCE of 1, finite non-negative weights, token ids
 * below vocab. Returns 0 and fills *n_steps when valid; else the first problem
 * with its location. n_steps may be NULL. */
int trace_check(const char *path, uint64_t *n_steps, struct alisa_err *e);

#endif
