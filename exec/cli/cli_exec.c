/* What the executor commands share (contract in cli_exec.h): the catalog
 * resolves a model name to its checkpoint and tokenizer files; the KV
 * options become a request for the tiered cache (exec/tiered.h);
 * texts become token streams; record_trace runs windows teacher-forced and
 * writes their attention rows.
 */
#include "cli_exec.h"

#include "infile.h"
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "catalog.h"
#include "cli.h"
#include "costmodel.h"
#include "cpu_ops.h"
#include "names.h"
#include "trace.h"

void loaded_free(struct loaded *l)
{
    llm_free(l->m);
    tok_free(l->t);
}

int exec_weight_mode(const char *weights)
{
    if (weights && strncmp(weights, "synthetic", 9) == 0) {
        uint64_t seed;
        return exec_synthetic_seed(weights, &seed) ? -1 : EXEC_WEIGHTS_SYNTHETIC;
    }
    return !weights || strcmp(weights, "native") == 0 ? LLM_WEIGHTS_NATIVE
           : strcmp(weights, "f32") == 0              ? LLM_WEIGHTS_F32
                                                      : -1;
}

int exec_synthetic_seed(const char *weights, uint64_t *seed)
{
    *seed = 1;
    if (strcmp(weights, "synthetic") == 0)
        return 0;
    if (strncmp(weights, "synthetic:", 10) != 0 || !weights[10])
        return -1;
    char *end;
    unsigned long long v = strtoull(weights + 10, &end, 10);
    if (*end || weights[10] == '-')
        return -1;
    *seed = v;
    return 0;
}

#ifndef ALISA_MODELS_CACHE
#define ALISA_MODELS_CACHE "models-cache"
#endif

/* Short names of the models scripts/get-models fetches into models-cache/
 * (never committed; ALISA_MODELS_CACHE moves it), beside the catalog's. */
static const struct {
    const char *name, *file;
} fetched[] = {{"SmolLM2-135M", "SmolLM2-135M-Instruct.Q4_1.gguf"}};

/* A --model that is neither a catalog name nor a file: a fetched model's
 * short name (its path into path), else an error with the nearest name
 * (ALISA_ENOTFOUND: a bad value, exit 2). */
static int fetched_model(const struct catalog *c, const char *model, char *path, size_t size,
                         struct alisa_err *e)
{
    const char *env = getenv("ALISA_MODELS_CACHE");
    const char *dir = env && *env ? env : ALISA_MODELS_CACHE;
    for (size_t i = 0; i < sizeof fetched / sizeof fetched[0]; i++) {
        if (strcasecmp(model, fetched[i].name) != 0)
            continue;
        snprintf(path, size, "%s/%s", dir, fetched[i].file);
        return access(path, R_OK) == 0
                   ? 0
                   : err_set(e, ALISA_ENOTFOUND, "--model %s: not fetched yet (%s is missing: "
                             "make models, or bash scripts/get-models)", model, path);
    }
    const char *names[256];
    size_t n = 0;
    for (size_t i = 0; i < c->n_models && n < 250; i++)
        names[n++] = c->models[i].name;
    for (size_t i = 0; i < sizeof fetched / sizeof fetched[0]; i++)
        names[n++] = fetched[i].name;
    const char *near = names_nearest(model, names, n);
    if (near)
        return err_set(e, ALISA_ENOTFOUND, "--model %s: no such file, catalog model or fetched "
                       "model; did you mean '%s'? (alisa catalog models lists them)", model, near);
    return err_set(e, ALISA_ENOTFOUND, "--model %s: no such file, catalog model or fetched model "
                   "(alisa catalog models lists them; %s)", model, fetched[0].name);
}

int load_model(struct loaded *l, const char *model, const char *tokenizer, int with_tokenizer,
               const struct kv_opts *o, struct alisa_err *e)
{
    int mode = exec_weight_mode(o ? o->weights : NULL);
    ALISA_ASSERT(mode >= 0); /* kv_opts_check refused another */
    cpu_threads_set(o ? o->threads : 0);
    memset(l, 0, sizeof *l);
    char tok_path[600] = "";
    snprintf(l->model_path, sizeof l->model_path, "%s", model);
    struct catalog c;
    int rc = 0, shaped = 0;
    if (!strchr(model, '/') && catalog_load(&c, catalog_default_dir(), catalog_models_dir(), e) == 0) {
        const struct model_shape *s = catalog_model(&c, model);
        if (s && mode == EXEC_WEIGHTS_SYNTHETIC) { /* the catalog's shape, weights drawn */
            uint64_t seed;
            exec_synthetic_seed(o->weights, &seed);
            /* on a GPU the weights are drawn there, never on the host */
            enum llm_backend be = LLM_BACKEND_CPU;
            char said[300];
            if (o->backend && llm_backend_choose(o->backend, &be, said, sizeof said, e) == 0 &&
                be == LLM_BACKEND_CUDA)
                rc = llm_shape_synthetic(&l->m, s, seed, e);
            else
                rc = llm_load_synthetic(&l->m, s, seed, e);
            shaped = 1;
        }
        if (s && s->checkpoint[0]) {
            snprintf(l->model_path, sizeof l->model_path, "%s/%s", catalog_models_dir(),
                     s->checkpoint);
            if (s->tokenizer[0])
                snprintf(tok_path, sizeof tok_path, "%s/%s", catalog_models_dir(), s->tokenizer);
        }
        if (!s && mode != EXEC_WEIGHTS_SYNTHETIC && access(model, F_OK) != 0)
            rc = fetched_model(&c, model, l->model_path, sizeof l->model_path, e);
        catalog_deinit(&c);
        if (rc)
            return rc;
    }
    if (tokenizer)
        snprintf(tok_path, sizeof tok_path, "%s", tokenizer);
    if (mode == EXEC_WEIGHTS_SYNTHETIC && !shaped)
        return err_set(e, ALISA_EINVAL, "--weights %s: '%s' is not a catalog model (alisa "
                       "catalog lists them; a synthetic model takes its shape)", o->weights, model);
    if (mode != EXEC_WEIGHTS_SYNTHETIC)
        rc = llm_load(&l->m, l->model_path, (enum llm_weight_mode)mode, e);
    if (!rc) { /* the automatic thread count fitted to the model's work */
        const struct llm_config *mc = &l->m->c;
        uint64_t per_layer = 2 * (uint64_t)mc->dim * mc->dim + 2 * (uint64_t)mc->dim * mc->kv_dim +
                             3 * (uint64_t)mc->dim * mc->hidden_dim;
        cpu_threads_fit(mc->n_layers * per_layer + (uint64_t)mc->vocab * mc->dim);
    }
    if (rc || !with_tokenizer)
        return rc;
    size_t pl = strlen(l->model_path);
    if (!tok_path[0] && pl > 5 && strcmp(l->model_path + pl - 5, ".gguf") == 0)
        snprintf(tok_path, sizeof tok_path, "%s", l->model_path); /* tokenizer inside */
    size_t tl = strlen(tok_path);
    if (!tok_path[0])
        rc = err_set(e, ALISA_EINVAL, "%s: no tokenizer known for this model (pass --tokenizer: "
                     "a llama2.c tokenizer.bin or a GGUF holding one)", l->model_path);
    else if (tl >= 5 && strcmp(tok_path + tl - 5, ".json") == 0)
        rc = err_set(e, ALISA_EINVAL, "%s: HF tokenizer.json is not supported; pass --tokenizer "
                     "with a llama2.c tokenizer.bin or a GGUF holding one", tok_path);
    if (!rc)
        rc = tok_load(&l->t, tok_path, l->m->c.vocab, e);
    if (rc)
        loaded_free(l);
    return rc;
}

static int read_threads(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    uint32_t *t = field;
    if (cli_parse_u32(opt, arg, t, e))
        return ALISA_EINVAL;
    if (*t == 0 || *t > 1024)
        return err_set(e, ALISA_EINVAL, "%s %s: expected 1 to 1024 threads", opt, arg);
    return 0;
}

#define KO(f) offsetof(struct kv_opts, f)
const struct cli_opt kv_opt_table[] = {
    {"selection", "NAME", CLI_STR, KO(selection), NULL, 0,
     "tokens each layer attends (alisa policy list; default: all)", 0},
    {"placement", "NAME", CLI_STR, KO(placement), NULL, 0,
     "place KV token by token in a device and a host arena under this\n"
     "policy (alisa policy list); default: one dense arena", 0},
    {"gpu-kv-bytes", "N", CLI_BYTES, KO(gpu_bytes), NULL, 0,
     "device arena, bytes for all sequences and layers (K and V at 4\n"
     "bytes a channel on the CPU backend, 2 on cuda, 1 with --kv-int8)", 0},
    {"cpu-kv-bytes", "N", CLI_BYTES, KO(cpu_bytes), NULL, 0,
     "host arena, bytes (default: unlimited)", 0},
    {"hardware", "NAME", CLI_STR, KO(hardware), NULL, 0,
     "profile pricing load against recompute (default H100-80GB)", 0},
    {"kv-int8", NULL, CLI_FLAG, KO(int8), NULL, 0,
     "store K and V in INT8, channel-wise asymmetric per group of 32\n"
     "tokens of a (sequence, layer); the open group stays exact until\n"
     "its last token arrives (alone: dense selection, one arena)", 0},
    {"backend", "B", CLI_STR, KO(backend), NULL, 0,
     "cpu (default), cuda (the GPU: FP16 weights, cuBLAS, the device\n"
     "arena in GPU memory, the host arena pinned) or auto (cuda when\n"
     "built and a device is found, else cpu; says which)", 0},
    {"cuda-pipeline", NULL, CLI_FLAG, KO(pipeline), NULL, 0,
     "cuda: replay a dense decode step as one CUDA graph, and plan a\n"
     "tiered one a layer ahead, observing its attention at its end\n"
     "(not yet run on a GPU, so off by default; calls that write\n"
     "per-layer timings stay eager)", 0},
    {0}};

const struct cli_opt exec_weights_table[] = {
    {"weights", "W", CLI_STR, KO(weights), NULL, 0,
     "native (default: a GGUF's matrices stay in their quantised blocks,\n"
     "mapped from the file, times 8-bit activations as llama.cpp does)\n"
     "or f32 (dequantised at load: the oracle); llama2.c files are f32;\n"
     "or synthetic[:SEED] (a catalog model's shape, weights drawn with\n"
     "std 0.02 as Q8_0 blocks: real throughput, noise for text)", 0},
    {"threads", "N", CLI_FN, KO(threads), read_threads, 0,
     "CPU threads of the forward pass (default: ALISA_THREADS, else\n"
     "OMP_NUM_THREADS, else the CPUs this process may use, at most one\n"
     "per 8M parameters of the model; idle threads wait passively, or\n"
     "spin with ALISA_WAIT=spin: faster on a machine of one's own)", 0},
    {0}};
#undef KO

int kv_opts_check(struct kv_opts *o)
{
    struct alisa_err e = {{0}};
    if (o->selection && !selection_find(o->selection))
        return cli_unknown_policy(NULL, "--selection", o->selection);
    const struct placement_ops *pl = o->placement ? placement_find(o->placement) : NULL;
    if (o->placement && !pl)
        return cli_unknown_policy(NULL, "--placement", o->placement);
    if (pl && !tiered_runs(pl))
        return cli_usage_error(NULL, "--placement %s: not supported by the executor yet (offline "
                               "bounds need a recorded run)", pl->name);
    if (cli_knobs_apply(&o->knobs, o->selection ? selection_find(o->selection) : &sel_dense_ops,
                        &o->sel, &e))
        return cli_usage_error(NULL, "%s", e.msg);
    if (exec_weight_mode(o->weights) < 0)
        return cli_usage_error(NULL, "--weights %s: expected native, f32 or synthetic[:SEED]",
                               o->weights);
    const char *b = o->backend;
    if (b && strcmp(b, "cpu") != 0 && strcmp(b, "cuda") != 0 && strcmp(b, "auto") != 0)
        return cli_usage_error(NULL, "--backend %s: expected cpu, cuda or auto", b);
    return 0;
}

const struct hw_profile *kv_opts_hw(const struct kv_opts *o, const struct catalog *c)
{
    return o->hardware ? catalog_hw(c, o->hardware)
           : o->profile ? &c->hw[c->n_hw - 1]
                        : catalog_hw(c, "H100-80GB");
}

int kv_opts_catalog(const struct kv_opts *o, struct catalog *c, const struct hw_profile **hw,
                    struct alisa_err *e)
{
    int rc = cli_catalog_load(c, catalog_default_dir(), o->profile, e);
    if (rc)
        return rc;
    if (!(*hw = kv_opts_hw(o, c))) {
        rc = catalog_hw_not_found(c, "--hardware", o->hardware, e);
        catalog_deinit(c);
    }
    return rc;
}

int exec_state_create(struct llm_state **st, const struct kv_opts *o, const struct llm_model *m,
                      uint32_t batch, uint32_t max_len, struct alisa_err *e)
{
    enum llm_backend kind;
    char said[320];
    const char *name = o->backend ? o->backend : "cpu";
    *st = NULL;
    int rc = llm_backend_choose(name, &kind, said, sizeof said, e);
    if (rc)
        return rc;
    if (strcmp(name, "auto") == 0)
        fprintf(stderr, "alisa: backend: %s\n", said);
    rc = llm_state_create_on(st, kind, m, batch, max_len, e);
    if (!rc)
        llm_state_pipeline(*st, o->pipeline);
    return rc;
}

int kv_opts_attach(struct tiered *t, const struct kv_opts *o, const struct llm_model *m,
                   struct llm_state *st, uint32_t batch, uint32_t max_len, uint32_t prompt_len,
                   struct alisa_err *e)
{
    memset(t, 0, sizeof *t);
    if (!o->selection && !o->placement && !o->int8)
        return 0;
    struct tiered_request r = {.sel_params = o->sel, .int8 = o->int8, .gpu_bytes = o->gpu_bytes,
                               .cpu_bytes = o->cpu_bytes};
    if (o->selection && !(r.sel = selection_find(o->selection)))
        return err_set(e, ALISA_EINVAL, "unknown selection '%s'", o->selection);
    if (o->placement && !(r.place = placement_find(o->placement)))
        return err_set(e, ALISA_EINVAL, "unknown placement '%s'", o->placement);
    /* a placement with a host tier but no device limit tiers nothing
     * (issue 41): say so rather than run untiered in silence */
    if (r.place && !o->gpu_bytes && r.place->host_tier)
        fprintf(stderr, "alisa: warning: --placement %s without --gpu-kv-bytes: the device arena "
                "holds every token, so nothing moves to the host (give --gpu-kv-bytes to tier)\n",
                r.place->name);
    struct catalog cat;
    int rc = kv_opts_catalog(o, &cat, &r.hw, e);
    if (rc)
        return rc;
    rc = tiered_attach(t, &r, m, st, batch, max_len, prompt_len, e);
    catalog_deinit(&cat);
    if (!rc && r.place && r.place->split_sequences)
        fprintf(stderr, "alisa: %s: %u of %u sequences' KV on the device, the rest on the host "
                "(split by whole sequences, as its own code does)\n", r.place->name, t->gpu_seqs,
                batch);
    return rc;
}

int text_tokens(const struct tokenizer *t, const char *path, uint32_t max_blocks,
                       size_t max_ids, uint32_t **out, size_t *n_out, uint32_t *n_blocks,
                       struct alisa_err *e)
{
    *out = NULL;
    *n_out = 0;
    *n_blocks = 0;
    FILE *f = infile_fopen(path, "text", e);
    if (!f)
        return ALISA_EIO;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(text);
        return err_set(e, ALISA_EIO, "%s: cannot read text", path);
    }
    fclose(f);
    text[size] = 0;
    size_t w = 0;
    for (long i = 0; i < size; i++)
        if (text[i] != '\r')
            text[w++] = text[i];
    text[w] = 0;
    const char *sep = strstr(text, "\n\n") ? "\n\n" : "\n";
    uint32_t *ids = malloc(((size_t)w + 16) * 2 * sizeof *ids);
    if (!ids) {
        free(text);
        return err_set(e, ALISA_ENOMEM, "out of memory for %s", path);
    }
    size_t n = 0;
    char *p = text;
    while (*p && (!max_blocks || *n_blocks < max_blocks) && (!max_ids || n < max_ids)) {
        while (*p == '\n')
            p++;
        if (!*p)
            break;
        char *end = strstr(p, sep);
        if (end)
            *end = 0;
        size_t len = strlen(p);
        while (len && p[len - 1] == '\n')
            p[--len] = 0;
        int k = tok_encode(t, p, 1, ids + n, len + 3);
        if (k < 0) {
            free(ids);
            free(text);
            return err_set(e, ALISA_EINVAL, "%s: block %u cannot be encoded", path, *n_blocks);
        }
        n += (size_t)k;
        (*n_blocks)++;
        p = end ? end + strlen(sep) : p + len;
    }
    free(text);
    *out = ids;
    *n_out = n;
    return 0;
}

int loaded_context_check(struct loaded *l, uint64_t need, void (*usage)(FILE *),
                         const char *what)
{
    uint32_t ctx = l->m->c.seq_len;
    if (need <= ctx)
        return 0;
    char name[128];
    snprintf(name, sizeof name, "%s", l->m->name);
    loaded_free(l);
    return cli_usage_error(usage, "%s: %llu tokens, over %s's context of %u", what,
                           (unsigned long long)need, name, ctx);
}

int loaded_batch_check(struct loaded *l, uint32_t batch, uint64_t len, void (*usage)(FILE *))
{
    const struct llm_config *c = &l->m->c;
    struct kv_shape f32 = {c->dim, c->kv_dim, KV_FP32};
    double kv = (double)cost_kv_bytes(&f32) * c->n_layers * (double)batch * (double)len;
    double row = (4.0 * c->dim + 2.0 * c->kv_dim + 2.0 * c->hidden_dim + c->vocab) * sizeof(float);
    double act = (double)batch * (double)(len < LLM_CHUNK ? len : LLM_CHUNK) * row;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? 0.8 * (double)pages * (double)page : INFINITY;
    if (kv + act <= have)
        return 0;
    loaded_free(l);
    return cli_usage_error(usage, "--batch %u: %u sequences of %llu tokens need %.1f GB (KV "
                           "cache %.1f GB, a prefill chunk's activations %.1f GB), over 80%% of "
                           "this machine's memory (%.1f GB)", batch, batch,
                           (unsigned long long)len, (kv + act) / 1e9, kv / 1e9, act / 1e9,
                           have / 1e9);
}

int record_trace(const struct record_job *j, struct alisa_err *e)
{
    const struct llm_model *m = j->l->m;
    const struct llm_config *c = &m->c;
    const struct kv_opts *kvo = &j->kv;
    const uint32_t P = j->P, G = j->G, N = P + G, batch = j->batch, offset = j->offset;
    uint32_t *ids = NULL, n_blocks;
    size_t n_ids = 0;
    int rc = 0;
    if (N > c->seq_len)
        rc = err_set(e, ALISA_EINVAL, "--prompt-len %u + --gen-len %u exceeds the model's "
                     "context %u", P, G, c->seq_len);
    if (!rc)
        rc = text_tokens(j->l->t, j->text, 0, (size_t)offset + (size_t)batch * N, &ids, &n_ids,
                         &n_blocks, e);
    if (!rc && (uint64_t)offset + (uint64_t)batch * N > n_ids)
        rc = err_set(e, ALISA_EINVAL, "%s: %zu tokens; %u windows of %u from %u do not fit",
                     j->text, n_ids, batch, N, offset);
    struct trace_header h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "%s", m->name);
    h.n_layers = c->n_layers;
    h.n_heads = c->n_heads;
    h.n_kv_heads = c->n_kv_heads;
    h.hidden = c->dim;
    h.vocab = c->vocab;
    h.n_seqs = batch;
    h.threshold = (float)j->threshold;
    h.flags = j->per_head ? TRACE_FLAG_PER_HEAD : 0;
    snprintf(h.source, sizeof h.source, "model");
    snprintf(h.model_sha256, sizeof h.model_sha256, "%s", m->sha256);
    const char *base = strrchr(j->text, '/');
    snprintf(h.text, sizeof h.text, "%s tokens %u-%u (blank-line blocks, BOS each)",
             base ? base + 1 : j->text, offset, offset + batch * N);
    char kv_desc[256] = "dense attention";
    if (kvo->selection || kvo->placement || kvo->int8)
        snprintf(kv_desc, sizeof kv_desc,
                 "--selection %s --sparsity %g --budget-tokens %u --placement %s --gpu-kv-bytes %llu "
                 "--cpu-kv-bytes %llu%s", kvo->selection ? kvo->selection : "dense",
                 kvo->sel.sparsity, kvo->sel.budget_tokens,
                 kvo->placement ? kvo->placement : "gpu-only", (unsigned long long)kvo->gpu_bytes,
                 (unsigned long long)kvo->cpu_bytes, kvo->int8 ? " --kv-int8" : "");
    struct trace_writer *w = NULL;
    struct llm_state *st = NULL;
    float *rows = malloc((size_t)batch * c->n_layers * N * sizeof *rows);
    float *heads = j->per_head ? malloc((size_t)batch * c->n_layers * c->n_heads * N *
                                        sizeof *heads) : NULL;
    uint32_t *cur = malloc(batch * sizeof *cur);
    if (!rc && (!rows || !cur || (j->per_head && !heads)))
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
    if (!rc) /* first: the trace names the backend it took */
        rc = exec_state_create(&st, kvo, m, batch, N, e);
    snprintf(h.generator, sizeof h.generator,
             "alisa record --model %s --prompt-len %u --gen-len %u --batch %u --offset %u "
             "--threshold %g%s (teacher-forced, %s, %s executor)",
             m->name, P, G, batch, offset, j->threshold, j->per_head ? " --per-head" : "", kv_desc,
             st ? llm_state_label(st) : "CPU");
    if (!rc)
        rc = trace_writer_open(&w, j->out, &h, e);
    for (uint32_t b = 0; !rc && b < batch; b++)
        rc = trace_writer_seq(w, b, P, G, 0, ids + offset + (size_t)b * N, e);
    struct tiered tr = {0};
    if (!rc)
        rc = kv_opts_attach(&tr, kvo, m, st, batch, N, P, e);
    if (!rc && j->log && !tr.sched)
        rc = err_set(e, ALISA_EINVAL, "--log needs --selection or --placement (a dense run has "
                     "no scheduler)");
    if (!rc && !tr.sched)
        llm_state_tiered(st, NULL, NULL, P); /* dense: phases for the timings */
    if (!rc && heads)
        rc = llm_state_attention_heads(st, heads, e);
    if (!rc) {
        llm_state_plan_log(st, j->log);
        llm_state_timings(st, j->timings);
    }
    struct progress pg;
    progress_start(&pg, j->progress ? j->progress : "record", "positions", N, !j->progress);
    for (uint32_t p = 0; !rc && p < N; p++) {
        progress_set(&pg, p);
        for (uint32_t b = 0; b < batch; b++)
            cur[b] = ids[offset + (size_t)b * N + p];
        if (j->between && p >= P)
            j->between(j->between_ctx, p - P);
        if (!llm_forward(st, cur, p, rows)) {
            rc = err_set(e, ALISA_EINVAL, "%s", llm_state_error(st)->msg);
            break;
        }
        for (uint32_t b = 0; !rc && b < batch; b++)
            rc = trace_writer_step(w, b, p, cur[b], rows + (size_t)b * c->n_layers * (p + 1),
                                   heads ? heads + (size_t)b * c->n_layers * c->n_heads * (p + 1)
                                         : NULL, e);
    }
    progress_end(&pg);
    if (!rc) {
        rc = trace_writer_close(w, e);
        w = NULL;
    }
    trace_writer_destroy(w);
    tiered_free(&tr);
    llm_state_free(st);
    free(rows);
    free(heads);
    free(cur);
    free(ids);
    return rc;
}
