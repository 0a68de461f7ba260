/* Sweep specs and the results database: points, argv and hashes of a good
 * spec (linked parameters, relative paths), every bad spec with file:line,
 * and rows put, skipped, replaced, merged and exported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "results.h"
#include "sweep_spec.h"
#include "testutil.h"

static const char good[] =
    "; comment\n"
    "[sweep]\n"
    "name = t1\n"
    "command = sim\n"
    "[fixed]\n"
    "trace = x.trace\n"
    "prompt-len = 128\n"
    "[vary]\n"
    "model,hardware = OPT-13B,V100-32GB OPT-30B,H100-80GB\n"
    "batch = 4 8 16\n"
    "kv-int8 = false true\n";

static void test_sweep_points_are_the_product_in_odometer_order(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.sweep");
    tu_write(path, (const uint8_t *)good, strlen(good));
    struct sweep_spec s;
    struct alisa_err e = {{0}};
    if (sweep_spec_load(&s, path, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(s.n_points, 2 * 3 * 2);
    struct sweep_point p;
    /* point 7 = model index 1, batch index 0, int8 index 1 (last key fastest) */
    assert_int_equal(sweep_point_make(&s, 7, &p, &e), 0);
    const char *want[] = {"sim", "--trace", NULL, "--prompt-len", "128", "--model", "OPT-30B",
                          "--hardware", "H100-80GB", "--batch", "4", "--kv-int8", "--json"};
    assert_int_equal(p.argc, 13);
    for (int i = 0; i < 13; i++) {
        if (i == 2) {
            /* relative trace paths are resolved against the spec's directory */
            assert_true(p.argv[2][0] == '/');
            assert_non_null(strstr(p.argv[2], "/x.trace"));
            continue;
        }
        assert_string_equal(p.argv[i], want[i]);
    }
    assert_null(p.argv[13]);
    assert_non_null(strstr(p.config, "\"kv-int8\":\"true\""));
    char hash7[17];
    strcpy(hash7, p.hash);
    sweep_point_free(&p);
    /* point 6 differs only in kv-int8 = false: no option, another hash */
    assert_int_equal(sweep_point_make(&s, 6, &p, &e), 0);
    assert_int_equal(p.argc, 12);
    assert_string_not_equal(p.hash, hash7);
    sweep_point_free(&p);
    /* the same point twice has the same hash */
    assert_int_equal(sweep_point_make(&s, 7, &p, &e), 0);
    assert_string_equal(p.hash, hash7);
    sweep_point_free(&p);
    assert_int_equal(sweep_point_make(&s, 12, &p, &e), ALISA_EINVAL);
    sweep_spec_free(&s);
    tu_rmdir(dir);
    free(dir);
}

/* A [vary] list continues on indented lines, also under a linked key of more
 * than 49 characters (inih hands continuations over with the name cut). */
static void test_sweep_vary_lists_continue_on_indented_lines(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.sweep");
    const char *text = "[sweep]\nname = c\ncommand = validate\n[vary]\n"
                       "batch,selection,placement,gpu-kv-bytes,cpu-kv-bytes = 1,dense,gpu-only,0,0\n"
                       "    4,swa,alisa,18M,0 4,swa,alisa,18M,7M\n"
                       "    8,h2o,lru,36M,0\n"
                       "sparsity = 0.5\n  0.8\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    struct sweep_spec s;
    struct alisa_err e = {{0}};
    if (sweep_spec_load(&s, path, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(s.n_vary, 2);
    assert_int_equal(s.n_points, 4 * 2);
    struct sweep_point p;
    /* point 5: linked index 2 (4,swa,alisa,18M,7M), sparsity index 1 */
    assert_int_equal(sweep_point_make(&s, 5, &p, &e), 0);
    assert_non_null(strstr(p.config, "\"cpu-kv-bytes\":\"7M\""));
    assert_non_null(strstr(p.config, "\"sparsity\":\"0.8\""));
    sweep_point_free(&p);
    sweep_spec_free(&s);
    /* a key whose 49-character cut drops whole parameters (the cut name
     * links 6, the key 7): the continuation is read under the whole key */
    text = "[sweep]\nname = c\ncommand = validate\n[vary]\n"
           "batch,prompt-len,selection,sparsity,placement,gpu-kv-bytes,cpu-kv-bytes = "
           "3,64,dense,0.8,gpu-only,0,0\n"
           "    3,256,swa,0.9,alisa,768k,192k\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    if (sweep_spec_load(&s, path, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(s.n_points, 2);
    assert_int_equal(sweep_point_make(&s, 1, &p, &e), 0);
    assert_non_null(strstr(p.config, "\"cpu-kv-bytes\":\"192k\""));
    assert_non_null(strstr(p.config, "\"prompt-len\":\"256\""));
    sweep_point_free(&p);
    sweep_spec_free(&s);
    /* ... and one whose cut ends on a comma (49 characters: "...max-num-seqs,") */
    text = "[sweep]\nname = c\ncommand = serve-run\n[vary]\n"
           "requests,rate,prompt-len,output-len,max-num-seqs,seed = 8,0,16,8,4,1\n"
           "    12,0,16,8,4,2\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    if (sweep_spec_load(&s, path, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(s.n_points, 2);
    assert_int_equal(sweep_point_make(&s, 1, &p, &e), 0);
    assert_non_null(strstr(p.config, "\"requests\":\"12\""));
    sweep_point_free(&p);
    sweep_spec_free(&s);
    /* a repeated key that does not follow itself is still an error */
    text = "[sweep]\nname = c\ncommand = sim\n[vary]\nbatch = 1\nsparsity = 0.5\nbatch = 2\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    assert_int_equal(sweep_spec_load(&s, path, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, ":7: parameter 'batch' given twice"));
    tu_rmdir(dir);
    free(dir);
}

struct bad_spec {
    const char *what;
    const char *text;
    const char *needle;
};

static void test_sweep_bad_specs_name_the_line_and_problem(void **state)
{
    (void)state;
    const struct bad_spec cases[] = {
        {"unknown section", "[sweep]\nname = a\ncommand = sim\n[extra]\nx = 1\n",
         ":5: unknown section [extra]"},
        {"unknown sweep key", "[sweep]\nname = a\nmode = fast\n", ":3: [sweep]: unknown key 'mode'"},
        {"bad command", "[sweep]\nname = a\ncommand = train\n", ":3: command 'train' unknown"},
        {"two fixed values", "[sweep]\nname = a\ncommand = sim\n[fixed]\nbatch = 4 8\n",
         ":5: fixed 'batch' needs exactly one value, got 2"},
        {"empty vary", "[sweep]\nname = a\ncommand = sim\n[vary]\nbatch =\n",
         ":5: vary 'batch' needs at least one value"},
        {"twice", "[sweep]\nname = a\ncommand = sim\n[fixed]\nbatch = 4\n[vary]\nbatch = 8\n",
         ":7: parameter 'batch' given twice"},
        {"linked arity", "[sweep]\nname = a\ncommand = sim\n[vary]\nmodel,hardware = A,B C\n",
         ":5: 'model,hardware' links 2 parameters but value 'C' has 1"},
        {"linked fixed", "[sweep]\nname = a\ncommand = sim\n[fixed]\nmodel,hardware = A,B\n",
         ":5: linked parameters 'model,hardware' belong in [vary]"},
        {"json", "[sweep]\nname = a\ncommand = sim\n[fixed]\njson = true\n",
         ":5: parameter 'json' is not allowed"},
        {"syntax", "[sweep]\nname a\n", ":2: syntax error"},
        {"no command", "[sweep]\nname = a\n", "[sweep] needs a name and a command"},
        {"bad name", "[sweep]\nname = two words\n", ":2: name 'two words' must be one word"},
        {"exec without program", "[sweep]\nname = a\ncommand = exec\n",
         "command = exec needs a program"},
        {"program without exec", "[sweep]\nname = a\ncommand = sim\nprogram = p.py\n",
         "program is for command = exec only"},
    };
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "bad.sweep");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_write(path, (const uint8_t *)cases[i].text, strlen(cases[i].text));
        struct sweep_spec s;
        struct alisa_err e = {{0}};
        assert_int_equal(sweep_spec_load(&s, path, &e), ALISA_EINVAL);
        assert_null(s.vary);
        if (strncmp(e.msg, path, strlen(path)) != 0 || !strstr(e.msg, cases[i].needle))
            fail_msg("%s: message '%s' lacks '%s'", cases[i].what, e.msg, cases[i].needle);
    }
    /* inih splits a line past 200 bytes and parses its tail as a line of its
     * own (a ':' in it makes a key): refused, naming the line */
    char text[400] = "[sweep]\nname = a\ncommand = sim\n[vary]\nbatch =";
    while (strlen(text) < 250)
        strcat(text, " 4:8");
    strcat(text, "\n");
    tu_write(path, (const uint8_t *)text, strlen(text));
    struct sweep_spec s;
    struct alisa_err e = {{0}};
    assert_int_equal(sweep_spec_load(&s, path, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, ":5: line longer than 198 characters"));
    assert_int_equal(sweep_spec_load(&s, tu_path(dir, "none.sweep"), &e), ALISA_EIO);
    assert_non_null(strstr(e.msg, "none.sweep: cannot open"));
    tu_rmdir(dir);
    free(dir);
}

static void put_row(struct results *r, const char *hash, uint64_t point, int ok, double tput)
{
    char result[128];
    snprintf(result, sizeof result, "{\"throughput_tok_s\": %g, \"system\": \"s%llu\"}", tput,
             (unsigned long long)point);
    struct result_row row = {.sweep = "sw", .point = point, .config_hash = hash,
                             .config = "{\"command\":\"sim\",\"params\":{\"model\":\"M\"}}",
                             .code_version = "test", .result = ok ? result : "{}", .ok = ok,
                             .error = ok ? NULL : "boom", .wall_s = 0.5};
    struct alisa_err e = {{0}};
    if (results_put(r, &row, &e))
        fail_msg("%s", e.msg);
}

static char *export_str(const char *db, const char *query)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct alisa_err e = {{0}};
    if (results_export(db, query, NULL, f, &e))
        fail_msg("%s", e.msg);
    fclose(f);
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* argv of point k as one space-joined string, for comparisons */
static void point_line(const struct sweep_spec *s, uint64_t k, char *buf, size_t cap)
{
    struct sweep_point p;
    struct alisa_err e = {{0}};
    if (sweep_point_make(s, k, &p, &e))
        fail_msg("%s", e.msg);
    buf[0] = 0;
    for (int i = 0; i < p.argc; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", i ? " " : "", p.argv[i]);
    }
    sweep_point_free(&p);
}

static void test_sweep_set_overrides_fixed_vary_and_linked_keys_keeping_numbering(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "t.sweep");
    tu_write(path, (const uint8_t *)good, strlen(good));
    struct sweep_spec s;
    struct alisa_err e = {{0}};
    if (sweep_spec_load(&s, path, &e))
        fail_msg("%s", e.msg);
    /* a [fixed] key, one side of a linked [vary] key, a plain [vary] key and
     * a key the spec lacks */
    assert_int_equal(sweep_spec_set(&s, "prompt-len", "16", &e), 0);
    assert_int_equal(sweep_spec_set(&s, "hardware", "CPU", &e), 0);
    assert_int_equal(sweep_spec_set(&s, "batch", "2", &e), 0);
    assert_int_equal(sweep_spec_set(&s, "backend", "cpu", &e), 0);
    assert_int_equal(s.n_points, 2 * 3 * 2); /* numbering kept: point 7 is still model 1, int8 1 */
    char line[1024];
    point_line(&s, 7, line, sizeof line);
    assert_non_null(strstr(line, "--prompt-len 16 "));
    assert_non_null(strstr(line, "--model OPT-30B --hardware CPU --batch 2 --kv-int8 --json"));
    assert_non_null(strstr(line, "--backend cpu"));
    point_line(&s, 0, line, sizeof line);
    assert_non_null(strstr(line, "--model OPT-13B --hardware CPU --batch 2 --json"));
    /* refused, and the spec unchanged: values with spaces or commas, a
     * linked name, program on a non-exec spec */
    assert_int_not_equal(sweep_spec_set(&s, "batch", "2 4", &e), 0);
    assert_non_null(strstr(e.msg, "batch"));
    assert_int_not_equal(sweep_spec_set(&s, "batch", "2,4", &e), 0);
    assert_int_not_equal(sweep_spec_set(&s, "model,hardware", "a", &e), 0);
    assert_int_not_equal(sweep_spec_set(&s, "program", "x.py", &e), 0);
    assert_non_null(strstr(e.msg, "not a command = exec"));
    assert_int_not_equal(sweep_spec_set(&s, "json", "x", &e), 0);
    point_line(&s, 0, line, sizeof line);
    assert_non_null(strstr(line, "--batch 2 --json"));
    sweep_spec_free(&s);
    tu_rmdir(dir);
    free(dir);
}

static void test_sweep_shell_quote_keeps_every_argument_one_word(void **state)
{
    (void)state;
    /* each hostile argument quoted, then read back by a real shell */
    const char *args[] = {"plain", "bob's runs/x.db", "a b\tc", "$(touch pwned)", "`id`",
                          "line\nbreak", "'", "''", "\\", "*", ""};
    char *dir = tu_mkdtemp();
    const char *script = tu_path(dir, "q.sh");
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fputs("for a in", f);
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        fputc(' ', f);
        sweep_shell_quote(f, args[i]);
    }
    fputs("; do printf '%s\\0' \"$a\"; done\n", f);
    fclose(f);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cd '%s' && sh q.sh", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[512];
    size_t n = fread(out, 1, sizeof out, p);
    assert_int_equal(pclose(p), 0);
    size_t at = 0;
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        assert_true(at + strlen(args[i]) < n);
        assert_string_equal(out + at, args[i]);
        at += strlen(args[i]) + 1;
    }
    assert_int_equal(at, n);
    snprintf(cmd, sizeof cmd, "%s/pwned", dir);
    FILE *pw = fopen(cmd, "r");
    assert_null(pw); /* nothing ran */
    tu_rmdir(dir);
    free(dir);
}

static void test_results_rows_skip_replace_merge_and_export(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    char a[600], b[600], m[600];
    snprintf(a, sizeof a, "%s", tu_path(dir, "a.db"));
    snprintf(b, sizeof b, "%s", tu_path(dir, "b.db"));
    snprintf(m, sizeof m, "%s", tu_path(dir, "m.db"));
    struct results *r;
    struct alisa_err e = {{0}};
    assert_int_equal(results_open(&r, a, &e), 0);
    put_row(r, "h0", 0, 1, 100);
    put_row(r, "h1", 1, 0, 0); /* failed */
    int done;
    assert_int_equal(results_done(r, "h0", &done, &e), 0);
    assert_true(done);
    assert_int_equal(results_done(r, "h1", &done, &e), 0);
    assert_false(done); /* failed points are retried */
    put_row(r, "h1", 1, 1, 200); /* the retry replaces the failed row */
    assert_int_equal(results_done(r, "h1", &done, &e), 0);
    assert_true(done);
    results_close(r);
    assert_int_equal(results_open(&r, b, &e), 0);
    put_row(r, "h1", 1, 1, 999); /* the same point run elsewhere */
    put_row(r, "h2", 2, 1, 300);
    results_close(r);
    const char *ins[2] = {a, b};
    uint64_t added;
    uint64_t replaced = 0;
    assert_int_equal(results_merge(m, ins, 2, &added, &replaced, &e), 0);
    assert_int_equal(added, 3); /* h0, h1 from a; h2 from b; b's h1 kept out */
    char *csv = export_str(m, "sim");
    assert_int_equal(count_lines(csv), 1 + 3);
    assert_non_null(strstr(csv, "sweep,point,status,model"));
    assert_non_null(strstr(csv, "sw,1,ok,M"));
    assert_non_null(strstr(csv, ",200,"));
    assert_null(strstr(csv, ",999,"));
    free(csv);
    csv = export_str(m, "runs");
    assert_non_null(strstr(csv, "\"{\"\"command\"\":\"\"sim\"\"")); /* quoted JSON field */
    free(csv);
    FILE *devnull = fopen("/dev/null", "w");
    /* every named query prepares and runs, whole and for one sweep (a
     * query longer than a fixed buffer was once cut short) */
    for (size_t q = 0; results_queries[q]; q++) {
        if (results_export(m, results_queries[q], NULL, devnull, &e) ||
            results_export(m, results_queries[q], "sw", devnull, &e))
            fail_msg("query %s: %s", results_queries[q], e.msg);
    }
    assert_int_equal(results_export(m, "nope", NULL, devnull, &e), ALISA_EINVAL);
    fclose(devnull);
    /* a file that is not a database is refused by name */
    const char *junk = tu_path(dir, "junk.db");
    tu_write(junk, (const uint8_t *)"this is not sqlite, definitely not", 34);
    assert_int_not_equal(results_open(&r, junk, &e), 0);
    assert_non_null(strstr(e.msg, "junk.db"));
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_points_are_the_product_in_odometer_order),
        cmocka_unit_test(test_sweep_vary_lists_continue_on_indented_lines),
        cmocka_unit_test(test_sweep_bad_specs_name_the_line_and_problem),
        cmocka_unit_test(test_sweep_set_overrides_fixed_vary_and_linked_keys_keeping_numbering),
        cmocka_unit_test(test_sweep_shell_quote_keeps_every_argument_one_word),
        cmocka_unit_test(test_results_rows_skip_replace_merge_and_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
