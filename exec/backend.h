/* The executor's backend interface (STYLE.md: a table of function pointers
 * plus a context): the CPU backend (backend_cpu.c) and the CUDA backend
 * (backend_cuda.c) implement struct backend_ops; forward.h's public calls
 * dispatch through it. What both share lives here too: the state every
 * backend keeps (tiered cache, logs, per-layer timings), asking the
 * scheduler for a step, feeding it the attention row, and the timings line.
 *
 * Internal to exec/; callers use forward.h.
 */
#ifndef ALISA_BACKEND_H
#define ALISA_BACKEND_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "forward.h"
#include "kvstore.h"
#include "model.h"
#include "scheduler.h"

/* Timing categories of a layer: weight GEMMs (and the element-wise work
 * between them), attention (the gather of the attended K and V included),
 * KV moves between the arenas, recomputation, and the scheduler's decisions
 * and observations; then two counts beside them, not ns: the tokens the
 * layer's plans retired and the tokens they attended. */
enum { T_GEMM, T_ATTN, T_MOVE, T_RECOMP, T_SCHED, T_RETIRED, T_ATTENDED, T_N };

/* What every backend's state holds besides its own buffers. */
struct backend_common {
    const struct llm_model *m;
    uint32_t batch, max_len;
    struct scheduler *sched; /* tiered mode when non-NULL (borrowed) */
    struct kvstore *ks;      /* borrowed, made by the backend's kvstore op */
    uint32_t prompt_len;
    uint32_t *slot_prompt;   /* (batch) each slot's own prompt length once a slot began a
                              * sequence (llm_state_slot_begin); NULL: prompt_len for all */
    struct alisa_err err;    /* of the last failed forward */
    FILE *timings;           /* JSON lines, borrowed; NULL: off */
    FILE *plan_log;          /* decision log (planlog.h), borrowed; NULL: off */
    double *t_layer;         /* (n_layers, T_N) ns per category of the current call */
    int no_head;             /* this call needs no logits: a backend may skip the head */
    uint32_t *greedy;        /* set only for a backend with device_argmax: the call's
                              * (batch) greedy next tokens go here, and the logits it
                              * returns need not hold anything (llm_forward_greedy) */
    llm_attention_row_fn attn_row; /* the selection's rows from elsewhere, or NULL */
    void *attn_ctx;
    uint64_t attn_fed, attn_computed; /* rows observed from attn_row / computed */
    int pipeline;            /* llm_state_pipeline */
    float *attn_heads;       /* llm_state_attention_heads: with rows, each head's row of the
                              * call's one position, (batch, n_layers, n_heads, pos + 1);
                              * dense passes of a backend with attn_heads_out; NULL: off */
};

/* Sequence b's prompt length: its slot's own, else the state's. */
static inline uint32_t backend_prompt(const struct backend_common *c, uint32_t b)
{
    return c->slot_prompt ? c->slot_prompt[b] : c->prompt_len;
}

/* What a shell asks of a backend instead of testing which one it is: the
 * fields and the calibration hooks below. */
struct backend_ops {
    const char *name;      /* "cpu", "cuda": --backend's word, profile names */
    const char *label;     /* "CPU", "CUDA": messages and the profile's gpu line */
    const char *computes;  /* how it runs the model, in words, for the profile */
    int weight_bytes;      /* bytes of one weight as it holds them: 4 (FP32) or 2 (FP16) */
    int kv_bytes;          /* bytes of one K or V channel in its tiered arenas: 4 (FP32) or 2
                              (FP16); INT8, where built, is 1 */
    int batched_copies;    /* 1: a layer's moves are copied at once; 0: token by token */
    int device_argmax;     /* 1: forward writes c->greedy itself when it is set (only the
                              ids come back); 0: llm_forward_greedy takes it on the host */
    int attn_heads_out;    /* 1: a dense pass fills c->attn_heads when it is set */
    /* A state for c->batch sequences of c->max_len tokens of c->m into *be.
     * Returns 0 or a negative status with e set. */
    int (*create)(void **be, const struct backend_common *c, struct alisa_err *e);
    void (*destroy)(void *be); /* accepts NULL */
    /* A kvstore whose device arena lives where this backend computes. */
    int (*kvstore)(void *be, uint32_t n_streams, uint32_t max_len, uint32_t dev_cap,
                   uint32_t host_cap, int int8, struct kvstore **out, struct alisa_err *e);
    /* llm_forward_chunk's contract; c->err on failure. */
    const float *(*forward)(void *be, struct backend_common *c, const uint32_t *tokens,
                            uint32_t pos0, uint32_t P, float *rows);
    /* llm_forward_rows's contract (rows checked); NULL where not built. */
    const float *(*forward_rows)(void *be, struct backend_common *c, const uint32_t *tokens,
                                 const uint32_t *slot, const uint32_t *pos, uint32_t R,
                                 const uint32_t *head_rows, uint32_t n_head);

    /* Calibration's microbenchmarks (calibrate.c), each as this backend
     * runs the work. The processor computed on: its name, memory and one
     * more line for the profile ("" when none). Cannot fail. */
    void (*describe)(struct llm_backend_info *out);
    /* One GEMM y (rows, out) = x (rows, in) W^T as the projections run:
     * median ns of 5 after a warm-up, into *ns. 0, or a negative status. */
    int (*bench_gemm)(unsigned rows, unsigned out, unsigned in, double *ns, struct alisa_err *e);
    /* One copy of `bytes` between the two KV arenas (the mean of both
     * directions where they differ): median ns, into *ns. */
    int (*bench_copy)(size_t bytes, double *ns, struct alisa_err *e);
    /* Recomputing one token's K and V in a layer of m as the backend does:
     * ns per token, NAN when it cannot be measured. */
    double (*bench_recompute)(const struct llm_model *m);
    /* The forward pass's own weight GEMMs of m for `rows` rows, alone: one
     * pass over the seven matrices of layers 0 .. layers - 1 in the
     * forward's order, then the output head; the median of `passes` (1 to
     * 255) passes after a warm-up, ns, into *layers_ns and *head_ns. What calibration
     * reads the kernel's shape by row count from (issue 49). NULL where a
     * backend has none (CUDA so far). 0, or a negative status. */
    int (*bench_weights)(const struct llm_model *m, uint32_t rows, uint32_t layers,
                         uint32_t passes, double *layers_ns, double *head_ns,
                         struct alisa_err *e);
};

/* The backend of kind into *out; a negative status (e set, *out NULL) when
 * this build lacks it. */
int backend_of(enum llm_backend kind, const struct backend_ops **out, struct alisa_err *e);

extern const struct backend_ops backend_cpu;
extern const struct backend_ops backend_cuda; /* in the CUDA module only (device.h) */

/* Deterministic benchmark data in [-0.5, 0.5): no zeros, no denormals.
 * Cannot fail. */
void backend_bench_fill(float *x, size_t n);

/* Monotonic clock, ns. Cannot fail. */
uint64_t backend_mono_ns(void);

/* Asks the scheduler for (sequence b, layer l)'s plan at pos (prefill below
 * c->prompt_len), logs it, adds the time to tl[T_SCHED], the tokens it
 * retires to tl[T_RETIRED] and those it attends to tl[T_ATTENDED]. present:
 * the query's row over tokens 0..pos for a decode step whose selection needs
 * it (scheduler_needs_present), else NULL. Returns 0, or -1 with c->err set
 * when the device arena cannot hold the step. */
int backend_plan(struct backend_common *c, uint32_t b, uint32_t l, uint32_t pos,
                 const float *present, struct scheduler_plan *plan, double *tl);

/* Feeds the scheduler (sequence b, layer l)'s attention row at pos: w (n_att)
 * head-mean weights of tokens ids (n_att), rounded to FP16 as a trace stores
 * them, spread over dense (pos + 1, scratch); or, when recorded is non-NULL,
 * that row (pos + 1 weights: the present row a trace records for a selection
 * that reads it), so a replay of the trace is fed the same. Adds the time to
 * tl[T_SCHED] and returns it, ns. */
double backend_observe(struct backend_common *c, uint32_t b, uint32_t l, uint32_t pos,
                       const uint32_t *ids, const float *w, uint32_t n_att,
                       const float *recorded, float *dense, double *tl);

/* Writes the timings line of a call (see llm_state_timings) when c->timings
 * is set: total and head wall times, ns, and c->t_layer. */
void backend_write_timings(const struct backend_common *c, uint32_t pos0, uint32_t P,
                           double total_ns, double head_ns);

#endif
