/* The CPU backend's forward pass: a batch of sequences decoded in lockstep,
 * one position at a time, GEMMs through CBLAS (OpenBLAS), the rest plain C
 * in llama2.c's formulas (RMSNorm, RoPE, grouped-query attention, SwiGLU).
 *
 * Owns the activations and, for now, a dense KV cache (every token of every
 * (sequence, layer) kept); tiered placement under the scheduler comes next
 * (issue 3). Optionally returns each layer's head-mean attention row, the
 * trace format's row.
 */
#ifndef ALISA_FORWARD_H
#define ALISA_FORWARD_H

#include <stdint.h>

#include "err.h"
#include "model.h"

struct llm_state;

/* State for `batch` sequences of up to max_len tokens (<= the model's
 * seq_len). */
int llm_state_create(struct llm_state **out, const struct llm_model *m, uint32_t batch,
                     uint32_t max_len, struct alisa_err *e);
void llm_state_free(struct llm_state *s); /* accepts NULL */

/* Runs tokens[b] at position pos for every sequence b (positions 0..pos-1
 * must have been run). Returns the logits, (batch, vocab), owned by s and
 * valid until the next call. When rows is non-NULL it receives
 * (batch, n_layers, pos + 1): each layer's attention weights averaged over
 * heads. Cannot fail. */
const float *llm_forward(struct llm_state *s, const uint32_t *tokens, uint32_t pos, float *rows);

#endif
