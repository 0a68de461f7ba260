/* Helpers for the cmocka tests: scratch directories and byte-level file
 * surgery (truncate, flip, overwrite) for the corruption tests. Test-only:
 * failures abort the test via cmocka's assert macros.
 */
#ifndef ALISA_TESTUTIL_H
#define ALISA_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "catalog.h"

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string. */
char *tu_mkdtemp(void);

/* path = dir + "/" + name in a static rotating buffer (valid for 8 calls). */
const char *tu_path(const char *dir, const char *name);

/* Whole file into a malloc'd buffer; *len gets its size. */
uint8_t *tu_read(const char *path, size_t *len);

/* Writes len bytes to path (replacing it). */
void tu_write(const char *path, const uint8_t *data, size_t len);

/* Copies src to dst, keeping the first keep bytes only (SIZE_MAX = all). */
void tu_copy(const char *src, const char *dst, size_t keep);

/* XORs the byte at offset with mask, in place. */
void tu_flip(const char *path, size_t offset, uint8_t mask);

/* Removes dir and everything in it (one level deep). */
void tu_rmdir(const char *dir);

/* Writes a trace of the toy shape (1 layer, 2 heads, hidden 4, vocab 10)
 * with one sequence of prompt_len + gen_len positions, every token id 1, the
 * row of position p holding weight(t, p) for t = 0..p (at most 64
 * positions). */
void tu_write_toy_trace(const char *path, uint32_t prompt_len, uint32_t gen_len,
                        float (*weight)(uint32_t t, uint32_t p));

/* Copies the trace at src (without per-head rows) to dst with per-head
 * rows, every head's row the head-mean row: a per-head replay of dst must
 * decide per head exactly what a head-mean replay of src decides. Fails
 * the running test on any error. */
void tu_copy_trace_with_equal_heads(const char *src, const char *dst);

/* The hand-worked tests' toy model (1 layer, hidden 4, 2 heads: kv_dim 4,
 * FFN 8 with 2 matrices, vocab 10, 336 weight bytes) and unit hardware
 * (1 FLOP/ns, 1 byte/ns everywhere, 1 ns per copy). */
extern const struct model_shape tu_toy;
extern const struct hw_profile tu_unit_hw;

/* Directory of the real models (ALISA_MODELS or the compiled-in default);
 * and whether CI=true (then a missing model is a failure, not a skip). */
const char *tu_models_dir(void);
int tu_ci(void);

/* Skips the running cmocka test and counts the skip, so tu_result can
 * report the program as skipped to ctest instead of passed. */
extern int tu_skipped;
#define tu_skip()          \
    do {                   \
        tu_skipped++;      \
        skip();            \
    } while (0)

/* A test program's exit status: the failures when any, else ctest's skip
 * code 77 when a test skipped (saying how many on stdout), else 0. */
int tu_result(int failed);

#endif
