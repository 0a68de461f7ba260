/* The CPU's row operations of the layer sequence (layers.h) over host
 * buffers: embedding, norms, weight products through qmat.h, biases,
 * RoPE from llm_rope_tables, SwiGLU and the residual add, rows across
 * OpenMP threads where the work is per row. The CPU backend runs the
 * forward pass with them (adding its own attention), and the kvstore's
 * recomputation (kvstore_recompute) its K and V through layers_kv.
 *
 * Internal to exec/.
 */
#ifndef ALISA_CPU_LAYERS_H
#define ALISA_CPU_LAYERS_H

#include <stdint.h>

#include "layers.h"
#include "model.h"

/* What the row operations read and write: a context a caller fills (the
 * CPU backend's state begins with one, so its ops table's `be` is both). */
struct cpu_rows {
    const struct llm_model *m;
    float *buf[LB_N];                 /* each named buffer's rows; NULL where unused */
    const uint32_t *tokens;           /* (n) each row's token (embed) */
    const uint32_t *pos;              /* (n) each row's position: learned positions' row, and
                                       * the row of the RoPE tables */
    const float *rope_cos, *rope_sin; /* llm_rope_tables, (positions, head_dim / 2) */
    void *scratch;                    /* qmat_gemm's activation blocks for the widest input */
    const float *quantised;           /* the buffer whose activations scratch holds, quantised
                                       * by the last product (NULL: none), of quantised_rows
                                       * rows and quantised_cols columns */
    uint32_t quantised_rows, quantised_cols;
};

/* embed, embed_pos, norm, linear, bias, rope, glu and residual on a struct
 * cpu_rows (each returns 0: host arithmetic cannot fail); attend,
 * after_norm, mark and head_rows are NULL: a backend adds its own. */
extern const struct layer_ops cpu_row_ops;

#endif
