/* Trace format v1: round trips and every corruption class the reader must
 * name (truncation, flipped bytes, wrong magic/version, bad indices, trailing
 * bytes), plus the writer's ordering rules and atomic close. */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "fp16.h"
#include "testutil.h"
#include "trace.h"

#define T_LAYERS 2
#define T_HEADS 2
#define T_PROMPT 3
#define T_GEN 6

struct fixture {
    char *dir;
    const char *path;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->dir = tu_mkdtemp();
    f->path = strdup(tu_path(f->dir, "t.trace"));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tu_rmdir(f->dir);
    free(f->dir);
    free((char *)f->path);
    free(f);
    return 0;
}

static void test_header(struct trace_header *h, int per_head)
{
    memset(h, 0, sizeof *h);
    snprintf(h->model, sizeof h->model, "unit");
    h->n_layers = T_LAYERS;
    h->n_heads = T_HEADS;
    h->n_kv_heads = 1;
    h->hidden = 16;
    h->vocab = 100;
    h->n_seqs = 2;
    h->flags = per_head ? TRACE_FLAG_PER_HEAD : 0;
    h->threshold = 0.01f;
    h->seed = 42;
    snprintf(h->source, sizeof h->source, "synthetic");
    snprintf(h->text, sizeof h->text, "hand-built");
}

/* Row of n weights for (seq, pos, layer, head): layer 0 is peaked (one big
 * weight, the rest tiny: stored sparse), layer 1 is uniform (stored dense). */
static void fill_row(float *row, uint32_t n, uint32_t seq, uint32_t pos, uint32_t layer, int head)
{
    if (layer == 1 || n < 4) {
        for (uint32_t i = 0; i < n; i++)
            row[i] = 1.0f / n;
        return;
    }
    float tiny = 1e-4f * (1 + seq + head + 1);
    uint32_t peak = (pos + seq) % n;
    for (uint32_t i = 0; i < n; i++)
        row[i] = tiny;
    row[peak] = 1.0f - tiny * (n - 1);
}

/* Head-mean rows and per-head rows of one step; returns the mean rows. */
static void fill_step(float *rows, float *head_rows, uint32_t seq, uint32_t pos)
{
    uint32_t n = pos + 1;
    for (uint32_t l = 0; l < T_LAYERS; l++) {
        float *mean = rows + (size_t)l * n;
        if (!head_rows) {
            fill_row(mean, n, seq, pos, l, -1);
            continue;
        }
        memset(mean, 0, n * sizeof *mean);
        for (int h = 0; h < T_HEADS; h++) {
            float *hr = head_rows + ((size_t)l * T_HEADS + h) * n;
            fill_row(hr, n, seq, pos, l, h);
            for (uint32_t i = 0; i < n; i++)
                mean[i] += hr[i] / T_HEADS;
        }
    }
}

static const uint32_t row_starts[2] = {1, 0};

static uint32_t token_at(uint32_t seq, uint32_t pos) { return (seq * 31 + pos * 7) % 100; }

static void write_trace(const char *path, int per_head)
{
    struct trace_header h;
    test_header(&h, per_head);
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    assert_int_equal(trace_writer_open(&w, path, &h, &e), 0);
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t toks[T_PROMPT];
        for (uint32_t i = 0; i < T_PROMPT; i++)
            toks[i] = token_at(s, i);
        assert_int_equal(trace_writer_seq(w, s, T_PROMPT, T_GEN, row_starts[s], toks, &e), 0);
    }
    uint32_t N = T_PROMPT + T_GEN;
    float rows[T_LAYERS * (T_PROMPT + T_GEN)];
    float head_rows[T_LAYERS * T_HEADS * (T_PROMPT + T_GEN)];
    /* Interleave sequences as a batched run would. */
    for (uint32_t pos = 0; pos < N; pos++)
        for (uint32_t s = 0; s < 2; s++) {
            if (pos < row_starts[s])
                continue;
            fill_step(rows, per_head ? head_rows : NULL, s, pos);
            assert_int_equal(trace_writer_step(w, s, pos, token_at(s, pos), rows,
                                               per_head ? head_rows : NULL, &e),
                             0);
        }
    int rc = trace_writer_close(w, &e);
    if (rc)
        fail_msg("close: %s", e.msg);
}

static float stored(float x, float cut)
{
    return x >= cut ? fp16_to_float(fp16_from_float(x)) : 0.0f;
}

static void check_round_trip(const char *path, int per_head)
{
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    assert_int_equal(trace_reader_open(&r, path, &e), 0);
    const struct trace_header *h = trace_reader_header(r);
    assert_string_equal(h->model, "unit");
    assert_int_equal(h->n_layers, T_LAYERS);
    assert_int_equal(h->vocab, 100);
    assert_int_equal(h->seed, 42);
    assert_string_equal(h->text, "hand-built");
    assert_int_equal(trace_reader_max_len(r), T_PROMPT + T_GEN);
    assert_int_equal(trace_reader_seq(r, 0)->row_start, 1);
    assert_int_equal(trace_reader_seq(r, 1)->tokens[2], token_at(1, 2));
    float rows[T_LAYERS * (T_PROMPT + T_GEN)];
    float head_rows[T_LAYERS * T_HEADS * (T_PROMPT + T_GEN)];
    struct trace_step st;
    int steps = 0, sparse = 0, dense = 0;
    uint32_t next[2] = {1, 0};
    while (trace_reader_next(r, &st, &e) == 1) {
        steps++;
        assert_int_equal(st.pos, next[st.seq]++);
        assert_int_equal(st.token, token_at(st.seq, st.pos));
        fill_step(rows, per_head ? head_rows : NULL, st.seq, st.pos);
        for (uint32_t l = 0; l < T_LAYERS; l++) {
            const float *want = rows + (size_t)l * st.n_ctx;
            float mx = 0;
            for (uint32_t i = 0; i < st.n_ctx; i++)
                mx = want[i] > mx ? want[i] : mx;
            float cut = st.enc[l] == TRACE_ROW_DENSE ? 0.0f : 0.01f * mx;
            double dropped = 0;
            for (uint32_t i = 0; i < st.n_ctx; i++) {
                assert_true(st.w[(size_t)l * st.n_ctx + i] == stored(want[i], cut));
                dropped += want[i] < cut ? want[i] : 0;
            }
            assert_true(fabsf(st.residual[l] - (float)dropped) < 1e-6f);
            sparse += st.enc[l] != TRACE_ROW_DENSE;
            dense += st.enc[l] == TRACE_ROW_DENSE;
        }
        assert_true((st.w_head != NULL) == per_head);
    }
    assert_string_equal(e.msg, "");
    assert_int_equal(steps, (T_PROMPT + T_GEN - 1) + (T_PROMPT + T_GEN));
    assert_true(sparse > 0 && dense > 0); /* both encodings exercised */
    assert_int_equal(next[0], T_PROMPT + T_GEN);
    assert_int_equal(trace_reader_next(r, &st, &e), 0); /* stays at end */
    assert_int_equal(trace_reader_seq(r, 0)->tokens[T_PROMPT + 1], token_at(0, T_PROMPT + 1));
    trace_reader_destroy(r);
}

static void test_trace_round_trip_keeps_rows_tokens_and_header(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 0);
    check_round_trip(f->path, 0);
    struct alisa_err e = {{0}};
    uint64_t n;
    assert_int_equal(trace_check(f->path, &n, &e), 0);
    assert_int_equal(n, 17);
}

static void test_trace_round_trip_with_per_head_rows(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 1);
    check_round_trip(f->path, 1);
    struct alisa_err e = {{0}};
    assert_int_equal(trace_check(f->path, NULL, &e), 0);
}

/* Byte offsets of every STEP chunk, from a clean read. */
static size_t step_offsets(const char *path, uint64_t *out, size_t cap)
{
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    assert_int_equal(trace_reader_open(&r, path, &e), 0);
    struct trace_step st;
    size_t n = 0;
    while (trace_reader_next(r, &st, &e) == 1 && n < cap)
        out[n++] = st.offset;
    trace_reader_destroy(r);
    return n;
}

/* Reads a trace to the end; returns the first error status (or 0). */
static int read_all(const char *path, struct alisa_err *e)
{
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    struct trace_step st;
    while ((rc = trace_reader_next(r, &st, e)) == 1)
        ;
    trace_reader_destroy(r);
    return rc;
}

static void expect_corrupt(const char *path, const char *needle1, const char *needle2)
{
    struct alisa_err e = {{0}};
    int rc = read_all(path, &e);
    if (rc != ALISA_ECORRUPT)
        fail_msg("expected a corruption error, got %d: %s", rc, e.msg);
    if (!strstr(e.msg, needle1) || (needle2 && !strstr(e.msg, needle2)))
        fail_msg("message '%s' lacks '%s' / '%s'", e.msg, needle1, needle2 ? needle2 : "");
    assert_non_null(strstr(e.msg, path)); /* names the file */
    /* trace_check reports the same first problem. */
    struct alisa_err e2 = {{0}};
    assert_int_equal(trace_check(path, NULL, &e2), ALISA_ECORRUPT);
    assert_string_equal(e.msg, e2.msg);
}

static void test_trace_truncated_file_is_reported_with_offset(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 0);
    size_t len;
    free(tu_read(f->path, &len));
    const char *cut = tu_path(f->dir, "cut.trace");
    /* Inside the last STEP chunk. */
    uint64_t offs[64];
    size_t n = step_offsets(f->path, offs, 64);
    tu_copy(f->path, cut, (size_t)offs[n - 1] + 20);
    char where[32];
    snprintf(where, sizeof where, "byte %llu", (unsigned long long)offs[n - 1]);
    expect_corrupt(cut, where, "runs past the end");
    /* Exactly at a chunk boundary: the END chunk (24 bytes) is missing. */
    tu_copy(f->path, cut, len - 24);
    expect_corrupt(cut, "ends before the END chunk", NULL);
    /* Inside the preamble. */
    tu_copy(f->path, cut, 12);
    expect_corrupt(cut, "truncated preamble", NULL);
}

static void test_trace_flipped_byte_fails_the_chunk_checksum(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 0);
    uint64_t offs[64];
    size_t n = step_offsets(f->path, offs, 64);
    assert_true(n > 5);
    tu_flip(f->path, (size_t)offs[5] + 8 + 13, 0x10);
    char where[32];
    snprintf(where, sizeof where, "byte %llu", (unsigned long long)offs[5]);
    expect_corrupt(f->path, where, "checksum mismatch");
}

static void test_trace_wrong_magic_and_version_are_rejected(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 0);
    const char *bad = tu_path(f->dir, "bad.trace");
    tu_copy(f->path, bad, SIZE_MAX);
    tu_flip(bad, 0, 0x20);
    expect_corrupt(bad, "byte 0", "bad magic");
    tu_copy(f->path, bad, SIZE_MAX);
    tu_flip(bad, 8, 0x03); /* version 1 -> 2 */
    expect_corrupt(bad, "byte 8", "unsupported trace version 2");
    tu_write(bad, (const uint8_t *)"hello", 5);
    expect_corrupt(bad, "bad magic", NULL);
}

/* Rewrites the CRC of the chunk at off after its payload was edited. */
static void fix_crc(const char *path, size_t off)
{
    size_t len;
    uint8_t *b = tu_read(path, &len);
    uint32_t plen = b[off + 4] | b[off + 5] << 8 | b[off + 6] << 16 | (uint32_t)b[off + 7] << 24;
    uint32_t c = (uint32_t)crc32(crc32(0L, Z_NULL, 0), b + off, 8 + plen);
    for (int i = 0; i < 4; i++)
        b[off + 8 + plen + i] = (uint8_t)(c >> (8 * i));
    tu_write(path, b, len);
    free(b);
}

static void test_trace_sparse_index_out_of_range_or_unordered_is_rejected(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 0);
    uint64_t offs[64];
    size_t n = step_offsets(f->path, offs, 64);
    /* Steps alternate seq 0 / seq 1 from position 1, so step 11 is seq 0
     * pos 6 (n = 7): layer 0 is peaked, one entry, stored sparse (13 bytes
     * against 15 dense). Payload: 12 bytes ids, u8 enc, u32 m, f32 residual,
     * u16 idx. */
    assert_true(n > 11);
    size_t at = (size_t)offs[11];
    size_t len;
    uint8_t *b = tu_read(f->path, &len);
    assert_int_equal(b[at + 8 + 12], TRACE_ROW_SPARSE16);
    free(b);
    const char *bad = tu_path(f->dir, "idx.trace");
    tu_copy(f->path, bad, SIZE_MAX);
    b = tu_read(bad, &len);
    b[at + 8 + 12 + 9] = 200; /* index 200 in a row of 4 */
    tu_write(bad, b, len);
    free(b);
    fix_crc(bad, at);
    expect_corrupt(bad, "index 200 out of range (row has 7)", "seq 0 pos 6 layer 0");

    /* A row with two kept entries, then swap them: not increasing. */
    struct trace_header h;
    test_header(&h, 0);
    h.n_seqs = 1;
    h.n_layers = 1;
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    const char *two = tu_path(f->dir, "two.trace");
    /* One sequence, prompt of 40, only position 39 recorded (n = 40). */
    float row[40] = {0};
    row[3] = 0.5f;
    row[30] = 0.5f;
    uint32_t toks[40] = {0};
    assert_int_equal(trace_writer_open(&w, two, &h, &e), 0);
    assert_int_equal(trace_writer_seq(w, 0, 40, 0, 39, toks, &e), 0);
    assert_int_equal(trace_writer_step(w, 0, 39, 0, row, NULL, &e), 0);
    assert_int_equal(trace_writer_close(w, &e), 0);
    n = step_offsets(two, offs, 64);
    assert_int_equal(n, 1);
    at = (size_t)offs[0];
    b = tu_read(two, &len);
    size_t idx = at + 8 + 12 + 9;
    assert_int_equal(b[at + 8 + 12 + 1], 2); /* m = 2 */
    uint8_t t0 = b[idx], t1 = b[idx + 1];
    b[idx] = b[idx + 2];
    b[idx + 1] = b[idx + 3];
    b[idx + 2] = t0;
    b[idx + 3] = t1;
    tu_write(two, b, len);
    free(b);
    fix_crc(two, at);
    expect_corrupt(two, "not increasing", NULL);
}

static void test_trace_bytes_after_end_are_rejected(void **state)
{
    struct fixture *f = *state;
    write_trace(f->path, 0);
    size_t len;
    uint8_t *b = tu_read(f->path, &len);
    uint8_t *more = malloc(len + 3);
    memcpy(more, b, len);
    memcpy(more + len, "xyz", 3);
    tu_write(f->path, more, len + 3);
    free(b);
    free(more);
    expect_corrupt(f->path, "3 unexpected bytes after the END chunk", NULL);
}

static void test_trace_missing_file_is_an_io_error_naming_it(void **state)
{
    struct fixture *f = *state;
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    const char *p = tu_path(f->dir, "nope.trace");
    assert_int_equal(trace_reader_open(&r, p, &e), ALISA_EIO);
    assert_null(r);
    assert_non_null(strstr(e.msg, p));
}

static void test_trace_check_finds_bad_row_sum_and_token(void **state)
{
    struct fixture *f = *state;
    struct trace_header h;
    test_header(&h, 0);
    h.n_seqs = 1;
    h.n_layers = 1;
    h.threshold = 0;
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    uint32_t tok[2] = {5, 6};
    float row[3];
    /* Row at pos 2 sums to 1.5. */
    assert_int_equal(trace_writer_open(&w, f->path, &h, &e), 0);
    assert_int_equal(trace_writer_seq(w, 0, 2, 1, 2, tok, &e), 0);
    row[0] = 0.5f, row[1] = 0.5f, row[2] = 0.5f;
    assert_int_equal(trace_writer_step(w, 0, 2, 7, row, NULL, &e), 0);
    assert_int_equal(trace_writer_close(w, &e), 0);
    /* structurally fine, yet every reader refuses it, not only trace check
     * (issue 48: sim, plan and fidelity computed on such rows) */
    assert_int_equal(read_all(f->path, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "seq 0 pos 2 layer 0: weight row sums to 1.5000"));
    assert_int_equal(trace_check(f->path, NULL, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "seq 0 pos 2 layer 0: weight row sums to 1.5000"));
    /* a NaN, and a negative weight that keeps the sum at 1 */
    const float bad[2][3] = {{0.5f, NAN, 0.5f}, {0.75f, 0.5f, -0.25f}};
    const char *why[2] = {"weight 1 is nan", "weight 2 is -0.25"};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(trace_writer_open(&w, f->path, &h, &e), 0);
        assert_int_equal(trace_writer_seq(w, 0, 2, 1, 2, tok, &e), 0);
        assert_int_equal(trace_writer_step(w, 0, 2, 7, bad[k], NULL, &e), 0);
        if (trace_writer_close(w, &e))
            continue; /* a writer that refuses it is as good */
        assert_int_equal(read_all(f->path, &e), ALISA_ECORRUPT);
        assert_non_null(strstr(e.msg, why[k]));
    }
    /* Token 150 >= vocab 100. */
    assert_int_equal(trace_writer_open(&w, f->path, &h, &e), 0);
    assert_int_equal(trace_writer_seq(w, 0, 2, 1, 2, tok, &e), 0);
    row[0] = 0.25f, row[1] = 0.25f, row[2] = 0.5f;
    assert_int_equal(trace_writer_step(w, 0, 2, 150, row, NULL, &e), 0);
    assert_int_equal(trace_writer_close(w, &e), 0);
    assert_int_equal(trace_check(f->path, NULL, &e), ALISA_ECORRUPT);
    assert_non_null(strstr(e.msg, "token id 150 >= vocab 100"));
}

static void test_trace_writer_rejects_out_of_order_steps_and_leaves_no_file(void **state)
{
    struct fixture *f = *state;
    struct trace_header h;
    test_header(&h, 0);
    h.n_seqs = 1;
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    uint32_t tok[3] = {1, 2, 3};
    float rows[T_LAYERS * 8] = {0};
    assert_int_equal(trace_writer_open(&w, f->path, &h, &e), 0);
    /* A step before the sequences are declared. */
    assert_int_equal(trace_writer_step(w, 0, 0, 1, rows, NULL, &e), ALISA_EINVAL);
    assert_int_equal(trace_writer_seq(w, 0, 3, 2, 0, tok, &e), 0);
    /* Position 1 before 0. */
    assert_int_equal(trace_writer_step(w, 0, 1, 2, rows, NULL, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "position 1 written, expected 0"));
    /* Per-head rows that the header did not announce. */
    assert_int_equal(trace_writer_step(w, 0, 0, 1, rows, rows, &e), ALISA_EINVAL);
    rows[0] = 1.0f;
    rows[1] = 1.0f;
    assert_int_equal(trace_writer_step(w, 0, 0, 1, rows, NULL, &e), 0);
    /* Only the .part file exists while writing. */
    assert_int_equal(access(f->path, F_OK), -1);
    char part[640];
    snprintf(part, sizeof part, "%s.part", f->path);
    assert_int_equal(access(part, F_OK), 0);
    /* Closing an incomplete trace fails and removes the .part file. */
    assert_int_equal(trace_writer_close(w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "incomplete"));
    assert_int_equal(access(f->path, F_OK), -1);
    assert_int_equal(access(part, F_OK), -1);
    /* Abandoning also leaves nothing. */
    assert_int_equal(trace_writer_open(&w, f->path, &h, &e), 0);
    trace_writer_destroy(w);
    trace_writer_destroy(NULL);
    assert_int_equal(access(part, F_OK), -1);
    /* A threshold above 1% is refused at open. */
    h.threshold = 0.05f;
    assert_int_equal(trace_writer_open(&w, f->path, &h, &e), ALISA_EINVAL);
    assert_null(w);
}

static void test_trace_fp16_round_trip_is_exact_for_representable_values(void **state)
{
    (void)state;
    const float vals[] = {0.0f, 1.0f, 0.5f, 0.099975586f, 6.1035156e-05f, 65504.0f};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        assert_true(fp16_to_float(fp16_from_float(vals[i])) == vals[i]);
    /* Rounding to nearest: 0.1 becomes the nearest half, 0.0999755859375. */
    assert_true(fp16_to_float(fp16_from_float(0.1f)) == 0.0999755859375f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trace_round_trip_keeps_rows_tokens_and_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_round_trip_with_per_head_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_truncated_file_is_reported_with_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_flipped_byte_fails_the_chunk_checksum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_wrong_magic_and_version_are_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_sparse_index_out_of_range_or_unordered_is_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_bytes_after_end_are_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_missing_file_is_an_io_error_naming_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_check_finds_bad_row_sum_and_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_writer_rejects_out_of_order_steps_and_leaves_no_file, setup, teardown),
        cmocka_unit_test(test_trace_fp16_round_trip_is_exact_for_representable_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
