/* The CUDA backend (backend.h's ops; contract in forward.h). Weights are
 * dequantised at load and held in FP16 on the GPU; GEMMs are cublasGemmEx
 * (FP16 inputs, FP32 accumulate and output); the rest runs in kernels/.
 * The scheduler core stays on the host, unchanged: per layer the host plans
 * every sequence, the kvstore turns the plans into tier ops, which this file
 * queues and carries out as token-level gathers/scatters, loads the device
 * reads from pinned host memory, copies down on their own stream and K/V
 * recomputation by cuBLAS, ordered by events. A prompt chunk under the
 * scheduler runs its GEMMs over all its rows, its attention position by
 * position. K and V are FP16 in every arena, as in the dense
 * cache: the device arena, the pinned host arena (the kvstore's host rows
 * are these bytes) and the staging between them; a row of kv_dim halves is
 * moved as kv_dim / 2 floats by the row gather/scatter kernels (kv_dim is
 * even: heads of even size). Every CUDA and cuBLAS call is checked and
 * names its file:line; nothing aborts. INT8 KV is not built for this
 * backend (llm_state_kvstore refuses it).
 *
 * With llm_state_pipeline (--cuda-pipeline; off by default until it has run
 * on a GPU: README "What does not work yet"):
 * a dense decode step is captured once as a CUDA graph and replayed (one
 * launch a step instead of some twenty a layer), and a tiered decode step
 * no longer waits for each layer's attention: the host plans layer l + 1
 * while the GPU runs layer l (a step's plans depend only on earlier steps'
 * attention), every layer's attention rows come down asynchronously, and
 * the scheduler observes them all once the step is done. Graphs are not
 * taken for calls with --timings; calls with attention rows for the caller,
 * prefill positions or several positions a sequence keep the eager,
 * layer-by-layer path.
 */
#include "backend.h"

#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "fit.h"
#include "gguf.h"
#include "fp16.h"
#include "kernels.h"
#include "layers.h"
#include "synth.h"

static int cu_check(cudaError_t rc, struct alisa_err *e, const char *file, int line,
                    const char *what)
{
    if (rc == cudaSuccess)
        return 0;
    return err_set(e, ALISA_EIO, "%s:%d: %s: %s", file, line, what, cudaGetErrorString(rc));
}

static int blas_check(cublasStatus_t rc, struct alisa_err *e, const char *file, int line,
                      const char *what)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return 0;
    return err_set(e, ALISA_EIO, "%s:%d: %s: %s", file, line, what, cublasGetStatusString(rc));
}

#define CUBLAS_WS_BYTES ((size_t)32 << 20)

/* Non-zero (a negative status, e set) when the call failed. */
#define CU(e, call) cu_check((call), (e), __FILE__, __LINE__, #call)
#define BL(e, call) blas_check((call), (e), __FILE__, __LINE__, #call)

/* Events of one layer, recorded every call so every elapsed time is
 * defined: start, after the QKV GEMMs and RoPE, moves (compute stream) start
 * and end, recomputation start and end, attention start and end, FFN end,
 * device->host copies start and end (their own stream). */
enum { E_START, E_QKV, E_MOVE0, E_MOVE1, E_REC0, E_REC1, E_ATT0, E_ATT1, E_FFN, E_D2H0, E_D2H1,
       E_N };

/* Tier ops queued since the last flush (host side; the row and position
 * lists are pinned so they can be copied up asynchronously). */
struct queue {
    uint32_t cap;
    uint32_t n_off, n_load, n_rec, n_store, n_thr;
    int32_t *off_row;           /* (cap) pinned: arena rows to copy down */
    void **off_hk, **off_hv;    /* (cap) host destinations */
    int32_t *load_row;          /* (cap) pinned: destination rows */
    const void **load_hk, **load_hv; /* (cap) pinned: host sources, read by the device */
    int32_t *rec_act;           /* (cap) pinned: layer-input rows */
    uint32_t *rec_pos;          /* (cap) pinned: their positions */
    int32_t *rec_row;           /* (cap) pinned: destination rows */
    int32_t *store_src;         /* (cap) pinned: activation rows of the new tokens */
    int32_t *store_row;         /* (cap) pinned: destination rows */
    int32_t *store_act;         /* (cap) pinned: layer-input rows to keep them at */
    int32_t *thr_row;           /* (cap) pinned: stored rows written through to the host */
    void **thr_hk, **thr_hv;    /* (cap) their host destinations */
};

struct cuda_state {
    const struct llm_model *m;
    uint32_t batch, max_len, rows_cap;
    cudaStream_t compute, d2h;
    cublasHandle_t blas;
    cudaEvent_t *ev;            /* (n_layers + 1, E_N); the last row times the head */
    cudaEvent_t ev_gathered;    /* offload rows gathered: the d2h stream may copy */
    /* weights */
    uint16_t *w16;              /* one allocation, FP16, carved below */
    uint16_t *emb;              /* (vocab, dim) */
    uint16_t *wq, *wo;          /* (n_layers, dim, dim) */
    uint16_t *wk, *wv;          /* (n_layers, kv_dim, dim) */
    uint16_t *w1, *w3;          /* (n_layers, hidden_dim, dim) */
    uint16_t *w2;               /* (n_layers, dim, hidden_dim) */
    uint16_t *wcls;             /* (vocab, dim); emb when tied */
    float *rms;                 /* (2 n_layers + 1, dim): attention, FFN, final norms */
    uint16_t *pos_emb;          /* learned positions (seq_len + offset, dim), else NULL */
    float *bias;                /* the norms' and projections' biases the architecture has,
                                 * one block, or NULL */
    float *ln_att_b, *ln_ffn_b, *ln_final_b, *bq, *bo, *bk, *bv, *b1, *b2; /* in bias */
    float *rope_cos, *rope_sin; /* (max_len, head_dim / 2) */
    /* activations, rows_cap rows (batch x positions), one allocation */
    float *act_block;
    float *x, *xb, *xb2, *q;    /* (rows, dim) */
    float *k, *v;               /* (rows, kv_dim) */
    float *hb, *hb2;            /* (rows, hidden_dim) */
    float *logits;              /* (rows, vocab) */
    float *scores;              /* (rows, n_heads, max_len) */
    float *att_part;            /* (kern_attn_partial_floats(head_dim)) the attention output's
                                 * chunks at a small batch, before they are summed */
    float *wmean;               /* (rows, max_len) head-mean weights */
    uint16_t *a16;              /* (rows, max(dim, hidden_dim)) FP16 GEMM input */
    const float *a16_src;       /* what a16 holds, narrowed: this buffer's first a16_rows rows
                                 * (NULL: nothing yet) */
    uint32_t a16_rows;
    int a16_fresh;              /* a16 was written by the kernel that wrote a16_src (a norm,
                                 * the GLU: narrow_alongside), so the next narrow() of it
                                 * takes it whatever its `again` says */
    int fuse;                   /* ALISA_CUDA_FUSE (default 1): few-row projections by
                                 * kern_gemv, a layer's Q/K/V and up/gate as one product, the
                                 * output and down projections adding into the residual
                                 * (cuda_layer_ops); 0: one cuBLAS GEMM a matrix and a
                                 * separate add (the sequence's plain form), the step before
                                 * 2026-11-29 (experiments/bench/cuda-scale.sh's A/B) */
    struct layer_ops ops;       /* the sequence's operations: cuda_layer_ops, without its
                                 * groups and residual products when unfused */
    uint32_t *d_tokens, *d_pos, *d_count; /* (rows) */
    int32_t *d_base, *d_idx;    /* (rows), (batch, max_len) */
    uint32_t *d_next;           /* (rows) greedy tokens (llm_forward_greedy) */
    /* host mirrors, pinned */
    void *pin_block;
    float *h_logits;            /* (rows, vocab) */
    float *h_wmean;             /* (batch, max_len) */
    uint32_t *h_tokens, *h_pos, *h_count; /* (rows) */
    int32_t *h_base, *h_dst, *h_idx;      /* (rows), (rows), (batch, max_len) */
    uint32_t *h_next;           /* (rows) */
    int32_t *d_dst;             /* (rows) dense-cache rows of this call's tokens */
    /* the dense cache, allocated on first dense call */
    uint16_t *kc, *vc;          /* (n_layers, batch, max_len, kv_dim) FP16, as HF's and
                                 * vLLM's caches */
    /* tiered: arenas and layer inputs behind the kvstore's tier ops */
    struct kvstore *ks;         /* the one kvstore made for this state */
    uint32_t n_streams, dev_cap;
    uint16_t *ak, *av;          /* (n_streams * dev_cap + batch * max_len, kv_dim) FP16: the
                                 * device arenas, then each sequence's prefill staging rows */
    uint16_t *act;              /* (n_streams * max_len, dim) kept layer inputs, FP16 (what
                                 * a recomputation's GEMMs take), in pinned host memory mapped
                                 * into the device's address space: on the host, as the
                                 * paper keeps them (ALISA.md 2), written and read by the
                                 * kernels over the link; at paper scale they outgrow the
                                 * device (OPT-30B, batch 64, 640 tokens: 28 GB) */
    uint16_t *act_host;         /* the same memory, as the host allocated it */
    struct queue qu;
    void *qu_pin;               /* the queue's pinned lists, one allocation */
    float *d_ok, *d_ov;         /* (cap, kv_dim) device staging of the offloads, FP16 rows in
                                 * the first half (read by the d2h stream while the compute
                                 * stream goes on) */
    float *d_qk, *d_qv;         /* (cap, kv_dim) device staging of recomputes and stores
                                 * (FP32) */
    float *d_qact;              /* (cap, dim) the new tokens' layer inputs, before they go to
                                 * act */
    uint16_t *d_q16;            /* (cap, dim) layer inputs gathered from act to recompute */
    int32_t *d_qrow, *d_qrow2;  /* (cap) row lists on the device */
    uint32_t *d_qpos;           /* (cap) */
    const void **d_qptr;        /* (2, cap) the loads' host sources (load_hk, load_hv) */
    float *h_qk, *h_qv;         /* (cap, kv_dim) pinned: offload copies land here (FP16 rows) */
    struct alisa_err op_err;    /* the first failure inside a tier op, reported at flush */
    float *h_dense;             /* (max_len) host scratch: an attention row spread out */
    /* the pipelined step (llm_state_pipeline) */
    int capturing;              /* enqueueing into a graph capture: no event records */
    int64_t profile_pos;        /* ALISA_CUDA_PROFILE_STEP: the one-position call at this
                                 * position runs between cudaProfilerStart and Stop (what
                                 * ncu --profile-from-start off profiles); -1: none */
    int timed;                  /* this call writes timings: the timing events are recorded */
    cudaGraphExec_t graph[3];   /* the dense decode step: logits copied down, no head, the
                                 * greedy tokens alone copied down */
    uint32_t graph_rows[3];     /* the rows each was captured for (0: none) */
    void *cublas_ws;            /* cuBLAS's workspace, fixed so a capture allocates nothing */
    float *h_rows;              /* (n_layers, batch, max_len) pinned: a tiered step's rows */
    uint32_t *step_ids;         /* (n_layers, batch, max_len) their token ids */
    uint32_t *step_count;       /* (n_layers, batch) their lengths */
    float *chunk_logits;        /* (batch, chunk_cap, vocab) host: a tiered chunk's logits in
                                 * the caller's order */
    uint32_t chunk_cap;
    /* the call in flight (enqueue), read by the layer ops (layers.h) */
    struct alisa_err *e;        /* where an op's failure is said */
    struct backend_common *cm;
    uint32_t call_pos0;
    uint32_t call_P;            /* positions a sequence (a tiered chunk's rows are
                                 * position-major: row i * batch + b) */
    uint32_t *call_ids;         /* (batch, max_len) scratch of the observed rows' ids */
    float *call_rows;           /* attention rows asked for, or NULL */
    int call_observe, call_defer;
};

static size_t rows_floats(const struct llm_config *c, uint32_t max_len)
{
    return 4 * (size_t)c->dim + 2 * (size_t)c->kv_dim + 2 * (size_t)c->hidden_dim + c->vocab +
           (size_t)c->n_heads * max_len + max_len;
}

/* Forgets the captured steps. Cannot fail. */
static void drop_graphs(struct cuda_state *s)
{
    for (int i = 0; i < 3; i++) {
        if (s->graph[i])
            cudaGraphExecDestroy(s->graph[i]);
        s->graph[i] = NULL;
        s->graph_rows[i] = 0;
    }
}

static void cuda_destroy(void *be)
{
    struct cuda_state *s = be;
    if (!s)
        return;
    /* frees are not checked: there is nothing left to do on failure */
    cudaFree(s->w16);
    cudaFree(s->rms);
    cudaFree(s->bias);
    cudaFree(s->rope_cos);
    cudaFree(s->act_block);
    cudaFree(s->a16);
    cudaFree(s->d_tokens);
    cudaFreeHost(s->pin_block);
    cudaFree(s->kc);
    cudaFree(s->vc);
    cudaFree(s->ak);
    cudaFree(s->av);
    cudaFreeHost(s->act_host);
    cudaFreeHost(s->qu_pin);
    cudaFreeHost(s->qu.off_hk);
    cudaFree(s->d_ok);
    cudaFree(s->d_qptr);
    cudaFreeHost(s->h_qk);
    free(s->h_dense);
    free(s->chunk_logits);
    drop_graphs(s);
    cudaFreeHost(s->h_rows);
    free(s->step_ids);
    free(s->step_count);
    if (s->ev)
        for (size_t i = 0; i < (size_t)(s->m->c.n_layers + 1) * E_N; i++)
            if (s->ev[i])
                cudaEventDestroy(s->ev[i]);
    free(s->ev);
    if (s->ev_gathered)
        cudaEventDestroy(s->ev_gathered);
    if (s->blas)
        cublasDestroy(s->blas);
    cudaFree(s->cublas_ws); /* after the handle that used it */
    cudaFree(s->att_part);
    if (s->compute)
        cudaStreamDestroy(s->compute);
    if (s->d2h)
        cudaStreamDestroy(s->d2h);
    free(s);
}

/* The device bytes of R rows' buffers (ensure_rows): the activations, the
 * FP16 GEMM input, the row lists. */
static void rows_bytes(const struct cuda_state *s, size_t R, size_t b[3])
{
    const struct llm_config *c = &s->m->c;
    size_t wide = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
    b[0] = R * rows_floats(c, s->max_len) * sizeof(float);
    b[1] = R * wide * sizeof(uint16_t);
    b[2] = (6 * R + (size_t)s->batch * s->max_len) * sizeof(int32_t);
}

/* s->a16 holds nothing a product may take */
static void a16_forget(struct cuda_state *s)
{
    s->a16_src = NULL;
    s->a16_fresh = 0;
}

/* Grows the per-row buffers (device and pinned) to `rows` rows. */
static int ensure_rows(struct cuda_state *s, uint32_t rows, struct alisa_err *e)
{
    if (rows <= s->rows_cap)
        return 0;
    drop_graphs(s); /* they hold the buffers' old addresses */
    const struct llm_config *c = &s->m->c;
    size_t R = rows, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim, L = s->max_len, b[3];
    rows_bytes(s, R, b);
    cudaFree(s->act_block);
    cudaFree(s->a16);
    cudaFree(s->d_tokens);
    cudaFreeHost(s->pin_block);
    s->act_block = NULL;
    s->a16 = NULL;
    a16_forget(s);
    s->d_tokens = NULL;
    s->pin_block = NULL;
    s->rows_cap = 0;
    if (CU(e, cudaMalloc((void **)&s->act_block, b[0])) ||
        CU(e, cudaMalloc((void **)&s->a16, b[1])) ||
        CU(e, cudaMalloc((void **)&s->d_tokens, b[2])) ||
        CU(e, cudaHostAlloc(&s->pin_block, (R * c->vocab + (size_t)s->batch * L) * sizeof(float) +
                            b[2], cudaHostAllocDefault))) /* the row lists' host mirrors */
        return ALISA_ENOMEM;
    float *p = s->act_block;
    s->x = p; p += R * d;
    s->xb = p; p += R * d;
    s->xb2 = p; p += R * d;
    s->q = p; p += R * d;
    s->k = p; p += R * kv;
    s->v = p; p += R * kv;
    s->hb = p; p += R * hd;
    s->hb2 = p; p += R * hd;
    s->logits = p; p += R * c->vocab;
    s->scores = p; p += R * c->n_heads * L;
    s->wmean = p;
    uint32_t *u = s->d_tokens;
    s->d_pos = u + R;
    s->d_count = u + 2 * R;
    s->d_base = (int32_t *)(u + 3 * R);
    s->d_dst = (int32_t *)(u + 4 * R);
    s->d_idx = (int32_t *)(u + 5 * R);
    s->d_next = u + 5 * R + (size_t)s->batch * L;
    float *h = s->pin_block;
    s->h_logits = h;
    s->h_wmean = h + R * c->vocab;
    uint32_t *hu = (uint32_t *)(s->h_wmean + (size_t)s->batch * L);
    s->h_tokens = hu;
    s->h_pos = hu + R;
    s->h_count = hu + 2 * R;
    s->h_base = (int32_t *)(hu + 3 * R);
    s->h_dst = (int32_t *)(hu + 4 * R);
    s->h_idx = (int32_t *)(hu + 5 * R);
    s->h_next = hu + 5 * R + (size_t)s->batch * L;
    s->rows_cap = rows;
    return 0;
}

/* n matrices (each as the model holds it: FP32 or the file's blocks) to
 * FP16 at dst on the device, one after another, through host buffers row
 * (cols floats) and tmp (one matrix); a lazy synthetic model's matrices
 * (NULL data) are drawn on the device instead (kernels/synth.h). */
static int upload16(struct cuda_state *s, uint16_t *dst, const struct qmat *q, size_t n,
                    float *row, uint16_t *tmp, struct alisa_err *e)
{
    const float scale = fp16_to_float(fp16_from_float(SYNTH_A / 127.0f));
    for (size_t i = 0; i < n; i++) {
        size_t cols = q[i].cols, count = (size_t)q[i].rows * cols;
        if (!q[i].data) {
            int64_t id = llm_synthetic_id(s->m, &q[i]);
            if (id < 0)
                return err_set(e, ALISA_EINVAL, "%s: a matrix without weights", s->m->name);
            if (CU(e, kern_synth_f16(dst, q[i].type == GGML_Q8_0, q[i].rows, q[i].cols,
                                     s->m->synth_seed, (uint64_t)id, scale, s->compute)))
                return ALISA_EIO;
            dst += count;
            continue;
        }
        for (uint32_t r = 0; r < q[i].rows; r++) {
            qmat_row(&q[i], r, row);
            for (size_t j = 0; j < cols; j++)
                tmp[(size_t)r * cols + j] = fp16_from_float(row[j]);
        }
        if (CU(e, cudaMemcpy(dst, tmp, count * sizeof *tmp, cudaMemcpyHostToDevice)))
            return ALISA_EIO;
        dst += count;
    }
    return 0;
}

/* n floats at src to the device at dst. */
static int up(float *dst, const float *src, size_t n, struct alisa_err *e)
{
    return CU(e, cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice)) ? ALISA_EIO : 0;
}

static int upload_weights(struct cuda_state *s, struct alisa_err *e)
{
    const struct llm_config *c = &s->m->c;
    const struct llm_weights *w = &s->m->w;
    size_t L = c->n_layers, d = c->dim, kv = c->kv_dim, hd = c->hidden_dim, V = c->vocab;
    const struct llm_arch_info *a = llm_arch_info(c->arch);
    const int gated = a->act == LLM_ACT_SWIGLU, learned = a->positions == LLM_POS_LEARNED;
    int tied = s->m->synth_lazy ? s->m->synth_tied : w->wcls.data == w->token_embedding.data;
    size_t P = learned ? (size_t)c->seq_len + a->pos_offset : 0;
    size_t sizes[10] = {V * d, L * d * d, L * kv * d, L * kv * d, L * d * d, L * hd * d,
                        L * d * hd, gated ? L * hd * d : 0, tied ? 0 : V * d, P * d};
    const struct qmat *src[10] = {&w->token_embedding, w->wq, w->wk, w->wv, w->wo, w->w1, w->w2,
                                  w->w3, &w->wcls, &w->pos_embedding};
    const size_t count[10] = {1, L, L, L, L, L, L, gated ? L : 0, tied ? 0 : 1, learned ? 1 : 0};
    uint16_t **dst[10] = {&s->emb, &s->wq, &s->wk, &s->wv, &s->wo, &s->w1, &s->w2, &s->w3,
                          &s->wcls, &s->pos_emb};
    size_t total = 0, biggest = V * d > hd * d ? V * d : hd * d;
    biggest = P * d > biggest ? P * d : biggest; /* OPT's positions may outnumber a tiny vocabulary */
    for (int i = 0; i < 10; i++)
        total += sizes[i];
    if (s->m->synth_lazy)
        biggest = 1; /* drawn on the device: no host staging */
    if (CU(e, cudaMalloc((void **)&s->w16, total * sizeof(uint16_t))))
        return ALISA_ENOMEM;
    uint16_t *tmp = malloc(biggest * sizeof *tmp);
    float *row = malloc((d > hd ? d : hd) * sizeof *row);
    if (!tmp || !row) {
        free(tmp), free(row);
        return err_set(e, ALISA_ENOMEM, "out of memory converting the weights to FP16");
    }
    uint16_t *p = s->w16;
    int rc = 0;
    for (int i = 0; i < 10 && !rc; i++) {
        *dst[i] = sizes[i] ? p : NULL;
        rc = upload16(s, p, src[i], count[i], row, tmp, e);
        p += sizes[i];
    }
    if (!rc && CU(e, cudaStreamSynchronize(s->compute)))
        rc = ALISA_EIO;
    free(tmp);
    free(row);
    if (tied)
        s->wcls = s->emb;
    if (rc)
        return rc;
    /* norms stay FP32, as the CPU backend's */
    if (CU(e, cudaMalloc((void **)&s->rms, (2 * L + 1) * d * sizeof(float))) ||
        up(s->rms, w->rms_att, L * d, e) || up(s->rms + L * d, w->rms_ffn, L * d, e) ||
        up(s->rms + 2 * L * d, w->rms_final, d, e))
        return ALISA_EIO;
    /* the biases the architecture has (llm_arch_info), one block: the
     * LayerNorms', then q, k, v, o, fc1, fc2 as present */
    struct { float **dst; const float *src; size_t n; int has; } part[] = {
        {&s->ln_att_b, w->ln_att_b, L * d, a->norm == LLM_NORM_LAYER},
        {&s->ln_ffn_b, w->ln_ffn_b, L * d, a->norm == LLM_NORM_LAYER},
        {&s->ln_final_b, w->ln_final_b, d, a->norm == LLM_NORM_LAYER},
        {&s->bq, w->bq, L * d, a->qkv_bias},
        {&s->bk, w->bk, L * kv, a->qkv_bias},
        {&s->bv, w->bv, L * kv, a->qkv_bias},
        {&s->bo, w->bo, L * d, a->out_bias},
        {&s->b1, w->b1, L * hd, a->ffn_bias},
        {&s->b2, w->b2, L * d, a->ffn_bias},
    };
    const size_t parts = sizeof part / sizeof part[0];
    size_t nb = 0;
    for (size_t i = 0; i < parts; i++)
        nb += part[i].has ? part[i].n : 0;
    if (!nb)
        return 0;
    if (CU(e, cudaMalloc((void **)&s->bias, nb * sizeof(float))))
        return ALISA_ENOMEM;
    float *b = s->bias;
    for (size_t i = 0; i < parts; i++) {
        if (!part[i].has)
            continue;
        *part[i].dst = b;
        if (up(b, part[i].src, part[i].n, e))
            return ALISA_EIO;
        b += part[i].n;
    }
    return 0;
}

/* The layer sequence's operations on this backend (below enqueue's
 * helpers; a state runs its copy, s->ops, and flush's recomputation runs
 * layers_kv with it). */
static const struct layer_ops cuda_layer_ops;

/* ALISA_CUDA_FUSE: unset, empty or 1: fused (1 in *on); 0: unfused. */
static int fuse_setting(int *on, struct alisa_err *e)
{
    const char *v = getenv("ALISA_CUDA_FUSE");
    *on = 1;
    if (!v || !*v || !strcmp(v, "1"))
        return 0;
    if (!strcmp(v, "0")) {
        *on = 0;
        return 0;
    }
    return err_set(e, ALISA_EINVAL, "ALISA_CUDA_FUSE: '%s' is not 0 or 1", v);
}

static int cuda_create(void **be, const struct backend_common *cm, struct alisa_err *e)
{
    *be = NULL;
    const struct llm_config *c = &cm->m->c;
    struct cuda_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    s->m = cm->m;
    s->batch = cm->batch;
    s->max_len = cm->max_len;
    s->profile_pos = -1;
    if (fuse_setting(&s->fuse, e)) {
        free(s);
        return ALISA_EINVAL;
    }
    s->ops = cuda_layer_ops;
    if (!s->fuse)
        s->ops.linear_group = NULL, s->ops.linear_residual = NULL;
    const char *prof = getenv("ALISA_CUDA_PROFILE_STEP");
    if (prof && *prof) {
        char *end;
        long long v = strtoll(prof, &end, 10);
        if (*end || v < 0 || v >= (long long)s->max_len) {
            free(s);
            return err_set(e, ALISA_EINVAL, "ALISA_CUDA_PROFILE_STEP: '%s' is not a position "
                           "below the state's %u", prof, cm->max_len);
        }
        s->profile_pos = v;
    }
    size_t half = c->head_dim / 2, n_ev = (size_t)(c->n_layers + 1) * E_N;
    float *tables = malloc(2 * (size_t)s->max_len * half * sizeof(float));
    int rc = ALISA_EIO;
    if (!tables || !(s->ev = calloc(n_ev, sizeof *s->ev)) ||
        !(s->h_dense = malloc(s->max_len * sizeof *s->h_dense))) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory");
        goto fail;
    }
    if (CU(e, cudaSetDevice(0)) || CU(e, cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking)) ||
        CU(e, cudaStreamCreateWithFlags(&s->d2h, cudaStreamNonBlocking)) ||
        BL(e, cublasCreate(&s->blas)) || BL(e, cublasSetStream(s->blas, s->compute)) ||
        CU(e, cudaEventCreateWithFlags(&s->ev_gathered, cudaEventDisableTiming)))
        goto fail;
    for (size_t i = 0; i < n_ev; i++)
        if (CU(e, cudaEventCreate(&s->ev[i])))
            goto fail;
    /* a workspace of our own (after cublasSetStream, which resets it), in
     * both forms so both pick the same GEMM algorithms: a graph capture must
     * not allocate (32 MiB, the cuBLAS reference's advice for Hopper under
     * cublasSetWorkspace) */
    if (CU(e, cudaMalloc(&s->cublas_ws, CUBLAS_WS_BYTES)) ||
        BL(e, cublasSetWorkspace(s->blas, s->cublas_ws, CUBLAS_WS_BYTES)) ||
        CU(e, cudaMalloc((void **)&s->att_part,
                         kern_attn_partial_floats(c->head_dim) * sizeof(float))))
        goto fail;
    if ((rc = upload_weights(s, e)))
        goto fail;
    rc = ALISA_EIO;
    llm_rope_tables(c, s->max_len, tables, tables + (size_t)s->max_len * half);
    if (CU(e, cudaMalloc((void **)&s->rope_cos, 2 * (size_t)s->max_len * half * sizeof(float))) ||
        CU(e, cudaMemcpy(s->rope_cos, tables, 2 * (size_t)s->max_len * half * sizeof(float),
                         cudaMemcpyHostToDevice)))
        goto fail;
    s->rope_sin = s->rope_cos + (size_t)s->max_len * half;
    if ((rc = ensure_rows(s, s->batch, e)))
        goto fail;
    free(tables);
    *be = s;
    return 0;
fail:
    free(tables);
    cuda_destroy(s);
    return rc ? rc : ALISA_EIO;
}

/* ---- tier ops: queued on the host, carried out by flush ---- */

static void *tier_host_alloc(void *ctx, size_t bytes)
{
    void *p = NULL;
    return cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess ? p : NULL;
}

static void tier_host_free(void *ctx, void *p) { cudaFreeHost(p); }

static int32_t arena_row(const struct cuda_state *s, uint32_t stream, uint32_t slot)
{
    return (int32_t)((size_t)stream * s->dev_cap + slot);
}

/* Room in the queue, else the op is recorded as failed (reported at flush;
 * the queue is sized for a whole layer's moves, so this is a bug). */
static int room(struct cuda_state *s, uint32_t n)
{
    if (n < s->qu.cap)
        return 1;
    if (!s->op_err.msg[0])
        err_set(&s->op_err, ALISA_EINVAL, "the CUDA backend's move queue (%u) overflowed",
                s->qu.cap);
    return 0;
}

/* Appends a device slot bound for host bytes hk, hv to one of the queue's
 * lists down (offloads, write-throughs): rows, hks, hvs, *n. */
static void queue_down(struct cuda_state *s, int32_t *rows, void **hks, void **hvs, uint32_t *n,
                       uint32_t stream, uint32_t dev_slot, void *hk, void *hv)
{
    if (!room(s, *n))
        return;
    rows[*n] = arena_row(s, stream, dev_slot);
    hks[*n] = hk;
    hvs[(*n)++] = hv;
}

static void tier_offload(void *ctx, uint32_t stream, uint32_t dev_slot, void *hk, void *hv)
{
    struct cuda_state *s = ctx;
    struct queue *q = &s->qu;
    queue_down(s, q->off_row, q->off_hk, q->off_hv, &q->n_off, stream, dev_slot, hk, hv);
}

static void queue_load(struct cuda_state *s, const void *hk, const void *hv, int32_t row)
{
    struct queue *q = &s->qu;
    if (!room(s, q->n_load))
        return;
    q->load_row[q->n_load] = row;
    q->load_hk[q->n_load] = hk;
    q->load_hv[q->n_load++] = hv;
}

static void tier_load(void *ctx, uint32_t stream, const void *hk, const void *hv, uint32_t dev_slot)
{
    struct cuda_state *s = ctx;
    queue_load(s, hk, hv, arena_row(s, stream, dev_slot));
}

static void queue_recompute(struct cuda_state *s, uint32_t stream, uint32_t t, int32_t row)
{
    struct queue *q = &s->qu;
    if (!room(s, q->n_rec))
        return;
    q->rec_act[q->n_rec] = (int32_t)((size_t)stream * s->max_len + t);
    q->rec_pos[q->n_rec] = t;
    q->rec_row[q->n_rec++] = row;
}

static void tier_recompute(void *ctx, uint32_t stream, uint32_t layer, uint32_t t, uint32_t dev_slot)
{
    struct cuda_state *s = ctx;
    queue_recompute(s, stream, t, arena_row(s, stream, dev_slot));
}

static void tier_store(void *ctx, uint32_t stream, uint32_t pos, uint32_t dev_slot, const float *k,
                       const float *v, const float *act)
{
    struct cuda_state *s = ctx;
    struct queue *q = &s->qu;
    if (!room(s, q->n_store))
        return;
    /* k, v and act are this call's rows of s->k, s->v and s->xb */
    q->store_src[q->n_store] = (int32_t)((k - s->k) / s->m->c.kv_dim);
    q->store_row[q->n_store] = arena_row(s, stream, dev_slot);
    q->store_act[q->n_store++] = (int32_t)((size_t)stream * s->max_len + pos);
}

static void tier_through(void *ctx, uint32_t stream, uint32_t dev_slot, void *hk, void *hv)
{
    struct cuda_state *s = ctx;
    struct queue *q = &s->qu;
    queue_down(s, q->thr_row, q->thr_hk, q->thr_hv, &q->n_thr, stream, dev_slot, hk, hv);
}

static int cuda_kvstore(void *be, uint32_t n_streams, uint32_t max_len, uint32_t dev_cap,
                        uint32_t host_cap, int int8, struct kvstore **out, struct alisa_err *e)
{
    struct cuda_state *s = be;
    const struct llm_config *c = &s->m->c;
    *out = NULL;
    if (int8)
        return err_set(e, ALISA_EINVAL, "--kv-int8 on the cuda backend: not built yet (the INT8 "
                       "kernels exist and are tested; the arenas do not use them)");
    if (s->ks)
        return err_set(e, ALISA_EINVAL, "the cuda backend makes one kvstore per state");
    if (n_streams != s->batch * c->n_layers || max_len != s->max_len)
        return err_set(e, ALISA_EINVAL, "a kvstore of %u streams x %u tokens for a state of %u "
                       "sequences x %u layers x %u tokens", n_streams, max_len, s->batch,
                       c->n_layers, s->max_len);
    size_t kv = c->kv_dim, d = c->dim;
    if (kv % 2 || d % 2)
        return err_set(e, ALISA_EINVAL, "the cuda backend's arenas move FP16 rows as pairs: "
                       "%s %zu is odd", kv % 2 ? "kv_dim" : "dim", kv % 2 ? kv : d);
    size_t rows = (size_t)n_streams * dev_cap + (size_t)s->batch * max_len;
    uint32_t cap = s->batch * max_len + 1;
    s->n_streams = n_streams;
    s->dev_cap = dev_cap;
    s->qu.cap = cap;
    size_t pin = (size_t)cap * 10 * sizeof(int32_t);
    /* refused before any allocation when it cannot fit (issue 39): the
     * arenas (dev_cap slots a stream, visit staging included, plus the
     * prefill rows), the move staging and a prompt chunk's activation rows
     * (batch x LLM_CHUNK, its GEMMs run over every row; what ensure_rows
     * adds to the rows held), against what the device has free after the
     * weights and activations */
    size_t arena_b = 2 * rows * kv * sizeof(uint16_t);
    size_t ok_b = (size_t)cap * (4 * kv + d) * sizeof(float) + (size_t)cap * d * sizeof(uint16_t) +
                  3 * (size_t)cap * sizeof(int32_t); /* d_ok's block, carved below */
    size_t stage_b = ok_b + 2 * (size_t)cap * sizeof(void *);
    size_t chunk_b = 0, want[3], held[3];
    uint32_t chunk_rows = s->batch * (max_len < LLM_CHUNK ? max_len : LLM_CHUNK);
    if (chunk_rows > s->rows_cap) {
        rows_bytes(s, chunk_rows, want);
        rows_bytes(s, s->rows_cap, held);
        chunk_b = want[0] + want[1] + want[2] - held[0] - held[1] - held[2];
    }
    size_t free_b = 0, total_b = 0;
    if (CU(e, cudaMemGetInfo(&free_b, &total_b)))
        return ALISA_EIO;
    const size_t margin_b = (size_t)256 << 20; /* cuBLAS and the runtime's later needs */
    if (arena_b + stage_b + chunk_b + margin_b > free_b)
        return err_set(e, ALISA_ENOMEM, "the tiered KV does not fit the device: arenas %.2f GB "
                       "(%u streams x %u slots, with any visit staging, + %u x %u prefill rows) + "
                       "move staging %.2f GB + a prompt chunk's activations %.2f GB + 0.27 GB "
                       "margin, %.2f GB free of %.2f GB after the weights and activations; lower "
                       "--gpu-kv-bytes by at least %.2f GB",
                       arena_b / 1e9, n_streams, dev_cap, s->batch, max_len, stage_b / 1e9,
                       chunk_b / 1e9, free_b / 1e9, total_b / 1e9,
                       (arena_b + stage_b + chunk_b + margin_b - free_b) / 1e9);
    if (CU(e, cudaMalloc((void **)&s->ak, rows * kv * sizeof(uint16_t))) ||
        CU(e, cudaMalloc((void **)&s->av, rows * kv * sizeof(uint16_t))) ||
        CU(e, cudaMemset(s->ak, 0, rows * kv * sizeof(uint16_t))) ||
        CU(e, cudaMemset(s->av, 0, rows * kv * sizeof(uint16_t))) ||
        CU(e, cudaHostAlloc((void **)&s->act_host, (size_t)n_streams * max_len * d * sizeof(uint16_t),
                            cudaHostAllocMapped)) ||
        CU(e, cudaHostGetDevicePointer((void **)&s->act, s->act_host, 0)) ||
        CU(e, cudaHostAlloc(&s->qu_pin, pin, cudaHostAllocDefault)) ||
        CU(e, cudaMalloc((void **)&s->d_ok, ok_b)) ||
        CU(e, cudaHostAlloc((void **)&s->h_qk, (size_t)cap * 2 * kv * sizeof(float),
                            cudaHostAllocDefault)) ||
        CU(e, cudaHostAlloc((void **)&s->qu.off_hk, (size_t)cap * 6 * sizeof(void *),
                            cudaHostAllocDefault)) ||
        CU(e, cudaMalloc((void **)&s->d_qptr, 2 * (size_t)cap * sizeof(void *))))
        return ALISA_ENOMEM;
    struct queue *q = &s->qu;
    q->off_hv = q->off_hk + cap;
    q->load_hk = (const void **)(q->off_hk + 2 * (size_t)cap);
    q->load_hv = (const void **)(q->off_hk + 3 * (size_t)cap);
    q->thr_hk = q->off_hk + 4 * (size_t)cap;
    q->thr_hv = q->off_hk + 5 * (size_t)cap;
    int32_t *p = s->qu_pin;
    q->off_row = p; p += cap;
    q->load_row = p; p += cap;
    q->rec_act = p; p += cap;
    q->rec_pos = (uint32_t *)p; p += cap;
    q->rec_row = p; p += cap;
    q->store_src = p; p += cap;
    q->store_row = p; p += cap;
    q->store_act = p; p += cap;
    q->thr_row = p;
    s->d_ov = s->d_ok + (size_t)cap * kv;
    s->d_qk = s->d_ov + (size_t)cap * kv;
    s->d_qv = s->d_qk + (size_t)cap * kv;
    s->d_qact = s->d_qv + (size_t)cap * kv;
    s->d_q16 = (uint16_t *)(s->d_qact + (size_t)cap * d);
    s->d_qrow = (int32_t *)(s->d_q16 + (size_t)cap * d);
    s->d_qrow2 = s->d_qrow + cap;
    s->d_qpos = (uint32_t *)(s->d_qrow2 + cap);
    s->h_qv = s->h_qk + (size_t)cap * kv;
    struct kv_tier_ops ops = {
        .ctx = s,
        .row_bytes = kv * sizeof(uint16_t),
        .host_alloc = tier_host_alloc,
        .host_free = tier_host_free,
        .offload = tier_offload,
        .load = tier_load,
        .recompute = tier_recompute,
        .store = tier_store,
        .through = tier_through,
    };
    int rc = kvstore_create_tiered(out, c, n_streams, max_len, dev_cap, host_cap, &ops, e);
    if (!rc)
        s->ks = *out;
    return rc;
}

/* ---- the forward pass ---- */

/* y (R, out) = x16 (R, in) W^T + beta y with W (out, in) and the input
 * FP16 (s->a16 after narrow's conversion, or the gathered layer inputs of a
 * recomputation); beta 0 or 1 (the residual folded in). Row-major y is
 * column-major (out, R) = W (column-major (in, out))^T x16. */
static int gemm16(struct cuda_state *s, float *y, const uint16_t *x16, const uint16_t *w,
                  uint32_t R, uint32_t out, uint32_t in, float beta, struct alisa_err *e)
{
    const float one = 1.0f;
    return BL(e, cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)R, (int)in, &one,
                              w, CUDA_R_16F, (int)in, x16, CUDA_R_16F, (int)in, &beta, y,
                              CUDA_R_32F, (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* s->a16 = x (R, in) narrowed to FP16, unless it already holds it (again:
 * the caller's previous product read the same rows, and they were
 * narrowed then). */
static int narrow(struct cuda_state *s, const float *x, uint32_t R, uint32_t in, int again,
                  struct alisa_err *e)
{
    const int fresh = s->a16_fresh;
    s->a16_fresh = 0;
    if ((again || fresh) && s->a16_src == x && s->a16_rows == R)
        return 0;
    s->a16_src = NULL;
    if (CU(e, kern_f32_to_f16(s->a16, x, (size_t)R * in, s->compute)))
        return ALISA_EIO;
    s->a16_src = x;
    s->a16_rows = R;
    return 0;
}

/* Where a kernel about to write o (R, width) should also write it narrowed
 * to FP16: s->a16, when the product that reads o next goes through cuBLAS
 * (a fused run beyond kern_gemv's rows), marked so that product's narrow()
 * takes it instead of a kern_f32_to_f16 launch; else NULL. Unfused runs
 * keep the step as it was (a separate narrowing). */
static uint16_t *narrow_alongside(struct cuda_state *s, const float *o, uint32_t R)
{
    if (!s->fuse || R <= KERN_GEMV_ROWS) {
        s->a16_fresh = 0;
        return NULL;
    }
    s->a16_src = o;
    s->a16_rows = R;
    s->a16_fresh = 1;
    return s->a16;
}

/* p was just written by a kernel that did not narrow it (or a launch that
 * would have failed): an FP16 copy of it in s->a16 is stale now. Every op
 * that writes a buffer in place calls it, so a step inserted between a
 * norm and its product costs a narrowing, never a stale input. */
static void a16_wrote(struct cuda_state *s, const float *p)
{
    if (s->a16_src == p)
        a16_forget(s);
}

/* y (R, out) = x (R, in) W^T (+ y with add): kern_gemv for a few rows
 * (fused runs), else x narrowed to FP16 and cuBLAS. */
static int gemm(struct cuda_state *s, float *y, const float *x, const uint16_t *w, uint32_t R,
                uint32_t out, uint32_t in, int again, int add, struct alisa_err *e)
{
    if (s->fuse && kern_gemv_fits(R, in, x, w, 0)) {
        a16_forget(s); /* narrow's cache holds only what the last narrowed product read */
        return CU(e, kern_gemv(y, 0, x, w, 0, 1, R, out, in, add, s->compute)) ? ALISA_EIO : 0;
    }
    if (narrow(s, x, R, in, again, e))
        return ALISA_EIO;
    return gemm16(s, y, s->a16, w, R, out, in, add ? 1.0f : 0.0f, e);
}

/* o (R, dim) = the architecture's norm of x: RMSNorm (LLaMA) or LayerNorm
 * with its bias (OPT); which 0, 1, 2: layer l's attention and FFN norms,
 * the final one. */
static int norm(struct cuda_state *s, float *o, const float *x, uint32_t l, int which, uint32_t R,
                struct alisa_err *e)
{
    const struct llm_config *c = &s->m->c;
    size_t d = c->dim, at = which == 2 ? 2 * (size_t)c->n_layers * d
                                       : ((size_t)which * c->n_layers + l) * d;
    uint16_t *o16 = narrow_alongside(s, o, R);
    const float *b = which == 2 ? s->ln_final_b : (which ? s->ln_ffn_b : s->ln_att_b) + l * d;
    if (llm_arch_info(c->arch)->norm == LLM_NORM_RMS
            ? CU(e, kern_rmsnorm(o, o16, x, s->rms + at, R, (uint32_t)d, c->norm_eps, s->compute))
            : CU(e, kern_layernorm(o, o16, x, s->rms + at, b, R, (uint32_t)d, c->norm_eps,
                                   s->compute))) {
        a16_wrote(s, o);
        return ALISA_EIO;
    }
    return 0;
}

/* cudaEventRecord, or nothing while a step is being captured (the graph
 * replays without per-layer timings). */
/* Records an event another stream or the host waits on (not while
 * capturing: a graph is dense, nobody waits). */
static cudaError_t rec(const struct cuda_state *s, cudaEvent_t ev, cudaStream_t st)
{
    return s->capturing ? cudaSuccess : cudaEventRecord(ev, st);
}

/* Records an event only the timings read: skipped unless the call writes
 * timings (some 350 API calls a LLaMA-7B step otherwise). */
static cudaError_t tick(const struct cuda_state *s, cudaEvent_t ev, cudaStream_t st)
{
    return s->timed ? rec(s, ev, st) : cudaSuccess;
}

/* Carries out the queued tier ops of layer l on the device: offloads are
 * gathered first (their slots may be reused by what follows), copied down on
 * the d2h stream; loads are read by the device from their pinned host
 * slots into their arena rows (kern_rows_from_host); recomputations are
 * a gather of layer inputs, two GEMMs, RoPE and a scatter; new tokens are
 * copied in last, and those written through to the host copied down after
 * them. Host destinations of the offloads and
 * write-throughs are written by finish(). */
static int flush(struct cuda_state *s, uint32_t l, cudaEvent_t *ev, struct alisa_err *e)
{
    const struct llm_config *c = &s->m->c;
    struct queue *q = &s->qu;
    /* an FP16 row moves as kv / 2 floats (pairs of halves) */
    const size_t kv = c->kv_dim, d = c->dim, row = kv * sizeof(uint16_t);
    const uint32_t pairs = (uint32_t)(kv / 2);
    float *ak2 = (float *)s->ak, *av2 = (float *)s->av;
    cudaStream_t cs = s->compute;
    if (s->op_err.msg[0]) {
        *e = s->op_err;
        return ALISA_EINVAL;
    }
    if (CU(e, rec(s, ev[E_MOVE0], cs)))
        return ALISA_EIO;
    if (q->n_off) {
        uint32_t n = q->n_off;
        /* D2H0 after the wait: the copy engine's time alone */
        if (CU(e, cudaMemcpyAsync(s->d_qrow, q->off_row, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, kern_gather_rows(s->d_ok, ak2, s->d_qrow, n, pairs, cs)) ||
            CU(e, kern_gather_rows(s->d_ov, av2, s->d_qrow, n, pairs, cs)) ||
            CU(e, cudaEventRecord(s->ev_gathered, cs)) ||
            CU(e, cudaStreamWaitEvent(s->d2h, s->ev_gathered, 0)) ||
            CU(e, tick(s, ev[E_D2H0], s->d2h)) ||
            CU(e, cudaMemcpyAsync(s->h_qk, s->d_ok, n * row, cudaMemcpyDeviceToHost, s->d2h)) ||
            CU(e, cudaMemcpyAsync(s->h_qv, s->d_ov, n * row, cudaMemcpyDeviceToHost, s->d2h)))
            return ALISA_EIO;
    } else if (CU(e, tick(s, ev[E_D2H0], s->d2h))) {
        return ALISA_EIO;
    }
    if (CU(e, rec(s, ev[E_D2H1], s->d2h)))
        return ALISA_EIO;
    if (q->n_load) {
        /* the device reads each row from its pinned host slot into its
         * arena row: one pass over the link, nothing staged on the host.
         * The host writes those slots (and the pinned lists copied up here)
         * again only after this layer's attention began (the waits of
         * observe_layer, layer_handoff, and finish in tiered_layer's prompt
         * branch), so they hold still until then. */
        uint32_t n = q->n_load;
        const void **pk = s->d_qptr, **pv = s->d_qptr + q->cap;
        if (CU(e, cudaMemcpyAsync(s->d_qrow2, q->load_row, n * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, cs)) ||
            CU(e, cudaMemcpyAsync(pk, q->load_hk, n * sizeof(void *), cudaMemcpyHostToDevice,
                                  cs)) ||
            CU(e, cudaMemcpyAsync(pv, q->load_hv, n * sizeof(void *), cudaMemcpyHostToDevice,
                                  cs)) ||
            CU(e, kern_rows_from_host(s->ak, s->d_qrow2, pk, n, (uint32_t)row, cs)) ||
            CU(e, kern_rows_from_host(s->av, s->d_qrow2, pv, n, (uint32_t)row, cs)))
            return ALISA_EIO;
    }
    if (CU(e, tick(s, ev[E_REC0], cs)))
        return ALISA_EIO;
    if (q->n_rec) {
        uint32_t n = q->n_rec;
        if (CU(e, cudaMemcpyAsync(s->d_qrow, q->rec_act, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, cudaMemcpyAsync(s->d_qrow2, q->rec_row, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, cudaMemcpyAsync(s->d_qpos, q->rec_pos, n * sizeof(uint32_t), cudaMemcpyHostToDevice, cs)) ||
            /* FP16 rows move as d / 2 floats (pairs of halves) */
            CU(e, kern_gather_rows((float *)s->d_q16, (const float *)s->act, s->d_qrow, n,
                                   (uint32_t)(d / 2), cs)))
            return ALISA_EIO;
        /* the forward pass's own K/V step (layers_kv) on the gathered inputs */
        s->e = e;
        if (layers_kv(&s->ops, s, llm_arch_info(c->arch), l, n, LB_REC_IN, LB_REC_K,
                      LB_REC_V, 0) ||
            CU(e, kern_scatter_rows16(s->ak, s->d_qrow2, s->d_qk, n, (uint32_t)kv, cs)) ||
            CU(e, kern_scatter_rows16(s->av, s->d_qrow2, s->d_qv, n, (uint32_t)kv, cs)))
            return ALISA_EIO;
    }
    if (CU(e, tick(s, ev[E_REC1], cs)))
        return ALISA_EIO;
    if (q->n_store) {
        uint32_t n = q->n_store;
        int32_t *src = s->d_qrow, *dst = s->d_qrow2, *act = (int32_t *)s->d_qpos;
        if (CU(e, cudaMemcpyAsync(src, q->store_src, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, cudaMemcpyAsync(dst, q->store_row, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, cudaMemcpyAsync(act, q->store_act, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, kern_gather_rows(s->d_qk, s->k, src, n, (uint32_t)kv, cs)) ||
            CU(e, kern_scatter_rows16(s->ak, dst, s->d_qk, n, (uint32_t)kv, cs)) ||
            CU(e, kern_gather_rows(s->d_qv, s->v, src, n, (uint32_t)kv, cs)) ||
            CU(e, kern_scatter_rows16(s->av, dst, s->d_qv, n, (uint32_t)kv, cs)) ||
            CU(e, kern_gather_rows(s->d_qact, s->xb, src, n, (uint32_t)d, cs)) ||
            CU(e, kern_scatter_rows16(s->act, act, s->d_qact, n, (uint32_t)d, cs)))
            return ALISA_EIO;
    }
    if (q->n_thr) {
        /* written through: the rows just stored, gathered behind this
         * flush's offloads in the staging rows and copied down on the
         * compute stream (a few rows a layer; finish() writes them) */
        uint32_t n = q->n_thr, at = q->n_off;
        float *dk = s->d_ok + (size_t)at * pairs, *dv = s->d_ov + (size_t)at * pairs;
        if (CU(e, cudaMemcpyAsync(s->d_qrow, q->thr_row, n * sizeof(int32_t), cudaMemcpyHostToDevice, cs)) ||
            CU(e, kern_gather_rows(dk, ak2, s->d_qrow, n, pairs, cs)) ||
            CU(e, kern_gather_rows(dv, av2, s->d_qrow, n, pairs, cs)) ||
            CU(e, cudaMemcpyAsync((char *)s->h_qk + (size_t)at * row, dk, n * row,
                                  cudaMemcpyDeviceToHost, cs)) ||
            CU(e, cudaMemcpyAsync((char *)s->h_qv + (size_t)at * row, dv, n * row,
                                  cudaMemcpyDeviceToHost, cs)))
            return ALISA_EIO;
    }
    if (CU(e, tick(s, ev[E_MOVE1], cs)))
        return ALISA_EIO;
    q->n_load = q->n_rec = q->n_store = 0; /* offloads wait for finish() */
    return 0;
}

/* Writes the offloaded and written-through rows that have come down (h_qk,
 * h_qv) to their host slots and empties both queues; their copies must be
 * complete. */
static void drain_offloads(struct cuda_state *s)
{
    struct queue *q = &s->qu;
    size_t row = s->m->c.kv_dim * sizeof(uint16_t);
    for (uint32_t i = 0; i < q->n_off; i++) {
        memcpy(q->off_hk[i], (const char *)s->h_qk + i * row, row);
        memcpy(q->off_hv[i], (const char *)s->h_qv + i * row, row);
    }
    for (uint32_t i = 0; i < q->n_thr; i++) { /* behind the offloads' rows (flush) */
        memcpy(q->thr_hk[i], (const char *)s->h_qk + (q->n_off + i) * row, row);
        memcpy(q->thr_hv[i], (const char *)s->h_qv + (q->n_off + i) * row, row);
    }
    q->n_off = q->n_thr = 0;
}

/* Waits for the compute stream and the offloads' copies, then writes the
 * offloaded rows to their host slots. */
static int finish(struct cuda_state *s, struct alisa_err *e)
{
    if (CU(e, cudaStreamSynchronize(s->compute)) || CU(e, cudaStreamSynchronize(s->d2h)))
        return ALISA_EIO;
    drain_offloads(s);
    return 0;
}

/* Before the host plans layer l of a pipelined step: what layer l - 1 (its
 * events prev) left in the host buffers every layer shares must have been
 * read. Its row lists and attention index lists were uploaded, and its
 * loads read from their host slots, before its attention began (E_ATT0);
 * its offloads were down by
 * E_D2H1 and go to their host slots now. The host thus runs at most one
 * layer ahead of the GPU, planning layer l while the GPU computes l - 1. */
static int layer_handoff(struct cuda_state *s, const cudaEvent_t *prev, struct alisa_err *e)
{
    /* the compute stream's next gather into the offload staging waits for
     * layer l - 1's copy down on the device too, not only through the host */
    if (CU(e, cudaEventSynchronize(prev[E_ATT0])) || CU(e, cudaEventSynchronize(prev[E_D2H1])) ||
        CU(e, cudaStreamWaitEvent(s->compute, prev[E_D2H1], 0)))
        return ALISA_EIO;
    drain_offloads(s);
    return 0;
}

static double elapsed_ns(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? (double)ms * 1e6 : 0.0;
}

/* Adds the moves and recomputation flush timed by its events ev (complete)
 * to tl: transfers are the compute stream's moves (the loads' reads over
 * the link included) plus the device->host copy engine's time. */
static void add_move_times(const cudaEvent_t *ev, double *tl)
{
    tl[T_MOVE] += elapsed_ns(ev[E_MOVE0], ev[E_REC0]) + elapsed_ns(ev[E_REC1], ev[E_MOVE1]) +
                  elapsed_ns(ev[E_D2H0], ev[E_D2H1]);
    tl[T_RECOMP] += elapsed_ns(ev[E_REC0], ev[E_REC1]);
}

/* Tiered mode, one position: plans and applies every sequence's step of
 * layer l, carries the moves out, and fills the attention's row lists
 * (h_idx, h_count). Sequence b's K, V and layer input are rows row0 + b of
 * s->k, s->v and s->xb (row0: the position's first row in a chunk, else 0).
 * ids (batch, max_len) gets the attended tokens. */
static int tiered_layer(struct cuda_state *s, struct backend_common *cm, uint32_t l, uint32_t pos,
                        uint32_t row0, cudaEvent_t *ev, uint32_t *ids, double *tl,
                        struct alisa_err *e)
{
    const struct llm_config *c = &s->m->c;
    const uint32_t B = s->batch, kv = c->kv_dim, d = c->dim, L = s->max_len;
    int prefill = pos < cm->prompt_len;
    for (uint32_t b = 0; b < B; b++) {
        uint32_t stream = b * c->n_layers + l;
        struct scheduler_plan plan;
        if (backend_plan(cm, b, l, pos, NULL, &plan, tl))
            return ALISA_EINVAL;
        uint64_t t0 = backend_mono_ns();
        const size_t r = (size_t)row0 + b;
        if (kvstore_apply(s->ks, &plan, scheduler_stream_flags(cm->sched, stream), s->m, l, pos,
                          s->k + r * kv, s->v + r * kv, s->xb + r * d, e))
            return ALISA_EINVAL;
        tl[T_MOVE] += (double)(backend_mono_ns() - t0);
        uint32_t *id = ids + (size_t)b * L;
        int32_t *idx = s->h_idx + (size_t)b * L;
        if (prefill) {
            s->h_count[b] = pos + 1;
            for (uint32_t t = 0; t <= pos; t++)
                id[t] = t;
            continue;
        }
        s->h_count[b] = plan.n_attended;
        for (uint32_t i = 0; i < plan.n_attended; i++) {
            uint32_t t = plan.attended[i];
            int32_t slot = kvstore_dev_slot(s->ks, stream, t);
            if (slot < 0)
                return err_set(e, ALISA_EINVAL, "stream %u position %u: attended token %u is "
                               "not on the device", stream, pos, t);
            id[i] = t;
            idx[i] = arena_row(s, stream, (uint32_t)slot);
        }
    }
    if (flush(s, l, ev, e))
        return ALISA_EIO;
    if (!prefill)
        return 0;
    /* prefill attends the whole prompt so far from wherever it lies: the
     * moves land first (an offload of this step must reach its host slot),
     * then host copies are staged and dropped tokens recomputed into each
     * sequence's staging rows */
    if (finish(s, e))
        return ALISA_EIO;
    if (s->timed) /* the first flush's, before the second records over them */
        add_move_times(ev, tl);
    for (uint32_t b = 0; b < B; b++) {
        uint32_t stream = b * c->n_layers + l;
        int32_t *idx = s->h_idx + (size_t)b * L;
        int32_t staging = (int32_t)((size_t)s->n_streams * s->dev_cap + (size_t)b * L);
        for (uint32_t t = 0; t <= pos; t++) {
            int32_t slot = kvstore_dev_slot(s->ks, stream, t);
            const void *hk, *hv;
            if (slot >= 0) {
                idx[t] = arena_row(s, stream, (uint32_t)slot);
            } else if (!kvstore_host_row(s->ks, stream, t, &hk, &hv)) {
                idx[t] = staging + (int32_t)t;
                queue_load(s, hk, hv, idx[t]);
            } else {
                idx[t] = staging + (int32_t)t;
                queue_recompute(s, stream, t, idx[t]);
            }
        }
    }
    return flush(s, l, ev, e);
}

/* enqueue's observing: waits for layer l's head-mean attention rows at
 * step pos0 and gives them to the scheduler and to `rows` (enqueue's
 * contract). Returns 0 or a negative status (e set). */
static int observe_layer(struct cuda_state *s, struct backend_common *cm, uint32_t l,
                         uint32_t pos0, uint32_t *ids, float *rows, double *tl,
                         struct alisa_err *e)
{
    const struct llm_config *c = &s->m->c;
    const uint32_t B = s->batch, L = s->max_len;
    if (CU(e, kern_head_mean(s->wmean, s->scores, s->d_count, B, c->n_heads, L, s->compute)) ||
        CU(e, cudaMemcpyAsync(s->h_wmean, s->wmean, (size_t)B * L * sizeof(float),
                              cudaMemcpyDeviceToHost, s->compute)) ||
        finish(s, e))
        return ALISA_EIO;
    for (uint32_t b = 0; b < B; b++) {
        uint32_t pos = pos0, n = pos + 1, n_att = s->h_count[b];
        const uint32_t *id = ids + (size_t)b * L;
        const float *w = s->h_wmean + (size_t)b * L;
        if (!cm->sched) { /* the last n_att positions (all of them, or a sliding window) */
            for (uint32_t t = 0; t < n_att; t++)
                ids[(size_t)b * L + t] = n - n_att + t;
        }
        if (rows) {
            float *row = rows + ((size_t)b * c->n_layers + l) * n;
            memset(row, 0, n * sizeof *row);
            for (uint32_t a = 0; a < n_att; a++)
                row[id[a]] = w[a];
        }
        if (cm->sched)
            backend_observe(cm, b, l, pos, id, w, n_att, NULL, s->h_dense, tl);
    }
    return 0;
}

/* ---- the layer sequence's operations (layers.h) on the call in flight ---- */

/* A named buffer's rows (FP32) and their width (layers_width). LB_REC_IN
 * is the FP16 gather of layer inputs (s->d_q16), read by linear only. */
static float *buf(const struct cuda_state *s, enum lbuf b, uint32_t *width)
{
    float *const named[LB_N] = {[LB_X] = s->x, [LB_XB] = s->xb, [LB_XB2] = s->xb2,
                                [LB_Q] = s->q, [LB_K] = s->k, [LB_V] = s->v, [LB_HB] = s->hb,
                                [LB_HB2] = s->hb2, [LB_LOGITS] = s->logits,
                                [LB_REC_K] = s->d_qk, [LB_REC_V] = s->d_qv};
    if (width)
        *width = layers_width(&s->m->c, b);
    return named[b];
}

static int op_embed(void *be, uint32_t n)
{
    struct cuda_state *s = be;
    a16_wrote(s, s->x);
    return CU(s->e, kern_embed(s->x, s->emb, s->d_tokens, n, s->m->c.dim, s->compute)) ? ALISA_EIO
                                                                                       : 0;
}

static int op_embed_pos(void *be, uint32_t n, uint32_t offset)
{
    struct cuda_state *s = be;
    a16_wrote(s, s->x);
    return CU(s->e, kern_embed_pos(s->x, s->pos_emb, s->d_pos, offset, n, s->m->c.dim,
                                   s->compute)) ? ALISA_EIO : 0;
}

static int op_norm(void *be, enum lbuf o, enum lbuf x, enum lnorm which, uint32_t l, uint32_t n)
{
    struct cuda_state *s = be;
    int w = which == LN_FINAL ? 2 : which == LN_FFN ? 1 : 0;
    return norm(s, buf(s, o, NULL), buf(s, x, NULL), l, w, n, s->e);
}

/* layer l's matrix w, FP16 (out, in) */
static const uint16_t *matrix(const struct cuda_state *s, enum lweight w, uint32_t l,
                              uint32_t *out, uint32_t *in)
{
    const struct llm_config *c = &s->m->c;
    const size_t d = c->dim, kv = c->kv_dim, hd = c->hidden_dim;
    *in = (uint32_t)d;
    switch (w) {
    case LW_Q: *out = (uint32_t)d; return s->wq + l * d * d;
    case LW_K: *out = (uint32_t)kv; return s->wk + l * kv * d;
    case LW_V: *out = (uint32_t)kv; return s->wv + l * kv * d;
    case LW_O: *out = (uint32_t)d; return s->wo + l * d * d;
    case LW_UP: *out = (uint32_t)hd; return s->w1 + l * hd * d;
    case LW_GATE: *out = (uint32_t)hd; return s->w3 + l * hd * d;
    case LW_DOWN: *out = (uint32_t)d, *in = (uint32_t)hd; return s->w2 + l * d * hd;
    default: *out = c->vocab; return s->wcls;
    }
}

static int op_linear(void *be, enum lbuf y, enum lbuf x, enum lweight w, uint32_t l, uint32_t n,
                     int again)
{
    struct cuda_state *s = be;
    uint32_t out, in;
    const uint16_t *m = matrix(s, w, l, &out, &in);
    float *dst = buf(s, y, NULL);
    a16_wrote(s, dst);
    if (x == LB_REC_IN) /* FP16 already */
        return gemm16(s, dst, s->d_q16, m, n, out, in, 0.0f, s->e);
    return gemm(s, dst, buf(s, x, NULL), m, n, out, in, again, 0, s->e);
}

static int op_bias(void *be, enum lbuf y, enum lweight w, uint32_t l, uint32_t n, int relu)
{
    struct cuda_state *s = be;
    uint32_t width;
    float *dst = buf(s, y, &width);
    a16_wrote(s, dst);
    const float *b = w == LW_Q ? s->bq : w == LW_K ? s->bk : w == LW_V ? s->bv
                   : w == LW_O ? s->bo : w == LW_UP ? s->b1 : s->b2;
    return CU(s->e, kern_bias(dst, b + (size_t)l * width, n, width, relu, s->compute)) ? ALISA_EIO
                                                                                        : 0;
}

/* positions: the call's rows, or the recomputed tokens' */
static int op_rope(void *be, enum lbuf y, uint32_t n)
{
    struct cuda_state *s = be;
    uint32_t width;
    float *p = buf(s, y, &width);
    a16_wrote(s, p);
    const uint32_t *pos = y == LB_REC_K ? s->d_qpos : s->d_pos;
    return CU(s->e, kern_rope(p, n, width, s->m->c.head_dim, pos, s->rope_cos, s->rope_sin,
                              s->compute)) ? ALISA_EIO : 0;
}

static int op_glu(void *be, uint32_t n)
{
    struct cuda_state *s = be;
    if (CU(s->e, kern_swiglu(s->hb, narrow_alongside(s, s->hb, n), s->hb2,
                             (size_t)n * s->m->c.hidden_dim, s->compute))) {
        a16_wrote(s, s->hb);
        return ALISA_EIO;
    }
    return 0;
}

static int op_residual(void *be, uint32_t n)
{
    struct cuda_state *s = be;
    a16_wrote(s, s->x);
    return CU(s->e, kern_add(s->x, s->xb2, (size_t)n * s->m->c.dim, s->compute)) ? ALISA_EIO : 0;
}

/* Whether matrices w[0..count) of layer l into y[0..count) are one strided
 * product of n rows: one shape, the matrices and the outputs each a
 * constant stride apart (*ws halves, *ys floats), the outputs not
 * overlapping. */
static int strided(const struct cuda_state *s, const enum lbuf *y, const enum lweight *w,
                   uint32_t count, uint32_t l, uint32_t n, ptrdiff_t *ws, ptrdiff_t *ys)
{
    uint32_t out, in, o2, i2;
    const uint16_t *prev = matrix(s, w[0], l, &out, &in);
    for (uint32_t i = 1; i < count; i++) {
        const uint16_t *m = matrix(s, w[i], l, &o2, &i2);
        ptrdiff_t dw = m - prev, dy = buf(s, y[i], NULL) - buf(s, y[i - 1], NULL);
        if (o2 != out || i2 != in || dw <= 0 || dy < (ptrdiff_t)n * out ||
            (i > 1 && (dw != *ws || dy != *ys)))
            return 0;
        *ws = dw, *ys = dy, prev = m;
    }
    return count > 1;
}

/* A group over one input: its longest tail that is one
 * strided product (strided: Q, K and V when kv_dim is dim, else K and V;
 * up and gate: the weights' layout in upload_weights and the activations'
 * in ensure_rows put them so) runs as one, by kern_gemv for a few rows, else
 * as one strided batched cuBLAS call over the input narrowed once; the
 * matrices before it (Q of a grouped-query model) one op_linear each. */
static int op_linear_group(void *be, const enum lbuf *y, enum lbuf x, const enum lweight *w,
                           uint32_t count, uint32_t l, uint32_t n, int again)
{
    struct cuda_state *s = be;
    struct alisa_err *e = s->e;
    ptrdiff_t ws = 0, ys = 0;
    uint32_t i = 0;
    while (i < count && !strided(s, y + i, w + i, count - i, l, n, &ws, &ys)) {
        if (op_linear(be, y[i], x, w[i], l, n, i ? 1 : again))
            return ALISA_EIO;
        i++;
    }
    if (i == count)
        return 0;
    uint32_t out, in;
    const uint16_t *m0 = matrix(s, w[i], l, &out, &in);
    float *y0 = buf(s, y[i], NULL);
    const uint32_t k = count - i;
    for (uint32_t j = i; j < count; j++)
        a16_wrote(s, buf(s, y[j], NULL));
    const uint16_t *x16 = s->d_q16;
    if (x != LB_REC_IN) {
        const float *xf = buf(s, x, NULL);
        if (kern_gemv_fits(n, in, xf, m0, (size_t)ws)) {
            a16_forget(s);
            return CU(e, kern_gemv(y0, (size_t)ys, xf, m0, (size_t)ws, k, n, out, in, 0,
                                   s->compute)) ? ALISA_EIO : 0;
        }
        if (narrow(s, xf, n, in, i ? 1 : again, e))
            return ALISA_EIO;
        x16 = s->a16;
    }
    /* the shared input's stride is 0: every product reads the same rows */
    const float one = 1.0f, zero = 0.0f;
    return BL(e, cublasGemmStridedBatchedEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n,
                                            (int)in, &one, m0, CUDA_R_16F, (int)in,
                                            (long long)ws, x16, CUDA_R_16F, (int)in, 0, &zero, y0,
                                            CUDA_R_32F, (int)out, (long long)ys, (int)k,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* LB_X += x W^T: the product adds into the residual stream (kern_gemv's
 * accumulate, cuBLAS's beta 1). */
static int op_linear_residual(void *be, enum lbuf x, enum lweight w, uint32_t l, uint32_t n)
{
    struct cuda_state *s = be;
    uint32_t out, in;
    const uint16_t *m = matrix(s, w, l, &out, &in);
    a16_wrote(s, s->x);
    return gemm(s, s->x, buf(s, x, NULL), m, n, out, in, 0, 1, s->e);
}

/* Adds layer l's (last) moves, recomputation and attention, timed by its
 * events ev (complete), to tl. */
static void add_tier_times(const cudaEvent_t *ev, double *tl)
{
    add_move_times(ev, tl);
    tl[T_ATTN] += elapsed_ns(ev[E_ATT0], ev[E_ATT1]);
}

/* Scores, softmax and output of R query rows q against the K and V rows rw
 * lists: into out (R, dim), timed by ev's attention events. */
static int attention(struct cuda_state *s, const float *q, float *out, const uint16_t *K16,
                     const uint16_t *V16, struct kern_rows rw, uint32_t R, cudaEvent_t *ev)
{
    const struct llm_config *c = &s->m->c;
    const uint32_t H = c->n_heads, KVH = c->n_kv_heads, hs = c->head_dim;
    const float scale = 1.0f / sqrtf((float)hs);
    struct alisa_err *e = s->e;
    cudaStream_t cs = s->compute;
    return CU(e, rec(s, ev[E_ATT0], cs)) ||
                   CU(e, kern_attn_scores16(s->scores, q, K16, rw, R, H, KVH, hs, scale, cs)) ||
                   CU(e, kern_softmax(s->scores, R * H, s->max_len, rw.count, H, cs)) ||
                   CU(e, kern_attn_output16(out, s->att_part, s->scores, V16, rw, R, H, KVH, hs,
                                            cs)) ||
                   CU(e, tick(s, ev[E_ATT1], cs))
               ? ALISA_EIO
               : 0;
}

/* Layer l's attention in tiered mode, one position of the call at a time
 * (a decode step has one; a chunk's rows are position-major): the
 * position's plans and moves (tiered_layer), its rows' lists up, its
 * attention, its rows observed (or, pipelined, copied down for
 * observe_step), so the scheduler decides each position after seeing the
 * one before, as on the CPU (backend_cpu.c, tiered_attend). */
static int tiered_attend(struct cuda_state *s, uint32_t l)
{
    struct backend_common *cm = s->cm;
    struct alisa_err *e = s->e;
    const uint32_t B = s->batch, L = s->max_len, d = s->m->c.dim;
    const int defer = s->call_defer;
    cudaStream_t cs = s->compute;
    cudaEvent_t *ev = s->ev + (size_t)l * E_N;
    double *tl = cm->t_layer + (size_t)l * T_N;
    struct kern_rows rw = {.idx = s->d_idx, .count = s->d_count, .ld = L};
    if (defer && l && layer_handoff(s, ev - E_N, e))
        return ALISA_EIO;
    for (uint32_t p = 0; p < s->call_P; p++) {
        const uint32_t pos = s->call_pos0 + p, row0 = p * B;
        if (p && s->timed) /* the position before, synchronised by its observing */
            add_tier_times(ev, tl);
        if (tiered_layer(s, cm, l, pos, row0, ev,
                         defer ? s->step_ids + (size_t)l * B * L : s->call_ids, tl, e) ||
            CU(e, cudaMemcpyAsync(s->d_count, s->h_count, B * sizeof(uint32_t),
                                  cudaMemcpyHostToDevice, cs)) ||
            CU(e, cudaMemcpyAsync(s->d_idx, s->h_idx, (size_t)B * L * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, cs)))
            return ALISA_EIO;
        if (defer)
            memcpy(s->step_count + (size_t)l * B, s->h_count, B * sizeof(uint32_t));
        if (attention(s, s->q + (size_t)row0 * d, s->xb + (size_t)row0 * d, s->ak, s->av, rw, B,
                      ev))
            return ALISA_EIO;
        if (defer && (CU(e, kern_head_mean(s->wmean, s->scores, s->d_count, B, s->m->c.n_heads,
                                           L, cs)) ||
                      CU(e, cudaMemcpyAsync(s->h_rows + (size_t)l * B * L, s->wmean,
                                            (size_t)B * L * sizeof(float), cudaMemcpyDeviceToHost,
                                            cs))))
            return ALISA_EIO;
        if (s->call_observe &&
            observe_layer(s, cm, l, pos, s->call_ids, s->call_rows, tl, e))
            return ALISA_EIO;
    }
    return 0;
}

/* Layer l's attention of the call's rows: in tiered mode tiered_attend;
 * else this call's K and V into the dense cache, then every row attends
 * its sequence's positions up to its own, the output replacing the normed
 * input as on the CPU, the rows observed as enqueue says. */
static int op_attend(void *be, uint32_t l, uint32_t R)
{
    struct cuda_state *s = be;
    a16_wrote(s, s->xb); /* the attention's output */
    struct backend_common *cm = s->cm;
    struct alisa_err *e = s->e;
    const struct llm_config *c = &s->m->c;
    const uint32_t B = s->batch, kv = c->kv_dim, L = s->max_len;
    cudaStream_t cs = s->compute;
    cudaEvent_t *ev = s->ev + (size_t)l * E_N;
    if (cm->sched)
        return tiered_attend(s, l);
    uint16_t *kl = s->kc + (size_t)l * B * L * kv, *vl = s->vc + (size_t)l * B * L * kv;
    struct kern_rows rw = {.base = s->d_base, .count = s->d_count, .ld = L};
    if (CU(e, tick(s, ev[E_MOVE0], cs)) || CU(e, tick(s, ev[E_D2H0], s->d2h)) ||
        CU(e, tick(s, ev[E_D2H1], s->d2h)) ||
        CU(e, kern_scatter_rows16(kl, s->d_dst, s->k, R, kv, cs)) ||
        CU(e, kern_scatter_rows16(vl, s->d_dst, s->v, R, kv, cs)) ||
        CU(e, tick(s, ev[E_REC0], cs)) || CU(e, tick(s, ev[E_REC1], cs)) ||
        CU(e, tick(s, ev[E_MOVE1], cs)) || attention(s, s->q, s->xb, kl, vl, rw, R, ev))
        return ALISA_EIO;
    if (s->call_observe && observe_layer(s, cm, l, s->call_pos0, s->call_ids, s->call_rows,
                                         cm->t_layer + (size_t)l * T_N, e))
        return ALISA_EIO;
    return 0;
}

/* A layer's timing events (the last row of events times the head): its
 * start, its projections and RoPE done, its end; the attention's own are
 * op_attend's. */
static int op_mark(void *be, uint32_t l, enum lmark m)
{
    struct cuda_state *s = be;
    cudaEvent_t *ev = s->ev + (size_t)l * E_N;
    if (m == LM_ATTN)
        return 0;
    int which = m == LM_START ? E_START : m == LM_QKV ? E_QKV : E_FFN;
    return CU(s->e, tick(s, ev[which], s->compute)) ? ALISA_EIO : 0;
}

static const struct layer_ops cuda_layer_ops = {
    .embed = op_embed,
    .embed_pos = op_embed_pos,
    .norm = op_norm,
    .linear = op_linear,
    .linear_group = op_linear_group,
    .linear_residual = op_linear_residual,
    .bias = op_bias,
    .rope = op_rope,
    .glu = op_glu,
    .residual = op_residual,
    .attend = op_attend,
    .mark = op_mark,
};

/* Enqueues one call's forward pass on the compute stream (rows b * P + i:
 * sequence b at position pos0 + i, or i * batch + b in a tiered chunk;
 * their host lists filled), from the lists' upload through the one layer
 * sequence (layers_forward) to the logits' copy down; in tiered mode each
 * layer plans and moves position by position (tiered_attend). With
 * `observe` each position of a layer waits for its attention rows and
 * gives them to the scheduler and to `rows` at once
 * (ids: (batch, max_len) scratch); with `defer` (a pipelined tiered decode
 * step) they come down into s->h_rows, layer by layer without a wait, for
 * observe_step. Returns 0 or a negative status (e set). */
static int enqueue(struct cuda_state *s, struct backend_common *cm, uint32_t P, uint32_t pos0,
                   uint32_t *ids, float *rows, int observe, int defer)
{
    struct alisa_err *e = &cm->err;
    const struct llm_config *c = &s->m->c;
    const uint32_t R = s->batch * P;
    cudaStream_t cs = s->compute;
    if (CU(e, cudaMemcpyAsync(s->d_tokens, s->h_tokens, 5 * (size_t)s->rows_cap * sizeof(uint32_t),
                              cudaMemcpyHostToDevice, cs)))
        return ALISA_EIO;
    s->e = e;
    s->cm = cm;
    s->call_pos0 = pos0;
    s->call_P = P;
    s->call_ids = ids;
    s->call_rows = rows;
    s->call_observe = observe;
    s->call_defer = defer;
    int rc = layers_forward(&s->ops, s, c, R, !cm->no_head);
    s->cm = NULL;
    if (rc)
        return rc;
    if ((!cm->no_head && cm->greedy &&
         (CU(e, kern_argmax_rows(s->d_next, s->logits, R, c->vocab, cs)) ||
          CU(e, cudaMemcpyAsync(s->h_next, s->d_next, R * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, cs)))) ||
        (!cm->no_head && !cm->greedy &&
         CU(e, cudaMemcpyAsync(s->h_logits, s->logits, (size_t)R * c->vocab * sizeof(float),
                               cudaMemcpyDeviceToHost, cs))))
        return ALISA_EIO;
    return 0;
}

/* The host buffers of a pipelined tiered step, on its first use. */
static int step_buffers(struct cuda_state *s, struct alisa_err *e)
{
    size_t n = (size_t)s->m->c.n_layers * s->batch * s->max_len;
    if (CU(e, cudaHostAlloc((void **)&s->h_rows, n * sizeof(float), cudaHostAllocDefault)))
        return ALISA_ENOMEM;
    if (!(s->step_ids = malloc(n * sizeof *s->step_ids)) ||
        !(s->step_count = malloc((size_t)s->m->c.n_layers * s->batch * sizeof *s->step_count)))
        return err_set(e, ALISA_ENOMEM, "out of memory for a step's attention rows");
    return 0;
}

/* The scheduler observes a pipelined step's attention rows, every layer's,
 * in the eager path's order (layer by layer, sequence by sequence; streams
 * are independent, so the order changes nothing but the log's). */
static void observe_step(struct cuda_state *s, struct backend_common *cm, uint32_t pos)
{
    const uint32_t B = s->batch, L = s->max_len;
    for (uint32_t l = 0; l < s->m->c.n_layers; l++)
        for (uint32_t b = 0; b < B; b++) {
            size_t at = ((size_t)l * B + b) * L;
            backend_observe(cm, b, l, pos, s->step_ids + at, s->h_rows + at,
                            s->step_count[(size_t)l * B + b], NULL, s->h_dense,
                            cm->t_layer + (size_t)l * T_N);
        }
}

/* Launches a dense step of one position a sequence as a CUDA graph,
 * capturing it first when none exists for this width and head. Every value
 * that changes between steps (tokens, positions, lengths, cache rows) is in
 * the pinned lists the graph's first node uploads, so one capture serves
 * every later step. Returns 0 or a negative status (e set). */
static int run_graph(struct cuda_state *s, struct backend_common *cm, uint32_t pos0)
{
    struct alisa_err *e = &cm->err;
    int k = cm->no_head ? 1 : cm->greedy ? 2 : 0;
    if (s->graph_rows[k] != s->batch) {
        cudaGraph_t g = NULL;
        if (s->graph[k])
            cudaGraphExecDestroy(s->graph[k]);
        s->graph[k] = NULL;
        s->graph_rows[k] = 0;
        if (CU(e, cudaStreamBeginCapture(s->compute, cudaStreamCaptureModeThreadLocal)))
            return ALISA_EIO;
        s->capturing = 1;
        int rc = enqueue(s, cm, 1, pos0, NULL, NULL, 0, 0);
        s->capturing = 0;
        cudaError_t ended = cudaStreamEndCapture(s->compute, &g);
        if (!rc && CU(e, ended))
            rc = ALISA_EIO;
        if (!rc && CU(e, cudaGraphInstantiate(&s->graph[k], g, 0)))
            rc = ALISA_EIO;
        if (g)
            cudaGraphDestroy(g);
        if (rc) {
            s->graph[k] = NULL;
            return rc;
        }
        s->graph_rows[k] = s->batch;
    }
    return CU(e, cudaGraphLaunch(s->graph[k], s->compute)) ? ALISA_EIO : 0;
}

/* The row of sequence b's i-th position in a call of P positions a
 * sequence: b * P + i, the caller's order, or i * batch + b in a tiered
 * chunk (position-major, so each position's rows are adjacent). */
static uint32_t call_row(const struct cuda_state *s, int chunk, uint32_t P, uint32_t b,
                         uint32_t i)
{
    return chunk ? i * s->batch + b : b * P + i;
}

/* A tiered chunk's logits (position-major rows) in the caller's order
 * (row b * P + i) in s->chunk_logits; NULL when out of memory (e set). */
static const float *chunk_order(struct cuda_state *s, uint32_t P, struct alisa_err *e)
{
    const uint32_t B = s->batch;
    const size_t V = s->m->c.vocab;
    if (P > s->chunk_cap) {
        free(s->chunk_logits);
        s->chunk_cap = 0;
        if (!(s->chunk_logits = malloc((size_t)B * P * V * sizeof(float)))) {
            err_set(e, ALISA_ENOMEM, "out of memory for %u x %u logits", B, P);
            return NULL;
        }
        s->chunk_cap = P;
    }
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t i = 0; i < P; i++)
            memcpy(s->chunk_logits + ((size_t)b * P + i) * V,
                   s->h_logits + (size_t)call_row(s, 1, P, b, i) * V, V * sizeof(float));
    return s->chunk_logits;
}

static const float *cuda_forward(void *be, struct backend_common *cm, const uint32_t *tokens,
                                 uint32_t pos0, uint32_t P, float *rows)
{
    struct cuda_state *s = be;
    struct alisa_err *e = &cm->err;
    const struct llm_config *c = &s->m->c;
    const uint32_t B = s->batch, kv = c->kv_dim, L = s->max_len, R = B * P;
    uint32_t *ids = NULL;
    if (cm->sched && scheduler_needs_present(cm->sched)) {
        err_set(e, ALISA_EINVAL, "the selection reads each step's own attention row, which the "
                "cuda backend does not compute (it plans a layer ahead); run it with --backend cpu");
        return NULL;
    }
    if (cm->sched && (cm->ks != s->ks || !s->ks)) {
        err_set(e, ALISA_EINVAL, "the cuda backend's tiered cache needs the kvstore made by "
                "llm_state_kvstore for this state");
        return NULL;
    }
    /* a tiered chunk (a prompt under the scheduler): its GEMMs run over
     * every row at once, its attention position by position (tiered_attend);
     * its rows are position-major so each position's are adjacent */
    const int chunk = cm->sched && P > 1;
    if (ensure_rows(s, R, e)) {
        cudaGetLastError(); /* a failed allocation's, not the next kernel's */
        if (chunk && P > LLM_CHUNK) { /* more than cuda_kvstore left room for */
            size_t b[3];
            char was[sizeof e->msg];
            snprintf(was, sizeof was, "%s", e->msg);
            rows_bytes(s, R, b);
            err_set(e, ALISA_ENOMEM, "a prompt chunk of %u sequences x %u positions needs %.2f GB "
                    "of activation rows beside the tiered KV, which leaves room for %u "
                    "positions: run shorter chunks or lower --gpu-kv-bytes (%s)", B, P,
                    (b[0] + b[1] + b[2]) / 1e9, LLM_CHUNK, was);
        }
        return NULL;
    }
    if (!cm->sched && !s->kc) {
        size_t n = (size_t)c->n_layers * B * L * kv;
        if (CU(e, cudaMalloc((void **)&s->kc, n * sizeof(uint16_t))) ||
            CU(e, cudaMalloc((void **)&s->vc, n * sizeof(uint16_t))))
            return NULL;
    }
    /* the pipelined forms: a tiered one-position decode step observed at its
     * end (not when the caller wants rows, nor for prefill, whose plans move
     * the prompt's own tokens between its positions, nor for a chunk, whose
     * positions are each planned after the one before is observed), a dense
     * one-position step replayed as a graph (not with rows or timings) */
    int defer = cm->pipeline && cm->sched && !rows && P == 1 && pos0 >= cm->prompt_len;
    int observe = rows || (cm->sched && !defer);
    int graph = cm->pipeline && !cm->sched && !rows && P == 1 && !cm->timings;
    s->timed = cm->timings != NULL;
    if (defer && !s->h_rows && step_buffers(s, e))
        return NULL;
    if (observe && !(ids = malloc((size_t)B * L * sizeof *ids))) {
        err_set(e, ALISA_ENOMEM, "out of memory");
        return NULL;
    }
    const float *result = NULL;
    uint64_t t_start = backend_mono_ns();
    /* row r = b * P + i holds sequence b at position pos0 + i (i * B + b in
     * a tiered chunk) */
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t i = 0; i < P; i++) {
            uint32_t r = call_row(s, chunk, P, b, i), n = pos0 + i + 1;
            uint32_t first = llm_attend_first(c, n); /* a sliding window's */
            s->h_tokens[r] = tokens[b * P + i];
            s->h_pos[r] = pos0 + i;
            s->h_count[r] = n - first;
            s->h_base[r] = (int32_t)((size_t)b * L + first);
            s->h_dst[r] = (int32_t)((size_t)b * L + pos0 + i);
        }
    const int prof = P == 1 && (int64_t)pos0 == s->profile_pos;
    if ((prof && CU(e, cudaProfilerStart())) ||
        (graph ? run_graph(s, cm, pos0) : enqueue(s, cm, P, pos0, ids, rows, observe, defer)) ||
        finish(s, e) || (prof && CU(e, cudaProfilerStop())))
        goto out;
    if (defer)
        observe_step(s, cm, pos0);
    result = s->h_logits;
    if (chunk && !cm->no_head && !(result = chunk_order(s, P, e)))
        goto out;
    if (cm->greedy) /* in the caller's order */
        for (uint32_t r = 0; r < R; r++)
            cm->greedy[r] = s->h_next[call_row(s, chunk, P, r / P, r % P)];
    uint64_t end = backend_mono_ns();
    cudaEvent_t *hv = s->ev + (size_t)c->n_layers * E_N;
    for (uint32_t l = 0; l < c->n_layers && s->timed && !graph; l++) {
        cudaEvent_t *ev = s->ev + (size_t)l * E_N;
        double *tl = cm->t_layer + (size_t)l * T_N;
        /* GPU time per category; the moves' host bookkeeping and the
         * scheduler were added on the host clock as they ran */
        tl[T_GEMM] += elapsed_ns(ev[E_START], ev[E_QKV]) + elapsed_ns(ev[E_ATT1], ev[E_FFN]);
        add_tier_times(ev, tl); /* a chunk's last position (tiered_attend added the rest) */
    }
    backend_write_timings(cm, pos0, P, (double)(end - t_start),
                          graph || !s->timed ? 0.0 : elapsed_ns(hv[E_START], hv[E_FFN]));
out:
    free(ids);
    return result;
}

/* ---- calibration's microbenchmarks (backend.h), on device 0 ---- */

static void cuda_describe(struct llm_backend_info *out)
{
    struct device_info d;
    device_probe(&d);
    snprintf(out->device, sizeof out->device, "%s", d.n_devices ? d.name : d.note);
    snprintf(out->driver, sizeof out->driver, "%s", d.driver);
    out->mem_gib = (double)d.mem_bytes / 1073741824.0;
    int fuse; /* a bad value is refused when a state is made; here the default */
    struct alisa_err ignored = {0};
    if (fuse_setting(&fuse, &ignored))
        fuse = 1;
    snprintf(out->note, sizeof out->note,
             "GPU: %.200s, %.1f GiB, compute capability %d.%d; projections %s", d.name, out->mem_gib,
             d.cc_major, d.cc_minor, fuse ? "fused" : "unfused (ALISA_CUDA_FUSE=0)");
}

/* One projection's time as the forward pass runs it (gemm's rule:
 * kern_gemv for a few rows when fused; cudaMalloc's 256-byte alignment
 * passes kern_gemv_fits's), by device_bench_gemm. */
static int cuda_bench_gemm(unsigned rows, unsigned out, unsigned in, double *ns,
                           struct alisa_err *e)
{
    double t[5];
    char note[256];
    int fuse;
    if (fuse_setting(&fuse, e))
        return ALISA_EINVAL;
    if (device_bench_gemm(rows, out, in, fuse && kern_gemv_fits(rows, in, NULL, NULL, 0), 5, t,
                          note, sizeof note))
        return err_set(e, ALISA_EIO, "calibration: %s", note);
    *ns = fit_median(t, 5);
    return 0;
}

/* Pinned host memory and the device: the mean of the host-to-device and
 * device-to-host medians, as the executor's loads and offloads. */
static int cuda_bench_copy(size_t bytes, double *ns, struct alisa_err *e)
{
    double up[15], down[15];
    char note[256];
    if (device_bench_copy(bytes, 1, 15, up, note, sizeof note) ||
        device_bench_copy(bytes, 0, 15, down, note, sizeof note))
        return err_set(e, ALISA_EIO, "calibration: %s", note);
    *ns = 0.5 * (fit_median(up, 15) + fit_median(down, 15));
    return 0;
}

/* The backend recomputes a layer's tokens at once (a gather, two cuBLAS
 * GEMMs, RoPE, a scatter): the GEMM of the K and V rows of RECOMPUTE_ROWS
 * tokens (one GEMM of both outputs), per token; the gather, RoPE and
 * scatter are not counted. */
#define RECOMPUTE_ROWS 16
static double cuda_bench_recompute(const struct llm_model *m)
{
    double t[15];
    char note[256];
    if (device_bench_gemm(RECOMPUTE_ROWS, 2 * m->c.kv_dim, m->c.dim, 0, 15, t, note, sizeof note))
        return NAN;
    return fit_median(t, 15) / RECOMPUTE_ROWS;
}

const struct backend_ops backend_cuda = {
    .name = "cuda",
    .label = "CUDA",
    .computes = "FP16 weights on the GPU, cuBLAS and few-row kernels",
    .weight_bytes = 2,
    .kv_bytes = 2,
    .batched_copies = 1,
    .device_argmax = 1,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .kvstore = cuda_kvstore,
    .forward = cuda_forward,
    .describe = cuda_describe,
    .bench_gemm = cuda_bench_gemm,
    .bench_copy = cuda_bench_copy,
    .bench_recompute = cuda_bench_recompute,
};
