/* Test helpers (contract in testutil.h). */
#include "testutil.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"
#include "trace.h"

char *tu_mkdtemp(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/alisa-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

const char *tu_path(const char *dir, const char *name)
{
    static char bufs[8][600];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

uint8_t *tu_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

void tu_write(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

void tu_copy(const char *src, const char *dst, size_t keep)
{
    size_t len;
    uint8_t *buf = tu_read(src, &len);
    tu_write(dst, buf, keep < len ? keep : len);
    free(buf);
}

void tu_flip(const char *path, size_t offset, uint8_t mask)
{
    size_t len;
    uint8_t *buf = tu_read(path, &len);
    assert_true(offset < len);
    buf[offset] ^= mask;
    tu_write(path, buf, len);
    free(buf);
}

void tu_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *ent;
    while ((ent = readdir(d)))
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, ".."))
            unlink(tu_path(dir, ent->d_name));
    closedir(d);
    rmdir(dir);
}

const char *tu_models_dir(void) { return catalog_models_dir(); }

int tu_ci(void)
{
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

void tu_write_toy_trace(const char *path, uint32_t prompt_len, uint32_t gen_len,
                        float (*weight)(uint32_t t, uint32_t p))
{
    struct trace_header h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "toy");
    h.n_layers = 1;
    h.n_heads = 2;
    h.n_kv_heads = 2;
    h.hidden = 4;
    h.vocab = 10;
    h.n_seqs = 1;
    struct alisa_err e = {{0}};
    struct trace_writer *w;
    uint32_t toks[64], n = prompt_len + gen_len;
    float row[64];
    assert_true(n <= 64);
    for (uint32_t i = 0; i < 64; i++)
        toks[i] = 1;
    assert_int_equal(trace_writer_open(&w, path, &h, &e), 0);
    assert_int_equal(trace_writer_seq(w, 0, prompt_len, gen_len, 0, toks, &e), 0);
    for (uint32_t p = 0; p < n; p++) {
        for (uint32_t t = 0; t <= p; t++)
            row[t] = weight(t, p);
        assert_int_equal(trace_writer_step(w, 0, p, 1, row, NULL, &e), 0);
    }
    assert_int_equal(trace_writer_close(w, &e), 0);
}

void tu_copy_trace_with_equal_heads(const char *src, const char *dst)
{
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    if (trace_reader_open(&r, src, &e))
        fail_msg("%s", e.msg);
    struct trace_header h = *trace_reader_header(r);
    assert_false(h.flags & TRACE_FLAG_PER_HEAD);
    h.flags |= TRACE_FLAG_PER_HEAD;
    const uint32_t L = h.n_layers, H = h.n_heads, N = trace_reader_max_len(r);
    float *heads = malloc((size_t)L * H * N * sizeof *heads);
    assert_non_null(heads);
    struct trace_writer *w;
    if (trace_writer_open(&w, dst, &h, &e))
        fail_msg("%s", e.msg);
    for (uint32_t s = 0; s < h.n_seqs; s++) {
        const struct trace_seq *q = trace_reader_seq(r, s);
        if (trace_writer_seq(w, s, q->prompt_len, q->gen_len, q->row_start, q->tokens, &e))
            fail_msg("%s", e.msg);
    }
    struct trace_step st;
    int rc;
    while ((rc = trace_reader_next(r, &st, &e)) == 1) {
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t k = 0; k < H; k++)
                memcpy(heads + ((size_t)l * H + k) * st.n_ctx, st.w + (size_t)l * st.n_ctx,
                       st.n_ctx * sizeof *heads);
        if (trace_writer_step(w, st.seq, st.pos, st.token, st.w, heads, &e))
            fail_msg("%s", e.msg);
    }
    if (rc < 0)
        fail_msg("%s", e.msg);
    free(heads);
    trace_reader_destroy(r);
    if (trace_writer_close(w, &e))
        fail_msg("%s", e.msg);
}

int tu_skipped;

int tu_result(int failed)
{
    if (failed)
        return failed;
    if (tu_skipped) {
        printf("%d test(s) skipped: reported to ctest as skipped (exit 77)\n", tu_skipped);
        return 77;
    }
    return 0;
}

const struct model_shape tu_toy = {.name = "toy", .family = "llama", .n_layers = 1, .hidden = 4,
                                   .n_heads = 2, .n_kv_heads = 2, .ffn = 8, .ffn_matrices = 2,
                                   .vocab = 10, .params = 168, .weight_bytes_fp16 = 336,
                                   .available = 1};
const struct hw_profile tu_unit_hw = {.name = "unit", .gpu_mem_gib = 1, .hbm_gbps = 1,
                                      .fp16_tflops = 1e-3, .host_dram_gib = 1, .link_gbps = 1,
                                      .link_latency_us = 1e-3, .host_mem_gbps = 1};
