/* Trace replay through the scheduler (contract in replay.h).
 *
 * One pass over the trace drives every stream; a first pass records the
 * attended sets when the placement is an offline bound. Streams of one
 * sequence share the trace's step; tier totals across streams are kept
 * incrementally so the peaks are exact at every plan.
 */
#include "replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_stats.h"

/* Growable (token, step) list of one stream, for the future pass. */
struct use_list {
    uint32_t *token;
    uint32_t *step;
    size_t n, cap;
};

struct kv_futures {
    struct use_list *lists;  /* (n_streams) */
    struct kv_future *fut;   /* (n_streams) */
    uint32_t **start;        /* (n_streams) arrays of max_len + 1 */
    uint32_t **steps;        /* (n_streams) */
    uint32_t n_streams;
};

void kv_futures_free(struct kv_futures *f)
{
    if (!f)
        return;
    for (uint32_t i = 0; i < f->n_streams; i++) {
        if (f->lists) {
            free(f->lists[i].token);
            free(f->lists[i].step);
        }
        if (f->start)
            free(f->start[i]);
        if (f->steps)
            free(f->steps[i]);
    }
    free(f->lists);
    free(f->fut);
    free(f->start);
    free(f->steps);
    free(f);
}

int kv_futures_create(struct kv_futures **out, uint32_t n_streams, struct alisa_err *e)
{
    struct kv_futures *f = calloc(1, sizeof *f);
    if (f && !(f->lists = calloc(n_streams, sizeof *f->lists))) {
        free(f);
        f = NULL;
    }
    *out = f;
    if (!f)
        return err_set(e, ALISA_ENOMEM, "out of memory for the futures of %u streams", n_streams);
    f->n_streams = n_streams;
    return 0;
}

struct pass {
    const struct replay_config *cfg;
    uint64_t trace_seed;         /* seeds the synthetic extension */
    struct scheduler *scheduler;
    struct replay_totals *tot;   /* NULL in the future pass */
    struct kv_futures *record;   /* non-NULL in the future pass */
    uint64_t *gpu_now, *cpu_now; /* (n_streams) current tier bytes */
    uint64_t gpu_total, cpu_total;
    replay_plan_fn fn;
    void *user;
    uint32_t heads;              /* streams a (sequence, layer) has */
    float *head_row;             /* (max_len) per_head: a KV head's row */
    float *kv_rows;              /* (n_kv_heads, max_len) head-mean streams of a per-head
                                    trace: the layer's KV-head rows, for head recall */
    uint64_t head_steps;         /* (step, KV head) pairs with a head recall */
};

int kv_futures_record(struct kv_futures *f, const struct scheduler_plan *plan)
{
    struct use_list *l = &f->lists[plan->stream];
    if (l->n + plan->n_attended > l->cap) {
        size_t cap = l->cap ? l->cap : 1024;
        while (cap < l->n + plan->n_attended)
            cap *= 2;
        uint32_t *t = realloc(l->token, cap * sizeof *t);
        if (t)
            l->token = t;
        uint32_t *s = realloc(l->step, cap * sizeof *s);
        if (s)
            l->step = s;
        if (!t || !s)
            return ALISA_ENOMEM;
        l->cap = cap;
    }
    for (uint32_t i = 0; i < plan->n_attended; i++) {
        l->token[l->n] = plan->attended[i];
        l->step[l->n++] = plan->pos;
    }
    return 0;
}

static void account(struct pass *ps, const struct scheduler_plan *plan, double recall)
{
    struct replay_totals *t = ps->tot;
    const struct place_result *r = &plan->place;
    if (r->oom) {
        if (!t->oom) {
            t->oom = 1;
            t->oom_cpu = r->oom_cpu;
            t->oom_pos = plan->pos;
        }
        return;
    }
    if (!plan->prefill) {
        t->decode_steps++;
        t->attended_tokens += plan->n_attended;
        t->recall_mean += recall;
        if (recall < t->recall_min)
            t->recall_min = recall;
    }
    t->gpu_misses += r->gpu_misses;
    t->bytes_h2d += r->bytes_h2d;
    t->bytes_d2h += r->bytes_d2h;
    t->loads += r->n_load;
    t->recomputed_tokens += r->n_recompute;
    t->offloads += r->n_offload;
    t->drops += r->n_drop;
    t->retired += plan->n_retired;
    t->bytes_cpu_attend += r->bytes_cpu_attend;
    if (r->n_offload && t->phase2_pos < 0)
        t->phase2_pos = plan->pos;
    if (r->n_drop && t->phase3_pos < 0)
        t->phase3_pos = plan->pos;
    ps->gpu_total += plan->gpu_bytes - ps->gpu_now[plan->stream];
    ps->cpu_total += plan->cpu_bytes - ps->cpu_now[plan->stream];
    ps->gpu_now[plan->stream] = plan->gpu_bytes;
    ps->cpu_now[plan->stream] = plan->cpu_bytes;
    if (ps->gpu_total > t->peak_gpu_bytes)
        t->peak_gpu_bytes = ps->gpu_total;
    if (ps->cpu_total > t->peak_cpu_bytes)
        t->peak_cpu_bytes = ps->cpu_total;
    if (plan->prefill)
        return;
    struct replay_pos *p = &t->per_pos[plan->pos];
    p->streams++;
    p->attended += plan->n_attended;
    p->gpu += plan->census.gpu;
    p->cpu += plan->census.cpu;
    p->dropped += plan->census.dropped;
    p->gone += plan->census.gone;
    p->bytes_h2d += r->bytes_h2d;
    p->bytes_d2h += r->bytes_d2h;
    p->loads += r->n_load;
    p->recomputed += r->n_recompute;
    p->offloads += r->n_offload;
    p->drops += r->n_drop;
    p->misses += r->gpu_misses;
}

/* The share of row's stored mass (n_ctx weights) on plan's attended set.
 * A sparse trace row's residual belongs to unknown tokens, so it counts on
 * neither side. */
static double plan_recall(const struct scheduler_plan *plan, const float *row, uint32_t n_ctx)
{
    double kept = 0, all = 0;
    for (uint32_t i = 0; i < n_ctx; i++)
        all += row[i];
    for (uint32_t i = 0; i < plan->n_attended; i++)
        kept += row[plan->attended[i]];
    return all > 0 ? kept / all : 1.0;
}

/* One decode row of one stream: step, recall, future recording, feedback.
 * kv_rows: the step's n_kv KV-head rows its recall per KV head is taken
 * over, or NULL (none known). */
static int decode_row(struct pass *ps, uint32_t stream, uint32_t pos, const float *row,
                      uint32_t n_ctx, uint32_t seq, uint32_t layer, const float *kv_rows,
                      uint32_t n_kv, struct alisa_err *e)
{
    struct scheduler_plan plan;
    double recall = 1.0;
    int rc = scheduler_step(ps->scheduler, stream, pos, row, &plan);
    if (rc)
        return err_set(e, rc, "sequence %u layer %u position %u: out of memory in the %s "
                       "selection's state", seq, layer, pos, ps->cfg->sel->name);
    if (!plan.place.oom) {
        recall = plan_recall(&plan, row, n_ctx);
        if (ps->tot && kv_rows) {
            for (uint32_t g = 0; g < n_kv; g++) {
                double hr = plan_recall(&plan, kv_rows + (size_t)g * n_ctx, n_ctx);
                ps->tot->head_recall_mean += hr;
                if (hr < ps->tot->head_recall_min)
                    ps->tot->head_recall_min = hr;
                ps->head_steps++;
            }
        }
        if (ps->record && (rc = kv_futures_record(ps->record, &plan)))
            err_set(e, rc, "out of memory recording the future selection");
        scheduler_observe_dense(ps->scheduler, stream, row);
    }
    if (ps->tot)
        account(ps, &plan, recall);
    if (ps->fn)
        ps->fn(ps->user, &plan, seq, layer, row);
    return rc;
}

/* KV head g's row of layer l at step st: the mean of the per-head rows of
 * the query heads that share it, into out. */
static const float *kv_head_row(const struct trace_header *h, const struct trace_step *st,
                                uint32_t l, uint32_t g, float *out)
{
    const uint32_t group = h->n_heads / h->n_kv_heads, n = st->n_ctx;
    const float *q = st->w_head + ((size_t)l * h->n_heads + (size_t)g * group) * n;
    for (uint32_t t = 0; t < n; t++)
        out[t] = q[t];
    for (uint32_t k = 1; k < group; k++)
        for (uint32_t t = 0; t < n; t++)
            out[t] += q[(size_t)k * n + t];
    for (uint32_t t = 0; t < n; t++)
        out[t] /= (float)group;
    return out;
}

/* Continues every sequence shorter than cfg->positions with synthetic rows. */
static int extend_pass(const struct trace_header *h, const uint32_t *seq_len, struct pass *ps,
                       struct alisa_err *e)
{
    const struct replay_config *cfg = ps->cfg;
    uint32_t N = cfg->positions;
    float *row = malloc((size_t)N * sizeof *row);
    if (!row)
        return err_set(e, ALISA_ENOMEM, "out of memory for a %u-token row", N);
    int rc = 0;
    for (uint32_t s = 0; s < h->n_seqs && !rc; s++) {
        if (seq_len[s] >= N)
            continue;
        struct gen_stream **gs = calloc(h->n_layers, sizeof *gs);
        if (!gs) {
            rc = err_set(e, ALISA_ENOMEM, "out of memory for %u synthetic streams", h->n_layers);
            break;
        }
        for (uint32_t l = 0; l < h->n_layers && !rc; l++)
            rc = gen_stream_create(&gs[l], cfg->extend, l, N,
                                   ps->trace_seed + 1 + (uint64_t)s * h->n_layers + l, e);
        for (uint32_t pos = seq_len[s]; pos < N && !rc; pos++)
            for (uint32_t l = 0; l < h->n_layers && !rc; l++) {
                if (pos == seq_len[s]) /* the rows before come from the trace */
                    gen_stream_skip_to(gs[l], pos);
                gen_stream_row(gs[l], pos, row);
                rc = decode_row(ps, s * h->n_layers + l, pos, row, pos + 1, s, l, NULL, 0,
                                e); /* synthetic rows have no heads */
            }
        for (uint32_t l = 0; l < h->n_layers; l++)
            gen_stream_destroy(gs[l]);
        free(gs);
    }
    free(row);
    return rc;
}

static int run_pass(const char *path, struct pass *ps, struct alisa_err *e)
{
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header *h = trace_reader_header(r);
    struct trace_step st;
    struct scheduler_plan plan;
    while ((rc = trace_reader_next(r, &st, e)) == 1) {
        rc = 0;
        if (ps->cfg->positions && st.pos >= ps->cfg->positions)
            continue;
        uint32_t prompt = trace_reader_seq(r, st.seq)->prompt_len;
        for (uint32_t u = 0; u < h->n_layers * ps->heads && !rc; u++) {
            const uint32_t l = u / ps->heads;
            uint32_t stream = st.seq * h->n_layers * ps->heads + u;
            const float *row = ps->heads > 1 ? kv_head_row(h, &st, l, u % ps->heads, ps->head_row)
                                             : st.w + (size_t)l * st.n_ctx;
            if (st.pos < prompt) {
                scheduler_prefill(ps->scheduler, stream, st.pos, row, prompt, &plan);
                if (ps->tot)
                    account(ps, &plan, 1.0);
                if (ps->fn)
                    ps->fn(ps->user, &plan, st.seq, l, row);
            } else {
                /* recall per KV head: per head the stream's own row; else
                 * every KV head's, on a trace that keeps them */
                const float *kv = ps->heads > 1 ? row : NULL;
                uint32_t n_kv = 1;
                if (ps->tot && ps->kv_rows) {
                    n_kv = h->n_kv_heads;
                    for (uint32_t g = 0; g < n_kv; g++)
                        kv_head_row(h, &st, l, g, ps->kv_rows + (size_t)g * st.n_ctx);
                    kv = ps->kv_rows;
                }
                rc = decode_row(ps, stream, st.pos, row, st.n_ctx, st.seq, l, kv, n_kv, e);
            }
        }
        if (rc)
            break;
    }
    if (rc == 0 && ps->cfg->extend && ps->cfg->positions) {
        uint32_t *len = malloc(h->n_seqs * sizeof *len);
        if (!len) {
            rc = err_set(e, ALISA_ENOMEM, "out of memory");
        } else {
            for (uint32_t s = 0; s < h->n_seqs; s++)
                len[s] = trace_reader_seq(r, s)->prompt_len + trace_reader_seq(r, s)->gen_len;
            rc = extend_pass(h, len, ps, e);
            free(len);
        }
    }
    trace_reader_destroy(r);
    return rc < 0 ? rc : 0;
}

/* Turns the recorded (token, step) lists into per-token CSR futures. */
static int build_futures(struct kv_futures *f, uint32_t max_len)
{
    f->fut = calloc(f->n_streams, sizeof *f->fut);
    f->start = calloc(f->n_streams, sizeof *f->start);
    f->steps = calloc(f->n_streams, sizeof *f->steps);
    if (!f->fut || !f->start || !f->steps)
        return ALISA_ENOMEM;
    for (uint32_t s = 0; s < f->n_streams; s++) {
        struct use_list *l = &f->lists[s];
        uint32_t *start = calloc((size_t)max_len + 1, sizeof *start);
        uint32_t *steps = malloc((l->n ? l->n : 1) * sizeof *steps);
        f->start[s] = start;
        f->steps[s] = steps;
        if (!start || !steps)
            return ALISA_ENOMEM;
        for (size_t i = 0; i < l->n; i++)
            start[l->token[i] + 1]++;
        for (uint32_t t = 0; t < max_len; t++)
            start[t + 1] += start[t];
        uint32_t *fill = calloc((size_t)max_len, sizeof *fill);
        if (!fill)
            return ALISA_ENOMEM;
        /* Steps were recorded in increasing order, so each token's list is too. */
        for (size_t i = 0; i < l->n; i++) {
            uint32_t t = l->token[i];
            steps[start[t] + fill[t]++] = l->step[i];
        }
        free(fill);
        f->fut[s] = (struct kv_future){max_len, start, steps};
    }
    return 0;
}

const struct kv_future *kv_futures_build(struct kv_futures *f, uint32_t max_len,
                                         struct alisa_err *e)
{
    if (f->fut || build_futures(f, max_len)) {
        err_set(e, ALISA_ENOMEM, f->fut ? "the futures were built already"
                                        : "out of memory building the future selection");
        return NULL;
    }
    return f->fut;
}

void replay_totals_free(struct replay_totals *tot)
{
    free(tot->per_pos);
    tot->per_pos = NULL;
}

int replay_trace(const char *path, const struct replay_config *cfg, struct replay_totals *tot,
                 replay_plan_fn fn, void *user, struct alisa_err *e)
{
    memset(tot, 0, sizeof *tot);
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header h = *trace_reader_header(r);
    uint32_t max_len = trace_reader_max_len(r);
    const uint32_t trace_max = max_len; /* the longest row the trace holds */
    trace_reader_destroy(r);

    const uint32_t heads = cfg->per_head ? h.n_kv_heads : 1;
    /* KV-head rows can be formed: per-head rows, query heads in whole groups */
    const int grouped = (h.flags & TRACE_FLAG_PER_HEAD) && h.n_kv_heads &&
                        h.n_heads % h.n_kv_heads == 0;
    if (cfg->per_head) {
        if (!(h.flags & TRACE_FLAG_PER_HEAD))
            return err_set(e, ALISA_EINVAL, "%s: per-head streams need per-head rows and the "
                           "trace has none (alisa record --per-head, alisa trace gen --per-head)",
                           path);
        if (!grouped)
            return err_set(e, ALISA_EINVAL, "%s: per-head streams: %u query heads do not group "
                           "over %u KV heads", path, h.n_heads, h.n_kv_heads);
        if (cfg->extend)
            return err_set(e, ALISA_EINVAL, "%s: per-head streams replay the trace's own rows; "
                           "the synthetic extension has no per-head rows", path);
        if (cfg->flexgen_whole && cfg->place->split_sequences)
            return err_set(e, ALISA_EINVAL, "%s: per-head streams: FlexGen's split by whole "
                           "sequences numbers streams by layer", path);
    }
    uint32_t n_streams = h.n_seqs * h.n_layers * heads;
    if (cfg->positions && (cfg->positions < max_len || cfg->extend))
        max_len = cfg->positions;
    struct kv_shape ks = {h.hidden, h.hidden / h.n_heads * h.n_kv_heads, cfg->precision};
    if (cfg->shape) {
        ks = *cfg->shape;
        ks.precision = cfg->precision;
    }
    if (ks.kv_dim == 0)
        return err_set(e, ALISA_EINVAL, "%s: model shape gives no KV (hidden %u, heads %u, kv heads %u)",
                       path, h.hidden, h.n_heads, h.n_kv_heads);
    /* a unit's bytes are whole: its channels, input share and INT4 groups */
    if (heads > 1 && (ks.kv_dim % heads || ks.hidden % heads ||
                      (ks.precision == KV_INT4 && (ks.kv_dim / heads) % KV_INT4_GROUP)))
        return err_set(e, ALISA_EINVAL, "%s: per-head streams: the model's KV width %u (hidden "
                       "%u%s) does not split into the trace's %u KV heads", path, ks.kv_dim,
                       ks.hidden, ks.precision == KV_INT4 ? ", INT4 groups of 64" : "", heads);
    struct scheduler_config sc = {.sel = cfg->sel, .sel_params = cfg->sel_params,
                                  .place = cfg->place, .n_streams = n_streams,
                                  .layers = cfg->every_layer_selects ? 0 : h.n_layers,
                                  .heads = heads, .max_len = max_len};
    struct place_params *pp = &sc.place_params;
    /* the one derivation of a stream's tiers, the executor's too */
    struct tier_storage store = {ks, cfg->inputs_outside, heads};
    uint64_t split = cfg->capacity_streams ? cfg->capacity_streams * heads : n_streams;
    cost_tiers(&store, cfg->hw, cfg->gpu_kv_bytes, cfg->cpu_kv_bytes, split, pp);
    pp->gpu_fraction = cfg->gpu_fraction;
    pp->cpu_attention = cfg->cpu_attention;
    if (cfg->sched) {
        pp->sched = *cfg->sched;
        pp->scheduled = 1;
    }

    tot->n_streams = n_streams;
    tot->heads = heads;
    tot->max_len = max_len;
    tot->kv_bytes = pp->kv_bytes;
    tot->act_bytes = pp->act_bytes;
    tot->gpu_cap_tokens = (uint32_t)(pp->gpu_bytes / pp->kv_bytes > max_len ? max_len : pp->gpu_bytes / pp->kv_bytes);
    tot->cpu_cap_tokens = (uint32_t)(pp->cpu_bytes / pp->kv_bytes > max_len ? max_len : pp->cpu_bytes / pp->kv_bytes);
    tot->load_ns = pp->load_ns;
    tot->recompute_ns = pp->recompute_ns;
    tot->phase2_pos = tot->phase3_pos = -1;
    tot->recall_min = 1.0;
    tot->head_recall_min = 1.0;

    struct kv_futures *fs = NULL;
    const struct kv_future *fut = NULL;
    struct scheduler *s = NULL;
    struct place_params *by_seq = NULL; /* flexgen_whole's per-stream parameters */
    struct pass ps = {.cfg = cfg, .trace_seed = h.seed, .tot = tot, .fn = fn, .user = user,
                      .heads = heads};
    if ((heads > 1 && !(ps.head_row = malloc(trace_max * sizeof *ps.head_row))) ||
        (heads == 1 && grouped &&
         !(ps.kv_rows = malloc((size_t)h.n_kv_heads * trace_max * sizeof *ps.kv_rows)))) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for %u-token rows", trace_max);
        goto done;
    }
    if (cfg->place->offline) {
        /* Pass 1: the selection alone, under a placement that never evicts. */
        struct scheduler_config sc1 = sc;
        sc1.place = &place_gpu_only_ops;
        sc1.place_params.gpu_bytes = (uint64_t)max_len * pp->kv_bytes;
        if ((rc = kv_futures_create(&fs, n_streams, e)))
            goto done;
        if ((rc = scheduler_create(&s, &sc1, NULL, e)))
            goto done;
        struct pass p1 = {.cfg = cfg, .trace_seed = h.seed, .scheduler = s, .record = fs,
                          .heads = heads, .head_row = ps.head_row};
        rc = run_pass(path, &p1, e);
        scheduler_destroy(s);
        s = NULL;
        if (rc)
            goto done;
        if (!(fut = kv_futures_build(fs, max_len, e))) {
            rc = ALISA_ENOMEM;
            goto done;
        }
    }
    tot->per_pos = calloc(max_len, sizeof *tot->per_pos);
    ps.gpu_now = calloc(n_streams, sizeof *ps.gpu_now);
    ps.cpu_now = calloc(n_streams, sizeof *ps.cpu_now);
    if (!tot->per_pos || !ps.gpu_now || !ps.cpu_now) {
        rc = err_set(e, ALISA_ENOMEM, "out of memory for replay totals");
        goto done;
    }
    if (cfg->flexgen_whole && cfg->place->split_sequences) {
        if (!(by_seq = malloc(n_streams * sizeof *by_seq))) {
            rc = err_set(e, ALISA_ENOMEM, "out of memory for %u streams", n_streams);
            goto done;
        }
        cfg->place->split_sequences(pp, h.n_seqs, h.n_layers, max_len, -1, by_seq);
        sc.stream_params = by_seq;
    }
    rc = scheduler_create(&s, &sc, fut, e);
    free(by_seq); /* the scheduler keeps its own copy */
    if (rc)
        goto done;
    ps.scheduler = s;
    rc = run_pass(path, &ps, e);
    tot->fetch_cost_ns = (double)(tot->loads + tot->offloads) * tot->load_ns +
                         (double)tot->recomputed_tokens * tot->recompute_ns;
    if (tot->decode_steps)
        tot->recall_mean /= (double)tot->decode_steps;
    else
        tot->recall_min = 0.0; /* no decode step ran (out of memory in prefill) */
    if (ps.head_steps)
        tot->head_recall_mean /= (double)ps.head_steps;
    else
        tot->head_recall_mean = tot->head_recall_min = NAN;
done:
    scheduler_destroy(s);
    kv_futures_free(fs);
    free(ps.gpu_now);
    free(ps.cpu_now);
    free(ps.head_row);
    free(ps.kv_rows);
    if (rc)
        replay_totals_free(tot);
    return rc;
}

int replay_optimum(const char *path, const struct replay_config *cfg, struct replay_optimum *opt,
                   struct alisa_err *e)
{
    memset(opt, 0, sizeof *opt);
    if (!placement_online_cache(cfg->place))
        return 0;
    const struct placement_ops *bound[2] = {&place_belady_ops, &place_oracle_cost_ops};
    for (int i = 0; i < 2; i++) {
        struct replay_config c = *cfg;
        struct replay_totals t;
        c.place = bound[i];
        int rc = replay_trace(path, &c, &t, NULL, NULL, e);
        if (rc)
            return rc;
        opt->oom |= t.oom;
        if (i == 0) {
            opt->belady_misses = t.gpu_misses;
            opt->belady_fetch_ns = t.fetch_cost_ns;
        } else {
            opt->oracle_fetch_ns = t.fetch_cost_ns;
        }
        replay_totals_free(&t);
    }
    opt->compared = 1;
    return 0;
}

int replay_extension_params(const char *path, struct trace_gen_params *ext, struct alisa_err *e)
{
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    const struct trace_header h = *trace_reader_header(r);
    trace_reader_destroy(r);
    struct trace_stats *ts;
    if ((rc = trace_stats_from_file(path, &ts, NULL, e)))
        return rc;
    trace_gen_defaults(ext);
    ext->n_layers = h.n_layers;
    ext->n_heads = h.n_heads;
    ext->n_kv_heads = h.n_kv_heads;
    ext->hidden = h.hidden;
    ext->vocab = h.vocab;
    /* each layer's own target, as a profile with a knot per layer (the
     * generator reads layer l at knot l); beyond the profile's knots, the
     * line between the first and last layers */
    struct sparsity_summary s, first, last;
    trace_stats_summary(ts, 0, &first);
    trace_stats_summary(ts, h.n_layers - 1, &last);
    if (first.rows && last.rows) {
        ext->sparsity_first = first.mean < 0.999 ? first.mean : 0.999;
        ext->sparsity_last = last.mean < 0.999 ? last.mean : 0.999;
    }
    if (h.n_layers >= 2 && h.n_layers <= TRACE_GEN_PROFILE_MAX) {
        ext->n_profile = h.n_layers;
        for (uint32_t l = 0; l < h.n_layers; l++) {
            trace_stats_summary(ts, l, &s);
            double v = s.rows ? s.mean : ext->sparsity_first;
            ext->profile[l] = v < 0.999 ? v : 0.999;
        }
    }
    trace_stats_destroy(ts);
    return 0;
}
