/* Hugging Face checkpoints (model.h's llm_load_hf, safetensors.h) and the
 * OPT and Qwen2 architectures:
 * - tests/golden/tiny-opt (F16), tiny-llama (BF16 matrices, F32 norms,
 *   grouped-query attention, Hugging Face's rotate-half q/k layout),
 *   tiny-qwen2 (F16, q, k and v biases before the rotation, a tied head)
 *   and tiny-mistral (a sliding window of 3) give at every position the
 *   logits of an independent numpy forward pass
 *   (tests/golden/make-hf-golden.py, written from transformers'
 *   modeling_opt.py, modeling_llama.py, modeling_qwen2.py and
 *   modeling_mistral.py), within
 *   1e-4 + 1e-4 |x| (measured: 3e-6);
 * - the same checkpoint split into 2 and 3 shards with an index, as Hugging
 *   Face shards large models (files the test writes), gives the same logits;
 *   a missing shard, a tensor in the wrong shard, a shard name outside
 *   the directory and a shard that is not a .safetensors file (the index
 *   itself, or another index: issue 48's endless recursion) are refused
 *   naming the index and the tensor;
 * - a FIFO in place of any file of a checkpoint (config.json, the index,
 *   model.safetensors, a shard) is refused at once, never waited on;
 * - bad files and configs are refused with the file and the field named:
 *   a header length past the end, a tensor whose bytes do not match its
 *   shape, a missing tensor, a wrong shape, an unknown model_type, a
 *   weight that is not finite.
 * With ALISA_TEST_BACKEND=cuda the four numpy checks run on the CUDA
 * backend instead (scripts/gpu-window's tests stage; skipped without a
 * device): its GEMMs read FP16 inputs, so the logits are held to 5e-3 +
 * 5e-3 |x| there (test_cuda measured CPU and CUDA 1.2e-3 apart on
 * tiny-opt), where a wrong kernel is off by whole units. ALISA_GOLDEN_DIR
 * moves the golden files (a packed copy). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "device.h"
#include "forward.h"
#include "model.h"
#include "testutil.h"

#define MAX_T 16
#define MAX_V 64

static char gdir[600]; /* the golden files: ALISA_GOLDEN_DIR, else the compiled path */

/* The golden logits of `name` from hf-golden.txt: ids, T positions x V. */
static void golden(const char *name, uint32_t *ids, uint32_t *T, uint32_t *V,
                   double logits[MAX_T][MAX_V])
{
    char path[700];
    snprintf(path, sizeof path, "%s/hf-golden.txt", gdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char nm[64];
        if (sscanf(line, "model %63s %u %u", nm, T, V) == 3 && strcmp(nm, name) == 0)
            found = 1;
    }
    assert_true(found && *T <= MAX_T && *V <= MAX_V);
    assert_non_null(fgets(line, sizeof line, f));
    char *p = line + 4, *end;
    for (uint32_t t = 0; t < *T; t++, p = end)
        ids[t] = (uint32_t)strtoul(p, &end, 10);
    for (uint32_t t = 0; t < *T; t++) {
        assert_non_null(fgets(line, sizeof line, f));
        p = line;
        for (uint32_t v = 0; v < *V; v++, p = end)
            logits[t][v] = strtod(p, &end);
    }
    fclose(f);
}

static void check_model(const char *name, const char *file, enum llm_arch arch)
{
    const char *be = getenv("ALISA_TEST_BACKEND");
    const int cuda = be && strcmp(be, "cuda") == 0;
    if (be && *be && !cuda && strcmp(be, "cpu") != 0)
        fail_msg("ALISA_TEST_BACKEND: cpu or cuda, not '%s'", be);
    const double tol = cuda ? 5e-3 : 1e-4;
    if (cuda) {
        struct device_info d;
        device_probe(&d);
        if (d.n_devices == 0) {
            print_message("skipped on the CUDA backend: %s\n", d.note);
            tu_skip();
        }
    }
    char path[700]; /* a name under the golden directory, or a path (the shards' copies) */
    snprintf(path, sizeof path, "%s%s%s", file[0] == '/' ? "" : gdir, file[0] == '/' ? "" : "/",
             file);
    uint32_t ids[MAX_T], T, V;
    static double want[MAX_T][MAX_V];
    golden(name, ids, &T, &V, want);
    struct llm_model *m;
    struct alisa_err e = {{0}};
    if (llm_load(&m, path, LLM_WEIGHTS_F32, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m->c.arch, arch);
    assert_int_equal(m->c.vocab, V);
    struct llm_state *s;
    if (llm_state_create_on(&s, cuda ? LLM_BACKEND_CUDA : LLM_BACKEND_CPU, m, 1, T, &e))
        fail_msg("%s", e.msg);
    /* the first half as one chunk, then position by position */
    const float *lg = llm_forward_chunk(s, ids, 0, T / 2, NULL);
    assert_non_null(lg);
    double worst = 0;
    for (uint32_t t = 0; t < T; t++) {
        if (t >= T / 2)
            assert_non_null(lg = llm_forward(s, &ids[t], t, NULL));
        const float *row = t < T / 2 ? lg + (size_t)t * V : lg;
        for (uint32_t v = 0; v < V; v++) {
            double d = fabs(row[v] - want[t][v]);
            worst = d > worst ? d : worst;
            if (d > tol + tol * fabs(want[t][v]))
                fail_msg("%s position %u logit %u: %.6f, numpy %.6f (%s backend)", name, t, v,
                         row[v], want[t][v], cuda ? "CUDA" : "CPU");
        }
        if (t + 1 == T / 2) /* the chunk's logits are read; later calls reuse the buffer */
            lg = NULL;
    }
    print_message("%s: %u x %u logits within %.2g of numpy's (%s backend)\n", name, T, V, worst,
                  cuda ? "CUDA" : "CPU");
    llm_state_free(s);
    llm_free(m);
}

static void test_hf_opt_matches_numpy(void **state)
{
    (void)state;
    check_model("tiny-opt", "tiny-opt", LLM_ARCH_OPT);
}

static void test_hf_llama_matches_numpy(void **state)
{
    (void)state;
    check_model("tiny-llama", "tiny-llama/model.safetensors", LLM_ARCH_LLAMA);
}

/* Qwen2: LLaMA's layer with q, k and v biases, described as data
 * (llm_arch_info), run by the same layer sequence */
static void test_hf_qwen2_matches_numpy(void **state)
{
    (void)state;
    check_model("tiny-qwen2", "tiny-qwen2", LLM_ARCH_QWEN2);
}

/* Mistral: LLaMA's layer with a sliding window of 3 (config.json's
 * sliding_window), each query attending its last 3 positions: numpy's
 * logits at positions 3 to 7 hold only with the window applied */
static void test_hf_mistral_sliding_window_matches_numpy(void **state)
{
    (void)state;
    check_model("tiny-mistral", "tiny-mistral", LLM_ARCH_MISTRAL);
}

/* A copy of tiny-opt in a temporary directory, its safetensors bytes changed
 * by edit (NULL: unchanged) and its config replaced by cfg (NULL: kept);
 * returns the directory. */
static const char *bad_copy(void (*edit)(unsigned char *, size_t *), const char *cfg)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/alisa-test-hf-%d", (int)getpid());
    mkdir(dir, 0700);
    char p[128];
    FILE *in = fopen(ALISA_GOLDEN_DIR "/tiny-opt/model.safetensors", "rb");
    assert_non_null(in);
    static unsigned char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    if (edit)
        edit(buf, &n);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    FILE *out = fopen(p, "wb");
    assert_non_null(out);
    fwrite(buf, 1, n, out);
    fclose(out);
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (cfg) {
        out = fopen(p, "w");
        fputs(cfg, out);
        fclose(out);
    } else {
        tu_copy(ALISA_GOLDEN_DIR "/tiny-opt/config.json", p, SIZE_MAX);
    }
    return dir;
}

static void cleanup(const char *dir)
{
    char p[128];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

static void expect_error(const char *dir, const char *needle)
{
    struct llm_model *m = NULL;
    struct alisa_err e = {{0}};
    assert_int_not_equal(llm_load(&m, dir, LLM_WEIGHTS_F32, &e), 0);
    assert_null(m);
    if (!strstr(e.msg, needle))
        fail_msg("error '%s' does not say '%s'", e.msg, needle);
    cleanup(dir);
}

static void huge_header(unsigned char *b, size_t *n)
{
    (void)n;
    b[5] = 0x7f; /* header length ~ 2^47 */
}

static void truncate_data(unsigned char *b, size_t *n)
{
    (void)b;
    *n -= 100;
}

/* renames the first tensor whose name holds "fc1.weight" to "fc9.weight" */
static void rename_tensor(unsigned char *b, size_t *n)
{
    for (size_t i = 0; i + 10 < *n; i++)
        if (memcmp(b + i, "fc1.weight", 10) == 0) {
            b[i + 2] = '9';
            return;
        }
    fail_msg("no fc1.weight in the header");
}

/* weight 5 of model.decoder.layers.0.fc1.weight (F16) becomes a NaN */
static void nan_weight(unsigned char *b, size_t *n)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | b[i];
    json_t *head = json_loadb((const char *)b + 8, hlen, 0, NULL);
    json_t *t = json_object_get(head, "model.decoder.layers.0.fc1.weight");
    assert_string_equal(json_string_value(json_object_get(t, "dtype")), "F16");
    size_t at = 8 + hlen +
                (size_t)json_integer_value(json_array_get(json_object_get(t, "data_offsets"), 0));
    assert_true(at + 12 <= *n);
    b[at + 10] = 0x00, b[at + 11] = 0x7e; /* binary16 quiet NaN, little-endian */
    json_decref(head);
}

static void test_hf_refuses_bad_files_naming_the_field(void **state)
{
    (void)state;
    /* issue 48: a weight that is not finite */
    expect_error(bad_copy(nan_weight, NULL),
                 "model.safetensors: tensor 'model.decoder.layers.0.fc1.weight': weight 5 is not "
                 "finite");
    expect_error(bad_copy(huge_header, NULL), "header length");
    expect_error(bad_copy(truncate_data, NULL), "data section holds");
    expect_error(bad_copy(rename_tensor, NULL), "layers.0.fc1.weight' missing");
    expect_error(bad_copy(NULL, "{\"model_type\": \"gpt2\"}"), "model_type 'gpt2'");
    expect_error(bad_copy(NULL, "{\"model_type\": \"qwen2\", \"use_sliding_window\": true}"),
                 "use_sliding_window true");
    expect_error(bad_copy(NULL, "{\"model_type\": \"mistral\", \"hidden_size\": 32, "
                                "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
                                "\"intermediate_size\": 64, \"vocab_size\": 64, "
                                "\"max_position_embeddings\": 128, \"sliding_window\": 0}"),
                 "'sliding_window' is out of range");
    expect_error(bad_copy(NULL, "{\"model_type\": \"opt\", \"hidden_size\": 32}"),
                 "'num_attention_heads' is missing");
    /* a config larger than the file: refused before any allocation */
    expect_error(bad_copy(NULL, "{\"model_type\": \"opt\", \"hidden_size\": 4096, "
                                "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
                                "\"ffn_dim\": 16384, \"vocab_size\": 50272, "
                                "\"max_position_embeddings\": 2048}"),
                 "more than");
    /* an odd head size: refused by the validation every loader shares */
    expect_error(bad_copy(NULL, "{\"model_type\": \"opt\", \"hidden_size\": 12, "
                                "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
                                "\"ffn_dim\": 64, \"vocab_size\": 64, "
                                "\"max_position_embeddings\": 128}"),
                 "config.json: head size 3 (dim 12 / 4 heads): must be even and at least 2");
    /* the wrong width for the file's tensors */
    expect_error(bad_copy(NULL, "{\"model_type\": \"opt\", \"hidden_size\": 16, "
                                "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
                                "\"ffn_dim\": 64, \"vocab_size\": 64, "
                                "\"max_position_embeddings\": 128}"),
                 "embed_tokens.weight' has 2 dimensions (64, 32), expected (64, 16)");
}

/* tiny-llama split as Hugging Face shards a checkpoint: its tensors dealt
 * round-robin into `parts` shard files (model-0000i-of-0000n.safetensors),
 * a model.safetensors.index.json mapping each to its shard, config.json
 * beside them, in a temporary directory (returned). edit_index, when not
 * NULL, changes the index's weight_map before it is written. */
static char shard_dir[64];

static const char *shard_copy(int parts, void (*edit_index)(json_t *map))
{
    char *dir = shard_dir;
    snprintf(dir, sizeof shard_dir, "/tmp/alisa-test-shards-%d", (int)getpid());
    mkdir(dir, 0700);
    FILE *in = fopen(ALISA_GOLDEN_DIR "/tiny-llama/model.safetensors", "rb");
    assert_non_null(in);
    static unsigned char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    json_t *head = json_loadb((const char *)buf + 8, hlen, 0, NULL), *map = json_object();
    assert_non_null(head);
    const unsigned char *data = buf + 8 + hlen;
    json_t *sh[4];
    static unsigned char body[4][1 << 17];
    size_t used[4] = {0}, k = 0;
    assert_true(parts <= 4);
    for (int i = 0; i < parts; i++)
        sh[i] = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(head, key, v)
    {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        int i = (int)(k++ % (size_t)parts);
        json_t *off = json_object_get(v, "data_offsets");
        size_t b = (size_t)json_integer_value(json_array_get(off, 0));
        size_t end = (size_t)json_integer_value(json_array_get(off, 1));
        assert_true(end <= n - 8 - hlen);
        memcpy(body[i] + used[i], data + b, end - b);
        json_t *t = json_deep_copy(v);
        json_object_set_new(t, "data_offsets",
                            json_pack("[I, I]", (json_int_t)used[i], (json_int_t)(used[i] + end - b)));
        json_object_set_new(sh[i], key, t);
        used[i] += end - b;
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i + 1, parts);
        json_object_set_new(map, key, json_string(name));
    }
    char p[160];
    for (int i = 0; i < parts; i++) {
        char *hj = json_dumps(sh[i], JSON_COMPACT);
        uint64_t hl = strlen(hj);
        unsigned char len8[8];
        for (int j = 0; j < 8; j++)
            len8[j] = (unsigned char)(hl >> (8 * j));
        snprintf(p, sizeof p, "%s/model-%05d-of-%05d.safetensors", dir, i + 1, parts);
        FILE *out = fopen(p, "wb");
        assert_non_null(out);
        fwrite(len8, 1, 8, out);
        fwrite(hj, 1, hl, out);
        fwrite(body[i], 1, used[i], out);
        fclose(out);
        free(hj);
        json_decref(sh[i]);
    }
    if (edit_index)
        edit_index(map);
    json_t *index = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)(n - 8 - hlen),
                              "weight_map", map);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    assert_int_equal(json_dump_file(index, p, 0), 0);
    json_decref(index);
    json_decref(head);
    snprintf(p, sizeof p, "%s/config.json", dir);
    tu_copy(ALISA_GOLDEN_DIR "/tiny-llama/config.json", p, SIZE_MAX);
    return dir;
}

static void shard_cleanup(const char *dir, int parts)
{
    char p[160];
    for (int i = 0; i < parts; i++) {
        snprintf(p, sizeof p, "%s/model-%05d-of-%05d.safetensors", dir, i + 1, parts);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/other.index.json", dir);
    unlink(p);
    rmdir(dir);
}

static void missing_shard(json_t *map)
{
    json_object_set_new(map, "model.norm.weight", json_string("model-00009-of-00009.safetensors"));
}

static void wrong_shard(json_t *map)
{
    const char *first = json_string_value(json_object_get(map, "model.embed_tokens.weight"));
    char other[64];
    snprintf(other, sizeof other, "%s", first);
    other[10] = other[10] == '1' ? '2' : '1'; /* model-0000X: the other shard */
    json_object_set_new(map, "model.embed_tokens.weight", json_string(other));
}

static void escaping_shard(json_t *map)
{
    json_object_set_new(map, "model.norm.weight", json_string("../model.safetensors"));
}

/* issue 48: an index naming itself recursed until the stack ran out */
static void index_names_itself(json_t *map)
{
    json_object_set_new(map, "model.norm.weight", json_string("model.safetensors.index.json"));
}

/* issue 48: two indexes naming each other recursed the same way */
static void index_names_another_index(json_t *map)
{
    json_object_set_new(map, "model.norm.weight", json_string("other.index.json"));
    char p[160];
    snprintf(p, sizeof p, "%s/other.index.json", shard_dir);
    json_t *other = json_pack("{s:{s:s}}", "weight_map", "model.norm.weight",
                              "model.safetensors.index.json");
    assert_int_equal(json_dump_file(other, p, 0), 0);
    json_decref(other);
}

static void shard_not_a_data_file(json_t *map)
{
    json_object_set_new(map, "model.norm.weight", json_string("config.json"));
}

/* A sharded checkpoint (model.safetensors.index.json and its shards) loads
 * as the single file does: the same numpy logits; a directory holding only
 * the index is found; a broken index names the index and the tensor. */
static void test_hf_sharded_checkpoint_matches_the_single_file(void **state)
{
    (void)state;
    for (int parts = 2; parts <= 3; parts++) {
        const char *dir = shard_copy(parts, NULL);
        check_model("tiny-llama", dir, LLM_ARCH_LLAMA);
        char idx[160];
        snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
        check_model("tiny-llama", idx, LLM_ARCH_LLAMA);
        shard_cleanup(dir, parts);
    }
    void (*edits[])(json_t *) = {missing_shard, wrong_shard, escaping_shard, index_names_itself,
                                 index_names_another_index, shard_not_a_data_file};
    const char *says[] = {"model-00009-of-00009.safetensors: cannot open",
                          "weight_map[\"model.embed_tokens.weight\"]: not in",
                          "weight_map[\"model.norm.weight\"]: not a shard file name",
                          "model.safetensors.index.json: weight_map[\"model.norm.weight\"]: shard "
                          "'model.safetensors.index.json' is not a .safetensors data file",
                          "model.safetensors.index.json: weight_map[\"model.norm.weight\"]: shard "
                          "'other.index.json' is not a .safetensors data file",
                          "weight_map[\"model.norm.weight\"]: shard 'config.json' is not a "
                          ".safetensors data file"};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const char *dir = shard_copy(2, edits[i]);
        struct llm_model *m = NULL;
        struct alisa_err e = {{0}};
        assert_int_not_equal(llm_load(&m, dir, LLM_WEIGHTS_F32, &e), 0);
        assert_null(m);
        if (!strstr(e.msg, says[i]))
            fail_msg("error '%s' does not say '%s'", e.msg, says[i]);
        shard_cleanup(dir, 2);
    }
}

/* Replaces dir/name by a FIFO, loads path, expects an error naming name as
 * not a regular file. Opening a FIFO for reading waits for a writer: the
 * alarm turns a loader that waits into a failed test instead of a hang. */
static void expect_fifo_refused(const char *dir, const char *name, const char *path)
{
    char p[200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    struct llm_model *m = NULL;
    struct alisa_err e = {{0}};
    alarm(20);
    int rc = llm_load(&m, path, LLM_WEIGHTS_F32, &e);
    alarm(0);
    assert_int_not_equal(rc, 0);
    assert_null(m);
    char want[240];
    snprintf(want, sizeof want, "%s: not a regular file", p);
    if (!strstr(e.msg, want))
        fail_msg("error '%s' does not say '%s'", e.msg, want);
}

static void test_hf_a_fifo_for_any_checkpoint_file_is_refused_without_waiting(void **state)
{
    (void)state;
    const char *in_dir[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) {
        const char *dir = bad_copy(NULL, NULL);
        expect_fifo_refused(dir, in_dir[i], dir);
        cleanup(dir);
    }
    const char *sharded[] = {"model-00002-of-00002.safetensors", "model.safetensors.index.json"};
    for (int i = 0; i < 2; i++) {
        const char *dir = shard_copy(2, NULL);
        char idx[160];
        snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
        expect_fifo_refused(dir, sharded[i], idx);
        shard_cleanup(dir, 2);
    }
}

int main(void)
{
    const char *g = getenv("ALISA_GOLDEN_DIR"), *be = getenv("ALISA_TEST_BACKEND");
    snprintf(gdir, sizeof gdir, "%s", g && *g ? g : ALISA_GOLDEN_DIR);
    const struct CMUnitTest tests[] = {
        /* the numpy checks first: on the CUDA backend only they run (the
         * rest test the loaders, the same on every backend) */
        cmocka_unit_test(test_hf_opt_matches_numpy),
        cmocka_unit_test(test_hf_llama_matches_numpy),
        cmocka_unit_test(test_hf_qwen2_matches_numpy),
        cmocka_unit_test(test_hf_mistral_sliding_window_matches_numpy),
        cmocka_unit_test(test_hf_refuses_bad_files_naming_the_field),
        cmocka_unit_test(test_hf_sharded_checkpoint_matches_the_single_file),
        cmocka_unit_test(test_hf_a_fifo_for_any_checkpoint_file_is_refused_without_waiting),
    };
    size_t n = sizeof tests / sizeof tests[0];
    if (be && strcmp(be, "cuda") == 0) /* the leading numpy checks, counted by name */
        for (n = 0; n < sizeof tests / sizeof tests[0] && strstr(tests[n].name, "matches_numpy"); n++)
            ;
    return tu_result(_cmocka_run_group_tests("test_hf", tests, n, NULL, NULL));
}
