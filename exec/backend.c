/* forward.h's public calls, dispatched to a backend (backend.h), and what
 * the backends share: the scheduler's side of a step, the timings line, the
 * RoPE tables. Choosing "auto" probes for a device and never fails for lack
 * of one; it says which backend it took and why.
 */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "fp16.h"
#include "planlog.h"

struct llm_state {
    const struct backend_ops *ops;
    void *be;                 /* the backend's own state */
    enum llm_backend kind;
    struct backend_common c;
};

uint64_t backend_mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void backend_bench_fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

int llm_backend_choose(const char *name, enum llm_backend *out, char *said, size_t n,
                       struct alisa_err *e)
{
    struct device_info d;
    int want_cuda = strcmp(name, "cuda") == 0, is_auto = strcmp(name, "auto") == 0;
    if (!want_cuda && !is_auto && strcmp(name, "cpu") != 0)
        return err_set(e, ALISA_EINVAL, "--backend %s: expected cpu, cuda or auto", name);
    *out = LLM_BACKEND_CPU;
    if (!want_cuda && !is_auto) {
        snprintf(said, n, "cpu");
        return 0;
    }
    device_probe(&d);
    if (d.n_devices > 0) {
        *out = LLM_BACKEND_CUDA;
        snprintf(said, n, "cuda (%s, %.1f GiB)", d.name, (double)d.mem_bytes / (1u << 30));
        return 0;
    }
    if (want_cuda)
        return err_set(e, ALISA_EINVAL, "--backend cuda: %s", d.note);
    snprintf(said, n, "cpu (auto: %s)", d.note);
    return 0;
}

int backend_of(enum llm_backend kind, const struct backend_ops **out, struct alisa_err *e)
{
    char why[512];
    *out = NULL;
    if (kind == LLM_BACKEND_CPU)
        *out = &backend_cpu;
    else if (kind == LLM_BACKEND_CUDA && device_cuda_backend(out, why, sizeof why))
        return err_set(e, ALISA_EINVAL, "the cuda backend: %s", why);
    return *out ? 0 : err_set(e, ALISA_EINVAL, "backend %d: unknown", (int)kind);
}

int llm_backend_info(enum llm_backend kind, struct llm_backend_info *out, struct alisa_err *e)
{
    const struct backend_ops *ops;
    int rc = backend_of(kind, &ops, e);
    if (rc)
        return rc;
    *out = (struct llm_backend_info){.name = ops->name, .label = ops->label,
                                     .computes = ops->computes, .weight_bytes = ops->weight_bytes,
                                     .kv_bytes = ops->kv_bytes,
                                     .batched_copies = ops->batched_copies};
    ops->describe(out);
    return 0;
}

int llm_state_create_on(struct llm_state **out, enum llm_backend kind, const struct llm_model *m,
                        uint32_t batch, uint32_t max_len, struct alisa_err *e)
{
    *out = NULL;
    const struct llm_config *c = &m->c;
    if (!batch || !max_len || max_len > c->seq_len)
        return err_set(e, ALISA_EINVAL, "batch %u and length %u must be positive, the length at "
                       "most the model's context %u", batch, max_len, c->seq_len);
    const struct backend_ops *ops;
    int rc = backend_of(kind, &ops, e);
    if (rc)
        return rc;
    struct llm_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    s->ops = ops;
    s->kind = kind;
    s->c.m = m;
    s->c.batch = batch;
    s->c.max_len = max_len;
    s->c.t_layer = calloc((size_t)c->n_layers * T_N, sizeof *s->c.t_layer);
    rc = s->c.t_layer ? ops->create(&s->be, &s->c, e) : err_set(e, ALISA_ENOMEM, "out of memory");
    if (rc) {
        free(s->c.t_layer);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int llm_state_create(struct llm_state **out, const struct llm_model *m, uint32_t batch,
                     uint32_t max_len, struct alisa_err *e)
{
    return llm_state_create_on(out, LLM_BACKEND_CPU, m, batch, max_len, e);
}

void llm_state_free(struct llm_state *s)
{
    if (!s)
        return;
    s->ops->destroy(s->be);
    free(s->c.t_layer);
    free(s->c.slot_prompt);
    free(s);
}

enum llm_backend llm_state_backend(const struct llm_state *s) { return s->kind; }

const char *llm_state_label(const struct llm_state *s) { return s->ops->label; }

int llm_state_kvstore(struct llm_state *s, uint32_t n_streams, uint32_t max_len, uint32_t dev_cap,
                      uint32_t host_cap, int int8, struct kvstore **out, struct alisa_err *e)
{
    return s->ops->kvstore(s->be, n_streams, max_len, dev_cap, host_cap, int8, out, e);
}

void llm_state_tiered(struct llm_state *s, struct scheduler *sched, struct kvstore *ks,
                      uint32_t prompt_len)
{
    s->c.sched = sched;
    s->c.ks = sched ? ks : NULL;
    s->c.prompt_len = prompt_len;
}

int llm_state_slot_begin(struct llm_state *s, uint32_t b, uint32_t prompt_len)
{
    struct backend_common *c = &s->c;
    ALISA_ASSERT(b < c->batch && prompt_len <= c->max_len);
    if (!c->sched)
        return 0;
    struct sel_estimate est;
    scheduler_present_estimate(c->sched, &est);
    if (est.kind == SEL_ESTIMATE_PARTIAL)
        return err_set(&c->err, ALISA_EINVAL, "InfiniGen's speculation (--%s) skews by one "
                       "prompt for every sequence: not run on sequences with prompts of their "
                       "own", est.knob);
    if (!c->slot_prompt) {
        if (!(c->slot_prompt = malloc(c->batch * sizeof *c->slot_prompt)))
            return err_set(&c->err, ALISA_ENOMEM, "out of memory for %u slots", c->batch);
        for (uint32_t i = 0; i < c->batch; i++)
            c->slot_prompt[i] = c->prompt_len;
    }
    c->slot_prompt[b] = prompt_len;
    for (uint32_t l = 0; l < c->m->c.n_layers; l++) {
        uint32_t stream = b * c->m->c.n_layers + l;
        int rc = scheduler_stream_reset(c->sched, stream, &c->err);
        if (rc)
            return rc;
        kvstore_stream_reset(c->ks, stream);
    }
    return 0;
}

const struct alisa_err *llm_state_error(const struct llm_state *s) { return &s->c.err; }

void llm_state_timings(struct llm_state *s, FILE *f) { s->c.timings = f; }

void llm_state_plan_log(struct llm_state *s, FILE *f) { s->c.plan_log = f; }

void llm_state_attention_from(struct llm_state *s, llm_attention_row_fn fn, void *ctx)
{
    s->c.attn_row = fn;
    s->c.attn_ctx = ctx;
}

void llm_state_pipeline(struct llm_state *s, int on) { s->c.pipeline = on != 0; }

int llm_state_attention_heads(struct llm_state *s, float *heads, struct alisa_err *e)
{
    if (heads && !s->ops->attn_heads_out)
        return err_set(e, ALISA_EINVAL, "per-head attention rows: the %s backend does not "
                       "write them (--backend cpu does)", s->ops->name);
    if (heads && s->c.sched)
        return err_set(e, ALISA_EINVAL, "per-head attention rows: dense attention only (no "
                       "--selection or --placement)");
    s->c.attn_heads = heads;
    return 0;
}

void llm_state_attention_counts(const struct llm_state *s, uint64_t *fed, uint64_t *computed)
{
    *fed = s->c.attn_fed;
    *computed = s->c.attn_computed;
}

/* A sliding window under the scheduler: refused (tiered_attach says so
 * first; the scheduler's streams do not know the window). 0 or -1, e set. */
static int window_refused(struct llm_state *s)
{
    if (!s->c.sched || !s->c.m->c.window)
        return 0;
    err_set(&s->c.err, ALISA_EINVAL, "a sliding-window model runs without the scheduler only");
    return -1;
}

const float *llm_forward_chunk(struct llm_state *s, const uint32_t *tokens, uint32_t pos0,
                               uint32_t P, float *rows)
{
    if (window_refused(s))
        return NULL;
    ALISA_ASSERT(P >= 1 && pos0 + P <= s->c.max_len && (!rows || P == 1));
    for (uint32_t r = 0; r < s->c.batch * P; r++)
        ALISA_ASSERT(tokens[r] < s->c.m->c.vocab);
    memset(s->c.t_layer, 0, (size_t)s->c.m->c.n_layers * T_N * sizeof *s->c.t_layer);
    return s->ops->forward(s->be, &s->c, tokens, pos0, P, rows);
}

const float *llm_forward_rows(struct llm_state *s, const uint32_t *tokens, const uint32_t *slot,
                              const uint32_t *pos, uint32_t R, const uint32_t *head_rows,
                              uint32_t n_head)
{
    const struct backend_common *c = &s->c;
    if (window_refused(s))
        return NULL;
    if (!s->ops->forward_rows) {
        err_set(&s->c.err, ALISA_EINVAL, "the %s backend runs sequences in lockstep only "
                "(rows at their own positions: the CPU backend)", s->ops->name);
        return NULL;
    }
    if (c->sched && !c->slot_prompt) {
        err_set(&s->c.err, ALISA_EINVAL, "rows at their own positions on the tiered cache need "
                "each slot's prompt length (llm_state_slot_begin)");
        return NULL;
    }
    ALISA_ASSERT(R >= 1);
    for (uint32_t r = 0; r < R; r++) {
        ALISA_ASSERT(tokens[r] < c->m->c.vocab && slot[r] < c->batch && pos[r] < c->max_len);
        ALISA_ASSERT(r == 0 || slot[r - 1] != slot[r] || pos[r - 1] < pos[r]);
    }
    for (uint32_t k = 0; head_rows && k < n_head; k++)
        ALISA_ASSERT(head_rows[k] < R);
    memset(s->c.t_layer, 0, (size_t)c->m->c.n_layers * T_N * sizeof *s->c.t_layer);
    return s->ops->forward_rows(s->be, &s->c, tokens, slot, pos, R, head_rows, n_head);
}

int llm_prefill_chunk(struct llm_state *s, const uint32_t *tokens, uint32_t pos0, uint32_t P)
{
    s->c.no_head = 1;
    const float *done = llm_forward_chunk(s, tokens, pos0, P, NULL);
    s->c.no_head = 0;
    return done ? 0 : -1;
}

const float *llm_forward(struct llm_state *s, const uint32_t *tokens, uint32_t pos, float *rows)
{
    return llm_forward_chunk(s, tokens, pos, 1, rows);
}

uint32_t llm_argmax(const float *x, uint32_t n)
{
    float mx = -INFINITY; /* a NaN never compares larger: none enters the maximum */
#pragma omp simd reduction(max : mx)
    for (uint32_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (uint32_t i = 0; i < n; i++)
        if (x[i] == mx)
            return i;
    return 0;
}

int llm_forward_greedy(struct llm_state *s, const uint32_t *tokens, uint32_t pos, uint32_t *next)
{
    s->c.greedy = s->ops->device_argmax ? next : NULL;
    const float *lg = llm_forward_chunk(s, tokens, pos, 1, NULL);
    s->c.greedy = NULL;
    if (!lg)
        return -1;
    if (!s->ops->device_argmax) {
        const uint32_t B = s->c.batch, V = s->c.m->c.vocab;
#pragma omp parallel for schedule(static) if (B > 1)
        for (uint32_t b = 0; b < B; b++)
            next[b] = llm_argmax(lg + (size_t)b * V, V);
    }
    return 0;
}

int backend_plan(struct backend_common *c, uint32_t b, uint32_t l, uint32_t pos,
                 const float *present, struct scheduler_plan *plan, double *tl)
{
    uint32_t stream = b * c->m->c.n_layers + l;
    uint64_t t0 = backend_mono_ns();
    const uint32_t prompt = backend_prompt(c, b);
    if (pos < prompt)
        scheduler_prefill(c->sched, stream, pos, NULL, prompt, plan);
    else if (scheduler_step(c->sched, stream, pos, present, plan)) {
        err_set(&c->err, ALISA_ENOMEM, "sequence %u layer %u position %u: out of memory in the "
                "selection's state", b, l, pos);
        return -1;
    }
    if (c->plan_log)
        planlog_write(c->plan_log, plan, b, l);
    tl[T_SCHED] += (double)(backend_mono_ns() - t0);
    tl[T_RETIRED] += plan->n_retired;
    tl[T_ATTENDED] += plan->n_attended;
    if (plan->place.oom && plan->place.oom_cpu) {
        err_set(&c->err, ALISA_EINVAL, "sequence %u layer %u position %u: the host KV arena (%u "
                "tokens a sequence and layer) cannot hold what the placement's schedule puts "
                "there (raise --cpu-kv-bytes or --gpu-kv-bytes)", b, l, pos,
                scheduler_stream_cpu_cap(c->sched, stream));
        return -1;
    }
    if (plan->place.oom && pos < prompt) {
        /* a prompt position's plan attends nothing: it holds the prompt so far */
        err_set(&c->err, ALISA_EINVAL, "sequence %u layer %u position %u: the device KV arena "
                "(%u tokens a sequence and layer) cannot hold the prompt's first %u of %u "
                "tokens (raise --gpu-kv-bytes, or give the placement a host tier)", b, l, pos,
                scheduler_stream_gpu_cap(c->sched, stream), pos + 1, prompt);
        return -1;
    }
    if (plan->place.oom) {
        err_set(&c->err, ALISA_EINVAL, "sequence %u layer %u position %u: the device KV arena "
                "(%u tokens a sequence and layer) cannot hold the %u tokens this step attends "
                "(raise --gpu-kv-bytes, or bound the selection with --budget-tokens)", b, l, pos,
                scheduler_stream_gpu_cap(c->sched, stream), plan->n_attended);
        return -1;
    }
    return 0;
}

double backend_observe(struct backend_common *c, uint32_t b, uint32_t l, uint32_t pos,
                       const uint32_t *ids, const float *w, uint32_t n_att,
                       const float *recorded, float *dense, double *tl)
{
    /* the selection sees the row as a trace stores it (FP16 weights), so
     * replaying the recorded trace feeds it exactly the same */
    uint64_t t0 = backend_mono_ns();
    uint32_t stream = b * c->m->c.n_layers + l;
    const float *fed = c->attn_row ? c->attn_row(c->attn_ctx, b, l, pos) : NULL;
    if (fed || recorded) { /* a row given whole (--attention-from, the present row): every
                              token's weight as stored */
        memcpy(dense, fed ? fed : recorded, (pos + 1) * sizeof *dense);
        c->attn_fed += fed != NULL;
        c->attn_computed += fed == NULL;
    } else {
        memset(dense, 0, (pos + 1) * sizeof *dense);
        for (uint32_t a = 0; a < n_att; a++)
            dense[ids[a]] = fp16_to_float(fp16_from_float(w[a]));
        c->attn_computed++;
    }
    const uint32_t prompt = backend_prompt(c, b);
    if (pos < prompt)
        scheduler_observe_prefill(c->sched, stream, pos, dense, prompt);
    else
        scheduler_observe_dense(c->sched, stream, dense);
    double dt = (double)(backend_mono_ns() - t0);
    tl[T_SCHED] += dt;
    return dt;
}

void backend_write_timings(const struct backend_common *c, uint32_t pos0, uint32_t P,
                           double total_ns, double head_ns)
{
    if (!c->timings)
        return;
    fprintf(c->timings, "{\"pos\": %u, \"positions\": %u, \"phase\": \"%s\", \"batch\": %u, "
            "\"total_us\": %.3f, \"head_us\": %.3f, \"layers\": [", pos0, P,
            pos0 < c->prompt_len ? "prefill" : "decode", c->batch, total_ns * 1e-3, head_ns * 1e-3);
    for (uint32_t l = 0; l < c->m->c.n_layers; l++) {
        const double *tl = c->t_layer + (size_t)l * T_N;
        fprintf(c->timings, "%s{\"gemm_us\": %.3f, \"attention_us\": %.3f, \"transfer_us\": "
                "%.3f, \"recompute_us\": %.3f, \"schedule_us\": %.3f, \"retired\": %.0f, "
                "\"attended\": %.0f}",
                l ? ", " : "", tl[T_GEMM] * 1e-3, tl[T_ATTN] * 1e-3, tl[T_MOVE] * 1e-3,
                tl[T_RECOMP] * 1e-3, tl[T_SCHED] * 1e-3, tl[T_RETIRED], tl[T_ATTENDED]);
    }
    fprintf(c->timings, "]}\n");
}
