/* `alisa trace`: info, check, gen and dump over trace files.
 *
 * A thin shell over trace.h, trace_stats.h and trace_gen.h: parses options,
 * calls the library, prints. The generator's options come from one table that
 * also writes its help, so the two cannot drift apart.
 */
#include <getopt.h>
#include <libgen.h>
#include <sys/statvfs.h>
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "progress.h"
#include "cmds.h"
#include "trace.h"
#include "trace_gen.h"
#include "trace_stats.h"
#include "outfile.h"
#include "selection.h"
#include "selstats.h"
#include "trace_params.h"
#include "tracefit.h"

/* trace gen's options: its own, then the generator's table (trace_params.h),
 * whose values are applied after the model's shape and the --params file,
 * so --layers and every option typed wins. */
struct gen_opts {
    const char *model, *out, *dir, *params;
    int per_head;
    int scale; /* --scale-rule: 1 paper (default), 0 none */
    const char *table[TRACE_GEN_N_OPTS];
};

static int read_scale_rule(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    if (strcmp(arg, "paper") && strcmp(arg, "none"))
        return err_set(e, ALISA_EINVAL, "%s %s: expected paper or none", opt, arg);
    *(int *)field = !strcmp(arg, "paper");
    return 0;
}

#define GEN(f) offsetof(struct gen_opts, f)
static const struct cli_opt gen_own[] = {
    {"model", "NAME", CLI_STR, GEN(model), NULL, 1,
     "model shape from the catalog (layers, heads, hidden, vocab)", 0},
    {"output", "FILE", CLI_STR, GEN(out), NULL, 1,
     "trace to write (written to FILE.part, renamed when complete)", 'o'},
    {0}};
static const struct cli_opt gen_more[] = {
    {"per-head", NULL, CLI_FLAG, GEN(per_head), NULL, 0,
     "also store per-head rows (heads draw their own noise and\n"
     "target; the head-mean row is then less sparse)", 0},
    {"params", "FILE", CLI_STR, GEN(params), NULL, 0,
     "the parameters `alisa trace fit` wrote (INI, section\n"
     "[generator], keys as these options' names, and\n"
     "sparsity-profile: the target by depth, knots spaced\n"
     "evenly from the first layer to the last); options typed\n"
     "here win", 0},
    {"scale-rule", "R", CLI_FN, GEN(scale), read_scale_rule, 0,
     "paper (default): a --params profile fitted on a smaller\n"
     "model is made sparser for a larger one by the paper's\n"
     "trend (Fig. 3: OPT-30B about 3x less dense than\n"
     "OPT-6.7B; density x (P / P_fit)^-0.73 with P the\n"
     "parameters 12 L h^2 + V h, both floored at 6.7e9, where\n"
     "the trend was measured); none: the profile as fitted", 0},
    {"catalog", "DIR", CLI_STR, GEN(dir), NULL, 0,
     "catalog directory (default $ALISA_CATALOG or sim/model/catalog)", 0},
    {0}};
/* the generator's table as declared options (gen_table_init), each value
 * kept as typed */
static struct cli_opt gen_table[TRACE_GEN_N_OPTS + 1];
static const struct cli_group gen_groups[] = {
    {gen_own, 0}, {gen_table, GEN(table)}, {gen_more, 0}};
static const struct cli_command_opts gen_command = {gen_groups, 3, 0, 0};
#undef GEN

static void gen_table_init(void)
{
    for (size_t i = 0; i < TRACE_GEN_N_OPTS; i++) {
        const struct trace_gen_opt *g = &trace_gen_opts[i];
        int whole = g->kind == TRACE_OPT_U32 || g->kind == TRACE_OPT_U64;
        gen_table[i] = (struct cli_opt){g->name, whole ? "N" : "X", CLI_STR,
                                        i * sizeof(const char *), NULL, 0, g->help, 0};
    }
}

static void trace_gen_usage(FILE *out)
{
    gen_table_init();
    fprintf(out,
            "usage: alisa trace gen --model NAME -o FILE [options]\n"
            "\n"
            "Writes a synthetic attention trace: attention sinks, persistent power-law\n"
            "heavy hitters, recency, and a per-layer sparsity target (share of weights\n"
            "below 1%% of the row max, as the paper counts it). Bit-for-bit reproducible\n"
            "for a given seed. The model of key token t for query position p is\n"
            "  z_t = sink_logit*[t < sinks] + hh_scale*g_t + recency_logit*exp(-(p-t)/recency_tokens)\n"
            "        + noise*N(0,1),   weights = softmax(beta*z)\n"
            "with g_t the log of a Pareto(hh_alpha) draw doing a random walk, and beta\n"
            "solved per row so the row meets its sparsity target.\n"
            "\n");
    cli_opts_help(out, &gen_command, 24);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace gen --model OPT-6.7B --layers 4 --seqs 2 --prompt-len 64 "
            "--gen-len 64 -o x.trace\n");
}

enum info_format { INFO_TEXT, INFO_JSON, INFO_TSV, INFO_HEATMAP };

/* trace info, check and dump: their options, declared (cli_opts.h) */
struct file_opts {
    int format;                       /* enum info_format */
    int64_t seq, pos, layer;          /* trace dump's row filter; -1: every */
};

static int read_format(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    (void)arg, (void)e;
    *(int *)field = strcmp(opt, "--json") == 0 ? INFO_JSON : strcmp(opt, "--tsv") == 0 ? INFO_TSV
                                                                                         : INFO_HEATMAP;
    return 0;
}

static int read_index(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    uint32_t v;
    if (cli_parse_u32(opt, arg, &v, e))
        return 1;
    *(int64_t *)field = v;
    return 0;
}

#define FO(f) offsetof(struct file_opts, f)
static const struct cli_opt info_opts[] = {
    {"json", NULL, CLI_FN, FO(format), read_format, 0, "print JSON instead of text", 0},
    {"tsv", NULL, CLI_FN, FO(format), read_format, 0,
     "print only the per-layer table, tab-separated, with a header\n"
     "line (layer rows mean min q25 median q75 max), for plotting", 0},
    {"heatmap", NULL, CLI_FN, FO(format), read_format, 0,
     "print 'step layer sparsity' lines: each decode step's sparsity per\n"
     "layer, averaged over the sequences (plots/heatmap.gp)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_opt no_opts[] = {{NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_opt dump_opts[] = {
    {"seq", "S", CLI_FN, FO(seq), read_index, 0, "only sequence S", 0},
    {"pos", "P", CLI_FN, FO(pos), read_index, 0, "only query position P", 0},
    {"layer", "L", CLI_FN, FO(layer), read_index, 0, "only layer L", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group info_groups[] = {{info_opts, 0}}, check_groups[] = {{no_opts, 0}},
                              dump_groups[] = {{dump_opts, 0}};
static const struct cli_command_opts info_command = {info_groups, 1, 0, 1},
                                     check_command = {check_groups, 1, 0, 1},
                                     dump_command = {dump_groups, 1, 0, 1};

static void trace_info_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa trace info FILE [--json | --tsv | --heatmap]\n"
            "\n"
            "Prints a trace's shape, origin, size, row encodings and its attention sparsity\n"
            "per layer as the paper counts it: the share of a row's weights below 1%% of\n"
            "that row's max, over decode rows (query position >= prompt length), with mean,\n"
            "min, quartiles and max across rows.\n"
            "\n"
            );
    cli_opts_help(out, &info_command, 14);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace info traces/stories260K-tinystories.trace\n");
}

static void trace_check_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa trace check FILE\n"
            "\n"
            "Validates a whole trace: magic, version, chunk checksums, order, index ranges,\n"
            "rows summing to 1 (within %.2f), finite non-negative weights, token ids below\n"
            "the vocabulary. Exits 0 and prints 'ok' when valid; else prints the first\n"
            "problem with its byte offset and exits 1.\n"
            "\n",
            TRACE_SUM_TOLERANCE);
    cli_opts_help(out, &check_command, 14);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace check traces/stories260K-tinystories.trace\n");
}

static void trace_dump_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa trace dump FILE [--seq S] [--pos P] [--layer L]\n"
            "\n"
            "Prints the non-zero weights of the selected rows, one per line:\n"
            "  seq pos layer head index weight\n"
            "(head -1 is the head-mean row). Weights are printed exactly (%%.9g).\n"
            "\n");
    cli_opts_help(out, &dump_command, 14);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace dump traces/stories260K-tinystories.trace --seq 0 --pos 100 "
            "--layer 0\n");
}

void cmd_trace_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa trace <info|check|gen|fit|dump|stats> [options]\n"
            "\n"
            "Attention traces (format: traces/FORMAT.md).\n"
            "\n"
            "  info FILE    shape, origin, size and per-layer attention sparsity\n"
            "  check FILE   full validation; first problem with its byte offset\n"
            "  gen          write a synthetic trace (see alisa trace gen --help)\n"
            "  fit FILE...  fit the generator to recorded traces (alisa trace fit --help)\n"
            "  dump FILE    print rows as text\n"
            "  stats FILE...  what a selection picks: persistence, age, old and sink shares\n"
            "\n"
            "'alisa trace <cmd> --help' explains each.\n");
}

/* Parses the options of trace info (format non-NULL) or trace check, which
 * take one FILE. Returns -1 to continue, else an exit code. */
static int parse_file_opts(int argc, char **argv, void (*usage)(FILE *), enum info_format *format,
                           const char **file)
{
    struct file_opts o = {.format = INFO_TEXT};
    int first = 0;
    int rc = cli_opts_parse(argc, argv, format ? &info_command : &check_command, &o, NULL, usage,
                            &first);
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if (first != argc - 1)
        return cli_usage_error(usage, first >= argc ? "missing FILE" : "expected one FILE");
    if (format)
        *format = (enum info_format)o.format;
    *file = argv[first];
    return -1;
}

static json_t *summary_json(const struct sparsity_summary *s)
{
    return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "rows", (json_int_t)s->rows, "mean",
                     s->mean, "min", s->min, "q25", s->q25, "median", s->median, "q75", s->q75,
                     "max", s->max);
}

/* What trace info reports, read once. */
struct info {
    const char *file;
    uint64_t file_bytes, rows_expected, enc[3], rows;
    struct trace_header h;
    struct trace_seq first; /* the first sequence's lengths */
    int uniform;            /* every sequence has first's lengths */
    struct trace_stats *st;
    struct sparsity_summary all;
};

/* trace info --heatmap: the mean sparsity per (decode step, layer) over
 * the sequences. Reads the rest of r (destroyed here). */
static int info_heatmap(struct trace_reader *r, const struct info *in)
{
    struct alisa_err e = {{0}};
    uint32_t steps = in->first.gen_len, L = in->h.n_layers;
    double *sum = calloc((size_t)steps * L, sizeof *sum);
    uint32_t *cnt = calloc((size_t)steps * L, sizeof *cnt);
    struct trace_step stp;
    int nrc = 0;
    if (!sum || !cnt)
        nrc = err_set(&e, ALISA_ENOMEM, "out of memory for a %u x %u heat map", steps, L);
    while (!nrc && (nrc = trace_reader_next(r, &stp, &e)) == 1) {
        nrc = 0;
        uint32_t prompt = trace_reader_seq(r, stp.seq)->prompt_len;
        if (stp.pos < prompt || stp.pos - prompt >= steps)
            continue;
        for (uint32_t l = 0; l < L; l++) {
            size_t k = (size_t)(stp.pos - prompt) * L + l;
            sum[k] += stats_row_sparsity(stp.w + (size_t)l * stp.n_ctx, stp.n_ctx,
                                         TRACE_SPARSITY_REL);
            cnt[k]++;
        }
    }
    trace_reader_destroy(r);
    if (nrc >= 0) {
        printf("step layer sparsity\n");
        for (uint32_t j = 0; j < steps; j++)
            for (uint32_t l = 0; l < L; l++)
                if (cnt[(size_t)j * L + l])
                    printf("%u %u %.5f\n", j, l, sum[(size_t)j * L + l] / cnt[(size_t)j * L + l]);
    }
    free(sum);
    free(cnt);
    return nrc < 0 ? cli_fail(&e) : 0;
}

static void info_tsv(const struct info *in)
{
    printf("layer\trows\tmean\tmin\tq25\tmedian\tq75\tmax\n");
    for (uint32_t l = 0; l < in->h.n_layers; l++) {
        struct sparsity_summary s;
        trace_stats_summary(in->st, l, &s);
        printf("%u\t%llu\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\n", l, (unsigned long long)s.rows,
               s.mean, s.min, s.q25, s.median, s.q75, s.max);
    }
}

static void info_json(const struct info *in)
{
    const struct trace_header *h = &in->h;
    json_t *layers = json_array();
    for (uint32_t l = 0; l < h->n_layers; l++) {
        struct sparsity_summary s;
        trace_stats_summary(in->st, l, &s);
        json_t *o = summary_json(&s);
        json_object_set_new(o, "layer", json_integer(l));
        json_array_append_new(layers, o);
    }
    json_t *root = json_pack(
        "{s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:I, s:s, s:s, s:s, s:s, "
        "s:I, s:I, s:I}",
        "file", in->file, "file_bytes", (json_int_t)in->file_bytes, "model", h->model, "layers",
        h->n_layers, "heads", h->n_heads, "kv_heads", h->n_kv_heads, "hidden", h->hidden,
        "vocab", h->vocab, "seqs", h->n_seqs, "per_head", (h->flags & TRACE_FLAG_PER_HEAD) != 0,
        "threshold", (double)h->threshold, "seed", (json_int_t)h->seed, "source", h->source,
        "model_sha256", h->model_sha256, "text", h->text, "generator", h->generator,
        "steps", (json_int_t)in->rows_expected, "dense_rows", (json_int_t)in->enc[0],
        "sparse_rows", (json_int_t)(in->enc[1] + in->enc[2]));
    if (in->uniform) {
        json_object_set_new(root, "prompt_len", json_integer(in->first.prompt_len));
        json_object_set_new(root, "gen_len", json_integer(in->first.gen_len));
    }
    json_t *sp = summary_json(&in->all);
    json_object_set_new(sp, "rel_cutoff", json_real(TRACE_SPARSITY_REL));
    json_object_set_new(sp, "layers", layers);
    json_object_set_new(root, "sparsity", sp);
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    printf("\n");
    json_decref(root);
}

static void info_text(const struct info *in)
{
    const struct trace_header *h = &in->h;
    const uint64_t rows = in->rows;
    printf("trace:      %s (%.2f MB)\n", in->file, in->file_bytes / 1e6);
    printf("model:      %s  layers %u  heads %u  kv heads %u  hidden %u  vocab %u\n", h->model,
           h->n_layers, h->n_heads, h->n_kv_heads, h->hidden, h->vocab);
    printf("source:     %s  seed %llu  threshold %g%s\n", h->source, (unsigned long long)h->seed,
           (double)h->threshold, (h->flags & TRACE_FLAG_PER_HEAD) ? "  per-head rows" : "");
    if (h->model_sha256[0])
        printf("model hash: %s\n", h->model_sha256);
    if (h->text[0])
        printf("text:       %s\n", h->text);
    if (h->generator[0])
        printf("generator:  %s\n", h->generator);
    if (in->uniform)
        printf("sequences:  %u  (prompt %u, generated %u, rows from position %u)\n", h->n_seqs,
               in->first.prompt_len, in->first.gen_len, in->first.row_start);
    else
        printf("sequences:  %u  (lengths differ)\n", h->n_seqs);
    printf("steps:      %llu  rows %llu (%.1f%% dense, %.1f%% sparse)\n",
           (unsigned long long)in->rows_expected, (unsigned long long)rows,
           rows ? 100.0 * in->enc[0] / rows : 0.0,
           rows ? 100.0 * (in->enc[1] + in->enc[2]) / rows : 0.0);
    printf("attention sparsity: share of weights < %g%% of the row max, over %llu decode steps\n",
           100 * TRACE_SPARSITY_REL, (unsigned long long)(in->all.rows / h->n_layers));
    printf("  %5s %8s %7s %7s %7s %7s %7s %7s\n", "layer", "rows", "mean", "min", "q25",
           "median", "q75", "max");
    for (uint32_t l = 0; l <= h->n_layers; l++) {
        struct sparsity_summary s;
        trace_stats_summary(in->st, l == h->n_layers ? UINT32_MAX : l, &s);
        char name[16];
        snprintf(name, sizeof name, l == h->n_layers ? "all" : "%u", l);
        printf("  %5s %8llu %7.4f %7.4f %7.4f %7.4f %7.4f %7.4f\n", name,
               (unsigned long long)s.rows, s.mean, s.min, s.q25, s.median, s.q75, s.max);
    }
}

static int trace_info(int argc, char **argv)
{
    enum info_format format = INFO_TEXT;
    struct info in = {0};
    int rc = parse_file_opts(argc, argv, trace_info_usage, &format, &in.file);
    if (rc >= 0)
        return rc;
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    if (trace_reader_open(&r, in.file, &e))
        return cli_fail(&e);
    in.h = *trace_reader_header(r);
    in.file_bytes = trace_reader_file_bytes(r);
    in.first = *trace_reader_seq(r, 0);
    in.uniform = 1;
    for (uint32_t s = 0; s < in.h.n_seqs; s++) {
        const struct trace_seq *q = trace_reader_seq(r, s);
        in.uniform &= q->prompt_len == in.first.prompt_len && q->gen_len == in.first.gen_len &&
                      q->row_start == in.first.row_start;
        in.rows_expected += q->prompt_len + q->gen_len - q->row_start;
    }
    if (format == INFO_HEATMAP)
        return info_heatmap(r, &in);
    trace_reader_destroy(r);
    if (trace_stats_from_file(in.file, &in.st, in.enc, &e))
        return cli_fail(&e);
    trace_stats_summary(in.st, UINT32_MAX, &in.all);
    in.rows = in.enc[0] + in.enc[1] + in.enc[2];
    if (format == INFO_TSV)
        info_tsv(&in);
    else if (format == INFO_JSON)
        info_json(&in);
    else
        info_text(&in);
    trace_stats_destroy(in.st);
    return 0;
}

static int trace_check_cmd(int argc, char **argv)
{
    const char *file;
    int rc = parse_file_opts(argc, argv, trace_check_usage, NULL, &file);
    if (rc >= 0)
        return rc;
    struct alisa_err e = {{0}};
    uint64_t n_steps;
    if (trace_check(file, &n_steps, &e))
        return cli_fail(&e);
    printf("%s: ok (%llu steps)\n", file, (unsigned long long)n_steps);
    return 0;
}

/* trace_gen_params.progress for a progress line */
static void gen_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct progress *pg = ctx;
    pg->total = total;
    progress_set(pg, done);
}

/* The paper's trend applied to a --params profile (tracefit_scale), said
 * on stderr when it changes anything. */
static void scale_profile(struct trace_gen_params *p, const char *params, double from, double to)
{
    double f = tracefit_scale(p, from, to);
    if (f != 1.0)
        fprintf(stderr, "alisa: %s: density scaled by %.3g (the paper's trend from %.3g to %.3g "
                "parameters; --scale-rule none keeps the fitted profile)\n", params, f, from, to);
}

static int trace_gen_cmd(int argc, char **argv)
{
    gen_table_init();
    struct gen_opts o = {.dir = catalog_default_dir(), .scale = 1};
    int rc = cli_opts_parse(argc, argv, &gen_command, &o, NULL, trace_gen_usage, NULL);
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    struct trace_gen_params p;
    trace_gen_defaults(&p);
    p.per_head = o.per_head;
    const char *model = o.model, *out = o.out, *dir = o.dir, *params = o.params;
    const int scale = o.scale;
    struct alisa_err e = {{0}};

    struct catalog c;
    if (catalog_load(&c, dir, catalog_models_dir(), &e))
        return cli_fail(&e);
    const struct model_shape *m = catalog_model(&c, model);
    if (!m || !m->available) {
        if (m)
            err_set(&e, ALISA_ENOTFOUND, "model '%s' is unavailable: %s", model, m->note);
        else
            catalog_model_not_found(&c, "--model", model, &e);
        catalog_deinit(&c);
        return cli_fail_status(ALISA_ENOTFOUND, &e);
    }
    snprintf(p.model, sizeof p.model, "%s", m->name);
    p.n_layers = m->n_layers;
    const uint32_t model_layers = m->n_layers;
    p.n_heads = m->n_heads;
    p.n_kv_heads = m->n_kv_heads;
    p.hidden = m->hidden;
    p.vocab = m->vocab;
    const double model_params = tracefit_model_params(m->n_layers, m->hidden, m->vocab);
    catalog_deinit(&c);

    double fitted_params = 0;
    if (params && trace_params_read(params, &p, &fitted_params, &e))
        return cli_fail(&e);
    for (size_t i = 0; i < TRACE_GEN_N_OPTS; i++) {
        if (!o.table[i])
            continue;
        char opt[40];
        snprintf(opt, sizeof opt, "--%s", trace_gen_opts[i].name);
        if (trace_gen_opt_set(&p, i, opt, o.table[i], &e))
            return cli_usage_error(trace_gen_usage, "%s", e.msg);
        if (trace_gen_opts[i].line)
            p.n_profile = 0; /* a typed line replaces the file's profile */
    }
    if (params && scale && fitted_params > 0 && p.n_profile)
        scale_profile(&p, params, fitted_params, model_params);
    /* the file's least size against the space free where it goes, before
     * any work (a full disk would still be caught by the writer, later) */
    if (trace_gen_validate(&p, &e))
        return cli_usage_error(trace_gen_usage, "%s", e.msg);
    if (p.n_layers > model_layers)
        return cli_usage_error(trace_gen_usage, "--layers %u: %s has %u", p.n_layers, p.model,
                               model_layers);
    char odir[4096];
    snprintf(odir, sizeof odir, "%s", out);
    const char *out_dir = dirname(odir); /* points into odir */
    struct statvfs fs;
    uint64_t need = trace_gen_min_bytes(&p);
    if (statvfs(out_dir, &fs) == 0 && need / fs.f_frsize > fs.f_bavail)
        return cli_usage_error(trace_gen_usage, "--seqs %u x %u positions x %u layers: the "
                               "trace needs at least %.1f GB, %.1f GB are free in %s", p.n_seqs,
                               p.prompt_len + p.gen_len, p.n_layers, need / 1e9,
                               (double)fs.f_bavail * fs.f_frsize / 1e9, out_dir);
    struct progress pg;
    progress_start(&pg, "trace gen", "positions", 0, 0);
    p.progress = gen_progress;
    p.progress_ctx = &pg;
    rc = trace_gen_write(&p, out, &e);
    progress_end(&pg);
    if (rc)
        return cli_fail(&e);
    fprintf(stderr, "alisa: wrote %s (%s, %u layers, %u seqs, %u+%u tokens, seed %llu)\n", out,
            p.model, p.n_layers, p.n_seqs, p.prompt_len, p.gen_len, (unsigned long long)p.seed);
    return 0;
}

static void dump_row(uint32_t seq, uint32_t pos, uint32_t layer, int head, const float *row,
                     uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (row[i] != 0.0f)
            printf("%u %u %u %d %u %.9g\n", seq, pos, layer, head, i, (double)row[i]);
}

static int trace_dump(int argc, char **argv)
{
    struct file_opts o = {.seq = -1, .pos = -1, .layer = -1};
    int first = 0;
    int req = cli_opts_parse(argc, argv, &dump_command, &o, NULL, trace_dump_usage, &first);
    if (req)
        return req == CLI_HELP_SHOWN ? 0 : req;
    if (first != argc - 1)
        return cli_usage_error(trace_dump_usage, first >= argc ? "missing FILE" : "expected one FILE");
    int64_t want_seq = o.seq, want_pos = o.pos, want_layer = o.layer;
    struct alisa_err e = {{0}};
    struct trace_reader *r;
    if (trace_reader_open(&r, argv[first], &e))
        return cli_fail(&e);
    const struct trace_header *h = trace_reader_header(r);
    struct trace_step st;
    int rc;
    while ((rc = trace_reader_next(r, &st, &e)) == 1) {
        if ((want_seq >= 0 && st.seq != want_seq) || (want_pos >= 0 && st.pos != want_pos))
            continue;
        for (uint32_t l = 0; l < h->n_layers; l++) {
            if (want_layer >= 0 && l != want_layer)
                continue;
            dump_row(st.seq, st.pos, l, -1, st.w + (size_t)l * st.n_ctx, st.n_ctx);
            for (uint32_t hd = 0; st.w_head && hd < h->n_heads; hd++)
                dump_row(st.seq, st.pos, l, (int)hd,
                         st.w_head + ((size_t)l * h->n_heads + hd) * st.n_ctx, st.n_ctx);
        }
    }
    trace_reader_destroy(r);
    return rc < 0 ? cli_fail(&e) : 0;
}

struct stats_opts {
    const char *sel, *csv;
    struct sel_params sp;
    struct selstats_params p;
    int json;
};

static int read_share(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    double v;
    if (cli_parse_double(opt, arg, &v, e))
        return 1;
    if (!(v > 0 && v <= 1))
        return err_set(e, ALISA_EINVAL, "%s %s: expected a share in (0, 1]", opt, arg);
    *(double *)field = v;
    return 0;
}

#define TSO(f) offsetof(struct stats_opts, f)
static const struct cli_opt stats_sel_opts[] = {
    {"selection", "NAME", CLI_STR, TSO(sel), NULL, 0, "selection (default swa; alisa policy list)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_opt stats_own_opts[] = {
    {"alpha", "A", CLI_FN, TSO(p.alpha), read_share, 0,
     "the oldest share of the context counted (default 0.5)", 0},
    {"sinks", "N", CLI_U32, TSO(p.sinks), NULL, 0, "leading tokens counted as sinks (default 4)", 0},
    {"json", NULL, CLI_FLAG, TSO(json), NULL, 0, "print JSON", 0},
    {"output", "CSV", CLI_STR, TSO(csv), NULL, 0,
     "every row as CSV, written whole or not at all", 'o'},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group stats_groups[] = {
    {stats_sel_opts, 0}, {cli_budget_opts, TSO(sp)}, {stats_own_opts, 0}};
static const struct cli_command_opts stats_command = {stats_groups, 3, 0, 1};

static void trace_stats_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa trace stats FILE... [options]\n"
            "\n"
            "What a selection picks on a trace, the numbers that decide how an age-based\n"
            "placement fares on it (sim/selstats.h has the definitions): per layer and\n"
            "overall, and by context (the decode steps in %d equal bins), the rows'\n"
            "attention sparsity (below 1%% of the row max), the global picks per step (the\n"
            "attended tokens older than the selection's local window), the share of step\n"
            "t's picks still picked at t + 1 and t + 32, the median age of a pick as a\n"
            "share of the context, the share of picks in the oldest A of the context\n"
            "(ALISA's CPU region first) and among the first N tokens (sinks). The trace is\n"
            "replayed through the scheduler with the selection and every token on the GPU.\n"
            "With several FILEs, one overall row each (compare traces); -o writes every\n"
            "row (trace, layer, bin) as CSV.\n"
            "\n",
            SELSTATS_BINS);
    cli_opts_help(out, &stats_command, 22);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa trace stats traces/stories260K-tinystories.trace\n"
            "  alisa trace stats traces/synthetic-opt-8l-4s.trace traces/stories260K-tinystories.trace\n");
}

static json_t *stats_json(const struct selstats_summary *s)
{
    json_t *o = json_pack("{s:I, s:f, s:I, s:f, s:f, s:f, s:f}", "rows", (json_int_t)s->rows,
                          "sparsity", s->sparsity, "picks", (json_int_t)s->picks,
                          "picks_per_row", s->picks_per_row, "age_median", s->age_median,
                          "old_share", s->old_share, "sink_share", s->sink_share);
    for (int k = 0; o && k < SELSTATS_LAGS; k++) {
        char key[32];
        snprintf(key, sizeof key, "persist_%u", selstats_lag[k]);
        json_object_set_new(o, key, json_real(s->persist[k]));
    }
    return o;
}

static void stats_row_text(const char *label, const struct selstats_summary *s)
{
    printf("%-32s %8llu %8.3f %8.1f %8.3f %8.3f %8.3f %8.3f %8.3f\n", label,
           (unsigned long long)s->rows, s->sparsity, s->picks_per_row, s->persist[0],
           s->persist[1], s->age_median, s->old_share, s->sink_share);
}

static void stats_row_csv(FILE *f, const char *trace, int64_t layer, int64_t bin,
                          const struct selstats_summary *s)
{
    fprintf(f, "%s,", trace);
    if (layer < 0) fprintf(f, "all,"); else fprintf(f, "%lld,", (long long)layer);
    if (bin < 0) fprintf(f, "all,"); else fprintf(f, "%lld,", (long long)bin);
    fprintf(f, "%llu,%.6g,%llu,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", (unsigned long long)s->rows,
            s->sparsity, (unsigned long long)s->picks, s->picks_per_row, s->persist[0],
            s->persist[1], s->age_median, s->old_share, s->sink_share);
}

/* One trace's rows of the statistics CSV: all of it, each layer whole and
 * by quarter of the decode, and each quarter over every layer. */
static void stats_trace_csv(FILE *f, const char *trace, const struct selstats *st, uint32_t L,
                            const struct selstats_summary *all)
{
    stats_row_csv(f, trace, -1, -1, all);
    for (uint32_t l = 0; l < L; l++)
        for (int64_t b = -1; b < SELSTATS_BINS; b++) {
            struct selstats_summary s;
            selstats_summary(st, l, b < 0 ? UINT32_MAX : (uint32_t)b, &s);
            stats_row_csv(f, trace, l, b, &s);
        }
    for (uint32_t b = 0; b < SELSTATS_BINS; b++) {
        struct selstats_summary s;
        selstats_summary(st, UINT32_MAX, b, &s);
        stats_row_csv(f, trace, -1, b, &s);
    }
}

/* One trace's --json object: all of it, by layer, by quarter of the decode
 * (NULL when out of memory: the array's append drops it). */
static json_t *stats_trace_json(const char *trace, const struct selstats *st, uint32_t L,
                                const struct selstats_summary *all)
{
    json_t *t = json_pack("{s:s, s:o, s:[], s:[]}", "trace", trace, "all", stats_json(all),
                          "layers", "bins");
    for (uint32_t l = 0; t && l < L; l++) {
        struct selstats_summary s;
        selstats_summary(st, l, UINT32_MAX, &s);
        json_array_append_new(json_object_get(t, "layers"), stats_json(&s));
    }
    for (uint32_t b = 0; t && b < SELSTATS_BINS; b++) {
        struct selstats_summary s;
        selstats_summary(st, UINT32_MAX, b, &s);
        json_array_append_new(json_object_get(t, "bins"), stats_json(&s));
    }
    return t;
}

/* One trace's table in words: by layer, all layers, by quarter. */
static void stats_trace_text(const char *head, const struct selstats *st, uint32_t L,
                             const struct selstats_summary *all)
{
    printf(head, "", "rows", "sparsity", "picks", "kept+1", "kept+32", "age", "old", "sinks");
    for (uint32_t l = 0; l < L; l++) {
        struct selstats_summary s;
        char label[32];
        selstats_summary(st, l, UINT32_MAX, &s);
        snprintf(label, sizeof label, "layer %u", l);
        stats_row_text(label, &s);
    }
    stats_row_text("all layers", all);
    for (uint32_t b = 0; b < SELSTATS_BINS; b++) {
        struct selstats_summary s;
        char label[32];
        selstats_summary(st, UINT32_MAX, b, &s);
        snprintf(label, sizeof label, "decode steps, quarter %u", b + 1);
        stats_row_text(label, &s);
    }
}

static int trace_stats_cmd(int argc, char **argv)
{
    struct stats_opts o = {.sel = "swa", .sp = {.sparsity = 0.8}, .p = {.alpha = 0.5, .sinks = 4}};
    int first = 0;
    int req = cli_opts_parse(argc, argv, &stats_command, &o, NULL, trace_stats_usage, &first);
    if (req)
        return req;
    if (first >= argc)
        return cli_usage_error(trace_stats_usage, "missing FILE");
    const char *sel_name = o.sel, *csv = o.csv;
    struct sel_params sp = o.sp;
    struct selstats_params p = o.p;
    int json = o.json;
    struct alisa_err e = {{0}};
    const struct selection_ops *sel = selection_find(sel_name);
    if (!sel)
        return cli_unknown_policy(trace_stats_usage, "--selection", sel_name);
    if (sel_params_validate(&sp, sel, &e))
        return cli_usage_error(trace_stats_usage, "%s", e.msg);
    int n_files = argc - first, rc = 0;
    FILE *f = NULL;
    char part[1100];
    if (csv) {
        if (!(f = outfile_open(csv, part, sizeof part, "statistics CSV", &e)))
            return cli_fail(&e);
        fprintf(f, "trace,layer,bin,rows,sparsity,picks,picks_per_row,persist_1,persist_32,"
                   "age_median,old_share,sink_share\n");
    }
    json_t *root = json ? json_pack("{s:s, s:f, s:I, s:f, s:i, s:o}", "selection", sel->name,
                                    "sparsity", sp.sparsity, "budget_tokens",
                                    (json_int_t)sp.budget_tokens,
                                    "alpha", p.alpha, "sinks", (int)p.sinks, "traces", json_array())
                        : NULL;
    const char *head = "%-32s %8s %8s %8s %8s %8s %8s %8s %8s\n";
    if (!json) {
        char budget[64];
        if (sp.budget_tokens)
            snprintf(budget, sizeof budget, "a budget of %u tokens", sp.budget_tokens);
        else
            snprintf(budget, sizeof budget, "sparsity %g", sp.sparsity);
        printf("selection %s at %s; old = the oldest %g of the context, sinks = the "
               "first %u tokens\n", sel->name, budget, p.alpha, p.sinks);
        if (n_files > 1)
            printf(head, "trace", "rows", "sparsity", "picks", "kept+1", "kept+32", "age",
                   "old", "sinks");
    }
    for (int i = first; i < argc && !rc; i++) {
        struct selstats *st;
        uint32_t L;
        if ((rc = selstats_replay_selection(argv[i], sel, &sp, &p, &st, &L, &e)))
            break;
        struct selstats_summary all;
        selstats_summary(st, UINT32_MAX, UINT32_MAX, &all);
        if (f)
            stats_trace_csv(f, argv[i], st, L, &all);
        if (json) {
            json_array_append_new(json_object_get(root, "traces"),
                                  stats_trace_json(argv[i], st, L, &all));
        } else if (n_files > 1) {
            char label[33];
            const char *base = strrchr(argv[i], '/');
            snprintf(label, sizeof label, "%s", base ? base + 1 : argv[i]);
            stats_row_text(label, &all);
        } else {
            stats_trace_text(head, st, L, &all);
        }
        selstats_destroy(st);
    }
    if (f && outfile_close(f, part, csv, rc, &e) && !rc)
        rc = ALISA_EIO;
    if (rc) {
        json_decref(root);
        return cli_fail(&e);
    }
    if (json) {
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        printf("\n");
        json_decref(root);
    } else {
        printf("picks: global picks per step; kept+d: share of a step's picks still picked d "
               "steps later; age: median age of a pick as a share of the context\n");
    }
    return 0;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(cmd_trace_usage, "missing trace command");
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        cmd_trace_usage(stdout);
        return 0;
    }
    if (strcmp(sub, "info") == 0) {
        cli_set_command("trace info");
        return trace_info(argc - 1, argv + 1);
    }
    if (strcmp(sub, "check") == 0) {
        cli_set_command("trace check");
        return trace_check_cmd(argc - 1, argv + 1);
    }
    if (strcmp(sub, "gen") == 0) {
        cli_set_command("trace gen");
        return trace_gen_cmd(argc - 1, argv + 1);
    }
    if (strcmp(sub, "fit") == 0) {
        cli_set_command("trace fit");
        return trace_fit_cmd(argc - 1, argv + 1);
    }
    if (strcmp(sub, "dump") == 0) {
        cli_set_command("trace dump");
        return trace_dump(argc - 1, argv + 1);
    }
    if (strcmp(sub, "stats") == 0) {
        cli_set_command("trace stats");
        return trace_stats_cmd(argc - 1, argv + 1);
    }
    return cli_usage_error(cmd_trace_usage, "unknown trace command '%s'", sub);
}
