/* Catalogs: the shipped files load and are self-consistent; every kind of bad
 * content is reported with file:line; checkpoint entries read their shape
 * from the real file (a missing model fails under CI=true). */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "catalog.h"
#include "costmodel.h"
#include "testutil.h"

static void test_catalog_shipped_files_load_with_all_paper_models_and_profiles(void **state)
{
    (void)state;
    struct catalog c;
    struct alisa_err e = {{0}};
    if (catalog_load(&c, catalog_default_dir(), tu_models_dir(), &e))
        fail_msg("%s", e.msg);
    const char *models[] = {"OPT-6.7B", "OPT-13B", "OPT-30B", "LLaMA-7B",
                            "LLaMA-13B", "LLaMA-33B", "Pythia-6.7B", "Pythia-12B"};
    for (size_t i = 0; i < 8; i++) {
        const struct model_shape *m = catalog_model(&c, models[i]);
        if (!m)
            fail_msg("model %s missing", models[i]);
        assert_true(m->available);
        /* The published parameter count agrees with the shape (the estimate
         * leaves out biases and norms, so it is slightly below). */
        double est = catalog_param_estimate(m);
        if (!(est <= m->params * 1.001 && est >= m->params * 0.99))
            fail_msg("%s: shape implies %.4g params, catalog says %.4g", m->name, est, m->params);
        assert_true(fabs(m->weight_bytes_fp16 - 2 * m->params) < 1e-6 * m->params);
    }
    const char *hw[] = {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB",
                        "H200-141GB"};
    for (size_t i = 0; i < 6; i++) {
        const struct hw_profile *h = catalog_hw(&c, hw[i]);
        if (!h)
            fail_msg("profile %s missing", hw[i]);
        assert_true(h->link_gbps == 20 && h->host_dram_gib == 128); /* the paper's setup */
    }
    /* The paper's example: OPT-13B, batch 64, seq 512 needs more than 25 GB of KV. */
    const struct model_shape *m = catalog_model(&c, "OPT-13B");
    assert_true(catalog_kv_bytes_per_token(m) * 64 * 512 > 25e9);
    assert_null(catalog_model(&c, "GPT-5"));
    catalog_deinit(&c);
}

static void test_catalog_reads_the_real_checkpoint_shape_from_its_header(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", tu_models_dir());
    if (access(path, R_OK) != 0) {
        if (tu_ci())
            fail_msg("CI=true and the model %s is missing", path);
        tu_skip();
    }
    struct catalog c;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&c, catalog_default_dir(), tu_models_dir(), &e), 0);
    const struct model_shape *m = catalog_model(&c, "stories260K");
    assert_non_null(m);
    if (!m->available)
        fail_msg("stories260K unavailable: %s", m->note);
    assert_int_equal(m->n_layers, 5);
    assert_int_equal(m->hidden, 64);
    assert_int_equal(m->n_heads, 8);
    assert_int_equal(m->n_kv_heads, 4);
    assert_int_equal(m->ffn, 172);
    assert_int_equal(m->vocab, 512);
    assert_int_equal(m->max_seq, 512);
    assert_true(m->tied_embeddings);
    assert_true(m->params == 260032); /* SOURCES.md: 260,032 weight parameters */
    catalog_deinit(&c);
}

static void test_catalog_missing_checkpoint_is_unavailable_not_fatal(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    struct catalog c;
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load(&c, catalog_default_dir(), dir, &e), 0);
    const struct model_shape *m = catalog_model(&c, "stories260K");
    assert_non_null(m);
    assert_false(m->available);
    assert_non_null(strstr(m->note, "stories260K.bin"));
    catalog_deinit(&c);
    tu_rmdir(dir);
    free(dir);
}

struct bad_ini {
    const char *what;
    const char *text;
    const char *needle; /* must appear in the message, after "file:" */
};

static const char good_model[] =
    "[M]\nfamily = opt\nlayers = 2\nhidden = 8\nheads = 2\nkv_heads = 2\nffn = 16\n"
    "ffn_matrices = 2\nvocab = 10\ntied_embeddings = 1\nmax_seq = 16\nparams = 1\n"
    "weight_bytes_fp16 = 2\n";

static void test_catalog_bad_model_files_name_the_line_and_problem(void **state)
{
    (void)state;
    const struct bad_ini cases[] = {
        {"unknown key", "; c\n[M]\nfamily = opt\nlayrs = 2\n", ":4: [M]: unknown key 'layrs'"},
        {"not a number", "[M]\nlayers = two\n", ":2: layers = 'two' is not a non-negative integer"},
        {"negative", "[M]\nlayers = -3\n", ":2: layers = '-3'"},
        {"key twice", "[M]\nlayers = 2\nlayers = 3\n", ":3: [M]: key 'layers' set twice"},
        {"syntax", "[M]\nthis line has no equals\n", ":2: syntax error"},
        {"outside section", "layers = 2\n", ":1: key 'layers' outside any [section]"},
        {"duplicate section", "[A]\nfamily = x\n[B]\nfamily = z\n[A]\nfamily = y\n",
         ":6: section [A] appears twice"},
        {"missing key", "\n\n[M]\nfamily = opt\nlayers = 2\n", ":3: [M]: missing key 'hidden'"},
        {"bad format", "[C]\ncheckpoint = x.bin\nformat = gguf2\n", ":1: [C]: checkpoint format 'gguf2' unknown"},
        /* issue 48: shapes bounded from above before anything is sized */
        {"layers huge", "[M]\nlayers = 4000000000\n", ":2: layers = 4000000000 is outside [1, 1024]"},
        {"vocab huge", "[M]\nvocab = 100000000\n", ":2: vocab = 100000000 is outside [1, 4194304]"},
        {"hidden zero", "[M]\nhidden = 0\n", ":2: hidden = 0 is outside [1, 131072]"},
        {"max_seq huge", "[M]\nmax_seq = 3000000000\n", ":2: max_seq = 3000000000 is outside"},
    };
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "models.ini");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_write(path, (const uint8_t *)cases[i].text, strlen(cases[i].text));
        struct catalog c = {0};
        struct alisa_err e = {{0}};
        assert_int_equal(catalog_load_models(&c, path, dir, &e), ALISA_EINVAL);
        assert_null(c.models);
        if (strncmp(e.msg, path, strlen(path)) != 0 || !strstr(e.msg, cases[i].needle))
            fail_msg("%s: message '%s' lacks '%s'", cases[i].what, e.msg, cases[i].needle);
    }
    /* A valid file still loads, and an inconsistent shape is caught. */
    tu_write(path, (const uint8_t *)good_model, strlen(good_model));
    struct catalog c = {0};
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load_models(&c, path, dir, &e), 0);
    assert_int_equal(c.n_models, 1);
    catalog_deinit(&c);
    char odd[sizeof good_model + 8];
    snprintf(odd, sizeof odd, "%s", good_model);
    memcpy(strstr(odd, "heads = 2\nkv"), "heads = 3", 9);
    tu_write(path, (const uint8_t *)odd, strlen(odd));
    assert_int_equal(catalog_load_models(&c, path, dir, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, ":1: [M]: inconsistent shape"));
    /* Missing file. */
    assert_int_equal(catalog_load_models(&c, tu_path(dir, "none.ini"), dir, &e), ALISA_EIO);
    assert_non_null(strstr(e.msg, "none.ini: cannot open"));
    tu_rmdir(dir);
    free(dir);
}

static void test_catalog_bad_hardware_values_are_rejected(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "hardware.ini");
    const char *text = "[G]\ngpu = x\ngpu_mem_gib = 16\nhbm_gbps = fast\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    struct catalog c = {0};
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load_hardware(&c, path, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, ":4: hbm_gbps = 'fast' is not a non-negative number"));
    text = "[G]\ngpu = x\ngpu_mem_gib = 16\nhbm_gbps = 900\nfp16_tflops = 0\nhost_dram_gib = 1\n"
           "link_gbps = 1\nlink_latency_us = 1\nhost_mem_gbps = 1\ngemm_efficiency = 1\n"
           "hbm_efficiency = 1\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    assert_int_equal(catalog_load_hardware(&c, path, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, ":5: fp16_tflops = 0 is outside the physical range"));
    /* a bandwidth no machine has (1e-300 GB/s would make every step last
     * forever and the simulator report 0 tokens/s) */
    text = "[G]\ngpu = x\ngpu_mem_gib = 16\nhbm_gbps = 1e-300\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    assert_int_equal(catalog_load_hardware(&c, path, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, ":4: hbm_gbps = 1e-300 is outside the physical range"));
    text = "[G]\ngpu = x\ngpu_mem_gib = 16\nhbm_gbps = 900\nfp16_tflops = 1\nhost_dram_gib = 1\n"
           "link_gbps = 1\nlink_latency_us = 1\nhost_mem_gbps = 1\ngemm_efficiency = 1.5\n"
           "hbm_efficiency = 1\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    assert_int_equal(catalog_load_hardware(&c, path, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "efficiencies 1.5 and 1 must be in (0, 1]"));
    /* the optional measured terms, out of their ranges */
    const char *const bad_opt[][2] = {
        {"cpu_attn_traffic = 5000", "[G]: cpu_attn_traffic = 5000 must be in [0, 1000]"},
        {"pageable_gbps = 2e4", "[G]: pageable_gbps = 20000 must be in [0, 10000]"},
    };
    for (size_t i = 0; i < sizeof bad_opt / sizeof bad_opt[0]; i++) {
        char t[512];
        snprintf(t, sizeof t,
                 "[G]\ngpu = x\ngpu_mem_gib = 16\nhbm_gbps = 900\nfp16_tflops = 1\n"
                 "host_dram_gib = 1\nlink_gbps = 1\nlink_latency_us = 1\nhost_mem_gbps = 1\n"
                 "gemm_efficiency = 1\nhbm_efficiency = 1\n%s\n",
                 bad_opt[i][0]);
        tu_write(path, (const uint8_t *)t, strlen(t));
        assert_int_equal(catalog_load_hardware(&c, path, &e), ALISA_EINVAL);
        assert_non_null(strstr(e.msg, bad_opt[i][1]));
    }
    tu_rmdir(dir);
    free(dir);
}

/* software.ini: the keys parse, a selection's operations are a table, and
 * every bad value names its file and line; a catalog directory without
 * software.ini loads with none. */
static void test_catalog_software_profiles_parse_and_bad_values_fail(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "software.ini");
    const char *text = "[eager]\nop_host_us = 7.5\nops_per_layer = 3\n"
                       "selection_ops_per_layer = swa:4 h2o:2\npageable_relay = 1\n";
    tu_write(path, (const uint8_t *)text, strlen(text));
    struct catalog c = {0};
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load_software(&c, path, &e), 0);
    const struct sw_profile *s = catalog_sw(&c, "EAGER");
    assert_non_null(s);
    assert_true(s->op_host_us == 7.5 && s->ops_per_layer == 3 && s->pageable_relay == 1);
    assert_int_equal(s->selection_ops.n, 2);
    /* (3 + 4) x 7.5 us for swa, 3 x 7.5 for a selection without its own */
    assert_true(cost_layer_host_ns(s, "swa") == 52500);
    assert_true(cost_layer_host_ns(s, "dense") == 22500);
    assert_true(cost_layer_host_ns(NULL, "swa") == 0);
    assert_null(catalog_sw(&c, "lazy"));
    assert_int_equal(catalog_sw_not_found(&c, "--software", "eagr", &e), ALISA_ENOTFOUND);
    assert_non_null(strstr(e.msg, "--software eagr: not in the catalog; did you mean 'eager'?"));
    catalog_deinit(&c);
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"[x]\nop_host_us = 1\nops_per_layer = 2\npageable_relay = 2\n",
         ":1: [x]: pageable_relay = 2 must be 0 or 1"},
        {"[x]\nop_host_us = 1\nops_per_layer = 2\nselection_ops_per_layer = swa:1.5\n",
         "[x]: selection_ops_per_layer swa:1.5 must be a whole number"},
        {"[x]\nop_host_us = -1\nops_per_layer = 2\n", ":2: op_host_us = '-1' is not a non-negative number"},
        {"[x]\nop_host_us = 1\n", ":1: [x]: missing key 'ops_per_layer'"},
        {"[x]\nop_host_us = 1\nops_per_layer = 2\nlaunches = 3\n", ":4: [x]: unknown key 'launches'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_write(path, (const uint8_t *)bad[i].text, strlen(bad[i].text));
        assert_int_equal(catalog_load_software(&c, path, &e), ALISA_EINVAL);
        if (!strstr(e.msg, bad[i].msg) || !strstr(e.msg, "software.ini"))
            fail_msg("case %zu: got '%s'", i, e.msg);
        assert_int_equal(c.n_sw, 0);
    }
    /* a directory with models.ini and hardware.ini only */
    char mp[600], hp[600];
    snprintf(mp, sizeof mp, "%s/models.ini", catalog_default_dir());
    snprintf(hp, sizeof hp, "%s/hardware.ini", catalog_default_dir());
    tu_copy(mp, tu_path(dir, "models.ini"), SIZE_MAX);
    tu_copy(hp, tu_path(dir, "hardware.ini"), SIZE_MAX);
    unlink(path);
    assert_int_equal(catalog_load(&c, dir, tu_models_dir(), &e), 0);
    assert_true(c.n_sw == 0 && c.n_hw > 0);
    catalog_deinit(&c);
    tu_rmdir(dir);
    free(dir);
}

/* The executor's optional keys: tables parse into their structs; a bad
 * table names its line and the spot. */
static void test_catalog_executor_profile_keys_parse_and_bad_tables_fail(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "profile.ini");
    const char *base = "[cpu]\ngpu = x\ngpu_mem_gib = 16\nhbm_gbps = 5\nfp16_tflops = 0.1\n"
                       "host_dram_gib = 16\nlink_gbps = 30\nlink_latency_us = 0.2\n"
                       "host_mem_gbps = 10\ngemm_efficiency = 1\nhbm_efficiency = 1\n";
    char text[2048];
    snprintf(text, sizeof text, "%sserial = 1\nweight_bytes = 4\nattn_ns_per_token = 400\n"
             "attn_ns_fixed = 1500\nattn_ns_per_layer = 9e3\nrecompute_ns = 2e4\n"
             "weight_gemm_ns_per_byte = 1:0.17 2:0.19 4:0.21 32:0.33\n"
             "head_gemm_ns_per_byte = 1:0.27\nsched_ns_per_token = dense:15.5 swa:16.8\n"
             "weight_kernel_ns_per_byte = 1:0.15 2:0.18\n   3:0.25\n"
             "kv_ns_per_token = 6.5\nkv_ns_per_layer = 120\nkv_ns_per_stream = 75\n"
             "sched_ns_per_layer = swa:900\n"
             "attn_ns_per_token_by_kv = 166:183 10600:218\nweight_probe_gbps = 23.5\n"
             "sched_ns_per_stream = h2o:2100 swa:0\nsched_ns_per_retired = h2o:170\n"
             "attn_sparse_ns_per_token_by_kv = 166:171 2650:220 10600:250\n",
             base);
    tu_write(path, (const uint8_t *)text, strlen(text));
    struct catalog c = {0};
    struct alisa_err e = {{0}};
    assert_int_equal(catalog_load_hardware(&c, path, &e), 0);
    const struct hw_profile *h = catalog_hw(&c, "cpu");
    assert_non_null(h);
    assert_int_equal(h->serial, 1);
    assert_true(h->weight_bytes == 4 && h->attn_ns_per_token == 400 && h->attn_ns_fixed == 1500 &&
                h->attn_ns_per_layer == 9e3 && h->recompute_ns == 2e4);
    assert_int_equal(h->weight_gemm.n, 4);
    assert_true(h->weight_gemm.rows[3] == 32 && h->weight_gemm.ns_per_byte[3] == 0.33);
    assert_int_equal(h->head_gemm.n, 1);
    assert_int_equal(h->weight_kernel.n, 3);
    assert_true(h->weight_kernel.rows[2] == 3 && h->weight_kernel.ns_per_byte[2] == 0.25);
    assert_int_equal(h->head_kernel.n, 0);
    assert_int_equal(h->sched_ns.n, 2);
    assert_string_equal(h->sched_ns.name[1], "swa");
    assert_true(h->sched_ns.value[1] == 16.8);
    assert_true(h->kv_ns_per_token == 6.5 && h->kv_ns_per_layer == 120 &&
                h->kv_ns_per_stream == 75);
    assert_int_equal(h->sched_layer_ns.n, 1);
    assert_true(h->sched_layer_ns.value[0] == 900);
    assert_int_equal(h->attn_by_kv.n, 2);
    assert_true(h->attn_by_kv.rows[1] == 10600 && h->attn_by_kv.ns_per_byte[1] == 218);
    assert_true(h->weight_probe_gbps == 23.5);
    assert_int_equal(h->sched_stream_ns.n, 2);
    assert_true(h->sched_stream_ns.value[0] == 2100 && h->sched_stream_ns.value[1] == 0);
    assert_int_equal(h->sched_retired_ns.n, 1);
    assert_true(h->sched_retired_ns.value[0] == 170);
    assert_int_equal(h->attn_sparse_by_kv.n, 3);
    assert_true(h->attn_sparse_by_kv.rows[1] == 2650 && h->attn_sparse_by_kv.ns_per_byte[2] == 250);
    catalog_deinit(&c);

    const char *bad[][2] = {
        {"weight_gemm_ns_per_byte = 2:0.1 1:0.2\n", ":12: weight_gemm_ns_per_byte: '2:0.1 1:0.2' at '1:0.2'"},
        {"weight_gemm_ns_per_byte = 1:0\n", "must be a positive number"},
        {"weight_gemm_ns_per_byte = 1.5:0.2\n", "whole, increasing keys"},
        {"attn_ns_per_token_by_kv = 166:183 100:200\n", "whole, increasing keys"},
        {"attn_sparse_ns_per_token_by_kv = 166:-1\n", "must be a positive number"},
        {"sched_ns_per_token = swa\n", ":12: sched_ns_per_token: 'swa' at 'swa': expected NAME:VALUE"},
        {"sched_ns_per_token = swa:-1\n", "values non-negative"},
        {"serial = 2\n", ":1: [cpu]: serial = 2 must be 0 or 1"},
        /* an indented line continues a table, rows still increasing; a
         * table set again after another key is set twice */
        {"head_kernel_ns_per_byte = 1:0.1 2:0.2\n  2:0.3\n", "rows must keep increasing after 2"},
        {"head_kernel_ns_per_byte = 1:0.1\nserial = 1\nhead_kernel_ns_per_byte = 2:0.1\n",
         "key 'head_kernel_ns_per_byte' set twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", base, bad[i][0]);
        tu_write(path, (const uint8_t *)text, strlen(text));
        memset(&c, 0, sizeof c);
        assert_int_equal(catalog_load_hardware(&c, path, &e), ALISA_EINVAL);
        if (!strstr(e.msg, bad[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, e.msg, bad[i][1]);
    }
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_shipped_files_load_with_all_paper_models_and_profiles),
        cmocka_unit_test(test_catalog_reads_the_real_checkpoint_shape_from_its_header),
        cmocka_unit_test(test_catalog_missing_checkpoint_is_unavailable_not_fatal),
        cmocka_unit_test(test_catalog_bad_model_files_name_the_line_and_problem),
        cmocka_unit_test(test_catalog_bad_hardware_values_are_rejected),
        cmocka_unit_test(test_catalog_executor_profile_keys_parse_and_bad_tables_fail),
        cmocka_unit_test(test_catalog_software_profiles_parse_and_bad_values_fail),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
