/* What the executor commands (run, eval, record, calibrate, validate)
 * share: model loading (a catalog name or a file, and its tokenizer), the
 * KV options (resolved into the request exec/tiered.h sets the cache up
 * from), text as a token stream, and recording a trace.
 */
#ifndef ALISA_CLI_EXEC_H
#define ALISA_CLI_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "catalog.h"
#include "cli.h"
#include "cli_opts.h"
#include "costmodel.h"
#include "err.h"
#include "forward.h"
#include "kvstore.h"
#include "model.h"
#include "scheduler.h"
#include "tiered.h"
#include "tokenizer.h"

/* A loaded model and its tokenizer (NULL when not asked for). */
struct loaded {
    struct llm_model *m;
    struct tokenizer *t;
    char model_path[600];
};

struct kv_opts;

/* Loads model (a catalog name with a checkpoint, or a llama2.c .bin or GGUF
 * path) and, when with_tokenizer, its tokenizer: tokenizer when given, else
 * the catalog's, else the one inside a GGUF file. The weights are held as
 * o->weights says and the CPU threads set to o->threads (o NULL: native,
 * every core). On failure l is empty and e says why. */
int load_model(struct loaded *l, const char *model, const char *tokenizer, int with_tokenizer,
               const struct kv_opts *o, struct alisa_err *e);

void loaded_free(struct loaded *l); /* accepts an empty l */

/* An option-made length against the loaded model's context, as a usage
 * error: 0 when need <= the context, else frees l, prints "WHAT: NEED
 * tokens, over MODEL's context of C" (the command's one-line usage error)
 * and returns CLI_EXIT_USAGE. */
int loaded_context_check(struct loaded *l, uint64_t need, void (*usage)(FILE *),
                         const char *what);

/* What the executor holds for batch sequences of len tokens, against 80% of
 * this machine's physical memory (the rest for the weights and the system):
 * the KV cache (FP32 K and V, every layer, as the backends allocate it) and
 * the activation rows of a prefill chunk (batch x LLM_CHUNK rows, fewer
 * for a shorter len, of the
 * hidden, K/V, FFN and vocabulary widths, as the CPU backend's ensure_rows
 * sizes them; issue 48: --batch 1000000 passed the KV check alone). 0 when
 * it fits, else frees l, prints "--batch B: ..." as the command's usage
 * error and returns CLI_EXIT_USAGE. */
int loaded_batch_check(struct loaded *l, uint32_t batch, uint64_t len, void (*usage)(FILE *));

/* The executor's KV options: without --selection and --placement the cache
 * is dense (every token, one arena); with them the scheduler core places
 * every token of every (sequence, layer) in the device or host arena. */
struct kv_opts {
    const char *selection, *placement, *hardware;
    const char *profile;           /* hardware profiles added to the catalog, or NULL */
    const char *backend;           /* cpu (NULL), cuda or auto */
    struct sel_params sel;
    int int8;                      /* INT8 K and V in the arenas */
    uint64_t gpu_bytes, cpu_bytes; /* totals over all streams */
    const char *weights;           /* native (NULL) or f32 */
    uint32_t threads;              /* CPU threads, 0: all cores */
    int pipeline;                  /* --cuda-pipeline (llm_state_pipeline) */
    struct cli_knobs knobs;        /* the selection's own parameters as given (cli.h), set
                                      into sel by kv_opts_check */
};

/* The KV options as declared groups (cli_opts.h) over a struct kv_opts:
 * kv_opt_table (selection, placement, arenas, hardware, INT8, backend,
 * pipeline), the budget (cli_budget_opts over its sel) and
 * exec_weights_table (--weights, --threads: every command that loads a
 * model). A command's options struct embeds a kv_opts at MEMBER. */
extern const struct cli_opt kv_opt_table[], exec_weights_table[];
#define KV_GROUPS(TYPE, MEMBER)                                                            \
    {kv_opt_table, offsetof(TYPE, MEMBER)}, {cli_budget_opts, offsetof(TYPE, MEMBER.sel)}, \
        {exec_weights_table, offsetof(TYPE, MEMBER)}

/* --weights's value as a load mode (EXEC_WEIGHTS_SYNTHETIC for
 * synthetic[:SEED]); -1 for another value. */
#define EXEC_WEIGHTS_SYNTHETIC 100
int exec_weight_mode(const char *weights);

/* The seed of "synthetic" (1) or "synthetic:SEED"; -1 when malformed. */
int exec_synthetic_seed(const char *weights, uint64_t *seed);

/* The KV options' values checked before any work: the selection and
 * placement known (alisa policy list), their parameters in range (the
 * selection's own set into o->sel), the backend one of cpu, cuda, auto.
 * Returns 0, or a usage error's exit code (cli_usage_error: one line naming
 * the option and the value). */
int kv_opts_check(struct kv_opts *o);

/* The hardware profile o prices with, in c (loaded with o->profile): the one
 * --hardware names, else the profile file's own section (its last), else
 * H100-80GB. NULL when the name is not there. */
const struct hw_profile *kv_opts_hw(const struct kv_opts *o, const struct catalog *c);

/* The catalog with o->profile loaded into *c and kv_opts_hw's hardware in
 * *hw: 0, or an error naming the file or the missing --hardware (nothing
 * left to free then; else catalog_deinit(c) when done). */
int kv_opts_catalog(const struct kv_opts *o, struct catalog *c, const struct hw_profile **hw,
                    struct alisa_err *e);

/* An executor state on o's backend (see --backend) for `batch` sequences of
 * max_len tokens; with auto, says on stderr which backend it took. */
int exec_state_create(struct llm_state **st, const struct kv_opts *o, const struct llm_model *m,
                      uint32_t batch, uint32_t max_len, struct alisa_err *e);

/* Attaches a tiered cache (tiered.h) to st as o asks: nothing when o asks
 * for neither selection, placement nor INT8 (t stays empty). Resolves o's
 * policies and its hardware profile (from the catalog plus o->profile),
 * which prices load against recompute; says on stderr when a placement with
 * a host tier has no device limit (it tiers nothing) and how FlexGen's split
 * fell. Positions below prompt_len are prefill. */
int kv_opts_attach(struct tiered *t, const struct kv_opts *o, const struct llm_model *m,
                   struct llm_state *st, uint32_t batch, uint32_t max_len, uint32_t prompt_len,
                   struct alisa_err *e);

/* Reads path and encodes it as SOURCES.md does: each blank-line block (each
 * line when the file has no blank line) as BOS + its text, concatenated.
 * Stops after max_blocks blocks, or once max_ids tokens exist, when non-zero.
 * *out is malloc'd. */
int text_tokens(const struct tokenizer *t, const char *path, uint32_t max_blocks, size_t max_ids,
                uint32_t **out, size_t *n_out, uint32_t *n_blocks, struct alisa_err *e);

/* One recording: `batch` windows of P + G consecutive tokens of text from
 * token `offset`, run teacher-forced position by position, every row
 * written to the trace `out` (written whole or not at all). */
struct record_job {
    const struct loaded *l;
    const char *text, *out;
    uint32_t P, G, batch, offset;
    double threshold;
    int per_head;   /* also each head's rows (dense CPU passes only) */
    struct kv_opts kv;
    FILE *log;      /* decision log (needs a scheduler), or NULL */
    FILE *timings;  /* llm_state_timings' lines, or NULL */
    /* called before each decode step's forward pass (step 0 = position P),
     * outside the executor's timings; or NULL */
    void (*between)(void *ctx, uint32_t step);
    void *between_ctx;
    const char *progress; /* a label for a progress line on a terminal (progress.h), or
                             NULL for none */
};

int record_trace(const struct record_job *j, struct alisa_err *e);

#endif
