/* The executor's forward pass, on a backend: a batch of sequences decoded in
 * lockstep, one position at a time, through the one layer sequence
 * (layers.h) of the model's architecture (llm_arch_info: LLaMA's layers in
 * llama2.c's formulas, OPT's, Qwen2's, Mistral's), grouped-query attention,
 * a checkpoint's sliding window on the dense cache. The CPU backend runs
 * GEMMs through CBLAS (OpenBLAS) in FP32 (backend_cpu.c); the CUDA backend holds
 * the weights in FP16 on the GPU, runs GEMMs through cuBLAS and the rest in
 * kernels/ (backend_cuda.c). Both sit behind backend.h's ops table.
 *
 * A state owns its activations and a dense KV cache (every token of every
 * (sequence, layer) kept); with llm_state_tiered the scheduler core and a
 * kvstore take over the cache. Optionally returns each layer's head-mean
 * attention row, the trace format's row.
 */
#ifndef ALISA_FORWARD_H
#define ALISA_FORWARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "kvstore.h"
#include "model.h"
#include "scheduler.h"

struct llm_state;

enum llm_backend { LLM_BACKEND_CPU, LLM_BACKEND_CUDA };

/* Positions a sequence in the commands' prompt and eval calls
 * (llm_forward_chunk): their GEMMs run over batch x LLM_CHUNK rows while
 * the logits stay (batch, LLM_CHUNK, vocab) in memory. The CUDA backend's
 * tiered cache leaves the device room for that many activation rows. */
#define LLM_CHUNK 32u

/* The backend `name` asks for: "cpu", "cuda" (fails, saying why, when this
 * build or machine has no CUDA device) or "auto" (cuda when built and a
 * device is found, else cpu). said (n) gets the choice in words, with the
 * device or the reason for the CPU. Never aborts: the device probe cannot
 * fail. */
int llm_backend_choose(const char *name, enum llm_backend *out, char *said, size_t n,
                       struct alisa_err *e);

/* State for `batch` sequences of up to max_len tokens (<= the model's
 * seq_len) on backend kind. */
int llm_state_create_on(struct llm_state **out, enum llm_backend kind, const struct llm_model *m,
                        uint32_t batch, uint32_t max_len, struct alisa_err *e);

/* llm_state_create_on with the CPU backend. */
int llm_state_create(struct llm_state **out, const struct llm_model *m, uint32_t batch,
                     uint32_t max_len, struct alisa_err *e);
void llm_state_free(struct llm_state *s); /* accepts NULL */

enum llm_backend llm_state_backend(const struct llm_state *s); /* cannot fail */

/* A backend as messages and hardware profiles describe it. */
struct llm_backend_info {
    const char *name;      /* "cpu", "cuda" */
    const char *label;     /* "CPU", "CUDA" */
    const char *computes;  /* how it runs the model, in words */
    int weight_bytes;      /* bytes per weight as held: 4 (FP32) or 2 (FP16) */
    int kv_bytes;          /* bytes of a K or V channel in the tiered arenas: 4 (FP32), 2 (FP16) */
    int batched_copies;    /* a layer's moves copied at once (1) or token by token (0) */
    char device[256];      /* the processor computed on: CPU model or GPU name */
    char driver[96];       /* the GPU's driver version (device_info), "" on the CPU */
    double mem_gib;        /* its memory */
    char note[320];        /* one more line for a profile's comments, or "" */
    double attend_parallel_min; /* multiply-adds from which its dense-cache attention of two
                                   rows or more runs across threads, below them one row after
                                   another on the calling thread (0: one rule for every call
                                   of two rows or more; cpu_ops.h cpu_attend_parallel_min) */
};

/* Fills *out for backend kind; fails (e set) when this build lacks it. */
int llm_backend_info(enum llm_backend kind, struct llm_backend_info *out, struct alisa_err *e);

/* "CPU" or "CUDA": the backend s computes on. Cannot fail. */
const char *llm_state_label(const struct llm_state *s);

/* A kvstore (kvstore.h's arguments) whose device arena lives where s
 * computes: host memory on the CPU backend (FP32 or INT8), GPU memory (and
 * a pinned host arena) in FP16 on the CUDA one, which refuses int8 (not
 * built yet). Owned by the
 * caller, freed with kvstore_free after s stops using it. */
int llm_state_kvstore(struct llm_state *s, uint32_t n_streams, uint32_t max_len, uint32_t dev_cap,
                      uint32_t host_cap, int int8, struct kvstore **out, struct alisa_err *e);

/* Switches s to the tiered KV cache: from now on every (sequence b, layer l)
 * is scheduler stream b * n_layers + l; positions below prompt_len are
 * prefill (admitted, attended densely from wherever their KV lies, observed
 * as prefill rows), later ones decode steps (the scheduler's plan decides
 * the attended set and the moves; attention reads the device arena only).
 * The selection is fed each attention row with its weights rounded to FP16,
 * as a trace stores them.
 * ks must come from llm_state_kvstore(s, ...) (or, on the CPU backend,
 * kvstore_create). sched and ks are borrowed and must outlive s. With sched NULL the cache
 * stays dense and only prompt_len is recorded (timings name the phases). */
void llm_state_tiered(struct llm_state *s, struct scheduler *sched, struct kvstore *ks,
                      uint32_t prompt_len);

/* A new sequence in slot b of a tiered state (a serving shell's next
 * request, or a preempted one started over): the slot's streams emptied in
 * the scheduler and the arenas (scheduler_stream_reset,
 * kvstore_stream_reset), its positions below prompt_len prefill from now
 * on; once a slot began, rows at their own positions (llm_forward_rows)
 * run on the tiered cache. Does nothing to a dense state. Returns 0, or an
 * error code with llm_state_error set (InfiniGen's speculation, which
 * skews by one prompt for all, is refused; out of memory). */
int llm_state_slot_begin(struct llm_state *s, uint32_t b, uint32_t prompt_len);

/* Runs tokens[b] at position pos for every sequence b (positions 0..pos-1
 * must have been run). Returns the logits, (batch, vocab), owned by s and
 * valid until the next call; NULL when the tiered cache cannot hold the step
 * (llm_state_error says why). When rows is non-NULL it receives
 * (batch, n_layers, pos + 1): each layer's attention weights averaged over
 * heads (0 for tokens not attended). */
const float *llm_forward(struct llm_state *s, const uint32_t *tokens, uint32_t pos, float *rows);

/* Rows at their own positions (issue 46: a serving iteration): row r is
 * sequence slot[r]'s token tokens[r] at position pos[r]; a sequence's rows
 * are adjacent, in increasing positions, and its positions before its first
 * row here must have been run (by earlier calls); sequences without rows
 * are left as they are. Returns the logits of the rows head_rows lists
 * ((n_head, vocab): what a serving iteration samples from, as vLLM computes
 * logits for each request's last row only), or of every row ((R, vocab))
 * when head_rows is NULL; valid until the next call. NULL (llm_state_error
 * says why) on a backend that runs sequences in lockstep only (CUDA) or
 * with the tiered cache attached before any llm_state_slot_begin. A bad row
 * (token, slot, position, order) is a caller's bug: asserted. The CPU
 * backend's lockstep call is this with rows b * P + i. */
const float *llm_forward_rows(struct llm_state *s, const uint32_t *tokens, const uint32_t *slot,
                              const uint32_t *pos, uint32_t R, const uint32_t *head_rows,
                              uint32_t n_head);

/* The greedy token of a row of n logits: the first index of the largest
 * value that is not a NaN (0 when all are NaNs). The host's rule, which the
 * CUDA backend's device argmax reproduces exactly. Cannot fail. */
uint32_t llm_argmax(const float *x, uint32_t n);

/* llm_forward at pos for every sequence, keeping only each sequence's
 * greedy next token (llm_argmax of its logits) in next (batch): the CUDA
 * backend takes the argmax on the device and copies down the ids alone,
 * not (batch, vocab) logits. Returns 0, or -1 (llm_state_error says why). */
int llm_forward_greedy(struct llm_state *s, const uint32_t *tokens, uint32_t pos, uint32_t *next);

/* Writes one JSON line per llm_forward call to f (NULL: off): position,
 * phase (prefill or decode), batch, total wall time and, per layer, the time
 * in weight GEMMs (with the element-wise work around them), attention (with
 * the tiered cache's gather of the attended K and V), KV moves between the
 * arenas, recomputation, and the scheduler (its plans and observations),
 * all in microseconds, and the tokens its plans retired and attended (in
 * tiered mode; 0 without a scheduler); the head (final
 * norm and classifier) separately.
 * f is borrowed. */
void llm_state_timings(struct llm_state *s, FILE *f);

/* Where the selection's attention rows come from in tiered mode (issue 22's
 * --attention-from): fn(ctx, seq, layer, pos) returns the pos + 1 weights
 * (head-mean, over every earlier token) the selection observes for that
 * sequence, layer and position instead of the attention just computed, or
 * NULL to observe the computed one there. The model still attends the
 * tokens the plan selects with its own weights: only the scheduler's input
 * changes. fn NULL: computed attention everywhere (the default). */
typedef const float *(*llm_attention_row_fn)(void *ctx, uint32_t seq, uint32_t layer,
                                             uint32_t pos);
void llm_state_attention_from(struct llm_state *s, llm_attention_row_fn fn, void *ctx);

/* The pipelined step on the CUDA backend (issue 22; off by default until
 * it has run on a GPU): a dense call of one position a sequence that wants
 * no attention rows and writes no timings is captured once as a CUDA graph
 * and replayed; a tiered decode step without rows for the caller plans
 * layer l + 1 on the host while the GPU runs layer l (a step's plans depend
 * only on earlier steps' attention) and the scheduler observes every
 * layer's attention once the step is done. Same kernels, same order: the
 * same logits and plans as the eager path. The CPU backend ignores it.
 * Cannot fail. */
void llm_state_pipeline(struct llm_state *s, int on);

/* Rows the selection observed from the source and from the computed
 * attention since s was made. Cannot fail. */
void llm_state_attention_counts(const struct llm_state *s, uint64_t *fed, uint64_t *computed);

/* Writes every scheduler plan of the tiered cache to f as a decision-log
 * line (planlog.h; NULL: off). f is borrowed. */
void llm_state_plan_log(struct llm_state *s, FILE *f);

/* With rows asked of llm_forward, each head's softmax row too, into heads:
 * (batch, n_layers, n_heads, pos + 1), the head-mean rows being their
 * mean. Only for a dense pass (no scheduler attached) of a backend that
 * writes them (the CPU); otherwise an error naming why. NULL turns it off.
 * heads is borrowed. */
int llm_state_attention_heads(struct llm_state *s, float *heads, struct alisa_err *e);

/* Runs P consecutive positions pos0..pos0+P-1 of every sequence at once:
 * tokens (batch, P), the projections and FFN as GEMMs over batch x P rows,
 * attention and the tiered cache position by position in order. Returns the
 * logits (batch, P, vocab), owned by s; NULL on failure. rows must be NULL
 * unless P == 1. llm_forward is the case P == 1. */
const float *llm_forward_chunk(struct llm_state *s, const uint32_t *tokens, uint32_t pos0,
                              uint32_t P, float *rows);

/* llm_forward_chunk for positions whose logits nobody reads (a prompt
 * before its last token): the output head may be skipped (the CPU backend
 * skips it). Returns 0, or -1 (llm_state_error says why). */
int llm_prefill_chunk(struct llm_state *s, const uint32_t *tokens, uint32_t pos0, uint32_t P);

/* The error of the last failed llm_forward. Cannot fail. */
const struct alisa_err *llm_state_error(const struct llm_state *s);

#endif
