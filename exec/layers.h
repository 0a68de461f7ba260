/* The model written once: a decoder's layer sequence (embedding, each
 * layer's norm, projections, positions, attention, output projection,
 * residuals and MLP, then the head) and the K/V of a layer input, against a
 * backend's row operations, reading the architecture as data
 * (llm_arch_info). The CPU backend (backend_cpu.c; its row operations in
 * cpu_layers.c, which the kvstore's recomputation runs too) and the CUDA
 * backend (backend_cuda.c) implement the operations over their own
 * buffers; attention over the selected tokens is each backend's own
 * (dense or through the scheduler).
 *
 * Internal to exec/.
 */
#ifndef ALISA_LAYERS_H
#define ALISA_LAYERS_H

#include <stdint.h>

#include "model.h"

/* Activation buffers, named; each backend maps a name to its rows. */
enum lbuf {
    LB_X,      /* (R, dim) the residual stream */
    LB_XB,     /* (R, dim) a norm's output; the attention's output replaces it */
    LB_XB2,    /* (R, dim) a projection's output before the residual add */
    LB_Q,      /* (R, dim) */
    LB_K,      /* (R, kv_dim) */
    LB_V,      /* (R, kv_dim) */
    LB_HB,     /* (R, hidden) the FFN's first product */
    LB_HB2,    /* (R, hidden) its gate (SwiGLU) */
    LB_LOGITS, /* (R, vocab) */
    LB_REC_IN, /* (n, dim) kept layer inputs of tokens recomputed */
    LB_REC_K,  /* (n, kv_dim) their keys */
    LB_REC_V,  /* (n, kv_dim) their values */
    LB_N
};

/* A layer's weight matrices (and the bias beside each, where the
 * architecture has one), and the head. */
enum lweight { LW_Q, LW_K, LW_V, LW_O, LW_UP, LW_GATE, LW_DOWN, LW_CLS };

enum lnorm { LN_ATT, LN_FFN, LN_FINAL };

/* Points a backend may time: a layer's start, its projections done, its
 * attention done, its end; layer n_layers is the head. */
enum lmark { LM_START, LM_QKV, LM_ATTN, LM_END };

/* A backend's operations. Each returns 0, or nonzero with the backend's
 * error set (the caller's struct alisa_err), which the sequence returns.
 * n: rows. Positions (RoPE's, learned ones') are the backend's per row:
 * the call's rows, or for LB_REC_ buffers the recomputed tokens'. */
struct layer_ops {
    int (*embed)(void *be, uint32_t n);                        /* tokens' rows into LB_X */
    int (*embed_pos)(void *be, uint32_t n, uint32_t offset);   /* LB_X += position + offset's row */
    int (*norm)(void *be, enum lbuf o, enum lbuf x, enum lnorm which, uint32_t l, uint32_t n);
    /* y = x W^T of layer l's matrix w; again: x is the previous call's input
     * (a backend may reuse what it made of it) */
    int (*linear)(void *be, enum lbuf y, enum lbuf x, enum lweight w, uint32_t l, uint32_t n,
                  int again);
    /* optional: y[i] = x W_i^T for `count` matrices w[i] of layer l over one
     * input x (a layer's Q, K and V; its up and gate): a backend may run
     * them as one product. Without it the sequence calls linear for each,
     * `again` after the first. */
    int (*linear_group)(void *be, const enum lbuf *y, enum lbuf x, const enum lweight *w,
                        uint32_t count, uint32_t l, uint32_t n, int again);
    /* optional: LB_X += x W^T of layer l's matrix w, the projection and its
     * residual add in one. Without it the sequence calls linear into
     * LB_XB2, then residual. */
    int (*linear_residual)(void *be, enum lbuf x, enum lweight w, uint32_t l, uint32_t n);
    int (*bias)(void *be, enum lbuf y, enum lweight w, uint32_t l, uint32_t n, int relu);
    int (*rope)(void *be, enum lbuf y, uint32_t n);            /* rotate y's rows' heads */
    int (*glu)(void *be, uint32_t n);                          /* LB_HB = SwiGLU(LB_HB, LB_HB2) */
    int (*residual)(void *be, uint32_t n);                     /* LB_X += LB_XB2 */
    /* layer l's attention of the call's rows (LB_Q against their sequences'
     * K and V, LB_K and LB_V written first): output into LB_XB */
    int (*attend)(void *be, uint32_t l, uint32_t n);
    /* optional: after layer l's attention norm, before its projections
     * (InfiniGen's speculation on the CPU) */
    int (*after_norm)(void *be, uint32_t l, uint32_t n);
    int (*mark)(void *be, uint32_t l, enum lmark m);           /* optional */
    /* optional: the rows the head reads (*src, *rows): a backend that
     * computes logits for some rows only gathers them first; default LB_X,
     * every row */
    int (*head_rows)(void *be, uint32_t n, enum lbuf *src, uint32_t *rows);
};

/* Values in a row of buffer b for a model of config c: dim, kv_dim,
 * hidden_dim or vocab. Cannot fail. */
uint32_t layers_width(const struct llm_config *c, enum lbuf b);

/* K and V of n layer inputs `in` of layer l into k and v: the K and V
 * projections, their biases, RoPE on K. The forward pass's projections and
 * every recomputation run it. again: `in` was the previous linear's input. */
int layers_kv(const struct layer_ops *o, void *be, const struct llm_arch_info *a, uint32_t l,
              uint32_t n, enum lbuf in, enum lbuf k, enum lbuf v, int again);

/* The forward pass of n rows through every layer of a model of config c,
 * then, when head, the final norm and the output head into LB_LOGITS.
 * Returns 0 or the failing operation's status. */
int layers_forward(const struct layer_ops *o, void *be, const struct llm_config *c, uint32_t n,
                   int head);

#endif
