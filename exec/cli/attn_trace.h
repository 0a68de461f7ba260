/* Attention rows from a trace, for `alisa run --attention-from TRACE`
 * (issue 22): the selection observes recorded (or synthetic) attention
 * while the model computes its own over the tokens the plan selects, so a
 * model with synthetic weights (near-uniform attention) is scheduled as a
 * real one would be.
 *
 * Mapped as the simulator maps a trace onto a workload (sim/simulate.c,
 * run_map_streams): batch sequence b reads trace sequence b % n_seqs, model
 * layer l reads trace layer l * trace_layers / n_layers. Every trace
 * sequence used must have the run's prompt length and at least its length
 * in tokens; positions the trace has no row for (before its row_start)
 * observe the computed attention. The rows used are held in memory:
 * sequences used x trace layers x len (len + 1) / 2 floats, refused beyond
 * 80% of this machine's memory.
 */
#ifndef ALISA_ATTN_TRACE_H
#define ALISA_ATTN_TRACE_H

#include <stdint.h>

#include "err.h"

struct attn_trace;

/* Reads path's rows for a run of `batch` sequences of a model of n_layers,
 * with prompt_len-token prompts and len tokens in all. On failure *out is
 * NULL and e names the file and the field at fault. */
int attn_trace_load(struct attn_trace **out, const char *path, uint32_t n_layers, uint32_t batch,
                    uint32_t prompt_len, uint32_t len, struct alisa_err *e);

/* llm_attention_row_fn (forward.h) over an attn_trace: the pos + 1 weights
 * of (seq, layer, pos), or NULL where the trace has none. */
const float *attn_trace_row(void *ctx, uint32_t seq, uint32_t layer, uint32_t pos);

/* Frees a. Accepts NULL. */
void attn_trace_free(struct attn_trace *a);

#endif
