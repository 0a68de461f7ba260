/* The fuzz harnesses' helpers (ctest fuzz_mutate): the structure-aware
 * mutators keep the framing their formats check (a trace's CRCs, a GGUF's
 * string and array lengths) while changing what the loaders read, and
 * fuzz_dir splits a multi-file input as fuzz.h says. Inputs are the
 * committed seeds of tests/fuzz/corpus/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fuzz.h"
#include "gguf.h"
#include "model.h"
#include "mutate.h"
#include "testutil.h"
#include "trace.h"

#ifndef FUZZ_CORPUS
#error FUZZ_CORPUS must name tests/fuzz/corpus
#endif

static void test_trace_mutations_keep_every_crc_valid(void **state)
{
    (void)state;
    size_t size;
    uint8_t *seed = tu_read(FUZZ_CORPUS "/trace/tiny.trace", &size);
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "m.trace");
    size_t cap = 2 * size + 4096;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    int changed = 0, refused = 0, n_runs = 2000;
    for (int s = 1; s <= n_runs; s++) {
        memcpy(buf, seed, size);
        size_t n = fuzz_mutate_trace(buf, size, cap, (unsigned)s);
        assert_true(n > 0 && n <= cap);
        changed += n != size || memcmp(buf, seed, size) != 0;
        tu_write(path, buf, n);
        struct alisa_err e;
        uint64_t steps;
        if (trace_check(path, &steps, &e) != 0) {
            refused++;
            if (strstr(e.msg, "checksum"))
                fail_msg("seed %d: the mutator broke a CRC: %s", s, e.msg);
        }
        if (s == n_runs && n > 40) { /* the check sees a CRC broken by a byte flip */
            buf[30] ^= 0x40;
            tu_write(path, buf, n);
            assert_int_not_equal(trace_check(path, &steps, &e), 0);
            assert_non_null(strstr(e.msg, "checksum"));
        }
    }
    printf("trace: %d of %d mutations changed the file, %d refused past the CRCs\n", changed,
           n_runs, refused);
    assert_true(changed > n_runs * 9 / 10);
    assert_true(refused > n_runs / 10 && refused < n_runs);
    free(buf);
    free(seed);
    tu_rmdir(dir);
    free(dir);
}

static void gguf_mutations(const char *seed_path)
{
    size_t size;
    uint8_t *seed = tu_read(seed_path, &size);
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "m.gguf");
    size_t cap = 2 * size + 65536;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    int changed = 0, opened = 0, loaded = 0, n_runs = 1500;
    for (int s = 1; s <= n_runs; s++) {
        memcpy(buf, seed, size);
        size_t n = fuzz_mutate_gguf(buf, size, cap, (unsigned)s);
        assert_true(n > 0 && n <= cap);
        changed += n != size || memcmp(buf, seed, size) != 0;
        tu_write(path, buf, n);
        struct alisa_err e;
        struct gguf *g;
        if (gguf_open(&g, path, &e) != 0) {
            if (strstr(e.msg, "file ends inside") || strstr(e.msg, "unknown value type") ||
                strstr(e.msg, "metadata count"))
                fail_msg("%s, seed %d: the mutator broke the framing: %s", seed_path, s, e.msg);
            continue;
        }
        opened++;
        gguf_close(g);
        struct llm_model *m;
        if (llm_load_gguf(&m, path, LLM_WEIGHTS_NATIVE, &e) == 0) {
            loaded++;
            llm_free(m);
        }
    }
    printf("%s: %d of %d mutations changed the file, %d opened, %d loaded\n", seed_path,
           changed, n_runs, opened, loaded);
    assert_true(changed > n_runs * 8 / 10);
    assert_true(opened > n_runs / 2);           /* the framing holds */
    assert_true(loaded > 0 && loaded < opened); /* and the loader sees the change */
    free(buf);
    free(seed);
    tu_rmdir(dir);
    free(dir);
}

static void test_gguf_mutations_keep_the_framing(void **state)
{
    (void)state;
    gguf_mutations(FUZZ_CORPUS "/gguf/tiny_llama_q8_0.gguf");
    gguf_mutations(FUZZ_CORPUS "/gguf/tiny_llama_f32.gguf");
}

static void expect_file(const char *dir, const char *name, const char *want, size_t len)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t n;
    uint8_t *got = tu_read(p, &n);
    if (n != len || memcmp(got, want, len) != 0)
        fail_msg("%s: %zu bytes '%.*s', want %zu '%.*s'", name, n, (int)n, (const char *)got,
                 len, (int)len, want);
    free(got);
}

static void test_fuzz_dir_splits_files_at_header_lines(void **state)
{
    (void)state;
    static const char in[] = "ignored\n==> a.json <==\n{\"x\": 1}\n"
                             "\n==> b.bin <==\nxx ==> c <== not a header\n"
                             "==> ../up <==\nstill b\n==> b <==\n\n==> a.json <==\nsecond";
    const char *dir = fuzz_dir((const uint8_t *)in, sizeof in - 1);
    expect_file(dir, "a.json", "second", 6); /* a later file of the same name replaces */
    expect_file(dir, "b.bin", "xx ==> c <== not a header\n==> ../up <==\nstill b", 47);
    expect_file(dir, "b", "", 0);
    size_t at, len;
    assert_true(fuzz_dir_find((const uint8_t *)in, sizeof in - 1, "b.bin", &at, &len));
    assert_int_equal(len, 47);
    assert_memory_equal(in + at, "xx ==> c", 8);
    assert_false(fuzz_dir_find((const uint8_t *)in, sizeof in - 1, "../up", &at, &len));
    char up[1200];
    snprintf(up, sizeof up, "%s/../up", dir);
    assert_int_not_equal(access(up, F_OK), 0);
    /* the next input starts from an empty directory */
    dir = fuzz_dir((const uint8_t *)"==> z <==\nz", 11);
    expect_file(dir, "z", "z", 1);
    snprintf(up, sizeof up, "%s/a.json", dir);
    assert_int_not_equal(access(up, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_mutations_keep_every_crc_valid),
        cmocka_unit_test(test_gguf_mutations_keep_the_framing),
        cmocka_unit_test(test_fuzz_dir_splits_files_at_header_lines),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
