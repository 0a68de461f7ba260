/* `alisa calibrate`: measures this machine for the CPU or the CUDA backend
 * (the microbenchmarks of calibrate.h), repeats them, prints each figure's mean
 * and spread, and writes a hardware profile in the catalog's format with the
 * figures and how they were measured. A shell over calibrate.h.
 */
#include <getopt.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"
#include "calibrate.h"
#include "cli.h"
#include "cli_exec.h"
#include "cpu_ops.h"
#include "progress.h"
#include "cmds.h"

/* What the command line asks for. */
struct calibrate_opts {
    const char *model, *tokenizer, *text, *out, *backend, *name;
    uint32_t repeat;
    struct kv_opts exec;           /* only --weights and --threads */
    int json;
};

#define KO(f) offsetof(struct calibrate_opts, f)
static const struct cli_opt calibrate_own_opts[] = {
    {"model", "M", CLI_STR, KO(model), NULL, 1,
     "as alisa run --model (its shapes): a catalog or short name,\n"
     "llama2.c .bin, GGUF file or Hugging Face checkpoint directory", 0},
    {"text", "FILE", CLI_STR, KO(text), NULL, 0,
     "feed the in-situ runs the second half of this text's tokens\n"
     "(as alisa record tokenises it; the first half stays free for\n"
     "validation windows): the scheduler's and attention's costs\n"
     "depend on the attention real tokens produce. Default:\n"
     "synthetic ids spread over the vocabulary", 0},
    {"tokenizer", "T", CLI_STR, KO(tokenizer), NULL, 0,
     "tokenizer file (default: the catalog's or the GGUF's; loaded\n"
     "and checked when given)", 0},
    {"output", "P", CLI_STR, KO(out), NULL, 1,
     "profile to write", 'o'},
    {"backend", "B", CLI_STR, KO(backend), NULL, 0,
     "cpu (default), cuda (device 0; fails without one) or auto", 0},
    {"repeat", "N", CLI_U32, KO(repeat), NULL, 0,
     "runs of every benchmark (default 3, at least 2)", 0},
    {"name", "NAME", CLI_STR, KO(name), NULL, 0,
     "section name (default cpu-<hostname> or cuda-<hostname>)", 0},
    {"json", NULL, CLI_FLAG, KO(json), NULL, 0,
     "print the runs and statistics as JSON", 0},
    {0}};
static const struct cli_group calibrate_groups[] = {
    {calibrate_own_opts, 0}, {exec_weights_table, offsetof(struct calibrate_opts, exec)}};
static const struct cli_command_opts calibrate_command = {calibrate_groups, 2, 0, 0};
#undef KO

void cmd_calibrate_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa calibrate --model M -o PROFILE [options]\n"
            "\n"
            "Measures this machine as the executor's backend (CPU, or CUDA on device 0)\n"
            "uses it, with the shapes of model M,\n"
            "and writes a hardware profile (one catalog section, alisa catalog's format;\n"
            "PROFILE.part, renamed when complete). Each benchmark runs --repeat times; the\n"
            "mean, minimum, maximum and spread ((max - min) / mean) of every figure are\n"
            "printed. Profile keys and what measures them:\n"
            "  weight_gemm_ns_per_byte, head_gemm_ns_per_byte  the decode's weight GEMMs\n"
            "      in the executor's own timings (1 to 32 sequences of --text tokens;\n"
            "      layers, with their element-wise work, and output head apart), ns per\n"
            "      weight byte at 1, 2, 4, 8, 16 and 32 rows; the cost model interpolates\n"
            "  weight_kernel_ns_per_byte, head_kernel_ns_per_byte  the same GEMMs alone\n"
            "      (the backend's kernels on the model's matrices, CPU only so far) at\n"
            "      every row count 1 to 32: their shape between those rows, added to the\n"
            "      interpolation (a kernel taking rows in tiles costs more at 7 than at 8);\n"
            "      checked by leave-one-out over the in-situ rows (printed)\n"
            "  hbm_gbps, fp16_tflops  their fit: time per byte = 1/bandwidth + rows/(2 x rate)\n"
            "  link_gbps, link_latency_us  copies between two arenas, 1 token to 16 MiB, fit\n"
            "      (CUDA: pinned host memory and the device, both directions)\n"
            "  host_mem_gbps    a streaming read of 256 MiB\n"
            "  attn_ns_per_token, attn_ns_fixed  the executor decoding 384 positions under\n"
            "      the scheduler (repeated for 0.5 s, each position's median), attention\n"
            "      time fitted against the context; then runs attending 16 tokens with 1\n"
            "      and 8 sequences give the fixed costs per sequence and layer\n"
            "  attn_ns_per_layer  ... and per layer whatever the batch (a GPU's launches)\n"
            "  recompute_ns     K and V of one token from its layer input, weights hot\n"
            "      (CUDA: the K and V GEMM of 16 tokens at once, per token)\n"
            "  sched_ns_per_token, sched_ns_per_stream, sched_ns_per_layer,\n"
            "  sched_ns_per_attended  the scheduler's own time per stream and context\n"
            "      token, per stream, per layer, and per stream and attended token, by\n"
            "      selection, from the executor's timings with 1 and 16 sequences after 48\n"
            "      prompt tokens and 4 after 144 at 80%% sparsity, and 4 after 144 at 50%%\n"
            "      for a selection with a budget (12 decode steps each; the terms by\n"
            "      non-negative least squares: exact when none is negative, else a term\n"
            "      at 0 and the others fitted to the runs)\n"
            "  sched_ns_per_retired  per token a plan retires, by selection: the first\n"
            "      decode step's bulk retirement over the later steps, same runs\n"
            "  kv_ns_per_token, kv_ns_per_stream, kv_ns_per_layer  the KV arenas'\n"
            "      bookkeeping, the dense runs of the same three (same solve)\n"
            "  attn_ns_per_token_by_kv  attention per attended token by the KV a step\n"
            "      reads (KiB, every layer): 1, 4, 8, 16, 32 and 64 sequences decoding 8\n"
            "      steps after 128 prompt tokens, while that KV stays under 256 MiB; it\n"
            "      replaces attn_ns_per_token (one sequence, in cache) in the cost model\n"
            "  attn_sparse_ns_per_token_by_kv  the same with SWA at 80%% sparsity (every\n"
            "      token resident, a fifth attended), by the KV resident\n"
            "  dense_attn_ns_per_layer, _per_row, _per_prompt_pair, _per_decode_token\n"
            "      the dense cache's attention (no scheduler: what alisa serve-run runs\n"
            "      with no selection, its rows across the threads, no gather): one\n"
            "      sequence's prompt of 16, 64, 128, 256 and 384 tokens as one chunk, 4\n"
            "      and 16 sequences decoding 8 steps after 64 tokens and 4 after 256;\n"
            "      the four terms by non-negative least squares over the points above\n"
            "      dense_attn_parallel_min (a decode point below it run with its\n"
            "      sequences doubled until it is above); the prompt chunks' layer GEMMs\n"
            "      (pgemm_r*_ns_b) extend weight_gemm_ns_per_byte past 32 rows\n"
            "  dense_attn_one_ns_per_layer, _per_token  the same cache's one-row call\n"
            "      (attended on the calling thread): one sequence decoding 8 steps after\n"
            "      64 and after 256 tokens, the line through the two\n"
            "  dense_attn_parallel_min  the multiply-adds below which the executor\n"
            "      attends a call's rows one after another on the calling thread, each\n"
            "      as a one-row call (passive waits, two threads or more; else 0)\n"
            "  weight_probe_gbps  the one-row weight pass alisa validate samples the\n"
            "      machine with (runs of 1 prompt token and 2 decode steps, 0.5 s)\n"
            "  batched_copies   0: the CPU executor copies K and V token by token; 1: the\n"
            "      CUDA executor gathers a layer's moves into one copy each way\n"
            "  weight_bytes     bytes per weight as the executor holds them (CPU: 4 for\n"
            "      FP32, 0.625 for Q4_1 blocks, averaged over layers and head; CUDA: 2)\n"
            "  serial = 1, efficiencies 1\n"
            "Reported only: the best in-cache GEMM rate (1 to 256 rows; CUDA: cuBLAS\n"
            "alone) and its one-row bandwidth.\n"
            "\n"
            );
    cli_opts_help(out, &calibrate_command, 19);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh; about a minute on 2 cores):\n"
            "  alisa calibrate --model stories260K --repeat 2 -o profile.ini\n");
}

struct stat4 {
    double mean, min, max, spread;
};

/* "key = KIB:NS ..." from the CALIB_ATTN_N figures by calib_attn_batch (a figure
 * whose runs did not all run is left out); nothing when none ran. */
static void attn_table(FILE *f, const char *key, const struct llm_config *c,
                       const struct stat4 *st)
{
    int points = 0;
    for (int i = 0; i < CALIB_ATTN_N; i++)
        if (st[i].min > 0) {
            if (points++ == 0)
                fprintf(f, "%s =", key);
            fprintf(f, " %.0f:%.4g", ceil(calib_attn_kv_bytes(c, calib_attn_batch[i]) / 1024),
                    st[i].mean);
        }
    if (points)
        fprintf(f, "\n");
}


static int kernel_figure(int f)
{
    return f >= CALIB_KGEMM_FIRST && f <= CALIB_KHEAD_LAST;
}

/* "key = 1:NS 2:NS ..." from the CALIB_KGEMM_ROWS kernel figures at st,
 * continued on indented lines; nothing when the backend measured none. */
static void kernel_table(FILE *f, const char *key, const struct stat4 *st)
{
    if (!(st[0].mean > 0))
        return;
    fprintf(f, "%s =", key);
    for (int i = 0; i < CALIB_KGEMM_ROWS; i++) /* 8 a line: the catalog reads 198 characters */
        fprintf(f, "%s %d:%.5g", i && i % 8 == 0 ? "\n   " : "", i + 1, st[i].mean);
    fprintf(f, "\n");
}

/* The kernel rule's leave-one-out over the in-situ rows (calib_kernel_loo)
 * for the layers (h 0) and the head (h 1): points compared, 0 when none. */
static int kernel_loo(const struct stat4 *st, int h, double line[4], double kern[4],
                      double *line_mean, double *kern_mean)
{
    double insitu[6], kernel[CALIB_KGEMM_ROWS];
    for (int i = 0; i < 6; i++)
        insitu[i] = st[(h ? CALIB_HEAD_R1 : CALIB_WGEMM_R1) + i].mean;
    for (int i = 0; i < CALIB_KGEMM_ROWS; i++)
        kernel[i] = st[(h ? CALIB_KHEAD_FIRST : CALIB_KGEMM_FIRST) + i].mean;
    return calib_kernel_loo(insitu, kernel, line, kern, line_mean, kern_mean);
}

/* That check in words, one line each for the layers and the head, each
 * line led by `lead`. */
static void kernel_loo_lines(FILE *f, const char *lead, const struct stat4 *st)
{
    for (int h = 0; h < 2; h++) {
        double line[4], kern[4], lm, km;
        if (!kernel_loo(st, h, line, kern, &lm, &km))
            continue;
        fprintf(f, "%s%s at rows 2, 4, 8, 16 from their neighbours: straight line %+.1f%% "
                "%+.1f%% %+.1f%% %+.1f%% (mean %.1f%%), with the kernel's shape %+.1f%% %+.1f%% "
                "%+.1f%% %+.1f%% (mean %.1f%%)\n", lead, h ? "head" : "layers", line[0], line[1],
                line[2], line[3], lm, kern[0], kern[1], kern[2], kern[3], km);
    }
}

/* Parses argv into o. Returns 0, or an exit code (usage printed). */
static int calibrate_parse(int argc, char **argv, struct calibrate_opts *o)
{
    *o = (struct calibrate_opts){.backend = "cpu", .repeat = 3};
    int req = cli_opts_parse(argc, argv, &calibrate_command, o, NULL, cmd_calibrate_usage, NULL);
    if (req)
        return req;
    if (exec_weight_mode(o->exec.weights) < 0)
        return cli_usage_error(cmd_calibrate_usage, "--weights %s: expected native, f32 or "
                               "synthetic[:SEED]", o->exec.weights);
    if (o->repeat < 2)
        return cli_usage_error(cmd_calibrate_usage, "--repeat %u: at least 2 runs show a spread",
                               o->repeat);
    return 0;
}

/* The profile in the catalog's format: how it was measured, every figure
 * with its spread, then the [section] the simulator reads. */
static void profile_write(FILE *f, const struct calibrate_opts *o, const char *host,
                          const char *section, const struct llm_backend_info *be,
                          const struct llm_backend_info *cpu, size_t n_ids,
                          const struct llm_config *c, double wbytes, const struct stat4 *st)
{
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    double gib = cpu->mem_gib;
    fprintf(f, "; measured by `alisa calibrate --backend %s --model %s --repeat %u%s%s` on %s, "
            "%s\n", be->name, o->model, o->repeat, o->text ? " --text " : "",
            o->text ? o->text : "", host, date);
    if (be->note[0])
        fprintf(f, "; %s\n", be->note);
    if (o->text)
        fprintf(f, "; in-situ runs on the text's tokens %zu to %zu of %zu\n", n_ids / 2,
                n_ids - 1, n_ids);
    fprintf(f, "; CPU: %s, %ld online cores; means of %u runs (spread = (max - min) / mean)\n",
            cpu->device, sysconf(_SC_NPROCESSORS_ONLN), o->repeat);
    if (strcmp(be->name, "cpu") == 0) /* what the figures were measured under */
        fprintf(f, "; executor: %u threads, %s waits\n", cpu_threads(),
                cpu_waits_spin() ? "spinning" : "passive");
    for (int i = 0; i < CALIB_N; i++)
        if (!kernel_figure(i))
            fprintf(f, ";   %-18s %12.4g  (min %.4g, max %.4g, spread %.1f%%)\n",
                    calib_name(i), st[i].mean, st[i].min, st[i].max, 100 * st[i].spread);
    for (int h = 0; h < 2 && st[CALIB_KGEMM_FIRST].mean > 0; h++) {
        int first = h ? CALIB_KHEAD_FIRST : CALIB_KGEMM_FIRST;
        double worst = 0;
        for (int i = 0; i < CALIB_KGEMM_ROWS; i++)
            worst = st[first + i].spread > worst ? st[first + i].spread : worst;
        fprintf(f, ";   %s_r1..%d_ns_b: the %s alone at 1 to %d rows (below), spread at most "
                "%.1f%%\n", h ? "khead" : "kgemm", CALIB_KGEMM_ROWS, h ? "head" : "layers' GEMMs",
                CALIB_KGEMM_ROWS, 100 * worst);
    }
    kernel_loo_lines(f, "; leave-one-out, ", st);
    fprintf(f, "; mapping (the executor: %s, FP32 KV):\n", be->computes);
    fprintf(f,
               "; fp16_tflops, hbm_gbps = stream_gflops / 1000, stream_gbps (the weight\n"
               "; GEMMs' fit; serial = 1 adds the two terms); link_gbps, link_latency_us =\n"
               "; the arena-to-arena copy fit (latency clamped at 0); host_mem_gbps =\n"
               "; mem_gbps; efficiencies 1: these are rates reached; weight_bytes = the\n"
               "; bytes per weight as the executor held them (4 FP32, 2 FP16 on the GPU,\n"
               "; 0.625 Q4_1: one average over layers and head; the tables are per such\n"
               "; byte);\n"
               "; attn_ns_per_token, attn_ns_fixed, attn_ns_per_layer (attn_layer_ns),\n"
               "; recompute_ns as measured;\n"
               "; weight_gemm_ns_per_byte, head_gemm_ns_per_byte = the wgemm_r*_ns_b and\n"
               "; head_r*_ns_b figures by row count, the first past 32 rows the\n"
               "; pgemm_r*_ns_b figures (prompt chunks) (the cost model prices the layers'\n"
               "; weight GEMMs and the output head from these tables);\n"
               "; weight_kernel_ns_per_byte, head_kernel_ns_per_byte = the kgemm_r*_ns_b and\n"
               "; khead_r*_ns_b figures (their shape between those rows); sched_ns_per_token =\n"
               "; the sched_*_ns_t figures by selection; sched_ns_per_layer = the\n"
               "; sched_*_layer_ns figures; sched_ns_per_stream = the sched_*_stream_ns\n"
               "; figures; sched_ns_per_retired = the sched_*_retired_ns figures;\n"
               "; sched_ns_per_attended = the sched_*_attended_ns figures;\n"
               "; kv_ns_per_token, kv_ns_per_stream, kv_ns_per_layer and\n"
               "; weight_probe_gbps (what alisa validate sets its own samples beside)\n"
               "; attn_ns_per_token_by_kv (KiB read by the run: attn_b*_ns_t) and\n"
               "; attn_sparse_ns_per_token_by_kv (KiB resident: attn_sparse_b*_ns_t)\n"
               "; as measured; dense_attn_ns_per_layer, _per_row, _per_prompt_pair and\n"
               "; _per_decode_token = the dense_attn_* figures (the dense cache's\n"
               "; attention, which serving without a scheduler runs);\n"
               "; dense_attn_one_ns_per_layer and _per_token = dense_attn_one_layer_ns\n"
               "; and dense_attn_one_token_ns (its one-row calls); dense_attn_parallel_min\n"
               "; as the executor runs (its calls below it priced as one-row calls).\n");
    fprintf(f, "[%s]\ngpu = %s executor: %s\ngpu_mem_gib = %.1f\nhbm_gbps = %.4g\n"
               "fp16_tflops = %.4g\nhost_dram_gib = %.1f\nlink_gbps = %.4g\n"
               "link_latency_us = %.4g\nhost_mem_gbps = %.4g\ngemm_efficiency = 1\n"
               "hbm_efficiency = 1\nserial = 1\nbatched_copies = %d\nweight_bytes = %.4g\n"
               "attn_ns_per_token = %.4g\n"
               "attn_ns_fixed = %.4g\nrecompute_ns = %.4g\nweight_gemm_ns_per_byte =",
            section, be->label, be->device, be->mem_gib, st[CALIB_STREAM_GBPS].mean,
            st[CALIB_STREAM_GFLOPS].mean / 1000.0,
            gib, st[CALIB_COPY_GBPS].mean,
            st[CALIB_COPY_LATENCY_US].mean > 0 ? st[CALIB_COPY_LATENCY_US].mean : 0.0,
            st[CALIB_MEM_GBPS].mean, be->batched_copies, wbytes,
            st[CALIB_ATTN_NS_PER_TOKEN].mean,
            st[CALIB_ATTN_NS_FIXED].mean, st[CALIB_RECOMPUTE_NS].mean);
    for (int i = 0; i < 6; i++)
        fprintf(f, " %d:%.5g", calib_wgemm_rows[i], st[CALIB_WGEMM_R1 + i].mean);
    /* past the decode runs' rows, the prompt chunks' (what serving's
     * iterations of that many rows run) */
    for (int i = 0; i < CALIB_DENSE_PROMPTS; i++)
        if ((int)calib_dense_prompt[i] > calib_wgemm_rows[5] && st[CALIB_PGEMM_FIRST + i].mean > 0)
            fprintf(f, " %u:%.5g", calib_dense_prompt[i], st[CALIB_PGEMM_FIRST + i].mean);
    const struct {
        const char *key;
        int first;
    } sched[] = {{"sched_ns_per_token", CALIB_SCHED_FIRST},
                 {"sched_ns_per_layer", CALIB_SCHED_LAYER_FIRST},
                 {"sched_ns_per_stream", CALIB_SCHED_STREAM_FIRST},
                 {"sched_ns_per_retired", CALIB_SCHED_RETIRED_FIRST},
                 {"sched_ns_per_attended", CALIB_SCHED_ATTENDED_FIRST}};
    /* a selection the backend does not run (NAN) is left out of each table */
    for (size_t k = 0; k < sizeof sched / sizeof sched[0]; k++) {
        fprintf(f, "\n%s =", sched[k].key);
        for (int i = 0; i < SELECTION_N; i++)
            if (isfinite(st[sched[k].first + i].mean))
                fprintf(f, " %s:%.4g", selection_policies[i]->name, st[sched[k].first + i].mean);
    }
    fprintf(f, "\nhead_gemm_ns_per_byte =");
    for (int i = 0; i < 6; i++)
        fprintf(f, " %d:%.5g", calib_wgemm_rows[i], st[CALIB_HEAD_R1 + i].mean);
    fprintf(f, "\nkv_ns_per_token = %.4g\nkv_ns_per_stream = %.4g\nkv_ns_per_layer = %.4g\n"
               "weight_probe_gbps = %.4g\nweight_probe_spread = %.4g\nattn_ns_per_layer = %.4g\n",
            st[CALIB_KV_NS_PER_TOKEN].mean, st[CALIB_KV_NS_PER_STREAM].mean,
            st[CALIB_KV_NS_PER_LAYER].mean,
            st[CALIB_WEIGHT_PROBE_GBPS].mean, st[CALIB_WEIGHT_PROBE_GBPS].spread,
            st[CALIB_ATTN_NS_LAYER].mean);
    fprintf(f, "dense_attn_ns_per_layer = %.4g\ndense_attn_ns_per_row = %.4g\n"
               "dense_attn_ns_per_prompt_pair = %.4g\ndense_attn_ns_per_decode_token = %.4g\n",
            st[CALIB_DENSE_ATTN_LAYER].mean, st[CALIB_DENSE_ATTN_ROW].mean,
            st[CALIB_DENSE_ATTN_PROMPT_PAIR].mean, st[CALIB_DENSE_ATTN_DECODE_PAIR].mean);
    fprintf(f, "dense_attn_one_ns_per_layer = %.4g\ndense_attn_one_ns_per_token = %.4g\n"
               "dense_attn_parallel_min = %.0f\n",
            st[CALIB_DENSE_ONE_LAYER].mean, st[CALIB_DENSE_ONE_TOKEN].mean,
            st[CALIB_DENSE_PARALLEL_MIN].mean);
    attn_table(f, "attn_ns_per_token_by_kv", c, st + CALIB_ATTN_BATCH_FIRST);
    attn_table(f, "attn_sparse_ns_per_token_by_kv", c, st + CALIB_ATTN_SPARSE_FIRST);
    kernel_table(f, "weight_kernel_ns_per_byte", st + CALIB_KGEMM_FIRST);
    kernel_table(f, "head_kernel_ns_per_byte", st + CALIB_KHEAD_FIRST);
}

/* The figures and their spread: JSON with every run, or a table. */
static void calibrate_report(const struct calibrate_opts *o, const char *section,
                             double (*runs)[CALIB_N], const struct stat4 *st)
{
if (o->json) {
    json_t *root = json_pack("{s:s, s:s, s:i}", "profile", o->out, "section", section, "repeat",
                             (int)o->repeat);
    for (int i = 0; i < CALIB_N; i++) {
        if (isnan(st[i].mean)) /* not measured by this backend (CUDA: the kernels alone) */
            continue;
        json_t *runs_j = json_array();
        for (uint32_t r = 0; r < o->repeat; r++)
            json_array_append_new(runs_j, json_real(runs[r][i]));
        json_object_set_new(root, calib_name(i),
                            json_pack("{s:f, s:f, s:f, s:f, s:o}", "mean", st[i].mean, "min",
                                      st[i].min, "max", st[i].max, "spread", st[i].spread,
                                      "runs", runs_j));
    }
    for (int h = 0; h < 2; h++) {
        double line[4], kern[4], lm, km;
        if (!kernel_loo(st, h, line, kern, &lm, &km))
            continue;
        json_t *l = json_array(), *k = json_array();
        for (int i = 0; i < 4; i++) {
            json_array_append_new(l, json_real(line[i]));
            json_array_append_new(k, json_real(kern[i]));
        }
        json_object_set_new(root, h ? "head_kernel_loo" : "weight_kernel_loo",
                            json_pack("{s:[i,i,i,i], s:o, s:f, s:o, s:f}", "rows", 2, 4, 8, 16,
                                      "line_error_pct", l, "line_mean_abs_pct", lm,
                                      "kernel_error_pct", k, "kernel_mean_abs_pct", km));
    }
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    printf("\n");
    json_decref(root);
} else {
    printf("%-18s %12s %12s %12s %8s\n", "figure", "mean", "min", "max", "spread");
    for (int i = 0; i < CALIB_N; i++)
        if (!isnan(st[i].mean))
            printf("%-18s %12.4g %12.4g %12.4g %7.1f%%\n", calib_name(i), st[i].mean, st[i].min,
                   st[i].max, 100 * st[i].spread);
    kernel_loo_lines(stdout, "kernel check, leave-one-out: ", st);
    printf("wrote %s (section [%s])\n", o->out, section);
}
}

/* calib_measure's stages as one progress line over the runs */
struct calib_progress {
    struct progress pg;
    uint32_t run, repeat;
};

static void calib_stage(void *ctx, int stage, const char *what)
{
    struct calib_progress *cp = ctx;
    snprintf(cp->pg.what, sizeof cp->pg.what, "calibrate, run %u of %u: %s", cp->run + 1,
             cp->repeat, what);
    progress_set(&cp->pg, (uint64_t)cp->run * CALIB_STAGES + (uint64_t)stage);
}

/* o->repeat runs of every benchmark into runs (repeat, CALIB_N) and their
 * mean, range and spread into st. */
static int calibrate_runs(const struct calibrate_opts *o, const struct llm_model *m,
                          const struct calib_text *tx, enum llm_backend kind,
                          double (*runs)[CALIB_N], struct stat4 st[CALIB_N], struct alisa_err *e)
{
    struct calib_progress cp = {.repeat = o->repeat};
    progress_start(&cp.pg, "calibrate", "stages", (uint64_t)o->repeat * CALIB_STAGES, o->json);
    calib_set_progress(calib_stage, &cp);
    int rc = 0;
    for (uint32_t r = 0; r < o->repeat && !rc; r++) {
        if (!cp.pg.on)
            fprintf(stderr, "alisa: calibration run %u of %u\n", r + 1, o->repeat);
        cp.run = r;
        rc = calib_measure(m, tx, kind, runs[r], e);
    }
    calib_set_progress(NULL, NULL);
    progress_end(&cp.pg);
    if (rc)
        return rc;
    double col[64];
    for (int f = 0; f < CALIB_N; f++) {
        uint32_t n = o->repeat < 64 ? o->repeat : 64;
        for (uint32_t r = 0; r < n; r++)
            col[r] = runs[r][f];
        st[f].mean = gsl_stats_mean(col, 1, n);
        gsl_stats_minmax(&st[f].min, &st[f].max, col, 1, n);
        st[f].spread = st[f].mean != 0 ? (st[f].max - st[f].min) / fabs(st[f].mean) : 0;
    }
    /* a machine whose speed moved between the runs is being shared: say so
     * with the figure (issue 41), the profile records the spread */
    const struct stat4 *p = &st[CALIB_WEIGHT_PROBE_GBPS];
    if (p->spread > CALIB_QUIET_SPREAD)
        fprintf(stderr, "alisa calibrate: warning: the machine's weight rate moved %.0f%% between "
                "runs (%.3g to %.3g GB/s; a quiet machine stays within %.0f%%): other work is "
                "using the cores, and every figure of this profile carries it (check uptime)\n",
                100 * p->spread, p->min, p->max, 100 * CALIB_QUIET_SPREAD);
    /* the decode's weight GEMMs are what the profile prices most: a run
     * faster than the others (a 2026-11-27 calibration's two runs 34-48%
     * apart, its probe within 10%) moves every prediction with it */
    double spread[CALIB_N];
    for (int f = 0; f < CALIB_N; f++)
        spread[f] = st[f].spread;
    int worst = calib_unquiet_wgemm(spread);
    if (worst >= 0)
        fprintf(stderr, "alisa calibrate: warning: the decode's weight GEMMs (%s) moved %.0f%% "
                "between runs (%.4g to %.4g ns a byte; a quiet machine stays within %.0f%%): the "
                "profile prices every decode step with their mean; calibrate again on a quiet "
                "machine\n", calib_name(worst), 100 * st[worst].spread, st[worst].min,
                st[worst].max, 100 * CALIB_QUIET_SPREAD);
    return 0;
}

int cmd_calibrate(int argc, char **argv)
{
    struct calibrate_opts o;
    int rc = calibrate_parse(argc, argv, &o);
    if (rc)
        return rc;
    struct alisa_err e = {{0}};
    enum llm_backend kind;
    char said[512];
    if (llm_backend_choose(o.backend, &kind, said, sizeof said, &e))
        return cli_fail(&e);
    struct llm_backend_info be, cpu; /* the processor computed on, and the host CPU */
    if (llm_backend_info(kind, &be, &e) || llm_backend_info(LLM_BACKEND_CPU, &cpu, &e))
        return cli_fail(&e);
    fprintf(stderr, "alisa: backend: %s\n", said);
    char host[64] = "host", section[96];
    gethostname(host, sizeof host - 1);
    snprintf(section, sizeof section, "%s", o.name ? o.name : "");
    if (!o.name)
        snprintf(section, sizeof section, "%s-%s", be.name, host);
    /* the output's PATH.part made first: a path that cannot be written
     * fails now, not after minutes of benchmarks */
    char part[1100];
    FILE *f = outfile_open(o.out, part, sizeof part, "profile", &e);
    if (!f)
        return cli_fail(&e);
    struct loaded l;
    if (load_model(&l, o.model, o.tokenizer, o.tokenizer != NULL || o.text != NULL, &o.exec, &e)) {
        outfile_close(f, part, o.out, ALISA_EIO, &e);
        return cli_fail(&e);
    }
    uint32_t *ids = NULL, n_blocks = 0;
    size_t n_ids = 0;
    struct calib_text tx = {0};
    rc = o.text ? text_tokens(l.t, o.text, 0, 0, &ids, &n_ids, &n_blocks, &e) : 0;
    if (!rc && o.text && n_ids < 2)
        rc = err_set(&e, ALISA_EINVAL, "%s: %zu tokens, too few to calibrate on", o.text, n_ids);
    if (!rc && o.text) {
        tx.ids = ids + n_ids / 2;
        tx.n = n_ids - n_ids / 2;
    }
    double (*runs)[CALIB_N] = rc ? NULL : calloc(o.repeat, sizeof *runs);
    if (!rc && !runs)
        rc = err_set(&e, ALISA_ENOMEM, "out of memory");
    struct stat4 st[CALIB_N];
    if (!rc)
        rc = calibrate_runs(&o, l.m, o.text ? &tx : NULL, kind, runs, st, &e);
    if (!rc)
        profile_write(f, &o, host, section, &be, &cpu, n_ids, &l.m->c,
                      calib_bytes_per_weight(l.m, kind), st);
    rc = outfile_close(f, part, o.out, rc, &e); /* a failed run leaves no profile */
    if (!rc)
        calibrate_report(&o, section, runs, st);
    free(runs);
    free(ids);
    loaded_free(&l);
    return rc ? cli_fail(&e) : 0;
}
