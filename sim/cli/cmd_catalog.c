/* `alisa catalog`: prints the model and hardware catalogs as tables or JSON.
 *
 * Read-only view over catalog.h; checkpoint entries whose file is missing
 * are listed with the reason instead of a shape.
 */
#include <jansson.h>
#include <stddef.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmds.h"
#include "costmodel.h"

struct catalog_opts {
    const char *dir, *profile;
    int json;
};

#define CO(f) offsetof(struct catalog_opts, f)
static const struct cli_opt catalog_opts[] = {
    {"json", NULL, CLI_FLAG, CO(json), NULL, 0, "print JSON instead of a table", 0},
    {"catalog", "DIR", CLI_STR, CO(dir), NULL, 0,
     "directory holding models.ini, hardware.ini and software.ini\n"
     "(default: $ALISA_CATALOG, else sim/model/catalog of the source tree)", 0},
    {"profile", "FILE", CLI_STR, CO(profile), NULL, 0,
     "hardware profiles added to the catalog (alisa calibrate, or\n"
     "a measured host in experiments/measured/)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group catalog_groups[] = {{catalog_opts, 0}};
static const struct cli_command_opts catalog_command = {catalog_groups, 1, 0, 1};

void cmd_catalog_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa catalog [models|hardware|software] [options]\n"
            "\n"
            "Prints the model shapes, hardware profiles and software host costs that the\n"
            "simulator and the generator know. Without a kind, prints all three.\n"
            "\n"
            "  models          model shapes (the paper's models and the real checkpoints\n"
            "                  under the models directory, whose shape is read from the file)\n"
            "  hardware        GPU + host profiles (memory, bandwidths, FLOP/s, link)\n"
            "  software        each system's host costs (launches per layer, host time per\n"
            "                  launch, pageable staging) that alisa sim prices\n");
    cli_opts_help(out, &catalog_command, 18);
    fprintf(out, "\n"
            "Models directory: $ALISA_MODELS, else ../shared/models beside the source tree.\n"
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa catalog models\n");
}

static void print_models_table(const struct catalog *c)
{
    printf("%-13s %-7s %6s %6s %5s %4s %6s %6s %5s %8s %9s %13s\n", "model", "family", "layers",
           "hidden", "heads", "kv", "ffn", "vocab", "tied", "params", "weights", "KV/token");
    for (size_t i = 0; i < c->n_models; i++) {
        const struct model_shape *m = &c->models[i];
        if (!m->available) {
            printf("%-13s %-7s unavailable: %s\n", m->name, m->family, m->note);
            continue;
        }
        double kv = catalog_kv_bytes_per_token(m);
        printf("%-13s %-7s %6u %6u %5u %4u %6u %6u %5s %7.3gB %7.3gGB %10.4gKiB\n", m->name,
               m->family, m->n_layers, m->hidden, m->n_heads, m->n_kv_heads, m->ffn, m->vocab,
               m->tied_embeddings ? "yes" : "no", m->params / 1e9, m->weight_bytes_fp16 / 1e9,
               kv / 1024.0);
    }
}

/* The width of the name column: its heading or the longest name. */
static int name_width(const char *heading, const char *first, size_t n, size_t stride)
{
    size_t w = strlen(heading);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(first + i * stride);
        w = l > w ? l : w;
    }
    return (int)w;
}

static void print_hw_table(const struct catalog *c)
{
    int w = c->n_hw ? name_width("profile", c->hw[0].name, c->n_hw, sizeof c->hw[0]) : 7;
    printf("%-*s %-28s %8s %9s %9s %9s %9s %8s %9s\n", w, "profile", "gpu", "mem GiB", "HBM GB/s",
           "FP16 TF/s", "host GiB", "link GB/s", "link us", "DRAM GB/s");
    for (size_t i = 0; i < c->n_hw; i++) {
        const struct hw_profile *h = &c->hw[i];
        printf("%-*s %-28s %8.2f %9.0f %9.0f %9.0f %9.1f %8.1f %9.1f\n", w, h->name, h->gpu,
               h->gpu_mem_gib, h->hbm_gbps, h->fp16_tflops, h->host_dram_gib, h->link_gbps,
               h->link_latency_us, h->host_mem_gbps);
    }
}

/* "swa:4 h2o:3", or "-" for none, into buf. */
static const char *selection_ops_str(const struct sw_profile *s, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (uint32_t k = 0; k < s->selection_ops.n && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s:%.0f", k ? " " : "",
                               s->selection_ops.name[k], s->selection_ops.value[k]);
    return buf[0] ? buf : "-";
}

static void print_sw_table(const struct catalog *c)
{
    int w = c->n_sw ? name_width("software", c->sw[0].name, c->n_sw, sizeof c->sw[0]) : 8;
    printf("%-*s %13s %10s %10s %-20s %s\n", w, "software", "ops/layer", "us/op", "us/layer",
           "selection ops/layer", "pageable KV");
    for (size_t i = 0; i < c->n_sw; i++) {
        const struct sw_profile *s = &c->sw[i];
        char ops[256];
        printf("%-*s %13u %10.1f %10.1f %-20s %s\n", w, s->name, s->ops_per_layer, s->op_host_us,
               s->ops_per_layer * s->op_host_us, selection_ops_str(s, ops, sizeof ops),
               s->pageable_relay ? "staged" : "no");
    }
}

static json_t *sw_json(const struct catalog *c)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < c->n_sw; i++) {
        const struct sw_profile *s = &c->sw[i];
        json_t *sel = json_object();
        for (uint32_t k = 0; k < s->selection_ops.n; k++)
            json_object_set_new(sel, s->selection_ops.name[k],
                                json_integer((json_int_t)s->selection_ops.value[k]));
        json_array_append_new(arr, json_pack("{s:s, s:i, s:f, s:o, s:b}", "name", s->name,
                                             "ops_per_layer", s->ops_per_layer, "op_host_us",
                                             s->op_host_us, "selection_ops_per_layer", sel,
                                             "pageable_relay", s->pageable_relay));
    }
    return arr;
}

static json_t *models_json(const struct catalog *c)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < c->n_models; i++) {
        const struct model_shape *m = &c->models[i];
        json_t *o = json_pack("{s:s, s:s, s:b}", "name", m->name, "family", m->family,
                              "available", m->available);
        if (m->checkpoint[0]) {
            json_object_set_new(o, "checkpoint", json_string(m->checkpoint));
            json_object_set_new(o, "format", json_string(m->format));
        }
        if (m->available) {
            json_t *shape = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:i, "
                                            "s:f, s:f, s:f}",
                                            "layers", m->n_layers, "hidden", m->hidden, "heads",
                                            m->n_heads, "kv_heads", m->n_kv_heads, "ffn", m->ffn,
                                            "ffn_matrices", m->ffn_matrices, "vocab", m->vocab,
                                            "tied_embeddings", m->tied_embeddings, "max_seq",
                                            m->max_seq, "params", m->params,
                                            "weight_bytes_fp16", m->weight_bytes_fp16,
                                            "kv_bytes_per_token_fp16",
                                            catalog_kv_bytes_per_token(m));
            json_object_update(o, shape);
            json_decref(shape);
        } else {
            json_object_set_new(o, "note", json_string(m->note));
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *hw_json(const struct catalog *c)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < c->n_hw; i++) {
        const struct hw_profile *h = &c->hw[i];
        json_array_append_new(
            arr, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "name", h->name, "gpu",
                           h->gpu, "gpu_mem_gib", h->gpu_mem_gib, "hbm_gbps", h->hbm_gbps,
                           "fp16_tflops", h->fp16_tflops, "host_dram_gib", h->host_dram_gib,
                           "link_gbps", h->link_gbps, "link_latency_us", h->link_latency_us,
                           "host_mem_gbps", h->host_mem_gbps, "gemm_efficiency",
                           h->gemm_efficiency, "hbm_efficiency", h->hbm_efficiency,
                           "cpu_attn_traffic",
                           h->cpu_attn_traffic > 0 ? h->cpu_attn_traffic : CPU_ATTN_TRAFFIC_CODE));
    }
    return arr;
}

int cmd_catalog(int argc, char **argv)
{
    struct catalog_opts o = {.dir = catalog_default_dir()};
    int optind_ = 0;
    int req = cli_opts_parse(argc, argv, &catalog_command, &o, NULL, cmd_catalog_usage, &optind_);
    if (req)
        return req;
    int json = o.json;
    int want_models = 1, want_hw = 1, want_sw = 1;
    if (optind_ < argc) {
        want_models = strcmp(argv[optind_], "models") == 0;
        want_hw = strcmp(argv[optind_], "hardware") == 0;
        want_sw = strcmp(argv[optind_], "software") == 0;
        if (!want_models && !want_hw && !want_sw)
            return cli_usage_error(cmd_catalog_usage, "unknown catalog '%s' (models, hardware or "
                                   "software)", argv[optind_]);
        if (optind_ + 1 < argc)
            return cli_usage_error(cmd_catalog_usage, "unexpected argument '%s'", argv[optind_ + 1]);
    }
    struct catalog c;
    struct alisa_err e = {{0}};
    if (cli_catalog_load(&c, o.dir, o.profile, &e))
        return cli_fail(&e);
    if (json) {
        json_t *root = json_object();
        if (want_models)
            json_object_set_new(root, "models", models_json(&c));
        if (want_hw)
            json_object_set_new(root, "hardware", hw_json(&c));
        if (want_sw)
            json_object_set_new(root, "software", sw_json(&c));
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("\n");
        json_decref(root);
    } else {
        if (want_models)
            print_models_table(&c);
        if (want_models && want_hw)
            printf("\n");
        if (want_hw)
            print_hw_table(&c);
        if (want_sw && (want_models || want_hw))
            printf("\n");
        if (want_sw)
            print_sw_table(&c);
    }
    catalog_deinit(&c);
    return 0;
}
